/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/reliability/integrity_stress.c - can a reader ever get wrong bytes?
 *
 * Processes beside one small store (evicting all the time): two writers replace objects with
 * self-describing contents (ObjectID number, version, size and a word per 8 bytes derived
 * from them) by create+seal and by reserve+put (REPLACE; a put may be shorter than its
 * reservation), seal 0-byte versions now and then, delete, abort, give reservations back and
 * make gets that wait for a seal; two reader processes of two threads each (sharing one
 * connection) get objects (verified, held a little, verified again, released by pointer),
 * read them through the index (whole, and vectors of starts); a third reader gets over the
 * socket with the raw protocol; a victim client reserving, creating, writing and holding gets
 * is SIGKILLed every 20-100 ms. Every byte a reader sees must be the sealed contents of the ID
 * it asked for. At the end, with every ID deleted and every client gone, the store must hold
 * nothing (0 used bytes, no object, reservation or index entry) and take an object of its
 * whole capacity. The seed is printed; a failure names the ID, version, size and word.
 *
 * Usage: integrity_stress [SECONDS [SEED [IDS [SIZES]]]]: IDS written (default 4096); SIZES 0
 * (default: 64 B .. the whole store, around 64 KiB and 2 MiB), 1 (up to 128 KiB), 2 (64..320
 * B: with a large IDS, 100k+ objects and the index full: seals left unplaced), 3 (64 KiB +-
 * 128 B: the quick lists' bound). COFFER_STORE_EXE names the store, STRESS_M its -m (32M),
 * STRESS_HUGEPAGES one more argument (e.g. --hugepages=off: a capacity not of 2 MiB pages).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <coffer/hash.h>
#include <coffer/store.h>

#include "tests/reliability/relcommon.h"
#include "tests/store/rawclient.h"

static uint64_t NIDS = 4096;	     /* IDs written (argv[3]) */
static int small_only;		     /* argv[4]: the size profile (see above) */
#define MAXSIZE	 (32u * 1024 * 1024) /* the whole store (-m 32M) */
#define MAGIC	 0x434f464645525631ull
#define NWRITERS 2
#define NREADERS 3 /* the last one: raw_reader() */

static const uint64_t sizes[] = {
    64,
    128,
    4032,
    4096,
    4160,
    65472,
    65536,
    65600,
    131072,
    2097088,
    2097152,
    2097216,
    1000,
    3000,
    (1u << 20) + 64,
    (1u << 21) - 4096,
    (1u << 21) + 4096,
};

static struct coffer_oid oid_of(uint64_t n)
{
	struct coffer_oid o;

	memset(&o, 0, sizeof(o));
	rc_oid(o.id, n); /* the raw socket reader's IDs (tests/store/rawclient.c) */
	return o;
}

/* Word j of version @ver of ID @n, @size bytes. */
static inline uint64_t word(uint64_t n, uint64_t ver, uint64_t size, uint64_t j)
{
	return coffer_hash_mix64(n * 0x9e3779b97f4a7c15ull ^ ver ^ (size << 40) ^
				 (j * 0x100000001b3ull));
}

static void fill(void *p, uint64_t n, uint64_t ver, uint64_t size)
{
	uint64_t *w = p, i;

	if (size == 0)
		return;
	w[0] = MAGIC;
	w[1] = n;
	w[2] = ver;
	w[3] = size;
	for (i = 4; i < size / 8; i++)
		w[i] = word(n, ver, size, i);
}

/* 0 when @p (the first @have bytes of @size, as the store said) is the start of one
 * version of ID @n. */
static int check_part(const void *p, uint64_t n, uint64_t size, uint64_t have, char *why,
		      size_t whylen)
{
	const uint64_t *w = p;
	uint64_t i, ver;

	if (size == 0)
		return 0; /* a 0-byte version: nothing to read, nothing to get wrong */
	if (size < 64 || size % 8 != 0) {
		snprintf(why, whylen, "size %" PRIu64, size);
		return -1;
	}
	if (w[0] != MAGIC || w[1] != n || w[3] != size) {
		snprintf(why, whylen,
			 "header magic %#" PRIx64 " id %" PRIu64 " (want %" PRIu64 ") ver %#" PRIx64
			 " size %" PRIu64 " (store says %" PRIu64 ")",
			 w[0], w[1], n, w[2], w[3], size);
		return -1;
	}
	ver = w[2];
	for (i = 4; i < have / 8; i++)
		if (w[i] != word(n, ver, size, i)) {
			snprintf(why, whylen,
				 "id %" PRIu64 " ver %#" PRIx64 " size %" PRIu64 ": word %" PRIu64
				 " is %#" PRIx64 ", want %#" PRIx64,
				 n, ver, size, i, w[i], word(n, ver, size, i));
			return -1;
		}
	return 0;
}

/* 0 when @p (@size bytes, as the store said) is a whole version of ID @n. */
static int check(const void *p, uint64_t n, uint64_t size, char *why, size_t whylen)
{
	return check_part(p, n, size, size, why, whylen);
}

static uint64_t deadline_ns;

/* IDs the writers sealed last (shared by every process): readers ask for these mostly. */
#define RECENT 256
struct shared {
	uint64_t recent[RECENT];
	uint64_t nrecent;
};
static struct shared *sh;

static void note_recent(uint64_t n)
{
	uint64_t i = __atomic_fetch_add(&sh->nrecent, 1, __ATOMIC_RELAXED);

	__atomic_store_n(&sh->recent[i % RECENT], n, __ATOMIC_RELAXED);
}

/* @recent_pct: how often an ID sealed lately (else any of the IDs). */
static uint64_t pick_id(uint64_t *rs, unsigned int recent_pct)
{
	if (rel_rand(rs) % 100 < recent_pct &&
	    __atomic_load_n(&sh->nrecent, __ATOMIC_RELAXED) > RECENT)
		return __atomic_load_n(&sh->recent[rel_rand(rs) % RECENT], __ATOMIC_RELAXED);
	return rel_rand(rs) % NIDS;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "FAIL pid %d: ", (int)getpid());                                   \
		fprintf(stderr, __VA_ARGS__);                                                      \
		fprintf(stderr, "\n");                                                             \
		_exit(1);                                                                          \
	} while (0)

static uint64_t pick_size(uint64_t *rs)
{
	uint64_t r = rel_rand(rs);

	if (small_only == 3) /* the quick lists' bound, 64 KiB, and its neighbours */
		return 65536 + ((int64_t)(r % 5) - 2) * 64;
	if (small_only == 2) /* tiny: 100k+ objects fit */
		return 64 + (r % 5) * 64;
	if (r % 4 == 0 || (small_only && r % 4 == 1))
		return 64 + (rel_rand(rs) % 1024) * 8;
	if (small_only)
		return sizes[(r >> 8) % 9] & ~7ull;
	if (r % 64 == 1) /* up to the whole arena: evicts (nearly) everything */
		return (8ull << 20) + (rel_rand(rs) % 4) * (8ull << 20) - (r % 128 == 1 ? 64 : 0);
	return sizes[(r >> 8) % (sizeof(sizes) / sizeof(sizes[0]))] & ~7ull;
}

static void writer(const char *sock, int idx, uint64_t seed)
{
	coffer_handle_t c;
	uint64_t rs = seed, seq = 0;
	int rc;

	if (coffer_connect(sock, &c) != 0)
		FAIL("connect");
	while (now_ns() < deadline_ns) {
		uint64_t n = pick_id(&rs, 25), size = pick_size(&rs);
		uint64_t ver = ((uint64_t)idx << 56) | ++seq, op = rel_rand(&rs) % 16;
		struct coffer_oid o = oid_of(n);
		void *d;

		if (op < 6) { /* create + fill + seal */
			if (op == 0 && rel_rand(&rs) % 16 == 0)
				size = 0; /* offset 0, as the arena's first block */
			rc = coffer_obj_create_oid(c, &o, size, COFFER_CREATE_REPLACE, &d, NULL);
			if (rc == -EEXIST || rc == -ENOMEM || rc == -E2BIG) /* E2BIG: STRESS_M */
				continue;
			if (rc != 0)
				FAIL("create %d", rc);
			fill(d, n, ver, size);
			if (op == 5 && rel_rand(&rs) % 4 == 0) {
				rc = coffer_obj_abort_oid(c, &o, NULL);
				if (rc != 0)
					FAIL("abort %d", rc);
				continue;
			}
			rc = coffer_obj_seal_oid(c, &o, COFFER_SEAL_RELEASE, NULL);
			if (rc != 0)
				FAIL("seal %d", rc);
			note_recent(n);
		} else if (op < 12) { /* reserve + fill + put */
			uint64_t rsz = size + (rel_rand(&rs) % 2) * 64 * (rel_rand(&rs) % 4);

			rc = coffer_obj_reserve(c, rsz, 1, &d, NULL);
			if (rc == -ENOMEM || rc == -E2BIG)
				continue;
			if (rc != 0)
				FAIL("reserve %d", rc);
			fill(d, n, ver, size);
			if (op == 11 && rel_rand(&rs) % 2 == 0) {
				rc = coffer_obj_unreserve(c, d, NULL);
				if (rc != 0)
					FAIL("unreserve %d", rc);
				continue;
			}
			rc = coffer_obj_put(c, &o, d, size, COFFER_CREATE_REPLACE, NULL);
			if (rc == -EEXIST) {
				rc = coffer_obj_unreserve(c, d, NULL);
				if (rc != 0)
					FAIL("unreserve after EEXIST %d", rc);
				continue;
			}
			if (rc != 0)
				FAIL("put %d", rc);
			note_recent(n);
		} else if (op < 14) {
			rc = coffer_obj_delete(c, &o, NULL);
			if (rc != 0 && rc != -ENOENT && rc != -EBUSY)
				FAIL("delete %d", rc);
		} else { /* a get that waits: an eviction or a seal may answer it */
			const void *p;
			uint64_t sz;
			char why[256];

			rc = coffer_obj_get_oid(c, &o, 2000, &p, &sz, NULL);
			if (rc == -ENOENT)
				continue;
			if (rc != 0)
				FAIL("writer get %d", rc);
			if (check(p, n, sz, why, sizeof(why)) != 0)
				FAIL("writer get of %" PRIu64 ": %s", n, why);
			rc = coffer_obj_release_data(c, &o, p, NULL);
			if (rc != 0)
				FAIL("release %d", rc);
		}
	}
	fprintf(stderr, "writer %d: %" PRIu64 " versions\n", idx, seq);
	coffer_disconnect(c);
	_exit(0);
}

/* One reader thread; two share each reader's connection, so that one client may hold two
 * versions of an ID at once (a get on each side of a replace) and must release exactly the
 * one it is done with (coffer_obj_release_data()). */
#define VEC	8
#define VEC_LEN 8192
struct rd {
	coffer_handle_t c;
	uint64_t seed, gets, reads;
};

static void *reader_loop(void *arg)
{
	struct rd *a = arg;
	uint64_t rs = a->seed;
	unsigned char *buf = malloc(MAXSIZE);
	char why[256];
	int rc;

	if (buf == NULL)
		FAIL("malloc");
	while (now_ns() < deadline_ns) {
		uint64_t n = pick_id(&rs, 75), sz = 0;
		struct coffer_oid o = oid_of(n);
		const void *p;

		if (rel_rand(&rs) % 8 == 0) { /* a vector of index reads of each one's start */
			struct coffer_read_vec v[VEC];
			uint64_t ids[VEC];

			for (unsigned int k = 0; k < VEC; k++) {
				ids[k] = k == 0 ? n : pick_id(&rs, 75);
				v[k] = (struct coffer_read_vec){.oid = oid_of(ids[k]),
								.buf = buf + k * VEC_LEN,
								.len = 64 + rel_rand(&rs) %
										(VEC_LEN - 63)};
			}
			if (coffer_obj_read_oid_vec(a->c, v, VEC) < 0)
				FAIL("read_oid_vec");
			for (unsigned int k = 0; k < VEC; k++) {
				uint64_t want = v[k].size < v[k].len ? v[k].size : v[k].len;

				if (v[k].result == -EAGAIN)
					continue;
				if (v[k].result < 0 || (uint64_t)v[k].result != want)
					FAIL("read_oid_vec entry %u: %" PRId64 " of %" PRIu64, k,
					     v[k].result, want);
				if (check_part(v[k].buf, ids[k], v[k].size, want, why,
					       sizeof(why)) != 0)
					FAIL("read_oid_vec of %" PRIu64 ": %s", ids[k], why);
				a->reads++;
			}
		} else if (rel_rand(&rs) % 2) {
			rc = coffer_obj_get_oid(a->c, &o, 0, &p, &sz, NULL);
			if (rc == -ENOENT)
				continue;
			if (rc != 0)
				FAIL("get %d", rc);
			if (check(p, n, sz, why, sizeof(why)) != 0)
				FAIL("get of %" PRIu64 ": %s", n, why);
			if (rel_rand(&rs) % 8 == 0)
				usleep(200);
			/* still the same after holding it: nobody may reuse a pinned block */
			if (check(p, n, sz, why, sizeof(why)) != 0)
				FAIL("get of %" PRIu64 " after holding: %s", n, why);
			rc = coffer_obj_release_data(a->c, &o, p, NULL);
			if (rc != 0)
				FAIL("release %d", rc);
			a->gets++;
		} else {
			int64_t r = coffer_obj_read_oid(a->c, &o, 0, buf, MAXSIZE, &sz);

			if (r == -EAGAIN)
				continue;
			if (r < 0)
				FAIL("read_oid %" PRId64, r);
			if ((uint64_t)r != sz)
				FAIL("read_oid copied %" PRId64 " of %" PRIu64, r, sz);
			if (check(buf, n, sz, why, sizeof(why)) != 0)
				FAIL("read_oid of %" PRIu64 ": %s", n, why);
			a->reads++;
		}
	}
	free(buf);
	return NULL;
}

static void reader(const char *sock, uint64_t seed)
{
	struct rd a[2] = {{.seed = seed}, {.seed = seed ^ 0x5bd1e995u}};
	pthread_t t;

	if (coffer_connect(sock, &a[0].c) != 0)
		FAIL("connect");
	a[1].c = a[0].c;
	if (pthread_create(&t, NULL, reader_loop, &a[1]) != 0)
		FAIL("pthread_create");
	reader_loop(&a[0]);
	pthread_join(t, NULL);
	fprintf(stderr, "reader %d: %" PRIu64 " gets, %" PRIu64 " index reads verified\n",
		(int)getpid(), a[0].gets + a[1].gets, a[0].reads + a[1].reads);
	coffer_disconnect(a[0].c);
	_exit(0);
}

/* Gets over the socket with the raw protocol (no ring; rawclient.c), some waiting for a seal
 * (deferred socket replies), released by ID: one reference at a time. */
static void raw_reader(const char *sock, uint64_t seed)
{
	struct rc_conn rc;
	uint64_t rs = seed, gets = 0;
	char why[256];

	if (rc_connect(&rc, sock) != 0)
		FAIL("raw connect");
	while (now_ns() < deadline_ns) {
		uint64_t n = pick_id(&rs, 75), sz = 0;
		const void *p;
		int r = rc_get(&rc, n, rel_rand(&rs) % 4 == 0 ? 3000 : 0, &p, &sz);

		if (r == -ENOENT)
			continue;
		if (r != 0)
			FAIL("raw get %d", r);
		if (check(p, n, sz, why, sizeof(why)) != 0)
			FAIL("raw get of %" PRIu64 ": %s", n, why);
		r = rc_release(&rc, n);
		if (r != 0)
			FAIL("raw release %d", r);
		gets++;
	}
	fprintf(stderr, "raw reader %d: %" PRIu64 " socket gets verified\n", (int)getpid(), gets);
	rc_close(&rc);
	_exit(0);
}

/* Reserves, creates and writes until killed. */
static void victim(const char *sock, uint64_t seed)
{
	coffer_handle_t c;
	uint64_t rs = seed, seq = 0;

	if (coffer_connect(sock, &c) != 0)
		_exit(0);
	for (;;) {
		uint64_t n = rel_rand(&rs) % NIDS, size = pick_size(&rs);
		struct coffer_oid o = oid_of(n);
		void *d[4];

		if (coffer_obj_reserve(c, size, 4, d, NULL) == 0) {
			for (int i = 0; i < 4; i++) {
				fill(d[i], n, (7ull << 56) | ++seq, size);
				if (i == 0)
					(void)coffer_obj_put(c, &o, d[i], size,
							     COFFER_CREATE_REPLACE, NULL);
			}
		}
		if (coffer_obj_create_oid(c, &o, size, COFFER_CREATE_REPLACE, &d[0], NULL) == 0) {
			fill(d[0], n, (7ull << 56) | ++seq, size);
			if (rel_rand(&rs) % 2)
				(void)coffer_obj_seal_oid(c, &o, COFFER_SEAL_RELEASE, NULL);
		}
		/* hold a pinned get across the kill sometimes */
		{
			const void *p;
			uint64_t sz;

			(void)coffer_obj_get_oid(c, &o, 0, &p, &sz, NULL);
		}
	}
}

/* Create, fill, seal, get, check and delete one object of @bytes (the whole arena). */
static int whole_arena(coffer_handle_t c, uint64_t bytes)
{
	struct coffer_oid o = oid_of(NIDS);
	const void *p;
	char why[256];
	uint64_t sz;
	void *d;
	int rc;

	rc = coffer_obj_create_oid(c, &o, bytes, 0, &d, NULL);
	if (rc != 0) {
		fprintf(stderr, "FAIL: an object of the whole empty arena: create %d\n", rc);
		return -1;
	}
	fill(d, NIDS, 1, bytes);
	if (coffer_obj_seal_oid(c, &o, COFFER_SEAL_RELEASE, NULL) != 0 ||
	    coffer_obj_get_oid(c, &o, 0, &p, &sz, NULL) != 0) {
		fprintf(stderr, "FAIL: seal or get of the whole-arena object\n");
		return -1;
	}
	rc = check(p, NIDS, sz, why, sizeof(why));
	if (rc != 0)
		fprintf(stderr, "FAIL: the whole-arena object: %s\n", why);
	/* and through the index: its entry ends exactly at the arena's end */
	{
		unsigned char *buf = malloc(bytes);
		int64_t r = buf != NULL ? coffer_obj_read_oid(c, &o, 0, buf, bytes, &sz) : -ENOMEM;

		if (r != (int64_t)bytes || check(buf, NIDS, sz, why, sizeof(why)) != 0) {
			fprintf(stderr, "FAIL: index read of the whole-arena object: %" PRId64 "\n",
				r);
			rc = -1;
		}
		free(buf);
	}
	if (coffer_obj_release_data(c, &o, p, NULL) != 0 || coffer_obj_delete(c, &o, NULL) != 0) {
		fprintf(stderr, "FAIL: release or delete of the whole-arena object\n");
		return -1;
	}
	return rc;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 10;
	uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 0) : rel_seed(), rs;

	if (argc > 3)
		NIDS = strtoull(argv[3], NULL, 0);
	if (argc > 4)
		small_only = atoi(argv[4]);
	const char *args[] = {"-m", getenv("STRESS_M") ? getenv("STRESS_M") : "32M",
			      getenv("STRESS_HUGEPAGES") ? getenv("STRESS_HUGEPAGES") : NULL, NULL};
	struct rc_store st;
	struct coffer_store_info info;
	pid_t kids[NWRITERS + NREADERS];
	int i, status, bad = 0, kills = 0;
	coffer_handle_t c;

	fprintf(stderr, "integrity_stress: %.1f s, seed %#" PRIx64 "\n", secs, seed);
	rs = seed;
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 1;
	if (rc_store_start(&st, args) != 0) {
		fprintf(stderr, "store start failed\n");
		return 1;
	}
	deadline_ns = now_ns() + (uint64_t)(secs * 1e9);
	for (i = 0; i < NWRITERS + NREADERS; i++) {
		uint64_t s = rel_rand(&rs);

		kids[i] = fork();
		if (kids[i] == 0) {
			if (i < NWRITERS)
				writer(st.sock, i + 1, s);
			if (i == NWRITERS + NREADERS - 1)
				raw_reader(st.sock, s);
			reader(st.sock, s);
		}
	}
	while (now_ns() < deadline_ns) {
		uint64_t s = rel_rand(&rs);
		pid_t v = fork();

		if (v == 0)
			victim(st.sock, s);
		usleep(20000 + (useconds_t)(rel_rand(&rs) % 80000));
		kill(v, SIGKILL);
		waitpid(v, NULL, 0);
		kills++;
	}
	for (i = 0; i < NWRITERS + NREADERS; i++) {
		if (waitpid(kids[i], &status, 0) != kids[i] || !WIFEXITED(status) ||
		    WEXITSTATUS(status) != 0) {
			fprintf(stderr, "child %d failed (status %#x)\n", i, status);
			bad = 1;
		}
	}
	/* Everyone is gone: delete every ID, then the store must hold nothing. */
	if (coffer_connect(st.sock, &c) != 0) {
		fprintf(stderr, "final connect failed\n");
		bad = 1;
	} else {
		if (coffer_store_query(c, &info) == 0)
			fprintf(stderr,
				"before the deletes: %" PRIu64 " objects sealed, %" PRIu64
				" bytes used\n",
				info.objects_sealed, info.used_bytes);
		for (uint64_t n = 0; n < NIDS; n++) {
			struct coffer_oid o = oid_of(n);
			int rc = coffer_obj_delete(c, &o, NULL);

			if (rc != 0 && rc != -ENOENT) {
				fprintf(stderr, "final delete of %" PRIu64 ": %d\n", n, rc);
				bad = 1;
			}
		}
		/* the store learns of the last killed client's end asynchronously (its socket's
		 * hang-up): wait for it, up to 10 s, before anything is judged */
		for (int i = 0; i < 1000; i++) {
			if (coffer_store_query(c, &info) != 0 || info.clients == 1)
				break;
			usleep(10000);
		}
		if (coffer_store_query(c, &info) != 0) {
			bad = 1;
		} else {
			fprintf(stderr,
				"after %d kills: capacity %" PRIu64 " used %" PRIu64
				" created %" PRIu64 " sealed %" PRIu64 " reserved %" PRIu64
				"/%" PRIu64 " index %" PRIu64 " evictions %" PRIu64
				" quick %" PRIu64 "/%" PRIu64 " unplaced %" PRIu64
				" second_chances %" PRIu64 "\n",
				kills, info.capacity_bytes, info.used_bytes, info.objects_created,
				info.objects_sealed, info.reserved_blocks, info.reserved_bytes,
				info.index_objects, info.evictions, info.quick_blocks,
				info.quick_bytes, info.index_unplaced, info.second_chances);
			if (info.used_bytes != 0 || info.objects_created != 0 ||
			    info.objects_sealed != 0 || info.reserved_blocks != 0 ||
			    info.reserved_bytes != 0 || info.index_objects != 0 ||
			    info.clients != 1) {
				fprintf(stderr, "FAIL: the empty store is not empty\n");
				bad = 1;
			}
			/* free == capacity, and in one piece: an object of the whole arena fits
			 * (the quick lists coalesce first), reads back whole and goes again */
			if (info.capacity_bytes <= MAXSIZE &&
			    whole_arena(c, info.capacity_bytes) != 0)
				bad = 1;
		}
		coffer_disconnect(c);
	}
	if (rc_store_stop(&st) != 0) {
		fprintf(stderr, "store stop failed (sanitizer report or bad exit)\n");
		bad = 1;
	}
	fprintf(stderr, "%s\n", bad ? "FAILED" : "ok");
	return bad;
}
