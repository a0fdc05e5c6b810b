/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tools/log.h - coffer-store's logging: one macro that checks the level before formatting
 * (Redis serverLog), lines to stderr with a timestamp and level tag.
 * Context: the store is single-threaded; coffer__log() may also be called from other tools.
 */
#ifndef COFFER_TOOLS_LOG_H
#define COFFER_TOOLS_LOG_H

#include <stdint.h>

enum coffer__log_level {
	COFFER_LOG_ERR = 0,    /* start-up failures, fatal conditions */
	COFFER_LOG_WARN = 1,   /* a client misbehaved, a resource ran out */
	COFFER_LOG_NOTICE = 2, /* default: start, stop, fallbacks */
	COFFER_LOG_INFO = 3,   /* -v: connects, disconnects */
	COFFER_LOG_DEBUG = 4,  /* -vv: per-request detail */
};

extern int coffer__log_level;

void coffer__log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define COFFER_LOG(level, ...)                                                                     \
	do {                                                                                       \
		if ((level) <= coffer__log_level)                                                  \
			coffer__log((level), __VA_ARGS__);                                         \
	} while (0)

/*
 * Rate limit for messages that clients can trigger at will (a refused connect, a protocol
 * violation): at most COFFER_LOG_RL_BURST lines per call site in each COFFER_LOG_RL_WINDOW_US
 * window; the first line of the next window says how many were dropped. The kernel's
 * printk_ratelimit / ___ratelimit() works the same way. One state per call site (a static
 * inside COFFER_LOG_RL); not thread-safe (the store is single-threaded).
 */
#define COFFER_LOG_RL_BURST	10
#define COFFER_LOG_RL_WINDOW_US 5000000u

struct coffer__log_rl {
	uint64_t window_start_us; /* start of the current window */
	unsigned int printed;	  /* lines printed in it; 0 also before the first window */
	unsigned long suppressed; /* lines dropped since the last printed one */
};

/**
 * coffer__log_rl_check() - decide whether one more line from @rl's call site may be printed
 * at @now_us (CLOCK_MONOTONIC, microseconds).
 * Return: -1 when the line is to be dropped (counted in @rl); otherwise the number of lines
 * dropped before it (>= 0), which the caller reports, and the count restarts.
 * Context: single-threaded per @rl.
 */
long coffer__log_rl_check(struct coffer__log_rl *rl, uint64_t now_us);

/** coffer__log_rl() - coffer__log() through @rl (see COFFER_LOG_RL). */
void coffer__log_rl(struct coffer__log_rl *rl, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define COFFER_LOG_RL(level, ...)                                                                  \
	do {                                                                                       \
		static struct coffer__log_rl coffer_log_rl_;                                       \
		if ((level) <= coffer__log_level)                                                  \
			coffer__log_rl(&coffer_log_rl_, (level), __VA_ARGS__);                     \
	} while (0)

#endif /* COFFER_TOOLS_LOG_H */
