/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Cookie uniqueness: T threads run N insert/lookup/delete cycles in all on one handle hash
 * (default 10 million, 2 threads) and mark every issued counter in a bitmap: a counter seen
 * twice, a cookie that is not strictly increasing within its thread, a cookie 0, a wrong type
 * tag, or a deleted cookie found again fails the run. At the end every record must have been
 * freed (frees == cycles) and the table must be empty.
 *
 * Usage: stress_cookie [-n cycles] [-t threads]
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <coffer/common.h>
#include <coffer/hash.h>

#include "hashtable/htab_internal.h"

static uint64_t ncycles = 10000000, per_thread;
static unsigned int nthreads = 2;
static struct coffer_hhash *hh;
static uint8_t *bitmap; /* one bit per counter; atomic fetch_or */
static uint64_t bitmap_bits;
static uint64_t reused, misordered, bad, frees;

struct rec {
	struct coffer_hlink link;
};

static void rec_free(struct coffer_hlink *l)
{
	__atomic_fetch_add(&frees, 1, __ATOMIC_RELAXED);
	free(l);
}

static void *worker(void *arg)
{
	uint64_t last = 0;

	(void)arg;
	for (uint64_t i = 0; i < per_thread; i++) {
		struct rec *r = malloc(sizeof(*r));
		struct coffer_hlink *l;
		coffer_handle_t h;
		uint64_t ctr, bit;

		if (!r)
			abort();
		r->link.hl_free = rec_free;
		if (coffer_hhash_insert(hh, &r->link, COFFER_HTYPE_OBJ, &h) != 0) {
			__atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED);
			free(r);
			continue;
		}
		if (h.cookie == 0 || (h.cookie & 15) != COFFER_HTYPE_OBJ)
			__atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED);
		if (h.cookie <= last)
			__atomic_fetch_add(&misordered, 1, __ATOMIC_RELAXED);
		last = h.cookie;
		ctr = h.cookie >> COFFER_HTYPE_BITS;
		if (ctr >= bitmap_bits) {
			__atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED);
		} else {
			bit = (uint64_t)1 << (ctr & 7);
			if (__atomic_fetch_or(&bitmap[ctr >> 3], (uint8_t)bit, __ATOMIC_RELAXED) &
			    bit)
				__atomic_fetch_add(&reused, 1, __ATOMIC_RELAXED);
		}
		if (coffer_hhash_lookup(hh, h, COFFER_HTYPE_OBJ, &l) != 0 || l != &r->link) {
			__atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED);
			continue;
		}
		coffer_hhash_putref(hh, l);
		if (coffer_hhash_delete(hh, l) != 0)
			__atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED);
		if (coffer_hhash_lookup(hh, h, COFFER_HTYPE_OBJ, &l) != -ENOENT)
			__atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct timespec t0, t1;
	pthread_t *t;
	double secs;
	uint64_t left;
	int c, fail;

	while ((c = getopt(argc, argv, "n:t:")) != -1) {
		if (c == 'n')
			ncycles = strtoull(optarg, NULL, 0);
		else if (c == 't')
			nthreads = (unsigned int)strtoul(optarg, NULL, 0);
		else {
			fprintf(stderr, "usage: %s [-n cycles] [-t threads]\n", argv[0]);
			return 2;
		}
	}
	if (nthreads == 0 || ncycles == 0)
		return 2;
	per_thread = ncycles / nthreads;
	/* Counters are handed out in per-thread ranges of 1024 from 1: bounded by this. */
	bitmap_bits = per_thread * nthreads + (uint64_t)(nthreads + 2) * 1024 + 1;
	bitmap = calloc(bitmap_bits / 8 + 1, 1);
	t = calloc(nthreads, sizeof(*t));
	if (!bitmap || !t || coffer_hhash_create(NULL, &hh))
		return 1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned int i = 0; i < nthreads; i++)
		if (pthread_create(&t[i], NULL, worker, NULL))
			return 1;
	for (unsigned int i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
	left = coffer_hhash_count(hh);
	if (coffer_hhash_destroy(hh, false) != 0)
		bad++;
	coffer__rcu_barrier();
	fail = reused || misordered || bad || left || frees != per_thread * nthreads;
	printf("cookie cycles=%llu threads=%u secs=%.2f cycles_per_s=%.0f reused=%llu "
	       "misordered=%llu bad=%llu left=%llu frees=%llu result=%s\n",
	       (unsigned long long)(per_thread * nthreads), nthreads, secs,
	       (double)(per_thread * nthreads) / secs, (unsigned long long)reused,
	       (unsigned long long)misordered, (unsigned long long)bad, (unsigned long long)left,
	       (unsigned long long)frees, fail ? "FAIL" : "ok");
	free(bitmap);
	free(t);
	return fail ? 1 : 0;
}
