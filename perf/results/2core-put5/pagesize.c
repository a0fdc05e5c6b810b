/* pagesize.c - memcpy bandwidth by destination backing, round-robin in one process (2core-put5).
 * Build: gcc -O2 -o pagesize pagesize.c; run: flock /tmp/coffer-bench.lock ./pagesize [SRCKIND
 * [BYTES]] SRCKIND 0: source on 4 KiB pages (as coffer-bench store), 1: on transparent hugepages.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
static uint64_t now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000ull + t.tv_nsec;
}
static int cmp(const void *a, const void *b)
{
	double x = *(double *)a, y = *(double *)b;
	return (x > y) - (x < y);
}
enum { P4K, THP, HTLB, MEMFD_HTLB, MEMFD_4K, NK };
static const char *nm[] = {"anon4k", "anonTHP", "anonHUGETLB", "memfdHUGETLB", "memfd4k"};
static long thp_kb(void *p)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char l[256];
	unsigned long a, b;
	int in = 0;
	long kb = -1;
	while (fgets(l, sizeof l, f)) {
		if (sscanf(l, "%lx-%lx", &a, &b) == 2 && strchr(l, '-') == l + strcspn(l, "-") &&
		    l[strcspn(l, " ") - 1] != ':') {
			in = (uintptr_t)p >= a && (uintptr_t)p < b;
			continue;
		}
		if (in && !strncmp(l, "AnonHugePages:", 14)) {
			kb = atol(l + 14);
		}
	}
	fclose(f);
	return kb;
}
static void *get(int k, size_t sz)
{
	void *p;
	size_t al = 2u << 20;
	size_t s2 = (sz + al - 1) & ~(al - 1);
	switch (k) {
	case P4K:
		p = mmap(0, sz, 3, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		break;
	case THP: {
		char *q = mmap(0, s2 + al, 3, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (q == MAP_FAILED)
			return 0;
		p = (void *)(((uintptr_t)q + al - 1) & ~(al - 1));
		if (madvise(p, s2, MADV_HUGEPAGE))
			perror("madvise");
		break;
	}
	case HTLB:
		p = mmap(0, s2, 3, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_POPULATE, -1, 0);
		break;
	case MEMFD_HTLB: {
		int fd = memfd_create("x", MFD_HUGETLB);
		ftruncate(fd, s2);
		p = mmap(0, s2, 3, MAP_SHARED | MAP_POPULATE, fd, 0);
		close(fd);
		break;
	}
	default: {
		int fd = memfd_create("x", 0);
		ftruncate(fd, s2);
		fallocate(fd, 0, 0, s2);
		p = mmap(0, s2, 3, MAP_SHARED | MAP_POPULATE, fd, 0);
		close(fd);
		break;
	}
	}
	if (p == MAP_FAILED) {
		perror(nm[k]);
		return 0;
	}
	memset(p, 1, sz);
	return p;
}
int main(int argc, char **argv)
{
	int srck = argc > 1 ? atoi(argv[1]) : P4K;
	size_t total = argc > 2 ? strtoull(argv[2], 0, 0) : (1ull << 30);
	int mask = argc > 3 ? atoi(argv[3]) : 31;
	size_t sizes[] = {1u << 20, 16u << 20, 64u << 20, 256u << 20};
	char *src = get(srck, 256u << 20);
	printf("src %s thp %ld kB\n", nm[srck], thp_kb(src));
	for (size_t i = 0; i < (256u << 20); i += 8)
		memcpy(src + i, &i, 8);
	for (int si = 0; si < 4; si++) {
		size_t sz = sizes[si];
		int reps = total / sz;
		if (reps < 8)
			reps = 8;
		if (reps > 500)
			reps = 500;
		char *d[NK];
		double *v[NK], tot[NK] = {0};
		for (int k = 0; k < NK; k++) {
			d[k] = (mask >> k & 1) ? get(k, sz) : 0;
			v[k] = calloc(reps, sizeof(double));
			if (d[k])
				memcpy(d[k], src, sz);
		}
		for (int r = 0; r < reps; r++)
			for (int k = 0; k < NK; k++)
				if (d[k]) {
					uint64_t t = now();
					memcpy(d[k], src, sz);
					v[k][r] = (now() - t) / 1e9;
					tot[k] += v[k][r];
				}
		printf("size %4zu MiB reps %d (GB/s mean/median):", sz >> 20, reps);
		for (int k = 0; k < NK; k++)
			if (d[k]) {
				qsort(v[k], reps, sizeof(double), cmp);
				printf("  %s %.1f/%.1f", nm[k], (double)sz * reps / tot[k] / 1e9,
				       sz / v[k][reps / 2] / 1e9);
				if (k == THP)
					printf("[thp %ldM]", thp_kb(d[k]) >> 10);
			}
		printf("\n");
		for (int k = 0; k < NK; k++) {
			if (d[k])
				munmap(d[k], sz);
			free(v[k]);
		}
	}
	return 0;
}
