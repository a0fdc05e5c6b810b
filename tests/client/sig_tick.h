/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/client/sig_tick.h - a thread that interrupts another with SIGUSR1 every 10 ms, for
 * the tests that show a control step keeps its deadline through signals (Linux fails a
 * blocking socket call that has SO_RCVTIMEO/SO_SNDTIMEO with EINTR on every caught signal,
 * SA_RESTART or not: signal(7)). Header-only: test_client and test_hostile are separate
 * programs.
 */
#ifndef COFFER_TESTS_SIG_TICK_H
#define COFFER_TESTS_SIG_TICK_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <unistd.h>

/* Interrupts @target with SIGUSR1 every 10 ms until @done, at most 1000 times (10 s). */
struct sig_tick {
	pthread_t target;
	atomic_int done; /* the call under test returned */
	int sent;	 /* signals sent */
	bool ran_out;	 /* the signaller stopped before the call returned */
};

/* A SIGUSR1 handler that does nothing (install it without SA_RESTART). */
static inline void sig_tick_handler(int sig)
{
	(void)sig;
}

/* The signaller's thread body (pthread_create(..., sig_tick_main, struct sig_tick *)). */
static inline void *sig_tick_main(void *arg)
{
	struct sig_tick *s = arg;

	while (!atomic_load(&s->done)) {
		if (s->sent == 1000) {
			s->ran_out = true;
			break;
		}
		pthread_kill(s->target, SIGUSR1);
		s->sent++;
		usleep(10 * 1000);
	}
	return NULL;
}

#endif /* COFFER_TESTS_SIG_TICK_H */
