/* SPDX-License-Identifier: BSD-2-Clause */
/* runtime/env.c - see env.h; and coffer_env_check(), which names a bad COFFER_* variable. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <coffer/common.h>

#include "runtime/env.h"
#include "runtime/proto_util.h"

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

/* In the order coffer_init() and then coffer_connect() read them; see env.h for each. */
COFFER_API int coffer_env_check(const char **name)
{
	uint64_t buckets = COFFER_HHASH_DEFAULT_BUCKETS_LOG2, locks = 0, v = 0;
	const char *bad = NULL;

	if (coffer__env_hhash_buckets_log2(&buckets) != 0)
		bad = "COFFER_HHASH_BUCKETS_LOG2";
	else if (coffer__env_hhash_locks_log2(&locks) != 0 || locks > buckets)
		bad = "COFFER_HHASH_LOCKS_LOG2";
	else if (coffer__env_rcu_percpu(&v) != 0)
		bad = "COFFER_RCU_PERCPU";
	else if (coffer__env_batch(&v) != 0)
		bad = "COFFER_BATCH";
	else if (coffer__env_map_populate(&v) != 0)
		bad = "COFFER_MAP_POPULATE";
	else if (coffer__env_poll_spin_us(&v) != 0)
		bad = "COFFER_POLL_SPIN_US";
	else if (coffer__env_store_timeout_ms(&v) != 0)
		bad = "COFFER_STORE_TIMEOUT_MS";
	if (name != NULL)
		*name = bad;
	return bad != NULL ? -EINVAL : 0;
}

int coffer__env_explain(char *buf, size_t len)
{
	uint64_t buckets = COFFER_HHASH_DEFAULT_BUCKETS_LOG2, locks = 0;
	const char *name;

	buf[0] = '\0';
	if (coffer_env_check(&name) == 0)
		return 0;
	/* a valid number that coffer_env_check() still refused: more stripes than buckets
	 * (COFFER_HHASH_BUCKETS_LOG2 is valid, or it would have been named first) */
	if (strcmp(name, "COFFER_HHASH_LOCKS_LOG2") == 0 &&
	    coffer__env_hhash_locks_log2(&locks) == 0 &&
	    coffer__env_hhash_buckets_log2(&buckets) == 0 && locks > buckets) {
		const char *b = getenv("COFFER_HHASH_BUCKETS_LOG2");

		snprintf(buf, len,
			 "environment variable %s=\"%s\" is above COFFER_HHASH_BUCKETS_LOG2 "
			 "(%llu%s): more lock stripes than hash buckets",
			 name, getenv(name), (unsigned long long)buckets,
			 b && b[0] ? "" : ", the default");
		return -EINVAL;
	}
	snprintf(buf, len, "environment variable %s=\"%s\" is not a decimal number in its range",
		 name, getenv(name));
	return -EINVAL;
}
