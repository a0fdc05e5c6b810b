/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Unit tests for coffer_htab: every function and error code, refcount protocol, deferred
 * freeing, traverse, bulk lookup, destroy with and without drain. 20-byte keys (ObjectID
 * shaped), so the generic ops path is exercised; tests/hashtable/test_hhash.c covers cookies.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <coffer/hash.h>

#include "hashtable/htab_internal.h"

#define KEYLEN	    20
#define MAGIC_LIVE  0x11feu
#define MAGIC_FREED 0xdeadu

struct rec {
	struct coffer_hnode node;
	uint8_t key[KEYLEN];
	unsigned int magic;
};

static int frees;   /* hop_rec_free calls (call_rcu worker; read after a barrier) */
static int addrefs; /* hook calls */
static int decrefs;
static int bad_priv;
static __thread int my_frees; /* hop_rec_free calls made on this thread */

static struct rec *rec_of(const struct coffer_hnode *n)
{
	return (struct rec *)(void *)((char *)n - offsetof(struct rec, node));
}

static uint64_t key_hash(const void *key, size_t ksize)
{
	uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a, then mixed */
	const uint8_t *p = key;

	for (size_t i = 0; i < ksize; i++)
		h = (h ^ p[i]) * 0x100000001b3ULL;
	return coffer_hash_mix64(h);
}

static bool key_cmp(const struct coffer_hnode *n, const void *key, size_t ksize)
{
	return ksize == KEYLEN && memcmp(rec_of(n)->key, key, KEYLEN) == 0;
}

static void rec_free(struct coffer_hnode *n, void *priv)
{
	struct rec *r = rec_of(n);

	/* Runs on the call_rcu worker: no cmocka asserts here, count and check later. */
	if (priv != &frees)
		__atomic_fetch_add(&bad_priv, 1, __ATOMIC_RELAXED);
	r->magic = MAGIC_FREED;
	__atomic_fetch_add(&frees, 1, __ATOMIC_RELAXED);
	my_frees++;
	free(r);
}

static void hook_addref(struct coffer_hnode *n)
{
	(void)n;
	__atomic_fetch_add(&addrefs, 1, __ATOMIC_RELAXED);
}

static void hook_decref(struct coffer_hnode *n)
{
	(void)n;
	__atomic_fetch_add(&decrefs, 1, __ATOMIC_RELAXED);
}

static const struct coffer_htab_ops ops = {
    .hop_key_hash = key_hash,
    .hop_key_cmp = key_cmp,
    .hop_rec_free = rec_free,
};

static const struct coffer_htab_ops hook_ops = {
    .hop_key_hash = key_hash,
    .hop_key_cmp = key_cmp,
    .hop_rec_addref = hook_addref,
    .hop_rec_decref = hook_decref,
    .hop_rec_free = rec_free,
};

static void mkkey(uint8_t *k, unsigned int i)
{
	memset(k, 0xab, KEYLEN);
	memcpy(k, &i, sizeof(i));
}

static struct rec *rec_new(unsigned int i)
{
	struct rec *r = calloc(1, sizeof(*r));

	assert_non_null(r);
	mkkey(r->key, i);
	r->magic = MAGIC_LIVE;
	return r;
}

static int frees_now(void)
{
	assert_int_equal(coffer__rcu_barrier(), 0);
	assert_int_equal(__atomic_load_n(&bad_priv, __ATOMIC_RELAXED), 0);
	return __atomic_load_n(&frees, __ATOMIC_RELAXED);
}

static struct coffer_htab *mktab(const struct coffer_htab_ops *o, uint32_t blog)
{
	struct coffer_htab_params p = {.buckets_log2 = blog, .priv = &frees};
	struct coffer_htab *tab = NULL;

	assert_int_equal(coffer_htab_create(&p, o, &tab), 0);
	assert_non_null(tab);
	return tab;
}

static int setup(void **state)
{
	(void)state;
	frees = addrefs = decrefs = 0;
	return 0;
}

static void test_create_params(void **state)
{
	struct coffer_htab_ops bad = ops;
	struct coffer_htab_params p = {0};
	struct coffer__htab_stats st;
	struct coffer_htab *tab = NULL;

	(void)state;
	assert_int_equal(coffer_htab_create(NULL, NULL, &tab), -EINVAL);
	assert_int_equal(coffer_htab_create(NULL, &ops, NULL), -EINVAL);
	bad.hop_key_hash = NULL;
	assert_int_equal(coffer_htab_create(NULL, &bad, &tab), -EINVAL);
	bad = ops;
	bad.hop_key_cmp = NULL;
	assert_int_equal(coffer_htab_create(NULL, &bad, &tab), -EINVAL);
	bad = ops;
	bad.hop_rec_free = NULL;
	assert_int_equal(coffer_htab_create(NULL, &bad, &tab), -EINVAL);
	p.buckets_log2 = 27;
	assert_int_equal(coffer_htab_create(&p, &ops, &tab), -EINVAL);
	p.buckets_log2 = 4;
	p.locks_log2 = 5;
	assert_int_equal(coffer_htab_create(&p, &ops, &tab), -EINVAL);
	assert_null(tab);

	/* Defaults: 2^14 buckets, 2^12 stripes, 24 bytes per bucket plus the header. */
	assert_int_equal(coffer_htab_create(NULL, &ops, &tab), 0);
	coffer__htab_stats(tab, &st);
	assert_int_equal(st.buckets, 1u << 14);
	assert_int_equal(st.stripes, 1u << 12);
	assert_true(st.bytes >= 24u * st.buckets && st.bytes < 24u * st.buckets + 1024);
	assert_int_equal(coffer_htab_count(tab), 0);
	assert_int_equal(coffer_htab_destroy(tab, false), 0);

	/* Small table: stripes default to the bucket count. */
	p.buckets_log2 = 3;
	p.locks_log2 = 0;
	assert_int_equal(coffer_htab_create(&p, &ops, &tab), 0);
	coffer__htab_stats(tab, &st);
	assert_int_equal(st.buckets, 8);
	assert_int_equal(st.stripes, 8);
	assert_int_equal(coffer_htab_destroy(tab, false), 0);
	assert_int_equal(coffer_htab_destroy(NULL, false), -EINVAL);
	assert_int_equal(coffer_htab_count(NULL), 0);
}

static void test_insert_lookup_delete(void **state)
{
	struct coffer_htab *tab = mktab(&ops, 4);
	struct rec *r = rec_new(1), *dup = rec_new(1);
	struct coffer_hnode *n = NULL;
	uint8_t k[KEYLEN];

	(void)state;
	mkkey(k, 1);
	assert_int_equal(coffer_htab_lookup(tab, k, KEYLEN, &n), -ENOENT);
	assert_null(n);
	assert_int_equal(coffer_htab_insert(tab, r->key, KEYLEN, &r->node), 0);
	assert_int_equal(r->node.hn_ref, 1); /* the table's reference */
	assert_int_equal(coffer_htab_insert(tab, dup->key, KEYLEN, &dup->node), -EEXIST);
	free(dup);
	assert_int_equal(coffer_htab_count(tab), 1);

	assert_int_equal(coffer_htab_lookup(tab, k, KEYLEN, &n), 0);
	assert_ptr_equal(n, &r->node);
	assert_int_equal(r->node.hn_ref, 2);
	coffer_htab_decref(tab, n);
	assert_int_equal(r->node.hn_ref, 1);

	assert_int_equal(coffer_htab_delete(tab, k, KEYLEN), 0);
	assert_int_equal(coffer_htab_delete(tab, k, KEYLEN), -ENOENT);
	assert_int_equal(coffer_htab_lookup(tab, k, KEYLEN, &n), -ENOENT);
	assert_int_equal(coffer_htab_count(tab), 0);
	assert_int_equal(frees_now(), 1);

	/* Argument errors. */
	assert_int_equal(coffer_htab_insert(NULL, k, KEYLEN, &r->node), -EINVAL);
	assert_int_equal(coffer_htab_insert(tab, NULL, KEYLEN, &r->node), -EINVAL);
	assert_int_equal(coffer_htab_insert(tab, k, KEYLEN, NULL), -EINVAL);
	assert_int_equal(coffer_htab_lookup(NULL, k, KEYLEN, &n), -EINVAL);
	assert_int_equal(coffer_htab_lookup(tab, NULL, KEYLEN, &n), -EINVAL);
	assert_int_equal(coffer_htab_lookup(tab, k, KEYLEN, NULL), -EINVAL);
	assert_int_equal(coffer_htab_delete(NULL, k, KEYLEN), -EINVAL);
	assert_int_equal(coffer_htab_delete(tab, NULL, KEYLEN), -EINVAL);
	assert_int_equal(coffer_htab_delete_node(NULL, &r->node), -EINVAL);
	assert_int_equal(coffer_htab_delete_node(tab, NULL), -EINVAL);
	assert_int_equal(coffer_htab_destroy(tab, false), 0);
}

/* A reference outlives delete; the free waits for the last decref and a grace period. */
static void test_refcount_lifetime(void **state)
{
	struct coffer_htab *tab = mktab(&ops, 4);
	struct rec *r = rec_new(7);
	struct coffer_hnode *n;
	struct coffer__htab_stats st;

	(void)state;
	assert_int_equal(coffer_htab_insert(tab, r->key, KEYLEN, &r->node), 0);
	assert_int_equal(coffer_htab_lookup(tab, r->key, KEYLEN, &n), 0);
	coffer_htab_addref(tab, n);
	assert_int_equal(r->node.hn_ref, 3);
	assert_int_equal(coffer_htab_delete_node(tab, n), 0);
	assert_int_equal(coffer_htab_delete_node(tab, n), -ENOENT);
	assert_int_equal(r->node.hn_ref, 2);
	assert_int_equal(frees_now(), 0);
	assert_int_equal(r->magic, MAGIC_LIVE);
	coffer_htab_decref(tab, n);
	assert_int_equal(frees_now(), 0);
	coffer_htab_decref(tab, n); /* last: schedules the free */
	assert_int_equal(r->node.hn_ref, 0);
	/* Still in a batch (not yet freed): a decref or addref too many is refused, counted. */
	coffer_htab_decref(tab, n);
	coffer_htab_addref(tab, n);
	assert_int_equal(r->node.hn_ref, 0);
	coffer__htab_stats(tab, &st);
	assert_int_equal(st.ref_underflows, 2);
	assert_int_equal(st.inserted, 1);
	assert_int_equal(st.unlinked, 1);
	assert_int_equal(frees_now(), 1);
	assert_int_equal(coffer_htab_destroy(tab, false), 0);
}

static void test_lookup_rcu(void **state)
{
	struct coffer_htab *tab = mktab(&ops, 2);
	struct rec *r = rec_new(3);
	uint8_t k[KEYLEN];

	(void)state;
	mkkey(k, 3);
	assert_int_equal(coffer_htab_insert(tab, r->key, KEYLEN, &r->node), 0);
	coffer_rcu_read_lock();
	coffer_rcu_read_lock(); /* nests */
	assert_ptr_equal(coffer_htab_lookup_rcu(tab, k, KEYLEN), &r->node);
	coffer_rcu_read_unlock();
	assert_int_equal(r->node.hn_ref, 1); /* wrote nothing */
	/* Deleted while we are inside: no longer found, memory still valid until we leave. */
	assert_int_equal(coffer_htab_delete(tab, k, KEYLEN), 0);
	assert_null(coffer_htab_lookup_rcu(tab, k, KEYLEN));
	assert_int_equal(r->magic, MAGIC_LIVE);
	assert_null(coffer_htab_lookup_rcu(NULL, k, KEYLEN));
	assert_null(coffer_htab_lookup_rcu(tab, NULL, KEYLEN));
	/* Barrier and destroy refuse to run inside a read-side section. */
	assert_int_equal(coffer__rcu_barrier(), -EINVAL);
	assert_int_equal(coffer_htab_destroy(tab, true), -EINVAL);
	coffer_rcu_read_unlock();
	assert_int_equal(frees_now(), 1);
	assert_int_equal(coffer_htab_destroy(tab, false), 0);
}

static void test_lookup_bulk(void **state)
{
	struct coffer_htab *tab = mktab(&ops, 6);
	uint8_t kbuf[COFFER_HTAB_BULK_MAX + 1][KEYLEN];
	const void *keys[COFFER_HTAB_BULK_MAX + 1];
	struct coffer_hnode *nodes[COFFER_HTAB_BULK_MAX + 1];
	struct rec *recs[COFFER_HTAB_BULK_MAX];

	(void)state;
	for (unsigned int i = 0; i < COFFER_HTAB_BULK_MAX; i++) {
		recs[i] = rec_new(i);
		assert_int_equal(coffer_htab_insert(tab, recs[i]->key, KEYLEN, &recs[i]->node), 0);
	}
	for (unsigned int i = 0; i <= COFFER_HTAB_BULK_MAX; i++) {
		mkkey(kbuf[i], i);
		keys[i] = kbuf[i];
	}
	assert_int_equal(coffer_htab_lookup_bulk(tab, keys, KEYLEN, COFFER_HTAB_BULK_MAX, nodes),
			 COFFER_HTAB_BULK_MAX);
	for (unsigned int i = 0; i < COFFER_HTAB_BULK_MAX; i++) {
		assert_ptr_equal(nodes[i], &recs[i]->node);
		assert_int_equal(recs[i]->node.hn_ref, 2);
		coffer_htab_decref(tab, nodes[i]);
	}
	/* Key 64 is missing: all or nothing, no reference kept. */
	assert_int_equal(
	    coffer_htab_lookup_bulk(tab, keys + 1, KEYLEN, COFFER_HTAB_BULK_MAX, nodes), -ENOENT);
	for (unsigned int i = 0; i < COFFER_HTAB_BULK_MAX; i++) {
		assert_null(nodes[i]);
		assert_int_equal(recs[i]->node.hn_ref, 1);
	}
	assert_int_equal(coffer_htab_lookup_bulk(tab, keys, KEYLEN, 0, nodes), 0);
	assert_int_equal(
	    coffer_htab_lookup_bulk(tab, keys, KEYLEN, COFFER_HTAB_BULK_MAX + 1, nodes), -EINVAL);
	assert_int_equal(coffer_htab_lookup_bulk(NULL, keys, KEYLEN, 1, nodes), -EINVAL);
	assert_int_equal(coffer_htab_lookup_bulk(tab, NULL, KEYLEN, 1, nodes), -EINVAL);
	assert_int_equal(coffer_htab_lookup_bulk(tab, keys, KEYLEN, 1, NULL), -EINVAL);
	keys[0] = NULL;
	assert_int_equal(coffer_htab_lookup_bulk(tab, keys, KEYLEN, 1, nodes), -EINVAL);
	assert_int_equal(coffer_htab_destroy(tab, false), -EBUSY);
	assert_int_equal(coffer_htab_count(tab), COFFER_HTAB_BULK_MAX);
	assert_int_equal(coffer_htab_destroy(tab, true), 0);
	assert_int_equal(frees_now(), COFFER_HTAB_BULK_MAX);
}

static void test_find_or_insert(void **state)
{
	struct coffer_htab *tab = mktab(&ops, 3);
	struct rec *a = rec_new(5), *b = rec_new(5);
	struct coffer_hnode *found = NULL;

	(void)state;
	assert_int_equal(coffer_htab_find_or_insert(tab, a->key, KEYLEN, &a->node, &found), 0);
	assert_ptr_equal(found, &a->node);
	assert_int_equal(a->node.hn_ref, 2); /* table + caller */
	assert_int_equal(coffer_htab_find_or_insert(tab, b->key, KEYLEN, &b->node, &found), 1);
	assert_ptr_equal(found, &a->node);
	assert_int_equal(a->node.hn_ref, 3);
	free(b);
	assert_int_equal(coffer_htab_find_or_insert(tab, a->key, KEYLEN, &a->node, NULL), -EINVAL);
	assert_int_equal(coffer_htab_find_or_insert(NULL, a->key, KEYLEN, &a->node, &found),
			 -EINVAL);
	coffer_htab_decref(tab, found);
	coffer_htab_decref(tab, found);
	assert_int_equal(coffer_htab_count(tab), 1);
	assert_int_equal(coffer_htab_destroy(tab, true), 0);
	assert_int_equal(frees_now(), 1);
}

struct trav {
	int visited;
	int stop_after;
	bool delete;
	struct coffer_htab *tab;
};

static int trav_cb(struct coffer_hnode *n, void *arg)
{
	struct trav *t = arg;

	if (rec_of(n)->magic != MAGIC_LIVE || n->hn_ref < 2)
		return -EFAULT; /* we must hold a reference on a live record */
	t->visited++;
	if (t->delete &&coffer_htab_delete_node(t->tab, n) != 0)
		return -EFAULT;
	if (t->stop_after && t->visited == t->stop_after)
		return 42;
	return 0;
}

static void test_traverse(void **state)
{
	struct coffer_htab *tab = mktab(&ops, 6);
	struct trav t = {.tab = tab};
	uint32_t cursor = 0;
	int calls = 0, rc;

	(void)state;
	for (unsigned int i = 0; i < 1000; i++) {
		struct rec *r = rec_new(i);

		assert_int_equal(coffer_htab_insert(tab, r->key, KEYLEN, &r->node), 0);
	}
	do {
		assert_int_equal(coffer_htab_traverse(tab, &cursor, 7, trav_cb, &t), 0);
		calls++;
	} while (cursor != COFFER_HTAB_CURSOR_END);
	assert_int_equal(t.visited, 1000);
	assert_int_equal(calls, (64 + 6) / 7);
	/* At the end: nothing more to do. */
	assert_int_equal(coffer_htab_traverse(tab, &cursor, 7, trav_cb, &t), 0);

	/* Stop early: the callback's value comes back; the cursor moved on. */
	t.visited = 0;
	t.stop_after = 3;
	cursor = 0;
	rc = coffer_htab_traverse(tab, &cursor, 64, trav_cb, &t);
	assert_int_equal(rc, 42);
	assert_int_equal(t.visited, 3);
	assert_true(cursor > 0);

	/* Delete everything from the callback. */
	t.visited = 0;
	t.stop_after = 0;
	t.delete = true;
	cursor = 0;
	assert_int_equal(coffer_htab_traverse(tab, &cursor, 1000, trav_cb, &t), 0);
	assert_int_equal(cursor, COFFER_HTAB_CURSOR_END);
	assert_int_equal(t.visited, 1000);
	assert_int_equal(coffer_htab_count(tab), 0);

	cursor = 0;
	assert_int_equal(coffer_htab_traverse(NULL, &cursor, 1, trav_cb, &t), -EINVAL);
	assert_int_equal(coffer_htab_traverse(tab, NULL, 1, trav_cb, &t), -EINVAL);
	assert_int_equal(coffer_htab_traverse(tab, &cursor, 0, trav_cb, &t), -EINVAL);
	assert_int_equal(coffer_htab_traverse(tab, &cursor, 1, NULL, &t), -EINVAL);
	cursor = 64;
	assert_int_equal(coffer_htab_traverse(tab, &cursor, 1, trav_cb, &t), -EINVAL);
	assert_int_equal(coffer_htab_destroy(tab, false), 0);
	assert_int_equal(frees_now(), 1000);
}

static void test_hooks(void **state)
{
	struct coffer_htab *tab = mktab(&hook_ops, 2);
	struct rec *r = rec_new(9);
	struct coffer_hnode *n;

	(void)state;
	assert_int_equal(coffer_htab_insert(tab, r->key, KEYLEN, &r->node), 0);
	assert_int_equal(coffer_htab_lookup(tab, r->key, KEYLEN, &n), 0);
	coffer_htab_addref(tab, n);
	assert_int_equal(addrefs, 2);
	coffer_htab_decref(tab, n);
	coffer_htab_decref(tab, n);
	assert_int_equal(decrefs, 2);
	assert_int_equal(coffer_htab_delete(tab, r->key, KEYLEN), 0);
	assert_int_equal(decrefs, 3);
	assert_int_equal(frees_now(), 1);
	assert_int_equal(coffer_htab_destroy(tab, false), 0);
}

/* Chains: many keys in 2 buckets, deletes from the middle of chains. */
static void test_chains(void **state)
{
	struct coffer_htab_params p = {.buckets_log2 = 1, .locks_log2 = 1, .priv = &frees};
	struct coffer_htab *tab;
	struct coffer_hnode *n;
	uint8_t k[KEYLEN];

	(void)state;
	assert_int_equal(coffer_htab_create(&p, &ops, &tab), 0);
	for (unsigned int i = 0; i < 200; i++) {
		struct rec *r = rec_new(i);

		assert_int_equal(coffer_htab_insert(tab, r->key, KEYLEN, &r->node), 0);
	}
	for (unsigned int i = 0; i < 200; i += 3) {
		mkkey(k, i);
		assert_int_equal(coffer_htab_delete(tab, k, KEYLEN), 0);
	}
	for (unsigned int i = 0; i < 200; i++) {
		mkkey(k, i);
		if (i % 3 == 0) {
			assert_int_equal(coffer_htab_lookup(tab, k, KEYLEN, &n), -ENOENT);
		} else {
			assert_int_equal(coffer_htab_lookup(tab, k, KEYLEN, &n), 0);
			assert_memory_equal(rec_of(n)->key, k, KEYLEN);
			coffer_htab_decref(tab, n);
		}
	}
	assert_int_equal(coffer_htab_count(tab), 200 - 67);
	assert_int_equal(coffer_htab_destroy(tab, true), 0);
	assert_int_equal(frees_now(), 200);
}

/* A record still held when a draining destroy returns is freed (with the table) later. */
static void test_destroy_with_held_record(void **state)
{
	struct coffer_htab *tab = mktab(&ops, 2);
	struct rec *r = rec_new(11);
	struct coffer_hnode *n;

	(void)state;
	assert_int_equal(coffer_htab_insert(tab, r->key, KEYLEN, &r->node), 0);
	assert_int_equal(coffer_htab_lookup(tab, r->key, KEYLEN, &n), 0);
	assert_int_equal(coffer_htab_destroy(tab, true), 0);
	assert_int_equal(frees_now(), 0);
	assert_int_equal(r->magic, MAGIC_LIVE);
	coffer_htab_decref(tab, n); /* frees the record, then the table (ASan: no leak) */
	assert_int_equal(frees_now(), 1);
}

/* The per-record fallback (no batch memory, or a thread already past its exit destructor). */
static void test_reclaim_single(void **state)
{
	struct coffer_htab *tab = mktab(&ops, 3);

	(void)state;
	coffer__reclaim_force_single(true);
	for (unsigned int i = 0; i < 10; i++) {
		struct rec *r = rec_new(i);

		assert_int_equal(coffer_htab_insert(tab, r->key, KEYLEN, &r->node), 0);
		assert_int_equal(coffer_htab_delete(tab, r->key, KEYLEN), 0);
	}
	coffer__reclaim_force_single(false);
	urcu_bp_barrier(); /* no flush needed: nothing waits in a batch */
	assert_int_equal(__atomic_load_n(&frees, __ATOMIC_RELAXED), 10);
	assert_int_equal(coffer_htab_destroy(tab, false), 0);
}

/* Batches come back from call_rcu to the thread that retired them, which frees them itself on
 * a later retire (reclaim.c R4); the thread's exit frees or hands over what is left. */
struct handback_arg {
	struct coffer_htab *tab;
	unsigned int cycles;	 /* out: insert/delete cycles done */
	int own_frees;		 /* out: records this thread freed itself */
	unsigned int min_cycles; /* loop at least this long ... */
	bool until_own_free;	 /* ... and then until it freed one record itself (bounded) */
	pthread_mutex_t mu;	 /* with cv: the idle phase */
	pthread_cond_t cv;
	int phase; /* 1: cycles done (thread idle); 2: main says exit */
};

static void *handback_thread(void *p)
{
	struct handback_arg *a = p;
	unsigned int i;

	for (i = 0; i < a->min_cycles || (a->until_own_free && my_frees == 0 && i < 20000000u);
	     i++) {
		struct rec *r = rec_new(i);

		if (coffer_htab_insert(a->tab, r->key, KEYLEN, &r->node) != 0 ||
		    coffer_htab_delete(a->tab, r->key, KEYLEN) != 0)
			break;
	}
	a->cycles = i;
	a->own_frees = my_frees;
	pthread_mutex_lock(&a->mu);
	a->phase = 1;
	pthread_cond_broadcast(&a->cv);
	while (a->phase != 2)
		pthread_cond_wait(&a->cv, &a->mu);
	pthread_mutex_unlock(&a->mu);
	return NULL;
}

static void handback_run(struct handback_arg *a, pthread_t *th)
{
	pthread_mutex_init(&a->mu, NULL);
	pthread_cond_init(&a->cv, NULL);
	a->phase = 0;
	assert_int_equal(pthread_create(th, NULL, handback_thread, a), 0);
	pthread_mutex_lock(&a->mu);
	while (a->phase != 1)
		pthread_cond_wait(&a->cv, &a->mu);
	pthread_mutex_unlock(&a->mu);
}

static void handback_end(struct handback_arg *a, pthread_t th)
{
	pthread_mutex_lock(&a->mu);
	a->phase = 2;
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->mu);
	assert_int_equal(pthread_join(th, NULL), 0);
	pthread_mutex_destroy(&a->mu);
	pthread_cond_destroy(&a->cv);
}

/* A thread that keeps retiring frees (some of) its own records: the worker hands them back. */
static void test_reclaim_handback_owner_frees(void **state)
{
	struct handback_arg a = {.tab = mktab(&ops, 8), .min_cycles = 1000, .until_own_free = true};
	pthread_t th;

	(void)state;
	handback_run(&a, &th);
	assert_true(a.cycles >= 1000);
	assert_true(a.own_frees > 0); /* one grace period passes within 20M cycles */
	/* The thread is idle now, possibly with handed-back batches: destroy frees them all. */
	assert_int_equal(coffer_htab_destroy(a.tab, false), 0);
	assert_int_equal(__atomic_load_n(&frees, __ATOMIC_RELAXED), (int)a.cycles);
	handback_end(&a, th);
	assert_int_equal(frees_now(), (int)a.cycles);
}

/* An idle owner with batches on its ready stack: a destroy from another thread returns only
 * after every one of them was freed (the barrier drains the stacks, R5). */
static void test_reclaim_handback_idle_owner(void **state)
{
	struct handback_arg a = {.tab = mktab(&ops, 8), .min_cycles = 64 * 10};
	struct coffer__htab_stats st;
	pthread_t th;

	(void)state;
	handback_run(&a, &th);
	assert_int_equal(a.cycles, 64 * 10);
	/* Full batches (all 10) passed their grace period and went back to the idle thread;
	 * liburcu's own barrier does not free them, coffer's does. */
	urcu_bp_barrier();
	coffer__htab_stats(a.tab, &st);
	assert_int_equal(st.inserted, 640);
	assert_int_equal(st.unlinked, 640);
	assert_int_equal(coffer_htab_destroy(a.tab, false), 0);
	assert_int_equal(__atomic_load_n(&frees, __ATOMIC_RELAXED), 640);
	handback_end(&a, th);
	assert_int_equal(frees_now(), 640);
}

/* An owner that exits with batches in flight: they are freed by their callbacks. */
static void test_reclaim_handback_owner_exits(void **state)
{
	struct handback_arg a = {.tab = mktab(&ops, 8), .min_cycles = 64 * 10 + 5};
	pthread_t th;

	(void)state;
	handback_run(&a, &th);
	handback_end(&a, th); /* exits at once: nothing came back yet, or some did */
	assert_int_equal(frees_now(), 64 * 10 + 5);
	assert_int_equal(coffer_htab_destroy(a.tab, false), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_create_params, setup),
	    cmocka_unit_test_setup(test_insert_lookup_delete, setup),
	    cmocka_unit_test_setup(test_refcount_lifetime, setup),
	    cmocka_unit_test_setup(test_lookup_rcu, setup),
	    cmocka_unit_test_setup(test_lookup_bulk, setup),
	    cmocka_unit_test_setup(test_find_or_insert, setup),
	    cmocka_unit_test_setup(test_traverse, setup),
	    cmocka_unit_test_setup(test_hooks, setup),
	    cmocka_unit_test_setup(test_chains, setup),
	    cmocka_unit_test_setup(test_destroy_with_held_record, setup),
	    cmocka_unit_test_setup(test_reclaim_single, setup),
	    cmocka_unit_test_setup(test_reclaim_handback_owner_frees, setup),
	    cmocka_unit_test_setup(test_reclaim_handback_idle_owner, setup),
	    cmocka_unit_test_setup(test_reclaim_handback_owner_exits, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
