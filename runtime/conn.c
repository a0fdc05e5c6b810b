/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * runtime/conn.c - connections to coffer-store: connect (HELLO, arena fd), the control
 * socket, liveness, disconnect, flush, statistics, and fork.
 *
 * Design note.
 *
 * One SOCK_SEQPACKET socket per connection carries only control traffic: HELLO (the arena fd
 * arrives once), CHANNEL_OPEN/CLOSE, QUERY. It is protected by ctl_lock (a mutex: exchanges
 * block on the socket); the data path never touches it (channel.c). The arena is mapped
 * once per process and keyed by its segment id and the identity (device, inode) of the
 * arena file, never by fd number (fd numbers are reused) nor by the id alone (32 random bits
 * of the store's): a second connection to the same store shares the mapping (refcounted
 * under g_seg_lock).
 *
 * Liveness: a monitor thread per connection sleeps in poll() on the socket with no events
 * requested (the kernel still reports POLLHUP/POLLERR) and on a private eventfd. When the
 * store dies (or a ring shows a protocol violation, reported by coffer__conn_fail() from any
 * context) the monitor marks the connection dead and completes every pending event with
 * -ENOTCONN: a dead store never leaves a poller waiting on a doorbell nobody will ring. A
 * stopped or wedged store keeps its socket open, so the monitor also wakes every
 * store_timeout_ms (COFFER_STORE_TIMEOUT_MS, default 10 s): when requests went a whole
 * interval without a reply it probes the store with a QUERY, and one not answered in time
 * fails the connection (-ETIMEDOUT, then -ENOTCONN for every pending event), as an RPC
 * timeout does in DAOS (CRT_TIMEOUT). Otherwise the monitor costs no CPU.
 *
 * Locks, in order: conn->chan_lock -> conn->ctl_lock; conn->chan_lock ->
 * coffer__client_lock; g_seg_lock is a leaf. Disconnect stops the monitor before taking chan_lock
 * (the monitor takes chan_lock to fail channels), so joining it cannot deadlock.
 *
 * Memory ordering: conn->dead is written with a relaxed CAS (it is a hint for new requests;
 * the channel's `dead`, set under its submit lock, is what orders failure against submits).
 *
 * Lifetime: the connection record lives in the handle hash (COFFER_HTYPE_CONN); lookups on
 * the data path are RCU-only (no refcount traffic). Its memory and its arena reference are
 * released by hl_free after coffer_disconnect() unlinked it, its last reference went, and a
 * grace period passed.
 *
 * Fork: a child inherits the socket and the rings of its parent's connections but not the
 * threads behind them. The child marks them dead and forked (closes its copy of the socket,
 * so that the parent's disconnect or death still ends the session in the store, and never
 * touches the rings) and completes its copies of the requests in flight with -ENOTCONN, as
 * a dead connection does (the parent's copies are answered in the parent); it must
 * coffer_connect() again (fio, for instance, forks its jobs).
 *
 * Source: Plasma's client (fd passed once, mapping cached by store-assigned id; its lesson
 * that nothing the store sends may crash the client), libuv's async handle for the wakeup fd.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "runtime/client.h"
#include "runtime/env.h"
#include "runtime/nocancel.h"
#include "runtime/proto_util.h"
#include "runtime/rcu.h"

/* Default publish threshold (requests queued before the ring's prod is published). */
#define CONN_BATCH_DEFAULT 32u

pthread_mutex_t coffer__client_lock = PTHREAD_MUTEX_INITIALIZER;

static struct coffer__conn *g_conns; /* under coffer__client_lock */
/* Connections coffer_connect() is setting up (socket open, not on g_conns yet): a fork child
 * must close their sockets too. Under coffer__client_lock, linked through gnext. */
static struct coffer__conn *g_connecting;
/*
 * The arena mappings have a lock of their own, a leaf, because a connection's last reference
 * may be dropped by an RCU callback on the call_rcu worker or by a thread freeing a reclaimed
 * batch (conn_free -> seg_put): fork-prepare waits for both (rcu.c) after taking
 * coffer__client_lock, so nothing they run may take that lock. g_seg_lock is taken in
 * rcu.c's step 3, after the workers are parked (coffer__conn_seg_atfork_*).
 */
static pthread_mutex_t g_seg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct coffer__seg *g_segs; /* under g_seg_lock */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

#define CONN_OF(l) ((struct coffer__conn *)((char *)(l)-offsetof(struct coffer__conn, link)))

/* ---- fork ------------------------------------------------------------------------------ */

/*
 * These handlers are installed by the first connect, after rcu.c's: their prepare runs
 * first (POSIX runs prepare handlers in reverse order of installation), so
 * coffer__client_lock is held while rcu.c's prepare waits for the call_rcu workers and for
 * threads freeing reclaimed batches. Hence no record's free may take coffer__client_lock
 * (conn_free takes only g_seg_lock, which rcu.c's prepare takes after that wait).
 */
static void conn_atfork_prepare(void)
{
	pthread_mutex_lock(&coffer__client_lock);
}

static void conn_atfork_parent(void)
{
	pthread_mutex_unlock(&coffer__client_lock);
}

/* Unlinks @conn from the list at @head. Context: coffer__client_lock held. */
static void conn_unlink_locked(struct coffer__conn **head, struct coffer__conn *conn)
{
	for (struct coffer__conn **pp = head; *pp; pp = &(*pp)->gnext)
		if (*pp == conn) {
			*pp = conn->gnext;
			break;
		}
}

static void conn_fork_child(struct coffer__conn *c)
{
	c->forked = true;
	c->monitor_started = false;
	atomic_store_explicit(&c->dead, -ENOTCONN, memory_order_relaxed);
	pthread_mutex_init(&c->ctl_lock, NULL);
	pthread_mutex_init(&c->chan_lock, NULL);
	/* The socket is the store's only sign of the parent's session: a copy kept open here
	 * would keep the parent's references and unsealed objects in the store after the
	 * parent disconnected or died, for as long as this child lives
	 * (test_fork_child_keeps_no_session). Nothing here may use it anyway. */
	if (c->sock >= 0) {
		close(c->sock);
		c->sock = -1;
	}
	coffer__conn_fork_channels(c);
}

static void conn_atfork_child(void)
{
	struct coffer__conn *c;

	/* Only this thread exists now: locks other parent threads held stay held forever in
	 * the child, so re-initialise the per-connection ones rather than take them. A
	 * connection another thread was setting up is dead here as well (that thread is
	 * gone): its socket is closed too (test_fork_during_connect). */
	for (c = g_conns; c; c = c->gnext)
		conn_fork_child(c);
	for (c = g_connecting; c; c = c->gnext)
		conn_fork_child(c);
	coffer__chan_bindings_fork_child();
	pthread_mutex_init(&coffer__client_lock, NULL);
	coffer__obj_atfork_child();
}

void coffer__conn_seg_atfork_prepare(void)
{
	pthread_mutex_lock(&g_seg_lock);
}

void coffer__conn_seg_atfork_parent(void)
{
	pthread_mutex_unlock(&g_seg_lock);
}

void coffer__conn_seg_atfork_child(void)
{
	pthread_mutex_init(&g_seg_lock, NULL);
}

static void conn_once(void)
{
	pthread_atfork(conn_atfork_prepare, conn_atfork_parent, conn_atfork_child);
}

/* ---- arena segments ------------------------------------------------------------------ */

/* Maps the store's object index of @h read-only into @s (which is not shared yet), and
 * its access map writable. Consumes @fd and @access_fd. Return: 0 (also when @h announces
 * no index), or -EPROTO / -errno. */
static int seg_map_index(struct coffer__seg *s, const struct coffer_hello_reply *h, int fd,
			 int access_fd, int flags)
{
	uint64_t bytes = (uint64_t)h->index_slots * sizeof(struct coffer_index_slot);
	uint64_t abytes = coffer__access_bytes(h->index_slots);
	void *p, *a;
	int rc = 0;

	if (h->index_slots == 0 || fd < 0)
		goto out;
	if ((h->index_slots & (h->index_slots - 1)) != 0 ||
	    h->index_slots > COFFER_INDEX_SLOTS_MAX || bytes > SIZE_MAX ||
	    coffer__fd_mappable(fd, bytes, NULL) < 0 || access_fd < 0 ||
	    coffer__fd_mappable(access_fd, abytes, NULL) < 0) {
		rc = -EPROTO;
		goto out;
	}
	p = mmap(NULL, bytes, PROT_READ, flags, fd, 0);
	if (p == MAP_FAILED) {
		rc = coffer__map_errno(errno);
		goto out;
	}
	a = mmap(NULL, abytes, PROT_READ | PROT_WRITE, flags, access_fd, 0);
	if (a == MAP_FAILED) {
		rc = coffer__map_errno(errno); /* EACCES: a read-only file */
		munmap(p, bytes);
		goto out;
	}
	s->index = p;
	s->access = a;
	s->index_slots = h->index_slots;
	s->index_seed = h->index_seed;
out:
	if (fd >= 0)
		close(fd);
	if (access_fd >= 0)
		close(access_fd);
	return rc;
}

/* Maps (or shares) the arena of segment @id and its object index. Consumes @fd,
 * @index_fd and @access_fd. */
static int seg_get(uint32_t id, uint64_t bytes, int fd, const struct coffer_hello_reply *h,
		   int index_fd, int access_fd, struct coffer__seg **segp)
{
	struct coffer__seg *s;
	struct stat st;
	int flags = MAP_SHARED;
	uint64_t populate = 1;
	void *p;
	int rc = 0;

	pthread_mutex_lock(&g_seg_lock);
	if (fstat(fd, &st) < 0) {
		rc = -EPROTO;
		goto out;
	}
	/* The same store's arena: same id and size, and the very file this fd names. The id
	 * alone is 32 random bits the store chose (two stores may collide, a store may lie):
	 * sharing another arena's mapping would let this store's offsets reach that one's
	 * objects. */
	for (s = g_segs; s; s = s->next) {
		if (s->id == id && s->bytes == bytes && s->dev == st.st_dev &&
		    s->ino == st.st_ino) {
			s->refs++;
			*segp = s;
			goto out;
		}
	}
	/* Never map past the end of the file, nor a file the store could shrink later: a
	 * touch past its end would be a SIGBUS (test_shrinkable_refused). */
	if (bytes > SIZE_MAX || coffer__fd_mappable(fd, bytes, NULL) < 0) {
		rc = -EPROTO;
		goto out;
	}
	/* Fill the page tables now (the store prefaulted the memory itself): the first
	 * touch of each page would otherwise be paid inside a timed put. */
	(void)coffer__env_map_populate(&populate); /* checked at connect */
	if (populate)
		flags |= MAP_POPULATE;
	s = calloc(1, sizeof(*s));
	if (!s) {
		rc = -ENOMEM;
		goto out;
	}
	p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, flags, fd, 0);
	if (p == MAP_FAILED) {
		/* a read-only arena fd (EACCES) is the store's fault, not a refusal */
		rc = coffer__map_errno(errno);
		free(s);
		goto out;
	}
	rc = seg_map_index(s, h, index_fd, access_fd, flags);
	index_fd = access_fd = -1;
	if (rc < 0) {
		munmap(p, bytes ? bytes : 1);
		free(s);
		goto out;
	}
	s->id = id;
	s->bytes = bytes;
	s->dev = st.st_dev;
	s->ino = st.st_ino;
	s->base = p;
	s->refs = 1;
	s->next = g_segs;
	g_segs = s;
	*segp = s;
out:
	pthread_mutex_unlock(&g_seg_lock);
	close(fd);
	if (index_fd >= 0)
		close(index_fd);
	if (access_fd >= 0)
		close(access_fd);
	return rc;
}

static void seg_put(struct coffer__seg *seg)
{
	struct coffer__seg **pp;
	bool last = false;

	pthread_mutex_lock(&g_seg_lock);
	if (--seg->refs == 0) {
		for (pp = &g_segs; *pp; pp = &(*pp)->next)
			if (*pp == seg) {
				*pp = seg->next;
				break;
			}
		last = true;
	}
	pthread_mutex_unlock(&g_seg_lock);
	if (last) {
		munmap(seg->base, seg->bytes ? seg->bytes : 1);
		if (seg->index != NULL) {
			munmap((void *)seg->index,
			       (size_t)seg->index_slots * sizeof(struct coffer_index_slot));
			munmap(seg->access, (size_t)coffer__access_bytes(seg->index_slots));
		}
		free(seg);
	}
}

/* ---- control socket ---------------------------------------------------------------- */

/*
 * Whether @status, an ERROR's, is one docs/protocol.md gives an answer to a message of @type
 * (a refusal at accept is read as HELLO's answer); any other is the store's protocol error
 * (test_hello_error_status, test_chan_error_status), as a request's status is on the rings
 * (coffer__rep_check()).
 */
static bool ctl_status_known(uint16_t type, int status)
{
	switch (-status) {
	case EPROTO: /* fatal: the exchange broke */
		return true;
	case EACCES:
	case ENOSPC: /* epoll_ctl()'s at accept: fs.epoll.max_user_watches */
	case EPROTONOSUPPORT:
		return type == COFFER_MSG_HELLO;
	case EMFILE:
	case ENOMEM:
		return type == COFFER_MSG_HELLO || type == COFFER_MSG_CHANNEL_OPEN;
	case EINVAL:
		return type == COFFER_MSG_CHANNEL_OPEN || type == COFFER_MSG_CHANNEL_CLOSE;
	case ENOENT:
		return type == COFFER_MSG_CHANNEL_CLOSE;
	default:
		return false;
	}
}

/*
 * After a failed send or a reset: a store that refused us (wrong user, out of fds) sent one
 * ERROR before closing. Returns its status if it is queued (-EPROTO for one the protocol
 * does not give an answer to @type), else -ENOTCONN. (A Unix socket whose peer closed with
 * our request unread reports ECONNRESET once, before the queued messages.)
 */
static int ctl_refusal(int sock, uint16_t type)
{
	uint8_t in[sizeof(struct coffer_msg_hdr) + 512];
	struct coffer_msg_hdr hdr;
	struct coffer_msg_error e;
	int got_fds[COFFER_MSG_FDS_MAX];
	unsigned int ngot = 0;
	long n;

	n = coffer__recv_fds(sock, in, sizeof(in), got_fds, &ngot, COFFER_MSG_FDS_MAX,
			     MSG_DONTWAIT);
	while (ngot)
		close(got_fds[--ngot]);
	if (n <= 0 || coffer__msg_check(in, (size_t)n, &hdr) != 0 || hdr.type != COFFER_MSG_ERROR)
		return -ENOTCONN;
	memcpy(&e, in + sizeof(hdr), sizeof(e));
	return ctl_status_known(type, e.status) ? e.status : -EPROTO;
}

int coffer__conn_ctl(struct coffer__conn *conn, uint16_t type, const void *body, uint32_t blen,
		     int send_fd, uint16_t reply_type, void *rbody, uint32_t rlen, int *fds,
		     unsigned int nfds)
{
	uint8_t out[sizeof(struct coffer_msg_hdr) + 256];
	uint8_t in[sizeof(struct coffer_msg_hdr) + 512];
	struct coffer_msg_hdr hdr;
	int got_fds[COFFER_MSG_FDS_MAX];
	unsigned int ngot, i;
	struct timespec start;
	long n;
	int rc = -EPROTO;
	COFFER__NO_CANCEL(); /* ctl_lock held across sendmsg/recvmsg (runtime/nocancel.h) */

	if (blen > sizeof(out) - sizeof(hdr) || nfds > COFFER_MSG_FDS_MAX)
		return -EINVAL;
	for (i = 0; i < nfds; i++)
		fds[i] = -1;
	coffer__msg_hdr_init(&hdr, type, 0, (uint32_t)(sizeof(hdr) + blen));
	memcpy(out, &hdr, sizeof(hdr));
	if (blen)
		memcpy(out + sizeof(hdr), body, blen);

	pthread_mutex_lock(&conn->ctl_lock);
	if (conn->forked || conn->sock < 0) { /* sock < 0: disconnected meanwhile */
		rc = -ENOTCONN;
		goto out;
	}
	clock_gettime(CLOCK_MONOTONIC, &start); /* the exchange's one deadline runs from here */
	n = coffer__send_fds(conn->sock, out, sizeof(hdr) + blen, &send_fd, send_fd >= 0 ? 1 : 0,
			     0);
	if (n == -EAGAIN) {
		/* No room for the request in COFFER_STORE_TIMEOUT_MS: the store has stopped
		 * reading its socket (stopped or wedged with our earlier messages unread). As
		 * silent as one that does not answer, and reported alike (a SOCK_SEQPACKET send
		 * is all or nothing: nothing of it went out). It used to read as a refusal,
		 * -ENOTCONN (test_ctl_send_timeout). */
		rc = -ETIMEDOUT;
		coffer__conn_fail_silent(conn);
		goto out;
	}
	if (n < 0) {
		rc = ctl_refusal(conn->sock, type);
		goto out;
	}
	/* Skip anything unsolicited (bounded: a confused store cannot keep us here), all within
	 * one timeout counted from the send: each receive used to start it afresh, so a store
	 * dribbling 15 unsolicited messages, each just inside the timeout, stretched one call
	 * to 16 timeouts (test_ctl_unsolicited_one_deadline). */
	for (int tries = 0; tries < 16; tries++) {
		size_t kept;

		n = coffer__recv_fds_kept(conn->sock, in, sizeof(in), got_fds, &ngot,
					  COFFER_MSG_FDS_MAX, 0, &start, &kept);
		if (n == -EMFILE && nfds == 0) {
			/* fds where our reply takes none (the kernel could not even install them:
			 * we are at our fd limit): a malformed reply, not our shortage
			 * (test_query_reply_with_fd) */
			rc = -EPROTO;
			goto out;
		}
		if (n == -EMFILE && kept > 0 && coffer__msg_check(in, kept, &hdr) == 0 &&
		    hdr.type == reply_type && hdr.length - sizeof(hdr) == rlen) {
			/* Our reply, without the fds it carried: hand its body to the caller,
			 * who must undo what the store did for it (see the doc comment). */
			if (rlen)
				memcpy(rbody, in + sizeof(hdr), rlen);
			rc = -EMFILE;
			goto out;
		}
		if (n == -ECONNRESET || n == -EPIPE) {
			/* The store closed without reading our request (the kernel then resets
			 * us before we read what it sent): it may have said why first. */
			rc = ctl_refusal(conn->sock, type);
			goto out;
		}
		if (n == 0 || n == -EBADF) {
			rc = -ENOTCONN;
			goto out;
		}
		if (n == -EAGAIN) {
			/* No answer in COFFER_CTL_TIMEOUT_MS: the store is stopped or wedged. Its
			 * late answer would be taken for the next request's, so the connection is
			 * failed rather than reused. */
			rc = -ETIMEDOUT;
			coffer__conn_fail_silent(conn);
			goto out;
		}
		if (n < 0) {
			rc = n == -EMSGSIZE ? -EPROTO : (int)n;
			goto out;
		}
		rc = coffer__msg_check(in, (size_t)n, &hdr);
		if (rc < 0) {
			while (ngot)
				close(got_fds[--ngot]);
			goto out;
		}
		if (hdr.type == COFFER_MSG_ERROR) {
			struct coffer_msg_error e;

			memcpy(&e, in + sizeof(hdr), sizeof(e));
			while (ngot)
				close(got_fds[--ngot]);
			rc = ctl_status_known(type, e.status) ? e.status : -EPROTO;
			goto out;
		}
		if (hdr.type != reply_type) {
			while (ngot)
				close(got_fds[--ngot]);
			continue;
		}
		if (hdr.length - sizeof(hdr) != rlen || ngot != nfds) {
			while (ngot)
				close(got_fds[--ngot]);
			rc = -EPROTO;
			goto out;
		}
		if (rlen)
			memcpy(rbody, in + sizeof(hdr), rlen);
		for (i = 0; i < nfds; i++)
			fds[i] = got_fds[i];
		rc = 0;
		goto out;
	}
	rc = -EPROTO;
out:
	pthread_mutex_unlock(&conn->ctl_lock);
	return rc;
}

/* ---- liveness ---------------------------------------------------------------------- */

static void conn_poke(struct coffer__conn *conn)
{
	uint64_t one = 1;
	ssize_t r;
	/* write(2): reached from a poll's progress hook (a corrupt ring fails the connection
	 * there), which is not guarded as a whole (runtime/nocancel.h) */
	COFFER__NO_CANCEL();

	do
		r = write(conn->stop_fd, &one, sizeof(one));
	while (r < 0 && errno == EINTR);
}

/* conn->fail_cause: the first failure's cause wins, so a store killed (and found dead by the
 * monitor) while a blocking call gives up on it is not reported as silent, and the reverse. */
enum { COFFER__FAIL_NONE, COFFER__FAIL_SILENT, COFFER__FAIL_OTHER };

static void conn_fail_cause(struct coffer__conn *conn, int cause)
{
	int zero = 0;

	/* Release, before dead: whoever sees the channels failed may ask why (acquire in
	 * coffer__conn_was_silent()). A failure after the first keeps the first's cause. */
	atomic_compare_exchange_strong_explicit(&conn->fail_cause, &zero, cause,
						memory_order_release, memory_order_relaxed);
	zero = 0;
	/* Relaxed: the monitor re-reads dead after its eventfd wakeup (the eventfd
	 * write/read orders it), and channels order failure with their own locks. */
	if (atomic_compare_exchange_strong_explicit(&conn->dead, &zero, -ENOTCONN,
						    memory_order_relaxed, memory_order_relaxed))
		conn_poke(conn);
}

void coffer__conn_fail(struct coffer__conn *conn)
{
	conn_fail_cause(conn, COFFER__FAIL_OTHER);
}

void coffer__conn_fail_silent(struct coffer__conn *conn)
{
	conn_fail_cause(conn, COFFER__FAIL_SILENT);
}

bool coffer__conn_was_silent(coffer_handle_t connh)
{
	struct coffer__conn *conn;
	bool silent = false;

	coffer__rcu_read_lock();
	conn = coffer__conn_lookup_rcu(connh);
	if (conn)
		silent = atomic_load_explicit(&conn->fail_cause, memory_order_acquire) ==
			 COFFER__FAIL_SILENT;
	coffer__rcu_read_unlock();
	return silent;
}

/*
 * The liveness probe: called by the monitor every store_timeout_ms. When requests have been
 * waiting on @conn's channels for a whole interval without a single reply, asks the store
 * for its statistics (QUERY) on the socket; a store that does not answer within
 * store_timeout_ms (SIGSTOPped, wedged) makes coffer__conn_ctl() fail the connection with
 * -ETIMEDOUT, so pending events complete instead of waiting forever. A store that answers
 * is alive and merely slow, or holding gets that wait for a seal: nothing happens.
 */
static void conn_probe(struct coffer__conn *conn, uint64_t *last, bool *have_last)
{
	struct coffer_store_info info;
	bool waiting;
	uint64_t taken = coffer__conn_progress(conn, &waiting);
	int rc;

	if (waiting && *have_last && taken == *last) {
		rc = coffer__conn_ctl(conn, COFFER_MSG_QUERY, NULL, 0, -1, COFFER_MSG_QUERY_REPLY,
				      &info, sizeof(info), NULL, 0);
		if (rc == -ENOTCONN || rc == -EPROTO)
			coffer__conn_fail(conn);
	}
	*last = taken;
	*have_last = waiting;
}

/*
 * The connection failed (the store went silent past COFFER_STORE_TIMEOUT_MS, died, or broke
 * the protocol): before its pending requests are failed, make sure the store, should it be
 * alive after all (stopped, wedged), executes none of them once it runs again. Sets the
 * doorbell page's client_gone (the store checks it before each request it executes and ends
 * the session instead), and shuts the socket down, so that the store ends the session - aborts
 * the connection's unsealed objects and drops its references - even with nothing in the
 * rings. Without it, a seal that had answered -ETIMEDOUT sealed the object once the store
 * was continued, and the session held its references until coffer_disconnect()
 * (test_store_stopped_outcome). Source: NFS/DAOS give a timed-out request an unknown outcome;
 * this narrows it to the requests the store had begun before it stopped.
 * Context: the monitor thread, which coffer_disconnect() joins before it closes the socket and
 * which no fork child has (so the socket number is still ours, and the parent's).
 */
static void conn_abandon(struct coffer__conn *conn)
{
	if (conn->doorbell)
		__atomic_store_n(&conn->doorbell->client_gone, 1, __ATOMIC_SEQ_CST);
	if (conn->sock >= 0)
		(void)shutdown(conn->sock, SHUT_RDWR);
}

static void *conn_monitor(void *arg)
{
	struct coffer__conn *conn = arg;
	uint64_t last = 0;
	bool failed = false, have_last = false;

	for (;;) {
		struct pollfd p[2] = {
		    {.fd = conn->stop_fd, .events = POLLIN},
		    /* No events: POLLHUP/POLLERR are reported anyway, data is left for
		     * the control exchanges to read. */
		    {.fd = conn->sock, .events = 0},
		};
		int dead, r;

		r = poll(p, failed ? 1 : 2, failed ? -1 : (int)conn->store_timeout_ms);
		if (r < 0)
			continue; /* EINTR (signals are blocked here, but be safe) */
		if (r == 0)	  /* an interval passed: a failing probe fails the connection */
			conn_probe(conn, &last, &have_last);
		if (p[0].revents & POLLIN) {
			uint64_t v;

			if (read(conn->stop_fd, &v, sizeof(v)) < 0) {
				/* nothing to read: spurious */
			}
			if (atomic_load_explicit(&conn->stopping, memory_order_acquire))
				break;
		}
		if (!failed && (p[1].revents & (POLLHUP | POLLERR | POLLNVAL)))
			coffer__conn_fail(conn);
		dead = atomic_load_explicit(&conn->dead, memory_order_relaxed);
		if (dead && !failed) {
			failed = true;
			conn_abandon(conn);
			coffer__conn_fail_channels(conn, -ENOTCONN);
		}
	}
	return NULL;
}

/* ---- connect / disconnect ----------------------------------------------------------- */

/* Maps the doorbell page the store passed in HELLO_REPLY (runtime/proto.h). Return: 0;
 * -EPROTO (not a page-sized file sealed against shrinking: mapping it could fault); -ENOMEM. */
static int doorbell_map(int fd, struct coffer_doorbell **db)
{
	void *p;

	if (coffer__fd_mappable(fd, COFFER_DOORBELL_BYTES, NULL) < 0)
		return -EPROTO;
	p = mmap(NULL, COFFER_DOORBELL_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return coffer__map_errno(errno);
	*db = p;
	return 0;
}

static void conn_free(struct coffer_hlink *link)
{
	struct coffer__conn *conn = CONN_OF(link);

	if (conn->seg)
		seg_put(conn->seg);
	if (conn->doorbell)
		munmap(conn->doorbell, COFFER_DOORBELL_BYTES);
	if (conn->store_bell >= 0)
		close(conn->store_bell); /* after every channel, which ring it, is closed */
	pthread_mutex_destroy(&conn->ctl_lock);
	pthread_mutex_destroy(&conn->chan_lock);
	free(conn);
}

/*
 * The connection's environment overrides, all checked here so that a bad value fails
 * coffer_connect() with -EINVAL: COFFER_BATCH (1..COFFER_RING_ENTRIES_MAX), COFFER_MAP_POPULATE
 * (0 or 1; read again by seg_get()) and COFFER_POLL_SPIN_US (0..1 s; read once per process by
 * the channel's pollers).
 */
static int conn_read_env(struct coffer__conn *conn)
{
	uint64_t batch = CONN_BATCH_DEFAULT, populate = 1, spin_us = 0;
	uint64_t timeout_ms = COFFER_CTL_TIMEOUT_MS;

	if (coffer__env_batch(&batch) || coffer__env_map_populate(&populate) ||
	    coffer__env_poll_spin_us(&spin_us) || coffer__env_store_timeout_ms(&timeout_ms))
		return -EINVAL;
	conn->batch = (uint32_t)batch;
	conn->store_timeout_ms = (uint32_t)timeout_ms;
	return 0;
}

/*
 * What coffer_connect() reports for connect(2)'s @err (coffer/store.h). No store at the path
 * is -ECONNREFUSED however the kernel says so: nothing there (ENOENT), a path through a
 * regular file (ENOTDIR), or a socket of another type, which no coffer-store listens on
 * (EPROTOTYPE: a SOCK_STREAM or datagram socket). A backlog that stayed full for the whole
 * send timeout (EAGAIN) is -ETIMEDOUT. The rest (-EACCES, -ELOOP, ...) passes through.
 */
static int conn_connect_errno(int err)
{
	switch (err) {
	case ENOENT:
	case ENOTDIR:
	case EPROTOTYPE:
	case ECONNREFUSED:
		return -ECONNREFUSED;
	case EAGAIN:
		return -ETIMEDOUT;
	default:
		return -err;
	}
}

/*
 * The connect's last try once its time is up: room the listener made meanwhile still counts,
 * as an answer that came meanwhile does for a control message (coffer__recv_fds()). A client
 * stopped (SIGSTOP, ^Z) past COFFER_STORE_TIMEOUT_MS while it waited for room in a full
 * backlog gets EINTR once continued (signal(7)); it used to give up with -ETIMEDOUT on a
 * store that had taken its queue meanwhile (test_connect_room_while_stopped). A Unix connect
 * has no per-call MSG_DONTWAIT: O_NONBLOCK is set for the try and cleared after, which is
 * safe on @fd, a socket no other process or thread holds yet. Return: connect(2)'s (errno
 * EAGAIN: still no room).
 */
static int conn_connect_last_try(int fd, const struct sockaddr_un *sa)
{
	int fl = fcntl(fd, F_GETFL), rc, err;

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		errno = EAGAIN;
		return -1;
	}
	rc = connect(fd, (const struct sockaddr *)sa, sizeof(*sa));
	err = errno;
	(void)fcntl(fd, F_SETFL, fl);
	errno = err;
	return rc;
}

/*
 * Opens @conn's socket to @path and connects it. The fd is in conn->sock from socket() on,
 * set under coffer__client_lock (which fork-prepare takes): a fork at any moment of the
 * connect finds it there, and the child closes it (test_fork_during_connect). Return: 0;
 * -ENAMETOOLONG, -ECONNREFUSED (nothing listens there), -ETIMEDOUT (the listener did not
 * take the connection within @timeout_ms: its backlog is full, the store is stopped or
 * wedged; test_connect_backlog_full), -errno. On failure conn->sock is -1 again.
 */
static int conn_socket(struct coffer__conn *conn, const char *path, unsigned int timeout_ms)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd, rc;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	pthread_mutex_lock(&coffer__client_lock);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	conn->sock = fd;
	pthread_mutex_unlock(&coffer__client_lock);
	if (fd < 0)
		return -errno;
	/* Every step is bounded in time, the connect too: on a Unix socket it waits for room
	 * in the listener's backlog for as long as SO_SNDTIMEO allows (for ever unset), then
	 * fails with EAGAIN. Control answers time out alike: a stopped store or a socket that
	 * is not a coffer-store makes connect and later control calls fail with -ETIMEDOUT. */
	rc = coffer__sock_set_timeout(fd, timeout_ms);
	if (rc == 0) {
		struct coffer__sock_wait w;
		bool retry = true;
		int err;

		/* A connect() interrupted while it waits for room in the backlog leaves the
		 * socket unconnected (Linux's unix_stream_connect()): retried, within what is
		 * left of the timeout (test_ctl_timeout_under_signals). */
		coffer__sock_wait_begin(&w, fd, SO_SNDTIMEO);
		do
			rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
		while (rc < 0 && errno == EINTR && (retry = coffer__sock_wait_retry(&w)));
		if (!retry)
			rc = conn_connect_last_try(fd, &sa);
		err = errno;
		coffer__sock_wait_end(&w);
		if (rc < 0)
			rc = conn_connect_errno(err); /* the last try's EAGAIN: -ETIMEDOUT */
	}
	if (rc < 0) {
		pthread_mutex_lock(&coffer__client_lock);
		conn->sock = -1; /* before the close: a child must not close a reused number */
		pthread_mutex_unlock(&coffer__client_lock);
		close(fd);
		return rc;
	}
	return 0;
}

static int conn_start_monitor(struct coffer__conn *conn)
{
	sigset_t all, old;
	int rc;

	/* The monitor must never run a host's signal handlers. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&conn->monitor, NULL, conn_monitor, conn);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc)
		return -rc;
	conn->monitor_started = true;
	return 0;
}

static void conn_stop_monitor(struct coffer__conn *conn)
{
	if (!conn->monitor_started)
		return;
	/* Release: pairs with the monitor's acquire load after its wakeup. */
	atomic_store_explicit(&conn->stopping, 1, memory_order_release);
	conn_poke(conn);
	pthread_join(conn->monitor, NULL);
	conn->monitor_started = false;
}

/* coffer_connect(): see coffer/store.h. */
COFFER_API int coffer_connect(const char *path, coffer_handle_t *connh)
{
	char defpath[108];
	struct coffer__conn *conn;
	struct coffer_hello_reply hello = {0};
	int hello_fds[5] = {-1, -1, -1, -1, -1}, arena_fd, rc;
	COFFER__NO_CANCEL(); /* runtime/nocancel.h */

	if (!connh || (path && !path[0])) /* "" would name Linux's abstract socket "\0" */
		return -EINVAL;
	/* A failed connect drops the runtime reference it took, and the last one must wait for
	 * a grace period: inside the caller's read-side section it was kept for good (the
	 * runtime never stopped). Refused up front, as coffer_disconnect() refuses there. */
	if (coffer__rcu_read_ongoing())
		return -EINVAL;
	if (!path) {
		rc = coffer__default_socket_path(defpath, sizeof(defpath));
		if (rc < 0)
			return rc;
		path = defpath;
	}
	pthread_once(&g_once, conn_once);
	rc = coffer__runtime_get();
	if (rc < 0)
		return rc;
	conn = calloc(1, sizeof(*conn));
	if (!conn) {
		rc = -ENOMEM;
		goto err_fini;
	}
	conn->sock = -1;
	conn->stop_fd = -1;
	conn->store_bell = -1;
	pthread_mutex_init(&conn->ctl_lock, NULL);
	pthread_mutex_init(&conn->chan_lock, NULL);
	conn->link.hl_free = conn_free;
	rc = conn_read_env(conn);
	if (rc < 0)
		goto err_free;
	pthread_mutex_lock(&coffer__client_lock);
	conn->gnext = g_connecting;
	g_connecting = conn;
	pthread_mutex_unlock(&coffer__client_lock);

	rc = conn_socket(conn, path, conn->store_timeout_ms);
	if (rc < 0)
		goto err_free;
	rc = coffer__conn_ctl(conn, COFFER_MSG_HELLO, NULL, 0, -1, COFFER_MSG_HELLO_REPLY, &hello,
			      sizeof(hello), hello_fds, 5);
	if (rc < 0)
		goto err_free;
	arena_fd = hello_fds[0];
	conn->store_bell = hello_fds[2];
	rc = doorbell_map(hello_fds[1], &conn->doorbell);
	close(hello_fds[1]);
	/* We write to it whenever the store sleeps: a pipe or socket there could SIGPIPE us. */
	if (rc == 0 && !coffer__is_eventfd(conn->store_bell))
		rc = -EPROTO;
	if (rc == 0 && (hello.arena_bytes == 0 || hello.max_channels == 0 ||
			hello.max_ring_entries < COFFER_RING_ENTRIES_MIN))
		rc = -EPROTO;
	if (rc < 0) {
		close(arena_fd);
		close(hello_fds[3]);
		close(hello_fds[4]);
		goto err_free;
	}
	conn->segment = hello.segment;
	conn->max_channels = hello.max_channels;
	conn->max_ring_entries = hello.max_ring_entries;
	rc = seg_get(hello.segment, hello.arena_bytes, arena_fd, &hello, hello_fds[3], hello_fds[4],
		     &conn->seg);
	if (rc < 0)
		goto err_free;

	conn->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (conn->stop_fd < 0) {
		rc = -errno;
		goto err_free;
	}
	rc = conn_start_monitor(conn);
	if (rc < 0)
		goto err_free;
	rc = coffer_hhash_insert(coffer_hhash_global(), &conn->link, COFFER_HTYPE_CONN, connh);
	if (rc < 0)
		goto err_free;
	conn->self = *connh;
	pthread_mutex_lock(&coffer__client_lock);
	conn_unlink_locked(&g_connecting, conn);
	conn->gnext = g_conns;
	g_conns = conn;
	pthread_mutex_unlock(&coffer__client_lock);
	return 0;

err_free:
	pthread_mutex_lock(&coffer__client_lock);
	conn_unlink_locked(&g_connecting, conn); /* no-op when it was never linked */
	pthread_mutex_unlock(&coffer__client_lock);
	conn_stop_monitor(conn);
	if (conn->stop_fd >= 0)
		close(conn->stop_fd);
	if (conn->sock >= 0)
		close(conn->sock);
	conn_free(&conn->link);
err_fini:
	coffer__runtime_put();
	return rc;
}

/* coffer_disconnect(): see coffer/store.h. */
COFFER_API int coffer_disconnect(coffer_handle_t connh)
{
	struct coffer_hhash *hh;
	struct coffer_hlink *link;
	struct coffer__conn *conn;
	bool last;
	int zero = 0, rc;
	COFFER__NO_CANCEL(); /* runtime/nocancel.h */

	/* Closing the channels waits for a grace period, and the last connection's runtime
	 * reference drains the handle hash and waits for the RCU callbacks: inside the
	 * caller's read-side section the first would wait for itself, and the last was
	 * silently kept (coffer_fini() refuses there). Refused up front, nothing changed
	 * (test_grace_period_calls_in_read_section). */
	if (coffer__rcu_read_ongoing())
		return -EINVAL;
	/* another thread's disconnect of the same handle may be the last one */
	rc = coffer__global_lookup(connh, COFFER_HTYPE_CONN, &hh, &link);
	if (rc < 0)
		return rc;
	conn = CONN_OF(link);
	rc = coffer_hhash_delete(hh, link);
	if (rc < 0) {
		coffer_hhash_putref(hh, link);
		return rc; /* another thread is disconnecting it */
	}
	pthread_mutex_lock(&coffer__client_lock);
	conn_unlink_locked(&g_conns, conn);
	last = g_conns == NULL;
	pthread_mutex_unlock(&coffer__client_lock);

	atomic_compare_exchange_strong_explicit(&conn->dead, &zero, -ENOTCONN, memory_order_relaxed,
						memory_order_relaxed);
	/* End every control exchange in progress before anything below waits for one. Other
	 * threads may be inside one (a coffer_store_query(); a channel open, which holds the
	 * chan_lock that coffer__conn_close_channels() takes), and so may the monitor (its
	 * liveness probe; joined below). shutdown() wakes a receive blocked on the socket and
	 * fails every later send (-ENOTCONN) without freeing the number: closing it under them
	 * would let their send or receive reach whatever file the process opens next under that
	 * number, so the close comes last, under ctl_lock, after which an exchange finds
	 * sock < 0. While it was shut down only after those waits, a stopped store kept
	 * disconnect waiting for the exchanges' timeout (COFFER_STORE_TIMEOUT_MS, 10 s), and a
	 * call opening its channel said -ETIMEDOUT (test_disconnect_ends_channel_open). The
	 * shutdown also ends the session in the store: no CHANNEL_CLOSE needed. */
	if (conn->sock >= 0) /* a fork child closed its copy already */
		(void)shutdown(conn->sock, SHUT_RDWR);
	conn_stop_monitor(conn);
	coffer__conn_close_channels(conn);
	if (conn->sock >= 0) {
		pthread_mutex_lock(&conn->ctl_lock);
		close(conn->sock);
		conn->sock = -1;
		pthread_mutex_unlock(&conn->ctl_lock);
	}
	close(conn->stop_fd);
	conn->stop_fd = -1;
	coffer_hhash_putref(hh, link);
	if (last) {
		/* The process's last connection: leave nothing of ours behind for coffer_fini()
		 * to find - this thread's hidden EQ of blocking calls (other threads' go at
		 * their exit) and the bindings of destroyed EQs, whose channels are all closed
		 * now (a live EQ keeps its idle binding: it may be used again). */
		coffer__obj_thread_release();
		coffer__chan_release_bindings();
	}
	coffer__runtime_put();
	return 0;
}

/* coffer_flush(): see coffer/store.h. */
COFFER_API int coffer_flush(coffer_handle_t connh)
{
	struct coffer_hhash *hh;
	struct coffer_hlink *link;
	struct coffer__conn *conn;
	int rc = 0;
	COFFER__NO_CANCEL(); /* runtime/nocancel.h */

	/* A handle of another type (an EQ, an object, the null handle) is a wrong argument,
	 * -EINVAL, as in every call; -ENOENT only for a connection handle that names no
	 * connection (it used to be -ENOENT for both: test_flush_errors). */
	if ((connh.cookie & ((1u << COFFER_HTYPE_BITS) - 1)) != (uint64_t)COFFER_HTYPE_CONN)
		return -EINVAL;
	coffer__rcu_read_lock();
	hh = coffer_hhash_global(); /* NULL: not initialised, or a last disconnect stopped it */
	link = hh ? coffer_hhash_lookup_rcu(hh, connh, COFFER_HTYPE_CONN) : NULL;
	conn = link ? CONN_OF(link) : NULL;
	if (!hh)
		rc = -EINVAL;
	else if (!conn)
		rc = -ENOENT;
	else if ((rc = atomic_load_explicit(&conn->dead, memory_order_relaxed)) == 0)
		coffer__conn_flush_channels(conn);
	coffer__rcu_read_unlock();
	return rc;
}

/* coffer_store_query(): see coffer/store.h. */
COFFER_API int coffer_store_query(coffer_handle_t connh, struct coffer_store_info *info)
{
	struct coffer_hhash *hh;
	struct coffer_hlink *link;
	struct coffer__conn *conn;
	int rc;
	COFFER__NO_CANCEL(); /* runtime/nocancel.h */

	if (!info)
		return -EINVAL;
	/* a racing last coffer_disconnect() may stop the runtime */
	rc = coffer__global_lookup(connh, COFFER_HTYPE_CONN, &hh, &link);
	if (rc < 0)
		return rc;
	conn = CONN_OF(link);
	rc = atomic_load_explicit(&conn->dead, memory_order_relaxed);
	if (rc == 0)
		rc = coffer__conn_ctl(conn, COFFER_MSG_QUERY, NULL, 0, -1, COFFER_MSG_QUERY_REPLY,
				      info, sizeof(*info), NULL, 0);
	coffer_hhash_putref(hh, link);
	return rc;
}

struct coffer__conn *coffer__conn_lookup_rcu(coffer_handle_t connh)
{
	struct coffer_hhash *hh = coffer_hhash_global();
	struct coffer_hlink *link;

	if (!hh)
		return NULL;
	link = coffer_hhash_lookup_rcu(hh, connh, COFFER_HTYPE_CONN);
	return link ? CONN_OF(link) : NULL;
}
