/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * examples/kvcache.c - a multithreaded key-value cache on coffer, checking what it reads.
 *
 *   kvcache SOCKET [THREADS [OPS_PER_THREAD [KEYS]]]     (defaults 4, 2000, 16)
 *
 * Every key is one ObjectID whose value is replaced in place (COFFER_CREATE_REPLACE) by the
 * key's owner thread (key % THREADS) while all threads read it. Each thread has its own
 * event queue and keeps DEPTH operations in flight:
 *   write: create(REPLACE) -> fill the arena memory -> seal(SEAL_RELEASE) -> publish version
 *   read:  get (waits for a seal) -> check every byte -> hold it a few polls, check again
 *          -> release exactly that version (coffer_obj_release_data)
 * plus, now and then, a blocking get + release in the middle of the asynchronous traffic.
 * A read must never see a version older than the last one published before it started, nor
 * a byte that changed while it held the reference. At the end every key holds its last
 * version, everything is deleted and the store's used bytes are back where they started
 * (in a full store, whose creates evicted other clients' objects: every object sealed
 * before the run is still there or was counted as evicted).
 *
 * Things the API asks of a program like this one:
 *  - A connection carries at most 512 channels: one per EQ that uses it, and one per thread
 *    that makes blocking calls (its hidden EQ, kept until the thread exits). Workers with
 *    their own EQ and blocking calls need two each: one connection per 256 workers, and the
 *    main thread's blocking calls go through a connection of its own (a 257th thread on a
 *    workers' connection would make its 513th channel: -EMFILE).
 *  - Two readers of one ID on one connection may hold two versions (one got before a
 *    replace, one after): a release by ID drops the current version's reference first, so
 *    release with coffer_obj_release_data(), which names the version by its pointer.
 *  - A launch can fail with -EAGAIN (the EQ's channel is full): poll, then launch again.
 *  - Only the owner writes a key, and at most one write per key at a time: a second
 *    create(REPLACE) while one is pending gets -EEXIST.
 * Exit status 0 when everything held, 1 with a message otherwise.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <coffer/coffer.h>

#define DEPTH		 8    /* operations in flight per thread */
#define MAX_KEYS	 1024 /* keys */
#define MAX_THREAD	 256
#define THREADS_PER_CONN 256 /* 2 channels each (own EQ + hidden EQ), 512 per connection */

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "kvcache: " __VA_ARGS__);                                          \
		fputc('\n', stderr);                                                               \
		exit(1);                                                                           \
	} while (0)
#define CHECK(call)                                                                                \
	do {                                                                                       \
		int rc_ = (call);                                                                  \
		if (rc_ < 0)                                                                       \
			FAIL("%s: %s", #call, coffer_strerror(rc_));                               \
	} while (0)

static unsigned nthreads = 4, nkeys = 16;
static long ops = 2000;
static coffer_handle_t conns[1 + MAX_THREAD / THREADS_PER_CONN]; /* [0]: the main thread's */
static _Atomic uint64_t published[MAX_KEYS]; /* last sealed version of each key */
static _Atomic uint64_t n_reads, n_writes, n_blocking;
static pthread_barrier_t start_line; /* every worker has made its first blocking call */

/* ---- values: a header and bytes derived from (key, version), so any reader can check -- */

struct value_hdr {
	uint64_t key, version, size;
};

static uint64_t value_size(unsigned key, uint64_t version)
{
	return sizeof(struct value_hdr) + (key * 7919u + version * 104729u) % 16384;
}

static uint8_t value_byte(unsigned key, uint64_t version, uint64_t i)
{
	return (uint8_t)(key * 31 + version * 17 + i * 131 + (i >> 8));
}

static void value_fill(void *p, unsigned key, uint64_t version)
{
	struct value_hdr h = {key, version, value_size(key, version)};
	uint8_t *b = p;

	memcpy(b, &h, sizeof(h));
	for (uint64_t i = sizeof(h); i < h.size; i++)
		b[i] = value_byte(key, version, i);
}

/* Checks every byte of a value of @key; returns its version. */
static uint64_t value_check(const void *p, uint64_t size, unsigned key, const char *when)
{
	const uint8_t *b = p;
	struct value_hdr h;

	if (size < sizeof(h))
		FAIL("key %u %s: %" PRIu64 " bytes", key, when, size);
	memcpy(&h, b, sizeof(h));
	if (h.key != key || h.size != size || size != value_size(key, h.version))
		FAIL("key %u %s: header says key %" PRIu64 " version %" PRIu64 " size %" PRIu64
		     ", got %" PRIu64 " bytes",
		     key, when, h.key, h.version, h.size, size);
	for (uint64_t i = sizeof(h); i < size; i++)
		if (b[i] != value_byte(key, h.version, i))
			FAIL("key %u %s: version %" PRIu64 " byte %" PRIu64 " differs", key, when,
			     h.version, i);
	return h.version;
}

static void key_oid(unsigned key, struct coffer_oid *oid)
{
	memset(oid, 0, sizeof(*oid));
	snprintf((char *)oid->id, sizeof(oid->id), "kvcache-%u", key);
}

/* ---- one worker thread ----------------------------------------------------------------- */

enum op_state { IDLE, CREATING, SEALING, GETTING, HOLDING, RELEASING };

/* One operation in flight. The event comes first, so a polled event is its slot. */
struct slot {
	struct coffer_event ev;
	enum op_state state;
	bool unlaunched; /* the last launch got -EAGAIN: launch again after a poll */
	int hold;	 /* polls left before a read releases its reference */
	unsigned key;
	struct coffer_oid oid;
	uint64_t version; /* write: the version being written; read: the oldest acceptable */
	void *wdata;
	const void *rdata;
	uint64_t size;
};

struct worker {
	pthread_t tid;
	unsigned id;
	coffer_handle_t conn;
	uint64_t rng;
	uint64_t version[MAX_KEYS]; /* next version of each key this thread owns */
	bool writing[MAX_KEYS];
};

static uint64_t next_random(struct worker *w)
{
	w->rng ^= w->rng << 13;
	w->rng ^= w->rng >> 7;
	w->rng ^= w->rng << 17;
	return w->rng;
}

/* Launches the asynchronous call of @s's state. Return: 1 launched, 0 deferred (-EAGAIN). */
static int launch(struct worker *w, struct slot *s)
{
	int rc = -EINVAL;

	switch (s->state) {
	case CREATING:
		rc = coffer_obj_create_oid(w->conn, &s->oid, s->size, COFFER_CREATE_REPLACE,
					   &s->wdata, &s->ev);
		break;
	case SEALING:
		rc = coffer_obj_seal_oid(w->conn, &s->oid, COFFER_SEAL_RELEASE, &s->ev);
		break;
	case GETTING: /* negative timeout: the store waits for a seal, never this thread */
		rc = coffer_obj_get_oid(w->conn, &s->oid, -1, &s->rdata, &s->size, &s->ev);
		break;
	case RELEASING:
		rc = coffer_obj_release_data(w->conn, &s->oid, s->rdata, &s->ev);
		break;
	default:
		break;
	}
	s->unlaunched = rc == -EAGAIN;
	if (rc == -EAGAIN)
		return 0;
	if (rc < 0)
		FAIL("key %u: launch in state %d: %s", s->key, (int)s->state, coffer_strerror(rc));
	return 1;
}

/* Starts a new operation in the idle slot @s. Return: operations launched (0 or 1). */
static int start_op(struct worker *w, struct slot *s)
{
	uint64_t r = next_random(w);
	const void *data;
	uint64_t size, oldest;

	s->key = (unsigned)(r % nkeys);
	key_oid(s->key, &s->oid);
	if (r % 64 == 0) {
		/* a blocking read between asynchronous ones: the thread's hidden EQ */
		oldest = atomic_load_explicit(&published[s->key], memory_order_acquire);
		CHECK(coffer_obj_get_oid(w->conn, &s->oid, -1, &data, &size, NULL));
		if (value_check(data, size, s->key, "blocking get") < oldest)
			FAIL("key %u: a blocking get saw a version older than %" PRIu64, s->key,
			     oldest);
		CHECK(coffer_obj_release_data(w->conn, &s->oid, data, NULL));
		atomic_fetch_add_explicit(&n_blocking, 1, memory_order_relaxed);
		return -1; /* done at once */
	}
	if (s->key % nthreads == w->id && (r >> 32) % 4 == 0 && !w->writing[s->key]) {
		w->writing[s->key] = true;
		s->version = ++w->version[s->key];
		s->size = value_size(s->key, s->version);
		s->state = CREATING;
	} else {
		s->version = atomic_load_explicit(&published[s->key], memory_order_acquire);
		s->state = GETTING;
	}
	return launch(w, s);
}

/* Handles the completion of @s's operation. Return: 1 when the whole operation is done. */
static int complete(struct worker *w, struct slot *s)
{
	int err = s->ev.ev_error;

	if (err < 0)
		FAIL("key %u: operation in state %d failed: %s", s->key, (int)s->state,
		     coffer_strerror(err));
	switch (s->state) {
	case CREATING: /* the replacement is writable and invisible until its seal */
		value_fill(s->wdata, s->key, s->version);
		s->state = SEALING;
		launch(w, s);
		return 0;
	case SEALING:
		atomic_store_explicit(&published[s->key], s->version, memory_order_release);
		w->writing[s->key] = false;
		atomic_fetch_add_explicit(&n_writes, 1, memory_order_relaxed);
		s->state = IDLE;
		return 1;
	case GETTING:
		if (value_check(s->rdata, s->size, s->key, "get") < s->version)
			FAIL("key %u: get saw a version older than %" PRIu64, s->key, s->version);
		s->state = HOLDING;
		s->hold = 1 + (int)(next_random(w) % 4);
		return 0;
	case RELEASING:
		atomic_fetch_add_explicit(&n_reads, 1, memory_order_relaxed);
		s->state = IDLE;
		return 1;
	default:
		FAIL("an event completed in state %d", (int)s->state);
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct slot slots[DEPTH];
	struct coffer_event *done[DEPTH];
	coffer_handle_t eq;
	long started = 0, finished = 0;
	int idle_polls = 0;

	memset(slots, 0, sizeof(slots));
	CHECK(coffer_eq_create(&eq));
	for (int i = 0; i < DEPTH; i++)
		CHECK(coffer_event_init(&slots[i].ev, eq, NULL));
	/* A first read before the others: asynchronous (opens this EQ's channel), released with
	 * a blocking call (opens the hidden EQ's). At the start line every worker holds both
	 * channels at once: 64 on each workers' connection when it has 32 workers. */
	struct slot *s0 = &slots[0];
	bool reaped = false;

	s0->key = w->id % nkeys;
	key_oid(s0->key, &s0->oid);
	CHECK(coffer_obj_get_oid(w->conn, &s0->oid, -1, &s0->rdata, &s0->size, &s0->ev));
	CHECK(coffer_event_test(&s0->ev, -1, &reaped));
	CHECK(s0->ev.ev_error);
	value_check(s0->rdata, s0->size, s0->key, "first get");
	CHECK(coffer_obj_release_data(w->conn, &s0->oid, s0->rdata, NULL));
	pthread_barrier_wait(&start_line);

	while (finished < ops) {
		for (int i = 0; i < DEPTH; i++) {
			struct slot *s = &slots[i];

			if (s->unlaunched) {
				launch(w, s);
			} else if (s->state == IDLE && started < ops) {
				started++;
				if (start_op(w, s) < 0)
					finished++;
			} else if (s->state == HOLDING && --s->hold == 0) {
				/* the bytes must not have changed while we held the reference */
				value_check(s->rdata, s->size, s->key, "held");
				s->state = RELEASING;
				launch(w, s);
			}
		}
		/* Wait at most 10 ms: holds count down per round, so never wait forever. */
		int n = coffer_eq_poll(eq, 0, 10000, DEPTH, done);

		if (n < 0)
			FAIL("coffer_eq_poll: %s", coffer_strerror(n));
		idle_polls = n == 0 ? idle_polls + 1 : 0;
		if (idle_polls > 3000) /* 30 s without a completion */
			FAIL("thread %u: no progress", w->id);
		for (int i = 0; i < n; i++)
			finished += complete(w, (struct slot *)done[i]);
	}
	/* Nothing runs any more: finalise the events, then destroy the EQ without FORCE. */
	for (int i = 0; i < DEPTH; i++)
		CHECK(coffer_event_fini(&slots[i].ev));
	CHECK(coffer_eq_destroy(eq, 0));
	return NULL;
}

/* ---- main ---------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
	static struct worker workers[MAX_THREAD];
	struct coffer_store_info before, after;
	uint64_t evicted;
	unsigned nconns;

	if (argc < 2 || argc > 5)
		FAIL("usage: kvcache SOCKET [THREADS [OPS_PER_THREAD [KEYS]]]");
	if (argc > 2)
		nthreads = (unsigned)strtoul(argv[2], NULL, 10);
	if (argc > 3)
		ops = strtol(argv[3], NULL, 10);
	if (argc > 4)
		nkeys = (unsigned)strtoul(argv[4], NULL, 10);
	if (nthreads < 1 || nthreads > MAX_THREAD || ops < 1 || nkeys < 1 || nkeys > MAX_KEYS)
		FAIL("THREADS 1..%d, OPS >= 1, KEYS 1..%d", MAX_THREAD, MAX_KEYS);
	nconns = 1 + (nthreads + THREADS_PER_CONN - 1) / THREADS_PER_CONN;

	CHECK(coffer_init());
	for (unsigned c = 0; c < nconns; c++)
		CHECK(coffer_connect(argv[1], &conns[c]));
	CHECK(coffer_store_query(conns[0], &before));

	/* version 1 of every key, blocking: create, fill, seal (dropping our reference) */
	for (unsigned k = 0; k < nkeys; k++) {
		struct coffer_oid oid;
		void *data;

		key_oid(k, &oid);
		CHECK(coffer_obj_create_oid(conns[0], &oid, value_size(k, 1), 0, &data, NULL));
		value_fill(data, k, 1);
		CHECK(coffer_obj_seal_oid(conns[0], &oid, COFFER_SEAL_RELEASE, NULL));
		published[k] = 1;
	}

	pthread_barrier_init(&start_line, NULL, nthreads);
	for (unsigned i = 0; i < nthreads; i++) {
		workers[i].id = i;
		workers[i].conn = conns[1 + i / THREADS_PER_CONN];
		workers[i].rng = 0x9E3779B97F4A7C15ull * (i + 1);
		for (unsigned k = 0; k < nkeys; k++)
			workers[i].version[k] = 1;
		if (pthread_create(&workers[i].tid, NULL, worker_main, &workers[i]) != 0)
			FAIL("pthread_create failed");
	}
	for (unsigned i = 0; i < nthreads; i++)
		pthread_join(workers[i].tid, NULL);
	pthread_barrier_destroy(&start_line);

	/* every key holds its last published version; then delete it */
	for (unsigned k = 0; k < nkeys; k++) {
		struct coffer_oid oid;
		const void *data;
		uint64_t size;

		key_oid(k, &oid);
		CHECK(coffer_obj_get_oid(conns[0], &oid, 0, &data, &size, NULL));
		if (value_check(data, size, k, "at the end") != published[k])
			FAIL("key %u: the last version is not the last published one", k);
		CHECK(coffer_obj_release_data(conns[0], &oid, data, NULL));
		CHECK(coffer_obj_delete(conns[0], &oid, NULL));
	}
	/* nothing leaked: no reference of ours pins a replaced version. The store is a cache:
	 * when it is full, our creates evict sealed objects nobody holds (other clients', or
	 * an earlier run's), which lowers used_bytes. Evictions are counted, so the objects
	 * must then balance instead: every one sealed before is still there or was evicted. */
	CHECK(coffer_store_query(conns[0], &after));
	evicted = after.evictions - before.evictions;
	if (after.objects_created != before.objects_created ||
	    (evicted == 0 && after.used_bytes != before.used_bytes) ||
	    (evicted != 0 && (after.used_bytes > before.used_bytes ||
			      after.objects_sealed + evicted != before.objects_sealed)))
		FAIL("store used %" PRIu64 " bytes (%" PRIu64 " unsealed, %" PRIu64
		     " sealed), %" PRIu64 " (%" PRIu64 " sealed) before the run, %" PRIu64
		     " evicted meanwhile",
		     after.used_bytes, after.objects_created, after.objects_sealed,
		     before.used_bytes, before.objects_sealed, evicted);
	for (unsigned c = 0; c < nconns; c++)
		CHECK(coffer_disconnect(conns[c]));
	CHECK(coffer_fini());
	printf("kvcache: %u threads, %u connections, %u keys: %" PRIu64 " reads, %" PRIu64
	       " blocking reads, %" PRIu64 " replaces, every byte checked",
	       nthreads, nconns, nkeys, n_reads, n_blocking, n_writes);
	if (evicted != 0)
		printf("; %" PRIu64 " objects of other clients evicted", evicted);
	printf("\n");
	return 0;
}
