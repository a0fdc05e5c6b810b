/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/reliability/fuzz_store.c - libFuzzer target on the store's message decoder and
 * request dispatch: bytes as they arrive from a client socket (coffer__msg_check, then
 * every REQUEST entry through coffer__req_check and coffer__ot_exec, as tools/store.c does)
 * and as channel ring entries (64-byte records copied out of shared memory, executed with a
 * ring route), from four clients that may disconnect, close channels or time out at any
 * point.
 *
 * Input: a sequence of frames. Frame header byte: low 3 bits = kind, bits 3-4 = client,
 * bit 5 = route (ring 1 or 2), bit 7 = "fold" (ObjectIDs reduced to 8 values and sizes to
 * twice the capacity, so that the fuzzer reaches deep states: seal after create, get after
 * seal, replace, delete while held). Kinds:
 *   0 socket message: u16 length, then that many bytes (a whole SOCK_SEQPACKET message)
 *   1 ring entries:   u8 n, then n x 64 bytes
 *   2 the client disconnects (coffer__ot_owner_gone) and reconnects
 *   3 the client closes the channel of the route (coffer__ot_drop_route)
 *   4 time passes: every waiting get with a finite timeout expires
 *   5 the client-side reply validator (coffer__rep_check) on 32 raw bytes
 *
 * After every frame (aborts on violation = a finding): coffer__ot_check() passes (after
 * each of the first 64 frames, then every 16th, and at the end); used <= capacity; every reply the
 * store produced - immediate or delivered later - is accepted by the client's own validator
 * coffer__rep_check() (so offsets and sizes lie inside the arena), carries the tag of a request
 * that client sent, and goes to a client that is still connected and to a route it still has open.
 * At the end every client disconnects: no CREATED object, no waiting get and no reference may
 * remain.
 *
 * Builds: tools/fuzz.sh (clang -fsanitize=fuzzer,address over this file and the store's
 * sources). With -DREL_FUZZ_MAIN it is an ordinary program instead (the meson unit test
 * 'reliability-fuzz-replay'): `fuzz_store gen DIR` writes the seed corpus (valid batches),
 * `fuzz_store replay [N] [FILE...]` runs the seeds, the files, and N inputs mutated from the
 * seeds by a fixed PRNG - a regression run of the same target without libFuzzer.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/proto_util.h"
#include "tools/objtab.h"

#define CLIENTS	 4
#define CAPACITY (1u << 20)
#define SEGMENT	 0x5eed1234u

struct client {
	struct coffer__owner owner;
	int connected;
	int routes_open[3]; /* route 0 = socket, always open; 1, 2 = channels */
	uint64_t max_tag;   /* highest tag this client sent (tags are assigned by us) */
};

static struct client g_cl[CLIENTS];
static uint64_t g_tag;

#define FUZZ_ASSERT(c)                                                                             \
	do {                                                                                       \
		if (!(c)) {                                                                        \
			fprintf(stderr, "fuzz_store: %s:%d: %s\n", __FILE__, __LINE__, #c);        \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

/* Every reply the store produces must pass the client's validator. The op is recovered from
 * the tag (we encode it in the low 4 bits, see exec_req()). */
static void check_rep(const struct coffer_rep *rep)
{
	uint16_t op = (uint16_t)(rep->tag & 15);

	FUZZ_ASSERT(rep->status <= 0 && rep->status >= -4095);
	if (op >= COFFER_OP_CREATE && op <= COFFER_OP_MAX)
		FUZZ_ASSERT(coffer__rep_check(rep, op, SEGMENT, CAPACITY) == 0);
	if (rep->status == 0 &&
	    (op == COFFER_OP_CREATE || op == COFFER_OP_GET || op == COFFER_OP_RESERVE))
		FUZZ_ASSERT(rep->offset <= CAPACITY);
	if (rep->status == 0 && op == COFFER_OP_GET)
		FUZZ_ASSERT(rep->size <= CAPACITY - rep->offset);
}

static void deliver(void *ctx, struct coffer__owner *ow, uint32_t route,
		    const struct coffer_rep *rep)
{
	struct client *cl = (struct client *)ow; /* owner is the first member */
	int i, ok = 0;

	(void)ctx;
	for (i = 0; i < CLIENTS; i++)
		ok |= cl == &g_cl[i];
	FUZZ_ASSERT(ok);	    /* a reply for a client that exists */
	FUZZ_ASSERT(cl->connected); /* ... and has not gone */
	FUZZ_ASSERT(route < 3 && cl->routes_open[route]);
	FUZZ_ASSERT((rep->tag >> 4) != 0 && (rep->tag >> 4) <= cl->max_tag);
	FUZZ_ASSERT((rep->tag & 15) == COFFER_OP_GET); /* only gets wait */
	check_rep(rep);
}

static struct coffer_index_slot g_index[64];
static uint8_t g_access[64 / 8];

static struct coffer__ot *ot_new(void)
{
	struct coffer__ot *ot;
	int i;

	FUZZ_ASSERT(coffer__ot_create(&ot, CAPACITY, SEGMENT, deliver, NULL) == 0);
	/* A small object index, so that probe windows fill up and coffer__ot_check() checks
	 * it against the table after every frame. */
	memset(g_index, 0, sizeof(g_index));
	/* every slot marked read, as a client may mark them: evictions pass over objects
	 * (bounded) until the store has cleared the bits */
	memset(g_access, 0xff, sizeof(g_access));
	coffer__ot_set_index(ot, g_index, g_access, sizeof(g_index) / sizeof(g_index[0]), 0x5eed);
	for (i = 0; i < CLIENTS; i++) {
		memset(&g_cl[i], 0, sizeof(g_cl[i]));
		coffer__ot_owner_init(&g_cl[i].owner);
		g_cl[i].connected = 1;
		g_cl[i].routes_open[0] = g_cl[i].routes_open[1] = g_cl[i].routes_open[2] = 1;
	}
	return ot;
}

/* One request from a client as the store copies it out (copy, then trust), folded. */
static void copy_req(struct coffer_req *out, const unsigned char *bytes, int fold)
{
	struct coffer_req req;

	memcpy(&req, bytes, sizeof(req));
	if (fold) {
		uint8_t k = req.oid[0] & 7;

		memset(req.oid, 0, sizeof(req.oid));
		req.oid[0] = k;
		req.size %= 2ull * CAPACITY;
		req.timeout_us = req.timeout_us < 0 ? -1 : req.timeout_us % 2;
		/* PUT/UNRESERVE offsets: 64-byte steps in the first 16 KiB, where the
		 * reservations of a small arena are */
		req.offset = (req.offset & 0xff) << 6;
	}
	*out = req;
}

/* One request from a client, as the store handles it after copying it out. */
static void exec_req(struct coffer__ot *ot, struct client *cl, uint32_t route,
		     struct coffer_req req)
{
	struct coffer_rep rep;
	int imm;

	/* Our own tags (op in the low bits) so replies can be matched and validated. */
	req.tag = (++g_tag << 4) | (req.op & 15);
	cl->max_tag = g_tag;
	if (coffer__req_check(&req) != 0)
		return; /* the store answers -EINVAL without touching the table */
	if (!cl->routes_open[route])
		return; /* the store never takes requests from a closed channel */
	memset(&rep, 0xee, sizeof(rep));
	imm = coffer__ot_exec(ot, &cl->owner, &req, route, &rep);
	if (imm) {
		FUZZ_ASSERT(rep.tag == req.tag);
		check_rep(&rep);
	} else {
		FUZZ_ASSERT(req.op == COFFER_OP_GET);
	}
}

static void check_ot(struct coffer__ot *ot)
{
	struct coffer__ot_stats s;

	FUZZ_ASSERT(coffer__ot_check(ot) == 0);
	coffer__ot_stats(ot, &s);
	FUZZ_ASSERT(s.used <= s.capacity && s.capacity <= CAPACITY);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct coffer__ot *ot = ot_new();
	struct coffer__ot_stats s;
	size_t pos = 0, frames = 0;
	int i;

	while (pos < size) {
		uint8_t h = data[pos++];
		struct client *cl = &g_cl[(h >> 3) & 3];
		uint32_t route = 1 + ((h >> 5) & 1);
		int fold = (h & 0x80) != 0;

		switch (h & 7) {
		case 0: { /* a socket message */
			unsigned char buf[COFFER_MSG_MAX_BYTES + 64];
			struct coffer_msg_hdr mh;
			size_t len;
			uint32_t k;

			if (size - pos < 2)
				goto out;
			len = (size_t)data[pos] | (size_t)data[pos + 1] << 8;
			pos += 2;
			if (len > size - pos)
				len = size - pos;
			if (len > sizeof(buf))
				len = sizeof(buf); /* the store's recv reports more as -EMSGSIZE */
			memcpy(buf, data + pos, len);
			pos += len;
			if (coffer__msg_check(buf, len, &mh) != 0)
				break; /* the store sends ERROR and closes this client */
			FUZZ_ASSERT(mh.length == len);
			if (mh.type != COFFER_MSG_REQUEST)
				break;
			FUZZ_ASSERT(mh.count >= 1 && mh.count <= COFFER_MSG_BATCH_MAX);
			FUZZ_ASSERT(len ==
				    sizeof(mh) + (size_t)mh.count * sizeof(struct coffer_req));
			for (k = 0; k < mh.count; k++) {
				struct coffer_req req;

				copy_req(&req, buf + sizeof(mh) + k * sizeof(struct coffer_req),
					 fold);
				exec_req(ot, cl, 0, req);
			}
			break;
		}
		case 1: { /* ring entries */
			unsigned int n, k;

			if (pos >= size)
				goto out;
			n = data[pos++];
			/* As tools/store.c drains a ring: groups of up to 32 requests copied
			 * out, hashed and prefetched together (coffer__ot_prefetch_batch()
			 * reads the table: ASan checks it reads nothing freed by the previous
			 * group), then executed in order. */
			for (k = 0; k < n && size - pos >= sizeof(struct coffer_req);) {
				struct coffer_req reqs[COFFER_OT_PREFETCH_MAX];
				uint64_t hash[COFFER_OT_PREFETCH_MAX];
				unsigned int g = 0, j;

				for (; g < COFFER_OT_PREFETCH_MAX && k < n &&
				       size - pos >= sizeof(struct coffer_req);
				     g++, k++) {
					copy_req(&reqs[g], data + pos, fold);
					hash[g] = coffer__ot_hash(ot, reqs[g].oid);
					pos += sizeof(struct coffer_req);
				}
				coffer__ot_prefetch_batch(ot, &cl->owner, hash, g);
				for (j = 0; j < g; j++)
					exec_req(ot, cl, route, reqs[j]);
			}
			break;
		}
		case 2: /* disconnect and reconnect */
			cl->connected = 0;
			coffer__ot_owner_gone(ot, &cl->owner);
			coffer__ot_owner_init(&cl->owner);
			cl->connected = 1;
			cl->routes_open[1] = cl->routes_open[2] = 1;
			break;
		case 3: /* channel closed */
			cl->routes_open[route] = 0;
			coffer__ot_drop_route(ot, &cl->owner, route);
			break;
		case 4: /* every finite timeout passes */
			coffer__ot_expire(ot, coffer__now_us() + 3600ull * 1000000ull);
			break;
		case 5: { /* the client's validator on raw bytes: must not crash */
			struct coffer_rep rep;

			if (size - pos < sizeof(rep))
				goto out;
			memcpy(&rep, data + pos, sizeof(rep));
			pos += sizeof(rep);
			(void)coffer__rep_check(&rep, (uint16_t)(h >> 4), SEGMENT, CAPACITY);
			break;
		}
		default:
			break;
		}
		/* coffer__ot_check() walks every bucket: after each of the first 64 frames,
		 * then every 16th (and at the end), so long inputs stay fast to run. */
		if (++frames <= 64 || frames % 16 == 0)
			check_ot(ot);
	}
out:
	for (i = 0; i < CLIENTS; i++) {
		g_cl[i].connected = 0;
		coffer__ot_owner_gone(ot, &g_cl[i].owner);
	}
	check_ot(ot);
	coffer__ot_stats(ot, &s);
	FUZZ_ASSERT(s.objects_created == 0 && s.waiters == 0 && s.holders == 0);
	coffer__ot_destroy(ot);
	return 0;
}

#ifdef REL_FUZZ_MAIN
/* ------------------------------------------------------- seeds and replay (no libFuzzer) */

struct seedbuf {
	unsigned char b[8192];
	size_t n;
};

static void put(struct seedbuf *s, const void *p, size_t n)
{
	if (s->n + n <= sizeof(s->b)) {
		memcpy(s->b + s->n, p, n);
		s->n += n;
	}
}

static void mkreq(struct coffer_req *r, uint16_t op, uint8_t id, uint64_t size, uint16_t flags,
		  int64_t timeout)
{
	memset(r, 0, sizeof(*r));
	r->op = op;
	r->oid[0] = id;
	r->size = size;
	r->flags = flags;
	r->timeout_us = timeout;
}

/* One socket REQUEST frame holding @n requests (fold on). */
static void sock_frame(struct seedbuf *s, int client, const struct coffer_req *reqs, unsigned int n)
{
	struct coffer_msg_hdr h;
	uint16_t len = (uint16_t)(sizeof(h) + n * sizeof(*reqs));
	uint8_t fh = (uint8_t)(0x80 | (client << 3) | 0);

	coffer__msg_hdr_init(&h, COFFER_MSG_REQUEST, n, len);
	put(s, &fh, 1);
	put(s, &len, 2);
	put(s, &h, sizeof(h));
	put(s, reqs, n * sizeof(*reqs));
}

static void ring_frame(struct seedbuf *s, int client, int route2, const struct coffer_req *reqs,
		       unsigned int n)
{
	uint8_t fh = (uint8_t)(0x80 | (route2 << 5) | (client << 3) | 1), nn = (uint8_t)n;

	put(s, &fh, 1);
	put(s, &nn, 1);
	put(s, reqs, n * sizeof(*reqs));
}

static void op_frame(struct seedbuf *s, int client, int kind)
{
	uint8_t fh = (uint8_t)((client << 3) | kind);

	put(s, &fh, 1);
}

/* Valid batches covering every op and the interesting sequences. Return: seed count. */
static int make_seeds(struct seedbuf *seeds, int max)
{
	struct coffer_req r[8];
	int n = 0;

	/* 0: create, seal+release, get, release, delete (socket) */
	mkreq(&r[0], COFFER_OP_CREATE, 1, 4096, 0, 0);
	mkreq(&r[1], COFFER_OP_SEAL, 1, 0, COFFER_SEAL_RELEASE, 0);
	mkreq(&r[2], COFFER_OP_GET, 1, 0, 0, 0);
	mkreq(&r[3], COFFER_OP_RELEASE, 1, 0, 0, 0);
	mkreq(&r[4], COFFER_OP_CONTAINS, 1, 0, 0, 0);
	mkreq(&r[5], COFFER_OP_DELETE, 1, 0, 0, 0);
	sock_frame(&seeds[n++], 0, r, 6);
	/* 1: the same through a ring, with a waiting get completed by another client's seal */
	mkreq(&r[0], COFFER_OP_GET, 2, 0, 0, -1);
	ring_frame(&seeds[n], 1, 0, r, 1);
	mkreq(&r[0], COFFER_OP_CREATE, 2, 100, 0, 0);
	mkreq(&r[1], COFFER_OP_SEAL, 2, 0, 0, 0);
	ring_frame(&seeds[n], 0, 1, r, 2);
	mkreq(&r[0], COFFER_OP_RELEASE, 2, 0, 0, 0);
	ring_frame(&seeds[n++], 1, 0, r, 1);
	/* 2: replace-on-seal while a reader holds the old object, then deferred delete */
	mkreq(&r[0], COFFER_OP_CREATE, 3, 1000, 0, 0);
	mkreq(&r[1], COFFER_OP_SEAL, 3, 0, COFFER_SEAL_RELEASE, 0);
	sock_frame(&seeds[n], 0, r, 2);
	mkreq(&r[0], COFFER_OP_GET, 3, 0, 0, 0);
	sock_frame(&seeds[n], 1, r, 1);
	mkreq(&r[0], COFFER_OP_CREATE, 3, 2000, COFFER_CREATE_REPLACE, 0);
	mkreq(&r[1], COFFER_OP_SEAL, 3, 0, COFFER_SEAL_RELEASE, 0);
	mkreq(&r[2], COFFER_OP_DELETE, 3, 0, 0, 0);
	sock_frame(&seeds[n], 0, r, 3);
	op_frame(&seeds[n++], 1, 2); /* the reader disconnects */
	/* 3: fill to capacity with pinned objects (-ENOMEM), too large (-E2BIG) */
	mkreq(&r[0], COFFER_OP_CREATE, 4, CAPACITY / 2, 0, 0);
	mkreq(&r[1], COFFER_OP_CREATE, 5, CAPACITY / 2, 0, 0);
	mkreq(&r[2], COFFER_OP_CREATE, 6, 4096, 0, 0);
	mkreq(&r[3], COFFER_OP_CREATE, 7, CAPACITY + 1, 0, 0);
	mkreq(&r[4], COFFER_OP_ABORT, 4, 0, 0, 0);
	mkreq(&r[5], COFFER_OP_SEAL, 5, 0, 0, 0);
	sock_frame(&seeds[n], 2, r, 6);
	op_frame(&seeds[n++], 2, 2);
	/* 4: wrong owner: client 1 seals/aborts/releases what client 0 holds */
	mkreq(&r[0], COFFER_OP_CREATE, 1, 64, 0, 0);
	sock_frame(&seeds[n], 0, r, 1);
	mkreq(&r[0], COFFER_OP_SEAL, 1, 0, 0, 0);
	mkreq(&r[1], COFFER_OP_ABORT, 1, 0, 0, 0);
	mkreq(&r[2], COFFER_OP_RELEASE, 1, 0, 0, 0);
	ring_frame(&seeds[n], 1, 1, r, 3);
	op_frame(&seeds[n++], 0, 2);
	/* 5: gets with timeouts that expire, a channel closed with gets waiting */
	mkreq(&r[0], COFFER_OP_GET, 6, 0, 0, 1);
	mkreq(&r[1], COFFER_OP_GET, 6, 0, 0, -1);
	ring_frame(&seeds[n], 3, 0, r, 2);
	op_frame(&seeds[n], 0, 4);
	op_frame(&seeds[n++], 3, 3);
	/* 6: a 0-byte object and the all-zero ObjectID */
	mkreq(&r[0], COFFER_OP_CREATE, 0, 0, 0, 0);
	mkreq(&r[1], COFFER_OP_SEAL, 0, 0, COFFER_SEAL_RELEASE, 0);
	mkreq(&r[2], COFFER_OP_GET, 0, 0, 0, 0);
	mkreq(&r[3], COFFER_OP_GET, 0, 0, 0, 0);
	sock_frame(&seeds[n++], 0, r, 4);
	/* 7: reservations (v5): reserve two blocks, put one, replace it with the other, a put
	 * by the wrong client, a reader holding the replaced version; the owner disconnects
	 * with a third reservation it never put */
	mkreq(&r[0], COFFER_OP_RESERVE, 0, 4096, 0, 0);
	mkreq(&r[1], COFFER_OP_RESERVE, 0, 100, 0, 0);
	mkreq(&r[2], COFFER_OP_PUT, 1, 4096, 0, 0);
	r[2].offset = 0;
	sock_frame(&seeds[n], 0, r, 3);
	mkreq(&r[0], COFFER_OP_GET, 1, 0, 0, 0);
	mkreq(&r[1], COFFER_OP_PUT, 2, 100, 0, 0);
	r[1].offset = 4096;
	sock_frame(&seeds[n], 1, r, 2);
	mkreq(&r[0], COFFER_OP_PUT, 1, 100, COFFER_CREATE_REPLACE, 0);
	r[0].offset = 4096;
	mkreq(&r[1], COFFER_OP_RESERVE, 0, 64, 0, 0);
	mkreq(&r[2], COFFER_OP_UNRESERVE, 0, 0, 0, 0);
	r[2].offset = 4096;
	ring_frame(&seeds[n], 0, 1, r, 3);
	op_frame(&seeds[n], 0, 2);
	op_frame(&seeds[n++], 1, 2);
	/* 8: a QUERY and a HELLO (decoded, not requests) */
	{
		struct coffer_msg_hdr h;
		uint16_t len = sizeof(h);
		uint8_t fh = 0;

		coffer__msg_hdr_init(&h, COFFER_MSG_QUERY, 0, sizeof(h));
		put(&seeds[n], &fh, 1);
		put(&seeds[n], &len, 2);
		put(&seeds[n], &h, sizeof(h));
		n++;
	}
	return n < max ? n : max;
}

static int gen(const char *dir)
{
	static struct seedbuf seeds[16];
	int n = make_seeds(seeds, 16), i;

	for (i = 0; i < n; i++) {
		char path[512];
		FILE *f;

		snprintf(path, sizeof(path), "%s/seed-%02d", dir, i);
		f = fopen(path, "wb");
		if (f == NULL || fwrite(seeds[i].b, 1, seeds[i].n, f) != seeds[i].n) {
			perror(path);
			return 1;
		}
		fclose(f);
	}
	printf("fuzz_store: wrote %d seeds to %s\n", n, dir);
	return 0;
}

static uint64_t xs(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static int replay(int argc, char **argv)
{
	static struct seedbuf seeds[16];
	static unsigned char buf[16384];
	int nseeds = make_seeds(seeds, 16), i;
	unsigned long n = argc > 0 ? strtoul(argv[0], NULL, 10) : 20000, k;
	uint64_t s = 0x9e3779b97f4a7c15ull;

	for (i = 0; i < nseeds; i++)
		LLVMFuzzerTestOneInput(seeds[i].b, seeds[i].n);
	for (i = 1; i < argc; i++) {
		FILE *f = fopen(argv[i], "rb");
		size_t len;

		if (f == NULL) {
			perror(argv[i]);
			return 1;
		}
		len = fread(buf, 1, sizeof(buf), f);
		fclose(f);
		LLVMFuzzerTestOneInput(buf, len);
	}
	/* Mutations of the seeds: byte flips, splices of two seeds, random tails. */
	for (k = 0; k < n; k++) {
		const struct seedbuf *a = &seeds[xs(&s) % (uint64_t)nseeds];
		const struct seedbuf *b = &seeds[xs(&s) % (uint64_t)nseeds];
		size_t len = a->n, j, flips = 1 + xs(&s) % 8;

		memcpy(buf, a->b, len);
		if ((xs(&s) & 3) == 0 && len + b->n <= sizeof(buf)) {
			memcpy(buf + len, b->b, b->n);
			len += b->n;
		}
		for (j = 0; j < flips && len > 0; j++)
			buf[xs(&s) % len] ^= (unsigned char)(1u << (xs(&s) % 8));
		if ((xs(&s) & 7) == 0) {
			size_t extra = xs(&s) % 512;

			for (j = 0; j < extra && len < sizeof(buf); j++)
				buf[len++] = (unsigned char)xs(&s);
		}
		LLVMFuzzerTestOneInput(buf, len);
	}
	printf("fuzz_store: replayed %d seeds, %d files and %lu mutated inputs: no violation\n",
	       nseeds, argc > 1 ? argc - 1 : 0, n);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && strcmp(argv[1], "gen") == 0)
		return gen(argv[2]);
	if (argc >= 2 && strcmp(argv[1], "replay") == 0)
		return replay(argc - 2, argv + 2);
	fprintf(stderr, "usage: fuzz_store gen DIR | fuzz_store replay [N] [FILE...]\n");
	return 2;
}
#endif
