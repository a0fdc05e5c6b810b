/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * perf/bench/hash_impl.h - the interface between `coffer-bench hash` (hash.c: workloads,
 * timing, verification) and the tables it compares (impl_*.c: coffer's handle hash and the
 * baselines modelled on other systems).
 *
 * Every table stores the same record header, struct bh_rec, allocated and freed only through
 * bh_rec_alloc()/bh_rec_free() so that the benchmark, not the table, counts allocations and
 * frees and checks each record's state at free time. Keys are handed out by the table on
 * insert (a handle hash issues its own cookies), as DAOS's d_hhash_link_insert does.
 *
 * Reference protocol common to all tables (DAOS d_hash_rec_* semantics):
 *  - insert: the record is linked with one reference, owned by the table;
 *  - lookup: takes one reference on a linked record (NULL when absent); release drops it;
 *  - delete: unlinks and drops the table's reference; the record is freed, through
 *    bh_rec_free(), once unlinked and unreferenced, and never while a lookup can still
 *    reach it (grace period / epoch / lock, as each table does it);
 *  - lookup_noref: finds a record and reads it inside the table's read-side protection
 *    (RCU section, epoch section, or lock), taking no reference: the `_rcu` workload.
 */
#ifndef COFFER_BENCH_HASH_IMPL_H
#define COFFER_BENCH_HASH_IMPL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench.h"

/* Record states, checked by lookups and at free time. */
enum bh_state {
	BH_ALLOCATED = 0x1a110c, /* allocated, not yet linked */
	BH_LINKED = 0x11c3ed,	 /* in the table */
	BH_UNLINKED = 0xde1e7e,	 /* delete called: must not be returned by new lookups */
	BH_FREED = 0xf4eed	 /* poison written just before free() */
};

/* Common header of every benchmark record; impl records embed it first. */
struct bh_rec {
	uint64_t key;		/* first: ck-hs compares objects through it */
	uint64_t payload;	/* key ^ BH_PAYLOAD_SALT: what a lookup reads */
	_Atomic uint32_t state; /* enum bh_state */
	uint32_t slot;		/* accounting slot of the allocating thread */
};

#define BH_PAYLOAD_SALT 0x9e3779b97f4a7c15ull

/* Per-thread accounting, padded: allocations by the owner, frees by whoever reclaims. */
struct bh_acct {
	uint64_t allocs;	/* written by the owning thread only */
	_Atomic uint64_t frees; /* relaxed adds by reclaimers (call_rcu, epoch, last release) */
	char pad[BENCH_CACHELINE - 2 * sizeof(uint64_t)];
};

/* Shared state of one table instance, visible to the impl. */
struct bh_ctx {
	struct bh_acct *acct; /* slots 0 .. nslots-1 (0: main thread) */
	unsigned int nslots;
	_Atomic uint64_t errors; /* verification failures reported by impls (relaxed) */
	const char *first_error; /* a static string describing one of them */
};

/* Table creation parameters (the same for every impl in one run). */
struct bh_params {
	unsigned int buckets_log2; /* chained tables; initial size of the others */
	uint64_t capacity;	   /* records expected at once (prefill + hot set + threads) */
};

struct bh_impl {
	const char *name;
	const char *model; /* one line for --help: what system this models */
	int (*create)(const struct bh_params *p, struct bh_ctx *ctx, void **tabp);
	/* Table must be empty (every record deleted, every thread exited); returns once every
	 * record unlinked so far was freed (grace periods and epochs waited for). */
	void (*destroy)(void *tab);
	/* Per-thread state (epoch record, RCU registration); untimed. */
	int (*thread_enter)(void *tab, void **tlsp);
	void (*thread_exit)(void *tab, void *tls);
	/* Allocates (through bh_rec_alloc with @slot) and links a fresh record; its key is the
	 * cookie issued by the table. 0 or a negative errno. */
	int (*insert)(void *tab, void *tls, unsigned int slot, struct bh_rec **recp);
	struct bh_rec *(*lookup)(void *tab, void *tls, uint64_t key);
	void (*release)(void *tab, void *tls, struct bh_rec *rec);
	/* Returns the payload read from the record, 0 when the key is absent; the state of the
	 * record found is checked inside the protected section and errors counted in ctx. */
	uint64_t (*lookup_noref)(void *tab, void *tls, uint64_t key);
	/* Unlinks @rec (found earlier through insert; the caller holds no reference). */
	int (*delete)(void *tab, void *tls, struct bh_rec *rec);
	/* Records linked now (exact when no writer runs). */
	uint64_t (*count)(void *tab);
};

extern const struct bh_impl bh_impl_coffer;
extern const struct bh_impl bh_impl_global_spin;
extern const struct bh_impl bh_impl_bucket_rwlock;
extern const struct bh_impl bh_impl_urcu_lfht;
extern const struct bh_impl bh_impl_ck_hs;

/* Allocates a zeroed record of @size bytes (>= sizeof(struct bh_rec), header first) for
 * accounting slot @slot, with state BH_ALLOCATED. NULL on ENOMEM. Owner thread only. */
void *bh_rec_alloc(struct bh_ctx *ctx, size_t size, unsigned int slot);
/* Checks that @rec was unlinked, counts the free in its slot, poisons and frees it. Any
 * thread (call_rcu workers, epoch reclaimers, the last releaser). */
void bh_rec_free(struct bh_ctx *ctx, struct bh_rec *rec);
/* Counts one verification failure; @what is a static string. Any thread. */
void bh_error(struct bh_ctx *ctx, const char *what);

/* Publishes @key in a fresh record: key, payload, state BH_LINKED. Called before the table
 * links the record, or - for tables that issue the key while linking - before the key is
 * given to any other thread. */
static inline void bh_rec_set_key(struct bh_rec *rec, uint64_t key)
{
	rec->key = key;
	rec->payload = key ^ BH_PAYLOAD_SALT;
	/* Relaxed: published by the table's linking store (release) or by the harness. */
	atomic_store_explicit(&rec->state, BH_LINKED, memory_order_relaxed);
}

/* Checks a record returned by a lookup (inside the lookup's protection or while holding a
 * reference): it must be linked and carry its key's payload. */
static inline bool bh_rec_valid(const struct bh_rec *rec, uint64_t key)
{
	/* Relaxed: the state was published before the record was linked (release in the
	 * table's insert, acquire in its lookup); this load only re-reads it. */
	return rec->key == key && rec->payload == (key ^ BH_PAYLOAD_SALT) &&
	       atomic_load_explicit(&rec->state, memory_order_relaxed) == BH_LINKED;
}

/*
 * ThreadSanitizer cannot see the happens-before edge that liburcu's call_rcu queue (and
 * ck_epoch's deferral stacks) provide between the thread that hands a record over and the
 * thread that frees it: annotate it at the hand-over (release) and in the callback (acquire)
 * rather than suppress reports in the benchmark's own code.
 */
#if defined(__SANITIZE_THREAD__)
#define BH_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define BH_TSAN 1
#endif
#endif
#ifdef BH_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define bh_tsan_release(p) __tsan_release((void *)(p))
#define bh_tsan_acquire(p) __tsan_acquire((void *)(p))
#else
#define bh_tsan_release(p) ((void)(p))
#define bh_tsan_acquire(p) ((void)(p))
#endif

/* Bucket index mixing shared by the chained baselines (murmur3's fmix64). */
static inline uint64_t bh_mix64(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	k *= 0xc4ceb9fe1a85ec53ull;
	k ^= k >> 33;
	return k;
}

#endif /* COFFER_BENCH_HASH_IMPL_H */
