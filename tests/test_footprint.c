/*
 * test_footprint.c -- what a name leaves on the server: nothing once it is
 * released, whatever happened to it on the way (waiters queued, a grant
 * handed over, a waiter that gave up, a robust holder's marker), and at
 * most a robust marker after a holder died, which the next robust holder
 * consumes (EOWNERDEAD).  Fences still grow across owners with nothing
 * kept per name between them: the fence floors are per hash slot.
 */
#include "ac_config.h"

#include "fixture.h"

#include <string.h>

static NmRedis *redis;

/* Short, so that what outlives a hold goes soon; long enough that its
 * renewal (every third of it) survives a busy machine: a 300 ms lease was
 * lost there, its holder's unlock then ENOLCK. */
#define LEASE_MS nm_ms(2000)

/* The keys that match PATTERN, by SCAN. */
static guint keys_matching(const char *pattern)
{
    long long cursor = 0;
    guint n = 0;

    do {
        redisReply *r = nm_redis_cmd(redis, "SCAN %lld MATCH %s COUNT 1000", cursor, pattern);
        g_assert_cmpint(r->type, ==, REDIS_REPLY_ARRAY);
        cursor = g_ascii_strtoll(r->element[0]->str, NULL, 10);
        n += (guint)r->element[1]->elements;
        freeReplyObject(r);
    } while (cursor != 0);
    return n;
}

/* The keys of NAME (its lock key and those with a suffix). */
static guint keys_of(const char *name)
{
    char *pattern = nm_key_of("netmutex:", name, "*");
    guint n = keys_matching(pattern);
    g_free(pattern);
    return n;
}

/* Polls until NAME has no key left; false after TIMEOUT_MS. */
static bool wait_no_keys(const char *name, unsigned int timeout_ms)
{
    gint64 end = nmt_now_ms() + timeout_ms;
    while (keys_of(name) != 0 && nmt_now_ms() < end)
        nmt_sleep_ms(20);
    return keys_of(name) == 0;
}

static void init_attr(netmutex_t *m, const char *name, int robust)
{
    netmutex_attr_t attr;
    nm_assert_rc(netmutex_attr_init(&attr), 0);
    nm_assert_rc(netmutex_attr_setlease(&attr, LEASE_MS), 0);
    nm_assert_rc(netmutex_attr_setrobust(&attr, robust ? NETMUTEX_ROBUST : NETMUTEX_STALLED), 0);
    nm_assert_rc(netmutex_init(m, name, &attr), 0);
    nm_assert_rc(netmutex_attr_destroy(&attr), 0);
}

/* Many names locked once and released: no key of theirs right after.
 * What the server holds then is the fence floors of their hash slots
 * (src/lua/lib.lua): one small key per slot used, never one per name, at
 * most 16384 however many names come and go. */
static void test_released_names_leave_nothing(void)
{
    guint before = keys_matching("*");
    char *prefix = nm_test_name("n");
    for (int i = 0; i < 200; i++) {
        char *name = g_strdup_printf("%s%d", prefix, i);
        netmutex_t m;
        init_attr(&m, name, i % 2);
        nm_assert_rc(netmutex_lock(&m), 0);
        nm_assert_rc(netmutex_unlock(&m), 0);
        nm_assert_rc(netmutex_destroy(&m), 0);
        g_assert_cmpuint(keys_of(name), ==, 0);
        g_free(name);
    }
    g_free(prefix);
    guint floors = keys_matching("netmutex:{*}fence");
    g_test_message("keys before %u, after %u, of which fence floors %u", before,
                   keys_matching("*"), floors);
    g_assert_cmpuint(keys_matching("*"), <=, before + floors); /* nothing else */
    g_assert_cmpuint(floors, >, 0);
    g_assert_cmpuint(floors, <=, 200); /* at most one per name's slot */
}

/* A contended name: waiters queued (one gives up at its deadline), the
 * lock handed over from the queue.  Once all is released, the queue, the
 * grant lists and everything else are gone within two leases. */
static void test_contended_name_leaves_nothing(void)
{
    char *name = nm_test_name("m");
    netmutex_t m;
    NmRemote *a = nm_remote_start(redis, name, NETMUTEX_NORMAL, LEASE_MS);
    NmRemote *b = nm_remote_start(redis, name, NETMUTEX_NORMAL, LEASE_MS);
    struct timespec deadline;

    init_attr(&m, name, 0);
    nm_assert_rc(nm_remote(a, 'l'), 0);
    nm_remote_send(b, 'l');
    g_assert_true(nm_wait_queue_len(redis, name, 1, nm_ms(10000)));
    nm_deadline(&deadline, CLOCK_REALTIME, nm_ms(200));
    nm_assert_rc(netmutex_timedlock(&m, &deadline), ETIMEDOUT); /* gave up */
    nm_assert_rc(nm_remote(a, 'u'), 0);                          /* to b */
    nm_assert_rc(nm_remote_result(b), 0);
    nm_assert_rc(nm_remote(b, 'u'), 0);
    g_assert_true(wait_no_keys(name, 2 * LEASE_MS + nm_ms(2000)));
    nm_remote_stop(a);
    nm_remote_stop(b);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

/* A robust holder killed holding: its marker is all that stays (that is
 * how the next holder learns of the death); the next robust holder gets
 * EOWNERDEAD, and once it releases, nothing is left. */
static void test_dead_holder_marker_consumed(void)
{
    char *name = nm_test_name("m");
    netmutex_t m;
    NmRemote *doomed = nm_remote_start(redis, name, NETMUTEX_NORMAL | NM_REMOTE_ROBUST, LEASE_MS);
    char *key = nm_lock_key(name);

    init_attr(&m, name, 1);
    nm_assert_rc(nm_remote(doomed, 'l'), 0);
    nm_remote_kill(doomed);
    gint64 end = nmt_now_ms() + LEASE_MS + nm_ms(5000);
    while (nm_redis_pttl(redis, key) != -2 && nmt_now_ms() < end)
        nmt_sleep_ms(10);
    g_assert_cmpint(nm_redis_pttl(redis, key), ==, -2);
    g_assert_cmpuint(keys_of(name), ==, 1); /* the marker */
    nm_assert_rc(netmutex_lock(&m), EOWNERDEAD);
    nm_assert_rc(netmutex_consistent(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    g_assert_cmpuint(keys_of(name), ==, 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(key);
    g_free(name);
}

/* Fences grow from owner to owner with nothing kept between them, also
 * when a holder's lease ran out instead of being released. */
static void test_fences_grow_without_state(void)
{
    char *name = nm_test_name("m");
    netmutex_t m;
    uint64_t last = 0, fence = 0;
    NmRemote *doomed;

    init_attr(&m, name, 0);
    for (int i = 0; i < 20; i++) {
        nm_assert_rc(netmutex_lock(&m), 0);
        nm_assert_rc(netmutex_fence(&m, &fence), 0);
        g_assert_cmpuint(fence, >, last);
        last = fence;
        nm_assert_rc(netmutex_unlock(&m), 0);
        g_assert_cmpuint(keys_of(name), ==, 0);
    }
    doomed = nm_remote_start(redis, name, NETMUTEX_NORMAL, LEASE_MS);
    nm_assert_rc(nm_remote(doomed, 'l'), 0);
    nm_remote_kill(doomed);
    nm_assert_rc(netmutex_lock(&m), 0); /* after the lease ran out */
    nm_assert_rc(netmutex_fence(&m, &fence), 0);
    g_assert_cmpuint(fence, >, last);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

int main(int argc, char **argv)
{
    nm_test_init(&argc, &argv);
    nm_test_cache_off();
    redis = nm_redis_start(NULL);
    nm_configure(redis);

    g_test_add_func("/footprint/released/nothing-left", test_released_names_leave_nothing);
    g_test_add_func("/footprint/contended/nothing-left-after-two-leases",
                    test_contended_name_leaves_nothing);
    g_test_add_func("/footprint/dead-holder/marker-consumed", test_dead_holder_marker_consumed);
    g_test_add_func("/footprint/fences/grow-without-state", test_fences_grow_without_state);

    int rc = nm_test_finish(g_test_run());
    nm_redis_free(redis);
    return rc;
}
