/*
 * unit_redlock.c -- counting the votes of quorum mode (src/server/redlock.c,
 * nm_votes_* of src/requests/quorum.c), without a server: the votes are built by
 * hand as quorum.c fills them.  Covered: a grant needs N/2 + 1 servers
 * and a validity left (lease - elapsed - drift); the fence is the highest
 * granted and a disagreement asks for a raise; a split vote backs off a
 * short random while (and says so, for the caller to count), a plain busy
 * one for the longest lease in the way;
 * ENOTRECOVERABLE; which error stands for too few answers; a dead previous
 * holder counts only if no server saw that token, or a later one (by
 * fence), released; malformed answers count as none; release/renew and
 * break counting.
 */
#include "ac_config.h"

#include <errno.h>
#include <glib.h>
#include <string.h>

#include "nm.h"
#include "clock.h"
#include "redlock.h"
#include "unit_replies.h"

typedef struct world {
    nm_config_t cfg;
    unsigned int lease_ms;
    unsigned int splits;     /* split votes in a row before this one */
    nm_votes_t votes;
    nm_verdict_t verdict;    /* what nm_redlock_granted said */
} world_t;

/* N servers, a lease of LEASE_MS, the default drift (0.01, 2 ms); the
 * requests left at SENT_AGO ms ago. */
static void world_init(world_t *w, size_t n, unsigned int lease_ms, int64_t sent_ago)
{
    memset(w, 0, sizeof *w);
    w->cfg.nservers = n;
    w->cfg.quorum = n / 2 + 1;
    w->cfg.drift_factor = 0.01;
    w->cfg.drift_ms = 2;
    w->lease_ms = lease_ms;
    w->votes.n = n;
    w->votes.sent_at = nm_now_ms() - sent_ago;
}

/* Server I answered acquire.lua with {RESULT, FENCE_OR_PTTL, DEAD[, HELD,
 * RELEASED]} (HELD NULL: the short form). */
static void ballot(world_t *w, size_t i, long long result, long long fence_or_pttl,
                   long long dead, const char *held, const char *released)
{
    if (held)
        w->votes.reply[i] = ur_array(5, ur_int(result), ur_int(fence_or_pttl), ur_int(dead),
                                     ur_str(REDIS_REPLY_STRING, held),
                                     ur_str(REDIS_REPLY_STRING, released));
    else
        w->votes.reply[i] = ur_array(3, ur_int(result), ur_int(fence_or_pttl), ur_int(dead));
}

static void grant(world_t *w, size_t i, long long fence)
{
    ballot(w, i, 1, fence, 0, NULL, NULL);
}

static void busy(world_t *w, size_t i, long long pttl)
{
    ballot(w, i, 0, pttl, 0, NULL, NULL);
}

static void failed(world_t *w, size_t i, int err)
{
    w->votes.err[i] = err;
}

/* The verdict starts as garbage: every field is the callee's to set. */
static int granted(world_t *w)
{
    memset(&w->verdict, 0x5a, sizeof w->verdict);
    return nm_redlock_granted(&w->cfg, w->lease_ms, w->splits, &w->votes, &w->verdict);
}

static void test_drift(void)
{
    nm_config_t cfg = { .drift_factor = 0.01, .drift_ms = 2 };
    g_assert_cmpint(nm_redlock_drift(&cfg, 1000), ==, 12);
    g_assert_cmpint(nm_redlock_drift(&cfg, 30000), ==, 302);
    g_assert_cmpint(nm_redlock_drift(&cfg, 10), ==, 2);
    cfg.drift_factor = 0.25;
    cfg.drift_ms = 60000;
    g_assert_cmpint(nm_redlock_drift(&cfg, NETMUTEX_LEASE_MAX_MS), ==,
                    NETMUTEX_LEASE_MAX_MS / 4 + 60000);
}

/* All grant with one fence: no raise needed. */
static void test_granted_unanimous(void)
{
    world_t w;
    world_init(&w, 3, 30000, 0);
    for (size_t i = 0; i < 3; i++)
        grant(&w, i, 100);
    g_assert_cmpint(granted(&w), ==, 0);
    g_assert_cmpint(w.verdict.fence, ==, 100);
    g_assert_cmpint(w.verdict.raise_to, ==, 0);
    g_assert_cmpint(w.verdict.owner_died, ==, 0);
    g_assert_cmpint(w.verdict.sent_at, ==, w.votes.sent_at);
    g_assert_cmpint(w.verdict.pttl, ==, 0);
    g_assert_cmpint(w.verdict.split, ==, 0);
    g_assert_cmpuint(nm_votes_answered(&w.votes), ==, 3);
    nm_votes_clear(&w.votes);
    g_assert_cmpuint(w.votes.n, ==, 0);
}

/* 3 of 5, two unreachable; the fences differ: the highest, raised to. */
static void test_granted_majority_fences(void)
{
    world_t w;
    world_init(&w, 5, 30000, 0);
    failed(&w, 0, NM_ECONN);
    grant(&w, 1, 180);
    grant(&w, 2, 250);
    failed(&w, 3, NM_ECONN);
    grant(&w, 4, 100);
    g_assert_cmpuint(nm_votes_answered(&w.votes), ==, 3);
    g_assert_cmpint(granted(&w), ==, 0);
    g_assert_cmpint(w.verdict.fence, ==, 250);
    g_assert_cmpint(w.verdict.raise_to, ==, 250);
    nm_votes_clear(&w.votes);
}

/* A grant whose validity ran out (lease - elapsed - drift <= 0) is no
 * grant: lease 1000 ms, drift 12 ms, 988 ms since the requests left. */
static void test_granted_validity(void)
{
    world_t w;
    world_init(&w, 3, 1000, 988);
    for (size_t i = 0; i < 3; i++)
        grant(&w, i, 5);
    g_assert_cmpint(granted(&w), ==, EBUSY);
    g_assert_cmpint(w.verdict.fence, ==, 0);
    g_assert_cmpint(w.verdict.pttl, >=, 1);
    nm_votes_clear(&w.votes);

    /* Half the lease gone: still valid (the margin is generous). */
    world_init(&w, 3, 1000, 500);
    for (size_t i = 0; i < 3; i++)
        grant(&w, i, 5);
    g_assert_cmpint(granted(&w), ==, 0);
    nm_votes_clear(&w.votes);
}

/* A split vote backs off a random 1..8 ms, the bound doubling with every
 * split in a row up to 256 ms; the verdict says it was a split, for the
 * caller (lease.c) to count. */
static void test_split_backoff(void)
{
    static const long long bound[] = { 8, 16, 32, 64, 128, 256, 256, 256 };
    world_t w;
    world_init(&w, 5, 30000, 0);
    grant(&w, 0, 1);
    grant(&w, 1, 1);
    busy(&w, 2, 50);
    busy(&w, 3, 900);
    busy(&w, 4, 10);
    for (unsigned int k = 0; k < G_N_ELEMENTS(bound); k++) {
        for (int draw = 0; draw < 50; draw++) {
            w.splits = k;
            g_assert_cmpint(granted(&w), ==, EBUSY);
            g_assert_cmpint(w.verdict.pttl, >=, 1);
            g_assert_cmpint(w.verdict.pttl, <=, bound[k]);
            g_assert_cmpint(w.verdict.split, ==, 1);
        }
    }
    nm_votes_clear(&w.votes);
}

/* Nobody granted: wait for the longest lease that stands in the way. */
static void test_busy_longest(void)
{
    world_t w;
    world_init(&w, 3, 30000, 0);
    busy(&w, 0, 50);
    busy(&w, 1, 900);
    busy(&w, 2, 10);
    g_assert_cmpint(granted(&w), ==, EBUSY);
    g_assert_cmpint(w.verdict.pttl, ==, 900);
    g_assert_cmpint(w.verdict.split, ==, 0);
    nm_votes_clear(&w.votes);
}

static void test_unrecoverable(void)
{
    world_t w;
    world_init(&w, 3, 30000, 0);
    ballot(&w, 0, -1, 0, 0, NULL, NULL);
    ballot(&w, 1, -1, 0, 0, NULL, NULL);
    grant(&w, 2, 9);
    g_assert_cmpint(granted(&w), ==, ENOTRECOVERABLE);
    nm_votes_clear(&w.votes);

    /* One unrecoverable server of three is a minority: busy. */
    world_init(&w, 3, 30000, 0);
    ballot(&w, 0, -1, 0, 0, NULL, NULL);
    busy(&w, 1, 70);
    busy(&w, 2, 20);
    g_assert_cmpint(granted(&w), ==, EBUSY);
    g_assert_cmpint(w.verdict.pttl, ==, 70);
    nm_votes_clear(&w.votes);
}

/* Fewer than a quorum answered: which error says so. */
static void test_too_few(void)
{
    static const struct {
        int errs[3];
        int want;
    } cases[] = {
        { { NM_ECONN, NM_ECONN, 0 }, NM_ECONN },
        { { EPROTO, NM_ECONN, 0 }, EPROTO },
        { { EACCES, EPROTO, 0 }, EACCES },
        { { EPROTO, EACCES, 0 }, EACCES },
        { { NM_ECONN, EINVAL, 0 }, EINVAL }, /* a cluster node in the list */
        { { EACCES, EINVAL, 0 }, EINVAL },
    };
    for (size_t c = 0; c < G_N_ELEMENTS(cases); c++) {
        world_t w;
        world_init(&w, 3, 30000, 0);
        failed(&w, 0, cases[c].errs[0]);
        failed(&w, 1, cases[c].errs[1]);
        grant(&w, 2, 3);
        g_test_message("case %zu", c);
        g_assert_cmpint(nm_votes_failure(&w.votes), ==, cases[c].want);
        g_assert_cmpint(granted(&w), ==, cases[c].want);
        nm_votes_clear(&w.votes);
    }
}

/* Robust markers as acquire.lua reports them: a token, then its fence. */
#define TOK_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define TOK_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

/* Whether the verdict on three servers' ballots, server 0 telling of the
 * death HELD and server 1 of the release RELEASED (both granted), is that
 * the previous holder died. */
static long long died_with(const char *held, const char *released)
{
    world_t w;
    world_init(&w, 3, 30000, 0);
    ballot(&w, 0, 1, 7, 1, held, "");
    ballot(&w, 1, 1, 7, 0, "", released);
    grant(&w, 2, 7);
    g_assert_cmpint(granted(&w), ==, 0);
    nm_votes_clear(&w.votes);
    return w.verdict.owner_died;
}

/* The previous holder died only if no server saw it, or a later holder,
 * release the lock. */
static void test_owner_died(void)
{
    world_t w;
    world_init(&w, 3, 30000, 0);
    ballot(&w, 0, 1, 7, 1, TOK_A "100", "");
    ballot(&w, 1, 1, 7, 0, "", "");
    ballot(&w, 2, 1, 7, 0, "", "");
    g_assert_cmpint(granted(&w), ==, 0);
    g_assert_cmpint(w.verdict.owner_died, ==, 1);
    nm_votes_clear(&w.votes);

    /* Server 2, busy even, saw A released: the release missed server 0. */
    world_init(&w, 3, 30000, 0);
    ballot(&w, 0, 1, 7, 1, TOK_A "100", "");
    ballot(&w, 1, 1, 7, 0, "", "");
    ballot(&w, 2, 0, 40, 0, TOK_B "200", TOK_A "100");
    g_assert_cmpint(granted(&w), ==, 0);
    g_assert_cmpint(w.verdict.owner_died, ==, 0);
    nm_votes_clear(&w.votes);

    /* A later holder's release (the repair of that death, which missed
     * server 0) dismisses it; an earlier one's does not. */
    g_assert_cmpint(died_with(TOK_A "100", TOK_B "200"), ==, 0);
    g_assert_cmpint(died_with(TOK_A "200", TOK_B "100"), ==, 1);
    /* The same token's release counts, whatever its fence. */
    g_assert_cmpint(died_with(TOK_A "200", TOK_A "100"), ==, 0);
    /* Without fences (an older library's markers) only the token counts. */
    g_assert_cmpint(died_with(TOK_A, TOK_B "200"), ==, 1);
    g_assert_cmpint(died_with(TOK_A "100", TOK_B), ==, 1);
    g_assert_cmpint(died_with(TOK_A, TOK_A), ==, 0);
    /* Empty, short or malformed markers prove nothing. */
    g_assert_cmpint(died_with(TOK_A "100", ""), ==, 1);
    g_assert_cmpint(died_with(TOK_A "100", "bbbb200"), ==, 1);
    g_assert_cmpint(died_with(TOK_A "100", TOK_B "2x0"), ==, 1);
    g_assert_cmpint(died_with(TOK_A "1x0", TOK_B "200"), ==, 1);
    g_assert_cmpint(died_with("", TOK_B "200"), ==, 1);

    /* A dead holder on a server that did not grant does not count. */
    world_init(&w, 3, 30000, 0);
    ballot(&w, 0, 0, 40, 1, TOK_A "100", "");
    grant(&w, 1, 7);
    grant(&w, 2, 7);
    g_assert_cmpint(granted(&w), ==, 0);
    g_assert_cmpint(w.verdict.owner_died, ==, 0);
    nm_votes_clear(&w.votes);
}

/* Answers of the wrong shape count as no answer. */
static void test_malformed(void)
{
    world_t w;
    world_init(&w, 3, 30000, 0);
    grant(&w, 0, 4);
    grant(&w, 1, 4);
    w.votes.reply[2] = ur_str(REDIS_REPLY_STRING, "1");
    g_assert_cmpint(granted(&w), ==, 0);
    nm_votes_clear(&w.votes);

    world_init(&w, 3, 30000, 0);
    grant(&w, 0, 4);
    w.votes.reply[1] = ur_array(2, ur_int(1), ur_int(4)); /* too short */
    w.votes.reply[2] = ur_array(3, ur_int(1), ur_str(REDIS_REPLY_STRING, "4"), ur_int(0));
    int err = granted(&w);
    g_assert_true(err != 0 && err != EBUSY && err != ENOTRECOVERABLE);
    g_assert_cmpint(w.verdict.fence, ==, 0);
    nm_votes_clear(&w.votes);
}

/* release.lua / renew.lua / fence.lua: 1, 2 or {1, ...} is done. */
static void test_done(void)
{
    world_t w;
    world_init(&w, 5, 30000, 0);
    w.votes.reply[0] = ur_int(1);
    w.votes.reply[1] = ur_int(2);
    w.votes.reply[2] = ur_array(2, ur_int(1), ur_int(99));
    w.votes.reply[3] = ur_int(0);
    w.votes.reply[4] = ur_array(1, ur_int(0));
    g_assert_cmpint(nm_redlock_done(&w.cfg, &w.votes), ==, 0);
    nm_votes_clear(&w.votes);

    /* Everyone answered, too few did it. */
    world_init(&w, 5, 30000, 0);
    w.votes.reply[0] = ur_int(1);
    w.votes.reply[1] = ur_int(2);
    w.votes.reply[2] = ur_int(0);
    w.votes.reply[3] = ur_int(3);
    w.votes.reply[4] = ur_str(REDIS_REPLY_STRING, "1");
    g_assert_cmpint(nm_redlock_done(&w.cfg, &w.votes), ==, ENOLCK);
    nm_votes_clear(&w.votes);

    /* An empty array is not done either. */
    world_init(&w, 3, 30000, 0);
    w.votes.reply[0] = ur_int(1);
    w.votes.reply[1] = ur_array(0);
    w.votes.reply[2] = ur_int(0);
    g_assert_cmpint(nm_redlock_done(&w.cfg, &w.votes), ==, ENOLCK);
    nm_votes_clear(&w.votes);

    /* Two did it, but only two answered: not known. */
    world_init(&w, 5, 30000, 0);
    w.votes.reply[0] = ur_int(1);
    w.votes.reply[1] = ur_int(1);
    for (size_t i = 2; i < 5; i++)
        failed(&w, i, NM_ECONN);
    g_assert_cmpint(nm_redlock_done(&w.cfg, &w.votes), ==, EIO);
    nm_votes_clear(&w.votes);
}

/* break.lua: 1 where it was held. */
static void test_broken(void)
{
    world_t w;
    world_init(&w, 3, 30000, 0);
    w.votes.reply[0] = ur_int(0);
    w.votes.reply[1] = ur_int(1);
    failed(&w, 2, NM_ECONN);
    g_assert_cmpint(nm_redlock_broken(&w.cfg, &w.votes), ==, 0);
    nm_votes_clear(&w.votes);

    world_init(&w, 3, 30000, 0);
    w.votes.reply[0] = ur_int(0);
    w.votes.reply[1] = ur_int(0);
    w.votes.reply[2] = ur_int(0);
    g_assert_cmpint(nm_redlock_broken(&w.cfg, &w.votes), ==, ENOENT);
    nm_votes_clear(&w.votes);

    /* Held where it was reached, but a quorum was not reached. */
    world_init(&w, 3, 30000, 0);
    w.votes.reply[0] = ur_int(1);
    failed(&w, 1, NM_ECONN);
    failed(&w, 2, EACCES);
    g_assert_cmpint(nm_redlock_broken(&w.cfg, &w.votes), ==, EAGAIN);
    nm_votes_clear(&w.votes);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/unit/redlock/drift", test_drift);
    g_test_add_func("/unit/redlock/granted/unanimous", test_granted_unanimous);
    g_test_add_func("/unit/redlock/granted/majority-fences", test_granted_majority_fences);
    g_test_add_func("/unit/redlock/granted/validity", test_granted_validity);
    g_test_add_func("/unit/redlock/granted/owner-died", test_owner_died);
    g_test_add_func("/unit/redlock/granted/malformed", test_malformed);
    g_test_add_func("/unit/redlock/busy/split-backoff", test_split_backoff);
    g_test_add_func("/unit/redlock/busy/longest", test_busy_longest);
    g_test_add_func("/unit/redlock/unrecoverable", test_unrecoverable);
    g_test_add_func("/unit/redlock/too-few", test_too_few);
    g_test_add_func("/unit/redlock/done", test_done);
    g_test_add_func("/unit/redlock/broken", test_broken);
    return g_test_run();
}
