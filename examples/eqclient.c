/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * examples/eqclient.c - a DAOS-style multithreaded asynchronous client of libcoffer, written
 * from README.md and the headers in include/coffer/ only.
 *
 * N worker threads, each with its own EQ (or, with -s, all sharing one EQ), keep D
 * asynchronous operations in flight through phases separated by barriers:
 *   W1  write by handle: obj_open, create (event), fill, seal+release (event), obj_close
 *   W2  write by reservation: reserve 16 blocks (one event), fill, 16 puts on child events
 *       of one parent (coffer_event_parent_barrier), checking each child's result
 *   R1  every thread reads every object (the same IDs opened from all threads at once):
 *       obj_open, get (event), verify checksum, release (by handle or by pointer), close
 *   R2  get_bulk of 16 IDs (event), verify, release_data_bulk (event)
 *   R2v get_oid_vec of 16 IDs (16 events, reaped by any thread), verify, release_oid_bulk
 *   R3  read_oid_vec through the object index, -EAGAIN falling back to a blocking get
 *   X   a thread launches 37 gets on its own EQ (5 not yet published) and creates an object
 *       it never seals, then exits; main reaps the gets on that EQ, the store keeps the
 *       unsealed object until the disconnect
 *   E   nearly 100 error returns and event rules from the headers, one by one (a get that
 *       waits for another thread's seal, replace with release by pointer, reservations,
 *       closed handles, destroyed EQs, a disconnect completing waiting gets -ENOTCONN)
 *   S   delete everything, destroy EQs, finalise events, disconnect, and check with a second
 *       connection that the store holds nothing of ours (no object, reservation or byte).
 *
 *   eqclient [-t THREADS] [-d DEPTH] [-n OBJECTS] [-z MAXSIZE] [-s] SOCKET
 * Objects are 1..MAXSIZE bytes (default and most 65536); the store must hold them all.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <coffer/coffer.h>

#define BULK	   16
#define MAXSIZE	   (64u * 1024u)
#define POLL_US	   100000 /* 100 ms */
#define STALL_SECS 30

static _Noreturn void DIE(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static _Noreturn void DIE(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("eqclient: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}
#define CHECK(call)                                                                                \
	do {                                                                                       \
		int rc_ = (int)(call);                                                             \
		if (rc_ < 0)                                                                       \
			DIE("%s:%d %s: %s", __FILE__, __LINE__, #call, coffer_strerror(rc_));      \
	} while (0)

enum op {
	OP_IDLE,
	OP_CREATE,
	OP_SEAL,
	OP_RESERVE,
	OP_PUTS,
	OP_GET,
	OP_RELEASE,
	OP_GETBULK,
	OP_RELBULK,
	OP_GETVEC,
	OP_RELOIDBULK
};
enum phase { PH_W1, PH_W2, PH_R1, PH_R2, PH_RV, PH_NR };
static const char *phase_name[] = {"W1 create/seal", "W2 reserve/put", "R1 get/release",
				   "R2 get_bulk/release_data_bulk",
				   "R2v get_oid_vec/release_oid_bulk"};

struct worker;

/* An event and the io it belongs to (coffer_event has no user pointer: embed it). */
struct tev {
	struct coffer_event ev;
	struct io *io;
};

struct io {
	struct tev ev;	/* every operation but the puts */
	struct tev pev; /* the puts' parent: an event with children can carry no operation of
			 * its own until they are all launched (-EINVAL), see event.h */
	struct coffer_event child[BULK];
	struct tev vev[BULK]; /* the independent gets of coffer_obj_get_oid_vec() */
	const void *vdata[BULK];
	uint64_t vsize[BULK];
	atomic_uint pending; /* gets not yet reaped, plus one while the launcher still launches */
	struct worker *w;    /* the thread that owns it now: launched it or reaped its event */
	struct io *retry_next;
	enum op op;
	uint64_t item;
	uint32_t idx;
	coffer_handle_t oh;
	int by_data;
	void *wr;
	const void *rd;
	uint64_t size;
	unsigned int n, nlaunched;
	uint32_t idxs[BULK];
	struct coffer_oid oids[BULK];
	struct coffer_obj_buf bufs[BULK];
	void *blocks[BULK];
	const void *ptrs[BULK];
};

struct worker {
	pthread_t tid;
	int id;
	coffer_handle_t eq;
	struct io *ios;
	struct io *retry;
	atomic_uint active; /* its ios still working on an item */
	uint64_t eagain, polls, reaped;
};

static struct {
	const char *sock;
	unsigned int threads, depth, nobj, shared, maxsize;
	coffer_handle_t conn, shared_eq;
	struct worker *w;
	pthread_barrier_t bar;
	enum phase phase;
	uint64_t total;		     /* items in this phase */
	_Atomic uint64_t next, done; /* items handed out / finished */
	_Atomic uint64_t *sum;	     /* checksum of each object as written */
	_Atomic uint64_t verified, bytes, released_by_data, released_by_handle, released_by_id;
	_Atomic uint64_t put_children, eagain_total, index_hits, index_misses, half_launched;
} g;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- content and checksums ---- */

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t obj_size(uint32_t idx)
{
	return 1 + mix(idx) % g.maxsize;
}

static void obj_oid(uint32_t idx, struct coffer_oid *oid)
{
	memset(oid, 0, sizeof(*oid));
	snprintf((char *)oid->id, sizeof(oid->id), "eqc-%d-%u", (int)getpid(), idx);
}

static void fill(uint32_t idx, uint8_t *p, uint64_t size)
{
	uint64_t s = mix(idx ^ 0x5555);
	for (uint64_t i = 0; i < size; i += 8) {
		uint64_t v = mix(s + i);
		memcpy(p + i, &v, size - i < 8 ? size - i : 8);
	}
}

static uint64_t fnv(const void *p, uint64_t size)
{
	const uint8_t *b = p;
	uint64_t h = 0xcbf29ce484222325ull;
	for (uint64_t i = 0; i < size; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

static void write_obj(uint32_t idx, void *p, uint64_t size)
{
	fill(idx, p, size);
	atomic_store(&g.sum[idx], fnv(p, size));
}

static void verify(uint32_t idx, const void *p, uint64_t size)
{
	if (size != obj_size(idx))
		DIE("object %u: size %" PRIu64 ", wrote %" PRIu64, idx, size, obj_size(idx));
	uint64_t want = atomic_load(&g.sum[idx]), got = fnv(p, size);
	if (want == 0 || got != want)
		DIE("object %u: checksum %016" PRIx64 ", wrote %016" PRIx64, idx, got, want);
	atomic_fetch_add(&g.verified, 1);
	atomic_fetch_add(&g.bytes, size);
}

/* ---- the state machine: launch, complete ---- */

static void finish_item(struct io *io);
static void start_next(struct io *io);
static void vec_done(struct io *io, struct worker *self);

/* Launch io's current op; -EAGAIN (channel full) parks it on its thread's retry list. */
static void launch(struct io *io)
{
	int rc = 0;
	struct coffer_oid oid;

	switch (io->op) {
	case OP_CREATE:
		rc = coffer_obj_create(io->oh, obj_size(io->idx), 0, &io->wr, &io->ev.ev);
		break;
	case OP_SEAL:
		rc = coffer_obj_seal(io->oh, COFFER_SEAL_RELEASE, &io->ev.ev);
		break;
	case OP_RESERVE:
		rc = coffer_obj_reserve(g.conn, g.maxsize, io->n, io->blocks, &io->ev.ev);
		break;
	case OP_PUTS: {
		/* Each put on a child event, then the parent as their barrier. A full channel
		 * can stop us after some children: the launched ones run on, the parent waits
		 * (it is not launched yet) and the retry resumes at the first unlaunched child. */
		while (io->nlaunched < io->n) {
			unsigned int i = io->nlaunched;
			rc = coffer_obj_put(g.conn, &io->oids[i], io->blocks[i],
					    obj_size(io->idxs[i]), 0, &io->child[i]);
			if (rc < 0)
				break;
			io->nlaunched++;
		}
		if (rc == 0)
			rc = coffer_event_parent_barrier(&io->pev.ev);
		if (rc == 0)
			atomic_fetch_add(&g.put_children, io->n);
		if (rc == -EAGAIN && io->nlaunched > 0)
			atomic_fetch_add(&g.half_launched, 1);
		break;
	}
	case OP_GET:
		rc = coffer_obj_get(io->oh, 0, &io->rd, &io->size, &io->ev.ev);
		break;
	case OP_RELEASE:
		obj_oid(io->idx, &oid);
		rc = io->by_data ? coffer_obj_release_data(g.conn, &oid, io->rd, &io->ev.ev)
				 : coffer_obj_release(io->oh, &io->ev.ev);
		break;
	case OP_GETBULK:
		rc = coffer_obj_get_bulk(g.conn, io->oids, io->n, 0, io->bufs, &io->ev.ev);
		break;
	case OP_RELBULK:
		rc = coffer_obj_release_data_bulk(g.conn, io->oids, io->ptrs, io->n, &io->ev.ev);
		break;
	case OP_GETVEC: {
		/* n independent gets, each its own event; a full channel launches only a prefix
		 * (the return value): the rest waits on the retry list. Completions reaped
		 * meanwhile (by any thread) count pending down; the launcher's own count keeps
		 * it above 0 until every get is launched, so only then can the io move on. */
		struct coffer_get_vec gv[BULK];
		unsigned int k = io->n - io->nlaunched;
		for (unsigned int i = 0; i < k; i++) {
			unsigned int j = io->nlaunched + i;
			gv[i] = (struct coffer_get_vec){.oid = io->oids[j],
							.ev = &io->vev[j].ev,
							.data = &io->vdata[j],
							.size = &io->vsize[j]};
		}
		rc = coffer_obj_get_oid_vec(g.conn, gv, k, 0);
		if (rc > 0) {
			io->nlaunched += (unsigned int)rc;
			if (io->nlaunched < io->n) {
				atomic_fetch_add(&g.half_launched, 1);
				rc = -EAGAIN; /* park the rest */
			} else {
				if (atomic_fetch_sub(&io->pending, 1) == 1)
					vec_done(io, io->w);
				return; /* else io is no longer ours: do not touch it */
			}
		}
		break;
	}
	case OP_RELOIDBULK:
		rc = coffer_obj_release_oid_bulk(g.conn, io->oids, io->n, &io->ev.ev);
		break;
	default:
		DIE("launch of op %d", io->op);
	}
	if (rc == -EAGAIN) {
		io->w->eagain++;
		atomic_fetch_add(&g.eagain_total, 1);
		io->retry_next = io->w->retry;
		io->w->retry = io;
		return;
	}
	if (rc < 0)
		DIE("launch of op %d on item %" PRIu64 ": %s", io->op, io->item,
		    coffer_strerror(rc));
}

/* All gets of a get_oid_vec completed: the io is the caller's alone again. */
static void vec_done(struct io *io, struct worker *self)
{
	io->w = self;
	for (unsigned int i = 0; i < io->n; i++) {
		if (io->vev[i].ev.ev_error)
			DIE("get_oid_vec %u: %s", io->idxs[i],
			    coffer_strerror(io->vev[i].ev.ev_error));
		verify(io->idxs[i], io->vdata[i], io->vsize[i]);
	}
	io->op = OP_RELOIDBULK;
	launch(io);
}

/* An event of io completed (reaped by any thread): check, go on. */
static void complete(struct tev *t, struct worker *self)
{
	struct io *io = t->io;
	int err = t->ev.ev_error;

	if (io->op == OP_GETVEC) { /* one of n gets: others may be reaped elsewhere right now */
		if (atomic_fetch_sub(&io->pending, 1) == 1)
			vec_done(io, self);
		return;
	}
	/* a reaped io now belongs to the reaping thread (shared EQ) */
	io->w = self;
	switch (io->op) {
	case OP_CREATE:
		if (err)
			DIE("create %u: %s", io->idx, coffer_strerror(err));
		write_obj(io->idx, io->wr, obj_size(io->idx));
		io->op = OP_SEAL;
		launch(io);
		return;
	case OP_SEAL:
		if (err)
			DIE("seal %u: %s", io->idx, coffer_strerror(err));
		CHECK(coffer_obj_close(io->oh));
		finish_item(io);
		return;
	case OP_RESERVE:
		if (err)
			DIE("reserve of %u blocks: %s", io->n, coffer_strerror(err));
		for (unsigned int i = 0; i < io->n; i++) {
			if (!io->blocks[i])
				DIE("reserve: block %u NULL with ev_error 0", i);
			write_obj(io->idxs[i], io->blocks[i], obj_size(io->idxs[i]));
		}
		io->op = OP_PUTS;
		io->nlaunched = 0;
		launch(io);
		return;
	case OP_PUTS:
		for (unsigned int i = 0; i < io->n; i++)
			if (io->child[i].ev_error)
				DIE("put %u (child %u): %s", io->idxs[i], i,
				    coffer_strerror(io->child[i].ev_error));
		if (err)
			DIE("puts: parent ev_error %s with every child 0", coffer_strerror(err));
		finish_item(io);
		return;
	case OP_GET:
		if (err)
			DIE("get %u: %s", io->idx, coffer_strerror(err));
		verify(io->idx, io->rd, io->size);
		io->op = OP_RELEASE;
		launch(io);
		return;
	case OP_RELEASE:
		if (err)
			DIE("release %u (%s): %s", io->idx, io->by_data ? "by data" : "by handle",
			    coffer_strerror(err));
		atomic_fetch_add(io->by_data ? &g.released_by_data : &g.released_by_handle, 1);
		CHECK(coffer_obj_close(io->oh));
		finish_item(io);
		return;
	case OP_GETBULK:
		if (err)
			DIE("get_bulk: %s", coffer_strerror(err));
		for (unsigned int i = 0; i < io->n; i++) {
			if (io->bufs[i].status)
				DIE("get_bulk %u: %s", io->idxs[i],
				    coffer_strerror(io->bufs[i].status));
			verify(io->idxs[i], io->bufs[i].data, io->bufs[i].size);
			io->ptrs[i] = io->bufs[i].data;
		}
		io->op = OP_RELBULK;
		launch(io);
		return;
	case OP_RELBULK:
		if (err)
			DIE("release_data_bulk: %s", coffer_strerror(err));
		atomic_fetch_add(&g.released_by_data, io->n);
		finish_item(io);
		return;
	case OP_RELOIDBULK:
		if (err)
			DIE("release_oid_bulk: %s", coffer_strerror(err));
		atomic_fetch_add(&g.released_by_id, io->n);
		finish_item(io);
		return;
	default:
		DIE("completion of an io in op %d", io->op);
	}
}

static void finish_item(struct io *io)
{
	atomic_fetch_add(&g.done, 1);
	start_next(io);
}

/* Give io the next item of the phase, or leave it idle. */
static void start_next(struct io *io)
{
	uint64_t item = atomic_fetch_add(&g.next, 1);
	struct coffer_oid oid;

	if (item >= g.total) {
		io->op = OP_IDLE;
		atomic_fetch_sub(&io->w->active, 1);
		return;
	}
	io->item = item;
	switch (g.phase) {
	case PH_W1: /* objects [0, nobj/2) */
		io->idx = (uint32_t)item;
		obj_oid(io->idx, &oid);
		CHECK(coffer_obj_open(g.conn, &oid, 0, &io->oh));
		io->op = OP_CREATE;
		break;
	case PH_W2: /* objects [nobj/2, nobj) in batches of BULK */
		io->n = 0;
		for (uint32_t i = g.nobj / 2 + (uint32_t)item * BULK; i < g.nobj && io->n < BULK;
		     i++) {
			io->idxs[io->n] = i;
			obj_oid(i, &io->oids[io->n]);
			io->n++;
		}
		io->op = OP_RESERVE;
		break;
	case PH_R1: /* every thread reads every object: item % nobj */
		io->idx = (uint32_t)(item % g.nobj);
		io->by_data = (item / g.nobj) & 1;
		obj_oid(io->idx, &oid);
		CHECK(coffer_obj_open(g.conn, &oid, 0, &io->oh));
		io->op = OP_GET;
		break;
	case PH_R2: /* BULK scattered IDs per item */
		io->n = BULK;
		for (unsigned int i = 0; i < BULK; i++) {
			io->idxs[i] = (uint32_t)(mix(item * BULK + i) % g.nobj);
			obj_oid(io->idxs[i], &io->oids[i]);
		}
		io->op = OP_GETBULK;
		break;
	case PH_RV: /* BULK scattered IDs per item, each its own get and event */
		io->n = BULK;
		for (unsigned int i = 0; i < BULK; i++) {
			io->idxs[i] = (uint32_t)(mix(~item * BULK + i) % g.nobj);
			obj_oid(io->idxs[i], &io->oids[i]);
		}
		io->nlaunched = 0;
		atomic_store(&io->pending, BULK + 1);
		io->op = OP_GETVEC;
		break;
	default:
		DIE("phase %d", g.phase);
	}
	launch(io);
}

static void run_phase(struct worker *w)
{
	coffer_handle_t eq = g.shared ? g.shared_eq : w->eq;
	struct coffer_event *evs[16];
	time_t last = time(NULL);
	uint64_t seen = 0;

	atomic_store(&w->active, g.depth);
	for (unsigned int i = 0; i < g.depth; i++) {
		w->ios[i].w = w;
		start_next(&w->ios[i]);
	}
	/* own EQ: until this thread's ios are idle; shared EQ: until every item is done */
	while (g.shared ? atomic_load(&g.done) < g.total : atomic_load(&w->active) > 0) {
		struct io *r = w->retry;
		w->retry = NULL;
		while (r) { /* relaunch what met a full channel */
			struct io *nx = r->retry_next;
			launch(r);
			r = nx;
		}
		int n = coffer_eq_poll(eq, 0, POLL_US, 16, evs);
		w->polls++;
		if (n < 0)
			DIE("thread %d: coffer_eq_poll: %s", w->id, coffer_strerror(n));
		for (int i = 0; i < n; i++)
			complete((struct tev *)evs[i], w);
		w->reaped += (uint64_t)n;
		uint64_t d = atomic_load(&g.done);
		if (d != seen) {
			seen = d;
			last = time(NULL);
		} else if (time(NULL) - last > STALL_SECS) {
			DIE("thread %d: no progress for %d s in %s (done %" PRIu64 "/%" PRIu64
			    ", active %u)",
			    w->id, STALL_SECS, phase_name[g.phase], d, g.total,
			    atomic_load(&w->active));
		}
	}
}

/* R3: synchronous reads through the object index, a blocking get on -EAGAIN. */
static void read_index(struct worker *w)
{
	struct coffer_read_vec rv[BULK];
	static _Thread_local uint8_t buf[BULK][MAXSIZE];

	for (uint32_t base = (uint32_t)w->id * BULK; base < g.nobj; base += g.threads * BULK) {
		unsigned int n = 0;
		for (uint32_t i = base; i < g.nobj && n < BULK; i++, n++) {
			obj_oid(i, &rv[n].oid);
			rv[n].offset = 0;
			rv[n].buf = buf[n];
			rv[n].len = MAXSIZE;
		}
		int hits = coffer_obj_read_oid_vec(g.conn, rv, n);
		if (hits < 0)
			DIE("read_oid_vec: %s", coffer_strerror(hits));
		for (unsigned int i = 0; i < n; i++) {
			uint32_t idx = base + i;
			if (rv[i].result >= 0) {
				if ((uint64_t)rv[i].result != rv[i].size)
					DIE("read_oid_vec %u: %" PRId64 " of %" PRIu64 " bytes",
					    idx, rv[i].result, rv[i].size);
				verify(idx, buf[i], rv[i].size);
				atomic_fetch_add(&g.index_hits, 1);
			} else if (rv[i].result == -EAGAIN) {
				const void *p;
				uint64_t size;
				CHECK(coffer_obj_get_oid(g.conn, &rv[i].oid, 0, &p, &size, NULL));
				verify(idx, p, size);
				CHECK(coffer_obj_release_data(g.conn, &rv[i].oid, p, NULL));
				atomic_fetch_add(&g.index_misses, 1);
			} else {
				DIE("read_oid_vec %u: %s", idx, coffer_strerror((int)rv[i].result));
			}
		}
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	for (enum phase p = 0; p < PH_NR; p++) {
		int r = pthread_barrier_wait(&g.bar); /* main sets the phase up */
		(void)r;
		run_phase(w);
		pthread_barrier_wait(&g.bar); /* main reports */
	}
	pthread_barrier_wait(&g.bar);
	read_index(w);
	pthread_barrier_wait(&g.bar);
	return NULL;
}

/* X: a thread that exits with operations in flight on its own EQ. */
#define LEAVER_GETS 37
struct leaver {
	coffer_handle_t eq;
	struct coffer_event ev[LEAVER_GETS];
	struct coffer_oid oid[LEAVER_GETS];
	const void *data[LEAVER_GETS];
	uint64_t size[LEAVER_GETS];
	void *created;
	struct coffer_oid created_oid;
};

static void *leaver_main(void *arg)
{
	struct leaver *l = arg;

	CHECK(coffer_eq_create(&l->eq));
	for (int i = 0; i < LEAVER_GETS; i++) {
		CHECK(coffer_event_init(&l->ev[i], l->eq, NULL));
		obj_oid((uint32_t)i, &l->oid[i]);
		CHECK(
		    coffer_obj_get_oid(g.conn, &l->oid[i], 0, &l->data[i], &l->size[i], &l->ev[i]));
	}
	/* and one object created but never sealed, by a blocking call (hidden EQ) */
	memset(&l->created_oid, 0, sizeof(l->created_oid));
	snprintf((char *)l->created_oid.id, sizeof(l->created_oid.id), "eqc-%d-unsealed",
		 (int)getpid());
	CHECK(coffer_obj_create_oid(g.conn, &l->created_oid, 4096, 0, &l->created, NULL));
	/* exits: 37 gets in flight, the last 5 not even published (COFFER_BATCH is 32 by
	 * default: they wait in the channel for a poll or a flush), one unsealed create */
	return NULL;
}

/* E: the documented error returns and event rules, one by one. */
#define EXPECT(call, want)                                                                         \
	do {                                                                                       \
		int rc_ = (int)(call);                                                             \
		if (rc_ != (want))                                                                 \
			DIE("%s:%d %s: %s (%d), expected %s", __FILE__, __LINE__, #call,           \
			    coffer_strerror(rc_), rc_, coffer_strerror(want));                     \
		g_edges++;                                                                         \
	} while (0)
static unsigned int g_edges;

static int reap_one(coffer_handle_t eq, struct coffer_event *want, int64_t timeout_us)
{
	struct coffer_event *e;
	int n = coffer_eq_poll(eq, 1, timeout_us, 1, &e);
	if (n != 1)
		DIE("poll: %d (%s), expected one event", n, n < 0 ? coffer_strerror(n) : "timeout");
	if (e != want)
		DIE("poll returned another event");
	return e->ev_error;
}

struct sealer_arg {
	struct coffer_oid oid;
	useconds_t delay;
};

static void *sealer(void *arg)
{
	struct sealer_arg *a = arg;
	void *p;
	usleep(a->delay);
	CHECK(coffer_obj_create_oid(g.conn, &a->oid, 100, 0, &p, NULL));
	memset(p, 0xab, 100);
	CHECK(coffer_obj_seal_oid(g.conn, &a->oid, COFFER_SEAL_RELEASE, NULL));
	return NULL;
}

static void edges(void)
{
	coffer_handle_t eq, oh, eq2;
	struct coffer_event ev, ev2, *evp;
	struct coffer_oid oid, missing;
	void *wr, *blk[2];
	const void *rd;
	uint64_t size;
	bool done, present;

	CHECK(coffer_eq_create(&eq));
	CHECK(coffer_event_init(&ev, eq, NULL));
	CHECK(coffer_event_init(&ev2, eq, NULL));
	memset(&missing, 0, sizeof(missing));
	snprintf((char *)missing.id, sizeof(missing.id), "eqc-%d-missing", (int)getpid());
	memset(&oid, 0, sizeof(oid));
	snprintf((char *)oid.id, sizeof(oid.id), "eqc-%d-edge", (int)getpid());

	/* poll: nothing running, wait_running -> 0 at once; without it, a timeout -> 0 */
	double t0 = now();
	EXPECT(coffer_eq_poll(eq, 1, 1000000, 1, &evp), 0);
	if (now() - t0 > 0.1)
		DIE("poll with wait_running and nothing running waited %.3f s", now() - t0);
	t0 = now();
	EXPECT(coffer_eq_poll(eq, 0, 20000, 1, &evp), 0);
	if (now() - t0 < 0.015)
		DIE("poll with a 20 ms timeout returned after %.3f s", now() - t0);
	EXPECT(coffer_eq_poll(eq, 0, 0, 0, &evp), -EINVAL);
	EXPECT(coffer_eq_poll(COFFER_HANDLE_NULL, 0, 0, 1, &evp), -EINVAL);

	/* get with timeout 0 of a missing ID: -ENOENT, as ev_error */
	CHECK(coffer_obj_open(g.conn, &oid, 0, &oh));
	EXPECT(coffer_obj_get_oid(g.conn, &missing, 0, &rd, &size, &ev), 0);
	EXPECT(reap_one(eq, &ev, 5000000), -ENOENT);
	EXPECT(coffer_obj_get_oid(g.conn, &missing, 0, &rd, &size, NULL), -ENOENT);

	/* an event in flight: relaunch -EBUSY, fini -EBUSY, destroy -EBUSY; query counts it */
	struct coffer_oid waited;
	memset(&waited, 0, sizeof(waited));
	snprintf((char *)waited.id, sizeof(waited.id), "eqc-%d-waited", (int)getpid());
	EXPECT(coffer_obj_get_oid(g.conn, &waited, 5000000, &rd, &size, &ev), 0);
	EXPECT(coffer_obj_get_oid(g.conn, &waited, 0, &rd, &size, &ev), -EBUSY);
	EXPECT(coffer_event_fini(&ev), -EBUSY);
	EXPECT(coffer_eq_destroy(eq, 0), -EBUSY);
	EXPECT(coffer_eq_query(eq, COFFER_EQR_ALL, 0, NULL), 1);
	/* a get that waits for a seal another thread makes 50 ms later */
	struct sealer_arg sa = {.oid = waited, .delay = 50000};
	pthread_t st;
	pthread_create(&st, NULL, sealer, &sa);
	EXPECT(coffer_event_test(&ev, 0, &done), 0);
	if (done)
		DIE("event_test: done before the seal");
	EXPECT(coffer_event_test(&ev, 3000000, &done), 0);
	if (!done || ev.ev_error || size != 100 || ((const uint8_t *)rd)[99] != 0xab)
		DIE("the waiting get: done %d, %s, size %" PRIu64, done,
		    coffer_strerror(ev.ev_error), size);
	pthread_join(st, NULL);
	EXPECT(coffer_eq_poll(eq, 0, 0, 1, &evp), 0); /* test reaped it: poll sees nothing */
	EXPECT(coffer_obj_release_data(g.conn, &waited, rd, NULL), 0);
	EXPECT(coffer_obj_release_data(g.conn, &waited, rd, NULL), -ENOENT);
	EXPECT(coffer_obj_delete(g.conn, &waited, NULL), 0);

	/* create/seal errors */
	EXPECT(coffer_obj_create(oh, 64, 0, &wr, NULL), 0);
	EXPECT(coffer_obj_create(oh, 64, 0, &wr, NULL), -EEXIST);
	EXPECT(coffer_obj_contains(g.conn, &oid, &present, NULL), 0);
	if (present)
		DIE("contains: an unsealed object is present");
	EXPECT(coffer_obj_delete(g.conn, &oid, NULL), -EBUSY);
	EXPECT(coffer_obj_create(oh, 64, 7, &wr, NULL), -EINVAL);
	EXPECT(coffer_obj_seal(oh, 0, NULL), 0);
	EXPECT(coffer_obj_seal(oh, 0, NULL), -EALREADY);
	EXPECT(coffer_obj_abort(oh, NULL), -EALREADY);
	EXPECT(coffer_obj_release(oh, NULL), 0); /* the creator's reference */
	EXPECT(coffer_obj_release(oh, NULL), -ENOENT);
	EXPECT(coffer_obj_contains(g.conn, &oid, &present, NULL), 0);
	if (!present)
		DIE("contains: a sealed object is missing");
	EXPECT(coffer_obj_create(oh, (uint64_t)1 << 50, COFFER_CREATE_REPLACE, &wr, NULL), -E2BIG);

	/* replace while a reader holds the old version; release each exactly by pointer */
	const void *old, *cur;
	EXPECT(coffer_obj_get(oh, 0, &old, &size, NULL), 0);
	EXPECT(coffer_obj_create(oh, 64, COFFER_CREATE_REPLACE, &wr, NULL), 0);
	memset(wr, 0x5a, 64);
	EXPECT(coffer_obj_seal(oh, COFFER_SEAL_RELEASE, NULL), 0);
	EXPECT(coffer_obj_get(oh, 0, &cur, &size, NULL), 0);
	if (((const uint8_t *)cur)[0] != 0x5a || cur == old)
		DIE("replace: the get after the seal did not see the new version");
	EXPECT(coffer_obj_release_data(g.conn, &oid, old, NULL), 0);
	EXPECT(coffer_obj_release_data(g.conn, &oid, cur, NULL), 0);
	EXPECT(coffer_obj_delete(g.conn, &oid, NULL), 0);
	EXPECT(coffer_obj_delete(g.conn, &oid, NULL), -ENOENT);

	/* reserve / put / unreserve errors */
	EXPECT(coffer_obj_reserve(g.conn, 128, 2, blk, &ev), 0);
	EXPECT(reap_one(eq, &ev, 5000000), 0);
	EXPECT(coffer_obj_put(g.conn, &oid, blk[0], 129, 0, NULL), -EINVAL);
	EXPECT(coffer_obj_put(g.conn, &oid, (char *)blk[0] + 64, 8, 0, NULL), -ENOENT);
	memset(blk[0], 1, 128);
	EXPECT(coffer_obj_put(g.conn, &oid, blk[0], 128, 0, &ev), 0);
	EXPECT(reap_one(eq, &ev, 5000000), 0);
	EXPECT(coffer_obj_put(g.conn, &oid, blk[1], 128, 0, NULL), -EEXIST); /* stays reserved */
	EXPECT(coffer_obj_put(g.conn, &oid, blk[0], 128, 0, NULL), -ENOENT); /* used up */
	EXPECT(coffer_obj_unreserve(g.conn, blk[1], &ev), 0);
	EXPECT(reap_one(eq, &ev, 5000000), 0);
	EXPECT(coffer_obj_unreserve(g.conn, blk[1], NULL), -ENOENT);
	char b[128];
	EXPECT((int)coffer_obj_read_oid(g.conn, &oid, 0, b, sizeof(b), &size), 128);
	EXPECT(coffer_obj_delete(g.conn, &oid, NULL), 0);
	EXPECT((int)coffer_obj_read_oid(g.conn, &oid, 0, b, sizeof(b), &size), -EAGAIN);

	/* a parent whose second child fails: the parent carries the first error, each child
	 * its own; two rounds on the same parent and children */
	struct coffer_event par, kid[2];
	CHECK(coffer_event_init(&par, eq, NULL));
	for (int i = 0; i < 2; i++)
		CHECK(coffer_event_init(&kid[i], COFFER_HANDLE_NULL, &par));
	EXPECT(coffer_event_parent_barrier(&par), -EINVAL); /* no child launched yet */
	for (int round = 0; round < 2; round++) {
		EXPECT(coffer_obj_reserve(g.conn, 64, 2, blk, NULL), 0);
		EXPECT(coffer_obj_put(g.conn, &oid, blk[0], 64, 0, &kid[0]), 0);
		EXPECT(coffer_obj_put(g.conn, &oid, blk[1], 64, 0, &kid[1]), 0); /* same ID */
		EXPECT(coffer_event_parent_barrier(&par), 0);
		EXPECT(reap_one(eq, &par, 5000000), -EEXIST);
		if (kid[0].ev_error != 0 || kid[1].ev_error != -EEXIST)
			DIE("children: %s, %s", coffer_strerror(kid[0].ev_error),
			    coffer_strerror(kid[1].ev_error));
		EXPECT(coffer_obj_unreserve(g.conn, blk[1], NULL), 0); /* the failed put's block */
		EXPECT(coffer_obj_delete(g.conn, &oid, NULL), 0);
	}
	EXPECT(coffer_event_fini(&par), 0); /* and the children */
	EXPECT(coffer_event_fini(&kid[0]), -EINVAL);

	/* closed handle, destroyed EQ */
	EXPECT(coffer_obj_close(oh), 0);
	EXPECT(coffer_obj_close(oh), -ENOENT);
	EXPECT(coffer_obj_get(oh, 0, &rd, &size, NULL), -ENOENT);
	EXPECT(coffer_obj_get(eq, 0, &rd, &size, NULL), -EINVAL); /* an EQ is not an object */
	CHECK(coffer_eq_create(&eq2));
	CHECK(coffer_event_init(&ev2, eq2, NULL)); /* re-initialised onto another EQ */
	EXPECT(coffer_eq_destroy(eq2, 0), 0);
	EXPECT(coffer_obj_get_oid(g.conn, &missing, 0, &rd, &size, &ev2), -ENOENT);
	EXPECT(coffer_eq_poll(eq2, 0, 0, 1, &evp), -ENOENT);
	EXPECT(coffer_event_fini(&ev2), 0);
	EXPECT(coffer_event_fini(&ev2), -EINVAL);

	/* disconnect with gets waiting forever: they complete with -ENOTCONN */
	coffer_handle_t c2;
	struct coffer_event wev[8];
	CHECK(coffer_connect(g.sock, &c2));
	for (int i = 0; i < 8; i++) {
		CHECK(coffer_event_init(&wev[i], eq, NULL));
		EXPECT(coffer_obj_get_oid(c2, &missing, -1, &rd, &size, &wev[i]), 0);
	}
	CHECK(coffer_flush(c2));
	EXPECT(coffer_disconnect(c2), 0);
	int n = 0;
	while (n < 8) {
		struct coffer_event *evs[8];
		int k = coffer_eq_poll(eq, 1, 5000000, 8, evs);
		if (k <= 0)
			DIE("disconnect: poll %d after %d of 8 gets completed", k, n);
		for (int i = 0; i < k; i++)
			if (evs[i]->ev_error != -ENOTCONN)
				DIE("disconnect: a waiting get completed with %s",
				    coffer_strerror(evs[i]->ev_error));
		n += k;
	}
	g_edges++;
	EXPECT(coffer_obj_get_oid(c2, &missing, 0, &rd, &size, NULL), -ENOTCONN);
	/* the same disconnected handle: calls by handle say -ENOENT (no such connection) */
	coffer_handle_t oh2;
	struct coffer_store_info si;
	EXPECT(coffer_obj_open(c2, &missing, 0, &oh2), -ENOENT);
	EXPECT(coffer_flush(c2), -ENOENT);
	EXPECT(coffer_store_query(c2, &si), -ENOENT);
	EXPECT(coffer_disconnect(c2), -ENOENT);
	EXPECT(coffer_obj_open(eq, &missing, 0, &oh2), -EINVAL); /* an EQ is no connection */
	for (int i = 0; i < 8; i++)
		CHECK(coffer_event_fini(&wev[i]));

	EXPECT(coffer_event_fini(&ev), 0);
	EXPECT(coffer_eq_destroy(eq, 0), 0);
	EXPECT(coffer_eq_destroy(eq, 0), -ENOENT);
	printf("E  %u documented error returns and event rules checked\n", g_edges);
}

int main(int argc, char **argv)
{
	int opt;

	g.threads = 4;
	g.depth = 32;
	g.nobj = 2048;
	g.maxsize = MAXSIZE;
	while ((opt = getopt(argc, argv, "t:d:n:z:s")) != -1) {
		switch (opt) {
		case 't':
			g.threads = (unsigned int)atoi(optarg);
			break;
		case 'd':
			g.depth = (unsigned int)atoi(optarg);
			break;
		case 'n':
			g.nobj = (unsigned int)atoi(optarg);
			break;
		case 'z':
			g.maxsize = (unsigned int)atoi(optarg);
			break;
		case 's':
			g.shared = 1;
			break;
		default:
			fprintf(stderr, "usage: eqclient [-t THREADS] [-d DEPTH] [-n OBJECTS] [-z "
					"MAXSIZE] [-s] SOCKET\n");
			return 2;
		}
	}
	if (optind != argc - 1 || g.threads < 1 || g.threads > 64 || g.depth < 1 || g.depth > 256 ||
	    g.nobj < 2 * BULK || g.nobj % (2 * BULK) || g.maxsize < 1 || g.maxsize > MAXSIZE)
		DIE("bad arguments (OBJECTS a multiple of %d)", 2 * BULK);
	g.sock = argv[optind];

	const char *bad;
	if (coffer_env_check(&bad) < 0)
		DIE("environment variable %s=\"%s\" is out of range", bad, getenv(bad));
	CHECK(coffer_init());
	CHECK(coffer_connect(g.sock, &g.conn));

	coffer_handle_t mon; /* a second connection, to watch the store from outside */
	struct coffer_store_info before, info;
	CHECK(coffer_connect(g.sock, &mon));
	CHECK(coffer_store_query(mon, &before));

	g.sum = calloc(g.nobj, sizeof(*g.sum));
	g.w = calloc(g.threads, sizeof(*g.w));
	if (!g.sum || !g.w)
		DIE("out of memory");
	if (g.shared)
		CHECK(coffer_eq_create(&g.shared_eq));
	for (unsigned int t = 0; t < g.threads; t++) {
		struct worker *w = &g.w[t];
		w->id = (int)t;
		if (!g.shared)
			CHECK(coffer_eq_create(&w->eq));
		w->ios = calloc(g.depth, sizeof(*w->ios));
		if (!w->ios)
			DIE("out of memory");
		for (unsigned int i = 0; i < g.depth; i++) {
			struct io *io = &w->ios[i];
			coffer_handle_t eq = g.shared ? g.shared_eq : w->eq;
			io->ev.io = io->pev.io = io;
			CHECK(coffer_event_init(&io->ev.ev, eq, NULL));
			CHECK(coffer_event_init(&io->pev.ev, eq, NULL));
			for (int c = 0; c < BULK; c++) {
				CHECK(coffer_event_init(&io->child[c], COFFER_HANDLE_NULL,
							&io->pev.ev));
				io->vev[c].io = io;
				CHECK(coffer_event_init(&io->vev[c].ev, eq, NULL));
			}
		}
	}
	pthread_barrier_init(&g.bar, NULL, g.threads + 1);
	for (unsigned int t = 0; t < g.threads; t++)
		if (pthread_create(&g.w[t].tid, NULL, worker_main, &g.w[t]))
			DIE("pthread_create");

	for (enum phase p = 0; p < PH_NR; p++) {
		g.phase = p;
		g.total = p == PH_W1   ? g.nobj / 2
			  : p == PH_W2 ? g.nobj / 2 / BULK
			  : p == PH_R1 ? (uint64_t)g.threads * g.nobj
				       : (uint64_t)g.nobj / BULK * 2; /* R2, R2v */
		atomic_store(&g.next, 0);
		atomic_store(&g.done, 0);
		double t0 = now();
		pthread_barrier_wait(&g.bar);
		pthread_barrier_wait(&g.bar);
		double dt = now() - t0;
		printf("%-32s %8" PRIu64 " items in %.3f s (%.0f items/s)\n", phase_name[p],
		       g.total, dt, (double)g.total / dt);
		if (atomic_load(&g.done) != g.total)
			DIE("%s: %" PRIu64 " of %" PRIu64 " items done", phase_name[p],
			    atomic_load(&g.done), g.total);
	}
	double t0 = now();
	pthread_barrier_wait(&g.bar);
	pthread_barrier_wait(&g.bar);
	printf("%-32s %8u objects in %.3f s (%" PRIu64 " from the index, %" PRIu64
	       " by get after -EAGAIN)\n",
	       "R3 read_oid_vec", g.nobj, now() - t0, atomic_load(&g.index_hits),
	       atomic_load(&g.index_misses));
	for (unsigned int t = 0; t < g.threads; t++)
		pthread_join(g.w[t].tid, NULL);

	/* X: a thread exits with gets in flight; this thread reaps them on its EQ */
	struct leaver *l = calloc(1, sizeof(*l));
	pthread_t lt;
	if (!l || pthread_create(&lt, NULL, leaver_main, l))
		DIE("leaver");
	pthread_join(lt, NULL);
	CHECK(coffer_store_query(mon, &info));
	printf("X  leaver exited: store sees %" PRIu64
	       " created (unsealed) objects, its EQ %d events"
	       "\n",
	       info.objects_created - before.objects_created,
	       coffer_eq_query(l->eq, COFFER_EQR_ALL, 0, NULL));
	usleep(200000); /* nobody polls for a while */
	int got = 0;
	double x0 = now();
	while (got < LEAVER_GETS) {
		struct coffer_event *evs[LEAVER_GETS];
		int n = coffer_eq_poll(l->eq, 1, 2000000, LEAVER_GETS, evs);
		if (n < 0)
			DIE("poll of the leaver's EQ: %s", coffer_strerror(n));
		if (n == 0)
			DIE("poll of the leaver's EQ: nothing after 2 s (%d of %d reaped)", got,
			    LEAVER_GETS);
		for (int i = 0; i < n; i++) {
			int k = (int)(evs[i] - l->ev);
			if (evs[i]->ev_error)
				DIE("leaver get %d: %s", k, coffer_strerror(evs[i]->ev_error));
			verify((uint32_t)k, l->data[k], l->size[k]);
			CHECK(coffer_obj_release_data(g.conn, &l->oid[k], l->data[k], NULL));
		}
		got += n;
	}
	printf("X  reaped the leaver's %d gets from main in %.3f ms, verified, released\n",
	       LEAVER_GETS, (now() - x0) * 1e3);
	for (int i = 0; i < LEAVER_GETS; i++)
		CHECK(coffer_event_fini(&l->ev[i]));
	CHECK(coffer_eq_destroy(l->eq, 0));
	free(l);

	edges();

	/* S: shutdown */
	struct coffer_event dev[64];
	coffer_handle_t deq;
	CHECK(coffer_eq_create(&deq));
	for (int i = 0; i < 64; i++)
		CHECK(coffer_event_init(&dev[i], deq, NULL));
	struct coffer_oid *doid = calloc(g.nobj, sizeof(*doid));
	uint32_t launched = 0, reaped = 0;
	struct coffer_event *free_ev[64];
	int nfree = 64;
	for (int i = 0; i < 64; i++)
		free_ev[i] = &dev[63 - i];
	while (reaped < g.nobj) {
		while (launched < g.nobj && nfree > 0) {
			obj_oid(launched, &doid[launched]);
			struct coffer_event *e = free_ev[--nfree];
			int rc = coffer_obj_delete(g.conn, &doid[launched], e);
			if (rc == -EAGAIN) {
				nfree++;
				break;
			}
			CHECK(rc);
			launched++;
		}
		struct coffer_event *evs[64];
		int n = coffer_eq_poll(deq, 1, POLL_US, 64, evs);
		CHECK(n);
		for (int i = 0; i < n; i++) {
			if (evs[i]->ev_error)
				DIE("delete: %s", coffer_strerror(evs[i]->ev_error));
			free_ev[nfree++] = evs[i];
		}
		reaped += (uint32_t)n;
	}
	for (int i = 0; i < 64; i++)
		CHECK(coffer_event_fini(&dev[i]));
	CHECK(coffer_eq_destroy(deq, 0));
	free(doid);
	for (unsigned int t = 0; t < g.threads; t++) {
		for (unsigned int i = 0; i < g.depth; i++) {
			CHECK(coffer_event_fini(&g.w[t].ios[i].ev.ev));
			CHECK(coffer_event_fini(&g.w[t].ios[i].pev.ev)); /* and its children */
			for (int c = 0; c < BULK; c++)
				CHECK(coffer_event_fini(&g.w[t].ios[i].vev[c].ev));
		}
		if (!g.shared)
			CHECK(coffer_eq_destroy(g.w[t].eq, 0));
	}
	if (g.shared)
		CHECK(coffer_eq_destroy(g.shared_eq, 0));

	CHECK(coffer_store_query(mon, &info));
	printf("S  after deletes, before disconnect: objects sealed %+" PRId64 ", created %+" PRId64
	       ", reserved blocks %" PRIu64 ", used bytes %+" PRId64 "\n",
	       (int64_t)(info.objects_sealed - before.objects_sealed),
	       (int64_t)(info.objects_created - before.objects_created), info.reserved_blocks,
	       (int64_t)(info.used_bytes - before.used_bytes));
	CHECK(coffer_disconnect(g.conn));
	CHECK(coffer_store_query(mon, &info));
	printf("S  after disconnect: objects sealed %+" PRId64 ", created %+" PRId64
	       ", reserved blocks %" PRIu64 ", used bytes %+" PRId64 ", clients %" PRIu64 "\n",
	       (int64_t)(info.objects_sealed - before.objects_sealed),
	       (int64_t)(info.objects_created - before.objects_created), info.reserved_blocks,
	       (int64_t)(info.used_bytes - before.used_bytes), info.clients);
	int fail = info.objects_sealed != before.objects_sealed ||
		   info.objects_created != before.objects_created || info.reserved_blocks ||
		   info.used_bytes != before.used_bytes;
	CHECK(coffer_disconnect(mon));
	CHECK(coffer_fini());
	for (unsigned int t = 0; t < g.threads; t++)
		free(g.w[t].ios);
	free(g.w);
	free((void *)g.sum);
	pthread_barrier_destroy(&g.bar);

	uint64_t eag = atomic_load(&g.eagain_total);
	printf(
	    "verified %" PRIu64 " reads (%" PRIu64 " bytes) against writer checksums; %" PRIu64
	    " puts on child events; releases %" PRIu64 " by pointer, %" PRIu64
	    " by handle, %" PRIu64 " by ID; -EAGAIN at launch %" PRIu64 " (%" PRIu64
	    " with a vector or a parent's children half launched); %s EQ, %u threads, depth %u\n",
	    atomic_load(&g.verified), atomic_load(&g.bytes), atomic_load(&g.put_children),
	    atomic_load(&g.released_by_data), atomic_load(&g.released_by_handle),
	    atomic_load(&g.released_by_id), eag, atomic_load(&g.half_launched),
	    g.shared ? "one shared" : "per-thread", g.threads, g.depth);
	if (fail)
		DIE("the store still holds something of ours after disconnect");
	printf("eqclient: OK\n");
	return 0;
}
