/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Stress test of coffer_htab and coffer_hhash: N readers (lookup + addref/decref, _rcu
 * lookups, bulk lookups) against M writers inserting and deleting the SAME small key set,
 * with random yields injected inside read-side sections, between lookup and reference use,
 * and inside hop_key_cmp (under a stripe lock) to widen race windows (liburcu DEBUG_YIELD).
 *
 * Freed records are poisoned and kept in a quarantine ring (65,536 deep) before the real
 * free(), so a reader that reaches a freed record sees the poison instead of undefined
 * memory (ASan builds catch anything older).
 *
 * Invariants checked at the end (exit status 1 on any violation):
 *  - no lookup ever returned a poisoned (freed) record, nor a record with another key;
 *  - no refcount seen below 1 while held, and no decref refused at zero (underflows == 0);
 *  - a deleted handle is never found again (checked by the deleter right after delete);
 *  - the table is empty after draining, destroy(false) then succeeds;
 *  - frees == inserts after the final barrier.
 *
 * Usage: stress_htab [-r readers] [-w writers] [-d seconds] [-k keys] [-y yield_1_in_n]
 *                    [-m htab|hhash|both]
 * Defaults: 2 readers, 2 writers, 3 s in all, 64 keys, yield 1 in 64.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <coffer/common.h>
#include <coffer/hash.h>

#include "../stress_rng.h"

#include "hashtable/htab_internal.h"

#define MAGIC_LIVE   0x11fe11feu
#define MAGIC_POISON 0xdeadbeefu
#define QUARANTINE   (1u << 16)

static unsigned int nreaders = 2, nwriters = 2, nkeys = 64, yield_n = 64;
static double seconds = 3.0;
static int stop;

/* Violations and counters (atomic-relaxed; read after joins). */
static uint64_t bad_poison, bad_key, bad_ref, bad_stale, bad_other;
static uint64_t n_inserts, n_frees, n_lookups, n_rcu_lookups, n_deletes;

/* ---- per-thread xorshift and yield injection ------------------------------------------ */

/* ---- quarantine ------------------------------------------------------------------------ */

static pthread_mutex_t q_mu = PTHREAD_MUTEX_INITIALIZER;
static void *q_ring[QUARANTINE];
static unsigned int q_head, q_len;

static void quarantine(void *p)
{
	void *old = NULL;

	pthread_mutex_lock(&q_mu);
	if (q_len == QUARANTINE) {
		old = q_ring[q_head];
		q_ring[q_head] = p;
		q_head = (q_head + 1) % QUARANTINE;
	} else {
		q_ring[(q_head + q_len++) % QUARANTINE] = p;
	}
	pthread_mutex_unlock(&q_mu);
	free(old);
}

static void quarantine_empty(void)
{
	pthread_mutex_lock(&q_mu);
	while (q_len) {
		free(q_ring[q_head]);
		q_head = (q_head + 1) % QUARANTINE;
		q_len--;
	}
	pthread_mutex_unlock(&q_mu);
}

/* ---- generic table records ------------------------------------------------------------- */

struct srec {
	struct coffer_hnode node;
	uint64_t key;
	uint32_t magic; /* atomic-relaxed */
};

static struct srec *srec_of(const struct coffer_hnode *n)
{
	return (struct srec *)(void *)((char *)n - offsetof(struct srec, node));
}

static uint64_t s_hash(const void *key, size_t ksize)
{
	uint64_t k;

	(void)ksize;
	memcpy(&k, key, sizeof(k));
	return coffer_hash_mix64(k);
}

static bool s_cmp(const struct coffer_hnode *n, const void *key, size_t ksize)
{
	uint64_t k;

	(void)ksize;
	memcpy(&k, key, sizeof(k));
	stress_maybe_yield(yield_n); /* under a stripe lock or in a read-side section */
	return srec_of(n)->key == k;
}

static void s_free(struct coffer_hnode *n, void *priv)
{
	struct srec *r = srec_of(n);

	(void)priv;
	if (__atomic_load_n(&r->magic, __ATOMIC_RELAXED) != MAGIC_LIVE)
		stress_bump(&bad_other); /* freed twice */
	__atomic_store_n(&r->magic, MAGIC_POISON, __ATOMIC_RELAXED);
	stress_bump(&n_frees);
	quarantine(r);
}

static const struct coffer_htab_ops s_ops = {
    .hop_key_hash = s_hash,
    .hop_key_cmp = s_cmp,
    .hop_rec_free = s_free,
};

static struct coffer_htab *tab;

/* Check a record a lookup returned for key @k. */
static void check_rec(const struct coffer_hnode *n, uint64_t k, bool held)
{
	const struct srec *r = srec_of(n);

	if (__atomic_load_n(&r->magic, __ATOMIC_RELAXED) != MAGIC_LIVE)
		stress_bump(&bad_poison);
	if (r->key != k)
		stress_bump(&bad_key);
	if (held && __atomic_load_n(&n->hn_ref, __ATOMIC_RELAXED) < 1)
		stress_bump(&bad_ref);
}

static void *htab_reader(void *arg)
{
	rng = (uintptr_t)arg * 0x9e3779b97f4a7c15ULL + 1;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		uint64_t k = stress_rnd() % nkeys, op = stress_rnd() % 8;
		struct coffer_hnode *n;

		if (op < 4) {
			if (coffer_htab_lookup(tab, &k, sizeof(k), &n) == 0) {
				check_rec(n, k, true);
				coffer_htab_addref(tab, n);
				stress_maybe_yield(yield_n);
				check_rec(n, k, true);
				coffer_htab_decref(tab, n);
				coffer_htab_decref(tab, n);
			}
			stress_bump(&n_lookups);
		} else if (op < 7) {
			coffer_rcu_read_lock();
			n = coffer_htab_lookup_rcu(tab, &k, sizeof(k));
			if (n) {
				stress_maybe_yield(yield_n);
				check_rec(n, k, false);
			}
			coffer_rcu_read_unlock();
			stress_bump(&n_rcu_lookups);
		} else {
			uint64_t ks[4];
			const void *kp[4];
			struct coffer_hnode *ns[4];
			int rc;

			for (int i = 0; i < 4; i++) {
				ks[i] = stress_rnd() % nkeys;
				kp[i] = &ks[i];
			}
			rc = coffer_htab_lookup_bulk(tab, kp, sizeof(uint64_t), 4, ns);
			if (rc == 4) {
				for (int i = 0; i < 4; i++) {
					check_rec(ns[i], ks[i], true);
					coffer_htab_decref(tab, ns[i]);
				}
			} else if (rc != -ENOENT) {
				stress_bump(&bad_other);
			}
			stress_bump(&n_lookups);
		}
	}
	return NULL;
}

static struct srec *srec_new(uint64_t k)
{
	struct srec *r = malloc(sizeof(*r));

	if (!r)
		abort(); /* test harness: out of memory is not a result */
	r->key = k;
	r->magic = MAGIC_LIVE;
	return r;
}

static void *htab_writer(void *arg)
{
	rng = (uintptr_t)arg * 0xda942042e4dd58b5ULL + 7;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		uint64_t k = stress_rnd() % nkeys, op = stress_rnd() % 16;
		struct coffer_hnode *found;
		struct srec *r;
		int rc;

		if (op < 7) {
			r = srec_new(k);
			rc = coffer_htab_insert(tab, &k, sizeof(k), &r->node);
			if (rc == 0)
				stress_bump(&n_inserts);
			else if (rc == -EEXIST)
				free(r); /* never published */
			else
				stress_bump(&bad_other);
		} else if (op < 8) {
			r = srec_new(k);
			rc = coffer_htab_find_or_insert(tab, &k, sizeof(k), &r->node, &found);
			if (rc == 0) {
				stress_bump(&n_inserts);
			} else if (rc == 1) {
				free(r);
			} else {
				stress_bump(&bad_other);
				continue;
			}
			check_rec(found, k, true);
			stress_maybe_yield(yield_n);
			coffer_htab_decref(tab, found);
		} else if (op < 15) {
			rc = coffer_htab_delete(tab, &k, sizeof(k));
			if (rc == 0)
				stress_bump(&n_deletes);
			else if (rc != -ENOENT)
				stress_bump(&bad_other);
		} else {
			/* Delete through a held reference (delete_node), racing other deleters. */
			if (coffer_htab_lookup(tab, &k, sizeof(k), &found) == 0) {
				stress_maybe_yield(yield_n);
				rc = coffer_htab_delete_node(tab, found);
				if (rc == 0)
					stress_bump(&n_deletes);
				else if (rc != -ENOENT)
					stress_bump(&bad_other);
				coffer_htab_decref(tab, found);
			}
		}
		stress_maybe_yield(yield_n);
	}
	return NULL;
}

/* ---- handle hash records --------------------------------------------------------------- */

struct hobj {
	struct coffer_hlink link;
	uint32_t magic;
};

static struct coffer_hhash *hh;
static uint64_t *slots; /* published cookies, 0 = empty; atomic */

static void h_free(struct coffer_hlink *l)
{
	struct hobj *o = (struct hobj *)(void *)l;

	if (__atomic_load_n(&o->magic, __ATOMIC_RELAXED) != MAGIC_LIVE)
		stress_bump(&bad_other);
	__atomic_store_n(&o->magic, MAGIC_POISON, __ATOMIC_RELAXED);
	stress_bump(&n_frees);
	quarantine(o);
}

static void check_hobj(const struct coffer_hlink *l, uint64_t cookie)
{
	const struct hobj *o = (const struct hobj *)(const void *)l;

	if (__atomic_load_n(&o->magic, __ATOMIC_RELAXED) != MAGIC_LIVE)
		stress_bump(&bad_poison);
	if (l->hl_cookie != cookie)
		stress_bump(&bad_key);
}

static void *hh_reader(void *arg)
{
	rng = (uintptr_t)arg * 0x9e3779b97f4a7c15ULL + 3;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		uint64_t c = __atomic_load_n(&slots[stress_rnd() % nkeys], __ATOMIC_RELAXED);
		coffer_handle_t h = {c};
		struct coffer_hlink *l;
		int rc;

		if (!c)
			continue;
		if (stress_rnd() & 1) {
			rc = coffer_hhash_lookup(hh, h, COFFER_HTYPE_TEST, &l);
			if (rc == 0) {
				check_hobj(l, c);
				coffer_hhash_addref(hh, l);
				stress_maybe_yield(yield_n);
				if (__atomic_load_n(&l->hl_node.hn_ref, __ATOMIC_RELAXED) < 2)
					stress_bump(&bad_ref);
				check_hobj(l, c);
				coffer_hhash_putref(hh, l);
				coffer_hhash_putref(hh, l);
			} else if (rc != -ENOENT) {
				stress_bump(&bad_other);
			}
			if (coffer_hhash_lookup(hh, h, COFFER_HTYPE_EQ, &l) != -EINVAL)
				stress_bump(
				    &bad_other); /* wrong type must always fail with -EINVAL */
			stress_bump(&n_lookups);
		} else {
			coffer_rcu_read_lock();
			l = coffer_hhash_lookup_rcu(hh, h, COFFER_HTYPE_TEST);
			if (l) {
				stress_maybe_yield(yield_n);
				check_hobj(l, c);
			}
			coffer_rcu_read_unlock();
			stress_bump(&n_rcu_lookups);
		}
	}
	return NULL;
}

static void *hh_writer(void *arg)
{
	rng = (uintptr_t)arg * 0xda942042e4dd58b5ULL + 5;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		uint64_t *slot = &slots[stress_rnd() % nkeys];
		uint64_t c = __atomic_exchange_n(slot, 0, __ATOMIC_ACQ_REL);
		struct coffer_hlink *l;

		if (c) {
			/* We own this handle's deletion: it must be there, then never again. */
			if (coffer_hhash_lookup(hh, (coffer_handle_t){c}, COFFER_HTYPE_TEST, &l) !=
			    0) {
				stress_bump(&bad_stale);
				continue;
			}
			stress_maybe_yield(yield_n);
			if (coffer_hhash_delete(hh, l) != 0)
				stress_bump(&bad_other);
			else
				stress_bump(&n_deletes);
			if (coffer_hhash_delete(hh, l) != -ENOENT)
				stress_bump(&bad_other);
			coffer_hhash_putref(hh, l);
			if (coffer_hhash_lookup(hh, (coffer_handle_t){c}, COFFER_HTYPE_TEST, &l) !=
			    -ENOENT)
				stress_bump(&bad_stale);
		} else {
			struct hobj *o = malloc(sizeof(*o));
			coffer_handle_t h;
			uint64_t expect = 0;

			if (!o)
				abort();
			o->magic = MAGIC_LIVE;
			o->link.hl_free = h_free;
			if (coffer_hhash_insert(hh, &o->link, COFFER_HTYPE_TEST, &h) != 0) {
				stress_bump(&bad_other);
				free(o);
				continue;
			}
			stress_bump(&n_inserts);
			if (!__atomic_compare_exchange_n(slot, &expect, h.cookie, false,
							 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
				/* Slot taken meanwhile: unpublished, delete it ourselves. */
				if (coffer_hhash_delete(hh, &o->link) != 0)
					stress_bump(&bad_other);
				else
					stress_bump(&n_deletes);
			}
		}
		stress_maybe_yield(yield_n);
	}
	return NULL;
}

/* ---- driver ---------------------------------------------------------------------------- */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void reset_counters(void)
{
	bad_poison = bad_key = bad_ref = bad_stale = bad_other = 0;
	n_inserts = n_frees = n_lookups = n_rcu_lookups = n_deletes = 0;
	stop = 0;
}

/* Run the threads for @secs; return the peak reclamation backlog seen. */
static int64_t run_threads(void *(*rfn)(void *), void *(*wfn)(void *), double secs)
{
	pthread_t *t = calloc(nreaders + nwriters, sizeof(*t));
	double end = now_s() + secs;
	int64_t peak = 0;

	if (!t)
		abort();
	for (uintptr_t i = 0; i < nreaders; i++)
		if (pthread_create(&t[i], NULL, rfn, (void *)(i + 1)))
			abort();
	for (uintptr_t i = 0; i < nwriters; i++)
		if (pthread_create(&t[nreaders + i], NULL, wfn, (void *)(i + 101)))
			abort();
	while (now_s() < end) {
		struct timespec ts = {0, 10 * 1000 * 1000};
		int64_t b = coffer__reclaim_backlog();

		if (b > peak)
			peak = b;
		nanosleep(&ts, NULL);
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (unsigned int i = 0; i < nreaders + nwriters; i++)
		pthread_join(t[i], NULL);
	free(t);
	return peak;
}

static int report(const char *mode, double secs, int64_t peak, uint64_t underflows, uint64_t left)
{
	int fail = bad_poison || bad_key || bad_ref || bad_stale || bad_other || underflows ||
		   left || n_frees != n_inserts;

	printf("stress mode=%s readers=%u writers=%u keys=%u secs=%.1f inserts=%llu deletes=%llu "
	       "frees=%llu lookups=%llu rcu_lookups=%llu ins_per_s=%.0f peak_backlog=%lld "
	       "bad_poison=%llu bad_key=%llu bad_ref=%llu bad_stale=%llu bad_other=%llu "
	       "underflows=%llu left=%llu result=%s\n",
	       mode, nreaders, nwriters, nkeys, secs, (unsigned long long)n_inserts,
	       (unsigned long long)n_deletes, (unsigned long long)n_frees,
	       (unsigned long long)n_lookups, (unsigned long long)n_rcu_lookups,
	       (double)n_inserts / secs, (long long)peak, (unsigned long long)bad_poison,
	       (unsigned long long)bad_key, (unsigned long long)bad_ref,
	       (unsigned long long)bad_stale, (unsigned long long)bad_other,
	       (unsigned long long)underflows, (unsigned long long)left, fail ? "FAIL" : "ok");
	return fail;
}

static int drain_cb(struct coffer_hnode *n, void *arg)
{
	return coffer_htab_delete_node(arg, n) == 0 ? 0 : -EIO;
}

static int run_htab(double secs)
{
	struct coffer_htab_params p = {.buckets_log2 = 6, .locks_log2 = 3};
	struct coffer__htab_stats st;
	uint32_t cursor = 0;
	int64_t peak;
	uint64_t left;

	reset_counters();
	if (coffer_htab_create(&p, &s_ops, &tab))
		return 1;
	peak = run_threads(htab_reader, htab_writer, secs);
	/* Drain by traversal (bounded steps), then the table must be empty. */
	while (cursor != COFFER_HTAB_CURSOR_END)
		if (coffer_htab_traverse(tab, &cursor, 4, drain_cb, tab))
			stress_bump(&bad_other);
	left = coffer_htab_count(tab);
	coffer__htab_stats(tab, &st);
	if (coffer_htab_destroy(tab, false) != 0)
		stress_bump(&bad_other);
	coffer__rcu_barrier();
	return report("htab", secs, peak, st.ref_underflows, left);
}

static int run_hhash(double secs)
{
	struct coffer__htab_stats st;
	int64_t peak;
	uint64_t left;

	reset_counters();
	slots = calloc(nkeys, sizeof(*slots));
	if (!slots || coffer_hhash_create(NULL, &hh))
		return 1;
	peak = run_threads(hh_reader, hh_writer, secs);
	left = 0;
	coffer__htab_stats(coffer__hhash_table(hh), &st);
	if (coffer_hhash_destroy(hh, true) != 0) /* drain the handles still in slots */
		stress_bump(&bad_other);
	coffer__rcu_barrier();
	free(slots);
	return report("hhash", secs, peak, st.ref_underflows, left);
}

int main(int argc, char **argv)
{
	const char *mode = "both";
	int c, fail = 0;

	while ((c = getopt(argc, argv, "r:w:d:k:y:m:")) != -1) {
		switch (c) {
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
			nkeys = (unsigned int)strtoul(optarg, NULL, 0);
			break;
		case 'y':
			yield_n = (unsigned int)strtoul(optarg, NULL, 0);
			break;
		case 'm':
			mode = optarg;
			break;
		default:
			fprintf(stderr,
				"usage: %s [-r readers] [-w writers] [-d seconds] [-k keys] "
				"[-y yield_1_in_n (0 = never)] [-m htab|hhash|both]\n",
				argv[0]);
			return 2;
		}
	}
	if (nkeys == 0 || nwriters == 0 || seconds <= 0) {
		fprintf(stderr, "need keys > 0, writers > 0, seconds > 0\n");
		return 2;
	}
	if (!strcmp(mode, "both")) {
		fail |= run_htab(seconds / 2);
		fail |= run_hhash(seconds / 2);
	} else if (!strcmp(mode, "htab")) {
		fail |= run_htab(seconds);
	} else if (!strcmp(mode, "hhash")) {
		fail |= run_hhash(seconds);
	} else {
		fprintf(stderr, "unknown mode %s\n", mode);
		return 2;
	}
	quarantine_empty();
	return fail ? 1 : 0;
}
