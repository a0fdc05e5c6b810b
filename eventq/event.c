/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * eventq/event.c - events: init, fini, launch, complete, test, parent/child and barrier.
 *
 * Design note
 * -----------
 * An event moves READY -> RUNNING -> COMPLETED -> READY; every transition that two threads
 * could attempt at once is a compare-and-swap on ep_state, so a double launch gets -EBUSY
 * and a double (or late) completion is ignored. The queue side (who may see a COMPLETED
 * event, how sleepers are woken) is described in eq.c.
 *
 * Parents (DAOS semantics, src/client/api/event.c): children are initialised with the
 * parent and share its EQ; they are never queued on the EQ themselves and do not count as
 * running there. A parent completes when its own operation and every child launched in this
 * round have completed; it must be launched after all its children. ep_holds counts what
 * the parent still waits for: 1 for its own operation (from init, and again from each reap)
 * plus one per child launched and not completed. Whoever brings it to 0 (the parent's own
 * completion, or the last child) finalises the parent: sets ev_error to the first error of
 * the round (ep_err, first writer wins by CAS) and publishes it on the EQ. A barrier is a
 * parent whose own operation completes at once, at launch: it completes when the children
 * launched before it have. Children return to READY when their parent is reaped.
 *
 * Memory ordering: the decrements of ep_holds are acq_rel RMWs, so the thread that reaches 0
 * sees every child's writes (ev_error, ep_err) through the release sequence; the push in
 * coffer__eq_publish() then releases them to the reaper. The reaper's release store of
 * READY pairs with the acquire CAS in launch, so a relaunch sees the reset ep_holds/ep_err.
 * ev_error is reset at launch and written once per completion, before the event is
 * published: an error never leaks into the next use.
 *
 * Children lists (ep_child_first, ep_sib_*) change only in init/fini, which the caller must
 * not run concurrently for children of one parent (as in DAOS).
 */
#include <errno.h>
#include <sched.h>
#include <string.h>

#include "eventq/eq_impl.h"

/* ---- helpers ------------------------------------------------------------------------------ */

static void child_link(struct coffer__evp *parent, struct coffer__evp *child)
{
	child->ep_parent = parent;
	child->ep_sib_prev = NULL;
	child->ep_sib_next = parent->ep_child_first;
	if (parent->ep_child_first != NULL)
		parent->ep_child_first->ep_sib_prev = child;
	parent->ep_child_first = child;
	parent->ep_nchild++;
}

static void child_unlink(struct coffer__evp *parent, struct coffer__evp *child)
{
	if (child->ep_sib_prev != NULL)
		child->ep_sib_prev->ep_sib_next = child->ep_sib_next;
	else
		parent->ep_child_first = child->ep_sib_next;
	if (child->ep_sib_next != NULL)
		child->ep_sib_next->ep_sib_prev = child->ep_sib_prev;
	child->ep_sib_next = child->ep_sib_prev = NULL;
	child->ep_parent = NULL;
	parent->ep_nchild--;
}

static void ev_invalidate(struct coffer__evp *ep)
{
	ep->ep_magic = 0;
	ep->ep_self = NULL;
	ep->ep_eq = NULL;
	/* relaxed: init/fini run on an idle event that no other thread may touch */
	atomic_store_explicit(&ep->ep_state, COFFER__EVS_READY, memory_order_relaxed);
}

/* Record the first error of this round. */
static void note_error(struct coffer__evp *ep, int rc)
{
	int32_t none = 0;

	/* relaxed: read only by the finaliser, after the acq_rel decrement of ep_holds */
	if (rc != 0)
		atomic_compare_exchange_strong_explicit(&ep->ep_err, &none, rc,
							memory_order_relaxed, memory_order_relaxed);
}

/* The parent's holds reached 0: it is complete. */
static void parent_finalise(struct coffer__evp *ep)
{
	coffer__evp_event(ep)->ev_error = atomic_load_explicit(&ep->ep_err, memory_order_relaxed);
	/* relaxed: published by the seq_cst RMW and the push in coffer__eq_publish() */
	atomic_store_explicit(&ep->ep_state, COFFER__EVS_COMPLETED, memory_order_relaxed);
	coffer__eq_publish(ep->ep_eq, ep);
}

static void parent_release(struct coffer__evp *ep)
{
	/* acq_rel: release our writes (child ev_error, ep_err) to whoever reaches 0; acquire
	 * everyone else's when we do. */
	if (atomic_fetch_sub_explicit(&ep->ep_holds, 1, memory_order_acq_rel) == 1)
		parent_finalise(ep);
}

/* The parent's own operation completed (RUNNING -> OWN_DONE). */
static void parent_own_done(struct coffer__evp *ep, int rc)
{
	uint32_t expect = COFFER__EVS_RUNNING;

	/* relaxed: the CAS only decides who completes; parent_release() orders the rest */
	if (!atomic_compare_exchange_strong_explicit(&ep->ep_state, &expect, COFFER__EVS_OWN_DONE,
						     memory_order_relaxed, memory_order_relaxed))
		return; /* not running: a late or double completion */
	note_error(ep, rc);
	parent_release(ep);
}

void coffer__ev_reaped(struct coffer__evp *ep)
{
	struct coffer__evp *c;

	/* We took the event out of the queue: nobody else touches it or its children now. */
	/* relaxed, these three: published by the release store of READY below */
	for (c = ep->ep_child_first; c != NULL; c = c->ep_sib_next)
		atomic_store_explicit(&c->ep_state, COFFER__EVS_READY, memory_order_relaxed);
	atomic_store_explicit(&ep->ep_holds, 1, memory_order_relaxed);
	atomic_store_explicit(&ep->ep_err, 0, memory_order_relaxed);
	/* release: pairs with the acquire CAS in coffer__event_launch() and the acquire loads
	 * in init/fini/test, which then see the resets above (children included). */
	atomic_store_explicit(&ep->ep_state, COFFER__EVS_READY, memory_order_release);
}

/* ---- launch and complete ------------------------------------------------------------------ */

static int child_launch(struct coffer_event *ev, struct coffer__evp *ep)
{
	struct coffer__evp *parent = ep->ep_parent;
	uint32_t expect = COFFER__EVS_READY;

	/* acquire: pairs with the reaper's release of the parent (its resets of ep_holds) */
	if (atomic_load_explicit(&parent->ep_state, memory_order_acquire) != COFFER__EVS_READY)
		return -EBUSY; /* children are launched before their parent */
	/* relaxed: a cheap early refusal; the CAS below decides */
	if (atomic_load_explicit(&ep->ep_state, memory_order_relaxed) != COFFER__EVS_READY)
		return -EBUSY;
	/* relaxed: a hint; children are not counted on the EQ */
	if (atomic_load_explicit(&ep->ep_eq->eq_word, memory_order_relaxed) & COFFER__EQW_CLOSING)
		return -ENOENT;
	/* Count the child before it shows RUNNING: the parent's launch checks that no child is
	 * READY, and must not see a running child that the parent does not yet wait for. */
	atomic_fetch_add_explicit(&parent->ep_holds, 1, memory_order_relaxed);
	/* acq_rel: release orders the increment above before RUNNING (pairs with the acquire
	 * load in the parent's launch); acquire pairs with the reaper's release of READY. */
	if (!atomic_compare_exchange_strong_explicit(&ep->ep_state, &expect, COFFER__EVS_RUNNING,
						     memory_order_acq_rel, memory_order_relaxed)) {
		parent_release(parent); /* lost a race with a concurrent launch of the child */
		return -EBUSY;
	}
	ev->ev_error = 0;
	return 0;
}

int coffer__event_launch(struct coffer_event *ev)
{
	struct coffer__evp *ep, *c;
	struct coffer_eq *eq;
	uint32_t expect = COFFER__EVS_READY;
	uint64_t old;

	if (ev == NULL || !coffer__evp_valid(ev))
		return -EINVAL;
	ep = coffer__evp(ev);
	if (ep->ep_parent != NULL)
		return child_launch(ev, ep);

	eq = ep->ep_eq;
	/* acquire: pairs with the reaper's release store of READY (coffer__ev_reaped()) */
	if (!atomic_compare_exchange_strong_explicit(&ep->ep_state, &expect, COFFER__EVS_RUNNING,
						     memory_order_acquire, memory_order_relaxed))
		return -EBUSY;
	for (c = ep->ep_child_first; c != NULL; c = c->ep_sib_next) {
		/* acquire: pairs with child_launch()'s release CAS (its ep_holds increment) */
		if (atomic_load_explicit(&c->ep_state, memory_order_acquire) == COFFER__EVS_READY) {
			/* relaxed: undo; the event is ours since the CAS above */
			atomic_store_explicit(&ep->ep_state, COFFER__EVS_READY,
					      memory_order_relaxed);
			return -EINVAL; /* launch every child before the parent */
		}
	}
	ev->ev_error = 0;
	/* relaxed: the decision against destroy rests on the modification order of eq_word
	 * alone (destroy's CAS either precedes this add and we see CLOSING, or follows it and
	 * fails). */
	old = atomic_fetch_add_explicit(&eq->eq_word, 1, memory_order_relaxed);
	if (old & COFFER__EQW_CLOSING) {
		/* seq_cst: a force destroy may sleep until RUNNING drops; pairs with its
		 * sleeper handshake like a completion does. */
		atomic_fetch_sub_explicit(&eq->eq_word, 1, memory_order_seq_cst);
		coffer__eq_wake_sleepers(eq);
		/* relaxed: undo; the event is ours since the CAS above */
		atomic_store_explicit(&ep->ep_state, COFFER__EVS_READY, memory_order_relaxed);
		return -ENOENT;
	}
	return 0;
}

void coffer__event_complete(struct coffer_event *ev, int rc)
{
	struct coffer__evp *ep;
	uint32_t expect = COFFER__EVS_RUNNING;

	if (ev == NULL || !coffer__evp_valid(ev))
		return; /* nothing to report to: the caller is the runtime, not the user */
	ep = coffer__evp(ev);

	if (ep->ep_parent != NULL) {
		/* relaxed: the CAS only decides who completes; parent_release() orders */
		if (!atomic_compare_exchange_strong_explicit(
			&ep->ep_state, &expect, COFFER__EVS_COMPLETED, memory_order_relaxed,
			memory_order_relaxed))
			return;
		ev->ev_error = rc;
		note_error(ep->ep_parent, rc);
		parent_release(ep->ep_parent);
		return;
	}
	if (ep->ep_nchild > 0) {
		parent_own_done(ep, rc);
		return;
	}
	/* relaxed: coffer__eq_publish()'s seq_cst RMW and release push publish the state
	 * and ev_error */
	if (!atomic_compare_exchange_strong_explicit(&ep->ep_state, &expect, COFFER__EVS_COMPLETED,
						     memory_order_relaxed, memory_order_relaxed))
		return;
	ev->ev_error = rc;
	coffer__eq_publish(ep->ep_eq, ep);
}

void coffer__event_complete_vec(struct coffer_event *const *evs, const int *rcs, unsigned int n)
{
	struct coffer__evp *first = NULL, *last = NULL;
	struct coffer_eq *eq = NULL;
	unsigned int k = 0;

	for (unsigned int i = 0; i < n; i++) {
		struct coffer_event *ev = evs[i];
		uint32_t expect = COFFER__EVS_RUNNING;
		struct coffer__evp *ep;

		if (ev == NULL || !coffer__evp_valid(ev))
			continue;
		ep = coffer__evp(ev);
		if (ep->ep_parent != NULL || ep->ep_nchild > 0) {
			coffer__event_complete(ev, rcs[i]); /* the parent rules: one at a time */
			continue;
		}
		/* relaxed: as in coffer__event_complete(); the chain's publish orders it */
		if (!atomic_compare_exchange_strong_explicit(
			&ep->ep_state, &expect, COFFER__EVS_COMPLETED, memory_order_relaxed,
			memory_order_relaxed))
			continue;
		ev->ev_error = rcs[i];
		if (eq != NULL && ep->ep_eq != eq) {
			coffer__eq_publish_chain(eq, first, last, k);
			k = 0;
		}
		if (k == 0) {
			first = ep;
			eq = ep->ep_eq;
		} else {
			/* relaxed: published by the chain's push */
			atomic_store_explicit(&last->ep_qnode.next, &ep->ep_qnode,
					      memory_order_relaxed);
		}
		last = ep;
		k++;
	}
	if (k > 0)
		coffer__eq_publish_chain(eq, first, last, k);
}

/* ---- public API --------------------------------------------------------------------------- */

COFFER_API int coffer_event_init(struct coffer_event *ev, coffer_handle_t eqh,
				 struct coffer_event *parent)
{
	struct coffer__evp *ep, *pp = NULL;
	struct coffer_eq *eq = NULL;
	uint32_t st;
	int rc;

	if (ev == NULL || coffer_hhash_global() == NULL)
		return -EINVAL;
	ep = coffer__evp(ev);
	if (coffer__evp_valid(ev)) {
		/* acquire: pairs with the reaper's release of READY */
		st = atomic_load_explicit(&ep->ep_state, memory_order_acquire);
		if (st == COFFER__EVS_RUNNING || st == COFFER__EVS_OWN_DONE)
			return -EBUSY;
	}
	if (parent != NULL) {
		if (parent == ev || !coffer__evp_valid(parent))
			return -EINVAL;
		pp = coffer__evp(parent);
		if (pp->ep_parent != NULL)
			return -EINVAL; /* no nesting */
		if (eqh.cookie != 0 && eqh.cookie != pp->ep_eq->eq_handle.cookie)
			return -EINVAL;
		/* acquire: pairs with the reaper's release of the parent */
		if (atomic_load_explicit(&pp->ep_state, memory_order_acquire) != COFFER__EVS_READY)
			return -EBUSY;
	} else {
		rc = coffer__eq_get(eqh, &eq); /* the event keeps this reference */
		if (rc != 0)
			return rc;
		/* relaxed: a hint; a launch re-checks against destroy exactly */
		if (atomic_load_explicit(&eq->eq_word, memory_order_relaxed) &
		    COFFER__EQW_CLOSING) {
			coffer__eq_put(eq);
			return -ENOENT;
		}
	}
	if (coffer__evp_valid(ev)) {
		/* re-initialisation of an idle event: release what it held */
		rc = coffer_event_fini(ev);
		if (rc != 0) {
			if (eq != NULL)
				coffer__eq_put(eq);
			return rc;
		}
	}

	memset(ev->ev_private, 0, sizeof(ev->ev_private));
	ev->ev_error = 0;
	atomic_init(&ep->ep_qnode.next, NULL);
	atomic_init(&ep->ep_state, COFFER__EVS_READY);
	atomic_init(&ep->ep_holds, 1);
	atomic_init(&ep->ep_err, 0);
	if (pp != NULL) {
		ep->ep_eq = pp->ep_eq;
		child_link(pp, ep);
	} else {
		ep->ep_eq = eq;
		coffer__eq_register(eq, ep);
	}
	ep->ep_self = ev;
	ep->ep_magic = COFFER__EV_MAGIC;
	return 0;
}

COFFER_API int coffer_event_fini(struct coffer_event *ev)
{
	struct coffer__evp *ep, *pp, *c;
	uint32_t st;

	if (ev == NULL || !coffer__evp_valid(ev))
		return -EINVAL;
	ep = coffer__evp(ev);
	/* acquire: pairs with the reaper's release of READY */
	st = atomic_load_explicit(&ep->ep_state, memory_order_acquire);
	if (st == COFFER__EVS_RUNNING || st == COFFER__EVS_OWN_DONE)
		return -EBUSY;

	pp = ep->ep_parent;
	if (pp != NULL) {
		if (atomic_load_explicit(&pp->ep_state, memory_order_acquire) != COFFER__EVS_READY)
			return -EBUSY; /* its parent is in flight */
		child_unlink(pp, ep);
		ev_invalidate(ep);
		return 0;
	}
	for (c = ep->ep_child_first; c != NULL; c = c->ep_sib_next)
		if (atomic_load_explicit(&c->ep_state, memory_order_acquire) == COFFER__EVS_RUNNING)
			return -EBUSY;

	if (st == COFFER__EVS_COMPLETED) {
		/* Completed, not reaped: take it off the EQ's queue. A failed take means the
		 * completion is inside its push window, or a poller holds it and is about to
		 * mark it READY; both end within a few instructions of that thread. */
		while (!coffer__eq_take_event(ep->ep_eq, ep)) {
			if (atomic_load_explicit(&ep->ep_state, memory_order_acquire) !=
			    COFFER__EVS_COMPLETED)
				break;
			sched_yield();
		}
	}
	while ((c = ep->ep_child_first) != NULL) {
		child_unlink(ep, c);
		ev_invalidate(c);
	}
	coffer__eq_unregister(ep->ep_eq, ep);
	coffer__eq_put(ep->ep_eq);
	ev_invalidate(ep);
	return 0;
}

static bool test_wake(void *arg, uint64_t word)
{
	struct coffer__evp *ep = arg;
	uint32_t st;

	(void)word;
	/* acquire: the caller's seq_cst load of eq_word synchronised with the completion's
	 * RMW, so a completed event shows here */
	st = atomic_load_explicit(&ep->ep_state, memory_order_acquire);
	return st == COFFER__EVS_COMPLETED || st == COFFER__EVS_READY;
}

COFFER_API int coffer_event_test(struct coffer_event *ev, int64_t timeout_us, bool *done)
{
	struct coffer__evp *ep;
	struct timespec deadline;
	uint32_t st;

	if (ev == NULL || done == NULL || !coffer__evp_valid(ev))
		return -EINVAL;
	ep = coffer__evp(ev);
	if (ep->ep_parent != NULL)
		return -EINVAL; /* children are reaped with their parent */
	if (timeout_us > 0)
		coffer__eq_deadline(&deadline, timeout_us);

	for (;;) {
		coffer__eq_progress(ep->ep_eq);
		/* acquire: pairs with the reaper's release of READY */
		st = atomic_load_explicit(&ep->ep_state, memory_order_acquire);
		if (st == COFFER__EVS_READY)
			break;
		if (st == COFFER__EVS_COMPLETED && coffer__eq_take_event(ep->ep_eq, ep)) {
			coffer__ev_reaped(ep);
			break;
		}
		if (timeout_us == 0 || (timeout_us > 0 && coffer__eq_deadline_passed(&deadline))) {
			*done = false;
			return 0;
		}
		if (st == COFFER__EVS_COMPLETED) {
			sched_yield(); /* inside its push window, or being reaped by a poller */
		} else {
			coffer__eq_sleep(ep->ep_eq, timeout_us > 0 ? &deadline : NULL, test_wake,
					 ep, true);
			/* We may have drained a wake-up meant for a poller of other events, or
			 * the one coffer_eq_destroy() gives the EQ's pollers (CLOSING): pass it on
			 * (seq_cst: as a reaper's re-ring check, see eq.c). Without CLOSING here a
			 * poller whose ppoll() found the token drained by us slept on forever
			 * beside a destroyed EQ (test_eq: the poller beside event_test). */
			uint64_t word =
			    atomic_load_explicit(&ep->ep_eq->eq_word, memory_order_seq_cst);

			if (coffer__eqw_completed(word) > 0 || (word & COFFER__EQW_CLOSING))
				coffer__eq_wake_sleepers(ep->ep_eq);
		}
	}
	*done = true;
	return 0;
}

COFFER_API int coffer_event_parent_barrier(struct coffer_event *ev)
{
	struct coffer__evp *ep;
	int rc;

	if (ev == NULL || !coffer__evp_valid(ev))
		return -EINVAL;
	ep = coffer__evp(ev);
	if (ep->ep_parent != NULL || ep->ep_nchild == 0)
		return -EINVAL;
	rc = coffer__event_launch(ev);
	if (rc != 0)
		return rc;
	parent_own_done(ep, 0);
	return 0;
}
