/*
 * subscriber.c -- the subscriber job of the background thread
 * (subscriber.h): the connections that serve wake.c's channels, their
 * dialing and back-off, the cluster's route from slot to subscriber, and
 * the settle handshake cache.c waits on.
 *
 * Settling.  The thread publishes the subscriber sockets (sub_fds) before
 * each poll(), marks itself reading when poll() returns, and counts the
 * reads it finished (reads_done_n) once what they returned was handled.
 * An unlock that would keep a lease cached (nm_subscriber_settle) looks:
 * if the thread is reading, or a subscriber socket is readable, it pokes
 * the thread and waits for the count to move.
 *
 * Everything here but the handshake's counters is the thread's alone (and
 * a child's after fork, which has no thread).  Locks: reads_lock, a leaf;
 * wake.c's callbacks run on this job's calls with none of this module's
 * locks held.
 */
#include "nm.h"

#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "cluster.h"
#include "cluster_route.h"
#include "conn.h"
#include "dial.h"
#include "quorum.h"
#include "sentinel.h"
#include "settings.h"
#include "subscriber.h"
#include "wake.h"
#include "watchdog.h"

#define SUB_BACKOFF_MIN_MS 50
#define SUB_BACKOFF_MAX_MS 1000
#define SETTLE_GAP_US 20

/* One subscriber connection per server; in cluster mode ("sharded") one
 * per master that serves the slot of a name listened to, its address in
 * host and port (wake.h). */
typedef struct sub_io {
    redisContext *sub;
    int64_t sub_retry_at;
    int64_t sub_backoff;
    int port;
    char host[NM_CLUSTER_HOST_MAX];
} sub_io_t;

static struct {
    nm_config_t *cfg;     /* the thread's (watchdog.h), borrowed */
    sub_io_t srv[NM_WAKE_SUBS_MAX];
    int sharded;          /* the subscribers are a cluster's masters */
    size_t nsubs;         /* ... this many of them, srv[0..nsubs) */
} io;

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

void nm_subscriber_settle(int64_t until)
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

static void free_ctx(redisContext **c)
{
    if (*c)
        nm_dial_close(*c);
    *c = NULL;
}

/* ---- the subscribers ------------------------------------------------------ */

static void sub_drop(size_t i, int64_t now)
{
    sub_io_t *s = &io.srv[i];
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
 * the next lease check (nor, in quorum mode, the dial bound), so a dead
 * server cannot delay a lost-lease notice. */
static int64_t sub_maintain(size_t i, int64_t now, int64_t next_check)
{
    sub_io_t *s = &io.srv[i];
    nm_wake_route_fn route = io.sharded ? route_slot : NULL;
    int64_t next = NM_FOREVER;
    if (io.sharded ? !nm_wake_wanted_on(i, route, NULL) : !nm_wake_wanted()) {
        free_ctx(&s->sub);
        return next;
    }
    /* In quorum mode a dial has its own bound, and the subscriptions the
     * server's bound from then (quorum.h). */
    int quorum = io.cfg->nservers > 1;
    int64_t bound = quorum ? nm_quorum_dial_bound(io.cfg) : io.cfg->connect_timeout_ms;
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
    if (quorum) {
        int64_t t = nm_now_ms();
        deadline = NM_MIN(t + io.cfg->server_timeout_ms, NM_MAX(next_check, t + 5));
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

/* ---- the job --------------------------------------------------------------- */

static void close_subs(void)
{
    for (size_t i = 0; i < NM_WAKE_SUBS_MAX; i++)
        free_ctx(&io.srv[i].sub);
}

/* New settings, new connections: nothing is subscribed any more (NULL:
 * the thread ends; sub_job_stopped() says so once it is joined). */
static void sub_job_bind(nm_config_t *cfg)
{
    publish_sub_fds(0);
    close_subs();
    memset(&io, 0, sizeof io);
    io.cfg = cfg;
    if (cfg)
        nm_wake_disconnected(NM_WAKE_ALL);
}

/* Dials, subscribes and unsubscribes, bounded by BOUND like the jobs
 * before it wish (a dead server cannot delay a lost-lease notice). */
static int64_t sub_job_run(int64_t bound)
{
    return subs_maintain(bound);
}

/* The subscriber sockets to poll, published for nm_subscriber_settle(). */
static size_t sub_job_fds(struct pollfd *fds, size_t room)
{
    size_t n = NM_MIN(io.cfg ? subs_count() : 0, room);
    for (size_t i = 0; i < n; i++)
        fds[i] = (struct pollfd){ io.srv[i].sub ? io.srv[i].sub->fd : -1, POLLIN, 0 };
    publish_sub_fds(n);
    return n;
}

/* Reads what the subscribers have (wake.c), then counts the read done. */
static void sub_job_polled(const struct pollfd *fds, size_t n, int ready)
{
    nm_wake_remap_t remap;
    if (ready) {
        __atomic_store_n(&reading, 1, __ATOMIC_RELEASE);
        for (size_t i = 0; i < n; i++) {
            if (!fds[i].revents)
                continue;
            if (nm_wake_read(io.srv[i].sub, i, &remap) != 0)
                sub_drop(i, nm_now_ms());
            subs_remap(&remap);
        }
    }
    reads_done();
}

/* The thread is gone: so is every subscription. */
static void sub_job_stopped(void)
{
    nm_wake_disconnected(NM_WAKE_ALL);
}

static const nm_job_t sub_job = {
    .bind = sub_job_bind,
    .run = sub_job_run,
    .fds = sub_job_fds,
    .polled = sub_job_polled,
    .stopped = sub_job_stopped,
};

void nm_subscriber_register(void)
{
    nm_wake_set_server(nm_watchdog_poke);
    nm_watchdog_add_job(&sub_job);
}

/* ---- fork ----------------------------------------------------------------- */

/* What a forked child keeps of the thread's connections, only so that they
 * stay reachable.  volatile: nothing reads them, and the compiler would
 * otherwise drop the stores. */
static redisContext *volatile orphans[NM_WAKE_SUBS_MAX];

/* The thread's contexts may have been in the middle of an update when
 * fork() copied them, so the child only closes their descriptors and keeps
 * the memory (reachable, never freed) instead of walking possibly
 * half-updated structures.  wake.c drops the channels. */
void nm_subscriber_after_fork_child(void)
{
    for (size_t i = 0; i < NM_WAKE_SUBS_MAX; i++)
        orphans[i] = io.srv[i].sub;
    for (size_t i = 0; i < NM_WAKE_SUBS_MAX; i++)
        if (orphans[i] && orphans[i]->fd >= 0)
            close(orphans[i]->fd);
    memset(&io, 0, sizeof io);
}
