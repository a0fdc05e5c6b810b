/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * runtime/errors.c - coffer_strerror(): names for the negative errnos coffer returns.
 * coffer uses plain errno values (libuv, liburcu and DPDK do the same), so the names are the
 * C library's, with coffer's meaning for the codes whose usual text would mislead.
 */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include <coffer/common.h>

COFFER_API const char *coffer_strerror(int err)
{
	const char *desc;

	if (err == INT_MIN)
		return "unknown error";
	if (err < 0)
		err = -err;
	switch (err) {
	case 0:
		return "success";
	case ENOENT:
		/* Also a release with no reference held, and a put or unreserve of a block that
		 * is not this connection's reservation (store.h). */
		return "no such handle, object, reference or reservation (deleted, never issued, "
		       "not sealed in time, or not held by this connection)";
	case EINVAL:
		/* coffer_init()/coffer_connect() also say -EINVAL for a bad COFFER_* variable,
		 * which no argument explains: coffer_env_check() names it; and the calls that
		 * wait for a grace period (coffer_fini(), coffer_disconnect(),
		 * coffer_eq_destroy(), a channel's open) say it inside a read-side section. */
		return "invalid argument (or a handle of the wrong type, or a bad COFFER_* "
		       "environment variable: coffer_env_check() names it, or a call that waits "
		       "for an RCU grace period made inside an RCU read-side section)";
	case EEXIST:
		/* A create or put of an ID that exists says only this; the fix is a flag. */
		return "object or key already exists (or a replacement of it is still being "
		       "written): to replace a sealed object, create or put with "
		       "COFFER_CREATE_REPLACE";
	case EBUSY:
		return "busy: still in use or still running";
	case ENOMEM:
		return "out of memory (store full of pinned objects, or an allocation failed in "
		       "the client or in coffer-store)";
	case E2BIG:
		return "object larger than the store's capacity";
	case EPERM:
		return "operation not permitted (not the creator or not held)";
	case EALREADY:
		return "already sealed";
	case ENOTCONN:
		return "not connected to coffer-store (store stopped or connection lost)";
	case ECONNREFUSED:
		return "connection refused (is coffer-store running on that socket?)";
	case EACCES:
		/* Only coffer_connect() returns it: refused by the store or by the file system.
		 * "Permission denied" alone does not say that a root client is refused too, nor
		 * what admits another user. */
		return "permission denied (coffer-store admits only its own user, and users in its "
		       "group when started with --socket-mode=0660; or a directory on the socket's "
		       "path is not searchable)";
	case EPROTO:
		/* What store.h says -EPROTO means: the peer on the socket broke the protocol
		 * (a reply, a file or an index entry the client refused to trust). */
		return "protocol error: coffer-store sent a malformed answer or a file that "
		       "cannot be mapped safely (a broken store, or not a coffer-store)";
	case EPROTONOSUPPORT:
		return "protocol version mismatch between client and store (run a coffer-store "
		       "of the same release as libcoffer)";
	case ETIMEDOUT:
		/* The store's silence (coffer_eq_poll()/coffer_event_test() time out with 0, not
		 * with an error), and coffer_connect()'s peer that is not a coffer-store (store.h),
		 * where "connect again" alone would time out again. */
		return "timed out: coffer-store did not answer within COFFER_STORE_TIMEOUT_MS "
		       "(stopped or wedged; from coffer_connect(), also a socket that is not a "
		       "coffer-store's, or a full listen backlog); the connection is given up "
		       "on: connect again";
	case EAGAIN:
		/* store.h's four meanings: an @ev call's full channel, a reserve past
		 * COFFER_RESERVE_MAX, an index miss of coffer_obj_read_oid()/_vec(), and
		 * coffer_connect() finding no thread for the connection's monitor. */
		return "try again (channel full: poll the EQ; or too many reservations; or, from "
		       "a read_oid, not answered from the object index: use a get; or, from "
		       "coffer_connect(), no thread could be started: too many threads)";
	case ENFILE:
		return "too many open files in the system (the system-wide limit, fs.file-max: "
		       "close files, or raise it)";
	case ENAMETOOLONG:
		/* Only coffer_connect(): struct sockaddr_un holds 107 bytes and a NUL. */
		return "socket path too long (a Unix socket path holds at most 107 bytes: use a "
		       "shorter path or COFFER_SOCKET)";
	case ELOOP:
		/* Only coffer_connect(), from connect(2) on the socket's path. */
		return "too many symbolic links on the socket's path (a loop?): give the real "
		       "path of coffer-store's socket";
	case ENOBUFS:
		/* Only coffer_connect(), from socket(2)/connect(2). */
		return "the kernel had no buffer space for the socket to coffer-store (memory "
		       "pressure): retry later";
	case ENOSPC:
		/* coffer_connect(): the store's epoll_ctl() refused to watch the new client
		 * (max_user_watches); every call that makes a handle (coffer_connect(),
		 * coffer_eq_create(), coffer_obj_open(), a thread's first blocking call) and
		 * coffer_hhash_insert(): 2^60 cookies issued (test_cookies_exhausted). */
		return "no room: coffer-store cannot watch another connection (its user's "
		       "fs.epoll.max_user_watches is reached: raise it, or close connections), or "
		       "a handle hash has issued all its cookies";
	case EMFILE:
		/* An object call's -EMFILE is the channel limit, which no fd limit here explains,
		 * or the store out of fds (coffer_connect() too): another connection won't help. */
		return "too many open files (here or in coffer-store), or a connection's 512 "
		       "channels in use (one per EQ and per thread making blocking calls: open "
		       "another connection)";
	default:
		/* Not strerror(): for codes it does not know, glibc formats into a per-thread
		 * buffer that the next such call frees, so the pointer would not stay valid.
		 * strerrordesc_np() (glibc >= 2.32) returns static text or NULL. */
		desc = strerrordesc_np(err);
		return desc ? desc : "unknown error";
	}
}
