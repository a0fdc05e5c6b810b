/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * runtime/channel.c - the client side of the batched shared-memory channel to coffer-store.
 *
 * Design note.
 *
 * One channel per (connection, EQ). Completions are reaped by polling an EQ, so the pollers
 * of an EQ drain exactly the reply ring of that EQ's channel: no reply ever has to be handed
 * from one thread's ring to another thread's EQ, and threads that do not share an EQ share
 * nothing on the data path (no lock shared by all threads; issue 6 item 2). Threads that
 * share an EQ share its channel under a per-channel submit spinlock. Blocking calls use a
 * hidden per-thread EQ (obj.c), hence a per-thread channel. An EQ used with several
 * connections gets one channel per connection; the EQ's progress hook is a "binding" that
 * walks that short list. The arena is mapped once per process (conn.c), never per channel.
 *
 * Rings (runtime/proto.h): the client produces requests and consumes replies. Tags are
 * (generation << 32 | slot index) into a per-channel slot table of `entries` slots that
 * holds the event and the output pointers of every request in flight. In-flight requests
 * (reserved + pending) never exceed `entries`, so neither ring can overflow: a request slot
 * of the ring is reusable once its reply came back (the store read the request before it
 * answered), and the store writes exactly one reply per request. A full channel makes an
 * asynchronous call return -EAGAIN before its event is launched.
 *
 * Locks, in order: conn->chan_lock -> coffer__client_lock (open/close only);
 * chan->reap -> chan->submit (the fail path only). The submit spinlock guards prod,
 * published, inflight, the free-slot stack, sleepers and dead; it covers a few stores and is
 * never held across a syscall (doorbells are rung after unlocking). The reap spinlock makes
 * one poller at a time the consumer of the reply ring (others trylock and move on).
 *
 * Slot states: FREE -> RESERVED (submit lock) -> PENDING (submit lock, with the request
 * written to the ring) -> FREE (reap lock). A reply is accepted only for a PENDING slot of
 * the same generation; anything else is counted as stray and ignored, so a confused or
 * hostile store cannot complete an event twice or write through a stale output pointer.
 *
 * Memory ordering (ring indices live in shared memory and are accessed with __atomic
 * builtins; the store is another process):
 *  - request entries are plain stores, then req.prod release-store (pairs with the store's
 *    acquire load of prod); replies are read after rep.prod acquire-load (pairs with the
 *    store's release store) and copied out before rep.cons release-store (pairs with the
 *    store's acquire load of cons before reusing the entry);
 *  - doorbells (Dekker, proto.h): publish prod, seq_cst fence, set the channel's bit on the
 *    connection's doorbell page, read the page's store_sleeping;
 *    arm: store rep.consumer_sleeping = 1, seq_cst fence, read rep.prod. Each fence pairs
 *    with the store's fence on the other side of the same handshake;
 *  - a slot's fields are written before its state is release-stored PENDING; the reaper
 *    acquire-loads the state before reading the fields.
 *
 * Lifetime: channel and vector memory is RCU-protected (urcu-bp). Submitters find a channel
 * inside a read-side section and queue their requests before they leave it (chan_get());
 * progress hooks walk the binding's vector inside a read-side section. Closing unpublishes
 * the channel from both vectors, waits for a grace period, and only then unmaps and frees.
 * Bindings are freed only once their EQ is gone (no poller can call their hook then).
 *
 * Progress: submit is blocking (spinlock) but bounded; progress never blocks (trylock); the
 * fail path (store death) takes the reap lock and completes every pending event with
 * -ENOTCONN, so nothing waits forever for a dead store.
 *
 * Sources: virtio's avail/used event suppression (doorbell only when the peer sleeps),
 * DPDK rte_ring's burst shape, io_uring's SQ/CQ split with user-chosen tags.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runtime/rcu.h"

#include "eventq/eq_impl.h"
#include "eventq/event_internal.h"
#include "runtime/client.h"
#include "runtime/env.h"
#include "runtime/nocancel.h"
#include "runtime/proto_util.h"

/* Entries asked for each ring (the store may cap it at max_ring_entries). */
#define CHAN_RING_ENTRIES 512u
/*
 * Requests queued before they are published while the store is awake on the ring (it
 * polls, so publishing is a release store and a fence, no syscall): the store starts on
 * the first few while the caller still submits the rest, and both cores work at once.
 * Measured, 1 client thread at batch 32 on the 2-core VM: 1.0-1.3 M ops/s publishing every
 * 32 (COFFER_BATCH), 1.75-2.0 M every 8, no better at 4. A sleeping store is woken only at
 * COFFER_BATCH (or on poll/flush), one doorbell per batch.
 */
#define CHAN_EARLY_PUBLISH 8u
/* Replies handled per reap round before events are completed outside the reap lock. */
#define CHAN_REAP_CHUNK 64u
/*
 * Default busy-poll before sleeping, in microseconds (COFFER_POLL_SPIN_US overrides; 0 turns
 * it off). The poller spins only while the store is awake for one of its channels (it has
 * not set store_sleeping on the connection's page: it busy-polls its rings itself, for
 * COFFER_STORE_SPIN_US, default 50 us, after activity), so a reply is a few microseconds
 * away and a sleep + eventfd doorbell (two syscalls and a context switch each way, about
 * 1.4 us per syscall on the 2-core test VM) would cost more than the wait. A store that
 * announces sleep stops the spin at once: then it needs a core to wake up on, and the
 * poller gives its own back. History: a fixed 20 us spin, which also spun while the store
 * slept, made batch-1 round trips 4x slower on a loaded 2-core host.
 */
#define CHAN_SPIN_US_DEFAULT 50u
/* Spin rounds (64 pauses each, about 1-2 us) between sched_yield() calls while spinning. */
#define CHAN_SPIN_YIELD_ROUNDS 4u

enum { SLOT_FREE = 0, SLOT_RESERVED = 1, SLOT_PENDING = 2 };

struct chan_slot {
	atomic_uint state; /* release PENDING / acquire in the reaper */
	uint32_t gen;
	uint16_t op;
	uint8_t out;	      /* enum coffer__out */
	uint64_t create_size; /* COFFER__OUT_CREATE: the size asked for */
	void *ptr;
	uint64_t *size_out;
	struct coffer_obj_buf *buf;
	struct coffer__bulk *bulk;
	struct coffer_event *ev;
};

/* One cache line a slot: the submitter fills it and the reaper reads it, per request. */
_Static_assert(sizeof(struct chan_slot) == 64, "a channel slot is one cache line");

struct coffer__chan {
	/* submit side, under submit */
	struct coffer__spin submit;
	uint32_t prod;	    /* next request index to fill */
	uint32_t published; /* last prod made visible to the store */
	uint32_t inflight;  /* reserved + pending slots */
	uint32_t nfree;
	uint32_t sleepers; /* pollers of the EQ that armed and sleep */
	bool dead;
	atomic_uint unpub; /* relaxed hint: prod != published (progress checks it lock-free) */

	/* consumer side */
	alignas(64) struct coffer__spin reap;
	atomic_uint rep_cons; /* written under reap; read relaxed by arm() */

	/* immutable after open */
	alignas(64) struct coffer__conn *conn;
	coffer_handle_t eqh;
	uint32_t id;
	uint32_t entries;
	uint32_t mask;
	int store_bell;
	struct coffer_doorbell *db; /* the connection's doorbell page (conn->doorbell) */
	struct coffer_chan_shm *shm;
	struct coffer_req *reqs;
	const struct coffer_rep *reps; /* the hot fields above share one cache line */
	struct chan_slot *slots;
	uint32_t *free; /* free slot stack, under submit */
	size_t shm_bytes;
	bool forked;		    /* set in a fork child (single-threaded then) */
	atomic_uint_fast64_t stray; /* replies with unknown tags, relaxed statistics */
	/* chan_fail() finished: every request got its answer or the error, none can be queued,
	 * and what is left in the reply ring (a corrupt ring's garbage) is nobody's. The EQ's
	 * hooks skip the channel then (chan_gone()). Release store / acquire loads. */
	atomic_bool failed;
};

struct coffer__chanv {
	unsigned int n;
	struct coffer__chan *v[];
};

/* The progress hook of one EQ: its channels (one per connection). */
struct chan_binding {
	coffer_handle_t eqh;
	_Atomic(struct coffer__chanv *) chans; /* RCU-published, replaced under client lock */
	/* Orders arm()/disarm() against attach: every channel in chans counts exactly the
	 * `armed` pollers in its sleepers. Without it a poller that armed [A] and disarmed
	 * [A, B] took away the count of another that armed [A, B] meanwhile, and the store
	 * stopped ringing B for it (found by reading, adversarial helper). A mutex: arm()
	 * rings doorbells under it. Order: coffer__client_lock -> lock -> chan->submit. */
	pthread_mutex_t lock;
	unsigned int armed; /* pollers between arm() and disarm(), under lock */
	struct coffer__eq_progress hook;
	struct chan_binding *next; /* under coffer__client_lock */
	/* One for g_bindings, one for the EQ's hook (dropped by its release(), once no
	 * poller can be inside the hook): a binding unlinked while its EQ is being destroyed
	 * (CLOSING: a COFFER_EQ_FORCE drain still sleeps through arm()/disarm()) stays
	 * allocated until the EQ has detached it. */
	_Atomic unsigned int refs;
};

static struct chan_binding *g_bindings; /* under coffer__client_lock */

/* ---- vectors ----------------------------------------------------------------------------- */

static struct coffer__chanv *chanv_with(const struct coffer__chanv *old, struct coffer__chan *ch)
{
	unsigned int n = old ? old->n : 0;
	struct coffer__chanv *v = malloc(sizeof(*v) + (n + 1) * sizeof(v->v[0]));

	if (!v)
		return NULL;
	if (n)
		memcpy(v->v, old->v, n * sizeof(v->v[0]));
	v->v[n] = ch;
	v->n = n + 1;
	return v;
}

/* Returns the vector without @ch; NULL when it would be empty (or on ENOMEM: *err set). */
static struct coffer__chanv *chanv_without(const struct coffer__chanv *old,
					   const struct coffer__chan *ch, int *err)
{
	struct coffer__chanv *v;
	unsigned int i, k = 0;

	*err = 0;
	if (!old || old->n <= 1)
		return NULL;
	v = malloc(sizeof(*v) + (old->n - 1) * sizeof(v->v[0]));
	if (!v) {
		*err = -ENOMEM;
		return NULL;
	}
	for (i = 0; i < old->n; i++)
		if (old->v[i] != ch && k < old->n - 1)
			v->v[k++] = old->v[i];
	v->n = k;
	return v;
}

/* ---- ring helpers ----------------------------------------------------------------------- */

/*
 * Rings the store's request doorbell @fd (an eventfd) without blocking: a full counter
 * (0xfffffffffffffffe) already means "readable", a wake-up is pending, so nothing needs
 * writing then; poll(2) with a zero timeout tells (POLLOUT: not full). The write alone is
 * not enough: O_NONBLOCK belongs to the open file description, which the store created and
 * shares, so a store that clears it (or passes the eventfd without it) and fills the counter
 * would make write(2) sleep until someone reads - forever, holding every thread that rings.
 * Setting O_NONBLOCK ourselves would not help: the store can clear it again at any time.
 * What remains: a store that fills the counter in the instant between our poll and our
 * write can block that one write; no timer bounds it (a signal-based bound like the store's
 * wake_efd() is not something a library may install). An honest store creates it
 * EFD_NONBLOCK and only reads it (tools/store.c). A dead store is found by the connection
 * monitor, not here.
 */
static void chan_ring_bell(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	uint64_t one = 1;
	ssize_t r;
	int n;
	COFFER__NO_CANCEL(); /* poll(2), write(2) (runtime/nocancel.h) */

	do
		n = poll(&p, 1, 0);
	while (n < 0 && errno == EINTR);
	if (n == 0 || (n > 0 && !(p.revents & POLLOUT)))
		return; /* full: the store is woken anyway */
	do
		r = write(fd, &one, sizeof(one));
	while (r < 0 && errno == EINTR); /* EAGAIN (full since): woken anyway */
}

/*
 * Makes every filled request visible. Return: true when the store sleeps and its doorbell
 * must be rung (after the caller dropped the submit lock). Context: holds ch->submit.
 */
static bool chan_publish_locked(struct coffer__chan *ch)
{
	if (ch->prod == ch->published)
		return false;
	/* The store (another process) orders our requests before its replies to anyone, e.g.
	 * a release here before another thread's create gets the freed memory. ThreadSanitizer
	 * cannot see that: model it as release (here) / acquire (on every reply) on the arena.
	 * This may hide races between threads, never invent them. */
	coffer__tsan_release(ch->conn->seg);
	/* Release: the entries written above become visible before prod (pairs with the
	 * store's acquire load of req.prod). */
	__atomic_store_n(&ch->shm->req.prod, ch->prod, __ATOMIC_RELEASE);
	ch->published = ch->prod;
	atomic_store_explicit(&ch->unpub, 0, memory_order_relaxed);
	/* Dekker with the store going to sleep (proto.h, struct coffer_doorbell): our bit (a
	 * seq_cst RMW) before our seq_cst read of store_sleeping pairs with the store's flag
	 * store, fence, and re-read of the doorbell words: one of us sees the other. A relaxed
	 * read could pass the bit's store on weakly ordered CPUs (a lost wake-up); on x86 a
	 * seq_cst load is a plain load. The fence orders prod before the bit's load (a bit
	 * found already set is exchanged only later, and the store then polls our ring). */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	coffer__doorbell_ring(ch->db, ch->id);
	return __atomic_load_n(&ch->db->store_sleeping, __ATOMIC_SEQ_CST) != 0;
}

static void chan_publish(struct coffer__chan *ch)
{
	bool bell;

	if (!atomic_load_explicit(&ch->unpub, memory_order_relaxed))
		return;
	coffer__spin_lock(&ch->submit);
	bell = !ch->dead && chan_publish_locked(ch);
	coffer__spin_unlock(&ch->submit);
	if (bell)
		chan_ring_bell(ch->store_bell);
}

static void chan_free_slots(struct coffer__chan *ch, const uint32_t *idx, unsigned int n)
{
	unsigned int i;

	if (!n)
		return;
	coffer__spin_lock(&ch->submit);
	for (i = 0; i < n; i++)
		ch->free[ch->nfree++] = idx[i];
	/* relaxed atomic store: chanv_spin() reads it without the lock, as a hint */
	__atomic_store_n(&ch->inflight, ch->inflight - n, __ATOMIC_RELAXED);
	coffer__spin_unlock(&ch->submit);
}

/* ---- completion ---------------------------------------------------------------------- */

struct chan_done {
	struct coffer_event *ev;
	struct coffer__bulk *bulk; /* freed after its event completed */
	int rc;
};

/*
 * Writes the outputs of @slot for result @rc (the reply @rep when rc == 0) and returns the
 * event to complete (in @d), if this was the last reply it waited for. Context: reap lock.
 */
static bool chan_finish_slot(struct coffer__chan *ch, struct chan_slot *slot,
			     const struct coffer_rep *rep, int rc, struct chan_done *d)
{
	const struct coffer__seg *seg = ch->conn->seg;

	if (rc == 0 && rep) {
		switch (slot->out) {
		case COFFER__OUT_CREATE:
		case COFFER__OUT_BULK_CREATE:
			/* The size is our own; the store vouches only for the offset. */
			if (slot->create_size > seg->bytes - rep->offset)
				rc = -EPROTO;
			else
				*(void **)slot->ptr = seg->base + rep->offset;
			break;
		case COFFER__OUT_GET:
			*(const void **)slot->ptr = seg->base + rep->offset;
			if (slot->size_out)
				*slot->size_out = rep->size;
			break;
		case COFFER__OUT_CONTAINS:
			*(bool *)slot->ptr = rep->size != 0;
			break;
		default:
			break;
		}
	}
	if (slot->out == COFFER__OUT_BULK_CREATE && rc != 0)
		*(void **)slot->ptr = NULL;
	if (slot->out == COFFER__OUT_BULK || slot->out == COFFER__OUT_BULK_NONE ||
	    slot->out == COFFER__OUT_BULK_CREATE) {
		struct coffer__bulk *bulk = slot->bulk;

		if (slot->out == COFFER__OUT_BULK) {
			struct coffer_obj_buf *b = slot->buf;

			if (rc == 0 && rep) {
				b->data = seg->base + rep->offset;
				b->size = rep->size;
			} else {
				b->data = NULL;
				b->size = 0;
			}
			b->status = rc;
		} else if (rc != 0 && rc != -ENOTCONN) {
			int none = 0;

			/* relaxed: the first failure is kept; the acq_rel decrement below
			 * orders it before the last reply's read */
			atomic_compare_exchange_strong_explicit(
			    &bulk->error, &none, rc, memory_order_relaxed, memory_order_relaxed);
		}
		if (rc == -ENOTCONN)
			atomic_store_explicit(&bulk->error, rc, memory_order_relaxed);
		/* acq_rel: every buf written by other reapers happens-before the last one
		 * completes the event. */
		if (atomic_fetch_sub_explicit(&bulk->remaining, 1, memory_order_acq_rel) != 1)
			return false;
		d->ev = bulk->ev;
		d->bulk = bulk;
		d->rc = atomic_load_explicit(&bulk->error, memory_order_relaxed);
		return true;
	}
	d->ev = slot->ev;
	d->bulk = NULL;
	d->rc = rc;
	return true;
}

/* Completes @n (at most CHAN_REAP_CHUNK) events, all on the channel's EQ: one count update,
 * one queue push and one wake-up check for them all (coffer__event_complete_vec()). */
static void chan_complete(struct chan_done *d, unsigned int n)
{
	struct coffer_event *evs[CHAN_REAP_CHUNK];
	int rcs[CHAN_REAP_CHUNK];
	unsigned int i;

	for (i = 0; i < n; i++) {
		evs[i] = d[i].ev;
		rcs[i] = d[i].rc;
	}
	coffer__event_complete_vec(evs, rcs, n);
	for (i = 0; i < n; i++)
		free(d[i].bulk);
}

/*
 * Drains up to `entries` replies. Return: events completed. @force: spin for the reap lock
 * (the fail path) instead of giving up when another poller holds it.
 */
static int chan_reap(struct coffer__chan *ch)
{
	struct chan_done done[CHAN_REAP_CHUNK];
	uint32_t freed[CHAN_REAP_CHUNK];
	unsigned int total = 0, round;
	bool violation = false;

	for (round = 0; round < ch->entries / CHAN_REAP_CHUNK + 1; round++) {
		unsigned int nd = 0, nf = 0;
		uint32_t cons, prod, avail;

		if (!coffer__spin_trylock(&ch->reap))
			break;
		cons = atomic_load_explicit(&ch->rep_cons, memory_order_relaxed);
		/* Acquire: the store's reply entries are visible before we read them (pairs with
		 * its release store of rep.prod). */
		prod = __atomic_load_n(&ch->shm->rep.prod, __ATOMIC_ACQUIRE);
		coffer__tsan_acquire(ch->conn->seg); /* see chan_publish_locked() */
		if (!coffer__ring_ok(prod, cons, ch->entries)) {
			violation = true;
			coffer__spin_unlock(&ch->reap);
			break;
		}
		avail = prod - cons;
		if (avail > CHAN_REAP_CHUNK)
			avail = CHAN_REAP_CHUNK;
		for (uint32_t i = 0; i < avail; i++) {
			struct coffer_rep rep;
			struct chan_slot *slot;
			uint32_t idx;
			int rc;

			memcpy(&rep, &ch->reps[(cons + i) & ch->mask], sizeof(rep));
			idx = (uint32_t)rep.tag;
			if (idx >= ch->entries) {
				atomic_fetch_add_explicit(&ch->stray, 1, memory_order_relaxed);
				continue;
			}
			slot = &ch->slots[idx];
			if (atomic_load_explicit(&slot->state, memory_order_acquire) !=
				SLOT_PENDING ||
			    slot->gen != (uint32_t)(rep.tag >> 32)) {
				atomic_fetch_add_explicit(&ch->stray, 1, memory_order_relaxed);
				continue;
			}
			rc = coffer__rep_check(&rep, slot->op, ch->conn->segment,
					       ch->conn->seg->bytes);
			if (rc == 0)
				rc = rep.status;
			/* a GET's -EAGAIN bounds the gets waiting on a socket, not on a ring */
			if (rc == -EAGAIN && slot->op == COFFER_OP_GET)
				rc = -EPROTO;
			if (chan_finish_slot(ch, slot, &rep, rc, &done[nd]))
				nd++;
			atomic_store_explicit(&slot->state, SLOT_FREE, memory_order_relaxed);
			freed[nf++] = idx;
		}
		/* Release: our copies of the entries are done before the store may reuse them
		 * (pairs with its acquire load of rep.cons). */
		__atomic_store_n(&ch->shm->rep.cons, cons + avail, __ATOMIC_RELEASE);
		atomic_store_explicit(&ch->rep_cons, cons + avail, memory_order_relaxed);
		coffer__spin_unlock(&ch->reap);

		chan_free_slots(ch, freed, nf);
		chan_complete(done, nd);
		total += nd;
		if (avail < CHAN_REAP_CHUNK)
			break;
	}
	if (violation)
		coffer__conn_fail(ch->conn);
	return (int)total;
}

/*
 * Completes every pending request of @ch with @err and refuses new ones. Replies already in
 * the ring are delivered first. Context: not inside the reap or submit lock.
 */
static void chan_fail(struct coffer__chan *ch, int err)
{
	struct chan_done done[CHAN_REAP_CHUNK];
	uint32_t freed[CHAN_REAP_CHUNK];
	uint32_t i = 0;

	if (ch->forked)
		return;
	coffer__spin_lock(&ch->submit);
	ch->dead = true;
	coffer__spin_unlock(&ch->submit);

	/* Deliver whatever the store answered before it went away. */
	chan_reap(ch);

	while (i < ch->entries) {
		unsigned int nd = 0, nf = 0;

		coffer__spin_lock(&ch->reap);
		for (; i < ch->entries && nf < CHAN_REAP_CHUNK; i++) {
			struct chan_slot *slot = &ch->slots[i];

			if (atomic_load_explicit(&slot->state, memory_order_acquire) !=
			    SLOT_PENDING)
				continue;
			if (chan_finish_slot(ch, slot, NULL, err, &done[nd]))
				nd++;
			atomic_store_explicit(&slot->state, SLOT_FREE, memory_order_relaxed);
			freed[nf++] = i;
		}
		coffer__spin_unlock(&ch->reap);
		chan_free_slots(ch, freed, nf);
		chan_complete(done, nd);
	}
	/* Release: pairs with chan_gone()'s acquire (nothing pending is left behind it). */
	atomic_store_explicit(&ch->failed, true, memory_order_release);
}

/*
 * Whether the EQ's hooks must leave @ch alone: a fork child's copy (the parent's rings), or a
 * channel chan_fail() has finished with. The latter stays on its EQ until its connection is
 * closed, and a reply ring the store corrupted keeps showing "replies" past our consumer
 * index that the ring check refuses to read: counted as waiting work, they kept every poller
 * of the EQ from sleeping, and its waits for other stores spun a core for their whole timeout
 * (test_corrupt_ring_spares_other_store).
 */
static bool chan_gone(const struct coffer__chan *ch)
{
	return ch->forked || atomic_load_explicit(&ch->failed, memory_order_acquire);
}

/* ---- the EQ progress hook ---------------------------------------------------------- */

static int binding_progress(void *arg)
{
	struct chan_binding *b = arg;
	struct coffer__chanv *v;
	int n = 0;

	coffer__rcu_read_lock();
	v = atomic_load_explicit(&b->chans, memory_order_acquire); /* rcu_dereference */
	for (unsigned int i = 0; v && i < v->n; i++) {
		struct coffer__chan *ch = v->v[i];

		if (chan_gone(ch))
			continue;
		chan_publish(ch);
		n += chan_reap(ch);
	}
	coffer__rcu_read_unlock();
	return n;
}

/* Whether this thread's last binding_arm() counted it as a sleeper (eventq calls arm() and
 * disarm() in pairs, on one thread). */
static _Thread_local bool t_arm_counted;

static void chan_disarm_one(struct coffer__chan *ch)
{
	coffer__spin_lock(&ch->submit);
	if (ch->sleepers > 0 && --ch->sleepers == 0)
		__atomic_store_n(&ch->shm->rep.consumer_sleeping, 0, __ATOMIC_RELAXED);
	coffer__spin_unlock(&ch->submit);
}

static void binding_disarm(void *arg)
{
	struct chan_binding *b = arg;
	struct coffer__chanv *v;

	if (!t_arm_counted)
		return; /* arm() found replies and counted nothing */
	t_arm_counted = false;
	pthread_mutex_lock(&b->lock);
	coffer__rcu_read_lock();
	v = atomic_load_explicit(&b->chans, memory_order_acquire);
	for (unsigned int i = 0; v && i < v->n; i++)
		if (!v->v[i]->forked)
			chan_disarm_one(v->v[i]);
	if (b->armed > 0)
		b->armed--;
	coffer__rcu_read_unlock();
	pthread_mutex_unlock(&b->lock);
}

/*
 * Before a poller sleeps: publish what is queued (a sleeping poller would otherwise hold
 * requests back forever), ask the store to ring our doorbell, then re-check the reply rings.
 * While sleepers > 0 every submit publishes at once (nobody else would).
 */
/* Busy-poll budget before a poller sleeps (COFFER_POLL_SPIN_US, read once). */
static uint64_t g_spin_ns;
static pthread_once_t g_spin_once = PTHREAD_ONCE_INIT;

static void spin_once(void)
{
	uint64_t us = CHAN_SPIN_US_DEFAULT;

	/* checked by coffer_connect(), which fails on a bad value: no channel without it */
	(void)coffer__env_poll_spin_us(&us);
	g_spin_ns = us * 1000ull;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* True when a reply ring of @v has entries not consumed yet. Relaxed: only a hint; the
 * reaper re-reads prod with acquire. */
static bool chanv_has_replies(const struct coffer__chanv *v)
{
	for (unsigned int i = 0; v && i < v->n; i++) {
		const struct coffer__chan *ch = v->v[i];

		if (!chan_gone(ch) && __atomic_load_n(&ch->shm->rep.prod, __ATOMIC_RELAXED) !=
					  atomic_load_explicit(&ch->rep_cons, memory_order_relaxed))
			return true;
	}
	return false;
}

/* True when a channel of @v has requests out and the store is awake on its ring (it has
 * not announced sleep there). Relaxed: a hint for spinning, never for correctness. */
static bool chanv_store_awake(const struct coffer__chanv *v)
{
	for (unsigned int i = 0; v && i < v->n; i++) {
		const struct coffer__chan *ch = v->v[i];

		if (!ch->forked && __atomic_load_n(&ch->inflight, __ATOMIC_RELAXED) &&
		    !__atomic_load_n(&ch->db->store_sleeping, __ATOMIC_RELAXED))
			return true;
	}
	return false;
}

/* True when the store last said it runs on the CPU we run on (store_cpu, relaxed: a
 * hint only; spinning there only keeps the store from answering). */
static bool chanv_store_here(const struct coffer__chanv *v)
{
	int cpu = sched_getcpu();

	for (unsigned int i = 0; cpu >= 0 && v && i < v->n; i++) {
		const struct coffer__chan *ch = v->v[i];

		if (!ch->forked &&
		    __atomic_load_n(&ch->db->store_cpu, __ATOMIC_RELAXED) == (uint32_t)cpu + 1)
			return true;
	}
	return false;
}

/* Spins up to the budget while requests are out and the store is awake; true when replies
 * arrived. */
static bool chanv_spin(const struct coffer__chanv *v)
{
	uint64_t deadline;

	pthread_once(&g_spin_once, spin_once);
	if (!g_spin_ns || !chanv_store_awake(v))
		return false;
	deadline = now_ns() + g_spin_ns;
	for (unsigned int round = 1;; round++) {
		for (int k = 0; k < 64; k++) {
			if (chanv_has_replies(v))
				return true;
			coffer__cpu_relax();
		}
		if (!chanv_store_awake(v) || now_ns() >= deadline)
			break;
		/* More spinners than cores (client threads beside the store): let a runnable
		 * store or peer have this core now and then rather than burn the budget; at
		 * once when the store says it runs on this very CPU. */
		if (round % CHAN_SPIN_YIELD_ROUNDS == 0 || chanv_store_here(v))
			sched_yield();
	}
	return chanv_has_replies(v);
}

static int binding_arm(void *arg)
{
	struct chan_binding *b = arg;
	struct coffer__chanv *v;
	bool spun;
	int work = 0;

	coffer__rcu_read_lock();
	v = atomic_load_explicit(&b->chans, memory_order_acquire);
	/* Publish first, so that the store works while we spin. */
	for (unsigned int i = 0; v && i < v->n; i++)
		if (!v->v[i]->forked)
			chan_publish(v->v[i]);
	/* A reply usually comes back within a few microseconds when the store is awake:
	 * spinning that long is cheaper than a sleep and a doorbell on both sides. */
	spun = chanv_spin(v);
	if (spun) {
		/* Replies are in: eventq will not sleep, so nothing to count (disarm() knows
		 * by t_arm_counted) and no lock to take on this, the common, path. */
		for (unsigned int i = 0; v && i < v->n; i++)
			if (!v->v[i]->forked)
				chan_publish(v->v[i]);
		t_arm_counted = false;
		coffer__rcu_read_unlock();
		return COFFER__ARM_READY; /* ours to reap now: no yield */
	}
	/* Count ourselves on the channels bound now, under the binding's lock (see struct
	 * chan_binding): the list may have grown during the spin. */
	pthread_mutex_lock(&b->lock);
	t_arm_counted = true;
	v = atomic_load_explicit(&b->chans, memory_order_acquire);
	b->armed++;
	for (unsigned int i = 0; v && i < v->n; i++) {
		struct coffer__chan *ch = v->v[i];
		bool bell;

		if (ch->forked)
			continue;
		coffer__spin_lock(&ch->submit);
		bell = !ch->dead && chan_publish_locked(ch);
		/* eventq calls disarm() after every arm(), which undoes this. */
		ch->sleepers++;
		__atomic_store_n(&ch->shm->rep.consumer_sleeping, 1, __ATOMIC_RELAXED);
		coffer__spin_unlock(&ch->submit);
		if (bell)
			chan_ring_bell(ch->store_bell);
	}
	pthread_mutex_unlock(&b->lock);
	/* Dekker (proto.h): consumer_sleeping = 1 before re-reading rep.prod; pairs with the
	 * store's fence between publishing rep.prod and reading consumer_sleeping. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	for (unsigned int i = 0; v && i < v->n; i++) {
		struct coffer__chan *ch = v->v[i];

		if (chan_gone(ch))
			continue;
		if (__atomic_load_n(&ch->shm->rep.prod, __ATOMIC_RELAXED) !=
		    atomic_load_explicit(&ch->rep_cons, memory_order_relaxed))
			work = 1;
	}
	/* eventq calls disarm() after every arm(), whatever arm() returned: nothing to undo. */
	coffer__rcu_read_unlock();
	return work;
}

/* ---- bindings ------------------------------------------------------------------------ */

static bool eq_alive(coffer_handle_t eqh)
{
	return coffer__eq_wake_fd(eqh) >= 0;
}

/* Drops one reference (see chan_binding.refs); the last one frees @b. */
static void binding_unref(struct chan_binding *b)
{
	/* acq_rel: the last dropper sees every other holder's accesses before it frees */
	if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1) {
		pthread_mutex_destroy(&b->lock);
		free(b);
	}
}

/* The hook's release(): its EQ detached it, and no poller is inside it any more. */
static void binding_release(void *arg)
{
	binding_unref(arg);
}

/* Unlinks bindings whose EQ is gone and that hold no channel. Context: client lock. */
static void binding_gc_locked(void)
{
	struct chan_binding **pp = &g_bindings;

	while (*pp) {
		struct chan_binding *b = *pp;

		if (atomic_load_explicit(&b->chans, memory_order_relaxed) == NULL &&
		    !eq_alive(b->eqh)) {
			*pp = b->next;
			binding_unref(b);
		} else {
			pp = &b->next;
		}
	}
}

static int binding_attach_locked(struct coffer__chan *ch)
{
	struct chan_binding *b;
	struct coffer__chanv *old, *nv;
	int rc;

	for (b = g_bindings; b; b = b->next)
		if (b->eqh.cookie == ch->eqh.cookie)
			break;
	if (!b) {
		b = calloc(1, sizeof(*b));
		if (!b)
			return -ENOMEM;
		b->eqh = ch->eqh;
		pthread_mutex_init(&b->lock, NULL);
		b->hook.progress = binding_progress;
		b->hook.arm = binding_arm;
		b->hook.disarm = binding_disarm;
		b->hook.release = binding_release;
		b->hook.arg = b;
		/* before the attach: a destroy may detach (and release) the hook at once */
		atomic_init(&b->refs, 2);
		rc = coffer__eq_set_progress(ch->eqh, &b->hook);
		if (rc < 0) {
			pthread_mutex_destroy(&b->lock);
			free(b);
			return rc;
		}
		b->next = g_bindings;
		g_bindings = b;
	}
	old = atomic_load_explicit(&b->chans, memory_order_relaxed);
	nv = chanv_with(old, ch);
	if (!nv)
		return -ENOMEM;
	/* The pollers armed now count on the new channel too (they disarm it with the rest);
	 * those that armed before the channel existed are woken below to publish its work. */
	pthread_mutex_lock(&b->lock);
	coffer__spin_lock(&ch->submit);
	ch->sleepers = b->armed;
	if (b->armed > 0)
		__atomic_store_n(&ch->shm->rep.consumer_sleeping, 1, __ATOMIC_RELAXED);
	coffer__spin_unlock(&ch->submit);
	/* Release: the channel's fields are initialised before pollers can see it (pairs with
	 * the acquire load in the hooks). */
	atomic_store_explicit(&b->chans, nv, memory_order_release);
	pthread_mutex_unlock(&b->lock);
	/* Pollers already asleep on the EQ armed the channels they saw (or none, before the
	 * binding existed): the store would never ring them for this one, and requests queued
	 * on it would not be published for them. Wake them to arm it too. */
	(void)coffer__eq_kick(ch->eqh);
	if (old) {
		urcu_bp_synchronize_rcu();
		coffer__rcu_gp_acquire();
		free(old);
	}
	return 0;
}

/* Unpublishes @ch from its binding; returns the old vector to free after a grace period. */
static int binding_detach_locked(struct coffer__chan *ch, struct coffer__chanv **oldp)
{
	struct chan_binding *b;
	struct coffer__chanv *old, *nv;
	int err;

	*oldp = NULL;
	for (b = g_bindings; b; b = b->next)
		if (b->eqh.cookie == ch->eqh.cookie)
			break;
	if (!b)
		return 0;
	old = atomic_load_explicit(&b->chans, memory_order_relaxed);
	nv = chanv_without(old, ch, &err);
	if (err)
		return err;
	pthread_mutex_lock(&b->lock); /* arm() and disarm() see it in the list or not at all */
	atomic_store_explicit(&b->chans, nv, memory_order_release);
	pthread_mutex_unlock(&b->lock);
	*oldp = old;
	return 0;
}

void coffer__chan_release_bindings(void)
{
	struct chan_binding **pp = &g_bindings;

	pthread_mutex_lock(&coffer__client_lock);
	while (*pp) {
		struct chan_binding *b = *pp;

		/* A live EQ keeps its (now idle) binding attached: detaching would race with
		 * its pollers asleep in eventq (which read the hook after sleeping, outside a
		 * read-side section; reported), and the EQ may be used with a new connection. */
		if (atomic_load_explicit(&b->chans, memory_order_relaxed) != NULL ||
		    eq_alive(b->eqh)) {
			pp = &b->next;
			continue;
		}
		*pp = b->next;
		binding_unref(b); /* an EQ still draining (FORCE) holds the other reference */
	}
	pthread_mutex_unlock(&coffer__client_lock);
}

void coffer__chan_bindings_fork_child(void)
{
	/* Single-threaded fork child: a lock a parent thread held (arming) stays held here,
	 * and the pollers counted in `armed` do not exist. */
	for (struct chan_binding *b = g_bindings; b; b = b->next) {
		pthread_mutex_init(&b->lock, NULL);
		b->armed = 0;
	}
}

/* ---- open / close ------------------------------------------------------------------- */

static void chan_unmap(struct coffer__chan *ch)
{
	if (ch->shm)
		munmap(ch->shm, ch->shm_bytes);
	free(ch->slots);
	free(ch->free);
	free(ch);
}

/*
 * Closes @ch: unpublish, grace period, wait for pinned submitters, complete leftovers with
 * -ENOTCONN, tell the store (when @tell), unmap. Context: conn->chan_lock held; not in an RCU
 * read-side section.
 */
static void chan_close_locked(struct coffer__conn *conn, struct coffer__chan *ch, bool tell)
{
	struct coffer__chanv *oldb = NULL, *oldc, *nc;
	int err;
	COFFER__NO_CANCEL(); /* as chan_open() */

	pthread_mutex_lock(&coffer__client_lock);
	while (binding_detach_locked(ch, &oldb) == -ENOMEM)
		sched_yield(); /* tiny allocation; nothing better to do than retry */
	pthread_mutex_unlock(&coffer__client_lock);
	oldc = atomic_load_explicit(&conn->chans, memory_order_relaxed);
	while ((nc = chanv_without(oldc, ch, &err)) == NULL && err)
		sched_yield();
	atomic_store_explicit(&conn->chans, nc, memory_order_release);
	conn->nchans--;

	if (!ch->forked) {
		urcu_bp_synchronize_rcu();
		coffer__rcu_gp_acquire();
		/* Every submitter that found the channel did so in a read-side section it
		 * leaves only when its requests are queued (chan_get()): all gone now. */
		chan_fail(ch, -ENOTCONN);
		if (tell && !atomic_load_explicit(&conn->dead, memory_order_relaxed)) {
			struct coffer_chan_close req = {.channel_id = ch->id};

			(void)coffer__conn_ctl(conn, COFFER_MSG_CHANNEL_CLOSE, &req, sizeof(req),
					       -1, COFFER_MSG_CHANNEL_CLOSE_REPLY, NULL, 0, NULL,
					       0);
		}
	}
	free(oldb);
	free(oldc);
	chan_unmap(ch);
}

/* Closes channels whose EQ was destroyed. Context: conn->chan_lock held. */
static void chan_gc_locked(struct coffer__conn *conn)
{
	bool again = true;

	while (again) {
		struct coffer__chanv *v = atomic_load_explicit(&conn->chans, memory_order_relaxed);

		again = false;
		for (unsigned int i = 0; v && i < v->n; i++) {
			if (!eq_alive(v->v[i]->eqh)) {
				chan_close_locked(conn, v->v[i], true);
				again = true;
				break;
			}
		}
	}
}

static struct coffer__chan *chan_find_rcu(struct coffer__conn *conn, coffer_handle_t eqh)
{
	struct coffer__chanv *v = atomic_load_explicit(&conn->chans, memory_order_acquire);

	for (unsigned int i = 0; v && i < v->n; i++)
		if (v->v[i]->eqh.cookie == eqh.cookie)
			return v->v[i];
	return NULL;
}

static uint32_t chan_pick_entries(const struct coffer__conn *conn)
{
	uint32_t e = CHAN_RING_ENTRIES;

	while (e > conn->max_ring_entries && e > COFFER_RING_ENTRIES_MIN)
		e >>= 1;
	return e >= COFFER_RING_ENTRIES_MIN && e <= conn->max_ring_entries ? e : 0;
}

static int chan_map(struct coffer__chan *ch, const struct coffer_chan_open_reply *r, int segfd)
{
	uint64_t req_end, rep_end;
	void *p;

	if (r->ring_entries < 1 || (r->ring_entries & (r->ring_entries - 1)) != 0 ||
	    r->ring_entries > COFFER_RING_ENTRIES_MAX)
		return -EPROTO;
	/* The id picks our doorbell bit (coffer__doorbell_ring(): bit id / WORDS of a 64-bit
	 * word): one past what the store announced, or past the page's bits, is a lie that
	 * would shift past bit 63. */
	if (r->channel_id >= ch->conn->max_channels || r->channel_id >= 64 * COFFER_DOORBELL_WORDS)
		return -EPROTO;
	req_end = r->req_off + (uint64_t)r->ring_entries * sizeof(struct coffer_req);
	rep_end = r->rep_off + (uint64_t)r->ring_entries * sizeof(struct coffer_rep);
	if (r->req_off < sizeof(struct coffer_chan_shm) ||
	    r->rep_off < sizeof(struct coffer_chan_shm) || r->req_off % 64 || r->rep_off % 32 ||
	    req_end > r->shm_bytes || rep_end > r->shm_bytes ||
	    (r->req_off < rep_end && r->rep_off < req_end))
		return -EPROTO;
	/* Never map more than the file holds, nor a file the store could shrink later:
	 * touching the rest would be a SIGBUS (test_shrinkable_rings_refused). */
	if (r->shm_bytes > SIZE_MAX || coffer__fd_mappable(segfd, r->shm_bytes, NULL) < 0)
		return -EPROTO;
	p = mmap(NULL, r->shm_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, segfd, 0);
	if (p == MAP_FAILED)
		return coffer__map_errno(errno);
	ch->shm = p;
	ch->shm_bytes = r->shm_bytes;
	ch->reqs = (struct coffer_req *)((uint8_t *)p + r->req_off);
	ch->reps = (const struct coffer_rep *)((uint8_t *)p + r->rep_off);
	ch->entries = r->ring_entries;
	ch->mask = r->ring_entries - 1;
	ch->id = r->channel_id;
	return 0;
}

/* Opens the channel of (@conn, @eqh) unless it exists. Context: not in an RCU section. */
static int chan_open(struct coffer__conn *conn, coffer_handle_t eqh)
{
	struct coffer_chan_open req = {0};
	struct coffer_chan_open_reply rep;
	struct coffer__chan *ch = NULL;
	struct coffer__chanv *old, *nv;
	int segfd = -1;
	int wfd, rc;
	COFFER__NO_CANCEL(); /* round trips, a grace period (runtime/nocancel.h) */

	/* Publishing the new channel vector waits for a grace period: inside the caller's
	 * read-side section that wait never ended (test_grace_period_calls_in_read_section). */
	if (coffer__rcu_read_ongoing())
		return -EINVAL;
	pthread_mutex_lock(&conn->chan_lock);
	rc = atomic_load_explicit(&conn->dead, memory_order_relaxed);
	if (rc)
		goto out;
	coffer__rcu_read_lock();
	ch = chan_find_rcu(conn, eqh);
	coffer__rcu_read_unlock();
	if (ch) {
		ch = NULL;
		goto out; /* another thread opened it meanwhile */
	}
	chan_gc_locked(conn);
	if (conn->nchans >= conn->max_channels) {
		rc = -EMFILE;
		goto out;
	}
	wfd = coffer__eq_wake_fd(eqh);
	if (wfd < 0) {
		rc = wfd;
		goto out;
	}
	req.ring_entries = chan_pick_entries(conn);
	/* Channel ids are < COFFER_CHANNELS_MAX: this one says no reply body arrived. */
	rep.channel_id = UINT32_MAX;
	rc = coffer__conn_ctl(conn, COFFER_MSG_CHANNEL_OPEN, &req, sizeof(req), wfd,
			      COFFER_MSG_CHANNEL_OPEN_REPLY, &rep, sizeof(rep), &segfd, 1);
	if (rc == -EMFILE && rep.channel_id != UINT32_MAX)
		goto out_store; /* we are at our fd limit: the store opened it for nothing */
	if (rc < 0)
		goto out;
	rc = -ENOMEM;
	ch = calloc(1, sizeof(*ch));
	if (!ch)
		goto out_store;
	ch->store_bell = conn->store_bell; /* the connection's, not closed with the channel */
	ch->db = conn->doorbell;
	ch->conn = conn;
	ch->eqh = eqh;
	rc = segfd >= 0 ? chan_map(ch, &rep, segfd) : -EPROTO;
	if (rc < 0)
		goto out_store;
	rc = -ENOMEM;
	/* each slot on a line of its own (entries is a power of two >= 8: a multiple of 64) */
	ch->slots = aligned_alloc(64, ch->entries * sizeof(*ch->slots));
	ch->free = malloc(ch->entries * sizeof(*ch->free));
	if (!ch->slots || !ch->free)
		goto out_store;
	memset(ch->slots, 0, ch->entries * sizeof(*ch->slots));
	for (uint32_t i = 0; i < ch->entries; i++)
		ch->free[i] = ch->entries - 1 - i;
	ch->nfree = ch->entries;
	/* The rings start where the store left them (fresh: all zero). */
	ch->prod = ch->published = __atomic_load_n(&ch->shm->req.prod, __ATOMIC_RELAXED);
	atomic_store_explicit(&ch->rep_cons, __atomic_load_n(&ch->shm->rep.cons, __ATOMIC_RELAXED),
			      memory_order_relaxed);

	old = atomic_load_explicit(&conn->chans, memory_order_relaxed);
	nv = chanv_with(old, ch);
	if (!nv)
		goto out_store;
	pthread_mutex_lock(&coffer__client_lock);
	binding_gc_locked();
	rc = binding_attach_locked(ch);
	pthread_mutex_unlock(&coffer__client_lock);
	if (rc < 0) {
		free(nv);
		goto out_store;
	}
	/* Release: publish the initialised channel to submitters (acquire in chan_find_rcu). */
	atomic_store_explicit(&conn->chans, nv, memory_order_release);
	conn->nchans++;
	if (old) {
		urcu_bp_synchronize_rcu();
		coffer__rcu_gp_acquire();
		free(old);
	}
	ch = NULL;
	rc = 0;
	goto out;

out_store : {
	struct coffer_chan_close creq = {.channel_id = rep.channel_id};

	(void)coffer__conn_ctl(conn, COFFER_MSG_CHANNEL_CLOSE, &creq, sizeof(creq), -1,
			       COFFER_MSG_CHANNEL_CLOSE_REPLY, NULL, 0, NULL, 0);
}
out:
	if (segfd >= 0)
		close(segfd); /* mapped or not, the segment needs no fd */
	if (ch)
		chan_unmap(ch);
	pthread_mutex_unlock(&conn->chan_lock);
	return rc;
}

/* ---- the EQ of an event ------------------------------------------------------------ */

/*
 * eventq/event_internal.h has no accessor for an event's EQ, which the channel needs (one
 * channel per EQ). Until eventq exports one, read the EQ cached in the event (written once
 * by coffer_event_init(), read-only afterwards). Reported as a requested contract addition.
 */
int coffer__event_eq(const struct coffer_event *ev, coffer_handle_t *eqh)
{
	struct coffer__evp *ep;

	if (!ev || !coffer__evp_valid((struct coffer_event *)ev))
		return -EINVAL;
	ep = coffer__evp((struct coffer_event *)ev);
	if (!ep->ep_eq)
		return -EINVAL;
	*eqh = ep->ep_eq->eq_handle;
	return 0;
}

/* ---- submit ------------------------------------------------------------------------- */

/*
 * Pins the channel of (@connh, @eqh), opening it when needed. On success the caller is
 * inside an RCU read-side section that pins the channel (the closer unpublishes it, then
 * waits for a grace period before it fails, unmaps and frees it): the caller queues its
 * requests there and leaves with chan_put(). Inside it the caller may take the channel's
 * spinlocks, launch and complete events and ring doorbells (write(2) on an eventfd), never
 * wait for a grace period. A counted pin (an atomic increment and decrement of a shared
 * counter per call) cost more than the rest of a submit on the 2-core VM: each locked RMW
 * waits for the ring entries just written, whose lines the store's core holds, to drain.
 */
static int chan_get(coffer_handle_t connh, coffer_handle_t eqh, struct coffer__chan **chp)
{
	/* Not a connection handle at all (an object or EQ handle, 0): the caller's mistake,
	 * -EINVAL. A connection handle that is not (or no longer) in the hash: -ENOTCONN. */
	if ((connh.cookie & ((1u << COFFER_HTYPE_BITS) - 1)) != (uint64_t)COFFER_HTYPE_CONN)
		return -EINVAL;
	for (int tries = 0; tries < 4; tries++) {
		struct coffer_hhash *hh;
		struct coffer_hlink *link;
		struct coffer__conn *conn;
		struct coffer__chan *ch;
		int rc;

		coffer__rcu_read_lock();
		conn = coffer__conn_lookup_rcu(connh);
		if (!conn) {
			coffer__rcu_read_unlock();
			return -ENOTCONN;
		}
		rc = atomic_load_explicit(&conn->dead, memory_order_relaxed);
		if (rc) {
			coffer__rcu_read_unlock();
			return rc;
		}
		ch = chan_find_rcu(conn, eqh);
		if (ch) {
			*chp = ch; /* pinned by the read-side section we stay in */
			return 0;
		}
		/* A counted reference for the open, taken on the handle hash this lookup used:
		 * a racing last coffer_disconnect() may stop the runtime (coffer_fini() clears
		 * the global hash and drains it), and the hash stays valid for the putref of a
		 * reference held (coffer_hhash_destroy()). Get-unless-zero: a connection already
		 * released is gone, not revived. */
		rc = coffer__global_lookup(connh, COFFER_HTYPE_CONN, &hh, &link);
		coffer__rcu_read_unlock();
		if (rc < 0)
			return -ENOTCONN;
		rc = link == &conn->link ? chan_open(conn, eqh) : -ENOTCONN;
		coffer_hhash_putref(hh, link);
		if (rc < 0)
			return rc;
	}
	return -EAGAIN;
}

static void chan_put(struct coffer__chan *ch)
{
	(void)ch;
	/* The closer's grace period orders our ring and slot writes before it unmaps. */
	coffer__rcu_read_unlock();
}

static void chan_fill_req(struct coffer_req *r, const struct coffer__reqd *d, uint64_t tag)
{
	memset(r, 0, sizeof(*r));
	r->tag = tag;
	r->op = d->op;
	r->flags = d->flags;
	memcpy(r->oid, d->oid->id, COFFER_OID_SIZE);
	r->size = d->size;
	r->timeout_us = d->timeout_us;
	r->offset = d->offset;
}

/*
 * Reserves up to @n free slots of @ch into @idx: exactly @n, or (@partial) as many as are
 * free. Return: the number reserved (> 0); -ENOTCONN (channel dead); -EINVAL (!@partial and
 * @n above the ring's entries: it could never be queued, so "try again" would be a lie);
 * -EAGAIN (no room now). Context: takes the submit lock.
 */
static int chan_reserve(struct coffer__chan *ch, unsigned int n, bool partial, uint32_t *idx)
{
	unsigned int k;
	int rc;

	coffer__spin_lock(&ch->submit);
	k = ch->entries - ch->inflight < n ? ch->entries - ch->inflight : n;
	if (ch->dead)
		rc = -ENOTCONN;
	else if (!partial && n > ch->entries)
		rc = -EINVAL; /* a store that caps its rings below a bulk call's @n */
	else if (k == 0 || (k < n && !partial))
		rc = -EAGAIN;
	else {
		for (unsigned int i = 0; i < k; i++) {
			idx[i] = ch->free[--ch->nfree];
			atomic_store_explicit(&ch->slots[idx[i]].state, SLOT_RESERVED,
					      memory_order_relaxed);
			ch->slots[idx[i]].gen++;
		}
		__atomic_store_n(&ch->inflight, ch->inflight + k, __ATOMIC_RELAXED);
		rc = (int)k;
	}
	coffer__spin_unlock(&ch->submit);
	return rc;
}

/* chan_get() then chan_reserve(): the pinned channel in *@chp and the count reserved, or
 * -errno with nothing held. */
static int chan_get_reserve(coffer_handle_t connh, coffer_handle_t eqh, unsigned int n,
			    bool partial, uint32_t *idx, struct coffer__chan **chp)
{
	int rc = chan_get(connh, eqh, chp);

	if (rc < 0)
		return rc;
	rc = chan_reserve(*chp, n, partial, idx);
	if (rc < 0)
		chan_put(*chp);
	return rc;
}

/* Gives back @k reserved slots that were never queued. */
static void chan_unreserve(struct coffer__chan *ch, const uint32_t *idx, unsigned int k)
{
	for (unsigned int i = 0; i < k; i++)
		atomic_store_explicit(&ch->slots[idx[i]].state, SLOT_FREE, memory_order_relaxed);
	chan_free_slots(ch, idx, k);
}

/*
 * Fills the @k reserved slots @idx with @reqs - slot i completes @evs[i], or @ev (with
 * @bulk) when @evs is NULL - queues them on the request ring and publishes at COFFER_BATCH
 * queued requests, or at CHAN_EARLY_PUBLISH while the store is awake on this ring.
 * Return: true; false when the channel died since the reservation (the slots are given back,
 * nothing was queued: the caller completes its launched events with -ENOTCONN).
 * Context: takes the submit lock; the caller holds its pin on @ch.
 */
static bool chan_queue(struct coffer__chan *ch, const struct coffer__reqd *reqs,
		       const uint32_t *idx, unsigned int k, struct coffer_event *ev,
		       struct coffer_event *const *evs, struct coffer__bulk *bulk)
{
	bool bell = false;

	coffer__spin_lock(&ch->submit);
	if (ch->dead) {
		coffer__spin_unlock(&ch->submit);
		chan_unreserve(ch, idx, k);
		return false;
	}
	for (unsigned int i = 0; i < k; i++) {
		struct chan_slot *s = &ch->slots[idx[i]];
		const struct coffer__reqd *d = &reqs[i];

		s->op = d->op;
		s->out = (uint8_t)d->out;
		s->create_size =
		    d->out == COFFER__OUT_CREATE || d->out == COFFER__OUT_BULK_CREATE ? d->size : 0;
		s->ptr = d->ptr;
		s->size_out = d->size_out;
		s->buf = d->buf;
		s->bulk = bulk;
		s->ev = evs ? evs[i] : ev;
		/* Release: the fields above are visible to a reaper that sees PENDING. */
		atomic_store_explicit(&s->state, SLOT_PENDING, memory_order_release);
		chan_fill_req(&ch->reqs[ch->prod & ch->mask], d, ((uint64_t)s->gen << 32) | idx[i]);
		ch->prod++;
	}
	/* relaxed store_sleeping: a hint; chan_publish_locked() does the handshake */
	if (ch->prod - ch->published >= ch->conn->batch || ch->sleepers > 0 ||
	    (ch->prod - ch->published >= CHAN_EARLY_PUBLISH &&
	     !__atomic_load_n(&ch->db->store_sleeping, __ATOMIC_RELAXED)))
		bell = chan_publish_locked(ch);
	else
		atomic_store_explicit(&ch->unpub, 1, memory_order_relaxed);
	coffer__spin_unlock(&ch->submit);
	if (bell)
		chan_ring_bell(ch->store_bell);
	return true;
}

/* coffer__chan_submit(): see runtime/client.h. */
int coffer__chan_submit(coffer_handle_t connh, struct coffer_event *ev,
			const struct coffer__reqd *reqs, unsigned int n, struct coffer__bulk *bulk)
{
	uint32_t idx[COFFER_GET_BULK_MAX];
	struct coffer__chan *ch = NULL;
	coffer_handle_t eqh;
	int rc;

	if (n < 1 || n > COFFER_GET_BULK_MAX)
		return -EINVAL;
	rc = coffer__event_eq(ev, &eqh);
	if (rc < 0)
		return rc;
	/* Reserve n slots before launching: a full channel leaves the event untouched. */
	rc = chan_get_reserve(connh, eqh, n, false, idx, &ch);
	if (rc < 0)
		return rc;
	rc = coffer__event_launch(ev);
	if (rc < 0) {
		chan_unreserve(ch, idx, n);
		chan_put(ch);
		return rc;
	}
	if (!chan_queue(ch, reqs, idx, n, ev, NULL, bulk)) {
		/* The store died between reservation and now: the launched event carries it. */
		chan_put(ch);
		free(bulk);
		coffer__event_complete(ev, -ENOTCONN);
		return 0;
	}
	chan_put(ch);
	return 0;
}

/* coffer__chan_submit_vec(): see runtime/client.h. */
int coffer__chan_submit_vec(coffer_handle_t connh, struct coffer_event *const *evs,
			    const struct coffer__reqd *reqs, unsigned int n)
{
	uint32_t idx[COFFER_GET_BULK_MAX];
	struct coffer__chan *ch = NULL;
	coffer_handle_t eqh, other;
	unsigned int k, launched;
	int rc;

	if (!evs || n < 1 || n > COFFER_GET_BULK_MAX)
		return -EINVAL;
	rc = coffer__event_eq(evs[0], &eqh);
	if (rc < 0)
		return rc;
	for (unsigned int i = 1; i < n; i++) {
		rc = coffer__event_eq(evs[i], &other);
		if (rc < 0)
			return rc;
		if (other.cookie != eqh.cookie)
			return -EINVAL; /* one vector, one EQ, one channel */
	}
	/* Reserve up to n slots: what does not fit stays with the caller, untouched. */
	rc = chan_get_reserve(connh, eqh, n, true, idx, &ch);
	if (rc < 0)
		return rc;
	k = (unsigned int)rc;
	/* Launch in order; the first failure ends the vector there. */
	for (launched = 0; launched < k; launched++) {
		rc = coffer__event_launch(evs[launched]);
		if (rc < 0)
			break;
	}
	if (launched < k) {
		chan_unreserve(ch, idx + launched, k - launched);
		k = launched;
		if (k == 0) {
			chan_put(ch);
			return rc;
		}
	}
	if (!chan_queue(ch, reqs, idx, k, NULL, evs, NULL)) {
		/* The store died between reservation and now: the launched events carry it. */
		chan_put(ch);
		for (unsigned int i = 0; i < k; i++)
			coffer__event_complete(evs[i], -ENOTCONN);
		return (int)k;
	}
	chan_put(ch);
	return (int)k;
}

/* ---- connection-wide operations --------------------------------------------------------- */

void coffer__conn_flush_channels(struct coffer__conn *conn)
{
	struct coffer__chanv *v;

	coffer__rcu_read_lock();
	v = atomic_load_explicit(&conn->chans, memory_order_acquire);
	for (unsigned int i = 0; v && i < v->n; i++)
		if (!v->v[i]->forked)
			chan_publish(v->v[i]);
	coffer__rcu_read_unlock();
}

void coffer__conn_fail_channels(struct coffer__conn *conn, int err)
{
	struct coffer__chanv *v;

	/* chan_fail() spins on channel locks and completes events: no read-side section
	 * needed, chan_lock keeps the vector and its channels alive. */
	pthread_mutex_lock(&conn->chan_lock);
	v = atomic_load_explicit(&conn->chans, memory_order_relaxed);
	for (unsigned int i = 0; v && i < v->n; i++)
		chan_fail(v->v[i], err);
	pthread_mutex_unlock(&conn->chan_lock);
}

void coffer__conn_close_channels(struct coffer__conn *conn)
{
	struct coffer__chanv *v;

	pthread_mutex_lock(&conn->chan_lock);
	while ((v = atomic_load_explicit(&conn->chans, memory_order_relaxed)) != NULL)
		chan_close_locked(conn, v->v[v->n - 1], !conn->forked);
	pthread_mutex_unlock(&conn->chan_lock);
}

/*
 * Fork child, single-threaded (the atfork handler): the rings and the replies in them belong
 * to the parent, whose copies of these requests the store still answers. So nothing is
 * reaped or sent here; each request the parent had in flight completes in the child with
 * -ENOTCONN, as on any dead connection, so that the child can finalise those events and
 * destroy their EQs (a forced destroy would otherwise wait for them forever). A request a
 * parent thread had reserved but not yet queued has no event in its slot and is dropped.
 */
static void chan_fork_child(struct coffer__chan *ch)
{
	struct chan_done d;

	/* Spinlocks held by the parent's threads at the fork stay held here: reset them. */
	atomic_store_explicit(&ch->submit.locked, 0, memory_order_relaxed);
	atomic_store_explicit(&ch->reap.locked, 0, memory_order_relaxed);
	ch->forked = true;
	ch->dead = true;
	for (uint32_t i = 0; i < ch->entries; i++) {
		struct chan_slot *slot = &ch->slots[i];

		if (atomic_load_explicit(&slot->state, memory_order_relaxed) != SLOT_PENDING)
			continue;
		atomic_store_explicit(&slot->state, SLOT_FREE, memory_order_relaxed);
		if (chan_finish_slot(ch, slot, NULL, -ENOTCONN, &d))
			chan_complete(&d, 1);
	}
}

void coffer__conn_fork_channels(struct coffer__conn *conn)
{
	struct coffer__chanv *v = atomic_load_explicit(&conn->chans, memory_order_relaxed);

	/* Single-threaded fork child: the rings belong to the parent's threads. */
	for (unsigned int i = 0; v && i < v->n; i++)
		chan_fork_child(v->v[i]);
}

uint64_t coffer__conn_stray_replies(coffer_handle_t connh)
{
	struct coffer__conn *conn;
	struct coffer__chanv *v;
	uint64_t n = 0;

	coffer__rcu_read_lock();
	conn = coffer__conn_lookup_rcu(connh);
	v = conn ? atomic_load_explicit(&conn->chans, memory_order_acquire) : NULL;
	for (unsigned int i = 0; v && i < v->n; i++)
		n += atomic_load_explicit(&v->v[i]->stray, memory_order_relaxed);
	coffer__rcu_read_unlock();
	return n;
}

uint64_t coffer__conn_progress(struct coffer__conn *conn, bool *waiting)
{
	struct coffer__chanv *v;
	uint64_t taken = 0;

	*waiting = false;
	coffer__rcu_read_lock();
	v = atomic_load_explicit(&conn->chans, memory_order_acquire);
	for (unsigned int i = 0; v && i < v->n; i++) {
		struct coffer__chan *ch = v->v[i];
		uint32_t cons = atomic_load_explicit(&ch->rep_cons, memory_order_relaxed);

		/* every published request gets exactly one reply (docs/protocol.md) */
		if (__atomic_load_n(&ch->shm->req.prod, __ATOMIC_RELAXED) != cons)
			*waiting = true;
		taken += cons;
	}
	coffer__rcu_read_unlock();
	return taken;
}
