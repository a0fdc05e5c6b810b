/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/store/nomem_wrap.c - linked into coffer-store-nomem (-Wl,--wrap=malloc, calloc,
 * realloc): every allocation of the store's own code fails with ENOMEM while the file named
 * by $COFFER_TEST_NOMEM_FILE exists, as in a store whose memory ran out; libc's and other
 * libraries' internal allocations are not affected. The test creates and removes the file
 * to start and end the shortage. Likewise epoll_ctl(EPOLL_CTL_ADD) fails with ENOSPC (the
 * user's fs.epoll.max_user_watches reached) while $COFFER_TEST_NOWATCH_FILE exists, and
 * fcntl(F_DUPFD_CLOEXEC) fails with EMFILE (the store at its open-file limit) while
 * $COFFER_TEST_NODUP_FILE exists. (fcntl is fcntl64 under _FILE_OFFSET_BITS=64: both.)
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);
int __real_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev);
int __wrap_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev);
int __real_fcntl(int fd, int cmd, ...);
int __real_fcntl64(int fd, int cmd, ...);
int __wrap_fcntl(int fd, int cmd, ...);
int __wrap_fcntl64(int fd, int cmd, ...);

/* Whether the file named by environment variable @var exists; sets errno to @err if so. */
static bool flagged(const char *var, int err)
{
	const char *path = getenv(var); /* allocates nothing */

	if (path == NULL || access(path, F_OK) != 0)
		return false;
	errno = err;
	return true;
}

static bool short_of_memory(void)
{
	return flagged("COFFER_TEST_NOMEM_FILE", ENOMEM);
}

void *__wrap_malloc(size_t n)
{
	return short_of_memory() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t m)
{
	return short_of_memory() ? NULL : __real_calloc(n, m);
}

void *__wrap_realloc(void *p, size_t n)
{
	return short_of_memory() ? NULL : __real_realloc(p, n);
}

int __wrap_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	if (op == EPOLL_CTL_ADD && flagged("COFFER_TEST_NOWATCH_FILE", ENOSPC))
		return -1;
	return __real_epoll_ctl(epfd, op, fd, ev);
}

/* fcntl's third argument is an int or a pointer, or absent: passed on as a pointer-sized
 * word, as glibc's own fcntl does. */
static bool no_dup(int cmd)
{
	return cmd == F_DUPFD_CLOEXEC && flagged("COFFER_TEST_NODUP_FILE", EMFILE);
}

int __wrap_fcntl(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	return no_dup(cmd) ? -1 : __real_fcntl(fd, cmd, arg);
}

int __wrap_fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	return no_dup(cmd) ? -1 : __real_fcntl64(fd, cmd, arg);
}
