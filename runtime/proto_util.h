/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * runtime/proto_util.h - helpers around the wire protocol (runtime/proto.h) used by BOTH
 * sides: libcoffer's connection code and coffer-store. Private to the build (not installed).
 *
 * Everything here is pure validation / encoding plus thin socket wrappers; none of it keeps
 * state, so any thread may call any of it. Every function returns 0 (or a byte count) or a
 * negative errno and never prints or aborts on peer input.
 */
#ifndef COFFER_PROTO_UTIL_H
#define COFFER_PROTO_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>

#include <coffer/hash.h>

#include "runtime/proto.h"

/* Most file descriptors one socket message may carry (HELLO_REPLY carries five). */
#define COFFER_MSG_FDS_MAX 5

/* Channel rings: limits the store enforces (and announces in HELLO_REPLY). */
#define COFFER_RING_ENTRIES_MIN	    8u
#define COFFER_RING_ENTRIES_DEFAULT 256u
#define COFFER_RING_ENTRIES_MAX	    4096u
#define COFFER_CHANNELS_MAX	    512u /* per connection: every bit of the doorbell page */

_Static_assert(COFFER_CHANNELS_MAX <= 64 * COFFER_DOORBELL_WORDS, "a doorbell bit per channel");

/* Sets channel @id's bit on the doorbell page @db unless it is set (runtime/proto.h). Call
 * after the full fence that follows the publish of req.prod, and read store_sleeping after
 * it with a seq_cst load (the bit's write is seq_cst: Dekker with try_sleep() in the store).
 * Context: any thread. */
static inline void coffer__doorbell_ring(struct coffer_doorbell *db, uint32_t id)
{
	uint64_t *w = &db->word[id % COFFER_DOORBELL_WORDS].bits;
	uint64_t bit = UINT64_C(1) << (id / COFFER_DOORBELL_WORDS);

	if ((__atomic_load_n(w, __ATOMIC_RELAXED) & bit) == 0)
		__atomic_fetch_or(w, bit, __ATOMIC_SEQ_CST);
}

/* RELEASE flag (additive, protocol version 1): req.size holds the arena offset of the exact
 * object to release (disambiguates an old and a new object of one ID after a replace). */
#define COFFER_RELEASE_BY_OFFSET 0x1u

/**
 * coffer__msg_hdr_init() - fill a message header.
 * @hdr: header to fill.
 * @type: enum coffer_msg_type.
 * @count: entries in the body (REQUEST/REPLY), else 0.
 * @length: bytes of the whole message, header included.
 * Context: any thread.
 */
void coffer__msg_hdr_init(struct coffer_msg_hdr *hdr, uint16_t type, uint32_t count,
			  uint32_t length);

/**
 * coffer__msg_body_size() - fixed body size of a message type.
 * @type: enum coffer_msg_type.
 *
 * Return: body bytes for fixed-size messages; for REQUEST/REPLY the size of ONE entry;
 * -EPROTO for an unknown type.
 */
long coffer__msg_body_size(uint32_t type);

/**
 * coffer__msg_check() - validate a received socket message's header against its length.
 * @buf: the received bytes (at least @len readable).
 * @len: bytes received (the kernel keeps SOCK_SEQPACKET boundaries).
 * @hdr: out: a copy of the header (valid when 0 is returned, and also for -EPROTONOSUPPORT
 *       so the receiver can name the peer's version).
 *
 * Checks magic, version, a known type, hdr.length == @len, and count: 1..COFFER_MSG_BATCH_MAX
 * with length == 16 + count * entry size for REQUEST/REPLY, 0 with the fixed body size for
 * the rest.
 *
 * Return: 0; -EPROTO (truncated, bad magic, unknown type, length or count mismatch);
 * -EPROTONOSUPPORT (good magic, other version).
 * Context: any thread; reads only @buf.
 */
int coffer__msg_check(const void *buf, size_t len, struct coffer_msg_hdr *hdr);

/**
 * coffer__req_check() - validate one request's fields (not its semantics).
 * @req: a request ALREADY COPIED out of shared memory or the receive buffer.
 *
 * Checks: known op; reserved fields zero; flags known for the op (CREATE and PUT: REPLACE;
 * SEAL: RELEASE; RELEASE: COFFER_RELEASE_BY_OFFSET; others: none); size only for CREATE,
 * RESERVE, PUT (and RELEASE with BY_OFFSET), timeout_us only for GET, offset only for PUT and
 * UNRESERVE, and an all-zero ObjectID for RESERVE and UNRESERVE.
 *
 * Return: 0, or -EINVAL.
 * Context: any thread.
 */
int coffer__req_check(const struct coffer_req *req);

/**
 * coffer__rep_check() - validate one reply from the store before trusting it (client side).
 * @rep: a reply already copied out of shared memory or the receive buffer.
 * @op: the op of the request with this tag (the client knows it from its own records).
 * @segment: the arena segment id from HELLO_REPLY.
 * @arena_bytes: the arena size from HELLO_REPLY.
 *
 * Checks: status is 0 or a negative errno that docs/protocol.md gives @op (-EINVAL for any
 * op; e.g. -EEXIST for CREATE, never for RELEASE; test_status_outside_protocol); for
 * successful CREATE/GET the segment
 * matches and [offset, offset + size) lies inside the arena (CREATE's and RESERVE's size is
 * the client's own, so only offset <= arena_bytes is checked); CONTAINS's size is 0 or 1.
 *
 * Return: 0, or -EPROTO.
 * Context: any thread.
 */
int coffer__rep_check(const struct coffer_rep *rep, uint16_t op, uint32_t segment,
		      uint64_t arena_bytes);

/**
 * coffer__send_fds() - send one SOCK_SEQPACKET message, optionally with fds (SCM_RIGHTS).
 * @sock: a connected Unix socket.
 * @buf: message bytes.
 * @len: bytes (<= COFFER_MSG_MAX_BYTES).
 * @fds: fds to pass (may be NULL when @nfds is 0); they stay open in the sender.
 * @nfds: 0..COFFER_MSG_FDS_MAX.
 * @flags: extra send flags (MSG_DONTWAIT); MSG_NOSIGNAL is always added (never SIGPIPE).
 *
 * Retries EINTR within what is left of the socket's send timeout (struct coffer__sock_wait);
 * once it ran out, sends if there is room now, else -EAGAIN.
 * Return: bytes sent (== @len; SEQPACKET is all or nothing); -EAGAIN (nonblocking, buffer
 * full); -EPIPE/-ECONNRESET (peer gone); -EINVAL (bad @nfds); other -errno from sendmsg.
 * Context: any thread; async-signal-safe.
 */
long coffer__send_fds(int sock, const void *buf, size_t len, const int *fds, unsigned int nfds,
		      int flags);

/**
 * coffer__is_eventfd() - whether @fd is an eventfd (/proc/self/fd names it
 * "anon_inode:[eventfd]"). Both sides check a doorbell fd their peer passed before they
 * write to it: a pipe or socket could raise SIGPIPE, a file would take our bytes.
 * Return: true or false (also when /proc cannot tell). Context: any thread.
 */
bool coffer__is_eventfd(int fd);

/**
 * coffer__fd_mappable() - whether a file the store passed can be mapped shared for @bytes
 * without the store being able to make our touches of the mapping fault.
 * @fd: the file (arena, object index, doorbell page, channel rings).
 * @bytes: how many bytes from offset 0 the caller will map.
 * @st: out (may be NULL): the file's fstat, when the answer is 0.
 *
 * A page of a shared mapping past the end of its file raises SIGBUS when touched, so a
 * store that truncated a file after we mapped it could kill us at any later read, copy or
 * doorbell ring. Accepted are: a regular file of at least @bytes sealed against shrinking
 * (F_SEAL_SHRINK: what coffer-store's memfds carry), and a hugetlbfs file of at least
 * @bytes, which cannot be sealed (coffer-store -d): a hostile store can still shrink that
 * one (docs/protocol.md). A shmem file without F_SEAL_SHRINK, any other file, a pipe or a
 * socket is refused.
 * Return: 0; -EPROTO (refused). Context: any thread.
 */
int coffer__fd_mappable(int fd, uint64_t bytes, struct stat *st);

/**
 * coffer__map_errno() - the error to report when mmap(2) of a file the store passed failed.
 * @err: mmap's errno.
 *
 * Only -ENOMEM (no address space or page tables) is ours; every other errno says the store
 * passed a file that cannot be mapped as the protocol requires (EACCES: opened read-only,
 * EPERM: sealed against writing, ENODEV, EBADF, ...), which coffer/store.h reports as
 * -EPROTO. Passed through, EACCES would read as "refused by the store" (coffer_strerror()).
 * Return: -ENOMEM or -EPROTO. Context: any thread.
 */
int coffer__map_errno(int err);

/**
 * coffer__recv_fds() - receive one SOCK_SEQPACKET message and any fds it carries.
 * @sock: a connected Unix socket.
 * @buf: receive buffer.
 * @cap: its size; a larger message is reported as -EMSGSIZE (the rest is discarded by the
 *       kernel), so pass cap > the largest legal message to detect oversized ones.
 * @fds: out: received fds (close-on-exec); may be NULL when @maxfds is 0.
 * @nfds: out: how many fds were stored in @fds (always set, also on error: 0).
 * @maxfds: capacity of @fds, 0..COFFER_MSG_FDS_MAX. Extra fds are closed, never leaked.
 * @flags: extra recv flags (MSG_DONTWAIT).
 *
 * Retries EINTR within what is left of the socket's receive timeout (struct
 * coffer__sock_wait); once it ran out, takes a message that came meanwhile, else -EAGAIN.
 * On any error every received fd is closed (so a caller never leaks them).
 * Return: bytes received (> 0); 0 at end of stream (peer closed); -EAGAIN; -EMSGSIZE
 * (message or control data truncated, or more fds than @maxfds); -EMFILE (the message was
 * consumed but the kernel could not install its fds: this process is at its fd limit; the
 * message itself is lost, answer it with a non-fatal error); other -errno.
 * Context: any thread.
 */
long coffer__recv_fds(int sock, void *buf, size_t cap, int *fds, unsigned int *nfds,
		      unsigned int maxfds, int flags);

/**
 * coffer__recv_fds_kept() - coffer__recv_fds(), and when it returns -EMFILE, the message's
 * payload, which the kernel delivered intact without its fds: it is in @buf and *@kept is
 * its length (0 in every other case). For a caller that must undo what the peer did for a
 * message it could not take whole (a channel the store opened for a reply whose fds this
 * process had no room for).
 * @since: NULL, or when the call this receive belongs to began (CLOCK_MONOTONIC): the
 *         socket's receive timeout then runs from there, not from this receive, so that a
 *         call made of several receives waits at most one timeout in all (a peer sending
 *         one unwanted message after another cannot stretch it); once it ran out, only a
 *         message already queued is taken (coffer__sock_wait_begin_at()).
 * @kept: out: bytes of the payload in @buf when the return is -EMFILE, else 0.
 * Return, Context: as coffer__recv_fds().
 */
long coffer__recv_fds_kept(int sock, void *buf, size_t cap, int *fds, unsigned int *nfds,
			   unsigned int maxfds, int flags, const struct timespec *since,
			   size_t *kept);

/* How long a client waits for the store's answer to one control message (HELLO,
 * CHANNEL_OPEN, QUERY): a store that is alive is single-threaded and answers in microseconds;
 * one that is stopped (SIGSTOP) or is not a coffer-store must not hang its clients. */
#define COFFER_CTL_TIMEOUT_MS 10000

/*
 * Retrying a blocking socket call that failed with EINTR within its own timeout. Linux fails
 * a blocking socket call that has a timeout (SO_RCVTIMEO, or SO_SNDTIMEO, under which a Unix
 * connect() waits too) with EINTR on every caught signal, SA_RESTART or not (signal(7)), and
 * a plain retry starts the whole timeout again: a host's periodic signal shorter than the
 * timeout (a profiler's SIGPROF, a SIGALRM tick) then keeps the call waiting for as long as
 * it comes (test_ctl_timeout_under_signals). So the retry gets only what is left of the
 * timeout the first attempt started with; the socket's own timeout is put back at the end.
 * A socket without a timeout is retried as before, for ever.
 * Usage: coffer__sock_wait_begin() before the first attempt; after each EINTR,
 * coffer__sock_wait_retry() (false: the time is up, report the timeout's EAGAIN);
 * coffer__sock_wait_end() once done, whatever the outcome.
 * Context: any thread, async-signal-safe; the socket's timeout options belong to the
 * caller from begin to end (no other thread may change or rely on them meanwhile).
 */
struct coffer__sock_wait {
	int sock;
	int opt;   /* SO_RCVTIMEO or SO_SNDTIMEO */
	int state; /* 0: no EINTR yet; 1: the timeout shortened (orig to put back); -1: none */
	struct timeval orig;
	struct timespec start;
};

void coffer__sock_wait_begin(struct coffer__sock_wait *w, int sock, int opt);
/* coffer__sock_wait_begin() for an attempt that belongs to a call which began at @start (a
 * CLOCK_MONOTONIC time): the socket's timeout runs from @start and is shortened to what is
 * left of it. Return: false when it is used up already (make one non-blocking attempt:
 * what came meanwhile still counts); true otherwise. coffer__sock_wait_end() either way. */
bool coffer__sock_wait_begin_at(struct coffer__sock_wait *w, int sock, int opt,
				const struct timespec *start);
bool coffer__sock_wait_retry(struct coffer__sock_wait *w);
void coffer__sock_wait_end(struct coffer__sock_wait *w);

/**
 * coffer__sock_set_timeout() - bound blocking sends and receives on @sock.
 * @sock: a socket.
 * @ms: milliseconds (SO_RCVTIMEO and SO_SNDTIMEO); a blocking call that waits longer fails
 *      with -EAGAIN.
 * Return: 0, or -errno from setsockopt.
 * Context: any thread.
 */
int coffer__sock_set_timeout(int sock, unsigned int ms);

/**
 * coffer__parse_size() - parse a byte count as the tools' command lines take it.
 * @s: decimal digits with an optional K, M, G or T suffix in either case (powers of 1024),
 *     optionally followed by "i" and/or "B" in that order; a bare "B"/"b" after the digits
 *     means bytes ("512", "512B", "4K", "4k", "64MiB", "1G", "1GB": all powers of 1024, so
 *     "1GB" is 2^30 bytes). Nothing else: no sign, spaces, hex, or P and larger suffixes.
 * @out: out: bytes.
 * Return: 0; -EINVAL (not of that form); -ERANGE (does not fit in 64 bits).
 * Context: any thread.
 */
int coffer__parse_size(const char *s, uint64_t *out);

/**
 * coffer__default_socket_path() - where coffer-store listens when -s is not given, and
 * where coffer_connect(NULL) looks: $COFFER_SOCKET if set and non-empty; else
 * $XDG_RUNTIME_DIR/coffer.sock if that directory exists; else /run/user/UID/coffer.sock if
 * that directory exists; else /tmp/coffer-UID.sock.
 * @buf: out: the path, NUL-terminated.
 * @len: size of @buf (108 fits any sockaddr_un path).
 *
 * Return: 0, or -ENAMETOOLONG.
 * Context: any thread (reads the environment: not thread-safe against setenv()).
 */
int coffer__default_socket_path(char *buf, size_t len);

/**
 * coffer__ring_ok() - the index sanity check both sides apply to a peer-written index.
 * @prod: producer index.
 * @cons: consumer index.
 * @entries: ring entries (power of two), from one's own memory, never re-read from shm.
 *
 * Return: true when 0 <= prod - cons <= entries (free-running uint32 arithmetic).
 */
static inline int coffer__ring_ok(uint32_t prod, uint32_t cons, uint32_t entries)
{
	return (uint32_t)(prod - cons) <= entries;
}

/**
 * coffer__index_hash() - where ObjectID @oid starts its probe in a store's object index
 * (runtime/proto.h, struct coffer_index_slot): the slot is the result & (index_slots - 1).
 * @seed: HELLO_REPLY's index_seed.
 * @oid: COFFER_OID_SIZE bytes.
 * Return: the 64-bit hash. Context: any thread; pure.
 */
static inline uint64_t coffer__index_hash(uint64_t seed, const uint8_t *oid)
{
	uint64_t a, b;
	uint32_t c;

	memcpy(&a, oid, 8);
	memcpy(&b, oid + 8, 8);
	memcpy(&c, oid + 16, 4);
	return coffer_hash_mix64(coffer_hash_mix64(a ^ seed) ^ b) ^ coffer_hash_mix64(c + seed);
}

#endif /* COFFER_PROTO_UTIL_H */
