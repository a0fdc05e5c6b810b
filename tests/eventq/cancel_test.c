/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/eventq/cancel_test.c - threads cancelled (pthread_cancel(), deferred) at random
 * moments while they poll an EQ and test its events leave nothing behind (rel-client gap 1).
 *
 * coffer calls are not cancellation points (coffer/common.h): a cancel that arrives while a
 * thread sleeps in coffer_eq_poll() or coffer_event_test() is acted on at the thread's next
 * cancellation point after the call returned. Each round here launches events, starts
 * pollers (wait_running, finite and infinite timeouts) and testers (finite and infinite
 * timeouts) that loop over those calls with a pthread_testcancel() between them, cancels
 * each at a random moment, completes the events so that every call returns, joins them and
 * checks: every thread was cancelled (PTHREAD_CANCELED), the EQ's sleeper and waiter
 * counts are back to 0 and its wake list empty, the progress hook was disarmed as often as
 * armed, no fd leaked, every event comes back to READY exactly once (none left in a dead
 * thread's hands), other threads' polls and tests still sleep and wake, and destroy, fini
 * and coffer_fini() succeed. Before the fix a thread cancelled inside ppoll(2) unwound out
 * of coffer__eq_sleep() with both counts raised, its stack-allocated waiter still linked on
 * the EQ's wake list (the next reap wrote through it) and its own eventfd open.
 *
 * Usage: cancel_test [-r rounds] [-s seed]
 */
#include <dirent.h>
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

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <coffer/common.h>
#include <coffer/event.h>
#include <coffer/hash.h>

#include "eventq/eq_impl.h"
#include "eventq/event_internal.h"
#include "../cancel_test.h"
#include "../stress_rng.h"

#define NEV	 8 /* events per round */
#define NPOLL	 3 /* poller threads */
#define NTEST	 3 /* tester threads, each on its own event */
#define NTHREADS (NPOLL + NTEST)

static unsigned int rounds = 300;
static uint64_t seed0 = 0x5eed;

static void sleep_us(long us)
{
	struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000L};

	nanosleep(&ts, NULL);
}

/* A progress hook that never completes anything and counts arm()/disarm(): a thread
 * cancelled between them would leave the store's doorbell armed for good. */
static atomic_long arms, disarms;

static int hook_progress(void *arg)
{
	(void)arg;
	return 0;
}

static int hook_arm(void *arg)
{
	(void)arg;
	atomic_fetch_add_explicit(&arms, 1, memory_order_relaxed);
	return 0;
}

static void hook_disarm(void *arg)
{
	(void)arg;
	atomic_fetch_add_explicit(&disarms, 1, memory_order_relaxed);
}

struct sleeper {
	pthread_t tid;
	coffer_handle_t eqh;
	struct coffer_event *ev; /* testers: their event */
	uint64_t seed;
	int64_t timeout_us; /* < 0: forever; > 0: random up to it */
	/* what the thread saw (read after the join) */
	int bad_rc;	     /* an unexpected return value, else 0 */
	unsigned int reaped; /* events a poller got */
	struct coffer_event *got[NEV];
	bool done;
};

NO_ASAN static void *poller_main(void *arg)
{
	struct sleeper *s = arg;

	rng = s->seed;
	for (;;) {
		int64_t t = s->timeout_us < 0 ? -1 : 1 + (int64_t)(stress_rnd() % s->timeout_us);
		int rc = coffer_eq_poll(s->eqh, 1, t, NEV, s->got);

		if (rc < 0)
			s->bad_rc = rc;
		else
			s->reaped += (unsigned int)rc; /* before any cancellation point */
		pthread_testcancel();
		sched_yield();
	}
	return NULL;
}

NO_ASAN static void *tester_main(void *arg)
{
	struct sleeper *s = arg;

	rng = s->seed;
	for (;;) {
		int64_t t = s->timeout_us < 0 ? -1 : 1 + (int64_t)(stress_rnd() % s->timeout_us);
		int rc = coffer_event_test(s->ev, t, &s->done);

		if (rc < 0)
			s->bad_rc = rc;
		pthread_testcancel();
		sched_yield();
	}
	return NULL;
}

static void check_eq_idle(coffer_handle_t eqh)
{
	struct coffer_eq *eq;

	assert_int_equal(coffer__eq_get(eqh, &eq), 0);
	assert_int_equal(atomic_load(&eq->eq_sleepers), 0);
	assert_int_equal(atomic_load(&eq->eq_waiters), 0);
	pthread_mutex_lock(&eq->eq_wait_lock);
	assert_null(eq->eq_wait_head);
	pthread_mutex_unlock(&eq->eq_wait_lock);
	coffer__eq_put(eq);
}

/* Another thread's sleeping poll and test still wake on a completion after the rounds. */
struct waker {
	pthread_t tid;
	struct coffer_event *ev;
};

static void *waker_main(void *arg)
{
	struct waker *w = arg;

	sleep_us(20 * 1000);
	coffer__event_complete(w->ev, 0);
	return NULL;
}

static void test_cancel_sleepers(void **state)
{
	struct coffer_event evs[NEV];
	struct sleeper sl[NTHREADS];
	struct coffer__eq_progress hook = {
	    .progress = hook_progress, .arm = hook_arm, .disarm = hook_disarm};
	coffer_handle_t eqh;
	int fds0;

	(void)state;
	rng = seed0;
	assert_int_equal(coffer_init(), 0);
	assert_int_equal(coffer_eq_create(&eqh), 0);
	assert_int_equal(coffer__eq_set_progress(eqh, &hook), 0);
	for (int i = 0; i < NEV; i++)
		assert_int_equal(coffer_event_init(&evs[i], eqh, NULL), 0);
	fds0 = count_fds();

	for (unsigned int r = 0; r < rounds; r++) {
		unsigned int reaped = 0;

		for (int i = 0; i < NEV; i++)
			assert_int_equal(coffer__event_launch(&evs[i]), 0);
		for (int i = 0; i < NTHREADS; i++) {
			struct sleeper *s = &sl[i];

			memset(s, 0, sizeof(*s));
			s->eqh = eqh;
			s->seed = stress_rnd() | 1;
			/* one of each kind sleeps without a timeout */
			s->timeout_us = (i == 0 || i == NPOLL) ? -1 : 2000;
			s->ev = i >= NPOLL ? &evs[i - NPOLL] : NULL;
			assert_int_equal(
			    pthread_create(&s->tid, NULL, i < NPOLL ? poller_main : tester_main, s),
			    0);
		}
		/* Cancel each at a random moment: before it started, inside a call (mostly
		 * asleep in ppoll(), but also ringing, draining, listing itself), between calls.
		 */
		for (int i = 0; i < NTHREADS; i++) {
			sleep_us((long)(stress_rnd() % 1500));
			assert_int_equal(pthread_cancel(sl[i].tid), 0);
		}
		/* Complete everything: every call returns (a poll with wait_running once nothing
		 * runs, a test once its event is done) and its thread meets pthread_testcancel().
		 * Half the rounds complete before all cancels landed. */
		for (int i = 0; i < NEV; i++)
			coffer__event_complete(&evs[i], 0);
		for (int i = 0; i < NTHREADS; i++) {
			void *ret = NULL;

			assert_int_equal(pthread_join(sl[i].tid, &ret), 0);
			assert_ptr_equal(ret, PTHREAD_CANCELED);
			assert_int_equal(sl[i].bad_rc, 0);
			reaped += sl[i].reaped;
		}
		check_eq_idle(eqh);
		assert_int_equal(atomic_load(&arms), atomic_load(&disarms));
		assert_int_equal(count_fds(), fds0);
		/* Every event is back, exactly once: reaped by a poller (counted), tested and
		 * reaped by a tester (READY), or still queued (this poll takes it). */
		for (;;) {
			struct coffer_event *got[NEV];
			int k = coffer_eq_poll(eqh, 0, 0, NEV, got);

			assert_true(k >= 0);
			if (k == 0)
				break;
			reaped += (unsigned int)k;
		}
		assert_true(reaped <= NEV);
		for (int i = 0; i < NEV; i++) {
			bool done = false;

			assert_int_equal(coffer_event_test(&evs[i], 0, &done), 0);
			assert_true(done);
		}
		assert_int_equal(coffer_eq_query(eqh, COFFER_EQR_ALL, 0, NULL), 0);
	}

	/* The EQ still works for the living: a sleeping poll and a sleeping test wake. */
	{
		struct waker w = {.ev = &evs[0]};
		struct coffer_event *got[1];
		bool done = false;

		assert_int_equal(coffer__event_launch(&evs[0]), 0);
		assert_int_equal(pthread_create(&w.tid, NULL, waker_main, &w), 0);
		assert_int_equal(coffer_eq_poll(eqh, 0, -1, 1, got), 1);
		assert_ptr_equal(got[0], &evs[0]);
		assert_int_equal(pthread_join(w.tid, NULL), 0);

		assert_int_equal(coffer__event_launch(&evs[1]), 0);
		w.ev = &evs[1];
		assert_int_equal(pthread_create(&w.tid, NULL, waker_main, &w), 0);
		assert_int_equal(coffer_event_test(&evs[1], -1, &done), 0);
		assert_true(done);
		assert_int_equal(pthread_join(w.tid, NULL), 0);
	}
	check_eq_idle(eqh);
	for (int i = 0; i < NEV; i++)
		assert_int_equal(coffer_event_fini(&evs[i]), 0);
	assert_int_equal(coffer_eq_destroy(eqh, 0), 0);
	assert_int_equal(count_fds(), fds0);
	assert_int_equal(coffer_fini(), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cancel_sleepers),
	};

	if (cancel_test_args(argc, argv, &rounds, &seed0) != 0)
		return 2;
	printf("cancel_test: %u rounds, seed %llu\n", rounds, (unsigned long long)seed0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
