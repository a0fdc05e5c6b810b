/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/store/objtab_alloc_test.c - the store's object table (and its arena) under injected
 * allocation failure.
 *
 * usage: objtab_alloc_test [MAX_K]
 *
 * Linked with -Wl,--wrap for malloc, calloc, realloc and free, so every allocation of the
 * store's static archive (tools/objtab.c, tools/arena.c) and of this test goes through the
 * injector below. One scripted scenario covers every operation: create (fresh, replace, 0
 * bytes), seal (with and without release), get (immediate; waiting on the socket route and on
 * a channel route, forever and with deadlines, expired, dropped with its route, woken by a
 * seal and by a put; 70 timed ones so that the deadline heap grows), release (by ID and by
 * offset), delete, abort, contains, reserve/put/unreserve, eviction under pressure, the
 * growth of all three hash tables (1100 entries, holders and reservations) and a client gone
 * while it holds references, unsealed objects, a pending replacement, waiting gets and
 * reservations. It runs once unarmed (the reference), then once per k = 1, 2, ... with the
 * k-th allocation failing, until a run makes fewer than k allocations. Checks:
 *  - a request whose allocation failed answers -ENOMEM and changes nothing: the table's
 *    counters (bytes used, objects, evictions, waiters, entries, holders, reservations, index)
 *    are what they were before it, and nothing is delivered; retried, it then succeeds;
 *  - a failure elsewhere is one the protocol allows: a waiting get woken by a seal or a put
 *    may be answered -ENOMEM (its reference could not be recorded); re-asked it succeeds;
 *  - coffer__ot_check() after every step of the first part and after every failed step;
 *  - after the retries each run's replies (status, offset, size) and deliveries equal the
 *    reference run's: a failure leaves no trace in what any later request sees;
 *  - coffer__ot_create() failing leaves nothing allocated; at the end, once the clients are
 *    gone and the table destroyed, nothing allocated through the injector is live.
 *
 * Context: single-threaded; the store's table is single-threaded too.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "runtime/proto_util.h"
#include "tools/objtab.h"

/* ------------------------------------------------------------------ the injector */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);

static long g_countdown; /* > 0: armed; the allocation that brings it to 0 fails */
static long g_count;	 /* allocations seen in this run */
static bool g_failed;	 /* an allocation failed since the flag was last cleared */
static long g_live;	 /* blocks allocated through the injector and not freed */

static bool inject(void)
{
	g_count++;
	if (g_countdown > 0 && --g_countdown == 0) {
		g_failed = true;
		return true;
	}
	return false;
}

void *__wrap_malloc(size_t n)
{
	void *p;

	if (inject())
		return NULL;
	p = __real_malloc(n);
	g_live += p != NULL;
	return p;
}

void *__wrap_calloc(size_t n, size_t m)
{
	void *p;

	if (inject())
		return NULL;
	p = __real_calloc(n, m);
	g_live += p != NULL;
	return p;
}

void *__wrap_realloc(void *p, size_t n)
{
	void *q;

	if (inject())
		return NULL;
	q = __real_realloc(p, n);
	g_live += p == NULL && q != NULL;
	return q;
}

void __wrap_free(void *p)
{
	g_live -= p != NULL;
	__real_free(p);
}

/* ------------------------------------------------------------------ the run */

#define CAP	    (1024u * 1024u)
#define INDEX_SLOTS 64u
#define NOWNERS	    3
#define TRACE_MAX   32768u
#define DELIV_MAX   256u
#define ROUTE_CHAN  2u /* a channel's route (channel 1) */

struct rec {
	int32_t status;
	uint64_t off, size;
};

struct run {
	struct coffer__ot *ot;
	struct coffer__owner ow[NOWNERS];
	bool full_check; /* coffer__ot_check() after every step */
	struct rec trace[TRACE_MAX];
	unsigned int ntrace;
	struct coffer_rep last; /* the last immediate reply */
	unsigned int failures;	/* steps in which the injected failure hit */
};

static struct coffer_index_slot g_index[INDEX_SLOTS];
static uint8_t g_access[INDEX_SLOTS / 8];

/* What the deliver callback was given during the current step. */
static struct coffer_rep g_deliv[DELIV_MAX];
static struct coffer__owner *g_deliv_to[DELIV_MAX];
static unsigned int g_ndeliv;

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

static void deliver(void *ctx, struct coffer__owner *ow, uint32_t route,
		    const struct coffer_rep *rep)
{
	(void)ctx;
	assert_true(g_ndeliv < DELIV_MAX);
	assert_client_accepts(rep, COFFER_OP_GET, route); /* only gets are answered later */
	g_deliv[g_ndeliv] = *rep;
	g_deliv_to[g_ndeliv++] = ow;
}

static void record(struct run *R, int32_t status, uint64_t off, uint64_t size)
{
	assert_true(R->ntrace < TRACE_MAX);
	R->trace[R->ntrace++] = (struct rec){.status = status, .off = off, .size = size};
}

static void stats_equal(const struct coffer__ot_stats *a, const struct coffer__ot_stats *b)
{
	assert_int_equal(a->used, b->used);
	assert_int_equal(a->objects_created, b->objects_created);
	assert_int_equal(a->objects_sealed, b->objects_sealed);
	assert_int_equal(a->evictions, b->evictions);
	assert_int_equal(a->evicted_bytes, b->evicted_bytes);
	assert_int_equal(a->waiters, b->waiters);
	assert_int_equal(a->entries, b->entries);
	assert_int_equal(a->holders, b->holders);
	assert_int_equal(a->index_live, b->index_live);
	assert_int_equal(a->reserved, b->reserved);
	assert_int_equal(a->reserved_bytes, b->reserved_bytes);
	assert_int_equal(a->second_chances, b->second_chances);
}

/* ObjectID @id; 0: the all-zero ID that RESERVE and UNRESERVE take. */
static void oid_of(uint8_t *oid, unsigned int id)
{
	memset(oid, 0, COFFER_OID_SIZE);
	if (id == 0)
		return;
	oid[0] = (uint8_t)id;
	oid[1] = (uint8_t)(id >> 8);
	oid[2] = 0xa5;
}

/*
 * One request of client @who. A failed allocation in it: the reply must be -ENOMEM with the
 * table unchanged (then it is retried unarmed), or the request succeeded and a waiting get it
 * woke was answered -ENOMEM (then that get is asked again, unarmed). Records the reply and
 * the deliveries. Return: the reply's status, or 1 when the get waits.
 */
static int step(struct run *R, int who, uint16_t op, unsigned int id, uint64_t size,
		unsigned int flags, int64_t timeout, uint64_t offset, uint32_t route)
{
	struct coffer_req r = {.op = op,
			       .size = size,
			       .flags = (uint16_t)flags,
			       .timeout_us = timeout,
			       .offset = offset};
	struct coffer__ot_stats before, after;
	struct coffer_rep rep;
	int imm;

	oid_of(r.oid, id);
	r.tag = R->ntrace + 1;
	assert_int_equal(coffer__req_check(&r), 0);
	coffer__ot_stats(R->ot, &before);
	g_ndeliv = 0;
	g_failed = false;
	imm = coffer__ot_exec(R->ot, &R->ow[who], &r, route, &rep);
	if (g_failed) {
		R->failures++;
		assert_int_equal(coffer__ot_check(R->ot), 0);
		if (imm && rep.status == -ENOMEM) {
			assert_client_accepts(&rep, op, route);
			coffer__ot_stats(R->ot, &after);
			stats_equal(&before, &after);
			assert_int_equal(g_ndeliv, 0);
			assert_int_equal(rep.offset, 0);
			g_countdown = 0; /* one failure per run: the retry runs unarmed */
			imm = coffer__ot_exec(R->ot, &R->ow[who], &r, route, &rep);
		} else {
			/* The request absorbed the failure (a hash table that could not grow
			 * keeps its longer chains), or a get it woke was answered -ENOMEM (its
			 * reference could not be recorded): ask that one again. Anything else
			 * the failure changed shows in the trace (counters after each step). */
			unsigned int n = 0;

			for (unsigned int i = 0; i < g_ndeliv; i++) {
				struct coffer_req g = {.op = COFFER_OP_GET};
				struct coffer_rep gr;
				uint64_t tag = g_deliv[i].tag;

				if (g_deliv[i].status != -ENOMEM)
					continue;
				n++;
				assert_true(op == COFFER_OP_SEAL || op == COFFER_OP_PUT);
				oid_of(g.oid, id);
				assert_int_equal(coffer__ot_exec(R->ot, g_deliv_to[i], &g, 0, &gr),
						 1);
				assert_int_equal(gr.status, 0);
				g_deliv[i] = gr;
				g_deliv[i].tag = tag;
			}
			assert_true(n <= 1);
		}
	}
	if (R->full_check || g_failed)
		assert_int_equal(coffer__ot_check(R->ot), 0);
	if (imm) {
		assert_client_accepts(&rep, op, route);
		record(R, rep.status, rep.offset, rep.size);
		R->last = rep;
	} else {
		record(R, 1, 0, 0);
	}
	coffer__ot_stats(R->ot, &after);
	record(R, 2000, after.used, after.evictions);
	record(R, 2001, after.objects_created << 32 | after.objects_sealed,
	       after.waiters << 32 | after.holders);
	record(R, 2002, after.reserved << 32 | after.index_live, after.second_chances);
	for (unsigned int i = 0; i < g_ndeliv; i++) {
		record(R, 1000 + (int32_t)(g_deliv_to[i] - R->ow), g_deliv[i].tag, 0);
		record(R, g_deliv[i].status, g_deliv[i].offset, g_deliv[i].size);
	}
	return imm ? rep.status : 1;
}

/* A table operation that is not a request: it must allocate nothing. */
#define NO_ALLOC(R, call)                                                                          \
	do {                                                                                       \
		long c0_ = g_count;                                                                \
		g_ndeliv = 0;                                                                      \
		call;                                                                              \
		assert_int_equal(g_count, c0_);                                                    \
		assert_int_equal(coffer__ot_check((R)->ot), 0);                                    \
		for (unsigned int i_ = 0; i_ < g_ndeliv; i_++)                                     \
			record((R), g_deliv[i_].status, g_deliv[i_].tag, 0);                       \
	} while (0)

#define A 0
#define B 1
#define C 2

static void scenario(struct run *R)
{
	uint64_t off1, x, now;
	unsigned int i;

	R->full_check = true;
	/* create, seal, get, release; the object becomes evictable */
	assert_int_equal(step(R, A, COFFER_OP_CREATE, 1, 1000, 0, 0, 0, 0), 0);
	assert_int_equal(step(R, A, COFFER_OP_SEAL, 1, 0, 0, 0, 0, 0), 0);
	assert_int_equal(step(R, B, COFFER_OP_GET, 1, 0, 0, 0, 0, 0), 0);
	off1 = R->last.offset;
	assert_int_equal(step(R, B, COFFER_OP_RELEASE, 1, 0, 0, 0, 0, 0), 0);
	assert_int_equal(step(R, A, COFFER_OP_RELEASE, 1, 0, 0, 0, 0, 0), 0);
	/* a replacement while a reader holds the old version, released by offset */
	assert_int_equal(step(R, B, COFFER_OP_GET, 1, 0, 0, 0, 0, 0), 0);
	assert_int_equal(step(R, A, COFFER_OP_CREATE, 1, 2000, COFFER_CREATE_REPLACE, 0, 0, 0), 0);
	assert_int_equal(step(R, A, COFFER_OP_SEAL, 1, 0, COFFER_SEAL_RELEASE, 0, 0, 0), 0);
	assert_int_equal(step(R, B, COFFER_OP_GET, 1, 0, 0, 0, 0, 0), 0);
	assert_int_equal(step(R, B, COFFER_OP_RELEASE, 1, off1, COFFER_RELEASE_BY_OFFSET, 0, 0, 0),
			 0);
	assert_int_equal(step(R, B, COFFER_OP_RELEASE, 1, 0, 0, 0, 0, 0), 0);
	/* abort; a 0-byte object; delete; contains */
	assert_int_equal(step(R, A, COFFER_OP_CREATE, 2, 500, 0, 0, 0, 0), 0);
	assert_int_equal(step(R, A, COFFER_OP_ABORT, 2, 0, 0, 0, 0, 0), 0);
	assert_int_equal(step(R, A, COFFER_OP_CREATE, 3, 0, 0, 0, 0, 0), 0);
	assert_int_equal(step(R, A, COFFER_OP_SEAL, 3, 0, COFFER_SEAL_RELEASE, 0, 0, 0), 0);
	assert_int_equal(step(R, B, COFFER_OP_CONTAINS, 3, 0, 0, 0, 0, 0), 0);
	assert_int_equal(step(R, B, COFFER_OP_DELETE, 3, 0, 0, 0, 0, 0), 0);
	assert_int_equal(step(R, B, COFFER_OP_GET, 3, 0, 0, 0, 0, 0), -ENOENT);
	/* waiting gets: forever on the socket, an hour on a channel, 1 s (expires: the expiry
	 * below is a minute ahead, so timing cannot change which get expires) */
	assert_int_equal(step(R, B, COFFER_OP_GET, 4, 0, 0, -1, 0, 0), 1);
	assert_int_equal(step(R, C, COFFER_OP_GET, 4, 0, 0, 3600000000, 0, ROUTE_CHAN), 1);
	assert_int_equal(step(R, B, COFFER_OP_GET, 4, 0, 0, 1000000, 0, 0), 1);
	now = coffer__now_us();
	NO_ALLOC(R, coffer__ot_expire(R->ot, now + 60000000));
	assert_int_equal(step(R, A, COFFER_OP_CREATE, 4, 300, 0, 0, 0, 0), 0);
	assert_int_equal(step(R, A, COFFER_OP_SEAL, 4, 0, COFFER_SEAL_RELEASE, 0, 0, 0), 0);
	assert_int_equal(step(R, B, COFFER_OP_RELEASE, 4, 0, 0, 0, 0, 0), 0);
	assert_int_equal(step(R, C, COFFER_OP_RELEASE, 4, 0, 0, 0, 0, 0), 0);
	/* a waiting get dropped with its route */
	assert_int_equal(step(R, C, COFFER_OP_GET, 5, 0, 0, -1, 0, ROUTE_CHAN), 1);
	NO_ALLOC(R, coffer__ot_drop_route(R->ot, &R->ow[C], ROUTE_CHAN));
	/* reserve / put / unreserve, a put that replaces, a put that wakes a get */
	assert_int_equal(step(R, A, COFFER_OP_RESERVE, 0, 700, 0, 0, 0, 0), 0);
	assert_int_equal(step(R, A, COFFER_OP_PUT, 6, 600, 0, 0, R->last.offset, 0), 0);
	assert_int_equal(step(R, A, COFFER_OP_RESERVE, 0, 800, 0, 0, 0, 0), 0);
	assert_int_equal(step(R, A, COFFER_OP_UNRESERVE, 0, 0, 0, 0, R->last.offset, 0), 0);
	assert_int_equal(step(R, A, COFFER_OP_RESERVE, 0, 100, 0, 0, 0, 0), 0);
	assert_int_equal(
	    step(R, A, COFFER_OP_PUT, 6, 100, COFFER_CREATE_REPLACE, 0, R->last.offset, 0), 0);
	assert_int_equal(step(R, B, COFFER_OP_GET, 7, 0, 0, -1, 0, 0), 1);
	assert_int_equal(step(R, A, COFFER_OP_RESERVE, 0, 64, 0, 0, 0, 0), 0);
	assert_int_equal(step(R, A, COFFER_OP_PUT, 7, 64, 0, 0, R->last.offset, 0), 0);
	assert_int_equal(step(R, B, COFFER_OP_RELEASE, 7, 0, 0, 0, 0, 0), 0);
	/* 70 timed gets (the deadline heap grows past 64), woken by one seal */
	for (i = 0; i < 70; i++)
		assert_int_equal(step(R, B, COFFER_OP_GET, 8, 0, 0, 3600000000, 0, 0), 1);
	assert_int_equal(step(R, A, COFFER_OP_CREATE, 8, 64, 0, 0, 0, 0), 0);
	assert_int_equal(step(R, A, COFFER_OP_SEAL, 8, 0, COFFER_SEAL_RELEASE, 0, 0, 0), 0);
	for (i = 0; i < 70; i++)
		assert_int_equal(step(R, B, COFFER_OP_RELEASE, 8, 0, 0, 0, 0, 0), 0);
	/* eviction under pressure: 4 x 200 KiB evictable, then creates and a reserve that do
	 * not fit without evicting */
	for (i = 10; i < 14; i++) {
		assert_int_equal(step(R, A, COFFER_OP_CREATE, i, 200 << 10, 0, 0, 0, 0), 0);
		assert_int_equal(step(R, A, COFFER_OP_SEAL, i, 0, COFFER_SEAL_RELEASE, 0, 0, 0), 0);
	}
	assert_int_equal(step(R, A, COFFER_OP_CREATE, 14, 300 << 10, 0, 0, 0, 0), 0);
	assert_int_equal(step(R, A, COFFER_OP_SEAL, 14, 0, COFFER_SEAL_RELEASE, 0, 0, 0), 0);
	assert_int_equal(step(R, A, COFFER_OP_RESERVE, 0, 400 << 10, 0, 0, 0, 0), 0);
	x = R->last.offset;
	assert_int_equal(step(R, A, COFFER_OP_CREATE, 15, 100 << 10, 0, 0, 0, 0), 0);
	assert_int_equal(step(R, A, COFFER_OP_SEAL, 15, 0, COFFER_SEAL_RELEASE, 0, 0, 0), 0);
	assert_int_equal(step(R, A, COFFER_OP_PUT, 16, 400 << 10, 0, 0, x, 0), 0);
	assert_int_equal(step(R, B, COFFER_OP_CREATE, 17, 900 << 10, 0, 0, 0, 0), 0);
	assert_int_equal(step(R, B, COFFER_OP_ABORT, 17, 0, 0, 0, 0, 0), 0);
	/* table growth: 1100 entries and holders (0-byte objects), 1100 reservations */
	R->full_check = false;
	for (i = 0; i < 1100; i++)
		assert_int_equal(step(R, A, COFFER_OP_CREATE, 1000 + i, 0, 0, 0, 0, 0), 0);
	for (i = 0; i < 1100; i++)
		assert_int_equal(step(R, B, COFFER_OP_RESERVE, 0, 64, 0, 0, 0, 0), 0);
	assert_int_equal(coffer__ot_check(R->ot), 0);
	for (i = 0; i < 1100; i += 2)
		assert_int_equal(step(R, A, COFFER_OP_SEAL, 1000 + i, 0, 0, 0, 0, 0), 0);
	R->full_check = true;
	/* client C goes away holding everything: references, an unsealed object, a pending
	 * replacement, waiting gets, reservations */
	for (i = 23; i < 25; i++) {
		assert_int_equal(step(R, A, COFFER_OP_CREATE, i, 640, 0, 0, 0, 0), 0);
		assert_int_equal(step(R, A, COFFER_OP_SEAL, i, 0, COFFER_SEAL_RELEASE, 0, 0, 0), 0);
	}
	assert_int_equal(step(R, C, COFFER_OP_GET, 23, 0, 0, 0, 0, 0), 0);
	assert_int_equal(step(R, C, COFFER_OP_GET, 23, 0, 0, 0, 0, 0), 0);
	assert_int_equal(step(R, C, COFFER_OP_GET, 1000, 0, 0, 0, 0, 0), 0);
	assert_int_equal(step(R, C, COFFER_OP_CREATE, 20, 4096, 0, 0, 0, 0), 0);
	assert_int_equal(step(R, C, COFFER_OP_CREATE, 24, 128, COFFER_CREATE_REPLACE, 0, 0, 0), 0);
	assert_int_equal(step(R, C, COFFER_OP_GET, 21, 0, 0, -1, 0, 0), 1);
	assert_int_equal(step(R, C, COFFER_OP_GET, 22, 0, 0, 60000000, 0, ROUTE_CHAN), 1);
	assert_int_equal(step(R, C, COFFER_OP_RESERVE, 0, 64, 0, 0, 0, 0), 0);
	assert_int_equal(step(R, A, COFFER_OP_DELETE, 23, 0, 0, 0, 0, 0), 0);
	NO_ALLOC(R, coffer__ot_owner_gone(R->ot, &R->ow[C]));
	R->full_check = false;
	NO_ALLOC(R, coffer__ot_owner_gone(R->ot, &R->ow[B]));
	NO_ALLOC(R, coffer__ot_owner_gone(R->ot, &R->ow[A]));
}

/* One run, with the @k-th allocation failing (0: none). Return: whether it was reached. */
static bool run_once(struct run *R, long k)
{
	struct coffer__ot_stats st;
	int rc;

	memset(g_index, 0, sizeof(g_index));
	memset(g_access, 0, sizeof(g_access));
	R->ntrace = 0;
	R->failures = 0;
	g_count = 0;
	g_countdown = k;
	g_failed = false;
	rc = coffer__ot_create(&R->ot, CAP, 1, deliver, NULL);
	if (rc != 0) {
		assert_int_equal(rc, -ENOMEM);
		assert_true(g_failed);
		assert_int_equal(g_live, 0);
		R->failures++;
		g_countdown = 0;
		assert_int_equal(coffer__ot_create(&R->ot, CAP, 1, deliver, NULL), 0);
	}
	coffer__ot_set_index(R->ot, g_index, g_access, INDEX_SLOTS, 0x5eed);
	for (int i = 0; i < NOWNERS; i++)
		coffer__ot_owner_init(&R->ow[i]);
	scenario(R);
	/* the clients are gone: only sealed objects remain (unreferenced, evictable) */
	coffer__ot_stats(R->ot, &st);
	assert_int_equal(st.objects_created, 0);
	assert_int_equal(st.waiters, 0);
	assert_int_equal(st.holders, 0);
	assert_int_equal(st.reserved, 0);
	assert_int_equal(st.reserved_bytes, 0);
	assert_int_equal(st.entries, st.objects_sealed);
	coffer__ot_destroy(R->ot);
	assert_int_equal(g_live, 0);
	if (k > 0 && g_count >= k)
		assert_int_equal(R->failures, 1);
	return k > 0 && g_count >= k;
}

static long g_max_k;

static void test_every_allocation_fails_once(void **state)
{
	static struct run ref, R;
	long k, nallocs;

	(void)state;
	assert_false(run_once(&ref, 0));
	nallocs = g_count;
	printf("objtab_alloc_test: %ld allocations in the reference run, %u replies\n", nallocs,
	       ref.ntrace);
	for (k = 1; g_max_k == 0 || k <= g_max_k; k++) {
		if (!run_once(&R, k))
			break;
		assert_int_equal(R.ntrace, ref.ntrace);
		for (unsigned int i = 0; i < ref.ntrace; i++)
			if (R.trace[i].status != ref.trace[i].status ||
			    R.trace[i].off != ref.trace[i].off ||
			    R.trace[i].size != ref.trace[i].size) {
				fprintf(stderr,
					"k=%ld: reply %u differs: status %d off %llu size %llu, "
					"reference %d %llu %llu\n",
					k, i, R.trace[i].status, (unsigned long long)R.trace[i].off,
					(unsigned long long)R.trace[i].size, ref.trace[i].status,
					(unsigned long long)ref.trace[i].off,
					(unsigned long long)ref.trace[i].size);
				fail();
			}
	}
	printf("objtab_alloc_test: %ld runs with one failed allocation each\n", k - 1);
	assert_true(g_max_k != 0 || k > nallocs);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_every_allocation_fails_once),
	};

	if (argc > 1)
		g_max_k = strtol(argv[1], NULL, 10);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
