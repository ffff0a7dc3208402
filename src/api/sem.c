/*
 * sem.c -- the public netmutex_sem_* and netmutex_semattr_* calls:
 * argument checks, and the permits on the name's entry.
 *
 * A semaphore is a read-write lock with readers only and a bound: every
 * permit is a share of the name's bounded share set (shares.h), a hold of
 * its own on the entry's list (entry.h, kind NM_HOLD_PERMIT), renewed by
 * the background thread (renew.h) from the moment it is granted until its
 * post, and reported lost as a mutex's hold is.  Nothing waits locally: a
 * thread goes to the server, whose queue serves every process's waiters
 * in arrival order.  What the list answers locally is who holds what: a
 * post without a permit is EPERM, a destroy while one is held EBUSY.
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

#include "clock.h"
#include "condvar.h"
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

static int sattr_ok(const netmutex_semattr_t *a)
{
    return a && a->nm_magic == NM_SEMATTR_MAGIC;
}

int netmutex_semattr_init(netmutex_semattr_t *attr)
{
    if (!attr)
        return EINVAL;
    memset(attr, 0, sizeof *attr);
    attr->nm_magic = NM_SEMATTR_MAGIC;
    return 0;
}

int netmutex_semattr_destroy(netmutex_semattr_t *attr)
{
    if (!sattr_ok(attr))
        return EINVAL;
    attr->nm_magic = 0;
    return 0;
}

/* ---- handles ------------------------------------------------------------ */

/* The entry behind S, which netmutex_sem_init made. */
static int handle_entry(const netmutex_sem_t *s, nm_entry_t **out)
{
    if (!s || s->nm_init != NM_SEM_LIVE || !NM_S_HANDLE(s))
        return EINVAL;
    *out = NM_S_HANDLE(s);
    return 0;
}

int netmutex_sem_init(netmutex_sem_t *s, const char *name, unsigned int permits,
                      const netmutex_semattr_t *attr)
{
    size_t len;
    if (!s || !nm_name_ok(name, &len) || permits < 1 || permits > NETMUTEX_SEM_PERMITS_MAX ||
        (attr && !sattr_ok(attr)))
        return EINVAL;
    nm_library_init();
    nm_entry_t *e = nm_registry_get(NM_FAMILY_SEM, name, len);
    if (!e)
        return ENOMEM;
    memset(s, 0, sizeof *s);
    NM_S_PERMITS(s) = permits;
    NM_S_HANDLE(s) = e;
    s->nm_init = NM_SEM_LIVE;
    return 0;
}

int netmutex_sem_destroy(netmutex_sem_t *s)
{
    nm_entry_t *e;
    int err = handle_entry(s, &e);
    if (err)
        return err;
    pthread_mutex_lock(&e->mu);
    int held_here = nm_entry_hold_through(e, s);
    pthread_mutex_unlock(&e->mu);
    if (held_here)
        return EBUSY;
    nm_registry_put(e);
    memset(s, 0, sizeof *s);
    return 0;
}

/* ---- waiting ------------------------------------------------------------ */

/* How a permit of S, on E, goes back (handle.h). */
static nm_give_back_t give_back_of(const netmutex_sem_t *s, const nm_entry_t *e)
{
    return (nm_give_back_t){
        .e = e, .share = 1, .kind = NM_SHARE_PERMIT, .permits = NM_S_PERMITS(s)
    };
}

/* Hands a fresh permit to the renewal job, always renewed, its loss told
 * to the configured callback (handle.h). */
static int start_watching(const netmutex_sem_t *s, const nm_entry_t *e, nm_lease_t *l)
{
    nm_watch_opts_t opts = nm_watch_opts(l, e, 1, NULL, NULL);
    nm_give_back_t how = give_back_of(s, e);
    return nm_handle_watch(l, &opts, &how);
}

static int take_permit(netmutex_sem_t *s, nm_wait_t wait, int64_t deadline)
{
    nm_entry_t *e;
    int err = handle_entry(s, &e);
    if (err)
        return err;
    nm_hold_node_t *node = calloc(1, sizeof *node);
    if (!node)
        return ENOMEM;
    nm_stats_call(0);
    nm_stats_remote();
    err = nm_shares_acquire(&node->hold.lease, NM_SHARE_PERMIT, e->name, e->name_len, 0, 0,
                            NM_S_PERMITS(s), wait, deadline);
    if (!err)
        err = start_watching(s, e, &node->hold.lease);
    if (err) {
        free(node);
        /* sem_trywait's answer when every permit is held. */
        return err == EBUSY ? EAGAIN : err;
    }
    pthread_mutex_lock(&e->mu);
    nm_entry_hold_add(e, node, s, NM_HOLD_PERMIT);
    pthread_mutex_unlock(&e->mu);
    return 0;
}

/* A signal of the calling thread still unanswered is settled before a
 * wait returns, as before a mutex's lock (condvar.h). */
static int sem_take(netmutex_sem_t *s, nm_wait_t wait, int64_t deadline)
{
    return nm_cond_flushed(take_permit(s, wait, deadline));
}

int netmutex_sem_wait(netmutex_sem_t *s)
{
    return nm_errno_public(sem_take(s, NM_WAIT, NM_FOREVER));
}

int netmutex_sem_trywait(netmutex_sem_t *s)
{
    return nm_errno_public(sem_take(s, NM_NOWAIT, NM_FOREVER));
}

int netmutex_sem_clockwait(netmutex_sem_t *s, clockid_t clockid, const struct timespec *abstime)
{
    int64_t deadline;
    int err = nm_deadline_from_abstime(clockid, abstime, &deadline);
    return err ? err : nm_errno_public(sem_take(s, NM_WAIT, deadline));
}

int netmutex_sem_timedwait(netmutex_sem_t *s, const struct timespec *abstime)
{
    return netmutex_sem_clockwait(s, CLOCK_REALTIME, abstime);
}

/* ---- giving back, counting ---------------------------------------------- */

static int post(netmutex_sem_t *s)
{
    nm_entry_t *e;
    int err = handle_entry(s, &e);
    if (err)
        return err;
    pthread_mutex_lock(&e->mu);
    nm_hold_node_t *mine = nm_entry_hold_mine(e);
    if (mine)
        nm_entry_hold_remove(e, mine);
    pthread_mutex_unlock(&e->mu);
    if (!mine)
        return EPERM;

    nm_give_back_t how = give_back_of(s, e);
    err = nm_handle_release(&mine->hold.lease, &how);
    free(mine);
    return nm_errno_public(err);
}

/* A signal the thread wrote while it held the permit is settled too. */
int netmutex_sem_post(netmutex_sem_t *s)
{
    return nm_cond_flushed(post(s));
}

int netmutex_sem_getvalue(netmutex_sem_t *s, int *value)
{
    nm_entry_t *e;
    unsigned int free_permits;
    if (!value)
        return EINVAL;
    int err = handle_entry(s, &e);
    if (err)
        return err;
    err = nm_shares_free(e->name, e->name_len, NM_S_PERMITS(s), &free_permits);
    if (!err)
        *value = (int)free_permits;
    return nm_errno_public(err);
}

int netmutex_sem_status(const char *name, netmutex_shared_status_t *st)
{
    size_t len;
    if (!nm_name_ok(name, &len) || !st)
        return EINVAL;
    nm_library_init();
    return nm_errno_public(nm_shared_status(1, name, len, st));
}
