/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * coffer/hash.h - concurrent chained hash table (coffer_htab) and the handle hash
 * (coffer_hhash) built on it.
 *
 * Writers (insert, delete) lock only the target bucket; lookups take no lock: they walk an
 * RCU-protected chain inside a read-side critical section and take a reference with
 * get-unless-zero. Unlinked records are freed only after a grace period and after their last
 * reference is gone. The ops table follows DAOS's d_hash_table_ops.
 *
 * This header is the contract used by eventq/ and runtime/: see hashtable/htab.c for the
 * design note (invariants, lock order, memory ordering).
 */
#ifndef COFFER_HASH_H
#define COFFER_HASH_H

#include <coffer/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Embeddable link node of a coffer_htab record (cf. liburcu cds_lfht_node, DAOS d_hlink).
 * Owned by the table while the record is inserted; callers never touch its fields.
 */
struct coffer_hnode {
	struct coffer_hnode *hn_next; /* RCU-protected chain pointer */
	uint32_t hn_ref;              /* refcount, atomic; the table holds one while linked */
	uint32_t hn_flags;            /* internal state bits, atomic */
	void *hn_rcu[3];              /* storage for liburcu's struct rcu_head (checked at build) */
};

/* Operations that make one table serve any key type (cf. DAOS d_hash_table_ops). */
struct coffer_htab_ops {
	/* Hash of a key of @ksize bytes. Required. */
	uint64_t (*hop_key_hash)(const void *key, size_t ksize);
	/* True when @node's record has key (@key, @ksize). Required; called inside a read-side
	 * section or under the bucket lock, must not sleep. */
	bool (*hop_key_cmp)(const struct coffer_hnode *node, const void *key, size_t ksize);
	/* Optional hooks called after the table changed the embedded refcount (for records that
	 * mirror it, and for tests). */
	void (*hop_rec_addref)(struct coffer_hnode *node);
	void (*hop_rec_decref)(struct coffer_hnode *node);
	/* Frees the record. Required. Called once, from an RCU callback thread or from
	 * coffer_htab_destroy(), after the record was unlinked, its refcount reached zero and a
	 * grace period elapsed. */
	void (*hop_rec_free)(struct coffer_hnode *node, void *priv);
};

/* Creation parameters; 0 in any field means "default". */
struct coffer_htab_params {
	uint32_t buckets_log2; /* log2 of the bucket count; default 14, at most 26 */
	uint32_t locks_log2;   /* log2 of the lock stripes; default min(buckets_log2, 12) */
	void *priv;            /* passed to hop_rec_free */
};

/* Largest batch accepted by coffer_htab_lookup_bulk(). */
#define COFFER_HTAB_BULK_MAX 64

struct coffer_htab;

COFFER_API int coffer_htab_create(const struct coffer_htab_params *params,
				  const struct coffer_htab_ops *ops, struct coffer_htab **tabp);
COFFER_API int coffer_htab_destroy(struct coffer_htab *tab, bool drain);
COFFER_API int coffer_htab_insert(struct coffer_htab *tab, const void *key, size_t ksize,
				  struct coffer_hnode *node);
COFFER_API int coffer_htab_find_or_insert(struct coffer_htab *tab, const void *key, size_t ksize,
					  struct coffer_hnode *node, struct coffer_hnode **found);
COFFER_API int coffer_htab_lookup(struct coffer_htab *tab, const void *key, size_t ksize,
				  struct coffer_hnode **nodep);
COFFER_API struct coffer_hnode *coffer_htab_lookup_rcu(struct coffer_htab *tab, const void *key,
						       size_t ksize);
COFFER_API int coffer_htab_lookup_bulk(struct coffer_htab *tab, const void *const keys[],
				       size_t ksize, unsigned int n, struct coffer_hnode *nodes[]);
COFFER_API int coffer_htab_delete(struct coffer_htab *tab, const void *key, size_t ksize);
COFFER_API int coffer_htab_delete_node(struct coffer_htab *tab, struct coffer_hnode *node);
COFFER_API void coffer_htab_addref(struct coffer_htab *tab, struct coffer_hnode *node);
COFFER_API void coffer_htab_decref(struct coffer_htab *tab, struct coffer_hnode *node);
COFFER_API int coffer_htab_traverse(struct coffer_htab *tab, uint32_t *cursor, uint32_t max_buckets,
				    int (*cb)(struct coffer_hnode *node, void *arg), void *arg);
COFFER_API uint64_t coffer_htab_count(struct coffer_htab *tab);

/* RCU read-side critical section markers (urcu-bp underneath; nestable; any thread). */
COFFER_API void coffer_rcu_read_lock(void);
COFFER_API void coffer_rcu_read_unlock(void);

/* ---- the handle hash ---------------------------------------------------------------- */

#define COFFER_HTYPE_BITS 4
enum coffer_htype {
	COFFER_HTYPE_EQ = 1,   /* event queue */
	COFFER_HTYPE_CONN = 2, /* store connection */
	COFFER_HTYPE_OBJ = 3,  /* object handle */
	COFFER_HTYPE_TEST = 15 /* tests and benchmarks */
};

/* Embeddable handle link; the record is freed through hl_free once unreachable. */
struct coffer_hlink {
	struct coffer_hnode hl_node;
	uint64_t hl_cookie;                        /* set by coffer_hhash_insert() */
	void (*hl_free)(struct coffer_hlink *link); /* required */
};

struct coffer_hhash;

COFFER_API int coffer_hhash_create(const struct coffer_htab_params *params,
				   struct coffer_hhash **hhp);
COFFER_API int coffer_hhash_destroy(struct coffer_hhash *hh, bool drain);
COFFER_API int coffer_hhash_insert(struct coffer_hhash *hh, struct coffer_hlink *link,
				   enum coffer_htype type, coffer_handle_t *hp);
COFFER_API int coffer_hhash_lookup(struct coffer_hhash *hh, coffer_handle_t h,
				   enum coffer_htype type, struct coffer_hlink **linkp);
COFFER_API struct coffer_hlink *coffer_hhash_lookup_rcu(struct coffer_hhash *hh, coffer_handle_t h,
							enum coffer_htype type);
COFFER_API void coffer_hhash_addref(struct coffer_hhash *hh, struct coffer_hlink *link);
COFFER_API void coffer_hhash_putref(struct coffer_hhash *hh, struct coffer_hlink *link);
COFFER_API int coffer_hhash_delete(struct coffer_hhash *hh, struct coffer_hlink *link);
COFFER_API uint64_t coffer_hhash_count(struct coffer_hhash *hh);

/* The process's handle hash, created by coffer_init(); NULL before it. */
COFFER_API struct coffer_hhash *coffer_hhash_global(void);

#ifdef __cplusplus
}
#endif

#endif /* COFFER_HASH_H */
