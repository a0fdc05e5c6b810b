/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Unit tests for coffer_hhash (cookies, types, error codes, references) and the process
 * runtime (coffer_init/fini reference counting, coffer_hhash_global).
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

#include <coffer/common.h>
#include <coffer/hash.h>

#include "hashtable/htab_internal.h"

struct obj {
	struct coffer_hlink link;
	int payload;
};

static int frees;

static void obj_free(struct coffer_hlink *l)
{
	__atomic_fetch_add(&frees, 1, __ATOMIC_RELAXED);
	free(l);
}

static struct obj *obj_new(void)
{
	struct obj *o = calloc(1, sizeof(*o));

	assert_non_null(o);
	o->link.hl_free = obj_free;
	return o;
}

static int frees_now(void)
{
	assert_int_equal(coffer__rcu_barrier(), 0);
	return __atomic_load_n(&frees, __ATOMIC_RELAXED);
}

static int setup(void **state)
{
	(void)state;
	frees = 0;
	return 0;
}

static void test_insert_lookup_types(void **state)
{
	struct coffer_hhash *hh = NULL;
	struct obj *o = obj_new(), *o2 = obj_new();
	struct coffer_hlink *l = NULL;
	coffer_handle_t h = COFFER_HANDLE_NULL, h2;

	(void)state;
	assert_int_equal(coffer_hhash_create(NULL, NULL), -EINVAL);
	assert_int_equal(coffer_hhash_create(NULL, &hh), 0);
	assert_int_equal(coffer_hhash_insert(hh, &o->link, COFFER_HTYPE_EQ, &h), 0);
	assert_int_not_equal(h.cookie, 0);
	assert_int_equal(h.cookie & 15, COFFER_HTYPE_EQ);
	assert_int_equal(o->link.hl_cookie, h.cookie);
	assert_int_equal(coffer_hhash_insert(hh, &o2->link, COFFER_HTYPE_OBJ, &h2), 0);
	assert_true(h2.cookie >> COFFER_HTYPE_BITS > h.cookie >> COFFER_HTYPE_BITS);
	assert_int_equal(coffer_hhash_count(hh), 2);

	assert_int_equal(coffer_hhash_lookup(hh, h, COFFER_HTYPE_EQ, &l), 0);
	assert_ptr_equal(l, &o->link);
	coffer_hhash_putref(hh, l);
	/* Wrong type: -EINVAL, even though the cookie exists. */
	assert_int_equal(coffer_hhash_lookup(hh, h, COFFER_HTYPE_OBJ, &l), -EINVAL);
	assert_null(l);
	assert_int_equal(coffer_hhash_lookup(hh, h2, COFFER_HTYPE_EQ, &l), -EINVAL);
	/* Never issued (right type bits, unused counter) and the null handle. */
	assert_int_equal(coffer_hhash_lookup(hh, (coffer_handle_t){(UINT64_C(1) << 59) | 1},
					     COFFER_HTYPE_EQ, &l),
			 -ENOENT);
	assert_int_equal(coffer_hhash_lookup(hh, COFFER_HANDLE_NULL, COFFER_HTYPE_EQ, &l), -EINVAL);
	/* Bad arguments. */
	assert_int_equal(coffer_hhash_lookup(hh, h, (enum coffer_htype)0, &l), -EINVAL);
	assert_int_equal(coffer_hhash_lookup(hh, h, (enum coffer_htype)16, &l), -EINVAL);
	assert_int_equal(coffer_hhash_lookup(NULL, h, COFFER_HTYPE_EQ, &l), -EINVAL);
	assert_int_equal(coffer_hhash_lookup(hh, h, COFFER_HTYPE_EQ, NULL), -EINVAL);

	coffer_rcu_read_lock();
	assert_ptr_equal(coffer_hhash_lookup_rcu(hh, h, COFFER_HTYPE_EQ), &o->link);
	assert_null(coffer_hhash_lookup_rcu(hh, h, COFFER_HTYPE_CONN));
	assert_null(coffer_hhash_lookup_rcu(NULL, h, COFFER_HTYPE_EQ));
	assert_null(coffer_hhash_lookup_rcu(hh, (coffer_handle_t){h.cookie + 16}, COFFER_HTYPE_EQ));
	coffer_rcu_read_unlock();
	assert_int_equal(o->link.hl_node.hn_ref, 1);

	/* Deleted: -ENOENT; delete twice: -ENOENT. */
	assert_int_equal(coffer_hhash_delete(hh, &o->link), 0);
	assert_int_equal(coffer_hhash_lookup(hh, h, COFFER_HTYPE_EQ, &l), -ENOENT);
	coffer_rcu_read_lock();
	assert_null(coffer_hhash_lookup_rcu(hh, h, COFFER_HTYPE_EQ));
	coffer_rcu_read_unlock();
	assert_int_equal(frees_now(), 1);
	assert_int_equal(coffer_hhash_delete(NULL, &o2->link), -EINVAL);
	/* By handle: wrong type, bad type, NULL, then the record's own type; then gone. */
	{
		struct obj *o3 = obj_new();
		coffer_handle_t h3;
		struct coffer_hlink *l3;

		assert_int_equal(coffer_hhash_insert(hh, &o3->link, COFFER_HTYPE_OBJ, &h3), 0);
		assert_int_equal(coffer_hhash_delete_handle(hh, h3, COFFER_HTYPE_EQ), -EINVAL);
		assert_int_equal(coffer_hhash_delete_handle(hh, h3, (enum coffer_htype)0), -EINVAL);
		assert_int_equal(coffer_hhash_delete_handle(NULL, h3, COFFER_HTYPE_OBJ), -EINVAL);
		assert_int_equal(coffer_hhash_lookup(hh, h3, COFFER_HTYPE_OBJ, &l3), 0);
		assert_int_equal(coffer_hhash_delete_handle(hh, h3, COFFER_HTYPE_OBJ), 0);
		assert_int_equal(coffer_hhash_delete_handle(hh, h3, COFFER_HTYPE_OBJ), -ENOENT);
		assert_null(coffer_hhash_lookup_rcu(hh, h3, COFFER_HTYPE_OBJ));
		assert_int_equal(coffer_hhash_delete(hh, l3), -ENOENT);
		/* Still held by our lookup: not freed until we drop it. */
		assert_int_equal(l3->hl_cookie, h3.cookie);
		assert_int_equal(frees_now(), 1);
		coffer_hhash_putref(hh, l3);
		assert_int_equal(frees_now(), 2);
		assert_int_equal(
		    coffer_hhash_delete_handle(hh, (coffer_handle_t){0}, COFFER_HTYPE_OBJ),
		    -EINVAL);
	}
	assert_int_equal(coffer_hhash_delete(hh, NULL), -EINVAL);

	assert_int_equal(coffer_hhash_destroy(hh, false), -EBUSY);
	assert_int_equal(coffer_hhash_destroy(NULL, false), -EINVAL);
	assert_int_equal(coffer_hhash_count(NULL), 0);
	assert_int_equal(coffer_hhash_destroy(hh, true), 0);
	assert_int_equal(frees_now(), 3);
}

static void test_insert_errors(void **state)
{
	struct coffer_hhash *hh;
	struct obj *o = obj_new();
	coffer_handle_t h;

	(void)state;
	assert_int_equal(coffer_hhash_create(NULL, &hh), 0);
	assert_int_equal(coffer_hhash_insert(NULL, &o->link, COFFER_HTYPE_EQ, &h), -EINVAL);
	assert_int_equal(coffer_hhash_insert(hh, NULL, COFFER_HTYPE_EQ, &h), -EINVAL);
	assert_int_equal(coffer_hhash_insert(hh, &o->link, COFFER_HTYPE_EQ, NULL), -EINVAL);
	assert_int_equal(coffer_hhash_insert(hh, &o->link, (enum coffer_htype)0, &h), -EINVAL);
	assert_int_equal(coffer_hhash_insert(hh, &o->link, (enum coffer_htype)16, &h), -EINVAL);
	o->link.hl_free = NULL;
	assert_int_equal(coffer_hhash_insert(hh, &o->link, COFFER_HTYPE_EQ, &h), -EINVAL);
	free(o);
	{
		struct coffer_htab_params p = {.buckets_log2 = 30};
		struct coffer_hhash *bad = NULL;

		assert_int_equal(coffer_hhash_create(&p, &bad), -EINVAL);
		p.buckets_log2 = 3;
		p.locks_log2 = 4;
		assert_int_equal(coffer_hhash_create(&p, &bad), -EINVAL);
		assert_null(bad);
	}
	assert_int_equal(coffer_hhash_count(hh), 0);
	assert_int_equal(coffer_hhash_destroy(hh, false), 0);
}

static void test_refs(void **state)
{
	struct coffer_hhash *hh;
	struct obj *o = obj_new();
	struct coffer_hlink *l;
	coffer_handle_t h;

	(void)state;
	assert_int_equal(coffer_hhash_create(NULL, &hh), 0);
	assert_int_equal(coffer_hhash_insert(hh, &o->link, COFFER_HTYPE_TEST, &h), 0);
	assert_int_equal(coffer_hhash_lookup(hh, h, COFFER_HTYPE_TEST, &l), 0);
	coffer_hhash_addref(hh, l);
	assert_int_equal(l->hl_node.hn_ref, 3);
	assert_int_equal(coffer_hhash_delete(hh, l), 0);
	assert_int_equal(frees_now(), 0);
	coffer_hhash_putref(hh, l);
	coffer_hhash_putref(hh, l);
	assert_int_equal(frees_now(), 1);
	assert_int_equal(coffer_hhash_destroy(hh, false), 0);
}

/* A reference held across a draining destroy is dropped through the destroyed hash afterwards
 * (what a thread that outlives coffer_fini() does with its hidden EQ): the record and then the
 * hash itself are freed at that last release, not before (ASan: no use after free, no leak). */
static void test_putref_after_destroy(void **state)
{
	struct coffer_hhash *hh;
	struct obj *o = obj_new(), *o2 = obj_new();
	struct coffer_hlink *l;
	coffer_handle_t h, h2;

	(void)state;
	assert_int_equal(coffer_hhash_create(NULL, &hh), 0);
	assert_int_equal(coffer_hhash_insert(hh, &o->link, COFFER_HTYPE_TEST, &h), 0);
	assert_int_equal(coffer_hhash_insert(hh, &o2->link, COFFER_HTYPE_TEST, &h2), 0);
	assert_int_equal(coffer_hhash_lookup(hh, h, COFFER_HTYPE_TEST, &l), 0);
	assert_int_equal(coffer_hhash_destroy(hh, true), 0);
	assert_int_equal(frees_now(), 1); /* o2, which nobody held */
	coffer_hhash_putref(hh, l);
	assert_int_equal(frees_now(), 2);
}

/* Sequential cookies spread over buckets and stripes: runs of 8 consecutive counters take
 * 8 consecutive buckets (one line of heads, 8 different stripes), and the runs are mixed. */
static void test_cookie_mixing(void **state)
{
	struct coffer_htab_params p = {.buckets_log2 = 10, .locks_log2 = 6};
	struct coffer_hhash *hh;
	struct obj *objs[1024];
	uint64_t cookies[1024];
	unsigned int used[1024] = {0}, runs_used[128] = {0}, nonempty = 0, nruns = 0;
	coffer_handle_t h;

	(void)state;
	assert_int_equal(coffer_hhash_create(&p, &hh), 0);
	for (unsigned int i = 0; i < 1024; i++) {
		objs[i] = obj_new();
		assert_int_equal(coffer_hhash_insert(hh, &objs[i]->link, COFFER_HTYPE_TEST, &h), 0);
		cookies[i] = h.cookie;
		used[coffer__hhash_cookie_hash(h.cookie) & 1023]++;
		runs_used[(coffer__hhash_cookie_hash(h.cookie) & 1023) >> 3]++;
	}
	for (unsigned int i = 0; i < 1024; i++)
		nonempty += used[i] != 0;
	for (unsigned int i = 0; i < 128; i++)
		nruns += runs_used[i] != 0;
	for (unsigned int i = 0; i < 1024; i++) {
		uint64_t c = cookies[i] >> COFFER_HTYPE_BITS,
			 b = coffer__hhash_cookie_hash(cookies[i]);

		/* One thread: consecutive counters, except where a new range begins (ranges are
		 * aligned to 1024, so a run never spans two). Within a run of 8: consecutive
		 * buckets, hence different stripes. */
		if (i > 0 && (c & 1023) != 0)
			assert_int_equal(c, (cookies[i - 1] >> COFFER_HTYPE_BITS) + 1);
		if (i > 0 && (c & 7) != 0)
			assert_int_equal(b & 1023,
					 (coffer__hhash_cookie_hash(cookies[i - 1]) & 1023) + 1);
		/* The type bits do not move a cookie. */
		assert_int_equal(b, coffer__hhash_cookie_hash((c << COFFER_HTYPE_BITS) | 1));
	}
	/* 128 runs placed at random over 128 run slots fill ~81 (63%); sequential placement of
	 * runs would fill every slot, a constant one 1. */
	assert_true(nruns > 56 && nruns < 110);
	assert_true(nonempty > 450);
	assert_int_equal(coffer_hhash_count(hh), 1024);
	assert_int_equal(coffer_hhash_destroy(hh, true), 0);
	assert_int_equal(frees_now(), 1024);
}

/* delete_handle walks a chain to its record (the close path): with 2
 * buckets every chain is long, and deleting oldest-first finds each record at a chain's tail,
 * newest-first at its head, alternately in the middle. Only the named record goes; a handle of
 * the wrong type or already deleted is refused; the others still resolve. */
static void test_delete_handle_chains(void **state)
{
	enum { N = 96 };
	struct coffer_htab_params p = {.buckets_log2 = 1, .locks_log2 = 1};
	struct coffer_hhash *hh;
	struct coffer_hlink *l;
	struct obj *objs[N];
	coffer_handle_t h[N];
	bool gone[N] = {false};
	unsigned int order[N], k = 0;

	(void)state;
	assert_int_equal(coffer_hhash_create(&p, &hh), 0);
	for (unsigned int i = 0; i < N; i++) {
		objs[i] = obj_new();
		objs[i]->payload = (int)i;
		assert_int_equal(coffer_hhash_insert(hh, &objs[i]->link, COFFER_HTYPE_TEST, &h[i]),
				 0);
	}
	/* Oldest first for a third, newest first for a third, then the middle ones. */
	for (unsigned int i = 0; i < N / 3; i++)
		order[k++] = i;
	for (unsigned int i = 0; i < N / 3; i++)
		order[k++] = N - 1 - i;
	for (unsigned int i = N / 3; i < N - N / 3; i++)
		order[k++] = i;
	assert_int_equal(k, N);
	for (k = 0; k < N; k++) {
		unsigned int i = order[k];

		assert_int_equal(coffer_hhash_delete_handle(hh, h[i], COFFER_HTYPE_EQ), -EINVAL);
		assert_int_equal(coffer_hhash_delete_handle(hh, h[i], COFFER_HTYPE_TEST), 0);
		gone[i] = true;
		assert_int_equal(coffer_hhash_delete_handle(hh, h[i], COFFER_HTYPE_TEST), -ENOENT);
		assert_int_equal(coffer_hhash_count(hh), N - 1 - k);
		/* Every other record still resolves to itself; deleted ones do not. */
		for (unsigned int j = 0; j < N; j += 7) {
			int rc = coffer_hhash_lookup(hh, h[j], COFFER_HTYPE_TEST, &l);

			if (gone[j]) {
				assert_int_equal(rc, -ENOENT);
				continue;
			}
			assert_int_equal(rc, 0);
			assert_int_equal(((struct obj *)(void *)l)->payload, (int)j);
			coffer_hhash_putref(hh, l);
		}
	}
	assert_int_equal(frees_now(), N);
	assert_int_equal(coffer_hhash_destroy(hh, false), 0);
}

static void test_init_fini(void **state)
{
	struct coffer_hhash *g;
	struct obj *o = obj_new();
	coffer_handle_t h;

	(void)state;
	assert_null(coffer_hhash_global());
	assert_int_equal(coffer_fini(), -EINVAL);
	assert_int_equal(coffer_init(), 0);
	g = coffer_hhash_global();
	assert_non_null(g);
	assert_int_equal(coffer_init(), 0);
	assert_ptr_equal(coffer_hhash_global(), g);
	assert_int_equal(coffer_hhash_insert(g, &o->link, COFFER_HTYPE_TEST, &h), 0);
	assert_int_equal(coffer_fini(), 0);
	assert_ptr_equal(coffer_hhash_global(), g);
	/* fini inside a read-side section would deadlock in rcu_barrier: refused. */
	coffer_rcu_read_lock();
	assert_int_equal(coffer_fini(), -EINVAL);
	coffer_rcu_read_unlock();
	assert_int_equal(coffer_fini(), 0); /* last: remaining handles released */
	assert_null(coffer_hhash_global());
	assert_int_equal(frees, 1);
	assert_int_equal(coffer_fini(), -EINVAL);
	/* And again from scratch. */
	assert_int_equal(coffer_init(), 0);
	assert_non_null(coffer_hhash_global());
	assert_int_equal(coffer_fini(), 0);
}

static void *insert_in_new_thread(void *arg)
{
	struct obj *o = obj_new();
	coffer_handle_t h;
	intptr_t rc = coffer_hhash_insert(arg, &o->link, COFFER_HTYPE_TEST, &h);

	if (rc != 0)
		free(o);
	return (void *)rc;
}

/* Last test of the binary: afterwards no new thread can get cookies. */
static void test_cookie_exhaustion(void **state)
{
	struct coffer_hhash *hh;
	struct obj *o = obj_new();
	coffer_handle_t h;
	pthread_t t;
	void *ret;

	(void)state;
	assert_int_equal(coffer_hhash_create(NULL, &hh), 0);
	coffer__hhash_raise_counter((UINT64_MAX >> COFFER_HTYPE_BITS) - 10);
	/* A thread with no range left gets -ENOSPC; cookies never wrap to reused values. */
	assert_int_equal(pthread_create(&t, NULL, insert_in_new_thread, hh), 0);
	assert_int_equal(pthread_join(t, &ret), 0);
	assert_int_equal((intptr_t)ret, -ENOSPC);
	/* This thread still owns the rest of its range. */
	assert_int_equal(coffer_hhash_insert(hh, &o->link, COFFER_HTYPE_TEST, &h), 0);
	assert_true(h.cookie >> COFFER_HTYPE_BITS < (UINT64_MAX >> COFFER_HTYPE_BITS) - 10);
	assert_int_equal(coffer_hhash_destroy(hh, true), 0);
	assert_int_equal(frees_now(), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_insert_lookup_types, setup),
	    cmocka_unit_test_setup(test_insert_errors, setup),
	    cmocka_unit_test_setup(test_refs, setup),
	    cmocka_unit_test_setup(test_putref_after_destroy, setup),
	    cmocka_unit_test_setup(test_cookie_mixing, setup),
	    cmocka_unit_test_setup(test_delete_handle_chains, setup),
	    cmocka_unit_test_setup(test_init_fini, setup),
	    cmocka_unit_test_setup(test_cookie_exhaustion, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
