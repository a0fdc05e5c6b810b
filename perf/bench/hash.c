/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * perf/bench/hash.c - `coffer-bench hash`: coffer's handle hash against tables modelled on
 * what other systems use, side by side in one process, same workloads, same run.
 *
 * Design note:
 *  - One run = one (impl, workload, threads) triple on a fresh table: prefill (untimed), the
 *    hot set (untimed), the timed workload, then teardown (untimed): delete every record left,
 *    destroy the table (which waits for its reclamation), and verify.
 *  - Verification after every run (liburcu test_urcu_hash.c style): every lookup found a
 *    linked record carrying its key's payload; the operation counts add up (ops = lookups +
 *    open-close cycles; records allocated during the run = cycles); the table count is back
 *    to where it was before the run; after destroy, frees == allocations for every thread's
 *    slot; no table reported a refcount going below zero or a record freed while linked.
 *    Any failure marks the row FAIL and makes the process exit 1.
 *  - --inject (leak | refcount) plants one deliberate bug in thread 0's first open-close
 *    cycle so that a test can check that the verification fails when it should.
 *  - Counters are per thread (summed after join) so counting costs no shared write on the
 *    hot path; frees are counted per allocating thread's slot with relaxed atomic adds by
 *    the reclaiming thread, read only after the table is destroyed (its barrier orders them).
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include <coffer/common.h>

#include "bench.h"
#include "hash_impl.h"

static const struct bh_impl *const bh_impls[] = {
    &bh_impl_coffer,	&bh_impl_global_spin, &bh_impl_bucket_rwlock,
    &bh_impl_urcu_lfht, &bh_impl_ck_hs,
};
#define BH_NIMPLS (sizeof(bh_impls) / sizeof(bh_impls[0]))

enum bh_workload { BH_LOOKUP, BH_LOOKUP_RCU, BH_OPEN_CLOSE, BH_MIXED, BH_NWORKLOADS };
static const char *const bh_workload_names[BH_NWORKLOADS] = {"lookup", "lookup-rcu", "open-close",
							     "mixed"};

enum bh_inject { BH_INJECT_NONE, BH_INJECT_LEAK, BH_INJECT_REFCOUNT };

struct bh_opts {
	bool impl_on[BH_NIMPLS];
	bool workload_on[BH_NWORKLOADS];
	unsigned int threads[BENCH_MAX_LIST];
	int nthreads;
	double seconds;
	uint64_t keys;
	uint64_t prefill;
	uint64_t repeat;
	unsigned int buckets_log2;
	enum bh_inject inject;
	const char *csv;
};

/* Per-thread results, written by the owner only, read after join. */
struct bh_tstats {
	uint64_t lookups;
	uint64_t cycles;
	uint64_t bad;
};

/* State of one run, shared read-only by the worker threads. */
struct bh_runstate {
	const struct bh_impl *impl;
	void *tab;
	struct bh_ctx *ctx;
	enum bh_workload wl;
	enum bh_inject inject;
	const uint64_t *hot; /* keys of the hot set */
	uint64_t nhot;
	struct bh_tstats *ts; /* one per thread */
};

/* ---- record accounting (used by every impl) ------------------------------------------------ */

void *bh_rec_alloc(struct bh_ctx *ctx, size_t size, unsigned int slot)
{
	struct bh_rec *rec = calloc(1, size);

	if (!rec)
		return NULL;
	rec->slot = slot;
	atomic_init(&rec->state, BH_ALLOCATED);
	ctx->acct[slot].allocs++;
	return rec;
}

void bh_error(struct bh_ctx *ctx, const char *what)
{
	/* Relaxed: read by the main thread after join and after the table's barrier. */
	if (atomic_fetch_add_explicit(&ctx->errors, 1, memory_order_relaxed) == 0)
		ctx->first_error = what;
}

void bh_rec_free(struct bh_ctx *ctx, struct bh_rec *rec)
{
	uint32_t st = atomic_load_explicit(&rec->state, memory_order_relaxed);

	if (st != BH_UNLINKED) {
		/* Freed while still linked (a refcount dropped below the table's) or twice:
		 * count it and quarantine the record rather than free memory a lookup may still
		 * reach, so that the run ends with a report instead of a crash. */
		bh_error(ctx, st == BH_LINKED ? "record freed while linked (refcount underflow)"
					      : "record freed in a wrong state");
		return;
	}
	atomic_store_explicit(&rec->state, BH_FREED, memory_order_relaxed);
	atomic_fetch_add_explicit(&ctx->acct[rec->slot].frees, 1, memory_order_relaxed);
	free(rec);
	/* The table's destroy waits for this callback (rcu_barrier, ck_epoch_barrier) inside
	 * uninstrumented library code; let TSan see that edge (acquired after destroy). */
	bh_tsan_release(ctx);
}

/* ---- workloads ------------------------------------------------------------------------------ */

/* xorshift64*: a few cycles, no shared state. */
static inline uint64_t bh_rand(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

/* Index in [0, n) from the high 32 bits of @r by multiply-shift (Lemire): no division on
 * the hot path, where a 64-bit modulo would cost as much as the lookup being measured.
 * n <= 2^26 (option bounds), so the product fits in 64 bits. */
static inline uint64_t bh_pick(uint64_t r, uint64_t n)
{
	return ((r >> 32) * n) >> 32;
}

static inline void bh_do_lookup(const struct bh_runstate *st, void *tls, uint64_t key,
				struct bh_tstats *ts)
{
	struct bh_rec *rec = st->impl->lookup(st->tab, tls, key);

	ts->lookups++;
	if (!rec) {
		ts->bad++;
		return;
	}
	if (!bh_rec_valid(rec, key))
		ts->bad++;
	st->impl->release(st->tab, tls, rec);
}

/* insert a fresh handle, look it up, release, delete: one open-close cycle. */
static inline int bh_do_cycle(const struct bh_runstate *st, void *tls, unsigned int slot,
			      struct bh_tstats *ts, bool inject)
{
	struct bh_rec *rec, *found;
	int err;

	err = st->impl->insert(st->tab, tls, slot, &rec);
	if (err)
		return err;
	ts->cycles++;
	found = st->impl->lookup(st->tab, tls, rec->key);
	if (found != rec || !bh_rec_valid(rec, rec->key))
		ts->bad++;
	if (found) {
		if (!(inject && st->inject == BH_INJECT_LEAK))
			st->impl->release(st->tab, tls, found);
		if (inject && st->inject == BH_INJECT_REFCOUNT)
			st->impl->release(st->tab, tls, found); /* one release too many */
	}
	/* Relaxed: the state is read by this table's free path, after a grace period or a
	 * lock/refcount hand-over that orders it; lookups of this key by others never happen. */
	atomic_store_explicit(&rec->state, BH_UNLINKED, memory_order_relaxed);
	return st->impl->delete (st->tab, tls, rec);
}

static int bh_thread_setup(struct bench_thread *t)
{
	const struct bh_runstate *st = t->run->arg;

	return st->impl->thread_enter(st->tab, &t->tls);
}

static void bh_thread_teardown(struct bench_thread *t)
{
	const struct bh_runstate *st = t->run->arg;

	st->impl->thread_exit(st->tab, t->tls);
}

/* Operations between two polls of the stop flag. */
#define BH_BATCH 32

static void bh_thread_body(struct bench_thread *t)
{
	const struct bh_runstate *st = t->run->arg;
	struct bh_tstats ts = {0};
	uint64_t seed = 0x853c49e6748fea9bull ^ ((uint64_t)(t->id + 1) * 0x9e3779b97f4a7c15ull);
	const uint64_t nhot = st->nhot;
	unsigned int slot = t->id + 1;
	bool inject = t->id == 0 && st->inject != BH_INJECT_NONE;
	uint64_t ops = 0;
	int i, err = 0;

	while (!err && !bench_should_stop(t)) {
		for (i = 0; i < BH_BATCH && !err; i++) {
			uint64_t r = bh_rand(&seed);

			switch (st->wl) {
			case BH_LOOKUP:
				bh_do_lookup(st, t->tls, st->hot[bh_pick(r, nhot)], &ts);
				break;
			case BH_LOOKUP_RCU: {
				uint64_t key = st->hot[bh_pick(r, nhot)];

				ts.lookups++;
				if (st->impl->lookup_noref(st->tab, t->tls, key) !=
				    (key ^ BH_PAYLOAD_SALT))
					ts.bad++;
				break;
			}
			case BH_OPEN_CLOSE:
				err = bh_do_cycle(st, t->tls, slot, &ts, inject);
				inject = false;
				break;
			case BH_MIXED:
				/* Low half for the 90/10 choice, high half for the key. */
				if (((r & 0xffffffffu) * 10) >> 32 == 0) {
					err = bh_do_cycle(st, t->tls, slot, &ts, inject);
					inject = false;
				} else {
					bh_do_lookup(st, t->tls, st->hot[bh_pick(r, nhot)], &ts);
				}
				break;
			default:
				break;
			}
			ops++;
		}
	}
	if (err) {
		ops--; /* the failed cycle did not complete */
		ts.bad++;
	}
	t->ops = ops;
	st->ts[t->id] = ts;
}

/* ---- one run ------------------------------------------------------------------------------ */

struct bh_setup {
	uint64_t *hot;
	struct bh_rec **recs; /* every record linked by the main thread */
	uint64_t nrecs;
};

/* Links @prefill records, then the hot set (so the hot records are the most recently
 * inserted, like handles an application opened last; where they sit in a chain is each
 * table's own insertion policy). */
static int bh_fill(const struct bh_impl *impl, void *tab, void *tls, uint64_t prefill,
		   uint64_t keys, struct bh_setup *s)
{
	uint64_t i, n = prefill + keys;
	int err;

	s->recs = calloc(n ? n : 1, sizeof(*s->recs));
	s->hot = calloc(keys ? keys : 1, sizeof(*s->hot));
	if (!s->recs || !s->hot)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		err = impl->insert(tab, tls, 0, &s->recs[i]);
		if (err)
			return err;
		s->nrecs++;
		if (i >= prefill)
			s->hot[i - prefill] = s->recs[i]->key;
	}
	return 0;
}

static void bh_unfill(const struct bh_impl *impl, void *tab, void *tls, struct bh_setup *s,
		      struct bh_ctx *ctx)
{
	uint64_t i;

	for (i = 0; i < s->nrecs; i++) {
		atomic_store_explicit(&s->recs[i]->state, BH_UNLINKED, memory_order_relaxed);
		if (impl->delete (tab, tls, s->recs[i]))
			bh_error(ctx, "delete of a prefilled record failed");
	}
	free(s->recs);
	free(s->hot);
}

static bool bh_one_run(const struct bh_opts *o, const struct bh_impl *impl, enum bh_workload wl,
		       unsigned int nthreads)
{
	struct bh_params params = {
	    .buckets_log2 = o->buckets_log2,
	    .capacity = o->prefill + o->keys + nthreads,
	};
	struct bh_ctx ctx = {0};
	struct bh_runstate st = {0};
	struct bh_setup fill = {0};
	struct bench_run run = {0};
	struct bench_result res = {0};
	struct bh_tstats sum = {0};
	uint64_t count0 = 0, count1 = 0, allocs = 0, frees = 0, run_allocs = 0, backlog = 0;
	char note[256];
	void *tab = NULL, *tls = NULL;
	bool ok = true, entered = false;
	unsigned int i;
	int err;

	ctx.nslots = nthreads + 1;
	ctx.acct = bench_alloc_aligned(sizeof(*ctx.acct) * ctx.nslots);
	st.ts = calloc(nthreads, sizeof(*st.ts));
	if (!ctx.acct || !st.ts) {
		fprintf(stderr, "coffer-bench: out of memory\n");
		exit(BENCH_EXIT_VERIFY);
	}
	memset(ctx.acct, 0, sizeof(*ctx.acct) * ctx.nslots);

	err = impl->create(&params, &ctx, &tab);
	if (err) {
		snprintf(note, sizeof(note), "table could not be created: %s", strerror(-err));
		ok = false;
		goto report;
	}
	err = impl->thread_enter(tab, &tls);
	entered = err == 0;
	if (!err)
		err = bh_fill(impl, tab, tls, o->prefill, o->keys, &fill);
	if (err) {
		fprintf(stderr, "coffer-bench: %s: prefill failed: %s\n", impl->name,
			strerror(-err));
		ok = false;
	}
	count0 = impl->count(tab);

	st.impl = impl;
	st.tab = tab;
	st.ctx = &ctx;
	st.wl = wl;
	st.inject = o->inject;
	st.hot = fill.hot;
	st.nhot = o->keys;
	run.nthreads = nthreads;
	run.seconds = o->seconds;
	run.arg = &st;
	run.setup = bh_thread_setup;
	run.body = bh_thread_body;
	run.teardown = bh_thread_teardown;
	if (ok) {
		err = bench_run_threads(&run);
		if (err) {
			fprintf(stderr, "coffer-bench: %s: threads failed: %s\n", impl->name,
				strerror(-err));
			ok = false;
		}
	}
	for (i = 0; i < nthreads; i++) {
		sum.lookups += st.ts[i].lookups;
		sum.cycles += st.ts[i].cycles;
		sum.bad += st.ts[i].bad;
		run_allocs += ctx.acct[i + 1].allocs;
	}
	count1 = impl->count(tab);
	/* Reclaim backlog when the timed phase ended: records allocated, not linked, not yet
	 * freed (waiting for a grace period, an epoch, or a reclaimer thread that fell behind).
	 * A snapshot: reclaimers may still be running. */
	for (i = 0; i < ctx.nslots; i++) {
		allocs += ctx.acct[i].allocs;
		frees += atomic_load_explicit(&ctx.acct[i].frees, memory_order_relaxed);
	}
	backlog = allocs - frees > count1 ? allocs - frees - count1 : 0;
	allocs = frees = 0;

	/* Teardown: delete what the main thread linked, then destroy (waits for reclaim). */
	if (entered) {
		bh_unfill(impl, tab, tls, &fill, &ctx);
		impl->thread_exit(tab, tls);
	} else {
		free(fill.recs);
		free(fill.hot);
	}
	if (impl->count(tab) != 0) {
		bh_error(&ctx, "table not empty after every record was deleted");
	}
	impl->destroy(tab);
	bh_tsan_acquire(&ctx); /* pairs with bh_rec_free's release */
	for (i = 0; i < ctx.nslots; i++) {
		allocs += ctx.acct[i].allocs;
		frees += atomic_load_explicit(&ctx.acct[i].frees, memory_order_relaxed);
	}

	note[0] = '\0';
	if (sum.bad) {
		snprintf(note, sizeof(note), "VERIFY: %llu lookups/cycles failed",
			 (unsigned long long)sum.bad);
		ok = false;
	} else if (run.ops != sum.lookups + sum.cycles) {
		snprintf(note, sizeof(note), "VERIFY: ops %llu != lookups %llu + cycles %llu",
			 (unsigned long long)run.ops, (unsigned long long)sum.lookups,
			 (unsigned long long)sum.cycles);
		ok = false;
	} else if (run_allocs != sum.cycles) {
		snprintf(note, sizeof(note), "VERIFY: %llu records allocated for %llu cycles",
			 (unsigned long long)run_allocs, (unsigned long long)sum.cycles);
		ok = false;
	} else if (count1 != count0) {
		snprintf(note, sizeof(note), "VERIFY: table held %llu records before, %llu after",
			 (unsigned long long)count0, (unsigned long long)count1);
		ok = false;
	} else if (atomic_load_explicit(&ctx.errors, memory_order_relaxed)) {
		snprintf(
		    note, sizeof(note), "VERIFY: %llu errors, first: %s",
		    (unsigned long long)atomic_load_explicit(&ctx.errors, memory_order_relaxed),
		    ctx.first_error);
		ok = false;
	} else if (frees != allocs) {
		snprintf(note, sizeof(note), "VERIFY: leak: %llu records allocated, %llu freed",
			 (unsigned long long)allocs, (unsigned long long)frees);
		ok = false;
	} else if (ok) {
		snprintf(note, sizeof(note), "verified: %llu allocs = frees; backlog at end %llu",
			 (unsigned long long)allocs, (unsigned long long)backlog);
	}

report:
	res.bench = "hash";
	res.impl = impl->name;
	res.workload = bh_workload_names[wl];
	res.threads = nthreads;
	res.seconds = run.elapsed_s;
	res.ops = run.ops;
	res.ok = ok;
	res.note = note;
	bench_report(&res);
	free(ctx.acct);
	free(st.ts);
	return ok;
}

/* ---- options -------------------------------------------------------------------------------- */

static void bh_usage(FILE *f)
{
	size_t i;

	fprintf(
	    f,
	    "usage: coffer-bench hash [--impl LIST] [--workload LIST] [--threads LIST]\n"
	    "                         [--seconds S] [--keys N] [--prefill N] [--buckets-log2 B]\n"
	    "                         [--repeat N] [--csv FILE] [--inject leak|refcount]\n"
	    "\n"
	    "Handle-hash scaling: each (impl, workload, threads) runs on a fresh table for S\n"
	    "seconds, threads pinned one per core (hwloc), then is verified; one line per result.\n"
	    "\n"
	    "  --impl LIST       comma-separated, default all:\n");
	for (i = 0; i < BH_NIMPLS; i++)
		fprintf(f, "      %-14s %s\n", bh_impls[i]->name, bh_impls[i]->model);
	fprintf(f,
		"  --workload LIST   comma-separated, default all:\n"
		"      lookup         random lookups of the hot set, each taking and dropping a\n"
		"                     reference (addref + release): the EQ-poll path\n"
		"      lookup-rcu     the same without a reference: read the record inside the\n"
		"                     table's read-side protection (coffer_hhash_lookup_rcu)\n"
		"      open-close     insert a fresh handle, look it up, release, delete\n"
		"      mixed          90%% lookup, 10%% open-close\n"
		"  --threads LIST    thread counts, default 1,2,4,8,16 (more than cores: flagged)\n"
		"  --seconds S       per result, default 1 (fractions allowed)\n"
		"  --keys N          hot set size, 1..67108864 (2^26), default 1024\n"
		"  --prefill N       records linked before every run, 0..67108864, default 100000\n"
		"  --buckets-log2 B  buckets of the chained tables (initial size of urcu-lfht and\n"
		"                    ck-hs), 4..26, default 16 (DAOS's handle hash: 2^16 buckets)\n"
		"  --repeat N        run every point N times (one row each), impls interleaved\n"
		"                    at each (workload, threads) point; 1..100, default 1\n"
		"  --csv FILE        append rows bench,impl,workload,threads,seconds,ops,mops,\n"
		"                    per_thread_mops,status (header written to an empty file)\n"
		"  --inject KIND     self-test of the verification: thread 0's first open-close\n"
		"                    cycle leaks a reference (leak) or drops one too many\n"
		"                    (refcount); the run must then FAIL\n"
		"\n"
		"Baselines use one shared atomic counter for keys (DAOS's lock-free cookies) and\n"
		"the same mixing; all records are malloc'd and freed through the same accounting.\n"
		"Exit status: 0 all verified, 1 a verification failed, 2 usage error.\n");
}

static int bh_parse_names(const char *s, const char *const *names, size_t n, bool *on)
{
	char buf[256], *tok, *save = NULL;
	size_t i;

	if (strlen(s) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, s);
	memset(on, 0, n * sizeof(*on));
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		for (i = 0; i < n; i++)
			if (strcmp(tok, names[i]) == 0)
				break;
		if (i == n)
			return -EINVAL;
		on[i] = true;
	}
	return 0;
}

int coffer__bench_hash_main(int argc, char **argv)
{
	static const struct option lopts[] = {
	    {"impl", required_argument, NULL, 'i'},
	    {"workload", required_argument, NULL, 'w'},
	    {"threads", required_argument, NULL, 't'},
	    {"seconds", required_argument, NULL, 's'},
	    {"keys", required_argument, NULL, 'k'},
	    {"prefill", required_argument, NULL, 'p'},
	    {"buckets-log2", required_argument, NULL, 'b'},
	    {"csv", required_argument, NULL, 'c'},
	    {"inject", required_argument, NULL, 'j'},
	    {"repeat", required_argument, NULL, 'r'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *impl_names[BH_NIMPLS];
	struct bh_opts o = {
	    .threads = {1, 2, 4, 8, 16},
	    .nthreads = 5,
	    .seconds = 1.0,
	    .keys = 1024,
	    .prefill = 100000,
	    .repeat = 1,
	    .buckets_log2 = 16,
	};
	uint64_t v;
	size_t i, w;
	int c, n, failed = 0, results = 0;
	uint64_t r;

	for (i = 0; i < BH_NIMPLS; i++) {
		impl_names[i] = bh_impls[i]->name;
		o.impl_on[i] = true;
	}
	for (w = 0; w < BH_NWORKLOADS; w++)
		o.workload_on[w] = true;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
		switch (c) {
		case 'i':
			if (bh_parse_names(optarg, impl_names, BH_NIMPLS, o.impl_on))
				goto bad;
			break;
		case 'w':
			if (bh_parse_names(optarg, bh_workload_names, BH_NWORKLOADS, o.workload_on))
				goto bad;
			break;
		case 't':
			n = bench_parse_uint_list(optarg, BENCH_MAX_THREADS, o.threads);
			if (n < 0)
				goto bad;
			o.nthreads = n;
			break;
		case 's':
			if (bench_parse_seconds(optarg, &o.seconds))
				goto bad;
			break;
		case 'k':
			if (bench_parse_u64(optarg, 1, 1u << 26, &o.keys))
				goto bad;
			break;
		case 'p':
			if (bench_parse_u64(optarg, 0, 1u << 26, &o.prefill))
				goto bad;
			break;
		case 'b':
			if (bench_parse_u64(optarg, 4, 26, &v))
				goto bad;
			o.buckets_log2 = (unsigned int)v;
			break;
		case 'c':
			o.csv = optarg;
			break;
		case 'r':
			if (bench_parse_u64(optarg, 1, 100, &o.repeat))
				goto bad;
			break;
		case 'j':
			if (strcmp(optarg, "leak") == 0)
				o.inject = BH_INJECT_LEAK;
			else if (strcmp(optarg, "refcount") == 0)
				o.inject = BH_INJECT_REFCOUNT;
			else
				goto bad;
			break;
		case 'h':
			bh_usage(stdout);
			return 0;
		default:
			goto usage;
		}
	}
	if (optind != argc)
		return bench_bad_value("hash", NULL, 0, argv[optind]);
	/* The coffer table holds a coffer_init() reference: a bad COFFER_* variable it reads
	 * is a usage error said once, not a failed result per run. */
	for (i = 0; i < BH_NIMPLS; i++)
		if (o.impl_on[i] && bh_impls[i] == &bh_impl_coffer) {
			int err = coffer_init();

			if (err)
				return bench_init_failed("hash", err);
			coffer_fini();
		}

	if (o.csv && bench_csv_open(o.csv)) {
		fprintf(stderr, "coffer-bench: cannot open %s: %s\n", o.csv, strerror(errno));
		return BENCH_EXIT_USAGE;
	}
	bench_print_machine(stdout);
	printf("# hash: seconds=%g keys=%llu prefill=%llu buckets_log2=%u repeat=%llu%s%s\n",
	       o.seconds, (unsigned long long)o.keys, (unsigned long long)o.prefill, o.buckets_log2,
	       (unsigned long long)o.repeat, o.inject ? " inject=" : "",
	       o.inject == BH_INJECT_LEAK	? "leak"
	       : o.inject == BH_INJECT_REFCOUNT ? "refcount"
						: "");
	/* Every impl runs back to back at one (workload, threads) point, repeats interleaved:
	 * the ratios between impls are then measured under the same machine conditions even
	 * when the machine's load drifts during the run. */
	for (w = 0; w < BH_NWORKLOADS; w++) {
		if (!o.workload_on[w])
			continue;
		for (n = 0; n < o.nthreads; n++) {
			for (r = 0; r < o.repeat; r++) {
				for (i = 0; i < BH_NIMPLS; i++) {
					if (!o.impl_on[i])
						continue;
					results++;
					if (!bh_one_run(&o, bh_impls[i], (enum bh_workload)w,
							o.threads[n]))
						failed++;
				}
			}
		}
	}
	bench_csv_close();
	if (results == 0) {
		fprintf(stderr, "coffer-bench hash: nothing was run\n");
		return BENCH_EXIT_USAGE;
	}
	if (failed) {
		fprintf(stderr, "coffer-bench hash: %d result(s) FAILED verification\n", failed);
		return BENCH_EXIT_VERIFY;
	}
	return 0;
bad:
	return bench_bad_value("hash", lopts, c, optarg);
usage:
	return bench_usage_error("hash", NULL);
}
