/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * hashtable/htab_internal.h - what hhash.c, reclaim.c, runtime/ and the tests see of a
 * coffer_htab: its layout, the inline read-side walk and refcount helpers, the batched
 * reclamation and the fork hooks. The design note is at the top of htab.c.
 */
#ifndef COFFER_HTAB_INTERNAL_H
#define COFFER_HTAB_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include <coffer/hash.h>

#include "runtime/rcu.h"

#define COFFER__CACHE_LINE 64

/* hn_flags: bit 31 = linked; bits 0..25 = the record's bucket (valid while linked). */
#define COFFER__HN_LINKED      0x80000000u
#define COFFER__HN_BUCKET_MASK 0x03ffffffu
#define COFFER__HTAB_MAX_LOG2  26

/*
 * One lock stripe: a futex lock word and the stripe's insert/unlink counters on one cache line of
 * their own. The counters are written only under the mutex (so a writer touches no line
 * that another stripe's writer touches) and read racily by coffer_htab_count().
 */
struct coffer__htab_stripe {
	uint32_t hs_lock; /* 0 free, 1 held, 2 held with waiters (htab.c) */
	uint64_t hs_ins;  /* records linked into this stripe's buckets, ever; atomic-relaxed */
	uint64_t hs_del;  /* records unlinked from them, ever; atomic-relaxed */
} __attribute__((aligned(COFFER__CACHE_LINE)));

struct coffer_htab {
	/* Read-mostly line: everything a lookup reads. */
	struct coffer_htab_ops ht_ops;
	void *ht_priv;
	struct coffer_hnode **ht_buckets; /* heads; atomic: release on publish, acquire on walk */
	struct coffer__htab_stripe *ht_stripes;
	uint32_t ht_bucket_mask;
	uint32_t ht_stripe_mask;
	bool ht_hooks;		/* hop_rec_addref or hop_rec_decref set */
	bool ht_buckets_mapped; /* ht_buckets from coffer__hugemem_map (else calloc) */

	/* Written by RCU callbacks (and destroy) only: its own line. */
	int64_t ht_balance __attribute__((aligned(COFFER__CACHE_LINE)));
	uint64_t ht_ref_underflows; /* decrefs refused at zero (caller bugs); atomic-relaxed */

	/* Called with ht_on_free_arg once the table's memory is gone (set before any record is
	 * inserted; see coffer__htab_on_free). */
	void (*ht_on_free)(void *arg);
	void *ht_on_free_arg;

	/* Fork registry (under the table-list mutex). */
	struct coffer_htab *ht_reg_next;
	struct coffer_htab *ht_reg_prev;
};

/* Bucket of a key hash: the low bits (callers' hashes are mixed, see coffer_hash_mix64). */
static inline uint32_t coffer__htab_bucket(const struct coffer_htab *tab, uint64_t hash)
{
	return (uint32_t)hash & tab->ht_bucket_mask;
}

/* First record of bucket @b. Context: inside a read-side section. The acquire pairs with the
 * release store that published the record (insert) or that unlinked its predecessor. */
static inline struct coffer_hnode *coffer__htab_first_rcu(const struct coffer_htab *tab, uint32_t b)
{
	return __atomic_load_n(&tab->ht_buckets[b], __ATOMIC_ACQUIRE);
}

/* Next record in a chain. Context: inside a read-side section. Acquire: as above. */
static inline struct coffer_hnode *coffer__hnode_next_rcu(const struct coffer_hnode *n)
{
	return __atomic_load_n(&n->hn_next, __ATOMIC_ACQUIRE);
}

/* Whether @n is linked. Relaxed: a filter for _rcu lookups, not a synchronisation point
 * (a lookup racing with delete may linearise on either side of it). */
static inline bool coffer__hnode_linked(const struct coffer_hnode *n)
{
	return (__atomic_load_n(&n->hn_flags, __ATOMIC_RELAXED) & COFFER__HN_LINKED) != 0;
}

/*
 * Get-unless-zero: take a reference unless the count already reached zero (the record is
 * unlinked and on its way to be freed). The acquire on success pairs with the acq_rel
 * decrement of the previous holder, so what it wrote into the record is visible to us.
 * Context: inside a read-side section (the record's memory must stay valid) or holding a
 * reference.
 */
static inline bool coffer__hnode_get_unless_zero(struct coffer_hnode *n)
{
	uint32_t r = __atomic_load_n(&n->hn_ref, __ATOMIC_RELAXED);

	do {
		if (r == 0 || r == UINT32_MAX)
			return false;
	} while (!__atomic_compare_exchange_n(&n->hn_ref, &r, r + 1, true, __ATOMIC_ACQUIRE,
					      __ATOMIC_RELAXED));
	return true;
}

/* Insert a record whose key is unique by construction (hhash cookies): no duplicate walk.
 * Return: 0, -EINVAL (@node already linked). */
int coffer__htab_insert_unique(struct coffer_htab *tab, uint64_t hash, struct coffer_hnode *node);

/* Have @fn(@arg) called when @tab is freed: at destroy, or later, when the last record users
 * still held at destroy is released (hhash frees its wrapper then, so that a late
 * coffer_hhash_putref() still finds it). Call before the table is shared. */
void coffer__htab_on_free(struct coffer_htab *tab, void (*fn)(void *arg), void *arg);

/* Drop one reference without the optional hooks (hhash has none). */
void coffer__htab_put(struct coffer_htab *tab, struct coffer_hnode *node);

/* The bucket hash of a handle hash's cookie (hhash.c): consecutive counters in runs of
 * consecutive buckets, runs mixed. For the tests. */
uint64_t coffer__hhash_cookie_hash(uint64_t cookie);

/* The table under a handle hash (tests, benchmarks). */
struct coffer_hhash;
struct coffer_htab *coffer__hhash_table(struct coffer_hhash *hh);

/* Tests only: raise the process's next cookie counter to at least @at_least (never lowers it,
 * so uniqueness holds); lets a test reach the 2^60 limit (-ENOSPC). */
void coffer__hhash_raise_counter(uint64_t at_least);

/* Diagnostics for tests. */
struct coffer__htab_stats {
	uint64_t inserted;	 /* records ever linked */
	uint64_t unlinked;	 /* records ever unlinked */
	uint64_t ref_underflows; /* decrefs refused because the count was already zero */
	uint32_t buckets;
	uint32_t stripes;
	size_t bytes; /* bucket array + stripes + table header */
};
void coffer__htab_stats(struct coffer_htab *tab, struct coffer__htab_stats *st);

/* ---- reclamation (reclaim.c) ----------------------------------------------------------- */

/* Schedule @node of @tab to be freed after a grace period. Called once, by whoever dropped
 * the last reference (after the record was unlinked). Context: any thread, any RCU state. */
void coffer__reclaim(struct coffer_htab *tab, struct coffer_hnode *node);

/* Hand every thread's partial batch to call_rcu (destroy, fini, coffer__rcu_barrier). */
void coffer__reclaim_flush_all(void);
/* After rcu_barrier: free every batch that callbacks handed back to its thread and that
 * thread has not freed yet, and wait for the frees threads are doing (coffer__rcu_barrier). */
void coffer__reclaim_drain_all(void);

/* Called by reclaim.c after a grace period: free @node through the table's ops. */
void coffer__htab_rec_free(struct coffer_htab *tab, struct coffer_hnode *node);
/* Called by reclaim.c after freeing @k records of @tab; may free the table (destroyed). */
void coffer__htab_freed(struct coffer_htab *tab, int64_t k);

/* Tests only: make the calling thread free records one call_rcu each, the path taken when no
 * batch can be allocated or the thread is exiting. */
void coffer__reclaim_force_single(bool on);

/* Records scheduled (batched or queued) and not yet freed, process-wide; relaxed snapshot. */
int64_t coffer__reclaim_backlog(void);

/* Fork hooks, called by runtime/rcu.c in its fixed order. */
void coffer__htab_atfork_prepare(void);
void coffer__htab_atfork_parent(void);
void coffer__htab_atfork_child(void);
void coffer__reclaim_atfork_pre(void);	       /* first of all prepare handlers */
void coffer__reclaim_atfork_post_parent(void); /* last of all parent handlers */
void coffer__reclaim_atfork_post_child(void);  /* last of all child handlers */
void coffer__reclaim_atfork_prepare(void);
void coffer__reclaim_atfork_parent(void);
void coffer__reclaim_atfork_child(void);

#endif /* COFFER_HTAB_INTERNAL_H */
