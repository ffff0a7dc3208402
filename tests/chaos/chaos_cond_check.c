/*
 * chaos_cond_check.c -- see chaos_cond_check.h for what is checked and why.
 *
 * The signals are sorted by call; each timed-out wait looks up the signals
 * of its window by binary search, so the work grows with the timeouts,
 * not with the log.  The pairing of needed signals with woken waits is
 * the greedy one for points in intervals: the needed signals in order,
 * each taking, among the woken waits that were waiting at it, the one that
 * returned first (a min-heap by return).  Nothing here reads a clock or
 * the environment.
 */
#include "ac_config.h"

#include "chaos_cond_check.h"

#include <errno.h>
#include <stdlib.h>

#include <glib.h>

typedef struct Sig {
    int32_t rec;
    int64_t start, call, ret; /* the hold's start, the call, its return */
    bool broadcast;
    int32_t needed_by;        /* a wait that needed it, or -1 */
} Sig;

typedef struct Wake {
    int32_t rec;
    int64_t reg, end; /* the wait's call; its return, or its process's death */
} Wake;

typedef struct Ctx {
    const ChaosRec *recs;
    size_t n;
    const ChaosFault *faults;
    size_t nfaults;
    const ChaosParams *p;
    ChaosReport *out;
    GArray *sigs;  /* Sig, by call */
    GArray *wakes; /* Wake, by reg */
} Ctx;

/* ---- what a record says ---------------------------------------------- */

static bool counted_signal(const ChaosRec *r)
{
    return r->cond_op != 0 && r->cond_rc == 0 && r->cond_end_ns > 0 && chaos_has_interval(r) &&
           r->cond_ns >= r->ret_ns && r->cond_ns < chaos_valid_end(r);
}

/* W registered while it held the mutex (see "registered"). */
static bool registered(const Ctx *c, const ChaosRec *w)
{
    const ChaosRec *prev;

    if (!chaos_is_wait(w) || w->prev < 0 || (size_t)w->prev >= c->n)
        return false;
    prev = &c->recs[w->prev];
    return chaos_is_hold(prev) && prev->promise_ns > w->call_ns &&
           (prev->lost_ns == 0 || prev->lost_ns > w->call_ns);
}

static bool woken(const ChaosRec *w)
{
    if (!chaos_is_wait(w))
        return false;
    if (w->rc == CHAOS_PENDING)
        return w->end == CHAOS_END_KILLED_WAITING;
    return w->ret_ns > 0 && (w->rc == 0 || w->rc == EOWNERDEAD);
}

static int64_t wake_end(const ChaosRec *w)
{
    return w->rc == CHAOS_PENDING ? w->end_ns : w->ret_ns;
}

static bool stopped_during(const Ctx *c, int32_t pid, int64_t from, int64_t to)
{
    for (size_t i = 0; i < c->nfaults; i++) {
        const ChaosFault *f = &c->faults[i];
        if (f->kind == CHAOS_F_STOP && f->pid == pid && f->begin_ns <= to && f->end_ns >= from)
            return true;
    }
    return false;
}

/* ---- sorting ------------------------------------------------------------ */

static int sig_by_call(const void *x, const void *y)
{
    const Sig *a = x, *b = y;

    if (a->call != b->call)
        return a->call < b->call ? -1 : 1;
    return a->rec - b->rec;
}

static int wake_by_reg(const void *x, const void *y)
{
    const Wake *a = x, *b = y;

    if (a->reg != b->reg)
        return a->reg < b->reg ? -1 : 1;
    return a->rec - b->rec;
}

static void sort_array(GArray *a, int (*cmp)(const void *, const void *))
{
    if (a->len > 1) /* an empty GArray has no data pointer at all */
        qsort(a->data, a->len, g_array_get_element_size(a), cmp);
}

static void collect(Ctx *c)
{
    c->sigs = g_array_new(FALSE, FALSE, sizeof(Sig));
    c->wakes = g_array_new(FALSE, FALSE, sizeof(Wake));
    for (size_t i = 0; i < c->n; i++) {
        const ChaosRec *r = &c->recs[i];
        if (counted_signal(r)) {
            Sig s = { (int32_t)i, r->ret_ns, r->cond_ns, r->cond_end_ns, r->cond_op == 'b', -1 };
            g_array_append_val(c->sigs, s);
        }
        if (woken(r)) {
            Wake w = { (int32_t)i, r->call_ns, wake_end(r) };
            g_array_append_val(c->wakes, w);
        }
    }
    sort_array(c->sigs, sig_by_call);
    sort_array(c->wakes, wake_by_reg);
}

static Sig *sig_at(const Ctx *c, size_t i)
{
    return &g_array_index(c->sigs, Sig, i);
}

static Wake *wake_at(const Ctx *c, size_t i)
{
    return &g_array_index(c->wakes, Wake, i);
}

/* Position of the first signal called after T. */
static size_t first_sig_after(const Ctx *c, int64_t t)
{
    size_t lo = 0, hi = c->sigs->len;

    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (sig_at(c, mid)->call <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* ---- statistics --------------------------------------------------------- */

/* Signals that found a registered waiter: some wait called before the
 * signaller's hold began that had not returned when it was called. */
static void count_to_waiters(Ctx *c)
{
    GArray *w = g_array_new(FALSE, FALSE, sizeof(Wake));
    size_t k = 0;
    int64_t reach = 0;

    for (size_t i = 0; i < c->n; i++) {
        const ChaosRec *r = &c->recs[i];
        if (chaos_is_wait(r)) {
            Wake x = { (int32_t)i, r->call_ns, r->ret_ns > 0 ? r->ret_ns
                                               : r->end_ns > 0 ? r->end_ns : INT64_MAX };
            g_array_append_val(w, x);
        }
    }
    sort_array(w, wake_by_reg);
    /* Signals by call have (nearly) rising starts: one sweep. */
    for (size_t i = 0; i < c->sigs->len; i++) {
        const Sig *s = sig_at(c, i);
        for (; k < w->len && g_array_index(w, Wake, k).reg < s->start; k++)
            reach = MAX(reach, g_array_index(w, Wake, k).end);
        c->out->stats.to_waiters += reach > s->call;
    }
    g_array_free(w, TRUE);
}

static void count_stats(Ctx *c)
{
    ChaosStats *s = &c->out->stats;

    for (size_t i = 0; i < c->n; i++) {
        const ChaosRec *r = &c->recs[i];
        if (r->cond_op && r->cond_end_ns > 0 && r->cond_rc != 0)
            s->signal_failed++;
        if (!chaos_is_wait(r))
            continue;
        s->waits++;
        s->timed_waits += r->op == 'W';
        s->wakes += r->ret_ns > 0 && (r->rc == 0 || r->rc == EOWNERDEAD);
        s->timeouts += r->ret_ns > 0 && r->rc == ETIMEDOUT;
        s->wait_enolck += r->ret_ns > 0 && r->rc == ENOLCK;
        s->killed_waiting += r->end == CHAOS_END_KILLED_WAITING;
    }
    for (size_t i = 0; i < c->sigs->len; i++) {
        const Sig *g = sig_at(c, i);
        s->signals += !g->broadcast;
        s->broadcasts += g->broadcast;
        s->relays += c->recs[g->rec].relay != 0;
    }
    count_to_waiters(c);
}

/* ---- unheld, bounds, results ---------------------------------------------- */

static void check_unheld(Ctx *c, int32_t i)
{
    const ChaosRec *r = &c->recs[i];
    bool unlocked = r->unlock_end_ns > 0 && r->next < 0;

    if (!chaos_is_wait(r) || r->ret_ns == 0)
        return;
    if (r->rc == EPERM) {
        chaos_report_add(c->out, CV_UNHELD, false, r->prev, i, 0,
                         "a wait was refused with EPERM: the call that began its segment "
                         "returned without the mutex held");
        return;
    }
    if (!chaos_is_hold(r))
        return;
    if (r->fence_rc == EPERM || r->validity_rc == EPERM || (unlocked && r->unlock_rc == EPERM))
        chaos_report_add(c->out, CV_UNHELD, false, i, -1, 0,
                         "a wait returned, and the caller did not hold the mutex "
                         "(fence, validity or unlock said EPERM)");
}

static void check_signal(Ctx *c, int32_t i)
{
    const ChaosRec *r = &c->recs[i];
    int64_t took = r->cond_end_ns - r->cond_ns;

    if (!r->cond_op || r->cond_end_ns == 0)
        return;
    if (r->cond_rc != 0 && r->cond_rc != EAGAIN)
        chaos_report_add(c->out, CV_RESULT, false, i, -1, r->cond_rc,
                         "a signal or broadcast failed in a way it may not");
    if (took > c->p->unlock_bound_ns && !stopped_during(c, r->pid, r->cond_ns, r->cond_end_ns))
        chaos_report_add(c->out, CV_BOUND, false, i, -1, took - c->p->unlock_bound_ns,
                         "a signal or broadcast took longer than its bound");
}

/* When segment H let the mutex go (INT64_MAX: unknown, it never did).
 * One ended by a wait released it inside the wait, once registered: a
 * round trip after the call on a server that answers (a fault counts
 * apart), which the slack covers. */
static int64_t released_at(const Ctx *c, const ChaosRec *h)
{
    if (h->next >= 0)
        return h->unlock_ns;
    if (h->unlock_end_ns > 0)
        return h->unlock_end_ns;
    if (h->end != CHAOS_END_NORMAL && h->end != CHAOS_END_HUNG)
        return h->end_ns + c->p->lease_ns; /* killed holding: its lease */
    return INT64_MAX;
}

/* The latest the mutex was kept from W before it returned: other
 * threads' releases, and a lease after each fault. */
static int64_t kept_from(const Ctx *c, int32_t wi)
{
    const ChaosRec *w = &c->recs[wi];
    int64_t until = 0;

    for (size_t i = 0; i < c->n; i++) {
        const ChaosRec *h = &c->recs[i];
        bool own = h->pid == w->pid && h->thread == w->thread;
        if (!own && chaos_is_hold(h) && h->ret_ns < w->ret_ns)
            until = MAX(until, released_at(c, h));
    }
    for (size_t i = 0; i < c->nfaults; i++)
        if (c->faults[i].begin_ns < w->ret_ns)
            until = MAX(until, c->faults[i].end_ns + c->p->lease_ns);
    return until;
}

static void check_wait_bound(Ctx *c, int32_t i)
{
    const ChaosRec *w = &c->recs[i];
    int64_t from;

    if (w->op != 'W' || w->ret_ns == 0 || stopped_during(c, w->pid, w->call_ns, w->ret_ns))
        return;
    if (w->rc == ETIMEDOUT && w->ret_ns < w->deadline_ns - c->p->early_ns)
        chaos_report_add(c->out, CV_BOUND, false, i, -1, w->deadline_ns - w->ret_ns,
                         "a timed wait returned ETIMEDOUT before its deadline");
    if (w->ret_ns - w->deadline_ns <= c->p->timed_slack_ns)
        return;
    from = MAX(w->deadline_ns, kept_from(c, i));
    if (w->ret_ns - from > c->p->relock_bound_ns)
        chaos_report_add(c->out, CV_BOUND, false, i, -1, w->ret_ns - from - c->p->relock_bound_ns,
                         "a timed wait returned too long after its deadline, with the mutex "
                         "free");
}

/* ---- lost wake-ups ---------------------------------------------------------- */

enum excuse { EXCUSE_NONE, EXCUSE_FAULT, EXCUSE_RESTART };

/* Whether a fault may have kept a signal from W, whose deadline is D. */
static enum excuse excused(const Ctx *c, const ChaosRec *w)
{
    int64_t d = w->deadline_ns, lease = c->p->lease_ns, slack = c->p->redeliver_ns;
    enum excuse e = EXCUSE_NONE;

    for (size_t i = 0; i < c->nfaults; i++) {
        const ChaosFault *f = &c->faults[i];
        if (f->begin_ns >= d)
            continue;
        switch (f->kind) {
        case CHAOS_F_STOP:
        case CHAOS_F_KILL:
            if (f->pid != w->pid && d < f->begin_ns + lease + slack)
                return EXCUSE_FAULT;
            break;
        case CHAOS_F_DEBUG_SLEEP:
        case CHAOS_F_BLACKHOLE:
            if (d < f->end_ns + 2 * lease + slack)
                return EXCUSE_FAULT;
            break;
        case CHAOS_F_RESTART:
            if (d < f->end_ns + 2 * lease + slack)
                e = EXCUSE_RESTART;
            break;
        default:
            break;
        }
    }
    return e;
}

/* A timed-out wait whose signals are to be judged. */
static bool judged_timeout(const Ctx *c, const ChaosRec *w)
{
    return w->op == 'W' && w->ret_ns > 0 && w->rc == ETIMEDOUT && registered(c, w) &&
           !stopped_during(c, w->pid, w->call_ns, w->ret_ns);
}

/* Marks the signals W needed; a needed broadcast is lost at once. */
static void mark_needed(Ctx *c, int32_t wi)
{
    const ChaosRec *w = &c->recs[wi];
    enum excuse e = excused(c, w);
    ChaosStats *s = &c->out->stats;
    bool lost_broadcast = false;

    for (size_t k = first_sig_after(c, w->call_ns); k < c->sigs->len; k++) {
        Sig *g = sig_at(c, k);
        if (g->call >= w->deadline_ns)
            break;
        if (g->start <= w->call_ns || g->ret >= w->deadline_ns)
            continue;
        if (e == EXCUSE_FAULT) {
            s->timeouts_excused++;
            return;
        }
        if (e == EXCUSE_RESTART) {
            s->timeouts_excused++;
            chaos_report_add(c->out, CV_LOST_WAKEUP, true, g->rec, wi,
                             w->deadline_ns - g->ret,
                             "documented limit: empty restart (the server forgot the waiters)");
            return;
        }
        if (g->broadcast && !lost_broadcast) {
            lost_broadcast = true;
            chaos_report_add(c->out, CV_LOST_WAKEUP, false, g->rec, wi,
                             w->deadline_ns - g->ret,
                             "a broadcast did not wake a waiter registered before it, which "
                             "timed out");
        }
        if (!g->broadcast && g->needed_by < 0) {
            g->needed_by = wi;
            s->needy_signals++;
        }
    }
}

/* A min-heap of wakes (indices into c->wakes) by end. */
typedef struct Heap {
    GArray *a; /* guint */
    const Ctx *c;
} Heap;

static int64_t heap_key(const Heap *h, guint i)
{
    return wake_at(h->c, g_array_index(h->a, guint, i))->end;
}

static void heap_swap(Heap *h, guint i, guint j)
{
    guint t = g_array_index(h->a, guint, i);

    g_array_index(h->a, guint, i) = g_array_index(h->a, guint, j);
    g_array_index(h->a, guint, j) = t;
}

static void heap_push(Heap *h, guint wake)
{
    guint i = h->a->len;

    g_array_append_val(h->a, wake);
    while (i > 0 && heap_key(h, (i - 1) / 2) > heap_key(h, i)) {
        heap_swap(h, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

static void heap_pop(Heap *h)
{
    guint i = 0, n;

    heap_swap(h, 0, h->a->len - 1);
    g_array_set_size(h->a, h->a->len - 1);
    n = h->a->len;
    for (;;) {
        guint l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && heap_key(h, l) < heap_key(h, m))
            m = l;
        if (r < n && heap_key(h, r) < heap_key(h, m))
            m = r;
        if (m == i)
            return;
        heap_swap(h, i, m);
        i = m;
    }
}

/* Pairs the needed signals with woken waits; reports the unpaired. */
static void pair_needed(Ctx *c)
{
    Heap h = { g_array_new(FALSE, FALSE, sizeof(guint)), c };
    guint k = 0;

    for (size_t i = 0; i < c->sigs->len; i++) {
        const Sig *g = sig_at(c, i);
        if (g->needed_by < 0)
            continue;
        while (k < c->wakes->len && wake_at(c, k)->reg < g->start)
            heap_push(&h, k++);
        while (h.a->len > 0 && heap_key(&h, 0) <= g->call)
            heap_pop(&h);
        if (h.a->len > 0) {
            heap_pop(&h);
            continue;
        }
        chaos_report_add(c->out, CV_LOST_WAKEUP, false, g->rec, g->needed_by,
                         c->recs[g->needed_by].deadline_ns - g->ret,
                         "a signal woke no waiter, while this one, registered before it, "
                         "waited until its deadline");
    }
    g_array_free(h.a, TRUE);
}

static void check_lost_wakeups(Ctx *c)
{
    for (size_t i = 0; i < c->n; i++) {
        if (!judged_timeout(c, &c->recs[i]))
            continue;
        c->out->stats.timeouts_judged++;
        mark_needed(c, (int32_t)i);
    }
    pair_needed(c);
}

/* ---- the whole check ----------------------------------------------------------- */

void chaos_cond_check(const ChaosRec *recs, size_t n, const ChaosFault *faults,
                      size_t nfaults, const ChaosParams *p, ChaosReport *out)
{
    Ctx c = { .recs = recs, .n = n, .faults = faults, .nfaults = nfaults, .p = p, .out = out };

    collect(&c);
    count_stats(&c);
    for (size_t i = 0; i < n; i++) {
        check_unheld(&c, (int32_t)i);
        check_signal(&c, (int32_t)i);
        check_wait_bound(&c, (int32_t)i);
    }
    check_lost_wakeups(&c);
    g_array_free(c.sigs, TRUE);
    g_array_free(c.wakes, TRUE);
}
