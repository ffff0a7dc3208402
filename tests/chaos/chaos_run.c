/*
 * chaos_run.c -- see chaos_run.h.
 *
 * Time scale.  Everything the library is told (lease, timeouts) and every
 * wait of the driver is scaled by nm_slowdown(), so a valgrind or TSan run
 * sees the same story, only slower; the family's own duration is not, so
 * such runs inject fewer faults (but always at least one).
 *
 *   lease            600 ms: short, so that leases run out within a fault
 *   connect, I/O     300 ms each: calls give up quickly on a dead server
 *   slack            250 ms: added to every bound; a call on a healthy,
 *                    idle server takes well under a millisecond
 *   trylock          I/O timeout + slack: it never waits for a holder, so
 *                    one unanswered request is all it may wait for
 *   timedlock        its deadline + slack: a request still in flight at the
 *                    deadline must not hold the caller back
 *   unlock           2 x (connect + I/O) + slack: netmutex_lock(3) allows one
 *                    redial, for a cached connection that went stale
 *   idle bound       3/4 of a lease, but at least 1 s (families with
 *                    idle_check only): the safety issue's requirement is
 *                    that after a waiter dies the next live waiter or a
 *                    newcomer has the lock within 1 s of the release, and
 *                    waiters killed one after another may each cost a
 *                    grant's short reservation (lib.lua)
 *   think time       cached families only: up to 20 ms between a worker
 *                    thread's rounds, so that the lock is often free with
 *                    nobody waiting in the process that unlocked it: the
 *                    lease then stays cached, and the next lock there takes
 *                    it from the cache (with none, three threads per
 *                    process always hand it off to each other instead)
 *   cache            the cached families keep the library's default
 *                    cache_idle_ms (1 s, longer than the lease): the idle
 *                    give-back is only a backstop, and a shorter one would
 *                    hand back leases the revocation under test must hand
 *                    back (the idle bound is what catches one that does not
 *                    come); the workers' threads lock again within
 *                    the think time anyway, so a lease is idle-cached only
 *                    between their rounds, or while its process is stopped
 *                    (then its lease runs out within the 600 ms, as a held
 *                    one does)
 *   stop bound       10 s + 4 leases for every worker to finish its last
 *                    round once told to stop; a worker still in a call then
 *                    is a hang
 *
 * Workers: 3 processes of 3 threads (2 under a slowdown of 5 or more, to
 * keep valgrind and TSan runs bounded).  Three processes is the least that
 * gives a holder, a queued waiter to stop or kill, and a third process
 * that goes on meanwhile.  A fourth, single-threaded, is the prober (see
 * chaos_worker.c): its trylock and timedlock calls reach the server while
 * it stalls, and one in eight of its holds lasts a third of a lease to a
 * lease and a half, so that leases are renewed, and lost, under faults.
 * Any of the four may be picked as a victim.
 *
 * Condition families: 8 processes of 3 threads (4 of 2 under a slowdown
 * of 5 or more), one ring each (chaos_cond_worker.c), no prober.  A
 * member works up to 1 ms without the mutex on its turn, so that the
 * others find the turn taken and wait; the turn's counter update sleeps
 * 20 us.  Their verdict adds the condition checker (chaos_cond_check.c)
 * to the mutex checks of each ring, with the idle bound as the time a
 * wait may take to retake a free mutex, and ends with the keys left: every
 * key of the family's names must be gone three leases (+ 2 s) after the
 * workers left.
 *
 * The driver runs in the test process, on its main thread (servers are
 * restarted from there, see nm_redis_restart), and talks to Redis only
 * through fresh raw connections (nm_redis_cmd), never through netmutex: the
 * test process has no thread but its main one (not even the proxy's, see
 * chaos_proxy.h), so forking workers is safe, under the sanitizers too.
 */
#include "ac_config.h"

#include "chaos_run.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "chaos_check.h"
#include "chaos_cond_check.h"
#include "chaos_cond_worker.h"
#include "chaos_rw_check.h"
#include "chaos_rw_worker.h"
#include "chaos_sem_check.h"
#include "chaos_sem_worker.h"
#include "keytag.h"

#define PROCS 3 /* plus the prober */
#define LEASE_MS 600u
#define TIMEOUT_MS 300u
#define SLACK_MS 250u
#define IDLE_FLOOR_MS 1000u
/* A family whose fault needs a rare moment (a waiter blocked in BLPOP just
 * when the injector looks) may not strike within a short share of the time
 * under a slowdown: it goes on for up to this long (scaled) until it has
 * struck once, and fails only if it still has not. */
#define STRIKE_GRACE_MS 10000u
#define RECORDS_PER_SECOND 8000u
#define PRINT_MAX 20
#define THINK_US 20000u
/* Condition families: worker processes, and so rings (chaos_cond_worker.c);
 * fewer under a slowdown of 5 or more. */
#define COND_PROCS 8
#define COND_PROCS_SLOW 4
G_STATIC_ASSERT(COND_PROCS <= CHAOS_MAX_WORKERS && COND_PROCS <= CHAOS_MAX_RINGS);
#define COND_RMW_US 20u
#define COND_HOLD_US 1000u
#define COND_THINK_US 200u
/* Semaphore families: at most this long more a permit is held. */
#define SEM_HOLD_US 5000u

ChaosCondTotals chaos_cond_totals;
ChaosRwTotals chaos_rw_totals;
ChaosSemTotals chaos_sem_totals;


/* The worker's main, for the child to call (set before each fork). */
static int (*child_main)(void *);

/* A detection family's worker: NETMUTEX_DEADLOCK=detect in its own
 * environment, read once by the library, before its first call; and it
 * checks that the library took it (attributes default to detection on). */
static int detecting_worker(void *cfg)
{
    netmutex_attr_t a;
    int on = 0;

    setenv("NETMUTEX_DEADLOCK", "detect", 1);
    if (netmutex_attr_init(&a) != 0 || netmutex_attr_getdeadlock(&a, &on) != 0 || !on) {
        fprintf(stderr, "chaos worker: deadlock detection is not on\n");
        return 3;
    }
    netmutex_attr_destroy(&a);
    return child_main(cfg);
}

/* How long FAM injects faults. */
static unsigned int family_ms(const ChaosFamily *fam, const ChaosEnv *env)
{
    return env->family_ms * (fam->weight ? fam->weight : 1);
}

/* ---- workers ---------------------------------------------------------- */

ChaosProc *chaos_run_proc(ChaosRun *run, int slot)
{
    return run->slot[slot] >= 0 ? &run->log->procs[run->slot[slot]] : NULL;
}

unsigned int chaos_run_between(ChaosRun *run, unsigned int lo, unsigned int hi)
{
    return (unsigned int)g_rand_int_range(run->rand, (gint32)lo, (gint32)hi + 1);
}

void chaos_run_respawn(ChaosRun *run, int slot)
{
    ChaosWorkerCfg cfg = run->wcfg;
    int index;
    ChaosProc *p;
    pid_t pid;

    /* The last slot is the prober (condition families have none: each
     * slot holds a member of every ring). */
    cfg.slot = slot;
    cfg.prober = !run->fam->cond && slot == PROCS;
    if (cfg.prober) {
        cfg.threads = 1;
        cfg.long_one_in = 8;
    }
    p = chaos_proc_add(run->log, cfg.threads, &index);
    run->slot[slot] = -1;
    if (!p)
        return;
    cfg.proc = index;
    /* Unchecked: the child leaves without valgrind's or LeakSanitizer's
     * exit-time leak check, which would only see this program's memory. */
    child_main = run->fam->cond  ? chaos_cond_worker_main
                 : run->fam->rw ? chaos_rw_worker_main
                 : run->sem     ? chaos_sem_worker_main
                                : chaos_worker_main;
    pid = nm_fork_run_unchecked(run->fam->detect ? detecting_worker : child_main, &cfg);
    chaos_store(&p->pid, (int32_t)pid);
    run->slot[slot] = index;
}

/* A record P took and had not yet published (p->rec) when it was killed
 * at T: a thread allocates its record, then publishes it, then makes the
 * call; a kill in between leaves a record whose call never started, which
 * the checker would take for a call that never returned.  Records are
 * handed out in order, so such a one is among P's newest. */
static void mark_unpublished(ChaosShared *log, const ChaosProc *p, int64_t t)
{
    uint32_t n = chaos_log_count(log);

    for (uint32_t i = 0; i < n; i++) {
        ChaosRec *r = &log->recs[i];
        if (r->pid == p->pid && r->rc == CHAOS_PENDING && r->call_ns == 0 &&
            r->end == CHAOS_END_NORMAL) {
            r->end = CHAOS_END_KILLED_LOCKING; /* never waiting: wakes nothing */
            r->end_ns = t;
        }
    }
}

/* chaos_run.h.  A condition wait holds the mutex again by chaos_is_hold, ETIMEDOUT
 * included, and its unlock may be what the kill cut.  (A lock's rc is
 * stored before its return time, so a lock that returned 0 counts.) */
void chaos_run_mark_open(ChaosShared *log, ChaosProc *p, int64_t t, bool hung)
{
    for (int i = 0; i < p->nthreads; i++) {
        int32_t idx = chaos_load(&p->rec[i]);
        ChaosRec *r;

        if (idx < 0)
            continue;
        r = &log->recs[idx];
        if (r->rc == CHAOS_PENDING)
            r->end = hung              ? CHAOS_END_HUNG
                   : chaos_is_wait(r)  ? CHAOS_END_KILLED_WAITING
                                       : CHAOS_END_KILLED_LOCKING;
        else if ((chaos_is_wait(r) ? chaos_is_hold(r) : r->rc == 0 || r->rc == EOWNERDEAD) &&
                 r->unlock_end_ns == 0)
            r->end = hung ? CHAOS_END_HUNG
                   : r->unlock_ns ? CHAOS_END_KILLED_UNLOCKING : CHAOS_END_KILLED_HOLDING;
        else
            continue;
        r->end_ns = t;
    }
    if (!hung)
        mark_unpublished(log, p, t);
}

ChaosFault *chaos_run_kill(ChaosRun *run, int slot)
{
    ChaosProc *p = chaos_run_proc(run, slot);
    pid_t pid = p->pid;
    ChaosFault *f = chaos_fault_begin(run->log, CHAOS_F_KILL, pid);
    int64_t at = chaos_now_ns();
    int status;

    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    chaos_fault_end(f);
    chaos_run_mark_open(run->log, p, at, false);
    run->slot[slot] = -1;
    return f;
}

/* True once the workers have completed a few holds (they are set up and
 * the mutex works at all); false after a generous bound. */
static bool wait_for_activity(ChaosRun *run)
{
    gint64 end = nmt_now_ms() + nm_ms(10000);

    while (nmt_now_ms() < end) {
        uint32_t n = chaos_log_count(run->log), holds = 0;

        for (uint32_t i = 0; i < n && holds < 10; i++)
            holds += run->log->recs[i].unlock_end_ns > 0;
        if (holds >= 10)
            return true;
        nmt_sleep_ms(10);
    }
    return false;
}

/* Reaps SLOT's worker if it has exited; false while it runs. */
static bool reaped(ChaosRun *run, int slot)
{
    ChaosProc *p = chaos_run_proc(run, slot);
    int status;
    pid_t got = waitpid(p->pid, &status, WNOHANG);

    if (got == 0)
        return false;
    if (got == p->pid && WIFSIGNALED(status)) {
        g_printerr("chaos: worker %d died of signal %d\n", p->pid, WTERMSIG(status));
        g_test_fail();
    } else if (got == p->pid && WEXITSTATUS(status) != 0) {
        g_printerr("chaos: worker %d exited with status %d\n", p->pid, WEXITSTATUS(status));
        g_test_fail();
    }
    run->slot[slot] = -1;
    return true;
}

/* A worker that did not finish in time hangs: its open calls are marked
 * (the checker names them), and the test fails even if none is open (a
 * worker stuck in netmutex_shutdown, say). */
static void kill_straggler(ChaosRun *run, int slot)
{
    ChaosProc *p = chaos_run_proc(run, slot);
    int status;

    g_printerr("chaos: worker %d did not finish within the stop bound\n", p->pid);
    g_test_message("chaos %s: worker %d hung", run->fam->name, p->pid);
    g_test_fail();
    chaos_run_mark_open(run->log, p, chaos_now_ns(), true);
    nm_print_stacks(p->pid, "worker");
    kill(p->pid, SIGKILL);
    waitpid(p->pid, &status, 0);
    run->slot[slot] = -1;
}

static void stop_workers(ChaosRun *run)
{
    gint64 end = nmt_now_ms() + nm_ms(10000) + 4 * run->lease_ms;
    int left;

    chaos_store(&run->log->stop, 1);
    do {
        left = 0;
        for (int s = 0; s < run->nworkers; s++)
            left += run->slot[s] >= 0 && !reaped(run, s);
        if (left)
            nmt_sleep_ms(10);
    } while (left && nmt_now_ms() < end);
    for (int s = 0; s < run->nworkers; s++)
        if (run->slot[s] >= 0)
            kill_straggler(run, s);
}

/* ---- setting up and tearing down ------------------------------------------- */

static char *quorum_url(ChaosRun *run)
{
    GString *s = g_string_new(NULL);

    for (int i = 0; i < CHAOS_QUORUM_N; i++) {
        char *u = nm_redis_url(run->servers[i]);
        g_string_append_printf(s, "%s%s", i ? "," : "", u);
        g_free(u);
    }
    return g_string_free(s, FALSE);
}

static void setup_servers(ChaosRun *run, const ChaosEnv *env)
{
    run->redis = env->redis;
    if (run->fam->mode == CHAOS_QUORUM) {
        run->redis = NULL;
        for (int i = 0; i < CHAOS_QUORUM_N; i++)
            run->servers[i] = nm_redis_start(NULL);
        run->url = quorum_url(run);
    } else if (run->fam->mode == CHAOS_PROXY) {
        run->proxy = chaos_proxy_start(env->redis);
        run->url = chaos_proxy_url(run->proxy);
    } else {
        run->url = nm_redis_url(env->redis);
    }
}

static uint32_t log_capacity(const ChaosFamily *fam, const ChaosEnv *env,
                             unsigned int lease_ms)
{
    /* The family may overrun its time by a fault and the stop phase. */
    double seconds =
        (family_ms(fam, env) + nm_ms(STRIKE_GRACE_MS) + 8.0 * lease_ms + nm_ms(10000)) / 1000.0;

    return (uint32_t)(RECORDS_PER_SECOND * seconds);
}

static void setup_workers(ChaosRun *run)
{
    ChaosWorkerCfg *c = &run->wcfg;

    c->log = run->log;
    c->url = run->url;
    c->name = run->name;
    c->lease_ms = run->lease_ms;
    c->connect_ms = nm_ms(TIMEOUT_MS);
    c->io_ms = nm_ms(TIMEOUT_MS);
    /* Quorum mode: one slow server must not cost a whole I/O timeout. */
    c->server_ms = run->fam->mode == CHAOS_QUORUM ? nm_ms(100) : 0;
    c->timed_min_ms = nm_ms(50);
    c->timed_max_ms = nm_ms(400);
    c->rmw_us = 500;
    c->hold_us = 1000;
    /* Long holds (the prober's): from a third of a lease, when the
     * watchdog first renews, to a lease and a half. */
    c->long_min_ms = run->lease_ms / 3;
    c->long_max_ms = 3 * run->lease_ms / 2;
    c->threads = nm_slowdown() >= 5 ? 2 : 3;
    c->robust = !run->fam->cached && !run->fam->rw && !run->sem;
    c->permits = CHAOS_SEM_PERMITS;
    c->think_us = run->fam->cached ? THINK_US : 0;
    run->nworkers = PROCS + 1;
    /* Semaphore families: holds long enough against the round trips of a
     * wait and a post that all permits are often held at once, under a
     * slowdown too (the family fails if they never were). */
    if (run->sem)
        c->hold_us = SEM_HOLD_US;
    if (run->fam->cond) {
        run->nworkers = run->nrings = nm_slowdown() >= 5 ? COND_PROCS_SLOW : COND_PROCS;
        c->rings = run->nrings;
        /* See chaos_cond_worker.c: turns go round as fast as they can, the
         * work in a turn is short. */
        c->robust = false;
        c->rmw_us = COND_RMW_US;
        c->hold_us = COND_HOLD_US;
        c->think_us = COND_THINK_US;
    }
}

/* The key <prefix>{c<tag>}NAME:SUFFIX of condition NAME (the lock key of
 * the same name has the tag {<tag>}). */
static char *cond_key(const char *name, const char *suffix)
{
    char *lock = nm_lock_key(name);
    const char *brace = strchr(lock, '{');
    char *key = g_strdup_printf("%.*s{c%s%s", (int)(brace - lock), lock, brace + 1, suffix);

    g_free(lock);
    return key;
}

/* The rings' names, and the keys the driver looks at: ring 0's lock key
 * (cached, for the cache marks) and every ring's CW. */
static void setup_rings(ChaosRun *run)
{
    char name[1100];

    chaos_cond_ring_name(name, sizeof name, run->name, 'm', 0);
    run->key = nm_lock_key(name);
    for (int r = 0; r < CHAOS_MAX_RINGS; r++) {
        chaos_cond_ring_name(name, sizeof name, run->name, 'c', r);
        run->cw[r] = cond_key(name, ":cw");
    }
}

/* The key <prefix>{<kind><tag>}NAME of rwlock (KIND 'r': its write lock
 * key) or semaphore ('s') NAME (lib.lua): its queue (:q) and entries (:w)
 * are where the injectors find waiters. */
static char *shared_key(char kind, const char *name)
{
    char tag[NM_TEST_TAG_LEN + 1];

    nm_test_key_tag(name, strlen(name), tag);
    return g_strdup_printf("netmutex:{%c%s}%s", kind, tag, name);
}

static void setup_run(ChaosRun *run, const ChaosFamily *fam, const ChaosEnv *env, bool sem)
{
    memset(run, 0, sizeof *run);
    run->fam = fam;
    run->sem = sem;
    run->lease_ms = nm_ms(LEASE_MS);
    run->rand = g_rand_new();
    run->name = nm_test_name(fam->cond ? "ring" : fam->rw ? "rw" : sem ? "sem" : "m");
    if (fam->cond)
        setup_rings(run);
    else if (fam->rw || sem)
        run->key = shared_key(fam->rw ? 'r' : 's', run->name);
    else
        run->key = nm_lock_key(run->name);
    run->log = chaos_log_new(log_capacity(fam, env, run->lease_ms));
    run->t0_ns = chaos_now_ns();
    setup_servers(run, env);
    setup_workers(run);
    for (int s = 0; s < CHAOS_MAX_WORKERS; s++)
        run->slot[s] = -1;
}

static void teardown(ChaosRun *run)
{
    for (int i = 0; i < CHAOS_QUORUM_N; i++)
        nm_redis_free(run->servers[i]);
    if (run->proxy)
        chaos_proxy_free(run->proxy);
    chaos_log_free(run->log);
    g_rand_free(run->rand);
    g_free(run->url);
    g_free(run->name);
    g_free(run->key);
    for (int r = 0; r < CHAOS_MAX_RINGS; r++)
        g_free(run->cw[r]);
}

/* ---- the driver --------------------------------------------------------------- */

/* One look at the lock key's cache flag (the character after the token
 * and the queue flag, see docs/deployment.md's key schema): true when its holder's
 * process may keep the lease cached.  Single server and proxy modes. */
static bool cache_marked(ChaosRun *run)
{
    char *v = run->redis ? nm_redis_get(run->redis, 0, run->key, strlen(run->key)) : NULL;
    bool marked = v && strlen(v) > 33 && (v[33] == 'k' || v[33] == 'i');

    g_free(v);
    run->cache_marks += marked;
    return marked;
}

/* A cached family must run with cacheable leases: nothing in the set-up
 * may have turned caching off.  Up to 2 s for a lease marked so. */
static void wait_for_cache_mark(ChaosRun *run)
{
    gint64 end = nmt_now_ms() + nm_ms(2000);

    while (!cache_marked(run) && nmt_now_ms() < end)
        nmt_sleep_ms(1);
}

/* Whether the family goes on injecting: until its time is up, and past it
 * (up to the grace) while no fault has struck yet. */
static bool keep_driving(const ChaosRun *run, gint64 end)
{
    gint64 now = nmt_now_ms();

    if (now < end)
        return true;
    return run->fam->inject && run->injected == 0 && now < end + nm_ms(STRIKE_GRACE_MS);
}

/* Cached families, and the condition families' ring 0: leases must be
 * cacheable. */
static bool expects_cache(const ChaosFamily *fam)
{
    return fam->cached || fam->cond;
}

static void drive(ChaosRun *run, const ChaosEnv *env)
{
    const ChaosFamily *fam = run->fam;
    gint64 end = nmt_now_ms() + family_ms(fam, env);

    if (expects_cache(fam))
        wait_for_cache_mark(run);
    do {
        if (fam->inject && fam->inject(run))
            run->injected++;
        /* A robust family's samples must never see one (never cached). */
        cache_marked(run);
        nmt_sleep_ms(nm_ms(fam->gap_ms));
    } while (keep_driving(run, end));
}

/* ---- the verdict ---------------------------------------------------------------- */

/* See "idle bound" at the top. */
static int64_t idle_bound_ms(const ChaosRun *run)
{
    return MAX((int64_t)run->lease_ms * 3 / 4, (int64_t)nm_ms(IDLE_FLOOR_MS));
}

static ChaosParams params(const ChaosRun *run)
{
    int64_t ms = 1000000, io = nm_ms(TIMEOUT_MS), connect = nm_ms(TIMEOUT_MS);
    int64_t slack = nm_ms(SLACK_MS);
    ChaosParams p = {
        .try_bound_ns = (io + slack) * ms,
        .unlock_bound_ns = (2 * (connect + io) + slack) * ms,
        .timed_slack_ns = slack * ms,
        .early_ns = (int64_t)nm_ms(2) * ms,
        .idle_bound_ns = run->fam->idle_check ? idle_bound_ms(run) * ms : 0,
        .keep_ns = (int64_t)run->lease_ms * ms,
        .non_robust = run->fam->cached || run->fam->cond,
        .lease_ns = (int64_t)run->lease_ms * ms,
        .relock_bound_ns = idle_bound_ms(run) * ms,
        .redeliver_ns = slack * ms,
    };

    return p;
}

static void print_faults(const ChaosRun *run)
{
    const ChaosShared *log = run->log;

    g_printerr("faults (ms since the family started):\n");
    for (uint32_t i = 0; i < log->nfaults && i < 60; i++) {
        const ChaosFault *f = &log->faults[i];
        g_printerr("    %s pid %d flags %u detail %d: %.3f .. %.3f\n", chaos_fault_name(f->kind),
                   f->pid, f->flags, f->detail, (f->begin_ns - run->t0_ns) / 1e6,
                   (f->end_ns - run->t0_ns) / 1e6);
    }
}

/* "overlap 3, fence order 12" for the kinds counted in COUNTS. */
static char *kinds_text(const size_t *counts)
{
    GString *s = g_string_new(NULL);

    for (int k = 0; k < CV_NKINDS; k++)
        if (counts[k])
            g_string_append_printf(s, "%s%s %zu", s->len ? ", " : "", chaos_violation_name(k),
                                   counts[k]);
    if (!s->len)
        g_string_append(s, "none");
    return g_string_free(s, FALSE);
}

static void summarize(const ChaosRun *run, const ChaosReport *rep)
{
    const ChaosStats *s = &rep->stats;
    char *limits = kinds_text(rep->limits);

    g_test_message("chaos %s: %zu calls, %zu holds (%zu valid, %zu EOWNERDEAD, %zu lost "
                   "leases, %zu fences rejected, %zu killed holding, unlock ENOLCK %zu / "
                   "EIO %zu, %zu stale lost updates, %zu cached relocks); %u faults "
                   "injected (%u flagged); documented limits seen: %s",
                   run->fam->name, s->calls, s->holds, s->valid, s->ownerdead, s->lost,
                   s->rejected, s->killed_holding, s->unlock_enolck, s->unlock_eio,
                   s->stale_lost_updates, s->cached_relocks, run->injected, run->flagged,
                   limits);
    g_free(limits);
}

/* NETMUTEX_TEST_CHAOS_DUMP=DIR: the whole log and the faults of each
 * family go to DIR/<family>.txt, to study a failure. */
static void dump(const ChaosRun *run)
{
    const char *dir = g_getenv("NETMUTEX_TEST_CHAOS_DUMP");
    char *base, *path;
    FILE *f;

    if (!dir || !*dir)
        return;
    base = g_strdelimit(g_strdup_printf("%s.txt", run->fam->name), "/", '_');
    path = g_build_filename(dir, base, NULL);
    f = fopen(path, "w");
    if (f) {
        chaos_dump(run->log->recs, chaos_log_count(run->log), run->t0_ns, f);
        for (uint32_t i = 0; i < run->log->nfaults; i++) {
            const ChaosFault *x = &run->log->faults[i];
            fprintf(f, "fault %s pid %d flags %u detail %d: %.3f .. %.3f\n",
                    chaos_fault_name(x->kind), x->pid, x->flags, x->detail,
                    (x->begin_ns - run->t0_ns) / 1e6, (x->end_ns - run->t0_ns) / 1e6);
        }
        fclose(f);
    }
    g_free(path);
    g_free(base);
}

/* Cached families: leases were cacheable (their revocations were then
 * exercised on every contended acquisition; relocks from the cache are
 * counted in the summary).  Robust families: never. */
static void check_cache_marks(const ChaosRun *run)
{
    if (run->fam->mode == CHAOS_QUORUM)
        return;
    if (expects_cache(run->fam) && run->cache_marks == 0) {
        g_printerr("chaos %s: the lock key was never marked cacheable\n", run->fam->name);
        g_test_message("chaos %s: caching was not on: nothing was tested", run->fam->name);
        g_test_fail();
    } else if (!expects_cache(run->fam) && run->cache_marks > 0) {
        g_printerr("chaos %s: a robust mutex's lease was marked cacheable (%u samples)\n",
                   run->fam->name, run->cache_marks);
        g_test_message("chaos %s FAILED: robust lease cacheable", run->fam->name);
        g_test_fail();
    }
}

static void judge(ChaosRun *run)
{
    ChaosParams p = params(run);
    ChaosReport rep = { 0 };
    size_t failures;
    char *kinds;

    chaos_check(run->log->recs, chaos_log_count(run->log), run->log->faults,
                run->log->nfaults, &p, &rep);
    summarize(run, &rep);
    dump(run);
    failures = chaos_report_failures(&rep);
    kinds = kinds_text(rep.count);
    if (failures || rep.nv) {
        g_printerr("chaos %s: %zu violations (%s)\n", run->fam->name, failures, kinds);
        chaos_report_print(&rep, run->log->recs, run->t0_ns, PRINT_MAX, stderr);
    }
    if (failures) {
        print_faults(run);
        g_test_message("chaos %s FAILED: %s", run->fam->name, kinds);
        g_test_fail();
    }
    check_cache_marks(run);
    if (run->fam->inject && run->injected == 0) {
        g_test_message("chaos %s: no fault could be injected: nothing was tested",
                       run->fam->name);
        g_test_fail();
    }
    g_free(kinds);
    chaos_report_clear(&rep);
}

/* ---- the condition families' verdict ------------------------------------------- */

/* Ring RING's records, in log order, prev and next renumbered: the
 * checkers judge one mutex and one condition at a time. */
static ChaosRec *ring_records(const ChaosRun *run, int ring, size_t *n)
{
    uint32_t total = chaos_log_count(run->log);
    ChaosRec *out = g_new(ChaosRec, MAX(total, 1u));
    int32_t *map = g_new(int32_t, MAX(total, 1u));
    size_t k = 0;

    for (uint32_t i = 0; i < total; i++) {
        map[i] = run->log->recs[i].ring == ring ? (int32_t)k : -1;
        if (map[i] >= 0)
            out[k++] = run->log->recs[i];
    }
    for (size_t j = 0; j < k; j++) {
        out[j].prev = out[j].prev >= 0 && (uint32_t)out[j].prev < total ? map[out[j].prev] : -1;
        out[j].next = out[j].next >= 0 && (uint32_t)out[j].next < total ? map[out[j].next] : -1;
    }
    g_free(map);
    *n = k;
    return out;
}

#define ADD_STAT(f) sum->f += add->f
static void add_stats(ChaosStats *sum, const ChaosStats *add)
{
    ADD_STAT(calls); ADD_STAT(holds); ADD_STAT(valid); ADD_STAT(lost);
    ADD_STAT(killed_holding); ADD_STAT(unlock_enolck); ADD_STAT(unlock_eio);
    ADD_STAT(stale_lost_updates); ADD_STAT(cached_relocks);
    ADD_STAT(signals); ADD_STAT(broadcasts); ADD_STAT(relays); ADD_STAT(to_waiters);
    ADD_STAT(signal_failed); ADD_STAT(waits); ADD_STAT(timed_waits); ADD_STAT(wakes);
    ADD_STAT(timeouts); ADD_STAT(wait_enolck); ADD_STAT(killed_waiting);
    ADD_STAT(timeouts_judged); ADD_STAT(timeouts_excused); ADD_STAT(needy_signals);
}
#undef ADD_STAT

static void summarize_cond(const ChaosRun *run, const ChaosStats *s, const size_t *limits,
                           size_t lost)
{
    char *lim = kinds_text(limits);

    g_test_message("chaos %s: %zu signals + %zu broadcasts (%zu relays; %zu found a waiter; "
                   "%zu failed), %zu waits (%zu timed): %zu woken, %zu timed out (%zu judged, "
                   "%zu excused by a fault), %zu ENOLCK, %zu killed waiting; %zu lost wake-ups; "
                   "%zu holds (%zu valid, %zu lost leases, unlock ENOLCK %zu / EIO %zu, "
                   "%zu cached relocks); %u faults injected; documented limits seen: %s",
                   run->fam->name, s->signals, s->broadcasts, s->relays, s->to_waiters,
                   s->signal_failed, s->waits, s->timed_waits, s->wakes, s->timeouts,
                   s->timeouts_judged, s->timeouts_excused, s->wait_enolck, s->killed_waiting,
                   lost, s->holds, s->valid, s->lost, s->unlock_enolck, s->unlock_eio,
                   s->cached_relocks, run->injected, lim);
    g_free(lim);
}

static void add_totals(const ChaosRun *run, const ChaosStats *s, size_t lost)
{
    ChaosCondTotals *t = &chaos_cond_totals;

    t->families++;
    t->signals += s->signals;
    t->broadcasts += s->broadcasts;
    t->to_waiters += s->to_waiters;
    t->waits += s->waits;
    t->wakes += s->wakes;
    t->timeouts += s->timeouts;
    t->timeouts_judged += s->timeouts_judged;
    t->lost += lost;
    t->faults += run->injected;
}

/* Judges ring RING; its failures, its stats added to SUM, its
 * documented limits to LIMITS. */
static size_t judge_ring(ChaosRun *run, int ring, ChaosStats *sum, size_t *limits,
                         size_t *lost)
{
    ChaosParams p = params(run);
    ChaosReport rep = { 0 };
    size_t n, failures;
    ChaosRec *recs = ring_records(run, ring, &n);
    char *kinds;

    chaos_check(recs, n, run->log->faults, run->log->nfaults, &p, &rep);
    chaos_cond_check(recs, n, run->log->faults, run->log->nfaults, &p, &rep);
    add_stats(sum, &rep.stats);
    for (int k = 0; k < CV_NKINDS; k++)
        limits[k] += rep.limits[k];
    *lost += rep.count[CV_LOST_WAKEUP];
    failures = chaos_report_failures(&rep);
    kinds = kinds_text(rep.count);
    if (failures || rep.nv) {
        g_printerr("chaos %s, ring %d: %zu violations (%s)\n", run->fam->name, ring, failures,
                   kinds);
        chaos_report_print(&rep, recs, run->t0_ns, PRINT_MAX, stderr);
    }
    if (failures)
        g_test_message("chaos %s FAILED, ring %d: %s", run->fam->name, ring, kinds);
    g_free(kinds);
    chaos_report_clear(&rep);
    g_free(recs);
    return failures;
}

static void judge_cond(ChaosRun *run)
{
    ChaosStats sum = { 0 };
    size_t limits[CV_NKINDS] = { 0 }, failures = 0, lost = 0;

    for (int r = 0; r < run->nrings; r++)
        failures += judge_ring(run, r, &sum, limits, &lost);
    summarize_cond(run, &sum, limits, lost);
    add_totals(run, &sum, lost);
    dump(run);
    if (failures) {
        print_faults(run);
        g_test_fail();
    }
    check_cache_marks(run);
    if (run->fam->inject && run->injected == 0) {
        g_test_message("chaos %s: no fault could be injected: nothing was tested",
                       run->fam->name);
        g_test_fail();
    }
}

/* ---- the read-write lock families' verdict -------------------------------------- */

static void summarize_rw(const ChaosRun *run, const ChaosReport *rep, const ChaosRwCounts *k)
{
    const ChaosStats *s = &rep->stats;
    char *limits = kinds_text(rep->limits);

    g_test_message("chaos %s: %zu read calls (%zu holds, %zu valid, %zu began while another "
                   "read held), %zu write calls (%zu holds, %zu valid); %zu lost holds, %zu "
                   "fences rejected, %zu killed holding, unlock ENOLCK %zu / EIO %zu, %zu stale "
                   "lost updates; %u faults injected (%u flagged); documented limits seen: %s",
                   run->fam->name, k->reads, k->read_holds, k->read_valid, k->shared, k->writes,
                   k->write_holds, k->write_valid, s->lost, s->rejected, s->killed_holding,
                   s->unlock_enolck, s->unlock_eio, s->stale_lost_updates, run->injected,
                   run->flagged, limits);
    g_free(limits);
}

static void add_rw_totals(const ChaosRun *run, const ChaosRwCounts *k)
{
    ChaosRwTotals *t = &chaos_rw_totals;

    t->families++;
    t->reads += k->reads;
    t->writes += k->writes;
    t->read_holds += k->read_holds;
    t->write_holds += k->write_holds;
    t->read_valid += k->read_valid;
    t->write_valid += k->write_valid;
    t->shared += k->shared;
    t->faults += run->injected;
}

/* The verdict on REP, the report on a shared lock's log (a rwlock's or a
 * semaphore's), whose holds are printed and dumped with the valid
 * intervals chaos_rw_view gives them; REP is cleared. */
static void judge_shared(ChaosRun *run, ChaosReport *rep)
{
    const ChaosShared *log = run->log;
    uint32_t n = chaos_log_count(run->log);
    ChaosRec *view = chaos_rw_view(log->recs, n, log->faults, log->nfaults);
    size_t failures = chaos_report_failures(rep);
    char *kinds = kinds_text(rep->count);

    if (failures || rep->nv) {
        g_printerr("chaos %s: %zu violations (%s)\n", run->fam->name, failures, kinds);
        chaos_report_print(rep, view, run->t0_ns, PRINT_MAX, stderr);
    }
    if (g_getenv("NETMUTEX_TEST_CHAOS_DUMP")) {
        memcpy(run->log->recs, view, (size_t)n * sizeof *view);
        dump(run);
    }
    g_free(view);
    if (failures) {
        print_faults(run);
        g_test_message("chaos %s FAILED: %s", run->fam->name, kinds);
        g_test_fail();
    }
    check_cache_marks(run);
    if (run->fam->inject && run->injected == 0) {
        g_test_message("chaos %s: no fault could be injected: nothing was tested",
                       run->fam->name);
        g_test_fail();
    }
    g_free(kinds);
    chaos_report_clear(rep);
}

static void judge_rw(ChaosRun *run)
{
    const ChaosShared *log = run->log;
    uint32_t n = chaos_log_count(run->log);
    ChaosParams p = params(run);
    ChaosReport rep = { 0 };
    ChaosRwCounts counts;

    chaos_rw_check(log->recs, n, log->faults, log->nfaults, &p, &rep);
    chaos_rw_count(log->recs, n, log->faults, log->nfaults, &counts);
    summarize_rw(run, &rep, &counts);
    add_rw_totals(run, &counts);
    chaos_rw_totals.lost += rep.stats.lost;
    judge_shared(run, &rep);
}

/* ---- the semaphore families' verdict ---------------------------------------------- */

static void summarize_sem(const ChaosRun *run, const ChaosReport *rep, const ChaosSemCounts *k)
{
    const ChaosStats *s = &rep->stats;
    char *limits = kinds_text(rep->limits);

    g_test_message("chaos %s: %zu wait calls, %zu permits taken (%zu valid); at most %zu of "
                   "%u valid holders at once%s, %zu holds began with all %u held, all held "
                   "%.0f ms in all; %zu lost holds, %zu killed holding, post ENOLCK %zu / EIO "
                   "%zu; %u faults injected (%u flagged); documented limits seen: %s",
                   run->fam->name, k->calls, k->holds, k->valid, k->max_holders,
                   CHAOS_SEM_PERMITS,
                   k->max_holders > CHAOS_SEM_PERMITS ? " (the excess only across an empty "
                                                        "restart: the documented limit)" : "",
                   k->full, CHAOS_SEM_PERMITS, k->full_ns / 1e6, s->lost,
                   s->killed_holding, s->unlock_enolck, s->unlock_eio, run->injected,
                   run->flagged, limits);
    g_free(limits);
}

static void add_sem_totals(const ChaosRun *run, const ChaosReport *rep, const ChaosSemCounts *k)
{
    ChaosSemTotals *t = &chaos_sem_totals;

    t->families++;
    t->calls += k->calls;
    t->holds += k->holds;
    t->valid += k->valid;
    t->lost += rep->stats.lost;
    t->full += k->full;
    t->max_holders = MAX(t->max_holders, k->max_holders);
    t->faults += run->injected;
}

/* The permits must have been used, not only never exceeded: all of them
 * held at once at some moment. */
static void check_sem_used(const ChaosRun *run, const ChaosSemCounts *k)
{
    if (k->full > 0)
        return;
    g_printerr("chaos %s: never all %u permits validly held at once (at most %zu)\n",
               run->fam->name, CHAOS_SEM_PERMITS, k->max_holders);
    g_test_message("chaos %s FAILED: the permits were never all used", run->fam->name);
    g_test_fail();
}

static void judge_sem(ChaosRun *run)
{
    const ChaosShared *log = run->log;
    uint32_t n = chaos_log_count(run->log);
    ChaosParams p = params(run);
    ChaosReport rep = { 0 };
    ChaosSemCounts counts;

    chaos_sem_check(log->recs, n, log->faults, log->nfaults, CHAOS_SEM_PERMITS, &p, &rep);
    chaos_sem_count(log->recs, n, log->faults, log->nfaults, CHAOS_SEM_PERMITS, &counts);
    summarize_sem(run, &rep, &counts);
    add_sem_totals(run, &rep, &counts);
    check_sem_used(run, &counts);
    judge_shared(run, &rep);
}

/* Keys of the family's names still on the server (at most MAX, in
 * *LIST), or -1 if the server could not be asked. */
static long keys_left(ChaosRun *run, char **list, int max)
{
    char *pattern = g_strdup_printf("*%s*", run->name), cursor[32] = "0";
    GString *s = g_string_new(NULL);
    long n = 0;

    do {
        redisReply *r = nm_redis_cmd(run->redis, "SCAN %s MATCH %s COUNT 1000", cursor,
                                     pattern);
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
            freeReplyObject(r);
            n = -1;
            break;
        }
        g_strlcpy(cursor, r->element[0]->str, sizeof cursor);
        for (size_t i = 0; i < r->element[1]->elements; i++, n++)
            if (n < max)
                g_string_append_printf(s, "    %s\n", r->element[1]->element[i]->str);
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0);
    g_free(pattern);
    *list = g_string_free(s, FALSE);
    return n;
}

/* Once every worker left, every key of the family's mutexes and
 * conditions goes away: at once, or as the leases of dead waiters and
 * holders run out, their lists three leases after their last use, and a
 * queue three looks after its last waiter's latest (a waiter whose
 * give-up could not reach the server: docs/deployment.md's key schema). */
static void check_keys_left(ChaosRun *run)
{
    unsigned int bound = MAX(3 * run->lease_ms, NM_TEST_ENTRY_LIFE_MS) + nm_ms(2000);
    gint64 end = nmt_now_ms() + bound;
    char *list = NULL;
    long n;

    for (;;) {
        g_free(list);
        n = keys_left(run, &list, 10);
        if (n == 0 || nmt_now_ms() >= end)
            break;
        nmt_sleep_ms(50);
    }
    if (n != 0) {
        g_printerr("chaos %s: %ld keys left on the server %u ms after the workers left:\n%s",
                   run->fam->name, n, bound, list);
        g_test_message("chaos %s FAILED: %ld keys left", run->fam->name, n);
        g_test_fail();
    }
    g_free(list);
}

static void run_family(const ChaosFamily *fam, const ChaosEnv *env, bool sem)
{
    ChaosRun run;

    setup_run(&run, fam, env, sem);
    for (int s = 0; s < run.nworkers; s++)
        chaos_run_respawn(&run, s);
    if (wait_for_activity(&run)) {
        drive(&run, env);
    } else {
        g_test_message("chaos %s: the workers never got going", fam->name);
        g_test_fail();
    }
    stop_workers(&run);
    if (fam->cond || fam->rw || sem) {
        if (fam->cond)
            judge_cond(&run);
        else if (fam->rw)
            judge_rw(&run);
        else
            judge_sem(&run);
        check_keys_left(&run);
    } else {
        judge(&run);
    }
    teardown(&run);
}

void chaos_run_family(const ChaosFamily *fam, const ChaosEnv *env)
{
    run_family(fam, env, false);
}

void chaos_run_sem_family(const ChaosFamily *fam, const ChaosEnv *env)
{
    run_family(fam, env, true);
}
