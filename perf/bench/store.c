/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * perf/bench/store.c - `coffer-bench store`: throughput of the batched IPC channel to a
 * running coffer-store, and large-put bandwidth beside raw memcpy (issue 6, item 5).
 *
 * Workloads (every client thread has its own EQ, hence its own channel, on one shared
 * connection, as an application would):
 *  - create-seal: B slots each cycle create (COFFER_CREATE_REPLACE over a per-thread key
 *    space, so the store's population stays bounded) -> copy the payload in -> seal
 *    (COFFER_SEAL_RELEASE) -> next key, every stage launched from the completion of the
 *    previous one, so each poll's completions go back to the store as one batch. One op =
 *    one object created, written, sealed and released.
 *  - get-release: keys pre-populated (untimed); B slots each cycle get (size and content
 *    checked) -> release -> next key. One op = one get + one release.
 *  - reserve-put (protocol v5; only when asked for with --workload): B slots each cycle
 *    take an arena block from the thread's pool of reservations, copy the payload in and put
 *    it under the next key (coffer_obj_put(), COFFER_CREATE_REPLACE): one request per object
 *    instead of a create and a seal. The pool (2 B blocks, at most COFFER_GET_BULK_MAX per
 *    refill) is refilled with one coffer_obj_reserve() of many blocks, one event, whenever
 *    it is half empty, in the timed loop: its cost is part of the figure. A slot that finds
 *    the pool empty waits for the refill. One op = one object written and sealed. After the
 *    run (untimed) every key put is read back (get: size and stamp checked, release) and
 *    counted, and the blocks left in the pool are given back (coffer_obj_unreserve()).
 *  - put: one thread, create + memcpy + seal (+ release) of 1 MiB .. 1 GiB objects (capped
 *    by the store's capacity), in GB/s of payload, beside the same memcpy into a prefaulted
 *    private buffer backed as the arena is (impl "memcpy": on hugepages when the arena is,
 *    from the hugetlb pool, else transparent hugepages, else 4 KiB pages with a note), one
 *    copy after each timed batch-1 put: the ratio is taken in one run, at the same moments. When
 *    that buffer is not on 4 KiB pages, a second baseline (impl "memcpy-4k") copies into
 *    one that is, as the baseline did before issue 6's fix (a put into a hugepage arena
 *    could beat it; see st_buf_map()).
 * B is the batch size (requests in flight per thread); B = 1 is one round trip per call.
 * With --idle-channels N the small-object results run twice in the same run: as above
 * (impl "coffer"), then again while N more channels sit idle on other connections of this
 * process (impl "coffer-idleN": N EQs, each of which made one call and then nothing, as the
 * threads of a large application do), which shows what idle channels cost the store's
 * rounds.
 * Large puts are measured at batch 1 (create, copy, seal, each waited for), when two
 * objects fit at batch 2 (the seal of one object and the create of the next travel in one
 * batch), and when three fit as a stream (workload put-stream, batch 3: the create of
 * object i+1 is in flight while object i is copied; see st_put_stream()). Each mode first
 * puts untimed (batch 1: one put; the others: two, on their new EQ), as the baseline's
 * buffer is prefaulted and written untimed: the first request of a thread or an EQ sets
 * up its channel (about 1 ms here), and the store may have gone to sleep during the
 * previous baseline. The time of that warm-up put and where a batch-1 put's time goes
 * (create, copy, seal) are printed as '#' lines.
 *
 * Verification: every completion's status must be 0, every get must return the size and
 * content written, every request must complete exactly once (a completion of a slot that
 * is not in flight, or of an unknown event, is an error; a lost one hangs the run), the
 * threads' EQs must be idle at the end (destroy without force succeeds), and after the
 * run the store must hold no unsealed object and be back to its used bytes before the run
 * (all keys deleted). Any failure marks the row FAIL and makes the exit status 1.
 *
 * Output: one line per result, and --csv FILE appends rows
 * bench,impl,workload,batch,threads,size_bytes,seconds,ops,mops,gbps,status.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <coffer/coffer.h>

#include "bench.h"
#include "runtime/proto_util.h"

#define ST_MAX_BATCH	128u
#define ST_EXIT_NOSTORE 3

struct st_opts {
	char socket[108];
	unsigned int threads[BENCH_MAX_LIST];
	int nthreads;
	unsigned int batches[BENCH_MAX_LIST];
	int nbatches;
	double seconds;
	uint64_t obj_size;
	uint64_t keys;
	uint64_t put_min, put_max;
	uint64_t put_bytes; /* payload bytes per put size (sets the repetitions) */
	bool do_cs, do_gr, do_put, do_rp;
	const char *csv;
	uint64_t idle; /* --idle-channels: 0, or idle channels for the second pass */
};

#define ST_IDLE_MAX 4096u

/* Idle channels: EQs that each made one call on one of @conns and then nothing. */
struct st_idle {
	coffer_handle_t conns[ST_IDLE_MAX / COFFER_CHANNELS_MAX + 1];
	unsigned int nconns;
	coffer_handle_t eqs[ST_IDLE_MAX];
	unsigned int n;
};

struct st_shared {
	const struct st_opts *o;
	coffer_handle_t conn;
	unsigned int batch;
	bool get_release;
	bool reserve_put;
	unsigned int run_id;	     /* separates key spaces of successive runs */
	uint64_t keys;		     /* per thread: --keys rounded up to a multiple of batch */
	atomic_uint_fast64_t errors; /* summed by each thread's cleanup; read after join */
	atomic_int first_err;
};

struct st_thread {
	coffer_handle_t eq;
	coffer_handle_t *oh; /* keys */
	struct coffer_event ev[ST_MAX_BATCH];
	void *wr[ST_MAX_BATCH];
	const void *rd[ST_MAX_BATCH];
	uint64_t rsize[ST_MAX_BATCH];
	uint64_t key[ST_MAX_BATCH];
	uint8_t stage[ST_MAX_BATCH];  /* 0: first stage running, 1: second, 2: finished */
	uint64_t round[ST_MAX_BATCH]; /* keys used by each slot so far */
	uint8_t *payload;
	uint64_t errors;
	int first_err;
	bool events_ready;
	/* reserve-put: the pool of reserved blocks, the refill in flight, keys put */
	struct coffer_event rev;
	void *pool[2 * ST_MAX_BATCH];
	unsigned int npool;
	void *rout[COFFER_GET_BULK_MAX];
	unsigned int rn;
	bool rbusy;
	uint8_t *put_ok; /* per key: put at least once */
};

static FILE *st_csv;

static void st_csv_open(const char *path)
{
	long pos;

	st_csv = fopen(path, "a");
	if (!st_csv) {
		fprintf(stderr, "coffer-bench store: cannot open %s: %s\n", path, strerror(errno));
		return;
	}
	fseek(st_csv, 0, SEEK_END);
	pos = ftell(st_csv);
	if (pos == 0)
		fprintf(st_csv,
			"bench,impl,workload,batch,threads,size_bytes,seconds,ops,mops,gbps,"
			"status\n");
}

static void st_report(const char *impl, const char *workload, unsigned int batch,
		      unsigned int threads, uint64_t size, double seconds, uint64_t ops, bool ok,
		      const char *note)
{
	double mops = seconds > 0 ? (double)ops / seconds / 1e6 : 0.0;
	double gbps = seconds > 0 ? (double)ops * (double)size / seconds / 1e9 : 0.0;
	const char *status = !ok ? "FAIL" : threads > bench_cores() ? "oversub" : "ok";

	if (strncmp(workload, "put", 3) == 0)
		printf("store %-7s %-12s batch=%-3u size=%-11" PRIu64 " %8.3f GB/s  (%" PRIu64
		       " puts in %.3f s) %s%s%s\n",
		       impl, workload, batch, size, gbps, ops, seconds, status, note ? " " : "",
		       note ? note : "");
	else
		printf("store %-7s %-12s batch=%-3u threads=%u size=%" PRIu64
		       " %8.3f Mops/s  %7.3f Mops/s/thread  (%" PRIu64 " ops in %.3f s) %s%s%s\n",
		       impl, workload, batch, threads, size, mops, mops / threads, ops, seconds,
		       status, note ? " " : "", note ? note : "");
	fflush(stdout);
	if (st_csv) {
		fprintf(st_csv, "store,%s,%s,%u,%u,%" PRIu64 ",%.6f,%" PRIu64 ",%.6f,%.6f,%s\n",
			impl, workload, batch, threads, size, seconds, ops, mops, gbps, status);
		fflush(st_csv);
	}
}

/* ---- payload ----------------------------------------------------------------------------- */

/* ObjectID: "cbst", run, thread, key. */
static void st_oid(struct coffer_oid *oid, unsigned int run, unsigned int tid, uint64_t key)
{
	memset(oid, 0, sizeof(*oid));
	memcpy(oid->id, "cbst", 4);
	memcpy(oid->id + 4, &run, sizeof(run));
	memcpy(oid->id + 8, &tid, sizeof(tid));
	memcpy(oid->id + 12, &key, sizeof(key));
}

/* The first and last 8 bytes of an object carry its key (checked by gets). */
static void st_stamp(uint8_t *dst, const uint8_t *payload, uint64_t size, uint64_t key)
{
	memcpy(dst, payload, size);
	if (size >= 8) {
		memcpy(dst, &key, 8);
		memcpy(dst + size - 8, &key, 8);
	}
}

static bool st_check(const uint8_t *p, uint64_t size, uint64_t key)
{
	uint64_t a, b;

	if (size < 8)
		return true;
	memcpy(&a, p, 8);
	memcpy(&b, p + size - 8, 8);
	return a == key && b == key;
}

static void st_fail(struct st_thread *ts, int err)
{
	if (!ts->errors++)
		ts->first_err = err;
}

/* ---- create-seal and get-release ------------------------------------------------------------ */

static void st_cleanup(struct bench_thread *t);
static int st_setup_keys(struct bench_thread *t);

static int st_setup(struct bench_thread *t)
{
	struct st_shared *sh = t->run->arg;
	const struct st_opts *o = sh->o;
	struct st_thread *ts = calloc(1, sizeof(*ts));
	int rc;

	if (!ts)
		return -ENOMEM;
	t->tls = ts;
	ts->oh = calloc(sh->keys, sizeof(*ts->oh));
	ts->payload = malloc(o->obj_size ? o->obj_size : 1);
	ts->put_ok = calloc(sh->keys, 1);
	rc = !ts->oh || !ts->payload || !ts->put_ok ? -ENOMEM : st_setup_keys(t);
	if (rc < 0)
		st_cleanup(t); /* the harness runs no teardown after a failed setup */
	return rc;
}

static int st_setup_keys(struct bench_thread *t)
{
	struct st_shared *sh = t->run->arg;
	const struct st_opts *o = sh->o;
	struct st_thread *ts = t->tls;
	int rc;

	memset(ts->payload, 0x5a ^ (int)t->id, o->obj_size ? o->obj_size : 1);
	rc = coffer_eq_create(&ts->eq);
	if (rc < 0)
		return rc;
	for (unsigned int i = 0; i < ST_MAX_BATCH; i++) {
		rc = coffer_event_init(&ts->ev[i], ts->eq, NULL);
		if (rc < 0)
			return rc;
	}
	rc = coffer_event_init(&ts->rev, ts->eq, NULL);
	if (rc < 0) {
		for (unsigned int i = 0; i < ST_MAX_BATCH; i++)
			coffer_event_fini(&ts->ev[i]);
		return rc;
	}
	ts->events_ready = true;
	for (uint64_t k = 0; k < sh->keys; k++) {
		struct coffer_oid oid;

		st_oid(&oid, sh->run_id, t->id, k);
		rc = coffer_obj_open(sh->conn, &oid, 0, &ts->oh[k]);
		if (rc < 0)
			return rc;
		if (sh->get_release) {
			void *wr;

			/* untimed population, blocking calls (one path with the async ones) */
			rc = coffer_obj_create(ts->oh[k], o->obj_size, 0, &wr, NULL);
			if (rc < 0)
				return rc;
			st_stamp(wr, ts->payload, o->obj_size, k);
			rc = coffer_obj_seal(ts->oh[k], COFFER_SEAL_RELEASE, NULL);
			if (rc < 0)
				return rc;
		}
	}
	/* Open this EQ's channel before the clock starts (one control round trip). */
	{
		struct coffer_oid oid;
		struct coffer_event *done;
		bool present = false;

		st_oid(&oid, sh->run_id, t->id, 0);
		rc = coffer_obj_contains(sh->conn, &oid, &present, &ts->ev[0]);
		if (rc == 0)
			rc = coffer_eq_poll(ts->eq, 1, -1, 1, &done) == 1 ? ts->ev[0].ev_error
									  : -EIO;
		if (rc == 0 && present != sh->get_release)
			rc = -EIO;
	}
	return rc;
}

/* Create completed: copy the payload in, launch the seal. Return: launched. */
static bool cs_created(struct bench_thread *t, unsigned int slot)
{
	struct st_shared *sh = t->run->arg;
	struct st_thread *ts = t->tls;
	int rc;

	st_stamp(ts->wr[slot], ts->payload, sh->o->obj_size, ts->key[slot]);
	rc = coffer_obj_seal(ts->oh[ts->key[slot]], COFFER_SEAL_RELEASE, &ts->ev[slot]);
	if (rc < 0)
		st_fail(ts, rc);
	return rc == 0;
}

/* Get completed: check size and content, launch the release. Return: launched. */
static bool gr_got(struct bench_thread *t, unsigned int slot)
{
	struct st_shared *sh = t->run->arg;
	struct st_thread *ts = t->tls;
	int rc;

	if (ts->rsize[slot] != sh->o->obj_size ||
	    !st_check(ts->rd[slot], ts->rsize[slot], ts->key[slot]))
		st_fail(ts, -EIO);
	rc = coffer_obj_release(ts->oh[ts->key[slot]], &ts->ev[slot]);
	if (rc < 0)
		st_fail(ts, rc);
	return rc == 0;
}

/* Launches the first stage (create or get) of @slot on its next key. Return: 0 or -errno. */
static int st_launch_first(struct bench_thread *t, unsigned int slot)
{
	struct st_shared *sh = t->run->arg;
	const struct st_opts *o = sh->o;
	struct st_thread *ts = t->tls;
	/* slot i only ever uses keys congruent to i modulo the batch (keys is a multiple of
	 * it), so no key is ever in flight twice */
	uint64_t k = (slot + (uint64_t)sh->batch * ts->round[slot]++) % sh->keys;

	ts->key[slot] = k;
	ts->stage[slot] = 0;
	if (sh->get_release)
		return coffer_obj_get(ts->oh[k], 0, &ts->rd[slot], &ts->rsize[slot], &ts->ev[slot]);
	return coffer_obj_create(ts->oh[k], o->obj_size, COFFER_CREATE_REPLACE, &ts->wr[slot],
				 &ts->ev[slot]);
}

/*
 * Steady state with `batch` requests in flight: each slot cycles first stage -> second stage
 * -> first stage of its next key..., relaunched from the completion that freed it, so one
 * poll's worth of completions goes back to the store as one batch (the second stage of some
 * slots beside the first stage of others). One op = both stages of one key. After the stop
 * flag no first stage is launched; the slots drain and their ops count (the harness times
 * the body to its end).
 */
static void st_body(struct bench_thread *t)
{
	struct st_shared *sh = t->run->arg;
	struct st_thread *ts = t->tls;
	unsigned int b = sh->batch, running = 0;
	struct coffer_event *done[ST_MAX_BATCH];

	for (unsigned int i = 0; i < b; i++) {
		int rc = st_launch_first(t, i);

		if (rc < 0) {
			st_fail(ts, rc);
			break;
		}
		running++;
	}
	while (running > 0) {
		bool stop = bench_should_stop(t) || ts->errors;
		int k = coffer_eq_poll(ts->eq, 1, -1, ST_MAX_BATCH, done);

		if (k < 0) {
			st_fail(ts, k);
			return;
		}
		for (int i = 0; i < k; i++) {
			unsigned int slot = (unsigned int)(done[i] - ts->ev);
			int rc = 0;

			if (slot >= b || ts->stage[slot] > 1) {
				st_fail(ts, -EPROTO); /* not ours, or completed twice */
				continue;
			}
			if (done[i]->ev_error != 0) {
				st_fail(ts, done[i]->ev_error);
				ts->stage[slot] = 2;
				running--;
				continue;
			}
			if (ts->stage[slot] == 0) {
				if ((sh->get_release ? gr_got : cs_created)(t, slot)) {
					ts->stage[slot] = 1;
					continue;
				}
				ts->stage[slot] = 2; /* the second stage failed to launch */
				running--;
				continue;
			}
			t->ops++;
			if (stop || (rc = st_launch_first(t, slot)) < 0) {
				if (rc < 0)
					st_fail(ts, rc);
				ts->stage[slot] = 2;
				running--;
			}
		}
	}
}

/* ---- reserve-put ------------------------------------------------------------------------- */

/* Refills the pool when it is half empty and no refill is in flight. */
static void rp_refill(struct bench_thread *t, unsigned int *running)
{
	struct st_shared *sh = t->run->arg;
	struct st_thread *ts = t->tls;
	unsigned int cap = 2 * sh->batch, n;
	int rc;

	if (ts->rbusy || ts->npool > cap / 2)
		return;
	n = cap - ts->npool;
	if (n > COFFER_GET_BULK_MAX)
		n = COFFER_GET_BULK_MAX;
	rc = coffer_obj_reserve(sh->conn, sh->o->obj_size, n, ts->rout, &ts->rev);
	if (rc < 0) {
		st_fail(ts, rc);
		return;
	}
	ts->rn = n;
	ts->rbusy = true;
	(*running)++;
}

/* Takes a block from the pool, writes the payload of @slot's next key into it and puts it.
 * Return: 1 launched, 0 the pool is empty (the slot waits), -errno. */
static int rp_launch(struct bench_thread *t, unsigned int slot)
{
	struct st_shared *sh = t->run->arg;
	struct st_thread *ts = t->tls;
	struct coffer_oid oid;
	uint64_t k;
	int rc;

	if (ts->npool == 0)
		return 0;
	k = (slot + (uint64_t)sh->batch * ts->round[slot]++) % sh->keys;
	ts->key[slot] = k;
	ts->wr[slot] = ts->pool[--ts->npool];
	st_stamp(ts->wr[slot], ts->payload, sh->o->obj_size, k);
	st_oid(&oid, sh->run_id, t->id, k);
	rc = coffer_obj_put(sh->conn, &oid, ts->wr[slot], sh->o->obj_size, COFFER_CREATE_REPLACE,
			    &ts->ev[slot]);
	if (rc < 0) {
		ts->pool[ts->npool++] = ts->wr[slot]; /* still ours: given back at cleanup */
		return rc;
	}
	return 1;
}

/*
 * Steady state of reserve-put with `batch` puts in flight (stage 0: running; 2: finished;
 * 3: waiting for a block). Completions relaunch their slot on its next key, as in st_body();
 * a refill's completion adds its blocks to the pool and relaunches the waiting slots.
 */
static void rp_body(struct bench_thread *t)
{
	struct st_shared *sh = t->run->arg;
	struct st_thread *ts = t->tls;
	unsigned int b = sh->batch, running = 0, waiting = 0;
	struct coffer_event *done[ST_MAX_BATCH + 1];

	rp_refill(t, &running);
	for (unsigned int i = 0; i < b; i++) {
		ts->stage[i] = 3;
		waiting++;
	}
	while (running > 0) {
		bool stop = bench_should_stop(t) || ts->errors;
		int k = coffer_eq_poll(ts->eq, 1, -1, ST_MAX_BATCH + 1, done);

		if (k < 0) {
			st_fail(ts, k);
			return;
		}
		for (int i = 0; i < k; i++) {
			unsigned int slot;

			if (done[i] == &ts->rev) {
				running--;
				ts->rbusy = false;
				if (ts->rev.ev_error != 0)
					st_fail(ts, ts->rev.ev_error);
				/* blocks reserved are ours even when others failed */
				for (unsigned int j = 0; j < ts->rn; j++)
					if (ts->rout[j] != NULL)
						ts->pool[ts->npool++] = ts->rout[j];
				continue;
			}
			slot = (unsigned int)(done[i] - ts->ev);
			if (slot >= b || ts->stage[slot] != 0) {
				st_fail(ts, -EPROTO); /* not ours, or completed twice */
				continue;
			}
			running--;
			ts->stage[slot] = 2;
			if (done[i]->ev_error != 0) {
				st_fail(ts, done[i]->ev_error);
				ts->pool[ts->npool++] =
				    ts->wr[slot]; /* the put failed: still ours */
				continue;
			}
			ts->put_ok[ts->key[slot]] = 1;
			t->ops++;
			if (!stop) {
				ts->stage[slot] = 3;
				waiting++;
			}
		}
		if (stop)
			continue;
		/* relaunch the slots that are free, from the pool */
		for (unsigned int i = 0; i < b && waiting > 0 && ts->npool > 0; i++) {
			int rc;

			if (ts->stage[i] != 3)
				continue;
			rc = rp_launch(t, i);
			if (rc < 0) {
				st_fail(ts, rc);
				ts->stage[i] = 2;
				waiting--;
				continue;
			}
			ts->stage[i] = 0;
			waiting--;
			running++;
		}
		rp_refill(t, &running);
	}
}

/* Untimed, after the run: every key put reads back with its size and stamp; the blocks left
 * in the pool are given back. */
static void rp_verify(struct bench_thread *t)
{
	struct st_shared *sh = t->run->arg;
	struct st_thread *ts = t->tls;
	int rc;

	for (uint64_t k = 0; ts->oh && ts->put_ok && k < sh->keys; k++) {
		const void *p;
		uint64_t size = 0;

		if (!ts->put_ok[k])
			continue;
		rc = coffer_obj_get(ts->oh[k], 0, &p, &size, NULL);
		if (rc < 0) {
			st_fail(ts, rc);
			continue;
		}
		if (size != sh->o->obj_size || !st_check(p, size, k))
			st_fail(ts, -EIO);
		rc = coffer_obj_release(ts->oh[k], NULL);
		if (rc < 0)
			st_fail(ts, rc);
	}
	while (ts->npool > 0) {
		rc = coffer_obj_unreserve(sh->conn, ts->pool[--ts->npool], NULL);
		if (rc < 0)
			st_fail(ts, rc);
	}
}

/* Deletes this thread's keys (untimed), frees its state and adds its errors to the run. */
static void st_cleanup(struct bench_thread *t)
{
	struct st_shared *sh = t->run->arg;
	struct st_thread *ts = t->tls;
	int zero = 0;

	if (!ts)
		return;
	if (sh->reserve_put)
		rp_verify(t);
	for (uint64_t k = 0; ts->oh && k < sh->keys; k++) {
		struct coffer_oid oid;
		int rc;

		if (!ts->oh[k].cookie)
			continue;
		st_oid(&oid, sh->run_id, t->id, k);
		rc = coffer_obj_delete(sh->conn, &oid, NULL);
		/* -ENOENT: a create-seal run stopped before reaching this key */
		if (rc < 0 && rc != -ENOENT)
			st_fail(ts, rc);
		coffer_obj_close(ts->oh[k]);
	}
	if (ts->events_ready) {
		for (unsigned int i = 0; i < ST_MAX_BATCH; i++)
			coffer_event_fini(&ts->ev[i]);
		coffer_event_fini(&ts->rev);
	}
	if (ts->eq.cookie && coffer_eq_destroy(ts->eq, 0) < 0)
		st_fail(ts, -EBUSY); /* an event still running: a completion was lost */
	/* Relaxed: read by the main thread after pthread_join. */
	atomic_fetch_add_explicit(&sh->errors, ts->errors, memory_order_relaxed);
	if (ts->errors)
		atomic_compare_exchange_strong_explicit(&sh->first_err, &zero, ts->first_err,
							memory_order_relaxed, memory_order_relaxed);
	free(ts->oh);
	free(ts->payload);
	free(ts->put_ok);
	free(ts);
	t->tls = NULL;
}

static void st_sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* The store must be back where it was: no unsealed object, the same used bytes. */
static bool st_store_clean(coffer_handle_t conn, const struct coffer_store_info *before, char *why,
			   size_t len)
{
	struct coffer_store_info now;

	for (int i = 0; i < 100; i++) {
		if (coffer_store_query(conn, &now) < 0) {
			snprintf(why, len, "query failed");
			return false;
		}
		if (now.objects_created == 0 && now.used_bytes == before->used_bytes)
			return true;
		st_sleep_ms(10);
	}
	snprintf(why, len,
		 "store not clean: %" PRIu64 " unsealed, used %" PRIu64 " bytes (was %" PRIu64 ")",
		 now.objects_created, now.used_bytes, before->used_bytes);
	return false;
}

/* The small-object workloads, as st_small_all() runs them. */
enum st_wl { ST_CS, ST_GR, ST_RP };

static const char *const st_wl_name[] = {"create-seal", "get-release", "reserve-put"};

static int st_small(const struct st_opts *o, coffer_handle_t conn, const char *impl, enum st_wl wl,
		    unsigned int batch, unsigned int threads, unsigned int run_id)
{
	struct st_shared sh = {.o = o,
			       .conn = conn,
			       .batch = batch,
			       .get_release = wl == ST_GR,
			       .reserve_put = wl == ST_RP,
			       .run_id = run_id,
			       /* each slot owns the keys of its residue class modulo the batch */
			       .keys = (o->keys + batch - 1) / batch * batch};
	struct bench_run run = {.nthreads = threads,
				.seconds = o->seconds,
				.arg = &sh,
				.setup = st_setup,
				.body = wl == ST_RP ? rp_body : st_body,
				.teardown = st_cleanup};
	struct coffer_store_info before;
	uint64_t errors;
	char why[320] = "", cwhy[160];
	bool ok;
	int rc;

	atomic_init(&sh.errors, 0);
	atomic_init(&sh.first_err, 0);
	if (coffer_store_query(conn, &before) < 0)
		return -ENOTCONN;
	rc = bench_run_threads(&run);
	errors = atomic_load_explicit(&sh.errors, memory_order_relaxed);
	ok = rc == 0 && errors == 0 && run.ops > 0;
	if (rc)
		snprintf(why, sizeof(why), "setup: %s", coffer_strerror(rc));
	else if (errors)
		snprintf(
		    why, sizeof(why), "%" PRIu64 " errors, first: %s", errors,
		    coffer_strerror(atomic_load_explicit(&sh.first_err, memory_order_relaxed)));
	else if (run.ops == 0)
		snprintf(why, sizeof(why), "no operation completed");
	if (!st_store_clean(conn, &before, cwhy, sizeof(cwhy))) {
		size_t k = strlen(why);

		snprintf(why + k, sizeof(why) - k, "%s%s", k ? "; " : "", cwhy);
		ok = false;
	}
	st_report(impl, st_wl_name[wl], batch, threads, o->obj_size, run.elapsed_s, run.ops, ok,
		  why[0] ? why : NULL);
	return ok ? 0 : -EIO;
}

/* Opens @want idle channels into @id (COFFER_CHANNELS_MAX per connection): each its own EQ
 * that makes one CONTAINS and waits for it. Return: 0 or -errno. */
static int st_idle_open(struct st_idle *id, const char *sock, unsigned int want)
{
	while (id->n < want) {
		struct coffer_oid oid = {{0}};
		struct coffer_event ev, *done;
		bool present;
		int rc;

		if (id->n % COFFER_CHANNELS_MAX == 0) {
			rc = coffer_connect(sock, &id->conns[id->nconns]);
			if (rc < 0)
				return rc;
			id->nconns++;
		}
		rc = coffer_eq_create(&id->eqs[id->n]);
		if (rc < 0)
			return rc;
		id->n++;
		rc = coffer_event_init(&ev, id->eqs[id->n - 1], NULL);
		if (rc == 0)
			rc = coffer_obj_contains(id->conns[id->nconns - 1], &oid, &present, &ev);
		if (rc == 0)
			rc = coffer_eq_poll(id->eqs[id->n - 1], 1, -1, 1, &done) == 1 ? ev.ev_error
										      : -EIO;
		if (rc < 0)
			return rc;
		(void)coffer_event_fini(&ev);
	}
	return 0;
}

static void st_idle_close(struct st_idle *id)
{
	while (id->n > 0)
		(void)coffer_eq_destroy(id->eqs[--id->n], 0);
	while (id->nconns > 0)
		(void)coffer_disconnect(id->conns[--id->nconns]);
}

/* Every small-object result (--workload, --batch, --threads) as @impl. Return: failed. */
static int st_small_all(const struct st_opts *o, coffer_handle_t conn, const char *impl,
			unsigned int *run_id)
{
	int failed = 0;

	for (int w = ST_CS; w <= ST_RP; w++) {
		if ((w == ST_CS && !o->do_cs) || (w == ST_GR && !o->do_gr) ||
		    (w == ST_RP && !o->do_rp))
			continue;
		for (int bi = 0; bi < o->nbatches; bi++)
			for (int ti = 0; ti < o->nthreads; ti++)
				if (st_small(o, conn, impl, (enum st_wl)w, o->batches[bi],
					     o->threads[ti], (*run_id)++) < 0)
					failed = 1;
	}
	return failed;
}

/* ---- large put ------------------------------------------------------------------------------- */

static double st_secs(uint64_t a, uint64_t b)
{
	return (double)(b - a) / 1e9;
}

/* True when the @size-byte object at @p holds @src with @key stamped at both ends (its
 * first and last 4 KiB are compared: a sample, so that verifying costs little beside the copy). */
static bool st_put_check(const uint8_t *p, uint64_t got, uint64_t size, const uint8_t *src,
			 uint64_t key)
{
	uint64_t n = size < 4096 ? size : 4096;

	return got == size && st_check(p, size, key) && memcmp(p + 8, src + 8, n - 8) == 0 &&
	       memcmp(p + size - n, src + size - n, n - 8) == 0;
}

static int st_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The median of @n > 0 samples (sorts @v). */
static double st_median(double *v, unsigned int n)
{
	qsort(v, n, sizeof(*v), st_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Waits for @ev on @eq; other completions on @eq are ours too and are checked. */
static int st_put_wait(coffer_handle_t eq, struct coffer_event *ev, struct coffer_event *other,
		       bool *other_pending)
{
	for (;;) {
		struct coffer_event *done[2];
		int n = coffer_eq_poll(eq, 1, -1, 2, done), rc = 1;

		if (n < 0)
			return n;
		for (int i = 0; i < n; i++) {
			if (done[i] == other) {
				*other_pending = false;
				if (other->ev_error)
					return other->ev_error;
			} else if (done[i] == ev) {
				rc = ev->ev_error;
			} else {
				return -EPROTO;
			}
		}
		if (rc <= 0)
			return rc;
	}
}

/*
 * Puts with the seal of object i and the create of object i+1 in one batch (batch 2): the
 * seal's round trip overlaps the next create's. Uses COFFER_CREATE_REPLACE on one ID, so
 * the store briefly holds two objects of @size. Timed from the first create to the last
 * seal's completion; the last object is verified afterwards (untimed). @eq has served a
 * warm-up run already when the result is kept (its channel is set up on first use).
 */
static int st_put_pipelined(coffer_handle_t conn, coffer_handle_t eq, uint64_t size,
			    unsigned int reps, const uint8_t *src, unsigned int run_id,
			    double *secs, double *copy_secs)
{
	struct coffer_event evc, evs;
	struct coffer_oid oid;
	coffer_handle_t oh;
	bool seal_pending = false;
	uint64_t t0, t1, got = 0;
	const void *rd;
	int rc;

	st_oid(&oid, run_id, 0xfffe, size);
	if ((rc = coffer_event_init(&evc, eq, NULL)) < 0)
		return rc;
	if ((rc = coffer_event_init(&evs, eq, NULL)) < 0 ||
	    (rc = coffer_obj_open(conn, &oid, 0, &oh)) < 0) {
		coffer_event_fini(&evc);
		return rc;
	}
	t0 = bench_now_ns();
	for (unsigned int r = 0; r < reps && rc == 0; r++) {
		void *wr = NULL;

		rc = coffer_obj_create(oh, size, COFFER_CREATE_REPLACE, &wr, &evc);
		if (rc == 0) /* publishes the previous seal and this create together */
			rc = st_put_wait(eq, &evc, &evs, &seal_pending);
		if (rc == 0 && seal_pending)
			rc = st_put_wait(eq, &evs, &evc, &(bool){false});
		if (rc == 0) {
			uint64_t tc = bench_now_ns();

			seal_pending = false;
			memcpy(wr, src, size);
			*copy_secs += st_secs(tc, bench_now_ns());
			rc = coffer_obj_seal(oh, COFFER_SEAL_RELEASE, &evs);
			seal_pending = rc == 0;
		}
	}
	if (seal_pending) {
		int wrc = st_put_wait(eq, &evs, &evc, &(bool){false});

		if (rc == 0)
			rc = wrc;
	}
	t1 = bench_now_ns();
	if (rc == 0) {
		rc = coffer_obj_get(oh, 0, &rd, &got, NULL);
		if (rc == 0 &&
		    (got != size || memcmp(rd, src, 4096) != 0 ||
		     memcmp((const uint8_t *)rd + size - 4096, src + size - 4096, 4096) != 0))
			rc = -EIO;
		if (rc == 0)
			rc = coffer_obj_release(oh, NULL);
	}
	coffer_obj_delete(conn, &oid, NULL);
	coffer_obj_close(oh);
	coffer_event_fini(&evc);
	coffer_event_fini(&evs);
	*secs = st_secs(t0, t1);
	return rc;
}

/*
 * Streamed puts (double buffering, as an application that writes a stream of objects would):
 * the create of object i+1 is in flight while object i is copied, and the seal of object i
 * travels with the release and delete of object i-1, so no request's round trip is waited
 * for on the critical path. Every object is still created, written (the payload plus its
 * key at both ends), sealed, read back with a get and checked (the get of object i is
 * answered while object i+1 is copied), released and deleted, all inside the timed span:
 * from the first create to the completion of the last seal. Objects use three IDs in turn
 * (i-1 being verified, i being copied, i+1 created), so the store holds at most three of
 * @size; the block freed by deleting object i-2 is the one the create of object i+1 gets.
 */
#define ST_STREAM_SLOTS 3u

struct st_pev {
	struct coffer_event ev; /* first: a completion maps back to its st_pev */
	bool pending;
};

struct st_stream_slot {
	coffer_handle_t oh;
	struct coffer_oid oid;
	struct st_pev create, seal, get, release, del;
	void *wr;
	const void *rd;
	uint64_t got;
};

/* Takes completions from @eq until @want (NULL: none) is done; @block 0 takes only what is
 * there (and publishes what was queued: the poll drives the channel). Each completion must
 * be of an event in @sl that is in flight (-EPROTO otherwise) and succeed. */
static int st_stream_reap(coffer_handle_t eq, struct st_stream_slot *sl, struct st_pev *want,
			  bool block)
{
	do {
		struct coffer_event *done[16];
		int n = coffer_eq_poll(eq, 1, block ? -1 : 0, 16, done);

		if (n < 0)
			return n;
		for (int i = 0; i < n; i++) {
			struct st_pev *p = (struct st_pev *)(void *)done[i];
			bool ours = false;

			for (unsigned int k = 0; k < ST_STREAM_SLOTS; k++)
				ours |= (void *)p >= (void *)&sl[k].create &&
					(void *)p <= (void *)&sl[k].del;
			if (!ours || !p->pending)
				return -EPROTO; /* not ours, or completed twice */
			p->pending = false;
			if (p->ev.ev_error)
				return p->ev.ev_error;
		}
	} while (block && want && want->pending);
	return 0;
}

static int st_stream_wait(coffer_handle_t eq, struct st_stream_slot *sl, struct st_pev *want)
{
	return want->pending ? st_stream_reap(eq, sl, want, true) : 0;
}

/* Marks @p in flight when @rc says the request was queued; returns @rc. */
static int st_stream_launched(struct st_pev *p, int rc)
{
	p->pending = rc == 0;
	return rc;
}

static int st_put_stream(coffer_handle_t conn, coffer_handle_t eq, uint64_t size, unsigned int reps,
			 const uint8_t *src, unsigned int run_id, double *secs, double *copy_secs)
{
	struct st_stream_slot sl[ST_STREAM_SLOTS];
	uint64_t t0, t1 = 0, tc;
	unsigned int k, nopen = 0, nev = 0;
	int rc = 0;

	memset(sl, 0, sizeof(sl));
	for (k = 0; k < ST_STREAM_SLOTS && rc == 0; k++) {
		struct st_pev *evs[] = {&sl[k].create, &sl[k].seal, &sl[k].get, &sl[k].release,
					&sl[k].del};

		st_oid(&sl[k].oid, run_id, 0xfffd, size * ST_STREAM_SLOTS + k);
		for (unsigned int e = 0; e < 5 && rc == 0; e++)
			if ((rc = coffer_event_init(&evs[e]->ev, eq, NULL)) == 0)
				nev++;
		if (rc == 0 && (rc = coffer_obj_open(conn, &sl[k].oid, 0, &sl[k].oh)) == 0)
			nopen++;
	}
	t0 = bench_now_ns();
	if (rc == 0)
		rc = st_stream_launched(
		    &sl[0].create,
		    coffer_obj_create(sl[0].oh, size, 0, &sl[0].wr, &sl[0].create.ev));
	for (unsigned int r = 0; r < reps && rc == 0; r++) {
		struct st_stream_slot *cur = &sl[r % ST_STREAM_SLOTS];
		struct st_stream_slot *next = &sl[(r + 1) % ST_STREAM_SLOTS];
		struct st_stream_slot *prev = &sl[(r + ST_STREAM_SLOTS - 1) % ST_STREAM_SLOTS];

		rc = st_stream_wait(eq, sl, &cur->create);
		if (rc == 0 && r + 1 < reps) {
			/* next's previous object (i-2) is deleted by a request queued before this
			 * create, and the store executes a channel's requests in order */
			rc = st_stream_wait(eq, sl, &next->create);
			if (rc == 0)
				rc = st_stream_launched(
				    &next->create, coffer_obj_create(next->oh, size, 0, &next->wr,
								     &next->create.ev));
			if (rc == 0) /* publish it: the store creates while we copy */
				rc = st_stream_reap(eq, sl, NULL, false);
		}
		if (rc != 0)
			break;
		tc = bench_now_ns();
		st_stamp(cur->wr, src, size, r);
		*copy_secs += st_secs(tc, bench_now_ns());
		if (r > 0) { /* object i-1: its get was answered during the copy */
			rc = st_stream_wait(eq, sl, &prev->get);
			if (rc == 0 && !st_put_check(prev->rd, prev->got, size, src, r - 1))
				rc = -EIO;
			if (rc == 0)
				rc = st_stream_wait(eq, sl, &prev->release);
			if (rc == 0)
				rc = st_stream_launched(
				    &prev->release,
				    coffer_obj_release(prev->oh, &prev->release.ev));
			if (rc == 0)
				rc = st_stream_wait(eq, sl, &prev->del);
			if (rc == 0)
				rc = st_stream_launched(
				    &prev->del, coffer_obj_delete(conn, &prev->oid, &prev->del.ev));
		}
		if (rc == 0)
			rc = st_stream_wait(eq, sl, &cur->seal);
		if (rc == 0)
			rc = st_stream_launched(
			    &cur->seal,
			    coffer_obj_seal(cur->oh, COFFER_SEAL_RELEASE, &cur->seal.ev));
		if (rc == 0)
			rc = st_stream_wait(eq, sl, &cur->get);
		if (rc == 0)
			rc = st_stream_launched(&cur->get, coffer_obj_get(cur->oh, 0, &cur->rd,
									  &cur->got, &cur->get.ev));
		/* published with the next create (in ring order) by the poll after it */
		if (rc == 0 && r + 1 == reps) {
			rc = st_stream_wait(eq, sl, &cur->seal);
			t1 = bench_now_ns();
			/* untimed: verify, release and delete the last object */
			if (rc == 0)
				rc = st_stream_wait(eq, sl, &cur->get);
			if (rc == 0 && !st_put_check(cur->rd, cur->got, size, src, r))
				rc = -EIO;
			if (rc == 0)
				rc = st_stream_wait(eq, sl, &cur->release);
			if (rc == 0)
				rc = st_stream_launched(
				    &cur->release, coffer_obj_release(cur->oh, &cur->release.ev));
			if (rc == 0)
				rc = st_stream_wait(eq, sl, &cur->del);
			if (rc == 0)
				rc = st_stream_launched(
				    &cur->del, coffer_obj_delete(conn, &cur->oid, &cur->del.ev));
		}
	}
	/* Drain every request still in flight (all of them on success: the EQ must be idle). */
	for (k = 0; k < ST_STREAM_SLOTS; k++) {
		struct st_pev *evs[] = {&sl[k].create, &sl[k].seal, &sl[k].get, &sl[k].release,
					&sl[k].del};

		for (unsigned int e = 0; e < 5; e++) {
			int wrc = st_stream_wait(eq, sl, evs[e]);

			if (rc == 0)
				rc = wrc;
		}
	}
	if (rc != 0) /* a failed run may leave objects behind: best effort */
		for (k = 0; k < ST_STREAM_SLOTS; k++)
			(void)coffer_obj_delete(conn, &sl[k].oid, NULL);
	for (k = 0; k < nopen; k++)
		coffer_obj_close(sl[k].oh);
	for (k = 0; k < nev; k++) {
		struct st_pev *evs[] = {&sl[k / 5].create, &sl[k / 5].seal, &sl[k / 5].get,
					&sl[k / 5].release, &sl[k / 5].del};

		coffer_event_fini(&evs[k % 5]->ev);
	}
	*secs = st_secs(t0, t1);
	return rc;
}

/*
 * Runs @fn once untimed (2 puts: the EQ's channel is set up by its first request, and the
 * store may have gone to sleep during the previous baseline), then timed, on a new EQ;
 * reports the timed run. Return: 0, or the first negative errno.
 */
static int st_put_mode(int (*fn)(coffer_handle_t, coffer_handle_t, uint64_t, unsigned int,
				 const uint8_t *, unsigned int, double *, double *),
		       const char *workload, unsigned int batch, coffer_handle_t conn,
		       uint64_t size, unsigned int reps, const uint8_t *src, unsigned int run_id,
		       double *secs)
{
	coffer_handle_t eq;
	double warm, copy = 0;
	char why[160] = "";
	int rc, drc;

	*secs = 0;
	rc = coffer_eq_create(&eq);
	if (rc < 0)
		return rc;
	rc = fn(conn, eq, size, 2, src, run_id, &warm, &copy);
	copy = 0;
	if (rc == 0)
		rc = fn(conn, eq, size, reps, src, run_id, secs, &copy);
	/* without force: fails (-EBUSY) if a request of ours were still running */
	drc = coffer_eq_destroy(eq, 0);
	if (drc < 0) {
		coffer_eq_destroy(eq, COFFER_EQ_FORCE);
		if (rc == 0)
			rc = drc;
	}
	if (rc < 0) {
		snprintf(why, sizeof(why), "%s", coffer_strerror(rc));
		*secs = 0;
	}
	st_report("coffer", workload, batch, 1, size, *secs, rc == 0 ? reps : 0, rc == 0,
		  why[0] ? why : NULL);
	if (rc == 0)
		printf("# %s size=%" PRIu64 " batch %u per put: copy %.2f us of %.2f us\n",
		       workload, size, batch, copy * 1e6 / reps, *secs * 1e6 / reps);
	return rc;
}

/*
 * The memcpy baseline's destination. The arena is prefaulted hugetlb memory when the store
 * has hugepages, so the put's copy writes through one TLB entry per 2 MiB; a private buffer
 * on 4 KiB pages takes a TLB miss (a two-dimensional page walk in a VM) every 4 KiB, which
 * cost that baseline up to half its bandwidth at 64 MiB and up, where the put's copy did not
 * pay it: the put came out at 129-229% of "raw memcpy" (issue 6). The baseline has to bound
 * the put, so it is backed as the arena is: from the hugetlb pool (MAP_HUGETLB), else, when
 * the pool has no page to spare, by transparent hugepages (madvise(MADV_HUGEPAGE); the
 * mapping is 2 MiB-aligned and /proc/self/smaps says how much of it got them), else on
 * ordinary pages with a note. A buffer asked for on 4 KiB pages (an arena on ordinary
 * pages, or the second baseline) gets MADV_NOHUGEPAGE, so that transparent_hugepage=always
 * does not hand it hugepages the arena lacks.
 */
enum st_pages { ST_PAGES_4K, ST_PAGES_HUGETLB, ST_PAGES_THP };

static const char *const st_pages_name[] = {"4 KiB pages", "hugetlb pages",
					    "transparent hugepages"};

struct st_buf {
	uint8_t *p; /* @size usable bytes */
	void *map;  /* what to munmap, @maplen bytes */
	size_t maplen;
	enum st_pages pages; /* what backs p */
	char note[160];	     /* why it is not on hugepages when asked to be; "" otherwise */
};

#define ST_HUGE (2ull << 20)

/* Bytes of the mapping that holds @p that are on transparent hugepages (AnonHugePages in
 * /proc/self/smaps), or 0 when that cannot be read. */
static uint64_t st_thp_bytes(const void *p)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[256];
	bool in = false;
	uint64_t kb = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;

		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 &&
		    strchr(line, ':') > strchr(line, ' ')) {
			if (in)
				break; /* past our mapping */
			in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
		} else if (in && sscanf(line, "AnonHugePages: %" SCNu64, &kb) == 1) {
			break;
		}
	}
	fclose(f);
	return kb << 10;
}

/* Maps @size bytes for a baseline (on hugepages when @huge, see above), prefaulted and
 * written. Return: 0, or -ENOMEM. */
static int st_buf_map(struct st_buf *b, uint64_t size, bool huge)
{
	int err = 0;

	memset(b, 0, sizeof(*b));
	if (huge) {
		b->maplen = (size + ST_HUGE - 1) & ~(ST_HUGE - 1);
		b->map = mmap(NULL, b->maplen, PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_POPULATE, -1, 0);
		if (b->map != MAP_FAILED) {
			b->p = b->map;
			b->pages = ST_PAGES_HUGETLB;
			goto out;
		}
		err = errno;
		/* transparent hugepages: a 2 MiB-aligned range of whole 2 MiB pages inside a
		 * larger mapping (madvise on part of a page would split the range off and leave
		 * it on 4 KiB pages) */
		b->maplen = ((size + ST_HUGE - 1) & ~(ST_HUGE - 1)) + ST_HUGE;
		b->map = mmap(NULL, b->maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			      -1, 0);
		if (b->map == MAP_FAILED)
			return -ENOMEM;
		b->p = (uint8_t *)(((uintptr_t)b->map + ST_HUGE - 1) & ~(uintptr_t)(ST_HUGE - 1));
		if (madvise(b->p, b->maplen - ST_HUGE, MADV_HUGEPAGE) == 0) {
			uint64_t thp;

			memset(b->p, 1, size); /* faults the hugepages in */
			thp = st_thp_bytes(b->p);
			if (thp > 0) {
				b->pages = ST_PAGES_THP;
				if (thp < size)
					snprintf(b->note, sizeof(b->note),
						 "(MAP_HUGETLB: %s; transparent hugepages for "
						 "%" PRIu64 " of %" PRIu64 " MiB)",
						 strerror(err), thp >> 20, size >> 20);
				else
					snprintf(b->note, sizeof(b->note), "(MAP_HUGETLB: %s)",
						 strerror(err));
				return 0;
			}
		}
		snprintf(b->note, sizeof(b->note),
			 "(on 4 KiB pages: MAP_HUGETLB: %s; no transparent hugepage: see "
			 "/sys/kernel/mm/transparent_hugepage/enabled)",
			 strerror(err));
		b->pages = ST_PAGES_4K;
	} else {
		b->maplen = size;
		b->map = mmap(NULL, b->maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			      -1, 0);
		if (b->map == MAP_FAILED)
			return -ENOMEM;
		b->p = b->map;
		(void)madvise(b->p, size, MADV_NOHUGEPAGE); /* best effort: 4 KiB as asked */
		b->pages = ST_PAGES_4K;
	}
out:
	memset(b->p, 1, size);
	return 0;
}

/*
 * One baseline (impl @impl): @n memcpys of @size bytes from @src into a buffer from
 * st_buf_map(), one after each timed batch-1 put (st_base_copy()), so that the put and its
 * baseline sample the same moments. Run as a block after the puts (as before issue 6's
 * fix), the baseline met another machine: on this shared 2-vCPU VM a 256 MiB copy took
 * 15 ms in one stretch and 36 ms a second later (medians of 4-8), and one preempted copy
 * (longer than a time slice) in the 3-4 of a large size moved its ratio by 2x. One untimed
 * copy first (the put modes start with an untimed put too).
 */
struct st_base {
	const char *impl;
	struct st_buf b;
	double *per_copy; /* @n per-copy times (s) */
	unsigned int n, done;
	double secs; /* their sum */
	bool mapped;
};

static int st_base_open(struct st_base *x, const char *impl, uint64_t size, unsigned int n,
			bool huge, double *per_copy)
{
	int rc;

	memset(x, 0, sizeof(*x));
	x->impl = impl;
	x->per_copy = per_copy;
	x->n = n;
	rc = st_buf_map(&x->b, size, huge);
	x->mapped = rc == 0;
	return rc;
}

/* The untimed first copy. */
static void st_base_warm(struct st_base *x, uint64_t size, const uint8_t *src)
{
	if (x->mapped)
		memcpy(x->b.p, src, size);
}

/* One timed copy (none once @n are done). */
static void st_base_copy(struct st_base *x, uint64_t size, const uint8_t *src)
{
	uint64_t t0;

	if (!x->mapped || x->done == x->n)
		return;
	t0 = bench_now_ns();
	memcpy(x->b.p, src, size);
	x->per_copy[x->done] = st_secs(t0, bench_now_ns());
	x->secs += x->per_copy[x->done++];
}

/* Checks the copy, unmaps and reports. Return: 0, -ENOMEM (no buffer), or -EIO when the
 * copy's first or last 4 KiB differ from @src's. */
static int st_base_close(struct st_base *x, uint64_t size, const uint8_t *src)
{
	int rc = -ENOMEM;

	if (x->mapped) {
		rc = x->done == x->n && memcmp(x->b.p, src, 4096) == 0 &&
			     memcmp(x->b.p + size - 4096, src + size - 4096, 4096) == 0
			 ? 0
			 : -EIO;
		munmap(x->b.map, x->b.maplen);
		x->mapped = false;
	}
	st_report(x->impl, "put", 1, 1, size, rc == 0 ? x->secs : 0, rc == 0 ? x->n : 0, rc == 0,
		  rc == -ENOMEM	 ? "(cannot map its buffer)"
		  : x->b.note[0] ? x->b.note
				 : NULL);
	return rc;
}

/*
 * One size: @reps puts of @size bytes through the store at batch 1 (create, memcpy from
 * @src, seal with release, each waited for; every object read back with a get, checked,
 * released and deleted untimed before the next), after one untimed warm-up put (the
 * baseline's destination is prefaulted and written untimed too); then, when @nmodes allows,
 * the batch-2 and streamed modes; then @reps memcpys of the same source into a prefaulted
 * private buffer. The batch-1 line is followed by where its time went (create, copy, seal).
 */
static int st_put_size(coffer_handle_t conn, uint64_t size, unsigned int reps, const uint8_t *src,
		       unsigned int run_id, unsigned int nmodes, bool hugepages)
{
	struct coffer_oid oid;
	coffer_handle_t oh;
	double t_store = 0, t_pipe = 0, t_stream = 0, t_warm = 0;
	double *per_put = calloc(4 * (size_t)reps, sizeof(double)), *per_copy = per_put + reps;
	double *per_put_copy = per_put + 2 * (size_t)reps, *per_copy4k = per_put + 3 * (size_t)reps;
	double t_create = 0, t_copy = 0;
	struct st_base base, base4k;
	bool ok = true, with4k;
	char why[160] = "";
	int rc, brc;

	st_oid(&oid, run_id, 0xffff, size);
	if (!per_put)
		return -ENOMEM;
	/* The baselines: the same memcpy into a prefaulted private buffer backed as the arena
	 * is ("memcpy", the bound the put is held to) and, when that is not on ordinary pages
	 * already, into one on 4 KiB pages ("memcpy-4k": the baseline before issue 6's fix,
	 * which a put into a hugepage arena could beat, see st_buf_map()), a copy of each after
	 * every timed batch-1 put, in alternating order (see struct st_base). */
	(void)st_base_open(&base, "memcpy", size, reps, hugepages, per_copy);
	with4k = !base.mapped || base.b.pages != ST_PAGES_4K;
	if (with4k)
		(void)st_base_open(&base4k, "memcpy-4k", size, reps, false, per_copy4k);
	st_base_warm(&base, size, src);
	if (with4k)
		st_base_warm(&base4k, size, src);
	rc = coffer_obj_open(conn, &oid, 0, &oh);
	if (rc < 0) {
		st_base_close(&base, size, src);
		if (with4k)
			st_base_close(&base4k, size, src);
		free(per_put);
		return rc;
	}
	for (unsigned int r = 0; r <= reps && ok; r++) { /* r == 0: the warm-up */
		const void *rd;
		uint64_t got, t0, tc, tm, t1;
		void *wr;

		t0 = bench_now_ns();
		rc = coffer_obj_create(oh, size, 0, &wr, NULL);
		tc = tm = bench_now_ns();
		if (rc == 0) {
			memcpy(wr, src, size);
			tm = bench_now_ns();
			rc = coffer_obj_seal(oh, COFFER_SEAL_RELEASE, NULL);
		}
		t1 = bench_now_ns();
		if (r == 0) {
			t_warm = st_secs(t0, t1);
		} else {
			t_store += st_secs(t0, t1);
			per_put[r - 1] = st_secs(t0, t1);
			per_put_copy[r - 1] = st_secs(tc, tm);
			t_create += st_secs(t0, tc);
			t_copy += st_secs(tc, tm);
			if (r % 2 || !with4k) {
				st_base_copy(&base, size, src);
				if (with4k)
					st_base_copy(&base4k, size, src);
			} else {
				st_base_copy(&base4k, size, src);
				st_base_copy(&base, size, src);
			}
		}
		if (rc == 0) {
			rc = coffer_obj_get(oh, 0, &rd, &got, NULL);
			if (rc == 0 && (got != size || memcmp(rd, src, 4096) != 0 ||
					memcmp((const uint8_t *)rd + size - 4096, src + size - 4096,
					       4096) != 0))
				rc = -EIO;
			if (rc == 0)
				rc = coffer_obj_release(oh, NULL);
			if (rc == 0)
				rc = coffer_obj_delete(conn, &oid, NULL);
		}
		if (rc < 0) {
			ok = false;
			snprintf(why, sizeof(why), "%s", coffer_strerror(rc));
		}
	}
	coffer_obj_close(oh);
	for (unsigned int r = base.done; r < reps; r++) { /* the puts stopped early: finish */
		st_base_copy(&base, size, src);
		if (with4k)
			st_base_copy(&base4k, size, src);
	}
	st_report("coffer", "put", 1, 1, size, t_store, ok ? reps : 0, ok, why[0] ? why : NULL);
	if (ok)
		printf("# put size=%" PRIu64 " batch 1 per put: create %.2f us, copy %.2f us, "
		       "seal %.2f us; untimed warm-up put %.1f us\n",
		       size, t_create * 1e6 / reps, t_copy * 1e6 / reps,
		       (t_store - t_create - t_copy) * 1e6 / reps, t_warm * 1e6);
	if (nmodes >= 2 &&
	    st_put_mode(st_put_pipelined, "put", 2, conn, size, reps, src, run_id, &t_pipe) < 0)
		ok = false;
	if (nmodes >= 3 && st_put_mode(st_put_stream, "put-stream", ST_STREAM_SLOTS, conn, size,
				       reps, src, run_id, &t_stream) < 0)
		ok = false;

	rc = brc = st_base_close(&base, size, src);
	if (with4k && (brc = st_base_close(&base4k, size, src)) < 0 && rc == 0)
		rc = brc;
	if (ok && rc == 0 && t_store > 0) {
		printf("store ratio   put          size=%-11" PRIu64
		       " coffer/memcpy = %.1f%% (batch 1)",
		       size, 100.0 * base.secs / t_store);
		if (t_pipe > 0)
			printf(", %.1f%% (batch 2)", 100.0 * base.secs / t_pipe);
		if (t_stream > 0)
			printf(", %.1f%% (stream)", 100.0 * base.secs / t_stream);
		/* the medians' ratio on the same line: with more busy threads than cores, a
		 * copy preempted for 100+ ms (seen at 64-256 MiB) moves the totals' ratio by 2x */
		printf("; medians %.1f%% (batch 1); memcpy on %s\n",
		       100.0 * st_median(per_copy, reps) / st_median(per_put, reps),
		       st_pages_name[base.b.pages]);
		if (with4k)
			printf("# put size=%" PRIu64 " coffer/memcpy-4k = %.1f%% (batch 1), "
			       "memcpy/memcpy-4k = %.1f%%\n",
			       size, 100.0 * base4k.secs / t_store,
			       100.0 * base4k.secs / base.secs);
		/* Medians: the steady state, without the preemptions a shared machine adds to
		 * a few puts or copies (beside the ratio of totals above, not instead of it). */
		{
			double mp = st_median(per_put, reps), mc = st_median(per_copy, reps);
			double mpc = st_median(per_put_copy, reps);

			printf("# put size=%" PRIu64
			       " batch 1 medians: put %.2f us (its copy %.2f us),"
			       " memcpy %.2f us: %.1f%%",
			       size, mp * 1e6, mpc * 1e6, mc * 1e6, 100.0 * mc / mp);
			if (with4k)
				printf("; memcpy-4k %.2f us", st_median(per_copy4k, reps) * 1e6);
			printf("\n");
		}
	}
	free(per_put);
	return ok && rc == 0 ? 0 : -EIO;
}

static int st_put(const struct st_opts *o, coffer_handle_t conn, unsigned int run_id)
{
	struct coffer_store_info info;
	uint64_t max = o->put_max;
	uint8_t *src;
	int rc, failed = 0;

	rc = coffer_store_query(conn, &info);
	if (rc < 0)
		return rc;
	/* leave room for the store's own rounding and other clients */
	while (max > info.capacity_bytes - info.used_bytes - (info.capacity_bytes >> 4) &&
	       max > o->put_min)
		max >>= 1;
	if (max > info.capacity_bytes - info.used_bytes) {
		fprintf(stderr,
			"coffer-bench store: the store is too small for a %" PRIu64 "-byte put\n",
			o->put_min);
		return -E2BIG;
	}
	{
		uint64_t last = o->put_min; /* the largest size the x4 steps reach */

		while (last <= max / 4)
			last *= 4;
		printf("# put: arena %s, sizes %" PRIu64 " .. %" PRIu64 " bytes (x4 steps)\n",
		       info.hugepages ? "hugepage-backed" : "on ordinary pages", o->put_min, last);
	}
	src = mmap(NULL, max, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
		   -1, 0);
	if (src == MAP_FAILED)
		return -ENOMEM;
	for (uint64_t i = 0; i < max; i += 8)
		memcpy(src + i, &i, 8);
	for (uint64_t size = o->put_min; size <= max; size <<= 2) {
		uint64_t reps = o->put_bytes / size;

		/* at least 8: the 256 MiB and larger sizes took 3-4 puts, where one preempted
		 * copy (15-20 ms each, longer than a time slice here) moved a ratio by 2x */
		if (reps < 8)
			reps = 8;
		if (reps > 1000)
			reps = 1000;
		uint64_t free = info.capacity_bytes - info.used_bytes,
			 margin = info.capacity_bytes >> 4;
		uint64_t room = free > margin ? free - margin : 0;

		/* the batch-2 mode needs room for two objects of @size, the stream three */
		if (st_put_size(conn, size, (unsigned int)reps, src, run_id,
				room >= 3 * size   ? 3
				: room >= 2 * size ? 2
						   : 1,
				info.hugepages != 0) < 0)
			failed = 1;
	}
	munmap(src, max);
	return failed ? -EIO : 0;
}

/* Parses BYTES with an optional K/M/G/T suffix (coffer__parse_size) into [min, max]. */
static int st_parse_size(const char *str, uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t v;

	if (coffer__parse_size(str, &v) != 0 || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

/* Parses a comma-separated list of workload names into @o's do_* flags. Return: 0 or -EINVAL
 * (an unknown name, or none). */
static int st_parse_workloads(const char *arg, struct st_opts *o)
{
	char buf[256], *save = NULL, *tok;

	if (strlen(arg) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, arg);
	o->do_cs = o->do_gr = o->do_put = o->do_rp = false;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (strcmp(tok, "create-seal") == 0)
			o->do_cs = true;
		else if (strcmp(tok, "get-release") == 0)
			o->do_gr = true;
		else if (strcmp(tok, "put") == 0)
			o->do_put = true;
		else if (strcmp(tok, "reserve-put") == 0)
			o->do_rp = true;
		else
			return -EINVAL;
	}
	return o->do_cs || o->do_gr || o->do_put || o->do_rp ? 0 : -EINVAL;
}

/* ---- command line ------------------------------------------------------------------------------
 */

static void st_usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: coffer-bench store [--socket PATH] [--threads 1,2,4] [--batch 1,8,32,128]\n"
	    "                          [--seconds S] [--obj-size BYTES] [--keys N]\n"
	    "                          [--workload create-seal,get-release,put,reserve-put]\n"
	    "                          [--put-max BYTES] [--put-bytes BYTES] [--idle-channels N]\n"
	    "                          [--csv FILE]\n"
	    "  --socket PATH   a running coffer-store (default: $COFFER_SOCKET or the per-user\n"
	    "                  default path)\n"
	    "  --threads LIST  client threads (each with its own EQ and channel; default 1,2,4)\n"
	    "  --batch LIST    requests in flight per thread (default 1,8,32,128; max %u)\n"
	    "  --seconds S     per small-object result (default 1)\n"
	    "  --obj-size B    small object size in bytes (default 64, at most 16777216)\n"
	    "  --keys N        objects per thread (default 1024; raised to at least the batch and\n"
	    "                  rounded up to a multiple of it)\n"
	    "  --workload W    any of create-seal, get-release, put, reserve-put (default\n"
	    "                  create-seal,get-release,put; reserve-put needs --obj-size >= 1)\n"
	    "  --put-max B     largest put (default 1 GiB, capped by the store's capacity);\n"
	    "                  puts run at 1 MiB, 4 MiB, 16 MiB, ... (x4) up to it, at batch 1,\n"
	    "                  batch 2 and streamed (put-stream) where 2 and 3 objects fit\n"
	    "  --put-bytes B   payload bytes per put size, 1 MiB or more (default 2 GiB); sets\n"
	    "                  the repetitions: B / size, kept within 8..1000\n"
	    "  --idle-channels N  run the small-object results again while N channels (1..%u)\n"
	    "                  sit idle on other connections (impl coffer-idleN)\n"
	    "  --csv FILE      append rows bench,impl,workload,batch,threads,size_bytes,\n"
	    "                  seconds,ops,mops,gbps,status\n"
	    "Exit status: 0 all verified, 1 a verification failed, 2 usage, 3 no coffer-store\n"
	    "             at the socket (none running, or another program listening there).\n",
	    ST_MAX_BATCH, ST_IDLE_MAX);
}

int coffer__bench_store_main(int argc, char **argv)
{
	static const struct option lopts[] = {
	    {"socket", required_argument, NULL, 'S'},
	    {"threads", required_argument, NULL, 't'},
	    {"batch", required_argument, NULL, 'b'},
	    {"seconds", required_argument, NULL, 's'},
	    {"obj-size", required_argument, NULL, 'o'},
	    {"keys", required_argument, NULL, 'k'},
	    {"workload", required_argument, NULL, 'w'},
	    {"put-max", required_argument, NULL, 'M'},
	    {"put-bytes", required_argument, NULL, 'B'},
	    {"csv", required_argument, NULL, 'c'},
	    {"idle-channels", required_argument, NULL, 'I'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct st_opts o = {
	    .threads = {1, 2, 4},
	    .nthreads = 3,
	    .batches = {1, 8, 32, 128},
	    .nbatches = 4,
	    .seconds = 1.0,
	    .obj_size = 64,
	    .keys = 1024,
	    .put_min = 1u << 20,
	    .put_max = 1u << 30,
	    .put_bytes = 2ull << 30,
	    .do_cs = true,
	    .do_gr = true,
	    .do_put = true,
	};
	coffer_handle_t conn;
	unsigned int run_id;
	int c, n, rc, failed = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
		switch (c) {
		case 'S':
			if (strlen(optarg) >= sizeof(o.socket))
				goto bad;
			strcpy(o.socket, optarg);
			break;
		case 't':
			n = bench_parse_uint_list(optarg, BENCH_MAX_THREADS, o.threads);
			if (n < 0)
				goto bad;
			o.nthreads = n;
			break;
		case 'b':
			n = bench_parse_uint_list(optarg, ST_MAX_BATCH, o.batches);
			if (n < 0)
				goto bad;
			o.nbatches = n;
			break;
		case 's':
			if (bench_parse_seconds(optarg, &o.seconds))
				goto bad;
			break;
		case 'o':
			if (st_parse_size(optarg, 0, 1u << 24, &o.obj_size))
				goto bad;
			break;
		case 'k':
			if (bench_parse_u64(optarg, 1, 1u << 24, &o.keys))
				goto bad;
			break;
		case 'w':
			if (st_parse_workloads(optarg, &o))
				goto bad;
			break;
		case 'M':
			if (st_parse_size(optarg, 1u << 20, 1ull << 40, &o.put_max))
				goto bad;
			break;
		case 'B':
			if (st_parse_size(optarg, 1u << 20, 1ull << 44, &o.put_bytes))
				goto bad;
			break;
		case 'c':
			o.csv = optarg;
			break;
		case 'I':
			if (bench_parse_u64(optarg, 1, ST_IDLE_MAX, &o.idle))
				goto bad;
			break;
		case 'h':
			st_usage(stdout);
			return 0;
		default:
			goto usage;
		}
	}
	if (optind != argc)
		return bench_bad_value("store", NULL, 0, argv[optind]);
	if (o.do_rp && o.obj_size == 0)
		return bench_usage_error("store", "reserve-put needs --obj-size of 1 byte or more");
	for (int i = 0; i < o.nbatches; i++)
		if (o.keys < o.batches[i])
			o.keys = o.batches[i];
	if (!o.socket[0] && coffer__default_socket_path(o.socket, sizeof(o.socket)) < 0)
		return bench_usage_error("store",
					 "the default socket path is too long: use --socket");

	rc = coffer_init();
	if (rc < 0)
		return bench_init_failed("store", rc);
	rc = coffer_connect(o.socket, &conn);
	if (rc < 0) {
		rc = bench_connect_failed("store", o.socket, rc, ST_EXIT_NOSTORE);
		coffer_fini();
		return rc;
	}
	if (o.do_cs || o.do_gr || o.do_rp) {
		/* Small-object sets must fit, or the store evicts them mid-run and the
		 * verification fails for a reason the numbers do not show. */
		struct coffer_store_info info;
		unsigned int tmax = 0;
		uint64_t need;

		for (int i = 0; i < o.nthreads; i++)
			tmax = o.threads[i] > tmax ? o.threads[i] : tmax;
		need = (uint64_t)tmax * o.keys * ((o.obj_size + 63) / 64 * 64);
		if (coffer_store_query(conn, &info) == 0 && need > info.capacity_bytes / 2) {
			fprintf(stderr,
				"coffer-bench store: %u threads x %" PRIu64 " keys x %" PRIu64
				" bytes = %" PRIu64 " bytes of objects; the store holds %" PRIu64
				" (half of it at most for this): lower --keys, --obj-size or "
				"--threads, or start the store with a larger -m\n",
				tmax, o.keys, o.obj_size, need, info.capacity_bytes);
			coffer_disconnect(conn);
			coffer_fini();
			return BENCH_EXIT_USAGE;
		}
	}
	if (o.csv)
		st_csv_open(o.csv);
	bench_print_machine(stdout);
	run_id = (unsigned int)(bench_now_ns() & 0xffffffffu);
	failed = st_small_all(&o, conn, "coffer", &run_id);
	if (o.idle > 0 && (o.do_cs || o.do_gr || o.do_rp)) {
		static struct st_idle idle; /* about 33 KiB: not on the stack */
		char impl[32];

		rc = st_idle_open(&idle, o.socket, (unsigned int)o.idle);
		if (rc < 0) {
			fprintf(stderr, "coffer-bench store: %u of %" PRIu64 " idle channels: %s\n",
				idle.n, o.idle, coffer_strerror(rc));
			failed = 1;
		} else {
			snprintf(impl, sizeof(impl), "coffer-idle%" PRIu64, o.idle);
			printf("# %u idle channels on %u more connections\n", idle.n, idle.nconns);
			failed |= st_small_all(&o, conn, impl, &run_id);
		}
		st_idle_close(&idle);
	}
	if (o.do_put && st_put(&o, conn, run_id++) < 0)
		failed = 1;
	if (st_csv)
		fclose(st_csv);
	rc = coffer_disconnect(conn);
	if (rc < 0)
		failed = 1;
	coffer_fini();
	return failed ? BENCH_EXIT_VERIFY : 0;

bad:
	return bench_bad_value("store", lopts, c, optarg);
usage:
	return bench_usage_error("store", NULL);
}
