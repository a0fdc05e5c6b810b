/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * env_retry - a bad COFFER_RCU_PERCPU fails the calls that start coffer with -EINVAL, and
 * only while it is bad: once the variable is fixed, the next call succeeds.
 *
 * Its own process: the variable is read by the one-time set-up of coffer's RCU layer, so it
 * must be bad at the process's very first coffer call. coffer_init()'s other variables
 * (COFFER_HHASH_*) fail only the call that reads them (test_client's test_env_check); this
 * one used to make the -EINVAL permanent, so that a program that fixed its environment, as
 * coffer_env_check() told it to, could never start coffer again. It also pins the -EINVAL
 * that coffer_htab_create() and coffer_hhash_create() return for it (coffer/hash.h), with
 * parameters that are valid.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <coffer/common.h>
#include <coffer/hash.h>

static int failures;

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "env_retry: %s:%d: %s\n", __FILE__, __LINE__, #cond);      \
			failures++;                                                                \
		}                                                                                  \
	} while (0)

static uint64_t key_hash(const void *key, size_t ksize)
{
	uint64_t k = 0;

	memcpy(&k, key, ksize < sizeof(k) ? ksize : sizeof(k));
	return coffer_hash_mix64(k);
}

static bool key_cmp(const struct coffer_hnode *node, const void *key, size_t ksize)
{
	(void)node;
	(void)key;
	(void)ksize;
	return false;
}

static void rec_free(struct coffer_hnode *node, void *priv)
{
	(void)node;
	(void)priv;
}

static const struct coffer_htab_ops ops = {
    .hop_key_hash = key_hash, .hop_key_cmp = key_cmp, .hop_rec_free = rec_free};

int main(void)
{
	struct coffer_htab *tab = NULL;
	struct coffer_hhash *hh = NULL;
	const char *name = NULL;

	if (setenv("COFFER_RCU_PERCPU", "2", 1) != 0)
		return 99;
	/* bad: every call that starts coffer refuses, valid parameters or not */
	CHECK(coffer_htab_create(NULL, &ops, &tab) == -EINVAL);
	CHECK(tab == NULL);
	CHECK(coffer_hhash_create(NULL, &hh) == -EINVAL);
	CHECK(coffer_init() == -EINVAL);
	CHECK(coffer_init() == -EINVAL);
	CHECK(coffer_hhash_global() == NULL);
	CHECK(coffer_env_check(&name) == -EINVAL);
	CHECK(name != NULL && strcmp(name, "COFFER_RCU_PERCPU") == 0);
	CHECK(coffer_fini() == -EINVAL); /* nothing to balance */

	/* fixed: what coffer_env_check() says is what coffer_init() does */
	if (unsetenv("COFFER_RCU_PERCPU") != 0)
		return 99;
	CHECK(coffer_env_check(&name) == 0);
	CHECK(coffer_init() == 0);
	CHECK(coffer_hhash_global() != NULL);
	CHECK(coffer_htab_create(NULL, &ops, &tab) == 0);
	if (tab != NULL)
		CHECK(coffer_htab_destroy(tab, false) == 0);
	CHECK(coffer_fini() == 0);

	/* read once: after the runtime started, the variable is not read again */
	if (setenv("COFFER_RCU_PERCPU", "2", 1) != 0)
		return 99;
	CHECK(coffer_init() == 0);
	CHECK(coffer_fini() == 0);

	if (failures) {
		fprintf(stderr, "env_retry: %d failure(s)\n", failures);
		return 1;
	}
	printf("env_retry: ok\n");
	return 0;
}
