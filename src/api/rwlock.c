/*
 * rwlock.c -- the public netmutex_rwlock_* and netmutex_rwlockattr_*
 * calls: argument checks, pthread's answers for a thread that holds the
 * lock already, and the holds on the name's entry.
 *
 * Every handle of a name points at the name's rwlock entry (registry.h),
 * whose list of holds (entry.h) has one hold per thread that holds the
 * lock: a read share or the write lock, each a lease of its own from the
 * server (shares.h), renewed by the background thread (renew.h) from the
 * moment it is granted until its unlock.  Nothing waits locally: a thread
 * without a hold goes to the server, whose queue orders readers and
 * writers of every process alike.  What the list answers locally is what
 * pthread answers without asking anybody: a second read lock of a reader
 * (its depth), EDEADLK or EBUSY for a lock its holder cannot get without
 * waiting for itself, EPERM for an unlock without a hold.
 *
 * Every call whose answer comes from the layers below returns it through
 * nm_errno_public() (nm.h): no internal code reaches the caller.
 */
#include "nm.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "clock.h"
#include "condvar.h"
#include "deadlock.h"
#include "entry.h"
#include "handle.h"
#include "lease.h"
#include "mutex.h"
#include "opaque.h"
#include "registry.h"
#include "renew.h"
#include "shares.h"
#include "stats.h"
#include "status.h"

/* ---- attributes ------------------------------------------------------- */

static int rattr_ok(const netmutex_rwlockattr_t *a)
{
    return a && a->nm_magic == NM_RWLOCKATTR_MAGIC;
}

static int valid_kind(int kind)
{
    return kind == NETMUTEX_RWLOCK_PREFER_WRITER || kind == NETMUTEX_RWLOCK_PREFER_READER;
}

int netmutex_rwlockattr_init(netmutex_rwlockattr_t *attr)
{
    if (!attr)
        return EINVAL;
    memset(attr, 0, sizeof *attr);
    attr->nm_magic = NM_RWLOCKATTR_MAGIC;
    NM_RA_KIND(attr) = NETMUTEX_RWLOCK_DEFAULT;
    return 0;
}

int netmutex_rwlockattr_destroy(netmutex_rwlockattr_t *attr)
{
    if (!rattr_ok(attr))
        return EINVAL;
    attr->nm_magic = 0;
    return 0;
}

int netmutex_rwlockattr_setkind(netmutex_rwlockattr_t *attr, int kind)
{
    if (!rattr_ok(attr) || !valid_kind(kind))
        return EINVAL;
    NM_RA_KIND(attr) = (unsigned int)kind;
    return 0;
}

int netmutex_rwlockattr_getkind(const netmutex_rwlockattr_t *attr, int *kind)
{
    if (!rattr_ok(attr) || !kind)
        return EINVAL;
    *kind = (int)NM_RA_KIND(attr);
    return 0;
}

int netmutex_rwlockattr_setlease(netmutex_rwlockattr_t *attr, unsigned int ms)
{
    if (!rattr_ok(attr) || !nm_lease_ms_valid(ms))
        return EINVAL;
    NM_RA_LEASE_MS(attr) = ms;
    return 0;
}

int netmutex_rwlockattr_getlease(const netmutex_rwlockattr_t *attr, unsigned int *ms)
{
    if (!rattr_ok(attr) || !ms)
        return EINVAL;
    *ms = NM_RA_LEASE_MS(attr);
    return 0;
}

int netmutex_rwlockattr_setcache(netmutex_rwlockattr_t *attr, int on)
{
    if (!rattr_ok(attr) || (on != 0 && on != 1))
        return EINVAL;
    if (on)
        NM_RA_FLAGS(attr) |= NM_RW_FLAG_CACHE;
    else
        NM_RA_FLAGS(attr) &= ~NM_RW_FLAG_CACHE;
    return 0;
}

int netmutex_rwlockattr_getcache(const netmutex_rwlockattr_t *attr, int *on)
{
    if (!rattr_ok(attr) || !on)
        return EINVAL;
    *on = !!(NM_RA_FLAGS(attr) & NM_RW_FLAG_CACHE);
    return 0;
}

int netmutex_rwlockattr_setlostfn(netmutex_rwlockattr_t *attr, netmutex_lost_fn fn, void *arg)
{
    if (!rattr_ok(attr))
        return EINVAL;
    nm_slot_set_fn(&NM_RA_LOST(attr), fn);
    NM_RA_LOST_ARG(attr) = arg;
    return 0;
}

/* ---- handles ------------------------------------------------------------ */

/* The entry behind RW, created on first use for a statically initialized
 * lock (handle.h). */
static int handle_entry(netmutex_rwlock_t *rw, nm_entry_t **out)
{
    static const nm_maker_t mk = NM_ENTRY_MAKER(NM_FAMILY_RWLOCK, nm_library_init);
    if (!rw || (rw->nm_init != NM_RWLOCK_LIVE && rw->nm_init != NETMUTEX_RWLOCK_STATIC_MARK_))
        return EINVAL;
    return nm_handle_entry(&NM_RW_HANDLE(rw), rw->nm_init != NM_RWLOCK_LIVE, rw->nm_name, &mk,
                           out);
}

int netmutex_rwlock_init(netmutex_rwlock_t *rw, const char *name,
                         const netmutex_rwlockattr_t *attr)
{
    size_t len;
    if (!rw || !nm_name_ok(name, &len) || (attr && !rattr_ok(attr)))
        return EINVAL;
    nm_library_init();
    nm_entry_t *e = nm_registry_get(NM_FAMILY_RWLOCK, name, len);
    if (!e)
        return ENOMEM;
    memset(rw, 0, sizeof *rw); /* rw->nm_name NULL: the entry keeps the name */
    if (attr) {
        NM_RW_KIND(rw) = NM_RA_KIND(attr);
        NM_RW_LEASE_MS(rw) = NM_RA_LEASE_MS(attr);
        NM_RW_FLAGS(rw) = NM_RA_FLAGS(attr);
        NM_RW_LOST(rw) = NM_RA_LOST(attr);
        NM_RW_LOST_ARG(rw) = NM_RA_LOST_ARG(attr);
    }
    NM_RW_HANDLE(rw) = e;
    rw->nm_init = NM_RWLOCK_LIVE;
    return 0;
}

int netmutex_rwlock_destroy(netmutex_rwlock_t *rw)
{
    nm_entry_t *e;
    int err = handle_entry(rw, &e);
    if (err)
        return err;
    pthread_mutex_lock(&e->mu);
    int held_here = nm_entry_hold_through(e, rw);
    pthread_mutex_unlock(&e->mu);
    if (held_here)
        return EBUSY;
    /* As a mutex's: a share kept cached goes back now. */
    nm_cache_drop(e);
    nm_registry_put(e);
    memset(rw, 0, sizeof *rw);
    return 0;
}

/* ---- locking ------------------------------------------------------------ */

static nm_share_kind_t share_kind(nm_hold_kind_t kind)
{
    return kind == NM_HOLD_WRITE ? NM_SHARE_WRITE : NM_SHARE_READ;
}

/* Under e->mu: the calling thread already holds the lock (MINE) and asks
 * for KIND.  A reader reads again at once; any other lock would wait for
 * the caller itself: EBUSY for a try, EDEADLK otherwise (a lock on a
 * server must not add a way to hang). */
static int relock(nm_hold_node_t *mine, nm_hold_kind_t kind, nm_wait_t wait)
{
    if (kind == NM_HOLD_SHARE && mine->hold.kind == NM_HOLD_SHARE) {
        if (mine->hold.depth == UINT_MAX)
            return EAGAIN;
        mine->hold.depth++;
        return 0;
    }
    return wait == NM_NOWAIT ? EBUSY : EDEADLK;
}

/* How a hold of KIND on E goes back (handle.h). */
static nm_give_back_t give_back_of(const nm_entry_t *e, nm_hold_kind_t kind)
{
    return (nm_give_back_t){ .e = e, .share = 1, .kind = share_kind(kind) };
}

/* Hands a fresh hold to the renewal job, always renewed, its loss told to
 * RW's callback (handle.h). */
static int start_watching(const netmutex_rwlock_t *rw, const nm_entry_t *e, nm_lease_t *l,
                          nm_hold_kind_t kind)
{
    nm_watch_opts_t opts = nm_watch_opts(l, e, 1, nm_slot_fn(&NM_RW_LOST(rw)), NM_RW_LOST_ARG(rw));
    nm_give_back_t how = give_back_of(e, kind);
    return nm_handle_watch(l, &opts, &how);
}

/* Whether RW's read shares may be cached (cache.h). */
static int cache_allowed(const netmutex_rwlock_t *rw)
{
    return (NM_RW_FLAGS(rw) & NM_RW_FLAG_CACHE) != 0;
}

/* Under e->mu: NODE becomes the calling thread's hold through E's cached
 * share. */
static void hold_shared_locked(nm_entry_t *e, nm_hold_node_t *node, const netmutex_rwlock_t *rw)
{
    nm_entry_hold_add(e, node, rw, NM_HOLD_SHARE);
    node->hold.shared = 1;
    node->hold.lease.fence = nm_entry_holds(e)->rshare->hold.lease.fence;
}

/* Under e->mu, for a thread without a hold: a reader of a caching handle
 * reads through the process's cached share (1, NODE its hold); a writer
 * revokes it.  *SWEEP: a cached share that cannot be used is to go back
 * (cache.h). */
static int through_cache_locked(nm_entry_t *e, netmutex_rwlock_t *rw, nm_hold_node_t *node,
                                nm_hold_kind_t kind, int *sweep)
{
    int reader = kind == NM_HOLD_SHARE;
    if (reader && !cache_allowed(rw))
        return 0;
    if (!nm_cache_share_join_locked(e, reader, sweep))
        return 0;
    hold_shared_locked(e, node, rw);
    return 1;
}

/* Under e->mu: the calling thread's fresh hold NODE goes on E's list; a
 * read share of a caching handle becomes E's cached share if E has none
 * (THIN, then, is the thread's hold through it). */
static void add_fresh_locked(nm_entry_t *e, netmutex_rwlock_t *rw, nm_hold_node_t *node,
                             nm_hold_node_t **thin, nm_hold_kind_t kind)
{
    if (*thin && nm_cache_share_install_locked(e, node)) {
        hold_shared_locked(e, *thin, rw);
        *thin = NULL;
        return;
    }
    nm_entry_hold_add(e, node, rw, kind);
}

/* KIND of E from the server into L, watched by deadlock detection
 * (NETMUTEX_DEADLOCK=detect) when it waits (a try does not). */
static int acquire(const netmutex_rwlock_t *rw, const nm_entry_t *e, nm_lease_t *l,
                   nm_hold_kind_t kind, nm_wait_t wait, int64_t deadline)
{
    unsigned int flags = NM_RW_KIND(rw) == NETMUTEX_RWLOCK_PREFER_READER
                             ? NM_SHARES_PREFER_READERS
                             : 0;
    nm_stats_remote();
    nm_deadlock_wait_t *dl =
        nm_deadlock_begin(kind == NM_HOLD_WRITE ? NM_WAIT_WRITE : NM_WAIT_READ, e->name,
                          e->name_len, NULL, wait == NM_WAIT && nm_deadlock_everywhere());
    return nm_deadlock_end(dl, nm_shares_acquire(l, share_kind(kind), e->name, e->name_len,
                                                 NM_RW_LEASE_MS(rw), flags, 0, wait,
                                                 deadline));
}

static int rw_take(netmutex_rwlock_t *rw, nm_hold_kind_t kind, nm_wait_t wait,
                   int64_t deadline)
{
    nm_entry_t *e;
    int err = handle_entry(rw, &e);
    if (err)
        return err;
    nm_hold_node_t *node = calloc(1, sizeof *node);
    if (!node)
        return ENOMEM;
    pthread_mutex_lock(&e->mu);
    nm_stats_call(0);
    nm_hold_node_t *mine = nm_entry_hold_mine(e);
    int joined = 0, sweep = 0;
    if (mine)
        err = relock(mine, kind, wait);
    else
        joined = through_cache_locked(e, rw, node, kind, &sweep);
    pthread_mutex_unlock(&e->mu);
    if (sweep)
        nm_cache_sweep_soon();
    if (mine || joined) {
        if (mine)
            free(node);
        return err;
    }
    err = acquire(rw, e, &node->hold.lease, kind, wait, deadline);
    nm_hold_node_t *thin = NULL;
    if (!err && kind == NM_HOLD_SHARE && cache_allowed(rw) && node->hold.lease.cfg->cache &&
        nm_cache_attach(e, &node->hold.lease) == 0)
        thin = calloc(1, sizeof *thin);
    if (!err)
        err = start_watching(rw, e, &node->hold.lease, kind);
    if (err) {
        free(thin);
        free(node);
        return err;
    }
    pthread_mutex_lock(&e->mu);
    add_fresh_locked(e, rw, node, &thin, kind);
    pthread_mutex_unlock(&e->mu);
    free(thin);
    return 0;
}

/* A signal of the calling thread still unanswered is settled before a
 * lock call returns, as before a mutex's (condvar.h). */
static int rw_lock(netmutex_rwlock_t *rw, nm_hold_kind_t kind, nm_wait_t wait,
                   int64_t deadline)
{
    return nm_cond_flushed(rw_take(rw, kind, wait, deadline));
}

int netmutex_rwlock_rdlock(netmutex_rwlock_t *rw)
{
    return nm_errno_public(rw_lock(rw, NM_HOLD_SHARE, NM_WAIT, NM_FOREVER));
}

int netmutex_rwlock_tryrdlock(netmutex_rwlock_t *rw)
{
    return nm_errno_public(rw_lock(rw, NM_HOLD_SHARE, NM_NOWAIT, NM_FOREVER));
}

int netmutex_rwlock_clockrdlock(netmutex_rwlock_t *rw, clockid_t clockid,
                                const struct timespec *abstime)
{
    int64_t deadline;
    int err = nm_deadline_from_abstime(clockid, abstime, &deadline);
    return err ? err : nm_errno_public(rw_lock(rw, NM_HOLD_SHARE, NM_WAIT, deadline));
}

int netmutex_rwlock_timedrdlock(netmutex_rwlock_t *rw, const struct timespec *abstime)
{
    return netmutex_rwlock_clockrdlock(rw, CLOCK_REALTIME, abstime);
}

int netmutex_rwlock_wrlock(netmutex_rwlock_t *rw)
{
    return nm_errno_public(rw_lock(rw, NM_HOLD_WRITE, NM_WAIT, NM_FOREVER));
}

int netmutex_rwlock_trywrlock(netmutex_rwlock_t *rw)
{
    return nm_errno_public(rw_lock(rw, NM_HOLD_WRITE, NM_NOWAIT, NM_FOREVER));
}

int netmutex_rwlock_clockwrlock(netmutex_rwlock_t *rw, clockid_t clockid,
                                const struct timespec *abstime)
{
    int64_t deadline;
    int err = nm_deadline_from_abstime(clockid, abstime, &deadline);
    return err ? err : nm_errno_public(rw_lock(rw, NM_HOLD_WRITE, NM_WAIT, deadline));
}

int netmutex_rwlock_timedwrlock(netmutex_rwlock_t *rw, const struct timespec *abstime)
{
    return netmutex_rwlock_clockwrlock(rw, CLOCK_REALTIME, abstime);
}

/* Locks E's mutex with the calling thread's hold in *MINE: 0, or EPERM
 * (unlocked) when it has none. */
static int lock_own_hold(netmutex_rwlock_t *rw, nm_entry_t **out, nm_hold_node_t **mine)
{
    nm_entry_t *e;
    int err = handle_entry(rw, &e);
    if (err)
        return err;
    pthread_mutex_lock(&e->mu);
    *mine = nm_entry_hold_mine(e);
    if (!*mine) {
        pthread_mutex_unlock(&e->mu);
        return EPERM;
    }
    *out = e;
    return 0;
}

/* Under e->mu, which it releases: the end of MINE, a hold through E's
 * cached share, which goes back if it is not to stay cached. */
static int unlock_shared(nm_entry_t *e, nm_hold_node_t *mine)
{
    int lost;
    nm_entry_hold_remove(e, mine);
    nm_hold_node_t *back = nm_cache_share_leave_locked(e, &lost);
    pthread_mutex_unlock(&e->mu);
    free(mine);
    int err = back ? nm_cache_share_give_back(e, back) : 0;
    return lost ? ENOLCK : err;
}

static int rw_unlock(netmutex_rwlock_t *rw)
{
    nm_entry_t *e;
    nm_hold_node_t *mine;
    int err = lock_own_hold(rw, &e, &mine);
    if (err)
        return err;
    if (--mine->hold.depth > 0) {
        pthread_mutex_unlock(&e->mu);
        return 0;
    }
    if (mine->hold.shared)
        return nm_errno_public(unlock_shared(e, mine));
    nm_entry_hold_remove(e, mine);
    pthread_mutex_unlock(&e->mu);

    nm_give_back_t how = give_back_of(e, (nm_hold_kind_t)mine->hold.kind);
    err = nm_handle_release(&mine->hold.lease, &how);
    free(mine);
    return nm_errno_public(err);
}

/* A signal the thread wrote while it held the lock is settled too. */
int netmutex_rwlock_unlock(netmutex_rwlock_t *rw)
{
    return nm_cond_flushed(rw_unlock(rw));
}

int netmutex_rwlock_fence(netmutex_rwlock_t *rw, uint64_t *token)
{
    nm_entry_t *e;
    nm_hold_node_t *mine;
    if (!token)
        return EINVAL;
    int err = lock_own_hold(rw, &e, &mine);
    if (err)
        return err;
    *token = (uint64_t)mine->hold.lease.fence;
    pthread_mutex_unlock(&e->mu);
    return 0;
}

int netmutex_rwlock_status(const char *name, netmutex_shared_status_t *st)
{
    size_t len;
    if (!nm_name_ok(name, &len) || !st)
        return EINVAL;
    nm_library_init();
    return nm_errno_public(nm_shared_status(0, name, len, st));
}
