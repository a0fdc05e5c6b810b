/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/reliability/badinput_test.c - hostile clients against a live store, concurrently
 * with a well-behaved one.
 *
 * usage: badinput_test [ITERATIONS [SEED]]   (default 300 per attacker; env REL_BAD_ITERS)
 *
 * ATTACKERS processes each run a bounded loop of bad behaviour picked at random while a
 * libcoffer client process puts, reads back and verifies checksummed objects the whole time:
 *
 *   truncated      a valid REQUEST cut short            -> ERROR -EPROTO, then closed
 *   oversized      a 20,000-byte message                -> ERROR -EPROTO, then closed
 *   version        a newer version header               -> ERROR -EPROTONOSUPPORT, closed
 *   count          count 0, 257, or not matching length -> ERROR -EPROTO, then closed
 *   empty          a zero-length message                -> closed
 *   before-hello   a REQUEST before HELLO; HELLO twice  -> ERROR -EPROTO, then closed
 *   out-of-bounds  CREATE of arena+1, 2^63, 2^64-1 bytes -> -E2BIG; RELEASE by an offset
 *                  past the arena or of nothing held -> -ENOENT; the connection stays usable
 *   wrong-owner    a second connection seals, aborts, releases the first one's unsealed
 *                  object -> -EPERM, -EPERM, -ENOENT; the good client's sealed objects:
 *                  seal/abort/release -> an error, never success
 *   fds            fds with a REQUEST -> closed; 5 fds -> closed; a memfd or a pipe as the
 *                  CHANNEL_OPEN doorbell -> non-fatal ERROR -EINVAL, connection usable
 *   random         random bytes; a valid header over random requests -> errors or closed;
 *                  any success must lie inside the arena
 *   ring-garbage   random ring entries; prod far past cons; reply cons moved backwards or
 *                  past prod; doorbell spam -> replies, or ERROR -EPROTO and closed
 *
 * Every bad message must get its answer (or the close) within 3 s: the store never stalls.
 * At the end: the good client saw no error, the store is alive with used bytes 0, one
 * client (the test's) and the fd count it had at the start.
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
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <coffer/coffer.h>

#include "tests/reliability/relcommon.h"
#include "tests/store/rawclient.h"

#define ATTACKERS 2
#define GOOD_KEEP 16
#define WAIT_MS	  3000

enum attack {
	A_TRUNCATED,
	A_OVERSIZED,
	A_VERSION,
	A_COUNT,
	A_EMPTY,
	A_BEFORE_HELLO,
	A_OOB,
	A_WRONG_OWNER,
	A_FDS,
	A_RANDOM,
	A_RING,
	A_NKINDS
};

static const char *const attack_name[A_NKINDS] = {
    "truncated",     "oversized",   "version", "count",	 "empty",	 "before-hello",
    "out-of-bounds", "wrong-owner", "fds",     "random", "ring-garbage",
};

static unsigned int g_iters = 300;
static uint64_t g_seed;
static struct rc_store g_store;

/* Shared with the children (MAP_SHARED): stop flag and per-kind counters (relaxed). */
struct shared {
	int stop;
	long good_ops;
	long done[A_NKINDS];
	char msg[256];
};

static struct shared *g_sh;
static pid_t g_children[ATTACKERS + 1]; /* killed by the teardown if the test fails early */

static void child_fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void child_fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(g_sh->msg, sizeof(g_sh->msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "badinput_test: %s\n", g_sh->msg);
	_exit(1);
}

/* ------------------------------------------------------------------ answers */

/*
 * Wait for the store's answer to a fatal violation: optionally an ERROR with @status
 * (0 = any), then the close. A REPLY in between is a failure (the violation was served).
 */
static void expect_fatal(struct rc_conn *c, int status, const char *what)
{
	unsigned char buf[COFFER_MSG_MAX_BYTES + 64];
	struct coffer_msg_hdr h;
	long n;

	for (;;) {
		n = rc_recv_msg(c, buf, sizeof(buf), NULL, NULL, WAIT_MS);
		if (n == 0)
			break; /* closed */
		if (n == -ETIMEDOUT)
			child_fail("%s: no ERROR and no close within %d ms", what, WAIT_MS);
		if (n < 0)
			break; /* reset: closed */
		if (coffer__msg_check(buf, (size_t)n, &h) != 0 || h.type != COFFER_MSG_ERROR)
			child_fail("%s: the store answered message type %u instead of ERROR", what,
				   (unsigned int)h.type);
		if (status != 0) {
			struct coffer_msg_error e;

			memcpy(&e, buf + sizeof(h), sizeof(e));
			if (e.status != status)
				child_fail("%s: ERROR status %d, want %d", what, e.status, status);
		}
	}
	rc_close(c);
}

/* One request on @c; its status (the connection must stay usable). */
static int one(struct rc_conn *c, struct coffer_req *r, const char *what)
{
	struct coffer_rep rep;
	int rc = rc_batch(c, r, 1, &rep, 1, WAIT_MS);

	if (rc != 1)
		child_fail("%s: no reply (%d)", what, rc);
	if (rep.tag != r->tag)
		child_fail("%s: reply tag %llu, want %llu", what, (unsigned long long)rep.tag,
			   (unsigned long long)r->tag);
	return rep.status;
}

/* The connection still serves a valid request. */
static void still_usable(struct rc_conn *c, const char *what)
{
	struct coffer_req r;

	rc_req_init(c, &r, COFFER_OP_CONTAINS, 1);
	if (one(c, &r, what) != 0)
		child_fail("%s: the connection no longer serves valid requests", what);
}

static void connect_or_fail(struct rc_conn *c, const char *sock)
{
	int rc = rc_connect(c, sock);

	if (rc != 0)
		child_fail("connect: %d", rc);
}

/* A REQUEST message of @n valid requests into @buf; its length. */
static size_t valid_request(struct rc_conn *c, unsigned char *buf, unsigned int n, uint64_t id)
{
	struct coffer_msg_hdr h;
	unsigned int i;

	coffer__msg_hdr_init(&h, COFFER_MSG_REQUEST, n,
			     (uint32_t)(sizeof(h) + n * sizeof(struct coffer_req)));
	memcpy(buf, &h, sizeof(h));
	for (i = 0; i < n; i++) {
		struct coffer_req r;

		rc_req_init(c, &r, COFFER_OP_CONTAINS, id + i);
		memcpy(buf + sizeof(h) + i * sizeof(r), &r, sizeof(r));
	}
	return sizeof(h) + n * sizeof(struct coffer_req);
}

/* sendmsg with any number of fds (coffer__send_fds refuses more than the protocol allows). */
static int send_many_fds(int sock, const void *buf, size_t len, const int *fds, unsigned int n)
{
	union {
		char b[CMSG_SPACE(16 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	struct cmsghdr *cm;

	memset(&u, 0, sizeof(u));
	m.msg_control = u.b;
	m.msg_controllen = CMSG_SPACE(n * sizeof(int));
	cm = CMSG_FIRSTHDR(&m);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(n * sizeof(int));
	memcpy(CMSG_DATA(cm), fds, n * sizeof(int));
	return sendmsg(sock, &m, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -errno;
}

/* ------------------------------------------------------------------ attacks */

static void attack(enum attack a, const char *sock, unsigned int me, unsigned int it, uint64_t *s)
{
	unsigned char buf[20000];
	struct coffer_msg_hdr h;
	struct coffer_req r;
	struct rc_conn c, c2;
	size_t len;
	int rc;

	switch (a) {
	case A_TRUNCATED:
		connect_or_fail(&c, sock);
		len = valid_request(&c, buf, 1 + (unsigned int)(rel_rand(s) % 8), 100);
		len = 1 + rel_rand(s) % (len - 1);
		if (rc_send_raw(&c, buf, len, NULL, 0) != 0)
			child_fail("truncated: send");
		expect_fatal(&c, -EPROTO, "truncated");
		break;
	case A_OVERSIZED:
		connect_or_fail(&c, sock);
		len = valid_request(&c, buf, 256, 100);
		memset(buf + len, 0, sizeof(buf) - len);
		(void)rc_send_raw(&c, buf, sizeof(buf), NULL, 0);
		expect_fatal(&c, -EPROTO, "oversized");
		break;
	case A_VERSION:
		connect_or_fail(&c, sock);
		len = valid_request(&c, buf, 1, 100);
		buf[4] = COFFER_PROTO_VERSION + 1; /* version, little-endian u16 at offset 4 */
		(void)rc_send_raw(&c, buf, len, NULL, 0);
		expect_fatal(&c, -EPROTONOSUPPORT, "version");
		break;
	case A_COUNT: {
		uint32_t count;

		connect_or_fail(&c, sock);
		len = valid_request(&c, buf, 2, 100);
		switch (rel_rand(s) % 3) {
		case 0:
			count = 0;
			break;
		case 1:
			count = COFFER_MSG_BATCH_MAX + 1;
			break;
		default:
			count = 3; /* body holds 2 */
		}
		memcpy(buf + 8, &count, 4);
		(void)rc_send_raw(&c, buf, len, NULL, 0);
		expect_fatal(&c, -EPROTO, "count");
		break;
	}
	case A_EMPTY:
		connect_or_fail(&c, sock);
		(void)rc_send_raw(&c, buf, 0, NULL, 0);
		expect_fatal(&c, 0, "empty");
		break;
	case A_BEFORE_HELLO:
		if (rel_rand(s) & 1) {
			if (rc_connect_raw(&c, sock) != 0)
				child_fail("connect");
			len = valid_request(&c, buf, 1, 100);
		} else {
			connect_or_fail(&c, sock);
			coffer__msg_hdr_init(&h, COFFER_MSG_HELLO, 0, sizeof(h));
			memcpy(buf, &h, sizeof(h));
			len = sizeof(h);
		}
		(void)rc_send_raw(&c, buf, len, NULL, 0);
		expect_fatal(&c, -EPROTO, "before-hello");
		break;
	case A_OOB: {
		static const uint64_t sizes[] = {0, 1ull << 63, UINT64_MAX};

		connect_or_fail(&c, sock);
		rc_req_init(&c, &r, COFFER_OP_CREATE, (2ull << 40) + me * 100000 + it);
		r.size = sizes[rel_rand(s) % 3];
		if (r.size == 0)
			r.size = c.arena_bytes + 1 + rel_rand(s) % 4096;
		if ((rc = one(&c, &r, "oob-create")) != -E2BIG)
			child_fail("CREATE of %llu bytes in a %llu-byte arena: %d, want -E2BIG",
				   (unsigned long long)r.size, (unsigned long long)c.arena_bytes,
				   rc);
		rc_req_init(&c, &r, COFFER_OP_RELEASE, 1 + rel_rand(s) % 8);
		r.flags = COFFER_RELEASE_BY_OFFSET;
		r.size = (rel_rand(s) & 1) ? c.arena_bytes + rel_rand(s) % 65536
					   : rel_rand(s) % c.arena_bytes;
		if ((rc = one(&c, &r, "oob-release")) != -ENOENT)
			child_fail("RELEASE by offset %llu of nothing held: %d, want -ENOENT",
				   (unsigned long long)r.size, rc);
		still_usable(&c, "out-of-bounds");
		rc_close(&c);
		break;
	}
	case A_WRONG_OWNER: {
		uint64_t id = (3ull << 40) + me * 100000 + it, good = 1 + rel_rand(s) % GOOD_KEEP;
		void *p;

		connect_or_fail(&c, sock);
		connect_or_fail(&c2, sock);
		if (rc_create(&c, id, 4096, 0, &p) != 0)
			child_fail("wrong-owner: create");
		if ((rc = rc_seal(&c2, id, 0)) != -EPERM)
			child_fail("seal of another client's object: %d, want -EPERM", rc);
		if ((rc = rc_abort(&c2, id)) != -EPERM)
			child_fail("abort of another client's object: %d, want -EPERM", rc);
		if ((rc = rc_release(&c2, id)) != -ENOENT)
			child_fail("release of another client's object: %d, want -ENOENT", rc);
		/* the good client's objects (may or may not exist right now) */
		if (rc_seal(&c2, (4ull << 40) + good, 0) == 0 ||
		    rc_abort(&c2, (4ull << 40) + good) == 0 ||
		    rc_release(&c2, (4ull << 40) + good) == 0)
			child_fail(
			    "a stranger sealed, aborted or released the good client's object");
		if (rc_seal(&c, id, COFFER_SEAL_RELEASE) != 0)
			child_fail("wrong-owner: the creator could not seal after the attempts");
		if (rc_delete(&c, id) != 0)
			child_fail("wrong-owner: delete");
		rc_close(&c2);
		rc_close(&c);
		break;
	}
	case A_FDS: {
		int fds[COFFER_MSG_FDS_MAX + 1], k, kind = (int)(rel_rand(s) % 3);

		connect_or_fail(&c, sock);
		for (k = 0; k < COFFER_MSG_FDS_MAX + 1; k++)
			fds[k] = eventfd(0, EFD_CLOEXEC);
		if (kind == 0) { /* fds with a REQUEST */
			len = valid_request(&c, buf, 1, 100);
			(void)rc_send_raw(&c, buf, len, fds, 1);
			expect_fatal(&c, -EPROTO, "fds-with-request");
		} else if (kind == 1) { /* more fds than any message carries */
			struct coffer_chan_open o = {0};

			coffer__msg_hdr_init(&h, COFFER_MSG_CHANNEL_OPEN, 0, sizeof(h) + sizeof(o));
			memcpy(buf, &h, sizeof(h));
			memcpy(buf + sizeof(h), &o, sizeof(o));
			if (send_many_fds(c.fd, buf, sizeof(h) + sizeof(o), fds,
					  COFFER_MSG_FDS_MAX + 1) != 0)
				child_fail("too-many-fds: sendmsg: %s", strerror(errno));
			expect_fatal(&c, 0, "too-many-fds");
		} else { /* a memfd or a pipe as the doorbell: refused, connection stays */
			struct coffer_chan_open o = {0};
			unsigned char rb[256];
			int bad, pp[2] = {-1, -1};
			long n;

			if (rel_rand(s) & 1) {
				bad = memfd_create("rel-evil", MFD_CLOEXEC);
				(void)!ftruncate(bad, 1 << 20);
			} else {
				(void)!pipe(pp);
				bad = pp[0];
			}
			coffer__msg_hdr_init(&h, COFFER_MSG_CHANNEL_OPEN, 0, sizeof(h) + sizeof(o));
			memcpy(buf, &h, sizeof(h));
			memcpy(buf + sizeof(h), &o, sizeof(o));
			(void)rc_send_raw(&c, buf, sizeof(h) + sizeof(o), &bad, 1);
			n = rc_recv_msg(&c, rb, sizeof(rb), NULL, NULL, WAIT_MS);
			if (n <= 0 || coffer__msg_check(rb, (size_t)n, &h) != 0 ||
			    h.type != COFFER_MSG_ERROR)
				child_fail("CHANNEL_OPEN with a non-eventfd: no ERROR (%ld)", n);
			else {
				struct coffer_msg_error e;

				memcpy(&e, rb + sizeof(h), sizeof(e));
				if (e.status != -EINVAL)
					child_fail("CHANNEL_OPEN with a non-eventfd: %d", e.status);
			}
			still_usable(&c, "non-eventfd doorbell");
			close(bad);
			if (pp[1] >= 0)
				close(pp[1]);
			rc_close(&c);
		}
		for (k = 0; k < COFFER_MSG_FDS_MAX + 1; k++)
			close(fds[k]);
		break;
	}
	case A_RANDOM: {
		uint16_t ops[32];
		unsigned int k, n;
		long got;

		connect_or_fail(&c, sock);
		if (rel_rand(s) & 1) { /* pure noise */
			len = 1 + rel_rand(s) % 300;
			for (k = 0; k < len; k++)
				buf[k] = (unsigned char)rel_rand(s);
			(void)rc_send_raw(&c, buf, len, NULL, 0);
			expect_fatal(&c, 0, "random-bytes");
			break;
		}
		/* valid header, random requests: per-request answers */
		n = 1 + (unsigned int)(rel_rand(s) % 32);
		len = valid_request(&c, buf, n, 100);
		for (k = 16; k < len; k++)
			buf[k] = (unsigned char)rel_rand(s);
		for (k = 0; k < n; k++) { /* our tags; a known op half the time */
			struct coffer_req *q = (struct coffer_req *)(buf + 16 + k * 64);
			uint64_t tag = 1000 + k;
			uint16_t op;

			memcpy(&q->tag, &tag, 8);
			if (rel_rand(s) & 1) {
				op = (uint16_t)(1 + rel_rand(s) % COFFER_OP_MAX);
				memcpy(&q->op, &op, 2);
				memset(&q->rsvd0, 0, 4);
			}
			memcpy(&op, &q->op, 2);
			ops[k] = op;
		}
		(void)rc_send_raw(&c, buf, len, NULL, 0);
		/* Answers come for every request except gets that wait; collect what comes
		 * and check each with the client's own validator (successes inside the arena). */
		for (got = 0;;) {
			unsigned char rb[COFFER_MSG_MAX_BYTES + 64];
			long m =
			    rc_recv_msg(&c, rb, sizeof(rb), NULL, NULL, got == 0 ? WAIT_MS : 50);

			if (m <= 0)
				break;
			if (coffer__msg_check(rb, (size_t)m, &h) != 0 || h.type != COFFER_MSG_REPLY)
				child_fail("random requests: answer type %u", (unsigned int)h.type);
			for (k = 0; k < h.count; k++) {
				struct coffer_rep rep;

				memcpy(&rep, rb + 16 + k * 32, sizeof(rep));
				if (rep.tag < 1000 || rep.tag >= 1000 + n)
					child_fail("random requests: reply tag %llu not ours",
						   (unsigned long long)rep.tag);
				if (coffer__rep_check(&rep, ops[rep.tag - 1000], c.segment,
						      c.arena_bytes) != 0)
					child_fail(
					    "random requests: reply fails the client's "
					    "validator (op %u status %d offset %llu size %llu)",
					    ops[rep.tag - 1000], rep.status,
					    (unsigned long long)rep.offset,
					    (unsigned long long)rep.size);
			}
			got += h.count;
		}
		if (got == 0)
			child_fail("random requests: no answer within %d ms", WAIT_MS);
		rc_close(&c);
		break;
	}
	case A_RING: {
		struct rc_chan ch;
		uint32_t entries, k, n, kind = (uint32_t)(rel_rand(s) % 4);
		struct coffer_rep reps[64];
		uint64_t one8 = 1;

		connect_or_fail(&c, sock);
		if (rc_chan_open(&c, &ch, 16) != 0)
			child_fail("ring: channel open");
		entries = ch.entries;
		if (kind == 0) { /* random entries, published properly */
			n = 1 + (uint32_t)(rel_rand(s) % entries);
			for (k = 0; k < n; k++) {
				unsigned char *e = (unsigned char *)&ch.reqs[k];
				uint32_t b;

				for (b = 0; b < 64; b++)
					e[b] = (unsigned char)rel_rand(s);
				if (rel_rand(s) & 1) { /* known op, no timeout: answered now */
					ch.reqs[k].op = (uint16_t)(1 + rel_rand(s) % COFFER_OP_MAX);
					ch.reqs[k].timeout_us = 0;
				}
			}
			ch.prod = n;
			__atomic_store_n(&ch.shm->req.prod, n, __ATOMIC_RELEASE);
			__atomic_thread_fence(__ATOMIC_SEQ_CST);
			(void)!write(ch.req_efd, &one8, 8);
			/* every request is answered (gets with garbage timeouts may wait) */
			(void)rc_chan_wait(&ch, reps, 1, WAIT_MS);
			still_usable(&c, "ring-garbage");
		} else if (kind == 1) { /* prod far past cons */
			__atomic_store_n(&ch.shm->req.prod, entries + 1 + (uint32_t)rel_rand(s),
					 __ATOMIC_RELEASE);
			(void)!write(ch.req_efd, &one8, 8);
			expect_fatal(&c, -EPROTO, "ring prod corrupt");
			rc_chan_unmap(&ch);
			break;
		} else if (kind == 2) { /* reply cons moved past prod, then a request */
			rc_req_init(&c, &r, COFFER_OP_CONTAINS, 1);
			__atomic_store_n(&ch.shm->rep.cons, 5 + (uint32_t)(rel_rand(s) % 1000),
					 __ATOMIC_RELEASE);
			(void)rc_chan_submit(&ch, &r, 1);
			(void)!write(ch.req_efd, &one8, 8);
			expect_fatal(&c, -EPROTO, "ring reply cons corrupt");
			rc_chan_unmap(&ch);
			break;
		} else { /* doorbell spam and a sleeping flag of garbage, nothing in the ring */
			for (k = 0; k < 2000; k++)
				(void)!write(ch.req_efd, &one8, 8);
			__atomic_store_n(&ch.shm->rep.consumer_sleeping, (uint32_t)rel_rand(s),
					 __ATOMIC_RELAXED);
			rc_req_init(&c, &r, COFFER_OP_CONTAINS, 1);
			(void)rc_chan_submit(&ch, &r, 1);
			if (rc_chan_wait(&ch, reps, 1, WAIT_MS) != 1 || reps[0].tag != r.tag)
				child_fail("ring: no reply after doorbell spam");
			still_usable(&c, "doorbell spam");
		}
		rc_chan_unmap(&ch);
		rc_close(&c);
		break;
	}
	default:
		break;
	}
}

static void attacker(unsigned int me, const char *sock, uint64_t seed)
{
	uint64_t s = seed;
	unsigned int it;

	for (it = 0; it < g_iters; it++) {
		enum attack a = (enum attack)(rel_rand(&s) % A_NKINDS);

		attack(a, sock, me, it, &s);
		__atomic_fetch_add(&g_sh->done[a], 1, __ATOMIC_RELAXED);
	}
	_exit(0);
}

/* The well-behaved client: libcoffer puts, reads back, verifies, deletes its oldest. */
static void good_client(const char *sock, uint64_t seed)
{
	uint64_t s = seed, n = 0, sizes[GOOD_KEEP];
	coffer_handle_t c, oh;
	struct coffer_oid oid;
	int rc;

	if ((rc = coffer_connect(sock, &c)) != 0)
		child_fail("good client: connect: %s", coffer_strerror(rc));
	while (!__atomic_load_n(&g_sh->stop, __ATOMIC_ACQUIRE)) {
		uint64_t k = n % GOOD_KEEP, id = (4ull << 40) + 1 + k;
		const void *cp;
		uint64_t size;
		void *p;

		if (n >= GOOD_KEEP) { /* delete the object that used this slot */
			rel_oid(&oid, id);
			if ((rc = coffer_obj_delete(c, &oid, NULL)) != 0)
				child_fail("good client: delete: %s", coffer_strerror(rc));
		}
		rel_oid(&oid, id);
		sizes[k] = rel_rand(&s) % 100000;
		if ((rc = coffer_obj_open(c, &oid, 0, &oh)) != 0 ||
		    (rc = coffer_obj_create(oh, sizes[k], 0, &p, NULL)) != 0)
			child_fail("good client: create: %s", coffer_strerror(rc));
		rel_fill(p, sizes[k], rel_rand(&s));
		if ((rc = coffer_obj_seal(oh, COFFER_SEAL_RELEASE, NULL)) != 0)
			child_fail("good client: seal: %s", coffer_strerror(rc));
		coffer_obj_close(oh);
		n++;
		k = rel_rand(&s) % (n < GOOD_KEEP ? n : GOOD_KEEP);
		rel_oid(&oid, (4ull << 40) + 1 + k);
		if ((rc = coffer_obj_open(c, &oid, 0, &oh)) != 0 ||
		    (rc = coffer_obj_get(oh, 0, &cp, &size, NULL)) != 0)
			child_fail("good client: get: %s", coffer_strerror(rc));
		if (size != sizes[k] || rel_verify(cp, size) != 0)
			child_fail("good client: object %llu corrupt", (unsigned long long)k);
		if ((rc = coffer_obj_release(oh, NULL)) != 0)
			child_fail("good client: release: %s", coffer_strerror(rc));
		coffer_obj_close(oh);
		__atomic_fetch_add(&g_sh->good_ops, 1, __ATOMIC_RELAXED);
	}
	for (n = 0; n < GOOD_KEEP; n++) {
		rel_oid(&oid, (4ull << 40) + 1 + n);
		(void)coffer_obj_delete(c, &oid, NULL);
	}
	coffer_disconnect(c);
	_exit(0);
}

static void test_hostile_clients(void **state)
{
	const char *args[] = {"-m", "32M", NULL};
	struct coffer_store_info info;
	struct rc_store *stp = &g_store;
	struct rc_conn c;
	pid_t good, att[ATTACKERS];
	uint64_t s = g_seed;
	int fds0, status, i;
	long t0 = rel_now_ms();

	(void)state;
	g_sh = mmap(NULL, sizeof(*g_sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(g_sh != MAP_FAILED);
	memset(g_sh, 0, sizeof(*g_sh));
	assert_int_equal(rc_store_start(stp, args), 0);
	assert_int_equal(rc_connect(&c, stp->sock), 0);
	fds0 = rc_count_fds(stp->pid);

	good = fork();
	assert_true(good >= 0);
	g_children[ATTACKERS] = good;
	if (good == 0) {
		rc_close(&c);
		good_client(stp->sock, rel_rand(&s));
	}
	for (i = 0; i < ATTACKERS; i++) {
		uint64_t as = rel_rand(&s) ^ (uint64_t)i;

		att[i] = fork();
		assert_true(att[i] >= 0);
		g_children[i] = att[i];
		if (att[i] == 0) {
			rc_close(&c);
			signal(SIGPIPE, SIG_IGN); /* sends to a closed socket: EPIPE, not death */
			attacker((unsigned int)i, stp->sock, as);
		}
	}
	for (i = 0; i < ATTACKERS; i++) {
		assert_int_equal(waitpid(att[i], &status, 0), att[i]);
		g_children[i] = 0;
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			fail_msg("attacker %d: %s", i, g_sh->msg);
		assert_true(rc_store_alive(stp));
	}
	__atomic_store_n(&g_sh->stop, 1, __ATOMIC_RELEASE);
	assert_int_equal(waitpid(good, &status, 0), good);
	g_children[ATTACKERS] = 0;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("the well-behaved client saw an error: %s", g_sh->msg);
	assert_true(g_sh->good_ops > 0);

	/* Baseline: one client (us), nothing used, the fds we started with. */
	for (i = 0; i < 1000; i++) {
		assert_int_equal(rc_query(&c, &info), 0);
		if (info.clients == 1 && info.used_bytes == 0 && rc_count_fds(stp->pid) == fds0)
			break;
		rel_sleep_us(5000);
	}
	printf("badinput_test: %u x %d hostile iterations in %.1f s (seed %llu):", g_iters,
	       ATTACKERS, (double)(rel_now_ms() - t0) / 1000.0, (unsigned long long)g_seed);
	for (i = 0; i < A_NKINDS; i++)
		printf(" %s=%ld", attack_name[i], g_sh->done[i]);
	printf("; good client ops %ld; store: clients %llu, used %llu, fds %d -> %d\n",
	       g_sh->good_ops, (unsigned long long)info.clients,
	       (unsigned long long)info.used_bytes, fds0, rc_count_fds(stp->pid));
	assert_int_equal(info.clients, 1);
	assert_int_equal(info.used_bytes, 0);
	assert_int_equal(info.objects_created + info.objects_sealed, 0);
	assert_int_equal(rc_count_fds(stp->pid), fds0);
	rc_close(&c);
	assert_int_equal(rc_store_stop(stp), 0);
	munmap(g_sh, sizeof(*g_sh));
}

/* After a failed assertion: never leave a child (or, through rc_store, a store) running. */
static int teardown(void **state)
{
	int i, status;

	(void)state;
	for (i = 0; i <= ATTACKERS; i++)
		if (g_children[i] > 0) {
			kill(g_children[i], SIGKILL);
			waitpid(g_children[i], &status, 0);
			g_children[i] = 0;
		}
	if (g_store.pid > 0)
		(void)rc_store_stop(&g_store);
	return 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_hostile_clients, teardown)};
	const char *env = getenv("REL_BAD_ITERS");

	if (getenv("COFFER_STORE_EXE") == NULL) {
		printf("skip: COFFER_STORE_EXE is not set\n");
		return 77;
	}
	if (env != NULL && *env != '\0')
		g_iters = (unsigned int)strtoul(env, NULL, 10);
	if (argc > 1)
		g_iters = (unsigned int)strtoul(argv[1], NULL, 10);
	g_seed = argc > 2 ? strtoull(argv[2], NULL, 0) : rel_seed();
	if (g_seed == 0)
		g_seed = 1;
	printf("badinput_test: seed %llu (replay: badinput_test %u %llu)\n",
	       (unsigned long long)g_seed, g_iters, (unsigned long long)g_seed);
	fflush(stdout);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
