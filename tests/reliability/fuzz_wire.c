/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/reliability/fuzz_wire.c - libFuzzer target on the whole store as a client sees it:
 * the real event loop (coffer__store_run(), tools/store.c) runs in a thread of the fuzzer
 * for the whole session, and each input is one client connection that sends fuzzed socket
 * messages and writes fuzzed entries and indices into the channel rings the store gave it.
 * This reaches what fuzz_store.c cannot: message framing, HELLO / CHANNEL_OPEN / CLOSE /
 * QUERY handling, fd passing, ring index validation, reply queues and session teardown.
 * It depends only on coffer__store_run() and the wire protocol, not on the store's
 * internals.
 *
 * Input: byte 0 bit 0 = send HELLO first (most inputs want to get past it). Then frames,
 * header byte low 3 bits = kind, the rest an argument:
 *   0 raw message: u16 length + bytes, sent as one SOCK_SEQPACKET message; header bit 3:
 *     attach an eventfd, bit 4: attach a memfd (fds the store must close or refuse)
 *   1 CHANNEL_OPEN with ring_entries 1 << (arg % 14) (mostly invalid sizes too)
 *   2 ring entries: u8 n, n x 64 bytes written at the channel's prod, prod published,
 *     the channel's doorbell bit set unless header bit 5 (then the store's periodic sweep
 *     must find them)
 *   3 a raw u32 into one ring index (req.prod, rep.cons, either consumer_sleeping)
 *   4 read whatever the store sent (socket and reply rings), as a well-behaved client would
 *   5 CHANNEL_CLOSE of channel (arg & 3), also of ids never opened
 *   6 ring the store's doorbell of a channel (also right after closing it: the
 *     chan-close use-after-free this target found, tests/reliability/chanclose_test.c)
 *   7 a raw u64 into doorbell-page word (arg & 7) (bits of channels never opened too)
 *
 * Oracles (abort = finding; ASan/UBSan see inside the store thread too): every REPLY entry
 * and ring reply carries a status in [-4095, 0]; after the client disconnects the store
 * returns within 5 s to no client but the checker's own, no CREATED object and no waiting
 * get, and the process's open fd count is exactly what it was before the input (the store
 * shares this fd table: a socket, eventfd or memfd it leaks on any path shows here;
 * libFuzzer's own pipes and files are not counted).
 *
 * Built and run by tools/fuzz.sh (target "wire"); the store's state persists across inputs,
 * as a long-running store's does, so a finding may need its predecessors to reproduce
 * (libFuzzer keeps the crash input; rerun with the corpus for context).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#include "runtime/proto_util.h"
#include "tools/log.h"
#include "tools/shm.h"
#include "tools/store.h"

#define WIRE_ASSERT(c)                                                                             \
	do {                                                                                       \
		if (!(c)) {                                                                        \
			fprintf(stderr, "fuzz_wire: %s:%d: %s\n", __FILE__, __LINE__, #c);         \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

static struct coffer__store_cfg g_cfg;
static char g_dir[64], g_sock[108];
static int g_fds0;
static volatile int g_store_exited; /* written by the store thread only when it returns */
static pthread_t g_store_th;
static volatile pid_t g_store_tid;

/* From the sanitizer runtime when linked in (the fuzzing build); absent otherwise. */
extern void __sanitizer_print_stack_trace(void) __attribute__((weak));

struct wchan {
	int open;
	uint32_t id; /* the store's channel id */
	void *map;
	size_t bytes;
	struct coffer_chan_shm *shm;
	struct coffer_req *reqs;
	struct coffer_rep *reps;
	uint32_t entries, prod, cons;
	int req_efd, rep_efd;
};

/* Open fds of the kinds the store creates (sockets, eventfds, memfds, epoll, signalfd);
 * libFuzzer's own (pipes and files for its leak checks and corpus) do not count. */
static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	WIRE_ASSERT(d != NULL);
	while ((e = readdir(d)) != NULL) {
		char path[64], link[128];
		ssize_t k;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		k = readlink(path, link, sizeof(link) - 1);
		if (k <= 0)
			continue;
		link[k] = '\0';
		if (strncmp(link, "socket:", 7) == 0 || strncmp(link, "anon_inode:", 11) == 0 ||
		    strncmp(link, "/memfd:", 7) == 0)
			n++;
	}
	closedir(d);
	return n;
}

static int wire_connect(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	WIRE_ASSERT(fd >= 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", g_sock);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		return -errno;
	}
	return fd;
}

static void *store_thread(void *arg)
{
	(void)arg;
	g_store_tid = gettid();
	(void)coffer__store_run(&g_cfg);
	g_store_exited = 1;
	return NULL;
}

static void on_dump(int sig)
{
	(void)sig;
	if (__sanitizer_print_stack_trace != NULL)
		__sanitizer_print_stack_trace();
}

/* The store did not answer: say where its thread is (a finding needs more than "poll
 * timed out" to be fixed), then abort. */
static void store_stuck(const char *what)
{
	char cmd[256];

	fprintf(stderr, "fuzz_wire: store thread silent (%s); fds open %d; its state:\n", what,
		count_fds());
	snprintf(cmd, sizeof(cmd),
		 "for f in stat syscall wchan; do printf '%%s: ' $f; cat /proc/%d/task/%d/$f; "
		 "echo; done >&2; ls -l /proc/%d/fd >&2; grep -H . /proc/%d/fdinfo/* >&2",
		 (int)getpid(), (int)g_store_tid, (int)getpid(), (int)getpid());
	(void)!system(cmd);
	signal(SIGUSR2, on_dump);
	pthread_kill(g_store_th, SIGUSR2);
	sleep(1);
	abort();
}

/* poll() for input on @fd for up to @ms milliseconds, resumed after signals: libFuzzer's
 * -timeout watchdog is a periodic SIGALRM, and a poll() it interrupts returns -1/EINTR at
 * once, which read as "the store did not answer" (the first CI finding of this target was
 * exactly that, not a store bug). Return: poll()'s count, 0 on timeout. */
static int wait_in(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	struct timespec t0, t;
	int n, left = ms;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while ((n = poll(&p, 1, left)) < 0 && errno == EINTR) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		left =
		    ms - (int)((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
		if (left <= 0)
			return 0;
	}
	return n;
}

/* QUERY on a fresh connection; the connection stays open in *fdp (caller closes). */
static int query(struct coffer_store_info *info, int *fdp)
{
	unsigned char buf[256];
	struct coffer_msg_hdr h;
	unsigned int nfds;
	long n;
	int fd = wire_connect();

	if (fd < 0)
		return fd;
	coffer__msg_hdr_init(&h, COFFER_MSG_QUERY, 0, sizeof(h));
	WIRE_ASSERT(coffer__send_fds(fd, &h, sizeof(h), NULL, 0, 0) == (long)sizeof(h));
	if (wait_in(fd, 5000) != 1)
		store_stuck("no QUERY reply in 5 s");
	n = coffer__recv_fds(fd, buf, sizeof(buf), NULL, &nfds, 0, 0);
	WIRE_ASSERT(n > 0 && coffer__msg_check(buf, (size_t)n, &h) == 0 &&
		    h.type == COFFER_MSG_QUERY_REPLY);
	memcpy(info, buf + sizeof(h), sizeof(*info));
	*fdp = fd;
	return 0;
}

/* Wait until the store is back at rest (only the checker connected), then check fds. */
static void settle(int check_fds)
{
	struct coffer_store_info info;
	struct timespec t0, t;
	int qfd, fds;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		WIRE_ASSERT(!g_store_exited);
		WIRE_ASSERT(query(&info, &qfd) == 0);
		fds = count_fds();
		if (info.clients == 1 && info.objects_created == 0 && (!check_fds || fds == g_fds0))
			break;
		close(qfd);
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 5) {
			fprintf(stderr,
				"fuzz_wire: store not at rest: clients %llu created %llu fds %d "
				"(want %d)\n",
				(unsigned long long)info.clients,
				(unsigned long long)info.objects_created, fds, g_fds0);
			if (getenv("REL_WIRE_LOG") != NULL)
				(void)!system("ls -l /proc/$PPID/fd >&2; ls -l /proc/self/fd >&2");
			abort();
		}
		sched_yield();
	}
	if (!check_fds)
		g_fds0 = fds;
	close(qfd);
}

/* At exit: remove the socket and its directory (the store thread dies with the process). */
static void cleanup(void)
{
	unlink(g_sock);
	rmdir(g_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	pthread_t th;
	int i;

	(void)argc;
	(void)argv;
	signal(SIGPIPE, SIG_IGN);
	strcpy(g_dir, "/tmp/coffer-fuzz-wire-XXXXXX");
	WIRE_ASSERT(mkdtemp(g_dir) != NULL);
	snprintf(g_sock, sizeof(g_sock), "%s/s.sock", g_dir);
	atexit(cleanup);
	g_cfg.arena_bytes = 8u << 20;
	g_cfg.socket_path = g_sock;
	g_cfg.hugepages = COFFER_HP_OFF;
	g_cfg.socket_mode = 0600;
	g_cfg.spin_us = 0;
	g_cfg.budget = 64;
	/* silent (clients misbehave on purpose) unless REL_WIRE_LOG gives a level (0..4) */
	coffer__log_level = getenv("REL_WIRE_LOG") ? atoi(getenv("REL_WIRE_LOG")) : -1;
	WIRE_ASSERT(pthread_create(&th, NULL, store_thread, NULL) == 0);
	pthread_detach(th);
	g_store_th = th;
	for (i = 0; i < 1000; i++) {
		int fd = wire_connect();

		if (fd >= 0) {
			close(fd);
			break;
		}
		usleep(10000);
	}
	settle(0); /* baseline fd count */
	return 0;
}

static void drain(int sock, struct wchan *ch)
{
	unsigned char buf[COFFER_MSG_MAX_BYTES + 64];
	int fds[COFFER_MSG_FDS_MAX], i, k;
	unsigned int nfds, j;
	long n;

	for (i = 0; i < 64; i++) {
		struct coffer_msg_hdr h;

		n = coffer__recv_fds(sock, buf, sizeof(buf), fds, &nfds, COFFER_MSG_FDS_MAX,
				     MSG_DONTWAIT);
		if (n <= 0)
			break;
		for (j = 0; j < nfds; j++)
			close(fds[j]);
		if (coffer__msg_check(buf, (size_t)n, &h) == 0 && h.type == COFFER_MSG_REPLY)
			for (j = 0; j < h.count; j++) {
				struct coffer_rep r;

				memcpy(&r, buf + sizeof(h) + j * sizeof(r), sizeof(r));
				WIRE_ASSERT(r.status <= 0 && r.status >= -4095);
			}
	}
	for (k = 0; k < 4; k++) {
		uint32_t prod;

		if (!ch[k].open)
			continue;
		prod = __atomic_load_n(&ch[k].shm->rep.prod, __ATOMIC_ACQUIRE);
		if ((uint32_t)(prod - ch[k].cons) > ch[k].entries)
			continue; /* not ours to judge: we may have scribbled on the indices */
		for (; ch[k].cons != prod; ch[k].cons++) {
			struct coffer_rep r;

			memcpy(&r, &ch[k].reps[ch[k].cons & (ch[k].entries - 1)], sizeof(r));
			WIRE_ASSERT(r.status <= 0 && r.status >= -4095);
		}
		__atomic_store_n(&ch[k].shm->rep.cons, ch[k].cons, __ATOMIC_RELEASE);
	}
}

/* CHANNEL_OPEN; on success map the segment into a free slot. */
/* The connection's request doorbell (HELLO_REPLY's third fd, protocol v3), or -1. */
static int g_bell = -1;

static void chan_open(int sock, struct wchan *ch, uint32_t entries)
{
	struct {
		struct coffer_msg_hdr h;
		struct coffer_chan_open o;
	} m;
	unsigned char buf[256];
	struct coffer_chan_open_reply r;
	struct coffer_msg_hdr h;
	int fds[COFFER_MSG_FDS_MAX], efd, k;
	unsigned int nfds = 0, j;
	long n;

	for (k = 0; k < 4 && ch[k].open; k++)
		;
	memset(&m, 0, sizeof(m));
	coffer__msg_hdr_init(&m.h, COFFER_MSG_CHANNEL_OPEN, 0, sizeof(m));
	m.o.ring_entries = entries;
	efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	WIRE_ASSERT(efd >= 0);
	if (coffer__send_fds(sock, &m, sizeof(m), &efd, 1, 0) != (long)sizeof(m) ||
	    wait_in(sock, 2000) != 1) {
		close(efd);
		return;
	}
	n = coffer__recv_fds(sock, buf, sizeof(buf), fds, &nfds, COFFER_MSG_FDS_MAX, 0);
	if (n <= 0 || coffer__msg_check(buf, (size_t)n, &h) != 0 ||
	    h.type != COFFER_MSG_CHANNEL_OPEN_REPLY || nfds != 1 || k == 4 || g_bell < 0) {
		for (j = 0; j < nfds; j++)
			close(fds[j]);
		close(efd);
		return;
	}
	memcpy(&r, buf + sizeof(h), sizeof(r));
	ch[k].map = mmap(NULL, r.shm_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
	close(fds[0]);
	WIRE_ASSERT(ch[k].map != MAP_FAILED);
	ch[k].open = 1;
	ch[k].id = r.channel_id;
	ch[k].bytes = r.shm_bytes;
	ch[k].shm = ch[k].map;
	ch[k].reqs = (struct coffer_req *)((char *)ch[k].map + r.req_off);
	ch[k].reps = (struct coffer_rep *)((char *)ch[k].map + r.rep_off);
	ch[k].entries = r.ring_entries;
	ch[k].prod = ch[k].cons = 0;
	ch[k].req_efd = fcntl(g_bell, F_DUPFD_CLOEXEC, 0); /* closed with the channel */
	WIRE_ASSERT(ch[k].req_efd >= 0);
	ch[k].rep_efd = efd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct coffer_doorbell *db = NULL;
	struct wchan ch[4];
	size_t pos = 1;
	int sock, k;

	if (size == 0)
		return 0;
	/* The fd count at rest, counted as settle() counts: with its query connection open
	 * and the store down to that one client (the previous query's session reaped). */
	settle(0);
	memset(ch, 0, sizeof(ch));
	sock = wire_connect();
	WIRE_ASSERT(sock >= 0);
	if (data[0] & 1) {
		struct coffer_msg_hdr h;
		unsigned char buf[256];
		int fds[COFFER_MSG_FDS_MAX];
		unsigned int nfds = 0, j;

		coffer__msg_hdr_init(&h, COFFER_MSG_HELLO, 0, sizeof(h));
		WIRE_ASSERT(coffer__send_fds(sock, &h, sizeof(h), NULL, 0, 0) == (long)sizeof(h));
		WIRE_ASSERT(wait_in(sock, 5000) == 1);
		(void)coffer__recv_fds(sock, buf, sizeof(buf), fds, &nfds, COFFER_MSG_FDS_MAX, 0);
		if (nfds == 5) { /* the doorbells (arena, index, access map not needed here) */
			db = mmap(NULL, COFFER_DOORBELL_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED,
				  fds[1], 0);
			WIRE_ASSERT(db != MAP_FAILED);
			g_bell = fds[2];
			fds[2] = -1;
		}
		for (j = 0; j < nfds; j++)
			if (fds[j] >= 0)
				close(fds[j]);
	}
	while (pos < size) {
		uint8_t fh = data[pos++];
		struct wchan *c = &ch[(fh >> 3) & 3];
		uint64_t one = 1;

		switch (fh & 7) {
		case 0: { /* raw message, maybe with fds */
			size_t len;
			int fds[2], nf = 0;

			if (size - pos < 2)
				goto out;
			len = (size_t)data[pos] | (size_t)data[pos + 1] << 8;
			pos += 2;
			if (len > size - pos)
				len = size - pos;
			if (fh & 0x08)
				fds[nf++] = eventfd(0, EFD_CLOEXEC);
			if (fh & 0x10)
				fds[nf++] = memfd_create("fuzz", MFD_CLOEXEC);
			(void)coffer__send_fds(sock, data + pos, len, fds, (unsigned int)nf,
					       MSG_DONTWAIT);
			while (nf > 0)
				close(fds[--nf]);
			pos += len;
			break;
		}
		case 1:
			chan_open(sock, ch, 1u << ((fh >> 3) % 14));
			break;
		case 2: { /* ring entries */
			unsigned int n, i;

			if (pos >= size)
				goto out;
			n = data[pos++];
			if (!c->open) {
				pos += (size_t)n * 64 < size - pos ? (size_t)n * 64 : size - pos;
				break;
			}
			for (i = 0; i < n && size - pos >= 64; i++, pos += 64)
				memcpy(&c->reqs[(c->prod + i) & (c->entries - 1)], data + pos, 64);
			c->prod += i;
			__atomic_store_n(&c->shm->req.prod, c->prod, __ATOMIC_RELEASE);
			__atomic_thread_fence(__ATOMIC_SEQ_CST);
			if (db != NULL && !(fh & 0x20))
				coffer__doorbell_ring(db, c->id);
			break;
		}
		case 3: { /* scribble on an index */
			uint32_t v, *f;

			if (size - pos < 4)
				goto out;
			memcpy(&v, data + pos, 4);
			pos += 4;
			if (!c->open)
				break;
			switch ((fh >> 5) & 3) {
			case 0:
				f = &c->shm->req.prod;
				c->prod = v;
				break;
			case 1:
				f = &c->shm->rep.cons;
				c->cons = v;
				break;
			case 2:
				f = &c->shm->req.consumer_sleeping;
				break;
			default:
				f = &c->shm->rep.consumer_sleeping;
			}
			__atomic_store_n(f, v, __ATOMIC_RELEASE);
			break;
		}
		case 4: /* read what the store sent */
		{
			struct pollfd p = {.fd = sock, .events = POLLIN};

			(void)poll(&p, 1, 1);
			drain(sock, ch);
			break;
		}
		case 5: { /* CHANNEL_CLOSE (of anything) */
			struct {
				struct coffer_msg_hdr h;
				struct coffer_chan_close cc;
			} m;

			memset(&m, 0, sizeof(m));
			coffer__msg_hdr_init(&m.h, COFFER_MSG_CHANNEL_CLOSE, 0, sizeof(m));
			m.cc.channel_id = (fh >> 3) & 0x7;
			if (coffer__send_fds(sock, &m, sizeof(m), NULL, 0, MSG_DONTWAIT) < 0)
				break;
			/* A doorbell may follow at once (case 6): the store must not touch the
			 * channel it freed (tests/reliability/chanclose_test.c). */
			break;
		}
		case 6: /* doorbell */
			if (c->open)
				(void)!write(c->req_efd, &one, sizeof(one));
			break;
		case 7: { /* scribble on the doorbell page */
			uint64_t v;

			if (size - pos < 8)
				goto out;
			memcpy(&v, data + pos, 8);
			pos += 8;
			if (db != NULL)
				__atomic_store_n(&db->word[(fh >> 3) & 7].bits, v,
						 __ATOMIC_RELEASE);
			break;
		}
		default:
			break;
		}
	}
out:
	drain(sock, ch);
	close(sock);
	if (db != NULL)
		munmap(db, COFFER_DOORBELL_BYTES);
	if (g_bell >= 0)
		close(g_bell);
	g_bell = -1;
	for (k = 0; k < 4; k++)
		if (ch[k].open) {
			munmap(ch[k].map, ch[k].bytes);
			close(ch[k].req_efd);
			close(ch[k].rep_efd);
		}
	settle(1);
	return 0;
}

#ifdef REL_FUZZ_MAIN
/* `fuzz_wire_main gen DIR`: the seed corpus (valid sessions) for tools/fuzz.sh. */
static void put(FILE *f, const void *p, size_t n)
{
	(void)!fwrite(p, 1, n, f);
}

static void req(FILE *f, uint16_t op, uint8_t id, uint64_t size, uint16_t flags, int64_t tmo)
{
	struct coffer_req r;

	memset(&r, 0, sizeof(r));
	r.tag = id;
	r.op = op;
	r.oid[0] = id;
	r.size = size;
	r.flags = flags;
	r.timeout_us = tmo;
	put(f, &r, sizeof(r));
}

int main(int argc, char **argv)
{
	char path[512];
	struct coffer_msg_hdr h;
	uint8_t b;
	uint16_t len;
	FILE *f;

	if (argc != 3 || strcmp(argv[1], "gen") != 0) {
		fprintf(stderr, "usage: fuzz_wire_main gen DIR\n");
		return 2;
	}
	/* 0: HELLO, a socket REQUEST batch: create, seal+release, get, release, delete */
	snprintf(path, sizeof(path), "%s/wire-00", argv[2]);
	f = fopen(path, "wb");
	if (f == NULL)
		return 1;
	b = 1;
	put(f, &b, 1);
	b = 0;
	put(f, &b, 1);
	len = (uint16_t)(sizeof(h) + 5 * sizeof(struct coffer_req));
	put(f, &len, 2);
	coffer__msg_hdr_init(&h, COFFER_MSG_REQUEST, 5, len);
	put(f, &h, sizeof(h));
	req(f, COFFER_OP_CREATE, 1, 4096, 0, 0);
	req(f, COFFER_OP_SEAL, 1, 0, COFFER_SEAL_RELEASE, 0);
	req(f, COFFER_OP_GET, 1, 0, 0, 0);
	req(f, COFFER_OP_RELEASE, 1, 0, 0, 0);
	req(f, COFFER_OP_DELETE, 1, 0, 0, 0);
	b = 4;
	put(f, &b, 1);
	fclose(f);
	/* 1: HELLO, channel 256, ring: create, seal, get waiting, doorbell, read, close */
	snprintf(path, sizeof(path), "%s/wire-01", argv[2]);
	f = fopen(path, "wb");
	if (f == NULL)
		return 1;
	b = 1;
	put(f, &b, 1);
	b = (uint8_t)(1 | (8 << 3)); /* CHANNEL_OPEN 1 << 8 */
	put(f, &b, 1);
	b = 2;
	put(f, &b, 1);
	b = 4;
	put(f, &b, 1);
	req(f, COFFER_OP_GET, 2, 0, 0, -1);
	req(f, COFFER_OP_CREATE, 2, 100, 0, 0);
	req(f, COFFER_OP_SEAL, 2, 0, 0, 0);
	req(f, COFFER_OP_RELEASE, 2, 0, 0, 0);
	b = 6;
	put(f, &b, 1);
	b = 4;
	put(f, &b, 1);
	b = 5;
	put(f, &b, 1);
	fclose(f);
	/* 2: no HELLO: a QUERY, then a REQUEST (refused: before HELLO) */
	snprintf(path, sizeof(path), "%s/wire-02", argv[2]);
	f = fopen(path, "wb");
	if (f == NULL)
		return 1;
	b = 0;
	put(f, &b, 1);
	put(f, &b, 1);
	len = sizeof(h);
	put(f, &len, 2);
	coffer__msg_hdr_init(&h, COFFER_MSG_QUERY, 0, sizeof(h));
	put(f, &h, sizeof(h));
	b = 4;
	put(f, &b, 1);
	fclose(f);
	printf("fuzz_wire: wrote 3 seeds to %s\n", argv[2]);
	return 0;
}
#endif
