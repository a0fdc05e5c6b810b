/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/store/objtab_test.c - unit tests of the store's object table in-process (no
 * sockets): the paths that are hard to reach from outside - a pending replacement when the
 * object it replaces is deleted or evicted, release by offset after a replace, the creator
 * dying with a replacement pending, waiting gets expiring in deadline order and dropped with
 * their route - each followed by coffer__ot_check() and, at the end, nothing left.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "runtime/proto_util.h"
#include "tools/objtab.h"

#define CAP (64u * 1024u)

static struct coffer_rep delivered[64];
static struct coffer__owner *delivered_to[64];
static uint32_t delivered_route[64];
static int ndelivered;

static void deliver(void *ctx, struct coffer__owner *ow, uint32_t route,
		    const struct coffer_rep *rep)
{
	(void)ctx;
	assert_true(ndelivered < 64);
	delivered[ndelivered] = *rep;
	delivered_to[ndelivered] = ow;
	delivered_route[ndelivered++] = route;
}

static uint64_t tags;

/* Execute one request; return its status, or 1 when it waits. */
static int ex(struct coffer__ot *ot, struct coffer__owner *ow, uint16_t op, uint8_t id,
	      uint64_t size, unsigned int flags, int64_t timeout, struct coffer_rep *out)
{
	struct coffer_req r;
	struct coffer_rep rep;

	memset(&r, 0, sizeof(r));
	r.tag = ++tags;
	r.op = op;
	r.oid[0] = id;
	r.size = size;
	r.flags = (uint16_t)flags;
	r.timeout_us = timeout;
	assert_int_equal(coffer__req_check(&r), 0);
	if (coffer__ot_exec(ot, ow, &r, 0, &rep) == 0)
		return 1;
	assert_int_equal(rep.tag, r.tag);
	assert_int_equal(coffer__ot_check(ot), 0);
	if (out != NULL)
		*out = rep;
	return rep.status;
}

static void empty_at_end(struct coffer__ot *ot)
{
	struct coffer__ot_stats st;

	coffer__ot_stats(ot, &st);
	assert_int_equal(st.used, 0);
	assert_int_equal(st.objects_created, 0);
	assert_int_equal(st.objects_sealed, 0);
	assert_int_equal(st.waiters, 0);
	assert_int_equal(st.holders, 0);
	assert_int_equal(st.entries, 0);
}

static void test_delete_with_pending_replacement(void **state)
{
	struct coffer__owner a, b;
	struct coffer__ot *ot;
	struct coffer_rep rep;

	(void)state;
	assert_int_equal(coffer__ot_create(&ot, CAP, 1, deliver, NULL), 0);
	coffer__ot_owner_init(&a);
	coffer__ot_owner_init(&b);
	assert_int_equal(ex(ot, &a, COFFER_OP_CREATE, 1, 100, 0, 0, NULL), 0);
	assert_int_equal(ex(ot, &a, COFFER_OP_SEAL, 1, 0, COFFER_SEAL_RELEASE, 0, NULL), 0);
	assert_int_equal(ex(ot, &a, COFFER_OP_CREATE, 1, 200, COFFER_CREATE_REPLACE, 0, NULL), 0);
	/* Deleting the visible object promotes the (unsealed) replacement: gets now wait. */
	assert_int_equal(ex(ot, &b, COFFER_OP_DELETE, 1, 0, 0, 0, NULL), 0);
	assert_int_equal(ex(ot, &b, COFFER_OP_CONTAINS, 1, 0, 0, 0, &rep), 0);
	assert_int_equal(rep.size, 0);
	ndelivered = 0;
	assert_int_equal(ex(ot, &b, COFFER_OP_GET, 1, 0, 0, -1, NULL), 1);
	assert_int_equal(ex(ot, &a, COFFER_OP_SEAL, 1, 0, COFFER_SEAL_RELEASE, 0, NULL), 0);
	assert_int_equal(ndelivered, 1);
	assert_int_equal(delivered[0].status, 0);
	assert_int_equal(delivered[0].size, 200);
	assert_ptr_equal(delivered_to[0], &b);
	assert_int_equal(ex(ot, &b, COFFER_OP_RELEASE, 1, 0, 0, 0, NULL), 0);
	assert_int_equal(ex(ot, &b, COFFER_OP_DELETE, 1, 0, 0, 0, NULL), 0);
	coffer__ot_owner_gone(ot, &a);
	coffer__ot_owner_gone(ot, &b);
	empty_at_end(ot);
	coffer__ot_destroy(ot);
}

static void test_release_by_offset_after_replace(void **state)
{
	struct coffer__owner a, b;
	struct coffer__ot *ot;
	struct coffer_rep old, cur;
	struct coffer_req r;
	struct coffer_rep rep;

	(void)state;
	assert_int_equal(coffer__ot_create(&ot, CAP, 1, deliver, NULL), 0);
	coffer__ot_owner_init(&a);
	coffer__ot_owner_init(&b);
	assert_int_equal(ex(ot, &a, COFFER_OP_CREATE, 2, 1000, 0, 0, NULL), 0);
	assert_int_equal(ex(ot, &a, COFFER_OP_SEAL, 2, 0, COFFER_SEAL_RELEASE, 0, NULL), 0);
	assert_int_equal(ex(ot, &b, COFFER_OP_GET, 2, 0, 0, 0, &old), 0);
	assert_int_equal(ex(ot, &a, COFFER_OP_CREATE, 2, 1000, COFFER_CREATE_REPLACE, 0, NULL), 0);
	assert_int_equal(ex(ot, &a, COFFER_OP_SEAL, 2, 0, COFFER_SEAL_RELEASE, 0, NULL), 0);
	assert_int_equal(ex(ot, &b, COFFER_OP_GET, 2, 0, 0, 0, &cur), 0);
	assert_true(cur.offset != old.offset);
	/* B holds both; releasing by offset drops exactly the old one. */
	memset(&r, 0, sizeof(r));
	r.tag = ++tags;
	r.op = COFFER_OP_RELEASE;
	r.oid[0] = 2;
	r.flags = COFFER_RELEASE_BY_OFFSET;
	r.size = old.offset;
	assert_int_equal(coffer__ot_exec(ot, &b, &r, 0, &rep), 1);
	assert_int_equal(rep.status, 0);
	assert_int_equal(coffer__ot_exec(ot, &b, &r, 0, &rep), 1);
	assert_int_equal(rep.status, -ENOENT); /* no longer held */
	{
		struct coffer__ot_stats st;

		coffer__ot_stats(ot, &st);
		assert_int_equal(st.used, 1024); /* the old object is freed */
	}
	r.size = cur.offset;
	assert_int_equal(coffer__ot_exec(ot, &b, &r, 0, &rep), 1);
	assert_int_equal(rep.status, 0);
	assert_int_equal(ex(ot, &a, COFFER_OP_DELETE, 2, 0, 0, 0, NULL), 0);
	coffer__ot_owner_gone(ot, &a);
	coffer__ot_owner_gone(ot, &b);
	empty_at_end(ot);
	coffer__ot_destroy(ot);
}

static void test_eviction_promotes_replacement_and_creator_dies(void **state)
{
	struct coffer__owner a, b;
	struct coffer__ot *ot;
	struct coffer__ot_stats st;

	(void)state;
	assert_int_equal(coffer__ot_create(&ot, CAP, 1, deliver, NULL), 0);
	coffer__ot_owner_init(&a);
	coffer__ot_owner_init(&b);
	/* Layout: old 3 [0, 16K) evictable; B's unsealed 9 [16K, 48K); A's replacement of
	 * 3 [48K, 64K). */
	assert_int_equal(ex(ot, &a, COFFER_OP_CREATE, 3, 16384, 0, 0, NULL), 0);
	assert_int_equal(ex(ot, &a, COFFER_OP_SEAL, 3, 0, COFFER_SEAL_RELEASE, 0, NULL), 0);
	assert_int_equal(ex(ot, &b, COFFER_OP_CREATE, 9, 32768, 0, 0, NULL), 0);
	assert_int_equal(ex(ot, &a, COFFER_OP_CREATE, 3, 16384, COFFER_CREATE_REPLACE, 0, NULL), 0);
	/* B needs the space: the old 3 is evicted, A's replacement becomes current. */
	assert_int_equal(ex(ot, &b, COFFER_OP_CREATE, 4, 16384, 0, 0, NULL), 0);
	coffer__ot_stats(ot, &st);
	assert_int_equal(st.evictions, 1);
	assert_int_equal(st.used, CAP);
	assert_int_equal(ex(ot, &b, COFFER_OP_CREATE, 3, 64, 0, 0, NULL), -EEXIST);
	/* A dies with its (now current) unsealed object: aborted; B's objects untouched. */
	coffer__ot_owner_gone(ot, &a);
	assert_int_equal(coffer__ot_check(ot), 0);
	coffer__ot_stats(ot, &st);
	assert_int_equal(st.objects_created, 2);
	assert_int_equal(st.used, 32768 + 16384);
	assert_int_equal(ex(ot, &b, COFFER_OP_CREATE, 3, 64, 0, 0, NULL), 0);
	coffer__ot_owner_gone(ot, &b);
	empty_at_end(ot);
	coffer__ot_destroy(ot);
}

static void test_waiters_expire_in_order_and_drop_with_route(void **state)
{
	struct coffer__owner a;
	struct coffer__ot *ot;
	struct coffer_req r;
	struct coffer_rep rep;
	uint64_t now = coffer__now_us();
	int i;

	(void)state;
	assert_int_equal(coffer__ot_create(&ot, CAP, 1, deliver, NULL), 0);
	coffer__ot_owner_init(&a);
	ndelivered = 0;
	/* Timeouts 30, 10, 20 ms and one forever on route 2. */
	for (i = 0; i < 4; i++) {
		memset(&r, 0, sizeof(r));
		r.tag = 100 + (uint64_t)i;
		r.op = COFFER_OP_GET;
		r.oid[0] = (uint8_t)(10 + i);
		r.timeout_us = i == 3 ? -1 : (i == 0 ? 30000 : i == 1 ? 10000 : 20000);
		assert_int_equal(coffer__ot_exec(ot, &a, &r, i == 3 ? 2 : 1, &rep), 0);
	}
	assert_true(coffer__ot_next_deadline(ot) >= now + 10000);
	assert_true(coffer__ot_next_deadline(ot) < now + 20000);
	coffer__ot_expire(ot, now + 1000000);
	assert_int_equal(ndelivered, 3);
	assert_int_equal(delivered[0].tag, 101);
	assert_int_equal(delivered[1].tag, 102);
	assert_int_equal(delivered[2].tag, 100);
	for (i = 0; i < 3; i++) {
		assert_int_equal(delivered[i].status, -ENOENT);
		assert_int_equal(delivered_route[i], 1);
	}
	assert_int_equal(coffer__ot_next_deadline(ot), UINT64_MAX);
	/* The forever-get goes with its route, without a reply. */
	coffer__ot_drop_route(ot, &a, 2);
	assert_int_equal(ndelivered, 3);
	coffer__ot_owner_gone(ot, &a);
	empty_at_end(ot);
	coffer__ot_destroy(ot);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_delete_with_pending_replacement),
	    cmocka_unit_test(test_release_by_offset_after_replace),
	    cmocka_unit_test(test_eviction_promotes_replacement_and_creator_dies),
	    cmocka_unit_test(test_waiters_expire_in_order_and_drop_with_route),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
