/*
 * chaos_cond_worker.c -- what runs in each worker process of the condition
 * families (/chaos/cond/...).
 *
 * Rings.  A family has one ring per worker slot (cfg->rings); ring r is
 * one netmutex ("<name>/m<r>"), one netmutex_cond_t ("<name>/c<r>") and,
 * in shared memory, whose turn it is.  Thread j of the worker in slot s
 * is member j of ring (s - j) mod cfg->rings, so the members of a
 * ring live in different processes, and a respawned worker takes its
 * predecessor's places.  Each thread loops, until the driver sets
 * log->stop, over one round:
 *     lock the ring's mutex;
 *     while it is not this member's turn: wait on the condition (timed,
 *       on CLOCK_REALTIME or CLOCK_MONOTONIC, with a random deadline, or
 *       one wait in five untimed, except member 0's, always timed); a
 *       member woken with a signal (the wait
 *       returned 0), or whose wait timed out while a turn has been pending
 *       for long (see stalled()), passes one on ("relay") if a turn is
 *       still pending:
 *       the condition wakes its longest waiter, which may not be the one
 *       whose turn it is, and that one must not swallow the signal;
 *     on its turn: take it (pending 0) and unlock;
 *     work a little without the mutex: the other members meanwhile take
 *       it, find that the turn is not theirs, and wait;
 *     lock again, read-modify-write the ring's counter, hand the turn to
 *       the next member (pending 1) and signal (one pass in eight
 *       broadcasts); unlock.
 * So every signal is needed: one that is lost leaves the member whose
 * turn it is waiting until its deadline, which is what the checker
 * (chaos_cond_check.c) looks for.  The turn is handed on, and a relay or a
 * pass sent, only while netmutex_validity promises the hold: a stale
 * holder changes nothing.
 *
 * Even rings have lease caching on (the default), odd ones off.
 *
 * The log (chaos_log.h): one record per segment of holding a ring's mutex,
 * opened by a lock call or by a wait's return; after each, netmutex_fence
 * and netmutex_validity (a wait that returned without the mutex held says
 * EPERM there).  The lost-lease callback stamps the segment of the thread
 * that uses that mutex, when it holds it.
 *
 * The end: a thread that sees log->stop closes its ring under the mutex
 * (closed 1), unless a member did already, and broadcasts, so that
 * members in an untimed wait return and leave (close_at_end); a thread
 * that finds the log full makes no more logged calls, and closes its ring
 * unlogged once the stop comes.
 */
#include "ac_config.h"

#include "chaos_cond_worker.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "netmutex.h"

#define NAME_SIZE 1100
#define UNTIMED_ONE_IN 5
#define BROADCAST_ONE_IN 8

typedef struct CWorker {
    const ChaosWorkerCfg *cfg;
    ChaosShared *log;
    ChaosProc *proc;
    int32_t pid;
} CWorker;

typedef struct CThread {
    CWorker *w;
    int index;   /* the thread, and its place in the ring */
    int ring;
    int members; /* of the ring */
    uint64_t rng;
    pthread_t tid;
    netmutex_t m;
    netmutex_cond_t c;
    ChaosRec *rec; /* the segment being held, NULL between rounds */
    int32_t rec_index;
    bool woke;   /* the last wait returned 0 */
    bool timed_out; /* it returned ETIMEDOUT */
} CThread;

void chaos_cond_ring_name(char *buf, size_t size, const char *base, char kind, int ring)
{
    snprintf(buf, size, "%s/%c%d", base, kind, ring);
}

/* ---- small helpers ---------------------------------------------------- */

static uint64_t next_random(CThread *t)
{
    t->rng ^= t->rng >> 12;
    t->rng ^= t->rng << 25;
    t->rng ^= t->rng >> 27;
    return t->rng * 2685821657736338717ull;
}

static unsigned int random_upto(CThread *t, unsigned int n)
{
    return n ? (unsigned int)(next_random(t) % (n + 1u)) : 0;
}

static void sleep_us(unsigned int us)
{
    struct timespec ts = { .tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000 };

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void set_phase(CThread *t, int phase)
{
    chaos_store(&t->w->proc->phase[t->index], phase);
}

static ChaosRing *ring_of(CThread *t)
{
    return &t->w->log->rings[t->ring];
}

static bool stopping(CThread *t)
{
    return chaos_load(&t->w->log->stop) != 0;
}

/* ---- the lost-lease callback ------------------------------------------ */

/* Only this thread uses its ring's mutex in this process. */
static void on_lost(const char *name, void *arg)
{
    CThread *t = arg;
    ChaosProc *p = t->w->proc;
    int phase = chaos_load(&p->phase[t->index]);
    int32_t rec = chaos_load(&p->rec[t->index]);

    (void)name;
    __atomic_fetch_add(&p->lost_calls, 1, __ATOMIC_RELAXED);
    if ((phase == CHAOS_HOLDING || phase == CHAOS_UNLOCKING) && rec >= 0)
        chaos_set_once(&t->w->log->recs[rec].lost_ns, chaos_now_ns());
}

/* ---- records ------------------------------------------------------------- */

static ChaosRec *new_record(CThread *t, int op, int32_t *index)
{
    ChaosRec *r = chaos_log_add(t->w->log, t->w->pid, t->index, index);

    if (r) {
        r->op = op;
        r->ring = t->ring;
    }
    return r;
}

/* See chaos_worker.c's take_promise: none when ENOLCK or 0 ms left. */
static bool take_promise(CThread *t, ChaosRec *r)
{
    uint64_t ms_left = 0;
    int64_t before = chaos_now_ns();
    int rc = netmutex_validity(&t->m, &ms_left);

    r->validity_rc = rc;
    if (rc != 0 || ms_left == 0)
        return false;
    r->promise_ns = before + (int64_t)ms_left * 1000000;
    return true;
}

/* A segment begins: R's call returned with the mutex held. */
static void begin_hold(CThread *t, ChaosRec *r)
{
    set_phase(t, CHAOS_HOLDING);
    r->fence_rc = netmutex_fence(&t->m, &r->fence);
    take_promise(t, r);
}

static void cond_call(CThread *t, ChaosRec *r, int op, bool relay)
{
    r->cond_op = op;
    r->relay = relay;
    r->cond_ns = chaos_now_ns();
    r->cond_rc = op == 's' ? netmutex_cond_signal(&t->c) : netmutex_cond_broadcast(&t->c);
    r->cond_end_ns = chaos_now_ns();
}

static void release(CThread *t, ChaosRec *r)
{
    int rc;

    set_phase(t, CHAOS_UNLOCKING);
    r->unlock_ns = chaos_now_ns();
    rc = netmutex_unlock(&t->m);
    r->unlock_end_ns = chaos_now_ns();
    r->unlock_rc = rc;
    set_phase(t, CHAOS_IDLE);
}

/* ---- one wait -------------------------------------------------------------- */

/* ABS is MS from now on CLOCK; the logged deadline is read first, on
 * CLOCK_MONOTONIC, so the library's is never before it. */
static int64_t deadline_in(clockid_t clock, unsigned int ms, struct timespec *abs)
{
    int64_t logged = chaos_now_ns() + (int64_t)ms * 1000000;

    clock_gettime(clock, abs);
    abs->tv_sec += ms / 1000;
    abs->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (abs->tv_nsec >= 1000000000L) {
        abs->tv_sec++;
        abs->tv_nsec -= 1000000000L;
    }
    return logged;
}

static bool holds_after_wait(int rc)
{
    return rc != EINVAL && rc != EPERM && rc != ENOTRECOVERABLE;
}

/* Ends the segment R with a wait, and opens the wait's record: the new
 * segment if the wait returned with the mutex held.  False when the log
 * is full (R goes on) or the mutex is not held after the wait. */
static bool wait_once(CThread *t)
{
    const ChaosWorkerCfg *cfg = t->w->cfg;
    ChaosRec *r = t->rec, *w;
    int32_t index;
    unsigned int ms = cfg->timed_min_ms + random_upto(t, cfg->timed_max_ms - cfg->timed_min_ms);
    /* Member 0 always waits timed, so that a stalled ring always has a
     * member whose wait times out and relays (stalled()). */
    bool untimed = t->index != 0 && random_upto(t, UNTIMED_ONE_IN - 1) == 0;
    bool realtime = random_upto(t, 1) == 0;
    struct timespec abs;
    int rc;

    w = new_record(t, untimed ? 'w' : 'W', &index);
    if (!w)
        return false;
    w->prev = t->rec_index;
    r->next = index;
    chaos_store(&t->w->proc->rec[t->index], index);
    set_phase(t, CHAOS_WAITING);
    w->call_ns = chaos_now_ns();
    r->unlock_ns = r->unlock_end_ns = w->call_ns;
    r->unlock_rc = 0;
    if (untimed) {
        rc = netmutex_cond_wait(&t->c, &t->m);
    } else if (realtime) {
        w->deadline_ns = deadline_in(CLOCK_REALTIME, ms, &abs);
        rc = netmutex_cond_timedwait(&t->c, &t->m, &abs);
    } else {
        w->deadline_ns = deadline_in(CLOCK_MONOTONIC, ms, &abs);
        rc = netmutex_cond_clockwait(&t->c, &t->m, CLOCK_MONOTONIC, &abs);
    }
    w->ret_ns = chaos_now_ns();
    w->rc = rc;
    t->woke = rc == 0;
    t->timed_out = rc == ETIMEDOUT;
    t->rec = w;
    t->rec_index = index;
    if (!holds_after_wait(rc)) {
        set_phase(t, CHAOS_IDLE);
        return false;
    }
    begin_hold(t, w);
    return true;
}

/* ---- the turn ---------------------------------------------------------------- */

static void read_modify_write(CThread *t, ChaosRec *r)
{
    int64_t *counter = &ring_of(t)->counter;
    int64_t v;

    r->rmw_read_ns = chaos_now_ns();
    v = __atomic_load_n(counter, __ATOMIC_RELAXED);
    r->rmw_value = v;
    r->rmw_state = CHAOS_RMW_READ;
    sleep_us(t->w->cfg->rmw_us);
    if (!take_promise(t, r)) {
        r->rmw_state = CHAOS_RMW_SKIPPED;
        return;
    }
    __atomic_store_n(counter, v + 1, __ATOMIC_RELAXED);
    r->rmw_write_ns = chaos_now_ns();
    r->rmw_state = CHAOS_RMW_WRITTEN;
}

/* This member's turn, under the mutex: take it (true).  A stale holder
 * takes nothing; its next round will. */
static bool take_turn(CThread *t)
{
    if (!take_promise(t, t->rec))
        return false;
    chaos_store(&ring_of(t)->pending, 0);
    return true;
}

/* Under the mutex again after the work: hand the turn to the next member
 * and say so. */
static void pass_turn(CThread *t)
{
    ChaosRing *g = ring_of(t);
    ChaosRec *r = t->rec;

    if (chaos_load(&g->turn) != t->index || !take_promise(t, r))
        return;
    read_modify_write(t, r);
    if (!take_promise(t, r))
        return;
    chaos_store(&g->turn, (t->index + 1) % t->members);
    chaos_store(&g->pending, 1);
    __atomic_store_n(&g->pending_ns, chaos_now_ns(), __ATOMIC_RELEASE);
    cond_call(t, r, random_upto(t, BROADCAST_ONE_IN - 1) == 0 ? 'b' : 's', false);
}

/* The stop: nobody waits for a turn any more. */
static void close_ring(CThread *t)
{
    chaos_store(&ring_of(t)->closed, 1);
    cond_call(t, t->rec, 'b', false);
}

/* Whether the turn pending has waited far longer than any timed wait:
 * then a member whose wait timed out passes a signal on as well.  A
 * signaller killed after it passed the turn on but before its signal
 * (kill/signaller) sends none, and if the member whose turn it is waits
 * untimed, nothing else would ever wake it; were every member to wait
 * untimed, nobody would be left to close the ring at the end, so member 0
 * never does (wait_once: it was seen in a 90 s run of kill/signaller,
 * three members hung in untimed waits, no signal lost).  A signal the
 * library lost is flagged before this, by the timed waits that needed
 * it (chaos_cond_check.c). */
static bool stalled(const CThread *t, ChaosRing *g)
{
    int64_t since = __atomic_load_n(&g->pending_ns, __ATOMIC_ACQUIRE);

    return t->timed_out && since &&
           chaos_now_ns() - since > 4 * (int64_t)t->w->cfg->timed_max_ms * 1000000;
}

/* Holding the mutex: wait until this member's turn (true once taken),
 * or the end. */
static bool hold_until_turn(CThread *t)
{
    ChaosRing *g = ring_of(t);

    for (;;) {
        if (chaos_load(&g->closed))
            return false;
        if (stopping(t)) {
            close_ring(t);
            return false;
        }
        if (chaos_load(&g->turn) == t->index)
            return take_turn(t);
        if ((t->woke || stalled(t, g)) && chaos_load(&g->pending) && take_promise(t, t->rec))
            cond_call(t, t->rec, 's', true);
        if (!wait_once(t))
            return false;
    }
}

/* A segment opened by a lock call: 1 held, 0 the log is full, -1 the
 * lock failed. */
static int lock_segment(CThread *t)
{
    int32_t index;
    ChaosRec *r = new_record(t, 'l', &index);

    if (!r)
        return 0;
    t->rec = r;
    t->rec_index = index;
    t->woke = false;
    chaos_store(&t->w->proc->rec[t->index], index);
    set_phase(t, CHAOS_LOCKING);
    r->call_ns = chaos_now_ns();
    r->rc = netmutex_lock(&t->m);
    r->ret_ns = chaos_now_ns();
    if (r->rc != 0) {
        set_phase(t, CHAOS_IDLE);
        sleep_us(5000);
        return -1;
    }
    begin_hold(t, r);
    return 1;
}

/* Unlocks the segment held, if the last call left it held. */
static void end_segment(CThread *t)
{
    if (chaos_load(&t->w->proc->phase[t->index]) == CHAOS_HOLDING)
        release(t, t->rec);
    t->rec = NULL;
}

/* One round: wait for the turn and take it, work without the mutex (the
 * other members meanwhile find it is not their turn and wait), then pass
 * it on.  False when the log is full. */
static bool one_round(CThread *t)
{
    int got = lock_segment(t);
    bool mine;

    if (got <= 0)
        return got < 0;
    mine = hold_until_turn(t);
    end_segment(t);
    if (mine) {
        sleep_us(random_upto(t, t->w->cfg->hold_us));
        if ((got = lock_segment(t)) == 0)
            return false;
        if (got > 0) {
            pass_turn(t);
            end_segment(t);
        }
    }
    sleep_us(random_upto(t, t->w->cfg->think_us));
    return true;
}

/* The log is full: no more logged calls.  Once the stop comes, close the
 * ring all the same, for members still waiting. */
static void close_unlogged(CThread *t)
{
    while (!stopping(t))
        sleep_us(10000);
    if (netmutex_lock(&t->m) == 0) {
        chaos_store(&ring_of(t)->closed, 1);
        netmutex_cond_broadcast(&t->c);
        netmutex_unlock(&t->m);
    }
}

/* On the way out, the ring is closed if no member closed it yet: a member
 * that saw the stop between two rounds (its turn taken, say) must close
 * it too.  Left to the members that see the stop while they wait for a
 * turn, a ring stayed open for ever when the stop came just after member
 * 0 passed the turn on and before it waited again: member 1 took the
 * turn, passed it back (its signal found nobody waiting) and waited
 * untimed, and member 0 left without a round. */
static void close_at_end(CThread *t)
{
    int got = -1;

    for (int i = 0; i < 3 && got < 0 && !chaos_load(&ring_of(t)->closed); i++)
        got = lock_segment(t);
    if (got == 0) {
        close_unlogged(t);
    } else if (got > 0) {
        if (!chaos_load(&ring_of(t)->closed))
            close_ring(t);
        end_segment(t);
    }
}

static void *thread_main(void *p)
{
    CThread *t = p;

    while (!stopping(t) && one_round(t))
        ;
    if (!stopping(t))
        close_unlogged(t);
    else
        close_at_end(t);
    set_phase(t, CHAOS_EXITED);
    return NULL;
}

/* ---- the process ---------------------------------------------------------------- */

static int configure(const ChaosWorkerCfg *c)
{
    netmutex_config_t cfg = {
        .url = c->url,
        .connect_timeout_ms = c->connect_ms,
        .io_timeout_ms = c->io_ms,
        .lease_ms = c->lease_ms,
    };

    return netmutex_configure(&cfg);
}

static int thread_setup(CThread *t)
{
    const ChaosWorkerCfg *c = t->w->cfg;
    char name[NAME_SIZE];
    netmutex_attr_t attr;
    int rc = netmutex_attr_init(&attr);

    if (rc != 0)
        return rc;
    rc = netmutex_attr_setcache(&attr, CHAOS_COND_CACHED(t->ring) ? 1 : 0);
    if (rc == 0)
        rc = netmutex_attr_setlease(&attr, c->lease_ms);
    if (rc == 0)
        rc = netmutex_attr_setlostfn(&attr, on_lost, t);
    chaos_cond_ring_name(name, sizeof name, c->name, 'm', t->ring);
    if (rc == 0)
        rc = netmutex_init(&t->m, name, &attr);
    netmutex_attr_destroy(&attr);
    chaos_cond_ring_name(name, sizeof name, c->name, 'c', t->ring);
    if (rc == 0 && (rc = netmutex_cond_init(&t->c, name, NULL)) != 0)
        netmutex_destroy(&t->m);
    return rc;
}

static int thread_teardown(CThread *t)
{
    int rc = netmutex_cond_destroy(&t->c);
    int mrc = netmutex_destroy(&t->m);

    return rc ? rc : mrc;
}

static int run_threads(CWorker *w, CThread *t, int n)
{
    int started = 0, rc = 0;

    for (int i = 0; i < n; i++) {
        t[i].rng = ((uint64_t)w->pid << 20) ^ (uint64_t)chaos_now_ns() ^ ((uint64_t)i << 8);
        t[i].rng |= 1; /* xorshift must not start at 0 */
        if (pthread_create(&t[i].tid, NULL, thread_main, &t[i]) != 0)
            break;
        started++;
    }
    for (int i = 0; i < started; i++)
        pthread_join(t[i].tid, NULL);
    if (started != n)
        rc = 11;
    for (int i = 0; i < n; i++)
        if (thread_teardown(&t[i]) != 0 && rc == 0)
            rc = 12;
    return rc;
}

int chaos_cond_worker_main(void *p)
{
    const ChaosWorkerCfg *cfg = p;
    CWorker w = { .cfg = cfg, .log = cfg->log, .proc = &cfg->log->procs[cfg->proc] };
    CThread t[CHAOS_MAX_THREADS];
    int n = cfg->threads, set = 0, rc;

    w.pid = (int32_t)getpid();
    chaos_store(&w.proc->pid, w.pid);
    if (cfg->rings > CHAOS_MAX_RINGS || cfg->slot < 0 || cfg->slot >= cfg->rings || n < 2 ||
        n > cfg->rings || configure(cfg) != 0)
        return 10;
    for (; set < n; set++) {
        t[set] = (CThread){ .w = &w, .index = set, .members = n, .rec_index = -1 };
        t[set].ring = (cfg->slot - set + cfg->rings) % cfg->rings;
        if (thread_setup(&t[set]) != 0)
            break;
    }
    if (set < n) {
        while (set-- > 0)
            thread_teardown(&t[set]);
        return 10;
    }
    rc = run_threads(&w, t, n);
    if (netmutex_shutdown() != 0)
        rc = rc ? rc : 13;
    return rc;
}
