/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/store/objtab_test.c - unit tests of the store's object table in-process (no
 * sockets): the paths that are hard to reach from outside - a pending replacement when the
 * object it replaces is deleted or evicted, release by offset after a replace, the creator
 * dying with a replacement pending, waiting gets expiring in deadline order and dropped with
 * their route - each followed by coffer__ot_check() and, at the end, nothing left.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "runtime/proto_util.h"
#include "tools/objtab.h"

#define CAP	    (64u * 1024u)
#define INDEX_SLOTS 32u

/* Every table has a small object index, so coffer__ot_check() after each request also
 * checks that the index follows the table (and probe windows fill up). */
static struct coffer_index_slot g_index[INDEX_SLOTS];
static uint8_t g_access[INDEX_SLOTS / 8]; /* the access map clients would set */

static void deliver(void *ctx, struct coffer__owner *ow, uint32_t route,
		    const struct coffer_rep *rep);

static void ot_new(struct coffer__ot **ot)
{
	memset(g_index, 0, sizeof(g_index));
	memset(g_access, 0, sizeof(g_access));
	assert_int_equal(coffer__ot_create(ot, CAP, 1, deliver, NULL), 0);
	coffer__ot_set_index(*ot, g_index, g_access, INDEX_SLOTS, 0x5eed);
}

/* What the table answered is what libcoffer takes from a store that works (coffer__rep_check()
 * and, on a channel, runtime/channel.c's refusal of a GET's -EAGAIN): a status the store
 * sends that the client's per-op table lacks would reach the caller as -EPROTO. Segment 1,
 * as every table here is created with; offsets are checked by the tests themselves. */
static void assert_client_accepts(const struct coffer_rep *rep, uint16_t op, uint32_t route)
{
	assert_int_equal(coffer__rep_check(rep, op, 1, UINT64_MAX), 0);
	if (route != 0 && op == COFFER_OP_GET)
		assert_int_not_equal(rep->status, -EAGAIN);
}

static struct coffer_rep delivered[64];
static struct coffer__owner *delivered_to[64];
static uint32_t delivered_route[64];
static int ndelivered;

static void deliver(void *ctx, struct coffer__owner *ow, uint32_t route,
		    const struct coffer_rep *rep)
{
	(void)ctx;
	assert_true(ndelivered < 64);
	assert_client_accepts(rep, COFFER_OP_GET, route); /* only gets are answered later */
	delivered[ndelivered] = *rep;
	delivered_to[ndelivered] = ow;
	delivered_route[ndelivered++] = route;
}

static uint64_t tags;

/* Execute @r (given a fresh tag here); return its status, or 1 when it waits. */
static int ex_req(struct coffer__ot *ot, struct coffer__owner *ow, struct coffer_req *r,
		  struct coffer_rep *out)
{
	struct coffer_rep rep;

	r->tag = ++tags;
	assert_int_equal(coffer__req_check(r), 0);
	if (coffer__ot_exec(ot, ow, r, 0, &rep) == 0)
		return 1;
	assert_int_equal(rep.tag, r->tag);
	assert_client_accepts(&rep, r->op, 0);
	assert_int_equal(coffer__ot_check(ot), 0);
	if (out != NULL)
		*out = rep;
	return rep.status;
}

/* Execute one request; return its status, or 1 when it waits. */
static int ex(struct coffer__ot *ot, struct coffer__owner *ow, uint16_t op, uint8_t id,
	      uint64_t size, unsigned int flags, int64_t timeout, struct coffer_rep *out)
{
	struct coffer_req r = {
	    .op = op, .size = size, .flags = (uint16_t)flags, .timeout_us = timeout};

	r.oid[0] = id;
	return ex_req(ot, ow, &r, out);
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
	assert_int_equal(st.index_live, 0);
	for (unsigned int i = 0; i < INDEX_SLOTS; i++)
		assert_int_not_equal(g_index[i].state, COFFER_INDEX_LIVE);
}

/* The LIVE slot of ID @id as a client would find it (probe from the hash, stop at EMPTY),
 * or NULL. */
static const struct coffer_index_slot *index_find(uint8_t id)
{
	uint8_t oid[COFFER_OID_SIZE] = {id};
	uint64_t h = coffer__index_hash(0x5eed, oid);

	for (unsigned int i = 0; i < COFFER_INDEX_PROBE; i++) {
		const struct coffer_index_slot *x = &g_index[(h + i) % INDEX_SLOTS];

		if (x->state == COFFER_INDEX_EMPTY)
			return NULL;
		if (x->state == COFFER_INDEX_LIVE && memcmp(x->oid, oid, sizeof(oid)) == 0)
			return x;
	}
	return NULL;
}

static void test_delete_with_pending_replacement(void **state)
{
	struct coffer__owner a, b;
	struct coffer__ot *ot;
	struct coffer_rep rep;

	(void)state;
	ot_new(&ot);
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
	ot_new(&ot);
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
	ot_new(&ot);
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

/* A create whose only fitting free block is in its own size class (bigger than the
 * request, below the class boundary the arena's good-fit search rounds up to) is placed
 * there without evicting anything: the arena used to answer -ENOMEM and the table evicted
 * until two freed neighbours coalesced. */
static void test_create_fits_own_class_evicts_nothing(void **state)
{
	struct coffer__owner a;
	struct coffer__ot *ot;
	struct coffer__ot_stats st;
	struct coffer_rep rep, hole;
	uint8_t id;

	(void)state;
	ot_new(&ot); /* CAP 64 KiB = 1024 units of 64 bytes */
	coffer__ot_owner_init(&a);
	for (id = 1; id <= 15; id++) { /* 15 x 4224 (66 units) + 2176 fill it, all evictable */
		assert_int_equal(ex(ot, &a, COFFER_OP_CREATE, id, 4224, 0, 0, &rep), 0);
		assert_int_equal(ex(ot, &a, COFFER_OP_SEAL, id, 0, COFFER_SEAL_RELEASE, 0, NULL),
				 0);
		if (id == 8)
			hole = rep;
	}
	assert_int_equal(ex(ot, &a, COFFER_OP_CREATE, 16, CAP - 15 * 4224, 0, 0, NULL), 0);
	assert_int_equal(ex(ot, &a, COFFER_OP_SEAL, 16, 0, COFFER_SEAL_RELEASE, 0, NULL), 0);
	coffer__ot_stats(ot, &st);
	assert_int_equal(st.used, CAP);
	assert_int_equal(ex(ot, &a, COFFER_OP_DELETE, 8, 0, 0, 0, NULL), 0);
	/* 4160 bytes (65 units): class [64, 68) units, the free block 66 units. */
	assert_int_equal(ex(ot, &a, COFFER_OP_CREATE, 100, 4160, 0, 0, &rep), 0);
	assert_int_equal(rep.offset, hole.offset);
	coffer__ot_stats(ot, &st);
	assert_int_equal(st.evictions, 0);
	coffer__ot_owner_gone(ot, &a);
	for (id = 1; id <= 16; id++)
		(void)ex(ot, &a, COFFER_OP_DELETE, id, 0, 0, 0, NULL);
	(void)ex(ot, &a, COFFER_OP_DELETE, 100, 0, 0, 0, NULL);
	empty_at_end(ot);
	coffer__ot_destroy(ot);
}

/* Deferred coalescing (tools/arena.c, quick lists) must not cost evictions: deleted
 * objects' blocks wait uncoalesced on quick lists, and a create that fits only in their
 * coalesced space gets it without evicting anything, though evictable objects exist. */
static void test_create_fits_after_flush_evicts_nothing(void **state)
{
	struct coffer__owner a;
	struct coffer__ot *ot;
	struct coffer__ot_stats st;
	struct coffer_rep rep, first;
	uint8_t id;

	(void)state;
	ot_new(&ot); /* CAP 64 KiB: the quick lists hold at most CAP / 16 = 4 KiB */
	coffer__ot_owner_init(&a);
	for (id = 1; id <= 64; id++) { /* 64 x 1 KiB fill the arena, all evictable */
		assert_int_equal(ex(ot, &a, COFFER_OP_CREATE, id, 1024, 0, 0, &rep), 0);
		assert_int_equal(ex(ot, &a, COFFER_OP_SEAL, id, 0, COFFER_SEAL_RELEASE, 0, NULL),
				 0);
		if (id == 10)
			first = rep;
	}
	coffer__ot_stats(ot, &st);
	assert_int_equal(st.used, CAP);
	/* 10..13 are adjacent; deleted, their 4 KiB is free but on quick lists. */
	for (id = 10; id <= 13; id++)
		assert_int_equal(ex(ot, &a, COFFER_OP_DELETE, id, 0, 0, 0, NULL), 0);
	coffer__ot_stats(ot, &st);
	assert_int_equal(st.used, CAP - 4096);
	assert_int_equal(ex(ot, &a, COFFER_OP_CREATE, 100, 4096, 0, 0, &rep), 0);
	assert_int_equal(rep.offset, first.offset);
	coffer__ot_stats(ot, &st);
	assert_int_equal(st.evictions, 0);
	assert_int_equal(st.used, CAP);
	/* A 1 KiB delete then a 1 KiB create: the block is reused, nothing evicted. */
	assert_int_equal(ex(ot, &a, COFFER_OP_DELETE, 40, 0, 0, 0, NULL), 0);
	assert_int_equal(ex(ot, &a, COFFER_OP_CREATE, 101, 1024, 0, 0, NULL), 0);
	coffer__ot_stats(ot, &st);
	assert_int_equal(st.evictions, 0);
	/* Full: the next create evicts. */
	assert_int_equal(ex(ot, &a, COFFER_OP_CREATE, 102, 1024, 0, 0, NULL), 0);
	coffer__ot_stats(ot, &st);
	assert_int_equal(st.evictions, 1);
	coffer__ot_owner_gone(ot, &a);
	for (id = 1; id <= 64; id++)
		(void)ex(ot, &a, COFFER_OP_DELETE, id, 0, 0, 0, NULL);
	(void)ex(ot, &a, COFFER_OP_DELETE, 102, 0, 0, 0, NULL);
	empty_at_end(ot);
	coffer__ot_destroy(ot);
}

/* The create/seal fast paths: a create whose eviction frees its own ID's entry (a
 * replacement of the only evictable object) or another ID's, a seal's release when another
 * client waits on the unsealed object, a seal or abort by someone else or after the seal, a
 * release twice; coffer__ot_check() after each. */
static void test_create_seal_fast_paths(void **state)
{
	struct coffer__owner a, b;
	struct coffer__ot *ot;
	struct coffer__ot_stats st;
	struct coffer_rep rep;

	(void)state;
	ot_new(&ot);
	coffer__ot_owner_init(&a);
	coffer__ot_owner_init(&b);
	/* 1 fills the arena, sealed and released: the only evictable object. */
	assert_int_equal(ex(ot, &a, COFFER_OP_CREATE, 1, CAP, 0, 0, NULL), 0);
	assert_int_equal(ex(ot, &a, COFFER_OP_SEAL, 1, 0, COFFER_SEAL_RELEASE, 0, NULL), 0);
	/* Its replacement evicts it: the entry found first is freed with it. */
	assert_int_equal(ex(ot, &a, COFFER_OP_CREATE, 1, CAP, COFFER_CREATE_REPLACE, 0, &rep), 0);
	coffer__ot_stats(ot, &st);
	assert_int_equal(st.evictions, 1);
	assert_int_equal(st.entries, 1);
	assert_int_equal(st.objects_created, 1);
	assert_int_equal(st.objects_sealed, 0);
	assert_int_equal(st.holders, 1);
	/* B waits for the unsealed object; neither B's seal nor B's abort touches it. */
	ndelivered = 0;
	assert_int_equal(ex(ot, &b, COFFER_OP_GET, 1, 0, 0, -1, NULL), 1);
	assert_int_equal(ex(ot, &b, COFFER_OP_SEAL, 1, 0, COFFER_SEAL_RELEASE, 0, NULL), -EPERM);
	assert_int_equal(ex(ot, &b, COFFER_OP_ABORT, 1, 0, 0, 0, NULL), -EPERM);
	/* A's seal with release: B's waiting get gets the only reference left. */
	assert_int_equal(ex(ot, &a, COFFER_OP_SEAL, 1, 0, COFFER_SEAL_RELEASE, 0, NULL), 0);
	assert_int_equal(ndelivered, 1);
	assert_int_equal(delivered[0].status, 0);
	assert_int_equal(delivered[0].size, CAP);
	assert_ptr_equal(delivered_to[0], &b);
	assert_int_equal(ex(ot, &a, COFFER_OP_SEAL, 1, 0, 0, 0, NULL), -EALREADY);
	assert_int_equal(ex(ot, &a, COFFER_OP_ABORT, 1, 0, 0, 0, NULL), -EALREADY);
	assert_int_equal(ex(ot, &a, COFFER_OP_RELEASE, 1, 0, 0, 0, NULL), -ENOENT);
	coffer__ot_stats(ot, &st);
	assert_int_equal(st.holders, 1);
	/* Held by B: a create of another ID cannot evict it. */
	assert_int_equal(ex(ot, &a, COFFER_OP_CREATE, 2, 64, 0, 0, NULL), -ENOMEM);
	assert_int_equal(ex(ot, &b, COFFER_OP_RELEASE, 1, 0, 0, 0, NULL), 0);
	assert_int_equal(ex(ot, &b, COFFER_OP_RELEASE, 1, 0, 0, 0, NULL), -ENOENT);
	/* Now it can: a create of 2 evicts 1 (another ID's entry freed, its own not there). */
	assert_int_equal(ex(ot, &a, COFFER_OP_CREATE, 2, 64, 0, 0, NULL), 0);
	assert_int_equal(ex(ot, &b, COFFER_OP_GET, 1, 0, 0, 0, NULL), -ENOENT);
	/* A replacement of 2 while 2 is unsealed: refused, nothing evicted. */
	assert_int_equal(ex(ot, &a, COFFER_OP_CREATE, 2, 64, COFFER_CREATE_REPLACE, 0, NULL),
			 -EEXIST);
	assert_int_equal(ex(ot, &a, COFFER_OP_SEAL, 2, 0, 0, 0, NULL), 0);
	/* Sealed without release, A still holds it; B gets it too; a replacement evicts
	 * nothing (its entry kept as found) and the old version stays until both release. */
	assert_int_equal(ex(ot, &b, COFFER_OP_GET, 2, 0, 0, 0, NULL), 0);
	assert_int_equal(ex(ot, &a, COFFER_OP_CREATE, 2, 128, COFFER_CREATE_REPLACE, 0, NULL), 0);
	assert_int_equal(ex(ot, &a, COFFER_OP_SEAL, 2, 0, COFFER_SEAL_RELEASE, 0, NULL), 0);
	coffer__ot_stats(ot, &st);
	assert_int_equal(st.evictions, 2);
	assert_int_equal(st.objects_sealed, 2); /* the current one and the old, still held */
	assert_int_equal(st.holders, 2);
	assert_int_equal(ex(ot, &a, COFFER_OP_RELEASE, 2, 0, 0, 0, NULL), 0);
	assert_int_equal(ex(ot, &b, COFFER_OP_RELEASE, 2, 0, 0, 0, NULL), 0);
	assert_int_equal(ex(ot, &b, COFFER_OP_RELEASE, 2, 0, 0, 0, NULL), -ENOENT);
	coffer__ot_stats(ot, &st);
	assert_int_equal(st.objects_sealed, 1);
	assert_int_equal(st.holders, 0);
	assert_int_equal(ex(ot, &b, COFFER_OP_GET, 2, 0, 0, 0, &rep), 0);
	assert_int_equal(rep.size, 128);
	coffer__ot_owner_gone(ot, &b);
	coffer__ot_owner_gone(ot, &a);
	assert_int_equal(ex(ot, &a, COFFER_OP_DELETE, 2, 0, 0, 0, NULL), 0);
	empty_at_end(ot);
	coffer__ot_destroy(ot);
}

static void test_waiters_expire_in_order_and_drop_with_route(void **state)
{
	struct coffer__owner a;
	struct coffer__ot *ot;
	struct coffer_req r;
	struct coffer_rep rep;
	uint64_t lo = UINT64_MAX, hi = UINT64_MAX, before, after;
	int i;

	(void)state;
	ot_new(&ot);
	coffer__ot_owner_init(&a);
	ndelivered = 0;
	/* Timeouts 3, 1, 2 s and one forever on route 2. Each deadline is its exec's clock
	 * plus its timeout, so the earliest lies between the smallest of (clock before an exec
	 * + timeout) and the smallest of (clock after it + timeout), however long the
	 * machine kept the test waiting between the execs; seconds apart, the three are
	 * ordered 1, 2, 3 s unless an exec waits a second for its CPU. */
	for (i = 0; i < 4; i++) {
		memset(&r, 0, sizeof(r));
		r.tag = 100 + (uint64_t)i;
		r.op = COFFER_OP_GET;
		r.oid[0] = (uint8_t)(10 + i);
		r.timeout_us = i == 3 ? -1 : (i == 0 ? 3000000 : i == 1 ? 1000000 : 2000000);
		before = coffer__now_us();
		assert_int_equal(coffer__ot_exec(ot, &a, &r, i == 3 ? 2 : 1, &rep), 0);
		after = coffer__now_us();
		if (i < 3 && before + (uint64_t)r.timeout_us < lo)
			lo = before + (uint64_t)r.timeout_us;
		if (i < 3 && after + (uint64_t)r.timeout_us < hi)
			hi = after + (uint64_t)r.timeout_us;
	}
	assert_true(coffer__ot_next_deadline(ot) >= lo);
	assert_true(coffer__ot_next_deadline(ot) <= hi);
	coffer__ot_expire(ot, after + 60000000);
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

/* The index holds exactly the sealed current objects: sealing publishes (when the probe
 * window has room), a replacement takes over its predecessor's slot, delete and eviction
 * remove; unsealed objects are never in it. */
static void test_index_follows_table(void **state)
{
	const struct coffer_index_slot *x, *y;
	struct coffer__owner a;
	struct coffer__ot *ot;
	struct coffer__ot_stats st;
	struct coffer_rep rep;
	int i, placed = 0;

	(void)state;
	ot_new(&ot);
	coffer__ot_owner_init(&a);
	for (i = 1; i <= 40; i++) {
		assert_int_equal(ex(ot, &a, COFFER_OP_CREATE, (uint8_t)i, 64, 0, 0, &rep), 0);
		assert_null(index_find((uint8_t)i)); /* unsealed: not readable */
		assert_int_equal(
		    ex(ot, &a, COFFER_OP_SEAL, (uint8_t)i, 0, COFFER_SEAL_RELEASE, 0, NULL), 0);
		x = index_find((uint8_t)i);
		if (x != NULL) {
			assert_int_equal(x->offset, rep.offset);
			assert_int_equal(x->size, 64);
			assert_int_equal(x->seq % 2, 0);
			placed++;
		}
	}
	coffer__ot_stats(ot, &st);
	assert_int_equal(st.index_live, placed);
	assert_int_equal(st.index_live + st.index_unplaced, 40);
	assert_true(placed <= (int)INDEX_SLOTS);
	assert_true(st.index_unplaced >= 40 - INDEX_SLOTS);
	/* A replacement takes the same slot, with its own offset and size, once sealed. */
	for (i = 1; (x = index_find((uint8_t)i)) == NULL; i++)
		;
	assert_int_equal(
	    ex(ot, &a, COFFER_OP_CREATE, (uint8_t)i, 128, COFFER_CREATE_REPLACE, 0, &rep), 0);
	assert_true(index_find((uint8_t)i) == x && x->size == 64);
	assert_int_equal(ex(ot, &a, COFFER_OP_SEAL, (uint8_t)i, 0, COFFER_SEAL_RELEASE, 0, NULL),
			 0);
	y = index_find((uint8_t)i);
	assert_ptr_equal(y, x);
	assert_int_equal(y->offset, rep.offset);
	assert_int_equal(y->size, 128);
	/* Delete removes. */
	assert_int_equal(ex(ot, &a, COFFER_OP_DELETE, (uint8_t)i, 0, 0, 0, NULL), 0);
	assert_null(index_find((uint8_t)i));
	/* Eviction removes: fill the arena with objects that evict the 64-byte ones. */
	for (i = 100; i < 104; i++) {
		assert_int_equal(ex(ot, &a, COFFER_OP_CREATE, (uint8_t)i, CAP / 4, 0, 0, NULL), 0);
		assert_int_equal(
		    ex(ot, &a, COFFER_OP_SEAL, (uint8_t)i, 0, COFFER_SEAL_RELEASE, 0, NULL), 0);
	}
	coffer__ot_stats(ot, &st);
	assert_true(st.evictions >= 1);
	for (i = 1; i <= 40; i++) { /* an evicted object is gone from the index too */
		assert_int_equal(ex(ot, &a, COFFER_OP_CONTAINS, (uint8_t)i, 0, 0, 0, &rep), 0);
		if (rep.size == 0)
			assert_null(index_find((uint8_t)i));
	}
	for (i = 1; i < 104; i++) {
		int rc = ex(ot, &a, COFFER_OP_DELETE, (uint8_t)i, 0, 0, 0, NULL);

		assert_true(rc == 0 || rc == -ENOENT);
		assert_null(index_find((uint8_t)i));
	}
	coffer__ot_owner_gone(ot, &a);
	empty_at_end(ot);
	coffer__ot_destroy(ot);
}

/* What a client does after it copied object @id through the index: set its slot's bit. */
static void index_mark(uint8_t id)
{
	const struct coffer_index_slot *x = index_find(id);
	size_t i;

	assert_non_null(x);
	i = (size_t)(x - g_index);
	g_access[i / 8] |= (uint8_t)(1u << (i % 8));
}

/* Whether the slot of ID @id has its access bit set. */
static bool index_marked(uint8_t id)
{
	const struct coffer_index_slot *x = index_find(id);
	size_t i;

	assert_non_null(x);
	i = (size_t)(x - g_index);
	return (g_access[i / 8] >> (i % 8)) & 1;
}

/* Whether ID @id is still in the table. */
static bool cached(struct coffer__ot *ot, struct coffer__owner *ow, uint8_t id)
{
	struct coffer_rep rep = {0};

	assert_int_equal(ex(ot, ow, COFFER_OP_CONTAINS, id, 0, 0, 0, &rep), 0);
	return rep.size != 0;
}

/*
 * Reads through the index count as uses for eviction (CLOCK, access map): an object put
 * on the LRU list counts as just used, so the first eviction passes over all four objects
 * filling the arena, clearing their marks, and evicts the oldest; then object 2 is read through the
 * index, and the next two evictions take 3 and 4, not 2. A client that sets every bit
 * cannot stop eviction: it passes over each object at most once, then evicts.
 */
static void test_index_reads_keep_objects_cached(void **state)
{
	struct coffer__ot_stats st;
	struct coffer__owner a;
	struct coffer__ot *ot;
	uint8_t id;

	(void)state;
	ot_new(&ot);
	coffer__ot_owner_init(&a);
	for (id = 1; id <= 4; id++) {
		assert_int_equal(ex(ot, &a, COFFER_OP_CREATE, id, CAP / 4, 0, 0, NULL), 0);
		assert_int_equal(ex(ot, &a, COFFER_OP_SEAL, id, 0, COFFER_SEAL_RELEASE, 0, NULL),
				 0);
		assert_non_null(index_find(id));
		assert_false(index_marked(id)); /* a new slot starts clear */
	}
	/* all marked: one pass clears them, and the oldest goes */
	assert_int_equal(ex(ot, &a, COFFER_OP_CREATE, 5, CAP / 4, 0, 0, NULL), 0);
	assert_false(cached(ot, &a, 1));
	coffer__ot_stats(ot, &st);
	assert_int_equal(st.evictions, 1);
	assert_int_equal(st.second_chances, 4);
	for (id = 2; id <= 4; id++)
		assert_false(index_marked(id));
	/* 2 is read through the index: 3 and 4 go before it */
	index_mark(2);
	assert_int_equal(ex(ot, &a, COFFER_OP_SEAL, 5, 0, COFFER_SEAL_RELEASE, 0, NULL), 0);
	assert_int_equal(ex(ot, &a, COFFER_OP_CREATE, 6, CAP / 4, 0, 0, NULL), 0);
	assert_true(cached(ot, &a, 2) && cached(ot, &a, 4));
	assert_false(cached(ot, &a, 3));
	assert_int_equal(ex(ot, &a, COFFER_OP_SEAL, 6, 0, COFFER_SEAL_RELEASE, 0, NULL), 0);
	assert_int_equal(ex(ot, &a, COFFER_OP_CREATE, 7, CAP / 4, 0, 0, NULL), 0);
	assert_true(cached(ot, &a, 2));
	assert_false(cached(ot, &a, 4));
	assert_int_equal(ex(ot, &a, COFFER_OP_SEAL, 7, 0, COFFER_SEAL_RELEASE, 0, NULL), 0);
	/* every bit set (a client marking what it never read): eviction still happens */
	memset(g_access, 0xff, sizeof(g_access));
	assert_int_equal(ex(ot, &a, COFFER_OP_CREATE, 8, CAP / 4, 0, 0, NULL), 0);
	coffer__ot_stats(ot, &st);
	assert_int_equal(st.evictions, 4);
	assert_int_equal(ex(ot, &a, COFFER_OP_SEAL, 8, 0, COFFER_SEAL_RELEASE, 0, NULL), 0);
	for (id = 1; id <= 8; id++) {
		int rc = ex(ot, &a, COFFER_OP_DELETE, id, 0, 0, 0, NULL);

		assert_true(rc == 0 || rc == -ENOENT);
	}
	coffer__ot_owner_gone(ot, &a);
	empty_at_end(ot);
	coffer__ot_destroy(ot);
}

/* A client process that sets every access-map bit as fast as it can (runtime/proto.h,
 * "Access map"): here a thread storing 0xff over the whole map until told to stop. */
struct hammer {
	uint8_t *map;
	size_t bytes;
	int stop, started;
};

static void *hammer_main(void *arg)
{
	struct hammer *h = arg;

	while (!__atomic_load_n(&h->stop, __ATOMIC_ACQUIRE)) {
		for (size_t i = 0; i < h->bytes; i++)
			__atomic_store_n(&h->map[i], (uint8_t)0xff, __ATOMIC_RELAXED);
		__atomic_store_n(&h->started, 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

#define HAMMER_OBJS   2048u
#define HAMMER_SLOTS  4096u
#define HAMMER_ROUNDS 4u

/* One request passes over each evictable object at most once, however many objects it
 * must evict, even while a client re-marks every slot as fast as the store clears them:
 * the access map may cost a request one pass over the LRU list, never one pass per
 * eviction (a create that needed K evictions used to walk the list K times: K x N, a store
 * wedged for minutes at a few hundred thousand objects). */
static void test_marks_cost_one_pass_per_request(void **state)
{
	static struct coffer_index_slot slots[HAMMER_SLOTS];
	static uint8_t map[HAMMER_SLOTS / 8];
	static struct hammer h = {.map = map, .bytes = sizeof(map)}; /* outlives a failure */
	struct coffer__ot_stats st0, st;
	struct coffer_req r = {0};
	struct coffer__owner a;
	struct coffer__ot *ot;
	pthread_t t;
	unsigned int i, round;

	(void)state;
	memset(slots, 0, sizeof(slots));
	memset(map, 0, sizeof(map));
	assert_int_equal(
	    coffer__ot_create(&ot, (uint64_t)HAMMER_OBJS * COFFER_ARENA_ALIGN, 1, deliver, NULL),
	    0);
	coffer__ot_set_index(ot, slots, map, HAMMER_SLOTS, 0x5eed);
	coffer__ot_owner_init(&a);
	assert_int_equal(pthread_create(&t, NULL, hammer_main, &h), 0);
	while (!__atomic_load_n(&h.started, __ATOMIC_ACQUIRE))
		sched_yield();
	/* a few rounds: the marker must run while the store evicts (two cores, or a switch) */
	for (round = 0; round < HAMMER_ROUNDS; round++) {
		/* fill the arena with objects of one block each, all sealed and evictable */
		for (i = 0; i < HAMMER_OBJS; i++) {
			memset(&r, 0, sizeof(r));
			r.oid[0] = (uint8_t)(i & 0xff);
			r.oid[1] = (uint8_t)(i >> 8);
			r.oid[2] = 0xaa;
			r.op = COFFER_OP_CREATE;
			r.size = COFFER_ARENA_ALIGN;
			assert_int_equal(ex_req(ot, &a, &r, NULL), 0);
			r.op = COFFER_OP_SEAL;
			r.size = 0;
			r.flags = COFFER_SEAL_RELEASE;
			assert_int_equal(ex_req(ot, &a, &r, NULL), 0);
		}
		coffer__ot_stats(ot, &st0);
		assert_int_equal(st0.objects_sealed, HAMMER_OBJS);
		/* one create that needs every object evicted */
		assert_int_equal(ex(ot, &a, COFFER_OP_CREATE, 1,
				    (uint64_t)HAMMER_OBJS * COFFER_ARENA_ALIGN, 0, 0, NULL),
				 0);
		coffer__ot_stats(ot, &st);
		assert_int_equal(st.evictions - st0.evictions, HAMMER_OBJS);
		assert_true(st.second_chances - st0.second_chances <= HAMMER_OBJS);
		assert_int_equal(ex(ot, &a, COFFER_OP_SEAL, 1, 0, COFFER_SEAL_RELEASE, 0, NULL), 0);
		assert_int_equal(ex(ot, &a, COFFER_OP_DELETE, 1, 0, 0, 0, NULL), 0);
	}
	__atomic_store_n(&h.stop, 1, __ATOMIC_RELEASE);
	assert_int_equal(pthread_join(t, NULL), 0);
	coffer__ot_owner_gone(ot, &a);
	coffer__ot_stats(ot, &st);
	assert_int_equal(st.used, 0);
	assert_int_equal(st.entries, 0);
	coffer__ot_destroy(ot);
}

/* A RESERVE, PUT or UNRESERVE (protocol v5): @off is the reservation's offset; RESERVE
 * and UNRESERVE carry the all-zero ObjectID (@id 0). Never waits. */
static int exr(struct coffer__ot *ot, struct coffer__owner *ow, uint16_t op, uint8_t id,
	       uint64_t size, unsigned int flags, uint64_t off, struct coffer_rep *out)
{
	struct coffer_req r = {.op = op, .size = size, .flags = (uint16_t)flags, .offset = off};
	int rc;

	r.oid[0] = id;
	rc = ex_req(ot, ow, &r, out);
	assert_int_not_equal(rc, 1);
	return rc;
}

/* Reservations: only their owner can put or give them back; a put seals at once (no
 * reference, evictable, in the index), replaces atomically, and leaves the reservation
 * intact when it fails; a client that goes away frees what it never put. */
static void test_reserve_put(void **state)
{
	struct coffer__owner a, b;
	struct coffer__ot *ot;
	struct coffer__ot_stats st;
	struct coffer_rep r1, r2, r3, rep;
	const struct coffer_index_slot *x;
	struct coffer_req bad;

	(void)state;
	ot_new(&ot);
	coffer__ot_owner_init(&a);
	coffer__ot_owner_init(&b);
	/* field checks: an ObjectID on RESERVE, an offset on CREATE */
	memset(&bad, 0, sizeof(bad));
	bad.op = COFFER_OP_RESERVE;
	bad.size = 64;
	bad.oid[3] = 1;
	assert_int_equal(coffer__req_check(&bad), -EINVAL);
	bad.op = COFFER_OP_CREATE;
	bad.offset = 64;
	assert_int_equal(coffer__req_check(&bad), -EINVAL);
	assert_int_equal(exr(ot, &a, COFFER_OP_RESERVE, 0, 0, 0, 0, NULL), -EINVAL);
	assert_int_equal(exr(ot, &a, COFFER_OP_RESERVE, 0, CAP + 1, 0, 0, NULL), -E2BIG);
	assert_int_equal(exr(ot, &a, COFFER_OP_RESERVE, 0, 1000, 0, 0, &r1), 0);
	assert_int_equal(exr(ot, &a, COFFER_OP_RESERVE, 0, 2000, 0, 0, &r2), 0);
	assert_int_equal(r1.segment, 1);
	assert_int_not_equal(r1.offset, r2.offset);
	coffer__ot_stats(ot, &st);
	assert_int_equal(st.reserved, 2);
	assert_true(st.used >= 3000);
	assert_int_equal(st.objects_created + st.objects_sealed, 0);
	/* wrong owner, wrong offset, size 0 or above the reservation */
	assert_int_equal(exr(ot, &b, COFFER_OP_PUT, 7, 1000, 0, r1.offset, NULL), -ENOENT);
	assert_int_equal(exr(ot, &b, COFFER_OP_UNRESERVE, 0, 0, 0, r1.offset, NULL), -ENOENT);
	assert_int_equal(exr(ot, &a, COFFER_OP_PUT, 7, 1000, 0, r1.offset + 64, NULL), -ENOENT);
	assert_int_equal(exr(ot, &a, COFFER_OP_PUT, 7, 1001, 0, r1.offset, NULL), -EINVAL);
	assert_int_equal(exr(ot, &a, COFFER_OP_PUT, 7, 0, 0, r1.offset, NULL), -EINVAL);
	/* the put: sealed, readable, in the index, no holder, evictable */
	assert_int_equal(exr(ot, &a, COFFER_OP_PUT, 7, 1000, 0, r1.offset, NULL), 0);
	x = index_find(7);
	assert_non_null(x);
	assert_int_equal(x->offset, r1.offset);
	assert_int_equal(x->size, 1000);
	assert_int_equal(ex(ot, &b, COFFER_OP_GET, 7, 0, 0, 0, &rep), 0);
	assert_int_equal(rep.offset, r1.offset);
	assert_int_equal(rep.size, 1000);
	assert_int_equal(ex(ot, &a, COFFER_OP_RELEASE, 7, 0, 0, 0, NULL), -ENOENT);
	/* used up */
	assert_int_equal(exr(ot, &a, COFFER_OP_PUT, 8, 64, 0, r1.offset, NULL), -ENOENT);
	/* an existing ID without REPLACE, and one being created: the reservation stays */
	assert_int_equal(exr(ot, &a, COFFER_OP_PUT, 7, 2000, 0, r2.offset, NULL), -EEXIST);
	assert_int_equal(ex(ot, &b, COFFER_OP_CREATE, 9, 64, 0, 0, NULL), 0);
	assert_int_equal(
	    exr(ot, &a, COFFER_OP_PUT, 9, 2000, COFFER_CREATE_REPLACE, r2.offset, NULL), -EEXIST);
	assert_int_equal(ex(ot, &b, COFFER_OP_SEAL, 9, 0, COFFER_SEAL_RELEASE, 0, NULL), 0);
	/* REPLACE while b holds the old version: same index slot, old block kept for b */
	assert_int_equal(
	    exr(ot, &a, COFFER_OP_PUT, 7, 2000, COFFER_CREATE_REPLACE, r2.offset, NULL), 0);
	assert_ptr_equal(index_find(7), x);
	assert_int_equal(x->offset, r2.offset);
	assert_int_equal(x->size, 2000);
	assert_int_equal(ex(ot, &b, COFFER_OP_GET, 7, 0, 0, 0, &rep), 0);
	assert_int_equal(rep.offset, r2.offset);
	assert_int_equal(ex(ot, &b, COFFER_OP_RELEASE, 7, 0, 0, 0, NULL), 0);
	assert_int_equal(ex(ot, &b, COFFER_OP_RELEASE, 7, 0, 0, 0, NULL), 0); /* the old one */
	/* a waiting get is answered by a put */
	assert_int_equal(ex(ot, &b, COFFER_OP_GET, 10, 0, 0, -1, NULL), 1);
	assert_int_equal(exr(ot, &a, COFFER_OP_RESERVE, 0, 64, 0, 0, &r3), 0);
	ndelivered = 0;
	assert_int_equal(exr(ot, &a, COFFER_OP_PUT, 10, 64, 0, r3.offset, NULL), 0);
	assert_int_equal(ndelivered, 1);
	assert_int_equal(delivered[0].status, 0);
	assert_int_equal(delivered[0].offset, r3.offset);
	assert_ptr_equal(delivered_to[0], &b);
	assert_int_equal(ex(ot, &b, COFFER_OP_RELEASE, 10, 0, 0, 0, NULL), 0);
	/* give back: gone */
	assert_int_equal(exr(ot, &a, COFFER_OP_RESERVE, 0, 64, 0, 0, &r3), 0);
	assert_int_equal(exr(ot, &a, COFFER_OP_UNRESERVE, 0, 0, 0, r3.offset, NULL), 0);
	assert_int_equal(exr(ot, &a, COFFER_OP_UNRESERVE, 0, 0, 0, r3.offset, NULL), -ENOENT);
	/* reserved blocks are not evictable: a full arena of reservations says -ENOMEM,
	 * after evicting what is evictable */
	while (exr(ot, &a, COFFER_OP_RESERVE, 0, CAP / 8, 0, 0, NULL) == 0)
		;
	coffer__ot_stats(ot, &st);
	assert_true(st.reserved >= 5);
	assert_int_equal(exr(ot, &a, COFFER_OP_RESERVE, 0, CAP / 8, 0, 0, NULL), -ENOMEM);
	/* the owner goes: its reservations are freed, the objects it put stay */
	coffer__ot_owner_gone(ot, &a);
	assert_int_equal(coffer__ot_check(ot), 0);
	coffer__ot_stats(ot, &st);
	assert_int_equal(st.reserved, 0);
	for (uint8_t id = 7; id <= 10; id++)
		(void)ex(ot, &b, COFFER_OP_DELETE, id, 0, 0, 0, NULL);
	coffer__ot_owner_gone(ot, &b);
	empty_at_end(ot);
	coffer__ot_destroy(ot);
}

/* At most COFFER_RESERVE_MAX reservations per client: the next is -EAGAIN, another client
 * is unaffected. */
static void test_reserve_limit(void **state)
{
	struct coffer__owner a, b;
	struct coffer__ot *ot;

	(void)state;
	assert_int_equal(coffer__ot_create(&ot, 1u << 20, 1, deliver, NULL), 0);
	coffer__ot_owner_init(&a);
	coffer__ot_owner_init(&b);
	for (unsigned int i = 0; i < COFFER_RESERVE_MAX; i++) {
		struct coffer_req r = {.op = COFFER_OP_RESERVE, .size = 64};
		struct coffer_rep rep;

		assert_int_equal(coffer__ot_exec(ot, &a, &r, 0, &rep), 1);
		assert_int_equal(rep.status, 0);
	}
	assert_int_equal(exr(ot, &a, COFFER_OP_RESERVE, 0, 64, 0, 0, NULL), -EAGAIN);
	assert_int_equal(exr(ot, &b, COFFER_OP_RESERVE, 0, 64, 0, 0, NULL), 0);
	coffer__ot_owner_gone(ot, &a);
	coffer__ot_owner_gone(ot, &b);
	assert_int_equal(coffer__ot_check(ot), 0);
	coffer__ot_destroy(ot);
}

/* A random mix of every op (reservations among them) from three clients over four IDs and a
 * small arena, one client going away now and then: after each request coffer__ot_check()
 * holds, a put succeeds exactly when the model says the offset is the caller's reservation
 * (and the ID's rules allow it), a failed put or unreserve leaves the reservation the
 * caller's, and a successful put is read back at the reserved offset by another client. */
#define RND_OWNERS 3u
#define RND_RESV   64u

static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

struct rnd_resv {
	uint64_t off, size;
};

static void test_reserve_random(void **state)
{
	struct coffer__owner ow[RND_OWNERS];
	struct rnd_resv rv[RND_OWNERS][RND_RESV];
	unsigned int nrv[RND_OWNERS] = {0};
	unsigned int puts = 0, nomem = 0;
	struct coffer__ot *ot;
	struct coffer__ot_stats st;

	(void)state;
	ot_new(&ot);
	for (unsigned int i = 0; i < RND_OWNERS; i++)
		coffer__ot_owner_init(&ow[i]);
	for (unsigned int step = 0; step < 200000; step++) {
		unsigned int c = (unsigned int)(rnd() % RND_OWNERS), k = (unsigned int)(rnd() % 12);
		uint8_t id = (uint8_t)(1 + rnd() % 4);
		struct coffer__owner *o = &ow[c];
		struct coffer_rep rep;
		int rc;

		switch (k) {
		case 0:
			(void)ex(ot, o, COFFER_OP_CREATE, id, 1 + rnd() % (CAP / 8),
				 (unsigned int)(rnd() & 1), 0, NULL);
			break;
		case 1:
			(void)ex(ot, o, COFFER_OP_SEAL, id, 0, (unsigned int)(rnd() & 1), 0, NULL);
			break;
		case 2:
			(void)ex(ot, o, COFFER_OP_ABORT, id, 0, 0, 0, NULL);
			break;
		case 3:
			(void)ex(ot, o, COFFER_OP_GET, id, 0, 0, 0, NULL);
			break;
		case 4:
			(void)ex(ot, o, COFFER_OP_RELEASE, id, 0, 0, 0, NULL);
			break;
		case 5:
			(void)ex(ot, o, COFFER_OP_DELETE, id, 0, 0, 0, NULL);
			break;
		case 6:
		case 7: {
			uint64_t size = 1 + rnd() % (CAP / 8);

			rc = exr(ot, o, COFFER_OP_RESERVE, 0, size, 0, 0, &rep);
			if (rc == 0) {
				assert_true(nrv[c] < RND_RESV);
				rv[c][nrv[c]++] = (struct rnd_resv){rep.offset, size};
				if (nrv[c] == RND_RESV) { /* keep the model small */
					nrv[c]--;
					assert_int_equal(exr(ot, o, COFFER_OP_UNRESERVE, 0, 0, 0,
							     rv[c][nrv[c]].off, NULL),
							 0);
				}
			} else {
				assert_int_equal(rc, -ENOMEM);
				nomem++;
			}
			break;
		}
		case 8:
		case 9: {
			/* a put of a random reservation: usually the caller's, else another's */
			unsigned int who = (rnd() % 4) == 0 ? (c + 1) % RND_OWNERS : c;
			unsigned int flags = (unsigned int)(rnd() & 1);
			unsigned int j;
			uint64_t size;

			if (nrv[who] == 0)
				break;
			j = (unsigned int)(rnd() % nrv[who]);
			size = 1 + rnd() % rv[who][j].size;
			rc = exr(ot, o, COFFER_OP_PUT, id, size, flags, rv[who][j].off, &rep);
			if (who != c) {
				assert_int_equal(rc, -ENOENT);
				break;
			}
			if (rc != 0) {
				assert_int_equal(rc, -EEXIST);
				break;
			}
			rv[c][j] = rv[c][--nrv[c]];
			puts++;
			{
				struct coffer__owner *r = &ow[(c + 1) % RND_OWNERS];
				uint64_t off = rep.offset;

				assert_int_equal(ex(ot, r, COFFER_OP_GET, id, 0, 0, 0, &rep), 0);
				(void)off;
				assert_int_equal(rep.size, size);
				assert_int_equal(ex(ot, r, COFFER_OP_RELEASE, id, 0, 0, 0, NULL),
						 0);
			}
			break;
		}
		case 10:
			if (nrv[c] != 0) {
				unsigned int j = (unsigned int)(rnd() % nrv[c]);

				/* an offset inside it, then the wrong size on put, then back */
				assert_int_equal(exr(ot, o, COFFER_OP_UNRESERVE, 0, 0, 0,
						     rv[c][j].off + 1, NULL),
						 -ENOENT);
				if (rv[c][j].size > 64)
					assert_int_equal(exr(ot, o, COFFER_OP_PUT, id, 1, 0,
							     rv[c][j].off + 64, NULL),
							 -ENOENT);
				assert_int_equal(exr(ot, o, COFFER_OP_PUT, id, rv[c][j].size + 1, 0,
						     rv[c][j].off, NULL),
						 -EINVAL);
				assert_int_equal(
				    exr(ot, o, COFFER_OP_UNRESERVE, 0, 0, 0, rv[c][j].off, NULL),
				    0);
				assert_int_equal(
				    exr(ot, o, COFFER_OP_UNRESERVE, 0, 0, 0, rv[c][j].off, NULL),
				    -ENOENT);
				rv[c][j] = rv[c][--nrv[c]];
			}
			break;
		default:
			if (rnd() % 64 == 0) {
				coffer__ot_owner_gone(ot, o);
				assert_int_equal(coffer__ot_check(ot), 0);
				coffer__ot_owner_init(o);
				nrv[c] = 0;
			}
			break;
		}
		coffer__ot_stats(ot, &st);
		assert_int_equal(st.reserved, nrv[0] + nrv[1] + nrv[2]);
	}
	/* the mix reached what it is for: puts, a full arena, evictions */
	coffer__ot_stats(ot, &st);
	print_message("puts %u, reserve -ENOMEM %u, evictions %llu\n", puts, nomem,
		      (unsigned long long)st.evictions);
	assert_true(puts > 1000 && nomem > 0 && st.evictions > 1000);
	for (unsigned int i = 0; i < RND_OWNERS; i++)
		coffer__ot_owner_gone(ot, &ow[i]);
	for (uint8_t id = 1; id <= 4; id++)
		(void)ex(ot, &ow[0], COFFER_OP_DELETE, id, 0, 0, 0, NULL);
	empty_at_end(ot);
	coffer__ot_destroy(ot);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_delete_with_pending_replacement),
	    cmocka_unit_test(test_release_by_offset_after_replace),
	    cmocka_unit_test(test_eviction_promotes_replacement_and_creator_dies),
	    cmocka_unit_test(test_create_seal_fast_paths),
	    cmocka_unit_test(test_create_fits_after_flush_evicts_nothing),
	    cmocka_unit_test(test_create_fits_own_class_evicts_nothing),
	    cmocka_unit_test(test_index_reads_keep_objects_cached),
	    cmocka_unit_test(test_marks_cost_one_pass_per_request),
	    cmocka_unit_test(test_waiters_expire_in_order_and_drop_with_route),
	    cmocka_unit_test(test_index_follows_table),
	    cmocka_unit_test(test_reserve_put),
	    cmocka_unit_test(test_reserve_limit),
	    cmocka_unit_test(test_reserve_random),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
