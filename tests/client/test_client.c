/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/client/test_client.c - integration tests of the client API against a real
 * coffer-store (one store per test, on a temporary socket, stopped at the end).
 *
 * Covers: blocking and asynchronous create/seal/get/release, argument validation,
 * multi-threaded clients (own EQs and a shared EQ), replace, get with a timeout waiting for
 * a seal from another process, many objects and bulk gets, -EAGAIN on a full channel, store
 * killed -> pending events complete with -ENOTCONN, a fork child using coffer, disconnect
 * releasing everything. Each test ends by checking that the store's used bytes are back to
 * the baseline and that every handle was closed.
 *
 * Worker threads never call cmocka's assertions (only the main thread may): they count
 * failures, which the main thread asserts on after joining.
 */
#include <errno.h>
#include <signal.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <coffer/coffer.h>

#include "hashtable/htab_internal.h"
#include "runtime/client.h"
#include "runtime/env.h"
#include "runtime/proto.h"
#include "sig_tick.h"
#include "store_fixture.h"

#define coffer_conn_stray(c) coffer__conn_stray_replies(c)

struct tctx {
	struct store_fixture store;
	uint64_t handles0; /* handle-hash population before the test */
};

static void make_oid(struct coffer_oid *oid, uint32_t space, uint64_t n)
{
	memset(oid, 0, sizeof(*oid));
	memcpy(oid->id, &space, sizeof(space));
	memcpy(oid->id + 4, &n, sizeof(n));
	oid->id[19] = 0xc0;
}

static void fill(void *p, uint64_t size, uint64_t seed)
{
	uint8_t *b = p;

	for (uint64_t i = 0; i < size; i++)
		b[i] = (uint8_t)(seed * 131 + i * 7);
}

static bool check(const void *p, uint64_t size, uint64_t seed)
{
	const uint8_t *b = p;

	for (uint64_t i = 0; i < size; i++)
		if (b[i] != (uint8_t)(seed * 131 + i * 7))
			return false;
	return true;
}

static int setup(void **state)
{
	struct tctx *t = calloc(1, sizeof(*t));
	int rc;

	if (!t)
		return -1;
	rc = store_start(&t->store, "64M");
	if (rc < 0) {
		fprintf(stderr, "cannot start coffer-store: %s\n", strerror(-rc));
		free(t);
		return -1;
	}
	if (coffer_init() < 0) {
		store_stop(&t->store);
		free(t);
		return -1;
	}
	t->handles0 = coffer_hhash_count(coffer_hhash_global());
	*state = t;
	return 0;
}

static int teardown(void **state)
{
	struct tctx *t = *state;
	int rc;

	rc = store_stop(&t->store);
	coffer_fini();
	free(t);
	return rc == 0 || rc == -1 ? 0 : -1;
}

/* The store's used bytes and unsealed objects, through a fresh connection. */
static void query(struct tctx *t, struct coffer_store_info *info)
{
	coffer_handle_t c;

	assert_int_equal(coffer_connect(t->store.sock, &c), 0);
	assert_int_equal(coffer_store_query(c, info), 0);
	assert_int_equal(coffer_disconnect(c), 0);
}

/* Waits (bounded) until the store shows @used bytes and no unsealed object. */
static void expect_used(struct tctx *t, uint64_t used)
{
	struct coffer_store_info info = {0};

	for (int i = 0; i < 200; i++) {
		query(t, &info);
		if (info.used_bytes == used && info.objects_created == 0)
			return;
		usleep(10000);
	}
	if (info.used_bytes != used || info.objects_created != 0)
		fprintf(stderr, "store: used %llu created %llu sealed %llu\n",
			(unsigned long long)info.used_bytes,
			(unsigned long long)info.objects_created,
			(unsigned long long)info.objects_sealed);
	assert_int_equal(info.used_bytes, used);
	assert_int_equal(info.objects_created, 0);
}

static void expect_handles_closed(struct tctx *t)
{
	coffer__obj_thread_release(); /* the hidden EQ of this thread's blocking calls */
	assert_int_equal(coffer_hhash_count(coffer_hhash_global()), t->handles0);
}

/* ---- blocking ------------------------------------------------------------------------- */

static void test_blocking_basic(void **state)
{
	struct tctx *t = *state;
	struct coffer_store_info info;
	coffer_handle_t c1, c2, oh1, oh2;
	struct coffer_oid oid;
	const void *rd;
	uint64_t size = 0;
	void *wr = NULL;
	bool present = true;

	query(t, &info);
	assert_int_equal(info.version, COFFER_PROTO_VERSION);
	assert_true(info.capacity_bytes >= (64u << 20));
	assert_int_equal(coffer_connect(t->store.sock, &c1), 0);
	assert_int_equal(coffer_connect(t->store.sock, &c2), 0);
	make_oid(&oid, 1, 1);
	assert_int_equal(coffer_obj_open(c1, &oid, 0, &oh1), 0);
	assert_int_equal(coffer_obj_open(c2, &oid, 0, &oh2), 0);

	assert_int_equal(coffer_obj_contains(c2, &oid, &present, NULL), 0);
	assert_false(present);
	assert_int_equal(coffer_obj_get(oh2, 0, &rd, &size, NULL), -ENOENT);
	assert_int_equal(coffer_obj_create(oh1, 10000, 0, &wr, NULL), 0);
	assert_non_null(wr);
	fill(wr, 10000, 5);
	/* unsealed: invisible to others, sealing belongs to the creator */
	assert_int_equal(coffer_obj_get(oh2, 0, &rd, &size, NULL), -ENOENT);
	assert_int_equal(coffer_obj_seal(oh2, 0, NULL), -EPERM);
	assert_int_equal(coffer_obj_create(oh2, 10, 0, &wr, NULL), -EEXIST);
	assert_int_equal(coffer_obj_seal(oh1, 0, NULL), 0);
	assert_int_equal(coffer_obj_seal(oh1, 0, NULL), -EALREADY);
	assert_int_equal(coffer_obj_release(oh1, NULL), 0);
	assert_int_equal(coffer_obj_release(oh1, NULL), -ENOENT);

	assert_int_equal(coffer_obj_contains(c2, &oid, &present, NULL), 0);
	assert_true(present);
	assert_int_equal(coffer_obj_get(oh2, 0, &rd, &size, NULL), 0);
	assert_int_equal(size, 10000);
	assert_true(check(rd, size, 5));
	assert_int_equal(coffer_obj_release(oh2, NULL), 0);

	/* 0-byte object and the all-zero ObjectID */
	{
		struct coffer_oid zero = {0};
		coffer_handle_t oz;

		assert_int_equal(coffer_obj_open(c1, &zero, 0, &oz), 0);
		assert_int_equal(coffer_obj_create(oz, 0, 0, &wr, NULL), 0);
		assert_int_equal(coffer_obj_seal(oz, COFFER_SEAL_RELEASE, NULL), 0);
		assert_int_equal(coffer_obj_get(oz, 0, &rd, &size, NULL), 0);
		assert_int_equal(size, 0);
		assert_int_equal(coffer_obj_release(oz, NULL), 0);
		assert_int_equal(coffer_obj_delete(c1, &zero, NULL), 0);
		assert_int_equal(coffer_obj_close(oz), 0);
	}

	/* abort: a failed create leaves no trace */
	{
		struct coffer_oid o2;
		coffer_handle_t oa;

		make_oid(&o2, 1, 2);
		assert_int_equal(coffer_obj_open(c1, &o2, 0, &oa), 0);
		assert_int_equal(coffer_obj_create(oa, 1 << 20, 0, &wr, NULL), 0);
		assert_int_equal(coffer_obj_abort(oa, NULL), 0);
		assert_int_equal(coffer_obj_create(oa, 1ull << 40, 0, &wr, NULL), -E2BIG);
		assert_int_equal(coffer_obj_create(oa, 100, 0, &wr, NULL), 0);
		assert_int_equal(coffer_obj_abort(oa, NULL), 0);
		assert_int_equal(coffer_obj_close(oa), 0);
	}

	assert_int_equal(coffer_obj_delete(c2, &oid, NULL), 0);
	assert_int_equal(coffer_obj_contains(c1, &oid, &present, NULL), 0);
	assert_false(present);
	assert_int_equal(coffer_obj_close(oh1), 0);
	assert_int_equal(coffer_obj_close(oh1), -ENOENT);
	assert_int_equal(coffer_obj_close(oh2), 0);
	assert_int_equal(coffer_conn_stray(c1), 0);
	assert_int_equal(coffer_disconnect(c1), 0);
	assert_int_equal(coffer_disconnect(c2), 0);
	assert_int_equal(coffer_disconnect(c2), -ENOENT);
	expect_used(t, 0);
	expect_handles_closed(t);
}

/* Many handles kept open: their records span several of the per-thread chunks they are
 * carved from (16 KiB doubling to 2 MiB; the smaller ones carved from a shared hugepage
 * region, the largest mapped on their own), each keeps its own ObjectID, and closing them all
 * leaves the handle hash as it was. */
static void test_many_handles(void **state)
{
	struct tctx *t = *state;
	enum { N = 50000 };
	coffer_handle_t c, *oh = calloc(N, sizeof(*oh));
	uint64_t count0;
	unsigned int probe[] = {0, 170, 20000, 30001, N - 1};
	struct coffer_oid oid;
	bool present;
	void *wr;

	assert_non_null(oh);
	assert_int_equal(coffer_connect(t->store.sock, &c), 0);
	count0 = coffer_hhash_count(coffer_hhash_global());
	for (unsigned int i = 0; i < N; i++) {
		make_oid(&oid, 7, i);
		assert_int_equal(coffer_obj_open(c, &oid, 0, &oh[i]), 0);
		assert_true(i == 0 || oh[i].cookie != oh[i - 1].cookie);
	}
	assert_int_equal(coffer_hhash_count(coffer_hhash_global()), count0 + N);
	/* A handle acts on its own ObjectID wherever its record lives. */
	for (unsigned int k = 0; k < sizeof(probe) / sizeof(probe[0]); k++) {
		assert_int_equal(coffer_obj_create(oh[probe[k]], 64, 0, &wr, NULL), 0);
		assert_int_equal(coffer_obj_seal(oh[probe[k]], COFFER_SEAL_RELEASE, NULL), 0);
		make_oid(&oid, 7, probe[k]);
		present = false;
		assert_int_equal(coffer_obj_contains(c, &oid, &present, NULL), 0);
		assert_true(present);
		make_oid(&oid, 7, probe[k] + 1);
		if (k + 1 < sizeof(probe) / sizeof(probe[0]) && probe[k + 1] != probe[k] + 1) {
			assert_int_equal(coffer_obj_contains(c, &oid, &present, NULL), 0);
			assert_false(present);
		}
	}
	for (unsigned int i = 0; i < N; i++)
		assert_int_equal(coffer_obj_close(oh[i]), 0);
	assert_int_equal(coffer_obj_close(oh[N / 2]), -ENOENT);
	coffer__obj_thread_release(); /* the hidden EQ of the blocking calls above */
	assert_int_equal(coffer_hhash_count(coffer_hhash_global()), count0);
	/* Open again after closing everything: records come back through the caches. */
	for (unsigned int i = 0; i < 1000; i++) {
		make_oid(&oid, 8, i);
		assert_int_equal(coffer_obj_open(c, &oid, 0, &oh[i]), 0);
	}
	for (unsigned int i = 0; i < 1000; i++)
		assert_int_equal(coffer_obj_close(oh[i]), 0);
	assert_int_equal(coffer_disconnect(c), 0);
	free(oh);
	expect_handles_closed(t);
}

/* Several threads open handles at once: their chunks are carved from one shared region
 * concurrently (runtime/obj.c region_carve), and must never overlap. An overlap would make
 * one open overwrite another's linked record: a handle that no longer resolves, a close that
 * fails, a hash count off, or an ObjectID that is not the handle's own. */
enum { CONC_THREADS = 4, CONC_N = 6000 };

struct conc_arg {
	coffer_handle_t conn;
	uint32_t space;
	coffer_handle_t oh[CONC_N];
	unsigned int failures;
	pthread_barrier_t *bar;
};

static void *conc_open_main(void *p)
{
	struct conc_arg *a = p;
	struct coffer_oid oid;

	pthread_barrier_wait(a->bar);
	for (unsigned int i = 0; i < CONC_N; i++) {
		make_oid(&oid, a->space, i);
		if (coffer_obj_open(a->conn, &oid, 0, &a->oh[i]) != 0)
			a->failures++;
	}
	return NULL;
}

static void test_concurrent_open(void **state)
{
	struct tctx *t = *state;
	struct conc_arg *a = calloc(CONC_THREADS, sizeof(*a));
	pthread_t th[CONC_THREADS];
	pthread_barrier_t bar;
	coffer_handle_t c;
	struct coffer_oid oid;
	uint64_t count0;
	bool present;
	void *wr;

	assert_non_null(a);
	assert_int_equal(coffer_connect(t->store.sock, &c), 0);
	count0 = coffer_hhash_count(coffer_hhash_global());
	assert_int_equal(pthread_barrier_init(&bar, NULL, CONC_THREADS), 0);
	for (unsigned int k = 0; k < CONC_THREADS; k++) {
		a[k].conn = c;
		a[k].space = 100 + k;
		a[k].bar = &bar;
		assert_int_equal(pthread_create(&th[k], NULL, conc_open_main, &a[k]), 0);
	}
	for (unsigned int k = 0; k < CONC_THREADS; k++)
		assert_int_equal(pthread_join(th[k], NULL), 0);
	pthread_barrier_destroy(&bar);
	for (unsigned int k = 0; k < CONC_THREADS; k++)
		assert_int_equal(a[k].failures, 0);
	assert_int_equal(coffer_hhash_count(coffer_hhash_global()), count0 + CONC_THREADS * CONC_N);
	/* Each thread's first and last handle acts on its own ObjectID. */
	for (unsigned int k = 0; k < CONC_THREADS; k++) {
		unsigned int probe[] = {0, CONC_N - 1};

		for (unsigned int j = 0; j < 2; j++) {
			assert_int_equal(coffer_obj_create(a[k].oh[probe[j]], 64, 0, &wr, NULL), 0);
			assert_int_equal(
			    coffer_obj_seal(a[k].oh[probe[j]], COFFER_SEAL_RELEASE, NULL), 0);
			make_oid(&oid, a[k].space, probe[j]);
			present = false;
			assert_int_equal(coffer_obj_contains(c, &oid, &present, NULL), 0);
			assert_true(present);
		}
	}
	for (unsigned int k = 0; k < CONC_THREADS; k++)
		for (unsigned int i = 0; i < CONC_N; i++)
			assert_int_equal(coffer_obj_close(a[k].oh[i]), 0);
	coffer__obj_thread_release();
	assert_int_equal(coffer_hhash_count(coffer_hhash_global()), count0);
	assert_int_equal(coffer_disconnect(c), 0);
	free(a);
	expect_handles_closed(t);
}

static void test_invalid_args(void **state)
{
	struct tctx *t = *state;
	coffer_handle_t c, oh, eq;
	struct coffer_oid oid;
	struct coffer_event ev;
	struct coffer_obj_buf buf;
	const void *rd;
	void *wr;
	bool present;

	make_oid(&oid, 2, 1);
	assert_int_equal(coffer_connect(t->store.sock, NULL), -EINVAL);
	assert_int_equal(coffer_connect("", &c), -EINVAL); /* was -ECONNREFUSED: abstract "\0" */
	assert_int_equal(coffer_connect("/nonexistent/coffer.sock", &c), -ECONNREFUSED);
	/* a bad environment override is refused, not replaced by the default */
	{
		static const char *const bad[][2] = {
		    {"COFFER_BATCH", "0"},
		    {"COFFER_BATCH", "32x"},
		    {"COFFER_BATCH", "99999"},
		    {"COFFER_MAP_POPULATE", "2"},
		    {"COFFER_MAP_POPULATE", "no"},
		    {"COFFER_POLL_SPIN_US", "-1"},
		    {"COFFER_POLL_SPIN_US", "1e3"},
		    {"COFFER_STORE_TIMEOUT_MS", "99"},
		    {"COFFER_STORE_TIMEOUT_MS", "10s"},
		};

		/* coffer_init()'s variables: coffer_env_check() names them too */
		static const char *const bad_init[][2] = {
		    {"COFFER_HHASH_BUCKETS_LOG2", "0"},
		    {"COFFER_HHASH_BUCKETS_LOG2", "27"},
		    {"COFFER_HHASH_LOCKS_LOG2", "19"}, /* above the default 18 buckets */
		    {"COFFER_RCU_PERCPU", "2"},
		};
		/* the largest value of each: accepted by coffer_connect() and the check alike */
		static const char *const max_ok[][2] = {
		    {"COFFER_BATCH", "4096"},
		    {"COFFER_MAP_POPULATE", "1"},
		    {"COFFER_POLL_SPIN_US", "1000000"},
		    {"COFFER_STORE_TIMEOUT_MS", "3600000"},
		};
		const char *name = "unset";

		/* the -EINVAL text points at the environment: nothing else explains it here */
		assert_non_null(strstr(coffer_strerror(-EINVAL), "COFFER_* environment variable"));
		assert_int_equal(coffer_env_check(&name), 0);
		assert_null(name);
		assert_int_equal(coffer_env_check(NULL), 0);
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			assert_int_equal(setenv(bad[i][0], bad[i][1], 1), 0);
			assert_int_equal(coffer_connect(t->store.sock, &c), -EINVAL);
			assert_int_equal(coffer_env_check(&name), -EINVAL);
			assert_non_null(name);
			assert_string_equal(name, bad[i][0]);
			assert_int_equal(coffer_env_check(NULL), -EINVAL);
			assert_int_equal(unsetenv(bad[i][0]), 0);
			assert_int_equal(coffer_env_check(&name), 0);
		}
		for (size_t i = 0; i < sizeof(bad_init) / sizeof(bad_init[0]); i++) {
			assert_int_equal(setenv(bad_init[i][0], bad_init[i][1], 1), 0);
			assert_int_equal(coffer_env_check(&name), -EINVAL);
			assert_string_equal(name, bad_init[i][0]);
			assert_int_equal(unsetenv(bad_init[i][0]), 0);
		}
		/* the message says why: more lock stripes than buckets is no typo */
		{
			char why[256];

			assert_int_equal(coffer__env_explain(why, sizeof(why)), 0);
			assert_string_equal(why, "");
			assert_int_equal(setenv("COFFER_HHASH_LOCKS_LOG2", "20", 1), 0);
			assert_int_equal(coffer__env_explain(why, sizeof(why)), -EINVAL);
			assert_string_equal(why,
					    "environment variable COFFER_HHASH_LOCKS_LOG2=\"20\" "
					    "is above COFFER_HHASH_BUCKETS_LOG2 (18, the "
					    "default): more lock stripes than hash buckets");
			assert_int_equal(setenv("COFFER_HHASH_BUCKETS_LOG2", "10", 1), 0);
			assert_int_equal(coffer__env_explain(why, sizeof(why)), -EINVAL);
			assert_non_null(
			    strstr(why, "is above COFFER_HHASH_BUCKETS_LOG2 (10): more"));
			assert_int_equal(setenv("COFFER_HHASH_LOCKS_LOG2", "27", 1), 0);
			assert_int_equal(coffer__env_explain(why, sizeof(why)), -EINVAL);
			assert_string_equal(why,
					    "environment variable COFFER_HHASH_LOCKS_LOG2=\"27\" "
					    "is not a decimal number in its range");
			assert_int_equal(unsetenv("COFFER_HHASH_BUCKETS_LOG2"), 0);
			assert_int_equal(unsetenv("COFFER_HHASH_LOCKS_LOG2"), 0);
			assert_int_equal(setenv("COFFER_BATCH", "0", 1), 0);
			assert_int_equal(coffer__env_explain(why, sizeof(why)), -EINVAL);
			assert_string_equal(why, "environment variable COFFER_BATCH=\"0\" is not a "
						 "decimal number in its range");
			assert_int_equal(unsetenv("COFFER_BATCH"), 0);
		}
		/* locks may equal buckets; both at their largest */
		assert_int_equal(setenv("COFFER_HHASH_BUCKETS_LOG2", "26", 1), 0);
		assert_int_equal(setenv("COFFER_HHASH_LOCKS_LOG2", "26", 1), 0);
		assert_int_equal(setenv("COFFER_RCU_PERCPU", "1", 1), 0);
		assert_int_equal(coffer_env_check(&name), 0);
		assert_int_equal(unsetenv("COFFER_HHASH_BUCKETS_LOG2"), 0);
		assert_int_equal(unsetenv("COFFER_HHASH_LOCKS_LOG2"), 0);
		assert_int_equal(unsetenv("COFFER_RCU_PERCPU"), 0);
		for (size_t i = 0; i < sizeof(max_ok) / sizeof(max_ok[0]); i++) {
			assert_int_equal(setenv(max_ok[i][0], max_ok[i][1], 1), 0);
			assert_int_equal(coffer_env_check(&name), 0);
			assert_int_equal(coffer_connect(t->store.sock, &c), 0);
			assert_int_equal(coffer_disconnect(c), 0);
			assert_int_equal(unsetenv(max_ok[i][0]), 0);
		}
		/* the first bad one in the documented order is named */
		assert_int_equal(setenv("COFFER_STORE_TIMEOUT_MS", "1", 1), 0);
		assert_int_equal(setenv("COFFER_BATCH", "0", 1), 0);
		assert_int_equal(coffer_env_check(&name), -EINVAL);
		assert_string_equal(name, "COFFER_BATCH");
		assert_int_equal(unsetenv("COFFER_STORE_TIMEOUT_MS"), 0);
		assert_int_equal(unsetenv("COFFER_BATCH"), 0);
		assert_int_equal(setenv("COFFER_BATCH", "16", 1), 0);
		assert_int_equal(setenv("COFFER_MAP_POPULATE", "0", 1), 0);
		assert_int_equal(coffer_connect(t->store.sock, &c), 0);
		assert_int_equal(coffer_disconnect(c), 0);
		assert_int_equal(unsetenv("COFFER_BATCH"), 0);
		assert_int_equal(unsetenv("COFFER_MAP_POPULATE"), 0);
	}
	assert_int_equal(coffer_connect(t->store.sock, &c), 0);
	assert_int_equal(coffer_obj_open(c, NULL, 0, &oh), -EINVAL);
	assert_int_equal(coffer_obj_open(c, &oid, 0, NULL), -EINVAL);
	assert_int_equal(coffer_obj_open(c, &oid, 0x80, &oh), -EINVAL);
	assert_int_equal(coffer_obj_open(COFFER_HANDLE_NULL, &oid, 0, &oh), -EINVAL);
	/* a connection-typed handle that names no connection */
	assert_int_equal(coffer_obj_open((coffer_handle_t){.cookie = c.cookie + 16}, &oid, 0, &oh),
			 -ENOENT);
	assert_int_equal(coffer_obj_open(c, &oid, 0, &oh), 0);
	/* an object handle is not a connection, and vice versa: -EINVAL, as in every call */
	assert_int_equal(coffer_obj_open(oh, &oid, 0, &eq), -EINVAL);
	/* ... and a connection or EQ handle is not an object handle: -EINVAL, not -ENOENT,
	 * which from a get would read as "object missing" */
	assert_int_equal(coffer_obj_seal(c, 0, NULL), -EINVAL);
	assert_int_equal(coffer_obj_create(c, 1, 0, &wr, NULL), -EINVAL);
	assert_int_equal(coffer_obj_get(c, 0, &rd, NULL, NULL), -EINVAL);
	assert_int_equal(coffer_obj_release(COFFER_HANDLE_NULL, NULL), -EINVAL);
	assert_int_equal(coffer_obj_close(c), -EINVAL);
	assert_int_equal(coffer_eq_create(&eq), 0);
	assert_int_equal(coffer_obj_abort(eq, NULL), -EINVAL);
	assert_int_equal(coffer_eq_destroy(eq, 0), 0);
	/* an object-typed handle that names no handle */
	assert_int_equal(
	    coffer_obj_get((coffer_handle_t){.cookie = oh.cookie + 16}, 0, &rd, NULL, NULL),
	    -ENOENT);
	assert_int_equal(coffer_obj_create(oh, 1, 0x8, &wr, NULL), -EINVAL);
	assert_int_equal(coffer_obj_create(oh, 1, 0, NULL, NULL), -EINVAL);
	assert_int_equal(coffer_obj_seal(oh, 0x10, NULL), -EINVAL);
	assert_int_equal(coffer_obj_get(oh, 0, NULL, NULL, NULL), -EINVAL);
	assert_int_equal(coffer_obj_contains(c, &oid, NULL, NULL), -EINVAL);
	assert_int_equal(coffer_obj_contains(c, NULL, &present, NULL), -EINVAL);
	assert_int_equal(coffer_obj_delete(c, NULL, NULL), -EINVAL);
	assert_int_equal(coffer_obj_get_bulk(c, &oid, 0, 0, &buf, NULL), -EINVAL);
	assert_int_equal(coffer_obj_get_bulk(c, &oid, COFFER_GET_BULK_MAX + 1, 0, &buf, NULL),
			 -EINVAL);
	assert_int_equal(coffer_store_query(c, NULL), -EINVAL);
	assert_int_equal(coffer_flush(COFFER_HANDLE_NULL), -EINVAL);
	/* an uninitialised event is refused before anything is sent */
	memset(&ev, 0, sizeof(ev));
	assert_int_equal(coffer_obj_get(oh, 0, &rd, NULL, &ev), -EINVAL);
	/* a running event cannot be launched twice */
	assert_int_equal(coffer_eq_create(&eq), 0);
	assert_int_equal(coffer_event_init(&ev, eq, NULL), 0);
	assert_int_equal(coffer_obj_get(oh, -1, &rd, NULL, &ev), 0);
	assert_int_equal(coffer_obj_get(oh, -1, &rd, NULL, &ev), -EBUSY);
	/* disconnect completes the waiting get with -ENOTCONN */
	assert_int_equal(coffer_disconnect(c), 0);
	{
		struct coffer_event *done;

		assert_int_equal(coffer_eq_poll(eq, 1, 5000000, 1, &done), 1);
		assert_ptr_equal(done, &ev);
		assert_int_equal(ev.ev_error, -ENOTCONN);
	}
	assert_int_equal(coffer_obj_get(oh, 0, &rd, NULL, NULL), -ENOTCONN);
	assert_int_equal(coffer_obj_get_bulk(c, &oid, 1, 0, &buf, NULL), -ENOTCONN);
	assert_int_equal(coffer_obj_close(oh), 0);
	assert_int_equal(coffer_event_fini(&ev), 0);
	assert_int_equal(coffer_eq_destroy(eq, 0), 0);
	expect_used(t, 0);
	expect_handles_closed(t);
}

/* ---- asynchronous ----------------------------------------------------------------------- */

/* Polls @eq until @ev completed; returns its ev_error (or a poll error). */
static int wait_ev(coffer_handle_t eq, struct coffer_event *ev)
{
	struct coffer_event *done[8];

	for (int i = 0; i < 1000; i++) {
		int n = coffer_eq_poll(eq, 1, 100000, 8, done);

		if (n < 0)
			return n;
		for (int k = 0; k < n; k++)
			if (done[k] == ev)
				return ev->ev_error;
	}
	return -ETIMEDOUT;
}

/*
 * -ENAMETOOLONG: a Unix socket path holds 107 bytes. Said for @path and $COFFER_SOCKET, and
 * for the default path that coffer_connect(NULL) makes from $XDG_RUNTIME_DIR, which the
 * store.h comment did not list (docaudit). 107 bytes still go through to connect(2).
 */
static void test_connect_path_too_long(void **state)
{
	char *old_sock = getenv("COFFER_SOCKET") ? strdup(getenv("COFFER_SOCKET")) : NULL;
	char *old_xdg = getenv("XDG_RUNTIME_DIR") ? strdup(getenv("XDG_RUNTIME_DIR")) : NULL;
	char path[200], top[] = "/tmp/coffer-xdg-XXXXXX", xdg[200];
	coffer_handle_t c;
	size_t n;

	(void)state;
	/* 108 bytes: too long; 107: a path nothing listens on */
	memset(path, 'a', sizeof(path));
	path[0] = '/';
	path[108] = '\0';
	assert_int_equal(coffer_connect(path, &c), -ENAMETOOLONG);
	path[107] = '\0';
	assert_int_equal(coffer_connect(path, &c), -ECONNREFUSED);
	/* the same through $COFFER_SOCKET */
	path[107] = 'a';
	assert_int_equal(setenv("COFFER_SOCKET", path, 1), 0);
	assert_int_equal(coffer_connect(NULL, &c), -ENAMETOOLONG);
	/* the default path in an existing $XDG_RUNTIME_DIR whose name leaves no room for
	 * "/coffer.sock" */
	assert_int_equal(unsetenv("COFFER_SOCKET"), 0);
	assert_non_null(mkdtemp(top));
	n = (size_t)snprintf(xdg, sizeof(xdg), "%s/", top);
	memset(xdg + n, 'd', 100 - n);
	xdg[100] = '\0';
	assert_int_equal(mkdir(xdg, 0700), 0);
	assert_int_equal(setenv("XDG_RUNTIME_DIR", xdg, 1), 0);
	assert_int_equal(coffer_connect(NULL, &c), -ENAMETOOLONG);
	assert_int_equal(rmdir(xdg), 0);
	assert_int_equal(rmdir(top), 0);
	if (old_sock)
		assert_int_equal(setenv("COFFER_SOCKET", old_sock, 1), 0);
	if (old_xdg)
		assert_int_equal(setenv("XDG_RUNTIME_DIR", old_xdg, 1), 0);
	else
		assert_int_equal(unsetenv("XDG_RUNTIME_DIR"), 0);
	free(old_sock);
	free(old_xdg);
}

/*
 * An event whose EQ was destroyed is refused by every object call with -ENOENT, nothing
 * sent: when the EQ had a channel to the connection (the launch refuses) and when it had
 * none (the channel's open refuses). store.h's list of an @ev call's refusals did not name
 * it (docaudit), and through an object handle it reads like a closed handle's -ENOENT.
 */
static void test_launch_on_destroyed_eq(void **state)
{
	struct tctx *t = *state;
	coffer_handle_t c, eq, oh;
	struct coffer_event ev;
	struct coffer_oid oid, ids[2];
	struct coffer_obj_buf bufs[2];
	const void *rd;
	void *wr[2];
	bool present = true;

	make_oid(&oid, 77, 1);
	ids[0] = ids[1] = oid;
	assert_int_equal(coffer_connect(t->store.sock, &c), 0);
	assert_int_equal(coffer_obj_open(c, &oid, 0, &oh), 0);
	for (int had_channel = 0; had_channel < 2; had_channel++) {
		assert_int_equal(coffer_eq_create(&eq), 0);
		assert_int_equal(coffer_event_init(&ev, eq, NULL), 0);
		if (had_channel) {
			assert_int_equal(coffer_obj_contains(c, &oid, &present, &ev), 0);
			assert_int_equal(wait_ev(eq, &ev), 0);
			assert_false(present);
		}
		assert_int_equal(coffer_eq_destroy(eq, 0), 0);
		assert_int_equal(coffer_obj_contains(c, &oid, &present, &ev), -ENOENT);
		assert_int_equal(coffer_obj_create_oid(c, &oid, 8, 0, &wr[0], &ev), -ENOENT);
		assert_int_equal(coffer_obj_create(oh, 8, 0, &wr[0], &ev), -ENOENT);
		assert_int_equal(coffer_obj_get(oh, 0, &rd, NULL, &ev), -ENOENT);
		assert_int_equal(coffer_obj_get_bulk(c, ids, 2, 0, bufs, &ev), -ENOENT);
		assert_int_equal(coffer_obj_reserve(c, 64, 2, wr, &ev), -ENOENT);
		assert_null(wr[0]);
		assert_int_equal(coffer_flush(c), 0);
		assert_int_equal(coffer_event_fini(&ev), 0);
	}
	/* nothing was sent: no object, no reservation */
	assert_int_equal(coffer_obj_contains(c, &oid, &present, NULL), 0);
	assert_false(present);
	assert_int_equal(coffer_obj_close(oh), 0);
	assert_int_equal(coffer_disconnect(c), 0);
}

struct in_section {
	coffer_handle_t c, eq, eq2;
	struct coffer_event ev2;
	int open_rc, blocking_rc, destroy_rc, disconnect_rc, connect_rc;
	atomic_int done;
};

static void *calls_in_section(void *arg)
{
	struct in_section *x = arg;
	struct coffer_oid oid;
	coffer_handle_t c;
	bool present;

	make_oid(&oid, 78, 2);
	coffer_rcu_read_lock();
	/* a channel to open for a second EQ, and for this thread's hidden EQ */
	x->open_rc = coffer_obj_contains(x->c, &oid, &present, &x->ev2);
	x->blocking_rc = coffer_obj_contains(x->c, &oid, &present, NULL);
	x->destroy_rc = coffer_eq_destroy(x->eq, 0);
	x->disconnect_rc = coffer_disconnect(x->c);
	x->connect_rc = coffer_connect("/nonexistent/coffer.sock", &c);
	coffer_rcu_read_unlock();
	atomic_store(&x->done, 1);
	return NULL;
}

/*
 * coffer_eq_destroy() of an EQ with a channel, coffer_disconnect() and an object call that
 * opens a channel next to another wait for a grace period (the hook's detach, the channels'
 * close, the new channel vector's publication): inside the caller's own read-side section
 * they waited for themselves, for good. They refuse it with -EINVAL, nothing changed or
 * launched, as coffer_fini() does, and so does coffer_connect(), whose failure drops the
 * runtime reference it took; outside the section all work. Run on a thread that the
 * test gives up on after a minute (then the process exits: a thread stuck in its section
 * would stall every later grace period).
 */
static void test_grace_period_calls_in_read_section(void **state)
{
	struct tctx *t = *state;
	struct in_section x = {0};
	struct coffer_event ev;
	struct coffer_oid oid;
	bool present = true;
	pthread_t th;

	make_oid(&oid, 78, 1);
	assert_int_equal(coffer_connect(t->store.sock, &x.c), 0);
	assert_int_equal(coffer_eq_create(&x.eq), 0);
	assert_int_equal(coffer_event_init(&ev, x.eq, NULL), 0);
	assert_int_equal(coffer_obj_contains(x.c, &oid, &present, &ev), 0); /* opens a channel */
	assert_int_equal(wait_ev(x.eq, &ev), 0);
	assert_int_equal(coffer_eq_create(&x.eq2), 0);
	assert_int_equal(coffer_event_init(&x.ev2, x.eq2, NULL), 0);
	assert_int_equal(pthread_create(&th, NULL, calls_in_section, &x), 0);
	for (int i = 0; i < 6000 && !atomic_load(&x.done); i++)
		usleep(10000);
	if (!atomic_load(&x.done)) {
		fprintf(stderr, "a call inside a read-side section never returned\n");
		_exit(1);
	}
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(x.open_rc, -EINVAL);
	assert_int_equal(x.blocking_rc, -EINVAL);
	assert_int_equal(x.destroy_rc, -EINVAL);
	assert_int_equal(x.disconnect_rc, -EINVAL);
	/* a connect there, which failing would keep its runtime reference for good */
	assert_int_equal(x.connect_rc, -EINVAL);
	assert_int_equal(coffer_connect("/nonexistent/coffer.sock", &x.c), -ECONNREFUSED);
	/* the message says so: no argument explains this -EINVAL */
	assert_non_null(strstr(coffer_strerror(-EINVAL), "inside an RCU read-side section"));
	/* nothing changed or launched: the connection and the EQs still work */
	assert_int_equal(coffer_eq_query(x.eq2, COFFER_EQR_ALL, 0, NULL), 0);
	assert_int_equal(coffer_obj_contains(x.c, &oid, &present, &ev), 0);
	assert_int_equal(wait_ev(x.eq, &ev), 0);
	assert_false(present);
	assert_int_equal(coffer_obj_contains(x.c, &oid, &present, &x.ev2), 0);
	assert_int_equal(wait_ev(x.eq2, &x.ev2), 0);
	assert_int_equal(coffer_obj_contains(x.c, &oid, &present, NULL), 0);
	assert_int_equal(coffer_event_fini(&ev), 0);
	assert_int_equal(coffer_event_fini(&x.ev2), 0);
	assert_int_equal(coffer_eq_destroy(x.eq, 0), 0);
	assert_int_equal(coffer_eq_destroy(x.eq2, 0), 0);
	assert_int_equal(coffer_disconnect(x.c), 0);
}

static void test_async_basic(void **state)
{
	struct tctx *t = *state;
	enum { N = 64 };
	coffer_handle_t c, eq, oh[N];
	struct coffer_event ev[N], *done[N];
	void *wr[N];
	const void *rd[N];
	uint64_t sz[N];
	int got;

	assert_int_equal(coffer_connect(t->store.sock, &c), 0);
	assert_int_equal(coffer_eq_create(&eq), 0);
	for (int i = 0; i < N; i++) {
		struct coffer_oid oid;

		make_oid(&oid, 3, (uint64_t)i);
		assert_int_equal(coffer_obj_open(c, &oid, 0, &oh[i]), 0);
		assert_int_equal(coffer_event_init(&ev[i], eq, NULL), 0);
	}
	/* create N as one batch: nothing may complete before a poll or flush publishes it */
	for (int i = 0; i < N; i++)
		assert_int_equal(coffer_obj_create(oh[i], 4096 + (uint64_t)i, 0, &wr[i], &ev[i]),
				 0);
	assert_int_equal(coffer_flush(c), 0);
	got = 0;
	while (got < N) {
		int n = coffer_eq_poll(eq, 1, 5000000, N, done);

		assert_true(n > 0);
		for (int k = 0; k < n; k++)
			assert_int_equal(done[k]->ev_error, 0);
		got += n;
	}
	for (int i = 0; i < N; i++) {
		fill(wr[i], 4096 + (uint64_t)i, (uint64_t)i);
		assert_int_equal(coffer_obj_seal(oh[i], COFFER_SEAL_RELEASE, &ev[i]), 0);
	}
	for (got = 0; got < N;) {
		int n = coffer_eq_poll(eq, 1, 5000000, N, done);

		assert_true(n > 0);
		for (int k = 0; k < n; k++)
			assert_int_equal(done[k]->ev_error, 0);
		got += n;
	}
	for (int i = 0; i < N; i++)
		assert_int_equal(coffer_obj_get(oh[i], 0, &rd[i], &sz[i], &ev[i]), 0);
	for (got = 0; got < N;) {
		int n = coffer_eq_poll(eq, 1, 5000000, N, done);

		assert_true(n > 0);
		got += n;
	}
	for (int i = 0; i < N; i++) {
		assert_int_equal(ev[i].ev_error, 0);
		assert_int_equal(sz[i], 4096 + (uint64_t)i);
		assert_true(check(rd[i], sz[i], (uint64_t)i));
		assert_int_equal(coffer_obj_release(oh[i], &ev[i]), 0);
		assert_int_equal(wait_ev(eq, &ev[i]), 0);
		assert_int_equal(coffer_obj_delete(c, &(struct coffer_oid){{0}}, &ev[i]), 0);
		assert_int_equal(wait_ev(eq, &ev[i]), -ENOENT);
	}
	/* bulk get: all found, plus one missing ID, one duplicate */
	{
		struct coffer_oid oids[N + 2];
		struct coffer_obj_buf bufs[N + 2];

		for (int i = 0; i < N; i++)
			make_oid(&oids[i], 3, (uint64_t)i);
		make_oid(&oids[N], 3, 99999);
		oids[N + 1] = oids[0];
		assert_int_equal(coffer_obj_get_bulk(c, oids, N + 2, 0, bufs, &ev[0]), 0);
		assert_int_equal(wait_ev(eq, &ev[0]), 0);
		for (int i = 0; i < N; i++) {
			assert_int_equal(bufs[i].status, 0);
			assert_int_equal(bufs[i].size, 4096 + (uint64_t)i);
			assert_true(check(bufs[i].data, bufs[i].size, (uint64_t)i));
		}
		assert_int_equal(bufs[N].status, -ENOENT);
		assert_null(bufs[N].data);
		assert_int_equal(bufs[N + 1].status, 0);
		for (int i = 0; i < N + 2; i++) {
			if (bufs[i].status == 0)
				assert_int_equal(coffer_obj_release_oid(c, &oids[i], NULL), 0);
		}
		/* blocking bulk */
		assert_int_equal(coffer_obj_get_bulk(c, oids, 4, 0, bufs, NULL), 0);
		for (int i = 0; i < 4; i++) {
			assert_int_equal(bufs[i].status, 0);
			assert_int_equal(coffer_obj_release_oid(c, &oids[i], NULL), 0);
			assert_int_equal(coffer_obj_delete(c, &oids[i], NULL), 0);
		}
		for (int i = 4; i < N; i++)
			assert_int_equal(coffer_obj_delete(c, &oids[i], NULL), 0);
	}
	for (int i = 0; i < N; i++) {
		assert_int_equal(coffer_event_fini(&ev[i]), 0);
		assert_int_equal(coffer_obj_close(oh[i]), 0);
	}
	assert_int_equal(coffer_eq_destroy(eq, 0), 0);
	assert_int_equal(coffer_conn_stray(c), 0);
	assert_int_equal(coffer_disconnect(c), 0);
	expect_used(t, 0);
	expect_handles_closed(t);
}

/* ---- threads ------------------------------------------------------------------------- */

struct worker {
	pthread_t tid;
	unsigned int id;
	coffer_handle_t conn;
	coffer_handle_t eq; /* shared EQ, or NULL handle: own EQ */
	pthread_mutex_t *shared_lock;
	unsigned int objects;
	unsigned int failures;
	int first_err;
};

static void worker_fail(struct worker *w, int err)
{
	if (!w->failures++)
		w->first_err = err;
}

/* Polls until @ev is done; other completed events of a shared EQ are ours too (each worker
 * only waits for its own: a completion handed to another poller is seen through ev_state). */
static int worker_wait(coffer_handle_t eq, struct coffer_event *ev)
{
	bool done = false;

	for (int i = 0; i < 100000 && !done; i++) {
		int rc = coffer_event_test(ev, 100000, &done);

		if (rc < 0)
			return rc;
	}
	(void)eq;
	return done ? ev->ev_error : -ETIMEDOUT;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	coffer_handle_t eq = w->eq;
	bool own_eq = eq.cookie == 0;
	struct coffer_event ev;

	if (own_eq && coffer_eq_create(&eq) < 0) {
		worker_fail(w, -1);
		return NULL;
	}
	if (coffer_event_init(&ev, eq, NULL) < 0) {
		worker_fail(w, -2);
		goto out_eq;
	}
	for (unsigned int i = 0; i < w->objects; i++) {
		struct coffer_oid oid;
		coffer_handle_t oh;
		uint64_t size = 64 + (i % 7) * 100, got = 0;
		const void *rd = NULL;
		void *wr = NULL;
		int rc;

		make_oid(&oid, 100 + w->id, i);
		if ((rc = coffer_obj_open(w->conn, &oid, 0, &oh)) < 0) {
			worker_fail(w, rc);
			continue;
		}
		/* alternate blocking and async calls */
		if (i & 1)
			rc = coffer_obj_create(oh, size, 0, &wr, NULL);
		else if ((rc = coffer_obj_create(oh, size, 0, &wr, &ev)) == 0)
			rc = worker_wait(eq, &ev);
		if (rc == 0) {
			fill(wr, size, i + w->id);
			rc = coffer_obj_seal(oh, COFFER_SEAL_RELEASE, &ev);
			if (rc == 0)
				rc = worker_wait(eq, &ev);
		}
		if (rc == 0 && (rc = coffer_obj_get(oh, 0, &rd, &got, &ev)) == 0)
			rc = worker_wait(eq, &ev);
		if (rc == 0 && (got != size || !check(rd, size, i + w->id)))
			rc = -EIO;
		if (rc == 0)
			rc = coffer_obj_release(oh, NULL);
		if (rc == 0)
			rc = coffer_obj_delete(w->conn, &oid, NULL);
		if (rc < 0)
			worker_fail(w, rc);
		coffer_obj_close(oh);
	}
	coffer_event_fini(&ev);
out_eq:
	if (own_eq)
		coffer_eq_destroy(eq, 0);
	return NULL;
}

static void test_threads(void **state)
{
	struct tctx *t = *state;
	enum { NT = 6 };
	struct worker w[NT];
	coffer_handle_t c, shared;

	assert_int_equal(coffer_connect(t->store.sock, &c), 0);
	assert_int_equal(coffer_eq_create(&shared), 0);
	for (unsigned int i = 0; i < NT; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].id = i;
		w[i].conn = c;
		w[i].objects = 300;
		/* threads 0..2 own their EQ, 3..5 share one (and its channel) */
		w[i].eq = i < 3 ? COFFER_HANDLE_NULL : shared;
		assert_int_equal(pthread_create(&w[i].tid, NULL, worker_main, &w[i]), 0);
	}
	for (unsigned int i = 0; i < NT; i++) {
		pthread_join(w[i].tid, NULL);
		if (w[i].failures)
			fprintf(stderr, "worker %u: %u failures, first %s\n", i, w[i].failures,
				coffer_strerror(w[i].first_err));
		assert_int_equal(w[i].failures, 0);
	}
	assert_int_equal(coffer_eq_destroy(shared, 0), 0);
	assert_int_equal(coffer_conn_stray(c), 0);
	assert_int_equal(coffer_disconnect(c), 0);
	expect_used(t, 0);
	expect_handles_closed(t);
}

/* ---- replace --------------------------------------------------------------------------- */

static void test_replace(void **state)
{
	struct tctx *t = *state;
	coffer_handle_t cw, cr, ow, orr;
	struct coffer_oid oid;
	const void *old = NULL, *new = NULL;
	uint64_t sz;
	void *wr;

	make_oid(&oid, 4, 1);
	assert_int_equal(coffer_connect(t->store.sock, &cw), 0);
	assert_int_equal(coffer_connect(t->store.sock, &cr), 0);
	assert_int_equal(coffer_obj_open(cw, &oid, 0, &ow), 0);
	assert_int_equal(coffer_obj_open(cr, &oid, 0, &orr), 0);
	assert_int_equal(coffer_obj_create(ow, 8192, 0, &wr, NULL), 0);
	fill(wr, 8192, 1);
	assert_int_equal(coffer_obj_seal(ow, COFFER_SEAL_RELEASE, NULL), 0);
	assert_int_equal(coffer_obj_get(orr, 0, &old, &sz, NULL), 0);
	/* the replacement is invisible until sealed */
	assert_int_equal(coffer_obj_create(ow, 4096, COFFER_CREATE_REPLACE, &wr, NULL), 0);
	fill(wr, 4096, 2);
	assert_int_equal(coffer_obj_get(orr, 0, &new, &sz, NULL), 0);
	assert_int_equal(sz, 8192);
	assert_int_equal(coffer_obj_release(orr, NULL), 0);
	assert_int_equal(coffer_obj_seal(ow, COFFER_SEAL_RELEASE, NULL), 0);
	/* the reader still holds the old object, intact; new gets see the new one */
	assert_true(check(old, 8192, 1));
	assert_int_equal(coffer_obj_get(orr, 0, &new, &sz, NULL), 0);
	assert_int_equal(sz, 4096);
	assert_true(check(new, 4096, 2));
	assert_ptr_not_equal(old, new);
	assert_int_equal(coffer_obj_release(orr, NULL), 0); /* current */
	assert_int_equal(coffer_obj_release(orr, NULL), 0); /* the replaced one */
	assert_int_equal(coffer_obj_release(orr, NULL), -ENOENT);
	assert_int_equal(coffer_obj_delete(cr, &oid, NULL), 0);
	assert_int_equal(coffer_obj_close(ow), 0);
	assert_int_equal(coffer_obj_close(orr), 0);
	assert_int_equal(coffer_disconnect(cw), 0);
	assert_int_equal(coffer_disconnect(cr), 0);
	expect_used(t, 0);
	expect_handles_closed(t);
}

/* End of a writer/reader test: delete @a and @b, finalise @ev, destroy @eq, disconnect both
 * connections, and check that the store holds nothing and no handle is left. */
static void end_writer_reader(struct tctx *t, coffer_handle_t cw, coffer_handle_t cr,
			      coffer_handle_t eq, struct coffer_event *ev,
			      const struct coffer_oid *a, const struct coffer_oid *b)
{
	assert_int_equal(coffer_obj_delete(cr, a, NULL), 0);
	assert_int_equal(coffer_obj_delete(cr, b, NULL), 0);
	assert_int_equal(coffer_event_fini(ev), 0);
	assert_int_equal(coffer_eq_destroy(eq, 0), 0);
	assert_int_equal(coffer_disconnect(cw), 0);
	assert_int_equal(coffer_disconnect(cr), 0);
	expect_used(t, 0);
	expect_handles_closed(t);
}

/*
 * One client holds two versions of one ID (a get before a replace and a get after it, as two
 * reader threads of one process do). Releasing the old one must leave the new one pinned:
 * coffer_obj_release_data() names the exact reference. (A release by ID drops the *current*
 * object's reference first, so the reader of the new version would lose its pin, the next
 * replace would free its memory and the next create would reuse it under the reader.)
 */
static void test_release_data_after_replace(void **state)
{
	struct tctx *t = *state;
	coffer_handle_t cw, cr, eq;
	struct coffer_oid oid, other;
	struct coffer_event ev;
	const void *old = NULL, *new = NULL, *rd;
	uint64_t sz;
	void *wr;

	make_oid(&oid, 14, 1);
	make_oid(&other, 14, 2);
	assert_int_equal(coffer_connect(t->store.sock, &cw), 0);
	assert_int_equal(coffer_connect(t->store.sock, &cr), 0);
	assert_int_equal(coffer_eq_create(&eq), 0);
	assert_int_equal(coffer_event_init(&ev, eq, NULL), 0);

	/* arguments: a pointer outside the arena, no pointer, not a connection */
	assert_int_equal(coffer_obj_release_data(cr, &oid, &sz, NULL), -EINVAL);
	assert_int_equal(coffer_obj_release_data(cr, &oid, NULL, NULL), -EINVAL);
	assert_int_equal(coffer_obj_release_data(eq, &oid, &sz, NULL), -EINVAL);

	assert_int_equal(coffer_obj_create_oid(cw, &oid, 8192, 0, &wr, NULL), 0);
	fill(wr, 8192, 1);
	assert_int_equal(coffer_obj_seal_oid(cw, &oid, COFFER_SEAL_RELEASE, NULL), 0);
	assert_int_equal(coffer_obj_get_oid(cr, &oid, 0, &old, &sz, NULL), 0);
	assert_int_equal(coffer_obj_create_oid(cw, &oid, 4096, COFFER_CREATE_REPLACE, &wr, NULL),
			 0);
	fill(wr, 4096, 2);
	assert_int_equal(coffer_obj_seal_oid(cw, &oid, COFFER_SEAL_RELEASE, NULL), 0);
	assert_int_equal(coffer_obj_get_oid(cr, &oid, 0, &new, &sz, NULL), 0);
	assert_int_equal(sz, 4096);

	/* the reader of the old version is done: drop exactly that reference (asynchronously) */
	assert_true(check(old, 8192, 1));
	assert_int_equal(coffer_obj_release_data(cr, &oid, old, &ev), 0);
	assert_int_equal(wait_ev(eq, &ev), 0);
	assert_int_equal(coffer_obj_release_data(cr, &oid, old, NULL), -ENOENT);

	/* replace again and reuse memory: the new version is still pinned, so untouched */
	assert_int_equal(coffer_obj_create_oid(cw, &oid, 4096, COFFER_CREATE_REPLACE, &wr, NULL),
			 0);
	fill(wr, 4096, 3);
	assert_int_equal(coffer_obj_seal_oid(cw, &oid, COFFER_SEAL_RELEASE, NULL), 0);
	assert_int_equal(coffer_obj_create_oid(cw, &other, 4096, 0, &wr, NULL), 0);
	assert_ptr_not_equal(wr, new);
	fill(wr, 4096, 4);
	assert_int_equal(coffer_obj_seal_oid(cw, &other, COFFER_SEAL_RELEASE, NULL), 0);
	assert_true(check(new, 4096, 2));
	assert_int_equal(coffer_obj_release_data(cr, &oid, new, NULL), 0);
	assert_int_equal(coffer_obj_release_data(cr, &oid, new, NULL), -ENOENT);
	assert_int_equal(coffer_obj_release_oid(cr, &oid, NULL), -ENOENT);

	/* the current version is the third one */
	assert_int_equal(coffer_obj_get_oid(cr, &oid, 0, &rd, &sz, NULL), 0);
	assert_true(sz == 4096 && check(rd, 4096, 3));
	assert_int_equal(coffer_obj_release_data(cr, &oid, rd, NULL), 0);
	end_writer_reader(t, cw, cr, eq, &ev, &oid, &other);
}

/*
 * coffer_obj_release_data_bulk(): one batch that drops exactly the versions its pointers name.
 * The reader holds the old and the new version of one ID and one other object; releasing
 * {old, other} leaves the new version pinned (a bulk release by ID would drop the current
 * version's reference, i.e. the new one's, as the fio engine's reads once did).
 */
static void test_release_data_bulk(void **state)
{
	struct tctx *t = *state;
	coffer_handle_t cw, cr, eq;
	struct coffer_oid oid, other, ids[2];
	struct coffer_event ev;
	const void *old = NULL, *new = NULL, *oth = NULL, *ptrs[2];
	uint64_t sz, outside = 0;
	void *wr;

	make_oid(&oid, 16, 1);
	make_oid(&other, 16, 2);
	assert_int_equal(coffer_connect(t->store.sock, &cw), 0);
	assert_int_equal(coffer_connect(t->store.sock, &cr), 0);
	assert_int_equal(coffer_eq_create(&eq), 0);
	assert_int_equal(coffer_event_init(&ev, eq, NULL), 0);
	assert_int_equal(coffer_obj_create_oid(cw, &oid, 4096, 0, &wr, NULL), 0);
	fill(wr, 4096, 1);
	assert_int_equal(coffer_obj_seal_oid(cw, &oid, COFFER_SEAL_RELEASE, NULL), 0);
	assert_int_equal(coffer_obj_create_oid(cw, &other, 4096, 0, &wr, NULL), 0);
	fill(wr, 4096, 9);
	assert_int_equal(coffer_obj_seal_oid(cw, &other, COFFER_SEAL_RELEASE, NULL), 0);
	assert_int_equal(coffer_obj_get_oid(cr, &oid, 0, &old, &sz, NULL), 0);
	assert_int_equal(coffer_obj_get_oid(cr, &other, 0, &oth, &sz, NULL), 0);
	assert_int_equal(coffer_obj_create_oid(cw, &oid, 4096, COFFER_CREATE_REPLACE, &wr, NULL),
			 0);
	fill(wr, 4096, 2);
	assert_int_equal(coffer_obj_seal_oid(cw, &oid, COFFER_SEAL_RELEASE, NULL), 0);
	assert_int_equal(coffer_obj_get_oid(cr, &oid, 0, &new, &sz, NULL), 0);

	ids[0] = oid;
	ids[1] = other;
	ptrs[0] = old;
	ptrs[1] = &outside; /* not in the arena: nothing is sent */
	assert_int_equal(coffer_obj_release_data_bulk(cr, ids, ptrs, 2, NULL), -EINVAL);
	ptrs[1] = NULL;
	assert_int_equal(coffer_obj_release_data_bulk(cr, ids, ptrs, 2, NULL), -EINVAL);
	assert_int_equal(coffer_obj_release_data_bulk(cr, ids, NULL, 2, NULL), -EINVAL);
	assert_int_equal(coffer_obj_release_data_bulk(cr, ids, ptrs, 0, NULL), -EINVAL);
	assert_int_equal(coffer_obj_release_data_bulk(eq, ids, ptrs, 1, NULL), -EINVAL);
	ptrs[1] = oth;
	assert_true(check(old, 4096, 1) && check(oth, 4096, 9));
	assert_int_equal(coffer_obj_release_data_bulk(cr, ids, ptrs, 2, &ev), 0);
	assert_int_equal(wait_ev(eq, &ev), 0);
	/* the new version is still ours; the two released ones are not */
	assert_int_equal(coffer_obj_release_data(cr, &oid, old, NULL), -ENOENT);
	assert_int_equal(coffer_obj_release_data(cr, &other, oth, NULL), -ENOENT);
	assert_true(check(new, 4096, 2));
	assert_int_equal(coffer_obj_release_data_bulk(cr, &oid, &new, 1, NULL), 0);
	assert_int_equal(coffer_obj_release_oid(cr, &oid, NULL), -ENOENT);
	end_writer_reader(t, cw, cr, eq, &ev, &oid, &other);
}

/*
 * 0-byte objects have offset 0, and so may the arena's first block: a client holding a
 * 0-byte version and a real version at offset 0 of one ID names both with the same pointer.
 * Releasing "the 0-byte one" must never unpin the real one while it is read (a 0-byte
 * reference pins no memory, so the store drops those first on such a tie).
 */
static void test_release_data_zero_byte_tie(void **state)
{
	struct tctx *t = *state;
	coffer_handle_t cw, cr;
	struct coffer_oid oid, other;
	const void *zero = NULL, *real = NULL;
	uint64_t sz;
	void *wr;

	make_oid(&oid, 15, 1);
	make_oid(&other, 15, 2);
	assert_int_equal(coffer_connect(t->store.sock, &cw), 0);
	assert_int_equal(coffer_connect(t->store.sock, &cr), 0);
	assert_int_equal(coffer_obj_create_oid(cw, &oid, 0, 0, &wr, NULL), 0);
	assert_int_equal(coffer_obj_seal_oid(cw, &oid, COFFER_SEAL_RELEASE, NULL), 0);
	assert_int_equal(coffer_obj_get_oid(cr, &oid, 0, &zero, &sz, NULL), 0);
	assert_int_equal(sz, 0);
	/* the store is fresh: the first real object takes the arena's first block, offset 0 */
	assert_int_equal(coffer_obj_create_oid(cw, &oid, 4096, COFFER_CREATE_REPLACE, &wr, NULL),
			 0);
	assert_ptr_equal(wr, zero);
	fill(wr, 4096, 5);
	assert_int_equal(coffer_obj_seal_oid(cw, &oid, COFFER_SEAL_RELEASE, NULL), 0);
	assert_int_equal(coffer_obj_get_oid(cr, &oid, 0, &real, &sz, NULL), 0);
	assert_int_equal(sz, 4096);
	assert_ptr_equal(real, zero);

	/* done with the 0-byte version; the real one must stay pinned through a replace */
	assert_int_equal(coffer_obj_release_data(cr, &oid, zero, NULL), 0);
	assert_int_equal(coffer_obj_create_oid(cw, &oid, 4096, COFFER_CREATE_REPLACE, &wr, NULL),
			 0);
	fill(wr, 4096, 6);
	assert_int_equal(coffer_obj_seal_oid(cw, &oid, COFFER_SEAL_RELEASE, NULL), 0);
	assert_int_equal(coffer_obj_create_oid(cw, &other, 4096, 0, &wr, NULL), 0);
	assert_ptr_not_equal(wr, real);
	fill(wr, 4096, 7);
	assert_int_equal(coffer_obj_seal_oid(cw, &other, COFFER_SEAL_RELEASE, NULL), 0);
	assert_true(check(real, 4096, 5));
	assert_int_equal(coffer_obj_release_data(cr, &oid, real, NULL), 0);
	assert_int_equal(coffer_obj_release_data(cr, &oid, real, NULL), -ENOENT);

	assert_int_equal(coffer_obj_delete(cr, &oid, NULL), 0);
	assert_int_equal(coffer_obj_delete(cr, &other, NULL), 0);
	assert_int_equal(coffer_disconnect(cw), 0);
	assert_int_equal(coffer_disconnect(cr), 0);
	expect_used(t, 0);
	expect_handles_closed(t);
}

/* Polls @eq until @n events completed, each with result 0. */
static void wait_all_ok(coffer_handle_t eq, int n)
{
	struct coffer_event *done[8];

	for (int got = 0; got < n;) {
		int k = coffer_eq_poll(eq, 1, 5000000, 8, done);

		assert_true(k > 0);
		for (int i = 0; i < k; i++)
			assert_int_equal(done[i]->ev_error, 0);
		got += k;
	}
}

/* The by-ObjectID operations (no object handle): create, seal, abort, get, and a replace
 * whose old object a reader keeps intact; they open no handle. */
static void test_oid_ops(void **state)
{
	struct tctx *t = *state;
	enum { N = 16 };
	coffer_handle_t c, cr, eq;
	struct coffer_event ev[N];
	struct coffer_oid oids[N], missing;
	void *wr[N];
	const void *rd, *old;
	uint64_t sz;

	for (int i = 0; i < N; i++)
		make_oid(&oids[i], 5, (uint64_t)i);
	make_oid(&missing, 5, 12345);
	assert_int_equal(coffer_connect(t->store.sock, &c), 0);
	assert_int_equal(coffer_connect(t->store.sock, &cr), 0);
	assert_int_equal(coffer_eq_create(&eq), 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(coffer_event_init(&ev[i], eq, NULL), 0);

	/* arguments */
	assert_int_equal(coffer_obj_create_oid(c, NULL, 8, 0, &wr[0], NULL), -EINVAL);
	assert_int_equal(coffer_obj_create_oid(c, &oids[0], 8, 0, NULL, NULL), -EINVAL);
	assert_int_equal(coffer_obj_create_oid(c, &oids[0], 8, 0x100, &wr[0], NULL), -EINVAL);
	assert_int_equal(coffer_obj_create_oid(COFFER_HANDLE_NULL, &oids[0], 8, 0, &wr[0], NULL),
			 -EINVAL);
	assert_int_equal(coffer_obj_create_oid(eq, &oids[0], 8, 0, &wr[0], NULL), -EINVAL);
	assert_int_equal(coffer_obj_seal_oid(c, NULL, 0, NULL), -EINVAL);
	assert_int_equal(coffer_obj_seal_oid(c, &oids[0], 0x100, NULL), -EINVAL);
	assert_int_equal(coffer_obj_abort_oid(c, NULL, NULL), -EINVAL);
	assert_int_equal(coffer_obj_get_oid(c, NULL, 0, &rd, NULL, NULL), -EINVAL);
	assert_int_equal(coffer_obj_get_oid(c, &oids[0], 0, NULL, NULL, NULL), -EINVAL);
	/* nothing to seal, abort or get yet */
	assert_int_equal(coffer_obj_seal_oid(c, &oids[0], 0, NULL), -ENOENT);
	assert_int_equal(coffer_obj_abort_oid(c, &oids[0], NULL), -ENOENT);
	assert_int_equal(coffer_obj_get_oid(c, &missing, 0, &rd, &sz, NULL), -ENOENT);

	/* asynchronous create of N, then seal of N, each as one batch */
	for (int i = 0; i < N; i++)
		assert_int_equal(
		    coffer_obj_create_oid(c, &oids[i], 1000 + (uint64_t)i, 0, &wr[i], &ev[i]), 0);
	assert_int_equal(coffer_flush(c), 0);
	wait_all_ok(eq, N);
	/* unsealed: another client cannot seal it, nobody can get it */
	assert_int_equal(coffer_obj_seal_oid(cr, &oids[0], 0, NULL), -EPERM);
	assert_int_equal(coffer_obj_get_oid(cr, &oids[0], 0, &rd, &sz, NULL), -ENOENT);
	for (int i = 0; i < N; i++) {
		fill(wr[i], 1000 + (uint64_t)i, (uint64_t)i);
		assert_int_equal(coffer_obj_seal_oid(c, &oids[i], COFFER_SEAL_RELEASE, &ev[i]), 0);
	}
	wait_all_ok(eq, N);
	assert_int_equal(coffer_obj_seal_oid(c, &oids[0], 0, NULL), -EALREADY);
	for (int i = 0; i < N; i++) {
		rd = NULL;
		sz = 0;
		assert_int_equal(coffer_obj_get_oid(cr, &oids[i], 0, &rd, &sz, &ev[i]), 0);
		assert_int_equal(wait_ev(eq, &ev[i]), 0);
		assert_int_equal(sz, 1000 + (uint64_t)i);
		assert_true(check(rd, sz, (uint64_t)i));
		assert_int_equal(coffer_obj_release_oid(cr, &oids[i], NULL), 0);
	}
	/* missing, asynchronously: the event carries -ENOENT */
	assert_int_equal(coffer_obj_get_oid(c, &missing, 0, &rd, NULL, &ev[0]), 0);
	assert_int_equal(wait_ev(eq, &ev[0]), -ENOENT);

	/* replace: the reader keeps the old object intact, new gets see the new one */
	assert_int_equal(coffer_obj_get_oid(cr, &oids[1], 0, &old, &sz, NULL), 0);
	assert_int_equal(
	    coffer_obj_create_oid(c, &oids[1], 500, COFFER_CREATE_REPLACE, &wr[1], NULL), 0);
	fill(wr[1], 500, 77);
	assert_int_equal(coffer_obj_get_oid(cr, &oids[1], 0, &rd, &sz, NULL), 0);
	assert_int_equal(sz, 1001); /* the replacement is invisible until sealed */
	assert_int_equal(coffer_obj_release_oid(cr, &oids[1], NULL), 0);
	assert_int_equal(coffer_obj_seal_oid(c, &oids[1], COFFER_SEAL_RELEASE, NULL), 0);
	assert_true(check(old, 1001, 1));
	assert_int_equal(coffer_obj_get_oid(cr, &oids[1], 0, &rd, &sz, NULL), 0);
	assert_int_equal(sz, 500);
	assert_true(check(rd, 500, 77));
	assert_int_equal(coffer_obj_release_oid(cr, &oids[1], NULL), 0); /* the new one */
	assert_int_equal(coffer_obj_release_oid(cr, &oids[1], NULL), 0); /* the replaced one */

	/* abort: a replacement aborted leaves the sealed object as it was */
	assert_int_equal(
	    coffer_obj_create_oid(c, &oids[2], 64, COFFER_CREATE_REPLACE, &wr[2], NULL), 0);
	assert_int_equal(coffer_obj_abort_oid(cr, &oids[2], NULL), -EPERM);
	assert_int_equal(coffer_obj_abort_oid(c, &oids[2], &ev[0]), 0);
	assert_int_equal(wait_ev(eq, &ev[0]), 0);
	assert_int_equal(coffer_obj_get_oid(c, &oids[2], 0, &rd, &sz, NULL), 0);
	assert_int_equal(sz, 1002);
	assert_true(check(rd, sz, 2));
	assert_int_equal(coffer_obj_release_oid(c, &oids[2], NULL), 0);

	/* bulk release: every reference taken below is dropped by one event; a second bulk
	 * release of IDs no longer held reports -ENOENT (the held ones are still released) */
	assert_int_equal(coffer_obj_release_oid_bulk(c, NULL, 1, NULL), -EINVAL);
	assert_int_equal(coffer_obj_release_oid_bulk(c, oids, 0, NULL), -EINVAL);
	assert_int_equal(coffer_obj_release_oid_bulk(c, oids, COFFER_GET_BULK_MAX + 1, NULL),
			 -EINVAL);
	for (int i = 0; i < N; i++)
		assert_int_equal(coffer_obj_get_oid(c, &oids[i], 0, &rd, NULL, NULL), 0);
	assert_int_equal(coffer_obj_get_oid(c, &oids[0], 0, &rd, NULL, NULL), 0); /* twice */
	{
		struct coffer_oid rel[N + 1];

		memcpy(rel, oids, sizeof(oids));
		rel[N] = oids[0]; /* a duplicate drops the second reference */
		assert_int_equal(coffer_obj_release_oid_bulk(c, rel, N + 1, &ev[0]), 0);
		assert_int_equal(wait_ev(eq, &ev[0]), 0);
		assert_int_equal(coffer_obj_release_oid_bulk(c, rel, 2, &ev[0]), 0);
		assert_int_equal(wait_ev(eq, &ev[0]), -ENOENT);
		/* one held among missing ones: released, and the result is the failure */
		assert_int_equal(coffer_obj_get_oid(c, &oids[3], 0, &rd, NULL, NULL), 0);
		rel[0] = missing;
		rel[1] = oids[3];
		assert_int_equal(coffer_obj_release_oid_bulk(c, rel, 2, NULL), -ENOENT);
		assert_int_equal(coffer_obj_release_oid(c, &oids[3], NULL), -ENOENT);
	}

	for (int i = 0; i < N; i++) {
		assert_int_equal(coffer_obj_delete(c, &oids[i], NULL), 0);
		assert_int_equal(coffer_event_fini(&ev[i]), 0);
	}
	assert_int_equal(coffer_eq_destroy(eq, 0), 0);
	/* a dead connection */
	assert_int_equal(coffer_disconnect(cr), 0);
	assert_int_equal(coffer_obj_create_oid(cr, &oids[0], 8, 0, &wr[0], NULL), -ENOTCONN);
	assert_int_equal(coffer_obj_get_oid(cr, &oids[0], 0, &rd, NULL, NULL), -ENOTCONN);
	assert_int_equal(coffer_disconnect(c), 0);
	expect_used(t, 0);
	expect_handles_closed(t);
}

/* Waits until every event of @evs[0..n) completed; errs[i] gets evs[i]'s ev_error. */
static void wait_set(coffer_handle_t eq, struct coffer_event *evs, int n, int *errs)
{
	struct coffer_event *done[8];
	int got = 0;

	for (int tries = 0; got < n && tries < 1000; tries++) {
		int k = coffer_eq_poll(eq, 1, 100000, 8, done);

		assert_true(k >= 0);
		for (int j = 0; j < k; j++) {
			assert_true(done[j] >= evs && done[j] < evs + n);
			errs[done[j] - evs] = done[j]->ev_error;
			got++;
		}
	}
	assert_int_equal(got, n);
}

/* coffer_obj_get_oid_vec(): arguments, independent results, partial launch, dead connection. */
static void test_get_oid_vec(void **state)
{
	struct tctx *t = *state;
	enum { N = 12, MISSING = 5 };
	coffer_handle_t c, eq, eq2;
	struct coffer_event ev[N], other;
	struct coffer_get_vec gv[N];
	struct coffer_oid oids[N];
	const void *rd[N], *one;
	uint64_t sz[N];
	int errs[N];
	void *wr;

	for (int i = 0; i < N; i++)
		make_oid(&oids[i], 9, (uint64_t)i);
	assert_int_equal(coffer_connect(t->store.sock, &c), 0);
	assert_int_equal(coffer_eq_create(&eq), 0);
	assert_int_equal(coffer_eq_create(&eq2), 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(coffer_event_init(&ev[i], eq, NULL), 0);
	assert_int_equal(coffer_event_init(&other, eq2, NULL), 0);
	/* every block but MISSING exists, sealed, with its own size and contents */
	for (int i = 0; i < N; i++) {
		if (i == MISSING)
			continue;
		assert_int_equal(
		    coffer_obj_create_oid(c, &oids[i], 700 + (uint64_t)i, 0, &wr, NULL), 0);
		fill(wr, 700 + (uint64_t)i, 40 + (uint64_t)i);
		assert_int_equal(coffer_obj_seal_oid(c, &oids[i], COFFER_SEAL_RELEASE, NULL), 0);
	}
	for (int i = 0; i < N; i++)
		gv[i] = (struct coffer_get_vec){
		    .oid = oids[i], .ev = &ev[i], .data = &rd[i], .size = &sz[i]};

	/* arguments: nothing is launched (every event can still be launched afterwards) */
	assert_int_equal(coffer_obj_get_oid_vec(c, NULL, 1, 0), -EINVAL);
	assert_int_equal(coffer_obj_get_oid_vec(c, gv, 0, 0), -EINVAL);
	assert_int_equal(coffer_obj_get_oid_vec(c, gv, COFFER_GET_BULK_MAX + 1, 0), -EINVAL);
	assert_int_equal(coffer_obj_get_oid_vec(COFFER_HANDLE_NULL, gv, N, 0), -EINVAL);
	assert_int_equal(coffer_obj_get_oid_vec(eq, gv, N, 0), -EINVAL); /* not a connection */
	gv[3].ev = NULL;
	assert_int_equal(coffer_obj_get_oid_vec(c, gv, N, 0), -EINVAL);
	gv[3].ev = &ev[3];
	gv[4].data = NULL;
	assert_int_equal(coffer_obj_get_oid_vec(c, gv, N, 0), -EINVAL);
	gv[4].data = &rd[4];
	gv[7].ev = &other; /* another EQ, hence another channel */
	assert_int_equal(coffer_obj_get_oid_vec(c, gv, N, 0), -EINVAL);
	gv[7].ev = &ev[7];

	/* all at once: each get completes alone, with its own result, size and data */
	for (int i = 0; i < N; i++) {
		rd[i] = NULL;
		sz[i] = 0;
	}
	assert_int_equal(coffer_obj_get_oid_vec(c, gv, N, 0), N);
	assert_int_equal(coffer_flush(c), 0);
	wait_set(eq, ev, N, errs);
	for (int i = 0; i < N; i++) {
		if (i == MISSING) {
			assert_int_equal(errs[i], -ENOENT);
			continue;
		}
		assert_int_equal(errs[i], 0);
		assert_int_equal(sz[i], 700 + (uint64_t)i);
		assert_true(check(rd[i], sz[i], 40 + (uint64_t)i));
	}
	/* each found get holds one reference: releasing them all succeeds exactly once */
	for (int i = 0; i < N; i++)
		assert_int_equal(coffer_obj_release_oid(c, &oids[i], NULL),
				 i == MISSING ? -ENOENT : 0);
	assert_int_equal(coffer_obj_release_oid(c, &oids[0], NULL), -ENOENT);

	/* size may be NULL */
	gv[0].size = NULL;
	assert_int_equal(coffer_obj_get_oid_vec(c, gv, 1, 0), 1);
	assert_int_equal(wait_ev(eq, &ev[0]), 0);
	assert_true(check(rd[0], 700, 40));
	assert_int_equal(coffer_obj_release_oid(c, &oids[0], NULL), 0);
	gv[0].size = &sz[0];

	/* partial launch: ev[2] still belongs to an earlier get (not reaped), so gets[0..2)
	 * go out and 2 is returned; ev[2]'s own get is unaffected */
	assert_int_equal(coffer_obj_get_oid(c, &oids[6], 0, &one, NULL, &ev[2]), 0);
	assert_int_equal(coffer_obj_get_oid_vec(c, gv, 4, 0), 2);
	assert_int_equal(coffer_obj_get_oid_vec(c, gv + 2, 2, 0), -EBUSY);
	assert_int_equal(coffer_flush(c), 0);
	wait_set(eq, ev, 3, errs);
	assert_true(errs[0] == 0 && errs[1] == 0 && errs[2] == 0);
	assert_true(check(rd[0], 700, 40) && check(rd[1], 701, 41) && check(one, 706, 46));
	for (int i = 0; i < 2; i++)
		assert_int_equal(coffer_obj_release_oid(c, &oids[i], NULL), 0);
	assert_int_equal(coffer_obj_release_oid(c, &oids[6], NULL), 0);
	assert_int_equal(coffer_obj_release_oid(c, &oids[3], NULL), -ENOENT); /* never got */

	for (int i = 0; i < N; i++)
		(void)coffer_obj_delete(c, &oids[i], NULL);
	for (int i = 0; i < N; i++)
		assert_int_equal(coffer_event_fini(&ev[i]), 0);
	assert_int_equal(coffer_event_fini(&other), 0);
	assert_int_equal(coffer_eq_destroy(eq2, 0), 0);
	/* a dead connection */
	assert_int_equal(coffer_disconnect(c), 0);
	assert_int_equal(coffer_event_init(&ev[0], eq, NULL), 0);
	assert_int_equal(coffer_obj_get_oid_vec(c, gv, 1, 0), -ENOTCONN);
	assert_int_equal(coffer_event_fini(&ev[0]), 0);
	assert_int_equal(coffer_eq_destroy(eq, 0), 0);
	expect_used(t, 0);
	expect_handles_closed(t);
}

/* ---- other processes ------------------------------------------------------------------ */

/* Child: the inherited connection is dead; a new one works. Exit status 0 on success. */
static int child_body(const char *sock, coffer_handle_t inherited, const struct coffer_oid *oid,
		      unsigned int delay_ms)
{
	coffer_handle_t c, oh, ohi;
	void *wr;
	int rc;

	if (coffer_obj_open(inherited, oid, 0, &ohi) != -ENOTCONN)
		return 10;
	usleep(delay_ms * 1000);
	if (coffer_connect(sock, &c) < 0)
		return 11;
	if (coffer_obj_open(c, oid, 0, &oh) < 0)
		return 12;
	if ((rc = coffer_obj_create(oh, 3000, 0, &wr, NULL)) < 0)
		return 13;
	fill(wr, 3000, 77);
	if (coffer_obj_seal(oh, COFFER_SEAL_RELEASE, NULL) < 0)
		return 14;
	coffer_obj_close(oh);
	if (coffer_disconnect(c) < 0)
		return 15;
	if (coffer_disconnect(inherited) < 0)
		return 16;
	return 0;
}

static void test_get_timeout_other_process(void **state)
{
	struct tctx *t = *state;
	coffer_handle_t c, oh;
	struct coffer_oid oid, missing;
	const void *rd;
	uint64_t sz;
	int status;
	pid_t pid;
	struct timespec a, b;

	make_oid(&oid, 5, 1);
	make_oid(&missing, 5, 2);
	assert_int_equal(coffer_connect(t->store.sock, &c), 0);
	assert_int_equal(coffer_obj_open(c, &missing, 0, &oh), 0);
	clock_gettime(CLOCK_MONOTONIC, &a);
	assert_int_equal(coffer_obj_get(oh, 50000, &rd, &sz, NULL), -ENOENT);
	clock_gettime(CLOCK_MONOTONIC, &b);
	assert_true((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) >= 40000000L);
	assert_int_equal(coffer_obj_close(oh), 0);

	assert_int_equal(coffer_obj_open(c, &oid, 0, &oh), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(child_body(t->store.sock, c, &oid, 200));
	/* waits in the store (not here) until the child seals */
	assert_int_equal(coffer_obj_get(oh, 10000000, &rd, &sz, NULL), 0);
	assert_int_equal(sz, 3000);
	assert_true(check(rd, sz, 77));
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(coffer_obj_release(oh, NULL), 0);
	assert_int_equal(coffer_obj_delete(c, &oid, NULL), 0);
	assert_int_equal(coffer_obj_close(oh), 0);
	assert_int_equal(coffer_disconnect(c), 0);
	expect_used(t, 0);
	expect_handles_closed(t);
}

/*
 * fork() while requests are in flight. The child's copy of the connection is dead, so what
 * it inherited in flight must complete there with -ENOTCONN (as on any dead connection):
 * otherwise the child can never finalise those events, and a forced destroy of the EQ waits
 * forever. The parent is unaffected: its request completes with the right data.
 */
static int fork_inflight_child(coffer_handle_t c, coffer_handle_t eq, struct coffer_event *ev,
			       struct coffer_event *bev)
{
	struct coffer_event *done[4];
	int n, got = 0;

	/* bounded: a stuck event is a failure, not a hang */
	for (int i = 0; i < 20 && got < 2; i++) {
		n = coffer_eq_poll(eq, 0, 100000, 4, done);
		if (n < 0)
			return 20;
		for (int k = 0; k < n; k++) {
			if ((done[k] != ev && done[k] != bev) || done[k]->ev_error != -ENOTCONN)
				return 21;
		}
		got += n;
	}
	if (got != 2)
		return 22;
	if (coffer_event_fini(ev) != 0 || coffer_event_fini(bev) != 0)
		return 23;
	if (coffer_eq_destroy(eq, COFFER_EQ_FORCE) != 0)
		return 24;
	if (coffer_disconnect(c) != 0)
		return 25;
	return 0;
}

static void test_fork_inflight(void **state)
{
	struct tctx *t = *state;
	coffer_handle_t c, c2, eq;
	struct coffer_event ev, bev;
	struct coffer_oid oid[2];
	struct coffer_obj_buf bufs[2];
	const void *rd = NULL;
	uint64_t sz = 0;
	void *wr;
	int status;
	pid_t pid;

	make_oid(&oid[0], 12, 1);
	make_oid(&oid[1], 12, 2);
	assert_int_equal(coffer_connect(t->store.sock, &c), 0);
	assert_int_equal(coffer_eq_create(&eq), 0);
	assert_int_equal(coffer_event_init(&ev, eq, NULL), 0);
	assert_int_equal(coffer_event_init(&bev, eq, NULL), 0);
	/* both wait in the store for objects nobody has created yet */
	assert_int_equal(coffer_obj_get_oid(c, &oid[0], -1, &rd, &sz, &ev), 0);
	assert_int_equal(coffer_obj_get_bulk(c, oid, 2, -1, bufs, &bev), 0);
	assert_int_equal(coffer_flush(c), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(fork_inflight_child(c, eq, &ev, &bev));
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);

	/* the parent's requests are still waiting in the store, and complete */
	assert_int_equal(coffer_connect(t->store.sock, &c2), 0);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(coffer_obj_create_oid(c2, &oid[i], 1000, 0, &wr, NULL), 0);
		fill(wr, 1000, 40 + (uint64_t)i);
		assert_int_equal(coffer_obj_seal_oid(c2, &oid[i], COFFER_SEAL_RELEASE, NULL), 0);
	}
	{
		struct coffer_event *done[2];
		int got = 0;

		while (got < 2) {
			int n = coffer_eq_poll(eq, 1, 5000000, 2, done);

			assert_true(n > 0);
			for (int k = 0; k < n; k++)
				assert_int_equal(done[k]->ev_error, 0);
			got += n;
		}
	}
	assert_int_equal(sz, 1000);
	assert_true(check(rd, sz, 40));
	for (int i = 0; i < 2; i++) {
		assert_int_equal(bufs[i].status, 0);
		assert_true(check(bufs[i].data, bufs[i].size, 40 + (uint64_t)i));
	}
	assert_int_equal(coffer_obj_release_oid(c, &oid[0], NULL), 0);
	assert_int_equal(coffer_obj_release_oid_bulk(c, oid, 2, NULL), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(coffer_obj_delete(c2, &oid[i], NULL), 0);
	assert_int_equal(coffer_event_fini(&ev), 0);
	assert_int_equal(coffer_event_fini(&bev), 0);
	assert_int_equal(coffer_eq_destroy(eq, 0), 0);
	assert_int_equal(coffer_disconnect(c2), 0);
	assert_int_equal(coffer_disconnect(c), 0);
	expect_used(t, 0);
	expect_handles_closed(t);
}

/*
 * A forked child that does not use coffer and lives until idle_child_end(): it holds copies
 * of every fd the parent had at the fork. Return: its pid; @release: out: the fd whose close
 * lets it exit.
 */
static pid_t idle_child_start(int *release)
{
	int pfd[2];
	char ch;
	pid_t pid;

	assert_int_equal(pipe(pfd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(pfd[1]);
		alarm(20);
		_exit(read(pfd[0], &ch, 1) == 0 ? 0 : 1);
	}
	close(pfd[0]);
	*release = pfd[1];
	return pid;
}

/* Lets the child of idle_child_start() go and checks that it exited cleanly. */
static void idle_child_end(pid_t pid, int release)
{
	int status;

	close(release);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/*
 * A fork child that never touches coffer must not keep its parent's session alive in the
 * store. The child inherited a copy of every connection's socket; the parent's disconnect
 * (or death) then did not reach the store while the child lived, so the store kept the
 * parent's references and unsealed objects - for as long as, say, a forked helper runs.
 * The child's copy is dead anyway (coffer/store.h: every call gets -ENOTCONN), so its
 * socket is closed at the fork.
 */
static void test_fork_child_keeps_no_session(void **state)
{
	struct tctx *t = *state;
	coffer_handle_t c, oh;
	struct coffer_oid oid;
	int release;
	void *wr;
	pid_t pid;

	make_oid(&oid, 14, 1);
	assert_int_equal(coffer_connect(t->store.sock, &c), 0);
	assert_int_equal(coffer_obj_open(c, &oid, 0, &oh), 0);
	assert_int_equal(coffer_obj_create(oh, 4096, 0, &wr, NULL), 0); /* unsealed: pinned */
	pid = idle_child_start(&release); /* a helper that does not use coffer */
	assert_int_equal(coffer_obj_close(oh), 0);
	assert_int_equal(coffer_disconnect(c), 0);
	/* the store aborted our unsealed object although the child still runs */
	expect_used(t, 0);
	idle_child_end(pid, release);
	expect_handles_closed(t);
}

/*
 * fork() while another thread is inside coffer_connect(): its socket exists but the
 * connection is not on the process's list yet, and the child kept a copy of that socket
 * open (the fork handler closed only listed connections'), with the same effect as in
 * test_fork_child_keeps_no_session. Staged with a listening socket that never answers
 * HELLO: the connect waits (COFFER_STORE_TIMEOUT_MS) while the fork happens, then fails;
 * the "store" end must then see the connection closed although the child still runs.
 */
struct fc_arg {
	const char *path;
	int rc;
};

/* A listening socket named @name in the test's store directory, with @backlog, that no
 * store serves: the test plays the store's end. Return: the fd; @sa: its address. */
static int fake_listener(const struct tctx *t, const char *name, int backlog,
			 struct sockaddr_un *sa)
{
	int lfd;

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	assert_true(strlen(t->store.dir) + 1 + strlen(name) < sizeof(sa->sun_path));
	snprintf(sa->sun_path, sizeof(sa->sun_path), "%s/%s", t->store.dir, name);
	lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	assert_true(lfd >= 0);
	assert_int_equal(bind(lfd, (struct sockaddr *)sa, sizeof(*sa)), 0);
	assert_int_equal(listen(lfd, backlog), 0);
	return lfd;
}

static void *fc_connect(void *arg)
{
	struct fc_arg *a = arg;
	coffer_handle_t c;

	a->rc = coffer_connect(a->path, &c);
	return NULL;
}

static void test_fork_during_connect(void **state)
{
	struct tctx *t = *state;
	struct sockaddr_un sa;
	struct fc_arg a;
	struct pollfd pfd;
	int lfd = fake_listener(t, "fake.s", 4, &sa), sfd, release;
	char buf[256];
	pthread_t th;
	pid_t pid;

	setenv("COFFER_STORE_TIMEOUT_MS", "500", 1);
	a.path = sa.sun_path;
	a.rc = 1;
	assert_int_equal(pthread_create(&th, NULL, fc_connect, &a), 0);
	sfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	assert_true(sfd >= 0);
	/* the connecting thread now waits for HELLO_REPLY */
	assert_true(recv(sfd, buf, sizeof(buf), 0) > 0);
	pid = idle_child_start(&release);
	pthread_join(th, NULL);
	unsetenv("COFFER_STORE_TIMEOUT_MS");
	assert_int_equal(a.rc, -ETIMEDOUT);
	/* the connect gave up and closed its socket: the peer sees the end at once */
	pfd.fd = sfd;
	pfd.events = POLLIN;
	assert_int_equal(poll(&pfd, 1, 5000), 1);
	assert_int_equal(recv(sfd, buf, sizeof(buf), MSG_DONTWAIT), 0);
	idle_child_end(pid, release);
	close(sfd);
	close(lfd);
	unlink(sa.sun_path);
	expect_handles_closed(t);
}

/*
 * coffer_connect() to a store that does not accept: its listen backlog is full (a store
 * stopped with SIGSTOP, or wedged, under a burst of connects). connect() on a Unix socket
 * then blocks until the listener takes a connection, for ever unless the socket has a send
 * timeout; the connect must fail with -ETIMEDOUT after COFFER_STORE_TIMEOUT_MS like every
 * other control step. Found hanging for ever. A watchdog turns the hang into a failure.
 */
struct bl_arg {
	const char *path;
	int rc;
	int done; /* atomic: set when coffer_connect() returned */
};

static void *bl_connect(void *arg)
{
	struct bl_arg *a = arg;
	coffer_handle_t c;

	a->rc = coffer_connect(a->path, &c);
	if (a->rc == 0)
		coffer_disconnect(c);
	__atomic_store_n(&a->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void test_connect_backlog_full(void **state)
{
	struct tctx *t = *state;
	struct sockaddr_un sa;
	struct bl_arg a = {.rc = 1};
	int lfd = fake_listener(t, "full.s", 0, &sa), fill[64], nfill = 0, waited = 0;
	pthread_t th;

	/* fill the backlog: non-blocking connects until the listener refuses more */
	for (;;) {
		int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

		assert_true(fd >= 0);
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
			assert_int_equal(errno, EAGAIN);
			close(fd);
			break;
		}
		assert_true(nfill < 64);
		fill[nfill++] = fd;
	}
	setenv("COFFER_STORE_TIMEOUT_MS", "300", 1);
	a.path = sa.sun_path;
	assert_int_equal(pthread_create(&th, NULL, bl_connect, &a), 0);
	while (!__atomic_load_n(&a.done, __ATOMIC_ACQUIRE) && waited < 10000) {
		usleep(10 * 1000);
		waited += 10;
	}
	unsetenv("COFFER_STORE_TIMEOUT_MS");
	if (!__atomic_load_n(&a.done, __ATOMIC_ACQUIRE))
		fail_msg("coffer_connect() still blocked after 10 s on a full backlog");
	pthread_join(th, NULL);
	assert_int_equal(a.rc, -ETIMEDOUT);
	for (int i = 0; i < nfill; i++)
		close(fill[i]);
	close(lfd);
	unlink(sa.sun_path);
	expect_handles_closed(t);
}

/*
 * A host whose threads take a periodic signal (a profiler's SIGPROF, a SIGALRM tick, a
 * runtime's preemption signal), shorter than COFFER_STORE_TIMEOUT_MS, must not make a
 * control step wait for ever: Linux fails a blocking socket call that has a timeout
 * (SO_RCVTIMEO, SO_SNDTIMEO; connect() waits under the latter) with EINTR on every signal,
 * SA_RESTART or not (signal(7)), and a retry that starts the whole timeout again never
 * reaches its end. store.h: coffer_connect() to a socket that is not a coffer-store (no
 * answer: the receive) or to a store whose listen backlog is full (the connect) fails with
 * -ETIMEDOUT after COFFER_STORE_TIMEOUT_MS, signals or not. Both used to wait as long as
 * the signals came. The signaller sends one every 10 ms (the timeout is 200 ms) for at most
 * 10 s; the call must return while they still come.
 *
 * connect_under_signals(): coffer_connect(@path) with COFFER_STORE_TIMEOUT_MS=200 while
 * SIGUSR1 (a handler without SA_RESTART: with it the socket calls fail alike) interrupts
 * this thread every 10 ms (tests/client/sig_tick.h).
 */
static int connect_under_signals(const char *path, struct sig_tick *s)
{
	struct sigaction sa = {.sa_handler = sig_tick_handler}, old;
	coffer_handle_t c;
	pthread_t th;
	int rc;

	memset(s, 0, sizeof(*s));
	s->target = pthread_self();
	assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
	assert_int_equal(setenv("COFFER_STORE_TIMEOUT_MS", "200", 1), 0);
	assert_int_equal(pthread_create(&th, NULL, sig_tick_main, s), 0);
	rc = coffer_connect(path, &c);
	atomic_store(&s->done, 1);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(unsetenv("COFFER_STORE_TIMEOUT_MS"), 0);
	assert_int_equal(sigaction(SIGUSR1, &old, NULL), 0);
	if (rc == 0)
		coffer_disconnect(c);
	return rc;
}

/*
 * common.h: no call fails or returns early for a signal. Four threads share one connection -
 * blocking puts, gets (found, and of an ID nobody seals, which waits out its timeout),
 * releases, deletes on the rings, and control exchanges (coffer_store_query(), whose socket
 * timeouts every EINTR retry rewrites, serialized on the connection) - while each takes
 * SIGUSR1 (no SA_RESTART) every millisecond. Every call answers what it would without the
 * signals: nothing fails with -EINTR, times out early (-ENOENT before the seal, -ETIMEDOUT),
 * or is lost (each object read back intact; nothing left in the store at the end).
 */
struct storm_worker {
	pthread_t tid;
	coffer_handle_t conn;
	unsigned int id, failures, step;
	int first_err;
	atomic_int done; /* its calls are over (it is joined only after the signaller) */
};

static void storm_fail(struct storm_worker *w, int rc, unsigned int step)
{
	if (w->failures++ == 0) {
		w->first_err = rc;
		w->step = step;
	}
}

static void *storm_main(void *arg)
{
	struct storm_worker *w = arg;
	struct coffer_store_info info;

	for (unsigned int i = 0; i < 150; i++) {
		struct coffer_oid oid, none;
		const void *rd = NULL;
		uint64_t sz = 0;
		void *wr = NULL;
		int rc;

		make_oid(&oid, 60 + w->id, i);
		make_oid(&none, 70 + w->id, i);
		rc = coffer_obj_create_oid(w->conn, &oid, 4096, 0, &wr, NULL);
		if (rc == 0) {
			fill(wr, 4096, i);
			rc = coffer_obj_seal_oid(w->conn, &oid, COFFER_SEAL_RELEASE, NULL);
		}
		if (rc == 0)
			rc = coffer_obj_get_oid(w->conn, &oid, 1000 * 1000, &rd, &sz, NULL);
		if (rc == 0 && (sz != 4096 || !check(rd, 4096, i)))
			rc = -EIO;
		if (rc == 0)
			rc = coffer_obj_release_oid(w->conn, &oid, NULL);
		if (rc == 0)
			rc = coffer_obj_delete(w->conn, &oid, NULL);
		if (rc != 0)
			storm_fail(w, rc, i);
		if (i % 10 == 0 && (rc = coffer_store_query(w->conn, &info)) != 0)
			storm_fail(w, rc, 1000 + i);
		if (i % 5 == 0 &&
		    (rc = coffer_obj_get_oid(w->conn, &none, 20 * 1000, &rd, &sz, NULL)) != -ENOENT)
			storm_fail(w, rc, 2000 + i);
	}
	atomic_store(&w->done, 1);
	return NULL;
}

static void *storm_signaller(void *arg)
{
	struct storm_worker *w = arg;

	for (;;) {
		unsigned int busy = 0;

		/* a worker's pthread_t stays valid until it is joined, after this returns */
		for (unsigned int i = 0; i < 4; i++)
			if (!atomic_load(&w[i].done)) {
				pthread_kill(w[i].tid, SIGUSR1);
				busy++;
			}
		if (busy == 0)
			return NULL;
		usleep(1000);
	}
}

static void test_calls_under_signal_storm(void **state)
{
	struct tctx *t = *state;
	struct sigaction sa = {.sa_handler = sig_tick_handler}, old;
	struct storm_worker w[4];
	struct coffer_store_info info;
	coffer_handle_t c;
	pthread_t sig;

	assert_int_equal(coffer_connect(t->store.sock, &c), 0);
	assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
	for (unsigned int i = 0; i < 4; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].id = i;
		w[i].conn = c;
		atomic_init(&w[i].done, 0);
		assert_int_equal(pthread_create(&w[i].tid, NULL, storm_main, &w[i]), 0);
	}
	assert_int_equal(pthread_create(&sig, NULL, storm_signaller, w), 0);
	assert_int_equal(pthread_join(sig, NULL), 0);
	for (unsigned int i = 0; i < 4; i++)
		assert_int_equal(pthread_join(w[i].tid, NULL), 0);
	assert_int_equal(sigaction(SIGUSR1, &old, NULL), 0);
	for (unsigned int i = 0; i < 4; i++) {
		if (w[i].failures)
			fprintf(stderr, "worker %u: %u failures, first %s at step %u\n", i,
				w[i].failures, coffer_strerror(w[i].first_err), w[i].step);
		assert_int_equal(w[i].failures, 0);
	}
	assert_int_equal(coffer_store_query(c, &info), 0);
	assert_int_equal(coffer_disconnect(c), 0);
	expect_used(t, 0);
	expect_handles_closed(t);
}

static void test_ctl_timeout_under_signals(void **state)
{
	struct tctx *t = *state;
	struct sockaddr_un deaf, full;
	struct sig_tick s;
	int ldeaf = fake_listener(t, "deaf.s", 4, &deaf);
	int lfull = fake_listener(t, "full.s", 0, &full), fill[64], nfill = 0;

	/* a listener that never accepts: connect() succeeds, HELLO goes out, no answer */
	assert_int_equal(connect_under_signals(deaf.sun_path, &s), -ETIMEDOUT);
	assert_false(s.ran_out);
	assert_true(s.sent > 0);

	/* a listener whose backlog is full: connect() itself waits */
	for (;;) {
		int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

		assert_true(fd >= 0);
		if (connect(fd, (struct sockaddr *)&full, sizeof(full)) != 0) {
			assert_int_equal(errno, EAGAIN);
			close(fd);
			break;
		}
		assert_true(nfill < 64);
		fill[nfill++] = fd;
	}
	assert_int_equal(connect_under_signals(full.sun_path, &s), -ETIMEDOUT);
	assert_false(s.ran_out);
	assert_true(s.sent > 0);

	for (int i = 0; i < nfill; i++)
		close(fill[i]);
	close(ldeaf);
	close(lfull);
	unlink(deaf.sun_path);
	unlink(full.sun_path);
	expect_handles_closed(t);
}

/*
 * A client stopped (SIGSTOP, ^Z) for longer than COFFER_STORE_TIMEOUT_MS while it waits for
 * a control answer, which the store sends meanwhile: once continued it takes the answer
 * (its receive fails with EINTR at the stop, SO_RCVTIMEO, signal(7)), instead of counting
 * the stop against the store and giving up a live connection with -ETIMEDOUT. Staged with
 * a child process: the store is stopped while the child's coffer_store_query() sends its
 * QUERY, the child is stopped, the store continued (it answers), and the child continued
 * after three of its timeouts.
 */
/* Waits (bounded) until process @pid is stopped: kill(SIGSTOP) returns before a process
 * busy-polling its rings (the store's COFFER_STORE_SPIN_US) has stopped. */
static bool wait_stopped(pid_t pid)
{
	char path[64], buf[256];

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	for (int i = 0; i < 5000; i++) {
		FILE *f = fopen(path, "r");
		size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
		const char *end;

		if (f)
			fclose(f);
		buf[n] = '\0';
		end = strrchr(buf, ')'); /* "pid (comm) S ..." */
		if (end != NULL && end[1] == ' ' && (end[2] == 'T' || end[2] == 't'))
			return true;
		usleep(1000);
	}
	return false;
}

static void test_ctl_answer_while_stopped(void **state)
{
	struct tctx *t = *state;
	int ready[2], go[2], status;
	char b = 0;
	pid_t pid;

	assert_int_equal(pipe(ready), 0);
	assert_int_equal(pipe(go), 0);
	assert_int_equal(setenv("COFFER_STORE_TIMEOUT_MS", "300", 1), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct coffer_store_info info;
		coffer_handle_t c;
		int rc = coffer_connect(t->store.sock, &c);

		if (rc == 0 && (write(ready[1], "r", 1) != 1 || read(go[0], &b, 1) != 1))
			rc = -EIO;
		if (rc == 0)
			rc = coffer_store_query(c, &info);
		if (rc == 0 && info.capacity_bytes == 0)
			rc = -EIO;
		_exit(rc == 0 ? 0 : rc < -150 ? 150 : -rc);
	}
	assert_int_equal(unsetenv("COFFER_STORE_TIMEOUT_MS"), 0);
	assert_int_equal(read(ready[0], &b, 1), 1);
	assert_int_equal(kill(t->store.pid, SIGSTOP), 0);
	assert_true(wait_stopped(t->store.pid));
	assert_int_equal(write(go[1], "g", 1), 1);
	usleep(100 * 1000); /* the child waits for the answer now */
	assert_int_equal(kill(pid, SIGSTOP), 0);
	assert_true(wait_stopped(pid));
	assert_int_equal(kill(t->store.pid, SIGCONT), 0); /* it answers the QUERY */
	usleep(900 * 1000);
	assert_int_equal(kill(pid, SIGCONT), 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) != 0)
		print_error("the child's query: %s\n", coffer_strerror(-WEXITSTATUS(status)));
	assert_int_equal(WEXITSTATUS(status), 0);
	close(ready[0]);
	close(ready[1]);
	close(go[0]);
	close(go[1]);
	expect_used(t, 0);
	expect_handles_closed(t);
}

/* Waits (bounded) until process @pid sleeps in a Unix connect() for room in a backlog
 * (/proc/PID/wchan). Where the kernel hides wait channels ("0"), gives it 100 ms. */
static void wait_in_connect(pid_t pid)
{
	char path[64], buf[64];

	snprintf(path, sizeof(path), "/proc/%d/wchan", (int)pid);
	for (int i = 0; i < 5000; i++) {
		FILE *f = fopen(path, "r");
		size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

		if (f)
			fclose(f);
		buf[n] = '\0';
		if (strcmp(buf, "unix_wait_for_peer") == 0)
			return;
		if (strcmp(buf, "0") == 0 && i >= 100)
			return;
		usleep(1000);
	}
}

/*
 * A client stopped (SIGSTOP, ^Z) for longer than COFFER_STORE_TIMEOUT_MS while coffer_connect()
 * waits for room in the store's full listen backlog, room the store makes meanwhile (it was
 * stopped itself, and is continued): once continued, the connect takes that room and the
 * client connects, as a control exchange takes an answer that came meanwhile
 * (test_ctl_answer_while_stopped). Its connect() fails with EINTR at the stop (SO_SNDTIMEO,
 * signal(7)), the time is up by then, and it used to give up with -ETIMEDOUT on a store that
 * was serving again. Staged with a child process: the store is stopped and its backlog
 * filled, the child's connect waits, the child is stopped, the store continued (it accepts
 * the queue), and the child continued after three of its timeouts.
 */
static void test_connect_room_while_stopped(void **state)
{
	struct tctx *t = *state;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fill[512], nfill = 0, status;
	pid_t pid;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", t->store.sock);
	assert_int_equal(kill(t->store.pid, SIGSTOP), 0);
	assert_true(wait_stopped(t->store.pid));
	for (;;) { /* fill its backlog: non-blocking connects until it refuses more */
		int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

		assert_true(fd >= 0);
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
			assert_int_equal(errno, EAGAIN);
			close(fd);
			break;
		}
		assert_true(nfill < 512);
		fill[nfill++] = fd;
	}
	assert_int_equal(setenv("COFFER_STORE_TIMEOUT_MS", "300", 1), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		coffer_handle_t c;
		struct coffer_store_info info;
		int rc = coffer_connect(t->store.sock, &c);

		if (rc == 0)
			rc = coffer_store_query(c, &info);
		_exit(rc == 0 ? 0 : rc < -150 ? 150 : -rc);
	}
	assert_int_equal(unsetenv("COFFER_STORE_TIMEOUT_MS"), 0);
	wait_in_connect(pid);
	assert_int_equal(kill(pid, SIGSTOP), 0);
	assert_true(wait_stopped(pid));
	assert_int_equal(kill(t->store.pid, SIGCONT), 0); /* it accepts the queue: room */
	usleep(900 * 1000);
	assert_int_equal(kill(pid, SIGCONT), 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) != 0)
		print_error("the child's connect: %s\n", coffer_strerror(-WEXITSTATUS(status)));
	assert_int_equal(WEXITSTATUS(status), 0);
	for (int i = 0; i < nfill; i++)
		close(fill[i]);
	expect_handles_closed(t);
}

/*
 * fork() while the call_rcu worker is about to free a disconnected connection. The worker
 * frees reclaimed records (hashtable/reclaim.c) and a connection's free drops its arena
 * mapping's reference; fork-prepare first parks that worker (urcu_bp_call_rcu_before_fork)
 * and must not hold a lock the worker's frees take while it waits. Staged: a reader thread
 * holds a read-side section so the worker sits in the grace period of the batch that holds
 * the connection (handed over by the disconnect's barrier); our own fork handler, which runs
 * before coffer's (registered later), lets the reader go once the fork has begun. Found
 * hanging the parent inside fork() (connection lock held by fork-prepare, worker blocked on
 * it in conn_free, fork-prepare waiting for the worker to pause). A watchdog turns the hang
 * into a failure. The child then connects and uses coffer.
 */
static atomic_int forkfree_started; /* set by forkfree_prepare: fork() has begun */
static atomic_int forkfree_reading; /* the reader is inside its read-side section */
static atomic_int forkfree_done;    /* the test finished: the watchdog exits */

static void forkfree_prepare(void)
{
	atomic_store(&forkfree_started, 1);
}

static void *forkfree_reader(void *arg)
{
	(void)arg;
	coffer_rcu_read_lock();
	atomic_store(&forkfree_reading, 1);
	while (!atomic_load(&forkfree_started))
		usleep(1000);
	/* long enough for fork-prepare to reach the wait for the worker */
	usleep(200000);
	coffer_rcu_read_unlock();
	return NULL;
}

static void *forkfree_disconnect(void *arg)
{
	/* blocks in the barrier until the reader leaves its section */
	return (void *)(intptr_t)coffer_disconnect(*(coffer_handle_t *)arg);
}

static void *forkfree_watchdog(void *arg)
{
	struct tctx *t = arg;

	for (int i = 0; i < 2000 && !atomic_load(&forkfree_done); i++)
		usleep(10000);
	if (!atomic_load(&forkfree_done)) {
		fprintf(stderr, "test_fork_while_conn_freed: fork() deadlocked\n");
		store_kill(&t->store); /* leave no store behind */
		_exit(1);
	}
	return NULL;
}

static int forkfree_child(const char *sock)
{
	coffer_handle_t c, oh;
	struct coffer_oid oid;
	const void *rd;
	uint64_t sz;
	void *wr;

	alarm(20);
	make_oid(&oid, 13, 1);
	if (coffer_connect(sock, &c) != 0 || coffer_obj_open(c, &oid, 0, &oh) != 0)
		return 30;
	if (coffer_obj_create(oh, 100, 0, &wr, NULL) != 0)
		return 31;
	fill(wr, 100, 5);
	if (coffer_obj_seal(oh, COFFER_SEAL_RELEASE, NULL) != 0 ||
	    coffer_obj_get(oh, 0, &rd, &sz, NULL) != 0 || sz != 100 || !check(rd, sz, 5))
		return 32;
	if (coffer_obj_release(oh, NULL) != 0 || coffer_obj_delete(c, &oid, NULL) != 0 ||
	    coffer_obj_close(oh) != 0 || coffer_disconnect(c) != 0)
		return 33;
	return 0;
}

static void test_fork_while_conn_freed(void **state)
{
	struct tctx *t = *state;
	pthread_t rt, dt, wt;
	coffer_handle_t c;
	void *drc;
	int status;
	pid_t pid;

	atomic_store(&forkfree_started, 0);
	atomic_store(&forkfree_reading, 0);
	atomic_store(&forkfree_done, 0);
	assert_int_equal(coffer_connect(t->store.sock, &c), 0);
	/* after coffer's handlers (the connection's are installed by the first connect), so
	 * its prepare runs before theirs; registered once per process */
	{
		static int registered;

		if (!registered++)
			assert_int_equal(pthread_atfork(forkfree_prepare, NULL, NULL), 0);
	}
	assert_int_equal(pthread_create(&wt, NULL, forkfree_watchdog, t), 0);
	assert_int_equal(pthread_create(&rt, NULL, forkfree_reader, NULL), 0);
	while (!atomic_load(&forkfree_reading))
		usleep(1000);
	assert_int_equal(pthread_create(&dt, NULL, forkfree_disconnect, &c), 0);
	/* let the disconnect hand the connection to the worker, now waiting for the reader */
	usleep(100000);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(forkfree_child(t->store.sock));
	assert_int_equal(waitpid(pid, &status, 0), pid);
	atomic_store(&forkfree_done, 1);
	pthread_join(wt, NULL);
	pthread_join(rt, NULL);
	pthread_join(dt, &drc);
	assert_int_equal((int)(intptr_t)drc, 0);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	expect_used(t, 0);
	expect_handles_closed(t);
}

/*
 * Two handles of one connection hold two versions of one ID (a get before and a get after a
 * replacement). Releasing the old one by its pointer (coffer_obj_release_data(), as
 * store.h says for this case) must leave the other handle's pin on the new version: a
 * release by ID drops the current version's reference, which then became evictable while
 * its reader still held it, and a fill of the store reused its memory under the reader.
 */
static void test_release_own_version(void **state)
{
	struct tctx *t = *state;
	coffer_handle_t c, c2, h[2];
	struct coffer_store_info info;
	struct coffer_oid oid, fill_oid;
	const void *rd[2];
	uint64_t sz, osz;
	void *wr;
	int filled = 0;

	make_oid(&oid, 14, 1);
	assert_int_equal(coffer_connect(t->store.sock, &c), 0);
	assert_int_equal(coffer_connect(t->store.sock, &c2), 0);
	assert_int_equal(coffer_store_query(c, &info), 0);
	osz = info.capacity_bytes / 8;
	for (int v = 0; v < 2; v++) {
		assert_int_equal(
		    coffer_obj_create_oid(c2, &oid, osz, v ? COFFER_CREATE_REPLACE : 0, &wr, NULL),
		    0);
		fill(wr, osz, 60 + (uint64_t)v);
		assert_int_equal(coffer_obj_seal_oid(c2, &oid, COFFER_SEAL_RELEASE, NULL), 0);
		assert_int_equal(coffer_obj_open(c, &oid, 0, &h[v]), 0);
		assert_int_equal(coffer_obj_get(h[v], 0, &rd[v], &sz, NULL), 0);
		assert_true(check(rd[v], sz, 60 + (uint64_t)v));
	}
	/* h[0] is done with the old version; h[1] still reads the new one */
	assert_int_equal(coffer_obj_release_data(c, &oid, rd[0], NULL), 0);
	for (uint64_t i = 0; i < 16; i++) {
		make_oid(&fill_oid, 14, 100 + i);
		if (coffer_obj_create_oid(c2, &fill_oid, osz, 0, &wr, NULL) != 0)
			break;
		memset(wr, 0x5a, osz);
		assert_int_equal(coffer_obj_seal_oid(c2, &fill_oid, COFFER_SEAL_RELEASE, NULL), 0);
		filled++;
	}
	assert_true(filled >= 8); /* more than the store holds: everything evictable went */
	assert_true(check(rd[1], sz, 61));
	assert_int_equal(coffer_obj_release_data(c, &oid, rd[1], NULL), 0);
	/* both references are gone: neither handle holds anything */
	assert_int_equal(coffer_obj_release(h[0], NULL), -ENOENT);
	assert_int_equal(coffer_obj_release(h[1], NULL), -ENOENT);
	for (int v = 0; v < 2; v++)
		assert_int_equal(coffer_obj_close(h[v]), 0);
	for (int i = 0; i < filled; i++) {
		make_oid(&fill_oid, 14, 100 + (uint64_t)i);
		(void)coffer_obj_delete(c2, &fill_oid, NULL); /* evicted ones are gone already */
	}
	(void)coffer_obj_delete(c2, &oid, NULL);
	assert_int_equal(coffer_disconnect(c2), 0);
	assert_int_equal(coffer_disconnect(c), 0);
	expect_used(t, 0);
	expect_handles_closed(t);
}

/* ---- many objects ------------------------------------------------------------------------ */

static void test_many_objects(void **state)
{
	struct tctx *t = *state;
	enum { N = 4096, B = 64 }; /* N a multiple of B and of 128 */
	coffer_handle_t c, eq;
	struct coffer_event ev[B], *done[B];
	coffer_handle_t oh[B];
	void *wr[B];

	assert_int_equal(coffer_connect(t->store.sock, &c), 0);
	assert_int_equal(coffer_eq_create(&eq), 0);
	for (int i = 0; i < B; i++)
		assert_int_equal(coffer_event_init(&ev[i], eq, NULL), 0);
	for (int base = 0; base < N; base += B) {
		for (int i = 0; i < B; i++) {
			struct coffer_oid oid;

			make_oid(&oid, 6, (uint64_t)(base + i));
			assert_int_equal(coffer_obj_open(c, &oid, 0, &oh[i]), 0);
			assert_int_equal(coffer_obj_create(oh[i], 1024, 0, &wr[i], &ev[i]), 0);
		}
		for (int got = 0; got < B;) {
			int n = coffer_eq_poll(eq, 1, 5000000, B, done);

			assert_true(n > 0);
			for (int k = 0; k < n; k++)
				assert_int_equal(done[k]->ev_error, 0);
			got += n;
		}
		for (int i = 0; i < B; i++) {
			fill(wr[i], 1024, (uint64_t)(base + i));
			assert_int_equal(coffer_obj_seal(oh[i], COFFER_SEAL_RELEASE, &ev[i]), 0);
		}
		for (int got = 0; got < B;) {
			int n = coffer_eq_poll(eq, 1, 5000000, B, done);

			assert_true(n > 0);
			for (int k = 0; k < n; k++)
				assert_int_equal(done[k]->ev_error, 0);
			got += n;
		}
		for (int i = 0; i < B; i++)
			assert_int_equal(coffer_obj_close(oh[i]), 0);
	}
	/* read them all back in bulk gets of 128 */
	for (int base = 0; base < N; base += 128) {
		struct coffer_oid oids[128];
		struct coffer_obj_buf bufs[128];
		unsigned int n = N - base < 128 ? (unsigned int)(N - base) : 128;

		for (unsigned int i = 0; i < n; i++)
			make_oid(&oids[i], 6, (uint64_t)base + i);
		assert_int_equal(coffer_obj_get_bulk(c, oids, n, 0, bufs, NULL), 0);
		for (unsigned int i = 0; i < n; i++) {
			assert_int_equal(bufs[i].status, 0);
			assert_true(check(bufs[i].data, 1024, (uint64_t)base + i));
			assert_int_equal(coffer_obj_release_oid(c, &oids[i], &ev[0]), 0);
			assert_int_equal(wait_ev(eq, &ev[0]), 0);
			assert_int_equal(coffer_obj_delete(c, &oids[i], &ev[0]), 0);
			assert_int_equal(wait_ev(eq, &ev[0]), 0);
		}
	}
	for (int i = 0; i < N; i++) {
		struct coffer_oid oid;
		bool present;

		make_oid(&oid, 6, (uint64_t)i);
		assert_int_equal(coffer_obj_contains(c, &oid, &present, NULL), 0);
		assert_false(present);
	}
	for (int i = 0; i < B; i++)
		assert_int_equal(coffer_event_fini(&ev[i]), 0);
	assert_int_equal(coffer_eq_destroy(eq, 0), 0);
	assert_int_equal(coffer_disconnect(c), 0);
	expect_used(t, 0);
	expect_handles_closed(t);
}

/* ---- full channel ------------------------------------------------------------------------ */

static void test_eagain_full_channel(void **state)
{
	struct tctx *t = *state;
	enum { MAXEV = 8192 };
	struct coffer_event *ev = calloc(MAXEV, sizeof(*ev));
	const void **rd = calloc(MAXEV, sizeof(*rd));
	coffer_handle_t c, c2, eq, oh, ow;
	struct coffer_oid oid;
	struct coffer_event *done[64];
	int launched = 0, rc = 0, got = 0;
	void *wr;

	assert_non_null(ev);
	assert_non_null(rd);
	make_oid(&oid, 7, 1);
	assert_int_equal(coffer_connect(t->store.sock, &c), 0);
	assert_int_equal(coffer_connect(t->store.sock, &c2), 0);
	assert_int_equal(coffer_eq_create(&eq), 0);
	assert_int_equal(coffer_obj_open(c, &oid, 0, &oh), 0);
	/* gets that wait forever pin their slots until the object appears */
	while (launched < MAXEV) {
		assert_int_equal(coffer_event_init(&ev[launched], eq, NULL), 0);
		rc = coffer_obj_get(oh, -1, &rd[launched], NULL, &ev[launched]);
		if (rc < 0)
			break;
		launched++;
		if (launched % 32 == 0) /* let the store take them (they wait there) */
			assert_int_equal(coffer_eq_poll(eq, 0, 0, 64, done), 0);
	}
	assert_int_equal(rc, -EAGAIN);
	/* the capacity is a power of two the store granted (8..4096) */
	assert_true(launched >= 8 && launched <= 4096);
	assert_int_equal(launched & (launched - 1), 0);
	assert_int_equal(coffer_event_fini(&ev[launched]), 0);

	/* another connection creates and seals: every waiting get completes */
	assert_int_equal(coffer_obj_open(c2, &oid, 0, &ow), 0);
	assert_int_equal(coffer_obj_create(ow, 128, 0, &wr, NULL), 0);
	fill(wr, 128, 3);
	assert_int_equal(coffer_obj_seal(ow, COFFER_SEAL_RELEASE, NULL), 0);
	while (got < launched) {
		int n = coffer_eq_poll(eq, 1, 5000000, 64, done);

		assert_true(n > 0);
		for (int k = 0; k < n; k++)
			assert_int_equal(done[k]->ev_error, 0);
		got += n;
	}
	for (int i = 0; i < launched; i++)
		assert_true(check(rd[i], 128, 3));
	/* room again: one more async call goes through */
	for (int i = 0; i < launched; i++) {
		assert_int_equal(coffer_obj_release(oh, &ev[i]), 0);
		if (i % 32 == 31)
			assert_int_equal(coffer_flush(c), 0);
	}
	for (got = 0; got < launched;) {
		int n = coffer_eq_poll(eq, 1, 5000000, 64, done);

		assert_true(n > 0);
		for (int k = 0; k < n; k++)
			assert_int_equal(done[k]->ev_error, 0);
		got += n;
	}
	for (int i = 0; i < launched; i++)
		assert_int_equal(coffer_event_fini(&ev[i]), 0);
	assert_int_equal(coffer_obj_delete(c, &oid, NULL), 0);
	assert_int_equal(coffer_obj_close(oh), 0);
	assert_int_equal(coffer_obj_close(ow), 0);
	assert_int_equal(coffer_eq_destroy(eq, 0), 0);
	assert_int_equal(coffer_disconnect(c), 0);
	assert_int_equal(coffer_disconnect(c2), 0);
	free(ev);
	free(rd);
	expect_used(t, 0);
	expect_handles_closed(t);
}

/* ---- store death --------------------------------------------------------------------- */

struct blocker {
	coffer_handle_t oh;
	int rc;
};

static void *blocked_get(void *arg)
{
	struct blocker *b = arg;
	const void *rd;

	b->rc = coffer_obj_get(b->oh, -1, &rd, NULL, NULL);
	return NULL;
}

struct enospc_calls {
	const char *sock;
	coffer_handle_t c;
	int eq_create, obj_open, connect, contains, get_oid;
};

/* A thread with no cookies of its own left (the process's 2^60 issued): every call that
 * would insert a handle says why it cannot. */
static void *enospc_thread(void *arg)
{
	struct enospc_calls *a = arg;
	struct coffer_oid oid = {{9}};
	coffer_handle_t h;
	const void *rd;
	bool present;

	a->eq_create = coffer_eq_create(&h);
	a->obj_open = coffer_obj_open(a->c, &oid, 0, &h);
	a->connect = coffer_connect(a->sock, &h);
	/* blocking calls: their first creates the thread's hidden EQ */
	a->contains = coffer_obj_contains(a->c, &oid, &present, NULL);
	a->get_oid = coffer_obj_get_oid(a->c, &oid, 0, &rd, NULL, NULL);
	return NULL;
}

/* In a child (the cookie counter only ever rises): 0, or which call did not say -ENOSPC. */
static int enospc_child(const char *sock)
{
	struct enospc_calls a = {.sock = sock};
	pthread_t t;

	if (coffer_connect(sock, &a.c) != 0)
		return 10;
	coffer__hhash_raise_counter(UINT64_MAX >> COFFER_HTYPE_BITS);
	if (pthread_create(&t, NULL, enospc_thread, &a) != 0 || pthread_join(t, NULL) != 0)
		return 11;
	if (coffer_disconnect(a.c) != 0)
		return 12;
	if (a.eq_create != -ENOSPC)
		return 1;
	if (a.obj_open != -ENOSPC)
		return 2;
	if (a.connect != -ENOSPC)
		return 3;
	if (a.contains != -ENOSPC)
		return 4;
	if (a.get_oid != -ENOSPC)
		return 5;
	return 0;
}

/*
 * Every public call that inserts into the handle hash - coffer_eq_create(), coffer_obj_open(),
 * coffer_connect(), and a thread's first blocking call, which creates its hidden EQ - says
 * -ENOSPC when the process has issued all its cookies, as their headers list, and the
 * connection it had still disconnects.
 */
static void test_cookies_exhausted(void **state)
{
	struct tctx *t = *state;
	int status;
	pid_t pid;

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(enospc_child(t->store.sock));
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/*
 * coffer_flush() tells a wrong handle as every call does: a handle of another type (null,
 * an EQ, an object) is -EINVAL; a connection handle that names no connection (never issued,
 * disconnected) is -ENOENT; with no runtime left it is -EINVAL. It answered -ENOENT for
 * every wrong handle.
 */
static void test_flush_errors(void **state)
{
	struct tctx *t = *state;
	struct coffer_oid oid = {{1}};
	coffer_handle_t c, eq, oh;

	assert_int_equal(coffer_connect(t->store.sock, &c), 0);
	assert_int_equal(coffer_eq_create(&eq), 0);
	assert_int_equal(coffer_obj_open(c, &oid, 0, &oh), 0);
	assert_int_equal(coffer_flush(c), 0);
	assert_int_equal(coffer_flush(COFFER_HANDLE_NULL), -EINVAL);
	assert_int_equal(coffer_flush(eq), -EINVAL);
	assert_int_equal(coffer_flush(oh), -EINVAL);
	assert_int_equal(coffer_flush((coffer_handle_t){.cookie = c.cookie + 16}), -ENOENT);
	assert_int_equal(coffer_obj_close(oh), 0);
	assert_int_equal(coffer_eq_destroy(eq, 0), 0);
	assert_int_equal(coffer_disconnect(c), 0);
	assert_int_equal(coffer_flush(c), -ENOENT);
	coffer_fini(); /* setup's: no runtime now */
	assert_int_equal(coffer_flush(c), -EINVAL);
	assert_int_equal(coffer_init(), 0); /* for teardown's coffer_fini() */
}

/*
 * A program that never called coffer_init() and has disconnected its last connection (the
 * runtime stopped with it): a call by ObjectID on that connection is "disconnected",
 * -ENOTCONN (coffer/store.h), blocking or not. The blocking form, which is the asynchronous
 * call on a hidden per-thread EQ, failed to create that EQ first and returned -EINVAL,
 * which store.h gives only for a handle that is not a connection's, while the index read
 * beside it said -ENOTCONN.
 */
static void test_blocking_after_last_disconnect(void **state)
{
	struct tctx *t = *state;
	struct coffer_obj_buf buf;
	struct coffer_oid oid;
	const void *rd;
	bool present;
	void *wr[1];
	coffer_handle_t c;

	make_oid(&oid, 77, 1);
	assert_int_equal(coffer_fini(), 0); /* the setup's: only the connection holds one now */
	assert_int_equal(coffer_connect(t->store.sock, &c), 0);
	assert_int_equal(coffer_obj_contains(c, &oid, &present, NULL), 0);
	assert_int_equal(coffer_disconnect(c), 0);
	assert_null(coffer_hhash_global());

	assert_int_equal(coffer_obj_read_oid(c, &oid, 0, NULL, 0, NULL), -ENOTCONN);
	assert_int_equal(coffer_obj_contains(c, &oid, &present, NULL), -ENOTCONN);
	assert_int_equal(coffer_obj_get_oid(c, &oid, 0, &rd, NULL, NULL), -ENOTCONN);
	assert_int_equal(coffer_obj_create_oid(c, &oid, 8, 0, &wr[0], NULL), -ENOTCONN);
	assert_int_equal(coffer_obj_release_oid(c, &oid, NULL), -ENOTCONN);
	assert_int_equal(coffer_obj_delete(c, &oid, NULL), -ENOTCONN);
	assert_int_equal(coffer_obj_get_bulk(c, &oid, 1, 0, &buf, NULL), -ENOTCONN);
	assert_int_equal(coffer_obj_reserve(c, 64, 1, wr, NULL), -ENOTCONN);
	assert_null(coffer_hhash_global()); /* nothing restarted the runtime */
	assert_int_equal(coffer_init(), 0); /* for the teardown */
}

/*
 * The same for object handles (store.h, coffer_disconnect(): every operation on them returns
 * -ENOTCONN): the last disconnect of a program without coffer_init() stopped the runtime and
 * its handle records; create/seal/get/release, blocking or with an event, said -EINVAL.
 */
static void test_obj_handle_after_last_disconnect(void **state)
{
	struct tctx *t = *state;
	struct coffer_event ev;
	struct coffer_oid oid;
	const void *rd;
	void *wr;
	coffer_handle_t c, oh;

	make_oid(&oid, 78, 1);
	assert_int_equal(coffer_fini(), 0); /* the setup's: only the connection holds one now */
	assert_int_equal(coffer_connect(t->store.sock, &c), 0);
	assert_int_equal(coffer_obj_open(c, &oid, 0, &oh), 0);
	assert_int_equal(coffer_disconnect(c), 0);
	assert_null(coffer_hhash_global());

	memset(&ev, 0, sizeof(ev));
	assert_int_equal(coffer_obj_create(oh, 8, 0, &wr, NULL), -ENOTCONN);
	assert_int_equal(coffer_obj_seal(oh, 0, NULL), -ENOTCONN);
	assert_int_equal(coffer_obj_get(oh, 0, &rd, NULL, NULL), -ENOTCONN);
	assert_int_equal(coffer_obj_release(oh, NULL), -ENOTCONN);
	assert_int_equal(coffer_obj_seal(oh, 0, &ev), -ENOTCONN);
	assert_int_equal(coffer_obj_close(oh), -EINVAL); /* as store.h says: records gone */
	assert_null(coffer_hhash_global());		 /* nothing restarted the runtime */
	assert_int_equal(coffer_init(), 0);		 /* for the teardown */
}

/*
 * coffer_fini() called once more than coffer_init() (common.h: -EINVAL when there is no
 * coffer_init() left to balance) while a connection is open: the connection's own reference
 * on the runtime is not the caller's to drop. It used to be taken: the extra fini returned 0
 * and destroyed the handle hash under the live connection, whose every later call (and its
 * coffer_disconnect()) then said -EINVAL, leaking its socket, mappings and monitor thread.
 */
static void test_fini_once_too_often(void **state)
{
	struct tctx *t = *state;
	struct coffer_store_info info;
	coffer_handle_t c;

	assert_int_equal(coffer_connect(t->store.sock, &c), 0);
	assert_int_equal(coffer_init(), 0);
	assert_int_equal(coffer_fini(), 0);
	assert_int_equal(coffer_fini(), 0);	  /* the setup's coffer_init() */
	assert_int_equal(coffer_fini(), -EINVAL); /* one more than coffer_init() */
	assert_int_equal(coffer_fini(), -EINVAL);
	assert_non_null(coffer_hhash_global());
	assert_int_equal(coffer_store_query(c, &info), 0);
	assert_int_equal(coffer_init(), 0); /* for the teardown */
	assert_int_equal(coffer_disconnect(c), 0);
	assert_int_equal(coffer_store_query(c, &info), -ENOENT);
	expect_handles_closed(t);
}

static void test_store_killed(void **state)
{
	struct tctx *t = *state;
	enum { N = 16 };
	coffer_handle_t c, eq, oh;
	struct coffer_event ev[N], *done[N];
	struct coffer_oid oid;
	struct blocker b;
	pthread_t tid;
	const void *rd[N];
	int got = 0;

	make_oid(&oid, 8, 1);
	assert_int_equal(coffer_connect(t->store.sock, &c), 0);
	assert_int_equal(coffer_eq_create(&eq), 0);
	assert_int_equal(coffer_obj_open(c, &oid, 0, &oh), 0);
	for (int i = 0; i < N; i++) {
		assert_int_equal(coffer_event_init(&ev[i], eq, NULL), 0);
		assert_int_equal(coffer_obj_get(oh, -1, &rd[i], NULL, &ev[i]), 0);
	}
	assert_int_equal(coffer_flush(c), 0);
	b.oh = oh;
	b.rc = 1;
	assert_int_equal(pthread_create(&tid, NULL, blocked_get, &b), 0);
	usleep(100000);
	store_kill(&t->store);
	/* nothing hangs: the async events and the blocked call all end with -ENOTCONN */
	while (got < N) {
		int n = coffer_eq_poll(eq, 1, 5000000, N, done);

		assert_true(n > 0);
		for (int k = 0; k < n; k++)
			assert_int_equal(done[k]->ev_error, -ENOTCONN);
		got += n;
	}
	pthread_join(tid, NULL);
	assert_int_equal(b.rc, -ENOTCONN);
	assert_int_equal(coffer_obj_get(oh, 0, &rd[0], NULL, NULL), -ENOTCONN);
	assert_int_equal(coffer_obj_get(oh, 0, &rd[0], NULL, &ev[0]), -ENOTCONN);
	assert_int_equal(coffer_flush(c), -ENOTCONN);
	for (int i = 0; i < N; i++)
		assert_int_equal(coffer_event_fini(&ev[i]), 0);
	assert_int_equal(coffer_obj_close(oh), 0);
	assert_int_equal(coffer_eq_destroy(eq, 0), 0);
	assert_int_equal(coffer_disconnect(c), 0);
	expect_handles_closed(t);
}

struct two_waiter {
	coffer_handle_t conn;
	struct coffer_oid oid;
	const void *data;
	int rc;
};

static void *two_waiter_main(void *arg)
{
	struct two_waiter *w = arg;

	w->rc = coffer_obj_get_oid(w->conn, &w->oid, -1, &w->data, NULL, NULL);
	return NULL;
}

/* Creates and seals @oid of 64 bytes of @seed through @c. */
static void put64(coffer_handle_t c, const struct coffer_oid *oid, uint64_t seed)
{
	void *wr;

	assert_int_equal(coffer_obj_create_oid(c, oid, 64, 0, &wr, NULL), 0);
	fill(wr, 64, seed);
	assert_int_equal(coffer_obj_seal_oid(c, oid, COFFER_SEAL_RELEASE, NULL), 0);
}

/*
 * One process, two stores (two sockets, two arenas), one ObjectID in both: each connection
 * reads its own store's bytes (get and index read), one EQ takes events from both, and when
 * one store is killed its events complete with -ENOTCONN while the other's wait on, its
 * blocking and asynchronous gets are served, and nothing of ours is left in it.
 */
static void test_two_stores(void **state)
{
	struct tctx *t = *state;
	struct store_fixture other;
	struct coffer_oid oid, absent;
	struct coffer_event ev[2], *done;
	struct two_waiter w;
	coffer_handle_t c[2], eq;
	const void *rd[2];
	uint64_t size[2];
	uint8_t buf[64];
	pthread_t tid;

	make_oid(&oid, 12, 1);
	make_oid(&absent, 12, 2);
	assert_int_equal(store_start(&other, "4M"), 0);
	assert_int_equal(coffer_connect(t->store.sock, &c[0]), 0);
	assert_int_equal(coffer_connect(other.sock, &c[1]), 0);
	assert_int_equal(coffer_eq_create(&eq), 0);
	for (int i = 0; i < 2; i++) {
		put64(c[i], &oid, 100 + (uint64_t)i);
		assert_int_equal(coffer_event_init(&ev[i], eq, NULL), 0);
	}
	/* the same ID, each store's own bytes: through one EQ, and through each index */
	for (int i = 0; i < 2; i++)
		assert_int_equal(coffer_obj_get_oid(c[i], &oid, 0, &rd[i], &size[i], &ev[i]), 0);
	for (int got = 0; got < 2; got++) {
		assert_int_equal(coffer_eq_poll(eq, 1, 5000000, 1, &done), 1);
		assert_int_equal(done->ev_error, 0);
	}
	for (int i = 0; i < 2; i++) {
		assert_int_equal(size[i], 64);
		assert_true(check(rd[i], 64, 100 + (uint64_t)i));
		assert_int_equal(coffer_obj_read_oid(c[i], &oid, 0, buf, sizeof(buf), NULL), 64);
		assert_true(check(buf, 64, 100 + (uint64_t)i));
		assert_int_equal(coffer_obj_release_data(c[i], &oid, rd[i], NULL), 0);
	}
	/* gets waiting in both stores: one EQ, and a blocking call on the first */
	for (int i = 0; i < 2; i++)
		assert_int_equal(coffer_obj_get_oid(c[i], &absent, -1, &rd[i], NULL, &ev[i]), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(coffer_flush(c[i]), 0);
	w.conn = c[0];
	w.oid = absent;
	w.rc = 1;
	assert_int_equal(pthread_create(&tid, NULL, two_waiter_main, &w), 0);

	/* the second store dies: its get completes with -ENOTCONN, nothing else does */
	store_kill(&other);
	assert_int_equal(coffer_eq_poll(eq, 1, 5000000, 1, &done), 1);
	assert_ptr_equal(done, &ev[1]);
	assert_int_equal(ev[1].ev_error, -ENOTCONN);
	assert_int_equal(coffer_eq_poll(eq, 1, 200000, 1, &done), 0);
	assert_int_equal(coffer_obj_read_oid(c[1], &oid, 0, buf, sizeof(buf), NULL), -ENOTCONN);
	assert_int_equal(coffer_obj_get_oid(c[1], &oid, 0, &rd[1], NULL, NULL), -ENOTCONN);

	/* the first one serves both of its waiting gets */
	put64(c[0], &absent, 7);
	assert_int_equal(coffer_eq_poll(eq, 1, 5000000, 1, &done), 1);
	assert_ptr_equal(done, &ev[0]);
	assert_int_equal(ev[0].ev_error, 0);
	assert_true(check(rd[0], 64, 7));
	assert_int_equal(pthread_join(tid, NULL), 0);
	assert_int_equal(w.rc, 0);
	assert_ptr_equal(w.data, rd[0]);
	assert_int_equal(coffer_obj_release_data(c[0], &absent, rd[0], NULL), 0);
	assert_int_equal(coffer_obj_release_data(c[0], &absent, w.data, NULL), 0);

	for (int i = 0; i < 2; i++)
		assert_int_equal(coffer_event_fini(&ev[i]), 0);
	assert_int_equal(coffer_eq_destroy(eq, 0), 0);
	assert_int_equal(coffer_disconnect(c[1]), 0);
	assert_int_equal(coffer_obj_delete(c[0], &oid, NULL), 0);
	assert_int_equal(coffer_obj_delete(c[0], &absent, NULL), 0);
	assert_int_equal(coffer_disconnect(c[0]), 0);
	store_stop(&other);
	expect_used(t, 0);
	expect_handles_closed(t);
}

struct first_call {
	coffer_handle_t conn;
	int rc;
};

static void *first_call_main(void *arg)
{
	struct first_call *fc = arg;
	struct coffer_oid oid;
	bool present;

	make_oid(&oid, 9, 7);
	/* this thread's first call on the connection: it opens a channel (CHANNEL_OPEN) */
	fc->rc = coffer_obj_contains(fc->conn, &oid, &present, NULL);
	return NULL;
}

/*
 * Two stores; one is stopped (SIGSTOP) while a thread's first call on it waits in the control
 * exchange that opens its channel. coffer_disconnect() of that connection ends the exchange
 * (store.h: that call returns -ENOTCONN) instead of waiting for it to time out, and the other
 * store's connection keeps working. The disconnect used to shut the socket down only after
 * closing the channels, which takes the channel lock the opening call held for its whole
 * exchange: it waited out COFFER_STORE_TIMEOUT_MS (2 s here, 10 s by default), and the call
 * said -ETIMEDOUT.
 */
static void test_disconnect_ends_channel_open(void **state)
{
	struct tctx *t = *state;
	struct store_fixture other;
	struct first_call fc;
	struct coffer_oid oid;
	coffer_handle_t c2;
	pthread_t tid;
	bool present;

	make_oid(&oid, 9, 8);
	assert_int_equal(store_start(&other, "4M"), 0);
	assert_int_equal(setenv("COFFER_STORE_TIMEOUT_MS", "2000", 1), 0);
	assert_int_equal(coffer_connect(t->store.sock, &fc.conn), 0);
	assert_int_equal(unsetenv("COFFER_STORE_TIMEOUT_MS"), 0);
	assert_int_equal(coffer_connect(other.sock, &c2), 0);
	assert_int_equal(kill(t->store.pid, SIGSTOP), 0);
	fc.rc = 1;
	assert_int_equal(pthread_create(&tid, NULL, first_call_main, &fc), 0);
	usleep(300000); /* it is in the exchange now (or soon: then it finds the connection gone) */
	assert_int_equal(coffer_disconnect(fc.conn), 0);
	assert_int_equal(pthread_join(tid, NULL), 0);
	assert_int_equal(fc.rc, -ENOTCONN);
	/* the other store was never involved */
	assert_int_equal(coffer_obj_contains(c2, &oid, &present, NULL), 0);
	assert_false(present);
	assert_int_equal(coffer_disconnect(c2), 0);
	assert_int_equal(store_stop(&other), 0);
	assert_int_equal(kill(t->store.pid, SIGCONT), 0);
	expect_used(t, 0);
	expect_handles_closed(t);
}

/* After a SIGSTOP test: the resumed store lets both dead connections (@c, each with its
 * object handle @oh) close and disconnect cleanly and holds nothing of them. */
static void store_resumed_unharmed(struct tctx *t, const coffer_handle_t c[2],
				   const coffer_handle_t oh[2])
{
	assert_int_equal(kill(t->store.pid, SIGCONT), 0);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(coffer_obj_close(oh[i]), 0);
		assert_int_equal(coffer_disconnect(c[i]), 0);
	}
	expect_used(t, 0);
	expect_handles_closed(t);
}

/* A store that is alive but never answers (SIGSTOP) must not hang a blocking call with a
 * bounded timeout. Two paths: a connection whose channel is already open (the request is in
 * the ring: after its timeout plus COFFER_CTL_TIMEOUT_MS the connection is failed), and a
 * fresh connection whose first call must open a channel (the control exchange times out).
 * Either way the call fails with -ETIMEDOUT and the connection stays dead: every later call
 * gets -ENOTCONN (found inconsistent by a new user: later calls said -ETIMEDOUT, which
 * coffer_store_query() does not even document); the resumed store is unharmed and holds
 * nothing of ours. */
static double secs_since(const struct timespec *a)
{
	struct timespec b;

	clock_gettime(CLOCK_MONOTONIC, &b);
	return (double)(b.tv_sec - a->tv_sec) + (double)(b.tv_nsec - a->tv_nsec) / 1e9;
}

static void test_store_stopped(void **state)
{
	struct tctx *t = *state;
	coffer_handle_t c[2], oh[2];
	struct coffer_oid oid;
	struct timespec a;
	const void *rd;
	bool present;
	double secs;
	int rc;

	make_oid(&oid, 9, 1);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(coffer_connect(t->store.sock, &c[i]), 0);
		assert_int_equal(coffer_obj_open(c[i], &oid, 0, &oh[i]), 0);
	}
	/* c[0]'s channel for this thread's blocking calls is open before the store stops */
	assert_int_equal(coffer_obj_contains(c[0], &oid, &present, NULL), 0);
	assert_false(present);
	assert_int_equal(kill(t->store.pid, SIGSTOP), 0);
	for (int i = 0; i < 2; i++) {
		clock_gettime(CLOCK_MONOTONIC, &a);
		rc = coffer_obj_get(oh[i], 200 * 1000, &rd, NULL, NULL);
		secs = secs_since(&a);
		assert_int_equal(rc, -ETIMEDOUT);
		assert_true(secs >= 9.5 && secs < 30.0);
		/* the connection stays dead */
		assert_int_equal(coffer_obj_get(oh[i], 0, &rd, NULL, NULL), -ENOTCONN);
		assert_int_equal(coffer_store_query(c[i], &(struct coffer_store_info){0}),
				 -ENOTCONN);
	}
	store_resumed_unharmed(t, c, oh);
}

/*
 * The connection monitor's liveness probe (COFFER_STORE_TIMEOUT_MS, here 300 ms): an
 * asynchronous request in the ring of a stopped store, polled without a timeout (as fio's
 * getevents does), completes with -ENOTCONN within a few timeouts instead of never; a get
 * that waits for a seal on a live store is not taken for a dead store, however long it waits.
 */
static void test_store_stopped_async(void **state)
{
	struct tctx *t = *state;
	struct coffer_event ev, evg, *done;
	struct coffer_oid oid, late;
	coffer_handle_t c, eq, oh, ohl;
	struct timespec a;
	const void *rd;
	uint64_t got = 0;
	double secs;
	void *wr;

	make_oid(&oid, 9, 2);
	make_oid(&late, 9, 3);
	assert_int_equal(setenv("COFFER_STORE_TIMEOUT_MS", "300", 1), 0);
	assert_int_equal(coffer_connect(t->store.sock, &c), 0);
	assert_int_equal(unsetenv("COFFER_STORE_TIMEOUT_MS"), 0);
	assert_int_equal(coffer_eq_create(&eq), 0);
	assert_int_equal(coffer_event_init(&ev, eq, NULL), 0);
	assert_int_equal(coffer_event_init(&evg, eq, NULL), 0);
	assert_int_equal(coffer_obj_open(c, &oid, 0, &oh), 0);
	assert_int_equal(coffer_obj_open(c, &late, 0, &ohl), 0);

	/* a get waiting for a seal, 2 s = several probe intervals: the store answers the probes,
	 * so the connection lives and the get completes once the object is sealed */
	assert_int_equal(coffer_obj_get(ohl, -1, &rd, &got, &evg), 0);
	assert_int_equal(coffer_eq_poll(eq, 0, 2000 * 1000, 1, &done), 0);
	assert_int_equal(coffer_obj_create(oh, 64, 0, &wr, NULL), 0);
	assert_int_equal(coffer_obj_abort(oh, NULL), 0);
	{
		coffer_handle_t c2, oh2;

		assert_int_equal(coffer_connect(t->store.sock, &c2), 0);
		assert_int_equal(coffer_obj_open(c2, &late, 0, &oh2), 0);
		assert_int_equal(coffer_obj_create(oh2, 64, 0, &wr, NULL), 0);
		assert_int_equal(coffer_obj_seal(oh2, COFFER_SEAL_RELEASE, NULL), 0);
		assert_int_equal(coffer_eq_poll(eq, 1, -1, 1, &done), 1);
		assert_ptr_equal(done, &evg);
		assert_int_equal(evg.ev_error, 0);
		assert_int_equal(got, 64);
		assert_int_equal(coffer_obj_release(ohl, NULL), 0);
		assert_int_equal(coffer_obj_delete(c2, &late, NULL), 0);
		assert_int_equal(coffer_obj_close(oh2), 0);
		assert_int_equal(coffer_disconnect(c2), 0);
	}

	/* the EQ's channel is open; stop the store, then launch into its ring */
	assert_int_equal(kill(t->store.pid, SIGSTOP), 0);
	clock_gettime(CLOCK_MONOTONIC, &a);
	assert_int_equal(coffer_obj_create(oh, 4096, 0, &wr, &ev), 0);
	assert_int_equal(coffer_eq_poll(eq, 1, -1, 1, &done), 1);
	secs = secs_since(&a);
	assert_ptr_equal(done, &ev);
	assert_int_equal(ev.ev_error, -ENOTCONN);
	assert_true(secs >= 0.3 && secs < 5.0);
	/* the connection stays dead */
	assert_int_equal(coffer_obj_create(oh, 4096, 0, &wr, NULL), -ENOTCONN);
	assert_int_equal(kill(t->store.pid, SIGCONT), 0);

	assert_int_equal(coffer_event_fini(&ev), 0);
	assert_int_equal(coffer_event_fini(&evg), 0);
	assert_int_equal(coffer_obj_close(oh), 0);
	assert_int_equal(coffer_obj_close(ohl), 0);
	assert_int_equal(coffer_eq_destroy(eq, 0), 0);
	assert_int_equal(coffer_disconnect(c), 0);
	expect_used(t, 0);
	expect_handles_closed(t);
}

/* Waits (at most 5 s) until the store serves no session but @c2's and holds no unsealed
 * object: the given-up connection's session has ended. */
static void expect_session_ended(coffer_handle_t c2)
{
	struct coffer_store_info info = {0};

	for (int i = 0; i < 500; i++) {
		assert_int_equal(coffer_store_query(c2, &info), 0);
		if (info.clients == 1 && info.objects_created == 0)
			break;
		usleep(10000);
	}
	assert_int_equal(info.clients, 1);
	assert_int_equal(info.objects_created, 0);
}

/*
 * store.h "Liveness": a request whose caller was told it failed because the store went silent
 * (-ETIMEDOUT for a blocking call, -ENOTCONN for a pending event) is not executed by the
 * store once it runs again, and the store ends the given-up connection's session at once
 * (aborting its unsealed objects, dropping its references), not at coffer_disconnect(). The
 * store is stopped (SIGSTOP) before the requests go out, so it cannot have begun them.
 * Found so: a seal that answered -ETIMEDOUT sealed the object once the store was continued
 * (a second client got it), the dead connection's session lived on with its reference, and
 * the creator, told its object was still unsealed, rewrote the sealed object through its
 * create pointer (the second client read the new bytes); an asynchronous delete completed
 * with -ENOTCONN and deleted the object later, a create with -ENOTCONN created one.
 */
static void test_store_stopped_outcome(void **state)
{
	struct tctx *t = *state;
	struct coffer_oid oid, keep, late;
	struct coffer_event ev[2], *done;
	coffer_handle_t c, c2, oh, eq;
	const void *rd = NULL;
	void *wr, *wr2 = NULL;
	bool present = true;
	uint64_t got = 0;

	make_oid(&oid, 9, 5);
	make_oid(&keep, 9, 6);
	make_oid(&late, 9, 7);
	assert_int_equal(coffer_connect(t->store.sock, &c2), 0);

	/* a blocking seal */
	assert_int_equal(setenv("COFFER_STORE_TIMEOUT_MS", "200", 1), 0);
	assert_int_equal(coffer_connect(t->store.sock, &c), 0);
	assert_int_equal(coffer_obj_open(c, &oid, 0, &oh), 0);
	assert_int_equal(coffer_obj_create(oh, 4096, 0, &wr, NULL), 0);
	memset(wr, 'A', 4096);
	assert_int_equal(coffer_obj_contains(c2, &oid, &present, NULL), 0); /* c2's channel */
	assert_false(present);
	assert_int_equal(kill(t->store.pid, SIGSTOP), 0);
	assert_int_equal(coffer_obj_seal(oh, 0, NULL), -ETIMEDOUT);
	assert_int_equal(kill(t->store.pid, SIGCONT), 0);
	expect_session_ended(c2);
	assert_int_equal(coffer_obj_contains(c2, &oid, &present, NULL), 0);
	assert_false(present);
	assert_int_equal(coffer_obj_get_oid(c2, &oid, 0, &rd, &got, NULL), -ENOENT);
	assert_int_equal(coffer_obj_close(oh), 0);
	assert_int_equal(coffer_disconnect(c), 0);

	/* asynchronous requests: a delete of a sealed object and a create */
	assert_int_equal(coffer_obj_create_oid(c2, &keep, 64, 0, &wr2, NULL), 0);
	assert_int_equal(coffer_obj_seal_oid(c2, &keep, COFFER_SEAL_RELEASE, NULL), 0);
	assert_int_equal(coffer_connect(t->store.sock, &c), 0);
	assert_int_equal(unsetenv("COFFER_STORE_TIMEOUT_MS"), 0);
	assert_int_equal(coffer_eq_create(&eq), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(coffer_event_init(&ev[i], eq, NULL), 0);
	assert_int_equal(coffer_obj_contains(c, &keep, &present, &ev[0]), 0); /* EQ's channel */
	assert_int_equal(coffer_eq_poll(eq, 1, -1, 1, &done), 1);
	assert_true(present);
	assert_int_equal(kill(t->store.pid, SIGSTOP), 0);
	assert_int_equal(coffer_obj_delete(c, &keep, &ev[0]), 0);
	assert_int_equal(coffer_obj_create_oid(c, &late, 64, 0, &wr2, &ev[1]), 0);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(coffer_eq_poll(eq, 1, -1, 1, &done), 1);
		assert_int_equal(done->ev_error, -ENOTCONN);
	}
	assert_int_equal(kill(t->store.pid, SIGCONT), 0);
	expect_session_ended(c2);
	assert_int_equal(coffer_obj_contains(c2, &keep, &present, NULL), 0);
	assert_true(present);
	assert_int_equal(coffer_obj_contains(c2, &late, &present, NULL), 0);
	assert_false(present);
	for (int i = 0; i < 2; i++)
		assert_int_equal(coffer_event_fini(&ev[i]), 0);
	assert_int_equal(coffer_eq_destroy(eq, 0), 0);
	assert_int_equal(coffer_disconnect(c), 0);
	assert_int_equal(coffer_obj_delete(c2, &keep, NULL), 0);
	assert_int_equal(coffer_disconnect(c2), 0);
	expect_used(t, 0);
	expect_handles_closed(t);
}

/*
 * store.h: a blocking call (@ev NULL) on a store that is alive but silent (SIGSTOP) fails
 * with -ETIMEDOUT, and only later calls on the connection with -ENOTCONN - also when the
 * call's own timeout is long or forever, so that the connection monitor's liveness probe
 * (COFFER_STORE_TIMEOUT_MS, here 300 ms) gives up on the store before the call itself does.
 * Such a get used to return -ENOTCONN, as if the store had died. A killed store still gives
 * -ENOTCONN (test_store_killed).
 */
static void test_store_stopped_long_get(void **state)
{
	struct tctx *t = *state;
	coffer_handle_t c[2], oh[2];
	const int64_t own_us[2] = {20 * 1000 * 1000, -1};
	struct coffer_oid oid;
	struct timespec a;
	const void *rd;
	bool present;
	double secs;

	make_oid(&oid, 9, 4);
	assert_int_equal(setenv("COFFER_STORE_TIMEOUT_MS", "300", 1), 0);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(coffer_connect(t->store.sock, &c[i]), 0);
		assert_int_equal(coffer_obj_open(c[i], &oid, 0, &oh[i]), 0);
		/* this thread's channel for blocking calls is open before the store stops */
		assert_int_equal(coffer_obj_contains(c[i], &oid, &present, NULL), 0);
	}
	assert_int_equal(unsetenv("COFFER_STORE_TIMEOUT_MS"), 0);
	assert_int_equal(kill(t->store.pid, SIGSTOP), 0);
	for (int i = 0; i < 2; i++) {
		clock_gettime(CLOCK_MONOTONIC, &a);
		assert_int_equal(coffer_obj_get(oh[i], own_us[i], &rd, NULL, NULL), -ETIMEDOUT);
		secs = secs_since(&a);
		assert_true(secs < 15.0); /* the probe, not the 20 s of the get's own timeout */
		/* the connection stays dead */
		assert_int_equal(coffer_obj_get(oh[i], 0, &rd, NULL, NULL), -ENOTCONN);
	}
	store_resumed_unharmed(t, c, oh);
}

/*
 * A pool thread that makes blocking calls across runtime restarts: between its rounds the
 * main thread disconnects, runs the last coffer_fini() and starts again (coffer_init(),
 * coffer_connect()). Each round's first call finds the thread's hidden EQ gone with the old
 * handle hash and replaces it; the old one must be released then, not leaked with the whole
 * destroyed hash (~2.3 MB a round; LeakSanitizer in the ASan build), and every call works.
 */
static pthread_barrier_t restart_b;
static coffer_handle_t restart_conn;

static void *restart_worker(void *arg)
{
	struct coffer_oid oid;
	const void *rd;
	uint64_t got;
	void *wr;
	long bad = 0;

	(void)arg;
	make_oid(&oid, 9, 77);
	for (int round = 0; round < 4; round++) {
		pthread_barrier_wait(&restart_b); /* restart_conn is this round's connection */
		bad += coffer_obj_create_oid(restart_conn, &oid, 256, 0, &wr, NULL) != 0;
		if (!bad) {
			memset(wr, round, 256);
			bad +=
			    coffer_obj_seal_oid(restart_conn, &oid, COFFER_SEAL_RELEASE, NULL) != 0;
			bad += coffer_obj_get_oid(restart_conn, &oid, 0, &rd, &got, NULL) != 0;
			bad += !bad && (got != 256 || ((const uint8_t *)rd)[255] != round);
			bad += coffer_obj_release_oid(restart_conn, &oid, NULL) != 0;
			bad += coffer_obj_delete(restart_conn, &oid, NULL) != 0;
		}
		pthread_barrier_wait(&restart_b); /* main may now restart the runtime */
	}
	return (void *)bad;
}

static void test_thread_across_restarts(void **state)
{
	struct tctx *t = *state;
	pthread_t th;
	void *ret;

	assert_int_equal(pthread_barrier_init(&restart_b, NULL, 2), 0);
	assert_int_equal(pthread_create(&th, NULL, restart_worker, NULL), 0);
	for (int round = 0; round < 4; round++) {
		assert_int_equal(coffer_connect(t->store.sock, &restart_conn), 0);
		pthread_barrier_wait(&restart_b);
		pthread_barrier_wait(&restart_b);
		assert_int_equal(coffer_disconnect(restart_conn), 0);
		/* the fixture's reference is the last: the runtime goes, then comes back */
		assert_int_equal(coffer_fini(), 0);
		assert_null(coffer_hhash_global());
		assert_int_equal(coffer_init(), 0);
	}
	assert_int_equal(pthread_join(th, &ret), 0);
	assert_null(ret);
	pthread_barrier_destroy(&restart_b);
	expect_used(t, 0);
	t->handles0 = coffer_hhash_count(coffer_hhash_global());
}

/* ---- disconnect releases everything ------------------------------------------------------ */

static void test_disconnect_releases(void **state)
{
	struct tctx *t = *state;
	coffer_handle_t c1, c2, eq;
	struct coffer_store_info info;
	struct coffer_event ev[4];
	const void *rd;
	void *wr;
	bool present;

	assert_int_equal(coffer_connect(t->store.sock, &c1), 0);
	assert_int_equal(coffer_connect(t->store.sock, &c2), 0);
	assert_int_equal(coffer_eq_create(&eq), 0);
	/* c2 owns one sealed object (kept); c1 holds a reference on it, an unsealed object,
	 * and has a get waiting */
	{
		struct coffer_oid o1, o2, o3;
		coffer_handle_t h1, h2, h3, h1b;

		make_oid(&o1, 9, 1);
		make_oid(&o2, 9, 2);
		make_oid(&o3, 9, 3);
		assert_int_equal(coffer_obj_open(c2, &o1, 0, &h1), 0);
		assert_int_equal(coffer_obj_create(h1, 65536, 0, &wr, NULL), 0);
		fill(wr, 65536, 9);
		assert_int_equal(coffer_obj_seal(h1, COFFER_SEAL_RELEASE, NULL), 0);
		query(t, &info);
		assert_int_equal(info.objects_sealed, 1);

		assert_int_equal(coffer_obj_open(c1, &o1, 0, &h1b), 0);
		assert_int_equal(coffer_obj_open(c1, &o2, 0, &h2), 0);
		assert_int_equal(coffer_obj_open(c1, &o3, 0, &h3), 0);
		assert_int_equal(coffer_obj_get(h1b, 0, &rd, NULL, NULL), 0);
		assert_int_equal(coffer_obj_get(h1b, 0, &rd, NULL, NULL), 0);
		assert_int_equal(coffer_obj_create(h2, 1 << 20, 0, &wr, NULL), 0);
		assert_int_equal(coffer_event_init(&ev[0], eq, NULL), 0);
		assert_int_equal(coffer_obj_get(h3, -1, &rd, NULL, &ev[0]), 0);
		assert_int_equal(coffer_flush(c1), 0);
		query(t, &info);
		assert_int_equal(info.objects_created, 1);
		assert_true(info.used_bytes >= 65536 + (1 << 20));

		assert_int_equal(coffer_disconnect(c1), 0);
		assert_int_equal(wait_ev(eq, &ev[0]), -ENOTCONN);
		/* the sealed object survives, deletable now that nobody holds it */
		assert_int_equal(coffer_obj_contains(c2, &o1, &present, NULL), 0);
		assert_true(present);
		assert_int_equal(coffer_obj_delete(c2, &o1, NULL), 0);
		assert_int_equal(coffer_obj_contains(c2, &o2, &present, NULL), 0);
		assert_false(present);
		assert_int_equal(coffer_obj_close(h1), 0);
		assert_int_equal(coffer_obj_close(h1b), 0);
		assert_int_equal(coffer_obj_close(h2), 0);
		assert_int_equal(coffer_obj_close(h3), 0);
		assert_int_equal(coffer_event_fini(&ev[0]), 0);
	}
	assert_int_equal(coffer_eq_destroy(eq, 0), 0);
	assert_int_equal(coffer_disconnect(c2), 0);
	expect_used(t, 0);
	expect_handles_closed(t);
}

/* ---- a thread exits with requests in flight ---------------------------------------------- */

struct exiter {
	coffer_handle_t conn, eq;
	struct coffer_event *ev;
	const void **rd;
	unsigned int n;
	int rc;
};

static void *exiter_main(void *arg)
{
	struct exiter *x = arg;
	struct coffer_oid oid;
	coffer_handle_t oh;

	make_oid(&oid, 10, 1);
	x->rc = coffer_obj_open(x->conn, &oid, 0, &oh);
	for (unsigned int i = 0; x->rc == 0 && i < x->n; i++)
		x->rc = coffer_obj_get(oh, -1, &x->rd[i], NULL, &x->ev[i]);
	/* a blocking call too, so that this thread owns a hidden EQ and channel */
	if (x->rc == 0) {
		bool present = true;

		x->rc = coffer_obj_contains(x->conn, &oid, &present, NULL);
		if (x->rc == 0 && present)
			x->rc = -EEXIST;
	}
	if (x->rc == 0)
		x->rc = coffer_obj_close(oh);
	return NULL; /* exits with n gets in flight, unpublished ones included */
}

static void test_thread_exit_inflight(void **state)
{
	struct tctx *t = *state;
	enum { N = 20 };
	struct coffer_event ev[N], *done[N];
	const void *rd[N];
	struct exiter x = {.ev = ev, .rd = rd, .n = N};
	coffer_handle_t oh;
	struct coffer_oid oid;
	pthread_t tid;
	void *wr;
	int got = 0;

	make_oid(&oid, 10, 1);
	assert_int_equal(coffer_connect(t->store.sock, &x.conn), 0);
	assert_int_equal(coffer_eq_create(&x.eq), 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(coffer_event_init(&ev[i], x.eq, NULL), 0);
	assert_int_equal(pthread_create(&tid, NULL, exiter_main, &x), 0);
	pthread_join(tid, NULL);
	assert_int_equal(x.rc, 0);
	/* the EQ's other users still get every completion once the object appears */
	assert_int_equal(coffer_obj_open(x.conn, &oid, 0, &oh), 0);
	assert_int_equal(coffer_obj_create(oh, 256, 0, &wr, NULL), 0);
	fill(wr, 256, 10);
	assert_int_equal(coffer_obj_seal(oh, COFFER_SEAL_RELEASE, NULL), 0);
	while (got < N) {
		int n = coffer_eq_poll(x.eq, 1, 5000000, N, done);

		assert_true(n > 0);
		for (int k = 0; k < n; k++)
			assert_int_equal(done[k]->ev_error, 0);
		got += n;
	}
	for (int i = 0; i < N; i++) {
		assert_true(check(rd[i], 256, 10));
		assert_int_equal(coffer_obj_release(oh, NULL), 0);
		assert_int_equal(coffer_event_fini(&ev[i]), 0);
	}
	assert_int_equal(coffer_obj_delete(x.conn, &oid, NULL), 0);
	assert_int_equal(coffer_obj_close(oh), 0);
	assert_int_equal(coffer_eq_destroy(x.eq, 0), 0);
	assert_int_equal(coffer_disconnect(x.conn), 0);
	expect_used(t, 0);
	expect_handles_closed(t);
}

/* ---- disconnect while other threads are busy on the connection ----------------------- */

struct busy {
	pthread_t tid;
	unsigned int id;
	coffer_handle_t conn;
	atomic_bool *stop;
	uint64_t launched, completed, ok, notconn, other;
	int other_err;
};

static void *busy_main(void *arg)
{
	struct busy *b = arg;
	enum { B = 16 };
	struct coffer_event ev[B], *done[B];
	const void *rd[B];
	coffer_handle_t eq, oh[B];
	bool inflight[B] = {false};
	unsigned int running = 0;

	if (coffer_eq_create(&eq) < 0)
		return NULL;
	for (int i = 0; i < B; i++) {
		struct coffer_oid oid;

		make_oid(&oid, 11, b->id * 100 + (unsigned int)i);
		coffer_event_init(&ev[i], eq, NULL);
		if (coffer_obj_open(b->conn, &oid, 0, &oh[i]) < 0)
			oh[i] = COFFER_HANDLE_NULL;
	}
	while (!atomic_load_explicit(b->stop, memory_order_relaxed) || running > 0) {
		/* keep launching until the connection is gone; every launch must complete */
		for (int i = 0; i < B && !atomic_load_explicit(b->stop, memory_order_relaxed);
		     i++) {
			if (inflight[i])
				continue;
			if (coffer_obj_get(oh[i], 1000, &rd[i], NULL, &ev[i]) == 0) {
				inflight[i] = true;
				b->launched++;
				running++;
			}
		}
		int n = coffer_eq_poll(eq, 0, 1000, B, done);

		for (int k = 0; k < n; k++) {
			int e = done[k]->ev_error;
			long slot = done[k] - ev;

			if (slot < 0 || slot >= B || !inflight[slot]) {
				b->other++;
				continue;
			}
			inflight[slot] = false;
			b->completed++;
			running--;
			if (e == -ENOENT || e == 0)
				b->ok++;
			else if (e == -ENOTCONN)
				b->notconn++;
			else if (!b->other++)
				b->other_err = e;
		}
	}
	for (int i = 0; i < B; i++) {
		coffer_event_fini(&ev[i]);
		if (oh[i].cookie)
			coffer_obj_close(oh[i]);
	}
	coffer_eq_destroy(eq, 0);
	return NULL;
}

/*
 * A poller that went to sleep on an EQ (timeout < 0: until an event completes) before the
 * EQ had a channel to a connection - a completion thread started before the workers submit -
 * must be woken by the completions of a channel opened afterwards: first the EQ's first
 * channel, then a second connection's channel on the same EQ.
 */
struct late_poller {
	coffer_handle_t eq;
	struct coffer_event *done;
	int n;
};

static void *late_poller_main(void *arg)
{
	struct late_poller *lp = arg;

	lp->n = coffer_eq_poll(lp->eq, 0, -1, 1, &lp->done);
	return NULL;
}

/* Joins the poller, giving it 10 s; a poller still asleep then has missed its wakeup (it
 * is released by destroying the EQ). Return: whether it returned on its own. */
static bool late_poller_join(pthread_t tid, struct late_poller *lp)
{
	struct timespec until;
	bool ok;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	ok = pthread_timedjoin_np(tid, NULL, &until) == 0;
	if (!ok) {
		assert_int_equal(coffer_eq_destroy(lp->eq, COFFER_EQ_FORCE), 0);
		pthread_join(tid, NULL);
	}
	return ok;
}

static void test_poller_before_channel(void **state)
{
	struct tctx *t = *state;
	coffer_handle_t c[2], eq;
	struct coffer_event ev[2];
	struct coffer_oid oid;
	struct late_poller lp;
	const void *rd;
	pthread_t tid;

	make_oid(&oid, 13, 1); /* never created: each get answers -ENOENT at once */
	assert_int_equal(coffer_connect(t->store.sock, &c[0]), 0);
	assert_int_equal(coffer_connect(t->store.sock, &c[1]), 0);
	assert_int_equal(coffer_eq_create(&eq), 0);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(coffer_event_init(&ev[i], eq, NULL), 0);
		lp = (struct late_poller){.eq = eq, .n = 0};
		assert_int_equal(pthread_create(&tid, NULL, late_poller_main, &lp), 0);
		usleep(100000); /* asleep on the EQ, which has i channels */
		assert_int_equal(coffer_obj_get_oid(c[i], &oid, 0, &rd, NULL, &ev[i]), 0);
		assert_int_equal(coffer_flush(c[i]), 0);
		assert_true(late_poller_join(tid, &lp));
		assert_int_equal(lp.n, 1);
		assert_ptr_equal(lp.done, &ev[i]);
		assert_int_equal(ev[i].ev_error, -ENOENT);
	}
	for (int i = 0; i < 2; i++) {
		assert_int_equal(coffer_event_fini(&ev[i]), 0);
		assert_int_equal(coffer_disconnect(c[i]), 0);
	}
	assert_int_equal(coffer_eq_destroy(eq, 0), 0);
	expect_used(t, 0);
	expect_handles_closed(t);
}

/* Waits for @ev, launched on @eq, and returns its ev_error. */
static int wait_one(coffer_handle_t eq, struct coffer_event *ev)
{
	struct coffer_event *done = NULL;

	assert_int_equal(coffer_eq_poll(eq, 1, 5000000, 1, &done), 1);
	assert_ptr_equal(done, ev);
	return ev->ev_error;
}

/*
 * One connection carries a channel per EQ up to the store's max_channels, 512 since
 * protocol v3 (before: 64, and the 65th EQ's first call failed with -EMFILE). Every channel
 * carries traffic (its doorbell bit is one of all 512 bits of the page: channel 511 is bit 63
 * of word 7), routes its replies to its own EQ, the 513th EQ gets -EMFILE, and destroying
 * an EQ frees its channel id for the next one.
 */
static void test_channels_per_connection(void **state)
{
	enum { N = 512, SZ = 64 };
	struct tctx *t = *state;
	coffer_handle_t c, *eq = calloc(N + 1, sizeof(*eq));
	struct coffer_event *ev = calloc(N + 1, sizeof(*ev));
	const void **rdv = calloc(N, sizeof(*rdv)), *rd;
	uint64_t *sizes = calloc(N, sizeof(*sizes)), size;
	struct coffer_oid oid;
	void *wr;

	assert_non_null(eq);
	assert_non_null(ev);
	assert_non_null(rdv);
	assert_non_null(sizes);
	assert_int_equal(coffer_connect(t->store.sock, &c), 0);
	for (int i = 0; i <= N; i++) {
		assert_int_equal(coffer_eq_create(&eq[i]), 0);
		assert_int_equal(coffer_event_init(&ev[i], eq[i], NULL), 0);
	}
	for (int i = 0; i < N; i++) { /* a put through each EQ's own channel */
		make_oid(&oid, 40, (uint64_t)i);
		assert_int_equal(coffer_obj_create_oid(c, &oid, SZ, 0, &wr, &ev[i]), 0);
		assert_int_equal(wait_one(eq[i], &ev[i]), 0);
		fill(wr, SZ, (uint64_t)i);
		assert_int_equal(coffer_obj_seal_oid(c, &oid, COFFER_SEAL_RELEASE, &ev[i]), 0);
		assert_int_equal(wait_one(eq[i], &ev[i]), 0);
	}
	/* the 513th channel does not exist: refused before anything is launched */
	make_oid(&oid, 40, 0);
	assert_int_equal(coffer_obj_get_oid(c, &oid, 0, &rd, &size, &ev[N]), -EMFILE);
	/* all 512 at once: each EQ reads its neighbour's object, every request in flight */
	for (int i = 0; i < N; i++) {
		make_oid(&oid, 40, (uint64_t)(i + 1) % N);
		assert_int_equal(coffer_obj_get_oid(c, &oid, 0, &rdv[i], &sizes[i], &ev[i]), 0);
	}
	assert_int_equal(coffer_flush(c), 0);
	for (int i = N - 1; i >= 0; i--)
		assert_int_equal(wait_one(eq[i], &ev[i]), 0);
	for (int i = 0; i < N; i++) { /* the data each get saw; release exactly it */
		make_oid(&oid, 40, (uint64_t)(i + 1) % N);
		assert_int_equal(sizes[i], SZ);
		assert_true(check(rdv[i], SZ, (uint64_t)(i + 1) % N));
		assert_int_equal(coffer_obj_release_data(c, &oid, rdv[i], &ev[i]), 0);
		assert_int_equal(wait_one(eq[i], &ev[i]), 0);
	}
	/* an EQ destroyed frees its channel: the 513th EQ now gets one */
	assert_int_equal(coffer_event_fini(&ev[0]), 0);
	assert_int_equal(coffer_eq_destroy(eq[0], 0), 0);
	make_oid(&oid, 40, 7);
	assert_int_equal(coffer_obj_get_oid(c, &oid, 0, &rd, &size, &ev[N]), 0);
	assert_int_equal(wait_one(eq[N], &ev[N]), 0);
	assert_true(check(rd, SZ, 7));
	/* a blocking call needs a channel for this thread's hidden EQ: none is left */
	assert_int_equal(coffer_obj_release_data(c, &oid, rd, NULL), -EMFILE);
	assert_int_equal(coffer_obj_release_data(c, &oid, rd, &ev[N]), 0);
	assert_int_equal(wait_one(eq[N], &ev[N]), 0);
	for (int i = 1; i <= N; i++) {
		assert_int_equal(coffer_event_fini(&ev[i]), 0);
		assert_int_equal(coffer_eq_destroy(eq[i], 0), 0);
	}
	for (int i = 0; i < N; i++) { /* blocking again: the hidden EQ gets a channel */
		make_oid(&oid, 40, (uint64_t)i);
		assert_int_equal(coffer_obj_delete(c, &oid, NULL), 0);
	}
	assert_int_equal(coffer_disconnect(c), 0);
	free(eq);
	free(ev);
	free(rdv);
	free(sizes);
	expect_used(t, 0);
	expect_handles_closed(t);
}

static void test_disconnect_while_busy(void **state)
{
	struct tctx *t = *state;
	enum { NT = 3 };
	struct busy b[NT];
	atomic_bool stop;
	coffer_handle_t c;

	atomic_init(&stop, false);
	assert_int_equal(coffer_connect(t->store.sock, &c), 0);
	for (unsigned int i = 0; i < NT; i++) {
		memset(&b[i], 0, sizeof(b[i]));
		b[i].id = i;
		b[i].conn = c;
		b[i].stop = &stop;
		assert_int_equal(pthread_create(&b[i].tid, NULL, busy_main, &b[i]), 0);
	}
	usleep(300000);
	assert_int_equal(coffer_disconnect(c), 0);
	usleep(50000);
	atomic_store(&stop, true);
	for (unsigned int i = 0; i < NT; i++) {
		pthread_join(b[i].tid, NULL);
		if (b[i].other)
			fprintf(stderr, "thread %u: %s\n", i, coffer_strerror(b[i].other_err));
		assert_int_equal(b[i].other, 0);
		assert_true(b[i].launched > 0);
		assert_int_equal(b[i].completed, b[i].launched);
	}
	expect_used(t, 0);
	expect_handles_closed(t);
}

struct force_destroy {
	pthread_t tid;
	coffer_handle_t eqh;
	int rc;
};

static void *force_destroy_main(void *arg)
{
	struct force_destroy *fd = arg;

	fd->rc = coffer_eq_destroy(fd->eqh, COFFER_EQ_FORCE);
	return NULL;
}

/*
 * The shutdown README.md describes for a get that waits forever: coffer_eq_destroy() with
 * COFFER_EQ_FORCE waits for it while another thread's coffer_disconnect() completes it with
 * -ENOTCONN. The disconnect (the process's last connection) used to free the EQ's channel
 * binding while the draining destroy still slept through its hook: a use after free in
 * binding_disarm() (ASan), SIGBUS or SIGSEGV in a release build, in about one round in four.
 */
static void test_force_destroy_vs_disconnect(void **state)
{
	struct tctx *t = *state;

	for (int round = 0; round < 30; round++) {
		struct force_destroy fd = {.rc = 1};
		struct coffer_event ev;
		struct coffer_oid oid;
		const void *data = NULL;
		coffer_handle_t c;
		uint64_t size;

		make_oid(&oid, 0xfd, (uint64_t)round);
		assert_int_equal(coffer_connect(t->store.sock, &c), 0);
		assert_int_equal(coffer_eq_create(&fd.eqh), 0);
		assert_int_equal(coffer_event_init(&ev, fd.eqh, NULL), 0);
		assert_int_equal(coffer_obj_get_oid(c, &oid, -1, &data, &size, &ev), 0);
		assert_int_equal(coffer_flush(c), 0);
		assert_int_equal(pthread_create(&fd.tid, NULL, force_destroy_main, &fd), 0);
		usleep(20000 + 1000 * (round % 7)); /* the destroy is asleep in its drain */
		assert_int_equal(coffer_disconnect(c), 0);
		pthread_join(fd.tid, NULL);
		assert_int_equal(fd.rc, 0);
		assert_int_equal(ev.ev_error, -ENOTCONN);
		assert_int_equal(coffer_event_fini(&ev), 0);
	}
	expect_used(t, 0);
	expect_handles_closed(t);
}

/* ---- reads through the object index ---------------------------------------------------- */

/* Create @oid with @size bytes of fill(@seed) and seal it (blocking). */
static void put_oid(coffer_handle_t c, const struct coffer_oid *oid, uint64_t size,
		    unsigned int flags, uint64_t seed)
{
	void *wr = NULL;

	assert_int_equal(coffer_obj_create_oid(c, oid, size, flags, &wr, NULL), 0);
	fill(wr, size, seed);
	assert_int_equal(coffer_obj_seal_oid(c, oid, COFFER_SEAL_RELEASE, NULL), 0);
}

/* coffer_obj_read_oid(): what it copies, when it answers -EAGAIN, and its errors. */
/* Reserve, write, put (protocol v5): one request seals a block written before it had an ID;
 * failures leave the reservation usable; disconnect frees what was never put. */
/*
 * Reads through the object index keep objects cached (v6 access map, CLOCK): a 4 MiB store
 * is filled with 64 KiB objects, and one more put makes the store evict (its pass clears
 * the bits every seal set, and the oldest object goes). Objects 1..24 are then read through
 * coffer_obj_read_oid() only (no get, no request), and 16 more puts evict the 16 oldest
 * objects never read, not objects 1..24 (which an LRU by seal time would have evicted
 * first). The read ones come back intact.
 */
static void test_read_oid_keeps_cached(void **state)
{
	enum { OBJ = 64 * 1024, READ = 24, MORE = 16 };
	struct store_fixture f;
	struct coffer_store_info info;
	struct coffer_oid oid;
	coffer_handle_t c;
	static uint8_t buf[OBJ];
	uint64_t sz, n, evicted_unread = 0;
	bool present;
	void *wr;

	(void)state;
	assert_int_equal(store_start(&f, "4M"), 0);
	assert_int_equal(coffer_connect(f.sock, &c), 0);
	assert_int_equal(coffer_store_query(c, &info), 0);
	n = info.capacity_bytes / OBJ; /* objects that fill the store */
	for (uint64_t i = 0; i < n + 1 + MORE; i++) {
		if (i == n + 1) {
			assert_int_equal(coffer_store_query(c, &info), 0);
			assert_int_equal(info.evictions, 1);
			for (uint64_t k = 1; k <= READ; k++) {
				make_oid(&oid, 41, k);
				assert_int_equal(coffer_obj_read_oid(c, &oid, 0, buf, OBJ, &sz),
						 OBJ);
				assert_true(check(buf, OBJ, k));
			}
		}
		make_oid(&oid, 41, i);
		assert_int_equal(coffer_obj_create_oid(c, &oid, OBJ, 0, &wr, NULL), 0);
		fill(wr, OBJ, i);
		assert_int_equal(coffer_obj_seal_oid(c, &oid, COFFER_SEAL_RELEASE, NULL), 0);
	}
	assert_int_equal(coffer_store_query(c, &info), 0);
	assert_int_equal(info.evictions, 1 + MORE);
	assert_true(info.second_chances >= n + READ);
	for (uint64_t k = 1; k < n; k++) {
		make_oid(&oid, 41, k);
		assert_int_equal(coffer_obj_contains(c, &oid, &present, NULL), 0);
		if (k <= READ) {
			if (!present)
				fail_msg("object %llu, read through the index, was evicted",
					 (unsigned long long)k);
			assert_int_equal(coffer_obj_read_oid(c, &oid, 0, buf, OBJ, &sz), OBJ);
			assert_true(check(buf, OBJ, k));
		} else {
			evicted_unread += !present;
		}
	}
	assert_int_equal(evicted_unread, MORE);
	assert_int_equal(coffer_disconnect(c), 0);
	assert_int_equal(store_stop(&f), 0);
}

/*
 * The store's refusal of a reservation past COFFER_RESERVE_MAX (-EAGAIN) reaches the caller as
 * -EAGAIN through the ring, as store.h says: a status docs/protocol.md gives RESERVE, which
 * the client's reply check (coffer__rep_check()) must not take for a broken store's -EPROTO;
 * the blocks reserved before it stay the caller's and the connection stays usable.
 */
static void test_reserve_limit_status(void **state)
{
	struct tctx *t = *state;
	enum { BATCH = COFFER_GET_BULK_MAX };
	void **blk = calloc(COFFER_RESERVE_MAX + BATCH, sizeof(*blk));
	struct coffer_store_info info;
	coffer_handle_t c, c2;
	unsigned int n = 0;
	void *one = NULL;

	assert_non_null(blk);
	assert_int_equal(coffer_connect(t->store.sock, &c), 0);
	assert_int_equal(coffer_connect(t->store.sock, &c2), 0);
	while (n < COFFER_RESERVE_MAX) {
		unsigned int k = COFFER_RESERVE_MAX - n < BATCH ? COFFER_RESERVE_MAX - n : BATCH;

		assert_int_equal(coffer_obj_reserve(c, 64, k, blk + n, NULL), 0);
		n += k;
	}
	/* one more, alone and in a batch: -EAGAIN, nothing reserved */
	one = &one;
	assert_int_equal(coffer_obj_reserve(c, 64, 1, &one, NULL), -EAGAIN);
	assert_null(one);
	assert_int_equal(coffer_obj_reserve(c, 64, 3, blk + n, NULL), -EAGAIN);
	for (unsigned int i = 0; i < 3; i++)
		assert_null(blk[n + i]);
	/* the limit is per connection: another one still reserves */
	assert_int_equal(coffer_obj_reserve(c2, 64, 1, &one, NULL), 0);
	assert_int_equal(coffer_obj_unreserve(c2, one, NULL), 0);
	/* the connection still works, and its reservations are intact */
	assert_int_equal(coffer_store_query(c, &info), 0);
	assert_int_equal(info.reserved_blocks, COFFER_RESERVE_MAX);
	assert_int_equal(coffer_obj_unreserve(c, blk[0], NULL), 0);
	assert_int_equal(coffer_obj_reserve(c, 64, 1, &blk[0], NULL), 0);
	for (unsigned int i = 0; i < COFFER_RESERVE_MAX; i++)
		assert_int_equal(coffer_obj_unreserve(c, blk[i], NULL), 0);
	assert_int_equal(coffer_store_query(c, &info), 0);
	assert_int_equal(info.reserved_blocks, 0);
	assert_int_equal(coffer_disconnect(c2), 0);
	assert_int_equal(coffer_disconnect(c), 0);
	free(blk);
}

static void test_put_reserved(void **state)
{
	struct tctx *t = *state;
	coffer_handle_t c, cr, eq;
	struct coffer_oid a, b;
	struct coffer_store_info info;
	struct coffer_event ev, ev2, *done;
	uint8_t buf[8192];
	uint64_t sz = 0, used0;
	void *r1 = NULL, *r2 = NULL, *r3 = NULL, *wr = NULL;
	const void *rd = NULL;

	make_oid(&a, 31, 1);
	make_oid(&b, 31, 2);
	assert_int_equal(coffer_connect(t->store.sock, &c), 0);
	assert_int_equal(coffer_connect(t->store.sock, &cr), 0);
	assert_int_equal(coffer_eq_create(&eq), 0);
	assert_int_equal(coffer_store_query(c, &info), 0);
	assert_true(info.version >= 6); /* reservations are counted since v6 */
	assert_int_equal(info.reserved_blocks, 0);
	assert_int_equal(info.reserved_bytes, 0);
	assert_true(info.index_slots >= 1024);
	assert_int_equal(info.index_objects, 0);
	used0 = info.used_bytes;
	/* bad arguments */
	assert_int_equal(coffer_obj_reserve(c, 0, 1, &r1, NULL), -EINVAL);
	assert_int_equal(coffer_obj_reserve(c, 64, 1, NULL, NULL), -EINVAL);
	assert_int_equal(coffer_obj_reserve(eq, 64, 1, &r1, NULL), -EINVAL);
	assert_int_equal(coffer_obj_reserve(c, info.capacity_bytes + 1, 1, &r1, NULL), -E2BIG);
	assert_int_equal(coffer_obj_reserve(c, 64, 0, &r1, NULL), -EINVAL);
	assert_int_equal(coffer_obj_reserve(c, 64, COFFER_GET_BULK_MAX + 1, &r1, NULL), -EINVAL);
	assert_int_equal(coffer_obj_reserve(c, 4096, 1, &r1, NULL), 0);
	assert_int_equal(coffer_obj_reserve(c, 4096, 1, &r2, NULL), 0);
	assert_ptr_not_equal(r1, r2);
	assert_int_equal(coffer_store_query(c, &info), 0);
	assert_true(info.used_bytes >= used0 + 8192);
	assert_int_equal(info.objects_created + info.objects_sealed, 0);
	/* QUERY reports the reservations apart (within used_bytes) */
	assert_int_equal(info.reserved_blocks, 2);
	assert_int_equal(info.reserved_bytes, 8192);
	assert_int_equal(info.used_bytes, used0 + info.reserved_bytes);
	/* written, not yet put: invisible */
	fill(r1, 4096, 7);
	assert_int_equal(coffer_obj_read_oid(cr, &a, 0, buf, sizeof(buf), NULL), -EAGAIN);
	assert_int_equal(coffer_obj_get_oid(cr, &a, 0, &rd, &sz, NULL), -ENOENT);
	assert_int_equal(coffer_obj_put(c, NULL, r1, 4096, 0, NULL), -EINVAL);
	assert_int_equal(coffer_obj_put(c, &a, r1, 0, 0, NULL), -EINVAL);
	assert_int_equal(coffer_obj_put(c, &a, r1, 4096, 0x80, NULL), -EINVAL);
	assert_int_equal(coffer_obj_put(c, &a, buf, 4096, 0, NULL), -EINVAL); /* not the arena */
	assert_int_equal(coffer_obj_put(c, &a, r1, 4097, 0, NULL), -EINVAL);  /* > reserved */
	assert_int_equal(coffer_obj_put(c, &a, (char *)r1 + 64, 64, 0, NULL), -ENOENT);
	/* another connection cannot put (or give back) this connection's reservation */
	assert_int_equal(coffer_obj_put(cr, &a, r1, 4096, 0, NULL), -ENOENT);
	assert_int_equal(coffer_obj_unreserve(cr, r1, NULL), -ENOENT);
	/* the put seals it: visible to gets and the index, no reference held by the writer */
	assert_int_equal(coffer_obj_put(c, &a, r1, 4000, 0, NULL), 0);
	assert_int_equal(coffer_obj_read_oid(cr, &a, 0, buf, sizeof(buf), &sz), 4000);
	assert_true(check(buf, 4000, 7));
	assert_int_equal(coffer_obj_get_oid(cr, &a, 0, &rd, &sz, NULL), 0);
	assert_int_equal(sz, 4000);
	assert_true(check(rd, 4000, 7));
	assert_int_equal(coffer_obj_release_oid(c, &a, NULL), -ENOENT);
	assert_int_equal(coffer_store_query(c, &info), 0);
	assert_int_equal(info.reserved_blocks, 1);
	assert_int_equal(info.reserved_bytes, 4096);
	assert_int_equal(info.index_objects, 1);
	/* used up: a second put of the same block fails */
	assert_int_equal(coffer_obj_put(c, &b, r1, 64, 0, NULL), -ENOENT);
	/* an existing ID without REPLACE: -EEXIST, and the reservation stays usable */
	fill(r2, 4096, 8);
	assert_int_equal(coffer_obj_put(c, &a, r2, 4096, 0, NULL), -EEXIST);
	/* an ID whose first version is being created by CREATE: -EEXIST as well */
	assert_int_equal(coffer_obj_create_oid(cr, &b, 64, 0, &wr, NULL), 0);
	assert_int_equal(coffer_obj_put(c, &b, r2, 4096, COFFER_CREATE_REPLACE, NULL), -EEXIST);
	assert_int_equal(coffer_obj_abort_oid(cr, &b, NULL), 0);
	/* REPLACE, asynchronously: the reader keeps its pinned old version intact */
	assert_int_equal(coffer_event_init(&ev, eq, NULL), 0);
	assert_int_equal(coffer_obj_put(c, &a, r2, 4096, COFFER_CREATE_REPLACE, &ev), 0);
	assert_int_equal(coffer_eq_poll(eq, 1, 5 * 1000 * 1000, 1, &done), 1);
	assert_ptr_equal(done, &ev);
	assert_int_equal(ev.ev_error, 0);
	assert_true(check(rd, 4000, 7));
	assert_int_equal(coffer_obj_read_oid(cr, &a, 0, buf, sizeof(buf), &sz), 4096);
	assert_true(check(buf, 4096, 8));
	assert_int_equal(coffer_obj_release_data(cr, &a, rd, NULL), 0);
	/* a batch on one event: distinct writable blocks, each put on its own */
	{
		void *v[5];
		struct coffer_oid o5;

		assert_int_equal(coffer_event_init(&ev2, eq, NULL), 0);
		assert_int_equal(coffer_obj_reserve(c, 256, 5, v, &ev2), 0);
		assert_int_equal(coffer_eq_poll(eq, 1, 5 * 1000 * 1000, 1, &done), 1);
		assert_ptr_equal(done, &ev2);
		assert_int_equal(ev2.ev_error, 0);
		for (int i = 0; i < 5; i++) {
			assert_non_null(v[i]);
			for (int k = 0; k < i; k++)
				assert_ptr_not_equal(v[i], v[k]);
			fill(v[i], 256, 40 + (uint64_t)i);
		}
		for (int i = 0; i < 5; i++) {
			make_oid(&o5, 32, (uint64_t)i);
			assert_int_equal(coffer_obj_put(c, &o5, v[i], 256, 0, NULL), 0);
		}
		for (int i = 0; i < 5; i++) {
			make_oid(&o5, 32, (uint64_t)i);
			assert_int_equal(coffer_obj_read_oid(cr, &o5, 0, buf, sizeof(buf), &sz),
					 256);
			assert_true(check(buf, 256, 40 + (uint64_t)i));
			assert_int_equal(coffer_obj_delete(cr, &o5, NULL), 0);
		}
		/* too large: every block fails, each NULL */
		assert_int_equal(coffer_obj_reserve(c, info.capacity_bytes + 1, 3, v, &ev2), 0);
		assert_int_equal(coffer_eq_poll(eq, 1, 5 * 1000 * 1000, 1, &done), 1);
		assert_int_equal(ev2.ev_error, -E2BIG);
		for (int i = 0; i < 3; i++)
			assert_null(v[i]);
		assert_int_equal(coffer_event_fini(&ev2), 0);
	}
	/* give back; a reservation given back is gone */
	assert_int_equal(coffer_obj_reserve(c, 100, 1, &r3, NULL), 0);
	assert_int_equal(coffer_obj_unreserve(c, NULL, NULL), -EINVAL);
	assert_int_equal(coffer_obj_unreserve(c, r3, NULL), 0);
	assert_int_equal(coffer_obj_unreserve(c, r3, NULL), -ENOENT);
	assert_int_equal(coffer_obj_put(c, &b, r3, 100, 0, NULL), -ENOENT);
	/* disconnect frees reservations never put; sealed objects stay */
	assert_int_equal(coffer_obj_reserve(c, 1 << 20, 1, &r3, NULL), 0);
	memset(r3, 0xab, 1 << 20);
	assert_int_equal(coffer_store_query(cr, &info), 0);
	assert_int_equal(info.reserved_blocks, 1);
	assert_int_equal(info.reserved_bytes, 1 << 20);
	assert_int_equal(coffer_event_fini(&ev), 0);
	assert_int_equal(coffer_disconnect(c), 0);
	assert_int_equal(coffer_obj_delete(cr, &a, NULL), 0);
	assert_int_equal(coffer_store_query(cr, &info), 0);
	assert_int_equal(info.used_bytes, used0);
	assert_int_equal(info.objects_created + info.objects_sealed, 0);
	assert_int_equal(info.reserved_blocks, 0);
	assert_int_equal(info.reserved_bytes, 0);
	assert_int_equal(info.index_objects, 0);
	assert_int_equal(coffer_disconnect(cr), 0);
	assert_int_equal(coffer_eq_destroy(eq, 0), 0);
}

static void test_read_oid(void **state)
{
	struct tctx *t = *state;
	coffer_handle_t c, cr, eq;
	struct coffer_oid a, b, z, missing;
	uint8_t buf[4096];
	uint64_t sz = 0;
	void *wr;

	make_oid(&a, 30, 1);
	make_oid(&b, 30, 2);
	make_oid(&z, 30, 3);
	make_oid(&missing, 30, 4);
	assert_int_equal(coffer_connect(t->store.sock, &c), 0);
	assert_int_equal(coffer_connect(t->store.sock, &cr), 0);
	assert_int_equal(coffer_eq_create(&eq), 0);
	put_oid(c, &a, 1000, 0, 1);
	/* another connection of the process reads it, whole and in parts */
	assert_int_equal(coffer_obj_read_oid(cr, &a, 0, buf, sizeof(buf), &sz), 1000);
	assert_int_equal(sz, 1000);
	assert_true(check(buf, 1000, 1));
	memset(buf, 0, sizeof(buf));
	assert_int_equal(coffer_obj_read_oid(cr, &a, 100, buf, 50, NULL), 50);
	for (int i = 0; i < 50; i++)
		assert_int_equal(buf[i], (uint8_t)(1 * 131 + (100 + i) * 7));
	assert_int_equal(coffer_obj_read_oid(cr, &a, 990, buf, 50, &sz), 10);
	assert_int_equal(coffer_obj_read_oid(cr, &a, 1000, buf, 50, &sz), 0);
	assert_int_equal(coffer_obj_read_oid(cr, &a, UINT64_MAX, buf, 50, &sz), 0);
	assert_int_equal(coffer_obj_read_oid(cr, &a, 0, NULL, 0, &sz), 0);
	assert_int_equal(sz, 1000);
	/* missing and unsealed objects are not in the index */
	assert_int_equal(coffer_obj_read_oid(cr, &missing, 0, buf, 10, NULL), -EAGAIN);
	/* its text names every meaning -EAGAIN has (store.h): an index miss (use a get), a
	 * full channel, the reservation limit; not only "channel full" */
	assert_non_null(strstr(coffer_strerror(-EAGAIN), "object index"));
	assert_non_null(strstr(coffer_strerror(-EAGAIN), "get"));
	assert_non_null(strstr(coffer_strerror(-EAGAIN), "channel full"));
	assert_non_null(strstr(coffer_strerror(-EAGAIN), "reservations"));
	assert_int_equal(coffer_obj_create_oid(c, &b, 64, 0, &wr, NULL), 0);
	fill(wr, 64, 2);
	assert_int_equal(coffer_obj_read_oid(cr, &b, 0, buf, 64, NULL), -EAGAIN);
	assert_int_equal(coffer_obj_read_oid(c, &b, 0, buf, 64, NULL), -EAGAIN);
	assert_int_equal(coffer_obj_seal_oid(c, &b, COFFER_SEAL_RELEASE, NULL), 0);
	assert_int_equal(coffer_obj_read_oid(cr, &b, 0, buf, 64, NULL), 64);
	assert_true(check(buf, 64, 2));
	/* a replacement is invisible until sealed, then read at once (read-your-writes) */
	assert_int_equal(coffer_obj_create_oid(c, &a, 2000, COFFER_CREATE_REPLACE, &wr, NULL), 0);
	fill(wr, 2000, 3);
	assert_int_equal(coffer_obj_read_oid(cr, &a, 0, buf, sizeof(buf), &sz), 1000);
	assert_true(check(buf, 1000, 1));
	assert_int_equal(coffer_obj_seal_oid(c, &a, COFFER_SEAL_RELEASE, NULL), 0);
	assert_int_equal(coffer_obj_read_oid(cr, &a, 0, buf, sizeof(buf), &sz), 2000);
	assert_int_equal(sz, 2000);
	assert_true(check(buf, 2000, 3));
	/* zero-byte objects */
	put_oid(c, &z, 0, 0, 0);
	sz = 1;
	assert_int_equal(coffer_obj_read_oid(cr, &z, 0, buf, sizeof(buf), &sz), 0);
	assert_int_equal(sz, 0);
	/* the vector form: 40 entries (more than one prefetch group), hits and misses mixed */
	{
		enum { NV = 40 };
		struct coffer_read_vec rv[NV];
		static uint8_t vb[NV][2048];

		for (int i = 0; i < NV; i++)
			rv[i] = (struct coffer_read_vec){.oid = i % 3 == 0   ? a
								: i % 3 == 1 ? b
									     : missing,
							 .offset = (uint64_t)i,
							 .buf = vb[i],
							 .len = sizeof(vb[i]),
							 .result = 12345};
		rv[37].buf = NULL; /* a bad entry fails alone */
		assert_int_equal(coffer_obj_read_oid_vec(cr, rv, NV), 26);
		for (int i = 0; i < NV; i++) {
			uint64_t want = i % 3 == 0 ? 2000 : 64;

			if (i == 37) {
				assert_int_equal(rv[i].result, -EINVAL);
			} else if (i % 3 == 2) {
				assert_int_equal(rv[i].result, -EAGAIN);
			} else {
				uint64_t n = want - (uint64_t)i < 2048 ? want - (uint64_t)i : 2048;

				assert_int_equal(rv[i].result, (int64_t)n);
				assert_int_equal(rv[i].size, want);
				for (uint64_t k = 0; k < n; k++)
					assert_int_equal(vb[i][k],
							 (uint8_t)((i % 3 == 0 ? 3 : 2) * 131 +
								   ((uint64_t)i + k) * 7));
			}
		}
		/* offsets at or past the end copy nothing in the vector too, the largest as
		 * well (the block's address plus UINT64_MAX wraps around: the address of
		 * such a read must not even be computed) */
		const uint64_t far[] = {UINT64_MAX, UINT64_MAX - 4095, 1ull << 63, (1ull << 63) - 1,
					2000};

		for (int i = 0; i < 5; i++)
			rv[i] = (struct coffer_read_vec){.oid = a,
							 .offset = far[i],
							 .buf = vb[i],
							 .len = sizeof(vb[i]),
							 .result = 12345};
		assert_int_equal(coffer_obj_read_oid_vec(cr, rv, 5), 5);
		for (int i = 0; i < 5; i++) {
			assert_int_equal(rv[i].result, 0);
			assert_int_equal(rv[i].size, 2000);
		}
		assert_int_equal(coffer_obj_read_oid_vec(cr, rv, 0), 0);
		assert_int_equal(coffer_obj_read_oid_vec(cr, NULL, 1), -EINVAL);
		assert_int_equal(coffer_obj_read_oid_vec(eq, rv, 1), -EINVAL);
	}
	/* deleted: gone from the index */
	assert_int_equal(coffer_obj_delete(c, &a, NULL), 0);
	assert_int_equal(coffer_obj_read_oid(cr, &a, 0, buf, sizeof(buf), NULL), -EAGAIN);
	/* arguments */
	assert_int_equal(coffer_obj_read_oid(cr, NULL, 0, buf, 1, NULL), -EINVAL);
	assert_int_equal(coffer_obj_read_oid(cr, &b, 0, NULL, 1, NULL), -EINVAL);
	assert_int_equal(coffer_obj_read_oid(eq, &b, 0, buf, 1, NULL), -EINVAL);
	assert_int_equal(coffer_obj_read_oid(COFFER_HANDLE_NULL, &b, 0, buf, 1, NULL), -EINVAL);
	assert_int_equal(coffer_disconnect(cr), 0);
	assert_int_equal(coffer_obj_read_oid(cr, &b, 0, buf, 1, NULL), -ENOTCONN);
	{
		struct coffer_read_vec rv = {.oid = b, .buf = buf, .len = 1, .result = 7};

		assert_int_equal(coffer_obj_read_oid_vec(cr, &rv, 1), -ENOTCONN);
		assert_int_equal(rv.result, 7); /* no entry written */
	}
	assert_int_equal(coffer_obj_delete(c, &b, NULL), 0);
	assert_int_equal(coffer_obj_delete(c, &z, NULL), 0);
	assert_int_equal(coffer_eq_destroy(eq, 0), 0);
	assert_int_equal(coffer_disconnect(c), 0);
	expect_used(t, 0);
	expect_handles_closed(t);
}

struct read_race {
	coffer_handle_t conn;
	struct coffer_oid oid;
	atomic_int done;
	uint64_t hits, misses, torn;
};

/* The version written as object @v: 8 bytes of @v, then fill(@v); its size varies. Large
 * enough that a reader's copy takes long enough to overlap the writer's next versions. */
#define RACE_MAX (256u * 1024u + 6u * 4096u)
static uint64_t race_size(uint64_t v)
{
	return 256 * 1024 + (v % 7) * 4096;
}

static void *read_race_reader(void *arg)
{
	struct read_race *r = arg;
	uint8_t *buf = malloc(RACE_MAX);
	uint64_t v, sz, last = 0;

	if (buf == NULL) {
		r->torn++;
		return NULL;
	}
	while (!atomic_load(&r->done)) {
		int64_t n = coffer_obj_read_oid(r->conn, &r->oid, 0, buf, RACE_MAX, &sz);

		if (n == -EAGAIN) { /* deleted, or replaced during the copy */
			r->misses++;
			sched_yield();
			continue;
		}
		if (n < 0) { /* cmocka cannot fail a test from another thread: count it */
			r->torn++;
			continue;
		}
		memcpy(&v, buf, sizeof(v));
		/* one whole version: its size, its bytes, and never older than one seen */
		if ((uint64_t)n != sz || sz != race_size(v) || !check(buf + 8, sz - 8, v) ||
		    v < last)
			r->torn++;
		last = v;
		r->hits++;
	}
	free(buf);
	return NULL;
}

/*
 * Readers copy an object through the index while a writer replaces it as fast as it can,
 * and deletes and re-creates it now and then: the freed block of each version is reused by
 * the next one at once, so a copy that overlaps a replace reads a mix unless the sequence
 * check catches it. No reader may ever see a mix, a wrong size, or an older version than
 * one it saw; the writer reads its own write after every seal.
 */
static void test_read_oid_vs_replace(void **state)
{
	struct tctx *t = *state;
	enum { READERS = 2, VERSIONS = 1000 };
	struct read_race r[READERS];
	pthread_t th[READERS];
	coffer_handle_t cw, cr;
	struct coffer_oid oid;
	uint8_t *own = malloc(RACE_MAX);
	uint64_t hits = 0, misses = 0, torn = 0, sz;

	assert_non_null(own);
	make_oid(&oid, 31, 1);
	assert_int_equal(coffer_connect(t->store.sock, &cw), 0);
	assert_int_equal(coffer_connect(t->store.sock, &cr), 0);
	for (uint64_t v = 1; v <= VERSIONS; v++) {
		if (v == 2) /* readers start once there is something to read */
			for (int i = 0; i < READERS; i++) {
				memset(&r[i], 0, sizeof(r[i]));
				r[i].conn = cr;
				r[i].oid = oid;
				assert_int_equal(
				    pthread_create(&th[i], NULL, read_race_reader, &r[i]), 0);
			}
		uint64_t size = race_size(v);
		uint8_t *wr = NULL;

		if (v % 64 == 0 && v > 1)
			assert_int_equal(coffer_obj_delete(cw, &oid, NULL), 0);
		assert_int_equal(coffer_obj_create_oid(cw, &oid, size,
						       v % 64 == 0 ? 0 : COFFER_CREATE_REPLACE,
						       (void **)&wr, NULL),
				 0);
		memcpy(wr, &v, sizeof(v));
		fill(wr + 8, size - 8, v);
		assert_int_equal(coffer_obj_seal_oid(cw, &oid, COFFER_SEAL_RELEASE, NULL), 0);
		assert_int_equal(coffer_obj_read_oid(cw, &oid, 0, own, RACE_MAX, &sz),
				 (int64_t)size);
		assert_int_equal(memcmp(own, &v, sizeof(v)), 0);
	}
	for (int i = 0; i < READERS; i++) {
		atomic_store(&r[i].done, 1);
		assert_int_equal(pthread_join(th[i], NULL), 0);
		hits += r[i].hits;
		misses += r[i].misses;
		torn += r[i].torn;
	}
	printf("read-oid race: %d versions, %llu reads whole, %llu answered -EAGAIN, %llu torn "
	       "or failed\n",
	       VERSIONS, (unsigned long long)hits, (unsigned long long)misses,
	       (unsigned long long)torn);
	free(own);
	assert_int_equal(torn, 0);
	assert_true(hits > 0);
	assert_int_equal(coffer_obj_delete(cw, &oid, NULL), 0);
	assert_int_equal(coffer_disconnect(cw), 0);
	assert_int_equal(coffer_disconnect(cr), 0);
	expect_used(t, 0);
	expect_handles_closed(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_blocking_basic, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_invalid_args, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_connect_path_too_long, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_launch_on_destroyed_eq, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_grace_period_calls_in_read_section, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_flush_errors, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cookies_exhausted, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_blocking_after_last_disconnect, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_obj_handle_after_last_disconnect, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_many_handles, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_concurrent_open, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_async_basic, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_threads, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_thread_exit_inflight, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_replace, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_release_data_after_replace, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_release_data_zero_byte_tie, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_release_data_bulk, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_oid_ops, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_get_oid_vec, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_get_timeout_other_process, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_fork_inflight, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_fork_while_conn_freed, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_fork_child_keeps_no_session, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_fork_during_connect, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_connect_backlog_full, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ctl_timeout_under_signals, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_calls_under_signal_storm, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ctl_answer_while_stopped, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_connect_room_while_stopped, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_release_own_version, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_many_objects, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_eagain_full_channel, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_fini_once_too_often, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_store_killed, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_store_stopped, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_store_stopped_async, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_store_stopped_long_get, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_store_stopped_outcome, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_disconnect_ends_channel_open, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_two_stores, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_thread_across_restarts, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_disconnect_releases, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_disconnect_while_busy, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_force_destroy_vs_disconnect, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_poller_before_channel, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_channels_per_connection, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_read_oid, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_read_oid_vs_replace, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_put_reserved, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_reserve_limit_status, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_read_oid_keeps_cached, setup, teardown),
	};

	if (!getenv("COFFER_STORE_BIN")) {
		printf("skip: COFFER_STORE_BIN is not set (run through meson test)\n");
		return 77;
	}
	if (getenv("COFFER_TEST_FILTER")) /* e.g. COFFER_TEST_FILTER=test_replace */
		cmocka_set_test_filter(getenv("COFFER_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
