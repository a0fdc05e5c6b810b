/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * perf/results/2core-k/arena_bench.c - the randwrite pattern on the arena alone: N live
 * blocks of SIZE bytes in an arena of CAP bytes, then R replacements of a random one
 * (allocate the new version, free the old, as CREATE then SEAL do). Prints ns per
 * replacement. SIZE 0: each allocation takes a random size in 64..64 KiB (mixed sizes:
 * quick lists rarely hit, they fill to their bound and flush). Build against one
 * tools/arena.c:
 *   cc -O2 -I SRC -o arena_bench arena_bench.c SRC/tools/arena.c
 *   ./arena_bench [CAP_MiB=1024] [N=131072] [SIZE=4096] [R=4000000]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tools/arena.h"

static uint64_t s = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	s ^= s << 13;
	s ^= s >> 7;
	s ^= s << 17;
	return s;
}

int main(int argc, char **argv)
{
	uint64_t cap = (argc > 1 ? strtoull(argv[1], NULL, 0) : 1024) << 20;
	uint64_t n = argc > 2 ? strtoull(argv[2], NULL, 0) : 131072;
	uint64_t size = argc > 3 ? strtoull(argv[3], NULL, 0) : 4096;
	uint64_t r = argc > 4 ? strtoull(argv[4], NULL, 0) : 4000000, i;
	struct coffer__arena *a = malloc(sizeof(*a));
	struct coffer__ablk **b = calloc(n, sizeof(*b)), *x;
	struct timespec t0, t1;

	if (a == NULL || b == NULL || coffer__arena_init(a, cap) != 0)
		return 1;
	for (i = 0; i < n; i++)
		if (coffer__arena_alloc(a, size ? size : 64 + rnd() % 65473, &b[i]) != 0)
			return 1;
	/* warm up: one pass of replacements scatters the records as the store's are */
	for (i = 0; i < n; i++) {
		uint64_t j = rnd() % n;

		if (coffer__arena_alloc(a, size ? size : 64 + rnd() % 65473, &x) != 0)
			return 1;
		coffer__arena_free(a, b[j]);
		b[j] = x;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < r; i++) {
		uint64_t j = rnd() % n;

		if (coffer__arena_alloc(a, size ? size : 64 + rnd() % 65473, &x) != 0)
			return 1;
		coffer__arena_free(a, b[j]);
		b[j] = x;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("cap %llu MiB n %llu size %llu: %.1f ns/replace (check %d)\n",
	       (unsigned long long)(cap >> 20), (unsigned long long)n, (unsigned long long)size,
	       ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) /
		   (double)r,
	       coffer__arena_check(a));
	coffer__arena_fini(a);
	free(b);
	free(a);
	return 0;
}
