/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tools/shm.h - the store's shared-memory arena segment: one fd, created and prefaulted at
 * start-up, never grown, hugepage-backed when possible.
 * Context: start-up only (single-threaded).
 */
#ifndef COFFER_TOOLS_SHM_H
#define COFFER_TOOLS_SHM_H

#include <stddef.h>
#include <stdint.h>

enum coffer__hp_mode { COFFER_HP_AUTO = 0, COFFER_HP_ON = 1, COFFER_HP_OFF = 2 };

struct coffer__shm {
	int fd;		  /* the segment, passed to every client once */
	void *base;	  /* the store's own mapping (used only to prefault) */
	uint64_t size;	  /* bytes mapped (the -m size rounded up to the page size) */
	uint64_t page;	  /* backing page size in bytes */
	int hugepages;	  /* 1 when hugepage-backed */
	int sealed;	  /* 1 when F_SEAL_SHRINK|F_SEAL_GROW are applied (memfd) */
	uint32_t segment; /* random non-zero id announced in HELLO_REPLY */
};

/**
 * coffer__shm_create() - create, size, prefault and seal the arena segment.
 * @s: out.
 * @size: bytes wanted (> 0); rounded up to the backing page size.
 * @hugedir: a hugetlbfs mount to create the file in, or NULL (memfd).
 * @mode: COFFER_HP_AUTO (hugepages if possible, else ordinary memory with a notice),
 *        COFFER_HP_ON (hugepages or fail), COFFER_HP_OFF (ordinary memory).
 * @err: out: on failure, one line saying what went wrong and what to do.
 * @errlen: size of @err.
 * Return: 0; -ENOMEM (cannot be backed), -EINVAL (bad dir), other -errno.
 */
int coffer__shm_create(struct coffer__shm *s, uint64_t size, const char *hugedir, int mode,
		       char *err, size_t errlen);

/** coffer__shm_destroy() - unmap and close. */
void coffer__shm_destroy(struct coffer__shm *s);

/**
 * coffer__mem_available() - bytes of ordinary memory this process can still get: the lower
 * of /proc/meminfo's MemAvailable and the cgroup (v2 memory.max or v1 limit_in_bytes)
 * headroom. Return: bytes, or UINT64_MAX when unknown.
 */
uint64_t coffer__mem_available(void);

/* The store's object index (runtime/proto.h, struct coffer_index_slot): ordinary shared
 * memory the store writes and clients map read-only. */
struct coffer__shm_index {
	int fd_ro;	/* a read-only descriptor of it, passed to every client */
	void *base;	/* the store's writable mapping */
	uint64_t bytes; /* slots * sizeof(struct coffer_index_slot) */
	uint32_t slots; /* power of two */
	uint64_t seed;	/* random; announced in HELLO_REPLY */
	/* The access map (runtime/proto.h, "Access map"): one bit per slot, which
	 * clients map writable; sealed against shrinking and growing, so no client can make
	 * the store's mapping fault. */
	int fd_access;
	uint8_t *access;
	uint64_t access_bytes; /* coffer__access_bytes(slots) rounded up to a page */
};

/**
 * coffer__shm_index_create() - create, size and prefault the object index for an arena of
 * @arena_bytes bytes: one slot per 4 KiB of arena rounded up to a power of two, within
 * 1024..2^26 slots (64 bytes each, about 1.6-3.1% of the arena).
 * @ix: out.
 * @arena_bytes: the arena's size in bytes.
 * @err: out: on failure, one line saying what went wrong.
 * @errlen: size of @err.
 * Also creates the index's access map (one bit per slot), sealed against shrinking and
 * growing before any client can get it.
 * Return: 0; -ENOMEM; other -errno (memfd_create, ftruncate, fcntl(F_ADD_SEALS), mmap, or
 * /proc/self/fd not mounted: the read-only descriptor is opened through it).
 */
int coffer__shm_index_create(struct coffer__shm_index *ix, uint64_t arena_bytes, char *err,
			     size_t errlen);

/** coffer__shm_index_destroy() - unmap and close (a zeroed @ix is fine). */
void coffer__shm_index_destroy(struct coffer__shm_index *ix);

#endif /* COFFER_TOOLS_SHM_H */
