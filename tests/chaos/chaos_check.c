/*
 * chaos_check.c -- see chaos_check.h for what is checked and why.
 *
 * Every check is a pass over index arrays sorted one way or another (holds
 * by start, holds by fence, read-modify-writes by the value read), so a
 * long run's log of a few hundred thousand records is checked in well
 * under a second.  Nothing here reads a clock or the environment.
 */
#include "ac_config.h"

#include "chaos_check.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

/* Documented-limit cases kept for printing (failures get the rest). */
#define KEEP_LIMITS 10

typedef struct Ctx {
    const ChaosRec *recs;
    size_t n;
    const ChaosFault *faults;
    size_t nfaults;
    const ChaosParams *p;
    ChaosReport *out;
    GArray *valid; /* int32_t: holds with a valid interval, by start */
    GArray *holds; /* int32_t: holds with a fence, by (fence, start) */
} Ctx;

/* ---- what a record says ---------------------------------------------- */

bool chaos_is_wait(const ChaosRec *r)
{
    return r->op == 'w' || r->op == 'W';
}

/* A wait holds the mutex again whatever it returns but these
 * (netmutex_cond_wait(3)). */
static bool wait_holds(int rc)
{
    return rc != CHAOS_PENDING && rc != EINVAL && rc != EPERM && rc != ENOTRECOVERABLE;
}

bool chaos_is_hold(const ChaosRec *r)
{
    if (r->ret_ns <= 0)
        return false;
    return chaos_is_wait(r) ? wait_holds(r->rc) : r->rc == 0 || r->rc == EOWNERDEAD;
}

int64_t chaos_valid_end(const ChaosRec *r)
{
    int64_t end;

    if (!chaos_is_hold(r) || r->promise_ns == 0)
        return r->ret_ns;
    end = r->promise_ns;
    if (r->unlock_ns > 0 && r->unlock_ns < end)
        end = r->unlock_ns;
    if (r->lost_ns > 0 && r->lost_ns < end)
        end = r->lost_ns;
    return end;
}

bool chaos_has_interval(const ChaosRec *r)
{
    return chaos_is_hold(r) && chaos_valid_end(r) > r->ret_ns;
}

static bool same_thread(const ChaosRec *a, const ChaosRec *b)
{
    return a->pid == b->pid && a->thread == b->thread;
}

static bool unlocked_cleanly(const ChaosRec *r)
{
    return r->end == CHAOS_END_NORMAL && r->unlock_end_ns > 0 && r->unlock_rc == 0;
}

/* ---- reporting --------------------------------------------------------- */

void chaos_report_add(ChaosReport *out, int kind, bool limit, int32_t a, int32_t b,
                      int64_t amount, const char *why)
{
    if (limit)
        out->limits[kind]++;
    else
        out->count[kind]++;
    if (limit && out->kept_limits >= KEEP_LIMITS)
        return;
    if (out->nv >= CHAOS_REPORT_KEEP)
        return;
    if (!out->v)
        out->v = g_new0(ChaosViolation, CHAOS_REPORT_KEEP);
    out->kept_limits += limit;
    out->v[out->nv++] = (ChaosViolation){ kind, limit, a, b, amount, why };
}

static void report(Ctx *c, int kind, bool limit, int32_t a, int32_t b, int64_t amount,
                   const char *why)
{
    chaos_report_add(c->out, kind, limit, a, b, amount, why);
}

/* ---- faults ------------------------------------------------------------ */

/* An empty restart may have come between an acquisition at FROM and one
 * at TO: the server lost its data at some time within the restart's
 * window (a server told to stop still answers for a moment), so FROM
 * before the window's end and TO after its beginning. */
static bool restart_between(const Ctx *c, int64_t from, int64_t to)
{
    for (size_t i = 0; i < c->nfaults; i++) {
        const ChaosFault *f = &c->faults[i];
        if (f->kind == CHAOS_F_RESTART && from < f->end_ns && f->begin_ns < to)
            return true;
    }
    return false;
}

/* PID was stopped (SIGSTOP) at some time within [FROM, TO]. */
static bool stopped_during(const Ctx *c, int32_t pid, int64_t from, int64_t to)
{
    for (size_t i = 0; i < c->nfaults; i++) {
        const ChaosFault *f = &c->faults[i];
        if (f->kind == CHAOS_F_STOP && f->pid == pid && f->begin_ns <= to && f->end_ns >= from)
            return true;
    }
    return false;
}

/* Until when the lock may rightly be kept from everyone, from FROM on,
 * by faults that began before TO: each of them may keep it for a lease
 * after it ended (a holder killed, stopped or cut off keeps its lease),
 * except the kill of a waiter that had not been granted the lock: a dead
 * waiter must not cost the others the lock. */
static int64_t kept_until(const Ctx *c, int64_t from, int64_t to)
{
    int64_t until = from;

    for (size_t i = 0; i < c->nfaults; i++) {
        const ChaosFault *f = &c->faults[i];
        bool dead_waiter = f->kind == CHAOS_F_KILL && !(f->flags & CHAOS_FF_HOLDER);
        if (!dead_waiter && f->begin_ns < to && f->end_ns + c->p->keep_ns > until)
            until = f->end_ns + c->p->keep_ns;
    }
    return until;
}

/* ---- sorting ------------------------------------------------------------ */

/* qsort has no context argument; the checker runs in one thread. */
static const ChaosRec *sort_recs;

static int by_start(const void *x, const void *y)
{
    const ChaosRec *a = &sort_recs[*(const int32_t *)x], *b = &sort_recs[*(const int32_t *)y];

    if (a->ret_ns != b->ret_ns)
        return a->ret_ns < b->ret_ns ? -1 : 1;
    return *(const int32_t *)x - *(const int32_t *)y;
}

static int by_fence(const void *x, const void *y)
{
    const ChaosRec *a = &sort_recs[*(const int32_t *)x], *b = &sort_recs[*(const int32_t *)y];

    if (a->fence != b->fence)
        return a->fence < b->fence ? -1 : 1;
    return by_start(x, y);
}

static int by_value(const void *x, const void *y)
{
    const ChaosRec *a = &sort_recs[*(const int32_t *)x], *b = &sort_recs[*(const int32_t *)y];

    if (a->rmw_value != b->rmw_value)
        return a->rmw_value < b->rmw_value ? -1 : 1;
    return by_start(x, y);
}

/* Each thread's calls, in the order it made them. */
static int by_thread_call(const void *x, const void *y)
{
    const ChaosRec *a = &sort_recs[*(const int32_t *)x], *b = &sort_recs[*(const int32_t *)y];

    if (a->pid != b->pid)
        return a->pid < b->pid ? -1 : 1;
    if (a->thread != b->thread)
        return a->thread < b->thread ? -1 : 1;
    if (a->call_ns != b->call_ns)
        return a->call_ns < b->call_ns ? -1 : 1;
    return *(const int32_t *)x - *(const int32_t *)y;
}

static GArray *select_sorted(const Ctx *c, bool (*keep)(const ChaosRec *),
                             int (*cmp)(const void *, const void *))
{
    GArray *a = g_array_new(FALSE, FALSE, sizeof(int32_t));

    for (size_t i = 0; i < c->n; i++) {
        int32_t idx = (int32_t)i;
        if (keep(&c->recs[i]))
            g_array_append_val(a, idx);
    }
    sort_recs = c->recs;
    if (a->len > 1) /* an empty GArray has no data pointer at all */
        qsort(a->data, a->len, sizeof(int32_t), cmp);
    return a;
}

static int32_t at(const GArray *a, size_t i)
{
    return g_array_index(a, int32_t, i);
}

static bool fenced_hold(const ChaosRec *r)
{
    return chaos_is_hold(r) && r->fence_rc == 0;
}

/* ---- overlaps ------------------------------------------------------------ */

static void overlap(Ctx *c, int32_t a, int32_t b)
{
    const ChaosRec *ra = &c->recs[a], *rb = &c->recs[b];
    int64_t end = MIN(chaos_valid_end(ra), chaos_valid_end(rb));
    bool limit = restart_between(c, ra->ret_ns, rb->ret_ns);

    report(c, CV_OVERLAP, limit, a, b, end - rb->ret_ns,
           limit ? "documented limit: empty restart (a single server that loses its data "
                   "loses the lock)"
                 : "two valid intervals intersect");
}

/* Sweep in start order, keeping the holds whose interval is still open. */
static void check_overlaps(Ctx *c)
{
    GArray *open = g_array_new(FALSE, FALSE, sizeof(int32_t));

    for (size_t i = 0; i < c->valid->len; i++) {
        int32_t b = at(c->valid, i);
        const ChaosRec *rb = &c->recs[b];

        for (guint k = open->len; k-- > 0;)
            if (chaos_valid_end(&c->recs[at(open, k)]) <= rb->ret_ns)
                g_array_remove_index_fast(open, k);
        for (guint k = 0; k < open->len; k++)
            if (!same_thread(&c->recs[at(open, k)], rb))
                overlap(c, at(open, k), b);
        g_array_append_val(open, b);
    }
    g_array_free(open, TRUE);
}

/* ---- fences ---------------------------------------------------------------- */

static void check_fences(Ctx *c)
{
    int32_t top = -1; /* the earlier valid hold with the highest fence */

    for (size_t i = 0; i < c->valid->len; i++) {
        int32_t b = at(c->valid, i);
        const ChaosRec *rb = &c->recs[b], *rt = top >= 0 ? &c->recs[top] : NULL;

        if (rb->fence_rc != 0)
            continue;
        if (rt && rb->fence < rt->fence)
            report(c, CV_FENCE_ORDER, false, top, b, (int64_t)(rt->fence - rb->fence),
                   "a later holder has a smaller fence");
        else if (rt && rb->fence == rt->fence && rb->pid != rt->pid)
            report(c, CV_FENCE_ORDER, false, top, b, 0,
                   "a later holder in another process has the same fence");
        if (!rt || rb->fence > rt->fence)
            top = b;
    }
}

/* ---- lost updates ------------------------------------------------------------ */

static bool rmw_written(const ChaosRec *r)
{
    return chaos_is_hold(r) && r->rmw_state == CHAOS_RMW_WRITTEN;
}

static bool rmw_inside_valid(const ChaosRec *r)
{
    return chaos_has_interval(r) && r->rmw_read_ns >= r->ret_ns &&
           r->rmw_write_ns <= chaos_valid_end(r);
}

static bool rmw_concurrent(const ChaosRec *a, const ChaosRec *b)
{
    return a->rmw_read_ns < b->rmw_write_ns && b->rmw_read_ns < a->rmw_write_ns;
}

/* Two writers that read the same value lost one update.  Only two
 * concurrent ones inside their valid intervals are to blame: equal values
 * read at different times come from a third, stale, writer. */
static void check_lost_updates(Ctx *c)
{
    GArray *w = select_sorted(c, rmw_written, by_value);

    for (size_t i = 1; i < w->len; i++) {
        const ChaosRec *a = &c->recs[at(w, i - 1)], *b = &c->recs[at(w, i)];
        bool limit;

        if (a->rmw_value != b->rmw_value)
            continue;
        if (!rmw_concurrent(a, b) || !rmw_inside_valid(a) || !rmw_inside_valid(b)) {
            c->out->stats.stale_lost_updates++;
            continue;
        }
        limit = restart_between(c, MIN(a->ret_ns, b->ret_ns), MAX(a->ret_ns, b->ret_ns));
        report(c, CV_LOST_UPDATE, limit, at(w, i - 1), at(w, i), 0,
               limit ? "documented limit: empty restart"
                     : "two valid holders read-modify-wrote the counter at once");
    }
    g_array_free(w, TRUE);
}

/* ---- EOWNERDEAD ------------------------------------------------------------ */

/* Position in c->holds of the first hold with fence >= FENCE. */
static size_t first_with_fence(const Ctx *c, uint64_t fence)
{
    size_t lo = 0, hi = c->holds->len;

    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c->recs[at(c->holds, mid)].fence < fence)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Every hold with FENCE is in process PID and ended in a clean unlock
 * (CLEAN false: just in process PID). */
static bool group_is(const Ctx *c, uint64_t fence, int32_t pid, bool clean)
{
    size_t i = first_with_fence(c, fence);
    bool any = false;

    for (; i < c->holds->len && c->recs[at(c->holds, i)].fence == fence; i++) {
        const ChaosRec *r = &c->recs[at(c->holds, i)];
        if (r->pid != pid || (clean && !unlocked_cleanly(r)))
            return false;
        any = true;
    }
    return any;
}

/* A killed while validly holding: the next acquisition must be told. */
static void check_missed(Ctx *c, int32_t a)
{
    const ChaosRec *ra = &c->recs[a], *rb;
    size_t i;

    if (ra->end != CHAOS_END_KILLED_HOLDING || !chaos_has_interval(ra) ||
        chaos_valid_end(ra) < ra->end_ns || !group_is(c, ra->fence, ra->pid, false))
        return;
    i = first_with_fence(c, ra->fence + 1);
    if (i >= c->holds->len)
        return;
    rb = &c->recs[at(c->holds, i)];
    if (rb->fence != ra->fence + 1 || rb->ret_ns <= ra->end_ns || rb->pid == ra->pid ||
        restart_between(c, ra->ret_ns, rb->ret_ns))
        return;
    if (rb->rc != EOWNERDEAD)
        report(c, CV_MISSED_OWNERDEAD, false, a, at(c->holds, i), 0,
               "the acquisition after a holder killed while holding got no EOWNERDEAD");
}

/* B got EOWNERDEAD: was its predecessor's release clean after all? */
static void check_spurious(Ctx *c, size_t pos)
{
    int32_t b = at(c->holds, pos), a;
    const ChaosRec *rb = &c->recs[b], *ra;
    bool clean;

    if (rb->rc != EOWNERDEAD || pos == 0)
        return;
    a = at(c->holds, pos - 1);
    ra = &c->recs[a];
    if (ra->fence == rb->fence)
        clean = ra->pid == rb->pid && unlocked_cleanly(ra); /* a hand-off */
    else if (ra->fence + 1 == rb->fence)
        clean = group_is(c, ra->fence, ra->pid, true);
    else
        return; /* a fence gap: an acquisition nobody logged */
    if (clean && ra->unlock_ns < rb->ret_ns && !restart_between(c, ra->ret_ns, rb->ret_ns))
        report(c, CV_SPURIOUS_OWNERDEAD, false, a, b, 0,
               "EOWNERDEAD although the previous hold was released (unlock returned 0)");
}

static void check_ownerdead(Ctx *c)
{
    if (c->p->non_robust)
        return; /* any EOWNERDEAD is a "result" violation there */
    for (size_t i = 0; i < c->holds->len; i++) {
        check_missed(c, at(c->holds, i));
        check_spurious(c, i);
    }
}

/* ---- bounds, hangs and results ------------------------------------------------- */

static void check_call_bound(Ctx *c, int32_t i)
{
    const ChaosRec *r = &c->recs[i];

    if (r->rc == CHAOS_PENDING || stopped_during(c, r->pid, r->call_ns, r->ret_ns))
        return;
    if (r->op == 't' && r->ret_ns - r->call_ns > c->p->try_bound_ns)
        report(c, CV_BOUND, false, i, -1, r->ret_ns - r->call_ns - c->p->try_bound_ns,
               "trylock took longer than its bound");
    if (r->op == 'T' && r->ret_ns - r->deadline_ns > c->p->timed_slack_ns)
        report(c, CV_BOUND, false, i, -1, r->ret_ns - r->deadline_ns - c->p->timed_slack_ns,
               "timedlock returned too long after its deadline");
    if (r->op == 'T' && r->rc == ETIMEDOUT && r->ret_ns < r->deadline_ns - c->p->early_ns)
        report(c, CV_BOUND, false, i, -1, r->deadline_ns - r->ret_ns,
               "timedlock returned ETIMEDOUT before its deadline");
}

static void check_unlock_bound(Ctx *c, int32_t i)
{
    const ChaosRec *r = &c->recs[i];
    int64_t took = r->unlock_end_ns - r->unlock_ns;

    if (r->unlock_end_ns == 0 || stopped_during(c, r->pid, r->unlock_ns, r->unlock_end_ns))
        return;
    if (took > c->p->unlock_bound_ns)
        report(c, CV_BOUND, false, i, -1, took - c->p->unlock_bound_ns,
               "unlock took longer than its bound");
}

static bool killed(const ChaosRec *r)
{
    return r->end != CHAOS_END_NORMAL && r->end != CHAOS_END_HUNG;
}

static void check_hang(Ctx *c, int32_t i)
{
    const ChaosRec *r = &c->recs[i];
    bool lock_open = r->rc == CHAOS_PENDING;
    bool unlock_open = r->unlock_ns > 0 && r->unlock_end_ns == 0;

    if ((lock_open || unlock_open) && !killed(r))
        report(c, CV_HANG, false, i, -1, 0,
               !lock_open          ? "an unlock never returned"
               : chaos_is_wait(r)  ? "a condition wait never returned"
                                   : "a lock call never returned");
}

static bool lock_rc_allowed(const Ctx *c, int op, int rc)
{
    if (rc == EOWNERDEAD)
        return !c->p->non_robust;
    if (rc == 0 || rc == CHAOS_PENDING)
        return true;
    if (op == 'w' || op == 'W') /* a wait: ENOLCK, its lease was lost */
        return rc == ENOLCK || (op == 'W' && rc == ETIMEDOUT);
    return (op == 'T' && rc == ETIMEDOUT) || (op == 't' && (rc == EBUSY || rc == EAGAIN));
}

/* EPERM after a wait returned says it did not hold the mutex: the
 * condition checker's "unheld", not a result. */
static bool unheld_after_wait(const ChaosRec *r, int rc)
{
    return chaos_is_wait(r) && rc == EPERM;
}

static void check_results(Ctx *c, int32_t i)
{
    const ChaosRec *r = &c->recs[i];
    bool unlocked = r->unlock_end_ns > 0;

    if (r->rc == EOWNERDEAD && !lock_rc_allowed(c, r->op, r->rc))
        report(c, CV_RESULT, false, i, -1, r->rc, "EOWNERDEAD from a mutex that is not robust");
    else if (!lock_rc_allowed(c, r->op, r->rc) && !unheld_after_wait(r, r->rc))
        report(c, CV_RESULT, false, i, -1, r->rc,
               chaos_is_wait(r) ? "a condition wait failed in a way it may not"
                                : "a lock call failed in a way it may not");
    if (!chaos_is_hold(r))
        return;
    if (r->fence_rc != 0 && !unheld_after_wait(r, r->fence_rc))
        report(c, CV_RESULT, false, i, -1, r->fence_rc, "netmutex_fence failed while holding");
    if (r->rc == EOWNERDEAD && r->consistent_rc != 0)
        report(c, CV_RESULT, false, i, -1, r->consistent_rc,
               "netmutex_consistent failed after EOWNERDEAD");
    if (r->validity_rc != 0 && r->validity_rc != ENOLCK && !unheld_after_wait(r, r->validity_rc))
        report(c, CV_RESULT, false, i, -1, r->validity_rc, "netmutex_validity failed");
    if (unlocked && r->unlock_rc != 0 && r->unlock_rc != ENOLCK && r->unlock_rc != EIO &&
        !unheld_after_wait(r, r->unlock_rc))
        report(c, CV_RESULT, false, i, -1, r->unlock_rc, "unlock failed in a way it may not");
}

/* ---- idle lock ------------------------------------------------------------------- */

/* First position in the start-sorted ALL with a start after T. */
static size_t first_start_after(const Ctx *c, const GArray *all, int64_t t)
{
    size_t lo = 0, hi = all->len;

    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c->recs[at(all, mid)].ret_ns <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The call R was still waiting at TO: it returned later, never returned,
 * or its process was killed later. */
static bool waiting_at(const ChaosRec *r, int64_t to)
{
    if (r->rc != CHAOS_PENDING)
        return r->ret_ns > to;
    return r->end == CHAOS_END_NORMAL || r->end == CHAOS_END_HUNG || r->end_ns > to;
}

/* A lock or timedlock call that waited through all of [FROM, TO]. */
static int32_t waiter_through(const Ctx *c, int64_t from, int64_t to)
{
    for (size_t i = 0; i < c->n; i++) {
        const ChaosRec *r = &c->recs[i];
        if ((r->op == 'l' || r->op == 'T') && r->call_ns < from && waiting_at(r, to))
            return (int32_t)i;
    }
    return -1;
}

/* After R's release the lock was free until the next hold began; judge
 * the part of that time no fault accounts for. */
static void check_idle_after(Ctx *c, const GArray *all, int32_t i)
{
    const ChaosRec *r = &c->recs[i];
    int64_t bound = c->p->idle_bound_ns, next, from;
    size_t pos = first_start_after(c, all, r->unlock_ns);
    int32_t w;

    if (!unlocked_cleanly(r) || pos >= all->len)
        return;
    next = c->recs[at(all, pos)].ret_ns;
    from = kept_until(c, r->unlock_end_ns, next);
    if (next - from <= bound)
        return;
    w = waiter_through(c, from, from + bound);
    if (w >= 0)
        report(c, CV_IDLE, false, i, w, next - from,
               "the lock stayed free after a release while a caller waited");
}

static void check_idle(Ctx *c)
{
    GArray *all;

    if (c->p->idle_bound_ns <= 0)
        return;
    all = select_sorted(c, chaos_is_hold, by_start);
    for (size_t i = 0; i < all->len; i++)
        check_idle_after(c, all, at(all, i));
    g_array_free(all, TRUE);
}

/* ---- the whole check ------------------------------------------------------------ */

static void count_stats(Ctx *c)
{
    ChaosStats *s = &c->out->stats;

    s->calls = c->n;
    for (size_t i = 0; i < c->n; i++) {
        const ChaosRec *r = &c->recs[i];
        if (!chaos_is_hold(r))
            continue;
        s->holds++;
        s->valid += chaos_has_interval(r);
        s->ownerdead += r->rc == EOWNERDEAD;
        s->lost += r->lost_ns > 0;
        s->rejected += r->accepted == 0;
        s->killed_holding += r->end == CHAOS_END_KILLED_HOLDING;
        s->unlock_enolck += r->unlock_end_ns > 0 && r->unlock_rc == ENOLCK;
        s->unlock_eio += r->unlock_end_ns > 0 && r->unlock_rc == EIO;
    }
}

static bool any_rec(const ChaosRec *r)
{
    (void)r;
    return true;
}

/* The last call THREAD of PID began before T (index in BY_THREAD), -1. */
static int32_t last_call_before(const Ctx *c, const GArray *by_thread, int32_t pid,
                                int32_t thread, int64_t t)
{
    size_t lo = 0, hi = by_thread->len;

    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const ChaosRec *r = &c->recs[at(by_thread, mid)];
        bool before = r->pid != pid ? r->pid < pid
                    : r->thread != thread ? r->thread < thread : r->call_ns < t;
        if (before)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return -1;
    lo--;
    return c->recs[at(by_thread, lo)].pid == pid && c->recs[at(by_thread, lo)].thread == thread
               ? at(by_thread, lo) : -1;
}

/* A's unlock could have handed the lock to another thread of its process
 * that was in a lock call meanwhile (one that gave up later, say). */
static bool local_waiter_at_unlock(const Ctx *c, const GArray *by_thread, const ChaosRec *a)
{
    for (int32_t t = 0; t < CHAOS_MAX_THREADS; t++) {
        int32_t w = t == a->thread ? -1
                  : last_call_before(c, by_thread, a->pid, t, a->unlock_end_ns);
        if (w >= 0 && (c->recs[w].ret_ns == 0 || c->recs[w].ret_ns > a->unlock_ns))
            return true;
    }
    return false;
}

/* See "cached relock" in chaos_check.h. */
static void count_cached_relocks(Ctx *c)
{
    GArray *h = select_sorted(c, fenced_hold, by_start);
    GArray *by_thread = select_sorted(c, any_rec, by_thread_call);

    for (size_t i = 1; i < h->len; i++) {
        const ChaosRec *a = &c->recs[at(h, i - 1)], *b = &c->recs[at(h, i)];
        c->out->stats.cached_relocks += a->pid == b->pid && a->fence == b->fence &&
                                        a->unlock_end_ns > 0 && b->call_ns > a->unlock_end_ns &&
                                        !local_waiter_at_unlock(c, by_thread, a);
    }
    g_array_free(by_thread, TRUE);
    g_array_free(h, TRUE);
}

void chaos_check(const ChaosRec *recs, size_t n, const ChaosFault *faults, size_t nfaults,
                 const ChaosParams *p, ChaosReport *out)
{
    Ctx c = { .recs = recs, .n = n, .faults = faults, .nfaults = nfaults, .p = p, .out = out };

    c.valid = select_sorted(&c, chaos_has_interval, by_start);
    c.holds = select_sorted(&c, fenced_hold, by_fence);
    count_stats(&c);
    count_cached_relocks(&c);
    check_overlaps(&c);
    check_fences(&c);
    check_lost_updates(&c);
    check_ownerdead(&c);
    for (size_t i = 0; i < n; i++) {
        check_call_bound(&c, (int32_t)i);
        check_unlock_bound(&c, (int32_t)i);
        check_hang(&c, (int32_t)i);
        check_results(&c, (int32_t)i);
    }
    check_idle(&c);
    g_array_free(c.valid, TRUE);
    g_array_free(c.holds, TRUE);
}

void chaos_report_clear(ChaosReport *r)
{
    g_free(r->v);
    memset(r, 0, sizeof *r);
}

size_t chaos_report_failures(const ChaosReport *r)
{
    size_t n = 0;

    for (int k = 0; k < CV_NKINDS; k++)
        n += r->count[k];
    return n;
}

const char *chaos_violation_name(int kind)
{
    static const char *const names[CV_NKINDS] = {
        [CV_OVERLAP] = "overlap",
        [CV_FENCE_ORDER] = "fence order",
        [CV_LOST_UPDATE] = "lost update",
        [CV_MISSED_OWNERDEAD] = "missed EOWNERDEAD",
        [CV_SPURIOUS_OWNERDEAD] = "spurious EOWNERDEAD",
        [CV_BOUND] = "call past its bound",
        [CV_HANG] = "hang",
        [CV_RESULT] = "unexpected result",
        [CV_IDLE] = "idle lock",
        [CV_LOST_WAKEUP] = "lost wake-up",
        [CV_UNHELD] = "wait returned unheld",
    };

    return kind >= 0 && kind < CV_NKINDS ? names[kind] : "?";
}

/* ---- printing ----------------------------------------------------------------- */

static double ms_since(int64_t t, int64_t t0)
{
    return t > 0 ? (double)(t - t0) / 1e6 : -1.0;
}

/* A read-write lock's calls are named by their mode as well. */
static const char *op_name(int op, int mode)
{
    if (mode == 'r' || mode == 'w') {
        bool w = mode == 'w';
        return op == 'l' ? (w ? "wrlock" : "rdlock")
             : op == 'T' ? (w ? "timedwrlock" : "timedrdlock")
             : op == 't' ? (w ? "trywrlock" : "tryrdlock")
                         : "?";
    }
    if (mode == 's')
        return op == 'l' ? "sem_wait" : op == 'T' ? "sem_clockwait" : op == 't' ? "sem_trywait"
                                                                              : "?";
    switch (op) {
    case 'l': return "lock";
    case 'T': return "timedlock";
    case 't': return "trylock";
    case 'w': return "cond_wait";
    case 'W': return "cond_timedwait";
    default: return "?";
    }
}

static const char *end_name(int end)
{
    switch (end) {
    case CHAOS_END_KILLED_LOCKING: return " [killed in lock]";
    case CHAOS_END_KILLED_HOLDING: return " [killed holding]";
    case CHAOS_END_KILLED_UNLOCKING: return " [killed in unlock]";
    case CHAOS_END_HUNG: return " [hung at the end]";
    case CHAOS_END_KILLED_WAITING: return " [killed in a wait]";
    default: return "";
    }
}

static void print_rec(const ChaosRec *recs, int32_t i, int64_t t0, FILE *out)
{
    const ChaosRec *r = &recs[i];

    fprintf(out,
            "    #%d pid %d thread %d %s rc=%d called %.3f returned %.3f"
            " start %.3f valid_end %.3f fence %" PRIu64 " (fence rc %d)\n"
            "        promise %.3f lost %.3f unlock %.3f..%.3f rc=%d resource %s"
            " rmw %d value %" PRId64 " deadline %.3f%s\n",
            i, r->pid, r->thread, op_name(r->op, r->mode), r->rc, ms_since(r->call_ns, t0),
            ms_since(r->ret_ns, t0), ms_since(r->ret_ns, t0),
            ms_since(chaos_valid_end(r), t0), r->fence, r->fence_rc,
            ms_since(r->promise_ns, t0), ms_since(r->lost_ns, t0), ms_since(r->unlock_ns, t0),
            ms_since(r->unlock_end_ns, t0), r->unlock_rc,
            r->accepted < 0 ? "-" : r->accepted ? "accepted" : "rejected", r->rmw_state,
            r->rmw_value, ms_since(r->deadline_ns, t0), end_name(r->end));
    if (r->cond_op || r->prev >= 0 || r->next >= 0)
        fprintf(out, "        ring %d prev #%d next #%d %s%s %.3f..%.3f rc=%d\n", r->ring,
                r->prev, r->next,
                r->cond_op == 's' ? "signal" : r->cond_op == 'b' ? "broadcast" : "no signal",
                r->relay ? " (relay)" : "", ms_since(r->cond_ns, t0),
                ms_since(r->cond_end_ns, t0), r->cond_rc);
}

/* What a violation's amount means depends on its kind. */
static void print_amount(const ChaosViolation *v, FILE *out)
{
    switch (v->kind) {
    case CV_OVERLAP:
    case CV_BOUND:
    case CV_IDLE:
    case CV_LOST_WAKEUP:
        fprintf(out, " (%.3f ms)", (double)v->amount / 1e6);
        break;
    case CV_FENCE_ORDER:
        fprintf(out, " (smaller by %" PRId64 ")", v->amount);
        break;
    case CV_RESULT:
        fprintf(out, " (rc %" PRId64 ")", v->amount);
        break;
    default:
        break;
    }
}

void chaos_report_print(const ChaosReport *r, const ChaosRec *recs, int64_t t0_ns, size_t max,
                        FILE *out)
{
    for (size_t i = 0; i < r->nv && i < max; i++) {
        const ChaosViolation *v = &r->v[i];

        fprintf(out, "%s %s: %s", v->limit ? "DOCUMENTED LIMIT" : "VIOLATION",
                chaos_violation_name(v->kind), v->why);
        print_amount(v, out);
        fputc('\n', out);
        print_rec(recs, v->a, t0_ns, out);
        if (v->b >= 0)
            print_rec(recs, v->b, t0_ns, out);
    }
}

void chaos_dump(const ChaosRec *recs, size_t n, int64_t t0_ns, FILE *out)
{
    for (size_t i = 0; i < n; i++)
        print_rec(recs, (int32_t)i, t0_ns, out);
}
