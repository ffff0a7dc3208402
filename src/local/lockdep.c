/*
 * lockdep.c -- lock-order checking (lockdep.h): the process's orders, the
 * queue of new ones, and the background thread's job that publishes them
 * and looks for their reverse.
 *
 * An order "A then B" is noted when a thread takes B while it holds A
 * (held.h).  The names are qualified by their kind ("m:" a mutex, "r:" a
 * read-write lock, read or write, "s:" a semaphore): a mutex and a
 * read-write lock of one name are different locks.  A new order goes into
 * the process's set (never shrinks, bounded) and wakes the job; the lock
 * call pays no round trip.  The job, every period (half a lease, within
 * bounds) and whenever new orders wait:
 *   - publishes each order with a lease: SET of its key (keys.h) to
 *     "host:pid site", PX three periods, so the keys of a process that
 *     ended go away by themselves;
 *   - looks for the reverse of each order not looked at yet: in the set
 *     (this process) or on the server (any process, any host).  Both sides
 *     write before they read, so of two processes that publish the two
 *     orders at once, one at least sees the other's;
 *   - an inversion found is claimed (SET NX of the pair's claim key, PX
 *     three periods, renewed while this process lives): the process that
 *     made the claim logs it, once; the others stay silent.  The log names
 *     both orders, their names, hosts, pids and call sites.
 * Quorum mode publishes to the first server only: the check is advice, and
 * it needs no majority.  Cluster mode routes every key to its node; each
 * command has one key (routed.h sends it, and says what a refusal was).
 *
 * The call site of an order is where its second name was taken: the
 * held.h slot's file:line when a layer above named it, otherwise the
 * first return address on the stack outside libnetmutex and its porting
 * layer (backtrace, dladdr), as module+offset, which addr2line -e module
 * turns into a file and line.  It is found only for a new order.
 */
#include "nm.h"

#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "held.h"
#include "keys.h"
#include "lockdep.h"
#include "log.h"
#include "reply.h"
#include "routed.h"
#include "settings.h"
#include "watchdog.h"

/* Most orders a process keeps, and most new ones waiting for the job. */
#define ORDERS_MAX 4096
#define QUEUE_MAX 256
/* The job's period, half a lease within these bounds; keys live three. */
#define PERIOD_MIN_MS 100
#define PERIOD_MAX_MS 5000
/* Holds looked at when a name is taken (the most recent ones). */
#define HOLDS_MAX 32
/* Frames looked at for the caller's return address. */
#define FRAMES_MAX 48
#define BUCKETS 512

typedef struct order {
    struct order *next;    /* in its bucket */
    struct order *reverse; /* B then A, when this process took it too */
    char *a, *b;           /* kind-qualified names */
    size_t a_len, b_len;
    char *value;           /* "host:pid site", what the key holds */
    int queued;            /* new: not published yet */
    /* the job's alone: */
    int checked;           /* the reverse was looked for */
    int found;             /* an inversion: log it (or learn another did) */
    int settled;           /* logged here, or claimed by another process */
    int claimed;           /* ours: the claim key is renewed */
    char *other;           /* the reverse's "host:pid site" */
} order_t;

int nm_lockdep_on;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static order_t *buckets[BUCKETS];
static order_t **all;          /* every order, in the order noted */
static size_t n_all, cap_all;
static size_t n_queued;
static unsigned long dropped;  /* new orders left out: set or queue full */
static int dropped_said;

/* The job's: */
static nm_config_t *bound_cfg;
static int64_t next_pass;
static int64_t retry_at;       /* after a failure: not before then */
static char host[256];

static const void *own_base;   /* libnetmutex's load address (dladdr) */

/* A qualified name: its kind's letter and the name, unjoined, so that a
 * lookup builds no string. */
typedef struct qname {
    char kind;
    const char *name;
    size_t len;
} qname_t;

static size_t feed(size_t h, const qname_t *q)
{
    h = (h ^ (unsigned char)q->kind) * 16777619u;
    h = (h ^ ':') * 16777619u;
    for (size_t i = 0; i < q->len; i++)
        h = (h ^ (unsigned char)q->name[i]) * 16777619u;
    return h;
}

static size_t hash(const qname_t *a, const qname_t *b)
{
    size_t h = feed(2166136261u, a);
    return feed((h ^ 0xff) * 16777619u, b) % BUCKETS;
}

static int same(const char *q, size_t q_len, const qname_t *n)
{
    return q_len == n->len + 2 && q[0] == n->kind && memcmp(q + 2, n->name, n->len) == 0;
}

static order_t *find_locked(const qname_t *a, const qname_t *b)
{
    for (order_t *o = buckets[hash(a, b)]; o; o = o->next)
        if (same(o->a, o->a_len, a) && same(o->b, o->b_len, b))
            return o;
    return NULL;
}

static char kind_letter(unsigned char kind)
{
    return kind == NM_HELD_MUTEX ? 'm' : kind == NM_HELD_PERMIT ? 's' : 'r';
}

static const char *kind_word(char letter)
{
    return letter == 'm' ? "mutex" : letter == 's' ? "semaphore" : "rwlock";
}

static qname_t qualify(const nm_held_t *h)
{
    qname_t q = { kind_letter(h->kind), h->name, strlen(h->name) };
    return q;
}

/* "k:NAME", malloc'ed, in *OUT and *LEN; 0 or -1. */
static int joined(const qname_t *q, char **out, size_t *len)
{
    char *s = malloc(q->len + 2);
    if (!s)
        return -1;
    s[0] = q->kind;
    s[1] = ':';
    memcpy(s + 2, q->name, q->len);
    *out = s;
    *len = q->len + 2;
    return 0;
}

/* ---- the call site ------------------------------------------------------- */

static int ours(const Dl_info *info)
{
    if (info->dli_fbase == own_base)
        return 1;
    const char *base = info->dli_fname ? strrchr(info->dli_fname, '/') : NULL;
    base = base ? base + 1 : info->dli_fname;
    return base && strncmp(base, "libnetmutex-wrap", 16) == 0;
}

/* The caller's site in SITE: the held slot's file:line, else the first
 * return address outside the library as module+offset (of the call
 * instruction: the return address less one), else "?". */
static void call_site(const nm_held_t *h, char *site, size_t size)
{
    void *frames[FRAMES_MAX];
    if (h->file) {
        snprintf(site, size, "%s:%d", h->file, h->line);
        return;
    }
    int n = backtrace(frames, FRAMES_MAX);
    for (int i = 1; i < n; i++) {
        Dl_info info;
        if (!dladdr(frames[i], &info) || ours(&info))
            continue;
        const char *mod = info.dli_fname ? strrchr(info.dli_fname, '/') : NULL;
        mod = mod ? mod + 1 : info.dli_fname ? info.dli_fname : "?";
        uintptr_t off = (uintptr_t)frames[i] - 1 - (uintptr_t)info.dli_fbase;
        if (info.dli_sname)
            snprintf(site, size, "%s+%#lx (%s)", mod, (unsigned long)off, info.dli_sname);
        else
            snprintf(site, size, "%s+%#lx", mod, (unsigned long)off);
        return;
    }
    snprintf(site, size, "?");
}

/* ---- noting orders -------------------------------------------------------- */

typedef struct holds {
    const nm_held_t *h[HOLDS_MAX];
    size_t n, seen;
} holds_t;

static int collect(const nm_held_t *h, void *arg)
{
    holds_t *hs = arg;
    hs->h[hs->seen++ % HOLDS_MAX] = h; /* the last HOLDS_MAX, in a ring */
    hs->n = NM_MIN(hs->seen, (size_t)HOLDS_MAX);
    return 0;
}

static void drop_locked(void)
{
    dropped++;
}

/* Notes A then B (taken at SITE) under the lock: 1 when new. */
static int note_locked(const qname_t *a, const qname_t *b, const char *site)
{
    if (find_locked(a, b))
        return 0;
    if (n_all == ORDERS_MAX || n_queued == QUEUE_MAX) {
        drop_locked();
        return 0;
    }
    if (n_all == cap_all) {
        size_t cap = cap_all ? 2 * cap_all : 64;
        order_t **more = realloc(all, cap * sizeof *more);
        if (!more) {
            drop_locked();
            return 0;
        }
        all = more;
        cap_all = cap;
    }
    order_t *o = calloc(1, sizeof *o);
    char value[512];
    snprintf(value, sizeof value, "%s:%ld %s", host, (long)getpid(), site);
    if (!o || joined(a, &o->a, &o->a_len) != 0 || joined(b, &o->b, &o->b_len) != 0 ||
        !(o->value = strdup(value))) {
        if (o) {
            free(o->a);
            free(o->b);
        }
        free(o);
        drop_locked();
        return 0;
    }
    o->queued = 1;
    o->reverse = find_locked(b, a);
    if (o->reverse)
        o->reverse->reverse = o;
    size_t i = hash(a, b);
    o->next = buckets[i];
    buckets[i] = o;
    all[n_all++] = o;
    n_queued++;
    return 1;
}

void nm_lockdep_taken(void)
{
    holds_t hs = { .n = 0, .seen = 0 };
    if (nm_held_count() < 2)
        return;
    nm_held_each(collect, &hs);
    const nm_held_t *last = hs.h[(hs.seen - 1) % HOLDS_MAX];
    qname_t b = qualify(last);
    char site[320] = "";
    int fresh = 0;
    for (size_t k = 1; k < hs.n; k++) {
        const nm_held_t *h = hs.h[(hs.seen - 1 - k) % HOLDS_MAX];
        if (h->lock == last->lock)
            continue;
        qname_t a = qualify(h);
        pthread_mutex_lock(&lock);
        int known = find_locked(&a, &b) != NULL;
        pthread_mutex_unlock(&lock);
        if (!known) {
            if (!site[0])
                call_site(last, site, sizeof site); /* outside the lock */
            pthread_mutex_lock(&lock);
            fresh |= note_locked(&a, &b, site);
            pthread_mutex_unlock(&lock);
        }
    }
    if (fresh)
        nm_watchdog_poke(); /* the lock is released: watchdog.c's comes after */
}

/* ---- the job -------------------------------------------------------------- */

static int64_t period_ms(void)
{
    return NM_MIN(NM_MAX((int64_t)bound_cfg->lease_ms / 2, PERIOD_MIN_MS), PERIOD_MAX_MS);
}

/* One command about KEY on the node of its slot, or the first server
 * (routed.h). */
static int command(const char *key, size_t key_len, int argc, const char **argv,
                   const size_t *lens, int64_t deadline, redisReply **out)
{
    nm_routed_t q = { .key = key, .key_len = key_len, .argc = argc, .argv = argv,
                      .lens = lens };
    return nm_routed_call(bound_cfg, &q, deadline, out, NULL);
}

/* SET KEY VALUE PX ttl [NX]: 1 set, 0 not (NX), or -1 failed. */
static int set_key(const char *key, size_t key_len, const char *value, int nx,
                   int64_t deadline)
{
    char ttl[24];
    snprintf(ttl, sizeof ttl, "%lld", (long long)(3 * period_ms()));
    const char *argv[] = { "SET", key, value, "PX", ttl, "NX" };
    size_t lens[] = { 3, key_len, strlen(value), 2, strlen(ttl), 2 };
    redisReply *r = NULL;
    int err = command(key, key_len, nx ? 6 : 5, argv, lens, deadline, &r);
    int res = err ? -1 : nm_reply_is_nil(r) ? 0 : nm_reply_expect_status(r, "OK") == 0 ? 1 : -1;
    if (r)
        freeReplyObject(r);
    return res;
}

/* GET KEY: 1 with *VALUE (malloc'ed), 0 no key, -1 failed. */
static int get_key(const char *key, size_t key_len, char **value, int64_t deadline)
{
    const char *argv[] = { "GET", key };
    size_t lens[] = { 3, key_len };
    redisReply *r = NULL;
    const char *s;
    size_t n;
    int err = command(key, key_len, 2, argv, lens, deadline, &r);
    int res = -1;
    if (!err && nm_reply_is_nil(r))
        res = 0;
    else if (!err && nm_reply_string(r, &s, &n) == 0 && (*value = strndup(s, n)))
        res = 1;
    if (r)
        freeReplyObject(r);
    return res;
}

/* "k:NAME" as 'mutex "NAME"'. */
static void describe(const char *q, size_t len, char *out, size_t size)
{
    snprintf(out, size, "%s \"%.*s\"", kind_word(q[0]), (int)(len - 2), q + 2);
}

static void log_inversion(const order_t *o)
{
    char a[300], b[300];
    describe(o->a, o->a_len, a, sizeof a);
    describe(o->b, o->b_len, b, sizeof b);
    netmutex_log(NETMUTEX_LOG_WARN,
                 "lock order inversion: %s then %s at %s, but %s then %s at %s: "
                 "threads that take both may deadlock",
                 a, b, o->value, b, a, o->other);
}

/* Looks for O's reverse (O published first), and claims and logs an
 * inversion found.  Returns -1 when the server failed (try again). */
static int check(order_t *o, int64_t deadline)
{
    char *key;
    size_t len;
    if (!o->checked) {
        pthread_mutex_lock(&lock);
        order_t *rev = o->reverse;
        pthread_mutex_unlock(&lock);
        if (rev) {
            o->other = strdup(rev->value);
            o->found = o->other != NULL;
        } else {
            if (nm_keys_order(bound_cfg, o->b, o->b_len, o->a, o->a_len, 0, &key, &len) != 0)
                return -1;
            int got = get_key(key, len, &o->other, deadline);
            free(key);
            if (got < 0)
                return -1;
            o->found = got;
        }
        o->checked = 1;
    }
    if (!o->found || (o->settled && !o->claimed))
        return 0;
    if (nm_keys_order(bound_cfg, o->a, o->a_len, o->b, o->b_len, 1, &key, &len) != 0)
        return -1;
    int set = set_key(key, len, o->value, !o->claimed, deadline);
    char *holder = NULL;
    if (set == 0 && get_key(key, len, &holder, deadline) > 0) {
        /* Ours, when an earlier SET NX got there but its reply did not. */
        set = strcmp(holder, o->value) == 0;
        free(holder);
    }
    free(key);
    if (set < 0)
        return -1;
    if (!o->settled) {
        o->settled = 1;
        o->claimed = set;
        if (o->reverse)
            o->reverse->settled = 1; /* one line per pair (the job's field) */
        if (set)
            log_inversion(o);
    }
    return 0;
}

/* Publishes O (its lease too) and checks it. */
static int publish(order_t *o, int64_t deadline)
{
    char *key;
    size_t len;
    if (nm_keys_order(bound_cfg, o->a, o->a_len, o->b, o->b_len, 0, &key, &len) != 0)
        return -1;
    int set = set_key(key, len, o->value, 0, deadline);
    free(key);
    return set < 0 ? -1 : check(o, deadline);
}

static void say_dropped(void)
{
    pthread_mutex_lock(&lock);
    unsigned long n = dropped;
    int said = dropped_said;
    dropped_said = n > 0;
    pthread_mutex_unlock(&lock);
    if (n && !said)
        netmutex_log(NETMUTEX_LOG_WARN, "lock order checking: %lu new orders left out "
                     "(at most %d kept, %d waiting): inversions among them go unseen",
                     n, ORDERS_MAX, QUEUE_MAX);
}

static int64_t lockdep_run(int64_t bound)
{
    int64_t now = nm_now_ms();
    if (!bound_cfg)
        return NM_FOREVER;
    pthread_mutex_lock(&lock);
    size_t n = n_all, queued = n_queued;
    pthread_mutex_unlock(&lock);
    int renew = now >= next_pass;
    if (now < retry_at)
        return retry_at;
    if (!renew && !queued)
        return next_pass;
    say_dropped();
    /* Bounded by the jobs before it, but given the time of one request. */
    int64_t deadline = NM_MIN(NM_MAX(bound, now + 50), now + (int64_t)bound_cfg->io_timeout_ms);
    int failed = 0;
    for (size_t i = 0; i < n && !failed && nm_remaining_ms(deadline) > 0; i++) {
        pthread_mutex_lock(&lock);
        order_t *o = all[i];
        int fresh = o->queued;
        pthread_mutex_unlock(&lock);
        if (!renew && !fresh)
            continue;
        if (publish(o, deadline) != 0) {
            failed = 1;
            break;
        }
        if (fresh) {
            pthread_mutex_lock(&lock);
            o->queued = 0;
            n_queued--;
            pthread_mutex_unlock(&lock);
        }
    }
    now = nm_now_ms();
    if (renew && !failed)
        next_pass = now + period_ms();
    /* A server that failed is tried again a period later, not at once. */
    retry_at = failed ? now + period_ms() : 0;
    pthread_mutex_lock(&lock);
    queued = n_queued;
    pthread_mutex_unlock(&lock);
    return failed ? retry_at : queued ? now : next_pass;
}

static int64_t lockdep_due(void)
{
    pthread_mutex_lock(&lock);
    size_t queued = n_queued;
    pthread_mutex_unlock(&lock);
    if (!bound_cfg)
        return NM_FOREVER;
    int64_t now = nm_now_ms();
    return NM_MAX(retry_at, queued ? now : next_pass);
}

static void lockdep_bind(nm_config_t *cfg)
{
    bound_cfg = cfg;
    next_pass = retry_at = 0; /* a new configuration: publish everything there now */
    pthread_mutex_lock(&lock);
    for (size_t i = 0; cfg && i < n_all; i++) {
        all[i]->checked = 0; /* the job's fields, looked at again there */
        free(all[i]->other);
        all[i]->other = NULL;
    }
    pthread_mutex_unlock(&lock);
}

static const nm_job_t lockdep_job = {
    .bind = lockdep_bind,
    .run = lockdep_run,
    .due = lockdep_due,
};

void nm_lockdep_register(void)
{
    const char *env = getenv("NETMUTEX_LOCKDEP");
    Dl_info info;
    void *frames[2];
    if (!env || !*env || strcmp(env, "0") == 0)
        return;
    if (strcmp(env, "1") != 0) {
        netmutex_log(NETMUTEX_LOG_WARN, "NETMUTEX_LOCKDEP=%s: not 1, lock order checking "
                     "stays off", env);
        return;
    }
    if (dladdr((void *)nm_lockdep_register, &info))
        own_base = info.dli_fbase;
    backtrace(frames, 2); /* loads what it needs now, not under a lock */
    if (gethostname(host, sizeof host - 1) != 0)
        snprintf(host, sizeof host, "?");
    nm_watchdog_add_job(&lockdep_job);
    nm_lockdep_on = 1;
}

void nm_lockdep_before_fork(void)
{
    pthread_mutex_lock(&lock);
}

void nm_lockdep_after_fork_parent(void)
{
    pthread_mutex_unlock(&lock);
}

void nm_lockdep_after_fork_child(void)
{
    for (size_t i = 0; i < n_all; i++) {
        free(all[i]->a);
        free(all[i]->b);
        free(all[i]->value);
        free(all[i]->other);
        free(all[i]);
    }
    free(all);
    all = NULL;
    n_all = cap_all = n_queued = 0;
    memset(buckets, 0, sizeof buckets);
    dropped = 0;
    dropped_said = 0;
    bound_cfg = NULL;
    next_pass = retry_at = 0;
    /* Unlocked, not initialised again: the forking thread took it in
     * nm_lockdep_before_fork, and TSan would count it held for good. */
    pthread_mutex_unlock(&lock);
}
