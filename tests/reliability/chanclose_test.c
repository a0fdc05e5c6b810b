/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/reliability/chanclose_test.c - a CHANNEL_CLOSE racing that channel's doorbell.
 *
 * Found by tools/fuzz.sh --target wire: when a CHANNEL_CLOSE and a ring of that channel's
 * request doorbell arrived in one epoll_wait() batch, the store handled the session's event
 * first - chan_close() freed the struct chan - and then dispatched the doorbell event, whose
 * data.ptr pointed into the freed struct: a heap use-after-free any client could trigger.
 * Doorbell events now point at the store, never at a channel (tools/store.c). The test: a
 * client rings the doorbell and closes the channel back to back, 3,000 times, while a
 * second client keeps the store busy so that events batch up; the store must stay alive and
 * stop cleanly (exit 0, which ASan's abort would break). It failed reliably in the ASan
 * build before the fix; a release build cannot detect the bug.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/reliability/relcommon.h"
#include "tests/store/rawclient.h"

static struct rc_store g_store;
static pid_t g_busy;

static int teardown(void **state)
{
	int status;

	(void)state;
	if (g_busy > 0) {
		kill(g_busy, SIGKILL);
		waitpid(g_busy, &status, 0);
		g_busy = 0;
	}
	if (g_store.pid > 0)
		(void)rc_store_stop(&g_store);
	memset(&g_store, 0, sizeof(g_store));
	return 0;
}

static void test_chan_close_with_doorbell_pending(void **state)
{
	struct rc_conn c;
	int i, status;

	(void)state;
	assert_int_equal(rc_store_start(&g_store, (const char *[]){"-m", "4M", NULL}), 0);
	g_busy = fork();
	assert_true(g_busy >= 0);
	if (g_busy == 0) { /* keeps the store's loop busy: its events batch up */
		struct rc_conn b;

		if (rc_connect(&b, g_store.sock) != 0)
			_exit(1);
		for (;;)
			(void)rc_contains(&b, 1);
	}
	assert_int_equal(rc_connect(&c, g_store.sock), 0);
	for (i = 0; i < 3000 && rc_store_alive(&g_store); i++) {
		unsigned char buf[64];
		struct coffer_msg_hdr h;
		struct coffer_chan_close cc = {0};
		struct rc_chan ch;
		uint64_t one = 1;

		if (rc_chan_open(&c, &ch, 0) != 0)
			break;
		cc.channel_id = ch.id;
		coffer__msg_hdr_init(&h, COFFER_MSG_CHANNEL_CLOSE, 0, sizeof(h) + sizeof(cc));
		memcpy(buf, &h, sizeof(h));
		memcpy(buf + sizeof(h), &cc, sizeof(cc));
		/* the message first, the doorbell right behind it: one epoll_wait() batch */
		if (rc_send_raw(&c, buf, sizeof(h) + sizeof(cc), NULL, 0) != 0)
			break;
		(void)!write(ch.req_efd, &one, sizeof(one));
		rc_chan_unmap(&ch);
		if (rc_recv_msg(&c, buf, sizeof(buf), NULL, NULL, 5000) <= 0)
			break;
	}
	printf("chan-close-uaf: %d close+doorbell rounds; store %s\n", i,
	       rc_store_alive(&g_store) ? "alive" : "DEAD");
	kill(g_busy, SIGKILL);
	waitpid(g_busy, &status, 0);
	g_busy = 0;
	rc_close(&c);
	assert_int_equal(i, 3000);
	assert_int_equal(rc_store_stop(&g_store), 0);
	memset(&g_store, 0, sizeof(g_store));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_chan_close_with_doorbell_pending, teardown),
	};

	if (getenv("COFFER_STORE_EXE") == NULL) {
		printf("skip: COFFER_STORE_EXE is not set\n");
		return 77;
	}
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
