/*
 * cond.c -- the public netmutex_cond_* and netmutex_condattr_* calls:
 * argument checks, a condition's process-local record, and the wait.
 *
 * A wait, in order (server/condvar.h does each step on the server):
 *   1. register as a waiter while the caller still holds the mutex, its
 *      entry living a lease past each look;
 *   2. unlock the mutex once the registration ran: from then on a
 *      signaller that holds the mutex runs its signal after the
 *      registration, so it cannot miss it.  The lease goes back to the
 *      servers (never kept cached: the next locker is likely the
 *      signaller, in another process perhaps), and the registration
 *      rides with its release (mutex.h): one round trip for both;
 *   3. block on the waiter's own list until a signal, the deadline, or a
 *      third of the lease, after which it looks (which keeps its entry
 *      alive, passes on the signals of waiters that died after they were
 *      chosen, and tells a signal whose push never came) and blocks again;
 *   4. leave, which tells whether it had been signalled (a wait that timed
 *      out as the signal came returns 0: it consumed the signal, which must
 *      not vanish), riding with
 *   5. the lock of the mutex again, whatever happened (POSIX), passing its
 *      EOWNERDEAD on.
 * A wake-up is only a hint: the caller's own lock request re-takes the
 * mutex, and the caller re-checks its predicate.  A server that fails
 * makes a spurious wake-up, never a hang.
 *
 * Cancellation: as pthread_cond_wait, a wait is a cancellation point, but
 * only in step 3, and only for a caller whose cancellation is enabled and
 * deferred: everything else runs with it disabled, since the library is
 * not cancellation-safe.  The block's wait for its BLPOP's reply (on one
 * server; reply.h, nm_reply_cancellable) and each look's turn act on it;
 * a clean-up handler then drops the connection the BLPOP is pending on,
 * does steps 4 and 5 (the leave passing on a signal it got: a cancelled
 * waiter consumes none) and lets the caller's handlers run with the mutex
 * held.
 *
 * The record (one per netmutex_cond_t) holds the name, the clock and how
 * many threads of this process wait, for destroy's EBUSY.
 */
#include "nm.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "condvar.h"
#include "handle.h"
#include "held.h"
#include "mutex.h"
#include "opaque.h"
#include "stats.h"

/* A server that could not be reached makes a spurious wake-up after this
 * pause, so that a caller looping on its predicate does not spin. */
#define UNREACHABLE_PAUSE_MS 100

typedef struct cond_rec {
    unsigned int waiters; /* atomic: threads of this process in a wait */
    clockid_t clock;      /* timedwait's */
    size_t name_len;
    char name[];          /* NUL-terminated */
} cond_rec_t;

/* ---- attributes ------------------------------------------------------- */

static int cattr_ok(const netmutex_condattr_t *a)
{
    return a && a->nm_magic == NM_CONDATTR_MAGIC;
}

static int valid_clock(clockid_t clock)
{
    return clock == CLOCK_REALTIME || clock == CLOCK_MONOTONIC;
}

int netmutex_condattr_init(netmutex_condattr_t *attr)
{
    if (!attr)
        return EINVAL;
    memset(attr, 0, sizeof *attr);
    attr->nm_magic = NM_CONDATTR_MAGIC;
    NM_CA_CLOCK(attr) = (unsigned int)CLOCK_REALTIME;
    return 0;
}

int netmutex_condattr_destroy(netmutex_condattr_t *attr)
{
    if (!cattr_ok(attr))
        return EINVAL;
    attr->nm_magic = 0;
    return 0;
}

int netmutex_condattr_setclock(netmutex_condattr_t *attr, clockid_t clock)
{
    if (!cattr_ok(attr) || !valid_clock(clock))
        return EINVAL;
    NM_CA_CLOCK(attr) = (unsigned int)clock;
    return 0;
}

int netmutex_condattr_getclock(const netmutex_condattr_t *attr, clockid_t *clock)
{
    if (!cattr_ok(attr) || !clock)
        return EINVAL;
    *clock = (clockid_t)NM_CA_CLOCK(attr);
    return 0;
}

/* ---- the record --------------------------------------------------------- */

/* A record for NAME, LEN bytes (handle.h, nm_name_ok), or NULL. */
static cond_rec_t *rec_new(const char *name, size_t len, clockid_t clock)
{
    cond_rec_t *r = calloc(1, sizeof *r + len + 1);
    if (!r)
        return NULL;
    r->clock = clock;
    r->name_len = len;
    memcpy(r->name, name, len);
    return r;
}

/* A statically initialized condition's record, on its first use. */
static void *rec_new_static(const char *name, size_t len, int family)
{
    return rec_new(name, len, CLOCK_REALTIME);
}

/* C's record, created on first use for a statically initialized one
 * (handle.h). */
static int rec_of(netmutex_cond_t *c, cond_rec_t **out)
{
    static const nm_maker_t mk = { rec_new_static, free, NULL, 0 };
    if (!c || (c->nm_init != NM_COND_LIVE && c->nm_init != NETMUTEX_COND_STATIC_MARK_))
        return EINVAL;
    void *r;
    int err = nm_handle_object(&NM_C_HANDLE(c), c->nm_init == NETMUTEX_COND_STATIC_MARK_,
                               c->nm_name, &mk, &r);
    if (!err)
        *out = r;
    return err;
}

int netmutex_cond_init(netmutex_cond_t *c, const char *name, const netmutex_condattr_t *attr)
{
    size_t len;
    if (!c || !nm_name_ok(name, &len) || (attr && !cattr_ok(attr)))
        return EINVAL;
    cond_rec_t *r = rec_new(name, len, attr ? (clockid_t)NM_CA_CLOCK(attr) : CLOCK_REALTIME);
    if (!r)
        return ENOMEM;
    memset(c, 0, sizeof *c);
    NM_C_HANDLE(c) = r;
    c->nm_init = NM_COND_LIVE;
    return 0;
}

int netmutex_cond_destroy(netmutex_cond_t *c)
{
    cond_rec_t *r;
    int err = rec_of(c, &r);
    if (err)
        return err;
    if (__atomic_load_n(&r->waiters, __ATOMIC_ACQUIRE) > 0)
        return EBUSY;
    free(r);
    memset(c, 0, sizeof *c);
    return 0;
}

/* ---- waiting ------------------------------------------------------------ */

/* A waiter looks this many times a lease: its entry lives a lease past
 * each look (condvar.h), so one late look does not make it dead. */
#define LOOK_PARTS 3

/* How long W blocks before it looks, from now, and not past DEADLINE. */
static int64_t block_until(const nm_waiter_t *w, int64_t deadline)
{
    return NM_MIN(deadline, nm_now_ms() + NM_MAX((int64_t)w->lease_ms / LOOK_PARTS, 1));
}

/* A cancellation point between two blocks of W (a look's turn), where
 * nothing is pending: the one a Redis Cluster's block has (its BLPOP,
 * routed to the condition's node, is no cancellation point). */
static void look_cancel_point(const nm_waiter_t *w)
{
    if (w->cancellable) {
        pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
        pthread_testcancel();
        pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
    }
}

/* Step 3: 0 when signalled (or woken spuriously), ETIMEDOUT.  SENT_UNTIL:
 * the first BLPOP went with the registration, until then (0: none). */
static int block(nm_waiter_t *w, int64_t deadline, int64_t sent_until)
{
    long long look;
    for (;;) {
        int err = sent_until ? nm_cond_await(w, sent_until)
                             : nm_cond_block(w, block_until(w, deadline));
        sent_until = 0;
        if (err != ETIMEDOUT)
            return 0; /* a signal, or the server failed: a wake-up */
        if (nm_remaining_ms(deadline) == 0)
            return ETIMEDOUT;
        look_cancel_point(w);
        /* Signalled without a push, passed over (its entry expired: it
         * was paused, say), or the server failed: it wakes. */
        if (nm_cond_run(w, NM_COND_LOOK, &look) != 0 || look != 0)
            return 0;
    }
}

/* The mutex could not be given back with the waiter registered: a
 * spurious wake-up after a pause, so that a caller looping on its
 * predicate does not spin against a server that fails (ENOLCK if the
 * lease had been lost).  M is unlocked (UNLOCKED, the unlock's answer
 * UERR) or not.  Never ETIMEDOUT, even past the deadline: the mutex went
 * back for a while with the waiter not (or no longer) registered, so a
 * signal given meanwhile may have been meant for it, and the leave may
 * have taken one; the caller's next wait says ETIMEDOUT. */
static int wake_spuriously(netmutex_t *m, int unlocked, int uerr, int64_t deadline)
{
    if (!unlocked)
        uerr = netmutex_unlock(m);
    nm_sleep_ms(NM_MIN(nm_remaining_ms(deadline), UNREACHABLE_PAUSE_MS));
    int lerr = netmutex_lock(m);
    if (lerr)
        return lerr;
    return uerr == ENOLCK ? ENOLCK : 0;
}

/* Steps 1 and 2: 0 once W is registered and M unlocked (*UERR the
 * unlock's answer), else the registration's error, M then unlocked if
 * *UNLOCKED (*UERR) or still held.  The first BLPOP, until *SENT_UNTIL,
 * may go in the same write (0: it did not). */
static int register_unlock(nm_waiter_t *w, netmutex_t *m, int64_t deadline, int *unlocked,
                           int *uerr, int64_t *sent_until)
{
    nm_script_call_t call;
    nm_trailer_t blpop;
    long long ignored;
    int rode = 0, err;
    int64_t until = block_until(w, deadline);
    *unlocked = 0;
    *sent_until = 0;
    if (nm_cond_may_ride(w)) {
        nm_cond_request(w, NM_COND_REGISTER, &call);
        int trail = nm_cond_block_request(w, until, &blpop) == 0;
        *uerr = nm_mutex_unlock_riding(m, &call, trail ? &blpop : NULL, &rode);
        *unlocked = rode;
        err = rode && call.sent ? nm_cond_rode(w, &call, &ignored) : NM_ECONN;
        if (rode && trail && blpop.pending) {
            if (err || *uerr == ENOLCK)
                nm_cond_abandon(w); /* nothing to wait for */
            else
                *sent_until = until;
        }
        if (rode)
            return err; /* NM_ECONN: the registration never went */
    }
    err = nm_cond_run(w, NM_COND_REGISTER, &ignored);
    if (err)
        return err;
    *uerr = nm_mutex_unlock_riding(m, NULL, NULL, &rode);
    if (!rode)
        *uerr = netmutex_unlock(m);
    *unlocked = 1;
    return 0;
}

/* Whether a request that failed with ERR may not have reached the server
 * that keeps the condition now: a connection that broke (a failover, say)
 * or a slot whose keys stayed split. */
static int unreached(int err)
{
    return err == NM_ECONN || err == NM_EUNDIALED || err == NM_ETRYAGAIN;
}

/* Steps 4 and 5: W leaves with OP (NM_COND_LEAVE_PASS: a signal it got
 * goes on), *SIGNALLED whether it had been signalled; M locked again.
 * The lock's answer.  A leave that could not reach the server goes again
 * once the lock did (it waits through outages): its entry would otherwise
 * live on a lease, taking a signal meant for a waiter. */
static int leave_lock(nm_waiter_t *w, netmutex_t *m, nm_cond_op_t op, int *signalled)
{
    nm_script_call_t call;
    long long v = 0;
    int rode, err, left, maybe = 0;
    nm_cond_request(w, op, &call);
    err = nm_mutex_lock_riding(m, &call, &rode);
    if (rode && call.sent) {
        left = nm_cond_rode(w, &call, &v);
        /* Its answer lost: it may have taken the signal (nm_cond_run). */
        maybe = left == NM_ECONN;
    } else {
        left = nm_cond_run(w, op, &v);
        if (!rode)
            err = netmutex_lock(m);
    }
    if (unreached(left) && (err == 0 || err == EOWNERDEAD))
        left = nm_cond_run(w, op, &v);
    *signalled = left == 0 && (v == 1 || maybe);
    return err;
}

/* A wait cancelled in step 3 (pthread_cancel): what the clean-up
 * handler needs to finish it. */
typedef struct cancelled {
    nm_waiter_t *w;
    netmutex_t *m;
    cond_rec_t *r;
} cancelled_t;

/* The wait was cancelled while it blocked: before the caller's clean-up
 * handlers run, the waiter leaves as one that gave up does (a signal it
 * got goes on to another waiter: pthread's cancelled waiter consumes
 * none), M is locked again, and the wait is over. */
static void wait_cancelled(void *arg)
{
    cancelled_t *x = arg;
    int signalled;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL); /* on its way out */
    nm_cond_cancelled(x->w);
    leave_lock(x->w, x->m, NM_COND_LEAVE_PASS, &signalled);
    nm_cond_waiter_free(x->w);
    __atomic_sub_fetch(&x->r->waiters, 1, __ATOMIC_ACQ_REL);
}

/* Step 3 as a cancellation point where W->cancellable says so. */
static int block_cancellable(cond_rec_t *r, nm_waiter_t *w, netmutex_t *m, int64_t deadline,
                             int64_t sent_until)
{
    cancelled_t x = { w, m, r };
    int res;
    pthread_cleanup_push(wait_cancelled, &x);
    res = block(w, deadline, sent_until);
    pthread_cleanup_pop(0);
    return res;
}

/* Steps 1 to 5 for the calling thread, which holds M; CANCELLABLE: step 3
 * is a cancellation point. */
static int wait_on(cond_rec_t *r, netmutex_t *m, unsigned int lease_ms, int64_t deadline,
                   int cancellable)
{
    nm_waiter_t w;
    long long ignored;
    int signalled, unlocked, uerr = 0;
    int err = nm_cond_waiter(&w, r->name, r->name_len, lease_ms);
    if (err)
        return err;
    w.cancellable = cancellable;
    int64_t sent_until;
    err = register_unlock(&w, m, deadline, &unlocked, &uerr, &sent_until);
    /* A signal of ours that the registration's reads found must go again
     * goes now, not after the sleep; a BLPOP pending on the connection
     * goes first (it is sent again by the block). */
    if (nm_cond_flush_due()) {
        if (sent_until)
            nm_cond_abandon(&w);
        sent_until = 0;
        nm_cond_flush(0);
    }
    if (unreached(err) || (err && unlocked)) {
        /* It may have registered all the same (its reply was lost), and a
         * signal may have chosen it since: the leave passes that signal
         * on, since this wait may return ENOLCK, which wakes nobody (at
         * worst another waiter wakes spuriously). */
        nm_cond_run(&w, NM_COND_LEAVE_PASS, &ignored);
        nm_cond_waiter_free(&w);
        return wake_spuriously(m, unlocked, uerr, deadline);
    }
    if (err) {
        nm_cond_waiter_free(&w);
        return err;
    }
    /* EIO: released here, and the key expires by itself; we wait. */
    int res = uerr == ENOLCK ? ENOLCK : block_cancellable(r, &w, m, deadline, sent_until);
    err = leave_lock(&w, m, res == ENOLCK ? NM_COND_LEAVE_PASS : NM_COND_LEAVE, &signalled);
    nm_cond_waiter_free(&w);
    if (signalled && res == ETIMEDOUT)
        res = 0;
    return err ? err : res;
}

/* CANCELLABLE: step 3 is a cancellation point. */
static int checked_wait(netmutex_cond_t *c, netmutex_t *m, int64_t deadline, int cancellable)
{
    cond_rec_t *r;
    unsigned int lease_ms;
    int err = rec_of(c, &r);
    if (!err)
        err = nm_mutex_wait_check(m, &lease_ms);
    if (err)
        return err;
    if (nm_remaining_ms(deadline) == 0)
        return ETIMEDOUT;
    nm_cond_flush(0); /* a signal of ours whose answer came */
    __atomic_add_fetch(&r->waiters, 1, __ATOMIC_ACQ_REL);
    int64_t t0 = nm_stats_cond_wait_begin();
    err = wait_on(r, m, lease_ms, deadline, cancellable);
    nm_stats_cond_wait_end(r->name, r->name_len, t0, err);
    __atomic_sub_fetch(&r->waiters, 1, __ATOMIC_ACQ_REL);
    nm_cond_flush(1);
    return err;
}

/* With cancellation disabled but where step 3 enables it again, for a
 * caller that had it enabled and deferred. */
static int cond_wait(netmutex_cond_t *c, netmutex_t *m, int64_t deadline)
{
    int state, type;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &state);
    pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, &type);
    int err = checked_wait(c, m, deadline,
                           state == PTHREAD_CANCEL_ENABLE && type == PTHREAD_CANCEL_DEFERRED);
    pthread_setcanceltype(type, NULL);
    pthread_setcancelstate(state, NULL);
    return err;
}

int netmutex_cond_wait(netmutex_cond_t *c, netmutex_t *m)
{
    return nm_errno_public(cond_wait(c, m, NM_FOREVER));
}

int netmutex_cond_clockwait(netmutex_cond_t *c, netmutex_t *m, clockid_t clockid,
                            const struct timespec *abstime)
{
    int64_t deadline;
    int err = nm_deadline_from_abstime(clockid, abstime, &deadline);
    return err ? err : nm_errno_public(cond_wait(c, m, deadline));
}

int netmutex_cond_timedwait(netmutex_cond_t *c, netmutex_t *m, const struct timespec *abstime)
{
    cond_rec_t *r;
    int err = rec_of(c, &r);
    return err ? err : netmutex_cond_clockwait(c, m, r->clock, abstime);
}

/* ---- signalling ---------------------------------------------------------- */

/* A signal may return before its answer only from a thread that holds a
 * lock of the library (held.h): that thread will call again to give it
 * back, and that call takes the answer and sends the signal again if its
 * connection broke first (condvar.h).  A thread that holds nothing may
 * never call again, so its signal waits for its answer. */
static int cond_signal(netmutex_cond_t *c, int all)
{
    cond_rec_t *r;
    long long woken;
    int err = rec_of(c, &r);
    int may_defer = nm_held_count() > 0;
    if (!err)
        nm_stats_cond_signal(r->name, r->name_len, all);
    return err ? err
               : nm_errno_public(nm_cond_signal(r->name, r->name_len, all, may_defer, &woken));
}

int netmutex_cond_signal(netmutex_cond_t *c)
{
    return cond_signal(c, 0);
}

int netmutex_cond_broadcast(netmutex_cond_t *c)
{
    return cond_signal(c, 1);
}
