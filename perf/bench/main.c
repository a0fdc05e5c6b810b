/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * perf/bench/main.c - coffer-bench: one tool, one subcommand per benchmark.
 *
 *   coffer-bench hash      handle-hash scaling, coffer vs baselines   (hash.c)
 *   coffer-bench obj_open  obj_open / close ops/s through the API     (obj_open.c)
 *   coffer-bench store     store IPC and put throughput               (store.c, when built)
 */
#include <stdio.h>
#include <string.h>

#include "bench.h"

struct bench_cmd {
	const char *name;
	int (*main)(int argc, char **argv);
	const char *what;
};

static const struct bench_cmd bench_cmds[] = {
    {"hash", coffer__bench_hash_main,
     "handle-hash scaling: coffer_hhash vs global-spin, bucket-rwlock, urcu-lfht, ck-hs"},
    {"obj_open", coffer__bench_obj_open_main,
     "coffer_obj_open / coffer_obj_close ops/s against a running coffer-store"},
#ifdef COFFER_BENCH_HAVE_STORE
    {"store", coffer__bench_store_main, "store IPC: create+seal, get+release, large put vs memcpy"},
#endif
};

static void bench_usage(FILE *f)
{
	size_t i;

	fprintf(f,
		"usage: coffer-bench SUBCOMMAND [OPTIONS]   (SUBCOMMAND --help for details)\n\n");
	for (i = 0; i < sizeof(bench_cmds) / sizeof(bench_cmds[0]); i++)
		fprintf(f, "  %-9s %s\n", bench_cmds[i].name, bench_cmds[i].what);
#ifndef COFFER_BENCH_HAVE_STORE
	fprintf(f, "  (store: not built - perf/bench/store.c was absent at configure time)\n");
#endif
}

int main(int argc, char **argv)
{
	size_t i;
	int ret, err;

	if (argc < 2) {
		bench_usage(stderr);
		return BENCH_EXIT_USAGE;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		bench_usage(stdout);
		return 0;
	}
	for (i = 0; i < sizeof(bench_cmds) / sizeof(bench_cmds[0]); i++) {
		if (strcmp(argv[1], bench_cmds[i].name) != 0)
			continue;
		err = bench_topology_init();
		if (err) {
			fprintf(stderr, "coffer-bench: hwloc topology: %s\n", strerror(-err));
			return BENCH_EXIT_VERIFY;
		}
		/* The subcommand sees itself as argv[0], named as getopt_long's messages
		 * should name it. */
		char self[64];

		snprintf(self, sizeof(self), "coffer-bench %s", bench_cmds[i].name);
		argv[1] = self;
		ret = bench_cmds[i].main(argc - 1, argv + 1);
		bench_topology_fini();
		return ret;
	}
	fprintf(stderr, "coffer-bench: unknown subcommand '%s'\n", argv[1]);
	bench_usage(stderr);
	return BENCH_EXIT_USAGE;
}
