/*
 * test_cluster_pubsub.c -- lease caching on a real Redis Cluster
 * (tests/topo_cluster.h): requests to give a cached lease back travel as
 * shard messages (SPUBLISH), and a caching process listens on the master
 * of each cached name's slot (SSUBSCRIBE), whichever master that is.
 *
 * Covered: a caching holder in another process, whose name lives on a
 * master other than the first node of the URL, listens there and nowhere
 * else (PUBSUB SHARDNUMSUB / NUMSUB on every node), and gives the lease up
 * at once when this process locks the name (revocation, not its idle time
 * nor a renewal); no node runs a classic PUBLISH meanwhile (INFO
 * commandstats); the slot of a cached name migrated to another master: the
 * holder's subscription follows it, and revocation still works.
 */
#include "ac_config.h"

#include "fixture.h"
#include "topo_cluster.h"

#include <string.h>

static NmTopo *topo;

/* The holder's lease and idle time are far longer than BOUND_MS: a lock
 * that gets the name within BOUND_MS was handed it by a revocation, not
 * by the idle give-back (10 minutes) nor by the renewal that would see the
 * waiter (a third of the lease, 40 s, at the earliest). */
#define HOLDER_LEASE_MS 120000u
#define BOUND_MS nm_ms(4000)
#define LISTEN_MS nm_ms(5000)
static const char *const holder_env[] = { "NETMUTEX_CACHE_IDLE_MS=600000", NULL };

/* The master serving NAME's slot now. */
static NmRedis *master_of_name(const char *name)
{
    char *key = nm_lock_key(name);
    long long slot = nm_topo_keyslot(topo, key, strlen(key));
    g_free(key);
    return nm_topo_master_of(topo, slot);
}

/* A name whose slot is served by a master that is neither node 0 (the
 * first seed of the URL, which the subscriber used to be tied to) nor
 * AVOID. */
static char *name_away_from(NmRedis *avoid, const char *prefix)
{
    for (int k = 0;; k++) {
        char *suffix = g_strdup_printf("%s-%d", prefix, k);
        char *name = nm_test_name(suffix);
        NmRedis *m = master_of_name(name);
        g_free(suffix);
        if (m != topo->node[0] && m != avoid)
            return name;
        g_free(name);
    }
}

/* PUBSUB SHARDNUMSUB (SHARD) or NUMSUB of CHANNEL on R. */
static long long listeners_on(NmRedis *r, const char *channel, bool shard)
{
    redisReply *rep = nm_redis_cmd(r, shard ? "PUBSUB SHARDNUMSUB %s" : "PUBSUB NUMSUB %s",
                                   channel);
    g_assert_true(rep->type == REDIS_REPLY_ARRAY && rep->elements == 2);
    long long n = rep->element[1]->integer;
    freeReplyObject(rep);
    return n;
}

/* Polls until CHANNEL has one shard subscriber on MASTER; false after
 * LISTEN_MS. */
static bool wait_listening(NmRedis *master, const char *channel)
{
    gint64 end = nmt_now_ms() + LISTEN_MS;
    while (listeners_on(master, channel, true) != 1 && nmt_now_ms() < end)
        nmt_sleep_ms(5);
    return listeners_on(master, channel, true) == 1;
}

/* The holder listens for CHANNEL on MASTER alone, and as a shard channel. */
static void assert_listens_only_on(NmRedis *master, const char *channel)
{
    g_assert_true(wait_listening(master, channel));
    for (int i = 0; i < NM_TOPO_NODES; i++) {
        NmRedis *r = topo->node[i];
        g_assert_cmpint(listeners_on(r, channel, false), ==, 0);
        if (r != master && nm_topo_is_master(r))
            g_assert_cmpint(listeners_on(r, channel, true), ==, 0);
    }
}

/* Calls of COMMAND that R ran since its last CONFIG RESETSTAT, those run
 * by scripts included. */
static unsigned long long calls_of(NmRedis *r, const char *command)
{
    redisReply *rep = nm_redis_cmd(r, "INFO commandstats");
    char *field = g_strdup_printf("cmdstat_%s:calls=", command);
    const char *at = strstr(rep->str, field);
    unsigned long long n = at ? strtoull(at + strlen(field), NULL, 10) : 0;
    g_free(field);
    freeReplyObject(rep);
    return n;
}

static void reset_stats(void)
{
    for (int i = 0; i < NM_TOPO_NODES; i++)
        nm_redis_ok(topo->node[i], "CONFIG RESETSTAT");
}

static void configure_cluster(void)
{
    char *url = nm_topo_url(topo);
    netmutex_config_t cfg = { .url = url };
    nm_assert_rc(netmutex_configure(&cfg), 0);
    g_free(url);
}

/* HOLDER, which holds NAME and listens on MASTER, unlocks it and keeps
 * the lease cached there.  A holder keeps a lease only once it has read
 * its subscription's confirmation, which its background thread may not
 * have done yet when MASTER counts the subscriber (a loaded machine, TLS):
 * it then gives the lease back, and it is locked and unlocked again. */
static void cache_on(NmRemote *holder, NmRedis *master, const char *name)
{
    char *key = nm_lock_key(name);
    gint64 end = nmt_now_ms() + LISTEN_MS;

    nm_assert_rc(nm_remote(holder, 'u'), 0);
    while (nm_redis_pttl(master, key) <= 0 && nmt_now_ms() < end) {
        g_test_message("%s: given back at once, locked and unlocked again", name);
        nm_assert_rc(nm_remote(holder, 'l'), 0);
        nm_assert_rc(nm_remote(holder, 'u'), 0);
    }
    g_assert_cmpint(nm_redis_pttl(master, key), >, 0); /* cached, not given back */
    g_free(key);
}

/* A process that locks NAME and unlocks it again, keeping the lease
 * cached (it listens for requests on MASTER first). */
static NmRemote *start_caching_holder(const char *name, NmRedis *master, const char *channel)
{
    char *url = nm_topo_url(topo);
    NmRemote *holder = nm_remote_start_url(url, holder_env, name, NETMUTEX_NORMAL,
                                           HOLDER_LEASE_MS);
    nm_assert_rc(nm_remote(holder, 'l'), 0);
    assert_listens_only_on(master, channel);
    cache_on(holder, master, name);
    g_free(url);
    return holder;
}

/* This process locks NAME, cached by another: the holder is asked on its
 * shard channel and hands the lock over within BOUND_MS. */
static void assert_revoked(const char *name)
{
    netmutex_t m;
    netmutex_attr_t attr;
    nm_assert_rc(netmutex_attr_init(&attr), 0);
    nm_assert_rc(netmutex_attr_setcache(&attr, 0), 0);
    nm_assert_rc(netmutex_init(&m, name, &attr), 0);
    gint64 start = nmt_now_ms();
    nm_assert_rc(netmutex_lock(&m), 0);
    gint64 took = nmt_now_ms() - start;
    g_test_message("%s: handed over after %" G_GINT64_FORMAT " ms", name, took);
    g_assert_cmpint(took, <, BOUND_MS);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_attr_destroy(&attr), 0);
}

static void check_revocation(const char *name)
{
    NmRedis *master = master_of_name(name);
    char *key = nm_lock_key(name), *channel = g_strconcat(key, ":r", NULL);
    NmRemote *holder = start_caching_holder(name, master, channel);
    assert_revoked(name);
    g_assert_cmpuint(calls_of(master, "spublish"), >, 0);
    /* break asks a holder too, and wakes no one else in a cluster */
    nm_assert_rc(netmutex_break(name), ENOENT);
    nm_remote_stop(holder);
    g_free(channel);
    g_free(key);
}

/* Names on the second and third master: each holder listens on its own
 * name's master, and no message crosses the cluster bus. */
static void test_revoke_on_each_master(void)
{
    char *second = name_away_from(NULL, "second");
    char *third = name_away_from(master_of_name(second), "third");

    configure_cluster();
    reset_stats();
    check_revocation(second);
    check_revocation(third);
    for (int i = 0; i < NM_TOPO_NODES; i++)
        g_assert_cmpuint(calls_of(topo->node[i], "publish"), ==, 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    g_free(second);
    g_free(third);
}

/* The slot of a cached name moves to another master: the old master
 * drops the holder's shard subscription, the holder subscribes again on
 * the new one, where requests are published now, and a lease it caches
 * there is revoked through it. */
static void test_subscription_follows_migration(void)
{
    char *name = name_away_from(NULL, "migrated");
    char *key = nm_lock_key(name), *channel = g_strconcat(key, ":r", NULL);
    long long slot = nm_topo_keyslot(topo, key, strlen(key));
    NmRedis *from = nm_topo_master_of(topo, slot), *to = nm_topo_other_master(topo, from);
    char *from_id = nm_topo_node_id(from), *to_id = nm_topo_node_id(to);

    configure_cluster();
    NmRemote *holder = start_caching_holder(name, from, channel);
    nm_redis_ok(to, "CLUSTER SETSLOT %lld IMPORTING %s", slot, from_id);
    nm_redis_ok(from, "CLUSTER SETSLOT %lld MIGRATING %s", slot, to_id);
    nm_topo_finish_migration(topo, slot, from, to);
    assert_listens_only_on(to, channel);
    /* The lost subscription made the holder give the lease back; cached
     * again, on the new master, it is asked for there. */
    nm_assert_rc(nm_remote(holder, 'l'), 0);
    cache_on(holder, to, name);
    assert_revoked(name);
    nm_remote_stop(holder);
    nm_assert_rc(netmutex_shutdown(), 0);
    g_free(from_id);
    g_free(to_id);
    g_free(channel);
    g_free(key);
    g_free(name);
}

int main(int argc, char **argv)
{
    nm_test_init(&argc, &argv);
    topo = nm_topo_start();

    g_test_add_func("/cluster/pubsub/revoke-on-second-and-third-master",
                    test_revoke_on_each_master);
    g_test_add_func("/cluster/pubsub/subscription-follows-migration",
                    test_subscription_follows_migration);

    int rc = g_test_run();
    nm_topo_free(topo);
    return rc;
}
