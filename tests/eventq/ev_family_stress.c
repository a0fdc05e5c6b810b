/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/eventq/ev_family_stress.c - stress: parent/child events and batched completions on two
 * EQs at once (concurrency review rev2: the paths eq_stress does not drive).
 *
 * F families, each a parent with C children on one EQ and a plain ("solo") event on the other
 * EQ. Launchers launch a family's children, then its parent (or, one round in four, a parent
 * barrier), then its solo event, and post one completion per child, one for the parent's own
 * operation (not for a barrier) and one for the solo event to a shared work list. Completer
 * threads take random batches from that list and complete them with
 * coffer__event_complete_vec(): children of one parent finish on several threads at once and in
 * any order, racing the parent's own completion (ep_holds, ep_err, the finaliser), and every
 * batch mixes events of both EQs (publish_chain runs split by EQ). One poller per EQ waits
 * forever (-1): a lost wake-up hangs the test and meson's timeout fails it.
 *
 * Every round uses result codes that no other round uses, so a stale ev_error shows. Checked:
 *  - a poll never returns a child; every parent and solo event is returned exactly once per
 *    round (a second return shows as a pending count below zero);
 *  - the parent's ev_error is 0 when every result of its round was 0, else one of the round's
 *    nonzero results (first error wins); each child's ev_error is its own result, read by the
 *    poller after the parent came back (the children's writes must be visible then);
 *  - the solo event's ev_error is its result;
 *  - at the end both EQs count nothing running or completed, every event finalises, both EQs
 *    are destroyed without COFFER_EQ_FORCE and the handle hash is empty.
 * Yields are injected (1 in -y) between launches and between completions to widen windows.
 *
 * Usage: ev_family_stress [-f families] [-c children] [-r rounds] [-l launchers]
 *                         [-k completers] [-b batch] [-y yield_1_in_n]
 * Prints one summary line; exit 0 on success, 1 on a failed check, 2 on bad usage.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <coffer/common.h>
#include <coffer/event.h>
#include <coffer/hash.h>

#include "../stress_rng.h"

#include "eventq/event_internal.h"

#define MAX_CHILDREN 12
#define MAX_BATCH    64

enum { K_PARENT = 1, K_CHILD, K_SOLO, K_TERM };

struct fam;

/* An event and what the poller needs to know about it (ev first: polls return &ev). */
struct tev {
	struct coffer_event ev;
	struct fam *fam;
	int kind;
	int idx;
};

struct fam {
	struct tev parent;
	struct tev child[MAX_CHILDREN];
	struct tev solo;
	/* written by the launcher before launch; read by the poller after the poll */
	int child_rc[MAX_CHILDREN];
	int own_rc;
	int solo_rc;
	/* parent + solo not yet returned this round; release by the poller, acquire by the
	 * launcher before it reuses the family */
	atomic_int pending;
	atomic_uint_fast64_t parent_polls, solo_polls;
};

struct item {
	struct coffer_event *ev;
	int rc;
};

static struct {
	unsigned int families, children, launchers, completers, batch, yield_n;
	uint64_t rounds;
	coffer_handle_t eq[2];
	struct fam *fams;
	struct tev term[2];
	/* the work list: launchers append, completers take random entries */
	pthread_mutex_t mu;
	struct item *items;
	size_t nitems, cap;
	atomic_int launchers_done;
	atomic_uint_fast64_t bad_kind, bad_parent_error, bad_child_error, bad_solo_error, dup,
	    launch_fail, poll_fail, completed_items;
} g;

/* A result unique to (round, slot), nonzero one time in three. */
static int round_rc(uint64_t round, unsigned int slot)
{
	if (stress_rnd() % 3 != 0)
		return 0;
	return -(int)(1 + (round % 1000000) * 16 + slot);
}

static void post(struct coffer_event *ev, int rc)
{
	pthread_mutex_lock(&g.mu);
	g.items[g.nitems].ev = ev;
	g.items[g.nitems].rc = rc;
	g.nitems++;
	pthread_mutex_unlock(&g.mu);
}

static void *launcher_main(void *arg)
{
	unsigned int id = (unsigned int)(uintptr_t)arg;

	rng = 0x9e3779b97f4a7c15ull * (id + 1);
	for (uint64_t r = 0; r < g.rounds; r++) {
		for (unsigned int f = id; f < g.families; f += g.launchers) {
			struct fam *fm = &g.fams[f];
			bool barrier = stress_rnd() % 4 == 0;
			int rc;

			/* acquire: pairs with the poller's release; its reads are done */
			while (atomic_load_explicit(&fm->pending, memory_order_acquire) != 0)
				sched_yield();
			for (unsigned int i = 0; i < g.children; i++)
				fm->child_rc[i] = round_rc(r, i);
			fm->own_rc = barrier ? 0 : round_rc(r, MAX_CHILDREN);
			fm->solo_rc = round_rc(r, MAX_CHILDREN + 1);
			atomic_store_explicit(&fm->pending, 2, memory_order_relaxed);
			for (unsigned int i = 0; i < g.children; i++) {
				if (coffer__event_launch(&fm->child[i].ev) != 0)
					atomic_fetch_add(&g.launch_fail, 1);
				stress_maybe_yield(g.yield_n);
			}
			rc = barrier ? coffer_event_parent_barrier(&fm->parent.ev)
				     : coffer__event_launch(&fm->parent.ev);
			if (rc != 0)
				atomic_fetch_add(&g.launch_fail, 1);
			if (coffer__event_launch(&fm->solo.ev) != 0)
				atomic_fetch_add(&g.launch_fail, 1);
			for (unsigned int i = 0; i < g.children; i++)
				post(&fm->child[i].ev, fm->child_rc[i]);
			if (!barrier)
				post(&fm->parent.ev, fm->own_rc);
			post(&fm->solo.ev, fm->solo_rc);
		}
	}
	atomic_fetch_add(&g.launchers_done, 1);
	return NULL;
}

static void *completer_main(void *arg)
{
	struct coffer_event *evs[MAX_BATCH];
	int rcs[MAX_BATCH];

	rng = 0xda942042e4dd58b5ull * ((uintptr_t)arg + 1);
	for (;;) {
		unsigned int n = 0, want = 1 + (unsigned int)(stress_rnd() % g.batch);
		bool done;

		pthread_mutex_lock(&g.mu);
		while (n < want && g.nitems > 0) {
			size_t k = (size_t)(stress_rnd() % g.nitems);

			evs[n] = g.items[k].ev;
			rcs[n] = g.items[k].rc;
			g.items[k] = g.items[--g.nitems];
			n++;
		}
		done = n == 0 && atomic_load(&g.launchers_done) == (int)g.launchers;
		pthread_mutex_unlock(&g.mu);
		if (done)
			break;
		if (n == 0) {
			sched_yield();
			continue;
		}
		if (stress_rnd() % 2) {
			coffer__event_complete_vec(evs, rcs, n);
		} else {
			for (unsigned int i = 0; i < n; i++) {
				coffer__event_complete(evs[i], rcs[i]);
				stress_maybe_yield(g.yield_n);
			}
		}
		atomic_fetch_add_explicit(&g.completed_items, n, memory_order_relaxed);
		stress_maybe_yield(g.yield_n);
	}
	return NULL;
}

static bool parent_error_ok(const struct fam *fm, int err)
{
	bool any = fm->own_rc != 0;

	if (err != 0 && err == fm->own_rc)
		return true;
	for (unsigned int i = 0; i < g.children; i++) {
		if (fm->child_rc[i] != 0)
			any = true;
		if (err != 0 && err == fm->child_rc[i])
			return true;
	}
	return err == 0 && !any;
}

/* The pending count of @fm one lower; a return past zero is a duplicate. */
static void returned(struct fam *fm)
{
	/* release: our reads of the family happen before the launcher reuses it */
	if (atomic_fetch_sub_explicit(&fm->pending, 1, memory_order_release) <= 0) {
		atomic_fetch_add(&g.dup, 1);
		atomic_fetch_add(&fm->pending, 1);
	}
}

static void *poller_main(void *arg)
{
	unsigned int e = (unsigned int)(uintptr_t)arg;
	struct coffer_event *evs[MAX_BATCH];

	for (bool stop = false; !stop;) {
		int k = coffer_eq_poll(g.eq[e], 0, -1, g.batch, evs);

		if (k < 0) {
			atomic_fetch_add(&g.poll_fail, 1);
			break;
		}
		for (int i = 0; i < k; i++) {
			struct tev *t = (struct tev *)(void *)evs[i];
			struct fam *fm = t->fam;

			switch (t->kind) {
			case K_TERM:
				stop = true;
				break;
			case K_PARENT:
				if (!parent_error_ok(fm, t->ev.ev_error))
					atomic_fetch_add(&g.bad_parent_error, 1);
				for (unsigned int c = 0; c < g.children; c++)
					if (fm->child[c].ev.ev_error != fm->child_rc[c])
						atomic_fetch_add(&g.bad_child_error, 1);
				atomic_fetch_add_explicit(&fm->parent_polls, 1,
							  memory_order_relaxed);
				returned(fm);
				break;
			case K_SOLO:
				if (t->ev.ev_error != fm->solo_rc)
					atomic_fetch_add(&g.bad_solo_error, 1);
				atomic_fetch_add_explicit(&fm->solo_polls, 1, memory_order_relaxed);
				returned(fm);
				break;
			default:
				atomic_fetch_add(&g.bad_kind, 1);
				break;
			}
		}
	}
	return NULL;
}

static int usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s [-f families] [-c children] [-r rounds] [-l launchers]"
		" [-k completers] [-b batch] [-y yield_1_in_n]\n",
		argv0);
	return 2;
}

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "ev_family_stress: check failed: %s (line %d)\n", #cond,   \
				__LINE__);                                                         \
			failed = 1;                                                                \
		}                                                                                  \
	} while (0)

static int init_tev(struct tev *t, struct fam *fm, int kind, int idx, coffer_handle_t eqh,
		    struct coffer_event *parent)
{
	t->fam = fm;
	t->kind = kind;
	t->idx = idx;
	return coffer_event_init(&t->ev, eqh, parent);
}

int main(int argc, char **argv)
{
	pthread_t *lt, *ct, pt[2];
	uint64_t parents = 0, solos = 0;
	int opt, failed = 0;

	g.families = 8;
	g.children = 3;
	g.rounds = 20000;
	g.launchers = 2;
	g.completers = 2;
	g.batch = 8;
	g.yield_n = 16;
	while ((opt = getopt(argc, argv, "f:c:r:l:k:b:y:")) != -1) {
		switch (opt) {
		case 'f':
			g.families = (unsigned int)strtoul(optarg, NULL, 0);
			break;
		case 'c':
			g.children = (unsigned int)strtoul(optarg, NULL, 0);
			break;
		case 'r':
			g.rounds = strtoull(optarg, NULL, 0);
			break;
		case 'l':
			g.launchers = (unsigned int)strtoul(optarg, NULL, 0);
			break;
		case 'k':
			g.completers = (unsigned int)strtoul(optarg, NULL, 0);
			break;
		case 'b':
			g.batch = (unsigned int)strtoul(optarg, NULL, 0);
			break;
		case 'y':
			g.yield_n = (unsigned int)strtoul(optarg, NULL, 0);
			break;
		default:
			return usage(argv[0]);
		}
	}
	if (!g.families || !g.children || g.children > MAX_CHILDREN || !g.rounds || !g.launchers ||
	    !g.completers || !g.batch || g.batch > MAX_BATCH)
		return usage(argv[0]);

	if (coffer_init() != 0 || coffer_eq_create(&g.eq[0]) != 0 ||
	    coffer_eq_create(&g.eq[1]) != 0) {
		fprintf(stderr, "ev_family_stress: cannot set up the runtime and EQs\n");
		return 1;
	}
	pthread_mutex_init(&g.mu, NULL);
	g.cap = (size_t)g.families * (g.children + 2);
	g.items = calloc(g.cap, sizeof(*g.items));
	g.fams = calloc(g.families, sizeof(*g.fams));
	lt = calloc(g.launchers, sizeof(*lt));
	ct = calloc(g.completers, sizeof(*ct));
	if (!g.items || !g.fams || !lt || !ct) {
		fprintf(stderr, "ev_family_stress: out of memory\n");
		return 1;
	}
	for (unsigned int f = 0; f < g.families; f++) {
		struct fam *fm = &g.fams[f];

		CHECK(init_tev(&fm->parent, fm, K_PARENT, 0, g.eq[f % 2], NULL) == 0);
		for (unsigned int i = 0; i < g.children; i++)
			CHECK(init_tev(&fm->child[i], fm, K_CHILD, (int)i, COFFER_HANDLE_NULL,
				       &fm->parent.ev) == 0);
		CHECK(init_tev(&fm->solo, fm, K_SOLO, 0, g.eq[(f + 1) % 2], NULL) == 0);
	}
	for (unsigned int e = 0; e < 2; e++)
		CHECK(init_tev(&g.term[e], NULL, K_TERM, 0, g.eq[e], NULL) == 0);
	if (failed)
		return 1;

	for (unsigned int e = 0; e < 2; e++)
		if (pthread_create(&pt[e], NULL, poller_main, (void *)(uintptr_t)e) != 0)
			return 1;
	for (unsigned int t = 0; t < g.completers; t++)
		if (pthread_create(&ct[t], NULL, completer_main, (void *)(uintptr_t)t) != 0)
			return 1;
	for (unsigned int t = 0; t < g.launchers; t++)
		if (pthread_create(&lt[t], NULL, launcher_main, (void *)(uintptr_t)t) != 0)
			return 1;
	for (unsigned int t = 0; t < g.launchers; t++)
		pthread_join(lt[t], NULL);
	for (unsigned int t = 0; t < g.completers; t++)
		pthread_join(ct[t], NULL);
	/* every completion made: wait until the pollers returned every family's last round */
	for (unsigned int f = 0; f < g.families; f++)
		while (atomic_load(&g.fams[f].pending) > 0 && atomic_load(&g.poll_fail) == 0)
			usleep(1000);
	for (unsigned int e = 0; e < 2; e++) {
		CHECK(coffer__event_launch(&g.term[e].ev) == 0);
		coffer__event_complete(&g.term[e].ev, 0);
	}
	for (unsigned int e = 0; e < 2; e++)
		pthread_join(pt[e], NULL);

	for (unsigned int f = 0; f < g.families; f++) {
		CHECK(atomic_load(&g.fams[f].parent_polls) == g.rounds);
		CHECK(atomic_load(&g.fams[f].solo_polls) == g.rounds);
		parents += atomic_load(&g.fams[f].parent_polls);
		solos += atomic_load(&g.fams[f].solo_polls);
	}
	CHECK(atomic_load(&g.launch_fail) == 0);
	CHECK(atomic_load(&g.poll_fail) == 0);
	CHECK(atomic_load(&g.dup) == 0);
	CHECK(atomic_load(&g.bad_kind) == 0);
	CHECK(atomic_load(&g.bad_parent_error) == 0);
	CHECK(atomic_load(&g.bad_child_error) == 0);
	CHECK(atomic_load(&g.bad_solo_error) == 0);
	CHECK(g.nitems == 0);
	for (unsigned int e = 0; e < 2; e++) {
		CHECK(coffer_eq_query(g.eq[e], COFFER_EQR_ALL, 0, NULL) == 0);
		CHECK(coffer_event_fini(&g.term[e].ev) == 0);
	}
	for (unsigned int f = 0; f < g.families; f++) {
		CHECK(coffer_event_fini(&g.fams[f].child[0].ev) == 0); /* a child leaves alone */
		CHECK(coffer_event_fini(&g.fams[f].parent.ev) == 0);   /* takes the others */
		CHECK(coffer_event_fini(&g.fams[f].solo.ev) == 0);
	}
	for (unsigned int e = 0; e < 2; e++)
		CHECK(coffer_eq_destroy(g.eq[e], 0) == 0);
	CHECK(coffer_hhash_count(coffer_hhash_global()) == 0);
	CHECK(coffer_fini() == 0);
	printf("ev_family_stress: families=%u children=%u rounds=%llu parents=%llu solos=%llu "
	       "completions=%llu dup=%llu bad_parent=%llu bad_child=%llu bad_solo=%llu %s\n",
	       g.families, g.children, (unsigned long long)g.rounds, (unsigned long long)parents,
	       (unsigned long long)solos, (unsigned long long)atomic_load(&g.completed_items),
	       (unsigned long long)atomic_load(&g.dup),
	       (unsigned long long)atomic_load(&g.bad_parent_error),
	       (unsigned long long)atomic_load(&g.bad_child_error),
	       (unsigned long long)atomic_load(&g.bad_solo_error), failed ? "FAIL" : "ok");
	pthread_mutex_destroy(&g.mu);
	free(g.items);
	free(g.fams);
	free(lt);
	free(ct);
	return failed;
}
