/*
 * chaos_rw_selftest.c -- the read-write lock families' checker
 * (chaos_rw_check.c) on hand-made logs of one rwlock: it must flag a
 * writer that overlaps a reader or another writer, a writer whose fence is
 * not above an earlier writer's, a reader whose fence is not between the
 * writers around it, a call that never returned, and let pass readers
 * that overlap each other, holds that a lost-hold notice or a SIGSTOP of
 * their process ended before another began, and an overlap across an
 * empty restart (a documented limit).
 */
#include "ac_config.h"

#include <errno.h>
#include <string.h>

#include <glib.h>

#include "chaos_check.h"
#include "chaos_rw_check.h"
#include "chaos_selftest.h"

#define MS 1000000LL
#define T0 (1000 * MS) /* no time may be 0: 0 means "not happened" */

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

/* A hold of MODE by PID from FROM to TO ms (its unlock's call), FENCE. */
static ChaosRec *hold(Log *l, int pid, int mode, double from, double to, uint64_t fence)
{
    ChaosRec *r = &l->r[l->n++];

    g_assert_cmpuint(l->n, <=, G_N_ELEMENTS(l->r));
    memset(r, 0, sizeof *r);
    r->pid = pid;
    r->op = 'l';
    r->mode = mode;
    r->rc = 0;
    r->call_ns = at_ms(from - 1);
    r->ret_ns = at_ms(from);
    r->fence = fence;
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

    chaos_rw_check(l->r, l->n, l->f, l->nf, &params, &rep);
    n = kind < 0 ? chaos_report_failures(&rep) : rep.count[kind];
    if (limits)
        *limits = rep.limits[CV_OVERLAP] + rep.limits[CV_FENCE_ORDER];
    if (chaos_report_failures(&rep) && g_test_verbose()) {
        ChaosRec *v = chaos_rw_view(l->r, l->n, l->f, l->nf);
        chaos_report_print(&rep, v, T0, 20, stderr);
        g_free(v);
    }
    chaos_report_clear(&rep);
    return n;
}

/* Readers share: two of them at once, a writer before and after. */
static void test_clean(void)
{
    Log l = { 0 };
    ChaosRwCounts k;

    hold(&l, 1, 'w', 0, 10, 100);
    hold(&l, 2, 'r', 20, 60, 200);
    hold(&l, 3, 'r', 30, 50, 210);
    hold(&l, 1, 'r', 40, 70, 220);
    hold(&l, 2, 'w', 80, 90, 300);
    g_assert_cmpuint(check(&l, -1, NULL), ==, 0);
    chaos_rw_count(l.r, l.n, l.f, l.nf, &k);
    g_assert_cmpuint(k.reads, ==, 3);
    g_assert_cmpuint(k.writes, ==, 2);
    g_assert_cmpuint(k.read_valid, ==, 3);
    g_assert_cmpuint(k.shared, ==, 2);
}

/* The bad history: a writer in while a reader reads. */
static void test_writer_reader(void)
{
    Log l = { 0 };

    hold(&l, 1, 'r', 0, 50, 100);
    hold(&l, 2, 'w', 40, 60, 200);
    g_assert_cmpuint(check(&l, CV_OVERLAP, NULL), ==, 1);
    g_assert_cmpuint(check(&l, -1, NULL), >=, 1);
}

/* ... a reader in while a writer writes (the reader after it). */
static void test_reader_writer(void)
{
    Log l = { 0 };

    hold(&l, 1, 'w', 0, 50, 100);
    hold(&l, 2, 'r', 40, 60, 200);
    g_assert_cmpuint(check(&l, CV_OVERLAP, NULL), ==, 1);
}

static void test_two_writers(void)
{
    Log l = { 0 };

    hold(&l, 1, 'w', 0, 50, 100);
    hold(&l, 2, 'w', 40, 60, 200);
    g_assert_cmpuint(check(&l, CV_OVERLAP, NULL), ==, 1);
}

/* A writer's fence equal to an earlier writer's, even in one process. */
static void test_writer_fence(void)
{
    Log l = { 0 };

    hold(&l, 1, 'w', 0, 10, 100);
    hold(&l, 1, 'w', 20, 30, 100);
    g_assert_cmpuint(check(&l, CV_FENCE_ORDER, NULL), ==, 1);
    l.r[1].pid = 2;
    g_assert_cmpuint(check(&l, CV_FENCE_ORDER, NULL), ==, 1);
    l.r[1].fence = 99;
    g_assert_cmpuint(check(&l, CV_FENCE_ORDER, NULL), ==, 1);
    l.r[1].fence = 101;
    g_assert_cmpuint(check(&l, -1, NULL), ==, 0);
}

/* A reader's fence must lie between the writers before and after it. */
static void test_reader_fence(void)
{
    Log l = { 0 };

    hold(&l, 1, 'w', 0, 10, 100);
    hold(&l, 2, 'r', 20, 30, 150);
    hold(&l, 3, 'w', 40, 50, 200);
    g_assert_cmpuint(check(&l, -1, NULL), ==, 0);
    l.r[1].fence = 100;
    g_assert_cmpuint(check(&l, CV_FENCE_ORDER, NULL), ==, 1);
    l.r[1].fence = 200;
    g_assert_cmpuint(check(&l, CV_FENCE_ORDER, NULL), ==, 1);
}

/* A lost-hold notice, a SIGSTOP of the holder's process and its kill end
 * the valid interval; a SIGSTOP during the lock call leaves none. */
static void test_interval_ends(void)
{
    Log l = { 0 };

    hold(&l, 1, 'r', 0, 100, 100)->lost_ns = at_ms(30);
    hold(&l, 2, 'w', 40, 50, 200);
    g_assert_cmpuint(check(&l, -1, NULL), ==, 0);
    l.r[0].lost_ns = 0;
    g_assert_cmpuint(check(&l, CV_OVERLAP, NULL), ==, 1);
    fault(&l, CHAOS_F_STOP, 1, 20, 90);
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
}

/* An empty restart between them: the documented limit, not a failure. */
static void test_restart(void)
{
    Log l = { 0 };
    size_t limits = 0;

    hold(&l, 1, 'r', 0, 100, 300);
    hold(&l, 2, 'w', 40, 50, 200);
    fault(&l, CHAOS_F_RESTART, 0, 20, 30);
    g_assert_cmpuint(check(&l, -1, &limits), ==, 0);
    g_assert_cmpuint(limits, >=, 1);
}

/* Every wait ends: a write lock call that never returned is a hang. */
static void test_hang(void)
{
    Log l = { 0 };
    ChaosRec *r = hold(&l, 1, 'w', 0, 10, 100);

    hold(&l, 2, 'r', 20, 30, 150);
    r = hold(&l, 3, 'w', 40, 50, 0);
    r->rc = CHAOS_PENDING;
    r->ret_ns = r->unlock_ns = r->unlock_end_ns = 0;
    r->unlock_rc = CHAOS_PENDING;
    g_assert_cmpuint(check(&l, CV_HANG, NULL), ==, 1);
    r->end = CHAOS_END_KILLED_LOCKING;
    r->end_ns = at_ms(60);
    g_assert_cmpuint(check(&l, -1, NULL), ==, 0);
    r->op = 't';
    r->rc = EDEADLK;
    r->ret_ns = at_ms(41);
    r->end = CHAOS_END_NORMAL;
    g_assert_cmpuint(check(&l, CV_RESULT, NULL), ==, 1);
}

void chaos_rw_selftest_register(void)
{
    g_test_add_func("/chaos/checker/rwlock/clean", test_clean);
    g_test_add_func("/chaos/checker/rwlock/writer-meets-reader", test_writer_reader);
    g_test_add_func("/chaos/checker/rwlock/reader-meets-writer", test_reader_writer);
    g_test_add_func("/chaos/checker/rwlock/two-writers", test_two_writers);
    g_test_add_func("/chaos/checker/rwlock/writer-fence", test_writer_fence);
    g_test_add_func("/chaos/checker/rwlock/reader-fence", test_reader_fence);
    g_test_add_func("/chaos/checker/rwlock/interval-ends", test_interval_ends);
    g_test_add_func("/chaos/checker/rwlock/empty-restart", test_restart);
    g_test_add_func("/chaos/checker/rwlock/hang", test_hang);
}
