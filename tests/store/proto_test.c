/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/store/proto_test.c - unit tests of the protocol helpers shared by client and store
 * (runtime/proto.c): header/length/count validation, request field validation, reply
 * bounds checks, fd passing without leaks, the default socket path, and the size syntax of
 * the tools' command lines (coffer__parse_size), and socket calls interrupted by signals
 * (struct coffer__sock_wait).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "runtime/proto_util.h"

static void test_msg_check(void **state)
{
	unsigned char buf[COFFER_MSG_MAX_BYTES + 64] = {0};
	struct coffer_msg_hdr h, out;

	(void)state;
	coffer__msg_hdr_init(&h, COFFER_MSG_HELLO, 0, sizeof(h));
	memcpy(buf, &h, sizeof(h));
	assert_int_equal(coffer__msg_check(buf, sizeof(h), &out), 0);
	assert_int_equal(coffer__msg_check(buf, sizeof(h) - 1, &out), -EPROTO); /* truncated */
	assert_int_equal(coffer__msg_check(buf, sizeof(h) + 1, &out), -EPROTO); /* length */
	h.version = COFFER_PROTO_VERSION + 1;
	memcpy(buf, &h, sizeof(h));
	assert_int_equal(coffer__msg_check(buf, sizeof(h), &out), -EPROTONOSUPPORT);
	h.version = COFFER_PROTO_VERSION;
	h.magic = 0;
	memcpy(buf, &h, sizeof(h));
	assert_int_equal(coffer__msg_check(buf, sizeof(h), &out), -EPROTO);
	coffer__msg_hdr_init(&h, 99, 0, sizeof(h)); /* unknown type */
	memcpy(buf, &h, sizeof(h));
	assert_int_equal(coffer__msg_check(buf, sizeof(h), &out), -EPROTO);
	coffer__msg_hdr_init(&h, COFFER_MSG_QUERY, 1, sizeof(h)); /* count on a fixed msg */
	memcpy(buf, &h, sizeof(h));
	assert_int_equal(coffer__msg_check(buf, sizeof(h), &out), -EPROTO);
	/* REQUEST: 1..256 entries, length must match. */
	coffer__msg_hdr_init(&h, COFFER_MSG_REQUEST, 2, sizeof(h) + 2 * 64);
	memcpy(buf, &h, sizeof(h));
	assert_int_equal(coffer__msg_check(buf, sizeof(h) + 128, &out), 0);
	assert_int_equal(out.count, 2);
	coffer__msg_hdr_init(&h, COFFER_MSG_REQUEST, 3, sizeof(h) + 2 * 64); /* wrong count */
	memcpy(buf, &h, sizeof(h));
	assert_int_equal(coffer__msg_check(buf, sizeof(h) + 128, &out), -EPROTO);
	coffer__msg_hdr_init(&h, COFFER_MSG_REQUEST, 0, sizeof(h));
	memcpy(buf, &h, sizeof(h));
	assert_int_equal(coffer__msg_check(buf, sizeof(h), &out), -EPROTO);
	coffer__msg_hdr_init(&h, COFFER_MSG_REQUEST, 257, sizeof(h) + 257 * 64);
	memcpy(buf, &h, sizeof(h));
	assert_int_equal(coffer__msg_check(buf, sizeof(h) + 257 * 64, &out), -EPROTO);
	/* count * size overflow in 32 bits must not wrap into a match */
	coffer__msg_hdr_init(&h, COFFER_MSG_REQUEST, 0x04000001u, sizeof(h) + 64);
	memcpy(buf, &h, sizeof(h));
	assert_int_equal(coffer__msg_check(buf, sizeof(h) + 64, &out), -EPROTO);
}

static void test_req_check(void **state)
{
	struct coffer_req r;

	(void)state;
	memset(&r, 0, sizeof(r));
	r.op = COFFER_OP_CREATE;
	r.size = 10;
	r.flags = COFFER_CREATE_REPLACE;
	assert_int_equal(coffer__req_check(&r), 0);
	r.flags = 0x2;
	assert_int_equal(coffer__req_check(&r), -EINVAL);
	r.flags = 0;
	r.timeout_us = 5;
	assert_int_equal(coffer__req_check(&r), -EINVAL); /* timeout only for GET */
	r.timeout_us = 0;
	r.rsvd0 = 1;
	assert_int_equal(coffer__req_check(&r), -EINVAL);
	memset(&r, 0, sizeof(r));
	r.op = COFFER_OP_GET;
	r.timeout_us = -1;
	assert_int_equal(coffer__req_check(&r), 0);
	r.size = 1;
	assert_int_equal(coffer__req_check(&r), -EINVAL);
	memset(&r, 0, sizeof(r));
	r.op = COFFER_OP_RELEASE;
	r.flags = COFFER_RELEASE_BY_OFFSET;
	r.size = 4096;
	assert_int_equal(coffer__req_check(&r), 0);
	r.op = 0;
	assert_int_equal(coffer__req_check(&r), -EINVAL);
	r.op = COFFER_OP_MAX + 1;
	assert_int_equal(coffer__req_check(&r), -EINVAL);
}

static void test_rep_check(void **state)
{
	struct coffer_rep r = {.status = 0, .segment = 7, .offset = 100, .size = 50};

	(void)state;
	assert_int_equal(coffer__rep_check(&r, COFFER_OP_GET, 7, 150), 0);
	assert_int_equal(coffer__rep_check(&r, COFFER_OP_GET, 7, 149), -EPROTO);
	assert_int_equal(coffer__rep_check(&r, COFFER_OP_GET, 8, 150), -EPROTO);
	r.offset = UINT64_MAX - 10;
	assert_int_equal(coffer__rep_check(&r, COFFER_OP_GET, 7, 150), -EPROTO);
	r.status = 5;
	assert_int_equal(coffer__rep_check(&r, COFFER_OP_GET, 7, 150), -EPROTO);
	r.status = -ENOENT;
	assert_int_equal(coffer__rep_check(&r, COFFER_OP_GET, 7, 150), 0);
	r.status = 0;
	r.size = 2;
	assert_int_equal(coffer__rep_check(&r, COFFER_OP_CONTAINS, 7, 150), -EPROTO);
}

static int count_fds(void)
{
	int fd, n = 0;

	for (fd = 0; fd < 1024; fd++)
		if (fcntl(fd, F_GETFD) >= 0)
			n++;
	return n;
}

static void test_fd_passing(void **state)
{
	int sv[2], p[2], fds[COFFER_MSG_FDS_MAX], before;
	unsigned int nfds;
	char buf[64];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	assert_int_equal(pipe(p), 0);
	before = count_fds();
	assert_int_equal(coffer__send_fds(sv[0], "abc", 3, p, 2, 0), 3);
	assert_int_equal(coffer__recv_fds(sv[1], buf, sizeof(buf), fds, &nfds, 2, 0), 3);
	assert_int_equal(nfds, 2);
	close(fds[0]);
	close(fds[1]);
	/* More fds than the receiver accepts: all closed, -EMSGSIZE. */
	assert_int_equal(coffer__send_fds(sv[0], "abc", 3, p, 2, 0), 3);
	assert_int_equal(coffer__recv_fds(sv[1], buf, sizeof(buf), fds, &nfds, 1, 0), -EMSGSIZE);
	assert_int_equal(nfds, 0);
	/* Oversized message: -EMSGSIZE. */
	memset(buf, 0, sizeof(buf));
	assert_int_equal(coffer__send_fds(sv[0], buf, sizeof(buf), NULL, 0, 0), sizeof(buf));
	assert_int_equal(coffer__recv_fds(sv[1], buf, 10, fds, &nfds, 2, 0), -EMSGSIZE);
	assert_int_equal(count_fds(), before); /* nothing leaked */
	/* Peer gone: -EPIPE, never SIGPIPE. */
	close(sv[1]);
	assert_int_equal(coffer__send_fds(sv[0], "x", 1, NULL, 0, 0), -EPIPE);
	close(sv[0]);
	close(p[0]);
	close(p[1]);
}

/*
 * A receiver at its fd limit: with room for none of the passed fds, or for some but not all
 * (the kernel installs what fits and drops the rest), the answer is -EMFILE, nothing leaks,
 * and coffer__recv_fds_kept() hands back the intact payload. With room for one of two fds
 * it used to say -EMSGSIZE (it probed for a free slot after closing the fd it got), which
 * the client reported as -EPROTO and took for a malformed reply.
 */
static void test_fd_passing_at_limit(void **state)
{
	int sv[2], p[2], fds[COFFER_MSG_FDS_MAX], before, lowest;
	struct rlimit old, low;
	unsigned int nfds;
	char buf[64];
	size_t kept;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	assert_int_equal(pipe(p), 0);
	before = count_fds();
	lowest = dup(0);
	assert_true(lowest >= 0);
	close(lowest); /* fds are handed out lowest first */
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	for (int room = 0; room < 2; room++) {
		assert_int_equal(coffer__send_fds(sv[0], "abc", 3, p, 2, 0), 3);
		low = old;
		low.rlim_cur = (rlim_t)lowest + (rlim_t)room;
		assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
		memset(buf, 0, sizeof(buf));
		assert_int_equal(
		    coffer__recv_fds_kept(sv[1], buf, sizeof(buf), fds, &nfds, 2, 0, NULL, &kept),
		    -EMFILE);
		assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
		assert_int_equal(nfds, 0);
		assert_int_equal(kept, 3);
		assert_memory_equal(buf, "abc", 3);
		assert_int_equal(count_fds(), before);
	}
	/* Not at the limit: the same message arrives whole, and kept says nothing. */
	assert_int_equal(coffer__send_fds(sv[0], "abc", 3, p, 2, 0), 3);
	assert_int_equal(
	    coffer__recv_fds_kept(sv[1], buf, sizeof(buf), fds, &nfds, 2, 0, NULL, &kept), 3);
	assert_int_equal(nfds, 2);
	assert_int_equal(kept, 0);
	close(fds[0]);
	close(fds[1]);
	close(sv[0]);
	close(sv[1]);
	close(p[0]);
	close(p[1]);
}

/* Every size form that coffer-store --help and docs/protocol.md document, and what is not. */
static void test_parse_size(void **state)
{
	static const struct {
		const char *s;
		uint64_t bytes;
	} ok[] = {
	    {"512", 512},	    {"512B", 512},	   {"512b", 512},
	    {"4K", 4096},	    {"4k", 4096},	   {"4KiB", 4096},
	    {"4KB", 4096},	    {"64M", 64ull << 20},  {"64m", 64ull << 20},
	    {"64MiB", 64ull << 20}, {"64MB", 64ull << 20}, {"1G", 1ull << 30},
	    {"1g", 1ull << 30},	    {"1GiB", 1ull << 30},  {"1GB", 1ull << 30},
	    {"1gb", 1ull << 30},    {"2T", 2ull << 40},	   {"2t", 2ull << 40},
	    {"2TiB", 2ull << 40},
	};
	static const char *const bad[] = {"",	"x",   "-1",	"+1",	" 1",  "1 G", "1Q",
					  "1P", "1iB", "1Gi B", "1GBx", "1GG", "0x10"};
	uint64_t v;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		v = 0;
		assert_int_equal(coffer__parse_size(ok[i].s, &v), 0);
		assert_true(v == ok[i].bytes);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(coffer__parse_size(bad[i], &v), -EINVAL);
	assert_int_equal(coffer__parse_size("99999999999999999999", &v), -ERANGE);
	assert_int_equal(coffer__parse_size("16777216T", &v), -ERANGE); /* 2^64 bytes */
}

static void test_default_socket_path(void **state)
{
	char buf[108];

	(void)state;
	setenv("COFFER_SOCKET", "/tmp/x.sock", 1);
	assert_int_equal(coffer__default_socket_path(buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/tmp/x.sock");
	assert_int_equal(coffer__default_socket_path(buf, 5), -ENAMETOOLONG);
	unsetenv("COFFER_SOCKET");
	unsetenv("XDG_RUNTIME_DIR");
	assert_int_equal(coffer__default_socket_path(buf, sizeof(buf)), 0);
	assert_true(strstr(buf, "coffer") != NULL);
}

/*
 * Socket calls interrupted by signals (struct coffer__sock_wait): a thread blocked in
 * coffer__recv_fds() or coffer__send_fds() takes SIGUSR1 (no SA_RESTART) every 5 ms; after
 * 20 of them the peer sends, or reads what fills the buffer. The call returns the message
 * (never -EINTR, nor -EAGAIN while its timeout has time left), and the socket's timeouts are
 * the caller's again afterwards: each retry shortened them to what was left, and a socket left
 * with one of those would time the next control exchange out early (-ETIMEDOUT fails the
 * connection). A socket without a timeout keeps none.
 */
struct tick {
	pthread_t target;
	int peer;
	bool drain; /* the peer reads (the target sends), else it sends */
	atomic_int done;
};

static void tick_handler(int sig)
{
	(void)sig;
}

static void *tick_main(void *arg)
{
	struct tick *k = arg;
	char buf[4096];

	for (int i = 0; !atomic_load(&k->done); i++) {
		if (i == 20 && k->drain)
			while (recv(k->peer, buf, sizeof(buf), MSG_DONTWAIT) > 0)
				;
		else if (i == 20)
			assert_int_equal(send(k->peer, "late", 4, 0), 4);
		pthread_kill(k->target, SIGUSR1);
		usleep(5000);
	}
	return NULL;
}

static void get_timeo(int fd, int opt, struct timeval *tv)
{
	socklen_t len = sizeof(*tv);

	assert_int_equal(getsockopt(fd, SOL_SOCKET, opt, tv, &len), 0);
}

static void sock_wait_case(unsigned int timeout_ms, bool send_side)
{
	struct sigaction sa = {.sa_handler = tick_handler}, old;
	struct tick k = {.target = pthread_self(), .drain = send_side};
	struct timeval rcv0, snd0, rcv, snd;
	int sv[2], fds[1];
	unsigned int nfds;
	char buf[4096];
	pthread_t th;
	long n;

	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	assert_int_equal(coffer__sock_set_timeout(sv[0], timeout_ms), 0);
	get_timeo(sv[0], SO_RCVTIMEO, &rcv0);
	get_timeo(sv[0], SO_SNDTIMEO, &snd0);
	memset(buf, 0, sizeof(buf));
	if (send_side) /* fill sv[0]'s send buffer: the next send blocks */
		while (send(sv[0], buf, sizeof(buf), MSG_DONTWAIT) > 0)
			;
	k.peer = sv[1];
	assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
	assert_int_equal(pthread_create(&th, NULL, tick_main, &k), 0);
	if (send_side)
		n = coffer__send_fds(sv[0], buf, sizeof(buf), NULL, 0, 0);
	else
		n = coffer__recv_fds(sv[0], buf, sizeof(buf), fds, &nfds, 1, 0);
	atomic_store(&k.done, 1);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(sigaction(SIGUSR1, &old, NULL), 0);
	if (send_side) {
		assert_int_equal(n, sizeof(buf));
	} else {
		assert_int_equal(n, 4);
		assert_memory_equal(buf, "late", 4);
		assert_int_equal(nfds, 0);
	}
	get_timeo(sv[0], SO_RCVTIMEO, &rcv);
	get_timeo(sv[0], SO_SNDTIMEO, &snd);
	assert_int_equal(rcv.tv_sec, rcv0.tv_sec);
	assert_int_equal(rcv.tv_usec, rcv0.tv_usec);
	assert_int_equal(snd.tv_sec, snd0.tv_sec);
	assert_int_equal(snd.tv_usec, snd0.tv_usec);
	close(sv[0]);
	close(sv[1]);
}

static void test_sock_wait_under_signals(void **state)
{
	(void)state;
	sock_wait_case(5000, false);
	sock_wait_case(5000, true);
	sock_wait_case(0, false); /* no timeout: retried for ever, still none */
	sock_wait_case(0, true);
}

/*
 * coffer__recv_fds_kept() with @since: a receive that belongs to a call whose timeout ran out
 * already (the socket's is an hour, the call began an hour and a second ago) never blocks:
 * it takes a message that is queued, else says -EAGAIN at once (a blocking one would hold
 * this test for an hour: meson's timeout is the guard); and the socket keeps its timeout.
 */
static void test_recv_since_expired(void **state)
{
	struct timeval rcv0, rcv;
	struct timespec since;
	unsigned int nfds;
	char buf[64];
	int sv[2], fds[1];
	size_t kept;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	assert_int_equal(coffer__sock_set_timeout(sv[0], 3600 * 1000), 0);
	get_timeo(sv[0], SO_RCVTIMEO, &rcv0);
	assert_int_equal(clock_gettime(CLOCK_MONOTONIC, &since), 0);
	since.tv_sec -= 3601;
	assert_int_equal(send(sv[1], "late", 4, 0), 4);
	assert_int_equal(
	    coffer__recv_fds_kept(sv[0], buf, sizeof(buf), fds, &nfds, 1, 0, &since, &kept), 4);
	assert_memory_equal(buf, "late", 4);
	assert_int_equal(
	    coffer__recv_fds_kept(sv[0], buf, sizeof(buf), fds, &nfds, 1, 0, &since, &kept),
	    -EAGAIN);
	get_timeo(sv[0], SO_RCVTIMEO, &rcv);
	assert_int_equal(rcv.tv_sec, rcv0.tv_sec);
	assert_int_equal(rcv.tv_usec, rcv0.tv_usec);
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_msg_check),
	    cmocka_unit_test(test_req_check),
	    cmocka_unit_test(test_rep_check),
	    cmocka_unit_test(test_fd_passing),
	    cmocka_unit_test(test_fd_passing_at_limit),
	    cmocka_unit_test(test_default_socket_path),
	    cmocka_unit_test(test_parse_size),
	    cmocka_unit_test(test_sock_wait_under_signals),
	    cmocka_unit_test(test_recv_since_expired),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
