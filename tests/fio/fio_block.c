/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/fio/fio_block.c - reach one block of a coffer fio file from outside fio, for the
 * fio suite (tests/fio/fio_test.sh). The block's ObjectID comes from perf/fio/coffer_oid.h,
 * the engine's own mapping.
 *
 *   fio_block SOCKET NAMESPACE FILE OFFSET exists
 *       exit 0 when the block is sealed in the store, 1 when it is not, 2 on error
 *   fio_block SOCKET NAMESPACE FILE OFFSET hold SIZE MS
 *       create the block (SIZE bytes) and leave it unsealed, print "held" on stdout, wait
 *       MS milliseconds or until SIGUSR1 comes, whichever is first, then fill it with zeros
 *       and seal it (as another client that is writing the block while fio starts); exit 0
 *       once sealed. SIGUSR1 is blocked before "held" is printed, so a test that signals
 *       after reading "held" never loses it.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <coffer/store.h>

#include "coffer_oid.h"

static int usage(void)
{
	fprintf(stderr, "usage: fio_block SOCKET NAMESPACE FILE OFFSET exists\n"
			"       fio_block SOCKET NAMESPACE FILE OFFSET hold SIZE MS\n");
	return 2;
}

static int die(const char *what, int rc)
{
	fprintf(stderr, "fio_block: %s: %s\n", what, coffer_strerror(rc));
	return 2;
}

int main(int argc, char **argv)
{
	uint8_t prefix[CF_PREFIX_SIZE];
	struct coffer_oid oid;
	coffer_handle_t conn;
	int rc;

	if (argc < 6)
		return usage();
	cf_file_prefix(argv[2], argv[3], prefix);
	cf_prefix_block_oid(prefix, strtoull(argv[4], NULL, 0), &oid);
	rc = coffer_connect(argv[1], &conn);
	if (rc < 0)
		return die("connect", rc);

	if (strcmp(argv[5], "exists") == 0 && argc == 6) {
		bool present = false;

		rc = coffer_obj_contains(conn, &oid, &present, NULL);
		coffer_disconnect(conn);
		if (rc < 0)
			return die("contains", rc);
		return present ? 0 : 1;
	}
	if (strcmp(argv[5], "hold") == 0 && argc == 8) {
		uint64_t size = strtoull(argv[6], NULL, 0);
		long ms = strtol(argv[7], NULL, 10);
		struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
		sigset_t usr1;
		void *data;

		sigemptyset(&usr1);
		sigaddset(&usr1, SIGUSR1);
		sigprocmask(SIG_BLOCK, &usr1, NULL);
		rc = coffer_obj_create_oid(conn, &oid, size, 0, &data, NULL);
		if (rc < 0)
			return die("create", rc);
		printf("held\n");
		fflush(stdout);
		while (sigtimedwait(&usr1, NULL, &ts) < 0 && errno == EINTR)
			; /* SIGUSR1 or the time is up (EAGAIN) */
		memset(data, 0, size);
		rc = coffer_obj_seal_oid(conn, &oid, COFFER_SEAL_RELEASE, NULL);
		coffer_disconnect(conn);
		if (rc < 0)
			return die("seal", rc);
		return 0;
	}
	coffer_disconnect(conn);
	return usage();
}
