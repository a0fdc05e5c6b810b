/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * coffer/event.h - event queues (EQ) and events, with DAOS semantics.
 *
 * An asynchronous operation is launched with an event that belongs to at most one EQ; the
 * caller reaps it by polling that EQ (or testing the event). States:
 * READY -> RUNNING (launched) -> COMPLETED -> READY (after it was returned by poll or test).
 * The operation's result is in ev_error (0 or a negative errno).
 *
 * There is no coffer_event_abort() (DAOS's daos_event_abort()), by design: a request in
 * the store's ring cannot be taken back, so a launched event always completes with its
 * request's answer. To end what waits: a get waiting for a seal ends at its timeout, at
 * the seal, or at coffer_disconnect() (-ENOTCONN); an unsealed create is discarded with
 * coffer_obj_abort() (launched after it on the same EQ, it is ordered after it, coffer/store.h
 * "Order"); coffer_eq_destroy(COFFER_EQ_FORCE) waits for running events instead of aborting
 * them.
 *
 * Source: DAOS daos_eq_create/daos_eq_poll/daos_event_init (src/client/api/event.c).
 */
#ifndef COFFER_EVENT_H
#define COFFER_EVENT_H

#include <coffer/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * An event. The caller owns its memory (embed it in your I/O descriptor); ev_private is the
 * runtime's and must not be touched between coffer_event_init() and coffer_event_fini().
 * ev_error is written once per completion, before the event can be polled, and reset to 0
 * at launch: a result never leaks into the next use.
 */
struct coffer_event {
	int ev_error; /* result of the last completed operation: 0 or -errno */
	uint32_t ev_pad;
	uint64_t ev_private[22]; /* runtime state (see eventq/event_internal.h) */
};

/* coffer_eq_destroy() flags */
#define COFFER_EQ_FORCE 0x1u /* drain (wait for) running events and discard completed ones */

/* coffer_eq_query() query bits */
#define COFFER_EQR_COMPLETED 0x1u
#define COFFER_EQR_RUNNING   0x2u
#define COFFER_EQR_ALL	     (COFFER_EQR_COMPLETED | COFFER_EQR_RUNNING)

/*
 * Common to the functions below.
 *  - The runtime must be running: coffer_init() called and not yet balanced by coffer_fini(),
 *    or a connection open (coffer_connect() holds a reference of its own until
 *    coffer_disconnect()). Otherwise every function that takes an EQ handle or initialises
 *    an event returns -EINVAL ("not initialised" below).
 *  - An EQ handle is null or of another type: -EINVAL; destroyed or never issued: -ENOENT.
 *  - None of them may be called inside an RCU read-side section of the caller's, nor from
 *    inside an EQ's progress hook (see eventq/event_internal.h), unless stated otherwise.
 *  - Several threads may use one EQ at once: launch and complete take no lock and do not
 *    look the EQ up (the event caches it); poll looks it up without writing shared memory
 *    and reaps under a per-EQ lock held only while unlinking events.
 */

/**
 * coffer_eq_create() - create an event queue.
 * @eqh: out: the EQ's handle (cookie never reused in this process).
 *
 * The EQ owns an eventfd its sleeping pollers wait on (one file descriptor per EQ). A
 * fork() child's copy of the EQ gets an eventfd of its own under the same fd number, so
 * that neither process's pollers take the other's wakeups; the child can poll, test and
 * finalise the events it inherited and destroy the EQ.
 * Return: 0; -EINVAL (@eqh NULL, or the runtime not initialised); -ENOMEM; -EMFILE/-ENFILE
 *         (no file descriptor for the eventfd); -ENOSPC (this process has issued all its
 *         2^60 handle cookies: no new handle of any kind, coffer/hash.h).
 * Context: any thread.
 * Lifetime: until coffer_eq_destroy() succeeds; events still initialised on it keep its
 *         memory (not its handle) alive until they are finalised.
 * Source: DAOS daos_eq_create().
 */
COFFER_API int coffer_eq_create(coffer_handle_t *eqh);

/**
 * coffer_eq_destroy() - destroy an event queue.
 * @eqh: the EQ.
 * @flags: 0, or COFFER_EQ_FORCE: wait until every running event has completed (driving the
 *         progress hook and sleeping, never spinning), then discard every completed event
 *         that was not polled: each goes back to READY with its ev_error set, unreturned.
 *
 * Launches racing with a successful destroy fail with -ENOENT; pollers sleeping on the EQ
 * wake and return -ENOENT. Once this returns the EQ's progress hook is detached and is never
 * called again. Events initialised on the EQ stay initialised: launching them fails with
 * -ENOENT, coffer_event_fini() still works (and is still required).
 * Return: 0; -EBUSY (without COFFER_EQ_FORCE: events running, or completed and not yet
 *         polled; nothing changed); -ENOENT (destroyed, being destroyed by another thread,
 *         or never issued); -EINVAL (bad handle, unknown @flags bit, not initialised).
 * Context: any thread; not inside a read-side section or a progress hook (it may wait for a
 *         grace period). With COFFER_EQ_FORCE it blocks until the running events complete;
 *         something must complete them (the progress hook, or other threads).
 * Source: DAOS daos_eq_destroy() (whose FORCE aborts; coffer cannot abort a store request,
 *         so it drains).
 */
COFFER_API int coffer_eq_destroy(coffer_handle_t eqh, unsigned int flags);

/**
 * coffer_eq_poll() - reap completed events.
 * @eqh: the EQ.
 * @wait_running: nonzero: return 0 at once when no event is running on the EQ (and none is
 *         waiting to be polled), instead of waiting for the timeout.
 * @timeout_us: 0: do not wait; < 0: wait until an event completes; > 0: wait at most this
 *         many microseconds. Waiting first busy-polls the EQ's channels for up to
 *         COFFER_POLL_SPIN_US (default 50), only while the store is awake on them, then
 *         sleeps on the EQ's eventfd (ppoll).
 * @n: capacity of @events, >= 1.
 * @events: out: the completed events, oldest first; each is READY again, its result in
 *         ev_error. Each completion is returned exactly once, to exactly one poller (or to
 *         coffer_event_test()).
 *
 * Every attempt first calls the EQ's progress hook (the runtime's IPC channel completes
 * events from it).
 * Return: the number of events stored (0 on timeout, never a stale event); -EINVAL (@n 0,
 *         @events NULL, bad handle, not initialised); -ENOENT (destroyed, never issued, or
 *         destroyed while this call waited: by coffer_eq_destroy(), or by the last
 *         coffer_fini(), which closes every EQ left, see coffer/common.h).
 * Context: any thread; any number of threads may poll one EQ concurrently. Not a
 *         cancellation point (coffer/common.h): a thread cancelled while it sleeps here is
 *         cancelled after the call returns (timeout, completion, destroy).
 * Source: DAOS daos_eq_poll().
 */
COFFER_API int coffer_eq_poll(coffer_handle_t eqh, int wait_running, int64_t timeout_us,
			      unsigned int n, struct coffer_event **events);

/**
 * coffer_eq_query() - count (or list) an EQ's events.
 * @eqh: the EQ.
 * @query: COFFER_EQR_COMPLETED, COFFER_EQR_RUNNING or both (COFFER_EQR_ALL).
 * @n, @events: when @events is NULL or @n is 0: return the sum of the selected counts.
 *         Otherwise list up to @n events, without reaping any: first the completed, not yet
 *         polled ones (COFFER_EQR_COMPLETED), oldest first, then the running ones
 *         (COFFER_EQR_RUNNING, including a parent whose children still run), newest
 *         initialised first. A listed event may complete or be reaped right after.
 *
 * The counts are one consistent snapshot (one atomic word), stale as soon as returned; a
 * list is a snapshot of each event's state, taken under a lock that only event init/fini
 * and this call take (launch and completion stay lock-free).
 * Children are counted and listed with their parent, not on their own.
 * This call does not run the EQ's progress hook, which is what takes the store's answers
 * off a channel (coffer_eq_poll() and coffer_event_test() run it): an operation the store
 * has already answered still counts, and is listed, as running until one of them has.
 * Return: a count >= 0 (events stored when listing); -EINVAL (@query 0 or unknown bits, bad
 *         handle, not initialised); -ENOENT.
 * Context: any thread. Source: DAOS daos_eq_query() (DAOS_EQR_COMPLETED / _WAITING).
 */
COFFER_API int coffer_eq_query(coffer_handle_t eqh, unsigned int query, unsigned int n,
			       struct coffer_event **events);

/**
 * coffer_event_init() - initialise an event, on an EQ or as a child of a parent event.
 * @ev: the event (caller's memory, never-initialised memory is fine). An event that is
 *         already initialised and not running is finalised first (re-initialisation); "not
 *         running" includes COMPLETED: a completion not yet polled is taken off its EQ and
 *         never returned by a poll, its ev_error left as it was (only a RUNNING event is
 *         -EBUSY, unlike a relaunch, which needs READY).
 * @eqh: the EQ the event completes on. Ignored for a child (COFFER_HANDLE_NULL or the
 *         parent's EQ accepted; another EQ is -EINVAL).
 * @parent: NULL, or an initialised, READY event that is not itself a child. The child shares
 *         the parent's EQ, is never returned by poll itself and does not count on the EQ;
 *         the parent completes when its own operation and all children launched in this
 *         round have, with ev_error = the first error among them; children go back to READY
 *         when the parent is reaped. A parent launches (an operation of its own, or
 *         coffer_event_parent_barrier()) only once every child is launched or completed:
 *         while one is READY the launch fails with -EINVAL, nothing sent. So an event with
 *         children cannot also carry the calls that come before them (e.g. the reserve
 *         whose blocks the children's puts fill): give those an event of their own (DAOS).
 *
 * Return: 0; -EINVAL (@ev NULL, not initialised runtime, bad handle, @parent not initialised
 *         / a child / @ev itself / on another EQ); -ENOENT (EQ destroyed or never issued);
 *         -EBUSY (@ev is running, or @parent is not READY; or, re-initialising, what
 *         coffer_event_fini() of @ev refuses: a child of @ev running, or @ev a child whose
 *         parent is not READY).
 * Context: any thread. Initialising or finalising children of one parent must not run
 *         concurrently with each other or with that parent's launch or fini (as in DAOS).
 * Lifetime: the event holds a reference on its EQ's memory until coffer_event_fini(); the
 *         event's memory must stay valid (and not be copied) until then. Memory that held an
 *         initialised event must be finalised before it is freed or reused.
 * Source: DAOS daos_event_init().
 */
COFFER_API int coffer_event_init(struct coffer_event *ev, coffer_handle_t eqh,
				 struct coffer_event *parent);

/**
 * coffer_event_fini() - finalise an event (and, for a parent, all its children).
 * @ev: an initialised event. A completed event not yet polled is taken off its EQ first.
 *
 * Return: 0; -EINVAL (not initialised, or already finalised); -EBUSY (running; a child of
 *         it is running; or @ev is a child whose parent is not READY).
 * Context: any thread (see coffer_event_init() on children).
 * Lifetime: after 0 the caller may free @ev (and the finalised children).
 */
COFFER_API int coffer_event_fini(struct coffer_event *ev);

/**
 * coffer_event_test() - has an event completed? Reaps it if so.
 * @ev: an initialised event that is not a child.
 * @timeout_us: 0: do not wait; < 0: wait until it completes; > 0: at most this long
 *         (sleeping on the EQ's eventfd, driving the EQ's progress hook).
 * @done: out: true when @ev is READY: it completed and this call took it off its EQ (its
 *         result in ev_error), or it was not in flight at all (never launched, or reaped
 *         already, e.g. by a poller: do not poll and test the same event from two threads).
 *
 * Return: 0 (see @done); -EINVAL (@ev not initialised or a child, @done NULL).
 * Context: any thread. Not a cancellation point (coffer/common.h), as coffer_eq_poll().
 * Source: DAOS daos_event_test().
 */
COFFER_API int coffer_event_test(struct coffer_event *ev, int64_t timeout_us, bool *done);

/**
 * coffer_event_parent_barrier() - launch a parent as a barrier for its children.
 * @ev: a READY parent whose children have all been launched (or have completed).
 *
 * The parent has no operation of its own: it completes (and becomes pollable) when every
 * child launched before this call has completed; at once if they all have already.
 * Return: 0; -EINVAL (not initialised, a child, no children, a child not launched yet);
 *         -EBUSY (not READY); -ENOENT (its EQ was destroyed).
 * Context: any thread. Source: DAOS daos_event_parent_barrier().
 */
COFFER_API int coffer_event_parent_barrier(struct coffer_event *ev);

#ifdef __cplusplus
}
#endif

#endif /* COFFER_EVENT_H */
