/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * perf/bench/impl_bucket_rwlock.c - baseline "bucket-rwlock": a model of DAOS's client
 * handle hash after its fix (obj_open 313,038 ops/s): a chained table with one pthread
 * rwlock per bucket (an unpadded array, as DAOS allocates 65,536 of them), an atomic
 * refcount per record, and lock-free cookie generation (one shared atomic counter).
 *
 * Design note:
 *  - Invariants: a record is in exactly one chain while linked, and then holds the table's
 *    reference (ref >= 1). Chains are read under the bucket's read lock and changed under
 *    its write lock.
 *  - Lookup takes the read lock, finds the record and increments ref (relaxed: the record
 *    cannot be freed while we hold the read lock, since unlinking needs the write lock and
 *    the table's reference is dropped only after unlinking).
 *  - Release decrements ref with acq_rel: release so that the holder's reads of the record
 *    happen before a free by another thread, acquire so that the thread that frees sees
 *    every other holder's accesses. The thread that takes ref from 1 to 0 frees the record;
 *    no lookup can reach it (it was unlinked before the table's reference was dropped).
 *  - An old value <= 0 on release is a refcount underflow: reported, record quarantined.
 *  - Progress: blocking (rwlocks); readers of one bucket share its lock's cache line, and
 *    neighbouring buckets' locks share cache lines too - which is what this models.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "hash_impl.h"

struct br_rec {
	struct bh_rec b;
	struct br_rec *next;
	_Atomic int64_t ref;
};

struct br_tab {
	pthread_rwlock_t *locks;
	struct br_rec **buckets;
	uint64_t mask;
	struct bh_ctx *ctx;
	char pad[BENCH_CACHELINE];
	_Atomic uint64_t next_key;
};

static int br_create(const struct bh_params *p, struct bh_ctx *ctx, void **tabp)
{
	size_t n = (size_t)1 << p->buckets_log2, i;
	struct br_tab *t = bench_alloc_aligned(sizeof(*t));

	if (!t)
		return -ENOMEM;
	t->locks = calloc(n, sizeof(*t->locks));
	t->buckets = calloc(n, sizeof(*t->buckets));
	if (!t->locks || !t->buckets) {
		free(t->locks);
		free(t->buckets);
		free(t);
		return -ENOMEM;
	}
	for (i = 0; i < n; i++)
		pthread_rwlock_init(&t->locks[i], NULL);
	t->mask = n - 1;
	t->ctx = ctx;
	atomic_init(&t->next_key, 1);
	*tabp = t;
	return 0;
}

static void br_destroy(void *tab)
{
	struct br_tab *t = tab;
	uint64_t i;

	for (i = 0; i <= t->mask; i++)
		pthread_rwlock_destroy(&t->locks[i]);
	free(t->locks);
	free(t->buckets);
	free(t);
}

static int br_thread_enter(void *tab, void **tlsp)
{
	(void)tab;
	*tlsp = NULL;
	return 0;
}

static void br_thread_exit(void *tab, void *tls)
{
	(void)tab;
	(void)tls;
}

static int br_insert(void *tab, void *tls, unsigned int slot, struct bh_rec **recp)
{
	struct br_tab *t = tab;
	struct br_rec *r = bh_rec_alloc(t->ctx, sizeof(*r), slot);
	uint64_t b;

	(void)tls;
	if (!r)
		return -ENOMEM;
	/* Relaxed: a counter only needs atomicity to hand out unique keys. */
	bh_rec_set_key(&r->b, atomic_fetch_add_explicit(&t->next_key, 1, memory_order_relaxed));
	atomic_init(&r->ref, 1);
	b = bh_mix64(r->b.key) & t->mask;
	pthread_rwlock_wrlock(&t->locks[b]);
	r->next = t->buckets[b];
	t->buckets[b] = r;
	pthread_rwlock_unlock(&t->locks[b]);
	*recp = &r->b;
	return 0;
}

static struct br_rec *br_find_locked(struct br_tab *t, uint64_t b, uint64_t key)
{
	struct br_rec *r;

	for (r = t->buckets[b]; r; r = r->next)
		if (r->b.key == key)
			return r;
	return NULL;
}

static struct bh_rec *br_lookup(void *tab, void *tls, uint64_t key)
{
	struct br_tab *t = tab;
	uint64_t b = bh_mix64(key) & t->mask;
	struct br_rec *r;

	(void)tls;
	pthread_rwlock_rdlock(&t->locks[b]);
	r = br_find_locked(t, b, key);
	if (r) /* relaxed: the read lock keeps the record alive (see design note) */
		atomic_fetch_add_explicit(&r->ref, 1, memory_order_relaxed);
	pthread_rwlock_unlock(&t->locks[b]);
	return r ? &r->b : NULL;
}

static void br_put(struct br_tab *t, struct br_rec *r)
{
	/* acq_rel: pairs with the other holders' release decrements (see design note). */
	int64_t old = atomic_fetch_sub_explicit(&r->ref, 1, memory_order_acq_rel);

	if (old == 1)
		bh_rec_free(t->ctx, &r->b);
	else if (old <= 0)
		bh_error(t->ctx, "bucket-rwlock: refcount below zero");
}

static void br_release(void *tab, void *tls, struct bh_rec *rec)
{
	(void)tls;
	br_put(tab, (struct br_rec *)rec);
}

static uint64_t br_lookup_noref(void *tab, void *tls, uint64_t key)
{
	struct br_tab *t = tab;
	uint64_t b = bh_mix64(key) & t->mask, payload = 0;
	struct br_rec *r;

	(void)tls;
	pthread_rwlock_rdlock(&t->locks[b]);
	r = br_find_locked(t, b, key);
	if (r) {
		payload = r->b.payload;
		if (!bh_rec_valid(&r->b, key))
			bh_error(t->ctx, "bucket-rwlock: lookup returned an invalid record");
	}
	pthread_rwlock_unlock(&t->locks[b]);
	return payload;
}

static int br_delete(void *tab, void *tls, struct bh_rec *rec)
{
	struct br_tab *t = tab;
	struct br_rec *r = (struct br_rec *)rec, **pp;
	uint64_t b = bh_mix64(rec->key) & t->mask;
	int err = -ENOENT;

	(void)tls;
	pthread_rwlock_wrlock(&t->locks[b]);
	for (pp = &t->buckets[b]; *pp; pp = &(*pp)->next) {
		if (*pp == r) {
			*pp = r->next;
			err = 0;
			break;
		}
	}
	pthread_rwlock_unlock(&t->locks[b]);
	if (err == 0)
		br_put(t, r); /* the table's reference */
	return err;
}

/* Exact when no writer runs; walks every bucket under its read lock. */
static uint64_t br_count(void *tab)
{
	struct br_tab *t = tab;
	struct br_rec *r;
	uint64_t b, n = 0;

	for (b = 0; b <= t->mask; b++) {
		pthread_rwlock_rdlock(&t->locks[b]);
		for (r = t->buckets[b]; r; r = r->next)
			n++;
		pthread_rwlock_unlock(&t->locks[b]);
	}
	return n;
}

const struct bh_impl bh_impl_bucket_rwlock = {
    .name = "bucket-rwlock",
    .model = "models DAOS after its fix: per-bucket pthread rwlock (unpadded array) +\n"
	     "                     atomic refcount, lock-free cookie counter",
    .create = br_create,
    .destroy = br_destroy,
    .thread_enter = br_thread_enter,
    .thread_exit = br_thread_exit,
    .insert = br_insert,
    .lookup = br_lookup,
    .release = br_release,
    .lookup_noref = br_lookup_noref,
    .delete = br_delete,
    .count = br_count,
};
