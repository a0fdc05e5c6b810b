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
	uint32_t hn_ref;	      /* refcount, atomic; the table holds one while linked */
	uint32_t hn_flags;	      /* internal state bits, atomic */
	void *hn_rcu[3];	      /* storage for liburcu's struct rcu_head (checked at build) */
};

/* Operations that make one table serve any key type (cf. DAOS d_hash_table_ops). */
struct coffer_htab_ops {
	/* Hash of a key of @ksize bytes. Required. */
	uint64_t (*hop_key_hash)(const void *key, size_t ksize);
	/* True when @node's record has key (@key, @ksize). Required; called inside a read-side
	 * section or under the bucket lock, must not sleep. */
	bool (*hop_key_cmp)(const struct coffer_hnode *node, const void *key, size_t ksize);
	/* Optional hooks called after the table changed the embedded refcount (for records that
	 * mirror it, and for tests); the record is valid during the call. Setting either makes
	 * every decref enter a read-side section. */
	void (*hop_rec_addref)(struct coffer_hnode *node);
	void (*hop_rec_decref)(struct coffer_hnode *node);
	/* Frees the record. Required. Called once, from liburcu's call_rcu worker thread, after
	 * the record was unlinked, its refcount reached zero and a grace period elapsed. It may
	 * use coffer (e.g. delete other handles) but must not wait for a grace period (destroy,
	 * coffer_fini, rcu_barrier). */
	void (*hop_rec_free)(struct coffer_hnode *node, void *priv);
};

/* Creation parameters; 0 in any field means "default". */
struct coffer_htab_params {
	uint32_t buckets_log2; /* log2 of the bucket count; default 14, at most 26 */
	uint32_t locks_log2;   /* log2 of the lock stripes; default min(buckets_log2, 12), at most
				* buckets_log2. Memory: 8 B per bucket + 64 B per stripe. */
	void *priv;	       /* passed to hop_rec_free */
};

/* Largest batch accepted by coffer_htab_lookup_bulk(). */
#define COFFER_HTAB_BULK_MAX 64

/* coffer_htab_traverse() sets the cursor to this once it has visited the last bucket. */
#define COFFER_HTAB_CURSOR_END UINT32_MAX

/*
 * coffer_hash_mix64() - finalise a 64-bit key into well-mixed bits (the splitmix64 / Murmur3
 * fmix64 finaliser). The table buckets by the low bits of hop_key_hash's result, so a hash
 * function must return mixed bits; sequential keys then land in unrelated buckets and lock
 * stripes. Source: Steele, Lea, Flood, "Fast splittable pseudorandom number generators".
 */
static inline uint64_t coffer_hash_mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

struct coffer_htab;

/*
 * Common terms for the functions below.
 *  - A record embeds a struct coffer_hnode; @key/@ksize is a key of @ksize bytes that
 *    hop_key_hash/hop_key_cmp understand. Keys of linked records are unique and must not
 *    change while linked.
 *  - References: while linked the table holds one. Lookups return a record with one more
 *    reference for the caller, dropped with coffer_htab_decref(). The record is freed
 *    (hop_rec_free) once it is unlinked, its count reached zero and a grace period elapsed.
 *  - Context "any thread": coffer registers unknown threads with liburcu itself (urcu-bp);
 *    none of these functions sleep except on a bucket's lock stripe, and destroy.
 */

/**
 * coffer_htab_create() - create a table.
 * @params: creation parameters, or NULL for all defaults.
 * @ops: key and record operations; copied. hop_key_hash, hop_key_cmp, hop_rec_free required.
 * @tabp: out: the table.
 * Return: 0; -EINVAL (bad parameters or missing ops; or, at the process's first call that
 *         starts coffer, COFFER_RCU_PERCPU set to anything but 0 or 1: see coffer_init());
 *         -ENOMEM.
 * Context: any thread; needs no coffer_init().
 * Lifetime: until coffer_htab_destroy() succeeds.
 */
COFFER_API int coffer_htab_create(const struct coffer_htab_params *params,
				  const struct coffer_htab_ops *ops, struct coffer_htab **tabp);

/**
 * coffer_htab_destroy() - destroy a table.
 * @tab: the table.
 * @drain: false: fail with -EBUSY while any record is linked. true: unlink every record and
 *         drop the table's references first.
 * Then waits for every pending free (flushes coffer's reclamation batches, rcu_barrier()).
 * Return: 0; -EBUSY (records linked and !@drain: nothing changed); -EINVAL (NULL, or called
 *         inside a read-side section).
 * Context: any thread but a call_rcu worker; not inside a read-side section; no other
 *         thread may use @tab any more except to drop references it still holds.
 * Lifetime: records nobody holds are freed before this returns; records still held are freed
 *         when released, and the table's memory goes with the last of them.
 * Source: DAOS d_hash_table_destroy(force).
 */
COFFER_API int coffer_htab_destroy(struct coffer_htab *tab, bool drain);

/**
 * coffer_htab_insert() - insert a record whose key is not yet in the table.
 * @tab: the table. @key, @ksize: the record's key. @node: the record's node: never inserted
 *       before, or reused only after hop_rec_free() ran for it. Not a record deleted and
 *       still referenced or waiting for its grace period: its count is set afresh (holders'
 *       references would be lost), and a reader still standing on it would walk on into its
 *       new chain and miss records of the old one (what hlist_nulls exists for in Linux).
 * Return: 0; -EEXIST (a record with @key is linked; @node untouched); -EINVAL (NULL).
 * Context: any thread, inside or outside a read-side section; locks @key's stripe.
 * Lifetime: on success the table owns the only reference; do not use @node after a
 *         concurrent delete could have run unless you took a reference by a lookup.
 */
COFFER_API int coffer_htab_insert(struct coffer_htab *tab, const void *key, size_t ksize,
				  struct coffer_hnode *node);

/**
 * coffer_htab_find_or_insert() - return the record with @key, inserting @node if none.
 * @found: out: @node when inserted, else the existing record. Either way the caller owns
 *         one reference on *@found (an inserted record starts with two: table + caller).
 * Return: 0 (inserted); 1 (found, @node untouched); -EINVAL (NULL).
 * Context: as coffer_htab_insert(). Source: DAOS d_hash_rec_find_insert.
 */
COFFER_API int coffer_htab_find_or_insert(struct coffer_htab *tab, const void *key, size_t ksize,
					  struct coffer_hnode *node, struct coffer_hnode **found);

/**
 * coffer_htab_lookup() - find the record with @key and take a reference on it.
 * @nodep: out: the record (with a reference for the caller), or NULL.
 * Return: 0; -ENOENT (no linked record with @key); -EINVAL (NULL).
 * Context: any thread, inside or outside a read-side section; takes no lock; writes only
 *         the record's refcount (get-unless-zero).
 */
COFFER_API int coffer_htab_lookup(struct coffer_htab *tab, const void *key, size_t ksize,
				  struct coffer_hnode **nodep);

/**
 * coffer_htab_lookup_rcu() - find the record with @key without taking a reference.
 * Return: the record, or NULL (none, or a NULL argument).
 * Context: MUST be called inside coffer_rcu_read_lock()/unlock(); writes no memory at all.
 * Lifetime: the record stays valid (not freed) until the read-side section ends; it may be
 *         deleted meanwhile. Take a reference (coffer_htab_lookup) to keep it longer.
 */
COFFER_API struct coffer_hnode *coffer_htab_lookup_rcu(struct coffer_htab *tab, const void *key,
						       size_t ksize);

/**
 * coffer_htab_lookup_bulk() - look up @n keys in one read-side section, all or nothing.
 * @keys: @n keys of @ksize bytes each. @n: at most COFFER_HTAB_BULK_MAX.
 * @nodes: out: @n records, each with a reference for the caller; all NULL after -ENOENT
 *        (untouched after -EINVAL).
 * Return: @n (0 for @n 0); -ENOENT (some key missing: no reference is kept); -EINVAL (@tab,
 *         @keys, @nodes or one of the keys NULL, @n too big).
 * Context: as coffer_htab_lookup(). Source: DPDK rte_hash_lookup_bulk (hash and prefetch
 *         every bucket first, then walk).
 */
COFFER_API int coffer_htab_lookup_bulk(struct coffer_htab *tab, const void *const keys[],
				       size_t ksize, unsigned int n, struct coffer_hnode *nodes[]);

/**
 * coffer_htab_delete() - unlink the record with @key and drop the table's reference.
 * Return: 0; -ENOENT (no such record); -EINVAL (NULL).
 * Context: any thread, inside or outside a read-side section; locks @key's stripe.
 * Lifetime: freed after a grace period once the last reference is dropped.
 */
COFFER_API int coffer_htab_delete(struct coffer_htab *tab, const void *key, size_t ksize);

/**
 * coffer_htab_delete_node() - unlink @node (no key needed) and drop the table's reference.
 * Return: 0; -ENOENT (not linked: already deleted); -EINVAL (NULL).
 * Context: as coffer_htab_delete(); the caller holds a reference on @node or is inside a
 *         read-side section in which it found @node (so its memory is valid).
 */
COFFER_API int coffer_htab_delete_node(struct coffer_htab *tab, struct coffer_hnode *node);

/**
 * coffer_htab_addref() - take one more reference on a record the caller holds a reference on.
 * coffer_htab_decref() - drop one reference; the last one (after unlink) schedules the free.
 * Context: any thread, inside or outside a read-side section; no lock.
 * A decref on a count already at zero, or an addref from zero, is a caller bug: it is refused
 * (the count never goes negative) and counted for the tests.
 */
COFFER_API void coffer_htab_addref(struct coffer_htab *tab, struct coffer_hnode *node);
COFFER_API void coffer_htab_decref(struct coffer_htab *tab, struct coffer_hnode *node);

/**
 * coffer_htab_traverse() - visit the records of at most @max_buckets buckets.
 * @cursor: in: first bucket (start with 0); out: next bucket, or COFFER_HTAB_CURSOR_END.
 * @cb: called for each linked record, holding a reference and inside a read-side section
 *      (it may delete the record or take references; it must not block, destroy the table
 *      or wait for a grace period). Returns 0 to go on, nonzero to stop: a positive value,
 *      since a negative one cannot be told from this function's own -EINVAL.
 * Return: 0 (range done); @cb's nonzero value (stopped; *@cursor is after the current
 *         bucket); -EINVAL (NULL @tab, @cursor or @cb, @max_buckets 0, cursor out of range;
 *         nothing visited). A *@cursor of COFFER_HTAB_CURSOR_END returns 0 at once.
 * Context: any thread; one bucket per read-side section (bounded work, Redis dictScan).
 * Records inserted or deleted during a traversal may or may not be visited.
 */
COFFER_API int coffer_htab_traverse(struct coffer_htab *tab, uint32_t *cursor, uint32_t max_buckets,
				    int (*cb)(struct coffer_hnode *node, void *arg), void *arg);

/**
 * coffer_htab_count() - number of linked records (0 for NULL).
 * Context: any thread; sums the per-stripe counters (O(stripes)), exact when no writer runs.
 */
COFFER_API uint64_t coffer_htab_count(struct coffer_htab *tab);

/*
 * coffer_rcu_read_lock() / coffer_rcu_read_unlock() - read-side critical section markers
 * (urcu-bp underneath; nestable; any thread, registered on first use; must not block on
 * anything that waits for a grace period, e.g. coffer_fini() or a table destroy).
 */
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

/*
 * Embeddable handle link; the record is freed through hl_free once unreachable.
 * hl_cookie comes first so that a lookup reads it and the chain link (hl_node.hn_next) from
 * one 16-byte block, i.e. always from one cache line (malloc alignment is 16).
 */
struct coffer_hlink {
	uint64_t hl_cookie; /* set by coffer_hhash_insert() */
	struct coffer_hnode hl_node;
	void (*hl_free)(struct coffer_hlink *link); /* required */
};

struct coffer_hhash;

/**
 * coffer_hhash_create() - create a handle hash (a coffer_htab keyed by cookie).
 * @params: as coffer_htab_create(); @params->priv is ignored. @hhp: out.
 * Return: 0; -EINVAL (NULL @hhp, bad parameters, or a bad COFFER_RCU_PERCPU, as
 * coffer_htab_create()); -ENOMEM. Context: any thread.
 */
COFFER_API int coffer_hhash_create(const struct coffer_htab_params *params,
				   struct coffer_hhash **hhp);

/**
 * coffer_hhash_destroy() - as coffer_htab_destroy(). On success @hh takes no new handles and
 * is freed with its table: at once, or (with @drain) when the last record that users still
 * held is released through coffer_hhash_putref(@hh, ...), which stays valid until then.
 * Return: 0; -EBUSY; -EINVAL.
 */
COFFER_API int coffer_hhash_destroy(struct coffer_hhash *hh, bool drain);

/**
 * coffer_hhash_insert() - give @link a new cookie of @type and insert it.
 * @link: the record; hl_free must be set; never inserted, or reused only after its hl_free
 *        ran (as coffer_htab_insert()). @type: 1..15. @hp: out: the handle.
 * The cookie is (counter << COFFER_HTYPE_BITS) | type, the counter taken from a per-thread
 * range (no shared atomic per insert, no lock); counters are never reused in the process.
 * Return: 0; -EINVAL (NULL, no hl_free, bad type); -ENOSPC (2^60 cookies issued).
 * Context: any thread; locks exactly one stripe. Lifetime: as coffer_htab_insert().
 */
COFFER_API int coffer_hhash_insert(struct coffer_hhash *hh, struct coffer_hlink *link,
				   enum coffer_htype type, coffer_handle_t *hp);

/**
 * coffer_hhash_lookup() - find the handle's record and take a reference on it.
 * @linkp: out: the record or NULL. Drop the reference with coffer_hhash_putref().
 * Return: 0; -EINVAL (handle of another type, bad @type, NULL); -ENOENT (deleted or never
 *         issued). Context: any thread; no lock; writes only the record's refcount.
 */
COFFER_API int coffer_hhash_lookup(struct coffer_hhash *hh, coffer_handle_t h,
				   enum coffer_htype type, struct coffer_hlink **linkp);

/**
 * coffer_hhash_lookup_rcu() - find the handle's record without a reference.
 * Return: the record, or NULL (wrong type, deleted, never issued).
 * Context: MUST be inside coffer_rcu_read_lock(); writes no memory (the poll path).
 * Lifetime: valid until the read-side section ends.
 */
COFFER_API struct coffer_hlink *coffer_hhash_lookup_rcu(struct coffer_hhash *hh, coffer_handle_t h,
							enum coffer_htype type);

/* Take / drop a reference (see coffer_htab_addref/decref). Any thread, no lock. */
COFFER_API void coffer_hhash_addref(struct coffer_hhash *hh, struct coffer_hlink *link);
COFFER_API void coffer_hhash_putref(struct coffer_hhash *hh, struct coffer_hlink *link);

/**
 * coffer_hhash_delete() - unlink the handle's record and drop the table's reference; later
 * lookups of its cookie fail with -ENOENT. hl_free runs after a grace period once the last
 * reference is gone.
 * Return: 0; -ENOENT (already deleted); -EINVAL (NULL).
 * Context: as coffer_htab_delete_node().
 */
COFFER_API int coffer_hhash_delete(struct coffer_hhash *hh, struct coffer_hlink *link);

/**
 * coffer_hhash_delete_handle() - as coffer_hhash_delete(), by handle: unlink the record of
 * handle @h, of type @type, and drop the table's reference.
 * The record is found and unlinked under its bucket's lock in one walk, without taking and
 * dropping a reference of the caller's own (what a lookup + delete + putref costs), so a
 * close path that has only the handle does one chain walk and one refcount write.
 * Return: 0; -EINVAL (handle of another type, bad @type, NULL); -ENOENT (deleted or never
 *         issued).
 * Context: any thread, inside or outside a read-side section; locks @h's stripe.
 * Lifetime: as coffer_hhash_delete().
 */
COFFER_API int coffer_hhash_delete_handle(struct coffer_hhash *hh, coffer_handle_t h,
					  enum coffer_htype type);

/* Number of linked handles (see coffer_htab_count). */
COFFER_API uint64_t coffer_hhash_count(struct coffer_hhash *hh);

/* The process's handle hash, created by coffer_init(); NULL before it and after the last
 * coffer_fini(). Any thread; an acquire load. */
COFFER_API struct coffer_hhash *coffer_hhash_global(void);

#ifdef __cplusplus
}
#endif

#endif /* COFFER_HASH_H */
