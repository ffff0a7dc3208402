/*
 * core.c -- what a selected pthread mutex does, for both routes.
 *
 * A selected mutex is a netmutex plus its real pthread mutex ("local").
 * Locking takes the netmutex first, then local -- local only on the first
 * acquisition of a recursive hold -- and unlocking drops them in reverse.
 * Holding local as well is what lets a process-local condition variable
 * work on a cluster-wide mutex:
 *
 *   cond_wait: drop the netmutex but keep local, then the real
 *   pthread_cond_wait(cond, local) drops local and sleeps atomically;
 *   on waking drop local, take the netmutex, take local again.
 *
 * A signaler holds the mutex, so it holds local too: it cannot signal
 * between our release of the netmutex and our sleep, and no wake-up is
 * lost.  Only threads of this process can signal: a pthread_cond_t is
 * process-local.  Local is always taken after the netmutex, never while
 * waiting for it, so the two cannot deadlock.
 *
 * A selected condition variable (condsel.c) is a netmutex condition, which
 * any process may signal, and the wait is netmutex_cond_wait's:
 *
 *   cond_wait: drop local (the netmutex still keeps every other thread
 *   out), then netmutex_cond_wait(cond, netmutex) releases the netmutex
 *   and sleeps as one step for any signaller, which holds the netmutex;
 *   it returns with the netmutex held, whatever it returns; take local.
 *
 * Cancellation: netmutex's calls run with it disabled (core.h).  A wait
 * on a local condition variable is cancelled where pthread's is, inside
 * the real pthread_cond_wait, which takes local again before the clean-up
 * handlers run; our own handler, the first to run, then takes the netmutex
 * as above, so the program's handlers hold the whole mutex.  A wait on a
 * selected one acts on a cancellation on entry and on return, both with
 * the mutex held, and while it sleeps: netmutex_cond_wait is a
 * cancellation point there (and only there), which leaves the condition
 * and takes the netmutex again before the handlers run; ours, the next,
 * takes local.
 *
 * Errors are pthread's.  netmutex_unlock's two codes that pthread has not:
 * ENOLCK (our lease was lost: another holder may have overlapped ours) is
 * returned, and logged once (netmutex_log), since ported code rarely checks;
 * EIO (released here, the server could not be told, the key expires by
 * itself) breaks no exclusion, so it is reported once and 0 is returned.
 */
#include "core.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int is_owner(nm_port_t *p)
{
    return __atomic_load_n(&p->owned, __ATOMIC_ACQUIRE) &&
           pthread_equal(__atomic_load_n(&p->owner, __ATOMIC_RELAXED), pthread_self());
}

static void set_owner(nm_port_t *p, int owned)
{
    __atomic_store_n(&p->owner, pthread_self(), __ATOMIC_RELAXED);
    __atomic_store_n(&p->owned, owned, __ATOMIC_RELEASE);
}

/* The type and robustness of a real mutex, from glibc's kind field, which
 * both pthread_mutex_init and the static initializers set: the type in
 * its low two bits, robustness in bit 4 (glibc's internal
 * PTHREAD_MUTEX_ROBUST_NORMAL_NP, stable since robust mutexes exist). */
#define GLIBC_KIND_ROBUST 16
static void real_kind(const pthread_mutex_t *real, int *type, int *robust)
{
    int kind = real->__data.__kind;
    switch (kind & 3) {
    case PTHREAD_MUTEX_RECURSIVE: *type = NETMUTEX_RECURSIVE; break;
    case PTHREAD_MUTEX_ERRORCHECK: *type = NETMUTEX_ERRORCHECK; break;
    default: *type = NETMUTEX_NORMAL; break;
    }
    *robust = (kind & GLIBC_KIND_ROBUST) != 0;
}

static int create(nm_port_t **out, const char *name, const pthread_mutex_t *real)
{
    netmutex_attr_t attr;
    int type, robust, err;
    nm_port_t *p = calloc(1, sizeof *p);
    if (!p)
        return ENOMEM;
    real_kind(real, &type, &robust);
    netmutex_attr_init(&attr);
    err = netmutex_attr_settype(&attr, type);
    if (!err)
        err = netmutex_attr_setrobust(&attr, robust ? NETMUTEX_ROBUST : NETMUTEX_STALLED);
    if (!err)
        err = netmutex_init(&p->net, name, &attr);
    netmutex_attr_destroy(&attr);
    if (err) {
        free(p);
        return err;
    }
    *out = p;
    return 0;
}

int nm_port_create(nm_port_t **out, const char *name, const pthread_mutex_t *real)
{
    int old = nm_port_nocancel();
    int err = create(out, name, real);
    nm_port_recancel(old);
    return err;
}

int nm_port_free(nm_port_t *p)
{
    int old = nm_port_nocancel();
    int err = netmutex_destroy(&p->net);
    nm_port_recancel(old);
    if (!err)
        free(p);
    return err;
}

/* Read, not tried: a trylock would succeed on a recursive mutex the
 * caller itself holds.  glibc's lock word is nonzero while it is held. */
int nm_port_idle(pthread_mutex_t *real)
{
    return __atomic_load_n(&real->__data.__lock, __ATOMIC_RELAXED) != 0 ? EBUSY : 0;
}

static int net_acquire(nm_port_t *p, nm_port_wait_t how)
{
    if (how.clock == NM_PORT_TRY)
        return netmutex_trylock(&p->net);
    if (how.clock == NM_PORT_FOREVER)
        return netmutex_lock(&p->net);
    if (how.clock == NM_PORT_DEFAULT_CLOCK)
        return netmutex_timedlock(&p->net, how.abstime);
    return netmutex_clocklock(&p->net, how.clock, how.abstime);
}

/* Local is free but for a thread between releasing the netmutex and
 * sleeping in cond_wait, which is moments away from letting it go; a
 * trylock must not wait even for that, since pthread would call the mutex
 * still held.  A local robust owner that died only matters to the netmutex,
 * whose own state reports it. */
static int local_acquire(pthread_mutex_t *local, int try)
{
    int err = try ? __real_pthread_mutex_trylock(local) : __real_pthread_mutex_lock(local);
    if (err == EOWNERDEAD)
        err = __real_pthread_mutex_consistent(local);
    return err;
}

static void warn_once(int *flag, const char *what)
{
    if (!__atomic_exchange_n(flag, 1, __ATOMIC_RELAXED))
        netmutex_log(NETMUTEX_LOG_WARN, "pthread_mutex_unlock: %s (reported once)", what);
}

static int unlock_result(int err)
{
    static int lost_told, io_told;
    if (err == ENOLCK)
        warn_once(&lost_told, "lease lost while held (ENOLCK)");
    if (err == EIO) {
        warn_once(&io_told, "server unreachable; the lease will expire (EIO)");
        err = 0;
    }
    return err;
}

static int lock(nm_port_t *p, pthread_mutex_t *local, nm_port_wait_t how)
{
    int err = net_acquire(p, how);
    if (err != 0 && err != EOWNERDEAD)
        return err;
    if (is_owner(p)) {          /* a recursive relock: local is ours */
        p->depth++;
        return err;
    }
    if (local_acquire(local, how.clock == NM_PORT_TRY) != 0) {
        netmutex_unlock(&p->net);
        return EBUSY;
    }
    p->depth = 1;
    set_owner(p, 1);
    return err;
}

int nm_port_lock(nm_port_t *p, pthread_mutex_t *local, nm_port_wait_t how)
{
    int old = nm_port_nocancel();
    int err = lock(p, local, how);
    nm_port_recancel(old);
    return err;
}

int nm_port_unlock(nm_port_t *p, pthread_mutex_t *local)
{
    if (!is_owner(p))
        return EPERM;
    if (--p->depth == 0) {
        set_owner(p, 0);
        __real_pthread_mutex_unlock(local);
    }
    int old = nm_port_nocancel();
    int err = unlock_result(netmutex_unlock(&p->net));
    nm_port_recancel(old);
    return err;
}

int nm_port_consistent(nm_port_t *p)
{
    int old = nm_port_nocancel();
    int err = netmutex_consistent(&p->net);
    nm_port_recancel(old);
    return err;
}

static int valid_abstime(const struct timespec *ts)
{
    return ts && ts->tv_nsec >= 0 && ts->tv_nsec < 1000000000L;
}

/* The clock of a real condition variable's timedwait: glibc keeps
 * pthread_condattr_setclock's choice in bit 1 of __wrefs
 * (__PTHREAD_COND_CLOCK_MONOTONIC_MASK), and nothing else changes that
 * bit; a selected condition variable has no real waiters to change the
 * other bits. */
#define GLIBC_COND_MONOTONIC 2u
static clockid_t real_clock(const pthread_cond_t *c)
{
    unsigned int wrefs = __atomic_load_n(&c->__data.__wrefs, __ATOMIC_RELAXED);
    return wrefs & GLIBC_COND_MONOTONIC ? CLOCK_MONOTONIC : CLOCK_REALTIME;
}

static int check_wait(nm_port_t *p, nm_port_wait_t how)
{
    if (how.clock != NM_PORT_FOREVER && !valid_abstime(how.abstime))
        return EINVAL;
    if (how.clock >= 0 && how.clock != CLOCK_MONOTONIC && how.clock != CLOCK_REALTIME)
        return EINVAL;
    if (!is_owner(p) || p->depth != 1)
        return EPERM;
    return 0;
}

typedef struct relock {
    nm_port_t *p;
    pthread_mutex_t *local;
} relock_t;

/* A wait on a selected condition variable was cancelled while it slept:
 * netmutex_cond_wait left the condition and took the netmutex again
 * before its own handler let this one, the next, run.  Take local, as
 * the wait does when it returns, so that the program's handlers hold the
 * whole mutex. */
static void relocal_cancelled(void *arg)
{
    relock_t *r = arg;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);  /* the thread is on its way out */
    local_acquire(r->local, 0);
    r->p->depth = 1;
    set_owner(r->p, 1);
}

/* netmutex_cond_wait or clockwait of NC with P's netmutex, a cancellation
 * point while it sleeps, and only there, if the caller's cancellation is
 * enabled (netmutex_cond_wait(3)). */
static int netcond_sleep(nm_port_t *p, pthread_mutex_t *local, netmutex_cond_t *nc,
                         const pthread_cond_t *real, nm_port_wait_t how)
{
    relock_t r = { p, local };
    int err;
    pthread_cleanup_push(relocal_cancelled, &r);
    if (how.clock == NM_PORT_FOREVER)
        err = netmutex_cond_wait(nc, &p->net);
    else
        err = netmutex_cond_clockwait(nc, &p->net,
                                      how.clock == NM_PORT_DEFAULT_CLOCK ? real_clock(real)
                                                                         : how.clock,
                                      how.abstime);
    pthread_cleanup_pop(0);
    return err;
}

int nm_port_netcond_wait(nm_port_t *p, pthread_mutex_t *local, netmutex_cond_t *nc,
                         const pthread_cond_t *real, nm_port_wait_t how)
{
    static int lost_told;
    int err = check_wait(p, how);
    if (err)
        return err;
    pthread_testcancel();   /* a cancellation point, the mutex held */
    p->depth = 0;
    set_owner(p, 0);
    __real_pthread_mutex_unlock(local);   /* the netmutex stays ours */
    err = netcond_sleep(p, local, nc, real, how);
    int old = nm_port_nocancel();
    local_acquire(local, 0);
    p->depth = 1;
    set_owner(p, 1);
    if (err == ENOLCK && !__atomic_exchange_n(&lost_told, 1, __ATOMIC_RELAXED))
        netmutex_log(NETMUTEX_LOG_WARN, "pthread_cond_wait: lease lost while the mutex was "
                     "held (ENOLCK; reported once)");
    nm_port_recancel(old);
    pthread_testcancel();   /* and again on the way out, held again */
    return err;
}

static const nm_port_wait_t forever = { NM_PORT_FOREVER, NULL };

/* The real wait was cancelled, and the C library took local again before
 * running the clean-up handlers, this one first: take the mutex as a lock
 * does, netmutex first, so that the program's handlers hold it whole. */
static void relock_cancelled(void *arg)
{
    relock_t *r = arg;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);  /* the thread is on its way out */
    __real_pthread_mutex_unlock(r->local);
    lock(r->p, r->local, forever);
}

/* The real wait on C with local: a cancellation point. */
static int real_wait(nm_port_t *p, pthread_mutex_t *local, pthread_cond_t *c,
                     nm_port_wait_t how)
{
    relock_t r = { p, local };
    int waited;
    pthread_cleanup_push(relock_cancelled, &r);
    waited = nm_port_cond_wait_any(NULL, local, c, how);
    pthread_cleanup_pop(0);
    return waited;
}

/* pthread leaves a wait on a recursive mutex held more than once
 * undefined; we refuse it with EPERM rather than drop all levels. */
int nm_port_cond_wait(nm_port_t *p, pthread_mutex_t *local, pthread_cond_t *c,
                      nm_port_wait_t how)
{
    int bad = check_wait(p, how);
    if (bad)
        return bad;
    int old = nm_port_nocancel();
    p->depth = 0;
    set_owner(p, 0);
    unlock_result(netmutex_unlock(&p->net));   /* local stays ours */
    nm_port_recancel(old);
    int waited = real_wait(p, local, c, how);
    old = nm_port_nocancel();
    __real_pthread_mutex_unlock(local);
    int err = lock(p, local, forever);
    nm_port_recancel(old);
    return err ? err : waited;
}
