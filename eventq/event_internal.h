/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * eventq/event_internal.h - what lower layers (runtime/, the IPC channel) use of the event
 * queues. eventq/ knows nothing of IPC: the runtime registers a progress hook per EQ, and
 * poll calls it.
 */
#ifndef COFFER_EVENT_INTERNAL_H
#define COFFER_EVENT_INTERNAL_H

#include <coffer/event.h>

/*
 * coffer__event_launch() - READY -> RUNNING; counts the event as running on its EQ.
 * Return: 0; -EBUSY when the event is not READY (for a child: also when its parent is not
 * READY, children are launched before their parent); -ENOENT when its EQ was destroyed;
 * -EINVAL when @ev was never initialised, or is a parent with a child not launched yet.
 * Resets ev_error to 0. Takes no lock and does not look the EQ up (one atomic RMW on it).
 * Context: any thread; not inside an RCU read-side section.
 */
int coffer__event_launch(struct coffer_event *ev);

/*
 * coffer__event_complete() - RUNNING -> COMPLETED with result @rc (0 or -errno); makes the
 * event pollable on its EQ (and completes its parent when it was the last child), and wakes
 * pollers that sleep.
 * A completion of an event that is not RUNNING (never launched, a launch that failed, or a
 * second completion) is ignored. Wait-free except for one eventfd write(2) when a poller
 * sleeps; takes no lock. After it returns the event may already be reaped and reused.
 * Context: any thread, including from inside a progress hook called by poll, and inside or
 * outside an RCU read-side section.
 */
void coffer__event_complete(struct coffer_event *ev, int rc);

/*
 * coffer__event_complete_vec() - coffer__event_complete(@evs[i], @rcs[i]) for i < @n, with
 * the events that are neither parents nor children published on their EQ in runs: each run
 * of consecutive events on one EQ costs one count update, one queue push and one wake-up
 * check instead of one each per event (the IPC channel completes a reply ring's worth at a
 * time, every event of a channel on the channel's EQ). The events of a run become pollable
 * together, in order, once the last of them is completed. Same guarantees and context as
 * coffer__event_complete(); @evs entries may be NULL (skipped).
 */
void coffer__event_complete_vec(struct coffer_event *const *evs, const int *rcs, unsigned int n);

/*
 * Progress hook of an EQ (the runtime attaches the IPC channel of that EQ). All three run
 * under no EQ lock; several pollers may call them concurrently (the hook serialises itself).
 * They run inside an RCU read-side section (that is how detaching waits for them): they must
 * not block, wait for a grace period (synchronize_rcu, rcu_barrier, coffer_fini), detach the
 * hook or destroy the EQ. They may complete events (coffer__event_complete()).
 * disarm() follows every arm() (whatever it returned) while the hook is still attached.
 */
/* arm()'s answer: replies are waiting for this poller's progress(); do not yield. */
#define COFFER__ARM_READY 2

struct coffer__eq_progress {
	/* Drain whatever completed; never blocks. Return events completed (>= 0) or -errno
	 * (a dead peer: the hook has completed every pending event with an error already). */
	int (*progress)(void *arg);
	/* Called before a poller sleeps on the EQ's wake fd: ask the peer to ring the doorbell
	 * (write the wake fd) on its next reply. Return 0 when sleeping is safe, > 0 when work
	 * arrived meanwhile (do not sleep): COFFER__ARM_READY when this poller found replies
	 * itself (say, by busy-polling) and should run progress() again at once; any other
	 * positive value when the work may be another poller's (the poller yields its core). */
	int (*arm)(void *arg);
	/* Called after the poller woke: the doorbell is no longer needed. */
	void (*disarm)(void *arg);
	/* Optional: called once, after the hook was detached (set_progress(NULL), destroy, or
	 * the EQ's memory freed with it attached) and a grace period passed, so that no thread
	 * is inside progress(), arm() or disarm() any more, nor can enter them: the owner of
	 * @arg may free it then (and not before: a destroy draining with COFFER_EQ_FORCE
	 * still sleeps through the hook). Not called for a hook that was never attached. */
	void (*release)(void *arg);
	void *arg;
};

/*
 * coffer__eq_set_progress() - attach (or with @p == NULL detach) the progress hook.
 * @p is copied. Detaching waits for a grace period when a hook was attached: once it
 * returns, the old hook is never called again (coffer_eq_destroy() detaches the same way).
 * Return: 0, -ENOENT (no such EQ, or being destroyed), -EBUSY (a hook is already attached),
 * -EINVAL (@p->progress NULL, bad handle), -ENOMEM.
 * Context: any thread; not inside an RCU read-side section, not from inside the hook.
 */
int coffer__eq_set_progress(coffer_handle_t eqh, const struct coffer__eq_progress *p);

/*
 * coffer__eq_wake_fd() - the eventfd (EFD_NONBLOCK | EFD_CLOEXEC) that sleeping pollers of
 * @eqh wait on; the runtime hands a duplicate to the store as the reply doorbell. Writing it
 * wakes every sleeping poller of the EQ; pollers drain it.
 * Return: fd >= 0, or -ENOENT (destroyed or being destroyed), -EINVAL (bad handle).
 * Lifetime: the EQ closes it when its memory is freed (after destroy and the last event's
 * fini): dup() it to keep it longer.
 */
int coffer__eq_wake_fd(coffer_handle_t eqh);

/*
 * coffer__eq_kick() - wake every poller sleeping on @eqh, so that each calls the progress
 * hook and arms it again. For a hook whose work grew while pollers slept (the runtime's
 * binding gained a channel): what a poller armed before the change does not cover it. A
 * poller about to sleep finds the eventfd readable and does not sleep.
 * Return: 0, -ENOENT (no such EQ), -EINVAL (bad handle).
 * Context: any thread; not inside an RCU read-side section (it may take a reference).
 */
int coffer__eq_kick(coffer_handle_t eqh);

/*
 * coffer__eq_close_hash() - the last coffer_fini() stops the runtime whose handle hash is
 * @hh: mark every EQ created in it CLOSING, as coffer_eq_destroy() does, and wake the
 * pollers sleeping on them (they return -ENOENT). Without this a poller sleeping with no
 * timeout on an EQ its program never destroyed slept for good: the drain releases the EQ's
 * handle, so no later call can reach the EQ to destroy it or complete anything on it.
 * Launches on those EQs then fail with -ENOENT; events on them can still be tested and
 * finalised. The hook stays attached (the EQ's free releases it).
 * Context: runtime/init.c only, after @hh was unpublished and before it is destroyed; takes
 * the EQ list's lock (a leaf here) and writes eventfds; not inside a read-side section.
 */
struct coffer_hhash;
void coffer__eq_close_hash(const struct coffer_hhash *hh);

/*
 * Fork handlers of the event queues, called by runtime/rcu.c in its fixed order (after the
 * call_rcu workers are parked: an EQ's free, which may run in a callback, takes the list
 * lock): prepare takes the EQ list's lock and every EQ's reap and registry locks, parent
 * releases them, child re-initialises them. Context: the atfork handlers only.
 */
void coffer__eq_atfork_prepare(void);
void coffer__eq_atfork_parent(void);
void coffer__eq_atfork_child(void);

#endif /* COFFER_EVENT_INTERNAL_H */
