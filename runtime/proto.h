/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * runtime/proto.h - the wire protocol between libcoffer and coffer-store, and the layout of
 * the shared-memory channel rings. Shared by the client (runtime/) and the store (tools/).
 * docs/protocol.md describes it in prose; this header is the normative layout.
 *
 * Transport. One SOCK_SEQPACKET Unix socket per client process (message boundaries kept by
 * the kernel): connect, fd passing, liveness, errors, statistics and a slow batched request
 * path. The data path is a set of channels: each channel is a pair of single-producer /
 * single-consumer rings (requests client->store, replies store->client) in a shared memory
 * segment that the STORE creates and passes to the client (the store never maps memory that
 * a client supplies). Every multi-byte field is little-endian (the host order on every
 * platform coffer builds for; checked at build time).
 *
 * Socket messages: struct coffer_msg_hdr followed by a body.
 *   HELLO            c->s  body: none.
 *   HELLO_REPLY      s->c  body: struct coffer_hello_reply; SCM_RIGHTS: the arena fd (once
 *                          per process; the client maps it keyed by segment id and
 *                          the file's dev/inode, never by fd),
 *                          then the connection's doorbell page (struct coffer_doorbell),
 *                          then the store's request-doorbell eventfd (v3: one per
 *                          connection, rung for any of its channels; the client writes 8
 *                          bytes to it only), then the object index (v4, read-only), then
 *                          the index's access map (v6, writable; see "Access map").
 *   CHANNEL_OPEN     c->s  body: struct coffer_chan_open; SCM_RIGHTS: one eventfd, the
 *                          client's reply doorbell (the store writes 8 bytes to it only).
 *   CHANNEL_OPEN_REPLY s->c body: struct coffer_chan_open_reply; SCM_RIGHTS: the channel
 *                          segment fd (v3: nothing else).
 *   CHANNEL_CLOSE    c->s  body: struct coffer_chan_close. Reply: CHANNEL_CLOSE_REPLY, no body.
 *   REQUEST          c->s  body: hdr.count x struct coffer_req (1..COFFER_MSG_BATCH_MAX).
 *   REPLY            s->c  body: hdr.count x struct coffer_rep, in request order; requests
 *                          that wait (get) are answered in a later REPLY message.
 *   QUERY            c->s  body: none. QUERY_REPLY s->c body: struct coffer_store_info.
 *   ERROR            s->c  body: struct coffer_msg_error; sent before the store closes a
 *                          client for a protocol violation, or for a version mismatch.
 * hdr.length is the whole message in bytes, header included; it must equal the bytes
 * received. hdr.count is the number of entries for REQUEST/REPLY and 0 otherwise.
 *
 * Channel: the segment holds struct coffer_chan_shm at offset 0, then the request entries
 * at req_off and reply entries at rep_off (both from CHANNEL_OPEN_REPLY). Indices are
 * free-running uint32 counters; entry i lives at slot (i & (entries - 1)). The producer
 * writes entries, then publishes prod with a release store; the consumer reads prod with an
 * acquire load, copies each entry out, then publishes cons with a release store. A consumer
 * about to sleep sets consumer_sleeping = 1, issues a full fence, and re-checks prod; a
 * producer that published issues a full fence, and if consumer_sleeping is set, writes the
 * consumer's doorbell (Dekker-style handshake, as in Linux's virtio used/avail event idea).
 * consumer_cpu is unused: clients leave it 0 and the store ignores it (docs/protocol.md,
 * changelog). Since v3 the request direction uses the connection's doorbell page instead
 * (store_sleeping, store_cpu, struct coffer_doorbell): the request rings' consumer_sleeping
 * stays 0.
 *
 * Trust: the store keeps the ring size and mask in its own memory, copies every entry out
 * of shared memory before looking at it, validates every field, and treats nonsensical
 * indices (prod - cons > entries) as a protocol violation of that client only.
 */
#ifndef COFFER_PROTO_H
#define COFFER_PROTO_H

#include <stdalign.h>
#include <stdint.h>

#include <coffer/store.h>

#define COFFER_PROTO_MAGIC   0x52464643u /* "CFFR" read as little-endian bytes */
#define COFFER_PROTO_VERSION 7u

enum coffer_msg_type {
	COFFER_MSG_HELLO = 1,
	COFFER_MSG_HELLO_REPLY = 2,
	COFFER_MSG_CHANNEL_OPEN = 3,
	COFFER_MSG_CHANNEL_OPEN_REPLY = 4,
	COFFER_MSG_CHANNEL_CLOSE = 5,
	COFFER_MSG_CHANNEL_CLOSE_REPLY = 6,
	COFFER_MSG_REQUEST = 7,
	COFFER_MSG_REPLY = 8,
	COFFER_MSG_QUERY = 9,
	COFFER_MSG_QUERY_REPLY = 10,
	COFFER_MSG_ERROR = 11,
};

/* Largest number of requests in one REQUEST message (and replies in one REPLY). */
#define COFFER_MSG_BATCH_MAX 256
/* Largest socket message: header + COFFER_MSG_BATCH_MAX requests. */
#define COFFER_MSG_MAX_BYTES (16 + COFFER_MSG_BATCH_MAX * 64)

struct coffer_msg_hdr {
	uint32_t magic;	  /* COFFER_PROTO_MAGIC */
	uint16_t version; /* COFFER_PROTO_VERSION */
	uint16_t type;	  /* enum coffer_msg_type */
	uint32_t count;	  /* entries in the body (REQUEST/REPLY), else 0 */
	uint32_t length;  /* bytes of the whole message, header included */
};

enum coffer_op {
	COFFER_OP_CREATE = 1,	/* oid, size, flags COFFER_CREATE_* -> offset */
	COFFER_OP_SEAL = 2,	/* oid, flags COFFER_SEAL_* */
	COFFER_OP_ABORT = 3,	/* oid */
	COFFER_OP_GET = 4,	/* oid, timeout_us -> offset, size (takes a reference) */
	COFFER_OP_RELEASE = 5,	/* oid: drops one reference of this client */
	COFFER_OP_DELETE = 6,	/* oid */
	COFFER_OP_CONTAINS = 7, /* oid -> size = 1 when sealed and present, else 0 */
	COFFER_OP_RESERVE = 8,	/* v5: size -> offset of a block only this client may put */
	COFFER_OP_PUT = 9, /* v5: oid, size, flags COFFER_CREATE_*, offset: seal a reservation */
	COFFER_OP_UNRESERVE = 10, /* v5: offset: give a reservation back */
	COFFER_OP_MAX = 10,
};

/* One request; 64 bytes, identical on the socket and in a channel ring. */
struct coffer_req {
	uint64_t tag;	/* chosen by the client, echoed in the reply */
	uint16_t op;	/* enum coffer_op */
	uint16_t flags; /* op-specific; unknown bits -> -EINVAL */
	uint32_t rsvd0; /* must be 0 */
	uint8_t oid[COFFER_OID_SIZE];
	uint32_t rsvd1;	    /* must be 0 */
	uint64_t size;	    /* CREATE: object size in bytes (0 allowed) */
	int64_t timeout_us; /* GET: 0 = do not wait, < 0 = forever, > 0 = microseconds */
	uint64_t offset;    /* v5, PUT and UNRESERVE: the reservation's arena offset; else 0 */
};

/* One reply; 32 bytes. */
struct coffer_rep {
	uint64_t tag;	  /* the request's tag */
	int32_t status;	  /* 0 or a negative errno */
	uint32_t segment; /* CREATE/GET: segment id of the arena */
	uint64_t offset;  /* CREATE/GET: byte offset of the object in the segment */
	uint64_t size;	  /* GET: object size in bytes; CONTAINS: 1 or 0 */
};

struct coffer_hello_reply {
	uint32_t segment;      /* arena segment id (random per store start) */
	uint32_t hugepages;    /* 1 when the arena is hugepage-backed */
	uint64_t arena_bytes;  /* size to mmap from the passed fd */
	uint32_t max_channels; /* per client process */
	uint32_t max_ring_entries;
	uint64_t index_seed;  /* v4: seed of coffer__index_hash() for this store's index */
	uint32_t index_slots; /* v4: slots in the object index (power of two; 0: no index) */
	uint32_t rsvd;	      /* 0 */
};

/*
 * Object index (v4): a table of sealed objects in shared memory that clients read without
 * a request (coffer_obj_read_oid()), passed as HELLO_REPLY's fourth fd (read-only) when
 * index_slots > 0. The store is its only writer. A sealed object that is an ID's current
 * version is in at most one slot; the slot of ObjectID X is found by linear probing from
 * coffer__index_hash(seed, X) & (index_slots - 1) over at most COFFER_INDEX_PROBE slots,
 * stopping at an EMPTY one. The store fills a slot when an object is sealed and empties it
 * (TOMB) before the object's arena block can be freed (delete, evict, replace).
 * Every slot is a sequence lock: the store makes seq odd, then writes the other fields,
 * then makes seq even again (release). A reader loads seq (acquire; odd: busy), reads the
 * fields and copies the object's bytes, issues an acquire fence and loads seq again: the
 * copy is good only when both loads are equal. An object not in the index (index full in
 * its probe window, being written, or never sealed) is not missing: the client asks the
 * store. Source: the Linux kernel's seqlock (include/linux/seqlock.h) across processes,
 * and Plasma's idea of a client that reads sealed objects straight from shared memory.
 */
#define COFFER_INDEX_PROBE 16u
/*
 * Access map (v6): one bit per index slot, HELLO_REPLY's fifth fd, mapped writable by
 * every client. A client that copied an object through slot i sets bit i (bit i & 7 of byte
 * i / 8), testing it first so that a hot slot costs no write; the store clears a slot's
 * bit when it gives the slot to another object. An object put on the LRU list (seal,
 * release) counts as used too, in the store's own record. When eviction finds the least
 * recently used object used or read since it was last passed over, it clears both marks
 * and moves that object to the tail instead (a second chance), for at most one pass over
 * the list per request, however many objects the request evicts (after it, the rest go in
 * list order). So reads through the index keep an object cached as a get and release
 * would, without a request. The store only ever tests, sets and clears bits: a client that
 * sets bits it did not earn changes which objects are evicted first and can make a request
 * that evicts cost one pass, nothing else. Source: the CLOCK (second-chance) replacement
 * of operating systems' page caches, the referenced bit set by the MMU.
 */
/* Most slots an index may have (4 GiB of slots); a client refuses more (-EPROTO). */
#define COFFER_INDEX_SLOTS_MAX (1u << 26)
enum { COFFER_INDEX_EMPTY = 0, COFFER_INDEX_LIVE = 1, COFFER_INDEX_TOMB = 2 };

struct coffer_index_slot {
	uint32_t seq;			   /* even: stable; odd: the store is writing this slot */
	uint32_t state;			   /* COFFER_INDEX_EMPTY, _LIVE or _TOMB */
	uint32_t oid[COFFER_OID_SIZE / 4]; /* the ObjectID's bytes (LIVE) */
	uint32_t rsvd;
	uint64_t offset; /* byte offset of the object in the arena segment */
	uint64_t size;	 /* object size in bytes */
	uint64_t pad[2];
};

/* Bytes of the access map of an index of @slots slots (v6): one bit per slot. */
static inline uint64_t coffer__access_bytes(uint32_t slots)
{
	return ((uint64_t)slots + 7) / 8;
}

struct coffer_chan_open {
	uint32_t ring_entries; /* power of two, 8..max_ring_entries; 0 = store default */
	uint32_t rsvd;	       /* must be 0 */
};

struct coffer_chan_open_reply {
	uint32_t channel_id;
	uint32_t ring_entries; /* entries in each ring */
	uint64_t shm_bytes;    /* size to mmap from the passed segment fd */
	uint64_t req_off;      /* offset of the request entries in the segment */
	uint64_t rep_off;      /* offset of the reply entries in the segment */
};

struct coffer_chan_close {
	uint32_t channel_id;
	uint32_t rsvd; /* must be 0 */
};

struct coffer_msg_error {
	int32_t status; /* negative errno: -EPROTO, -EPROTONOSUPPORT (version), ... */
	uint32_t rsvd;
	char message[120]; /* NUL-terminated, human-readable */
};

/* One direction's indices, each on its own cache line (producer and consumer never share). */
struct coffer_ring_idx {
	alignas(64) uint32_t prod;		/* written by the producer only */
	alignas(64) uint32_t cons;		/* written by the consumer only */
	alignas(64) uint32_t consumer_sleeping; /* written by the consumer only */
	uint32_t consumer_cpu; /* unused, 0 (was a CPU hint; protocol.md changelog) */
};

struct coffer_chan_shm {
	struct coffer_ring_idx req; /* client produces, store consumes */
	struct coffer_ring_idx rep; /* store produces, client consumes */
};

/*
 * The connection's doorbell page (version 2; v3 as below): HELLO_REPLY's second fd, a sealed
 * memfd of COFFER_DOORBELL_BYTES, one per connection (no other client can map it).
 *
 * Channel c is bit (c / COFFER_DOORBELL_WORDS) of word (c % COFFER_DOORBELL_WORDS), each word
 * on its own cache line, so that the first eight channels (threads) never write one line.
 * After publishing req.prod of channel c and a full fence, the client sets its bit unless it
 * is set, then reads store_sleeping and, when it is set, writes the connection's request
 * doorbell (HELLO_REPLY's third fd). Each round the store exchanges a non-zero word of the
 * channels it has with 0, issues a full fence and polls the channels whose bits were set,
 * besides those it left work on: an idle channel costs it nothing per round (v1 loaded every
 * ring's prod, about 16 ns each, so 500 idle channels slowed every round trip 3x). A bit
 * found already set needs no write: the store has not exchanged it yet, and the client's
 * fence makes its prod visible before that exchange.
 *
 * Going to sleep (v3) the store sets store_sleeping on the page of every connection, issues a
 * full fence and re-reads the doorbell words: a bit set means work, and it stays awake. So
 * sleeping and waking cost the store a line per connection, not per channel (v2 wrote every
 * request ring's consumer_sleeping and re-read every ring's prod: with 4000 idle channels a
 * call that found the store asleep took 95-150 us instead of 25). Bits are therefore how a
 * client gets served: the store polls every channel only every COFFER_DOORBELL_SWEEP_US
 * while awake, and a session's channels when its doorbell eventfd rang without a bit; bits
 * of channels a client does not have are ignored. store_cpu (1 + the CPU the store's loop
 * last ran on, 0 = unknown) is a hint for spinning clients; the request rings'
 * consumer_sleeping is unused (0) since v3.
 * (The bitmap is the "active queue" idea of NVMe/virtio shadow doorbells: tell the poller
 * where to look instead of letting it scan every queue.)
 */
#define COFFER_DOORBELL_WORDS	 8u
#define COFFER_DOORBELL_BYTES	 4096u
#define COFFER_DOORBELL_SWEEP_US 100000u

struct coffer_doorbell {
	struct {
		alignas(64) uint64_t bits; /* set by the client, exchanged with 0 by the store */
	} word[COFFER_DOORBELL_WORDS];
	alignas(64) uint32_t store_sleeping; /* v3: written by the store only */
	uint32_t store_cpu;		     /* v3: written by the store only (a hint) */
	/* Written by the client only, 0 -> 1 once: it gave the store up (a blocking call or
	 * the liveness probe found it silent past COFFER_STORE_TIMEOUT_MS) and failed every
	 * pending request. The store executes no request of the connection's rings once it
	 * sees it set, and ends the session (docs/protocol.md, "Doorbell page"). A store that
	 * predates it ignores it. */
	alignas(64) uint32_t client_gone;
};

_Static_assert(sizeof(struct coffer_msg_hdr) == 16, "wire layout");
_Static_assert(sizeof(struct coffer_req) == 64, "wire layout");
_Static_assert(sizeof(struct coffer_rep) == 32, "wire layout");
_Static_assert(sizeof(struct coffer_index_slot) == 64, "one cache line per slot");
_Static_assert(sizeof(struct coffer_chan_shm) == 384, "wire layout");
_Static_assert(sizeof(struct coffer_doorbell) == 640, "wire layout");
_Static_assert(sizeof(struct coffer_doorbell) <= COFFER_DOORBELL_BYTES, "fits its page");
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the wire format is little-endian");

#endif /* COFFER_PROTO_H */
