/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/client/cancel_client_test.c - threads cancelled (pthread_cancel(), deferred) at
 * random moments inside blocking coffer_obj_* calls and control round trips against a real
 * coffer-store leave nothing behind (rel-client gap 1; coffer/common.h: coffer calls are
 * not cancellation points).
 *
 * Each round starts threads that loop over blocking calls - a get of an object that is
 * never sealed (it sleeps in the hidden EQ's wait for its timeout), a get of a sealed one
 * and its release, a contains, and coffer_store_query() (a control round trip holding the
 * connection's ctl_lock across sendmsg/recvmsg) - with a pthread_testcancel() between
 * them, and cancels each at a random moment: a new thread's first call also opens its
 * channel (another control round trip). Then every thread must have been cancelled, the
 * main thread's blocking calls and control calls work, and at the end the store has one
 * client and no reference held, disconnect and coffer_fini() succeed and the process has
 * exactly the fds it had before it connected. Before the fix a thread cancelled in the
 * hidden EQ's ppoll() leaked that sleep's eventfd and, through the reference its poll
 * held, the hidden EQ with its wake fd; and the run hung (seeds 1 and 3): the other
 * threads' calls waited for the connection's channel lock, which chan_open() holds across
 * its control round trip, and exiting threads for liburcu's grace-period lock, both taken
 * by threads cancelled inside them.
 *
 * Usage: cancel_client_test [-r rounds] [-s seed]
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
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
#include <coffer/store.h>

#include "../cancel_test.h"
#include "../stress_rng.h"
#include "store_fixture.h"

#define NTHREADS 4

static unsigned int rounds = 40;
static uint64_t seed0 = 0xca9ce1;
static struct store_fixture g_st;
static coffer_handle_t g_conn;
static struct coffer_oid g_sealed; /* sealed at start, 64 bytes */

static void sleep_us(long us)
{
	struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000L};

	nanosleep(&ts, NULL);
}

static struct coffer_oid oid_of(uint64_t v)
{
	struct coffer_oid o;

	memset(&o, 0, sizeof(o));
	memcpy(o.id, &v, sizeof(v));
	o.id[19] = 0xcc;
	return o;
}

struct worker {
	pthread_t tid;
	uint64_t seed;
	int bad_rc; /* an unexpected result, else 0 (read after the join) */
	int bad_op;
	struct coffer_store_info info;
	const void *data;
	uint64_t size;
	bool present;
};

NO_ASAN static void *worker_main(void *arg)
{
	struct worker *w = arg;

	rng = w->seed;
	for (;;) {
		struct coffer_oid missing = oid_of(0xdead0000u + (stress_rnd() & 0xffff));
		unsigned int op = (unsigned int)(stress_rnd() % 4);
		int rc = 0;

		switch (op) {
		case 0: /* sleeps in the hidden EQ until its timeout */
			rc =
			    coffer_obj_get_oid(g_conn, &missing, 1 + (int64_t)(stress_rnd() % 3000),
					       &w->data, &w->size, NULL);
			if (rc == -ENOENT)
				rc = 0;
			break;
		case 1: /* a reference, then its release: no reference may stay behind */
			rc = coffer_obj_get_oid(g_conn, &g_sealed, 0, &w->data, &w->size, NULL);
			if (rc == 0)
				rc = coffer_obj_release_oid(g_conn, &g_sealed, NULL);
			break;
		case 2:
			rc = coffer_obj_contains(g_conn, &missing, &w->present, NULL);
			break;
		default: /* a control round trip on the socket */
			rc = coffer_store_query(g_conn, &w->info);
			break;
		}
		if (rc < 0) {
			w->bad_rc = rc;
			w->bad_op = (int)op;
		}
		pthread_testcancel();
	}
	return NULL;
}

/* The hang guard: stop the store (the fixture's teardown will not run) and fail. */
static void on_alarm(int sig)
{
	static const char msg[] = "cancel_client_test: hung (a lock or an event a cancelled "
				  "thread left behind?)\n";

	(void)sig;
	if (write(2, msg, sizeof(msg) - 1) < 0) {
		/* nothing to do */
	}
	if (g_st.pid > 0)
		kill(g_st.pid, SIGKILL);
	_exit(1);
}

static void test_cancel_blocking_calls(void **state)
{
	struct worker ws[NTHREADS];
	struct coffer_store_info info;
	const void *data;
	uint64_t size;
	void *wr;
	int fds0;

	(void)state;
	rng = seed0;
	fds0 = count_fds();
	assert_int_equal(coffer_init(), 0);
	assert_int_equal(coffer_connect(g_st.sock, &g_conn), 0);
	g_sealed = oid_of(1);
	assert_int_equal(coffer_obj_create_oid(g_conn, &g_sealed, 64, 0, &wr, NULL), 0);
	memset(wr, 0x5a, 64);
	assert_int_equal(coffer_obj_seal_oid(g_conn, &g_sealed, 0, NULL), 0);

	for (unsigned int r = 0; r < rounds; r++) {
		for (int i = 0; i < NTHREADS; i++) {
			memset(&ws[i], 0, sizeof(ws[i]));
			ws[i].seed = stress_rnd() | 1;
			assert_int_equal(pthread_create(&ws[i].tid, NULL, worker_main, &ws[i]), 0);
		}
		for (int i = 0; i < NTHREADS; i++) {
			sleep_us((long)(stress_rnd() % 4000));
			assert_int_equal(pthread_cancel(ws[i].tid), 0);
		}
		for (int i = 0; i < NTHREADS; i++) {
			void *ret = NULL;

			assert_int_equal(pthread_join(ws[i].tid, &ret), 0);
			assert_ptr_equal(ret, PTHREAD_CANCELED);
			if (ws[i].bad_rc)
				fprintf(stderr, "round %u thread %d op %d: %d\n", r, i,
					ws[i].bad_op, ws[i].bad_rc);
			assert_int_equal(ws[i].bad_rc, 0);
		}
		/* The connection still serves this thread: a control call, a blocking call. */
		assert_int_equal(coffer_store_query(g_conn, &info), 0);
		assert_int_equal(coffer_obj_get_oid(g_conn, &g_sealed, 0, &data, &size, NULL), 0);
		assert_int_equal(size, 64);
		assert_int_equal(((const uint8_t *)data)[63], 0x5a);
		assert_int_equal(coffer_obj_release_oid(g_conn, &g_sealed, NULL), 0);
	}
	/* No reference left by a cancelled thread: the sealed object is deletable at once
	 * (a held one would be deferred, and stay visible to contains). */
	assert_int_equal(coffer_store_query(g_conn, &info), 0);
	assert_int_equal(info.clients, 1);
	assert_int_equal(coffer_obj_delete(g_conn, &g_sealed, NULL), 0);
	{
		bool present = true;

		assert_int_equal(coffer_obj_contains(g_conn, &g_sealed, &present, NULL), 0);
		assert_false(present);
	}
	assert_int_equal(coffer_disconnect(g_conn), 0);
	assert_int_equal(coffer_fini(), 0);
	assert_int_equal(count_fds(), fds0);
}

static int group_setup(void **state)
{
	(void)state;
	return store_start(&g_st, "64M") == 0 ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	return store_stop(&g_st) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cancel_blocking_calls),
	};

	if (cancel_test_args(argc, argv, &rounds, &seed0) != 0)
		return 2;
	/* A control call that hangs on a lock a cancelled thread kept fails the test here
	 * rather than at meson's timeout. */
	signal(SIGALRM, on_alarm);
	alarm(100);
	printf("cancel_client_test: %u rounds, seed %llu\n", rounds, (unsigned long long)seed0);
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
