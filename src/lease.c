/*
 * lease.c -- acquiring and releasing one lock on the server.
 *
 * Waiting.  The first attempt is made without ceremony (the uncontended
 * case costs one round trip).  When it finds the lock taken, the waiter
 * subscribes to the lock's channel through the background thread, waits
 * for the subscription to be confirmed, and only then tries again: from
 * that moment any release is published to us, and a release between an
 * attempt and the sleep after it changes the channel's sequence number, so
 * the sleep does not start.  The sleep also ends when the holder's lease
 * would have run out (the acquire script returns its PTTL), so a crashed
 * holder never strands a waiter.  Only while the subscriber is down does a
 * waiter fall back to polling with a back-off (1 ms doubling to 64 ms).
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
/* A holder whose key never expires (set by hand): look again now and then. */
#define SUBSCRIBED_MAX_SLEEP_MS 1000
#define META_SUFFIX ":m"

/* <prefix>{<name>}:m in one buffer: the lock key is its first key_len
 * bytes, the meta hash the whole string.  Keys are passed with explicit
 * lengths, so any byte of the name is safe. */
static int build_key(nm_lease_t *l, const char *name, size_t name_len)
{
    const nm_config_t *cfg = l->cfg;
    size_t len = cfg->prefix_len + 1 + name_len + 1;
    char *k = malloc(len + sizeof META_SUFFIX);
    if (!k)
        return ENOMEM;
    memcpy(k, cfg->prefix, cfg->prefix_len);
    k[cfg->prefix_len] = '{';
    memcpy(k + cfg->prefix_len + 1, name, name_len);
    k[len - 1] = '}';
    memcpy(k + len, META_SUFFIX, sizeof META_SUFFIX);
    l->key = k;
    l->key_len = len;
    return 0;
}

/* host:pid:tid of the caller, stored in the meta hash for people and tools
 * asking who holds a lock. */
static size_t holder_text(char *buf, size_t size)
{
    char host[256];
    if (gethostname(host, sizeof host) != 0)
        strcpy(host, "?");
    host[sizeof host - 1] = '\0';
    int n = snprintf(buf, size, "%s:%ld:%ld", host, (long)getpid(),
                     (long)syscall(SYS_gettid));
    return n < 0 ? 0 : NM_MIN((size_t)n, size - 1);
}

/* Runs the release script once.  *SENT tells whether a failed call may
 * still have reached the server. */
static int release_once(nm_lease_t *l, int unrecoverable, long long *result, int *sent)
{
    const char *argv[4] = { l->key, l->key, l->token, unrecoverable ? "1" : "0" };
    size_t lens[4] = { l->key_len, l->key_len + strlen(META_SUFFIX), NM_TOKEN_LEN, 1 };
    redisContext *c;
    redisReply *r;

    *sent = 0;
    int err = nm_conn_get(l->cfg, 0, NM_FOREVER, &c);
    if (err)
        return err;
    *sent = 1;
    err = nm_script_run(c, NM_SCRIPT_RELEASE, 2, 4, argv, lens, &r);
    if (err == NM_ECONN)
        nm_conn_drop(0);
    if (err)
        return err;
    err = nm_reply_integer(r, result);
    freeReplyObject(r);
    return err;
}

/* One acquire attempt: 0 (ours), EBUSY with the holder's *PTTL, or an
 * error; *SENT as for release_once. */
static int acquire_once(nm_lease_t *l, int64_t deadline, long long *pttl, int *sent)
{
    char lease[16], holder[320];
    size_t holder_len = holder_text(holder, sizeof holder);
    snprintf(lease, sizeof lease, "%u", l->lease_ms);
    const char *argv[5] = { l->key, l->key, l->token, lease, holder };
    size_t lens[5] = { l->key_len, l->key_len + strlen(META_SUFFIX), NM_TOKEN_LEN,
                       strlen(lease), holder_len };
    redisContext *c;
    redisReply *r;
    long long v[3];

    *sent = 0;
    int err = nm_conn_get(l->cfg, 0, deadline, &c);
    if (err)
        return err;
    *sent = 1;
    int64_t sent_at = nm_now_ms();
    err = nm_script_run(c, NM_SCRIPT_ACQUIRE, 2, 5, argv, lens, &r);
    if (err == NM_ECONN)
        nm_conn_drop(0);
    if (err)
        return err;
    err = nm_reply_integers(r, v, 3);
    freeReplyObject(r);
    if (err)
        return err;
    if (v[0] == -1)
        return ENOTRECOVERABLE;
    if (v[0] != 1) {
        *pttl = v[1];
        return EBUSY;
    }
    l->sent_at = sent_at;
    l->fence = v[1];
    l->owner_died = v[2] != 0;
    return 0;
}

void nm_lease_forget(nm_lease_t *l)
{
    free(l->key);
    nm_config_unref(l->cfg);
    memset(l, 0, sizeof *l);
}

/* How long to sleep before the next attempt, and the back-off after it.
 * Subscribed, a waiter sleeps until a release or the holder's expiry. */
static int64_t next_pause(int err, long long pttl, int subscribed, int64_t *backoff)
{
    int64_t pause = *backoff;
    if (err == EBUSY && subscribed)
        return pttl >= 0 ? pttl + 1 : SUBSCRIBED_MAX_SLEEP_MS;
    if (err == EBUSY) {
        if (pttl >= 0)
            pause = NM_MIN(pause, (int64_t)pttl + 1);
        *backoff = NM_MIN(*backoff * 2, BUSY_BACKOFF_MAX_MS);
    } else {
        *backoff = NM_MIN(*backoff * 2, CONN_BACKOFF_MAX_MS);
    }
    return pause;
}

/* Sleeps up to PAUSE (never past DEADLINE), or until CH moves past SEQ. */
static void pause_until(nm_chan_t *ch, uint64_t seq, int64_t pause, int64_t deadline)
{
    int64_t until = nm_now_ms() + NM_MIN(pause, nm_remaining_ms(deadline));
    if (ch)
        nm_wake_wait(ch, seq, until);
    else
        nm_sleep_ms(until - nm_now_ms());
}

/* Attempts until success, a final error, or the deadline. */
static int acquire_loop(nm_lease_t *l, nm_wait_t wait, int64_t deadline, int *maybe_applied)
{
    nm_chan_t *ch = NULL;
    int64_t backoff = 1;
    int conn_failures = 0, subscribed = 0, err;

    for (;;) {
        uint64_t seq = ch ? nm_wake_seq(ch) : 0;
        long long pttl = -1;
        int sent;
        err = acquire_once(l, deadline, &pttl, &sent);
        if (err == NM_ECONN) {
            /* A request that timed out may still have been applied. */
            *maybe_applied |= sent;
            if (wait == NM_NOWAIT && ++conn_failures >= NOWAIT_CONN_TRIES) {
                err = EAGAIN;
                break;
            }
            if (wait == NM_NOWAIT)
                continue;
        } else if (err != EBUSY || wait == NM_NOWAIT) {
            break;
        } else if (!ch && (ch = nm_wake_listen(l->key, l->key_len)) != NULL) {
            int64_t until = NM_MIN(deadline, nm_now_ms() + (int64_t)l->cfg->io_timeout_ms);
            subscribed = nm_wake_ready(ch, until) == 0;
            continue; /* subscribed first, now try again */
        }
        if (nm_remaining_ms(deadline) == 0) {
            err = ETIMEDOUT;
            break;
        }
        pause_until(ch, seq, next_pause(err, pttl, subscribed, &backoff), deadline);
    }
    if (ch)
        nm_wake_unlisten(ch);
    return err;
}

int nm_lease_acquire(nm_lease_t *l, const char *name, size_t name_len,
                     unsigned int lease_ms, nm_wait_t wait, int64_t deadline)
{
    int maybe_applied = 0;
    int err;

    memset(l, 0, sizeof *l);
    err = nm_config_current(&l->cfg);
    if (err)
        return err;
    l->lease_ms = lease_ms ? lease_ms : l->cfg->lease_ms;
    err = nm_token_new(l->token);
    if (!err)
        err = build_key(l, name, name_len);
    if (!err)
        err = acquire_loop(l, wait, deadline, &maybe_applied);
    if (err) {
        /* Giving up after a request whose answer was lost: the key may hold
         * our token now.  Delete it if so, rather than leave it to expire. */
        long long ignored;
        int sent;
        if (maybe_applied)
            release_once(l, 0, &ignored, &sent);
        nm_lease_forget(l);
    }
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
    const char *argv[3] = { l->key, l->token, lease };
    size_t lens[3] = { l->key_len, NM_TOKEN_LEN, strlen(lease) };
    redisContext *c;
    redisReply *r;
    int err = NM_ECONN;

    for (int i = 0; i < 2 && err == NM_ECONN; i++) {
        err = nm_conn_get(l->cfg, 0, NM_FOREVER, &c);
        if (err)
            continue;
        *sent_at = nm_now_ms();
        err = nm_script_run(c, NM_SCRIPT_RENEW, 1, 3, argv, lens, &r);
        if (err == NM_ECONN)
            nm_conn_drop(0);
    }
    if (err)
        return err == NM_ECONN ? EIO : err;
    long long v = 0;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 1 || nm_reply_integer(r->element[0], &v))
        err = EPROTO;
    freeReplyObject(r);
    return err ? err : v == 1 ? 0 : ENOLCK;
}

int nm_lease_break(const char *name, size_t name_len)
{
    nm_lease_t l;
    redisContext *c;
    redisReply *r;
    long long held = 0;

    memset(&l, 0, sizeof l);
    int err = nm_config_current(&l.cfg);
    if (!err)
        err = build_key(&l, name, name_len);
    for (int i = 0; i < 2 && !err; i++) {
        err = nm_conn_get(l.cfg, 0, NM_FOREVER, &c);
        if (!err) {
            const char *argv[2] = { l.key, l.key };
            size_t lens[2] = { l.key_len, l.key_len + strlen(META_SUFFIX) };
            err = nm_script_run(c, NM_SCRIPT_BREAK, 2, 2, argv, lens, &r);
        }
        if (err != NM_ECONN)
            break;
        nm_conn_drop(0);
    }
    if (!err) {
        err = nm_reply_integer(r, &held);
        freeReplyObject(r);
    }
    nm_lease_forget(&l);
    if (err)
        return err == NM_ECONN ? EAGAIN : err;
    return held ? 0 : ENOENT;
}
