/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * perf/bench/obj_open.c - `coffer-bench obj_open`: DAOS's obj_open test (daos_test IO47)
 * made rigorous, through coffer's public object API only.
 *
 * For every thread count: phase "open" - each thread opens --objects fresh ObjectIDs
 * (coffer_obj_open, handles kept open), timed; phase "close" - each thread closes its
 * handles, timed separately (with --min-seconds S, both repeat with fresh ObjectIDs until
 * together they took S seconds; the rows sum the passes); phase "open-close" - each thread
 * loops open+close of fresh ObjectIDs for --seconds. One result row per phase.
 *
 * Design note:
 *  - All threads share one connection (coffer_connect once), as an application would.
 *  - ObjectIDs are unique per process run: (run nonce, pass, thread, counter) - so every open
 *    really creates a new handle, never finds an old one.
 *  - Verification per phase: every call returned 0; the handles issued are non-null and
 *    pairwise distinct; the process handle hash (coffer_hhash_global) holds exactly
 *    threads*objects more records after "open" and is back to its starting count after
 *    "close" and after "open-close"; a closed handle is rejected by a second close.
 *  - Per-thread results are written by the owner and read after join (pthread_join orders
 *    them); no shared counter is written on the timed path.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <coffer/common.h>
#include <coffer/hash.h>
#include <coffer/store.h>

#include "bench.h"
#include "runtime/proto_util.h"

/* Exit status when no store answers at the socket. */
#define OO_EXIT_NOSTORE 3

enum oo_phase { OO_OPEN, OO_CLOSE, OO_LOOP, OO_NPHASES };
static const char *const oo_phase_names[OO_NPHASES] = {"open", "close", "open-close"};

struct oo_tstate {
	coffer_handle_t *handles; /* --objects of them */
	uint64_t opened;	  /* handles[0 .. opened-1] are open */
	uint64_t failures;
	int first_err;
	uint64_t counter; /* ObjectID counter of this thread */
	char pad[BENCH_CACHELINE];
};

struct oo_state {
	coffer_handle_t conn;
	uint64_t objects;
	uint64_t nonce;
	uint32_t pass;
	enum oo_phase phase;
	struct oo_tstate *ts;
};

static void oo_make_oid(const struct oo_state *st, unsigned int tid, uint64_t n,
			struct coffer_oid *oid)
{
	uint32_t t32 = tid, n32 = (uint32_t)n;

	memcpy(oid->id, &st->nonce, 8);
	memcpy(oid->id + 8, &st->pass, 4);
	memcpy(oid->id + 12, &t32, 4);
	/* The counter's low 32 bits: a thread opens fewer than 2^32 objects per pass. */
	memcpy(oid->id + 16, &n32, 4);
}

static void oo_fail(struct oo_tstate *ts, int err)
{
	if (ts->failures++ == 0)
		ts->first_err = err;
}

static void oo_body(struct bench_thread *t)
{
	struct oo_state *st = t->run->arg;
	struct oo_tstate *ts = &st->ts[t->id];
	struct coffer_oid oid;
	coffer_handle_t h;
	uint64_t i;
	int err;

	switch (st->phase) {
	case OO_OPEN:
		for (i = 0; i < st->objects; i++) {
			oo_make_oid(st, t->id, ts->counter++, &oid);
			err = coffer_obj_open(st->conn, &oid, 0, &ts->handles[i]);
			if (err) {
				oo_fail(ts, err);
				break;
			}
			ts->opened++;
		}
		t->ops = ts->opened;
		break;
	case OO_CLOSE:
		for (i = 0; i < ts->opened; i++) {
			err = coffer_obj_close(ts->handles[i]);
			if (err)
				oo_fail(ts, err);
			else
				t->ops++;
		}
		break;
	case OO_LOOP:
		while (!bench_should_stop(t)) {
			for (i = 0; i < 32; i++) {
				oo_make_oid(st, t->id, ts->counter++, &oid);
				err = coffer_obj_open(st->conn, &oid, 0, &h);
				if (!err)
					err = coffer_obj_close(h);
				if (err) {
					oo_fail(ts, err);
					return;
				}
				t->ops++;
			}
		}
		break;
	default:
		break;
	}
}

static int oo_cmp_handle(const void *a, const void *b)
{
	uint64_t x = ((const coffer_handle_t *)a)->cookie, y = ((const coffer_handle_t *)b)->cookie;

	return x < y ? -1 : x > y;
}

/* Checks that every open handle is non-null and distinct; a copy is sorted. */
static bool oo_handles_distinct(const struct oo_state *st, unsigned int nthreads)
{
	coffer_handle_t *all;
	uint64_t n = 0, i;
	unsigned int t;
	bool ok = true;

	for (t = 0; t < nthreads; t++)
		n += st->ts[t].opened;
	all = malloc((n ? n : 1) * sizeof(*all));
	if (!all)
		return false;
	for (t = 0, i = 0; t < nthreads; t++) {
		memcpy(all + i, st->ts[t].handles, st->ts[t].opened * sizeof(*all));
		i += st->ts[t].opened;
	}
	qsort(all, n, sizeof(*all), oo_cmp_handle);
	for (i = 0; i < n && ok; i++)
		if (all[i].cookie == 0 || (i > 0 && all[i].cookie == all[i - 1].cookie))
			ok = false;
	free(all);
	return ok;
}

/* One phase's result, summed over its passes. */
struct oo_total {
	double seconds;
	uint64_t ops;
	bool ok;
	char note[256];
};

static void oo_report(enum oo_phase phase, unsigned int nthreads, const struct oo_total *tot)
{
	struct bench_result res = {0};

	res.bench = "obj_open";
	res.impl = "coffer";
	res.workload = oo_phase_names[phase];
	res.threads = nthreads;
	res.seconds = tot->seconds;
	res.ops = tot->ops;
	res.ok = tot->ok;
	res.note = tot->note;
	bench_report(&res);
}

/* Runs st->phase once and adds it to @tot (its note and ok are this pass's). */
static bool oo_phase_run(struct oo_state *st, unsigned int nthreads, double seconds,
			 uint64_t count0, uint64_t expect_count, struct oo_total *tot)
{
	struct bench_run run = {0};
	uint64_t failures = 0, count;
	int first_err = 0;
	char *note = tot->note;
	size_t notesz = sizeof(tot->note);
	unsigned int t;
	bool ok;
	int err;

	run.nthreads = nthreads;
	run.seconds = seconds;
	run.arg = st;
	run.body = oo_body;
	err = bench_run_threads(&run);
	for (t = 0; t < nthreads; t++) {
		if (st->ts[t].failures && !first_err)
			first_err = st->ts[t].first_err;
		failures += st->ts[t].failures;
		st->ts[t].failures = 0;
	}
	count = coffer_hhash_count(coffer_hhash_global());
	ok = !err && failures == 0;
	if (err)
		snprintf(note, notesz, "VERIFY: threads failed: %s", strerror(-err));
	else if (failures)
		snprintf(note, notesz, "VERIFY: %llu calls failed, first: %s",
			 (unsigned long long)failures, coffer_strerror(first_err));
	else if (count != expect_count) {
		snprintf(note, notesz,
			 "VERIFY: handle hash holds %llu records, expected %llu (start %llu)",
			 (unsigned long long)count, (unsigned long long)expect_count,
			 (unsigned long long)count0);
		ok = false;
	} else if (st->phase == OO_OPEN && !oo_handles_distinct(st, nthreads)) {
		snprintf(note, notesz, "VERIFY: a handle was null or issued twice");
		ok = false;
	} else {
		snprintf(note, notesz, "verified: handle hash count %llu",
			 (unsigned long long)count);
	}
	tot->seconds += run.elapsed_s;
	tot->ops += run.ops;
	tot->ok = ok;
	return ok;
}

static bool oo_one(struct oo_state *st, unsigned int nthreads, double seconds, double min_seconds,
		   bool fixed, bool loop)
{
	uint64_t count0 = coffer_hhash_count(coffer_hhash_global());
	struct oo_total topen = {0}, tclose = {0}, tloop = {0};
	unsigned int t;
	bool ok = true;

	st->ts = bench_alloc_aligned(sizeof(*st->ts) * nthreads);
	if (!st->ts)
		return false;
	memset(st->ts, 0, sizeof(*st->ts) * nthreads);
	for (t = 0; t < nthreads; t++) {
		st->ts[t].handles = calloc(st->objects, sizeof(coffer_handle_t));
		if (!st->ts[t].handles)
			ok = false;
	}
	if (ok && fixed) {
		/* fresh ObjectIDs every pass (the pass is part of each ID) */
		do {
			st->pass++;
			st->phase = OO_OPEN;
			ok &= oo_phase_run(st, nthreads, 0.0, count0,
					   count0 + nthreads * st->objects, &topen);
			st->phase = OO_CLOSE;
			ok &= oo_phase_run(st, nthreads, 0.0, count0, count0, &tclose);
			/* A closed handle must be gone: a second close is refused. */
			for (t = 0; t < nthreads; t++) {
				if (st->ts[t].opened &&
				    coffer_obj_close(st->ts[t].handles[st->ts[t].opened - 1]) ==
					0) {
					fprintf(stderr,
						"coffer-bench obj_open: VERIFY: a closed handle "
						"was closed again without error\n");
					ok = false;
				}
				st->ts[t].opened = 0;
			}
		} while (ok && topen.seconds + tclose.seconds < min_seconds);
		oo_report(OO_OPEN, nthreads, &topen);
		oo_report(OO_CLOSE, nthreads, &tclose);
	}
	if (ok && loop) {
		st->pass++;
		st->phase = OO_LOOP;
		ok &= oo_phase_run(st, nthreads, seconds, count0, count0, &tloop);
		oo_report(OO_LOOP, nthreads, &tloop);
	}
	for (t = 0; t < nthreads; t++)
		free(st->ts[t].handles);
	free(st->ts);
	st->ts = NULL;
	return ok;
}

static void oo_usage(FILE *f)
{
	fprintf(f,
		"usage: coffer-bench obj_open [--socket PATH] [--threads LIST] [--objects N]\n"
		"                             [--min-seconds S] [--seconds S]\n"
		"                             [--phases open-close,loop] [--csv FILE]\n"
		"\n"
		"obj_open ops/s through coffer's public API (DAOS daos_test IO47, made rigorous):\n"
		"  open        each thread opens N fresh ObjectIDs, handles kept open (timed)\n"
		"  close       then closes them (timed separately)\n"
		"  open-close  each thread loops open+close of fresh ObjectIDs for S seconds\n"
		"\n"
		"  --socket PATH   coffer-store socket; default $COFFER_SOCKET, else the per-user\n"
		"                  default path of coffer-store\n"
		"  --threads LIST  default 1,2,4,8,16; pinned one per core (hwloc), more: flagged\n"
		"  --objects N     objects opened per thread in the open phase, default 100000\n"
		"  --min-seconds S repeat open and close (fresh ObjectIDs each pass) until they\n"
		"                  took S seconds together; rows sum the passes; default: once\n"
		"  --seconds S     length of the open-close loop, default 1\n"
		"  --phases LIST   open-close (the open then close phases), loop, default both\n"
		"  --csv FILE      append rows bench,impl,workload,threads,seconds,ops,mops,\n"
		"                  per_thread_mops,status\n"
		"Exit status: 0 all verified, 1 a verification failed, 2 usage, 3 no coffer-store\n"
		"             at the socket (none running, or another program listening there).\n");
}

int coffer__bench_obj_open_main(int argc, char **argv)
{
	static const struct option lopts[] = {
	    {"socket", required_argument, NULL, 'S'},
	    {"threads", required_argument, NULL, 't'},
	    {"objects", required_argument, NULL, 'n'},
	    {"seconds", required_argument, NULL, 's'},
	    {"phases", required_argument, NULL, 'P'},
	    {"csv", required_argument, NULL, 'c'},
	    {"min-seconds", required_argument, NULL, 'm'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	unsigned int threads[BENCH_MAX_LIST] = {1, 2, 4, 8, 16};
	int nthreads = 5, c, n, err, failed = 0;
	struct oo_state st = {0};
	double seconds = 1.0, min_seconds = 0.0;
	bool fixed = true, loop = true;
	const char *csv = NULL;
	char path[108];

	path[0] = '\0';
	st.objects = 100000;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
		switch (c) {
		case 'S':
			if (strlen(optarg) >= sizeof(path))
				goto bad;
			strcpy(path, optarg);
			break;
		case 't':
			n = bench_parse_uint_list(optarg, BENCH_MAX_THREADS, threads);
			if (n < 0)
				goto bad;
			nthreads = n;
			break;
		case 'n':
			if (bench_parse_u64(optarg, 1, 1u << 28, &st.objects))
				goto bad;
			break;
		case 's':
			if (bench_parse_seconds(optarg, &seconds))
				goto bad;
			break;
		case 'm':
			if (bench_parse_seconds(optarg, &min_seconds))
				goto bad;
			break;
		case 'P':
			fixed = strstr(optarg, "open-close") != NULL;
			loop = strstr(optarg, "loop") != NULL;
			if (!fixed && !loop)
				goto bad;
			break;
		case 'c':
			csv = optarg;
			break;
		case 'h':
			oo_usage(stdout);
			return 0;
		default:
			goto usage;
		}
	}
	if (optind != argc)
		return bench_bad_value("obj_open", NULL, 0, argv[optind]);
	if (!path[0] && coffer__default_socket_path(path, sizeof(path))) {
		fprintf(stderr, "coffer-bench obj_open: socket path too long\n");
		return BENCH_EXIT_USAGE;
	}

	err = coffer_init();
	if (err)
		return bench_init_failed("obj_open", err);
	err = coffer_connect(path, &st.conn);
	if (err) {
		err = bench_connect_failed("obj_open", path, err, OO_EXIT_NOSTORE);
		coffer_fini();
		return err;
	}
	if (csv && bench_csv_open(csv)) {
		fprintf(stderr, "coffer-bench: cannot open %s: %s\n", csv, strerror(errno));
		coffer_disconnect(st.conn);
		coffer_fini();
		return BENCH_EXIT_USAGE;
	}
	st.nonce = bench_now_ns() ^ ((uint64_t)getpid() << 32);
	bench_print_machine(stdout);
	printf("# obj_open: socket=%s objects/thread=%llu min_seconds=%g loop_seconds=%g\n", path,
	       (unsigned long long)st.objects, min_seconds, seconds);
	for (n = 0; n < nthreads; n++)
		if (!oo_one(&st, threads[n], seconds, min_seconds, fixed, loop))
			failed++;
	bench_csv_close();
	err = coffer_disconnect(st.conn);
	if (err) {
		fprintf(stderr, "coffer-bench obj_open: disconnect: %s\n", coffer_strerror(err));
		failed++;
	}
	coffer_fini();
	if (failed) {
		fprintf(stderr, "coffer-bench obj_open: %d thread count(s) FAILED verification\n",
			failed);
		return BENCH_EXIT_VERIFY;
	}
	return 0;
bad:
	return bench_bad_value("obj_open", lopts, c, optarg);
usage:
	return bench_usage_error("obj_open", NULL);
}
