/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/store/badinput_test.c - a live coffer-store fed truncated, oversized, wrong-version,
 * wrong-count, wrong-type, out-of-order, fd-carrying and random messages, and random ring
 * entries (issue 9 "bad input"). Each bad message gets an error reply (per-request -EINVAL,
 * a non-fatal ERROR) or an ERROR followed by closing only that client; a well-behaved client
 * beside it keeps working, and at the end the store's used bytes, clients and fds are back
 * to their baseline. Rounds of random input: argv[1] (default 300).
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/store/rawclient.h"
#include "tools/log.h"

static int rounds = 300;

struct fx {
	struct rc_store st;
	struct rc_conn good;
	int fds0;
};

static int setup_args(void **state, const char *const *args)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (f == NULL || rc_store_start(&f->st, args) != 0)
		return -1;
	if (rc_connect(&f->good, f->st.sock) != 0)
		return -1;
	f->fds0 = rc_count_fds(f->st.pid);
	*state = f;
	return 0;
}

static int setup(void **state)
{
	static const char *const args[] = {"-m", "8M", "--hugepages=off", NULL};

	return setup_args(state, args);
}

/* -v: the store logs its warnings (rc_store_start's -q would hide them) */
static int setup_verbose(void **state)
{
	static const char *const args[] = {"-m", "8M", "--hugepages=off", "-v", NULL};

	return setup_args(state, args);
}

static void good_client_works(struct fx *f)
{
	struct coffer_store_info info;

	assert_int_equal(rc_put(&f->good, 77, 100, 1), 0);
	assert_int_equal(rc_contains(&f->good, 77), 1);
	assert_int_equal(rc_delete(&f->good, 77), 0);
	assert_int_equal(rc_query(&f->good, &info), 0);
	/* used_bytes is checked in teardown, once closed clients have been reaped (a
	 * disconnect is processed asynchronously). */
	assert_true(info.used_bytes <= info.capacity_bytes);
}

static int teardown(void **state)
{
	struct fx *f = *state;
	struct coffer_store_info info;
	int i, rc;

	/* Closed clients are reaped asynchronously: wait for the baseline. */
	for (i = 0; i < 500; i++) {
		assert_int_equal(rc_query(&f->good, &info), 0);
		if (info.clients == 1 && rc_count_fds(f->st.pid) == f->fds0)
			break;
		usleep(2000);
	}
	assert_int_equal(info.clients, 1);
	assert_int_equal(info.used_bytes, 0);
	assert_int_equal(info.objects_created, 0);
	assert_int_equal(rc_count_fds(f->st.pid), f->fds0);
	rc_close(&f->good);
	rc = rc_store_stop(&f->st);
	free(f);
	assert_int_equal(rc, 0);
	return 0;
}

/* Send @buf on a fresh connection (after HELLO when @hello); expect ERROR @status, then EOF. */
static void expect_fatal(struct fx *f, int hello, const void *buf, size_t len, const int *fds,
			 unsigned int nfds, int status)
{
	unsigned char rbuf[512];
	struct coffer_msg_hdr h;
	struct coffer_msg_error e;
	struct rc_conn c;
	long n;

	if (hello)
		assert_int_equal(rc_connect(&c, f->st.sock), 0);
	else
		assert_int_equal(rc_connect_raw(&c, f->st.sock), 0);
	assert_int_equal(rc_send_raw(&c, buf, len, fds, nfds), 0);
	n = rc_recv_msg(&c, rbuf, sizeof(rbuf), NULL, NULL, 5000);
	assert_true(n > 0);
	assert_int_equal(coffer__msg_check(rbuf, (size_t)n, &h), 0);
	assert_int_equal(h.type, COFFER_MSG_ERROR);
	memcpy(&e, rbuf + sizeof(h), sizeof(e));
	assert_int_equal(e.status, status);
	assert_true(memchr(e.message, '\0', sizeof(e.message)) != NULL);
	assert_int_equal(rc_recv_msg(&c, rbuf, sizeof(rbuf), NULL, NULL, 5000), 0); /* closed */
	rc_close(&c);
	good_client_works(f);
}

static void test_framing_violations(void **state)
{
	struct fx *f = *state;
	static unsigned char big[COFFER_MSG_MAX_BYTES + 100];
	unsigned char buf[256];
	struct coffer_msg_hdr h;
	int p[2];

	coffer__msg_hdr_init(&h, COFFER_MSG_QUERY, 0, sizeof(h));
	memcpy(buf, &h, sizeof(h));
	expect_fatal(f, 0, buf, 8, NULL, 0, -EPROTO); /* truncated header */
	/* oversized */
	coffer__msg_hdr_init(&h, COFFER_MSG_REQUEST, 256, sizeof(big));
	memcpy(big, &h, sizeof(h));
	expect_fatal(f, 1, big, sizeof(big), NULL, 0, -EPROTO);
	/* wrong version */
	coffer__msg_hdr_init(&h, COFFER_MSG_HELLO, 0, sizeof(h));
	h.version = 9;
	expect_fatal(f, 0, &h, sizeof(h), NULL, 0, -EPROTONOSUPPORT);
	/* wrong magic */
	coffer__msg_hdr_init(&h, COFFER_MSG_HELLO, 0, sizeof(h));
	h.magic = 0x12345678;
	expect_fatal(f, 0, &h, sizeof(h), NULL, 0, -EPROTO);
	/* wrong count for the length */
	coffer__msg_hdr_init(&h, COFFER_MSG_REQUEST, 2, sizeof(h) + 64);
	memset(buf, 0, sizeof(buf));
	memcpy(buf, &h, sizeof(h));
	expect_fatal(f, 1, buf, sizeof(h) + 64, NULL, 0, -EPROTO);
	/* length field lies */
	coffer__msg_hdr_init(&h, COFFER_MSG_REQUEST, 1, sizeof(h) + 128);
	memcpy(buf, &h, sizeof(h));
	expect_fatal(f, 1, buf, sizeof(h) + 64, NULL, 0, -EPROTO);
	/* unknown type, and a store->client type */
	coffer__msg_hdr_init(&h, 77, 0, sizeof(h));
	expect_fatal(f, 1, &h, sizeof(h), NULL, 0, -EPROTO);
	coffer__msg_hdr_init(&h, COFFER_MSG_REPLY, 1, sizeof(h) + 32);
	memset(buf, 0, sizeof(buf));
	memcpy(buf, &h, sizeof(h));
	expect_fatal(f, 1, buf, sizeof(h) + 32, NULL, 0, -EPROTO);
	/* REQUEST before HELLO; HELLO twice */
	coffer__msg_hdr_init(&h, COFFER_MSG_REQUEST, 1, sizeof(h) + 64);
	memcpy(buf, &h, sizeof(h));
	expect_fatal(f, 0, buf, sizeof(h) + 64, NULL, 0, -EPROTO);
	coffer__msg_hdr_init(&h, COFFER_MSG_HELLO, 0, sizeof(h));
	expect_fatal(f, 1, &h, sizeof(h), NULL, 0, -EPROTO);
	/* fds with a message that takes none: closed, never leaked */
	assert_int_equal(pipe(p), 0);
	coffer__msg_hdr_init(&h, COFFER_MSG_QUERY, 0, sizeof(h));
	expect_fatal(f, 1, &h, sizeof(h), p, 2, -EPROTO);
	close(p[0]);
	close(p[1]);
}

static void test_nonfatal_errors(void **state)
{
	struct fx *f = *state;
	unsigned char buf[256];
	struct coffer_msg_hdr h;
	struct coffer_chan_open o = {.ring_entries = 100};
	struct coffer_chan_close cc = {.channel_id = 5};
	struct coffer_req r[3];
	struct coffer_rep rep[3];
	struct rc_conn c;
	int p[2];
	long n;

	assert_int_equal(rc_connect(&c, f->st.sock), 0);
	/* ring size not a power of two */
	coffer__msg_hdr_init(&h, COFFER_MSG_CHANNEL_OPEN, 0, sizeof(h) + sizeof(o));
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), &o, sizeof(o));
	assert_int_equal(pipe(p), 0);
	assert_int_equal(rc_send_raw(&c, buf, sizeof(h) + sizeof(o), p, 1), 0);
	n = rc_recv_msg(&c, buf, sizeof(buf), NULL, NULL, 5000);
	assert_true(n > 0);
	assert_int_equal(coffer__msg_check(buf, (size_t)n, &h), 0);
	assert_int_equal(h.type, COFFER_MSG_ERROR);
	/* a pipe is not an eventfd */
	o.ring_entries = 16;
	coffer__msg_hdr_init(&h, COFFER_MSG_CHANNEL_OPEN, 0, sizeof(h) + sizeof(o));
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), &o, sizeof(o));
	assert_int_equal(rc_send_raw(&c, buf, sizeof(h) + sizeof(o), p, 1), 0);
	n = rc_recv_msg(&c, buf, sizeof(buf), NULL, NULL, 5000);
	assert_true(n > 0);
	assert_int_equal(coffer__msg_check(buf, (size_t)n, &h), 0);
	assert_int_equal(h.type, COFFER_MSG_ERROR);
	close(p[0]);
	close(p[1]);
	/* closing a channel that does not exist */
	coffer__msg_hdr_init(&h, COFFER_MSG_CHANNEL_CLOSE, 0, sizeof(h) + sizeof(cc));
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), &cc, sizeof(cc));
	assert_int_equal(rc_send_raw(&c, buf, sizeof(h) + sizeof(cc), NULL, 0), 0);
	n = rc_recv_msg(&c, buf, sizeof(buf), NULL, NULL, 5000);
	assert_true(n > 0);
	assert_int_equal(coffer__msg_check(buf, (size_t)n, &h), 0);
	assert_int_equal(h.type, COFFER_MSG_ERROR);
	/* bad fields and wrong ownership: per-request errors, connection stays */
	rc_req_init(&c, &r[0], 99, 1);
	rc_req_init(&c, &r[1], COFFER_OP_SEAL, 1);
	r[1].flags = 0x80;
	rc_req_init(&c, &r[2], COFFER_OP_RELEASE, 1); /* holds nothing */
	assert_int_equal(rc_batch(&c, r, 3, rep, 3, 5000), 3);
	assert_int_equal(rep[0].status, -EINVAL);
	assert_int_equal(rep[1].status, -EINVAL);
	assert_int_equal(rep[2].status, -ENOENT);
	assert_int_equal(rc_put(&f->good, 1, 64, 1), 0);
	assert_int_equal(rc_release(&c, 1), -ENOENT); /* not its reference */
	assert_int_equal(rc_abort(&c, 1), -EALREADY);
	assert_int_equal(rc_contains(&c, 1), 1);
	assert_int_equal(rc_delete(&f->good, 1), 0);
	rc_close(&c);
	good_client_works(f);
}

static uint64_t rnd_state = 0x243f6a8885a308d3ull;

static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

static void test_random_messages(void **state)
{
	static unsigned char buf[COFFER_MSG_MAX_BYTES + 64];
	struct fx *f = *state;
	int i, closed = 0, answered = 0;

	for (i = 0; i < rounds; i++) {
		struct rc_conn c;
		size_t len = (size_t)(rnd() % (rnd() % 4 == 0 ? sizeof(buf) : 300));
		size_t k;
		long n;

		for (k = 0; k < len; k++)
			buf[k] = (unsigned char)rnd();
		if (len >= sizeof(struct coffer_msg_hdr) && rnd() % 2 == 0) {
			/* A plausible header over random content reaches deeper code. */
			struct coffer_msg_hdr h;

			coffer__msg_hdr_init(&h, (uint16_t)(1 + rnd() % 12),
					     (uint32_t)((len - 16) / 64), (uint32_t)len);
			memcpy(buf, &h, sizeof(h));
		}
		assert_int_equal(
		    rnd() % 2 ? rc_connect(&c, f->st.sock) : rc_connect_raw(&c, f->st.sock), 0);
		if (rc_send_raw(&c, buf, len, NULL, 0) != 0) {
			rc_close(&c);
			continue;
		}
		n = rc_recv_msg(&c, buf, sizeof(buf), NULL, NULL, 2000);
		assert_true(n != -ETIMEDOUT || len == 0 || 1); /* some valid requests wait */
		if (n == 0)
			closed++;
		else if (n > 0)
			answered++;
		rc_close(&c);
		if (i % 50 == 0)
			good_client_works(f);
	}
	fprintf(stderr, "random messages: %d rounds, %d answered, %d closed by the store\n", rounds,
		answered, closed);
	assert_true(rc_store_alive(&f->st));
	good_client_works(f);
}

static void test_random_ring_entries(void **state)
{
	struct fx *f = *state;
	struct coffer_req r[64];
	struct coffer_rep rep[64];
	struct rc_conn c;
	struct rc_chan ch;
	int i, round;
	/* objects a random PUT sealed (it hit one of the client's reservations): they stay
	 * after the client leaves, as a sealed object should; deleted at the end */
	uint8_t(*put_oids)[COFFER_OID_SIZE] =
	    calloc((size_t)(rounds / 10 + 1) * 64, COFFER_OID_SIZE);
	unsigned int nput = 0;

	assert_non_null(put_oids);
	assert_int_equal(rc_connect(&c, f->st.sock), 0);
	assert_int_equal(rc_chan_open(&c, &ch, 64), 0);
	for (round = 0; round < rounds / 10 + 1; round++) {
		int got;

		for (i = 0; i < 64; i++) {
			unsigned char *b = (unsigned char *)&r[i];
			size_t k;

			for (k = 0; k < sizeof(r[i]); k++)
				b[k] = (unsigned char)rnd();
			if (rnd() % 2 == 0) { /* mostly-valid: real op, random rest */
				r[i].op = (uint16_t)(1 + rnd() % COFFER_OP_MAX);
				r[i].rsvd0 = r[i].rsvd1 = 0;
				r[i].flags &= 1;
				r[i].timeout_us = 0;
				if (r[i].op != COFFER_OP_CREATE && r[i].op != COFFER_OP_RESERVE &&
				    r[i].op != COFFER_OP_PUT)
					r[i].size = 0;
				else
					r[i].size %= 4096;
				/* PUT/UNRESERVE: a 64-byte aligned offset in the first 1 MiB,
				 * which may or may not be a reservation of this client */
				if (r[i].op != COFFER_OP_PUT && r[i].op != COFFER_OP_UNRESERVE)
					r[i].offset = 0;
				else
					r[i].offset &= (1u << 20) - 64;
				if (r[i].op == COFFER_OP_RESERVE || r[i].op == COFFER_OP_UNRESERVE)
					memset(r[i].oid, 0, sizeof(r[i].oid));
			}
		}
		assert_int_equal(rc_chan_submit(&ch, r, 64), 0);
		got = rc_chan_wait(&ch, rep, 64, 5000);
		assert_int_equal(got, 64); /* every request answered, in order */
		for (i = 0; i < 64; i++) {
			assert_int_equal(rep[i].tag, r[i].tag);
			assert_true(rep[i].status <= 0);
			if (rep[i].status == 0 &&
			    (r[i].op == COFFER_OP_CREATE || r[i].op == COFFER_OP_GET ||
			     r[i].op == COFFER_OP_RESERVE))
				assert_true(rep[i].offset + r[i].size <= c.arena_bytes);
			if (rep[i].status == 0 && r[i].op == COFFER_OP_PUT)
				memcpy(put_oids[nput++], r[i].oid, COFFER_OID_SIZE);
		}
	}
	rc_chan_unmap(&ch);
	rc_close(&c); /* its created objects are aborted, reservations freed, references released */
	for (unsigned int k = 0; k < nput; k++) {
		struct coffer_req d;
		struct coffer_rep dr;

		rc_req_init(&f->good, &d, COFFER_OP_DELETE, 0);
		memcpy(d.oid, put_oids[k], COFFER_OID_SIZE);
		assert_int_equal(rc_batch(&f->good, &d, 1, &dr, 1, 5000), 1);
		assert_true(dr.status == 0 || dr.status == -ENOENT); /* -ENOENT: put twice */
	}
	free(put_oids);
	good_client_works(f);
}

/*
 * Ring groups over few ObjectIDs: two clients each submit 64 requests at a time on 8 IDs -
 * create (sizes up to 2 MiB of the 8 MiB arena, so creates evict), seal with or without
 * release, abort, get (some waiting 1 ms), release, delete, reserve, put, unreserve - so
 * that one drained group (tools/store.c: up to 32 requests prefetched together) creates,
 * seals, evicts, deletes and re-creates the same IDs, and the other client races on them
 * between groups; one client now and then disconnects with requests in its ring. Every
 * request is answered once with a status its op may give; at the end, once every
 * client has gone and the IDs are deleted, teardown finds no byte used and no object
 * created (a reference miscounted would pin an old version's bytes).
 */
static void test_ring_groups_few_ids(void **state)
{
	struct fx *f = *state;
	struct coffer_req r[2][64];
	struct coffer_rep rep[64];
	struct rc_conn c[2];
	struct rc_chan ch[2];
	struct coffer_store_info info;
	int round, k, i;

	for (k = 0; k < 2; k++) {
		assert_int_equal(rc_connect(&c[k], f->st.sock), 0);
		assert_int_equal(rc_chan_open(&c[k], &ch[k], 64), 0);
	}
	for (round = 0; round < rounds / 3 + 1; round++) {
		for (k = 0; k < 2; k++) {
			for (i = 0; i < 64; i++) {
				static const uint16_t ops[] = {
				    COFFER_OP_CREATE,	COFFER_OP_CREATE,  COFFER_OP_SEAL,
				    COFFER_OP_SEAL,	COFFER_OP_ABORT,   COFFER_OP_GET,
				    COFFER_OP_GET,	COFFER_OP_RELEASE, COFFER_OP_RELEASE,
				    COFFER_OP_DELETE,	COFFER_OP_RESERVE, COFFER_OP_PUT,
				    COFFER_OP_UNRESERVE};
				struct coffer_req *q = &r[k][i];

				rc_req_init(&c[k], q, ops[rnd() % (sizeof(ops) / sizeof(ops[0]))],
					    1 + rnd() % 8);
				if (q->op == COFFER_OP_CREATE || q->op == COFFER_OP_RESERVE ||
				    q->op == COFFER_OP_PUT)
					q->size = 1 + rnd() % (2u << 20);
				if (q->op == COFFER_OP_PUT)
					q->size = 1 + rnd() % 4096;
				if (q->op == COFFER_OP_CREATE || q->op == COFFER_OP_SEAL ||
				    q->op == COFFER_OP_PUT)
					q->flags = (uint16_t)(rnd() & 1);
				if (q->op == COFFER_OP_GET && rnd() % 4 == 0)
					q->timeout_us = 1000;
				if (q->op == COFFER_OP_PUT || q->op == COFFER_OP_UNRESERVE)
					q->offset = (rnd() % (8u << 20)) & ~(uint64_t)63;
				if (q->op == COFFER_OP_RESERVE || q->op == COFFER_OP_UNRESERVE)
					memset(q->oid, 0, sizeof(q->oid));
			}
			assert_int_equal(rc_chan_submit(&ch[k], r[k], 64), 0);
		}
		for (k = 0; k < 2; k++) {
			bool seen[64] = {false};

			if (round % 16 == 15 && k == 1) {
				/* gone with its ring full: created objects aborted, references
				 * released, whatever it had not been answered yet dropped */
				rc_chan_unmap(&ch[k]);
				rc_close(&c[k]);
				assert_int_equal(rc_connect(&c[k], f->st.sock), 0);
				assert_int_equal(rc_chan_open(&c[k], &ch[k], 64), 0);
				continue;
			}
			assert_int_equal(rc_chan_wait(&ch[k], rep, 64, 10000), 64);
			for (i = 0; i < 64; i++) {
				int st = rep[i].status;
				/* a waiting get is answered when it is, the rest in order */
				uint64_t j = rep[i].tag - r[k][0].tag;

				assert_true(j < 64 && !seen[j]);
				seen[j] = true;
				assert_true(st <= 0);
				switch (r[k][j].op) {
				case COFFER_OP_CREATE:
					assert_true(st == 0 || st == -EEXIST || st == -ENOMEM);
					break;
				case COFFER_OP_SEAL:
				case COFFER_OP_ABORT:
					assert_true(st == 0 || st == -ENOENT || st == -EPERM ||
						    st == -EALREADY);
					break;
				case COFFER_OP_GET:
				case COFFER_OP_RELEASE:
					assert_true(st == 0 || st == -ENOENT);
					break;
				case COFFER_OP_DELETE:
					assert_true(st == 0 || st == -ENOENT || st == -EBUSY);
					break;
				default:
					assert_true(st == 0 || st == -ENOENT || st == -ENOMEM ||
						    st == -EINVAL || st == -EEXIST);
					break;
				}
				if (st == 0 &&
				    (r[k][i].op == COFFER_OP_CREATE || r[k][i].op == COFFER_OP_GET))
					assert_true(rep[i].offset + rep[i].size <=
						    c[k].arena_bytes);
			}
		}
	}
	/* the mix reached what it is for: creates that evicted */
	assert_int_equal(rc_query(&f->good, &info), 0);
	fprintf(stderr, "ring groups: %d rounds, %llu evictions\n", round,
		(unsigned long long)info.evictions);
	assert_true(info.evictions > 0);
	for (k = 0; k < 2; k++) {
		rc_chan_unmap(&ch[k]);
		rc_close(&c[k]);
	}
	assert_true(rc_store_alive(&f->st));
	/* the clients' disconnects are processed asynchronously; a delete is -EBUSY only
	 * while an unsealed version (aborted when its creator's disconnect is processed) */
	for (uint64_t id = 1; id <= 8; id++) {
		int rc;

		for (i = 0; i < 500 && (rc = rc_delete(&f->good, id)) == -EBUSY; i++)
			usleep(2000);
		assert_true(rc == 0 || rc == -ENOENT);
	}
	good_client_works(f);
}

/*
 * A client that keeps violating the protocol cannot flood the store's log: the WARN line per
 * violation is rate limited per call site (tools/log.h), and the store keeps answering.
 */
static void test_violation_log_rate_limited(void **state)
{
	struct fx *f = *state;
	unsigned char buf[sizeof(struct coffer_msg_hdr)];
	struct coffer_msg_hdr h;
	char path[128], line[600];
	unsigned int warned = 0;
	struct timespec t0, t1;
	FILE *log;

	coffer__msg_hdr_init(&h, COFFER_MSG_QUERY, 0, sizeof(h));
	memcpy(buf, &h, sizeof(h));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < 3 * COFFER_LOG_RL_BURST; i++)
		expect_fatal(f, 0, buf, 8, NULL, 0, -EPROTO); /* truncated header */
	clock_gettime(CLOCK_MONOTONIC, &t1);
	snprintf(path, sizeof(path), "%s/store.log", f->st.dir);
	log = fopen(path, "r");
	assert_non_null(log);
	while (fgets(line, sizeof(line), log) != NULL)
		if (strstr(line, " W client pid ") != NULL)
			warned++;
	fclose(log);
	/* one burst per started window; normally all 30 fall in the first one */
	if (t1.tv_sec - t0.tv_sec < 4)
		assert_int_equal(warned, COFFER_LOG_RL_BURST);
	else
		assert_true(warned >= 1 &&
			    warned <= COFFER_LOG_RL_BURST *
					  (2 + (unsigned int)(t1.tv_sec - t0.tv_sec) /
						   (COFFER_LOG_RL_WINDOW_US / 1000000u)));
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_framing_violations, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_nonfatal_errors, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_random_messages, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_random_ring_entries, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ring_groups_few_ids, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_violation_log_rate_limited, setup_verbose,
					    teardown),
	};

	if (argc > 1)
		rounds = atoi(argv[1]);
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
