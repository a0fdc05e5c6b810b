/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * examples/pipeline.c - a Plasma-style multi-process pipeline on coffer, written from
 * README.md and the headers in include/coffer/ only.
 *
 * One producer process and C consumer processes, all forked from a parent that never
 * touches coffer before the forks (a fork child's connection is dead, store.h), share one
 * coffer-store whose arena is smaller than the data set:
 *   producer  creates objects 0..N-1 (1 B .. 64 MiB), fills them, seals them; even IDs by
 *             handle with blocking calls, odd IDs by ObjectID on an EQ. Every eighth object
 *             ("held" objects) is deleted as soon as every live consumer holds it, and a new
 *             get of it must then fail with -ENOENT at once. A create that finds the arena
 *             pinned (-ENOMEM) is retried.
 *   consumers read every ID in order, most before the producer created them (get with a
 *             timeout: the store waits, Plasma's Get; asked again each second, so that an ID
 *             sealed and evicted before the wait began costs one second, not the whole
 *             wait); blocking gets by handle and EQ gets by ObjectID alternate, the middle
 *             consumers take every third chunk of 16 IDs with one get_bulk (Plasma's Get of
 *             a list) and release it with one release_data_bulk, and small objects are also
 *             read through the object index.
 *             Every byte is checked against the producer's generator; an ID that was evicted
 *             or deleted before the consumer got to it must give -ENOENT, never other bytes.
 *             A held object stays readable, byte for byte, after the producer deleted it,
 *             until the consumer releases it. The last consumer starts only when the
 *             producer has finished, so most of its gets find their object evicted.
 *   victim    consumer 0 is killed (SIGKILL) mid-way while it holds a 5 or 64 MiB object and a get
 *             waiting forever on an ID nobody creates.
 *   parent    checks every exit status, then connects, deletes what is left and checks that
 *             the store holds nothing (no object, no byte, one client: itself) and evicted.
 * Every return code is checked against the codes the header documents for that call: an
 * undocumented one fails the run with "UNDOCUMENTED", a documented one this program should
 * not see with "unexpected".
 *
 *   pipeline [-c CONSUMERS] [-n OBJECTS] SOCKET
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <coffer/coffer.h>

#define MAXC	  8
#define MAXN	  4096
#define BIG	  (64ull << 20)
#define WAIT_US	  (60ll * 1000 * 1000) /* a consumer's wait for an ID not sealed yet */
#define SLICE_US  1000000	       /* ... asked again after each SLICE_US */
#define HOLD_SECS 10		       /* the producer's wait for holders before a delete */
#define LONG_SECS 120		       /* waits that only a broken run reaches */

static const char *who = "parent";

static _Noreturn void DIE(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static _Noreturn void DIE(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "pipeline %s: ", who);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

/*
 * Check @rc against the codes the header documents for the call (@doc, 0-terminated, 0
 * included) and the ones this program accepts at this point (@ok, 0-terminated list of
 * negative codes, 0 always accepted).
 */
static int expect_(int rc, const char *call, int line, const int *doc, const int *ok)
{
	if (rc >= 0)
		return rc;
	for (const int *p = ok; *p; p++)
		if (rc == *p)
			return rc;
	for (const int *p = doc; *p; p++)
		if (rc == *p)
			DIE("line %d: %s: unexpected (documented) %s", line, call,
			    coffer_strerror(rc));
	DIE("line %d: %s: UNDOCUMENTED return %d (%s)", line, call, rc, coffer_strerror(rc));
}
#define L(...)		      ((const int[]){__VA_ARGS__, 0})
#define EXPECT(call, doc, ok) expect_((int)(call), #call, __LINE__, doc, ok)
#define NONE		      L(0)

/* Documented codes per call (include/coffer/store.h, event.h, common.h). */
#define DOC_CONNECT                                                                                \
	L(-EINVAL, -ENAMETOOLONG, -ECONNREFUSED, -EACCES, -EMFILE, -ENFILE, -ENOSPC,               \
	  -EPROTONOSUPPORT, -EPROTO, -ENOTCONN, -ETIMEDOUT, -ENOMEM, -EAGAIN, -ELOOP, -ENOBUFS)
/* every coffer_obj_* call with an event may also fail to launch, or open its channel */
#define CHAN_ERRS -EBUSY, -EMFILE, -ENOMEM, -EPROTO, -ETIMEDOUT, -ENOTCONN, -ENOENT
#define DOC_CREATE                                                                                 \
	L(-EINVAL, -ENOENT, -EEXIST, -E2BIG, -ENOMEM, -ENOTCONN, -EAGAIN, -EPROTO, CHAN_ERRS)
#define DOC_SEAL    L(-EINVAL, -ENOENT, -EPERM, -EALREADY, -ENOTCONN, -EAGAIN, CHAN_ERRS)
#define DOC_GET	    L(-EINVAL, -ENOENT, -ENOMEM, -ENOTCONN, -EAGAIN, -EPROTO, CHAN_ERRS)
#define DOC_RELEASE L(-EINVAL, -ENOENT, -ENOTCONN, -EAGAIN, CHAN_ERRS)
#define DOC_DELETE  L(-EINVAL, -ENOENT, -EBUSY, -ENOTCONN, -EAGAIN, CHAN_ERRS)
#define DOC_BULK    L(-EINVAL, -ENOTCONN, -EAGAIN, -ENOMEM, CHAN_ERRS)
#define DOC_BUFST   L(-ENOENT, -ENOMEM, -EPROTO, -ENOTCONN)
#define DOC_RELBULK L(-ENOENT, -EINVAL, -ENOTCONN, -EAGAIN, -ENOMEM, CHAN_ERRS)
#define DOC_READ    L(-EINVAL, -ENOTCONN, -EAGAIN, -EPROTO)
#define DOC_OPEN    L(-EINVAL, -ENOENT, -ENOTCONN, -ENOMEM, -ENOSPC)
#define DOC_CLOSE   L(-ENOENT, -EINVAL)
#define DOC_EQ	    L(-EINVAL, -ENOMEM, -EMFILE, -ENFILE, -ENOSPC, -ENOENT, -EBUSY)
#define DOC_QUERY   L(-EINVAL, -ENOENT, -ENOTCONN, -ETIMEDOUT, -EPROTO)

/* What the processes share (an anonymous shared mapping made before the forks). */
struct shared {
	_Atomic int sealed;	   /* objects 0..sealed-1 have been sealed */
	_Atomic int pos[MAXC];	   /* the ID each consumer works on */
	_Atomic int dead[MAXC];	   /* killed on purpose */
	_Atomic int in_bulk[MAXC]; /* in a get_bulk chunk: holds nothing yet, do not wait */
	_Atomic int started[MAXC]; /* asked for object 0 before it was sealed */
	_Atomic int victim_ready;  /* consumer 0 holds an object and waits on a get */
	_Atomic int victim_holds;  /* the ID it holds */
	_Atomic uint8_t deleted[MAXN];
	_Atomic uint8_t holding[MAXC][MAXN];
	_Atomic long verified[MAXC], missing[MAXC], waited[MAXC], held_deleted[MAXC],
	    index_reads[MAXC], bulk_got[MAXC];
	_Atomic long enomem_retries, deletes, deletes_missing, bytes_written;
};

static struct shared *sh;
static unsigned int nobj = 192, ncons = 3;
static const char *sock;

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t size_of(unsigned int i)
{
	static const uint64_t small[] = {1,    2,     63,    64,    65,	      4095,   4096,
					 4097, 65535, 65536, 65537, 1u << 20, 300001, 777};
	if (i % 64 == 63)
		return BIG;
	if (i % 16 == 15)
		return (5u << 20) + 1;
	return small[i % (sizeof(small) / sizeof(small[0]))];
}

static int held_obj(unsigned int i)
{
	return i % 8 == 4;
}

static struct coffer_oid oid_of(unsigned int i)
{
	struct coffer_oid o;
	memset(&o, 0, sizeof(o));
	memcpy(o.id, "pipeline", 8);
	uint64_t x = mix(i);
	memcpy(o.id + 8, &i, sizeof(i));
	memcpy(o.id + 12, &x, sizeof(x));
	return o;
}

/* Object i's contents: word k is mix(i << 40 ^ k), the tail the low bytes of the next word. */
static void fill(unsigned int i, void *dst, uint64_t size)
{
	uint8_t *p = dst;
	uint64_t k, words = size / 8;
	for (k = 0; k < words; k++) {
		uint64_t w = mix(((uint64_t)i << 40) ^ k);
		memcpy(p + 8 * k, &w, 8);
	}
	if (size % 8) {
		uint64_t w = mix(((uint64_t)i << 40) ^ k);
		memcpy(p + 8 * k, &w, size % 8);
	}
}

/* Return the first byte offset that differs from fill()'s, or -1. */
static int64_t check(unsigned int i, const void *src, uint64_t size)
{
	const uint8_t *p = src;
	uint64_t k, words = size / 8;
	for (k = 0; k < words; k++) {
		uint64_t w = mix(((uint64_t)i << 40) ^ k), v;
		memcpy(&v, p + 8 * k, 8);
		if (v != w)
			return (int64_t)(8 * k);
	}
	if (size % 8) {
		uint64_t w = mix(((uint64_t)i << 40) ^ k);
		if (memcmp(p + 8 * k, &w, size % 8) != 0)
			return (int64_t)(8 * k);
	}
	return -1;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void nap_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}

/* Reap exactly @ev from @eq (nothing else runs on this EQ) and return its result. */
static int reap(coffer_handle_t eq, struct coffer_event *ev)
{
	double end = now() + LONG_SECS;
	struct coffer_event *got;
	for (;;) {
		int n = EXPECT(coffer_eq_poll(eq, 0, 1000000, 1, &got), L(-EINVAL, -ENOENT), NONE);
		if (n == 1) {
			if (got != ev)
				DIE("eq_poll returned an event that is not the one in flight");
			return ev->ev_error;
		}
		if (now() > end)
			DIE("event not completed after %d s", LONG_SECS);
	}
}

static coffer_handle_t connect_store(void)
{
	coffer_handle_t conn;
	EXPECT(coffer_init(), L(-ENOMEM, -EINVAL), NONE);
	EXPECT(coffer_connect(sock, &conn), DOC_CONNECT, NONE);
	return conn;
}

static void disconnect_store(coffer_handle_t conn)
{
	EXPECT(coffer_disconnect(conn), L(-ENOENT, -EINVAL), NONE);
	EXPECT(coffer_fini(), L(-EINVAL), NONE);
}

/* ---- producer ---- */

/* All live consumers but the late one hold object @j, or went past it (it was evicted before they
 * got it). */
static int all_hold(unsigned int j)
{
	for (unsigned int c = 0; c < ncons; c++)
		if (c != ncons - 1 && !atomic_load(&sh->in_bulk[c]) &&
		    !atomic_load(&sh->holding[c][j]) && atomic_load(&sh->pos[c]) <= (int)j &&
		    !atomic_load(&sh->dead[c]))
			return 0;
	return 1;
}

static void produce_one(coffer_handle_t conn, coffer_handle_t eq, struct coffer_event *ev,
			unsigned int i)
{
	struct coffer_oid oid = oid_of(i);
	uint64_t size = size_of(i);
	coffer_handle_t oh = COFFER_HANDLE_NULL;
	void *wr = NULL;
	double end = now() + LONG_SECS;
	int rc;

	if (i % 2 == 0)
		EXPECT(coffer_obj_open(conn, &oid, 0, &oh), DOC_OPEN, NONE);
	for (;;) { /* -ENOMEM: everything evictable is gone and consumers pin the rest */
		if (i % 2 == 0) {
			rc = EXPECT(coffer_obj_create(oh, size, 0, &wr, NULL), DOC_CREATE,
				    L(-ENOMEM));
		} else {
			EXPECT(coffer_obj_create_oid(conn, &oid, size, 0, &wr, ev), DOC_CREATE,
			       NONE);
			rc = EXPECT(reap(eq, ev), DOC_CREATE, L(-ENOMEM));
		}
		if (rc == 0)
			break;
		atomic_fetch_add(&sh->enomem_retries, 1);
		if (now() > end)
			DIE("create of %" PRIu64 " bytes: -ENOMEM for %d s", size, LONG_SECS);
		nap_ms(5);
	}
	fill(i, wr, size);
	if (i % 2 == 0) {
		EXPECT(coffer_obj_seal(oh, COFFER_SEAL_RELEASE, NULL), DOC_SEAL, NONE);
		EXPECT(coffer_obj_close(oh), DOC_CLOSE, NONE);
	} else {
		EXPECT(coffer_obj_seal_oid(conn, &oid, COFFER_SEAL_RELEASE, ev), DOC_SEAL, NONE);
		EXPECT(reap(eq, ev), DOC_SEAL, NONE);
	}
	atomic_fetch_add(&sh->bytes_written, (long)size);
	atomic_store(&sh->sealed, (int)i + 1);
}

/* Delete held object @j once every consumer holds it: their pointers must stay good. */
static void delete_held(coffer_handle_t conn, unsigned int j)
{
	struct coffer_oid oid = oid_of(j);
	const void *rd = NULL;
	uint64_t size = 0;
	double end = now() + HOLD_SECS;
	while (!all_hold(j) && now() < end)
		nap_ms(1);
	int rc = EXPECT(coffer_obj_delete(conn, &oid, NULL), DOC_DELETE, L(-ENOENT));
	atomic_fetch_add(rc == 0 ? &sh->deletes : &sh->deletes_missing, 1);
	atomic_store(&sh->deleted[j], 1);
	/* "New gets stop seeing it at once" */
	EXPECT(coffer_obj_get_oid(conn, &oid, 0, &rd, &size, NULL), DOC_GET, L(-ENOENT));
	if (rd != NULL)
		DIE("get of deleted object %u succeeded", j);
}

static int producer(void)
{
	coffer_handle_t conn = connect_store(), eq;
	struct coffer_event ev;

	who = "producer";
	EXPECT(coffer_eq_create(&eq), DOC_EQ, NONE);
	EXPECT(coffer_event_init(&ev, eq, NULL), DOC_EQ, NONE);
	/* the consumers' first gets ask for an ID that does not exist yet */
	double end = now() + LONG_SECS;
	for (unsigned int c = 0; c + 1 < ncons; c++)
		while (!atomic_load(&sh->started[c]))
			if (now() > end)
				DIE("consumer %u did not start within %d s", c, LONG_SECS);
			else
				nap_ms(1);
	for (unsigned int i = 0; i < nobj; i++) {
		produce_one(conn, eq, &ev, i);
		if (held_obj(i))
			delete_held(conn, i);
	}
	EXPECT(coffer_event_fini(&ev), DOC_EQ, NONE);
	EXPECT(coffer_eq_destroy(eq, 0), DOC_EQ, NONE);
	disconnect_store(conn);
	return 0;
}

/* ---- consumers ---- */

/* Wait for the producer's delete of held object @i, then check the bytes are still there. */
static void hold_across_delete(unsigned int c, unsigned int i, const void *rd, uint64_t size)
{
	double end = now() + LONG_SECS;
	atomic_store(&sh->holding[c][i], 1);
	while (!atomic_load(&sh->deleted[i])) {
		if (now() > end)
			DIE("object %u never deleted", i);
		nap_ms(1);
	}
	int64_t bad = check(i, rd, size);
	if (bad >= 0)
		DIE("object %u changed at byte %" PRId64 " while held across its delete", i, bad);
	atomic_fetch_add(&sh->held_deleted[c], 1);
}

/* The victim's last act: a get waiting forever on an ID nobody creates, then wait to die. */
static _Noreturn void become_victim(coffer_handle_t conn, coffer_handle_t eq, unsigned int i)
{
	static struct coffer_event wev;
	struct coffer_oid never = oid_of(MAXN + 7);
	const void *rd;
	uint64_t size;

	EXPECT(coffer_event_init(&wev, eq, NULL), DOC_EQ, NONE);
	EXPECT(coffer_obj_get_oid(conn, &never, -1, &rd, &size, &wev), DOC_GET, NONE);
	EXPECT(coffer_flush(conn), L(-EINVAL, -ENOENT, -ENOTCONN), NONE);
	atomic_store(&sh->victim_holds, (int)i);
	atomic_store(&sh->victim_ready, 1);
	for (;;)
		pause();
}

/*
 * Plasma's Get of a list: CHUNK IDs from @first through get_bulk, in rounds. In each round
 * the IDs sealed already are asked without waiting (a blocking call: one of them may have
 * been evicted, and a wait for it would last the whole timeout), the others wait for their
 * seal for up to SLICE_US, on the EQ; an ID that was sealed while its wait ran out is asked
 * once more without waiting. What was found is released in one release_data_bulk.
 */
#define CHUNK 16
static void consume_bulk(unsigned int c, coffer_handle_t conn, coffer_handle_t eq,
			 struct coffer_event *ev, unsigned int first)
{
	struct coffer_oid oids[CHUNK], found[CHUNK], ask[CHUNK];
	struct coffer_obj_buf bufs[CHUNK], got[CHUNK];
	const void *ptrs[CHUNK];
	int deleted_before[CHUNK], done[CHUNK], waited[CHUNK];
	unsigned int nfound = 0, k, todo = CHUNK;
	double end = now() + WAIT_US / 1e6;

	atomic_store(&sh->in_bulk[c], 1);
	atomic_store(&sh->pos[c], (int)first);
	memset(bufs, 0, sizeof(bufs));
	for (k = 0; k < CHUNK; k++) {
		oids[k] = oid_of(first + k);
		deleted_before[k] = atomic_load(&sh->deleted[first + k]);
		done[k] = waited[k] = 0;
	}
	while (todo > 0) {
		int sealed = atomic_load(&sh->sealed);
		atomic_store(&sh->started[c], 1);
		unsigned int idx[CHUNK], n0 = 0, n = 0;

		/* the sealed ones first (a prefix: seals come in ID order), then the others */
		for (k = 0; k < CHUNK; k++)
			if (!done[k] && (int)(first + k) < sealed)
				idx[n0++] = k;
		n = n0;
		for (k = 0; k < CHUNK; k++)
			if (!done[k] && (int)(first + k) >= sealed)
				idx[n++] = k;
		for (k = 0; k < n; k++)
			ask[k] = oids[idx[k]];
		memset(got, 0, sizeof(got));
		if (n0 > 0)
			EXPECT(coffer_obj_get_bulk(conn, ask, n0, 0, got, NULL), DOC_BULK, NONE);
		if (n > n0) {
			EXPECT(coffer_obj_get_bulk(conn, ask + n0, n - n0, SLICE_US, got + n0, ev),
			       DOC_BULK, NONE);
			EXPECT(reap(eq, ev), DOC_BULK, NONE);
		}
		for (k = 0; k < n; k++) {
			unsigned int j = idx[k];
			int rc = EXPECT(got[k].status, DOC_BUFST, L(-ENOENT));
			if (rc == 0 || k < n0) { /* found, or missing after its seal: final */
				bufs[j] = got[k];
				done[j] = 1;
				waited[j] = k >= n0;
				todo--;
			} else if (now() > end) {
				DIE("object %u not sealed within %lld s", first + j,
				    WAIT_US / 1000000);
			}
		}
	}
	for (k = 0; k < CHUNK; k++) {
		unsigned int i = first + k;
		if (bufs[k].status == -ENOENT) {
			if (bufs[k].data != NULL)
				DIE("get_bulk: missing object %u has a data pointer", i);
			atomic_fetch_add(&sh->missing[c], 1);
			continue;
		}
		if (deleted_before[k])
			DIE("get_bulk of %u after its delete succeeded", i);
		if (bufs[k].size != size_of(i))
			DIE("object %u: size %" PRIu64 ", wrote %" PRIu64, i, bufs[k].size,
			    size_of(i));
		int64_t bad = check(i, bufs[k].data, bufs[k].size);
		if (bad >= 0)
			DIE("get_bulk: object %u: GARBAGE at byte %" PRId64, i, bad);
		atomic_fetch_add(&sh->verified[c], 1);
		atomic_fetch_add(&sh->bulk_got[c], 1);
		if (waited[k])
			atomic_fetch_add(&sh->waited[c], 1);
		found[nfound] = oids[k];
		ptrs[nfound++] = bufs[k].data;
	}
	/* the held objects among them: the producer deletes them, the bytes must stay */
	for (k = 0; k < CHUNK; k++)
		if (held_obj(first + k) && bufs[k].status == 0)
			hold_across_delete(c, first + k, bufs[k].data, bufs[k].size);
	if (nfound > 0)
		EXPECT(coffer_obj_release_data_bulk(conn, found, ptrs, nfound, NULL), DOC_RELBULK,
		       NONE);
	atomic_store(&sh->pos[c], (int)(first + CHUNK));
	atomic_store(&sh->in_bulk[c], 0);
}

static int consumer(unsigned int c)
{
	static char whobuf[32];
	coffer_handle_t conn = connect_store(), eq;
	struct coffer_event ev;
	static uint8_t small[65537];

	snprintf(whobuf, sizeof(whobuf), "consumer %u", c);
	who = whobuf;
	EXPECT(coffer_eq_create(&eq), DOC_EQ, NONE);
	EXPECT(coffer_event_init(&ev, eq, NULL), DOC_EQ, NONE);

	/* An ID nobody creates: a short wait ends with -ENOENT, blocking and on an EQ. */
	struct coffer_oid never = oid_of(MAXN + c);
	const void *rd = NULL;
	uint64_t size = 0;
	EXPECT(coffer_obj_get_oid(conn, &never, 20000, &rd, &size, NULL), DOC_GET, L(-ENOENT));
	if (rd)
		DIE("get of a never-created ID succeeded");
	EXPECT(coffer_obj_get_oid(conn, &never, 20000, &rd, &size, &ev), DOC_GET, NONE);
	EXPECT(reap(eq, &ev), DOC_GET, L(-ENOENT));
	if (rd)
		DIE("EQ get of a never-created ID succeeded");

	/* the last consumer starts late: most of what it asks for is evicted or deleted */
	double end = now() + LONG_SECS;
	while (c == ncons - 1 && atomic_load(&sh->sealed) < (int)nobj) {
		if (now() > end)
			DIE("the producer did not finish within %d s", LONG_SECS);
		nap_ms(1);
	}

	for (unsigned int i = 0; i < nobj; i++) {
		/* the middle consumers take every third chunk of IDs with one get_bulk */
		if (c != 0 && c != ncons - 1 && i % CHUNK == 0 && i + CHUNK <= nobj &&
		    (i / CHUNK + c) % 3 == 0) {
			consume_bulk(c, conn, eq, &ev, i);
			i += CHUNK - 1;
			continue;
		}
		struct coffer_oid oid = oid_of(i);
		int by_eq = (int)((i + c) % 2), rc;
		int deleted_before = atomic_load(&sh->deleted[i]);
		int sealed_before = atomic_load(&sh->sealed) > (int)i;
		int64_t timeout = sealed_before ? 0 : SLICE_US;
		atomic_store(&sh->started[c], 1);
		coffer_handle_t oh = COFFER_HANDLE_NULL;
		double end = now() + WAIT_US / 1e6;

		atomic_store(&sh->pos[c], (int)i);
		if (!by_eq)
			EXPECT(coffer_obj_open(conn, &oid, 0, &oh), DOC_OPEN, NONE);
		for (;;) {
			rd = NULL;
			size = 0;
			if (!by_eq) {
				rc = EXPECT(coffer_obj_get(oh, timeout, &rd, &size, NULL), DOC_GET,
					    L(-ENOENT));
			} else {
				EXPECT(coffer_obj_get_oid(conn, &oid, timeout, &rd, &size, &ev),
				       DOC_GET, NONE);
				rc = EXPECT(reap(eq, &ev), DOC_GET, L(-ENOENT));
			}
			if (rc == 0 || timeout == 0)
				break;
			/* sealed while the wait ran out, or evicted before it began: ask once
			 * more without waiting; not sealed yet: wait again */
			if (atomic_load(&sh->sealed) > (int)i)
				timeout = 0;
			else if (now() > end)
				DIE("object %u not sealed within %lld s", i, WAIT_US / 1000000);
		}
		if (rc == -ENOENT) {
			/* evicted or deleted before we asked */
			if (rd != NULL)
				DIE("failed get of %u set the data pointer", i);
			atomic_fetch_add(&sh->missing[c], 1);
		} else {
			if (deleted_before)
				DIE("get of %u after its delete succeeded", i);
			if (size != size_of(i))
				DIE("object %u: size %" PRIu64 ", wrote %" PRIu64, i, size,
				    size_of(i));
			int64_t bad = check(i, rd, size);
			if (bad >= 0)
				DIE("object %u: GARBAGE at byte %" PRId64, i, bad);
			atomic_fetch_add(&sh->verified[c], 1);
			if (!sealed_before)
				atomic_fetch_add(&sh->waited[c], 1);
			if (held_obj(i))
				hold_across_delete(c, i, rd, size);
			else if (c == 0 && i >= nobj / 3 && size_of(i) > (1u << 20))
				become_victim(conn, eq, i);
			if (!by_eq) {
				EXPECT(coffer_obj_release(oh, NULL), DOC_RELEASE, NONE);
			} else {
				EXPECT(coffer_obj_release_data(conn, &oid, rd, &ev), DOC_RELEASE,
				       NONE);
				EXPECT(reap(eq, &ev), DOC_RELEASE, NONE);
			}
			/* a second release finds no reference */
			EXPECT(coffer_obj_release_oid(conn, &oid, NULL), DOC_RELEASE, L(-ENOENT));
		}
		if (!by_eq)
			EXPECT(coffer_obj_close(oh), DOC_CLOSE, NONE);

		/* small objects again through the object index: whole, or -EAGAIN */
		if (size_of(i) <= sizeof(small)) {
			int gone =
			    atomic_load(&sh->deleted[i]); /* delete completed before the read */
			uint64_t isz = 0;
			int64_t n = coffer_obj_read_oid(conn, &oid, 0, small, sizeof(small), &isz);
			EXPECT(n < 0 ? n : 0, DOC_READ, L(-EAGAIN));
			if (n >= 0) {
				if (gone)
					DIE("index read of %u after its delete found it", i);
				if ((uint64_t)n != size_of(i) || isz != size_of(i) ||
				    check(i, small, (uint64_t)n) >= 0)
					DIE("index read of %u: GARBAGE (%" PRId64 " bytes)", i, n);
				atomic_fetch_add(&sh->index_reads[c], 1);
			}
		}
	}
	atomic_store(&sh->pos[c], (int)nobj);
	EXPECT(coffer_event_fini(&ev), DOC_EQ, NONE);
	EXPECT(coffer_eq_destroy(eq, 0), DOC_EQ, NONE);
	disconnect_store(conn);
	return 0;
}

/* ---- parent ---- */

static pid_t spawn(int (*fn)(unsigned int), unsigned int arg)
{
	pid_t pid = fork();
	if (pid < 0)
		DIE("fork: %s", strerror(errno));
	if (pid == 0) {
		int rc = fn(arg);
		fflush(NULL);
		_exit(rc);
	}
	return pid;
}

static int producer_main(unsigned int unused)
{
	(void)unused;
	return producer();
}

static pid_t kids[MAXC + 1];
static unsigned int nkids;

/*
 * Reap one child that exited (wait: block for it); a failure kills the others, so that a
 * broken run ends now, not after every survivor's timeouts. Return: the pid, or 0 (none yet).
 */
static pid_t reap_child(int wait)
{
	int st;
	pid_t pid = waitpid(-1, &st, wait ? 0 : WNOHANG);
	if (pid < 0)
		DIE("waitpid: %s", strerror(errno));
	if (pid == 0)
		return 0;
	for (unsigned int k = 0; k < nkids; k++)
		if (kids[k] == pid)
			kids[k] = 0;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		for (unsigned int k = 0; k < nkids; k++)
			if (kids[k] > 0)
				kill(kids[k], SIGKILL);
		DIE("child %d failed (status 0x%x)", (int)pid, st);
	}
	return pid;
}

/* After everyone is gone: delete what is left; the store must hold nothing of ours. */
static void final_check(void)
{
	coffer_handle_t conn = connect_store();
	struct coffer_store_info info;
	double end = now() + LONG_SECS;
	long left = 0;

	for (unsigned int i = 0; i < nobj; i++) {
		struct coffer_oid oid = oid_of(i);
		if (EXPECT(coffer_obj_delete(conn, &oid, NULL), DOC_DELETE, L(-ENOENT)) == 0)
			left++;
	}
	for (;;) { /* the store notices hang-ups asynchronously */
		EXPECT(coffer_store_query(conn, &info), DOC_QUERY, NONE);
		if (info.clients == 1 && info.used_bytes == 0)
			break;
		if (now() > end)
			DIE("store still holds %" PRIu64 " bytes, %" PRIu64 " clients",
			    info.used_bytes, info.clients);
		nap_ms(10);
	}
	if (info.objects_sealed || info.objects_created || info.reserved_blocks)
		DIE("store still holds %" PRIu64 " sealed, %" PRIu64 " unsealed objects, %" PRIu64
		    " reservations",
		    info.objects_sealed, info.objects_created, info.reserved_blocks);
	/* the late consumer misses every deleted object, and the evicted ones */
	if (info.evictions == 0 || sh->missing[ncons - 1] <= sh->deletes + sh->deletes_missing)
		DIE("nothing was evicted: the arena (%" PRIu64 " bytes) is too large for the test",
		    info.capacity_bytes);
	long v = 0, m = 0, w = 0, h = 0, x = 0, b = 0;
	for (unsigned int c = 0; c < ncons; c++) {
		v += sh->verified[c];
		m += sh->missing[c];
		w += sh->waited[c];
		h += sh->held_deleted[c];
		x += sh->index_reads[c];
		b += sh->bulk_got[c];
		if (c > 0 && sh->verified[c] == 0)
			DIE("consumer %u verified nothing", c);
		/* nothing is created after the producer is done, so nothing is evicted either */
		if (c == ncons - 1 && sh->verified[c] != left)
			DIE("the late consumer read %ld objects, %ld were left",
			    (long)sh->verified[c], left);
	}
	if (b == 0)
		DIE("no object read through get_bulk");
	if (h == 0 || w == 0)
		DIE("no object held across its delete (%ld) or no get waited for a seal (%ld)", h,
		    w);
	printf("pipeline: %u objects (%.1f MiB) to %u consumers over a %" PRIu64
	       " MiB arena: %ld verified (%ld by get_bulk, %ld waited for their seal, %ld held "
	       "across their "
	       "delete, %ld index reads), %ld missing (evicted or deleted), %" PRIu64
	       " evictions, %ld create -ENOMEM retries, %ld deletes (%ld found evicted), "
	       "%ld left at the end; consumer 0 killed holding object %d\n",
	       nobj, (double)sh->bytes_written / (1 << 20), ncons, info.capacity_bytes >> 20, v, b,
	       w, h, x, m, info.evictions, (long)sh->enomem_retries, (long)sh->deletes,
	       (long)sh->deletes_missing, left, (int)sh->victim_holds);
	for (unsigned int c = 0; c < ncons; c++)
		printf("  consumer %u%s: %ld verified, %ld missing, %ld waited, %ld held across a "
		       "delete, %ld by get_bulk\n",
		       c,
		       c == 0		? " (killed)"
		       : c == ncons - 1 ? " (late)"
					: "",
		       (long)sh->verified[c], (long)sh->missing[c], (long)sh->waited[c],
		       (long)sh->held_deleted[c], (long)sh->bulk_got[c]);
	disconnect_store(conn);
}

int main(int argc, char **argv)
{
	int opt;

	while ((opt = getopt(argc, argv, "c:n:")) != -1) {
		if (opt == 'c')
			ncons = (unsigned int)strtoul(optarg, NULL, 0);
		else if (opt == 'n')
			nobj = (unsigned int)strtoul(optarg, NULL, 0);
		else
			return 2;
	}
	if (optind != argc - 1 || ncons < 2 || ncons > MAXC || nobj < 64 || nobj > MAXN) {
		fprintf(stderr, "usage: pipeline [-c 2..%d] [-n 64..%d] SOCKET\n", MAXC, MAXN);
		return 2;
	}
	sock = argv[optind];
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		DIE("mmap: %s", strerror(errno));

	/* consumers first: their gets wait for IDs the producer has not created yet */
	for (unsigned int c = 0; c < ncons; c++)
		kids[nkids++] = spawn(consumer, c);
	kids[nkids++] = spawn(producer_main, 0);

	double end = now() + LONG_SECS;
	while (!atomic_load(&sh->victim_ready)) {
		pid_t v = kids[0];
		if (reap_child(0) == v)
			DIE("consumer 0 exited before it could be killed");
		if (now() > end)
			DIE("consumer 0 never got to the kill point");
		nap_ms(1);
	}
	pid_t victim = kids[0];
	int st;
	atomic_store(&sh->dead[0], 1);
	kill(victim, SIGKILL);
	if (waitpid(victim, &st, 0) != victim || !WIFSIGNALED(st))
		DIE("consumer 0 was not killed (status 0x%x)", st);
	kids[0] = 0;
	for (unsigned int k = 1; k < nkids; k++)
		while (kids[k] > 0)
			reap_child(1);
	final_check();
	return 0;
}
