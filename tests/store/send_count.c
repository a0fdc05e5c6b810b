/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/store/send_count.c - linked into coffer-store-sendcount (-Wl,--wrap=sendmsg): every
 * sendmsg(2) of the store that fails with EAGAIN (a client's socket full) writes the line
 * "coffer-test: send EAGAIN" to stderr, which the tests read from the store's log, so that
 * a test can count the sends the store makes into a socket it knows is full
 * (test_full_socket_no_send_per_delivery in store_test.c). Nothing else changes.
 */
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

ssize_t __real_sendmsg(int fd, const struct msghdr *msg, int flags);
ssize_t __wrap_sendmsg(int fd, const struct msghdr *msg, int flags);

ssize_t __wrap_sendmsg(int fd, const struct msghdr *msg, int flags)
{
	static const char line[] = "coffer-test: send EAGAIN\n";
	ssize_t n = __real_sendmsg(fd, msg, flags);

	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
		(void)!write(2, line, sizeof(line) - 1);
		errno = EAGAIN;
	}
	return n;
}
