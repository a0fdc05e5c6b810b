/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * perf/bench/impl_ck_hs.c - baseline "ck-hs": Concurrency Kit's ck_hs open-addressing hash
 * set in its single-producer / multi-consumer mode, as ck intends it to be used: every
 * writer takes one global writer lock (a pthread mutex), readers run lock-free inside
 * ck_epoch sections, and memory (records, and the old maps ck_hs drops when it grows) is
 * reclaimed through ck_epoch, each thread owning one epoch record. Records carry an atomic
 * refcount with get-unless-zero for lookups that keep them; keys come from one shared atomic
 * counter (as DAOS's cookies).
 *
 * Design note:
 *  - Invariants: ck_hs is SPMC - at most one writer at a time (ckh_lock), any number of
 *    concurrent ck_hs_get callers. A linked record holds the table's reference.
 *  - Reclamation: whoever takes a record's ref from 1 to 0 defers the free with ck_epoch_call
 *    on its own epoch record (ck_epoch_call is owner-only), and polls that record every
 *    CKH_POLL_EVERY deferrals; a thread leaving the run calls ck_epoch_barrier on its record,
 *    so nothing it deferred is left behind. ck_hs's deferred frees of old maps go through
 *    the calling writer's record the same way (a thread-local pointer names it).
 *  - get-unless-zero / release: as in impl_urcu_lfht.c (acquire CAS, acq_rel decrement).
 *  - Progress: lookups lock-free; writers blocking on one lock (the model being measured).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <ck_epoch.h>
#include <ck_hs.h>

#include "hash_impl.h"

/* Deferrals between two polls of a thread's epoch record. */
#define CKH_POLL_EVERY 64

struct ckh_rec {
	struct bh_rec b; /* first: ck_hs hashes and compares the key at offset 0 */
	_Atomic int64_t ref;
	ck_epoch_entry_t entry;
	struct bh_ctx *ctx;
};

/* A map ck_hs asked us to free once no reader can see it. */
struct ckh_deferred {
	ck_epoch_entry_t entry;
	void *p;
};

struct ckh_tls {
	ck_epoch_record_t rec; /* cache-line aligned by ck; lives until the table is destroyed */
	struct ckh_tls *next;  /* every tls ever registered, for destroy */
	unsigned int deferred;
};

struct ckh_tab {
	ck_hs_t hs;
	ck_epoch_t epoch;
	pthread_mutex_t lock; /* the single writer lock */
	pthread_mutex_t tls_lock;
	struct ckh_tls *tls_all;
	struct bh_ctx *ctx;
	char pad[BENCH_CACHELINE];
	_Atomic uint64_t next_key;
};

/* The epoch record of the calling thread, for ck_hs's deferred frees (writer lock held). */
static _Thread_local struct ckh_tls *ckh_self;

static unsigned long ckh_hash(const void *obj, unsigned long seed)
{
	return (unsigned long)bh_mix64(*(const uint64_t *)obj ^ seed);
}

static bool ckh_compare(const void *a, const void *b)
{
	return *(const uint64_t *)a == *(const uint64_t *)b;
}

static void *ckh_malloc(size_t n)
{
	return malloc(n);
}

static void ckh_map_free_cb(ck_epoch_entry_t *e)
{
	struct ckh_deferred *d = (struct ckh_deferred *)e;

	bh_tsan_acquire(e);
	free(d->p);
	free(d);
}

static void ckh_free(void *p, size_t n, bool defer)
{
	struct ckh_deferred *d;

	(void)n;
	if (!defer || !ckh_self) {
		free(p);
		return;
	}
	d = malloc(sizeof(*d));
	if (!d) {
		/* No memory to defer with: wait for every reader instead. */
		ck_epoch_synchronize(&ckh_self->rec);
		free(p);
		return;
	}
	d->p = p;
	bh_tsan_release(&d->entry);
	ck_epoch_call(&ckh_self->rec, &d->entry, ckh_map_free_cb);
}

static struct ck_malloc ckh_allocator = {
    .malloc = ckh_malloc,
    .realloc = NULL,
    .free = ckh_free,
};

static int ckh_create(const struct bh_params *p, struct bh_ctx *ctx, void **tabp)
{
	struct ckh_tab *t = bench_alloc_aligned(sizeof(*t));
	unsigned long cap = 1ul << p->buckets_log2;

	if (!t)
		return -ENOMEM;
	while (cap < 2 * p->capacity) /* ck_hs grows past half full; start past that */
		cap <<= 1;
	ck_epoch_init(&t->epoch);
	if (!ck_hs_init(&t->hs, CK_HS_MODE_SPMC | CK_HS_MODE_OBJECT | CK_HS_MODE_DELETE, ckh_hash,
			ckh_compare, &ckh_allocator, cap, 0x5eed)) {
		free(t);
		return -ENOMEM;
	}
	pthread_mutex_init(&t->lock, NULL);
	pthread_mutex_init(&t->tls_lock, NULL);
	t->tls_all = NULL;
	t->ctx = ctx;
	atomic_init(&t->next_key, 1);
	*tabp = t;
	return 0;
}

static void ckh_destroy(void *tab)
{
	struct ckh_tab *t = tab;
	struct ckh_tls *s, *n;

	/* Every thread left (thread_exit ran its barrier): no deferral is pending. */
	ckh_self = NULL;
	ck_hs_destroy(&t->hs);
	for (s = t->tls_all; s; s = n) {
		n = s->next;
		free(s);
	}
	pthread_mutex_destroy(&t->lock);
	pthread_mutex_destroy(&t->tls_lock);
	free(t);
}

static int ckh_thread_enter(void *tab, void **tlsp)
{
	struct ckh_tab *t = tab;
	struct ckh_tls *s = bench_alloc_aligned(sizeof(*s));

	if (!s)
		return -ENOMEM;
	memset(s, 0, sizeof(*s));
	ck_epoch_register(&t->epoch, &s->rec, NULL);
	pthread_mutex_lock(&t->tls_lock);
	s->next = t->tls_all;
	t->tls_all = s;
	pthread_mutex_unlock(&t->tls_lock);
	ckh_self = s;
	*tlsp = s;
	return 0;
}

static void ckh_thread_exit(void *tab, void *tls)
{
	struct ckh_tls *s = tls;

	(void)tab;
	ck_epoch_barrier(&s->rec); /* dispatches everything this thread deferred */
	ck_epoch_unregister(&s->rec);
	ckh_self = NULL;
}

static int ckh_insert(void *tab, void *tls, unsigned int slot, struct bh_rec **recp)
{
	struct ckh_tab *t = tab;
	struct ckh_rec *r = bh_rec_alloc(t->ctx, sizeof(*r), slot);
	bool ok;

	(void)tls;
	if (!r)
		return -ENOMEM;
	/* Relaxed: a counter only needs atomicity to hand out unique keys. */
	bh_rec_set_key(&r->b, atomic_fetch_add_explicit(&t->next_key, 1, memory_order_relaxed));
	atomic_init(&r->ref, 1);
	r->ctx = t->ctx;
	pthread_mutex_lock(&t->lock);
	/* ck_hs_put publishes the record with a store fence before the slot store. */
	ok = ck_hs_put(&t->hs, CK_HS_HASH(&t->hs, ckh_hash, &r->b.key), r);
	pthread_mutex_unlock(&t->lock);
	if (!ok) {
		atomic_store_explicit(&r->b.state, BH_UNLINKED, memory_order_relaxed);
		bh_rec_free(t->ctx, &r->b);
		return -ENOMEM;
	}
	*recp = &r->b;
	return 0;
}

static void ckh_free_cb(ck_epoch_entry_t *e)
{
	struct ckh_rec *r = (struct ckh_rec *)((char *)e - offsetof(struct ckh_rec, entry));

	bh_tsan_acquire(e); /* pairs with the release in ckh_put */
	bh_rec_free(r->ctx, &r->b);
}

static void ckh_put(struct ckh_tab *t, struct ckh_tls *s, struct ckh_rec *r)
{
	/* acq_rel: see the design note. */
	int64_t old = atomic_fetch_sub_explicit(&r->ref, 1, memory_order_acq_rel);

	if (old == 1) {
		bh_tsan_release(&r->entry);
		ck_epoch_call(&s->rec, &r->entry, ckh_free_cb);
		if (++s->deferred % CKH_POLL_EVERY == 0)
			ck_epoch_poll(&s->rec);
	} else if (old <= 0) {
		bh_error(t->ctx, "ck-hs: refcount below zero");
	}
}

static struct bh_rec *ckh_lookup(void *tab, void *tls, uint64_t key)
{
	struct ckh_tab *t = tab;
	struct ckh_tls *s = tls;
	struct ckh_rec *r;
	int64_t old;

	ck_epoch_begin(&s->rec, NULL);
	r = ck_hs_get(&t->hs, CK_HS_HASH(&t->hs, ckh_hash, &key), &key);
	if (r) {
		/* get-unless-zero; acquire on success pairs with the release half of ckh_put. */
		old = atomic_load_explicit(&r->ref, memory_order_relaxed);
		do {
			if (old <= 0) {
				r = NULL;
				break;
			}
		} while (!atomic_compare_exchange_weak_explicit(
		    &r->ref, &old, old + 1, memory_order_acquire, memory_order_relaxed));
	}
	ck_epoch_end(&s->rec, NULL);
	return r ? &r->b : NULL;
}

static void ckh_release(void *tab, void *tls, struct bh_rec *rec)
{
	ckh_put(tab, tls, (struct ckh_rec *)rec);
}

static uint64_t ckh_lookup_noref(void *tab, void *tls, uint64_t key)
{
	struct ckh_tab *t = tab;
	struct ckh_tls *s = tls;
	struct ckh_rec *r;
	uint64_t payload = 0;

	ck_epoch_begin(&s->rec, NULL);
	r = ck_hs_get(&t->hs, CK_HS_HASH(&t->hs, ckh_hash, &key), &key);
	if (r) {
		payload = r->b.payload;
		if (!bh_rec_valid(&r->b, key))
			bh_error(t->ctx, "ck-hs: lookup returned an invalid record");
	}
	ck_epoch_end(&s->rec, NULL);
	return payload;
}

static int ckh_delete(void *tab, void *tls, struct bh_rec *rec)
{
	struct ckh_tab *t = tab;
	struct ckh_rec *r;

	pthread_mutex_lock(&t->lock);
	r = ck_hs_remove(&t->hs, CK_HS_HASH(&t->hs, ckh_hash, &rec->key), &rec->key);
	pthread_mutex_unlock(&t->lock);
	if (r != (struct ckh_rec *)rec)
		return -ENOENT;
	ckh_put(t, tls, r); /* the table's reference */
	return 0;
}

static uint64_t ckh_count(void *tab)
{
	struct ckh_tab *t = tab;
	uint64_t n;

	pthread_mutex_lock(&t->lock);
	n = ck_hs_count(&t->hs);
	pthread_mutex_unlock(&t->lock);
	return n;
}

const struct bh_impl bh_impl_ck_hs = {
    .name = "ck-hs",
    .model = "Concurrency Kit ck_hs (SPMC open addressing), one writer mutex, lock-free\n"
	     "                     readers in ck_epoch sections, atomic refcount, frees\n"
	     "                     deferred through per-thread ck_epoch records",
    .create = ckh_create,
    .destroy = ckh_destroy,
    .thread_enter = ckh_thread_enter,
    .thread_exit = ckh_thread_exit,
    .insert = ckh_insert,
    .lookup = ckh_lookup,
    .release = ckh_release,
    .lookup_noref = ckh_lookup_noref,
    .delete = ckh_delete,
    .count = ckh_count,
};
