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
 * workers, spreading the frees themselves.
 *
 * Measured (2-core VM shared with other jobs, so ratios only; insert + lookup + putref +
 * delete cycles on one coffer_hhash, 2 threads): batches of 64 gave 3.8-4.0 M cycles/s,
 * one call_rcu per record (COFFER__RECLAIM_BATCH=1) 1.0-1.3 M/s. The queue of records waiting
 * for their grace period peaked at ~230k and did not grow with the run (223k after 1M cycles
 * per thread, 311k after 6M): the single default worker keeps up here. Per-CPU workers did
 * not help on 2 busy cores (2.5 vs 3.9 M/s) and so stay opt-in; design.md reports them
 * doubling an RCU table's open/close rate on 16 cores.
 *
 * Invariants.
 *  R1 A batch is reachable from exactly one place: its thread's rt_cur (under rt_mu), or
 *     call_rcu's queue, or a running callback.
 *  R2 Every thread that ever retired a record has a reclaim_tls on the registry list until it
 *     exits (pthread key destructor) or, after fork, until the first flush in the child; so
 *     coffer__reclaim_flush_all() reaches every partial batch of the process.
 *  R3 A record enters a batch only after its last reference was dropped (htab.c I3) and its
 *     free runs in a callback, i.e. after a grace period that began after the drop.
 *
 * Lock order: reg_mu -> rt_mu. Neither is held across call_rcu or malloc (fork-prepare takes
 * liburcu's call_rcu_mutex, then urcu-bp's registry lock, then reg_mu; call_rcu may take the
 * first, registration the second), and a thread registers with urcu-bp before taking reg_mu.
 *
 * Memory ordering: rt_cur/rt_spare are under rt_mu / thread-private; the hand-off to the
 * worker is ordered by call_rcu's queue (and annotated for TSan on the rcu_head). The
 * backlog counter is a relaxed statistic.
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

struct reclaim_batch {
	struct rcu_head rb_head;
	unsigned int rb_n;
	struct reclaim_batch *rb_next; /* flush_all's private list, before submission */
	struct {
		struct coffer_htab *tab;
		struct coffer_hnode *node;
	} rb_item[RECLAIM_BATCH];
};

struct reclaim_tls {
	pthread_mutex_t rt_mu;		       /* guards rt_cur against flushers */
	struct reclaim_batch *rt_cur;	       /* partial batch, or NULL */
	bool rt_dead;			       /* owner thread gone (fork child); reg_mu */
	struct reclaim_tls *rt_next, *rt_prev; /* registry; reg_mu */
};

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct reclaim_tls reg_head = {.rt_next = &reg_head, .rt_prev = &reg_head};
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t tls_key;
static bool tls_key_ok;
static int64_t backlog; /* records handed to call_rcu and not yet freed; atomic-relaxed */

enum { TLS_NONE = 0, TLS_LIVE, TLS_GONE };
static __thread struct reclaim_tls *my_tls;
static __thread struct reclaim_batch *my_spare; /* thread-private, preallocated batch */
static __thread int my_state;
static __thread bool my_force_single; /* tests: take the per-record path */

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

static void batch_cb(struct rcu_head *head)
{
	struct reclaim_batch *b =
	    (struct reclaim_batch *)(void *)((char *)head -
					     offsetof(struct reclaim_batch, rb_head));
	unsigned int i = 0;

	coffer__tsan_acquire(b);
	coffer__rcu_gp_acquire();
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
	free(b);
	coffer__rcu_cb_done();
}

static void batch_submit(struct reclaim_batch *b)
{
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

/* Thread exit: hand the partial batch over and leave the registry. */
static void tls_destructor(void *p)
{
	struct reclaim_tls *t = p;
	struct reclaim_batch *b;

	my_state = TLS_GONE; /* later retires from other destructors go per record */
	my_tls = NULL;
	rcu_register_self();
	pthread_mutex_lock(&reg_mu);
	reg_remove(t);
	pthread_mutex_unlock(&reg_mu);
	/* Unlisted: no flusher can reach rt_cur any more. */
	b = t->rt_cur;
	if (b)
		batch_submit(b);
	pthread_mutex_destroy(&t->rt_mu);
	free(t);
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
		batch_submit(full);
}

void coffer__reclaim_flush_all(void)
{
	struct reclaim_tls *t, *next;
	struct reclaim_batch *list = NULL, *b;

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
			reg_remove(t);
			pthread_mutex_destroy(&t->rt_mu);
			free(t);
		}
	}
	pthread_mutex_unlock(&reg_mu);
	/* Submitted with no coffer lock held: call_rcu may take liburcu's call_rcu_mutex, which
	 * fork-prepare takes before reg_mu. */
	while (list) {
		b = list;
		list = b->rb_next;
		batch_submit(b);
	}
}

int64_t coffer__reclaim_backlog(void)
{
	return __atomic_load_n(&backlog, __ATOMIC_RELAXED);
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
		if (t != my_tls)
			t->rt_dead = true;
	}
	pthread_mutex_init(&reg_mu, NULL);
}
