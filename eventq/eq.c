/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * eventq/eq.c - event queues: create, destroy, poll, query, the progress hook and sleeping.
 *
 * Design note
 * -----------
 * DAOS keeps one mutex per EQ and looks the EQ up in the handle hash on every launch,
 * completion and poll; that lock and that lookup were the hottest path of multithreaded
 * fio. Here:
 *
 *  - Lookup. An event caches its EQ pointer (holding a reference taken at init), so launch
 *    and complete never look it up. Poll looks the handle up with coffer_hhash_lookup_rcu()
 *    inside an RCU read-side section: no refcount write, no shared cache line written. Only
 *    a poll that is about to sleep takes a reference (it must leave the read-side section to
 *    sleep).
 *
 *  - Completed events form Vyukov's intrusive MPSC queue (1024cores.net, "Intrusive MPSC
 *    node-based queue"): a completion is one atomic exchange on eq_qhead plus one release
 *    store, wait-free, no lock. Consumers (poll, test, fini, destroy) serialise on
 *    eq_reap_lock, a per-EQ mutex held only while unlinking at most n nodes (no syscall, no
 *    allocation, no callback inside). A mutex rather than a spinlock: this runs with more
 *    threads than cores (fio), where a preempted spinlock holder makes every other poller
 *    burn its time slice; uncontended, the mutex costs the same one CAS. Events that test()
 *    or fini() had to skip over on the way to a specific event wait on the reap list (a
 *    doubly-linked list under the same lock) and are returned first by the next poll, so
 *    each node moves at most once and order stays FIFO.
 *    Known blocking window of the queue: between a producer's exchange and its store, nodes
 *    pushed after it are invisible; consumers see "retry" (head != tail) and yield.
 *
 *  - Counters. eq_word packs RUNNING, COMPLETED (unreaped) and CLOSING (eq_impl.h). Launch
 *    adds 1 to RUNNING and fails if the old value had CLOSING; a plain destroy is one CAS
 *    0 -> CLOSING, so it either sees a racing launch (and fails with -EBUSY) or the launch
 *    sees CLOSING (and fails with -ENOENT); no event can slip into a destroyed EQ.
 *    Completion moves one event from RUNNING to COMPLETED with one RMW *before* it pushes
 *    the node, so COMPLETED is never smaller than the number of visible queued nodes, and a
 *    reaper's subtraction (under the reap lock, after the pops) can never underflow.
 *
 *  - Sleeping without lost wakeups. A poller that found nothing increments eq_sleepers
 *    (seq_cst RMW) and then reads eq_word (seq_cst load) and re-checks its wake condition;
 *    a completer does its eq_word RMW (seq_cst) and, after the push, reads eq_sleepers
 *    (seq_cst load). In the single total order of these seq_cst operations either the
 *    poller's read sees the completion (and does not sleep) or the completer's read sees
 *    the sleeper (and writes the eventfd). This store->load pattern (Dekker) is the only
 *    one that needs seq_cst; destroy's CLOSING, a failed launch's undo and the re-ring
 *    checks below are its other writers/readers. The eventfd is level-triggered and shared
 *    by all sleepers; eq_rung makes only the first completion after a drain pay the
 *    write(2). A poller (or tester) that drained the fd and left events behind re-rings when
 *    others sleep (a drained fd could otherwise keep a second sleeper asleep next to pending
 *    events). Sleepers whose condition a reap can make true (a tester whose event another
 *    poller reaps, a wait_running poller whose EQ a reap leaves idle) count themselves in
 *    eq_waiters too, and a poll that reaped wakes them (eq_wake_waiters()): no completion
 *    rings for those states. Each of them also sleeps on an eventfd of its own (on
 *    eq_wait_head, under eq_wait_lock), which the reap writes: on the shared fd one write
 *    reached only whoever drained it first, maybe another tester that slept on. Before
 *    sleeping, the poller calls the hook's arm(); after waking, disarm().
 *    An empty poll reads eq_word only (COMPLETED == 0): no lock, no shared write.
 *
 *  - Progress hook. eq_hook is an RCU-protected pointer to a private copy of the hook. It
 *    is called only inside a read-side section; detaching (set_progress(NULL) or destroy)
 *    swaps in NULL (destroy: a "dead" sentinel that no later attach can replace) and waits
 *    for a grace period before returning, so once either returns the hook is never called
 *    again. Hence the hook must not itself detach, destroy the EQ or wait for a grace
 *    period. Each attach gets a process-unique generation (struct eq_hook): a poller that
 *    armed a hook and slept disarms it only if the hook attached after it woke is the same
 *    attach, not merely at the same address (a detach frees the copy and the next attach's
 *    malloc typically returns that memory: the new hook got a disarm() for an arm() it
 *    never saw, test_hook_replaced_while_sleeping).
 *
 *  - Lifetime. The EQ record is freed by the handle hash's RCU callback after it was
 *    deleted and its last reference (events, sleeping pollers, destroy) was dropped.
 *    A completer touches only the EQ (never the event) after its push, and does so inside a
 *    read-side section: the event it pushed may be reaped and finalised by then, dropping
 *    what was the last reference, but the EQ is not freed before that section ends.
 *
 * Progress guarantees: launch and complete are wait-free apart from the eventfd write(2)
 * when a poller sleeps. Poll is blocking (the reap lock; a producer preempted inside its
 * two-instruction push window), never spinning on a core: it yields or sleeps on the fd.
 *
 * Fork. Every EQ whose memory is allocated is on one list (eq_all_mu), so that fork-prepare
 * can take each EQ's reap and registry locks (coffer__eq_atfork_prepare(), called by
 * runtime/rcu.c) and the child inherits no lock held by a thread it does not have: a child
 * must be able to poll, test and finalise the events it inherited and destroy their EQs
 * (the runtime completes its copies of requests in flight with -ENOTCONN). Without this a
 * poller or a query inside the reap lock at the fork hung the child's first poll
 * (test_fork_while_eq_locked). An EQ leaves the list in eq_free(), which may run in a
 * call_rcu callback: rcu.c takes eq_all_mu only after it parked the call_rcu workers.
 * The child also gives each EQ a wake fd of its own (same number, new file description):
 * sharing one with the parent let either process's pollers drain the other's wakeups.
 *
 * Lock order: eq_reap_lock, eq_reg_lock and eq_wait_lock are leaves (never nested); the
 * hash's bucket locks are never taken under them. Fork-prepare only: eq_all_mu -> every EQ's
 * eq_reap_lock -> its eq_reg_lock -> its eq_wait_lock.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include "runtime/nocancel.h"
#include "runtime/rcu.h"

#include "eventq/eq_impl.h"

/*
 * eq_hook of a destroyed EQ: a late coffer__eq_set_progress() racing with destroy fails on
 * it (-ENOENT) instead of attaching a hook that nobody would ever detach.
 */
static struct coffer__eq_progress eq_hook_dead;
#define EQ_HOOK_DEAD (&eq_hook_dead)

/* An attached hook: the caller's copy (eq_hook points at eh_p) and which attach it is. */
struct eq_hook {
	struct coffer__eq_progress eh_p;
	uint64_t eh_gen; /* unique per attach in the process; written before publication */
};

/* Generations handed out so far; atomic-relaxed (uniqueness needs only the RMW). */
static uint64_t eq_hook_gens;

static struct eq_hook *eq_hook_of(struct coffer__eq_progress *p)
{
	return COFFER__CONTAINER_OF(p, struct eq_hook, eh_p);
}

static void eq_hook_free(struct coffer__eq_progress *p)
{
	free(eq_hook_of(p));
}

/* Load the attached hook (NULL when none). Context: inside a read-side section. */
static struct coffer__eq_progress *hook_deref(struct coffer_eq *eq)
{
	/* acquire (RCU dereference): pairs with the release CAS in coffer__eq_set_progress() */
	struct coffer__eq_progress *hook = atomic_load_explicit(&eq->eq_hook, memory_order_acquire);

	return hook == EQ_HOOK_DEAD ? NULL : hook;
}

/* Every EQ from create until its memory is freed (fork handlers; see the design note). */
static pthread_mutex_t eq_all_mu = PTHREAD_MUTEX_INITIALIZER;
static struct coffer_eq *eq_all_head; /* eq_all_mu */

static void eq_all_add(struct coffer_eq *eq)
{
	pthread_mutex_lock(&eq_all_mu);
	eq->eq_all_prev = NULL;
	eq->eq_all_next = eq_all_head;
	if (eq_all_head != NULL)
		eq_all_head->eq_all_prev = eq;
	eq_all_head = eq;
	pthread_mutex_unlock(&eq_all_mu);
}

static void eq_all_del(struct coffer_eq *eq)
{
	pthread_mutex_lock(&eq_all_mu);
	if (eq->eq_all_prev != NULL)
		eq->eq_all_prev->eq_all_next = eq->eq_all_next;
	else
		eq_all_head = eq->eq_all_next;
	if (eq->eq_all_next != NULL)
		eq->eq_all_next->eq_all_prev = eq->eq_all_prev;
	pthread_mutex_unlock(&eq_all_mu);
}

/* coffer__eq_close_hash(): see event_internal.h. */
void coffer__eq_close_hash(const struct coffer_hhash *hh)
{
	pthread_mutex_lock(&eq_all_mu);
	for (struct coffer_eq *eq = eq_all_head; eq != NULL; eq = eq->eq_all_next) {
		/* relaxed (paired with nothing): an EQ still being created may show NULL (it
		 * then finds the hash unpublished and fails, or inserts into a later runtime's
		 * hash), @hh (its create sees the unpublish after the insert and fails: closing
		 * it is harmless) or a later runtime's hash (not ours to close). */
		if (__atomic_load_n(&eq->eq_hh, __ATOMIC_RELAXED) != hh)
			continue; /* an EQ of a later runtime (coffer_init() again) */
		/* seq_cst: the waker's half of the sleeper handshake, as in coffer_eq_destroy():
		 * a poller either sees CLOSING before it sleeps, or is counted in eq_sleepers
		 * when we look, and its eventfd is written. */
		atomic_fetch_or_explicit(&eq->eq_word, COFFER__EQW_CLOSING, memory_order_seq_cst);
		coffer__eq_wake_sleepers(eq);
	}
	pthread_mutex_unlock(&eq_all_mu);
}

void coffer__eq_atfork_prepare(void)
{
	pthread_mutex_lock(&eq_all_mu);
	for (struct coffer_eq *eq = eq_all_head; eq != NULL; eq = eq->eq_all_next) {
		pthread_mutex_lock(&eq->eq_reap_lock);
		pthread_mutex_lock(&eq->eq_reg_lock);
		pthread_mutex_lock(&eq->eq_wait_lock);
	}
}

void coffer__eq_atfork_parent(void)
{
	for (struct coffer_eq *eq = eq_all_head; eq != NULL; eq = eq->eq_all_next) {
		pthread_mutex_unlock(&eq->eq_wait_lock);
		pthread_mutex_unlock(&eq->eq_reg_lock);
		pthread_mutex_unlock(&eq->eq_reap_lock);
	}
	pthread_mutex_unlock(&eq_all_mu);
}

void coffer__eq_atfork_child(void)
{
	/* Only the forking thread exists, and it holds every lock: queues and lists are
	 * consistent. Re-initialised rather than unlocked: their owner's thread id changed. */
	for (struct coffer_eq *eq = eq_all_head; eq != NULL; eq = eq->eq_all_next) {
		int fd;

		pthread_mutex_init(&eq->eq_reap_lock, NULL);
		pthread_mutex_init(&eq->eq_reg_lock, NULL);
		pthread_mutex_init(&eq->eq_wait_lock, NULL);
		/* The waiters were the other threads' (this one is not asleep): gone. */
		eq->eq_wait_head = NULL;
		atomic_store_explicit(&eq->eq_waiters, 0, memory_order_relaxed);
		/* The wake fd's file description is the parent's copy's too: a poller of either
		 * process would drain wakeups meant for the other's, which then sleep on next
		 * to completed events (test_fork_child_steals_no_wakeup). A new description
		 * under the same number; eq_rung as for a drained fd. Without a spare fd the
		 * child keeps sharing it (its sleeps and the parent's may then wake late). */
		fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (fd >= 0) {
			(void)dup3(fd, eq->eq_fd, O_CLOEXEC);
			close(fd);
			atomic_store_explicit(&eq->eq_rung, false, memory_order_relaxed);
		}
	}
	pthread_mutex_init(&eq_all_mu, NULL);
}

/* Reaped per batch when a force destroy discards completed events. */
#define EQ_DISCARD_BATCH 64u

/* ---- Vyukov MPSC queue ----------------------------------------------------------------- */

static void mpsc_push(struct coffer_eq *eq, struct coffer__mpsc_node *n)
{
	struct coffer__mpsc_node *prev;

	atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
	/* acq_rel: release publishes @n and everything written before the push (ev_error);
	 * acquire orders our store to prev->next after the previous pusher's initialisation
	 * of it. Pairs with the exchange of the next producer and with the consumer's acquire
	 * loads of eq_qhead. */
	prev = atomic_exchange_explicit(&eq->eq_qhead, n, memory_order_acq_rel);
	/* release: pairs with the consumer's acquire load of ->next in mpsc_pop_locked() */
	atomic_store_explicit(&prev->next, n, memory_order_release);
}

/*
 * Pop the oldest visible node. Returns NULL when nothing is visible; *retry is then true
 * when a producer is inside its push window (something will appear shortly).
 * Context: eq_reap_lock held.
 */
static struct coffer__mpsc_node *mpsc_pop_locked(struct coffer_eq *eq, bool *retry)
{
	struct coffer__mpsc_node *tail = eq->eq_qtail;
	struct coffer__mpsc_node *next, *head;

	*retry = false;
	/* acquire: pairs with mpsc_push()'s release store of prev->next */
	next = atomic_load_explicit(&tail->next, memory_order_acquire);
	if (tail == &eq->eq_stub) {
		if (next == NULL) {
			/* acquire: pairs with the pushers' exchange */
			head = atomic_load_explicit(&eq->eq_qhead, memory_order_acquire);
			*retry = head != tail;
			return NULL;
		}
		eq->eq_qtail = next;
		tail = next;
		next = atomic_load_explicit(&next->next, memory_order_acquire);
	}
	if (next != NULL) {
		eq->eq_qtail = next;
		return tail;
	}
	head = atomic_load_explicit(&eq->eq_qhead, memory_order_acquire);
	if (tail != head) {
		*retry = true;
		return NULL;
	}
	/* @tail is the last node: put the stub behind it so that it can be handed out */
	mpsc_push(eq, &eq->eq_stub);
	next = atomic_load_explicit(&tail->next, memory_order_acquire);
	if (next != NULL) {
		eq->eq_qtail = next;
		return tail;
	}
	*retry = true;
	return NULL;
}

/* ---- reap list (under eq_reap_lock) ----------------------------------------------------- */

static void rl_append_locked(struct coffer_eq *eq, struct coffer__evp *ep)
{
	ep->ep_rl_next = NULL;
	ep->ep_rl_prev = eq->eq_rl_tail;
	if (eq->eq_rl_tail != NULL)
		eq->eq_rl_tail->ep_rl_next = ep;
	else
		eq->eq_rl_head = ep;
	eq->eq_rl_tail = ep;
	ep->ep_on_reaplist = 1;
}

static void rl_remove_locked(struct coffer_eq *eq, struct coffer__evp *ep)
{
	if (ep->ep_rl_prev != NULL)
		ep->ep_rl_prev->ep_rl_next = ep->ep_rl_next;
	else
		eq->eq_rl_head = ep->ep_rl_next;
	if (ep->ep_rl_next != NULL)
		ep->ep_rl_next->ep_rl_prev = ep->ep_rl_prev;
	else
		eq->eq_rl_tail = ep->ep_rl_prev;
	ep->ep_rl_next = ep->ep_rl_prev = NULL;
	ep->ep_on_reaplist = 0;
}

static struct coffer__evp *node_evp(struct coffer__mpsc_node *node)
{
	return COFFER__CONTAINER_OF(node, struct coffer__evp, ep_qnode);
}

static void reap_lock(struct coffer_eq *eq)
{
	/* A default mutex cannot fail to lock here (initialised, not recursive, no deadlock
	 * possible: the lock is a leaf). */
	(void)pthread_mutex_lock(&eq->eq_reap_lock);
}

static void reap_unlock(struct coffer_eq *eq)
{
	(void)pthread_mutex_unlock(&eq->eq_reap_lock);
}

/*
 * Take up to @n completed events, oldest first, into @out. Returns how many; *retry as for
 * mpsc_pop_locked(). Subtracts them from COMPLETED and returns the new word in *wordp.
 */
static unsigned int eq_take(struct coffer_eq *eq, unsigned int n, struct coffer_event **out,
			    bool *retry, uint64_t *wordp)
{
	struct coffer__mpsc_node *node;
	struct coffer__evp *ep;
	unsigned int k = 0;
	uint64_t sub;

	*retry = false;
	/* Nothing counted means nothing queued (completions count themselves before they
	 * push): an empty poll reads one cache line and takes no lock. relaxed: a stale zero
	 * only delays the reap to the next attempt, and sleepers re-check with seq_cst. */
	*wordp = atomic_load_explicit(&eq->eq_word, memory_order_relaxed);
	if (coffer__eqw_completed(*wordp) == 0)
		return 0;
	reap_lock(eq);
	while (k < n && (ep = eq->eq_rl_head) != NULL) {
		rl_remove_locked(eq, ep);
		out[k++] = coffer__evp_event(ep);
	}
	while (k < n && (node = mpsc_pop_locked(eq, retry)) != NULL)
		out[k++] = coffer__evp_event(node_evp(node));
	sub = (uint64_t)k << COFFER__EQW_COMPLETED_SHIFT;
	/* seq_cst: the reaper's half of the re-ring check below (a sleeper's seq_cst increment
	 * of eq_sleepers vs. our seq_cst load of it); relaxed would do for the count itself,
	 * which only ever meets other RMWs. */
	*wordp = k ? atomic_fetch_sub_explicit(&eq->eq_word, sub, memory_order_seq_cst) - sub
		   : atomic_load_explicit(&eq->eq_word, memory_order_relaxed);
	reap_unlock(eq);
	return k;
}

/*
 * A poll reaped events (after the seq_cst RMW of eq_word in eq_take() and after marking them
 * READY): wake the sleepers whose condition a reap can make true - a tester whose event we
 * reaped, a wait_running poller whose EQ we left idle. No completion rings for either, and
 * the write that rang for what we reaped may have been drained by us before such a sleeper was
 * back from ppoll(), which then slept on (test_event_test_woken_by_reap,
 * test_wait_running_woken_by_reap). Dekker, as in the design note: our seq_cst RMW of eq_word
 * then seq_cst load of eq_waiters, against the sleeper's seq_cst increment of eq_waiters then
 * seq_cst load of eq_word. The fd is written even when eq_rung says it was: a poller may have
 * drained it and not yet cleared eq_rung. Cost when nobody waits so: a fence and one load of
 * the sleepers' line per poll that returned events.
 */
static void eq_wake_waiters(struct coffer_eq *eq)
{
	uint64_t one = 1;
	uint32_t listed = 0;

	/* A tester's condition is its event's state, stored READY (release, in
	 * coffer__ev_reaped()) after eq_take()'s RMW, so that RMW does not order it before our
	 * load of eq_waiters: store then load of two locations, the store-buffering shape,
	 * which a release store and a seq_cst load allow both ways (x86 too: the READY store
	 * may still sit in our store buffer). Then we could read no waiter while the tester,
	 * counted just after, read its event not READY yet, and it slept on beside it. The
	 * fence pairs with the sleeper's seq_cst RMW of eq_waiters (lead's review of
	 * 53b3a1b/795bc98; no test shows it on x86: the window is inside one store buffer's
	 * drain, and the sleeper makes an eventfd() call in between). Cost: one full fence per
	 * poll that returned events. */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&eq->eq_waiters, memory_order_seq_cst) == 0)
		return;
	COFFER__NO_CANCEL(); /* write(2) is a cancellation point (runtime/nocancel.h) */
	/* Each its own write: they used to share the EQ's fd, whose one write reached only
	 * whoever drained it first - another tester, whose event still ran, slept on and the
	 * one whose event we reaped slept on beside it (test_event_test_woken_beside_other_
	 * tester). A sleeper listed after our walk saw what we reaped (the lock orders its
	 * condition check after our reap). */
	pthread_mutex_lock(&eq->eq_wait_lock);
	for (struct coffer__eq_waiter *w = eq->eq_wait_head; w != NULL; w = w->ew_next, listed++)
		if (write(w->ew_fd, &one, sizeof(one)) < 0) {
			/* EAGAIN: the counter is saturated, so the fd is readable already. */
		}
	pthread_mutex_unlock(&eq->eq_wait_lock);
	/* A sleeper without an fd of its own (eventfd() failed) sleeps on the EQ's: ring it
	 * (a spare write when the count only includes one not listed yet). */
	if (atomic_load_explicit(&eq->eq_waiters, memory_order_relaxed) > listed &&
	    write(eq->eq_fd, &one, sizeof(one)) < 0) {
		/* EAGAIN: as above */
	}
}

bool coffer__eq_take_event(struct coffer_eq *eq, struct coffer__evp *ep)
{
	struct coffer__mpsc_node *node;
	struct coffer__evp *cur;
	bool retry, found = false;

	reap_lock(eq);
	if (ep->ep_on_reaplist) {
		rl_remove_locked(eq, ep);
		found = true;
	} else {
		/* Move what lies before @ep to the reap list: each node moves at most once. */
		while ((node = mpsc_pop_locked(eq, &retry)) != NULL) {
			cur = node_evp(node);
			if (cur == ep) {
				found = true;
				break;
			}
			rl_append_locked(eq, cur);
		}
	}
	if (found)
		/* relaxed: the count meets only RMWs; the event itself is ordered by the lock.
		 * No eq_wake_waiters() here: the one caller that drains the fd,
		 * coffer_event_test() after a sleep, passes the completion's wake-up on before it
		 * takes the event (test_wait_running_woken_by_reap, odd rounds). */
		atomic_fetch_sub_explicit(&eq->eq_word, COFFER__EQW_COMPLETED_ONE,
					  memory_order_relaxed);
	reap_unlock(eq);
	return found;
}

/* ---- waking and sleeping ---------------------------------------------------------------- */

static void eq_ring(struct coffer_eq *eq)
{
	uint64_t one = 1;

	/* acq_rel: pairs with the exchange in eq_drain(); only the first ringer after a drain
	 * pays for the write(2). */
	if (atomic_exchange_explicit(&eq->eq_rung, true, memory_order_acq_rel))
		return;
	COFFER__NO_CANCEL(); /* write(2) is a cancellation point (runtime/nocancel.h) */
	if (write(eq->eq_fd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is saturated, so the fd is readable already. */
	}
}

/*
 * Reads @fd, an eventfd, without ever sleeping, whatever its O_NONBLOCK says: the EQ's fd is
 * passed to the store (CHANNEL_OPEN), O_NONBLOCK belongs to the open file description both
 * share, and a store that clears it would make a plain read(2) of an empty counter sleep
 * until it writes - for ever, if it never does, holding the poller
 * (test_wake_fd_made_blocking). RWF_NOWAIT makes this one read non-blocking, so there is no
 * flag for the peer to race with. Kernels before 5.12 refuse RWF_NOWAIT on an eventfd
 * (EOPNOTSUPP: it had no read_iter then; older ones lack preadv2 or the flag): there a
 * zero-timeout poll(2) guards the read, which leaves a store that empties the counter
 * between our poll and our read able to block that one read (docs/protocol.md, Channels,
 * "Reply doorbell").
 */
static void eq_read_nowait(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	uint64_t v;
	struct iovec iov = {.iov_base = &v, .iov_len = sizeof(v)};

	if (preadv2(fd, &iov, 1, -1, RWF_NOWAIT) >= 0 || errno == EAGAIN)
		return; /* EAGAIN: another poller (or the store) drained it first */
	if (poll(&p, 1, 0) == 1 && (p.revents & POLLIN) && read(fd, &v, sizeof(v)) < 0) {
		/* EAGAIN: drained since */
	}
}

static void eq_drain(struct coffer_eq *eq)
{
	/* Read first, then clear eq_rung: a ringer that saw eq_rung set in between skipped its
	 * write, but its push is visible to us through this exchange (acq_rel, pairs with
	 * eq_ring()) and we pop after it. The other order could leave eq_rung set with the fd
	 * drained, and nobody would ring again. */
	eq_read_nowait(eq->eq_fd);
	atomic_exchange_explicit(&eq->eq_rung, false, memory_order_acq_rel);
}

void coffer__eq_wake_sleepers(struct coffer_eq *eq)
{
	/* seq_cst: pairs with the sleeper's seq_cst increment in coffer__eq_sleep(); the
	 * caller did its seq_cst RMW of eq_word before (Dekker, see the design note). */
	if (atomic_load_explicit(&eq->eq_sleepers, memory_order_seq_cst) > 0)
		eq_ring(eq);
}

void coffer__eq_publish(struct coffer_eq *eq, struct coffer__evp *ep)
{
	/* The event may be reaped, finalised and freed as soon as it is pushed, dropping the
	 * last reference on the EQ; the read-side section keeps the EQ's memory (and fd)
	 * valid until we are done with it. */
	coffer__rcu_read_lock();
	/* RUNNING - 1, COMPLETED + 1 in one RMW (RUNNING >= 1: counted at launch).
	 * seq_cst: our half of the sleeper handshake (pairs with coffer__eq_sleep()); it also
	 * releases the event's state to whoever reads the word (test's wake condition). */
	atomic_fetch_add_explicit(&eq->eq_word, COFFER__EQW_COMPLETED_ONE - 1,
				  memory_order_seq_cst);
	mpsc_push(eq, &ep->ep_qnode);
	/* From here on @ep belongs to whoever reaps it. */
	coffer__eq_wake_sleepers(eq);
	coffer__rcu_read_unlock();
}

void coffer__eq_publish_chain(struct coffer_eq *eq, struct coffer__evp *first,
			      struct coffer__evp *last, unsigned int k)
{
	struct coffer__mpsc_node *prev;

	coffer__rcu_read_lock(); /* as in coffer__eq_publish() */
	/* RUNNING - k, COMPLETED + k in one RMW (each counted as running at launch); seq_cst
	 * as in coffer__eq_publish(). */
	atomic_fetch_add_explicit(&eq->eq_word, (uint64_t)k * (COFFER__EQW_COMPLETED_ONE - 1),
				  memory_order_seq_cst);
	/* The chain first..last was linked by the caller (relaxed stores); the exchange and
	 * the release store below publish those links with the nodes, as one push does. */
	atomic_store_explicit(&last->ep_qnode.next, NULL, memory_order_relaxed);
	prev = atomic_exchange_explicit(&eq->eq_qhead, &last->ep_qnode, memory_order_acq_rel);
	atomic_store_explicit(&prev->next, &first->ep_qnode, memory_order_release);
	coffer__eq_wake_sleepers(eq);
	coffer__rcu_read_unlock();
}

void coffer__eq_progress(struct coffer_eq *eq)
{
	struct coffer__eq_progress *hook;

	coffer__rcu_read_lock();
	hook = hook_deref(eq);
	if (hook != NULL)
		(void)hook->progress(hook->arg); /* < 0: events were completed with errors */
	coffer__rcu_read_unlock();
}

void coffer__eq_deadline(struct timespec *ts, int64_t timeout_us)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += (time_t)(timeout_us / 1000000);
	ts->tv_nsec += (long)(timeout_us % 1000000) * 1000;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

/* Time left until @deadline (zero when passed). */
static bool deadline_left(const struct timespec *deadline, struct timespec *left)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	left->tv_sec = deadline->tv_sec - now.tv_sec;
	left->tv_nsec = deadline->tv_nsec - now.tv_nsec;
	if (left->tv_nsec < 0) {
		left->tv_sec--;
		left->tv_nsec += 1000000000L;
	}
	if (left->tv_sec < 0 || (left->tv_sec == 0 && left->tv_nsec == 0)) {
		left->tv_sec = 0;
		left->tv_nsec = 0;
		return false;
	}
	return true;
}

bool coffer__eq_deadline_passed(const struct timespec *ts)
{
	struct timespec left;

	return !deadline_left(ts, &left);
}

void coffer__eq_sleep(struct coffer_eq *eq, const struct timespec *deadline,
		      bool (*cond)(void *arg, uint64_t word), void *arg, bool reap_wakes)
{
	struct coffer__eq_progress *hook, *cur;
	struct pollfd pfd[2] = {{.fd = eq->eq_fd, .events = POLLIN}, {.fd = -1, .events = POLLIN}};
	struct coffer__eq_waiter w = {.ew_fd = -1};
	struct timespec left;
	uint64_t word, gen = 0;
	int armed = 0;

	if (deadline != NULL && !deadline_left(deadline, &left))
		return;
	/* Not a cancellation point: a thread cancelled inside ppoll(), read() or close() left
	 * eq_sleepers and eq_waiters raised, @w (on its stack) on the wake list, its eventfd
	 * open and the hook armed (tests/eventq/cancel_test.c; runtime/nocancel.h). */
	COFFER__NO_CANCEL();
	/* seq_cst, all three: the sleeper's half of the handshakes with coffer__eq_publish(),
	 * the re-ring checks and, for @reap_wakes, reaps (eq_wake_waiters(); see the design
	 * note). A reap wakes us through a wake fd of our own, listed before the check of our
	 * condition: the EQ's fd is drained by whoever wakes first. */
	if (reap_wakes) {
		atomic_fetch_add_explicit(&eq->eq_waiters, 1, memory_order_seq_cst);
		w.ew_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (w.ew_fd >= 0) {
			pthread_mutex_lock(&eq->eq_wait_lock);
			w.ew_prev = NULL;
			w.ew_next = eq->eq_wait_head;
			if (w.ew_next != NULL)
				w.ew_next->ew_prev = &w;
			eq->eq_wait_head = &w;
			pthread_mutex_unlock(&eq->eq_wait_lock);
			pfd[1].fd = w.ew_fd;
		}
	}
	atomic_fetch_add_explicit(&eq->eq_sleepers, 1, memory_order_seq_cst);
	word = atomic_load_explicit(&eq->eq_word, memory_order_seq_cst);
	if (cond(arg, word))
		goto out;

	coffer__rcu_read_lock();
	hook = hook_deref(eq);
	if (hook != NULL) {
		gen = eq_hook_of(hook)->eh_gen;
		if (hook->arm != NULL)
			armed = hook->arm(hook->arg);
	}
	coffer__rcu_read_unlock();

	if (armed <= 0)
		/* EINTR or a timeout: the caller re-checks and decides */
		(void)ppoll(pfd, w.ew_fd >= 0 ? 2 : 1, deadline != NULL ? &left : NULL, NULL);

	if (hook != NULL) {
		/* The hook we armed may have been detached (and freed after a grace period)
		 * while we slept, and another attached, possibly in the same memory: disarm
		 * only the attached hook, inside a new read-side section, and only if it is the
		 * attach we armed (its generation, not its address). */
		coffer__rcu_read_lock();
		cur = hook_deref(eq);
		if (cur != NULL && eq_hook_of(cur)->eh_gen == gen && cur->arm != NULL &&
		    cur->disarm != NULL)
			cur->disarm(cur->arg);
		coffer__rcu_read_unlock();
	}
	if (armed <= 0)
		eq_drain(eq);
	else if (armed != COFFER__ARM_READY)
		/* Work is pending but our progress() did not take it (another poller holds the
		 * channel, whose hook trylocks): give that poller the core, do not spin. */
		sched_yield();
out:
	/* relaxed: a stale count only costs a spare write(2) */
	atomic_fetch_sub_explicit(&eq->eq_sleepers, 1, memory_order_relaxed);
	if (w.ew_fd >= 0) {
		pthread_mutex_lock(&eq->eq_wait_lock);
		if (w.ew_prev != NULL)
			w.ew_prev->ew_next = w.ew_next;
		else
			eq->eq_wait_head = w.ew_next;
		if (w.ew_next != NULL)
			w.ew_next->ew_prev = w.ew_prev;
		pthread_mutex_unlock(&eq->eq_wait_lock);
		close(w.ew_fd);
	}
	if (reap_wakes)
		atomic_fetch_sub_explicit(&eq->eq_waiters, 1, memory_order_relaxed);
}

/* ---- handle helpers ----------------------------------------------------------------------- */

static bool eq_handle_valid(coffer_handle_t eqh)
{
	return eqh.cookie != 0 &&
	       (eqh.cookie & ((1u << COFFER_HTYPE_BITS) - 1)) == (uint64_t)COFFER_HTYPE_EQ;
}

int coffer__eq_get(coffer_handle_t eqh, struct coffer_eq **eqp)
{
	struct coffer_hhash *hh;
	struct coffer_hlink *link;
	int rc;

	if (!eq_handle_valid(eqh))
		return -EINVAL;
	/* a racing last coffer_disconnect() may stop the runtime */
	rc = coffer__global_lookup(eqh, COFFER_HTYPE_EQ, &hh, &link);
	if (rc != 0)
		return rc == -EINVAL ? -EINVAL : -ENOENT;
	*eqp = COFFER__CONTAINER_OF(link, struct coffer_eq, eq_link);
	return 0;
}

void coffer__eq_put(struct coffer_eq *eq)
{
	coffer_hhash_putref(eq->eq_hh, &eq->eq_link);
}

/* The hash's free callback: runs after a grace period once the record is unreachable. */
static void eq_free(struct coffer_hlink *link)
{
	struct coffer_eq *eq = COFFER__CONTAINER_OF(link, struct coffer_eq, eq_link);
	/* relaxed: unreachable now, after a grace period; nobody else touches the EQ */
	struct coffer__eq_progress *hook = atomic_load_explicit(&eq->eq_hook, memory_order_relaxed);
	COFFER__NO_CANCEL(); /* close(2) (runtime/nocancel.h) */

	/* Still attached when coffer_fini() released a live EQ: nobody can call it now. */
	if (hook != EQ_HOOK_DEAD && hook != NULL) {
		if (hook->release != NULL)
			hook->release(hook->arg);
		eq_hook_free(hook);
	}
	eq_all_del(eq);
	close(eq->eq_fd);
	pthread_mutex_destroy(&eq->eq_reap_lock);
	pthread_mutex_destroy(&eq->eq_reg_lock);
	pthread_mutex_destroy(&eq->eq_wait_lock);
	free(eq);
}

void coffer__eq_register(struct coffer_eq *eq, struct coffer__evp *ep)
{
	pthread_mutex_lock(&eq->eq_reg_lock);
	ep->ep_reg_prev = NULL;
	ep->ep_reg_next = eq->eq_reg_head;
	if (eq->eq_reg_head != NULL)
		eq->eq_reg_head->ep_reg_prev = ep;
	eq->eq_reg_head = ep;
	pthread_mutex_unlock(&eq->eq_reg_lock);
}

void coffer__eq_unregister(struct coffer_eq *eq, struct coffer__evp *ep)
{
	pthread_mutex_lock(&eq->eq_reg_lock);
	if (ep->ep_reg_prev != NULL)
		ep->ep_reg_prev->ep_reg_next = ep->ep_reg_next;
	else
		eq->eq_reg_head = ep->ep_reg_next;
	if (ep->ep_reg_next != NULL)
		ep->ep_reg_next->ep_reg_prev = ep->ep_reg_prev;
	ep->ep_reg_next = ep->ep_reg_prev = NULL;
	pthread_mutex_unlock(&eq->eq_reg_lock);
}

/* ---- public API --------------------------------------------------------------------------- */

COFFER_API int coffer_eq_create(coffer_handle_t *eqh)
{
	struct coffer_hhash *hh = coffer_hhash_global();
	struct coffer_eq *eq;
	int rc;
	COFFER__NO_CANCEL(); /* close(2) on failure (runtime/nocancel.h) */

	if (eqh == NULL || hh == NULL)
		return -EINVAL;
	eq = aligned_alloc(COFFER__EQ_CACHELINE, (sizeof(*eq) + COFFER__EQ_CACHELINE - 1) &
						     ~(size_t)(COFFER__EQ_CACHELINE - 1));
	if (eq == NULL)
		return -ENOMEM;
	memset(eq, 0, sizeof(*eq));
	eq->eq_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (eq->eq_fd < 0) {
		rc = -errno;
		free(eq);
		return rc;
	}
	rc = pthread_mutex_init(&eq->eq_reap_lock, NULL);
	if (rc != 0) {
		close(eq->eq_fd);
		free(eq);
		return -rc;
	}
	rc = pthread_mutex_init(&eq->eq_reg_lock, NULL);
	if (rc != 0) {
		pthread_mutex_destroy(&eq->eq_reap_lock);
		close(eq->eq_fd);
		free(eq);
		return -rc;
	}
	rc = pthread_mutex_init(&eq->eq_wait_lock, NULL);
	if (rc != 0) {
		pthread_mutex_destroy(&eq->eq_reg_lock);
		pthread_mutex_destroy(&eq->eq_reap_lock);
		close(eq->eq_fd);
		free(eq);
		return -rc;
	}
	atomic_init(&eq->eq_stub.next, NULL);
	atomic_init(&eq->eq_qhead, &eq->eq_stub);
	eq->eq_qtail = &eq->eq_stub;
	atomic_init(&eq->eq_word, 0);
	atomic_init(&eq->eq_sleepers, 0);
	atomic_init(&eq->eq_rung, false);
	atomic_init(&eq->eq_hook, NULL);
	eq->eq_link.hl_free = eq_free;
	eq_all_add(eq); /* eq_free() takes it off again */

	/*
	 * One read-side section from loading the hash to the insert: the runtime's last
	 * coffer_fini() (a racing last coffer_disconnect() of a program that never called
	 * coffer_init()) unpublishes the hash, drains it and frees it after a grace period. An
	 * insert after the drain of its bucket would keep the table alive for good, so the hash
	 * must still be the published one after the insert (the drain takes the bucket lock
	 * after the unpublish): else the EQ is deleted again, and the table frees it
	 * (test_ctl_calls_vs_last_disconnect: a use-after-free without it).
	 */
	coffer__rcu_read_lock();
	hh = coffer_hhash_global();
	/* relaxed atomic: coffer__eq_close_hash() reads it (under eq_all_mu, which does not
	 * order this store) to tell the stopping runtime's EQs from a later one's; any value it
	 * sees is right, see there */
	__atomic_store_n(&eq->eq_hh, hh, __ATOMIC_RELAXED);
	rc = hh == NULL ? -EINVAL
			: coffer_hhash_insert(hh, &eq->eq_link, COFFER_HTYPE_EQ, &eq->eq_handle);
	if (rc == 0 && coffer_hhash_global() != hh) {
		(void)coffer_hhash_delete_handle(hh, eq->eq_handle, COFFER_HTYPE_EQ);
		coffer__rcu_read_unlock();
		return -EINVAL; /* the runtime stopped */
	}
	coffer__rcu_read_unlock();
	if (rc != 0) {
		eq_free(&eq->eq_link);
		return rc;
	}
	*eqh = eq->eq_handle;
	return 0;
}

/* Hand completed events back to READY without returning them (force destroy). */
static void eq_discard(struct coffer_eq *eq, bool *retry)
{
	struct coffer_event *batch[EQ_DISCARD_BATCH];
	unsigned int i, k;
	uint64_t word;

	do {
		k = eq_take(eq, EQ_DISCARD_BATCH, batch, retry, &word);
		for (i = 0; i < k; i++)
			coffer__ev_reaped(coffer__evp(batch[i]));
	} while (k == EQ_DISCARD_BATCH);
}

static bool drain_done(void *arg, uint64_t word)
{
	(void)arg;
	return coffer__eqw_running(word) == 0 || coffer__eqw_completed(word) > 0;
}

/* Force destroy: wait until nothing runs, discarding what completes. CLOSING is set. */
static void eq_drain_running(struct coffer_eq *eq)
{
	uint64_t word;
	bool retry;

	for (;;) {
		coffer__eq_progress(eq);
		eq_discard(eq, &retry);
		/* acquire: pairs with the completions' RMWs. A completion counts itself as
		 * COMPLETED before it pushes, so RUNNING == COMPLETED == 0 means no push is
		 * still on its way. */
		word = atomic_load_explicit(&eq->eq_word, memory_order_acquire);
		if (coffer__eqw_running(word) == 0 && coffer__eqw_completed(word) == 0)
			return;
		if (retry || coffer__eqw_completed(word) > 0)
			sched_yield();
		else
			coffer__eq_sleep(eq, NULL, drain_done, NULL, false);
	}
}

/* Detach the hook (@dead: for good) and wait until no thread can still be inside it. */
static void eq_detach(struct coffer_eq *eq, bool dead)
{
	/* relaxed: only the CAS's first guess */
	struct coffer__eq_progress *old = atomic_load_explicit(&eq->eq_hook, memory_order_relaxed);

	do {
		if (old == EQ_HOOK_DEAD)
			return; /* destroyed: detached for good already */
		/* acq_rel: acquire pairs with the CAS that attached @old (we free it) */
	} while (
	    !atomic_compare_exchange_weak_explicit(&eq->eq_hook, &old, dead ? EQ_HOOK_DEAD : NULL,
						   memory_order_acq_rel, memory_order_relaxed));
	if (old != NULL) {
		urcu_bp_synchronize_rcu();
		/* tells TSan that the grace period ordered every section that used @old before
		 * the free (runtime/rcu.h); a no-op otherwise */
		coffer__rcu_gp_acquire();
		if (old->release != NULL)
			old->release(old->arg);
		eq_hook_free(old);
	}
}

COFFER_API int coffer_eq_destroy(coffer_handle_t eqh, unsigned int flags)
{
	struct coffer_eq *eq;
	uint64_t expect = 0, old;
	int rc;
	COFFER__NO_CANCEL(); /* a force drain sleeps; the detach waits for a grace period */

	if ((flags & ~COFFER_EQ_FORCE) != 0)
		return -EINVAL;
	/* The hook's detach waits for a grace period, which a caller's read-side section
	 * would hold up for good: refused up front, nothing changed, as coffer_fini() does
	 * (test_grace_period_calls_in_read_section). */
	if (coffer__rcu_read_ongoing())
		return -EINVAL;
	rc = coffer__eq_get(eqh, &eq);
	if (rc != 0)
		return rc;

	if (flags & COFFER_EQ_FORCE) {
		/* seq_cst: launches ordered after this in eq_word's modification order see
		 * CLOSING and fail; seq_cst because sleepers test CLOSING after their seq_cst
		 * increment of eq_sleepers, and we read eq_sleepers after this (Dekker). */
		old = atomic_fetch_or_explicit(&eq->eq_word, COFFER__EQW_CLOSING,
					       memory_order_seq_cst);
		if (old & COFFER__EQW_CLOSING) {
			coffer__eq_put(eq);
			return -ENOENT; /* another thread is destroying it */
		}
		eq_drain_running(eq);
	} else if (!atomic_compare_exchange_strong_explicit(
		       &eq->eq_word, &expect, COFFER__EQW_CLOSING,
		       memory_order_seq_cst /* as the fetch_or above */, memory_order_relaxed)) {
		/* one CAS decides against every racing launch: it fails if one counted itself
		 * first, else the launch sees CLOSING */
		coffer__eq_put(eq);
		return (expect & COFFER__EQW_CLOSING) ? -ENOENT : -EBUSY;
	}

	rc = coffer_hhash_delete(eq->eq_hh, &eq->eq_link);
	eq_detach(eq, true);
	/* Wake pollers that sleep on it: they see CLOSING and return -ENOENT. */
	coffer__eq_wake_sleepers(eq);
	coffer__eq_put(eq);
	return rc == 0 || rc == -ENOENT ? 0 : rc;
}

struct poll_cond {
	int wait_running;
};

static bool poll_wake(void *arg, uint64_t word)
{
	const struct poll_cond *pc = arg;

	return coffer__eqw_completed(word) > 0 || (word & COFFER__EQW_CLOSING) ||
	       (pc->wait_running && coffer__eqw_running(word) == 0);
}

COFFER_API int coffer_eq_poll(coffer_handle_t eqh, int wait_running, int64_t timeout_us,
			      unsigned int n, struct coffer_event **events)
{
	struct coffer_hhash *hh = coffer_hhash_global();
	struct poll_cond pc = {.wait_running = wait_running};
	struct coffer_hlink *link, *ref = NULL;
	struct coffer_eq *eq;
	struct timespec deadline;
	unsigned int i, k;
	uint64_t word;
	bool retry;
	int rc = 0;

	if (n == 0 || events == NULL || hh == NULL || !eq_handle_valid(eqh))
		return -EINVAL;
	if (n > INT32_MAX)
		n = INT32_MAX;
	if (timeout_us > 0)
		coffer__eq_deadline(&deadline, timeout_us);

	coffer__rcu_read_lock();
	/* Loaded again inside the section: the runtime's last coffer_fini() frees an
	 * unpublished hash after a grace period (see coffer__eq_get). */
	hh = coffer_hhash_global();
	link = hh == NULL ? NULL : coffer_hhash_lookup_rcu(hh, eqh, COFFER_HTYPE_EQ);
	if (link == NULL) {
		coffer__rcu_read_unlock();
		return hh == NULL ? -EINVAL : -ENOENT;
	}
	eq = COFFER__CONTAINER_OF(link, struct coffer_eq, eq_link);
	for (;;) {
		/* relaxed: CLOSING is only a hint here; destroy's hook detach is what matters */
		if (atomic_load_explicit(&eq->eq_word, memory_order_relaxed) &
		    COFFER__EQW_CLOSING) {
			coffer__eq_wake_sleepers(eq); /* pass the destroy's wake-up on */
			rc = -ENOENT;
			break;
		}
		coffer__eq_progress(eq);
		k = eq_take(eq, n, events, &retry, &word);
		if (k > 0) {
			if (coffer__eqw_completed(word) > 0)
				coffer__eq_wake_sleepers(eq); /* leave the rest to another */
			for (i = 0; i < k; i++)
				coffer__ev_reaped(coffer__evp(events[i]));
			eq_wake_waiters(eq); /* testers, wait_running pollers */
			rc = (int)k;
			break;
		}
		/* wait_running: 0 only when nothing runs and nothing is left to reap. A
		 * completion counts itself COMPLETED (no longer RUNNING) before it links its
		 * event, so RUNNING == 0 alone would miss one still inside its push window. */
		if (timeout_us == 0 ||
		    (wait_running && coffer__eqw_running(word) == 0 &&
		     coffer__eqw_completed(word) == 0) ||
		    (timeout_us > 0 && coffer__eq_deadline_passed(&deadline)))
			break;
		if (ref == NULL) {
			/* Sleeping leaves the read-side section: hold a reference instead. */
			if (coffer_hhash_lookup(hh, eqh, COFFER_HTYPE_EQ, &ref) != 0) {
				rc = -ENOENT;
				break;
			}
		}
		coffer__rcu_read_unlock();
		if (retry || coffer__eqw_completed(word) > 0)
			sched_yield(); /* a completion is inside its push window */
		else
			coffer__eq_sleep(eq, timeout_us > 0 ? &deadline : NULL, poll_wake, &pc,
					 wait_running != 0);
		coffer__rcu_read_lock();
	}
	coffer__rcu_read_unlock();
	if (ref != NULL)
		coffer__eq_put(eq);
	return rc;
}

COFFER_API int coffer_eq_query(coffer_handle_t eqh, unsigned int query, unsigned int n,
			       struct coffer_event **events)
{
	struct coffer__mpsc_node *node;
	struct coffer__evp *ep;
	struct coffer_eq *eq;
	unsigned int count = 0;
	uint64_t word;
	bool retry;
	int rc;

	if (query == 0 || (query & ~COFFER_EQR_ALL) != 0)
		return -EINVAL;
	rc = coffer__eq_get(eqh, &eq);
	if (rc != 0)
		return rc;

	if (events == NULL || n == 0) {
		/* acquire: one consistent snapshot of both counters */
		word = atomic_load_explicit(&eq->eq_word, memory_order_acquire);
		if (query & COFFER_EQR_COMPLETED)
			count += coffer__eqw_completed(word);
		if (query & COFFER_EQR_RUNNING)
			count += coffer__eqw_running(word);
	} else {
		if (query & COFFER_EQR_COMPLETED) {
			reap_lock(eq);
			/* Everything visible moves to the reap list (FIFO kept), then list it. */
			while ((node = mpsc_pop_locked(eq, &retry)) != NULL)
				rl_append_locked(eq, node_evp(node));
			for (ep = eq->eq_rl_head; ep != NULL && count < n; ep = ep->ep_rl_next)
				events[count++] = coffer__evp_event(ep);
			reap_unlock(eq);
		}
		if (query & COFFER_EQR_RUNNING) {
			pthread_mutex_lock(&eq->eq_reg_lock);
			for (ep = eq->eq_reg_head; ep != NULL && count < n; ep = ep->ep_reg_next) {
				/* relaxed: a snapshot; the state may change right after */
				uint32_t st =
				    atomic_load_explicit(&ep->ep_state, memory_order_relaxed);

				if (st == COFFER__EVS_RUNNING || st == COFFER__EVS_OWN_DONE)
					events[count++] = coffer__evp_event(ep);
			}
			pthread_mutex_unlock(&eq->eq_reg_lock);
		}
	}
	coffer__eq_put(eq);
	return count > INT32_MAX ? INT32_MAX : (int)count;
}

int coffer__eq_set_progress(coffer_handle_t eqh, const struct coffer__eq_progress *p)
{
	struct coffer__eq_progress *expect = NULL;
	struct eq_hook *copy;
	struct coffer_eq *eq;
	int rc;
	COFFER__NO_CANCEL(); /* a detach waits for a grace period (runtime/nocancel.h) */

	if (p != NULL && p->progress == NULL)
		return -EINVAL;
	rc = coffer__eq_get(eqh, &eq);
	if (rc != 0)
		return rc;
	if (p == NULL) {
		eq_detach(eq, false);
	} else if (/* relaxed: early refusal; the dead sentinel decides a race */
		   atomic_load_explicit(&eq->eq_word, memory_order_relaxed) & COFFER__EQW_CLOSING) {
		rc = -ENOENT;
	} else if ((copy = malloc(sizeof(*copy))) == NULL) {
		rc = -ENOMEM;
	} else {
		copy->eh_p = *p;
		copy->eh_gen = __atomic_add_fetch(&eq_hook_gens, 1, __ATOMIC_RELAXED); /* from 1 */
		/* release: publishes the copy and its generation (RCU assign); pairs with the
		 * acquire loads */
		if (!atomic_compare_exchange_strong_explicit(&eq->eq_hook, &expect, &copy->eh_p,
							     memory_order_release,
							     memory_order_relaxed)) {
			free(copy);
			rc = expect == EQ_HOOK_DEAD ? -ENOENT : -EBUSY;
		}
	}
	coffer__eq_put(eq);
	return rc;
}

int coffer__eq_wake_fd(coffer_handle_t eqh)
{
	struct coffer_eq *eq;
	int rc;

	rc = coffer__eq_get(eqh, &eq);
	if (rc != 0)
		return rc;
	/* relaxed: a hint (a destroy may start right after, as with any lookup) */
	rc = (atomic_load_explicit(&eq->eq_word, memory_order_relaxed) & COFFER__EQW_CLOSING)
		 ? -ENOENT
		 : eq->eq_fd;
	coffer__eq_put(eq);
	return rc;
}

int coffer__eq_kick(coffer_handle_t eqh)
{
	struct coffer_eq *eq;
	int rc;

	rc = coffer__eq_get(eqh, &eq);
	if (rc != 0)
		return rc;
	/* Unconditionally, not only when eq_sleepers > 0: a poller that has counted itself
	 * but not yet armed could otherwise be missed without a store-load fence here, and
	 * the cost is one write(2) per call (a spare wakeup when nobody sleeps). */
	eq_ring(eq);
	coffer__eq_put(eq);
	return 0;
}
