/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * perf/bench/common.c - machine description, hwloc pinning, the timed thread harness and
 * result reporting shared by every coffer-bench subcommand.
 *
 * Design note (concurrency of the harness):
 *  - Threads are created, pinned and set up before timing starts; each then spins on the
 *    `go` flag (acquire), which the main thread stores (release) right after reading the
 *    start time, so every body starts after that time was taken.
 *  - The stop flag is a plain relaxed signal (see bench_should_stop()); results travel
 *    through pthread_join, which is a full synchronisation point.
 *  - Elapsed time = latest body end - start: a thread that overshoots the stop flag is
 *    charged for the extra time as well as the extra operations.
 *  - Progress: waiting for `go` spins with sched_yield, so more threads than cores still
 *    start (the run is then flagged "oversub").
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <hwloc.h>

#include <coffer/common.h>

#include "bench.h"
#include "runtime/env.h"

static hwloc_topology_t bench_topo;
static bool bench_topo_loaded;
static unsigned int bench_ncores;
static FILE *bench_csv;

int bench_topology_init(void)
{
	int n;

	if (bench_topo_loaded)
		return 0;
	if (hwloc_topology_init(&bench_topo) < 0)
		return -errno;
	/* Default flags: objects outside this process's allowed cpuset (cgroups, taskset) are
	 * removed, so cores counts what we may really use. */
	if (hwloc_topology_load(bench_topo) < 0) {
		hwloc_topology_destroy(bench_topo);
		return -errno;
	}
	n = hwloc_get_nbobjs_by_type(bench_topo, HWLOC_OBJ_CORE);
	if (n <= 0) /* some virtual machines report PUs only */
		n = hwloc_get_nbobjs_by_type(bench_topo, HWLOC_OBJ_PU);
	bench_ncores = n > 0 ? (unsigned int)n : 1;
	bench_topo_loaded = true;
	return 0;
}

void bench_topology_fini(void)
{
	if (bench_topo_loaded)
		hwloc_topology_destroy(bench_topo);
	bench_topo_loaded = false;
}

unsigned int bench_cores(void)
{
	return bench_ncores;
}

static const char *bench_cpu_model(void)
{
	hwloc_obj_t obj = hwloc_get_obj_by_type(bench_topo, HWLOC_OBJ_PACKAGE, 0);
	const char *model = NULL;

	if (obj)
		model = hwloc_obj_get_info_by_name(obj, "CPUModel");
	if (!model)
		model = hwloc_obj_get_info_by_name(hwloc_get_root_obj(bench_topo), "CPUModel");
	return model ? model : "unknown";
}

/* Reads one "Key: value" number from /proc/meminfo; -1 when absent. */
static long bench_meminfo(const char *key)
{
	char line[256];
	size_t klen = strlen(key);
	long val = -1;
	FILE *f = fopen("/proc/meminfo", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
			val = strtol(line + klen + 1, NULL, 10);
			break;
		}
	}
	fclose(f);
	return val;
}

void bench_print_machine(FILE *f)
{
	struct utsname u;
	int pus = hwloc_get_nbobjs_by_type(bench_topo, HWLOC_OBJ_PU);
	int pkgs = hwloc_get_nbobjs_by_type(bench_topo, HWLOC_OBJ_PACKAGE);
	long hp_total = bench_meminfo("HugePages_Total");
	long hp_free = bench_meminfo("HugePages_Free");
	long hp_kb = bench_meminfo("Hugepagesize");

	double load[3] = {0, 0, 0};

	if (uname(&u) < 0)
		strcpy(u.release, "unknown");
	/* Load average: on a shared machine it says how much the figures can be trusted. */
	if (getloadavg(load, 3) < 0)
		load[0] = load[1] = load[2] = -1.0;
	fprintf(f,
		"# machine: cores=%u pus=%d packages=%d cpu=\"%s\" hugepages=%ld free=%ld "
		"size=%ldkB kernel=%s loadavg=%.2f,%.2f,%.2f\n",
		bench_ncores, pus, pkgs, bench_cpu_model(), hp_total, hp_free, hp_kb, u.release,
		load[0], load[1], load[2]);
}

int bench_pin_self(unsigned int index)
{
	hwloc_obj_t core = hwloc_get_obj_by_type(bench_topo, HWLOC_OBJ_CORE, index % bench_ncores);

	if (!core)
		core = hwloc_get_obj_by_type(bench_topo, HWLOC_OBJ_PU, index % bench_ncores);
	if (!core)
		return -ENOENT;
	/* The whole core (all its hardware threads): one benchmark thread per core. */
	if (hwloc_set_cpubind(bench_topo, core->cpuset, HWLOC_CPUBIND_THREAD) < 0)
		return -errno;
	return 0;
}

uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int bench_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!s || !*s || *s == '-')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

int bench_parse_uint_list(const char *s, unsigned int max, unsigned int *out)
{
	int n = 0;

	while (s && *s) {
		char *end;
		unsigned long v;

		if (n == BENCH_MAX_LIST || *s == '-')
			return -EINVAL;
		errno = 0;
		v = strtoul(s, &end, 10);
		if (errno || end == s || v < 1 || v > max || (*end && *end != ','))
			return -EINVAL;
		out[n++] = (unsigned int)v;
		s = *end ? end + 1 : end;
	}
	return n > 0 ? n : -EINVAL;
}

int bench_parse_seconds(const char *s, double *out)
{
	char *end;
	double v;

	if (!s || !*s)
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || !(v > 0.0) || v > 86400.0 || !isfinite(v))
		return -EINVAL;
	*out = v;
	return 0;
}

/* ---- harness ----------------------------------------------------------------------------- */

struct bench_sync {
	atomic_uint ready; /* threads that finished setup */
	atomic_bool go;	   /* release: start time taken */
	atomic_bool stop;
	atomic_int setup_err;
};

struct bench_worker {
	struct bench_thread t;
	struct bench_sync *sync;
	pthread_t tid;
};

static void *bench_worker_main(void *p)
{
	struct bench_worker *w = p;
	struct bench_thread *t = &w->t;
	struct bench_run *run = t->run;
	int err;

	err = bench_pin_self(t->id);
	if (err == 0 && run->setup)
		err = run->setup(t);
	if (err) {
		int zero = 0;

		/* First error wins; relaxed: read by main after join. */
		atomic_compare_exchange_strong_explicit(&w->sync->setup_err, &zero, err,
							memory_order_relaxed, memory_order_relaxed);
	}
	/* Release pairs with main's acquire load of ready: setup's writes happen before. */
	atomic_fetch_add_explicit(&w->sync->ready, 1, memory_order_release);
	/* Acquire pairs with main's release store of go (after it read the start time). */
	while (!atomic_load_explicit(&w->sync->go, memory_order_acquire))
		sched_yield();
	if (!err && !atomic_load_explicit(&w->sync->setup_err, memory_order_relaxed))
		run->body(t);
	t->t_end = bench_now_ns();
	if (!err && run->teardown)
		run->teardown(t);
	return NULL;
}

static void bench_sleep_s(double s)
{
	struct timespec ts;

	ts.tv_sec = (time_t)s;
	ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int bench_run_threads(struct bench_run *run)
{
	struct bench_sync sync;
	struct bench_worker *w;
	unsigned int i, started = 0;
	uint64_t start, end = 0;
	int err = 0;

	if (run->nthreads == 0 || run->nthreads > BENCH_MAX_THREADS || !run->body)
		return -EINVAL;
	w = bench_alloc_aligned(sizeof(*w) * run->nthreads);
	if (!w)
		return -ENOMEM;
	memset(w, 0, sizeof(*w) * run->nthreads);
	atomic_init(&sync.ready, 0);
	atomic_init(&sync.go, false);
	atomic_init(&sync.stop, false);
	atomic_init(&sync.setup_err, 0);

	for (i = 0; i < run->nthreads; i++) {
		w[i].t.id = i;
		w[i].t.run = run;
		w[i].t.stop = &sync.stop;
		w[i].sync = &sync;
		err = -pthread_create(&w[i].tid, NULL, bench_worker_main, &w[i]);
		if (err)
			break;
		started++;
	}
	if (err) {
		/* Let the started threads run a body that stops at once, then join them. */
		atomic_store_explicit(&sync.stop, true, memory_order_relaxed);
		atomic_store_explicit(&sync.setup_err, err, memory_order_relaxed);
	}
	/* Acquire pairs with each worker's release increment after its setup. */
	while (atomic_load_explicit(&sync.ready, memory_order_acquire) < started)
		sched_yield();
	start = bench_now_ns();
	atomic_store_explicit(&sync.go, true, memory_order_release);
	if (!err && run->seconds > 0.0) {
		bench_sleep_s(run->seconds);
		atomic_store_explicit(&sync.stop, true, memory_order_relaxed);
	}
	run->ops = 0;
	for (i = 0; i < started; i++) {
		pthread_join(w[i].tid, NULL);
		run->ops += w[i].t.ops;
		if (w[i].t.t_end > end)
			end = w[i].t.t_end;
	}
	run->elapsed_s = end > start ? (double)(end - start) / 1e9 : 0.0;
	run->setup_err = atomic_load_explicit(&sync.setup_err, memory_order_relaxed);
	free(w);
	if (err)
		return err;
	return run->setup_err;
}

/* ---- results ------------------------------------------------------------------------------ */

int bench_csv_open(const char *path)
{
	long pos;

	bench_csv = fopen(path, "a");
	if (!bench_csv)
		return -errno;
	fseek(bench_csv, 0, SEEK_END);
	pos = ftell(bench_csv);
	if (pos == 0)
		fprintf(bench_csv,
			"bench,impl,workload,threads,seconds,ops,mops,per_thread_mops,status\n");
	return 0;
}

void bench_csv_close(void)
{
	if (bench_csv)
		fclose(bench_csv);
	bench_csv = NULL;
}

const char *bench_status(const struct bench_result *r)
{
	if (!r->ok)
		return "FAIL";
	return r->threads > bench_ncores ? "oversub" : "ok";
}

void bench_report(const struct bench_result *r)
{
	double mops = r->seconds > 0.0 ? (double)r->ops / r->seconds / 1e6 : 0.0;
	double per = mops / (double)r->threads;
	const char *st = bench_status(r);

	printf("%-8s %-14s %-11s threads=%-3u %8.3f Mops/s  %8.3f Mops/s/thread  ops=%-11llu "
	       "%.3fs  %s%s%s%s\n",
	       r->bench, r->impl, r->workload, r->threads, mops, per, (unsigned long long)r->ops,
	       r->seconds, st, r->threads > bench_ncores ? " (more threads than cores)" : "",
	       r->note ? "  " : "", r->note ? r->note : "");
	fflush(stdout);
	if (bench_csv) {
		fprintf(bench_csv, "%s,%s,%s,%u,%.6f,%llu,%.6f,%.6f,%s\n", r->bench, r->impl,
			r->workload, r->threads, r->seconds, (unsigned long long)r->ops, mops, per,
			st);
		fflush(bench_csv);
	}
}

int bench_usage_error(const char *cmd, const char *what)
{
	if (what != NULL)
		fprintf(stderr, "coffer-bench %s: %s\n", cmd, what);
	fprintf(stderr, "Run 'coffer-bench %s --help' for its options.\n", cmd);
	return BENCH_EXIT_USAGE;
}

int bench_bad_value(const char *cmd, const struct option *lopts, int c, const char *arg)
{
	const char *name = NULL;

	for (; lopts != NULL && lopts->name != NULL; lopts++)
		if (lopts->flag == NULL && lopts->val == c) {
			name = lopts->name;
			break;
		}
	if (name != NULL)
		fprintf(stderr, "coffer-bench %s: --%s: bad value '%s'\n", cmd, name, arg);
	else
		fprintf(stderr, "coffer-bench %s: unexpected argument '%s'\n", cmd, arg);
	return bench_usage_error(cmd, NULL);
}

const char *bench_env_hint(int err)
{
	static char buf[256];
	char why[200];

	if (err != -EINVAL || coffer__env_explain(why, sizeof(why)) == 0)
		return "";
	snprintf(buf, sizeof(buf), " (%s; see README.md \"Linking a client\")", why);
	return buf;
}

int bench_init_failed(const char *cmd, int err)
{
	const char *hint = bench_env_hint(err);

	fprintf(stderr, "coffer-bench %s: coffer_init: %s%s\n", cmd, coffer_strerror(err), hint);
	return hint[0] != '\0' ? BENCH_EXIT_USAGE : BENCH_EXIT_VERIFY;
}

int bench_connect_failed(const char *cmd, const char *path, int err, int nostore)
{
	char why[200];

	if (err == -EINVAL && coffer__env_explain(why, sizeof(why)) != 0) {
		fprintf(stderr, "coffer-bench %s: %s (README.md \"Linking a client\")\n", cmd, why);
		return BENCH_EXIT_USAGE;
	}
	if (err == -ECONNREFUSED) {
		fprintf(stderr,
			"coffer-bench %s: no coffer-store is running at %s.\n"
			"Start one, e.g.: coffer-store -m 2G -s %s\n",
			cmd, path, path);
		return nostore;
	}
	fprintf(stderr, "coffer-bench %s: cannot use %s as a coffer-store: %s%s\n", cmd, path,
		coffer_strerror(err),
		err == -EPROTOTYPE || err == -ETIMEDOUT || err == -EPROTO
		    ? " (is another program listening there?)"
		    : "");
	return nostore;
}
