/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * runtime/rcu.h - coffer's private RCU layer: urcu-bp read-side markers (inlined), the
 * process-wide set-up (fork handlers), and a barrier that also flushes coffer's batched
 * reclamation. See runtime/rcu.c for why urcu-bp and how fork is handled.
 *
 * This is the one piece of runtime/ that lower layers (hashtable/) use: it is the RCU
 * foundation of the whole library, not part of the store connection.
 */
#ifndef COFFER_RUNTIME_RCU_H
#define COFFER_RUNTIME_RCU_H

#include <stdbool.h>

#include <urcu/urcu-bp.h>

#include <coffer/hash.h>

/*
 * ThreadSanitizer cannot see liburcu's grace periods (they are made of inline-asm barriers
 * and membarrier(2) inside an uninstrumented library) nor the hand-off of a callback to the
 * call_rcu worker. In TSan builds coffer states them explicitly: every read-side section
 * ends with a release on coffer__rcu_gp_sync, every reclamation callback starts with an
 * acquire of it (a grace period has elapsed, so every section that could see the record has
 * ended), each call_rcu hand-off is a release/acquire on the rcu_head, and every callback
 * ends with a release on coffer__rcu_cb_sync that coffer__rcu_barrier() acquires after
 * urcu_bp_barrier() (which returns only after every earlier callback ran). This is exact for
 * coffer's own sections and over-approximates (may hide, never invent) races.
 */
#if defined(__SANITIZE_THREAD__)
#define COFFER__TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define COFFER__TSAN 1
#endif
#endif

#ifdef COFFER__TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
extern char coffer__rcu_gp_sync;
extern char coffer__rcu_cb_sync;
#define coffer__tsan_acquire(p) __tsan_acquire((void *)(p))
#define coffer__tsan_release(p) __tsan_release((void *)(p))
#else
#define coffer__tsan_acquire(p) ((void)(p))
#define coffer__tsan_release(p) ((void)(p))
#endif

/*
 * In sanitizer builds coffer calls liburcu's out-of-line read-side functions instead of the
 * _LGPL_SOURCE inline ones: liburcu 0.13 declares struct urcu_bp_reader 128-byte aligned but
 * places readers in mmap'ed arrays at 32-byte offsets, so UBSan's alignment check fires inside
 * liburcu's own inline code (urcu/static/urcu-bp.h) on every read lock; and TSan would see the
 * reader counter's accesses only on the reader side. Same semantics, a call more per lock.
 */
#if defined(COFFER__TSAN) || defined(__SANITIZE_ADDRESS__)
#define COFFER__RCU_OUT_OF_LINE 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define COFFER__RCU_OUT_OF_LINE 1
#endif
#endif

#ifdef COFFER__RCU_OUT_OF_LINE
#undef urcu_bp_read_lock
#undef urcu_bp_read_unlock
#undef urcu_bp_read_ongoing
void urcu_bp_read_lock(void);
void urcu_bp_read_unlock(void);
int urcu_bp_read_ongoing(void);
#endif

/* Enter a read-side section; registers the calling thread with urcu-bp on first use. */
static inline void coffer__rcu_read_lock(void)
{
	urcu_bp_read_lock();
}

static inline void coffer__rcu_read_unlock(void)
{
#ifdef COFFER__TSAN
	__tsan_release(&coffer__rcu_gp_sync);
#endif
	urcu_bp_read_unlock();
}

/* Called first thing in every RCU callback that frees coffer memory. */
static inline void coffer__rcu_gp_acquire(void)
{
#ifdef COFFER__TSAN
	__tsan_acquire(&coffer__rcu_gp_sync);
#endif
}

/* Called last in every coffer RCU callback: rcu_barrier() returns after it (annotated). */
static inline void coffer__rcu_cb_done(void)
{
#ifdef COFFER__TSAN
	__tsan_release(&coffer__rcu_cb_sync);
#endif
}

static inline bool coffer__rcu_read_ongoing(void)
{
	return urcu_bp_read_ongoing() != 0;
}

/*
 * coffer__rcu_setup() - once per process: install the fork handlers (and per-CPU call_rcu
 * workers when COFFER_RCU_PERCPU=1).
 * Return: 0, or -ENOMEM when pthread_atfork() failed (then fork() is not safe).
 * Context: any thread; idempotent and thread-safe.
 */
int coffer__rcu_setup(void);

/*
 * coffer__rcu_barrier() - hand every thread's pending reclamation batch to call_rcu, then
 * wait for all queued RCU callbacks (urcu_bp_barrier()).
 * Return: 0, or -EINVAL when called inside a read-side section (it would deadlock).
 * Context: any thread except a call_rcu worker; not inside a read-side section.
 */
int coffer__rcu_barrier(void);

/**
 * coffer__global_lookup() - a counted reference to the record of handle @h (type @type) in
 * the process's global handle hash, the hash loaded and the reference taken in one
 * read-side section: a racing last coffer_disconnect() of a program that never called
 * coffer_init() stops the runtime, and coffer_fini() frees an unpublished hash after a
 * grace period unless a record is still held (test_ctl_calls_vs_last_disconnect), so the
 * reference keeps *@hhp valid for the coffer_hhash_putref() the caller owes.
 * @hhp: out: the hash the reference is on.
 * @linkp: out: the record.
 * Return: 0; -EINVAL (runtime not initialised, or as coffer_hhash_lookup()); -ENOENT.
 * Context: any thread; may be called inside a read-side section (they nest).
 */
int coffer__global_lookup(coffer_handle_t h, enum coffer_htype type, struct coffer_hhash **hhp,
			  struct coffer_hlink **linkp);

/**
 * coffer__runtime_get() - take a reference on the process runtime for a connection, as
 * coffer_init() does, but not one coffer_fini() may drop: an application's coffer_fini()
 * without a coffer_init() left to balance gets -EINVAL instead of stopping the runtime
 * under a live connection.
 * Return: as coffer_init().
 * Context: as coffer_init().
 */
int coffer__runtime_get(void);

/**
 * coffer__runtime_put() - drop a reference taken by coffer__runtime_get(); the last
 * reference of any kind stops the runtime, as the last coffer_fini() does.
 * Return: 0, or -EINVAL (inside a read-side section; no reference held).
 * Context: as coffer_fini().
 */
int coffer__runtime_put(void);

/* Fork hooks of the other runtime pieces, called by rcu.c in a fixed order. */
void coffer__init_atfork_prepare(void);
void coffer__init_atfork_parent(void);
void coffer__init_atfork_child(void);
/* The arena mappings' lock (conn.c): taken last, after the call_rcu workers are parked,
 * because a connection's free (a callback, or a thread freeing a reclaimed batch) takes it. */
void coffer__conn_seg_atfork_prepare(void);
void coffer__conn_seg_atfork_parent(void);
void coffer__conn_seg_atfork_child(void);

#endif /* COFFER_RUNTIME_RCU_H */
