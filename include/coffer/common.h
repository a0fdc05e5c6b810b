/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * coffer/common.h - process runtime, error names and the export macro.
 *
 * Conventions used by every coffer header:
 *  - every fallible function returns 0 (or a count) on success and a negative errno on failure;
 *  - constructors return int and hand the object back through an out-pointer;
 *  - the library never prints and never aborts on a caller's or a peer's mistake;
 *  - no call fails, returns early or waits longer because a signal interrupted it (EINTR,
 *    with or without SA_RESTART): an interrupted wait resumes with what is left of its
 *    timeout, so a host's periodic signals (a profiler's SIGPROF) change nothing;
 *  - any thread may call any function unless its Context says otherwise; coffer registers
 *    threads it has not seen with liburcu on first use (urcu-bp, see runtime/rcu.c);
 *  - signal handlers: only coffer_strerror() is async-signal-safe. Every other function
 *    may take a mutex or a spinlock, allocate, or register the thread with liburcu, so a
 *    handler that calls one while it interrupted a coffer call on the same thread can
 *    deadlock on that call's lock: hand the work to a thread instead (a signalfd, a pipe);
 *  - fork(): the first call that starts coffer (coffer_init(), coffer_connect(),
 *    coffer_htab_create()) installs fork handlers, so a child forked at any moment, from any
 *    thread, can go on using coffer: its tables, handles, EQs and events (coffer_eq_create()),
 *    not its connections, which are dead there (coffer_connect()): it connects again
 *    (test_runtime test_fork, test_eq test_fork_while_eq_locked, test_client test_fork_*);
 *  - thread cancellation: no coffer function is a cancellation point. Each one turns
 *    cancellation off (pthread_setcancelstate()) around whatever it does that could act on a
 *    cancel request (sleeping in coffer_eq_poll(), coffer_event_test() or a blocking
 *    coffer_obj_* call, a control round trip with the store, a grace period) and puts the
 *    caller's state back before it returns: a request sent to a thread inside a coffer call
 *    is acted on at that thread's next cancellation point after the call returned, and the
 *    call leaves nothing behind (no sleeper or waiter counted, no fd, no lock, no event in
 *    flight). Hence a thread cancelled while it waits without a timeout is cancelled only
 *    once the wait ends: give such waits a timeout, or end them (complete the events,
 *    destroy the EQ) when cancelling. What a call made before the cancel acts is the
 *    caller's, as after any return: a connection, a held object, a reservation - release
 *    them in a cleanup handler (pthread_cleanup_push()) if the thread may be cancelled while
 *    it holds them. Asynchronous cancellation (PTHREAD_CANCEL_ASYNCHRONOUS) is not
 *    supported: no coffer function is async-cancel-safe, and none refuses it.
 *    (tests/eventq/cancel_test.c, tests/client/cancel_client_test.c)
 */
#ifndef COFFER_COMMON_H
#define COFFER_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the public API; everything else in libcoffer has hidden visibility. */
#if defined(COFFER_BUILDING_LIBRARY) && defined(__GNUC__)
#define COFFER_API __attribute__((visibility("default")))
#else
#define COFFER_API
#endif

/*
 * A handle names a runtime object (event queue, connection, object handle) by a 64-bit
 * cookie: (counter << COFFER_HTYPE_BITS) | type. Counters are never reused within a process,
 * so a stale handle can never reach a new object. Cookie 0 is never issued.
 */
typedef struct {
	uint64_t cookie;
} coffer_handle_t;

#define COFFER_HANDLE_NULL ((coffer_handle_t){0})

/**
 * coffer_init() - initialise the process runtime (reference-counted).
 *
 * Each successful call must be paired with one coffer_fini(). The first call reads the
 * COFFER_* environment overrides and creates the process handle hash.
 *
 * Return: 0; -ENOMEM; -EINVAL (COFFER_HHASH_BUCKETS_LOG2 or COFFER_HHASH_LOCKS_LOG2 is set
 * but not a decimal number in 1..26, or the locks exceed the buckets; COFFER_RCU_PERCPU set
 * to anything but 0 or 1). The -EINVAL holds only while the variable is bad: fix it
 * (coffer_env_check() names it) and call again. Each variable is read until the first
 * call that succeeds (COFFER_RCU_PERCPU: until the process's first call that starts
 * coffer, coffer_htab_create() included), never after.
 * (Every call that starts the runtime on its own, such as coffer_connect(), returns it too.)
 * Context: any thread, thread-safe; must not be called inside an RCU read-side section.
 */
COFFER_API int coffer_init(void);

/**
 * coffer_fini() - drop one reference to the process runtime.
 *
 * The last call destroys the handle hash (remaining handles are released) and waits for all
 * pending RCU callbacks (rcu_barrier()). Threads that made blocking calls may outlive it
 * (a thread pool joined after shutdown): each one's hidden EQ of blocking calls is released
 * when it exits, and the destroyed hash's memory goes with the last of them.
 * EQs the program did not destroy are closed by the last call as coffer_eq_destroy() closes
 * one: threads sleeping in coffer_eq_poll() on them (any timeout, -1 included) wake and
 * return -ENOENT, launches on their events fail with -ENOENT, and every later call taking
 * their handles returns -EINVAL (not initialised), or -ENOENT once a new coffer_init() has
 * started another runtime (cookies are never reused, so no handle of the old runtime
 * reaches an EQ of the new one). Their events stay initialised and must
 * still be finalised with coffer_event_fini(), which needs no runtime (coffer/event.h).
 * Nothing is refused while EQs or events remain: a shutdown under traffic ends every
 * thread's wait with an error instead of leaving one asleep (examples/ckpt.c does it with
 * threads still submitting; tests/eventq/test_eq.c test_fini_wakes_sleeping_pollers).
 *
 * Return: 0, or -EINVAL when the runtime is not initialised or this call has no successful
 * coffer_init() left to balance (one coffer_fini() too many; the references connections
 * hold, see coffer_connect(), are theirs and are not dropped: nothing changes), or when
 * called inside an RCU read-side section.
 * Context: any thread, thread-safe; must not be called inside an RCU read-side section
 * (rcu_barrier() would deadlock).
 */
COFFER_API int coffer_fini(void);

/**
 * coffer_strerror() - name an error code returned by coffer.
 * @err: a negative errno returned by a coffer function (positive values are accepted too).
 *
 * Return: a static, NUL-terminated string; never NULL.
 * Context: any thread, async-signal-safe.
 */
COFFER_API const char *coffer_strerror(int err);

/**
 * coffer_env_check() - name the first client COFFER_* environment variable that coffer
 * would refuse, for an error message.
 * @name: out (may be NULL): the bad variable's name, a static NUL-terminated string; NULL
 *        when none is bad.
 *
 * coffer_init() and coffer_connect() fail with -EINVAL, rather than take the default, when
 * a variable they read is set (non-empty) but is not plain decimal digits within its range
 * (README.md "Linking a client"). This checks the same variables with the same ranges, in this
 * order: COFFER_HHASH_BUCKETS_LOG2 (1..26), COFFER_HHASH_LOCKS_LOG2 (1..26, and not above
 * COFFER_HHASH_BUCKETS_LOG2, default 18), COFFER_RCU_PERCPU (0 or 1), COFFER_BATCH
 * (1..4096), COFFER_MAP_POPULATE (0 or 1), COFFER_POLL_SPIN_US (0..1000000, microseconds),
 * COFFER_STORE_TIMEOUT_MS (100..3600000, milliseconds). The store's own variables
 * (COFFER_STORE_SPIN_US, COFFER_STORE_SWEEP_US) are coffer-store's to check.
 *
 * Return: 0 (every variable unset, empty or valid; *@name = NULL); -EINVAL (*@name names
 * the first bad one).
 * Context: any thread; needs no coffer_init(); reads the environment with getenv(), so not
 * concurrently with setenv()/unsetenv(). Takes no lock.
 */
COFFER_API int coffer_env_check(const char **name);

#ifdef __cplusplus
}
#endif

#endif /* COFFER_COMMON_H */
