/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * hashtable/htab.c - coffer_htab: a concurrent chained hash table with lock-free RCU lookups,
 * striped bucket locks for writers, and records that carry an atomic refcount.
 *
 * Design note
 * -----------
 * Sources: DAOS d_hash (src/gurt/hash.c: ops table, per-bucket locks, "ephemeral" records
 * with atomic refcounts - the 427 -> 313k obj_open/s fix), Linux rhashtable (bucket-locked
 * writers, RCU readers, kref_get_unless_zero), liburcu rculfhash (lookups in a read-side
 * section, frees through call_rcu after unlinking).
 *
 * Layout. 2^b bucket heads (one pointer each) and 2^s lock stripes (s <= b), bucket i being
 * guarded by stripe i & (2^s - 1). A stripe is one 64-byte line: lock word + its insert/unlink
 * counters. Consecutive buckets therefore use different stripes and different lines, and
 * memory is bounded: 8 + 64 * 2^(s-b) bytes per bucket (defaults b=14, s=12: 24 B/bucket,
 * 384 KiB per table; DAOS: 65,536 rwlocks, ~3.5 MiB).
 *
 * Invariants.
 *  I1 A record is linked in at most one chain, the one of bucket (hn_flags & BUCKET_MASK),
 *     iff hn_flags has LINKED. LINKED, hn_next of linked records and the bucket heads are
 *     written only under the record's stripe lock.
 *  I2 While linked, the table holds one reference: hn_ref >= 1.
 *  I3 hn_ref never goes up from 0 (get-unless-zero for lookups; addref only by a holder).
 *     So the thread that moves it 1 -> 0 is unique, and the record is unlinked by then (I2).
 *  I4 That thread schedules the free through call_rcu (batched, reclaim.c); the callback runs
 *     after a grace period, i.e. after every read-side section that could have reached the
 *     record through a chain ended. An unlinked record keeps its hn_next, so a reader standing
 *     on it still walks into live memory.
 *  I5 Keys of linked records are unique (insert checks under the stripe lock; hhash cookies
 *     are unique by construction) and immutable while linked.
 *  I6 ht_balance: + records freed by callbacks, - all records ever inserted (added once, by
 *     destroy). Whoever brings it to 0 after destroy frees the table itself, so records still
 *     held by users when a draining destroy returns can be released later.
 *
 * Lock order: table-list mutex -> stripe locks (only fork-prepare holds several stripes,
 * in index order) ; a stripe lock is never held while taking another coffer lock, calling
 * call_rcu, a user hook other than hop_key_cmp, or allocating. Reclamation locks (reclaim.c)
 * are taken with no stripe held.
 *
 * Memory ordering (every other access is relaxed or under the stripe lock).
 *  - publish: insert initialises hn_next/hn_ref/hn_flags (relaxed) then stores the bucket
 *    head with RELEASE; lookups load heads and hn_next with ACQUIRE (pairs with it), so they
 *    see an initialised record and the caller's key. Unlink stores the predecessor's link
 *    with RELEASE too: the successor it exposes was published under the same lock.
 *  - refcount: get-unless-zero CAS with ACQUIRE on success; decref CAS with ACQ_REL: the
 *    release half orders the holder's use of the record before the drop, the acquire half
 *    (on the 1 -> 0 drop) orders all those uses before reclamation. (ACQ_REL on the CAS
 *    instead of release + acquire fence because TSan does not model fences.)
 *  - grace period: the free runs after urcu-bp's grace period, whose barriers order every
 *    reader's accesses before it (liburcu's guarantee; annotated for TSan in runtime/rcu.h).
 *  - ht_balance: ACQ_REL add, so the table is freed after every record free is complete.
 *
 * Progress. Lookups (and lookup_rcu) are lock-free and, for the _rcu variant, write nothing;
 * with a reference they write only the record's refcount. Writers block only on their own
 * stripe, for a chain walk. destroy and coffer__rcu_barrier wait for a grace period.
 */
#include <errno.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hashtable/htab_internal.h"
#include "hashtable/hugemem.h"

#define HTAB_DEFAULT_BUCKETS_LOG2 14
#define HTAB_DEFAULT_STRIPES_LOG2 12
/* Records unlinked per stripe-lock hold while draining: bounds the work done under a lock. */
#define HTAB_DRAIN_CHUNK 64

_Static_assert(sizeof(struct coffer__htab_stripe) == COFFER__CACHE_LINE,
	       "a lock stripe must fill exactly one cache line");
_Static_assert(sizeof(((struct coffer_hnode *)0)->hn_rcu) >=
		   sizeof(struct rcu_head) + sizeof(void *),
	       "hn_rcu must hold a struct rcu_head and the table pointer");

/* ---- stripe locks ------------------------------------------------------------------- */

/*
 * A stripe lock is one 32-bit word: 0 free, 1 held, 2 held with waiters (Drepper, "Futexes
 * Are Tricky", mutex #3), spinning briefly before sleeping since critical sections are one
 * chain walk. A word rather than a pthread mutex: 4 bytes instead of 40, no owner (fork-prepare
 * can hold all of a table's stripes and the child just clears them), and TSan sees its
 * acquire/release atomics directly. Lock: CAS/XCHG with ACQUIRE; unlock: RELEASE; pairs with
 * the next locker's ACQUIRE.
 */
#define STRIPE_SPIN 128

static void futex_wait(uint32_t *w, uint32_t val)
{
	(void)syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(uint32_t *w)
{
	(void)syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void stripe_lock_slow(uint32_t *w)
{
	uint32_t c;

	for (int i = 0; i < STRIPE_SPIN; i++) {
		c = 0;
		if (__atomic_load_n(w, __ATOMIC_RELAXED) == 0 &&
		    __atomic_compare_exchange_n(w, &c, 1, false, __ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED))
			return;
		caa_cpu_relax();
	}
	c = __atomic_exchange_n(w, 2, __ATOMIC_ACQUIRE);
	while (c != 0) {
		futex_wait(w, 2);
		c = __atomic_exchange_n(w, 2, __ATOMIC_ACQUIRE);
	}
}

static inline void stripe_lock(struct coffer__htab_stripe *s)
{
	uint32_t c = 0;

	if (__builtin_expect(__atomic_compare_exchange_n(&s->hs_lock, &c, 1, false,
							 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED),
			     1))
		return;
	stripe_lock_slow(&s->hs_lock);
}

static inline void stripe_unlock(struct coffer__htab_stripe *s)
{
	if (__builtin_expect(__atomic_fetch_sub(&s->hs_lock, 1, __ATOMIC_RELEASE) != 1, 0)) {
		__atomic_store_n(&s->hs_lock, 0, __ATOMIC_RELEASE);
		futex_wake(&s->hs_lock);
	}
}

/* ---- the table registry (fork handlers lock every stripe of every table) -------------- */

static pthread_mutex_t tables_mu = PTHREAD_MUTEX_INITIALIZER;
static struct coffer_htab tables_head = {
    .ht_reg_next = &tables_head,
    .ht_reg_prev = &tables_head,
};

static void tables_add(struct coffer_htab *tab)
{
	pthread_mutex_lock(&tables_mu);
	tab->ht_reg_next = &tables_head;
	tab->ht_reg_prev = tables_head.ht_reg_prev;
	tables_head.ht_reg_prev->ht_reg_next = tab;
	tables_head.ht_reg_prev = tab;
	pthread_mutex_unlock(&tables_mu);
}

static void tables_del(struct coffer_htab *tab)
{
	pthread_mutex_lock(&tables_mu);
	tab->ht_reg_prev->ht_reg_next = tab->ht_reg_next;
	tab->ht_reg_next->ht_reg_prev = tab->ht_reg_prev;
	tab->ht_reg_next = tab->ht_reg_prev = NULL;
	pthread_mutex_unlock(&tables_mu);
}

void coffer__htab_atfork_prepare(void)
{
	pthread_mutex_lock(&tables_mu);
	for (struct coffer_htab *t = tables_head.ht_reg_next; t != &tables_head; t = t->ht_reg_next)
		for (uint32_t i = 0; i <= t->ht_stripe_mask; i++)
			stripe_lock(&t->ht_stripes[i]);
}

void coffer__htab_atfork_parent(void)
{
	for (struct coffer_htab *t = tables_head.ht_reg_next; t != &tables_head; t = t->ht_reg_next)
		for (uint32_t i = 0; i <= t->ht_stripe_mask; i++)
			stripe_unlock(&t->ht_stripes[i]);
	pthread_mutex_unlock(&tables_mu);
}

void coffer__htab_atfork_child(void)
{
	/* The child has only the forking thread, which holds every lock; chains are consistent
	 * because no writer was inside a stripe. The mutex is re-initialised (its owner's
	 * thread id changed); the stripe locks are plain words with no owner. */
	for (struct coffer_htab *t = tables_head.ht_reg_next; t != &tables_head; t = t->ht_reg_next)
		for (uint32_t i = 0; i <= t->ht_stripe_mask; i++)
			stripe_unlock(&t->ht_stripes[i]);
	pthread_mutex_init(&tables_mu, NULL);
}

/* ---- helpers ------------------------------------------------------------------------- */

static inline struct coffer__htab_stripe *stripe_of(struct coffer_htab *tab, uint32_t b)
{
	return &tab->ht_stripes[b & tab->ht_stripe_mask];
}

/* Find the link that points at the record with @key in bucket @b.
 * Return: the link (whose target is the record), or NULL. Context: stripe lock held. */
static struct coffer_hnode **find_locked(struct coffer_htab *tab, uint32_t b, const void *key,
					 size_t ksize)
{
	struct coffer_hnode **pp = &tab->ht_buckets[b];
	struct coffer_hnode *n;

	/* Relaxed loads: every writer of this chain holds the lock we hold. */
	while ((n = __atomic_load_n(pp, __ATOMIC_RELAXED)) != NULL) {
		if (tab->ht_ops.hop_key_cmp(n, key, ksize))
			return pp;
		pp = &n->hn_next;
	}
	return NULL;
}

/* Find the link that points at @node in bucket @b. Context: stripe lock held. */
static struct coffer_hnode **find_node_locked(struct coffer_htab *tab, uint32_t b,
					      const struct coffer_hnode *node)
{
	struct coffer_hnode **pp = &tab->ht_buckets[b];
	struct coffer_hnode *n;

	while ((n = __atomic_load_n(pp, __ATOMIC_RELAXED)) != NULL) {
		if (n == node)
			return pp;
		pp = &n->hn_next;
	}
	return NULL;
}

/* Link @node at the head of bucket @b with @ref references. Context: stripe lock held. */
static void link_locked(struct coffer_htab *tab, struct coffer__htab_stripe *s, uint32_t b,
			struct coffer_hnode *node, uint32_t ref)
{
	struct coffer_hnode *head = __atomic_load_n(&tab->ht_buckets[b], __ATOMIC_RELAXED);

	__atomic_store_n(&node->hn_next, head, __ATOMIC_RELAXED);
	__atomic_store_n(&node->hn_ref, ref, __ATOMIC_RELAXED);
	__atomic_store_n(&node->hn_flags, COFFER__HN_LINKED | b, __ATOMIC_RELAXED);
	/* RELEASE: publishes the record (and the caller's key in it); pairs with the ACQUIRE
	 * loads of coffer__htab_first_rcu(). */
	__atomic_store_n(&tab->ht_buckets[b], node, __ATOMIC_RELEASE);
	__atomic_store_n(&s->hs_ins, s->hs_ins + 1, __ATOMIC_RELAXED);
}

/* Unlink the record *pp. Context: stripe lock held. */
static struct coffer_hnode *unlink_locked(struct coffer__htab_stripe *s, struct coffer_hnode **pp)
{
	struct coffer_hnode *n = __atomic_load_n(pp, __ATOMIC_RELAXED);
	struct coffer_hnode *next = __atomic_load_n(&n->hn_next, __ATOMIC_RELAXED);

	/* RELEASE: exposes @next to readers; pairs with their ACQUIRE chain loads. n->hn_next is
	 * left alone so that readers standing on @n continue into the chain (I4). */
	__atomic_store_n(pp, next, __ATOMIC_RELEASE);
	__atomic_store_n(&n->hn_flags, n->hn_flags & COFFER__HN_BUCKET_MASK, __ATOMIC_RELAXED);
	__atomic_store_n(&s->hs_del, s->hs_del + 1, __ATOMIC_RELAXED);
	return n;
}

static void ref_underflow(struct coffer_htab *tab)
{
	__atomic_fetch_add(&tab->ht_ref_underflows, 1, __ATOMIC_RELAXED);
}

/* Drop a reference; the 1 -> 0 drop schedules the free (I3, I4). */
static inline void ref_put(struct coffer_htab *tab, struct coffer_hnode *node, bool hooks)
{
	uint32_t r;

	if (hooks) {
		/* The hook runs after our decrement; another holder may drop the last reference
		 * meanwhile. Our read-side section keeps the record's memory valid for it. */
		coffer__rcu_read_lock();
	}
	r = __atomic_load_n(&node->hn_ref, __ATOMIC_RELAXED);
	do {
		if (r == 0) {
			/* Caller bug (one put too many): refuse rather than wrap; counted. */
			ref_underflow(tab);
			if (hooks)
				coffer__rcu_read_unlock();
			return;
		}
	} while (!__atomic_compare_exchange_n(&node->hn_ref, &r, r - 1, true, __ATOMIC_ACQ_REL,
					      __ATOMIC_RELAXED));
	if (hooks) {
		if (tab->ht_ops.hop_rec_decref)
			tab->ht_ops.hop_rec_decref(node);
		coffer__rcu_read_unlock();
	}
	if (r == 1)
		coffer__reclaim(tab, node);
}

static inline void ref_got(struct coffer_htab *tab, struct coffer_hnode *node)
{
	if (tab->ht_hooks && tab->ht_ops.hop_rec_addref)
		tab->ht_ops.hop_rec_addref(node);
}

void coffer__htab_put(struct coffer_htab *tab, struct coffer_hnode *node)
{
	ref_put(tab, node, tab->ht_hooks);
}

/* Walk bucket @b for @key and take a reference. Context: inside a read-side section. */
static struct coffer_hnode *lookup_get_rcu(struct coffer_htab *tab, uint32_t b, const void *key,
					   size_t ksize)
{
	for (struct coffer_hnode *n = coffer__htab_first_rcu(tab, b); n;
	     n = coffer__hnode_next_rcu(n)) {
		if (!tab->ht_ops.hop_key_cmp(n, key, ksize))
			continue;
		/* An unlinked record with our key may precede a live one: keep walking. */
		if (!coffer__hnode_get_unless_zero(n))
			continue;
		/* Re-check under the reference. Reinserting a record before its free is a
		 * caller bug (coffer_htab_insert()), so this only keeps such a bug from handing
		 * out a record under a key it no longer has. */
		if (!tab->ht_ops.hop_key_cmp(n, key, ksize)) {
			ref_put(tab, n, false);
			continue;
		}
		ref_got(tab, n);
		return n;
	}
	return NULL;
}

/* ---- bucket array -------------------------------------------------------------------- */

/*
 * The bucket heads of a table with ht_bucket_mask set. An array of at least one hugepage (the
 * process handle hash: 2^18 heads, 2 MiB) is mapped hugepage-backed and prefaulted at creation
 * (hugemem.c): inserts scatter over the whole array, so with 4 KiB pages the first ~100k
 * opens of a process took one page fault per 4 KiB of heads on the open path (512 faults for
 * 2 MiB; profiled in coffer-bench obj_open). The cost moves to creation (coffer_init() for the
 * process hash): one hugepage fault, and the array is resident from then on (as it becomes
 * anyway once a few thousand handles are open). Smaller arrays come from calloc.
 */
static size_t buckets_bytes(const struct coffer_htab *tab)
{
	return ((size_t)tab->ht_bucket_mask + 1) * sizeof(*tab->ht_buckets);
}

static struct coffer_hnode **buckets_alloc(struct coffer_htab *tab)
{
	size_t bytes = buckets_bytes(tab);
	struct coffer_hnode **b;

	tab->ht_buckets_mapped = false;
	if (bytes >= coffer__hugemem_pagesize()) {
		b = coffer__hugemem_map(bytes);
		if (b) {
			tab->ht_buckets_mapped = true;
			return b;
		}
	}
	return calloc((size_t)tab->ht_bucket_mask + 1, sizeof(*tab->ht_buckets));
}

static void buckets_free(struct coffer_htab *tab)
{
	if (tab->ht_buckets_mapped)
		coffer__hugemem_unmap(tab->ht_buckets, buckets_bytes(tab));
	else
		free(tab->ht_buckets);
}

/* ---- public API ---------------------------------------------------------------------- */

COFFER_API int coffer_htab_create(const struct coffer_htab_params *params,
				  const struct coffer_htab_ops *ops, struct coffer_htab **tabp)
{
	uint32_t blog = HTAB_DEFAULT_BUCKETS_LOG2, slog;
	struct coffer_htab *tab;
	int rc;

	if (!ops || !tabp || !ops->hop_key_hash || !ops->hop_key_cmp || !ops->hop_rec_free)
		return -EINVAL;
	if (params && params->buckets_log2) {
		if (params->buckets_log2 > COFFER__HTAB_MAX_LOG2)
			return -EINVAL;
		blog = params->buckets_log2;
	}
	slog = blog < HTAB_DEFAULT_STRIPES_LOG2 ? blog : HTAB_DEFAULT_STRIPES_LOG2;
	if (params && params->locks_log2) {
		if (params->locks_log2 > blog)
			return -EINVAL;
		slog = params->locks_log2;
	}
	rc = coffer__rcu_setup();
	if (rc)
		return rc;

	tab = aligned_alloc(COFFER__CACHE_LINE, sizeof(*tab));
	if (!tab)
		return -ENOMEM;
	memset(tab, 0, sizeof(*tab));
	tab->ht_ops = *ops;
	tab->ht_priv = params ? params->priv : NULL;
	tab->ht_bucket_mask = (1u << blog) - 1;
	tab->ht_stripe_mask = (1u << slog) - 1;
	tab->ht_hooks = ops->hop_rec_addref || ops->hop_rec_decref;
	tab->ht_buckets = buckets_alloc(tab);
	tab->ht_stripes =
	    aligned_alloc(COFFER__CACHE_LINE, sizeof(*tab->ht_stripes) * ((size_t)1 << slog));
	if (!tab->ht_buckets || !tab->ht_stripes) {
		buckets_free(tab);
		free(tab->ht_stripes);
		free(tab);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i <= tab->ht_stripe_mask; i++) {
		struct coffer__htab_stripe *s = &tab->ht_stripes[i];

		memset(s, 0, sizeof(*s));
	}
	tables_add(tab);
	*tabp = tab;
	return 0;
}

static void table_free(struct coffer_htab *tab)
{
	void (*fn)(void *arg) = tab->ht_on_free;
	void *arg = tab->ht_on_free_arg;

	free(tab->ht_stripes);
	buckets_free(tab);
	free(tab);
	if (fn)
		fn(arg);
}

void coffer__htab_on_free(struct coffer_htab *tab, void (*fn)(void *arg), void *arg)
{
	tab->ht_on_free = fn;
	tab->ht_on_free_arg = arg;
}

void coffer__htab_rec_free(struct coffer_htab *tab, struct coffer_hnode *node)
{
	tab->ht_ops.hop_rec_free(node, tab->ht_priv);
}

void coffer__htab_freed(struct coffer_htab *tab, int64_t k)
{
	/* ACQ_REL: our record frees happen before the table free; see I6. Before destroy the
	 * sum is > 0 after any callback's add, so only a post-destroy add can reach 0. */
	if (__atomic_add_fetch(&tab->ht_balance, k, __ATOMIC_ACQ_REL) == 0)
		table_free(tab);
}

static uint64_t total_inserted(struct coffer_htab *tab, uint64_t *unlinked)
{
	uint64_t ins = 0, del = 0;

	for (uint32_t i = 0; i <= tab->ht_stripe_mask; i++) {
		ins += __atomic_load_n(&tab->ht_stripes[i].hs_ins, __ATOMIC_RELAXED);
		del += __atomic_load_n(&tab->ht_stripes[i].hs_del, __ATOMIC_RELAXED);
	}
	if (unlinked)
		*unlinked = del;
	return ins;
}

/* Unlink every record of bucket @b and drop the table's references, a chunk at a time. */
static void drain_bucket(struct coffer_htab *tab, uint32_t b)
{
	struct coffer__htab_stripe *s = stripe_of(tab, b);
	struct coffer_hnode *chunk[HTAB_DRAIN_CHUNK];
	unsigned int n;

	do {
		n = 0;
		stripe_lock(s);
		while (n < HTAB_DRAIN_CHUNK &&
		       __atomic_load_n(&tab->ht_buckets[b], __ATOMIC_RELAXED) != NULL)
			chunk[n++] = unlink_locked(s, &tab->ht_buckets[b]);
		stripe_unlock(s);
		/* Puts outside the lock: they may call hooks and call_rcu. */
		for (unsigned int i = 0; i < n; i++)
			ref_put(tab, chunk[i], tab->ht_hooks);
	} while (n == HTAB_DRAIN_CHUNK);
}

COFFER_API int coffer_htab_destroy(struct coffer_htab *tab, bool drain)
{
	uint64_t ins, del;
	int rc;

	if (!tab)
		return -EINVAL;
	if (coffer__rcu_read_ongoing())
		return -EINVAL;
	ins = total_inserted(tab, &del);
	if (ins != del && !drain)
		return -EBUSY;
	if (drain)
		for (uint32_t b = 0; b <= tab->ht_bucket_mask; b++)
			drain_bucket(tab, b);
	tables_del(tab);
	/* Every record the table referenced is now either freed, queued for a grace period,
	 * or held by a user; wait for the queued ones so hop_rec_free is not called after we
	 * return for any record that nobody holds. */
	rc = coffer__rcu_barrier();
	(void)rc; /* cannot fail: checked outside a read-side section above */
	ins = total_inserted(tab, NULL);
	if (__atomic_add_fetch(&tab->ht_balance, -(int64_t)ins, __ATOMIC_ACQ_REL) == 0)
		table_free(tab);
	return 0;
}

static int insert_common(struct coffer_htab *tab, const void *key, size_t ksize,
			 struct coffer_hnode *node, struct coffer_hnode **found)
{
	uint32_t b;
	struct coffer__htab_stripe *s;
	struct coffer_hnode **pp;

	if (!tab || !key || !node)
		return -EINVAL;
	b = coffer__htab_bucket(tab, tab->ht_ops.hop_key_hash(key, ksize));
	s = stripe_of(tab, b);
	stripe_lock(s);
	pp = find_locked(tab, b, key, ksize);
	if (pp) {
		struct coffer_hnode *old = __atomic_load_n(pp, __ATOMIC_RELAXED);

		if (!found) {
			stripe_unlock(s);
			return -EEXIST;
		}
		/* Linked, so hn_ref >= 1 (I2) and get-unless-zero cannot fail. */
		(void)coffer__hnode_get_unless_zero(old);
		stripe_unlock(s);
		ref_got(tab, old);
		*found = old;
		return 1;
	}
	link_locked(tab, s, b, node, found ? 2 : 1);
	stripe_unlock(s);
	if (found) {
		ref_got(tab, node);
		*found = node;
	}
	return 0;
}

COFFER_API int coffer_htab_insert(struct coffer_htab *tab, const void *key, size_t ksize,
				  struct coffer_hnode *node)
{
	return insert_common(tab, key, ksize, node, NULL);
}

COFFER_API int coffer_htab_find_or_insert(struct coffer_htab *tab, const void *key, size_t ksize,
					  struct coffer_hnode *node, struct coffer_hnode **found)
{
	if (!found)
		return -EINVAL;
	return insert_common(tab, key, ksize, node, found);
}

int coffer__htab_insert_unique(struct coffer_htab *tab, uint64_t hash, struct coffer_hnode *node)
{
	uint32_t b = coffer__htab_bucket(tab, hash);
	struct coffer__htab_stripe *s = stripe_of(tab, b);

	stripe_lock(s);
	link_locked(tab, s, b, node, 1);
	stripe_unlock(s);
	return 0;
}

COFFER_API int coffer_htab_lookup(struct coffer_htab *tab, const void *key, size_t ksize,
				  struct coffer_hnode **nodep)
{
	struct coffer_hnode *n;
	uint32_t b;

	if (!tab || !key || !nodep)
		return -EINVAL;
	b = coffer__htab_bucket(tab, tab->ht_ops.hop_key_hash(key, ksize));
	coffer__rcu_read_lock();
	n = lookup_get_rcu(tab, b, key, ksize);
	coffer__rcu_read_unlock();
	*nodep = n;
	return n ? 0 : -ENOENT;
}

COFFER_API struct coffer_hnode *coffer_htab_lookup_rcu(struct coffer_htab *tab, const void *key,
						       size_t ksize)
{
	uint32_t b;

	if (!tab || !key)
		return NULL;
	b = coffer__htab_bucket(tab, tab->ht_ops.hop_key_hash(key, ksize));
	for (struct coffer_hnode *n = coffer__htab_first_rcu(tab, b); n;
	     n = coffer__hnode_next_rcu(n))
		if (coffer__hnode_linked(n) && tab->ht_ops.hop_key_cmp(n, key, ksize))
			return n;
	return NULL;
}

COFFER_API int coffer_htab_lookup_bulk(struct coffer_htab *tab, const void *const keys[],
				       size_t ksize, unsigned int n, struct coffer_hnode *nodes[])
{
	uint32_t bk[COFFER_HTAB_BULK_MAX];
	unsigned int i, got = 0;

	if (!tab || !keys || !nodes || n > COFFER_HTAB_BULK_MAX)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		if (!keys[i])
			return -EINVAL;
		/* Hash everything first and prefetch the heads: the chain walks below then
		 * overlap their cache misses (DPDK rte_hash_lookup_bulk). */
		bk[i] = coffer__htab_bucket(tab, tab->ht_ops.hop_key_hash(keys[i], ksize));
		__builtin_prefetch(&tab->ht_buckets[bk[i]]);
	}
	coffer__rcu_read_lock();
	for (i = 0; i < n; i++) {
		nodes[i] = lookup_get_rcu(tab, bk[i], keys[i], ksize);
		got += nodes[i] != NULL;
	}
	coffer__rcu_read_unlock();
	if (got == n)
		return (int)n;
	/* All or nothing: give back what we took. */
	for (i = 0; i < n; i++) {
		if (nodes[i])
			ref_put(tab, nodes[i], tab->ht_hooks);
		nodes[i] = NULL;
	}
	return -ENOENT;
}

COFFER_API int coffer_htab_delete(struct coffer_htab *tab, const void *key, size_t ksize)
{
	struct coffer__htab_stripe *s;
	struct coffer_hnode **pp, *n;
	uint32_t b;

	if (!tab || !key)
		return -EINVAL;
	b = coffer__htab_bucket(tab, tab->ht_ops.hop_key_hash(key, ksize));
	s = stripe_of(tab, b);
	stripe_lock(s);
	pp = find_locked(tab, b, key, ksize);
	if (!pp) {
		stripe_unlock(s);
		return -ENOENT;
	}
	n = unlink_locked(s, pp);
	stripe_unlock(s);
	ref_put(tab, n, tab->ht_hooks); /* the table's reference (I2) */
	return 0;
}

COFFER_API int coffer_htab_delete_node(struct coffer_htab *tab, struct coffer_hnode *node)
{
	struct coffer__htab_stripe *s;
	struct coffer_hnode **pp;
	uint32_t f, b;

	if (!tab || !node)
		return -EINVAL;
	f = __atomic_load_n(&node->hn_flags, __ATOMIC_RELAXED);
	b = f & COFFER__HN_BUCKET_MASK;
	if (!(f & COFFER__HN_LINKED) || b > tab->ht_bucket_mask)
		return -ENOENT;
	s = stripe_of(tab, b);
	stripe_lock(s);
	/* Re-check under the lock: a concurrent delete may have won (I1). */
	pp = (__atomic_load_n(&node->hn_flags, __ATOMIC_RELAXED) & COFFER__HN_LINKED)
		 ? find_node_locked(tab, b, node)
		 : NULL;
	if (!pp) {
		stripe_unlock(s);
		return -ENOENT;
	}
	unlink_locked(s, pp);
	stripe_unlock(s);
	ref_put(tab, node, tab->ht_hooks);
	return 0;
}

COFFER_API void coffer_htab_addref(struct coffer_htab *tab, struct coffer_hnode *node)
{
	/* The caller holds a reference, so the count is >= 1 and a plain increment would do
	 * (kref_get). Get-unless-zero instead keeps I3 even for a caller bug (addref on a record
	 * already released): refused and counted, never a transient 0 -> 1 a reader could see. */
	if (!coffer__hnode_get_unless_zero(node)) {
		ref_underflow(tab);
		return;
	}
	ref_got(tab, node);
}

COFFER_API void coffer_htab_decref(struct coffer_htab *tab, struct coffer_hnode *node)
{
	ref_put(tab, node, tab->ht_hooks);
}

COFFER_API int coffer_htab_traverse(struct coffer_htab *tab, uint32_t *cursor, uint32_t max_buckets,
				    int (*cb)(struct coffer_hnode *node, void *arg), void *arg)
{
	uint32_t b, end;

	if (!tab || !cursor || !cb || max_buckets == 0)
		return -EINVAL;
	if (*cursor == COFFER_HTAB_CURSOR_END)
		return 0;
	if (*cursor > tab->ht_bucket_mask)
		return -EINVAL;
	b = *cursor;
	end = (uint64_t)b + max_buckets > (uint64_t)tab->ht_bucket_mask + 1
		  ? tab->ht_bucket_mask + 1
		  : b + max_buckets;
	for (; b < end; b++) {
		int rc = 0;

		/* One bucket per read-side section: a long traversal does not hold up grace
		 * periods, and the callback may delete what it visits. */
		coffer__rcu_read_lock();
		for (struct coffer_hnode *n = coffer__htab_first_rcu(tab, b); n && !rc;
		     n = coffer__hnode_next_rcu(n)) {
			if (!coffer__hnode_linked(n) || !coffer__hnode_get_unless_zero(n))
				continue;
			ref_got(tab, n);
			rc = cb(n, arg);
			ref_put(tab, n, tab->ht_hooks);
		}
		coffer__rcu_read_unlock();
		if (rc) {
			*cursor = b + 1 > tab->ht_bucket_mask ? COFFER_HTAB_CURSOR_END : b + 1;
			return rc;
		}
	}
	*cursor = end > tab->ht_bucket_mask ? COFFER_HTAB_CURSOR_END : end;
	return 0;
}

COFFER_API uint64_t coffer_htab_count(struct coffer_htab *tab)
{
	uint64_t ins, del;

	if (!tab)
		return 0;
	ins = total_inserted(tab, &del);
	/* Racy snapshot over stripes: may be momentarily off while writers run. */
	return ins >= del ? ins - del : 0;
}

void coffer__htab_stats(struct coffer_htab *tab, struct coffer__htab_stats *st)
{
	st->inserted = total_inserted(tab, &st->unlinked);
	st->ref_underflows = __atomic_load_n(&tab->ht_ref_underflows, __ATOMIC_RELAXED);
	st->buckets = tab->ht_bucket_mask + 1;
	st->stripes = tab->ht_stripe_mask + 1;
	st->bytes = sizeof(*tab) + (size_t)st->buckets * sizeof(*tab->ht_buckets) +
		    (size_t)st->stripes * sizeof(*tab->ht_stripes);
}
