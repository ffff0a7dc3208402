/*
 * watchdog.c -- the background thread: lease renewal, lost-lease detection
 * and the wake-up subscriber; in sentinel mode, also the releases of the
 * last seconds, sent again when the sentinels name a new master (journal.h).
 *
 * Records.  Every tracked lease has a record with its own copy of what a
 * renewal needs, so the thread never touches a caller's lease.  Records sit
 * in one array (swap-removed through their index); a renewal round takes a
 * reference on the records it renews, so an unlock during the round only
 * marks its record released and the round drops it afterwards.
 *
 * Timing.  A lease is renewed RENEW_PERCENT of its length after the last
 * request that set it was sent, and is lost at (that send + lease - margin)
 * if no renewal got through.  Measuring from the send, not the reply, keeps
 * the local estimate on the safe side of the server's expiry.  Rounds are
 * coalesced: a round renews every record due within the next eighth of its
 * interval, pipelined in batches of NM_RENEW_BATCH keys per script call.
 */
#include "nm.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cache.h"
#include "clock.h"
#include "cluster.h"
#include "cluster_route.h"
#include "config.h"
#include "conn.h"
#include "journal.h"
#include "lease.h"
#include "log.h"
#include "quorum.h"
#include "redlock.h"
#include "reply.h"
#include "script.h"
#include "sentinel.h"
#include "wake.h"
#include "watchdog.h"

#define IDLE_CHECK_MS 1000
/* Renewal batches keep argument arrays of 3 * NM_RENEW_BATCH entries on the
 * stack (about 24 KiB); sanitizers want far more (TSan asks for ~900 KiB).
 * Only the pages touched cost memory. */
#define WATCHDOG_STACK (2 * 1024 * 1024)
#define SUB_BACKOFF_MIN_MS 50
#define SUB_BACKOFF_MAX_MS 1000

struct nm_watch {
    /* fixed once tracked; key and name point into text, in the record's
     * own allocation (one malloc chunk per held lock, not three) */
    const char *key;
    const char *name;
    size_t key_len;
    int64_t interval;     /* renew this long after the last renewal left */
    int64_t margin;       /* lost this long before the lease would end */
    nm_watch_opts_t opts;
    unsigned int lease_ms;
    /* watchdog lock */
    int refs;
    size_t index;
    int64_t valid_until;  /* atomic: read by the owner without the lock */
    int64_t set_at;       /* when the latest request that set it left */
    int64_t next_renew;
    const char *lost_why; /* for the log line, once lost */
    int lost;             /* atomic */
    int released;
    char lease_str[12];   /* lease_ms in decimal */
    char token[NM_TOKEN_LEN + 1];
    char text[];          /* the key, NUL, the name, NUL */
};

typedef struct nm_watch watch_t;

static struct {
    pthread_mutex_t lock;
    pthread_t thread;
    int running, stop, exiting;
    int pipe[2];          /* wakes the thread; -1 when not made yet */
    watch_t **recs;
    size_t nrecs, cap;
    int64_t next_check;   /* no record needs anything before this */
    int64_t sleep_until;  /* when the sleeping thread will look again;
                             atomic, read without the lock too */
    void *stack;          /* the thread's stack, reused by every restart */
} wd = { PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0, { -1, -1 }, NULL, 0, 0, 0, 0, NULL };

/* Owned by the thread alone (and by a child after fork, which has no
 * thread).  One renewal and one subscriber connection per server; in
 * cluster mode ("sharded") one subscriber per master that serves the slot
 * of a name listened to, its address in host and port (wake.h). */
typedef struct server_io {
    redisContext *renew;
    int64_t renew_retry_at;
    redisContext *sub;
    int64_t sub_retry_at;
    int64_t sub_backoff;
    int port;
    char host[NM_CLUSTER_HOST_MAX];
} server_io_t;

static struct {
    nm_config_t *cfg;
    server_io_t srv[NM_WAKE_SUBS_MAX];
    int sharded;          /* the subscribers are a cluster's masters */
    size_t nsubs;         /* ... this many of them, srv[0..nsubs) */
} io;

#define RENEW_RETRY_MS 500
#define SETTLE_GAP_US 20
/* The least time a pass of re-sent releases gets (resend_releases). */
#define RESEND_MIN_MS 100

/* The pipe's write end, + 1 (0 before it exists), for journal_noted(),
 * which may take no lock. */
static int nudge_fd; /* atomic */

/* What an unlock that would keep a lease cached needs to know first: the
 * subscriber sockets, published here for other threads to poll (a stale
 * descriptor only costs a wrong guess), and how many reads of them the
 * thread has finished, with a condition to wait for the next. */
static int sub_fds[NM_WAKE_SUBS_MAX]; /* atomic: descriptor + 1, 0 for none */
static pthread_once_t reads_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t reads_lock = PTHREAD_MUTEX_INITIALIZER; /* a leaf */
static pthread_cond_t reads_cv;  /* CLOCK_MONOTONIC */
static uint64_t reads_done_n;    /* reads_lock */
static int reading;              /* atomic: between a poll that returned
                                    and the end of what it returned */

static void reads_init(void)
{
    nm_cond_init_monotonic(&reads_cv);
}

static void publish_sub_fds(size_t n)
{
    for (size_t i = 0; i < NM_WAKE_SUBS_MAX; i++) {
        int fd = i < n && io.srv[i].sub ? io.srv[i].sub->fd : -1;
        __atomic_store_n(&sub_fds[i], fd + 1, __ATOMIC_RELEASE);
    }
}

static void reads_done(void)
{
    pthread_once(&reads_once, reads_init);
    pthread_mutex_lock(&reads_lock);
    __atomic_store_n(&reading, 0, __ATOMIC_RELEASE);
    reads_done_n++;
    pthread_cond_broadcast(&reads_cv);
    pthread_mutex_unlock(&reads_lock);
}

static int sub_readable(void)
{
    struct pollfd fds[NM_WAKE_SUBS_MAX];
    nfds_t n = 0;
    for (size_t i = 0; i < NM_WAKE_SUBS_MAX; i++) {
        int fd = __atomic_load_n(&sub_fds[i], __ATOMIC_ACQUIRE) - 1;
        if (fd >= 0)
            fds[n++] = (struct pollfd){ fd, POLLIN, 0 };
    }
    return n > 0 && poll(fds, n, 0) > 0;
}

void nm_watchdog_settle(int64_t until)
{
    /* A loop of locks and unlocks looks at most every SETTLE_GAP_US: a
     * request arriving meanwhile waits that much longer at the most, and
     * the loop runs at millions of cycles a second instead of one system
     * call per cycle. */
    static int64_t looked_at; /* atomic */
    int64_t now = nm_now_us();
    if (now - __atomic_load_n(&looked_at, __ATOMIC_RELAXED) < SETTLE_GAP_US)
        return;
    __atomic_store_n(&looked_at, now, __ATOMIC_RELAXED);
    pthread_once(&reads_once, reads_init);
    pthread_mutex_lock(&reads_lock);
    uint64_t seen = reads_done_n;
    int busy = __atomic_load_n(&reading, __ATOMIC_ACQUIRE);
    pthread_mutex_unlock(&reads_lock);
    /* Read already, but not handled yet; or not read yet. */
    if (!busy && !sub_readable())
        return;
    nm_watchdog_poke();
    struct timespec ts = nm_deadline_timespec(until);
    pthread_mutex_lock(&reads_lock);
    while (reads_done_n == seen && pthread_cond_timedwait(&reads_cv, &reads_lock, &ts) == 0)
        ;
    pthread_mutex_unlock(&reads_lock);
}


static int64_t margin_ms(const watch_t *w)
{
    return w->margin;
}

static int64_t valid_until(const watch_t *w)
{
    return __atomic_load_n(&w->valid_until, __ATOMIC_ACQUIRE);
}

static void set_valid_until(watch_t *w, int64_t t)
{
    __atomic_store_n(&w->valid_until, t, __ATOMIC_RELEASE);
}

/* A request sent at SENT_AT set W's expiry to MS from when the server ran
 * it.  The latest request wins at the server, so it wins here too, whether
 * it lengthened the lease or shortened it (netmutex_extend with less than
 * what was left, or a renewal after an extension). */
static void expiry_set_locked(watch_t *w, int64_t sent_at, unsigned int ms)
{
    if (sent_at < w->set_at)
        return;
    w->set_at = sent_at;
    set_valid_until(w, sent_at + ms);
}

static int64_t lost_at(const watch_t *w)
{
    return valid_until(w) - margin_ms(w);
}

static void watch_unref(watch_t *w)
{
    if (--w->refs == 0)
        free(w);
}

/* ---- waking and starting the thread ------------------------------------ */

static void poke_locked(void)
{
    char byte = 1;
    if (wd.pipe[1] >= 0 && write(wd.pipe[1], &byte, 1) < 0) {
        /* full pipe: the thread has wake-ups pending anyway */
    }
}

static void *watchdog_main(void *arg);

/* journal.h's hook, after a release was noted: the thread asks the
 * sentinels within NM_SENTINEL_RECHECK_MS from now on (resend_releases),
 * so it must not sleep past that.  No lock: a release may run under any of
 * the library's locks.  A thread awake (its sleep_until passed) is woken
 * too: it may have looked at the journal before this note. */
static void journal_noted(void)
{
    int fd = __atomic_load_n(&nudge_fd, __ATOMIC_ACQUIRE) - 1;
    int64_t now = nm_now_ms(), sleep_until = __atomic_load_n(&wd.sleep_until, __ATOMIC_ACQUIRE);
    char byte = 1;
    if (fd >= 0 && (now + NM_SENTINEL_RECHECK_MS < sleep_until || sleep_until <= now) &&
        write(fd, &byte, 1) < 0) {
        /* full pipe: the thread has wake-ups pending anyway */
    }
}

static void stop_at_exit(void)
{
    pthread_mutex_lock(&wd.lock);
    wd.exiting = 1;
    pthread_mutex_unlock(&wd.lock);
    nm_watchdog_stop();
}

/* The thread runs on a stack of its own making rather than one from
 * glibc's cache.  After fork(), a child that starts its own watchdog would
 * otherwise get the parent's cached watchdog stack, hence the same pthread_t
 * as a thread that ThreadSanitizer still believes alive ("dup thread with
 * used id"): users run their tests under TSan.  A fresh mapping can never
 * land on the inherited one, which the child leaves in place. */
static int create_thread(void)
{
    pthread_attr_t attr;
    if (!wd.stack) {
        void *p = mmap(NULL, WATCHDOG_STACK, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (p == MAP_FAILED)
            return EAGAIN;
        wd.stack = p;
    }
    pthread_attr_init(&attr);
    int err = pthread_attr_setstack(&attr, wd.stack, WATCHDOG_STACK);
    if (!err)
        err = pthread_create(&wd.thread, &attr, watchdog_main, NULL);
    pthread_attr_destroy(&attr);
    return err ? EAGAIN : 0; /* the documented "no background thread" */
}

static int start_locked(void)
{
    static int atexit_done;
    sigset_t all, old;

    if (wd.running)
        return 0;
    if (wd.exiting)
        return EAGAIN;
    if (wd.pipe[0] < 0 && pipe2(wd.pipe, O_CLOEXEC | O_NONBLOCK) != 0)
        return errno == EMFILE || errno == ENFILE ? EAGAIN : errno;
    __atomic_store_n(&nudge_fd, wd.pipe[1] + 1, __ATOMIC_RELEASE);
    nm_journal_set_hook(journal_noted);
    /* The thread must never take the program's signals. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int err = create_thread();
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err)
        return err;
    wd.running = 1;
    wd.stop = 0;
    if (!atexit_done)
        atexit_done = atexit(stop_at_exit) == 0;
    return 0;
}

void nm_watchdog_look_by(int64_t t)
{
    /* Read without the lock first: this runs at every unlock that keeps a
     * lease cached, and the thread mostly looks soon enough. */
    if (t >= __atomic_load_n(&wd.sleep_until, __ATOMIC_ACQUIRE))
        return;
    pthread_mutex_lock(&wd.lock);
    if (t < wd.sleep_until)
        poke_locked();
    pthread_mutex_unlock(&wd.lock);
}

int nm_watchdog_poke(void)
{
    pthread_mutex_lock(&wd.lock);
    int err = start_locked();
    if (!err)
        poke_locked();
    pthread_mutex_unlock(&wd.lock);
    return err;
}

static void free_ctx(redisContext **c)
{
    if (*c)
        redisFree(*c);
    *c = NULL;
}

static void io_close_connections(void)
{
    for (size_t i = 0; i < NM_WAKE_SUBS_MAX; i++) {
        free_ctx(&io.srv[i].renew);
        free_ctx(&io.srv[i].sub);
    }
}

static void io_close(void)
{
    publish_sub_fds(0);
    io_close_connections();
    nm_config_unref(io.cfg);
    memset(&io, 0, sizeof io);
}

void nm_watchdog_stop(void)
{
    pthread_mutex_lock(&wd.lock);
    int running = wd.running;
    wd.stop = 1;
    poke_locked();
    pthread_mutex_unlock(&wd.lock);
    if (running) {
        pthread_join(wd.thread, NULL);
        pthread_mutex_lock(&wd.lock);
        wd.running = 0;
        pthread_mutex_unlock(&wd.lock);
    }
    if (running)
        nm_wake_disconnected(NM_WAKE_ALL);
}

/* ---- records ------------------------------------------------------------ */

static int reserve_locked(void)
{
    if (wd.nrecs < wd.cap)
        return 0;
    size_t cap = wd.cap ? wd.cap * 2 : 64;
    watch_t **recs = realloc(wd.recs, cap * sizeof *recs);
    if (!recs)
        return ENOMEM;
    wd.recs = recs;
    wd.cap = cap;
    return 0;
}

static watch_t *watch_new(const nm_lease_t *l, const char *name, const nm_watch_opts_t *o)
{
    size_t name_len = strlen(name);
    watch_t *w = calloc(1, sizeof *w + l->key_len + name_len + 2);
    if (!w)
        return NULL;
    memcpy(w->text, l->key, l->key_len);
    memcpy(w->text + l->key_len + 1, name, name_len);
    w->key = w->text;
    w->name = w->text + l->key_len + 1;
    w->key_len = l->key_len;
    memcpy(w->token, l->token, sizeof w->token);
    w->lease_ms = l->lease_ms;
    w->interval = NM_MAX((int64_t)l->lease_ms * l->cfg->renew_percent / 100, 1);
    /* Covers clock drift between us and the servers (drift_factor, 1% and
     * 2 ms by default, as Redlock allows) and the time this thread needs to
     * notice and report: at least 5% plus 2 ms. */
    w->margin = NM_MAX((int64_t)l->lease_ms / 20 + 2, nm_redlock_drift(l->cfg, l->lease_ms));
    snprintf(w->lease_str, sizeof w->lease_str, "%u", l->lease_ms);
    w->opts = *o;
    w->refs = 1;
    w->valid_until = l->sent_at + l->lease_ms;
    w->set_at = l->sent_at;
    w->next_renew = o->autorenew ? l->sent_at + w->interval : NM_FOREVER;
    return w;
}

int nm_watchdog_track(nm_lease_t *l, const char *name, const nm_watch_opts_t *opts)
{
    watch_t *w = watch_new(l, name, opts);
    if (!w)
        return ENOMEM;
    pthread_mutex_lock(&wd.lock);
    int err = reserve_locked();
    if (!err)
        err = start_locked();
    if (!err) {
        w->index = wd.nrecs;
        wd.recs[wd.nrecs++] = w;
        int64_t due = NM_MIN(w->next_renew, lost_at(w));
        wd.next_check = NM_MIN(wd.next_check, due);
        /* The thread may be asleep for longer (idle, it waits forever). */
        if (due < wd.sleep_until)
            poke_locked();
        l->watch = w;
    }
    pthread_mutex_unlock(&wd.lock);
    if (err)
        watch_unref(w);
    return err;
}

void nm_watchdog_untrack(nm_lease_t *l)
{
    watch_t *w = l->watch;
    if (!w)
        return;
    pthread_mutex_lock(&wd.lock);
    w->released = 1;
    watch_t *last = wd.recs[--wd.nrecs];
    wd.recs[w->index] = last;
    last->index = w->index;
    watch_unref(w);
    pthread_mutex_unlock(&wd.lock);
    l->watch = NULL;
}

int nm_watchdog_lost(const nm_lease_t *l)
{
    return l->watch && __atomic_load_n(&l->watch->lost, __ATOMIC_ACQUIRE);
}

int64_t nm_watchdog_valid_ms(const nm_lease_t *l)
{
    if (!l->watch || nm_watchdog_lost(l))
        return 0;
    return NM_MAX(lost_at(l->watch) - nm_now_ms(), 0);
}

void nm_watchdog_extended(nm_lease_t *l, int64_t sent_at, unsigned int ms)
{
    watch_t *w = l->watch;
    if (!w)
        return;
    pthread_mutex_lock(&wd.lock);
    expiry_set_locked(w, sent_at, ms);
    pthread_mutex_unlock(&wd.lock);
}

/* ---- lost leases ----------------------------------------------------------- */

typedef struct lost_list {
    watch_t **items;
    size_t n, cap;
} lost_list_t;

static void list_add(watch_t *w, lost_list_t *out)
{
    if (out->n == out->cap) {
        size_t cap = out->cap ? out->cap * 2 : 16;
        watch_t **items = realloc(out->items, cap * sizeof *items);
        if (!items)
            return; /* the flag is set; only the notification is lost */
        out->items = items;
        out->cap = cap;
    }
    w->refs++;
    out->items[out->n++] = w;
}

/* Marks W lost, once, and queues its report and callback (run without the
 * lock).  WHY says how we know, for the log. */
static void declare_lost(watch_t *w, const char *why, lost_list_t *out)
{
    if (__atomic_exchange_n(&w->lost, 1, __ATOMIC_ACQ_REL))
        return;
    w->lost_why = why;
    list_add(w, out);
}

/* Runs the callbacks the list was made for: on a WANTED list cache.c's,
 * else the lost-lease ones.  A lease lost while it was only cached is
 * reported too: it may have been lost while a thread still held it, and
 * only the watchdog can tell (an unlock that keeps the lease asks nobody). */
static void run_callbacks(lost_list_t *list, int wanted)
{
    for (size_t i = 0; i < list->n; i++) {
        watch_t *w = list->items[i];
        if (wanted) {
            w->opts.wanted(w->opts.wanted_arg, w->token);
        } else {
            netmutex_log(NETMUTEX_LOG_WARN, "lease of '%s' lost: %s", w->name, w->lost_why);
            if (w->opts.lost)
                w->opts.lost(w->name, w->opts.lost_arg);
        }
    }
    pthread_mutex_lock(&wd.lock);
    for (size_t i = 0; i < list->n; i++)
        watch_unref(list->items[i]);
    pthread_mutex_unlock(&wd.lock);
    free(list->items);
    memset(list, 0, sizeof *list);
}

/* Under the lock: declares lost what ran out by the clock, and recomputes
 * when the next record needs attention. */
static void scan_locked(int64_t now, lost_list_t *lost)
{
    int64_t next = now + IDLE_CHECK_MS;
    for (size_t i = 0; i < wd.nrecs; i++) {
        watch_t *w = wd.recs[i];
        if (w->lost)
            continue;
        if (now >= lost_at(w)) {
            declare_lost(w, "not renewed in time (server unreachable or too slow)", lost);
            continue;
        }
        next = NM_MIN(next, NM_MIN(w->next_renew, lost_at(w)));
    }
    wd.next_check = next;
}

/* ---- renewal rounds -------------------------------------------------------- */

typedef struct round {
    watch_t **recs;
    int *result;     /* 1 renewed, 2 renewed and waited for, 0 lost, -1
                        unknown (no answer) */
    size_t n;
    int64_t sent_at;
    int64_t deadline; /* the earliest lost_at among them */
} round_t;

static void collect_due_locked(int64_t now, round_t *r)
{
    r->recs = malloc(wd.nrecs * sizeof *r->recs);
    r->result = malloc(wd.nrecs * sizeof *r->result);
    if (!r->recs || !r->result)
        return; /* nothing renewed this time; the next pass retries */
    r->deadline = NM_FOREVER;
    for (size_t i = 0; i < wd.nrecs; i++) {
        watch_t *w = wd.recs[i];
        if (w->lost || w->next_renew - w->interval / 8 > now)
            continue;
        w->refs++;
        r->result[r->n] = -1;
        r->recs[r->n++] = w;
        r->deadline = NM_MIN(r->deadline, lost_at(w));
    }
}

static redisContext *renew_connect(size_t i, int64_t deadline)
{
    server_io_t *s = &io.srv[i];
    if (s->renew && nm_sentinel_moved(io.cfg, &io.cfg->servers[i], s->renew, deadline))
        free_ctx(&s->renew); /* a failover: renew at the new master */
    if (s->renew || nm_now_ms() < s->renew_retry_at)
        return s->renew;
    int err = nm_conn_dial(io.cfg, &io.cfg->servers[i], deadline, &s->renew);
    if (!err)
        err = nm_script_load(s->renew, NM_SCRIPT_RENEW, deadline);
    if (err) {
        free_ctx(&s->renew);
        s->renew_retry_at = nm_now_ms() + RENEW_RETRY_MS;
    }
    return s->renew;
}

static int send_batch(redisContext *c, const round_t *r, size_t from, size_t n)
{
    const char *argv[3 * NM_RENEW_BATCH];
    size_t lens[3 * NM_RENEW_BATCH];
    for (size_t i = 0; i < n; i++) {
        const watch_t *w = r->recs[from + i];
        argv[i] = w->key;
        lens[i] = w->key_len;
        argv[n + 2 * i] = w->token;
        lens[n + 2 * i] = NM_TOKEN_LEN;
        argv[n + 2 * i + 1] = w->lease_str;
        lens[n + 2 * i + 1] = strlen(w->lease_str);
    }
    return nm_script_append(c, NM_SCRIPT_RENEW, (int)n, (int)(3 * n), argv, lens);
}

/* Adds batch REPLY (renewing records FROM..FROM+N) to the votes: per
 * record, how many servers renewed it, how many said it is not ours, and
 * how many that others wait for it. */
static void count_batch(const redisReply *reply, size_t from, size_t n, int *ok, int *gone,
                        int *waited)
{
    long long v;
    if (!reply || reply->type != REDIS_REPLY_ARRAY || reply->elements != n)
        return;
    for (size_t i = 0; i < n; i++) {
        if (nm_reply_integer(reply->element[i], &v) != 0)
            continue;
        ok[from + i] += v == 1 || v == 2;
        gone[from + i] += v != 1 && v != 2;
        waited[from + i] += v == 2;
    }
}

/* How many records batch B of round R renews (it starts at record
 * B * NM_RENEW_BATCH). */
static size_t batch_len(const round_t *r, size_t b)
{
    return NM_MIN(NM_RENEW_BATCH, r->n - b * NM_RENEW_BATCH);
}

/* Queues every batch of the round on server I's renewal connection. */
static redisContext *send_round(size_t i, const round_t *r, size_t batches, int64_t until)
{
    redisContext *c = renew_connect(i, until);
    for (size_t b = 0; c && b < batches; b++) {
        if (send_batch(c, r, b * NM_RENEW_BATCH, batch_len(r, b)) != 0) {
            free_ctx(&io.srv[i].renew);
            c = NULL;
        }
    }
    return c;
}

/* Per record: renewed by a quorum (1), refused by so many that a quorum
 * is out of reach (0: lost), or not known this time (-1). */
static void decide(round_t *r, const int *ok, const int *gone, const int *waited)
{
    size_t n = io.cfg->nservers, q = io.cfg->quorum;
    for (size_t k = 0; k < r->n; k++)
        r->result[k] = (size_t)ok[k] >= q ? 1 + (waited[k] > 0)
                                          : (size_t)gone[k] > n - q ? 0 : -1;
}

/* All batches go out to every server in one pipeline each, then poll()
 * collects every answer: a round costs one round trip however many leases
 * and servers it covers. */
static void renew_io_cluster(round_t *r);

static void renew_io(round_t *r)
{
    if (nm_cluster_on(io.cfg)) {
        renew_io_cluster(r);
        return;
    }
    size_t batches = (r->n + NM_RENEW_BATCH - 1) / NM_RENEW_BATCH, n = io.cfg->nservers;
    int64_t per_server = n > 1 ? io.cfg->server_timeout_ms : io.cfg->io_timeout_ms;
    int64_t until = NM_MIN(nm_now_ms() + per_server, NM_MAX(r->deadline, nm_now_ms() + 1));
    int *ok = calloc(3 * r->n, sizeof *ok);
    nm_fan_t f = { .n = n };

    for (size_t i = 0; ok && i < n; i++) {
        f.out[i] = calloc(batches, sizeof *f.out[i]);
        f.want[i] = batches;
        f.ctx[i] = f.out[i] ? send_round(i, r, batches, until) : NULL;
    }
    r->sent_at = nm_now_ms();
    if (ok)
        nm_fan_run(&f, until);
    for (size_t i = 0; ok && i < n; i++) {
        for (size_t b = 0; b < f.got[i]; b++) {
            count_batch(f.out[i][b], b * NM_RENEW_BATCH, batch_len(r, b), ok, ok + r->n,
                        ok + 2 * r->n);
            if (f.out[i][b])
                freeReplyObject(f.out[i][b]);
        }
        if (f.err[i] == ENOENT && f.ctx[i])
            nm_script_load(f.ctx[i], NM_SCRIPT_RENEW, until); /* flushed: reload, retry soon */
        else if (f.err[i] && f.ctx[i])
            free_ctx(&io.srv[i].renew); /* replies pending or the stream broken */
        free(f.out[i]);
    }
    if (ok)
        decide(r, ok, ok + r->n, ok + 2 * r->n);
    free(ok);
}

/* Cluster mode: the round goes to each lease's node (cluster.h). */
static void renew_io_cluster(round_t *r)
{
    int64_t until = NM_MIN(nm_now_ms() + io.cfg->io_timeout_ms,
                           NM_MAX(r->deadline, nm_now_ms() + 1));
    nm_renewal_t *items = calloc(r->n, sizeof *items);
    for (size_t i = 0; items && i < r->n; i++)
        items[i] = (nm_renewal_t){ r->recs[i]->key, r->recs[i]->key_len, r->recs[i]->token,
                                   r->recs[i]->lease_str, -1 };
    if (items)
        nm_cluster_renew(io.cfg, items, r->n, until, &r->sent_at);
    for (size_t i = 0; items && i < r->n; i++)
        r->result[i] = items[i].result;
    free(items);
}

static void apply_round_locked(round_t *r, int64_t now, lost_list_t *lost, lost_list_t *wanted)
{
    for (size_t i = 0; i < r->n; i++) {
        watch_t *w = r->recs[i];
        if (!w->released && r->result[i] >= 1) {
            expiry_set_locked(w, r->sent_at, w->lease_ms);
            w->next_renew = r->sent_at + w->interval;
            if (r->result[i] == 2 && w->opts.wanted)
                list_add(w, wanted);
        } else if (!w->released && r->result[i] == 0) {
            declare_lost(w, "the key expired or holds another owner's token", lost);
        } else if (!w->released) {
            /* No answer: try again soon, well before the lease runs out. */
            w->next_renew = now + NM_MIN(w->interval / 4 + 1, 100);
        }
        watch_unref(w);
    }
    free(r->recs);
    free(r->result);
}

static void renew_due(int64_t now, lost_list_t *lost, lost_list_t *wanted)
{
    round_t r = { 0 };
    pthread_mutex_lock(&wd.lock);
    if (now >= wd.next_check)
        collect_due_locked(now, &r);
    pthread_mutex_unlock(&wd.lock);
    if (r.n)
        renew_io(&r);
    pthread_mutex_lock(&wd.lock);
    now = nm_now_ms();
    if (r.recs)
        apply_round_locked(&r, now, lost, wanted);
    if (r.recs || now >= wd.next_check)
        scan_locked(now, lost);
    pthread_mutex_unlock(&wd.lock);
}

/* ---- the subscriber ------------------------------------------------------- */

static void sub_drop(size_t i, int64_t now)
{
    server_io_t *s = &io.srv[i];
    free_ctx(&s->sub);
    nm_wake_disconnected(i);
    s->sub_backoff = NM_MIN(NM_MAX(s->sub_backoff * 2, SUB_BACKOFF_MIN_MS), SUB_BACKOFF_MAX_MS);
    s->sub_retry_at = now + s->sub_backoff;
}

/* Cluster mode: the subscriber of the master that serves SLOT, added to
 * the table if new (wake.h's route; runs on the thread, under the wake
 * table's lock, and takes the cluster state's, a leaf). */
static int route_slot(unsigned int slot, void *arg)
{
    char host[NM_CLUSTER_HOST_MAX];
    int port;
    (void)arg;
    if (nm_cluster_slot_master(io.cfg, slot, host, &port) != 0)
        return -1;
    for (size_t i = 0; i < io.nsubs; i++)
        if (io.srv[i].port == port && strcmp(io.srv[i].host, host) == 0)
            return (int)i;
    if (io.nsubs == NM_WAKE_SUBS_MAX)
        return -1; /* not listened to: its leases are not kept cached */
    memcpy(io.srv[io.nsubs].host, host, sizeof host);
    io.srv[io.nsubs].port = port;
    return (int)io.nsubs++;
}

/* Subscriber I's connection: server I's, or in cluster mode its master's. */
static int sub_dial(size_t i, int64_t deadline, redisContext **out)
{
    if (io.sharded)
        return nm_conn_dial_node(io.cfg, io.srv[i].host, io.srv[i].port, deadline, out);
    return nm_conn_dial(io.cfg, &io.cfg->servers[i], deadline, out);
}

/* Connects subscriber I when channels are wanted there, and sends what is
 * due.  Returns when it next needs attention.  Dialing never blocks past
 * the next lease check (nor, in quorum mode, the server timeout), so a dead
 * server cannot delay a lost-lease notice. */
static int64_t sub_maintain(size_t i, int64_t now, int64_t next_check)
{
    server_io_t *s = &io.srv[i];
    nm_wake_route_fn route = io.sharded ? route_slot : NULL;
    int64_t next = NM_FOREVER;
    if (io.sharded ? !nm_wake_wanted_on(i, route, NULL) : !nm_wake_wanted()) {
        free_ctx(&s->sub);
        return next;
    }
    int64_t bound = io.cfg->nservers > 1 ? io.cfg->server_timeout_ms : io.cfg->connect_timeout_ms;
    int64_t deadline = NM_MIN(now + bound, NM_MAX(next_check, now + 5));
    /* A failover: requests for our cached leases are published at the new
     * master now; dropping the old subscription takes them out of the
     * cache (cache.c) until the new one is confirmed. */
    if (s->sub && !io.sharded && nm_sentinel_moved(io.cfg, &io.cfg->servers[i], s->sub, deadline))
        sub_drop(i, now);
    if (!s->sub) {
        if (now < s->sub_retry_at)
            return s->sub_retry_at;
        if (sub_dial(i, deadline, &s->sub) != 0) {
            s->sub = NULL;
            sub_drop(i, now);
            return s->sub_retry_at;
        }
        s->sub_backoff = 0;
    }
    if (nm_wake_flush(s->sub, i, route, NULL, deadline, &next) != 0) {
        sub_drop(i, now);
        return s->sub_retry_at;
    }
    return next;
}

/* Cluster mode or not, as found out at the first dial: the subscribers of
 * the other mode are closed (their channels are wanted again). */
static void subs_follow_mode(void)
{
    int sharded = nm_cluster_on(io.cfg);
    if (sharded == io.sharded)
        return;
    for (size_t i = 0; i < NM_WAKE_SUBS_MAX; i++)
        free_ctx(&io.srv[i].sub);
    publish_sub_fds(0);
    nm_wake_disconnected(NM_WAKE_ALL);
    io.sharded = sharded;
    io.nsubs = 0;
}

/* How many subscribers there are: one per server, or per master known. */
static size_t subs_count(void)
{
    return io.sharded ? io.nsubs : io.cfg->nservers;
}

static int64_t subs_maintain(int64_t next_check)
{
    int64_t next = NM_FOREVER;
    subs_follow_mode();
    if (io.sharded && nm_wake_wanted()) {
        int64_t now = nm_now_ms();
        nm_cluster_refresh_stale(io.cfg, NM_MIN(now + io.cfg->connect_timeout_ms,
                                                NM_MAX(next_check, now + 5)));
        nm_wake_route(route_slot, NULL);
    }
    for (size_t i = 0; i < subs_count(); i++)
        next = NM_MIN(next, sub_maintain(i, nm_now_ms(), next_check));
    return next;
}

/* ---- releases after a failover (journal.h) --------------------------------- */

/* With a redis-sentinel:// server and releases noted recently, asks the
 * sentinels where the master is (every NM_SENTINEL_RECHECK_MS), and sends
 * again to it the releases noted while they named an older one.  Bounded
 * like the subscriber's dialing, so that a silent sentinel or master cannot
 * delay a lost-lease notice much.  Returns when to look again. */
static int64_t resend_releases(int64_t now, int64_t next_check)
{
    const nm_server_t *srv = &io.cfg->servers[0];
    if (!srv->sentinel || !nm_journal_pending(io.cfg->generation, now))
        return NM_FOREVER;
    int64_t deadline = NM_MIN(now + (int64_t)io.cfg->connect_timeout_ms,
                              NM_MAX(next_check, now + RESEND_MIN_MS));
    uint64_t gen = nm_sentinel_recheck(io.cfg, srv, deadline);
    nm_journal_entry_t *due;
    size_t n, sent = 0;
    if (gen && nm_journal_due(io.cfg->generation, gen, now, &due, &n) == 0) {
        for (size_t i = 0; i < n && nm_remaining_ms(deadline) > 0; i++) {
            if (nm_lease_resend(io.cfg, &due[i], deadline) == 0) {
                nm_journal_sent(due[i].seq, gen);
                sent++;
            }
        }
        /* Said once per pass that sent any: one that sent none (the new
         * master does not answer yet) is tried again in a moment. */
        if (sent)
            netmutex_log(NETMUTEX_LOG_INFO, "a new master: %zu of %zu recent releases sent "
                         "to it again", sent, n);
        nm_journal_free(due, n);
    }
    return nm_now_ms() + NM_SENTINEL_RECHECK_MS;
}

/* What a subscriber's read learnt about the slot map. */
static void subs_remap(const nm_wake_remap_t *remap)
{
    if (!io.sharded)
        return;
    if (remap->moved[0])
        nm_cluster_moved(io.cfg, remap->moved);
    if (remap->stale)
        nm_cluster_mark_stale(io.cfg);
}

/* ---- the thread ------------------------------------------------------------ */

/* Follows netmutex_configure(): new settings, new connections. */
static void bind_config(void)
{
    nm_config_t *cfg;
    if (io.cfg && io.cfg->generation == nm_config_current_generation())
        return;
    if (nm_config_current(&cfg) != 0)
        return;
    io_close();
    io.cfg = cfg;
    nm_wake_disconnected(NM_WAKE_ALL);
}

/* Sleeps until UNTIL, a poke, or a message on a subscriber. */
static void wait_events(int64_t until)
{
    struct pollfd fds[1 + NM_WAKE_SUBS_MAX] = { { wd.pipe[0], POLLIN, 0 } };
    size_t n = io.cfg ? subs_count() : 0;
    nm_wake_remap_t remap;
    int64_t left = nm_remaining_ms(until);
    int timeout = until == NM_FOREVER ? -1 : (int)NM_MIN(left, 60000);
    char buf[64];

    for (size_t i = 0; i < n; i++)
        fds[1 + i] = (struct pollfd){ io.srv[i].sub ? io.srv[i].sub->fd : -1, POLLIN, 0 };
    publish_sub_fds(n);
    if (poll(fds, 1 + n, timeout) > 0) {
        __atomic_store_n(&reading, 1, __ATOMIC_RELEASE);
        if (fds[0].revents)
            while (read(wd.pipe[0], buf, sizeof buf) > 0)
                ;
        for (size_t i = 0; i < n; i++) {
            if (!fds[1 + i].revents)
                continue;
            if (nm_wake_read(io.srv[i].sub, i, &remap) != 0)
                sub_drop(i, nm_now_ms());
            subs_remap(&remap);
        }
    }
    reads_done();
}

/* When the thread must look again.  Even with nothing to renew it looks
 * every IDLE_CHECK_MS: then a lease taken meanwhile that is due later (all
 * but the shortest) need not wake it -- a pipe write and two context
 * switches per acquisition, the most of an uncontended cycle's client-side
 * cost. */
static int64_t next_look_locked(void)
{
    return wd.nrecs ? wd.next_check : nm_now_ms() + IDLE_CHECK_MS;
}

static int stop_requested(void)
{
    pthread_mutex_lock(&wd.lock);
    int stop = wd.stop;
    pthread_mutex_unlock(&wd.lock);
    return stop;
}

static void *watchdog_main(void *arg)
{
    lost_list_t lost = { 0 }, wanted = { 0 };
    (void)arg;
    while (!stop_requested()) {
        bind_config();
        if (!io.cfg) {
            wait_events(nm_now_ms() + IDLE_CHECK_MS);
            continue;
        }
        renew_due(nm_now_ms(), &lost, &wanted);
        run_callbacks(&lost, 0);
        run_callbacks(&wanted, 1);
        int64_t swept = nm_cache_sweep(nm_now_ms());
        pthread_mutex_lock(&wd.lock);
        int64_t next = NM_MIN(next_look_locked(), swept);
        pthread_mutex_unlock(&wd.lock);
        next = NM_MIN(next, resend_releases(nm_now_ms(), next));
        next = NM_MIN(next, subs_maintain(next));
        pthread_mutex_lock(&wd.lock);
        /* A lease tracked from now on pokes us if it is due earlier; one
         * tracked since we read next_check lowered it, so take it again. */
        next = NM_MIN(next, next_look_locked());
        __atomic_store_n(&wd.sleep_until, next, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&wd.lock);
        wait_events(next);
    }
    io_close();
    return NULL;
}

/* ---- fork ----------------------------------------------------------------- */

void nm_watchdog_before_fork(void)
{
    pthread_mutex_lock(&wd.lock);
}

void nm_watchdog_after_fork_parent(void)
{
    pthread_mutex_unlock(&wd.lock);
}

/* What a forked child keeps of the thread's state, only so that it stays
 * reachable (see nm_watchdog_after_fork_child).  volatile: nothing reads
 * them, and the compiler would otherwise drop the stores. */
static nm_config_t *volatile orphaned_cfg;
static redisContext *volatile orphans[2 * NM_WAKE_SUBS_MAX];

/* The child inherits no thread.  Its copies of the parent's records are
 * dropped without a word to the server: the leases are the parent's, and
 * the parent's watchdog keeps renewing them.  The thread's contexts may have
 * been in the middle of an update when fork() copied them, so the child
 * only closes their descriptors and keeps the memory (reachable, never
 * freed) instead of walking possibly half-updated structures. */
void nm_watchdog_after_fork_child(void)
{
    for (size_t i = 0; i < wd.nrecs; i++) {
        wd.recs[i]->refs = 1;
        watch_unref(wd.recs[i]);
    }
    free(wd.recs);
    wd.recs = NULL;
    wd.nrecs = wd.cap = 0;
    wd.next_check = 0;
    wd.running = wd.stop = 0;
    wd.stack = NULL; /* the parent's mapping stays, unused (see create_thread) */
    nudge_fd = 0;
    if (wd.pipe[0] >= 0) {
        close(wd.pipe[0]);
        close(wd.pipe[1]);
        wd.pipe[0] = wd.pipe[1] = -1;
    }
    for (size_t i = 0; i < NM_WAKE_SUBS_MAX; i++) {
        orphans[2 * i] = io.srv[i].renew;
        orphans[2 * i + 1] = io.srv[i].sub;
    }
    for (size_t i = 0; i < 2 * NM_WAKE_SUBS_MAX; i++)
        if (orphans[i] && orphans[i]->fd >= 0)
            close(orphans[i]->fd);
    /* The thread may have been swapping io.cfg when fork() copied it: its
     * reference is kept (reachable), never dropped, for the same reason. */
    orphaned_cfg = io.cfg;
    memset(&io, 0, sizeof io);
    pthread_mutex_unlock(&wd.lock);
}
