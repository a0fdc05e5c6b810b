/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * hashtable/hugemem.c - prefaulted, hugepage-advised anonymous memory (see hugemem.h).
 *
 * Why: a process that opens many handles writes fresh memory on every open (a record and, the
 * first time round, its bucket head). With 4 KiB pages that is one page fault per 4 KiB, taken
 * on the open path: profiled on the 2-core VM, `coffer-bench obj_open` spent most of its open
 * phase in faults, each ~8-15 us there (shadow paging), ~0.5-1 us on bare metal. One 2 MiB
 * hugepage replaces 512 of them, and MADV_POPULATE_WRITE takes it in one system call at
 * allocation time instead of at first touch (Linux mm/madvise.c; the same idea as the store's
 * prefaulted arena). Memory is mapped twice the alignment over and trimmed, since a hugepage
 * needs an aligned virtual range.
 *
 * The hugepage size is read once from sysfs (never hard-coded: it is 2 MiB on x86-64 with 4 KiB
 * base pages, other sizes elsewhere); 2 MiB when sysfs cannot be read. No locks: the size is
 * computed idempotently and stored with a relaxed atomic (every racer computes the same value).
 */
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>

#include "hashtable/hugemem.h"

#define HUGEMEM_DEFAULT ((size_t)2 << 20)

static size_t hugemem_size; /* 0 until read; atomic-relaxed */

size_t coffer__hugemem_pagesize(void)
{
	size_t sz = __atomic_load_n(&hugemem_size, __ATOMIC_RELAXED);
	unsigned long long v = 0;
	FILE *f;

	if (sz)
		return sz;
	sz = HUGEMEM_DEFAULT;
	f = fopen("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size", "re");
	if (f) {
		/* Accept only a sane power of two (64 KiB .. 1 GiB). */
		if (fscanf(f, "%llu", &v) == 1 && v >= (64u << 10) && v <= (1ull << 30) &&
		    (v & (v - 1)) == 0)
			sz = (size_t)v;
		fclose(f);
	}
	__atomic_store_n(&hugemem_size, sz, __ATOMIC_RELAXED);
	return sz;
}

void *coffer__hugemem_map(size_t bytes)
{
	size_t align = coffer__hugemem_pagesize();
	size_t len = (bytes + align - 1) & ~(align - 1);
	size_t span = len + align;
	char *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uintptr_t a;

	if (p == MAP_FAILED)
		return NULL;
	a = ((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1);
	if (a > (uintptr_t)p)
		munmap(p, a - (uintptr_t)p);
	if ((uintptr_t)p + span > a + len)
		munmap((void *)(a + len), (uintptr_t)p + span - (a + len));
#ifdef MADV_HUGEPAGE
	(void)madvise((void *)a, len, MADV_HUGEPAGE); /* advice only: may be refused */
#endif
#ifdef MADV_POPULATE_WRITE
	(void)madvise((void *)a, len, MADV_POPULATE_WRITE); /* Linux >= 5.14; else faults */
#endif
	return (void *)a;
}

void coffer__hugemem_unmap(void *p, size_t bytes)
{
	size_t align = coffer__hugemem_pagesize();

	if (p)
		munmap(p, (bytes + align - 1) & ~(align - 1));
}
