/* copy.c - perf/results/2core-bigget: memcpy of a random BLK_MiB block of a POOL_MiB mapping
 * (MAP_HUGETLB or not), with or without prefetching the whole block first (as the fio engine
 * does before it copies a get out), optionally after a pipe round trip to another process.
 * cc -O2 copy.c -o copy; ./copy BLK_MiB POOL_MiB SRCHUGE PREFETCH MODE */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}
static int cmp(const void *a, const void *b)
{
	double x = *(double *)a, y = *(double *)b;
	return x < y ? -1 : x > y;
}
/* argv: blk_MiB pool_MiB srchuge prefetch(0/1) mode(0 none, 2 pipe pingpong) */
int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: copy BLK_MiB POOL_MiB SRCHUGE PREFETCH MODE\n");
		return 2;
	}
	size_t n = (size_t)atoi(argv[1]) << 20, pool = (size_t)atoi(argv[2]) << 20;
	int sh = atoi(argv[3]), pf = atoi(argv[4]), mode = atoi(argv[5]);
	int it = 200;
	char *src = mmap(NULL, pool, PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_ANONYMOUS | (sh ? MAP_HUGETLB : 0), -1, 0);
	char *dst = malloc(n);
	if (src == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	memset(src, 1, pool);
	memset(dst, 2, n);
	int p1[2], p2[2];
	pipe(p1);
	pipe(p2);
	if (mode == 2 && fork() == 0) {
		char c;
		close(p1[1]);
		close(p2[0]);
		while (read(p1[0], &c, 1) == 1) {
			write(p2[1], &c, 1);
		}
		_exit(0);
	}
	double t[200];
	unsigned s = 1;
	size_t nb = pool / n;
	for (int i = 0; i < it; i++) {
		if (mode == 2) {
			char c = 0;
			write(p1[1], &c, 1);
			read(p2[0], &c, 1);
		}
		s = s * 1103515245 + 12345;
		char *p = src + ((s >> 8) % nb) * n;
		double a = now_us();
		if (pf)
			for (size_t o = 0; o < n; o += 64)
				__builtin_prefetch(p + o, 0, 3);
		memcpy(dst, p, n);
		t[i] = now_us() - a;
	}
	qsort(t, it, sizeof t[0], cmp);
	printf("blk=%zuMiB pool=%zuMiB srchuge=%d pf=%d mode=%d  min=%.0f med=%.0f p90=%.0f us  "
	       "GB/s(med)=%.1f\n",
	       n >> 20, pool >> 20, sh, pf, mode, t[0], t[it / 2], t[it * 9 / 10],
	       n / t[it / 2] / 1e3);
	return 0;
}
