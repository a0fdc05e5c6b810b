/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * hashtable/reclaim.c - batched deferred freeing of unlinked records.
 *
 * Design note
 * -----------
 * Why batch. liburcu's call_rcu enqueues every callback on one wait-free queue per worker
 * (an xchg on the queue tail: one shared cache line written per call) and one worker thread
 * per process frees everything. Under open/close load that is a shared atomic per delete
 * plus a backlog (design.md: 3M records behind after 5 s). Here each thread collects the
 * records whose last reference it dropped into a private batch of RECLAIM_BATCH entries and
 * hands the whole batch to call_rcu with one rcu_head: one queue operation and one callback
 * per 64 frees. With COFFER_RCU_PERCPU=1 (runtime/rcu.c) the batches also go to per-CPU
 * workers.
 *
 * Why hand batches back. The call_rcu worker does not free a thread's batch itself: after the
 * grace period it pushes the batch on the thread's ready stack (one CAS per 64 records), and
 * the thread frees it at its next retire. So records are freed by the thread that allocated
 * them (in the usual case): into glibc's per-thread tcache and its own arena, where the next
 * malloc takes them back, instead of from the worker, which contended for the allocating
 * thread's arena lock (futex waits and wakes in the profile), and the worker's only work is
 * the grace period. Memory between ready and freed is bounded by what the thread retired in
 * one grace period; a thread that stops retiring keeps its ready batches until it retires
 * again, exits, or a barrier (destroy, fini) frees them.
 *
 * Measured (2-core VM shared with other jobs, so ratios only; `coffer-bench hash --workload
 * open-close`, same run, records malloc'd by the benchmark): batches freed by the worker gave
 * 3.4 (1 thread) / 4.8 (2 threads) M cycles/s against bucket-rwlock's 5.4 / 3.5; handed back,
 * 7.7 / 8.3-9.1 against 5.7-6.4 / 3.1-4.3. Earlier, one call_rcu per record
 * (COFFER__RECLAIM_BATCH=1) gave 1.0-1.3 M/s against 3.8-4.0 for batches of 64. Per-CPU
 * workers did not help on 2 busy cores and stay opt-in; design.md reports them doubling an RCU
 * table's open/close rate on 16 cores.
 *
 * Invariants.
 *  R1 A batch is reachable from exactly one place: its thread's rt_cur (under rt_mu), or
 *     call_rcu's queue, or a running callback, or one thread's ready stack, or the private
 *     list of whoever took that stack.
 *  R2 Every thread that ever retired a record has a reclaim_tls on the registry list until it
 *     exits (pthread key destructor) or, after fork, until the first flush in the child; so
 *     coffer__reclaim_flush_all() reaches every partial batch of the process.
 *  R3 A record enters a batch only after its last reference was dropped (htab.c I3) and its
 *     free runs after a grace period that began after the drop: in the callback, or later
 *     from a ready stack.
 *  R4 A batch submitted by its owner names it (rb_owner) and holds a reference on its
 *     reclaim_tls (rt_refs: 1 for the owner until it exits, +1 per such batch in flight), so
 *     the callback can always push on the owner's ready stack. An owner that stops freeing
 *     (exit; fork orphan) sets rt_gone (SEQ_CST) and then takes its stack; a callback pushes
 *     (SEQ_CST) and then reads rt_gone: with both SEQ_CST, at least one of them sees the
 *     other, so a batch pushed late is taken back and freed by its callback. The last
 *     reference frees the reclaim_tls.
 *  R5 Whoever frees a ready stack it took does so holding drain_rw for reading and with no
 *     coffer lock. coffer__reclaim_drain_all() (in coffer__rcu_barrier, after rcu_barrier)
 *     takes every listed stack, then write-locks drain_rw once, which waits for every free
 *     of a stack taken before; so when a barrier returns, every record retired before it
 *     began has been freed (destroy's promise). Fork-prepare write-locks it first, so no free
 *     is half-done in the child.
 *
 * Lock order: drain_rw -> reg_mu -> rt_mu. drain_rw is held (read) across hop_rec_free, which
 * may retire (rt_mu, call_rcu) but must not wait for a grace period; reg_mu and rt_mu are
 * never held across call_rcu, malloc or a free (fork-prepare takes
 * liburcu's call_rcu_mutex, then urcu-bp's registry lock, then reg_mu; call_rcu may take the
 * first, registration the second), and a thread registers with urcu-bp before taking reg_mu.
 *
 * Memory ordering: rt_cur/rt_spare are under rt_mu / thread-private; the hand-off to the
 * worker is ordered by call_rcu's queue (and annotated for TSan on the rcu_head), the hand
 * back by the ready stack's SEQ_CST CAS and exchange (R4). The backlog counter (records
 * retired and not yet freed, ready stacks included) is a relaxed statistic.
 *
 * Failure: when no batch can be allocated (ENOMEM) or the thread is exiting, the record is
 * freed through its own rcu_head (hn_rcu), one call_rcu per record: slower, never lost.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

#include "hashtable/htab_internal.h"

/* Records per call_rcu. Overridable at build time only to measure batching (1 = one
 * call_rcu per record, as without batching). */
#ifdef COFFER__RECLAIM_BATCH
#define RECLAIM_BATCH COFFER__RECLAIM_BATCH
#else
#define RECLAIM_BATCH 64
#endif

struct reclaim_tls;

struct reclaim_batch {
	struct rcu_head rb_head;
	unsigned int rb_n;
	struct reclaim_batch *rb_next; /* flush_all's private list, or a ready stack */
	struct reclaim_tls *rb_owner;  /* thread that frees it after the grace period, or NULL:
					* the callback frees it */
	struct {
		struct coffer_htab *tab;
		struct coffer_hnode *node;
	} rb_item[RECLAIM_BATCH];
};

struct reclaim_tls {
	pthread_mutex_t rt_mu;		/* guards rt_cur against flushers */
	struct reclaim_batch *rt_cur;	/* partial batch, or NULL */
	struct reclaim_batch *rt_ready; /* atomic stack: past their grace period (R4) */
	uint32_t rt_refs;		/* atomic: owner (1 while listed) + batches in flight */
	uint32_t rt_gone;		/* atomic: the owner stopped freeing (exit, fork) */
	bool rt_dead;			/* owner thread gone (fork child); reg_mu */
	struct reclaim_tls *rt_next, *rt_prev; /* registry; reg_mu */
};

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct reclaim_tls reg_head = {.rt_next = &reg_head, .rt_prev = &reg_head};
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t tls_key;
static bool tls_key_ok;
static int64_t backlog; /* records handed to call_rcu and not yet freed; atomic-relaxed */
/* Read-held by every thread freeing a ready list it took (R5); write-taken by barriers and
 * fork to wait until no such free is in progress. */
static pthread_rwlock_t drain_rw = PTHREAD_RWLOCK_INITIALIZER;

enum { TLS_NONE = 0, TLS_LIVE, TLS_GONE };
static __thread struct reclaim_tls *my_tls;
static __thread struct reclaim_batch *my_spare; /* thread-private, preallocated batch */
static __thread int my_state;
static __thread bool my_force_single; /* tests: take the per-record path */
static __thread bool my_draining;     /* freeing a ready list: nested retires do not drain */

void coffer__reclaim_force_single(bool on)
{
	my_force_single = on;
}

static void node_cb(struct rcu_head *head)
{
	struct coffer_hnode *node =
	    (struct coffer_hnode *)(void *)((char *)head - offsetof(struct coffer_hnode, hn_rcu));
	struct coffer_htab *tab;

	coffer__tsan_acquire(head); /* before reading anything the submitter wrote */
	coffer__rcu_gp_acquire();
	tab = node->hn_rcu[2];
	coffer__htab_rec_free(tab, node);
	__atomic_fetch_sub(&backlog, 1, __ATOMIC_RELAXED);
	coffer__htab_freed(tab, 1);
	coffer__rcu_cb_done();
}

/* Free the records of @b (not @b itself), after their grace period. */
static void batch_free_records(struct reclaim_batch *b)
{
	unsigned int i = 0;

	__atomic_fetch_sub(&backlog, (int64_t)b->rb_n, __ATOMIC_RELAXED);
	while (i < b->rb_n) {
		/* Account frees per run of one table: after the last free of a destroyed table
		 * coffer__htab_freed() frees the table, so count only what is already freed. */
		struct coffer_htab *tab = b->rb_item[i].tab;
		unsigned int j = i;

		for (; j < b->rb_n && b->rb_item[j].tab == tab; j++)
			coffer__htab_rec_free(tab, b->rb_item[j].node);
		coffer__htab_freed(tab, (int64_t)(j - i));
		i = j;
	}
}

/* Push @b on @t's ready stack. SEQ_CST: pairs with the rt_gone store/load (R4). */
static void ready_push(struct reclaim_tls *t, struct reclaim_batch *b)
{
	struct reclaim_batch *old = __atomic_load_n(&t->rt_ready, __ATOMIC_RELAXED);

	do
		b->rb_next = old;
	while (!__atomic_compare_exchange_n(&t->rt_ready, &old, b, true, __ATOMIC_SEQ_CST,
					    __ATOMIC_RELAXED));
}

/* Take @t's whole ready stack (one exchange: no ABA). SEQ_CST: as ready_push; its acquire
 * half orders the pushers' writes (and their grace periods) before our frees. */
static struct reclaim_batch *ready_take(struct reclaim_tls *t)
{
	return __atomic_exchange_n(&t->rt_ready, NULL, __ATOMIC_SEQ_CST);
}

/* Free every record of the batches on @list; the first batch becomes this thread's spare when
 * @keep_spare and it has none, the others go back to malloc. */
static void ready_free(struct reclaim_batch *list, bool keep_spare)
{
	while (list) {
		struct reclaim_batch *b = list;

		list = b->rb_next;
		coffer__tsan_acquire(b);
		coffer__rcu_gp_acquire();
		batch_free_records(b);
		if (keep_spare && !my_spare)
			my_spare = b;
		else
			free(b);
	}
}

/* Take @t's ready stack and push its batches onto @list. Return: the new list. */
static struct reclaim_batch *ready_take_onto(struct reclaim_tls *t, struct reclaim_batch *list)
{
	struct reclaim_batch *b = ready_take(t);

	while (b) {
		struct reclaim_batch *n = b->rb_next;

		b->rb_next = list;
		list = b;
		b = n;
	}
	return list;
}

/* Free a ready list this thread took, as a reader of drain_rw so that a barrier or
 * fork-prepare waits for it (R5). */
static void ready_free_reader(struct reclaim_batch *list)
{
	my_draining = true;
	pthread_rwlock_rdlock(&drain_rw);
	ready_free(list, false);
	pthread_rwlock_unlock(&drain_rw);
	my_draining = false;
}

/* Free what @t's owner has not freed yet, on this thread, holding drain_rw for reading (R5). */
static void drain_ready(struct reclaim_tls *t, bool keep_spare)
{
	struct reclaim_batch *list;

	if (!__atomic_load_n(&t->rt_ready, __ATOMIC_RELAXED))
		return;
	my_draining = true;
	pthread_rwlock_rdlock(&drain_rw);
	list = ready_take(t);
	ready_free(list, keep_spare);
	pthread_rwlock_unlock(&drain_rw);
	my_draining = false;
}

/* Drop a reference on @t; the last one frees it (its ready stack is empty by then, R4). */
static void tls_unref(struct reclaim_tls *t)
{
	if (__atomic_sub_fetch(&t->rt_refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	ready_free(ready_take(t), false);
	pthread_mutex_destroy(&t->rt_mu);
	free(t);
}

static void batch_cb(struct rcu_head *head)
{
	struct reclaim_batch *b =
	    (struct reclaim_batch *)(void *)((char *)head -
					     offsetof(struct reclaim_batch, rb_head));
	struct reclaim_tls *t;

	coffer__tsan_acquire(b); /* before reading anything the submitter wrote */
	coffer__rcu_gp_acquire();
	t = b->rb_owner;
	if (t) {
		/* Hand the batch back: its owner frees it on its next retire (R4). If the owner
		 * stopped freeing meanwhile, take back whatever is on its stack ourselves. */
		coffer__tsan_release(b);
		ready_push(t, b);
		if (__atomic_load_n(&t->rt_gone, __ATOMIC_SEQ_CST))
			ready_free(ready_take(t), false);
		tls_unref(t);
	} else {
		batch_free_records(b);
		free(b);
	}
	coffer__rcu_cb_done();
}

static void batch_submit(struct reclaim_batch *b, struct reclaim_tls *owner)
{
	b->rb_owner = owner;
	if (owner) /* the caller holds the owner's own reference: the count is >= 1 */
		__atomic_fetch_add(&owner->rt_refs, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&backlog, (int64_t)b->rb_n, __ATOMIC_RELAXED);
	coffer__tsan_release(b);
	urcu_bp_call_rcu(&b->rb_head, batch_cb);
}

static void node_submit(struct coffer_htab *tab, struct coffer_hnode *node)
{
	struct rcu_head *head = (struct rcu_head *)(void *)node->hn_rcu;

	node->hn_rcu[2] = tab;
	__atomic_fetch_add(&backlog, 1, __ATOMIC_RELAXED);
	coffer__tsan_release(head);
	urcu_bp_call_rcu(head, node_cb);
}

static void reg_insert(struct reclaim_tls *t)
{
	t->rt_next = &reg_head;
	t->rt_prev = reg_head.rt_prev;
	reg_head.rt_prev->rt_next = t;
	reg_head.rt_prev = t;
}

static void reg_remove(struct reclaim_tls *t)
{
	t->rt_prev->rt_next = t->rt_next;
	t->rt_next->rt_prev = t->rt_prev;
}

/* Make sure the calling thread is registered with urcu-bp (see the lock order above). */
static void rcu_register_self(void)
{
	coffer__rcu_read_lock();
	coffer__rcu_read_unlock();
}

/* Thread exit: free what was handed back, hand the partial batch over, leave the registry. */
static void tls_destructor(void *p)
{
	struct reclaim_tls *t = p;
	struct reclaim_batch *b;

	my_state = TLS_GONE; /* later retires from other destructors go per record */
	my_tls = NULL;
	rcu_register_self();
	/* From now on callbacks free this thread's batches themselves (R4); what they handed
	 * back before is freed here, while still listed, so that a barrier waits for it (R5). */
	__atomic_store_n(&t->rt_gone, 1, __ATOMIC_SEQ_CST);
	my_draining = true;
	pthread_rwlock_rdlock(&drain_rw);
	ready_free(ready_take(t), false);
	pthread_rwlock_unlock(&drain_rw);
	my_draining = false;
	pthread_mutex_lock(&reg_mu);
	reg_remove(t);
	pthread_mutex_unlock(&reg_mu);
	/* Unlisted: no flusher can reach rt_cur any more. */
	b = t->rt_cur;
	t->rt_cur = NULL;
	if (b)
		batch_submit(b, NULL);
	tls_unref(t); /* the owner's reference; batches in flight keep @t until their callback */
	free(my_spare);
	my_spare = NULL;
}

static void key_create(void)
{
	tls_key_ok = pthread_key_create(&tls_key, tls_destructor) == 0;
}

static struct reclaim_tls *tls_get(void)
{
	struct reclaim_tls *t = my_tls;

	if (__builtin_expect(t != NULL, 1))
		return t;
	if (my_state == TLS_GONE)
		return NULL;
	pthread_once(&key_once, key_create);
	if (!tls_key_ok)
		return NULL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	pthread_mutex_init(&t->rt_mu, NULL);
	t->rt_refs = 1; /* the owner's */
	if (pthread_setspecific(tls_key, t) != 0) {
		pthread_mutex_destroy(&t->rt_mu);
		free(t);
		return NULL;
	}
	rcu_register_self();
	pthread_mutex_lock(&reg_mu);
	reg_insert(t);
	pthread_mutex_unlock(&reg_mu);
	my_tls = t;
	my_state = TLS_LIVE;
	return t;
}

void coffer__reclaim(struct coffer_htab *tab, struct coffer_hnode *node)
{
	struct reclaim_tls *t = tls_get();
	struct reclaim_batch *b, *full = NULL;

	if (!t || my_force_single) {
		node_submit(tab, node);
		return;
	}
	/* Free what came back from call_rcu first (R4): on this thread, in malloc's per-thread
	 * caches, and it refills my_spare. Not from inside such a free (a hop_rec_free that
	 * deletes other records): the outer drain finishes the list. */
	if (!my_draining)
		drain_ready(t, true);
	if (!my_spare)
		my_spare = malloc(sizeof(*my_spare)); /* outside any lock; may fail */
	/* Uncontended except against a flush: the mutex's line is this thread's own. */
	pthread_mutex_lock(&t->rt_mu);
	b = t->rt_cur;
	if (!b) {
		if (!my_spare) {
			/* No batch and no memory for one: this record goes alone. */
			pthread_mutex_unlock(&t->rt_mu);
			node_submit(tab, node);
			return;
		}
		b = t->rt_cur = my_spare;
		my_spare = NULL;
		b->rb_n = 0;
	}
	b->rb_item[b->rb_n].tab = tab;
	b->rb_item[b->rb_n].node = node;
	if (++b->rb_n == RECLAIM_BATCH) {
		full = b;
		t->rt_cur = NULL;
	}
	pthread_mutex_unlock(&t->rt_mu);
	if (full)
		batch_submit(full, t);
}

void coffer__reclaim_flush_all(void)
{
	struct reclaim_tls *t, *next, *dead = NULL;
	struct reclaim_batch *list = NULL, *ready = NULL, *b;

	rcu_register_self();
	pthread_mutex_lock(&reg_mu);
	for (t = reg_head.rt_next; t != &reg_head; t = next) {
		next = t->rt_next;
		pthread_mutex_lock(&t->rt_mu);
		b = t->rt_cur;
		t->rt_cur = NULL;
		pthread_mutex_unlock(&t->rt_mu);
		if (b) {
			b->rb_next = list;
			list = b;
		}
		if (t->rt_dead) {
			/* An orphan of fork: nobody frees its ready stack but us (R4). */
			reg_remove(t);
			__atomic_store_n(&t->rt_gone, 1, __ATOMIC_SEQ_CST);
			ready = ready_take_onto(t, ready);
			t->rt_next = dead; /* unlisted: the link is ours now */
			dead = t;
		}
	}
	pthread_mutex_unlock(&reg_mu);
	/* The owner's reference of each orphan, dropped outside reg_mu: the last reference frees
	 * records (hop_rec_free may use coffer). */
	while (dead) {
		t = dead;
		dead = t->rt_next;
		tls_unref(t);
	}
	/* Submitted with no coffer lock held: call_rcu may take liburcu's call_rcu_mutex, which
	 * fork-prepare takes before reg_mu. */
	while (list) {
		b = list;
		list = b->rb_next;
		batch_submit(b, NULL);
	}
	if (ready)
		ready_free_reader(ready);
}

void coffer__reclaim_drain_all(void)
{
	struct reclaim_batch *list = NULL;

	rcu_register_self();
	pthread_mutex_lock(&reg_mu);
	for (struct reclaim_tls *t = reg_head.rt_next; t != &reg_head; t = t->rt_next) {
		list = ready_take_onto(t, list);
	}
	pthread_mutex_unlock(&reg_mu);
	/* Wait for the frees of lists their owners took before us (R5)... */
	pthread_rwlock_wrlock(&drain_rw);
	pthread_rwlock_unlock(&drain_rw);
	/* ...and free the rest here, outside every coffer lock (hop_rec_free may use coffer). */
	if (list)
		ready_free_reader(list);
}

int64_t coffer__reclaim_backlog(void)
{
	return __atomic_load_n(&backlog, __ATOMIC_RELAXED);
}

void coffer__reclaim_atfork_pre(void)
{
	/* First of all fork handlers: wait until no thread is freeing a ready list it took, so
	 * that no record is half-way through its free in the child (R5). */
	pthread_rwlock_wrlock(&drain_rw);
}

void coffer__reclaim_atfork_post_parent(void)
{
	pthread_rwlock_unlock(&drain_rw);
}

void coffer__reclaim_atfork_post_child(void)
{
	pthread_rwlock_init(&drain_rw, NULL);
}

void coffer__reclaim_atfork_prepare(void)
{
	pthread_mutex_lock(&reg_mu);
	for (struct reclaim_tls *t = reg_head.rt_next; t != &reg_head; t = t->rt_next)
		pthread_mutex_lock(&t->rt_mu);
}

void coffer__reclaim_atfork_parent(void)
{
	for (struct reclaim_tls *t = reg_head.rt_next; t != &reg_head; t = t->rt_next)
		pthread_mutex_unlock(&t->rt_mu);
	pthread_mutex_unlock(&reg_mu);
}

void coffer__reclaim_atfork_child(void)
{
	/* Only the forking thread survives: the others' entries are orphans whose partial
	 * batches the next flush hands over (their records are the child's copies). */
	for (struct reclaim_tls *t = reg_head.rt_next; t != &reg_head; t = t->rt_next) {
		pthread_mutex_init(&t->rt_mu, NULL);
		if (t != my_tls) {
			/* Callbacks moved to the child's worker free these threads' batches
			 * themselves; the next flush frees their ready stacks (R4). */
			t->rt_dead = true;
			__atomic_store_n(&t->rt_gone, 1, __ATOMIC_RELAXED);
		}
	}
	pthread_mutex_init(&reg_mu, NULL);
}
