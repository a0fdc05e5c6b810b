/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tools/stat.c - coffer-stat: ask a running coffer-store for its statistics (QUERY) and
 * print them as a table or JSON. Speaks the raw protocol (runtime/proto.h): QUERY needs no
 * HELLO, so no arena fd is passed to this tool.
 * Exit status: 0 ok, 1 store unreachable, refused (the store's ERROR status and text are
 * printed) or protocol error, 2 bad command line.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <coffer/common.h>

#include "runtime/env.h"
#include "runtime/proto_util.h"

/*
 * Prints @s as a JSON string (quotes included): '"' and '\' escaped, control characters
 * as \u00XX, so that a socket path holding any of them still gives valid JSON.
 */
static void json_string(const char *s)
{
	putchar('"');
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			printf("\\%c", *p);
		else if (*p < 0x20 || *p == 0x7f)
			printf("\\u%04x", *p);
		else
			putchar(*p);
	}
	putchar('"');
}

/*
 * If the store sent an ERROR (it refuses a peer that is not its user, or that it has no fds
 * for, with one ERROR before it closes; see docs/protocol.md), prints its status and text as
 * coffer_connect() would report them and returns 1; else returns 0 and prints nothing.
 * @buf/@n: what a recv returned (n <= 0: nothing).
 */
static int store_error(const unsigned char *buf, long n, const char *path)
{
	struct coffer_msg_error e;
	struct coffer_msg_hdr h;

	if (n <= 0 || coffer__msg_check(buf, (size_t)n, &h) != 0 || h.type != COFFER_MSG_ERROR)
		return 0;
	memcpy(&e, buf + sizeof(h), sizeof(e));
	e.message[sizeof(e.message) - 1] = '\0';
	fprintf(stderr, "coffer-stat: the store at %s refused: %s (%d: %s)\n", path,
		e.message[0] ? e.message : "no reason given", e.status, coffer_strerror(e.status));
	return 1;
}

/*
 * After a failed send, or a reset while waiting: the store may have closed us after one
 * ERROR. A Unix socket whose peer closed with our request unread reports ECONNRESET once,
 * before the queued messages, so this reads (without waiting) up to twice.
 */
static int queued_store_error(int fd, unsigned char *buf, size_t cap, const char *path)
{
	unsigned int nfds;

	for (int tries = 0; tries < 2; tries++) {
		long n = coffer__recv_fds(fd, buf, cap, NULL, &nfds, 0, MSG_DONTWAIT);

		if (n != -ECONNRESET)
			return store_error(buf, n, path);
	}
	return 0;
}

static const char usage[] =
    "usage: coffer-stat [-s SOCKET] [--json] [--help]\n"
    "  -s, --socket SOCKET  the store's socket (default: as coffer-store)\n"
    "  --json               one JSON object instead of a table\n"
    "Waits up to COFFER_STORE_TIMEOUT_MS (milliseconds, default 10000) for the answer.\n"
    "Fields (counts now, unless 'since start'):\n"
    "  clients          connections, coffer-stat's own included\n"
    "  used_bytes       allocated arena bytes: objects, sealed and unreferenced ones\n"
    "                   the store may evict included (a cache, not a leak), and\n"
    "                   reserved blocks\n"
    "  free_bytes       capacity - used (table only); includes quick_bytes\n"
    "  objects_created  objects created and not yet sealed (a put seals at once, so\n"
    "                   the fio engine's writes do not show here)\n"
    "  objects_sealed   sealed objects\n"
    "  evictions, evicted_bytes   since start: objects evicted for room\n"
    "  reserved_blocks, reserved_bytes   reserved for a later put, within used\n"
    "  index_slots, index_objects   the shared index clients read objects through\n"
    "                   without a request, and the sealed objects in it now\n"
    "  index_unplaced   since start: seals whose object found no index slot; harmless\n"
    "                   (those objects are read through the store), a steady climb\n"
    "                   only means more such reads\n"
    "  second_chances   since start: objects eviction passed over because they were\n"
    "                   used since it last looked (CLOCK)\n"
    "  quick_blocks, quick_bytes   small freed blocks not yet coalesced, reused at\n"
    "                   once for a request of the same size, coalesced when one fits\n"
    "                   nowhere (at most 1/16 of the capacity)\n"
    "See docs/protocol.md (QUERY_REPLY, the object index) for more.\n";

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"socket", required_argument, NULL, 's'},
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	/* room for the reply or for an ERROR, whichever is larger */
	unsigned char buf[sizeof(struct coffer_msg_hdr) + sizeof(struct coffer_store_info) +
			  sizeof(struct coffer_msg_error)];
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct coffer_store_info info;
	struct coffer_msg_hdr h;
	unsigned int nfds;
	uint64_t timeout_ms = COFFER_CTL_TIMEOUT_MS;
	char path[108];
	int c, json = 0, fd;
	long n;

	opterr = 0;
	path[0] = '\0';
	while ((c = getopt_long(argc, argv, ":s:h", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (strlen(optarg) >= sizeof(path) || optarg[0] == '\0') {
				fprintf(stderr, "coffer-stat: bad -s SOCKET '%s'\n", optarg);
				return 2;
			}
			strcpy(path, optarg);
			break;
		case 'j':
			json = 1;
			break;
		case 'h':
			fputs(usage, stdout);
			return 0;
		case ':':
			fprintf(stderr, "coffer-stat: option '%s' needs an argument (try --help)\n",
				argv[optind - 1]);
			return 2;
		default:
			fprintf(stderr, "coffer-stat: bad option '%s' (try --help)\n",
				argv[optind - 1]);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "coffer-stat: unexpected argument '%s' (try --help)\n",
			argv[optind]);
		return 2;
	}
	if (path[0] == '\0' && coffer__default_socket_path(path, sizeof(path)) != 0) {
		fprintf(stderr, "coffer-stat: default socket path too long; give -s\n");
		return 2;
	}
	/* as long as a client waits for a control answer: COFFER_STORE_TIMEOUT_MS (README.md) */
	if (coffer__env_store_timeout_ms(&timeout_ms) != 0) {
		fprintf(stderr,
			"coffer-stat: COFFER_STORE_TIMEOUT_MS='%s': want milliseconds, "
			"100..3600000\n",
			getenv("COFFER_STORE_TIMEOUT_MS"));
		return 2;
	}
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    coffer__sock_set_timeout(fd, (unsigned int)timeout_ms) != 0) {
		/* in coffer_connect()'s words (runtime/conn.c): no socket file is no store, and
		 * -EACCES says who the store admits */
		int err = errno == ENOENT ? ECONNREFUSED : errno;

		fprintf(stderr, "coffer-stat: cannot connect to %s: %s\n", path,
			coffer_strerror(-err));
		return 1;
	}
	coffer__msg_hdr_init(&h, COFFER_MSG_QUERY, 0, sizeof(h));
	n = coffer__send_fds(fd, &h, sizeof(h), NULL, 0, 0);
	if (n < 0) {
		if (!queued_store_error(fd, buf, sizeof(buf), path))
			fprintf(stderr, "coffer-stat: send to %s: %s\n", path, strerror((int)-n));
		close(fd);
		return 1;
	}
	n = coffer__recv_fds(fd, buf, sizeof(buf), NULL, &nfds, 0, 0);
	if (store_error(buf, n, path) ||
	    ((n == -ECONNRESET || n == -EPIPE) && queued_store_error(fd, buf, sizeof(buf), path))) {
		close(fd);
		return 1;
	}
	close(fd);
	if (n <= 0 || coffer__msg_check(buf, (size_t)n, &h) != 0 ||
	    h.type != COFFER_MSG_QUERY_REPLY || h.length < sizeof(h) + sizeof(info)) {
		fprintf(stderr, "coffer-stat: %s from %s\n",
			n == -EAGAIN ? "no reply in time (store stopped, or not a coffer-store?)"
				     : "bad or no reply",
			path);
		return 1;
	}
	memcpy(&info, buf + sizeof(h), sizeof(info));
	if (json) {
		fputs("{\"socket\":", stdout);
		json_string(path);
		printf(",\"capacity_bytes\":%" PRIu64 ",\"used_bytes\":%" PRIu64
		       ",\"objects_created\":%" PRIu64 ",\"objects_sealed\":%" PRIu64
		       ",\"clients\":%" PRIu64 ",\"evictions\":%" PRIu64
		       ",\"evicted_bytes\":%" PRIu64 ",\"hugepages\":%s,\"protocol_version\":%u"
		       ",\"reserved_blocks\":%" PRIu64 ",\"reserved_bytes\":%" PRIu64
		       ",\"index_slots\":%" PRIu64 ",\"index_objects\":%" PRIu64
		       ",\"index_unplaced\":%" PRIu64 ",\"second_chances\":%" PRIu64
		       ",\"quick_blocks\":%" PRIu64 ",\"quick_bytes\":%" PRIu64 "}\n",
		       info.capacity_bytes, info.used_bytes, info.objects_created,
		       info.objects_sealed, info.clients, info.evictions, info.evicted_bytes,
		       info.hugepages ? "true" : "false", info.version, info.reserved_blocks,
		       info.reserved_bytes, info.index_slots, info.index_objects,
		       info.index_unplaced, info.second_chances, info.quick_blocks,
		       info.quick_bytes);
		return 0;
	}
	printf("%-18s %s\n", "socket", path);
	printf("%-18s %" PRIu64 "\n", "capacity_bytes", info.capacity_bytes);
	printf("%-18s %" PRIu64 " (%.1f%%)\n", "used_bytes", info.used_bytes,
	       info.capacity_bytes ? 100.0 * (double)info.used_bytes / (double)info.capacity_bytes
				   : 0.0);
	printf("%-18s %" PRIu64 "\n", "free_bytes",
	       info.capacity_bytes > info.used_bytes ? info.capacity_bytes - info.used_bytes : 0);
	printf("%-18s %" PRIu64 "\n", "objects_created", info.objects_created);
	printf("%-18s %" PRIu64 "\n", "objects_sealed", info.objects_sealed);
	printf("%-18s %" PRIu64 "\n", "clients", info.clients);
	printf("%-18s %" PRIu64 "\n", "evictions", info.evictions);
	printf("%-18s %" PRIu64 "\n", "evicted_bytes", info.evicted_bytes);
	printf("%-18s %s\n", "hugepages", info.hugepages ? "yes" : "no");
	printf("%-18s %u\n", "protocol_version", info.version);
	printf("%-18s %" PRIu64 "\n", "reserved_blocks", info.reserved_blocks);
	printf("%-18s %" PRIu64 "\n", "reserved_bytes", info.reserved_bytes);
	printf("%-18s %" PRIu64 "\n", "index_slots", info.index_slots);
	printf("%-18s %" PRIu64 "\n", "index_objects", info.index_objects);
	printf("%-18s %" PRIu64 "\n", "index_unplaced", info.index_unplaced);
	printf("%-18s %" PRIu64 "\n", "second_chances", info.second_chances);
	printf("%-18s %" PRIu64 "\n", "quick_blocks", info.quick_blocks);
	printf("%-18s %" PRIu64 "\n", "quick_bytes", info.quick_bytes);
	return 0;
}
