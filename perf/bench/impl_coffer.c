/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * perf/bench/impl_coffer.c - "coffer": the real handle hash (coffer_hhash, hashtable/),
 * driven only through its public API (include/coffer/hash.h) - no internals, no copy.
 *
 * Design note:
 *  - The table's own concurrency design is in hashtable/htab.c; this file only adapts it to
 *    the benchmark's reference protocol (hash_impl.h), which is the handle hash's own:
 *    insert links with the table's reference and issues the cookie; lookup takes a reference
 *    (get-unless-zero); putref drops it; delete unlinks and drops the table's reference; the
 *    record reaches hl_free once unlinked, unreferenced and after a grace period.
 *  - hl_free runs on whatever thread coffer reclaims on (call_rcu worker or destroy); it
 *    only touches the record and the per-slot free counters (relaxed atomic adds).
 *  - Verification beyond the benchmark's own: the table's diagnostics (coffer__htab_stats,
 *    internal) must show no refused refcount underflow and inserted == unlinked at destroy.
 *  - Each table instance holds one coffer_init() reference; destroy drops it with
 *    coffer_fini(), whose rcu_barrier() guarantees every hl_free has run before the
 *    benchmark compares allocations and frees.
 */
#include <errno.h>
#include <stdlib.h>

#include <coffer/common.h>
#include <coffer/hash.h>

#include "hashtable/htab_internal.h" /* coffer__htab_stats: the table's own diagnostics */

#include "hash_impl.h"

struct co_rec {
	struct bh_rec b;
	struct coffer_hlink link;
	struct bh_ctx *ctx;
};

struct co_tab {
	struct coffer_hhash *hh;
	struct bh_ctx *ctx;
};

static inline struct co_rec *co_rec_of(struct coffer_hlink *link)
{
	return (struct co_rec *)((char *)link - offsetof(struct co_rec, link));
}

static int co_create(const struct bh_params *p, struct bh_ctx *ctx, void **tabp)
{
	struct coffer_htab_params params = {.buckets_log2 = p->buckets_log2};
	struct co_tab *t = malloc(sizeof(*t));
	int err;

	if (!t)
		return -ENOMEM;
	err = coffer_init();
	if (err) {
		free(t);
		return err;
	}
	err = coffer_hhash_create(&params, &t->hh);
	if (err) {
		coffer_fini();
		free(t);
		return err;
	}
	t->ctx = ctx;
	*tabp = t;
	return 0;
}

static void co_destroy(void *tab)
{
	struct co_tab *t = tab;
	struct coffer__htab_stats st;
	int err;

	/* coffer refuses a put at refcount zero (rather than wrapping) and counts it: a
	 * benchmark run that triggered one has a refcount bug, even if nothing crashed. */
	coffer__htab_stats(coffer__hhash_table(t->hh), &st);
	if (st.ref_underflows)
		bh_error(t->ctx, "coffer: refcount underflow (a put at zero was refused)");
	if (st.inserted != st.unlinked)
		bh_error(t->ctx, "coffer: table stats: inserted != unlinked at destroy");
	err = coffer_hhash_destroy(t->hh, false);

	if (err)
		bh_error(t->ctx, "coffer: coffer_hhash_destroy failed on an empty table");
	coffer_fini(); /* rcu_barrier(): every hl_free has run */
	free(t);
}

static int co_thread_enter(void *tab, void **tlsp)
{
	(void)tab;
	/* coffer registers threads lazily; a no-op section does it outside the timing. */
	coffer_rcu_read_lock();
	coffer_rcu_read_unlock();
	*tlsp = NULL;
	return 0;
}

static void co_thread_exit(void *tab, void *tls)
{
	(void)tab;
	(void)tls;
}

static void co_free(struct coffer_hlink *link)
{
	struct co_rec *r = co_rec_of(link);

	bh_rec_free(r->ctx, &r->b);
}

static int co_insert(void *tab, void *tls, unsigned int slot, struct bh_rec **recp)
{
	struct co_tab *t = tab;
	struct co_rec *r = bh_rec_alloc(t->ctx, sizeof(*r), slot);
	coffer_handle_t h;
	int err;

	(void)tls;
	if (!r)
		return -ENOMEM;
	r->ctx = t->ctx;
	r->link.hl_free = co_free;
	err = coffer_hhash_insert(t->hh, &r->link, COFFER_HTYPE_TEST, &h);
	if (err) {
		atomic_store_explicit(&r->b.state, BH_UNLINKED, memory_order_relaxed);
		bh_rec_free(t->ctx, &r->b);
		return err;
	}
	/* The cookie exists only now; no other thread can look it up before we hand it out
	 * (through the harness's start flag or not at all). */
	bh_rec_set_key(&r->b, h.cookie);
	*recp = &r->b;
	return 0;
}

static struct bh_rec *co_lookup(void *tab, void *tls, uint64_t key)
{
	struct co_tab *t = tab;
	struct coffer_hlink *link;

	(void)tls;
	if (coffer_hhash_lookup(t->hh, (coffer_handle_t){key}, COFFER_HTYPE_TEST, &link))
		return NULL;
	return &co_rec_of(link)->b;
}

static void co_release(void *tab, void *tls, struct bh_rec *rec)
{
	struct co_tab *t = tab;

	(void)tls;
	coffer_hhash_putref(t->hh, &((struct co_rec *)rec)->link);
}

static uint64_t co_lookup_noref(void *tab, void *tls, uint64_t key)
{
	struct co_tab *t = tab;
	struct coffer_hlink *link;
	uint64_t payload = 0;

	(void)tls;
	coffer_rcu_read_lock();
	link = coffer_hhash_lookup_rcu(t->hh, (coffer_handle_t){key}, COFFER_HTYPE_TEST);
	if (link) {
		struct co_rec *r = co_rec_of(link);

		payload = r->b.payload;
		if (!bh_rec_valid(&r->b, key))
			bh_error(t->ctx, "coffer: lookup_rcu returned an invalid record");
	}
	coffer_rcu_read_unlock();
	return payload;
}

static int co_delete(void *tab, void *tls, struct bh_rec *rec)
{
	struct co_tab *t = tab;

	(void)tls;
	return coffer_hhash_delete(t->hh, &((struct co_rec *)rec)->link);
}

static uint64_t co_count(void *tab)
{
	struct co_tab *t = tab;

	return coffer_hhash_count(t->hh);
}

const struct bh_impl bh_impl_coffer = {
    .name = "coffer",
    .model = "coffer's handle hash (coffer_hhash, public API): per-bucket writer locks,\n"
	     "                     lock-free RCU lookups, get-unless-zero refcount",
    .create = co_create,
    .destroy = co_destroy,
    .thread_enter = co_thread_enter,
    .thread_exit = co_thread_exit,
    .insert = co_insert,
    .lookup = co_lookup,
    .release = co_release,
    .lookup_noref = co_lookup_noref,
    .delete = co_delete,
    .count = co_count,
};
