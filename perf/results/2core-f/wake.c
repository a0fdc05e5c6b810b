/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * perf/results/2core-f/wake.c - the throwaway program behind wake-ab.txt: opens IDLE idle
 * channels (60 per connection, so that the 64-channel tree before protocol v3 can run it
 * too; each its own EQ that made one CONTAINS), then ROUNDS times sleeps 3 ms (the store
 * goes to sleep after 50 us idle) and times one blocking CONTAINS on another connection:
 * the latency of a call that finds the store asleep. Prints its median and p90 in us.
 * Usage: wake SOCKET IDLE ROUNDS. Built by hand against each tree (wake-run.sh runs it).
 */
#include <coffer/coffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
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
int main(int argc, char **argv)
{
	const char *sock = argv[1];
	int idle = atoi(argv[2]), rounds = atoi(argv[3]);
	coffer_handle_t conns[128], c;
	int nc = 0;
	if (coffer_init())
		return 1;
	for (int i = 0; i < idle; i++) {
		if (i % 60 == 0) {
			if (coffer_connect(sock, &conns[nc++]))
				return 2;
		}
		coffer_handle_t eq;
		struct coffer_event ev, *d;
		bool p;
		struct coffer_oid oid;
		memset(&oid, 0, sizeof oid);
		if (coffer_eq_create(&eq))
			return 3;
		coffer_event_init(&ev, eq, NULL);
		if (coffer_obj_contains(conns[nc - 1], &oid, &p, &ev))
			return 4;
		if (coffer_eq_poll(eq, 1, -1, 1, &d) != 1)
			return 5;
		coffer_event_fini(&ev);
	}
	if (coffer_connect(sock, &c))
		return 6;
	double *lat = malloc(sizeof(double) * rounds);
	struct coffer_oid oid;
	memset(&oid, 0, sizeof oid);
	bool p;
	coffer_obj_contains(c, &oid, &p, NULL);
	for (int r = 0; r < rounds; r++) {
		usleep(3000);
		double t0 = now_us();
		if (coffer_obj_contains(c, &oid, &p, NULL))
			return 7;
		lat[r] = now_us() - t0;
	}
	qsort(lat, rounds, sizeof(double), cmp);
	printf("idle=%d wake-call median %.1f us p90 %.1f us\n", idle, lat[rounds / 2],
	       lat[rounds * 9 / 10]);
	return 0;
}
