/*
 * chaos_cond_selftest.c -- the condition families' checker
 * (chaos_cond_check.c, with chaos_check.c over the same records, as the
 * suite runs them) on hand-made logs of one ring: it must flag a lost
 * wake-up (a signal, or a broadcast, that woke nobody while a registered
 * waiter waited until its deadline), a wait that returned without the
 * mutex held, a timed wait that returned early or late, and let pass what
 * the definitions excuse: the signal woke another waiter, the waiter was
 * stopped, was not registered before the signaller's hold, or its
 * deadline came before the signal returned, a fault that may delay a
 * signal by a lease, an empty restart (a documented limit).
 */
#include "ac_config.h"

#include <errno.h>
#include <string.h>

#include <glib.h>

#include "chaos_check.h"
#include "chaos_cond_check.h"
#include "chaos_selftest.h"

#define MS 1000000LL
#define T0 (1000 * MS) /* no time may be 0: 0 means "not happened" */
#define LEASE_MS 600

static int64_t at_ms(double ms)
{
    return T0 + (int64_t)(ms * MS);
}

static const ChaosParams params = {
    .try_bound_ns = 1000 * MS,
    .unlock_bound_ns = 1000 * MS,
    .timed_slack_ns = 250 * MS,
    .early_ns = 2 * MS,
    .keep_ns = LEASE_MS * MS,
    .non_robust = true,
    .lease_ns = LEASE_MS * MS,
    .relock_bound_ns = 450 * MS,
    .redeliver_ns = 250 * MS,
};

/* A ring's log under construction. */
typedef struct Log {
    ChaosRec r[16];
    size_t n;
} Log;

static ChaosRec *add(Log *l, int pid, int op)
{
    ChaosRec *r = &l->r[l->n++];

    g_assert_cmpuint(l->n, <=, G_N_ELEMENTS(l->r));
    memset(r, 0, sizeof *r);
    r->pid = pid;
    r->op = op;
    r->accepted = -1;
    r->prev = r->next = -1;
    r->cond_rc = CHAOS_PENDING;
    r->unlock_rc = CHAOS_PENDING;
    return r;
}

/* The segment R holds from FROM ms, with a promise of a lease (check()
 * gives the fences). */
static void held(ChaosRec *r, double from)
{
    r->ret_ns = at_ms(from);
    r->promise_ns = at_ms(from + LEASE_MS);
}

/* Segment I ends at TO ms: by its unlock. */
static void unlock_at(Log *l, size_t i, double to)
{
    l->r[i].unlock_ns = at_ms(to);
    l->r[i].unlock_end_ns = at_ms(to + 0.1);
    l->r[i].unlock_rc = 0;
}

/* PID's lock call returns at FROM ms: the segment's index. */
static size_t lock_at(Log *l, int pid, double from)
{
    ChaosRec *r = add(l, pid, 'l');

    r->call_ns = at_ms(from - 0.5);
    r->rc = 0;
    held(r, from);
    return l->n - 1;
}

/* Segment PREV ends with a wait called at CALL ms that returns RC at RET
 * ms (RET 0: never), timed with DEADLINE ms (0: untimed): the wait's
 * index (the segment after it, when it holds). */
static size_t wait_at(Log *l, size_t prev, double call, double deadline, double ret, int rc)
{
    ChaosRec *p = &l->r[prev], *w = add(l, p->pid, deadline > 0 ? 'W' : 'w');

    p = &l->r[prev];
    w->prev = (int32_t)prev;
    p->next = (int32_t)(l->n - 1);
    p->unlock_ns = p->unlock_end_ns = at_ms(call);
    p->unlock_rc = 0;
    w->call_ns = at_ms(call);
    w->deadline_ns = deadline > 0 ? at_ms(deadline) : 0;
    w->rc = ret > 0 ? rc : CHAOS_PENDING;
    if (ret > 0)
        held(w, ret);
    return l->n - 1;
}

/* Segment I signals (OP 's') or broadcasts ('b') at AT ms. */
static void signal_at(Log *l, size_t i, int op, double at)
{
    l->r[i].cond_op = op;
    l->r[i].cond_ns = at_ms(at);
    l->r[i].cond_end_ns = at_ms(at + 0.3);
    l->r[i].cond_rc = 0;
}

/* Fences rise with the holds' starts, as the server gives them (the
 * cases below move holds around). */
static void refence(Log *l)
{
    for (size_t i = 0; i < l->n; i++) {
        l->r[i].fence = 1;
        for (size_t j = 0; j < l->n; j++)
            l->r[i].fence += l->r[j].ret_ns < l->r[i].ret_ns;
    }
}

static ChaosReport check(const Log *l, const ChaosFault *faults, size_t nfaults)
{
    Log copy = *l;
    ChaosReport rep;

    refence(&copy);
    memset(&rep, 0, sizeof rep);
    chaos_check(copy.r, copy.n, faults, nfaults, &params, &rep);
    chaos_cond_check(copy.r, copy.n, faults, nfaults, &params, &rep);
    return rep;
}

/* Asserts exactly WANT failures of KIND and none of any other kind. */
static void expect_only(const Log *l, const ChaosFault *faults, size_t nfaults, int kind,
                        size_t want)
{
    ChaosReport rep = check(l, faults, nfaults);

    for (int k = 0; k < CV_NKINDS; k++)
        g_assert_cmpuint(rep.count[k], ==, k == kind ? want : 0);
    chaos_report_clear(&rep);
}

static void expect_clean(const Log *l, const ChaosFault *faults, size_t nfaults)
{
    expect_only(l, faults, nfaults, CV_LOST_WAKEUP, 0);
}

/* ---- the logs ------------------------------------------------------------ */

/* Process 1 waits from 10 ms (deadline 200 ms); process 2 locks at 12 ms
 * and signals at 13 ms.  WOKEN: the wait returns 0 at 15 ms, else it
 * times out at 200 ms.  Indices: 0 the waiter's lock, 1 its wait, 2 the
 * signaller's hold. */
static void one_waiter(Log *l, bool woken)
{
    size_t a, w, b;

    memset(l, 0, sizeof *l);
    a = lock_at(l, 1, 0);
    w = wait_at(l, a, 10, 200, woken ? 15 : 200.5, woken ? 0 : ETIMEDOUT);
    b = lock_at(l, 2, 12);
    signal_at(l, b, 's', 13);
    unlock_at(l, b, 14);
    unlock_at(l, w, woken ? 16 : 201);
    g_assert_cmpuint(w, ==, 1);
    g_assert_cmpuint(b, ==, 2);
}

static void test_woken_passes(void)
{
    Log l;
    ChaosReport rep;

    one_waiter(&l, true);
    rep = check(&l, NULL, 0);
    g_assert_cmpuint(chaos_report_failures(&rep), ==, 0);
    g_assert_cmpuint(rep.stats.signals, ==, 1);
    g_assert_cmpuint(rep.stats.to_waiters, ==, 1);
    g_assert_cmpuint(rep.stats.wakes, ==, 1);
    chaos_report_clear(&rep);
}

static void test_lost_wakeup_flagged(void)
{
    Log l;
    ChaosReport rep;

    one_waiter(&l, false);
    rep = check(&l, NULL, 0);
    g_assert_cmpuint(rep.count[CV_LOST_WAKEUP], ==, 1);
    g_assert_cmpuint(chaos_report_failures(&rep), ==, 1);
    g_assert_cmpint(rep.v[0].a, ==, 2); /* the signal */
    g_assert_cmpint(rep.v[0].b, ==, 1); /* the waiter */
    chaos_report_clear(&rep);
    /* A broadcast that wakes nobody is lost just the same. */
    l.r[2].cond_op = 'b';
    expect_only(&l, NULL, 0, CV_LOST_WAKEUP, 1);
    /* A signal that failed (unreachable) promised nothing. */
    l.r[2].cond_op = 's';
    l.r[2].cond_rc = EAGAIN;
    expect_clean(&l, NULL, 0);
}

/* Not waiting at the signal, in each way the definition says. */
static void test_not_waiting_passes(void)
{
    Log l;

    /* The signaller's hold began before the wait was called. */
    one_waiter(&l, false);
    l.r[0].ret_ns = at_ms(15);
    l.r[0].promise_ns = at_ms(600);
    l.r[0].call_ns = at_ms(14.5);
    l.r[1].call_ns = l.r[0].unlock_ns = l.r[0].unlock_end_ns = at_ms(20);
    expect_clean(&l, NULL, 0);
    /* The waiter did not hold the mutex when it waited (its lease had
     * been declared lost): it may not have registered before. */
    one_waiter(&l, false);
    l.r[0].lost_ns = at_ms(5);
    expect_clean(&l, NULL, 0);
    /* The signal returned after the waiter's deadline. */
    one_waiter(&l, false);
    l.r[1].deadline_ns = at_ms(13.1);
    l.r[1].ret_ns = at_ms(14.5);
    l.r[1].promise_ns = at_ms(614.5);
    l.r[1].unlock_ns = at_ms(18);
    l.r[1].unlock_end_ns = at_ms(18.1);
    expect_clean(&l, NULL, 0);
    /* The signaller's lease was no longer promised when it signalled. */
    one_waiter(&l, false);
    l.r[2].promise_ns = at_ms(12.5);
    expect_clean(&l, NULL, 0);
}

/* A second waiter, registered before the signaller's hold, woke after the
 * signal: the signal may have been its. */
static void test_other_waiter_woken_passes(void)
{
    Log l;
    size_t c, w2;

    one_waiter(&l, false);
    c = lock_at(&l, 3, 10.2); /* between the first wait's call and the signaller */
    w2 = wait_at(&l, c, 10.8, 300, 20, 0);
    unlock_at(&l, w2, 21);
    expect_clean(&l, NULL, 0);
    /* Two signals, one waiter woken: the other signal was lost. */
    signal_at(&l, 2, 's', 13);
    {
        size_t d = lock_at(&l, 4, 30);
        signal_at(&l, d, 's', 31);
        unlock_at(&l, d, 32);
    }
    expect_only(&l, NULL, 0, CV_LOST_WAKEUP, 1);
    /* Had the second waiter registered after the signaller's hold began,
     * it could not have been the first signal's. */
    one_waiter(&l, false);
    c = lock_at(&l, 3, 14.2);
    w2 = wait_at(&l, c, 14.8, 300, 20, 0);
    unlock_at(&l, w2, 21);
    expect_only(&l, NULL, 0, CV_LOST_WAKEUP, 1);
}

/* A waiter killed while it waited may have consumed the signal. */
static void test_killed_waiter_absorbs(void)
{
    Log l;
    size_t c, w2;

    one_waiter(&l, false);
    c = lock_at(&l, 3, 10.2);
    w2 = wait_at(&l, c, 10.8, 300, 0, 0);
    l.r[w2].end = CHAOS_END_KILLED_WAITING;
    l.r[w2].end_ns = at_ms(50);
    expect_clean(&l, NULL, 0);
    /* Killed before the signal: it cannot have. */
    l.r[w2].end_ns = at_ms(12.5);
    expect_only(&l, NULL, 0, CV_LOST_WAKEUP, 1);
}

static void test_faults_excuse(void)
{
    Log l;
    ChaosFault f;
    ChaosReport rep;

    one_waiter(&l, false);
    /* The waiter's own process was stopped: not live. */
    f = (ChaosFault){ .kind = CHAOS_F_STOP, .pid = 1, .begin_ns = at_ms(50),
                      .end_ns = at_ms(100) };
    expect_clean(&l, &f, 1);
    /* Another process stopped within a lease of the deadline: the signal
     * may have chosen one of its waiters... */
    f.pid = 3;
    rep = check(&l, &f, 1);
    g_assert_cmpuint(chaos_report_failures(&rep), ==, 0);
    g_assert_cmpuint(rep.stats.timeouts_excused, ==, 1);
    chaos_report_clear(&rep);
    /* ...not when the deadline came more than a lease after it. */
    f.begin_ns = at_ms(200 - LEASE_MS - 300);
    f.end_ns = at_ms(200 - LEASE_MS - 250);
    expect_only(&l, &f, 1, CV_LOST_WAKEUP, 1);
    /* The server asleep: within two leases after it. */
    f = (ChaosFault){ .kind = CHAOS_F_DEBUG_SLEEP, .begin_ns = at_ms(-900),
                      .end_ns = at_ms(-300) };
    expect_clean(&l, &f, 1);
    f.begin_ns = at_ms(-2000);
    f.end_ns = at_ms(-1500);
    expect_only(&l, &f, 1, CV_LOST_WAKEUP, 1);
    /* A CLIENT KILL excuses nothing: the waiter dials again. */
    f = (ChaosFault){ .kind = CHAOS_F_CLIENT_KILL, .begin_ns = at_ms(12),
                      .end_ns = at_ms(12.1) };
    expect_only(&l, &f, 1, CV_LOST_WAKEUP, 1);
}

static void test_restart_is_documented_limit(void)
{
    Log l;
    ChaosFault f = { .kind = CHAOS_F_RESTART, .begin_ns = at_ms(11), .end_ns = at_ms(11.5) };
    ChaosReport rep;

    one_waiter(&l, false);
    rep = check(&l, &f, 1);
    g_assert_cmpuint(chaos_report_failures(&rep), ==, 0);
    g_assert_cmpuint(rep.limits[CV_LOST_WAKEUP], ==, 1);
    g_assert_nonnull(strstr(rep.v[0].why, "documented limit: empty restart"));
    chaos_report_clear(&rep);
}

static void test_unheld_flagged(void)
{
    Log l;

    one_waiter(&l, true);
    /* The wait said 0, and the caller did not hold the mutex after it. */
    l.r[1].fence_rc = EPERM;
    expect_only(&l, NULL, 0, CV_UNHELD, 1);
    l.r[1].fence_rc = 0;
    l.r[1].validity_rc = EPERM;
    l.r[1].promise_ns = 0;
    expect_only(&l, NULL, 0, CV_UNHELD, 1);
    l.r[1].validity_rc = 0;
    l.r[1].promise_ns = at_ms(615);
    l.r[1].unlock_rc = EPERM;
    expect_only(&l, NULL, 0, CV_UNHELD, 1);
    /* The next wait refused: the one before returned unheld. */
    one_waiter(&l, true);
    wait_at(&l, 1, 15.5, 0, 15.6, EPERM);
    expect_only(&l, NULL, 0, CV_UNHELD, 1);
}

static void test_wait_bounds_flagged(void)
{
    Log l;
    size_t c;

    /* Woken at its deadline, ETIMEDOUT well before it. */
    one_waiter(&l, true);
    l.r[1].rc = ETIMEDOUT;
    l.r[1].deadline_ns = at_ms(100);
    l.r[2].cond_op = 0;
    expect_only(&l, NULL, 0, CV_BOUND, 1);
    /* Back 500 ms after its deadline with the mutex free all along. */
    one_waiter(&l, false);
    l.r[2].cond_op = 0;
    l.r[1].ret_ns = at_ms(700);
    l.r[1].promise_ns = at_ms(1300);
    l.r[1].unlock_ns = at_ms(701);
    l.r[1].unlock_end_ns = at_ms(701.1);
    expect_only(&l, NULL, 0, CV_BOUND, 1);
    /* Held by another until 590 ms: taken within the bound after. */
    c = lock_at(&l, 3, 300);
    unlock_at(&l, c, 590);
    expect_clean(&l, NULL, 0);
}

void chaos_cond_selftest_register(void)
{
    g_test_add_func("/chaos/checker/cond/woken-passes", test_woken_passes);
    g_test_add_func("/chaos/checker/cond/lost-wakeup-flagged", test_lost_wakeup_flagged);
    g_test_add_func("/chaos/checker/cond/not-waiting-passes", test_not_waiting_passes);
    g_test_add_func("/chaos/checker/cond/other-waiter-woken-passes",
                    test_other_waiter_woken_passes);
    g_test_add_func("/chaos/checker/cond/killed-waiter-absorbs", test_killed_waiter_absorbs);
    g_test_add_func("/chaos/checker/cond/faults-excuse", test_faults_excuse);
    g_test_add_func("/chaos/checker/cond/restart-is-documented-limit",
                    test_restart_is_documented_limit);
    g_test_add_func("/chaos/checker/cond/unheld-flagged", test_unheld_flagged);
    g_test_add_func("/chaos/checker/cond/wait-bounds-flagged", test_wait_bounds_flagged);
}
