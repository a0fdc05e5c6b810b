/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/reliability/exhaust_test.c - resource exhaustion against a real store.
 *
 * usage: exhaust_test [CYCLES]   (connect/disconnect cycles, default 10,000)
 *
 *  - connect-cycles: CYCLES connect/disconnect cycles (bare connect; HELLO and close with
 *    the arena fd unread; HELLO and close; every 50th through libcoffer), then a client
 *    still connects and works, and the store has its start fd count, one client and
 *    private RSS within 1 MiB of the start.
 *  - fd-limit: a store started with RLIMIT_NOFILE 32 refuses clients once out of fds (the
 *    client sees the connection closed), uses almost no CPU while refused clients keep
 *    knocking (no busy loop on accept), serves the clients it has, and accepts new ones
 *    once some leave.
 *    A CHANNEL_OPEN at the limit gets a non-fatal -EMFILE and the client stays connected
 *    (found by this test: the store used to close the client with -EPROTO).
 *  - pinned-full: a store full of pinned objects (unsealed, and sealed with references)
 *    fails create with -ENOMEM at once (< 100 ms) and evicts nothing; a sealed unreferenced
 *    object that cannot make room is not evicted either; every pinned sealed object stays
 *    intact.
 *  - too-big: an object larger than the arena fails with -E2BIG at once, through the raw
 *    protocol and through libcoffer.
 *  - client-fd-limit: a client at its own fd limit gets -EMFILE from an EQ's first request
 *    (its channel's fds cannot be received), and the store keeps nothing of that channel.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmocka.h>

#include <coffer/coffer.h>

#include "tests/reliability/relcommon.h"
#include "tests/store/rawclient.h"

/* A create that cannot be served fails at once: the store never makes it wait for space.
 * Checked as a hang guard, not a speed: a loaded 2-core VM stalls a process for tens of
 * milliseconds (a 100 ms bound failed at load average 5). */
#define PROMPT_MS 2000

static unsigned long g_cycles = 10000;
static struct rc_store g_store; /* stopped by the teardown if a test fails */

static int teardown(void **state)
{
	(void)state;
	if (g_store.pid > 0)
		(void)rc_store_stop(&g_store);
	memset(&g_store, 0, sizeof(g_store));
	return 0;
}

static void start(const char *mem)
{
	const char *args[] = {"-m", mem, NULL};

	assert_int_equal(rc_store_start(&g_store, args), 0);
}

static void stop(void)
{
	assert_int_equal(rc_store_stop(&g_store), 0);
	memset(&g_store, 0, sizeof(g_store));
}

/* Wait (bounded) for the store to show @clients clients; return its info. */
static void settle(struct rc_conn *c, uint64_t clients, struct coffer_store_info *info)
{
	int i;

	for (i = 0; i < 2000; i++) {
		assert_int_equal(rc_query(c, info), 0);
		if (info->clients == clients)
			return;
		rel_sleep_us(2000);
	}
	fail_msg("store has %llu clients, want %llu", (unsigned long long)info->clients,
		 (unsigned long long)clients);
}

/* ------------------------------------------------------------------ connect cycles */

static void test_connect_cycles(void **state)
{
	struct coffer_store_info info;
	struct rel_proc p0, p1;
	struct rc_conn c, k;
	unsigned long i;
	long t0 = rel_now_ms();
	const void *data;
	uint64_t size;

	(void)state;
	start("16M");
	assert_int_equal(rc_connect(&c, g_store.sock), 0);
	settle(&c, 1, &info);
	assert_int_equal(rel_proc_sample(g_store.pid, &p0), 0);
	for (i = 0; i < g_cycles; i++) {
		struct coffer_msg_hdr h;
		unsigned char buf[256];
		int fds[COFFER_MSG_FDS_MAX];
		unsigned int nfds = 0;

		if (i % 50 == 49) { /* through the client runtime */
			coffer_handle_t ch;

			assert_int_equal(coffer_connect(g_store.sock, &ch), 0);
			assert_int_equal(coffer_disconnect(ch), 0);
			continue;
		}
		assert_int_equal(rc_connect_raw(&k, g_store.sock), 0);
		if (i % 3 != 0) {
			coffer__msg_hdr_init(&h, COFFER_MSG_HELLO, 0, sizeof(h));
			assert_int_equal(rc_send_raw(&k, &h, sizeof(h), NULL, 0), 0);
			if (i % 3 == 2) { /* read the reply: arena, doorbells, index */
				assert_true(rc_recv_msg(&k, buf, sizeof(buf), fds, &nfds, 5000) >
					    0);
				assert_int_equal(nfds, 5);
				while (nfds > 0)
					close(fds[--nfds]);
			}
		}
		rc_close(&k);
	}
	/* A client still connects and works. */
	assert_int_equal(rc_connect(&k, g_store.sock), 0);
	assert_int_equal(rc_put(&k, 7, 100000, 0x3c), 0);
	assert_int_equal(rc_get(&k, 7, 0, &data, &size), 0);
	assert_int_equal(size, 100000);
	assert_int_equal(((const unsigned char *)data)[99999], 0x3c);
	assert_int_equal(rc_release(&k, 7), 0);
	assert_int_equal(rc_delete(&k, 7), 0);
	rc_close(&k);
	settle(&c, 1, &info);
	assert_int_equal(rel_proc_sample(g_store.pid, &p1), 0);
	printf("connect-cycles: %lu cycles in %.1f s; store fds %d -> %d, private RSS %ld -> %ld "
	       "kB, used %llu\n",
	       g_cycles, (double)(rel_now_ms() - t0) / 1000.0, p0.fds, p1.fds, p0.rss_anon_kb,
	       p1.rss_anon_kb, (unsigned long long)info.used_bytes);
	assert_int_equal(p1.fds, p0.fds);
	assert_true(p1.rss_anon_kb <= p0.rss_anon_kb + 1024 + REL_RSS_SAN_SLACK_KB);
	assert_int_equal(info.used_bytes, 0);
	rc_close(&c);
	stop();
}

/* ------------------------------------------------------------------ fd limit */

#define HELD_MAX 64
#define LIB_EQS	 16 /* channels a libcoffer client opens at the store's fd limit */

static void test_fd_limit(void **state)
{
	struct rlimit old, low = {.rlim_cur = 32, .rlim_max = 32};
	struct rc_conn held[HELD_MAX], extra[16];
	struct coffer_store_info info;
	struct rel_proc p0, p1;
	struct coffer_oid oid = {.id = {1}};
	coffer_handle_t lc0, eqs[LIB_EQS];
	struct coffer_event evs[LIB_EQS];
	bool present = true;
	int nheld = 0, refused = 0, neq, i, rc;

	(void)state;
	/* The store inherits the limit; the test process keeps its own. */
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	low.rlim_max = old.rlim_max;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	/* --max-files 0: keep the inherited limit (the store raises it by default) */
	rc = rc_store_start(&g_store, (const char *[]){"-m", "8M", "--max-files", "0", NULL});
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
	assert_int_equal(rc, 0);

	/* a libcoffer client in before the limit, with no channel yet */
	assert_int_equal(coffer_connect(g_store.sock, &lc0), 0);
	/* Connect until the store refuses (it closes what it cannot keep). */
	while (nheld < HELD_MAX && refused < 3) {
		rc = rc_connect(&held[nheld], g_store.sock);
		if (rc == 0)
			nheld++;
		else
			refused++;
	}
	printf("fd-limit: RLIMIT_NOFILE 32: %d clients accepted, then %d refused\n", nheld,
	       refused);
	assert_true(nheld >= 4);
	assert_true(refused >= 1);
	assert_true(rc_store_alive(&g_store));

	/* Refused clients keep knocking: the store must not spin on accept. */
	assert_int_equal(rel_proc_sample(g_store.pid, &p0), 0);
	for (i = 0; i < 16; i++)
		(void)rc_connect_raw(&extra[i], g_store.sock);
	rel_sleep_us(1000000);
	assert_int_equal(rel_proc_sample(g_store.pid, &p1), 0);
	printf("fd-limit: store CPU over 1 s with 16 clients knocking: %.3f s\n",
	       p1.cpu_s - p0.cpu_s);
	assert_true(p1.cpu_s - p0.cpu_s < 0.3);
	for (i = 0; i < 16; i++)
		rc_close(&extra[i]);

	/* A channel needs fds too: at the limit CHANNEL_OPEN fails with a non-fatal -EMFILE
	 * (the kernel drops the passed doorbell fd) and the connection stays usable. */
	for (i = 0; i < 4; i++) {
		struct rc_chan ch;

		rc = rc_chan_open(&held[0], &ch, 0);
		if (rc == 0)
			assert_int_equal(rc_chan_close(&ch), 0);
		else
			assert_int_equal(rc, -EMFILE);
		assert_int_equal(rc_contains(&held[0], 1), 0);
	}

	/* libcoffer reports the refusal as the store said it, -EMFILE (at accept, or answering
	 * HELLO when its doorbells find no fd): a status docs/protocol.md gives HELLO, never
	 * the broken store's -EPROTO. */
	{
		coffer_handle_t lc;

		assert_int_equal(coffer_connect(g_store.sock, &lc), -EMFILE);
	}
	/* ... and a CHANNEL_OPEN refused for want of fds (its doorbell dropped by the kernel,
	 * or no fd for the rings) reaches the call that needed the channel as -EMFILE: one
	 * channel per EQ, each holding its doorbell's fd in the store, until one is refused
	 * (the refusals above may have left the store a few fds) */
	for (neq = 0; neq < LIB_EQS; neq++) {
		struct coffer_event *done;

		assert_int_equal(coffer_eq_create(&eqs[neq]), 0);
		assert_int_equal(coffer_event_init(&evs[neq], eqs[neq], NULL), 0);
		rc = coffer_obj_contains(lc0, &oid, &present, &evs[neq]);
		if (rc != 0) {
			neq++;
			break;
		}
		assert_int_equal(coffer_eq_poll(eqs[neq], 1, 10 * 1000 * 1000, 1, &done), 1);
		assert_int_equal(evs[neq].ev_error, 0);
	}
	assert_int_equal(rc, -EMFILE);
	for (i = 0; i < neq; i++) {
		assert_int_equal(coffer_event_fini(&evs[i]), 0);
		assert_int_equal(coffer_eq_destroy(eqs[i], 0), 0);
	}

	/* The clients it has still work. */
	for (i = 0; i < nheld; i++) {
		const void *d;
		uint64_t sz;

		assert_int_equal(rc_put(&held[i], 100 + (uint64_t)i, 4096, i), 0);
		assert_int_equal(rc_get(&held[i], 100 + (uint64_t)i, 0, &d, &sz), 0);
		assert_int_equal(((const unsigned char *)d)[4095], (unsigned char)i);
		assert_int_equal(rc_release(&held[i], 100 + (uint64_t)i), 0);
		assert_int_equal(rc_delete(&held[i], 100 + (uint64_t)i), 0);
	}
	/* Some leave: new clients get in again (the store may have paused listening). */
	for (i = nheld / 2; i < nheld; i++)
		rc_close(&held[i]);
	nheld /= 2;
	for (i = 0; i < 200; i++) {
		struct rc_conn n;

		if (rc_connect(&n, g_store.sock) == 0) {
			assert_int_equal(rc_put(&n, 5, 10, 1), 0);
			assert_int_equal(rc_delete(&n, 5), 0);
			rc_close(&n);
			break;
		}
		rel_sleep_us(10000);
	}
	assert_true(i < 200);
	/* the refusal was not fatal: with fds free again the channel opens */
	assert_int_equal(coffer_obj_contains(lc0, &oid, &present, NULL), 0);
	assert_false(present);
	assert_int_equal(coffer_disconnect(lc0), 0);
	settle(&held[0], (uint64_t)nheld, &info);
	assert_int_equal(info.used_bytes, 0);
	for (i = 0; i < nheld; i++)
		rc_close(&held[i]);
	stop();
}

/* ------------------------------------------------------------------ pinned full, too big */

static void test_pinned_full(void **state)
{
	struct coffer_store_info info;
	struct rc_conn a, b;
	uint64_t n = 0, i, sealed_free;
	const uint64_t obj = 1 << 20;
	long t;
	int rc;

	(void)state;
	start("16M");
	assert_int_equal(rc_connect(&a, g_store.sock), 0);
	assert_int_equal(rc_connect(&b, g_store.sock), 0);
	/* One sealed object nobody holds (evictable), 512 KiB. */
	assert_int_equal(rc_put(&a, 1000, obj / 2, 0x11), 0);
	sealed_free = 1;
	/* Fill: even ids sealed and held by b (pinned by a reference), odd ids unsealed. */
	for (;;) {
		void *p;

		rc = rc_create(&a, 1 + n, obj, 0, &p);
		if (rc != 0)
			break;
		rel_fill(p, obj, n);
		if (n % 2 == 0) {
			const void *d;
			uint64_t sz;

			assert_int_equal(rc_seal(&a, 1 + n, COFFER_SEAL_RELEASE), 0);
			assert_int_equal(rc_get(&b, 1 + n, 0, &d, &sz), 0);
		}
		n++;
		assert_true(n < 64);
	}
	/* The first failure came from filling up; evicting the 512 KiB object could not
	 * have made room for 1 MiB... unless fragmentation allowed it: either way now the
	 * store is full of pinned objects plus at most that one. */
	assert_true(rc == -ENOMEM);
	t = rel_now_ms();
	rc = rc_create(&a, 999, obj, 0, NULL);
	t = rel_now_ms() - t;
	assert_int_equal(rc, -ENOMEM);
	assert_true(t < PROMPT_MS);
	assert_int_equal(rc_query(&a, &info), 0);
	printf("pinned-full: %llu pinned 1 MiB objects in a 16 MiB arena; create -> -ENOMEM in "
	       "%ld ms; evictions %llu\n",
	       (unsigned long long)n, t, (unsigned long long)info.evictions);
	assert_true(info.evictions <= sealed_free);
	/* Nothing pinned was evicted: every sealed pinned object reads back intact. */
	for (i = 0; i < n; i += 2) {
		const void *d;
		uint64_t sz;

		assert_int_equal(rc_get(&b, 1 + i, 0, &d, &sz), 0);
		assert_int_equal(sz, obj);
		assert_int_equal(rel_verify(d, sz), 0);
		assert_int_equal(rc_release(&b, 1 + i), 0);
	}
	assert_int_equal(rc_query(&a, &info), 0);
	assert_int_equal(info.objects_created, n / 2);
	/* Disconnect both: unsealed aborted, references dropped; then delete the rest. */
	rc_close(&a);
	rc_close(&b);
	assert_int_equal(rc_connect(&a, g_store.sock), 0);
	settle(&a, 1, &info);
	for (i = 0; i < n; i += 2)
		assert_int_equal(rc_delete(&a, 1 + i), 0);
	(void)rc_delete(&a, 1000);
	assert_int_equal(rc_query(&a, &info), 0);
	assert_int_equal(info.used_bytes, 0);
	assert_int_equal(info.objects_created + info.objects_sealed, 0);
	rc_close(&a);
	stop();
}

static void test_too_big(void **state)
{
	struct coffer_store_info info;
	struct coffer_oid oid;
	coffer_handle_t c, oh;
	struct rc_conn a;
	void *p;
	long t;

	(void)state;
	start("8M");
	assert_int_equal(rc_connect(&a, g_store.sock), 0);
	t = rel_now_ms();
	assert_int_equal(rc_create(&a, 1, a.arena_bytes + 1, 0, NULL), -E2BIG);
	assert_int_equal(rc_create(&a, 1, UINT64_MAX, 0, NULL), -E2BIG);
	assert_true(rel_now_ms() - t < PROMPT_MS);
	/* a failed create leaves no trace: the same ID works with a fitting size */
	assert_int_equal(rc_put(&a, 1, 4096, 7), 0);
	assert_int_equal(rc_delete(&a, 1), 0);

	assert_int_equal(coffer_connect(g_store.sock, &c), 0);
	rel_oid(&oid, 2);
	assert_int_equal(coffer_obj_open(c, &oid, 0, &oh), 0);
	t = rel_now_ms();
	assert_int_equal(coffer_obj_create(oh, 1ull << 40, 0, &p, NULL), -E2BIG);
	assert_true(rel_now_ms() - t < PROMPT_MS);
	assert_int_equal(coffer_obj_close(oh), 0);
	assert_int_equal(coffer_disconnect(c), 0);
	settle(&a, 1, &info);
	assert_int_equal(info.used_bytes, 0);
	rc_close(&a);
	stop();
}

/* ------------------------------------------------------------------ client fd limit */

/* The lowest free descriptor number: fds are handed out lowest first, so a soft
 * RLIMIT_NOFILE of this + 1 leaves room for exactly one more. */
static int lowest_free_fd(void)
{
	int fd = dup(0);

	assert_true(fd >= 0);
	close(fd);
	return fd;
}

/*
 * The client at its own fd limit: an EQ's first request on a connection opens its channel,
 * and the store's reply carries the channel's two fds, which the kernel cannot install.
 * The request fails with -EMFILE (also when one of the two fds fit: it said -EPROTO then)
 * - and the channel the store opened for it must not stay behind. It did: every such failure left
 * one channel (3 fds and a ring) in the store until disconnect, and after 64 of them (the store's
 * limit per connection) the connection could open no channel at all, with fds to spare again.
 */
static void test_client_fd_limit(void **state)
{
	struct coffer_store_info info;
	struct rel_proc p0, p1;
	struct rlimit old, low;
	struct coffer_event ev, *done;
	struct coffer_oid oid;
	coffer_handle_t c, eq;
	struct rc_conn a;
	bool present;
	int rc;

	(void)state;
	start("8M");
	assert_int_equal(rc_connect(&a, g_store.sock), 0);
	assert_int_equal(coffer_connect(g_store.sock, &c), 0);
	settle(&a, 2, &info);
	assert_int_equal(rel_proc_sample(g_store.pid, &p0), 0);
	rel_oid(&oid, 1);
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	/* connect with room for nothing, the socket, or the socket and one to four of
	 * HELLO_REPLY's five fds: -EMFILE (with some of them it was -EPROTO), and no fd of
	 * ours is left */
	for (int room = 0; room < 6; room++) {
		coffer_handle_t c2;
		int lowest = lowest_free_fd();

		low = old;
		low.rlim_cur = (rlim_t)lowest + (rlim_t)room;
		assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
		rc = coffer_connect(g_store.sock, &c2);
		assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
		assert_int_equal(rc, -EMFILE);
		assert_int_equal(lowest_free_fd(), lowest);
	}
	for (int i = 0; i < 600; i++) { /* more than the store's 512 channels per connection */
		low = old;
		/* room for the EQ's eventfd, not for the reply's ring fd (the kernel drops it) */
		low.rlim_cur = (rlim_t)lowest_free_fd() + 1;
		assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
		rc = coffer_eq_create(&eq);
		if (rc == 0) {
			rc = coffer_event_init(&ev, eq, NULL);
			if (rc == 0)
				rc = coffer_obj_contains(c, &oid, &present, &ev);
		}
		assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
		assert_int_equal(rc, -EMFILE);
		assert_int_equal(coffer_event_fini(&ev), 0);
		assert_int_equal(coffer_eq_destroy(eq, 0), 0);
	}
	/* nothing of those channels is left in the store */
	assert_int_equal(rel_proc_sample(g_store.pid, &p1), 0);
	assert_int_equal(p1.fds, p0.fds);
	/* with fds to spare, the connection opens a channel again */
	assert_int_equal(coffer_eq_create(&eq), 0);
	assert_int_equal(coffer_event_init(&ev, eq, NULL), 0);
	assert_int_equal(coffer_obj_contains(c, &oid, &present, &ev), 0);
	assert_int_equal(coffer_eq_poll(eq, 0, -1, 1, &done), 1);
	assert_int_equal(ev.ev_error, 0);
	assert_false(present);
	assert_int_equal(coffer_event_fini(&ev), 0);
	assert_int_equal(coffer_eq_destroy(eq, 0), 0);
	assert_int_equal(coffer_disconnect(c), 0);
	settle(&a, 1, &info);
	assert_int_equal(info.used_bytes, 0);
	rc_close(&a);
	stop();
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_connect_cycles, teardown),
	    cmocka_unit_test_teardown(test_fd_limit, teardown),
	    cmocka_unit_test_teardown(test_pinned_full, teardown),
	    cmocka_unit_test_teardown(test_too_big, teardown),
	    cmocka_unit_test_teardown(test_client_fd_limit, teardown),
	};

	if (getenv("COFFER_STORE_EXE") == NULL) {
		printf("skip: COFFER_STORE_EXE is not set\n");
		return 77;
	}
	signal(SIGPIPE, SIG_IGN);
	if (argc > 1)
		g_cycles = strtoul(argv[1], NULL, 10);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
