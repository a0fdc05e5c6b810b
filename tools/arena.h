/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tools/arena.h - coffer-store's arena allocator: hands out byte ranges (offsets) of the
 * shared-memory segment. Metadata lives in the store's private heap, never in the shared
 * arena (clients can write the arena; they must not be able to corrupt the allocator).
 *
 * Two-level segregated fit (TLSF, Masmano et al. 2004) with out-of-band block records:
 * O(1) allocate and free (bitmap search + constant-time coalescing through the
 * address-ordered neighbour links), exact byte accounting, good-fit bounded fragmentation.
 * Small blocks (<= COFFER_ARENA_QUICK_MAX) are freed with deferred coalescing: onto an
 * exact-size LIFO quick list, touching only their record, and reused from there first
 * (dlmalloc's fastbins, glibc's tcache); the lists are flushed into TLSF when an allocation
 * cannot be served otherwise and when they exceed a bound (see tools/arena.c).
 *
 * Context: single-threaded (the store's event loop); no locks.
 */
#ifndef COFFER_TOOLS_ARENA_H
#define COFFER_TOOLS_ARENA_H

#include <stdbool.h>
#include <stdint.h>

#define COFFER_ARENA_ALIGN    64u		   /* every block starts at k * 64 */
#define COFFER_ARENA_LARGE    (2u * 1024u * 1024u) /* objects >= this are 2 MiB aligned */
#define COFFER_ARENA_SL_LOG2  4			   /* 16 second-level classes per power of 2 */
#define COFFER_ARENA_SL_COUNT (1u << COFFER_ARENA_SL_LOG2)
#define COFFER_ARENA_FL_COUNT 56
/* Deferred coalescing: blocks of at most this many bytes go to a quick list when freed. */
#define COFFER_ARENA_QUICK_MAX	   (64u * 1024u)
#define COFFER_ARENA_QUICK_CLASSES (COFFER_ARENA_QUICK_MAX / COFFER_ARENA_ALIGN) /* 1024 */
/* Bound on the quick lists: at most this many blocks, and at most capacity / 16 bytes. */
#define COFFER_ARENA_QUICK_COUNT 4096u

/* One block: a maximal run of bytes that is either free or one allocation. */
struct coffer__ablk {
	uint64_t off;  /* byte offset in the arena, multiple of COFFER_ARENA_ALIGN */
	uint64_t size; /* bytes, multiple of COFFER_ARENA_ALIGN, > 0 */
	struct coffer__ablk *prev_phys, *next_phys; /* address-ordered neighbours */
	struct coffer__ablk *prev_free, *next_free; /* class free list (free blocks only);
						     * next_free also links quick lists */
	bool free;  /* on a TLSF free list (coalesced with its neighbours) */
	bool quick; /* on a quick list: freed, not yet coalesced; free is false, so
		     * TLSF treats it as allocated */
};

struct coffer__arena {
	uint64_t capacity;	    /* bytes managed */
	uint64_t used;		    /* bytes in allocated blocks (sum of their sizes); quick-listed
				     * blocks are free, not used */
	uint64_t nalloc;	    /* allocated blocks */
	uint64_t nfree;		    /* free blocks on the TLSF lists */
	uint64_t nquick;	    /* blocks on the quick lists */
	uint64_t qbytes;	    /* their bytes */
	uint64_t qlimit;	    /* bound on qbytes: capacity / 16 */
	uint64_t flushes;	    /* quick-list flushes so far (coffer__arena_flush()) */
	uint64_t aligned_scan_fits; /* allocations the bounded aligned scan placed */
	uint64_t own_class_fits;    /* allocations the own-class fallback scan placed */
	uint64_t qmap[COFFER_ARENA_QUICK_CLASSES / 64];		/* bit c: quick[c] != NULL */
	struct coffer__ablk *quick[COFFER_ARENA_QUICK_CLASSES]; /* class c: blocks of
								 * (c + 1) * 64 bytes */
	uint64_t fl_bitmap; /* bit f set when some sl list of fl f is non-empty */
	uint32_t sl_bitmap[COFFER_ARENA_FL_COUNT];
	struct coffer__ablk *heads[COFFER_ARENA_FL_COUNT][COFFER_ARENA_SL_COUNT];
	struct coffer__ablk *first; /* the block at offset 0: its record is never replaced,
				     * because coalescing keeps the lower block's record and
				     * offset 0 never needs an alignment split */
	struct coffer__ablk *spare; /* cache of unused block records (singly linked) */
	uint64_t nspare;
};

/**
 * coffer__arena_init() - manage [0, capacity) bytes.
 * @a: arena to initialise.
 * @capacity: bytes; rounded DOWN to a multiple of COFFER_ARENA_ALIGN; must be >= 64.
 * Return: 0, -EINVAL (capacity too small or too large), -ENOMEM.
 */
int coffer__arena_init(struct coffer__arena *a, uint64_t capacity);

/** coffer__arena_fini() - free all metadata (allocated blocks are forgotten). */
void coffer__arena_fini(struct coffer__arena *a);

/**
 * coffer__arena_alloc() - allocate @size bytes.
 * @a: the arena.
 * @size: bytes, > 0. Rounded up to 64; sizes >= COFFER_ARENA_LARGE get a 2 MiB-aligned
 *        offset.
 * @out: out: the block (its off and size are the allocation).
 *
 * A size <= COFFER_ARENA_QUICK_MAX is served from its quick list first (O(1), the most
 * recently freed block of exactly that size). When neither that nor the TLSF search finds
 * a block, the quick lists are flushed (coalesced) and the search is repeated, then the
 * request's own class list (whose blocks the rounded-up search skips) is scanned, at most
 * 64 blocks (a large size: for an aligned fit, after at most 64 blocks of the classes above
 * it, which hold it unaligned); so -ENOMEM means that no block fits even with every free byte
 * coalesced (within that scan's bound): a caller may evict on it. Return: 0; -EINVAL (size 0);
 * -E2BIG (larger than the capacity: can never fit); -ENOMEM (no free block fits now, or metadata
 * allocation failed).
 */
int coffer__arena_alloc(struct coffer__arena *a, uint64_t size, struct coffer__ablk **out);

/**
 * coffer__arena_reserve() - make sure the block records that one coffer__arena_alloc() may
 * need (two splits) are cached, so that its -ENOMEM can then only mean "no free block fits"
 * (a caller that evicts to make room must not evict for a failed metadata allocation).
 * Freeing blocks never takes records from the cache, so it stays enough until an allocation.
 * @a: the arena.
 * Return: 0; -ENOMEM (a record could not be allocated; nothing changed that matters).
 */
int coffer__arena_reserve(struct coffer__arena *a);

/**
 * coffer__arena_free() - free a block returned by coffer__arena_alloc(). O(1) amortised.
 * A block <= COFFER_ARENA_QUICK_MAX is pushed onto its quick list (only its record is
 * written); when the lists already hold COFFER_ARENA_QUICK_COUNT blocks or pushing would
 * exceed a->qlimit bytes they are flushed first (O(blocks flushed)). A larger block is
 * coalesced with its free neighbours at once. used and nalloc drop either way.
 */
void coffer__arena_free(struct coffer__arena *a, struct coffer__ablk *b);

/**
 * coffer__arena_flush() - coalesce every quick-listed block into the TLSF lists, as an
 * immediate free would have (dlmalloc's malloc_consolidate()). O(blocks flushed); used and
 * nalloc do not change. After it, nfree and the TLSF lists describe every free byte.
 */
void coffer__arena_flush(struct coffer__arena *a);

/**
 * coffer__arena_largest_free() - bytes of the largest free block, coalesced truth: flushes
 * the quick lists first (so it is not const), then the top non-empty class from the
 * bitmaps and a scan of that one list.
 */
uint64_t coffer__arena_largest_free(struct coffer__arena *a);

/**
 * coffer__arena_check() - walk every block and verify the invariants (tests/debug):
 * blocks tile [0, capacity) in order, no two neighbouring free blocks, sums match used and
 * capacity - used, every free block is on the list of its class and the bitmaps agree;
 * every quick-listed block is marked quick and not free, has its list's exact size, the
 * quick bitmap agrees, the counts and bytes match nquick and qbytes, which respect the
 * bounds, and every block marked quick in the address walk is on a list.
 * Return: 0, or -EFAULT naming nothing (the caller asserts on it). O(n).
 */
int coffer__arena_check(const struct coffer__arena *a);

#endif /* COFFER_TOOLS_ARENA_H */
