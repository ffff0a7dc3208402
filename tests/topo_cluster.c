/* topo_cluster.c -- a 3 + 3 node Redis Cluster for the tests. */
#include "ac_config.h"

#include "topo_cluster.h"

#include <stdlib.h>
#include <string.h>

/* Short, so a killed master is failed over quickly; CLUSTER FAILOVER does
 * not wait for it. */
#define NODE_TIMEOUT_MS 1000u

/* The command line client beside REDIS_SERVER, else on PATH: redis-cli,
 * or Valkey's valkey-cli where no redis-cli is installed. */
static char *redis_cli(void)
{
    static const char *const names[] = { "redis-cli", "valkey-cli" };
    const char *server = g_getenv("REDIS_SERVER");
    char *dir = server && *server ? g_path_get_dirname(server) : NULL;
    char *path = NULL;
    for (gsize i = 0; !path && dir && i < G_N_ELEMENTS(names); i++) {
        path = g_build_filename(dir, names[i], NULL);
        if (!g_file_test(path, G_FILE_TEST_IS_EXECUTABLE))
            g_clear_pointer(&path, g_free);
    }
    g_free(dir);
    for (gsize i = 0; !path && i < G_N_ELEMENTS(names); i++)
        path = g_find_program_in_path(names[i]);
    if (!path)
        g_error("redis-cli not found: it creates the test cluster");
    return path;
}

static void create(NmTopo *t)
{
    GPtrArray *argv = g_ptr_array_new_with_free_func(g_free);
    char *out = NULL, *err = NULL;
    GError *error = NULL;
    int status;

    g_ptr_array_add(argv, redis_cli());
    if (nm_test_tls()) {
        /* The nodes take TLS clients with certificates alone. */
        g_ptr_array_add(argv, g_strdup("--tls"));
        g_ptr_array_add(argv, g_strdup("--cacert"));
        g_ptr_array_add(argv, nm_tls_cert_file("ca.crt"));
        g_ptr_array_add(argv, g_strdup("--cert"));
        g_ptr_array_add(argv, nm_tls_cert_file("client.crt"));
        g_ptr_array_add(argv, g_strdup("--key"));
        g_ptr_array_add(argv, nm_tls_cert_file("client.key"));
    }
    g_ptr_array_add(argv, g_strdup("--cluster"));
    g_ptr_array_add(argv, g_strdup("create"));
    for (int i = 0; i < NM_TOPO_NODES; i++)
        g_ptr_array_add(argv, g_strdup_printf("127.0.0.1:%d", nm_redis_port(t->node[i])));
    g_ptr_array_add(argv, g_strdup("--cluster-replicas"));
    g_ptr_array_add(argv, g_strdup("1"));
    g_ptr_array_add(argv, g_strdup("--cluster-yes"));
    g_ptr_array_add(argv, NULL);
    g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &err,
                 &status, &error);
    g_assert_no_error(error);
    if (!g_spawn_check_wait_status(status, NULL))
        g_error("redis-cli --cluster create failed:\n%s\n%s", out, err);
    g_free(out);
    g_free(err);
    g_ptr_array_free(argv, TRUE);
}

NmTopo *nm_topo_start(void)
{
    NmTopo *t = g_new0(NmTopo, 1);
    NmRedisOpts opts = { .cluster_node_timeout_ms = nm_ms(NODE_TIMEOUT_MS) };

    for (int i = 0; i < NM_TOPO_NODES; i++)
        t->node[i] = nm_redis_start(&opts);
    create(t);
    if (!nm_topo_wait_ok(t, nm_ms(30000)))
        g_error("the test cluster did not settle");
    return t;
}

void nm_topo_free(NmTopo *t)
{
    if (!t)
        return;
    for (int i = 0; i < NM_TOPO_NODES; i++)
        nm_redis_free(t->node[i]);
    g_free(t);
}

char *nm_topo_url(NmTopo *t)
{
    GString *s = g_string_new(nm_test_tls() ? "rediss-cluster://" : "redis-cluster://");
    for (int i = 0; i < NM_TOPO_NODES; i++)
        g_string_append_printf(s, "%s127.0.0.1:%d", i ? "," : "", nm_redis_port(t->node[i]));
    return g_string_free(s, FALSE);
}

char *nm_topo_node_url(NmTopo *t, int i)
{
    return nm_redis_tcp_url(t->node[i], -1);
}

long long nm_topo_keyslot(NmTopo *t, const char *key, size_t len)
{
    redisContext *c = nm_redis_connect(t->node[0], 0);
    redisReply *r = redisCommand(c, "CLUSTER KEYSLOT %b", key, len);
    g_assert_nonnull(r);
    g_assert_cmpint(r->type, ==, REDIS_REPLY_INTEGER);
    long long slot = r->integer;
    freeReplyObject(r);
    redisFree(c);
    return slot;
}

/* By node id, not by port: asked over the fixture's own connection (a
 * unix socket, never TLS), Redis 8 and Valkey 8 report port 0 for nodes
 * that listen on TLS alone, where Redis 7 reported their TLS port.  The
 * id is the third field of a CLUSTER SLOTS node entry since Redis 4. */
char *nm_topo_master_id(NmRedis *r, long long slot)
{
    redisReply *reply = nm_redis_cmd(r, "CLUSTER SLOTS");
    char *id = NULL;
    for (size_t i = 0; reply->type == REDIS_REPLY_ARRAY && i < reply->elements; i++) {
        redisReply *e = reply->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
            e->element[2]->type != REDIS_REPLY_ARRAY || e->element[2]->elements < 3)
            continue;
        if (e->element[0]->integer <= slot && slot <= e->element[1]->integer &&
            e->element[2]->element[2]->type == REDIS_REPLY_STRING) {
            g_free(id);
            id = g_strdup(e->element[2]->element[2]->str);
        }
    }
    freeReplyObject(reply);
    return id;
}

bool nm_topo_is_master_of(NmRedis *asked, long long slot, NmRedis *node)
{
    char *id = nm_topo_master_id(asked, slot), *node_id = nm_topo_node_id(node);
    bool same = id != NULL && strcmp(id, node_id) == 0;
    g_free(id);
    g_free(node_id);
    return same;
}

NmRedis *nm_topo_master_of(NmTopo *t, long long slot)
{
    for (int i = 0; i < NM_TOPO_NODES; i++)
        if (nm_topo_is_master_of(t->node[0], slot, t->node[i]))
            return t->node[i];
    g_error("no master for slot %lld", slot);
    return NULL;
}

NmRedis *nm_topo_other_master(NmTopo *t, NmRedis *from)
{
    for (int i = 0; i < NM_TOPO_NODES; i++)
        if (t->node[i] != from && nm_topo_is_master(t->node[i]))
            return t->node[i];
    g_error("no master other than the one given");
    return NULL;
}

bool nm_topo_is_master(NmRedis *r)
{
    redisReply *reply = nm_redis_cmd(r, "ROLE");
    bool master = reply->type == REDIS_REPLY_ARRAY && reply->elements > 0 &&
                  strcmp(reply->element[0]->str, "master") == 0;
    freeReplyObject(reply);
    return master;
}

static bool state_ok(NmRedis *r)
{
    redisReply *reply = nm_redis_cmd(r, "CLUSTER INFO");
    bool ok = reply->type == REDIS_REPLY_STRING && strstr(reply->str, "cluster_state:ok");
    freeReplyObject(reply);
    return ok;
}

/* A master, or a replica whose link to its master is up (synced). */
static bool in_sync(NmRedis *r)
{
    redisReply *reply = nm_redis_cmd(r, "INFO replication");
    bool ok = reply->type == REDIS_REPLY_STRING &&
              (strstr(reply->str, "role:master") || strstr(reply->str, "master_link_status:up"));
    freeReplyObject(reply);
    return ok;
}

/* Every node ok and in sync, and all name the same master for a few
 * sample slots. */
static bool settled(NmTopo *t)
{
    static const long long samples[] = { 0, 5000, 5461, 10000, 10923, 16383 };
    for (int i = 0; i < NM_TOPO_NODES; i++)
        if (!state_ok(t->node[i]) || !in_sync(t->node[i]))
            return false;
    for (gsize s = 0; s < G_N_ELEMENTS(samples); s++) {
        char *id = nm_topo_master_id(t->node[0], samples[s]);
        bool agree = id != NULL;
        for (int i = 1; agree && i < NM_TOPO_NODES; i++) {
            char *other = nm_topo_master_id(t->node[i], samples[s]);
            agree = other != NULL && strcmp(other, id) == 0;
            g_free(other);
        }
        g_free(id);
        if (!agree)
            return false;
    }
    return true;
}

bool nm_topo_wait_ok(NmTopo *t, unsigned int timeout_ms)
{
    gint64 end = nmt_now_ms() + timeout_ms;
    while (!settled(t)) {
        if (nmt_now_ms() > end)
            return false;
        nmt_sleep_ms(50);
    }
    return true;
}

char *nm_topo_node_id(NmRedis *r)
{
    redisReply *reply = nm_redis_cmd(r, "CLUSTER MYID");
    char *id = g_strdup(reply->str);
    freeReplyObject(reply);
    return id;
}

void nm_topo_finish_migration(NmTopo *t, long long slot, NmRedis *from, NmRedis *to)
{
    char *to_id = nm_topo_node_id(to);
    redisReply *keys = nm_redis_cmd(from, "CLUSTER GETKEYSINSLOT %lld 100", slot);
    g_assert_cmpint(keys->type, ==, REDIS_REPLY_ARRAY);
    for (size_t i = 0; i < keys->elements; i++)
        nm_redis_ok(from, "MIGRATE 127.0.0.1 %d %s 0 5000", nm_redis_port(to),
                    keys->element[i]->str);
    freeReplyObject(keys);
    for (int i = 0; i < NM_TOPO_NODES; i++)
        if (nm_topo_is_master(t->node[i]))
            nm_redis_ok(t->node[i], "CLUSTER SETSLOT %lld NODE %s", slot, to_id);
    g_free(to_id);
}
