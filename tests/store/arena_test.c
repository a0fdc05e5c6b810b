/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/store/arena_test.c - unit tests of the store's TLSF arena allocator: alignment,
 * exact byte accounting after every operation, coalescing back to one block, bounded
 * fragmentation (a request fails only when no free block is within the class rounding of
 * it), a fit found in the request's own class (below the rounding: the bounded scan), the
 * capacity-sized object, and deferred coalescing: quick-list reuse, flush before
 * -ENOMEM, the quick-list bounds, and a randomized sequence checked against a model.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "tools/arena.h"

#define MiB (1024ull * 1024ull)

static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

static void test_bad_args(void **state)
{
	struct coffer__arena a;
	struct coffer__ablk *b;

	(void)state;
	assert_int_equal(coffer__arena_init(&a, 63), -EINVAL);
	assert_int_equal(coffer__arena_init(&a, 4096), 0);
	assert_int_equal(coffer__arena_alloc(&a, 0, &b), -EINVAL);
	assert_int_equal(coffer__arena_alloc(&a, 4097, &b), -E2BIG);
	assert_int_equal(coffer__arena_alloc(&a, UINT64_MAX, &b), -E2BIG);
	assert_int_equal(coffer__arena_alloc(&a, 4096, &b), 0);
	assert_int_equal(b->off, 0);
	assert_int_equal(a.used, 4096);
	assert_int_equal(coffer__arena_alloc(&a, 1, &b), -ENOMEM);
	assert_int_equal(coffer__arena_check(&a), 0);
	coffer__arena_fini(&a);
}

static void test_alignment_and_accounting(void **state)
{
	enum { N = 2000 };
	struct coffer__ablk *blks[N] = {0};
	struct coffer__arena a;
	uint64_t used = 0;
	int i, round;

	(void)state;
	assert_int_equal(coffer__arena_init(&a, 256 * MiB), 0);
	for (round = 0; round < 20000; round++) {
		i = (int)(rnd() % N);
		if (blks[i] != NULL) {
			used -= blks[i]->size;
			coffer__arena_free(&a, blks[i]);
			blks[i] = NULL;
		} else {
			uint64_t size = (rnd() % 8 == 0) ? 1 + rnd() % (5 * MiB) : 1 + rnd() % 9000;
			int rc = coffer__arena_alloc(&a, size, &blks[i]);

			if (rc == -ENOMEM) {
				blks[i] = NULL;
				continue;
			}
			assert_int_equal(rc, 0);
			assert_int_equal(blks[i]->off % 64, 0);
			assert_true(blks[i]->size >= size);
			assert_true(blks[i]->size < size + 64 || size < 64);
			if (size >= COFFER_ARENA_LARGE)
				assert_int_equal(blks[i]->off % COFFER_ARENA_LARGE, 0);
			assert_true(blks[i]->off + blks[i]->size <= a.capacity);
			used += blks[i]->size;
		}
		assert_int_equal(a.used, used); /* exact, after every operation */
		assert_true(a.used <= a.capacity);
		if (round % 500 == 0)
			assert_int_equal(coffer__arena_check(&a), 0); /* tiles, no overlap */
	}
	for (i = 0; i < N; i++)
		if (blks[i] != NULL)
			coffer__arena_free(&a, blks[i]);
	assert_int_equal(coffer__arena_check(&a), 0);
	assert_int_equal(a.used, 0);
	coffer__arena_flush(&a);
	assert_int_equal(coffer__arena_check(&a), 0);
	assert_int_equal(a.nfree, 1); /* everything coalesced back */
	assert_int_equal(coffer__arena_largest_free(&a), a.capacity);
	coffer__arena_fini(&a);
}

static void test_bounded_fragmentation(void **state)
{
	enum { N = 4096 };
	struct coffer__ablk *blks[N] = {0};
	struct coffer__arena a;
	uint64_t failures = 0, worst_ext = 0;
	int i, round;

	(void)state;
	assert_int_equal(coffer__arena_init(&a, 64 * MiB), 0);
	for (round = 0; round < 40000; round++) {
		i = (int)(rnd() % N);
		if (blks[i] != NULL) {
			coffer__arena_free(&a, blks[i]);
			blks[i] = NULL;
			continue;
		}
		{
			uint64_t size = 64 + rnd() % (64 * 1024), largest;
			int rc = coffer__arena_alloc(&a, size, &blks[i]);

			if (rc == 0)
				continue;
			assert_int_equal(rc, -ENOMEM);
			blks[i] = NULL;
			failures++;
			/* Good fit: a request fails only if no free block reaches its size
			 * rounded up to the class boundary (< size * 17/16 + 64). */
			largest = coffer__arena_largest_free(&a);
			assert_true(largest < size + size / 16 + 64);
			/* Fragmentation cost: memory still free when a request fails. */
			if ((a.capacity - a.used) * 1000 / a.capacity > worst_ext)
				worst_ext = (a.capacity - a.used) * 1000 / a.capacity;
		}
	}
	fprintf(stderr,
		"fragmentation: %llu failed allocations; at most %.1f%% of the arena was free "
		"when one failed\n",
		(unsigned long long)failures, (double)worst_ext / 10.0);
	/* Requests are <= 64 KiB in 64 MiB: with bounded fragmentation a failure can only
	 * happen close to full. */
	assert_true(failures > 0);
	assert_true(worst_ext < 150); /* < 15% free */
	for (i = 0; i < N; i++)
		if (blks[i] != NULL)
			coffer__arena_free(&a, blks[i]);
	assert_int_equal(coffer__arena_check(&a), 0);
	coffer__arena_flush(&a);
	assert_int_equal(coffer__arena_check(&a), 0);
	assert_int_equal(a.nfree, 1);
	coffer__arena_fini(&a);
}

/* Ends a test with blocks @x and @y the only ones allocated: frees both, and checks that the
 * flushed arena is one free block again before it is torn down. */
static void free_both_and_fini(struct coffer__arena *a, struct coffer__ablk *x,
			       struct coffer__ablk *y)
{
	coffer__arena_free(a, x);
	coffer__arena_free(a, y);
	coffer__arena_flush(a);
	assert_int_equal(a->nfree, 1);
	coffer__arena_fini(a);
}

static void test_capacity_sized_large_object(void **state)
{
	struct coffer__arena a;
	struct coffer__ablk *b, *c;

	(void)state;
	/* 5 MiB: an aligned search for 5 MiB + 2 MiB slack cannot succeed, the bounded
	 * scan must still place it at offset 0. */
	assert_int_equal(coffer__arena_init(&a, 5 * MiB), 0);
	assert_int_equal(coffer__arena_alloc(&a, 5 * MiB, &b), 0);
	assert_int_equal(b->off, 0);
	coffer__arena_free(&a, b);
	/* A small block first: the large one goes to the next 2 MiB boundary, the gap
	 * stays free and usable. */
	assert_int_equal(coffer__arena_alloc(&a, 100, &c), 0);
	assert_int_equal(coffer__arena_alloc(&a, 3 * MiB, &b), 0);
	assert_int_equal(b->off, 2 * MiB);
	assert_int_equal(a.used, 3 * MiB + 128);
	assert_int_equal(coffer__arena_check(&a), 0);
	free_both_and_fini(&a, c, b);
}

/* The only fitting free block lies in the request's own class (larger than the request,
 * below the class boundary the good-fit search rounds up to): it is found, not -ENOMEM,
 * for a small request and for a 2 MiB-aligned large one. */
static void test_fit_in_own_class(void **state)
{
	struct coffer__arena a;
	struct coffer__ablk *f, *rest, *b;

	(void)state;
	/* 4160 bytes (65 units) is in class [64, 68) units, searched from 68 units up; the free
	 * block is 4224 bytes (66 units). */
	assert_int_equal(coffer__arena_init(&a, 1 * MiB), 0);
	assert_int_equal(coffer__arena_alloc(&a, 4224, &f), 0);
	assert_int_equal(coffer__arena_alloc(&a, 1 * MiB - 4224, &rest), 0);
	coffer__arena_free(&a, f); /* onto its quick list: the flush puts it in TLSF */
	assert_int_equal(coffer__arena_alloc(&a, 4160, &b), 0);
	assert_int_equal(b->off, 0);
	assert_int_equal(b->size, 4160);
	assert_int_equal(a.used, 1 * MiB - 64);
	assert_int_equal(coffer__arena_check(&a), 0);
	free_both_and_fini(&a, b, rest);

	/* Large: class [2 MiB, 2 MiB + 128 KiB); the free block is 2 MiB + 64 KiB at offset
	 * 0 (aligned), the request 2 MiB + 32 KiB. */
	assert_int_equal(coffer__arena_init(&a, 4 * MiB), 0);
	assert_int_equal(coffer__arena_alloc(&a, 2 * MiB + 64 * 1024, &f), 0);
	assert_int_equal(f->off, 0);
	assert_int_equal(coffer__arena_alloc(&a, 2 * MiB - 64 * 1024, &rest), 0);
	coffer__arena_free(&a, f);
	assert_int_equal(coffer__arena_alloc(&a, 2 * MiB + 32 * 1024, &b), 0);
	assert_int_equal(b->off, 0);
	assert_int_equal(coffer__arena_check(&a), 0);
	free_both_and_fini(&a, b, rest);
}

/*
 * A small request whose only fit is a free block of its own class, with a quick-listed block
 * elsewhere: the bounded own-class scan places it, and the quick list is kept (no flush),
 * so the next request of the quick block's size still takes it at once. The scan used to
 * run only after a flush of every quick list, which a fit it could find makes wasted work
 * (up to COFFER_ARENA_QUICK_COUNT coalescing frees) that also empties the lists the
 * free-one, allocate-one pattern lives on.
 */
static void test_own_class_before_flush(void **state)
{
	struct coffer__arena a;
	struct coffer__ablk *f, *q, *rest, *b, *w;
	uint64_t own;

	(void)state;
	assert_int_equal(coffer__arena_init(&a, 1 * MiB), 0);
	assert_int_equal(coffer__arena_alloc(&a, 4224, &f), 0); /* 66 units, at 0 */
	assert_int_equal(coffer__arena_alloc(&a, 4096, &q), 0); /* at 4224 */
	assert_int_equal(coffer__arena_alloc(&a, 1 * MiB - 4224 - 4096, &rest), 0);
	coffer__arena_free(&a, f);
	coffer__arena_flush(&a); /* f is a TLSF block of its own class */
	assert_int_equal(a.flushes, 1);
	coffer__arena_free(&a, q);
	assert_true(q->quick);
	own = a.own_class_fits; /* rest's alloc took the last block by the scan too */
	/* 4160 bytes (65 units): the good-fit search starts at 68 units; f holds it */
	assert_int_equal(coffer__arena_alloc(&a, 4160, &b), 0);
	assert_int_equal(b->off, 0);
	assert_int_equal(b->size, 4160);
	assert_int_equal(a.own_class_fits, own + 1);
	assert_int_equal(a.flushes, 1); /* no flush */
	assert_int_equal(a.nquick, 1);
	assert_true(q->quick);
	assert_int_equal(coffer__arena_check(&a), 0);
	/* q is still there for the next 4096-byte request */
	assert_int_equal(coffer__arena_alloc(&a, 4096, &w), 0);
	assert_ptr_equal(w, q);
	assert_int_equal(w->off, 4224);
	assert_int_equal(a.nquick, 0);
	assert_int_equal(coffer__arena_check(&a), 0);
	coffer__arena_free(&a, w);
	free_both_and_fini(&a, b, rest);
}

/* A large request whose only aligned fit is in a class above its own, with more than the
 * scan's 64 blocks of its own class free (each smaller than it): the bounded aligned scan
 * spent its whole budget on the own class, which cannot hold the request, and answered
 * -ENOMEM although the next class up held an aligned fit (the object table would evict for
 * it, or refuse a create when what is left is pinned). The own class is a fallback: scanned
 * after the classes above it, with a budget of its own. */
static void test_own_class_does_not_starve_aligned_scan(void **state)
{
	enum { GROUPS = 70 };
	const uint64_t half = 1 * MiB + 8 * 1024;   /* two of them: 2 MiB + 16 KiB, own class */
	const uint64_t rhalf = 1 * MiB + 96 * 1024; /* two: 2 MiB + 192 KiB, the class above */
	struct coffer__ablk *p[GROUPS], *q[GROUPS], *sep, *pad = NULL, *r1, *r2, *last, *b;
	struct coffer__arena a;
	uint64_t off = 0, cap, r_off;
	int i;

	(void)state;
	for (i = 0; i < GROUPS; i++)
		off += 2 * half + 64;
	r_off = (off + COFFER_ARENA_LARGE - 1) & ~(uint64_t)(COFFER_ARENA_LARGE - 1);
	cap = r_off + 2 * rhalf + 64 + 1 * MiB;
	/* Carve the arena front to back: every allocation takes the front of the one free
	 * block, so the layout is known; nothing is left free. Each takes from a remainder in
	 * a class above its own, or ends on a class boundary (the last, 1 MiB), so the carving
	 * itself needs no own-class fit. */
	assert_int_equal(coffer__arena_init(&a, cap), 0);
	for (i = 0; i < GROUPS; i++) {
		assert_int_equal(coffer__arena_alloc(&a, half, &p[i]), 0);
		assert_int_equal(coffer__arena_alloc(&a, half, &q[i]), 0);
		assert_int_equal(coffer__arena_alloc(&a, 64, &sep), 0);
	}
	if (r_off > off)
		assert_int_equal(coffer__arena_alloc(&a, r_off - off, &pad), 0);
	assert_int_equal(coffer__arena_alloc(&a, rhalf, &r1), 0);
	assert_int_equal(r1->off, r_off);
	assert_int_equal(coffer__arena_alloc(&a, rhalf, &r2), 0);
	assert_int_equal(coffer__arena_alloc(&a, 64, &sep), 0);
	assert_int_equal(coffer__arena_alloc(&a, 1 * MiB, &last), 0);
	assert_int_equal(a.used, cap);
	for (i = 0; i < GROUPS; i++) {
		coffer__arena_free(&a, p[i]);
		coffer__arena_free(&a, q[i]);
	}
	coffer__arena_free(&a, r1);
	coffer__arena_free(&a, r2);
	coffer__arena_flush(&a);
	assert_int_equal(coffer__arena_check(&a), 0);
	assert_int_equal(a.nfree, GROUPS + 1);
	/* 2 MiB + 32 KiB: own class [2 MiB, 2 MiB + 128 KiB) holds 70 free blocks of
	 * 2 MiB + 16 KiB; the one fit is 2 MiB + 192 KiB at a 2 MiB multiple. */
	assert_int_equal(coffer__arena_alloc(&a, 2 * MiB + 32 * 1024, &b), 0);
	assert_int_equal(b->off, r_off);
	assert_int_equal(b->size, 2 * MiB + 32 * 1024);
	assert_int_equal(coffer__arena_check(&a), 0);
	coffer__arena_fini(&a);
	(void)pad;
}

/* A small block freed goes to its quick list without coalescing and is the next block of
 * its size handed out; other sizes do not take it. */
static void test_quick_reuse(void **state)
{
	struct coffer__arena a;
	struct coffer__ablk *x, *y, *z, *w;
	uint64_t nfree;

	(void)state;
	assert_int_equal(coffer__arena_init(&a, 16 * MiB), 0);
	assert_int_equal(coffer__arena_alloc(&a, 4096, &x), 0);
	assert_int_equal(coffer__arena_alloc(&a, 4096, &y), 0);
	assert_int_equal(coffer__arena_alloc(&a, 4096, &z), 0);
	nfree = a.nfree;
	coffer__arena_free(&a, y); /* between two allocated blocks */
	assert_true(y->quick);
	assert_false(y->free);
	assert_int_equal(a.nfree, nfree); /* not on a TLSF list */
	assert_int_equal(a.nquick, 1);
	assert_int_equal(a.qbytes, 4096);
	assert_int_equal(a.used, 2 * 4096);
	assert_int_equal(a.nalloc, 2);
	assert_int_equal(coffer__arena_check(&a), 0);
	/* x's free neighbour is y, quick: TLSF must treat it as allocated, not merge. */
	coffer__arena_free(&a, x);
	assert_int_equal(a.nquick, 2);
	assert_int_equal(coffer__arena_check(&a), 0);
	/* Another size misses the lists. */
	assert_int_equal(coffer__arena_alloc(&a, 8192, &w), 0);
	assert_true(w != x && w != y);
	assert_int_equal(a.nquick, 2);
	/* LIFO, by rounded size: 4033 bytes round up to 4096 and pop x, then y. */
	assert_int_equal(coffer__arena_alloc(&a, 4032, &w), 0); /* another class */
	assert_true(w != x && w != y);
	assert_int_equal(coffer__arena_alloc(&a, 4033, &w), 0);
	assert_ptr_equal(w, x);
	assert_false(w->quick);
	assert_int_equal(w->size, 4096);
	assert_int_equal(coffer__arena_alloc(&a, 4096, &w), 0);
	assert_ptr_equal(w, y);
	assert_int_equal(w->off, 4096);
	assert_int_equal(a.nquick, 0);
	assert_int_equal(a.qbytes, 0);
	assert_int_equal(a.used, 5 * 4096 + 4032); /* x, y, z, 8 KiB, 4032 */
	assert_int_equal(a.nalloc, 5);
	assert_int_equal(a.flushes, 0);
	assert_int_equal(coffer__arena_check(&a), 0);
	coffer__arena_fini(&a);
}

/* Memory held on quick lists is found by an allocation that needs it coalesced: the
 * lists are flushed before -ENOMEM, and -ENOMEM only comes when even the coalesced arena
 * has no fit. */
static void test_flush_on_failure(void **state)
{
	enum { N = 256 };
	struct coffer__ablk *blks[N], *big, *more;
	struct coffer__arena a;
	int i;

	(void)state;
	assert_int_equal(coffer__arena_init(&a, N * 4096), 0); /* 1 MiB: qlimit 64 KiB */
	for (i = 0; i < N; i++)
		assert_int_equal(coffer__arena_alloc(&a, 4096, &blks[i]), 0);
	assert_int_equal(a.used, a.capacity);
	/* 8 adjacent blocks freed: quick-listed, no coalesced 32 KiB block exists. */
	for (i = 100; i < 108; i++)
		coffer__arena_free(&a, blks[i]);
	assert_int_equal(a.nquick, 8);
	assert_int_equal(a.nfree, 0);
	assert_int_equal(coffer__arena_check(&a), 0);
	assert_int_equal(coffer__arena_alloc(&a, 32 * 1024, &big), 0);
	assert_int_equal(big->off, 100 * 4096);
	assert_int_equal(a.flushes, 1);
	assert_int_equal(a.nquick, 0);
	assert_int_equal(a.used, a.capacity);
	assert_int_equal(coffer__arena_check(&a), 0);
	/* Full: -ENOMEM after a flush finds nothing. */
	coffer__arena_free(&a, blks[0]);
	assert_int_equal(coffer__arena_alloc(&a, 8192, &more), -ENOMEM);
	assert_int_equal(a.flushes, 2);
	assert_int_equal(a.nfree, 1);
	assert_int_equal(coffer__arena_check(&a), 0);
	/* largest_free() reports coalesced truth. */
	coffer__arena_free(&a, blks[1]);
	assert_int_equal(a.nquick, 1);
	assert_int_equal(coffer__arena_largest_free(&a), 8192);
	assert_int_equal(a.nquick, 0);
	assert_int_equal(coffer__arena_check(&a), 0);
	coffer__arena_fini(&a);
}

/* The lists never hold more than COFFER_ARENA_QUICK_COUNT blocks nor more than capacity /
 * 16 bytes: a free that would pass either bound flushes first. Blocks over the size bound
 * are coalesced at once. */
static void test_quick_bounds(void **state)
{
	enum { N = 5000 };
	static struct coffer__ablk *blks[N];
	struct coffer__arena a;
	struct coffer__ablk *big;
	int i;

	(void)state;
	/* Count bound: 64-byte blocks, 5000 of them (320000 bytes << qlimit). */
	assert_int_equal(coffer__arena_init(&a, 64 * MiB), 0);
	for (i = 0; i < N; i++)
		assert_int_equal(coffer__arena_alloc(&a, 64, &blks[i]), 0);
	for (i = 0; i < N; i++) {
		coffer__arena_free(&a, blks[i]);
		assert_true(a.nquick <= COFFER_ARENA_QUICK_COUNT);
	}
	assert_int_equal(a.flushes, 1);
	assert_int_equal(a.nquick, N - COFFER_ARENA_QUICK_COUNT);
	assert_int_equal(coffer__arena_check(&a), 0);
	/* Size bound: a block of COFFER_ARENA_QUICK_MAX + 64 bytes is coalesced at once. */
	assert_int_equal(coffer__arena_alloc(&a, COFFER_ARENA_QUICK_MAX + 1, &big), 0);
	coffer__arena_free(&a, big);
	assert_false(big->quick);
	assert_int_equal(a.nquick, N - COFFER_ARENA_QUICK_COUNT);
	coffer__arena_fini(&a);

	/* Byte bound: 4 MiB arena, qlimit 256 KiB = 4 blocks of 64 KiB. */
	assert_int_equal(coffer__arena_init(&a, 4 * MiB), 0);
	assert_int_equal(a.qlimit, 256 * 1024);
	for (i = 0; i < 64; i++)
		assert_int_equal(coffer__arena_alloc(&a, 64 * 1024, &blks[i]), 0);
	for (i = 0; i < 64; i++) {
		coffer__arena_free(&a, blks[i]);
		assert_true(a.qbytes <= a.qlimit);
		assert_int_equal(coffer__arena_check(&a), 0);
	}
	assert_int_equal(a.flushes, 15); /* before the 5th, 9th, ..., 61st free */
	assert_int_equal(a.nquick, 4);
	coffer__arena_fini(&a);

	/* An arena whose bound is below one block: no quick lists at all. */
	assert_int_equal(coffer__arena_init(&a, 8192), 0);
	assert_int_equal(coffer__arena_alloc(&a, 4096, &blks[0]), 0);
	coffer__arena_free(&a, blks[0]);
	assert_int_equal(a.nquick, 0);
	assert_int_equal(a.nfree, 1);
	coffer__arena_fini(&a);
}

/* Free blocks on the TLSF list of @size's own class (tools/arena.c, mapping_insert()). */
static uint64_t own_class_len(const struct coffer__arena *a, uint64_t size)
{
	uint64_t u = size / COFFER_ARENA_ALIGN, n = 0;
	const struct coffer__ablk *b;
	int fl, sl, k;

	if (u < COFFER_ARENA_SL_COUNT) {
		fl = 0;
		sl = (int)u;
	} else {
		k = 63 - __builtin_clzll(u);
		fl = k - (COFFER_ARENA_SL_LOG2 - 1);
		sl = (int)((u >> (k - COFFER_ARENA_SL_LOG2)) & (COFFER_ARENA_SL_COUNT - 1));
	}
	for (b = a->heads[fl][sl]; b != NULL; b = b->next_free)
		n++;
	return n;
}

/* A randomized sequence of allocations and frees, mostly small with some over the quick
 * bound and some large (aligned), against a model: the live blocks never overlap, the
 * accounting equals the model's after every step, coffer__arena_check() passes after every
 * step, and an allocation fails only when the model's free bytes cannot hold it and the
 * coalesced arena has no fitting block. @capacity bytes, up to @n blocks live at once,
 * @steps steps; @small_pct percent of the allocations are of 64..512 bytes (2 KiB..64 KiB with
 * @within_class, the rest 2..4 MiB: sizes anywhere in their classes). With @drain,
 * every other 25000 steps skip 19 in 20 allocations, so frees outnumber them and the
 * quick lists grow until a bound flushes them. */
static void randomized_model(uint64_t capacity, int n, int steps, uint64_t small_pct, bool drain,
			     bool within_class)
{
	const int N = n;
	struct coffer__ablk **blks = calloc((size_t)n, sizeof(*blks));
	uint64_t *offs = calloc((size_t)n, sizeof(*offs));
	uint64_t *sizes = calloc((size_t)n, sizeof(*sizes));
	struct coffer__arena a;
	uint64_t used = 0, nalloc = 0, count_flushes = 0, a_own, a_aligned;
	int i, j, step;

	assert_non_null(blks);
	assert_non_null(offs);
	assert_non_null(sizes);
	assert_int_equal(coffer__arena_init(&a, capacity), 0);
	for (step = 0; step < steps; step++) {
		i = (int)(rnd() % (uint64_t)N);
		if (blks[i] != NULL) {
			/* The block still holds what the model gave it. */
			assert_int_equal(blks[i]->off, offs[i]);
			assert_int_equal(blks[i]->size, sizes[i]);
			used -= sizes[i];
			nalloc--;
			if (a.nquick >= COFFER_ARENA_QUICK_COUNT &&
			    sizes[i] <= COFFER_ARENA_QUICK_MAX)
				count_flushes++; /* this free flushes for the count bound */
			coffer__arena_free(&a, blks[i]);
			blks[i] = NULL;
		} else if (drain && (step / 25000) % 2 == 1 && rnd() % 20 != 0) {
			continue; /* a free-heavy phase */
		} else {
			uint64_t r = rnd() % 100, size, need;
			int rc;

			if (within_class && r < small_pct) /* classes 256 B..4 KiB wide */
				size = 2048 + rnd() % (62 * 1024);
			else if (within_class) /* large, classes 128..256 KiB wide */
				size = 2 * MiB + rnd() % (2 * MiB);
			else if (r < small_pct)
				size = 64 * (1 + rnd() % 8); /* few classes: much reuse */
			else if (r < 95)
				size = 1 + rnd() % (COFFER_ARENA_QUICK_MAX + 4096);
			else
				size = 1 + rnd() % (3 * MiB);
			rc = coffer__arena_alloc(&a, size, &blks[i]);
			if (rc == -ENOMEM) {
				blks[i] = NULL;
				/* Failing with quick blocks held means it flushed first. */
				assert_int_equal(a.nquick, 0);
				/* Coalesced truth: no free block reaches the search's size
				 * (2 MiB alignment slack for large ones) rounded up to its
				 * class boundary. */
				need = (size + 63) & ~63ull;
				if (need >= COFFER_ARENA_LARGE)
					need += COFFER_ARENA_LARGE - 64;
				assert_true(coffer__arena_largest_free(&a) < need + need / 16 + 64);
				/* A small one: the good-fit search covers the classes above its
				 * own, the fallback scan its own (64 blocks), the classes below
				 * hold only smaller blocks; so no free block holds it. */
				if (need < COFFER_ARENA_LARGE && own_class_len(&a, need) <= 64)
					assert_true(coffer__arena_largest_free(&a) < need);
			} else {
				assert_int_equal(rc, 0);
				assert_true(blks[i]->size == ((size + 63) & ~63ull));
				assert_false(blks[i]->quick);
				assert_false(blks[i]->free);
				offs[i] = blks[i]->off;
				sizes[i] = blks[i]->size;
				assert_true(offs[i] + sizes[i] <= a.capacity);
				for (j = 0; j < N; j++)
					if (j != i && blks[j] != NULL)
						assert_true(offs[j] + sizes[j] <= offs[i] ||
							    offs[i] + sizes[i] <= offs[j]);
				used += sizes[i];
				nalloc++;
			}
		}
		assert_int_equal(a.used, used);
		assert_int_equal(a.nalloc, nalloc);
		assert_true(a.qbytes <= a.capacity - used);
		assert_int_equal(coffer__arena_check(&a), 0);
	}
	for (i = 0; i < N; i++)
		if (blks[i] != NULL)
			coffer__arena_free(&a, blks[i]);
	coffer__arena_flush(&a);
	assert_int_equal(coffer__arena_check(&a), 0);
	assert_int_equal(a.nfree, 1);
	assert_int_equal(a.used, 0);
	a_own = a.own_class_fits;
	a_aligned = a.aligned_scan_fits;
	coffer__arena_fini(&a);
	free(blks);
	free(offs);
	free(sizes);
	if (n > (int)COFFER_ARENA_QUICK_COUNT)
		assert_true(count_flushes > 0); /* the run did reach the count bound */
	print_message("own-class fits %llu, aligned-scan fits %llu\n", (unsigned long long)a_own,
		      (unsigned long long)a_aligned);
	if (within_class) { /* the fallback scans did place blocks, under the checks above */
		assert_true(a_own > 0);
		assert_true(a_aligned > 0);
	}
}

/* 8 MiB, up to 512 blocks live: the byte bound (512 KiB) and failed allocations flush. */
static void test_randomized_model(void **state)
{
	(void)state;
	randomized_model(8 * MiB, 512, 30000, 70, false, false);
}

/* 1 GiB, up to 10000 blocks live, nearly all small: the count bound
 * (COFFER_ARENA_QUICK_COUNT blocks) flushes, between quick-list pops and TLSF allocations,
 * which test_quick_bounds() (all allocations, then all frees) does not interleave. */
static void test_randomized_model_count_bound(void **state)
{
	(void)state;
	randomized_model(1024 * MiB, 10000, 50000, 97, true, false);
}

/* 64 MiB, up to 256 blocks live, sizes spread within wide classes (2 KiB..64 KiB, and
 * 2..4 MiB aligned): a full arena's failures reach the own-class fallback and the aligned
 * scan, which must place blocks (counted) under the same checks. */
static void test_randomized_model_within_class(void **state)
{
	(void)state;
	randomized_model(64 * MiB, 256, 30000, 90, false, true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bad_args),
	    cmocka_unit_test(test_alignment_and_accounting),
	    cmocka_unit_test(test_bounded_fragmentation),
	    cmocka_unit_test(test_capacity_sized_large_object),
	    cmocka_unit_test(test_fit_in_own_class),
	    cmocka_unit_test(test_own_class_before_flush),
	    cmocka_unit_test(test_own_class_does_not_starve_aligned_scan),
	    cmocka_unit_test(test_quick_reuse),
	    cmocka_unit_test(test_flush_on_failure),
	    cmocka_unit_test(test_quick_bounds),
	    cmocka_unit_test(test_randomized_model),
	    cmocka_unit_test(test_randomized_model_count_bound),
	    cmocka_unit_test(test_randomized_model_within_class),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
