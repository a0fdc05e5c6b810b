/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/client/fini_race_test.c - a blocking coffer_obj_* call racing the last
 * coffer_disconnect() + coffer_fini() (the runtime stops) and a new coffer_init() +
 * coffer_connect() on another thread returns only once its hidden event is reaped, with
 * the event's result (rel-client gap 2).
 *
 * The race is made exact, not hoped for: the binary is linked with
 * -Wl,--wrap=clock_gettime, and a blocking call's first clock_gettime() on a warm channel is
 * obj_exec()'s start of the wait, just after its request went out (runtime/obj.c). When
 * armed, the wrapper lets the main thread disconnect (which completes the request with
 * -ENOTCONN), coffer_fini() (the last reference: the handle hash, the hidden EQ's handle
 * with it, is destroyed), coffer_init() and connect again, then lets the call wait.
 *
 * Before the fix the wait polled the hidden EQ by its handle, found no such EQ (-EINVAL:
 * no runtime; -ENOENT once the new one is up) and returned that, the event COMPLETED and
 * unreaped on an EQ nobody could poll any more. Now the call answers the event's result,
 * -ENOTCONN (store.h: calls on a disconnected connection), and the thread's next blocking
 * calls work on the new connection.
 */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <coffer/common.h>
#include <coffer/hash.h>
#include <coffer/store.h>

#include "store_fixture.h"

int __real_clock_gettime(clockid_t clk, struct timespec *ts);
int __wrap_clock_gettime(clockid_t clk, struct timespec *ts);

static struct store_fixture g_st;
static __thread bool t_armed;
static sem_t race_go, race_done;

int __wrap_clock_gettime(clockid_t clk, struct timespec *ts)
{
	if (t_armed) {
		t_armed = false;
		sem_post(&race_go);
		while (sem_wait(&race_done) != 0)
			;
	}
	return __real_clock_gettime(clk, ts);
}

struct racer {
	coffer_handle_t conn;
	int first_rc;  /* the call the race hits */
	int second_rc; /* the next blocking call (on the new connection, if any) */
	int third_rc;  /* and a put + get after it */
	_Atomic uint64_t next_conn;
};

static void *racer_main(void *arg)
{
	struct racer *r = arg;
	struct coffer_oid missing, mine;
	const void *data;
	uint64_t size;
	coffer_handle_t c;
	void *wr;

	memset(&missing, 0x11, sizeof(missing));
	memset(&mine, 0x22, sizeof(mine));
	/* warm: the hidden EQ and its channel exist, no clock_gettime() before the submit */
	(void)coffer_obj_get_oid(r->conn, &missing, 0, &data, &size, NULL);
	t_armed = true;
	r->first_rc = coffer_obj_get_oid(r->conn, &missing, 1000, &data, &size, NULL);
	t_armed = false;
	c.cookie = atomic_load(&r->next_conn);
	r->second_rc = coffer_obj_get_oid(c, &missing, 0, &data, &size, NULL);
	r->third_rc = coffer_obj_create_oid(c, &mine, 64, 0, &wr, NULL);
	if (r->third_rc == 0)
		r->third_rc = coffer_obj_seal_oid(c, &mine, 0, NULL);
	if (r->third_rc == 0)
		r->third_rc = coffer_obj_get_oid(c, &mine, 0, &data, &size, NULL);
	if (r->third_rc == 0)
		r->third_rc = coffer_obj_release_oid(c, &mine, NULL);
	if (r->third_rc == 0)
		r->third_rc = coffer_obj_delete(c, &mine, NULL);
	return NULL;
}

static void race_once(bool restart)
{
	struct racer r = {0};
	coffer_handle_t c2 = COFFER_HANDLE_NULL;
	pthread_t tid;

	assert_int_equal(coffer_init(), 0);
	assert_int_equal(coffer_connect(g_st.sock, &r.conn), 0);
	assert_int_equal(pthread_create(&tid, NULL, racer_main, &r), 0);
	while (sem_wait(&race_go) != 0)
		;
	/* The racer's request is out; it has not started waiting. */
	assert_int_equal(coffer_disconnect(r.conn), 0);
	assert_int_equal(coffer_fini(), 0); /* the last reference: the runtime stops */
	assert_null(coffer_hhash_global());
	if (restart) {
		assert_int_equal(coffer_init(), 0);
		assert_int_equal(coffer_connect(g_st.sock, &c2), 0);
	}
	atomic_store(&r.next_conn, c2.cookie);
	sem_post(&race_done);
	assert_int_equal(pthread_join(tid, NULL), 0);
	fprintf(stderr, "restart=%d: %d %d %d\n", restart, r.first_rc, r.second_rc, r.third_rc);
	/* the event's result: the connection went away under the call */
	assert_int_equal(r.first_rc, -ENOTCONN);
	if (restart) {
		assert_int_equal(r.second_rc, -ENOENT); /* missing, not -EBUSY */
		assert_int_equal(r.third_rc, 0);
		assert_int_equal(coffer_disconnect(c2), 0);
		assert_int_equal(coffer_fini(), 0);
	} else {
		assert_int_equal(r.second_rc, -ENOTCONN); /* no runtime, no connection */
	}
	assert_null(coffer_hhash_global());
}

static void test_blocking_vs_last_disconnect_and_fini(void **state)
{
	(void)state;
	race_once(false);
}

static void test_blocking_vs_fini_then_init(void **state)
{
	(void)state;
	race_once(true);
}

static int group_setup(void **state)
{
	(void)state;
	sem_init(&race_go, 0, 0);
	sem_init(&race_done, 0, 0);
	return store_start(&g_st, "64M") == 0 ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	return store_stop(&g_st) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_blocking_vs_last_disconnect_and_fini),
	    cmocka_unit_test(test_blocking_vs_fini_then_init),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
