/* SPDX-License-Identifier: BSD-2-Clause */
/* tests/reliability/relcommon.c - see relcommon.h. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/reliability/relcommon.h"

uint64_t rel_rand(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1DULL;
}

uint64_t rel_seed(void)
{
	struct timespec ts;
	uint64_t s;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	s = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 40);
	return s != 0 ? s : 1;
}

uint64_t rel_fnv(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t h = 0xcbf29ce484222325ULL;
	size_t i;

	for (i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

void rel_fill(void *p, size_t n, uint64_t seed)
{
	uint8_t *b = p;
	uint64_t s = seed | 1, h;
	size_t i;

	if (n < REL_HDR) {
		for (i = 0; i < n; i++)
			b[i] = (uint8_t)(0xa5 ^ (n * 31 + i));
		return;
	}
	for (i = REL_HDR; i + 8 <= n; i += 8) {
		uint64_t v = rel_rand(&s);

		memcpy(b + i, &v, 8);
	}
	for (; i < n; i++)
		b[i] = (uint8_t)rel_rand(&s);
	h = rel_fnv(b + REL_HDR, n - REL_HDR) ^ n;
	memcpy(b, &seed, 8);
	memcpy(b + 8, &h, 8);
}

int rel_verify(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t h;
	size_t i;

	if (n < REL_HDR) {
		for (i = 0; i < n; i++)
			if (b[i] != (uint8_t)(0xa5 ^ (n * 31 + i)))
				return -EILSEQ;
		return 0;
	}
	memcpy(&h, b + 8, 8);
	return h == (rel_fnv(b + REL_HDR, n - REL_HDR) ^ n) ? 0 : -EILSEQ;
}

/* Value of "Key:   N kB" in /proc/PID/status, or -1. */
static long status_kb(const char *text, const char *key)
{
	const char *p = strstr(text, key);

	return p != NULL ? strtol(p + strlen(key), NULL, 10) : -1;
}

int rel_proc_sample(pid_t pid, struct rel_proc *p)
{
	char path[64], buf[8192], line[512];
	unsigned long ut = 0, st = 0;
	struct dirent *d;
	size_t n;
	FILE *f;
	DIR *dir;
	char *q;

	memset(p, 0, sizeof(*p));
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	dir = opendir(path);
	if (dir == NULL)
		return -errno;
	while ((d = readdir(dir)) != NULL)
		if (d->d_name[0] != '.')
			p->fds++;
	closedir(dir);

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (f == NULL)
		return -errno;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p->rss_kb = status_kb(buf, "VmRSS:");
	p->rss_anon_kb = status_kb(buf, "RssAnon:");

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (f == NULL)
		return -errno;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	q = strrchr(buf, ')'); /* the command name may contain spaces */
	if (q == NULL ||
	    sscanf(q + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
		return -EINVAL;
	p->cpu_s = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "r");
	if (f == NULL)
		return -errno;
	while (fgets(line, sizeof(line), f) != NULL) {
		char perms[8];

		if (sscanf(line, "%*s %7s", perms) == 1 && perms[3] == 's')
			p->shared_maps++;
	}
	fclose(f);
	return 0;
}

void rel_oid(struct coffer_oid *oid, uint64_t n)
{
	memset(oid, 0, sizeof(*oid));
	memcpy(oid->id, &n, sizeof(n));
	if (n != 0)
		oid->id[19] = 0xc0;
}

long rel_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

void rel_sleep_us(long us)
{
	struct timespec ts = {.tv_sec = us / 1000000L, .tv_nsec = (us % 1000000L) * 1000L};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}
