/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/store/nomem_wrap.c - linked into coffer-store-nomem (-Wl,--wrap=malloc, calloc,
 * realloc): every allocation of the store's own code fails with ENOMEM while the file named
 * by $COFFER_TEST_NOMEM_FILE exists, as in a store whose memory ran out; libc's and other
 * libraries' internal allocations are not affected. The test creates and removes the file
 * to start and end the shortage.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);

static bool short_of_memory(void)
{
	const char *path = getenv("COFFER_TEST_NOMEM_FILE"); /* allocates nothing */

	if (path == NULL || access(path, F_OK) != 0)
		return false;
	errno = ENOMEM;
	return true;
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
