/*
 * mutex.c -- the public netmutex_* calls: argument checks, which move of
 * a name's state each call makes, and the hand-over to the server side
 * (lease.c).
 *
 * Each name has one process-local entry (registry.h) whose state only the
 * moves of entry.h change: lock takes a lease kept here (handed off by a
 * local unlock, or cached) or gets one from the servers; unlock hands it
 * to a local waiter, keeps it cached, or gives it back.  Only one thread
 * per name talks to Redis at a time; other local threads wait on the
 * entry's condition variable until it is no longer busy.  Ownership is
 * per thread, as with pthread mutexes: only the thread that locked may
 * unlock.
 *
 * Every call whose answer comes from the layers below returns it through
 * nm_errno_public() (nm.h): no internal code reaches the caller.
 */
#include "nm.h"

#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <pthread.h>
#include <string.h>

#include "cache.h"
#include "clock.h"
#include "cluster.h"
#include "condvar.h"
#include "config.h"
#include "conn.h"
#include "deadlock.h"
#include "entry.h"
#include "handle.h"
#include "journal.h"
#include "lease.h"
#include "list.h"
#include "lockdep.h"
#include "mutex.h"
#include "opaque.h"
#include "registry.h"
#include "renew.h"
#include "resend.h"
#include "stats.h"
#include "stats_publish.h"
#include "status.h"
#include "script.h"
#include "subscriber.h"
#include "tls.h"
#include "wake.h"
#include "waiting.h"
#include "watchdog.h"

#define FLAG_ROBUST 1u
#define FLAG_NO_RENEW 2u
#define FLAG_FAIR 4u
#define FLAG_NO_CACHE 8u
#define FLAG_DEADLOCK_SET 16u /* netmutex_attr_setdeadlock was called */
#define FLAG_DEADLOCK 32u     /* ... with 1 */
/* What a trylock may spend giving back a cached lease it cannot use. */
#define STALE_GIVE_BACK_MS 50

/* ---- process-wide hooks ------------------------------------------------ */

/* Lock order: the cache's sweep lock, registry (then each entry), wake,
 * the renewal job's records (renew.c), the background thread's own lock
 * (watchdog.c), the list of queued waiters (lease.c), then the leaf locks of
 * the cache's list, the cluster state, the configuration and the journal
 * of recent releases (journal.c), which are never held while another is
 * taken, and last tls.c's: the guard every call into OpenSSL passes (a
 * thread may hold any lock above when it enters; it leaves without taking
 * one), then the stored sessions.  No path takes them in another order, so
 * quiescing them all cannot deadlock.  (A dial needs no lock here: its
 * socket is close-on-exec from birth, sock.c.) */
static void before_fork(void)
{
    nm_cache_before_fork();
    nm_registry_before_fork();
    nm_deadlock_before_fork();
    nm_wake_before_fork();
    nm_renew_before_fork();
    nm_watchdog_before_fork();
    nm_wait_before_fork();
    nm_cluster_before_fork();
    nm_config_before_fork();
    nm_journal_before_fork();
    nm_lockdep_before_fork();
    nm_tls_before_fork();
    nm_stats_before_fork();
}

static void after_fork_parent(void)
{
    nm_stats_after_fork_parent();
    nm_tls_after_fork_parent();
    nm_lockdep_after_fork_parent();
    nm_journal_after_fork_parent();
    nm_config_after_fork();
    nm_cluster_after_fork();
    nm_wait_after_fork_parent();
    nm_watchdog_after_fork_parent();
    nm_renew_after_fork_parent();
    nm_wake_after_fork_parent();
    nm_deadlock_after_fork_parent();
    nm_registry_after_fork_parent();
    nm_cache_after_fork_parent();
}

/* The child holds nothing, waits for nothing, has no background thread and
 * uses none of the parent's sockets; it builds its own on first use. */
static void after_fork_child(void)
{
    nm_stats_after_fork_child();
    nm_stats_publish_after_fork_child();
    nm_tls_after_fork_child();
    nm_lockdep_after_fork_child();
    nm_journal_after_fork_child();
    nm_config_after_fork();
    nm_cluster_after_fork();
    nm_lease_after_fork_child();
    nm_wait_after_fork_child();
    nm_watchdog_after_fork_child();
    nm_subscriber_after_fork_child();
    nm_renew_after_fork_child();
    nm_wake_after_fork_child();
    nm_deadlock_after_fork_child();
    nm_registry_after_fork_child();
    nm_cache_after_fork_child();
    nm_conn_after_fork_child();
}

/* The background thread's jobs (watchdog.h), in the order it runs them at
 * every pass: renewals first (their lost-lease notices are the most
 * pressing, and bound the others' I/O), then the cache's sweep, the resend
 * of releases after a failover, the subscribers, then deadlock detection's
 * waits, lock-order checking's orders and the publishing of statistics
 * (NETMUTEX_STATS=publish): none holds up a lease's renewal, so they come
 * last.  Registered before
 * any thread can start: every call that may start it comes through here. */
static void register_jobs(void)
{
    nm_renew_register();
    nm_cache_register();
    nm_resend_register();
    nm_subscriber_register();
    nm_deadlock_register();
    nm_lockdep_register();
    nm_stats_publish_register();
}

static void install_fork_handlers(void)
{
    nm_stats_init_from_env();
    register_jobs();
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

static void library_init(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, install_fork_handlers);
}

void nm_library_init(void)
{
    library_init();
}

/* ---- attributes ------------------------------------------------------- */

static int valid_type(int type)
{
    return type == NETMUTEX_NORMAL || type == NETMUTEX_ERRORCHECK ||
           type == NETMUTEX_RECURSIVE;
}

static int attr_ok(const netmutex_attr_t *attr)
{
    return attr && attr->nm_magic == NM_ATTR_MAGIC;
}

int netmutex_attr_init(netmutex_attr_t *attr)
{
    if (!attr)
        return EINVAL;
    memset(attr, 0, sizeof *attr);
    attr->nm_magic = NM_ATTR_MAGIC;
    NM_A_TYPE(attr) = NETMUTEX_DEFAULT;
    return 0;
}

int netmutex_attr_destroy(netmutex_attr_t *attr)
{
    if (!attr_ok(attr))
        return EINVAL;
    attr->nm_magic = 0;
    return 0;
}

int netmutex_attr_settype(netmutex_attr_t *attr, int type)
{
    if (!attr_ok(attr) || !valid_type(type))
        return EINVAL;
    NM_A_TYPE(attr) = (unsigned int)type;
    return 0;
}

int netmutex_attr_gettype(const netmutex_attr_t *attr, int *type)
{
    if (!attr_ok(attr) || !type)
        return EINVAL;
    *type = (int)NM_A_TYPE(attr);
    return 0;
}

int netmutex_attr_setlease(netmutex_attr_t *attr, unsigned int ms)
{
    if (!attr_ok(attr) || !nm_lease_ms_valid(ms))
        return EINVAL;
    NM_A_LEASE_MS(attr) = ms;
    return 0;
}

int netmutex_attr_getlease(const netmutex_attr_t *attr, unsigned int *ms)
{
    if (!attr_ok(attr) || !ms)
        return EINVAL;
    *ms = NM_A_LEASE_MS(attr);
    return 0;
}

static int set_flag(netmutex_attr_t *attr, unsigned int flag, int on)
{
    if (!attr_ok(attr))
        return EINVAL;
    NM_A_FLAGS(attr) = on ? NM_A_FLAGS(attr) | flag : NM_A_FLAGS(attr) & ~flag;
    return 0;
}

int netmutex_attr_setrobust(netmutex_attr_t *attr, int robust)
{
    if (robust != NETMUTEX_STALLED && robust != NETMUTEX_ROBUST)
        return EINVAL;
    return set_flag(attr, FLAG_ROBUST, robust == NETMUTEX_ROBUST);
}

int netmutex_attr_getrobust(const netmutex_attr_t *attr, int *robust)
{
    if (!attr_ok(attr) || !robust)
        return EINVAL;
    *robust = NM_A_FLAGS(attr) & FLAG_ROBUST ? NETMUTEX_ROBUST : NETMUTEX_STALLED;
    return 0;
}

int netmutex_attr_setautorenew(netmutex_attr_t *attr, int on)
{
    if (on != 0 && on != 1)
        return EINVAL;
    return set_flag(attr, FLAG_NO_RENEW, !on);
}

int netmutex_attr_getautorenew(const netmutex_attr_t *attr, int *on)
{
    if (!attr_ok(attr) || !on)
        return EINVAL;
    *on = !(NM_A_FLAGS(attr) & FLAG_NO_RENEW);
    return 0;
}

int netmutex_attr_setfair(netmutex_attr_t *attr, int on)
{
    if (on != 0 && on != 1)
        return EINVAL;
    return set_flag(attr, FLAG_FAIR, on);
}

int netmutex_attr_getfair(const netmutex_attr_t *attr, int *on)
{
    if (!attr_ok(attr) || !on)
        return EINVAL;
    *on = !!(NM_A_FLAGS(attr) & FLAG_FAIR);
    return 0;
}

int netmutex_attr_setcache(netmutex_attr_t *attr, int on)
{
    if (on != 0 && on != 1)
        return EINVAL;
    return set_flag(attr, FLAG_NO_CACHE, !on);
}

int netmutex_attr_getcache(const netmutex_attr_t *attr, int *on)
{
    if (!attr_ok(attr) || !on)
        return EINVAL;
    *on = !(NM_A_FLAGS(attr) & FLAG_NO_CACHE);
    return 0;
}

int netmutex_attr_setdeadlock(netmutex_attr_t *attr, int on)
{
    if (on != 0 && on != 1)
        return EINVAL;
    int err = set_flag(attr, FLAG_DEADLOCK_SET, 1);
    return err ? err : set_flag(attr, FLAG_DEADLOCK, on);
}

/* Whether a mutex of TYPE and FLAGS has deadlock detection: as its
 * attribute says, else for every lock under NETMUTEX_DEADLOCK=detect,
 * else for an error-checking mutex. */
static int detects(unsigned int type, unsigned int flags)
{
    if (flags & FLAG_DEADLOCK_SET)
        return (flags & FLAG_DEADLOCK) != 0;
    return type == NETMUTEX_ERRORCHECK || nm_deadlock_everywhere();
}

static int mutex_detects(const netmutex_t *m)
{
    unsigned int flags = m->nm_init == NM_STATE_LIVE ? NM_M_FLAGS(m) : 0;
    return detects((unsigned int)nm_m_type(m), flags);
}

int netmutex_attr_getdeadlock(const netmutex_attr_t *attr, int *on)
{
    if (!attr_ok(attr) || !on)
        return EINVAL;
    *on = detects(NM_A_TYPE(attr), NM_A_FLAGS(attr));
    return 0;
}

int netmutex_attr_setlostfn(netmutex_attr_t *attr, netmutex_lost_fn fn, void *arg)
{
    if (!attr_ok(attr))
        return EINVAL;
    nm_slot_set_fn(&NM_A_LOST(attr), fn);
    NM_A_LOST_ARG(attr) = arg;
    return 0;
}

/* ---- handles ------------------------------------------------------------ */

/* The registry entry behind M, created on first use for a statically
 * initialized mutex (handle.h). */
static int handle_entry(netmutex_t *m, nm_entry_t **out)
{
    static const nm_maker_t mk = NM_ENTRY_MAKER(NM_FAMILY_MUTEX, library_init);
    if (!m || (m->nm_init != NM_STATE_LIVE && !valid_type(nm_m_type(m))))
        return EINVAL;
    return nm_handle_entry(&NM_M_HANDLE(m), m->nm_init != NM_STATE_LIVE, m->nm_name, &mk, out);
}

int netmutex_init(netmutex_t *m, const char *name, const netmutex_attr_t *attr)
{
    size_t len;
    if (!m || !nm_name_ok(name, &len) || (attr && !attr_ok(attr)))
        return EINVAL;
    library_init();
    nm_entry_t *e = nm_registry_get(NM_FAMILY_MUTEX, name, len);
    if (!e)
        return ENOMEM;
    memset(m, 0, sizeof *m); /* m->nm_name NULL: the entry keeps the name */
    NM_M_TYPE(m) = attr ? NM_A_TYPE(attr) : NETMUTEX_DEFAULT;
    if (attr) {
        NM_M_LEASE_MS(m) = NM_A_LEASE_MS(attr);
        NM_M_FLAGS(m) = NM_A_FLAGS(attr);
        NM_M_LOST(m) = NM_A_LOST(attr);
        NM_M_LOST_ARG(m) = NM_A_LOST_ARG(attr);
    }
    NM_M_HANDLE(m) = e;
    m->nm_init = NM_STATE_LIVE;
    return 0;
}

int netmutex_destroy(netmutex_t *m)
{
    nm_entry_t *e;
    int err = handle_entry(m, &e);
    if (err)
        return err;
    const nm_entry_mutex_t *mx = nm_entry_mutex(e);
    pthread_mutex_lock(&e->mu);
    int held_here = mx->state == NM_HELD && mx->hold.handle == m;
    pthread_mutex_unlock(&e->mu);
    if (held_here)
        return EBUSY;
    /* The program is done with the name (for now): a lease kept cached
     * goes back rather than wait out its idle time. */
    nm_cache_drop(e);
    nm_registry_put(e);
    memset(m, 0, sizeof *m);
    return 0;
}

/* ---- locking -------------------------------------------------------------- */

/* The calling thread already holds E: pthread's answers per type. */
static int relock(nm_entry_t *e, const netmutex_t *m, nm_wait_t wait)
{
    nm_entry_mutex_t *mx = nm_entry_mutex(e);
    if (nm_m_type(m) == NETMUTEX_RECURSIVE) {
        if (mx->hold.depth == UINT_MAX)
            return EAGAIN;
        mx->hold.depth++;
        return 0;
    }
    return wait == NM_NOWAIT ? EBUSY : EDEADLK;
}

/* Hands a fresh lease to the watchdog; if it cannot take it, the lock is
 * given back rather than held unwatched. */
static int start_watching(const netmutex_t *m, nm_entry_t *e, nm_lease_t *lease)
{
    /* Listening for requests first: a cacheable lease's records call into
     * cache.c, which keeps E alive for them while it listens. */
    if (lease->cache && nm_cache_attach(e, lease) != 0)
        lease->cache = 0;
    nm_watch_opts_t opts = nm_watch_opts(lease, e, !(NM_M_FLAGS(m) & FLAG_NO_RENEW),
                                         nm_slot_fn(&NM_M_LOST(m)), NM_M_LOST_ARG(m));
    opts.wanted = lease->cache ? nm_cache_wanted : NULL;
    opts.wanted_arg = e;
    const nm_give_back_t how = { .e = e };
    return nm_handle_watch(lease, &opts, &how);
}

/* Under e->mu: a trylock's one look.  A cached lease on its way back to
 * the server has no holder: the background thread may be slow to say it
 * is back, and trylock must not report a holder meanwhile (within the I/O
 * timeout, trylock's own bound). */
static int try_local_turn(nm_entry_t *e, int newcomer_barred)
{
    const nm_entry_mutex_t *mx = nm_entry_mutex(e);
    while (mx->state == NM_RETURNING && nm_now_ms() < mx->returning_until) {
        struct timespec ts = nm_deadline_timespec(mx->returning_until);
        pthread_cond_timedwait(&e->cv, &e->mu, &ts);
    }
    return nm_entry_busy(e) || newcomer_barred ? EBUSY : 0;
}

/* Waits, under e->mu, until E is no longer busy (entry.h): free, or its
 * lease kept here for the next local lock. */
static int wait_local_turn(nm_entry_t *e, nm_wait_t wait, int64_t deadline, int detect)
{
    int err = 0;
    nm_entry_mutex_t *mx = nm_entry_mutex(e);
    nm_deadlock_wait_t *dl = NULL; /* deadlock.h: registered once it waits */
    /* A turn reserved (fair mode) belongs to a thread already waiting. */
    int newcomer_barred = mx->reserved && mx->waiters > 0;
    if (wait == NM_NOWAIT)
        return try_local_turn(e, newcomer_barred);
    mx->waiters++;
    while ((nm_entry_busy(e) || newcomer_barred) && !err) {
        if (!dl && nm_entry_busy(e))
            dl = nm_deadlock_begin(NM_WAIT_MUTEX, e->name, e->name_len, e, detect);
        if (nm_deadlock_chosen(dl)) {
            err = EDEADLK;
            break;
        }
        if (deadline == NM_FOREVER) {
            pthread_cond_wait(&e->cv, &e->mu);
        } else {
            struct timespec ts = nm_deadline_timespec(deadline);
            if (pthread_cond_timedwait(&e->cv, &e->mu, &ts) == ETIMEDOUT && nm_entry_busy(e))
                err = ETIMEDOUT;
        }
        /* Woken while idle: this waiter takes the reserved turn. */
        newcomer_barred = 0;
    }
    err = nm_deadlock_end(dl, err);
    if (!err)
        mx->reserved = 0;
    mx->waiters--;
    return err;
}

/* Whether M's lease may be kept cached (cache.h): the mutex allows it and
 * none of what caching cannot keep exact is asked for -- robust's
 * EOWNERDEAD, a lease that runs out by itself, fair mode's own turn in the
 * Redis queue and own fence for every acquisition. */
static int cache_allowed(const netmutex_t *m)
{
    return !(NM_M_FLAGS(m) & (FLAG_NO_CACHE | FLAG_ROBUST | FLAG_NO_RENEW | FLAG_FAIR));
}

static int is_fair(const void *handle)
{
    return (NM_M_FLAGS((const netmutex_t *)handle) & FLAG_FAIR) != 0;
}

/* Under e->mu, in unlock: may the lease go to a local waiter instead of
 * back to Redis?  Only within the cohort budget, and only a lease that is
 * healthy: never a lost one, never one a robust holder left inconsistent. */
static int may_hand_off(const nm_entry_t *e)
{
    const nm_entry_mutex_t *mx = nm_entry_mutex(e);
    const nm_config_t *cfg = mx->hold.lease.cfg;
    if (mx->waiters == 0 || mx->hold.inconsistent || nm_renew_lost(&mx->hold.lease))
        return 0;
    if (is_fair(mx->hold.handle) || mx->cohort_turns >= cfg->cohort_max)
        return 0;
    int64_t age = nm_now_ms() - mx->cohort_start;
    return age < (int64_t)cfg->cohort_ms &&
           nm_renew_valid_ms(&mx->hold.lease) > (int64_t)cfg->cohort_ms;
}

/* Under e->mu, after the turn: takes a lease kept here (handed off, or
 * cached and usable), 1; or 0, with a cached lease this handle cannot use
 * moved to *STALE and E on its way to the servers. */
static int take_kept(nm_entry_t *e, netmutex_t *m, nm_lease_t *stale)
{
    nm_entry_mutex_t *mx = nm_entry_mutex(e);
    if (mx->state == NM_HANDOFF) {
        mx->cohort_turns++;
        nm_entry_take(e, m);
        return 1;
    }
    if (nm_cache_take_locked(e, cache_allowed(m), stale)) {
        nm_entry_take(e, m);
        mx->cohort_turns = 0;
        mx->cohort_start = nm_now_ms();
        return 1;
    }
    if (!stale->key)
        nm_entry_acquiring(e);
    return 0;
}

/* Under e->mu: the lease the calling thread acquired is E's; pthread's
 * robust answer if its previous holder died holding it. */
static int granted(nm_entry_t *e, netmutex_t *m, const nm_lease_t *lease)
{
    nm_entry_mutex_t *mx = nm_entry_mutex(e);
    nm_entry_granted(e, m, lease);
    mx->cohort_turns = 0;
    mx->cohort_start = nm_now_ms();
    nm_cache_acquired_locked(e);
    mx->hold.inconsistent = lease->owner_died && (NM_M_FLAGS(m) & FLAG_ROBUST);
    return mx->hold.inconsistent ? EOWNERDEAD : 0;
}

/* E is ACQUIRING for the calling thread: a lease from the servers, after
 * giving back a stale cached one; RIDER (or NULL) with the first request
 * (lease.h). */
static int acquire_remote(nm_entry_t *e, netmutex_t *m, nm_lease_t *stale, nm_wait_t wait,
                          int64_t deadline, nm_script_call_t *rider)
{
    nm_lease_t lease;
    /* The stale lease goes back within the caller's bound: a trylock may
     * spend only a moment on it (its own attempt gets the I/O timeout), a
     * timed lock no more than its deadline. */
    nm_stats_remote();
    if (stale->key)
        nm_cache_give_back(stale, wait == NM_NOWAIT ? nm_now_ms() + STALE_GIVE_BACK_MS
                                                    : deadline);
    unsigned int flags = (NM_M_FLAGS(m) & FLAG_ROBUST ? NM_LEASE_ROBUST : 0) |
                         (cache_allowed(m) ? NM_LEASE_CACHE : 0);
    nm_deadlock_wait_t *dl = nm_deadlock_begin(NM_WAIT_MUTEX, e->name, e->name_len, NULL,
                                               wait == NM_WAIT && mutex_detects(m));
    int err = nm_deadlock_end(dl, nm_lease_acquire_riding(&lease, e->name, e->name_len,
                                                          NM_M_LEASE_MS(m), flags, wait,
                                                          deadline, rider));
    if (!err)
        err = start_watching(m, e, &lease);

    pthread_mutex_lock(&e->mu);
    if (err)
        nm_entry_not_granted(e);
    else
        err = granted(e, m, &lease);
    pthread_mutex_unlock(&e->mu);
    return err;
}

static int acquire(netmutex_t *m, nm_wait_t wait, int64_t deadline)
{
    nm_entry_t *e;
    nm_lease_t stale = { 0 };
    int err = handle_entry(m, &e);
    if (err)
        return err;

    const nm_entry_mutex_t *mx = nm_entry_mutex(e);
    pthread_mutex_lock(&e->mu);
    nm_stats_call(nm_entry_busy(e) || (mx->reserved && mx->waiters > 0));
    if (nm_entry_mine(e))
        err = relock(e, m, wait);
    else
        err = wait_local_turn(e, wait, deadline, mutex_detects(m));
    if (err || mx->state == NM_HELD || take_kept(e, m, &stale)) {
        pthread_mutex_unlock(&e->mu);
        return err;
    }
    pthread_mutex_unlock(&e->mu);
    return acquire_remote(e, m, &stale, wait, deadline, NULL);
}

/* acquire(), then a signal of the calling thread still unanswered
 * (condvar.h) is settled. */
static int acquire_flush(netmutex_t *m, nm_wait_t wait, int64_t deadline)
{
    return nm_cond_flushed(acquire(m, wait, deadline));
}

int netmutex_lock(netmutex_t *m)
{
    return nm_errno_public(acquire_flush(m, NM_WAIT, NM_FOREVER));
}

int netmutex_trylock(netmutex_t *m)
{
    return nm_errno_public(acquire_flush(m, NM_NOWAIT, NM_FOREVER));
}

int netmutex_clocklock(netmutex_t *m, clockid_t clockid, const struct timespec *abstime)
{
    int64_t deadline;
    int err = nm_deadline_from_abstime(clockid, abstime, &deadline);
    return err ? err : nm_errno_public(acquire_flush(m, NM_WAIT, deadline));
}

int netmutex_timedlock(netmutex_t *m, const struct timespec *abstime)
{
    return netmutex_clocklock(m, CLOCK_REALTIME, abstime);
}

/* Locks E's mutex if the calling thread holds E: 0, or EPERM unlocked. */
static int lock_if_owner(netmutex_t *m, nm_entry_t **out)
{
    nm_entry_t *e;
    int err = handle_entry(m, &e);
    if (err)
        return err;
    pthread_mutex_lock(&e->mu);
    if (!nm_entry_mine(e)) {
        pthread_mutex_unlock(&e->mu);
        return EPERM;
    }
    *out = e;
    return 0;
}

int nm_mutex_wait_check(netmutex_t *m, unsigned int *lease_ms)
{
    nm_entry_t *e;
    int err = lock_if_owner(m, &e);
    if (err)
        return err;
    if (nm_entry_mutex(e)->hold.depth > 1)
        err = EINVAL;
    *lease_ms = m->nm_init == NM_STATE_LIVE ? NM_M_LEASE_MS(m) : 0;
    pthread_mutex_unlock(&e->mu);
    return err;
}

/* Under e->mu, leaving it: E's lease goes back to the servers, RIDER (or
 * NULL) first and TRAILER (or NULL) last (lease.h).  E stays busy (RELEASING) meanwhile, so no local
 * thread starts a round trip that can only find the key still set. */
static int release(nm_entry_t *e, int fair, nm_script_call_t *rider, nm_trailer_t *trailer)
{
    nm_lease_t lease;
    nm_entry_mutex_t *mx = nm_entry_mutex(e);
    int unrecoverable = mx->hold.inconsistent;
    nm_cache_released_locked(e);
    nm_entry_releasing(e, &lease);
    pthread_mutex_unlock(&e->mu);

    const nm_give_back_t how = {
        .e = e, .unrecoverable = unrecoverable, .rider = rider, .trailer = trailer
    };
    int err = nm_handle_release(&lease, &how);

    pthread_mutex_lock(&e->mu);
    mx->reserved = fair && mx->waiters > 0;
    nm_entry_freed(e);
    pthread_mutex_unlock(&e->mu);
    return err;
}

static int unlock(netmutex_t *m);

/* A signal this thread sent while it held M is answered by now, with
 * the release's answer when the lease went back (condvar.h). */
int netmutex_unlock(netmutex_t *m)
{
    return nm_cond_flushed(unlock(m));
}

static int unlock(netmutex_t *m)
{
    nm_entry_t *e;
    int err = lock_if_owner(m, &e);
    if (err)
        return err;
    nm_entry_mutex_t *mx = nm_entry_mutex(e);
    if (--mx->hold.depth > 0) {
        pthread_mutex_unlock(&e->mu);
        return 0;
    }
    int fair = is_fair(mx->hold.handle);
    /* Right after a signal of this thread the lease goes back, with the
     * signal's answer (condvar.h): the next locker is most likely the
     * waiter it woke, in another process perhaps, which would otherwise
     * have to ask for it. */
    if (may_hand_off(e)) {
        nm_entry_hand_off(e);
    } else if (!nm_cond_owed() && nm_cache_keep_locked(e)) {
        mx->reserved = fair && mx->waiters > 0;
        nm_entry_keep(e);
    } else {
        return nm_errno_public(release(e, fair, NULL, NULL));
    }
    pthread_mutex_unlock(&e->mu);
    return 0;
}

int nm_mutex_unlock_riding(netmutex_t *m, nm_script_call_t *rider, nm_trailer_t *trailer,
                           int *rode)
{
    nm_entry_t *e;
    *rode = 0;
    int err = lock_if_owner(m, &e);
    if (err)
        return err;
    nm_entry_mutex_t *mx = nm_entry_mutex(e);
    if (mx->hold.depth != 1 || may_hand_off(e)) {
        pthread_mutex_unlock(&e->mu);
        return 0;
    }
    mx->hold.depth = 0;
    *rode = 1;
    return nm_errno_public(release(e, is_fair(mx->hold.handle), rider, trailer));
}

int nm_mutex_lock_riding(netmutex_t *m, nm_script_call_t *rider, int *rode)
{
    nm_entry_t *e;
    *rode = 0;
    int err = handle_entry(m, &e);
    if (err)
        return err;
    pthread_mutex_lock(&e->mu);
    /* Only a name nobody here holds, keeps or waits for goes to the
     * servers at once (acquire() says the rest). */
    const nm_entry_mutex_t *mx = nm_entry_mutex(e);
    if (mx->state != NM_FREE || mx->waiters > 0) {
        pthread_mutex_unlock(&e->mu);
        return 0;
    }
    nm_entry_acquiring(e);
    nm_stats_call(0);
    pthread_mutex_unlock(&e->mu);
    nm_lease_t stale = { 0 };
    *rode = 1;
    return nm_errno_public(acquire_remote(e, m, &stale, NM_WAIT, NM_FOREVER, rider));
}

/* ---- robustness, leases and fences ---------------------------------------- */

int netmutex_consistent(netmutex_t *m)
{
    nm_entry_t *e;
    int err = lock_if_owner(m, &e);
    if (err)
        return err;
    nm_hold_t *hold = &nm_entry_mutex(e)->hold;
    if (!hold->inconsistent)
        err = EINVAL;
    hold->inconsistent = 0;
    pthread_mutex_unlock(&e->mu);
    return err;
}

int netmutex_fence(netmutex_t *m, uint64_t *token)
{
    nm_entry_t *e;
    if (!token)
        return EINVAL;
    int err = lock_if_owner(m, &e);
    if (err)
        return err;
    *token = (uint64_t)nm_entry_mutex(e)->hold.lease.fence;
    pthread_mutex_unlock(&e->mu);
    return 0;
}

int netmutex_validity(netmutex_t *m, uint64_t *ms_left)
{
    nm_entry_t *e;
    if (!ms_left)
        return EINVAL;
    int err = lock_if_owner(m, &e);
    if (err)
        return err;
    const nm_lease_t *lease = &nm_entry_mutex(e)->hold.lease;
    if (nm_renew_lost(lease)) {
        err = ENOLCK;
    } else {
        *ms_left = (uint64_t)nm_renew_valid_ms(lease);
    }
    pthread_mutex_unlock(&e->mu);
    return err;
}

int netmutex_extend(netmutex_t *m, unsigned int ms)
{
    nm_entry_t *e;
    int64_t sent_at;
    if (ms < NETMUTEX_LEASE_MIN_MS || ms > NETMUTEX_LEASE_MAX_MS)
        return EINVAL;
    int err = lock_if_owner(m, &e);
    if (err)
        return err;
    /* The owner's own lease cannot go away under it: only its unlock, on
     * this very thread, ends it.  So the entry lock need not be held over
     * the round trip. */
    nm_lease_t *lease = &nm_entry_mutex(e)->hold.lease;
    pthread_mutex_unlock(&e->mu);
    if (nm_renew_lost(lease))
        return ENOLCK;
    err = nm_lease_extend(lease, ms, &sent_at);
    if (!err)
        nm_renew_extended(lease, sent_at, ms);
    return nm_errno_public(err);
}

int netmutex_break(const char *name)
{
    size_t len;
    if (!nm_name_ok(name, &len))
        return EINVAL;
    library_init();
    int err = nm_lease_break(name, len);
    /* A lease this process holds or caches is gone: its message may come
     * after our own unlock, which must not keep it as if it were ours. */
    if (err == 0)
        nm_registry_with(name, len, nm_cache_broken);
    return nm_errno_public(err);
}

int netmutex_status(const char *name, netmutex_status_t *st)
{
    size_t len;
    if (!nm_name_ok(name, &len) || !st)
        return EINVAL;
    library_init();
    return nm_errno_public(nm_status(name, len, st));
}

/* A Redis glob that can match a name: not empty, not longer than a name
 * whose every byte is quoted, no lone '\\' at its end, every '[' closed
 * (Redis would take those literally or match to the end: a mistake). */
static int valid_pattern(const char *p)
{
    size_t len = strnlen(p, 2 * NETMUTEX_NAME_MAX + 1);
    if (len == 0 || len > 2 * NETMUTEX_NAME_MAX)
        return 0;
    for (size_t i = 0; i < len; i++) {
        if (p[i] == '\\' && ++i == len)
            return 0;
        if (p[i] != '[' || (i > 0 && p[i - 1] == '\\'))
            continue;
        /* A set: '\\' quotes, the first ']' after it ends it. */
        for (i++; i < len && p[i] != ']'; i++)
            if (p[i] == '\\' && ++i == len)
                return 0;
        if (i == len)
            return 0;
    }
    return 1;
}

/* What every listing call does first: INFO (may be NULL) zeroed, then
 * EINVAL for a missing callback or a bad PATTERN (NULL: every name), or 0
 * with the library started. */
static int listing_begin(const char *pattern, int no_fn, netmutex_list_info_t *info)
{
    if (info)
        memset(info, 0, sizeof *info);
    if (no_fn || (pattern && !valid_pattern(pattern)))
        return EINVAL;
    library_init();
    return 0;
}

int netmutex_list(const char *pattern, netmutex_list_fn fn, void *arg,
                  netmutex_list_info_t *info)
{
    int err = listing_begin(pattern, !fn, info);
    if (err)
        return err;
    return nm_errno_public(nm_list(pattern ? pattern : "*", fn, arg, info));
}

int netmutex_list_shared(const char *pattern, netmutex_list_shared_fn fn, void *arg,
                         netmutex_list_info_t *info)
{
    int err = listing_begin(pattern, !fn, info);
    if (err)
        return err;
    return nm_errno_public(nm_list_shared(pattern ? pattern : "*", fn, arg, info));
}

int netmutex_waits(netmutex_waits_fn fn, void *arg, netmutex_list_info_t *info)
{
    int err = listing_begin(NULL, !fn, info);
    if (err)
        return err;
    return nm_errno_public(nm_list_waits(fn, arg, info));
}

/* ---- every process's published statistics ---------------------------------- */

typedef struct cluster_read {
    nm_stats_merge_t *merge;
    const char *pattern;
    netmutex_stats_fn fn;
    void *arg;
} cluster_read_t;

/* One process's text into the merge; a text of another format is left
 * out (a newer writer's), as what it held before the line not read. */
static int merge_text(const char *text, size_t len, void *arg)
{
    cluster_read_t *cr = arg;
    return nm_stats_merge_add(cr->merge, text, len) == ENOMEM;
}

static int hand_out_merged(const char *name, const netmutex_stats_t *st, void *arg)
{
    cluster_read_t *cr = arg;
    if (fnmatch(cr->pattern, name, 0) != 0)
        return 0;
    return cr->fn(name, st, cr->arg);
}

int netmutex_stats_cluster(const char *pattern, netmutex_stats_fn fn, void *arg,
                           netmutex_list_info_t *info)
{
    int err = listing_begin(pattern, !fn, info);
    if (err)
        return err;
    cluster_read_t cr = { nm_stats_merge_new(), pattern ? pattern : "*", fn, arg };
    if (!cr.merge)
        return ENOMEM;
    err = nm_list_stats(merge_text, &cr, info);
    if (err == ECANCELED)
        err = ENOMEM;
    if (!err)
        err = nm_stats_merge_each(cr.merge, hand_out_merged, &cr);
    nm_stats_merge_free(cr.merge);
    return nm_errno_public(err);
}

/* ---- configuration ------------------------------------------------------- */

int netmutex_configure(const netmutex_config_t *cfg)
{
    nm_config_t *built;
    library_init();
    int err = nm_config_build(cfg, &built);
    if (err)
        return nm_errno_public(err);
    /* Cached leases live under the configuration that got them, and so
     * does a signal of ours still unanswered. */
    nm_cond_flush(1);
    nm_cache_flush();
    return nm_errno_public(nm_config_replace(built, nm_entry_any_held));
}

int netmutex_shutdown(void)
{
    nm_cond_flush(1); /* a signal of ours answered, or sent again */
    nm_cache_flush();
    int err = nm_config_replace(NULL, nm_entry_any_held);
    if (!err) {
        nm_watchdog_stop();
        nm_cache_forget();
        nm_journal_clear();
        nm_conn_close_thread();
    }
    return nm_errno_public(err);
}
