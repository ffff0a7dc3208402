/*
 * chaos_rw_check.c -- see chaos_rw_check.h for what is checked and why.
 *
 * chaos_check() judges a copy of the records in which the readers have no
 * valid interval (so that it never compares them) and the writers the one
 * defined here; the passes below add what only a read-write lock has: a
 * writer against a reader, and the strict order of fences.  Sorted index
 * arrays throughout, as in chaos_check.c.
 */
#include "ac_config.h"

#include "chaos_rw_check.h"

#include <stdlib.h>
#include <string.h>

#include <glib.h>

typedef struct Hold {
    int32_t i;        /* index in the records */
    bool writer;
    int64_t start, end;
} Hold;

typedef struct Ctx {
    const ChaosRec *recs;
    const ChaosFault *faults;
    size_t nfaults;
    ChaosReport *out;
    GArray *valid; /* Hold, by start */
} Ctx;

/* ---- intervals ----------------------------------------------------------- */

/* PID was stopped at some time within [FROM, TO]; *BEGIN the earliest
 * such stop's beginning. */
static bool stopped(const ChaosFault *faults, size_t nfaults, int32_t pid, int64_t from,
                    int64_t to, int64_t *begin)
{
    bool any = false;

    for (size_t i = 0; i < nfaults; i++) {
        const ChaosFault *f = &faults[i];
        if (f->kind != CHAOS_F_STOP || f->pid != pid || f->begin_ns > to || f->end_ns < from)
            continue;
        if (!any || f->begin_ns < *begin)
            *begin = f->begin_ns;
        any = true;
    }
    return any;
}

static void earlier(int64_t *end, int64_t t)
{
    if (t > 0 && (*end == 0 || t < *end))
        *end = t;
}

int64_t chaos_rw_valid_end(const ChaosRec *r, const ChaosFault *faults, size_t nfaults)
{
    int64_t end = 0, begin = 0;

    if (!chaos_is_hold(r) || r->mode == 0)
        return r->ret_ns;
    earlier(&end, r->unlock_ns);
    earlier(&end, r->lost_ns);
    if (r->end != CHAOS_END_NORMAL)
        earlier(&end, r->end_ns);
    if (end == 0 || stopped(faults, nfaults, r->pid, r->call_ns, r->ret_ns, &begin))
        return r->ret_ns;
    if (stopped(faults, nfaults, r->pid, r->ret_ns, end, &begin))
        earlier(&end, begin);
    return MAX(end, r->ret_ns);
}

ChaosRec *chaos_rw_view(const ChaosRec *recs, size_t n, const ChaosFault *faults,
                        size_t nfaults)
{
    ChaosRec *v = g_new(ChaosRec, MAX(n, 1u));

    for (size_t i = 0; i < n; i++) {
        int64_t end = chaos_rw_valid_end(&recs[i], faults, nfaults);

        v[i] = recs[i];
        v[i].promise_ns = end > recs[i].ret_ns ? end : 0;
    }
    return v;
}

/* ---- faults --------------------------------------------------------------- */

static bool restart_between(const Ctx *c, int64_t from, int64_t to)
{
    for (size_t i = 0; i < c->nfaults; i++) {
        const ChaosFault *f = &c->faults[i];
        if (f->kind == CHAOS_F_RESTART && from < f->end_ns && f->begin_ns < to)
            return true;
    }
    return false;
}

/* ---- sorting -------------------------------------------------------------- */

static int by_start(const void *x, const void *y)
{
    const Hold *a = x, *b = y;

    if (a->start != b->start)
        return a->start < b->start ? -1 : 1;
    return a->i - b->i;
}

static int by_end(const void *x, const void *y)
{
    const Hold *a = x, *b = y;

    if (a->end != b->end)
        return a->end < b->end ? -1 : 1;
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
        Hold h = { (int32_t)i, recs[i].mode == 'w', recs[i].ret_ns,
                   chaos_rw_valid_end(&recs[i], faults, nfaults) };
        if (chaos_is_hold(&recs[i]) && h.end > h.start)
            g_array_append_val(a, h);
    }
    if (a->len > 1)
        qsort(a->data, a->len, sizeof(Hold), by_start);
    return a;
}

/* ---- a writer against a reader ------------------------------------------------ */

static void overlap(Ctx *c, const Hold *a, const Hold *b)
{
    bool limit = restart_between(c, a->start, b->start);

    chaos_report_add(c->out, CV_OVERLAP, limit, a->i, b->i, MIN(a->end, b->end) - b->start,
                     limit ? "documented limit: empty restart (a single server that loses "
                             "its data loses the lock)"
                           : "a writer's valid interval intersects a reader's");
}

/* Writer against writer is chaos_check's. */
static void check_overlaps(Ctx *c)
{
    GArray *open = g_array_new(FALSE, FALSE, sizeof(Hold));

    for (size_t i = 0; i < c->valid->len; i++) {
        const Hold *b = hold_at(c->valid, i);

        for (guint k = open->len; k-- > 0;)
            if (hold_at(open, k)->end <= b->start)
                g_array_remove_index_fast(open, k);
        for (guint k = 0; k < open->len; k++)
            if (hold_at(open, k)->writer != b->writer)
                overlap(c, hold_at(open, k), b);
        g_array_append_val(open, *b);
    }
    g_array_free(open, TRUE);
}

/* ---- fences ---------------------------------------------------------------------- */

static bool fenced(const Ctx *c, const Hold *h)
{
    return c->recs[h->i].fence_rc == 0;
}

static uint64_t fence_of(const Ctx *c, const Hold *h)
{
    return c->recs[h->i].fence;
}

/* A writer's fence equal to an earlier writer's of the same process
 * (chaos_check fails a smaller one, and an equal one of another process:
 * a mutex's cohort hand-off shares its fence, a rwlock's writers never
 * do). */
static void check_writer_fences(Ctx *c)
{
    const Hold *top = NULL;

    for (size_t i = 0; i < c->valid->len; i++) {
        const Hold *b = hold_at(c->valid, i);

        if (!b->writer || !fenced(c, b))
            continue;
        if (top && fence_of(c, b) == fence_of(c, top) && c->recs[b->i].pid == c->recs[top->i].pid)
            chaos_report_add(c->out, CV_FENCE_ORDER, false, top->i, b->i, 0,
                             "a later writer has the same fence as an earlier one");
        if (!top || fence_of(c, b) > fence_of(c, top))
            top = b;
    }
}

static void reader_fence(Ctx *c, const Hold *w, const Hold *r, bool before)
{
    bool limit = before ? restart_between(c, w->start, r->start)
                        : restart_between(c, r->start, w->start);

    chaos_report_add(c->out, CV_FENCE_ORDER, limit, w->i, r->i, 0,
                     limit ? "documented limit: empty restart (a reader's fence out of order)"
                     : before ? "a reader's fence is not greater than an earlier writer's"
                              : "a reader's fence is not smaller than a later writer's");
}

/* Each reader against the greatest fence of the writers that ended before
 * it began (by end: prefix maxima) and the smallest of those that began
 * after it ended (by start: suffix minima). */
static void check_reader_fences(Ctx *c)
{
    GArray *ends = g_array_new(FALSE, FALSE, sizeof(Hold));
    GArray *starts = g_array_new(FALSE, FALSE, sizeof(Hold));
    int32_t *pmax, *smin;
    size_t nw;

    for (size_t i = 0; i < c->valid->len; i++)
        if (hold_at(c->valid, i)->writer && fenced(c, hold_at(c->valid, i))) {
            g_array_append_val(ends, *hold_at(c->valid, i));
            g_array_append_val(starts, *hold_at(c->valid, i));
        }
    nw = ends->len;
    if (nw > 1)
        qsort(ends->data, nw, sizeof(Hold), by_end);
    pmax = g_new(int32_t, nw + 1);
    smin = g_new(int32_t, nw + 1);
    for (size_t k = 0; k < nw; k++)
        pmax[k] = k && fence_of(c, hold_at(ends, (size_t)pmax[k - 1])) >=
                           fence_of(c, hold_at(ends, k))
                      ? pmax[k - 1]
                      : (int32_t)k;
    for (size_t k = nw; k-- > 0;)
        smin[k] = k + 1 < nw && fence_of(c, hold_at(starts, (size_t)smin[k + 1])) <=
                                    fence_of(c, hold_at(starts, k))
                      ? smin[k + 1]
                      : (int32_t)k;
    for (size_t i = 0; i < c->valid->len; i++) {
        const Hold *r = hold_at(c->valid, i);
        size_t lo = 0, hi = nw;

        if (r->writer || !fenced(c, r))
            continue;
        while (lo < hi) { /* writers that ended by r's start: [0, lo) */
            size_t mid = (lo + hi) / 2;
            if (hold_at(ends, mid)->end <= r->start)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo > 0 && fence_of(c, hold_at(ends, (size_t)pmax[lo - 1])) >= fence_of(c, r))
            reader_fence(c, hold_at(ends, (size_t)pmax[lo - 1]), r, true);
        lo = 0, hi = nw;
        while (lo < hi) { /* writers that began at r's end or later: [lo, nw) */
            size_t mid = (lo + hi) / 2;
            if (hold_at(starts, mid)->start < r->end)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < nw && fence_of(c, hold_at(starts, (size_t)smin[lo])) <= fence_of(c, r))
            reader_fence(c, hold_at(starts, (size_t)smin[lo]), r, false);
    }
    g_free(pmax);
    g_free(smin);
    g_array_free(ends, TRUE);
    g_array_free(starts, TRUE);
}

/* ---- counts ----------------------------------------------------------------------- */

void chaos_rw_count(const ChaosRec *recs, size_t n, const ChaosFault *faults, size_t nfaults,
                    ChaosRwCounts *out)
{
    GArray *valid = valid_holds(recs, n, faults, nfaults);
    int64_t reach = 0; /* the latest end of the valid reads so far */

    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < n; i++) {
        bool w = recs[i].mode == 'w';
        *(w ? &out->writes : &out->reads) += 1;
        if (chaos_is_hold(&recs[i]))
            *(w ? &out->write_holds : &out->read_holds) += 1;
    }
    for (size_t i = 0; i < valid->len; i++) {
        const Hold *h = hold_at(valid, i);

        *(h->writer ? &out->write_valid : &out->read_valid) += 1;
        if (h->writer)
            continue;
        out->shared += h->start < reach;
        reach = MAX(reach, h->end);
    }
    g_array_free(valid, TRUE);
}

/* ---- the whole ------------------------------------------------------------------- */

void chaos_rw_check(const ChaosRec *recs, size_t n, const ChaosFault *faults, size_t nfaults,
                    const ChaosParams *p, ChaosReport *out)
{
    ChaosRec *v = chaos_rw_view(recs, n, faults, nfaults);
    Ctx c = { recs, faults, nfaults, out, NULL };
    ChaosParams q = *p;

    /* chaos_check compares the writers alone: readers get no interval. */
    for (size_t i = 0; i < n; i++)
        if (v[i].mode != 'w')
            v[i].promise_ns = 0;
    q.idle_bound_ns = 0;
    q.non_robust = true;
    chaos_check(v, n, faults, nfaults, &q, out);
    g_free(v);
    c.valid = valid_holds(recs, n, faults, nfaults);
    out->stats.valid = c.valid->len;
    check_overlaps(&c);
    check_writer_fences(&c);
    check_reader_fences(&c);
    g_array_free(c.valid, TRUE);
}
