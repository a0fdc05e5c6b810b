/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tools/arena.c - the store's arena allocator (TLSF with out-of-band block records).
 *
 * Design note.
 * - Invariants: the blocks tile [0, capacity) in address order through prev_phys/next_phys;
 *   no two neighbouring blocks are both free (free() coalesces at once); every free block is
 *   on exactly one list, the one of mapping_insert(size); bit sl of sl_bitmap[fl] is set iff
 *   heads[fl][sl] != NULL, and bit fl of fl_bitmap iff sl_bitmap[fl] != 0; used is the sum of
 *   the sizes of allocated blocks, so used <= capacity always holds.
 * - Classes: sizes are counted in 64-byte units u. u < 16 is class (0, u); otherwise with
 *   k = floor(log2 u), class (k - 3, the 4 bits of u below its top bit). A request is rounded
 *   UP to its class boundary before the search, so any block on a found list fits (good fit:
 *   waste per request < 1/16 of it, the fragmentation bound TLSF is known for). That search
 *   skips the request's own class, whose blocks may be smaller than it; when it found nothing,
 *   a linear scan of at most SCAN_MAX (64) blocks of the own class list takes the first that
 *   holds the request, before the quick-list flush (cheaper, and it keeps the quick lists)
 *   and again after it (TLSF's search rounds up to stay O(1), Masmano et al.; the scan is a
 *   constant-bounded fallback on the failure path only), so -ENOMEM, which the object table
 *   answers by evicting, is not returned while the first 64 blocks of that list hold a fit.
 *   The hot paths (a quick-list hit, a good-fit hit) do not reach it.
 * - Large objects (>= 2 MiB) are placed at 2 MiB multiples (hugepage-aligned when the arena
 *   is hugepage-backed): the search asks for size + 2 MiB - 64 and trims the front; when that
 *   fails a bounded scan (SCAN_MAX, 64 blocks, from the request's rounded class up) looks
 *   for a smaller block that still fits aligned, then, as for small requests, the own class
 *   list is scanned (64 more, its own budget: its too-small blocks must not use up the
 *   first scan's), so an object as large as the whole arena can be placed in an empty one.
 * - Metadata is private heap memory of the store; clients can scribble over the arena's
 *   bytes without affecting it.
 * - Deferred coalescing of small blocks (quick lists). An immediate-coalescing free of a
 *   random block touches the block, both address neighbours and the free-list neighbours of
 *   what it merges with: several dependent cache misses on records nobody else needs. The
 *   store's common pattern is free-one, allocate-one of the same size (an object replaced
 *   by its next version, or evicted for a new one), so a free of a block of at most
 *   COFFER_ARENA_QUICK_MAX bytes pushes its record onto a LIFO list of its exact size
 *   (class c = size / 64 - 1) and marks it quick, writing only that record and the arena
 *   header; an allocation of that size pops the list first. A quick block keeps free ==
 *   false, so to TLSF it looks allocated: no coalescing reaches it, and the invariants
 *   above hold unchanged for the TLSF blocks (dlmalloc keeps a fastbin chunk's in-use bit
 *   set for the same reason). Flush (coalesce all, as dlmalloc's malloc_consolidate()):
 *   (1) when an allocation finds no block otherwise, before it fails, so -ENOMEM - which
 *   the object table answers by evicting - is only returned when the coalesced arena has
 *   no fit either; (2) when a free finds the lists at COFFER_ARENA_QUICK_COUNT blocks or
 *   would take them past qlimit = capacity / 16 bytes. (2) bounds what deferral costs:
 *   the bytes held back from TLSF's search (1/16, the same bound as TLSF's class rounding
 *   waste) and the length of one flush (4096 coalescing frees, about a millisecond with
 *   every record a cache miss); amortised it is the coalescing the frees skipped.
 *   Size bound 64 KiB: it covers the fio engine's 4 KiB blocks and the benches' small
 *   objects with room for other small sizes, in 1024 exact classes (8 KiB of list heads).
 *   Larger blocks come far fewer per second (each carries a client's 64 KiB+ copy), so
 *   their coalescing misses matter less, and large requests need them coalesced.
 *   used and nalloc count only allocated blocks; quick blocks are counted by nquick and
 *   qbytes, so capacity - used stays the free bytes a flush would coalesce.
 * - Single-threaded: no atomics, no locks.
 * Source: M. Masmano et al., "TLSF: a new dynamic memory allocator for real-time systems",
 * ECRTS 2004; Plasma used dlmalloc over its mmap'd region (metadata in-band), which we avoid.
 * Quick lists: D. Lea, dlmalloc 2.8 (fastbins, malloc_consolidate()); glibc's tcache
 * (exact-size LIFO bins, per-bin bounds: malloc/malloc.c, tcache_put()/tcache_get()).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tools/arena.h"

#define SPARE_MAX 4096 /* block records cached for reuse */
#define SCAN_MAX  64   /* free blocks a fallback scan (own class, aligned) examines */

static inline int fls64(uint64_t x)
{
	return 63 - __builtin_clzll(x);
}

static void mapping_insert(uint64_t size, int *fl, int *sl)
{
	uint64_t u = size / COFFER_ARENA_ALIGN;
	int k;

	if (u < COFFER_ARENA_SL_COUNT) {
		*fl = 0;
		*sl = (int)u;
		return;
	}
	k = fls64(u);
	*fl = k - (COFFER_ARENA_SL_LOG2 - 1);
	*sl = (int)((u >> (k - COFFER_ARENA_SL_LOG2)) & (COFFER_ARENA_SL_COUNT - 1));
}

/* Round size up to the first size whose class contains only blocks >= size. */
static uint64_t round_to_class(uint64_t size)
{
	uint64_t u = size / COFFER_ARENA_ALIGN;
	int k;

	if (u < COFFER_ARENA_SL_COUNT)
		return size;
	k = fls64(u);
	u += (1ull << (k - COFFER_ARENA_SL_LOG2)) - 1;
	u &= ~((1ull << (k - COFFER_ARENA_SL_LOG2)) - 1);
	return u * COFFER_ARENA_ALIGN;
}

static struct coffer__ablk *blk_new(struct coffer__arena *a)
{
	struct coffer__ablk *b = a->spare;

	if (b != NULL) {
		a->spare = b->next_free;
		a->nspare--;
		memset(b, 0, sizeof(*b));
		return b;
	}
	return calloc(1, sizeof(*b));
}

static void blk_put(struct coffer__arena *a, struct coffer__ablk *b)
{
	if (a->nspare >= SPARE_MAX) {
		free(b);
		return;
	}
	b->next_free = a->spare;
	a->spare = b;
	a->nspare++;
}

static void list_insert(struct coffer__arena *a, struct coffer__ablk *b)
{
	int fl, sl;

	mapping_insert(b->size, &fl, &sl);
	b->free = true;
	b->prev_free = NULL;
	b->next_free = a->heads[fl][sl];
	if (b->next_free != NULL)
		b->next_free->prev_free = b;
	a->heads[fl][sl] = b;
	a->sl_bitmap[fl] |= 1u << sl;
	a->fl_bitmap |= 1ull << fl;
	a->nfree++;
}

static void list_remove(struct coffer__arena *a, struct coffer__ablk *b)
{
	int fl, sl;

	mapping_insert(b->size, &fl, &sl);
	if (b->prev_free != NULL)
		b->prev_free->next_free = b->next_free;
	else
		a->heads[fl][sl] = b->next_free;
	if (b->next_free != NULL)
		b->next_free->prev_free = b->prev_free;
	if (a->heads[fl][sl] == NULL) {
		a->sl_bitmap[fl] &= ~(1u << sl);
		if (a->sl_bitmap[fl] == 0)
			a->fl_bitmap &= ~(1ull << fl);
	}
	b->free = false;
	b->prev_free = b->next_free = NULL;
	a->nfree--;
}

/* First non-empty class at or above (fl, sl); returns false when none. */
static bool find_class(const struct coffer__arena *a, int *fl, int *sl)
{
	uint32_t slmap;
	uint64_t flmap;

	if (*fl >= COFFER_ARENA_FL_COUNT)
		return false;
	slmap = a->sl_bitmap[*fl] & (~0u << *sl);
	if (slmap == 0) {
		if (*fl + 1 >= COFFER_ARENA_FL_COUNT)
			return false;
		flmap = a->fl_bitmap & (~0ull << (*fl + 1));
		if (flmap == 0)
			return false;
		*fl = __builtin_ctzll(flmap);
		slmap = a->sl_bitmap[*fl];
	}
	*sl = __builtin_ctz(slmap);
	return true;
}

int coffer__arena_init(struct coffer__arena *a, uint64_t capacity)
{
	struct coffer__ablk *b;

	memset(a, 0, sizeof(*a));
	capacity &= ~(uint64_t)(COFFER_ARENA_ALIGN - 1);
	if (capacity < COFFER_ARENA_ALIGN || capacity > (1ull << 52))
		return -EINVAL;
	b = blk_new(a);
	if (b == NULL)
		return -ENOMEM;
	a->capacity = capacity;
	a->qlimit = capacity / 16;
	b->off = 0;
	b->size = capacity;
	a->first = b;
	list_insert(a, b);
	return 0;
}

void coffer__arena_fini(struct coffer__arena *a)
{
	struct coffer__ablk *b, *n;

	/* The record at offset 0 is never replaced (see a->first), so the whole chain,
	 * allocated blocks included, is reachable from it. */
	for (b = a->first; b != NULL; b = n) {
		n = b->next_phys;
		free(b);
	}
	for (b = a->spare; b != NULL; b = n) {
		n = b->next_free;
		free(b);
	}
	memset(a, 0, sizeof(*a));
}

/* Split b so that it keeps @size bytes; the tail becomes a free block. */
static int split_tail(struct coffer__arena *a, struct coffer__ablk *b, uint64_t size)
{
	struct coffer__ablk *t;

	if (b->size - size < COFFER_ARENA_ALIGN)
		return 0;
	t = blk_new(a);
	if (t == NULL)
		return -ENOMEM;
	t->off = b->off + size;
	t->size = b->size - size;
	t->prev_phys = b;
	t->next_phys = b->next_phys;
	if (t->next_phys != NULL)
		t->next_phys->prev_phys = t;
	b->next_phys = t;
	b->size = size;
	/* b's old next neighbour was allocated (invariant), so t needs no coalescing. */
	list_insert(a, t);
	return 0;
}

/* True when free block @b can hold @size at an @align-aligned offset. */
static inline bool fits_aligned(const struct coffer__ablk *b, uint64_t size, uint64_t align)
{
	uint64_t start = (b->off + align - 1) & ~(align - 1);

	return start - b->off <= b->size && b->size - (start - b->off) >= size;
}

/* Bounded scan for a block that can hold @size at an @align-aligned offset, from @size's
 * rounded class up (every block there holds @size unaligned; the own class, where most may
 * not, is scan_own_class()'s, with a budget of its own: many too-small blocks there must not
 * use up this scan's budget before it reaches the classes above, rel-adv21). */
static struct coffer__ablk *scan_aligned(struct coffer__arena *a, uint64_t size, uint64_t align)
{
	int fl, sl, budget = SCAN_MAX;

	mapping_insert(round_to_class(size), &fl, &sl);
	while (budget > 0 && find_class(a, &fl, &sl)) {
		struct coffer__ablk *b;

		for (b = a->heads[fl][sl]; b != NULL && budget > 0; b = b->next_free, budget--)
			if (fits_aligned(b, size, align))
				return b;
		if (++sl >= (int)COFFER_ARENA_SL_COUNT) {
			sl = 0;
			fl++;
		}
	}
	return NULL;
}

int coffer__arena_reserve(struct coffer__arena *a)
{
	while (a->nspare < 2) {
		struct coffer__ablk *r = calloc(1, sizeof(*r));

		if (r == NULL)
			return -ENOMEM;
		r->next_free = a->spare;
		a->spare = r;
		a->nspare++;
	}
	return 0;
}

/* A TLSF block that can hold @size (64-byte multiple) at an @align-aligned offset, or
 * NULL. */
static struct coffer__ablk *find_block(struct coffer__arena *a, uint64_t size, uint64_t align)
{
	uint64_t need = size + (align - COFFER_ARENA_ALIGN);
	struct coffer__ablk *b = NULL;
	int fl, sl;

	if (need <= a->capacity) {
		mapping_insert(round_to_class(need), &fl, &sl);
		if (find_class(a, &fl, &sl))
			b = a->heads[fl][sl];
	}
	if (b == NULL && align > COFFER_ARENA_ALIGN && (b = scan_aligned(a, size, align)) != NULL)
		a->aligned_scan_fits++;
	return b;
}

/* Fallback after the good-fit search and the aligned scan (@align > 64) found nothing,
 * before and after the quick-list flush: the first of at most SCAN_MAX blocks on @size's own class
 * list that holds @size (64-byte multiple) at an @align-aligned offset, or NULL. The searches
 * before skip that list because some of its blocks are smaller than @size; without this scan a
 * request whose only fit is there fails -ENOMEM and its caller evicts for nothing. */
static struct coffer__ablk *scan_own_class(struct coffer__arena *a, uint64_t size, uint64_t align)
{
	struct coffer__ablk *b;
	int fl, sl, budget = SCAN_MAX;

	mapping_insert(size, &fl, &sl);
	if (fl >= COFFER_ARENA_FL_COUNT)
		return NULL;
	for (b = a->heads[fl][sl]; b != NULL && budget > 0; b = b->next_free, budget--)
		if (fits_aligned(b, size, align))
			return b;
	return NULL;
}

static inline unsigned int quick_class(uint64_t size)
{
	return (unsigned int)(size / COFFER_ARENA_ALIGN) - 1;
}

/* Take the most recently freed block off quick list @c (NULL when empty); used and nalloc
 * are the caller's. */
static struct coffer__ablk *quick_pop(struct coffer__arena *a, unsigned int c)
{
	struct coffer__ablk *b = a->quick[c];

	if (b == NULL)
		return NULL;
	a->quick[c] = b->next_free;
	if (b->next_free == NULL)
		a->qmap[c / 64] &= ~(1ull << (c % 64));
	b->next_free = NULL;
	b->quick = false;
	a->nquick--;
	a->qbytes -= b->size;
	return b;
}

int coffer__arena_alloc(struct coffer__arena *a, uint64_t size, struct coffer__ablk **out)
{
	uint64_t align = COFFER_ARENA_ALIGN;
	struct coffer__ablk *b;

	if (size == 0)
		return -EINVAL;
	if (size > a->capacity)
		return -E2BIG;
	size = (size + COFFER_ARENA_ALIGN - 1) & ~(uint64_t)(COFFER_ARENA_ALIGN - 1);
	if (size <= COFFER_ARENA_QUICK_MAX && (b = quick_pop(a, quick_class(size))) != NULL) {
		a->used += size;
		a->nalloc++;
		*out = b;
		return 0;
	}
	if (size >= COFFER_ARENA_LARGE)
		align = COFFER_ARENA_LARGE;
	b = find_block(a, size, align);
	/* The own class before the flush: its scan is bounded (SCAN_MAX) where a flush is up
	 * to COFFER_ARENA_QUICK_COUNT coalescing frees, and a fit it finds keeps the quick
	 * lists for the requests of their sizes (test_own_class_before_flush). After a flush,
	 * once more: coalescing can make a fit there too. */
	if (b == NULL && (b = scan_own_class(a, size, align)) != NULL)
		a->own_class_fits++;
	if (b == NULL && a->nquick > 0) {
		coffer__arena_flush(a);
		b = find_block(a, size, align);
		if (b == NULL && (b = scan_own_class(a, size, align)) != NULL)
			a->own_class_fits++;
	}
	if (b == NULL)
		return -ENOMEM;
	/* Reserve both possible record splits before touching the lists, so a metadata
	 * allocation failure leaves no trace. */
	if (coffer__arena_reserve(a) != 0)
		return -ENOMEM;
	list_remove(a, b);
	if (align > COFFER_ARENA_ALIGN && (b->off & (align - 1)) != 0) {
		uint64_t gap = ((b->off + align - 1) & ~(align - 1)) - b->off;
		struct coffer__ablk *f = blk_new(a);

		/* f keeps the front gap (free); b moves up to the aligned offset. f's
		 * previous neighbour is allocated (invariant), so f needs no coalescing. */
		f->off = b->off;
		f->size = gap;
		f->prev_phys = b->prev_phys;
		f->next_phys = b;
		if (f->prev_phys != NULL)
			f->prev_phys->next_phys = f;
		b->prev_phys = f;
		b->off += gap;
		b->size -= gap;
		list_insert(a, f);
	}
	(void)split_tail(a, b, size); /* cannot fail: a record is reserved */
	b->free = false;
	a->used += b->size;
	a->nalloc++;
	*out = b;
	return 0;
}

/* Immediate coalescing free of @b (allocated or quick, already out of used/nalloc). */
static void coalesce(struct coffer__arena *a, struct coffer__ablk *b)
{
	struct coffer__ablk *n;

	if (b->prev_phys != NULL && b->prev_phys->free) {
		struct coffer__ablk *p = b->prev_phys;

		list_remove(a, p);
		p->size += b->size;
		p->next_phys = b->next_phys;
		if (p->next_phys != NULL)
			p->next_phys->prev_phys = p;
		blk_put(a, b);
		b = p;
	}
	n = b->next_phys;
	if (n != NULL && n->free) {
		list_remove(a, n);
		b->size += n->size;
		b->next_phys = n->next_phys;
		if (b->next_phys != NULL)
			b->next_phys->prev_phys = b;
		blk_put(a, n);
	}
	list_insert(a, b);
}

void coffer__arena_flush(struct coffer__arena *a)
{
	unsigned int w;

	if (a->nquick == 0)
		return;
	a->flushes++;
	for (w = 0; w < COFFER_ARENA_QUICK_CLASSES / 64; w++) {
		while (a->qmap[w] != 0) { /* quick_pop() clears a class's bit with its last */
			unsigned int c = w * 64 + (unsigned int)__builtin_ctzll(a->qmap[w]);
			struct coffer__ablk *b;

			while ((b = quick_pop(a, c)) != NULL)
				coalesce(a, b);
		}
	}
}

void coffer__arena_free(struct coffer__arena *a, struct coffer__ablk *b)
{
	uint64_t size = b->size;

	a->used -= size;
	a->nalloc--;
	if (size <= COFFER_ARENA_QUICK_MAX) {
		unsigned int c = quick_class(size);

		if (a->nquick >= COFFER_ARENA_QUICK_COUNT || a->qbytes + size > a->qlimit)
			coffer__arena_flush(a);
		if (size <= a->qlimit) {
			b->quick = true;
			b->next_free = a->quick[c];
			a->quick[c] = b;
			a->qmap[c / 64] |= 1ull << (c % 64);
			a->nquick++;
			a->qbytes += size;
			return;
		}
	}
	coalesce(a, b);
}

uint64_t coffer__arena_largest_free(struct coffer__arena *a)
{
	const struct coffer__ablk *b;
	uint64_t best = 0;
	int fl;

	coffer__arena_flush(a);
	if (a->fl_bitmap == 0)
		return 0;
	fl = fls64(a->fl_bitmap);
	for (b = a->heads[fl][fls64(a->sl_bitmap[fl])]; b != NULL; b = b->next_free)
		if (b->size > best)
			best = b->size;
	return best;
}

int coffer__arena_check(const struct coffer__arena *a)
{
	const struct coffer__ablk *b, *p;
	uint64_t off = 0, used = 0, nalloc = 0, nfree = 0, nquick = 0, qbytes = 0, qmarked = 0;
	unsigned int c;
	int fl, sl;

	for (c = 0; c < COFFER_ARENA_QUICK_CLASSES; c++) {
		if (((a->qmap[c / 64] >> (c % 64)) & 1) != (a->quick[c] != NULL))
			return -EFAULT;
		for (p = a->quick[c]; p != NULL; p = p->next_free) {
			if (!p->quick || p->free ||
			    p->size != (uint64_t)(c + 1) * COFFER_ARENA_ALIGN)
				return -EFAULT;
			if (++nquick > a->nquick) /* also ends a cycle */
				return -EFAULT;
			qbytes += p->size;
		}
	}
	if (nquick != a->nquick || qbytes != a->qbytes || nquick > COFFER_ARENA_QUICK_COUNT ||
	    qbytes > a->qlimit || a->qlimit != a->capacity / 16)
		return -EFAULT;

	for (fl = 0; fl < COFFER_ARENA_FL_COUNT; fl++) {
		if (((a->fl_bitmap >> fl) & 1) != (a->sl_bitmap[fl] != 0))
			return -EFAULT;
		for (sl = 0; sl < (int)COFFER_ARENA_SL_COUNT; sl++) {
			if (((a->sl_bitmap[fl] >> sl) & 1) != (a->heads[fl][sl] != NULL))
				return -EFAULT;
			for (p = a->heads[fl][sl]; p != NULL; p = p->next_free) {
				int f2, s2;

				mapping_insert(p->size, &f2, &s2);
				if (!p->free || f2 != fl || s2 != sl)
					return -EFAULT;
			}
		}
	}
	for (b = a->first, p = NULL; b != NULL; p = b, b = b->next_phys) {
		if (b->off != off || b->size == 0 || b->size % COFFER_ARENA_ALIGN != 0)
			return -EFAULT;
		if (b->prev_phys != p)
			return -EFAULT;
		if (p != NULL && p->free && b->free)
			return -EFAULT;
		if (b->free && b->quick)
			return -EFAULT;
		if (b->free)
			nfree++;
		else if (b->quick)
			qmarked++;
		else {
			used += b->size;
			nalloc++;
		}
		off += b->size;
	}
	if (off != a->capacity || used != a->used || nalloc != a->nalloc || nfree != a->nfree ||
	    qmarked != nquick || used + qbytes > a->capacity)
		return -EFAULT;
	return 0;
}
