/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Stress test of the handle hash with recycled record memory, as runtime/obj.c keeps it: hl_free
 * pushes a record on a lock-free free list and the next insert of any thread takes it back, so
 * one record carries handle after handle (concurrency review rev2: a free before the grace
 * period, or a stale cookie reaching a newer incarnation, would show only here; stress_htab
 * never reuses memory, stress_cookie has no concurrent readers).
 *
 * Writers insert records into a small table of slots, each insert replacing (and deleting) the
 * slot's previous handle; readers look up handles read from the slots, many already deleted,
 * with coffer_hhash_lookup() (a reference) and coffer_hhash_lookup_rcu() (a read-side section),
 * yielding while they hold what they found. Every insert gives the record a new incarnation
 * number before it is published. Checked (exit status 1 on any violation):
 *  - a record found by cookie C is live, carries cookie C, and keeps the incarnation it had when
 *    found for as long as the reader holds its reference or stays in its read-side section
 *    (memory recycled before the grace period, or before the last reference, changes it);
 *  - a handle its writer deleted is never found again;
 *  - at the end the table is empty, destroy(false) succeeds and every insert was freed once.
 *
 * Usage: stress_recycle [-r readers] [-w writers] [-d seconds] [-k slots] [-y yield_1_in_n]
 * Defaults: 2 readers, 2 writers, 3 s, 64 slots, yield 1 in 16 (meson runs -k 16: more stale
 * handles).
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <coffer/common.h>
#include <coffer/hash.h>

#include "../stress_rng.h"

#define MAGIC_LIVE 0x11fe11feu
#define MAGIC_FREE 0xf4eef4eeu

struct rrec {
	struct coffer_hlink link;
	uint64_t incarnation; /* written before insert, read by readers after lookup */
	uint32_t magic;
	struct rrec *fnext;    /* free list (while free) */
	struct rrec *all_next; /* every record ever allocated */
};

static unsigned int nreaders = 2, nwriters = 2, nslots = 64, yield_n = 16;
static double seconds = 3.0;
static int stop;
static struct coffer_hhash *hh;
static uint64_t *slots;	       /* live cookies; atomic */
static struct rrec *free_recs; /* Treiber stack of freed records; atomic */
static struct rrec *all_recs;  /* every record ever malloc'd (mutex) */
static pthread_mutex_t all_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t next_incarnation = 1; /* atomic */
static uint64_t bad_magic, bad_cookie, bad_incarnation, bad_stale, bad_other;
static uint64_t n_inserts, n_frees, n_lookups, n_found, n_recycled;

/* Release: the record's last uses happen before its reuse (acquire in rec_alloc()). */
static void push_free(struct rrec *r)
{
	struct rrec *old = __atomic_load_n(&free_recs, __ATOMIC_RELAXED);

	do
		r->fnext = old;
	while (!__atomic_compare_exchange_n(&free_recs, &old, r, true, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED));
}

/* hl_free: after the grace period and the last reference; the record goes back to be reused. */
static void rec_free(struct coffer_hlink *l)
{
	struct rrec *r = (struct rrec *)(void *)l;

	if (r->magic != MAGIC_LIVE)
		stress_bump(&bad_magic); /* freed twice */
	r->magic = MAGIC_FREE;
	stress_bump(&n_frees);
	push_free(r);
}

static __thread struct rrec *my_cache;

static struct rrec *rec_alloc(void)
{
	struct rrec *r = my_cache;

	if (!r)
		r = my_cache = __atomic_exchange_n(&free_recs, NULL, __ATOMIC_ACQUIRE);
	if (r) {
		my_cache = r->fnext;
		stress_bump(&n_recycled);
		return r;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		abort();
	pthread_mutex_lock(&all_mu);
	r->all_next = all_recs;
	all_recs = r;
	pthread_mutex_unlock(&all_mu);
	return r;
}

/* The record a lookup found for @cookie must be live, that cookie's, and stay the incarnation
 * it was while held. Reads plain on purpose: a recycling writer racing with them is what TSan
 * should report. */
static void check_found(const struct rrec *r, uint64_t cookie)
{
	uint64_t inc = r->incarnation;

	if (r->magic != MAGIC_LIVE)
		stress_bump(&bad_magic);
	if (r->link.hl_cookie != cookie)
		stress_bump(&bad_cookie);
	stress_maybe_yield(yield_n);
	if (r->incarnation != inc || r->magic != MAGIC_LIVE || r->link.hl_cookie != cookie)
		stress_bump(&bad_incarnation);
}

static void *reader(void *arg)
{
	rng = (uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		uint64_t c = __atomic_load_n(&slots[stress_rnd() % nslots], __ATOMIC_RELAXED);
		coffer_handle_t h = {c};
		struct coffer_hlink *l;

		if (!c)
			continue;
		stress_maybe_yield(yield_n); /* let the handle go stale now and then */
		stress_bump(&n_lookups);
		if (stress_rnd() & 1) {
			int rc = coffer_hhash_lookup(hh, h, COFFER_HTYPE_TEST, &l);

			if (rc == 0) {
				stress_bump(&n_found);
				check_found((struct rrec *)(void *)l, c);
				coffer_hhash_putref(hh, l);
			} else if (rc != -ENOENT) {
				stress_bump(&bad_other);
			}
		} else {
			coffer_rcu_read_lock();
			l = coffer_hhash_lookup_rcu(hh, h, COFFER_HTYPE_TEST);
			if (l) {
				stress_bump(&n_found);
				check_found((struct rrec *)(void *)l, c);
			}
			coffer_rcu_read_unlock();
		}
	}
	return NULL;
}

static void *writer(void *arg)
{
	rng = (uintptr_t)arg * 0xda942042e4dd58b5ull + 7;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		struct rrec *r = rec_alloc();
		coffer_handle_t h, old;
		struct coffer_hlink *l;

		r->magic = MAGIC_LIVE;
		r->incarnation = __atomic_fetch_add(&next_incarnation, 1, __ATOMIC_RELAXED);
		r->link.hl_free = rec_free;
		if (coffer_hhash_insert(hh, &r->link, COFFER_HTYPE_TEST, &h) != 0) {
			stress_bump(&bad_other);
			continue;
		}
		stress_bump(&n_inserts);
		old.cookie =
		    __atomic_exchange_n(&slots[stress_rnd() % nslots], h.cookie, __ATOMIC_RELAXED);
		stress_maybe_yield(yield_n);
		if (old.cookie) {
			/* We own the old handle's deletion: it goes, and is never found again. */
			if (coffer_hhash_delete_handle(hh, old, COFFER_HTYPE_TEST) != 0)
				stress_bump(&bad_other);
			if (coffer_hhash_lookup(hh, old, COFFER_HTYPE_TEST, &l) != -ENOENT)
				stress_bump(&bad_stale);
		}
	}
	/* What this thread cached goes back (still MAGIC_FREE) for the final check. */
	while (my_cache) {
		struct rrec *r = my_cache;

		my_cache = r->fnext;
		push_free(r);
	}
	return NULL;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	pthread_t *t;
	double end;
	uint64_t left = 0, recs = 0;
	int opt, fail;

	while ((opt = getopt(argc, argv, "r:w:d:k:y:")) != -1) {
		switch (opt) {
		case 'r':
			nreaders = (unsigned int)strtoul(optarg, NULL, 0);
			break;
		case 'w':
			nwriters = (unsigned int)strtoul(optarg, NULL, 0);
			break;
		case 'd':
			seconds = strtod(optarg, NULL);
			break;
		case 'k':
			nslots = (unsigned int)strtoul(optarg, NULL, 0);
			break;
		case 'y':
			yield_n = (unsigned int)strtoul(optarg, NULL, 0);
			break;
		default:
			fprintf(
			    stderr,
			    "usage: %s [-r readers] [-w writers] [-d seconds] [-k slots] [-y n]\n",
			    argv[0]);
			return 2;
		}
	}
	if (!nwriters || !nslots) {
		fprintf(stderr, "stress_recycle: need writers and slots\n");
		return 2;
	}
	slots = calloc(nslots, sizeof(*slots));
	t = calloc(nreaders + nwriters, sizeof(*t));
	if (!slots || !t || coffer_hhash_create(NULL, &hh) != 0) {
		fprintf(stderr, "stress_recycle: set-up failed\n");
		return 1;
	}
	for (uintptr_t i = 0; i < nreaders; i++)
		if (pthread_create(&t[i], NULL, reader, (void *)(i + 1)))
			abort();
	for (uintptr_t i = 0; i < nwriters; i++)
		if (pthread_create(&t[nreaders + i], NULL, writer, (void *)(i + 101)))
			abort();
	end = now_s() + seconds;
	while (now_s() < end) {
		struct timespec ts = {0, 10 * 1000 * 1000};

		nanosleep(&ts, NULL);
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (unsigned int i = 0; i < nreaders + nwriters; i++)
		pthread_join(t[i], NULL);

	for (unsigned int i = 0; i < nslots; i++)
		if (slots[i] && coffer_hhash_delete_handle(hh, (coffer_handle_t){slots[i]},
							   COFFER_HTYPE_TEST) != 0)
			stress_bump(&bad_other);
	left = coffer_hhash_count(hh);
	/* destroy waits for every pending free: each insert must be freed exactly once now */
	if (coffer_hhash_destroy(hh, false) != 0)
		stress_bump(&bad_other);
	for (struct rrec *r = all_recs, *next; r; r = next) {
		next = r->all_next;
		if (r->magic != MAGIC_FREE)
			stress_bump(&bad_magic);
		recs++;
		free(r);
	}
	fail = bad_magic || bad_cookie || bad_incarnation || bad_stale || bad_other || left ||
	       n_frees != n_inserts;
	printf("stress_recycle readers=%u writers=%u slots=%u secs=%.1f inserts=%llu frees=%llu "
	       "records=%llu recycled=%llu lookups=%llu found=%llu bad_magic=%llu bad_cookie=%llu "
	       "bad_incarnation=%llu bad_stale=%llu bad_other=%llu left=%llu %s\n",
	       nreaders, nwriters, nslots, seconds, (unsigned long long)n_inserts,
	       (unsigned long long)n_frees, (unsigned long long)recs,
	       (unsigned long long)n_recycled, (unsigned long long)n_lookups,
	       (unsigned long long)n_found, (unsigned long long)bad_magic,
	       (unsigned long long)bad_cookie, (unsigned long long)bad_incarnation,
	       (unsigned long long)bad_stale, (unsigned long long)bad_other,
	       (unsigned long long)left, fail ? "FAIL" : "ok");
	free(slots);
	free(t);
	return fail;
}
