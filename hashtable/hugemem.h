/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * hashtable/hugemem.h - anonymous memory backed by transparent hugepages where the kernel
 * grants them, prefaulted: for the handle hash's bucket array and the object records
 * (runtime/obj.c), which a process fills in bulk and which would otherwise take one page
 * fault per 4 KiB on the open path. See hugemem.c.
 */
#ifndef COFFER_HUGEMEM_H
#define COFFER_HUGEMEM_H

#include <stddef.h>

/* The transparent hugepage size (the kernel's hpage_pmd_size, read once), else 2 MiB.
 * Context: any thread. */
size_t coffer__hugemem_pagesize(void);

/*
 * Map @bytes (> 0) of zeroed, private, anonymous memory aligned to coffer__hugemem_pagesize(),
 * advised MADV_HUGEPAGE (advice: the kernel may refuse) and prefaulted with
 * MADV_POPULATE_WRITE where the kernel has it (Linux >= 5.14; else the pages fault on first
 * touch as usual). Return: the memory, or NULL when out of memory. Context: any thread; a
 * system call, so never under a lock of the hot path. Lifetime: until coffer__hugemem_unmap()
 * with the same @bytes.
 */
void *coffer__hugemem_map(size_t bytes);

/* Unmap what coffer__hugemem_map(@bytes) returned. */
void coffer__hugemem_unmap(void *p, size_t bytes);

#endif /* COFFER_HUGEMEM_H */
