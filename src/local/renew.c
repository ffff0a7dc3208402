/*
 * renew.c -- the renewal job of the background thread (renew.h): the
 * records of tracked leases, renewal rounds, lost leases and their
 * callbacks.
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
 *
 * Waking the thread.  A record tracked while the thread sleeps past its
 * due time lowers next_check under the records' lock, then asks the thread
 * to look by then (nm_watchdog_look_by); the thread asks due() again after
 * it said when it sleeps until (watchdog.c's top comment).
 *
 * Locks: the records' lock (HACKING.md, "Lock order", the renewal job's);
 * nm_renew_track() starts the thread under it, which takes the thread's
 * lock next.  Callbacks run with no lock of this module held.
 */
#include "nm.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "cluster.h"
#include "cluster_route.h"
#include "conn.h"
#include "dial.h"
#include "lease.h"
#include "log.h"
#include "quorum.h"
#include "redlock.h"
#include "renew.h"
#include "reply.h"
#include "script.h"
#include "sentinel.h"
#include "settings.h"
#include "stats.h"
#include "watchdog.h"

/* With nothing to renew the thread still looks this often (next_look_locked). */
#define IDLE_CHECK_MS 1000
#define RENEW_RETRY_MS 500

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
    /* the records' lock */
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
    watch_t **recs;
    size_t nrecs, cap;
    int64_t next_check;   /* no record needs anything before this */
} rd = { PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 0 };

/* Owned by the thread alone (and by a child after fork, which has no
 * thread): the configuration it is bound to (watchdog.h), and one renewal
 * connection per server. */
typedef struct renew_io {
    redisContext *renew;
    int64_t renew_retry_at;
} renew_io_t;

static struct {
    nm_config_t *cfg;
    renew_io_t srv[NM_SERVERS_MAX];
} io;

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

static void free_ctx(redisContext **c)
{
    if (*c)
        nm_dial_close(*c);
    *c = NULL;
}

/* ---- records ------------------------------------------------------------ */

static int reserve_locked(void)
{
    if (rd.nrecs < rd.cap)
        return 0;
    size_t cap = rd.cap ? rd.cap * 2 : 64;
    watch_t **recs = realloc(rd.recs, cap * sizeof *recs);
    if (!recs)
        return ENOMEM;
    rd.recs = recs;
    rd.cap = cap;
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

int nm_renew_track(nm_lease_t *l, const char *name, const nm_watch_opts_t *opts)
{
    watch_t *w = watch_new(l, name, opts);
    int64_t due = NM_FOREVER;
    if (!w)
        return ENOMEM;
    pthread_mutex_lock(&rd.lock);
    int err = reserve_locked();
    if (!err)
        err = nm_watchdog_start();
    if (!err) {
        w->index = rd.nrecs;
        rd.recs[rd.nrecs++] = w;
        due = NM_MIN(w->next_renew, lost_at(w));
        rd.next_check = NM_MIN(rd.next_check, due);
        l->watch = w;
    }
    pthread_mutex_unlock(&rd.lock);
    if (err) {
        watch_unref(w);
        return err;
    }
    /* The thread may be asleep for longer (idle, it waits forever). */
    nm_watchdog_look_by(due);
    return 0;
}

void nm_renew_untrack(nm_lease_t *l)
{
    watch_t *w = l->watch;
    if (!w)
        return;
    pthread_mutex_lock(&rd.lock);
    w->released = 1;
    watch_t *last = rd.recs[--rd.nrecs];
    rd.recs[w->index] = last;
    last->index = w->index;
    watch_unref(w);
    pthread_mutex_unlock(&rd.lock);
    l->watch = NULL;
}

int nm_renew_lost(const nm_lease_t *l)
{
    return l->watch && __atomic_load_n(&l->watch->lost, __ATOMIC_ACQUIRE);
}

int64_t nm_renew_valid_ms(const nm_lease_t *l)
{
    if (!l->watch || nm_renew_lost(l))
        return 0;
    return NM_MAX(lost_at(l->watch) - nm_now_ms(), 0);
}

void nm_renew_extended(nm_lease_t *l, int64_t sent_at, unsigned int ms)
{
    watch_t *w = l->watch;
    if (!w)
        return;
    pthread_mutex_lock(&rd.lock);
    expiry_set_locked(w, sent_at, ms);
    pthread_mutex_unlock(&rd.lock);
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
    nm_stats_lost(w->opts.stat);
    w->lost_why = why;
    list_add(w, out);
}

/* Runs the callbacks the list was made for: on a WANTED list cache.c's,
 * else the lost-lease ones.  A lease lost while it was only cached is
 * reported too: it may have been lost while a thread still held it, and
 * only this job can tell (an unlock that keeps the lease asks nobody). */
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
    pthread_mutex_lock(&rd.lock);
    for (size_t i = 0; i < list->n; i++)
        watch_unref(list->items[i]);
    pthread_mutex_unlock(&rd.lock);
    free(list->items);
    memset(list, 0, sizeof *list);
}

/* Under the lock: declares lost what ran out by the clock, and recomputes
 * when the next record needs attention. */
static void scan_locked(int64_t now, lost_list_t *lost)
{
    int64_t next = now + IDLE_CHECK_MS;
    for (size_t i = 0; i < rd.nrecs; i++) {
        watch_t *w = rd.recs[i];
        if (w->lost)
            continue;
        if (now >= lost_at(w)) {
            declare_lost(w, "not renewed in time (server unreachable or too slow)", lost);
            continue;
        }
        next = NM_MIN(next, NM_MIN(w->next_renew, lost_at(w)));
    }
    rd.next_check = next;
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
    r->recs = malloc(rd.nrecs * sizeof *r->recs);
    r->result = malloc(rd.nrecs * sizeof *r->result);
    if (!r->recs || !r->result)
        return; /* nothing renewed this time; the next pass retries */
    r->deadline = NM_FOREVER;
    for (size_t i = 0; i < rd.nrecs; i++) {
        watch_t *w = rd.recs[i];
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
    renew_io_t *s = &io.srv[i];
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
    size_t got;
    if (!reply || nm_reply_array(reply, &got) != 0 || got != n)
        return;
    for (size_t i = 0; i < n; i++) {
        if (nm_reply_integer_at(reply, i, &v) != 0)
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

/* Queues every batch of the round on server I's renewal connection C. */
static redisContext *send_round(size_t i, redisContext *c, const round_t *r, size_t batches)
{
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
    int64_t per_server = nm_quorum_server_bound(io.cfg);
    int *ok = calloc(3 * r->n, sizeof *ok);
    nm_fan_t f = { .n = n };

    /* The servers connected already are sent their renewals first, the
     * leases' validity counting from then; the others are dialed after,
     * each dial with its own bound (quorum.h) but not past the leases'
     * deadline, and each renewal then has the server's bound from when it
     * is sent: a slow dial, or a server that accepts and says nothing,
     * costs the others nothing (nm_fan_run takes the answers that came
     * meanwhile). */
    r->sent_at = nm_now_ms();
    int64_t until = NM_MIN(r->sent_at + per_server, NM_MAX(r->deadline, r->sent_at + 1));
    for (size_t i = 0; ok && i < n; i++) {
        f.out[i] = calloc(batches, sizeof *f.out[i]);
        f.want[i] = batches;
        if (f.out[i] && io.srv[i].renew)
            f.ctx[i] = send_round(i, renew_connect(i, until), r, batches);
        if (f.ctx[i] && nm_send(f.ctx[i], until) != 0)
            f.err[i] = NM_ECONN;
    }
    for (size_t i = 0; ok && i < n; i++) {
        if (!f.out[i] || f.ctx[i] || f.err[i])
            continue;
        int64_t now = nm_now_ms();
        f.ctx[i] = send_round(i, renew_connect(i, NM_MIN(now + nm_quorum_dial_bound(io.cfg),
                                                         NM_MAX(r->deadline, now + 1))),
                              r, batches);
        now = nm_now_ms();
        f.until[i] = NM_MIN(now + per_server, NM_MAX(r->deadline, now + 1));
    }
    if (ok)
        nm_fan_run(&f, until);
    for (size_t i = 0; ok && i < n; i++) {
        for (size_t b = 0; b < f.got[i]; b++) {
            count_batch(f.out[i][b], b * NM_RENEW_BATCH, batch_len(r, b), ok, ok + r->n,
                        ok + 2 * r->n);
            if (f.out[i][b])
                freeReplyObject(f.out[i][b]);
        }
        /* Flushed: reload, retry soon.  Otherwise, or if the load fails,
         * replies are pending or the stream broke. */
        int64_t now = nm_now_ms();
        if (f.err[i] && f.ctx[i] &&
            (f.err[i] != ENOENT ||
             nm_script_load(f.ctx[i], NM_SCRIPT_RENEW,
                            NM_MIN(now + per_server, NM_MAX(r->deadline, now + 1))) != 0))
            free_ctx(&io.srv[i].renew);
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
            nm_stats_renewed(w->opts.stat);
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
    pthread_mutex_lock(&rd.lock);
    if (now >= rd.next_check)
        collect_due_locked(now, &r);
    pthread_mutex_unlock(&rd.lock);
    if (r.n)
        renew_io(&r);
    pthread_mutex_lock(&rd.lock);
    now = nm_now_ms();
    if (r.recs)
        apply_round_locked(&r, now, lost, wanted);
    if (r.recs || now >= rd.next_check)
        scan_locked(now, lost);
    pthread_mutex_unlock(&rd.lock);
}

/* ---- the job --------------------------------------------------------------- */

/* When the thread must look again.  Even with nothing to renew it looks
 * every IDLE_CHECK_MS: then a lease taken meanwhile that is due later (all
 * but the shortest) need not wake it -- a pipe write and two context
 * switches per acquisition, the most of an uncontended cycle's client-side
 * cost. */
static int64_t next_look_locked(void)
{
    return rd.nrecs ? rd.next_check : nm_now_ms() + IDLE_CHECK_MS;
}

/* The job's due(): a lease tracked since the last pass lowered next_check
 * (see the top). */
static int64_t renew_job_due(void)
{
    pthread_mutex_lock(&rd.lock);
    int64_t next = next_look_locked();
    pthread_mutex_unlock(&rd.lock);
    return next;
}

/* A pass: renews what is due, declares lost what ran out, then runs the
 * callbacks that asked for (lost leases first, then cache.c's). */
static int64_t renew_job_run(int64_t bound)
{
    lost_list_t lost = { 0 }, wanted = { 0 };
    (void)bound; /* first of the jobs: nothing comes before it */
    renew_due(nm_now_ms(), &lost, &wanted);
    run_callbacks(&lost, 0);
    run_callbacks(&wanted, 1);
    return renew_job_due();
}

static void close_connections(void)
{
    for (size_t i = 0; i < NM_SERVERS_MAX; i++)
        free_ctx(&io.srv[i].renew);
}

/* New settings, new connections (NULL: the thread ends). */
static void renew_job_bind(nm_config_t *cfg)
{
    close_connections();
    memset(&io, 0, sizeof io);
    io.cfg = cfg;
}

static const nm_job_t renew_job = {
    .bind = renew_job_bind,
    .run = renew_job_run,
    .due = renew_job_due,
};

void nm_renew_register(void)
{
    nm_watchdog_add_job(&renew_job);
}

/* ---- fork ----------------------------------------------------------------- */

void nm_renew_before_fork(void)
{
    pthread_mutex_lock(&rd.lock);
}

void nm_renew_after_fork_parent(void)
{
    pthread_mutex_unlock(&rd.lock);
}

/* What a forked child keeps of the thread's connections, only so that they
 * stay reachable (see nm_renew_after_fork_child).  volatile: nothing reads
 * them, and the compiler would otherwise drop the stores. */
static redisContext *volatile orphans[NM_SERVERS_MAX];

/* The child inherits no thread.  Its copies of the parent's records are
 * dropped without a word to the server: the leases are the parent's, and
 * the parent's thread keeps renewing them.  The thread's contexts may have
 * been in the middle of an update when fork() copied them, so the child
 * only closes their descriptors and keeps the memory (reachable, never
 * freed) instead of walking possibly half-updated structures; the
 * configuration they were bound to is watchdog.c's to keep. */
void nm_renew_after_fork_child(void)
{
    for (size_t i = 0; i < rd.nrecs; i++) {
        rd.recs[i]->refs = 1;
        watch_unref(rd.recs[i]);
    }
    free(rd.recs);
    rd.recs = NULL;
    rd.nrecs = rd.cap = 0;
    rd.next_check = 0;
    for (size_t i = 0; i < NM_SERVERS_MAX; i++)
        orphans[i] = io.srv[i].renew;
    for (size_t i = 0; i < NM_SERVERS_MAX; i++)
        if (orphans[i] && orphans[i]->fd >= 0)
            close(orphans[i]->fd);
    memset(&io, 0, sizeof io);
    pthread_mutex_unlock(&rd.lock);
}
