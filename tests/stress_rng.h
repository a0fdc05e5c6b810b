/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The stress tests' shared helpers: a per-thread xorshift64 generator (Marsaglia, "Xorshift
 * RNGs", 2003), yield injection and a relaxed counter bump. Header-only, for test programs.
 * Each thread seeds `rng` (non-zero) before its first stress_rnd().
 */
#ifndef COFFER_TESTS_STRESS_RNG_H
#define COFFER_TESTS_STRESS_RNG_H

#include <sched.h>
#include <stdint.h>

static __thread uint64_t rng;

/* stress_rnd() - the calling thread's next pseudo-random number (not 0 while rng is not). */
static inline uint64_t stress_rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* stress_maybe_yield() - sched_yield() once in about @one_in calls; never when @one_in is 0. */
static inline void stress_maybe_yield(unsigned int one_in)
{
	if (one_in && stress_rnd() % one_in == 0)
		sched_yield();
}

/* stress_bump() - add one to a counter shared by threads (relaxed: read after the joins). */
static inline void stress_bump(uint64_t *c)
{
	__atomic_fetch_add(c, 1, __ATOMIC_RELAXED);
}

#endif
