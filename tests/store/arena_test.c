/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/store/arena_test.c - unit tests of the store's TLSF arena allocator: alignment,
 * exact byte accounting after every operation, coalescing back to one block, bounded
 * fragmentation (a request fails only when no free block is within the class rounding of
 * it), and the capacity-sized object.
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
	assert_int_equal(a.nfree, 1);
	coffer__arena_fini(&a);
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
	coffer__arena_free(&a, c);
	coffer__arena_free(&a, b);
	assert_int_equal(a.nfree, 1);
	coffer__arena_fini(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bad_args),
	    cmocka_unit_test(test_alignment_and_accounting),
	    cmocka_unit_test(test_bounded_fragmentation),
	    cmocka_unit_test(test_capacity_sized_large_object),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
