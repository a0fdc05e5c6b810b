/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/store/rawclient.h - a small raw-protocol client for the store's integration tests:
 * starts/stops a real coffer-store on a temporary socket, and speaks runtime/proto.h
 * directly (socket REQUEST path and channel rings), so the store is tested independently
 * of libcoffer's client runtime.
 *
 * Every function returns 0 / a status and never asserts: the tests assert.
 * Context: one thread per connection.
 */
#ifndef COFFER_TESTS_RAWCLIENT_H
#define COFFER_TESTS_RAWCLIENT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "runtime/proto_util.h"

struct rc_store {
	pid_t pid;
	char dir[64];
	char sock[108];
};

/**
 * rc_store_start() - run coffer-store ($COFFER_STORE_EXE) with "-s <tmp>/s.sock -q" plus
 * @args (NULL-terminated; must include -m) and wait up to 10 s for its ready line.
 * Return: 0; or the store's exit status (> 0) when it exited first; -1 on other failure.
 */
int rc_store_start(struct rc_store *s, const char *const *args);

/** rc_store_stop() - SIGTERM, wait; return its exit status (0 = clean) or -1. Removes dir. */
int rc_store_stop(struct rc_store *s);

/** rc_store_alive() - 1 while the store process runs. */
int rc_store_alive(struct rc_store *s);

/** rc_run_exit() - run coffer-store with @args (NULL-terminated), stderr to /dev/null;
 * return its exit status (or 128+signal), killing it after 10 s. */
int rc_run_exit(const char *const *args);

struct rc_conn {
	int fd;
	void *arena;
	uint64_t arena_bytes;
	uint32_t segment;
	int hugepages;
	uint64_t next_tag;
	struct coffer_doorbell *doorbell; /* the connection's doorbell page (HELLO_REPLY) */
	int bell_efd;	  /* the store's request doorbell for every channel (HELLO_REPLY, v3) */
	bool no_doorbell; /* rc_chan_submit() leaves the doorbell bits alone (tests the sweep) */
	int index_fd;	  /* the object index (HELLO_REPLY's fourth fd, v4), as the store sent it */
	const struct coffer_index_slot *index; /* mapped read-only */
	int access_fd;	 /* the index's access map (HELLO_REPLY's fifth fd, v6), as sent */
	uint8_t *access; /* mapped writable, coffer__access_bytes(index_slots) bytes */
	uint32_t index_slots;
	uint64_t index_seed;
};

/** rc_connect() - connect, HELLO, map the arena, the doorbell page and the object index
 * (read-only), keep the request doorbell and the index fd, then one QUERY round trip (the
 * store is done with HELLO). 0 or -errno. */
int rc_connect(struct rc_conn *c, const char *sock);
/** rc_connect_raw() - connect only (no HELLO). 0 or -errno. */
int rc_connect_raw(struct rc_conn *c, const char *sock);
void rc_close(struct rc_conn *c);

/** rc_oid() - a test ObjectID from a number (all-zero for 0). */
void rc_oid(uint8_t oid[COFFER_OID_SIZE], uint64_t n);

/** rc_req_init() - a request with a fresh tag. */
void rc_req_init(struct rc_conn *c, struct coffer_req *r, uint16_t op, uint64_t oidn);

/**
 * rc_batch() - send @n requests in one REQUEST message, then collect @nrep replies (in any
 * REPLY messages) within @timeout_ms. Return: replies collected, or -errno
 * (-ETIMEDOUT, -ECONNRESET when the store closed us, -EPROTO on an ERROR message).
 */
int rc_batch(struct rc_conn *c, const struct coffer_req *reqs, unsigned int n,
	     struct coffer_rep *reps, unsigned int nrep, int timeout_ms);

/** rc_recv_reps() - collect @nrep replies without sending. Same returns as rc_batch. */
int rc_recv_reps(struct rc_conn *c, struct coffer_rep *reps, unsigned int nrep, int timeout_ms);

/* One-request conveniences: return the reply's status (or a transport -errno). */
int rc_create(struct rc_conn *c, uint64_t oidn, uint64_t size, unsigned int flags, void **data);
int rc_seal(struct rc_conn *c, uint64_t oidn, unsigned int flags);
int rc_abort(struct rc_conn *c, uint64_t oidn);
int rc_get(struct rc_conn *c, uint64_t oidn, int64_t timeout_us, const void **data, uint64_t *size);
int rc_release(struct rc_conn *c, uint64_t oidn);
int rc_delete(struct rc_conn *c, uint64_t oidn);
int rc_contains(struct rc_conn *c, uint64_t oidn); /* 1, 0, or -errno */
/** rc_put() - create, fill with @fill, seal with release. */
int rc_put(struct rc_conn *c, uint64_t oidn, uint64_t size, int fill);

/** rc_query() - QUERY. 0 or -errno. */
int rc_query(struct rc_conn *c, struct coffer_store_info *info);
/** rc_query_path() - QUERY on a fresh connection. */
int rc_query_path(const char *sock, struct coffer_store_info *info);

/** rc_send_raw() - send bytes as one message (fds optional). 0 or -errno. */
int rc_send_raw(struct rc_conn *c, const void *buf, size_t len, const int *fds, unsigned int nfds);
/**
 * rc_recv_msg() - receive one message within @timeout_ms into @buf.
 * Return: bytes (> 0), 0 when the store closed the connection, -ETIMEDOUT, -errno.
 */
long rc_recv_msg(struct rc_conn *c, void *buf, size_t cap, int *fds, unsigned int *nfds,
		 int timeout_ms);

/**
 * rc_flood() - send @msg (@len bytes, with @fd unless < 0) on @c again and again, reading no
 * reply, until the socket stays full for @quiet_ms: the store stopped reading this client (a
 * reply of its found our socket full and waits for room).
 * Return: how many were sent (>= 0), or -errno of a send that failed otherwise than -EAGAIN.
 */
long rc_flood(struct rc_conn *c, const void *msg, size_t len, int fd, int quiet_ms);

struct rc_chan {
	struct rc_conn *c;
	uint32_t id, entries;
	void *map;
	size_t map_bytes;
	struct coffer_chan_shm *shm;
	struct coffer_req *reqs;
	struct coffer_rep *reps;
	int req_efd; /* the store's doorbell (a dup of the connection's bell_efd) */
	int rep_efd; /* ours */
	uint32_t prod, cons;
};

/** rc_chan_open() - CHANNEL_OPEN with @entries (0 = default). 0 or -errno (ERROR status). */
int rc_chan_open(struct rc_conn *c, struct rc_chan *ch, uint32_t entries);
/** rc_chan_close() - CHANNEL_CLOSE and unmap. 0 or -errno. */
int rc_chan_close(struct rc_chan *ch);
/** rc_chan_unmap() - unmap and close without telling the store. */
void rc_chan_unmap(struct rc_chan *ch);
/** rc_chan_submit() - enqueue @n requests (must fit), set the channel's doorbell bit (unless
 * c->no_doorbell) and ring the store's eventfd if it sleeps. */
int rc_chan_submit(struct rc_chan *ch, const struct coffer_req *reqs, unsigned int n);
/**
 * rc_chan_taken() - wait up to @timeout_ms until the store has taken every request submitted
 * on @ch from its request ring (its consumer index reached ours), polling every millisecond:
 * a submit that needs that room, or a check that the store holds a request, may follow
 * without a guess at how long a store descheduled on a loaded machine takes.
 * Return: 0, or -ETIMEDOUT.
 */
int rc_chan_taken(struct rc_chan *ch, int timeout_ms);
/**
 * rc_chan_wait() - collect @n replies within @timeout_ms, sleeping on the reply doorbell
 * (consumer_sleeping handshake). Return: collected count (< n on timeout).
 */
int rc_chan_wait(struct rc_chan *ch, struct coffer_rep *reps, unsigned int n, int timeout_ms);

/** rc_count_fds() - open fds of process @pid (from /proc), or -1. */
int rc_count_fds(pid_t pid);

/** rc_cpu_ticks() - CPU time (utime + stime, from /proc) of process @pid in clock ticks, or
 * -1. */
long rc_cpu_ticks(pid_t pid);

#endif /* COFFER_TESTS_RAWCLIENT_H */
