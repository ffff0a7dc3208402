/* topo_sentinel.c -- see topo_sentinel.h. */
#include "ac_config.h"

#include "topo_sentinel.h"

#include <stdlib.h>
#include <string.h>

/* Bound for the set-up to settle and for a failover: generous, never a
 * speed claim. */
#define SETTLE_MS nm_ms(60000)

/* The value of FIELD in a flat [field, value, ...] array (SENTINEL master),
 * or NULL. */
static const char *field_of(redisReply *r, const char *field)
{
    for (size_t i = 0; r && r->type == REDIS_REPLY_ARRAY && i + 1 < r->elements; i += 2)
        if (r->element[i]->type == REDIS_REPLY_STRING && !strcmp(r->element[i]->str, field))
            return r->element[i + 1]->str;
    return NULL;
}

/* The port sentinel S names for the master, 0 if it names none. */
static int named_port(NmRedis *s)
{
    redisReply *r = nm_redis_cmd(s, "SENTINEL get-master-addr-by-name %s", NM_TOPO_MASTER_NAME);
    int port = r->type == REDIS_REPLY_ARRAY && r->elements == 2 ? atoi(r->element[1]->str) : 0;
    freeReplyObject(r);
    return port;
}

/* Whether sentinel S names PORT and sees REPLICAS replicas and the other
 * sentinels. */
static bool agrees(NmRedis *s, int port, int replicas)
{
    redisReply *r = nm_redis_cmd(s, "SENTINEL master %s", NM_TOPO_MASTER_NAME);
    const char *flags = field_of(r, "flags"), *slaves = field_of(r, "num-slaves");
    const char *others = field_of(r, "num-other-sentinels");
    bool ok = flags && !strcmp(flags, "master") && slaves && atoi(slaves) == replicas && others &&
              atoi(others) == NM_TOPO_SENTINELS - 1;
    freeReplyObject(r);
    return ok && named_port(s) == port;
}

static bool synced(NmRedis *master, int replicas);
static void wait_synced_with(NmRedis *master, int replicas);

static void wait_agreement(NmTopo *t, int port)
{
    gint64 deadline = nmt_now_ms() + SETTLE_MS;
    for (int i = 0; i < NM_TOPO_SENTINELS; i++)
        while (!agrees(t->sentinel[i], port, t->nnodes - 1)) {
            if (nmt_now_ms() > deadline)
                g_error("sentinel %d does not agree on the master at port %d", i, port);
            nmt_sleep_ms(50);
        }
}

/* The set-ups started and not yet freed.  Held here so that a child the
 * test forks, which exits with the parent's set-up still allocated, sees it
 * as reachable in its leak check rather than lost. */
static GSList *live;

NmTopo *nm_topo_start(int replicas)
{
    NmTopo *t = g_new0(NmTopo, 1);
    live = g_slist_prepend(live, t);
    /* A replica that needs a full resync after a failover (it was ahead
     * of the one promoted) gets it at once, not after Redis' default 5 s
     * wait for more replicas to share the transfer. */
    const char *master_args[] = { "--repl-diskless-sync-delay", "0", NULL };
    NmRedisOpts master = { .tcp = true, .extra_args = master_args };
    g_assert_true(replicas >= 1 && replicas < NM_TOPO_NODES_MAX);
    t->node[0] = nm_redis_start(&master);

    char *port = g_strdup_printf("%d", nm_redis_port(t->node[0]));
    const char *replica_args[] = { "--replicaof", "127.0.0.1", port,
                                   "--repl-diskless-sync-delay", "0", NULL };
    NmRedisOpts replica = { .tcp = true, .extra_args = replica_args };
    for (t->nnodes = 1; t->nnodes <= replicas; t->nnodes++)
        t->node[t->nnodes] = nm_redis_start(&replica);
    /* The replicas online first: a sentinel learns of them from the
     * master's INFO, which it asks for when it connects and then only
     * every 10 s, so one that came up later would cost up to that. */
    wait_synced_with(t->node[0], replicas);

    /* Fast detection: a node silent for 1 s is down, a failover that
     * stalls is retried after 3 s. */
    char *conf = g_strdup_printf("sentinel monitor %s 127.0.0.1 %s 2\n"
                                 "sentinel down-after-milliseconds %s %u\n"
                                 "sentinel failover-timeout %s %u\n",
                                 NM_TOPO_MASTER_NAME, port, NM_TOPO_MASTER_NAME, nm_ms(1000),
                                 NM_TOPO_MASTER_NAME, nm_ms(3000));
    NmRedisOpts sentinel = { .tcp = true, .sentinel_conf = conf };
    for (int i = 0; i < NM_TOPO_SENTINELS; i++)
        t->sentinel[i] = nm_redis_start(&sentinel);
    wait_agreement(t, nm_redis_port(t->node[0]));
    nm_topo_wait_synced(t);
    g_free(conf);
    g_free(port);
    return t;
}

void nm_topo_free(NmTopo *t)
{
    for (int i = 0; i < NM_TOPO_SENTINELS; i++)
        nm_redis_free(t->sentinel[i]);
    for (int i = 0; i < t->nnodes; i++)
        nm_redis_free(t->node[i]);
    live = g_slist_remove(live, t);
    g_free(t);
}

char *nm_topo_url(NmTopo *t)
{
    GString *url = g_string_new(nm_test_tls() ? "rediss-sentinel://" : "redis-sentinel://");
    for (int i = 0; i < NM_TOPO_SENTINELS; i++)
        g_string_append_printf(url, "%s127.0.0.1:%d", i ? "," : "",
                               nm_redis_port(t->sentinel[i]));
    g_string_append(url, "#" NM_TOPO_MASTER_NAME);
    return g_string_free(url, FALSE);
}

NmRedis *nm_topo_master(NmTopo *t)
{
    int port = named_port(t->sentinel[0]);
    for (int i = 0; i < t->nnodes; i++)
        if (nm_redis_port(t->node[i]) == port)
            return t->node[i];
    g_error("sentinel 0 names no node of the set-up as the master");
}

NmRedis *nm_topo_replica(NmTopo *t)
{
    NmRedis *master = nm_topo_master(t);
    return t->node[0] == master ? t->node[1] : t->node[0];
}

/* A number after FIELD in INFO text, -1 if absent. */
static long long info_number(const char *info, const char *field)
{
    const char *p = strstr(info, field);
    return p ? strtoll(p + strlen(field), NULL, 10) : -1;
}

/* Whether the master's REPLICAS replicas are online and at its offset. */
static bool synced(NmRedis *master, int replicas)
{
    redisReply *r = nm_redis_cmd(master, "INFO replication");
    g_assert_cmpint(r->type, ==, REDIS_REPLY_STRING);
    long long offset = info_number(r->str, "master_repl_offset:");
    bool ok = true;
    for (int i = 0; i < replicas && ok; i++) {
        char name[16];
        g_snprintf(name, sizeof name, "slave%d:", i);
        const char *slave = strstr(r->str, name);
        const char *end = slave ? strchr(slave, '\n') : NULL;
        const char *online = slave ? strstr(slave, "state=online") : NULL;
        ok = slave && online && (!end || online < end) &&
             info_number(slave, ",offset=") == offset;
    }
    freeReplyObject(r);
    return ok;
}

static void wait_synced_with(NmRedis *master, int replicas)
{
    gint64 deadline = nmt_now_ms() + SETTLE_MS;
    while (!synced(master, replicas)) {
        if (nmt_now_ms() > deadline)
            g_error("the replica did not catch up with the master in time");
        nmt_sleep_ms(20);
    }
}

void nm_topo_wait_synced(NmTopo *t)
{
    wait_synced_with(nm_topo_master(t), t->nnodes - 1);
}

/* Whether NODE's ROLE is master. */
static bool is_master(NmRedis *node)
{
    redisReply *r = nm_redis_cmd(node, "ROLE");
    bool ok = r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
              !strcmp(r->element[0]->str, "master");
    freeReplyObject(r);
    return ok;
}

int nm_topo_named_port(NmTopo *t, int i)
{
    return named_port(t->sentinel[i]);
}

NmRedis *nm_topo_failover_start(NmTopo *t)
{
    NmRedis *old = nm_topo_master(t);
    gint64 deadline = nmt_now_ms() + SETTLE_MS;
    /* A sentinel refuses while it thinks the replica unfit (it may not
     * have refreshed its view yet): ask again. */
    for (;;) {
        redisReply *r = nm_redis_cmd(t->sentinel[0], "SENTINEL FAILOVER %s",
                                     NM_TOPO_MASTER_NAME);
        bool ok = r->type == REDIS_REPLY_STATUS;
        freeReplyObject(r);
        if (ok)
            return old;
        if (nmt_now_ms() > deadline)
            g_error("SENTINEL FAILOVER refused until the bound");
        nmt_sleep_ms(100);
    }
}

/* Whether NODE's ROLE is master, false if it does not answer: the
 * sentinels close every client's connection of a node they promote. */
static bool is_master_now(NmRedis *node)
{
    redisContext *c = nm_redis_connect(node, 0);
    redisReply *r = c ? redisCommand(c, "ROLE") : NULL;
    bool ok = r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
              r->element[0]->type == REDIS_REPLY_STRING && !strcmp(r->element[0]->str, "master");
    if (r)
        freeReplyObject(r);
    if (c)
        redisFree(c);
    return ok;
}

NmRedis *nm_topo_promoted(NmTopo *t, NmRedis *old)
{
    gint64 deadline = nmt_now_ms() + SETTLE_MS;
    for (;;) {
        for (int i = 0; i < t->nnodes; i++)
            if (t->node[i] != old && is_master_now(t->node[i]))
                return t->node[i];
        if (nmt_now_ms() > deadline)
            g_error("no replica was promoted in time");
        nmt_sleep_ms(5);
    }
}

NmRedis *nm_topo_failover_wait(NmTopo *t, NmRedis *old)
{
    NmRedis *next = NULL;
    gint64 deadline = nmt_now_ms() + SETTLE_MS;
    while (!next || !is_master(next)) {
        if (nmt_now_ms() > deadline)
            g_error("the failover did not complete in time");
        nmt_sleep_ms(20);
        next = nm_topo_master(t) != old ? nm_topo_master(t) : NULL;
    }
    for (int i = 1; i < NM_TOPO_SENTINELS; i++)
        while (named_port(t->sentinel[i]) != nm_redis_port(next)) {
            if (nmt_now_ms() > deadline)
                g_error("sentinel %d did not learn of the failover in time", i);
            nmt_sleep_ms(20);
        }
    return next;
}

NmRedis *nm_topo_failover(NmTopo *t)
{
    return nm_topo_failover_wait(t, nm_topo_failover_start(t));
}
