/*
 * waiting.c -- the one client wait loop (waiting.h).
 *
 * A grant is a hint, never proof: an acquisition succeeds only when a
 * reply to the caller's own request said its token holds the name, and
 * the lease counts from when that request was sent.  The BLPOP's answer
 * comes on the waiter's own connection but may be old (the waiter was
 * stopped past its claim), so the next attempt confirms it.
 */
#include "nm.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "config.h"
#include "keys.h"
#include "reply.h"
#include "routed.h"
#include "waiting.h"

/* A trylock redials once: the first failure may be a stale connection
 * (the server restarted), the second means the server is not there. */
#define NOWAIT_CONN_TRIES 2
#define BUSY_BACKOFF_MAX_MS 64
#define CONN_BACKOFF_MAX_MS 500
#define CLEANUP_MS NM_CLEANUP_MS
/* A trylock that asked a caching holder asks again this often until it
 * has the lock or an answer (within the I/O timeout). */
#define ASK_AGAIN_MS 50

/* ---- the stop flag (deadlock.h) ------------------------------------------- */

static __thread const int *stop_flag;

void nm_wait_stop_flag(const int *flag)
{
    stop_flag = flag;
}

static int stopping(void)
{
    return stop_flag && __atomic_load_n(stop_flag, __ATOMIC_ACQUIRE);
}

/* LOOK less up to a fifth, at random: waiters that queued together would
 * otherwise look together, every LOOK, a burst the server serves at once
 * (10,000 looks, a second of its time, every 5 s) instead of a trickle. */
static int64_t jittered(int64_t look)
{
    static __thread uint64_t x;
    if (x == 0)
        x = ((uint64_t)(uintptr_t)&x ^ (uint64_t)nm_now_ms() * 0x9e3779b97f4a7c15ull) | 1;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return look - (int64_t)(x % (uint64_t)(look / 5 + 1));
}

/* A waiter the deadlock detector watches looks often: EDEADLK is noticed
 * at a look. */
static int64_t queued_pause(long long pttl)
{
    int64_t look = jittered(stop_flag ? NM_QUEUE_WATCHED_MS : NM_QUEUE_LOOK_MS);
    return pttl >= 0 ? NM_MIN(pttl + 1, look) : look;
}

/* ---- blocking on the grant list ------------------------------------------- */

/* BLPOP's {list, element}: '0' a caching holder's answer that a thread
 * holds the lock, 'd' a deputy's wake (lib.lua, Waiting: *CLAIM set), else
 * a grant ('1'). */
static char grant_kind(const redisReply *r, long long *claim)
{
    const char *v;
    size_t len;
    if (r->elements != 2 || nm_reply_string(r->element[1], &v, &len) != 0 || len < 1)
        return '1';
    if (v[0] == '0' && len == 1)
        return '0';
    if (v[0] != 'd')
        return '1';
    char digits[16];
    size_t n = NM_MIN(len - 1, sizeof digits - 1);
    memcpy(digits, v + 1, n);
    digits[n] = 0;
    *claim = strtoll(digits, NULL, 10);
    return *claim > 0 && *claim < 60000 ? 'd' : '1';
}

/* One BLPOP on L's grant list until UNTIL (never past DEADLINE): 0 a
 * grant came, NM_EHELD, NM_EDEPUTY with *CLAIM, EBUSY none came, or an
 * error.
 *
 * The wait ends on our clock, not on the server's: the server answers a
 * BLPOP's timeout at its next `hz` tick, up to a second late, which made
 * timed waits late and, bounded tighter than that, dropped a live
 * connection with a warning.  The routed call nudges it instead (reply.h),
 * so the answer comes within a round trip of the end, and the connection
 * is clean for the next attempt, which confirms a grant that came
 * meanwhile.  The bound on the reply past the end: the I/O timeout, and
 * for a caller with a deadline no more than CLEANUP_MS past it. */
static int block_once(nm_lease_t *l, int64_t until, int64_t deadline, long long *claim)
{
    int64_t now = nm_now_ms();
    int64_t ms = until - now - NM_BLOCK_EARLY_MS;
    if (ms < 1) { /* too short to block for: the next attempt looks */
        nm_sleep_ms(until - now);
        return EBUSY;
    }
    int64_t reply_by = until + l->cfg->io_timeout_ms;
    if (deadline != NM_FOREVER)
        reply_by = NM_MIN(reply_by, NM_MAX(until, deadline) + CLEANUP_MS);
    char timeout[24];
    size_t grant_len;
    char *grant = nm_keys_grant_for(l->key, l->key_len, l->token, &grant_len);
    if (!grant)
        return ENOMEM;
    snprintf(timeout, sizeof timeout, "%.3f", (double)ms / 1000);
    const char *argv[3] = { "BLPOP", grant, timeout };
    size_t lens[3] = { 5, grant_len, strlen(timeout) };
    nm_routed_t q = { .key = l->key, .key_len = l->key_len, .argc = 3, .argv = argv,
                      .lens = lens, .until = until };
    redisReply *r;
    int sent;

    int err = nm_routed_call(l->cfg, &q, reply_by, &r, &sent);
    free(grant);
    if (err)
        return err;
    char kind = r->type == REDIS_REPLY_ARRAY ? grant_kind(r, claim) : 0;
    freeReplyObject(r);
    return kind == 0 ? EBUSY : kind == '0' ? NM_EHELD : kind == 'd' ? NM_EDEPUTY : 0;
}

/* Woken as a deputy of a grant, a waiter blocks one claim more (again at
 * each such wake: the queue moves on), then returns EBUSY, for the next
 * attempt to look (lib.lua, Waiting). */
int nm_wait_grant(nm_lease_t *l, int64_t pause, int64_t deadline)
{
    int64_t until = nm_now_ms() + NM_MIN(pause, nm_remaining_ms(deadline));
    long long claim = 0;
    int err;
    while ((err = block_once(l, until, deadline, &claim)) == NM_EDEPUTY)
        until = nm_now_ms() + NM_MIN(claim + 1, nm_remaining_ms(deadline));
    return err;
}

/* ---- between attempts ----------------------------------------------------- */

/* How long to wait before the next attempt, and the back-off after it.
 * Queued (or, in quorum mode, listening), a waiter waits until a grant or
 * release, the holder's expiry or its next look, whichever comes first. */
static int64_t next_pause(int err, long long pttl, int waiting, int64_t *backoff)
{
    int64_t pause = *backoff;
    if (err == EBUSY && waiting)
        return queued_pause(pttl);
    if (err == EBUSY) {
        if (pttl >= 0)
            pause = NM_MIN(pause, (int64_t)pttl + 1);
        *backoff = NM_MIN(*backoff * 2, BUSY_BACKOFF_MAX_MS);
    } else {
        *backoff = NM_MIN(*backoff * 2, CONN_BACKOFF_MAX_MS);
    }
    return pause;
}

/* Quorum mode: sleeps up to PAUSE (never past DEADLINE), or until CH moves
 * past SEQ (a release somewhere). */
static void pause_until(nm_chan_t *ch, uint64_t seq, int64_t pause, int64_t deadline)
{
    int64_t until = nm_now_ms() + NM_MIN(pause, nm_remaining_ms(deadline));
    if (ch)
        nm_wake_wait(ch, seq, until);
    else
        nm_sleep_ms(until - nm_now_ms());
}

/* Quorum mode, after a first failed attempt: subscribe, and wait for the
 * subscription to be confirmed before the next attempt, so no release goes
 * unnoticed.  Returns whether waiters can be woken (else they poll). */
static int start_listening(nm_waiting_t *w, int64_t deadline)
{
    nm_lease_t *l = w->l;
    w->ch = nm_wake_listen(l->key, l->key_len);
    if (!w->ch)
        return 0;
    int64_t until = NM_MIN(deadline, nm_now_ms() + (int64_t)l->cfg->io_timeout_ms);
    return nm_wake_ready(w->ch, l->cfg->quorum, until) == 0;
}

/* Waits after a failed attempt (ERR, with PTTL): for a grant when queued,
 * for a release message in quorum mode, else a back-off. */
static void wait_after(nm_waiting_t *w, int err, long long pttl, uint64_t seq,
                       int64_t *backoff, int64_t deadline)
{
    w->l->contended |= err == EBUSY;
    if (err == EBUSY && w->queued) {
        /* A broken connection here is the next attempt's to redial. */
        nm_wait_grant(w->l, next_pause(err, pttl, 1, backoff), deadline);
        return;
    }
    pause_until(w->ch, seq, next_pause(err, pttl, err == EBUSY && w->ch, backoff), deadline);
}

/* ---- leaving the queue at exit --------------------------------------------
 * A process that exits normally while a thread waits in a server's queue
 * (netmutex(1) interrupted by SIGTERM, say) would leave its entry behind, and
 * a release then would reserve the lock for a waiter that is gone.  So the
 * waiters in a queue are listed, and an atexit handler takes each one out
 * (and gives back a grant that reached it meanwhile).  Once exiting, no
 * waiter joins a queue again.
 *
 * A waiter is listed BEFORE the request that may queue it is sent, and
 * unlisted after the reply if that request did not queue it: listed only
 * after the reply, a waiter whose process exited in between left its entry
 * behind (the server had queued it, the handler did not know).  While such
 * a request is under way (in_flight) the handler waits for its reply, by
 * the handler's own deadline, before it cancels: its cancel, on another
 * connection, could otherwise reach the server first, and the request that
 * queues would come after it. */

typedef nm_queued_t queued_t;

static pthread_mutex_t queued_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t queued_cv;   /* an in_flight went 0; set up once */
static queued_t *queued_head;      /* queued_lock */
static int exit_started;           /* atomic; set under queued_lock */

static int exiting(void)
{
    return __atomic_load_n(&exit_started, __ATOMIC_ACQUIRE);
}

/* Under queued_lock: the next waiter the exit handler has not taken out
 * yet, once no request of its is under way (or DEADLINE passed).  The list
 * is walked from its head after every wait: waiters leave it meanwhile. */
static queued_t *next_to_leave(int64_t deadline)
{
    for (;;) {
        queued_t *q = queued_head;
        while (q && q->left)
            q = q->next;
        if (!q || !q->in_flight || nm_remaining_ms(deadline) == 0)
            return q;
        struct timespec until = nm_deadline_timespec(deadline);
        pthread_cond_timedwait(&queued_cv, &queued_lock, &until);
    }
}

static void leave_queues_at_exit(void)
{
    int64_t deadline = NM_FOREVER; /* one I/O timeout for them all */
    queued_t *q;
    pthread_mutex_lock(&queued_lock);
    __atomic_store_n(&exit_started, 1, __ATOMIC_RELEASE);
    if (queued_head)
        deadline = nm_now_ms() + queued_head->lease->cfg->io_timeout_ms;
    while ((q = next_to_leave(deadline)) != NULL) {
        const nm_lease_t *w = q->lease;
        /* Only the fields the waiting thread never changes. */
        nm_lease_t l = { .cfg = w->cfg, .key = w->key, .key_len = w->key_len,
                         .lease_ms = w->lease_ms, .robust = w->robust };
        memcpy(l.token, w->token, sizeof l.token);
        q->leave(&l, q->leave_arg, deadline);
        q->left = 1;
    }
    pthread_mutex_unlock(&queued_lock);
}

static void install_exit_handler(void)
{
    nm_cond_init_monotonic(&queued_cv);
    atexit(leave_queues_at_exit);
}

/* Before a request that may queue the waiter of L (Q its entry): lists it,
 * in flight, with LEAVE and ARG, its way out.  0, listing nothing, once
 * the process is exiting: the request must not queue then. */
static int queued_begin(queued_t *q, const nm_lease_t *l, nm_leave_fn leave, void *arg)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, install_exit_handler);
    pthread_mutex_lock(&queued_lock);
    int ok = !exiting();
    if (ok && !q->listed) {
        q->lease = l;
        q->leave = leave;
        q->leave_arg = arg;
        q->left = 0;
        q->next = queued_head;
        queued_head = q;
        q->listed = 1;
    }
    q->in_flight = ok;
    pthread_mutex_unlock(&queued_lock);
    return ok;
}

static void unlist(queued_t *q)
{
    queued_t **p = &queued_head;
    while (*p && *p != q)
        p = &(*p)->next;
    if (*p)
        *p = q->next;
    q->listed = 0;
}

/* After that request: Q stays listed if the waiter is QUEUED (returned). */
static int queued_end(queued_t *q, int queued)
{
    pthread_mutex_lock(&queued_lock);
    q->in_flight = 0;
    pthread_cond_broadcast(&queued_cv);
    if (!queued && q->listed)
        unlist(q);
    pthread_mutex_unlock(&queued_lock);
    return queued;
}

/* Off the list: only the waiter's own thread changes q->listed (under the
 * lock), once it is done waiting. */
static void queued_remove(queued_t *q)
{
    if (!q->listed)
        return;
    pthread_mutex_lock(&queued_lock);
    unlist(q);
    pthread_mutex_unlock(&queued_lock);
}

void nm_wait_before_fork(void) { pthread_mutex_lock(&queued_lock); }
void nm_wait_after_fork_parent(void) { pthread_mutex_unlock(&queued_lock); }

/* The child waits in no queue: the entries are its parent's threads'.  The
 * condition variable may count a waiter of the parent's: it starts anew. */
void nm_wait_after_fork_child(void)
{
    queued_head = NULL;
    nm_cond_init_monotonic(&queued_cv);
    pthread_mutex_unlock(&queued_lock);
}


/* ---- the loop ------------------------------------------------------------- */

/* One attempt, listed for the exit handler while it may queue. */
static int attempt(nm_waiting_t *w, long long *pttl, int64_t deadline, int *sent)
{
    int may_queue = !w->quorum && (!w->trylock || w->ops->try_queues);
    unsigned int ttl =
        may_queue && queued_begin(&w->entry, w->l, w->ops->leave, w->arg) ? NM_QUEUE_TTL_MS : 0;
    int err = w->ops->attempt(w, ttl, deadline, pttl, sent);
    if (ttl > 0)
        w->queued = queued_end(&w->entry,
                               w->queued || (*sent && (!w->trylock || err == NM_EASKED)));
    return err;
}

/* Attempts until success, a final error, or the deadline. */
static int loop(nm_waiting_t *w, int64_t deadline)
{
    int64_t backoff = 1;
    int conn_failures = 0, err;
    for (;;) {
        uint64_t seq = w->ch ? nm_wake_seq(w->ch) : 0;
        long long pttl = -1;
        int sent;
        err = attempt(w, &pttl, deadline, &sent);
        if (err == NM_EASKED) {
            /* The holder gives the lock back (a grant: confirm it) or says
             * a thread holds it; no answer in time is EBUSY too.  A request
             * published before the holder's subscription took is lost, so
             * it is asked again every ASK_AGAIN_MS. */
            int got = nm_wait_grant(w->l, ASK_AGAIN_MS, deadline);
            if (got == 0 || (got != NM_EHELD && nm_remaining_ms(deadline) > 0))
                continue;
            return EBUSY;
        }
        if (err == NM_ECONN) {
            w->maybe_applied |= sent;
            if (w->trylock && ++conn_failures >= NOWAIT_CONN_TRIES)
                return EAGAIN;
            if (w->trylock && nm_remaining_ms(deadline) > 0)
                continue;
        } else if (err != EBUSY || w->trylock) {
            return err;
        } else if (w->quorum && !w->ch && start_listening(w, deadline)) {
            continue;
        }
        if (err == EBUSY && stopping())
            return EDEADLK;
        if (nm_remaining_ms(deadline) == 0)
            return w->trylock ? EAGAIN : ETIMEDOUT;
        wait_after(w, err, pttl, seq, &backoff, deadline);
    }
}

/* Giving up: leave the queue, taking a grant that came meanwhile (0), or
 * undo what a request whose answer was lost may have taken.  A waiter
 * told EINVAL (a semaphore's other number of permits) keeps nothing, so
 * that the caller's answer is the one it was told.  Bounded: the deadline
 * passed, or the server failed. */
static int give_up(nm_waiting_t *w, int err)
{
    int64_t deadline = nm_now_ms() + CLEANUP_MS;
    if ((w->queued || w->maybe_applied) && w->ops->cancel(w, deadline) == 0) {
        if (err != EINVAL)
            return 0;
        w->ops->undo(w, deadline);
    } else if (w->maybe_applied) {
        w->ops->undo(w, deadline);
    }
    return err;
}

int nm_wait_run(nm_waiting_t *w, nm_wait_t wait, int64_t deadline)
{
    w->trylock = wait == NM_NOWAIT;
    int err = loop(w, deadline);
    if (err)
        err = give_up(w, err);
    queued_remove(&w->entry);
    if (w->ch)
        nm_wake_unlisten(w->ch);
    w->ch = NULL;
    return err;
}
