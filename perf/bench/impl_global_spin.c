/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * perf/bench/impl_global_spin.c - baseline "global-spin": a model of DAOS's client handle
 * hash before its fix (obj_open at 427 ops/s): one chained table behind ONE global spinlock;
 * lookup, insert, delete, addref and release all take it.
 *
 * Design note:
 *  - Invariants: a record is in exactly one chain while linked; rl_ref counts the table's
 *    reference plus one per lookup holder; everything below is read and written under
 *    gs_lock, so no atomics are needed on the record (as in DAOS, where d_hash_rec_addref
 *    took the table lock).
 *  - Reclamation: the last reference dropped (under the lock) frees the record after the
 *    lock is released; no lookup can reach it because it was unlinked under the same lock.
 *  - Keys: one shared atomic counter (relaxed fetch-add: uniqueness needs only atomicity),
 *    as DAOS's lock-free cookie generation.
 *  - Progress: blocking (spinlock); lookups serialise with everything.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "hash_impl.h"

struct gs_rec {
	struct bh_rec b;
	struct gs_rec *next;
	int64_t ref; /* under gs_lock; signed so that an underflow is visible */
};

struct gs_tab {
	pthread_spinlock_t lock;
	char pad0[BENCH_CACHELINE - sizeof(pthread_spinlock_t)];
	_Atomic uint64_t next_key;
	char pad1[BENCH_CACHELINE - sizeof(uint64_t)];
	struct gs_rec **buckets;
	uint64_t mask;
	uint64_t count; /* under lock */
	struct bh_ctx *ctx;
};

static int gs_create(const struct bh_params *p, struct bh_ctx *ctx, void **tabp)
{
	struct gs_tab *t = bench_alloc_aligned(sizeof(*t));

	if (!t)
		return -ENOMEM;
	t->buckets = calloc((size_t)1 << p->buckets_log2, sizeof(*t->buckets));
	if (!t->buckets) {
		free(t);
		return -ENOMEM;
	}
	pthread_spin_init(&t->lock, PTHREAD_PROCESS_PRIVATE);
	atomic_init(&t->next_key, 1);
	t->mask = ((uint64_t)1 << p->buckets_log2) - 1;
	t->count = 0;
	t->ctx = ctx;
	*tabp = t;
	return 0;
}

static void gs_destroy(void *tab)
{
	struct gs_tab *t = tab;

	pthread_spin_destroy(&t->lock);
	free(t->buckets);
	free(t);
}

static int gs_thread_enter(void *tab, void **tlsp)
{
	(void)tab;
	*tlsp = NULL;
	return 0;
}

static void gs_thread_exit(void *tab, void *tls)
{
	(void)tab;
	(void)tls;
}

static int gs_insert(void *tab, void *tls, unsigned int slot, struct bh_rec **recp)
{
	struct gs_tab *t = tab;
	struct gs_rec *r = bh_rec_alloc(t->ctx, sizeof(*r), slot);
	uint64_t b;

	(void)tls;
	if (!r)
		return -ENOMEM;
	bh_rec_set_key(&r->b, atomic_fetch_add_explicit(&t->next_key, 1, memory_order_relaxed));
	r->ref = 1;
	b = bh_mix64(r->b.key) & t->mask;
	pthread_spin_lock(&t->lock);
	r->next = t->buckets[b];
	t->buckets[b] = r;
	t->count++;
	pthread_spin_unlock(&t->lock);
	*recp = &r->b;
	return 0;
}

static struct gs_rec *gs_find_locked(struct gs_tab *t, uint64_t key)
{
	struct gs_rec *r;

	for (r = t->buckets[bh_mix64(key) & t->mask]; r; r = r->next)
		if (r->b.key == key)
			return r;
	return NULL;
}

static struct bh_rec *gs_lookup(void *tab, void *tls, uint64_t key)
{
	struct gs_tab *t = tab;
	struct gs_rec *r;

	(void)tls;
	pthread_spin_lock(&t->lock);
	r = gs_find_locked(t, key);
	if (r)
		r->ref++;
	pthread_spin_unlock(&t->lock);
	return r ? &r->b : NULL;
}

/* Drops one reference; frees after unlocking when it was the last. */
static void gs_put(struct gs_tab *t, struct gs_rec *r)
{
	int64_t ref;

	pthread_spin_lock(&t->lock);
	ref = --r->ref;
	pthread_spin_unlock(&t->lock);
	if (ref == 0)
		bh_rec_free(t->ctx, &r->b);
	else if (ref < 0)
		bh_error(t->ctx, "global-spin: refcount below zero");
}

static void gs_release(void *tab, void *tls, struct bh_rec *rec)
{
	(void)tls;
	gs_put(tab, (struct gs_rec *)rec);
}

static uint64_t gs_lookup_noref(void *tab, void *tls, uint64_t key)
{
	struct gs_tab *t = tab;
	struct gs_rec *r;
	uint64_t payload = 0;

	(void)tls;
	pthread_spin_lock(&t->lock);
	r = gs_find_locked(t, key);
	if (r) {
		payload = r->b.payload;
		if (!bh_rec_valid(&r->b, key))
			bh_error(t->ctx, "global-spin: lookup returned an invalid record");
	}
	pthread_spin_unlock(&t->lock);
	return payload;
}

static int gs_delete(void *tab, void *tls, struct bh_rec *rec)
{
	struct gs_tab *t = tab;
	struct gs_rec *r = (struct gs_rec *)rec, **pp;
	int err = -ENOENT;

	(void)tls;
	pthread_spin_lock(&t->lock);
	for (pp = &t->buckets[bh_mix64(rec->key) & t->mask]; *pp; pp = &(*pp)->next) {
		if (*pp == r) {
			*pp = r->next;
			t->count--;
			err = 0;
			break;
		}
	}
	pthread_spin_unlock(&t->lock);
	if (err == 0)
		gs_put(t, r); /* the table's reference */
	return err;
}

static uint64_t gs_count(void *tab)
{
	struct gs_tab *t = tab;
	uint64_t n;

	pthread_spin_lock(&t->lock);
	n = t->count;
	pthread_spin_unlock(&t->lock);
	return n;
}

const struct bh_impl bh_impl_global_spin = {
    .name = "global-spin",
    .model = "models DAOS before its fix: one global spinlock over a chained table;\n"
	     "                     lookup, addref, release, insert, delete all take it",
    .create = gs_create,
    .destroy = gs_destroy,
    .thread_enter = gs_thread_enter,
    .thread_exit = gs_thread_exit,
    .insert = gs_insert,
    .lookup = gs_lookup,
    .release = gs_release,
    .lookup_noref = gs_lookup_noref,
    .delete = gs_delete,
    .count = gs_count,
};
