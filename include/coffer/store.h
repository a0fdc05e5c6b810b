/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * coffer/store.h - client API of coffer-store: connections, object handles, and the object
 * operations create / seal / get / release / abort / delete / contains.
 *
 * Objects live in the store's shared arena and are named by a 20-byte ObjectID (Plasma's).
 * States: CREATED (writable by its creator) -> SEALED (immutable, visible to every client).
 * Pointers returned by create and get point straight into the arena (zero copy); they stay
 * valid until the matching seal+release (creator) or release (reader).
 *
 * Every object operation takes an optional event: ev == NULL blocks until the store answered
 * (a store that is alive but silent for the request's own timeout plus the store timeout -
 * stopped, wedged - is treated as dead: the call fails with -ETIMEDOUT, and every later call
 * on that connection with -ENOTCONN);
 * with an event the call returns at once and the result lands in ev->ev_error when the event
 * completes on its EQ (coffer_eq_poll or coffer_event_test). Outputs (pointers, sizes) are
 * written where the call said before the event completes; they must stay valid until then.
 *
 * Liveness: the store timeout is COFFER_STORE_TIMEOUT_MS (milliseconds, 100..3600000, default
 * 10000, read by coffer_connect()). It bounds every control exchange as a whole (the request,
 * its answer, and any message the store sent unasked on the way: one deadline, not one per
 * message), and coffer_connect()'s wait for room in a full listen backlog; once a step's time
 * is up it still takes what came meanwhile (an answer, room), so a caller stopped (SIGSTOP)
 * past the timeout is not failed for its own stop. Besides, it drives each
 * connection's monitor thread: when requests have gone unanswered for a whole timeout, it
 * asks the store for its statistics on the socket, and a store that does not answer within
 * the timeout fails the connection. Every pending event then completes with -ENOTCONN (at
 * most about three timeouts after the store stopped answering), so nothing waits forever on
 * a stopped store, and a blocking call waiting on it returns -ETIMEDOUT (the store went
 * silent; -ENOTCONN says it is gone), however long its own timeout; a get waiting for a seal
 * on a live store is not disturbed. Source: DAOS
 * (CaRT) RPC timeouts.
 *
 * Outcome of a request on a connection given up on: when the connection fails, the client
 * marks it gone on its doorbell page and shuts its socket down before it completes a single
 * pending request (-ETIMEDOUT for the blocking call, -ENOTCONN for events). A store that was
 * only stopped or wedged, once it runs again, executes no further request of that connection
 * and ends its session at once (as a coffer_disconnect() does): its unsealed objects are
 * aborted, its reserved blocks freed, its references dropped. So a request reported
 * -ETIMEDOUT or -ENOTCONN was not executed - except one the store had already begun when it
 * stopped (a stop in the middle of executing it), or, from a store slow rather than
 * stopped, one it reached before it saw the mark: that one may have taken effect, once, and
 * its answer is lost. Its outcome is unknown, as with an NFS or DAOS timeout: a
 * seal may have sealed the object (then it is sealed and visible, and no longer this
 * connection's), a create may have created it (then the session's end aborted it again), a
 * delete may have deleted it. Look with coffer_obj_contains() from another connection. Every
 * pointer from create or reserve on that connection is void from the moment a call on it
 * failed so, whatever the outcome: its block was aborted (and may hold another object by
 * now) or sealed (immutable): never write through it again. Readers' pointers from get stay
 * mapped, but their references are dropped: the object may be evicted under them.
 */
#ifndef COFFER_STORE_H
#define COFFER_STORE_H

#include <coffer/common.h>
#include <coffer/event.h>

#ifdef __cplusplus
extern "C" {
#endif

#define COFFER_OID_SIZE 20

/* A 20-byte ObjectID (Plasma's UniqueID). All-zero is a valid ID. */
struct coffer_oid {
	uint8_t id[COFFER_OID_SIZE];
};

/* coffer_obj_create() flags */
#define COFFER_CREATE_REPLACE 0x1u /* the seal atomically replaces a sealed object of this ID */

/* coffer_obj_seal() flags */
#define COFFER_SEAL_RELEASE 0x1u /* drop the creator's reference in the same request */

/* Largest number of ObjectIDs in one coffer_obj_get_bulk() call. */
#define COFFER_GET_BULK_MAX 128

/* Result of one ObjectID in coffer_obj_get_bulk(). */
struct coffer_obj_buf {
	const void *data; /* read-only pointer into the arena, or NULL when missing */
	uint64_t size;	  /* bytes */
	int status;	  /* 0, -ENOENT (missing or unsealed at timeout), or another -errno */
};

/*
 * One get of coffer_obj_get_oid_vec(), read during the call only (nothing of it needs to
 * outlive the call but what data and size point to).
 */
struct coffer_get_vec {
	struct coffer_oid oid;	 /* the ObjectID */
	struct coffer_event *ev; /* completes this get; all events of one call on one EQ */
	const void **data;	 /* out at completion with 0: read-only pointer into the arena */
	uint64_t *size;		 /* out at completion with 0 (may be NULL): size in bytes */
};

/* One read of coffer_obj_read_oid_vec(). */
struct coffer_read_vec {
	struct coffer_oid oid; /* the ObjectID */
	uint64_t offset;       /* first byte of the object to copy */
	void *buf;	       /* where to copy (may be NULL when len is 0) */
	uint64_t len;	       /* most bytes to copy */
	int64_t result;	       /* out: bytes copied, or a negative errno (as coffer_obj_read_oid) */
	uint64_t size;	       /* out when result >= 0: the object's size in bytes */
};

/* Statistics of the store, as coffer_store_query() and coffer-stat report them. */
struct coffer_store_info {
	uint64_t capacity_bytes;
	uint64_t used_bytes;
	uint64_t objects_created; /* objects in state CREATED */
	uint64_t objects_sealed;  /* objects in state SEALED */
	uint64_t clients;
	uint64_t evictions;
	uint64_t evicted_bytes;
	uint32_t hugepages; /* 1 when the arena is backed by hugepages */
	uint32_t version;   /* protocol version spoken by the store */
	/* since protocol v6: */
	uint64_t reserved_blocks; /* blocks reserved (coffer_obj_reserve) and not yet put */
	uint64_t reserved_bytes;  /* their arena bytes, rounded as allocated; within used_bytes */
	uint64_t index_slots;	  /* slots of the shared object index (0: the store has none) */
	uint64_t index_objects;	  /* sealed objects readable through the index now */
	uint64_t index_unplaced;  /* seals since start whose object found no index slot */
	uint64_t second_chances;  /* objects eviction passed over since start: sealed or
				   * released, or read through the index, since they
				   * were last passed over (a CLOCK second chance) */
	/* since protocol v7: */
	uint64_t quick_blocks; /* freed small blocks held uncoalesced on the arena's quick
				* lists (free: not in used_bytes) until the next flush */
	uint64_t quick_bytes;  /* their bytes: part of capacity_bytes - used_bytes, reused at
				* once only by a request of the same size; at most 1/16 of
				* the capacity */
};

/**
 * coffer_connect() - connect to coffer-store and map its arena.
 * @path: the store's socket path, NUL-terminated; NULL = the default ($COFFER_SOCKET, else
 *        $XDG_RUNTIME_DIR/coffer.sock, /run/user/UID/coffer.sock, /tmp/coffer-UID.sock).
 * @connh: out: the connection handle (COFFER_HTYPE_CONN).
 *
 * Says HELLO, receives the arena fd and maps the arena once per process (a second
 * connection to the same store shares the mapping, keyed by segment id and arena file), and
 * starts the connection's monitor thread (it completes pending events with -ENOTCONN if the
 * store dies). Channels are opened later, lazily, one per EQ used with this connection. Takes a
 * reference on the process runtime (coffer_init()); coffer_disconnect() drops it.
 * Environment (read here): COFFER_BATCH (requests queued before they are published without
 * a poll or flush; 1..4096, default 32; 8 already while the store is awake on the channel),
 * COFFER_MAP_POPULATE (1 = pre-fill page tables, the default; 0 = do not), COFFER_POLL_SPIN_US
 * (busy-poll before a poller sleeps, microseconds, 0..1000000, default 50; every connect checks
 * it, but the value used is what the process's first poller to spin reads, once: do not
 * change it after the first connect),
 * COFFER_STORE_TIMEOUT_MS (see "Liveness" above; 100..3600000, default 10000).
 *
 * Return: 0; -EINVAL (@connh NULL, @path "", one of those variables set to anything but a
 * decimal number in its range, or called inside an RCU read-side section);
 * -ENAMETOOLONG (@path, or $COFFER_SOCKET, longer than 107
 * bytes; or, @path NULL, $XDG_RUNTIME_DIR so long that "$XDG_RUNTIME_DIR/coffer.sock" is);
 * -ECONNREFUSED (no store at @path: nothing there, a path through a regular file, a
 * socket of another type, or nothing listening);
 * -EACCES (not the store's user or group: refused by the store or by the file system);
 * -EMFILE (the store, or this process, is out of file descriptors; retry later); -ENFILE (the
 * system is); -ENOSPC (the store cannot watch another connection: its user's
 * fs.epoll.max_user_watches is reached; or this process has issued all its 2^60 handle
 * cookies, coffer/hash.h);
 * -EPROTONOSUPPORT (the store speaks another protocol version); -EPROTO (malformed reply, or an
 * arena, index or doorbell page that cannot be mapped safely, e.g. passed read-only);
 * -ENOTCONN (the store closed the socket); -ETIMEDOUT (no answer within COFFER_STORE_TIMEOUT_MS,
 * default 10 s: a stopped store, or a socket that is not a coffer-store; or the store took
 * no new connection within that time, its listen backlog full); -ENOMEM (here or in the
 * store); -EAGAIN (no thread could be started for the monitor: pthread_create(3)); rarer
 * -errno of socket(2) and connect(2) on @path (-ELOOP, -ENOBUFS). Context: any thread; blocks for
 * one round trip on the socket; not inside an RCU read-side section. Lifetime: the handle is valid
 * until coffer_disconnect(); after a fork(), the child's copy is dead (every call gets -ENOTCONN;
 * events it had in flight complete in the child with -ENOTCONN, in the parent as usual; the child
 * closes its copy of the socket at the fork, so the parent's session ends with the parent's
 * disconnect or exit, whatever its children do) and the child must connect again. Source: Plasma's
 * PlasmaClient::Connect (fd passed once, mapping cached by id).
 */
COFFER_API int coffer_connect(const char *path, coffer_handle_t *connh);

/**
 * coffer_disconnect() - close a connection.
 * @connh: a handle from coffer_connect().
 *
 * Closes the connection's channels (requests still in flight complete with -ENOTCONN on
 * their EQs), stops the monitor and closes the socket; the store then releases every
 * reference this connection held and aborts its unsealed objects. Object handles opened on
 * it stay valid as local records (close them with coffer_obj_close()); every operation on
 * them returns -ENOTCONN (also when this last connection stopped the runtime of a program
 * that never called coffer_init(): the records are gone then, and coffer_obj_close() says
 * -EINVAL). Pointers obtained through the connection must not be used after
 * this call (the arena is unmapped when the last connection to it is gone). When this was
 * the process's last connection, the runtime state kept for blocking calls of the calling
 * thread and the bookkeeping of destroyed EQs are released too, so that a final
 * coffer_fini() finds nothing of the connection layer left (destroy your EQs first).
 *
 * Return: 0; -ENOENT (no such connection, or already disconnected); -EINVAL (not a
 * connection handle, the runtime is not initialised, or called inside an RCU read-side
 * section: nothing changed, the connection stays).
 * Context: any thread; blocks (joins the monitor, waits an RCU grace period, and ends a
 * control exchange another thread has in progress on the socket: that call returns
 * -ENOTCONN); must not be inside an RCU read-side section (refused, see above) nor inside an
 * EQ progress hook.
 * Lifetime: the connection's memory is freed after a grace period once no lookup holds it.
 */
COFFER_API int coffer_disconnect(coffer_handle_t connh);

/**
 * coffer_flush() - publish every queued request of a connection now.
 * @connh: a connection handle.
 *
 * Asynchronous calls queue their requests in the channel of their EQ and publish them as
 * one batch when COFFER_BATCH requests are queued (8 while the store is awake and polling
 * the channel: publishing then costs no syscall), when the EQ is polled, or here. The
 * store's doorbell is rung only if the store sleeps.
 *
 * Return: 0; -EINVAL (not a connection handle: null, an EQ or an object handle; or the
 * runtime not initialised); -ENOENT (no such connection: disconnected, or never issued);
 * -ENOTCONN (the store is gone, or the connection was given up on: a call timed out or the
 * store broke the protocol).
 * Context: any thread; takes each channel's submit spinlock briefly; may write an eventfd.
 */
COFFER_API int coffer_flush(coffer_handle_t connh);

/**
 * coffer_store_query() - read the store's statistics.
 * @connh: a connection handle.
 * @info: out: capacity, used bytes, objects by state, clients, evictions, hugepages,
 *        protocol version, reserved blocks and bytes, the object index's slots, objects
 *        and unplaced seals, second chances, quick-listed free blocks and bytes (see
 *        struct coffer_store_info).
 *
 * Return: 0; -EINVAL (@info NULL, bad handle type, runtime not initialised); -ENOENT (no
 * such connection); -ENOTCONN (store gone, or the connection was given up on earlier);
 * -ETIMEDOUT (no answer within COFFER_STORE_TIMEOUT_MS, or no room for the request in the
 * socket for that long: a stopped store, or one that stopped reading its socket; the
 * connection is given up on); -EPROTO (malformed reply).
 * Context: any thread; one round trip on the control socket (takes its mutex).
 */
COFFER_API int coffer_store_query(coffer_handle_t connh, struct coffer_store_info *info);

/**
 * coffer_obj_open() - create a local handle for an object of a connection (no IPC).
 * @connh: a connection from coffer_connect().
 * @oid: the 20-byte ObjectID (copied; any value, all-zero included).
 * @flags: must be 0 (reserved).
 * @oh: out: the object handle (COFFER_HTYPE_OBJ).
 *
 * The handle names (connection, ObjectID) for coffer_obj_create/seal/abort/get/release. The
 * object need not exist. Opening the same ID twice gives two independent handles.
 *
 * Return: 0; -EINVAL (NULL @oid or @oh, unknown @flags, @connh not a connection handle,
 * runtime not initialised); -ENOENT (no such connection: closed, or never opened);
 * -ENOTCONN (the connection is dead); -ENOMEM; -ENOSPC (this process has issued all its
 * 2^60 handle cookies, coffer/hash.h).
 * Context: any thread; lock-free lookups plus one bucket lock of the handle hash; no store
 * round trip, and no syscall except when the calling thread's chunk of handle records is used
 * up (an mmap(2) of the next one: 16 KiB, doubling up to a hugepage; -ENOMEM if it fails).
 * Lifetime: until coffer_obj_close(); store references taken through it are not dropped by
 * closing it (release them first, or disconnect).
 * Source: DAOS daos_obj_open (a local handle, no RPC).
 */
COFFER_API int coffer_obj_open(coffer_handle_t connh, const struct coffer_oid *oid,
			       unsigned int flags, coffer_handle_t *oh);

/**
 * coffer_obj_close() - destroy a local object handle (no IPC).
 * @oh: a handle from coffer_obj_open().
 *
 * Return: 0; -ENOENT (no such handle, or already closed); -EINVAL (not an object handle,
 * runtime not initialised).
 * Context: any thread; one bucket lock of the handle hash.
 * Lifetime: the record is recycled after an RCU grace period (operations running
 * concurrently on @oh finish safely; later ones get -ENOENT).
 */
COFFER_API int coffer_obj_close(coffer_handle_t oh);

/*
 * Common to every coffer_obj_* operation below (create, seal, abort, get, release,
 * create_oid, seal_oid, abort_oid, get_oid, get_bulk, release_oid, release_oid_bulk,
 * release_data, release_data_bulk, delete, contains):
 *  - An @oh that is not an object handle (null, a connection or an EQ handle): -EINVAL; one
 *    that was closed or never issued: -ENOENT.
 *  - @ev NULL: blocks until the store answered; the return value is the store's result.
 *    (Implemented as the asynchronous call on a hidden per-thread event and EQ plus a wait:
 *    one path, not two.)
 *  - @ev given (initialised on an EQ with coffer_event_init(), READY): returns without
 *    waiting for the answer (only the first call on an EQ and connection waits for one
 *    control round trip, to open the channel: see Context below).
 *    0 means launched: the result is in ev->ev_error when the event completes on its EQ
 *    (coffer_eq_poll() or coffer_event_test(); outputs are written before that and must
 *    stay valid until then). Inputs passed by pointer (ObjectIDs, and the bulk calls'
 *    arrays of IDs and of data pointers) are read during the call only and may be reused
 *    once it returns; the bytes of a block being put are the object's, not an input.
 *    A negative return means the event was NOT launched and nothing was sent: -EAGAIN
 *    (the EQ's channel to this connection is full: 512 requests in flight, or fewer when
 *    the store caps its rings (max_ring_entries); a bulk call needs one slot per request;
 *    poll the EQ, then retry), -EBUSY (the event is not READY), -EINVAL (uninitialised
 *    event, or a parent event one of whose children is not launched yet), -ENOENT (the
 *    event's EQ was destroyed, or is being destroyed: coffer_eq_destroy() refuses every
 *    launch from then on, whether or not the EQ had a channel to this connection; on a
 *    call through an object handle this -ENOENT reads like a closed handle's).
 *  - A bulk call (get_bulk, release_oid_bulk, release_data_bulk, reserve), blocking or not,
 *    of more requests than the channel's ring holds fails with -EINVAL, nothing sent: it
 *    could never be queued. Only a store that caps max_ring_entries below @n does that
 *    (coffer-store allows 4096; libcoffer asks for 512).
 *  - Requests queued on an EQ's channel are published to the store as one batch when
 *    COFFER_BATCH of them are queued (default 32; 8 while the store is awake on the
 *    channel), when the EQ is polled, or by coffer_flush(); the store's doorbell is rung
 *    only when it sleeps.
 *  - Order: the store executes the requests of one channel (one EQ on one connection) in
 *    the order they were launched. Requests of different channels - two EQs, two
 *    connections, or an EQ and the calling thread's blocking calls (its hidden EQ) - are not
 *    ordered against each other, and a launched request may still sit unpublished in its
 *    channel (above) while a later blocking call runs to completion: a get launched on an EQ
 *    and followed by a blocking seal and delete of its object reaches the store after both,
 *    and waits for a new seal. When a call depends on a launched one (a get on the seal
 *    that makes its object visible, a delete on the get it must follow), reap the
 *    launched one's event first; coffer_flush() publishes it but does not order it.
 *  - A connection that dies (store stopped or killed, or a corrupt reply ring) completes
 *    every launched event with -ENOTCONN; later calls return -ENOTCONN.
 *  - Nothing the store answers is trusted: an offset or size outside the arena, a foreign
 *    segment, or a status that is not one docs/protocol.md gives that request (so never a
 *    code the call's list below does not name) completes that event with -EPROTO.
 *  - Context: any thread; not inside an RCU read-side section; with @ev NULL not inside an
 *    EQ progress hook. The first call per (connection, EQ) opens the channel (one control
 *    round trip on the socket: even with an event it then waits for the store, up to
 *    COFFER_STORE_TIMEOUT_MS, and returns -ETIMEDOUT from a stopped one; and a grace
 *    period). Opening it can fail, nothing launched, with -EINVAL (called inside an RCU
 *    read-side section), -EMFILE (see below), -ENOMEM (here or in the store),
 *    -EPROTO (the store's rings cannot be mapped safely, e.g. passed read-only), -ETIMEDOUT,
 *    -ENOTCONN, or -ENOENT (the EQ is being destroyed).
 *  - A thread's first blocking call (@ev NULL) creates its hidden EQ: it can fail as
 *    coffer_eq_create() does (-ENOMEM, -EMFILE, -ENFILE, -ENOSPC). Blocking calls by connection
 *    (the *_oid, bulk, delete, contains and reservation calls) on a connection whose
 *    disconnect stopped the runtime (no coffer_init() of the caller's) return -ENOTCONN,
 *    as the same calls with an event do.
 *  - A blocking call returns only once its request's completion was reaped from the hidden
 *    EQ, whatever happens meanwhile (the connection dies, its disconnect stops the runtime,
 *    coffer_fini() and coffer_init() run on other threads, the thread is cancelled): the
 *    thread's next blocking call starts from an idle hidden EQ. None is a cancellation
 *    point (coffer/common.h): a cancel request is acted on after the call returned.
 *  - Channels are per (connection, EQ), and a blocking call uses its thread's hidden EQ. A
 *    connection holds at most the store's max_channels live channels (512, sent in
 *    HELLO_REPLY, docs/protocol.md): the first call on one more EQ returns -EMFILE. That
 *    first call also returns -EMFILE when this process (or the store) has no fd to spare
 *    for the channel's descriptors; the store keeps nothing of the failed channel.
 *    A destroyed EQ (a hidden EQ: its thread exited) gives its channel's slot back at
 *    once; the channel itself (its ring, one fd in the store) is closed at the
 *    connection's next channel open or at disconnect. Programs with more concurrent EQs
 *    or blocking threads open more connections.
 */

/**
 * coffer_obj_create() - create a writable object of @size bytes in the store.
 * @oh: object handle.
 * @size: bytes (0 allowed).
 * @flags: 0 or COFFER_CREATE_REPLACE (the seal atomically replaces a sealed object of the
 *         same ID; until then readers see the old one).
 * @data: out: writable pointer into the arena (set when the result is 0).
 * @ev: NULL (blocking) or an event (asynchronous).
 *
 * The creator holds one reference; write the object, then coffer_obj_seal() (or
 * coffer_obj_abort()).
 * Return (or ev_error): 0; -EINVAL (bad arguments or flags, not an object handle); -ENOENT
 * (handle closed or never issued);
 * -EEXIST (the ID exists in any state, or a replacement is already pending); -E2BIG (larger
 * than the store); -ENOMEM (nothing evictable frees enough); -ENOTCONN; -EAGAIN (channel
 * full, @ev only); -EPROTO (the store answered with an offset outside the arena).
 * Lifetime: *@data is valid until the object is sealed and released, or aborted, or until a
 * call on the connection fails with -ETIMEDOUT or -ENOTCONN (the store ends the session and
 * aborts the object, see "Liveness" above).
 * Source: Plasma's PlasmaClient::Create.
 */
COFFER_API int coffer_obj_create(coffer_handle_t oh, uint64_t size, unsigned int flags, void **data,
				 struct coffer_event *ev);

/**
 * coffer_obj_seal() - make the caller's created object immutable and visible to all.
 * @oh: object handle.
 * @flags: 0 or COFFER_SEAL_RELEASE (also drop the creator's reference).
 * @ev: NULL (blocking) or an event.
 *
 * Return (or ev_error): 0; -EINVAL; -ENOENT (no such unsealed object); -EPERM (not the
 * creator); -EALREADY (already sealed); -ENOTCONN; -EAGAIN (@ev only); -ETIMEDOUT (@ev
 * NULL: the store went silent, "Liveness" above: the object was aborted when the store
 * ran again, unless the store had begun this seal before it stopped - then it is sealed;
 * either way the pointer from create is void: never write through it again).
 * Source: Plasma's PlasmaClient::Seal.
 */
COFFER_API int coffer_obj_seal(coffer_handle_t oh, unsigned int flags, struct coffer_event *ev);

/**
 * coffer_obj_abort() - discard the caller's unsealed object (frees its memory).
 * @oh: object handle.
 * @ev: NULL (blocking) or an event.
 *
 * Return (or ev_error): 0; -EINVAL; -ENOENT (no such object); -EPERM (not the creator);
 * -EALREADY (already sealed); -ENOTCONN; -EAGAIN (@ev only).
 * Lifetime: the pointer from create is invalid once this succeeded.
 */
COFFER_API int coffer_obj_abort(coffer_handle_t oh, struct coffer_event *ev);

/**
 * coffer_obj_get() - get a read-only pointer to a sealed object (takes a reference).
 * @oh: object handle.
 * @timeout_us: wait this long for the object to be created and sealed; 0 = do not wait,
 *              negative = forever. The store waits, never the client's thread (unless @ev
 *              is NULL, then the caller blocks up to that long). Nothing cancels a waiting
 *              get but its timeout, the seal, or the end of its connection: at shutdown,
 *              coffer_disconnect() (from any thread) completes it with -ENOTCONN, while
 *              coffer_eq_destroy() answers -EBUSY, or with COFFER_EQ_FORCE waits for it.
 * @data: out: pointer into the arena (set when the result is 0).
 * @size: out (may be NULL): the object's size in bytes.
 * @ev: NULL (blocking) or an event.
 *
 * An object deleted or evicted before the get reaches the store is missing, as one never
 * created: the get waits for a new seal of the ID up to its timeout (the store keeps no
 * record that an ID existed; as Plasma's Get). A producer's readers that must not wait out
 * the timeout for an evicted ID need to learn from the producer which IDs were sealed.
 * Return (or ev_error): 0; -EINVAL; -ENOENT (missing or unsealed at the timeout);
 * -ENOMEM (the store could not record the reference, or the wait; a waiting get may be
 * answered so when its object is sealed); -ENOTCONN; -EAGAIN (@ev only); -EPROTO (the
 * store's offset/size lies outside the arena).
 * Lifetime: *@data stays valid until the reference is released (coffer_obj_release_data()
 *         names it exactly; for coffer_obj_release() see which version a release by ID drops).
 * Source: Plasma's PlasmaClient::Get.
 */
COFFER_API int coffer_obj_get(coffer_handle_t oh, int64_t timeout_us, const void **data,
			      uint64_t *size, struct coffer_event *ev);

/**
 * coffer_obj_release() - drop one reference this client holds on the object.
 * @oh: object handle.
 * @ev: NULL (blocking) or an event.
 *
 * Which reference: the store counts references by ID and client (connection), not by handle
 * or get, and this is a release by ID. While the client holds the current object of the ID,
 * it drops a reference on that; else on the oldest replaced or deleted version of the ID the
 * client still holds. When one connection may hold two versions of an ID at once (gets on
 * both sides of a COFFER_CREATE_REPLACE seal, e.g. through two handles in two threads), use
 * coffer_obj_release_data() with the pointer the get returned instead: a release by ID can
 * drop the other reader's pin on the current version, which a later replace then frees.
 * Return (or ev_error): 0; -EINVAL; -ENOENT (this client holds no reference on that ID);
 * -ENOTCONN; -EAGAIN (@ev only).
 * Lifetime: pointers from the get (or create) this reference came with become invalid.
 */
COFFER_API int coffer_obj_release(coffer_handle_t oh, struct coffer_event *ev);

/**
 * coffer_obj_get_bulk() - get up to COFFER_GET_BULK_MAX objects in one batch.
 * @connh: a connection.
 * @oids: @n ObjectIDs (copied; duplicates allowed: each takes one reference).
 * @n: 1..COFFER_GET_BULK_MAX.
 * @timeout_us: per object, as for coffer_obj_get().
 * @bufs: out: @n results; bufs[i].status is 0 (data, size set), or with data NULL: -ENOENT
 *        (missing or unsealed at the timeout), -ENOMEM (the store could not record the
 *        reference or the wait), -EPROTO (the store's offset/size lies outside the arena),
 *        -ENOTCONN (the connection died first).
 * @ev: NULL (blocking) or an event; it completes when every ID has its answer.
 *
 * All requests go in one batch; each ID that was found holds a reference (release with
 * coffer_obj_release_oid()).
 * Return (or ev_error): 0 when every ID got an answer (see bufs[].status); -EINVAL (bad
 * arguments, not a connection handle); -ENOTCONN (connection unknown, disconnected or dead);
 * -EAGAIN (fewer than @n free slots in the channel, @ev only); -ENOMEM.
 */
COFFER_API int coffer_obj_get_bulk(coffer_handle_t connh, const struct coffer_oid *oids,
				   unsigned int n, int64_t timeout_us, struct coffer_obj_buf *bufs,
				   struct coffer_event *ev);

/**
 * coffer_obj_create_oid() - coffer_obj_create() by ObjectID, without an object handle.
 * @connh: a connection.
 * @oid: the ObjectID (copied).
 * @size: bytes (0 allowed).
 * @flags: 0 or COFFER_CREATE_REPLACE (as for coffer_obj_create()).
 * @data: out: writable pointer into the arena (set when the result is 0).
 * @ev: NULL (blocking) or an event.
 *
 * The same request as coffer_obj_create() on a handle opened for (@connh, @oid), minus the
 * handle: no handle-hash insert, lookup or delete (and no RCU reclaim) per object. Seal or
 * abort it with coffer_obj_seal_oid() / coffer_obj_abort_oid() (or through any handle of
 * the same connection and ID: the store knows objects by ID and client, not by handle).
 * Return (or ev_error): as coffer_obj_create(), except that a bad connection handle is
 * -EINVAL (not a connection handle) or -ENOTCONN (unknown, disconnected or dead), and a NULL
 * @oid is -EINVAL.
 * Lifetime: *@data is valid until the object is sealed and released, or aborted.
 * Source: Plasma's PlasmaClient::Create (which takes an ObjectID, not a handle).
 */
COFFER_API int coffer_obj_create_oid(coffer_handle_t connh, const struct coffer_oid *oid,
				     uint64_t size, unsigned int flags, void **data,
				     struct coffer_event *ev);

/**
 * coffer_obj_seal_oid() - coffer_obj_seal() by ObjectID, without an object handle.
 * @connh: a connection.
 * @oid: the ObjectID (copied).
 * @flags: 0 or COFFER_SEAL_RELEASE (also drop the creator's reference).
 * @ev: NULL (blocking) or an event.
 *
 * Return (or ev_error): as coffer_obj_seal(); a bad @connh is -EINVAL or -ENOTCONN, a NULL
 * @oid -EINVAL.
 * Source: Plasma's PlasmaClient::Seal.
 */
COFFER_API int coffer_obj_seal_oid(coffer_handle_t connh, const struct coffer_oid *oid,
				   unsigned int flags, struct coffer_event *ev);

/**
 * coffer_obj_abort_oid() - coffer_obj_abort() by ObjectID, without an object handle.
 * @connh: a connection.
 * @oid: the ObjectID (copied).
 * @ev: NULL (blocking) or an event.
 *
 * Return (or ev_error): as coffer_obj_abort(); a bad @connh is -EINVAL or -ENOTCONN, a
 * NULL @oid -EINVAL.
 * Lifetime: the pointer from the create is invalid once this succeeded.
 */
COFFER_API int coffer_obj_abort_oid(coffer_handle_t connh, const struct coffer_oid *oid,
				    struct coffer_event *ev);

/**
 * coffer_obj_get_oid() - coffer_obj_get() by ObjectID, without an object handle.
 * @connh: a connection.
 * @oid: the ObjectID (copied).
 * @timeout_us: as for coffer_obj_get() (0 = do not wait, negative = forever).
 * @data: out: pointer into the arena (set when the result is 0).
 * @size: out (may be NULL): the object's size in bytes.
 * @ev: NULL (blocking) or an event.
 *
 * One ID, one request: unlike coffer_obj_get_bulk() of one ID it allocates no shared
 * completion state, and a missing object is the call's (or event's) result, -ENOENT.
 * Release the reference with coffer_obj_release_data() (exact), or coffer_obj_release_oid()
 * (by ID: see there which version that drops).
 * Return (or ev_error): 0; -EINVAL (NULL @oid or @data, not a connection handle); -ENOENT
 * (missing or unsealed at the timeout); -ENOMEM (the store could not record the reference
 * or the wait, as for coffer_obj_get()); -ENOTCONN; -EAGAIN (@ev only); -EPROTO (the store's
 * offset/size lies outside the arena).
 * Lifetime: *@data stays valid until the matching release (see coffer_obj_release_data()).
 */
COFFER_API int coffer_obj_get_oid(coffer_handle_t connh, const struct coffer_oid *oid,
				  int64_t timeout_us, const void **data, uint64_t *size,
				  struct coffer_event *ev);

/**
 * coffer_obj_get_oid_vec() - launch up to @n independent gets by ObjectID as one submission.
 * @connh: a connection.
 * @gets: @n gets (read during the call only); *gets[i].data and *gets[i].size are written
 *        when gets[i].ev completes with ev_error 0, so they must stay valid until then.
 * @n: 1..COFFER_GET_BULK_MAX.
 * @timeout_us: per get, as for coffer_obj_get() (0 = do not wait, negative = forever).
 *
 * Each get is exactly coffer_obj_get_oid(@connh, &gets[i].oid, @timeout_us, gets[i].data,
 * gets[i].size, gets[i].ev): its own request, its own event, its own result (that call's
 * ev_error codes: -ENOENT for a missing object, -ENOMEM, -ENOTCONN, -EPROTO), its own reference
 * (release it with coffer_obj_release_oid() or coffer_obj_release_oid_bulk()). What the vector
 * saves is the per-call work of the channel: one connection lookup, one channel pin and two
 * submit-lock round trips for the whole vector instead of per get, and its ring entries are written
 * back to back, so their cache-line transfers to the store overlap instead of each stalling the
 * next atomic instruction. Unlike coffer_obj_get_bulk(), the gets complete independently (no
 * shared state, no allocation, no waiting for the slowest).
 *
 * Partial launch: when the channel has room for only k < @n requests, or the launch of
 * gets[k].ev fails (e.g. -EBUSY: it is still running), gets[0..k) are launched and k is
 * returned; the events of gets[k..n) were not launched (submit them again later, or one by
 * one with coffer_obj_get_oid() to learn the error).
 * Return: 1..@n, the number of gets launched (gets[0..return)); or, when none was launched:
 * -EINVAL (@n out of range, NULL @gets, a NULL event or data pointer, events on different
 * EQs or not initialised, not a connection handle); -ENOTCONN (unknown, disconnected or dead
 * connection); -EAGAIN (the channel is full); -EBUSY (gets[0].ev is running); -ENOENT (its
 * EQ is being destroyed); -ENOMEM or another error from opening the channel.
 * Threads: any thread; each event belongs to the caller again once it completed.
 * Lifetime: *gets[i].data stays valid until the matching release.
 * Source: Linux io_uring's batched submission (many SQEs, one io_uring_enter()), applied to
 * coffer's channel.
 */
COFFER_API int coffer_obj_get_oid_vec(coffer_handle_t connh, const struct coffer_get_vec *gets,
				      unsigned int n, int64_t timeout_us);

/**
 * coffer_obj_read_oid() - copy bytes of a sealed object into @buf straight from shared
 * memory, without a request to the store, when the store's object index has the object.
 * @connh: a connection.
 * @oid: the ObjectID.
 * @offset: first byte of the object to copy (bytes; at or past the end copies nothing).
 * @buf: where to copy; may be NULL when @len is 0.
 * @len: most bytes to copy.
 * @size: out (may be NULL): the object's whole size in bytes (set on success only).
 *
 * The store keeps every sealed current version of an ID in an index in shared memory that
 * clients map read-only (docs/protocol.md, "Object index"). This call looks @oid up there,
 * copies min(@len, size - @offset) bytes, and checks that the entry did not change while it
 * copied (a sequence lock per entry): the bytes are then exactly those of one sealed
 * version, the one that was current at some moment during the call, and never a mix of
 * two versions or of a freed block. It takes no reference and sends nothing, so the store
 * spends no CPU on it. Since protocol v6 it counts as a use for eviction all the same: it
 * marks the object in the index's access map, and eviction gives a marked object a second
 * chance (CLOCK; docs/protocol.md, "Object index"; coffer_store_info.second_chances counts
 * them). Read-your-writes holds: once a seal (or delete) completed, every later call in any
 * process sees its result.
 * An index miss proves nothing: an object that is missing, unsealed, being replaced or
 * deleted, kept out of the index (its probe window was full), or that changed during the
 * copy four times in a row gives -EAGAIN; then get it from the store with
 * coffer_obj_get_oid(), which also waits for it or reports -ENOENT.
 * Return: the number of bytes copied (0..@len); -EINVAL (NULL @oid, NULL @buf with @len >
 * 0, @connh not a connection handle); -ENOTCONN (connection unknown, disconnected or dead);
 * -EAGAIN (not answered from the index, see above; @buf's contents are then undefined);
 * -EPROTO (the index entry lies outside the arena: a broken store).
 * Threads: any thread, any number at once; lock-free (an RCU read-side critical section
 * around the connection lookup and the copy, so keep @len moderate: copies of gigabytes
 * delay grace periods for their duration).
 * Source: the Linux kernel's seqlock readers (include/linux/seqlock.h), applied across
 * processes; Plasma's clients map sealed objects, but find them only through the store.
 */
COFFER_API int64_t coffer_obj_read_oid(coffer_handle_t connh, const struct coffer_oid *oid,
				       uint64_t offset, void *buf, uint64_t len, uint64_t *size);

/**
 * coffer_obj_read_oid_vec() - coffer_obj_read_oid() of @n ObjectIDs at once, with the
 * memory misses of the batch overlapped.
 * @connh: a connection.
 * @reads: @n reads; each entry's result and size are written.
 * @n: entries (0 is allowed).
 *
 * Each entry is exactly coffer_obj_read_oid(@connh, &oid, offset, buf, len, &size), its
 * result in reads[i].result (bytes copied, -EAGAIN, -EINVAL for a NULL buf with len > 0, or
 * -EPROTO). What the vector saves is waiting for memory one read at a time: it looks up
 * every ID's index slot after prefetching them all, then starts loading the first bytes of
 * every object found, then copies (group prefetching), so a batch of random small reads
 * pays about one memory latency instead of two per read. One connection lookup and one
 * RCU read-side critical section cover the whole call.
 * Return: the number of entries answered from the index (result >= 0), 0..@n; -EINVAL
 * (NULL @reads with @n > 0, @connh not a connection handle); -ENOTCONN (connection
 * unknown, disconnected or dead; no entry is written).
 * Threads: as coffer_obj_read_oid(); @reads belongs to the caller during the call.
 * Source: Chen, Ailamaki, Gibbons, Mowry, "Improving Hash Join Performance through
 * Prefetching" (ICDE 2004), group prefetching.
 */
COFFER_API int coffer_obj_read_oid_vec(coffer_handle_t connh, struct coffer_read_vec *reads,
				       unsigned int n);

/**
 * coffer_obj_release_oid() - drop one reference this client holds on an ObjectID.
 * @connh: a connection.
 * @oid: the ObjectID.
 * @ev: NULL (blocking) or an event.
 *
 * For references taken by coffer_obj_get_bulk() (no handle needed). Drops the reference on
 * the current object of the ID if this client holds one, else on the oldest replaced or
 * deleted version it holds: when one connection may hold two versions of an ID at once (a
 * get before a replace and one after it, e.g. in two threads), release with
 * coffer_obj_release_data() instead, or a release by ID can drop the other reader's pin on
 * the current version, which a later replace then frees.
 * Return (or ev_error): 0; -EINVAL; -ENOENT (no reference held); -ENOTCONN (connection
 * unknown, disconnected or dead); -EAGAIN (@ev only).
 */
COFFER_API int coffer_obj_release_oid(coffer_handle_t connh, const struct coffer_oid *oid,
				      struct coffer_event *ev);

/**
 * coffer_obj_release_data() - drop exactly the reference that came with the pointer @data.
 * @connh: the connection the get (or create) that returned @data went through.
 * @oid: the ObjectID of that object.
 * @data: the pointer that get (coffer_obj_get(), _get_oid(), _get_bulk(), _get_oid_vec())
 *        or create returned; inside the connection's arena mapping.
 * @ev: NULL (blocking) or an event.
 *
 * Unlike a release by ID, this names one version of the ID: a client that holds an old
 * version (got before a COFFER_CREATE_REPLACE was sealed) and the current one (got after)
 * drops the one it is done with, and the other stays pinned. Use it whenever several
 * readers of one ID share a connection while the ID may be replaced, e.g. a cache whose
 * reader threads share a connection with its writers. (0-byte objects all have offset 0,
 * as may the arena's first block: on that tie the store drops a 0-byte version's reference
 * first, which pins no memory, so the real version stays pinned until the last release.)
 * Return (or ev_error): 0; -EINVAL (NULL @oid or @data, @data outside the arena, not a
 * connection handle); -ENOENT (this client holds no reference on that version of the ID);
 * -ENOTCONN (connection unknown, disconnected or dead); -EAGAIN (@ev only).
 * Context: as every coffer_obj_* operation (see above); one lock-free connection lookup.
 * Lifetime: @data, and every pointer into the released version, is invalid once this
 *         succeeded.
 * Source: the store's RELEASE by offset (docs/protocol.md); Plasma releases by ID only.
 */
COFFER_API int coffer_obj_release_data(coffer_handle_t connh, const struct coffer_oid *oid,
				       const void *data, struct coffer_event *ev);

/**
 * coffer_obj_release_oid_bulk() - drop one reference on each of up to COFFER_GET_BULK_MAX
 * ObjectIDs in one batch, completing one event.
 * @connh: a connection.
 * @oids: @n ObjectIDs (copied; duplicates allowed: each drops one reference).
 * @n: 1..COFFER_GET_BULK_MAX.
 * @ev: NULL (blocking) or an event; it completes when every ID has its answer.
 *
 * The releases of coffer_obj_release_oid() for @n IDs (by ID: see there which version each
 * drops), queued together (all or nothing: a channel with fewer than @n free slots takes
 * none) and answered with one event, so that a client dropping many references (a reader's
 * batch) pays for one event instead of @n.
 * Return (or ev_error): 0 when every release succeeded; otherwise -ENOTCONN if the
 * connection died, else the first failure of one ID (-ENOENT: no reference held on it;
 * the other IDs were still released); before launch: -EINVAL (bad arguments); -ENOTCONN;
 * -EAGAIN (fewer than @n free slots in the channel, @ev only); -ENOMEM.
 * Lifetime: pointers from the gets these references came with become invalid.
 */
COFFER_API int coffer_obj_release_oid_bulk(coffer_handle_t connh, const struct coffer_oid *oids,
					   unsigned int n, struct coffer_event *ev);

/**
 * coffer_obj_release_data_bulk() - coffer_obj_release_data() for up to COFFER_GET_BULK_MAX
 * references in one batch, completing one event.
 * @connh: the connection the gets (or creates) that returned @data went through.
 * @oids: @n ObjectIDs (copied), @oids[i] the ID of the object @data[i] points into.
 * @data: @n pointers those gets or creates returned, each inside the connection's arena
 *        (the array is read during the call only).
 * @n: 1..COFFER_GET_BULK_MAX.
 * @ev: NULL (blocking) or an event; it completes when every release has its answer.
 *
 * Each entry drops exactly the reference that came with its pointer, as
 * coffer_obj_release_data() does, and the batch is queued and answered as
 * coffer_obj_release_oid_bulk()'s (all or nothing; one event): for a reader that holds many
 * objects whose IDs may be replaced meanwhile, e.g. a fio job reading blocks that other
 * writes of the same job replace.
 * Return (or ev_error): 0 when every release succeeded; otherwise -ENOTCONN if the
 * connection died, else the first failure of one entry (-ENOENT: no reference held on that
 * version; the others were still released); before launch: -EINVAL (bad arguments, NULL
 * @data or one of its pointers NULL or outside the arena, not a connection handle);
 * -ENOTCONN (connection unknown, disconnected or dead); -EAGAIN (fewer than @n free slots in
 * the channel, @ev only); -ENOMEM.
 * Context: as every coffer_obj_* operation (see above); one lock-free connection lookup.
 * Lifetime: every pointer into a released version is invalid once this succeeded.
 * Source: the store's RELEASE by offset (docs/protocol.md), batched as DAOS batches an EQ's
 * events.
 */
COFFER_API int coffer_obj_release_data_bulk(coffer_handle_t connh, const struct coffer_oid *oids,
					    const void *const *data, unsigned int n,
					    struct coffer_event *ev);

/**
 * coffer_obj_delete() - delete a sealed object.
 * @connh: a connection.
 * @oid: the ObjectID.
 * @ev: NULL (blocking) or an event.
 *
 * New gets stop seeing it at once; its memory is freed after its last release. A replacement
 * of it still being created (COFFER_CREATE_REPLACE) is a separate object and is not affected:
 * its seal makes the ID visible again, with the new contents.
 * Return (or ev_error): 0; -EINVAL; -ENOENT (not present or not sealed); -EBUSY (the only
 * object of that ID is still being created, not a replacement); -ENOTCONN; -EAGAIN (@ev
 * only).
 */
COFFER_API int coffer_obj_delete(coffer_handle_t connh, const struct coffer_oid *oid,
				 struct coffer_event *ev);

/**
 * coffer_obj_reserve() - reserve @n writable arena blocks of @size bytes each that have no
 * ObjectID yet, for coffer_obj_put() to seal later in one request each (protocol v5).
 * @connh: a connection.
 * @size: bytes per block, 1 .. the store's capacity.
 * @n: blocks, 1..COFFER_GET_BULK_MAX: one request each, all in one batch, one event.
 * @data: out: @n writable pointers into the arena; data[i] is NULL when block i could not
 *        be reserved (set by the time the call or its event completes).
 * @ev: NULL (blocking) or an event; it completes when every block has its answer.
 *
 * Each block takes @size rounded up to 64 bytes of arena (2 MiB-aligned from 2 MiB on, as
 * any object); the store's used_bytes counts reserved blocks, and coffer_store_query()
 * reports them apart too (reserved_blocks, reserved_bytes).
 * A create without the ID: reserve blocks ahead of time (no reference, no object, nothing a
 * get can see), write one, and put it under its ID when the data is there: a write then
 * costs one request on its critical path instead of a create and a seal, and a pool of
 * blocks is refilled with one event per batch. A reservation lives until it is put or given
 * back (coffer_obj_unreserve()), or until the connection ends, which frees it: a client
 * killed while writing one loses nothing that was sealed and leaks nothing. Reserved blocks
 * are not evictable; a reserve evicts like a create.
 * Return (or ev_error): 0 when all @n blocks were reserved; else the first failure: -E2BIG
 * (larger than the store), -ENOMEM (nothing evictable frees enough), -EAGAIN (this
 * connection holds COFFER_RESERVE_MAX reservations), -EPROTO (the store answered with an
 * offset outside the arena) - the blocks whose data[i] is not NULL are reserved all the
 * same and are the caller's; -ENOTCONN (connection unknown, disconnected or dead: nothing is
 * reserved; a store that died in the middle of the batch may have answered some blocks
 * first: their data[i] still point into the arena, writable until coffer_disconnect(), but
 * are reserved no more - there is nothing to put or give back); before launch: -EINVAL
 * (size 0, @n out of range, NULL @data, not a connection handle), -EAGAIN (@ev only: fewer
 * than @n free slots in the channel), -ENOMEM.
 * Context: any thread; a reservation belongs to the connection, not to the thread.
 * Lifetime: data[i] is valid until the block is put and the object later leaves the store
 * (replaced, deleted or evicted: only write before the put), until it is given back, or
 * until coffer_disconnect() (also after the store died: the arena stays mapped till then).
 * Source: Plasma's PlasmaClient::Create, split so that the arena block is taken before the
 * ObjectID is known (a preallocated write buffer, filled in place: still zero copy).
 */
COFFER_API int coffer_obj_reserve(coffer_handle_t connh, uint64_t size, unsigned int n, void **data,
				  struct coffer_event *ev);

/* Most reservations one connection may hold at once (coffer_obj_reserve()). */
#define COFFER_RESERVE_MAX 4096u

/**
 * coffer_obj_put() - seal a reserved block as object @oid: what coffer_obj_create_oid(),
 * coffer_obj_seal_oid(COFFER_SEAL_RELEASE) do, in one request, with the bytes already
 * written into the reservation.
 * @connh: the connection that reserved @data.
 * @oid: the ObjectID (copied).
 * @data: the pointer coffer_obj_reserve() returned (the start of the block).
 * @size: the object's size in bytes, 1 .. the size reserved; the object is the first @size
 *        bytes of the block.
 * @flags: 0 or COFFER_CREATE_REPLACE (replace a sealed object of that ID atomically: gets
 *         and coffer_obj_read_oid() see the old version or the new one, never neither).
 * @ev: NULL (blocking) or an event.
 *
 * On success the reservation is used up: the object is sealed, this client holds no
 * reference on it, and the block must not be written again. On failure the reservation
 * stays this client's: put it again (e.g. after -EEXIST) or give it back.
 * Return (or ev_error): 0; -EINVAL (NULL arguments, unknown flags, @size 0 or larger than
 * reserved, @data outside this connection's arena, not a connection handle); -ENOENT (@data
 * is not the start of a reservation of this connection); -EEXIST (the ID exists and no
 * REPLACE, or a version of it is still being written); -ENOMEM; -ENOTCONN; -EAGAIN (@ev
 * only).
 * Context: any thread.
 * Source: Plasma's PlasmaClient::Put (create + copy + seal) without the copy into a buffer
 * the store chose per call.
 */
COFFER_API int coffer_obj_put(coffer_handle_t connh, const struct coffer_oid *oid, const void *data,
			      uint64_t size, unsigned int flags, struct coffer_event *ev);

/**
 * coffer_obj_unreserve() - give a reservation back unused (its memory is freed).
 * @connh: the connection that reserved @data.
 * @data: the pointer coffer_obj_reserve() returned.
 * @ev: NULL (blocking) or an event.
 *
 * Return (or ev_error): 0; -EINVAL (NULL @data, outside this connection's arena, not a
 * connection handle); -ENOENT (not a reservation of this connection: never reserved, already
 * put or given back); -ENOTCONN; -EAGAIN (@ev only).
 * Context: any thread.
 * Lifetime: @data is invalid once this succeeded.
 */
COFFER_API int coffer_obj_unreserve(coffer_handle_t connh, const void *data,
				    struct coffer_event *ev);

/**
 * coffer_obj_contains() - whether a sealed object of that ID is present.
 * @connh: a connection.
 * @oid: the ObjectID.
 * @present: out: true when sealed and present.
 * @ev: NULL (blocking) or an event.
 *
 * Return (or ev_error): 0; -EINVAL (@connh is not a connection handle, or NULL pointers);
 * -ENOTCONN (connection unknown, disconnected or dead); -EAGAIN (@ev only).
 */
COFFER_API int coffer_obj_contains(coffer_handle_t connh, const struct coffer_oid *oid,
				   bool *present, struct coffer_event *ev);

#ifdef __cplusplus
}
#endif

#endif /* COFFER_STORE_H */
