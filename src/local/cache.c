/* cache.c -- lease caching (see cache.h for the design). */
#include "nm.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "clock.h"
#include "config.h"
#include "lease.h"
#include "log.h"
#include "renew.h"
#include "shares.h"
#include "stats.h"
#include "subscriber.h"
#include "wake.h"
#include "watchdog.h"

/* How long a name stays listened to after its last cacheable acquisition:
 * a name locked in a loop by several processes in turn keeps its
 * subscription instead of subscribing at every acquisition. */
#define LISTEN_LINGER_MS 2000
#define CHANNEL_SUFFIX ":r"
#define SHARES_SUFFIX ":s"
/* How long a cached lease stays unused before the server is told that no
 * thread of ours is in it (netmutex_status' idle). */
#define IDLE_MARK_MS 100
/* How long an unlock waits for the background thread to read requests
 * that have arrived (nm_subscriber_settle); it is the thread's next step. */
#define SETTLE_MS 50

static pthread_mutex_t sweep_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static nm_entry_t *listed;   /* list_lock; each holds a registry reference */
static int sweep_due;        /* atomic: a request came, sweep at once */

static int64_t sweep_share(nm_entry_t *e, int64_t now, int all);

/* The background thread sweeps at once (cache.h: it has work). */
static void sweep_soon(void)
{
    __atomic_store_n(&sweep_due, 1, __ATOMIC_RELEASE);
    nm_watchdog_poke();
}

/* ---- whether a cached lease may be used -------------------------------- */

/* Under e->mu: a copy of what calls about E's lease need. */
static int view_locked(const nm_entry_t *e, nm_lease_t *view)
{
    const nm_lease_t *l = &nm_entry_mutex(e)->hold.lease;
    if (view->key)
        return 0;
    view->key = malloc(l->key_len);
    if (!view->key)
        return ENOMEM;
    memcpy(view->key, l->key, l->key_len);
    view->key_len = l->key_len;
    memcpy(view->token, l->token, sizeof view->token);
    view->cfg = nm_config_ref(l->cfg);
    return 0;
}


/* Under e->mu: requests for it would reach us, nothing said the lease is
 * gone or wanted, and the watchdog kept it renewed (half of it left at
 * least: renewals run at a third). */
static int usable_locked(const nm_entry_t *e)
{
    const nm_lease_t *l = &nm_entry_mutex(e)->hold.lease;
    return e->cache.listening && !e->cache.revoked && !nm_renew_lost(l) &&
           nm_renew_valid_ms(l) > (int64_t)l->lease_ms / 2;
}

int nm_cache_take_locked(nm_entry_t *e, int allowed, nm_lease_t *stale)
{
    if (nm_entry_mutex(e)->state != NM_CACHED)
        return 0;
    if (allowed && usable_locked(e)) {
        /* The server was told it is idle: tell it otherwise soon (the
         * first lock after a pause only: hot loops never get marked). */
        if (e->cache.marked_idle)
            sweep_soon();
        return 1;
    }
    nm_cache_released_locked(e);
    nm_entry_unkeep(e, NM_ACQUIRING, stale);
    return 0;
}

/* Under e->mu: whether E's lease may be kept cached now. */
static int keepable_locked(const nm_entry_t *e)
{
    /* Not listening (yet, or any more: the subscription was refused or
     * lost): another process could not ask for it back. */
    const nm_hold_t *hold = &nm_entry_mutex(e)->hold;
    return e->cache.able && e->cache.listening && !e->cache.revoked && !hold->inconsistent &&
           !nm_renew_lost(&hold->lease);
}

int nm_cache_keep_locked(nm_entry_t *e)
{
    if (!keepable_locked(e))
        return 0;
    /* A request that Redis handled before this unlock may wait unread on
     * the subscriber: have it read, so that our next lock cannot overtake
     * a process already queued.  The calling thread still owns E, so
     * nothing else changes it meanwhile but such a request. */
    pthread_mutex_unlock(&e->mu);
    nm_subscriber_settle(nm_now_ms() + SETTLE_MS);
    pthread_mutex_lock(&e->mu);
    if (!keepable_locked(e))
        return 0;
    e->cache.idle_since = nm_now_ms();
    /* The thread may sleep past the time to mark this one idle or give it
     * back (it looked when nothing was cached): have it look in time.  In
     * a loop of locks and unlocks that wakes it once per IDLE_MARK_MS. */
    nm_watchdog_look_by(e->cache.idle_since +
                        NM_MIN(IDLE_MARK_MS,
                               (int64_t)nm_entry_mutex(e)->hold.lease.cfg->cache_idle_ms));
    return 1;
}

void nm_cache_give_back(nm_lease_t *l, int64_t deadline)
{
    nm_renew_untrack(l);
    int err = nm_lease_release_by(l, 0, deadline);
    if (err)
        netmutex_log(NETMUTEX_LOG_DEBUG, "giving back a cached lease: %s", netmutex_strerror(err));
}

void nm_cache_acquired_locked(nm_entry_t *e)
{
    const nm_lease_t *l = &nm_entry_mutex(e)->hold.lease;
    e->cache.able = l->cache;
    /* Handed over from the queue with more waiters behind: they asked the
     * previous holder, not us. */
    if (e->cache.able && (l->waited || strcmp(e->cache.asked, l->token) == 0)) {
        nm_stats_revoked(nm_entry_stat(e));
        e->cache.revoked = 1;
    }
    e->cache.asked[0] = '\0';
}

void nm_cache_released_locked(nm_entry_t *e)
{
    e->cache.able = e->cache.revoked = e->cache.marked_idle = 0;
    e->cache.answer[0] = '\0';
}

/* Under e->mu: E's cached lease moves to *OUT, to go back by the
 * background thread or a destroy, not by a thread that wants the lock
 * (RETURNING: a trylock waits for it). */
static void return_locked(nm_entry_t *e, nm_lease_t *out)
{
    nm_cache_released_locked(e);
    nm_entry_unkeep(e, NM_RETURNING, out);
}

/* E's lease, taken out of the cache: back to the server, and E free. */
static void give_back_taken(nm_entry_t *e, nm_lease_t *out)
{
    nm_cache_give_back(out, NM_FOREVER);
    pthread_mutex_lock(&e->mu);
    nm_entry_freed(e);
    pthread_mutex_unlock(&e->mu);
}

void nm_cache_drop(nm_entry_t *e)
{
    if (e->family == NM_FAMILY_RWLOCK) {
        sweep_share(e, nm_now_ms(), 1);
        return;
    }
    nm_lease_t out = { 0 };
    pthread_mutex_lock(&e->mu);
    if (nm_entry_mutex(e)->state == NM_CACHED)
        return_locked(e, &out);
    pthread_mutex_unlock(&e->mu);
    if (out.key)
        give_back_taken(e, &out);
}

void nm_cache_broken(nm_entry_t *e)
{
    pthread_mutex_lock(&e->mu);
    if (e->cache.able)
        e->cache.revoked = 1;
    pthread_mutex_unlock(&e->mu);
    nm_cache_drop(e);
}

/* ---- requests from other processes ------------------------------------- */

/* Under e->mu: the lease of token HOLDER is wanted (KIND 'w' by a waiter,
 * 't' by trylock ASKER, 'b' broken).  Returns whether the sweep has work. */
static int asked_locked(nm_entry_t *e, const char *holder, char kind, const char *asker)
{
    const nm_entry_mutex_t *mx = nm_entry_mutex(e);
    if (!mx->hold.lease.key) {
        /* Being acquired: the request may be for the lease on its way. */
        memcpy(e->cache.asked, holder, NM_TOKEN_LEN);
        e->cache.asked[NM_TOKEN_LEN] = '\0';
        return 0;
    }
    if (!e->cache.able || memcmp(holder, mx->hold.lease.token, NM_TOKEN_LEN) != 0)
        return 0;
    if (!e->cache.revoked)
        nm_stats_revoked(nm_entry_stat(e));
    e->cache.revoked = 1;
    if (kind == 't' && asker && mx->state == NM_HELD) {
        memcpy(e->cache.answer, asker, NM_TOKEN_LEN);
        e->cache.answer[NM_TOKEN_LEN] = '\0';
    }
    return mx->state == NM_CACHED || e->cache.answer[0];
}

/* "<holder> <kind>[<asker>]" (lib.lua, R). */
static void on_message(nm_entry_t *e, const char *msg, size_t len)
{
    if (len < NM_TOKEN_LEN + 2 || msg[NM_TOKEN_LEN] != ' ')
        return;
    const char *asker = len == 2 * NM_TOKEN_LEN + 2 ? msg + NM_TOKEN_LEN + 2 : NULL;
    pthread_mutex_lock(&e->mu);
    int due = asked_locked(e, msg, msg[NM_TOKEN_LEN + 1], asker);
    pthread_mutex_unlock(&e->mu);
    if (due)
        sweep_soon();
}

/* The subscription took: requests published from now on reach us.  One
 * published before, for the lease E holds now, was missed: so E starts
 * listening only once the server said whether anybody is queued for that
 * lease (a lease acquired later learns it from its own acquisition). */
static void on_subscribed(nm_entry_t *e)
{
    nm_lease_t view = { 0 };
    int wanted = 1;
    pthread_mutex_lock(&e->mu);
    int check = e->cache.able && view_locked(e, &view) == 0;
    if (!check)
        e->cache.listening = 1;
    pthread_mutex_unlock(&e->mu);
    if (!check)
        return;
    if (nm_lease_wanted(&view, &wanted) != 0)
        wanted = 1; /* not known: give it back rather than keep it */
    pthread_mutex_lock(&e->mu);
    int due = wanted && asked_locked(e, view.token, 'w', NULL);
    e->cache.listening = 1;
    pthread_mutex_unlock(&e->mu);
    nm_lease_forget(&view);
    if (due)
        sweep_soon();
}

/* ---- read shares of read-write locks -------------------------------------- */

/* Under e->mu: whether a local reader may join E's cached share: requests
 * reach us, no writer asked for it, and it is renewed (half of it left,
 * as a cached lease). */
static int share_usable_locked(const nm_entry_t *e)
{
    const nm_lease_t *l = &nm_entry_holds(e)->rshare->hold.lease;
    return e->cache.listening && !e->cache.revoked && !nm_renew_lost(l) &&
           nm_renew_valid_ms(l) > (int64_t)l->lease_ms / 2;
}

/* Under e->mu: whether E's share, no reader in it, may stay cached. */
static int share_keepable_locked(const nm_entry_t *e)
{
    return e->cache.listening && !e->cache.revoked &&
           !nm_renew_lost(&nm_entry_holds(e)->rshare->hold.lease);
}

/* Under e->mu: E's cached share, taken off E (to go back). */
static nm_hold_node_t *share_detach_locked(nm_entry_t *e)
{
    nm_entry_holds_t *hs = nm_entry_holds(e);
    nm_hold_node_t *n = hs->rshare;
    hs->rshare = NULL;
    hs->rreaders = 0;
    e->cache.revoked = 0;
    return n;
}

int nm_cache_share_join_locked(nm_entry_t *e, int reader, int *sweep)
{
    nm_entry_holds_t *hs = nm_entry_holds(e);
    if (!hs->rshare)
        return 0;
    if (reader && share_usable_locked(e)) {
        hs->rreaders++;
        return 1;
    }
    /* A writer of ours is a writer too: no local reader joins any more. */
    if (!reader)
        e->cache.revoked = 1;
    /* The sweep gives it back, not this call: a lock call spends its time
     * on its own acquisition, within its bound. */
    *sweep = hs->rreaders == 0;
    return 0;
}

void nm_cache_sweep_soon(void)
{
    sweep_soon();
}

int nm_cache_share_install_locked(nm_entry_t *e, nm_hold_node_t *n)
{
    nm_entry_holds_t *hs = nm_entry_holds(e);
    if (hs->rshare)
        return 0;
    hs->rshare = n;
    hs->rreaders = 1;
    e->cache.revoked = 0;
    return 1;
}

nm_hold_node_t *nm_cache_share_leave_locked(nm_entry_t *e, int *lost)
{
    nm_entry_holds_t *hs = nm_entry_holds(e);
    nm_hold_node_t *n = hs->rshare;
    *lost = nm_renew_lost(&n->hold.lease);
    if (--hs->rreaders > 0)
        return NULL;
    if (share_keepable_locked(e)) {
        /* As a mutex's keep: a writer's request that Redis handled before
         * this unlock is read first.  Meanwhile another reader may join
         * the share, or the sweep give it back. */
        pthread_mutex_unlock(&e->mu);
        nm_subscriber_settle(nm_now_ms() + SETTLE_MS);
        pthread_mutex_lock(&e->mu);
        if (hs->rshare != n || hs->rreaders > 0)
            return NULL;
        if (share_keepable_locked(e)) {
            e->cache.idle_since = nm_now_ms();
            nm_watchdog_look_by(e->cache.idle_since + (int64_t)n->hold.lease.cfg->cache_idle_ms);
            return NULL;
        }
    }
    return share_detach_locked(e);
}

int nm_cache_share_give_back(nm_entry_t *e, nm_hold_node_t *n)
{
    int lost = nm_renew_lost(&n->hold.lease);
    nm_renew_untrack(&n->hold.lease);
    int err = nm_shares_release(&n->hold.lease, NM_SHARE_READ, e->name, e->name_len, 0);
    free(n);
    if (err)
        netmutex_log(NETMUTEX_LOG_DEBUG, "giving back a cached read share: %s",
                     netmutex_strerror(err));
    return lost && !err ? ENOLCK : err;
}

/* The channel's events for a rwlock entry: any message is a writer kept
 * out by shares (rwlock.lua); a dropped subscription may miss the next. */
static void on_share_event(nm_entry_t *e, nm_wake_event_t ev)
{
    const nm_entry_holds_t *hs = nm_entry_holds(e);
    pthread_mutex_lock(&e->mu);
    if (ev == NM_WAKE_SUBSCRIBED) {
        e->cache.listening = 1;
    } else {
        if (ev == NM_WAKE_DROPPED)
            e->cache.listening = 0;
        if (hs->rshare)
            e->cache.revoked = 1;
    }
    int due = hs->rshare && hs->rreaders == 0 && e->cache.revoked;
    pthread_mutex_unlock(&e->mu);
    if (due)
        sweep_soon();
}

/* The sweep of a rwlock entry: its cached share, if no reader is in it,
 * goes back when asked for, idle too long or no longer usable (ALL:
 * flush).  Returns when it is next due. */
static int64_t sweep_share(nm_entry_t *e, int64_t now, int all)
{
    int64_t next = NM_FOREVER;
    nm_hold_node_t *back = NULL;
    const nm_entry_holds_t *hs = nm_entry_holds(e);
    pthread_mutex_lock(&e->mu);
    if (hs->rshare && hs->rreaders == 0) {
        int64_t until = e->cache.idle_since + hs->rshare->hold.lease.cfg->cache_idle_ms;
        if (all || now >= until || !share_usable_locked(e))
            back = share_detach_locked(e);
        else
            next = until;
    }
    pthread_mutex_unlock(&e->mu);
    if (back)
        nm_cache_share_give_back(e, back);
    return next;
}

/* The channel's events (wake.h).  A dropped subscription may miss requests
 * from now on, and a server restart (which drops it) may have taken the
 * lease with it: give it back and acquire anew. */
static void on_event(void *arg, nm_wake_event_t ev, const char *msg, size_t len)
{
    nm_entry_t *e = arg;
    int due = 0;
    if (e->family == NM_FAMILY_RWLOCK) {
        on_share_event(e, ev);
        return;
    }
    if (ev == NM_WAKE_MESSAGE) {
        on_message(e, msg, len);
        return;
    }
    if (ev == NM_WAKE_SUBSCRIBED) {
        on_subscribed(e);
        return;
    }
    pthread_mutex_lock(&e->mu);
    e->cache.listening = 0;
    if (e->cache.able) {
        e->cache.revoked = 1;
        due = nm_entry_mutex(e)->state == NM_CACHED;
    }
    pthread_mutex_unlock(&e->mu);
    if (due)
        sweep_soon();
}

void nm_cache_wanted(void *arg, const char *token)
{
    nm_entry_t *e = arg;
    pthread_mutex_lock(&e->mu);
    int due = asked_locked(e, token, 'w', NULL);
    pthread_mutex_unlock(&e->mu);
    if (due)
        sweep_soon();
}

/* ---- the list of names listened to ------------------------------------- */

static void exit_flush(void)
{
    nm_cache_flush();
}

static void install_exit_flush(void)
{
    /* Registered after the watchdog's own exit handler (it starts before
     * any lease exists), so it runs first, while renewals still go on. */
    atexit(exit_flush);
}

static nm_chan_t *listen_for_requests(nm_entry_t *e, const nm_lease_t *l)
{
    /* A read share's key is its lock's share set, K SHARES_SUFFIX. */
    size_t base = l->key_len;
    if (e->family == NM_FAMILY_RWLOCK && base > strlen(SHARES_SUFFIX))
        base -= strlen(SHARES_SUFFIX);
    size_t len = base + strlen(CHANNEL_SUFFIX);
    char *channel = malloc(len + 1);
    if (!channel)
        return NULL;
    memcpy(channel, l->key, base);
    strcpy(channel + base, CHANNEL_SUFFIX);
    nm_chan_t *ch = nm_wake_subscribe(channel, len, on_event, e);
    free(channel);
    return ch;
}

int nm_cache_attach(nm_entry_t *e, const nm_lease_t *l)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, install_exit_flush);
    pthread_mutex_lock(&list_lock);
    e->cache.used = nm_now_ms();
    int was_listed = e->cache.listed;
    pthread_mutex_unlock(&list_lock);
    if (was_listed)
        return 0;

    nm_chan_t *ch = listen_for_requests(e, l);
    if (!ch)
        return ENOMEM;
    nm_registry_ref(e);
    pthread_mutex_lock(&list_lock);
    if (!e->cache.listed) {
        e->cache.listed = 1;
        e->cache.ch = ch;
        e->cache.next = listed;
        listed = e;
        ch = NULL;
    }
    pthread_mutex_unlock(&list_lock);
    if (ch) { /* another thread listed it meanwhile */
        nm_wake_unsubscribe(ch);
        nm_registry_put(e);
    }
    return 0;
}

/* The listed entries, each kept alive by the list's reference for as long
 * as the caller holds sweep_lock (only unlist() drops it). */
static nm_entry_t **snapshot(size_t *n)
{
    size_t cap = 0;
    nm_entry_t **out = NULL;
    pthread_mutex_lock(&list_lock);
    for (nm_entry_t *e = listed; e; e = e->cache.next)
        cap++;
    out = cap ? malloc(cap * sizeof *out) : NULL;
    *n = 0;
    for (nm_entry_t *e = listed; out && e; e = e->cache.next)
        out[(*n)++] = e;
    pthread_mutex_unlock(&list_lock);
    return out;
}

/* Which listed names unlist() stops listening for. */
enum unlist_what {
    UNLIST_LINGERED, /* no cacheable lease for LISTEN_LINGER_MS */
    UNLIST_UNUSED,   /* no cacheable lease now */
    UNLIST_ALL
};

/* Under e->mu: whether E may keep or keeps a lease cached (a mutex), or
 * keeps a read share cached (a rwlock). */
static int in_use_locked(const nm_entry_t *e)
{
    if (e->family == NM_FAMILY_MUTEX)
        return e->cache.able || nm_entry_mutex(e)->state == NM_CACHED;
    return e->cache.able || nm_entry_holds(e)->rshare;
}

/* Under sweep_lock: takes E off the list if WHAT says so, and stops
 * listening for it. */
static void unlist(nm_entry_t *e, int64_t now, enum unlist_what what)
{
    pthread_mutex_lock(&e->mu);
    int in_use = in_use_locked(e);
    pthread_mutex_unlock(&e->mu);
    if (in_use && what != UNLIST_ALL)
        return;
    nm_chan_t *ch = NULL;
    pthread_mutex_lock(&list_lock);
    if (what != UNLIST_LINGERED || now - e->cache.used >= LISTEN_LINGER_MS) {
        nm_entry_t **p = &listed;
        while (*p != e)
            p = &(*p)->cache.next;
        *p = e->cache.next;
        e->cache.listed = 0;
        ch = e->cache.ch;
        e->cache.ch = NULL;
    }
    pthread_mutex_unlock(&list_lock);
    if (!ch)
        return;
    nm_wake_unsubscribe(ch);
    pthread_mutex_lock(&e->mu);
    e->cache.listening = 0;
    pthread_mutex_unlock(&e->mu);
    nm_registry_put(e);
}

/* ---- giving back ----------------------------------------------------------- */

/* Under e->mu: whether E's cached lease is to go back now (ALL: flush);
 * else lowers *NEXT to when it will be. */
static int due_locked(const nm_entry_t *e, int64_t now, int all, int64_t *next)
{
    const nm_entry_mutex_t *mx = nm_entry_mutex(e);
    if (mx->state != NM_CACHED)
        return 0;
    int64_t idle_until = e->cache.idle_since + mx->hold.lease.cfg->cache_idle_ms;
    if (all || now >= idle_until || !usable_locked(e))
        return 1;
    *next = NM_MIN(*next, idle_until);
    return 0;
}

/* What a sweep does for one entry once its mutex is released. */
typedef struct sweep_work {
    nm_lease_t out;                 /* taken out of the cache: give it back */
    nm_lease_t view;                /* the lease's configuration, lock key and
                                       token, for the calls below */
    char asker[NM_TOKEN_LEN + 1];   /* a trylock to tell it is held */
    int mark;                       /* -1 nothing; 1 say idle, 0 say held */
} sweep_work_t;

/* Under e->mu: whether the server should be told that the lease is idle
 * (1), held again (0), or nothing (-1); lowers *NEXT to when it will be. */
static int mark_due_locked(nm_entry_t *e, int64_t now, int64_t *next)
{
    const nm_entry_mutex_t *mx = nm_entry_mutex(e);
    if (mx->state == NM_CACHED && !e->cache.marked_idle) {
        if (now < e->cache.idle_since + IDLE_MARK_MS) {
            *next = NM_MIN(*next, e->cache.idle_since + IDLE_MARK_MS);
            return -1;
        }
        return e->cache.marked_idle = 1;
    }
    if (mx->state != NM_CACHED && e->cache.marked_idle && mx->hold.lease.key) {
        e->cache.marked_idle = 0;
        return 0;
    }
    return -1;
}

/* Under e->mu: what the sweep has to do for E. */
static void plan_locked(nm_entry_t *e, int64_t now, int all, int64_t *next, sweep_work_t *w)
{
    if (due_locked(e, now, all, next)) {
        return_locked(e, &w->out);
        return;
    }
    w->mark = mark_due_locked(e, now, next);
    if (e->cache.answer[0] && nm_entry_mutex(e)->state == NM_HELD)
        memcpy(w->asker, e->cache.answer, sizeof w->asker);
    e->cache.answer[0] = '\0';
    if ((w->mark >= 0 || w->asker[0]) && view_locked(e, &w->view) != 0) {
        w->mark = -1;
        w->asker[0] = '\0';
    }
}

static void do_work(nm_entry_t *e, sweep_work_t *w)
{
    int err = 0;
    if (w->asker[0])
        err = nm_lease_answer_held(&w->view, w->asker);
    if (w->mark >= 0 && !err)
        err = nm_lease_mark_idle(&w->view, w->mark);
    if (err)
        netmutex_log(NETMUTEX_LOG_DEBUG, "telling about a cached lease: %s",
                     netmutex_strerror(err));
    if (w->view.key)
        nm_lease_forget(&w->view);
    if (w->out.key)
        give_back_taken(e, &w->out);
}

/* Gives back E's cached lease if it is due, answers a waiting trylock and
 * tells the server whether the lease is idle.  Returns when E is next due. */
static int64_t sweep_one(nm_entry_t *e, int64_t now, int all)
{
    if (e->family == NM_FAMILY_RWLOCK)
        return sweep_share(e, now, all);
    sweep_work_t w = { .mark = -1 };
    int64_t next = NM_FOREVER;

    pthread_mutex_lock(&e->mu);
    plan_locked(e, now, all, &next, &w);
    pthread_mutex_unlock(&e->mu);
    do_work(e, &w);
    return next;
}

/* Under sweep_lock: sweep_one() of every listed entry (ALL: every cached
 * lease goes back), then unlist() as WHAT says. */
static int64_t sweep_all(int64_t now, int all, enum unlist_what what)
{
    size_t n;
    int64_t next = NM_FOREVER;
    nm_entry_t **entries = snapshot(&n);
    for (size_t i = 0; i < n; i++) {
        next = NM_MIN(next, sweep_one(entries[i], now, all));
        unlist(entries[i], now, what);
    }
    free(entries);
    return next;
}

/* The background thread's pass (the job's run): gives back the cached
 * leases that are asked for, idle for too long or no longer usable,
 * answers trylocks, and stops listening for names no longer used.
 * Returns when it is next due. */
static int64_t sweep(int64_t now)
{
    __atomic_store_n(&sweep_due, 0, __ATOMIC_RELEASE);
    pthread_mutex_lock(&sweep_lock);
    int64_t next = sweep_all(now, 0, UNLIST_LINGERED);
    pthread_mutex_unlock(&sweep_lock);
    /* Listed names are looked at again within the linger, to unlist them,
     * and as often as a lease cached meanwhile would need to be marked
     * idle: an unlock that keeps one then need not wake the thread (one
     * that goes back to the servers right after, by a condition's wait,
     * would make every cached unlock a wake-up otherwise). */
    pthread_mutex_lock(&list_lock);
    if (listed)
        next = NM_MIN(next, now + IDLE_MARK_MS);
    pthread_mutex_unlock(&list_lock);
    return __atomic_load_n(&sweep_due, __ATOMIC_ACQUIRE) ? now : next;
}

static int64_t sweep_job_run(int64_t bound)
{
    (void)bound; /* nothing here waits on a server for long: no bound */
    return sweep(nm_now_ms());
}

static const nm_job_t sweep_job = {
    .run = sweep_job_run,
};

void nm_cache_register(void)
{
    nm_watchdog_add_job(&sweep_job);
}

/* The names given back stop being listened to as well: the next
 * configuration may name other servers, and its subscriber should not
 * dial them for names nobody uses. */
void nm_cache_flush(void)
{
    pthread_mutex_lock(&sweep_lock);
    sweep_all(nm_now_ms(), 1, UNLIST_UNUSED);
    pthread_mutex_unlock(&sweep_lock);
}

void nm_cache_forget(void)
{
    pthread_mutex_lock(&sweep_lock);
    sweep_all(nm_now_ms(), 1, UNLIST_ALL);
    pthread_mutex_unlock(&sweep_lock);
}

/* ---- fork -------------------------------------------------------------- */

void nm_cache_before_fork(void)
{
    pthread_mutex_lock(&sweep_lock);
    pthread_mutex_lock(&list_lock);
}

void nm_cache_after_fork_parent(void)
{
    pthread_mutex_unlock(&list_lock);
    pthread_mutex_unlock(&sweep_lock);
}

/* The child caches nothing: the leases are the parent's (the registry
 * clears each entry's state), and so are the subscriptions (wake.c drops
 * them).  The list's references are kept, never dropped: the entries stay
 * in the registry, which is all they cost. */
void nm_cache_after_fork_child(void)
{
    listed = NULL;
    sweep_due = 0;
    pthread_mutex_unlock(&list_lock);
    pthread_mutex_unlock(&sweep_lock);
}
