/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/store/nomem_test.c - a real store (coffer-store-nomem, tests/store/nomem_wrap.c)
 * whose allocations fail for a while: it keeps serving the clients it has, tells the ones it
 * cannot take why, and is whole again once memory is back.
 *  - A get waiting on the socket is woken while the store cannot allocate: the client gets
 *    its reply (the object, or -ENOMEM) and keeps its connection; it is not closed for the
 *    store's shortage.
 *  - A client connecting during the shortage gets an ERROR message -ENOMEM, not bare EOF
 *    (coffer_connect(): -ENOMEM).
 *  - A socket get that would wait, asked during the shortage, is answered -ENOMEM; one of
 *    a present, sealed object is answered with the object (it needs no reply buffer).
 *  - Afterwards every client works, new ones connect, and the store exits cleanly (its
 *    sanitizer build checks for leaks at exit).
 *  - A client that stops reading its socket during the shortage keeps its connection: the
 *    reply that found its socket full, and a deferred get reply that comes meanwhile, wait
 *    in memory reserved beforehand and reach it once it reads (the store used to allocate
 *    them then, and closed the client when it could not); a REQUEST whose reply has no
 *    reserve yet is read once memory is back, not refused by closing the client.
 *  - Likewise at the store's open-file limit (fcntl(F_DUPFD_CLOEXEC) failing): a
 *    CHANNEL_OPEN_REPLY its full socket holds keeps its fd without a copy.
 * And a store that cannot watch another connection (epoll_ctl ENOSPC: the user's
 * fs.epoll.max_user_watches) refuses it with ERROR -ENOSPC (coffer_connect(): -ENOSPC) and
 * keeps serving the others.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <linux/sockios.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include <coffer/store.h>

#include "tests/store/rawclient.h"

static char g_dir[64], g_flag[128], g_watch[128], g_nodup[128];
static struct rc_store st; /* stopped by teardown() if the test fails */

static void shortage(bool on)
{
	if (on) {
		FILE *f = fopen(g_flag, "w");

		assert_non_null(f);
		fclose(f);
	} else {
		assert_int_equal(unlink(g_flag), 0);
	}
}

/*
 * Starts the store (@args) in a fresh g_dir with one failure injector armed by file: @var
 * (COFFER_TEST_NOMEM_FILE, COFFER_TEST_NOWATCH_FILE or COFFER_TEST_NODUP_FILE) names @flag,
 * g_dir/@name (128 bytes), and the other two are unset. The injector fails the store's
 * allocations, epoll watches or dups while that file exists.
 */
static void start_with_injector(const char *const *args, const char *var, char flag[128],
				const char *name)
{
	static const char *const vars[] = {"COFFER_TEST_NOMEM_FILE", "COFFER_TEST_NOWATCH_FILE",
					   "COFFER_TEST_NODUP_FILE"};

	strcpy(g_dir, "/tmp/coffer-nomem-XXXXXX");
	assert_non_null(mkdtemp(g_dir));
	snprintf(flag, 128, "%s/%s", g_dir, name);
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		assert_int_equal(
		    strcmp(vars[i], var) == 0 ? setenv(var, flag, 1) : unsetenv(vars[i]), 0);
	assert_int_equal(rc_store_start(&st, args), 0);
}

/* A raw connection to @sock is refused with ERROR @status. */
static void refused_with(const char *sock, int status)
{
	unsigned char buf[512];
	struct coffer_msg_error err;
	struct coffer_msg_hdr h;
	int fds[COFFER_MSG_FDS_MAX];
	unsigned int nfds = 0;
	struct rc_conn c;
	long n;

	assert_int_equal(rc_connect_raw(&c, sock), 0);
	n = rc_recv_msg(&c, buf, sizeof(buf), fds, &nfds, 10000);
	assert_true(n >= (long)(sizeof(h) + sizeof(err)));
	assert_int_equal(coffer__msg_check(buf, (size_t)n, &h), 0);
	assert_int_equal(h.type, COFFER_MSG_ERROR);
	memcpy(&err, buf + sizeof(h), sizeof(err));
	assert_int_equal(err.status, status);
	rc_close(&c);
}

/* coffer_connect() to @sock, refused with ERROR @status, returns @status: one
 * docs/protocol.md gives a refusal answering HELLO, which libcoffer passes on (any other it
 * reports as the broken store's -EPROTO). */
static void lib_refused_with(const char *sock, int status)
{
	coffer_handle_t c;

	assert_int_equal(coffer_connect(sock, &c), status);
}

/* A socket GET of @oidn that waits forever, sent without waiting for its reply. */
static void send_waiting_get(struct rc_conn *c, uint64_t oidn, struct coffer_req *r)
{
	rc_req_init(c, r, COFFER_OP_GET, oidn);
	r->timeout_us = -1;
	assert_int_equal(rc_batch(c, r, 1, NULL, 0, 0), 0);
}

static void test_store_short_of_memory(void **state)
{
	static const char *const args[] = {"-m", "4M", "--hugepages=off", NULL};
	struct coffer_store_info info;
	struct coffer_req get;
	struct coffer_rep rep;
	struct rc_conn a, b, d;

	(void)state;
	start_with_injector(args, "COFFER_TEST_NOMEM_FILE", g_flag, "short");
	assert_int_equal(rc_connect(&a, st.sock), 0);
	assert_int_equal(rc_connect(&b, st.sock), 0);

	/* a's socket get waits for b's object; b seals it during the shortage */
	assert_int_equal(rc_create(&b, 1, 4096, 0, NULL), 0);
	assert_int_equal(rc_put(&b, 6, 4096, 6), 0);
	assert_int_equal(rc_get(&b, 6, 0, NULL, NULL), 0); /* b holds 6; no socket get waited */
	send_waiting_get(&a, 1, &get);
	assert_int_equal(rc_contains(&a, 2), 0); /* the get is taken: replies come in order */
	shortage(true);
	assert_int_equal(rc_seal(&b, 1, COFFER_SEAL_RELEASE), 0);
	assert_int_equal(rc_recv_reps(&a, &rep, 1, 10000), 1);
	assert_int_equal(rep.tag, get.tag);
	assert_true(rep.status == 0 || rep.status == -ENOMEM);

	/* a connection during the shortage is refused with a reason */
	refused_with(st.sock, -ENOMEM);
	lib_refused_with(st.sock, -ENOMEM);

	/* a full connect fails too (-EPROTO, or -EPIPE when the store closed first); a get
	 * that would wait is refused, and b stays connected */
	assert_true(rc_connect(&d, st.sock) < 0);
	assert_int_equal(rc_get(&b, 3, 1000000, NULL, NULL), -ENOMEM);
	/* a get (that could wait) of a present, sealed object is answered: it needs no
	 * deferred-reply buffer (b has none: its get above was refused before any). b holds
	 * object 6 already, so the reference needs no new record either. */
	assert_int_equal(rc_get(&b, 6, 1000000, NULL, NULL), 0);

	shortage(false);
	if (rep.status == 0)
		assert_int_equal(rc_release(&a, 1), 0);
	assert_int_equal(rc_release(&b, 6), 0);
	assert_int_equal(rc_release(&b, 6), 0);
	assert_int_equal(rc_get(&a, 1, 0, NULL, NULL), 0);
	assert_int_equal(rc_release(&a, 1), 0);
	assert_int_equal(rc_get(&b, 4, 1000, NULL, NULL), -ENOENT); /* waits, expires */
	assert_int_equal(rc_connect(&d, st.sock), 0);
	assert_int_equal(rc_put(&d, 5, 64, 1), 0);
	assert_int_equal(rc_query(&a, &info), 0);
	assert_int_equal(info.clients, 3);
	assert_int_equal(info.objects_sealed, 3);
	rc_close(&a);
	rc_close(&b);
	rc_close(&d);
	assert_int_equal(rc_store_stop(&st), 0);
	st.pid = 0;
	rmdir(g_dir);
}

static unsigned int flood_queries(struct rc_conn *c)
{
	struct coffer_msg_hdr h;

	long n;

	coffer__msg_hdr_init(&h, COFFER_MSG_QUERY, 0, sizeof(h));
	n = rc_flood(c, &h, sizeof(h), -1, 1000);
	assert_true(n >= 0);
	return (unsigned int)n;
}

static void test_full_socket_short_of_memory(void **state)
{
	static const char *const args[] = {"-m", "4M", "--hugepages=off", NULL};
	unsigned char buf[COFFER_MSG_MAX_BYTES + 64];
	struct coffer_store_info info;
	struct coffer_req get, req;
	struct coffer_rep rep = {0};
	struct rc_conn a, b, c;
	unsigned int sent, queries = 0, replies = 0;

	(void)state;
	start_with_injector(args, "COFFER_TEST_NOMEM_FILE", g_flag, "short");
	assert_int_equal(rc_connect(&a, st.sock), 0);
	assert_int_equal(rc_connect(&b, st.sock), 0);
	assert_int_equal(rc_connect(&c, st.sock), 0); /* sends no REQUEST before the shortage */
	assert_int_equal(rc_create(&b, 1, 4096, 0, NULL), 0);
	send_waiting_get(&a, 1, &get);
	assert_int_equal(rc_contains(&a, 2), 0); /* the get waits */

	shortage(true);
	/* a stops reading: the store's reply to one of these finds a's socket full */
	sent = flood_queries(&a);
	assert_true(sent > 0);
	/* ... and the get's reply comes while that reply waits */
	assert_int_equal(rc_seal(&b, 1, COFFER_SEAL_RELEASE), 0);
	/* c's first REQUEST has no reply reserve: not read until memory is back */
	rc_req_init(&c, &req, COFFER_OP_CONTAINS, 3);
	assert_int_equal(rc_batch(&c, &req, 1, NULL, 0, 0), 0);

	/* a reads: every query and the get are answered, and a is still connected */
	while (queries < sent || replies < 1) {
		struct coffer_msg_hdr h;
		long n = rc_recv_msg(&a, buf, sizeof(buf), NULL, NULL, 10000);

		assert_true(n > 0); /* 0: the store closed a */
		assert_int_equal(coffer__msg_check(buf, (size_t)n, &h), 0);
		if (h.type == COFFER_MSG_QUERY_REPLY) {
			queries++;
			continue;
		}
		assert_int_equal(h.type, COFFER_MSG_REPLY);
		assert_int_equal(h.count, 1);
		memcpy(&rep, buf + sizeof(h), sizeof(rep));
		assert_int_equal(rep.tag, get.tag);
		assert_true(rep.status == 0 || rep.status == -ENOMEM);
		replies++;
	}
	assert_int_equal(queries, sent);
	assert_int_equal(rc_query(&a, &info), 0);
	assert_int_equal(info.clients, 3);

	shortage(false);
	assert_int_equal(rc_recv_reps(&c, &rep, 1, 10000), 1); /* c read, and answered */
	assert_int_equal(rep.tag, req.tag);
	assert_int_equal(rep.status, 0);
	assert_int_equal(rc_get(&a, 1, 0, NULL, NULL), 0);
	assert_int_equal(rc_release(&a, 1), 0);
	assert_int_equal(rc_query(&b, &info), 0);
	assert_int_equal(info.clients, 3);
	rc_close(&a);
	rc_close(&b);
	rc_close(&c);
	assert_int_equal(rc_store_stop(&st), 0);
	st.pid = 0;
	rmdir(g_dir);
}

/*
 * A client that stops reading while it opens channels, its store at its open-file limit:
 * the CHANNEL_OPEN_REPLY its full socket holds keeps the rings' fd it carries, and the
 * client gets every channel once it reads. The store used to queue a copy (dup) of that fd,
 * and closed the client when it had no fd for the copy.
 */
static void test_full_socket_out_of_fds(void **state)
{
	static const char *const args[] = {"-m", "4M", "--hugepages=off", NULL};
	unsigned char buf[512];
	struct {
		struct coffer_msg_hdr h;
		struct coffer_chan_open o;
	} msg = {.o = {.ring_entries = 8}};
	struct coffer_store_info info;
	struct rc_conn a;
	const int reply_bytes =
	    (int)(sizeof(struct coffer_msg_hdr) + sizeof(struct coffer_chan_open_reply));
	unsigned int sent, opened = 0, refused = 0;
	long n;
	int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), inq = 0;
	FILE *f;

	(void)state;
	assert_true(efd >= 0);
	start_with_injector(args, "COFFER_TEST_NODUP_FILE", g_nodup, "nodup");
	assert_int_equal(rc_connect(&a, st.sock), 0);
	coffer__msg_hdr_init(&msg.h, COFFER_MSG_CHANNEL_OPEN, 0, sizeof(msg));
	f = fopen(g_nodup, "w");
	assert_non_null(f);
	fclose(f);
	n = rc_flood(&a, &msg, sizeof(msg), efd, 1000);
	assert_true(n >= 0);
	sent = (unsigned int)n;
	/* what a has not read: only CHANNEL_OPEN_REPLYs, fewer than a connection's channels,
	 * so the reply the store holds for want of room is one too (with its fd) */
	assert_int_equal(ioctl(a.fd, SIOCINQ, &inq), 0);
	assert_int_equal(inq % reply_bytes, 0);
	assert_true((unsigned int)(inq / reply_bytes) + 1 < COFFER_CHANNELS_MAX);
	while (opened + refused < sent) {
		struct coffer_msg_hdr h;
		int fds[COFFER_MSG_FDS_MAX];
		unsigned int nfds = 0;
		long n = rc_recv_msg(&a, buf, sizeof(buf), fds, &nfds, 10000);

		assert_true(n > 0); /* 0: the store closed a */
		assert_int_equal(coffer__msg_check(buf, (size_t)n, &h), 0);
		if (h.type == COFFER_MSG_ERROR) { /* past COFFER_CHANNELS_MAX: no channel id */
			struct coffer_msg_error e;

			memcpy(&e, buf + sizeof(h), sizeof(e));
			assert_int_equal(e.status, -EMFILE);
			assert_int_equal(nfds, 0);
			refused++;
			continue;
		}
		assert_int_equal(h.type, COFFER_MSG_CHANNEL_OPEN_REPLY);
		assert_int_equal(nfds, 1);
		close(fds[0]);
		opened++;
	}
	assert_int_equal(opened, sent < COFFER_CHANNELS_MAX ? sent : COFFER_CHANNELS_MAX);
	assert_int_equal(rc_query(&a, &info), 0);
	assert_int_equal(info.clients, 1);
	assert_int_equal(unlink(g_nodup), 0);
	rc_close(&a);
	close(efd);
	assert_int_equal(rc_store_stop(&st), 0);
	st.pid = 0;
	rmdir(g_dir);
}

static void test_store_cannot_watch(void **state)
{
	static const char *const args[] = {"-m", "4M", "--hugepages=off", NULL};
	struct coffer_store_info info;
	struct rc_conn a, d;
	FILE *f;

	(void)state;
	start_with_injector(args, "COFFER_TEST_NOWATCH_FILE", g_watch, "nowatch");
	assert_int_equal(rc_connect(&a, st.sock), 0);
	f = fopen(g_watch, "w");
	assert_non_null(f);
	fclose(f);
	refused_with(st.sock, -ENOSPC);
	lib_refused_with(st.sock, -ENOSPC);
	assert_int_equal(rc_put(&a, 1, 64, 1), 0);
	assert_int_equal(unlink(g_watch), 0);
	assert_int_equal(rc_connect(&d, st.sock), 0);
	assert_int_equal(rc_get(&d, 1, 0, NULL, NULL), 0);
	assert_int_equal(rc_query(&a, &info), 0);
	assert_int_equal(info.clients, 2);
	rc_close(&a);
	rc_close(&d);
	assert_int_equal(rc_store_stop(&st), 0);
	st.pid = 0;
	rmdir(g_dir);
}

/* The store's client count, as QUERY on @c tells it (a QUERY's reply needs no memory). */
static uint64_t nclients(struct rc_conn *c)
{
	struct coffer_store_info info;

	assert_int_equal(rc_query(c, &info), 0);
	return info.clients;
}

/* Sends a CONTAINS of @oidn without waiting for its reply; *@tag: its tag. */
static void send_contains(struct rc_conn *c, uint64_t oidn, uint64_t *tag)
{
	struct coffer_req r;

	rc_req_init(c, &r, COFFER_OP_CONTAINS, oidn);
	*tag = r.tag;
	assert_int_equal(rc_batch(c, &r, 1, NULL, 0, 0), 0);
}

/*
 * Clients starved together (each one's first REQUEST has no reply reserve while the store is
 * short of memory: not read until memory is back) are all read again once it is back - one
 * that keeps sending requests does not keep another waiting - and one that disconnects while
 * starved leaves nothing: its session, socket and doorbell go at once, not when memory is
 * back, and the starved list it was on is intact (the others are served).
 */
static void test_starved_clients_served_in_turn(void **state)
{
	static const char *const args[] = {"-m", "4M", "--hugepages=off", NULL};
	enum { MORE = 8 };
	struct rc_conn a, b, c, d;
	struct coffer_rep rep[MORE + 1];
	uint64_t tag_a[MORE + 1], tag_b, tag_c;
	int fds0, i;

	(void)state;
	start_with_injector(args, "COFFER_TEST_NOMEM_FILE", g_flag, "short");
	/* connected before the shortage, none has sent a REQUEST (d only asks QUERY) */
	assert_int_equal(rc_connect(&a, st.sock), 0);
	assert_int_equal(rc_connect(&b, st.sock), 0);
	assert_int_equal(rc_connect(&d, st.sock), 0);
	fds0 = rc_count_fds(st.pid);
	assert_int_equal(rc_connect(&c, st.sock), 0);
	assert_int_equal(rc_put(&d, 1, 64, 1), 0); /* d's own REQUEST, before the shortage */

	shortage(true);
	send_contains(&a, 1, &tag_a[0]); /* starved first */
	send_contains(&c, 1, &tag_c);
	send_contains(&b, 1, &tag_b);
	for (i = 1; i <= MORE; i++) /* a keeps asking */
		send_contains(&a, 1, &tag_a[i]);
	assert_int_equal(rc_recv_reps(&a, rep, 1, 300), -ETIMEDOUT); /* not read: starved */
	rc_close(&c); /* gone while starved, between a and b */
	for (i = 0; i < 500 && nclients(&d) != 3; i++)
		usleep(10000);
	assert_int_equal(nclients(&d), 3);
	assert_int_equal(rc_count_fds(st.pid), fds0);
	assert_int_equal(rc_recv_reps(&b, rep, 1, 100), -ETIMEDOUT); /* still short */
	(void)tag_c;

	shortage(false);
	assert_int_equal(rc_recv_reps(&b, rep, 1, 10000), 1);
	assert_int_equal(rep[0].tag, tag_b);
	assert_int_equal(rep[0].status, 0);
	assert_int_equal(rep[0].size, 1); /* present */
	assert_int_equal(rc_recv_reps(&a, rep, MORE + 1, 10000), MORE + 1);
	for (i = 0; i <= MORE; i++) {
		assert_int_equal(rep[i].tag, tag_a[i]);
		assert_int_equal(rep[i].status, 0);
		assert_int_equal(rep[i].size, 1);
	}
	assert_int_equal(nclients(&a), 3);
	assert_int_equal(nclients(&b), 3);
	assert_int_equal(rc_delete(&d, 1), 0);
	rc_close(&a);
	rc_close(&b);
	rc_close(&d);
	assert_int_equal(rc_store_stop(&st), 0);
	st.pid = 0;
	rmdir(g_dir);
}

static int teardown(void **state)
{
	(void)state;
	if (st.pid > 0)
		(void)rc_store_stop(&st);
	(void)unlink(g_flag);
	(void)unlink(g_watch);
	(void)unlink(g_nodup);
	(void)rmdir(g_dir);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_store_short_of_memory, teardown),
	    cmocka_unit_test_teardown(test_store_cannot_watch, teardown),
	    cmocka_unit_test_teardown(test_full_socket_short_of_memory, teardown),
	    cmocka_unit_test_teardown(test_full_socket_out_of_fds, teardown),
	    cmocka_unit_test_teardown(test_starved_clients_served_in_turn, teardown),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
