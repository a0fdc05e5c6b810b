/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * perf/results/2core-e/idle_clients.c - the throwaway program behind idle-ab.txt: opens K
 * channels (K EQs, each of which makes one CONTAINS) on each of C connections, then sleeps
 * until killed. Usage: idle_clients SOCKET C K. Built by hand against the tree under test
 * (ab-idle.sh compares two trees; the option coffer-bench store --idle-channels does the same
 * inside one process).
 */
#include <coffer/coffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv)
{
	const char *sock;
	int conns, k;

	if (argc != 4) {
		fprintf(stderr, "usage: idle_clients SOCKET CONNECTIONS CHANNELS_EACH\n");
		return 2;
	}
	sock = argv[1];
	conns = atoi(argv[2]);
	k = atoi(argv[3]);
	if (coffer_init())
		return 1;
	for (int c = 0; c < conns; c++) {
		coffer_handle_t conn;
		int rc = coffer_connect(sock, &conn);
		if (rc) {
			fprintf(stderr, "connect %d\n", rc);
			return 1;
		}
		for (int i = 0; i < k; i++) {
			coffer_handle_t eq;
			struct coffer_event ev;
			bool present;
			int n;
			struct coffer_event *d;
			struct coffer_oid oid;
			memset(&oid, 0, sizeof(oid));
			oid.id[0] = (uint8_t)i;
			if (coffer_eq_create(&eq))
				return 2;
			coffer_event_init(&ev, eq, NULL);
			rc = coffer_obj_contains(conn, &oid, &present, &ev);
			if (rc) {
				fprintf(stderr, "contains %d\n", rc);
				return 3;
			}
			n = coffer_eq_poll(eq, 1, -1, 1, &d);
			if (n != 1)
				return 4;
		}
	}
	fprintf(stderr, "idle: %d x %d channels open\n", conns, k);
	pause();
	return 0;
}
