/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/store/no_caps.c - linked into coffer-store-nocaps: before main() the store drops
 * CAP_SYS_ADMIN and CAP_SYS_RESOURCE (effective, permitted, inheritable), so that a test run
 * as root meets the limits a store of an ordinary user meets - here the kernel's bound on
 * file descriptors in flight over Unix sockets (ETOOMANYREFS past RLIMIT_NOFILE), which
 * either capability lifts (test_fds_in_flight in limits_test.c). Nothing else changes; a
 * store run without those capabilities is not affected.
 */
#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

__attribute__((constructor)) static void drop_caps(void)
{
	static const int caps[] = {CAP_SYS_ADMIN, CAP_SYS_RESOURCE};
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];

	if (syscall(SYS_capget, &h, d) != 0)
		return;
	for (unsigned int i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		unsigned int w = (unsigned int)caps[i] / 32, bit = 1u << (caps[i] % 32);

		d[w].effective &= ~bit;
		d[w].permitted &= ~bit;
		d[w].inheritable &= ~bit;
	}
	(void)syscall(SYS_capset, &h, d);
}
