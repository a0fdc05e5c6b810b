/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * examples/manythreads.c - many threads making blocking calls on few connections.
 *
 *   manythreads SOCKET THREADS CONNS ITERS [IDLE_MS [MAX_MS]]
 *
 * THREADS threads share CONNS connections (thread t uses connection t % CONNS). Each makes
 * a blocking create -> fill -> seal(SEAL_RELEASE) -> get -> check -> release -> delete per
 * iteration, on an ObjectID of its own. Every thread first makes one call and waits for all
 * the others to have made theirs, so that every thread holds its channel at the same time:
 * a connection carries at most 512 channels, and the threads past that get -EMFILE (they
 * report it and stop; the others must be unaffected). With IDLE_MS > 0 each thread sleeps
 * 10..IDLE_MS ms between iterations, so the store falls asleep between bursts; the slowest
 * call is reported, and with MAX_MS it must have taken at most that long (the first call of
 * each thread, which opens its channel, is not counted). Prints one line per result; exit
 * status 0 when every thread either finished or got -EMFILE as its first call's error, and
 * exactly the threads past 512 per connection did, 1 otherwise.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <coffer/coffer.h>

#define OBJ_SIZE 256

struct worker {
	pthread_t tid;
	unsigned int idx;
	coffer_handle_t conn;
	int first_err;	  /* 0, or the error of the first failed call */
	const char *what; /* the call that failed */
	uint64_t max_ns;  /* slowest create/seal/get/release/delete after the first iteration */
	const char *max_what;
	uint64_t slow; /* calls after the first iteration that took over 10 ms */
	uint64_t done;
};

static unsigned int nthreads, niters, idle_ms, max_ms;
static pthread_barrier_t first_call;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void make_oid(struct coffer_oid *oid, unsigned int t, unsigned int i)
{
	memset(oid, 0, sizeof(*oid));
	snprintf((char *)oid->id, sizeof(oid->id), "mt%d-%u-%u", (int)getpid(), t, i);
}

/* One iteration; returns 0 or the first error (w->what names the call). */
static int one_iteration(struct worker *w, unsigned int i)
{
	struct coffer_oid oid;
	coffer_handle_t oh;
	void *wr;
	const void *rd;
	uint64_t size, t0;
	int rc;

	make_oid(&oid, w->idx, i);
	rc = coffer_obj_open(w->conn, &oid, 0, &oh);
	if (rc) {
		w->what = "open";
		return rc;
	}
#define TIMED(name, call)                                                                          \
	do {                                                                                       \
		t0 = now_ns();                                                                     \
		rc = (call);                                                                       \
		t0 = now_ns() - t0;                                                                \
		if (i && t0 > w->max_ns) {                                                         \
			w->max_ns = t0;                                                            \
			w->max_what = name;                                                        \
		}                                                                                  \
		if (i && t0 > 10000000u)                                                           \
			w->slow++;                                                                 \
		if (rc) {                                                                          \
			w->what = name;                                                            \
			goto out;                                                                  \
		}                                                                                  \
	} while (0)
	TIMED("create", coffer_obj_create(oh, OBJ_SIZE, 0, &wr, NULL));
	memset(wr, (int)(w->idx + i) & 0xff, OBJ_SIZE);
	TIMED("seal", coffer_obj_seal(oh, COFFER_SEAL_RELEASE, NULL));
	TIMED("get", coffer_obj_get(oh, 0, &rd, &size, NULL));
	if (size != OBJ_SIZE ||
	    ((const unsigned char *)rd)[OBJ_SIZE - 1] != ((w->idx + i) & 0xff)) {
		w->what = "content check";
		rc = -EIO;
		coffer_obj_release(oh, NULL);
		goto out;
	}
	TIMED("release", coffer_obj_release(oh, NULL));
	TIMED("delete", coffer_obj_delete(w->conn, &oid, NULL));
#undef TIMED
out:
	coffer_obj_close(oh);
	return rc;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	unsigned int seed = w->idx;
	unsigned int i;
	int rc;

	rc = one_iteration(w, 0);
	pthread_barrier_wait(&first_call);
	if (rc) {
		w->first_err = rc;
		return NULL;
	}
	w->done = 1;
	for (i = 1; i < niters; i++) {
		if (idle_ms) {
			unsigned int ms = 10 + (unsigned int)rand_r(&seed) % (idle_ms - 9);
			struct timespec ts = {.tv_sec = ms / 1000,
					      .tv_nsec = (long)(ms % 1000) * 1000000};

			nanosleep(&ts, NULL);
		}
		rc = one_iteration(w, i);
		if (rc) {
			w->first_err = rc;
			return NULL;
		}
		w->done++;
	}
	return NULL;
}

static unsigned int parse(const char *s, unsigned int min, unsigned int max, const char *name)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || end == s || v < min || v > max) {
		fprintf(stderr, "manythreads: %s must be %u..%u\n", name, min, max);
		exit(2);
	}
	return (unsigned int)v;
}

int main(int argc, char **argv)
{
	struct coffer_store_info info;
	coffer_handle_t conns[16];
	struct worker *ws;
	unsigned int nconns, t, ok = 0, emfile = 0, other = 0, bad_emfile = 0;
	unsigned int per_conn_ok[16] = {0};
	uint64_t max_ns = 0, slow = 0, t0;
	const char *max_what = "none";
	int rc;

	if (argc < 5 || argc > 7) {
		fprintf(stderr,
			"usage: manythreads SOCKET THREADS CONNS ITERS [IDLE_MS [MAX_MS]]\n");
		return 2;
	}
	nthreads = parse(argv[2], 1, 100000, "THREADS");
	nconns = parse(argv[3], 1, 16, "CONNS");
	niters = parse(argv[4], 1, 100000000, "ITERS");
	idle_ms = argc > 5 ? parse(argv[5], 0, 10000, "IDLE_MS") : 0;
	max_ms = argc > 6 ? parse(argv[6], 1, 1000000, "MAX_MS") : 0;
	if (idle_ms && idle_ms < 10) {
		fprintf(stderr, "manythreads: IDLE_MS must be 0 or at least 10\n");
		return 2;
	}
	rc = coffer_init();
	if (rc) {
		fprintf(stderr, "coffer_init: %s\n", coffer_strerror(rc));
		return 1;
	}
	for (t = 0; t < nconns; t++) {
		rc = coffer_connect(argv[1], &conns[t]);
		if (rc) {
			fprintf(stderr, "coffer_connect: %s\n", coffer_strerror(rc));
			return 1;
		}
	}
	ws = calloc(nthreads, sizeof(*ws));
	if (!ws || pthread_barrier_init(&first_call, NULL, nthreads)) {
		fprintf(stderr, "manythreads: out of memory\n");
		return 1;
	}
	t0 = now_ns();
	for (t = 0; t < nthreads; t++) {
		pthread_attr_t attr;

		ws[t].idx = t;
		ws[t].conn = conns[t % nconns];
		pthread_attr_init(&attr);
		pthread_attr_setstacksize(&attr, 256 * 1024);
		rc = pthread_create(&ws[t].tid, &attr, worker_main, &ws[t]);
		pthread_attr_destroy(&attr);
		if (rc) {
			fprintf(stderr, "pthread_create: %s\n", strerror(rc));
			return 1;
		}
	}
	for (t = 0; t < nthreads; t++)
		pthread_join(ws[t].tid, NULL);
	t0 = now_ns() - t0;
	for (t = 0; t < nthreads; t++) {
		struct worker *w = &ws[t];

		if (w->max_ns > max_ns) {
			max_ns = w->max_ns;
			max_what = w->max_what;
		}
		slow += w->slow;
		if (!w->first_err) {
			ok++;
			per_conn_ok[t % nconns]++;
		} else if (w->first_err == -EMFILE && w->done == 0) {
			emfile++;
		} else {
			other++;
			if (other <= 5)
				fprintf(stderr,
					"thread %u: %s after %" PRIu64 " iterations: %d (%s)\n", t,
					w->what, w->done, w->first_err,
					coffer_strerror(w->first_err));
		}
		if (w->first_err == -EMFILE && emfile == 1 && w->done == 0)
			printf("first -EMFILE: thread %u, call %s: \"%s\"\n", t, w->what,
			       coffer_strerror(w->first_err));
	}
	/* connection c has the threads t % nconns == c: all of them up to 512 must work */
	for (t = 0; t < nconns; t++) {
		unsigned int mine = nthreads / nconns + (t < nthreads % nconns);

		if (per_conn_ok[t] != (mine < 512 ? mine : 512)) {
			fprintf(stderr, "connection %u: %u of its %u threads worked, want %u\n", t,
				per_conn_ok[t], mine, mine < 512 ? mine : 512);
			bad_emfile++;
		}
	}
	printf("threads=%u conns=%u iters=%u idle_ms=%u: ok=%u emfile=%u other=%u "
	       "slowest call %.3f ms (%s), %" PRIu64 " over 10 ms, %.2f s\n",
	       nthreads, nconns, niters, idle_ms, ok, emfile, other, (double)max_ns / 1e6, max_what,
	       slow, (double)t0 / 1e9);
	if (max_ms && max_ns > (uint64_t)max_ms * 1000000u) {
		fprintf(stderr, "manythreads: a call took %.3f ms, more than %u ms\n",
			(double)max_ns / 1e6, max_ms);
		other++;
	}
	rc = coffer_store_query(conns[0], &info);
	if (rc == 0)
		printf("store: used_bytes=%" PRIu64 " created=%" PRIu64 " sealed=%" PRIu64
		       " clients=%" PRIu64 "\n",
		       info.used_bytes, info.objects_created, info.objects_sealed, info.clients);
	for (t = 0; t < nconns; t++)
		coffer_disconnect(conns[t]);
	coffer_fini();
	free(ws);
	return other || bad_emfile ? 1 : 0;
}
