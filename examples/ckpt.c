/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * examples/ckpt.c - a DAOS-style multithreaded checkpoint writer and reader, written from
 * README.md, docs/ and the headers in include/coffer/ only.
 *
 * THREADS threads (default 8) share one connection; each has its own EQ and a pool of
 * events it reuses once they completed. Phases, separated by barriers:
 *   W  write: each thread writes ROUNDS rounds of checkpoint objects of many sizes (0 B to
 *      1 MiB + 13, across the 64-byte and 2 MiB rounding steps): create on an event per
 *      object, poll, fill, seal+release on the same (reused) events, poll
 *   L  late: each thread launches a get with a timeout (positive, and -1 for one) of an ID
 *      its neighbour seals only after the barrier; the get waits in the store
 *   R  read: each thread gets every other thread's objects with a positive timeout, checks
 *      every byte, releases each by pointer (coffer_obj_release_data) on the same events
 *   A  abort in flight: a create and its abort launched back to back on one EQ (one channel:
 *      ordered), then the ID is missing; abort of a sealed object is -EALREADY
 *   P  polls: timeout 0, positive and -1 (with wait_running) on an idle EQ return 0;
 *      -1 with a get in flight returns it once its object is sealed
 *   T  tester and poller: one thread launches gets and loops coffer_event_test() on them
 *      while another thread polls the same EQ; every event is returned once by poll or
 *      found READY by test, with its result; the EQ ends empty
 *   D  delete: every object deleted once (0), twice (-ENOENT), and a get of it is -ENOENT
 *   S  shutdown mid-traffic: the threads keep submitting creates, seals and gets (blocking
 *      and on events), create fresh EQs whose first call opens a channel, one waits in a
 *      blocking get(-1) (the disconnect ends it: -ENOTCONN) and one sleeps in
 *      coffer_eq_poll(-1) on an idle EQ (the last fini closes it: -ENOENT) while main calls
 *      coffer_disconnect() and then the last coffer_fini(); every call must return 0 or a
 *      documented error (a table of which, by phase, is printed), every thread must come
 *      back (a watchdog fails the run), and every event is finalised after the fini.
 *
 *   ckpt [-t THREADS] [-r ROUNDS] SOCKET
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <coffer/coffer.h>

#define MAX_THREADS 32
#define NSIZES	    14
#define MAX_ROUNDS  16
#define TEST_EVS    32
#define WATCHDOG_S  120

static const uint64_t sizes[NSIZES] = {0,    1,	   7,	  63,	 64,	 65,	   4095,
				       4096, 4097, 65536, 65537, 200003, 1u << 20, (1u << 20) + 13};

static _Noreturn void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static _Noreturn void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("ckpt: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

/* EXPECT(call, want): the call returns exactly @want. */
#define EXPECT(call, want)                                                                         \
	do {                                                                                       \
		long rc_ = (long)(call);                                                           \
		long w_ = (long)(want);                                                            \
		if (rc_ != w_)                                                                     \
			die("%s:%d %s = %ld (%s), want %ld (%s)", __FILE__, __LINE__, #call, rc_,  \
			    coffer_strerror((int)rc_), w_, coffer_strerror((int)w_));              \
	} while (0)
#define OK(call) EXPECT(call, 0)

static const char *sock;
static int nthreads = 8, rounds = 3;
static coffer_handle_t conn;
static pthread_barrier_t bar;

/* Every byte of an object is a function of its ID and offset. */
static uint32_t oid_seed(const struct coffer_oid *oid)
{
	uint32_t h = 2166136261u;

	for (int k = 0; k < COFFER_OID_SIZE; k++)
		h = (h ^ oid->id[k]) * 16777619u;
	return h;
}

static uint8_t pat(uint32_t seed, uint64_t i)
{
	uint32_t h = seed ^ (uint32_t)(i * 2654435761u) ^ (uint32_t)(i >> 13);

	return (uint8_t)(h ^ (h >> 11));
}

static void fill(void *p, const struct coffer_oid *oid, uint64_t n)
{
	uint32_t seed = oid_seed(oid);
	uint8_t *b = p;

	for (uint64_t i = 0; i < n; i++)
		b[i] = pat(seed, i);
}

static void check(const void *p, const struct coffer_oid *oid, uint64_t n, uint64_t got)
{
	uint32_t seed = oid_seed(oid);
	const uint8_t *b = p;

	if (got != n)
		die("object %.5s/%d/%d/%d: size %" PRIu64 ", want %" PRIu64, (const char *)oid->id,
		    oid->id[5], oid->id[6], oid->id[7], got, n);
	if (n > 0 && p == NULL)
		die("object %.5s: NULL data", (const char *)oid->id);
	for (uint64_t i = 0; i < n; i++)
		if (b[i] != pat(seed, i))
			die("object %.5s/%d/%d/%d: byte %" PRIu64 " is %u, want %u",
			    (const char *)oid->id, oid->id[5], oid->id[6], oid->id[7], i, b[i],
			    pat(seed, i));
}

/* ObjectID of (kind, thread, round, size index); kind: 'W' written, 'L' late, 'A' aborted,
 * 'T' test phase, 'S' shutdown. */
static struct coffer_oid mkoid(char kind, int t, int r, int s)
{
	struct coffer_oid o;

	memset(&o, 0, sizeof(o));
	memcpy(o.id, "ckpt", 4);
	o.id[4] = (uint8_t)kind;
	o.id[5] = (uint8_t)t;
	o.id[6] = (uint8_t)r;
	o.id[7] = (uint8_t)s;
	return o;
}

/* Poll @eq until each of @n events has been returned exactly once; fail on a stranger or a
 * duplicate. Uses a positive timeout so that a lost completion fails rather than hangs. */
static void reap(coffer_handle_t eq, struct coffer_event *evs, int n)
{
	struct coffer_event *got[64];
	bool seen[NSIZES * 4] = {false};
	int left = n, idle = 0;

	if (n > NSIZES * 4)
		die("reap: n %d", n);
	while (left > 0) {
		int k = coffer_eq_poll(eq, 0, 100000, 64, got);

		if (k < 0)
			die("coffer_eq_poll: %s", coffer_strerror(k));
		if (k == 0 && ++idle > 300)
			die("reap: %d events never completed", left);
		for (int i = 0; i < k; i++) {
			long j = got[i] - evs;

			if (j < 0 || j >= n)
				die("poll returned an event not in flight");
			if (seen[j])
				die("poll returned event %ld twice", j);
			seen[j] = true;
			left--;
		}
	}
}

struct worker {
	int t;
	pthread_t th;
	coffer_handle_t eq;
	struct coffer_event ev[NSIZES * 2]; /* reused by every phase */
	void *wr[NSIZES];
	const void *rd[NSIZES];
	uint64_t sz[NSIZES];
	/* late phase */
	struct coffer_event lev[2];
	const void *ldata[2];
	uint64_t lsize[2];
	/* shutdown phase: outcome counts */
	unsigned long s_ok, s_err;
};
static struct worker w[MAX_THREADS];

/* W: write round r of thread me's objects, NSIZES in flight. */
static void write_round(struct worker *me, int r)
{
	for (int s = 0; s < NSIZES; s++) {
		struct coffer_oid o = mkoid('W', me->t, r, s);

		me->wr[s] = NULL;
		OK(coffer_obj_create_oid(conn, &o, sizes[s], 0, &me->wr[s], &me->ev[s]));
		/* A running event cannot be launched again. */
		if (s == 0)
			EXPECT(coffer_obj_create_oid(conn, &o, 1, 0, &me->wr[s], &me->ev[s]),
			       -EBUSY);
	}
	reap(me->eq, me->ev, NSIZES);
	for (int s = 0; s < NSIZES; s++) {
		struct coffer_oid o = mkoid('W', me->t, r, s);

		OK(me->ev[s].ev_error);
		if (me->wr[s] == NULL && sizes[s] > 0)
			die("create gave NULL data");
		fill(me->wr[s], &o, sizes[s]);
		OK(coffer_obj_seal_oid(conn, &o, COFFER_SEAL_RELEASE, &me->ev[s]));
	}
	reap(me->eq, me->ev, NSIZES);
	for (int s = 0; s < NSIZES; s++)
		OK(me->ev[s].ev_error);
}

/* R: read round r of thread t's objects, check, release by pointer. */
static void read_round(struct worker *me, int t, int r)
{
	for (int s = 0; s < NSIZES; s++) {
		struct coffer_oid o = mkoid('W', t, r, s);

		me->rd[s] = NULL;
		me->sz[s] = UINT64_MAX;
		OK(coffer_obj_get_oid(conn, &o, 1000000, &me->rd[s], &me->sz[s], &me->ev[s]));
	}
	reap(me->eq, me->ev, NSIZES);
	for (int s = 0; s < NSIZES; s++) {
		struct coffer_oid o = mkoid('W', t, r, s);

		OK(me->ev[s].ev_error);
		check(me->rd[s], &o, sizes[s], me->sz[s]);
		OK(coffer_obj_release_data(conn, &o, me->rd[s], &me->ev[s]));
	}
	reap(me->eq, me->ev, NSIZES);
	for (int s = 0; s < NSIZES; s++)
		OK(me->ev[s].ev_error);
}

/* A: create and abort launched back to back on one channel, then the abort of sealed. */
static void abort_phase(struct worker *me)
{
	struct coffer_oid o = mkoid('A', me->t, 0, 0);
	const void *d;
	void *p = NULL;

	OK(coffer_obj_create_oid(conn, &o, 4096, 0, &p, &me->ev[0]));
	OK(coffer_obj_abort_oid(conn, &o, &me->ev[1]));
	reap(me->eq, me->ev, 2);
	OK(me->ev[0].ev_error);
	OK(me->ev[1].ev_error);
	EXPECT(coffer_obj_get_oid(conn, &o, 0, &d, NULL, NULL), -ENOENT);
	EXPECT(coffer_obj_abort_oid(conn, &o, NULL), -ENOENT);
	/* the ID is free again: create, seal, then abort is -EALREADY */
	OK(coffer_obj_create_oid(conn, &o, 10, 0, &p, NULL));
	fill(p, &o, 10);
	OK(coffer_obj_seal_oid(conn, &o, 0, NULL));
	EXPECT(coffer_obj_abort_oid(conn, &o, NULL), -EALREADY);
	OK(coffer_obj_release_oid(conn, &o, NULL));
	EXPECT(coffer_obj_release_oid(conn, &o, NULL), -ENOENT);
	OK(coffer_obj_delete(conn, &o, NULL));
}

/* P: poll timeouts on an idle EQ, then -1 while a get waits for a neighbour's seal. */
static void poll_phase(struct worker *me)
{
	struct coffer_oid o = mkoid('W', me->t, 0, 5);
	struct coffer_event *got[4];
	const void *d = NULL;
	uint64_t sz = 0;
	bool done = false;
	int k;

	EXPECT(coffer_eq_poll(me->eq, 0, 0, 4, got), 0);
	EXPECT(coffer_eq_poll(me->eq, 1, 0, 4, got), 0);
	EXPECT(coffer_eq_poll(me->eq, 0, 20000, 4, got), 0); /* 20 ms, nothing running */
	EXPECT(coffer_eq_poll(me->eq, 1, -1, 4, got), 0);    /* nothing running: at once */
	EXPECT(coffer_eq_poll(me->eq, 0, -1, 0, got), -EINVAL);
	EXPECT(coffer_eq_poll(me->eq, 0, -1, 4, NULL), -EINVAL);
	EXPECT(coffer_eq_query(me->eq, COFFER_EQR_ALL, 0, NULL), 0);

	/* A completed event is not READY until reaped: relaunching it is -EBUSY (event.h:
	 * READY -> RUNNING -> COMPLETED -> READY after poll or test). */
	OK(coffer_obj_get_oid(conn, &o, 0, &d, &sz, &me->ev[0]));
	OK(coffer_flush(conn));
	while (coffer_eq_query(me->eq, COFFER_EQR_COMPLETED, 0, NULL) == 0)
		EXPECT(coffer_event_test(&me->ev[1], 0, &done), 0); /* drives progress */
	if (!done)
		die("event_test: a never-launched event is not READY");
	EXPECT(coffer_obj_get_oid(conn, &o, 0, &d, &sz, &me->ev[0]), -EBUSY);
	/* (coffer_event_init() would not refuse it: "not running" includes COMPLETED, and a
	 * re-init finalises it first, discarding the completion; event.h) */
	{
		struct coffer_event *l[2] = {NULL, NULL};

		EXPECT(coffer_eq_query(me->eq, COFFER_EQR_COMPLETED, 2, l), 1);
		if (l[0] != &me->ev[0])
			die("eq_query lists another event");
	}
	/* poll(-1) with wait_running returns the completed one (it is waiting to be polled) */
	k = coffer_eq_poll(me->eq, 1, -1, 4, got);
	EXPECT(k, 1);
	if (got[0] != &me->ev[0])
		die("poll returned another event");
	OK(me->ev[0].ev_error);
	check(d, &o, sizes[5], sz);
	OK(coffer_obj_release_data(conn, &o, d, NULL));
	/* READY again: test says done without waiting, poll finds nothing */
	OK(coffer_event_test(&me->ev[0], -1, &done));
	if (!done)
		die("event_test: a reaped event is not READY");
	EXPECT(coffer_eq_poll(me->eq, 0, 0, 4, got), 0);

	/* a get of an ID nobody writes, 20 ms: poll(-1) returns it with -ENOENT */
	{
		struct coffer_oid miss = mkoid('M', me->t, 0, 0);

		OK(coffer_obj_get_oid(conn, &miss, 20000, &d, &sz, &me->ev[2]));
		EXPECT(coffer_eq_poll(me->eq, 0, -1, 4, got), 1);
		if (got[0] != &me->ev[2])
			die("poll returned another event");
		EXPECT(me->ev[2].ev_error, -ENOENT);
	}
}

/* T: tester loops coffer_event_test() on events a poller reaps from the same EQ. */
struct tphase {
	coffer_handle_t eq;
	struct coffer_event ev[TEST_EVS];
	const void *data[TEST_EVS];
	uint64_t size[TEST_EVS];
	atomic_int polled[TEST_EVS];
	atomic_int tested_done;
	atomic_bool stop;
	int src;
};

static void *tpoller(void *arg)
{
	struct tphase *tp = arg;
	struct coffer_event *got[8];

	while (!atomic_load(&tp->stop)) {
		int k = coffer_eq_poll(tp->eq, 0, 2000, 8, got);

		if (k < 0)
			die("poller: %s", coffer_strerror(k));
		for (int i = 0; i < k; i++) {
			long j = got[i] - tp->ev;

			if (j < 0 || j >= TEST_EVS)
				die("poller: stranger event");
			if (atomic_fetch_add(&tp->polled[j], 1) != 0)
				die("poller: event %ld returned twice", j);
		}
	}
	return NULL;
}

static void test_phase(int src)
{
	static struct tphase tp;
	pthread_t th;
	int left = TEST_EVS, spins = 0;
	bool done[TEST_EVS] = {false};

	memset(&tp, 0, sizeof(tp));
	OK(coffer_eq_create(&tp.eq));
	for (int i = 0; i < TEST_EVS; i++)
		OK(coffer_event_init(&tp.ev[i], tp.eq, NULL));
	if (pthread_create(&th, NULL, tpoller, &tp))
		die("pthread_create");
	for (int i = 0; i < TEST_EVS; i++) {
		struct coffer_oid o = mkoid('W', src, i % rounds, i % NSIZES);

		OK(coffer_obj_get_oid(conn, &o, 1000000, &tp.data[i], &tp.size[i], &tp.ev[i]));
	}
	OK(coffer_flush(conn));
	while (left > 0) {
		for (int i = 0; i < TEST_EVS; i++) {
			bool d = false;

			if (done[i])
				continue;
			/* alternate non-blocking and bounded tests */
			OK(coffer_event_test(&tp.ev[i], (spins & 1) ? 1000 : 0, &d));
			if (d) {
				done[i] = true;
				left--;
			}
		}
		if (++spins > 100000)
			die("tester: %d events never READY", left);
	}
	atomic_store(&tp.stop, true);
	pthread_join(th, NULL);
	for (int i = 0; i < TEST_EVS; i++) {
		struct coffer_oid o = mkoid('W', src, i % rounds, i % NSIZES);

		OK(tp.ev[i].ev_error);
		check(tp.data[i], &o, sizes[i % NSIZES], tp.size[i]);
		OK(coffer_obj_release_data(conn, &o, tp.data[i], NULL));
	}
	EXPECT(coffer_eq_query(tp.eq, COFFER_EQR_ALL, 0, NULL), 0);
	{
		struct coffer_event *g[1];

		EXPECT(coffer_eq_poll(tp.eq, 0, 0, 1, g), 0);
	}
	for (int i = 0; i < TEST_EVS; i++)
		OK(coffer_event_fini(&tp.ev[i]));
	OK(coffer_eq_destroy(tp.eq, 0));
}

/* D: delete my objects. */
static void delete_phase(struct worker *me)
{
	for (int r = 0; r < rounds; r++)
		for (int s = 0; s < NSIZES; s++) {
			struct coffer_oid o = mkoid('W', me->t, r, s);
			const void *d;

			OK(coffer_obj_delete(conn, &o, &me->ev[s]));
			if (s == NSIZES - 1) {
				reap(me->eq, me->ev, NSIZES);
				for (int k = 0; k < NSIZES; k++)
					OK(me->ev[k].ev_error);
			}
			(void)d;
		}
	for (int r = 0; r < rounds; r++) {
		struct coffer_oid o = mkoid('W', me->t, r, 3);
		const void *d;
		bool present = true;

		EXPECT(coffer_obj_delete(conn, &o, NULL), -ENOENT);
		EXPECT(coffer_obj_get_oid(conn, &o, 0, &d, NULL, NULL), -ENOENT);
		OK(coffer_obj_contains(conn, &o, &present, NULL));
		if (present)
			die("deleted object still present");
	}
}

/* ---- shutdown mid-traffic ------------------------------------------------------------- */
/* Held for reading while a shutdown-phase thread uses a pointer into the arena, for writing
 * around the disconnect, which unmaps it. */
static pthread_rwlock_t map_lock = PTHREAD_RWLOCK_INITIALIZER;
static atomic_int shut_phase; /* 0 connected, 1 disconnected, 2 in the last fini, 3 after */

/* Errors a call may return once the connection (or runtime) is gone, per the headers. */
static bool shut_err_ok(int rc)
{
	return rc == -ENOTCONN || rc == -ENOENT || rc == -EINVAL;
}

/* What each call returned in each shutdown phase (seen before and after the call), for the
 * summary: kinds x phases x codes 0..127. */
enum {
	K_CREATE,
	K_CREATE_EV,
	K_POLL,
	K_SEAL,
	K_GET,
	K_RELEASE,
	K_FLUSH,
	K_POLL_IDLE,
	K_GET_FOREVER,
	K_EQ_CREATE,
	K_EV_INIT,
	K_FRESH_GET,
	K_EQ_DESTROY,
	K_NR
};
static const char *const kname[K_NR] = {"create_oid(ev)", "create ev_error",  "eq_poll",
					"seal_oid",	  "get_oid",	      "release_data",
					"flush",	  "eq_poll(-1) idle", "get_oid(-1)",
					"eq_create",	  "event_init",	      "get_oid(ev), new EQ",
					"eq_destroy"};
static atomic_ulong seen[K_NR][4][128];
static const char *const phname[4] = {"connected", "disconnected", "in fini", "after fini"};

static void shut_seen(int kind, int ph0, int rc)
{
	int ph1 = atomic_load(&shut_phase);

	if ((ph0 == ph1 || kind == K_POLL_IDLE || kind == K_GET_FOREVER) && rc <= 0 && rc > -128)
		atomic_fetch_add(&seen[kind][ph0][-rc], 1);
}

static void shut_count(struct worker *me, int kind, int ph0, int rc)
{
	shut_seen(kind, ph0, rc);
	if (rc == 0)
		me->s_ok++;
	else if (shut_err_ok(rc))
		me->s_err++;
	else
		die("thread %d shutdown: %s returned %d (%s)", me->t, kname[kind], rc,
		    coffer_strerror(rc));
}

static void shut_fresh_eq(struct worker *me, const struct coffer_oid *o)
{
	struct coffer_event ev, *got[1];
	coffer_handle_t eq;
	const void *d = NULL;
	int ph = atomic_load(&shut_phase), rc, k;

	rc = coffer_eq_create(&eq);
	shut_count(me, K_EQ_CREATE, ph, rc);
	if (rc != 0)
		return;
	rc = coffer_event_init(&ev, eq, NULL);
	shut_count(me, K_EV_INIT, ph, rc);
	if (rc == 0) {
		ph = atomic_load(&shut_phase);
		rc = coffer_obj_get_oid(conn, o, 0, &d, NULL, &ev);
		shut_count(me, K_FRESH_GET, ph, rc);
		if (rc == 0) {
			k = coffer_eq_poll(eq, 0, -1, 1, got);
			shut_count(me, K_POLL, ph, k < 0 ? k : 0);
			if (k == 1 && ev.ev_error == 0) {
				pthread_rwlock_rdlock(&map_lock);
				if (atomic_load(&shut_phase) == 0)
					OK(coffer_obj_release_data(conn, o, d, NULL));
				pthread_rwlock_unlock(&map_lock);
			}
		}
		OK(coffer_event_fini(&ev)); /* works with or without the runtime */
	}
	ph = atomic_load(&shut_phase);
	shut_count(me, K_EQ_DESTROY, ph, coffer_eq_destroy(eq, 0));
}

static void shut_traffic(struct worker *me)
{
	unsigned long i = 0;

	while (atomic_load(&shut_phase) < 3 || i < 4) {
		struct coffer_oid o = mkoid('S', me->t, (int)(i % 50), (int)(i / 50 % 50));
		struct coffer_event *got[NSIZES];
		void *p = NULL;
		const void *d = NULL;
		uint64_t sz = 0;
		int rc, k, ph;

		i++;
		ph = atomic_load(&shut_phase);
		switch (i % 4) {
		case 0: /* event create + seal */
			rc = coffer_obj_create_oid(conn, &o, 128, COFFER_CREATE_REPLACE, &p,
						   &me->ev[0]);
			shut_count(me, K_CREATE, ph, rc);
			if (rc != 0)
				break;
			ph = atomic_load(&shut_phase);
			k = coffer_eq_poll(me->eq, 0, 1000000, NSIZES, got);
			shut_count(me, K_POLL, ph, k < 0 ? k : 0);
			if (k < 0)
				break; /* the runtime is gone: the event stays completed */
			if (k != 1 || got[0] != &me->ev[0])
				die("thread %d shutdown: poll got %d", me->t, k);
			shut_count(me, K_CREATE_EV, ph, me->ev[0].ev_error);
			/* The arena is unmapped by the disconnect (store.h): a pointer is
			 * used only under map_lock, and only while still connected. */
			pthread_rwlock_rdlock(&map_lock);
			if (me->ev[0].ev_error == 0 && atomic_load(&shut_phase) == 0) {
				fill(p, &o, 128);
				ph = atomic_load(&shut_phase);
				shut_count(
				    me, K_SEAL, ph,
				    coffer_obj_seal_oid(conn, &o, COFFER_SEAL_RELEASE, NULL));
			}
			pthread_rwlock_unlock(&map_lock);
			break;
		case 1: /* blocking get of what may be there */
			rc = coffer_obj_get_oid(conn, &o, 0, &d, &sz, NULL);
			if (rc == -ENOENT && ph == 0)
				break; /* not written yet */
			shut_count(me, K_GET, ph, rc);
			pthread_rwlock_rdlock(&map_lock);
			if (rc == 0 && atomic_load(&shut_phase) == 0) {
				check(d, &o, 128, sz);
				ph = atomic_load(&shut_phase);
				shut_count(me, K_RELEASE, ph,
					   coffer_obj_release_data(conn, &o, d, NULL));
			}
			pthread_rwlock_unlock(&map_lock);
			break;
		case 2:
			shut_count(me, K_FLUSH, ph, coffer_flush(conn));
			break;
		default: /* a fresh EQ: its first call opens a channel, racing the shutdown */
			shut_fresh_eq(me, &o);
			break;
		}
	}
}

static void *worker_main(void *arg)
{
	struct worker *me = arg;

	OK(coffer_eq_create(&me->eq));
	for (int i = 0; i < NSIZES * 2; i++)
		OK(coffer_event_init(&me->ev[i], me->eq, NULL));
	for (int i = 0; i < 2; i++)
		OK(coffer_event_init(&me->lev[i], me->eq, NULL));

	/* W */
	for (int r = 0; r < rounds; r++)
		write_round(me, r);
	pthread_barrier_wait(&bar);

	/* L: wait in the store for my neighbour's late objects */
	{
		int nb = (me->t + 1) % nthreads;

		for (int i = 0; i < 2; i++) {
			struct coffer_oid o = mkoid('L', nb, i, 0);

			OK(coffer_obj_get_oid(conn, &o, i == 0 ? 30000000 : -1, &me->ldata[i],
					      &me->lsize[i], &me->lev[i]));
		}
		OK(coffer_flush(conn));
		pthread_barrier_wait(&bar); /* every late get launched */
		for (int i = 0; i < 2; i++) {
			struct coffer_oid o = mkoid('L', me->t, i, 0);
			void *p;

			OK(coffer_obj_create_oid(conn, &o, 1000 + (uint64_t)i, 0, &p, NULL));
			fill(p, &o, 1000 + (uint64_t)i);
			OK(coffer_obj_seal_oid(conn, &o, COFFER_SEAL_RELEASE, NULL));
		}
		/* P: poll -1 returns the waiting gets once sealed */
		int left = 2;
		struct coffer_event *got[4];

		while (left > 0) {
			int k = coffer_eq_poll(me->eq, 0, -1, 4, got);

			if (k <= 0)
				die("poll -1: %d", k);
			for (int j = 0; j < k; j++) {
				long x = got[j] - me->lev;

				if (x < 0 || x > 1)
					die("poll -1: stranger");
				left--;
			}
		}
		for (int i = 0; i < 2; i++) {
			struct coffer_oid o = mkoid('L', nb, i, 0);

			OK(me->lev[i].ev_error);
			check(me->ldata[i], &o, 1000 + (uint64_t)i, me->lsize[i]);
			OK(coffer_obj_release_data(conn, &o, me->ldata[i], NULL));
		}
		pthread_barrier_wait(&bar);
		for (int i = 0; i < 2; i++) {
			struct coffer_oid o = mkoid('L', me->t, i, 0);

			OK(coffer_obj_delete(conn, &o, NULL));
		}
	}

	/* R */
	for (int k = 1; k < nthreads; k++)
		for (int r = 0; r < rounds; r++)
			read_round(me, (me->t + k) % nthreads, r);
	abort_phase(me);
	poll_phase(me);
	pthread_barrier_wait(&bar);
	if (me->t == 0)
		test_phase(1 % nthreads);
	pthread_barrier_wait(&bar);
	delete_phase(me);
	pthread_barrier_wait(&bar);

	/* S: traffic until main has disconnected and finalised */
	pthread_barrier_wait(&bar);
	if (me->t == nthreads - 1 && nthreads > 1) {
		/* sleep in poll(-1) on an idle EQ through the shutdown */
		struct coffer_event *got[1];
		int rc = coffer_eq_poll(me->eq, 0, -1, 1, got);

		/* returns only once the last coffer_fini() has started */
		shut_count(me, K_POLL_IDLE, 2, rc);
		if (rc != -ENOENT) /* event.h: destroyed (closed by the last fini) while waiting */
			die("poll(-1) across the shutdown: %d (%s), want -ENOENT", rc,
			    coffer_strerror(rc));
	} else if (me->t == nthreads - 2) {
		/* blocked in a get that waits forever for an ID nobody writes: the disconnect
		 * completes it (store.h: -ENOTCONN) */
		struct coffer_oid o = mkoid('N', me->t, 0, 0);
		const void *d;
		int ph = atomic_load(&shut_phase);

		int rc = coffer_obj_get_oid(conn, &o, -1, &d, NULL, NULL);

		shut_count(me, K_GET_FOREVER, ph, rc);
		if (rc != -ENOTCONN)
			die("get(-1) across the disconnect: %d (%s), want -ENOTCONN", rc,
			    coffer_strerror(rc));
		shut_traffic(me);
	} else {
		shut_traffic(me);
	}
	/* The runtime is finalised: every call taking a handle says "not initialised" (or
	 * the handle is gone). coffer_event_fini() must still be possible. */
	return NULL;
}

static void on_alarm(int sig)
{
	(void)sig;
	static const char msg[] = "ckpt: watchdog: a thread hung\n";
	(void)!write(2, msg, sizeof(msg) - 1);
	_exit(2);
}

int main(int argc, char **argv)
{
	struct coffer_store_info info, info0;
	int opt;

	while ((opt = getopt(argc, argv, "t:r:")) != -1) {
		switch (opt) {
		case 't':
			nthreads = atoi(optarg);
			break;
		case 'r':
			rounds = atoi(optarg);
			break;
		default:
			die("usage: ckpt [-t THREADS] [-r ROUNDS] SOCKET");
		}
	}
	if (optind + 1 != argc || nthreads < 2 || nthreads > MAX_THREADS || rounds < 1 ||
	    rounds > MAX_ROUNDS)
		die("usage: ckpt [-t THREADS 2..%d] [-r ROUNDS 1..%d] SOCKET", MAX_THREADS,
		    MAX_ROUNDS);
	sock = argv[optind];
	signal(SIGALRM, on_alarm);
	alarm(WATCHDOG_S);

	OK(coffer_init());
	OK(coffer_connect(sock, &conn));
	/* what an earlier run left (its shutdown traffic's objects stay, as a cache's do) */
	OK(coffer_store_query(conn, &info0));
	pthread_barrier_init(&bar, NULL, (unsigned)nthreads + 1);
	for (int t = 0; t < nthreads; t++) {
		w[t].t = t;
		if (pthread_create(&w[t].th, NULL, worker_main, &w[t]))
			die("pthread_create");
	}
	for (int b = 0; b < 6; b++)
		pthread_barrier_wait(&bar); /* W, L x2, P, T, D */
	OK(coffer_store_query(conn, &info));
	if (info.objects_sealed != info0.objects_sealed || info.objects_created != 0 ||
	    info.reserved_blocks != 0)
		die("store holds %" PRIu64 " sealed (%" PRIu64 " before), %" PRIu64
		    " created after the deletes",
		    info.objects_sealed, info0.objects_sealed, info.objects_created);
	pthread_barrier_wait(&bar); /* S starts */

	/* S: shut down under traffic */
	usleep(100000);
	pthread_rwlock_wrlock(&map_lock);
	OK(coffer_disconnect(conn));
	atomic_store(&shut_phase, 1);
	pthread_rwlock_unlock(&map_lock);
	usleep(50000);
	atomic_store(&shut_phase, 2);
	OK(coffer_fini());
	atomic_store(&shut_phase, 3);
	for (int t = 0; t < nthreads; t++)
		pthread_join(w[t].th, NULL);
	for (int t = 0; t < nthreads; t++) {
		/* every event can be finalised after the runtime is gone */
		for (int i = 0; i < NSIZES * 2; i++) {
			int rc = coffer_event_fini(&w[t].ev[i]);

			if (rc != 0)
				die("event_fini after fini: %d (%s)", rc, coffer_strerror(rc));
		}
		for (int i = 0; i < 2; i++)
			OK(coffer_event_fini(&w[t].lev[i]));
		EXPECT(coffer_eq_destroy(w[t].eq, 0), -EINVAL);
	}
	printf("ckpt: %d threads x %d rounds x %d sizes: ok; shutdown calls", nthreads, rounds,
	       NSIZES);
	for (int t = 0; t < nthreads; t++)
		printf(" %lu/%lu", w[t].s_ok, w[t].s_err);
	printf(" (ok/err)\n");
	for (int k = 0; k < K_NR; k++)
		for (int ph = 0; ph < 4; ph++)
			for (int e = 0; e < 128; e++)
				if (atomic_load(&seen[k][ph][e]))
					printf("ckpt: %-17s %-12s %-9s x %lu\n", kname[k],
					       phname[ph], e ? coffer_strerror(-e) : "0",
					       (unsigned long)atomic_load(&seen[k][ph][e]));
	return 0;
}
