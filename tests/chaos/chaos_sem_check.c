/*
 * chaos_sem_check.c -- see chaos_sem_check.h for what is checked and why.
 *
 * chaos_check() judges a copy of the records in which no hold has a valid
 * interval (permits overlap by design: its pairwise overlap check does not
 * apply), for the calls' bounds, hangs and results; one sweep over the
 * valid intervals in start order, as in chaos_rw_check.c, then counts the
 * holders open at each start.
 */
#include "ac_config.h"

#include "chaos_sem_check.h"

#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "chaos_rw_check.h"

typedef struct Hold {
    int32_t i; /* index in the records */
    int64_t start, end;
} Hold;

static int by_start(const void *x, const void *y)
{
    const Hold *a = x, *b = y;

    if (a->start != b->start)
        return a->start < b->start ? -1 : 1;
    return a->i - b->i;
}

static Hold *hold_at(GArray *a, size_t i)
{
    return &g_array_index(a, Hold, i);
}

static GArray *valid_holds(const ChaosRec *recs, size_t n, const ChaosFault *faults,
                           size_t nfaults)
{
    GArray *a = g_array_new(FALSE, FALSE, sizeof(Hold));

    for (size_t i = 0; i < n; i++) {
        Hold h = { (int32_t)i, recs[i].ret_ns, chaos_rw_valid_end(&recs[i], faults, nfaults) };
        if (chaos_is_hold(&recs[i]) && h.end > h.start)
            g_array_append_val(a, h);
    }
    if (a->len > 1)
        qsort(a->data, a->len, sizeof(Hold), by_start);
    return a;
}

static bool restart_between(const ChaosFault *faults, size_t nfaults, int64_t from, int64_t to)
{
    for (size_t i = 0; i < nfaults; i++) {
        const ChaosFault *f = &faults[i];
        if (f->kind == CHAOS_F_RESTART && from < f->end_ns && f->begin_ns < to)
            return true;
    }
    return false;
}

/* Drops from OPEN the holds that ended by T. */
static void close_before(GArray *open, int64_t t)
{
    for (guint k = open->len; k-- > 0;)
        if (hold_at(open, k)->end <= t)
            g_array_remove_index_fast(open, k);
}

/* The open hold that began first, and the earliest end among them. */
static const Hold *first_open(GArray *open, int64_t *min_end)
{
    const Hold *first = NULL;

    *min_end = 0;
    for (guint k = 0; k < open->len; k++) {
        const Hold *h = hold_at(open, k);
        if (!first || h->start < first->start)
            first = h;
        if (*min_end == 0 || h->end < *min_end)
            *min_end = h->end;
    }
    return first;
}

/* The sweep: every start, with the holds still open then (itself
 * included).  VISIT is called for each. */
typedef void (*visit_fn)(GArray *open, const Hold *b, void *arg);

static void sweep(GArray *valid, visit_fn visit, void *arg)
{
    GArray *open = g_array_new(FALSE, FALSE, sizeof(Hold));

    for (size_t i = 0; i < valid->len; i++) {
        const Hold *b = hold_at(valid, i);

        close_before(open, b->start);
        g_array_append_val(open, *b);
        visit(open, b, arg);
    }
    g_array_free(open, TRUE);
}

typedef struct CheckArg {
    const ChaosFault *faults;
    size_t nfaults;
    unsigned int permits;
    ChaosReport *out;
} CheckArg;

static void check_at(GArray *open, const Hold *b, void *p)
{
    CheckArg *c = p;
    int64_t min_end;
    const Hold *a;
    bool limit;

    if (open->len <= c->permits)
        return;
    a = first_open(open, &min_end);
    limit = restart_between(c->faults, c->nfaults, a->start, b->start);
    chaos_report_add(c->out, CV_OVERLAP, limit, a->i, b->i, min_end - b->start,
                     limit ? "documented limit: empty restart (a single server that loses "
                             "its data loses the permits)"
                           : "more valid permit holders at once than the semaphore has "
                             "permits");
}

/* When the driver killed PID (its first kill's beginning), or 0. */
static int64_t killed_at(const ChaosFault *faults, size_t nfaults, int32_t pid)
{
    for (size_t i = 0; i < nfaults; i++)
        if (faults[i].kind == CHAOS_F_KILL && faults[i].pid == pid)
            return faults[i].begin_ns;
    return 0;
}

void chaos_sem_check(const ChaosRec *recs, size_t n, const ChaosFault *faults, size_t nfaults,
                     unsigned int permits, const ChaosParams *p, ChaosReport *out)
{
    ChaosRec *v = g_new(ChaosRec, MAX(n, 1u));
    ChaosParams q = *p;
    CheckArg c = { faults, nfaults, permits, out };
    GArray *valid;

    /* chaos_check judges the calls alone: no hold gets an interval.  A
     * record its worker took but had not yet made its call on (nor
     * published to the driver) when the driver killed the process is no
     * call: the kill ended it. */
    for (size_t i = 0; i < n; i++) {
        int64_t killed = 0;

        v[i] = recs[i];
        v[i].promise_ns = 0;
        if (v[i].rc == CHAOS_PENDING && v[i].call_ns == 0 && v[i].end == CHAOS_END_NORMAL &&
            (killed = killed_at(faults, nfaults, v[i].pid)) != 0) {
            v[i].end = CHAOS_END_KILLED_LOCKING;
            v[i].end_ns = killed;
        }
    }
    q.idle_bound_ns = 0;
    q.non_robust = true;
    chaos_check(v, n, faults, nfaults, &q, out);
    g_free(v);
    valid = valid_holds(recs, n, faults, nfaults);
    out->stats.valid = valid->len;
    sweep(valid, check_at, &c);
    g_array_free(valid, TRUE);
}

/* ---- counts ---------------------------------------------------------------- */

typedef struct CountArg {
    unsigned int permits;
    ChaosSemCounts *out;
    int64_t full_until; /* the time counted as "all held" so far reaches here */
} CountArg;

static void count_at(GArray *open, const Hold *b, void *p)
{
    CountArg *c = p;
    int64_t min_end;

    c->out->max_holders = MAX(c->out->max_holders, (size_t)open->len);
    if (open->len < c->permits)
        return;
    c->out->full++;
    /* All held from B's start until the first of the open holds ends (a
     * later start may say so again: count each stretch once). */
    first_open(open, &min_end);
    if (min_end > MAX(b->start, c->full_until)) {
        c->out->full_ns += min_end - MAX(b->start, c->full_until);
        c->full_until = min_end;
    }
}

void chaos_sem_count(const ChaosRec *recs, size_t n, const ChaosFault *faults, size_t nfaults,
                     unsigned int permits, ChaosSemCounts *out)
{
    GArray *valid = valid_holds(recs, n, faults, nfaults);
    CountArg c = { permits, out, 0 };

    memset(out, 0, sizeof *out);
    out->calls = n;
    for (size_t i = 0; i < n; i++)
        out->holds += chaos_is_hold(&recs[i]);
    out->valid = valid->len;
    sweep(valid, count_at, &c);
    g_array_free(valid, TRUE);
}
