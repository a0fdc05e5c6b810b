/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tools/log.h - coffer-store's logging: one macro that checks the level before formatting
 * (Redis serverLog), lines to stderr with a timestamp and level tag.
 * Context: the store is single-threaded; coffer__log() may also be called from other tools.
 */
#ifndef COFFER_TOOLS_LOG_H
#define COFFER_TOOLS_LOG_H

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

#endif /* COFFER_TOOLS_LOG_H */
