/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * perf/bench/bench.h - what every coffer-bench subcommand shares: the machine description,
 * hwloc thread pinning, the timed thread harness, list parsing, and result reporting (one
 * human-readable line per result plus optional CSV).
 *
 * The harness follows liburcu's tests/benchmark/test_urcu_hash.c and libuv's benchmark-*.c:
 * parameters on the command line, threads released together, a stop flag set by the main
 * thread after the requested time, per-thread counters summed only after join, and a
 * verification step whose failure makes the process exit non-zero.
 */
#ifndef COFFER_BENCH_H
#define COFFER_BENCH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Cache line size assumed for padding (x86-64, arm64 servers); only a layout hint. */
#define BENCH_CACHELINE 64

/* aligned_alloc() with the size rounded up to a multiple of the alignment, as C11 requires. */
static inline void *bench_alloc_aligned(size_t size)
{
	return aligned_alloc(BENCH_CACHELINE,
			     (size + BENCH_CACHELINE - 1) / BENCH_CACHELINE * BENCH_CACHELINE);
}

/* Largest number of entries accepted in a --threads list, and largest thread count. */
#define BENCH_MAX_LIST	  32
#define BENCH_MAX_THREADS 1024

/* Exit status when a verification failed (distinct from usage errors, which exit 2). */
#define BENCH_EXIT_VERIFY 1
#define BENCH_EXIT_USAGE  2

/* ---- machine and pinning (common.c) ------------------------------------------------- */

/* Loads the hwloc topology once; must be called before any other bench_* function. */
int bench_topology_init(void);
void bench_topology_fini(void);
/* Cores that this process may run on (hwloc, restricted to the allowed cpuset). */
unsigned int bench_cores(void);
/* Writes "# machine: ..." (cores, PUs, CPU model, hugepages, kernel) to @f. */
void bench_print_machine(FILE *f);
/* Binds the calling thread to core (@index mod bench_cores()); 0 or a negative errno. */
int bench_pin_self(unsigned int index);

/* ---- time ---------------------------------------------------------------------------- */

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t bench_now_ns(void);

/* ---- option parsing helpers ---------------------------------------------------------- */

/* Parses "1,2,4" into @out (at most BENCH_MAX_LIST values, each 1..@max); count or -EINVAL. */
int bench_parse_uint_list(const char *s, unsigned int max, unsigned int *out);
/* Parses a positive number of seconds ("0.2", "5"); 0 or -EINVAL. */
int bench_parse_seconds(const char *s, double *out);
/* Parses a decimal unsigned value in [min, max]; 0 or -EINVAL. */
int bench_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);

struct option;
/*
 * Usage errors, for `coffer-bench @cmd`. bench_bad_value() writes one line naming the
 * option whose short code is @c (its long name looked up in @lopts) and the refused @arg,
 * or, with @lopts NULL, calls @arg an unexpected argument; bench_usage_error() writes @what
 * (NULL: getopt_long has said it already). Both then say where the full help is and return
 * BENCH_EXIT_USAGE.
 */
int bench_bad_value(const char *cmd, const struct option *lopts, int c, const char *arg);
int bench_usage_error(const char *cmd, const char *what);

/*
 * Prints why `coffer-bench @cmd` could not connect to the store at @path, given
 * coffer_connect()'s error @err: a bad COFFER_* environment variable (named, with
 * coffer_env_check()), no store there (-ECONNREFUSED, with how to start one), or something
 * at @path that is not a usable coffer-store (any other error, named).
 * Return: the exit status to use: BENCH_EXIT_USAGE for the environment, else @nostore.
 */
int bench_connect_failed(const char *cmd, const char *path, int err, int nostore);
/*
 * Appended to an error from coffer_init() or coffer_connect(): for -EINVAL caused by a bad
 * COFFER_* environment variable, " (environment variable NAME=VALUE ...)" naming it
 * (coffer_env_check()); else "". The string lives until the next call (main thread only).
 */
const char *bench_env_hint(int err);
/*
 * Prints why coffer_init() failed for `coffer-bench @cmd`, given its error @err, naming a
 * bad COFFER_* environment variable when that is the cause (bench_env_hint()).
 * Return: the exit status to use: BENCH_EXIT_USAGE when the environment is the cause (as
 * bench_connect_failed() does for coffer_connect()'s variables), else BENCH_EXIT_VERIFY.
 * Main thread only.
 */
int bench_init_failed(const char *cmd, int err);

/* ---- the thread harness -------------------------------------------------------------- */

struct bench_thread;

/*
 * One run: @nthreads threads, each pinned, each calling @setup (untimed), then @body (timed),
 * then @teardown (untimed). With @seconds > 0 the main thread sets the stop flag after that
 * long; with 0 every body runs to completion (fixed work).
 */
struct bench_run {
	unsigned int nthreads;
	double seconds;
	void *arg;
	int (*setup)(struct bench_thread *t);
	void (*body)(struct bench_thread *t);
	void (*teardown)(struct bench_thread *t);
	/* out */
	uint64_t ops;	  /* sum of every thread's t->ops */
	double elapsed_s; /* from the common start to the last body's end */
	int setup_err;	  /* first setup error, 0 if none */
};

struct bench_thread {
	unsigned int id;       /* 0 .. nthreads-1 */
	struct bench_run *run; /* run->arg is the subcommand's state */
	void *tls;	       /* for setup/body/teardown */
	uint64_t ops;	       /* operations completed by body; summed after join */
	uint64_t t_end;	       /* set by the harness */
	const atomic_bool *stop;
	char pad[BENCH_CACHELINE];
};

/*
 * Polls the stop flag. Relaxed: the flag only tells a loop to end; the ops counters and all
 * other results are published by pthread_join, not by this flag.
 */
static inline bool bench_should_stop(const struct bench_thread *t)
{
	return atomic_load_explicit(t->stop, memory_order_relaxed);
}

/* Runs @run; 0, or a negative errno when threads could not be created or setup failed. */
int bench_run_threads(struct bench_run *run);

/* ---- results --------------------------------------------------------------------------- */

/* One result row; status is "ok", "oversub" (passed, more threads than cores) or "FAIL". */
struct bench_result {
	const char *bench;    /* "hash", "obj_open" */
	const char *impl;     /* "coffer", "global-spin", ... */
	const char *workload; /* "lookup", "open", ... */
	unsigned int threads;
	double seconds;
	uint64_t ops;
	bool ok;
	const char *note; /* extra words for the human line (may be NULL) */
};

/* Opens @path for CSV output (appending; writes the header when the file is empty). */
int bench_csv_open(const char *path);
void bench_csv_close(void);
/* Prints the human line to stdout and, when open, the CSV row. */
void bench_report(const struct bench_result *r);
/* Status word of a result, as written in the CSV. */
const char *bench_status(const struct bench_result *r);

/* ---- subcommands --------------------------------------------------------------------- */

int coffer__bench_hash_main(int argc, char **argv);
int coffer__bench_obj_open_main(int argc, char **argv);
/* Implemented in perf/bench/store.c by the store benchmark work (optional at build time). */
int coffer__bench_store_main(int argc, char **argv);

#endif /* COFFER_BENCH_H */
