/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * perf/fio/coffer_engine.c - fio external ioengine "coffer": fio I/O through coffer-store.
 *
 * Load it with `ioengine=external:/path/libcoffer_fio.so` (or `--ioengine=/path/...so`).
 * Built against the source of exactly the installed fio (FIO_IOOPS_VERSION 31 in fio 3.33):
 * fio checks nothing but that number, so any other fio's struct layouts would be read wrong.
 *
 * Data mapping. Every fio file is a namespace; every block is one store object whose
 * ObjectID is (12 bytes of a hash of the job's coffer_namespace and the file name, then the
 * block's byte offset as 8 little-endian bytes; perf/fio/coffer_oid.h): offsets inside one
 * file never collide, files collide with probability ~2^-96. A write replaces the block's
 * object: create with COFFER_CREATE_REPLACE, copy, seal with COFFER_SEAL_RELEASE (a create
 * that finds another client's create of the block pending, -EEXIST, is retried for up to
 * 5 s; one of this job's waits before it launches, CF_W_WAIT, so writes keep fio's order). The
 * replacement is invisible until its seal, which swaps it for the old object atomically, so
 * a concurrent reader sees the old or the new block, never a mix (store semantics, issue 5).
 * A read gets the object by ObjectID (coffer_obj_get_oid, timeout 0: a missing block is an
 * error, or zeros with coffer_missing=zeros), copies it into the io_u and releases
 * exactly the version it read (by its pointer: a write of the same job may have sealed a
 * replacement meanwhile, whose reference another read of the block may hold, and a release
 * by ID would drop that one), batched with the other reads of the same getevents call
 * (coffer_obj_release_data_bulk). No I/O takes an object handle: every stage goes by
 * ObjectID (coffer_obj_*_oid). Opening and closing a handle per I/O (a handle-hash insert,
 * a delete and an RCU reclaim) cost ~0.6 us of the ~2.6 us of CPU a read took with handles,
 * measured with this engine at iodepth 32; for writes it was ~8% of fio's samples (perf,
 * randwrite).
 *
 * Asynchronous path (the DAOS dfs engine's shape, with coffer's batched channel under it):
 *  - queue launches a write's first stage (create) with the io_u's own event on the job's
 *    EQ and returns FIO_Q_QUEUED (when the channel is full, -EAGAIN, the write waits on the
 *    retry list below instead: fio's FIO_Q_BUSY requeue breaks verify); a read is
 *    only noted, and all reads noted since the last commit are launched at commit as one
 *    coffer_obj_get_oid_vec() (each with its own event): one channel pin and submit-lock
 *    round trip per batch instead of per read (~17% -> ~7% of fio's samples in submission,
 *    perf, randread numjobs 1). A write or trim first launches the reads noted before it,
 *    so requests reach the store in fio's order. A read that finds the channel full waits
 *    on the retry list like a second stage;
 *  - commit launches the noted reads, flushes the batch with coffer_flush() - one doorbell
 *    for everything queued - and accounts the submitted io_us (issue time, io_u_queued,
 *    io_u_mark_submit; a read the object index answered was stamped before its copy,
 *    cf_pend_index);
 *  - getevents polls the EQ; while I/O is in flight it polls without sleeping (yielding the
 *    CPU between polls) for up to coffer_spin_us (default 50 us) per call, then sleeps on the
 *    EQ: a batch comes back within microseconds while the store is awake, and a sleep costs
 *    a doorbell and a wake-up on both sides. A write's create completion copies the data
 *    and launches the seal with the same event; the io_u completes when the seal does. A
 *    read's get completion copies the data out, completes the io_u at once and queues the
 *    block's ObjectID for release; at the end of the getevents call the releases of all the
 *    reads it completed go out as one coffer_obj_release_data_bulk on one pooled event,
 *    reaped later by getevents (or by the drain at cleanup): the read's latency does not
 *    include the release's round trip, and a batch of reads costs one release submission
 *    and one event, not one each.
 *  - a second stage (or a noted read) that finds the channel full waits on a retry list,
 *    relaunched on the next pass of the getevents loop, after the poll made room; a read
 *    whose launch fails for good completes its io_u with the error there.
 *
 * Threads and processes. fio calls every hook of one job from one thread (the job's thread
 * or forked process), so the per-job state below has no locks and no atomics. Nothing is
 * created in the parent: fio forks jobs by default and a connection does not survive a fork,
 * so each job connects in init (own EQ, hence its own channel) and tears everything down in
 * cleanup, which also runs after a failed init. Different jobs share nothing but the store.
 *
 * Teardown (lifetimes). After an error fio frees only the io_us on its free list (io_u_free
 * for each, the io_u itself right after), then all io buffers, then calls cleanup; io_us
 * still in flight are never handed back. So the first io_u_free reaps everything in flight
 * while every io_u and buffer still exists; cleanup finishes whatever is left without
 * touching io_us (cd->closing), destroys the EQ with COFFER_EQ_FORCE (which waits for the
 * stragglers), and only then frees events: a completion can never write freed memory.
 *
 * Symbols: only `ioengine` is exported (version script); everything else in this module,
 * including the statically linked libcoffer, is local.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include "fio.h"
#include "optgroup.h"

#include <coffer/common.h>
#include <coffer/event.h>
#include <coffer/hash.h>
#include <coffer/store.h>

#include "runtime/env.h"
#include "runtime/proto_util.h"

#include "coffer_oid.h"

#if FIO_IOOPS_VERSION != 31
#error "perf/fio/coffer_engine.c is written against fio 3.33 (FIO_IOOPS_VERSION 31)"
#endif

/* Most events one coffer_eq_poll() call hands back. */
#define CF_POLL_BATCH 64
/* How long a poller sleeps at most while a relaunch waits for channel room (us). */
#define CF_RETRY_SLEEP_US 50
/* Spinning getevents polls this long before it starts yielding the CPU between polls (us). */
#define CF_SPIN_ALONE_US 5
/* Prefill: objects in flight at once. */
#define CF_PREFILL_DEPTH 64
/* Prefill: how long one get waits for another client's seal of a block it created (us)
 * before the prefill tries the create again, and how long it waits for that block in all
 * before it fails. The store aborts the unsealed blocks of a client that dies (or aborts)
 * but does not end the gets waiting for them (a get waits for a seal up to its timeout,
 * whoever creates the object), so only a new create notices that the creator is gone: short
 * waits let a dead creator cost the prefill about one of them instead of a whole long get. */
#define CF_PREFILL_WAIT_US     (100 * 1000)
#define CF_PREFILL_WAIT_MAX_US (15 * 1000 * 1000)
/* A write retries its create this long at most while another client keeps the block created
 * and unsealed (-EEXIST), then fails with ETIMEDOUT (us). */
#define CF_WRITE_BUSY_US (5 * 1000 * 1000)
/* Most blocks a job keeps reserved for its writes (pool and reserves in flight), and most
 * reserves on one event. */
#define CF_RESV_MAX   1024
#define CF_RESV_BATCH 32
/* Cleanup waits at most this long for the store to answer what is still in flight (us). */
#define CF_DRAIN_TIMEOUT_US (5 * 1000 * 1000)

enum cf_missing {
	CF_MISSING_ERROR = 0,
	CF_MISSING_ZEROS = 1,
};

/* Engine options; fio requires that no option lives at offset 0, hence the pad. */
struct cf_options {
	void *pad;
	char socket[108]; /* "" (unset) or a path that fits sun_path; set by cf_opt_socket() */
	char *namespace;
	unsigned int prefill;
	unsigned int missing;
	unsigned int spin_us;
	unsigned int index;
	unsigned int put;
};

/* What an event on the job's EQ belongs to. */
enum cf_kind {
	CF_KIND_IO,	 /* an io_u's event: its stages follow each other on it */
	CF_KIND_RELEASE, /* a pooled event carrying a batch of reads' releases */
	CF_KIND_PREFILL, /* a prefill slot (on the prefill EQ only) */
	CF_KIND_RESERVE, /* a pooled event reserving one arena block for a later write */
};

enum cf_stage {
	CF_IDLE = 0,
	CF_W_CREATE, /* write: create(REPLACE) launched */
	CF_W_SEAL,   /* write: data copied, seal(RELEASE) launched or waiting for room */
	CF_R_GET,    /* read: get launched */
	CF_T_DELETE, /* trim: delete launched */
	CF_W_PUT,    /* write: data copied into a reserved block, put(REPLACE) launched */
	CF_W_WAIT,   /* write or trim: waits for an earlier one of this job to the same block
		      * (cf_order_next); launches at wait_stage */
};

/* Common head of everything that carries an event on an EQ. */
struct cf_op {
	struct coffer_event ev;
	enum cf_kind kind;
	enum cf_stage stage;
	struct coffer_oid oid; /* the block's ObjectID */
	struct cf_op *next;    /* retry list or release free list */
	struct cf_op *chain;   /* every release event ever allocated (freed at cleanup) */
};

/* A batch of reserves in flight on one event (CF_KIND_RESERVE): where the blocks go. */
struct cf_rop {
	struct cf_op op;
	unsigned int n;
	void *data[CF_RESV_BATCH];
};

/* Per io_u state (io_u->engine_data). */
struct cf_req {
	struct cf_op op;
	struct io_u *io_u;
	void *wdata;		  /* create or put: writable pointer into the arena */
	const void *rdata;	  /* get: read-only pointer into the arena */
	uint64_t rsize;		  /* get: the object's size in bytes */
	int64_t busy_since;	  /* write: when its create first answered -EEXIST (us), 0: never */
	uint64_t seq;		  /* write or trim: issue order in the job (cf_data.seq) */
	unsigned int index;	  /* the io_u's index: its slot in cf_data.reqs[] */
	enum cf_stage wait_stage; /* CF_W_WAIT: the stage it launches at */
	bool issued;		  /* read: fio's issue time set by cf_pend_index(), not commit */
};

/* What cf_open_file() did for a file already (cf_data.fstate[fileno]): each is done once per
 * job, at the file's first open, not at the opens of later loops or of the verify phase. */
enum {
	CF_F_PREFILLED = 1, /* coffer_prefill created its missing blocks */
	CF_F_CHECKED = 2,   /* allow_file_create=0: its first block was found in the store */
};

/* Per file state (fio_file->engine_data). */
struct cf_file {
	uint8_t prefix[CF_PREFIX_SIZE]; /* names the file's blocks (coffer_oid.h) */
};

/* Per job state (td->io_ops_data). */
struct cf_data {
	coffer_handle_t conn;
	coffer_handle_t eq;
	bool runtime_up;	      /* coffer_init() succeeded: coffer_fini() owed */
	unsigned int running;	      /* events launched on eq and not yet reaped */
	struct io_u **events;	      /* completions of the current getevents call */
	unsigned int nr_events;	      /* entries in events[] */
	struct io_u **queued;	      /* queued since the last commit */
	unsigned int nr_queued;	      /* entries in queued[] */
	struct cf_req **pend;	      /* reads queued and not launched yet (cf_pend_flush) */
	unsigned int nr_pend;	      /* entries in pend[] */
	struct io_u **ready;	      /* reads answered from the object index, not reaped yet */
	struct coffer_read_vec *rvec; /* cf_pend_index()'s vector (depth entries) */
	struct cf_req **rreq;	      /* and the read of each entry */
	unsigned int nr_ready;	      /* entries in ready[] */
	bool may_conflict;	      /* the job writes or trims: check reads against those */
	bool index;		      /* coffer_index: try the object index first */
	bool prefill;		      /* coffer_prefill: every block existed before the reads */
	unsigned int depth;	      /* size of events[] and queued[] (td->o.iodepth) */
	struct cf_op *retry;	      /* second stages waiting for channel room (LIFO) */
	struct coffer_oid *rel_pend;  /* blocks read and not yet released (COFFER_GET_BULK_MAX) */
	const void **rel_data;	      /* and the pointers their gets returned (the exact version) */
	unsigned int nr_rel_pend;     /* entries in rel_pend[] */
	struct cf_op *rel_free;	      /* idle release events */
	struct cf_op *rel_all;	      /* every release event, through ->chain */
	void **resv;		      /* reserved blocks, ready for a write's put */
	unsigned int nr_resv;	      /* entries in resv[] */
	unsigned int resv_cap;	      /* resv[]'s length: resv_max + depth at init */
	unsigned int resv_max;	      /* most blocks pooled + reserving; 0: create and seal */
	unsigned int resv_inflight;   /* reserves launched and not answered */
	bool resv_sized;	      /* resv_max fitted to the store (cf_resv_fit()) */
	uint64_t resv_bytes;	      /* size of each reserved block (the job's write bs) */
	struct cf_op *rop_free;	      /* idle reserve events */
	unsigned char *fstate;	      /* per fileno: CF_F_* flags */
	unsigned int nr_files;
	struct cf_req **reqs; /* per io_u index: its state until io_u_free (or cleanup) */
	uint32_t *wt_count;   /* writes and trims queued and not done, per hash of their block */
	unsigned int wt_mask; /* entries in wt_count[] - 1 (a power of two - 1) */
	uint64_t seq;	      /* writes and trims queued so far (their issue order) */
	unsigned int nr_wait; /* io_us in CF_W_WAIT */
	bool busy_logged;     /* a write that gave up on a held block was reported */
	bool err_logged;      /* the first failed I/O was reported in coffer's words */
	bool short_logged;    /* a read that found a block shorter than itself was reported */
	bool closing;	      /* cleanup runs: io_us and their buffers are gone */
	int sync_fd;	      /* fsync_on_close=1: an empty memfd, every open file's fd (fio
			       * fsyncs a file's fd as it closes it); -1: none */
};

/*
 * For an error @err from @call (coffer_init() or coffer_connect()): when it is the -EINVAL of
 * a bad COFFER_* environment variable, log one line that leads with the variable, its value
 * and why it is refused (coffer__env_explain()), and return true; else log nothing and
 * return false (the caller says what failed).
 */
static bool cf_env_refused(const char *call, int err)
{
	char why[256];

	if (err != -EINVAL || coffer__env_explain(why, sizeof(why)) == 0)
		return false;
	log_err("fio: coffer: %s, so %s failed (see README.md \"Linking a client\")\n", why, call);
	return true;
}

/* coffer_strerror(), less -EINVAL's pointer to coffer_env_check(): cf_env_refused() names
 * a bad COFFER_* variable before any such message, so none is at fault by then. */
static const char *cf_strerror(int err)
{
	return err == -EINVAL ? "invalid argument" : coffer_strerror(err);
}

static void cf_block_oid(const struct cf_file *cff, uint64_t offset, struct coffer_oid *oid)
{
	cf_prefix_block_oid(cff->prefix, offset, oid);
}

static const char *cf_namespace(const struct cf_options *o)
{
	return o->namespace && o->namespace[0] ? o->namespace : "fio";
}

static int64_t cf_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static struct cf_op *cf_ev_op(struct coffer_event *ev)
{
	/* ev is the first member of struct cf_op (checked below) */
	return (struct cf_op *)(void *)ev;
}
_Static_assert(offsetof(struct cf_op, ev) == 0, "cf_ev_op() relies on it");
_Static_assert(offsetof(struct cf_req, op) == 0, "a cf_req is reached from its cf_op");

/*
 * Copy a write's data into its new object. Nobody reads the object before its seal, and the
 * store never reads data at all, so on x86-64 the copy uses non-temporal stores: a 4 KiB
 * block is written whole, and ordinary stores would first read every destination line
 * (read-for-ownership) only to overwrite it. The sfence orders the streamed stores before
 * the seal request that publishes them (ordinary release stores do not order them).
 */
static void cf_copy_in(void *dst, const void *src, size_t n)
{
#if defined(__x86_64__)
	if (((uintptr_t)dst & 15) == 0 && (n & 63) == 0) {
		__m128i *d = dst;
		const __m128i *sp = src;

		for (size_t i = 0; i < n / 16; i += 4) {
			__m128i a = _mm_loadu_si128(sp + i), b = _mm_loadu_si128(sp + i + 1);
			__m128i c = _mm_loadu_si128(sp + i + 2), e = _mm_loadu_si128(sp + i + 3);

			_mm_stream_si128(d + i, a);
			_mm_stream_si128(d + i + 1, b);
			_mm_stream_si128(d + i + 2, c);
			_mm_stream_si128(d + i + 3, e);
		}
		_mm_sfence();
		return;
	}
#endif
	memcpy(dst, src, n);
}

/* ---- release events (reads) ------------------------------------------------------------ */

static struct cf_op *cf_rel_get(struct cf_data *cd)
{
	struct cf_op *op = cd->rel_free;
	int rc;

	if (op) {
		cd->rel_free = op->next;
		op->next = NULL;
		return op;
	}
	op = calloc(1, sizeof(*op));
	if (!op)
		return NULL;
	rc = coffer_event_init(&op->ev, cd->eq, NULL);
	if (rc < 0) {
		free(op);
		return NULL;
	}
	op->kind = CF_KIND_RELEASE;
	op->chain = cd->rel_all;
	cd->rel_all = op;
	return op;
}

static void cf_rel_put(struct cf_data *cd, struct cf_op *op)
{
	op->next = cd->rel_free;
	cd->rel_free = op;
}

static void cf_retry_push(struct cf_data *cd, struct cf_op *op)
{
	op->next = cd->retry;
	cd->retry = op;
}

/* ---- reserved blocks (writes) ------------------------------------------------------------ */

/*
 * A write copies its data into a block reserved ahead of time and puts it under the block's
 * ObjectID (coffer_obj_put): one request and one completion on the write's critical path
 * instead of a create, a copy after its answer, a seal and a second answer. The pool is
 * refilled at commit with reserves in flight, off that path; a block whose put fails comes
 * back to the pool (the reservation is still this connection's). Blocks held: at most
 * resv_max in the pool or in flight as reserves, plus one per write in flight, so resv[]
 * (resv_cap = resv_max + depth entries at init) always has room for a block that comes
 * back. resv_max only falls after init (cf_resv_fit(), a failed reserve), so the room is
 * checked against the array's own length: against resv_max, a block answered after a
 * failed reserve set it to 0 was dropped, still reserved and unusable until the job ended.
 * The connection's end frees every reservation never put.
 */
static void cf_resv_back(struct cf_data *cd, void *data)
{
	if (cd->nr_resv < cd->resv_cap)
		cd->resv[cd->nr_resv++] = data;
}

static struct cf_op *cf_rop_get(struct cf_data *cd)
{
	struct cf_op *op = cd->rop_free;
	struct cf_rop *r;

	if (op) {
		cd->rop_free = op->next;
		op->next = NULL;
		return op;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	if (coffer_event_init(&r->op.ev, cd->eq, NULL) < 0) {
		free(r);
		return NULL;
	}
	r->op.kind = CF_KIND_RESERVE;
	r->op.chain = cd->rel_all; /* freed with the release events at cleanup */
	cd->rel_all = &r->op;
	return &r->op;
}

/*
 * Blocks the job may still write in this run: what fio itself stops at (io_bytes_exceeded():
 * io_size or size, times loops, against the bytes issued, reads included for a read/write
 * mix; and exceeds_number_ios(): number_ios times loops, against the I/Os done, queued and
 * in flight) over the write block size; UINT_MAX when time_based (no end known). Without
 * number_ios, a job of 4 writes (number_ios=4) reserved 32 blocks of 64 KiB and evicted
 * 2 MiB of its file's earlier blocks from an 8 MiB store that create + seal leaves whole
 * (tests/fio put-fits).
 */
static unsigned int cf_writes_left(struct thread_data *td, const struct cf_data *cd)
{
	uint64_t limit = td->o.io_size ? td->o.io_size : td->o.size, done;

	if (td->o.time_based)
		return UINT_MAX;
	limit *= td->loops;
	done = td->io_issue_bytes[DDIR_WRITE];
	if (td_rw(td))
		done += td->io_issue_bytes[DDIR_READ];
	if (done >= limit)
		return 0;
	limit = (limit - done + cd->resv_bytes - 1) / cd->resv_bytes;
	if (td->o.number_ios) {
		uint64_t ios = (uint64_t)td->o.number_ios * td->loops;

		done = ddir_rw_sum(td->io_blocks) + td->io_u_queued + td->io_u_in_flight;
		if (done >= ios)
			return 0;
		if (ios - done < limit)
			limit = ios - done;
	}
	return limit < UINT_MAX ? (unsigned int)limit : UINT_MAX;
}

/*
 * Once, at the first refill (the job's size is known by then): lower resv_max to this job's
 * share of the blocks the store holds beyond what create + seal would pin at most - the data
 * of every job of this engine that runs with it (fio's group: numjobs clones and the other
 * job sections) and one block per I/O each has in flight. The pools come on top of both and
 * are not evictable, so larger ones evict the jobs' own sealed blocks (a read of a block
 * written earlier then fails with ENOENT) where create + seal fits (tests/fio put-fits,
 * put-shared: before, each job counted itself alone). The share is the room divided by the
 * jobs that write (each may keep a pool). Other clients' data is not counted: the store is a
 * cache for them.
 */
static void cf_resv_fit(struct thread_data *td, struct cf_data *cd)
{
	struct coffer_store_info info;
	struct thread_data *t;
	uint64_t need = 0, inflight = 0, room, writers = 0;
	int i;

	cd->resv_sized = true;
	if (coffer_store_query(cd->conn, &info) < 0)
		return; /* the reserves say what is wrong */
	/* every job's struct lives in memory fio shares with its jobs (fork or thread) and is
	 * set up before any job starts; a job that ended has io_ops NULL (only compared) */
	for_each_td(t, i)
	{
		uint64_t bs;

		if (t != td && (t->io_ops != td->io_ops || t->groupid != td->groupid))
			continue;
		bs = t->o.max_bs[DDIR_WRITE] > t->o.max_bs[DDIR_READ] ? t->o.max_bs[DDIR_WRITE]
								      : t->o.max_bs[DDIR_READ];
		need += t->o.size;
		inflight += (uint64_t)(t->o.iodepth ? t->o.iodepth : 1) * bs;
		if (td_write(t))
			writers++;
	}
	if (writers == 0)
		writers = 1;
	need += inflight;
	/* Jobs larger than the store evict their own blocks whatever the write path; there the
	 * pools must still leave one block per write in flight (a create when the pool is
	 * empty) that is not pinned: else the first creates fail with -ENOMEM. */
	if (need > info.capacity_bytes)
		need = inflight;
	room = info.capacity_bytes > need ? (info.capacity_bytes - need) / writers / cd->resv_bytes
					  : 0;
	if (room < cd->resv_max)
		cd->resv_max = (unsigned int)room;
}

/*
 * Launch reserves, in batches of up to CF_RESV_BATCH on one event each, while the pool (with
 * those in flight) is below half of resv_max, up to resv_max - and never more than the job
 * may still write: reserved blocks are not evictable and a reserve evicts like a create, so
 * blocks reserved beyond the last write would push the job's own sealed data out of a store
 * that holds all of it when every write is a create and a seal (tests/fio put-fits).
 */
static void cf_resv_refill(struct thread_data *td, struct cf_data *cd)
{
	unsigned int want = cd->resv_max, left;

	if (cd->resv_max && !cd->resv_sized) {
		cf_resv_fit(td, cd);
		want = cd->resv_max;
	}
	if (cd->resv_max == 0 || cd->nr_resv + cd->resv_inflight > cd->resv_max / 2)
		return;
	left = cf_writes_left(td, cd);
	if (want > left)
		want = left;
	while (cd->nr_resv + cd->resv_inflight < want) {
		unsigned int n = want - cd->nr_resv - cd->resv_inflight;
		struct cf_op *op = cf_rop_get(cd);
		struct cf_rop *r = (struct cf_rop *)op;
		int rc;

		if (!op)
			return;
		r->n = n < CF_RESV_BATCH ? n : CF_RESV_BATCH;
		rc = coffer_obj_reserve(cd->conn, cd->resv_bytes, r->n, r->data, &op->ev);
		if (rc < 0) {
			op->next = cd->rop_free;
			cd->rop_free = op;
			if (rc != -EAGAIN)
				cd->resv_max =
				    0; /* writes create and seal (and say why they fail) */
			return;
		}
		cd->running++;
		cd->resv_inflight += r->n;
	}
}

/* ---- stages ----------------------------------------------------------------------------- */

/*
 * fio reports a failed io_u with strerror() of its code ("Argument list too long" for a
 * block larger than the arena, "No such file or directory" for a missing block): say once
 * per job, in coffer's words, what the first failure means.
 */
static void cf_log_io_error(struct cf_data *cd, const struct io_u *io_u, int err)
{
	const char *what = io_u->ddir == DDIR_READ ? "read" : "write";

	if (cd->err_logged)
		return;
	cd->err_logged = true;
	if (io_u->ddir == DDIR_TRIM)
		what = "trim";
	/* With coffer_prefill=1 the block existed before the reads began: advising the option
	 * the job already sets would send the user the wrong way; under --readonly the
	 * prefill does not run (cf_init), so it is no fix there either. */
	log_err("fio: coffer: %s of %s at offset %llu failed: %s%s\n", what,
		io_u->file ? io_u->file->file_name : "?", (unsigned long long)io_u->offset,
		cf_strerror(err),
		io_u->ddir != DDIR_READ || err != -ENOENT ? ""
		: cd->prefill
		    ? "; coffer_prefill=1 created every block before the reads, so this one was "
		      "evicted since (the jobs' data set is larger than the store: give "
		      "coffer-store a larger -m), trimmed, or written with another block size "
		      "(read with the bs it was written with)"
		: read_only
		    ? "; the block was never written, written with another block size (read "
		      "with the bs it was written with), or evicted (give coffer-store a larger "
		      "-m); --readonly creates no blocks (no coffer_prefill): "
		      "coffer_missing=zeros reads them as zeros"
		    : "; the block was never written, written with another block size (read "
		      "with the bs it was written with), or evicted (give coffer-store a larger "
		      "-m): set coffer_prefill=1 to create missing blocks, or "
		      "coffer_missing=zeros to read them as zeros");
}

/*
 * A read of @io_u found its block @got bytes long, shorter than the read (written with a
 * smaller bs, or by a shorter write at the same offset): it completes short (io_u->resid),
 * and fio requeues the rest, which starts at the next block. fio 3.33 counts none of a
 * short read's bytes once the job has issued its size, so the job ends early with fewer
 * bytes than psync reads and exit 0 (bs=4k written, bs=16k read: 192 KiB of 2 MiB). Say
 * so, once per job, or those numbers pass for a full run.
 */
static void cf_log_short_read(struct cf_data *cd, const struct io_u *io_u, uint64_t got)
{
	if (cd->short_logged)
		return;
	cd->short_logged = true;
	log_err("fio: coffer: read of %s at offset %llu: its block holds %llu of the %llu bytes "
		"read (written with a smaller bs?): each block is one object, so the read is "
		"short and fio may count less than the job read; read with the bs it was "
		"written with\n",
		io_u->file ? io_u->file->file_name : "?", (unsigned long long)io_u->offset,
		(unsigned long long)got, (unsigned long long)io_u->xfer_buflen);
}

/* Whether @stage is one of a write's or a trim's, launched, parked or waiting. */
static bool cf_stage_wt(enum cf_stage stage)
{
	return stage == CF_W_CREATE || stage == CF_W_SEAL || stage == CF_W_PUT ||
	       stage == CF_T_DELETE || stage == CF_W_WAIT;
}

/* The wt_count[] slot of the block @oid names. */
static unsigned int cf_wt_slot(const struct cf_data *cd, const struct coffer_oid *oid)
{
	uint64_t a, b;

	memcpy(&a, oid->id, sizeof(a));
	memcpy(&b, oid->id + COFFER_OID_SIZE - sizeof(b), sizeof(b));
	return (unsigned int)(((a ^ b) * 0x9e3779b97f4a7c15ULL) >> 32) & cd->wt_mask;
}

/*
 * A write or trim of the block @op names is done: the oldest one of this job waiting for it
 * (CF_W_WAIT, lowest seq) goes on the retry list at its own stage, so getevents launches it
 * (and completes it there, within max, if the launch fails for good). Writes of one block
 * therefore reach the store in fio's order: a later one never seals before an earlier one,
 * whose data would then replace it (fio's verify checks the last one issued).
 */
static void cf_order_next(struct cf_data *cd, const struct cf_op *op)
{
	struct cf_req *next = NULL;

	if (--cd->wt_count[cf_wt_slot(cd, &op->oid)] == 0 || cd->nr_wait == 0)
		return;
	for (unsigned int i = 0; i < cd->depth; i++) {
		struct cf_req *r = cd->reqs[i];

		if (r && r->op.stage == CF_W_WAIT && (!next || r->seq < next->seq) &&
		    memcmp(&r->op.oid, &op->oid, sizeof(op->oid)) == 0)
			next = r;
	}
	if (!next)
		return;
	cd->nr_wait--;
	next->op.stage = next->wait_stage;
	cf_retry_push(cd, &next->op);
}

/* Hand a finished io_u to the current getevents call. @err: 0 or a negative errno. */
static void cf_io_done(struct cf_data *cd, struct cf_req *req, int err)
{
	struct io_u *io_u = req->io_u;

	if (cf_stage_wt(req->op.stage)) {
		req->op.stage = CF_IDLE;
		cf_order_next(cd, &req->op);
	}
	req->op.stage = CF_IDLE;
	if (err < 0) {
		io_u->error = (unsigned int)-err;
		cf_log_io_error(cd, io_u, err);
	}
	cd->events[cd->nr_events++] = io_u;
}

/*
 * Launch the stage @op is in. Return 0 when launched, -EAGAIN when the channel is full (the
 * caller keeps the op for later), another negative errno when the launch failed for good.
 */
static int cf_launch(struct cf_data *cd, struct cf_op *op)
{
	struct cf_req *req = (struct cf_req *)op;
	int rc;

	switch (op->kind) {
	case CF_KIND_IO:
		switch (op->stage) {
		case CF_W_CREATE:
			rc = coffer_obj_create_oid(cd->conn, &op->oid, req->io_u->xfer_buflen,
						   COFFER_CREATE_REPLACE, &req->wdata, &op->ev);
			break;
		case CF_W_SEAL:
			rc = coffer_obj_seal_oid(cd->conn, &op->oid, COFFER_SEAL_RELEASE, &op->ev);
			break;
		case CF_W_PUT:
			rc = coffer_obj_put(cd->conn, &op->oid, req->wdata, req->io_u->xfer_buflen,
					    COFFER_CREATE_REPLACE, &op->ev);
			break;
		case CF_R_GET:
			/* by ObjectID: a read needs no object handle (no handle-hash insert and
			 * delete per I/O) and, one ID per request, no bulk completion state
			 * (a malloc and free per I/O); timeout 0: a missing block is answered
			 * at once, with -ENOENT */
			rc = coffer_obj_get_oid(cd->conn, &op->oid, 0, &req->rdata, &req->rsize,
						&op->ev);
			break;
		case CF_T_DELETE:
			rc = coffer_obj_delete(cd->conn, &op->oid, &op->ev);
			break;
		default:
			rc = -EINVAL;
			break;
		}
		break;
	default:
		rc = -EINVAL;
		break;
	}
	if (rc == 0)
		cd->running++;
	return rc;
}

/* Launch now or park on the retry list; a hard failure finishes the io_u or drops the op. */
static void cf_launch_or_park(struct cf_data *cd, struct cf_op *op)
{
	int rc = cf_launch(cd, op);

	if (rc == 0)
		return;
	if (rc == -EAGAIN) {
		cf_retry_push(cd, op);
		return;
	}
	if (op->stage == CF_W_SEAL)
		coffer_obj_abort_oid(cd->conn, &op->oid, NULL);
	if (op->stage == CF_W_PUT)
		cf_resv_back(cd, ((struct cf_req *)op)->wdata);
	cf_io_done(cd, (struct cf_req *)op, rc);
}

/*
 * Relaunch parked stages while fewer than @max io_us completed in this getevents call: a
 * relaunch that fails for good completes its io_u, and getevents never returns more than
 * max. Order does not matter: each parked op is an independent io_u or release, and at most
 * one write or trim of a block is parked or in flight (the later ones wait, CF_W_WAIT).
 */
static void cf_retry_all(struct cf_data *cd, unsigned int max)
{
	struct cf_op *list = cd->retry;

	cd->retry = NULL;
	while (list) {
		struct cf_op *op = list;

		list = op->next;
		op->next = NULL;
		if (cd->nr_events >= max) {
			cf_retry_push(cd, op); /* next call */
			continue;
		}
		cf_launch_or_park(cd, op);
	}
}

/*
 * Launch the reads queued since the last flush as vectors of up to COFFER_GET_BULK_MAX gets
 * (coffer_obj_get_oid_vec): one channel pin and one pair of submit-lock round trips per vector
 * instead of per read, and the ring entries written back to back. Each read still has its own
 * request, event and completion. What cannot go out now (a full channel, or an error) waits
 * on the retry list: getevents relaunches it alone, and a lasting error completes its io_u
 * there (queue has already returned FIO_Q_QUEUED for it).
 */
/*
 * Whether a write or trim of this job to the block @op names is queued and not done
 * (launched, parked or waiting), @op itself excepted. wt_count[] answers "no" for most
 * blocks without a look at the io_us.
 */
static bool cf_block_busy(const struct cf_data *cd, const struct cf_op *op)
{
	if (cd->wt_count[cf_wt_slot(cd, &op->oid)] == 0)
		return false;
	for (unsigned int i = 0; i < cd->depth; i++) {
		const struct cf_req *r = cd->reqs[i];

		if (r && &r->op != op && cf_stage_wt(r->op.stage) &&
		    memcmp(&r->op.oid, &op->oid, sizeof(op->oid)) == 0)
			return true;
	}
	return false;
}

/*
 * Answer the noted reads that the store's object index can answer (coffer_obj_read_oid_vec():
 * lookups and copies in shared memory, no request, no store CPU, no release, and the memory
 * misses of the batch overlapped) and drop them from pend[]; their io_us are reaped by the
 * next getevents. A block with a write or trim of this job in flight goes to the store, in
 * order after it, as before; so does every miss.
 */
static void cf_pend_index(struct thread_data *td, struct cf_data *cd)
{
	unsigned int keep = 0, nv = 0;
	struct timespec now;

	for (unsigned int i = 0; i < cd->nr_pend; i++) {
		struct cf_req *req = cd->pend[i];

		if (cd->may_conflict && cf_block_busy(cd, &req->op))
			continue;
		cd->rreq[nv] = req;
		cd->rvec[nv++] = (struct coffer_read_vec){
		    .oid = req->op.oid, .buf = req->io_u->xfer_buf, .len = req->io_u->xfer_buflen};
	}
	if (nv == 0)
		return;
	/* The copy below is the whole read: fio's issue time is now, before it, as a get's
	 * is its launch (cf_commit). Stamped at commit, after the copy, the read went into
	 * slat and clat was the wait for the next getevents (70 ns at the least, 4k randread
	 * at iodepth 16; tests/fio index-latency). */
	if (fio_fill_issue_time(td))
		fio_gettime(&now, NULL);
	if (coffer_obj_read_oid_vec(cd->conn, cd->rvec, nv) <= 0)
		return;
	for (unsigned int v = 0; v < nv; v++) {
		struct io_u *io_u = cd->rreq[v]->io_u;

		if (cd->rvec[v].result < 0)
			continue;
		if (fio_fill_issue_time(td)) {
			io_u->issue_time = now;
			io_u_queued(td, io_u);
			cd->rreq[v]->issued = true;
		}
		io_u->resid = io_u->xfer_buflen - (unsigned long long)cd->rvec[v].result;
		if (io_u->resid)
			cf_log_short_read(cd, io_u, (uint64_t)cd->rvec[v].result);
		cd->rreq[v]->op.stage = CF_IDLE;
		cd->ready[cd->nr_ready++] = io_u;
	}
	for (unsigned int i = 0; i < cd->nr_pend; i++)
		if (cd->pend[i]->op.stage == CF_R_GET)
			cd->pend[keep++] = cd->pend[i];
	cd->nr_pend = keep;
}

static void cf_pend_flush(struct thread_data *td, struct cf_data *cd)
{
	struct coffer_get_vec gv[COFFER_GET_BULK_MAX];
	unsigned int done = 0;

	if (cd->index && cd->nr_pend)
		cf_pend_index(td, cd);

	while (done < cd->nr_pend) {
		unsigned int m = cd->nr_pend - done;
		int rc;

		if (m > COFFER_GET_BULK_MAX)
			m = COFFER_GET_BULK_MAX;
		for (unsigned int i = 0; i < m; i++) {
			struct cf_req *req = cd->pend[done + i];

			gv[i] = (struct coffer_get_vec){.oid = req->op.oid,
							.ev = &req->op.ev,
							.data = &req->rdata,
							.size = &req->rsize};
		}
		/* timeout 0: a missing block is answered at once, with -ENOENT */
		rc = coffer_obj_get_oid_vec(cd->conn, gv, m, 0);
		if (rc <= 0)
			break;
		cd->running += (unsigned int)rc;
		done += (unsigned int)rc;
	}
	for (unsigned int i = done; i < cd->nr_pend; i++)
		cf_retry_push(cd, &cd->pend[i]->op);
	cd->nr_pend = 0;
}

/*
 * Send the releases of the blocks read since the last call as one batch on one pooled event
 * (coffer_obj_release_data_bulk): one submission and one event for the whole batch instead of
 * one per read. A full channel (-EAGAIN) keeps them for the next call; another failure drops
 * them: the connection's references die with it at the latest.
 */
static void cf_rel_flush(struct cf_data *cd)
{
	struct cf_op *op;
	int rc;

	if (!cd->nr_rel_pend)
		return;
	op = cf_rel_get(cd);
	if (!op) {
		/* no memory for an event: release synchronously rather than leak references */
		coffer_obj_release_data_bulk(cd->conn, cd->rel_pend, cd->rel_data, cd->nr_rel_pend,
					     NULL);
		cd->nr_rel_pend = 0;
		return;
	}
	rc = coffer_obj_release_data_bulk(cd->conn, cd->rel_pend, cd->rel_data, cd->nr_rel_pend,
					  &op->ev);
	if (rc == 0) {
		cd->running++;
		cd->nr_rel_pend = 0;
		return;
	}
	cf_rel_put(cd, op);
	if (rc != -EAGAIN)
		cd->nr_rel_pend = 0;
}

static void cf_read_done(struct cf_data *cd, struct cf_req *req, int err)
{
	struct io_u *io_u = req->io_u;
	uint64_t n;

	if (err < 0) {
		cf_io_done(cd, req, err);
		return;
	}
	n = req->rsize < io_u->xfer_buflen ? req->rsize : io_u->xfer_buflen;
	memcpy(io_u->xfer_buf, req->rdata, n);
	io_u->resid = io_u->xfer_buflen - n;
	if (io_u->resid)
		cf_log_short_read(cd, io_u, n);

	/* The copy is done: the io_u completes now; the release goes out with the others of
	 * this getevents call (cf_rel_flush). */
	if (cd->nr_rel_pend == COFFER_GET_BULK_MAX) {
		cf_rel_flush(cd);
		if (cd->nr_rel_pend == COFFER_GET_BULK_MAX) {
			/* the channel stays full: release these synchronously (the blocking
			 * call has its own channel) rather than hold references unbounded */
			coffer_obj_release_data_bulk(cd->conn, cd->rel_pend, cd->rel_data,
						     cd->nr_rel_pend, NULL);
			cd->nr_rel_pend = 0;
		}
	}
	cd->rel_data[cd->nr_rel_pend] = req->rdata;
	cd->rel_pend[cd->nr_rel_pend++] = req->op.oid;
	cf_io_done(cd, req, 0);
}

/*
 * Start loading the block a completed get points at, before it is copied out. A block is a
 * random 4 KiB of an arena much larger than the caches, so its copy waits for memory line by
 * line: ~35% of fio's samples in a 5 s randread profile were in that memcpy. The hardware
 * prefetcher helps little (it starts after a few misses and stops at the page boundary), so
 * getevents prefetches the next completion's block while it copies the current one.
 */
static void cf_prefetch_read(const struct cf_data *cd, struct coffer_event *ev)
{
	struct cf_op *op = cf_ev_op(ev);
	const struct cf_req *req = (const struct cf_req *)op;
	const char *p;
	uint64_t n;

	if (cd->closing || op->kind != CF_KIND_IO || op->stage != CF_R_GET || ev->ev_error != 0 ||
	    !req->io_u)
		return;
	p = req->rdata;
	n = req->rsize < req->io_u->xfer_buflen ? req->rsize : req->io_u->xfer_buflen;
	for (uint64_t off = 0; off < n; off += 64)
		__builtin_prefetch(p + off, 0, 3);
}

/* One event came back from the EQ: advance its op. @missing: enum cf_missing. */
/*
 * A write found its block being written by another writer (another job's or another
 * client's, between create and seal: -EEXIST; this job's own wait, CF_W_WAIT). Retry it, for a
 * bounded time, or a client that keeps the block unsealed would hold this job forever. Return: true
 * when parked for a retry; false when the io_u completed with ETIMEDOUT.
 */
static bool cf_write_busy(struct cf_data *cd, struct cf_req *req)
{
	int64_t now = cf_now_us();

	if (!req->busy_since)
		req->busy_since = now;
	if (now - req->busy_since <= CF_WRITE_BUSY_US) {
		cf_retry_push(cd, &req->op);
		return true;
	}
	if (!cd->busy_logged) {
		cd->busy_logged = true;
		log_err("fio: coffer: write of %s at offset %llu: the block is being created by "
			"another client, which did not seal it within %d s\n",
			req->io_u->file ? req->io_u->file->file_name : "?",
			(unsigned long long)req->io_u->offset, CF_WRITE_BUSY_US / 1000000);
	}
	cf_io_done(cd, req, -ETIMEDOUT);
	return false;
}

static void cf_handle_event(struct cf_data *cd, unsigned int missing, struct coffer_event *ev)
{
	struct cf_op *op = cf_ev_op(ev);
	struct cf_req *req = (struct cf_req *)op;
	int err = ev->ev_error;

	cd->running--;
	if (op->kind == CF_KIND_RELEASE) {
		cf_rel_put(cd, op);
		return;
	}
	if (op->kind == CF_KIND_RESERVE) {
		struct cf_rop *r = (struct cf_rop *)op;

		cd->resv_inflight -= r->n;
		/* what was reserved is ours even when some of the batch failed */
		for (unsigned int i = 0; i < r->n && !cd->closing; i++)
			if (r->data[i])
				cf_resv_back(cd, r->data[i]);
		if (err < 0)
			cd->resv_max = 0; /* writes create and seal (and say why they fail) */
		op->next = cd->rop_free;
		cd->rop_free = op;
		return;
	}
	if (cd->closing || !req->io_u) {
		/* nobody waits for this io_u and its buffer is gone: drop the op. A created
		 * replacement stays unsealed and dies with the connection; a read's reference
		 * is dropped by the disconnect. */
		op->stage = CF_IDLE;
		return;
	}

	switch (op->stage) {
	case CF_W_CREATE:
		if (err == -EEXIST) {
			cf_write_busy(cd, req);
			return;
		}
		if (err < 0) {
			cf_io_done(cd, req, err);
			return;
		}
		cf_copy_in(req->wdata, req->io_u->xfer_buf, req->io_u->xfer_buflen);
		op->stage = CF_W_SEAL;
		cf_launch_or_park(cd, op);
		return;
	case CF_W_SEAL:
		cf_io_done(cd, req, err);
		return;
	case CF_W_PUT:
		if (err == -EEXIST) {
			/* the data stays in the reserved block while the put is retried */
			if (!cf_write_busy(cd, req))
				cf_resv_back(cd, req->wdata);
			return;
		}
		if (err < 0 && err != -ENOENT && err != -ENOTCONN)
			cf_resv_back(cd, req->wdata); /* still reserved: not used up */
		cf_io_done(cd, req, err);
		return;
	case CF_R_GET:
		/* IO_U_F_TRIMMED: fio reads back a block it trimmed (trim_percentage with
		 * trim_verify_zero=1) and expects zeros, as from a device that zeroes discarded
		 * blocks; the trim deleted the object, so its absence is that zero block, not
		 * a missing one (before: ENOENT under coffer_missing=error; test
		 * fio-trim-verify-zero) */
		if (err == -ENOENT &&
		    (missing == CF_MISSING_ZEROS || (req->io_u->flags & IO_U_F_TRIMMED))) {
			memset(req->io_u->xfer_buf, 0, req->io_u->xfer_buflen);
			cf_io_done(cd, req, 0);
			return;
		}
		cf_read_done(cd, req, err);
		return;
	case CF_T_DELETE:
		/* -ENOENT: no such block; -EBUSY: its first version is still being created by
		 * another client, so it does not exist yet either: the trim is ordered before
		 * that write, as a trim racing a write to one LBA may be */
		cf_io_done(cd, req, err == -ENOENT || err == -EBUSY ? 0 : err);
		return;
	default:
		cf_io_done(cd, req, -EPROTO);
		return;
	}
}

/* ---- draining (cleanup and error paths) ------------------------------------------------ */

/*
 * Reap everything still in flight on the job's EQ, so that events can be finalised and the
 * EQ destroyed. Parked second stages are abandoned (an unsealed replacement is aborted);
 * releases that cannot go out are left to the disconnect, which drops every reference of
 * this client.
 * Gives up after CF_DRAIN_TIMEOUT_US of silence from the store; the forced EQ destroy then
 * waits for the runtime to fail what is left.
 */
static void cf_drain(struct cf_data *cd, unsigned int missing)
{
	struct coffer_event *evs[CF_POLL_BATCH];
	int64_t deadline = cf_now_us() + CF_DRAIN_TIMEOUT_US;

	/* reads queued and never launched hold nothing in the store: drop them; so do writes
	 * and trims waiting for an earlier one of their block (a put's reserved block is
	 * freed by the disconnect) */
	for (unsigned int i = 0; i < cd->nr_pend; i++)
		cd->pend[i]->op.stage = CF_IDLE;
	cd->nr_pend = 0;
	for (unsigned int i = 0; cd->nr_wait && i < cd->depth; i++)
		if (cd->reqs[i] && cd->reqs[i]->op.stage == CF_W_WAIT)
			cd->reqs[i]->op.stage = CF_IDLE;
	cd->nr_wait = 0;
	for (;;) {
		while (cd->retry) {
			struct cf_op *op = cd->retry;

			cd->retry = op->next;
			op->next = NULL;
			if (op->stage == CF_W_SEAL)
				coffer_obj_abort_oid(cd->conn, &op->oid, NULL);
			op->stage = CF_IDLE;
		}
		/* reads completed so far hold references: send their releases, and wait for
		 * them below like any other event (what cannot go out dies with the
		 * connection) */
		cf_rel_flush(cd);
		if (!cd->running || cf_now_us() > deadline)
			break;
		coffer_flush(cd->conn);
		int n = coffer_eq_poll(cd->eq, 1, 100 * 1000, CF_POLL_BATCH, evs);

		if (n < 0)
			break;
		for (int i = 0; i < n; i++) {
			cd->nr_events = 0; /* nobody is waiting for these io_us any more */
			cf_handle_event(cd, missing, evs[i]);
		}
	}
	cd->nr_events = 0;
}

/* ---- fio hooks -------------------------------------------------------------------------- */

static const char *cf_socket_path(const struct cf_options *o)
{
	/* NULL: the runtime's default path, $COFFER_SOCKET unless unset or empty (libcoffer's
	 * rule; getenv()'s "" passed on would be coffer_connect()'s -EINVAL) */
	return o->socket[0] ? o->socket : NULL;
}

/*
 * Each block is one object at the offset it was written at, and objects never merge
 * (README "Blocks are whole objects"). When this job's blocks may overlap at different
 * offsets, say once (per job, at init) that a read gets the block written at its own
 * offset, whole, without the bytes later writes at other offsets put there: fio's verify
 * cannot see it (it drops a logged block a later write overlaps), so the stale bytes went
 * unsaid (16k at 0 then 4k at 4k: a 16k read at 0 verifies the old pattern; psync's
 * reads the new one at 4k). Overlap is possible for random writes aligned below their
 * largest size (bssplit/bsrange, or blockalign < bs; fio aligns to the smallest size by
 * default), and for reads and writes of one job with other sizes or alignments.
 */
static void cf_note_overlap(const struct thread_data *td)
{
	const struct thread_options *t = &td->o;
	const char *why = NULL;

	if (!td_write(td))
		return;
	if (td_random(td) && t->ba[DDIR_WRITE] < t->max_bs[DDIR_WRITE])
		why = "random writes aligned below their largest size";
	else if (td_read(td) && (t->min_bs[DDIR_READ] != t->min_bs[DDIR_WRITE] ||
				 t->max_bs[DDIR_READ] != t->max_bs[DDIR_WRITE] ||
				 (td_random(td) && t->ba[DDIR_READ] != t->ba[DDIR_WRITE])))
		why = "reads of other sizes or alignments than the writes";
	if (!why)
		return;
	log_err("fio: coffer: %s: this job's blocks overlap at different offsets, and each "
		"block is one object at the offset it was written at: a read gets the block "
		"written at its own offset, whole, not the bytes later writes at other offsets "
		"put there (fio's verify does not see it); write and read each offset with one "
		"block size\n",
		why);
}

static int cf_init(struct thread_data *td)
{
	struct cf_options *o = td->eo;
	const char *path = cf_socket_path(o);
	struct cf_data *cd;
	unsigned int slots;
	int rc;

	/* fio pre-reads with lseek(2) and read(2) on the file's descriptor, which a store file
	 * does not have: say so instead of fio's "Bad file descriptor". */
	if (td->o.pre_read) {
		log_err("fio: coffer: pre_read=1 is not supported (a coffer file has no file "
			"descriptor to pre-read); coffer_prefill=1 creates missing blocks\n");
		td_verror(td, EINVAL, "pre_read");
		return 1;
	}
	/* create_only=1 runs nothing but fio's file setup, which lays out a psync file; fio
	 * opens no file of such a job, and the prefill (this engine's layout) runs when a file
	 * is opened: the job created nothing and exited 0, and the next job's reads failed.
	 * Refuse, and say how to prefill. */
	if (td->o.create_only && o->prefill && td_read(td)) {
		log_err(
		    "fio: coffer: create_only=1 creates no blocks (fio opens no file of the "
		    "job, and coffer_prefill=1 fills a file when it is opened): prefill with the "
		    "read job itself, or a short one (runtime=1)\n");
		td_verror(td, EINVAL, "create_only");
		return 1;
	}
	/* bs_unaligned= with a bsrange= makes read sizes of any byte count, so sequential reads
	 * start at any byte: no set of blocks holds one at every offset they may start at. The
	 * prefill made them every min_bs, the second read failed with ENOENT, and its line
	 * blamed eviction or a trim. Refuse, and say so. */
	if (o->prefill && td_read(td) && td->o.bs_unaligned && !td->o.bssplit_nr[DDIR_READ] &&
	    td->o.min_bs[DDIR_READ] != td->o.max_bs[DDIR_READ] &&
	    (!td_random(td) || td->o.perc_rand[DDIR_READ] < 100)) {
		log_err("fio: coffer: coffer_prefill=1 cannot serve sequential reads with "
			"bs_unaligned=1 and a bsrange (they start at any byte, each block is one "
			"object at one offset): write the file with the same job shape first, or "
			"read with random offsets or one bs\n");
		td_verror(td, EINVAL, "coffer_prefill");
		return 1;
	}
	/* fill_device=1 without size= writes until ENOSPC (fio sets size to -1); the store
	 * never says that: it evicts its oldest blocks to make room, so the job wrote on at
	 * full speed until its runtime or 16 EiB (100 GB in 20 s into a 64 MiB store). */
	if (td->o.fill_device && td->o.size == -1ULL) {
		log_err("fio: coffer: fill_device=1 would never end: the store evicts its oldest "
			"blocks to make room rather than fill up (no ENOSPC); give size= (the "
			"store holds less than its -m)\n");
		td_verror(td, EINVAL, "fill_device");
		return 1;
	}
	/* fio starts a file_append=1 job at the file's size, which for a store file is the
	 * job's own size= (cf_get_file_size): every run wrote [size, 2 x size), past blocks
	 * nobody wrote, where psync appends at the end of what is there (0 for a new file).
	 * The store keeps no end of a file to append at: refuse, and say so. */
	if (td->o.file_append) {
		log_err("fio: coffer: file_append=1 is not supported (a coffer file has no end "
			"of its own to append at: its blocks live in the store); give offset= "
			"to start writing past existing blocks\n");
		td_verror(td, EINVAL, "file_append");
		return 1;
	}
	cf_note_overlap(td);
	cd = calloc(1, sizeof(*cd));
	if (!cd) {
		td_verror(td, ENOMEM, "coffer init");
		return 1;
	}
	td->io_ops_data = cd;
	cd->sync_fd = -1;
	/* fsync_on_close=1: fio calls fsync(2) on the file's descriptor when it closes a file
	 * (put_file), and a store file has none (-1): every close failed with EBADF, so a job
	 * that closes files before its end (file_service_type=sequential, openfiles=) stopped
	 * at the first with error 9 and no line saying why, where psync's passes. An empty
	 * memfd (tmpfs: its fsync is a no-op) stands in as every open file's descriptor; the
	 * sync itself has nothing to do (cf_queue). */
	if (td->o.fsync_on_close) {
		cd->sync_fd = memfd_create("coffer-fio-fsync", MFD_CLOEXEC);
		if (cd->sync_fd < 0) {
			int err = errno;

			log_err("fio: coffer: memfd_create for fsync_on_close=1 failed: %s\n",
				strerror(err));
			td_verror(td, err, "memfd_create");
			return 1;
		}
	}

	cd->depth = td->o.iodepth ? td->o.iodepth : 1;
	slots = cd->depth > CF_POLL_BATCH ? cd->depth : CF_POLL_BATCH;
	cd->events = calloc(slots, sizeof(*cd->events));
	cd->queued = calloc(cd->depth, sizeof(*cd->queued));
	cd->reqs = calloc(cd->depth, sizeof(*cd->reqs));
	cd->pend = calloc(cd->depth, sizeof(*cd->pend));
	cd->ready = calloc(cd->depth, sizeof(*cd->ready));
	cd->rvec = calloc(cd->depth, sizeof(*cd->rvec));
	cd->rreq = calloc(cd->depth, sizeof(*cd->rreq));
	/* a few slots per I/O in flight: a block with nothing queued finds its slot at 0 */
	for (cd->wt_mask = 63; cd->wt_mask < 4 * cd->depth - 1; cd->wt_mask = 2 * cd->wt_mask + 1)
		;
	cd->wt_count = calloc((size_t)cd->wt_mask + 1, sizeof(*cd->wt_count));
	cd->index = o->index != 0;
	/* fio's --readonly refuses every write and trim, and lays out no file for a job that
	 * reads ("refusing extend of file due to read-only"); the prefill is that layout here
	 * (it creates blocks), so it is skipped the same way, and a missing block's error does
	 * not claim the prefill made it. Before, the prefill created them under --readonly. */
	cd->prefill = o->prefill != 0 && !read_only;
	if (o->prefill && read_only && td_read(td))
		log_err("fio: coffer: --readonly: coffer_prefill=1 creates no blocks (it would "
			"write the store); a read of a missing block fails\n");
	cd->may_conflict = td_write(td) || td_trim(td);
	/* writes of one block size put reserved blocks (coffer_put) */
	if (o->put && td_write(td) && td->o.min_bs[DDIR_WRITE] == td->o.max_bs[DDIR_WRITE] &&
	    td->o.max_bs[DDIR_WRITE] > 0) {
		cd->resv_max = 2 * cd->depth < CF_RESV_MAX ? 2 * cd->depth : CF_RESV_MAX;
		cd->resv_bytes = td->o.max_bs[DDIR_WRITE];
		cd->resv_cap = cd->resv_max + cd->depth;
		cd->resv = calloc(cd->resv_cap, sizeof(*cd->resv));
		if (!cd->resv) {
			td_verror(td, ENOMEM, "coffer init");
			return 1;
		}
	}
	cd->rel_pend = calloc(COFFER_GET_BULK_MAX, sizeof(*cd->rel_pend));
	cd->rel_data = calloc(COFFER_GET_BULK_MAX, sizeof(*cd->rel_data));
	if (!cd->events || !cd->queued || !cd->reqs || !cd->pend || !cd->ready || !cd->rvec ||
	    !cd->rreq || !cd->wt_count || !cd->rel_pend || !cd->rel_data) {
		td_verror(td, ENOMEM, "coffer init");
		return 1;
	}

	rc = coffer_init();
	if (rc < 0) {
		if (!cf_env_refused("coffer_init()", rc))
			log_err("fio: coffer: runtime init failed: %s\n", cf_strerror(rc));
		td_verror(td, -rc, "coffer_init");
		return 1;
	}
	cd->runtime_up = true;

	rc = coffer_connect(path, &cd->conn);
	if (rc < 0) {
		char defpath[108] = "its default socket";

		/* name the path the runtime tried (set coffer_socket or COFFER_SOCKET otherwise) */
		if (!path && coffer__default_socket_path(defpath, sizeof(defpath)) != 0)
			snprintf(defpath, sizeof(defpath), "its default socket");
		if (!cf_env_refused("coffer_connect()", rc))
			log_err("fio: coffer: cannot connect to coffer-store at %s: %s\n",
				path ? path : defpath, cf_strerror(rc));
		cd->conn = COFFER_HANDLE_NULL;
		td_verror(td, -rc, "coffer_connect");
		return 1;
	}

	rc = coffer_eq_create(&cd->eq);
	if (rc < 0) {
		log_err("fio: coffer: cannot create an event queue: %s\n", cf_strerror(rc));
		cd->eq = COFFER_HANDLE_NULL;
		td_verror(td, -rc, "coffer_eq_create");
		return 1;
	}
	return 0;
}

static void cf_cleanup(struct thread_data *td)
{
	struct cf_data *cd = td->io_ops_data;
	const struct cf_options *o = td->eo;

	bool quiet = true;

	if (!cd)
		return;
	/* io_us fio never handed back (error path) are gone: finish their ops blind */
	cd->closing = true;
	if (cd->eq.cookie && (cd->running || cd->retry || cd->nr_pend || cd->nr_wait))
		cf_drain(cd, o ? o->missing : CF_MISSING_ERROR);
	/* The forced destroy waits for whatever the drain gave up on: after it, no completion
	 * can write into an event, so their memory may go. */
	if (cd->eq.cookie)
		quiet = coffer_eq_destroy(cd->eq, COFFER_EQ_FORCE) == 0;
	while (cd->rel_all) {
		struct cf_op *op = cd->rel_all;

		cd->rel_all = op->chain;
		if (coffer_event_fini(&op->ev) == 0 || quiet)
			free(op);
	}
	for (unsigned int i = 0; cd->reqs && i < cd->depth; i++) {
		struct cf_req *req = cd->reqs[i];

		if (!req)
			continue;
		if (req->io_u)
			req->io_u->engine_data = NULL;
		if (coffer_event_fini(&req->op.ev) == 0 || quiet)
			free(req);
	}
	if (cd->conn.cookie)
		coffer_disconnect(cd->conn);
	if (cd->runtime_up)
		coffer_fini();
	free(cd->fstate);
	free(cd->events);
	free(cd->queued);
	free(cd->reqs);
	free(cd->pend);
	free(cd->ready);
	free(cd->rvec);
	free(cd->rreq);
	free(cd->wt_count);
	free(cd->rel_pend);
	free(cd->rel_data);
	free(cd->resv);
	if (cd->sync_fd >= 0)
		close(cd->sync_fd);
	free(cd);
	td->io_ops_data = NULL;
}

static int cf_io_u_init(struct thread_data *td, struct io_u *io_u)
{
	struct cf_data *cd = td->io_ops_data;
	struct cf_req *req;
	int rc;

	req = calloc(1, sizeof(*req));
	if (!req)
		return ENOMEM;
	rc = coffer_event_init(&req->op.ev, cd->eq, NULL);
	if (rc < 0) {
		free(req);
		return -rc;
	}
	req->op.kind = CF_KIND_IO;
	req->io_u = io_u;
	/* fio keeps io_u->index in a union with engine_data: read it before engine_data is
	 * set (after, it is the low half of req's address, and reqs[] stayed empty) */
	req->index = io_u->index;
	io_u->engine_data = req;
	if (req->index < cd->depth)
		cd->reqs[req->index] = req;
	return 0;
}

static void cf_io_u_free(struct thread_data *td, struct io_u *io_u)
{
	struct cf_data *cd = td->io_ops_data;
	struct cf_req *req = io_u->engine_data;
	const struct cf_options *o = td->eo;

	if (!req)
		return;
	/*
	 * After an error fio frees only the io_us on its free list: io_us still in flight
	 * never come here, and their buffers are freed after this loop. So reap everything at
	 * the first call, while every io_u and buffer still exists.
	 */
	if (cd && (cd->running || cd->retry || cd->nr_pend || cd->nr_wait))
		cf_drain(cd, o ? o->missing : CF_MISSING_ERROR);
	io_u->engine_data = NULL;
	req->io_u = NULL;
	if (coffer_event_fini(&req->op.ev) < 0)
		return; /* still in flight (the store did not answer): cleanup frees it */
	if (cd && req->index < cd->depth && cd->reqs[req->index] == req)
		cd->reqs[req->index] = NULL;
	free(req);
}

/*
 * Stamp fio's issue time of @io_u, which queue answers FIO_Q_COMPLETED (a sync, or an I/O
 * whose launch failed for good). The engine sets FIO_ASYNCIO_SETS_ISSUE_TIME, so fio stamps
 * none itself, and commit stamps only what was queued: left alone, such an io_u's latency
 * ran from its previous use (syncs of fsync=4 at iodepth 8: mean ~1 ms, max 133 ms, where
 * psync's take ~1.3 us; tests/fio sync-latency). Only fio's main thread calls it.
 */
static void cf_stamp_now(struct thread_data *td, struct io_u *io_u)
{
	if (!fio_fill_issue_time(td))
		return;
	fio_gettime(&io_u->issue_time, NULL);
	if (td->o.read_iolog_file)
		td->last_issue = io_u->issue_time; /* only read_iolog's replay timing uses it */
}

static enum fio_q_status cf_queue(struct thread_data *td, struct io_u *io_u)
{
	struct cf_data *cd = td->io_ops_data;
	struct cf_req *req = io_u->engine_data;
	const struct cf_file *cff = FILE_ENG_DATA(io_u->file);
	enum cf_stage stage;
	bool busy;
	int rc;

	fio_ro_check(td, io_u);

	switch (io_u->ddir) {
	case DDIR_WRITE:
		stage = CF_W_CREATE;
		break;
	case DDIR_READ:
		stage = CF_R_GET;
		break;
	case DDIR_TRIM:
		stage = CF_T_DELETE;
		break;
	default:
		/* sync/datasync/sync_file_range: a write completes only when its seal did, and a
		 * sealed object is visible to every client: there is nothing left to make
		 * durable. Like libaio's and DAOS dfs's, the sync completes at once and does
		 * not wait for writes still in flight (an fsync covers the writes completed
		 * before it; fio notes a sync only when it completes, so one held back is
		 * issued again and again: io_uring's fsync=4 over 1024 writes issues 1023). */
		cf_stamp_now(td, io_u);
		return FIO_Q_COMPLETED;
	}

	cf_block_oid(cff, io_u->offset, &req->op.oid);
	if (stage == CF_W_CREATE && cd->nr_resv && io_u->xfer_buflen &&
	    io_u->xfer_buflen <= cd->resv_bytes) {
		/* a reserved block: copy now, one put (cf_resv_back() says more) */
		req->wdata = cd->resv[--cd->nr_resv];
		cf_copy_in(req->wdata, io_u->xfer_buf, io_u->xfer_buflen);
		stage = CF_W_PUT;
	}
	req->op.stage = stage;
	req->busy_since = 0;
	req->issued = false;
	if (stage == CF_R_GET) {
		/* launched with the others of this batch at commit (cf_pend_flush) */
		cd->pend[cd->nr_pend++] = req;
		cd->queued[cd->nr_queued++] = io_u;
		return FIO_Q_QUEUED;
	}
	/* the reads queued before this I/O go out first: requests keep fio's order */
	cf_pend_flush(td, cd);
	req->seq = cd->seq++;
	/* asked before this write counts itself: else its own count made every write scan all
	 * io_us (2.6% of fio's samples, perf, randwrite numjobs 2) */
	busy = cf_block_busy(cd, &req->op);
	cd->wt_count[cf_wt_slot(cd, &req->op.oid)]++;
	if (busy) {
		/* An earlier write or trim of this job to the block is not done: this one
		 * goes out once it is (cf_order_next). Two in flight at once may complete in
		 * either order, and the older data would win (norandommap: fio's verify
		 * then finds the header of an older write; tests/fio overwrite-order). */
		req->wait_stage = stage;
		req->op.stage = CF_W_WAIT;
		cd->nr_wait++;
		cd->queued[cd->nr_queued++] = io_u;
		return FIO_Q_QUEUED;
	}
	rc = cf_launch(cd, &req->op);
	if (rc == -EAGAIN) {
		/* The channel is full: park the I/O (getevents relaunches it once the poll made
		 * room) rather than answer FIO_Q_BUSY. fio 3.33 requeues a busy write by filling
		 * its verify header again, which draws one more verify seed: every later block
		 * of a read/write job then fails verify with "bad header rand_seed" although
		 * its data is right (seen at iodepth >= 512, where the ring fills up). */
		cf_retry_push(cd, &req->op);
		cd->queued[cd->nr_queued++] = io_u;
		return FIO_Q_QUEUED;
	}
	if (rc < 0) {
		if (req->op.stage == CF_W_PUT)
			cf_resv_back(cd, req->wdata); /* the put never went out: still reserved */
		req->op.stage = CF_IDLE;
		cf_order_next(cd, &req->op); /* nothing waits for it: only the count drops */
		cf_log_io_error(cd, io_u, rc);
		io_u->error = (unsigned int)-rc;
		cf_stamp_now(td, io_u);
		return FIO_Q_COMPLETED;
	}
	cd->queued[cd->nr_queued++] = io_u;
	return FIO_Q_QUEUED;
}

static int cf_commit(struct thread_data *td)
{
	struct cf_data *cd = td->io_ops_data;
	int rc;

	cf_pend_flush(td, cd);
	cf_resv_refill(td, cd);
	rc = coffer_flush(cd->conn);
	if (cd->nr_queued) {
		if (fio_fill_issue_time(td)) {
			struct timespec now;

			fio_gettime(&now, NULL);
			for (unsigned int i = 0; i < cd->nr_queued; i++) {
				struct cf_req *req = cd->queued[i]->engine_data;

				if (req->issued) { /* answered by the index, stamped before */
					req->issued = false;
					continue;
				}
				cd->queued[i]->issue_time = now;
				io_u_queued(td, cd->queued[i]);
			}
			if (td->o.read_iolog_file)
				td->last_issue = now;
		}
		io_u_mark_submit(td, cd->nr_queued);
		cd->nr_queued = 0;
	}
	/* -EAGAIN: the ring is full; what did not fit goes out with the next poll */
	if (rc == -EAGAIN)
		return 0;
	/* fio 3.33 keeps a negative commit return as the job's error when getevents commits
	 * (td_io_getevents()); set the positive errno first, the one fio keeps */
	if (rc < 0)
		td_verror(td, -rc, "coffer commit");
	return rc;
}

static int cf_getevents(struct thread_data *td, unsigned int min, unsigned int max,
			const struct timespec *t)
{
	struct cf_data *cd = td->io_ops_data;
	const struct cf_options *o = td->eo;
	struct coffer_event *evs[CF_POLL_BATCH];
	int64_t deadline = -1, spin_until = -1;
	int rc = 0;

	cd->nr_events = 0;
	cf_pend_flush(td, cd); /* fio commits before it reaps; this only keeps nothing behind */
	if (max > cd->depth)
		max = cd->depth;
	if (min > max)
		min = max;
	if (t)
		deadline = cf_now_us() + (int64_t)t->tv_sec * 1000000 + t->tv_nsec / 1000;

	/* reads the object index answered at commit complete first (at most max) */
	while (cd->nr_ready && cd->nr_events < max)
		cd->events[cd->nr_events++] = cd->ready[--cd->nr_ready];
	for (;;) {
		int64_t tmo;
		unsigned int want;
		int n;

		if (cd->retry)
			cf_retry_all(cd, max);
		if (cd->nr_events >= max)
			break;
		if (!cd->running && !cd->retry)
			break; /* nothing in flight can complete */

		if (cd->nr_events >= min) {
			tmo = 0; /* take what is there, do not wait */
		} else if (deadline >= 0) {
			tmo = deadline - cf_now_us();
			if (tmo < 0)
				tmo = 0;
		} else {
			tmo = -1;
		}
		if (cd->retry && (tmo < 0 || tmo > CF_RETRY_SLEEP_US))
			tmo = CF_RETRY_SLEEP_US; /* come back soon to relaunch */
		if (tmo != 0 && o->spin_us) {
			/* Requests are in flight and the store is working on them: poll without
			 * sleeping for a bounded while first. Sleeping costs a doorbell write in
			 * the store and a wake-up here, several syscalls per round trip, more than
			 * the few microseconds a batch takes. Measured, 4k randread at iodepth 32
			 * on 2 cores with little else running: ~0.35M -> ~0.65M IOPS, 36 -> ~0
			 * context switches per 1000 I/Os; with two other busy threads on the
			 * host it is within noise either way. Bounded: never more than spin_us
			 * per getevents call, then the poll below sleeps. */
			int64_t now = cf_now_us();

			if (spin_until < 0)
				spin_until = now + o->spin_us;
			if (now < spin_until)
				tmo = 0;
		}
		want = max - cd->nr_events;
		if (want > CF_POLL_BATCH)
			want = CF_POLL_BATCH;
		/* sleeps on the EQ's wake fd (no spinning) up to tmo while nothing completed */
		n = coffer_eq_poll(cd->eq, 1, tmo, want, evs);
		if (n < 0) {
			rc = n;
			break;
		}
		if (n > 0)
			cf_prefetch_read(cd, evs[0]);
		for (int i = 0; i < n; i++) {
			/* the next block streams in while this one is copied */
			if (i + 1 < n)
				cf_prefetch_read(cd, evs[i + 1]);
			cf_handle_event(cd, o->missing, evs[i]);
		}
		if (n > 0)
			continue; /* more may be ready */
		if (cd->nr_events >= min)
			break;
		if (spin_until >= 0) {
			int64_t now = cf_now_us();

			if (now < spin_until) {
				/* Still spinning. Past the first CF_SPIN_ALONE_US, yield the CPU
				 * between empty polls: with more runnable threads than cores
				 * (numjobs 2 and the store on 2 cores) the store may be waiting for
				 * this very core. Not at once: a yield is a syscall (~1 us here),
				 * and alone on a core most answers come back sooner. */
				if (now >= spin_until - (int64_t)o->spin_us + CF_SPIN_ALONE_US)
					sched_yield();
				continue;
			}
		}
		if (deadline >= 0 && cf_now_us() >= deadline)
			break;
	}
	/* releases of the reads completed above, and second stages launched above, go out
	 * now, not at the next commit */
	cf_rel_flush(cd);
	coffer_flush(cd->conn);
	if (rc < 0 && !cd->nr_events) {
		/* fio 3.33 records a negative getevents return as the job's error unchanged
		 * (td_io_getevents(): td_verror(td, r, ...)), which --output-format=json shows
		 * as 4294967189 for -ENOTCONN; the first error set is kept, so set it right. */
		td_verror(td, -rc, "coffer getevents");
		return rc;
	}
	return (int)cd->nr_events;
}

static struct io_u *cf_event(struct thread_data *td, int event)
{
	struct cf_data *cd = td->io_ops_data;

	return cd->events[event];
}

/* ---- files ------------------------------------------------------------------------------ */

/* What a prefill slot's event stands for. */
enum cf_pstage {
	CF_P_CREATE,  /* the create of the block */
	CF_P_SEAL,    /* its seal (zeros written) */
	CF_P_WAIT,    /* a get waiting for another client's seal of the block (create: -EEXIST) */
	CF_P_RELEASE, /* the release of the reference that get took */
};

/* One prefill slot: create-then-seal, or wait-then-release, on the prefill EQ. */
struct cf_pslot {
	struct coffer_event ev;
	struct coffer_oid oid;
	uint64_t offset;   /* the block's offset in its file */
	uint64_t size;	   /* CF_P_CREATE: the block's size in bytes */
	void *data;	   /* CF_P_CREATE: the new block */
	const void *rdata; /* CF_P_WAIT: the block another client sealed */
	uint64_t rsize;	   /* and its size */
	enum cf_pstage stage;
	int64_t wait_since; /* when it first found the block created by another client (us) */
};
_Static_assert(offsetof(struct cf_pslot, ev) == 0, "a slot is reached from its event");

/* Launch the slot's stage on its event (@ev) or run it blocking (@ev NULL: the prefill EQ's
 * channel is full). Return the launch's result, or with @ev NULL the stage's. */
static int cf_pslot_run(struct cf_data *cd, struct cf_pslot *s, struct coffer_event *ev)
{
	switch (s->stage) {
	case CF_P_CREATE:
		return coffer_obj_create_oid(cd->conn, &s->oid, s->size, 0, &s->data, ev);
	case CF_P_SEAL:
		return coffer_obj_seal_oid(cd->conn, &s->oid, COFFER_SEAL_RELEASE, ev);
	case CF_P_WAIT:
		/* the store waits for the seal, not this thread */
		return coffer_obj_get_oid(cd->conn, &s->oid, CF_PREFILL_WAIT_US, &s->rdata,
					  &s->rsize, ev);
	case CF_P_RELEASE:
		return coffer_obj_release_data(cd->conn, &s->oid, s->rdata, ev);
	}
	return -EINVAL;
}

/* The slot's stage finished with @e: pick the next stage. Return 1 (run s->stage next), 0 (the
 * block is done) or a negative errno (the prefill fails). */
static int cf_pslot_next(struct cf_pslot *s, int e)
{
	switch (s->stage) {
	case CF_P_CREATE:
		if (e == -EEXIST) {
			/* The block exists, but maybe not sealed yet: another job prefilling or
			 * writing the same file created it. A read before that seal would fail
			 * with ENOENT, so wait for the seal, then drop the get's reference. */
			if (s->wait_since == 0)
				s->wait_since = cf_now_us();
			s->stage = CF_P_WAIT;
			return 1;
		}
		if (e < 0)
			return e;
		memset(s->data, 0, s->size);
		s->stage = CF_P_SEAL;
		return 1;
	case CF_P_WAIT:
		if (e == -ENOENT) {
			/* not sealed within CF_PREFILL_WAIT_US: its creator aborted or died (then
			 * this create succeeds), or still holds it unsealed (then wait again, up
			 * to CF_PREFILL_WAIT_MAX_US since the first wait) */
			if (cf_now_us() - s->wait_since >= CF_PREFILL_WAIT_MAX_US)
				return -ETIMEDOUT;
			s->stage = CF_P_CREATE;
			return 1;
		}
		if (e < 0)
			return e;
		s->stage = CF_P_RELEASE;
		return 1;
	case CF_P_SEAL:
	case CF_P_RELEASE:
		return e;
	}
	return -EINVAL;
}

/* The slot's stage finished with @e: launch the next one. Return 1 (launched: its event will
 * come back), 0 (the block is done) or a negative errno. */
static int cf_pslot_advance(struct cf_data *cd, struct cf_pslot *s, int e)
{
	for (;;) {
		int rc = cf_pslot_next(s, e);

		if (rc <= 0)
			return rc;
		rc = cf_pslot_run(cd, s, &s->ev);
		if (rc == 0)
			return 1;
		if (rc != -EAGAIN)
			return rc;
		e = cf_pslot_run(cd, s, NULL); /* ring full: this stage blocking */
	}
}

static uint64_t cf_gcd(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;

		a = b;
		b = t;
	}
	return a;
}

/*
 * Create every block of @f that does not exist yet (zeros, sealed), so a read job never
 * hits a missing block: one of the largest read size at every offset a read can start at
 * (shorter at the file's end, where no longer read fits; a shorter read copies the start
 * of the block). Blocks that exist (-EEXIST) are left as they are, once sealed: a block
 * another client created and has not sealed yet (another job prefilling or writing the
 * same file) is waited for, or the first read of it would fail with ENOENT. Runs on its
 * own EQ so that its events never mix with io_u events. Return 0 or a negative errno.
 */
static int cf_prefill(struct thread_data *td, struct cf_data *cd, struct fio_file *f,
		      const struct cf_file *cff)
{
	/* A read longer than its block comes back short, and fio requeues the rest but counts
	 * none of it once the job has issued its size: with blocks of bs= (4k, fio's default)
	 * bssplit=64k/50:4k/50 read 32 KiB of 2 MiB and exited 0, where psync reads 2 MiB. */
	const uint64_t bs = td->o.max_bs[DDIR_READ] ? td->o.max_bs[DDIR_READ] : td_max_bs(td);
	const uint64_t min_bs = td->o.min_bs[DDIR_READ] ? td->o.min_bs[DDIR_READ] : bs;
	const uint64_t end = f->file_offset + f->io_size;
	/* fio starts random reads at multiples of blockalign (ba), sequential ones at sums of
	 * read sizes, which are multiples of min_bs (bsrange= with a power of two, fio rounds
	 * them down to one) or of the bssplit= sizes: a block at every multiple of their gcd
	 * serves all (bs=8k ba=4k: 8 KiB blocks every 4 KiB) */
	uint64_t stride = cf_gcd(min_bs, td->o.ba[DDIR_READ] ? td->o.ba[DDIR_READ] : min_bs);
	struct cf_pslot *slots;
	struct coffer_event *evs[CF_POLL_BATCH];
	unsigned int freelist[CF_PREFILL_DEPTH], nfree = 0, running = 0, ninit = 0;
	coffer_handle_t eq;
	uint64_t next = f->file_offset;
	int64_t quiet_since = cf_now_us();
	int err = 0, rc;

	rc = coffer_eq_create(&eq);
	if (rc < 0)
		return rc;
	slots = calloc(CF_PREFILL_DEPTH, sizeof(*slots));
	if (!slots) {
		coffer_eq_destroy(eq, 0);
		return -ENOMEM;
	}
	for (unsigned int i = 0; i < CF_PREFILL_DEPTH; i++) {
		rc = coffer_event_init(&slots[i].ev, eq, NULL);
		if (rc < 0) {
			err = rc;
			break;
		}
		ninit++;
		freelist[nfree++] = i;
	}

	for (unsigned int i = 0; i < td->o.bssplit_nr[DDIR_READ]; i++)
		if (td->o.bssplit[DDIR_READ][i].bs)
			stride = cf_gcd(stride, td->o.bssplit[DDIR_READ][i].bs);
	while ((next + min_bs <= end && !err) || running) {
		while (nfree && next + min_bs <= end && !err) {
			struct cf_pslot *s = &slots[freelist[nfree - 1]];

			cf_block_oid(cff, next, &s->oid);
			s->offset = next;
			s->size = end - next < bs ? end - next : bs;
			s->stage = CF_P_CREATE;
			s->wait_since = 0;
			rc = cf_pslot_run(cd, s, &s->ev);
			if (rc < 0) {
				if (rc != -EAGAIN)
					err = rc;
				break;
			}
			nfree--;
			running++;
			next += stride;
		}
		if (!running)
			continue;
		int n = coffer_eq_poll(eq, 1, 1000 * 1000, CF_POLL_BATCH, evs);
		if (n < 0) {
			err = n;
			break;
		}
		/* a get waiting for another client's seal may be silent for CF_PREFILL_WAIT_US */
		if (n == 0 &&
		    cf_now_us() - quiet_since > CF_PREFILL_WAIT_US + CF_DRAIN_TIMEOUT_US) {
			err = -ETIMEDOUT;
			break;
		}
		if (n > 0)
			quiet_since = cf_now_us();
		for (int i = 0; i < n; i++) {
			struct cf_pslot *s = (struct cf_pslot *)(void *)evs[i];

			running--;
			rc = cf_pslot_advance(cd, s, evs[i]->ev_error);
			if (rc == 1) {
				running++;
				continue;
			}
			if (rc == -ETIMEDOUT && s->stage == CF_P_WAIT && !err)
				log_err("fio: coffer: prefill of %s: the block at offset %llu is "
					"being created by another client, which did not seal it "
					"within %d s\n",
					f->file_name, (unsigned long long)s->offset,
					CF_PREFILL_WAIT_MAX_US / 1000000);
			if (rc < 0 && !err)
				err = rc;
			freelist[nfree++] = (unsigned int)(s - slots);
		}
	}

	/* the forced destroy waits for whatever is still running; then the events can go */
	coffer_eq_destroy(eq, COFFER_EQ_FORCE);
	for (unsigned int i = 0; i < ninit; i++)
		coffer_event_fini(&slots[i].ev);
	free(slots);
	return err;
}

/*
 * What a job does once per file before its I/O: the allow_file_create=0 check, then the
 * prefill (coffer_prefill=1, a job that reads). Each is done once per file (fstate[]), by
 * cf_post_init() before fio starts the job's clocks where fio has set the files up by then
 * (create_serialize=1, fio's default: in the parent, before the job started), else at the
 * file's first open. At the open, inside the job's runtime, the prefill counted as I/O time:
 * 64 MiB prefilled, 1000 reads at iodepth 8 ran in 93 ms (10.8k IOPS) where they take 9 ms
 * (111k IOPS), and a time-based job lost its runtime to it (tests/fio prefill-runtime).
 * psync's layout of its file is not timed either. Return 0, or 1 with td's error set.
 */
static int cf_file_setup(struct thread_data *td, struct cf_data *cd, struct fio_file *f,
			 const struct cf_file *cff)
{
	int rc;

	if (!cd->fstate) {
		cd->nr_files = td->files_index;
		cd->fstate = calloc(cd->nr_files ? cd->nr_files : 1, 1);
		if (!cd->fstate) {
			td_verror(td, ENOMEM, "coffer file setup");
			return 1;
		}
	}
	if (f->fileno < 0 || (unsigned int)f->fileno >= cd->nr_files)
		return 0;
	/*
	 * allow_file_create=0: psync fails a job whose file does not exist ("file creation
	 * disallowed"); the store keeps no file, so a file exists here when its first block
	 * (where the job starts in it) is sealed in the store. Checked before a prefill, which
	 * would create it. Before, the option was ignored: the job wrote a new file, or read
	 * zeros or failed with ENOENT.
	 */
	if (!td->o.allow_create && !(cd->fstate[f->fileno] & CF_F_CHECKED)) {
		struct coffer_oid oid;
		bool present = false;

		cf_block_oid(cff, f->file_offset, &oid);
		rc = coffer_obj_contains(cd->conn, &oid, &present, NULL);
		if (rc < 0 || !present) {
			log_err("fio: coffer: %s has no block at offset %llu in the store%s%s, and "
				"allow_file_create=0 forbids creating the file (as psync does a "
				"file that does not exist)\n",
				f->file_name, (unsigned long long)f->file_offset,
				rc < 0 ? ": " : "", rc < 0 ? cf_strerror(rc) : "");
			td_verror(td, rc < 0 ? -rc : ENOENT, "allow_file_create");
			return 1;
		}
		cd->fstate[f->fileno] |= CF_F_CHECKED;
	}
	if (cd->prefill && td_read(td) && !(cd->fstate[f->fileno] & CF_F_PREFILLED)) {
		rc = cf_prefill(td, cd, f, cff);
		if (rc < 0) {
			log_err("fio: coffer: prefill of %s failed: %s\n", f->file_name,
				cf_strerror(rc));
			td_verror(td, -rc, "coffer prefill");
			return 1;
		}
		cd->fstate[f->fileno] |= CF_F_PREFILLED;
	}
	return 0;
}

/*
 * fio's post_init hook: runs in the job (thread or forked process) after init, before fio
 * starts the job's clocks. Where fio has set the files up already (create_serialize=1, its
 * default: sizes and offsets are known), each file's cf_file_setup() runs here, so the
 * prefill is not timed as the job's I/O. With create_serialize=0 fio sets the files up
 * later, in the job; they are set up at their first open then, and the prefill is timed.
 */
static int cf_post_init(struct thread_data *td)
{
	struct cf_data *cd = td->io_ops_data;
	const struct cf_options *o = td->eo;
	struct fio_file *f;
	unsigned int i;

	if (!cd || !td->o.create_serialize)
		return 0;
	for_each_file(td, f, i)
	{
		struct cf_file cff;

		if (f->io_size == -1ULL)
			continue; /* sized at its open (cf_open_file) */
		cf_file_prefix(cf_namespace(o), f->file_name, cff.prefix);
		if (cf_file_setup(td, cd, f, &cff))
			return 1;
	}
	return 0;
}

static int cf_open_file(struct thread_data *td, struct fio_file *f)
{
	struct cf_data *cd = td->io_ops_data;
	const struct cf_options *o = td->eo;
	const char *ns = cf_namespace(o);
	struct cf_file *cff = FILE_ENG_DATA(f);

	if (!cff) {
		cff = calloc(1, sizeof(*cff));
		if (!cff) {
			td_verror(td, ENOMEM, "coffer open_file");
			return 1;
		}
		cf_file_prefix(ns, f->file_name, cff->prefix);
		FILE_SET_ENG_DATA(f, cff);
	}
	/*
	 * fio asks for the file's size (cf_get_file_size) before it computes where the job
	 * starts (offset=, offset_increment=, offset=N%), and drops every I/O that would end past
	 * that size without a word: a job starting past it did nothing and exited 0. A store
	 * file has no size of its own: it is as long as the job's I/O needs, known by now.
	 */
	if (f->io_size != -1ULL && f->file_offset + f->io_size > f->real_file_size)
		f->real_file_size = f->file_offset + f->io_size;
	if (cf_file_setup(td, cd, f, cff))
		return 1;
	/* Only once the open succeeded: fio asserts that a failed open leaves f->fd at -1
	 * (td_io_open_file()), so a setup that failed after it was set (allow_file_create=0 on
	 * a missing file with create_serialize=0, a failed prefill) aborted fio with SIGABRT
	 * instead of failing the job with its error (test fio-fsync-on-close). */
	if (cd->sync_fd >= 0)
		f->fd = cd->sync_fd; /* for fio's fsync at close (cf_init) */
	return 0;
}

static int cf_close_file(struct thread_data *td, struct fio_file *f)
{
	(void)td;
	free(FILE_ENG_DATA(f));
	FILE_SET_ENG_DATA(f, NULL);
	f->fd = -1; /* the job's sync_fd, if it was set: closed at cleanup */
	return 0;
}

/*
 * unlink=1 / unlink_each_loop=1. Without this hook fio would unlink(2) the file's name in the
 * local file system: a file there that happens to have that name is not this job's (its
 * blocks live in the store) and must survive. The blocks stay in the store, as a cache's
 * entries do: evicted when the arena needs room, or deleted by a trim job (rw=trim).
 */
static int cf_unlink_file(struct thread_data *td, struct fio_file *f)
{
	(void)td;
	(void)f;
	return 0;
}

/*
 * A file is as large as the job says: size= split over nrfiles, or filesize=; without
 * either the job fails here, saying so. With a filesize=LOW-HIGH range the file is reported
 * one byte longer than HIGH: fio's setup_files() then lays it out as it does a psync file
 * that does not exist yet, at a random size in the range (a size inside the range would be
 * taken for an existing file's: every file got HIGH, filesize=16k-64k nrfiles=4 wrote
 * 256 KiB where psync writes 132 KiB). Not 0: fio sizes its random map by the smaller of
 * this and the file's I/O size before cf_open_file runs (an empty file aborted randwrite
 * in fio's mark_random_map()).
 */
static int cf_get_file_size(struct thread_data *td, struct fio_file *f)
{
	uint64_t size;

	if (fio_file_size_known(f))
		return 0;
	if (td->o.file_size_low && td->o.file_size_low != td->o.file_size_high)
		size = td->o.file_size_high + 1;
	else if (td->o.file_size_high)
		size = td->o.file_size_high;
	else if (td->o.size && td->o.nr_files) {
		/*
		 * fio's share of size= per file, plus the block fio gives the first files when
		 * the remainder holds one (setup_files() in fio's filesetup.c): no more, or fio
		 * issues a block that ends past size= (size=100k bs=12k wrote 108 KiB where
		 * psync and null write 96 KiB). open_file grows it where the job's I/O needs.
		 */
		size = td->o.size / td->o.nr_files;
		if ((td->o.size - size * td->o.nr_files) / td_min_bs(td))
			size += td_min_bs(td);
	} else {
		/* fio would fail with a bare "total_file_size ... Invalid argument" */
		log_err("fio: coffer: %s has no size of its own (its blocks live in the store): "
			"give size= or filesize= in bytes (not a percentage)\n",
			f->file_name);
		td_verror(td, EINVAL, "coffer file size");
		return 1;
	}
	f->real_file_size = size;
	fio_file_set_size_known(f);
	return 0;
}

/* ---- registration ----------------------------------------------------------------------- */

/*
 * Option parsers, called by fio with the job's struct cf_options for each value given
 * (and for .def). They say what is wrong in one line; fio then adds "failed parsing".
 * coffer_socket is an FIO_OPT_STR, not a STR_STORE: fio refuses an empty STR_STORE value
 * before any callback, with nothing but "failed parsing".
 */
static int cf_opt_socket(void *data, const char *str)
{
	struct cf_options *o = data;
	size_t n = str ? strlen(str) : 0;

	if (n == 0) {
		log_err("fio: coffer: coffer_socket is empty: give the store's socket path, or "
			"leave the option out for $COFFER_SOCKET or the store's default path\n");
		return 1;
	}
	if (n >= sizeof(o->socket)) {
		log_err("fio: coffer: coffer_socket is %zu bytes long: a Unix socket path has at "
			"most %zu\n",
			n, sizeof(o->socket) - 1);
		return 1;
	}
	memcpy(o->socket, str, n + 1);
	return 0;
}

/* An FIO_OPT_INT would not do: fio splits "-1" at the '-' (a range), reads it as a huge
 * number and checks no range whose minimum is 0, so a negative value got through. */
static int cf_opt_spin_us(void *data, const char *str)
{
	struct cf_options *o = data;
	unsigned long long v = 0;
	char *end = NULL;

	if (str && str[0] >= '0' && str[0] <= '9') {
		errno = 0;
		v = strtoull(str, &end, 10);
	}
	if (!end || *end != '\0' || errno != 0 || v > 1000000) {
		log_err("fio: coffer: coffer_spin_us=%s is not a number of microseconds in "
			"0..1000000\n",
			str ? str : "");
		return 1;
	}
	o->spin_us = (unsigned int)v;
	return 0;
}

static struct fio_option cf_option_table[] = {
    {
	.name = "coffer_socket",
	.lname = "coffer-store socket",
	.type = FIO_OPT_STR,
	.cb = __extension__(void *) cf_opt_socket, /* fio: void *cb */
	.help = "Unix socket of coffer-store (default: $COFFER_SOCKET, else the store's "
		"default path)",
	.category = FIO_OPT_C_ENGINE,
	.group = FIO_OPT_G_INVALID,
    },
    {
	.name = "coffer_namespace",
	.lname = "coffer namespace",
	.type = FIO_OPT_STR_STORE,
	.off1 = offsetof(struct cf_options, namespace),
	.help = "Namespace mixed into every ObjectID with the file name (default: fio)",
	.category = FIO_OPT_C_ENGINE,
	.group = FIO_OPT_G_INVALID,
    },
    {
	.name = "coffer_prefill",
	.lname = "coffer prefill",
	.type = FIO_OPT_BOOL,
	.off1 = offsetof(struct cf_options, prefill),
	.help = "Before a job with reads, create (zero-filled) every block that does not "
		"exist yet",
	.def = "0",
	.category = FIO_OPT_C_ENGINE,
	.group = FIO_OPT_G_INVALID,
    },
    {
	.name = "coffer_missing",
	.lname = "coffer missing block",
	.type = FIO_OPT_STR,
	.off1 = offsetof(struct cf_options, missing),
	.help = "What a read of a never-written block returns: error (fail it with ENOENT, "
		"the default) or zeros",
	.def = "error",
	.posval =
	    {
		{
		    .ival = "error",
		    .oval = CF_MISSING_ERROR,
		    .help = "fail the I/O with ENOENT",
		},
		{
		    .ival = "zeros",
		    .oval = CF_MISSING_ZEROS,
		    .help = "return zeros",
		},
	    },
	.category = FIO_OPT_C_ENGINE,
	.group = FIO_OPT_G_INVALID,
    },
    {
	.name = "coffer_spin_us",
	.lname = "coffer poll spin",
	.type = FIO_OPT_STR,
	.cb = __extension__(void *) cf_opt_spin_us,
	.help = "While I/O is in flight, poll the event queue without sleeping (yielding the "
		"CPU between polls) for up to this many microseconds per getevents call before "
		"sleeping (0..1000000; 0: sleep at once)",
	.def = "50",
	.category = FIO_OPT_C_ENGINE,
	.group = FIO_OPT_G_INVALID,
    },
    {
	.name = "coffer_index",
	.lname = "coffer object index",
	.type = FIO_OPT_BOOL,
	.off1 = offsetof(struct cf_options, index),
	.help = "Read blocks straight from the store's shared object index when it has them "
		"(no request to the store); 0: every read is a get",
	.def = "1",
	.category = FIO_OPT_C_ENGINE,
	.group = FIO_OPT_G_INVALID,
    },
    {
	.name = "coffer_put",
	.lname = "coffer put of reserved blocks",
	.type = FIO_OPT_BOOL,
	.off1 = offsetof(struct cf_options, put),
	.help = "Write into arena blocks reserved ahead and seal each with one put (one request "
		"per write); 0: every write is a create and a seal",
	.def = "1",
	.category = FIO_OPT_C_ENGINE,
	.group = FIO_OPT_G_INVALID,
    },
    {
	.name = NULL,
    },
};

/* The one exported symbol: fio looks it up with dlsym(handle, "ioengine"). */
__attribute__((visibility("default"))) struct ioengine_ops ioengine = {
    .name = "coffer",
    .version = FIO_IOOPS_VERSION,
    .flags = FIO_DISKLESSIO | FIO_NODISKUTIL | FIO_ASYNCIO_SETS_ISSUE_TIME,
    .init = cf_init,
    .post_init = cf_post_init,
    .queue = cf_queue,
    .commit = cf_commit,
    .getevents = cf_getevents,
    .event = cf_event,
    .cleanup = cf_cleanup,
    .open_file = cf_open_file,
    .close_file = cf_close_file,
    .unlink_file = cf_unlink_file,
    .get_file_size = cf_get_file_size,
    .io_u_init = cf_io_u_init,
    .io_u_free = cf_io_u_free,
    .option_struct_size = sizeof(struct cf_options),
    .options = cf_option_table,
};
