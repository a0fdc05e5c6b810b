/* getlat.c - perf/results/2core-bigget: EQ get latency (launch + flush -> poll) by object size,
 * with nothing, a memcpy of the object, or a busy gap between gets; minor faults and
 * voluntary switches per get (getrusage). cc -O2 -I include getlat.c -lcoffer; ./getlat SOCK MODE
 * [GAP_US] */
#define _GNU_SOURCE
#include <coffer/coffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
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
#define CK(x)                                                                                      \
	do {                                                                                       \
		int rc_ = (x);                                                                     \
		if (rc_ < 0) {                                                                     \
			fprintf(stderr, "%s: %s\n", #x, coffer_strerror(rc_));                     \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)
#define IT 100
int main(int argc, char **argv)
{
	const char *path = argv[1];
	int mode =
	    atoi(argv[2]); /* 0 no copy, 1 copy, 2 busy gap of copy's length (gap us = argv[3]) */
	double gap = argc > 3 ? atof(argv[3]) : 0;
	coffer_handle_t conn, eq;
	CK(coffer_init());
	CK(coffer_connect(path, &conn));
	CK(coffer_eq_create(&eq));
	struct coffer_event ev;
	CK(coffer_event_init(&ev, eq, NULL));
	char *dst = malloc(64 << 20);
	memset(dst, 1, 64 << 20);
	for (uint64_t sz = 4096; sz <= (64u << 20); sz *= 8) {
		struct coffer_oid oid;
		memset(&oid, 0, sizeof oid);
		snprintf((char *)oid.id, sizeof oid.id, "gb%llu", (unsigned long long)sz);
		void *w;
		CK(coffer_obj_create_oid(conn, &oid, sz, COFFER_CREATE_REPLACE, &w, NULL));
		memset(w, 7, sz);
		CK(coffer_obj_seal_oid(conn, &oid, COFFER_SEAL_RELEASE, NULL));
		double tg[IT], tc[IT];
		struct rusage r0, r1;
		getrusage(RUSAGE_SELF, &r0);
		for (int i = 0; i < IT; i++) {
			const void *d;
			uint64_t s;
			struct coffer_event *out[1];
			double a = now_us();
			CK(coffer_obj_get_oid(conn, &oid, 0, &d, &s, &ev));
			CK(coffer_flush(conn));
			int n;
			do {
				n = coffer_eq_poll(eq, 1, -1, 1, out);
			} while (n == 0);
			CK(n);
			CK(ev.ev_error);
			double b = now_us();
			tg[i] = b - a;
			if (mode == 1)
				memcpy(dst, d, s);
			else if (mode == 2) {
				while (now_us() - b < gap)
					;
			}
			tc[i] = now_us() - b;
			CK(coffer_obj_release_data(conn, &oid, d, NULL));
		}
		getrusage(RUSAGE_SELF, &r1);
		qsort(tg, IT, sizeof tg[0], cmp);
		qsort(tc, IT, sizeof tc[0], cmp);
		printf("mode=%d gap=%.0f size=%6llu KiB get med=%7.1f p90=%7.1f us  copy med=%7.1f "
		       "us  minflt/get=%.2f nvcsw/get=%.2f\n",
		       mode, gap, (unsigned long long)sz / 1024, tg[IT / 2], tg[IT * 9 / 10],
		       tc[IT / 2], (double)(r1.ru_minflt - r0.ru_minflt) / IT,
		       (double)(r1.ru_nvcsw - r0.ru_nvcsw) / IT);
		CK(coffer_obj_delete(conn, &oid, NULL));
	}
	coffer_event_fini(&ev);
	coffer_eq_destroy(eq, 0);
	coffer_disconnect(conn);
	coffer_fini();
	return 0;
}
