/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * perf/bench/impl_urcu_lfht.c - baseline "urcu-lfht": liburcu's lock-free resizable hash
 * table (cds_lfht, auto-resize with split counters) under the urcu-bp flavour, used the way
 * its documentation shows: lookups inside rcu_read_lock, records freed with call_rcu (the
 * default single call_rcu worker per process), plus an atomic refcount with get-unless-zero
 * for lookups that keep the record after the read-side section, and one shared atomic
 * counter for keys (as DAOS's cookies).
 *
 * Design note:
 *  - Invariants: a linked record holds the table's reference (ref >= 1); cds_lfht_del
 *    unlinks it, then the table's reference is dropped. The thread that takes ref from 1 to
 *    0 hands the record to call_rcu: a reader that found it before the unlink may still be
 *    inside its read-side section and try get-unless-zero, so memory must outlive that.
 *  - get-unless-zero: CAS loop from a non-zero value, acquire on success (pairs with the
 *    release half of the acq_rel decrements) so the holder sees the record as published.
 *  - Memory ordering of the table itself: cds_lfht's (rcu_dereference / rcu_assign_pointer
 *    inside the library).
 *  - Progress: lookups wait-free in the absence of resize; updates lock-free; reclamation
 *    by one call_rcu thread per process (what a default liburcu user gets).
 */
#include <errno.h>
#include <stdlib.h>

#include <urcu/urcu-bp.h>
#include <urcu/rculfhash.h>

#include "hash_impl.h"
/* Read-side markers and grace-period annotations shared with coffer's own table: the same
 * urcu-bp calls, plus what tells TSan that a callback runs after every earlier read-side
 * section (liburcu 0.13's barriers are invisible to it), so both tables are checked alike. */
#include "runtime/rcu.h"

struct lf_rec {
	struct bh_rec b;
	struct cds_lfht_node node;
	_Atomic int64_t ref;
	struct rcu_head rcu;
	struct bh_ctx *ctx;
};

struct lf_tab {
	struct cds_lfht *ht;
	struct bh_ctx *ctx;
	char pad[BENCH_CACHELINE];
	_Atomic uint64_t next_key;
};

static int lf_create(const struct bh_params *p, struct bh_ctx *ctx, void **tabp)
{
	struct lf_tab *t = bench_alloc_aligned(sizeof(*t));
	unsigned long size = 1ul << p->buckets_log2;

	if (!t)
		return -ENOMEM;
	t->ht = cds_lfht_new_flavor(size, size, 0, CDS_LFHT_AUTO_RESIZE | CDS_LFHT_ACCOUNTING,
				    &urcu_bp_flavor, NULL);
	if (!t->ht) {
		free(t);
		return -ENOMEM;
	}
	t->ctx = ctx;
	atomic_init(&t->next_key, 1);
	*tabp = t;
	return 0;
}

static void lf_destroy(void *tab)
{
	struct lf_tab *t = tab;

	/* Wait for the frees handed to call_rcu, then for the resize worker. */
	urcu_bp_barrier();
	if (cds_lfht_destroy(t->ht, NULL))
		bh_error(t->ctx, "urcu-lfht: cds_lfht_destroy failed (table not empty)");
	urcu_bp_barrier();
	free(t);
}

static int lf_thread_enter(void *tab, void **tlsp)
{
	(void)tab;
	/* urcu-bp registers on first use; doing it here keeps that cost out of the timing. */
	urcu_bp_register_thread();
	*tlsp = NULL;
	return 0;
}

static void lf_thread_exit(void *tab, void *tls)
{
	(void)tab;
	(void)tls;
}

static int lf_match(struct cds_lfht_node *node, const void *key)
{
	const struct lf_rec *r = caa_container_of(node, struct lf_rec, node);

	return r->b.key == *(const uint64_t *)key;
}

static int lf_insert(void *tab, void *tls, unsigned int slot, struct bh_rec **recp)
{
	struct lf_tab *t = tab;
	struct lf_rec *r = bh_rec_alloc(t->ctx, sizeof(*r), slot);
	struct cds_lfht_node *ret;

	(void)tls;
	if (!r)
		return -ENOMEM;
	/* Relaxed: a counter only needs atomicity to hand out unique keys. */
	bh_rec_set_key(&r->b, atomic_fetch_add_explicit(&t->next_key, 1, memory_order_relaxed));
	atomic_init(&r->ref, 1);
	r->ctx = t->ctx;
	cds_lfht_node_init(&r->node);
	coffer__rcu_read_lock();
	ret = cds_lfht_add_unique(t->ht, bh_mix64(r->b.key), lf_match, &r->b.key, &r->node);
	coffer__rcu_read_unlock();
	if (ret != &r->node) {
		/* Cannot happen with unique keys; undo the allocation's accounting path. */
		atomic_store_explicit(&r->b.state, BH_UNLINKED, memory_order_relaxed);
		bh_rec_free(t->ctx, &r->b);
		return -EEXIST;
	}
	*recp = &r->b;
	return 0;
}

static void lf_free_cb(struct rcu_head *head)
{
	struct lf_rec *r = caa_container_of(head, struct lf_rec, rcu);

	bh_tsan_acquire(head);	  /* pairs with the release in lf_put (call_rcu's queue) */
	coffer__rcu_gp_acquire(); /* after every reader that could still see r (grace period) */
	bh_rec_free(r->ctx, &r->b);
}

static void lf_put(struct lf_tab *t, struct lf_rec *r)
{
	/* acq_rel: see the design note. */
	int64_t old = atomic_fetch_sub_explicit(&r->ref, 1, memory_order_acq_rel);

	if (old == 1) {
		bh_tsan_release(&r->rcu);
		urcu_bp_call_rcu(&r->rcu, lf_free_cb);
	} else if (old <= 0)
		bh_error(t->ctx, "urcu-lfht: refcount below zero");
}

static struct lf_rec *lf_find_rcu(struct lf_tab *t, uint64_t key)
{
	struct cds_lfht_iter iter;
	struct cds_lfht_node *node;

	cds_lfht_lookup(t->ht, bh_mix64(key), lf_match, &key, &iter);
	node = cds_lfht_iter_get_node(&iter);
	return node ? caa_container_of(node, struct lf_rec, node) : NULL;
}

static struct bh_rec *lf_lookup(void *tab, void *tls, uint64_t key)
{
	struct lf_tab *t = tab;
	struct lf_rec *r;
	int64_t old;

	(void)tls;
	coffer__rcu_read_lock();
	r = lf_find_rcu(t, key);
	if (r) {
		/* get-unless-zero; acquire on success pairs with the release half of lf_put. */
		old = atomic_load_explicit(&r->ref, memory_order_relaxed);
		do {
			if (old <= 0) {
				r = NULL;
				break;
			}
		} while (!atomic_compare_exchange_weak_explicit(
		    &r->ref, &old, old + 1, memory_order_acquire, memory_order_relaxed));
	}
	coffer__rcu_read_unlock();
	return r ? &r->b : NULL;
}

static void lf_release(void *tab, void *tls, struct bh_rec *rec)
{
	(void)tls;
	lf_put(tab, (struct lf_rec *)rec);
}

static uint64_t lf_lookup_noref(void *tab, void *tls, uint64_t key)
{
	struct lf_tab *t = tab;
	struct lf_rec *r;
	uint64_t payload = 0;

	(void)tls;
	coffer__rcu_read_lock();
	r = lf_find_rcu(t, key);
	if (r) {
		payload = r->b.payload;
		if (!bh_rec_valid(&r->b, key))
			bh_error(t->ctx, "urcu-lfht: lookup returned an invalid record");
	}
	coffer__rcu_read_unlock();
	return payload;
}

static int lf_delete(void *tab, void *tls, struct bh_rec *rec)
{
	struct lf_tab *t = tab;
	struct lf_rec *r = (struct lf_rec *)rec;
	int err;

	(void)tls;
	coffer__rcu_read_lock();
	err = cds_lfht_del(t->ht, &r->node);
	coffer__rcu_read_unlock();
	if (err)
		return -ENOENT;
	lf_put(t, r); /* the table's reference */
	return 0;
}

static uint64_t lf_count(void *tab)
{
	struct lf_tab *t = tab;
	long before, after;
	unsigned long count;

	coffer__rcu_read_lock();
	cds_lfht_count_nodes(t->ht, &before, &count, &after);
	coffer__rcu_read_unlock();
	return count;
}

const struct bh_impl bh_impl_urcu_lfht = {
    .name = "urcu-lfht",
    .model = "liburcu cds_lfht (auto-resize), urcu-bp read-side lookups, atomic\n"
	     "                     refcount (get-unless-zero), frees by call_rcu (default\n"
	     "                     single worker)",
    .create = lf_create,
    .destroy = lf_destroy,
    .thread_enter = lf_thread_enter,
    .thread_exit = lf_thread_exit,
    .insert = lf_insert,
    .lookup = lf_lookup,
    .release = lf_release,
    .lookup_noref = lf_lookup_noref,
    .delete = lf_delete,
    .count = lf_count,
};
