/*
 * chaos_main.c -- test_chaos, netmutex's fault-injection ("chaos") suite.
 *
 * Three worker processes of three threads each, and a single-threaded
 * prober, hammer one netmutex with a 600 ms lease (lock, timedlock and
 * trylock): a ROBUST one, or in the cached families (/chaos/cached/...) a
 * plain one with lease caching on, while the test process
 * injects one family of faults again and again.  Every call and every hold
 * is logged to shared memory with CLOCK_MONOTONIC times: a hold is valid
 * from the lock call's return to the earliest of its unlock, its lost-lease
 * notice and the end of its last netmutex_validity promise.  Holders
 * present their fence to a fenced resource (it rejects a fence smaller than
 * one it has seen) and read-modify-write a shared counter.  When the family
 * is over, a checker reads the log and fails the test case on
 *   - two valid holds that overlap (except across an empty restart of the
 *     single server: a documented limit, reported by that name),
 *   - a later holder with a smaller fence, or the same fence in another
 *     process (same-process hand-offs share a fence by design),
 *   - a missed EOWNERDEAD (after a holder was killed) or a spurious one
 *     (after a clean release); in the cached families, any EOWNERDEAD
 *     (the mutex is not robust),
 *   - a lost update by two valid holders,
 *   - a call past its bound (trylock: the I/O timeout + 250 ms; timedlock:
 *     its deadline + 250 ms; unlock: two dials and requests + 250 ms; all
 *     scaled by NETMUTEX_TEST_SLOWDOWN), a call that never returns, a
 *     result the API does not allow,
 *   - in the baseline and the two kill families, a lock left free for 3/4
 *     of a lease while others waited, after a release (or, after a
 *     killed holder, after its lease): with caching, a lease kept cached
 *     by one process while another waits, a revocation that does not come,
 *   - in the cached families, a lock key never marked cacheable (caching
 *     was not on), and in the others one marked so (a robust mutex's lease
 *     must never be cached).
 * On failure the offending holds (process, thread, start, valid end, fence,
 * results) and the fault timeline are printed to stderr; on success one
 * summary line per family is printed as a TAP comment.
 *
 * Families (one test case each, so TAP names the one that failed):
 *   baseline               no fault: the checker's control
 *   sigstop/holder         SIGSTOP a holder for 1.5-2 leases, then SIGCONT
 *   sigstop/waiter         the same for a waiter queued in Redis
 *   kill/holder            SIGKILL a holder (a fresh worker takes its place)
 *   kill/waiter            SIGKILL a waiter queued in Redis
 *   client-kill/normal     CLIENT KILL TYPE normal
 *   client-kill/blocked    CLIENT KILL of the connections queued waiters
 *                          block on for their grant (BLPOP)
 *   debug-sleep            DEBUG SLEEP 0.5 to 1 s (the server stalls)
 *   restart-empty          the server stopped and started empty
 *   blackhole              clients behind a proxy that stops relaying
 *   forged-grant           "granted <token> ..." and "released" PUBLISHed
 *                          to queued waiters while another process holds
 *   quorum/minority-down   3 servers, one of them stopped for 2-3 leases
 *   quorum/majority-down   3 servers, two stopped (calls must give up in
 *                          bounded time), then restarted one lease apart
 *   detect/<family>        a few families above (mutex, condition and
 *                          read-write lock) with deadlock detection on in
 *                          every worker: stale edges of stopped and killed
 *                          holders must never make an EDEADLK
 *   cached/<family>        the single-server and proxy families above
 *                          on a
 *                          plain mutex with lease caching on
 *                          and the library's default cache_idle_ms (1 s):
 *                          cached leases are revoked, given back, lost,
 *                          stopped, killed and cut off under every fault;
 *                          relocks from the cache share the lease's fence
 *                          in one process, as hand-offs do.  Their threads
 *                          pause up to 20 ms between rounds, so that an
 *                          unlock often finds no local waiter and the lease
 *                          stays cached (the summary counts "cached
 *                          relocks").  Quorum mode never caches: no cached
 *                          quorum family.
 *   cond/<family>          a netmutex_cond_t under the faults that concern
 *                          one (chaos_cond_worker.c): eight processes of
 *                          three threads pass turns round eight rings, each
 *                          a mutex and the condition it guards, logging
 *                          every hold, wait, signal and broadcast; the
 *                          checker (chaos_cond_check.h) adds lost wake-ups,
 *                          waits that return without the mutex, waits and
 *                          signals past their bounds, and every key of the
 *                          family gone three leases after it:
 *     cond/baseline              no fault
 *     cond/sigstop/waiter        SIGSTOP a worker waiting on a condition
 *     cond/sigstop/signaller     SIGSTOP a holder (about to signal)
 *     cond/kill/waiter           SIGKILL a worker waiting on a condition
 *     cond/kill/signaller        SIGKILL a holder
 *     cond/client-kill/normal    CLIENT KILL TYPE normal
 *     cond/client-kill/blocked   CLIENT KILL of the connections blocked in
 *                                BLPOP (the waiters')
 *     cond/debug-sleep           DEBUG SLEEP 0.5 to 1 s
 *     cond/restart-empty         the server stopped and started empty
 *     cond/blackhole             clients behind a proxy that stops relaying
 *     cond/forged-wakeup         pushes on waiters' signal lists (CG) by a
 *                                third party: to the longest waiter of a
 *                                ring, then to every waiter
 *                          A summary line at the end adds up the condition
 *                          families' signals.  Quorum mode has no
 *                          condition variables (ENOTSUP).
 *   rwlock/<family>        a netmutex_rwlock_t under the single-server
 *                          and proxy faults above, the forged grant
 *                          pushed on queued waiters' grant lists (K:g:<t>)
 *                          rather than published:
 *                          chaos_rw_worker.c's three processes of three
 *                          threads and a prober take it to read (two calls
 *                          in three) and to write, half of the processes
 *                          preferring readers; the checker
 *                          (chaos_rw_check.h) fails a writer whose valid
 *                          interval meets a reader's or another writer's,
 *                          fences out of order (a writer's strictly above
 *                          every earlier writer's, a reader's between the
 *                          writers before and after it), a lost update by
 *                          two writers, a call past its bound or that never
 *                          returns, a result the API does not allow, and
 *                          any key of the name left three leases after the
 *                          workers; a summary line at the end adds the
 *                          families up.  Quorum mode has no rwlocks.
 *   sem/<family>           a netmutex_sem_t of 3 permits under the holder
 *                          and waiter kills, the holder's SIGSTOP past its
 *                          lease, both CLIENT KILLs and the empty restart
 *                          (chaos_sem_worker.c): the rwlock families' three
 *                          processes of three threads and a prober take
 *                          permits by wait, clockwait and trywait and post
 *                          them; the checker (chaos_sem_check.h) fails
 *                          more than 3 valid holders at once (an empty
 *                          restart between them is the documented limit),
 *                          a call past its bound or that never returns, a
 *                          result the API does not allow, any key of the
 *                          name left three leases after the workers, and a
 *                          family in which all 3 permits were never validly
 *                          held at once; a summary line at the end adds the
 *                          families up.  Quorum mode has no semaphores.
 * plus /chaos/checker/..., the checkers on hand-made logs.
 *
 * Real redis-servers only, started by the fixture (one with
 * --enable-debug-command yes, three more for quorum mode).  Every worker
 * is reaped before its test case ends.
 *
 * Duration: NETMUTEX_CHAOS_SECONDS is the total time spent injecting faults,
 * shared by the families by weight (default 20, which keeps `make check`
 * at about a minute; CI's long phase sets 240): a robust family 2 (its
 * sigstop/waiter 4), a cached one 1 (2), a condition family 3, a
 * read-write lock family and a semaphore family 2, so with the default a robust family (and a
 * read-write lock family) injects for about 0.4 s, a cached one for about
 * 0.2 s and a condition family for about 0.6 s.  A family
 * always injects at least one fault, so under valgrind or TSan, whose
 * slowdown stretches every lease and wait, it takes longer but injects
 * fewer.
 *
 * Files: chaos_log.[ch] the shared memory; chaos_worker.[ch] the workers
 * (chaos_cond_worker.[ch] the condition families');
 * chaos_fault.[ch] the injectors; chaos_proxy.[ch] the blackholing proxy in
 * a process of its own; chaos_run.[ch] one family from start to verdict;
 * chaos_check.[ch] the checker (chaos_cond_check.[ch] the conditions');
 * chaos_selftest.[ch] and chaos_cond_selftest.c their tests;
 * chaos_rw_worker.[ch], chaos_rw_check.[ch] and chaos_rw_selftest.c the
 * read-write lock families'; chaos_sem_worker.[ch], chaos_sem_check.[ch]
 * and chaos_sem_selftest.c the semaphore families'; chaos_wutil.[ch] what
 * the last two families' workers share.
 */
#include "ac_config.h"

#include <stdio.h>
#include <stdlib.h>

#include "fixture.h"

#include "chaos_fault.h"
#include "chaos_run.h"
#include "chaos_selftest.h"

#define DEFAULT_SECONDS 20u
#define MAX_SECONDS (24u * 3600u)
#define COND_WEIGHT 3
#define RW_WEIGHT 2
#define SEM_WEIGHT 2
#define SEM_FAMILY(name_, inject_, gap_)                                                       \
    { .name = (name_), .inject = (inject_), .gap_ms = (gap_), .mode = CHAOS_SINGLE,            \
      .weight = SEM_WEIGHT }

/* Weights: a robust family 2, its cached sibling 1 (half the time: the
 * same faults, on the code the two share, plus the cache's own paths); a
 * condition family 3, so that the long run's condition families send
 * well over 100,000 signals. */
static const ChaosFamily families[] = {
    { "baseline", NULL, 100, CHAOS_SINGLE, true, 2, false, false, false, false },
    { "sigstop/holder", chaos_inject_stop_holder, 300, CHAOS_SINGLE, false, 2, false, false,
      false, false },
    /* Twice the time: its fault strikes only if the stopped waiter is
     * granted the lock while it sleeps, and takes two leases. */
    { "sigstop/waiter", chaos_inject_stop_waiter, 300, CHAOS_SINGLE, false, 4, false, false,
      false, false },
    { "kill/holder", chaos_inject_kill_holder, 800, CHAOS_SINGLE, true, 2, false,
      false, false, false },
    { "kill/waiter", chaos_inject_kill_waiter, 300, CHAOS_SINGLE, true, 2, false,
      false, false, false },
    { "client-kill/normal", chaos_inject_client_kill_normal, 150, CHAOS_SINGLE, false,
      2, false, false, false, false },
    { "client-kill/blocked", chaos_inject_client_kill_blocked, 150, CHAOS_SINGLE, false, 2,
      false, false, false, false },
    { "debug-sleep", chaos_inject_debug_sleep, 300, CHAOS_SINGLE, false, 2, false,
      false, false, false },
    { "restart-empty", chaos_inject_restart_empty, 400, CHAOS_SINGLE, false, 2, false, false,
      false, false },
    { "blackhole", chaos_inject_blackhole, 400, CHAOS_PROXY, false, 2, false, false, false, false },
    { "forged-grant", chaos_inject_forged_grant, 20, CHAOS_SINGLE, false, 2, false,
      false, false, false },
    { "quorum/minority-down", chaos_inject_quorum_minority, 300, CHAOS_QUORUM, false,
      2, false, false, false, false },
    { "quorum/majority-down", chaos_inject_quorum_majority, 300, CHAOS_QUORUM, false,
      2, false, false, false, false },
    { "cached/baseline", NULL, 100, CHAOS_SINGLE, true, 1, true, false, false, false },
    { "cached/sigstop/holder", chaos_inject_stop_holder, 300, CHAOS_SINGLE, false, 1, true,
      false, false, false },
    { "cached/sigstop/waiter", chaos_inject_stop_waiter, 300, CHAOS_SINGLE, false, 2, true,
      false, false, false },
    { "cached/kill/holder", chaos_inject_kill_holder, 800, CHAOS_SINGLE, true, 1, true, false,
      false, false },
    { "cached/kill/waiter", chaos_inject_kill_waiter, 300, CHAOS_SINGLE, true, 1, true, false,
      false, false },
    { "cached/client-kill/normal", chaos_inject_client_kill_normal, 150, CHAOS_SINGLE, false, 1,
      true, false, false, false },
    /* Twice its share: a cached lease is often passed on without anybody
     * blocked, and its fault needs a waiter blocked at the moment it
     * strikes (under TSan, 10 s found none once). */
    { "cached/client-kill/blocked", chaos_inject_client_kill_blocked, 150, CHAOS_SINGLE, false,
      2, true, false, false, false },
    { "cached/debug-sleep", chaos_inject_debug_sleep, 300, CHAOS_SINGLE, false, 1, true, false,
      false, false },
    { "cached/restart-empty", chaos_inject_restart_empty, 400, CHAOS_SINGLE, false,
      1, true, false, false, false },
    { "cached/blackhole", chaos_inject_blackhole, 400, CHAOS_PROXY, false, 1, true,
      false, false, false },
    { "cached/forged-grant", chaos_inject_forged_grant, 20, CHAOS_SINGLE, false, 1, true, false,
      false, false },
    /* Condition families: turns passed round rings through netmutex_cond_t
     * (chaos_cond_worker.c), judged for lost wake-ups too. */
    { "cond/baseline", NULL, 100, CHAOS_SINGLE, false, COND_WEIGHT, false, true, false, false },
    { "cond/sigstop/waiter", chaos_inject_stop_cond_waiter, 300, CHAOS_SINGLE, false,
      COND_WEIGHT, false, true, false, false },
    { "cond/sigstop/signaller", chaos_inject_stop_holder, 300, CHAOS_SINGLE, false,
      COND_WEIGHT, false, true, false, false },
    { "cond/kill/waiter", chaos_inject_kill_cond_waiter, 300, CHAOS_SINGLE, false,
      COND_WEIGHT, false, true, false, false },
    { "cond/kill/signaller", chaos_inject_kill_holder, 800, CHAOS_SINGLE, false, COND_WEIGHT,
      false, true, false, false },
    { "cond/client-kill/normal", chaos_inject_client_kill_normal, 150, CHAOS_SINGLE, false,
      COND_WEIGHT, false, true, false, false },
    { "cond/client-kill/blocked", chaos_inject_client_kill_blocked, 150, CHAOS_SINGLE, false,
      COND_WEIGHT, false, true, false, false },
    { "cond/debug-sleep", chaos_inject_debug_sleep, 300, CHAOS_SINGLE, false, COND_WEIGHT,
      false, true, false, false },
    { "cond/restart-empty", chaos_inject_restart_empty, 400, CHAOS_SINGLE, false, COND_WEIGHT,
      false, true, false, false },
    { "cond/blackhole", chaos_inject_blackhole, 400, CHAOS_PROXY, false, COND_WEIGHT, false,
      true, false, false },
    { "cond/forged-wakeup", chaos_inject_forged_wakeup, 20, CHAOS_SINGLE, false, COND_WEIGHT,
      false, true, false, false },
    /* Read-write lock families: one netmutex_rwlock_t read and written
     * (chaos_rw_worker.c), judged by chaos_rw_check.h; the weight of a
     * robust family. */
    { "rwlock/baseline", NULL, 100, CHAOS_SINGLE, false, RW_WEIGHT, false, false, true, false },
    { "rwlock/sigstop/holder", chaos_inject_stop_holder, 300, CHAOS_SINGLE, false, RW_WEIGHT,
      false, false, true, false },
    { "rwlock/sigstop/waiter", chaos_inject_stop_waiter, 300, CHAOS_SINGLE, false, RW_WEIGHT,
      false, false, true, false },
    { "rwlock/kill/holder", chaos_inject_kill_holder, 800, CHAOS_SINGLE, false, RW_WEIGHT,
      false, false, true, false },
    { "rwlock/kill/waiter", chaos_inject_kill_waiter, 300, CHAOS_SINGLE, false, RW_WEIGHT,
      false, false, true, false },
    { "rwlock/client-kill/normal", chaos_inject_client_kill_normal, 150, CHAOS_SINGLE, false,
      RW_WEIGHT, false, false, true, false },
    { "rwlock/client-kill/blocked", chaos_inject_client_kill_blocked, 150, CHAOS_SINGLE, false,
      RW_WEIGHT, false, false, true, false },
    { "rwlock/debug-sleep", chaos_inject_debug_sleep, 300, CHAOS_SINGLE, false, RW_WEIGHT,
      false, false, true, false },
    { "rwlock/restart-empty", chaos_inject_restart_empty, 400, CHAOS_SINGLE, false, RW_WEIGHT,
      false, false, true, false },
    { "rwlock/blackhole", chaos_inject_blackhole, 400, CHAOS_PROXY, false, RW_WEIGHT, false,
      false, true, false },
    { "rwlock/forged-grant", chaos_inject_forged_rw_grant, 20, CHAOS_SINGLE, false, RW_WEIGHT,
      false, false, true, false },
    /* Deadlock detection on (NETMUTEX_DEADLOCK=detect): the faults that
     * make waits long enough to be published, and their edges go stale
     * (a stopped or killed holder, connections cut under waiters). */
    { "detect/sigstop/holder", chaos_inject_stop_holder, 300, CHAOS_SINGLE, false, 2, false,
      false, false, true },
    { "detect/kill/holder", chaos_inject_kill_holder, 800, CHAOS_SINGLE, true, 2, false, false,
      false, true },
    { "detect/client-kill/blocked", chaos_inject_client_kill_blocked, 150, CHAOS_SINGLE, false,
      2, false, false, false, true },
    { "detect/cond/kill/signaller", chaos_inject_kill_holder, 800, CHAOS_SINGLE, false,
      COND_WEIGHT, false, true, false, true },
    { "detect/rwlock/sigstop/holder", chaos_inject_stop_holder, 300, CHAOS_SINGLE, false,
      RW_WEIGHT, false, false, true, true },
    { "detect/rwlock/kill/holder", chaos_inject_kill_holder, 800, CHAOS_SINGLE, false,
      RW_WEIGHT, false, false, true, true },
};

/* Semaphore families: permits of one netmutex_sem_t taken and posted
 * (chaos_sem_worker.c), judged by chaos_sem_check.h; the weight of a
 * read-write lock family. */
static const ChaosFamily sem_families[] = {
    SEM_FAMILY("sem/baseline", NULL, 100),
    SEM_FAMILY("sem/sigstop/holder", chaos_inject_stop_holder, 300),
    SEM_FAMILY("sem/kill/holder", chaos_inject_kill_holder, 800),
    SEM_FAMILY("sem/kill/waiter", chaos_inject_kill_waiter, 300),
    SEM_FAMILY("sem/client-kill/normal", chaos_inject_client_kill_normal, 150),
    SEM_FAMILY("sem/client-kill/blocked", chaos_inject_client_kill_blocked, 150),
    SEM_FAMILY("sem/restart-empty", chaos_inject_restart_empty, 400),
};

static ChaosEnv env;

static unsigned int total_weight(void)
{
    unsigned int w = 0;

    for (gsize i = 0; i < G_N_ELEMENTS(families); i++)
        w += families[i].weight ? families[i].weight : 1;
    for (gsize i = 0; i < G_N_ELEMENTS(sem_families); i++)
        w += sem_families[i].weight;
    return w;
}

/* The condition families together: the long run's count of signals. */
static void print_cond_totals(void)
{
    const ChaosCondTotals *t = &chaos_cond_totals;

    if (t->families == 0)
        return;
    printf("# chaos condition families: %u run, %zu signals + %zu broadcasts (%zu found a "
           "waiter), %zu waits: %zu woken, %zu timed out (%zu judged); %zu lost wake-ups; "
           "%zu faults\n",
           t->families, t->signals, t->broadcasts, t->to_waiters, t->waits, t->wakes,
           t->timeouts, t->timeouts_judged, t->lost, t->faults);
}

/* The read-write lock families together. */
static void print_rw_totals(void)
{
    const ChaosRwTotals *t = &chaos_rw_totals;

    if (t->families == 0)
        return;
    printf("# chaos read-write lock families: %u run, %zu read calls (%zu holds, %zu valid, "
           "%zu began while another read held), %zu write calls (%zu holds, %zu valid), "
           "%zu lost holds; %zu faults\n",
           t->families, t->reads, t->read_holds, t->read_valid, t->shared, t->writes,
           t->write_holds, t->write_valid, t->lost, t->faults);
}

/* The semaphore families together. */
static void print_sem_totals(void)
{
    const ChaosSemTotals *t = &chaos_sem_totals;

    if (t->families == 0)
        return;
    printf("# chaos semaphore families: %u run, %zu wait calls, %zu permits taken (%zu valid), "
           "at most %zu of %u valid holders at once%s, %zu holds began with all held, %zu lost "
           "holds; %zu faults\n",
           t->families, t->calls, t->holds, t->valid, t->max_holders, CHAOS_SEM_PERMITS,
           t->max_holders > CHAOS_SEM_PERMITS ? " (the excess only across empty restarts: "
                                                "the documented limit)" : "",
           t->full,
           t->lost, t->faults);
}

static void run_family(gconstpointer data)
{
    chaos_run_family(data, &env);
}

static void run_sem_family(gconstpointer data)
{
    chaos_run_sem_family(data, &env);
}

/* Read before nm_test_init, which clears NETMUTEX_* from the environment
 * (only NETMUTEX_TEST_* survive) so that the library sees none of it. */
static unsigned int chaos_seconds(void)
{
    const char *s = getenv("NETMUTEX_CHAOS_SECONDS");
    char *end = NULL;
    unsigned long v;

    if (!s || !*s)
        return DEFAULT_SECONDS;
    v = strtoul(s, &end, 10);
    /* A bad value must not quietly become the short run. */
    if (*end != '\0' || v == 0 || v > MAX_SECONDS) {
        fprintf(stderr, "NETMUTEX_CHAOS_SECONDS=%s: expected 1 to %u\n", s, MAX_SECONDS);
        exit(2);
    }
    return (unsigned int)v;
}

int main(int argc, char **argv)
{
    unsigned int seconds = chaos_seconds();
    const NmRedisOpts opts = { .debug_command = true };
    int rc;

    nm_test_init(&argc, &argv);
    /* No family runs longer than all of the fault time. */
    nm_test_case_allow(seconds);
    chaos_selftest_register();
    chaos_cond_selftest_register();
    chaos_rw_selftest_register();
    chaos_sem_selftest_register();
    for (gsize i = 0; i < G_N_ELEMENTS(families); i++) {
        char *path = g_strdup_printf("/chaos/%s", families[i].name);
        g_test_add_data_func(path, &families[i], run_family);
        g_free(path);
    }
    for (gsize i = 0; i < G_N_ELEMENTS(sem_families); i++) {
        char *path = g_strdup_printf("/chaos/%s", sem_families[i].name);
        g_test_add_data_func(path, &sem_families[i], run_sem_family);
        g_free(path);
    }
    env.family_ms = seconds * 1000u / total_weight();
    env.redis = nm_redis_start(&opts);
    g_test_message("chaos: %u s of faults, %u ms per family (and weight), slowdown %.0f",
                   seconds, env.family_ms, nm_slowdown());
    rc = nm_test_finish(g_test_run());
    print_cond_totals();
    print_rw_totals();
    print_sem_totals();
    nm_redis_free(env.redis);
    return rc;
}
