/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/store/stop_unlink.c - linked into coffer-store-stopunlink (-Wl,--wrap=unlink): a store
 * about to unlink(2) a socket file stops itself (SIGSTOP) first, as a store preempted there
 * on a busy machine would. The test that runs it (test_restart_keeps_successor_socket in
 * store_test.c) starts a successor on the same path while this store is stopped in its
 * teardown, then lets it go on (SIGCONT): whatever it unlinks then must not be the
 * successor's socket.
 */
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

int __real_unlink(const char *path);
int __wrap_unlink(const char *path);

int __wrap_unlink(const char *path)
{
	struct stat sb;

	if (lstat(path, &sb) == 0 && S_ISSOCK(sb.st_mode))
		raise(SIGSTOP);
	return __real_unlink(path);
}
