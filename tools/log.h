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
 * Rate limit for every line a client can cause at will (a refused connect, a protocol
 * violation; with -v its connects and disconnects): at most COFFER_LOG_RL_BURST lines per
 * call site in each COFFER_LOG_RL_WINDOW_US window. The number dropped is reported by the
 * next line of that call site, or by coffer__log_rl_flush() once the window is over (the
 * store calls it after each wake-up and at its stop), so a flood that ends still leaves its
 * count. At debug level (-vv) nothing is dropped. The kernel's printk_ratelimit /
 * ___ratelimit() works the same way. One state per call site (a static inside
 * COFFER_LOG_RL), so a flood of one kind of line also hides other clients' lines of that
 * kind until it ends (only their count shows); not thread-safe (the store is
 * single-threaded).
 */
#define COFFER_LOG_RL_BURST	10
#define COFFER_LOG_RL_WINDOW_US 5000000u

struct coffer__log_rl {
	uint64_t window_start_us; /* start of the current window */
	unsigned int printed;	  /* lines printed in it; 0 also before the first window */
	unsigned long suppressed; /* lines dropped since the last printed one */
	const char *fmt;	  /* the call site's format (named by the flushed count) */
	int level;
	struct coffer__log_rl *next; /* registered for coffer__log_rl_flush() */
	int registered;
};

/**
 * coffer__log_rl_flush() - report, for every rate-limited call site whose window is over at
 * @now_us, the lines it dropped and nobody reported yet ("(N similar messages suppressed:
 * FORMAT)"). Context: the store's thread.
 */
void coffer__log_rl_flush(uint64_t now_us);

/** coffer__log_rl_deadline() - when coffer__log_rl_flush() next has a count to report
 * (CLOCK_MONOTONIC, us), or UINT64_MAX: a sleeping store wakes for it. */
uint64_t coffer__log_rl_deadline(void);

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
