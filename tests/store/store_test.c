/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/store/store_test.c - integration tests of coffer-store's semantics (issue 5): each
 * test starts a real store on a temporary socket (tests/store/rawclient.c), drives it through
 * the raw protocol (socket REQUEST path and channel rings), and ends by checking that the
 * store's used bytes are back to what the sealed objects hold and that it stops cleanly.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/store/rawclient.h"

#define KiB 1024ull
#define MiB (1024ull * 1024ull)

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

struct fx {
	struct rc_store st;
	struct rc_conn a, b;
};

static int start_with(void **state, const char *const *args)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (f == NULL || rc_store_start(&f->st, args) != 0) {
		free(f);
		return -1;
	}
	if (rc_connect(&f->a, f->st.sock) != 0 || rc_connect(&f->b, f->st.sock) != 0) {
		rc_store_stop(&f->st);
		free(f);
		return -1;
	}
	*state = f;
	return 0;
}

static int setup16(void **state)
{
	static const char *const args[] = {"-m", "16M", "--hugepages=off", NULL};

	return start_with(state, args);
}

/* setup16 for a store started with @spin_us (NULL: the default) and no periodic sweep of
 * every channel (an hour): the sweep is a safety net that would hide a lost doorbell for
 * 100 ms; without it a request the doorbell handshake loses hangs, and the test's 5 s bound
 * fails. */
static int setup16_env(void **state, const char *spin_us)
{
	int rc;

	setenv("COFFER_STORE_SWEEP_US", "3600000000", 1);
	if (spin_us)
		setenv("COFFER_STORE_SPIN_US", spin_us, 1);
	rc = setup16(state);
	unsetenv("COFFER_STORE_SWEEP_US");
	unsetenv("COFFER_STORE_SPIN_US");
	return rc;
}

static int setup16_nosweep(void **state)
{
	return setup16_env(state, NULL);
}

/* As setup16_nosweep, and the store never sleeps during a test: it spins for 1 s after
 * any activity (COFFER_STORE_SPIN_US). */
static int setup16_awake(void **state)
{
	return setup16_env(state, "1000000");
}

/* Exactly 1 MiB of ordinary memory: eviction and capacity tests count bytes. */
/* setup16 against coffer-store-sendcount (send_count.c: each send failing EAGAIN logged). */
static int setup16_sendcount(void **state)
{
	const char *exe = getenv("COFFER_STORE_EXE"),
		   *counting = getenv("COFFER_STORE_SENDCOUNT_EXE");
	char saved[512];
	int rc;

	if (exe == NULL || counting == NULL)
		return -1;
	snprintf(saved, sizeof(saved), "%s", exe);
	setenv("COFFER_STORE_EXE", counting, 1);
	rc = setup16(state);
	setenv("COFFER_STORE_EXE", saved, 1);
	return rc;
}

static int setup1m(void **state)
{
	static const char *const args[] = {"-m", "1M", "--hugepages=off", NULL};

	return start_with(state, args);
}

static int teardown(void **state)
{
	struct fx *f = *state;
	int rc;

	rc_close(&f->a);
	rc_close(&f->b);
	rc = rc_store_stop(&f->st);
	free(f);
	assert_int_equal(rc, 0); /* clean exit, socket removed */
	return 0;
}

static uint64_t used(struct fx *f)
{
	struct coffer_store_info info;

	assert_int_equal(rc_query(&f->a, &info), 0);
	assert_true(info.used_bytes <= info.capacity_bytes);
	return info.used_bytes;
}

static void wait_used(struct fx *f, uint64_t want)
{
	long deadline = now_ms() + 5000;
	uint64_t u;

	while ((u = used(f)) != want && now_ms() < deadline)
		usleep(2000);
	assert_int_equal(u, want);
}

/* ------------------------------------------------------------------ basic rules */

static void test_create_seal_get_release(void **state)
{
	struct fx *f = *state;
	const void *d;
	uint64_t size;
	void *p;

	assert_int_equal(rc_create(&f->a, 1, 1000, 0, &p), 0);
	memset(p, 0x5a, 1000);
	assert_int_equal(used(f), 1024);			   /* rounded to 64 bytes */
	assert_int_equal(rc_contains(&f->b, 1), 0);		   /* not sealed yet */
	assert_int_equal(rc_get(&f->b, 1, 0, &d, &size), -ENOENT); /* invisible */
	assert_int_equal(rc_seal(&f->a, 1, 0), 0);
	assert_int_equal(rc_contains(&f->b, 1), 1);
	assert_int_equal(rc_get(&f->b, 1, 0, &d, &size), 0);
	assert_int_equal(size, 1000);
	assert_int_equal(((const unsigned char *)d)[0], 0x5a);
	assert_int_equal(((const unsigned char *)d)[999], 0x5a);
	assert_int_equal(rc_release(&f->b, 1), 0);
	assert_int_equal(rc_release(&f->b, 1), -ENOENT); /* B holds nothing more */
	assert_int_equal(rc_release(&f->a, 1), 0);	 /* the creator's reference */
	assert_int_equal(rc_release(&f->a, 1), -ENOENT);
	assert_int_equal(rc_contains(&f->a, 1), 1); /* sealed objects stay until evicted */
	assert_int_equal(rc_delete(&f->a, 1), 0);
	assert_int_equal(used(f), 0);
	assert_int_equal(rc_delete(&f->a, 1), -ENOENT);
}

static void test_eexist_and_no_trace(void **state)
{
	struct fx *f = *state;

	assert_int_equal(rc_create(&f->a, 2, 100, 0, NULL), 0);
	assert_int_equal(rc_create(&f->a, 2, 100, 0, NULL), -EEXIST);
	assert_int_equal(rc_create(&f->b, 2, 100, 0, NULL), -EEXIST);
	assert_int_equal(rc_create(&f->b, 2, 100, COFFER_CREATE_REPLACE, NULL), -EEXIST);
	assert_int_equal(rc_seal(&f->a, 2, COFFER_SEAL_RELEASE), 0);
	assert_int_equal(rc_create(&f->b, 2, 100, 0, NULL), -EEXIST);
	/* A failed create leaves no trace: too big, then the same ID with a good size. */
	assert_int_equal(rc_create(&f->a, 3, 1ull << 40, 0, NULL), -E2BIG);
	assert_int_equal(rc_contains(&f->a, 3), 0);
	assert_int_equal(rc_create(&f->a, 3, 64, 0, NULL), 0);
	assert_int_equal(rc_abort(&f->a, 3), 0);
	assert_int_equal(rc_delete(&f->a, 2), 0);
	assert_int_equal(used(f), 0);
}

static void test_seal_rules(void **state)
{
	struct fx *f = *state;

	assert_int_equal(rc_seal(&f->a, 4, 0), -ENOENT);
	assert_int_equal(rc_create(&f->a, 4, 128, 0, NULL), 0);
	assert_int_equal(rc_seal(&f->b, 4, 0), -EPERM); /* not the creator */
	assert_int_equal(rc_abort(&f->b, 4), -EPERM);	/* nor may others abort it */
	assert_int_equal(rc_delete(&f->b, 4), -EBUSY);	/* unsealed: creator must finish */
	assert_int_equal(rc_seal(&f->a, 4, 0), 0);
	assert_int_equal(rc_seal(&f->a, 4, 0), -EALREADY);
	assert_int_equal(rc_seal(&f->b, 4, 0), -EALREADY);
	assert_int_equal(rc_abort(&f->a, 4), -EALREADY);
	assert_int_equal(rc_release(&f->a, 4), 0);
	assert_int_equal(rc_delete(&f->a, 4), 0);
	/* abort discards the caller's object; the ID is free again. */
	assert_int_equal(rc_create(&f->a, 5, 4096, 0, NULL), 0);
	assert_int_equal(rc_abort(&f->a, 5), 0);
	assert_int_equal(rc_abort(&f->a, 5), -ENOENT);
	assert_int_equal(rc_create(&f->b, 5, 64, 0, NULL), 0);
	assert_int_equal(rc_abort(&f->b, 5), 0);
	assert_int_equal(used(f), 0);
}

static void test_zero_bytes_and_zero_oid(void **state)
{
	struct fx *f = *state;
	const void *d;
	uint64_t size = 99;

	assert_int_equal(rc_create(&f->a, 0, 0, 0, NULL), 0); /* all-zero ID, 0 bytes */
	assert_int_equal(rc_seal(&f->a, 0, COFFER_SEAL_RELEASE), 0);
	assert_int_equal(rc_contains(&f->b, 0), 1);
	assert_int_equal(rc_get(&f->b, 0, 0, &d, &size), 0);
	assert_int_equal(size, 0);
	assert_int_equal(used(f), 0);
	assert_int_equal(rc_release(&f->b, 0), 0);
	assert_int_equal(rc_delete(&f->b, 0), 0);
	assert_int_equal(rc_contains(&f->a, 0), 0);
}

static void test_get_batch_duplicates_and_bad_fields(void **state)
{
	struct fx *f = *state;
	struct coffer_req r[4];
	struct coffer_rep rep[4];

	assert_int_equal(rc_put(&f->a, 6, 256, 1), 0);
	rc_req_init(&f->b, &r[0], COFFER_OP_GET, 6);
	rc_req_init(&f->b, &r[1], COFFER_OP_GET, 6);
	rc_req_init(&f->b, &r[2], COFFER_OP_GET, 6);
	r[2].offset = 1; /* a field GET does not take: -EINVAL for this request only */
	rc_req_init(&f->b, &r[3], COFFER_OP_CONTAINS, 6);
	assert_int_equal(rc_batch(&f->b, r, 4, rep, 4, 5000), 4);
	assert_int_equal(rep[0].tag, r[0].tag);
	assert_int_equal(rep[0].status, 0);
	assert_int_equal(rep[1].status, 0);
	assert_int_equal(rep[0].offset, rep[1].offset);
	assert_int_equal(rep[2].status, -EINVAL);
	assert_int_equal(rep[3].status, 0);
	assert_int_equal(rep[3].size, 1);
	assert_int_equal(rc_release(&f->b, 6), 0);
	assert_int_equal(rc_release(&f->b, 6), 0);
	assert_int_equal(rc_release(&f->b, 6), -ENOENT);
	assert_int_equal(rc_delete(&f->a, 6), 0);
	assert_int_equal(used(f), 0);
}

static void test_get_waits_without_blocking_store(void **state)
{
	struct fx *f = *state;
	struct coffer_req r[2];
	struct coffer_rep rep[2];
	long t0;

	/* A waits 2 s for 7 (never created) and forever for 8. A store that sat out A's wait
	 * would answer 7's timeout before 8's seal; one that serves B meanwhile answers 8's
	 * get first, however slowly a loaded machine runs B's calls (within 2 s). */
	rc_req_init(&f->a, &r[0], COFFER_OP_GET, 7);
	r[0].timeout_us = 2000000;
	rc_req_init(&f->a, &r[1], COFFER_OP_GET, 8);
	r[1].timeout_us = -1;
	t0 = now_ms();
	assert_int_equal(rc_batch(&f->a, r, 2, rep, 0, 0), 0);
	/* Meanwhile B is served (a late 7 timeout would come first: checked below). */
	assert_int_equal(rc_put(&f->b, 9, 64, 2), 0);
	assert_int_equal(rc_contains(&f->b, 9), 1);
	/* B creates 8 and seals it: A's forever-get completes with it. */
	assert_int_equal(rc_put(&f->b, 8, 640, 3), 0);
	assert_int_equal(rc_recv_reps(&f->a, rep, 1, 5000), 1);
	assert_int_equal(rep[0].tag, r[1].tag);
	assert_int_equal(rep[0].status, 0);
	assert_int_equal(rep[0].size, 640);
	assert_int_equal(((unsigned char *)f->a.arena)[rep[0].offset], 3);
	/* Then the timeout of 7. */
	assert_int_equal(rc_recv_reps(&f->a, rep, 1, 5000), 1);
	assert_int_equal(rep[0].tag, r[0].tag);
	assert_int_equal(rep[0].status, -ENOENT);
	assert_true(now_ms() - t0 >= 1990);
	assert_int_equal(rc_release(&f->a, 8), 0);
	assert_int_equal(rc_delete(&f->a, 8), 0);
	assert_int_equal(rc_delete(&f->a, 9), 0);
	assert_int_equal(used(f), 0);
}

/*
 * Marks each reply of the REPLY message @buf (its checked header @h) in @seen, indexed by
 * its tag less @first_tag (below @n); fails the test on a reply outside that range, one
 * seen before (a reply delivered twice) or a failed one. Returns how many it marked.
 */
static unsigned int mark_replies_once(const unsigned char *buf, const struct coffer_msg_hdr *h,
				      uint64_t first_tag, uint64_t n, unsigned char *seen)
{
	for (unsigned int i = 0; i < h->count; i++) {
		struct coffer_rep rep;
		uint64_t k;

		memcpy(&rep, buf + sizeof(*h) + i * sizeof(rep), sizeof(rep));
		k = rep.tag - first_tag;
		assert_true(k < n);
		assert_int_equal(seen[k], 0);
		seen[k] = 1;
		assert_int_equal(rep.status, 0);
	}
	return h->count;
}

/*
 * Reads from @c (into @buf, @cap bytes) the replies to @queries QUERYs and to @n requests
 * tagged @first_tag.. @first_tag + @n - 1, each exactly once (mark_replies_once() in @seen),
 * then checks that nothing more comes.
 */
static void read_all_once(struct rc_conn *c, unsigned char *buf, size_t cap, unsigned int queries,
			  uint64_t first_tag, uint64_t n, unsigned char *seen)
{
	unsigned int query_replies = 0;
	uint64_t replies = 0;

	while (query_replies < queries || replies < n) {
		struct coffer_msg_hdr h;
		long len = rc_recv_msg(c, buf, cap, NULL, NULL, 5000);

		assert_true(len > 0); /* 0: closed; -ETIMEDOUT: a reply lost */
		assert_int_equal(coffer__msg_check(buf, (size_t)len, &h), 0);
		if (h.type == COFFER_MSG_QUERY_REPLY) {
			query_replies++;
			continue;
		}
		assert_int_equal(h.type, COFFER_MSG_REPLY);
		replies += mark_replies_once(buf, &h, first_tag, n, seen);
	}
	assert_int_equal(query_replies, queries);
	assert_int_equal(rc_recv_msg(c, buf, cap, NULL, NULL, 100), -ETIMEDOUT);
}

/*
 * More deferred socket replies than one REPLY holds, all due while the client's socket is
 * full and one reply already waits in the store (tools/store.c: sess_send(),
 * flush_sock_reps()): once the client reads, every request has exactly one reply - each
 * waiting get, each immediate one, each QUERY - none lost, none twice. And a client that
 * hangs up while the store holds a reply carrying an fd (CHANNEL_OPEN_REPLY's memfd) or a
 * HELLO_REPLY (the store's own arena and index fds, by number) costs the store no fd, and
 * the store serves on.
 */
static void test_deferred_replies_full_socket(void **state)
{
	enum { BATCHES = 3, CONTAINS = 10 };
	static unsigned char buf[COFFER_MSG_MAX_BYTES + 64];
	static unsigned char seen[BATCHES * COFFER_MSG_BATCH_MAX + CONTAINS];
	struct fx *f = *state;
	struct coffer_req r[COFFER_MSG_BATCH_MAX];
	struct coffer_store_info info;
	struct coffer_msg_hdr qh;
	struct {
		struct coffer_msg_hdr h;
		struct coffer_chan_open o;
	} co = {.o = {.ring_entries = 8}};
	struct rc_conn c;
	uint64_t first_tag = 0;
	unsigned int i, b, n = 0, queries;
	long sent;
	int fds0 = rc_count_fds(f->st.pid), efd;

	assert_int_equal(rc_create(&f->b, 1, 4096, 0, NULL), 0);
	for (b = 0; b < BATCHES; b++) {
		for (i = 0; i < COFFER_MSG_BATCH_MAX; i++) {
			rc_req_init(&f->a, &r[i], COFFER_OP_GET, 1);
			r[i].timeout_us = -1;
			if (n++ == 0)
				first_tag = r[i].tag;
		}
		assert_int_equal(rc_batch(&f->a, r, COFFER_MSG_BATCH_MAX, NULL, 0, 0), 0);
	}
	for (i = 0; i < CONTAINS; i++, n++)
		rc_req_init(&f->a, &r[i], COFFER_OP_CONTAINS, 2);
	assert_int_equal(rc_batch(&f->a, r, CONTAINS, NULL, 0, 0), 0);
	coffer__msg_hdr_init(&qh, COFFER_MSG_QUERY, 0, sizeof(qh));
	sent = rc_flood(&f->a, &qh, sizeof(qh), -1, 300);
	assert_true(sent > 0);
	queries = (unsigned int)sent;
	/* every get's reply is due now, a's socket full */
	assert_int_equal(rc_seal(&f->b, 1, COFFER_SEAL_RELEASE), 0);
	read_all_once(&f->a, buf, sizeof(buf), queries, first_tag, n, seen);

	/* hang-ups with a reply held by the store: one carrying an fd, then a HELLO_REPLY */
	efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	assert_true(efd >= 0);
	coffer__msg_hdr_init(&co.h, COFFER_MSG_CHANNEL_OPEN, 0, sizeof(co));
	assert_int_equal(rc_connect(&c, f->st.sock), 0);
	assert_true(rc_flood(&c, &co, sizeof(co), efd, 300) > 0);
	rc_close(&c);
	close(efd);
	assert_int_equal(rc_connect_raw(&c, f->st.sock), 0);
	assert_true(rc_flood(&c, &qh, sizeof(qh), -1, 300) > 0);
	/* Not a blocking send: the store reads no more of this client (its reply waits for room
	 * in our socket, which we never read), so a send that finds our socket full would wait
	 * for good - the test hung so in CI. Mostly the HELLO fits (then the store holds its
	 * HELLO_REPLY); when it does not, the hang-up leaves a QUERY_REPLY held instead. */
	coffer__msg_hdr_init(&qh, COFFER_MSG_HELLO, 0, sizeof(qh));
	sent = coffer__send_fds(c.fd, &qh, sizeof(qh), NULL, 0, MSG_DONTWAIT);
	assert_true(sent == (long)sizeof(qh) || sent == -EAGAIN);
	rc_close(&c);
	for (i = 0; i < 500; i++) { /* closed clients are reaped asynchronously */
		assert_int_equal(rc_query(&f->b, &info), 0);
		if (info.clients == 2 && rc_count_fds(f->st.pid) == fds0)
			break;
		usleep(10000);
	}
	assert_int_equal(info.clients, 2);
	assert_int_equal(rc_count_fds(f->st.pid), fds0);
	for (i = 0; i < BATCHES * COFFER_MSG_BATCH_MAX; i++)
		assert_int_equal(rc_release(&f->a, 1), 0);
	assert_int_equal(rc_delete(&f->a, 1), 0);
	assert_int_equal(used(f), 0);
}

/* Sends @n requests @op on ObjectIDs first..first+n-1 (@size each), a batch a message, and
 * asserts that each is answered 0. */
static void each_ok(struct rc_conn *c, uint16_t op, uint64_t first, unsigned int n, uint64_t size)
{
	static struct coffer_req r[COFFER_MSG_BATCH_MAX];
	static struct coffer_rep rep[COFFER_MSG_BATCH_MAX];

	for (unsigned int done = 0; done < n;) {
		unsigned int k = n - done < COFFER_MSG_BATCH_MAX ? n - done : COFFER_MSG_BATCH_MAX;

		for (unsigned int i = 0; i < k; i++) {
			rc_req_init(c, &r[i], op, first + done + i);
			r[i].size = size;
		}
		assert_int_equal(rc_batch(c, r, k, rep, k, 5000), (int)k);
		for (unsigned int i = 0; i < k; i++)
			assert_int_equal(rep[i].status, 0);
		done += k;
	}
}

/* Lines of @st's log (its stderr) that contain @what. */
static unsigned int log_count(const struct rc_store *st, const char *what)
{
	char path[160], line[512];
	unsigned int n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/store.log", st->dir);
	f = fopen(path, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f) != NULL)
		n += strstr(line, what) != NULL;
	fclose(f);
	return n;
}

/*
 * A client stops reading while the store wakes its waiting gets one at a time (a seal each):
 * from the send that finds its socket full, the store sends it nothing until the socket has
 * room again (EPOLLOUT) - it used to make a send failing with EAGAIN for every get woken, a
 * few thousand here - and meanwhile it idles. When the client reads again, every reply comes
 * exactly once and the store reads the client again.
 */
static void test_full_socket_no_send_per_delivery(void **state)
{
	/* the most socket gets one client may have waiting (COFFER_OT_SOCK_WAITERS_MAX); each
	 * wakes alone, so its reply is a message of its own, and some hundred fill a socket */
	enum { N = 4096, OID = 1000 };
	static unsigned char buf[COFFER_MSG_MAX_BYTES + 64];
	static unsigned char seen[N];
	static struct coffer_req r[COFFER_MSG_BATCH_MAX];
	struct fx *f = *state;
	struct coffer_store_info info;
	uint64_t first_tag = f->a.next_tag;
	unsigned int i, replies = 0, sent_full;
	long t0, t1;

	each_ok(&f->b, COFFER_OP_CREATE, OID, N, 64);
	for (unsigned int done = 0; done < N; done += COFFER_MSG_BATCH_MAX) {
		for (i = 0; i < COFFER_MSG_BATCH_MAX; i++) {
			rc_req_init(&f->a, &r[i], COFFER_OP_GET, OID + done + i);
			r[i].timeout_us = -1;
		}
		/* the store reads us: nothing of ours waits for room yet */
		assert_int_equal(rc_batch(&f->a, r, COFFER_MSG_BATCH_MAX, NULL, 0, 0), 0);
	}
	assert_int_equal(rc_query(&f->a, &info), 0); /* every get read and waiting */
	assert_int_equal(log_count(&f->st, "coffer-test: send EAGAIN"), 0);
	for (i = 0; i < N; i++)
		assert_int_equal(rc_seal(&f->b, OID + i, COFFER_SEAL_RELEASE), 0);
	/* a's socket filled (one send found it full), and nothing was sent into it after that */
	sent_full = log_count(&f->st, "coffer-test: send EAGAIN");
	assert_int_equal(sent_full, 1);
	/* and the store idles (ticks of CPU it used, not time) */
	t0 = rc_cpu_ticks(f->st.pid);
	usleep(300000);
	t1 = rc_cpu_ticks(f->st.pid);
	assert_true(t0 >= 0 && t1 - t0 <= 2);

	while (replies < N) {
		struct coffer_msg_hdr h;
		long len = rc_recv_msg(&f->a, buf, sizeof(buf), NULL, NULL, 5000);

		assert_true(len > 0); /* 0: closed; -ETIMEDOUT: a reply lost */
		assert_int_equal(coffer__msg_check(buf, (size_t)len, &h), 0);
		assert_int_equal(h.type, COFFER_MSG_REPLY);
		replies += mark_replies_once(buf, &h, first_tag, N, seen);
	}
	/* all out: the store reads us again (EPOLLOUT dropped), and nothing more comes */
	assert_int_equal(rc_query(&f->a, &info), 0);
	assert_int_equal(rc_recv_msg(&f->a, buf, sizeof(buf), NULL, NULL, 100), -ETIMEDOUT);
	each_ok(&f->a, COFFER_OP_RELEASE, OID, N, 0);
	each_ok(&f->b, COFFER_OP_DELETE, OID, N, 0);
	assert_int_equal(used(f), 0);
}

/* The number of clients the store reports to @c. */
static uint64_t clients(struct rc_conn *c)
{
	struct coffer_store_info info;

	assert_int_equal(rc_query(c, &info), 0);
	return info.clients;
}

/*
 * The end of the half-close tests: b deletes @oidn (a 4096-byte object the half-closed a
 * still holds: the delete waits for a), then a closes; its session, its reference (the
 * object goes) and its two fds in the store (socket and doorbell; @fds0 the store's count
 * before a connected) must go with it. Leaves a connected afresh for the fixture.
 */
static void close_a_holding(struct fx *f, uint64_t oidn, int fds0)
{
	struct coffer_store_info info;

	assert_int_equal(rc_delete(&f->b, oidn), 0);
	assert_int_equal(rc_query(&f->b, &info), 0);
	assert_int_equal(info.used_bytes, 4096);
	rc_close(&f->a);
	for (int i = 0; i < 500 && clients(&f->b) != 1; i++)
		usleep(10000);
	assert_int_equal(clients(&f->b), 1);
	assert_int_equal(rc_count_fds(f->st.pid), fds0 - 2);
	assert_int_equal(rc_connect(&f->a, f->st.sock), 0);
	assert_int_equal(used(f), 0);
}

/*
 * A client that shuts its socket down for writing after its requests (shutdown(SHUT_WR), the
 * Unix-socket way to say "that was all") still gets every reply it asked for - a get that
 * waits for a seal, a get that times out - and keeps its session and references until it
 * closes; then everything of it is gone. The store used to close it at the EOF, and the
 * waiting gets' replies were lost.
 */
static void test_half_closed_client_gets_its_replies(void **state)
{
	static unsigned char buf[COFFER_MSG_MAX_BYTES + 64];
	struct fx *f = *state;
	struct coffer_req r[3];
	struct coffer_rep rep[3];
	unsigned int got = 0;
	uint64_t tag_x, tag_y;
	int fds0 = rc_count_fds(f->st.pid);

	assert_int_equal(rc_create(&f->b, 40, 4096, 0, NULL), 0);
	rc_req_init(&f->a, &r[0], COFFER_OP_GET, 40); /* waits for b's seal */
	r[0].timeout_us = -1;
	rc_req_init(&f->a, &r[1], COFFER_OP_GET, 41); /* never created: times out */
	r[1].timeout_us = 200000;
	rc_req_init(&f->a, &r[2], COFFER_OP_CONTAINS, 40); /* answered at once */
	tag_x = r[0].tag;
	tag_y = r[1].tag;
	assert_int_equal(rc_batch(&f->a, r, 3, rep, 1, 5000), 1);
	assert_int_equal(rep[0].tag, r[2].tag);
	assert_int_equal(shutdown(f->a.fd, SHUT_WR), 0);
	/* a's EOF is ready before b's QUERY is sent, so the store handles it in the same
	 * epoll_wait() batch as that QUERY or sooner: before b's seal */
	assert_int_equal(clients(&f->b), 2);
	assert_int_equal(rc_seal(&f->b, 40, COFFER_SEAL_RELEASE), 0);
	while (got < 2) {
		struct coffer_msg_hdr h;
		long len = rc_recv_msg(&f->a, buf, sizeof(buf), NULL, NULL, 5000);

		assert_true(len > 0); /* 0: closed before its replies */
		assert_int_equal(coffer__msg_check(buf, (size_t)len, &h), 0);
		assert_int_equal(h.type, COFFER_MSG_REPLY);
		for (unsigned int i = 0; i < h.count; i++, got++) {
			memcpy(&rep[got], buf + sizeof(h) + i * sizeof(rep[0]), sizeof(rep[0]));
			assert_true(got < 2);
		}
	}
	assert_int_equal(rep[0].tag, tag_x);
	assert_int_equal(rep[0].status, 0);
	assert_int_equal(rep[0].size, 4096);
	assert_int_equal(rep[1].tag, tag_y);
	assert_int_equal(rep[1].status, -ENOENT);
	/* still its session: nothing more comes, and its reference keeps the object */
	assert_int_equal(rc_recv_msg(&f->a, buf, sizeof(buf), NULL, NULL, 100), -ETIMEDOUT);
	assert_int_equal(clients(&f->b), 2);
	close_a_holding(f, 40, fds0);
}

/*
 * An empty message with more behind it, sent just before shutdown(SHUT_WR), is an empty
 * message (a protocol error: the client is closed), not the client's half-close. Taken for
 * the EOF, it stopped the store reading for good with the rest queued in its socket - here
 * a message carrying the client's own socket, which then outlived the client's process
 * (an fd in flight holds its socket open): no hang-up ever came, and the session with its
 * references stayed for the life of the store, unlike any client that goes away.
 */
static void test_empty_message_before_half_close(void **state)
{
	struct fx *f = *state;
	struct coffer_msg_hdr h;
	const void *d;
	uint64_t size;
	int fds0 = rc_count_fds(f->st.pid);

	assert_int_equal(rc_put(&f->b, 60, 4096, 1), 0);
	assert_int_equal(rc_get(&f->a, 60, 0, &d, &size), 0); /* a's reference */
	coffer__msg_hdr_init(&h, COFFER_MSG_QUERY, 0, sizeof(h));
	/* all three are in a's socket before the store reads any of them */
	assert_int_equal(kill(f->st.pid, SIGSTOP), 0);
	assert_int_equal(coffer__send_fds(f->a.fd, &h, 0, NULL, 0, MSG_DONTWAIT), 0);
	assert_int_equal(coffer__send_fds(f->a.fd, &h, sizeof(h), &f->a.fd, 1, MSG_DONTWAIT),
			 (long)sizeof(h));
	assert_int_equal(shutdown(f->a.fd, SHUT_WR), 0);
	assert_int_equal(kill(f->st.pid, SIGCONT), 0);
	rc_close(&f->a); /* a's process would exit here */
	for (int i = 0; i < 500 && clients(&f->b) != 1; i++)
		usleep(10000);
	assert_int_equal(clients(&f->b), 1);
	assert_int_equal(rc_delete(&f->b, 60), 0);	     /* a's reference is gone with it */
	assert_int_equal(rc_count_fds(f->st.pid), fds0 - 2); /* its socket and doorbell */
	assert_int_equal(rc_connect(&f->a, f->st.sock), 0);
	assert_int_equal(used(f), 0);
}

/*
 * A client half-closes while the store holds its replies (its socket full: EPOLLOUT armed)
 * and its waiting gets come due meanwhile: once it reads, every reply comes exactly once,
 * the store finds the EOF behind them and idles (no EPOLLIN on a socket readable for good),
 * the session keeps its references until the client closes, and then nothing is left.
 */
static void test_half_close_with_replies_held(void **state)
{
	static unsigned char buf[COFFER_MSG_MAX_BYTES + 64];
	static unsigned char seen[COFFER_MSG_BATCH_MAX];
	struct fx *f = *state;
	struct coffer_req r[COFFER_MSG_BATCH_MAX];
	struct coffer_msg_hdr qh;
	uint64_t first_tag;
	unsigned int i, queries;
	int fds0 = rc_count_fds(f->st.pid);
	long sent, t0, t1;

	assert_int_equal(rc_create(&f->b, 70, 4096, 0, NULL), 0);
	for (i = 0; i < COFFER_MSG_BATCH_MAX; i++) {
		rc_req_init(&f->a, &r[i], COFFER_OP_GET, 70);
		r[i].timeout_us = -1;
	}
	first_tag = r[0].tag;
	assert_int_equal(rc_batch(&f->a, r, COFFER_MSG_BATCH_MAX, NULL, 0, 0), 0);
	coffer__msg_hdr_init(&qh, COFFER_MSG_QUERY, 0, sizeof(qh));
	sent = rc_flood(&f->a, &qh, sizeof(qh), -1, 300);
	assert_true(sent > 0);
	queries = (unsigned int)sent;
	assert_int_equal(shutdown(f->a.fd, SHUT_WR), 0);
	assert_int_equal(rc_seal(&f->b, 70, COFFER_SEAL_RELEASE), 0); /* due while held */
	read_all_once(&f->a, buf, sizeof(buf), queries, first_tag, COFFER_MSG_BATCH_MAX, seen);
	/* half-closed, served, and the store idles (ticks of CPU it used, not time) */
	assert_int_equal(clients(&f->b), 2);
	t0 = rc_cpu_ticks(f->st.pid);
	usleep(300000);
	t1 = rc_cpu_ticks(f->st.pid);
	assert_true(t0 >= 0 && t1 - t0 <= 2);
	close_a_holding(f, 70, fds0); /* a holds 64 references */
}

static void test_replace_on_seal(void **state)
{
	struct fx *f = *state;
	const void *old, *cur;
	uint64_t size;
	void *p;

	assert_int_equal(rc_put(&f->a, 10, 4096, 'a'), 0);
	assert_int_equal(rc_get(&f->b, 10, 0, &old, &size), 0); /* B reads the old one */
	assert_int_equal(rc_create(&f->a, 10, 4096, COFFER_CREATE_REPLACE, &p), 0);
	/* Offsets, not pointers: A and B map the arena at different addresses. */
	assert_true((char *)p - (char *)f->a.arena != (const char *)old - (char *)f->b.arena);
	memset(p, 'b', 4096);
	/* Not sealed: everyone still sees the old object. */
	assert_int_equal(rc_contains(&f->a, 10), 1);
	assert_int_equal(rc_get(&f->a, 10, 0, &cur, &size), 0);
	assert_int_equal((const char *)cur - (char *)f->a.arena,
			 (const char *)old - (char *)f->b.arena);
	assert_int_equal(rc_release(&f->a, 10), 0); /* drops A's ref on the OLD (current) */
	assert_int_equal(rc_create(&f->b, 10, 64, COFFER_CREATE_REPLACE, NULL), -EEXIST);
	assert_int_equal(rc_seal(&f->b, 10, 0), -EPERM);
	assert_int_equal(used(f), 8192);
	assert_int_equal(rc_seal(&f->a, 10, COFFER_SEAL_RELEASE), 0);
	assert_int_equal(rc_get(&f->a, 10, 0, &cur, &size), 0);
	assert_true((const char *)cur - (char *)f->a.arena !=
		    (const char *)old - (char *)f->b.arena);
	assert_int_equal(((const char *)cur)[4095], 'b');
	/* B still reads the old content, intact, until it releases it. */
	assert_int_equal(((const char *)old)[0], 'a');
	assert_int_equal(((const char *)old)[4095], 'a');
	assert_int_equal(used(f), 8192);
	assert_int_equal(rc_release(&f->b, 10), 0); /* the last ref of the old one: freed */
	assert_int_equal(used(f), 4096);
	assert_int_equal(rc_release(&f->a, 10), 0);
	assert_int_equal(rc_delete(&f->a, 10), 0);
	/* REPLACE without an existing object is a plain create. */
	assert_int_equal(rc_create(&f->a, 11, 64, COFFER_CREATE_REPLACE, NULL), 0);
	assert_int_equal(rc_seal(&f->a, 11, COFFER_SEAL_RELEASE), 0);
	assert_int_equal(rc_delete(&f->a, 11), 0);
	assert_int_equal(used(f), 0);
}

static void test_deferred_delete(void **state)
{
	struct fx *f = *state;
	const void *d;
	uint64_t size;

	assert_int_equal(rc_put(&f->a, 12, 1024, 7), 0);
	assert_int_equal(rc_get(&f->b, 12, 0, &d, &size), 0);
	assert_int_equal(rc_delete(&f->a, 12), 0);
	assert_int_equal(rc_contains(&f->a, 12), 0); /* gone for new gets */
	assert_int_equal(rc_get(&f->a, 12, 0, NULL, NULL), -ENOENT);
	assert_int_equal(used(f), 1024);		       /* still held by B */
	assert_int_equal(((const unsigned char *)d)[1023], 7); /* still readable */
	/* The ID can be reused while the old bytes are held. */
	assert_int_equal(rc_put(&f->a, 12, 64, 8), 0);
	assert_int_equal(rc_release(&f->b, 12), 0); /* releases B's old object */
	assert_int_equal(used(f), 64);
	assert_int_equal(rc_delete(&f->a, 12), 0);
	assert_int_equal(used(f), 0);
}

/* ------------------------------------------------------------------ capacity */

static void test_eviction_order(void **state)
{
	struct fx *f = *state;
	struct coffer_store_info info;

	/* Four 256 KiB objects fill the 1 MiB store; LRU order A B C D. */
	assert_int_equal(rc_put(&f->a, 21, 256 * KiB, 1), 0);
	assert_int_equal(rc_put(&f->a, 22, 256 * KiB, 2), 0);
	assert_int_equal(rc_put(&f->a, 23, 256 * KiB, 3), 0);
	assert_int_equal(rc_put(&f->a, 24, 256 * KiB, 4), 0);
	assert_int_equal(used(f), MiB);
	/* Touch A: order B C D A. */
	assert_int_equal(rc_get(&f->b, 21, 0, NULL, NULL), 0);
	assert_int_equal(rc_release(&f->b, 21), 0);
	assert_int_equal(rc_put(&f->a, 25, 256 * KiB, 5), 0); /* evicts B */
	assert_int_equal(rc_contains(&f->a, 22), 0);
	assert_int_equal(rc_contains(&f->a, 21), 1);
	assert_int_equal(rc_contains(&f->a, 23), 1);
	assert_int_equal(rc_contains(&f->a, 24), 1);
	/* Order C D A E; touch C: D A E C; pin A: D E C evictable. */
	assert_int_equal(rc_get(&f->b, 23, 0, NULL, NULL), 0);
	assert_int_equal(rc_release(&f->b, 23), 0);
	assert_int_equal(rc_get(&f->b, 21, 0, NULL, NULL), 0);
	assert_int_equal(rc_put(&f->a, 26, 256 * KiB, 6), 0); /* evicts D */
	assert_int_equal(rc_contains(&f->a, 24), 0);
	assert_int_equal(rc_put(&f->a, 27, 256 * KiB, 7), 0); /* evicts E, not pinned A */
	assert_int_equal(rc_contains(&f->a, 25), 0);
	assert_int_equal(rc_contains(&f->a, 21), 1);
	assert_int_equal(rc_contains(&f->a, 23), 1);
	assert_int_equal(rc_query(&f->a, &info), 0);
	assert_int_equal(info.evictions, 3);
	assert_int_equal(info.evicted_bytes, 3 * 256 * KiB);
	assert_int_equal(info.objects_sealed, 4);
	assert_int_equal(rc_release(&f->b, 21), 0);
}

static void test_pinned_full_enomem_and_e2big(void **state)
{
	struct fx *f = *state;
	struct coffer_store_info info;
	int i;

	for (i = 0; i < 4; i++)
		assert_int_equal(rc_create(&f->a, 30 + (uint64_t)i, 256 * KiB, 0, NULL), 0);
	assert_int_equal(rc_seal(&f->a, 30, 0), 0); /* sealed but held: pinned */
	assert_int_equal(rc_create(&f->b, 40, 64, 0, NULL), -ENOMEM);
	assert_int_equal(rc_create(&f->b, 41, MiB + 1, 0, NULL), -E2BIG);
	assert_int_equal(rc_create(&f->b, 41, UINT64_MAX, 0, NULL), -E2BIG);
	assert_int_equal(rc_query(&f->a, &info), 0);
	assert_int_equal(info.evictions, 0);
	assert_int_equal(info.objects_created, 3);
	assert_int_equal(info.objects_sealed, 1);
	/* An object as large as the whole arena fits once the rest is gone. */
	for (i = 1; i < 4; i++)
		assert_int_equal(rc_abort(&f->a, 30 + (uint64_t)i), 0);
	assert_int_equal(rc_release(&f->a, 30), 0);
	assert_int_equal(rc_create(&f->b, 42, MiB, 0, NULL), 0); /* evicts 30 */
	assert_int_equal(rc_contains(&f->a, 30), 0);
	assert_int_equal(rc_abort(&f->b, 42), 0);
	assert_int_equal(used(f), 0);
}

static void test_zero_byte_objects_are_bounded(void **state)
{
	struct fx *f = *state;
	static struct coffer_req r[256];
	static struct coffer_rep rep[256];
	struct coffer_store_info info;
	uint64_t id = 1, i;

	/* 0-byte objects take no arena bytes; the store bounds their number instead
	 * (max(capacity / 64, 65536)) and evicts the least recently used past it. */
	while (id <= 65536) {
		for (i = 0; i < 128; i++) {
			rc_req_init(&f->a, &r[2 * i], COFFER_OP_CREATE, 10000000 + id + i);
			rc_req_init(&f->a, &r[2 * i + 1], COFFER_OP_SEAL, 10000000 + id + i);
			r[2 * i + 1].flags = COFFER_SEAL_RELEASE;
		}
		assert_int_equal(rc_batch(&f->a, r, 256, rep, 256, 5000), 256);
		for (i = 0; i < 256; i++)
			assert_int_equal(rep[i].status, 0);
		id += 128;
	}
	assert_int_equal(rc_query(&f->a, &info), 0);
	assert_int_equal(info.objects_sealed, 65536);
	assert_int_equal(info.evictions, 0);
	assert_int_equal(rc_put(&f->a, 5, 0, 0), 0);
	assert_int_equal(rc_query(&f->a, &info), 0);
	assert_int_equal(info.objects_sealed, 65536);
	assert_int_equal(info.evictions, 1);
	assert_int_equal(rc_contains(&f->a, 10000000 + 1), 0); /* the oldest went */
	assert_int_equal(rc_contains(&f->a, 10000000 + 2), 1);
	assert_int_equal(info.used_bytes, 0);
}

/* ------------------------------------------------------------------ clients dying */

/* Child: connect, create X unsealed, put+hold Y, get Z forever, report, sleep. */
static void child_then_killed(const char *sock, int wfd, int phase)
{
	struct rc_conn c;
	struct coffer_req r;
	char ok = 'k';

	if (rc_connect(&c, sock) != 0)
		_exit(1);
	if (rc_create(&c, 100, 64 * KiB, 0, NULL) != 0)
		_exit(2);
	if (phase >= 1 &&
	    (rc_put(&c, 101, 128 * KiB, 9) != 0 || rc_get(&c, 101, 0, NULL, NULL) != 0))
		_exit(3);
	if (phase >= 2) {
		rc_req_init(&c, &r, COFFER_OP_GET, 102);
		r.timeout_us = -1;
		if (rc_batch(&c, &r, 1, NULL, 0, 0) != 0)
			_exit(4);
	}
	if (phase >= 3) { /* also a channel with a waiting get and a half-written ring */
		struct rc_chan ch;

		if (rc_chan_open(&c, &ch, 8) != 0)
			_exit(5);
		rc_req_init(&c, &r, COFFER_OP_GET, 103);
		r.timeout_us = -1;
		if (rc_chan_submit(&ch, &r, 1) != 0)
			_exit(6);
		memset(&ch.reqs[1], 0xff, sizeof(r)); /* written, never published */
	}
	usleep(50000); /* let the store take the requests */
	(void)!write(wfd, &ok, 1);
	pause();
	_exit(0);
}

static void test_client_killed(void **state)
{
	struct fx *f = *state;
	uint64_t base = used(f);
	int phase, fds0 = rc_count_fds(f->st.pid);

	assert_int_equal(rc_put(&f->a, 99, 4096, 1), 0); /* a bystander's sealed object */
	base += 4096;
	for (phase = 0; phase <= 3; phase++) {
		struct coffer_store_info info;
		int pfd[2], status;
		pid_t pid;
		char ch;

		assert_int_equal(pipe(pfd), 0);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			close(pfd[0]);
			child_then_killed(f->st.sock, pfd[1], phase);
		}
		close(pfd[1]);
		assert_int_equal(read(pfd[0], &ch, 1), 1);
		close(pfd[0]);
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		/* Its unsealed object is aborted, its references dropped; a sealed object it
		 * made (101) stays, unreferenced. */
		wait_used(f, base + (phase >= 1 ? 128 * KiB : 0));
		assert_true(rc_store_alive(&f->st));
		assert_int_equal(rc_query(&f->a, &info), 0);
		assert_int_equal(info.clients, 2);
		assert_int_equal(info.objects_created, 0);
		assert_int_equal(rc_contains(&f->a, 100), 0);
		assert_int_equal(rc_create(&f->b, 100, 64, 0, NULL), 0); /* ID free again */
		assert_int_equal(rc_abort(&f->b, 100), 0);
		if (phase >= 1) {
			const void *d;
			uint64_t size;

			assert_int_equal(rc_get(&f->b, 101, 0, &d, &size), 0);
			assert_int_equal(((const unsigned char *)d)[128 * KiB - 1], 9);
			assert_int_equal(rc_release(&f->b, 101), 0);
			assert_int_equal(rc_delete(&f->b, 101), 0);
		}
		/* The waiting gets are gone: sealing 102/103 now must not write to a dead
		 * session (ASan would see it) and the store stays up. */
		assert_int_equal(rc_put(&f->b, 102, 64, 1), 0);
		assert_int_equal(rc_put(&f->b, 103, 64, 1), 0);
		assert_int_equal(rc_delete(&f->b, 102), 0);
		assert_int_equal(rc_delete(&f->b, 103), 0);
	}
	assert_int_equal(used(f), base);
	assert_int_equal(rc_count_fds(f->st.pid), fds0); /* no fd leaked */
	assert_int_equal(rc_delete(&f->a, 99), 0);
}

/* ------------------------------------------------------------------ channels */

static void test_channel_ring_path(void **state)
{
	struct fx *f = *state;
	struct coffer_req r[128];
	struct coffer_rep rep[128];
	struct rc_chan ch, ch2;
	int i;

	assert_int_equal(rc_chan_open(&f->a, &ch, 128), 0);
	assert_int_equal(ch.entries, 128);
	/* 64 creates in one batch, then 64 seals. */
	for (i = 0; i < 64; i++) {
		rc_req_init(&f->a, &r[i], COFFER_OP_CREATE, 1000 + (uint64_t)i);
		r[i].size = 100;
	}
	assert_int_equal(rc_chan_submit(&ch, r, 64), 0);
	assert_int_equal(rc_chan_wait(&ch, rep, 64, 5000), 64);
	for (i = 0; i < 64; i++) {
		assert_int_equal(rep[i].tag, r[i].tag);
		assert_int_equal(rep[i].status, 0);
		assert_true(rep[i].offset + 100 <= f->a.arena_bytes);
		memset((char *)f->a.arena + rep[i].offset, i, 100);
		rc_req_init(&f->a, &r[i], COFFER_OP_SEAL, 1000 + (uint64_t)i);
		r[i].flags = COFFER_SEAL_RELEASE;
	}
	assert_int_equal(rc_chan_submit(&ch, r, 64), 0);
	assert_int_equal(rc_chan_wait(&ch, rep, 64, 5000), 64);
	for (i = 0; i < 64; i++)
		assert_int_equal(rep[i].status, 0);
	/* B reads them through its own channel; one get waits for an object A seals
	 * later through the socket path. */
	assert_int_equal(rc_chan_open(&f->b, &ch2, 0), 0);
	assert_int_equal(ch2.entries, COFFER_RING_ENTRIES_DEFAULT);
	for (i = 0; i < 64; i++)
		rc_req_init(&f->b, &r[i], COFFER_OP_GET, 1000 + (uint64_t)i);
	rc_req_init(&f->b, &r[64], COFFER_OP_GET, 2000);
	r[64].timeout_us = 5000000;
	assert_int_equal(rc_chan_submit(&ch2, r, 65), 0);
	assert_int_equal(rc_chan_wait(&ch2, rep, 64, 5000), 64);
	for (i = 0; i < 64; i++) {
		assert_int_equal(rep[i].status, 0);
		assert_int_equal(((unsigned char *)f->b.arena)[rep[i].offset + 99], i);
	}
	assert_int_equal(rc_put(&f->a, 2000, 64, 1), 0);
	assert_int_equal(rc_chan_wait(&ch2, rep, 1, 5000), 1); /* woken by the doorbell */
	assert_int_equal(rep[0].tag, r[64].tag);
	assert_int_equal(rep[0].status, 0);
	for (i = 0; i < 64; i++)
		rc_req_init(&f->b, &r[i], COFFER_OP_RELEASE, 1000 + (uint64_t)i);
	rc_req_init(&f->b, &r[64], COFFER_OP_RELEASE, 2000);
	assert_int_equal(rc_chan_submit(&ch2, r, 65), 0);
	assert_int_equal(rc_chan_wait(&ch2, rep, 65, 5000), 65);
	for (i = 0; i < 65; i++)
		assert_int_equal(rep[i].status, 0);
	/* A get waiting on a closed channel is dropped with it. */
	rc_req_init(&f->b, &r[0], COFFER_OP_GET, 3000);
	r[0].timeout_us = -1;
	assert_int_equal(rc_chan_submit(&ch2, r, 1), 0);
	assert_int_equal(rc_chan_taken(&ch2, 10000), 0); /* waiting in the store */
	assert_int_equal(rc_chan_close(&ch2), 0);
	assert_int_equal(rc_put(&f->a, 3000, 64, 1), 0);
	assert_int_equal(rc_chan_close(&ch), 0);
	assert_int_equal(rc_contains(&f->b, 2000), 1);
	for (i = 0; i < 64; i++)
		assert_int_equal(rc_delete(&f->a, 1000 + (uint64_t)i), 0);
	assert_int_equal(rc_delete(&f->a, 2000), 0);
	assert_int_equal(rc_delete(&f->a, 3000), 0);
	assert_int_equal(used(f), 0);
}

static void test_channel_backpressure(void **state)
{
	struct fx *f = *state;
	struct coffer_req r[8];
	struct coffer_rep rep[16];
	struct rc_chan ch;
	int i, got = 0;

	/* Ring of 8: 8 forever-gets reserve every reply slot; further requests wait in
	 * the request ring until the gets complete. */
	assert_int_equal(rc_chan_open(&f->a, &ch, 8), 0);
	for (i = 0; i < 8; i++) {
		rc_req_init(&f->a, &r[i], COFFER_OP_GET, 4000 + (uint64_t)i);
		r[i].timeout_us = -1;
	}
	assert_int_equal(rc_chan_submit(&ch, r, 8), 0);
	/* taken, so the ring has room for 8 more (a 20 ms sleep was a guess a loaded machine
	 * can beat: the next submit then failed -EAGAIN) */
	assert_int_equal(rc_chan_taken(&ch, 10000), 0);
	for (i = 0; i < 8; i++)
		rc_req_init(&f->a, &r[i], COFFER_OP_CONTAINS, 4000 + (uint64_t)i);
	assert_int_equal(rc_chan_submit(&ch, r, 8), 0);
	assert_int_equal(rc_chan_wait(&ch, rep, 1, 100), 0); /* nothing can be answered */
	for (i = 0; i < 8; i++)
		assert_int_equal(rc_put(&f->b, 4000 + (uint64_t)i, 64, 1), 0);
	while (got < 16) {
		int n = rc_chan_wait(&ch, rep + got, 16 - (unsigned int)got, 5000);

		assert_true(n > 0);
		got += n;
	}
	for (i = 0; i < 16; i++)
		assert_int_equal(rep[i].status, 0);
	for (i = 8; i < 16; i++)
		assert_int_equal(rep[i].size, 1); /* contains: sealed by then */
	for (i = 0; i < 8; i++)
		assert_int_equal(rc_release(&f->a, 4000 + (uint64_t)i), 0);
	assert_int_equal(rc_chan_close(&ch), 0);
}

/* Waits (up to @ms) until the store has announced sleep on @c's doorbell page. */
static void wait_store_sleeping(struct rc_conn *c, int ms)
{
	for (int i = 0; i < ms && !__atomic_load_n(&c->doorbell->store_sleeping, __ATOMIC_ACQUIRE);
	     i++)
		usleep(1000);
	assert_int_equal(__atomic_load_n(&c->doorbell->store_sleeping, __ATOMIC_ACQUIRE), 1);
}

/*
 * The doorbell page (runtime/proto.h, v3):
 *  - a bit the client sets is exchanged back to 0 by the store before it answers;
 *  - an idle store announces sleep on the page (store_sleeping, one flag per connection),
 *    and a request published then, with its bit, wakes it through the connection's eventfd:
 *    20 times in a row, over three channels;
 *  - a client that skips its bits is still served when its eventfd wakes the store (the
 *    store then looks at all of that connection's channels): 20 times in a row (the sweep
 *    while another client keeps the store awake: test_channel_fairness);
 *  - a client that sets every bit of every word (channels it does not have) harms nobody.
 */
static void test_channel_doorbell_page(void **state)
{
	struct fx *f = *state;
	struct coffer_req r;
	struct coffer_rep rep;
	struct rc_chan ch[3], chb;
	int i;

	for (i = 0; i < 3; i++) {
		assert_int_equal(rc_chan_open(&f->a, &ch[i], 8), 0);
		assert_int_equal(ch[i].id, (uint32_t)i);
	}
	/* bit 0 of word 2 is channel 2's (proto.h); the store clears it before answering */
	rc_req_init(&f->a, &r, COFFER_OP_CONTAINS, 1);
	assert_int_equal(rc_chan_submit(&ch[2], &r, 1), 0);
	assert_int_equal(rc_chan_wait(&ch[2], &rep, 1, 5000), 1);
	assert_int_equal(rep.status, 0);
	assert_int_equal(__atomic_load_n(&f->a.doorbell->word[2].bits, __ATOMIC_ACQUIRE), 0);

	for (int skip_bits = 0; skip_bits <= 1; skip_bits++) {
		f->a.no_doorbell = skip_bits != 0;
		for (i = 0; i < 20; i++) {
			wait_store_sleeping(&f->a, 2000);
			rc_req_init(&f->a, &r, COFFER_OP_CONTAINS, 1);
			assert_int_equal(rc_chan_submit(&ch[i % 3], &r, 1), 0);
			assert_int_equal(rc_chan_wait(&ch[i % 3], &rep, 1, 5000), 1);
			assert_int_equal(rep.tag, r.tag);
			assert_int_equal(rep.status, 0);
		}
	}
	f->a.no_doorbell = false;

	assert_int_equal(rc_chan_open(&f->b, &chb, 8), 0);
	for (i = 0; i < (int)COFFER_DOORBELL_WORDS; i++)
		__atomic_store_n(&f->b.doorbell->word[i].bits, ~UINT64_C(0), __ATOMIC_RELEASE);
	for (i = 0; i < 20; i++) {
		rc_req_init(&f->b, &r, COFFER_OP_CONTAINS, 1);
		assert_int_equal(rc_chan_submit(&chb, &r, 1), 0);
		assert_int_equal(rc_chan_wait(&chb, &rep, 1, 5000), 1);
		assert_int_equal(rep.status, 0);
		rc_req_init(&f->a, &r, COFFER_OP_CONTAINS, 1);
		assert_int_equal(rc_chan_submit(&ch[i % 3], &r, 1), 0);
		assert_int_equal(rc_chan_wait(&ch[i % 3], &rep, 1, 5000), 1);
		assert_int_equal(rep.status, 0);
	}
	assert_true(rc_store_alive(&f->st));
	assert_int_equal(rc_chan_close(&chb), 0);
	for (i = 0; i < 3; i++)
		assert_int_equal(rc_chan_close(&ch[i]), 0);
}

/*
 * Protocol v3: one connection holds up to COFFER_CHANNELS_MAX (512) channels, each costing
 * the store exactly one fd (the client's reply doorbell: the rings' memfd is closed once
 * sent, and the request doorbell is the connection's). Before v3 a connection had at most 64
 * channels at 3 store fds each. The 513th CHANNEL_OPEN gets a non-fatal -EMFILE. Every
 * channel is served with requests in flight on all of them at once (every bit of the
 * doorbell page in use), and closing them gives every fd back.
 */
static void test_channel_limit_fds(void **state)
{
	enum { N = COFFER_CHANNELS_MAX };
	struct fx *f = *state;
	struct rc_chan *ch = calloc(N, sizeof(*ch)), extra;
	struct coffer_store_info info;
	struct coffer_req r;
	struct coffer_rep rep;
	struct rlimit rl;
	int fds0, i;

	assert_non_null(ch);
	/* this process holds two fds per channel (its doorbell, a dup of the store's) */
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_cur < 4 * N) {
		rl.rlim_cur =
		    rl.rlim_max != RLIM_INFINITY && rl.rlim_max < 4 * N ? rl.rlim_max : 4 * N;
		assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
	}
	if (rl.rlim_cur < 2 * N + 64) {
		free(ch);
		fprintf(stderr, "channel-limit: skipped: the hard open-file limit is %llu\n",
			(unsigned long long)rl.rlim_max);
		skip();
	}
	fds0 = rc_count_fds(f->st.pid);
	for (i = 0; i < N; i++) {
		assert_int_equal(rc_chan_open(&f->a, &ch[i], 8), 0);
		assert_int_equal(ch[i].id, (uint32_t)i);
	}
	assert_int_equal(rc_chan_open(&f->a, &extra, 8), -EMFILE);
	assert_int_equal(rc_query(&f->a, &info), 0); /* still connected, done with the opens */
	assert_int_equal(rc_count_fds(f->st.pid), fds0 + N);
	for (i = 0; i < N; i++) {
		rc_req_init(&f->a, &r, COFFER_OP_CONTAINS, 1);
		assert_int_equal(rc_chan_submit(&ch[i], &r, 1), 0);
	}
	for (i = N - 1; i >= 0; i--) {
		assert_int_equal(rc_chan_wait(&ch[i], &rep, 1, 5000), 1);
		assert_int_equal(rep.status, 0);
	}
	for (i = 0; i < N; i++)
		assert_int_equal(rc_chan_close(&ch[i]), 0);
	assert_int_equal(rc_count_fds(f->st.pid), fds0);
	free(ch);
}

struct flood {
	struct rc_chan *ch;
	atomic_int stop;
	uint64_t answered;
};

/* Keeps @fl->ch's request ring as full as it can with CONTAINS until told to stop. */
static void *flood_main(void *arg)
{
	struct flood *fl = arg;
	struct coffer_req r[256];
	struct coffer_rep rep[256];
	uint64_t sent = 0;

	for (int i = 0; i < 256; i++)
		rc_req_init(fl->ch->c, &r[i], COFFER_OP_CONTAINS, 1);
	while (!atomic_load(&fl->stop) || fl->answered < sent) {
		int n;

		if (!atomic_load(&fl->stop) && sent - fl->answered <= fl->ch->entries - 256 &&
		    rc_chan_submit(fl->ch, r, 256) == 0)
			sent += 256;
		n = rc_chan_wait(fl->ch, rep, 256, 0);
		if (n < 0)
			break;
		fl->answered += (uint64_t)n;
	}
	return NULL;
}

/*
 * Fairness (issue: "one client's flood cannot starve another"): while A keeps its 4096-entry
 * ring full, B still gets 200 round trips answered (and 5 more without doorbell bits, found
 * by the periodic sweep), and A keeps being served too. A round
 * that drained A for as long as A refills its ring, or that looked only at the client with
 * work left over (sess.pending) and never at B's doorbell, would starve B. (How much of A a
 * round takes, the per-client budget, is a latency matter and not asserted here.)
 */
static void test_channel_fairness(void **state)
{
	struct fx *f = *state;
	struct rc_chan cha, chb;
	struct flood fl = {.ch = &cha};
	struct coffer_req r;
	struct coffer_rep rep;
	uint64_t during;
	pthread_t tid;

	assert_int_equal(rc_chan_open(&f->a, &cha, 4096), 0);
	assert_int_equal(rc_chan_open(&f->b, &chb, 8), 0);
	assert_int_equal(pthread_create(&tid, NULL, flood_main, &fl), 0);
	while (__atomic_load_n(&cha.shm->req.cons, __ATOMIC_ACQUIRE) == 0)
		usleep(100); /* the flood is on */
	for (int i = 0; i < 200; i++) {
		rc_req_init(&f->b, &r, COFFER_OP_CONTAINS, 2);
		assert_int_equal(rc_chan_submit(&chb, &r, 1), 0);
		assert_int_equal(rc_chan_wait(&chb, &rep, 1, 5000), 1);
		assert_int_equal(rep.status, 0);
	}
	during = __atomic_load_n(&cha.shm->req.cons, __ATOMIC_ACQUIRE);
	/* While A keeps the store awake, B's requests without a doorbell bit (and so without
	 * a ring of its eventfd) are found by the store's periodic sweep of every channel. */
	f->b.no_doorbell = true;
	for (int i = 0; i < 5; i++) {
		rc_req_init(&f->b, &r, COFFER_OP_CONTAINS, 2);
		assert_int_equal(rc_chan_submit(&chb, &r, 1), 0);
		assert_int_equal(rc_chan_wait(&chb, &rep, 1, 5000), 1);
		assert_int_equal(rep.status, 0);
	}
	f->b.no_doorbell = false;
	atomic_store(&fl.stop, 1);
	pthread_join(tid, NULL);
	fprintf(stderr, "fairness: B 200 round trips while A's flood had %llu requests taken\n",
		(unsigned long long)during);
	assert_true(during > 256); /* A was served all along, not only after B */
	assert_int_equal(rc_chan_close(&cha), 0);
	assert_int_equal(rc_chan_close(&chb), 0);
}

/*
 * An idle connection goes cold while the store stays awake (STORE_COLD_US in
 * tools/store.c): the store sets store_sleeping on its page and stops loading its doorbell
 * words. Its next request sees the flag, rings the connection's eventfd, and is served, 10
 * times. The store here never sleeps (it spins for 1 s after activity), so only the cold
 * handshake sets the flag, and it runs without its periodic sweep (setup16_awake), so a
 * request the handshake lost would never be served.
 */
static void test_channel_cold_connection(void **state)
{
	struct fx *f = *state;
	struct rc_chan ch;
	struct coffer_req r;
	struct coffer_rep rep;

	assert_int_equal(rc_chan_open(&f->a, &ch, 8), 0);
	for (int i = 0; i < 10; i++) {
		/* cold after 1 ms idle; the whole store would sleep only after 1 s */
		wait_store_sleeping(&f->a, 500);
		rc_req_init(&f->a, &r, COFFER_OP_CONTAINS, 1);
		assert_int_equal(rc_chan_submit(&ch, &r, 1), 0);
		assert_int_equal(rc_chan_wait(&ch, &rep, 1, 5000), 1);
		assert_int_equal(rep.tag, r.tag);
		assert_int_equal(rep.status, 0);
	}
	assert_int_equal(rc_chan_close(&ch), 0);
}

/*
 * A client's reply doorbell is its own eventfd (CHANNEL_OPEN): the store sets O_NONBLOCK on
 * it, but that flag belongs to the open file the client shares, and the client can clear it
 * again. A client that then fills the eventfd's counter to its maximum and says it sleeps
 * (rep.consumer_sleeping) made the store's wake-up write block for good: the whole store
 * stopped, and every other client with it. The store must stay responsive: B's QUERY and
 * ring request are answered, and the store stops cleanly.
 */
static void test_channel_reply_doorbell_made_blocking(void **state)
{
	struct fx *f = *state;
	struct coffer_store_info info;
	struct rc_chan cha, chb;
	struct coffer_req r;
	struct coffer_rep rep;
	uint64_t full = 0xfffffffffffffffeull;
	int fl;

	assert_int_equal(rc_chan_open(&f->a, &cha, 8), 0);
	assert_int_equal(rc_chan_open(&f->b, &chb, 8), 0);
	fl = fcntl(cha.rep_efd, F_GETFL);
	assert_true(fl >= 0 && (fl & O_NONBLOCK)); /* the store made it non-blocking */
	assert_int_equal(fcntl(cha.rep_efd, F_SETFL, fl & ~O_NONBLOCK), 0);
	assert_int_equal(write(cha.rep_efd, &full, sizeof(full)), (ssize_t)sizeof(full));
	__atomic_store_n(&cha.shm->rep.consumer_sleeping, 1, __ATOMIC_SEQ_CST);
	rc_req_init(&f->a, &r, COFFER_OP_CONTAINS, 1);
	assert_int_equal(rc_chan_submit(&cha, &r, 1), 0);
	usleep(200 * 1000); /* the store answered A (or is stuck on A's doorbell) */
	assert_int_equal(rc_query(&f->b, &info), 0);
	rc_req_init(&f->b, &r, COFFER_OP_CONTAINS, 2);
	assert_int_equal(rc_chan_submit(&chb, &r, 1), 0);
	assert_int_equal(rc_chan_wait(&chb, &rep, 1, 5000), 1);
	assert_int_equal(rep.status, 0);
	assert_int_equal(rc_chan_close(&chb), 0);
	/* only A, whose doorbell blocked, was closed */
	assert_int_not_equal(rc_query(&f->a, &info), 0);
	assert_int_equal(rc_query(&f->b, &info), 0);
	assert_int_equal(info.clients, 1);
	rc_chan_unmap(&cha);
}

static void test_channel_corrupt_indices_close_only_that_client(void **state)
{
	struct fx *f = *state;
	unsigned char buf[512];
	struct rc_chan ch;
	struct coffer_msg_hdr h;
	struct coffer_req r;
	long n;

	assert_int_equal(rc_chan_open(&f->a, &ch, 8), 0);
	rc_req_init(&f->a, &r, COFFER_OP_CONTAINS, 1);
	/* prod far ahead of cons: a protocol violation. */
	ch.prod += 1000;
	__atomic_store_n(&ch.shm->req.prod, ch.prod, __ATOMIC_RELEASE);
	{
		uint64_t one = 1;

		(void)!write(ch.req_efd, &one, sizeof(one));
	}
	n = rc_recv_msg(&f->a, buf, sizeof(buf), NULL, NULL, 5000);
	assert_true(n > 0);
	assert_int_equal(coffer__msg_check(buf, (size_t)n, &h), 0);
	assert_int_equal(h.type, COFFER_MSG_ERROR);
	assert_int_equal(rc_recv_msg(&f->a, buf, sizeof(buf), NULL, NULL, 5000), 0); /* closed */
	rc_chan_unmap(&ch);
	/* B is unaffected. */
	assert_int_equal(rc_put(&f->b, 5, 64, 1), 0);
	assert_int_equal(rc_delete(&f->b, 5), 0);
	assert_true(rc_store_alive(&f->st));
	rc_close(&f->a);
	assert_int_equal(rc_connect(&f->a, f->st.sock), 0);
}

/* ------------------------------------------------------------------ CLI and start-up */

static void test_cli_errors_exit_2(void **state)
{
	static const char *const cases[][6] = {
	    {"-m", "x", NULL},
	    {"-m", "0", NULL},
	    {"-m", "12Q", NULL},
	    {"-m", "99999999999999999999", NULL},
	    {"-m", "18446744073709551615", NULL}, /* fits 64 bits; rounded up it would wrap */
	    {NULL},
	    {"-m", "1M", "--hugepages=maybe", NULL},
	    {"-m", "1M", "--socket-mode=0999", NULL},
	    {"-m", "1M", "--socket-mode=0400", NULL},
	    /* 'other' bits: the store would let anyone connect only to refuse them */
	    {"-m", "1M", "--socket-mode=0666", NULL},
	    {"-m", "1M", "--socket-mode=0777", NULL},
	    {"-m", "1M", "--socket-mode=0601", NULL},
	    /* group r without w (or w without r): connect(2) needs w, so the group is
	     * promised access it cannot use */
	    {"-m", "1M", "--socket-mode=0640", NULL},
	    {"-m", "1M", "--socket-mode=0620", NULL},
	    {"-m", "1M", "--socket-mode=0740", NULL},
	    /* group x without rw: the group is admitted by the credential check, but its
	     * connect(2) fails on the missing w */
	    {"-m", "1M", "--socket-mode=0610", NULL},
	    {"-m", "1M", "--socket-mode=0650", NULL},
	    {"-m", "1M", "--socket-mode=0630", NULL},
	    /* not an octal number: strtoul() takes a sign and leading blanks, and negates a
	     * "negative" one modulo 2^64 (this one comes out as 0660) */
	    {"-m", "1M", "--socket-mode=-1777777777777777777120", NULL},
	    {"-m", "1M", "--socket-mode=+0600", NULL},
	    {"-m", "1M", "--socket-mode= 0600", NULL},
	    {"-m", "1M", "--bogus", NULL},
	    {"-m", "1M", "-s", NULL},
	    {"-m", "1M", "extra", NULL},
	    {"-m", "1M", "-d", "/tmp", "--hugepages=off", NULL},
	    {"-m", "1M", "--max-files=8", NULL}, /* no room for a client */
	    {"-m", "1M", "--max-files=-1", NULL},
	    {"-m", "1M", "--max-files=1k", NULL},
	};
	static const char *const help[] = {"--help", NULL};
	static const char *const spin_bad[] = {"abc", "-5", "2000000", "50us"};
	static const char *const sweep_bad[] = {"999", "3600000001", "1ms"};
	/* valid arguments; the store would fail later (exit 1: no such directory) */
	static const char *const later[] = {"-m", "1M", "-s", "/nonexistent/d/s.sock", NULL};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_int_equal(rc_run_exit(cases[i]), 2);
	assert_int_equal(rc_run_exit(help), 0);
	/* the environment is a usage error too, found before anything starts */
	for (i = 0; i < sizeof(spin_bad) / sizeof(spin_bad[0]); i++) {
		assert_int_equal(setenv("COFFER_STORE_SPIN_US", spin_bad[i], 1), 0);
		assert_int_equal(rc_run_exit(later), 2);
	}
	assert_int_equal(setenv("COFFER_STORE_SPIN_US", "20", 1), 0);
	assert_int_equal(rc_run_exit(later), 1);
	assert_int_equal(unsetenv("COFFER_STORE_SPIN_US"), 0);
	for (i = 0; i < sizeof(sweep_bad) / sizeof(sweep_bad[0]); i++) {
		assert_int_equal(setenv("COFFER_STORE_SWEEP_US", sweep_bad[i], 1), 0);
		assert_int_equal(rc_run_exit(later), 2);
	}
	assert_int_equal(unsetenv("COFFER_STORE_SWEEP_US"), 0);
}

static void test_startup_refusal(void **state)
{
	static const char *const huge_plain[] = {"-m", "64T", "--hugepages=off", NULL};
	static const char *const huge_hp[] = {"-m", "64T", "--hugepages=on", NULL};
	static const char *const notfs[] = {"-m", "4M", "-d", "/tmp", NULL};
	struct rc_store st;

	(void)state;
	assert_int_equal(rc_store_start(&st, huge_plain), 1);
	assert_int_equal(rc_store_start(&st, huge_hp), 1);
	assert_int_equal(rc_store_start(&st, notfs), 1); /* /tmp is not hugetlbfs */
}

/* Another program's live socket at the path is refused and left alone, never unlinked. */
static void test_foreign_socket_kept(void **state)
{
	char dir[] = "/tmp/coffer-foreign-XXXXXX", path[108];
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	const char *args[] = {"-m", "1M", "--hugepages=off", "-s", path, NULL};
	int l, c;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/s.sock", dir);
	strcpy(sa.sun_path, path);
	l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(l >= 0);
	assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(l, 4), 0);
	assert_int_equal(rc_run_exit(args), 1);
	/* still ours: the path exists and a stream client still reaches our listener */
	c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(c >= 0);
	assert_int_equal(connect(c, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(c);
	close(l);
	unlink(path);
	rmdir(dir);
}

/* Whether the file at @path contains @what (in its first 4 KiB). */
static bool file_has(const char *path, const char *what)
{
	char buf[4096];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	return strstr(buf, what) != NULL;
}

/* Whether something accepts SOCK_SEQPACKET connections at @path now. */
static bool reachable(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	bool ok;

	assert_true(fd >= 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

/*
 * A restart on one socket path (SIGTERM to the old store, a new one started at once) never
 * leaves a store running that no client can reach. The old store used to close its listener
 * and then unlink the path: a successor starting in between found the socket stale (nothing
 * listening), replaced it with its own, and lost it to the old store's unlink - it ran on,
 * "ready", and every coffer_connect() got -ECONNREFUSED. coffer-store-stopunlink stops itself
 * just before it unlinks its socket, which puts the successor's start exactly there. Now the
 * successor either finds the old store still listening and refuses (exit 1), or it keeps a
 * socket that answers; and a store started after both is served as usual.
 */
static void test_restart_keeps_successor_socket(void **state)
{
	static const char *const args[] = {"-m", "1M", "--hugepages=off", NULL};
	const char *exe = getenv("COFFER_STORE_EXE"), *stopper;
	char saved[512], logpath[160], nextlog[160];
	struct rc_store old, after;
	pid_t next;
	int status, next_status = 0;
	long deadline;

	(void)state;
	stopper = getenv("COFFER_STORE_STOPUNLINK_EXE");
	assert_non_null(exe);
	assert_non_null(stopper);
	snprintf(saved, sizeof(saved), "%s", exe);
	assert_int_equal(setenv("COFFER_STORE_EXE", stopper, 1), 0);
	assert_int_equal(rc_store_start(&old, args), 0);
	assert_int_equal(setenv("COFFER_STORE_EXE", saved, 1), 0);
	assert_true(reachable(old.sock));
	snprintf(nextlog, sizeof(nextlog), "%s/next.log", old.dir);

	/* Stop it: it halts itself in its teardown, at the unlink of its socket. */
	assert_int_equal(kill(old.pid, SIGTERM), 0);
	assert_int_equal(waitpid(old.pid, &status, WUNTRACED), old.pid);
	assert_true(WIFSTOPPED(status));

	/* Its successor on the same path, then the old store finishes its exit. */
	next = fork();
	assert_true(next >= 0);
	if (next == 0) {
		int log = open(nextlog, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

		if (log >= 0)
			dup2(log, 2);
		execl(saved, saved, "-s", old.sock, "-m", "1M", "--hugepages=off", "-q",
		      (char *)NULL);
		_exit(127);
	}
	/* Until it is ready or has refused (a connect would reach the old listener). */
	deadline = now_ms() + 10000;
	while (!file_has(nextlog, "coffer-store: ready") && now_ms() < deadline) {
		if (waitpid(next, &next_status, WNOHANG) == next) {
			next = 0; /* refused to start: the old store still listens */
			break;
		}
		usleep(5000);
	}
	assert_int_equal(kill(old.pid, SIGCONT), 0);
	assert_int_equal(waitpid(old.pid, &status, 0), old.pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	old.pid = 0;

	if (next == 0) {
		assert_true(WIFEXITED(next_status));
		assert_int_equal(WEXITSTATUS(next_status), 1);
	} else {
		/* it started: its socket must have survived the old store's exit */
		bool ok = reachable(old.sock);

		kill(next, SIGKILL);
		waitpid(next, &status, 0);
		assert_true(ok);
	}
	snprintf(logpath, sizeof(logpath), "%s/store.log", old.dir);
	unlink(logpath);
	unlink(nextlog);
	unlink(old.sock);
	rmdir(old.dir);

	/* A store after both starts and is served. */
	assert_int_equal(rc_store_start(&after, args), 0);
	assert_true(reachable(after.sock));
	assert_int_equal(rc_store_stop(&after), 0);
}

/* Runs @exe on socket @sock (-m 1M, no hugepages), its stderr into @log; returns its pid. */
static pid_t spawn_store(const char *exe, const char *sock, const char *log)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

		if (fd >= 0)
			dup2(fd, 2);
		execl(exe, exe, "-s", sock, "-m", "1M", "--hugepages=off", "-q", (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* Waits up to @ms for the store @pid (logging to @log) to be ready (1) or to exit (0, its
 * wait status in *@status); -1 when it did neither. */
static int ready_or_exit(pid_t pid, const char *log, long ms, int *status)
{
	long deadline = now_ms() + ms;

	do {
		if (waitpid(pid, status, WNOHANG) == pid)
			return 0;
		if (file_has(log, "coffer-store: ready"))
			return 1;
		usleep(5000);
	} while (now_ms() < deadline);
	return -1;
}

/*
 * Makes the directory @dir (a mkdtemp() template, rewritten) with a dead store's socket in it
 * (bound, nobody listening) at @sock, names the logs @loga and @logb there, and starts
 * coffer-store-stopunlink (@stopper) on it logging to @loga: it stops itself (SIGSTOP) just
 * before it unlinks the stale socket, holding the directory's lock. Returns its pid, stopped.
 */
static pid_t stopped_beside_dead_socket(const char *stopper, char *dir, char sock[108],
					char loga[160], char logb[160])
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd, status;
	pid_t a;

	assert_non_null(mkdtemp(dir));
	snprintf(sock, 108, "%s/s.sock", dir);
	snprintf(loga, 160, "%s/a.log", dir);
	snprintf(logb, 160, "%s/b.log", dir);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
	a = spawn_store(stopper, sock, loga);
	assert_int_equal(waitpid(a, &status, WUNTRACED), a);
	assert_true(WIFSTOPPED(status));
	return a;
}

/*
 * Two stores starting at once on one path where a dead store left its socket: one serves
 * there, and no store runs that no client can reach. Both used to find the socket stale, and
 * the later one's unlink removed the socket the earlier one had just bound - it ran on,
 * ready, unreachable. coffer-store-stopunlink stops itself just before it unlinks the stale
 * socket, which puts the other store's whole start there. Now the directory is locked from the
 * stale check to the listen: the other waits, then finds a listener and refuses.
 */
static void test_concurrent_start_one_reachable(void **state)
{
	const char *exe = getenv("COFFER_STORE_EXE");
	const char *stopper = getenv("COFFER_STORE_STOPUNLINK_EXE");
	char dir[] = "/tmp/coffer-start-XXXXXX", sock[108], loga[160], logb[160];
	int status, sa_state, sb_state, sb_status = 0;
	bool serving;
	pid_t a, b;

	(void)state;
	assert_non_null(exe);
	assert_non_null(stopper);
	/* a stops just before it unlinks the stale socket; b starts meanwhile */
	a = stopped_beside_dead_socket(stopper, dir, sock, loga, logb);
	b = spawn_store(exe, sock, logb);
	sb_state = ready_or_exit(b, logb, 2000, &sb_status);
	assert_int_equal(kill(a, SIGCONT), 0);
	sa_state = ready_or_exit(a, loga, 10000, &status);
	if (sb_state < 0)
		sb_state = ready_or_exit(b, logb, 10000, &sb_status);

	/* One of them serves at the path; the other is not running. (Both go first: a would
	 * stop itself again at the unlink of its teardown, and a failed assertion must leave
	 * no store behind.) */
	serving = reachable(sock);
	if (sa_state != 0) { /* not reaped yet */
		kill(a, SIGKILL);
		waitpid(a, &status, 0);
	}
	if (sb_state != 0) {
		kill(b, SIGKILL);
		waitpid(b, &status, 0);
	}
	if (sa_state == 1 && sb_state == 1)
		print_error("both stores ran: one of them could not be reached\n");
	assert_true(sa_state >= 0 && sb_state >= 0);
	assert_int_equal(sa_state + sb_state, 1);
	assert_true(serving);
	if (sb_state == 0) {
		assert_true(WIFEXITED(sb_status));
		assert_int_equal(WEXITSTATUS(sb_status), 1);
	}
	unlink(sock);
	unlink(loga);
	unlink(logb);
	rmdir(dir);
}

/*
 * A store starting on a path where a live listener's backlog is full (a store stopped or hung
 * with clients queued at its socket; here a socket of the test's that never accepts) refuses
 * at once, and a store starting beside it in the same directory on another path is not held.
 * The stale-socket check connected in blocking mode: connect(2) on a full AF_UNIX backlog
 * waits for a slot, forever, and it waited there holding the directory's start lock - the
 * store hung in its start, and every other store starting in that directory refused after
 * the lock's 5 s ("another coffer-store has been starting"). Now the check does not block: a
 * full backlog (EAGAIN) is a listener, and the start refuses (exit 1) as for any listener.
 */
static void test_start_beside_full_listener(void **state)
{
	const char *exe = getenv("COFFER_STORE_EXE");
	char dir[] = "/tmp/coffer-full-XXXXXX", sock[108], other[108], loga[160], logb[160];
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int lfd, fds[64], nfds = 0, status, sa_state, sb_state, sa_status = 0, sb_status = 0;
	bool serving;
	pid_t a, b;

	(void)state;
	assert_non_null(exe);
	assert_non_null(mkdtemp(dir));
	snprintf(sock, sizeof(sock), "%s/s.sock", dir);
	snprintf(other, sizeof(other), "%s/t.sock", dir);
	snprintf(loga, sizeof(loga), "%s/a.log", dir);
	snprintf(logb, sizeof(logb), "%s/b.log", dir);
	/* a listener that never accepts, its backlog filled until a connect would block */
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	assert_true(lfd >= 0);
	assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(lfd, 0), 0);
	for (;;) {
		int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

		assert_true(fd >= 0);
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
			assert_int_equal(errno, EAGAIN);
			close(fd);
			break;
		}
		assert_true(nfds < 64);
		fds[nfds++] = fd;
	}

	/* a on the full listener's path, then b beside it on another path */
	a = spawn_store(exe, sock, loga);
	usleep(100000); /* lets a reach its check first; b must not depend on it */
	b = spawn_store(exe, other, logb);
	sa_state = ready_or_exit(a, loga, 10000, &sa_status);
	sb_state = ready_or_exit(b, logb, 10000, &sb_status);
	serving = sb_state == 1 && reachable(other);
	if (sa_state != 0) {
		kill(a, SIGKILL);
		waitpid(a, &status, 0);
	}
	if (sb_state == 1) {
		kill(b, SIGTERM);
		waitpid(b, &status, 0);
	} else if (sb_state < 0) {
		kill(b, SIGKILL);
		waitpid(b, &status, 0);
	}
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	close(lfd);
	if (sa_state < 0)
		print_error("the store on the full listener's path neither served nor exited\n");
	if (sb_state != 1)
		print_error("the store on the other path did not start (state %d)\n", sb_state);
	assert_int_equal(sa_state, 0);
	assert_true(WIFEXITED(sa_status));
	assert_int_equal(WEXITSTATUS(sa_status), 1);
	assert_true(file_has(loga, "listening"));
	assert_int_equal(sb_state, 1);
	assert_true(serving);
	unlink(sock);
	unlink(other);
	unlink(loga);
	unlink(logb);
	rmdir(dir);
}

/*
 * Makes the directory @dir (a mkdtemp() template, rewritten), locks it as another program
 * would (flock(2) LOCK_EX on *@dfd, which the caller closes) and starts the store @exe on
 * @dir/s.sock (108 bytes) logging to @dir/a.log (160 bytes). Returns the store's pid.
 */
static pid_t spawn_in_locked_dir(const char *exe, char *dir, char sock[108], char log[160],
				 int *dfd)
{
	assert_non_null(exe);
	assert_non_null(mkdtemp(dir));
	snprintf(sock, 108, "%s/s.sock", dir);
	snprintf(log, 160, "%s/a.log", dir);
	*dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(*dfd >= 0);
	assert_int_equal(flock(*dfd, LOCK_EX), 0);
	return spawn_store(exe, sock, log);
}

/*
 * A store starting in a directory that another program keeps locked (flock(2), as flock(1)
 * on /tmp does) refuses after its wait and says what it waited for. It said "another
 * coffer-store has been starting in DIR", and there was none to find.
 */
static void test_start_dir_locked_by_other(void **state)
{
	const char *exe = getenv("COFFER_STORE_EXE");
	char dir[] = "/tmp/coffer-dirlock-XXXXXX", sock[108], log[160];
	int dfd, st_state, status = 0;
	pid_t a;

	(void)state;
	a = spawn_in_locked_dir(exe, dir, sock, log, &dfd);
	st_state = ready_or_exit(a, log, 20000, &status);
	if (st_state != 0) {
		kill(a, SIGKILL);
		waitpid(a, &status, 0);
	}
	close(dfd);
	assert_int_equal(st_state, 0);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 1);
	assert_true(file_has(log, "locked (flock)"));
	unlink(log);
	unlink(sock);
	rmdir(dir);
}

/*
 * A store stopped (SIGSTOP, ^Z) in the middle of its start holds its socket directory's lock
 * until it is continued or killed. A second store started on the same socket meanwhile waits
 * a bounded time (5 s), then refuses (exit 1) naming the lock's holder: its pid, its name and
 * that it is stopped. A client meanwhile finds nobody listening at once (the path is still
 * the dead store's stale socket; coffer_connect() says -ECONNREFUSED). The refusal named no
 * holder, and the reader had to hunt for it. coffer-store-stopunlink stops itself just before
 * it unlinks the stale socket: under the lock.
 */
static void test_start_beside_store_stopped_in_start(void **state)
{
	const char *exe = getenv("COFFER_STORE_EXE");
	const char *stopper = getenv("COFFER_STORE_STOPUNLINK_EXE");
	char dir[] = "/tmp/coffer-dirlock-XXXXXX", sock[108], loga[160], logb[160], want[64];
	int status, sb_state, sb_status = 0;
	bool named, stopped, refused;
	pid_t a, b;

	(void)state;
	assert_non_null(exe);
	assert_non_null(stopper);
	a = stopped_beside_dead_socket(stopper, dir, sock, loga, logb); /* holds the lock */
	refused = !reachable(sock);
	b = spawn_store(exe, sock, logb);
	sb_state = ready_or_exit(b, logb, 20000, &sb_status);
	snprintf(want, sizeof(want), "by pid %d (", (int)a);
	named = file_has(logb, want);
	stopped = file_has(logb, ", stopped)");
	kill(a, SIGKILL);
	waitpid(a, &status, 0);
	if (sb_state != 0) {
		kill(b, SIGKILL);
		waitpid(b, &sb_status, 0);
	}
	assert_true(refused);
	assert_int_equal(sb_state, 0);
	assert_true(WIFEXITED(sb_status));
	assert_int_equal(WEXITSTATUS(sb_status), 1);
	assert_true(file_has(logb, "locked (flock)"));
	if (!named || !stopped)
		print_error("the refusal does not name stopped pid %d\n", (int)a);
	assert_true(named);
	assert_true(stopped);
	unlink(sock);
	unlink(loga);
	unlink(logb);
	assert_int_equal(rmdir(dir), 0);
}

/* Whether process @pid runs @exe (has exec'd it) and has a file open that is @path. */
static bool runs_with_open(pid_t pid, const char *exe, const char *path)
{
	char dpath[64], fpath[320], target[PATH_MAX], real[PATH_MAX];
	struct dirent *e;
	bool found = false;
	ssize_t n;
	DIR *d;

	snprintf(dpath, sizeof(dpath), "/proc/%d/exe", (int)pid);
	n = readlink(dpath, target, sizeof(target) - 1);
	if (n <= 0 || realpath(exe, real) == NULL)
		return false;
	target[n] = '\0';
	if (strcmp(target, real) != 0)
		return false;
	snprintf(dpath, sizeof(dpath), "/proc/%d/fd", (int)pid);
	d = opendir(dpath);
	if (d == NULL)
		return false;
	while (!found && (e = readdir(d)) != NULL) {
		snprintf(fpath, sizeof(fpath), "%s/%s", dpath, e->d_name);
		n = readlink(fpath, target, sizeof(target) - 1);
		if (n > 0) {
			target[n] = '\0';
			found = strcmp(target, path) == 0;
		}
	}
	closedir(d);
	return found;
}

/*
 * SIGTERM reaches a store while it waits (up to 5 s) for its socket directory's lock: it
 * stops at once, cleanly (exit 0, no socket, not the refusal after the wait). It used to
 * see the signal only after the whole wait, and then exited 1 blaming the lock.
 */
static void test_stop_while_waiting_for_dir_lock(void **state)
{
	const char *exe = getenv("COFFER_STORE_EXE");
	char dir[] = "/tmp/coffer-dirlock-XXXXXX", sock[108], log[160];
	int dfd, i, status = 0;
	pid_t a;

	(void)state;
	a = spawn_in_locked_dir(exe, dir, sock, log, &dfd);
	/* it opens the directory to lock it (its stop signals are blocked and watched by then);
	 * before its exec the child still has our dfd */
	for (i = 0; i < 2000 && !runs_with_open(a, exe, dir); i++)
		usleep(5000);
	assert_true(runs_with_open(a, exe, dir));
	assert_int_equal(kill(a, SIGTERM), 0);
	/* still locked by us: only the signal can end its start now; the wait is only a guard */
	assert_int_equal(ready_or_exit(a, log, 20000, &status), 0);
	close(dfd);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_false(file_has(log, "locked (flock)"));
	assert_int_equal(access(sock, F_OK), -1); /* nothing left behind */
	unlink(log);
	assert_int_equal(rmdir(dir), 0);
}

static void test_socket_mode_and_stop(void **state)
{
	static const char *const args[] = {"-m", "1M", "--hugepages=off", "--socket-mode=0660",
					   NULL};
	struct fx *f = *state;
	struct rc_store st;
	struct stat sb;

	assert_int_equal(stat(f->st.sock, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0600);
	assert_int_equal(rc_store_start(&st, args), 0);
	assert_int_equal(stat(st.sock, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0660);
	/* A second store on the same socket refuses to start. */
	{
		const char *const dup[] = {"-m", "1M", "--hugepages=off", "-s", st.sock, NULL};

		assert_int_equal(rc_run_exit(dup), 1);
	}
	assert_int_equal(rc_store_stop(&st), 0); /* SIGTERM: exit 0, socket removed */
}

static void test_other_uid_refused(void **state)
{
	static const char *const args[] = {"-m", "1M", "--hugepages=off", NULL};
	struct rc_store st;
	int status;
	pid_t pid;

	(void)state;
	if (geteuid() != 0)
		skip(); /* needs root to become another uid */
	assert_int_equal(rc_store_start(&st, args), 0);
	/* let the other uid reach the socket: only the store's own check stands */
	assert_int_equal(chmod(st.dir, 0711), 0);
	assert_int_equal(chmod(st.sock, 0666), 0);
	pid = fork();
	if (pid == 0) {
		struct rc_conn c;

		if (setgid(65534) != 0 || setuid(65534) != 0)
			_exit(10);
		/* The socket mode lets it connect; the peer-credential check must not let
		 * it talk: the store closes the connection before HELLO is answered. */
		if (rc_connect_raw(&c, st.sock) != 0)
			_exit(12);
		rc_close(&c);
		_exit(rc_connect(&c, st.sock) == 0 ? 11 : 0);
	}
	waitpid(pid, &status, 0);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(rc_store_stop(&st), 0);
}

/*
 * Runs coffer-stat ($COFFER_STAT_EXE) -s @sock [--json when @json] as @uid/@gid (when @uid
 * is not ours), its stderr (and its stdout when @json) into @err (NUL-terminated, truncated
 * to @cap). Return: its exit status, or 100+ on a failure to run it (103: could not switch
 * uid).
 */
static int run_stat_as(const char *sock, uid_t uid, gid_t gid, bool json, char *err, size_t cap)
{
	const char *exe = getenv("COFFER_STAT_EXE");
	int p[2], status;
	size_t got = 0;
	pid_t pid;
	ssize_t r;

	assert_non_null(exe);
	assert_int_equal(pipe(p), 0);
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		close(p[0]);
		if (uid != geteuid() &&
		    (setgroups(0, NULL) != 0 || setgid(gid) != 0 || setuid(uid) != 0))
			_exit(103);
		dup2(json ? p[1] : null, 1);
		dup2(p[1], 2);
		execl(exe, "coffer-stat", "-s", sock, json ? "--json" : (char *)NULL, (char *)NULL);
		_exit(127);
	}
	assert_true(pid > 0);
	close(p[1]);
	while (got + 1 < cap && (r = read(p[0], err + got, cap - 1 - got)) > 0)
		got += (size_t)r;
	err[got] = '\0';
	close(p[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

/*
 * A store refuses another user with one ERROR ("not the store's user", -EACCES) before it
 * closes: coffer-stat must print that status and text, not "send: Broken pipe" or "bad or
 * no reply" (it used to, depending on whether the close beat its QUERY). Repeated so that
 * both orders are likely to be seen.
 */
static void test_stat_reports_refusal(void **state)
{
	static const char *const args[] = {"-m", "1M", "--hugepages=off", NULL};
	struct rc_store st;
	char err[512];
	int i, rc;

	(void)state;
	if (geteuid() != 0)
		skip(); /* needs root to become another uid */
	assert_int_equal(rc_store_start(&st, args), 0);
	/* control: the store's own user gets its statistics */
	assert_int_equal(run_stat_as(st.sock, geteuid(), getegid(), false, err, sizeof(err)), 0);
	/* let the other uid reach the socket: only the store's own check stands */
	assert_int_equal(chmod(st.dir, 0711), 0);
	assert_int_equal(chmod(st.sock, 0666), 0);
	for (i = 0; i < 20; i++) {
		rc = run_stat_as(st.sock, 65534, 65534, false, err, sizeof(err));
		if (rc == 103) {
			assert_int_equal(rc_store_stop(&st), 0);
			skip();
		}
		if (rc != 1 || strstr(err, "refused: not the store's user") == NULL ||
		    strstr(err, "(-13: ") == NULL) {
			(void)rc_store_stop(&st); /* not left running by the failure */
			fail_msg("run %d: exit %d, stderr: %s", i, rc, err);
		}
	}
	assert_true(rc_store_alive(&st));
	assert_int_equal(rc_store_stop(&st), 0);
}

/*
 * QUERY (v6) reports reservations apart from used_bytes, and the object index's objects:
 * checked through coffer-stat --json while a raw client holds one reservation, then after
 * it puts it under an ObjectID.
 */
static void test_stat_reports_reservations(void **state)
{
	static const char *const args[] = {"-m", "1M", "--hugepages=off", NULL};
	struct coffer_req req;
	struct coffer_rep rep;
	struct rc_store st;
	struct rc_conn c;
	char out[1024];

	(void)state;
	assert_int_equal(rc_store_start(&st, args), 0);
	assert_int_equal(rc_connect(&c, st.sock), 0);
	rc_req_init(&c, &req, COFFER_OP_RESERVE, 0);
	req.size = 4000;
	assert_int_equal(rc_batch(&c, &req, 1, &rep, 1, 5000), 1);
	assert_int_equal(rep.status, 0);
	assert_int_equal(run_stat_as(st.sock, geteuid(), getegid(), true, out, sizeof(out)), 0);
	if (strstr(out, "\"reserved_blocks\":1,\"reserved_bytes\":4032,") == NULL ||
	    strstr(out, "\"index_objects\":0,") == NULL ||
	    strstr(out, "\"index_slots\":0,") != NULL)
		fail_msg("coffer-stat --json with one reservation: %s", out);
	rc_req_init(&c, &req, COFFER_OP_PUT, 7);
	req.size = 4000;
	req.offset = rep.offset;
	assert_int_equal(rc_batch(&c, &req, 1, &rep, 1, 5000), 1);
	assert_int_equal(rep.status, 0);
	assert_int_equal(run_stat_as(st.sock, geteuid(), getegid(), true, out, sizeof(out)), 0);
	if (strstr(out, "\"reserved_blocks\":0,\"reserved_bytes\":0,") == NULL ||
	    strstr(out, "\"index_objects\":1,") == NULL ||
	    strstr(out, "\"objects_sealed\":1,") == NULL)
		fail_msg("coffer-stat --json after the put: %s", out);
	rc_close(&c);
	assert_int_equal(rc_store_stop(&st), 0);
}

/*
 * QUERY (v7) reports the arena's quick-listed blocks apart from used_bytes: a deleted 4000-byte
 * object's block waits on a quick list (free, not coalesced) until the next object of its
 * size takes it. Checked through coffer-stat --json.
 */
static void test_stat_reports_quick_lists(void **state)
{
	static const char *const args[] = {"-m", "1M", "--hugepages=off", NULL};
	struct rc_store st;
	struct rc_conn c;
	char out[1024];

	(void)state;
	assert_int_equal(rc_store_start(&st, args), 0);
	assert_int_equal(rc_connect(&c, st.sock), 0);
	assert_int_equal(rc_put(&c, 7, 4000, 7), 0);
	assert_int_equal(rc_delete(&c, 7), 0);
	assert_int_equal(run_stat_as(st.sock, geteuid(), getegid(), true, out, sizeof(out)), 0);
	if (strstr(out, "\"used_bytes\":0,") == NULL ||
	    strstr(out, "\"quick_blocks\":1,\"quick_bytes\":4032}") == NULL)
		fail_msg("coffer-stat --json after a delete: %s", out);
	assert_int_equal(rc_put(&c, 8, 4000, 8), 0); /* takes that block */
	assert_int_equal(run_stat_as(st.sock, geteuid(), getegid(), true, out, sizeof(out)), 0);
	if (strstr(out, "\"used_bytes\":4032,") == NULL ||
	    strstr(out, "\"quick_blocks\":0,\"quick_bytes\":0}") == NULL)
		fail_msg("coffer-stat --json after the next put: %s", out);
	rc_close(&c);
	assert_int_equal(rc_store_stop(&st), 0);
}

static int hugepages_free(void)
{
	char line[256];
	int v = -1;
	FILE *f = fopen("/proc/meminfo", "r");

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "HugePages_Free: %d", &v) == 1)
			break;
	fclose(f);
	return v;
}

static int mount_hugetlbfs(const char *dir)
{
	return mount("none", dir, "hugetlbfs", 0, NULL);
}

static void test_hugepages(void **state)
{
	static const char *const args[] = {"-m", "8M", "--hugepages=on", NULL};
	struct coffer_store_info info;
	struct rc_store st;
	struct rc_conn c;
	void *p;

	(void)state;
	if (hugepages_free() < 8) {
		fprintf(stderr, "skip: fewer than 8 free hugepages (HugePages_Free in "
				"/proc/meminfo); raise /proc/sys/vm/nr_hugepages to run this\n");
		skip();
	}
	assert_int_equal(rc_store_start(&st, args), 0);
	assert_int_equal(rc_connect(&c, st.sock), 0);
	assert_int_equal(c.hugepages, 1);
	assert_int_equal(rc_query(&c, &info), 0);
	assert_int_equal(info.hugepages, 1);
	/* A large object is 2 MiB aligned. */
	assert_int_equal(rc_create(&c, 1, 3 * MiB, 0, &p), 0);
	assert_int_equal(((char *)p - (char *)c.arena) % (2 * MiB), 0);
	memset(p, 1, 3 * MiB);
	assert_int_equal(rc_seal(&c, 1, COFFER_SEAL_RELEASE), 0);
	assert_int_equal(rc_delete(&c, 1), 0);
	rc_close(&c);
	assert_int_equal(rc_store_stop(&st), 0);
}

static void test_hugetlbfs_dir(void **state)
{
	char mnt[] = "/tmp/coffer-hugetlbfs-XXXXXX";
	const char *args[] = {"-m", "4M", "-d", mnt, NULL};
	struct coffer_store_info info;
	struct rc_store st;
	int rc;

	(void)state;
	if (geteuid() != 0 || hugepages_free() < 4) {
		fprintf(stderr, "skip: needs root (to mount hugetlbfs) and 4 free hugepages\n");
		skip();
	}
	assert_non_null(mkdtemp(mnt));
	if (mount_hugetlbfs(mnt) != 0) {
		rmdir(mnt);
		fprintf(stderr, "skip: cannot mount hugetlbfs on %s\n", mnt);
		skip();
	}
	rc = rc_store_start(&st, args);
	if (rc == 0) {
		rc = rc_query_path(st.sock, &info);
		if (rc == 0)
			rc = info.hugepages == 1 && info.capacity_bytes == 4 * MiB ? 0 : -1;
		if (rc_store_stop(&st) != 0)
			rc = -2;
	}
	umount(mnt);
	rmdir(mnt);
	assert_int_equal(rc, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_create_seal_get_release, setup16, teardown),
	    cmocka_unit_test_setup_teardown(test_eexist_and_no_trace, setup16, teardown),
	    cmocka_unit_test_setup_teardown(test_seal_rules, setup16, teardown),
	    cmocka_unit_test_setup_teardown(test_zero_bytes_and_zero_oid, setup16, teardown),
	    cmocka_unit_test_setup_teardown(test_get_batch_duplicates_and_bad_fields, setup16,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_get_waits_without_blocking_store, setup16,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_deferred_replies_full_socket, setup16, teardown),
	    cmocka_unit_test_setup_teardown(test_full_socket_no_send_per_delivery,
					    setup16_sendcount, teardown),
	    cmocka_unit_test_setup_teardown(test_half_closed_client_gets_its_replies, setup16,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_empty_message_before_half_close, setup16,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_half_close_with_replies_held, setup16, teardown),
	    cmocka_unit_test_setup_teardown(test_replace_on_seal, setup16, teardown),
	    cmocka_unit_test_setup_teardown(test_deferred_delete, setup16, teardown),
	    cmocka_unit_test_setup_teardown(test_eviction_order, setup1m, teardown),
	    cmocka_unit_test_setup_teardown(test_pinned_full_enomem_and_e2big, setup1m, teardown),
	    cmocka_unit_test_setup_teardown(test_zero_byte_objects_are_bounded, setup1m, teardown),
	    cmocka_unit_test_setup_teardown(test_client_killed, setup16, teardown),
	    cmocka_unit_test_setup_teardown(test_channel_ring_path, setup16, teardown),
	    cmocka_unit_test_setup_teardown(test_channel_backpressure, setup16, teardown),
	    cmocka_unit_test_setup_teardown(test_channel_doorbell_page, setup16_nosweep, teardown),
	    cmocka_unit_test_setup_teardown(test_channel_limit_fds, setup16_nosweep, teardown),
	    cmocka_unit_test_setup_teardown(test_channel_cold_connection, setup16_awake, teardown),
	    cmocka_unit_test_setup_teardown(test_channel_fairness, setup16, teardown),
	    cmocka_unit_test_setup_teardown(test_channel_reply_doorbell_made_blocking, setup16,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_channel_corrupt_indices_close_only_that_client,
					    setup16, teardown),
	    cmocka_unit_test(test_cli_errors_exit_2),
	    cmocka_unit_test(test_startup_refusal),
	    cmocka_unit_test(test_foreign_socket_kept),
	    cmocka_unit_test(test_restart_keeps_successor_socket),
	    cmocka_unit_test(test_concurrent_start_one_reachable),
	    cmocka_unit_test(test_start_beside_full_listener),
	    cmocka_unit_test(test_start_dir_locked_by_other),
	    cmocka_unit_test(test_stop_while_waiting_for_dir_lock),
	    cmocka_unit_test(test_start_beside_store_stopped_in_start),
	    cmocka_unit_test_setup_teardown(test_socket_mode_and_stop, setup16, teardown),
	    cmocka_unit_test(test_stat_reports_refusal),
	    cmocka_unit_test(test_stat_reports_reservations),
	    cmocka_unit_test(test_stat_reports_quick_lists),
	    cmocka_unit_test(test_other_uid_refused),
	    cmocka_unit_test(test_hugepages),
	    cmocka_unit_test(test_hugetlbfs_dir),
	};

	signal(SIGPIPE, SIG_IGN);
	if (getenv("COFFER_TEST_FILTER")) /* e.g. COFFER_TEST_FILTER=test_channel_fairness */
		cmocka_set_test_filter(getenv("COFFER_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
