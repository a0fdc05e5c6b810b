/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * hashtable/hhash.c - the handle hash: a coffer_htab keyed by 64-bit cookies.
 *
 * Design note
 * -----------
 * Cookie = (counter << COFFER_HTYPE_BITS) | type. Counters come from per-thread ranges of
 * COOKIE_RANGE values carved from one process-wide counter by a relaxed fetch_add (one shared
 * atomic per COOKIE_RANGE inserts instead of per insert; DAOS's d_hhash uses one atomic per
 * handle, measured flat at ~50 M/s total). Ranges are disjoint and the global counter only
 * grows, so a counter is never issued twice in a process (a stale handle can never reach a
 * new record); the first range starts at COOKIE_RANGE, so cookie 0 (COFFER_HANDLE_NULL) is never
 * issued.
 * Relaxed is enough: the fetch_add's atomicity alone makes ranges disjoint, and no data is
 * published through the counter. A fork child inherits the forking thread's range, which is
 * harmless: parent and child have separate tables.
 *
 * Cookies are unique by construction, so insertion skips the duplicate walk and locks exactly
 * one stripe. Bucketing (cookie_hash) mixes the counter in runs: 2^COOKIE_RUN_LOG2 consecutive
 * counters of one thread go to consecutive buckets (one cache line of heads, consecutive
 * stripes, each on its own line as htab requires), and each run goes to an unrelated place
 * (coffer_hash_mix64 of the run number). Runs never span two threads' ranges, so concurrent
 * inserters still do not share a lock's cache line, while one thread's insert touches a cold
 * bucket-head line once per run instead of once per insert.
 *
 * Lookups walk the chain comparing hl_cookie directly (no indirect calls on the hot path).
 * hl_cookie is written before the record is published (release store of the chain link) and
 * never changes while linked. The rest of the memory-ordering and refcount protocol is
 * htab.c's (see its design note).
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "hashtable/htab_internal.h"

#define COOKIE_RANGE 1024u
/* log2 of the runs of consecutive counters kept in consecutive buckets (see cookie_hash). */
#ifndef COFFER__COOKIE_RUN_LOG2
#define COFFER__COOKIE_RUN_LOG2 3
#endif
#define COOKIE_RUN_LOG2 COFFER__COOKIE_RUN_LOG2
_Static_assert((1u << COOKIE_RUN_LOG2) <= COOKIE_RANGE, "a run must not cross a thread's range");
#define COUNTER_LIMIT (UINT64_MAX >> COFFER_HTYPE_BITS)
#define HTYPE_MASK    ((1u << COFFER_HTYPE_BITS) - 1)

struct coffer_hhash {
	struct coffer_htab *hh_tab;
};

/* First counter of the next free range; atomic-relaxed. Starts at COOKIE_RANGE, not 1, so that
 * ranges are aligned (a run of cookie_hash() never spans two threads' ranges) while counter 0
 * (cookie 0, COFFER_HANDLE_NULL) is still never issued. */
static uint64_t next_range = COOKIE_RANGE;
static __thread uint64_t my_next, my_end;

static inline struct coffer_hlink *link_of(const struct coffer_hnode *n)
{
	return (struct coffer_hlink *)(void *)((char *)n - offsetof(struct coffer_hlink, hl_node));
}

/*
 * The bucket hash of a cookie: runs of 2^COOKIE_RUN_LOG2 consecutive counters stay in
 * consecutive buckets, and the runs themselves are mixed (coffer_hash_mix64 of the run
 * number). A thread's inserts then take their bucket heads from one cache line for a whole
 * run (8 heads per 64-byte line) and their lock stripes from consecutive lines, which the
 * hardware prefetcher streams, instead of two cold lines per insert; runs lie inside one
 * thread's cookie range (ranges are aligned), so no two threads share a run, and run after run
 * lands in unrelated buckets and stripes. The type bits are left out: counters are unique.
 */
static inline uint64_t cookie_hash(uint64_t cookie)
{
	uint64_t counter = cookie >> COFFER_HTYPE_BITS;
	uint64_t low = counter & ((1u << COOKIE_RUN_LOG2) - 1);

	return (coffer_hash_mix64(counter >> COOKIE_RUN_LOG2) << COOKIE_RUN_LOG2) | low;
}

uint64_t coffer__hhash_cookie_hash(uint64_t cookie)
{
	return cookie_hash(cookie);
}

static uint64_t hh_key_hash(const void *key, size_t ksize)
{
	uint64_t c;

	(void)ksize;
	memcpy(&c, key, sizeof(c));
	return cookie_hash(c);
}

static bool hh_key_cmp(const struct coffer_hnode *n, const void *key, size_t ksize)
{
	uint64_t c;

	(void)ksize;
	memcpy(&c, key, sizeof(c));
	return link_of(n)->hl_cookie == c;
}

static void hh_rec_free(struct coffer_hnode *n, void *priv)
{
	struct coffer_hlink *link = link_of(n);

	(void)priv;
	link->hl_free(link);
}

static const struct coffer_htab_ops hh_ops = {
    .hop_key_hash = hh_key_hash,
    .hop_key_cmp = hh_key_cmp,
    .hop_rec_free = hh_rec_free,
};

static int counter_next(uint64_t *out)
{
	if (__builtin_expect(my_next == my_end, 0)) {
		uint64_t base = __atomic_fetch_add(&next_range, COOKIE_RANGE, __ATOMIC_RELAXED);

		if (base > COUNTER_LIMIT - COOKIE_RANGE) {
			/* 2^60 counters issued (centuries at 10^9/s); never wrap. Undo is not
			 * needed: the counter stays past the limit. */
			return -ENOSPC;
		}
		my_next = base;
		my_end = base + COOKIE_RANGE;
	}
	*out = my_next++;
	return 0;
}

void coffer__hhash_raise_counter(uint64_t at_least)
{
	uint64_t cur = __atomic_load_n(&next_range, __ATOMIC_RELAXED);

	/* Only ever raises: counters stay unique. Relaxed, like counter_next(). */
	while (cur < at_least && !__atomic_compare_exchange_n(&next_range, &cur, at_least, true,
							      __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

static inline bool type_ok(enum coffer_htype type)
{
	return (unsigned int)type >= 1 && (unsigned int)type <= HTYPE_MASK;
}

/* Find the live record of @cookie. Context: inside a read-side section. */
static struct coffer_hlink *find_rcu(struct coffer_hhash *hh, uint64_t cookie)
{
	struct coffer_htab *tab = hh->hh_tab;
	uint32_t b = coffer__htab_bucket(tab, cookie_hash(cookie));

	for (struct coffer_hnode *n = coffer__htab_first_rcu(tab, b); n;
	     n = coffer__hnode_next_rcu(n)) {
		struct coffer_hlink *l = link_of(n);

		if (l->hl_cookie == cookie && coffer__hnode_linked(n))
			return l;
	}
	return NULL;
}

COFFER_API int coffer_hhash_create(const struct coffer_htab_params *params,
				   struct coffer_hhash **hhp)
{
	struct coffer_htab_params p = {0};
	struct coffer_hhash *hh;
	int rc;

	if (!hhp)
		return -EINVAL;
	if (params) {
		p = *params;
		p.priv = NULL;
	}
	hh = malloc(sizeof(*hh));
	if (!hh)
		return -ENOMEM;
	rc = coffer_htab_create(&p, &hh_ops, &hh->hh_tab);
	if (rc) {
		free(hh);
		return rc;
	}
	/* The wrapper lives as long as the table: a record held past destroy is released
	 * through it (coffer_hhash_putref), which may be what frees the table. */
	coffer__htab_on_free(hh->hh_tab, free, hh);
	*hhp = hh;
	return 0;
}

COFFER_API int coffer_hhash_destroy(struct coffer_hhash *hh, bool drain)
{
	if (!hh)
		return -EINVAL;
	/* On success the table frees @hh with itself (coffer__htab_on_free), now or when the
	 * last record still held is released. */
	return coffer_htab_destroy(hh->hh_tab, drain);
}

COFFER_API int coffer_hhash_insert(struct coffer_hhash *hh, struct coffer_hlink *link,
				   enum coffer_htype type, coffer_handle_t *hp)
{
	uint64_t counter, cookie;
	int rc;

	if (!hh || !link || !hp || !link->hl_free || !type_ok(type))
		return -EINVAL;
	rc = counter_next(&counter);
	if (rc)
		return rc;
	cookie = (counter << COFFER_HTYPE_BITS) | (uint64_t)type;
	link->hl_cookie = cookie; /* published by the insert's release store */
	coffer__htab_insert_unique(hh->hh_tab, cookie_hash(cookie), &link->hl_node);
	hp->cookie = cookie;
	return 0;
}

COFFER_API int coffer_hhash_lookup(struct coffer_hhash *hh, coffer_handle_t h,
				   enum coffer_htype type, struct coffer_hlink **linkp)
{
	struct coffer_hlink *l;

	if (!hh || !linkp || !type_ok(type))
		return -EINVAL;
	*linkp = NULL;
	if ((h.cookie & HTYPE_MASK) != (uint64_t)type)
		return -EINVAL;
	coffer__rcu_read_lock();
	l = find_rcu(hh, h.cookie);
	/* Get-unless-zero fails only for a record already unlinked and released: as absent
	 * (cookies are never reused, so no live record with this cookie can follow it). */
	if (l && !coffer__hnode_get_unless_zero(&l->hl_node))
		l = NULL;
	/* Re-check under the reference, as htab does: only a caller bug (re-inserting a
	 * still-referenced link) can change hl_cookie, but then we must not return it. */
	if (l && __atomic_load_n(&l->hl_cookie, __ATOMIC_RELAXED) != h.cookie) {
		coffer__htab_put(hh->hh_tab, &l->hl_node);
		l = NULL;
	}
	coffer__rcu_read_unlock();
	*linkp = l;
	return l ? 0 : -ENOENT;
}

COFFER_API struct coffer_hlink *coffer_hhash_lookup_rcu(struct coffer_hhash *hh, coffer_handle_t h,
							enum coffer_htype type)
{
	if (!hh || !type_ok(type) || (h.cookie & HTYPE_MASK) != (uint64_t)type)
		return NULL;
	return find_rcu(hh, h.cookie);
}

COFFER_API void coffer_hhash_addref(struct coffer_hhash *hh, struct coffer_hlink *link)
{
	coffer_htab_addref(hh->hh_tab, &link->hl_node);
}

COFFER_API void coffer_hhash_putref(struct coffer_hhash *hh, struct coffer_hlink *link)
{
	coffer__htab_put(hh->hh_tab, &link->hl_node);
}

COFFER_API int coffer_hhash_delete(struct coffer_hhash *hh, struct coffer_hlink *link)
{
	if (!hh || !link)
		return -EINVAL;
	return coffer_htab_delete_node(hh->hh_tab, &link->hl_node);
}

COFFER_API int coffer_hhash_delete_handle(struct coffer_hhash *hh, coffer_handle_t h,
					  enum coffer_htype type)
{
	if (!hh || !type_ok(type))
		return -EINVAL;
	if ((h.cookie & HTYPE_MASK) != (uint64_t)type)
		return -EINVAL;
	/* hh_key_cmp compares the whole cookie, type bits included. */
	return coffer_htab_delete(hh->hh_tab, &h.cookie, sizeof(h.cookie));
}

COFFER_API uint64_t coffer_hhash_count(struct coffer_hhash *hh)
{
	return hh ? coffer_htab_count(hh->hh_tab) : 0;
}

struct coffer_htab *coffer__hhash_table(struct coffer_hhash *hh)
{
	return hh->hh_tab;
}
