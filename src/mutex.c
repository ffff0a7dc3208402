/*
 * mutex.c -- the public netmutex_* calls: argument checks, the process-local
 * state machine of a mutex, and the hand-over to the server side (lease.c).
 *
 * State of a name in this process (registry entry, guarded by its mutex):
 *
 *   idle --lock--> busy (one thread talks to Redis) --granted--> held
 *     ^                 |                                          |
 *     +----failed-------+                      unlock: busy, release on the
 *     +----------------------------------------server, then idle ---+
 *
 * Only one thread per name talks to Redis at a time; other local threads
 * wait on the entry's condition variable until it goes idle.  Ownership is
 * per thread, as with pthread mutexes: only the thread that locked may
 * unlock.
 */
#include "nm.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <string.h>

#include "clock.h"
#include "config.h"
#include "conn.h"
#include "lease.h"
#include "registry.h"
#include "status.h"
#include "script.h"
#include "wake.h"
#include "watchdog.h"

#define ATTR_MAGIC 0x6e6d6174u   /* "nmat" */
#define STATE_STATIC 1u          /* NETMUTEX_INITIALIZER, not used yet */
#define STATE_LIVE 0x6e6d7478u   /* "nmtx": netmutex_init ran */
#define FLAG_ROBUST 1u
#define FLAG_NO_RENEW 2u
#define FLAG_FAIR 4u

/* ---- process-wide hooks ------------------------------------------------ */

/* Lock order: registry (then each entry), wake, watchdog, the list of
 * queued waiters (lease.c), then the leaf lock of the configuration, which
 * is never held while another is taken.  No path takes them in another
 * order, so quiescing them all cannot deadlock. */
static void before_fork(void)
{
    nm_registry_before_fork();
    nm_wake_before_fork();
    nm_watchdog_before_fork();
    nm_lease_before_fork();
    nm_config_before_fork();
}

static void after_fork_parent(void)
{
    nm_config_after_fork();
    nm_lease_after_fork_parent();
    nm_watchdog_after_fork_parent();
    nm_wake_after_fork_parent();
    nm_registry_after_fork_parent();
}

/* The child holds nothing, waits for nothing, has no background thread and
 * uses none of the parent's sockets; it builds its own on first use. */
static void after_fork_child(void)
{
    nm_config_after_fork();
    nm_lease_after_fork_child();
    nm_watchdog_after_fork_child();
    nm_wake_after_fork_child();
    nm_registry_after_fork_child();
    nm_conn_after_fork_child();
}

static void install_fork_handlers(void)
{
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

static void library_init(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, install_fork_handlers);
}

/* ---- attributes ------------------------------------------------------- */

static int valid_type(int type)
{
    return type == NETMUTEX_NORMAL || type == NETMUTEX_ERRORCHECK ||
           type == NETMUTEX_RECURSIVE;
}

static int valid_lease(unsigned int ms)
{
    return ms == 0 || (ms >= NETMUTEX_LEASE_MIN_MS && ms <= NETMUTEX_LEASE_MAX_MS);
}

static int attr_ok(const netmutex_attr_t *attr)
{
    return attr && attr->nm_magic == ATTR_MAGIC;
}

int netmutex_attr_init(netmutex_attr_t *attr)
{
    if (!attr)
        return EINVAL;
    attr->nm_magic = ATTR_MAGIC;
    attr->nm_type = NETMUTEX_DEFAULT;
    attr->nm_lease_ms = 0;
    attr->nm_flags = 0;
    attr->nm_lost = NULL;
    attr->nm_lost_arg = NULL;
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
    attr->nm_type = type;
    return 0;
}

int netmutex_attr_gettype(const netmutex_attr_t *attr, int *type)
{
    if (!attr_ok(attr) || !type)
        return EINVAL;
    *type = attr->nm_type;
    return 0;
}

int netmutex_attr_setlease(netmutex_attr_t *attr, unsigned int ms)
{
    if (!attr_ok(attr) || !valid_lease(ms))
        return EINVAL;
    attr->nm_lease_ms = ms;
    return 0;
}

int netmutex_attr_getlease(const netmutex_attr_t *attr, unsigned int *ms)
{
    if (!attr_ok(attr) || !ms)
        return EINVAL;
    *ms = attr->nm_lease_ms;
    return 0;
}

static int set_flag(netmutex_attr_t *attr, unsigned int flag, int on)
{
    if (!attr_ok(attr))
        return EINVAL;
    attr->nm_flags = on ? attr->nm_flags | flag : attr->nm_flags & ~flag;
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
    *robust = attr->nm_flags & FLAG_ROBUST ? NETMUTEX_ROBUST : NETMUTEX_STALLED;
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
    *on = !(attr->nm_flags & FLAG_NO_RENEW);
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
    *on = !!(attr->nm_flags & FLAG_FAIR);
    return 0;
}

int netmutex_attr_setlostfn(netmutex_attr_t *attr, netmutex_lost_fn fn, void *arg)
{
    if (!attr_ok(attr))
        return EINVAL;
    attr->nm_lost = fn;
    attr->nm_lost_arg = arg;
    return 0;
}

/* ---- handles ------------------------------------------------------------ */

static int valid_name(const char *name, size_t *len)
{
    if (!name)
        return 0;
    *len = strnlen(name, NETMUTEX_NAME_MAX + 1);
    return *len > 0 && *len <= NETMUTEX_NAME_MAX;
}

/* The registry entry behind M, created on first use for a statically
 * initialized mutex.  Threads racing to create it agree through one
 * compare-and-swap; the loser drops its reference. */
static int handle_entry(netmutex_t *m, nm_entry_t **out)
{
    size_t len;
    if (!m || (m->nm_state != STATE_LIVE && m->nm_state != STATE_STATIC))
        return EINVAL;
    nm_entry_t *e = __atomic_load_n((nm_entry_t **)&m->nm_handle, __ATOMIC_ACQUIRE);
    if (!e) {
        if (m->nm_state != STATE_STATIC || !valid_name(m->nm_name, &len) ||
            !valid_type(m->nm_type) || !valid_lease(m->nm_lease_ms))
            return EINVAL;
        library_init();
        nm_entry_t *fresh = nm_registry_get(m->nm_name, len), *expected = NULL;
        if (!fresh)
            return ENOMEM;
        if (__atomic_compare_exchange_n((nm_entry_t **)&m->nm_handle, &expected, fresh,
                                        0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            e = fresh;
        } else {
            nm_registry_put(fresh);
            e = expected;
        }
    }
    *out = e;
    return 0;
}

int netmutex_init(netmutex_t *m, const char *name, const netmutex_attr_t *attr)
{
    size_t len;
    if (!m || !valid_name(name, &len) || (attr && !attr_ok(attr)))
        return EINVAL;
    library_init();
    nm_entry_t *e = nm_registry_get(name, len);
    if (!e)
        return ENOMEM;
    m->nm_name = NULL; /* the entry keeps the name */
    m->nm_type = attr ? attr->nm_type : NETMUTEX_DEFAULT;
    m->nm_lease_ms = attr ? attr->nm_lease_ms : 0;
    m->nm_flags = attr ? attr->nm_flags : 0;
    m->nm_lost = attr ? attr->nm_lost : NULL;
    m->nm_lost_arg = attr ? attr->nm_lost_arg : NULL;
    m->nm_handle = e;
    m->nm_state = STATE_LIVE;
    return 0;
}

int netmutex_destroy(netmutex_t *m)
{
    nm_entry_t *e;
    int err = handle_entry(m, &e);
    if (err)
        return err;
    pthread_mutex_lock(&e->mu);
    int held_here = e->held && e->owner_handle == m;
    pthread_mutex_unlock(&e->mu);
    if (held_here)
        return EBUSY;
    nm_registry_put(e);
    memset(m, 0, sizeof *m);
    return 0;
}

/* ---- locking -------------------------------------------------------------- */

/* The calling thread already holds E: pthread's answers per type. */
static int relock(nm_entry_t *e, const netmutex_t *m, nm_wait_t wait)
{
    if (m->nm_type == NETMUTEX_RECURSIVE) {
        if (e->depth == UINT_MAX)
            return EAGAIN;
        e->depth++;
        return 0;
    }
    return wait == NM_NOWAIT ? EBUSY : EDEADLK;
}

/* Hands a fresh lease to the watchdog; if it cannot take it, the lock is
 * given back rather than held unwatched. */
static int start_watching(const netmutex_t *m, nm_entry_t *e, nm_lease_t *lease)
{
    nm_watch_opts_t opts = {
        .autorenew = !(m->nm_flags & FLAG_NO_RENEW),
        .lost = m->nm_lost ? m->nm_lost : lease->cfg->on_lost,
        .lost_arg = m->nm_lost ? m->nm_lost_arg : lease->cfg->on_lost_arg,
    };
    int err = nm_watchdog_track(lease, e->name, &opts);
    if (err)
        nm_lease_release(lease, 0);
    return err;
}

/* Waits, under e->mu, until no other local thread holds or is acquiring
 * E, or until the lock is handed to this process's waiters. */
static int wait_local_turn(nm_entry_t *e, nm_wait_t wait, int64_t deadline)
{
    int err = 0;
    /* A turn reserved (fair mode) belongs to a thread already waiting. */
    int newcomer_barred = e->reserved && e->waiters > 0;
    if (wait == NM_NOWAIT)
        return (e->busy && !e->handoff) || newcomer_barred ? EBUSY : 0;
    e->waiters++;
    while (((e->busy && !e->handoff) || newcomer_barred) && !err) {
        if (deadline == NM_FOREVER) {
            pthread_cond_wait(&e->cv, &e->mu);
        } else {
            struct timespec ts = nm_deadline_timespec(deadline);
            if (pthread_cond_timedwait(&e->cv, &e->mu, &ts) == ETIMEDOUT &&
                e->busy && !e->handoff)
                err = ETIMEDOUT;
        }
        /* Woken while idle: this waiter takes the reserved turn. */
        newcomer_barred = 0;
    }
    if (!err)
        e->reserved = 0;
    e->waiters--;
    return err;
}

/* Under e->mu: the calling thread now holds E, with a lease that is ours
 * at the server (fresh, or handed on by another local thread). */
static void become_owner(nm_entry_t *e, const netmutex_t *m)
{
    e->held = 1;
    e->handoff = 0;
    e->owner = pthread_self();
    e->owner_handle = m;
    e->depth = 1;
}

/* Under e->mu, in unlock: may the lease go to a local waiter instead of
 * back to Redis?  Only within the cohort budget, and only a lease that is
 * healthy: never a lost one, never one a robust holder left inconsistent. */
static int may_hand_off(const nm_entry_t *e)
{
    const nm_config_t *cfg = e->lease.cfg;
    if (e->waiters == 0 || e->inconsistent || nm_watchdog_lost(&e->lease))
        return 0;
    if (e->owner_handle->nm_flags & FLAG_FAIR)
        return 0;
    if (e->cohort_turns >= cfg->cohort_max)
        return 0;
    int64_t age = nm_now_ms() - e->cohort_start;
    return age < (int64_t)cfg->cohort_ms && nm_watchdog_valid_ms(&e->lease) > (int64_t)cfg->cohort_ms;
}

static int acquire(netmutex_t *m, nm_wait_t wait, int64_t deadline)
{
    nm_entry_t *e;
    nm_lease_t lease;
    int err = handle_entry(m, &e);
    if (err)
        return err;

    pthread_mutex_lock(&e->mu);
    if (e->held && pthread_equal(e->owner, pthread_self())) {
        err = relock(e, m, wait);
        pthread_mutex_unlock(&e->mu);
        return err;
    }
    err = wait_local_turn(e, wait, deadline);
    if (!err && e->handoff) {
        e->cohort_turns++;
        become_owner(e, m);
    }
    if (err || e->held) {
        pthread_mutex_unlock(&e->mu);
        return err;
    }
    e->busy = 1;
    pthread_mutex_unlock(&e->mu);

    err = nm_lease_acquire(&lease, e->name, e->name_len, m->nm_lease_ms,
                           (m->nm_flags & FLAG_ROBUST) != 0, wait, deadline);
    if (!err)
        err = start_watching(m, e, &lease);

    pthread_mutex_lock(&e->mu);
    if (err) {
        e->busy = 0;
        pthread_cond_signal(&e->cv);
    } else {
        e->lease = lease;
        e->cohort_turns = 0;
        e->cohort_start = nm_now_ms();
        become_owner(e, m);
        /* pthread robust semantics: the previous holder died holding it. */
        e->inconsistent = lease.owner_died && (m->nm_flags & FLAG_ROBUST);
        if (e->inconsistent)
            err = EOWNERDEAD;
        nm_registry_note_held(1);
    }
    pthread_mutex_unlock(&e->mu);
    return err;
}

int netmutex_lock(netmutex_t *m)
{
    return acquire(m, NM_WAIT, NM_FOREVER);
}

int netmutex_trylock(netmutex_t *m)
{
    return acquire(m, NM_NOWAIT, NM_FOREVER);
}

int netmutex_clocklock(netmutex_t *m, clockid_t clockid, const struct timespec *abstime)
{
    int64_t deadline;
    int err = nm_deadline_from_abstime(clockid, abstime, &deadline);
    return err ? err : acquire(m, NM_WAIT, deadline);
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
    if (!e->held || !pthread_equal(e->owner, pthread_self())) {
        pthread_mutex_unlock(&e->mu);
        return EPERM;
    }
    *out = e;
    return 0;
}

int netmutex_unlock(netmutex_t *m)
{
    nm_entry_t *e;
    nm_lease_t lease;
    int err = lock_if_owner(m, &e);
    if (err)
        return err;
    if (--e->depth > 0) {
        pthread_mutex_unlock(&e->mu);
        return 0;
    }
    if (may_hand_off(e)) {
        e->held = 0;
        e->handoff = 1;
        e->owner_handle = NULL;
        pthread_cond_signal(&e->cv);
        pthread_mutex_unlock(&e->mu);
        return 0;
    }
    /* Still busy while the release is under way, so no local thread
     * starts a Redis round trip that can only find the key still set. */
    lease = e->lease;
    memset(&e->lease, 0, sizeof e->lease);
    int unrecoverable = e->inconsistent;
    int fair = (e->owner_handle->nm_flags & FLAG_FAIR) != 0;
    e->held = 0;
    e->inconsistent = 0;
    e->owner_handle = NULL;
    pthread_mutex_unlock(&e->mu);

    int lost = nm_watchdog_lost(&lease);
    nm_watchdog_untrack(&lease);
    /* A lease declared lost by the clock may still be ours at the server
     * (it was paused, not expired): the owner-checked release deletes it
     * then, and nothing otherwise.  Either way the caller learns ENOLCK. */
    err = nm_lease_release(&lease, unrecoverable);
    if (lost && err == 0)
        err = ENOLCK;

    pthread_mutex_lock(&e->mu);
    e->busy = 0;
    e->reserved = fair && e->waiters > 0;
    nm_registry_note_held(-1);
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    return err;
}

/* ---- robustness, leases and fences ---------------------------------------- */

int netmutex_consistent(netmutex_t *m)
{
    nm_entry_t *e;
    int err = lock_if_owner(m, &e);
    if (err)
        return err;
    if (!e->inconsistent)
        err = EINVAL;
    e->inconsistent = 0;
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
    *token = (uint64_t)e->lease.fence;
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
    if (nm_watchdog_lost(&e->lease)) {
        err = ENOLCK;
    } else {
        *ms_left = (uint64_t)nm_watchdog_valid_ms(&e->lease);
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
    nm_lease_t *lease = &e->lease;
    pthread_mutex_unlock(&e->mu);
    if (nm_watchdog_lost(lease))
        return ENOLCK;
    err = nm_lease_extend(lease, ms, &sent_at);
    if (!err)
        nm_watchdog_extended(lease, sent_at, ms);
    return err;
}

int netmutex_break(const char *name)
{
    size_t len;
    if (!valid_name(name, &len))
        return EINVAL;
    library_init();
    return nm_lease_break(name, len);
}

int netmutex_status(const char *name, netmutex_status_t *st)
{
    size_t len;
    if (!valid_name(name, &len) || !st)
        return EINVAL;
    library_init();
    return nm_status(name, len, st);
}

/* ---- configuration ------------------------------------------------------- */

int netmutex_configure(const netmutex_config_t *cfg)
{
    nm_config_t *built;
    library_init();
    int err = nm_config_build(cfg, &built);
    return err ? err : nm_config_replace(built, nm_registry_any_held);
}

int netmutex_shutdown(void)
{
    int err = nm_config_replace(NULL, nm_registry_any_held);
    if (!err) {
        nm_watchdog_stop();
        nm_conn_close_thread();
    }
    return err;
}
