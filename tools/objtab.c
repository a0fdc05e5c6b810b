/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tools/objtab.c - the store's object table (see objtab.h).
 *
 * Design note.
 * - An entry per ObjectID holds: cur (the object gets see: CREATED or SEALED), shadow (an
 *   unsealed replacement created with COFFER_CREATE_REPLACE while cur is SEALED), old (a
 *   list of replaced/deleted objects still referenced), and the waiting gets for that ID.
 *   An entry lives while any of the four is non-empty.
 * - Every object has refs = sum of its holders' counts. A holder record is keyed by (owner,
 *   object), so a client can release only what it holds. The creator holds one reference
 *   from create until it releases it (SEAL_RELEASE or RELEASE).
 * - Evictable == (cur of its entry) && SEALED && refs == 0; exactly those objects are on the
 *   LRU list (head = least recently used), and evictable_bytes is the sum of their block
 *   sizes. An OLD object is freed at its last release; an OLD or SHADOW object is never
 *   visible to gets.
 * - Waiting gets: on their entry's list and their owner's list, and on a binary min-heap by
 *   deadline when they have a finite timeout. Completion (seal) or expiry removes all three.
 * - Single-threaded: no locks, no atomics. Never blocks; no unbounded work per request
 *   except waking the waiters of one ID (each woken waiter is one reply).
 * Source: Plasma's object table and eviction policy (plasma/store.cc, eviction_policy.cc),
 * made consistent (per-client references, replace-on-seal, deferred delete).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <coffer/hash.h>

#include "runtime/proto_util.h"
#include "tools/objtab.h"

enum { ST_CREATED = 1, ST_SEALED = 2 };
enum { AT_CUR = 1, AT_SHADOW = 2, AT_OLD = 3 };

struct entry;

struct obj {
	struct entry *e;
	int state, where;
	uint64_t size, off;
	struct coffer__ablk *blk; /* NULL for 0-byte objects */
	uint64_t refs;
	struct coffer__owner *creator; /* while CREATED */
	struct coffer__dl lru;	       /* ot->lru while evictable */
	struct coffer__dl olink;       /* entry->old while AT_OLD */
	struct coffer__dl clink;       /* creator->created while CREATED */
	struct coffer__dl holders;     /* struct holder */
	uint32_t islot;		       /* its index slot + 1 while published, else 0 */
	bool used;		       /* CLOCK's referenced bit for the store's own uses */
};

struct entry {
	struct entry *hnext;
	uint64_t hash;
	uint8_t oid[COFFER_OID_SIZE];
	struct obj *cur, *shadow;
	struct coffer__dl old;
	struct coffer__dl waiters;
};

struct holder {
	struct holder *hnext;
	uint64_t hash;
	struct coffer__owner *owner;
	struct obj *obj;
	uint64_t count;
	struct coffer__dl olink; /* owner->holds */
	struct coffer__dl blink; /* obj->holders */
};

struct waiter {
	struct coffer__owner *owner;
	struct entry *e;
	uint64_t tag;
	uint64_t deadline; /* UINT64_MAX: forever */
	uint32_t route;
	size_t heap_idx; /* SIZE_MAX when not on the heap */
	struct coffer__dl elink, olink;
};

/* An arena block reserved by one client (RESERVE): it writes the bytes, then PUT makes the
 * block a sealed object (one request instead of CREATE and SEAL), or UNRESERVE gives it back.
 * Keyed by the block's offset (unique among allocated blocks). */
struct resv {
	struct resv *hnext;
	uint64_t hash;
	struct coffer__ablk *blk;
	uint64_t size; /* bytes asked for: a PUT may seal at most this many */
	struct coffer__owner *owner;
	struct coffer__dl olink; /* owner->reserved */
};

/* A free list of one record type (struct entry, obj or holder): the hot paths (a get and
 * its release, a create and the seal that frees the object it replaces) reuse the record
 * freed last, still in cache, instead of a calloc/free pair each. At most POOL_MAX records
 * stay cached per type; the rest go back to malloc. Under AddressSanitizer nothing is
 * cached, so a use after free is still reported. */
#if defined(__SANITIZE_ADDRESS__)
#define POOL_MAX 0u
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define POOL_MAX 0u
#endif
#endif
#ifndef POOL_MAX
#define POOL_MAX 1024u
#endif

struct pool {
	void *head; /* the first word of a free record links to the next */
	size_t n;
};

struct coffer__ot {
	struct coffer__arena arena;
	uint32_t segment;
	uint64_t seed[2];
	struct entry **ebuckets;
	size_t emask, nentries;
	struct holder **hbuckets;
	size_t hmask, nholders;
	struct coffer__dl lru;
	uint64_t evictable_bytes;
	size_t nlru; /* objects on the LRU list */
	struct waiter **heap;
	size_t nheap, heapcap, nwaiters;
	uint64_t ncreated, nsealed, evictions, evicted_bytes;
	uint64_t max_objects; /* bounds the store's private memory: max(capacity / 64, 65536) */
	struct resv **rbuckets;
	size_t rmask, nresv;
	uint64_t resv_bytes; /* arena bytes of the reserved blocks */
	struct pool entries, objs, holders;
	struct coffer_index_slot *index; /* NULL: no index */
	uint32_t index_mask;
	uint8_t *access; /* the index's access map (one bit per slot, clients set), or NULL */
	uint64_t index_seed, index_live, index_unplaced;
	uint64_t second_chances; /* objects eviction passed over: used or read since last */
	coffer__ot_deliver_fn deliver;
	void *ctx;
};

uint64_t coffer__now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* ---- hashing: seeded so that clients cannot aim ObjectIDs at one bucket; the bit mixer
 * is the handle hash's (coffer_hash_mix64) ---- */

/* A zeroed record of @size bytes from @p, or NULL. */
static void *pool_get(struct pool *p, size_t size)
{
	void *x = p->head;

	if (x == NULL)
		return calloc(1, size);
	p->head = *(void **)x;
	p->n--;
	memset(x, 0, size);
	return x;
}

/* Make sure the next pool_get() of @p cannot fail: a request that may evict allocates what
 * it needs before it evicts anything, so that it never evicts and then fails. 0 or -ENOMEM
 * (nothing changed). The record kept stays cached even where POOL_MAX is 0. */
static int pool_reserve(struct pool *p, size_t size)
{
	void *x;

	if (p->head != NULL)
		return 0;
	x = calloc(1, size);
	if (x == NULL)
		return -ENOMEM;
	*(void **)x = NULL;
	p->head = x;
	p->n = 1;
	return 0;
}

static void pool_put(struct pool *p, void *x)
{
	if (p->n + 1 > POOL_MAX) { /* not ">= POOL_MAX": always true when 0 (-Wtype-limits) */
		free(x);
		return;
	}
	*(void **)x = p->head;
	p->head = x;
	p->n++;
}

static void pool_drain(struct pool *p)
{
	while (p->head != NULL) {
		void *x = p->head;

		p->head = *(void **)x;
		free(x);
	}
	p->n = 0;
}

static uint64_t oid_hash(const struct coffer__ot *ot, const uint8_t *oid)
{
	uint64_t a, b;
	uint32_t c;

	memcpy(&a, oid, 8);
	memcpy(&b, oid + 8, 8);
	memcpy(&c, oid + 16, 4);
	return coffer_hash_mix64(coffer_hash_mix64(a ^ ot->seed[0]) ^ b) ^
	       coffer_hash_mix64(c ^ ot->seed[1]);
}

static uint64_t holder_hash(const struct coffer__ot *ot, const void *owner, const void *obj)
{
	return coffer_hash_mix64((uint64_t)(uintptr_t)owner ^ ot->seed[0]) ^
	       coffer_hash_mix64((uint64_t)(uintptr_t)obj);
}

static int grow(void ***buckets, size_t *mask, size_t n, size_t link_off, size_t hash_off)
{
	size_t newmask, i;
	void **nb;

	if (n <= *mask + 1)
		return 0;
	newmask = (*mask << 1) | 1;
	nb = calloc(newmask + 1, sizeof(*nb));
	if (nb == NULL)
		return -ENOMEM; /* keep the old table: longer chains, still correct */
	for (i = 0; i <= *mask; i++) {
		void *p = (*buckets)[i], *next;

		for (; p != NULL; p = next) {
			uint64_t h = *(uint64_t *)((char *)p + hash_off);

			next = *(void **)((char *)p + link_off);
			*(void **)((char *)p + link_off) = nb[h & newmask];
			nb[h & newmask] = p;
		}
	}
	free(*buckets);
	*buckets = nb;
	*mask = newmask;
	return 0;
}

/* The entry of @oid, whose oid_hash() is @h, or NULL. */
static struct entry *entry_find(const struct coffer__ot *ot, const uint8_t *oid, uint64_t h)
{
	struct entry *e;

	for (e = ot->ebuckets[h & ot->emask]; e != NULL; e = e->hnext)
		if (e->hash == h && memcmp(e->oid, oid, COFFER_OID_SIZE) == 0)
			return e;
	return NULL;
}

static struct entry *entry_get(struct coffer__ot *ot, const uint8_t *oid, uint64_t h)
{
	struct entry *e = entry_find(ot, oid, h);

	if (e != NULL)
		return e;
	e = pool_get(&ot->entries, sizeof(*e));
	if (e == NULL)
		return NULL;
	memcpy(e->oid, oid, COFFER_OID_SIZE);
	e->hash = h;
	coffer__dl_init(&e->old);
	coffer__dl_init(&e->waiters);
	e->hnext = ot->ebuckets[e->hash & ot->emask];
	ot->ebuckets[e->hash & ot->emask] = e;
	ot->nentries++;
	(void)grow((void ***)&ot->ebuckets, &ot->emask, ot->nentries, offsetof(struct entry, hnext),
		   offsetof(struct entry, hash));
	return e;
}

static void entry_maybe_free(struct coffer__ot *ot, struct entry *e)
{
	struct entry **pp;

	if (e->cur != NULL || e->shadow != NULL || !coffer__dl_empty(&e->old) ||
	    !coffer__dl_empty(&e->waiters))
		return;
	for (pp = &ot->ebuckets[e->hash & ot->emask]; *pp != e; pp = &(*pp)->hnext)
		;
	*pp = e->hnext;
	ot->nentries--;
	pool_put(&ot->entries, e);
}

static struct holder *holder_find(const struct coffer__ot *ot, struct coffer__owner *ow,
				  struct obj *o)
{
	uint64_t h = holder_hash(ot, ow, o);
	struct holder *x;

	for (x = ot->hbuckets[h & ot->hmask]; x != NULL; x = x->hnext)
		if (x->owner == ow && x->obj == o)
			return x;
	return NULL;
}

/* The holder of @ow on @o by a walk of @o's holder list, or NULL: for an unsealed object,
 * whose only possible holder is its creator (a get never returns one), this is one record
 * already in cache instead of a hash and a bucket walk. */
static struct holder *obj_holder(struct obj *o, struct coffer__owner *ow)
{
	struct coffer__dl *p;

	for (p = o->holders.next; p != &o->holders; p = p->next) {
		struct holder *h = COFFER_DL_ENTRY(p, struct holder, blink);

		if (h->owner == ow)
			return h;
	}
	return NULL;
}

/* ---- LRU ---- */

static void lru_update(struct coffer__ot *ot, struct obj *o)
{
	bool want = o->where == AT_CUR && o->state == ST_SEALED && o->refs == 0;
	bool on = coffer__dl_linked(&o->lru);
	uint64_t bytes = o->blk != NULL ? o->blk->size : 0;

	if (want && !on) {
		coffer__dl_add_tail(&ot->lru, &o->lru); /* most recently used at the tail */
		ot->evictable_bytes += bytes;
		ot->nlru++;
		o->used = true; /* inserted referenced, as CLOCK inserts a page */
	} else if (!want && on) {
		coffer__dl_del(&o->lru);
		ot->evictable_bytes -= bytes;
		ot->nlru--;
	}
}

/* ---- the shared object index (runtime/proto.h) ---- */

/* Rewrite slot @x under its sequence lock. Only the store writes slots; every field is
 * stored atomically (relaxed) because clients read them concurrently. */
static void index_write(struct coffer_index_slot *x, uint32_t state, const uint8_t *oid,
			uint64_t off, uint64_t size)
{
	uint32_t q = __atomic_load_n(&x->seq, __ATOMIC_RELAXED), w[COFFER_OID_SIZE / 4] = {0};
	size_t i;

	__atomic_store_n(&x->seq, q + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	if (oid != NULL)
		memcpy(w, oid, sizeof(w));
	for (i = 0; i < COFFER_OID_SIZE / 4; i++)
		__atomic_store_n(&x->oid[i], w[i], __ATOMIC_RELAXED);
	__atomic_store_n(&x->offset, off, __ATOMIC_RELAXED);
	__atomic_store_n(&x->size, size, __ATOMIC_RELAXED);
	__atomic_store_n(&x->state, state, __ATOMIC_RELAXED);
	__atomic_store_n(&x->seq, q + 2, __ATOMIC_RELEASE);
}

static uint32_t index_state(const struct coffer_index_slot *x)
{
	return __atomic_load_n(&x->state, __ATOMIC_RELAXED);
}

/* Whether a client read @o through its index slot since the bit was last cleared;
 * clears it. Clients set the bits concurrently (another process): atomics only. */
static bool accessed_clear(struct coffer__ot *ot, const struct obj *o)
{
	uint32_t i = o->islot - 1;
	uint8_t *b, m;

	if (o->islot == 0 || ot->access == NULL)
		return false;
	b = &ot->access[i >> 3];
	m = (uint8_t)(1u << (i & 7));
	if (!(__atomic_load_n(b, __ATOMIC_RELAXED) & m))
		return false;
	__atomic_fetch_and(b, (uint8_t)~m, __ATOMIC_RELAXED);
	return true;
}

/* @o just became its entry's sealed current object: make it readable through the index.
 * @slot: a slot + 1 to reuse (the version it replaces had it), or 0 to find one. When the
 * probe window is full the object is simply not indexed (clients then ask the store). */
static void index_publish(struct coffer__ot *ot, struct obj *o, uint32_t slot)
{
	uint64_t h;
	uint32_t i;

	if (ot->index == NULL)
		return;
	if (slot == 0) {
		h = coffer__index_hash(ot->index_seed, o->e->oid);
		for (i = 0; i < COFFER_INDEX_PROBE && slot == 0; i++)
			if (index_state(&ot->index[(h + i) & ot->index_mask]) != COFFER_INDEX_LIVE)
				slot = (uint32_t)((h + i) & ot->index_mask) + 1;
		if (slot == 0) {
			ot->index_unplaced++;
			return;
		}
		ot->index_live++;
	}
	index_write(&ot->index[slot - 1], COFFER_INDEX_LIVE, o->e->oid, o->off, o->size);
	o->islot = slot;
	(void)accessed_clear(ot, o); /* reads of the version before count for nothing */
}

/* @o stops being readable through the index (before its block can be freed). A slot
 * whose successor is EMPTY becomes EMPTY, and so do the TOMBs right before it: no probe
 * can need to pass them (a probe stops at the first EMPTY), so misses stay short. */
static void index_unpublish(struct coffer__ot *ot, struct obj *o)
{
	uint32_t x = o->islot - 1, m = ot->index_mask;

	if (o->islot == 0)
		return;
	o->islot = 0;
	ot->index_live--;
	if (index_state(&ot->index[(x + 1) & m]) != COFFER_INDEX_EMPTY) {
		index_write(&ot->index[x], COFFER_INDEX_TOMB, NULL, 0, 0);
		return;
	}
	index_write(&ot->index[x], COFFER_INDEX_EMPTY, NULL, 0, 0);
	for (x = (x - 1) & m; index_state(&ot->index[x]) == COFFER_INDEX_TOMB; x = (x - 1) & m)
		index_write(&ot->index[x], COFFER_INDEX_EMPTY, NULL, 0, 0);
}

void coffer__ot_set_index(struct coffer__ot *ot, struct coffer_index_slot *slots, uint8_t *access,
			  uint32_t nslots, uint64_t seed)
{
	ot->index = nslots != 0 ? slots : NULL;
	ot->access = nslots != 0 ? access : NULL;
	ot->index_mask = nslots - 1;
	ot->index_seed = seed;
}

/* ---- objects ---- */

static void obj_free(struct coffer__ot *ot, struct obj *o)
{
	/* Caller has unlinked o from its entry slot (cur/shadow) or it is AT_OLD. */
	index_unpublish(ot, o);
	if (coffer__dl_linked(&o->lru)) {
		coffer__dl_del(&o->lru);
		ot->evictable_bytes -= o->blk != NULL ? o->blk->size : 0;
		ot->nlru--;
	}
	if (coffer__dl_linked(&o->olink))
		coffer__dl_del(&o->olink);
	if (coffer__dl_linked(&o->clink))
		coffer__dl_del(&o->clink);
	while (!coffer__dl_empty(&o->holders)) {
		struct holder *h = COFFER_DL_ENTRY(o->holders.next, struct holder, blink);
		struct holder **pp;

		for (pp = &ot->hbuckets[h->hash & ot->hmask]; *pp != h; pp = &(*pp)->hnext)
			;
		*pp = h->hnext;
		coffer__dl_del(&h->blink);
		coffer__dl_del(&h->olink);
		ot->nholders--;
		pool_put(&ot->holders, h);
	}
	if (o->state == ST_CREATED)
		ot->ncreated--;
	else
		ot->nsealed--;
	if (o->blk != NULL)
		coffer__arena_free(&ot->arena, o->blk);
	pool_put(&ot->objs, o);
}

static void wake_waiters(struct coffer__ot *ot, struct entry *e);

/* cur of e leaves (deleted, evicted or replaced): free it or keep it as OLD until its last
 * release; a pending replacement becomes the new (still unsealed) cur. */
static void detach_cur(struct coffer__ot *ot, struct entry *e, bool promote_shadow)
{
	struct obj *o = e->cur;

	index_unpublish(ot, o);
	e->cur = NULL;
	if (o->refs == 0) {
		o->where = 0;
		obj_free(ot, o);
	} else {
		o->where = AT_OLD;
		lru_update(ot, o);
		coffer__dl_add_tail(&e->old, &o->olink);
	}
	if (promote_shadow && e->shadow != NULL) {
		e->cur = e->shadow;
		e->shadow = NULL;
		e->cur->where = AT_CUR;
	}
}

/* Drop @n references of holder @h; frees what became unreferenced and unreachable. */
static void holder_put(struct coffer__ot *ot, struct holder *h, uint64_t n)
{
	struct obj *o = h->obj;
	struct entry *e = o->e;

	h->count -= n;
	o->refs -= n;
	if (h->count == 0) {
		struct holder **pp;

		for (pp = &ot->hbuckets[h->hash & ot->hmask]; *pp != h; pp = &(*pp)->hnext)
			;
		*pp = h->hnext;
		coffer__dl_del(&h->blink);
		coffer__dl_del(&h->olink);
		ot->nholders--;
		pool_put(&ot->holders, h);
	}
	if (o->refs == 0 && o->where == AT_OLD) {
		obj_free(ot, o);
		entry_maybe_free(ot, e);
		return;
	}
	lru_update(ot, o);
}

/* A new holder record of (@ow, @o) with count 0, which the caller knows is not there yet;
 * NULL when out of memory. */
static struct holder *holder_new(struct coffer__ot *ot, struct coffer__owner *ow, struct obj *o)
{
	struct holder *h = pool_get(&ot->holders, sizeof(*h));
	uint64_t hh;

	if (h == NULL)
		return NULL;
	h->owner = ow;
	h->obj = o;
	hh = holder_hash(ot, ow, o);
	h->hash = hh;
	h->hnext = ot->hbuckets[hh & ot->hmask];
	ot->hbuckets[hh & ot->hmask] = h;
	coffer__dl_add_tail(&ow->holds, &h->olink);
	coffer__dl_add_tail(&o->holders, &h->blink);
	ot->nholders++;
	(void)grow((void ***)&ot->hbuckets, &ot->hmask, ot->nholders,
		   offsetof(struct holder, hnext), offsetof(struct holder, hash));
	return h;
}

/* One more reference of @ow on @o. @fresh: @o was created by this request and has no
 * holder yet, so there is none to look up. */
static int holder_add(struct coffer__ot *ot, struct coffer__owner *ow, struct obj *o, bool fresh)
{
	struct holder *h = fresh ? NULL : holder_find(ot, ow, o);

	if (h == NULL) {
		h = holder_new(ot, ow, o);
		if (h == NULL)
			return -ENOMEM;
	}
	h->count++;
	o->refs++;
	lru_update(ot, o);
	return 0;
}

/* ---- waiters and the deadline heap ---- */

static bool heap_less(const struct waiter *a, const struct waiter *b)
{
	return a->deadline < b->deadline;
}

static void heap_set(struct coffer__ot *ot, size_t i, struct waiter *w)
{
	ot->heap[i] = w;
	w->heap_idx = i;
}

static void heap_up(struct coffer__ot *ot, size_t i)
{
	struct waiter *w = ot->heap[i];

	while (i > 0 && heap_less(w, ot->heap[(i - 1) / 2])) {
		heap_set(ot, i, ot->heap[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
	heap_set(ot, i, w);
}

static void heap_down(struct coffer__ot *ot, size_t i)
{
	struct waiter *w = ot->heap[i];

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= ot->nheap)
			break;
		if (c + 1 < ot->nheap && heap_less(ot->heap[c + 1], ot->heap[c]))
			c++;
		if (!heap_less(ot->heap[c], w))
			break;
		heap_set(ot, i, ot->heap[c]);
		i = c;
	}
	heap_set(ot, i, w);
}

static void heap_remove(struct coffer__ot *ot, struct waiter *w)
{
	size_t i = w->heap_idx;
	struct waiter *last;

	if (i == SIZE_MAX)
		return;
	w->heap_idx = SIZE_MAX;
	last = ot->heap[--ot->nheap];
	if (last == w)
		return;
	heap_set(ot, i, last);
	heap_down(ot, i);
	heap_up(ot, last->heap_idx);
}

static void waiter_free(struct coffer__ot *ot, struct waiter *w)
{
	struct entry *e = w->e;

	heap_remove(ot, w);
	coffer__dl_del(&w->elink);
	coffer__dl_del(&w->olink);
	if (w->route == 0)
		w->owner->sock_waiters--;
	ot->nwaiters--;
	free(w);
	entry_maybe_free(ot, e);
}

static void fill_obj_rep(const struct coffer__ot *ot, const struct obj *o, struct coffer_rep *rep)
{
	rep->segment = ot->segment;
	rep->offset = o->off;
	rep->size = o->size;
}

/* e->cur just became SEALED: every waiter of e gets it (one reference each). */
static void wake_waiters(struct coffer__ot *ot, struct entry *e)
{
	/* Waiters are freed one by one; keep the entry alive by checking cur each time. */
	while (!coffer__dl_empty(&e->waiters)) {
		struct waiter *w = COFFER_DL_ENTRY(e->waiters.next, struct waiter, elink);
		struct coffer_rep rep = {.tag = w->tag};
		struct coffer__owner *ow = w->owner;
		uint32_t route = w->route;

		rep.status = holder_add(ot, ow, e->cur, false);
		if (rep.status == 0)
			fill_obj_rep(ot, e->cur, &rep);
		coffer__dl_del(&w->elink); /* keep e alive: cur is set */
		coffer__dl_init(&w->elink);
		waiter_free(ot, w);
		ot->deliver(ot->ctx, ow, route, &rep);
	}
}

void coffer__ot_expire(struct coffer__ot *ot, uint64_t now_us)
{
	while (ot->nheap > 0 && ot->heap[0]->deadline <= now_us) {
		struct waiter *w = ot->heap[0];
		struct coffer_rep rep = {.tag = w->tag, .status = -ENOENT};
		struct coffer__owner *ow = w->owner;
		uint32_t route = w->route;

		waiter_free(ot, w);
		ot->deliver(ot->ctx, ow, route, &rep);
	}
}

uint64_t coffer__ot_next_deadline(const struct coffer__ot *ot)
{
	return ot->nheap > 0 ? ot->heap[0]->deadline : UINT64_MAX;
}

static int add_waiter(struct coffer__ot *ot, struct coffer__owner *ow, struct entry *e,
		      const struct coffer_req *req, uint32_t route)
{
	struct waiter *w;

	if (route == 0 && ow->sock_waiters >= COFFER_OT_SOCK_WAITERS_MAX)
		return -EAGAIN;
	if (ot->nheap == ot->heapcap && req->timeout_us > 0) {
		size_t cap = ot->heapcap ? ot->heapcap * 2 : 64;
		struct waiter **nh = realloc(ot->heap, cap * sizeof(*nh));

		if (nh == NULL)
			return -ENOMEM;
		ot->heap = nh;
		ot->heapcap = cap;
	}
	w = calloc(1, sizeof(*w));
	if (w == NULL)
		return -ENOMEM;
	w->owner = ow;
	w->e = e;
	w->tag = req->tag;
	w->route = route;
	w->heap_idx = SIZE_MAX;
	w->deadline = UINT64_MAX;
	coffer__dl_add_tail(&e->waiters, &w->elink);
	coffer__dl_add_tail(&ow->waiters, &w->olink);
	if (route == 0)
		ow->sock_waiters++;
	ot->nwaiters++;
	if (req->timeout_us > 0) {
		uint64_t t = (uint64_t)req->timeout_us;

		w->deadline = coffer__now_us() + (t > (1ull << 62) ? (1ull << 62) : t);
		ot->heap[ot->nheap] = w;
		w->heap_idx = ot->nheap++;
		heap_up(ot, w->heap_idx);
	}
	return 0;
}

/* ---- allocation with eviction ---- */

/* Evict the least recently used evictable object. @chances: second chances the request
 * may still give, counted down; the caller starts it at ot->nlru, once per request, so that
 * a request passes over each object at most once however many objects it evicts (clients
 * may set access bits again as fast as a pass clears them). Return: false when there is
 * none. */
static bool evict_one(struct coffer__ot *ot, size_t *chances_left)
{
	struct obj *o;
	struct entry *e;

	if (coffer__dl_empty(&ot->lru))
		return false;
	/* CLOCK: an object used since it was last passed over (put on the list by a seal or a
	 * release, or read through the index: runtime/proto.h, access map) gets a second
	 * chance at the tail, its bits cleared. At most one pass per request: clients may
	 * set bits as fast as this clears them, and after one pass every bit that was set
	 * is cleared. */
	for (;;) {
		bool read, used;

		o = COFFER_DL_ENTRY(ot->lru.next, struct obj, lru);
		if (*chances_left == 0)
			break;
		(*chances_left)--;
		read = accessed_clear(ot, o);
		used = o->used;
		o->used = false;
		if (!read && !used)
			break;
		coffer__dl_del(&o->lru);
		coffer__dl_add_tail(&ot->lru, &o->lru);
		ot->second_chances++;
	}
	e = o->e;
	ot->evictions++;
	ot->evicted_bytes += o->size;
	detach_cur(ot, e, true);
	entry_maybe_free(ot, e);
	return true;
}

/* @chances_left: the request's second chances (evict_one()). */
static int alloc_evicting(struct coffer__ot *ot, uint64_t size, struct coffer__ablk **blk,
			  size_t *chances_left)
{
	uint64_t need = (size + COFFER_ARENA_ALIGN - 1) & ~(uint64_t)(COFFER_ARENA_ALIGN - 1);
	int rc;

	/* The block records first: an -ENOMEM of the arena must mean "no room", never "no
	 * record", or a metadata allocation failure would evict objects for nothing (the whole
	 * cache, one by one, while malloc keeps failing). */
	if (coffer__arena_reserve(&ot->arena) != 0)
		return -ENOMEM;
	rc = coffer__arena_alloc(&ot->arena, size, blk);
	if (rc != -ENOMEM)
		return rc;
	/* -ENOMEM comes after the arena coalesced its quick lists (coffer__arena_alloc()), so
	 * no fit exists without evicting. Evict only if it can help: free (used counts no
	 * quick-listed block) + evictable bytes must cover the request. */
	if (ot->arena.capacity - ot->arena.used + ot->evictable_bytes < need)
		return -ENOMEM;
	while (rc == -ENOMEM && evict_one(ot, chances_left))
		rc = coffer__arena_alloc(&ot->arena, size, blk);
	return rc;
}

/* ---- operations ---- */

/* CREATE's rules for an ID (PUT's too): a sealed version is replaced only with REPLACE,
 * and never while another version of it is still being written. 0 or -EEXIST. */
static int create_allowed(const struct entry *e, unsigned int flags)
{
	if (e != NULL && e->cur != NULL) {
		if (!(flags & COFFER_CREATE_REPLACE) || e->cur->state != ST_SEALED ||
		    e->shadow != NULL)
			return -EEXIST;
	} else if (e != NULL && e->shadow != NULL) {
		return -EEXIST; /* cannot happen: a shadow is promoted when cur leaves */
	}
	return 0;
}

/* A fresh record @o of entry @e: @size bytes in @blk (NULL for 0 bytes), on no list, in no
 * index slot; the caller sets its state. */
static void obj_init(struct obj *o, struct entry *e, uint64_t size, struct coffer__ablk *blk)
{
	coffer__dl_init(&o->lru);
	coffer__dl_init(&o->olink);
	coffer__dl_init(&o->clink);
	coffer__dl_init(&o->holders);
	o->islot = 0;
	o->e = e;
	o->size = size;
	o->blk = blk;
	o->off = blk != NULL ? blk->off : 0;
}

static int op_create(struct coffer__ot *ot, struct coffer__owner *ow, const struct coffer_req *req,
		     uint64_t h, struct coffer_rep *rep)
{
	struct entry *e = entry_find(ot, req->oid, h);
	struct coffer__ablk *blk = NULL;
	size_t chances = ot->nlru; /* one pass for the whole request */
	uint64_t evictions = ot->evictions;
	struct obj *o;
	int rc;

	rc = create_allowed(e, req->flags);
	if (rc != 0)
		return rc;
	if (req->size > ot->arena.capacity)
		return -E2BIG;
	/* Every record the request needs, before anything is evicted for it: failing after
	 * an eviction would lose cached objects for a request that is refused. */
	o = pool_get(&ot->objs, sizeof(*o));
	if (o == NULL)
		return -ENOMEM;
	if (pool_reserve(&ot->entries, sizeof(struct entry)) != 0 ||
	    pool_reserve(&ot->holders, sizeof(struct holder)) != 0 ||
	    (req->size > 0 && coffer__arena_reserve(&ot->arena) != 0)) {
		pool_put(&ot->objs, o);
		return -ENOMEM;
	}
	/* 0-byte objects take no arena space; the object count bounds the store's own
	 * memory instead (evicting like a full arena would). */
	while (ot->ncreated + ot->nsealed + ot->nresv >= ot->max_objects)
		if (!evict_one(ot, &chances)) {
			pool_put(&ot->objs, o);
			return -ENOMEM;
		}
	if (req->size > 0) {
		rc = alloc_evicting(ot, req->size, &blk, &chances);
		if (rc != 0) {
			pool_put(&ot->objs, o);
			return rc;
		}
	}
	/* Eviction may have removed e (or e->cur): look it up again if anything was evicted
	 * (evict_one() counts every eviction), else it is the entry found above. */
	if (e == NULL || ot->evictions != evictions)
		e = entry_get(ot, req->oid, h);
	if (e == NULL) {
		if (blk != NULL)
			coffer__arena_free(&ot->arena, blk);
		pool_put(&ot->objs, o);
		return -ENOMEM;
	}
	obj_init(o, e, req->size, blk);
	o->state = ST_CREATED;
	o->creator = ow;
	ot->ncreated++;
	if (e->cur != NULL) {
		o->where = AT_SHADOW;
		e->shadow = o;
	} else {
		o->where = AT_CUR;
		e->cur = o;
	}
	rc = holder_add(ot, ow, o, true);
	if (rc != 0) {
		if (o->where == AT_SHADOW)
			e->shadow = NULL;
		else
			e->cur = NULL;
		obj_free(ot, o);
		entry_maybe_free(ot, e);
		return rc;
	}
	coffer__dl_add_tail(&ow->created, &o->clink);
	fill_obj_rep(ot, o, rep);
	rep->size = 0;
	return 0;
}

/* The caller's unsealed object of @e, or NULL with *err saying why. */
static struct obj *own_unsealed(struct entry *e, struct coffer__owner *ow, int *err)
{
	if (e == NULL) {
		*err = -ENOENT;
		return NULL;
	}
	if (e->shadow != NULL && e->shadow->creator == ow)
		return e->shadow;
	if (e->cur != NULL && e->cur->state == ST_CREATED) {
		if (e->cur->creator == ow)
			return e->cur;
		*err = -EPERM;
		return NULL;
	}
	if (e->shadow != NULL) {
		*err = -EPERM;
		return NULL;
	}
	*err = e->cur != NULL ? -EALREADY : -ENOENT;
	return NULL;
}

/*
 * Make @o (unsealed, of @e: its cur, or its shadow replacing a sealed cur, or not yet
 * linked when @e->cur is NULL or sealed) the sealed current version of @e: it takes over
 * the index slot of the version it replaces in one slot write (a reader sees the old
 * object or the new one, never neither), which is detached; waiting gets are answered.
 */
static void seal_as_cur(struct coffer__ot *ot, struct entry *e, struct obj *o)
{
	uint32_t slot = 0;

	if (e->cur != NULL && e->cur != o) {
		slot = e->cur->islot;
		e->cur->islot = 0;
		detach_cur(ot, e, false);
		if (e->shadow == o)
			e->shadow = NULL;
	}
	e->cur = o;
	o->where = AT_CUR;
	o->state = ST_SEALED;
	o->creator = NULL;
	ot->nsealed++;
	index_publish(ot, o, slot);
	lru_update(ot, o);
	wake_waiters(ot, e);
}

static int op_seal(struct coffer__ot *ot, struct coffer__owner *ow, const struct coffer_req *req,
		   uint64_t h)
{
	struct entry *e = entry_find(ot, req->oid, h);
	struct obj *o;
	int err = 0;

	o = own_unsealed(e, ow, &err);
	if (o == NULL)
		return err;
	coffer__dl_del(&o->clink);
	ot->ncreated--;
	if (req->flags & COFFER_SEAL_RELEASE) {
		struct holder *hd = obj_holder(o, ow);

		/* the object is still unsealed, so dropping the last reference frees
		 * nothing: it is neither AT_OLD nor evictable */
		if (hd != NULL)
			holder_put(ot, hd, 1);
	}
	seal_as_cur(ot, e, o);
	return 0;
}

static int op_abort(struct coffer__ot *ot, struct coffer__owner *ow, const struct coffer_req *req,
		    uint64_t h)
{
	struct entry *e = entry_find(ot, req->oid, h);
	struct obj *o;
	int err = 0;

	o = own_unsealed(e, ow, &err);
	if (o == NULL)
		return err;
	if (o->where == AT_SHADOW)
		e->shadow = NULL;
	else
		e->cur = NULL;
	obj_free(ot, o);
	entry_maybe_free(ot, e);
	return 0;
}

/* ---- reservations (protocol v5): a block written before it has an ObjectID ---- */

static uint64_t resv_hash(const struct coffer__ot *ot, uint64_t off)
{
	return coffer_hash_mix64(off ^ ot->seed[1]);
}

/* The reservation of the block at arena offset @off, or NULL. */
static struct resv *resv_find(const struct coffer__ot *ot, uint64_t off)
{
	uint64_t h = resv_hash(ot, off);
	struct resv *r;

	for (r = ot->rbuckets[h & ot->rmask]; r != NULL; r = r->hnext)
		if (r->hash == h && r->blk->off == off)
			return r;
	return NULL;
}

/* Forget reservation @r; its block is freed unless @keep_blk (a PUT made it an object's). */
static void resv_drop(struct coffer__ot *ot, struct resv *r, bool keep_blk)
{
	struct resv **pp;

	for (pp = &ot->rbuckets[r->hash & ot->rmask]; *pp != r; pp = &(*pp)->hnext)
		;
	*pp = r->hnext;
	coffer__dl_del(&r->olink);
	r->owner->nreserved--;
	ot->nresv--;
	ot->resv_bytes -= r->blk->size;
	if (!keep_blk)
		coffer__arena_free(&ot->arena, r->blk);
	free(r);
}

static int op_reserve(struct coffer__ot *ot, struct coffer__owner *ow, const struct coffer_req *req,
		      struct coffer_rep *rep)
{
	struct coffer__ablk *blk;
	size_t chances = ot->nlru; /* one pass for the whole request */
	struct resv *r;
	int rc;

	if (req->size == 0)
		return -EINVAL; /* a 0-byte object takes no block: CREATE it */
	if (req->size > ot->arena.capacity)
		return -E2BIG;
	if (ow->nreserved >= COFFER_RESERVE_MAX)
		return -EAGAIN;
	/* its record (and the arena's, in alloc_evicting()) before anything is evicted */
	r = calloc(1, sizeof(*r));
	if (r == NULL)
		return -ENOMEM;
	/* a reservation becomes an object: it counts against the bound on records */
	while (ot->ncreated + ot->nsealed + ot->nresv >= ot->max_objects)
		if (!evict_one(ot, &chances)) {
			free(r);
			return -ENOMEM;
		}
	rc = alloc_evicting(ot, req->size, &blk, &chances);
	if (rc != 0) {
		free(r);
		return rc;
	}
	r->blk = blk;
	r->size = req->size;
	r->owner = ow;
	r->hash = resv_hash(ot, blk->off);
	r->hnext = ot->rbuckets[r->hash & ot->rmask];
	ot->rbuckets[r->hash & ot->rmask] = r;
	coffer__dl_add_tail(&ow->reserved, &r->olink);
	ow->nreserved++;
	ot->nresv++;
	ot->resv_bytes += blk->size;
	(void)grow((void ***)&ot->rbuckets, &ot->rmask, ot->nresv, offsetof(struct resv, hnext),
		   offsetof(struct resv, hash));
	rep->segment = ot->segment;
	rep->offset = blk->off;
	return 0;
}

/*
 * PUT: the caller's reservation at req->offset becomes the sealed object req->oid of
 * req->size bytes, in one step: what CREATE (with req->flags), SEAL and RELEASE do, without
 * the creator ever holding a reference. On failure the reservation stays the caller's.
 */
static int op_put(struct coffer__ot *ot, struct coffer__owner *ow, const struct coffer_req *req,
		  uint64_t h)
{
	struct resv *r = resv_find(ot, req->offset);
	struct entry *e = entry_find(ot, req->oid, h);
	struct obj *o;
	int rc;

	if (r == NULL || r->owner != ow)
		return -ENOENT;
	if (req->size == 0 || req->size > r->size)
		return -EINVAL;
	rc = create_allowed(e, req->flags);
	if (rc != 0)
		return rc;
	o = pool_get(&ot->objs, sizeof(*o));
	if (o == NULL)
		return -ENOMEM;
	e = entry_get(ot, req->oid, h);
	if (e == NULL) {
		pool_put(&ot->objs, o);
		return -ENOMEM;
	}
	obj_init(o, e, req->size, r->blk);
	resv_drop(ot, r, true);
	seal_as_cur(ot, e, o);
	return 0;
}

static int op_unreserve(struct coffer__ot *ot, struct coffer__owner *ow,
			const struct coffer_req *req)
{
	struct resv *r = resv_find(ot, req->offset);

	if (r == NULL || r->owner != ow)
		return -ENOENT;
	resv_drop(ot, r, false);
	return 0;
}

static int op_get(struct coffer__ot *ot, struct coffer__owner *ow, const struct coffer_req *req,
		  uint64_t h, uint32_t route, struct coffer_rep *rep)
{
	struct entry *e = entry_find(ot, req->oid, h);
	int rc;

	if (e != NULL && e->cur != NULL && e->cur->state == ST_SEALED) {
		struct obj *o = e->cur;

		rc = holder_add(ot, ow, o, false);
		if (rc != 0)
			return rc;
		fill_obj_rep(ot, o, rep);
		return 1;
	}
	if (req->timeout_us == 0)
		return -ENOENT;
	e = entry_get(ot, req->oid, h);
	if (e == NULL)
		return -ENOMEM;
	rc = add_waiter(ot, ow, e, req, route);
	if (rc != 0) {
		entry_maybe_free(ot, e);
		return rc;
	}
	return 0;
}

/*
 * The holder of @ow on a version of @e: the current one first, then the replacement being
 * created, then the replaced/deleted ones oldest first. With @by_off only versions at offset
 * @off count, and with @zero_only only 0-byte ones.
 */
static struct holder *release_find(const struct coffer__ot *ot, struct coffer__owner *ow,
				   struct entry *e, bool by_off, uint64_t off, bool zero_only)
{
	struct obj *cand[2] = {e->cur, e->shadow};
	struct holder *h = NULL;
	struct coffer__dl *p;

	for (int i = 0; i < 2 && h == NULL; i++) {
		struct obj *o = cand[i];

		if (o != NULL && (!by_off || o->off == off) && (!zero_only || o->size == 0))
			h = holder_find(ot, ow, o);
	}
	for (p = e->old.next; h == NULL && p != &e->old; p = p->next) {
		struct obj *o = COFFER_DL_ENTRY(p, struct obj, olink);

		if ((!by_off || o->off == off) && (!zero_only || o->size == 0))
			h = holder_find(ot, ow, o);
	}
	return h;
}

static int op_release(struct coffer__ot *ot, struct coffer__owner *ow, const struct coffer_req *req,
		      uint64_t hash)
{
	struct entry *e = entry_find(ot, req->oid, hash);
	bool by_off = (req->flags & COFFER_RELEASE_BY_OFFSET) != 0;
	struct holder *h = NULL;

	if (e == NULL)
		return -ENOENT;
	/*
	 * 0-byte objects have offset 0, which the arena's first block has too, so a release at
	 * offset 0 may name either a 0-byte version or the real one there. A 0-byte reference
	 * pins no memory: drop one of those first, so that the real version stays pinned until
	 * the client's last release at that offset (whichever one the client meant).
	 */
	if (by_off && req->size == 0)
		h = release_find(ot, ow, e, true, 0, true);
	if (h == NULL)
		h = release_find(ot, ow, e, by_off, req->size, false);
	if (h == NULL)
		return -ENOENT;
	holder_put(ot, h, 1);
	return 0;
}

static int op_delete(struct coffer__ot *ot, const struct coffer_req *req, uint64_t h)
{
	struct entry *e = entry_find(ot, req->oid, h);

	if (e == NULL || e->cur == NULL)
		return -ENOENT;
	if (e->cur->state != ST_SEALED)
		return -EBUSY;
	detach_cur(ot, e, true);
	entry_maybe_free(ot, e);
	return 0;
}

uint64_t coffer__ot_hash(const struct coffer__ot *ot, const uint8_t *oid)
{
	return oid_hash(ot, oid);
}

/* What coffer__ot_prefetch_batch() found for one request between its passes. */
struct pf {
	struct entry *const *slot;   /* the ObjectID's hash bucket */
	const struct obj *o;	     /* the entry's current object, or NULL */
	struct holder *const *hslot; /* the (client, object) holder bucket */
};

void coffer__ot_prefetch_batch(const struct coffer__ot *ot, const struct coffer__owner *ow,
			       const uint64_t *h, unsigned int n)
{
	struct pf pf[COFFER_OT_PREFETCH_MAX];
	unsigned int i;

	if (n > COFFER_OT_PREFETCH_MAX)
		n = COFFER_OT_PREFETCH_MAX;
	/* Pass 0: the hash buckets. A lone request has nothing to overlap its misses with. */
	for (i = 0; i < n; i++) {
		pf[i].slot = &ot->ebuckets[h[i] & ot->emask];
		__builtin_prefetch(pf[i].slot);
	}
	if (n < 2)
		return;
	/* Pass 1: each bucket's first entry. */
	for (i = 0; i < n; i++) {
		const struct entry *e = *pf[i].slot;

		if (e != NULL)
			__builtin_prefetch(e);
	}
	/* Pass 2: the entry is (mostly) in cache; a chain longer than one costs misses here
	 * rather than in the request, which is no worse. Its current object and the holder
	 * bucket of (client, object). */
	for (i = 0; i < n; i++) {
		const struct entry *e = *pf[i].slot;

		while (e != NULL && e->hash != h[i])
			e = e->hnext;
		pf[i].o = e != NULL ? e->cur : NULL;
		if (pf[i].o == NULL)
			continue;
		pf[i].hslot = &ot->hbuckets[holder_hash(ot, ow, pf[i].o) & ot->hmask];
		__builtin_prefetch(pf[i].o);
		__builtin_prefetch((const char *)pf[i].o + 64);
		__builtin_prefetch(pf[i].hslot);
	}
	/* Pass 3: what a get, a release or the seal of a replacement touches next: the LRU
	 * neighbours it unlinks from, its arena block, the first holder of its bucket, the
	 * index slot the seal of a replacement rewrites (random in a table of MiBs). */
	for (i = 0; i < n; i++) {
		const struct obj *o = pf[i].o;

		if (o == NULL)
			continue;
		if (*pf[i].hslot != NULL)
			__builtin_prefetch(*pf[i].hslot);
		if (coffer__dl_linked(&o->lru)) {
			__builtin_prefetch(o->lru.prev);
			__builtin_prefetch(o->lru.next);
		}
		if (o->blk != NULL)
			__builtin_prefetch(o->blk);
		if (o->islot != 0)
			__builtin_prefetch(&ot->index[o->islot - 1], 1);
	}
}

int coffer__ot_exec(struct coffer__ot *ot, struct coffer__owner *ow, const struct coffer_req *req,
		    uint32_t route, struct coffer_rep *rep)
{
	return coffer__ot_exec_hashed(ot, ow, req, oid_hash(ot, req->oid), route, rep);
}

int coffer__ot_exec_hashed(struct coffer__ot *ot, struct coffer__owner *ow,
			   const struct coffer_req *req, uint64_t h, uint32_t route,
			   struct coffer_rep *rep)
{
	struct entry *e;
	int rc;

	memset(rep, 0, sizeof(*rep));
	rep->tag = req->tag;
	switch (req->op) {
	case COFFER_OP_CREATE:
		rc = op_create(ot, ow, req, h, rep);
		break;
	case COFFER_OP_SEAL:
		rc = op_seal(ot, ow, req, h);
		break;
	case COFFER_OP_ABORT:
		rc = op_abort(ot, ow, req, h);
		break;
	case COFFER_OP_GET:
		rc = op_get(ot, ow, req, h, route, rep);
		if (rc == 0)
			return 0; /* waits */
		if (rc == 1)
			rc = 0;
		break;
	case COFFER_OP_RELEASE:
		rc = op_release(ot, ow, req, h);
		break;
	case COFFER_OP_DELETE:
		rc = op_delete(ot, req, h);
		break;
	case COFFER_OP_RESERVE:
		rc = op_reserve(ot, ow, req, rep);
		break;
	case COFFER_OP_PUT:
		rc = op_put(ot, ow, req, h);
		break;
	case COFFER_OP_UNRESERVE:
		rc = op_unreserve(ot, ow, req);
		break;
	case COFFER_OP_CONTAINS:
		e = entry_find(ot, req->oid, h);
		rep->size = e != NULL && e->cur != NULL && e->cur->state == ST_SEALED;
		rc = 0;
		break;
	default:
		rc = -EINVAL;
		break;
	}
	rep->status = rc;
	if (rc != 0) {
		rep->segment = 0;
		rep->offset = 0;
		rep->size = 0;
	}
	return 1;
}

void coffer__ot_owner_init(struct coffer__owner *o)
{
	memset(o, 0, sizeof(*o));
	coffer__dl_init(&o->holds);
	coffer__dl_init(&o->created);
	coffer__dl_init(&o->waiters);
	coffer__dl_init(&o->reserved);
}

void coffer__ot_drop_route(struct coffer__ot *ot, struct coffer__owner *o, uint32_t route)
{
	struct coffer__dl *p, *n;

	for (p = o->waiters.next; p != &o->waiters; p = n) {
		struct waiter *w = COFFER_DL_ENTRY(p, struct waiter, olink);

		n = p->next;
		if (w->route == route)
			waiter_free(ot, w);
	}
}

void coffer__ot_owner_gone(struct coffer__ot *ot, struct coffer__owner *o)
{
	while (!coffer__dl_empty(&o->waiters))
		waiter_free(ot, COFFER_DL_ENTRY(o->waiters.next, struct waiter, olink));
	while (!coffer__dl_empty(&o->created)) {
		struct obj *x = COFFER_DL_ENTRY(o->created.next, struct obj, clink);
		struct entry *e = x->e;

		if (x->where == AT_SHADOW) {
			e->shadow = NULL;
		} else {
			e->cur = NULL;
		}
		/* An unsealed object is referenced by its creator only (gets never return
		 * it), so freeing it drops nobody else's reference. */
		obj_free(ot, x);
		entry_maybe_free(ot, e);
	}
	while (!coffer__dl_empty(&o->holds)) {
		struct holder *h = COFFER_DL_ENTRY(o->holds.next, struct holder, olink);

		holder_put(ot, h, h->count);
	}
	/* written, never put: nothing was sealed, so nothing is lost */
	while (!coffer__dl_empty(&o->reserved))
		resv_drop(ot, COFFER_DL_ENTRY(o->reserved.next, struct resv, olink), false);
}

int coffer__ot_create(struct coffer__ot **out, uint64_t capacity, uint32_t segment,
		      coffer__ot_deliver_fn deliver, void *ctx)
{
	struct coffer__ot *ot = calloc(1, sizeof(*ot));
	int rc;

	if (ot == NULL)
		return -ENOMEM;
	rc = coffer__arena_init(&ot->arena, capacity);
	if (rc != 0) {
		free(ot);
		return rc;
	}
	/* before anything can fail: coffer__ot_destroy() walks the LRU list */
	coffer__dl_init(&ot->lru);
	ot->emask = ot->hmask = ot->rmask = 1023;
	ot->ebuckets = calloc(ot->emask + 1, sizeof(*ot->ebuckets));
	ot->hbuckets = calloc(ot->hmask + 1, sizeof(*ot->hbuckets));
	ot->rbuckets = calloc(ot->rmask + 1, sizeof(*ot->rbuckets));
	if (ot->ebuckets == NULL || ot->hbuckets == NULL || ot->rbuckets == NULL) {
		coffer__ot_destroy(ot);
		return -ENOMEM;
	}
	if (getrandom(ot->seed, sizeof(ot->seed), 0) != sizeof(ot->seed)) {
		ot->seed[0] = coffer__now_us();
		ot->seed[1] = (uint64_t)(uintptr_t)ot;
	}
	ot->max_objects = ot->arena.capacity / COFFER_ARENA_ALIGN;
	if (ot->max_objects < 65536)
		ot->max_objects = 65536;
	ot->segment = segment;
	ot->deliver = deliver;
	ot->ctx = ctx;
	*out = ot;
	return 0;
}

void coffer__ot_destroy(struct coffer__ot *ot)
{
	size_t i;

	if (ot == NULL)
		return;
	/* Owners are gone, so only unreferenced sealed objects remain: all on the LRU. */
	while (!coffer__dl_empty(&ot->lru)) {
		struct obj *o = COFFER_DL_ENTRY(ot->lru.next, struct obj, lru);
		struct entry *e = o->e;

		detach_cur(ot, e, true);
		entry_maybe_free(ot, e);
	}
	for (i = 0; ot->ebuckets != NULL && i <= ot->emask; i++)
		while (ot->ebuckets[i] != NULL) {
			struct entry *e = ot->ebuckets[i];

			ot->ebuckets[i] = e->hnext;
			free(e); /* only reached if an owner was not released: tests catch it */
		}
	pool_drain(&ot->entries);
	pool_drain(&ot->objs);
	pool_drain(&ot->holders);
	free(ot->ebuckets);
	free(ot->hbuckets);
	free(ot->rbuckets);
	free(ot->heap);
	coffer__arena_fini(&ot->arena);
	free(ot);
}

void coffer__ot_stats(const struct coffer__ot *ot, struct coffer__ot_stats *st)
{
	st->capacity = ot->arena.capacity;
	st->used = ot->arena.used;
	st->objects_created = ot->ncreated;
	st->objects_sealed = ot->nsealed;
	st->evictions = ot->evictions;
	st->evicted_bytes = ot->evicted_bytes;
	st->waiters = ot->nwaiters;
	st->entries = ot->nentries;
	st->holders = ot->nholders;
	st->index_live = ot->index_live;
	st->index_unplaced = ot->index_unplaced;
	st->reserved = ot->nresv;
	st->reserved_bytes = ot->resv_bytes;
	st->second_chances = ot->second_chances;
	st->quick_blocks = ot->arena.nquick;
	st->quick_bytes = ot->arena.qbytes;
	st->index_slots = ot->index != NULL ? (uint64_t)ot->index_mask + 1 : 0;
}

/* The index matches the table: every LIVE slot is its ID's sealed current object, within
 * COFFER_INDEX_PROBE of its home with no EMPTY slot between, and the count agrees. */
static int index_check(const struct coffer__ot *ot)
{
	uint64_t live = 0, x, d;

	for (x = 0; ot->index != NULL && x <= ot->index_mask; x++) {
		const struct coffer_index_slot *sl = &ot->index[x];
		uint8_t oid[COFFER_OID_SIZE];
		const struct entry *e;

		if (sl->seq & 1)
			return -EFAULT;
		if (sl->state != COFFER_INDEX_LIVE)
			continue;
		live++;
		memcpy(oid, sl->oid, sizeof(oid));
		e = entry_find(ot, oid, oid_hash(ot, oid));
		if (e == NULL || e->cur == NULL || e->cur->islot != x + 1 ||
		    e->cur->state != ST_SEALED || e->cur->off != sl->offset ||
		    e->cur->size != sl->size)
			return -EFAULT;
		d = (x - coffer__index_hash(ot->index_seed, oid)) & ot->index_mask;
		if (d >= COFFER_INDEX_PROBE)
			return -EFAULT;
		for (; d > 0; d--)
			if (ot->index[(x - d) & ot->index_mask].state == COFFER_INDEX_EMPTY)
				return -EFAULT;
	}
	return live == ot->index_live ? 0 : -EFAULT;
}

/* Every reservation is an allocated block of at least its size, found by its offset, and
 * the count and the byte total agree. */
static int resv_check(const struct coffer__ot *ot)
{
	uint64_t bytes = 0;
	size_t n = 0;

	for (size_t i = 0; i <= ot->rmask; i++)
		for (const struct resv *r = ot->rbuckets[i]; r != NULL; r = r->hnext) {
			if (r->blk->free || r->blk->quick || r->blk->size < r->size ||
			    r->size == 0 || (r->hash & ot->rmask) != i ||
			    resv_find(ot, r->blk->off) != r || r->owner->nreserved == 0)
				return -EFAULT;
			n++;
			bytes += r->blk->size;
		}
	return n == ot->nresv && bytes == ot->resv_bytes ? 0 : -EFAULT;
}

/* One version @o of @e, at @where: its block is an allocated one (neither free nor on a
 * quick list: a freed block is handed out again at once) at its offset, large enough; its
 * holders are in the holder hash under their stored hash (holder_find() finds each, so none
 * is there twice), their counts sum to its refs, and an unsealed one is held by its creator
 * only (op_seal() looks its creator's holder up on the object's own list). Adds to
 * *@nholders, the state counts and *@bytes (its block's size). */
static int obj_check(const struct coffer__ot *ot, const struct entry *e, const struct obj *o,
		     int where, size_t *nholders, uint64_t *ncreated, uint64_t *nsealed,
		     uint64_t *bytes)
{
	uint64_t refs = 0;

	if (o->e != e || o->where != where)
		return -EFAULT;
	if (o->blk != NULL) {
		if (o->blk->free || o->blk->quick || o->blk->off != o->off ||
		    o->blk->size < o->size)
			return -EFAULT;
		*bytes += o->blk->size;
	} else if (o->size != 0) {
		return -EFAULT;
	}
	if (o->state == ST_CREATED) {
		if (o->creator == NULL || !coffer__dl_linked(&o->clink) || where == AT_OLD)
			return -EFAULT;
		(*ncreated)++;
	} else if (o->state == ST_SEALED) {
		if (o->creator != NULL || where == AT_SHADOW)
			return -EFAULT;
		(*nsealed)++;
	} else {
		return -EFAULT;
	}
	for (const struct coffer__dl *p = o->holders.next; p != &o->holders; p = p->next) {
		const struct holder *h = COFFER_DL_ENTRY(p, struct holder, blink);

		if (h->obj != o || h->count == 0 || h->hash != holder_hash(ot, h->owner, o) ||
		    holder_find(ot, h->owner, (struct obj *)o) != h ||
		    (o->state == ST_CREATED && h->owner != o->creator))
			return -EFAULT;
		refs += h->count;
		(*nholders)++;
	}
	if (refs != o->refs || (where == AT_OLD && refs == 0))
		return -EFAULT;
	return 0;
}

/* Every entry is in the bucket of its ObjectID's hash and has something (a version or a
 * waiter); every version passes obj_check(); the counts agree with the table's. *@bytes:
 * out: the bytes of every version's block. */
static int entries_check(const struct coffer__ot *ot, uint64_t *bytes)
{
	uint64_t ncreated = 0, nsealed = 0;
	size_t nentries = 0, nholders = 0;

	for (size_t i = 0; i <= ot->emask; i++)
		for (const struct entry *e = ot->ebuckets[i]; e != NULL; e = e->hnext) {
			if ((e->hash & ot->emask) != i || e->hash != oid_hash(ot, e->oid) ||
			    (e->cur == NULL && e->shadow == NULL && coffer__dl_empty(&e->old) &&
			     coffer__dl_empty(&e->waiters)))
				return -EFAULT;
			if (e->shadow != NULL && (e->cur == NULL || e->cur->state != ST_SEALED ||
						  obj_check(ot, e, e->shadow, AT_SHADOW, &nholders,
							    &ncreated, &nsealed, bytes) != 0))
				return -EFAULT;
			if (e->cur != NULL && obj_check(ot, e, e->cur, AT_CUR, &nholders, &ncreated,
							&nsealed, bytes) != 0)
				return -EFAULT;
			for (const struct coffer__dl *p = e->old.next; p != &e->old; p = p->next)
				if (obj_check(ot, e, COFFER_DL_ENTRY(p, struct obj, olink), AT_OLD,
					      &nholders, &ncreated, &nsealed, bytes) != 0)
					return -EFAULT;
			nentries++;
		}
	/* (no walk of the holder buckets: holder_find() found each holder above) */
	if (nentries != ot->nentries || nholders != ot->nholders || ncreated != ot->ncreated ||
	    nsealed != ot->nsealed)
		return -EFAULT;
	return 0;
}

int coffer__ot_check(const struct coffer__ot *ot)
{
	uint64_t evictable = 0, bytes = 0;
	struct coffer__dl *p;
	size_t n = 0;

	if (coffer__arena_check(&ot->arena) != 0)
		return -EFAULT;
	for (p = ot->lru.next; p != &ot->lru; p = p->next) {
		struct obj *o = COFFER_DL_ENTRY(p, struct obj, lru);

		if (o->refs != 0 || o->state != ST_SEALED || o->where != AT_CUR || o->e->cur != o)
			return -EFAULT;
		evictable += o->blk != NULL ? o->blk->size : 0;
		n++;
	}
	if (evictable != ot->evictable_bytes || n != ot->nlru ||
	    ot->arena.used > ot->arena.capacity)
		return -EFAULT;
	if (resv_check(ot) != 0 || entries_check(ot, &bytes) != 0)
		return -EFAULT;
	/* every allocated block is one version's or one reservation's, none twice */
	if (bytes + ot->resv_bytes != ot->arena.used)
		return -EFAULT;
	return index_check(ot);
}
