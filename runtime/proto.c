/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * runtime/proto.c - wire-protocol helpers shared by libcoffer and coffer-store: header and
 * request validation, reply sanity checks for the client, SCM_RIGHTS send/receive, and the
 * default socket path. Stateless; see proto_util.h for each function's contract.
 *
 * Design note: validation is split in two layers. Here: the syntax of a message (magic,
 * version, type, length, count, reserved fields, known flags), identical for the socket and
 * the rings. In the store: the semantics (state, ownership, capacity). A peer can therefore
 * never make either side interpret a field it did not validate first. Source: Plasma's
 * lesson that a store must validate everything and never die on a client's behalf.
 */
#include <errno.h>
#include <sys/time.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "runtime/proto_util.h"

#ifndef HUGETLBFS_MAGIC
#define HUGETLBFS_MAGIC 0x958458f6
#endif

_Static_assert(sizeof(struct coffer_hello_reply) == 40, "wire layout");
_Static_assert(sizeof(struct coffer_chan_open) == 8, "wire layout");
_Static_assert(sizeof(struct coffer_chan_open_reply) == 32, "wire layout");
_Static_assert(sizeof(struct coffer_chan_close) == 8, "wire layout");
_Static_assert(sizeof(struct coffer_msg_error) == 128, "wire layout");
_Static_assert(sizeof(struct coffer_store_info) == 128, "wire layout");
_Static_assert(COFFER_MSG_MAX_BYTES ==
		   sizeof(struct coffer_msg_hdr) + COFFER_MSG_BATCH_MAX * sizeof(struct coffer_req),
	       "largest message");

void coffer__msg_hdr_init(struct coffer_msg_hdr *hdr, uint16_t type, uint32_t count,
			  uint32_t length)
{
	hdr->magic = COFFER_PROTO_MAGIC;
	hdr->version = COFFER_PROTO_VERSION;
	hdr->type = type;
	hdr->count = count;
	hdr->length = length;
}

long coffer__msg_body_size(uint32_t type)
{
	switch (type) {
	case COFFER_MSG_HELLO:
	case COFFER_MSG_CHANNEL_CLOSE_REPLY:
	case COFFER_MSG_QUERY:
		return 0;
	case COFFER_MSG_HELLO_REPLY:
		return sizeof(struct coffer_hello_reply);
	case COFFER_MSG_CHANNEL_OPEN:
		return sizeof(struct coffer_chan_open);
	case COFFER_MSG_CHANNEL_OPEN_REPLY:
		return sizeof(struct coffer_chan_open_reply);
	case COFFER_MSG_CHANNEL_CLOSE:
		return sizeof(struct coffer_chan_close);
	case COFFER_MSG_REQUEST:
		return sizeof(struct coffer_req);
	case COFFER_MSG_REPLY:
		return sizeof(struct coffer_rep);
	case COFFER_MSG_QUERY_REPLY:
		return sizeof(struct coffer_store_info);
	case COFFER_MSG_ERROR:
		return sizeof(struct coffer_msg_error);
	default:
		return -EPROTO;
	}
}

int coffer__msg_check(const void *buf, size_t len, struct coffer_msg_hdr *hdr)
{
	long body;

	if (len < sizeof(*hdr))
		return -EPROTO;
	memcpy(hdr, buf, sizeof(*hdr));
	if (hdr->magic != COFFER_PROTO_MAGIC)
		return -EPROTO;
	if (hdr->version != COFFER_PROTO_VERSION)
		return -EPROTONOSUPPORT;
	if (hdr->length != len)
		return -EPROTO;
	body = coffer__msg_body_size(hdr->type);
	if (body < 0)
		return -EPROTO;
	if (hdr->type == COFFER_MSG_REQUEST || hdr->type == COFFER_MSG_REPLY) {
		if (hdr->count < 1 || hdr->count > COFFER_MSG_BATCH_MAX)
			return -EPROTO;
		if (len != sizeof(*hdr) + (size_t)hdr->count * (size_t)body)
			return -EPROTO;
		return 0;
	}
	if (hdr->count != 0 || len != sizeof(*hdr) + (size_t)body)
		return -EPROTO;
	return 0;
}

int coffer__req_check(const struct coffer_req *req)
{
	static const uint8_t zero_oid[COFFER_OID_SIZE];
	unsigned int allowed = 0;
	int size_ok = 0, timeout_ok = 0, offset_ok = 0, oid_ok = 1;

	if (req->rsvd0 != 0 || req->rsvd1 != 0)
		return -EINVAL;
	switch (req->op) {
	case COFFER_OP_CREATE:
		allowed = COFFER_CREATE_REPLACE;
		size_ok = 1;
		break;
	case COFFER_OP_SEAL:
		allowed = COFFER_SEAL_RELEASE;
		break;
	case COFFER_OP_GET:
		timeout_ok = 1;
		break;
	case COFFER_OP_RELEASE:
		allowed = COFFER_RELEASE_BY_OFFSET;
		size_ok = (req->flags & COFFER_RELEASE_BY_OFFSET) != 0;
		break;
	case COFFER_OP_ABORT:
	case COFFER_OP_DELETE:
	case COFFER_OP_CONTAINS:
		break;
	case COFFER_OP_RESERVE:
		size_ok = 1;
		oid_ok = 0; /* a reservation has no ObjectID yet: the field must be zero */
		break;
	case COFFER_OP_PUT:
		allowed = COFFER_CREATE_REPLACE;
		size_ok = 1;
		offset_ok = 1;
		break;
	case COFFER_OP_UNRESERVE:
		offset_ok = 1;
		oid_ok = 0;
		break;
	default:
		return -EINVAL;
	}
	if (req->flags & ~allowed)
		return -EINVAL;
	if (!size_ok && req->size != 0)
		return -EINVAL;
	if (!timeout_ok && req->timeout_us != 0)
		return -EINVAL;
	if (!offset_ok && req->offset != 0)
		return -EINVAL;
	if (!oid_ok && memcmp(req->oid, zero_oid, sizeof(zero_oid)) != 0)
		return -EINVAL;
	return 0;
}

/*
 * Whether @status (a negative errno) is one docs/protocol.md's request table gives @op: any
 * request may be refused as malformed (-EINVAL, also an unknown op), and each op has its own
 * refusals. GET's -EAGAIN (a client's socket holds 4096 waiting gets) is the socket's only;
 * the ring path refuses it itself.
 */
static bool rep_status_known(uint16_t op, int status)
{
	switch (-status) {
	case EINVAL:
		return true;
	case ENOENT:
		return op == COFFER_OP_SEAL || op == COFFER_OP_ABORT || op == COFFER_OP_GET ||
		       op == COFFER_OP_RELEASE || op == COFFER_OP_DELETE || op == COFFER_OP_PUT ||
		       op == COFFER_OP_UNRESERVE;
	case EEXIST:
		return op == COFFER_OP_CREATE || op == COFFER_OP_PUT;
	case E2BIG:
		return op == COFFER_OP_CREATE || op == COFFER_OP_RESERVE;
	case ENOMEM:
		return op == COFFER_OP_CREATE || op == COFFER_OP_GET || op == COFFER_OP_RESERVE ||
		       op == COFFER_OP_PUT;
	case EPERM:
	case EALREADY:
		return op == COFFER_OP_SEAL || op == COFFER_OP_ABORT;
	case EBUSY:
		return op == COFFER_OP_DELETE;
	case EAGAIN:
		return op == COFFER_OP_GET || op == COFFER_OP_RESERVE;
	default:
		return false;
	}
}

int coffer__rep_check(const struct coffer_rep *rep, uint16_t op, uint32_t segment,
		      uint64_t arena_bytes)
{
	if (rep->status > 0 || rep->status < -4095)
		return -EPROTO;
	if (rep->status != 0)
		return rep_status_known(op, rep->status) ? 0 : -EPROTO;
	switch (op) {
	case COFFER_OP_CREATE:
	case COFFER_OP_RESERVE:
		if (rep->segment != segment || rep->offset > arena_bytes)
			return -EPROTO;
		return 0;
	case COFFER_OP_GET:
		if (rep->segment != segment || rep->offset > arena_bytes ||
		    rep->size > arena_bytes - rep->offset)
			return -EPROTO;
		return 0;
	case COFFER_OP_CONTAINS:
		return rep->size <= 1 ? 0 : -EPROTO;
	default:
		return 0;
	}
}

long coffer__send_fds(int sock, const void *buf, size_t len, const int *fds, unsigned int nfds,
		      int flags)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * COFFER_MSG_FDS_MAX)];
	} ctl;
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	struct coffer__sock_wait w;
	bool retry = true;
	ssize_t n;
	int err;

	if (nfds > COFFER_MSG_FDS_MAX)
		return -EINVAL;
	if (nfds > 0) {
		struct cmsghdr *c;

		memset(&ctl, 0, sizeof(ctl));
		msg.msg_control = ctl.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	coffer__sock_wait_begin(&w, sock, SO_SNDTIMEO);
	do
		n = sendmsg(sock, &msg, flags | MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR && (retry = coffer__sock_wait_retry(&w)));
	if (!retry) /* the time is up: room made meanwhile still counts (see the receive) */
		n = sendmsg(sock, &msg, flags | MSG_NOSIGNAL | MSG_DONTWAIT);
	err = errno;
	coffer__sock_wait_end(&w);
	if (n < 0)
		return err == EWOULDBLOCK || err == EINTR ? -EAGAIN : -err;
	return n;
}

long coffer__recv_fds(int sock, void *buf, size_t cap, int *fds, unsigned int *nfds,
		      unsigned int maxfds, int flags)
{
	size_t kept;

	return coffer__recv_fds_kept(sock, buf, cap, fds, nfds, maxfds, flags, NULL, &kept);
}

long coffer__recv_fds_kept(int sock, void *buf, size_t cap, int *fds, unsigned int *nfds,
			   unsigned int maxfds, int flags, const struct timespec *since,
			   size_t *kept)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * COFFER_MSG_FDS_MAX)];
	} ctl;
	struct iovec iov = {.iov_base = buf, .iov_len = cap};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	struct cmsghdr *c;
	struct coffer__sock_wait w;
	unsigned int got = 0;
	int overflow = 0, err;
	bool retry = true;
	ssize_t n;

	*nfds = 0;
	*kept = 0;
	if (maxfds > COFFER_MSG_FDS_MAX)
		return -EINVAL;
	msg.msg_control = ctl.buf;
	msg.msg_controllen = sizeof(ctl.buf);
	if (since == NULL)
		coffer__sock_wait_begin(&w, sock, SO_RCVTIMEO);
	else
		retry = coffer__sock_wait_begin_at(&w, sock, SO_RCVTIMEO, since);
	if (retry)
		do
			n = recvmsg(sock, &msg, flags | MSG_CMSG_CLOEXEC);
		while (n < 0 && errno == EINTR && (retry = coffer__sock_wait_retry(&w)));
	/* The time is up, but what arrived meanwhile still counts: a process stopped
	 * (SIGSTOP, ^Z) for longer than the timeout while it waited here gets EINTR once
	 * continued (signal(7)), with the answer queued (test_ctl_answer_while_stopped). */
	if (!retry)
		n = recvmsg(sock, &msg, flags | MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	err = errno;
	coffer__sock_wait_end(&w);
	if (n < 0)
		return err == EWOULDBLOCK || err == EINTR ? -EAGAIN : -err;
	/* Collect every fd first so that none leaks whatever we decide below. */
	for (c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
		size_t k, cnt;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		cnt = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (k = 0; k < cnt; k++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + k * sizeof(int), sizeof(int));
			if (got < maxfds)
				fds[got++] = fd;
			else {
				close(fd);
				overflow = 1;
			}
		}
	}
	if (overflow || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		int probe = -1, probe_err = 0;

		/* Control data truncated with the payload intact: either the sender passed
		 * more fds than our buffer holds, or the kernel could not install them all
		 * because this process is at its fd limit. Tell the two apart - before closing
		 * what we got: the kernel may have installed some of them, and closing those
		 * first would make room for the probe. */
		if (!overflow && !(msg.msg_flags & MSG_TRUNC)) {
			probe = fcntl(sock, F_DUPFD_CLOEXEC, 0);
			probe_err = errno;
		}
		while (got > 0)
			close(fds[--got]);
		if (overflow || (msg.msg_flags & MSG_TRUNC))
			return -EMSGSIZE;
		if (probe >= 0) {
			close(probe);
			return -EMSGSIZE;
		}
		if (probe_err != EMFILE && probe_err != ENFILE)
			return -EMSGSIZE;
		*kept = (size_t)n; /* the payload is intact in @buf */
		return -EMFILE;
	}
	*nfds = got;
	if (n == 0 && got > 0) {
		while (got > 0)
			close(fds[--got]);
		*nfds = 0;
	}
	return n;
}

/* coffer__is_eventfd(): see proto_util.h. */
bool coffer__is_eventfd(int fd)
{
	char path[64], link[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, link, sizeof(link) - 1);
	if (n < 0)
		return false;
	link[n] = '\0';
	return strcmp(link, "anon_inode:[eventfd]") == 0;
}

/* coffer__fd_mappable(): see proto_util.h. */
int coffer__fd_mappable(int fd, uint64_t bytes, struct stat *st)
{
	struct statfs sfs;
	struct stat s;
	int seals;

	if (fstat(fd, &s) < 0 || !S_ISREG(s.st_mode) || s.st_size < 0 ||
	    (uint64_t)s.st_size < bytes)
		return -EPROTO;
	seals = fcntl(fd, F_GET_SEALS);
	if (!(seals >= 0 && (seals & F_SEAL_SHRINK)) &&
	    !(fstatfs(fd, &sfs) == 0 && (unsigned long)sfs.f_type == HUGETLBFS_MAGIC))
		return -EPROTO;
	if (st != NULL)
		*st = s;
	return 0;
}

/* coffer__map_errno(): see proto_util.h. */
int coffer__map_errno(int err)
{
	return err == ENOMEM ? -ENOMEM : -EPROTO;
}

int coffer__default_socket_path(char *buf, size_t len)
{
	const char *env = getenv("COFFER_SOCKET");
	struct stat st;
	char dir[64];
	int n;

	if (env != NULL && env[0] != '\0') {
		n = snprintf(buf, len, "%s", env);
	} else if ((env = getenv("XDG_RUNTIME_DIR")) != NULL && env[0] != '\0' &&
		   stat(env, &st) == 0 && S_ISDIR(st.st_mode)) {
		n = snprintf(buf, len, "%s/coffer.sock", env);
	} else {
		snprintf(dir, sizeof(dir), "/run/user/%u", (unsigned int)getuid());
		if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == getuid())
			n = snprintf(buf, len, "%s/coffer.sock", dir);
		else
			n = snprintf(buf, len, "/tmp/coffer-%u.sock", (unsigned int)getuid());
	}
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return 0;
}

/* struct coffer__sock_wait: see proto_util.h. */
void coffer__sock_wait_begin(struct coffer__sock_wait *w, int sock, int opt)
{
	w->sock = sock;
	w->opt = opt;
	w->state = 0;
	clock_gettime(CLOCK_MONOTONIC, &w->start);
}

bool coffer__sock_wait_begin_at(struct coffer__sock_wait *w, int sock, int opt,
				const struct timespec *start)
{
	w->sock = sock;
	w->opt = opt;
	w->state = 0;
	w->start = *start;
	/* what a retry after EINTR does: read the timeout, shorten it to what is left */
	return coffer__sock_wait_retry(w);
}

bool coffer__sock_wait_retry(struct coffer__sock_wait *w)
{
	socklen_t len = sizeof(w->orig);
	struct timespec now;
	struct timeval left;
	int64_t total_us, used_us;
	int saved = errno;

	if (w->state == 0) {
		if (getsockopt(w->sock, SOL_SOCKET, w->opt, &w->orig, &len) != 0 ||
		    (w->orig.tv_sec == 0 && w->orig.tv_usec == 0)) {
			w->state = -1; /* no timeout (or none we can read): retry for ever */
			errno = saved;
			return true;
		}
		w->state = 1;
	}
	if (w->state < 0)
		return true;
	clock_gettime(CLOCK_MONOTONIC, &now);
	total_us = (int64_t)w->orig.tv_sec * 1000000 + w->orig.tv_usec;
	used_us = ((int64_t)now.tv_sec - (int64_t)w->start.tv_sec) * 1000000 +
		  (now.tv_nsec - w->start.tv_nsec) / 1000;
	if (used_us >= total_us) {
		errno = saved;
		return false;
	}
	/* at least 1 us: a zero timeout would mean none */
	left.tv_sec = (time_t)((total_us - used_us) / 1000000);
	left.tv_usec = (suseconds_t)((total_us - used_us) % 1000000);
	(void)setsockopt(w->sock, SOL_SOCKET, w->opt, &left, sizeof(left));
	errno = saved;
	return true;
}

void coffer__sock_wait_end(struct coffer__sock_wait *w)
{
	int saved = errno;

	if (w->state == 1)
		(void)setsockopt(w->sock, SOL_SOCKET, w->opt, &w->orig, sizeof(w->orig));
	errno = saved;
}

int coffer__sock_set_timeout(int sock, unsigned int ms)
{
	struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};

	if (setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
	    setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0)
		return -errno;
	return 0;
}

int coffer__parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	char *end;
	int shift = 0;

	if (s[0] < '0' || s[0] > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0)
		return -ERANGE;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		end++;
		break;
	case 'm':
	case 'M':
		shift = 20;
		end++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		end++;
		break;
	case 't':
	case 'T':
		shift = 40;
		end++;
		break;
	default:
		break;
	}
	if (*end == 'i' && shift != 0)
		end++;
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end != '\0')
		return -EINVAL;
	if (shift != 0 && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
}
