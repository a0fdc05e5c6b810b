/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/client/test_hostile.c - nothing a store sends may crash the client.
 *
 * A fake store (a thread of this test, on a temporary socket) speaks the real protocol
 * (HELLO with an arena memfd and the doorbells, CHANNEL_OPEN with a ring memfd) and then answers
 * ring requests with lies chosen by the first byte of each request's ObjectID:
 *   1  GET ok, but [offset, offset + size) runs past the arena     -> -EPROTO
 *   2  an unknown tag first, then a positive status for the real one -> stray, -EPROTO
 *   3  CREATE ok, at an offset where the object would not fit      -> -EPROTO
 *   4  GET ok, honest (data the fake wrote into the arena)          -> 0, right pointer
 *   5  rep.prod jumps 1000 entries ahead (corrupt ring)             -> connection dead
 *   6  no answer at all (pending when 5 breaks the connection)      -> -ENOTCONN
 *   7  GET ok with another segment id                               -> -EPROTO
 * The client must map every lie to an error on that event only, count stray replies, and
 * on the corrupt ring complete everything pending with -ENOTCONN; nothing may crash (run
 * under ASan/UBSan too). A second fake passes a doorbell page shorter than a page: touching
 * it would raise SIGBUS, so coffer_connect() must refuse it with -EPROTO. A third opens a
 * channel with an id past the max_channels it announced (and past the doorbell page's bits):
 * the client must refuse that channel (-EPROTO, the channel closed again) instead of ringing
 * a doorbell bit the page does not have (a shift past 63 bits, undefined behaviour). A
 * fourth passes a pipe without a reader as its request doorbell and says it sleeps: the
 * client must refuse it at connect (-EPROTO) rather than die of SIGPIPE at its first call.
 * Two fakes that announce the same segment id and arena size (segment ids are 32 random
 * bits, and a store may lie) must still be two arenas to a client connected to both: each
 * connection reads its own store's memory, never the other's mapping.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include <coffer/coffer.h>

#include "runtime/client.h"
#include "runtime/proto_util.h"

#define FAKE_ARENA   (1u << 20)
#define FAKE_SEGMENT 7u
#define FAKE_ENTRIES 8u

struct fake {
	char dir[64];
	char path[100];
	int lsock;
	pthread_t tid;
	int errors;	      /* protocol steps that went wrong on the fake's side */
	bool short_doorbell;  /* answer HELLO with a 100-byte doorbell page, then wait for EOF */
	bool bad_chan_id;     /* open the channel as id 1000, then answer closes until EOF */
	bool bad_bell;	      /* pass a pipe with no reader as the store's request doorbell, and
			       * say the store sleeps, then wait for EOF */
	const char *greeting; /* 10 bytes at arena offset 4096 (GET of ID 4), "hello-fake" */
	bool joined;
	int chan_closes; /* CHANNEL_CLOSE messages for the bad id (bad_chan_id) */
	atomic_int stop;
};

static int fake_send(int sock, uint16_t type, const void *body, uint32_t blen, const int *fds,
		     unsigned int nfds)
{
	uint8_t buf[256];
	struct coffer_msg_hdr h;

	coffer__msg_hdr_init(&h, type, 0, (uint32_t)(sizeof(h) + blen));
	memcpy(buf, &h, sizeof(h));
	if (blen > 0) /* a body-less reply passes NULL */
		memcpy(buf + sizeof(h), body, blen);
	return coffer__send_fds(sock, buf, sizeof(h) + blen, fds, nfds, 0) < 0 ? -1 : 0;
}

static void fake_serve_ring(struct fake *f, int sock, struct coffer_chan_shm *shm,
			    const struct coffer_req *reqs, struct coffer_rep *reps, int client_bell)
{
	uint32_t cons = 0, rprod = 0;

	while (!atomic_load(&f->stop)) {
		struct pollfd p = {.fd = sock, .events = 0};
		uint32_t prod = __atomic_load_n(&shm->req.prod, __ATOMIC_ACQUIRE);
		bool wrote = false;

		if (poll(&p, 1, 1) > 0 && (p.revents & (POLLHUP | POLLERR)))
			return; /* the client disconnected */
		while (cons != prod) {
			struct coffer_req r;
			struct coffer_rep a = {0};

			memcpy(&r, &reqs[cons & (FAKE_ENTRIES - 1)], sizeof(r));
			cons++;
			a.tag = r.tag;
			a.segment = FAKE_SEGMENT;
			switch (r.oid[0]) {
			case 1:
				a.offset = FAKE_ARENA - 10;
				a.size = 100;
				break;
			case 2: {
				struct coffer_rep bogus = {.tag = r.tag ^ (1ull << 63)};

				reps[rprod++ & (FAKE_ENTRIES - 1)] = bogus;
				a.status = 5;
				break;
			}
			case 3:
				a.offset = FAKE_ARENA - 32;
				break;
			case 4:
				a.offset = 4096;
				a.size = 10;
				break;
			case 5:
				rprod += 1000; /* corrupt */
				break;
			case 6:
				continue; /* never answered */
			case 7:
				a.segment = FAKE_SEGMENT + 1;
				a.size = 1;
				break;
			default:
				f->errors++;
				break;
			}
			if (r.oid[0] != 5)
				reps[rprod++ & (FAKE_ENTRIES - 1)] = a;
			wrote = true;
		}
		__atomic_store_n(&shm->req.cons, cons, __ATOMIC_RELEASE);
		if (wrote) {
			uint64_t one = 1;

			__atomic_store_n(&shm->rep.prod, rprod, __ATOMIC_RELEASE);
			__atomic_thread_fence(__ATOMIC_SEQ_CST);
			if (__atomic_load_n(&shm->rep.consumer_sleeping, __ATOMIC_RELAXED) &&
			    write(client_bell, &one, sizeof(one)) < 0)
				f->errors++;
		}
	}
}

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	uint8_t buf[512];
	int fds[4], arena, seg = -1, bell = -1, sock;
	unsigned int nfds;
	long n;
	struct coffer_msg_hdr h;
	struct coffer_hello_reply hello = {.segment = FAKE_SEGMENT,
					   .arena_bytes = FAKE_ARENA,
					   .max_channels = 4,
					   .max_ring_entries = FAKE_ENTRIES};
	size_t shm_bytes =
	    sizeof(struct coffer_chan_shm) + FAKE_ENTRIES * (sizeof(struct coffer_req) + 32);
	struct coffer_chan_open_reply cor = {.channel_id = 1,
					     .ring_entries = FAKE_ENTRIES,
					     .shm_bytes = shm_bytes,
					     .req_off = sizeof(struct coffer_chan_shm),
					     .rep_off = sizeof(struct coffer_chan_shm) +
							FAKE_ENTRIES * sizeof(struct coffer_req)};
	uint8_t *base, *sm;

	sock = accept(f->lsock, NULL, NULL);
	if (sock < 0) {
		f->errors++;
		return NULL;
	}
	n = coffer__recv_fds(sock, buf, sizeof(buf), fds, &nfds, 4, 0);
	if (n <= 0 || coffer__msg_check(buf, (size_t)n, &h) < 0 || h.type != COFFER_MSG_HELLO)
		goto fail;
	arena = memfd_create("fake-arena", MFD_CLOEXEC);
	if (arena < 0 || ftruncate(arena, FAKE_ARENA) < 0)
		goto fail;
	base = mmap(NULL, FAKE_ARENA, PROT_READ | PROT_WRITE, MAP_SHARED, arena, 0);
	if (base == MAP_FAILED)
		goto fail;
	memcpy(base + 4096, f->greeting ? f->greeting : "hello-fake", 10);
	if (f->bad_bell) { /* a client writing to it would die of SIGPIPE */
		int p[2];

		if (pipe(p) < 0)
			goto fail;
		close(p[0]);
		bell = p[1];
	} else {
		bell = eventfd(0, EFD_CLOEXEC);
	}
	if (bell < 0)
		goto fail;
	{
		/* index_slots 0: the fourth fd (the object index) is not mapped */
		int out[4] = {arena, memfd_create("fake-doorbell", MFD_CLOEXEC), bell,
			      memfd_create("fake-index", MFD_CLOEXEC)};
		uint32_t sleeping = 1;

		if (out[1] < 0 ||
		    ftruncate(out[1], f->short_doorbell ? 100 : COFFER_DOORBELL_BYTES) < 0 ||
		    (f->bad_bell && pwrite(out[1], &sleeping, sizeof(sleeping),
					   offsetof(struct coffer_doorbell, store_sleeping)) !=
					sizeof(sleeping)) ||
		    out[3] < 0 ||
		    fake_send(sock, COFFER_MSG_HELLO_REPLY, &hello, sizeof(hello), out, 4) < 0)
			goto fail;
		close(out[1]);
		close(out[3]);
	}
	close(arena);
	if (f->short_doorbell || f->bad_bell) { /* the client must hang up, having mapped
						 * nothing / written nothing */
		n = coffer__recv_fds(sock, buf, sizeof(buf), fds, &nfds, 4, 0);
		if (n != 0)
			f->errors++;
		munmap(base, FAKE_ARENA);
		close(bell);
		close(sock);
		return NULL;
	}

	n = coffer__recv_fds(sock, buf, sizeof(buf), fds, &nfds, 4, 0);
	if (n <= 0 || coffer__msg_check(buf, (size_t)n, &h) < 0 ||
	    h.type != COFFER_MSG_CHANNEL_OPEN || nfds != 1)
		goto fail;
	seg = memfd_create("fake-chan", MFD_CLOEXEC);
	if (seg < 0 || ftruncate(seg, (off_t)shm_bytes) < 0)
		goto fail;
	sm = mmap(NULL, shm_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, seg, 0);
	if (sm == MAP_FAILED)
		goto fail;
	if (f->bad_chan_id)
		cor.channel_id = 1000; /* max_channels is 4; the page has 512 bits */
	if (fake_send(sock, COFFER_MSG_CHANNEL_OPEN_REPLY, &cor, sizeof(cor), &seg, 1) < 0)
		goto fail;
	if (f->bad_chan_id) { /* answer CHANNEL_CLOSE (of that id) until the client hangs up */
		while (!atomic_load(&f->stop)) {
			struct pollfd p = {.fd = sock, .events = POLLIN};
			struct coffer_chan_close cc;
			int cfds[4];

			if (poll(&p, 1, 10) == 0)
				continue; /* a failed test stops us instead of hanging up */
			n = coffer__recv_fds(sock, buf, sizeof(buf), cfds, &nfds, 4, 0);
			if (n <= 0)
				break;
			if (coffer__msg_check(buf, (size_t)n, &h) < 0 ||
			    h.type != COFFER_MSG_CHANNEL_CLOSE ||
			    (size_t)n < sizeof(h) + sizeof(cc))
				break;
			memcpy(&cc, buf + sizeof(h), sizeof(cc));
			f->chan_closes += cc.channel_id == 1000;
			if (fake_send(sock, COFFER_MSG_CHANNEL_CLOSE_REPLY, NULL, 0, NULL, 0) < 0)
				break;
		}
	} else {
		fake_serve_ring(f, sock, (struct coffer_chan_shm *)sm,
				(const struct coffer_req *)(sm + cor.req_off),
				(struct coffer_rep *)(sm + cor.rep_off), fds[0]);
	}
	close(fds[0]);
	munmap(sm, shm_bytes);
	munmap(base, FAKE_ARENA);
	close(seg);
	close(bell);
	close(sock);
	return NULL;
fail:
	f->errors++;
	close(sock);
	return NULL;
}

static int setup_fake(void **state, bool short_doorbell, bool bad_chan_id, bool bad_bell,
		      const char *greeting)
{
	struct fake *f = calloc(1, sizeof(*f));
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	if (!f)
		return -1;
	f->greeting = greeting;
	f->short_doorbell = short_doorbell;
	f->bad_chan_id = bad_chan_id;
	f->bad_bell = bad_bell;
	snprintf(f->dir, sizeof(f->dir), "/tmp/coffer-hostile.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->path, sizeof(f->path), "%s/s.sock", f->dir);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", f->path);
	f->lsock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (f->lsock < 0 || bind(f->lsock, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(f->lsock, 4) < 0)
		return -1;
	if (pthread_create(&f->tid, NULL, fake_main, f))
		return -1;
	if (coffer_init() < 0)
		return -1;
	*state = f;
	return 0;
}

static int setup(void **state)
{
	return setup_fake(state, false, false, false, NULL);
}

static int setup_short_doorbell(void **state)
{
	return setup_fake(state, true, false, false, NULL);
}

static int setup_bad_chan_id(void **state)
{
	return setup_fake(state, false, true, false, NULL);
}

static int setup_bad_bell(void **state)
{
	return setup_fake(state, false, false, true, NULL);
}

static int teardown(void **state)
{
	struct fake *f = *state;

	atomic_store(&f->stop, 1);
	if (!f->joined)
		pthread_join(f->tid, NULL);
	close(f->lsock);
	unlink(f->path);
	rmdir(f->dir);
	coffer_fini();
	free(f);
	return 0;
}

static int poll_one(coffer_handle_t eq, struct coffer_event *ev)
{
	struct coffer_event *done;
	int n = coffer_eq_poll(eq, 1, 5000000, 1, &done);

	if (n != 1)
		return n < 0 ? n : -ETIMEDOUT;
	return done == ev ? 0 : -EIO;
}

static void test_lies(void **state)
{
	struct fake *f = *state;
	coffer_handle_t c, eq, oh[8];
	struct coffer_event ev[8];
	const void *rd[8] = {0};
	uint64_t sz[8] = {0};
	void *wr = NULL;

	assert_int_equal(coffer_connect(f->path, &c), 0);
	assert_int_equal(coffer_eq_create(&eq), 0);
	for (int i = 1; i < 8; i++) {
		struct coffer_oid oid = {{(uint8_t)i}};

		assert_int_equal(coffer_obj_open(c, &oid, 0, &oh[i]), 0);
		assert_int_equal(coffer_event_init(&ev[i], eq, NULL), 0);
	}
	/* one at a time, so that each lie meets exactly one request */
	assert_int_equal(coffer_obj_get(oh[1], 0, &rd[1], &sz[1], &ev[1]), 0);
	assert_int_equal(poll_one(eq, &ev[1]), 0);
	assert_int_equal(ev[1].ev_error, -EPROTO);
	assert_null(rd[1]);

	assert_int_equal(coffer_obj_get(oh[2], 0, &rd[2], &sz[2], &ev[2]), 0);
	assert_int_equal(poll_one(eq, &ev[2]), 0);
	assert_int_equal(ev[2].ev_error, -EPROTO);
	assert_int_equal(coffer__conn_stray_replies(c), 1);

	assert_int_equal(coffer_obj_create(oh[3], 64, 0, &wr, &ev[3]), 0);
	assert_int_equal(poll_one(eq, &ev[3]), 0);
	assert_int_equal(ev[3].ev_error, -EPROTO);
	assert_null(wr);

	assert_int_equal(coffer_obj_get(oh[7], 0, &rd[7], &sz[7], &ev[7]), 0);
	assert_int_equal(poll_one(eq, &ev[7]), 0);
	assert_int_equal(ev[7].ev_error, -EPROTO);

	/* an honest answer still works after all that */
	assert_int_equal(coffer_obj_get(oh[4], 0, &rd[4], &sz[4], &ev[4]), 0);
	assert_int_equal(poll_one(eq, &ev[4]), 0);
	assert_int_equal(ev[4].ev_error, 0);
	assert_int_equal(sz[4], 10);
	assert_memory_equal(rd[4], "hello-fake", 10);
	rd[4] = NULL;
	assert_int_equal(coffer_obj_get(oh[4], 0, &rd[4], &sz[4], &ev[4]), 0);
	assert_int_equal(poll_one(eq, &ev[4]), 0);
	assert_memory_equal(rd[4], "hello-fake", 10);

	/* a corrupt ring kills the connection: the pending request completes, nothing hangs */
	assert_int_equal(coffer_obj_get(oh[6], -1, &rd[6], &sz[6], &ev[6]), 0);
	assert_int_equal(coffer_flush(c), 0);
	assert_int_equal(coffer_obj_get(oh[5], 0, &rd[5], &sz[5], &ev[5]), 0);
	{
		struct coffer_event *done[2];
		int got = 0;

		while (got < 2) {
			int n = coffer_eq_poll(eq, 1, 5000000, 2, done);

			if (n <= 0)
				print_error("coffer_eq_poll: %d after %d of 2\n", n, got);
			assert_true(n > 0);
			for (int k = 0; k < n; k++)
				assert_int_equal(done[k]->ev_error, -ENOTCONN);
			got += n;
		}
	}
	assert_int_equal(coffer_obj_get(oh[4], 0, &rd[4], &sz[4], &ev[4]), -ENOTCONN);

	for (int i = 1; i < 8; i++) {
		assert_int_equal(coffer_event_fini(&ev[i]), 0);
		assert_int_equal(coffer_obj_close(oh[i]), 0);
	}
	assert_int_equal(coffer_eq_destroy(eq, 0), 0);
	assert_int_equal(coffer_disconnect(c), 0);
	assert_int_equal(f->errors, 0);
}

/* coffer_connect() to @f must fail with -EPROTO, and the fake see our EOF with no error. */
static void expect_connect_refused(struct fake *f)
{
	coffer_handle_t c;

	assert_int_equal(coffer_connect(f->path, &c), -EPROTO);
	atomic_store(&f->stop, 1);
	pthread_join(f->tid, NULL); /* it saw our EOF */
	f->joined = true;
	assert_int_equal(f->errors, 0);
}

static void test_short_doorbell(void **state)
{
	expect_connect_refused(*state);
}

/*
 * A request doorbell that is not an eventfd (here a pipe whose reader is gone, with the
 * page saying the store sleeps): the first request would write to it and SIGPIPE would
 * kill the client. Protocol v3 passes it once per connection; connect refuses it.
 */
static void test_bad_bell(void **state)
{
	expect_connect_refused(*state);
}

/*
 * A channel id the store may not give (>= its max_channels, and past the doorbell page's
 * 8 x 64 bits): publishing on it would ring bit 1000 / 8 = 125 of a 64-bit word. The open
 * must fail with -EPROTO and the channel be closed again at the store.
 */
static void test_bad_channel_id(void **state)
{
	struct fake *f = *state;
	struct coffer_oid oid;
	struct coffer_event ev;
	coffer_handle_t c, eq;
	const void *data = NULL;
	uint64_t size = 0;

	memset(&oid, 4, sizeof(oid));
	assert_int_equal(coffer_connect(f->path, &c), 0);
	assert_int_equal(coffer_eq_create(&eq), 0);
	assert_int_equal(coffer_event_init(&ev, eq, NULL), 0);
	assert_int_equal(coffer_obj_get_oid(c, &oid, 0, &data, &size, &ev), -EPROTO);
	assert_int_equal(coffer_event_fini(&ev), 0);
	assert_int_equal(coffer_eq_destroy(eq, 0), 0);
	assert_int_equal(coffer_disconnect(c), 0);
	atomic_store(&f->stop, 1);
	pthread_join(f->tid, NULL); /* it saw our EOF */
	f->joined = true;
	assert_int_equal(f->chan_closes, 1);
	assert_int_equal(f->errors, 0);
}

/* GET of ID 4 (the fake's honest answer: 10 bytes at offset 4096) through @c into *@data. */
static int get_greeting(coffer_handle_t c, coffer_handle_t eq, const void **data)
{
	struct coffer_oid oid = {{4}};
	struct coffer_event ev;
	uint64_t size = 0;
	int rc;

	assert_int_equal(coffer_event_init(&ev, eq, NULL), 0);
	rc = coffer_obj_get_oid(c, &oid, 0, data, &size, &ev);
	if (rc == 0)
		rc = poll_one(eq, &ev);
	if (rc == 0)
		rc = ev.ev_error;
	if (rc == 0 && size != 10)
		rc = -EIO;
	assert_int_equal(coffer_event_fini(&ev), 0);
	return rc;
}

/*
 * Two stores, one segment id and arena size (the second fake copies the first's, as a
 * random 32-bit id may, or a lying store does): the client maps each arena on its own, so
 * each connection reads its own store's bytes. Sharing the first mapping by id would let
 * the second store's offsets reach, and its creates write, the first store's objects.
 */
static void test_same_segment_id(void **state)
{
	struct fake *a = *state;
	void *bstate = NULL;
	coffer_handle_t ca, cb, eq;
	const void *da = NULL, *db = NULL;

	assert_int_equal(setup_fake(&bstate, false, false, false, "other-fake"), 0);
	assert_int_equal(coffer_connect(a->path, &ca), 0);
	assert_int_equal(coffer_connect(((struct fake *)bstate)->path, &cb), 0);
	assert_int_equal(coffer_eq_create(&eq), 0);
	assert_int_equal(get_greeting(ca, eq, &da), 0);
	assert_int_equal(get_greeting(cb, eq, &db), 0);
	assert_memory_equal(da, "hello-fake", 10);
	assert_memory_equal(db, "other-fake", 10);
	assert_ptr_not_equal(da, db);
	assert_int_equal(coffer_eq_destroy(eq, 0), 0);
	assert_int_equal(coffer_disconnect(cb), 0);
	assert_int_equal(coffer_disconnect(ca), 0);
	assert_int_equal(((struct fake *)bstate)->errors, 0);
	assert_int_equal(a->errors, 0);
	teardown(&bstate);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_lies, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_short_doorbell, setup_short_doorbell, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_channel_id, setup_bad_chan_id, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_bell, setup_bad_bell, teardown),
	    cmocka_unit_test_setup_teardown(test_same_segment_id, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
