/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/reliability/doorbell_test.c - lost wake-ups in the v3 doorbell logic.
 *
 * The store runs with COFFER_STORE_SWEEP_US at an hour, so its 100 ms safety sweep of every
 * channel cannot hide a request whose doorbell (bit or eventfd) was lost: a request that
 * is not served within HANG_MS is a hang, and the test fails naming what it waited for.
 * Nothing here asserts a time: every wait is a hang guard.
 *
 *  - test_boundary_channels: one connection with 512 EQs (channel ids 0..511, every bit of
 *    the doorbell page); the channels at word boundaries (7/8, 63/64, 127/128, 255/256,
 *    511) are used after the connection went cold (idle > STORE_COLD_US) and the store
 *    fell asleep, then destroyed and their ids reused by new EQs, and used again.
 *  - test_idle_gaps: threads on two connections (blocking calls, asynchronous batches on
 *    their own EQs, gets that wait for another thread's seal) with random idle gaps around
 *    the cold threshold and the store's spin, EQ destroy/create churn (channel id reuse)
 *    and reconnects; a watchdog fails the test when one thread makes no progress.
 *  - test_disconnect_while_cold: connections that go cold with requests of theirs waiting
 *    in the store disconnect; the store forgets them and serves the others.
 *
 * Usage by hand: doorbell_test [SECONDS [SEED]] (default 6 s of test_idle_gaps).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <coffer/coffer.h>

#include "tests/reliability/relcommon.h"
#include "tests/store/rawclient.h"

/* A request not answered within this long is lost (the store answers in microseconds). */
#define HANG_MS 5000
/* Idle gap that outlasts the store's cold threshold (1 ms) and its spin (50 us). */
#define COLD_GAP_US 3000

static struct rc_store g_store;
static long g_seconds = 6;
static uint64_t g_seed;

/* ---- watchdog --------------------------------------------------------------------------- */

#define MAX_WORKERS 16

struct worker_state {
	_Atomic long last_ms; /* when this worker last made progress; 0: not running */
	_Atomic(const char *) what;
};

static struct worker_state g_ws[MAX_WORKERS];
static atomic_bool g_wd_stop;

static void progress(int w, const char *what)
{
	atomic_store(&g_ws[w].what, what);
	atomic_store(&g_ws[w].last_ms, rel_now_ms());
}

static void *watchdog(void *arg)
{
	(void)arg;
	while (!atomic_load(&g_wd_stop)) {
		long now = rel_now_ms();

		for (int i = 0; i < MAX_WORKERS; i++) {
			long t = atomic_load(&g_ws[i].last_ms);

			if (t != 0 && now - t > HANG_MS) {
				fprintf(stderr,
					"doorbell_test: worker %d made no progress for %ld ms "
					"after '%s' (seed %llu): a lost wake-up\n",
					i, now - t, atomic_load(&g_ws[i].what),
					(unsigned long long)g_seed);
				if (g_store.pid > 0)
					kill(g_store.pid, SIGKILL);
				_exit(1);
			}
		}
		rel_sleep_us(100000);
	}
	return NULL;
}

/* A store of ours outlives no exit of this process: a sanitizer's report, a failed
 * assertion that ends it. */
void __sanitizer_set_death_callback(void (*cb)(void)) __attribute__((weak));

static void kill_live_store(void)
{
	if (g_store.pid > 0)
		kill(g_store.pid, SIGKILL);
}

/* ---- fixture ---------------------------------------------------------------------------- */

static int setup(void **state)
{
	(void)state;
	assert_int_equal(setenv("COFFER_STORE_SWEEP_US", "3600000000", 1), 0);
	assert_int_equal(rc_store_start(&g_store, (const char *[]){"-m", "16M", NULL}), 0);
	assert_int_equal(unsetenv("COFFER_STORE_SWEEP_US"), 0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	if (g_store.pid > 0)
		assert_int_equal(rc_store_stop(&g_store), 0);
	memset(&g_store, 0, sizeof(g_store));
	return 0;
}

/* Waits for @ev (launched on @eqh) with a hang guard; returns its ev_error. */
static int wait_ev(coffer_handle_t eqh, struct coffer_event *ev, const char *what)
{
	long deadline = rel_now_ms() + HANG_MS;

	for (;;) {
		struct coffer_event *got = NULL;
		int n = coffer_eq_poll(eqh, 0, 100000, 1, &got);

		if (n < 0)
			fail_msg("%s: coffer_eq_poll: %d", what, n);
		if (n == 1) {
			assert_ptr_equal(got, ev);
			return ev->ev_error;
		}
		if (rel_now_ms() > deadline)
			fail_msg("%s: no reply within %d ms (a lost wake-up; sweep disabled)", what,
				 HANG_MS);
	}
}

static void contains_on(coffer_handle_t c, coffer_handle_t eqh, uint64_t id, const char *what)
{
	struct coffer_event ev;
	struct coffer_oid oid;
	bool has = true;

	rel_oid(&oid, id);
	assert_int_equal(coffer_event_init(&ev, eqh, NULL), 0);
	assert_int_equal(coffer_obj_contains(c, &oid, &has, &ev), 0);
	assert_int_equal(wait_ev(eqh, &ev, what), 0);
	assert_false(has);
	assert_int_equal(coffer_event_fini(&ev), 0);
}

/* ---- boundary channels ------------------------------------------------------------------ */

#define NEQ 512

static void test_boundary_channels(void **state)
{
	static const unsigned int ids[] = {0,	1,   7,	  8,   9,   63,	 64,  65, 127,
					   128, 255, 256, 447, 448, 504, 510, 511};
	static coffer_handle_t eqs[NEQ];
	coffer_handle_t c;
	char what[96];

	(void)state;
	assert_int_equal(coffer_connect(g_store.sock, &c), 0);
	/* Channel ids are given lowest first: EQ i gets channel i. */
	for (unsigned int i = 0; i < NEQ; i++) {
		assert_int_equal(coffer_eq_create(&eqs[i]), 0);
		snprintf(what, sizeof(what), "first request on channel %u", i);
		contains_on(c, eqs[i], i, what);
	}
	/* Every channel id is taken: one more EQ (this thread's blocking calls) is -EMFILE;
	 * once an EQ is destroyed its id serves the next EQ, after an idle gap too. */
	{
		struct coffer_oid oid;
		bool has = true;

		rel_oid(&oid, 99);
		assert_int_equal(coffer_obj_contains(c, &oid, &has, NULL), -EMFILE);
		assert_int_equal(coffer_eq_destroy(eqs[300], 0), 0);
		rel_sleep_us(COLD_GAP_US);
		assert_int_equal(coffer_obj_contains(c, &oid, &has, NULL), 0);
		assert_false(has);
		assert_int_equal(coffer_obj_contains(c, &oid, &has, NULL), 0);
		assert_int_equal(coffer_eq_create(&eqs[300]), 0);
		assert_int_equal(coffer_obj_contains(c, &oid, &has, &(struct coffer_event){0}),
				 -EINVAL); /* an event never initialised */
	}
	for (unsigned int round = 0; round < 3; round++) {
		for (size_t k = 0; k < sizeof(ids) / sizeof(ids[0]); k++) {
			unsigned int i = ids[k];

			rel_sleep_us(COLD_GAP_US); /* cold connection, sleeping store */
			snprintf(what, sizeof(what), "round %u: channel %u after an idle gap",
				 round, i);
			contains_on(c, eqs[i], 1000 + i, what);
		}
		/* Reuse: destroy the boundary EQs; new EQs take their channel ids (the old
		 * channels close at the next open, lowest id first). */
		for (size_t k = 0; k < sizeof(ids) / sizeof(ids[0]); k++) {
			unsigned int i = ids[k];

			assert_int_equal(coffer_eq_destroy(eqs[i], 0), 0);
			assert_int_equal(coffer_eq_create(&eqs[i]), 0);
		}
		for (size_t k = 0; k < sizeof(ids) / sizeof(ids[0]); k++) {
			unsigned int i = ids[k];

			rel_sleep_us(COLD_GAP_US);
			snprintf(what, sizeof(what), "round %u: reused channel %u", round, i);
			contains_on(c, eqs[i], 2000 + i, what);
		}
	}
	for (unsigned int i = 0; i < NEQ; i++)
		assert_int_equal(coffer_eq_destroy(eqs[i], 0), 0);
	assert_int_equal(coffer_disconnect(c), 0);
}

/* ---- random idle gaps ------------------------------------------------------------------- */

#define NWORKERS 6
#define NCONNS	 2

static coffer_handle_t g_conns[NCONNS];
static _Atomic uint64_t g_next_oid = 1u << 20;
static atomic_bool g_stop;
static _Atomic long g_ops;

struct worker {
	int idx;
	uint64_t rng;
};

static void idle_gap(uint64_t *rng)
{
	switch (rel_rand(rng) % 6) {
	case 0:
		break; /* back to back */
	case 1:
		rel_sleep_us((long)(rel_rand(rng) % 100)); /* inside the store's spin */
		break;
	case 2:
		rel_sleep_us(40 + (long)(rel_rand(rng) % 40)); /* its spin's end: try_sleep() */
		break;
	case 3:
		rel_sleep_us(800 + (long)(rel_rand(rng) % 400)); /* the cold threshold */
		break;
	default:
		rel_sleep_us((long)(rel_rand(rng) % COLD_GAP_US));
		break;
	}
}

/* A put then a get of one object, blocking (the thread's hidden EQ and channel). */
static void blocking_put_get(coffer_handle_t c, uint64_t *rng)
{
	struct coffer_oid oid;
	uint64_t id = atomic_fetch_add(&g_next_oid, 1), size = rel_rand(rng) % 256, got = 0;
	const void *rd;
	void *wr;
	int rc;

	rel_oid(&oid, id);
	rc = coffer_obj_create_oid(c, &oid, size, 0, &wr, NULL);
	assert_int_equal(rc, 0);
	rel_fill(wr, size, id);
	idle_gap(rng);
	assert_int_equal(coffer_obj_seal_oid(c, &oid, COFFER_SEAL_RELEASE, NULL), 0);
	idle_gap(rng);
	assert_int_equal(coffer_obj_get_oid(c, &oid, 0, &rd, &got, NULL), 0);
	assert_int_equal(got, size);
	assert_int_equal(rel_verify(rd, size), 0);
	assert_int_equal(coffer_obj_release_data(c, &oid, rd, NULL), 0);
	assert_int_equal(coffer_obj_delete(c, &oid, NULL), 0);
}

/* A batch of contains on @eqh, polled with a hang guard. */
static void async_batch(int w, coffer_handle_t c, coffer_handle_t eqh, uint64_t *rng)
{
	struct coffer_event evs[40];
	bool has[40];
	unsigned int n = 1 + (unsigned int)(rel_rand(rng) % 40), done = 0;
	long deadline;

	for (unsigned int i = 0; i < n; i++) {
		struct coffer_oid oid;

		rel_oid(&oid, (uint64_t)w << 40 | i);
		assert_int_equal(coffer_event_init(&evs[i], eqh, NULL), 0);
		assert_int_equal(coffer_obj_contains(c, &oid, &has[i], &evs[i]), 0);
		if (rel_rand(rng) % 8 == 0)
			idle_gap(rng); /* requests queued, unpublished, over an idle gap */
	}
	if (rel_rand(rng) % 2)
		assert_int_equal(coffer_flush(c), 0);
	deadline = rel_now_ms() + HANG_MS;
	while (done < n) {
		struct coffer_event *got[40];
		int k = coffer_eq_poll(eqh, 0, rel_rand(rng) % 2 ? 0 : 20000, 40, got);

		assert_true(k >= 0);
		for (int i = 0; i < k; i++)
			assert_int_equal(got[i]->ev_error, 0);
		done += (unsigned int)k;
		if (rel_now_ms() > deadline)
			fail_msg("worker %d: %u of %u async requests unanswered (lost wake-up)", w,
				 n - done, n);
		progress(w, "async batch");
	}
	for (unsigned int i = 0; i < n; i++)
		assert_int_equal(coffer_event_fini(&evs[i]), 0);
}

/* A get that waits for a seal from another connection, both after idle gaps. */
static void wait_for_seal(int w, uint64_t *rng)
{
	coffer_handle_t a = g_conns[w % NCONNS], b = g_conns[(w + 1) % NCONNS], eqh;
	uint64_t id = atomic_fetch_add(&g_next_oid, 1), size = 0;
	struct coffer_event ev;
	struct coffer_oid oid;
	const void *rd = NULL;
	void *wr;

	rel_oid(&oid, id);
	assert_int_equal(coffer_eq_create(&eqh), 0);
	assert_int_equal(coffer_event_init(&ev, eqh, NULL), 0);
	assert_int_equal(coffer_obj_get_oid(a, &oid, -1, &rd, &size, &ev), 0);
	assert_int_equal(coffer_flush(a), 0);
	rel_sleep_us(COLD_GAP_US); /* the waiting get's connection goes cold */
	assert_int_equal(coffer_obj_create_oid(b, &oid, 8, 0, &wr, NULL), 0);
	rel_fill(wr, 8, id);
	idle_gap(rng);
	assert_int_equal(coffer_obj_seal_oid(b, &oid, COFFER_SEAL_RELEASE, NULL), 0);
	assert_int_equal(wait_ev(eqh, &ev, "a get waiting for another connection's seal"), 0);
	assert_int_equal(size, 8);
	assert_int_equal(coffer_obj_release_data(a, &oid, rd, NULL), 0);
	assert_int_equal(coffer_obj_delete(a, &oid, NULL), 0);
	assert_int_equal(coffer_event_fini(&ev), 0);
	assert_int_equal(coffer_eq_destroy(eqh, 0), 0);
}

static void *worker_main(void *arg)
{
	struct worker *wk = arg;
	int w = wk->idx;
	coffer_handle_t eqh;

	assert_int_equal(coffer_eq_create(&eqh), 0);
	progress(w, "start");
	while (!atomic_load(&g_stop)) {
		coffer_handle_t c = g_conns[rel_rand(&wk->rng) % NCONNS];

		switch (rel_rand(&wk->rng) % 8) {
		case 0:
		case 1:
		case 2:
			blocking_put_get(c, &wk->rng);
			progress(w, "blocking put/get");
			break;
		case 3:
		case 4:
			async_batch(w, c, eqh, &wk->rng);
			break;
		case 5:
			/* churn: the EQ's channels close and their ids are reused */
			assert_int_equal(coffer_eq_destroy(eqh, 0), 0);
			assert_int_equal(coffer_eq_create(&eqh), 0);
			progress(w, "EQ churn");
			break;
		case 6:
			wait_for_seal(w, &wk->rng);
			progress(w, "get waiting for a seal");
			break;
		default:
			idle_gap(&wk->rng);
			progress(w, "idle");
			break;
		}
		atomic_fetch_add(&g_ops, 1);
		idle_gap(&wk->rng);
	}
	assert_int_equal(coffer_eq_destroy(eqh, 0), 0);
	atomic_store(&g_ws[w].last_ms, 0);
	return NULL;
}

static void test_idle_gaps(void **state)
{
	struct worker wk[NWORKERS];
	pthread_t th[NWORKERS], wd;
	struct coffer_store_info info;
	long end;

	(void)state;
	printf("doorbell_test: %ld s, seed %llu\n", g_seconds, (unsigned long long)g_seed);
	for (int i = 0; i < NCONNS; i++)
		assert_int_equal(coffer_connect(g_store.sock, &g_conns[i]), 0);
	atomic_store(&g_stop, false);
	atomic_store(&g_wd_stop, false);
	assert_int_equal(pthread_create(&wd, NULL, watchdog, NULL), 0);
	for (int i = 0; i < NWORKERS; i++) {
		wk[i].idx = i;
		wk[i].rng = g_seed + (uint64_t)i * 0x9e3779b97f4a7c15ull;
		assert_int_equal(pthread_create(&th[i], NULL, worker_main, &wk[i]), 0);
	}
	end = rel_now_ms() + g_seconds * 1000;
	while (rel_now_ms() < end)
		rel_sleep_us(50000);
	atomic_store(&g_stop, true);
	for (int i = 0; i < NWORKERS; i++)
		pthread_join(th[i], NULL);
	atomic_store(&g_wd_stop, true);
	pthread_join(wd, NULL);
	printf("doorbell_test: %ld operations\n", atomic_load(&g_ops));
	assert_int_equal(coffer_store_query(g_conns[0], &info), 0);
	assert_int_equal(info.used_bytes, 0);
	for (int i = 0; i < NCONNS; i++)
		assert_int_equal(coffer_disconnect(g_conns[i]), 0);
}

/* ---- disconnect while cold -------------------------------------------------------------- */

static void test_disconnect_while_cold(void **state)
{
	coffer_handle_t keep, keq;

	(void)state;
	assert_int_equal(coffer_connect(g_store.sock, &keep), 0);
	assert_int_equal(coffer_eq_create(&keq), 0);
	for (int round = 0; round < 50; round++) {
		coffer_handle_t c, eqh;
		struct coffer_event ev;
		struct coffer_oid oid;
		const void *rd;
		char what[64];

		assert_int_equal(coffer_connect(g_store.sock, &c), 0);
		assert_int_equal(coffer_eq_create(&eqh), 0);
		rel_oid(&oid, 7000000 + (uint64_t)round);
		/* a get that waits in the store, on a connection about to go cold */
		assert_int_equal(coffer_event_init(&ev, eqh, NULL), 0);
		assert_int_equal(coffer_obj_get_oid(c, &oid, -1, &rd, NULL, &ev), 0);
		assert_int_equal(coffer_flush(c), 0);
		rel_sleep_us(round % 2 ? COLD_GAP_US : 500 + round * 20);
		assert_int_equal(coffer_disconnect(c), 0);
		assert_int_equal(wait_ev(eqh, &ev, "get of a disconnected connection"), -ENOTCONN);
		assert_int_equal(coffer_event_fini(&ev), 0);
		assert_int_equal(coffer_eq_destroy(eqh, 0), 0);
		rel_sleep_us(round % 3 ? COLD_GAP_US : 0);
		snprintf(what, sizeof(what), "round %d: the other connection", round);
		contains_on(keep, keq, 8000000 + (uint64_t)round, what);
	}
	assert_int_equal(coffer_eq_destroy(keq, 0), 0);
	assert_int_equal(coffer_disconnect(keep), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_boundary_channels, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_idle_gaps, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_disconnect_while_cold, setup, teardown),
	};

	if (argc > 1)
		g_seconds = atol(argv[1]);
	g_seed = argc > 2 ? strtoull(argv[2], NULL, 0) : rel_seed();
	signal(SIGPIPE, SIG_IGN);
	atexit(kill_live_store);
	if (__sanitizer_set_death_callback)
		__sanitizer_set_death_callback(kill_live_store);
	assert_int_equal(coffer_init(), 0);
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	(void)coffer_fini();
	return rc;
}
