/*
 * wake.c -- the channel table behind wake-on-release.
 *
 * A channel lives while it has listeners or a subscription to undo.  In
 * quorum mode there is one subscriber connection per server, and a channel
 * goes through this life on each of them separately:
 *
 *   wanted --SUBSCRIBE sent--> subscribing --reply--> subscribed
 *   subscribed, idle for LINGER_MS --UNSUBSCRIBE sent--> unsubscribing
 *   unsubscribing --reply--> freed, or wanted again if a listener came back
 *
 * Idle channels linger a while so that a name locked in a loop is not
 * subscribed and unsubscribed at every acquisition.
 *
 * In cluster mode (a route given) the same life goes on with SSUBSCRIBE
 * and SUNSUBSCRIBE, on one subscriber at a time: the one of the master
 * that serves the channel's slot.  When the slot moves, the master drops
 * the subscription by itself (an unasked sunsubscribe) or answers MOVED to
 * the SSUBSCRIBE; either way the channel is wanted again and the route,
 * from the map read again, sends it to the slot's new master.
 */
#include "nm.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "quorum.h"
#include "reply.h"
#include "slot.h"
#include "wake.h"

/* How to have the channels served (nm_wake_set_server): an atomic
 * pointer, set once before any channel exists. */
static int (*serve_fn)(void);

void nm_wake_set_server(int (*serve)(void))
{
    __atomic_store_n(&serve_fn, serve, __ATOMIC_RELEASE);
}

/* Has the serving thread look at the table; ENOTCONN if none serves it
 * (the caller then gives the channel up rather than wait on it). */
static int poke_server(void)
{
    int (*serve)(void) = __atomic_load_n(&serve_fn, __ATOMIC_ACQUIRE);
    return serve ? serve() : ENOTCONN;
}

#define LINGER_MS 2000

enum chan_state { CH_WANTED, CH_SUBSCRIBING, CH_SUBSCRIBED, CH_UNSUBSCRIBING };

struct nm_chan {
    struct nm_chan *next;
    char *key;
    size_t key_len;
    int listeners;
    unsigned char state[NM_WAKE_SUBS_MAX]; /* enum chan_state, per subscriber */
    unsigned int slot;       /* the key's cluster slot */
    int64_t idle_since;      /* when listeners dropped to 0 */
    uint64_t seq;
    pthread_cond_t cv;       /* CLOCK_MONOTONIC */
    nm_wake_fn fn;           /* nm_wake_subscribe's, or NULL */
    void *arg;
    uint32_t announce;       /* subscribers whose SUBSCRIBED FN has yet to be
                                told of: it came before FN did */
};

/* Callbacks are collected under wake_lock and run after it is released:
 * they take locks that come before it in the lock order (an entry's). */
typedef struct wake_event {
    nm_wake_fn fn;
    void *arg;
    nm_wake_event_t ev;
    char *msg;
    size_t len;
} wake_event_t;

typedef struct events {
    wake_event_t *items;
    size_t n, cap;
    char refused[160]; /* an error reply's text, logged after the lock */
} events_t;

static pthread_mutex_t wake_lock = PTHREAD_MUTEX_INITIALIZER;
static nm_chan_t *chans;     /* wake_lock */

/* Batches of callbacks collected and not yet run (wake_lock), and the
 * batch this thread is running.  nm_wake_unsubscribe waits for the others:
 * its caller frees the callback's argument next. */
static unsigned int batches_running;
static pthread_cond_t batches_done = PTHREAD_COND_INITIALIZER;
static __thread int running_batch;

static nm_chan_t *find(const char *key, size_t len)
{
    for (nm_chan_t *ch = chans; ch; ch = ch->next)
        if (ch->key_len == len && memcmp(ch->key, key, len) == 0)
            return ch;
    return NULL;
}

static nm_chan_t *chan_new(const char *key, size_t len)
{
    nm_chan_t *ch = calloc(1, sizeof *ch);
    if (!ch || !(ch->key = malloc(len))) {
        free(ch);
        return NULL;
    }
    memcpy(ch->key, key, len);
    ch->key_len = len;
    ch->slot = nm_slot_of(key, len);
    nm_cond_init_monotonic(&ch->cv);
    ch->next = chans;
    chans = ch;
    return ch;
}

static void chan_free(nm_chan_t *ch)
{
    pthread_cond_destroy(&ch->cv);
    free(ch->key);
    free(ch);
}

/* Unlinks and frees every channel FN says to drop. */
static void remove_if(int (*drop)(nm_chan_t *))
{
    nm_chan_t **p = &chans;
    while (*p) {
        nm_chan_t *ch = *p;
        if (drop(ch)) {
            *p = ch->next;
            chan_free(ch);
        } else {
            p = &ch->next;
        }
    }
}

/* Queues CH's callback for EV (MSG copied); a callback that cannot be
 * queued for want of memory is lost like a pub/sub message, which its user
 * has to survive anyway. */
static void event_add(events_t *evs, const nm_chan_t *ch, nm_wake_event_t ev,
                      const char *msg, size_t len)
{
    if (!ch->fn)
        return;
    if (evs->n == evs->cap) {
        size_t cap = evs->cap ? evs->cap * 2 : 8;
        wake_event_t *items = realloc(evs->items, cap * sizeof *items);
        if (!items)
            return;
        evs->items = items;
        evs->cap = cap;
    }
    char *copy = msg ? malloc(len + 1) : NULL;
    if (msg && !copy)
        return;
    if (copy) {
        memcpy(copy, msg, len);
        copy[len] = '\0';
    }
    if (evs->n == 0)
        batches_running++;
    evs->items[evs->n++] = (wake_event_t){ ch->fn, ch->arg, ev, copy, len };
}

/* Runs the callbacks collected (without wake_lock: they take locks that
 * come before it in the lock order), then says the batch is over. */
static void events_run(events_t *evs)
{
    if (evs->n == 0)
        return;
    running_batch = 1;
    for (size_t i = 0; i < evs->n; i++) {
        wake_event_t *e = &evs->items[i];
        e->fn(e->arg, e->ev, e->msg, e->len);
        free(e->msg);
    }
    running_batch = 0;
    free(evs->items);
    evs->items = NULL;
    evs->n = evs->cap = 0;
    pthread_mutex_lock(&wake_lock);
    batches_running--;
    pthread_cond_broadcast(&batches_done);
    pthread_mutex_unlock(&wake_lock);
}

/* ---- waiters ------------------------------------------------------------ */

/* KEY's channel, created if new, with one more listener and, when FN is
 * given, FN's callbacks.  FN is set in the same critical section that
 * makes the channel wanted, so its confirmation cannot come (and be
 * dropped for want of a callback) first; a subscription already in place
 * (for waiters, or lingering) sends none, so it is announced to FN on the
 * background thread's next pass.  NULL: no memory, no background thread. */
static nm_chan_t *listen_with(const char *key, size_t len, nm_wake_fn fn, void *arg)
{
    pthread_mutex_lock(&wake_lock);
    nm_chan_t *ch = find(key, len);
    if (!ch)
        ch = chan_new(key, len);
    if (ch) {
        ch->listeners++;
        ch->fn = fn ? fn : ch->fn;
        ch->arg = fn ? arg : ch->arg;
        for (size_t i = 0; fn && i < NM_WAKE_SUBS_MAX; i++)
            if (ch->state[i] == CH_SUBSCRIBED)
                ch->announce |= (uint32_t)1 << i;
    }
    pthread_mutex_unlock(&wake_lock);
    /* The thread that serves the channels subscribes (or announces) on
     * its next pass. */
    if (ch && poke_server() != 0) {
        if (fn)
            nm_wake_unsubscribe(ch);
        else
            nm_wake_unlisten(ch);
        return NULL;
    }
    return ch;
}

nm_chan_t *nm_wake_listen(const char *key, size_t len)
{
    return listen_with(key, len, NULL, NULL);
}

nm_chan_t *nm_wake_subscribe(const char *key, size_t len, nm_wake_fn fn, void *arg)
{
    return listen_with(key, len, fn, arg);
}

void nm_wake_unsubscribe(nm_chan_t *ch)
{
    pthread_mutex_lock(&wake_lock);
    ch->fn = NULL;
    ch->arg = NULL;
    ch->announce = 0;
    /* A batch collected before may still call the old callback; once the
     * batches of other threads are over, none can.  (This thread's own
     * batch, when called from a callback, is its caller's business.) */
    while (batches_running > (unsigned int)running_batch)
        pthread_cond_wait(&batches_done, &wake_lock);
    pthread_mutex_unlock(&wake_lock);
    nm_wake_unlisten(ch);
}

void nm_wake_unlisten(nm_chan_t *ch)
{
    pthread_mutex_lock(&wake_lock);
    if (--ch->listeners == 0)
        ch->idle_since = nm_now_ms();
    pthread_mutex_unlock(&wake_lock);
}

static int timedwait(nm_chan_t *ch, int64_t until)
{
    if (until == NM_FOREVER)
        return pthread_cond_wait(&ch->cv, &wake_lock);
    struct timespec ts = nm_deadline_timespec(until);
    return pthread_cond_timedwait(&ch->cv, &wake_lock, &ts);
}

static size_t subscribed_on(const nm_chan_t *ch)
{
    size_t n = 0;
    for (size_t i = 0; i < NM_WAKE_SUBS_MAX; i++)
        n += ch->state[i] == CH_SUBSCRIBED;
    return n;
}

int nm_wake_ready(nm_chan_t *ch, size_t need, int64_t until)
{
    int err = 0;
    pthread_mutex_lock(&wake_lock);
    while (subscribed_on(ch) < need && err != ETIMEDOUT)
        err = timedwait(ch, until);
    err = subscribed_on(ch) >= need ? 0 : ETIMEDOUT;
    pthread_mutex_unlock(&wake_lock);
    return err;
}

uint64_t nm_wake_seq(nm_chan_t *ch)
{
    pthread_mutex_lock(&wake_lock);
    uint64_t seq = ch->seq;
    pthread_mutex_unlock(&wake_lock);
    return seq;
}

int nm_wake_wait(nm_chan_t *ch, uint64_t seen, int64_t until)
{
    int err = 0;
    pthread_mutex_lock(&wake_lock);
    while (ch->seq == seen && err != ETIMEDOUT)
        err = timedwait(ch, until);
    err = ch->seq == seen ? ETIMEDOUT : 0;
    pthread_mutex_unlock(&wake_lock);
    return err;
}

/* ---- the background thread -------------------------------------------- */

int nm_wake_wanted(void)
{
    pthread_mutex_lock(&wake_lock);
    int wanted = chans != NULL;
    pthread_mutex_unlock(&wake_lock);
    return wanted;
}

static int append(redisContext *sub, const char *verb, const nm_chan_t *ch)
{
    const char *argv[2] = { verb, ch->key };
    size_t lens[2] = { strlen(verb), ch->key_len };
    return redisAppendCommandArgv(sub, 2, argv, lens) == REDIS_OK ? 0 : NM_ECONN;
}

/* Under wake_lock: tells CH's callback of the subscription on SERVER that
 * was in place before it came (listen_with). */
static void announce(nm_chan_t *ch, size_t server, events_t *evs)
{
    uint32_t bit = (uint32_t)1 << server;
    if (!(ch->announce & bit))
        return;
    ch->announce &= ~bit;
    /* Dropped meanwhile: the next subscription's confirmation tells. */
    if (ch->state[server] == CH_SUBSCRIBED)
        event_add(evs, ch, NM_WAKE_SUBSCRIBED, NULL, 0);
}

/* Whether CH belongs on subscriber I: always without a route (quorum
 * mode: every server), else where its slot's master is. */
static int belongs(const nm_chan_t *ch, size_t i, nm_wake_route_fn route, void *arg)
{
    return !route || route(ch->slot, arg) == (int)i;
}

int nm_wake_wanted_on(size_t index, nm_wake_route_fn route, void *arg)
{
    int wanted = 0;
    pthread_mutex_lock(&wake_lock);
    for (nm_chan_t *ch = chans; ch && !wanted; ch = ch->next)
        wanted = ch->state[index] != CH_WANTED ||
                 (ch->listeners > 0 && belongs(ch, index, route, arg));
    pthread_mutex_unlock(&wake_lock);
    return wanted;
}

void nm_wake_route(nm_wake_route_fn route, void *arg)
{
    pthread_mutex_lock(&wake_lock);
    for (nm_chan_t *ch = chans; ch; ch = ch->next)
        if (ch->listeners > 0)
            route(ch->slot, arg);
    pthread_mutex_unlock(&wake_lock);
}

/* Under wake_lock: CH's subscription on a master that no longer serves
 * its slot hears nothing now.  Its callback is told at once (a cached
 * lease must not wait for requests that go elsewhere), and its waiters
 * retry. */
static int moved_away(redisContext *sub, nm_chan_t *ch, size_t i, events_t *evs)
{
    ch->state[i] = CH_UNSUBSCRIBING;
    ch->seq++;
    pthread_cond_broadcast(&ch->cv);
    event_add(evs, ch, NM_WAKE_DROPPED, NULL, 0);
    return append(sub, "SUNSUBSCRIBE", ch);
}

/* Under wake_lock: what CH needs on subscriber I (ROUTE: cluster mode). */
static int flush_chan(redisContext *sub, nm_chan_t *ch, size_t i, nm_wake_route_fn route,
                      void *arg, int64_t now, int64_t *next, events_t *evs)
{
    unsigned char *state = &ch->state[i];
    announce(ch, i, evs);
    if (*state == CH_WANTED && ch->listeners > 0 && belongs(ch, i, route, arg)) {
        *state = CH_SUBSCRIBING;
        return append(sub, route ? "SSUBSCRIBE" : "SUBSCRIBE", ch);
    }
    if (*state != CH_SUBSCRIBED)
        return 0;
    if (route && ch->listeners > 0 && !belongs(ch, i, route, arg))
        return moved_away(sub, ch, i, evs);
    if (ch->listeners > 0)
        return 0;
    if (now - ch->idle_since < LINGER_MS) {
        *next = NM_MIN(*next, ch->idle_since + LINGER_MS);
        return 0;
    }
    *state = CH_UNSUBSCRIBING;
    return append(sub, route ? "SUNSUBSCRIBE" : "UNSUBSCRIBE", ch);
}

int nm_wake_flush(redisContext *sub, size_t index, nm_wake_route_fn route, void *arg,
                  int64_t deadline, int64_t *next)
{
    int64_t now = nm_now_ms();
    int err = 0;
    events_t evs = { 0 };

    pthread_mutex_lock(&wake_lock);
    for (nm_chan_t *ch = chans; ch && !err; ch = ch->next)
        err = flush_chan(sub, ch, index, route, arg, now, next, &evs);
    pthread_mutex_unlock(&wake_lock);
    err = err ? err : nm_send(sub, deadline);
    events_run(&evs);
    return err;
}

static int reply_is(const redisReply *r, const char *kind)
{
    return r->type == REDIS_REPLY_ARRAY && r->elements >= 2 &&
           r->element[0]->type == REDIS_REPLY_STRING &&
           strcmp(r->element[0]->str, kind) == 0 &&
           r->element[1]->type == REDIS_REPLY_STRING;
}

/* R is a push of KIND, plain or sharded ("s" + KIND): a channel is only
 * ever one or the other, so either form is its. */
static int push_is(const redisReply *r, const char *kind)
{
    char sharded[16];
    snprintf(sharded, sizeof sharded, "s%s", kind);
    return reply_is(r, kind) || reply_is(r, sharded);
}

/* Under wake_lock: a MOVED answer (TEXT) to an SSUBSCRIBE on SERVER: the
 * channels of its slot that were being subscribed there are wanted again,
 * and the caller fixes the map.  Replies come in order, but a MOVED does
 * not name its channel, only its slot. */
static void on_moved(const char *text, size_t server, nm_wake_remap_t *remap)
{
    char *end;
    unsigned long slot = strtoul(text + 6, &end, 10);
    if (end == text + 6 || slot >= NM_SLOTS)
        return;
    for (nm_chan_t *ch = chans; ch; ch = ch->next)
        if (ch->slot == slot && ch->state[server] == CH_SUBSCRIBING)
            ch->state[server] = CH_WANTED;
    snprintf(remap->moved, sizeof remap->moved, "%s", text);
}

/* Under wake_lock: an unsubscribe push for CH on SERVER.  The answer to
 * ours, or, in a cluster, one the master sent by itself because the slot
 * left it: then the subscription is lost and the map is stale. */
static void on_unsubscribed(nm_chan_t *ch, size_t server, events_t *evs, nm_wake_remap_t *remap)
{
    if (ch->state[server] == CH_SUBSCRIBED) {
        remap->stale = 1;
        ch->seq++;
        event_add(evs, ch, NM_WAKE_DROPPED, NULL, 0);
    }
    if (ch->state[server] != CH_SUBSCRIBING)
        ch->state[server] = CH_WANTED; /* freed below unless a listener came back */
}

static void on_reply(const redisReply *r, size_t server, events_t *evs, nm_wake_remap_t *remap)
{
    if (r->type == REDIS_REPLY_ERROR && r->str && strncmp(r->str, "MOVED ", 6) == 0) {
        on_moved(r->str, server, remap);
        return;
    }
    if (r->type == REDIS_REPLY_ERROR && r->str) {
        /* A SUBSCRIBE refused (an ACL without channel rights): its channel
         * stays unconfirmed, so its waiters poll and nothing is cached. */
        snprintf(evs->refused, sizeof evs->refused, "%.*s", (int)NM_MIN(r->len, 159), r->str);
        return;
    }
    const redisReply *name = r->elements >= 2 ? r->element[1] : NULL;
    nm_chan_t *ch = name && name->type == REDIS_REPLY_STRING
                        ? find(name->str, name->len) : NULL;
    if (!ch)
        return;
    if (push_is(r, "message")) {
        /* "released" (release.lua), or anything a client allowed to
         * PUBLISH sent: either way only a reason to try again, and the
         * waiter's own request decides. */
        ch->seq++;
        if (r->elements == 3 && r->element[2]->type == REDIS_REPLY_STRING)
            event_add(evs, ch, NM_WAKE_MESSAGE, r->element[2]->str, r->element[2]->len);
    } else if (push_is(r, "subscribe") && ch->state[server] == CH_SUBSCRIBING) {
        ch->state[server] = CH_SUBSCRIBED;
        event_add(evs, ch, NM_WAKE_SUBSCRIBED, NULL, 0);
        /* A release may have happened before the subscription took: every
         * waiter retries once it is in place. */
        ch->seq++;
    } else if (push_is(r, "unsubscribe")) {
        on_unsubscribed(ch, server, evs, remap);
    }
    pthread_cond_broadcast(&ch->cv);
}

/* A channel nobody listens to and no server has a subscription of. */
static int unwanted(nm_chan_t *ch)
{
    for (size_t i = 0; i < NM_WAKE_SUBS_MAX; i++)
        if (ch->state[i] != CH_WANTED)
            return 0;
    return ch->listeners == 0;
}

/* Once per process: the first refusal says it all. */
static void log_refusal(const char *text)
{
    static int logged; /* atomic */
    if (text[0] && !__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED))
        netmutex_log(NETMUTEX_LOG_WARN,
                     "the server refused a subscription (%s): waiters in quorum mode poll, "
                     "and no lease is kept cached", text);
}

int nm_wake_read(redisContext *sub, size_t server, nm_wake_remap_t *remap)
{
    void *raw;
    int err = 0;
    events_t evs = { 0 };

    memset(remap, 0, sizeof *remap);
    if (nm_receive(sub) != 0)
        return NM_ECONN;
    pthread_mutex_lock(&wake_lock);
    while (!err) {
        raw = NULL;
        if (redisGetReplyFromReader(sub, &raw) != REDIS_OK)
            err = NM_ECONN;
        if (!raw)
            break;
        on_reply(raw, server, &evs, remap);
        freeReplyObject(raw);
    }
    remove_if(unwanted);
    pthread_mutex_unlock(&wake_lock);
    events_run(&evs);
    log_refusal(evs.refused);
    return err;
}

void nm_wake_disconnected(size_t server)
{
    events_t evs = { 0 };
    pthread_mutex_lock(&wake_lock);
    for (nm_chan_t *ch = chans; ch; ch = ch->next) {
        int had = 0;
        for (size_t i = 0; i < NM_WAKE_SUBS_MAX; i++) {
            if (server == NM_WAKE_ALL || i == server) {
                had |= ch->state[i] == CH_SUBSCRIBED;
                ch->state[i] = CH_WANTED;
            }
        }
        ch->seq++;
        pthread_cond_broadcast(&ch->cv);
        if (had)
            event_add(&evs, ch, NM_WAKE_DROPPED, NULL, 0);
    }
    remove_if(unwanted);
    pthread_mutex_unlock(&wake_lock);
    events_run(&evs);
}

/* ---- fork -------------------------------------------------------------- */

void nm_wake_before_fork(void) { pthread_mutex_lock(&wake_lock); }
void nm_wake_after_fork_parent(void) { pthread_mutex_unlock(&wake_lock); }

/* The child's only thread is not waiting: every channel belonged to a
 * thread of the parent.  Their condition variables are not destroyed
 * (glibc would wait for waiters that exist only in the parent). */
void nm_wake_after_fork_child(void)
{
    batches_running = 0; /* their threads are the parent's */
    while (chans) {
        nm_chan_t *ch = chans;
        chans = ch->next;
        free(ch->key);
        free(ch);
    }
    pthread_mutex_unlock(&wake_lock);
}
