/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * runtime/client.h - private interfaces of the client side of coffer-store: the connection
 * (conn.c), the batched shared-memory channel (channel.c) and the object API (obj.c).
 * Nothing here is part of the public API or of the wire protocol (runtime/proto.h).
 *
 * Object graph and lifetimes:
 *   connection (handle hash, COFFER_HTYPE_CONN)
 *     |-- arena segment (process-wide table keyed by segment id and arena file, refcounted)
 *     |-- channels[] (one per EQ used with the connection; RCU-published vector)
 *   EQ binding (one per EQ that has channels; process-wide list; the EQ's progress hook)
 *     |-- channels[] (one per connection used with the EQ; RCU-published vector)
 *   object handle (handle hash, COFFER_HTYPE_OBJ): ObjectID + connection cookie, no IPC.
 */
#ifndef COFFER_RUNTIME_CLIENT_H
#define COFFER_RUNTIME_CLIENT_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <coffer/event.h>
#include <coffer/hash.h>
#include <coffer/store.h>

#include "runtime/proto.h"

/* ---- a small test-and-test-and-set spinlock ------------------------------------------ */

/*
 * Held only for a handful of stores (a ring entry, a slot, an index), never across a
 * syscall or an allocation. Spins with a CPU relax, then yields: coffer runs inside hosts
 * with more threads than cores, where a preempted holder must not be spun on for a quantum.
 * Acquire on success pairs with the release in coffer__spin_unlock().
 */
struct coffer__spin {
	atomic_uint locked;
};

static inline bool coffer__spin_trylock(struct coffer__spin *s)
{
	unsigned int zero = 0;

	return atomic_load_explicit(&s->locked, memory_order_relaxed) == 0 &&
	       atomic_compare_exchange_strong_explicit(&s->locked, &zero, 1, memory_order_acquire,
						       memory_order_relaxed);
}

static inline void coffer__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

static inline void coffer__spin_lock(struct coffer__spin *s)
{
	unsigned int spins = 0;

	while (!coffer__spin_trylock(s)) {
		if (++spins < 64)
			coffer__cpu_relax();
		else
			sched_yield();
	}
}

static inline void coffer__spin_unlock(struct coffer__spin *s)
{
	atomic_store_explicit(&s->locked, 0, memory_order_release);
}

/* ---- arena segments (conn.c) -------------------------------------------------------- */

/* One mapping of a store's arena, shared by every connection of this process to it. */
struct coffer__seg {
	uint32_t id;	   /* segment id from HELLO_REPLY */
	unsigned int refs; /* connections using it; under conn.c's g_seg_lock */
	dev_t dev;	   /* the arena file's identity (fstat of the fd HELLO_REPLY passed): */
	ino_t ino;	   /* a second connection shares the mapping only if it is this file */
	uint8_t *base;
	uint64_t bytes;
	/* The store's object index (runtime/proto.h), mapped read-only; NULL: none. */
	const struct coffer_index_slot *index;
	uint64_t index_seed;
	uint32_t index_slots;
	/* Its access map (v6, runtime/proto.h): a read through slot i sets bit i, writable. */
	uint8_t *access;
	struct coffer__seg *next;
};

/* ---- channels (channel.c) ------------------------------------------------------------- */

struct coffer__conn;
struct coffer__chan;

/* Output of one request, written by the reply before the event completes. */
enum coffer__out {
	COFFER__OUT_NONE = 0,
	COFFER__OUT_CREATE,	 /* void **ptr (CREATE and RESERVE) */
	COFFER__OUT_GET,	 /* const void **ptr, uint64_t *size (optional) */
	COFFER__OUT_BULK,	 /* struct coffer_obj_buf *buf, shared struct coffer__bulk */
	COFFER__OUT_CONTAINS,	 /* bool *present */
	COFFER__OUT_BULK_NONE,	 /* shared struct coffer__bulk only (release_oid_bulk) */
	COFFER__OUT_BULK_CREATE, /* void **ptr (NULL on failure), shared struct coffer__bulk
				  * (coffer_obj_reserve) */
};

/* Shared state of a coffer_obj_get_bulk() or coffer_obj_release_oid_bulk() call: the event
 * completes with the last reply. */
struct coffer__bulk {
	atomic_uint remaining; /* acq_rel decrement: the last one sees every buf written */
	atomic_int error;      /* get_bulk: the first transport error (-ENOTCONN); release_oid_bulk:
				* -ENOTCONN, else the first failure's status; relaxed, read by the
				* last reply (ordered by the acq_rel decrement) */
	struct coffer_event *ev;
};

/* One request as the object API describes it to the channel. */
struct coffer__reqd {
	uint16_t op;	/* enum coffer_op */
	uint16_t flags; /* wire flags */
	const struct coffer_oid *oid;
	uint64_t size;
	int64_t timeout_us;
	uint64_t offset; /* PUT, UNRESERVE: the reservation's arena offset */
	enum coffer__out out;
	void *ptr;		    /* see enum coffer__out */
	uint64_t *size_out;	    /* COFFER__OUT_GET */
	struct coffer_obj_buf *buf; /* COFFER__OUT_BULK */
};

/*
 * coffer__chan_submit() - launch @ev and queue @n requests on the channel of (@connh, the
 * EQ of @ev), opening that channel first when needed.
 * @bulk: NULL, or the shared completion state of n > 1 requests (get_bulk).
 * Return: 0 when the event was launched (its result then arrives through the event, even
 * when the connection dies before the store answers); before launch: -ENOTCONN (no such or
 * dead connection), -EAGAIN (channel full: fewer than @n free slots), -EBUSY/-ENOENT/-EINVAL
 * (from the event launch), -ENOMEM, -EPROTO, or an error from opening the channel.
 * Context: any thread; not inside an RCU read-side section.
 */
int coffer__chan_submit(coffer_handle_t connh, struct coffer_event *ev,
			const struct coffer__reqd *reqs, unsigned int n, struct coffer__bulk *bulk);

/*
 * coffer__chan_submit_vec() - launch evs[i] for reqs[i] (one request per event, i < @n) on
 * the channel of (@connh, the EQ of the events), with one channel pin and one submit-lock
 * round trip for the whole vector.
 * @evs: @n events, all on the same EQ (else -EINVAL, nothing launched).
 * @n: 1..COFFER_GET_BULK_MAX.
 * Return: k >= 1 when evs[0..k) were launched (k < @n: the channel had room for only k, or
 * the launch of evs[k] failed; evs[k..n) untouched); when nothing was launched, the errors of
 * coffer__chan_submit() for a vector of one.
 * Context: any thread; not inside an RCU read-side section.
 */
int coffer__chan_submit_vec(coffer_handle_t connh, struct coffer_event *const *evs,
			    const struct coffer__reqd *reqs, unsigned int n);

/* Frees every EQ binding that has no channel left and whose EQ was destroyed (eventq
 * detached its hook then). Context: any thread; takes coffer__client_lock. */
void coffer__chan_release_bindings(void);
/* Publishes every unpublished request of every channel of @conn (coffer_flush()). */
void coffer__conn_flush_channels(struct coffer__conn *conn);
/* Completes every pending request of @conn's channels with @err; the peer is gone. */
void coffer__conn_fail_channels(struct coffer__conn *conn, int err);
/* Closes every channel of @conn (disconnect). Not inside an RCU read-side section. */
void coffer__conn_close_channels(struct coffer__conn *conn);
/* In a fork child (single-threaded): marks every channel of @conn unusable without touching
 * shared rings, and completes the child's copies of the requests in flight with -ENOTCONN. */
void coffer__conn_fork_channels(struct coffer__conn *conn);

/* Fork child, single-threaded, coffer__client_lock's state as the prepare handler left it:
 * resets every EQ binding's lock and armed count (the parent's pollers are not here). */
void coffer__chan_bindings_fork_child(void);
/*
 * coffer__conn_progress() - for the liveness probe: the number of replies taken so far from
 * @conn's channels (a sum that only grows while the channel set is unchanged), and in
 * *@waiting whether some channel has published requests still unanswered. Hints: read
 * without the channels' locks. Context: any thread; not inside an RCU read-side section.
 */
uint64_t coffer__conn_progress(struct coffer__conn *conn, bool *waiting);
/* Channel statistics for tests: replies with unknown tags, requests in flight. */
uint64_t coffer__conn_stray_replies(coffer_handle_t connh);

/* ---- connections (conn.c) ------------------------------------------------------------ */

struct coffer__chanv; /* RCU-published vector of channels (channel.c) */

struct coffer__conn {
	struct coffer_hlink link;
	pthread_mutex_t ctl_lock; /* the control socket: one request/reply exchange at a time */
	int sock;
	uint32_t segment;
	struct coffer__seg *seg;
	struct coffer_doorbell *doorbell; /* HELLO_REPLY's page: which channels published */
	int store_bell; /* HELLO_REPLY's request doorbell (eventfd), for every channel (v3) */
	uint32_t max_channels;
	uint32_t max_ring_entries;
	uint32_t batch;		   /* publish threshold (requests) */
	uint32_t store_timeout_ms; /* control answers; liveness probe (COFFER_STORE_TIMEOUT_MS) */
	atomic_int dead;	   /* 0, or the error every new request gets (-ENOTCONN) */
	atomic_int fail_cause;	   /* why it was failed first: COFFER__FAIL_* (see conn_fail) */
	bool forked; /* inherited across fork(): never touch the socket or the rings */
	bool monitor_started;
	atomic_int stopping; /* disconnect asks the monitor to exit; release/acquire */
	pthread_t monitor;
	int stop_fd;		   /* eventfd that tells the monitor to exit */
	pthread_mutex_t chan_lock; /* serialises channel open/close of this connection */
	_Atomic(struct coffer__chanv *) chans; /* RCU-published; replaced under chan_lock */
	uint32_t nchans;		       /* under chan_lock */
	struct coffer__conn *gnext;	       /* process-wide list, under the global lock */
	coffer_handle_t self;
};

/* Returns the live connection of @connh, or NULL. Context: inside an RCU read-side section. */
struct coffer__conn *coffer__conn_lookup_rcu(coffer_handle_t connh);

/*
 * coffer__conn_ctl() - one control exchange on the socket: send a message of @type with
 * @body (and @send_fd when >= 0), receive a reply of @reply_type into @rbody (exactly
 * @rlen bytes) and up to @nfds passed descriptors into @fds (-1 when absent).
 * Return: 0; -ENOTCONN (socket gone), -ETIMEDOUT (the store did not take the request, or
 * did not answer it, within conn->store_timeout_ms - one deadline for the send and every
 * receive, unsolicited messages skipped on the way included; what came by then still counts:
 * @conn is failed as silent), -EPROTO
 * (malformed reply; also any message with fds
 * when @nfds is 0), -EMFILE (@nfds > 0 only: this process is at its fd limit: the reply came
 * but its fds could not be received; @rbody then holds the reply's body, and the store has
 * done what was asked), or the status of an ERROR
 * message from the store (@rbody untouched; -EMFILE there: the store is out of fds).
 * Context: any thread; takes conn->ctl_lock; blocks on the socket.
 */
int coffer__conn_ctl(struct coffer__conn *conn, uint16_t type, const void *body, uint32_t blen,
		     int send_fd, uint16_t reply_type, void *rbody, uint32_t rlen, int *fds,
		     unsigned int nfds);

/* Marks @conn dead and completes everything pending on it with -ENOTCONN (idempotent). Every
 * later call on it gets -ENOTCONN, whatever killed it; only the call that found the cause
 * (a control exchange or blocking call that timed out: -ETIMEDOUT; a malformed reply:
 * -EPROTO) reports the cause itself, and so do blocking calls pending on a store that was
 * given up on for its silence (coffer__conn_fail_silent()). */
void coffer__conn_fail(struct coffer__conn *conn);

/* coffer__conn_fail() because the store, alive, did not answer in time (a control exchange,
 * the liveness probe or a blocking call timed out: stopped or wedged, not gone). A blocking
 * call whose request was pending then says -ETIMEDOUT rather than -ENOTCONN (store.h), even
 * when another thread or the monitor found it; later calls still get -ENOTCONN. The first
 * failure's cause wins: a connection already failed for another reason (the store's socket
 * hung up: killed) stays not silent. */
void coffer__conn_fail_silent(struct coffer__conn *conn);

/* Whether @connh's connection was failed by coffer__conn_fail_silent(); false when unknown.
 * Context: any thread. */
bool coffer__conn_was_silent(coffer_handle_t connh);

/*
 * Destroys the calling thread's hidden EQ of blocking calls now rather than at thread exit
 * (tests that count handles; a thread about to call coffer_fini()).
 */
void coffer__obj_thread_release(void);

/* In a fork child: forget the hidden per-thread EQ inherited from the parent (obj.c). */
void coffer__obj_atfork_child(void);

/*
 * coffer__event_eq() - the EQ an event was initialised on (needed to pick the channel).
 * Provided by eventq/ (see the report: requested addition to eventq/event_internal.h).
 * Return: 0, or -EINVAL for an event that was never initialised.
 */
int coffer__event_eq(const struct coffer_event *ev, coffer_handle_t *eqh);

/* The process-wide lock guarding the connection list and EQ bindings (not the segments:
 * conn.c's g_seg_lock, see there why). */
extern pthread_mutex_t coffer__client_lock;

#endif /* COFFER_RUNTIME_CLIENT_H */
