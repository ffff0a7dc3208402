/* deadlock.c -- the deadlock job and its waiters (deadlock.h). */
#include "nm.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "config.h"
#include "deadlock.h"
#include "entry.h"
#include "held.h"
#include "lease.h"
#include "log.h"
#include "stats.h"
#include "waitfor.h"
#include "waiting.h"
#include "watchdog.h"

/* Most hops a walk takes: a longer cycle goes unseen. */
#define WALK_HOPS_MAX 64
#define ID_MAX 160

struct nm_deadlock_wait {
    struct nm_deadlock_wait *next; /* lock */
    int victim;          /* atomic: set by the job, read by the waiter */
    int ended;           /* lock: the waiter is gone; the job deletes */
    int busy;            /* lock: the job works on it, unlocked */
    int published;       /* lock (written by the job) */
    unsigned long pass;  /* the job: the pass it was last looked at */
    int64_t since;       /* when the wait began (monotonic ms) */
    int64_t renew_at, walk_at; /* the job's */
    char *text;          /* the job: the record as published */
    size_t text_len;
    char *sig;           /* the job: the cycle the last walk found */
    nm_entry_t *entry;   /* a local wait's entry (alive: the waiter's
                            handle holds it), or NULL */
    nm_waitrec_t rec;    /* names point into names[] */
    char id[ID_MAX];
    char names[];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static nm_deadlock_wait_t *waits; /* lock */
static nm_config_t *bound_cfg;    /* the job's (bind) */
static unsigned long passes;      /* the job's */

/* ---- the environment ------------------------------------------------------ */

static int everywhere;
/* Read once per process: a child after fork reads its own environment
 * again at its first use, as a process that set NETMUTEX_DEADLOCK after
 * fork() expects -- even when its parent read it before the library was
 * otherwise in use (an attribute asked), so the hook is the variable's
 * own, set up at the first read. */
static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static int env_hooked; /* survives fork: one hook per process tree */

static void env_after_fork_child(void)
{
    /* The child's only thread: nobody is inside pthread_once. */
    env_once = (pthread_once_t)PTHREAD_ONCE_INIT;
}

static void read_env(void)
{
    if (!env_hooked && pthread_atfork(NULL, NULL, env_after_fork_child) == 0)
        env_hooked = 1;
    everywhere = 0;
    const char *v = getenv("NETMUTEX_DEADLOCK");
    if (!v || !*v)
        return;
    if (strcmp(v, "detect") == 0)
        everywhere = 1;
    else if (strcmp(v, "default") != 0)
        netmutex_log(NETMUTEX_LOG_WARN,
                     "NETMUTEX_DEADLOCK=\"%s\" ignored (\"detect\" or \"default\")", v);
}

int nm_deadlock_everywhere(void)
{
    pthread_once(&env_once, read_env);
    return everywhere;
}

/* ---- the waiting thread --------------------------------------------------- */

typedef struct holds {
    size_t n, bytes;
    const nm_held_t *h[NM_WAITREC_HELD_MAX];
} holds_t;

/* A hold's kind as records spell it, or 0 for one the graph leaves out
 * (a semaphore permit: any permit given back ends a wait, so a cycle
 * through one is no deadlock). */
static char hold_kind(const nm_held_t *h)
{
    switch (h->kind) {
    case NM_HELD_MUTEX: return NM_WAIT_MUTEX;
    case NM_HELD_READ: return NM_WAIT_READ;
    case NM_HELD_WRITE: return NM_WAIT_WRITE;
    default: return 0;
    }
}

static int count_hold(const nm_held_t *h, void *arg)
{
    holds_t *hs = arg;
    if (!hold_kind(h) || hs->n == NM_WAITREC_HELD_MAX)
        return 0;
    hs->h[hs->n++] = h;
    hs->bytes += strlen(h->name) + 1;
    return 0;
}

static void free_wait(nm_deadlock_wait_t *w)
{
    free(w->text);
    free(w->sig);
    free(w);
}

int nm_deadlock_chosen(const nm_deadlock_wait_t *w)
{
    return w && __atomic_load_n(&w->victim, __ATOMIC_ACQUIRE);
}

nm_deadlock_wait_t *nm_deadlock_begin(char kind, const char *name, size_t len,
                                      nm_entry_t *entry, int on)
{
    nm_config_t *cfg;
    if (!on || nm_config_current(&cfg) != 0)
        return NULL;
    /* Quorum mode: no server alone says who waits. */
    int quorum = cfg->nservers > 1;
    char id[ID_MAX];
    nm_lease_holder(cfg, id, sizeof id);
    nm_config_unref(cfg);
    if (quorum)
        return NULL;

    holds_t hs = { 0 };
    nm_held_each(count_hold, &hs);
    nm_deadlock_wait_t *w = calloc(1, sizeof *w + len + 1 + hs.bytes);
    if (!w)
        return NULL;
    memcpy(w->id, id, sizeof id);
    char *p = w->names;
    memcpy(p, name, len);
    w->rec.wait = p;
    w->rec.wait_len = len;
    w->rec.wait_kind = kind;
    p += len + 1;
    for (size_t i = 0; i < hs.n; i++) {
        size_t n = strlen(hs.h[i]->name);
        memcpy(p, hs.h[i]->name, n);
        w->rec.held[i] = p;
        w->rec.held_len[i] = n;
        w->rec.held_kind[i] = hold_kind(hs.h[i]);
        p += n + 1;
    }
    w->rec.nheld = hs.n;
    w->since = nm_now_ms();
    w->entry = entry;

    pthread_mutex_lock(&lock);
    w->next = waits;
    waits = w;
    pthread_mutex_unlock(&lock);
    /* Only a wait that holds something can be in a cycle: one that is
     * watched looks at the server often (lease.h), the others seldom. */
    if (!entry && hs.n > 0)
        nm_wait_stop_flag(&w->victim);
    if (nm_watchdog_start() == 0)
        nm_watchdog_look_by(w->since + NM_DEADLOCK_DELAY_MS);
    return w;
}

static void unlink_locked(nm_deadlock_wait_t *w)
{
    nm_deadlock_wait_t **p = &waits;
    while (*p && *p != w)
        p = &(*p)->next;
    if (*p)
        *p = w->next;
}

int nm_deadlock_end(nm_deadlock_wait_t *w, int err)
{
    if (!w)
        return err;
    if (!w->entry)
        nm_wait_stop_flag(NULL);
    int victim = __atomic_load_n(&w->victim, __ATOMIC_ACQUIRE);
    int later = 0;
    if (victim && err == EDEADLK)
        nm_stats_deadlock(w->rec.wait_kind == NM_WAIT_MUTEX ? NETMUTEX_KIND_MUTEX
                                                            : NETMUTEX_KIND_RWLOCK,
                          w->rec.wait, w->rec.wait_len);
    pthread_mutex_lock(&lock);
    if (!w->busy && !w->published) {
        unlink_locked(w);
        free_wait(w);
    } else {
        w->ended = 1;
        later = 1;
    }
    pthread_mutex_unlock(&lock);
    if (later)
        nm_watchdog_look_by(nm_now_ms());
    return victim && err == EDEADLK ? EDEADLK : err;
}

/* ---- the job ----------------------------------------------------------------- */

static int64_t due_of(const nm_deadlock_wait_t *w)
{
    if (w->ended)
        return w->published ? 0 : NM_FOREVER;
    if (!w->published)
        return w->since + NM_DEADLOCK_DELAY_MS;
    return NM_MIN(w->renew_at, w->walk_at);
}

static int publish(nm_config_t *cfg, nm_deadlock_wait_t *w, int64_t now)
{
    if (!w->text) {
        if (nm_waitfor_seq(cfg, &w->rec.seq) != 0)
            return -1;
        w->text = nm_waitrec_format(&w->rec, &w->text_len);
        if (!w->text)
            return -1;
    }
    if (nm_waitfor_publish(cfg, w->id, w->text, w->text_len, &w->rec, NM_DEADLOCK_TTL_MS) != 0)
        return -1;
    w->renew_at = now + NM_DEADLOCK_TTL_MS / 4;
    return 0;
}

/* Appends "<id>#<seq>;" to *SIG (of *LEN bytes): 0 or ENOMEM. */
static int sig_add(char **sig, size_t *len, const char *id, size_t id_len, long long seq)
{
    char *s = realloc(*sig, *len + id_len + 32);
    if (!s)
        return ENOMEM;
    *sig = s;
    memcpy(s + *len, id, id_len);
    *len += id_len;
    *len += (size_t)sprintf(s + *len, "#%lld;", seq);
    return 0;
}

/* One waiter on the walk's path: its record, and the waiters that may
 * hold what it waits for, tried in order. */
typedef struct step {
    char *id;          /* NULL for W itself */
    char *text;        /* the record REC was parsed from */
    nm_waitrec_t rec;
    char **next;
    size_t nnext, at;
} step_t;

static void step_free(step_t *s)
{
    free(s->id);
    free(s->text);
    nm_waitfor_ids_free(s->next, s->nnext);
}

static int listed(char *const *ids, size_t n, const char *id)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] && strcmp(ids[i], id) == 0)
            return 1;
    return 0;
}

/* Waiter ID's step, when it holds what FROM waits for and waits itself
 * (its record is live: it expires with its wait): 0, or -1 (no edge). */
static int step_to(nm_config_t *cfg, const step_t *from, const char *id, step_t *out)
{
    size_t len;
    memset(out, 0, sizeof *out);
    if (nm_waitfor_record(cfg, id, strlen(id), &out->text, &len) != 0 || !out->text ||
        nm_waitrec_parse(out->text, len, &out->rec) != 0 ||
        !nm_waitrec_blocks(&out->rec, from->rec.wait_kind, from->rec.wait, from->rec.wait_len) ||
        nm_waitfor_holders(cfg, out->rec.wait_kind, out->rec.wait, out->rec.wait_len, &out->next,
                           &out->nnext) != 0 ||
        !(out->id = strdup(id))) {
        step_free(out);
        return -1;
    }
    return 0;
}

/* The cycle PATH[1..DEPTH-1] as "<id>#<seq>;" each, in *SIG, and whether
 * W (PATH[0]) has the highest sequence: 0 or ENOMEM. */
static int cycle_of(const step_t *path, size_t depth, char **sig, int *youngest)
{
    size_t len = 0;
    long long top = path[0].rec.seq;
    *sig = strdup(""); /* a cycle of W alone cannot be (relock is EDEADLK) */
    for (size_t i = 1; *sig && i < depth; i++) {
        if (sig_add(sig, &len, path[i].id, strlen(path[i].id), path[i].rec.seq) != 0) {
            free(*sig);
            *sig = NULL;
        }
        top = NM_MAX(top, path[i].rec.seq);
    }
    *youngest = top == path[0].rec.seq;
    return *sig ? 0 : ENOMEM;
}

/* Walks the graph from W, depth first, successors in byte order (so that
 * a graph that did not change gives the same cycle twice): 1 with the
 * cycle in *SIG (malloc'ed) and *YOUNGEST whether W has the highest
 * sequence in it, 0 when no walk comes back to W (an edge missing, stale
 * or unreadable: no cycle is assumed).  A waiter whose every way failed is
 * not tried again; a cycle that W is not part of is its own members' to
 * find.  At most WALK_HOPS_MAX records are read. */
static int walk(nm_config_t *cfg, const nm_deadlock_wait_t *w, char **sig, int *youngest)
{
    step_t *path = calloc(WALK_HOPS_MAX, sizeof *path);
    char *dead[WALK_HOPS_MAX] = { 0 };
    size_t depth = 1, ndead = 0, reads = 0;
    int found = 0;
    *sig = NULL;
    if (!path)
        return 0;
    path[0].rec = w->rec;
    if (nm_waitfor_holders(cfg, w->rec.wait_kind, w->rec.wait, w->rec.wait_len, &path[0].next,
                           &path[0].nnext) != 0)
        depth = 0;
    while (depth > 0 && !found) {
        step_t *s = &path[depth - 1];
        if (s->at == s->nnext) {
            if (depth > 1 && ndead < WALK_HOPS_MAX) {
                dead[ndead++] = s->id;
                s->id = NULL;
            }
            step_free(s);
            depth--;
            continue;
        }
        const char *id = s->next[s->at++];
        if (strcmp(id, w->id) == 0) {
            found = nm_waitrec_blocks(&w->rec, s->rec.wait_kind, s->rec.wait, s->rec.wait_len);
            continue;
        }
        int on_path = 0;
        for (size_t i = 1; i < depth; i++)
            on_path |= strcmp(path[i].id, id) == 0;
        if (on_path || listed(dead, ndead, id) || reads == WALK_HOPS_MAX ||
            depth == WALK_HOPS_MAX)
            continue;
        reads++;
        if (step_to(cfg, s, id, &path[depth]) == 0)
            depth++;
    }
    if (found && cycle_of(path, depth, sig, youngest) != 0)
        found = 0;
    for (size_t i = 1; i < depth; i++)
        step_free(&path[i]);
    if (depth > 0)
        nm_waitfor_ids_free(path[0].next, path[0].nnext);
    for (size_t i = 0; i < ndead; i++)
        free(dead[i]);
    free(path);
    return found;
}

/* The job's look at W (busy: the waiter may end meanwhile, not free it). */
static void look_at(nm_config_t *cfg, nm_deadlock_wait_t *w, int ended, int64_t now)
{
    if (ended) {
        nm_waitfor_delete(cfg, w->id, &w->rec);
        return;
    }
    if (!w->published || now >= w->renew_at) {
        if (publish(cfg, w, now) != 0) {
            w->renew_at = now + NM_DEADLOCK_WALK_MS;
            return;
        }
        if (!w->published) {
            pthread_mutex_lock(&lock);
            w->published = 1;
            pthread_mutex_unlock(&lock);
            w->walk_at = now;
        }
    }
    if (now < w->walk_at || __atomic_load_n(&w->victim, __ATOMIC_ACQUIRE))
        return;
    w->walk_at = now + NM_DEADLOCK_WALK_MS;
    char *sig;
    int youngest = 0;
    if (!walk(cfg, w, &sig, &youngest) || !youngest) {
        free(w->sig);
        w->sig = NULL;
        free(sig);
        return;
    }
    /* The same cycle a pass ago: it did not break meanwhile. */
    if (w->sig && strcmp(w->sig, sig) == 0) {
        netmutex_log(NETMUTEX_LOG_WARN,
                     "deadlock: %s#%lld waiting for \"%.*s\" ends its wait (EDEADLK); the others: %s",
                     w->id, w->rec.seq, (int)w->rec.wait_len, w->rec.wait, sig);
        __atomic_store_n(&w->victim, 1, __ATOMIC_RELEASE);
        if (w->entry) { /* a local wait: wake it */
            pthread_mutex_lock(&w->entry->mu);
            pthread_cond_broadcast(&w->entry->cv);
            pthread_mutex_unlock(&w->entry->mu);
        }
    } else {
        /* Read it again soon: confirmation, not a fresh delay. */
        w->walk_at = now + NM_DEADLOCK_WALK_MS / 2;
    }
    free(w->sig);
    w->sig = sig;
}

static void bind(nm_config_t *cfg)
{
    bound_cfg = cfg;
    /* Records published under the old configuration expire there. */
    pthread_mutex_lock(&lock);
    for (nm_deadlock_wait_t *w = waits; w; w = w->next) {
        w->published = 0;
        free(w->text);
        w->text = NULL;
    }
    pthread_mutex_unlock(&lock);
}

static int64_t due(void)
{
    int64_t t = NM_FOREVER;
    pthread_mutex_lock(&lock);
    for (const nm_deadlock_wait_t *w = waits; w; w = w->next)
        if (!w->busy)
            t = NM_MIN(t, due_of(w));
    pthread_mutex_unlock(&lock);
    return t;
}

static int64_t run(int64_t bound)
{
    (void)bound;
    unsigned long pass = ++passes;
    for (;;) {
        int64_t now = nm_now_ms();
        nm_deadlock_wait_t *w;
        pthread_mutex_lock(&lock);
        for (w = waits; w; w = w->next)
            if (!w->busy && w->pass != pass && due_of(w) <= now)
                break;
        if (!w) {
            pthread_mutex_unlock(&lock);
            break;
        }
        w->busy = 1;
        w->pass = pass;
        int ended = w->ended;
        pthread_mutex_unlock(&lock);

        if (bound_cfg)
            look_at(bound_cfg, w, ended, now);

        pthread_mutex_lock(&lock);
        w->busy = 0;
        if (ended)
            w->published = 0;
        if (w->ended && !w->published) {
            unlink_locked(w);
            free_wait(w);
        }
        pthread_mutex_unlock(&lock);
    }
    return due();
}

static const nm_job_t job = { .bind = bind, .run = run, .due = due };

void nm_deadlock_register(void)
{
    nm_watchdog_add_job(&job);
}

void nm_deadlock_before_fork(void)
{
    pthread_mutex_lock(&lock);
}

void nm_deadlock_after_fork_parent(void)
{
    pthread_mutex_unlock(&lock);
}

void nm_deadlock_after_fork_child(void)
{
    /* The parent's waiters are its threads'; their records are its. */
    while (waits) {
        nm_deadlock_wait_t *w = waits;
        waits = w->next;
        free_wait(w);
    }
    bound_cfg = NULL;
    pthread_mutex_unlock(&lock);
}
