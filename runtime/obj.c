/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * runtime/obj.c - object handles and the object operations of the client API
 * (coffer_obj_*), over the batched channel (channel.c).
 *
 * Design note.
 *
 * Object handles are local: coffer_obj_open() inserts a small record (ObjectID + connection
 * cookie) into the process handle hash under COFFER_HTYPE_OBJ and does no IPC; the store
 * learns about an object only when an operation runs. Records come from a per-thread cache
 * refilled from a process-wide lock-free stack (a Treiber push by the RCU callback that
 * frees a record; a thread whose cache is empty takes the whole stack with one atomic
 * exchange, so there is no single-node pop and no ABA problem; ck_stack's push_upmc /
 * batch_pop_upmc, written with C11 atomics so ThreadSanitizer sees them), so an open/close loop on
 * many threads never touches malloc's locks after warm-up and frees made by the call_rcu worker
 * flow back to the threads that open. Fresh records are carved from per-thread chunks (see
 * chunk_new). Records are never returned to malloc: memory is bounded by
 * the peak number of handles.
 *
 * Operations resolve the object handle and the connection inside one RCU read-side section
 * with lookups that write no shared cache line (no refcount traffic), copy the ObjectID and
 * connection cookie out, and hand a request description to the channel.
 *
 * One path, not two: an operation with an event is queued on the channel of that event's
 * EQ and returns at once; with ev == NULL the same asynchronous call is made with a hidden
 * per-thread event on a hidden per-thread EQ (created on first use, destroyed at thread
 * exit by a pthread key destructor), followed by a wait on that EQ. The wait polls, so it
 * publishes the request and sleeps on the EQ's doorbell until the reply arrives.
 *
 * Memory ordering: none of its own beyond the handle hash's (RCU) and the channel's.
 * Thread-local state is touched only by its thread (and by the fork child handler, when the
 * child is single-threaded).
 *
 * Source: DAOS's daos_obj_open (local handle, no RPC) and its synchronous calls made of the
 * asynchronous ones plus a wait on a private event (dc_task / daos_event_priv).
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "eventq/event_internal.h"
#include "hashtable/hugemem.h"
#include "runtime/client.h"
#include "runtime/nocancel.h"
#include "runtime/proto_util.h"
#include "runtime/rcu.h"

struct obj_rec {
	struct coffer_hlink link;
	union {
		struct coffer_oid oid; /* while the handle exists */
		/* While cached (after the grace period that followed the close, so no reader can
		 * still be copying oid out; or never published): free-list link. Sharing the
		 * ObjectID's bytes keeps a record at 96 bytes instead of 112: fewer fresh bytes per
		 * open when every record is new memory. */
		struct obj_rec *fnext;
	};
	coffer_handle_t connh;
};

#define REC_OF_LINK(l) ((struct obj_rec *)((char *)(l)-offsetof(struct obj_rec, link)))

/* ---- record cache ---------------------------------------------------------------------- */

/* Records freed by RCU callbacks, for any thread to take. */
static _Atomic(struct obj_rec *) g_free_recs;

/* Per-thread cache (a chain taken from g_free_recs in one exchange). */
static __thread struct obj_rec *t_recs;
static __thread bool t_recs_key_set;

static pthread_once_t g_keys_once = PTHREAD_ONCE_INIT;
static pthread_key_t g_recs_key;
static pthread_key_t g_ctx_key;

static void recs_push(struct obj_rec *r)
{
	struct obj_rec *old = atomic_load_explicit(&g_free_recs, memory_order_relaxed);

	do
		r->fnext = old;
	/* Release: the record's last uses happen-before its reuse by whoever takes it (pairs
	 * with the acquire exchange in recs_take()). */
	while (!atomic_compare_exchange_weak_explicit(&g_free_recs, &old, r, memory_order_release,
						      memory_order_relaxed));
}

static struct obj_rec *recs_take(void)
{
	/* Acquire: pairs with the release CAS in recs_push(). */
	return atomic_exchange_explicit(&g_free_recs, NULL, memory_order_acquire);
}

static void recs_thread_exit(void *arg)
{
	(void)arg;
	/* Hand the rest of this thread's cache back to everyone. */
	while (t_recs) {
		struct obj_rec *r = t_recs;

		t_recs = r->fnext;
		recs_push(r);
	}
}

static void ctx_thread_exit(void *arg);

static void keys_once(void)
{
	pthread_key_create(&g_recs_key, recs_thread_exit);
	pthread_key_create(&g_ctx_key, ctx_thread_exit);
}

/* Make this thread hand its cache back to everyone when it exits. */
static void recs_key_set(void)
{
	pthread_once(&g_keys_once, keys_once);
	pthread_setspecific(g_recs_key, (void *)1);
	t_recs_key_set = true;
}

static void rec_free(struct coffer_hlink *link)
{
	struct obj_rec *r = REC_OF_LINK(link);

	coffer__rcu_gp_acquire();
	/* Records are mostly freed by the thread that closed them (hashtable/reclaim.c hands
	 * batches back), which usually opens again: keep them in its own cache, no shared
	 * write. A thread that never allocated records (the call_rcu worker) shares them. */
	if (t_recs_key_set) {
		r->fnext = t_recs;
		t_recs = r;
	} else {
		recs_push(r);
	}
}

/*
 * Fresh records are carved from per-thread chunks rather than malloc'd one by one. Profile of
 * the open phase (handles kept open, so every record is new memory): most of the time went to
 * malloc growing its heap (sysmalloc, mprotect) and to one page fault per 4 KiB. Chunks grow
 * geometrically from REC_CHUNK_MIN (a thread that opens a few handles takes 16 KiB) to one
 * hugepage (coffer__hugemem_pagesize(), 2 MiB on x86-64). All of it is hugepage-backed and
 * prefaulted (hashtable/hugemem.c): chunks smaller than a hugepage are carved from a shared
 * region of one hugepage (a relaxed fetch_add on the region's fill mark, no lock), full-size
 * chunks are mapped on their own. So a process takes one page fault (one MADV_POPULATE_WRITE)
 * per hugepage of records, where the earlier malloc'd 16 KiB .. 1 MiB chunks took one per
 * 4 KiB - 512 faults over the first ~20k opens of every thread, measured at ~8-15 us each on
 * the 2-core VM's shadow paging. Cost: the first open of the process maps and populates one
 * region (2 MiB resident; with THP, touching any byte of it would make it resident anyway).
 * Chunks are never returned while the library is loaded (as before, records stay cached):
 * memory is bounded by about twice the peak number of handles plus one region. Every region
 * and full-size chunk is on g_chunks, freed by recs_cleanup().
 */
#define REC_CHUNK_MIN ((size_t)16 << 10)

struct rec_chunk {
	struct rec_chunk *next;
	size_t bytes;
	size_t used; /* shared regions: bytes handed out, header included; atomic-relaxed */
};

/* Every region and full-size chunk of the process (Treiber push only; taken whole by
 * recs_cleanup). */
static _Atomic(struct rec_chunk *) g_chunks;
/* The shared region that sub-hugepage chunks are carved from; NULL before the first. Release
 * on install (region_new), acquire on load: the header is initialised before. */
static _Atomic(struct rec_chunk *) g_region;

static __thread char *t_carve, *t_carve_end; /* the rest of this thread's newest chunk */
static __thread size_t t_chunk_bytes;	     /* size asked for the newest chunk */

/* Records start 32 bytes into a region or chunk (the header, rounded up), so they keep
 * malloc's 16-byte alignment that struct coffer_hlink relies on. Sub-chunk sizes are
 * multiples of 16 as well. */
#define REC_CHUNK_HDR ((sizeof(struct rec_chunk) + 31) & ~(size_t)31)
#define REC_STRIDE    ((sizeof(struct obj_rec) + 15) & ~(size_t)15)

/* Map a region or chunk of @bytes and put it on g_chunks. @used: the region's initial fill. */
static struct rec_chunk *chunk_map(size_t bytes, size_t used)
{
	struct rec_chunk *c = coffer__hugemem_map(bytes), *old;

	if (!c)
		return NULL;
	c->bytes = bytes;
	c->used = used;
	old = atomic_load_explicit(&g_chunks, memory_order_relaxed);
	do
		c->next = old;
	while (!atomic_compare_exchange_weak_explicit(&g_chunks, &old, c, memory_order_release,
						      memory_order_relaxed));
	return c;
}

/* Carve [*lo, *hi) of up to @want bytes (a multiple of 16, less than a region) from the shared
 * region, installing a new region when it is full. Return: false when out of memory. */
static bool region_carve(size_t want, char **lo, char **hi)
{
	size_t rbytes = coffer__hugemem_pagesize();
	struct rec_chunk *r = atomic_load_explicit(&g_region, memory_order_acquire), *n;

	if (r) {
		/* Relaxed: the fetch_add's atomicity alone makes the pieces disjoint. */
		size_t off = __atomic_fetch_add(&r->used, want, __ATOMIC_RELAXED);

		if (off + want <= r->bytes) {
			*lo = (char *)r + off;
			*hi = *lo + want;
			return true;
		}
		/* Exactly one carver crosses the end: the tail is its (smaller) chunk. */
		if (off < r->bytes && r->bytes - off >= REC_STRIDE) {
			*lo = (char *)r + off;
			*hi = (char *)r + r->bytes;
			return true;
		}
	}
	/* Full (or none yet): map a new region (on g_chunks whatever happens next). */
	n = chunk_map(rbytes, REC_CHUNK_HDR + want);
	if (!n)
		return false;
	*lo = (char *)n + REC_CHUNK_HDR;
	/* Release: pairs with the acquire load above (the header is initialised). */
	if (atomic_compare_exchange_strong_explicit(&g_region, &r, n, memory_order_release,
						    memory_order_relaxed)) {
		*hi = *lo + want;
		return true;
	}
	/* Another thread installed a region first: ours is not shared, so rather than unmap it
	 * this thread takes all of it as its chunk. */
	*hi = (char *)n + rbytes;
	return true;
}

/* Start a new chunk for this thread. Return: false when out of memory. */
static bool chunk_new(void)
{
	size_t full = coffer__hugemem_pagesize();
	size_t bytes = t_chunk_bytes ? t_chunk_bytes * 2 : REC_CHUNK_MIN;
	char *lo, *hi;

	if (bytes >= full / 2) {
		/* A chunk of half a region or more: a hugepage of its own. */
		struct rec_chunk *c = chunk_map(full, full);

		if (!c)
			return false;
		bytes = full;
		lo = (char *)c + REC_CHUNK_HDR;
		hi = (char *)c + full;
	} else if (!region_carve(bytes, &lo, &hi)) {
		return false;
	}
	t_chunk_bytes = bytes;
	t_carve = lo;
	t_carve_end = hi;
	return true;
}

static struct obj_rec *rec_alloc(void)
{
	struct obj_rec *r = t_recs;

	if (!r) {
		r = recs_take();
		if (r && !t_recs_key_set)
			recs_key_set();
	}
	if (r) {
		t_recs = r->fnext;
		return r;
	}
	if ((size_t)(t_carve_end - t_carve) < REC_STRIDE && !chunk_new())
		return NULL;
	if (!t_recs_key_set)
		recs_key_set();
	r = (struct obj_rec *)(void *)t_carve;
	t_carve += REC_STRIDE;
	return r;
}

/* Frees the chunks when the process exits normally after its last coffer_fini() (which waited
 * for every record's free): then no handle can reach them. With the runtime still up, handles
 * may still point into them, so they are left to the process's exit. */
__attribute__((destructor)) static void recs_cleanup(void)
{
	struct rec_chunk *c;

	if (coffer_hhash_global() != NULL)
		return;
	atomic_store_explicit(&g_region, NULL, memory_order_relaxed);
	c = atomic_exchange_explicit(&g_chunks, NULL, memory_order_acquire);

	(void)recs_take();
	t_recs = NULL;
	t_carve = t_carve_end = NULL;
	while (c) {
		struct rec_chunk *x = c;

		c = c->next;
		coffer__hugemem_unmap(x, x->bytes);
	}
}

/* ---- the hidden per-thread EQ of blocking calls --------------------------------------- */

struct obj_ctx {
	coffer_handle_t eqh;
	struct coffer_event ev;
	bool stale; /* inherited across fork(): replace before use */
	bool gone;  /* its EQ no longer exists (coffer_fini() ran): replace before use */
};

static __thread struct obj_ctx *t_ctx;

static void ctx_destroy(struct obj_ctx *c)
{
	coffer_event_fini(&c->ev);
	coffer_eq_destroy(c->eqh, COFFER_EQ_FORCE);
	free(c);
}

static void ctx_thread_exit(void *arg)
{
	struct obj_ctx *c = arg;

	if (c && c == t_ctx) {
		t_ctx = NULL;
		ctx_destroy(c);
	}
}

static int ctx_get(struct obj_ctx **cp)
{
	struct obj_ctx *c = t_ctx;
	int rc;

	if (c && (c->stale || c->gone)) {
		t_ctx = NULL;
		pthread_setspecific(g_ctx_key, NULL);
		/* Also when its EQ died with an earlier runtime (gone): the event still holds
		 * a reference on that EQ's record, which keeps the destroyed handle hash alive
		 * until it is dropped here (the stale EQ handle is simply not found). */
		ctx_destroy(c);
		c = NULL;
	}
	if (c) {
		*cp = c;
		return 0;
	}
	pthread_once(&g_keys_once, keys_once);
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	rc = coffer_eq_create(&c->eqh);
	if (rc < 0) {
		free(c);
		return rc;
	}
	rc = coffer_event_init(&c->ev, c->eqh, NULL);
	if (rc < 0) {
		coffer_eq_destroy(c->eqh, 0);
		free(c);
		return rc;
	}
	t_ctx = c;
	pthread_setspecific(g_ctx_key, c);
	*cp = c;
	return 0;
}

void coffer__obj_thread_release(void)
{
	struct obj_ctx *c = t_ctx;

	if (!c)
		return;
	t_ctx = NULL;
	pthread_setspecific(g_ctx_key, NULL);
	ctx_destroy(c);
}

void coffer__obj_atfork_child(void)
{
	/* The hidden EQ's wake eventfd was shared with the parent's copy of it (a wakeup could
	 * be eaten by the other process); eventq's fork handler now gives every EQ of the
	 * child a wake fd of its own, and this one is still replaced on the next blocking
	 * call, so that the child's blocking calls start from an EQ of their own. */
	if (t_ctx)
		t_ctx->stale = true;
}

/* ---- one path for every operation ---------------------------------------------------- */

static uint64_t obj_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* The longest get timeout among @reqs in microseconds (0 without gets: the store answers
 * everything else at once); -1 when a get waits forever. */
static int64_t obj_longest_wait_us(const struct coffer__reqd *reqs, unsigned int n)
{
	int64_t longest = 0;

	for (unsigned int i = 0; i < n; i++) {
		if (reqs[i].op != COFFER_OP_GET)
			continue;
		if (reqs[i].timeout_us < 0)
			return -1;
		if (reqs[i].timeout_us > longest)
			longest = reqs[i].timeout_us;
	}
	return longest > INT64_MAX / 2 ? -1 : longest;
}

/* The connection's store timeout (COFFER_STORE_TIMEOUT_MS) in microseconds. Looked up only
 * once a blocking call has waited past its own timeout, never on the fast path. */
static uint64_t obj_store_timeout_us(coffer_handle_t connh)
{
	uint64_t ms = COFFER_CTL_TIMEOUT_MS;
	struct coffer__conn *conn;

	coffer__rcu_read_lock();
	conn = coffer__conn_lookup_rcu(connh);
	if (conn)
		ms = conn->store_timeout_ms;
	coffer__rcu_read_unlock();
	return ms * 1000;
}

/* The store did not answer in time: fail the connection (its monitor then completes every
 * pending event with -ENOTCONN; the blocking call that gave up says -ETIMEDOUT). */
static void obj_conn_give_up(coffer_handle_t connh)
{
	struct coffer__conn *conn;

	coffer__rcu_read_lock();
	conn = coffer__conn_lookup_rcu(connh);
	if (conn)
		coffer__conn_fail_silent(conn);
	coffer__rcu_read_unlock();
}

/* @launched (may be NULL): out: whether the requests went out (then @bulk is not ours). */
static int obj_exec(coffer_handle_t connh, const struct coffer__reqd *reqs, unsigned int n,
		    struct coffer__bulk *bulk, struct coffer_event *ev, bool *launched)
{
	struct obj_ctx *c;
	struct coffer_event *done;
	int rc;

	if (launched)
		*launched = false;
	if (ev) {
		if (bulk)
			bulk->ev = ev;
		rc = coffer__chan_submit(connh, ev, reqs, n, bulk);
		if (rc == 0 && launched)
			*launched = true;
		return rc;
	}
	/* From the submit to the reaped completion: a blocking call that unwound in between
	 * (cancelled inside its ppoll()) left the hidden event in flight for good, and the
	 * thread's next blocking call answered -EBUSY (runtime/nocancel.h). */
	COFFER__NO_CANCEL();
	for (int attempt = 0;; attempt++) {
		rc = ctx_get(&c);
		/* No runtime (the last connection of a program that never called coffer_init()
		 * is gone), so no hidden EQ: the connection is unknown, as the asynchronous call
		 * (chan_get()) and coffer_obj_read_oid() say - not an invalid argument. */
		if (rc == -EINVAL && coffer_hhash_global() == NULL)
			return -ENOTCONN;
		if (rc < 0)
			return rc;
		if (bulk)
			bulk->ev = &c->ev;
		rc = coffer__chan_submit(connh, &c->ev, reqs, n, bulk);
		/* The hidden EQ vanished under us (coffer_fini() + coffer_init()): renew it once.
		 */
		if ((rc == -ENOENT || rc == -EINVAL) && attempt == 0 &&
		    coffer__eq_wake_fd(c->eqh) < 0) {
			c->gone = true;
			continue;
		}
		if (rc < 0)
			return rc;
		break;
	}
	if (launched)
		*launched = true;
	/* Launched: the result arrives through the event, whatever happens to the store (its
	 * death completes it with -ENOTCONN), so this wait ends - unless the store is alive but
	 * never answers (stopped with SIGSTOP, wedged). A live store answers every request
	 * within its own timeout (0 for everything but a get), so past that plus the store
	 * timeout (COFFER_STORE_TIMEOUT_MS) the connection is failed: every pending event on
	 * it completes with -ENOTCONN, this call returns -ETIMEDOUT, and every later call on
	 * the connection -ENOTCONN. A get that waits forever (timeout < 0) is bounded only by the
	 * connection monitor's liveness probe (conn.c), which fails the connection when a
	 * stopped store does not answer it. */
	int64_t own_us = obj_longest_wait_us(reqs, n);
	uint64_t start = obj_now_us();
	bool gave_up = false, by_event = false;

	for (;;) {
		int64_t slice = own_us < 0 || gave_up ? -1 : 100 * 1000;
		uint64_t waited;

		if (!by_event) {
			rc = coffer_eq_poll(c->eqh, 1, slice, 1, &done);
			if (rc == 1)
				break;
		} else {
			bool reaped = false;

			rc = coffer_event_test(&c->ev, slice, &reaped);
			if (rc == 0 && reaped)
				break;
		}
		if (rc < 0 && rc != -EINTR && rc != -EAGAIN) {
			/* The hidden EQ's handle is gone while our event is in flight or
			 * unreaped: the runtime stopped under us (the last coffer_disconnect(),
			 * which completes our request with -ENOTCONN, then coffer_fini(); maybe a
			 * coffer_init() since). Returning now left the event COMPLETED on an EQ
			 * nobody could poll any more, and answered the poll's -EINVAL/-ENOENT
			 * instead of the request's result (tests/client/fini_race_test.c). The
			 * event still holds its EQ: wait on the event itself, and replace the
			 * hidden EQ on the next call. */
			if (by_event)
				return rc; /* cannot happen: the event is ours and initialised */
			by_event = true;
			c->gone = true;
			continue;
		}
		if (gave_up || own_us < 0)
			continue;
		waited = obj_now_us() - start;
		if (waited > (uint64_t)own_us &&
		    waited - (uint64_t)own_us > obj_store_timeout_us(connh)) {
			obj_conn_give_up(connh);
			gave_up = true;
		}
	}
	/* Our event completed because the store, alive, was given up on - by us or by the
	 * connection monitor's liveness probe, which may fire first when our own timeout is
	 * long or infinite: say why (store.h: a stopped store fails a blocking call with
	 * -ETIMEDOUT; a killed one with -ENOTCONN). */
	if (c->ev.ev_error == -ENOTCONN && (gave_up || coffer__conn_was_silent(connh)))
		return -ETIMEDOUT;
	return c->ev.ev_error;
}

/* Copies the ObjectID and connection of @oh. Return: 0; -ENOENT (no such object handle);
 * -EINVAL (not an object handle, as coffer_obj_close() says); -ENOTCONN (no runtime: an
 * object handle's connection is gone, see below). */
static int obj_resolve(coffer_handle_t oh, struct coffer_oid *oid, coffer_handle_t *connh)
{
	struct coffer_hhash *hh;
	struct coffer_hlink *link;
	int rc = -ENOENT;

	/* A connection or EQ handle is the caller's mistake, not a missing object (a get
	 * answering -ENOENT would read as "not sealed in time"). */
	if ((oh.cookie & ((1u << COFFER_HTYPE_BITS) - 1)) != (uint64_t)COFFER_HTYPE_OBJ)
		return -EINVAL;
	/* the hash is loaded inside the section: see coffer_obj_open() */
	coffer__rcu_read_lock();
	hh = coffer_hhash_global();
	if (!hh) {
		/* The last coffer_disconnect() of a program that never called coffer_init()
		 * stopped the runtime, and the handle records went with it: the connection is
		 * gone, which store.h's coffer_disconnect() says as -ENOTCONN for every operation
		 * on its object handles, as obj_exec() does for the calls by ObjectID (was
		 * -EINVAL, which seal/get/release give only for a wrong argument). */
		coffer__rcu_read_unlock();
		return -ENOTCONN;
	}
	link = coffer_hhash_lookup_rcu(hh, oh, COFFER_HTYPE_OBJ);
	if (link) {
		const struct obj_rec *r = REC_OF_LINK(link);

		*oid = r->oid;
		*connh = r->connh;
		rc = 0;
	}
	coffer__rcu_read_unlock();
	return rc;
}

static int obj_simple(coffer_handle_t oh, uint16_t op, uint16_t flags, struct coffer_event *ev)
{
	struct coffer_oid oid;
	coffer_handle_t connh;
	struct coffer__reqd d = {.op = op, .flags = flags, .oid = &oid};
	int rc = obj_resolve(oh, &oid, &connh);

	if (rc < 0)
		return rc;
	return obj_exec(connh, &d, 1, NULL, ev, NULL);
}

/* One request @d on ObjectID @oid (copied; @d's .oid is set here). */
static int oid_exec(coffer_handle_t connh, const struct coffer_oid *oid, struct coffer__reqd d,
		    struct coffer_event *ev)
{
	struct coffer_oid copy;

	if (!oid)
		return -EINVAL;
	copy = *oid;
	d.oid = &copy;
	return obj_exec(connh, &d, 1, NULL, ev, NULL);
}

static int oid_simple(coffer_handle_t connh, const struct coffer_oid *oid, uint16_t op,
		      enum coffer__out out, void *ptr, struct coffer_event *ev)
{
	return oid_exec(connh, oid, (struct coffer__reqd){.op = op, .out = out, .ptr = ptr}, ev);
}

/* ---- handles ------------------------------------------------------------------------ */

/* coffer_obj_open(): see coffer/store.h. */
COFFER_API int coffer_obj_open(coffer_handle_t connh, const struct coffer_oid *oid,
			       unsigned int flags, coffer_handle_t *oh)
{
	struct coffer_hhash *hh;
	struct coffer__conn *conn;
	struct obj_rec *r;
	int rc = 0;

	if (!oid || !oh || flags != 0)
		return -EINVAL;
	/* a handle of another type (an EQ, an object) is a wrong argument, as in every call */
	if ((connh.cookie & ((1u << COFFER_HTYPE_BITS) - 1)) != (uint64_t)COFFER_HTYPE_CONN)
		return -EINVAL;
	/*
	 * One read-side section from loading the hash to the insert: a racing last
	 * coffer_disconnect() stops the runtime, and coffer_fini() unpublishes the hash,
	 * drains it and frees it after a grace period. Inside the section the hash stays
	 * valid; an insert that came after the drain of its bucket would stay in the table
	 * forever (the table with it), so the hash must still be the published one after the
	 * insert: the drain takes the bucket lock after the unpublish, so an insert that
	 * missed it sees the change. (test_ctl_calls_vs_last_disconnect: a use-after-free and
	 * a leaked table without it.)
	 */
	coffer__rcu_read_lock();
	hh = coffer_hhash_global();
	conn = hh ? coffer__conn_lookup_rcu(connh) : NULL;
	if (!hh)
		rc = -EINVAL;
	else if (!conn)
		rc = -ENOENT;
	else
		rc = atomic_load_explicit(&conn->dead, memory_order_relaxed);
	if (rc < 0)
		goto out;
	r = rec_alloc();
	if (!r) {
		rc = -ENOMEM;
		goto out;
	}
	memset(&r->link, 0, sizeof(r->link));
	r->link.hl_free = rec_free;
	r->oid = *oid;
	r->connh = connh;
	rc = coffer_hhash_insert(hh, &r->link, COFFER_HTYPE_OBJ, oh);
	if (rc < 0) {
		/* never published: straight back to this thread's cache */
		r->fnext = t_recs;
		t_recs = r;
	} else if (coffer_hhash_global() != hh) {
		/* the connection's last disconnect stopped the runtime meanwhile */
		(void)coffer_hhash_delete_handle(hh, *oh, COFFER_HTYPE_OBJ);
		rc = -ENOENT;
	}
out:
	coffer__rcu_read_unlock();
	return rc;
}

/* coffer_obj_close(): see coffer/store.h. */
COFFER_API int coffer_obj_close(coffer_handle_t oh)
{
	struct coffer_hhash *hh;
	int rc;

	/* One walk under the stripe lock; no reference of our own to take and drop. In a
	 * read-side section: the runtime's last coffer_fini() may free the hash once it is
	 * unpublished (see coffer_obj_open). */
	coffer__rcu_read_lock();
	hh = coffer_hhash_global();
	rc = hh ? coffer_hhash_delete_handle(hh, oh, COFFER_HTYPE_OBJ) : -EINVAL;
	coffer__rcu_read_unlock();
	return rc;
}

/* ---- operations on a handle -------------------------------------------------------- */

/* The contract shared by these operations is stated once, in coffer/store.h. */

/* coffer_obj_create(): see coffer/store.h. */
COFFER_API int coffer_obj_create(coffer_handle_t oh, uint64_t size, unsigned int flags, void **data,
				 struct coffer_event *ev)
{
	struct coffer_oid oid;
	coffer_handle_t connh;
	struct coffer__reqd d = {.op = COFFER_OP_CREATE,
				 .oid = &oid,
				 .size = size,
				 .out = COFFER__OUT_CREATE,
				 .ptr = data};
	int rc;

	if (!data || (flags & ~COFFER_CREATE_REPLACE))
		return -EINVAL;
	d.flags = (uint16_t)flags;
	rc = obj_resolve(oh, &oid, &connh);
	if (rc < 0)
		return rc;
	return obj_exec(connh, &d, 1, NULL, ev, NULL);
}

/* coffer_obj_seal(): see coffer/store.h. */
COFFER_API int coffer_obj_seal(coffer_handle_t oh, unsigned int flags, struct coffer_event *ev)
{
	if (flags & ~COFFER_SEAL_RELEASE)
		return -EINVAL;
	return obj_simple(oh, COFFER_OP_SEAL, (uint16_t)flags, ev);
}

/* coffer_obj_abort(): see coffer/store.h. */
COFFER_API int coffer_obj_abort(coffer_handle_t oh, struct coffer_event *ev)
{
	return obj_simple(oh, COFFER_OP_ABORT, 0, ev);
}

/* coffer_obj_get(): see coffer/store.h. */
COFFER_API int coffer_obj_get(coffer_handle_t oh, int64_t timeout_us, const void **data,
			      uint64_t *size, struct coffer_event *ev)
{
	struct coffer_oid oid;
	coffer_handle_t connh;
	struct coffer__reqd d = {.op = COFFER_OP_GET,
				 .oid = &oid,
				 .timeout_us = timeout_us,
				 .out = COFFER__OUT_GET,
				 .ptr = (void *)data,
				 .size_out = size};
	int rc;

	if (!data)
		return -EINVAL;
	rc = obj_resolve(oh, &oid, &connh);
	if (rc < 0)
		return rc;
	return obj_exec(connh, &d, 1, NULL, ev, NULL);
}

/* coffer_obj_release(): see coffer/store.h. */
COFFER_API int coffer_obj_release(coffer_handle_t oh, struct coffer_event *ev)
{
	return obj_simple(oh, COFFER_OP_RELEASE, 0, ev);
}

/* ---- operations by ObjectID ----------------------------------------------------------- */

/*
 * Queue the @n requests @d (n >= 1) as one bulk operation completing @ev: the shared state
 * is allocated here and freed by the last reply, or here when nothing was launched.
 */
static int bulk_exec(coffer_handle_t connh, struct coffer__reqd *d, unsigned int n,
		     struct coffer_event *ev)
{
	struct coffer__bulk *bulk = malloc(sizeof(*bulk));
	bool launched;
	int rc;

	if (!bulk)
		return -ENOMEM;
	atomic_init(&bulk->remaining, n);
	atomic_init(&bulk->error, 0);
	bulk->ev = NULL;
	rc = obj_exec(connh, d, n, bulk, ev, &launched);
	/* Not launched: nobody else has seen bulk. Launched: the last reply frees it. */
	if (!launched)
		free(bulk);
	return rc;
}

/* coffer_obj_get_bulk(): see coffer/store.h. */
COFFER_API int coffer_obj_get_bulk(coffer_handle_t connh, const struct coffer_oid *oids,
				   unsigned int n, int64_t timeout_us, struct coffer_obj_buf *bufs,
				   struct coffer_event *ev)
{
	struct coffer__reqd d[COFFER_GET_BULK_MAX];
	struct coffer_oid copy[COFFER_GET_BULK_MAX];

	if (!oids || !bufs || n < 1 || n > COFFER_GET_BULK_MAX)
		return -EINVAL;
	for (unsigned int i = 0; i < n; i++) {
		copy[i] = oids[i];
		d[i] = (struct coffer__reqd){.op = COFFER_OP_GET,
					     .oid = &copy[i],
					     .timeout_us = timeout_us,
					     .out = COFFER__OUT_BULK,
					     .buf = &bufs[i]};
	}
	return bulk_exec(connh, d, n, ev);
}

/* coffer_obj_create_oid(): see coffer/store.h. */
COFFER_API int coffer_obj_create_oid(coffer_handle_t connh, const struct coffer_oid *oid,
				     uint64_t size, unsigned int flags, void **data,
				     struct coffer_event *ev)
{
	if (!data || (flags & ~COFFER_CREATE_REPLACE))
		return -EINVAL;
	return oid_exec(connh, oid,
			(struct coffer__reqd){.op = COFFER_OP_CREATE,
					      .flags = (uint16_t)flags,
					      .size = size,
					      .out = COFFER__OUT_CREATE,
					      .ptr = data},
			ev);
}

/* coffer_obj_seal_oid(): see coffer/store.h. */
COFFER_API int coffer_obj_seal_oid(coffer_handle_t connh, const struct coffer_oid *oid,
				   unsigned int flags, struct coffer_event *ev)
{
	if (flags & ~COFFER_SEAL_RELEASE)
		return -EINVAL;
	return oid_exec(connh, oid,
			(struct coffer__reqd){.op = COFFER_OP_SEAL, .flags = (uint16_t)flags}, ev);
}

/* coffer_obj_abort_oid(): see coffer/store.h. */
COFFER_API int coffer_obj_abort_oid(coffer_handle_t connh, const struct coffer_oid *oid,
				    struct coffer_event *ev)
{
	return oid_simple(connh, oid, COFFER_OP_ABORT, COFFER__OUT_NONE, NULL, ev);
}

/* coffer_obj_get_oid(): see coffer/store.h. */
COFFER_API int coffer_obj_get_oid(coffer_handle_t connh, const struct coffer_oid *oid,
				  int64_t timeout_us, const void **data, uint64_t *size,
				  struct coffer_event *ev)
{
	if (!data)
		return -EINVAL;
	return oid_exec(connh, oid,
			(struct coffer__reqd){.op = COFFER_OP_GET,
					      .timeout_us = timeout_us,
					      .out = COFFER__OUT_GET,
					      .ptr = (void *)data,
					      .size_out = size},
			ev);
}

/* coffer_obj_get_oid_vec(): see coffer/store.h. */
COFFER_API int coffer_obj_get_oid_vec(coffer_handle_t connh, const struct coffer_get_vec *gets,
				      unsigned int n, int64_t timeout_us)
{
	struct coffer__reqd d[COFFER_GET_BULK_MAX];
	struct coffer_event *evs[COFFER_GET_BULK_MAX];

	if (!gets || n < 1 || n > COFFER_GET_BULK_MAX)
		return -EINVAL;
	for (unsigned int i = 0; i < n; i++) {
		if (!gets[i].ev || !gets[i].data)
			return -EINVAL; /* no blocking form: one call, many events */
		evs[i] = gets[i].ev;
		d[i] = (struct coffer__reqd){.op = COFFER_OP_GET,
					     .oid = &gets[i].oid,
					     .timeout_us = timeout_us,
					     .out = COFFER__OUT_GET,
					     .ptr = (void *)gets[i].data,
					     .size_out = gets[i].size};
	}
	return coffer__chan_submit_vec(connh, evs, d, n);
}

/* ---- reads through the store's object index (runtime/proto.h) ---------------------- */

/* Attempts at one read whose slot changed under it before it answers -EAGAIN. */
#define INDEX_ATTEMPTS 4
/* Reads of one vector whose slots and blocks are prefetched together. */
#define INDEX_GROUP 32
/* Bytes of each object a vector prefetches before it copies: enough to start every
 * block's memory access at once; the hardware prefetcher streams the rest during the copy
 * (4096 measured no better, often worse: the prefetches themselves stall on fill buffers). */
#define INDEX_PREFETCH_BYTES 512u

/* What a lookup found: the slot, its sequence and the fields read under it. */
struct index_hit {
	const struct coffer_index_slot *x;
	uint32_t q;
	uint64_t off, size;
};

/*
 * Find @oid (hash @h) in segment @s's index. Return: 0 with *@hit filled (fields checked
 * against the sequence and the arena bounds); -EAGAIN (not there now); -ESTALE (its slot
 * changed while read: try again); -EPROTO (an entry outside the arena).
 */
static int index_find(const struct coffer__seg *s, const uint32_t *want, uint64_t h,
		      struct index_hit *hit)
{
	uint32_t mask = s->index_slots - 1;

	for (unsigned int i = 0; i < COFFER_INDEX_PROBE; i++) {
		const struct coffer_index_slot *x = &s->index[(h + i) & mask];
		uint32_t q = __atomic_load_n(&x->seq, __ATOMIC_ACQUIRE);
		uint32_t st = __atomic_load_n(&x->state, __ATOMIC_RELAXED);
		unsigned int k;

		if (q & 1)
			continue; /* being rewritten: not ours, or a miss for now */
		if (st == COFFER_INDEX_EMPTY)
			return -EAGAIN;
		if (st != COFFER_INDEX_LIVE)
			continue;
		for (k = 0; k < COFFER_OID_SIZE / 4; k++)
			if (__atomic_load_n(&x->oid[k], __ATOMIC_RELAXED) != want[k])
				break;
		if (k < COFFER_OID_SIZE / 4)
			continue;
		hit->off = __atomic_load_n(&x->offset, __ATOMIC_RELAXED);
		hit->size = __atomic_load_n(&x->size, __ATOMIC_RELAXED);
		/* the fields are one version before they are trusted as bounds */
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&x->seq, __ATOMIC_RELAXED) != q)
			return -ESTALE;
		if (hit->off > s->bytes || hit->size > s->bytes - hit->off)
			return -EPROTO;
		hit->x = x;
		hit->q = q;
		return 0;
	}
	return -EAGAIN;
}

/* Bytes of @hit's object a read at @offset of at most @len bytes copies. */
static uint64_t index_span(const struct index_hit *hit, uint64_t offset, uint64_t len)
{
	uint64_t n = offset < hit->size ? hit->size - offset : 0;

	return n < len ? n : len;
}

/*
 * Copy the span of @hit's object into @buf and check that the slot did not change
 * meanwhile: the store rewrites it before the block can be freed and reused.
 * Return: bytes copied, or -ESTALE (the copy may be a mix: try again).
 */
#ifdef COFFER__TSAN
/*
 * The copy of a seqlock read races, by design, with whoever writes the block next (the
 * store frees it once the slot is rewritten; a writer may be filling it while this copy
 * runs); the sequence check after it throws such a copy away. ThreadSanitizer cannot see
 * that protocol (the slot's writer is another process), so it would report every such
 * overlap with a writer of this process: the reads of the arena are left uninstrumented
 * here (volatile: not turned back into an intercepted memcpy), the writes into the caller's
 * buffer still go through an instrumented memcpy. TSan builds only.
 */
__attribute__((no_sanitize("thread"))) static void
index_bytes_racy(unsigned char *dst, const unsigned char *src, size_t n)
{
	const volatile unsigned char *v = src;

	for (size_t i = 0; i < n; i++)
		dst[i] = v[i];
}

static void index_bytes(void *buf, const unsigned char *src, uint64_t n)
{
	unsigned char tmp[512];

	for (uint64_t done = 0; done < n;) {
		size_t k = n - done < sizeof(tmp) ? (size_t)(n - done) : sizeof(tmp);

		index_bytes_racy(tmp, src + done, k);
		memcpy((unsigned char *)buf + done, tmp, k);
		done += k;
	}
}
#else
#define index_bytes(buf, src, n) memcpy((buf), (src), (n))
#endif

static int64_t index_copy(const struct coffer__seg *s, const struct index_hit *hit, uint64_t offset,
			  void *buf, uint64_t len)
{
	uint64_t n = index_span(hit, offset, len);

	if (n > 0)
		index_bytes(buf, s->base + hit->off + offset, n);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (__atomic_load_n(&hit->x->seq, __ATOMIC_RELAXED) != hit->q)
		return -ESTALE;
	return (int64_t)n;
}

/* A read through @hit's slot counts as a use of its object for the store's eviction (the
 * access map, runtime/proto.h): set the slot's bit, writing only when it is clear. */
static void index_mark(const struct coffer__seg *s, const struct index_hit *hit)
{
	size_t i = (size_t)(hit->x - s->index);
	uint8_t *b = &s->access[i >> 3], m = (uint8_t)(1u << (i & 7));

	if (!(__atomic_load_n(b, __ATOMIC_RELAXED) & m))
		__atomic_fetch_or(b, m, __ATOMIC_RELAXED);
}

/* One read, up to INDEX_ATTEMPTS lookups and copies. Return: as coffer_obj_read_oid(). */
static int64_t index_read(const struct coffer__seg *s, const uint8_t *oid, uint64_t offset,
			  void *buf, uint64_t len, uint64_t *sizep)
{
	uint32_t want[COFFER_OID_SIZE / 4];
	struct index_hit hit;
	uint64_t h;

	if (s->index == NULL)
		return -EAGAIN;
	memcpy(want, oid, sizeof(want));
	h = coffer__index_hash(s->index_seed, oid);
	for (unsigned int attempt = 0; attempt < INDEX_ATTEMPTS; attempt++) {
		int64_t n;
		int rc = index_find(s, want, h, &hit);

		if (rc == -ESTALE)
			continue;
		if (rc < 0)
			return rc;
		n = index_copy(s, &hit, offset, buf, len);
		if (n == -ESTALE)
			continue;
		index_mark(s, &hit);
		if (sizep)
			*sizep = hit.size;
		return n;
	}
	return -EAGAIN;
}

/* Up to INDEX_GROUP reads of a vector: prefetch every slot, look every ID up and prefetch
 * its block, then copy; a read whose slot changed on the way goes through index_read().
 * Return: the entries answered. */
static unsigned int index_read_group(const struct coffer__seg *s, struct coffer_read_vec *r,
				     unsigned int n)
{
	uint32_t want[INDEX_GROUP][COFFER_OID_SIZE / 4];
	struct index_hit hit[INDEX_GROUP];
	int found[INDEX_GROUP];
	uint64_t h[INDEX_GROUP];
	unsigned int i, ok = 0;

	for (i = 0; i < n; i++) {
		memcpy(want[i], r[i].oid.id, sizeof(want[i]));
		h[i] = coffer__index_hash(s->index_seed, r[i].oid.id);
		__builtin_prefetch(&s->index[h[i] & (s->index_slots - 1)], 0, 3);
	}
	for (i = 0; i < n; i++) {
		found[i] = index_find(s, want[i], h[i], &hit[i]);
		uint64_t span = found[i] == 0 ? index_span(&hit[i], r[i].offset, r[i].len) : 0;

		/* the address only of a span inside the block: an @offset past its end, up
		 * to UINT64_MAX, would overflow the pointer (undefined behaviour) */
		if (span > 0) {
			const char *p = (const char *)s->base + hit[i].off + r[i].offset;

			if (span > INDEX_PREFETCH_BYTES)
				span = INDEX_PREFETCH_BYTES;
			for (uint64_t b = 0; b < span; b += 64)
				__builtin_prefetch(p + b, 0, 3);
		}
	}
	for (i = 0; i < n; i++) {
		int64_t v = found[i];

		if (r[i].buf == NULL && r[i].len > 0)
			v = -EINVAL;
		else if (found[i] == 0)
			v = index_copy(s, &hit[i], r[i].offset, r[i].buf, r[i].len);
		if (v == -ESTALE) {
			v = index_read(s, r[i].oid.id, r[i].offset, r[i].buf, r[i].len, &r[i].size);
		} else if (v >= 0) {
			r[i].size = hit[i].size;
			index_mark(s, &hit[i]);
		}
		r[i].result = v;
		ok += v >= 0;
	}
	return ok;
}

/* The live connection of @connh for a read, inside the caller's RCU read-side critical
 * section; NULL with *@rc set otherwise. */
static struct coffer__conn *read_conn(coffer_handle_t connh, int *rc)
{
	struct coffer__conn *conn;

	if ((connh.cookie & ((1u << COFFER_HTYPE_BITS) - 1)) != COFFER_HTYPE_CONN) {
		*rc = -EINVAL;
		return NULL;
	}
	conn = coffer__conn_lookup_rcu(connh);
	if (!conn || atomic_load_explicit(&conn->dead, memory_order_relaxed) != 0) {
		*rc = -ENOTCONN;
		return NULL;
	}
	return conn;
}

/* coffer_obj_read_oid(): see coffer/store.h. */
COFFER_API int64_t coffer_obj_read_oid(coffer_handle_t connh, const struct coffer_oid *oid,
				       uint64_t offset, void *buf, uint64_t len, uint64_t *size)
{
	struct coffer__conn *conn;
	int rc = 0;
	int64_t n;

	if (!oid || (!buf && len > 0))
		return -EINVAL;
	coffer__rcu_read_lock();
	conn = read_conn(connh, &rc);
	n = conn ? index_read(conn->seg, oid->id, offset, buf, len, size) : rc;
	coffer__rcu_read_unlock();
	return n;
}

/* coffer_obj_read_oid_vec(): see coffer/store.h. */
COFFER_API int coffer_obj_read_oid_vec(coffer_handle_t connh, struct coffer_read_vec *reads,
				       unsigned int n)
{
	const struct coffer__seg *s;
	struct coffer__conn *conn;
	unsigned int done = 0, ok = 0;
	int rc = 0;

	if (!reads && n > 0)
		return -EINVAL;
	coffer__rcu_read_lock();
	conn = read_conn(connh, &rc);
	if (!conn) {
		coffer__rcu_read_unlock();
		return rc;
	}
	s = conn->seg;
	for (; s->index == NULL && done < n; done++)
		reads[done].result =
		    reads[done].buf == NULL && reads[done].len > 0 ? -EINVAL : -EAGAIN;
	while (done < n) {
		unsigned int m = n - done < INDEX_GROUP ? n - done : INDEX_GROUP;

		ok += index_read_group(s, reads + done, m);
		done += m;
	}
	coffer__rcu_read_unlock();
	return (int)ok;
}

/* coffer_obj_release_oid(): see coffer/store.h. */
COFFER_API int coffer_obj_release_oid(coffer_handle_t connh, const struct coffer_oid *oid,
				      struct coffer_event *ev)
{
	return oid_simple(connh, oid, COFFER_OP_RELEASE, COFFER__OUT_NONE, NULL, ev);
}

/*
 * The arena offsets of @data[0..n), pointers gets or creates through @connh returned.
 * Return: 0; -EINVAL (not a connection handle, or a pointer outside the connection's arena);
 * -ENOTCONN (unknown or disconnected connection).
 */
static int obj_data_offsets(coffer_handle_t connh, const void *const *data, unsigned int n,
			    uint64_t *off)
{
	const struct coffer__conn *conn;
	int rc = 0;

	if ((connh.cookie & ((1u << COFFER_HTYPE_BITS) - 1)) != (uint64_t)COFFER_HTYPE_CONN)
		return -EINVAL;
	coffer__rcu_read_lock();
	conn = coffer__conn_lookup_rcu(connh);
	if (!conn) {
		rc = -ENOTCONN;
	} else {
		/* conn->seg is set before the handle is published and put only after the
		 * connection's grace period: valid inside this read-side section. */
		uintptr_t base = (uintptr_t)conn->seg->base;

		for (unsigned int i = 0; i < n && rc == 0; i++) {
			uintptr_t p = (uintptr_t)data[i];

			/* 0-byte objects are at offset 0: base itself is valid even for an
			 * empty arena */
			if (!data[i] || p < base ||
			    p - base >= (conn->seg->bytes ? conn->seg->bytes : 1))
				rc = -EINVAL;
			else
				off[i] = (uint64_t)(p - base);
		}
	}
	coffer__rcu_read_unlock();
	return rc;
}

/* coffer_obj_release_data(): see coffer/store.h. */
COFFER_API int coffer_obj_release_data(coffer_handle_t connh, const struct coffer_oid *oid,
				       const void *data, struct coffer_event *ev)
{
	uint64_t off = 0;
	int rc;

	if (!data || !oid)
		return -EINVAL;
	rc = obj_data_offsets(connh, &data, 1, &off);
	if (rc < 0)
		return rc;
	/* BY_OFFSET: the store drops the reference on exactly the version at @off (protocol
	 * v1, additive), not the current one of the ID. */
	return oid_exec(connh, oid,
			(struct coffer__reqd){.op = COFFER_OP_RELEASE,
					      .flags = COFFER_RELEASE_BY_OFFSET,
					      .size = off},
			ev);
}

/* @n releases in one batch on one event: by ID, or (@data) each of the exact object its
 * pointer lies in (COFFER_RELEASE_BY_OFFSET). */
static int release_bulk(coffer_handle_t connh, const struct coffer_oid *oids,
			const void *const *data, unsigned int n, struct coffer_event *ev)
{
	struct coffer__reqd d[COFFER_GET_BULK_MAX];
	struct coffer_oid copy[COFFER_GET_BULK_MAX];
	uint64_t off[COFFER_GET_BULK_MAX];
	int rc;

	if (!oids || n < 1 || n > COFFER_GET_BULK_MAX)
		return -EINVAL;
	if (data && (rc = obj_data_offsets(connh, data, n, off)) < 0)
		return rc;
	for (unsigned int i = 0; i < n; i++) {
		copy[i] = oids[i];
		d[i] = (struct coffer__reqd){
		    .op = COFFER_OP_RELEASE, .oid = &copy[i], .out = COFFER__OUT_BULK_NONE};
		if (data) {
			d[i].flags = COFFER_RELEASE_BY_OFFSET;
			d[i].size = off[i];
		}
	}
	return bulk_exec(connh, d, n, ev);
}

/* coffer_obj_release_oid_bulk(): see coffer/store.h. */
COFFER_API int coffer_obj_release_oid_bulk(coffer_handle_t connh, const struct coffer_oid *oids,
					   unsigned int n, struct coffer_event *ev)
{
	return release_bulk(connh, oids, NULL, n, ev);
}

/* coffer_obj_release_data_bulk(): see coffer/store.h. */
COFFER_API int coffer_obj_release_data_bulk(coffer_handle_t connh, const struct coffer_oid *oids,
					    const void *const *data, unsigned int n,
					    struct coffer_event *ev)
{
	if (!data)
		return -EINVAL;
	return release_bulk(connh, oids, data, n, ev);
}

/* coffer_obj_delete(): see coffer/store.h. */
COFFER_API int coffer_obj_delete(coffer_handle_t connh, const struct coffer_oid *oid,
				 struct coffer_event *ev)
{
	return oid_simple(connh, oid, COFFER_OP_DELETE, COFFER__OUT_NONE, NULL, ev);
}

/* coffer_obj_contains(): see coffer/store.h. */
COFFER_API int coffer_obj_contains(coffer_handle_t connh, const struct coffer_oid *oid,
				   bool *present, struct coffer_event *ev)
{
	if (!present)
		return -EINVAL;
	return oid_simple(connh, oid, COFFER_OP_CONTAINS, COFFER__OUT_CONTAINS, present, ev);
}

/* ---- reservations: write first, name later (protocol v5) ------------------------------ */

/* RESERVE and UNRESERVE carry no ObjectID: the field must be zero on the wire. */
static const struct coffer_oid no_oid;

/* coffer_obj_reserve(): see coffer/store.h. */
COFFER_API int coffer_obj_reserve(coffer_handle_t connh, uint64_t size, unsigned int n, void **data,
				  struct coffer_event *ev)
{
	struct coffer__reqd d[COFFER_GET_BULK_MAX];

	if (!data || size == 0 || n < 1 || n > COFFER_GET_BULK_MAX)
		return -EINVAL;
	if ((connh.cookie & ((1u << COFFER_HTYPE_BITS) - 1)) != (uint64_t)COFFER_HTYPE_CONN)
		return -EINVAL;
	for (unsigned int i = 0; i < n; i++) {
		data[i] = NULL;
		d[i] = (struct coffer__reqd){.op = COFFER_OP_RESERVE,
					     .oid = &no_oid,
					     .size = size,
					     .out = COFFER__OUT_BULK_CREATE,
					     .ptr = &data[i]};
	}
	return bulk_exec(connh, d, n, ev);
}

/* coffer_obj_put(): see coffer/store.h. */
COFFER_API int coffer_obj_put(coffer_handle_t connh, const struct coffer_oid *oid, const void *data,
			      uint64_t size, unsigned int flags, struct coffer_event *ev)
{
	uint64_t off = 0;
	int rc;

	if (!oid || !data || size == 0 || (flags & ~COFFER_CREATE_REPLACE))
		return -EINVAL;
	rc = obj_data_offsets(connh, &data, 1, &off);
	if (rc < 0)
		return rc;
	return oid_exec(
	    connh, oid,
	    (struct coffer__reqd){
		.op = COFFER_OP_PUT, .flags = (uint16_t)flags, .size = size, .offset = off},
	    ev);
}

/* coffer_obj_unreserve(): see coffer/store.h. */
COFFER_API int coffer_obj_unreserve(coffer_handle_t connh, const void *data,
				    struct coffer_event *ev)
{
	uint64_t off = 0;
	int rc;

	if (!data)
		return -EINVAL;
	rc = obj_data_offsets(connh, &data, 1, &off);
	if (rc < 0)
		return rc;
	return oid_exec(connh, &no_oid,
			(struct coffer__reqd){.op = COFFER_OP_UNRESERVE, .offset = off}, ev);
}
