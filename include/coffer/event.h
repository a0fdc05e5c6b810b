/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * coffer/event.h - event queues (EQ) and events, with DAOS semantics.
 *
 * An asynchronous operation is launched with an event that belongs to at most one EQ; the
 * caller reaps it by polling that EQ (or testing the event). States:
 * READY -> RUNNING (launched) -> COMPLETED -> READY (after it was returned by poll or test).
 * The operation's result is in ev_error (0 or a negative errno).
 *
 * Source: DAOS daos_eq_create/daos_eq_poll/daos_event_init (src/client/api/event.c).
 */
#ifndef COFFER_EVENT_H
#define COFFER_EVENT_H

#include <coffer/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * An event. The caller owns its memory (embed it in your I/O descriptor); ev_private is the
 * runtime's and must not be touched between coffer_event_init() and coffer_event_fini().
 */
struct coffer_event {
	int ev_error;            /* result of the last completed operation: 0 or -errno */
	uint32_t ev_pad;
	uint64_t ev_private[22]; /* runtime state (see eventq/event_internal.h) */
};

/* coffer_eq_destroy() flags */
#define COFFER_EQ_FORCE 0x1u /* drain (wait for) running events and discard completed ones */

/* coffer_eq_query() query bits */
#define COFFER_EQR_COMPLETED 0x1u
#define COFFER_EQR_RUNNING   0x2u
#define COFFER_EQR_ALL       (COFFER_EQR_COMPLETED | COFFER_EQR_RUNNING)

COFFER_API int coffer_eq_create(coffer_handle_t *eqh);
COFFER_API int coffer_eq_destroy(coffer_handle_t eqh, unsigned int flags);
COFFER_API int coffer_eq_poll(coffer_handle_t eqh, int wait_running, int64_t timeout_us,
			      unsigned int n, struct coffer_event **events);
COFFER_API int coffer_eq_query(coffer_handle_t eqh, unsigned int query, unsigned int n,
			       struct coffer_event **events);
COFFER_API int coffer_event_init(struct coffer_event *ev, coffer_handle_t eqh,
				 struct coffer_event *parent);
COFFER_API int coffer_event_fini(struct coffer_event *ev);
COFFER_API int coffer_event_test(struct coffer_event *ev, int64_t timeout_us, bool *done);
COFFER_API int coffer_event_parent_barrier(struct coffer_event *ev);

#ifdef __cplusplus
}
#endif

#endif /* COFFER_EVENT_H */
