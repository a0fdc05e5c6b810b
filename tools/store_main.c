/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tools/store_main.c - coffer-store's command line. Every bad flag: one line on stderr and
 * exit status 2 (so scripts can tell usage errors from start-up failures, status 1).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "runtime/env.h"
#include "runtime/proto_util.h"
#include "tools/log.h"
#include "tools/shm.h"
#include "tools/store.h"

static const char usage[] =
    "usage: coffer-store -m SIZE [-s SOCKET] [-d HUGETLBFS_DIR] [--hugepages=auto|on|off]\n"
    "                    [--socket-mode=MODE] [--max-files=N] [-v|-q] [--help]\n"
    "\n"
    "  -m, --memory SIZE      arena bytes, created and prefaulted at start-up; a decimal\n"
    "                         number with an optional suffix K, M, G or T in either case,\n"
    "                         each a power of 1024, optionally followed by i and/or B\n"
    "                         (1G = 1g = 1GiB = 1GB = 2^30 bytes; a bare B means bytes);\n"
    "                         rounded up to the page size\n"
    "  -s, --socket SOCKET    Unix socket to listen on; default $COFFER_SOCKET, else\n"
    "                         $XDG_RUNTIME_DIR/coffer.sock, else /run/user/UID/coffer.sock,\n"
    "                         else /tmp/coffer-UID.sock\n"
    "  -d, --hugetlbfs DIR    create the arena in this hugetlbfs mount\n"
    "  --hugepages=MODE       auto (default: hugepages if available, else ordinary memory\n"
    "                         with a notice), on (hugepages or fail), off\n"
    "  --socket-mode=MODE     octal permissions of the socket, 0600 (default) or up to\n"
    "                         0660: the store admits only its own user and, when MODE\n"
    "                         has group bits, users whose group is the store's group;\n"
    "                         connecting needs w, so group bits are rw or none (0640\n"
    "                         and 0620 are refused), and 'other' bits (e.g. 0666)\n"
    "                         are refused, as they would admit no one\n"
    "  --max-files=N          set the open-file limit (RLIMIT_NOFILE, soft) to N (0, or at\n"
    "                         least 16), higher or lower than the inherited one, at most the\n"
    "                         hard limit; default: the hard limit; 0: keep the inherited\n"
    "                         limit. The store uses about 10 fds itself; each client\n"
    "                         connection holds 2 more (3 while it connects), and 1 more per\n"
    "                         channel (one per EQ or thread that uses it, up to 512)\n"
    "  -v, --verbose          more log lines (repeat for debug)\n"
    "  -q, --quiet            errors only (and the ready line)\n"
    "  --help                 this text\n"
    "\n"
    "Prints 'coffer-store: ready ...' on stderr when it accepts clients; stops cleanly on\n"
    "SIGTERM, SIGINT or SIGHUP (removes the socket). Exit status: 0 clean stop, 1 start-up "
    "failure,\n"
    "2 bad command line. Environment: COFFER_STORE_SPIN_US (busy-poll after activity, us),\n"
    "COFFER_STORE_SWEEP_US (how often, in us, an awake store polls every channel whether or\n"
    "not its client set its doorbell bit; default 100000).\n"
    "Lines that clients can provoke (refused connects, protocol violations; with -v their\n"
    "connects and disconnects) are logged at most 10 per 5 s of each kind, then counted:\n"
    "the count is logged once the 5 s are over (or at stop). -vv logs everything.\n";

/* The least --max-files that leaves room for a client: the store's own ~10 fds, a
 * connection's 3 while it connects, and a channel. */
#define STORE_MIN_FILES 16u

static int bad(const char *fmt, const char *arg)
{
	fprintf(stderr, "coffer-store: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, " (try --help)\n");
	return 2;
}

/* SIZE with an optional K/M/G/T suffix, any case, then optional i and B (coffer__parse_size:
 * "1G", "1g", "1GiB" and "1GB" are all 2^30 bytes); 0 bytes is refused, and so is
 * anything at or above 2^62 bytes, which no machine can back and whose rounding up to a
 * hugepage multiple would wrap to 0. */
static int parse_size(const char *s, uint64_t *out)
{
	int rc = coffer__parse_size(s, out);

	if (rc == 0 && *out == 0)
		return -EINVAL;
	if (rc == 0 && *out >= (1ull << 62))
		return -ERANGE;
	return rc;
}

/*
 * Sets the soft RLIMIT_NOFILE to @want, at most the hard limit (UINT64_MAX: the hard limit;
 * 0: leave the inherited one), as redis-server does for its maxclients: every client costs
 * fds here (its socket, doorbells, one per channel), and the common default of 1024 would
 * cap a host at a few hundred threads' channels. A @want below the inherited limit lowers
 * it: --max-files N is the store's limit, a cap on the fds its clients may cost it. Never
 * fails the start: a limit it cannot set is logged and kept.
 */
static void set_nofile(uint64_t want)
{
	struct rlimit rl;

	if (want == 0 || getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	if (rl.rlim_max != RLIM_INFINITY && want > (uint64_t)rl.rlim_max)
		want = rl.rlim_max;
	if (want == (uint64_t)rl.rlim_cur)
		return;
	rl.rlim_cur = (rlim_t)want;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
		COFFER_LOG(COFFER_LOG_WARN, "cannot set the open-file limit to %" PRIu64 ": %s",
			   want, strerror(errno));
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"memory", required_argument, NULL, 'm'},
	    {"socket", required_argument, NULL, 's'},
	    {"hugetlbfs", required_argument, NULL, 'd'},
	    {"hugepages", required_argument, NULL, 'H'},
	    {"socket-mode", required_argument, NULL, 'M'},
	    {"max-files", required_argument, NULL, 'F'},
	    {"verbose", no_argument, NULL, 'v'},
	    {"quiet", no_argument, NULL, 'q'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct coffer__store_cfg cfg = {.hugepages = COFFER_HP_AUTO,
					.socket_mode = 0600,
					.spin_us = 50,
					.budget = 64,
					.sweep_us = COFFER_DOORBELL_SWEEP_US};
	static char defpath[108];
	uint64_t spin_us, max_files = UINT64_MAX;
	int c, level = COFFER_LOG_NOTICE, have_m = 0;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":m:s:d:vq", longopts, NULL)) != -1) {
		switch (c) {
		case 'm':
			if (parse_size(optarg, &cfg.arena_bytes) != 0)
				return bad("bad -m SIZE '%s': want 1 byte to 2^62-1 bytes, with an "
					   "optional K/M/G/T suffix",
					   optarg);
			have_m = 1;
			break;
		case 's':
			if (optarg[0] == '\0' || strlen(optarg) >= 108)
				return bad("bad -s SOCKET '%s': empty or longer than 107 bytes",
					   optarg);
			cfg.socket_path = optarg;
			break;
		case 'd':
			cfg.hugedir = optarg;
			break;
		case 'H':
			if (strcmp(optarg, "auto") == 0)
				cfg.hugepages = COFFER_HP_AUTO;
			else if (strcmp(optarg, "on") == 0)
				cfg.hugepages = COFFER_HP_ON;
			else if (strcmp(optarg, "off") == 0)
				cfg.hugepages = COFFER_HP_OFF;
			else
				return bad("bad --hugepages '%s': want auto, on or off", optarg);
			break;
		case 'M': {
			char *end;
			unsigned long m = strtoul(optarg, &end, 8);

			/* strtoul() would skip blanks and take a sign (negating modulo 2^64) */
			if (optarg[0] < '0' || optarg[0] > '7' || *end != '\0' || m > 0777 ||
			    (m & 0600) != 0600)
				return bad(
				    "bad --socket-mode '%s': want octal <= 0770 with owner rw "
				    "(e.g. 0600, 0660)",
				    optarg);
			/* The peer-credential check admits the store's user and, with group
			 * bits, its group: 'other' bits would let anyone connect only to be
			 * refused, so a mode that promises them access is refused here. */
			if (m & 0007)
				return bad("bad --socket-mode '%s': 'other' bits admit no one (the "
					   "store serves only its own user, and its group with "
					   "group bits); use e.g. 0660",
					   optarg);
			/* connect(2) needs write permission on the socket file: group r
			 * without w (0640) promises the group access its connect would fail
			 * with EACCES; w without r (0620) is half a grant, and x alone (0610)
			 * admits the group to the credential check but not to the file. Any
			 * group bit at all means rw, or nothing. */
			if ((m & 0070) != 0 && (m & 0060) != 0060)
				return bad("bad --socket-mode '%s': group bits must be rw (0660: "
					   "connecting needs w) or none (0600)",
					   optarg);
			cfg.socket_mode = (mode_t)m;
			break;
		}
		case 'F': {
			char *end;

			errno = 0;
			max_files = strtoull(optarg, &end, 10);
			/* below STORE_MIN_FILES the store could start but never admit a client */
			if (optarg[0] < '0' || optarg[0] > '9' || *end != '\0' || errno != 0 ||
			    (max_files != 0 && max_files < STORE_MIN_FILES))
				return bad(
				    "bad --max-files '%s': want 0 (keep the inherited limit) "
				    "or at least 16 files",
				    optarg);
			break;
		}
		case 'v':
			level = level < COFFER_LOG_INFO ? COFFER_LOG_INFO : COFFER_LOG_DEBUG;
			break;
		case 'q':
			level = COFFER_LOG_ERR;
			break;
		case 'h':
			fputs(usage, stdout);
			return 0;
		case ':':
			return bad("option '%s' needs an argument", argv[optind - 1]);
		default:
			return bad("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return bad("unexpected argument '%s'", argv[optind]);
	if (!have_m)
		return bad("%s", "missing -m SIZE");
	if (cfg.hugedir != NULL && cfg.hugepages == COFFER_HP_OFF)
		return bad("%s", "-d needs hugepages: do not combine it with --hugepages=off");
	if (cfg.socket_path == NULL) {
		if (coffer__default_socket_path(defpath, sizeof(defpath)) != 0)
			return bad("%s", "default socket path too long; give -s SOCKET");
		cfg.socket_path = defpath;
	}
	spin_us = cfg.spin_us;
	if (coffer__env_u64("COFFER_STORE_SPIN_US", 0, 1000000, &spin_us) != 0)
		return bad("COFFER_STORE_SPIN_US='%s': want microseconds, 0..1000000",
			   getenv("COFFER_STORE_SPIN_US"));
	cfg.spin_us = (unsigned int)spin_us;
	if (coffer__env_u64("COFFER_STORE_SWEEP_US", 1000, 3600000000ull, &cfg.sweep_us) != 0)
		return bad("COFFER_STORE_SWEEP_US='%s': want microseconds, 1000..3600000000",
			   getenv("COFFER_STORE_SWEEP_US"));
	coffer__log_level = level;
	set_nofile(max_files);
	return coffer__store_run(&cfg);
}
