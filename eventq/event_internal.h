/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * eventq/event_internal.h - what lower layers (runtime/, the IPC channel) use of the event
 * queues. eventq/ knows nothing of IPC: the runtime registers a progress hook per EQ, and
 * poll calls it.
 */
#ifndef COFFER_EVENT_INTERNAL_H
#define COFFER_EVENT_INTERNAL_H

#include <coffer/event.h>

/*
 * coffer__event_launch() - READY -> RUNNING; counts the event as running on its EQ.
 * Return: 0; -EBUSY when the event is not READY; -ENOENT when its EQ was destroyed;
 * -EINVAL when @ev was never initialised.
 * Context: any thread; not inside an RCU read-side section.
 */
int coffer__event_launch(struct coffer_event *ev);

/*
 * coffer__event_complete() - RUNNING -> COMPLETED with result @rc (0 or -errno); makes the
 * event pollable on its EQ (and completes its parent when it was the last child), and wakes
 * pollers that sleep.
 * Context: any thread, including from inside a progress hook called by poll.
 */
void coffer__event_complete(struct coffer_event *ev, int rc);

/*
 * Progress hook of an EQ (the runtime attaches the IPC channel of that EQ). All three run
 * under no EQ lock; several pollers may call them concurrently (the hook serialises itself).
 */
struct coffer__eq_progress {
	/* Drain whatever completed; never blocks. Return events completed (>= 0) or -errno
	 * (a dead peer: the hook has completed every pending event with an error already). */
	int (*progress)(void *arg);
	/* Called before a poller sleeps on the EQ's wake fd: ask the peer to ring the doorbell
	 * (write the wake fd) on its next reply. Return 0 when sleeping is safe, > 0 when work
	 * arrived meanwhile (do not sleep). */
	int (*arm)(void *arg);
	/* Called after the poller woke: the doorbell is no longer needed. */
	void (*disarm)(void *arg);
	void *arg;
};

/*
 * coffer__eq_set_progress() - attach (or with @p == NULL detach) the progress hook.
 * Return: 0, -ENOENT (no such EQ), -EBUSY (a hook is already attached).
 */
int coffer__eq_set_progress(coffer_handle_t eqh, const struct coffer__eq_progress *p);

/*
 * coffer__eq_wake_fd() - the eventfd (EFD_NONBLOCK) that sleeping pollers of @eqh wait on;
 * the runtime hands a duplicate to the store as the reply doorbell.
 * Return: fd >= 0, or -ENOENT.
 */
int coffer__eq_wake_fd(coffer_handle_t eqh);

#endif /* COFFER_EVENT_INTERNAL_H */
