/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/reliability/relcommon.h - helpers shared by the reliability tests: self-checking
 * object content, a small PRNG, and samples of the store process (fds, RSS, CPU time) read
 * from /proc.
 *
 * Context: plain functions, no shared state; any thread or process may call them.
 */
#ifndef COFFER_TESTS_RELCOMMON_H
#define COFFER_TESTS_RELCOMMON_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <coffer/store.h>

/*
 * Under AddressSanitizer the store (built the same way) keeps freed memory in quarantine,
 * so its RSS says nothing about leaks; there LeakSanitizer checks the store at its exit
 * (a leak makes its exit status non-zero, which every test checks) and the tests widen
 * their RSS bounds by REL_RSS_SAN_SLACK_KB.
 */
#if defined(__SANITIZE_ADDRESS__)
#define REL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define REL_ASAN 1
#endif
#endif
/*
 * Under ThreadSanitizer the store's RSS also grows with TSan's own bookkeeping: the shadow
 * of every address it touches and a sync object per address used with release/acquire
 * atomics, such as each object-index slot's sequence word the store publishes (slots are
 * touched at random as objects are sealed: up to a few MiB for a 64 MiB arena's index).
 */
#if defined(__SANITIZE_THREAD__)
#define REL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define REL_TSAN 1
#endif
#endif
#ifdef REL_ASAN
#define REL_RSS_SAN_SLACK_KB (256 * 1024)
#elif defined(REL_TSAN)
#define REL_RSS_SAN_SLACK_KB (16 * 1024)
#else
#define REL_RSS_SAN_SLACK_KB 0
#endif

/* Bytes of the self-describing header at the start of an object of >= REL_HDR bytes. */
#define REL_HDR 16

/** rel_rand() - xorshift64* step. @s: state (non-zero). Return: 64 random bits. */
uint64_t rel_rand(uint64_t *s);

/** rel_seed() - a non-zero seed from the time and pid (printed by the tests for replay). */
uint64_t rel_seed(void);

/**
 * rel_fill() - fill @n bytes at @p with content derived from @seed that rel_verify() can
 * check without knowing @seed: objects of >= REL_HDR bytes start with {seed, FNV-1a of the
 * rest}; shorter ones are a pattern of their length.
 */
void rel_fill(void *p, size_t n, uint64_t seed);

/** rel_verify() - 0 when @p holds what rel_fill() wrote for some seed, else -EILSEQ. */
int rel_verify(const void *p, size_t n);

/** rel_fnv() - FNV-1a 64 of @n bytes. */
uint64_t rel_fnv(const void *p, size_t n);

/* A sample of a process, from /proc/PID. */
struct rel_proc {
	int fds;	  /* entries of /proc/PID/fd */
	long rss_kb;	  /* VmRSS */
	long rss_anon_kb; /* RssAnon: the private heap (the arena is RssShmem) */
	double cpu_s;	  /* utime + stime in seconds */
	int shared_maps;  /* mappings with 's' in their permissions */
};

/** rel_proc_sample() - 0, or -errno when /proc/@pid cannot be read. */
int rel_proc_sample(pid_t pid, struct rel_proc *p);

/** rel_oid() - ObjectID from a 64-bit number (same layout as rawclient's rc_oid()). */
void rel_oid(struct coffer_oid *oid, uint64_t n);

/** rel_now_ms() - CLOCK_MONOTONIC in milliseconds. */
long rel_now_ms(void);

/** rel_sleep_us() - sleep @us microseconds (restarts after signals). */
void rel_sleep_us(long us);

#endif /* COFFER_TESTS_RELCOMMON_H */
