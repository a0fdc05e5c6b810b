/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tools/store.c - coffer-store's server: the listening socket, client sessions, channels
 * (shared-memory request/reply rings) and the single-threaded epoll event loop.
 *
 * Design note.
 * - One thread does everything, so the object table needs no locks; the only memory shared
 *   with other processes is the arena (never read by the store) and the channel segments.
 * - Channel rings (layout and handshake in runtime/proto.h): the store is the consumer of
 *   the request ring and the producer of the reply ring. It keeps its own req_cons,
 *   rep_prod, rep_cons and the ring size in private memory; from shared memory it reads only
 *   req.prod (acquire: pairs with the client's release store after writing entries),
 *   rep.cons (acquire: pairs with the client's release store after copying replies out) and
 *   rep.consumer_sleeping (relaxed, after a seq_cst fence: the Dekker handshake in
 *   proto.h). It copies each request entry to private memory before validating it. Indices
 *   that make no sense (prod - cons > entries; reply cons moving backwards or past prod)
 *   close that client only.
 * - Reply space is reserved when a request is taken: a request is taken only while
 *   (rep_prod - rep_cons) + waiting < entries, so a deferred get reply always finds a slot
 *   and the store never queues ring replies in its own memory (back-pressure instead).
 * - Which rings a round looks at: only those whose bit the client set on its connection's
 *   doorbell page since the last round (runtime/proto.h; exchanged with 0, then a fence),
 *   plus those left with work; a connection's every ring when its doorbell eventfd rang
 *   without a bit; every ring every cfg->sweep_us. An idle channel costs a round
 *   nothing (before: a load of every ring's prod per round, so hundreds of idle channels
 *   made every round trip 3-4x slower).
 * - Fairness: each round takes at most `budget` ring requests per client (over all its
 *   channels) and at most 16 socket messages per client; the client order and each client's
 *   channel order rotate.
 * - Spin: after activity the loop polls the rings for spin_us without a syscall per round
 *   (epoll_wait(0) for the sockets only every STORE_EPOLL_EVERY_US). It yields its core only
 *   once it has found no work for STORE_YIELD_IDLE_US (a client may wait for that core),
 *   never while any client keeps it busy (STORE_YIELD_IDLE_US says why). After a large
 *   create it spins on for the copy's expected time (note_create()), so the seal does not
 *   have to wake it.
 * - Sleep: after activity the loop polls for spin_us, then sets store_sleeping = 1 on every
 *   connection's doorbell page, fences (seq_cst), re-reads the doorbell words, and sleeps in
 *   epoll_wait (timeout = next get deadline): a line per connection, not per channel.
 *   Clients ring their connection's request doorbell (an eventfd registered edge-triggered,
 *   so the store never reads it and a client cannot make a read block) only when they see
 *   the flag. Idle store: 0% CPU.
 * - Sessions are killed only at safe points (reap()), never from inside the object table's
 *   callbacks, and every fd is removed from epoll before close (a session's doorbell eventfd
 *   is shared with the client, so close alone would leave it registered).
 * - Nothing a client sends can make the store block, fault or write to a freed session:
 *   sockets are nonblocking and sent with MSG_NOSIGNAL; when a client stops reading, the
 *   one reply that found its socket full waits in the session and the store stops reading
 *   its requests (back-pressure), while its deferred get replies wait in sock_reps; from
 *   the send that found the socket full until EPOLLOUT reports room, nothing is sent to it
 *   (no send that would fail per delivery), and EPOLLOUT is dropped once all went out.
 * - A client that half-closes its socket (shutdown(SHUT_WR)) is read no more but keeps its
 *   session - replies to what it asked, its references, its channels - until it closes.
 * - No socket reply needs memory when it is sent: a store short of memory must keep its
 *   clients (tests/reliability/README.md, 11b), and a reply computed but not kept would
 *   leave the client waiting for good. A message is read only when its reply has room: a
 *   small reply (all but REQUEST's) in the reserve allocated with the session, a REQUEST's
 *   in the session's big reserve, allocated before its first REQUEST is read (without it
 *   the client is not read, and is retried until memory is back: sess_starve()); a get
 *   that may wait on the socket reserves its deferred reply's slot in sock_reps before it
 *   waits (else it is refused -ENOMEM). So one reply at most is queued, never allocated.
 *   A channel's reply doorbell is the client's own eventfd: the O_NONBLOCK set on it at
 *   CHANNEL_OPEN lives in the open file the client shares, and the client can clear it and
 *   fill the counter, so each wake-up write runs under a repeating timer (wake_efd()) whose
 *   signal interrupts it; a doorbell that blocks closes that client only.
 * Source: Plasma store's event loop (plasma/store.cc), libuv's EMFILE reserve-fd trick,
 * virtio's event-index idea for doorbells, NVMe/virtio shadow doorbells for the page.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "runtime/proto_util.h"
#include "tools/list.h"
#include "tools/log.h"
#include "tools/objtab.h"
#include "tools/shm.h"
#include "tools/store.h"

/* What an epoll event's data.ptr points at; a session's doorbell carries its odd id instead. */
enum { K_LISTEN = 1, K_SIGNAL = 2, K_SESS = 3 };

#define SOCK_MSGS_PER_ROUND 16
#define ACCEPTS_PER_ROUND   64

struct sess;

/* Channel bitmaps of a session (sess.open, sess.pending), 64 channels a word. */
#define CHAN_MASK_WORDS (COFFER_CHANNELS_MAX / 64)
_Static_assert(COFFER_CHANNELS_MAX % 64 == 0, "whole bitmap words");

static inline void mask_set(uint64_t *m, uint32_t id)
{
	m[id / 64] |= UINT64_C(1) << (id % 64);
}

static inline void mask_clear(uint64_t *m, uint32_t id)
{
	m[id / 64] &= ~(UINT64_C(1) << (id % 64));
}

struct chan {
	struct sess *s;
	uint32_t id;
	int rep_efd; /* the client's reply doorbell */
	void *map;
	size_t map_bytes;
	struct coffer_chan_shm *shm;
	struct coffer_req *reqs;
	struct coffer_rep *reps;
	uint32_t entries, mask;
	uint32_t req_cons, rep_prod, rep_cons, rep_published;
	uint32_t waiting;
	int dirty;
	struct coffer__dl dirty_link;
};

/* A socket reply the client's socket had no room for: one of its session's reserves. */
struct outmsg {
	size_t cap; /* bytes buf holds */
	size_t len;
	unsigned int nfds;
	unsigned int owned; /* bit i: fds[i] is the message's, closed once sent or dropped */
	int fds[COFFER_MSG_FDS_MAX];
	unsigned char buf[];
};

/* The largest reply to anything but a REQUEST (send_simple()'s), and to a REQUEST. */
#define REPLY_SMALL_MAX (sizeof(struct coffer_msg_hdr) + 128)
#define REPLY_BIG_MAX                                                                              \
	(sizeof(struct coffer_msg_hdr) + COFFER_MSG_BATCH_MAX * sizeof(struct coffer_rep))
_Static_assert(sizeof(struct coffer_msg_error) <= 128 && sizeof(struct coffer_store_info) <= 128 &&
		   sizeof(struct coffer_hello_reply) <= 128 &&
		   sizeof(struct coffer_chan_open_reply) <= 128,
	       "every reply but REPLY fits the small reserve");

struct sess {
	int kind;    /* K_SESS */
	uint64_t id; /* unique per store run: names the session in its doorbell's epoll event */
	int bell;    /* its request doorbell rang since the last round */
	struct coffer__owner owner;
	int fd;
	int hello, doomed, epollout;
	/* the client shut its sending side down (SHUT_WR): not read any more, but served - its
	 * waiting gets, queued replies and channels - until it closes (EPOLLHUP) */
	int rd_eof;
	pid_t pid;
	uid_t uid;
	struct chan *chans[COFFER_CHANNELS_MAX];
	struct coffer_doorbell *db;	/* the connection's doorbell page (proto.h), from HELLO */
	int bell_efd;			/* the connection's request doorbell (v3), from HELLO */
	uint64_t open[CHAN_MASK_WORDS]; /* bit i: chans[i] is open */
	uint64_t pending[CHAN_MASK_WORDS]; /* left with work last round: polled without a bit */
	/* pending only because its reply ring is full: work for the client (reap), not for us */
	uint64_t stalled[CHAN_MASK_WORDS];
	unsigned int db_used;  /* doorbell words some open channel maps to */
	unsigned int nwords;   /* bitmap words up to the highest open channel's (0: none open) */
	unsigned int rr;       /* the channel looked at first next round */
	int cold;	       /* idle: told to ring (store_sleeping), its words not polled */
	uint64_t last_work_us; /* when a round last found a bit or work left (coffer__now_us) */
	struct outmsg *queued; /* the reply waiting for room in the socket: small or big */
	struct outmsg *small;  /* reserve for replies up to REPLY_SMALL_MAX, in the session's
				* own allocation */
	struct outmsg *big;    /* reserve for a REQUEST's reply (REPLY_BIG_MAX), allocated
				* before the first REQUEST is read (most clients send none) */
	int starved;	       /* not read until big can be allocated (sess_starve()) */
	struct coffer__dl starved_link;
	struct coffer_rep *sock_reps; /* deferred socket replies not yet sent, allocated by
				       * the first get that may wait on the socket */
	unsigned int nsock_reps;
	unsigned int sock_cap;	   /* entries sock_reps holds */
	unsigned int sock_waiting; /* socket gets waiting: each has a slot in sock_reps */
	int dirty;
	struct coffer__dl dirty_link, link;
	struct coffer__dl doomed_link;	/* on the store's doomed list once doomed */
	struct coffer__dl *doomed_list; /* the store's doomed list */
};

/* The small reserve lies right after the session, in the same allocation (do_accept()). */
_Static_assert(sizeof(struct sess) % _Alignof(struct outmsg) == 0, "reserve aligned");

struct store {
	const struct coffer__store_cfg *cfg;
	struct coffer__shm shm;
	struct coffer__shm_index index;
	struct coffer__ot *ot;
	int epfd, lfd, sigfd, reserve_fd;
	dev_t ldev; /* the socket file lfd is bound to, as lstat(2) saw it after bind(2): */
	ino_t lino; /* teardown removes the path only while it still names that file */
	int lkind, sigkind;
	int listen_paused;
	uint64_t resume_listen_us;
	int stop;
	int sleeping;
	int stalled;  /* try_sleep() found channels waiting for their client to reap replies */
	uint32_t cpu; /* 1 + the CPU the loop last ran on (0: unknown), as told to the rings */
	int sweep;    /* next round polls every channel, doorbell bit or not */
	uint64_t spin_until; /* keep polling the rings until then (us): a large create's copy */
	uint64_t nclients;
	uint64_t next_sess_id;
	struct coffer__dl sessions, dirty_chans, dirty_sess, doomed;
	struct coffer__dl starved; /* sessions not read for want of memory (sess_starve()) */
	timer_t wake_timer;	   /* bounds each reply-doorbell write (wake_efd()) */
	bool wake_timer_ok;
	unsigned char rbuf[COFFER_MSG_MAX_BYTES + 64];
};

/* The wake-up timer's signal, and how long one reply-doorbell write may block: a write to a
 * client's eventfd blocks only when that client cleared O_NONBLOCK and filled its counter. */
#define STORE_WAKE_SIG	    (SIGRTMIN + 2)
#define STORE_WAKE_LIMIT_NS (20 * 1000 * 1000)

static volatile sig_atomic_t wake_fired;

static void wake_alarm(int sig)
{
	(void)sig;
	wake_fired = 1;
}

/* Once, in setup(): the per-thread periodic timer wake_efd() arms (SIGEV_THREAD_ID: the
 * store's loop thread, also when the store runs in a thread of another program). Its
 * handler is installed without SA_RESTART, so the signal ends a blocked write with EINTR. */
static void wake_timer_setup(struct store *st)
{
	struct sigaction sa;
	struct sigevent sev;
	sigset_t set;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = wake_alarm;
	sigemptyset(&sa.sa_mask);
	if (sigaction(STORE_WAKE_SIG, &sa, NULL) != 0)
		goto fail;
	sigemptyset(&set);
	sigaddset(&set, STORE_WAKE_SIG);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = STORE_WAKE_SIG;
	sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
	if (timer_create(CLOCK_MONOTONIC, &sev, &st->wake_timer) != 0)
		goto fail;
	st->wake_timer_ok = true;
	return;
fail:
	COFFER_LOG(COFFER_LOG_WARN,
		   "no wake-up timer (%s): a client that makes its reply doorbell block "
		   "can stop the store",
		   strerror(errno));
}

/*
 * Writes 1 to a client's reply doorbell @efd. Return: 0 (written, or the counter is already
 * at its maximum and non-blocking: the client is signalled anyway); -EAGAIN when the write
 * blocked past STORE_WAKE_LIMIT_NS (the client cleared O_NONBLOCK on its eventfd and filled
 * it: close that client).
 * The timer repeats every STORE_WAKE_LIMIT_NS until disarmed: a store descheduled between
 * arming it and entering the write takes the first signal before the write (wake_fired set,
 * nothing interrupted), and only a later one can end a write that then blocks. Only a write
 * that blocks can fail with EINTR (a non-blocking eventfd write never sleeps), so EINTR once
 * the limit has passed always means a doorbell made blocking.
 */
static int wake_efd(struct store *st, int efd)
{
	static const struct itimerspec arm = {.it_value = {.tv_nsec = STORE_WAKE_LIMIT_NS},
					      .it_interval = {.tv_nsec = STORE_WAKE_LIMIT_NS}};
	static const struct itimerspec disarm;
	uint64_t one = 1;
	ssize_t n;

	if (!st->wake_timer_ok) {
		(void)!write(efd, &one, sizeof(one)); /* EAGAIN: already signalled */
		return 0;
	}
	wake_fired = 0;
	timer_settime(st->wake_timer, 0, &arm, NULL);
	do
		n = write(efd, &one, sizeof(one));
	while (n < 0 && errno == EINTR && !wake_fired);
	timer_settime(st->wake_timer, 0, &disarm, NULL);
	return n < 0 && errno == EINTR ? -EAGAIN : 0;
}

/* ---------------------------------------------------------------- sending */

/* Mark a session for closing at the next safe point (reap()). */
static void doom(struct sess *s, const char *why)
{
	if (s->doomed)
		return;
	COFFER_LOG_RL(COFFER_LOG_INFO, "client pid %d: closing (%s)", (int)s->pid, why);
	s->doomed = 1;
	coffer__dl_add_tail(s->doomed_list, &s->doomed_link);
}

/* Waits for room in the socket while a reply waits for it; else reads, unless starved or
 * half-closed (then only a hang-up is reported, which epoll always reports; a half-closed
 * socket would be readable - EOF - for good). */
static void set_events(struct store *st, struct sess *s)
{
	struct epoll_event ev = {.events = s->epollout		     ? EPOLLOUT
					   : s->starved || s->rd_eof ? 0
								     : EPOLLIN,
				 .data.ptr = &s->kind};

	(void)epoll_ctl(st->epfd, EPOLL_CTL_MOD, s->fd, &ev);
}

/* Waits for room in @s's socket (back-pressure: it is not read meanwhile). */
static void want_out(struct store *st, struct sess *s)
{
	if (!s->epollout) {
		s->epollout = 1;
		set_events(st, s);
	}
}

/* Closes the fds of @n of @fds that @owned marks (bit i: fds[i]). */
static void close_owned(const int *fds, unsigned int n, unsigned int owned)
{
	for (unsigned int i = 0; i < n; i++)
		if (owned & (1u << i))
			close(fds[i]);
}

static void outmsg_close_fds(struct outmsg *m)
{
	close_owned(m->fds, m->nfds, m->owned);
	m->nfds = 0;
	m->owned = 0;
}

static void flush_sock_reps(struct store *st, struct sess *s);
static void send_sock_reps(struct store *st, struct sess *s);
static void fds_refused(struct store *st, struct sess *s, const unsigned char *reply);

/*
 * Sends a reply to the message just read, or keeps it in one of @s's reserves when the
 * socket is full. It allocates nothing, memory or fds: a message is read only when its reply
 * has a reserve (sess_read()), and only while no reply waits, so the reserve is free; the
 * fds @owned marks (bit i: fds[i]) are handed over - closed once sent, at once or from the
 * queue - and the others must live as long as the session (the arena, the index, the
 * session's doorbell), so the queued reply keeps their numbers: a number closed before the
 * client reads could carry another client's file once reused. It used to queue copies
 * (dup), and closed a client at the store's fd limit (test_full_socket_out_of_fds).
 */
static void sess_send(struct store *st, struct sess *s, const void *buf, size_t len, const int *fds,
		      unsigned int nfds, unsigned int owned)
{
	struct outmsg *m;
	long rc;

	if (s->doomed) {
		close_owned(fds, nfds, owned);
		return;
	}
	if (s->queued == NULL && !s->epollout) { /* epollout: found full, wait for room */
		rc = coffer__send_fds(s->fd, buf, len, fds, nfds, MSG_DONTWAIT);
		if (rc >= 0 || rc != -EAGAIN) {
			close_owned(fds, nfds, owned);
			if (rc == -ETOOMANYREFS && nfds > 0)
				fds_refused(st, s, buf);
			else if (rc < 0)
				doom(s, "send failed");
			return;
		}
	}
	m = len <= REPLY_SMALL_MAX ? s->small : s->big;
	if (s->queued != NULL || m == NULL || len > m->cap) { /* sess_read() rules it out */
		COFFER_LOG(COFFER_LOG_ERR, "client pid %d: no reserve for a %zu-byte reply",
			   (int)s->pid, len);
		close_owned(fds, nfds, owned);
		doom(s, "no room for a reply");
		return;
	}
	m->len = len;
	m->nfds = nfds;
	m->owned = owned;
	if (nfds > 0) /* @fds may be NULL without fds */
		memcpy(m->fds, fds, nfds * sizeof(*fds));
	memcpy(m->buf, buf, len);
	s->queued = m;
	want_out(st, s); /* stop reading this client until it reads its replies */
}

/* Room in @s's socket: send the waiting reply, then the deferred ones; read again once all
 * went out. */
static void sess_flush_outq(struct store *st, struct sess *s)
{
	struct outmsg *m;

	while ((m = s->queued) != NULL && !s->doomed) {
		long rc = coffer__send_fds(s->fd, m->buf, m->len, m->fds, m->nfds, MSG_DONTWAIT);

		if (rc == -EAGAIN)
			return;
		if (rc == -ETOOMANYREFS && m->nfds > 0) {
			unsigned char reply[REPLY_SMALL_MAX];

			/* its answer may take the reserve it lies in: sent next time round */
			memcpy(reply, m->buf, m->len < sizeof(reply) ? m->len : sizeof(reply));
			outmsg_close_fds(m);
			s->queued = NULL;
			fds_refused(st, s, reply);
			continue;
		}
		if (rc < 0) {
			doom(s, "send failed");
			return;
		}
		outmsg_close_fds(m);
		s->queued = NULL;
	}
	send_sock_reps(st, s);
	if (s->epollout && !s->doomed && s->queued == NULL && s->nsock_reps == 0) {
		s->epollout = 0;
		set_events(st, s);
	}
}

/* A reply of @type with @body; @fds and @owned as for sess_send(). */
static void send_simple(struct store *st, struct sess *s, uint16_t type, const void *body,
			size_t blen, const int *fds, unsigned int nfds, unsigned int owned)
{
	unsigned char buf[REPLY_SMALL_MAX];
	struct coffer_msg_hdr h;

	coffer__msg_hdr_init(&h, type, 0, (uint32_t)(sizeof(h) + blen));
	memcpy(buf, &h, sizeof(h));
	if (blen > 0)
		memcpy(buf + sizeof(h), body, blen);
	sess_send(st, s, buf, sizeof(h) + blen, fds, nfds, owned);
}

/* An ERROR message straight on @fd, best effort, never queued: for a client about to be
 * closed (a protocol violation) or refused at accept (wrong user, store out of fds), so that
 * it learns why instead of seeing only EOF. */
static void send_error_now(int fd, int status, const char *msg)
{
	unsigned char buf[sizeof(struct coffer_msg_hdr) + sizeof(struct coffer_msg_error)];
	struct coffer_msg_error e;
	struct coffer_msg_hdr h;

	memset(&e, 0, sizeof(e));
	e.status = status;
	snprintf(e.message, sizeof(e.message), "%s", msg);
	coffer__msg_hdr_init(&h, COFFER_MSG_ERROR, 0, sizeof(buf));
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), &e, sizeof(e));
	(void)coffer__send_fds(fd, buf, sizeof(buf), NULL, 0, MSG_DONTWAIT);
}

/* ERROR message; @fatal closes the client after it (protocol violations). */
static void send_error(struct store *st, struct sess *s, int status, int fatal, const char *fmt,
		       ...) __attribute__((format(printf, 5, 6)));
static void send_error(struct store *st, struct sess *s, int status, int fatal, const char *fmt,
		       ...)
{
	struct coffer_msg_error e;
	va_list ap;

	memset(&e, 0, sizeof(e));
	e.status = status;
	va_start(ap, fmt);
	vsnprintf(e.message, sizeof(e.message), fmt, ap);
	va_end(ap);
	if (fatal) {
		COFFER_LOG_RL(COFFER_LOG_WARN, "client pid %d: %s", (int)s->pid, e.message);
		/* Best effort, never queued: the client is closed right after. */
		if (!s->doomed)
			send_error_now(s->fd, status, e.message);
		doom(s, e.message);
		return;
	}
	send_simple(st, s, COFFER_MSG_ERROR, &e, sizeof(e), NULL, 0, 0);
}

/* Sends @s's deferred socket replies, a batch a message, after the reply that waits for
 * room; what the socket has no room for stays in sock_reps (its slots were reserved when
 * the gets began to wait), sent when the client reads (sess_flush_outq()). */
static void send_sock_reps(struct store *st, struct sess *s)
{
	unsigned char buf[REPLY_BIG_MAX];
	struct coffer_msg_hdr h;

	while (s->nsock_reps > 0 && !s->doomed) {
		unsigned int k =
		    s->nsock_reps < COFFER_MSG_BATCH_MAX ? s->nsock_reps : COFFER_MSG_BATCH_MAX;
		size_t len = sizeof(h) + k * sizeof(struct coffer_rep);
		long rc;

		if (s->queued != NULL) { /* replies leave in order */
			want_out(st, s);
			return;
		}
		coffer__msg_hdr_init(&h, COFFER_MSG_REPLY, k, (uint32_t)len);
		memcpy(buf, &h, sizeof(h));
		memcpy(buf + sizeof(h), s->sock_reps, k * sizeof(struct coffer_rep));
		rc = coffer__send_fds(s->fd, buf, len, NULL, 0, MSG_DONTWAIT);
		if (rc == -EAGAIN) {
			want_out(st, s);
			return;
		}
		if (rc < 0) {
			doom(s, "send failed");
			return;
		}
		s->nsock_reps -= k;
		memmove(s->sock_reps, s->sock_reps + k, s->nsock_reps * sizeof(struct coffer_rep));
	}
}

/*
 * Sends @s's deferred socket replies (send_sock_reps()) unless its socket was found full:
 * then they wait for EPOLLOUT (sess_flush_outq()), and a delivery only adds to sock_reps.
 * Trying anyway cost the store a send failing with EAGAIN per delivery (each get woken or
 * timed out past a full batch, and each round that woke one) for as long as the client did
 * not read: up to 4096 (COFFER_OT_SOCK_WAITERS_MAX) per client and full socket
 * (test_full_socket_no_send_per_delivery).
 */
static void flush_sock_reps(struct store *st, struct sess *s)
{
	if (!s->epollout)
		send_sock_reps(st, s);
}

/* ---------------------------------------------------------------- channels */

static void chan_mark_dirty(struct store *st, struct chan *c)
{
	if (!c->dirty) {
		c->dirty = 1;
		coffer__dl_add_tail(&st->dirty_chans, &c->dirty_link);
	}
}

/* Publish the reply ring; ring the client's doorbell only if it sleeps. */
static void chan_publish(struct store *st, struct chan *c)
{
	if (c->rep_published == c->rep_prod)
		return;
	c->rep_published = c->rep_prod;
	/* release: pairs with the client's acquire load of rep.prod before reading entries */
	__atomic_store_n(&c->shm->rep.prod, c->rep_prod, __ATOMIC_RELEASE);
	/* seq_cst fence: orders the prod store before the flag load (Dekker handshake with
	 * the client's flag store + fence + prod re-check; proto.h). */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&c->shm->rep.consumer_sleeping, __ATOMIC_RELAXED) != 0 &&
	    wake_efd(st, c->rep_efd) != 0)
		doom(c->s, "its reply doorbell blocks (O_NONBLOCK cleared, counter full)");
}

static void deliver(void *ctx, struct coffer__owner *ow, uint32_t route,
		    const struct coffer_rep *rep)
{
	struct store *st = ctx;
	struct sess *s = COFFER_DL_ENTRY(ow, struct sess, owner);

	if (s->doomed)
		return;
	if (route == 0) {
		/* exec_one() reserved its slot before the get could wait */
		if (s->sock_waiting == 0 || s->nsock_reps >= s->sock_cap) {
			COFFER_LOG(COFFER_LOG_ERR, "client pid %d: deferred reply without a slot",
				   (int)s->pid);
			doom(s, "deferred socket reply without a slot");
			return;
		}
		s->sock_waiting--;
		s->sock_reps[s->nsock_reps++] = *rep;
		if (s->nsock_reps >= COFFER_MSG_BATCH_MAX)
			flush_sock_reps(st, s);
		if (!s->dirty) {
			s->dirty = 1;
			coffer__dl_add_tail(&st->dirty_sess, &s->dirty_link);
		}
		return;
	}
	if (route - 1 < COFFER_CHANNELS_MAX && s->chans[route - 1] != NULL) {
		struct chan *c = s->chans[route - 1];

		/* A slot was reserved when the get was taken from the ring. */
		memcpy(&c->reps[c->rep_prod & c->mask], rep, sizeof(*rep));
		c->rep_prod++;
		c->waiting--;
		chan_mark_dirty(st, c);
	}
}

/*
 * A client that just created a large object is copying into it and will seal it when done.
 * If the copy outlasts the idle spin (spin_us), the seal finds the store asleep and pays a
 * doorbell and a wake-up (measured on the 2-core VM: a 4 MiB put took 47 us in seal
 * instead of 4, a quarter of the copy). So after a successful create the loop keeps polling
 * for the time the copy would take at STORE_COPY_BYTES_PER_US, capped at STORE_COPY_SPIN_US:
 * beyond that the copy is so long that one wake-up is a few percent of it. Bounded work after
 * activity only: an idle store still sleeps (spin_us = 0 turns this off as well).
 */
#define STORE_COPY_BYTES_PER_US 8192u /* 8 GB/s: a slow copy still finds the store awake */
#define STORE_COPY_SPIN_US	1000u

static void note_create(struct store *st, const struct coffer_req *req,
			const struct coffer_rep *rep)
{
	uint64_t us = req->size / STORE_COPY_BYTES_PER_US, until;

	if (req->op != COFFER_OP_CREATE || rep->status != 0 || st->cfg->spin_us == 0 ||
	    us <= st->cfg->spin_us)
		return;
	if (us > STORE_COPY_SPIN_US)
		us = STORE_COPY_SPIN_US;
	until = coffer__now_us() + us;
	if (until > st->spin_until)
		st->spin_until = until;
}

/* Answer @req at once with @status (nothing executed). */
static void refuse_now(const struct coffer_req *req, int status, struct coffer_rep *rep,
		       int *immediate)
{
	memset(rep, 0, sizeof(*rep));
	rep->tag = req->tag;
	rep->status = status;
	*immediate = 1;
}

/* Doubles @s's sock_reps (a batch at first). Return: 0; -ENOMEM (nothing changed). */
static int sock_reps_grow(struct sess *s)
{
	unsigned int cap = s->sock_cap ? 2 * s->sock_cap : COFFER_MSG_BATCH_MAX;
	struct coffer_rep *r = realloc(s->sock_reps, (size_t)cap * sizeof(*r));

	if (r == NULL)
		return -ENOMEM;
	s->sock_reps = r;
	s->sock_cap = cap;
	return 0;
}

/* Check and execute one socket request (the ring path batches: chan_drain()). */
static void exec_one(struct store *st, struct sess *s, const struct coffer_req *req, uint32_t route,
		     struct coffer_rep *rep, int *immediate)
{
	int rc = coffer__req_check(req);

	if (rc != 0) {
		refuse_now(req, rc, rep, immediate);
		return;
	}
	/* A get that may wait on the socket needs the slot its deferred reply waits in until
	 * the socket has room: reserved now, so that running out of memory refuses this get,
	 * instead of closing the client when the reply comes (deliver()). Only one that would
	 * wait: a get of a present, sealed object is answered now and needs no slot, so
	 * without one it is executed as a get that does not wait (timeout 0), whose -ENOENT -
	 * the object is absent or unsealed, and this get would have waited - changed nothing
	 * and becomes the -ENOMEM refusal. */
	if (req->op == COFFER_OP_GET && req->timeout_us != 0 &&
	    s->nsock_reps + s->sock_waiting >= s->sock_cap && sock_reps_grow(s) != 0) {
		struct coffer_req now = *req;

		now.timeout_us = 0;
		*immediate = coffer__ot_exec(st->ot, &s->owner, &now, route, rep);
		if (rep->status == -ENOENT)
			refuse_now(req, -ENOMEM, rep, immediate);
		return;
	}
	*immediate = coffer__ot_exec(st->ot, &s->owner, req, route, rep);
	if (!*immediate)
		s->sock_waiting++;
	note_create(st, req, rep);
}

/* Requests a ring drain copies out, hashes and prefetches before executing any of them. */
#define DRAIN_BATCH 32u
_Static_assert(DRAIN_BATCH <= COFFER_OT_PREFETCH_MAX, "one prefetch call covers a group");

/* Take up to @budget requests from @c's ring. Return: how many. @more: out: requests are
 * left in the ring; @stalled: out: left because the reply ring is full (the client has not
 * read its replies), not for want of budget.
 *
 * Requests are taken in groups of up to DRAIN_BATCH: each group is copied into private memory
 * (copy, then trust: nothing is read from the ring twice), every request's ObjectID is
 * hashed and its table lines are prefetched in four passes (coffer__ot_prefetch_batch(): bucket,
 * entry, object + holder bucket, holder + LRU neighbours + arena block), then the requests are
 * checked and executed in ring order. Prefetching is only a hint, so an invalid request costs
 * nothing more than a wasted load; coffer__req_check() still decides before anything is executed.
 * The group size is fixed when the group is taken: every executed request uses exactly one reply
 * slot, immediate or reserved for a waiting get (a deferred reply delivered meanwhile moves one
 * from waiting to rep_prod), so the reply-space condition cannot change within a group; a client
 * doomed meanwhile stops the drain at once, as before. */
static unsigned int chan_drain(struct store *st, struct chan *c, unsigned int budget, bool *more,
			       bool *stalled)
{
	struct coffer_req reqs[DRAIN_BATCH];
	uint64_t hash[DRAIN_BATCH];
	uint32_t prod, cons;
	unsigned int n = 0;
	struct sess *s = c->s;

	*more = *stalled = false;
	/* acquire: pairs with the client's release store of req.prod after writing entries */
	prod = __atomic_load_n(&c->shm->req.prod, __ATOMIC_ACQUIRE);
	if (prod == c->req_cons)
		return 0;
	if (!coffer__ring_ok(prod, c->req_cons, c->entries)) {
		send_error(st, s, -EPROTO, 1, "channel %u: request ring prod %u cons %u corrupt",
			   c->id, prod, c->req_cons);
		return 0;
	}
	/* acquire: pairs with the client's release store of rep.cons after copying out */
	cons = __atomic_load_n(&c->shm->rep.cons, __ATOMIC_ACQUIRE);
	if ((uint32_t)(cons - c->rep_cons) > (uint32_t)(c->rep_prod - c->rep_cons)) {
		send_error(st, s, -EPROTO, 1, "channel %u: reply ring cons %u outside [%u, %u]",
			   c->id, cons, c->rep_cons, c->rep_prod);
		return 0;
	}
	c->rep_cons = cons;
	while (c->req_cons != prod && n < budget && !s->doomed &&
	       (uint32_t)(c->rep_prod - c->rep_cons) + c->waiting < c->entries) {
		uint32_t room = c->entries - ((uint32_t)(c->rep_prod - c->rep_cons) + c->waiting);
		uint32_t k = prod - c->req_cons, i, j;

		if (k > budget - n)
			k = budget - n;
		if (k > room)
			k = room;
		if (k > DRAIN_BATCH)
			k = DRAIN_BATCH;
		for (i = 0; i < k; i++) {
			memcpy(&reqs[i], &c->reqs[(c->req_cons + i) & c->mask], sizeof(reqs[i]));
			hash[i] = coffer__ot_hash(st->ot, reqs[i].oid);
		}
		coffer__ot_prefetch_batch(st->ot, &s->owner, hash, k);
		for (j = 0; j < k && !s->doomed; j++) {
			struct coffer_rep rep;
			int rc = coffer__req_check(&reqs[j]), imm = 1;

			/* The client gave us up (we were stopped or wedged past its store
			 * timeout) and told its callers the requests failed: executing one
			 * now would do what it reported undone - seal an object its creator
			 * was told is unsealed. End the session instead (its unsealed objects
			 * are aborted, its references dropped). Acquire: pairs with the
			 * client's release store. */
			if (s->db != NULL &&
			    __atomic_load_n(&s->db->client_gone, __ATOMIC_ACQUIRE) != 0) {
				doom(s, "it gave the store up (timed out)");
				break;
			}

			c->req_cons++;
			n++;
			if (rc != 0) {
				refuse_now(&reqs[j], rc, &rep, &imm);
			} else {
				imm = coffer__ot_exec_hashed(st->ot, &s->owner, &reqs[j], hash[j],
							     c->id + 1, &rep);
				note_create(st, &reqs[j], &rep);
			}
			if (imm) {
				memcpy(&c->reps[c->rep_prod & c->mask], &rep, sizeof(rep));
				c->rep_prod++;
			} else {
				c->waiting++;
			}
		}
	}
	/* budget, reply room or a doomed client stopped us: look again next round */
	*more = c->req_cons != prod;
	*stalled =
	    *more && !s->doomed && (uint32_t)(c->rep_prod - c->rep_cons) + c->waiting >= c->entries;
	if (n > 0) {
		/* release: the client may reuse the slots once it sees cons (we copied them) */
		__atomic_store_n(&c->shm->req.cons, c->req_cons, __ATOMIC_RELEASE);
		chan_mark_dirty(st, c);
	}
	return n;
}

static void chan_close(struct store *st, struct chan *c)
{
	struct sess *s = c->s;

	coffer__ot_drop_route(st->ot, &s->owner, c->id + 1);
	s->chans[c->id] = NULL;
	mask_clear(s->open, c->id);
	mask_clear(s->pending, c->id);
	s->db_used = 0;
	s->nwords = 0;
	for (unsigned int w = 0; w < CHAN_MASK_WORDS; w++)
		for (uint64_t o = s->open[w]; o != 0; o &= o - 1) {
			s->db_used |= 1u << ((w * 64 + (unsigned int)__builtin_ctzll(o)) %
					     COFFER_DOORBELL_WORDS);
			s->nwords = w + 1;
		}
	if (c->dirty)
		coffer__dl_del(&c->dirty_link);
	close(c->rep_efd);
	munmap(c->map, c->map_bytes);
	free(c);
}

/*
 * The kernel would not pass the fds of @reply (a HELLO_REPLY or a CHANNEL_OPEN_REPLY; they
 * are closed already): ETOOMANYREFS, more fds sent by the store's user are in flight - sent,
 * not yet received - than its RLIMIT_NOFILE (root, or CAP_SYS_RESOURCE, is exempt). Clients
 * that do not read their replies hold them (a HELLO_REPLY holds five), so this is seldom the
 * doing of the client at hand: it used to be closed ("send failed"), and a well-behaved
 * client opening a channel beside a dozen stalled connects lost its connection
 * (test_fds_in_flight). A CHANNEL_OPEN is answered -EMFILE instead, as when the store is out
 * of fds, and the channel it opened is closed; a HELLO is refused (-EMFILE, fatal: there is
 * no session without its fds), with that reason instead of bare EOF.
 */
static void fds_refused(struct store *st, struct sess *s, const unsigned char *reply)
{
	static const char why[] = "too many file descriptors in flight to clients that have "
				  "not read them (ETOOMANYREFS)";
	struct coffer_msg_hdr h;

	memcpy(&h, reply, sizeof(h));
	if (h.type == COFFER_MSG_CHANNEL_OPEN_REPLY) {
		struct coffer_chan_open_reply r;

		memcpy(&r, reply + sizeof(h), sizeof(r));
		if (r.channel_id < COFFER_CHANNELS_MAX && s->chans[r.channel_id] != NULL)
			chan_close(st, s->chans[r.channel_id]);
		COFFER_LOG_RL(COFFER_LOG_WARN, "client pid %d: CHANNEL_OPEN refused: %s",
			      (int)s->pid, why);
		send_error(st, s, -EMFILE, 0, "CHANNEL_OPEN failed: %s", why);
		return;
	}
	send_error(st, s, -EMFILE, 1, "HELLO refused: %s", why);
}

/*
 * Creates a memfd of @bytes for a client to map (a channel's rings, a doorbell page), sealed
 * against shrinking and growing so that the client cannot make the store fault, and maps it
 * here, prefaulted. Return: 0 (*@fd, *@map set); -errno (nothing left open).
 */
static int shared_memfd(const char *name, size_t bytes, int *fd, void **map)
{
	int rc;

	*map = NULL;
	*fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (*fd < 0)
		return -errno;
	if (ftruncate(*fd, (off_t)bytes) != 0 ||
	    fcntl(*fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
		goto fail;
	*map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, *fd, 0);
	if (*map != MAP_FAILED)
		return 0;
	*map = NULL;
fail:
	rc = -errno;
	close(*fd);
	*fd = -1;
	return rc;
}

/*
 * Opens a channel of @s with @entries per ring and the client's reply doorbell @rep_efd (kept
 * on success). Return: 0 (*@memfd: the rings' memfd, for the reply; the caller closes it,
 * the mapping stays); -EMFILE (no free channel id, or out of fds); -ENOMEM.
 */
static int chan_open(struct sess *s, uint32_t entries, int rep_efd,
		     struct coffer_chan_open_reply *r, int *memfd)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), bytes;
	struct chan *c;
	uint32_t id;
	int fl;

	*memfd = -1;
	for (id = 0; id < COFFER_CHANNELS_MAX && s->chans[id] != NULL; id++)
		;
	if (id == COFFER_CHANNELS_MAX)
		return -EMFILE;
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return -ENOMEM;
	c->s = s;
	c->id = id;
	c->entries = entries;
	c->mask = entries - 1;
	r->channel_id = id;
	r->ring_entries = entries;
	r->req_off = sizeof(struct coffer_chan_shm);
	r->rep_off = r->req_off + (uint64_t)entries * sizeof(struct coffer_req);
	bytes = (size_t)(r->rep_off + (uint64_t)entries * sizeof(struct coffer_rep));
	bytes = (bytes + page - 1) / page * page;
	r->shm_bytes = bytes;
	c->map_bytes = bytes;
	if (shared_memfd("coffer-chan", bytes, memfd, &c->map) != 0)
		goto fail;
	c->shm = c->map;
	c->reqs = (struct coffer_req *)((char *)c->map + r->req_off);
	c->reps = (struct coffer_rep *)((char *)c->map + r->rep_off);
	fl = fcntl(rep_efd, F_GETFL);
	if (fl < 0 || fcntl(rep_efd, F_SETFL, fl | O_NONBLOCK) != 0)
		goto fail;
	c->rep_efd = rep_efd;
	coffer__dl_init(&c->dirty_link);
	s->chans[id] = c;
	mask_set(s->open, id);
	mask_set(s->pending, id); /* looked at once, bit or not */
	s->db_used |= 1u << (id % COFFER_DOORBELL_WORDS);
	if (id / 64 + 1 > s->nwords)
		s->nwords = id / 64 + 1;
	s->last_work_us = coffer__now_us();
	return 0;
fail:
	fl = errno == EMFILE || errno == ENFILE ? -EMFILE : -ENOMEM;
	if (c->map != NULL)
		munmap(c->map, c->map_bytes);
	if (*memfd >= 0)
		close(*memfd);
	*memfd = -1;
	free(c);
	return fl;
}

/*
 * Creates @s's doorbells at HELLO (protocol v3): the doorbell page (*@pagefd, for the reply;
 * the caller closes it, *@page stays mapped) and the request-doorbell eventfd s->bell_efd,
 * which every channel of the connection rings when the store sleeps. Edge-triggered: every
 * client write is one wake-up, and the store never reads it. The event carries the
 * session's id (odd: never a pointer), never a pointer to it: a session freed earlier in the
 * same epoll_wait() batch would otherwise be read after free by dispatch() (found for
 * channels by tests/reliability/fuzz_wire.c).
 * One eventfd per connection rather than per channel keeps the store's fds per channel to
 * the client's reply doorbell alone. Return: 0; -EMFILE (out of fds); -ENOMEM.
 */
static int sess_bells(struct store *st, struct sess *s, int *pagefd, void **page)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.u64 = s->id << 1 | 1};
	int rc = shared_memfd("coffer-doorbell", COFFER_DOORBELL_BYTES, pagefd, page);

	if (rc == 0) {
		struct coffer_doorbell *db = *page;

		db->store_cpu = st->cpu; /* a hint, kept current by set_cpu() */
		s->bell_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (s->bell_efd >= 0 && epoll_ctl(st->epfd, EPOLL_CTL_ADD, s->bell_efd, &ev) == 0)
			return 0;
		rc = -errno;
		if (s->bell_efd >= 0)
			close(s->bell_efd);
		s->bell_efd = -1;
		munmap(*page, COFFER_DOORBELL_BYTES);
		close(*pagefd);
	}
	return rc == -EMFILE || rc == -ENFILE ? -EMFILE : -ENOMEM;
}

/* ---------------------------------------------------------------- messages */

static void handle_channel_open(struct store *st, struct sess *s, const unsigned char *body,
				int *fds, unsigned int nfds)
{
	struct coffer_chan_open req;
	struct coffer_chan_open_reply rep;
	int rc, memfd;

	memcpy(&req, body, sizeof(req));
	if (nfds != 1) {
		while (nfds > 0)
			close(fds[--nfds]);
		send_error(st, s, -EINVAL, 0, "CHANNEL_OPEN needs exactly one eventfd");
		return;
	}
	if (req.ring_entries == 0)
		req.ring_entries = COFFER_RING_ENTRIES_DEFAULT;
	if (req.rsvd != 0 || req.ring_entries < COFFER_RING_ENTRIES_MIN ||
	    req.ring_entries > COFFER_RING_ENTRIES_MAX ||
	    (req.ring_entries & (req.ring_entries - 1)) != 0) {
		close(fds[0]);
		send_error(st, s, -EINVAL, 0,
			   "CHANNEL_OPEN: ring_entries must be a power of two "
			   "in [%u, %u]",
			   COFFER_RING_ENTRIES_MIN, COFFER_RING_ENTRIES_MAX);
		return;
	}
	if (!coffer__is_eventfd(fds[0])) {
		close(fds[0]);
		send_error(st, s, -EINVAL, 0, "CHANNEL_OPEN: the passed fd is not an eventfd");
		return;
	}
	memset(&rep, 0, sizeof(rep));
	rc = chan_open(s, req.ring_entries, fds[0], &rep, &memfd);
	if (rc != 0) {
		close(fds[0]);
		send_error(st, s, rc, 0, "CHANNEL_OPEN failed: %s", strerror(-rc));
		return;
	}
	/* v3: the rings' fd only (the request doorbell is the session's, sent in HELLO_REPLY).
	 * The reply takes the fd (closed once sent, also from the queue), so the store keeps
	 * no fd per channel but the client's doorbell. */
	send_simple(st, s, COFFER_MSG_CHANNEL_OPEN_REPLY, &rep, sizeof(rep), &memfd, 1, 1u);
}

static void fill_info(struct store *st, struct coffer_store_info *info)
{
	struct coffer__ot_stats ots;

	coffer__ot_stats(st->ot, &ots);
	memset(info, 0, sizeof(*info));
	info->capacity_bytes = ots.capacity;
	info->used_bytes = ots.used;
	info->objects_created = ots.objects_created;
	info->objects_sealed = ots.objects_sealed;
	info->clients = st->nclients;
	info->evictions = ots.evictions;
	info->evicted_bytes = ots.evicted_bytes;
	info->hugepages = (uint32_t)st->shm.hugepages;
	info->version = COFFER_PROTO_VERSION;
	info->reserved_blocks = ots.reserved;
	info->reserved_bytes = ots.reserved_bytes;
	info->index_slots = ots.index_slots;
	info->index_objects = ots.index_live;
	info->index_unplaced = ots.index_unplaced;
	info->second_chances = ots.second_chances;
	info->quick_blocks = ots.quick_blocks;
	info->quick_bytes = ots.quick_bytes;
}

static void handle_request(struct store *st, struct sess *s, const unsigned char *body,
			   uint32_t count)
{
	unsigned char
	    buf[sizeof(struct coffer_msg_hdr) + COFFER_MSG_BATCH_MAX * sizeof(struct coffer_rep)];
	struct coffer_rep *reps = (struct coffer_rep *)(buf + sizeof(struct coffer_msg_hdr));
	struct coffer_msg_hdr h;
	uint32_t i, nrep = 0;

	for (i = 0; i < count && !s->doomed; i++) {
		struct coffer_req req;
		struct coffer_rep rep;
		int imm;

		memcpy(&req, body + (size_t)i * sizeof(req), sizeof(req));
		exec_one(st, s, &req, 0, &rep, &imm);
		if (imm)
			memcpy(&reps[nrep++], &rep, sizeof(rep));
	}
	if (nrep == 0)
		return;
	coffer__msg_hdr_init(&h, COFFER_MSG_REPLY, nrep,
			     (uint32_t)(sizeof(h) + nrep * sizeof(struct coffer_rep)));
	memcpy(buf, &h, sizeof(h));
	sess_send(st, s, buf, sizeof(h) + nrep * sizeof(struct coffer_rep), NULL, 0, 0);
}

static void handle_msg(struct store *st, struct sess *s, size_t len, int *fds, unsigned int nfds)
{
	const unsigned char *body = st->rbuf + sizeof(struct coffer_msg_hdr);
	struct coffer_msg_hdr h;
	unsigned int i;
	int rc;

	rc = coffer__msg_check(st->rbuf, len, &h);
	if (rc == 0 && nfds > 0 && h.type != COFFER_MSG_CHANNEL_OPEN)
		rc = -EBADMSG;
	if (rc != 0) {
		for (i = 0; i < nfds; i++)
			close(fds[i]);
		if (rc == -EPROTONOSUPPORT)
			send_error(st, s, rc, 1,
				   "protocol version %u not supported (this store speaks %u)",
				   (unsigned int)h.version, COFFER_PROTO_VERSION);
		else if (rc == -EBADMSG)
			send_error(st, s, -EPROTO, 1, "unexpected file descriptors with message %u",
				   (unsigned int)h.type);
		else
			send_error(st, s, -EPROTO, 1, "malformed message (%zu bytes)", len);
		return;
	}
	if (!s->hello && h.type != COFFER_MSG_HELLO && h.type != COFFER_MSG_QUERY) {
		for (i = 0; i < nfds; i++)
			close(fds[i]);
		send_error(st, s, -EPROTO, 1, "message %u before HELLO", (unsigned int)h.type);
		return;
	}
	switch (h.type) {
	case COFFER_MSG_HELLO: {
		struct coffer_hello_reply r = {
		    .segment = st->shm.segment,
		    .hugepages = (uint32_t)st->shm.hugepages,
		    .arena_bytes = st->shm.size,
		    .max_channels = COFFER_CHANNELS_MAX,
		    .max_ring_entries = COFFER_RING_ENTRIES_MAX,
		    .index_seed = st->index.seed,
		    .index_slots = st->index.slots,
		};

		int rc, out[5];
		void *db;

		if (s->hello) {
			send_error(st, s, -EPROTO, 1, "HELLO sent twice");
			return;
		}
		rc = sess_bells(st, s, &out[1], &db);
		if (rc != 0) {
			send_error(st, s, rc, 1, "HELLO: no doorbells: %s", strerror(-rc));
			return;
		}
		s->db = db;
		s->hello = 1;
		out[0] = st->shm.fd;
		out[2] = s->bell_efd;
		out[3] = st->index.fd_ro;
		out[4] = st->index.fd_access;
		/* the page stays mapped; its fd is the reply's (closed once sent), the others
		 * live as long as the store (arena, index) or the session (its doorbell) */
		send_simple(st, s, COFFER_MSG_HELLO_REPLY, &r, sizeof(r), out, 5, 1u << 1);
		return;
	}
	case COFFER_MSG_CHANNEL_OPEN:
		handle_channel_open(st, s, body, fds, nfds);
		return;
	case COFFER_MSG_CHANNEL_CLOSE: {
		struct coffer_chan_close cc;

		memcpy(&cc, body, sizeof(cc));
		if (cc.rsvd != 0 || cc.channel_id >= COFFER_CHANNELS_MAX ||
		    s->chans[cc.channel_id] == NULL) {
			send_error(st, s, cc.rsvd != 0 ? -EINVAL : -ENOENT, 0,
				   "CHANNEL_CLOSE: no channel %u", cc.channel_id);
			return;
		}
		chan_close(st, s->chans[cc.channel_id]);
		send_simple(st, s, COFFER_MSG_CHANNEL_CLOSE_REPLY, NULL, 0, NULL, 0, 0);
		return;
	}
	case COFFER_MSG_REQUEST:
		handle_request(st, s, body, h.count);
		return;
	case COFFER_MSG_QUERY: {
		struct coffer_store_info info;

		fill_info(st, &info);
		send_simple(st, s, COFFER_MSG_QUERY_REPLY, &info, sizeof(info), NULL, 0, 0);
		return;
	}
	default:
		send_error(st, s, -EPROTO, 1, "message type %u is not for the store",
			   (unsigned int)h.type);
		return;
	}
}

/* Whether the next message waiting in @fd is a REQUEST (left there: MSG_PEEK, no fds). */
static bool next_is_request(int fd)
{
	struct coffer_msg_hdr h;
	ssize_t n;

	do
		n = recv(fd, &h, sizeof(h), MSG_PEEK | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)sizeof(h) && h.type == COFFER_MSG_REQUEST;
}

/*
 * Whether the recv() on @fd that just returned 0 met the end of the stream - the peer shut
 * its sending side down and nothing of it is left to read - and not an empty message, a
 * protocol violation: a SOCK_SEQPACKET recv() returns 0 for both. The peer's shutdown alone
 * does not tell: an empty message sent just before it, with more messages behind it, was
 * taken for the EOF, and the store stopped reading with the rest queued for good - a
 * message carrying the client's own socket then kept that socket open after its process
 * was gone (an fd in flight holds its file), so no hang-up came and the session and its
 * references lived as long as the store (test_empty_message_before_half_close). So the
 * queue is peeked as well: with SO_PASSCRED (set here; the session reads nothing more once
 * it is at EOF or closed) every message, empty or not, comes with SCM_CREDENTIALS, the end
 * of the stream with nothing (unix(7)). fds a peek installs are closed at once. Source:
 * unix(7) SO_PASSCRED, recv(2) MSG_PEEK; poll(2) POLLRDHUP.
 */
static bool at_eof(int fd)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(struct ucred)) +
			 CMSG_SPACE(sizeof(int) * COFFER_MSG_FDS_MAX)];
	} ctl;
	struct pollfd p = {.fd = fd, .events = POLLRDHUP};
	char byte;
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr msg = {.msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = ctl.buf,
			     .msg_controllen = sizeof(ctl.buf)};
	struct cmsghdr *c;
	bool queued = false;
	int one = 1;
	ssize_t n;

	if (poll(&p, 1, 0) != 1 || (p.revents & (POLLRDHUP | POLLHUP)) == 0)
		return false;
	if (setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) != 0)
		return false; /* cannot tell: the protocol error closes it */
	n = recvmsg(fd, &msg, MSG_PEEK | MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return false;
	for (c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
		queued = true;
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			for (size_t k = 0; k < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); k++) {
				int pfd;

				memcpy(&pfd, CMSG_DATA(c) + k * sizeof(int), sizeof(int));
				close(pfd);
			}
	}
	return n == 0 && !queued && (msg.msg_flags & MSG_CTRUNC) == 0;
}

/* Allocates @s's reserve for a REQUEST's reply. Return: whether @s has one now. */
static bool big_reserve(struct sess *s)
{
	if (s->big == NULL) {
		s->big = malloc(sizeof(*s->big) + REPLY_BIG_MAX);
		if (s->big != NULL) {
			s->big->cap = REPLY_BIG_MAX;
			s->big->nfds = 0;
		}
	}
	return s->big != NULL;
}

/* Stops reading @s: its next message is a REQUEST whose reply has no reserve, for want of
 * memory. retry_starved() reads it again once the reserve can be allocated; the client
 * waits meanwhile, and keeps its connection. */
static void sess_starve(struct store *st, struct sess *s)
{
	if (s->starved)
		return;
	COFFER_LOG_RL(COFFER_LOG_WARN, "out of memory: client pid %d not read until it is back",
		      (int)s->pid);
	s->starved = 1;
	coffer__dl_add_tail(&st->starved, &s->starved_link);
	set_events(st, s);
}

/* Reads the starved sessions again whose reserve can be allocated now. */
static void retry_starved(struct store *st)
{
	while (!coffer__dl_empty(&st->starved)) {
		struct sess *s = COFFER_DL_ENTRY(st->starved.next, struct sess, starved_link);

		if (!big_reserve(s))
			return; /* still short: try again next round */
		coffer__dl_del(&s->starved_link);
		s->starved = 0;
		set_events(st, s); /* level-triggered: its waiting message is reported */
	}
}

/* Reads and handles up to SOCK_MSGS_PER_ROUND messages of @s while no reply waits for room.
 * @hup: the client hung up (no reply can reach it: nothing needs a reserve). */
static void sess_read(struct store *st, struct sess *s, bool hup)
{
	int i;

	for (i = 0; i < SOCK_MSGS_PER_ROUND && !s->doomed && !s->epollout && (!s->rd_eof || hup);
	     i++) {
		int fds[COFFER_MSG_FDS_MAX];
		unsigned int nfds = 0;
		long n;

		if (!hup && s->big == NULL && next_is_request(s->fd) && !big_reserve(s)) {
			sess_starve(st, s);
			return;
		}
		n = coffer__recv_fds(s->fd, st->rbuf, sizeof(st->rbuf), fds, &nfds,
				     COFFER_MSG_FDS_MAX, MSG_DONTWAIT);

		if (n == -EAGAIN)
			return;
		if (n == -EMFILE) {
			/* Its fds (a CHANNEL_OPEN doorbell) were dropped by the kernel: out of
			 * fds here, not the client's fault. The message is lost; say so. */
			send_error(st, s, -EMFILE, 0,
				   "store out of file descriptors: message with fds dropped");
			continue;
		}
		if (n == -EMSGSIZE) {
			send_error(st, s, -EPROTO, 1, "message too large or too many fds");
			return;
		}
		if (n == 0 && !hup && !at_eof(s->fd)) {
			send_error(st, s, -EPROTO, 1, "empty message");
			return;
		}
		if (n == 0 && !hup) {
			/* Half-closed (shutdown(SHUT_WR)): no more requests, but the ones it sent
			 * are answered, as a Unix-socket daemon answers a client that signals the
			 * end of its requests so (nc -N, a HTTP/1.0 client): its waiting gets, its
			 * queued replies and its channels, until it closes. Its references stay
			 * until then, so an object it was given cannot be evicted under it. It
			 * used to be closed here, and lost the replies of its waiting gets - unless
			 * its socket was full, which put the EOF off until the replies had gone out
			 * (test_half_closed_client_gets_its_replies). */
			COFFER_LOG_RL(
			    COFFER_LOG_INFO,
			    "client pid %d: end of requests (half-closed); served until it "
			    "closes",
			    (int)s->pid);
			s->rd_eof = 1;
			set_events(st, s);
			return;
		}
		if (n <= 0) {
			doom(s, n == 0 ? "disconnected" : "receive failed");
			return;
		}
		handle_msg(st, s, (size_t)n, fds, nfds);
	}
}

/* ---------------------------------------------------------------- sessions */

static void sess_kill(struct store *st, struct sess *s)
{
	unsigned int i;

	coffer__ot_owner_gone(st->ot, &s->owner);
	for (i = 0; i < COFFER_CHANNELS_MAX; i++)
		if (s->chans[i] != NULL)
			chan_close(st, s->chans[i]);
	(void)epoll_ctl(st->epfd, EPOLL_CTL_DEL, s->fd, NULL);
	close(s->fd);
	if (s->db != NULL)
		munmap(s->db, COFFER_DOORBELL_BYTES);
	if (s->bell_efd >= 0) {
		(void)epoll_ctl(st->epfd, EPOLL_CTL_DEL, s->bell_efd, NULL);
		close(s->bell_efd);
	}
	if (s->queued != NULL)
		outmsg_close_fds(s->queued);
	free(s->big);
	if (s->starved)
		coffer__dl_del(&s->starved_link);
	if (s->dirty)
		coffer__dl_del(&s->dirty_link);
	coffer__dl_del(&s->link);
	free(s->sock_reps);
	st->nclients--;
	COFFER_LOG_RL(COFFER_LOG_INFO, "client pid %d gone; %" PRIu64 " clients", (int)s->pid,
		      st->nclients);
	free(s);
}

/* Kill doomed sessions. Called only at safe points of the loop. */
static void reap(struct store *st)
{
	struct coffer__dl *p, *n;

	/* Only the doomed: the loop calls this every round, however many clients idle. */
	for (p = st->doomed.next; p != &st->doomed; p = n) {
		n = p->next;
		coffer__dl_del(p);
		sess_kill(st, COFFER_DL_ENTRY(p, struct sess, doomed_link));
	}
}

/* True when the peer of @fd had @gid among its supplementary groups when it connected
 * (SO_PEERGROUPS, Linux 4.13). */
static bool peer_in_group(int fd, gid_t gid)
{
	gid_t small[64], *g = small;
	socklen_t len = sizeof(small);
	bool in = false;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &len) != 0) {
		if (errno != ERANGE || (g = malloc(len)) == NULL) /* len: the size needed */
			return false;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &len) != 0)
			len = 0;
	}
	for (size_t i = 0; i < len / sizeof(*g) && !in; i++)
		in = g[i] == gid;
	if (g != small)
		free(g);
	return in;
}

static int peer_allowed(struct store *st, int fd, struct ucred *uc)
{
	socklen_t len = sizeof(*uc);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, uc, &len) != 0)
		return 0;
	if (uc->uid == geteuid())
		return 1;
	/* Group access is granted by giving the socket group permissions; a member of the
	 * store's group is admitted whether it is the client's primary group or one of its
	 * supplementary groups, as the file system admits it to the socket. */
	return (st->cfg->socket_mode & 0070) != 0 &&
	       (uc->gid == getegid() || peer_in_group(fd, getegid()));
}

static void do_accept(struct store *st)
{
	int i;

	for (i = 0; i < ACCEPTS_PER_ROUND; i++) {
		struct epoll_event ev;
		struct ucred uc;
		struct sess *s;
		int fd = accept4(st->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE) {
				/* libuv's trick: free the reserve fd, accept and close the
				 * connection (the client sees EOF at once), take the reserve
				 * back. Without a reserve, pause accepting for 100 ms so
				 * level-triggered epoll cannot spin. */
				if (st->reserve_fd >= 0) {
					close(st->reserve_fd);
					st->reserve_fd = -1;
					fd = accept4(st->lfd, NULL, NULL, SOCK_CLOEXEC);
					if (fd >= 0) {
						send_error_now(fd, -EMFILE,
							       "store out of file descriptors");
						close(fd);
					}
					st->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
					COFFER_LOG_RL(COFFER_LOG_WARN,
						      "out of file descriptors: refused a client");
					if (fd >= 0)
						continue;
				}
				st->listen_paused = 1;
				st->resume_listen_us = coffer__now_us() + 100000;
				(void)epoll_ctl(st->epfd, EPOLL_CTL_DEL, st->lfd, NULL);
				return;
			}
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				COFFER_LOG(COFFER_LOG_WARN, "accept: %s", strerror(errno));
			return;
		}
		if (!peer_allowed(st, fd, &uc)) {
			COFFER_LOG_RL(COFFER_LOG_WARN,
				      "refused client pid %d uid %u gid %u: not the store's user%s",
				      (int)uc.pid, (unsigned int)uc.uid, (unsigned int)uc.gid,
				      st->cfg->socket_mode & 0070
					  ? " nor in its group"
					  : " (--socket-mode admits no group)");
			send_error_now(fd, -EACCES,
				       "not the store's user or group (see --socket-mode)");
			close(fd);
			continue;
		}
		/* with the reserve for its small replies: nothing later needs memory to answer */
		s = calloc(1, sizeof(*s) + sizeof(struct outmsg) + REPLY_SMALL_MAX);
		if (s == NULL) {
			/* say why, as for a client refused for want of fds, instead of bare EOF */
			COFFER_LOG_RL(COFFER_LOG_WARN, "out of memory: refused client pid %d",
				      (int)uc.pid);
			send_error_now(fd, -ENOMEM, "store out of memory");
			close(fd);
			continue;
		}
		s->kind = K_SESS;
		s->id = ++st->next_sess_id;
		s->fd = fd;
		s->bell_efd = -1;
		s->pid = uc.pid;
		s->uid = uc.uid;
		coffer__ot_owner_init(&s->owner);
		s->small = (struct outmsg *)(void *)(s + 1);
		s->small->cap = REPLY_SMALL_MAX;
		coffer__dl_init(&s->starved_link);
		coffer__dl_init(&s->dirty_link);
		coffer__dl_init(&s->doomed_link);
		s->doomed_list = &st->doomed;
		ev.events = EPOLLIN;
		ev.data.ptr = &s->kind;
		if (epoll_ctl(st->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
			int err = errno; /* ENOSPC (max_user_watches) or ENOMEM */

			COFFER_LOG_RL(COFFER_LOG_WARN, "epoll_ctl: %s: refused client pid %d",
				      strerror(err), (int)uc.pid);
			send_error_now(fd, -err, "store cannot watch another connection");
			close(fd);
			free(s);
			continue;
		}
		coffer__dl_add_tail(&st->sessions, &s->link);
		st->nclients++;
		COFFER_LOG_RL(COFFER_LOG_INFO, "client pid %d connected; %" PRIu64 " clients",
			      (int)s->pid, st->nclients);
	}
}

/* ---------------------------------------------------------------- loop */

/* While the loop spins after activity, it polls the rung rings every round but calls
 * epoll_wait(0) (sockets, listener, signals) only this often, in microseconds. */
#define STORE_EPOLL_EVERY_US 20u
/*
 * ... and gives its core away (sched_yield) once it has found no work in any ring for this
 * long, then at most this often. A client that runs on the store's CPU (more busy threads
 * than cores) gets that CPU within this time of its reply. The store never yields while
 * some client keeps it busy: under Linux's EEVDF scheduler every sched_yield() moves the
 * caller's deadline back by a slice, so a store that yielded after each reply to a client
 * on its CPU, and every 5 us without work, held 0.19 of a CPU while two client threads
 * spun for it on two cores: 0.07 M ops/s at batch 1 where one thread alone made 0.35.
 * Keeping the core, the store serves the client on the other core at full speed (0.34 M
 * ops/s), and the one on its own CPU no slower than before (38k against 35k).
 */
#define STORE_YIELD_IDLE_US 5u
/* A connection whose rounds found no doorbell bit for this long goes cold: the store tells
 * it that it sleeps (its page's store_sleeping) and stops loading its doorbell words, so an
 * idle connection costs a busy store's rounds nothing; its next request rings the eventfd,
 * which the loop sees within STORE_EPOLL_EVERY_US, and warms it again. */
#define STORE_COLD_US 1000u
/* How long the loop sleeps at most while a channel waits for its client to read replies
 * (try_sleep(): stalled), in milliseconds: the client frees room without a doorbell; and
 * while a session is starved (sess_starve()): memory comes back without an event. */
#define STORE_STALL_POLL_MS 10

static inline void store_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

static void flush_dirty(struct store *st)
{
	while (!coffer__dl_empty(&st->dirty_chans)) {
		struct chan *c = COFFER_DL_ENTRY(st->dirty_chans.next, struct chan, dirty_link);

		coffer__dl_del(&c->dirty_link);
		c->dirty = 0;
		if (c->s->doomed)
			continue;
		chan_publish(st, c);
	}
	while (!coffer__dl_empty(&st->dirty_sess)) {
		struct sess *s = COFFER_DL_ENTRY(st->dirty_sess.next, struct sess, dirty_link);

		coffer__dl_del(&s->dirty_link);
		s->dirty = 0;
		flush_sock_reps(st, s);
	}
}

/*
 * Which of @s's channels to poll this round, into @chans (CHAN_MASK_WORDS words): those whose
 * doorbell bits the client set since the last round (each non-zero word exchanged with 0),
 * those left with work last round, and every open one when @sweep. The full fence after the
 * exchanges pairs with the client's fence between publishing req.prod and looking at its bit
 * (proto.h): a bit it found set is one we exchange only now, so its prod is visible to the
 * loads that follow. Return: whether any channel is to be polled.
 */
static bool sess_rung(struct sess *s, bool sweep, uint64_t *chans)
{
	unsigned int nw = s->nwords;
	bool rung = false, any = false;

	memcpy(chans, sweep ? s->open : s->pending, nw * sizeof(*chans));
	for (unsigned int w = 0; w < COFFER_DOORBELL_WORDS; w++) {
		uint64_t *word = &s->db->word[w].bits, v;

		if (!(s->db_used & (1u << w)) || __atomic_load_n(word, __ATOMIC_RELAXED) == 0)
			continue;
		v = __atomic_exchange_n(word, 0, __ATOMIC_SEQ_CST);
		rung = true;
		/* bit b of word w is channel b * WORDS + w; bits of channels the client does
		 * not have are junk and drop out of the mask below */
		for (; v != 0; v &= v - 1) {
			uint32_t id = (uint32_t)__builtin_ctzll(v) * COFFER_DOORBELL_WORDS + w;

			if (id < nw * 64)
				mask_set(chans, id);
		}
	}
	if (rung)
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
	else if (s->bell) /* rang without a bit: a client that skips them, served anyway */
		memcpy(chans, s->open, nw * sizeof(*chans));
	s->bell = 0;
	for (unsigned int w = 0; w < nw; w++) {
		chans[w] &= s->open[w];
		any |= chans[w] != 0;
	}
	return any;
}

/* A cold session rang (or a sweep is due): poll its words again, and let it spin. */
static void sess_warm(struct store *st, struct sess *s, uint64_t now)
{
	s->cold = 0;
	s->last_work_us = now;
	if (!st->sleeping)
		__atomic_store_n(&s->db->store_sleeping, 0, __ATOMIC_RELAXED); /* a hint now */
}

/*
 * Makes @s cold (STORE_COLD_US): the same handshake as going to sleep (try_sleep()), for one
 * connection. store_sleeping = 1, full fence, re-read its doorbell words: a bit set means it
 * published meanwhile (stay warm, served next round); otherwise every later publish of its
 * sees the flag and rings the eventfd. Called with nothing pending for it.
 */
static void sess_try_cold(struct sess *s)
{
	__atomic_store_n(&s->db->store_sleeping, 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	for (unsigned int w = 0; w < COFFER_DOORBELL_WORDS; w++)
		if ((s->db_used & (1u << w)) &&
		    __atomic_load_n(&s->db->word[w].bits, __ATOMIC_RELAXED) != 0) {
			__atomic_store_n(&s->db->store_sleeping, 0, __ATOMIC_RELAXED);
			return;
		}
	s->cold = 1;
}

/*
 * One round over the clients whose channels have work (sess_rung()). Fairness is per client:
 * each client may have at most `budget` requests taken per round, spread over its channels
 * from a first channel that moves on each round (to the one after the first it polled), so
 * a client with many channels or a flooded ring cannot starve the others (what it has left
 * is polled again next round); the client list rotates by one each round so no client is
 * always first. An idle channel costs nothing here, an idle client one load per doorbell
 * word it uses.
 */
static unsigned int poll_rings(struct store *st, uint64_t now)
{
	bool sweep = st->sweep;
	unsigned int work = 0;
	struct coffer__dl *p;

	if (coffer__dl_empty(&st->sessions))
		return 0;
	st->sweep = 0;
	for (p = st->sessions.next; p != &st->sessions; p = p->next) {
		struct sess *s = COFFER_DL_ENTRY(p, struct sess, link);
		unsigned int budget = st->cfg->budget, nw = s->nwords, first;
		uint64_t chans[CHAN_MASK_WORDS];
		bool visited = false;

		if (s->doomed || nw == 0)
			continue;
		if (s->cold) {
			if (!s->bell && !sweep)
				continue; /* it rings when it publishes */
			sess_warm(st, s, now);
		}
		if (!sess_rung(s, sweep, chans)) {
			if (now - s->last_work_us >= STORE_COLD_US)
				sess_try_cold(s);
			continue;
		}
		s->last_work_us = now;
		memset(s->pending, 0, nw * sizeof(*s->pending));
		memset(s->stalled, 0, nw * sizeof(*s->stalled));
		/* from bit `first` up, wrapping round to the bits below it (k == nw) */
		first = s->rr % (nw * 64);
		for (unsigned int k = 0; k <= nw; k++) {
			unsigned int w = (first / 64 + k) % nw, sh = first % 64;
			uint64_t bits = chans[w];

			if (k == 0)
				bits &= ~UINT64_C(0) << sh;
			else if (k == nw)
				bits &= sh ? ~(~UINT64_C(0) << sh) : 0;
			for (; bits != 0; bits &= bits - 1) {
				uint32_t id = w * 64 + (uint32_t)__builtin_ctzll(bits);
				bool more = false, stalled = false;
				unsigned int n;

				if (!visited) {
					s->rr = id + 1;
					visited = true;
				}
				if (budget > 0 && !s->doomed) {
					n = chan_drain(st, s->chans[id], budget, &more, &stalled);
					budget -= n;
					work += n;
				} else {
					more = true;
				}
				if (more)
					mask_set(s->pending, id);
				if (stalled)
					mask_set(s->stalled, id);
			}
		}
	}
	p = st->sessions.next;
	coffer__dl_del(p);
	coffer__dl_add_tail(&st->sessions, p);
	return work;
}

/*
 * Tells every connection which CPU the loop runs on (its doorbell page's store_cpu = 1 + cpu,
 * written only when it changed): a client spinning for replies on the same CPU yields it to
 * us at once.
 */
static void set_cpu(struct store *st)
{
	int cpu = sched_getcpu();
	uint32_t v = cpu >= 0 ? (uint32_t)cpu + 1 : 0;
	struct coffer__dl *p;

	if (v == st->cpu)
		return;
	st->cpu = v;
	for (p = st->sessions.next; p != &st->sessions; p = p->next) {
		struct sess *s = COFFER_DL_ENTRY(p, struct sess, link);

		if (s->db != NULL)
			__atomic_store_n(&s->db->store_cpu, v, __ATOMIC_RELAXED); /* a hint */
	}
}

/* store_sleeping = @v on every connection's doorbell page: a line per connection, not per
 * channel (proto.h). */
static void set_sleeping(struct store *st, uint32_t v)
{
	struct coffer__dl *p;

	for (p = st->sessions.next; p != &st->sessions; p = p->next) {
		struct sess *s = COFFER_DL_ENTRY(p, struct sess, link);

		/* relaxed: ordered by the seq_cst fence in try_sleep() (proto.h handshake); a
		 * cold session keeps its flag set across the store's wake-ups */
		if (s->db != NULL && !(v == 0 && s->cold))
			__atomic_store_n(&s->db->store_sleeping, v, __ATOMIC_RELAXED);
	}
}

/* Announce sleep to every connection; false (flags cleared) when some channel has work:
 * a doorbell bit set since the last round, or work left over (pending). */
static int try_sleep(struct store *st)
{
	struct coffer__dl *p;

	st->stalled = 0;
	set_sleeping(st, 1);
	/* seq_cst: the flag stores above before the doorbell loads below; pairs with the
	 * client's fence between publishing prod (then its bit) and reading the flag. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	for (p = st->sessions.next; p != &st->sessions; p = p->next) {
		struct sess *s = COFFER_DL_ENTRY(p, struct sess, link);
		bool work = false;

		if (s->doomed || s->nwords == 0 || s->cold) /* cold: it rings anyway */
			continue;
		/* A channel stalled on a full reply ring is no reason to stay awake: its client
		 * frees room without telling us (libcoffer never has more requests out than
		 * reply slots; a client that does would keep us spinning for ever). The sleep
		 * is bounded instead (STORE_STALL_POLL_MS). */
		for (unsigned int w = 0; w < s->nwords; w++) {
			work |= (s->pending[w] & ~s->stalled[w]) != 0;
			st->stalled |= s->stalled[w] != 0;
		}
		for (unsigned int w = 0; w < COFFER_DOORBELL_WORDS; w++)
			work |= (s->db_used & (1u << w)) &&
				__atomic_load_n(&s->db->word[w].bits, __ATOMIC_RELAXED) != 0;
		if (work) {
			set_sleeping(st, 0);
			return 0;
		}
	}
	return 1;
}

/* A connection's request doorbell rang: its session (if still there) is looked at next
 * round, and swept when it set no doorbell bit. */
static void bell_rang(struct store *st, uint64_t id)
{
	struct coffer__dl *p;

	for (p = st->sessions.next; p != &st->sessions; p = p->next) {
		struct sess *s = COFFER_DL_ENTRY(p, struct sess, link);

		if (s->id == id) {
			s->bell = 1;
			return;
		}
	}
}

static void dispatch(struct store *st, struct epoll_event *ev)
{
	int kind;

	if (ev->data.u64 & 1) { /* a session's doorbell, named by its id (sess_bells()) */
		bell_rang(st, ev->data.u64 >> 1);
		return;
	}
	kind = *(int *)ev->data.ptr;

	if (kind == K_LISTEN) {
		do_accept(st);
	} else if (kind == K_SIGNAL) {
		struct signalfd_siginfo si;

		if (read(st->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
			COFFER_LOG(COFFER_LOG_NOTICE, "signal %u: shutting down", si.ssi_signo);
			st->stop = 1;
		}
	} else if (kind == K_SESS) {
		struct sess *s = COFFER_DL_ENTRY(ev->data.ptr, struct sess, kind);

		if (s->doomed)
			return;
		if (ev->events & EPOLLOUT)
			sess_flush_outq(st, s);
		if (ev->events & (EPOLLIN | EPOLLHUP | EPOLLERR))
			sess_read(st, s, (ev->events & (EPOLLHUP | EPOLLERR)) != 0);
		if ((ev->events & (EPOLLHUP | EPOLLERR)) && s->epollout)
			doom(s, "hung up");
	}
}

/* Whether a stop signal came on @sigfd within @ms (it is read and logged then). */
static bool stop_signalled(int sigfd, int ms)
{
	struct pollfd p = {.fd = sigfd, .events = POLLIN};
	struct signalfd_siginfo si;

	if (sigfd < 0) {
		usleep((useconds_t)ms * 1000);
		return false;
	}
	if (poll(&p, 1, ms) <= 0 || read(sigfd, &si, sizeof(si)) != (ssize_t)sizeof(si))
		return false;
	COFFER_LOG(COFFER_LOG_NOTICE, "signal %u: shutting down", si.ssi_signo);
	return true;
}

/*
 * Who holds the flock(2) lock on the directory @fd names, from /proc/locks (a FLOCK line on
 * its device and inode that is not a waiter's "->" line): its pid, its command name in
 * @comm and whether it is stopped (SIGSTOP, ^Z; state T or t in /proc/PID/stat). Return: the
 * pid, or 0 where it cannot tell (no /proc, another pid namespace's holder, or the lock was
 * dropped meanwhile). The pid is the process that took the lock; a child that inherited its
 * descriptor may hold it now, which /proc/locks cannot tell.
 */
static pid_t lock_holder(int fd, char *comm, size_t len, bool *stopped)
{
	char line[256], path[64], stat[512];
	unsigned int maj, min;
	unsigned long ino;
	struct stat sb;
	pid_t pid = 0;
	FILE *f;

	snprintf(comm, len, "?");
	*stopped = false;
	if (fstat(fd, &sb) != 0 || (f = fopen("/proc/locks", "re")) == NULL)
		return 0;
	while (pid == 0 && fgets(line, sizeof(line), f) != NULL) {
		int p;

		if (sscanf(line, "%*d: FLOCK %*s %*s %d %x:%x:%lu", &p, &maj, &min, &ino) == 4 &&
		    p > 0 && ino == (unsigned long)sb.st_ino && maj == major(sb.st_dev) &&
		    min == minor(sb.st_dev))
			pid = p;
	}
	fclose(f);
	if (pid == 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((f = fopen(path, "re")) != NULL) {
		size_t n = fread(stat, 1, sizeof(stat) - 1, f);
		char *open, *close;

		fclose(f);
		stat[n] = '\0';
		open = strchr(stat, '(');
		close = strrchr(stat, ')'); /* "pid (comm) S ...": comm may hold ')' */
		if (open != NULL && close != NULL && close > open) {
			snprintf(comm, len, "%.*s", (int)(close - open - 1), open + 1);
			*stopped = close[1] == ' ' && (close[2] == 'T' || close[2] == 't');
		}
	}
	return pid;
}

/* How long a starting store waits for another one starting in the same directory. */
#define LISTEN_LOCK_WAIT_MS 5000

/*
 * Locks the directory of @path (flock(2), exclusive) around the stale-socket check, the
 * unlink, the bind and the listen of make_listener(). Without it two stores starting at once
 * on one stale path both found it stale, and the later unlink removed the socket the other
 * had just bound: that store ran on, ready, and no client could reach it
 * (test_concurrent_start_one_reachable). With it the second finds the first listening and
 * refuses. Waits up to LISTEN_LOCK_WAIT_MS for a store starting beside it (one stopped in
 * the middle of its start holds the lock longer). The wait watches @sigfd (the store's
 * signalfd: SIGTERM, SIGINT, SIGHUP are blocked by then), so a stop asked for meanwhile is
 * acted on at once; it used to come only after the whole wait, and then as a refusal.
 * Return: the locked directory's fd (closing it unlocks); -1 where the directory cannot be
 * locked (cannot be opened, or flock(2) is not supported: go on without, as before); -2
 * after the wait (logged; the caller refuses); -3 when a stop signal came first (logged;
 * the caller stops, nothing bound; test_stop_while_waiting_for_dir_lock).
 */
static int listen_lock(const char *path, int sigfd)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	const char *slash = strrchr(path, '/');
	int fd;

	if (slash == NULL)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	for (int ms = 0; flock(fd, LOCK_EX | LOCK_NB) != 0; ms += 10) {
		if (errno != EWOULDBLOCK && errno != EINTR) {
			close(fd);
			return -1;
		}
		if (ms >= LISTEN_LOCK_WAIT_MS) {
			char comm[32];
			bool stopped;
			pid_t holder = lock_holder(fd, comm, sizeof(comm), &stopped);

			/* Name the lock: any program may hold one on the directory (flock(1) on
			 * /tmp, a backup tool), and blaming a coffer-store that does not exist
			 * sent the reader looking for one (test_start_dir_locked_by_other). Name
			 * its holder where /proc/locks tells: a coffer-store stopped (SIGSTOP)
			 * in the middle of its start holds it until continued or killed, and the
			 * reader needs its pid (test_start_beside_store_stopped_in_start). */
			if (holder > 0)
				COFFER_LOG(COFFER_LOG_ERR,
					   "%s has been locked (flock) for %d ms by pid %d (%s%s): "
					   "another coffer-store starting there, or another "
					   "program holding a lock on the directory; refusing",
					   dir, LISTEN_LOCK_WAIT_MS, (int)holder, comm,
					   stopped ? ", stopped" : "");
			else
				COFFER_LOG(COFFER_LOG_ERR,
					   "%s has been locked (flock) for %d ms: another "
					   "coffer-store starting there, or another program "
					   "holding a lock on the directory; refusing",
					   dir, LISTEN_LOCK_WAIT_MS);
			close(fd);
			return -2;
		}
		if (stop_signalled(sigfd, 10)) {
			close(fd);
			return -3;
		}
	}
	return fd;
}

/* make_listener()'s work, under the directory's lock. */
static int bind_listener(struct store *st)
{
	const char *path = st->cfg->socket_path;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct epoll_event ev;
	struct stat sb;
	mode_t old;
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		COFFER_LOG(COFFER_LOG_ERR, "socket path too long (max %zu bytes): %s",
			   sizeof(sa.sun_path) - 1, path);
		return -1;
	}
	strcpy(sa.sun_path, path);
	if (lstat(path, &sb) == 0) {
		if (!S_ISSOCK(sb.st_mode)) {
			COFFER_LOG(COFFER_LOG_ERR, "%s exists and is not a socket; refusing", path);
			return -1;
		}
		int err;

		/* Non-blocking: on a listener whose backlog is full (a store stopped or hung with
		 * clients queued) a blocking connect(2) waits for a slot, forever, and we hold the
		 * directory's lock (listen_lock()): this start hung, and every other store starting
		 * in the directory refused after LISTEN_LOCK_WAIT_MS
		 * (test_start_beside_full_listener). EAGAIN is that listener. */
		fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			COFFER_LOG(COFFER_LOG_ERR, "socket: %s", strerror(errno));
			return -1;
		}
		err = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 ? 0 : errno;
		close(fd);
		if (err == 0 || err == EAGAIN) {
			COFFER_LOG(COFFER_LOG_ERR, "another coffer-store is listening on %s%s",
				   path,
				   err == EAGAIN ? " (its backlog is full: stopped or hung?)" : "");
			return -1;
		}
		/* Only a socket nobody listens on is stale. Anything else (EPROTOTYPE: another
		 * program's stream or datagram socket; EACCES) belongs to someone alive. */
		if (err != ECONNREFUSED) {
			COFFER_LOG(
			    COFFER_LOG_ERR,
			    "%s is in use by another program (connect: %s); refusing to replace "
			    "it",
			    path, strerror(err));
			return -1;
		}
		unlink(path); /* stale socket of a store that died */
	}
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		COFFER_LOG(COFFER_LOG_ERR, "socket: %s", strerror(errno));
		return -1;
	}
	/* The mode applies from the first moment the path exists (umask), then exactly. */
	old = umask(0777 & ~st->cfg->socket_mode);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		umask(old);
		COFFER_LOG(COFFER_LOG_ERR, "bind %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	umask(old);
	if (lstat(path, &sb) != 0 || chmod(path, st->cfg->socket_mode) != 0 ||
	    listen(fd, 128) != 0) {
		COFFER_LOG(COFFER_LOG_ERR, "listen %s: %s", path, strerror(errno));
		close(fd);
		unlink(path);
		return -1;
	}
	st->lfd = fd;
	st->ldev = sb.st_dev;
	st->lino = sb.st_ino;
	st->lkind = K_LISTEN;
	ev.events = EPOLLIN;
	ev.data.ptr = &st->lkind;
	if (epoll_ctl(st->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
		COFFER_LOG(COFFER_LOG_ERR, "epoll: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* Binds and listens on the socket path (a stale socket there is replaced; anything else is
 * refused), under listen_lock(). Return: 0, or -1 (logged; st->stop set when a stop signal
 * ended the wait for the lock). */
static int make_listener(struct store *st)
{
	int lock = listen_lock(st->cfg->socket_path, st->sigfd), rc;

	if (lock == -3)
		st->stop = 1;
	if (lock == -2 || lock == -3)
		return -1;
	rc = bind_listener(st);
	if (lock >= 0)
		close(lock); /* unlocks */
	return rc;
}

static int setup(struct store *st)
{
	char err[256];
	struct epoll_event ev;
	sigset_t set;
	int rc;

	rc = coffer__shm_create(&st->shm, st->cfg->arena_bytes, st->cfg->hugedir,
				st->cfg->hugepages, err, sizeof(err));
	if (rc != 0) {
		COFFER_LOG(COFFER_LOG_ERR, "cannot create the arena: %s", err);
		return -1;
	}
	rc = coffer__ot_create(&st->ot, st->shm.size, st->shm.segment, deliver, st);
	if (rc != 0) {
		COFFER_LOG(COFFER_LOG_ERR, "cannot create the object table: %s", strerror(-rc));
		return -1;
	}
	rc = coffer__shm_index_create(&st->index, st->shm.size, err, sizeof(err));
	if (rc != 0) {
		COFFER_LOG(COFFER_LOG_ERR, "cannot create the object index: %s", err);
		return -1;
	}
	coffer__ot_set_index(st->ot, st->index.base, st->index.access, st->index.slots,
			     st->index.seed);
	st->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (st->epfd < 0) {
		COFFER_LOG(COFFER_LOG_ERR, "epoll_create1: %s", strerror(errno));
		return -1;
	}
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP); /* its terminal went away: stop as cleanly (unlink the socket) */
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN); /* belt and braces: every send uses MSG_NOSIGNAL */
	st->sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (st->sigfd < 0) {
		COFFER_LOG(COFFER_LOG_ERR, "signalfd: %s", strerror(errno));
		return -1;
	}
	st->sigkind = K_SIGNAL;
	ev.events = EPOLLIN;
	ev.data.ptr = &st->sigkind;
	if (epoll_ctl(st->epfd, EPOLL_CTL_ADD, st->sigfd, &ev) != 0)
		return -1;
	wake_timer_setup(st);
	st->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	return make_listener(st);
}

static void teardown(struct store *st)
{
	struct coffer__dl *p;

	for (p = st->sessions.next; p != &st->sessions; p = p->next)
		doom(COFFER_DL_ENTRY(p, struct sess, link), "store stopping");
	reap(st);
	if (st->lfd >= 0) {
		struct stat sb;

		/* Unlink while still listening, and only the socket file this store bound. A
		 * successor started on the same path meanwhile finds a live listener and refuses
		 * (make_listener()); closing first let it find the path stale between the close
		 * and the unlink, take it, and then lose its new socket to this unlink: a store
		 * running that no client could reach (test_restart_keeps_successor_socket). A
		 * file someone else put at the path after removing ours is theirs, kept. */
		if (lstat(st->cfg->socket_path, &sb) == 0 && sb.st_dev == st->ldev &&
		    sb.st_ino == st->lino)
			unlink(st->cfg->socket_path);
		close(st->lfd);
	}
	if (st->sigfd >= 0)
		close(st->sigfd);
	if (st->wake_timer_ok) {
		timer_delete(st->wake_timer);
		st->wake_timer_ok = false;
	}
	if (st->epfd >= 0)
		close(st->epfd);
	if (st->reserve_fd >= 0)
		close(st->reserve_fd);
	coffer__ot_destroy(st->ot);
	coffer__shm_index_destroy(&st->index);
	coffer__shm_destroy(&st->shm);
}

int coffer__store_run(const struct coffer__store_cfg *cfg)
{
	struct epoll_event evs[64];
	uint64_t last_work, last_epoll = 0, last_yield = 0, last_sweep = 0;
	struct store *st;
	int rc = 0;

	st = calloc(1, sizeof(*st));
	if (st == NULL)
		return 1;
	st->cfg = cfg;
	st->epfd = st->lfd = st->sigfd = st->reserve_fd = -1;
	st->shm.fd = -1;
	st->index.fd_ro = -1;
	st->index.fd_access = -1;
	coffer__dl_init(&st->sessions);
	coffer__dl_init(&st->dirty_chans);
	coffer__dl_init(&st->dirty_sess);
	coffer__dl_init(&st->starved);
	coffer__dl_init(&st->doomed);
	if (setup(st) != 0) {
		rc = st->stop ? 0 : 1; /* stopped while starting (signal): a clean stop */
		teardown(st);
		free(st);
		if (rc == 0)
			COFFER_LOG(COFFER_LOG_NOTICE, "stopped");
		return rc;
	}
	COFFER_LOG(COFFER_LOG_NOTICE, "arena %" PRIu64 " bytes, %s, segment %08x, %s", st->shm.size,
		   st->shm.hugepages ? "hugepages" : "ordinary pages", st->shm.segment,
		   st->shm.sealed ? "sealed" : "not sealed");
	/* Printed at every log level: scripts and tests wait for this line. */
	fprintf(stderr, "coffer-store: ready socket=%s arena_bytes=%" PRIu64 " hugepages=%d\n",
		cfg->socket_path, st->shm.size, st->shm.hugepages);
	last_work = coffer__now_us();
	while (!st->stop) {
		uint64_t now = coffer__now_us(), dl, log_dl;
		unsigned int work;
		int timeout = 0, n, i;
		bool spinning;

		coffer__ot_expire(st->ot, now);
		retry_starved(st);
		if (now - last_sweep >= cfg->sweep_us) {
			st->sweep = 1; /* serves a client that never sets its doorbell bits */
			last_sweep = now;
		}
		if (st->listen_paused && now >= st->resume_listen_us) {
			struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &st->lkind};

			if (st->reserve_fd < 0) /* lost while out of fds: take it back */
				st->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
			if (epoll_ctl(st->epfd, EPOLL_CTL_ADD, st->lfd, &ev) == 0)
				st->listen_paused = 0;
		}
		work = poll_rings(st, now);
		flush_dirty(st);
		reap(st);
		if (work > 0)
			last_work = now;
		/* While spinning, look at the sockets only every STORE_EPOLL_EVERY_US: an
		 * epoll_wait() per round cost most of the loop (measured: 70% of the store's
		 * time in the syscall at batch 32, and a ring round trip waited for it). */
		spinning = now - last_work < cfg->spin_us || now < st->spin_until;
		if (spinning && now - last_epoll < STORE_EPOLL_EVERY_US) {
			/* Idle for a while: a client woken on this core (more runnable threads
			 * than cores) would otherwise wait for the whole spin to end (measured
			 * with store and client pinned to one core: 62 us per blocking call). */
			if (work == 0 && now - last_work >= STORE_YIELD_IDLE_US &&
			    now - last_yield >= STORE_YIELD_IDLE_US) {
				sched_yield();
				last_yield = coffer__now_us();
				set_cpu(st);
			}
			store_cpu_relax();
			continue;
		}
		if (work == 0 && !spinning && try_sleep(st)) {
			st->sleeping = 1;
			dl = coffer__ot_next_deadline(st->ot);
			if (st->listen_paused && st->resume_listen_us < dl)
				dl = st->resume_listen_us;
			log_dl = coffer__log_rl_deadline(); /* a flood's count to log */
			if (log_dl < dl)
				dl = log_dl;
			if (dl == UINT64_MAX)
				timeout = -1;
			else if (dl <= now)
				timeout = 0;
			else /* a get's timeout may be days: clamp, never wrap negative */
				timeout = (dl - now) / 1000 >= INT_MAX
					      ? INT_MAX
					      : (int)((dl - now + 999) / 1000);
			/* stalled: the client frees room without a doorbell; starved: memory
			 * comes back without an event */
			if ((st->stalled || !coffer__dl_empty(&st->starved)) &&
			    (timeout < 0 || timeout > STORE_STALL_POLL_MS))
				timeout = STORE_STALL_POLL_MS;
		}
		n = epoll_wait(st->epfd, evs, 64, timeout);
		last_epoll = coffer__now_us();
		set_cpu(st);
		if (st->sleeping) {
			set_sleeping(st, 0);
			st->sleeping = 0;
			last_work = coffer__now_us(); /* spin a little after each wake-up */
		}
		if (n < 0 && errno != EINTR) {
			COFFER_LOG(COFFER_LOG_ERR, "epoll_wait: %s", strerror(errno));
			rc = 1;
			break;
		}
		for (i = 0; i < n; i++)
			dispatch(st, &evs[i]);
		flush_dirty(st);
		reap(st);
		coffer__log_rl_flush(last_epoll); /* counts of floods that ended */
	}
	teardown(st);
	coffer__log_rl_flush(UINT64_MAX);
	free(st);
	COFFER_LOG(COFFER_LOG_NOTICE, "stopped");
	return rc;
}
