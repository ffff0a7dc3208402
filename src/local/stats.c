/*
 * stats.c -- the table of statistics records, their histograms, the
 * snapshot netmutex_stats() hands out, and the table printed at exit
 * (NETMUTEX_STATS=1).  What is counted where, and what it costs: stats.h.
 */
#include "nm.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "conn.h"
#include "log.h"
#include "stats.h"

/* 4 buckets per power of two of nanoseconds: values 0..3 have a bucket
 * each, then [4,5) [5,6) [6,7) [7,8), [8,10) ... up to 2^64. */
#define NBUCKETS 252
#define TABLE_BUCKETS 256

typedef struct hist {
    uint64_t count, total, max;
    uint64_t b[NBUCKETS];
} hist_t;

struct nm_stat {
    struct nm_stat *next;     /* hash chain; table lock */
    struct nm_stat *all;      /* every record, newest first; table lock */
    int kind;
    uint64_t acquisitions, contended, shared, handoffs;     /* owner's lock */
    uint64_t renewals, lost, revocations, deadlocks;       /* atomic */
    uint64_t signals, broadcasts, timeouts, wakeups;       /* atomic */
    uint64_t reconnects;                                   /* owner's lock */
    unsigned int tick;        /* owner's lock: sampling of cheap holds */
    hist_t wait, hold;        /* owner's lock (conditions: atomic) */
    size_t len;
    char name[];
};

int nm_stats_mode;
static int print_at_exit;

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static nm_stat_t *table[TABLE_BUCKETS];  /* table lock */
static nm_stat_t *all_records;           /* table lock */

/* The calling thread's acquisition in progress.  Initial-exec: the
 * general model's __tls_get_addr call per access shows in the cached
 * cycle; 16 bytes fit the static TLS room glibc keeps for libraries
 * loaded later (dlopen). */
#define NM_TLS __thread __attribute__((tls_model("initial-exec")))
static NM_TLS int64_t pending_t0;      /* 0: not timed */
static NM_TLS unsigned char pending_contended;
static NM_TLS unsigned long pending_dials; /* nm_conn_thread_dials() at t0 */

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t t = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    return t > 0 ? t : 1;
}

/* ---- fields: the owner's (load and store) and everyone's (add) ------------- */

static inline uint64_t get(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static inline void bump(uint64_t *p, uint64_t n)
{
    __atomic_store_n(p, get(p) + n, __ATOMIC_RELAXED);
}

static inline void add(uint64_t *p, uint64_t n)
{
    __atomic_fetch_add(p, n, __ATOMIC_RELAXED);
}

static unsigned int bucket_of(uint64_t v)
{
    if (v < 4)
        return (unsigned int)v;
    unsigned int b = 63u - (unsigned int)__builtin_clzll(v);
    unsigned int idx = (b - 1) * 4 + (unsigned int)((v >> (b - 2)) & 3);
    return idx < NBUCKETS ? idx : NBUCKETS - 1;
}

/* The middle of bucket IDX. */
static uint64_t bucket_mid(unsigned int idx)
{
    if (idx < 4)
        return idx;
    unsigned int b = idx / 4 + 1, sub = idx % 4;
    uint64_t low = (uint64_t)(4 + sub) << (b - 2), high = (uint64_t)(5 + sub) << (b - 2);
    return low + (high - low) / 2;
}

/* ATOMIC: writers may race (conditions); else the owner's lock is held. */
static void hist_add(hist_t *h, uint64_t v, int atomic)
{
    if (atomic) {
        add(&h->count, 1);
        add(&h->total, v);
        add(&h->b[bucket_of(v)], 1);
        uint64_t m = get(&h->max);
        while (v > m && !__atomic_compare_exchange_n(&h->max, &m, v, 1, __ATOMIC_RELAXED,
                                                     __ATOMIC_RELAXED))
            ;
        return;
    }
    bump(&h->count, 1);
    bump(&h->b[bucket_of(v)], 1);
    if (v) {
        bump(&h->total, v);
        if (v > get(&h->max))
            __atomic_store_n(&h->max, v, __ATOMIC_RELAXED);
    }
}

static uint64_t hist_quantile(const uint64_t *b, uint64_t count, uint64_t max, unsigned int pct)
{
    if (count == 0)
        return 0;
    uint64_t want = (count * pct + 99) / 100, seen = 0;
    for (unsigned int i = 0; i < NBUCKETS; i++) {
        seen += b[i];
        if (seen >= want && seen > 0) {
            uint64_t v = bucket_mid(i);
            return v < max ? v : max;
        }
    }
    return max;
}

static void timing_of(const hist_t *h, netmutex_timing_t *t)
{
    uint64_t b[NBUCKETS], count = 0;
    for (unsigned int i = 0; i < NBUCKETS; i++)
        count += b[i] = get(&h->b[i]);
    t->count = count;
    t->total_ns = get(&h->total);
    t->max_ns = get(&h->max);
    t->p50_ns = hist_quantile(b, count, t->max_ns, 50);
    t->p99_ns = hist_quantile(b, count, t->max_ns, 99);
}

/* ---- the table ----------------------------------------------------------------- */

static size_t hash_of(int kind, const char *name, size_t len)
{
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)kind;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)name[i];
        h *= 1099511628211ULL;
    }
    return (size_t)(h & (TABLE_BUCKETS - 1));
}

nm_stat_t *nm_stats_record(int kind, const char *name, size_t len)
{
    if (!nm_stats_on())
        return NULL;
    size_t b = hash_of(kind, name, len);
    pthread_mutex_lock(&table_lock);
    nm_stat_t *s = table[b];
    while (s && !(s->kind == kind && s->len == len && memcmp(s->name, name, len) == 0))
        s = s->next;
    if (!s) {
        s = calloc(1, sizeof *s + len + 1);
        if (s) {
            s->kind = kind;
            s->len = len;
            memcpy(s->name, name, len);
            s->next = table[b];
            table[b] = s;
            s->all = all_records;
            all_records = s;
        }
    }
    pthread_mutex_unlock(&table_lock);
    return s;
}

/* ---- hooks ---------------------------------------------------------------------- */

void nm_stats_call_slow(int busy)
{
    pending_contended = (unsigned char)(busy != 0);
    pending_t0 = 0;
    if (busy) {
        pending_t0 = now_ns();
        pending_dials = nm_conn_thread_dials();
    }
}

void nm_stats_remote_slow(void)
{
    if (!pending_t0) {
        pending_t0 = now_ns();
        pending_dials = nm_conn_thread_dials();
    }
}

int64_t nm_stats_acquired(nm_stat_t *s, int server_waited, int shared)
{
    int64_t t0 = pending_t0, now = 0;
    int contended = pending_contended || server_waited;
    pending_t0 = 0;
    pending_contended = 0;
    if (!s)
        return 0;
    if (t0) {
        now = now_ns();
        unsigned long dials = nm_conn_thread_dials() - pending_dials;
        if (dials)
            bump(&s->reconnects, dials);
    } else if (++s->tick % NM_STATS_SAMPLE == 0)
        now = now_ns();
    bump(&s->acquisitions, 1);
    if (contended)
        bump(&s->contended, 1);
    if (shared)
        bump(&s->shared, 1);
    hist_add(&s->wait, t0 ? (uint64_t)(now - t0) : 0, 0);
    return now;
}

void nm_stats_not_acquired(void)
{
    pending_t0 = 0;
    pending_contended = 0;
}

void nm_stats_released(nm_stat_t *s, int64_t t0)
{
    if (s && t0)
        hist_add(&s->hold, (uint64_t)(now_ns() - t0), 0);
}

void nm_stats_handoff(nm_stat_t *s)
{
    if (s)
        bump(&s->handoffs, 1);
}

void nm_stats_renewed(nm_stat_t *s)
{
    if (s)
        add(&s->renewals, 1);
}

void nm_stats_lost(nm_stat_t *s)
{
    if (s)
        add(&s->lost, 1);
}

void nm_stats_revoked(nm_stat_t *s)
{
    if (s)
        add(&s->revocations, 1);
}

int64_t nm_stats_cond_wait_begin(void)
{
    return nm_stats_on() ? now_ns() : 0;
}

void nm_stats_cond_wait_end(const char *name, size_t len, int64_t t0, int err)
{
    if (!t0)
        return;
    nm_stat_t *s = nm_stats_record(NETMUTEX_KIND_COND, name, len);
    if (!s)
        return;
    add(&s->acquisitions, 1);
    hist_add(&s->wait, (uint64_t)(now_ns() - t0), 1);
    if (err == ETIMEDOUT)
        add(&s->timeouts, 1);
    else if (err == 0)
        add(&s->wakeups, 1);
}

void nm_stats_cond_signal(const char *name, size_t len, int all)
{
    nm_stat_t *s = nm_stats_record(NETMUTEX_KIND_COND, name, len);
    if (s)
        add(all ? &s->broadcasts : &s->signals, 1);
}

void nm_stats_deadlock(int kind, const char *name, size_t len)
{
    nm_stat_t *s = nm_stats_record(kind, name, len);
    if (s)
        add(&s->deadlocks, 1);
}

/* ---- reading -------------------------------------------------------------------- */

typedef struct item {
    const char *name;   /* the record's: records are never freed */
    netmutex_stats_t st;
} item_t;

static void fill(const nm_stat_t *s, netmutex_stats_t *st)
{
    memset(st, 0, sizeof *st);
    st->kind = s->kind;
    st->processes = 1;
    st->acquisitions = get(&s->acquisitions);
    st->contended = get(&s->contended);
    st->shared = get(&s->shared);
    st->handoffs = get(&s->handoffs);
    st->renewals = get(&s->renewals);
    st->lost = get(&s->lost);
    st->revocations = get(&s->revocations);
    st->deadlocks = get(&s->deadlocks);
    st->reconnects = get(&s->reconnects);
    st->signals = get(&s->signals);
    st->broadcasts = get(&s->broadcasts);
    st->timeouts = get(&s->timeouts);
    st->wakeups = get(&s->wakeups);
    timing_of(&s->wait, &st->wait);
    timing_of(&s->hold, &st->hold);
}

static int used(const netmutex_stats_t *st)
{
    return st->acquisitions || st->renewals || st->lost || st->revocations || st->deadlocks ||
           st->reconnects ||
           st->signals || st->broadcasts || st->timeouts || st->wait.count || st->hold.count;
}

static int by_wait(const void *a, const void *b)
{
    const item_t *x = a, *y = b;
    if (x->st.wait.total_ns != y->st.wait.total_ns)
        return x->st.wait.total_ns < y->st.wait.total_ns ? 1 : -1;
    int c = strcmp(x->name, y->name);
    return c ? c : x->st.kind - y->st.kind;
}

/* Every used record, sorted: *OUT (the caller frees it), or ENOMEM. */
static int collect(item_t **out, size_t *n)
{
    pthread_mutex_lock(&table_lock);
    size_t count = 0;
    for (const nm_stat_t *s = all_records; s; s = s->all)
        count++;
    item_t *items = malloc((count ? count : 1) * sizeof *items);
    size_t k = 0;
    if (items) {
        for (const nm_stat_t *s = all_records; s; s = s->all) {
            items[k].name = s->name;
            fill(s, &items[k].st);
            if (used(&items[k].st))
                k++;
        }
    }
    pthread_mutex_unlock(&table_lock);
    if (!items)
        return ENOMEM;
    qsort(items, k, sizeof *items, by_wait);
    *out = items;
    *n = k;
    return 0;
}

int nm_stats_snapshot(netmutex_stats_fn fn, void *arg)
{
    item_t *items;
    size_t n;
    int err = collect(&items, &n);
    if (err)
        return err;
    for (size_t i = 0; i < n && !err; i++)
        if (fn(items[i].name, &items[i].st, arg) != 0)
            err = ECANCELED;
    free(items);
    return err;
}

static void zero(nm_stat_t *s)
{
    uint64_t *fields[] = { &s->acquisitions, &s->contended,  &s->shared,   &s->handoffs,
                           &s->renewals,     &s->lost,       &s->revocations, &s->deadlocks,
                           &s->signals,      &s->broadcasts, &s->timeouts, &s->wakeups,
                           &s->reconnects };
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
        __atomic_store_n(fields[i], 0, __ATOMIC_RELAXED);
    hist_t *hs[] = { &s->wait, &s->hold };
    for (size_t h = 0; h < 2; h++) {
        __atomic_store_n(&hs[h]->count, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&hs[h]->total, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&hs[h]->max, 0, __ATOMIC_RELAXED);
        for (size_t i = 0; i < NBUCKETS; i++)
            __atomic_store_n(&hs[h]->b[i], 0, __ATOMIC_RELAXED);
    }
}

void nm_stats_reset(void)
{
    pthread_mutex_lock(&table_lock);
    for (nm_stat_t *s = all_records; s; s = s->all)
        zero(s);
    pthread_mutex_unlock(&table_lock);
}

/* ---- the published form (NETMUTEX_STATS=publish) ------------------------------- */

/* The text a process publishes (stats_publish.c), read back by
 * nm_stats_merge_add(): the one place this format is written and read.
 *
 *   netmutex-stats 1\n
 *   then one line per used record:
 *   KIND ACQ CONT SHARED HANDOFFS RENEWALS LOST REVOCATIONS DEADLOCKS
 *   RECONNECTS SIGNALS BROADCASTS TIMEOUTS WAKEUPS
 *   WCOUNT WTOTAL WMAX WBUCKETS HCOUNT HTOTAL HMAX HBUCKETS LEN:NAME\n
 *
 * every number decimal, one space between fields; a histogram's buckets
 * sparse, "I:N,I:N..." (bucket index, count; "-" when none), so that
 * readers merge processes exactly and compute the quantiles of the sum.
 * The name comes last with its length in bytes, so any byte of it is
 * safe.  A line a reader does not understand ends its reading of that
 * text (a newer writer's). */
#define FORMAT_HEAD "netmutex-stats 1\n"

static void put_hist(FILE *f, const hist_t *h)
{
    int any = 0;
    fprintf(f, " %llu %llu %llu ", (unsigned long long)get(&h->count),
            (unsigned long long)get(&h->total), (unsigned long long)get(&h->max));
    for (unsigned int i = 0; i < NBUCKETS; i++) {
        uint64_t n = get(&h->b[i]);
        if (n) {
            fprintf(f, "%s%u:%llu", any ? "," : "", i, (unsigned long long)n);
            any = 1;
        }
    }
    if (!any)
        fputc('-', f);
}

int nm_stats_encode(char **out, size_t *len)
{
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    if (!f)
        return ENOMEM;
    fputs(FORMAT_HEAD, f);
    pthread_mutex_lock(&table_lock);
    for (const nm_stat_t *s = all_records; s; s = s->all) {
        netmutex_stats_t st;
        fill(s, &st);
        if (!used(&st))
            continue;
        fprintf(f, "%d %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", s->kind,
                (unsigned long long)st.acquisitions, (unsigned long long)st.contended,
                (unsigned long long)st.shared, (unsigned long long)st.handoffs,
                (unsigned long long)st.renewals, (unsigned long long)st.lost,
                (unsigned long long)st.revocations, (unsigned long long)st.deadlocks,
                (unsigned long long)st.reconnects, (unsigned long long)st.signals,
                (unsigned long long)st.broadcasts, (unsigned long long)st.timeouts,
                (unsigned long long)st.wakeups);
        put_hist(f, &s->wait);
        put_hist(f, &s->hold);
        fprintf(f, " %zu:", s->len);
        fwrite(s->name, 1, s->len, f);
        fputc('\n', f);
    }
    pthread_mutex_unlock(&table_lock);
    if (fclose(f) != 0 || !buf) {
        free(buf);
        return ENOMEM;
    }
    *out = buf;
    *len = size;
    return 0;
}

/* A reader's cursor over one published text. */
typedef struct cursor {
    const char *p, *end;
    int bad;
} cursor_t;

static uint64_t number(cursor_t *c, char stop)
{
    uint64_t v = 0;
    const char *start = c->p;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        uint64_t d = (uint64_t)(*c->p++ - '0');
        if (v > (UINT64_MAX - d) / 10)
            c->bad = 1;
        v = v * 10 + d;
    }
    if (c->p == start || c->p >= c->end || *c->p != stop)
        c->bad = 1;
    else
        c->p++;
    return v;
}

/* Adds a histogram's fields at C into H. */
static void take_hist(cursor_t *c, hist_t *h)
{
    h->count += number(c, ' ');
    h->total += number(c, ' ');
    uint64_t max = number(c, ' ');
    if (max > h->max)
        h->max = max;
    if (c->p < c->end && *c->p == '-') {
        c->p++;
        if (c->p >= c->end || *c->p++ != ' ')
            c->bad = 1;
        return;
    }
    for (;;) {
        uint64_t i = number(c, ':');
        if (c->bad)
            return;
        const char *q = c->p;
        while (q < c->end && *q >= '0' && *q <= '9')
            q++;
        uint64_t n = number(c, q < c->end && *q == ',' ? ',' : ' ');
        if (c->bad || i >= NBUCKETS) {
            c->bad = 1;
            return;
        }
        h->b[i] += n;
        if (c->p[-1] == ' ')
            return;
    }
}

typedef struct merged {
    struct merged *next;
    unsigned int processes;
    nm_stat_t *s;
} merged_t;

struct nm_stats_merge {
    merged_t *table[TABLE_BUCKETS];
    size_t n;
};

nm_stats_merge_t *nm_stats_merge_new(void)
{
    return calloc(1, sizeof(nm_stats_merge_t));
}

void nm_stats_merge_free(nm_stats_merge_t *m)
{
    if (!m)
        return;
    for (size_t b = 0; b < TABLE_BUCKETS; b++) {
        for (merged_t *e = m->table[b], *next; e; e = next) {
            next = e->next;
            free(e->s);
            free(e);
        }
    }
    free(m);
}

static merged_t *merged_of(nm_stats_merge_t *m, int kind, const char *name, size_t len)
{
    size_t b = hash_of(kind, name, len);
    for (merged_t *e = m->table[b]; e; e = e->next)
        if (e->s->kind == kind && e->s->len == len && memcmp(e->s->name, name, len) == 0)
            return e;
    merged_t *e = calloc(1, sizeof *e);
    nm_stat_t *s = e ? calloc(1, sizeof *s + len + 1) : NULL;
    if (!s) {
        free(e);
        return NULL;
    }
    s->kind = kind;
    s->len = len;
    memcpy(s->name, name, len);
    e->s = s;
    e->next = m->table[b];
    m->table[b] = e;
    m->n++;
    return e;
}

int nm_stats_merge_add(nm_stats_merge_t *m, const char *text, size_t len)
{
    size_t hl = sizeof FORMAT_HEAD - 1;
    if (len < hl || memcmp(text, FORMAT_HEAD, hl) != 0)
        return EPROTO;
    cursor_t c = { text + hl, text + len, 0 };
    while (c.p < c.end) {
        uint64_t v[14];
        nm_stat_t tmp;
        memset(&tmp, 0, sizeof tmp);
        for (size_t i = 0; i < 14; i++)
            v[i] = number(&c, ' ');
        take_hist(&c, &tmp.wait);
        take_hist(&c, &tmp.hold);
        uint64_t nlen = number(&c, ':');
        if (c.bad || nlen == 0 || nlen > NETMUTEX_NAME_MAX || (size_t)(c.end - c.p) < nlen + 1 ||
            c.p[nlen] != '\n' || v[0] > NETMUTEX_KIND_COND)
            return EPROTO;
        merged_t *e = merged_of(m, (int)v[0], c.p, (size_t)nlen);
        if (!e)
            return ENOMEM;
        c.p += nlen + 1;
        nm_stat_t *s = e->s;
        uint64_t *fields[] = { &s->acquisitions, &s->contended, &s->shared,   &s->handoffs,
                               &s->renewals,     &s->lost,      &s->revocations,
                               &s->deadlocks,    &s->reconnects, &s->signals,
                               &s->broadcasts,   &s->timeouts,  &s->wakeups };
        for (size_t i = 0; i < 13; i++)
            *fields[i] += v[i + 1];
        hist_t *into[] = { &s->wait, &s->hold }, *from[] = { &tmp.wait, &tmp.hold };
        for (size_t h = 0; h < 2; h++) {
            into[h]->count += from[h]->count;
            into[h]->total += from[h]->total;
            if (from[h]->max > into[h]->max)
                into[h]->max = from[h]->max;
            for (size_t i = 0; i < NBUCKETS; i++)
                into[h]->b[i] += from[h]->b[i];
        }
        e->processes++;
    }
    return 0;
}

int nm_stats_merge_each(const nm_stats_merge_t *m, int (*fn)(const char *name,
                                                             const netmutex_stats_t *st,
                                                             void *arg),
                        void *arg)
{
    item_t *items = malloc((m->n ? m->n : 1) * sizeof *items);
    size_t k = 0;
    int err = 0;
    if (!items)
        return ENOMEM;
    for (size_t b = 0; b < TABLE_BUCKETS; b++) {
        for (const merged_t *e = m->table[b]; e; e = e->next) {
            items[k].name = e->s->name;
            fill(e->s, &items[k].st);
            items[k].st.processes = e->processes;
            k++;
        }
    }
    qsort(items, k, sizeof *items, by_wait);
    for (size_t i = 0; i < k && !err; i++)
        if (fn(items[i].name, &items[i].st, arg) != 0)
            err = ECANCELED;
    free(items);
    return err;
}

/* ---- the mode, the environment, the exit table ------------------------------------ */

int nm_stats_set_mode(int mode)
{
    if (mode != NETMUTEX_STATS_OFF && mode != NETMUTEX_STATS_ON && mode != NETMUTEX_STATS_PUBLISH)
        return EINVAL;
    __atomic_store_n(&nm_stats_mode, mode, __ATOMIC_RELAXED);
    return 0;
}

static const char *kind_name(int kind)
{
    switch (kind) {
    case NETMUTEX_KIND_MUTEX: return "mutex";
    case NETMUTEX_KIND_RWLOCK: return "rwlock";
    case NETMUTEX_KIND_SEM: return "sem";
    case NETMUTEX_KIND_COND: return "cond";
    default: return "?";
    }
}

/* NS as a short time: 950ns, 12.3us, 4.56ms, 1.20s. */
static const char *span(uint64_t ns, char *buf, size_t size)
{
    if (ns < 1000)
        snprintf(buf, size, "%lluns", (unsigned long long)ns);
    else if (ns < 1000000)
        snprintf(buf, size, "%.1fus", (double)ns / 1e3);
    else if (ns < 1000000000)
        snprintf(buf, size, "%.2fms", (double)ns / 1e6);
    else
        snprintf(buf, size, "%.2fs", (double)ns / 1e9);
    return buf;
}

static void print_table(void)
{
    item_t *items;
    size_t n;
    if (collect(&items, &n) != 0)
        return;
    if (n == 0) {
        free(items);
        return;
    }
    char b[8][24];
    fprintf(stderr, "netmutex: statistics of pid %ld, by total wait\n", (long)getpid());
    fprintf(stderr, "%-24s %-6s %10s %10s %9s %9s %9s %9s %9s %9s %9s %6s\n", "name", "kind",
            "acquired", "contended", "wait", "wait-p50", "wait-p99", "wait-max", "hold-p50",
            "hold-p99", "hold-max", "lost");
    for (size_t i = 0; i < n; i++) {
        const netmutex_stats_t *st = &items[i].st;
        fprintf(stderr, "%-24s %-6s %10llu %10llu %9s %9s %9s %9s %9s %9s %9s %6llu\n",
                items[i].name, kind_name(st->kind), (unsigned long long)st->acquisitions,
                (unsigned long long)st->contended, span(st->wait.total_ns, b[0], sizeof b[0]),
                span(st->wait.p50_ns, b[1], sizeof b[1]), span(st->wait.p99_ns, b[2], sizeof b[2]),
                span(st->wait.max_ns, b[3], sizeof b[3]), span(st->hold.p50_ns, b[4], sizeof b[4]),
                span(st->hold.p99_ns, b[5], sizeof b[5]), span(st->hold.max_ns, b[6], sizeof b[6]),
                (unsigned long long)st->lost);
    }
    free(items);
}

static void at_exit(void)
{
    if (print_at_exit)
        print_table();
}

void nm_stats_init_from_env(void)
{
    const char *v = getenv("NETMUTEX_STATS");
    if (!v || !*v || strcmp(v, "0") == 0)
        return;
    if (strcmp(v, "1") == 0) {
        print_at_exit = 1;
        atexit(at_exit);
        nm_stats_set_mode(NETMUTEX_STATS_ON);
    } else if (strcmp(v, "publish") == 0) {
        nm_stats_set_mode(NETMUTEX_STATS_PUBLISH);
    } else {
        netmutex_log(NETMUTEX_LOG_WARN, "NETMUTEX_STATS=%s: not 0, 1 or publish; statistics stay off",
                     v);
    }
}

void nm_stats_before_fork(void)
{
    pthread_mutex_lock(&table_lock);
}

void nm_stats_after_fork_parent(void)
{
    pthread_mutex_unlock(&table_lock);
}

void nm_stats_after_fork_child(void)
{
    pthread_mutex_unlock(&table_lock);
    for (nm_stat_t *s = all_records; s; s = s->all)
        zero(s);
    pending_t0 = 0;
    pending_contended = 0;
}
