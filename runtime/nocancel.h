/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * runtime/nocancel.h - coffer calls are not cancellation points (coffer/common.h).
 *
 * A thread cancelled (pthread_cancel(), deferred) while it slept inside a coffer call used
 * to unwind out of ppoll(2), read(2), write(2), close(2), sendmsg(2)... in the middle of
 * the runtime's bookkeeping: an EQ's eq_sleepers and eq_waiters stayed raised, its wake
 * list kept a waiter that lived on the dead thread's stack (a later reap wrote through it),
 * a per-sleeper eventfd and a reference on the EQ leaked, a hidden event of a blocking call
 * stayed in flight for good, and a control round trip could leave its connection's lock
 * held (tests/eventq/cancel_test.c). Undoing all that in cleanup handlers would need one
 * for every resource on every path; instead, like most libraries that keep state across a
 * system call, coffer turns cancellation off (pthread_setcancelstate()) around everything
 * that reaches a cancellation point, and restores the caller's state when it is done: a
 * cancel request that arrived meanwhile stays pending and is acted on at the caller's next
 * cancellation point after the coffer call returned.
 *
 * Where: at the entry of every call that makes system calls on its way (connect,
 * disconnect, init/fini, EQ create/destroy, the blocking object calls, channel submit), and,
 * on the paths that must stay cheap when they do not sleep (coffer_eq_poll(),
 * coffer_event_test(): a pthread_setcancelstate() pair costs ~20 ns, as much as an empty
 * poll), only around the system calls themselves (sleeping, ringing a wake fd or a store's
 * doorbell).
 *
 * Cost: two pthread_setcancelstate() calls (an atomic RMW on the calling thread's own
 * descriptor each) per guarded scope. Source: glibc's own internal "no cancel" syscall
 * variants (__close_nocancel & co) for the same reason; POSIX XSH 2.9.5.2.
 */
#ifndef COFFER_NOCANCEL_H
#define COFFER_NOCANCEL_H

#include <pthread.h>

/* Turn cancellation off; returns the caller's state for coffer__cancel_restore(). */
static inline int coffer__cancel_off(void)
{
	int old = PTHREAD_CANCEL_ENABLE;

	(void)pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
	return old;
}

/* Put the caller's state back (never acts on a pending request itself: deferred type). */
static inline void coffer__cancel_restore(const int *old)
{
	int ignored;

	(void)pthread_setcancelstate(*old, &ignored);
}

/*
 * COFFER__NO_CANCEL() - no cancellation from here to the end of the enclosing block, on
 * every way out of it (a cleanup attribute restores the caller's state). One per block;
 * "unused": clang counts the cleanup's use of the variable only sometimes.
 */
#define COFFER__NO_CANCEL()                                                                        \
	const int coffer__cancel_state __attribute__((cleanup(coffer__cancel_restore), unused)) =  \
	    coffer__cancel_off()

#endif /* COFFER_NOCANCEL_H */
