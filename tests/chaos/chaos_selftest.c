/*
 * chaos_selftest.c -- the checker (chaos_check.c) on hand-made logs, so
 * that a checker which cannot fail is caught before any fault is injected.
 * Each case builds a few records as the workers would have logged them and
 * asserts what the checker must say: the violations it MUST flag
 * (overlapping holds, a smaller fence after a larger one from another
 * process, a spurious or a missed EOWNERDEAD, a lost update, a bound
 * overrun, a hang, an idle lock), and the cases it must let pass (a cohort
 * hand-off sharing a fence, a lost lease ending an interval, an ambiguous
 * unlock, an overlap across an empty restart: a documented limit), and
 * for a mutex that is not robust (the cached families): any EOWNERDEAD
 * flagged, none expected, relocks from the cache counted.
 */
#include "ac_config.h"

#include <errno.h>
#include <string.h>

#include <glib.h>

#include "chaos_check.h"
#include "chaos_run.h"
#include "chaos_selftest.h"

#define MS 1000000LL
#define T0 (1000 * MS) /* no time may be 0: 0 means "not happened" */

static int64_t at_ms(double ms)
{
    return T0 + (int64_t)(ms * MS);
}

/* A lock() hold by PID/THREAD valid from FROM to TO ms, unlocked (rc 0)
 * at TO, with FENCE. */
static ChaosRec hold(int pid, int thread, double from, double to, uint64_t fence)
{
    ChaosRec r;

    memset(&r, 0, sizeof r);
    r.pid = pid;
    r.thread = thread;
    r.op = 'l';
    r.rc = 0;
    r.call_ns = at_ms(from - 1);
    r.ret_ns = at_ms(from);
    r.fence = fence;
    r.accepted = 1;
    r.promise_ns = at_ms(to + 100);
    r.unlock_ns = at_ms(to);
    r.unlock_end_ns = at_ms(to + 0.1);
    r.unlock_rc = 0;
    return r;
}

static const ChaosParams params = {
    .try_bound_ns = 1000 * MS,
    .unlock_bound_ns = 1000 * MS,
    .timed_slack_ns = 1000 * MS,
    .early_ns = 2 * MS,
    .idle_bound_ns = 450 * MS,
    .keep_ns = 600 * MS,
};

/* Runs the checker; the caller frees the report with chaos_report_clear. */
static ChaosReport check(const ChaosRec *recs, size_t n, const ChaosFault *faults,
                         size_t nfaults)
{
    ChaosReport rep;

    memset(&rep, 0, sizeof rep);
    chaos_check(recs, n, faults, nfaults, &params, &rep);
    return rep;
}

/* Asserts exactly WANT failures of KIND and none of any other kind. */
static void expect_only(const ChaosRec *recs, size_t n, const ChaosFault *faults,
                        size_t nfaults, int kind, size_t want)
{
    ChaosReport rep = check(recs, n, faults, nfaults);

    for (int k = 0; k < CV_NKINDS; k++)
        g_assert_cmpuint(rep.count[k], ==, k == kind ? want : 0);
    chaos_report_clear(&rep);
}

static void expect_clean(const ChaosRec *recs, size_t n, const ChaosFault *faults,
                         size_t nfaults)
{
    expect_only(recs, n, faults, nfaults, CV_OVERLAP, 0);
}

/* ---- cases ------------------------------------------------------------- */

static void test_clean_log_passes(void)
{
    ChaosRec r[] = {
        hold(1, 0, 0, 10, 1),
        hold(2, 0, 11, 20, 2),
        hold(1, 1, 21, 30, 3),
        hold(1, 2, 30.5, 40, 3), /* a cohort hand-off: same process, same fence */
    };

    expect_clean(r, G_N_ELEMENTS(r), NULL, 0);
}

static void test_overlap_flagged(void)
{
    ChaosRec r[] = { hold(1, 0, 0, 10, 1), hold(2, 0, 5, 15, 2) };

    expect_only(r, 2, NULL, 0, CV_OVERLAP, 1);
    /* Two threads of one process are excluded from each other too. */
    r[1].pid = 1;
    r[1].thread = 1;
    expect_only(r, 2, NULL, 0, CV_OVERLAP, 1);
}

static void test_interval_ends_at_first_notice(void)
{
    ChaosRec r[] = { hold(1, 0, 0, 10, 1), hold(2, 0, 5, 15, 2) };

    r[0].lost_ns = at_ms(4); /* the lease was lost before the other came */
    expect_clean(r, 2, NULL, 0);
    r[0].lost_ns = 0;
    r[0].promise_ns = at_ms(5); /* its promise ended just as the other began */
    expect_clean(r, 2, NULL, 0);
    r[0].promise_ns = 0; /* validity said ENOLCK at once: no promise at all */
    r[0].validity_rc = ENOLCK;
    expect_clean(r, 2, NULL, 0);
}

static void test_smaller_fence_flagged(void)
{
    ChaosRec r[] = { hold(1, 0, 0, 10, 5), hold(2, 0, 11, 20, 4) };

    expect_only(r, 2, NULL, 0, CV_FENCE_ORDER, 1);
}

static void test_equal_fence_other_process_flagged(void)
{
    ChaosRec r[] = { hold(1, 0, 0, 10, 5), hold(1, 1, 10.5, 20, 5), hold(2, 0, 21, 30, 5) };

    expect_only(r, 3, NULL, 0, CV_FENCE_ORDER, 1);
}

static void test_spurious_ownerdead_flagged(void)
{
    ChaosRec r[] = { hold(1, 0, 0, 10, 1), hold(2, 0, 11, 20, 2) };

    r[1].rc = EOWNERDEAD;
    expect_only(r, 2, NULL, 0, CV_SPURIOUS_OWNERDEAD, 1);
    /* Ambiguous: the previous unlock said the lease was lost. */
    r[0].unlock_rc = ENOLCK;
    expect_clean(r, 2, NULL, 0);
    /* Ambiguous: an acquisition in between that nobody logged. */
    r[0].unlock_rc = 0;
    r[1].fence = 3;
    expect_clean(r, 2, NULL, 0);
}

static ChaosRec killed_holding(int pid, double from, double killed_at, uint64_t fence)
{
    ChaosRec r = hold(pid, 0, from, killed_at, fence);

    r.unlock_ns = r.unlock_end_ns = 0;
    r.unlock_rc = CHAOS_PENDING;
    r.promise_ns = at_ms(from + 500);
    r.end = CHAOS_END_KILLED_HOLDING;
    r.end_ns = at_ms(killed_at);
    return r;
}

static void test_missed_ownerdead_flagged(void)
{
    ChaosRec r[] = { killed_holding(1, 0, 5, 1), hold(2, 0, 600, 610, 2) };

    expect_only(r, 2, NULL, 0, CV_MISSED_OWNERDEAD, 1);
    r[1].rc = EOWNERDEAD;
    expect_clean(r, 2, NULL, 0);
}

static void test_restart_overlap_is_documented_limit(void)
{
    ChaosRec r[] = { hold(1, 0, 0, 10, 1), hold(2, 0, 5, 15, 2) };
    ChaosFault f = { .kind = CHAOS_F_RESTART, .begin_ns = at_ms(2), .end_ns = at_ms(4) };
    ChaosReport rep = check(r, 2, &f, 1);

    g_assert_cmpuint(chaos_report_failures(&rep), ==, 0);
    g_assert_cmpuint(rep.limits[CV_OVERLAP], ==, 1);
    g_assert_cmpuint(rep.nv, ==, 1);
    g_assert_nonnull(strstr(rep.v[0].why, "documented limit: empty restart"));
    chaos_report_clear(&rep);
    /* Taken while the old server was shutting down: still the old data. */
    f.begin_ns = at_ms(-3);
    f.end_ns = at_ms(4);
    rep = check(r, 2, &f, 1);
    g_assert_cmpuint(chaos_report_failures(&rep), ==, 0);
    g_assert_cmpuint(rep.limits[CV_OVERLAP], ==, 1);
    chaos_report_clear(&rep);
    /* Both taken after the restart: no excuse. */
    f.begin_ns = at_ms(-5);
    f.end_ns = at_ms(-4);
    rep = check(r, 2, &f, 1);
    g_assert_cmpuint(rep.count[CV_OVERLAP], ==, 1);
    chaos_report_clear(&rep);
    /* A fence going backwards across the restart is no limit. */
    r[0].fence = 2;
    r[1].fence = 1;
    rep = check(r, 2, &f, 1);
    g_assert_cmpuint(rep.count[CV_FENCE_ORDER], ==, 1);
    chaos_report_clear(&rep);
}

static void rmw(ChaosRec *r, double read, double write, int64_t value)
{
    r->rmw_read_ns = at_ms(read);
    r->rmw_write_ns = at_ms(write);
    r->rmw_value = value;
    r->rmw_state = CHAOS_RMW_WRITTEN;
}

/* The driver's marking of a killed worker's records (chaos_run.c): a
 * condition wait that returned ETIMEDOUT holds the mutex again, so a kill
 * in its unlock is "killed in unlock"; a record taken but not yet
 * published when the kill came never started its call.  Unmarked, either
 * would read as a call that never returned. */
static void test_killed_records_marked(void)
{
    ChaosShared *log = chaos_log_new(4);
    int index;
    int32_t a, b;
    ChaosProc *p = chaos_proc_add(log, 2, &index);
    ChaosRec *w, *l;

    g_assert_nonnull(p);
    p->pid = 4242;
    w = chaos_log_add(log, p->pid, 0, &a);
    w->op = 'W';
    w->call_ns = at_ms(1);
    w->ret_ns = at_ms(200);
    w->rc = ETIMEDOUT;
    w->unlock_ns = at_ms(201);
    chaos_store(&p->rec[0], a);
    l = chaos_log_add(log, p->pid, 1, &b); /* taken, not yet published */
    l->op = 'l';
    chaos_run_mark_open(log, p, at_ms(202), false);
    g_assert_cmpint(w->end, ==, CHAOS_END_KILLED_UNLOCKING);
    g_assert_cmpint(l->end, ==, CHAOS_END_KILLED_LOCKING);
    g_assert_cmpint(l->end_ns, ==, at_ms(202));
    chaos_log_free(log);
}

static void test_lost_update_flagged(void)
{
    ChaosRec r[] = { hold(1, 0, 0, 10, 1), hold(2, 0, 5, 15, 2) };
    ChaosReport rep;

    rmw(&r[0], 2, 8, 7);
    rmw(&r[1], 6, 9, 7);
    rep = check(r, 2, NULL, 0);
    g_assert_cmpuint(rep.count[CV_LOST_UPDATE], ==, 1);
    g_assert_cmpuint(rep.count[CV_OVERLAP], ==, 1);
    chaos_report_clear(&rep);
    /* The first holder's promise ended before its write: a stale writer,
     * which is the fenced resource's business, not a violation. */
    r[0].promise_ns = at_ms(3);
    rep = check(r, 2, NULL, 0);
    g_assert_cmpuint(chaos_report_failures(&rep), ==, 0);
    g_assert_cmpuint(rep.stats.stale_lost_updates, ==, 1);
    chaos_report_clear(&rep);
}

static ChaosRec call(int pid, char op, int rc, double from, double to)
{
    ChaosRec r;

    memset(&r, 0, sizeof r);
    r.pid = pid;
    r.op = op;
    r.rc = rc;
    r.call_ns = at_ms(from);
    r.ret_ns = to > 0 ? at_ms(to) : 0;
    r.unlock_rc = CHAOS_PENDING;
    r.accepted = -1;
    return r;
}

static void test_bounds_flagged(void)
{
    ChaosRec r[] = { call(1, 't', EBUSY, 0, 2000) };
    ChaosFault stop = { .kind = CHAOS_F_STOP, .pid = 1, .begin_ns = at_ms(100),
                        .end_ns = at_ms(1500) };

    expect_only(r, 1, NULL, 0, CV_BOUND, 1);
    expect_clean(r, 1, &stop, 1); /* its process was stopped meanwhile */
    r[0] = call(1, 'T', ETIMEDOUT, 0, 2500);
    r[0].deadline_ns = at_ms(300);
    expect_only(r, 1, NULL, 0, CV_BOUND, 1);
    r[0].ret_ns = at_ms(200); /* ETIMEDOUT before the deadline */
    expect_only(r, 1, NULL, 0, CV_BOUND, 1);
    r[0] = hold(1, 0, 0, 10, 1);
    r[0].unlock_end_ns = at_ms(1500); /* unlock took 1.49 s */
    expect_only(r, 1, NULL, 0, CV_BOUND, 1);
}

static void test_hang_flagged(void)
{
    ChaosRec r[] = { call(1, 'l', CHAOS_PENDING, 0, 0) };

    expect_only(r, 1, NULL, 0, CV_HANG, 1);
    r[0].end = CHAOS_END_HUNG;
    expect_only(r, 1, NULL, 0, CV_HANG, 1);
    r[0].end = CHAOS_END_KILLED_LOCKING; /* killed by the driver: not a hang */
    expect_clean(r, 1, NULL, 0);
}

static void test_results_flagged(void)
{
    ChaosRec r[] = { hold(1, 0, 0, 10, 1) };

    r[0].unlock_rc = EPERM;
    expect_only(r, 1, NULL, 0, CV_RESULT, 1);
    r[0] = call(1, 'l', ETIMEDOUT, 0, 5); /* lock may not give up */
    expect_only(r, 1, NULL, 0, CV_RESULT, 1);
    r[0] = call(1, 't', EAGAIN, 0, 5);
    expect_clean(r, 1, NULL, 0);
}

static void test_idle_lock_flagged(void)
{
    /* Released at 10 ms; another process waited from 5 ms and got it only
     * at 800 ms. */
    ChaosRec r[] = { hold(1, 0, 0, 10, 1), hold(2, 0, 800, 810, 2), hold(3, 0, 900, 910, 3) };
    ChaosFault f = { .kind = CHAOS_F_KILL, .pid = 3, .begin_ns = at_ms(8),
                     .end_ns = at_ms(9) };

    r[1].call_ns = at_ms(5);
    expect_only(r, 2, NULL, 0, CV_IDLE, 1);
    /* A killed waiter is no excuse... */
    expect_only(r, 2, &f, 1, CV_IDLE, 1);
    /* ...a killed holder is: its lease keeps the lock... */
    f.flags = CHAOS_FF_HOLDER;
    expect_clean(r, 2, &f, 1);
    /* ...for a lease, not for ever. */
    r[1] = hold(2, 0, 2000, 2010, 2);
    r[1].call_ns = at_ms(5);
    expect_only(r, 2, &f, 1, CV_IDLE, 1);
    r[1] = hold(2, 0, 800, 810, 2);
    r[1].call_ns = at_ms(5);
    /* The waiter may itself die later: it still waited through the bound. */
    r[1] = call(2, 'l', CHAOS_PENDING, 5, 0);
    r[1].end = CHAOS_END_KILLED_LOCKING;
    r[1].end_ns = at_ms(600);
    expect_only(r, 3, NULL, 0, CV_IDLE, 1);
    /* Killed before the bound was up: it did not wait long enough. */
    r[1].end_ns = at_ms(100);
    expect_clean(r, 3, NULL, 0);
}

/* A plain (non-robust) mutex, as the cached families use: it must never
 * return EOWNERDEAD, and so is never expected to.  Otherwise as PARAMS. */
static ChaosParams plain_params(void)
{
    ChaosParams p = params;

    p.non_robust = true;
    return p;
}

static void expect_plain(const ChaosRec *recs, size_t n, const ChaosFault *faults,
                         size_t nfaults, int kind, size_t want)
{
    ChaosParams p = plain_params();
    ChaosReport rep;

    memset(&rep, 0, sizeof rep);
    chaos_check(recs, n, faults, nfaults, &p, &rep);
    for (int k = 0; k < CV_NKINDS; k++)
        g_assert_cmpuint(rep.count[k], ==, k == kind ? want : 0);
    chaos_report_clear(&rep);
}

static void test_non_robust_ownerdead_flagged(void)
{
    ChaosRec r[] = { killed_holding(1, 0, 5, 1), hold(2, 0, 600, 610, 2) };

    /* After a kill, as a robust mutex should (where it passes)... */
    r[1].rc = EOWNERDEAD;
    expect_clean(r, 2, NULL, 0);
    expect_plain(r, 2, NULL, 0, CV_RESULT, 1);
    /* ...and after a clean release, where a robust one is told too. */
    r[0] = hold(1, 0, 0, 10, 1);
    expect_only(r, 2, NULL, 0, CV_SPURIOUS_OWNERDEAD, 1);
    expect_plain(r, 2, NULL, 0, CV_RESULT, 1);
}

static void test_non_robust_no_ownerdead_passes(void)
{
    ChaosRec r[] = { killed_holding(1, 0, 5, 1), hold(2, 0, 600, 610, 2) };

    /* The missed-EOWNERDEAD case of a robust mutex is right for a plain
     * one: nothing to tell. */
    expect_only(r, 2, NULL, 0, CV_MISSED_OWNERDEAD, 1);
    expect_plain(r, 2, NULL, 0, CV_OVERLAP, 0);
    /* Everything else is still judged: an overlap... */
    r[1] = hold(2, 0, 4, 15, 2);
    expect_plain(r, 2, NULL, 0, CV_OVERLAP, 1);
    /* ...and a fence going backwards. */
    r[1] = hold(2, 0, 600, 610, 0);
    expect_plain(r, 2, NULL, 0, CV_FENCE_ORDER, 1);
}

/* The cached relocks the checker counts in a log it finds clean. */
static size_t cached_relocks(const ChaosRec *recs, size_t n)
{
    ChaosParams p = plain_params();
    ChaosReport rep;
    size_t got;

    memset(&rep, 0, sizeof rep);
    chaos_check(recs, n, NULL, 0, &p, &rep);
    g_assert_cmpuint(chaos_report_failures(&rep), ==, 0);
    got = rep.stats.cached_relocks;
    chaos_report_clear(&rep);
    return got;
}

/* Relocks from a lease kept cached share its fence in one process, as
 * cohort hand-offs do; they are counted, and another process with that
 * fence is still a violation. */
static void test_cached_relocks_counted(void)
{
    ChaosRec r[] = {
        hold(1, 0, 0, 10, 1),
        hold(1, 1, 20, 30, 1),    /* called at 19 ms, after the unlock: cached */
        hold(1, 2, 30.05, 40, 1), /* called at 29.05 ms, waiting: a hand-off */
        hold(2, 0, 50, 60, 2),
        /* Thread 2 was in timedlock during the first unlock, which may
         * have handed it the lease; it gave up, leaving the lease to the
         * next local caller with no cache at all. */
        call(1, 'T', ETIMEDOUT, 5, 12),
    };

    r[4].thread = 2;
    r[4].deadline_ns = at_ms(12);
    g_assert_cmpuint(cached_relocks(r, 4), ==, 1);
    g_assert_cmpuint(cached_relocks(r, 5), ==, 0);
    r[3].fence = 1;
    expect_plain(r, 4, NULL, 0, CV_FENCE_ORDER, 1);
}

/* A lease kept cached by one process while another waits is an idle lock
 * when the revocation does not come. */
static void test_cached_idle_flagged(void)
{
    ChaosRec r[] = { hold(1, 0, 0, 10, 1), hold(2, 0, 800, 810, 2) };

    r[1].call_ns = at_ms(5);
    expect_plain(r, 2, NULL, 0, CV_IDLE, 1);
    r[1] = hold(2, 0, 300, 310, 2); /* given back in time */
    r[1].call_ns = at_ms(5);
    expect_plain(r, 2, NULL, 0, CV_IDLE, 0);
}

void chaos_selftest_register(void)
{
    g_test_add_func("/chaos/checker/clean-log-passes", test_clean_log_passes);
    g_test_add_func("/chaos/checker/overlap-flagged", test_overlap_flagged);
    g_test_add_func("/chaos/checker/interval-ends-at-first-notice",
                    test_interval_ends_at_first_notice);
    g_test_add_func("/chaos/checker/smaller-fence-flagged", test_smaller_fence_flagged);
    g_test_add_func("/chaos/checker/equal-fence-other-process-flagged",
                    test_equal_fence_other_process_flagged);
    g_test_add_func("/chaos/checker/spurious-ownerdead-flagged", test_spurious_ownerdead_flagged);
    g_test_add_func("/chaos/checker/missed-ownerdead-flagged", test_missed_ownerdead_flagged);
    g_test_add_func("/chaos/checker/restart-overlap-is-documented-limit",
                    test_restart_overlap_is_documented_limit);
    g_test_add_func("/chaos/checker/lost-update-flagged", test_lost_update_flagged);
    g_test_add_func("/chaos/checker/killed-records-marked", test_killed_records_marked);
    g_test_add_func("/chaos/checker/bounds-flagged", test_bounds_flagged);
    g_test_add_func("/chaos/checker/hang-flagged", test_hang_flagged);
    g_test_add_func("/chaos/checker/results-flagged", test_results_flagged);
    g_test_add_func("/chaos/checker/idle-lock-flagged", test_idle_lock_flagged);
    g_test_add_func("/chaos/checker/non-robust-ownerdead-flagged",
                    test_non_robust_ownerdead_flagged);
    g_test_add_func("/chaos/checker/non-robust-no-ownerdead-passes",
                    test_non_robust_no_ownerdead_passes);
    g_test_add_func("/chaos/checker/cached-relocks-counted", test_cached_relocks_counted);
    g_test_add_func("/chaos/checker/cached-idle-flagged", test_cached_idle_flagged);
}
