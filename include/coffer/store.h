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
 * Every object operation takes an optional event: ev == NULL blocks until the store answered;
 * with an event the call returns at once and the result lands in ev->ev_error when the event
 * completes on its EQ (coffer_eq_poll or coffer_event_test). Outputs (pointers, sizes) are
 * written where the call said before the event completes; they must stay valid until then.
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
	uint64_t size;    /* bytes */
	int status;       /* 0, -ENOENT (missing or unsealed at timeout), or another -errno */
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
};

COFFER_API int coffer_connect(const char *path, coffer_handle_t *connh);
COFFER_API int coffer_disconnect(coffer_handle_t connh);
COFFER_API int coffer_flush(coffer_handle_t connh);
COFFER_API int coffer_store_query(coffer_handle_t connh, struct coffer_store_info *info);

COFFER_API int coffer_obj_open(coffer_handle_t connh, const struct coffer_oid *oid,
			       unsigned int flags, coffer_handle_t *oh);
COFFER_API int coffer_obj_close(coffer_handle_t oh);

COFFER_API int coffer_obj_create(coffer_handle_t oh, uint64_t size, unsigned int flags,
				 void **data, struct coffer_event *ev);
COFFER_API int coffer_obj_seal(coffer_handle_t oh, unsigned int flags, struct coffer_event *ev);
COFFER_API int coffer_obj_abort(coffer_handle_t oh, struct coffer_event *ev);
COFFER_API int coffer_obj_get(coffer_handle_t oh, int64_t timeout_us, const void **data,
			      uint64_t *size, struct coffer_event *ev);
COFFER_API int coffer_obj_release(coffer_handle_t oh, struct coffer_event *ev);

COFFER_API int coffer_obj_get_bulk(coffer_handle_t connh, const struct coffer_oid *oids,
				   unsigned int n, int64_t timeout_us, struct coffer_obj_buf *bufs,
				   struct coffer_event *ev);
COFFER_API int coffer_obj_release_oid(coffer_handle_t connh, const struct coffer_oid *oid,
				      struct coffer_event *ev);
COFFER_API int coffer_obj_delete(coffer_handle_t connh, const struct coffer_oid *oid,
				 struct coffer_event *ev);
COFFER_API int coffer_obj_contains(coffer_handle_t connh, const struct coffer_oid *oid,
				   bool *present, struct coffer_event *ev);

#ifdef __cplusplus
}
#endif

#endif /* COFFER_STORE_H */
