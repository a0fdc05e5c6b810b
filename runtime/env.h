/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * runtime/env.h - the client's COFFER_* environment overrides, parsed one way: a value that
 * is set must be a plain decimal number in range, else the call that reads it fails with
 * -EINVAL (a typo is reported, never silently replaced by the default).
 */
#ifndef COFFER_RUNTIME_ENV_H
#define COFFER_RUNTIME_ENV_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/proto_util.h" /* COFFER_RING_ENTRIES_MAX */

/*
 * coffer__env_u64() - the value of environment variable @name, in [@min, @max].
 * @out: in: the default; out: the value when the variable is set and valid.
 * Return: 0 (also when @name is unset or empty: *@out untouched); -EINVAL (set, but not
 * decimal digits only, or out of range).
 * Context: any thread (getenv: not concurrently with setenv).
 */
int coffer__env_u64(const char *name, uint64_t min, uint64_t max, uint64_t *out);

/*
 * coffer__env_explain() - the client COFFER_* variable that coffer_env_check() refuses, and
 * why, as one phrase for an error message: 'environment variable NAME="VALUE" is not a
 * decimal number in its range', or, for a COFFER_HHASH_LOCKS_LOG2 within 1..26 that is above
 * the bucket count's log2, 'environment variable COFFER_HHASH_LOCKS_LOG2="20" is above
 * COFFER_HHASH_BUCKETS_LOG2 (18, the default): more lock stripes than hash buckets'.
 * @buf: out: the phrase, NUL-terminated ("" when no variable is bad); @len: its size in
 * bytes (> 0); a longer phrase is truncated.
 * Return: 0 (every variable unset, empty or valid); -EINVAL (@buf names the first bad one,
 * the one coffer_env_check() names).
 * Context: as coffer_env_check(): any thread, not concurrently with setenv(); no lock.
 */
int coffer__env_explain(char *buf, size_t len);

/* The client's variables, each with its one range (coffer_init() and coffer_connect() check
 * them; later readers take the value, or @out's default if it changed since);
 * coffer_env_check() (env.c) checks them all. */
/* The handle hash's size when COFFER_HHASH_BUCKETS_LOG2 is unset. */
#define COFFER_HHASH_DEFAULT_BUCKETS_LOG2 18

static inline int coffer__env_hhash_buckets_log2(uint64_t *out)
{
	return coffer__env_u64("COFFER_HHASH_BUCKETS_LOG2", 1, 26, out);
}

/* Also refused when above COFFER_HHASH_BUCKETS_LOG2 (the caller checks: it needs both). */
static inline int coffer__env_hhash_locks_log2(uint64_t *out)
{
	return coffer__env_u64("COFFER_HHASH_LOCKS_LOG2", 1, 26, out);
}

static inline int coffer__env_rcu_percpu(uint64_t *out)
{
	return coffer__env_u64("COFFER_RCU_PERCPU", 0, 1, out);
}

static inline int coffer__env_poll_spin_us(uint64_t *out)
{
	return coffer__env_u64("COFFER_POLL_SPIN_US", 0, 1000000, out);
}

/* Requests queued before they are published (conn.c). */
static inline int coffer__env_batch(uint64_t *out)
{
	return coffer__env_u64("COFFER_BATCH", 1, COFFER_RING_ENTRIES_MAX, out);
}

static inline int coffer__env_map_populate(uint64_t *out)
{
	return coffer__env_u64("COFFER_MAP_POPULATE", 0, 1, out);
}

/* How long the client waits for the store's answer to a control message, and how long
 * requests may go unanswered before the store is probed (milliseconds; default
 * COFFER_CTL_TIMEOUT_MS). */
static inline int coffer__env_store_timeout_ms(uint64_t *out)
{
	return coffer__env_u64("COFFER_STORE_TIMEOUT_MS", 100, 3600000, out);
}

#endif /* COFFER_RUNTIME_ENV_H */
