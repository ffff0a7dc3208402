/*
 * lease.c -- acquiring and releasing one lock on the server.
 *
 * Waiting, in this version, is honest polling: a waiter that finds the lock
 * taken sleeps until the holder's key would expire or for a short back-off
 * (1 ms doubling to 64 ms), whichever is sooner, and tries again.  Only one
 * thread per name and process does this (the others wait locally on the
 * registry entry), so the polling load is one request per back-off per
 * process.  Waking on release via pub/sub replaces this sleep.
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

/* trylock's bound on dialing: the first failure may be a stale connection
 * (server restarted), the second means the server is not there. */
#define NOWAIT_CONN_TRIES 2
#define BUSY_BACKOFF_MAX_MS 64
#define CONN_BACKOFF_MAX_MS 500
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
static int release_once(nm_lease_t *l, long long *result, int *sent)
{
    const char *argv[3] = { l->key, l->key, l->token };
    size_t lens[3] = { l->key_len, l->key_len + strlen(META_SUFFIX), NM_TOKEN_LEN };
    redisContext *c;
    redisReply *r;

    *sent = 0;
    int err = nm_conn_get(l->cfg, 0, NM_FOREVER, &c);
    if (err)
        return err;
    *sent = 1;
    err = nm_script_run(c, NM_SCRIPT_RELEASE, 2, 3, argv, lens, &r);
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
    err = nm_script_run(c, NM_SCRIPT_ACQUIRE, 2, 5, argv, lens, &r);
    if (err == NM_ECONN)
        nm_conn_drop(0);
    if (err)
        return err;
    err = nm_reply_integers(r, v, 3);
    freeReplyObject(r);
    if (err)
        return err;
    if (v[0] != 1) {
        *pttl = v[1];
        return EBUSY;
    }
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

/* How long to sleep before the next attempt, and the back-off after it. */
static int64_t next_pause(int err, long long pttl, int64_t *backoff)
{
    int64_t pause = *backoff;
    if (err == EBUSY) {
        if (pttl >= 0)
            pause = NM_MIN(pause, (int64_t)pttl + 1);
        *backoff = NM_MIN(*backoff * 2, BUSY_BACKOFF_MAX_MS);
    } else {
        *backoff = NM_MIN(*backoff * 2, CONN_BACKOFF_MAX_MS);
    }
    return pause;
}

/* Attempts until success, a final error, or the deadline. */
static int acquire_loop(nm_lease_t *l, nm_wait_t wait, int64_t deadline, int *maybe_applied)
{
    int64_t backoff = 1;
    int conn_failures = 0;

    for (;;) {
        long long pttl = -1;
        int sent;
        int err = acquire_once(l, deadline, &pttl, &sent);
        if (err == NM_ECONN) {
            /* A request that timed out may still have been applied. */
            *maybe_applied |= sent;
            if (wait == NM_NOWAIT && ++conn_failures >= NOWAIT_CONN_TRIES)
                return EAGAIN;
            if (wait == NM_NOWAIT)
                continue;
        } else if (err != EBUSY || wait == NM_NOWAIT) {
            return err;
        }
        int64_t left = nm_remaining_ms(deadline);
        if (left == 0)
            return ETIMEDOUT;
        nm_sleep_ms(NM_MIN(next_pause(err, pttl, &backoff), left));
    }
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
            release_once(l, &ignored, &sent);
        nm_lease_forget(l);
    }
    return err;
}

int nm_lease_release(nm_lease_t *l)
{
    int maybe_applied = 0, sent, err = NM_ECONN;
    long long result = 0;

    /* One redial: the cached connection may be stale (server restarted,
     * CLIENT KILL); a second failure means the server is not there. */
    for (int i = 0; i < 2 && err == NM_ECONN; i++) {
        err = release_once(l, &result, &sent);
        if (err == NM_ECONN)
            maybe_applied |= sent;
    }
    nm_lease_forget(l);
    if (err)
        return EIO;
    if (result == 1 || (result == 0 && maybe_applied))
        return 0; /* released now, or by the attempt whose reply was lost */
    return ENOLCK;
}
