/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tools/log.c - see log.h. One fprintf per line so lines from one process never interleave
 * mid-line (stderr is unbuffered; glibc locks the stream per call).
 */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "tools/log.h"

int coffer__log_level = COFFER_LOG_NOTICE;

void coffer__log(int level, const char *fmt, ...)
{
	static const char tag[] = "EWNID";
	char msg[512];
	struct timespec ts;
	struct tm tm;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	fprintf(stderr, "coffer-store %02d:%02d:%02d.%03ld %c %s\n", tm.tm_hour, tm.tm_min,
		tm.tm_sec, ts.tv_nsec / 1000000,
		tag[level < 0	? 0
		    : level > 4 ? 4
				: level],
		msg);
}
