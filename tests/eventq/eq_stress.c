/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/eventq/eq_stress.c - stress: P pollers on one EQ while L threads launch and complete
 * N events (issue 4: 4 + 4 threads, 10M events; the default N is smaller for a shared
 * machine, pass -n 10000000 for the full run).
 *
 * A querier thread lists the EQ's events (coffer_eq_query) throughout; every event it lists
 * must be one of ours. Checked at the end: every event returned exactly once, with the result it
 * was completed with (no stale or leaked ev_error), no launch refused, the EQ's counters back at
 * zero, all events finalised and the EQ destroyed. Pollers wait forever (-t -1, the default): a
 * lost wakeup hangs the test and meson's timeout fails it. Launchers reuse a small pool of events
 * each, so events cycle READY -> RUNNING -> COMPLETED -> READY many times, and yield between
 * launch and completion every -y events to widen race windows (liburcu's DEBUG_YIELD idea).
 *
 * With -h, completions come from the pollers' progress hook instead (see chan below).
 *
 * With -w, a ping-pong instead: the main thread launches one event at a time, a completer
 * thread completes it, and the main thread's wait_running poll must return that event. A
 * wait_running poll may return 0 only when nothing runs and nothing completed is left to
 * reap; a completion inside its push window (counted, not yet linked) is still there.
 *
 * Usage: eq_stress [-p pollers] [-l launchers] [-n events] [-k pool] [-b batch]
 *                  [-y yield_every] [-t poll_timeout_us] [-h] [-w]
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
#include <time.h>
#include <unistd.h>

#include <coffer/common.h>
#include <coffer/event.h>
#include <coffer/hash.h>

#include "eventq/event_internal.h"

static int expected_rc(uint64_t seq)
{
	return -(int)(seq % 5); /* 0, -1 (EPERM), ... -4: differs between consecutive uses */
}

struct sev;

/* Complete now (default) or post to the fake channel (-h). */
static void finish(struct sev *s, int rc);

struct sev {
	struct coffer_event ev;
	uint64_t seq;	  /* written by the launcher before launch, read by the poller */
	_Atomic int busy; /* launched and not yet returned by a poll */
	int terminator;
	struct sev *chan_next; /* -h: link in the fake channel */
};

/*
 * -h: a fake IPC channel, as the runtime's will be: launchers post launched events to it and
 * ring the EQ's wake fd (the doorbell) when a poller armed it; the pollers' progress hook
 * completes whatever was posted. This drives completions from inside poll, concurrently in
 * several pollers, and checks the arm/disarm protocol against lost wake-ups.
 */
static struct {
	_Atomic(struct sev *) posted; /* Treiber stack; progress takes it whole */
	_Atomic int armed;	      /* pollers between arm() and disarm() */
	int wake_fd;
	_Atomic uint64_t progress_calls, arms, doorbells;
} chan;

static void chan_post(struct sev *s)
{
	struct sev *head = atomic_load_explicit(&chan.posted, memory_order_relaxed);
	uint64_t one = 1;

	do
		s->chan_next = head;
	while (!atomic_compare_exchange_weak_explicit(&chan.posted, &head, s, memory_order_seq_cst,
						      memory_order_relaxed));
	/* seq_cst: pairs with arm()'s seq_cst increment then load of posted (Dekker) */
	if (atomic_load_explicit(&chan.armed, memory_order_seq_cst) > 0) {
		atomic_fetch_add_explicit(&chan.doorbells, 1, memory_order_relaxed);
		if (write(chan.wake_fd, &one, sizeof(one)) != sizeof(one))
			abort(); /* eventfd write cannot fail here: not a test outcome */
	}
}

static int chan_progress(void *arg)
{
	struct sev *s, *next;
	int n = 0;

	(void)arg;
	atomic_fetch_add_explicit(&chan.progress_calls, 1, memory_order_relaxed);
	/* acquire: pairs with chan_post()'s CAS; we own the whole list after the exchange */
	for (s = atomic_exchange_explicit(&chan.posted, NULL, memory_order_acquire); s; s = next) {
		next = s->chan_next;
		coffer__event_complete(&s->ev, s->terminator ? 0 : expected_rc(s->seq));
		n++;
	}
	return n;
}

static int chan_arm(void *arg)
{
	(void)arg;
	atomic_fetch_add_explicit(&chan.arms, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&chan.armed, 1, memory_order_seq_cst);
	return atomic_load_explicit(&chan.posted, memory_order_seq_cst) != NULL;
}

static void chan_disarm(void *arg)
{
	(void)arg;
	atomic_fetch_sub_explicit(&chan.armed, 1, memory_order_relaxed);
}

static struct {
	unsigned int pollers, launchers, pool, batch, yield_every, hook;
	uint64_t events;
	int64_t timeout_us;
	coffer_handle_t eqh;
	_Atomic uint8_t *seen;
	_Atomic uint64_t polled;
	_Atomic uint64_t dup, bad_error, bad_seq, launch_fail, poll_fail, empty_polls;
	struct sev *terms;
} g;

struct launcher {
	pthread_t tid;
	unsigned int id;
	struct sev *pool;
};

static void *launcher_main(void *arg)
{
	struct launcher *l = arg;
	uint64_t lo = g.events * l->id / g.launchers;
	uint64_t hi = g.events * (l->id + 1) / g.launchers;
	uint64_t seq, n = 0;
	struct sev *s;

	for (seq = lo; seq < hi; seq++, n++) {
		s = &l->pool[n % g.pool];
		/* acquire: pairs with the poller's release store; its reads are done */
		while (atomic_load_explicit(&s->busy, memory_order_acquire))
			sched_yield();
		atomic_store_explicit(&s->busy, 1, memory_order_relaxed);
		s->seq = seq;
		if (coffer__event_launch(&s->ev) != 0) {
			atomic_fetch_add(&g.launch_fail, 1);
			atomic_store_explicit(&s->busy, 0, memory_order_relaxed);
			continue;
		}
		if (g.yield_every && seq % g.yield_every == 0)
			sched_yield();
		finish(s, expected_rc(seq));
	}
	return NULL;
}

struct poller {
	pthread_t tid;
	uint64_t got;
};

static void *poller_main(void *arg)
{
	struct poller *p = arg;
	struct coffer_event **evs = calloc(g.batch, sizeof(*evs));
	unsigned int terms, i;
	struct sev *s;
	int k;

	if (evs == NULL) {
		atomic_fetch_add(&g.poll_fail, 1);
		return NULL;
	}
	for (terms = 0; terms == 0;) {
		k = coffer_eq_poll(g.eqh, 0, g.timeout_us, g.batch, evs);
		if (k < 0) {
			atomic_fetch_add(&g.poll_fail, 1);
			break;
		}
		if (k == 0)
			atomic_fetch_add(&g.empty_polls, 1);
		for (i = 0; i < (unsigned int)k; i++) {
			s = (struct sev *)(void *)evs[i];
			if (s->terminator) {
				/* one terminator ends this poller; pass extras on to the others */
				if (terms++ == 0)
					continue;
				if (coffer__event_launch(&s->ev) != 0)
					atomic_fetch_add(&g.launch_fail, 1);
				else
					finish(s, 0);
				continue;
			}
			if (s->seq >= g.events) {
				atomic_fetch_add(&g.bad_seq, 1);
				continue;
			}
			if (s->ev.ev_error != expected_rc(s->seq))
				atomic_fetch_add(&g.bad_error, 1);
			if (atomic_exchange_explicit(&g.seen[s->seq], 1, memory_order_relaxed))
				atomic_fetch_add(&g.dup, 1);
			p->got++;
			atomic_fetch_add_explicit(&g.polled, 1, memory_order_relaxed);
			/* release: the launcher may reuse the event after this */
			atomic_store_explicit(&s->busy, 0, memory_order_release);
		}
		if (g.yield_every && p->got % g.yield_every == 0)
			sched_yield();
	}
	free(evs);
	return NULL;
}

/*
 * A querier lists the EQ's completed and running events while everything else runs: every
 * pointer it gets must be one of the initialised events (checked against their pools).
 */
static struct {
	pthread_t tid;
	atomic_int stop;
	struct launcher *ls;
	uint64_t queries, listed, foreign;
} qr;

static bool is_ours(const struct coffer_event *ev)
{
	for (unsigned int t = 0; t < g.launchers; t++)
		if ((const void *)ev >= (const void *)qr.ls[t].pool &&
		    (const void *)ev < (const void *)(qr.ls[t].pool + g.pool))
			return true;
	for (unsigned int t = 0; t < g.pollers; t++)
		if (ev == &g.terms[t].ev)
			return true;
	return false;
}

static void *querier_main(void *arg)
{
	struct coffer_event *evs[32];

	(void)arg;
	while (!atomic_load_explicit(&qr.stop, memory_order_relaxed)) {
		int k = coffer_eq_query(g.eqh, COFFER_EQR_ALL, 32, evs);

		if (k < 0 || k > 32) {
			qr.foreign++;
			break;
		}
		for (int i = 0; i < k; i++)
			qr.foreign += !is_ours(evs[i]);
		qr.listed += (uint64_t)k;
		qr.queries++;
		sched_yield();
	}
	return NULL;
}

static void finish(struct sev *s, int rc)
{
	if (g.hook)
		chan_post(s);
	else
		coffer__event_complete(&s->ev, rc);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s [-p pollers] [-l launchers] [-n events] [-k pool] [-b batch]"
		" [-y yield_every] [-t poll_timeout_us] [-h] [-w]\n",
		argv0);
	return 2;
}

/* -w: the event the main thread handed to the completer (NULL: none), and a stop flag. */
static struct {
	_Atomic(struct sev *) handoff;
	atomic_int stop;
} pp;

static void *completer_main(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&pp.stop, memory_order_relaxed)) {
		/* acquire: pairs with the release store of the launched event */
		struct sev *s = atomic_exchange_explicit(&pp.handoff, NULL, memory_order_acquire);

		if (s == NULL) {
			sched_yield();
			continue;
		}
		coffer__event_complete(&s->ev, expected_rc(s->seq));
	}
	return NULL;
}

/* -w: returns 0 when every wait_running poll returned its event, else 1. */
static int ping_pong(void)
{
	struct sev s = {.seq = 0};
	struct coffer_event *out;
	uint64_t zero_polls = 0, wrong = 0, seq;
	pthread_t tid;
	int k, failed = 0;

	if (coffer_event_init(&s.ev, g.eqh, NULL) != 0 ||
	    pthread_create(&tid, NULL, completer_main, NULL) != 0)
		return 1;
	for (seq = 0; seq < g.events && !failed; seq++) {
		s.seq = seq;
		if (coffer__event_launch(&s.ev) != 0) {
			failed = 1;
			break;
		}
		/* release: the completer reads s.seq */
		atomic_store_explicit(&pp.handoff, &s, memory_order_release);
		do {
			k = coffer_eq_poll(g.eqh, 1, g.timeout_us, 1, &out);
			zero_polls += k == 0;
		} while (k == 0 && zero_polls < 1000);
		if (k != 1 || out != &s.ev || s.ev.ev_error != expected_rc(seq))
			wrong++, failed = 1;
	}
	atomic_store(&pp.stop, 1);
	pthread_join(tid, NULL);
	if (coffer_event_fini(&s.ev) != 0)
		failed = 1;
	printf("eq_stress: ping-pong events=%llu wait_running polls that returned 0=%llu "
	       "wrong=%llu %s\n",
	       (unsigned long long)seq, (unsigned long long)zero_polls, (unsigned long long)wrong,
	       failed || zero_polls ? "FAIL" : "ok");
	return failed || zero_polls ? 1 : 0;
}

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "eq_stress: check failed: %s (line %d)\n", #cond,          \
				__LINE__);                                                         \
			failed = 1;                                                                \
		}                                                                                  \
	} while (0)

int main(int argc, char **argv)
{
	struct launcher *ls;
	struct poller *ps;
	uint64_t i, got = 0, missing = 0;
	unsigned int t, j;
	double t0, secs;
	int opt, failed = 0, pingpong = 0;

	g.pollers = 4;
	g.launchers = 4;
	g.events = 1000000;
	g.pool = 64;
	g.batch = 16;
	g.yield_every = 97;
	g.timeout_us = -1;
	while ((opt = getopt(argc, argv, "p:l:n:k:b:y:t:hw")) != -1) {
		switch (opt) {
		case 'p':
			g.pollers = (unsigned int)strtoul(optarg, NULL, 0);
			break;
		case 'l':
			g.launchers = (unsigned int)strtoul(optarg, NULL, 0);
			break;
		case 'n':
			g.events = strtoull(optarg, NULL, 0);
			break;
		case 'k':
			g.pool = (unsigned int)strtoul(optarg, NULL, 0);
			break;
		case 'b':
			g.batch = (unsigned int)strtoul(optarg, NULL, 0);
			break;
		case 'y':
			g.yield_every = (unsigned int)strtoul(optarg, NULL, 0);
			break;
		case 't':
			g.timeout_us = strtoll(optarg, NULL, 0);
			break;
		case 'h':
			g.hook = 1;
			break;
		case 'w':
			pingpong = 1;
			break;
		default:
			return usage(argv[0]);
		}
	}
	if (!g.pollers || !g.launchers || !g.pool || !g.batch || !g.events)
		return usage(argv[0]);

	if (coffer_init() != 0) {
		fprintf(stderr, "eq_stress: coffer_init failed\n");
		return 1;
	}
	if (coffer_eq_create(&g.eqh) != 0) {
		fprintf(stderr, "eq_stress: coffer_eq_create failed\n");
		return 1;
	}
	if (pingpong) {
		failed = ping_pong();
		if (coffer_eq_destroy(g.eqh, 0) != 0 || coffer_fini() != 0)
			failed = 1;
		return failed;
	}
	if (g.hook) {
		struct coffer__eq_progress hook = {
		    .progress = chan_progress, .arm = chan_arm, .disarm = chan_disarm};

		chan.wake_fd = coffer__eq_wake_fd(g.eqh);
		if (chan.wake_fd < 0 || coffer__eq_set_progress(g.eqh, &hook) != 0) {
			fprintf(stderr, "eq_stress: cannot attach the progress hook\n");
			return 1;
		}
	}
	g.seen = calloc(g.events, sizeof(*g.seen));
	ls = calloc(g.launchers, sizeof(*ls));
	ps = calloc(g.pollers, sizeof(*ps));
	g.terms = calloc(g.pollers, sizeof(*g.terms));
	if (!g.seen || !ls || !ps || !g.terms) {
		fprintf(stderr, "eq_stress: out of memory\n");
		return 1;
	}
	for (t = 0; t < g.launchers; t++) {
		ls[t].id = t;
		ls[t].pool = calloc(g.pool, sizeof(*ls[t].pool));
		if (ls[t].pool == NULL)
			return 1;
		for (j = 0; j < g.pool; j++)
			CHECK(coffer_event_init(&ls[t].pool[j].ev, g.eqh, NULL) == 0);
	}
	for (t = 0; t < g.pollers; t++) {
		g.terms[t].terminator = 1;
		CHECK(coffer_event_init(&g.terms[t].ev, g.eqh, NULL) == 0);
	}
	if (failed)
		return 1;

	t0 = now_s();
	qr.ls = ls;
	if (pthread_create(&qr.tid, NULL, querier_main, NULL) != 0)
		return 1;
	for (t = 0; t < g.pollers; t++)
		if (pthread_create(&ps[t].tid, NULL, poller_main, &ps[t]) != 0)
			return 1;
	for (t = 0; t < g.launchers; t++)
		if (pthread_create(&ls[t].tid, NULL, launcher_main, &ls[t]) != 0)
			return 1;
	for (t = 0; t < g.launchers; t++)
		pthread_join(ls[t].tid, NULL);
	/* every event launched; wait until the pollers returned them all, then stop them */
	while (atomic_load(&g.polled) < g.events - atomic_load(&g.launch_fail) &&
	       atomic_load(&g.poll_fail) == 0)
		usleep(1000);
	secs = now_s() - t0;
	for (t = 0; t < g.pollers; t++) {
		CHECK(coffer__event_launch(&g.terms[t].ev) == 0);
		finish(&g.terms[t], 0);
	}
	for (t = 0; t < g.pollers; t++) {
		pthread_join(ps[t].tid, NULL);
		got += ps[t].got;
	}
	atomic_store(&qr.stop, 1);
	pthread_join(qr.tid, NULL);
	CHECK(qr.foreign == 0);
	CHECK(qr.queries > 0);

	for (i = 0; i < g.events; i++)
		missing += !atomic_load(&g.seen[i]);
	CHECK(atomic_load(&g.launch_fail) == 0);
	CHECK(atomic_load(&g.poll_fail) == 0);
	CHECK(atomic_load(&g.dup) == 0);
	CHECK(atomic_load(&g.bad_error) == 0);
	CHECK(atomic_load(&g.bad_seq) == 0);
	CHECK(missing == 0);
	CHECK(got == g.events);
	CHECK(atomic_load(&g.polled) == g.events);
	CHECK(atomic_load(&chan.posted) == NULL);
	CHECK(atomic_load(&chan.armed) == 0);
	if (g.hook) {
		CHECK(coffer__eq_set_progress(g.eqh, NULL) == 0);
		printf("eq_stress: hook progress_calls=%llu arms=%llu doorbells=%llu\n",
		       (unsigned long long)atomic_load(&chan.progress_calls),
		       (unsigned long long)atomic_load(&chan.arms),
		       (unsigned long long)atomic_load(&chan.doorbells));
	}
	CHECK(coffer_eq_query(g.eqh, COFFER_EQR_RUNNING, 0, NULL) == 0);
	CHECK(coffer_eq_query(g.eqh, COFFER_EQR_COMPLETED, 0, NULL) == 0);
	for (t = 0; t < g.launchers; t++) {
		for (j = 0; j < g.pool; j++)
			CHECK(coffer_event_fini(&ls[t].pool[j].ev) == 0);
		free(ls[t].pool);
	}
	for (t = 0; t < g.pollers; t++)
		CHECK(coffer_event_fini(&g.terms[t].ev) == 0);
	CHECK(coffer_eq_destroy(g.eqh, 0) == 0);
	CHECK(coffer_hhash_count(coffer_hhash_global()) == 0);
	CHECK(coffer_fini() == 0);

	printf("eq_stress: events=%llu pollers=%u launchers=%u pool=%u batch=%u secs=%.3f "
	       "mevents_per_s=%.3f empty_polls=%llu dup=%llu missing=%llu bad_error=%llu "
	       "queries=%llu listed=%llu %s\n",
	       (unsigned long long)g.events, g.pollers, g.launchers, g.pool, g.batch, secs,
	       (double)g.events / secs / 1e6, (unsigned long long)atomic_load(&g.empty_polls),
	       (unsigned long long)atomic_load(&g.dup), (unsigned long long)missing,
	       (unsigned long long)atomic_load(&g.bad_error), (unsigned long long)qr.queries,
	       (unsigned long long)qr.listed, failed ? "FAIL" : "ok");
	free(g.seen);
	free(ls);
	free(ps);
	free(g.terms);
	return failed;
}
