/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * eventq/eq_impl.h - private layout of event queues and events, shared by eq.c (the queue:
 * create, destroy, poll, query, progress hook, sleeping) and event.c (the event: init, fini,
 * launch, complete, test, parent/child). Nothing outside eventq/ includes this file.
 *
 * The concurrency design (invariants, memory orders, progress guarantees) is described once,
 * at the top of eq.c.
 */
#ifndef COFFER_EQ_IMPL_H
#define COFFER_EQ_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <coffer/event.h>
#include <coffer/hash.h>

#include "eventq/event_internal.h"

#define COFFER__EQ_CACHELINE 64

#define COFFER__CONTAINER_OF(ptr, type, member)                                                    \
	((type *)(void *)((char *)(ptr)-offsetof(type, member)))

/*
 * The EQ's state word packs the counters that launch, complete, poll and destroy must see
 * change together (one atomic read is a consistent snapshot; one compare-and-swap decides
 * destroy against every concurrent launch):
 *   bits  0..30  events RUNNING on this EQ (top-level events and parents, not children)
 *   bits 32..62  events COMPLETED and not yet reaped (counted before they are pushed)
 *   bit  63      CLOSING: destroy has begun; launches fail, polls return -ENOENT
 */
#define COFFER__EQW_RUNNING_MASK    0x7fffffffull
#define COFFER__EQW_COMPLETED_SHIFT 32
#define COFFER__EQW_COMPLETED_ONE   (1ull << COFFER__EQW_COMPLETED_SHIFT)
#define COFFER__EQW_COMPLETED_MASK  (0x7fffffffull << COFFER__EQW_COMPLETED_SHIFT)
#define COFFER__EQW_CLOSING	    (1ull << 63)

static inline uint32_t coffer__eqw_running(uint64_t w)
{
	return (uint32_t)(w & COFFER__EQW_RUNNING_MASK);
}

static inline uint32_t coffer__eqw_completed(uint64_t w)
{
	return (uint32_t)((w & COFFER__EQW_COMPLETED_MASK) >> COFFER__EQW_COMPLETED_SHIFT);
}

/* Link of Vyukov's intrusive multi-producer single-consumer queue. */
struct coffer__mpsc_node {
	_Atomic(struct coffer__mpsc_node *) next;
};

/* Event states (ep_state). */
enum coffer__ev_state {
	COFFER__EVS_READY = 0,
	COFFER__EVS_RUNNING = 1,
	COFFER__EVS_OWN_DONE = 2, /* parent: its own operation completed, children still running */
	COFFER__EVS_COMPLETED = 3,
};

#define COFFER__EV_MAGIC 0xc0ffe7e5u

/*
 * The runtime's part of struct coffer_event (lives in ev_private[]).
 *
 * Ownership of the fields:
 *  - ep_qnode: the EQ's MPSC queue while the event is queued;
 *  - ep_rl_*, ep_on_reaplist: the EQ's reap lock;
 *  - ep_parent, ep_child_first, ep_sib_*, ep_nchild: the caller, who must not run init/fini
 *    of a parent's children concurrently with each other or with the parent's launch/fini
 *    (as in DAOS, "it's user's responsibility to protect this list");
 *  - ep_state, ep_holds, ep_err: atomics, see eq.c;
 *  - the rest is written by init and read-only afterwards.
 */
struct coffer__evp {
	struct coffer__mpsc_node ep_qnode;
	struct coffer__evp *ep_rl_next;
	struct coffer__evp *ep_rl_prev;
	struct coffer_eq *ep_eq; /* cached EQ; top-level events hold a reference on it */
	struct coffer__evp *ep_parent;
	struct coffer__evp *ep_child_first;
	struct coffer__evp *ep_sib_next;
	struct coffer__evp *ep_sib_prev;
	const void *ep_self; /* == the event: tells an initialised event from garbage or a copy */
	_Atomic uint32_t ep_state;
	uint32_t ep_magic;
	_Atomic int32_t ep_holds; /* 1 (own operation) + children launched and not completed */
	_Atomic int32_t ep_err;	  /* first error of this round (own operation or a child) */
	uint32_t ep_nchild;
	uint8_t ep_on_reaplist;
	/* top-level events: links in the EQ's registry (eq_reg_lock), for listing running ones */
	struct coffer__evp *ep_reg_next;
	struct coffer__evp *ep_reg_prev;
};

_Static_assert(sizeof(struct coffer__evp) <= sizeof(((struct coffer_event *)0)->ev_private),
	       "struct coffer__evp must fit in coffer_event.ev_private");

static inline struct coffer__evp *coffer__evp(struct coffer_event *ev)
{
	return (struct coffer__evp *)(void *)ev->ev_private;
}

static inline struct coffer_event *coffer__evp_event(struct coffer__evp *ep)
{
	return COFFER__CONTAINER_OF((void *)ep, struct coffer_event, ev_private);
}

static inline bool coffer__evp_valid(struct coffer_event *ev)
{
	const struct coffer__evp *ep = coffer__evp(ev);

	return ep->ep_magic == COFFER__EV_MAGIC && ep->ep_self == (const void *)ev;
}

/* A sleeper a reap can satisfy (coffer__eq_sleep() with reap_wakes: a tester, a wait_running
 * poller), on its EQ's eq_wait_head list while it sleeps, with a wake fd of its own that a
 * reap writes (eq_wake_waiters()). */
struct coffer__eq_waiter {
	struct coffer__eq_waiter *ew_next;
	struct coffer__eq_waiter *ew_prev;
	int ew_fd; /* eventfd, the sleeper's own */
};

/* An event queue. Fields are grouped by who writes them, one cache line per group. */
struct coffer_eq {
	/* read-mostly: written at create, destroy and free */
	struct coffer_hlink eq_link;
	struct coffer_hhash *eq_hh;
	coffer_handle_t eq_handle;
	int eq_fd;				       /* eventfd: sleeping pollers wait on it */
	_Atomic(struct coffer__eq_progress *) eq_hook; /* RCU-protected */
	struct coffer_eq *eq_all_next; /* every allocated EQ, for fork (eq.c, eq_all_mu) */
	struct coffer_eq *eq_all_prev;

	/* producers (complete): exchange on every push */
	_Alignas(COFFER__EQ_CACHELINE) _Atomic(struct coffer__mpsc_node *) eq_qhead;

	/* launch, complete, reap, destroy: one RMW each */
	_Alignas(COFFER__EQ_CACHELINE) _Atomic uint64_t eq_word;

	/* pollers about to sleep; completions read it */
	_Alignas(COFFER__EQ_CACHELINE) _Atomic uint32_t eq_sleepers;
	/* those of them that a reap can satisfy (testers, wait_running pollers); reaps read it */
	_Atomic uint32_t eq_waiters;
	_Atomic bool eq_rung; /* the wake fd was written since the last drain */

	/* consumers (poll, test, fini, destroy) under eq_reap_lock */
	_Alignas(COFFER__EQ_CACHELINE) pthread_mutex_t eq_reap_lock;
	struct coffer__mpsc_node *eq_qtail;
	struct coffer__mpsc_node eq_stub;
	struct coffer__evp *eq_rl_head; /* events taken from the MPSC queue but not yet reaped */
	struct coffer__evp *eq_rl_tail;

	/* event init and fini, query: the top-level events initialised on this EQ. Launch and
	 * complete never touch it; it only lets coffer_eq_query() list running events. */
	_Alignas(COFFER__EQ_CACHELINE) pthread_mutex_t eq_reg_lock;
	struct coffer__evp *eq_reg_head;

	/* the eq_waiters sleepers that have a wake fd of their own, under eq_wait_lock */
	_Alignas(COFFER__EQ_CACHELINE) pthread_mutex_t eq_wait_lock;
	struct coffer__eq_waiter *eq_wait_head;
};

/* ---- used by event.c, defined in eq.c ------------------------------------------------- */

/* Look @eqh up in the process handle hash and take a reference.
 * Return: 0; -EINVAL (runtime not initialised, null or non-EQ handle); -ENOENT. */
int coffer__eq_get(coffer_handle_t eqh, struct coffer_eq **eqp);
void coffer__eq_put(struct coffer_eq *eq);

/* Add (remove) a top-level event to (from) the EQ's registry; at init (fini). */
void coffer__eq_register(struct coffer_eq *eq, struct coffer__evp *ep);
void coffer__eq_unregister(struct coffer_eq *eq, struct coffer__evp *ep);

/* Make a finished top-level event pollable: count it, push it, wake sleepers. */
void coffer__eq_publish(struct coffer_eq *eq, struct coffer__evp *ep);
/* The same for the @k top-level events first..last, linked through ep_qnode.next by the
 * caller (all on @eq): one count update, one push of the whole chain, one wake-up check
 * (coffer__event_complete_vec()). */
void coffer__eq_publish_chain(struct coffer_eq *eq, struct coffer__evp *first,
			      struct coffer__evp *last, unsigned int k);

/* Ring the wake fd when pollers sleep (after a state-word RMW the sleepers must see). */
void coffer__eq_wake_sleepers(struct coffer_eq *eq);

/* Take @ep out of the EQ's queue if it is there and visible; true when taken. */
bool coffer__eq_take_event(struct coffer_eq *eq, struct coffer__evp *ep);

/* Run the EQ's progress hook, if one is attached (enters an RCU read-side section). */
void coffer__eq_progress(struct coffer_eq *eq);

/* Sleep on the EQ's wake fd until woken, @deadline (NULL: none) passes, or @cond(arg, word)
 * is already true; see eq.c for the protocol. @reap_wakes: @cond can become true through a
 * reap (a tester's event reaped by a poller, a wait_running poller's EQ going idle), so
 * reaps must wake this sleeper. Never called inside a read-side section. */
void coffer__eq_sleep(struct coffer_eq *eq, const struct timespec *deadline,
		      bool (*cond)(void *arg, uint64_t word), void *arg, bool reap_wakes);

/* Absolute CLOCK_MONOTONIC deadline @timeout_us from now (> 0). */
void coffer__eq_deadline(struct timespec *ts, int64_t timeout_us);
bool coffer__eq_deadline_passed(const struct timespec *ts);

/* Return a reaped event (and its children) to READY; called by the one thread that took it
 * out of the queue. */
void coffer__ev_reaped(struct coffer__evp *ep);

#endif /* COFFER_EQ_IMPL_H */
