/*
 * lease.c -- acquiring and releasing one lock on the server.
 *
 * Waiting.  The first attempt is made without ceremony (the uncontended
 * case costs one round trip).  When it finds the lock taken, the waiter
 * subscribes to the lock's channel through the background thread, waits
 * for the subscription to be confirmed, and only then tries again, this
 * time joining the lock's FIFO queue in Redis.  From then on:
 *  - a release hands the lock straight to the head of the queue and
 *    publishes "granted <token> <fence> <dead>"; the waiter whose token it
 *    is owns the lock the moment it reads that, without another round trip;
 *  - a release with nobody queued publishes "released", and every waiter
 *    tries again;
 *  - a release between an attempt and the sleep after it changes the
 *    channel's sequence number, so that sleep does not start;
 *  - the sleep also ends when the holder's lease would run out (the acquire
 *    script returns its PTTL), so a crashed holder strands nobody, and at
 *    least every QUEUE_REFRESH_MS, when the waiter refreshes its queue entry
 *    (an entry not refreshed for QUEUE_TTL_MS is skipped: a crashed waiter
 *    never blocks the queue), and learns of a grant whose message was lost.
 * Only while the subscriber is down does a waiter poll, with a back-off of
 * 1 ms doubling to 64 ms.
 */
#include "nm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"
#include "conn.h"
#include "lease.h"
#include "reply.h"
#include "script.h"
#include "wake.h"

/* trylock's bound on dialing: the first failure may be a stale connection
 * (server restarted), the second means the server is not there. */
#define NOWAIT_CONN_TRIES 2
#define BUSY_BACKOFF_MAX_MS 64
#define CONN_BACKOFF_MAX_MS 500
#define QUEUE_REFRESH_MS 1000
#define QUEUE_TTL_MS (3 * QUEUE_REFRESH_MS)

/* The four keys of a mutex (lib.lua): K, then K:m, K:q and K:w. */
enum { KEY_LOCK, KEY_META, KEY_QUEUE, KEY_WAITING, NKEYS };
static const char key_suffix[NKEYS][3] = { "", ":m", ":q", ":w" };

/* All four keys in one allocation, each followed by room for the longest
 * suffix, so key I starts at I * (key_len + 3).  Keys are passed with
 * explicit lengths, so any byte of the name is safe. */
static int build_keys(nm_lease_t *l, const char *name, size_t name_len)
{
    const nm_config_t *cfg = l->cfg;
    size_t len = cfg->prefix_len + 1 + name_len + 1, stride = len + 3;
    char *k = malloc(NKEYS * stride);
    if (!k)
        return ENOMEM;
    memcpy(k, cfg->prefix, cfg->prefix_len);
    k[cfg->prefix_len] = '{';
    memcpy(k + cfg->prefix_len + 1, name, name_len);
    k[len - 1] = '}';
    for (int i = 1; i < NKEYS; i++) {
        memcpy(k + i * stride, k, len);
        memcpy(k + i * stride + len, key_suffix[i], 3);
    }
    k[len] = '\0';
    l->key = k;
    l->key_len = len;
    return 0;
}

/* Fills the first N (<= NKEYS) script keys of L into ARGV/LENS. */
static void put_keys(const nm_lease_t *l, int n, const char **argv, size_t *lens)
{
    for (int i = 0; i < n; i++) {
        argv[i] = l->key + i * (l->key_len + 3);
        lens[i] = l->key_len + strlen(key_suffix[i]);
    }
}

static char host_name[256];

static void lookup_host(void)
{
    if (gethostname(host_name, sizeof host_name - 1) != 0)
        strcpy(host_name, "?");
}

/* host:pid:tid of the caller, stored in the meta hash for people and tools
 * asking who holds a lock.  The host name is looked up once. */
static size_t holder_text(char *buf, size_t size)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, lookup_host);
    int n = snprintf(buf, size, "%s:%ld:%ld", host_name, (long)getpid(),
                     (long)syscall(SYS_gettid));
    return n < 0 ? 0 : NM_MIN((size_t)n, size - 1);
}

/* Runs script ID of L (its NKEYS keys, then ARGS) on the calling thread's
 * connection.  *SENT tells whether a failed call may still have reached the
 * server; the connection is dropped when it broke. */
static int run(nm_lease_t *l, nm_script_t id, int nkeys, int nargs, const char **args,
               const size_t *arg_lens, int64_t deadline, redisReply **out, int *sent)
{
    const char *argv[NKEYS + 5];
    size_t lens[NKEYS + 5];
    redisContext *c;

    put_keys(l, nkeys, argv, lens);
    for (int i = 0; i < nargs; i++) {
        argv[nkeys + i] = args[i];
        lens[nkeys + i] = arg_lens[i];
    }
    *sent = 0;
    int err = nm_conn_get(l->cfg, 0, deadline, &c);
    if (err)
        return err;
    *sent = 1;
    err = nm_script_run(c, id, nkeys, nkeys + nargs, argv, lens, out);
    if (err == NM_ECONN)
        nm_conn_drop(0);
    return err;
}

/* The {granted, fence-or-pttl, dead} triple of acquire.lua and cancel.lua:
 * 0 (ours: fence and dead stored in L), EBUSY (*PTTL set), ENOTRECOVERABLE. */
static int take_triple(nm_lease_t *l, redisReply *r, long long *pttl)
{
    long long v[3];
    int err = nm_reply_integers(r, v, 3);
    freeReplyObject(r);
    if (err)
        return err;
    if (v[0] == -1)
        return ENOTRECOVERABLE;
    if (v[0] != 1) {
        *pttl = v[1];
        return EBUSY;
    }
    l->fence = v[1];
    l->owner_died = v[2] != 0;
    return 0;
}

/* One acquire attempt, joining the queue for QUEUE_TTL ms when that is not
 * 0: 0 (ours), EBUSY with the holder's *PTTL, or an error.  On success
 * l->sent_at is when the request left; l->tried_at always is. */
static int acquire_once(nm_lease_t *l, unsigned int queue_ttl, int64_t deadline,
                        long long *pttl, int *sent)
{
    char lease[16], ttl[16], holder[320], since[24];
    size_t holder_len = holder_text(holder, sizeof holder);
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    snprintf(lease, sizeof lease, "%u", l->lease_ms);
    snprintf(ttl, sizeof ttl, "%u", queue_ttl);
    snprintf(since, sizeof since, "%lld", (long long)wall.tv_sec * 1000 + wall.tv_nsec / 1000000);
    const char *args[5] = { l->token, lease, holder, ttl, since };
    size_t lens[5] = { NM_TOKEN_LEN, strlen(lease), holder_len, strlen(ttl), strlen(since) };
    redisReply *r;

    l->tried_at = nm_now_ms();
    int err = run(l, NM_SCRIPT_ACQUIRE, NKEYS, 5, args, lens, deadline, &r, sent);
    if (!err)
        err = take_triple(l, r, pttl);
    if (!err)
        l->sent_at = l->tried_at;
    return err;
}

/* Leaves the queue; if the lock was granted to us meanwhile, it is ours
 * (0), else EBUSY, or an error. */
static int cancel_once(nm_lease_t *l)
{
    const char *args[1] = { l->token };
    size_t lens[1] = { NM_TOKEN_LEN };
    redisReply *r;
    long long pttl;
    int sent;

    int err = run(l, NM_SCRIPT_CANCEL, NKEYS, 1, args, lens, NM_FOREVER, &r, &sent);
    if (!err)
        err = take_triple(l, r, &pttl);
    if (!err)
        l->sent_at = l->tried_at; /* granted after our last attempt */
    return err;
}

/* Runs the release script once: its result in *RESULT. */
static int release_once(nm_lease_t *l, int unrecoverable, long long *result, int *sent)
{
    const char *args[2] = { l->token, unrecoverable ? "1" : "0" };
    size_t lens[2] = { NM_TOKEN_LEN, 1 };
    redisReply *r;

    int err = run(l, NM_SCRIPT_RELEASE, NKEYS, 2, args, lens, NM_FOREVER, &r, sent);
    if (err)
        return err;
    err = nm_reply_integer(r, result);
    freeReplyObject(r);
    return err;
}

void nm_lease_forget(nm_lease_t *l)
{
    free(l->key);
    nm_config_unref(l->cfg);
    memset(l, 0, sizeof *l);
}

/* How long to sleep before the next attempt, and the back-off after it.
 * Subscribed, a waiter sleeps until a release, the holder's expiry or its
 * queue refresh, whichever comes first. */
static int64_t next_pause(int err, long long pttl, int subscribed, int64_t *backoff)
{
    int64_t pause = *backoff;
    if (err == EBUSY && subscribed)
        return pttl >= 0 ? NM_MIN(pttl + 1, QUEUE_REFRESH_MS) : QUEUE_REFRESH_MS;
    if (err == EBUSY) {
        if (pttl >= 0)
            pause = NM_MIN(pause, (int64_t)pttl + 1);
        *backoff = NM_MIN(*backoff * 2, BUSY_BACKOFF_MAX_MS);
    } else {
        *backoff = NM_MIN(*backoff * 2, CONN_BACKOFF_MAX_MS);
    }
    return pause;
}

/* Sleeps up to PAUSE (never past DEADLINE), until CH moves past SEQ, or
 * until the lock is granted to us (then 0, with L filled in). */
static int pause_until(nm_lease_t *l, nm_chan_t *ch, uint64_t seq, int64_t pause,
                       int64_t deadline)
{
    int64_t until = nm_now_ms() + NM_MIN(pause, nm_remaining_ms(deadline));
    if (!ch) {
        nm_sleep_ms(until - nm_now_ms());
        return EBUSY;
    }
    long long fence;
    int dead;
    nm_wake_wait(ch, seq, until);
    if (!nm_wake_granted(ch, &fence, &dead))
        return EBUSY;
    l->fence = fence;
    l->owner_died = dead;
    l->sent_at = l->tried_at; /* the grant came after our last attempt */
    return 0;
}

typedef struct attempt_state {
    nm_chan_t *ch;
    int subscribed;
    int queued;         /* an attempt may have put us in the queue */
    int maybe_applied;  /* a request whose answer was lost may have won */
} attempt_state_t;

/* After a first failed attempt: subscribe, and wait for the subscription
 * to be confirmed before the next attempt, so no release goes unnoticed. */
static void start_listening(nm_lease_t *l, attempt_state_t *st, int64_t deadline)
{
    st->ch = nm_wake_listen(l->key, l->key_len, l->token);
    if (st->ch) {
        int64_t until = NM_MIN(deadline, nm_now_ms() + (int64_t)l->cfg->io_timeout_ms);
        st->subscribed = nm_wake_ready(st->ch, until) == 0;
    }
}

/* Attempts until success, a final error, or the deadline. */
static int acquire_loop(nm_lease_t *l, nm_wait_t wait, int64_t deadline, attempt_state_t *st)
{
    int64_t backoff = 1;
    int conn_failures = 0, err;

    for (;;) {
        uint64_t seq = st->ch ? nm_wake_seq(st->ch) : 0;
        unsigned int ttl = st->subscribed ? QUEUE_TTL_MS : 0;
        long long pttl = -1;
        int sent;
        err = acquire_once(l, ttl, deadline, &pttl, &sent);
        st->queued |= ttl > 0 && sent;
        if (err == NM_ECONN) {
            st->maybe_applied |= sent;
            if (wait == NM_NOWAIT && ++conn_failures >= NOWAIT_CONN_TRIES)
                return EAGAIN;
            if (wait == NM_NOWAIT)
                continue;
        } else if (err != EBUSY || wait == NM_NOWAIT) {
            return err;
        } else if (!st->ch) {
            start_listening(l, st, deadline);
            if (st->ch)
                continue;
        }
        if (nm_remaining_ms(deadline) == 0)
            return ETIMEDOUT;
        if (pause_until(l, st->ch, seq, next_pause(err, pttl, st->subscribed, &backoff),
                        deadline) == 0)
            return 0;
    }
}

/* Giving up: leave the queue (and take the lock if it was granted to us
 * meanwhile), or delete a lock that a request whose answer was lost may
 * have taken for us, rather than leave it to expire. */
static int give_up(nm_lease_t *l, const attempt_state_t *st, int err)
{
    long long ignored;
    int sent;
    if ((st->queued || st->maybe_applied) && cancel_once(l) == 0)
        return 0;
    if (st->maybe_applied)
        release_once(l, 0, &ignored, &sent);
    return err;
}

int nm_lease_acquire(nm_lease_t *l, const char *name, size_t name_len,
                     unsigned int lease_ms, nm_wait_t wait, int64_t deadline)
{
    attempt_state_t st = { 0 };
    int err;

    memset(l, 0, sizeof *l);
    err = nm_config_current(&l->cfg);
    if (err)
        return err;
    l->lease_ms = lease_ms ? lease_ms : l->cfg->lease_ms;
    err = nm_token_new(l->token);
    if (!err)
        err = build_keys(l, name, name_len);
    if (!err)
        err = acquire_loop(l, wait, deadline, &st);
    if (err && l->key)
        err = give_up(l, &st, err);
    if (st.ch)
        nm_wake_unlisten(st.ch);
    if (err)
        nm_lease_forget(l);
    return err;
}

int nm_lease_release(nm_lease_t *l, int unrecoverable)
{
    int sent, err = NM_ECONN;
    long long result = 0;

    /* One redial: the cached connection may be stale (server restarted,
     * CLIENT KILL); a second failure means the server is not there.  The
     * script itself tells whether a first attempt, whose reply was lost,
     * did release the lock (result 2). */
    for (int i = 0; i < 2 && err == NM_ECONN; i++)
        err = release_once(l, unrecoverable, &result, &sent);
    nm_lease_forget(l);
    if (err)
        return EIO;
    return result == 1 || result == 2 ? 0 : ENOLCK;
}

int nm_lease_extend(nm_lease_t *l, unsigned int ms, int64_t *sent_at)
{
    char lease[16];
    snprintf(lease, sizeof lease, "%u", ms);
    const char *args[2] = { l->token, lease };
    size_t lens[2] = { NM_TOKEN_LEN, strlen(lease) };
    redisReply *r;
    int sent, err = NM_ECONN;
    long long v = 0;

    for (int i = 0; i < 2 && err == NM_ECONN; i++) {
        *sent_at = nm_now_ms();
        err = run(l, NM_SCRIPT_RENEW, 1, 2, args, lens, NM_FOREVER, &r, &sent);
    }
    if (err)
        return err == NM_ECONN ? EIO : err;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 1 || nm_reply_integer(r->element[0], &v))
        err = EPROTO;
    freeReplyObject(r);
    return err ? err : v == 1 ? 0 : ENOLCK;
}

int nm_lease_break(const char *name, size_t name_len)
{
    nm_lease_t l;
    redisReply *r;
    long long held = 0;
    int sent, err;

    memset(&l, 0, sizeof l);
    err = nm_config_current(&l.cfg);
    if (!err)
        err = build_keys(&l, name, name_len);
    for (int i = 0; i < 2 && (i == 0 || err == NM_ECONN) && l.key; i++)
        err = run(&l, NM_SCRIPT_BREAK, NKEYS, 0, NULL, NULL, NM_FOREVER, &r, &sent);
    if (!err) {
        err = nm_reply_integer(r, &held);
        freeReplyObject(r);
    }
    nm_lease_forget(&l);
    if (err)
        return err == NM_ECONN ? EAGAIN : err;
    return held ? 0 : ENOENT;
}
