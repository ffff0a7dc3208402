/*
 * chaos_sem_selftest.c -- the semaphore families' checker
 * (chaos_sem_check.c) on hand-made logs of one semaphore of three
 * permits: it must flag a fourth valid holder at once (a forged N+1
 * overlap), a wait that never returned (unless its process was killed
 * before the call) and a result the API does not allow, and let pass three holders at once, holds that only touch, holds
 * that a lost-hold notice, a SIGSTOP or a SIGKILL of their process ended
 * before another began, and too many holders across an empty restart (a
 * documented limit); its counts must show the permits all used.
 */
#include "ac_config.h"

#include <errno.h>
#include <string.h>

#include <glib.h>

#include "chaos_check.h"
#include "chaos_rw_check.h"
#include "chaos_sem_check.h"
#include "chaos_selftest.h"

#define MS 1000000LL
#define T0 (1000 * MS) /* no time may be 0: 0 means "not happened" */
#define PERMITS 3u

static int64_t at_ms(double ms)
{
    return T0 + (int64_t)(ms * MS);
}

static const ChaosParams params = {
    .try_bound_ns = 1000 * MS,
    .unlock_bound_ns = 1000 * MS,
    .timed_slack_ns = 250 * MS,
    .early_ns = 2 * MS,
    .keep_ns = 600 * MS,
    .non_robust = true,
    .lease_ns = 600 * MS,
};

typedef struct Log {
    ChaosRec r[16];
    size_t n;
    ChaosFault f[4];
    size_t nf;
} Log;

/* A permit held by PID from FROM to TO ms (its post's call). */
static ChaosRec *hold(Log *l, int pid, double from, double to)
{
    ChaosRec *r = &l->r[l->n++];

    g_assert_cmpuint(l->n, <=, G_N_ELEMENTS(l->r));
    memset(r, 0, sizeof *r);
    r->pid = pid;
    r->op = 'l';
    r->mode = 's';
    r->rc = 0;
    r->call_ns = at_ms(from - 1);
    r->ret_ns = at_ms(from);
    r->accepted = -1;
    r->prev = r->next = -1;
    r->cond_rc = CHAOS_PENDING;
    r->unlock_ns = at_ms(to);
    r->unlock_end_ns = at_ms(to + 0.1);
    r->unlock_rc = 0;
    return r;
}

static void fault(Log *l, int kind, int pid, double from, double to)
{
    g_assert_cmpuint(l->nf, <, G_N_ELEMENTS(l->f));
    l->f[l->nf++] = (ChaosFault){ .kind = kind, .pid = pid, .begin_ns = at_ms(from),
                                   .end_ns = at_ms(to) };
}

/* Checks L: its failures of KIND (-1: of all kinds), its limits in
 * *LIMITS. */
static size_t check(const Log *l, int kind, size_t *limits)
{
    ChaosReport rep = { 0 };
    size_t n;

    chaos_sem_check(l->r, l->n, l->f, l->nf, PERMITS, &params, &rep);
    n = kind < 0 ? chaos_report_failures(&rep) : rep.count[kind];
    if (limits)
        *limits = rep.limits[CV_OVERLAP];
    if (chaos_report_failures(&rep) && g_test_verbose()) {
        ChaosRec *v = chaos_rw_view(l->r, l->n, l->f, l->nf);
        chaos_report_print(&rep, v, T0, 20, stderr);
        g_free(v);
    }
    chaos_report_clear(&rep);
    return n;
}

/* Three holders at once, then a fourth once one has posted; one that
 * begins just as another posts does not overlap it. */
static void test_clean(void)
{
    Log l = { 0 };
    ChaosSemCounts k;

    hold(&l, 1, 0, 50);
    hold(&l, 2, 10, 60);
    hold(&l, 3, 20, 70);
    hold(&l, 4, 50, 80);
    hold(&l, 1, 60, 90);
    g_assert_cmpuint(check(&l, -1, NULL), ==, 0);
    chaos_sem_count(l.r, l.n, l.f, l.nf, PERMITS, &k);
    g_assert_cmpuint(k.holds, ==, 5);
    g_assert_cmpuint(k.valid, ==, 5);
    g_assert_cmpuint(k.max_holders, ==, 3);
    g_assert_cmpuint(k.full, ==, 3);
    /* All three held over [20, 70): the posts at 50 and 60 were taken up
     * at once. */
    g_assert_cmpint(k.full_ns, ==, 50 * MS);
}

/* The forged history: a fourth holder while three hold. */
static void test_too_many(void)
{
    Log l = { 0 };
    ChaosSemCounts k;

    hold(&l, 1, 0, 50);
    hold(&l, 2, 10, 60);
    hold(&l, 3, 20, 70);
    hold(&l, 4, 40, 45);
    g_assert_cmpuint(check(&l, CV_OVERLAP, NULL), ==, 1);
    g_assert_cmpuint(check(&l, -1, NULL), ==, 1);
    chaos_sem_count(l.r, l.n, l.f, l.nf, PERMITS, &k);
    g_assert_cmpuint(k.max_holders, ==, 4);
    /* ... by one microsecond. */
    l.r[3].ret_ns = at_ms(49.999);
    l.r[3].unlock_ns = at_ms(55);
    g_assert_cmpuint(check(&l, CV_OVERLAP, NULL), ==, 1);
    l.r[3].ret_ns = at_ms(50);
    g_assert_cmpuint(check(&l, -1, NULL), ==, 0);
}

/* A lost-hold notice, a SIGSTOP of the holder's process and its kill end
 * the valid interval; a SIGSTOP during the wait leaves none. */
static void test_interval_ends(void)
{
    Log l = { 0 };

    hold(&l, 1, 0, 100)->lost_ns = at_ms(30);
    hold(&l, 2, 10, 60);
    hold(&l, 3, 20, 70);
    hold(&l, 4, 40, 50);
    g_assert_cmpuint(check(&l, -1, NULL), ==, 0);
    l.r[0].lost_ns = 0;
    g_assert_cmpuint(check(&l, CV_OVERLAP, NULL), ==, 1);
    fault(&l, CHAOS_F_STOP, 1, 25, 90);
    g_assert_cmpuint(check(&l, -1, NULL), ==, 0);
    l.f[0].begin_ns = at_ms(-0.5);
    g_assert_cmpuint(check(&l, -1, NULL), ==, 0);
    g_assert_cmpint(chaos_rw_valid_end(&l.r[0], l.f, l.nf), ==, l.r[0].ret_ns);
    l.nf = 0;
    l.r[0].unlock_ns = l.r[0].unlock_end_ns = 0;
    l.r[0].unlock_rc = CHAOS_PENDING;
    l.r[0].end = CHAOS_END_KILLED_HOLDING;
    l.r[0].end_ns = at_ms(35);
    g_assert_cmpuint(check(&l, -1, NULL), ==, 0);
    l.r[0].end_ns = at_ms(45);
    g_assert_cmpuint(check(&l, CV_OVERLAP, NULL), ==, 1);
}

/* An empty restart between them: the documented limit, not a failure. */
static void test_restart(void)
{
    Log l = { 0 };
    size_t limits = 0;

    hold(&l, 1, 0, 100);
    hold(&l, 2, 5, 100);
    hold(&l, 3, 10, 100);
    hold(&l, 4, 40, 50);
    fault(&l, CHAOS_F_RESTART, 0, 20, 30);
    g_assert_cmpuint(check(&l, -1, &limits), ==, 0);
    g_assert_cmpuint(limits, ==, 1);
}

/* Every wait ends; trywait says 0 or EAGAIN, a post 0, ENOLCK or EIO. */
static void test_calls(void)
{
    Log l = { 0 };
    ChaosRec *r;

    hold(&l, 1, 0, 10);
    r = hold(&l, 2, 20, 30);
    r->rc = CHAOS_PENDING;
    r->ret_ns = r->unlock_ns = r->unlock_end_ns = 0;
    r->unlock_rc = CHAOS_PENDING;
    g_assert_cmpuint(check(&l, CV_HANG, NULL), ==, 1);
    r->end = CHAOS_END_KILLED_LOCKING;
    r->end_ns = at_ms(60);
    g_assert_cmpuint(check(&l, -1, NULL), ==, 0);
    /* Taken, then its process killed before the call: no hang. */
    r->end = CHAOS_END_NORMAL;
    r->end_ns = 0;
    r->call_ns = 0;
    g_assert_cmpuint(check(&l, CV_HANG, NULL), ==, 1);
    fault(&l, CHAOS_F_KILL, 2, 19, 20);
    g_assert_cmpuint(check(&l, -1, NULL), ==, 0);
    l.nf = 0;
    r->call_ns = at_ms(19);
    r->op = 't';
    r->rc = EAGAIN;
    r->ret_ns = at_ms(21);
    r->end = CHAOS_END_NORMAL;
    g_assert_cmpuint(check(&l, -1, NULL), ==, 0);
    r->rc = EDEADLK;
    g_assert_cmpuint(check(&l, CV_RESULT, NULL), ==, 1);
    r->rc = EAGAIN;
    l.r[0].unlock_rc = ENOLCK;
    g_assert_cmpuint(check(&l, -1, NULL), ==, 0);
    l.r[0].unlock_rc = EPERM;
    g_assert_cmpuint(check(&l, CV_RESULT, NULL), ==, 1);
}

void chaos_sem_selftest_register(void)
{
    g_test_add_func("/chaos/checker/sem/clean", test_clean);
    g_test_add_func("/chaos/checker/sem/too-many", test_too_many);
    g_test_add_func("/chaos/checker/sem/interval-ends", test_interval_ends);
    g_test_add_func("/chaos/checker/sem/empty-restart", test_restart);
    g_test_add_func("/chaos/checker/sem/calls", test_calls);
}
