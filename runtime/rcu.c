/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * runtime/rcu.c - coffer's RCU foundation: which liburcu flavour, thread registration,
 * fork handlers, and the barrier used at destroy/fini.
 *
 * Design note
 * -----------
 * Why urcu-bp ("bulletproof") and not memb/mb/qsbr. coffer is a library living in threads it
 * did not create (fio jobs, application pools, threads that exit without telling anyone):
 *  - bp registers a thread lazily inside its first read_lock and unregisters it from a
 *    pthread key destructor at thread exit. With memb, a read lock on an unregistered thread
 *    silently protects nothing, and a thread that exits registered leaves a stale reader.
 *    A thread that exits without calling anything therefore never stalls a grace period
 *    (tested: tests/hashtable/test_runtime.c).
 *  - registration is idempotent; and bp's symbols (urcu_bp_*) and registry are separate from
 *    every other flavour's, so a host that registers its threads with memb or qsbr cannot
 *    make coffer's registration abort (memb aborts on double registration of its own kind).
 *  - bp provides the fork hooks (urcu_bp_before_fork/after_fork_*); memb has none.
 *  Cost: a bp read lock is a TLS check plus a counter store (~2-3 ns with membarrier;
 *  a full fence per section where membarrier(2) is unavailable - slower, still correct).
 *
 * Fork. liburcu does not install fork handlers itself; coffer installs one set, once, that
 * brackets fork in this order (prepare; the reverse on the way out):
 *   1. urcu_bp_call_rcu_before_fork(): park the call_rcu workers between callbacks, so no
 *      callback (which may take coffer locks) runs while we hold them;
 *   2. urcu_bp_before_fork(): take urcu-bp's grace-period and registry locks (so no grace
 *      period is half done; before coffer's locks because a reader blocked on a coffer lock
 *      could hold up a synchronize_rcu that holds the gp lock);
 *   3. coffer's locks: init mutex -> table list + every stripe -> reclamation registry + every
 *      thread's batch lock -> the EQ list and every EQ's reap and registry locks (eq.c) ->
 *      the arena mappings' lock (conn.c). Nothing under these locks registers with urcu-bp
 *      or calls call_rcu, so step 2's locks cannot be waited for under them; and the EQ
 *      list's and the mappings' locks, which frees take, come after step 1.
 * The connection layer's own handlers (conn.c, installed later by the first connect) run
 * their prepare before all of this and hold coffer__client_lock through it: so neither a
 * call_rcu callback nor a thread freeing a reclaimed batch (R5 in reclaim.c) may take
 * coffer__client_lock, or fork-prepare would wait for it while holding it (it did: a
 * connection's free took it to drop its arena mapping; test_fork_while_conn_freed).
 * In the child, urcu_bp_after_fork_child() drops the readers of threads that do not exist
 * there, coffer re-initialises its mutexes and marks other threads' batches as orphans
 * (flushed by the next barrier), and call_rcu_after_fork_child() starts a fresh worker.
 * Consequences: fork() waits for a grace period in progress, i.e. for readers inside
 * read-side sections to leave them (sections must be short anyway). A host that also
 * brackets fork with urcu_bp_before_fork() itself would take the gp lock twice; hosts doing
 * so must not use coffer across fork (none known). Lock order, process-wide: liburcu's
 * call_rcu_mutex -> urcu-bp gp and registry locks -> coffer's locks; hence coffer never calls
 * call_rcu or creates the call_rcu worker while holding a lock of its own (setup() creates
 * the worker up front, coffer_init() runs setup() before taking its mutex).
 *
 * dlclose. libcoffer.so is linked with -z nodelete: the call_rcu worker, the pthread key
 * destructors and these fork handlers point into it, so it must stay mapped.
 *
 * Barrier. coffer__rcu_barrier() first hands every thread's partial reclamation batch to
 * call_rcu, then urcu_bp_barrier() waits for all queued callbacks. It must run outside any
 * read-side section (rcu_barrier would wait for itself) and not on a call_rcu worker.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <coffer/hash.h>

#include "eventq/event_internal.h"
#include "hashtable/htab_internal.h"
#include "runtime/env.h"
#include "runtime/nocancel.h"
#include "runtime/rcu.h"

#ifdef COFFER__TSAN
char coffer__rcu_gp_sync;
char coffer__rcu_cb_sync;
#endif

static pthread_once_t setup_once = PTHREAD_ONCE_INIT;
static int setup_rc;
static bool setup_ran; /* RELEASE at the end of setup(), ACQUIRE in coffer__rcu_setup() */

static void atfork_prepare(void)
{
	coffer__reclaim_atfork_pre();
	urcu_bp_call_rcu_before_fork();
	urcu_bp_before_fork();
	coffer__init_atfork_prepare();
	coffer__htab_atfork_prepare();
	coffer__reclaim_atfork_prepare();
	coffer__eq_atfork_prepare();
	coffer__conn_seg_atfork_prepare();
}

static void atfork_parent(void)
{
	coffer__conn_seg_atfork_parent();
	coffer__eq_atfork_parent();
	coffer__reclaim_atfork_parent();
	coffer__htab_atfork_parent();
	coffer__init_atfork_parent();
	urcu_bp_after_fork_parent();
	urcu_bp_call_rcu_after_fork_parent();
	coffer__reclaim_atfork_post_parent();
}

static void atfork_child(void)
{
	coffer__conn_seg_atfork_child();
	coffer__eq_atfork_child();
	coffer__reclaim_atfork_child();
	coffer__htab_atfork_child();
	coffer__init_atfork_child();
	urcu_bp_after_fork_child();
	urcu_bp_call_rcu_after_fork_child();
	coffer__reclaim_atfork_post_child();
}

static void setup(void)
{
	uint64_t percpu = 0;

	/* COFFER_RCU_PERCPU: 0 or 1. coffer__rcu_setup() refused a bad value before it got
	 * here, so this one is bad only if the environment changed in between (setenv()
	 * concurrent with coffer's first call, which getenv() does not allow). */
	if (coffer__env_rcu_percpu(&percpu) != 0) {
		setup_rc = -EINVAL;
		return;
	}
	if (pthread_atfork(atfork_prepare, atfork_parent, atfork_child) != 0) {
		setup_rc = -ENOMEM;
		return;
	}
	/* Create the default call_rcu worker now, under no coffer lock: the first call_rcu
	 * would otherwise create it (taking call_rcu_mutex, which fork-prepare holds first)
	 * from wherever it happens, e.g. a thread-exit destructor. */
	(void)urcu_bp_get_default_call_rcu_data();
	/* Opt-in per-CPU call_rcu workers: frees spread over CPUs under write-heavy load, at
	 * the price of one thread per CPU in the host. Failure leaves the default worker. */
	if (percpu)
		(void)urcu_bp_create_all_cpu_call_rcu_data(0);
	/* release: pairs with the acquire in coffer__rcu_setup() (pthread_once() orders it
	 * anyway for callers that pass through it; this is only the early check's skip) */
	__atomic_store_n(&setup_ran, true, __ATOMIC_RELEASE);
}

int coffer__rcu_setup(void)
{
	uint64_t percpu = 0;

	/*
	 * A bad COFFER_RCU_PERCPU fails this call only, as every other COFFER_* variable fails
	 * only the call that reads it: checked before the one-time set-up, which would
	 * otherwise record the -EINVAL for good, so that a process that fixed its environment
	 * (as coffer_env_check() told it to) still got -EINVAL from every coffer_init(),
	 * coffer_connect() and coffer_htab_create() (test env_retry). Once the set-up ran the
	 * variable is not read again (read once, at the runtime's start).
	 */
	if (!__atomic_load_n(&setup_ran, __ATOMIC_ACQUIRE) && coffer__env_rcu_percpu(&percpu) != 0)
		return -EINVAL;
	pthread_once(&setup_once, setup);
	return setup_rc;
}

int coffer__rcu_barrier(void)
{
	COFFER__NO_CANCEL(); /* urcu_bp_barrier() sleeps (runtime/nocancel.h) */

	if (coffer__rcu_read_ongoing())
		return -EINVAL;
	coffer__reclaim_flush_all();
	urcu_bp_barrier();
#ifdef COFFER__TSAN
	__tsan_acquire(&coffer__rcu_cb_sync);
#endif
	coffer__reclaim_drain_all();
	return 0;
}

COFFER_API void coffer_rcu_read_lock(void)
{
	coffer__rcu_read_lock();
}

COFFER_API void coffer_rcu_read_unlock(void)
{
	coffer__rcu_read_unlock();
}
