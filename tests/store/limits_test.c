/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/store/limits_test.c - coffer-store under resource pressure (issues 5, 6 and 9):
 * many connect/disconnect cycles leave no fd or byte behind; at its open-file limit the store
 * refuses new clients cleanly (no busy loop on accept) while existing clients keep working,
 * and accepts again once fds are free; an idle store with open channels uses ~0% CPU, also
 * when a client left a large object unsealed (the store's copy spin ends).
 * Cycles: argv[1] (default 2000; issue 9 asks for 10,000 in the long run).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/store/rawclient.h"

static int cycles = 2000;

static void test_connect_cycles(void **state)
{
	static const char *const args[] = {"-m", "4M", "--hugepages=off", NULL};
	struct coffer_store_info info;
	struct rc_store st;
	struct rc_conn keep;
	int i, fds0;

	(void)state;
	assert_int_equal(rc_store_start(&st, args), 0);
	assert_int_equal(rc_connect(&keep, st.sock), 0);
	fds0 = rc_count_fds(st.pid);
	for (i = 0; i < cycles; i++) {
		struct rc_conn c;

		assert_int_equal(rc_connect(&c, st.sock), 0);
		if (i % 4 == 0) { /* some leave objects and references behind */
			assert_int_equal(rc_create(&c, 1000 + (uint64_t)i, 128, 0, NULL), 0);
			assert_int_equal(rc_get(&c, 1, 0, NULL, NULL), i == 0 ? -ENOENT : 0);
		}
		if (i == 0)
			assert_int_equal(rc_put(&keep, 1, 64, 1), 0);
		rc_close(&c);
	}
	for (i = 0; i < 500; i++) {
		assert_int_equal(rc_query(&keep, &info), 0);
		if (info.clients == 1)
			break;
		usleep(2000);
	}
	/* Every counter at once when one is off, so that a failure can be explained from the
	 * log: used_bytes 0 instead of 64 was seen once (session 15, in a helper's worktree
	 * with uncommitted store changes), never in 100 runs under load since. Nothing here
	 * may evict: a 4 MiB arena holding one 64-byte object and a few 128-byte ones. */
	if (info.clients != 1 || info.evictions != 0 || info.used_bytes != 64 ||
	    info.objects_sealed != 1 || info.objects_created != 0)
		fprintf(stderr,
			"after %d cycles: clients %" PRIu64 ", used %" PRIu64
			" bytes, created %" PRIu64 ", sealed %" PRIu64 ", evictions %" PRIu64 "\n",
			cycles, info.clients, info.used_bytes, info.objects_created,
			info.objects_sealed, info.evictions);
	assert_int_equal(info.clients, 1);
	assert_int_equal(info.evictions, 0);
	assert_int_equal(info.used_bytes, 64);
	assert_int_equal(info.objects_sealed, 1);
	assert_int_equal(info.objects_created, 0);
	assert_int_equal(rc_count_fds(st.pid), fds0);
	assert_int_equal(rc_release(&keep, 1), -ENOENT);
	rc_close(&keep);
	fprintf(stderr, "%d connect/disconnect cycles: fds and bytes back to baseline\n", cycles);
	assert_int_equal(rc_store_stop(&st), 0);
}

static void test_fd_exhaustion(void **state)
{
	/* --max-files 0: the store keeps the low limit it inherits (it raises it by default) */
	static const char *const args[] = {"-m", "4M", "--hugepages=off", "--max-files", "0", NULL};
	struct rc_conn conns[64];
	struct rlimit old, low;
	struct rc_store st;
	int i, n = 0, refused = 0, rc;
	long t0, t1;

	(void)state;
	/* The store inherits a limit of 24 fds: ~9 for itself, the rest for clients. */
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	low = old;
	low.rlim_cur = 24;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	rc = rc_store_start(&st, args);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
	assert_int_equal(rc, 0);
	for (i = 0; i < 64; i++) {
		if (rc_connect(&conns[n], st.sock) == 0)
			n++;
		else
			refused++;
	}
	assert_true(n > 0);
	assert_true(refused > 0);
	/* Full: a refused client must not make the store spin. Keep one connection
	 * pending in the backlog while measuring. */
	{
		struct rc_conn pending;

		assert_int_equal(rc_connect_raw(&pending, st.sock), 0);
		t0 = rc_cpu_ticks(st.pid);
		usleep(500000);
		t1 = rc_cpu_ticks(st.pid);
		rc_close(&pending);
	}
	fprintf(stderr,
		"fd limit: %d clients admitted, %d refused; store CPU while full: %ld ticks "
		"in 0.5 s\n",
		n, refused, t1 - t0);
	assert_true(t1 - t0 <= 10); /* <= 0.1 s of 0.5 s, with slack for a loaded machine */
	/* At the limit the kernel cannot pass a CHANNEL_OPEN's doorbell fd to the store (or
	 * the store cannot create the rings' memfd): a non-fatal -EMFILE, and the client stays
	 * connected. A refused client's HELLO may have left an fd or two free (since v3 a
	 * channel costs the store one fd), so open channels until the store runs out. */
	{
		struct rc_chan ch[16];
		int k = 0, rc = 0;

		while (k < 16 && (rc = rc_chan_open(&conns[0], &ch[k], 8)) == 0)
			k++;
		assert_int_equal(rc, -EMFILE);
		assert_int_equal(rc_contains(&conns[0], 1), 0);
		while (k > 0)
			assert_int_equal(rc_chan_close(&ch[--k]), 0);
	}
	/* Existing clients keep working. */
	for (i = 0; i < n; i++) {
		assert_int_equal(rc_put(&conns[i], 100 + (uint64_t)i, 64, i), 0);
		assert_int_equal(rc_delete(&conns[i], 100 + (uint64_t)i), 0);
	}
	/* Free some fds: new clients are accepted again. */
	for (i = 0; i < n; i++)
		rc_close(&conns[i]);
	for (i = 0; i < 100; i++) {
		struct coffer_store_info info;

		if (rc_query_path(st.sock, &info) == 0 && info.clients == 1)
			break;
		usleep(10000);
	}
	assert_int_equal(rc_connect(&conns[0], st.sock), 0);
	assert_int_equal(rc_put(&conns[0], 1, 64, 1), 0);
	rc_close(&conns[0]);
	assert_true(rc_store_alive(&st));
	assert_int_equal(rc_store_stop(&st), 0);
}

/* The soft "Max open files" limit of @pid (from /proc), or -1. */
static long soft_nofile(pid_t pid)
{
	char path[64], line[256];
	long soft = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/limits", (int)pid);
	f = fopen(path, "r");
	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "Max open files %ld", &soft) == 1)
			break;
	fclose(f);
	return soft;
}

/* --max-files N sets the store's soft open-file limit to N, also below the limit it
 * inherits (a cap on the fds its clients may cost it); 0 keeps the inherited limit; no
 * option raises it to the hard limit. Each store is stopped before its limit is checked,
 * so that a failure leaves no store behind. */
static void test_max_files(void **state)
{
	static const char *const small[] = {"-m", "4M", "--hugepages=off", "--max-files=40", NULL};
	static const char *const keep[] = {"-m", "4M", "--hugepages=off", "--max-files=0", NULL};
	static const char *const dflt[] = {"-m", "4M", "--hugepages=off", NULL};
	const char *const *const args[3] = {small, keep, dflt};
	long got[3] = {0, 0, 0};
	struct rlimit old, low;
	struct rc_store st;
	int rc = 0;

	(void)state;
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	if (old.rlim_max == RLIM_INFINITY || old.rlim_max < 100) {
		skip();
		return;
	}
	low = old;
	low.rlim_cur = 60;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	for (int i = 0; i < 3 && rc == 0; i++) {
		rc = rc_store_start(&st, args[i]);
		if (rc == 0) {
			got[i] = soft_nofile(st.pid);
			rc = rc_store_stop(&st);
		}
	}
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
	assert_int_equal(rc, 0);
	assert_int_equal(got[0], 40); /* lowered from the inherited 60 */
	assert_int_equal(got[1], 60);
	assert_int_equal(got[2], (long)old.rlim_max);
}

/* The status of the ERROR a HELLO on @c is answered with (it must be one). */
static int hello_error(struct rc_conn *c)
{
	unsigned char buf[512];
	struct coffer_msg_error e;
	struct coffer_msg_hdr h;
	int fds[COFFER_MSG_FDS_MAX];
	unsigned int nfds = 0;
	long n;

	coffer__msg_hdr_init(&h, COFFER_MSG_HELLO, 0, sizeof(h));
	assert_int_equal(coffer__send_fds(c->fd, &h, sizeof(h), NULL, 0, MSG_DONTWAIT), sizeof(h));
	n = rc_recv_msg(c, buf, sizeof(buf), fds, &nfds, 10000);
	assert_true(n >= (long)(sizeof(h) + sizeof(e)));
	assert_int_equal(nfds, 0);
	assert_int_equal(coffer__msg_check(buf, (size_t)n, &h), 0);
	assert_int_equal(h.type, COFFER_MSG_ERROR);
	memcpy(&e, buf + sizeof(h), sizeof(e));
	return e.status;
}

/* The store of a test that has a teardown (stop_g_store()): one that failed leaves it. */
static struct rc_store g_store;

/* Sends one byte with @n (<= 64) copies of @fds over @sock. Return: 0, or -errno. */
static int send_fds(int sock, const int *fds, unsigned int n)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * 64)];
	} ctl;
	char byte = 0;
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr msg = {.msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = ctl.buf,
			     .msg_controllen = CMSG_SPACE(sizeof(int) * n)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int) * n);
	memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
	return sendmsg(sock, &msg, MSG_DONTWAIT) == 1 ? 0 : -errno;
}

/*
 * Fds sent over Unix sockets and not yet received are in flight, and the kernel counts them
 * against their sender's user: past the sender's RLIMIT_NOFILE it refuses to pass more
 * (ETOOMANYREFS; root and CAP_SYS_RESOURCE are exempt, hence coffer-store-nocaps). Clients
 * that never read their HELLO_REPLY hold five each (a dozen did it to a store at 64 fds);
 * here the test itself holds 128, in a socket pair it does not read, so that the count does
 * not depend on what other processes of the user have in flight. A client that opens a
 * channel then gets -EMFILE and keeps its connection - it used to be closed ("send
 * failed") - a new one is refused with that reason instead of bare EOF, and once those fds
 * are received or dropped both work again.
 */
static void test_fds_in_flight(void **state)
{
	static const char *const args[] = {"-m", "4M", "--hugepages=off", "--max-files=256", NULL};
	/* twice the store's bound; the bound leaves room for what other processes of the
	 * user (other tests, run as root beside this one) have in flight at the same time */
	enum { BALLAST = 512, PER_MSG = 64 };
	const char *exe = getenv("COFFER_STORE_EXE"), *nocaps = getenv("COFFER_STORE_NOCAPS_EXE");
	struct coffer_store_info info;
	struct rc_conn good, late;
	struct rc_chan ch;
	struct rc_store *st = &g_store; /* stopped by stop_g_store() */
	int fds[PER_MSG], sp[2], rc, fds0, i;
	char saved[512];

	(void)state;
	assert_non_null(exe);
	assert_non_null(nocaps);
	snprintf(saved, sizeof(saved), "%s", exe);
	assert_int_equal(setenv("COFFER_STORE_EXE", nocaps, 1), 0);
	rc = rc_store_start(st, args);
	assert_int_equal(setenv("COFFER_STORE_EXE", saved, 1), 0);
	assert_int_equal(rc, 0);
	assert_int_equal(rc_connect(&good, st->sock), 0);
	fds0 = rc_count_fds(st->pid);

	/* not a socket's fd: an unread socket in its own queue would wait for the kernel's
	 * garbage collector, and stay in flight after the close below */
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0);
	fds[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_true(fds[0] >= 0);
	for (i = 1; i < PER_MSG; i++)
		fds[i] = fds[0];
	for (i = 0; i < BALLAST / PER_MSG; i++)
		assert_int_equal(send_fds(sp[1], fds, PER_MSG), 0);

	assert_int_equal(rc_chan_open(&good, &ch, 0), -EMFILE);
	assert_int_equal(rc_query(&good, &info), 0); /* still connected */
	assert_int_equal(info.clients, 1);
	assert_int_equal(rc_connect_raw(&late, st->sock), 0);
	assert_int_equal(hello_error(&late), -EMFILE);
	rc_close(&late);

	close(sp[0]); /* drops the unread messages, and their fds */
	close(sp[1]);
	close(fds[0]);
	for (i = 0; i < 500; i++) {
		assert_int_equal(rc_query(&good, &info), 0);
		if (info.clients == 1 && rc_count_fds(st->pid) == fds0)
			break;
		usleep(10000);
	}
	assert_int_equal(info.clients, 1);
	assert_int_equal(rc_count_fds(st->pid), fds0);
	/* The count is the user's, machine-wide: fds other root processes have in flight
	 * right now (another test's store answering its clients) can still hold it past the
	 * bound for a moment, which only delays these; they must succeed once it drops. */
	for (i = 0; i < 400 && (rc = rc_chan_open(&good, &ch, 0)) == -EMFILE; i++)
		usleep(50000);
	assert_int_equal(rc, 0);
	assert_int_equal(rc_chan_close(&ch), 0);
	for (i = 0; i < 400 && (rc = rc_connect(&late, st->sock)) != 0; i++)
		usleep(50000);
	assert_int_equal(rc, 0);
	rc_close(&late);
	rc_close(&good);
	rc = rc_store_stop(st);
	st->pid = 0;
	assert_int_equal(rc, 0);
}

/* Stops a test's store (g_store) if the test failed: a store left running keeps the
 * test's stdout open, and meson waited for it until its timeout. */
static int stop_g_store(void **state)
{
	(void)state;
	if (g_store.pid > 0)
		(void)rc_store_stop(&g_store);
	g_store.pid = 0;
	return 0;
}

/* A 4 MiB store without hugepages (g_store: stop_g_store() stops it if the test fails), a
 * raw client of it and a channel of @entries entries. */
static void cpu_setup(struct rc_store *st, struct rc_conn *c, struct rc_chan *ch, uint32_t entries)
{
	static const char *const args[] = {"-m", "4M", "--hugepages=off", NULL};

	assert_int_equal(rc_store_start(st, args), 0);
	assert_int_equal(rc_connect(c, st->sock), 0);
	assert_int_equal(rc_chan_open(c, ch, entries), 0);
}

static void cpu_teardown(struct rc_store *st, struct rc_conn *c, struct rc_chan *ch)
{
	assert_int_equal(rc_chan_close(ch), 0);
	rc_close(c);
	assert_int_equal(rc_store_stop(st), 0);
}

/* The store's CPU time over the next second, in clock ticks, after @settle_us of rest;
 * printed with @what. */
static long cpu_ticks_in_1s(const struct rc_store *st, unsigned int settle_us, const char *what)
{
	long t0, t1;

	usleep(settle_us);
	t0 = rc_cpu_ticks(st->pid);
	usleep(1000000);
	t1 = rc_cpu_ticks(st->pid);
	fprintf(stderr, "%s: %ld ticks of CPU in 1 s\n", what, t1 - t0);
	return t1 - t0;
}

static void test_idle_cpu(void **state)
{
	struct coffer_req r;
	struct coffer_rep rep;
	struct rc_store *st = &g_store;
	struct rc_conn c;
	struct rc_chan ch;

	(void)state;
	cpu_setup(st, &c, &ch, 64);
	rc_req_init(&c, &r, COFFER_OP_CONTAINS, 1);
	assert_int_equal(rc_chan_submit(&ch, &r, 1), 0);
	assert_int_equal(rc_chan_wait(&ch, &rep, 1, 5000), 1);
	/* A large create makes the store poll on for the copy it expects (note_create() in
	 * tools/store.c); left unsealed, that spin must still end and the store sleep. */
	rc_req_init(&c, &r, COFFER_OP_CREATE, 2);
	r.size = 2u << 20;
	assert_int_equal(rc_chan_submit(&ch, &r, 1), 0);
	assert_int_equal(rc_chan_wait(&ch, &rep, 1, 5000), 1);
	assert_int_equal(rep.status, 0);
	assert_true(cpu_ticks_in_1s(st, 100000, "idle store with an open channel") <= 3);
	/* It still wakes for the ring (doorbell rung because the store sleeps). */
	assert_int_equal(__atomic_load_n(&c.doorbell->store_sleeping, __ATOMIC_RELAXED), 1);
	rc_req_init(&c, &r, COFFER_OP_CONTAINS, 1);
	assert_int_equal(rc_chan_submit(&ch, &r, 1), 0);
	assert_int_equal(rc_chan_wait(&ch, &rep, 1, 5000), 1);
	assert_int_equal(rep.status, 0);
	cpu_teardown(st, &c, &ch);
}

/*
 * A client that submits more requests than its reply ring holds and stops reading replies
 * (libcoffer never does; a raw client may): the store must not spin for it (found by the
 * adversarial helper: 2.01 s of CPU in 2 s, for as long as the client lived), and once the
 * client reads its replies, the rest are served without a new doorbell.
 */
static void test_stalled_reply_ring_cpu(void **state)
{
	struct coffer_req r[8];
	struct coffer_rep rep[8];
	struct rc_store *st = &g_store;
	struct rc_conn c;
	struct rc_chan ch;

	(void)state;
	cpu_setup(st, &c, &ch, 8);
	for (int i = 0; i < 8; i++)
		rc_req_init(&c, &r[i], COFFER_OP_CONTAINS, (uint64_t)i + 1);
	assert_int_equal(rc_chan_submit(&ch, r, 8), 0); /* fills the reply ring */
	/* the request ring (8 entries too) has room for the next 8 once the store took these:
	 * a fixed 20 ms sleep here failed 1 run in 100 with -EAGAIN beside 6 busy loops */
	assert_int_equal(rc_chan_taken(&ch, 10000), 0);
	assert_int_equal(rc_chan_submit(&ch, r, 8), 0); /* no reply room for these */
	assert_true(cpu_ticks_in_1s(st, 200000, "store beside a stalled reply ring") <= 5);
	/* read the first 8 replies: the other 8 follow without a doorbell */
	assert_int_equal(rc_chan_wait(&ch, rep, 8, 5000), 8);
	assert_int_equal(rc_chan_wait(&ch, rep, 8, 5000), 8);
	for (int i = 0; i < 8; i++)
		assert_int_equal(rep[i].status, 0);
	cpu_teardown(st, &c, &ch);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_connect_cycles),
	    cmocka_unit_test(test_fd_exhaustion),
	    cmocka_unit_test(test_max_files),
	    cmocka_unit_test_teardown(test_fds_in_flight, stop_g_store),
	    cmocka_unit_test_teardown(test_idle_cpu, stop_g_store),
	    cmocka_unit_test_teardown(test_stalled_reply_ring_cpu, stop_g_store),
	};

	if (argc > 1)
		cycles = atoi(argv[1]);
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
