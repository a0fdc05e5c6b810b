/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tools/log.c - see log.h. One fprintf per line so lines from one process never interleave
 * mid-line (stderr is unbuffered; glibc locks the stream per call).
 */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "tools/objtab.h"

#include "tools/log.h"

int coffer__log_level = COFFER_LOG_NOTICE;

__attribute__((format(printf, 2, 0))) static void log_line(int level, const char *fmt, va_list ap)
{
	static const char tag[] = "EWNID";
	char msg[512];
	struct timespec ts;
	struct tm tm;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	fprintf(stderr, "coffer-store %02d:%02d:%02d.%03ld %c %s\n", tm.tm_hour, tm.tm_min,
		tm.tm_sec, ts.tv_nsec / 1000000,
		tag[level < 0	? 0
		    : level > 4 ? 4
				: level],
		msg);
}

void coffer__log(int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_line(level, fmt, ap);
	va_end(ap);
}

long coffer__log_rl_check(struct coffer__log_rl *rl, uint64_t now_us)
{
	long dropped;

	if (rl->printed == 0 || now_us - rl->window_start_us >= COFFER_LOG_RL_WINDOW_US) {
		rl->window_start_us = now_us;
		rl->printed = 0;
	}
	if (rl->printed >= COFFER_LOG_RL_BURST) {
		rl->suppressed++;
		return -1;
	}
	rl->printed++;
	dropped = (long)rl->suppressed;
	rl->suppressed = 0;
	return dropped;
}

static struct coffer__log_rl *rl_sites; /* every call site that logged once */

void coffer__log_rl_flush(uint64_t now_us)
{
	for (struct coffer__log_rl *rl = rl_sites; rl; rl = rl->next)
		if (rl->suppressed > 0 && now_us - rl->window_start_us >= COFFER_LOG_RL_WINDOW_US) {
			coffer__log(rl->level, "(%lu similar messages suppressed: %s)",
				    rl->suppressed, rl->fmt);
			rl->suppressed = 0;
			rl->printed = 0; /* the next line opens a new window */
		}
}

uint64_t coffer__log_rl_deadline(void)
{
	uint64_t dl = UINT64_MAX;

	for (struct coffer__log_rl *rl = rl_sites; rl; rl = rl->next)
		if (rl->suppressed > 0 && rl->window_start_us + COFFER_LOG_RL_WINDOW_US < dl)
			dl = rl->window_start_us + COFFER_LOG_RL_WINDOW_US;
	return dl;
}

void coffer__log_rl(struct coffer__log_rl *rl, int level, const char *fmt, ...)
{
	long dropped = 0;
	va_list ap;

	if (!rl->registered) {
		rl->registered = 1;
		rl->fmt = fmt;
		rl->level = level;
		rl->next = rl_sites;
		rl_sites = rl;
	}
	if (coffer__log_level < COFFER_LOG_DEBUG)
		dropped = coffer__log_rl_check(rl, coffer__now_us());
	if (dropped < 0)
		return;
	if (dropped > 0)
		coffer__log(level, "(%ld similar messages suppressed)", dropped);
	va_start(ap, fmt);
	log_line(level, fmt, ap);
	va_end(ap);
}
