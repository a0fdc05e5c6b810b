/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/eventq/test_eq.c - unit tests of event queues and events (issue 4): states, errors,
 * timeouts and sleeping, parent/child and barrier, test(), query, the progress hook, destroy
 * (plain and forced), and exactly-once delivery to concurrent pollers.
 *
 * Helper threads never assert (cmocka): they record what they saw, the main thread checks.
 * Every test ends with the EQ's handles gone from the handle hash; ASan checks the memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <coffer/common.h>
#include <coffer/event.h>
#include <coffer/hash.h>

#include "eventq/event_internal.h"

/* TSan kills a child that starts threads after a multi-threaded fork unless told otherwise;
 * the fork tests' children must (liburcu's call_rcu worker is restarted in them). */
const char *__tsan_default_options(void);
const char *__tsan_default_options(void)
{
	return "die_after_fork=0";
}

/* ---- helpers ------------------------------------------------------------------------------ */

static uint64_t handles_at_setup;

static int setup(void **state)
{
	(void)state;
	if (coffer_init() != 0)
		return -1;
	handles_at_setup = coffer_hhash_count(coffer_hhash_global());
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	/* every EQ a test created is destroyed */
	if (coffer_hhash_count(coffer_hhash_global()) != handles_at_setup)
		return -1;
	return coffer_fini() == 0 ? 0 : -1;
}

static int64_t now_us(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static coffer_handle_t new_eq(void)
{
	coffer_handle_t eqh = COFFER_HANDLE_NULL;

	assert_int_equal(coffer_eq_create(&eqh), 0);
	return eqh;
}

static void query_counts(coffer_handle_t eqh, int running, int completed)
{
	assert_int_equal(coffer_eq_query(eqh, COFFER_EQR_RUNNING, 0, NULL), running);
	assert_int_equal(coffer_eq_query(eqh, COFFER_EQR_COMPLETED, 0, NULL), completed);
	assert_int_equal(coffer_eq_query(eqh, COFFER_EQR_ALL, 0, NULL), running + completed);
}

/* Completes events from another thread after a delay. */
struct delayed {
	pthread_t tid;
	struct coffer_event *evs[8];
	int nev;
	int rc;
	int delay_ms;
};

static void *delayed_main(void *arg)
{
	struct delayed *d = arg;

	sleep_ms(d->delay_ms);
	for (int i = 0; i < d->nev; i++)
		coffer__event_complete(d->evs[i], d->rc);
	return NULL;
}

static void delayed_start(struct delayed *d, int delay_ms, int rc, int nev,
			  struct coffer_event **evs)
{
	d->delay_ms = delay_ms;
	d->rc = rc;
	d->nev = nev;
	for (int i = 0; i < nev; i++)
		d->evs[i] = evs[i];
	assert_int_equal(pthread_create(&d->tid, NULL, delayed_main, d), 0);
}

/* ---- tests -------------------------------------------------------------------------------- */

/* Runs first, without setup: nothing works before coffer_init(). */
static void test_uninitialised(void **state)
{
	coffer_handle_t eqh = {.cookie = (1ull << COFFER_HTYPE_BITS) | COFFER_HTYPE_EQ};
	struct coffer_event ev, *evs[1];

	(void)state;
	memset(&ev, 0, sizeof(ev));
	assert_null(coffer_hhash_global());
	assert_int_equal(coffer_eq_create(&eqh), -EINVAL);
	assert_int_equal(coffer_eq_poll(eqh, 0, 0, 1, evs), -EINVAL);
	assert_int_equal(coffer_eq_destroy(eqh, 0), -EINVAL);
	assert_int_equal(coffer_event_init(&ev, eqh, NULL), -EINVAL);
}

static void test_create_destroy_handles(void **state)
{
	coffer_handle_t eqh, bad;
	struct coffer_event *evs[2];

	(void)state;
	assert_int_equal(coffer_eq_create(NULL), -EINVAL);
	eqh = new_eq();
	assert_int_not_equal(eqh.cookie, 0);
	assert_int_equal(eqh.cookie & ((1u << COFFER_HTYPE_BITS) - 1), COFFER_HTYPE_EQ);
	query_counts(eqh, 0, 0);

	/* null and wrong-type handles: -EINVAL; never issued: -ENOENT */
	assert_int_equal(coffer_eq_poll(COFFER_HANDLE_NULL, 0, 0, 2, evs), -EINVAL);
	bad.cookie = (eqh.cookie & ~(uint64_t)0xf) | COFFER_HTYPE_OBJ;
	assert_int_equal(coffer_eq_poll(bad, 0, 0, 2, evs), -EINVAL);
	assert_int_equal(coffer_eq_destroy(bad, 0), -EINVAL);
	bad.cookie = ((uint64_t)1 << 58) | COFFER_HTYPE_EQ;
	assert_int_equal(coffer_eq_poll(bad, 0, 0, 2, evs), -ENOENT);
	assert_int_equal(coffer_eq_destroy(bad, 0), -ENOENT);
	assert_int_equal(coffer_eq_query(bad, COFFER_EQR_ALL, 0, NULL), -ENOENT);
	assert_int_equal(coffer_eq_destroy(eqh, 0x80), -EINVAL);

	assert_int_equal(coffer_eq_destroy(eqh, 0), 0);
	/* destroyed: every use says so, nothing crashes */
	assert_int_equal(coffer_eq_destroy(eqh, 0), -ENOENT);
	assert_int_equal(coffer_eq_destroy(eqh, COFFER_EQ_FORCE), -ENOENT);
	assert_int_equal(coffer_eq_poll(eqh, 0, 0, 2, evs), -ENOENT);
	assert_int_equal(coffer_eq_poll(eqh, 1, -1, 2, evs), -ENOENT);
	assert_int_equal(coffer_eq_query(eqh, COFFER_EQR_ALL, 0, NULL), -ENOENT);
	assert_int_equal(coffer__eq_wake_fd(eqh), -ENOENT);
	assert_int_equal(coffer__eq_set_progress(eqh, NULL), -ENOENT);
}

static void test_launch_complete_poll(void **state)
{
	coffer_handle_t eqh = new_eq();
	struct coffer_event ev, *evs[4];

	(void)state;
	memset(&ev, 0, sizeof(ev));
	assert_int_equal(coffer_event_init(&ev, eqh, NULL), 0);
	query_counts(eqh, 0, 0); /* init without launch touches no counter */

	assert_int_equal(coffer__event_launch(&ev), 0);
	query_counts(eqh, 1, 0);
	coffer__event_complete(&ev, -EIO);
	query_counts(eqh, 0, 1);
	assert_int_equal(coffer_eq_poll(eqh, 0, 0, 4, evs), 1);
	assert_ptr_equal(evs[0], &ev);
	assert_int_equal(ev.ev_error, -EIO);
	query_counts(eqh, 0, 0);
	assert_int_equal(coffer_eq_poll(eqh, 0, 0, 4, evs), 0); /* returned once */

	/* the error does not leak into the next use */
	assert_int_equal(coffer__event_launch(&ev), 0);
	assert_int_equal(ev.ev_error, 0);
	coffer__event_complete(&ev, 0);
	assert_int_equal(coffer_eq_poll(eqh, 0, -1, 4, evs), 1);
	assert_ptr_equal(evs[0], &ev);
	assert_int_equal(ev.ev_error, 0);

	/* init/fini without launch leaves counters untouched */
	assert_int_equal(coffer_event_fini(&ev), 0);
	assert_int_equal(coffer_event_init(&ev, eqh, NULL), 0);
	assert_int_equal(coffer_event_fini(&ev), 0);
	query_counts(eqh, 0, 0);
	assert_int_equal(coffer_eq_destroy(eqh, 0), 0);
}

static void test_fifo_order_and_batches(void **state)
{
	coffer_handle_t eqh = new_eq();
	struct coffer_event ev[10], *evs[10];
	int i;

	(void)state;
	for (i = 0; i < 10; i++) {
		assert_int_equal(coffer_event_init(&ev[i], eqh, NULL), 0);
		assert_int_equal(coffer__event_launch(&ev[i]), 0);
	}
	for (i = 0; i < 10; i++)
		coffer__event_complete(&ev[i], -i);
	assert_int_equal(coffer_eq_poll(eqh, 0, 0, 3, evs), 3);
	for (i = 0; i < 3; i++)
		assert_ptr_equal(evs[i], &ev[i]);
	assert_int_equal(coffer_eq_poll(eqh, 0, 0, 10, evs), 7);
	for (i = 0; i < 7; i++) {
		assert_ptr_equal(evs[i], &ev[i + 3]);
		assert_int_equal(evs[i]->ev_error, -(i + 3));
	}
	for (i = 0; i < 10; i++)
		assert_int_equal(coffer_event_fini(&ev[i]), 0);
	assert_int_equal(coffer_eq_destroy(eqh, 0), 0);
}

static void test_state_errors(void **state)
{
	coffer_handle_t eqh = new_eq();
	struct coffer_event ev, raw, *evs[4];
	bool done;

	(void)state;
	/* never initialised (zeroed memory): -EINVAL, never a crash */
	memset(&raw, 0, sizeof(raw));
	assert_int_equal(coffer__event_launch(&raw), -EINVAL);
	assert_int_equal(coffer_event_fini(&raw), -EINVAL);
	assert_int_equal(coffer_event_test(&raw, 0, &done), -EINVAL);
	assert_int_equal(coffer_event_parent_barrier(&raw), -EINVAL);
	coffer__event_complete(&raw, -EIO); /* ignored */
	memset(&raw, 0xa5, sizeof(raw));    /* garbage */
	assert_int_equal(coffer__event_launch(&raw), -EINVAL);
	assert_int_equal(coffer_event_fini(&raw), -EINVAL);
	assert_int_equal(coffer_event_init(NULL, eqh, NULL), -EINVAL);
	assert_int_equal(coffer_event_init(&raw, COFFER_HANDLE_NULL, NULL), -EINVAL);

	assert_int_equal(coffer_event_init(&ev, eqh, NULL), 0);
	assert_int_equal(coffer_event_test(&ev, 0, NULL), -EINVAL);
	coffer__event_complete(&ev, -EIO); /* READY: ignored */
	query_counts(eqh, 0, 0);
	assert_int_equal(coffer__event_launch(&ev), 0);
	assert_int_equal(coffer__event_launch(&ev), -EBUSY);
	assert_int_equal(coffer_event_fini(&ev), -EBUSY);
	assert_int_equal(coffer_event_init(&ev, eqh, NULL), -EBUSY);
	query_counts(eqh, 1, 0);
	coffer__event_complete(&ev, -EIO);
	coffer__event_complete(&ev, -ENOSPC); /* double completion: ignored */
	query_counts(eqh, 0, 1);
	assert_int_equal(coffer__event_launch(&ev), -EBUSY); /* COMPLETED, not reaped */
	assert_int_equal(coffer_eq_poll(eqh, 0, 0, 4, evs), 1);
	assert_int_equal(ev.ev_error, -EIO);
	assert_int_equal(coffer_eq_poll(eqh, 0, 0, 4, evs), 0);

	/* re-initialising an idle event rebinds it and releases the old EQ */
	coffer_handle_t eq2 = new_eq();
	assert_int_equal(coffer_event_init(&ev, eq2, NULL), 0);
	assert_int_equal(coffer_eq_destroy(eqh, 0), 0);
	assert_int_equal(coffer__event_launch(&ev), 0);
	coffer__event_complete(&ev, 0);
	assert_int_equal(coffer_eq_poll(eq2, 0, 0, 4, evs), 1);
	assert_int_equal(coffer_event_fini(&ev), 0);
	assert_int_equal(coffer_event_fini(&ev), -EINVAL); /* fini'd */
	assert_int_equal(coffer_eq_destroy(eq2, 0), 0);
}

static void test_poll_args_and_timeouts(void **state)
{
	coffer_handle_t eqh = new_eq();
	struct coffer_event ev, *evs[4];
	int64_t t0, dt;

	(void)state;
	assert_int_equal(coffer_eq_poll(eqh, 0, 0, 0, evs), -EINVAL);
	assert_int_equal(coffer_eq_poll(eqh, 0, 0, 4, NULL), -EINVAL);

	t0 = now_us(CLOCK_MONOTONIC);
	assert_int_equal(coffer_eq_poll(eqh, 0, 0, 4, evs), 0); /* no wait */
	/* wait_running with nothing running returns at once, even with no timeout */
	assert_int_equal(coffer_eq_poll(eqh, 1, -1, 4, evs), 0);
	dt = now_us(CLOCK_MONOTONIC) - t0;
	assert_true(dt < 1000000);

	t0 = now_us(CLOCK_MONOTONIC);
	assert_int_equal(coffer_eq_poll(eqh, 0, 30000, 4, evs), 0);
	dt = now_us(CLOCK_MONOTONIC) - t0;
	assert_true(dt >= 30000);

	/* wait_running with a running event waits for its timeout */
	assert_int_equal(coffer_event_init(&ev, eqh, NULL), 0);
	assert_int_equal(coffer__event_launch(&ev), 0);
	t0 = now_us(CLOCK_MONOTONIC);
	assert_int_equal(coffer_eq_poll(eqh, 1, 20000, 4, evs), 0);
	dt = now_us(CLOCK_MONOTONIC) - t0;
	assert_true(dt >= 20000);
	coffer__event_complete(&ev, 0);
	assert_int_equal(coffer_eq_poll(eqh, 1, 20000, 4, evs), 1);
	assert_int_equal(coffer_event_fini(&ev), 0);
	assert_int_equal(coffer_eq_destroy(eqh, 0), 0);
}

/* A poll with a timeout sleeps: its CPU time is a small fraction of its wall time. */
static void test_poll_sleeps(void **state)
{
	coffer_handle_t eqh = new_eq();
	struct coffer_event ev, *evs[1];
	int64_t wall, cpu;

	(void)state;
	/* one event running, so wait_running would not return early either */
	assert_int_equal(coffer_event_init(&ev, eqh, NULL), 0);
	assert_int_equal(coffer__event_launch(&ev), 0);
	cpu = now_us(CLOCK_THREAD_CPUTIME_ID);
	wall = now_us(CLOCK_MONOTONIC);
	assert_int_equal(coffer_eq_poll(eqh, 1, 200000, 1, evs), 0);
	wall = now_us(CLOCK_MONOTONIC) - wall;
	cpu = now_us(CLOCK_THREAD_CPUTIME_ID) - cpu;
	print_message("poll(200 ms): wall %lld us, cpu %lld us\n", (long long)wall, (long long)cpu);
	assert_true(wall >= 200000);
	assert_true(cpu * 20 < wall);

	/* event_test with a timeout sleeps too */
	bool done = true;
	cpu = now_us(CLOCK_THREAD_CPUTIME_ID);
	wall = now_us(CLOCK_MONOTONIC);
	assert_int_equal(coffer_event_test(&ev, 100000, &done), 0);
	wall = now_us(CLOCK_MONOTONIC) - wall;
	cpu = now_us(CLOCK_THREAD_CPUTIME_ID) - cpu;
	assert_false(done);
	assert_true(wall >= 100000);
	assert_true(cpu * 20 < wall);

	coffer__event_complete(&ev, 0);
	assert_int_equal(coffer_eq_poll(eqh, 0, 0, 1, evs), 1);
	assert_int_equal(coffer_event_fini(&ev), 0);
	assert_int_equal(coffer_eq_destroy(eqh, 0), 0);
}

/* A poller sleeping without timeout is woken by a completion from another thread. */
static void test_wakeup_from_other_thread(void **state)
{
	coffer_handle_t eqh = new_eq();
	struct coffer_event ev, *evp = &ev, *evs[2];
	struct delayed d;
	int64_t t0, cpu0, dt, cpu;

	(void)state;
	assert_int_equal(coffer_event_init(&ev, eqh, NULL), 0);
	assert_int_equal(coffer__event_launch(&ev), 0);
	delayed_start(&d, 100, -ETIMEDOUT, 1, &evp);
	t0 = now_us(CLOCK_MONOTONIC);
	cpu0 = now_us(CLOCK_THREAD_CPUTIME_ID);
	assert_int_equal(coffer_eq_poll(eqh, 0, -1, 2, evs), 1);
	dt = now_us(CLOCK_MONOTONIC) - t0;
	cpu = now_us(CLOCK_THREAD_CPUTIME_ID) - cpu0;
	pthread_join(d.tid, NULL);
	assert_ptr_equal(evs[0], &ev);
	assert_int_equal(ev.ev_error, -ETIMEDOUT);
	assert_true(dt >= 90000 && dt < 10000000);
	assert_true(cpu * 10 < dt); /* it slept */

	/* event_test without timeout, same */
	assert_int_equal(coffer__event_launch(&ev), 0);
	delayed_start(&d, 50, 0, 1, &evp);
	bool done = false;
	assert_int_equal(coffer_event_test(&ev, -1, &done), 0);
	pthread_join(d.tid, NULL);
	assert_true(done);
	assert_int_equal(ev.ev_error, 0);

	assert_int_equal(coffer_event_fini(&ev), 0);
	assert_int_equal(coffer_eq_destroy(eqh, 0), 0);
}

static void test_destroy_busy(void **state)
{
	coffer_handle_t eqh = new_eq();
	struct coffer_event ev, *evs[2];

	(void)state;
	assert_int_equal(coffer_event_init(&ev, eqh, NULL), 0);
	assert_int_equal(coffer_eq_destroy(eqh, 0), 0);	      /* READY events do not hold it */
	assert_int_equal(coffer__event_launch(&ev), -ENOENT); /* launched into a destroyed EQ */
	coffer__event_complete(&ev, -EIO);		      /* no callback afterwards */
	assert_int_equal(coffer_eq_poll(eqh, 0, 0, 2, evs), -ENOENT);
	assert_int_equal(coffer_event_fini(&ev), 0);
	assert_int_equal(coffer_event_init(&ev, eqh, NULL), -ENOENT);

	eqh = new_eq();
	assert_int_equal(coffer_event_init(&ev, eqh, NULL), 0);
	assert_int_equal(coffer__event_launch(&ev), 0);
	assert_int_equal(coffer_eq_destroy(eqh, 0), -EBUSY); /* running */
	coffer__event_complete(&ev, 0);
	assert_int_equal(coffer_eq_destroy(eqh, 0), -EBUSY); /* completed, not reaped */
	query_counts(eqh, 0, 1);
	assert_int_equal(coffer_eq_poll(eqh, 0, 0, 2, evs), 1);
	assert_int_equal(coffer_eq_destroy(eqh, 0), 0);
	assert_int_equal(coffer_event_fini(&ev), 0);
}

static void test_destroy_force(void **state)
{
	coffer_handle_t eqh = new_eq();
	struct coffer_event ev[3], *evp[2] = {&ev[0], &ev[1]};
	struct delayed d;
	bool done = false;
	int64_t t0;
	int i;

	(void)state;
	for (i = 0; i < 3; i++) {
		assert_int_equal(coffer_event_init(&ev[i], eqh, NULL), 0);
		assert_int_equal(coffer__event_launch(&ev[i]), 0);
	}
	coffer__event_complete(&ev[2], -EIO); /* completed, never reaped: discarded */
	delayed_start(&d, 100, -ECANCELED, 2, evp);
	t0 = now_us(CLOCK_MONOTONIC);
	assert_int_equal(coffer_eq_destroy(eqh, COFFER_EQ_FORCE), 0); /* drains */
	assert_true(now_us(CLOCK_MONOTONIC) - t0 >= 90000);
	pthread_join(d.tid, NULL);
	for (i = 0; i < 3; i++) {
		/* every event is READY again, with its result */
		assert_int_equal(coffer_event_test(&ev[i], 0, &done), 0);
		assert_true(done);
		assert_int_equal(ev[i].ev_error, i == 2 ? -EIO : -ECANCELED);
		assert_int_equal(coffer__event_launch(&ev[i]), -ENOENT);
		assert_int_equal(coffer_event_fini(&ev[i]), 0);
	}
	assert_int_equal(coffer_eq_destroy(eqh, COFFER_EQ_FORCE), -ENOENT);
}

/* A poller sleeping on an EQ that another thread destroys wakes and gets -ENOENT. */
struct sleeper {
	pthread_t tid;
	coffer_handle_t eqh;
	int rc;
};

static void *sleeper_main(void *arg)
{
	struct sleeper *s = arg;
	struct coffer_event *evs[1];

	s->rc = coffer_eq_poll(s->eqh, 0, -1, 1, evs);
	return NULL;
}

static void test_destroy_wakes_pollers(void **state)
{
	struct sleeper s[2];
	coffer_handle_t eqh = new_eq();
	int i;

	(void)state;
	for (i = 0; i < 2; i++) {
		s[i].eqh = eqh;
		s[i].rc = 1;
		assert_int_equal(pthread_create(&s[i].tid, NULL, sleeper_main, &s[i]), 0);
	}
	sleep_ms(50);
	assert_int_equal(coffer_eq_destroy(eqh, 0), 0);
	for (i = 0; i < 2; i++) {
		pthread_join(s[i].tid, NULL);
		assert_int_equal(s[i].rc, -ENOENT);
	}
}

/*
 * The last coffer_fini() with EQs still alive (a shutdown while threads poll): pollers that
 * sleep with no timeout on such an EQ return -ENOENT, as they do when their EQ is destroyed.
 * Nothing could wake them before (user18's ckpt example hung there): fini released the EQ's
 * handle without waking anyone, and with the runtime gone no call could reach the EQ again
 * (coffer_eq_destroy() answers -EINVAL). Its events can still be finalised, and no longer
 * launched.
 */
static void test_fini_wakes_sleeping_pollers(void **state)
{
	struct sleeper s[2];
	struct coffer_event ev, *got;
	struct timespec until;
	coffer_handle_t eqh;
	int i;

	(void)state;
	assert_int_equal(coffer_init(), 0);
	eqh = new_eq();
	assert_int_equal(coffer_event_init(&ev, eqh, NULL), 0);
	for (i = 0; i < 2; i++) {
		s[i].eqh = eqh;
		s[i].rc = 1;
		assert_int_equal(pthread_create(&s[i].tid, NULL, sleeper_main, &s[i]), 0);
	}
	sleep_ms(50); /* both asleep in ppoll() (a late one finds no runtime: -EINVAL) */
	assert_int_equal(coffer_fini(), 0);
	assert_null(coffer_hhash_global());
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 20; /* a poller left asleep fails the test instead of hanging it */
	for (i = 0; i < 2; i++) {
		assert_int_equal(pthread_timedjoin_np(s[i].tid, NULL, &until), 0);
		assert_true(s[i].rc == -ENOENT || s[i].rc == -EINVAL);
	}
	assert_int_equal(coffer__event_launch(&ev), -ENOENT);
	/* the closed EQ's handle: no runtime, then another runtime that never knew it */
	assert_int_equal(coffer_eq_poll(eqh, 0, 0, 1, &got), -EINVAL);
	assert_int_equal(coffer_init(), 0);
	assert_int_equal(coffer_eq_poll(eqh, 0, 0, 1, &got), -ENOENT);
	assert_int_equal(coffer_fini(), 0);
	assert_int_equal(coffer_event_fini(&ev), 0);
}

static void test_query(void **state)
{
	coffer_handle_t eqh = new_eq();
	struct coffer_event ev[4], *evs[4];
	int i;

	(void)state;
	assert_int_equal(coffer_eq_query(eqh, 0, 0, NULL), -EINVAL);
	assert_int_equal(coffer_eq_query(eqh, 0x10, 0, NULL), -EINVAL);
	for (i = 0; i < 4; i++) {
		assert_int_equal(coffer_event_init(&ev[i], eqh, NULL), 0);
		assert_int_equal(coffer__event_launch(&ev[i]), 0);
	}
	query_counts(eqh, 4, 0);
	coffer__event_complete(&ev[2], 0);
	coffer__event_complete(&ev[0], 0);
	query_counts(eqh, 2, 2);
	/* running ones, newest initialised first; the completed ones are not among them */
	assert_int_equal(coffer_eq_query(eqh, COFFER_EQR_RUNNING, 4, evs), 2);
	assert_ptr_equal(evs[0], &ev[3]);
	assert_ptr_equal(evs[1], &ev[1]);
	assert_int_equal(coffer_eq_query(eqh, COFFER_EQR_RUNNING, 1, evs), 1);
	assert_ptr_equal(evs[0], &ev[3]);
	/* both: completed (oldest first), then running */
	assert_int_equal(coffer_eq_query(eqh, COFFER_EQR_ALL, 4, evs), 4);
	assert_ptr_equal(evs[0], &ev[2]);
	assert_ptr_equal(evs[1], &ev[0]);
	assert_ptr_equal(evs[2], &ev[3]);
	assert_ptr_equal(evs[3], &ev[1]);
	assert_int_equal(coffer_eq_query(eqh, COFFER_EQR_ALL, 3, evs), 3);
	assert_ptr_equal(evs[2], &ev[3]);
	assert_int_equal(coffer_eq_query(eqh, COFFER_EQR_COMPLETED, 4, evs), 2);
	assert_ptr_equal(evs[0], &ev[2]);
	assert_ptr_equal(evs[1], &ev[0]);
	assert_int_equal(coffer_eq_query(eqh, COFFER_EQR_COMPLETED, 1, evs), 1);
	query_counts(eqh, 2, 2); /* query reaps nothing */
	assert_int_equal(coffer_eq_poll(eqh, 0, 0, 4, evs), 2);
	assert_ptr_equal(evs[0], &ev[2]);
	assert_ptr_equal(evs[1], &ev[0]);
	coffer__event_complete(&ev[1], 0);
	coffer__event_complete(&ev[3], 0);
	assert_int_equal(coffer_eq_poll(eqh, 0, 0, 4, evs), 2);
	query_counts(eqh, 0, 0);
	assert_int_equal(coffer_eq_query(eqh, COFFER_EQR_ALL, 4, evs), 0);
	/* a finalised event leaves the registry; a re-initialised one is listed once */
	assert_int_equal(coffer_event_fini(&ev[3]), 0);
	assert_int_equal(coffer_event_init(&ev[1], eqh, NULL), 0);
	assert_int_equal(coffer__event_launch(&ev[1]), 0);
	assert_int_equal(coffer__event_launch(&ev[2]), 0);
	assert_int_equal(coffer_eq_query(eqh, COFFER_EQR_RUNNING, 4, evs), 2);
	assert_ptr_equal(evs[0], &ev[1]);
	assert_ptr_equal(evs[1], &ev[2]);
	coffer__event_complete(&ev[1], 0);
	coffer__event_complete(&ev[2], 0);
	assert_int_equal(coffer_eq_poll(eqh, 0, 0, 4, evs), 2);
	for (i = 0; i < 3; i++)
		assert_int_equal(coffer_event_fini(&ev[i]), 0);
	assert_int_equal(coffer_eq_destroy(eqh, 0), 0);
}

static void test_parent_children(void **state)
{
	coffer_handle_t eqh = new_eq(), eq2 = new_eq();
	struct coffer_event p, c[3], nest, *evs[4];
	bool done;
	int i;

	(void)state;
	assert_int_equal(coffer_event_init(&p, eqh, NULL), 0);
	for (i = 0; i < 3; i++)
		assert_int_equal(coffer_event_init(&c[i], COFFER_HANDLE_NULL, &p), 0);
	assert_int_equal(coffer_event_init(&nest, eqh, &c[0]), -EINVAL); /* no nesting */
	assert_int_equal(coffer_event_init(&nest, eq2, &p), -EINVAL);	 /* other EQ */
	assert_int_equal(coffer_event_init(&p, eqh, &p), -EINVAL);
	assert_int_equal(coffer_event_test(&c[0], 0, &done), -EINVAL); /* reaped with parent */

	assert_int_equal(coffer__event_launch(&p), -EINVAL); /* children first */
	for (i = 0; i < 3; i++)
		assert_int_equal(coffer__event_launch(&c[i]), 0);
	query_counts(eqh, 0, 0); /* children do not count on the EQ */
	assert_int_equal(coffer__event_launch(&p), 0);
	query_counts(eqh, 1, 0);
	assert_int_equal(coffer_event_init(&nest, eqh, &p), -EBUSY); /* parent in flight */
	assert_int_equal(coffer_event_fini(&c[1]), -EBUSY);
	assert_int_equal(coffer_event_fini(&p), -EBUSY);

	coffer__event_complete(&c[0], 0);
	coffer__event_complete(&p, 0); /* own operation done, children pending */
	assert_int_equal(coffer_eq_poll(eqh, 0, 0, 4, evs), 0);
	query_counts(eqh, 1, 0);
	coffer__event_complete(&c[1], -EIO);
	assert_int_equal(coffer_eq_poll(eqh, 0, 0, 4, evs), 0);
	coffer__event_complete(&c[2], -ENOSPC);
	assert_int_equal(coffer_eq_poll(eqh, 0, 0, 4, evs), 1);
	assert_ptr_equal(evs[0], &p);
	assert_int_equal(p.ev_error, -EIO); /* first error */
	assert_int_equal(c[0].ev_error, 0);
	assert_int_equal(c[1].ev_error, -EIO);
	assert_int_equal(c[2].ev_error, -ENOSPC);

	/* second round: children are READY again; no error leaks */
	for (i = 0; i < 3; i++)
		assert_int_equal(coffer__event_launch(&c[i]), 0);
	for (i = 0; i < 3; i++)
		coffer__event_complete(&c[i], 0); /* children may finish before the parent runs */
	assert_int_equal(coffer_eq_poll(eqh, 0, 0, 4, evs), 0);
	assert_int_equal(coffer__event_launch(&p), 0);
	assert_int_equal(coffer_event_test(&p, 0, &done), 0);
	assert_false(done);
	coffer__event_complete(&p, 0);
	assert_int_equal(coffer_event_test(&p, 0, &done), 0);
	assert_true(done);
	assert_int_equal(p.ev_error, 0);

	/* the parent's own error counts too */
	for (i = 0; i < 3; i++)
		assert_int_equal(coffer__event_launch(&c[i]), 0);
	assert_int_equal(coffer__event_launch(&p), 0);
	coffer__event_complete(&p, -EPROTO);
	for (i = 0; i < 3; i++)
		coffer__event_complete(&c[i], 0);
	assert_int_equal(coffer_eq_poll(eqh, 0, -1, 4, evs), 1);
	assert_int_equal(p.ev_error, -EPROTO);

	/* a child leaves; fini of the parent takes the rest */
	assert_int_equal(coffer_event_fini(&c[2]), 0);
	assert_int_equal(coffer_event_fini(&p), 0);
	assert_int_equal(coffer_event_fini(&c[0]), -EINVAL);
	assert_int_equal(coffer_eq_destroy(eqh, 0), 0);
	assert_int_equal(coffer_eq_destroy(eq2, 0), 0);
}

static void test_barrier(void **state)
{
	coffer_handle_t eqh = new_eq();
	struct coffer_event p, lone, c[2], *evs[4];
	int i;

	(void)state;
	assert_int_equal(coffer_event_init(&lone, eqh, NULL), 0);
	assert_int_equal(coffer_event_parent_barrier(&lone), -EINVAL); /* no children */
	assert_int_equal(coffer_event_init(&p, eqh, NULL), 0);
	for (i = 0; i < 2; i++)
		assert_int_equal(coffer_event_init(&c[i], eqh, &p), 0);
	assert_int_equal(coffer_event_parent_barrier(&c[0]), -EINVAL); /* a child */
	assert_int_equal(coffer__event_launch(&c[0]), 0);
	assert_int_equal(coffer_event_parent_barrier(&p), -EINVAL); /* c[1] not launched */
	assert_int_equal(coffer__event_launch(&c[1]), 0);
	assert_int_equal(coffer_event_parent_barrier(&p), 0);
	assert_int_equal(coffer_event_parent_barrier(&p), -EBUSY);
	query_counts(eqh, 1, 0);
	coffer__event_complete(&c[1], 0);
	assert_int_equal(coffer_eq_poll(eqh, 0, 0, 4, evs), 0);
	coffer__event_complete(&c[0], -EIO);
	assert_int_equal(coffer_eq_poll(eqh, 0, 0, 4, evs), 1);
	assert_ptr_equal(evs[0], &p);
	assert_int_equal(p.ev_error, -EIO);

	/* all children done before the barrier: it completes at once */
	for (i = 0; i < 2; i++) {
		assert_int_equal(coffer__event_launch(&c[i]), 0);
		coffer__event_complete(&c[i], 0);
	}
	assert_int_equal(coffer_event_parent_barrier(&p), 0);
	assert_int_equal(coffer_eq_poll(eqh, 0, 0, 4, evs), 1);
	assert_ptr_equal(evs[0], &p);
	assert_int_equal(p.ev_error, 0);

	assert_int_equal(coffer_event_fini(&p), 0);
	assert_int_equal(coffer_event_fini(&lone), 0);
	assert_int_equal(coffer_eq_destroy(eqh, 0), 0);
}

static void test_event_test(void **state)
{
	coffer_handle_t eqh = new_eq();
	struct coffer_event a, b, *evs[4];
	bool done = false;
	int64_t t0;

	(void)state;
	assert_int_equal(coffer_event_init(&a, eqh, NULL), 0);
	assert_int_equal(coffer_event_init(&b, eqh, NULL), 0);
	assert_int_equal(coffer_event_test(&a, 0, &done), 0);
	assert_true(done); /* READY: nothing in flight */
	assert_int_equal(coffer__event_launch(&a), 0);
	assert_int_equal(coffer__event_launch(&b), 0);
	assert_int_equal(coffer_event_test(&a, 0, &done), 0);
	assert_false(done);
	t0 = now_us(CLOCK_MONOTONIC);
	assert_int_equal(coffer_event_test(&a, 20000, &done), 0);
	assert_false(done);
	assert_true(now_us(CLOCK_MONOTONIC) - t0 >= 20000);

	/* test() takes its event out of the EQ; poll returns only the others, in order */
	coffer__event_complete(&a, -EIO);
	coffer__event_complete(&b, -ENOSPC);
	assert_int_equal(coffer_event_test(&b, 0, &done), 0);
	assert_true(done);
	assert_int_equal(b.ev_error, -ENOSPC);
	query_counts(eqh, 0, 1);
	assert_int_equal(coffer_eq_poll(eqh, 0, 0, 4, evs), 1);
	assert_ptr_equal(evs[0], &a);
	assert_int_equal(a.ev_error, -EIO);

	/* fini of a completed, unreaped event takes it off the EQ */
	assert_int_equal(coffer__event_launch(&a), 0);
	coffer__event_complete(&a, 0);
	query_counts(eqh, 0, 1);
	assert_int_equal(coffer_event_fini(&a), 0);
	query_counts(eqh, 0, 0);
	assert_int_equal(coffer_eq_poll(eqh, 0, 0, 4, evs), 0);
	assert_int_equal(coffer_event_fini(&b), 0);
	assert_int_equal(coffer_eq_destroy(eqh, 0), 0);
}

/* ---- progress hook ------------------------------------------------------------------------ */

struct fake_chan {
	_Atomic int progress_calls;
	_Atomic int arm_calls;
	_Atomic int disarm_calls;
	_Atomic int arm_result;
	_Atomic(struct coffer_event *) pending; /* completed by the next progress() */
	int pending_rc;
	struct coffer_event *arm_ev; /* made pending by an arm() that reports work */
};

static int fake_progress(void *arg)
{
	struct fake_chan *fc = arg;
	struct coffer_event *ev;

	atomic_fetch_add(&fc->progress_calls, 1);
	ev = atomic_exchange(&fc->pending, NULL);
	if (ev == NULL)
		return 0;
	coffer__event_complete(ev, fc->pending_rc);
	return 1;
}

static int fake_arm(void *arg)
{
	struct fake_chan *fc = arg;

	atomic_fetch_add(&fc->arm_calls, 1);
	if (!atomic_exchange(&fc->arm_result, 0))
		return 0;
	atomic_store(&fc->pending, fc->arm_ev);
	return 1;
}

static void fake_disarm(void *arg)
{
	struct fake_chan *fc = arg;

	atomic_fetch_add(&fc->disarm_calls, 1);
}

/* The "peer": makes a reply pending, then rings the doorbell. */
struct doorbell {
	pthread_t tid;
	struct fake_chan *fc;
	struct coffer_event *ev;
	int fd;
	int delay_ms;
};

static void *doorbell_main(void *arg)
{
	struct doorbell *db = arg;
	uint64_t one = 1;

	sleep_ms(db->delay_ms);
	atomic_store(&db->fc->pending, db->ev);
	if (write(db->fd, &one, sizeof(one)) != sizeof(one))
		db->fd = -1;
	return NULL;
}

static void test_progress_hook(void **state)
{
	coffer_handle_t eqh = new_eq();
	struct fake_chan fc = {0};
	struct coffer__eq_progress hook = {
	    .progress = fake_progress, .arm = fake_arm, .disarm = fake_disarm, .arg = &fc};
	struct coffer__eq_progress nohook = {.progress = NULL, .arg = &fc};
	struct coffer_event ev, *evs[2];
	struct doorbell db;
	int fd, calls;
	bool done;

	(void)state;
	fd = coffer__eq_wake_fd(eqh);
	assert_true(fd >= 0);
	assert_true(fcntl(fd, F_GETFL) & O_NONBLOCK);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);

	assert_int_equal(coffer__eq_set_progress(eqh, &nohook), -EINVAL);
	assert_int_equal(coffer__eq_set_progress(eqh, &hook), 0);
	assert_int_equal(coffer__eq_set_progress(eqh, &hook), -EBUSY);
	assert_int_equal(coffer_event_init(&ev, eqh, NULL), 0);

	/* poll drives progress: the hook completes the event */
	assert_int_equal(coffer__event_launch(&ev), 0);
	fc.pending_rc = -EPIPE;
	atomic_store(&fc.pending, &ev);
	assert_int_equal(coffer_eq_poll(eqh, 0, 0, 2, evs), 1);
	assert_int_equal(ev.ev_error, -EPIPE);
	assert_true(atomic_load(&fc.progress_calls) >= 1);

	/* arm() says work arrived (it made a reply pending): no sleep, disarm, progress again */
	assert_int_equal(coffer__event_launch(&ev), 0);
	fc.pending_rc = 0;
	fc.arm_ev = &ev;
	atomic_store(&fc.arm_result, 1);
	assert_int_equal(coffer_eq_poll(eqh, 0, 0, 2, evs), 0); /* no wait: no arm either */
	assert_int_equal(atomic_load(&fc.arm_calls), 0);
	assert_int_equal(coffer_eq_poll(eqh, 0, 5000000, 2, evs), 1);
	assert_ptr_equal(evs[0], &ev);
	assert_int_equal(atomic_load(&fc.arm_calls), 1);
	assert_int_equal(atomic_load(&fc.disarm_calls), 1);

	assert_int_equal(coffer__event_launch(&ev), 0);
	/* arm() returns 0: the poller sleeps; the peer rings the doorbell; disarm follows */
	db.fc = &fc;
	db.ev = &ev;
	db.fd = fd;
	db.delay_ms = 50;
	assert_int_equal(pthread_create(&db.tid, NULL, doorbell_main, &db), 0);
	assert_int_equal(coffer_eq_poll(eqh, 0, 5000000, 2, evs), 1);
	pthread_join(db.tid, NULL);
	assert_int_equal(db.fd, fd);
	assert_ptr_equal(evs[0], &ev);
	assert_true(atomic_load(&fc.arm_calls) >= 1);
	assert_int_equal(atomic_load(&fc.arm_calls), atomic_load(&fc.disarm_calls));

	/* detached: never called again */
	assert_int_equal(coffer__eq_set_progress(eqh, NULL), 0);
	calls = atomic_load(&fc.progress_calls);
	assert_int_equal(coffer_eq_poll(eqh, 0, 1000, 2, evs), 0);
	assert_int_equal(atomic_load(&fc.progress_calls), calls);

	/* a forced destroy drains through the hook: the channel completes what runs */
	assert_int_equal(coffer__eq_set_progress(eqh, &hook), 0);
	assert_int_equal(coffer__event_launch(&ev), 0);
	fc.pending_rc = -ECONNRESET;
	atomic_store(&fc.pending, &ev);
	assert_int_equal(coffer_eq_destroy(eqh, COFFER_EQ_FORCE), 0);
	assert_null(atomic_load(&fc.pending));
	assert_int_equal(ev.ev_error, -ECONNRESET);

	/* destroy detached the hook: events that outlive the EQ never reach it */
	calls = atomic_load(&fc.progress_calls);
	assert_int_equal(coffer_event_test(&ev, 1000, &done), 0);
	assert_true(done);
	assert_int_equal(coffer__event_launch(&ev), -ENOENT);
	assert_int_equal(atomic_load(&fc.progress_calls), calls);
	assert_int_equal(coffer_event_fini(&ev), 0);
}

/* Detaching (or destroying) waits for hook calls in flight: none starts after it returns. */
struct detach_ctx {
	coffer_handle_t eqh;
	struct coffer_event ev; /* tested by one thread through its cached EQ */
	_Atomic int detached;
	_Atomic int stop;
	_Atomic long calls;
	_Atomic long late_calls;
	_Atomic int bad_rc;
};

static int detach_progress(void *arg)
{
	struct detach_ctx *dc = arg;

	if (atomic_load(&dc->detached))
		atomic_fetch_add(&dc->late_calls, 1);
	atomic_fetch_add(&dc->calls, 1);
	sched_yield(); /* widen the window a detach must wait for */
	if (atomic_load(&dc->detached))
		atomic_fetch_add(&dc->late_calls, 1);
	return 0;
}

static void *detach_poller(void *arg)
{
	struct detach_ctx *dc = arg;
	struct coffer_event *evs[1];
	int rc;

	while (!atomic_load(&dc->stop)) {
		rc = coffer_eq_poll(dc->eqh, 0, 0, 1, evs);
		if (rc != 0 && rc != -ENOENT)
			atomic_store(&dc->bad_rc, rc);
	}
	return NULL;
}

static void *detach_tester(void *arg)
{
	struct detach_ctx *dc = arg;
	bool done;

	while (!atomic_load(&dc->stop))
		if (coffer_event_test(&dc->ev, 0, &done) != 0 || !done)
			atomic_store(&dc->bad_rc, -1);
	return NULL;
}

static void test_detach_while_polling(void **state)
{
	struct detach_ctx dc;
	struct coffer__eq_progress hook = {.progress = detach_progress, .arg = &dc};
	pthread_t t[3];
	int round, i;

	(void)state;
	for (round = 0; round < 2; round++) { /* 0: set_progress(NULL), 1: destroy */
		memset(&dc, 0, sizeof(dc));
		dc.eqh = new_eq();
		assert_int_equal(coffer_event_init(&dc.ev, dc.eqh, NULL), 0);
		assert_int_equal(coffer__eq_set_progress(dc.eqh, &hook), 0);
		assert_int_equal(pthread_create(&t[0], NULL, detach_poller, &dc), 0);
		assert_int_equal(pthread_create(&t[1], NULL, detach_poller, &dc), 0);
		assert_int_equal(pthread_create(&t[2], NULL, detach_tester, &dc), 0);
		while (atomic_load(&dc.calls) < 200)
			sched_yield();
		if (round == 0)
			assert_int_equal(coffer__eq_set_progress(dc.eqh, NULL), 0);
		else
			assert_int_equal(coffer_eq_destroy(dc.eqh, 0), 0);
		atomic_store(&dc.detached, 1);
		sleep_ms(20);
		atomic_store(&dc.stop, 1);
		for (i = 0; i < 3; i++)
			pthread_join(t[i], NULL);
		assert_int_equal(atomic_load(&dc.late_calls), 0);
		assert_int_equal(atomic_load(&dc.bad_rc), 0);
		/* a late attach to a destroyed EQ is refused */
		if (round == 0) {
			assert_int_equal(coffer__eq_set_progress(dc.eqh, NULL), 0);
			assert_int_equal(coffer_eq_destroy(dc.eqh, 0), 0);
		}
		assert_int_equal(coffer__eq_set_progress(dc.eqh, &hook), -ENOENT);
		assert_int_equal(coffer_event_fini(&dc.ev), 0);
	}
}

/* A hook detached while a poller sleeps on the EQ: the poller wakes and must not touch the
 * detached (freed) hook. Caught under ASan as a use-after-free before eq.c re-checked it. */
static _Atomic int sd_armed;

static int sd_progress(void *arg)
{
	(void)arg;
	return 0;
}

static int sd_arm(void *arg)
{
	(void)arg;
	atomic_store(&sd_armed, 1);
	return 0;
}

static void sd_disarm(void *arg)
{
	(void)arg;
}

struct sleep_detach {
	coffer_handle_t eqh;
	int rc;
};

static void *sd_poller(void *arg)
{
	struct sleep_detach *sd = arg;
	struct coffer_event *evs[1];

	sd->rc = coffer_eq_poll(sd->eqh, 0, 300 * 1000, 1, evs);
	return NULL;
}

static void test_detach_while_sleeping(void **state)
{
	struct coffer__eq_progress hook = {
	    .progress = sd_progress, .arm = sd_arm, .disarm = sd_disarm, .arg = NULL};
	struct sleep_detach sd = {.eqh = new_eq(), .rc = 1};
	pthread_t t;

	(void)state;
	atomic_store(&sd_armed, 0);
	assert_int_equal(coffer__eq_set_progress(sd.eqh, &hook), 0);
	assert_int_equal(pthread_create(&t, NULL, sd_poller, &sd), 0);
	while (!atomic_load(&sd_armed))
		sched_yield();
	sleep_ms(30); /* the poller is in ppoll, outside any read-side section */
	assert_int_equal(coffer__eq_set_progress(sd.eqh, NULL), 0); /* frees the hook copy */
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(sd.rc, 0); /* timed out with nothing: 0 events */
	assert_int_equal(coffer_eq_destroy(sd.eqh, 0), 0);
}

/*
 * A hook replaced while a poller sleeps: the poller armed the old hook, so it must not call
 * the new one's disarm() (eventq promises disarm() only after an arm() of the same attached
 * hook). The sleeper used to recognise "its" hook by the copy's address alone, and the new
 * copy is typically the old one's memory (freed by the detach, malloc'd again by the attach):
 * the new hook got a disarm() for an arm() it never saw, which in the runtime's binding takes
 * a sleeper count away from another poller (review rev2).
 */
struct swap_hook {
	int id;
	_Atomic int arms, disarms, unpaired;
};

static _Thread_local int swap_armed_id; /* the hook this thread armed last, 0: none */

static int swap_progress(void *arg)
{
	(void)arg;
	return 0;
}

static int swap_arm(void *arg)
{
	struct swap_hook *h = arg;

	swap_armed_id = h->id;
	atomic_fetch_add(&h->arms, 1);
	return 0;
}

static void swap_disarm(void *arg)
{
	struct swap_hook *h = arg;

	if (swap_armed_id != h->id)
		atomic_fetch_add(&h->unpaired, 1);
	swap_armed_id = 0;
	atomic_fetch_add(&h->disarms, 1);
}

struct swap_poller {
	coffer_handle_t eqh;
	struct coffer_event *out;
	int rc;
};

static void *swap_poller_main(void *arg)
{
	struct swap_poller *sp = arg;

	sp->rc = coffer_eq_poll(sp->eqh, 0, 10000000, 1, &sp->out);
	return NULL;
}

static void test_hook_replaced_while_sleeping(void **state)
{
	struct swap_hook a = {.id = 1}, b = {.id = 2};
	struct coffer__eq_progress ha = {
	    .progress = swap_progress, .arm = swap_arm, .disarm = swap_disarm, .arg = &a};
	struct coffer__eq_progress hb = {
	    .progress = swap_progress, .arm = swap_arm, .disarm = swap_disarm, .arg = &b};
	struct swap_poller sp = {.eqh = new_eq(), .rc = -1};
	struct coffer_event ev;
	pthread_t t;

	(void)state;
	assert_int_equal(coffer__eq_set_progress(sp.eqh, &ha), 0);
	assert_int_equal(coffer_event_init(&ev, sp.eqh, NULL), 0);
	assert_int_equal(coffer__event_launch(&ev), 0);
	assert_int_equal(pthread_create(&t, NULL, swap_poller_main, &sp), 0);
	while (atomic_load(&a.arms) == 0)
		sched_yield();
	/* The poller armed A and sleeps (or is about to): A goes, B comes. Whether the poller is
	 * in ppoll() yet does not matter, it looks at the hook only after waking. */
	assert_int_equal(coffer__eq_set_progress(sp.eqh, NULL), 0);
	assert_int_equal(coffer__eq_set_progress(sp.eqh, &hb), 0);
	coffer__event_complete(&ev, 0); /* wakes the poller */
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(sp.rc, 1);
	assert_ptr_equal(sp.out, &ev);
	assert_int_equal(atomic_load(&a.unpaired), 0);
	assert_int_equal(atomic_load(&b.unpaired), 0);
	assert_int_equal(atomic_load(&b.disarms), atomic_load(&b.arms));
	assert_int_equal(coffer_event_fini(&ev), 0);
	assert_int_equal(coffer_eq_destroy(sp.eqh, 0), 0);
}

/*
 * Two wait_running pollers sleep on an EQ with one event running; it completes. The poller
 * that runs first drains the wake fd and reaps the event: the EQ is idle now (nothing
 * running, nothing to reap), which is what the other one waits for, and it must return 0.
 * A reap used to wake sleepers only when it left completed events behind, so the other
 * poller, woken by the completion's write but not yet back from ppoll() when the fd was
 * drained, slept on for good (review rev2). In odd rounds the other consumer is a
 * coffer_event_test() of the event, sleeping as well, which reaps through
 * coffer__eq_take_event(). Each round the loser may or may not have been that late; a thread
 * still asleep after a generous watchdog is rescued (one more event) and counted as a failure.
 */
struct wr_poller {
	pthread_t tid;
	coffer_handle_t eqh;
	struct coffer_event *test; /* non-NULL: coffer_event_test() this event instead */
	struct coffer_event *out;
	bool tested;
	_Atomic int rc;
	_Atomic int done;
};

static _Atomic int wr_arms;

static int wr_progress(void *arg)
{
	(void)arg;
	return 0;
}

static int wr_arm(void *arg)
{
	(void)arg;
	atomic_fetch_add(&wr_arms, 1);
	return 0;
}

static void wr_disarm(void *arg)
{
	(void)arg;
}

static void *wr_poller_main(void *arg)
{
	struct wr_poller *p = arg;

	if (p->test != NULL)
		atomic_store(&p->rc, coffer_event_test(p->test, -1, &p->tested));
	else
		atomic_store(&p->rc, coffer_eq_poll(p->eqh, 1, -1, 1, &p->out));
	atomic_store(&p->done, 1);
	return NULL;
}

static void test_wait_running_woken_by_reap(void **state)
{
	struct coffer__eq_progress hook = {
	    .progress = wr_progress, .arm = wr_arm, .disarm = wr_disarm, .arg = NULL};
	coffer_handle_t eqh = new_eq();
	struct coffer_event ev, *evs[1];
	struct wr_poller p[2];
	int round, stuck = 0, wrong = 0;

	(void)state;
	assert_int_equal(coffer__eq_set_progress(eqh, &hook), 0);
	assert_int_equal(coffer_event_init(&ev, eqh, NULL), 0);
	for (round = 0; round < 20; round++) {
		int arms = atomic_load(&wr_arms), got = 0, idle = 0, waited;

		assert_int_equal(coffer__event_launch(&ev), 0);
		for (int i = 0; i < 2; i++) {
			memset(&p[i], 0, sizeof(p[i]));
			p[i].eqh = eqh;
			p[i].test = i == 1 && round % 2 ? &ev : NULL;
			assert_int_equal(pthread_create(&p[i].tid, NULL, wr_poller_main, &p[i]), 0);
		}
		while (atomic_load(&wr_arms) < arms + 2)
			sched_yield();
		sleep_ms(10); /* both in ppoll() (or about to be): widens the window only */
		coffer__event_complete(&ev, 0);
		/* Watchdog: 10 s for a wake-up that takes microseconds. */
		for (waited = 0; waited < 10000 && !(p[0].done && p[1].done); waited++)
			sleep_ms(1);
		if (!(p[0].done && p[1].done)) {
			stuck++;
			/* rescue: the event is READY again (reaped by the other poller) */
			assert_int_equal(coffer__event_launch(&ev), 0);
			coffer__event_complete(&ev, 0);
		}
		for (int i = 0; i < 2; i++)
			assert_int_equal(pthread_join(p[i].tid, NULL), 0);
		if (p[1].test == NULL) {
			for (int i = 0; i < 2; i++) {
				got += p[i].rc == 1 && p[i].out == &ev;
				idle += p[i].rc == 0;
			}
			wrong += !(got == 1 && idle == 1);
		} else {
			/* the poller took the event (1) or found the EQ idle (0); test() saw it
			 * done either way */
			wrong += !((p[0].rc == 1 && p[0].out == &ev) || p[0].rc == 0);
			wrong += !(p[1].rc == 0 && p[1].tested);
		}
		if (stuck)
			break;
	}
	print_message("wait_running pollers: rounds %d, stuck %d\n", round, stuck);
	assert_int_equal(stuck, 0);
	assert_int_equal(wrong, 0);
	assert_int_equal(coffer_eq_poll(eqh, 0, 0, 1, evs), 0);
	assert_int_equal(coffer_event_fini(&ev), 0);
	assert_int_equal(coffer_eq_destroy(eqh, 0), 0);
}

/*
 * coffer_event_test(A) and a poller sleep on an EQ while another event B keeps it busy; A
 * completes. When the poller runs first it drains the wake fd and reaps A: A is done, which is
 * what the tester waits for, and the tester must return with done set. The reap did not wake
 * anyone (B still runs, nothing is left to reap), so a tester woken by A's completion but not
 * yet back from ppoll() when the fd was drained slept on until B completed (review rev2). A
 * tester still asleep after a generous watchdog counts as a failure; B's completion rescues it.
 */
struct tp_thread {
	pthread_t tid;
	coffer_handle_t eqh;
	struct coffer_event *test; /* non-NULL: test() it; NULL: poll */
	struct coffer_event *out;
	bool tested;
	_Atomic int rc;
	_Atomic int done;
};

static void *tp_main(void *arg)
{
	struct tp_thread *p = arg;

	if (p->test != NULL)
		atomic_store(&p->rc, coffer_event_test(p->test, -1, &p->tested));
	else
		atomic_store(&p->rc, coffer_eq_poll(p->eqh, 0, -1, 1, &p->out));
	atomic_store(&p->done, 1);
	return NULL;
}

static void test_event_test_woken_by_reap(void **state)
{
	struct coffer__eq_progress hook = {
	    .progress = wr_progress, .arm = wr_arm, .disarm = wr_disarm, .arg = NULL};
	coffer_handle_t eqh = new_eq();
	struct coffer_event a, b, *evs[1];
	struct tp_thread t, p;
	int round, stuck = 0, wrong = 0;

	(void)state;
	assert_int_equal(coffer__eq_set_progress(eqh, &hook), 0);
	assert_int_equal(coffer_event_init(&a, eqh, NULL), 0);
	assert_int_equal(coffer_event_init(&b, eqh, NULL), 0);
	for (round = 0; round < 20 && !stuck; round++) {
		int arms = atomic_load(&wr_arms), waited;

		assert_int_equal(coffer__event_launch(&a), 0);
		assert_int_equal(coffer__event_launch(&b), 0);
		memset(&t, 0, sizeof(t));
		memset(&p, 0, sizeof(p));
		t.eqh = p.eqh = eqh;
		t.test = &a;
		assert_int_equal(pthread_create(&t.tid, NULL, tp_main, &t), 0);
		assert_int_equal(pthread_create(&p.tid, NULL, tp_main, &p), 0);
		while (atomic_load(&wr_arms) < arms + 2)
			sched_yield();
		sleep_ms(10); /* both in ppoll() (or about to be): widens the window only */
		coffer__event_complete(&a, 0);
		/* Watchdog: 10 s for a wake-up that takes microseconds. */
		for (waited = 0; waited < 10000 && !t.done; waited++)
			sleep_ms(1);
		stuck += !t.done;
		coffer__event_complete(&b, 0); /* ends the poller (or rescues the tester) */
		assert_int_equal(pthread_join(t.tid, NULL), 0);
		assert_int_equal(pthread_join(p.tid, NULL), 0);
		wrong += !(t.rc == 0 && t.tested);
		wrong += !(p.rc == 1 && (p.out == &a || p.out == &b));
		if (p.rc == 1 && p.out == &a) /* the poller took A: B is still to reap */
			wrong += coffer_eq_poll(eqh, 0, -1, 1, evs) != 1 || evs[0] != &b;
	}
	print_message("tester beside a poller: rounds %d, stuck %d\n", round, stuck);
	assert_int_equal(stuck, 0);
	assert_int_equal(wrong, 0);
	assert_int_equal(coffer_event_fini(&a), 0);
	assert_int_equal(coffer_event_fini(&b), 0);
	assert_int_equal(coffer_eq_destroy(eqh, 0), 0);
}

/*
 * Two coffer_event_test() callers (of A and of B) and a poller sleep on an EQ while C keeps
 * it busy; A completes. When the poller reaps A it wakes the sleepers a reap can satisfy -
 * but they all slept on the one wake fd, and a single write(2) reached only whoever drained
 * it first: when that was B's tester, it found B still running and slept on, and A's tester,
 * woken as well but back from ppoll() after the drain, slept on beside its reaped event until
 * some later completion (rel-adv25; a mixed hammer of 3 testers and 4 pollers hung within
 * seconds, every event reaped and every tester asleep). Now each such sleeper has a wake fd
 * of its own that a reap writes. A tester still asleep after a generous watchdog counts as a
 * failure; B's and C's completions rescue it.
 */
static void test_event_test_woken_beside_other_tester(void **state)
{
	struct coffer__eq_progress hook = {
	    .progress = wr_progress, .arm = wr_arm, .disarm = wr_disarm, .arg = NULL};
	coffer_handle_t eqh = new_eq();
	struct coffer_event a, b, c, *evs[4];
	struct tp_thread ta, tb, p;
	int round, stuck = 0, wrong = 0, n;

	(void)state;
	assert_int_equal(coffer__eq_set_progress(eqh, &hook), 0);
	assert_int_equal(coffer_event_init(&a, eqh, NULL), 0);
	assert_int_equal(coffer_event_init(&b, eqh, NULL), 0);
	assert_int_equal(coffer_event_init(&c, eqh, NULL), 0);
	for (round = 0; round < 40 && !stuck; round++) {
		int arms = atomic_load(&wr_arms), waited;

		assert_int_equal(coffer__event_launch(&a), 0);
		assert_int_equal(coffer__event_launch(&b), 0);
		assert_int_equal(coffer__event_launch(&c), 0);
		memset(&ta, 0, sizeof(ta));
		memset(&tb, 0, sizeof(tb));
		memset(&p, 0, sizeof(p));
		ta.eqh = tb.eqh = p.eqh = eqh;
		ta.test = &a;
		tb.test = &b;
		assert_int_equal(pthread_create(&ta.tid, NULL, tp_main, &ta), 0);
		assert_int_equal(pthread_create(&tb.tid, NULL, tp_main, &tb), 0);
		assert_int_equal(pthread_create(&p.tid, NULL, tp_main, &p), 0);
		while (atomic_load(&wr_arms) < arms + 3)
			sched_yield();
		sleep_ms(10); /* all three in ppoll() (or about to be): widens the window only */
		coffer__event_complete(&a, 0);
		/* Watchdog: 10 s for a wake-up that takes microseconds. */
		for (waited = 0; waited < 10000 && !ta.done; waited++)
			sleep_ms(1);
		stuck += !ta.done;
		coffer__event_complete(&b, 0); /* rescue: each completion rings the fd */
		coffer__event_complete(&c, 0);
		assert_int_equal(pthread_join(ta.tid, NULL), 0);
		assert_int_equal(pthread_join(tb.tid, NULL), 0);
		assert_int_equal(pthread_join(p.tid, NULL), 0);
		wrong += !(ta.rc == 0 && ta.tested);
		wrong += !(tb.rc == 0 && tb.tested);
		wrong += p.rc != 1;
		/* what nobody took (C, or B or A when the poller took the other) */
		do
			n = coffer_eq_poll(eqh, 0, 0, 4, evs);
		while (n > 0);
		wrong += n != 0;
	}
	print_message("two testers beside a poller: rounds %d, stuck %d\n", round, stuck);
	assert_int_equal(stuck, 0);
	assert_int_equal(wrong, 0);
	assert_int_equal(coffer_event_fini(&a), 0);
	assert_int_equal(coffer_event_fini(&b), 0);
	assert_int_equal(coffer_event_fini(&c), 0);
	assert_int_equal(coffer_eq_destroy(eqh, 0), 0);
}

/* Destroy racing with launches: each launch either counts (and is drained or reaped) or
 * fails with -ENOENT; after destroy returns, every launch fails. */
struct race_launcher {
	pthread_t tid;
	struct coffer_event ev;
	_Atomic int *destroyed;
	_Atomic long launched;
	int last_rc;
	int bad;
};

static void *race_launcher_main(void *arg)
{
	struct race_launcher *rl = arg;
	bool done;
	int rc;

	for (;;) {
		int was_destroyed = atomic_load(rl->destroyed);

		rc = coffer__event_launch(&rl->ev);
		if (rc != 0) {
			rl->last_rc = rc;
			break;
		}
		if (was_destroyed)
			rl->bad++; /* a launch succeeded after destroy returned */
		rl->launched++;
		coffer__event_complete(&rl->ev, 0);
		do { /* reaped by us, or discarded by a forced destroy: READY either way */
			if (coffer_event_test(&rl->ev, 0, &done) != 0)
				rl->bad++;
		} while (!done);
	}
	return NULL;
}

static void test_destroy_races_launch(void **state)
{
	struct race_launcher rl[2];
	_Atomic int destroyed;
	coffer_handle_t eqh;
	int round, i, rc;

	(void)state;
	for (round = 0; round < 2; round++) { /* 0: plain destroy, retried on -EBUSY; 1: FORCE */
		memset(rl, 0, sizeof(rl));
		atomic_store(&destroyed, 0);
		eqh = new_eq();
		for (i = 0; i < 2; i++) {
			rl[i].destroyed = &destroyed;
			assert_int_equal(coffer_event_init(&rl[i].ev, eqh, NULL), 0);
			assert_int_equal(
			    pthread_create(&rl[i].tid, NULL, race_launcher_main, &rl[i]), 0);
		}
		while (rl[0].launched < 100 || rl[1].launched < 100)
			sched_yield();
		do {
			rc = coffer_eq_destroy(eqh, round ? COFFER_EQ_FORCE : 0);
			if (rc == -EBUSY)
				sched_yield();
		} while (rc == -EBUSY);
		assert_int_equal(rc, 0);
		atomic_store(&destroyed, 1);
		for (i = 0; i < 2; i++) {
			pthread_join(rl[i].tid, NULL);
			assert_int_equal(rl[i].last_rc, -ENOENT);
			assert_int_equal(rl[i].bad, 0);
			assert_int_equal(coffer_event_fini(&rl[i].ev), 0);
		}
	}
}

/* ---- concurrent pollers: each completion returned exactly once ---------------------------- */

#define MP_EVENTS     4000
#define MP_POLLERS    3
#define MP_COMPLETERS 2

struct mp_ctx {
	coffer_handle_t eqh;
	struct coffer_event ev[MP_EVENTS];
	_Atomic int seen[MP_EVENTS];
	_Atomic int reaped;
	_Atomic int errors;
	_Atomic int next;
};

static void *mp_completer(void *arg)
{
	struct mp_ctx *mp = arg;
	int i;

	while ((i = atomic_fetch_add(&mp->next, 1)) < MP_EVENTS) {
		if (coffer__event_launch(&mp->ev[i]) != 0)
			atomic_fetch_add(&mp->errors, 1);
		coffer__event_complete(&mp->ev[i], -(i % 13));
	}
	return NULL;
}

static void *mp_poller(void *arg)
{
	struct mp_ctx *mp = arg;
	struct coffer_event *evs[7];
	int k, i, idx;

	while (atomic_load(&mp->reaped) < MP_EVENTS) {
		k = coffer_eq_poll(mp->eqh, 0, 2000, 7, evs);
		if (k < 0) {
			atomic_fetch_add(&mp->errors, 1);
			break;
		}
		for (i = 0; i < k; i++) {
			idx = (int)(evs[i] - mp->ev);
			if (idx < 0 || idx >= MP_EVENTS || evs[i]->ev_error != -(idx % 13) ||
			    atomic_fetch_add(&mp->seen[idx], 1) != 0)
				atomic_fetch_add(&mp->errors, 1);
		}
		atomic_fetch_add(&mp->reaped, k);
	}
	return NULL;
}

static void test_concurrent_pollers_exactly_once(void **state)
{
	static struct mp_ctx mp;
	pthread_t pt[MP_POLLERS], ct[MP_COMPLETERS];
	int i;

	(void)state;
	memset(&mp, 0, sizeof(mp));
	mp.eqh = new_eq();
	for (i = 0; i < MP_EVENTS; i++)
		assert_int_equal(coffer_event_init(&mp.ev[i], mp.eqh, NULL), 0);
	for (i = 0; i < MP_POLLERS; i++)
		assert_int_equal(pthread_create(&pt[i], NULL, mp_poller, &mp), 0);
	for (i = 0; i < MP_COMPLETERS; i++)
		assert_int_equal(pthread_create(&ct[i], NULL, mp_completer, &mp), 0);
	for (i = 0; i < MP_COMPLETERS; i++)
		pthread_join(ct[i], NULL);
	for (i = 0; i < MP_POLLERS; i++)
		pthread_join(pt[i], NULL);
	assert_int_equal(atomic_load(&mp.errors), 0);
	assert_int_equal(atomic_load(&mp.reaped), MP_EVENTS);
	for (i = 0; i < MP_EVENTS; i++)
		assert_int_equal(atomic_load(&mp.seen[i]), 1);
	query_counts(mp.eqh, 0, 0);
	for (i = 0; i < MP_EVENTS; i++)
		assert_int_equal(coffer_event_fini(&mp.ev[i]), 0);
	assert_int_equal(coffer_eq_destroy(mp.eqh, 0), 0);
}

/*
 * fork() while another thread is inside an EQ call that holds one of the EQ's locks (here
 * coffer_eq_query() listing completed events, which holds the reap lock while it walks them,
 * and listing running ones, which holds the registry lock; a poll holds the reap lock the
 * same way, briefly). The child inherits the EQ and must be able to poll what completed,
 * finalise its events and destroy the EQ (coffer/store.h: a fork child completes and cleans
 * up what it inherited). Found hanging the child in its first poll: the reap lock was copied
 * locked, by a thread that does not exist in the child.
 */
#define FQ_EVENTS 2048
#define FQ_FORKS  20

static struct fq_ctx {
	coffer_handle_t eqh;
	struct coffer_event ev[FQ_EVENTS]; /* [0, FQ_EVENTS/2) completed, the rest running */
	atomic_int stop;
	atomic_long queries;
} fq;

static void *fq_querier(void *arg)
{
	static struct coffer_event *lists[2][FQ_EVENTS]; /* one per querier */
	unsigned int which = (unsigned int)(uintptr_t)arg;
	struct coffer_event **list = lists[which == COFFER_EQR_COMPLETED ? 0 : 1];

	while (!atomic_load(&fq.stop)) {
		if (coffer_eq_query(fq.eqh, which, FQ_EVENTS, list) != FQ_EVENTS / 2)
			atomic_store(&fq.stop, 2); /* checked by the main thread */
		atomic_fetch_add(&fq.queries, 1);
	}
	return NULL;
}

/* The child: reap what completed, finish what runs, clean everything up. */
static int fq_child(void)
{
	static struct coffer_event *out[FQ_EVENTS];
	int n;

	alarm(10); /* a hang is a failure (SIGALRM), not a stuck test */
	n = coffer_eq_poll(fq.eqh, 0, 0, FQ_EVENTS, out);
	if (n != FQ_EVENTS / 2)
		return 10;
	if (coffer_eq_query(fq.eqh, COFFER_EQR_RUNNING, 0, NULL) != FQ_EVENTS / 2)
		return 11;
	for (int i = FQ_EVENTS / 2; i < FQ_EVENTS; i++)
		coffer__event_complete(&fq.ev[i], -ENOTCONN);
	if (coffer_eq_destroy(fq.eqh, COFFER_EQ_FORCE) != 0)
		return 12;
	for (int i = 0; i < FQ_EVENTS; i++)
		if (coffer_event_fini(&fq.ev[i]) != 0)
			return 13;
	return 0;
}

static void test_fork_while_eq_locked(void **state)
{
	pthread_t qt[2];

	(void)state;
	memset(&fq, 0, sizeof(fq));
	fq.eqh = new_eq();
	for (int i = 0; i < FQ_EVENTS; i++) {
		assert_int_equal(coffer_event_init(&fq.ev[i], fq.eqh, NULL), 0);
		assert_int_equal(coffer__event_launch(&fq.ev[i]), 0);
		if (i < FQ_EVENTS / 2)
			coffer__event_complete(&fq.ev[i], 0);
	}
	assert_int_equal(
	    pthread_create(&qt[0], NULL, fq_querier, (void *)(uintptr_t)COFFER_EQR_COMPLETED), 0);
	assert_int_equal(
	    pthread_create(&qt[1], NULL, fq_querier, (void *)(uintptr_t)COFFER_EQR_RUNNING), 0);
	for (int i = 0; i < FQ_FORKS; i++) {
		int status = -1;
		pid_t pid;

		while (atomic_load(&fq.queries) < 2 * (i + 1))
			sched_yield(); /* the queriers are at work */
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0)
			_exit(fq_child());
		assert_int_equal(waitpid(pid, &status, 0), pid);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			atomic_store(&fq.stop, 1);
			pthread_join(qt[0], NULL);
			pthread_join(qt[1], NULL);
			fail_msg("fork %d: child %s %d", i,
				 WIFEXITED(status) ? "exited" : "killed by",
				 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
		}
	}
	assert_int_equal(atomic_exchange(&fq.stop, 1), 0);
	pthread_join(qt[0], NULL);
	pthread_join(qt[1], NULL);
	for (int i = FQ_EVENTS / 2; i < FQ_EVENTS; i++)
		coffer__event_complete(&fq.ev[i], 0);
	assert_int_equal(coffer_eq_destroy(fq.eqh, COFFER_EQ_FORCE), 0);
	for (int i = 0; i < FQ_EVENTS; i++)
		assert_int_equal(coffer_event_fini(&fq.ev[i]), 0);
}

/*
 * A fork child sleeping on an EQ it inherited must not take the wakeups of the parent's
 * pollers of that EQ. Both processes' copies of the EQ had one eventfd file description:
 * the child's sleeping poller, woken by the parent's completion, drained it before the
 * parent's poller reached ppoll(), and that poller slept on with its event completed - for
 * good when it waits without a timeout, since the parent's copy still says the fd was rung
 * (only the first completion after a drain writes it). Staged: the parent's poller is held
 * inside the hook's arm() (where the runtime's channel does real work) while another thread
 * completes its event and the child wakes. A watchdog turns the hang into a failure.
 */
static struct fw_ctx {
	pid_t parent;
	struct coffer_event ev;
	atomic_int arming;    /* the parent's poller is inside arm() */
	atomic_int completed; /* the completer completed the event */
	atomic_int done;      /* the parent's poll returned */
	pid_t child;
} fw;

static int fw_progress(void *arg)
{
	(void)arg;
	return 0;
}

static int fw_arm(void *arg)
{
	(void)arg;
	if (getpid() != fw.parent)
		return 0; /* the child sleeps at once */
	atomic_store(&fw.arming, 1);
	while (!atomic_load(&fw.completed))
		sched_yield();
	sleep_ms(100); /* the child, woken by the completion, drains the fd meanwhile */
	return 0;
}

static void fw_disarm(void *arg)
{
	(void)arg;
}

static void *fw_completer(void *arg)
{
	(void)arg;
	while (!atomic_load(&fw.arming))
		sched_yield();
	coffer__event_complete(&fw.ev, 0);
	atomic_store(&fw.completed, 1);
	return NULL;
}

static void *fw_watchdog(void *arg)
{
	(void)arg;
	for (int i = 0; i < 1000 && !atomic_load(&fw.done); i++)
		sleep_ms(10);
	if (!atomic_load(&fw.done)) {
		fprintf(stderr, "test_fork_child_steals_no_wakeup: the parent's poll never woke\n");
		kill(fw.child, SIGKILL);
		_exit(1);
	}
	return NULL;
}

static void test_fork_child_steals_no_wakeup(void **state)
{
	struct coffer__eq_progress hook = {
	    .progress = fw_progress, .arm = fw_arm, .disarm = fw_disarm, .arg = NULL};
	coffer_handle_t eqh = new_eq();
	struct coffer_event *out[1];
	pthread_t ct, wt;
	int pfd[2], status;
	char c;

	(void)state;
	memset(&fw, 0, sizeof(fw));
	fw.parent = getpid();
	assert_int_equal(coffer__eq_set_progress(eqh, &hook), 0);
	assert_int_equal(coffer_event_init(&fw.ev, eqh, NULL), 0);
	assert_int_equal(coffer__event_launch(&fw.ev), 0);
	assert_int_equal(pipe(pfd), 0);
	fw.child = fork();
	assert_true(fw.child >= 0);
	if (fw.child == 0) {
		/* sleeps on its copy of the EQ until killed; the copy of the event stays
		 * running here (nothing completes it in the child) */
		alarm(20);
		close(pfd[0]);
		if (write(pfd[1], "r", 1) != 1)
			_exit(2);
		for (;;)
			if (coffer_eq_poll(eqh, 0, 1000000, 1, out) != 0)
				_exit(3);
	}
	close(pfd[1]); /* a child that dies makes the read return 0 */
	assert_int_equal(read(pfd[0], &c, 1), 1);
	close(pfd[0]);
	sleep_ms(50); /* the child is asleep in its poll */
	assert_int_equal(pthread_create(&wt, NULL, fw_watchdog, NULL), 0);
	assert_int_equal(pthread_create(&ct, NULL, fw_completer, NULL), 0);
	assert_int_equal(coffer_eq_poll(eqh, 0, -1, 1, out), 1);
	atomic_store(&fw.done, 1);
	assert_ptr_equal(out[0], &fw.ev);
	pthread_join(ct, NULL);
	pthread_join(wt, NULL);
	kill(fw.child, SIGKILL);
	assert_int_equal(waitpid(fw.child, &status, 0), fw.child);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL); /* not its own exit */
	assert_int_equal(coffer_event_fini(&fw.ev), 0);
	assert_int_equal(coffer_eq_destroy(eqh, 0), 0);
}

/*
 * A force destroy wakes a poller even when a coffer_event_test() sleeper of the same EQ
 * drains the wake-up first. The EQ's eventfd is one token for all its sleepers, and a
 * woken ppoll() that finds it drained sleeps on: every sleeper that drains must pass on
 * what it did not use. event_test() passed on completions only, not the destroy's CLOSING,
 * so a poller could sleep forever beside a destroyed EQ (found by
 * tests/reliability/misuse_test.c under TSan). All threads here share one CPU, so the order
 * in which the scheduler runs the woken sleepers decides: destroy's final ring, then the
 * tester drains, then the poller re-checks (about one round in six before the fix).
 */
struct bt_arg {
	coffer_handle_t eqh;
	struct coffer_event *ev;
	int rc;
	bool done;
};

static void *bt_poller(void *arg)
{
	struct bt_arg *a = arg;
	struct coffer_event *evs[1];

	a->rc = coffer_eq_poll(a->eqh, 0, -1, 1, evs);
	return NULL;
}

static void *bt_tester(void *arg)
{
	struct bt_arg *a = arg;

	a->rc = coffer_event_test(a->ev, -1, &a->done);
	return NULL;
}

static void *bt_completer(void *arg)
{
	struct bt_arg *a = arg;

	sleep_ms(2);
	coffer__event_complete(a->ev, 0);
	return NULL;
}

static void test_destroy_wakes_poller_beside_event_test(void **state)
{
	cpu_set_t one, old;

	(void)state;
	assert_int_equal(pthread_getaffinity_np(pthread_self(), sizeof(old), &old), 0);
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu(), &one);
	assert_int_equal(pthread_setaffinity_np(pthread_self(), sizeof(one), &one), 0);
	for (int round = 0; round < 100; round++) {
		struct coffer_event ev;
		struct bt_arg p = {.rc = 1}, t = {.rc = 1}, c = {0};
		pthread_t pt, tt, ct;
		struct timespec until;
		int rc;

		p.eqh = t.eqh = c.eqh = new_eq();
		assert_int_equal(coffer_event_init(&ev, p.eqh, NULL), 0);
		assert_int_equal(coffer__event_launch(&ev), 0);
		t.ev = c.ev = &ev;
		/* threads inherit the one-CPU affinity */
		assert_int_equal(pthread_create(&pt, NULL, bt_poller, &p), 0);
		assert_int_equal(pthread_create(&tt, NULL, bt_tester, &t), 0);
		sleep_ms(1); /* both asleep on the EQ's eventfd */
		assert_int_equal(pthread_create(&ct, NULL, bt_completer, &c), 0);
		assert_int_equal(coffer_eq_destroy(p.eqh, COFFER_EQ_FORCE), 0);
		pthread_join(ct, NULL);
		pthread_join(tt, NULL);
		assert_int_equal(t.rc, 0);
		assert_true(t.done);
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 5; /* a hang guard: the poller wakes at once */
		rc = pthread_timedjoin_np(pt, NULL, &until);
		if (rc != 0)
			fail_msg("round %d: a poller slept on beside a destroyed EQ", round);
		assert_int_equal(p.rc, -ENOENT);
		assert_int_equal(coffer_event_fini(&ev), 0);
	}
	assert_int_equal(pthread_setaffinity_np(pthread_self(), sizeof(old), &old), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_uninitialised),
	    cmocka_unit_test(test_fini_wakes_sleeping_pollers),
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	    T(test_create_destroy_handles),
	    T(test_launch_complete_poll),
	    T(test_fifo_order_and_batches),
	    T(test_state_errors),
	    T(test_poll_args_and_timeouts),
	    T(test_poll_sleeps),
	    T(test_wakeup_from_other_thread),
	    T(test_destroy_busy),
	    T(test_destroy_force),
	    T(test_destroy_wakes_pollers),
	    T(test_destroy_wakes_poller_beside_event_test),
	    T(test_query),
	    T(test_parent_children),
	    T(test_barrier),
	    T(test_event_test),
	    T(test_progress_hook),
	    T(test_detach_while_polling),
	    T(test_detach_while_sleeping),
	    T(test_hook_replaced_while_sleeping),
	    T(test_wait_running_woken_by_reap),
	    T(test_event_test_woken_by_reap),
	    T(test_event_test_woken_beside_other_tester),
	    T(test_destroy_races_launch),
	    T(test_concurrent_pollers_exactly_once),
	    T(test_fork_while_eq_locked),
	    T(test_fork_child_steals_no_wakeup),
#undef T
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
