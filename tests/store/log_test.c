/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/store/log_test.c - the store log's rate limit (tools/log.h) in-process: a burst is
 * printed, the rest of the window is dropped and counted, and the first line of the next
 * window reports the count; separate call sites do not share a budget.
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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_burst_then_drop),
	    cmocka_unit_test(test_sites_independent_and_time_zero),
	    cmocka_unit_test(test_quiet_site_never_drops),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
