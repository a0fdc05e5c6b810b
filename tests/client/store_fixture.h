/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/client/store_fixture.h - start and stop a real coffer-store for integration tests.
 *
 * The store executable comes from $COFFER_STORE_BIN (set by meson's test(env:)); the socket
 * lives in a fresh temporary directory. Every started store is stopped (SIGTERM, then
 * SIGKILL after a grace period) and reaped; nothing is left running.
 */
#ifndef COFFER_TESTS_STORE_FIXTURE_H
#define COFFER_TESTS_STORE_FIXTURE_H

#include <stdint.h>
#include <sys/types.h>

struct store_fixture {
	pid_t pid;
	char dir[64];
	char sock[100];
};

/*
 * Starts coffer-store with -m @mem (e.g. "64M") and waits until its socket accepts.
 * Return: 0; -ENOENT when COFFER_STORE_BIN is not set; another -errno on failure.
 */
int store_start(struct store_fixture *f, const char *mem);
/* Stops the store (SIGTERM, SIGKILL after 5 s) and removes the directory. Return: its
 * exit status (0 for a clean stop), or -1 when it was killed or could not be reaped. */
int store_stop(struct store_fixture *f);
/* Kills the store with SIGKILL and reaps it (store-death tests). */
void store_kill(struct store_fixture *f);

#endif
