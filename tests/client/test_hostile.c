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
 *   8  the status -oid[1] for any op: one docs/protocol.md gives that op -> that status;
 *      any other (-EINTR, -ENOTCONN, a GET's -EAGAIN, ...)           -> -EPROTO
 *   -  RESERVE (no ID) of 64 bytes at 32 bytes before the arena's end -> -EPROTO, no pointer;
 *      of any other size at 8192                                     -> 0; of 48 bytes: the
 *      first of the batch is answered, then the fake dies (closes everything)
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
 * Fakes with an object index (protocol v4): one whose slots lie (outside the arena, sizes
 * that overflow offset + size, slots odd forever or rewritten without end, unknown states,
 * entries away from their ID's home) must make coffer_obj_read_oid() and its vector form
 * answer -EPROTO or -EAGAIN at once, copy nothing outside the arena and never hang; ones
 * whose index does not fit what HELLO_REPLY announces (a slot count not a power of two, a
 * file shorter than the slots, a pipe, a count whose bytes overflow) are refused at connect.
 * A fake whose request doorbell blocks a write (O_NONBLOCK cleared at HELLO or after the
 * channel opened, counter full, store "sleeping") must not hold the client thread that
 * rings it: its request is still answered (the fake polls its ring). One that stops reading
 * its socket (answering queries ahead) must make the control call whose request finds no
 * room say -ETIMEDOUT, as a silent store does, not -ENOTCONN.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <coffer/coffer.h>

#include "runtime/client.h"
#include "runtime/proto_util.h"
#include "tests/client/sig_tick.h"

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
	int index_mode;	      /* enum fake_index: what object index HELLO_REPLY announces */
	struct coffer_index_slot *index; /* IX_LIES: the fake's writable map of its index */
	atomic_int churn_stop;		 /* ix_churn() returns */
	bool joined;
	int chan_closes; /* CHANNEL_CLOSE messages for the bad id (bad_chan_id) */
	atomic_int stop;
	int shrink;	     /* enum fake_shrink: the file the fake passes unsealed */
	atomic_int victim;   /* that file (a dup the test shrinks), -1 until passed */
	atomic_int hold;     /* the test asks the fake to stop touching its ring */
	atomic_int held;     /* the fake no longer touches it */
	uint64_t huge_arena; /* non-zero: an unsealed hugetlb arena of this many bytes */
	atomic_int
	    hello_fds; /* 1: HELLO_REPLY's arena and request doorbell swapped; 2: one fd short */
	atomic_int query_fd;	/* > 0: an fd the fake's QUERY_REPLY carries (it must carry none) */
	atomic_int full_bell;	/* enum fake_full_bell: a request doorbell whose write blocks */
	atomic_int read_only;	/* enum fake_ro: the file the fake passes opened read-only */
	atomic_int deaf;	/* stop reading the socket; answer QUERYs before they come, as many
				 * as the socket takes (test_ctl_send_timeout) */
	atomic_int hello_error; /* non-zero: answer HELLO with ERROR of this status, hang up */
	atomic_int chan_err[3]; /* the first CHANNEL_OPENs get ERROR of these statuses (not
				 * fatal: the next is served); 0 ends the list */
	atomic_int wake_blocking; /* clear O_NONBLOCK on the EQ eventfd CHANNEL_OPEN passes */
	atomic_int dribble;	  /* > 0: a QUERY is answered after DRIBBLE_MSGS unsolicited
				   * messages, one every this many ms */
	atomic_int dribbled;	  /* the fake sent the QUERY_REPLY after its dribble, or found
				   * the client gone */
	atomic_int hung_up;	  /* a dribble's send found the client gone (it gave up) */
};

#define DRIBBLE_MSGS 15 /* the client skips up to 16 unsolicited messages per exchange */

/*
 * A request doorbell that blocks the client's write: the eventfd without O_NONBLOCK and its
 * counter at 0xfffffffffffffffe (the most it holds), with the doorbell page saying the store
 * sleeps, so the client rings it at its first request. The fake answers its ring without
 * the doorbell (it polls the ring every millisecond).
 */
enum fake_full_bell {
	FB_NONE = 0,
	FB_AT_HELLO,	    /* passed like that in HELLO_REPLY */
	FB_AT_CHANNEL_OPEN, /* O_NONBLOCK cleared and the counter filled after the client
			     * connected (the file description is shared: the store can) */
};

/* Which file the fake passes through a read-only descriptor (sealed and big enough, so only
 * the client's mmap(PROT_WRITE) fails: EACCES). */
enum fake_ro {
	RO_NONE = 0,
	RO_ARENA, /* HELLO_REPLY's arena */
	RO_CHAN,  /* CHANNEL_OPEN_REPLY's rings */
};

/* A read-only descriptor of the file @fd names (consumes @fd), or -1. */
static int reopen_read_only(int fd)
{
	char p[64];
	int ro;

	if (fd < 0)
		return -1;
	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	ro = open(p, O_RDONLY | O_CLOEXEC);
	close(fd);
	return ro;
}

/*
 * Which of the files the fake passes for mapping it leaves unsealed, so that it can shrink
 * it after the client mapped it (an honest store seals all of them: F_SEAL_SHRINK | F_SEAL_GROW
 * | F_SEAL_SEAL). A client touching a page of a shared mapping past the end of its file dies
 * of SIGBUS.
 */
enum fake_shrink {
	SHR_NONE = 0,
	SHR_ARENA,    /* the arena (with IX_LIES, read through the index) */
	SHR_INDEX,    /* the object index (IX_LIES) */
	SHR_DOORBELL, /* the connection's doorbell page */
	SHR_CHAN,     /* the channel's rings */
};

/* A memfd of @bytes for the client to map: sealed as an honest store's, unless it is the
 * file the fake means to shrink (@shr == @f->shrink), whose dup goes to f->victim. */
static int fake_memfd(struct fake *f, const char *name, off_t bytes, int shr)
{
	bool victim = shr == f->shrink;
	int fd = memfd_create(name, MFD_CLOEXEC | (victim ? 0 : MFD_ALLOW_SEALING)), d;

	if (fd < 0)
		return -1;
	if (ftruncate(fd, bytes) < 0)
		goto fail;
	if (!victim && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		goto fail;
	if (victim) {
		d = dup(fd);
		if (d < 0)
			goto fail;
		atomic_store(&f->victim, d);
	}
	return fd;
fail:
	close(fd);
	return -1;
}

/* What object index a fake announces (0: none; each other one waits for EOF after HELLO). */
enum fake_index {
	IX_NONE = 0,
	IX_LIES,     /* FAKE_IX_SLOTS slots with the entries of ix_fill(); connect succeeds */
	IX_NOT_POW2, /* index_slots 1000 */
	IX_SHORT,    /* a file of fewer bytes than index_slots slots */
	IX_PIPE,     /* a pipe as the index fd */
	IX_HUGE,     /* index_slots 2^31: 128 GiB of slots, a 64 KiB file */
	IX_ACCESS_UNSEALED, /* an access map (v6) not sealed against shrinking */
	IX_ACCESS_SHORT,    /* an access map of fewer bytes than one bit per slot */
};
#define FAKE_IX_SLOTS 1024u
#define FAKE_IX_SEED  0x5eeeull

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
	bool die = false; /* a RESERVE of 48 bytes was answered: stop after this batch */

	while (!atomic_load(&f->stop) && !die) {
		struct pollfd p = {.fd = sock, .events = POLLIN};
		uint32_t prod;
		bool wrote = false;

		if (atomic_load(&f->deaf)) {
			/* Reads nothing more: the client's requests pile up in this socket
			 * until its sends find no room, while its replies keep coming. */
			uint8_t m[sizeof(struct coffer_msg_hdr) + sizeof(struct coffer_store_info)];
			struct coffer_store_info info = {.capacity_bytes = FAKE_ARENA};
			struct coffer_msg_hdr h;
			long r;

			coffer__msg_hdr_init(&h, COFFER_MSG_QUERY_REPLY, 0, sizeof(m));
			memcpy(m, &h, sizeof(h));
			memcpy(m + sizeof(h), &info, sizeof(info));
			do
				r = coffer__send_fds(sock, m, sizeof(m), NULL, 0, MSG_DONTWAIT);
			while (r >= 0);
			if (r != -EAGAIN)
				return; /* the client hung up */
			poll(NULL, 0, 1);
			continue;
		}
		if (poll(&p, 1, 1) > 0) {
			uint8_t m[256];
			struct coffer_msg_hdr h;
			unsigned int nfds;
			int fds[4];
			long n = coffer__recv_fds(sock, m, sizeof(m), fds, &nfds, 4, 0);

			if (n <= 0)
				return; /* the client disconnected */
			/* a channel the client refused (SHR_CHAN) is closed again; a QUERY is
			 * answered (with query_fd attached when set) */
			if (coffer__msg_check(m, (size_t)n, &h) == 0 &&
			    h.type == COFFER_MSG_QUERY && nfds == 0) {
				struct coffer_store_info info = {.capacity_bytes = FAKE_ARENA};
				int qfd = atomic_load(&f->query_fd), gap = atomic_load(&f->dribble);

				bool gone = false;

				/* a client that gave up on the dribble hangs up (conn.c,
				 * conn_abandon()): the sends after that fail, as they should */
				for (int k = 0; gap > 0 && k < DRIBBLE_MSGS && !gone; k++) {
					poll(NULL, 0,
					     gap); /* a message the client did not ask for */
					gone = fake_send(sock, COFFER_MSG_CHANNEL_CLOSE_REPLY, NULL,
							 0, NULL, 0) < 0;
				}
				if (gap > 0 && !gone)
					poll(NULL, 0, gap);
				if (!gone && fake_send(sock, COFFER_MSG_QUERY_REPLY, &info,
						       sizeof(info), &qfd, qfd > 0 ? 1 : 0) < 0) {
					if (gap > 0)
						gone = true;
					else
						f->errors++;
				}
				atomic_store(&f->hung_up, gone);
				atomic_store(&f->dribbled, gap > 0);
			} else if (coffer__msg_check(m, (size_t)n, &h) < 0 ||
				   h.type != COFFER_MSG_CHANNEL_CLOSE || nfds != 0 ||
				   fake_send(sock, COFFER_MSG_CHANNEL_CLOSE_REPLY, NULL, 0, NULL,
					     0) < 0) {
				f->errors++;
			} else {
				f->chan_closes++;
			}
		}
		if (atomic_load(&f->hold)) { /* the test shrinks the rings: touch them no more */
			atomic_store(&f->held, 1);
			continue;
		}
		prod = __atomic_load_n(&shm->req.prod, __ATOMIC_ACQUIRE);
		while (cons != prod) {
			struct coffer_req r;
			struct coffer_rep a = {0};

			memcpy(&r, &reqs[cons & (FAKE_ENTRIES - 1)], sizeof(r));
			cons++;
			a.tag = r.tag;
			a.segment = FAKE_SEGMENT;
			switch (r.oid[0]) {
			case 0: /* RESERVE (no ID): 64 bytes at 32 before the end, or honest */
				if (r.op != COFFER_OP_RESERVE)
					f->errors++;
				if (r.size == 48 && die)
					continue; /* dies before it answers the rest of the batch */
				die = die || r.size == 48;
				a.offset = r.size == 64 ? FAKE_ARENA - 32 : 8192;
				break;
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
			case 8: /* the status the ID's second byte names, as a negative errno */
				a.status = -(int32_t)r.oid[1];
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

/* Slot @i of @ix as the store writes it (seq even). */
static void ix_set(struct coffer_index_slot *ix, uint32_t i, uint32_t seq, uint32_t state,
		   const uint8_t *oid, uint64_t off, uint64_t size)
{
	ix[i].seq = seq;
	ix[i].state = state;
	memcpy(ix[i].oid, oid, COFFER_OID_SIZE);
	ix[i].offset = off;
	ix[i].size = size;
}

/* The home slot of the test's ObjectID {@b, @b2} in a FAKE_IX_SLOTS index. */
static uint32_t ix_home2(uint8_t b, uint8_t b2)
{
	struct coffer_oid oid = {{b, b2}};

	return (uint32_t)(coffer__index_hash(FAKE_IX_SEED, oid.id) & (FAKE_IX_SLOTS - 1));
}

static uint32_t ix_home(uint8_t b)
{
	return ix_home2(b, 0);
}

/* The second byte of ID 8 that puts its home in the table's last 8 slots. */
static uint8_t ix_wrap_b2(void)
{
	for (unsigned int b2 = 1; b2 < 256; b2++)
		if (ix_home2(8, (uint8_t)b2) >= FAKE_IX_SLOTS - 8)
			return (uint8_t)b2;
	return 0;
}

/*
 * The lies of IX_LIES, one per ObjectID {n} (first byte n):
 *   1  LIVE, [offset, offset + size) runs past the arena's end          -> -EPROTO
 *   2  LIVE, size UINT64_MAX - 100: offset + size overflows              -> -EPROTO
 *   3  LIVE, offset past the arena, near UINT64_MAX                      -> -EPROTO
 *   4  LIVE, honest: 10 bytes at 4096 ("hello-fake")                    -> 10
 *   5  its whole probe window odd (being written) forever               -> -EAGAIN
 *   6  LIVE, but COFFER_INDEX_PROBE slots past its home                  -> -EAGAIN
 *   7  an unknown state (99) at home, then LIVE and honest right after  -> 10
 *   8  LIVE, honest, in slot 2: its home is near the end of the table and
 *      the probe wraps around to slot 0 (ID {8, ix_wrap_b2()})          -> 10
 * The slots each lie takes do not overlap for FAKE_IX_SEED (checked by the test).
 */
static void ix_fill(struct coffer_index_slot *ix)
{
	uint8_t oid[COFFER_OID_SIZE] = {0};
	uint32_t h;

	oid[0] = 1;
	ix_set(ix, ix_home(1), 2, COFFER_INDEX_LIVE, oid, FAKE_ARENA - 10, 100);
	oid[0] = 2;
	ix_set(ix, ix_home(2), 2, COFFER_INDEX_LIVE, oid, 4096, UINT64_MAX - 100);
	oid[0] = 3;
	ix_set(ix, ix_home(3), 2, COFFER_INDEX_LIVE, oid, UINT64_MAX - 5, 10);
	oid[0] = 4;
	ix_set(ix, ix_home(4), 2, COFFER_INDEX_LIVE, oid, 4096, 10);
	oid[0] = 5;
	h = ix_home(5);
	for (uint32_t i = 0; i < COFFER_INDEX_PROBE; i++)
		ix_set(ix, (h + i) & (FAKE_IX_SLOTS - 1), 3, COFFER_INDEX_LIVE, oid, 4096, 10);
	oid[0] = 6;
	h = ix_home(6);
	for (uint32_t i = 0; i < COFFER_INDEX_PROBE; i++)
		ix[(h + i) & (FAKE_IX_SLOTS - 1)].state = COFFER_INDEX_TOMB;
	ix_set(ix, (h + COFFER_INDEX_PROBE) & (FAKE_IX_SLOTS - 1), 2, COFFER_INDEX_LIVE, oid, 4096,
	       10);
	oid[0] = 7;
	h = ix_home(7);
	ix_set(ix, h, 2, 99, oid, FAKE_ARENA + 4096, 10);
	ix_set(ix, (h + 1) & (FAKE_IX_SLOTS - 1), 2, COFFER_INDEX_LIVE, oid, 4096, 10);
	oid[0] = 8;
	oid[1] = ix_wrap_b2();
	for (h = ix_home2(8, oid[1]); h != 2; h = (h + 1) & (FAKE_IX_SLOTS - 1))
		ix[h].state = COFFER_INDEX_TOMB;
	ix_set(ix, 2, 2, COFFER_INDEX_LIVE, oid, 4096, 10);
}

/* The index fd (*@fd, -1 for none) and HELLO_REPLY's index fields for @f's index_mode. */
static int fake_index(struct fake *f, struct coffer_hello_reply *hello, int *fd)
{
	uint64_t bytes = (uint64_t)FAKE_IX_SLOTS * sizeof(struct coffer_index_slot);
	int p[2];

	hello->index_seed = FAKE_IX_SEED;
	switch (f->index_mode) {
	case IX_NONE:
		*fd = memfd_create("fake-index", MFD_CLOEXEC);
		return *fd < 0 ? -1 : 0;
	case IX_PIPE:
		if (pipe(p) < 0)
			return -1;
		close(p[1]);
		*fd = p[0];
		hello->index_slots = FAKE_IX_SLOTS;
		return 0;
	default:
		break;
	}
	hello->index_slots = f->index_mode == IX_NOT_POW2 ? 1000
			     : f->index_mode == IX_HUGE	  ? 1u << 31
							  : FAKE_IX_SLOTS;
	if (f->index_mode == IX_SHORT)
		bytes -= 64;
	*fd = fake_memfd(f, "fake-index", (off_t)bytes, SHR_INDEX);
	if (*fd < 0)
		return -1;
	if (f->index_mode == IX_LIES) {
		f->index = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
		if (f->index == MAP_FAILED) {
			f->index = NULL;
			return -1;
		}
		ix_fill(f->index);
	}
	return 0;
}

/* The access map's fd (v6, HELLO_REPLY's fifth) for @f's index_mode: a memfd of one bit
 * per slot sealed against shrinking, as the store sends it, unless the mode says
 * otherwise. Return: the fd, or -1. */
static int fake_access(const struct fake *f)
{
	uint64_t bytes = coffer__access_bytes(FAKE_IX_SLOTS);
	int fd = memfd_create("fake-access", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0)
		return -1;
	if (f->index_mode == IX_ACCESS_SHORT)
		bytes -= 1;
	if (ftruncate(fd, (off_t)bytes) < 0 ||
	    (f->index_mode != IX_ACCESS_UNSEALED && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) < 0)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Make @bell's write block: O_NONBLOCK cleared, counter at its maximum. 0 or -1. */
static int fake_fill_bell(int bell)
{
	uint64_t full = 0xfffffffffffffffeull;
	int fl = fcntl(bell, F_GETFL);

	if (fl < 0 || fcntl(bell, F_SETFL, fl & ~O_NONBLOCK) < 0)
		return -1;
	return write(bell, &full, sizeof(full)) == sizeof(full) ? 0 : -1;
}

/* The client's next message, or 0 once the test says stop (a failed test does not hang up:
 * its teardown must not wait for us for ever). Return: as coffer__recv_fds(). */
static long fake_recv(struct fake *f, int sock, uint8_t *buf, size_t cap, int *fds,
		      unsigned int *nfds)
{
	struct pollfd p = {.fd = sock, .events = POLLIN};

	*nfds = 0;
	while (!atomic_load(&f->stop))
		if (poll(&p, 1, 10) > 0)
			return coffer__recv_fds(sock, buf, cap, fds, nfds, 4, 0);
	return 0;
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
	if (atomic_load(&f->hello_error)) { /* as a store refusing a client at accept */
		struct coffer_msg_error e = {.status = atomic_load(&f->hello_error)};

		snprintf(e.message, sizeof(e.message), "refused");
		if (fake_send(sock, COFFER_MSG_ERROR, &e, sizeof(e), NULL, 0) < 0)
			f->errors++;
		close(sock);
		return NULL;
	}
	if (f->huge_arena) { /* as a -d hugetlbfs file: it cannot be sealed */
		hello.arena_bytes = f->huge_arena;
		arena = memfd_create("fake-arena", MFD_CLOEXEC | MFD_HUGETLB);
		if (arena >= 0 && ftruncate(arena, (off_t)f->huge_arena) < 0) {
			close(arena);
			arena = -1;
		}
	} else {
		arena = fake_memfd(f, "fake-arena", FAKE_ARENA, SHR_ARENA);
	}
	if (arena < 0)
		goto fail;
	base = mmap(NULL, hello.arena_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, arena, 0);
	if (base == MAP_FAILED)
		goto fail;
	if (f->read_only == RO_ARENA && (arena = reopen_read_only(arena)) < 0)
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
	if (bell < 0 || (f->full_bell == FB_AT_HELLO && fake_fill_bell(bell) < 0))
		goto fail;
	{
		/* index_slots 0 (IX_NONE): the fourth and fifth fds (the object index and its
		 * access map) are not mapped */
		int out[5] = {arena,
			      fake_memfd(f, "fake-doorbell",
					 f->short_doorbell ? 100 : COFFER_DOORBELL_BYTES,
					 SHR_DOORBELL),
			      bell, -1, fake_access(f)};
		uint32_t sleeping = 1;

		if (fake_index(f, &hello, &out[3]) < 0)
			goto fail;
		if (out[1] < 0 ||
		    ((f->bad_bell || f->full_bell) &&
		     pwrite(out[1], &sleeping, sizeof(sleeping),
			    offsetof(struct coffer_doorbell, store_sleeping)) !=
			 sizeof(sleeping)) ||
		    out[3] < 0 || out[4] < 0)
			goto fail;
		if (f->hello_fds == 1) {
			out[0] = bell;
			out[2] = arena;
		}
		if (fake_send(sock, COFFER_MSG_HELLO_REPLY, &hello, sizeof(hello), out,
			      f->hello_fds == 2 ? 4 : 5) < 0)
			goto fail;
		close(out[1]);
		close(out[3]);
		close(out[4]);
	}
	close(arena);
	if (f->short_doorbell || f->bad_bell || f->index_mode != IX_NONE || f->hello_fds ||
	    f->read_only == RO_ARENA) {
		/* the client must hang up, having mapped nothing / written nothing (or, with
		 * IX_LIES, having read through the index only: no request) */
		struct pollfd p = {.fd = sock, .events = POLLIN};

		while (!atomic_load(&f->stop) && poll(&p, 1, 10) == 0)
			;
		n = coffer__recv_fds(sock, buf, sizeof(buf), fds, &nfds, 4, MSG_DONTWAIT);
		if (n != 0)
			f->errors++;
		munmap(base, hello.arena_bytes);
		close(bell);
		close(sock);
		return NULL;
	}

	n = coffer__recv_fds(sock, buf, sizeof(buf), fds, &nfds, 4, 0);
	if (n == 0 && f->shrink != SHR_NONE) {
		/* the client refused the file we would have shrunk, and hung up */
		munmap(base, hello.arena_bytes);
		close(bell);
		close(sock);
		return NULL;
	}
	if (n <= 0 || coffer__msg_check(buf, (size_t)n, &h) < 0 ||
	    h.type != COFFER_MSG_CHANNEL_OPEN || nfds != 1)
		goto fail;
	for (int k = 0; k < 3 && atomic_load(&f->chan_err[k]); k++) {
		struct coffer_msg_error e = {.status = atomic_load(&f->chan_err[k])};

		close(fds[0]);
		snprintf(e.message, sizeof(e.message), "CHANNEL_OPEN refused");
		if (fake_send(sock, COFFER_MSG_ERROR, &e, sizeof(e), NULL, 0) < 0)
			goto fail;
		n = fake_recv(f, sock, buf, sizeof(buf), fds, &nfds);
		if (n <= 0 || coffer__msg_check(buf, (size_t)n, &h) < 0 ||
		    h.type != COFFER_MSG_CHANNEL_OPEN || nfds != 1)
			goto fail;
	}
	seg = fake_memfd(f, "fake-chan", (off_t)shm_bytes, SHR_CHAN);
	if (seg < 0)
		goto fail;
	sm = mmap(NULL, shm_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, seg, 0);
	if (sm == MAP_FAILED)
		goto fail;
	if (f->read_only == RO_CHAN && (seg = reopen_read_only(seg)) < 0)
		goto fail;
	if (f->bad_chan_id)
		cor.channel_id = 1000; /* max_channels is 4; the page has 512 bits */
	if (f->full_bell == FB_AT_CHANNEL_OPEN && fake_fill_bell(bell) < 0)
		goto fail;
	if (atomic_load(&f->wake_blocking)) { /* the file description is shared: we can */
		int fl = fcntl(fds[0], F_GETFL);

		if (fl < 0 || fcntl(fds[0], F_SETFL, fl & ~O_NONBLOCK) < 0)
			goto fail;
	}
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
	munmap(base, hello.arena_bytes);
	close(seg);
	close(bell);
	close(sock);
	return NULL;
fail:
	f->errors++;
	close(sock);
	return NULL;
}

static int setup_fake_full(void **state, bool short_doorbell, bool bad_chan_id, bool bad_bell,
			   const char *greeting, int index_mode, int shrink, uint64_t huge_arena)
{
	struct fake *f = calloc(1, sizeof(*f));
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	if (!f)
		return -1;
	f->shrink = shrink;
	f->victim = -1;
	f->huge_arena = huge_arena;
	f->index_mode = index_mode;
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

static int setup_fake_index(void **state, bool short_doorbell, bool bad_chan_id, bool bad_bell,
			    const char *greeting, int index_mode)
{
	return setup_fake_full(state, short_doorbell, bad_chan_id, bad_bell, greeting, index_mode,
			       SHR_NONE, 0);
}

static int setup_fake(void **state, bool short_doorbell, bool bad_chan_id, bool bad_bell,
		      const char *greeting)
{
	return setup_fake_index(state, short_doorbell, bad_chan_id, bad_bell, greeting, IX_NONE);
}

static int setup_ix_lies(void **state)
{
	return setup_fake_index(state, false, false, false, NULL, IX_LIES);
}

static int setup_ix_not_pow2(void **state)
{
	return setup_fake_index(state, false, false, false, NULL, IX_NOT_POW2);
}

static int setup_ix_short(void **state)
{
	return setup_fake_index(state, false, false, false, NULL, IX_SHORT);
}

static int setup_ix_pipe(void **state)
{
	return setup_fake_index(state, false, false, false, NULL, IX_PIPE);
}

static int setup_ix_huge(void **state)
{
	return setup_fake_index(state, false, false, false, NULL, IX_HUGE);
}

static int setup_ix_access_unsealed(void **state)
{
	return setup_fake_index(state, false, false, false, NULL, IX_ACCESS_UNSEALED);
}

static int setup_ix_access_short(void **state)
{
	return setup_fake_index(state, false, false, false, NULL, IX_ACCESS_SHORT);
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

/* A plain fake whose misbehaviour is one field of struct fake, at byte offset @field, set to
 * @mode before the fake answers (it waits for our HELLO); atomic: no sync TSan sees. */
static int setup_fake_mode(void **state, size_t field, int mode)
{
	int rc = setup_fake_full(state, false, false, false, NULL, IX_NONE, SHR_NONE, 0);

	if (rc == 0)
		atomic_store((atomic_int *)(void *)((char *)*state + field), mode);
	return rc;
}

static int setup_hello_fds(void **state, int mode)
{
	return setup_fake_mode(state, offsetof(struct fake, hello_fds), mode);
}

static int setup_full_bell(void **state, int mode)
{
	return setup_fake_mode(state, offsetof(struct fake, full_bell), mode);
}

static int setup_full_bell_at_hello(void **state)
{
	return setup_full_bell(state, FB_AT_HELLO);
}

static int setup_full_bell_at_open(void **state)
{
	return setup_full_bell(state, FB_AT_CHANNEL_OPEN);
}

static int setup_wake_blocking(void **state)
{
	return setup_fake_mode(state, offsetof(struct fake, wake_blocking), 1);
}

static int setup_dribble(void **state)
{
	return setup_fake_mode(state, offsetof(struct fake, dribble), 150);
}

static int setup_hello_error_eintr(void **state)
{
	return setup_fake_mode(state, offsetof(struct fake, hello_error), -EINTR);
}

static int setup_hello_error_eacces(void **state)
{
	return setup_fake_mode(state, offsetof(struct fake, hello_error), -EACCES);
}

static int setup_hello_swapped(void **state)
{
	return setup_hello_fds(state, 1);
}

static int setup_hello_3fds(void **state)
{
	return setup_hello_fds(state, 2);
}

static int setup_read_only(void **state, int which)
{
	return setup_fake_mode(state, offsetof(struct fake, read_only), which);
}

static int setup_read_only_arena(void **state)
{
	return setup_read_only(state, RO_ARENA);
}

static int setup_read_only_chan(void **state)
{
	return setup_read_only(state, RO_CHAN);
}

static int setup_shrink_arena(void **state)
{
	return setup_fake_full(state, false, false, false, NULL, IX_LIES, SHR_ARENA, 0);
}

static int setup_shrink_index(void **state)
{
	return setup_fake_full(state, false, false, false, NULL, IX_LIES, SHR_INDEX, 0);
}

static int setup_shrink_doorbell(void **state)
{
	return setup_fake_full(state, false, false, false, NULL, IX_NONE, SHR_DOORBELL, 0);
}

static int setup_shrink_chan(void **state)
{
	return setup_fake_full(state, false, false, false, NULL, IX_NONE, SHR_CHAN, 0);
}

/* The system's default hugepage size in bytes, 0 when it has none. */
static uint64_t hugepage_bytes(void)
{
	char line[128];
	unsigned long long kb = 0;
	FILE *m = fopen("/proc/meminfo", "re");

	if (!m)
		return 0;
	while (fgets(line, sizeof(line), m))
		if (sscanf(line, "Hugepagesize: %llu kB", &kb) == 1)
			break;
	fclose(m);
	return (uint64_t)kb * 1024;
}

/* A fake whose arena is an unsealed hugetlb file of one hugepage (as `coffer-store -d`'s
 * hugetlbfs file), with an honest index; none when the machine has no free hugepage. */
static int setup_huge_arena(void **state)
{
	uint64_t hp = hugepage_bytes();
	int fd = hp ? memfd_create("probe", MFD_CLOEXEC | MFD_HUGETLB) : -1;
	void *p = MAP_FAILED;

	if (fd >= 0 && ftruncate(fd, (off_t)hp) == 0)
		p = mmap(NULL, hp, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (fd >= 0)
		close(fd);
	if (p == MAP_FAILED) {
		*state = NULL;
		return 0; /* the test skips */
	}
	munmap(p, hp);
	return setup_fake_full(state, false, false, false, NULL, IX_LIES, SHR_NONE, hp);
}

static int teardown(void **state)
{
	struct fake *f = *state;

	if (f == NULL)
		return 0; /* skipped before a fake started */
	atomic_store(&f->stop, 1);
	if (f->victim >= 0)
		close(f->victim);
	/* a test that failed before it connected leaves the fake in accept(): wake it */
	shutdown(f->lsock, SHUT_RDWR);
	if (!f->joined)
		pthread_join(f->tid, NULL);
	if (f->index != NULL)
		munmap(f->index, (size_t)FAKE_IX_SLOTS * sizeof(struct coffer_index_slot));
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

	/* reservations (one bulk event): a block past the arena's end is no pointer */
	{
		void *rv[3] = {&rv, &rv, &rv};
		struct coffer_event rev;

		assert_int_equal(coffer_event_init(&rev, eq, NULL), 0);
		assert_int_equal(coffer_obj_reserve(c, 64, 3, rv, &rev), 0);
		assert_int_equal(poll_one(eq, &rev), 0);
		assert_int_equal(rev.ev_error, -EPROTO);
		for (int i = 0; i < 3; i++)
			assert_null(rv[i]);
		assert_int_equal(coffer_obj_reserve(c, 16, 2, rv, &rev), 0);
		assert_int_equal(poll_one(eq, &rev), 0);
		assert_int_equal(rev.ev_error, 0);
		assert_ptr_equal(rv[0], rv[1]);
		memset(rv[0], 0x5a, 16); /* inside the arena */
		assert_int_equal(coffer_event_fini(&rev), 0);
	}

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

/* Tells the fake to stop and waits for its thread (teardown then does not join it again). */
static void fake_join(struct fake *f)
{
	atomic_store(&f->stop, 1);
	pthread_join(f->tid, NULL);
	f->joined = true;
}

/* Ends a test that used one EQ on connection @c: both go, the fake stops, and it saw exactly
 * one CHANNEL_CLOSE and no protocol error. */
static void end_after_one_chan_close(struct fake *f, coffer_handle_t c, coffer_handle_t eq)
{
	assert_int_equal(coffer_eq_destroy(eq, 0), 0);
	assert_int_equal(coffer_disconnect(c), 0);
	fake_join(f);
	assert_int_equal(f->chan_closes, 1);
	assert_int_equal(f->errors, 0);
}

/* coffer_connect() to @f must fail with -EPROTO, and the fake see our EOF with no error. */
static void expect_connect_refused(struct fake *f)
{
	coffer_handle_t c;

	assert_int_equal(coffer_connect(f->path, &c), -EPROTO);
	fake_join(f); /* it saw our EOF */
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
	fake_join(f); /* it saw our EOF */
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

static double thread_cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * One EQ, two stores, one of which corrupts its reply ring (its connection dies): the EQ's
 * pollers still sleep while they wait for the other store. The dead channel stays on the EQ
 * until its connection is disconnected, and its ring still shows replies past the client's
 * consumer index (1000 of them, unreadable: the ring check refuses them), so every arm()
 * before a sleep said "replies are waiting" and the poller never slept: a get waiting on the
 * live store, or any wait of a thread whose hidden EQ of blocking calls had a channel to the
 * broken store, burned a core for its whole timeout (about 1 s of CPU here for 1 s of
 * waiting). Now a failed channel, which has delivered all it could, counts for nothing there.
 */
static void test_corrupt_ring_spares_other_store(void **state)
{
	struct fake *a = *state;
	void *bstate = NULL;
	struct coffer_oid corrupt = {{5}}, never = {{6}};
	struct coffer_event ev_a, ev_b, *done;
	coffer_handle_t ca, cb, eq;
	const void *d = NULL, *rd = NULL;
	double cpu;

	assert_int_equal(setup_fake(&bstate, false, false, false, "other-fake"), 0);
	assert_int_equal(coffer_connect(a->path, &ca), 0);
	assert_int_equal(coffer_connect(((struct fake *)bstate)->path, &cb), 0);
	assert_int_equal(coffer_eq_create(&eq), 0);
	assert_int_equal(get_greeting(ca, eq, &d), 0);
	assert_int_equal(get_greeting(cb, eq, &d), 0);
	assert_int_equal(coffer_event_init(&ev_a, eq, NULL), 0);
	assert_int_equal(coffer_event_init(&ev_b, eq, NULL), 0);

	/* a get on b that b never answers; a's ring goes corrupt: a's connection dies */
	assert_int_equal(coffer_obj_get_oid(cb, &never, -1, &rd, NULL, &ev_b), 0);
	assert_int_equal(coffer_flush(cb), 0);
	assert_int_equal(coffer_obj_get_oid(ca, &corrupt, 0, &rd, NULL, &ev_a), 0);
	assert_int_equal(poll_one(eq, &ev_a), 0);
	assert_int_equal(ev_a.ev_error, -ENOTCONN);

	/* waiting a second for b sleeps, it does not spin */
	cpu = thread_cpu_s();
	assert_int_equal(coffer_eq_poll(eq, 1, 1000000, 1, &done), 0);
	cpu = thread_cpu_s() - cpu;
	if (cpu >= 0.25)
		print_error("a 1 s wait on the live store took %.3f s of CPU\n", cpu);
	assert_true(cpu < 0.25);

	/* b still serves; its disconnect completes the get it never answered */
	assert_int_equal(get_greeting(cb, eq, &d), 0);
	assert_memory_equal(d, "other-fake", 10);
	assert_int_equal(coffer_disconnect(cb), 0);
	assert_int_equal(poll_one(eq, &ev_b), 0);
	assert_int_equal(ev_b.ev_error, -ENOTCONN);
	assert_int_equal(coffer_event_fini(&ev_a), 0);
	assert_int_equal(coffer_event_fini(&ev_b), 0);
	assert_int_equal(coffer_eq_destroy(eq, 0), 0);
	assert_int_equal(coffer_disconnect(ca), 0);
	assert_int_equal(((struct fake *)bstate)->errors, 0);
	assert_int_equal(a->errors, 0);
	teardown(&bstate);
}

/* What the hang guard prints before it ends the test process (set by hang_guard()). */
static const char *hang_msg;

static void hung(int sig)
{
	(void)sig;
	(void)!write(2, hang_msg, strlen(hang_msg));
	_exit(1);
}

/* A test whose failure is a hang: after 20 s, print @msg and exit 1 (cancel with alarm(0)). */
static void hang_guard(const char *msg)
{
	struct sigaction sa = {.sa_handler = hung};

	hang_msg = msg;
	assert_int_equal(sigaction(SIGALRM, &sa, NULL), 0);
	alarm(20);
}

/*
 * A store whose request doorbell blocks a write (an eventfd without O_NONBLOCK, its counter
 * full: anyone holding it can do that) must not hold a client thread that rings it. A full
 * counter means a wake-up is already pending, so the client need not write; the request is
 * answered (the fake polls its ring). Both when the doorbell comes like that in
 * HELLO_REPLY and when the store clears O_NONBLOCK on the shared file description after
 * the client connected. The client used to block in write(2) for good: the alarm is the
 * hang guard (the answer itself takes milliseconds).
 */
static void test_full_bell(void **state)
{
	struct fake *f = *state;
	coffer_handle_t c, eq;
	const void *data = NULL;

	hang_guard("test_full_bell: the client is still stuck after 20 s (its write to the "
		   "store's request doorbell blocks)\n");
	assert_int_equal(coffer_connect(f->path, &c), 0);
	assert_int_equal(coffer_eq_create(&eq), 0);
	assert_int_equal(get_greeting(c, eq, &data), 0);
	assert_int_equal(get_greeting(c, eq, &data), 0); /* rings again: still full */
	assert_memory_equal(data, "hello-fake", 10);
	alarm(0);
	assert_int_equal(coffer_eq_destroy(eq, 0), 0);
	assert_int_equal(coffer_disconnect(c), 0);
	fake_join(f);
	assert_int_equal(f->errors, 0);
}

/*
 * The EQ's eventfd goes to the store in CHANNEL_OPEN (the store rings it when replies wait),
 * and O_NONBLOCK belongs to the open file description both share: a store can clear it.
 * A poll that slept on the EQ and woke without a ring (its timeout; a store that read the
 * counter itself) then drains the fd with a read(2) that finds it empty, and blocks until
 * the store writes - for ever, if it never does. The poll must still come back when its
 * time is up, and a reply still wakes a poller that sleeps on that fd. The alarm is the hang
 * guard (the poll's own timeout is 20 ms).
 */
static void test_wake_fd_made_blocking(void **state)
{
	struct fake *f = *state;
	struct coffer_oid never = {{6}};
	struct coffer_event ev, *done = NULL;
	coffer_handle_t c, eq;
	const void *data = NULL;

	hang_guard("test_wake_fd_made_blocking: the client is still stuck after 20 s (its read "
		   "of the EQ's eventfd blocks)\n");
	assert_int_equal(coffer_connect(f->path, &c), 0);
	assert_int_equal(coffer_eq_create(&eq), 0);
	assert_int_equal(get_greeting(c, eq, &data), 0); /* opens the channel: now blocking */
	assert_memory_equal(data, "hello-fake", 10);
	assert_int_equal(coffer_event_init(&ev, eq, NULL), 0);
	assert_int_equal(coffer_obj_get_oid(c, &never, 0, &data, NULL, &ev), 0);
	for (int i = 0; i < 3; i++) /* nothing comes: each poll times out */
		assert_int_equal(coffer_eq_poll(eq, 1, 20000, 1, &done), 0);
	assert_int_equal(get_greeting(c, eq, &data), 0); /* a ring still wakes us */
	alarm(0);
	assert_int_equal(coffer_disconnect(c), 0);
	assert_int_equal(coffer_eq_poll(eq, 1, 5000000, 1, &done), 1);
	assert_ptr_equal(done, &ev);
	assert_int_equal(ev.ev_error, -ENOTCONN);
	assert_int_equal(coffer_event_fini(&ev), 0);
	assert_int_equal(coffer_eq_destroy(eq, 0), 0);
	fake_join(f);
	assert_int_equal(f->errors, 0);
}

/*
 * One deadline per control exchange: a store that answers a QUERY only after 15 messages the
 * client did not ask for, one every 150 ms, with COFFER_STORE_TIMEOUT_MS at 300, has not
 * answered within the timeout: -ETIMEDOUT, and the connection is given up on. Each skipped
 * message used to start the timeout afresh, so the call took the answer 2.4 s (eight
 * timeouts) later, and a store dribbling them just inside the timeout could hold one call
 * for 16 of them.
 */
static void test_ctl_unsolicited_one_deadline(void **state)
{
	struct fake *f = *state;
	struct coffer_store_info info;
	coffer_handle_t c, eq;
	const void *data = NULL;

	assert_int_equal(setenv("COFFER_STORE_TIMEOUT_MS", "300", 1), 0);
	assert_int_equal(coffer_connect(f->path, &c), 0);
	assert_int_equal(unsetenv("COFFER_STORE_TIMEOUT_MS"), 0);
	assert_int_equal(coffer_eq_create(&eq), 0);
	assert_int_equal(get_greeting(c, eq, &data), 0); /* the fake serves QUERY from here */
	assert_int_equal(coffer_store_query(c, &info), -ETIMEDOUT);
	assert_int_equal(coffer_store_query(c, &info), -ENOTCONN); /* given up on */
	/* giving the store up hung up the socket (conn_abandon()): the fake's dribble ends
	 * on a failed send, not after its 15 messages (2.4 s) */
	for (int i = 0; i < 1000 && !atomic_load(&f->dribbled); i++)
		usleep(10 * 1000);
	assert_true(atomic_load(&f->dribbled));
	assert_true(atomic_load(&f->hung_up));
	assert_int_equal(coffer_eq_destroy(eq, 0), 0);
	assert_int_equal(coffer_disconnect(c), 0);
	fake_join(f);
	assert_int_equal(f->errors, 0);
}

/* A store rewriting ID 4's slot as fast as it can (same fields: every version is honest). */
static void *ix_churn(void *arg)
{
	struct fake *f = arg;
	struct coffer_index_slot *x = &f->index[ix_home(4)];

	while (!atomic_load(&f->churn_stop)) {
		uint32_t q = __atomic_load_n(&x->seq, __ATOMIC_RELAXED);

		__atomic_store_n(&x->seq, q + 1, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_RELEASE);
		__atomic_store_n(&x->seq, q + 2, __ATOMIC_RELEASE);
	}
	return NULL;
}

/* A fake's lies in its object index: every read answers at once, from inside the arena. */
static void test_index_lies(void **state)
{
	struct fake *f = *state;
	static const int64_t want[9] = {0, -EPROTO, -EPROTO, -EPROTO, 10, -EAGAIN, -EAGAIN, 10, 10};
	struct coffer_read_vec rv[2 * 8];
	uint8_t buf[64], vb[2 * 8][64];
	coffer_handle_t c;
	uint64_t sz;

	/* the lies do not overlap: each ID's slots [home, home + span) are its own */
	{
		uint8_t owner[FAKE_IX_SLOTS] = {0};
		const uint32_t span[9] = {0, 1, 1, 1, 1, COFFER_INDEX_PROBE, COFFER_INDEX_PROBE + 1,
					  2, 0};

		assert_int_not_equal(ix_wrap_b2(), 0);
		for (uint8_t i = 1; i <= 8; i++) {
			uint32_t h = i == 8 ? ix_home2(8, ix_wrap_b2()) : ix_home(i);
			uint32_t n = i == 8 ? FAKE_IX_SLOTS - h + 3 : span[i];

			for (uint32_t k = 0; k < n; k++) {
				assert_int_equal(owner[(h + k) & (FAKE_IX_SLOTS - 1)], 0);
				owner[(h + k) & (FAKE_IX_SLOTS - 1)] = i;
			}
		}
	}
	assert_int_equal(coffer_connect(f->path, &c), 0);
	for (int i = 1; i <= 8; i++) {
		struct coffer_oid oid = {{(uint8_t)i, i == 8 ? ix_wrap_b2() : 0}};
		int64_t n;

		memset(buf, 0, sizeof(buf));
		sz = 12345;
		n = coffer_obj_read_oid(c, &oid, 0, buf, sizeof(buf), &sz);
		if (n != want[i])
			print_error("ID %d: %lld, want %lld\n", i, (long long)n,
				    (long long)want[i]);
		assert_int_equal(n, want[i]);
		if (n == 10) {
			assert_int_equal(sz, 10);
			assert_memory_equal(buf, "hello-fake", 10);
		} else {
			assert_int_equal(sz, 12345);
		}
		rv[2 * (i - 1)] = (struct coffer_read_vec){
		    .oid = oid, .offset = 0, .buf = vb[2 * (i - 1)], .len = sizeof(vb[0])};
		rv[2 * (i - 1) + 1] = (struct coffer_read_vec){
		    .oid = oid, .offset = 3, .buf = vb[2 * (i - 1) + 1], .len = sizeof(vb[0])};
	}
	assert_int_equal(coffer_obj_read_oid_vec(c, rv, 2 * 8), 2 * 3);
	for (int i = 1; i <= 8; i++) {
		int64_t w = want[i];

		assert_int_equal(rv[2 * (i - 1)].result, w);
		assert_int_equal(rv[2 * (i - 1) + 1].result, w == 10 ? 7 : w);
		if (w == 10) {
			assert_memory_equal(vb[2 * (i - 1)], "hello-fake", 10);
			assert_memory_equal(vb[2 * (i - 1) + 1], "lo-fake", 7);
		}
	}
	/* ID 4's slot rewritten forever by a "store" that never finishes a write in time:
	 * the read gives up (-EAGAIN) instead of spinning, or reads the one version */
	{
		struct coffer_oid oid = {{4}};
		struct coffer_index_slot *x = &f->index[ix_home(4)];
		int64_t n;

		pthread_t churn;
		uint64_t hits = 0, misses = 0;

		x->seq = 5; /* odd forever */
		assert_int_equal(coffer_obj_read_oid(c, &oid, 0, buf, sizeof(buf), NULL), -EAGAIN);
		x->seq = 6;
		n = coffer_obj_read_oid(c, &oid, 0, buf, sizeof(buf), NULL);
		assert_int_equal(n, 10);
		/* and rewritten (seq bumped, fields the same) without pause */
		assert_int_equal(pthread_create(&churn, NULL, ix_churn, f), 0);
		for (int k = 0; k < 20000; k++) {
			memset(buf, 0, sizeof(buf));
			n = coffer_obj_read_oid(c, &oid, 0, buf, sizeof(buf), NULL);
			if (n == -EAGAIN) {
				misses++;
				continue;
			}
			assert_int_equal(n, 10);
			assert_memory_equal(buf, "hello-fake", 10);
			hits++;
		}
		atomic_store(&f->churn_stop, 1);
		assert_int_equal(pthread_join(churn, NULL), 0);
		printf("index slot rewritten without pause: %llu reads whole, %llu -EAGAIN\n",
		       (unsigned long long)hits, (unsigned long long)misses);
	}
	assert_int_equal(coffer_disconnect(c), 0);
	fake_join(f); /* it saw our EOF, and no request */
	assert_int_equal(f->errors, 0);
}

/* An index that does not match what HELLO_REPLY says of it: connect refuses the store. */
static void test_index_mismatch(void **state)
{
	expect_connect_refused(*state);
}

/*
 * A QUERY_REPLY that carries an fd (it must carry none) gets -EPROTO - also when this
 * process is at its fd limit, so the kernel cannot even install the fd (MSG_CTRUNC). That
 * case used to answer -EMFILE, which coffer_store_query() does not document (the
 * -EMFILE path is for replies that must carry fds: HELLO_REPLY, CHANNEL_OPEN_REPLY).
 */
static void test_query_reply_with_fd(void **state)
{
	struct fake *f = *state;
	struct coffer_store_info info;
	coffer_handle_t c, eq;
	struct rlimit old, lim;
	const void *d = NULL;
	int qfd = memfd_create("fake-query", MFD_CLOEXEC), free_fd = 0, rc;

	assert_true(qfd > 0);
	assert_int_equal(coffer_connect(f->path, &c), 0);
	assert_int_equal(coffer_eq_create(&eq), 0);
	assert_int_equal(get_greeting(c, eq, &d), 0); /* the fake now serves the socket too */
	assert_int_equal(coffer_store_query(c, &info), 0);
	assert_int_equal(info.capacity_bytes, FAKE_ARENA);
	atomic_store(&f->query_fd, qfd);
	assert_int_equal(coffer_store_query(c, &info), -EPROTO);
	/* at the limit: the lowest free fd number is the first one refused */
	while (fcntl(free_fd, F_GETFD) >= 0)
		free_fd++;
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	lim = old;
	lim.rlim_cur = (rlim_t)free_fd;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &lim), 0);
	rc = coffer_store_query(c, &info);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
	assert_int_equal(rc, -EPROTO);
	atomic_store(&f->query_fd, 0);
	assert_int_equal(coffer_store_query(c, &info), 0);
	close(qfd);
	assert_int_equal(coffer_eq_destroy(eq, 0), 0);
	assert_int_equal(coffer_disconnect(c), 0);
	pthread_join(f->tid, NULL);
	f->joined = true;
	assert_int_equal(f->errors, 0);
}

/*
 * A store that stops reading its socket (wedged, or stopped with our messages unread): the
 * request finds no room in the socket for COFFER_STORE_TIMEOUT_MS, and the call says
 * -ETIMEDOUT, as one whose answer does not come does - not -ENOTCONN, which says the store
 * is gone - and gives the connection up (store.h). The fake answers every query before it
 * is asked, so only the send can time out.
 */
static void ctl_send_timeout(struct fake *f, bool signals)
{
	struct sigaction sa = {.sa_handler = sig_tick_handler}, old;
	struct sig_tick tick = {.target = pthread_self()};
	struct coffer_store_info info;
	coffer_handle_t c, eq;
	const void *d = NULL;
	pthread_t th;
	int rc, answered = 0;

	assert_int_equal(setenv("COFFER_STORE_TIMEOUT_MS", "1000", 1), 0);
	rc = coffer_connect(f->path, &c);
	assert_int_equal(unsetenv("COFFER_STORE_TIMEOUT_MS"), 0);
	assert_int_equal(rc, 0);
	assert_int_equal(coffer_eq_create(&eq), 0);
	assert_int_equal(get_greeting(c, eq, &d), 0); /* the fake now serves the socket too */
	atomic_store(&f->deaf, 1);
	if (signals) {
		assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
		assert_int_equal(pthread_create(&th, NULL, sig_tick_main, &tick), 0);
	}
	/* bounded: a socket holds a few hundred small messages (net.core.wmem_default) */
	while ((rc = coffer_store_query(c, &info)) == 0 && answered < 1000000)
		answered++;
	if (signals) {
		atomic_store(&tick.done, 1);
		assert_int_equal(pthread_join(th, NULL), 0);
		assert_int_equal(sigaction(SIGUSR1, &old, NULL), 0);
		/* the send timed out while the signals still came (it used to start its
		 * timeout afresh at each one, waiting as long as they came) */
		assert_false(tick.ran_out);
		assert_true(tick.sent > 0);
	}
	assert_int_equal(rc, -ETIMEDOUT);
	assert_true(answered > 0);
	assert_int_equal(coffer_store_query(c, &info), -ENOTCONN); /* given up on */
	assert_int_equal(coffer_eq_destroy(eq, 0), 0);
	assert_int_equal(coffer_disconnect(c), 0);
	pthread_join(f->tid, NULL);
	f->joined = true;
	assert_int_equal(f->errors, 0);
}

static void test_ctl_send_timeout(void **state)
{
	ctl_send_timeout(*state, false);
}

/* The same under a signal every 10 ms (SO_SNDTIMEO: every one fails the send with EINTR,
 * SA_RESTART or not; test_client's test_ctl_timeout_under_signals has the receive and the
 * connect). */
static void test_ctl_send_timeout_under_signals(void **state)
{
	ctl_send_timeout(*state, true);
}

/*
 * A store's status for a request is one docs/protocol.md gives that op (store.h lists the
 * same for each call), or the store broke the protocol: -EPROTO, as for a positive status.
 * A status outside those lists used to reach the caller as it came, so a store could make a
 * seal say -EINTR (which a caller's retry loop takes for "call again"), a create -ENOTCONN
 * on a live connection, a blocking get the -EAGAIN store.h gives only for a launch with an
 * event, or a bulk get's entry -ENOSPC - codes no header lists for those calls.
 */
static int status_of(coffer_handle_t c, coffer_handle_t eq, uint16_t op, int err)
{
	struct coffer_oid oid = {{8, (uint8_t)err}};
	struct coffer_event ev;
	const void *rd = NULL;
	void *wr = NULL;
	bool present;
	int rc;

	assert_int_equal(coffer_event_init(&ev, eq, NULL), 0);
	switch (op) {
	case COFFER_OP_CREATE:
		rc = coffer_obj_create_oid(c, &oid, 64, 0, &wr, &ev);
		break;
	case COFFER_OP_SEAL:
		rc = coffer_obj_seal_oid(c, &oid, 0, &ev);
		break;
	case COFFER_OP_GET:
		rc = coffer_obj_get_oid(c, &oid, 0, &rd, NULL, &ev);
		break;
	case COFFER_OP_RELEASE:
		rc = coffer_obj_release_oid(c, &oid, &ev);
		break;
	case COFFER_OP_DELETE:
		rc = coffer_obj_delete(c, &oid, &ev);
		break;
	default:
		rc = coffer_obj_contains(c, &oid, &present, &ev);
		break;
	}
	if (rc == 0)
		rc = poll_one(eq, &ev);
	if (rc == 0)
		rc = ev.ev_error;
	assert_int_equal(coffer_event_fini(&ev), 0);
	assert_null(wr);
	assert_null(rd);
	return rc;
}

static void test_status_outside_protocol(void **state)
{
	struct fake *f = *state;
	struct coffer_oid oids[2] = {{{8, EPERM}}, {{8, ENOSPC}}};
	struct coffer_obj_buf bufs[2];
	struct coffer_event ev;
	coffer_handle_t c, eq;

	assert_int_equal(coffer_connect(f->path, &c), 0);
	assert_int_equal(coffer_eq_create(&eq), 0);
	/* statuses the protocol gives these ops pass unchanged */
	assert_int_equal(status_of(c, eq, COFFER_OP_SEAL, EPERM), -EPERM);
	assert_int_equal(status_of(c, eq, COFFER_OP_SEAL, EALREADY), -EALREADY);
	assert_int_equal(status_of(c, eq, COFFER_OP_CREATE, EEXIST), -EEXIST);
	assert_int_equal(status_of(c, eq, COFFER_OP_DELETE, EBUSY), -EBUSY);
	assert_int_equal(status_of(c, eq, COFFER_OP_GET, ENOENT), -ENOENT);
	assert_int_equal(status_of(c, eq, COFFER_OP_RELEASE, EINVAL), -EINVAL);
	/* any other is the store's protocol error */
	assert_int_equal(status_of(c, eq, COFFER_OP_SEAL, EINTR), -EPROTO);
	assert_int_equal(status_of(c, eq, COFFER_OP_CREATE, ENOTCONN), -EPROTO);
	assert_int_equal(status_of(c, eq, COFFER_OP_GET, EAGAIN), -EPROTO);
	assert_int_equal(status_of(c, eq, COFFER_OP_RELEASE, EEXIST), -EPROTO);
	assert_int_equal(status_of(c, eq, COFFER_OP_DELETE, EPERM), -EPROTO);
	assert_int_equal(status_of(c, eq, COFFER_OP_CONTAINS, ENOENT), -EPROTO);
	/* a bulk get's entries alike */
	assert_int_equal(coffer_event_init(&ev, eq, NULL), 0);
	assert_int_equal(coffer_obj_get_bulk(c, oids, 2, 0, bufs, &ev), 0);
	assert_int_equal(poll_one(eq, &ev), 0);
	assert_int_equal(ev.ev_error, 0);
	assert_int_equal(bufs[0].status, -EPROTO); /* a GET is never refused with -EPERM */
	assert_int_equal(bufs[1].status, -EPROTO);
	assert_int_equal(coffer_event_fini(&ev), 0);
	/* the connection lives on: an honest answer still works */
	{
		const void *d = NULL;

		assert_int_equal(get_greeting(c, eq, &d), 0);
	}
	assert_int_equal(coffer_eq_destroy(eq, 0), 0);
	assert_int_equal(coffer_disconnect(c), 0);
	fake_join(f);
	assert_int_equal(f->errors, 0);
}

/*
 * An ERROR's status on the socket, as on the rings (test_status_outside_protocol): one the
 * protocol gives the message it answers (docs/protocol.md: -EACCES, -EMFILE, -ENOMEM,
 * -ENOSPC at accept; -EINVAL, -EMFILE, -ENOMEM for a CHANNEL_OPEN; -EPROTO and
 * -EPROTONOSUPPORT for a broken exchange), or the store broke the protocol: -EPROTO. It used
 * to reach the caller as it came: a coffer_connect() refused with -EINTR, an object call
 * whose channel the store refused with -EACCES - neither in those calls' lists.
 */
static void test_hello_error_status(void **state)
{
	struct fake *f = *state;
	coffer_handle_t c;

	assert_int_equal(coffer_connect(f->path, &c),
			 atomic_load(&f->hello_error) == -EACCES ? -EACCES : -EPROTO);
	fake_join(f);
	assert_int_equal(f->errors, 0);
}

static void test_chan_error_status(void **state)
{
	struct fake *f = *state;
	coffer_handle_t c, eq;
	const void *d = NULL;

	atomic_store(&f->chan_err[0], -EINTR);
	atomic_store(&f->chan_err[1], -EACCES);
	atomic_store(&f->chan_err[2], -EMFILE);
	assert_int_equal(coffer_connect(f->path, &c), 0);
	assert_int_equal(coffer_eq_create(&eq), 0);
	assert_int_equal(get_greeting(c, eq, &d), -EPROTO);
	assert_int_equal(get_greeting(c, eq, &d), -EPROTO);
	assert_int_equal(get_greeting(c, eq, &d), -EMFILE);
	assert_int_equal(get_greeting(c, eq, &d), 0); /* the fourth open is served */
	assert_int_equal(coffer_eq_destroy(eq, 0), 0);
	assert_int_equal(coffer_disconnect(c), 0);
	fake_join(f);
	assert_int_equal(f->errors, 0);
}

/* Open fds of this process. */
static int count_fds(void)
{
	int n = 0;

	for (int fd = 0; fd < 4096; fd++)
		n += fcntl(fd, F_GETFD) >= 0;
	return n;
}

/* HELLO_REPLY's fds in the wrong order (an eventfd where the arena goes) or one too few:
 * refused with -EPROTO, and none of them kept. */
static void test_hello_fds_refused(void **state)
{
	int before = count_fds();

	expect_connect_refused(*state);
	assert_int_equal(count_fds(), before);
}

/*
 * A store that dies in the middle of a batch of reservations: it answered the first of
 * three. The event completes with -ENOTCONN (the store, and every reservation with it, is
 * gone); a pointer the reply gave stays writable until the disconnect (the arena stays
 * mapped), and every later call says -ENOTCONN.
 */
static void test_dies_mid_reserve(void **state)
{
	struct fake *f = *state;
	coffer_handle_t c, eq;
	struct coffer_event ev;
	void *rv[3] = {&rv, &rv, &rv};
	int nonnull = 0;

	assert_int_equal(coffer_connect(f->path, &c), 0);
	assert_int_equal(coffer_eq_create(&eq), 0);
	assert_int_equal(coffer_event_init(&ev, eq, NULL), 0);
	assert_int_equal(coffer_obj_reserve(c, 48, 3, rv, &ev), 0);
	assert_int_equal(poll_one(eq, &ev), 0);
	assert_int_equal(ev.ev_error, -ENOTCONN);
	for (int i = 0; i < 3; i++) {
		print_message("block %d: %p\n", i, rv[i]);
		if (rv[i] != NULL) {
			memset(rv[i], 0x5a, 48);
			nonnull++;
		}
	}
	assert_true(nonnull <= 1);
	assert_int_equal(
	    coffer_obj_put(c, &(struct coffer_oid){{9}}, rv[0] ? rv[0] : rv, 48, 0, NULL),
	    rv[0] ? -ENOTCONN : -EINVAL);
	assert_int_equal(coffer_obj_reserve(c, 16, 1, rv, NULL), -ENOTCONN);
	assert_int_equal(coffer_event_fini(&ev), 0);
	assert_int_equal(coffer_eq_destroy(eq, 0), 0);
	assert_int_equal(coffer_disconnect(c), 0);
	pthread_join(f->tid, NULL);
	f->joined = true;
	assert_int_equal(f->errors, 0);
}

/*
 * What the client touches of the file the fake shrank: a read through the index touches
 * the index and the arena, a request the doorbell page and the rings.
 */
static void touch_after_shrink(struct fake *f, coffer_handle_t c)
{
	struct coffer_oid oid = {{4}};
	const void *d = NULL;
	coffer_handle_t eq;
	uint8_t buf[16];

	if (f->shrink == SHR_ARENA || f->shrink == SHR_INDEX) {
		print_message("read %lld\n",
			      (long long)coffer_obj_read_oid(c, &oid, 0, buf, sizeof(buf), NULL));
		return;
	}
	assert_int_equal(coffer_eq_create(&eq), 0);
	print_message("get %d\n", get_greeting(c, eq, &d));
	assert_int_equal(coffer_eq_destroy(eq, 0), 0);
}

/*
 * A store that passes an arena, object index or doorbell page without F_SEAL_SHRINK can
 * truncate it after the client mapped it, and the client's next touch of the mapping dies
 * of SIGBUS. connect must refuse such a file (-EPROTO). Without that check connect
 * succeeds, the fake shrinks the file, and the client's next read or request faults.
 */
static void test_shrinkable_refused(void **state)
{
	struct fake *f = *state;
	coffer_handle_t c;
	int rc = coffer_connect(f->path, &c);

	if (rc == 0) {
		print_message("connect accepted a file its store can shrink: shrinking it\n");
		assert_int_equal(ftruncate(atomic_load(&f->victim), 0), 0);
		touch_after_shrink(f, c); /* SIGBUS */
		assert_int_equal(coffer_disconnect(c), 0);
	}
	assert_int_equal(rc, -EPROTO);
	fake_join(f); /* it saw our EOF */
	assert_int_equal(f->errors, 0);
}

/* The same for a channel's rings: the first request fails with -EPROTO and the channel is
 * closed again at the store; the connection stays usable for index reads. */
static void test_shrinkable_rings_refused(void **state)
{
	struct fake *f = *state;
	coffer_handle_t c, eq;
	const void *d = NULL;
	int rc;

	assert_int_equal(coffer_connect(f->path, &c), 0);
	assert_int_equal(coffer_eq_create(&eq), 0);
	rc = get_greeting(c, eq, &d);
	if (rc == 0) {
		print_message("the channel's rings can shrink under the client: shrinking them\n");
		atomic_store(&f->hold, 1);
		while (!atomic_load(&f->held))
			usleep(100);
		assert_int_equal(ftruncate(atomic_load(&f->victim), 0), 0);
		print_message("get %d\n", get_greeting(c, eq, &d)); /* SIGBUS */
	}
	assert_int_equal(rc, -EPROTO);
	end_after_one_chan_close(f, c, eq);
}

/*
 * A store that passes its arena through a read-only descriptor: the client's shared writable
 * mapping fails with EACCES, which coffer_connect() passed through as -EACCES, the code
 * coffer/store.h and coffer_strerror() reserve for "refused: not the store's user or group".
 * It is a store that broke the protocol: -EPROTO, with none of the passed fds kept.
 */
static void test_read_only_arena_refused(void **state)
{
	int before = count_fds();

	expect_connect_refused(*state);
	assert_int_equal(count_fds(), before);
}

/* The same for a channel's rings: the first request fails with -EPROTO (was -EACCES), the
 * store's channel is closed again, and the connection stays usable. */
static void test_read_only_rings_refused(void **state)
{
	struct fake *f = *state;
	coffer_handle_t c, eq;
	const void *d = NULL;

	assert_int_equal(coffer_connect(f->path, &c), 0);
	assert_int_equal(coffer_eq_create(&eq), 0);
	assert_int_equal(get_greeting(c, eq, &d), -EPROTO);
	end_after_one_chan_close(f, c, eq);
}

/*
 * A store may cap its rings as low as 8 entries (HELLO_REPLY max_ring_entries; the fake's
 * are 8). A bulk call queues all of its @n requests or none, so one of more requests than
 * the ring holds can never be queued: it returned -EAGAIN ("poll the EQ, then retry")
 * every time, a retry loop that never ends. It is an argument out of range for that
 * connection: -EINVAL, nothing sent (the fake would count a request it did not expect).
 */
static void test_bulk_above_ring(void **state)
{
	struct fake *f = *state;
	struct coffer_oid oids[FAKE_ENTRIES + 1];
	const void *ptrs[FAKE_ENTRIES + 1];
	struct coffer_obj_buf bufs[FAKE_ENTRIES + 1];
	void *blocks[FAKE_ENTRIES + 1];
	struct coffer_event ev;
	coffer_handle_t c, eq;
	const void *d = NULL;

	memset(oids, 0, sizeof(oids));
	assert_int_equal(coffer_connect(f->path, &c), 0);
	assert_int_equal(coffer_eq_create(&eq), 0);
	assert_int_equal(get_greeting(c, eq, &d), 0); /* the channel is open and works */
	for (unsigned int i = 0; i <= FAKE_ENTRIES; i++)
		ptrs[i] = d;
	assert_int_equal(coffer_event_init(&ev, eq, NULL), 0);
	for (int round = 0; round < 3; round++) { /* not "try again": it never fits */
		assert_int_equal(coffer_obj_get_bulk(c, oids, FAKE_ENTRIES + 1, 0, bufs, &ev),
				 -EINVAL);
		assert_int_equal(coffer_obj_release_oid_bulk(c, oids, FAKE_ENTRIES + 1, &ev),
				 -EINVAL);
		assert_int_equal(coffer_obj_release_data_bulk(c, oids, ptrs, FAKE_ENTRIES + 1, &ev),
				 -EINVAL);
		assert_int_equal(coffer_obj_reserve(c, 64, FAKE_ENTRIES + 1, blocks, &ev), -EINVAL);
	}
	assert_int_equal(coffer_event_fini(&ev), 0);
	assert_int_equal(coffer_eq_destroy(eq, 0), 0);
	assert_int_equal(coffer_disconnect(c), 0);
	fake_join(f);
	assert_int_equal(f->errors, 0);
}

/*
 * The other side of test_bulk_above_ring: a bulk call of exactly the ring's entries (and
 * one less) is legitimate and served (the fake serves one channel: no blocking call); with one
 * request of the channel still waiting (the fake never answers ID 6) a bulk call of all the entries
 * does not fit now, which is -EAGAIN ("poll, then retry"), not -EINVAL, and one of the free slots'
 * number still goes out.
 */
static void test_bulk_at_ring(void **state)
{
	struct fake *f = *state;
	struct coffer_oid oids[FAKE_ENTRIES], never = {{6}};
	struct coffer_obj_buf bufs[FAKE_ENTRIES];
	struct coffer_event ev, stuck;
	coffer_handle_t c, eq;
	const void *d = NULL;
	uint64_t size = 0;

	for (unsigned int i = 0; i < FAKE_ENTRIES; i++)
		oids[i] = (struct coffer_oid){{4}}; /* the fake answers 10 bytes at 4096 */
	assert_int_equal(coffer_connect(f->path, &c), 0);
	assert_int_equal(coffer_eq_create(&eq), 0);
	assert_int_equal(coffer_event_init(&ev, eq, NULL), 0);
	for (unsigned int n = FAKE_ENTRIES - 1; n <= FAKE_ENTRIES; n++) {
		memset(bufs, 0, sizeof(bufs));
		assert_int_equal(coffer_obj_get_bulk(c, oids, n, 0, bufs, &ev), 0);
		assert_int_equal(poll_one(eq, &ev), 0);
		assert_int_equal(ev.ev_error, 0);
		for (unsigned int i = 0; i < n; i++) {
			assert_int_equal(bufs[i].status, 0);
			assert_int_equal(bufs[i].size, 10);
		}
	}
	assert_int_equal(coffer_event_init(&stuck, eq, NULL), 0);
	assert_int_equal(coffer_obj_get_oid(c, &never, 0, &d, &size, &stuck), 0);
	assert_int_equal(coffer_flush(c), 0);
	assert_int_equal(coffer_obj_get_bulk(c, oids, FAKE_ENTRIES, 0, bufs, &ev), -EAGAIN);
	assert_int_equal(coffer_obj_get_bulk(c, oids, FAKE_ENTRIES - 1, 0, bufs, &ev), 0);
	assert_int_equal(poll_one(eq, &ev), 0);
	assert_int_equal(ev.ev_error, 0);
	assert_int_equal(coffer_disconnect(c), 0); /* completes the stuck get */
	assert_int_equal(poll_one(eq, &stuck), 0);
	assert_int_equal(stuck.ev_error, -ENOTCONN);
	assert_int_equal(coffer_event_fini(&stuck), 0);
	assert_int_equal(coffer_event_fini(&ev), 0);
	assert_int_equal(coffer_eq_destroy(eq, 0), 0);
	fake_join(f);
	assert_int_equal(f->errors, 0);
}

/*
 * Paths where no coffer-store can listen are "no store there" (-ECONNREFUSED), however the
 * kernel words it: a socket of another type (connect(2): EPROTOTYPE) and a path through a
 * regular file (ENOTDIR) leaked as -EPROTOTYPE and -ENOTDIR, codes coffer/store.h does not
 * list and coffer_strerror() does not explain.
 */
static void test_connect_not_a_store(void **state)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char dir[] = "/tmp/coffer-notstore.XXXXXX", file[64], through[96];
	coffer_handle_t c;
	int ls, fd;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/stream.sock", dir);
	ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(ls >= 0);
	assert_int_equal(bind(ls, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(ls, 4), 0);
	snprintf(file, sizeof(file), "%s/file", dir);
	fd = open(file, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);
	snprintf(through, sizeof(through), "%s/coffer.sock", file);

	assert_int_equal(coffer_connect(sa.sun_path, &c), -ECONNREFUSED);
	assert_int_equal(coffer_connect(through, &c), -ECONNREFUSED);

	close(ls);
	unlink(sa.sun_path);
	unlink(file);
	rmdir(dir);
}

/*
 * A hugetlbfs file cannot be sealed (coffer-store -d): the client accepts one whose size
 * covers the arena it announces, and reads through it (docs/protocol.md says what a hostile
 * store can still do with such a file).
 */
static void test_huge_arena_accepted(void **state)
{
	struct fake *f = *state;
	struct coffer_oid oid = {{4}};
	coffer_handle_t c;
	uint8_t buf[16] = {0};

	if (f == NULL)
		skip(); /* no free hugepage */
	assert_int_equal(coffer_connect(f->path, &c), 0);
	assert_int_equal(coffer_obj_read_oid(c, &oid, 0, buf, sizeof(buf), NULL), 10);
	assert_memory_equal(buf, "hello-fake", 10);
	assert_int_equal(coffer_disconnect(c), 0);
	fake_join(f);
	assert_int_equal(f->errors, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_lies, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_short_doorbell, setup_short_doorbell, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_channel_id, setup_bad_chan_id, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_bell, setup_bad_bell, teardown),
	    cmocka_unit_test_setup_teardown(test_same_segment_id, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_corrupt_ring_spares_other_store, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_index_lies, setup_ix_lies, teardown),
	    cmocka_unit_test_setup_teardown(test_index_mismatch, setup_ix_not_pow2, teardown),
	    cmocka_unit_test_setup_teardown(test_index_mismatch, setup_ix_short, teardown),
	    cmocka_unit_test_setup_teardown(test_index_mismatch, setup_ix_pipe, teardown),
	    cmocka_unit_test_setup_teardown(test_index_mismatch, setup_ix_huge, teardown),
	    cmocka_unit_test_setup_teardown(test_index_mismatch, setup_ix_access_unsealed,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_index_mismatch, setup_ix_access_short, teardown),
	    cmocka_unit_test_setup_teardown(test_shrinkable_refused, setup_shrink_arena, teardown),
	    cmocka_unit_test_setup_teardown(test_shrinkable_refused, setup_shrink_index, teardown),
	    cmocka_unit_test_setup_teardown(test_shrinkable_refused, setup_shrink_doorbell,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_shrinkable_rings_refused, setup_shrink_chan,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_huge_arena_accepted, setup_huge_arena, teardown),
	    cmocka_unit_test_setup_teardown(test_dies_mid_reserve, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hello_fds_refused, setup_hello_swapped, teardown),
	    cmocka_unit_test_setup_teardown(test_hello_fds_refused, setup_hello_3fds, teardown),
	    cmocka_unit_test_setup_teardown(test_query_reply_with_fd, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ctl_send_timeout, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ctl_send_timeout_under_signals, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_status_outside_protocol, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hello_error_status, setup_hello_error_eintr,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_hello_error_status, setup_hello_error_eacces,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_chan_error_status, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_full_bell, setup_full_bell_at_hello, teardown),
	    cmocka_unit_test_setup_teardown(test_full_bell, setup_full_bell_at_open, teardown),
	    cmocka_unit_test_setup_teardown(test_wake_fd_made_blocking, setup_wake_blocking,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_ctl_unsolicited_one_deadline, setup_dribble,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_read_only_arena_refused, setup_read_only_arena,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_read_only_rings_refused, setup_read_only_chan,
					    teardown),
	    cmocka_unit_test(test_connect_not_a_store),
	    cmocka_unit_test_setup_teardown(test_bulk_above_ring, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bulk_at_ring, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
