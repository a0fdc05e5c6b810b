/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * docs/example.c - the README's client example, complete: connect, write an object
 * (create, copy, seal), read it back (get, compare, release), delete it, disconnect.
 * Built and run against a real coffer-store by the integration suite (readme-example), so
 * it cannot drift from the API.
 *
 *   cc docs/example.c $(pkg-config --cflags --libs coffer) -o example
 *   ./example /tmp/coffer.sock
 */
#include <stdio.h>
#include <string.h>

#include <coffer/coffer.h>

#define CHECK(call)                                                                                \
	do {                                                                                       \
		int rc_ = (call);                                                                  \
		if (rc_ < 0) {                                                                     \
			fprintf(stderr, "%s: %s\n", #call, coffer_strerror(rc_));                  \
			return 1;                                                                  \
		}                                                                                  \
	} while (0)

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : NULL; /* NULL: $COFFER_SOCKET or the default */
	struct coffer_oid oid = {.id = "readme-example-oid"};
	const char msg[] = "hello from coffer";
	coffer_handle_t conn, oh;
	const void *rd;
	uint64_t size;
	void *wr;

	CHECK(coffer_init());
	CHECK(coffer_connect(path, &conn));
	CHECK(coffer_obj_open(conn, &oid, 0, &oh)); /* a local handle: no IPC */

	/* NULL event: each call blocks until the store answered */
	CHECK(coffer_obj_create(oh, sizeof(msg), 0, &wr, NULL)); /* writable, in the arena */
	memcpy(wr, msg, sizeof(msg));
	CHECK(coffer_obj_seal(oh, COFFER_SEAL_RELEASE, NULL)); /* immutable, visible to all */

	CHECK(coffer_obj_get(oh, 0, &rd, &size, NULL)); /* zero copy: points into the arena */
	if (size != sizeof(msg) || memcmp(rd, msg, sizeof(msg)) != 0) {
		fprintf(stderr, "read back something else\n");
		return 1;
	}
	CHECK(coffer_obj_release(oh, NULL));
	CHECK(coffer_obj_close(oh));
	CHECK(coffer_obj_delete(conn, &oid, NULL));
	CHECK(coffer_disconnect(conn));
	CHECK(coffer_fini());
	printf("example: wrote, sealed, read back and deleted %zu bytes\n", sizeof(msg));
	return 0;
}
