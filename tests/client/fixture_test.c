/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/client/fixture_test.c - the store fixture leaves no store running when a test fails.
 *
 * A test that starts a store of its own beside its setup's store (test_client's
 * test_read_oid_keeps_cached) and then fails an assertion: cmocka jumps to the teardown,
 * which stops only the setup's store, and the program ends. The fixture must still kill the
 * test's own store, or that store keeps the test's stdout open and the test runner waits
 * for it until its timeout (the failing test hangs instead of failing).
 *
 * The parent runs a copy of itself ("child": start two stores, stop the first one, exit
 * without stopping the second) with stdout on a pipe and expects the pipe's end (every
 * holder of it gone) within 20 s; then it kills what is left.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "store_fixture.h"

extern char **environ;

static int child(void)
{
	struct store_fixture setup_store, own_store;

	if (store_start(&setup_store, "4M") < 0 || store_start(&own_store, "4M") < 0)
		return 2;
	printf("%d\n", (int)own_store.pid);
	fflush(stdout);
	/* the teardown after a failed assertion: only the setup's store is stopped */
	store_stop(&setup_store);
	return 1;
}

int main(int argc, char **argv)
{
	char buf[64], *argv2[] = {argv[0], "child", NULL};
	posix_spawn_file_actions_t fa;
	struct timespec t0, t1;
	size_t have = 0;
	pid_t pid, own = -1;
	int p[2], status, eof = 0;

	if (argc > 1 && strcmp(argv[1], "child") == 0)
		return child();
	if (!getenv("COFFER_STORE_BIN") || pipe(p) < 0)
		return 77;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	posix_spawn_file_actions_addclose(&fa, p[0]);
	if (posix_spawn(&pid, argv[0], &fa, NULL, argv2, environ) != 0)
		return 1;
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct pollfd pf = {.fd = p[0], .events = POLLIN};
		ssize_t n;

		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (t1.tv_sec - t0.tv_sec > 20)
			break;
		if (poll(&pf, 1, 1000) <= 0)
			continue;
		n = read(p[0], buf + have, sizeof(buf) - 1 - have);
		if (n == 0) {
			eof = 1;
			break;
		}
		if (n > 0)
			have += (size_t)n;
		if (have == sizeof(buf) - 1)
			have = 0;
	}
	buf[have] = '\0';
	own = (pid_t)atoi(buf);
	waitpid(pid, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 1) {
		fprintf(stderr, "child: status %d (could not start the stores?)\n", status);
		return 1;
	}
	if (!eof) {
		fprintf(stderr,
			"FAIL: the test's own store (pid %d) outlived the test and holds "
			"its stdout\n",
			(int)own);
		if (own > 0)
			kill(own, SIGKILL);
		return 1;
	}
	printf("ok: no store outlived the failed test\n");
	return 0;
}
