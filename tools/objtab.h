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
	struct coffer__dl holds;   /* struct holder: references this client holds */
	struct coffer__dl created; /* struct obj: its unsealed objects (incl. replacements) */
	struct coffer__dl waiters; /* struct waiter: its waiting gets */
	uint32_t sock_waiters;	   /* waiters with route 0 */
};

struct coffer__ot;

/* Called when a waiting get completes (object sealed: status 0, or timeout: -ENOENT). */
typedef void (*coffer__ot_deliver_fn)(void *ctx, struct coffer__owner *owner, uint32_t route,
				      const struct coffer_rep *rep);

struct coffer__ot_stats {
	uint64_t capacity, used, objects_created, objects_sealed, evictions, evicted_bytes;
	uint64_t waiters, entries, holders;
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
 * unsealed objects (only its own), release every reference it holds.
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

/** coffer__ot_expire() - complete waiting gets whose deadline (monotonic us) passed. */
void coffer__ot_expire(struct coffer__ot *ot, uint64_t now_us);

/** coffer__ot_next_deadline() - earliest waiting deadline in monotonic us, or UINT64_MAX. */
uint64_t coffer__ot_next_deadline(const struct coffer__ot *ot);

/** coffer__ot_stats() - counters for QUERY. */
void coffer__ot_stats(const struct coffer__ot *ot, struct coffer__ot_stats *st);

/** coffer__ot_check() - verify internal invariants (tests): 0 or -EFAULT. O(n). */
int coffer__ot_check(const struct coffer__ot *ot);

/** coffer__now_us() - CLOCK_MONOTONIC in microseconds. */
uint64_t coffer__now_us(void);

#endif /* COFFER_TOOLS_OBJTAB_H */
