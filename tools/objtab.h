/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tools/objtab.h - coffer-store's object table: ObjectID -> object, states, per-client
 * references, creator tracking, replace-on-seal, deferred delete, LRU eviction and pending
 * gets with deadlines. Knows nothing about sockets or rings: a waiting get is completed
 * through the table's deliver callback with the route its caller gave.
 *
 * Context: single-threaded (the store's event loop). Never blocks.
 */
#ifndef COFFER_TOOLS_OBJTAB_H
#define COFFER_TOOLS_OBJTAB_H

#include <stdint.h>

#include "runtime/proto.h"
#include "tools/arena.h"
#include "tools/list.h"

/* Most gets one client may have waiting on its socket path (ring gets are bounded by the
 * ring size). More -> -EAGAIN. */
#define COFFER_OT_SOCK_WAITERS_MAX 4096u

/* A client, as the table sees it. Embedded in the store's session. */
struct coffer__owner {
	struct coffer__dl holds;    /* struct holder: references this client holds */
	struct coffer__dl created;  /* struct obj: its unsealed objects (incl. replacements) */
	struct coffer__dl waiters;  /* struct waiter: its waiting gets */
	struct coffer__dl reserved; /* struct resv: its reserved arena blocks */
	uint32_t sock_waiters;	    /* waiters with route 0 */
	uint32_t nreserved;	    /* entries of reserved */
};

struct coffer__ot;

/* Called when a waiting get completes (object sealed: status 0, or timeout: -ENOENT). */
typedef void (*coffer__ot_deliver_fn)(void *ctx, struct coffer__owner *owner, uint32_t route,
				      const struct coffer_rep *rep);

struct coffer__ot_stats {
	uint64_t capacity, used, objects_created, objects_sealed, evictions, evicted_bytes;
	uint64_t waiters, entries, holders;
	uint64_t index_live;	 /* objects readable through the shared index */
	uint64_t index_unplaced; /* seals whose object found no index slot (since start) */
	uint64_t reserved;	 /* arena blocks reserved by clients (RESERVE, not yet put) */
	uint64_t reserved_bytes; /* their arena bytes (block sizes, rounded) */
	uint64_t index_slots;	 /* slots of the shared index (0: none) */
	uint64_t second_chances; /* objects eviction passed over (used or read since last) */
	uint64_t quick_blocks;	 /* free arena blocks on the quick lists (tools/arena.h) */
	uint64_t quick_bytes;	 /* their bytes (free, not in used) */
};

/**
 * coffer__ot_create() - create the table over an arena of @capacity bytes.
 * @out: out: the table.
 * @capacity: arena bytes.
 * @segment: arena segment id put into replies.
 * @deliver: callback for completed waiting gets; @ctx is passed to it.
 * Return: 0, -ENOMEM, -EINVAL.
 */
int coffer__ot_create(struct coffer__ot **out, uint64_t capacity, uint32_t segment,
		      coffer__ot_deliver_fn deliver, void *ctx);

/** coffer__ot_destroy() - free everything (all owners must be gone). */
void coffer__ot_destroy(struct coffer__ot *ot);

/** coffer__ot_owner_init() - prepare an owner record. */
void coffer__ot_owner_init(struct coffer__owner *o);

/**
 * coffer__ot_owner_gone() - a client disconnected: drop its waiting gets, abort its
 * unsealed objects (only its own), free its reservations, release every reference it holds.
 */
void coffer__ot_owner_gone(struct coffer__ot *ot, struct coffer__owner *o);

/** coffer__ot_drop_route() - drop @o's waiting gets that reply through @route. */
void coffer__ot_drop_route(struct coffer__ot *ot, struct coffer__owner *o, uint32_t route);

/**
 * coffer__ot_exec() - execute one request (already copied and coffer__req_check()ed).
 * @ot: the table.
 * @o: the requesting client.
 * @req: the request.
 * @route: where a deferred reply goes (0 = socket; the store's channel numbering + 1).
 * @rep: out: the reply when the result is immediate.
 * Return: 1 when @rep holds the reply now; 0 when the request waits (a get) and will be
 * answered through the deliver callback exactly once, or dropped with its owner/route.
 */
int coffer__ot_exec(struct coffer__ot *ot, struct coffer__owner *o, const struct coffer_req *req,
		    uint32_t route, struct coffer_rep *rep);

/**
 * coffer__ot_hash() - the table's (seeded) hash of ObjectID @oid, for
 * coffer__ot_prefetch_batch() and coffer__ot_exec_hashed().
 * @ot: the table.
 * @oid: COFFER_OID_SIZE bytes; any value (it is only hashed, so it may come from a request
 * not checked yet).
 * Return: the 64-bit hash; equal ObjectIDs give equal hashes for the table's lifetime.
 */
uint64_t coffer__ot_hash(const struct coffer__ot *ot, const uint8_t *oid);

/* Requests one coffer__ot_prefetch_batch() call covers at most. */
#define COFFER_OT_PREFETCH_MAX 32u

/**
 * coffer__ot_prefetch_batch() - start loading the cache lines that a batch of requests will
 * read, so that their misses overlap instead of being paid one request at a time. Four
 * passes over the batch, each issuing the loads that the previous pass's lines make
 * computable: the hash buckets; their first entries; each entry's current object and the
 * (client, object) holder bucket; that bucket's first holder, the object's LRU neighbours,
 * its arena block and its object-index slot. What a pass found is kept for the next (no
 * chain is walked twice); a batch of one request gets only the first pass. A pure hint: it
 * changes nothing and cannot fault (it reads only the table's own bucket arrays, entries
 * and objects, which are all live between calls that execute requests).
 * @ot: the table.
 * @ow: the client that will send the requests (its holder buckets are fetched).
 * @h: coffer__ot_hash() of each request's ObjectID (of requests not checked yet too).
 * @n: requests; those past COFFER_OT_PREFETCH_MAX are not prefetched.
 * Context: the store's thread, like every coffer__ot_* call.
 * Source: the group prefetching of hash probes in Chen et al., "Improving Hash Join
 * Performance through Prefetching" (ICDE 2004).
 */
void coffer__ot_prefetch_batch(const struct coffer__ot *ot, const struct coffer__owner *ow,
			       const uint64_t *h, unsigned int n);

/**
 * coffer__ot_exec_hashed() - coffer__ot_exec() for a request whose ObjectID hash the caller
 * already computed with coffer__ot_hash() (so a batch hashes each request once).
 * @h: coffer__ot_hash(@ot, @req->oid); a wrong value makes lookups miss (never unsafe, but
 * wrong), so pass exactly that.
 * Other arguments and return value: as coffer__ot_exec().
 */
int coffer__ot_exec_hashed(struct coffer__ot *ot, struct coffer__owner *o,
			   const struct coffer_req *req, uint64_t h, uint32_t route,
			   struct coffer_rep *rep);

/** coffer__ot_expire() - complete waiting gets whose deadline (monotonic us) passed. */
void coffer__ot_expire(struct coffer__ot *ot, uint64_t now_us);

/** coffer__ot_next_deadline() - earliest waiting deadline in monotonic us, or UINT64_MAX. */
uint64_t coffer__ot_next_deadline(const struct coffer__ot *ot);

/**
 * coffer__ot_set_index() - keep the shared object index (runtime/proto.h, struct
 * coffer_index_slot) in @slots from now on: every object sealed later is published there
 * (when its probe window has room) and removed before its arena block can be freed. Call
 * it once, right after coffer__ot_create(), on zeroed memory.
 * @ot: the table.
 * @slots: @nslots slots (shared memory the store maps writable).
 * @nslots: a power of two, or 0 for no index.
 * @seed: the seed of coffer__index_hash() announced to clients.
 */
void coffer__ot_set_index(struct coffer__ot *ot, struct coffer_index_slot *slots, uint8_t *access,
			  uint32_t nslots, uint64_t seed);

/** coffer__ot_stats() - counters for QUERY. */
void coffer__ot_stats(const struct coffer__ot *ot, struct coffer__ot_stats *st);

/** coffer__ot_check() - verify internal invariants (tests): 0 or -EFAULT. O(n). */
int coffer__ot_check(const struct coffer__ot *ot);

/** coffer__now_us() - CLOCK_MONOTONIC in microseconds. */
uint64_t coffer__now_us(void);

#endif /* COFFER_TOOLS_OBJTAB_H */
