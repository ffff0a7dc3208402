/*
 * redlock.c -- counting the votes of quorum mode.
 *
 * Fencing.  Each granting server answers with a fence from its own clock
 * (lib.lua), and the servers' clocks differ, so the largest value the
 * quorum returned, F, is what the holder gets -- but only after every
 * granting server's lock holds at least F and will not hand out a fence
 * below it (fence.lua, a second round that lease.c makes only when the
 * granting servers disagree -- with clocks in microseconds, nearly always;
 * it keeps F as a floor on a server whose clock is behind).  Then the
 * next grant, which needs a quorum too, includes at least one of those
 * servers, whose next fence is above F: fences only grow.
 *
 * A dead previous holder.  Each granting server reports whether the lock's
 * previous holder there ('held') never released it; but a release that
 * did not reach one server (down at that moment) looks the same on that
 * server.  So a server's "dead" counts only if no server reports that very
 * token as released -- nor the release of a later holder: the one that was
 * told of this death and repaired the state, say, while that server was
 * out of reach.  Markers carry their holder's fence (lib.lua, read_marker),
 * and fences only grow, so "later" is "with a larger fence".
 */
#include "nm.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "redlock.h"
#include "reply.h"
#include "token.h"

/* After a split vote, everyone backs off a random few milliseconds, so the
 * contenders do not collide again in lockstep; the bound doubles with every
 * split in a row (a grant left on a server by a request that timed out
 * blocks the quorum until its lease ends, and must not be polled hard). */
#define SPLIT_BACKOFF_MIN_MS 8
#define SPLIT_BACKOFF_MAX_MS 256

int64_t nm_redlock_drift(const nm_config_t *cfg, unsigned int lease_ms)
{
    return (int64_t)(cfg->drift_factor * lease_ms) + cfg->drift_ms;
}

/* One server's answer to acquire.lua. */
typedef struct ballot {
    long long result, fence_or_pttl, dead;
    const redisReply *held, *released; /* NULL if not reported */
} ballot_t;

static int read_ballot(const redisReply *r, ballot_t *b)
{
    long long v[3];
    if (!r || nm_reply_integers(r, v, 3) != 0)
        return EPROTO;
    b->result = v[0];
    b->fence_or_pttl = v[1];
    b->dead = v[2];
    b->held = r->elements >= 5 ? r->element[3] : NULL;
    b->released = r->elements >= 5 ? r->element[4] : NULL;
    return 0;
}

/* A robust marker as a server reports it: "<token><fence>" (lib.lua,
 * take_marker); the fence is -1 when absent (a marker written by an older
 * release of the library). */
typedef struct marker {
    const char *token;
    long long fence;
} marker_t;

static int read_marker(const redisReply *r, marker_t *m)
{
    char digits[24];
    size_t n;
    char *end;

    if (!r || r->type != REDIS_REPLY_STRING || r->len < NM_TOKEN_LEN)
        return 0;
    m->token = r->str;
    m->fence = -1;
    n = r->len - NM_TOKEN_LEN;
    if (n > 0 && n < sizeof digits) {
        memcpy(digits, r->str + NM_TOKEN_LEN, n);
        digits[n] = '\0';
        m->fence = strtoll(digits, &end, 10);
        if (*end || m->fence < 0)
            m->fence = -1;
    }
    return 1;
}

/* Whether some server saw the holder HELD, or a later one, release the
 * lock. */
static int released_since(const nm_votes_t *v, const redisReply *held)
{
    ballot_t b;
    marker_t dead, rel;
    if (!read_marker(held, &dead))
        return 0;
    for (size_t i = 0; i < v->n; i++) {
        if (read_ballot(v->reply[i], &b) != 0 || !read_marker(b.released, &rel))
            continue;
        if (memcmp(rel.token, dead.token, NM_TOKEN_LEN) == 0)
            return 1;
        if (dead.fence >= 0 && rel.fence > dead.fence)
            return 1;
    }
    return 0;
}

typedef struct tally {
    size_t granted, busy, unrecoverable;
    long long fence_min, fence_max, pttl;
    int dead;
} tally_t;

static void count(const nm_votes_t *v, tally_t *t)
{
    ballot_t b;
    memset(t, 0, sizeof *t);
    t->fence_min = -1;
    for (size_t i = 0; i < v->n; i++) {
        if (v->err[i] || read_ballot(v->reply[i], &b) != 0)
            continue;
        if (b.result == 1) {
            t->granted++;
            t->fence_max = NM_MAX(t->fence_max, b.fence_or_pttl);
            t->fence_min = t->fence_min < 0 ? b.fence_or_pttl : NM_MIN(t->fence_min, b.fence_or_pttl);
            t->dead |= b.dead && !released_since(v, b.held);
        } else if (b.result == -1) {
            t->unrecoverable++;
        } else {
            t->busy++;
            /* Wait for the longest of the leases that stand in the way. */
            t->pttl = NM_MAX(t->pttl, b.fence_or_pttl);
        }
    }
}

int nm_redlock_granted(const nm_config_t *cfg, unsigned int lease_ms, unsigned int splits,
                       const nm_votes_t *v, nm_verdict_t *out)
{
    tally_t t;
    count(v, &t);
    int64_t elapsed = nm_now_ms() - v->sent_at;
    int64_t validity = (int64_t)lease_ms - elapsed - nm_redlock_drift(cfg, lease_ms);

    memset(out, 0, sizeof *out);
    if (t.granted >= cfg->quorum && validity > 0) {
        out->fence = t.fence_max;
        out->owner_died = t.dead;
        out->sent_at = v->sent_at;
        out->raise_to = t.fence_min == t.fence_max ? 0 : t.fence_max;
        return 0;
    }
    if (t.unrecoverable >= cfg->quorum)
        return ENOTRECOVERABLE;
    if (t.granted + t.busy + t.unrecoverable < cfg->quorum)
        return nm_votes_failure(v);
    if (t.granted) {
        unsigned int shift = NM_MIN(splits, 5u);
        out->split = 1;
        out->pttl = 1 + rand() % NM_MIN(SPLIT_BACKOFF_MIN_MS << shift, SPLIT_BACKOFF_MAX_MS);
    } else {
        out->pttl = t.pttl;
    }
    return EBUSY;
}

/* 1 when reply R says "done": the integer 1 or 2, or an array whose first
 * element is 1. */
static int says_done(const redisReply *r)
{
    long long x;
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements >= 1)
        r = r->element[0];
    return r && nm_reply_integer(r, &x) == 0 && (x == 1 || x == 2);
}

int nm_redlock_done(const nm_config_t *cfg, const nm_votes_t *v)
{
    size_t done = 0;
    for (size_t i = 0; i < v->n; i++)
        done += v->err[i] == 0 && says_done(v->reply[i]);
    if (done >= cfg->quorum)
        return 0;
    return nm_votes_answered(v) >= cfg->quorum ? ENOLCK : EIO;
}

int nm_redlock_broken(const nm_config_t *cfg, const nm_votes_t *v)
{
    int held = 0;
    for (size_t i = 0; i < v->n; i++)
        held |= v->err[i] == 0 && says_done(v->reply[i]);
    if (nm_votes_answered(v) < cfg->quorum)
        return EAGAIN;
    return held ? 0 : ENOENT;
}
