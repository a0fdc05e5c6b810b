/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/store/rawclient.c - see rawclient.h. Single-threaded test helper.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/store/rawclient.h"

static const char *store_exe(void)
{
	const char *e = getenv("COFFER_STORE_EXE");

	return e != NULL ? e : "coffer-store";
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* Print the store's log (kept in the temporary directory) on our stderr. */
static void dump_log(const struct rc_store *s)
{
	char path[128], buf[512];
	ssize_t k;
	int fd;

	snprintf(path, sizeof(path), "%s/store.log", s->dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	while ((k = read(fd, buf, sizeof(buf))) > 0)
		(void)!write(2, buf, (size_t)k);
	close(fd);
}

/* 1 when the store's log holds a sanitizer report (UBSan does not change exit codes). */
static int log_has_sanitizer_report(const struct rc_store *s)
{
	char path[128], line[1024];
	int found = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/store.log", s->dir);
	f = fopen(path, "re");
	if (f == NULL)
		return 0;
	while (!found && fgets(line, sizeof(line), f) != NULL)
		found = strstr(line, "runtime error:") != NULL || strstr(line, "Sanitizer") != NULL;
	fclose(f);
	return found;
}

static void remove_dir(const struct rc_store *s)
{
	char path[128];

	snprintf(path, sizeof(path), "%s/store.log", s->dir);
	unlink(path);
	rmdir(s->dir);
}

int rc_store_start(struct rc_store *s, const char *const *args)
{
	const char *argv[32];
	char logpath[128], buf[4096];
	int n = 0, i, status, fd;
	long deadline;

	memset(s, 0, sizeof(*s));
	strcpy(s->dir, "/tmp/coffer-st-XXXXXX");
	if (mkdtemp(s->dir) == NULL)
		return -1;
	snprintf(s->sock, sizeof(s->sock), "%s/s.sock", s->dir);
	snprintf(logpath, sizeof(logpath), "%s/store.log", s->dir);
	argv[n++] = store_exe();
	argv[n++] = "-s";
	argv[n++] = s->sock;
	for (i = 0; args[i] != NULL && n < 30; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	s->pid = fork();
	if (s->pid < 0)
		return -1;
	if (s->pid == 0) {
		fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd >= 0 && fd != 2) {
			dup2(fd, 2);
			close(fd); /* the store must not inherit a stray fd */
		}
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	deadline = now_ms() + 10000;
	while (now_ms() < deadline) {
		ssize_t r = -1;

		fd = open(logpath, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			r = read(fd, buf, sizeof(buf) - 1);
			close(fd);
		}
		if (r > 0) {
			buf[r] = '\0';
			if (strstr(buf, "coffer-store: ready") != NULL)
				return 0;
		}
		if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
			dump_log(s);
			s->pid = 0;
			remove_dir(s);
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		}
		usleep(5000);
	}
	dump_log(s);
	kill(s->pid, SIGKILL);
	waitpid(s->pid, &status, 0);
	s->pid = 0;
	remove_dir(s);
	return -1;
}

int rc_store_alive(struct rc_store *s)
{
	int status;

	return s->pid > 0 && waitpid(s->pid, &status, WNOHANG) == 0;
}

int rc_store_stop(struct rc_store *s)
{
	int status, i;

	if (s->pid <= 0)
		return -1;
	kill(s->pid, SIGTERM);
	for (i = 0; i < 1000; i++) {
		if (waitpid(s->pid, &status, WNOHANG) == s->pid)
			break;
		usleep(10000);
	}
	if (i == 1000) {
		kill(s->pid, SIGKILL);
		waitpid(s->pid, &status, 0);
		status = 0x100 * 99;
	}
	s->pid = 0;
	if (access(s->sock, F_OK) == 0) {
		unlink(s->sock);
		status = 0x100 * 98; /* the store must remove its socket */
	}
	if (log_has_sanitizer_report(s))
		status = 0x100 * 97;
	if (status != 0 || getenv("COFFER_TEST_VERBOSE") != NULL)
		dump_log(s);
	remove_dir(s);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int rc_run_exit(const char *const *args)
{
	const char *argv[32];
	int n = 0, i, status;
	pid_t pid;

	argv[n++] = store_exe();
	for (i = 0; args[i] != NULL && n < 30; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	pid = fork();
	if (pid == 0) {
		int fd = open("/dev/null", O_WRONLY);

		dup2(fd, 2);
		dup2(fd, 1);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	for (i = 0; i < 1000; i++) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return 137;
}

int rc_connect_raw(struct rc_conn *c, const char *sock)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	memset(c, 0, sizeof(*c));
	c->next_tag = 1;
	c->bell_efd = -1;
	c->index_fd = -1;
	c->access_fd = -1;
	strncpy(sa.sun_path, sock, sizeof(sa.sun_path) - 1);
	c->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return -errno;
	if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		int e = -errno;

		close(c->fd);
		c->fd = -1;
		return e;
	}
	return 0;
}

int rc_send_raw(struct rc_conn *c, const void *buf, size_t len, const int *fds, unsigned int nfds)
{
	long n = coffer__send_fds(c->fd, buf, len, fds, nfds, 0);

	return n < 0 ? (int)n : 0;
}

long rc_recv_msg(struct rc_conn *c, void *buf, size_t cap, int *fds, unsigned int *nfds,
		 int timeout_ms)
{
	struct pollfd p = {.fd = c->fd, .events = POLLIN};
	unsigned int dummy;
	long n;

	if (poll(&p, 1, timeout_ms) == 0)
		return -ETIMEDOUT;
	n = coffer__recv_fds(c->fd, buf, cap, fds, nfds != NULL ? nfds : &dummy,
			     fds != NULL ? COFFER_MSG_FDS_MAX : 0, 0);
	if (n == -ECONNRESET)
		return 0;
	return n;
}

long rc_flood(struct rc_conn *c, const void *msg, size_t len, int fd, int quiet_ms)
{
	long sent = 0;

	for (;;) {
		struct pollfd p = {.fd = c->fd, .events = POLLOUT};
		long rc = coffer__send_fds(c->fd, msg, len, &fd, fd >= 0 ? 1 : 0, MSG_DONTWAIT);

		if (rc == (long)len) {
			sent++;
			continue;
		}
		if (rc != -EAGAIN)
			return rc < 0 ? rc : -EIO;
		if (poll(&p, 1, quiet_ms) == 0)
			return sent;
	}
}

static void rc_unmap_index(struct rc_conn *c)
{
	if (c->index != NULL)
		munmap((void *)c->index, (size_t)c->index_slots * sizeof(struct coffer_index_slot));
	c->index = NULL;
	if (c->index_fd >= 0)
		close(c->index_fd);
	c->index_fd = -1;
	if (c->access != NULL)
		munmap(c->access, (size_t)coffer__access_bytes(c->index_slots));
	c->access = NULL;
	if (c->access_fd >= 0)
		close(c->access_fd);
	c->access_fd = -1;
}

int rc_connect(struct rc_conn *c, const char *sock)
{
	unsigned char buf[256];
	struct coffer_msg_hdr h;
	struct coffer_hello_reply r;
	int fds[COFFER_MSG_FDS_MAX];
	unsigned int nfds = 0;
	long n;
	int rc = rc_connect_raw(c, sock);

	if (rc != 0)
		return rc;
	coffer__msg_hdr_init(&h, COFFER_MSG_HELLO, 0, sizeof(h));
	rc = rc_send_raw(c, &h, sizeof(h), NULL, 0);
	if (rc != 0)
		goto fail;
	n = rc_recv_msg(c, buf, sizeof(buf), fds, &nfds, 5000);
	if (n <= 0 || coffer__msg_check(buf, (size_t)n, &h) != 0 ||
	    h.type != COFFER_MSG_HELLO_REPLY || nfds != 5) {
		rc = -EPROTO;
		while (nfds > 0)
			close(fds[--nfds]);
		goto fail;
	}
	c->bell_efd = fds[2];
	c->index_fd = fds[3];
	c->access_fd = fds[4];
	c->doorbell =
	    mmap(NULL, COFFER_DOORBELL_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fds[1], 0);
	close(fds[1]);
	if (c->doorbell == MAP_FAILED) {
		c->doorbell = NULL;
		close(fds[0]);
		rc = -ENOMEM;
		goto fail;
	}
	memcpy(&r, buf + sizeof(h), sizeof(r));
	c->arena_bytes = r.arena_bytes;
	c->segment = r.segment;
	c->hugepages = (int)r.hugepages;
	c->arena = mmap(NULL, r.arena_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
	close(fds[0]);
	if (c->arena == MAP_FAILED) {
		c->arena = NULL;
		rc = -ENOMEM;
		goto fail;
	}
	c->index_slots = r.index_slots;
	c->index_seed = r.index_seed;
	c->index = mmap(NULL, (size_t)r.index_slots * sizeof(struct coffer_index_slot), PROT_READ,
			MAP_SHARED, c->index_fd, 0);
	if (c->index == MAP_FAILED) {
		c->index = NULL;
		rc = -ENOMEM;
		goto fail;
	}
	c->access = mmap(NULL, (size_t)coffer__access_bytes(r.index_slots), PROT_READ | PROT_WRITE,
			 MAP_SHARED, c->access_fd, 0);
	if (c->access == MAP_FAILED) {
		c->access = NULL;
		rc = -ENOMEM;
		goto fail;
	}
	{
		/* One round trip: the store closes its copy of the doorbell page's fd just after
		 * sending HELLO_REPLY, and tests count its fds as soon as we return. */
		struct coffer_store_info info;

		rc = rc_query(c, &info);
		if (rc != 0)
			goto fail;
	}
	return 0;
fail:
	rc_unmap_index(c);
	if (c->arena != NULL)
		munmap(c->arena, c->arena_bytes);
	c->arena = NULL;
	if (c->doorbell != NULL)
		munmap(c->doorbell, COFFER_DOORBELL_BYTES);
	c->doorbell = NULL;
	if (c->bell_efd >= 0)
		close(c->bell_efd);
	c->bell_efd = -1;
	close(c->fd);
	c->fd = -1;
	return rc;
}

void rc_close(struct rc_conn *c)
{
	rc_unmap_index(c);
	if (c->arena != NULL)
		munmap(c->arena, c->arena_bytes);
	if (c->doorbell != NULL)
		munmap(c->doorbell, COFFER_DOORBELL_BYTES);
	if (c->fd >= 0)
		close(c->fd);
	if (c->bell_efd >= 0)
		close(c->bell_efd);
	c->bell_efd = -1;
	c->doorbell = NULL;
	c->arena = NULL;
	c->fd = -1;
}

void rc_oid(uint8_t oid[COFFER_OID_SIZE], uint64_t n)
{
	memset(oid, 0, COFFER_OID_SIZE);
	memcpy(oid, &n, sizeof(n));
	if (n != 0)
		oid[19] = 0xc0;
}

void rc_req_init(struct rc_conn *c, struct coffer_req *r, uint16_t op, uint64_t oidn)
{
	memset(r, 0, sizeof(*r));
	r->tag = c->next_tag++;
	r->op = op;
	rc_oid(r->oid, oidn);
}

int rc_recv_reps(struct rc_conn *c, struct coffer_rep *reps, unsigned int nrep, int timeout_ms)
{
	unsigned char buf[COFFER_MSG_MAX_BYTES + 64];
	unsigned int got = 0;
	long deadline = now_ms() + timeout_ms;

	while (got < nrep) {
		struct coffer_msg_hdr h;
		long left = deadline - now_ms(), n;

		if (left < 0)
			return -ETIMEDOUT;
		n = rc_recv_msg(c, buf, sizeof(buf), NULL, NULL, (int)left);
		if (n == -ETIMEDOUT)
			return -ETIMEDOUT;
		if (n == 0)
			return -ECONNRESET;
		if (n < 0)
			return (int)n;
		if (coffer__msg_check(buf, (size_t)n, &h) != 0)
			return -EPROTO;
		if (h.type == COFFER_MSG_ERROR)
			return -EPROTO;
		if (h.type != COFFER_MSG_REPLY || got + h.count > nrep)
			return -EPROTO;
		memcpy(&reps[got], buf + sizeof(h), h.count * sizeof(struct coffer_rep));
		got += h.count;
	}
	return (int)got;
}

int rc_batch(struct rc_conn *c, const struct coffer_req *reqs, unsigned int n,
	     struct coffer_rep *reps, unsigned int nrep, int timeout_ms)
{
	unsigned char buf[COFFER_MSG_MAX_BYTES];
	struct coffer_msg_hdr h;
	size_t len = sizeof(h) + n * sizeof(struct coffer_req);
	int rc;

	if (n == 0 || n > COFFER_MSG_BATCH_MAX)
		return -EINVAL;
	coffer__msg_hdr_init(&h, COFFER_MSG_REQUEST, n, (uint32_t)len);
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), reqs, n * sizeof(struct coffer_req));
	rc = rc_send_raw(c, buf, len, NULL, 0);
	if (rc != 0)
		return rc;
	if (nrep == 0)
		return 0;
	return rc_recv_reps(c, reps, nrep, timeout_ms);
}

static int one(struct rc_conn *c, struct coffer_req *r, struct coffer_rep *rep, int timeout_ms)
{
	int rc = rc_batch(c, r, 1, rep, 1, timeout_ms);

	if (rc < 0)
		return rc;
	if (rep->tag != r->tag)
		return -EBADMSG;
	return rep->status;
}

int rc_create(struct rc_conn *c, uint64_t oidn, uint64_t size, unsigned int flags, void **data)
{
	struct coffer_req r;
	struct coffer_rep rep;
	int rc;

	rc_req_init(c, &r, COFFER_OP_CREATE, oidn);
	r.size = size;
	r.flags = (uint16_t)flags;
	rc = one(c, &r, &rep, 5000);
	if (rc == 0 && data != NULL) {
		if (rep.segment != c->segment || rep.offset + size > c->arena_bytes)
			return -EFAULT;
		*data = (char *)c->arena + rep.offset;
	}
	return rc;
}

int rc_seal(struct rc_conn *c, uint64_t oidn, unsigned int flags)
{
	struct coffer_req r;
	struct coffer_rep rep;

	rc_req_init(c, &r, COFFER_OP_SEAL, oidn);
	r.flags = (uint16_t)flags;
	return one(c, &r, &rep, 5000);
}

int rc_abort(struct rc_conn *c, uint64_t oidn)
{
	struct coffer_req r;
	struct coffer_rep rep;

	rc_req_init(c, &r, COFFER_OP_ABORT, oidn);
	return one(c, &r, &rep, 5000);
}

int rc_get(struct rc_conn *c, uint64_t oidn, int64_t timeout_us, const void **data, uint64_t *size)
{
	struct coffer_req r;
	struct coffer_rep rep;
	int rc;

	rc_req_init(c, &r, COFFER_OP_GET, oidn);
	r.timeout_us = timeout_us;
	rc = one(c, &r, &rep, timeout_us < 0 ? 60000 : (int)(timeout_us / 1000) + 5000);
	if (rc == 0) {
		if (rep.segment != c->segment || rep.offset + rep.size > c->arena_bytes)
			return -EFAULT;
		if (data != NULL)
			*data = (char *)c->arena + rep.offset;
		if (size != NULL)
			*size = rep.size;
	}
	return rc;
}

int rc_release(struct rc_conn *c, uint64_t oidn)
{
	struct coffer_req r;
	struct coffer_rep rep;

	rc_req_init(c, &r, COFFER_OP_RELEASE, oidn);
	return one(c, &r, &rep, 5000);
}

int rc_delete(struct rc_conn *c, uint64_t oidn)
{
	struct coffer_req r;
	struct coffer_rep rep;

	rc_req_init(c, &r, COFFER_OP_DELETE, oidn);
	return one(c, &r, &rep, 5000);
}

int rc_contains(struct rc_conn *c, uint64_t oidn)
{
	struct coffer_req r;
	struct coffer_rep rep;
	int rc;

	rc_req_init(c, &r, COFFER_OP_CONTAINS, oidn);
	rc = one(c, &r, &rep, 5000);
	return rc < 0 ? rc : (int)rep.size;
}

int rc_put(struct rc_conn *c, uint64_t oidn, uint64_t size, int fill)
{
	void *p;
	int rc = rc_create(c, oidn, size, 0, &p);

	if (rc != 0)
		return rc;
	memset(p, fill, size);
	return rc_seal(c, oidn, COFFER_SEAL_RELEASE);
}

int rc_query(struct rc_conn *c, struct coffer_store_info *info)
{
	unsigned char buf[256];
	struct coffer_msg_hdr h;
	long n;
	int rc;

	coffer__msg_hdr_init(&h, COFFER_MSG_QUERY, 0, sizeof(h));
	rc = rc_send_raw(c, &h, sizeof(h), NULL, 0);
	if (rc != 0)
		return rc;
	n = rc_recv_msg(c, buf, sizeof(buf), NULL, NULL, 5000);
	if (n <= 0)
		return n == 0 ? -ECONNRESET : (int)n;
	if (coffer__msg_check(buf, (size_t)n, &h) != 0 || h.type != COFFER_MSG_QUERY_REPLY)
		return -EPROTO;
	memcpy(info, buf + sizeof(h), sizeof(*info));
	return 0;
}

int rc_query_path(const char *sock, struct coffer_store_info *info)
{
	struct rc_conn c;
	int rc = rc_connect_raw(&c, sock);

	if (rc != 0)
		return rc;
	rc = rc_query(&c, info);
	rc_close(&c);
	return rc;
}

int rc_chan_open(struct rc_conn *c, struct rc_chan *ch, uint32_t entries)
{
	unsigned char buf[256];
	struct coffer_msg_hdr h;
	struct coffer_chan_open o = {.ring_entries = entries};
	struct coffer_chan_open_reply r;
	int fds[COFFER_MSG_FDS_MAX];
	unsigned int nfds = 0;
	long n;
	int efd, rc;

	memset(ch, 0, sizeof(*ch));
	ch->c = c;
	efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (efd < 0)
		return -errno;
	coffer__msg_hdr_init(&h, COFFER_MSG_CHANNEL_OPEN, 0, sizeof(h) + sizeof(o));
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), &o, sizeof(o));
	rc = rc_send_raw(c, buf, sizeof(h) + sizeof(o), &efd, 1);
	if (rc != 0) {
		close(efd);
		return rc;
	}
	n = rc_recv_msg(c, buf, sizeof(buf), fds, &nfds, 5000);
	if (n <= 0 || coffer__msg_check(buf, (size_t)n, &h) != 0) {
		close(efd);
		return n == 0 ? -ECONNRESET : -EPROTO;
	}
	if (h.type == COFFER_MSG_ERROR) {
		struct coffer_msg_error e;

		memcpy(&e, buf + sizeof(h), sizeof(e));
		close(efd);
		return e.status < 0 ? e.status : -EPROTO;
	}
	if (h.type != COFFER_MSG_CHANNEL_OPEN_REPLY || nfds != 1) {
		while (nfds > 0)
			close(fds[--nfds]);
		close(efd);
		return -EPROTO;
	}
	memcpy(&r, buf + sizeof(h), sizeof(r));
	ch->map = mmap(NULL, r.shm_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
	close(fds[0]);
	if (ch->map == MAP_FAILED) {
		close(efd);
		return -ENOMEM;
	}
	ch->req_efd = fcntl(c->bell_efd, F_DUPFD_CLOEXEC, 0);
	if (ch->req_efd < 0) {
		rc = -errno;
		munmap(ch->map, r.shm_bytes);
		close(efd);
		return rc;
	}
	ch->map_bytes = r.shm_bytes;
	ch->id = r.channel_id;
	ch->entries = r.ring_entries;
	ch->shm = ch->map;
	ch->reqs = (struct coffer_req *)((char *)ch->map + r.req_off);
	ch->reps = (struct coffer_rep *)((char *)ch->map + r.rep_off);
	ch->rep_efd = efd;
	return 0;
}

void rc_chan_unmap(struct rc_chan *ch)
{
	if (ch->map != NULL)
		munmap(ch->map, ch->map_bytes);
	close(ch->req_efd);
	close(ch->rep_efd);
	ch->map = NULL;
}

int rc_chan_close(struct rc_chan *ch)
{
	unsigned char buf[256];
	struct coffer_msg_hdr h;
	struct coffer_chan_close cc = {.channel_id = ch->id};
	long n;
	int rc;

	coffer__msg_hdr_init(&h, COFFER_MSG_CHANNEL_CLOSE, 0, sizeof(h) + sizeof(cc));
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), &cc, sizeof(cc));
	rc = rc_send_raw(ch->c, buf, sizeof(h) + sizeof(cc), NULL, 0);
	rc_chan_unmap(ch);
	if (rc != 0)
		return rc;
	n = rc_recv_msg(ch->c, buf, sizeof(buf), NULL, NULL, 5000);
	if (n <= 0 || coffer__msg_check(buf, (size_t)n, &h) != 0 ||
	    h.type != COFFER_MSG_CHANNEL_CLOSE_REPLY)
		return -EPROTO;
	return 0;
}

int rc_chan_submit(struct rc_chan *ch, const struct coffer_req *reqs, unsigned int n)
{
	uint32_t cons = __atomic_load_n(&ch->shm->req.cons, __ATOMIC_ACQUIRE);
	unsigned int i;
	uint64_t one = 1;

	if (ch->entries - (ch->prod - cons) < n)
		return -EAGAIN;
	for (i = 0; i < n; i++)
		memcpy(&ch->reqs[(ch->prod + i) & (ch->entries - 1)], &reqs[i], sizeof(reqs[i]));
	ch->prod += n;
	__atomic_store_n(&ch->shm->req.prod, ch->prod, __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (!ch->c->no_doorbell)
		coffer__doorbell_ring(ch->c->doorbell, ch->id);
	if (__atomic_load_n(&ch->c->doorbell->store_sleeping, __ATOMIC_SEQ_CST))
		(void)!write(ch->req_efd, &one, sizeof(one));
	return 0;
}

int rc_chan_taken(struct rc_chan *ch, int timeout_ms)
{
	long deadline = now_ms() + timeout_ms;

	while (__atomic_load_n(&ch->shm->req.cons, __ATOMIC_ACQUIRE) != ch->prod) {
		if (now_ms() >= deadline)
			return -ETIMEDOUT;
		usleep(1000);
	}
	return 0;
}

int rc_chan_wait(struct rc_chan *ch, struct coffer_rep *reps, unsigned int n, int timeout_ms)
{
	long deadline = now_ms() + timeout_ms;
	unsigned int got = 0;

	while (got < n) {
		uint32_t prod = __atomic_load_n(&ch->shm->rep.prod, __ATOMIC_ACQUIRE);
		struct pollfd p[2] = {{.fd = ch->rep_efd, .events = POLLIN},
				      {.fd = ch->c->fd, .events = POLLIN}};
		uint64_t v;

		while (ch->cons != prod && got < n) {
			memcpy(&reps[got++], &ch->reps[ch->cons & (ch->entries - 1)],
			       sizeof(*reps));
			ch->cons++;
		}
		__atomic_store_n(&ch->shm->rep.cons, ch->cons, __ATOMIC_RELEASE);
		if (got == n)
			break;
		__atomic_store_n(&ch->shm->rep.consumer_sleeping, 1, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		if (__atomic_load_n(&ch->shm->rep.prod, __ATOMIC_ACQUIRE) == ch->cons) {
			long left = deadline - now_ms();

			if (left <= 0) {
				__atomic_store_n(&ch->shm->rep.consumer_sleeping, 0,
						 __ATOMIC_RELAXED);
				break;
			}
			(void)poll(p, 2, (int)left);
			if (p[1].revents & (POLLHUP | POLLERR | POLLIN)) {
				/* The socket only speaks on errors here: stop waiting. */
				__atomic_store_n(&ch->shm->rep.consumer_sleeping, 0,
						 __ATOMIC_RELAXED);
				break;
			}
			(void)!read(ch->rep_efd, &v, sizeof(v));
		}
		__atomic_store_n(&ch->shm->rep.consumer_sleeping, 0, __ATOMIC_RELAXED);
	}
	return (int)got;
}

int rc_count_fds(pid_t pid)
{
	char path[64];
	struct dirent *d;
	int n = 0;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	dir = opendir(path);
	if (dir == NULL)
		return -1;
	while ((d = readdir(dir)) != NULL)
		if (d->d_name[0] != '.')
			n++;
	closedir(dir);
	return n;
}

long rc_cpu_ticks(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long ut = 0, st = 0;
	FILE *f;
	int i;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (f == NULL)
		return -1;
	if (fgets(buf, sizeof(buf), f) == NULL) {
		fclose(f);
		return -1;
	}
	fclose(f);
	p = strrchr(buf, ')');
	if (p == NULL)
		return -1;
	/* fields after ')': 3 state ... 14 utime 15 stime */
	for (i = 0; i < 11 && p != NULL; i++)
		p = strchr(p + 1, ' ');
	if (p == NULL || sscanf(p, " %lu %lu", &ut, &st) != 2)
		return -1;
	return (long)(ut + st);
}
