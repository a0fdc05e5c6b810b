/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * dlclose safety: a host (fio does this) dlopens libcoffer.so, uses it from several threads,
 * finalises it and dlcloses it. Afterwards the host's threads that touched coffer exit (their
 * pthread key destructors point into libcoffer), the host forks (coffer's atfork handlers),
 * and liburcu's call_rcu worker keeps running: none of this may crash, which requires the
 * library to stay mapped (-z nodelete).
 *
 * Usage: test_dlclose /path/to/libcoffer.so
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <coffer/common.h>
#include <coffer/hash.h>

const char *__tsan_default_options(void);
const char *__tsan_default_options(void)
{
	return "die_after_fork=0";
}

static const char *lib_path;

static struct {
	int (*init)(void);
	int (*fini)(void);
	struct coffer_hhash *(*global)(void);
	int (*insert)(struct coffer_hhash *, struct coffer_hlink *, enum coffer_htype,
		      coffer_handle_t *);
	int (*lookup)(struct coffer_hhash *, coffer_handle_t, enum coffer_htype,
		      struct coffer_hlink **);
	void (*putref)(struct coffer_hhash *, struct coffer_hlink *);
	int (*del)(struct coffer_hhash *, struct coffer_hlink *);
} api;

static pthread_barrier_t used, closed;
static int thread_errors;

static void obj_free(struct coffer_hlink *l)
{
	free(l);
}

/* Uses coffer (registers with urcu-bp, leaves a partial reclamation batch), then waits for
 * the main thread to dlclose before it exits. */
static void *user_thread(void *arg)
{
	struct coffer_hhash *hh = arg;

	for (int i = 0; i < 10; i++) {
		struct coffer_hlink *l = calloc(1, sizeof(*l)), *got;
		coffer_handle_t h;

		if (!l) {
			__atomic_fetch_add(&thread_errors, 1, __ATOMIC_RELAXED);
			continue;
		}
		l->hl_free = obj_free;
		if (api.insert(hh, l, COFFER_HTYPE_TEST, &h) ||
		    api.lookup(hh, h, COFFER_HTYPE_TEST, &got))
			__atomic_fetch_add(&thread_errors, 1, __ATOMIC_RELAXED);
		else {
			api.putref(hh, got);
			api.del(hh, got);
		}
	}
	pthread_barrier_wait(&used);
	pthread_barrier_wait(&closed);
	return NULL; /* destructors run now, after dlclose */
}

#define SYM(field, name)                                                                           \
	do {                                                                                       \
		*(void **)&api.field = dlsym(lib, name);                                           \
		assert_non_null(api.field);                                                        \
	} while (0)

static void test_dlclose(void **state)
{
	void *lib;
	pthread_t t[2];
	pid_t pid;
	int status;

	(void)state;
	lib = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
	assert_non_null(lib);
	SYM(init, "coffer_init");
	SYM(fini, "coffer_fini");
	SYM(global, "coffer_hhash_global");
	SYM(insert, "coffer_hhash_insert");
	SYM(lookup, "coffer_hhash_lookup");
	SYM(putref, "coffer_hhash_putref");
	SYM(del, "coffer_hhash_delete");
	assert_int_equal(api.init(), 0);
	pthread_barrier_init(&used, NULL, 3);
	pthread_barrier_init(&closed, NULL, 3);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&t[i], NULL, user_thread, api.global()), 0);
	pthread_barrier_wait(&used);
	assert_int_equal(thread_errors, 0);
	assert_int_equal(api.fini(), 0);
	assert_int_equal(dlclose(lib), 0);
	/* -z nodelete: still mapped. */
	assert_non_null(dlopen(lib_path, RTLD_NOW | RTLD_NOLOAD));
	pthread_barrier_wait(&closed);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	/* The atfork handlers are still installed and must still work. */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* Give the call_rcu worker a few wake-ups (it polls every ~10 ms). */
	{
		struct timespec ts = {0, 50 * 1000 * 1000};

		nanosleep(&ts, NULL);
	}
	pthread_barrier_destroy(&used);
	pthread_barrier_destroy(&closed);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_dlclose),
	};

	if (argc < 2) {
		fprintf(stderr, "usage: %s /path/to/libcoffer.so\n", argv[0]);
		return 77;
	}
	lib_path = argv[1];
	return cmocka_run_group_tests(tests, NULL, NULL);
}
