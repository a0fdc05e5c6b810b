/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Process-runtime tests: threads that exit without telling coffer anything must not stall
 * grace periods nor lose their pending frees; fork() while other threads sit in read-side
 * sections and hammer the table leaves a child that can use coffer (and a parent that is
 * unaffected).
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <coffer/common.h>
#include <coffer/hash.h>
#include <coffer/store.h>

#include "hashtable/htab_internal.h"

/* TSan kills a child that starts threads after a multi-threaded fork unless told otherwise;
 * the child here must (liburcu's call_rcu worker is restarted in it). */
const char *__tsan_default_options(void);
const char *__tsan_default_options(void)
{
	return "die_after_fork=0";
}

struct obj {
	struct coffer_hlink link;
	unsigned int magic;
};

static int frees;

static void obj_free(struct coffer_hlink *l)
{
	__atomic_fetch_add(&frees, 1, __ATOMIC_RELAXED);
	((struct obj *)(void *)l)->magic = 0xdead;
	free(l);
}

static struct obj *obj_new(void)
{
	struct obj *o = calloc(1, sizeof(*o));

	if (o) {
		o->link.hl_free = obj_free;
		o->magic = 0x11fe;
	}
	return o;
}

/* A watchdog so that a stalled grace period fails the test instead of hanging it. */
static void watchdog(unsigned int seconds)
{
	alarm(seconds);
}

static void *exiting_thread(void *arg)
{
	struct coffer_hhash *hh = arg;
	coffer_handle_t h[10];
	struct coffer_hlink *l;
	int bad = 0;

	/* Registers with urcu-bp (lookups), fills a partial reclamation batch (10 deletes),
	 * and exits without any unregister or flush call. */
	for (int i = 0; i < 10; i++) {
		struct obj *o = obj_new();

		if (!o || coffer_hhash_insert(hh, &o->link, COFFER_HTYPE_TEST, &h[i]) != 0)
			bad++;
	}
	for (int i = 0; i < 10; i++) {
		if (coffer_hhash_lookup(hh, h[i], COFFER_HTYPE_TEST, &l) != 0) {
			bad++;
			continue;
		}
		coffer_hhash_putref(hh, l);
		if (coffer_hhash_delete(hh, l) != 0)
			bad++;
	}
	return (void *)(intptr_t)bad;
}

static void test_thread_exit_without_unregister(void **state)
{
	struct coffer_hhash *hh;
	pthread_t t[4];
	void *ret;

	(void)state;
	frees = 0;
	assert_int_equal(coffer_init(), 0);
	hh = coffer_hhash_global();
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL, exiting_thread, hh), 0);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(pthread_join(t[i], &ret), 0);
		assert_int_equal((intptr_t)ret, 0);
	}
	/* Grace periods must not wait for the dead readers, and the dead threads' partial
	 * batches must have been handed over at their exit. */
	watchdog(20);
	urcu_bp_synchronize_rcu();
	assert_int_equal(coffer__rcu_barrier(), 0);
	alarm(0);
	assert_int_equal(frees, 40);
	assert_int_equal(coffer_hhash_count(hh), 0);
	assert_int_equal(coffer_fini(), 0);
}

/* ---- a thread that outlives the runtime -------------------------------------------- */

static pthread_barrier_t outlive_b;

static void *outliving_thread(void *arg)
{
	coffer_handle_t bogus = {.cookie = ((uint64_t)0x4242 << 8) | COFFER_HTYPE_CONN};
	struct coffer_oid oid;
	bool present;

	(void)arg;
	memset(&oid, 7, sizeof(oid));
	/* A blocking call gives this thread its hidden EQ of blocking calls, even when the
	 * call itself fails (no such connection). */
	if (coffer_obj_contains(bogus, &oid, &present, NULL) >= 0)
		return (void *)1;
	pthread_barrier_wait(&outlive_b); /* main runs the last coffer_fini() */
	pthread_barrier_wait(&outlive_b);
	return NULL; /* the hidden EQ is released at exit, after the runtime is gone */
}

/* A thread that made a blocking call outlives the last coffer_fini() (a pool joined after
 * shutdown): at its exit it drops its hidden EQ through the destroyed handle hash, which
 * stays valid until then (it used to be freed at once: a use after free, SIGSEGV). The
 * runtime then starts again. */
static void test_thread_outlives_fini(void **state)
{
	pthread_t t;
	void *ret;

	(void)state;
	assert_int_equal(pthread_barrier_init(&outlive_b, NULL, 2), 0);
	assert_int_equal(coffer_init(), 0);
	assert_int_equal(pthread_create(&t, NULL, outliving_thread, NULL), 0);
	pthread_barrier_wait(&outlive_b);
	assert_int_equal(coffer_fini(), 0);
	assert_null(coffer_hhash_global());
	pthread_barrier_wait(&outlive_b);
	assert_int_equal(pthread_join(t, &ret), 0);
	assert_null(ret);
	assert_int_equal(coffer__rcu_barrier(), 0);
	assert_int_equal(coffer_init(), 0);
	assert_int_equal(coffer_hhash_count(coffer_hhash_global()), 0);
	assert_int_equal(coffer_fini(), 0);
	pthread_barrier_destroy(&outlive_b);
}

/* ---- fork ---------------------------------------------------------------------------- */

static int stop;
static int busy_errors;

/*
 * Sanitizer runtimes are not fork-safe in multi-threaded processes: ASan's allocator (gcc 12's
 * libasan, LLVM 14) and TSan's metadata allocator take internal locks that fork() does not
 * take, so a child forked while another thread is inside malloc()/free() (or TSan's sync-object
 * bookkeeping) can hang in its own first allocation, whatever the program does (observed:
 * ~1 run in 10). Plain builds (glibc's malloc is fork-safe) run the test with both threads
 * running through fork - the reader inside a read-side section most of the time, the
 * scenario that hangs a child whose RCU has no fork handlers (checked: it does hang without
 * them). Under a sanitizer both threads park, outside any section, around each fork. (A
 * reader may not park INSIDE a section across fork: fork-prepare lets a grace period in
 * progress finish, as liburcu's call_rcu_before_fork() requires.)
 */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FORK_GATE 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define FORK_GATE 1
#endif
#endif
static int gate_closed;
#ifdef FORK_GATE
static int parked;
#endif

static void gate_wait(void)
{
#ifdef FORK_GATE
	if (__atomic_load_n(&gate_closed, __ATOMIC_ACQUIRE)) {
		__atomic_fetch_add(&parked, 1, __ATOMIC_ACQ_REL);
		while (__atomic_load_n(&gate_closed, __ATOMIC_ACQUIRE))
			sched_yield();
		__atomic_fetch_sub(&parked, 1, __ATOMIC_ACQ_REL);
	}
#endif
}

static void gate_close(void)
{
#ifdef FORK_GATE
	__atomic_store_n(&gate_closed, 1, __ATOMIC_RELEASE);
	while (__atomic_load_n(&parked, __ATOMIC_ACQUIRE) != 2)
		sched_yield();
#endif
}

static void gate_open(void)
{
	__atomic_store_n(&gate_closed, 0, __ATOMIC_RELEASE);
#ifdef FORK_GATE
	while (__atomic_load_n(&parked, __ATOMIC_ACQUIRE) != 0)
		sched_yield();
#endif
}

/* Spends most of its time inside read-side sections (the classic fork hang). */
static void *reader_thread(void *arg)
{
	struct coffer_hhash *hh = arg;
	coffer_handle_t h = {(UINT64_C(5) << COFFER_HTYPE_BITS) | COFFER_HTYPE_TEST};

	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		coffer_rcu_read_lock();
		for (int i = 0; i < 1000; i++)
			(void)coffer_hhash_lookup_rcu(hh, h, COFFER_HTYPE_TEST);
		coffer_rcu_read_unlock();
		gate_wait();
	}
	return NULL;
}

/* Inserts and deletes without pause: stripes, batches and call_rcu busy during fork. */
static void *writer_thread(void *arg)
{
	struct coffer_hhash *hh = arg;

	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		struct obj *o;
		coffer_handle_t h;

		gate_wait();
		o = obj_new();
		if (!o || coffer_hhash_insert(hh, &o->link, COFFER_HTYPE_TEST, &h) != 0 ||
		    coffer_hhash_delete(hh, &o->link) != 0)
			__atomic_fetch_add(&busy_errors, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

/* The child: use the inherited table and the global runtime, wait for grace periods. */
static int child_main(struct coffer_hhash *hh, coffer_handle_t parent_h)
{
	struct coffer_hlink *l;
	coffer_handle_t h;
	int base;

	alarm(20);
	if (coffer_hhash_lookup(hh, parent_h, COFFER_HTYPE_TEST, &l) != 0)
		return 10;
	coffer_hhash_putref(hh, l);
	for (int i = 0; i < 1000; i++) {
		struct obj *o = obj_new();

		if (!o || coffer_hhash_insert(hh, &o->link, COFFER_HTYPE_TEST, &h) != 0)
			return 11;
		if (coffer_hhash_lookup(hh, h, COFFER_HTYPE_TEST, &l) != 0)
			return 12;
		coffer_hhash_putref(hh, l);
		if (coffer_hhash_delete(hh, &o->link) != 0)
			return 13;
	}
	base = __atomic_load_n(&frees, __ATOMIC_RELAXED);
	urcu_bp_synchronize_rcu(); /* must not wait for the parent's reader thread */
	if (coffer__rcu_barrier() != 0)
		return 14;
	if (__atomic_load_n(&frees, __ATOMIC_RELAXED) < base)
		return 15;
	/* A new table and the global runtime work too. */
	if (coffer_init() != 0)
		return 16;
	if (coffer_fini() != 0)
		return 17;
	if (coffer_fini() != 0) /* the parent's reference, inherited */
		return 18;
	return 0;
}

static void test_fork(void **state)
{
	struct coffer_hhash *hh;
	struct obj *keep = obj_new();
	coffer_handle_t keep_h;
	pthread_t rt, wt;

	(void)state;
	assert_int_equal(coffer_init(), 0);
	hh = coffer_hhash_global();
	assert_int_equal(coffer_hhash_insert(hh, &keep->link, COFFER_HTYPE_TEST, &keep_h), 0);
	stop = 0;
	assert_int_equal(pthread_create(&rt, NULL, reader_thread, hh), 0);
	assert_int_equal(pthread_create(&wt, NULL, writer_thread, hh), 0);
	for (int i = 0; i < 5; i++) {
		struct timespec ts = {0, 20 * 1000 * 1000};
		int status = -1, waited = 0;
		pid_t pid, w;

		nanosleep(&ts, NULL);
		gate_close();
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0)
			_exit(child_main(hh, keep_h));
		gate_open();
		/* Bounded wait: a hung child fails the test. */
		while ((w = waitpid(pid, &status, WNOHANG)) == 0 && waited < 3000) {
			struct timespec t10 = {0, 10 * 1000 * 1000};

			nanosleep(&t10, NULL);
			waited++;
		}
		if (w == 0) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			fail_msg("fork child %d hung", i);
		}
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	pthread_join(rt, NULL);
	pthread_join(wt, NULL);
	assert_int_equal(busy_errors, 0);
	/* The parent is unaffected. */
	{
		struct coffer_hlink *l;

		assert_int_equal(coffer_hhash_lookup(hh, keep_h, COFFER_HTYPE_TEST, &l), 0);
		coffer_hhash_putref(hh, l);
	}
	assert_int_equal(coffer_hhash_count(hh), 1);
	assert_int_equal(coffer_fini(), 0);
	assert_null(coffer_hhash_global());
}

/* ---- a host that uses liburcu itself ------------------------------------------------ */

/* liburcu-memb's out-of-line API (declared here: its header's macros would collide with
 * urcu-bp's in one translation unit). */
void urcu_memb_register_thread(void);
void urcu_memb_unregister_thread(void);
void urcu_memb_read_lock(void);
void urcu_memb_read_unlock(void);
void urcu_memb_synchronize_rcu(void);

static void *host_urcu_thread(void *arg)
{
	struct coffer_hhash *hh = arg;
	struct obj *o = obj_new();
	struct coffer_hlink *l;
	coffer_handle_t h;
	intptr_t bad = 0;

	/* The host registers this thread with memb (a registering flavour that aborts on a
	 * double registration of its own kind) and explicitly with bp, twice; coffer's lazy
	 * bp registration must coexist with all of it, inside the host's own sections too. */
	urcu_memb_register_thread();
	urcu_bp_register_thread();
	urcu_bp_register_thread();
	urcu_memb_read_lock();
	if (!o || coffer_hhash_insert(hh, &o->link, COFFER_HTYPE_TEST, &h) != 0)
		bad++;
	else if (coffer_hhash_lookup(hh, h, COFFER_HTYPE_TEST, &l) != 0)
		bad++;
	else {
		coffer_hhash_putref(hh, l);
		if (coffer_hhash_delete(hh, l) != 0)
			bad++;
	}
	urcu_memb_read_unlock();
	urcu_memb_synchronize_rcu();
	urcu_memb_unregister_thread();
	return (void *)bad;
}

static void test_host_uses_liburcu(void **state)
{
	pthread_t t;
	void *ret;

	(void)state;
	frees = 0;
	assert_int_equal(coffer_init(), 0);
	assert_int_equal(pthread_create(&t, NULL, host_urcu_thread, coffer_hhash_global()), 0);
	assert_int_equal(pthread_join(t, &ret), 0);
	assert_int_equal((intptr_t)ret, 0);
	assert_int_equal(coffer_fini(), 0);
	assert_int_equal(frees, 1);
}

/* coffer_strerror() returns static text for every int, known or not: the pointer stays valid
 * after later calls (glibc's strerror() buffer for unknown codes would be freed by them). */
static void test_strerror(void **state)
{
	const char *unknown = coffer_strerror(-9999);
	const char *min = coffer_strerror(INT_MIN);
	char copy[64];

	(void)state;
	snprintf(copy, sizeof(copy), "%s", unknown);
	for (int e = -200; e <= 200; e++)
		assert_non_null(coffer_strerror(e));
	assert_string_equal(unknown, copy);
	assert_non_null(min);
	assert_string_equal(coffer_strerror(0), "success");
	assert_string_equal(coffer_strerror(-ENOENT), coffer_strerror(ENOENT));
	assert_string_equal(coffer_strerror(-EPIPE), "Broken pipe");
	/* -EMFILE from an object call means the connection's channels ran out, or the store's
	 * fds (then coffer_connect() gets it too, and another connection would not help) */
	assert_non_null(strstr(coffer_strerror(-EMFILE), "512 channels"));
	assert_non_null(strstr(coffer_strerror(-EMFILE), "coffer-store"));
	/* coffer_connect()'s -EACCES: who is admitted and how to admit a group, not only
	 * "Permission denied" (a root client of another user's store gets it too) */
	assert_non_null(strstr(coffer_strerror(-EACCES), "own user"));
	assert_non_null(strstr(coffer_strerror(-EACCES), "--socket-mode=0660"));
	/* -EEXIST from a create or put: the flag that replaces, not only "exists" */
	assert_non_null(strstr(coffer_strerror(-EEXIST), "COFFER_CREATE_REPLACE"));
	/* coffer_connect()'s -ETIMEDOUT also comes from a socket that is not a coffer-store's
	 * (store.h), which "stopped or wedged" alone does not suggest */
	assert_non_null(strstr(coffer_strerror(-ETIMEDOUT), "not a coffer-store"));
}

/*
 * Runs first, before anything in this process starts the runtime: a bad COFFER_HHASH_*
 * value fails coffer_init() with -EINVAL (not silently the default), and a good one works.
 */
static void test_bad_environment(void **state)
{
	static const char *const bad[][2] = {
	    {"COFFER_HHASH_BUCKETS_LOG2", "abc"}, {"COFFER_HHASH_BUCKETS_LOG2", "27"},
	    {"COFFER_HHASH_BUCKETS_LOG2", "0"},	  {"COFFER_HHASH_BUCKETS_LOG2", "-3"},
	    {"COFFER_HHASH_BUCKETS_LOG2", "18x"}, {"COFFER_HHASH_LOCKS_LOG2", "99"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(setenv(bad[i][0], bad[i][1], 1), 0);
		assert_int_equal(coffer_init(), -EINVAL);
		assert_int_equal(coffer_fini(), -EINVAL); /* nothing was started */
		assert_int_equal(unsetenv(bad[i][0]), 0);
	}
	/* locks above buckets */
	assert_int_equal(setenv("COFFER_HHASH_BUCKETS_LOG2", "10", 1), 0);
	assert_int_equal(setenv("COFFER_HHASH_LOCKS_LOG2", "11", 1), 0);
	assert_int_equal(coffer_init(), -EINVAL);
	assert_int_equal(setenv("COFFER_HHASH_LOCKS_LOG2", "10", 1), 0);
	assert_int_equal(coffer_init(), 0);
	assert_int_equal(coffer_fini(), 0);
	assert_int_equal(unsetenv("COFFER_HHASH_BUCKETS_LOG2"), 0);
	assert_int_equal(unsetenv("COFFER_HHASH_LOCKS_LOG2"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bad_environment),
	    cmocka_unit_test(test_thread_exit_without_unregister),
	    cmocka_unit_test(test_thread_outlives_fini),
	    cmocka_unit_test(test_fork),
	    cmocka_unit_test(test_host_uses_liburcu),
	    cmocka_unit_test(test_strerror),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
