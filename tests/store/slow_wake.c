/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/store/slow_wake.c - linked into coffer-store-slowwake (-Wl,--wrap=timer_settime): each
 * time the store arms a timer, its thread then stays away for 40 ms before going on, as a
 * store descheduled on a busy machine between arming its reply-doorbell timer and entering the
 * write it bounds (tools/store.c, wake_efd()). The timer's signal then arrives before the
 * write: a write that blocks must still be interrupted.
 */
#include <errno.h>
#include <time.h>

int __real_timer_settime(timer_t timer, int flags, const struct itimerspec *new_value,
			 struct itimerspec *old_value);
int __wrap_timer_settime(timer_t timer, int flags, const struct itimerspec *new_value,
			 struct itimerspec *old_value);

int __wrap_timer_settime(timer_t timer, int flags, const struct itimerspec *new_value,
			 struct itimerspec *old_value)
{
	int rc = __real_timer_settime(timer, flags, new_value, old_value);
	struct timespec until;

	if (rc != 0 || (new_value->it_value.tv_sec == 0 && new_value->it_value.tv_nsec == 0))
		return rc; /* disarmed: nothing to miss */
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_nsec += 40 * 1000 * 1000;
	if (until.tv_nsec >= 1000 * 1000 * 1000) {
		until.tv_nsec -= 1000 * 1000 * 1000;
		until.tv_sec++;
	}
	/* the timer's own signal ends the sleep early (EINTR): sleep on to the end */
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR)
		;
	return rc;
}
