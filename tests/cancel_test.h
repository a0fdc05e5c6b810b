/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/cancel_test.h - what the thread-cancellation tests (tests/eventq/cancel_test.c,
 * tests/client/cancel_client_test.c) share: the attribute their thread bodies carry, the
 * process's fd count, and their command line. Header-only, for test programs.
 */
#ifndef COFFER_TESTS_CANCEL_TEST_H
#define COFFER_TESTS_CANCEL_TEST_H

#include <dirent.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

/*
 * NO_ASAN: the thread bodies carry no ASan instrumentation. A cancelled thread unwinds
 * through them, and ASan does not unpoison the redzones of frames left by a forced unwind
 * (it handles longjmp and C++ exceptions only), so the thread-exit destructors (liburcu-bp's)
 * that run on that stack later read as a stack-buffer-overflow. With coffer's frames no
 * cancellation starts inside a coffer call, and these frames have nothing to poison.
 */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NO_ASAN __attribute__((no_sanitize_address))
#endif
#endif
#if !defined(NO_ASAN) && defined(__SANITIZE_ADDRESS__)
#define NO_ASAN __attribute__((no_sanitize_address))
#endif
#ifndef NO_ASAN
#define NO_ASAN
#endif

/* The fds this process has open, or -1 when /proc/self/fd cannot be read. */
static inline int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the directory's own fd */
}

/* `[-r rounds] [-s seed]` into *@rounds and *@seed (made odd: never 0). Returns 0, or 2 for
 * an unknown option (the exit status to give). */
static inline int cancel_test_args(int argc, char **argv, unsigned int *rounds, uint64_t *seed)
{
	int opt;

	while ((opt = getopt(argc, argv, "r:s:")) != -1) {
		if (opt == 'r')
			*rounds = (unsigned int)strtoul(optarg, NULL, 0);
		else if (opt == 's')
			*seed = strtoull(optarg, NULL, 0) | 1;
		else
			return 2;
	}
	return 0;
}

#endif
