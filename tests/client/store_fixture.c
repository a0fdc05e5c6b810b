/* SPDX-License-Identifier: BSD-2-Clause */
/* tests/client/store_fixture.c - see store_fixture.h. */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#include "store_fixture.h"

/*
 * Every store started and not yet stopped, killed if this process ends without store_stop():
 * a failed assertion that ends the process, exit() from a library, or a sanitizer report (the
 * sanitizer's death callback). Never leave a store running: a test that starts its own store
 * beside its setup's and fails an assertion (cmocka jumps to the teardown, which stops only
 * the setup's store) must not leave its own running - it would hold the test's stdout and
 * make the test runner wait for it until its timeout instead of reporting the failure.
 */
#define LIVE_MAX 16
static volatile pid_t g_live_pids[LIVE_MAX];

static void live_add(pid_t pid)
{
	for (int i = 0; i < LIVE_MAX; i++)
		if (g_live_pids[i] <= 0) {
			g_live_pids[i] = pid;
			return;
		}
}

static void live_del(pid_t pid)
{
	for (int i = 0; i < LIVE_MAX; i++)
		if (g_live_pids[i] == pid)
			g_live_pids[i] = 0;
}

void __sanitizer_set_death_callback(void (*cb)(void)) __attribute__((weak));

static void kill_live_store(void)
{
	for (int i = 0; i < LIVE_MAX; i++) {
		pid_t pid = g_live_pids[i];

		if (pid > 0)
			kill(pid, SIGKILL);
	}
}

static void on_fatal_signal(int sig)
{
	kill_live_store();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void install_guards(void)
{
	static bool done;

	if (done)
		return;
	done = true;
	atexit(kill_live_store);
	if (__sanitizer_set_death_callback)
		__sanitizer_set_death_callback(kill_live_store);
	signal(SIGABRT, on_fatal_signal);
	signal(SIGBUS, on_fatal_signal);
	signal(SIGFPE, on_fatal_signal);
	signal(SIGTERM, on_fatal_signal);
}

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static int try_connect(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	int rc;

	if (fd < 0)
		return -errno;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	close(fd);
	return rc == 0 ? 0 : -1;
}

int store_start(struct store_fixture *f, const char *mem)
{
	const char *bin = getenv("COFFER_STORE_BIN");
	int status;

	memset(f, 0, sizeof(*f));
	f->pid = -1;
	if (!bin || !*bin)
		return -ENOENT;
	snprintf(f->dir, sizeof(f->dir), "/tmp/coffer-client-test.XXXXXX");
	if (!mkdtemp(f->dir))
		return -errno;
	snprintf(f->sock, sizeof(f->sock), "%s/store.sock", f->dir);
	{
		/* posix_spawn, not fork+exec: the test process has threads (liburcu's, the
		 * connection monitors), and ThreadSanitizer refuses a fork of such a process. */
		char *argv[] = {(char *)bin, "-m", (char *)mem, "-s", f->sock, "-q", NULL};
		int rc = posix_spawn(&f->pid, bin, NULL, NULL, argv, environ);

		if (rc) {
			f->pid = -1;
			return -rc;
		}
		install_guards();
		live_add(f->pid);
	}
	for (int i = 0; i < 1000; i++) { /* up to 10 s on a loaded machine */
		if (try_connect(f->sock) == 0)
			return 0;
		if (waitpid(f->pid, &status, WNOHANG) == f->pid) {
			f->pid = -1;
			return -ECHILD;
		}
		sleep_ms(10);
	}
	store_stop(f);
	return -ETIMEDOUT;
}

int store_stop(struct store_fixture *f)
{
	int status = 0, rc = -1;

	if (f->pid > 0) {
		live_del(f->pid);
		kill(f->pid, SIGTERM);
		for (int i = 0; i < 500; i++) {
			if (waitpid(f->pid, &status, WNOHANG) == f->pid) {
				rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
				f->pid = -1;
				break;
			}
			sleep_ms(10);
		}
		if (f->pid > 0) {
			kill(f->pid, SIGKILL);
			waitpid(f->pid, &status, 0);
			f->pid = -1;
		}
	}
	if (f->sock[0])
		unlink(f->sock);
	if (f->dir[0])
		rmdir(f->dir);
	return rc;
}

void store_kill(struct store_fixture *f)
{
	int status;

	if (f->pid > 0) {
		live_del(f->pid);
		kill(f->pid, SIGKILL);
		waitpid(f->pid, &status, 0);
		f->pid = -1;
	}
}
