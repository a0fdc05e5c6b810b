/* SPDX-License-Identifier: BSD-2-Clause */
/* runtime/env.c - see env.h. */
#include <errno.h>
#include <stdlib.h>

#include "runtime/env.h"

int coffer__env_u64(const char *name, uint64_t min, uint64_t max, uint64_t *out)
{
	const char *s = getenv(name);
	unsigned long long v;
	char *end;

	if (s == NULL || *s == '\0')
		return 0;
	if (*s < '0' || *s > '9') /* strtoull would take "-1", "+1" and spaces */
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (*end != '\0' || errno != 0 || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}
