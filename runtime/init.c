/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * runtime/init.c - coffer_init()/coffer_fini(): the reference-counted process runtime and
 * the process handle hash.
 *
 * Design note
 * -----------
 * init_mu guards init_refs (every reference: coffer_init()'s and each connection's, see
 * coffer__runtime_get()), user_refs (coffer_init()'s alone) and the creation/removal of the global
 * handle hash. The pointer itself is read without the mutex by coffer_hhash_global(): stored with
 * RELEASE after the hash is fully built, loaded with ACQUIRE (pairs with it). The last fini
 * unpublishes the hash under init_mu and destroys it after dropping init_mu: destroy waits for a
 * grace period and for call_rcu callbacks, which may themselves use coffer, and fork-prepare takes
 * init_mu after parking the call_rcu workers - holding init_mu across the barrier could deadlock.
 * The process handle hash gets 2^18 buckets by default, not the generic table's 2^14: it
 * holds every open object handle, and its chains must stay short at a few hundred thousand
 * handles (obj_open close measured 0.17 M/s at 200k handles with 2^14 buckets, where lookups
 * walked ~12-record chains, against ~1.4 M/s with 2^20). The table does not resize; bucket
 * heads are 8 bytes each: 2 MiB, mapped hugepage-backed and prefaulted by coffer_init() (one
 * hugepage fault there, 2 MiB resident from then on, instead of up to 512 page faults spread
 * over the first opens; see htab.c buckets_alloc), so a process that keeps millions of handles
 * open should raise COFFER_HHASH_BUCKETS_LOG2.
 * Environment overrides are read once, by the first successful coffer_init() of the process
 * (a value out of range fails it with -EINVAL):
 *   COFFER_HHASH_BUCKETS_LOG2 (1..26, default 18), COFFER_HHASH_LOCKS_LOG2 (1..buckets_log2),
 *   COFFER_RCU_PERCPU=1 (per-CPU call_rcu workers, see runtime/rcu.c).
 * Lock order: init_mu -> table list mutex (hash creation). coffer__rcu_setup() runs before
 * init_mu is taken (see coffer_init).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include <coffer/common.h>
#include <coffer/hash.h>

#include "eventq/event_internal.h"
#include "runtime/env.h"
#include "runtime/nocancel.h"
#include "runtime/rcu.h"

static pthread_mutex_t init_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned long init_refs;		    /* init_mu; all references */
static unsigned long user_refs;		    /* init_mu; coffer_init()'s, not connections' */
static struct coffer_hhash *global_hh;	    /* written under init_mu; RELEASE/ACQUIRE */
static struct coffer_htab_params hh_params; /* init_mu; from the environment */
static bool env_read;			    /* init_mu */

/* A bad value fails coffer_init() with -EINVAL rather than being silently ignored. */
static int read_env(void)
{
	uint64_t buckets = COFFER_HHASH_DEFAULT_BUCKETS_LOG2, locks = 0; /* the table's default */

	if (coffer__env_hhash_buckets_log2(&buckets) || coffer__env_hhash_locks_log2(&locks) ||
	    locks > buckets)
		return -EINVAL;
	hh_params.buckets_log2 = (uint32_t)buckets;
	hh_params.locks_log2 = (uint32_t)locks;
	env_read = true;
	return 0;
}

/* One reference more; @user: the caller's own (coffer_init()), else a connection's. */
static int runtime_get(bool user)
{
	struct coffer_hhash *hh;
	int rc = 0;
	COFFER__NO_CANCEL(); /* coffer_init() and every first use: set-up (runtime/nocancel.h) */

	/* Before init_mu: the one-time set-up takes liburcu's call_rcu_mutex, which
	 * fork-prepare takes before init_mu. */
	rc = coffer__rcu_setup();
	if (rc)
		return rc;
	pthread_mutex_lock(&init_mu);
	if (init_refs == 0) {
		if (!env_read && (rc = read_env()) != 0) {
			pthread_mutex_unlock(&init_mu);
			return rc;
		}
		rc = coffer_hhash_create(&hh_params, &hh);
		if (rc) {
			pthread_mutex_unlock(&init_mu);
			return rc == -EINVAL ? -ENOMEM : rc;
		}
		__atomic_store_n(&global_hh, hh, __ATOMIC_RELEASE);
	}
	init_refs++;
	user_refs += user;
	pthread_mutex_unlock(&init_mu);
	return 0;
}

COFFER_API int coffer_init(void)
{
	return runtime_get(true);
}

int coffer__runtime_get(void)
{
	return runtime_get(false);
}

/* One reference less; @user: the caller's own. A coffer_fini() with no coffer_init() left to
 * balance is refused (-EINVAL) even while connections keep the runtime up: dropping one of
 * their references would destroy the handle hash under a live connection. */
static int runtime_put(bool user)
{
	struct coffer_hhash *hh = NULL;
	COFFER__NO_CANCEL(); /* the drain and rcu_barrier() sleep (runtime/nocancel.h) */

	/* rcu_barrier() inside a read-side section would wait for itself: refuse. */
	if (coffer__rcu_read_ongoing())
		return -EINVAL;
	pthread_mutex_lock(&init_mu);
	if (init_refs == 0 || (user && user_refs == 0)) {
		pthread_mutex_unlock(&init_mu);
		return -EINVAL;
	}
	user_refs -= user;
	if (--init_refs == 0) {
		hh = global_hh;
		__atomic_store_n(&global_hh, NULL, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&init_mu);
	if (hh) {
		/* EQs the program did not destroy close now, waking their sleeping pollers: once
		 * their handles are drained nothing could reach them (coffer/common.h). */
		coffer__eq_close_hash(hh);
		/* Drain: remaining handles are released; records their users still hold are
		 * freed when released (see coffer_htab_destroy). Cannot fail: not in a read-side
		 * section, drain set. */
		(void)coffer_hhash_destroy(hh, true);
	}
	(void)coffer__rcu_barrier();
	return 0;
}

COFFER_API int coffer_fini(void)
{
	return runtime_put(true);
}

int coffer__runtime_put(void)
{
	return runtime_put(false);
}

COFFER_API struct coffer_hhash *coffer_hhash_global(void)
{
	return __atomic_load_n(&global_hh, __ATOMIC_ACQUIRE);
}

/* coffer__global_lookup(): see runtime/rcu.h. */
int coffer__global_lookup(coffer_handle_t h, enum coffer_htype type, struct coffer_hhash **hhp,
			  struct coffer_hlink **linkp)
{
	int rc;

	coffer__rcu_read_lock();
	*hhp = coffer_hhash_global();
	rc = *hhp ? coffer_hhash_lookup(*hhp, h, type, linkp) : -EINVAL;
	coffer__rcu_read_unlock();
	return rc;
}

void coffer__init_atfork_prepare(void)
{
	pthread_mutex_lock(&init_mu);
}

void coffer__init_atfork_parent(void)
{
	pthread_mutex_unlock(&init_mu);
}

void coffer__init_atfork_child(void)
{
	pthread_mutex_init(&init_mu, NULL);
}
