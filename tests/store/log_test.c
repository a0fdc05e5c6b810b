/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/store/log_test.c - the store log's rate limit (tools/log.h) in-process: a burst is
 * printed, the rest of the window is dropped and counted, and the first line of the next
 * window reports the count; separate call sites do not share a budget; a flood that ends is
 * reported by the flush.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tools/log.h"

static void test_burst_then_drop(void **state)
{
	struct coffer__log_rl rl = {0};
	const uint64_t t0 = 123456789;

	(void)state;
	for (int i = 0; i < COFFER_LOG_RL_BURST; i++)
		assert_int_equal(coffer__log_rl_check(&rl, t0 + (uint64_t)i), 0);
	for (int i = 0; i < 37; i++)
		assert_int_equal(coffer__log_rl_check(&rl, t0 + 1000 + (uint64_t)i), -1);
	/* still inside the window */
	assert_int_equal(coffer__log_rl_check(&rl, t0 + COFFER_LOG_RL_WINDOW_US - 1), -1);
	/* next window: the first line carries the 38 dropped ones, the count restarts */
	assert_int_equal(coffer__log_rl_check(&rl, t0 + COFFER_LOG_RL_WINDOW_US), 38);
	assert_int_equal(coffer__log_rl_check(&rl, t0 + COFFER_LOG_RL_WINDOW_US + 1), 0);
}

static void test_sites_independent_and_time_zero(void **state)
{
	struct coffer__log_rl a = {0}, b = {0};

	(void)state;
	/* a clock reading of 0 is an ordinary time */
	for (int i = 0; i < COFFER_LOG_RL_BURST; i++)
		assert_int_equal(coffer__log_rl_check(&a, 0), 0);
	assert_int_equal(coffer__log_rl_check(&a, 0), -1);
	assert_int_equal(coffer__log_rl_check(&b, 0), 0);
	assert_int_equal(coffer__log_rl_check(&a, COFFER_LOG_RL_WINDOW_US), 1);
}

static void test_quiet_site_never_drops(void **state)
{
	struct coffer__log_rl rl = {0};

	(void)state;
	/* one line a second for a minute: never over the burst */
	for (uint64_t s = 1; s <= 60; s++)
		assert_int_equal(coffer__log_rl_check(&rl, s * 1000000u), 0);
}

/* A flood that ends leaves its count: coffer__log_rl_flush() reports it once the window is
 * over (and the store sleeps no longer than coffer__log_rl_deadline()); -vv drops nothing. */
static void test_flush_after_flood(void **state)
{
	static struct coffer__log_rl rl;
	uint64_t dl;

	(void)state;
	coffer__log_level = COFFER_LOG_WARN;
	assert_int_equal(coffer__log_rl_deadline(), UINT64_MAX);
	for (int i = 0; i < COFFER_LOG_RL_BURST + 7; i++)
		coffer__log_rl(&rl, COFFER_LOG_WARN, "flood line %d", i);
	assert_int_equal(rl.suppressed, 7);
	dl = coffer__log_rl_deadline();
	assert_int_equal(dl, rl.window_start_us + COFFER_LOG_RL_WINDOW_US);
	coffer__log_rl_flush(dl - 1); /* window not over: nothing yet */
	assert_int_equal(rl.suppressed, 7);
	coffer__log_rl_flush(dl); /* logs "(7 similar messages suppressed: flood line %d)" */
	assert_int_equal(rl.suppressed, 0);
	assert_int_equal(coffer__log_rl_deadline(), UINT64_MAX);
	/* debug level: every line is logged, none counted */
	coffer__log_level = COFFER_LOG_DEBUG;
	for (int i = 0; i < 3 * COFFER_LOG_RL_BURST; i++)
		coffer__log_rl(&rl, COFFER_LOG_WARN, "flood line %d", i);
	assert_int_equal(rl.suppressed, 0);
	coffer__log_level = COFFER_LOG_NOTICE;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_burst_then_drop),
	    cmocka_unit_test(test_sites_independent_and_time_zero),
	    cmocka_unit_test(test_quiet_site_never_drops),
	    cmocka_unit_test(test_flush_after_flood),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
