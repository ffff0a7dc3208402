/*
 * lease.c -- acquiring and releasing one lock on the server.
 *
 * Waiting is the one loop of every queued kind (waiting.h): this file
 * gives it the mutex's requests -- an attempt (acquire.lua: the lock taken,
 * or the caller queued by the same request), a cancel, an undo and the
 * exit handler's leave.  A release reserves the lock for the head of the
 * queue for a short claim and pushes to that waiter's list (lib.lua,
 * Grants and Waiting): a hand-off costs the release, the push and one
 * round trip, with no pub/sub and no other thread in between.  Quorum mode
 * does not queue (each server would serve its own head of the queue, and
 * nobody might win a quorum): its waiters listen for "released" on pub/sub
 * through the background thread (wake.h), and retry.
 *
 * A grant is a hint, never proof: lock() returns 0 only after a reply to
 * the caller's own request said that this acquisition's token holds the
 * key, and the lease's validity counts from when that request was sent.
 * A grant pushed may be old (the waiter was paused past its claim), so it
 * too is confirmed.
 *
 * Deadlines.  Every request is bounded by the caller's deadline and the I/O
 * timeout (reply.h); trylock's whole call by the I/O timeout.  Leaving the
 * queue after the deadline is bounded too (CLEANUP_MS): a silent server
 * cannot stretch a timed wait by another timeout.
 *
 * Routes.  A command goes where the key lives through routed.h, a script
 * with its riders through script.h or cluster_route.h; routed.h notes the
 * outcome of both (the server's words for a refusal).
 */
#include "nm.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"
#include "cluster.h"
#include "cluster_route.h"
#include "config.h"
#include "conn.h"
#include "keys.h"
#include "quorum.h"
#include "redlock.h"
#include "lease.h"
#include "journal.h"
#include "replicas.h"
#include "reply.h"
#include "routed.h"
#include "script.h"
#include "sentinel.h"
#include "wake.h"
#include "waiting.h"

/* What undoing an acquisition whose reply was lost may take after the
 * caller's deadline (acquisition.h). */
#define CLEANUP_MS NM_CLEANUP_MS

static char host_name[256];

static void lookup_host(void)
{
    if (gethostname(host_name, sizeof host_name - 1) != 0)
        strcpy(host_name, "?");
}

/* The calling thread's process and thread ids, asked of the kernel once
 * per thread (two system calls per acquisition otherwise), and again in a
 * forked child, whose ids differ from the parent's that its copy of this
 * thread's storage holds. */
static unsigned long fork_generation; /* bumped in every forked child */
static __thread struct {
    unsigned long generation; /* fork_generation + 1 when filled */
    long pid, tid;
} ids;

static void my_ids(long *pid, long *tid)
{
    unsigned long now = __atomic_load_n(&fork_generation, __ATOMIC_RELAXED) + 1;
    if (ids.generation != now) {
        ids.pid = (long)getpid();
        ids.tid = (long)syscall(SYS_gettid);
        ids.generation = now;
    }
    *pid = ids.pid;
    *tid = ids.tid;
}

/* host:pid:tid of the caller (or the configured holder:tid), stored in the
 * lock's value for people and tools asking who holds a lock.  The host name
 * is looked up once. */
static size_t holder_text(const nm_config_t *cfg, char *buf, size_t size)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    long pid, tid;
    int n;
    my_ids(&pid, &tid);
    if (cfg->holder) {
        n = snprintf(buf, size, "%s:%ld", cfg->holder, tid);
    } else {
        pthread_once(&once, lookup_host);
        n = snprintf(buf, size, "%s:%ld:%ld", host_name, pid, tid);
    }
    return n < 0 ? 0 : NM_MIN((size_t)n, size - 1);
}

/* How many of L's keys (keys.h's order) each script is given: every key
 * it may touch (lib.lua, "Declared keys").  The fast paths of acquire.lua
 * (the lock key and its slot's fence floor) and release.lua (the lock key)
 * take fewer, and ask for the call again with every key when they need
 * more (NM_EKEYS, nm.h). */
#define KEYS_ACQUIRE NM_KEY_COUNT
#define KEYS_CANCEL NM_KEY_COUNT
#define KEYS_RELEASE (NM_KEY_MARKER + 1)
#define KEYS_FENCE (NM_KEY_MARKER + 1)
#define KEYS_BREAK (NM_KEY_MARKER + 1)
#define KEYS_LOCK_ONLY 1
#define KEYS_LOCK_FLOOR (NM_KEY_FLOOR + 1)

/* The script's arguments: NKEYS of L's keys, then ARGS.  A lease keeps
 * its lock key and floor alone (keys.h: a held lock's memory); a script
 * given more, on a contended path, has the rest built for the call in
 * FULL, which the caller frees. */
#define MAX_ARGS 5
typedef struct script_argv {
    const char *argv[NM_KEY_COUNT + MAX_ARGS];
    size_t lens[NM_KEY_COUNT + MAX_ARGS];
    char *full;
} script_argv_t;

static int fill_argv(const nm_lease_t *l, int nkeys, int nargs, const char **args,
                     const size_t *arg_lens, script_argv_t *a)
{
    const char *keys = l->key;
    a->full = NULL;
    if (nkeys > KEYS_LOCK_FLOOR) {
        if (nm_keys_full(l->key, l->key_len, l->token, &a->full) != 0)
            return ENOMEM;
        keys = a->full;
    }
    for (int i = 0; i < nkeys; i++)
        a->argv[i] = nm_keys_get(keys, l->key_len, (nm_key_t)i, &a->lens[i]);
    for (int i = 0; i < nargs; i++) {
        a->argv[nkeys + i] = args[i];
        a->lens[nkeys + i] = arg_lens[i];
    }
    return 0;
}

static int quorum_mode(const nm_lease_t *l)
{
    return l->cfg->nservers > 1;
}

/* release.lua's mode letters for L (see there). */
static void release_mode(const nm_lease_t *l, int unrecoverable, int quietly, char *mode)
{
    *mode = '\0';
    if (l->robust)
        strcat(mode, "r");
    if (unrecoverable)
        strcat(mode, "u");
    if (quietly)
        strcat(mode, "x");
    if (quorum_mode(l))
        strcat(mode, "fp");
}

/* acquire.lua's and cancel.lua's mode letters for L (see acquire.lua). */
static void acquire_mode(const nm_lease_t *l, int queued, int trylock, char *mode)
{
    *mode = '\0';
    if (l->cache)
        strcat(mode, "k");
    if (trylock)
        strcat(mode, "t");
    if (queued)
        strcat(mode, "w");
    if (l->robust)
        strcat(mode, "r");
    if (quorum_mode(l))
        strcat(mode, "f");
}

/* After a request of L: its outcome noted (routed.h).  Returns ERR, a
 * redirection from a server that is no Cluster node as EPROTO. */
static int note_result(nm_lease_t *l, int err)
{
    return nm_routed_note(l->cfg, err);
}

/* Runs command ARGV (ARGC words) about L's key where it lives (routed.h),
 * the reply due by REPLY_BY; a blocking command's at UNTIL (reply.h; 0
 * for any other command).  *SENT tells whether a failed call may still
 * have reached the server; the connection is dropped when it broke. */
static int call(nm_lease_t *l, int argc, const char **argv, const size_t *lens, int64_t until,
                int64_t reply_by, redisReply **out, int *sent)
{
    nm_routed_t q = { .key = l->key, .key_len = l->key_len, .argc = argc, .argv = argv,
                      .lens = lens, .until = until };
    return nm_routed_call(l->cfg, &q, reply_by, out, sent);
}

/* A rider (lease.h) that goes to a cluster node of its own slot: run
 * there by itself, before the request it rides with. */
static void ride_alone(nm_lease_t *l, nm_script_call_t *rider, int64_t deadline)
{
    rider->reply = NULL;
    rider->err = nm_cluster_script(l->cfg, rider->argv[0], rider->lens[0], rider->id,
                                   rider->nkeys, rider->nargs, rider->argv, rider->lens,
                                   deadline, &rider->reply, &rider->sent);
}

/* Runs script ID with ARGC words ARGV (NKEYS keys of L's slot first) on
 * the calling thread's connection, as call() does.  RIDE's (when RIDE is
 * not NULL) go with it, and are then taken off RIDE, so that a request
 * sent again does not take them twice: its rider first, in the same write
 * on one server, by itself in a cluster; its trailer last, on one server
 * only. */
static int run_argv(nm_lease_t *l, nm_ride_t *ride, nm_script_t id, int nkeys, int argc,
                    const char **argv, const size_t *lens, int64_t deadline, redisReply **out,
                    int *sent)
{
    nm_script_call_t *first = ride ? ride->rider : NULL;
    nm_trailer_t *last = ride ? ride->trailer : NULL;
    redisContext *c;
    *sent = 0;
    deadline = nm_request_deadline(l->cfg->io_timeout_ms, deadline);
    int on, err = nm_cluster_mode(l->cfg, deadline, &on);
    if (!err && on) { /* cluster.h: to the node of the key's slot */
        if (first) {
            ride_alone(l, first, deadline);
            *ride = (nm_ride_t){ NULL, NULL };
        }
        return note_result(l, nm_cluster_script(l->cfg, l->key, l->key_len, id, nkeys, argc,
                                                argv, lens, deadline, out, sent));
    }
    if (!err)
        err = nm_conn_get(l->cfg, 0, deadline, &c);
    if (err)
        return err;
    *sent = 1;
    if (!first)
        return note_result(l, nm_script_run(c, id, nkeys, argc, argv, lens, deadline, out));
    nm_script_call_t own = { id, nkeys, argc, argv, lens, 0, 0, NULL };
    *ride = (nm_ride_t){ NULL, NULL };
    err = nm_script_run_pair(c, first, &own, last, deadline);
    *out = own.reply;
    return note_result(l, err ? err : own.err);
}

/* Runs script ID of L (NKEYS of its keys, then ARGS) on the calling
 * thread's connection, as run_argv() does, with RIDE's if any. */
static int run_riding(nm_lease_t *l, nm_ride_t *ride, nm_script_t id, int nkeys, int nargs,
                      const char **args, const size_t *arg_lens, int64_t deadline,
                      redisReply **out, int *sent)
{
    script_argv_t a;
    *sent = 0;
    if (fill_argv(l, nkeys, nargs, args, arg_lens, &a) != 0)
        return ENOMEM;
    int err = run_argv(l, ride, id, nkeys, nkeys + nargs, a.argv, a.lens, deadline, out, sent);
    free(a.full);
    return err;
}

/* run_riding() without a rider. */
static int run(nm_lease_t *l, nm_script_t id, int nkeys, int nargs, const char **args,
               const size_t *arg_lens, int64_t deadline, redisReply **out, int *sent)
{
    return run_riding(l, NULL, id, nkeys, nargs, args, arg_lens, deadline, out, sent);
}

/* How many wake-ups one grant.lua call pushes at most. */
#define WAKES_PER_CALL 16

/* One grant.lua call for up to WAKES_PER_CALL of R's {token, ms} pairs
 * from element AT on (every list in L's key's slot); returns the element
 * past them. */
static size_t push_some(nm_lease_t *l, const redisReply *r, size_t at, int64_t deadline)
{
    const char *argv[2 * WAKES_PER_CALL], *token;
    size_t lens[2 * WAKES_PER_CALL], token_len;
    char *lists[WAKES_PER_CALL], ms[WAKES_PER_CALL][24];
    long long v;
    int n = 0;
    for (; n < WAKES_PER_CALL && nm_reply_grant(r, at, &token, &token_len, &v) == 0; at += 2) {
        lists[n] = token_len == NM_TOKEN_LEN
                       ? nm_keys_grant_for(l->key, l->key_len, token, &lens[n])
                       : NULL;
        if (lists[n])
            snprintf(ms[n++], sizeof ms[0], "%lld", v);
    }
    for (int i = 0; i < n; i++) {
        argv[i] = lists[i];
        argv[n + i] = ms[i];
        lens[n + i] = strlen(ms[i]);
    }
    redisReply *g;
    int sent;
    if (n > 0 && run_argv(l, NULL, NM_SCRIPT_GRANT, n, 2 * n, argv, lens, deadline, &g, &sent) == 0)
        freeReplyObject(g);
    for (int i = 0; i < n; i++)
        free(lists[i]);
    return at;
}

/* Pushes the wake-ups of R from element AT on (lease.h), in as few
 * requests as grant.lua takes them.  A grant that is not pushed costs its
 * waiter its turn, never anybody's safety: its deputies find the claim
 * ran out (lib.lua, Waiting). */
static void push_wakes(nm_lease_t *l, const redisReply *r, size_t at, int64_t deadline)
{
    const char *token;
    size_t token_len;
    long long ms;
    while (nm_reply_grant(r, at, &token, &token_len, &ms) == 0)
        at = push_some(l, r, at, deadline);
}

/* Quorum mode: runs the same script on every server at once. */
static void run_all(nm_lease_t *l, nm_script_t id, int nkeys, int nargs, const char **args,
                    const size_t *arg_lens, int64_t deadline, nm_votes_t *v)
{
    script_argv_t a;
    if (fill_argv(l, nkeys, nargs, args, arg_lens, &a) != 0) {
        memset(v, 0, sizeof *v);
        v->n = l->cfg->nservers;
        for (size_t i = 0; i < v->n; i++)
            v->err[i] = ENOMEM;
        v->sent_at = nm_now_ms();
        return;
    }
    nm_quorum_call(l->cfg, id, nkeys, nkeys + nargs, a.argv, a.lens, deadline, v);
    free(a.full);
}

/* Quorum mode: run_all() of a script that answers 1 for "done", and
 * whether a quorum did it (nm_redlock_done).  *SENT_AT, if not NULL, is
 * when the requests left. */
static int run_all_done(nm_lease_t *l, nm_script_t id, int nkeys, int nargs, const char **args,
                        const size_t *arg_lens, int64_t deadline, int64_t *sent_at)
{
    nm_votes_t v;
    run_all(l, id, nkeys, nargs, args, arg_lens, deadline, &v);
    if (sent_at)
        *sent_at = v.sent_at;
    int err = nm_redlock_done(l->cfg, &v);
    nm_votes_clear(&v);
    return err;
}

/* Quorum mode: release.lua everywhere by DEADLINE, for a grant we hold, or
 * QUIETLY for one we do not keep: waking the waiters for that would wake
 * ourselves too, and contenders back off by themselves after a split vote. */
static int release_all(nm_lease_t *l, int unrecoverable, int quietly, int64_t deadline)
{
    char mode[8];
    release_mode(l, unrecoverable, quietly, mode);
    const char *args[2] = { l->token, mode };
    size_t lens[2] = { NM_TOKEN_LEN, strlen(mode) };
    return run_all_done(l, NM_SCRIPT_RELEASE, KEYS_RELEASE, 2, args, lens, deadline, NULL);
}

/* Quorum mode's second round (redlock.c): every granting server's fence
 * counter goes up to RAISE_TO before the holder sees that fence. */
static int raise_fence(nm_lease_t *l, long long raise_to, int64_t deadline)
{
    char fence[24];
    snprintf(fence, sizeof fence, "%lld", raise_to);
    const char *args[2] = { l->token, fence };
    size_t lens[2] = { NM_TOKEN_LEN, strlen(fence) };
    return run_all_done(l, NM_SCRIPT_FENCE, KEYS_FENCE, 2, args, lens, deadline, NULL);
}

/* Quorum mode's acquire attempt: the acquire script on every server, kept
 * only if a quorum granted in time; otherwise released everywhere. */
static int acquire_all(nm_lease_t *l, const char **args, const size_t *lens,
                       int64_t deadline, long long *pttl)
{
    nm_votes_t v;
    nm_verdict_t verdict;
    run_all(l, NM_SCRIPT_ACQUIRE, KEYS_ACQUIRE, 5, args, lens, deadline, &v);
    int err = nm_redlock_granted(l->cfg, l->lease_ms, l->splits, &v, &verdict);
    nm_votes_clear(&v);
    if (!err) {
        l->fence = verdict.fence;
        l->owner_died = verdict.owner_died != 0;
        l->sent_at = verdict.sent_at;
    } else if (err == EBUSY) {
        *pttl = verdict.pttl;
        l->splits += verdict.split != 0;
    }
    if (!err && verdict.raise_to && raise_fence(l, verdict.raise_to, deadline) != 0) {
        *pttl = 1;
        err = EBUSY;
    }
    if (err)
        release_all(l, 0, 1, NM_MAX(deadline, nm_now_ms() + CLEANUP_MS));
    return err;
}

static int release_once(nm_lease_t *l, nm_ride_t *ride, int unrecoverable,
                        int64_t deadline, long long *result, int *sent);

/* Replica acknowledgement (replicas.h): a grant counts once enough
 * replicas have it; otherwise it is given back at once (NM_ECONN: the
 * caller tries again as after a broken connection). */
static int replicated(nm_lease_t *l, int64_t deadline)
{
    long long ignored;
    int sent, err = nm_replicas_confirm(l->cfg, deadline);
    if (err)
        release_once(l, NULL, 0, NM_MAX(deadline, nm_now_ms() + CLEANUP_MS), &ignored, &sent);
    return err;
}

/* The {granted, fence-or-pttl, dead} triple of acquire.lua and cancel.lua:
 * 0 (ours: fence and dead stored in L), EBUSY or NM_EASKED (*PTTL set),
 * ENOTRECOVERABLE, NM_EKEYS.  A grant the script reserved for a queued
 * waiter is pushed to it, by DEADLINE. */
static int take_triple(nm_lease_t *l, redisReply *r, long long *pttl, int64_t deadline)
{
    long long v[3], waited = 0;
    int err = nm_reply_integers(r, v, 3);
    /* The sixth, when there: others queued already (acquire.lua). */
    if (!err && v[0] == 1 && r->elements >= 6)
        err = nm_reply_integer(r->element[5], &waited);
    if (!err && v[0] == 0)
        push_wakes(l, r, 3, deadline);
    freeReplyObject(r);
    if (err)
        return err;
    l->waited = waited != 0;
    if (v[0] == -1)
        return ENOTRECOVERABLE;
    if (v[0] == 3)
        return NM_EKEYS;
    if (v[0] != 1) {
        *pttl = v[1];
        return v[0] == 2 ? NM_EASKED : EBUSY;
    }
    l->fence = v[1];
    l->owner_died = v[2] != 0;
    return 0;
}

/* One acquire attempt, joining the queue for QUEUE_TTL ms when that is not
 * 0 (QUEUED: we are in it already): 0 (ours), EBUSY with the holder's
 * *PTTL, or an error.  On success l->sent_at is when the request left;
 * l->tried_at always is. */
static int acquire_once(nm_lease_t *l, nm_ride_t *ride, unsigned int queue_ttl,
                        int queued, int trylock, int64_t deadline, long long *pttl, int *sent)
{
    char lease[16], ttl[16], holder[NETMUTEX_HOLDER_MAX], mode[8];
    size_t holder_len = holder_text(l->cfg, holder, sizeof holder);
    snprintf(lease, sizeof lease, "%u", l->lease_ms);
    snprintf(ttl, sizeof ttl, "%u", queue_ttl);
    acquire_mode(l, queued, trylock, mode);
    const char *args[5] = { l->token, lease, ttl, mode, holder };
    size_t lens[5] = { NM_TOKEN_LEN, strlen(lease), strlen(ttl), strlen(mode), holder_len };
    redisReply *r;

    l->tried_at = nm_now_ms();
    if (quorum_mode(l)) {
        *sent = 0; /* acquire_all cleans up after itself */
        return acquire_all(l, args, lens, deadline, pttl);
    }
    /* The fast path (acquire.lua) needs the lock key alone.  A request
     * with a rider is a woken condition waiter's, which often finds the
     * lock taken: every key at once saves it a round trip then. */
    int nkeys = queued || l->robust || (ride && ride->rider) ? KEYS_ACQUIRE : KEYS_LOCK_FLOOR;
    int err = run_riding(l, ride, NM_SCRIPT_ACQUIRE, nkeys, 5, args, lens, deadline, &r,
                         sent);
    if (!err)
        err = take_triple(l, r, pttl, deadline);
    if (err == NM_EKEYS) {
        err = run(l, NM_SCRIPT_ACQUIRE, KEYS_ACQUIRE, 5, args, lens, deadline, &r, sent);
        if (!err)
            err = take_triple(l, r, pttl, deadline);
    }
    if (err == NM_EKEYS) /* it asked for the keys it was given */
        err = EPROTO;
    if (!err)
        err = replicated(l, deadline);
    if (!err)
        l->sent_at = l->tried_at;
    return err;
}

/* Leaves the queue by DEADLINE; if the lock was granted to us meanwhile,
 * this request confirms it and it is ours (0), else EBUSY, or an error. */
static int cancel_once(nm_lease_t *l, int64_t deadline)
{
    char lease[16], mode[8];
    snprintf(lease, sizeof lease, "%u", l->lease_ms);
    acquire_mode(l, 1, 0, mode);
    const char *args[3] = { l->token, lease, mode };
    size_t lens[3] = { NM_TOKEN_LEN, strlen(lease), strlen(mode) };
    redisReply *r;
    long long pttl;
    int sent;

    int64_t sent_at = nm_now_ms();
    int err = run(l, NM_SCRIPT_CANCEL, KEYS_CANCEL, 3, args, lens, deadline, &r, &sent);
    if (!err)
        err = take_triple(l, r, &pttl, deadline);
    if (err == NM_EKEYS)
        err = EPROTO;
    if (!err)
        err = replicated(l, deadline);
    if (!err)
        l->sent_at = sent_at;
    return err;
}

/* release.lua's answer R: its result in *RESULT (2: again with every
 * key); a grant it reserved for a queued waiter is pushed to it. */
static int take_release(nm_lease_t *l, redisReply *r, int64_t deadline, long long *result)
{
    int err = r->type == REDIS_REPLY_ARRAY ? nm_reply_integers(r, result, 1)
                                           : nm_reply_integer(r, result);
    if (!err && r->type == REDIS_REPLY_ARRAY)
        push_wakes(l, r, 1, deadline);
    freeReplyObject(r);
    return err;
}

/* Runs the release script once: its result in *RESULT.  The fast path
 * (mode '') is given the lock key alone unless waiters were seen; it asks
 * for every key when it finds some queued. */
static int release_send(nm_lease_t *l, nm_ride_t *ride, int unrecoverable,
                        int64_t deadline, long long *result, int *sent)
{
    char mode[8];
    release_mode(l, unrecoverable, 0, mode);
    const char *args[2] = { l->token, mode };
    size_t lens[2] = { NM_TOKEN_LEN, strlen(mode) };
    redisReply *r;
    /* A rider's release is a condition waiter's, whose signaller may be
     * queued for the lock already: every key at once, as for waiters. */
    int nkeys = *mode || l->waited || (ride && ride->rider) ? KEYS_RELEASE : KEYS_LOCK_ONLY;

    for (;;) {
        int err = run_riding(l, ride, NM_SCRIPT_RELEASE, nkeys, 2, args, lens, deadline, &r,
                             sent);
        if (!err)
            err = take_release(l, r, deadline, result);
        if (err || *result != 2)
            return err;
        if (nkeys == KEYS_RELEASE)
            return EPROTO; /* it asked for the keys it was given */
        nkeys = KEYS_RELEASE;
    }
}

/* release_send(), noted in the journal of recent releases when the server
 * is found through the sentinels (journal.h): one sent in the second
 * before they name a new master may land on the old one and never reach
 * the new.  Noted whatever the answer, even none: the new master may hold
 * the key with our token whatever the old one said. */
static int release_once(nm_lease_t *l, nm_ride_t *ride, int unrecoverable,
                        int64_t deadline, long long *result, int *sent)
{
    const nm_server_t *srv = &l->cfg->servers[0];
    /* Read before sending: a master published meanwhile is newer. */
    uint64_t gen = nm_sentinel_master_gen(srv);
    int err = release_send(l, ride, unrecoverable, deadline, result, sent);
    if (*sent && srv->sentinel)
        nm_journal_note(l->cfg, gen, l->key, l->key_len, nm_keys_size(l->key, l->key_len),
                        l->lease_ms, l->token, l->robust, unrecoverable);
    return err;
}

int nm_lease_resend(nm_config_t *cfg, const nm_journal_entry_t *e, int64_t deadline)
{
    nm_lease_t l = { .cfg = cfg, .key = e->key, .key_len = e->key_len, .robust = e->robust };
    long long ignored;
    int sent;
    memcpy(l.token, e->token, sizeof l.token);
    /* Not noted again: the entry is the journal's already. */
    return release_send(&l, NULL, e->unrecoverable, deadline, &ignored, &sent);
}

void nm_lease_forget(nm_lease_t *l)
{
    free(l->key);
    nm_config_unref(l->cfg);
    memset(l, 0, sizeof *l);
}

/* The child's host and ids are looked up anew (my_ids). */
void nm_lease_after_fork_child(void)
{
    __atomic_add_fetch(&fork_generation, 1, __ATOMIC_RELAXED);
}

/* ---- waiting: the mutex's requests for the one wait loop (waiting.h) ---- */

/* What the loop carries for a mutex: the first request's rider. */
typedef struct mutex_wait {
    nm_ride_t ride; /* goes with the first request (lease.h) */
} mutex_wait_t;

static int mutex_attempt(nm_waiting_t *w, unsigned int ttl, int64_t deadline, long long *pttl,
                         int *sent)
{
    mutex_wait_t *m = w->arg;
    return acquire_once(w->l, &m->ride, ttl, w->queued, w->trylock, deadline, pttl, sent);
}

static int mutex_cancel(nm_waiting_t *w, int64_t deadline)
{
    return cancel_once(w->l, deadline);
}

static void mutex_undo(nm_waiting_t *w, int64_t deadline)
{
    long long ignored;
    int sent;
    release_once(w->l, NULL, 0, deadline, &ignored, &sent);
}

/* The exit handler's way out (waiting.h): leave, and give back a grant
 * that came meanwhile. */
static void mutex_leave(nm_lease_t *l, void *arg, int64_t deadline)
{
    long long ignored;
    int sent;
    (void)arg;
    if (cancel_once(l, deadline) == 0)
        release_once(l, NULL, 0, deadline, &ignored, &sent);
}

/* A trylock queues too, only to ask a caching holder (acquire.lua 't'). */
static const nm_wait_ops_t mutex_ops = { mutex_attempt, mutex_cancel, mutex_undo, mutex_leave,
                                         1 };

/* A held lock keeps its lock key and floor alone: the siblings are built
 * when a contended path's script needs them (fill_argv). */
static void keep_lock_and_floor(nm_lease_t *l)
{
    char *small = realloc(l->key, nm_keys_size(l->key, l->key_len));
    if (small)
        l->key = small;
}

int nm_lease_acquire(nm_lease_t *l, const char *name, size_t name_len,
                     unsigned int lease_ms, unsigned int flags, nm_wait_t wait,
                     int64_t deadline)
{
    return nm_lease_acquire_riding(l, name, name_len, lease_ms, flags, wait, deadline, NULL);
}

int nm_lease_acquire_riding(nm_lease_t *l, const char *name, size_t name_len,
                            unsigned int lease_ms, unsigned int flags, nm_wait_t wait,
                            int64_t deadline, nm_script_call_t *rider)
{
    mutex_wait_t m = { .ride = { rider, NULL } };
    nm_waiting_t w = { .l = l, .ops = &mutex_ops, .arg = &m };
    int err;

    memset(l, 0, sizeof *l);
    err = nm_config_current(&l->cfg);
    if (err)
        return err;
    l->lease_ms = lease_ms ? lease_ms : l->cfg->lease_ms;
    l->robust = (flags & NM_LEASE_ROBUST) != 0;
    l->cache = (flags & NM_LEASE_CACHE) && l->cfg->cache && !quorum_mode(l);
    /* Quorum mode never queues: each server would hand the lock to its
     * own head of the queue, and no waiter might win a quorum. */
    w.quorum = quorum_mode(l);
    if (wait == NM_NOWAIT)
        deadline = nm_now_ms() + l->cfg->io_timeout_ms;
    err = nm_token_new(l->token);
    if (!err)
        err = nm_keys_build(l->cfg, name, name_len, l->token, &l->key, &l->key_len);
    if (!err)
        keep_lock_and_floor(l);
    if (!err)
        err = nm_wait_run(&w, wait, deadline);
    if (err)
        nm_lease_forget(l);
    return err;
}

int nm_lease_release(nm_lease_t *l, int unrecoverable)
{
    return nm_lease_release_by(l, unrecoverable, NM_FOREVER);
}

int nm_lease_release_by(nm_lease_t *l, int unrecoverable, int64_t deadline)
{
    return nm_lease_release_riding(l, unrecoverable, deadline, NULL, NULL);
}

int nm_lease_release_riding(nm_lease_t *l, int unrecoverable, int64_t deadline,
                            nm_script_call_t *rider, nm_trailer_t *trailer)
{
    nm_ride_t ride = { rider, rider ? trailer : NULL };
    int sent, err = NM_ECONN;
    long long result = 0;

    if (quorum_mode(l)) {
        err = release_all(l, unrecoverable, 0, deadline);
        nm_lease_forget(l);
        return err;
    }
    /* One redial: the cached connection may be stale (server restarted,
     * CLIENT KILL); a second failure means the server is not there.  When
     * the second attempt finds the key gone, either the first one deleted
     * it (its reply was lost) or the key was lost (a restart, say): nothing
     * is kept on the server to tell them apart, so the answer is the one
     * that cannot hide a lost lease, ENOLCK. */
    for (int i = 0; i < 2 && err == NM_ECONN && nm_remaining_ms(deadline) > 0; i++)
        err = release_once(l, &ride, unrecoverable, deadline, &result, &sent);
    nm_lease_forget(l);
    if (err)
        return EIO;
    return result == 1 ? 0 : ENOLCK;
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

    if (quorum_mode(l))
        return run_all_done(l, NM_SCRIPT_RENEW, KEYS_LOCK_ONLY, 2, args, lens, NM_FOREVER,
                            sent_at);
    for (int i = 0; i < 2 && err == NM_ECONN; i++) {
        *sent_at = nm_now_ms();
        err = run(l, NM_SCRIPT_RENEW, KEYS_LOCK_ONLY, 2, args, lens, NM_FOREVER, &r, &sent);
    }
    if (err)
        return err == NM_ECONN ? EIO : err;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 1 || nm_reply_integer(r->element[0], &v))
        err = EPROTO;
    freeReplyObject(r);
    return err ? err : v == 1 ? 0 : ENOLCK;
}

int nm_lease_answer_held(nm_lease_t *l, const char *asker)
{
    size_t len;
    redisReply *r;
    int sent;
    char *grant = nm_keys_grant_for(l->key, l->key_len, asker, &len);
    if (!grant)
        return ENOMEM;
    /* The push and its expiry in one script (add.lua): a list left by a
     * push whose PEXPIRE never came would never expire. */
    const char *argv[4] = { grant, "l", "0", "1000" };
    size_t lens[4] = { len, 1, 1, 4 };
    int err = run_argv(l, NULL, NM_SCRIPT_ADD, 1, 4, argv, lens,
                       nm_now_ms() + l->cfg->io_timeout_ms, &r, &sent);
    if (!err)
        freeReplyObject(r);
    free(grant);
    return err;
}

int nm_lease_wanted(nm_lease_t *l, int *wanted)
{
    const char *argv[2] = { "GET", l->key };
    size_t lens[2] = { 3, l->key_len };
    const char *v = NULL;
    size_t len = 0;
    redisReply *r;
    int sent;
    int err = call(l, 2, argv, lens, 0, nm_now_ms() + l->cfg->io_timeout_ms, &r, &sent);
    if (err)
        return err;
    /* "<token><q><c> ..." (lib.lua); nil: gone. */
    if (r->type != REDIS_REPLY_NIL)
        nm_reply_string(r, &v, &len);
    int ours = v && len > NM_TOKEN_LEN && memcmp(v, l->token, NM_TOKEN_LEN) == 0;
    *wanted = !ours || v[NM_TOKEN_LEN] == 'q';
    freeReplyObject(r);
    return 0;
}

int nm_lease_mark_idle(nm_lease_t *l, int idle)
{
    const char *args[2] = { l->token, idle ? "i" : "k" };
    size_t lens[2] = { NM_TOKEN_LEN, 1 };
    redisReply *r;
    int sent;
    int err = run(l, NM_SCRIPT_MARK, KEYS_LOCK_ONLY, 2, args, lens,
                  nm_now_ms() + l->cfg->io_timeout_ms, &r, &sent);
    if (!err)
        freeReplyObject(r);
    return err;
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
        err = nm_keys_build(l.cfg, name, name_len, NULL, &l.key, &l.key_len);
    if (!err && quorum_mode(&l)) {
        nm_votes_t votes;
        run_all(&l, NM_SCRIPT_BREAK, KEYS_BREAK, 0, NULL, NULL, NM_FOREVER, &votes);
        err = nm_redlock_broken(l.cfg, &votes);
        nm_votes_clear(&votes);
        nm_lease_forget(&l);
        return err;
    }
    for (int i = 0; i < 2 && (i == 0 || err == NM_ECONN) && l.key; i++)
        err = run(&l, NM_SCRIPT_BREAK, KEYS_BREAK, 0, NULL, NULL, NM_FOREVER, &r, &sent);
    if (!err) {
        err = nm_reply_integer(r, &held);
        freeReplyObject(r);
    }
    nm_lease_forget(&l);
    if (err)
        return err == NM_ECONN ? EAGAIN : err;
    return held ? 0 : ENOENT;
}

/* ---- for the other kinds of lease (lease.h) -------------------------------- */

int nm_lease_script(nm_lease_t *l, nm_script_t id, int nkeys, int argc, const char **argv,
                    const size_t *lens, int64_t deadline, redisReply **out, int *sent)
{
    return run_argv(l, NULL, id, nkeys, argc, argv, lens, deadline, out, sent);
}

void nm_lease_push_wakes(nm_lease_t *l, const redisReply *r, size_t at, int64_t deadline)
{
    push_wakes(l, r, at, deadline);
}

size_t nm_lease_holder(const nm_config_t *cfg, char *buf, size_t size)
{
    return holder_text(cfg, buf, size);
}
