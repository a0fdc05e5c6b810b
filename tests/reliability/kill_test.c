/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/reliability/kill_test.c - fault injection: client processes SIGKILLed at every step
 * of the protocol while other clients keep working.
 *
 * usage: kill_test [ROUNDS [SEED]]   (default 200 rounds, a few seconds; env REL_KILL_ROUNDS)
 *
 * One real coffer-store (64 MiB). The test process writes PERM permanent objects with
 * self-checking content (relcommon.h) and forks WORKERS libcoffer clients that, for the whole
 * run, put their own checksummed objects, delete old ones, and read and verify permanent
 * objects; any error a worker sees fails the test. Each round forks one victim that runs
 * one scenario and dies by SIGKILL at a random point of it - by its own hand at a chosen
 * step, or from the test process after a random delay once it reached a blocking point:
 *
 *   create-noseal     creates 1..6 objects (partly written), never seals
 *   mid-copy          killed while copying into a 1-8 MiB unsealed object
 *   hold-refs         holds gets on permanent objects (duplicates too) and sealed objects
 *                     whose creator reference it never released
 *   get-blocked-sock  blocked in a socket get on a missing object (plus present ones)
 *   get-blocked-ring  blocked in a ring get (timeout forever and 10 s)
 *   half-batch        requests written into the ring, prod published for a prefix only
 *                     (sometimes for entries never written), with or without a doorbell
 *   full-ring         a ring the store stopped draining (all slots waiting), more queued
 *   connect-raw       dies before HELLO, after HELLO, before reading CHANNEL_OPEN_REPLY
 *   lib-connect       libcoffer connect/disconnect loop killed at a random instant
 *   lib-get-blocked   libcoffer blocking coffer_obj_get(timeout forever)
 *   lib-puts          libcoffer create/copy/seal loop killed at a random instant
 *
 * After every round: the store is alive; the victim's session is gone (clients back to
 * WORKERS + 1) and the store's fd count equals the baseline; every permanent object and
 * every object the victim managed to seal reads back intact (checksum). Every CKPT rounds
 * and at the end the workers pause holding nothing, the victims' sealed objects are
 * deleted, and the store must show exactly the baseline: used bytes = the permanent
 * objects, no CREATED object, no eviction, and its private RSS within RSS_SLACK_KB of the
 * first checkpoint. Finally the permanent objects are deleted and used bytes must be 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <coffer/coffer.h>

#include "tests/reliability/relcommon.h"
#include "tests/store/rawclient.h"

#define PERM		48
#define WORKERS		2
#define WORKER_KEEP	12
#define VICTIM_IDS	16
#define CKPT		25
#define RSS_SLACK_KB	(4096 + REL_RSS_SAN_SLACK_KB)
#define WORKER_ID(w, n) ((2ull << 40) + ((uint64_t)(w) << 32) + (n))
#define VICTIM_ID(r, i) ((1ull << 40) + (uint64_t)(r)*VICTIM_IDS + (i))

enum scenario {
	V_CREATE_NOSEAL,
	V_MID_COPY,
	V_HOLD_REFS,
	V_GET_BLOCKED_SOCK,
	V_GET_BLOCKED_RING,
	V_HALF_BATCH,
	V_FULL_RING,
	V_CONNECT_RAW,
	V_LIB_CONNECT,
	V_LIB_GET_BLOCKED,
	V_LIB_PUTS,
	V_LIB_RESERVE_PUTS,
	V_COUNT
};

static const char *const scenario_name[V_COUNT] = {
    "create-noseal",	"mid-copy",	   "hold-refs", "get-blocked-sock",
    "get-blocked-ring", "half-batch",	   "full-ring", "connect-raw",
    "lib-connect",	"lib-get-blocked", "lib-puts",	"lib-reserve-puts",
};

/* Shared with the workers (MAP_SHARED | MAP_ANONYMOUS, created before fork). Every field is
 * accessed with __atomic builtins: acquire/release pairs as noted; the rest relaxed. */
struct ctl {
	int stop;	    /* parent sets (release); workers read (acquire) */
	int pause_gen;	    /* parent bumps to ask for a pause (release) */
	int resume_gen;	    /* parent sets = pause_gen to resume (release) */
	int acked[WORKERS]; /* worker sets = pause_gen once it holds nothing (release) */
	long ops[WORKERS];  /* relaxed counters */
	int errors;	    /* relaxed */
	char msg[256];	    /* first error, written by the worker that bumps errors 0 -> 1 */
};

static unsigned int g_rounds = 200;
static uint64_t g_seed;
static const char *g_store_exe;
/* The running test's state, for the teardown after a failed assertion: never leave a worker,
 * a victim or the store running. */
static struct run *g_run;
static pid_t g_victim;

struct perm {
	uint64_t id, size;
};

/* ------------------------------------------------------------------ workers */

static void worker_fail(struct ctl *ctl, const char *fmt, ...)
{
	va_list ap;

	if (__atomic_fetch_add(&ctl->errors, 1, __ATOMIC_RELAXED) == 0) {
		va_start(ap, fmt);
		vsnprintf(ctl->msg, sizeof(ctl->msg), fmt, ap);
		va_end(ap);
	}
}

/* Put object @id of @size bytes (create, fill, seal+release) through libcoffer. */
static int lib_put(coffer_handle_t c, uint64_t id, uint64_t size, uint64_t seed)
{
	struct coffer_oid oid;
	coffer_handle_t oh;
	void *p;
	int rc;

	rel_oid(&oid, id);
	rc = coffer_obj_open(c, &oid, 0, &oh);
	if (rc != 0)
		return rc;
	rc = coffer_obj_create(oh, size, 0, &p, NULL);
	if (rc == 0) {
		rel_fill(p, size, seed);
		rc = coffer_obj_seal(oh, COFFER_SEAL_RELEASE, NULL);
	}
	coffer_obj_close(oh);
	return rc;
}

/* Get @id (no wait), verify its content and size, release. 0 or -errno / -EILSEQ. */
static int lib_check(coffer_handle_t c, uint64_t id, uint64_t want_size)
{
	struct coffer_oid oid;
	coffer_handle_t oh;
	const void *p;
	uint64_t size = 0;
	int rc, rc2;

	rel_oid(&oid, id);
	rc = coffer_obj_open(c, &oid, 0, &oh);
	if (rc != 0)
		return rc;
	rc = coffer_obj_get(oh, 0, &p, &size, NULL);
	if (rc == 0) {
		if (size != want_size)
			rc = -ERANGE;
		else if (rel_verify(p, size) != 0)
			rc = -EILSEQ;
		rc2 = coffer_obj_release(oh, NULL);
		if (rc == 0)
			rc = rc2;
	}
	coffer_obj_close(oh);
	return rc;
}

static int lib_delete(coffer_handle_t c, uint64_t id)
{
	struct coffer_oid oid;

	rel_oid(&oid, id);
	return coffer_obj_delete(c, &oid, NULL);
}

static void worker(int w, const char *sock, struct ctl *ctl, const struct perm *perm, uint64_t seed)
{
	uint64_t sizes[WORKER_KEEP + 1], lo = 0, hi = 0, s = seed;
	coffer_handle_t c;
	int rc;

	rc = coffer_connect(sock, &c);
	if (rc != 0) {
		worker_fail(ctl, "worker %d: connect: %s", w, coffer_strerror(rc));
		_exit(1);
	}
	for (;;) {
		int pg = __atomic_load_n(&ctl->pause_gen, __ATOMIC_ACQUIRE);
		int stop = __atomic_load_n(&ctl->stop, __ATOMIC_ACQUIRE);
		uint64_t k;

		if (stop || pg != __atomic_load_n(&ctl->acked[w], __ATOMIC_RELAXED)) {
			/* Pause (or stop): hold nothing, own nothing. */
			for (; lo < hi; lo++) {
				rc = lib_delete(c, WORKER_ID(w, lo));
				if (rc != 0)
					worker_fail(ctl, "worker %d: delete %llu: %s", w,
						    (unsigned long long)lo, coffer_strerror(rc));
			}
			if (stop)
				break;
			/* release: the parent's acquire load sees the deletes done */
			__atomic_store_n(&ctl->acked[w], pg, __ATOMIC_RELEASE);
			while (__atomic_load_n(&ctl->resume_gen, __ATOMIC_ACQUIRE) != pg &&
			       !__atomic_load_n(&ctl->stop, __ATOMIC_ACQUIRE))
				rel_sleep_us(200);
			continue;
		}
		/* Put a new object of our own; keep at most WORKER_KEEP. */
		sizes[hi % (WORKER_KEEP + 1)] = rel_rand(&s) % (128 * 1024);
		rc = lib_put(c, WORKER_ID(w, hi), sizes[hi % (WORKER_KEEP + 1)], rel_rand(&s));
		if (rc != 0) {
			worker_fail(ctl, "worker %d: put %llu: %s", w, (unsigned long long)hi,
				    coffer_strerror(rc));
			break;
		}
		hi++;
		if (hi - lo > WORKER_KEEP) {
			rc = lib_delete(c, WORKER_ID(w, lo));
			if (rc != 0)
				worker_fail(ctl, "worker %d: delete: %s", w, coffer_strerror(rc));
			lo++;
		}
		/* Read back one permanent object and one of ours. */
		k = rel_rand(&s) % PERM;
		rc = lib_check(c, perm[k].id, perm[k].size);
		if (rc != 0) {
			worker_fail(ctl, "worker %d: permanent object %llu: %s", w,
				    (unsigned long long)perm[k].id,
				    rc == -EILSEQ ? "content corrupt" : coffer_strerror(rc));
			break;
		}
		k = lo + rel_rand(&s) % (hi - lo);
		rc = lib_check(c, WORKER_ID(w, k), sizes[k % (WORKER_KEEP + 1)]);
		if (rc != 0) {
			worker_fail(ctl, "worker %d: own object %llu: %s", w, (unsigned long long)k,
				    rc == -EILSEQ ? "content corrupt" : coffer_strerror(rc));
			break;
		}
		__atomic_fetch_add(&ctl->ops[w], 1, __ATOMIC_RELAXED);
	}
	coffer_disconnect(c);
	_exit(__atomic_load_n(&ctl->errors, __ATOMIC_RELAXED) == 0 ? 0 : 1);
}

/* ------------------------------------------------------------------ victims */

/* A victim reports "I am at the blocking point" with one byte on @ready. */
static void ready(int fd)
{
	char b = 1;

	(void)!write(fd, &b, 1);
}

static void die(void)
{
	raise(SIGKILL);
	_exit(99);
}

/* Victim's unexpected-failure exit: the parent sees an exit status instead of SIGKILL. */
#define VCHECK(cond, code)                                                                         \
	do {                                                                                       \
		if (!(cond))                                                                       \
			_exit(code);                                                               \
	} while (0)

static void victim_raw(enum scenario sc, unsigned int round, const char *sock, int rfd,
		       const struct perm *perm, uint64_t s)
{
	struct rc_conn c;
	struct rc_chan ch;
	struct coffer_req reqs[64];
	struct coffer_rep reps[64];
	unsigned int i, k;
	int rc;

	if (sc == V_CONNECT_RAW) {
		unsigned char buf[256];
		struct coffer_msg_hdr h;

		switch (rel_rand(&s) % 4) {
		case 0:
			VCHECK(rc_connect_raw(&c, sock) == 0, 2);
			die();
			break;
		case 1:
			VCHECK(rc_connect_raw(&c, sock) == 0, 2);
			coffer__msg_hdr_init(&h, COFFER_MSG_HELLO, 0, sizeof(h));
			VCHECK(rc_send_raw(&c, &h, sizeof(h), NULL, 0) == 0, 3);
			die();
			break;
		case 2:
			VCHECK(rc_connect_raw(&c, sock) == 0, 2);
			coffer__msg_hdr_init(&h, COFFER_MSG_HELLO, 0, sizeof(h));
			VCHECK(rc_send_raw(&c, &h, sizeof(h), NULL, 0) == 0, 3);
			/* read the reply (with the arena fd) only half the time */
			if (rel_rand(&s) & 1)
				(void)rc_recv_msg(&c, buf, sizeof(buf), NULL, NULL, 1000);
			die();
			break;
		default: {
			struct coffer_chan_open o = {.ring_entries = 0};
			int efd;

			VCHECK(rc_connect(&c, sock) == 0, 2);
			efd = eventfd(0, EFD_CLOEXEC);
			coffer__msg_hdr_init(&h, COFFER_MSG_CHANNEL_OPEN, 0, sizeof(h) + sizeof(o));
			memcpy(buf, &h, sizeof(h));
			memcpy(buf + sizeof(h), &o, sizeof(o));
			VCHECK(rc_send_raw(&c, buf, sizeof(h) + sizeof(o), &efd, 1) == 0, 3);
			die();
		}
		}
	}

	VCHECK(rc_connect(&c, sock) == 0, 2);
	switch (sc) {
	case V_CREATE_NOSEAL: {
		unsigned int n = 1 + (unsigned int)(rel_rand(&s) % 6);
		unsigned int at = (unsigned int)(rel_rand(&s) % (n + 1));

		for (i = 0; i < n; i++) {
			uint64_t size = rel_rand(&s) % (1024 * 1024);
			void *p;

			if (i == at)
				die();
			VCHECK(rc_create(&c, VICTIM_ID(round, i), size, 0, &p) == 0, 4);
			memset(p, 0x5a, size / 2);
		}
		die();
		break;
	}
	case V_MID_COPY: {
		uint64_t size = (1 + rel_rand(&s) % 8) << 20;
		void *p;

		VCHECK(rc_create(&c, VICTIM_ID(round, 0), size, 0, &p) == 0, 4);
		ready(rfd);
		for (;;)
			rel_fill(p, size, rel_rand(&s)); /* copying until killed */
	}
	case V_HOLD_REFS: {
		unsigned int n = 1 + (unsigned int)(rel_rand(&s) % 8);

		for (i = 0; i < n; i++) {
			const void *p;
			uint64_t size, kk = rel_rand(&s) % PERM;

			rc = rc_get(&c, perm[kk].id, 0, &p, &size);
			VCHECK(rc == 0 && size == perm[kk].size && rel_verify(p, size) == 0, 5);
			if (rel_rand(&s) & 1) /* a duplicate reference */
				VCHECK(rc_get(&c, perm[kk].id, 0, &p, &size) == 0, 5);
		}
		/* sealed objects whose creator reference is never released */
		n = (unsigned int)(rel_rand(&s) % 4);
		for (i = 0; i < n; i++) {
			uint64_t size = rel_rand(&s) % (256 * 1024);
			void *p;

			VCHECK(rc_create(&c, VICTIM_ID(round, i), size, 0, &p) == 0, 6);
			rel_fill(p, size, rel_rand(&s));
			VCHECK(rc_seal(&c, VICTIM_ID(round, i), 0) == 0, 7);
		}
		die();
		break;
	}
	case V_GET_BLOCKED_SOCK:
		rc_req_init(&c, &reqs[0], COFFER_OP_GET, perm[rel_rand(&s) % PERM].id);
		rc_req_init(&c, &reqs[1], COFFER_OP_GET, VICTIM_ID(round, VICTIM_IDS - 1));
		reqs[1].timeout_us = -1;
		rc_req_init(&c, &reqs[2], COFFER_OP_GET, perm[rel_rand(&s) % PERM].id);
		rc_req_init(&c, &reqs[3], COFFER_OP_GET, VICTIM_ID(round, VICTIM_IDS - 2));
		reqs[3].timeout_us = 30 * 1000000LL;
		rc = rc_batch(&c, reqs, 4, reps, 2, 5000);
		VCHECK(rc == 2 && reps[0].status == 0 && reps[1].status == 0, 8);
		ready(rfd);
		(void)rc_recv_reps(&c, reps, 1, 60000); /* blocked until killed */
		_exit(9);
	case V_GET_BLOCKED_RING:
		VCHECK(rc_chan_open(&c, &ch, 0) == 0, 10);
		rc_req_init(&c, &reqs[0], COFFER_OP_GET, perm[rel_rand(&s) % PERM].id);
		rc_req_init(&c, &reqs[1], COFFER_OP_GET, VICTIM_ID(round, VICTIM_IDS - 1));
		reqs[1].timeout_us = -1;
		rc_req_init(&c, &reqs[2], COFFER_OP_GET, VICTIM_ID(round, VICTIM_IDS - 2));
		reqs[2].timeout_us = 10 * 1000000LL;
		VCHECK(rc_chan_submit(&ch, reqs, 3) == 0, 11);
		VCHECK(rc_chan_wait(&ch, reps, 1, 5000) == 1 && reps[0].status == 0, 12);
		ready(rfd);
		(void)rc_chan_wait(&ch, reps, 2, 60000); /* blocked until killed */
		_exit(13);
	case V_HALF_BATCH: {
		unsigned int entries = (rel_rand(&s) & 1) ? 16 : 64;
		unsigned int m = 1 + (unsigned int)(rel_rand(&s) % (entries - 1));
		unsigned int pub = (unsigned int)(rel_rand(&s) % (m + 2)); /* may exceed m */
		uint64_t one = 1;

		VCHECK(rc_chan_open(&c, &ch, entries) == 0, 14);
		for (i = 0; i < m; i++) {
			rc_req_init(&c, &reqs[0], COFFER_OP_CREATE,
				    VICTIM_ID(round, i % VICTIM_IDS));
			reqs[0].size = rel_rand(&s) % 65536;
			memcpy(&ch.reqs[i & (ch.entries - 1)], &reqs[0], sizeof(reqs[0]));
		}
		/* publish a prefix (or entries never written: zeros -> -EINVAL replies) */
		__atomic_store_n(&ch.shm->req.prod, pub, __ATOMIC_RELEASE);
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		if ((rel_rand(&s) & 3) != 0)
			(void)!write(ch.req_efd, &one, sizeof(one));
		if (rel_rand(&s) & 1)
			rel_sleep_us((long)(rel_rand(&s) % 2000));
		die();
		break;
	}
	case V_FULL_RING:
		VCHECK(rc_chan_open(&c, &ch, 8) == 0, 15);
		for (i = 0; i < 8; i++) {
			rc_req_init(&c, &reqs[i], COFFER_OP_GET, VICTIM_ID(round, VICTIM_IDS - 1));
			reqs[i].timeout_us = -1;
		}
		VCHECK(rc_chan_submit(&ch, reqs, 8) == 0, 16);
		/* wait until the store took them all (cons == 8): the ring is now stalled */
		for (k = 0; k < 5000 && __atomic_load_n(&ch.shm->req.cons, __ATOMIC_ACQUIRE) != 8;
		     k++)
			rel_sleep_us(200);
		for (i = 0; i < 8; i++) {
			rc_req_init(&c, &reqs[i], COFFER_OP_CREATE, VICTIM_ID(round, i));
			reqs[i].size = 4096;
		}
		VCHECK(rc_chan_submit(&ch, reqs, 8) == 0, 17);
		ready(rfd);
		for (;;)
			pause();
	default:
		_exit(20);
	}
}

static void victim_lib(enum scenario sc, unsigned int round, const char *sock, int rfd, uint64_t s)
{
	coffer_handle_t c, oh;
	struct coffer_oid oid;
	const void *p;
	uint64_t size, i;

	switch (sc) {
	case V_LIB_CONNECT:
		ready(rfd);
		for (;;) {
			VCHECK(coffer_connect(sock, &c) == 0, 30);
			VCHECK(coffer_disconnect(c) == 0, 31);
		}
	case V_LIB_GET_BLOCKED:
		VCHECK(coffer_connect(sock, &c) == 0, 30);
		rel_oid(&oid, VICTIM_ID(round, VICTIM_IDS - 1));
		VCHECK(coffer_obj_open(c, &oid, 0, &oh) == 0, 32);
		ready(rfd);
		(void)coffer_obj_get(oh, -1, &p, &size, NULL);
		_exit(33);
	case V_LIB_PUTS:
		VCHECK(coffer_connect(sock, &c) == 0, 30);
		ready(rfd);
		for (i = 0;; i++) {
			int rc = lib_put(c, VICTIM_ID(round, i % VICTIM_IDS),
					 rel_rand(&s) % (256 * 1024), rel_rand(&s));

			VCHECK(rc == 0 || rc == -EEXIST, 34);
		}
	case V_LIB_RESERVE_PUTS: {
		/* a pool of reservations, each written and put (some replacing), refilled
		 * as it goes: the kill lands with blocks reserved, half-written or put */
		enum { POOL = 8 };
		void *pool[POOL];
		uint64_t bytes = 4096 + rel_rand(&s) % (64 * 1024);

		VCHECK(coffer_connect(sock, &c) == 0, 30);
		VCHECK(coffer_obj_reserve(c, bytes, POOL, pool, NULL) == 0, 35);
		ready(rfd);
		for (i = 0;; i++) {
			void *b = pool[i % POOL];
			uint64_t n = 1 + rel_rand(&s) % bytes;
			int rc;

			rel_fill(b, n, rel_rand(&s));
			rel_oid(&oid, VICTIM_ID(round, i % VICTIM_IDS));
			rc = coffer_obj_put(c, &oid, b, n, i & 1 ? COFFER_CREATE_REPLACE : 0, NULL);
			VCHECK(rc == 0 || rc == -EEXIST, 36);
			if (rc == 0)
				VCHECK(coffer_obj_reserve(c, bytes, 1, &pool[i % POOL], NULL) == 0,
				       37);
		}
	}
	default:
		_exit(20);
	}
}

/* ------------------------------------------------------------------ the driver */

struct run {
	struct rc_store st;
	struct rc_conn c; /* the test's own connection: verification and queries */
	struct ctl *ctl;
	pid_t workers[WORKERS];
	struct perm perm[PERM];
	uint64_t used_base;
	int fd_base;
	long rss_anon0, rss_anon_last;
	uint64_t sealed_ids[CKPT * VICTIM_IDS + VICTIM_IDS];
	unsigned int nsealed;
	unsigned int per_scenario[V_COUNT];
};

static void query(struct run *r, struct coffer_store_info *info)
{
	assert_int_equal(rc_query(&r->c, info), 0);
}

/* Wait (bounded) until the store has exactly @n clients and @fds fds (fds < 0: any). */
static void wait_settled(struct run *r, uint64_t n, int fds, const char *when)
{
	struct coffer_store_info info;
	long deadline = rel_now_ms() + 10000;
	int f = -1;

	for (;;) {
		query(r, &info);
		f = rc_count_fds(r->st.pid);
		if (info.clients == n && (fds < 0 || f == fds))
			return;
		if (rel_now_ms() > deadline)
			break;
		rel_sleep_us(1000);
	}
	fail_msg("%s: store has %llu clients (want %llu) and %d fds (want %d)", when,
		 (unsigned long long)info.clients, (unsigned long long)n, f, fds);
}

/* Get every permanent object in one batch, verify each, release them in one batch. */
static void verify_perm(struct run *r)
{
	struct coffer_req reqs[PERM];
	struct coffer_rep reps[PERM];
	unsigned int i;

	for (i = 0; i < PERM; i++)
		rc_req_init(&r->c, &reqs[i], COFFER_OP_GET, r->perm[i].id);
	assert_int_equal(rc_batch(&r->c, reqs, PERM, reps, PERM, 5000), PERM);
	for (i = 0; i < PERM; i++) {
		assert_int_equal(reps[i].status, 0);
		assert_true(reps[i].offset + reps[i].size <= r->c.arena_bytes);
		assert_int_equal(reps[i].size, r->perm[i].size);
		if (rel_verify((char *)r->c.arena + reps[i].offset, reps[i].size) != 0)
			fail_msg("permanent object %u corrupt", i);
	}
	for (i = 0; i < PERM; i++)
		rc_req_init(&r->c, &reqs[i], COFFER_OP_RELEASE, r->perm[i].id);
	assert_int_equal(rc_batch(&r->c, reqs, PERM, reps, PERM, 5000), PERM);
	for (i = 0; i < PERM; i++)
		assert_int_equal(reps[i].status, 0);
}

/* Objects the dead victim sealed must read back intact; remember them for deletion. */
static void verify_victim(struct run *r, unsigned int round)
{
	unsigned int i;

	for (i = 0; i < VICTIM_IDS; i++) {
		const void *p;
		uint64_t size;
		int rc = rc_get(&r->c, VICTIM_ID(round, i), 0, &p, &size);

		if (rc == -ENOENT)
			continue;
		assert_int_equal(rc, 0);
		if (rel_verify(p, size) != 0)
			fail_msg("round %u: object %u sealed by the victim is corrupt", round, i);
		assert_int_equal(rc_release(&r->c, VICTIM_ID(round, i)), 0);
		r->sealed_ids[r->nsealed++] = VICTIM_ID(round, i);
	}
}

static void pause_workers(struct run *r)
{
	int gen = __atomic_load_n(&r->ctl->pause_gen, __ATOMIC_RELAXED) + 1, w;
	long deadline = rel_now_ms() + 20000;

	__atomic_store_n(&r->ctl->pause_gen, gen, __ATOMIC_RELEASE);
	for (w = 0; w < WORKERS; w++)
		while (__atomic_load_n(&r->ctl->acked[w], __ATOMIC_ACQUIRE) != gen) {
			if (__atomic_load_n(&r->ctl->errors, __ATOMIC_RELAXED) != 0)
				fail_msg("worker error: %s", r->ctl->msg);
			if (rel_now_ms() > deadline)
				fail_msg("worker %d did not pause", w);
			rel_sleep_us(500);
		}
}

static void resume_workers(struct run *r)
{
	__atomic_store_n(&r->ctl->resume_gen, __atomic_load_n(&r->ctl->pause_gen, __ATOMIC_RELAXED),
			 __ATOMIC_RELEASE);
}

/* Workers paused and holding nothing: the store must be exactly at the baseline. */
static void checkpoint(struct run *r, unsigned int round)
{
	struct coffer_store_info info;
	struct rel_proc pr;
	unsigned int i;

	pause_workers(r);
	for (i = 0; i < r->nsealed; i++)
		assert_int_equal(rc_delete(&r->c, r->sealed_ids[i]), 0);
	r->nsealed = 0;
	wait_settled(r, WORKERS + 1, r->fd_base, "checkpoint");
	query(r, &info);
	if (info.used_bytes != r->used_base || info.objects_created != 0 ||
	    info.objects_sealed != PERM || info.evictions != 0)
		fail_msg("round %u: store not at baseline: used %llu (baseline %llu), created "
			 "%llu, sealed %llu (want %d), evictions %llu",
			 round, (unsigned long long)info.used_bytes,
			 (unsigned long long)r->used_base, (unsigned long long)info.objects_created,
			 (unsigned long long)info.objects_sealed, PERM,
			 (unsigned long long)info.evictions);
	assert_int_equal(rel_proc_sample(r->st.pid, &pr), 0);
	if (r->fd_base < 0) {
		r->fd_base = pr.fds;
		r->rss_anon0 = pr.rss_anon_kb;
	}
	r->rss_anon_last = pr.rss_anon_kb;
	if (pr.rss_anon_kb > r->rss_anon0 + RSS_SLACK_KB)
		fail_msg("round %u: store private RSS grew from %ld to %ld kB", round, r->rss_anon0,
			 pr.rss_anon_kb);
	resume_workers(r);
}

static void run_round(struct run *r, unsigned int round, uint64_t *s)
{
	enum scenario sc = (enum scenario)(rel_rand(s) % V_COUNT);
	uint64_t vs = rel_rand(s);
	int pfd[2], status;
	struct pollfd p;
	pid_t pid;
	char b;

	r->per_scenario[sc]++;
	assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
	pid = fork();
	assert_true(pid >= 0);
	g_victim = pid;
	if (pid == 0) {
		close(pfd[0]);
		alarm(30); /* a victim that hangs dies with SIGALRM: the round fails */
		if (sc >= V_LIB_CONNECT)
			victim_lib(sc, round, r->st.sock, pfd[1], vs);
		else
			victim_raw(sc, round, r->st.sock, pfd[1], r->perm, vs);
		_exit(98);
	}
	close(pfd[1]);
	/* Victims that block wait for us: kill them a random moment after they are ready. */
	p.fd = pfd[0];
	p.events = POLLIN;
	if (poll(&p, 1, 10000) == 1 && read(pfd[0], &b, 1) == 1) {
		rel_sleep_us((long)(rel_rand(s) % 3000));
		kill(pid, SIGKILL);
	}
	close(pfd[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	g_victim = 0;
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL)
		fail_msg("round %u (%s): victim ended with %s %d, not SIGKILL", round,
			 scenario_name[sc], WIFEXITED(status) ? "exit status" : "signal",
			 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
	if (!rc_store_alive(&r->st))
		fail_msg("round %u (%s): the store died", round, scenario_name[sc]);
	if (__atomic_load_n(&r->ctl->errors, __ATOMIC_RELAXED) != 0)
		fail_msg("round %u (%s): worker error: %s", round, scenario_name[sc], r->ctl->msg);
	wait_settled(r, WORKERS + 1, r->fd_base, scenario_name[sc]);
	verify_perm(r);
	verify_victim(r, round);
}

static void test_kill_rounds(void **state)
{
	const char *args[] = {"-m", "64M", NULL};
	struct coffer_store_info info;
	struct rel_proc pr0, pr1;
	uint64_t s = g_seed;
	struct run *r;
	unsigned int i;
	long t0 = rel_now_ms();
	int w, status;

	(void)state;
	r = calloc(1, sizeof(*r));
	assert_non_null(r);
	r->fd_base = -1;
	g_run = r;
	r->ctl =
	    mmap(NULL, sizeof(*r->ctl), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(r->ctl != MAP_FAILED);
	memset(r->ctl, 0, sizeof(*r->ctl));
	assert_int_equal(rc_store_start(&r->st, args), 0);
	assert_int_equal(rc_connect(&r->c, r->st.sock), 0);

	/* Permanent objects: a 0-byte, a 1-byte, and random sizes up to 64 KiB. */
	for (i = 0; i < PERM; i++) {
		void *p;

		r->perm[i].id = 1 + i;
		r->perm[i].size = i == 0 ? 0 : i == 1 ? 1 : rel_rand(&s) % 65536;
		assert_int_equal(rc_create(&r->c, r->perm[i].id, r->perm[i].size, 0, &p), 0);
		rel_fill(p, r->perm[i].size, rel_rand(&s));
		assert_int_equal(rc_seal(&r->c, r->perm[i].id, COFFER_SEAL_RELEASE), 0);
	}
	query(r, &info);
	r->used_base = info.used_bytes;

	for (w = 0; w < WORKERS; w++) {
		uint64_t ws = rel_rand(&s);

		r->workers[w] = fork();
		assert_true(r->workers[w] >= 0);
		if (r->workers[w] == 0) {
			rc_close(&r->c);
			worker(w, r->st.sock, r->ctl, r->perm, ws);
		}
	}
	/* Let the workers open their channels, then take the baseline. */
	for (i = 0; i < 2000; i++) {
		if (__atomic_load_n(&r->ctl->ops[0], __ATOMIC_RELAXED) > 5 &&
		    __atomic_load_n(&r->ctl->ops[WORKERS - 1], __ATOMIC_RELAXED) > 5)
			break;
		if (__atomic_load_n(&r->ctl->errors, __ATOMIC_RELAXED) != 0)
			fail_msg("worker error: %s", r->ctl->msg);
		rel_sleep_us(5000);
	}
	wait_settled(r, WORKERS + 1, -1, "start");
	checkpoint(r, 0);
	assert_int_equal(rel_proc_sample(r->st.pid, &pr0), 0);

	for (i = 1; i <= g_rounds; i++) {
		run_round(r, i, &s);
		if (i % CKPT == 0 || i == g_rounds)
			checkpoint(r, i);
	}
	assert_int_equal(rel_proc_sample(r->st.pid, &pr1), 0);

	/* Stop the workers: they delete their objects and must exit 0. */
	__atomic_store_n(&r->ctl->stop, 1, __ATOMIC_RELEASE);
	for (w = 0; w < WORKERS; w++) {
		assert_int_equal(waitpid(r->workers[w], &status, 0), r->workers[w]);
		r->workers[w] = 0;
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			fail_msg("worker %d failed: %s", w, r->ctl->msg);
	}
	/* Bytes leaked: delete the permanent objects; nothing may remain. */
	for (i = 0; i < PERM; i++)
		assert_int_equal(rc_delete(&r->c, r->perm[i].id), 0);
	wait_settled(r, 1, -1, "end");
	query(r, &info);
	printf("kill_test: %u rounds survived in %.1f s (seed %llu); victims:", g_rounds,
	       (double)(rel_now_ms() - t0) / 1000.0, (unsigned long long)g_seed);
	for (i = 0; i < V_COUNT; i++)
		printf(" %s=%u", scenario_name[i], r->per_scenario[i]);
	printf("\nkill_test: worker ops %ld + %ld; store fds %d -> %d; private RSS %ld -> %ld kB; "
	       "bytes leaked %llu; objects left %llu\n",
	       r->ctl->ops[0], r->ctl->ops[WORKERS - 1], pr0.fds, pr1.fds, r->rss_anon0,
	       r->rss_anon_last, (unsigned long long)info.used_bytes,
	       (unsigned long long)(info.objects_created + info.objects_sealed));
	assert_int_equal(info.used_bytes, 0);
	assert_int_equal(info.objects_created + info.objects_sealed, 0);
	rc_close(&r->c);
	assert_int_equal(rc_store_stop(&r->st), 0);
	munmap(r->ctl, sizeof(*r->ctl));
	free(r);
	g_run = NULL;
}

static int teardown(void **state)
{
	int w, status;

	(void)state;
	if (g_victim > 0) {
		kill(g_victim, SIGKILL);
		waitpid(g_victim, &status, 0);
	}
	if (g_run != NULL) {
		for (w = 0; w < WORKERS; w++)
			if (g_run->workers[w] > 0) {
				kill(g_run->workers[w], SIGKILL);
				waitpid(g_run->workers[w], &status, 0);
			}
		if (g_run->st.pid > 0)
			(void)rc_store_stop(&g_run->st);
		munmap(g_run->ctl, sizeof(*g_run->ctl));
		free(g_run);
		g_run = NULL;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {cmocka_unit_test_teardown(test_kill_rounds, teardown)};
	const char *env = getenv("REL_KILL_ROUNDS");

	g_store_exe = getenv("COFFER_STORE_EXE");
	if (g_store_exe == NULL) {
		printf("skip: COFFER_STORE_EXE is not set\n");
		return 77;
	}
	if (env != NULL && *env != '\0')
		g_rounds = (unsigned int)strtoul(env, NULL, 10);
	if (argc > 1)
		g_rounds = (unsigned int)strtoul(argv[1], NULL, 10);
	g_seed = argc > 2 ? strtoull(argv[2], NULL, 0) : rel_seed();
	if (g_seed == 0)
		g_seed = 1;
	if (g_rounds == 0)
		g_rounds = 1;
	printf("kill_test: %u rounds, seed %llu (replay: kill_test %u %llu)\n", g_rounds,
	       (unsigned long long)g_seed, g_rounds, (unsigned long long)g_seed);
	fflush(stdout);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
