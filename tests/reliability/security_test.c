/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/reliability/security_test.c - what a client may and may not do to the store.
 *
 *  - socket-mode: the socket is created 0600 by default, 0660 with --socket-mode=0660.
 *  - other-uid (root only, else skipped): with the socket's and directory's permissions
 *    opened up by root (so that only the store's own check stands), a client running as
 *    uid/gid 65534 gets one ERROR -EACCES and is closed, without the arena fd, on a 0600
 *    store (and coffer_connect() returns -EACCES); on a --socket-mode=0660 store a
 *    uid-65534 client of the store's group (primary or supplementary) is served, and one of
 *    another group is still refused.
 *  - holds-only: a client can seal, abort or release only what it holds, on the socket
 *    and through a ring (-EPERM / -ENOENT), and its failed attempts change nothing for the
 *    holders (a deferred delete still waits for the real holder's release).
 *  - offsets: a random workload of 3 clients (socket and ring, create/replace/seal/get/
 *    release/delete/abort, 0 bytes to 256 KiB) - every successful reply names the arena's
 *    segment, lies inside the arena, and never overlaps an object a client still holds.
 *  - maps: the store's shared mappings are exactly the memfds it created and handed out
 *    (arena, channel segments); a memfd a client offers (as a doorbell) is refused and
 *    never mapped; client eventfds are never mapped.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <coffer/coffer.h>

#include "tests/reliability/relcommon.h"
#include "tests/store/rawclient.h"

static struct rc_store g_store;

static int teardown(void **state)
{
	(void)state;
	if (g_store.pid > 0)
		(void)rc_store_stop(&g_store);
	memset(&g_store, 0, sizeof(g_store));
	return 0;
}

static void start(const char *const *args)
{
	assert_int_equal(rc_store_start(&g_store, args), 0);
}

static void stop(void)
{
	assert_int_equal(rc_store_stop(&g_store), 0);
	memset(&g_store, 0, sizeof(g_store));
}

/* ------------------------------------------------------------------ socket mode, uids */

static void test_socket_mode(void **state)
{
	struct stat sb;

	(void)state;
	start((const char *[]){"-m", "1M", NULL});
	assert_int_equal(lstat(g_store.sock, &sb), 0);
	assert_true(S_ISSOCK(sb.st_mode));
	assert_int_equal(sb.st_mode & 07777, 0600);
	stop();
	start((const char *[]){"-m", "1M", "--socket-mode=0660", NULL});
	assert_int_equal(lstat(g_store.sock, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0660);
	stop();
}

/*
 * In a child: become @uid/@gid and try a full HELLO. Exit status: 0 refused cleanly (at most
 * one ERROR -EACCES, then closed, no fd; and coffer_connect() says -EACCES), 1 served
 * (HELLO_REPLY with the arena fd), 3 could not switch, 2 or 4..6 something else (each exit
 * names the step that went wrong).
 */
static int as_other_groups(uid_t uid, gid_t gid, size_t ngroups, const gid_t *groups)
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		unsigned char buf[256];
		struct coffer_msg_hdr h;
		int fds[COFFER_MSG_FDS_MAX];
		unsigned int nfds = 0;
		struct rc_conn c;
		long n;

		if (setgroups(ngroups, groups) != 0 || setgid(gid) != 0 || setuid(uid) != 0)
			_exit(3);
		if (rc_connect_raw(&c, g_store.sock) != 0)
			_exit(2); /* the file system let us in: connect itself must work */
		coffer__msg_hdr_init(&h, COFFER_MSG_HELLO, 0, sizeof(h));
		(void)rc_send_raw(&c, &h, sizeof(h), NULL, 0);
		n = rc_recv_msg(&c, buf, sizeof(buf), fds, &nfds, 5000);
		if (n > 0 && nfds == 0 && coffer__msg_check(buf, (size_t)n, &h) == 0 &&
		    h.type == COFFER_MSG_ERROR) {
			struct coffer_msg_error e;
			coffer_handle_t ch;

			memcpy(&e, buf + sizeof(h), sizeof(e));
			if (e.status != -EACCES)
				_exit(4);
			n = rc_recv_msg(&c, buf, sizeof(buf), fds, &nfds, 5000); /* then EOF */
			if (n > 0 || nfds != 0 || n == -ETIMEDOUT)
				_exit(5);
			_exit(coffer_connect(g_store.sock, &ch) == -EACCES ? 0 : 6);
		}
		if (n <= 0 && nfds == 0 && n != -ETIMEDOUT)
			_exit(0);
		if (n > 0 && coffer__msg_check(buf, (size_t)n, &h) == 0 &&
		    h.type == COFFER_MSG_HELLO_REPLY && nfds > 0)
			_exit(1);
		_exit(2);
	}
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

/* as_other_groups() without supplementary groups */
static int as_other(uid_t uid, gid_t gid)
{
	return as_other_groups(uid, gid, 0, NULL);
}

static void open_up_path(void)
{
	/* Root opens the file system path so that only the store's credential check stands. */
	assert_int_equal(chmod(g_store.dir, 0755), 0);
	assert_int_equal(chmod(g_store.sock, 0666), 0);
}

static void test_other_uid(void **state)
{
	int rc;

	(void)state;
	if (geteuid() != 0) {
		printf("other-uid: skipped: needs root to run a client as another uid\n");
		skip();
	}
	start((const char *[]){"-m", "1M", NULL});
	open_up_path();
	assert_int_equal(as_other(geteuid(), getegid()), 1); /* control: the store's user */
	rc = as_other(65534, 65534);
	if (rc == 3) {
		stop();
		printf("other-uid: skipped: cannot switch to uid 65534 here\n");
		skip();
	}
	assert_int_equal(rc, 0);			 /* another uid: closed, no arena fd */
	assert_int_equal(as_other(65534, getegid()), 0); /* the group alone is not enough */
	assert_true(rc_store_alive(&g_store));
	stop();

	/* Group access by option: the store's group is admitted, another group is not. */
	start((const char *[]){"-m", "1M", "--socket-mode=0660", NULL});
	open_up_path();
	assert_int_equal(as_other(65534, getegid()), 1);
	assert_int_equal(as_other(65534, 65534), 0);
	/* A member of the store's group through a supplementary group (usermod -aG) passes
	 * the socket's group bits, so the store admits it too (found refused by a new user). */
	assert_int_equal(as_other_groups(65534, 65534, 1, (gid_t[]){getegid()}), 1);
	assert_int_equal(as_other_groups(65534, 65534, 1, (gid_t[]){65533}), 0);
	stop();
}

/* ------------------------------------------------------------------ holds only */

static void test_holds_only(void **state)
{
	struct coffer_store_info i0, i1;
	struct rc_conn a, b, c;
	struct rc_chan ch;
	struct coffer_req r[3];
	struct coffer_rep rep[3];
	const void *d;
	uint64_t sz;
	void *p;
	int rc;

	(void)state;
	start((const char *[]){"-m", "4M", NULL});
	assert_int_equal(rc_connect(&a, g_store.sock), 0);
	assert_int_equal(rc_connect(&b, g_store.sock), 0);
	assert_int_equal(rc_connect(&c, g_store.sock), 0);
	assert_int_equal(rc_chan_open(&b, &ch, 0), 0);

	/* X unsealed, held by its creator a. */
	assert_int_equal(rc_create(&a, 1, 65536, 0, &p), 0);
	rel_fill(p, 65536, 1);
	assert_int_equal(rc_seal(&b, 1, 0), -EPERM);
	assert_int_equal(rc_abort(&b, 1), -EPERM);
	assert_int_equal(rc_release(&b, 1), -ENOENT);
	/* the same through b's ring */
	rc_req_init(&b, &r[0], COFFER_OP_SEAL, 1);
	rc_req_init(&b, &r[1], COFFER_OP_ABORT, 1);
	rc_req_init(&b, &r[2], COFFER_OP_RELEASE, 1);
	assert_int_equal(rc_chan_submit(&ch, r, 3), 0);
	assert_int_equal(rc_chan_wait(&ch, rep, 3, 5000), 3);
	assert_int_equal(rep[0].status, -EPERM);
	assert_int_equal(rep[1].status, -EPERM);
	assert_int_equal(rep[2].status, -ENOENT);
	/* nothing changed for a: it seals (and keeps its reference) */
	assert_int_equal(rc_seal(&a, 1, 0), 0);
	rc = rc_seal(&b, 1, 0); /* sealed now: "not yours" or "already sealed" */
	assert_true(rc == -EPERM || rc == -EALREADY);
	/* b holds nothing on X: release fails on both paths */
	assert_int_equal(rc_release(&b, 1), -ENOENT);
	rc_req_init(&b, &r[0], COFFER_OP_RELEASE, 1);
	assert_int_equal(rc_chan_submit(&ch, r, 1), 0);
	assert_int_equal(rc_chan_wait(&ch, rep, 1, 5000), 1);
	assert_int_equal(rep[0].status, -ENOENT);
	/* a drops its creator reference; c holds X; b gets once and releases twice */
	assert_int_equal(rc_release(&a, 1), 0);
	assert_int_equal(rc_release(&a, 1), -ENOENT);
	assert_int_equal(rc_get(&c, 1, 0, &d, &sz), 0);
	assert_int_equal(rc_get(&b, 1, 0, &d, &sz), 0);
	assert_int_equal(rc_release(&b, 1), 0);
	assert_int_equal(rc_release(&b, 1), -ENOENT);
	/* delete is deferred while c holds X: b's extra release must not have freed it */
	assert_int_equal(rc_query(&a, &i0), 0);
	assert_int_equal(rc_delete(&b, 1), 0);
	assert_int_equal(rc_query(&a, &i1), 0);
	assert_int_equal(i1.used_bytes, i0.used_bytes); /* still allocated for c */
	assert_int_equal(rel_verify(d, sz), 0);		/* and intact */
	assert_int_equal(rc_get(&b, 1, 0, &d, &sz), -ENOENT);
	assert_int_equal(rc_release(&c, 1), 0);
	assert_int_equal(rc_query(&a, &i1), 0);
	assert_int_equal(i1.used_bytes, 0);
	assert_int_equal(rc_chan_close(&ch), 0);
	rc_close(&a);
	rc_close(&b);
	rc_close(&c);
	stop();
}

/* ------------------------------------------------------------------ offsets */

#define OCLIENTS 3
#define OIDS	 24
#define OPS	 3000

struct held {
	uint64_t off, size; /* size 0: nothing */
	int refs;
};

struct oclient {
	struct rc_conn c;
	struct rc_chan ch;
	struct held h[OIDS + 1]; /* by id; one range per id (the latest this client holds) */
};

/* No held range of any client overlaps [off, off+size) (except an identical one: two
 * references to the same object). */
static void check_no_overlap(struct oclient *cl, uint64_t off, uint64_t size)
{
	int i, k;

	if (size == 0)
		return;
	for (i = 0; i < OCLIENTS; i++) {
		for (k = 0; k <= OIDS; k++) {
			struct held *h = &cl[i].h[k];

			if (h->refs > 0 && h->size > 0 && !(h->off == off && h->size == size) &&
			    off < h->off + h->size && h->off < off + size)
				fail_msg("[%llu, +%llu) overlaps a held object [%llu, +%llu)",
					 (unsigned long long)off, (unsigned long long)size,
					 (unsigned long long)h->off, (unsigned long long)h->size);
		}
	}
}

static void test_offsets_inside_arena(void **state)
{
	struct oclient *cl = calloc(OCLIENTS, sizeof(*cl));
	uint64_t s = rel_seed();
	uint64_t arena;
	int i, n, oks = 0;

	(void)state;
	assert_non_null(cl);
	start((const char *[]){"-m", "4M", NULL});
	for (i = 0; i < OCLIENTS; i++) {
		assert_int_equal(rc_connect(&cl[i].c, g_store.sock), 0);
		assert_int_equal(rc_chan_open(&cl[i].c, &cl[i].ch, 0), 0);
	}
	arena = cl[0].c.arena_bytes;
	for (n = 0; n < OPS; n++) {
		struct oclient *me = &cl[rel_rand(&s) % OCLIENTS];
		uint64_t id = 1 + rel_rand(&s) % OIDS;
		struct held *h = &me->h[id];
		struct coffer_req r;
		struct coffer_rep rep;
		int ring = (int)(rel_rand(&s) & 1), op;

		switch (rel_rand(&s) % 6) {
		case 0:
			op = COFFER_OP_CREATE;
			break;
		case 1:
			op = COFFER_OP_SEAL;
			break;
		case 2:
		case 3:
			op = COFFER_OP_GET;
			break;
		case 4:
			op = COFFER_OP_RELEASE;
			break;
		default:
			op = (rel_rand(&s) & 1) ? COFFER_OP_DELETE : COFFER_OP_ABORT;
		}
		if (h->refs > 0 && (op == COFFER_OP_CREATE || op == COFFER_OP_GET))
			op = COFFER_OP_RELEASE; /* keep one range per (client, id) */
		rc_req_init(&me->c, &r, (uint16_t)op, id);
		if (op == COFFER_OP_CREATE) {
			r.size = (rel_rand(&s) & 7) == 0 ? 0 : rel_rand(&s) % (256 * 1024);
			if (rel_rand(&s) & 1)
				r.flags = COFFER_CREATE_REPLACE;
		}
		if (op == COFFER_OP_SEAL)
			r.flags = COFFER_SEAL_RELEASE;
		if (ring) {
			assert_int_equal(rc_chan_submit(&me->ch, &r, 1), 0);
			assert_int_equal(rc_chan_wait(&me->ch, &rep, 1, 5000), 1);
		} else {
			assert_int_equal(rc_batch(&me->c, &r, 1, &rep, 1, 5000), 1);
		}
		assert_int_equal(rep.tag, r.tag);
		if (rep.status != 0)
			continue;
		oks++;
		if (op == COFFER_OP_CREATE || op == COFFER_OP_GET) {
			uint64_t size = op == COFFER_OP_CREATE ? r.size : rep.size;

			assert_int_equal(rep.segment, me->c.segment);
			assert_true(rep.offset <= arena && size <= arena - rep.offset);
			assert_int_equal(
			    coffer__rep_check(&rep, (uint16_t)op, me->c.segment, arena), 0);
			check_no_overlap(cl, rep.offset, size);
			h->off = rep.offset;
			h->size = size;
			h->refs = 1;
			if (size > 0 && op == COFFER_OP_GET)
				assert_int_equal(rel_verify((char *)me->c.arena + rep.offset, size),
						 0);
			if (size > 0 && op == COFFER_OP_CREATE)
				rel_fill((char *)me->c.arena + rep.offset, size, rel_rand(&s));
		} else if (op == COFFER_OP_RELEASE || op == COFFER_OP_SEAL ||
			   op == COFFER_OP_ABORT) {
			h->refs = 0; /* seal+release, release, abort: we hold it no more */
		}
	}
	printf("offsets: %d requests, %d succeeded; every offset and size inside the %llu-byte "
	       "arena, no overlap with a held object\n",
	       OPS, oks, (unsigned long long)arena);
	for (i = 0; i < OCLIENTS; i++) {
		rc_chan_unmap(&cl[i].ch);
		rc_close(&cl[i].c);
	}
	free(cl);
	stop();
}

/* ------------------------------------------------------------------ maps */

/* Inodes of the shared mappings of process @pid (perms with 's'), and their names. */
static int shared_inodes(pid_t pid, unsigned long *ino, char names[][96], int max)
{
	char path[64], line[512];
	int n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f) != NULL && n < max) {
		char perms[8], name[256] = "";
		unsigned long inode;

		if (sscanf(line, "%*s %7s %*s %*s %lu %255[^\n]", perms, &inode, name) < 2)
			continue;
		if (perms[3] != 's')
			continue;
		ino[n] = inode;
		name[95] = '\0'; /* the names we look for are short */
		memcpy(names[n], name, 96);
		n++;
	}
	fclose(f);
	return n;
}

static void test_store_maps_only_its_own(void **state)
{
	unsigned long sino[64], cino[64];
	char snames[64][96], cnames[64][96];
	struct rc_chan ch[3];
	struct rc_conn c;
	struct stat evil_st, efd_st;
	unsigned char buf[256];
	struct coffer_msg_hdr h;
	struct coffer_chan_open o = {0};
	int ns, nc, i, k, evil, efd;
	long n;

	(void)state;
	start((const char *[]){"-m", "2M", NULL});
	assert_int_equal(rc_connect(&c, g_store.sock), 0);
	for (i = 0; i < 3; i++)
		assert_int_equal(rc_chan_open(&c, &ch[i], 0), 0);
	/* Offer a 1 MiB memfd as a doorbell: refused (non-fatal), and never mapped. */
	evil = memfd_create("client-evil", MFD_CLOEXEC);
	assert_true(evil >= 0);
	assert_int_equal(ftruncate(evil, 1 << 20), 0);
	assert_int_equal(fstat(evil, &evil_st), 0);
	coffer__msg_hdr_init(&h, COFFER_MSG_CHANNEL_OPEN, 0, sizeof(h) + sizeof(o));
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), &o, sizeof(o));
	assert_int_equal(rc_send_raw(&c, buf, sizeof(h) + sizeof(o), &evil, 1), 0);
	n = rc_recv_msg(&c, buf, sizeof(buf), NULL, NULL, 5000);
	assert_true(n > 0);
	assert_int_equal(coffer__msg_check(buf, (size_t)n, &h), 0);
	assert_int_equal(h.type, COFFER_MSG_ERROR);
	efd = ch[0].rep_efd;
	assert_int_equal(fstat(efd, &efd_st), 0);

	ns = shared_inodes(g_store.pid, sino, snames, 64);
	nc = shared_inodes(getpid(), cino, cnames, 64);
	printf("maps: the store has %d shared mappings:", ns);
	for (i = 0; i < ns; i++)
		printf(" %s", snames[i]);
	printf("\n");
	/* the arena, three channel segments, the doorbell page, the object index, its access
	 * map */
	assert_int_equal(ns, 1 + 3 + 1 + 1 + 1);
	for (i = 0; i < ns; i++) {
		int handed_out = 0;

		assert_true(sino[i] != (unsigned long)evil_st.st_ino);
		assert_true(sino[i] != (unsigned long)efd_st.st_ino);
		assert_non_null(strstr(snames[i], "memfd:coffer-"));
		/* every store mapping is a segment it handed to the client */
		for (k = 0; k < nc; k++)
			handed_out |= cino[k] == sino[i] && strstr(cnames[k], "memfd:coffer-");
		assert_true(handed_out);
	}
	close(evil);
	for (i = 0; i < 3; i++)
		assert_int_equal(rc_chan_close(&ch[i]), 0);
	rc_close(&c);
	stop();
}

/*
 * The object index is the store's to write: every client gets a read-only descriptor of
 * it, so none can map it writable, make its mapping writable, or write through the fd, and
 * mislead the other clients' reads (coffer_obj_read_oid()).
 */
static void test_index_read_only(void **state)
{
	size_t bytes;
	struct rc_conn c;
	void *p;
	char b = 1;

	(void)state;
	start((const char *[]){"-m", "2M", NULL});
	assert_int_equal(rc_connect(&c, g_store.sock), 0);
	assert_true(c.index_slots >= 1024);
	assert_int_equal(c.index_slots & (c.index_slots - 1), 0);
	bytes = (size_t)c.index_slots * sizeof(struct coffer_index_slot);
	assert_int_equal(fcntl(c.index_fd, F_GETFL) & O_ACCMODE, O_RDONLY);
	errno = 0;
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, c.index_fd, 0);
	assert_true(p == MAP_FAILED);
	assert_int_equal(errno, EACCES);
	assert_int_equal(mprotect((void *)c.index, bytes, PROT_READ | PROT_WRITE), -1);
	assert_int_equal(errno, EACCES);
	assert_int_equal(pwrite(c.index_fd, &b, 1, 0), -1);
	assert_int_equal(errno, EBADF);
	assert_int_equal(ftruncate(c.index_fd, 0), -1);
	rc_close(&c);
	stop();
}

/*
 * The index's access map (v6) is writable by every client, so the store seals it before
 * the first one gets it: no client can shrink it (the store's own accesses would fault),
 * grow it, or change its seals. A client that marks every slot as read cannot stop
 * eviction: 2 MiB of puts into a 2 MiB store still evict, and the store stays up.
 */
static void test_access_map_sealed(void **state)
{
	struct coffer_store_info info;
	size_t bytes;
	struct rc_conn c;
	int seals;

	(void)state;
	start((const char *[]){"-m", "2M", NULL});
	assert_int_equal(rc_connect(&c, g_store.sock), 0);
	bytes = (size_t)coffer__access_bytes(c.index_slots);
	seals = fcntl(c.access_fd, F_GET_SEALS);
	assert_true(seals >= 0);
	assert_true((seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) ==
		    (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL));
	assert_int_equal(ftruncate(c.access_fd, 0), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(ftruncate(c.access_fd, (off_t)bytes * 2 + 65536), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(fcntl(c.access_fd, F_ADD_SEALS, F_SEAL_WRITE), -1);
	assert_int_equal(errno, EPERM);
	memset(c.access, 0xff, bytes);
	for (uint64_t i = 1; i <= 64; i++)
		assert_int_equal(rc_put(&c, i, 64 * 1024, (int)i), 0);
	assert_int_equal(rc_query(&c, &info), 0);
	assert_true(info.evictions > 0);
	assert_true(rc_store_alive(&g_store));
	rc_close(&c);
	stop();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_socket_mode, teardown),
	    cmocka_unit_test_teardown(test_other_uid, teardown),
	    cmocka_unit_test_teardown(test_holds_only, teardown),
	    cmocka_unit_test_teardown(test_offsets_inside_arena, teardown),
	    cmocka_unit_test_teardown(test_store_maps_only_its_own, teardown),
	    cmocka_unit_test_teardown(test_index_read_only, teardown),
	    cmocka_unit_test_teardown(test_access_map_sealed, teardown),
	};

	if (getenv("COFFER_STORE_EXE") == NULL) {
		printf("skip: COFFER_STORE_EXE is not set\n");
		return 77;
	}
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
