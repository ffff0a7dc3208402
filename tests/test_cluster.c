/*
 * test_cluster.c -- netmutex on a real Redis Cluster (tests/topo_cluster.h:
 * 3 masters, 3 replicas, shared by every case).
 *
 * Covered: CRC16 and the hash tag rule against known values and against
 * CLUSTER KEYSLOT; every key of a name in one slot, braces in the name
 * included; the redis-cluster:// form and a plain redis:// URL that turns
 * out to reach a node; the hand-off to a queued waiter (its BLPOP on the
 * node of the slot); status and break; quorum mode with a node refused;
 * many names spread over all masters with exact cross-process counters and
 * per-name increasing fences; a manual failover while processes lock; a
 * slot migrated while a lock is held (ASK, then MOVED); a condition on
 * another node than its mutex, a thread cancelled while it waits on one,
 * and its slot migrated while processes wait on it and signal it; a read-write lock whose keys share one slot, its
 * grants pushed and its holds renewed on the node; a semaphore the same.
 */
#include "ac_config.h"

#include "fixture.h"
#include "keytag.h"
#include "slot.h"
#include "topo_cluster.h"

#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static NmTopo *topo;
static char *cli_tool; /* NETMUTEX_CLI, read before nm_test_init clears it */

#define PROMPT_MS nm_ms(30000)

static void configure_url(const char *url, unsigned int lease_ms)
{
    netmutex_config_t cfg = { .url = url, .lease_ms = lease_ms };
    nm_assert_rc(netmutex_configure(&cfg), 0);
}

static void configure_cluster(unsigned int lease_ms)
{
    char *url = nm_topo_url(topo);
    configure_url(url, lease_ms);
    g_free(url);
}

/* The slot of NAME's lock key, by the server. */
static long long slot_of_name(const char *name)
{
    char *key = nm_lock_key(name);
    long long slot = nm_topo_keyslot(topo, key, strlen(key));
    g_free(key);
    return slot;
}

/* ---- slots ------------------------------------------------------------------ */

static void test_crc16_known_values(void)
{
    /* CRC-16/XMODEM's check value, and slots the Redis documentation gives. */
    g_assert_cmpuint(nm_crc16("123456789", 9), ==, 0x31c3);
    g_assert_cmpuint(nm_slot_of("foo", 3), ==, 12182);
    g_assert_cmpuint(nm_slot_of("bar", 3), ==, 5061);
    g_assert_cmpuint(nm_slot_of("{user1000}.following", 20), ==,
                     nm_slot_of("{user1000}.followers", 20));
    /* An empty tag, or no closing brace, hashes the whole key. */
    g_assert_cmpuint(nm_slot_of("{}x", 3), ==, nm_crc16("{}x", 3) % 16384);
    g_assert_cmpuint(nm_slot_of("a{b", 3), ==, nm_crc16("a{b", 3) % 16384);
    g_assert_cmpuint(nm_slot_of("a{b}c{d}", 8), ==, nm_crc16("b", 1) % 16384);
}

static void test_crc16_matches_server(void)
{
    static const char *const keys[] = { "", "x", "{", "}", "{}", "}{", "{a}", "a{}b{c}",
                                        "{a}{b}", "}x", "{a}b", "a}{b", "\xff\x00{\x01}" };
    GRand *rand = g_rand_new_with_seed(15);

    for (gsize i = 0; i < G_N_ELEMENTS(keys); i++) {
        size_t len = i == G_N_ELEMENTS(keys) - 1 ? 6 : strlen(keys[i]);
        g_assert_cmpint(nm_slot_of(keys[i], len), ==, nm_topo_keyslot(topo, keys[i], len));
    }
    for (int i = 0; i < 300; i++) {
        char key[40];
        size_t len = (size_t)g_rand_int_range(rand, 1, sizeof key);
        for (size_t k = 0; k < len; k++)
            key[k] = "ab{}\x00\xff:z"[g_rand_int_range(rand, 0, 8)];
        g_assert_cmpint(nm_slot_of(key, len), ==, nm_topo_keyslot(topo, key, len));
    }
    g_rand_free(rand);
}

/* Every key a name can have is in the lock key's slot, whatever its bytes,
 * and so is the fence floor of that slot (named with its slot tag). */
static void test_brace_names_one_slot(void)
{
    static const char *const brace[] = { "}x", "{a}b", "a}{b", "{", "}", "{}", "x{y}z" };
    static const char *const suffixes[] = { ":q", ":w", ":h",
                                            ":g:0123456789abcdef0123456789abcdef" };
    long long slots[G_N_ELEMENTS(brace)];

    for (gsize n = 0; n < G_N_ELEMENTS(brace); n++) {
        slots[n] = slot_of_name(brace[n]);
        char *floor = g_strdup_printf("netmutex:{%s}fence", nm_slot_tag((unsigned int)slots[n]));
        g_assert_cmpint(nm_topo_keyslot(topo, floor, strlen(floor)), ==, slots[n]);
        g_free(floor);
        for (gsize s = 0; s < G_N_ELEMENTS(suffixes); s++) {
            char *key = nm_key_of("netmutex:", brace[n], suffixes[s]);
            g_assert_cmpint(nm_topo_keyslot(topo, key, strlen(key)), ==, slots[n]);
            g_free(key);
        }
    }
    /* The tag follows the name, not its braces: "}x" and "{a}b" used to hash
     * "x"-ish fragments; now distinct names land apart (as a digest
     * spreads them). */
    g_assert_cmpint(slots[1], !=, slots[2]);
}

/* ---- locking on the cluster ------------------------------------------------- */

/* NAME locked here is held on the master of its slot; another process
 * (configured with URL) queues for it and is handed the lock at unlock: its
 * BLPOP went to that node.  Then status, break and the lost hold. */
static void check_lock_handoff(const char *url, const char *name)
{
    netmutex_t a;
    netmutex_status_t st;
    char *key = nm_lock_key(name);
    NmRedis *master = nm_topo_master_of(topo, slot_of_name(name));
    NmRemote *waiter = nm_remote_start_url(url, NULL, name, NETMUTEX_NORMAL, 0);

    nm_assert_rc(netmutex_init(&a, name, NULL), 0);
    nm_assert_rc(netmutex_lock(&a), 0);
    char *value = nm_redis_get(master, 0, key, strlen(key));
    g_assert_true(value && strlen(value) > 32);
    nm_assert_rc(netmutex_status(name, &st), 0);
    g_assert_true(st.held);
    nm_remote_send(waiter, 'l');
    g_assert_true(nm_wait_queue_len(master, name, 1, PROMPT_MS));
    g_assert_false(nm_remote_poll(waiter, 100));
    nm_assert_rc(netmutex_unlock(&a), 0);
    nm_assert_rc(nm_remote_result(waiter), 0);
    nm_assert_rc(netmutex_trylock(&a), EBUSY);
    nm_assert_rc(nm_remote(waiter, 'u'), 0);
    nm_assert_rc(netmutex_trylock(&a), 0);
    nm_assert_rc(netmutex_break(name), 0);
    nm_assert_rc(netmutex_status(name, &st), 0);
    g_assert_false(st.held);
    nm_assert_rc(netmutex_unlock(&a), ENOLCK);
    nm_assert_rc(netmutex_destroy(&a), 0);
    nm_remote_stop(waiter);
    g_free(value);
    g_free(key);
}

static void test_lock_cluster_url(void)
{
    static const char *const brace[] = { "}x", "{a}b", "a}{b", "plain" };
    char *url = nm_topo_url(topo);
    configure_url(url, 0);
    for (gsize i = 0; i < G_N_ELEMENTS(brace); i++) {
        char *name = nm_test_name(brace[i]);
        check_lock_handoff(url, name);
        g_free(name);
    }
    nm_assert_rc(netmutex_shutdown(), 0);
    g_free(url);
}

/* A redis:// URL of one node (a replica, even) finds the whole cluster. */
static void test_plain_url_detects_cluster(void)
{
    for (int node = 0; node < NM_TOPO_NODES; node += 5) {
        char *url = nm_topo_node_url(topo, node);
        configure_url(url, 0);
        for (int i = 0; i < 6; i++) {
            char *suffix = g_strdup_printf("n%d-%d", node, i);
            char *name = nm_test_name(suffix);
            check_lock_handoff(url, name);
            g_free(name);
            g_free(suffix);
        }
        nm_assert_rc(netmutex_shutdown(), 0);
        g_free(url);
    }
}

static void test_quorum_with_cluster_refused(void)
{
    char *a = nm_topo_node_url(topo, 0), *b = nm_topo_node_url(topo, 1);
    char *cluster = nm_topo_url(topo);
    char *mixed = g_strdup_printf("%s,%s", a, cluster);
    char *list = g_strdup_printf("%s,%s,%s", a, b, a);
    netmutex_config_t cfg = { .url = mixed };
    netmutex_t m;

    nm_assert_rc(netmutex_configure(&cfg), EINVAL);
    cfg.url = list;
    nm_assert_rc(netmutex_configure(&cfg), 0);
    nm_assert_rc(netmutex_init(&m, "quorum-of-nodes", NULL), 0);
    nm_assert_rc(netmutex_trylock(&m), EINVAL);
    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    g_free(a);
    g_free(b);
    g_free(cluster);
    g_free(mixed);
    g_free(list);
}

/* ---- an ACL user without +cluster|keyslot ----------------------------------- */

/* The scripts ask CLUSTER KEYSLOT whether they run on a Cluster node.  A
 * user whose rule lacks it is refused there -- EACCES, the permission
 * named in the log -- before anything is queued, rather than taken for a
 * plain server's (which pushed grants to undeclared keys, and PUBLISHed
 * requests that caching holders, on SSUBSCRIBE, never hear).  Calls that
 * need no answer (an uncontended lock and unlock) go on. */
static void test_acl_without_keyslot(void)
{
    char *plain = nm_topo_url(topo), *url = nm_url_as_user(plain, "noslot", "pw");
    char *name = nm_test_name("m");
    NmRedis *master = nm_topo_master_of(topo, slot_of_name(name));
    netmutex_attr_t attr;
    netmutex_t m;

    for (int i = 0; i < NM_TOPO_NODES; i++)
        nm_redis_add_user(topo->node[i], "noslot", "pw", "-cluster|keyslot");
    NmRemote *holder = nm_remote_start_url(plain, NULL, name, NETMUTEX_NORMAL, 0);
    configure_url(url, 0);
    nm_log_capture_start(NETMUTEX_LOG_WARN);
    nm_assert_rc(netmutex_attr_init(&attr), 0);
    nm_assert_rc(netmutex_attr_setcache(&attr, 0), 0);
    nm_assert_rc(netmutex_init(&m, name, &attr), 0);
    nm_assert_rc(netmutex_attr_destroy(&attr), 0);
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(nm_remote(holder, 'l'), 0);
    nm_assert_rc(netmutex_trylock(&m), EACCES);
    struct timespec ts;
    nm_deadline(&ts, CLOCK_REALTIME, nm_ms(5000));
    nm_assert_rc(netmutex_timedlock(&m, &ts), EACCES);
    g_assert_cmpint(nm_queue_len(master, name), ==, 0);
    g_assert_true(nm_log_captured("+cluster|keyslot"));
    nm_log_capture_stop();
    nm_assert_rc(nm_remote(holder, 'u'), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    nm_remote_stop(holder);
    for (int i = 0; i < NM_TOPO_NODES; i++)
        nm_redis_ok(topo->node[i], "ACL DELUSER noslot");
    g_free(name);
    g_free(url);
    g_free(plain);
}

/* ---- many names, many processes ----------------------------------------------- */

#define NAMES 12
#define PROCS 3
#define THREADS 3

/* What the protected resources remember, in memory shared with the
 * workers: per name a counter, the last fence and the pid that wrote it. */
typedef struct Resource {
    long long counter, fence, pid;
} Resource;

typedef struct Shared {
    Resource res[NAMES];
    long long done;       /* critical sections completed (all workers) */
    long long lost;       /* lost-lease callbacks */
    long long enolck;     /* unlock answered ENOLCK */
    long long failures;   /* anything else unexpected */
    int stop;             /* the parent says: finish */
} Shared;

static Shared *shared;
static char *names[NAMES];
static int nnames = NAMES; /* the workers use names[0 .. nnames) */
static int iterations; /* per thread; 0: until shared->stop */
static unsigned int lease_ms;

static void on_lost(const char *name, void *arg)
{
    (void)name;
    (void)arg;
    __atomic_add_fetch(&shared->lost, 1, __ATOMIC_SEQ_CST);
}

static void fail(const char *what, int rc)
{
    g_printerr("%s: %s\n", what, nm_errname(rc));
    __atomic_add_fetch(&shared->failures, 1, __ATOMIC_SEQ_CST);
}

/* Critical section on resource I: read, dawdle, write back plus one; the
 * fence must never go back, and must grow when the process changes. */
static void touch(netmutex_t *m, int i)
{
    Resource *r = &shared->res[i];
    uint64_t fence;
    int rc = netmutex_fence(m, &fence);
    if (rc)
        return fail("fence", rc);
    long long c = r->counter;
    if ((long long)fence < r->fence || (r->pid != getpid() && (long long)fence == r->fence)) {
        g_printerr("%s: fence went from %lld (pid %lld) to %llu (pid %d)\n", names[i],
                   r->fence, r->pid, (unsigned long long)fence, (int)getpid());
        __atomic_add_fetch(&shared->failures, 1, __ATOMIC_SEQ_CST);
    }
    r->fence = (long long)fence;
    r->pid = getpid();
    g_usleep(200);
    r->counter = c + 1;
}

static void *worker_thread(void *p)
{
    int t = GPOINTER_TO_INT(p);
    netmutex_t m[NAMES];
    for (int i = 0; i < nnames; i++)
        if (netmutex_init(&m[i], names[i], NULL) != 0)
            fail("init", EINVAL);
    for (int k = 0; iterations ? k < iterations : !__atomic_load_n(&shared->stop, __ATOMIC_SEQ_CST);
         k++) {
        int i = (k * 5 + t) % nnames, rc = netmutex_lock(&m[i]);
        if (rc) {
            fail("lock", rc);
            continue;
        }
        touch(&m[i], i);
        rc = netmutex_unlock(&m[i]);
        if (rc == ENOLCK)
            __atomic_add_fetch(&shared->enolck, 1, __ATOMIC_SEQ_CST);
        else if (rc)
            fail("unlock", rc);
        __atomic_add_fetch(&shared->done, 1, __ATOMIC_SEQ_CST);
    }
    for (int i = 0; i < nnames; i++)
        netmutex_destroy(&m[i]);
    return NULL;
}

static int worker_process(void *p)
{
    (void)p;
    char *url = nm_topo_url(topo);
    netmutex_config_t cfg = { .url = url, .lease_ms = lease_ms, .on_lost = on_lost };
    pthread_t t[THREADS];
    if (netmutex_configure(&cfg) != 0)
        return 10;
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker_thread, GINT_TO_POINTER(i));
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    netmutex_shutdown();
    g_free(url);
    return 0;
}

/* NAMES names, at least 3 on every master. */
static void pick_names(const char *prefix)
{
    GHashTable *per = g_hash_table_new(NULL, NULL);
    int n = 0;
    for (int k = 0; n < NAMES; k++) {
        char *suffix = g_strdup_printf("%s-%d", prefix, k);
        char *name = nm_test_name(suffix);
        NmRedis *master = nm_topo_master_of(topo, slot_of_name(name));
        int have = GPOINTER_TO_INT(g_hash_table_lookup(per, master));
        if (have < NAMES / 3) {
            g_hash_table_insert(per, master, GINT_TO_POINTER(have + 1));
            names[n++] = name;
        } else {
            g_free(name);
        }
        g_free(suffix);
    }
    g_assert_cmpuint(g_hash_table_size(per), ==, 3);
    g_hash_table_destroy(per);
}

static void free_names(void)
{
    for (int i = 0; i < NAMES; i++)
        g_clear_pointer(&names[i], g_free);
}

static void start_workers(pid_t *pids)
{
    memset(shared, 0, sizeof *shared);
    for (int i = 0; i < PROCS; i++)
        pids[i] = nm_fork_run(worker_process, NULL);
}

static long long counted(void)
{
    long long sum = 0;
    for (int i = 0; i < NAMES; i++)
        sum += shared->res[i].counter;
    return sum;
}

/* Every section counted once, no fence went back, no call failed but
 * unlock with ENOLCK: a release whose reply was lost in the switch and that
 * finds its key gone when repeated says so (netmutex_lock(3): unlock). */
static void check_outcome(long long expected)
{
    g_test_message("done %lld, lost %lld, ENOLCK %lld", shared->done, shared->lost,
                   shared->enolck);
    g_assert_cmpint(shared->failures, ==, 0);
    g_assert_cmpint(counted(), ==, expected);
}

static void test_counters_all_masters(void)
{
    pid_t pids[PROCS];
    pick_names("count");
    iterations = 40;
    lease_ms = 0;
    start_workers(pids);
    for (int i = 0; i < PROCS; i++)
        nm_child_wait_ok(pids[i], nm_ms(120000));
    check_outcome((long long)PROCS * THREADS * iterations);
    for (int i = 0; i < NAMES; i++)
        g_assert_cmpint(shared->res[i].counter, >, 0);
    free_names();
}

/* ---- failover ------------------------------------------------------------------- */

/* The replica of MASTER (by ROLE). */
static NmRedis *replica_of(NmRedis *master)
{
    for (int i = 0; i < NM_TOPO_NODES; i++) {
        redisReply *r = nm_redis_cmd(topo->node[i], "ROLE");
        bool mine = r->type == REDIS_REPLY_ARRAY && r->elements >= 3 &&
                    strcmp(r->element[0]->str, "slave") == 0 &&
                    r->element[2]->integer == nm_redis_port(master);
        freeReplyObject(r);
        if (mine)
            return topo->node[i];
    }
    g_error("no replica of port %d", nm_redis_port(master));
    return NULL;
}

/* CLUSTER FAILOVER on REPLICA until it is master.  A node that just
 * changed roles is not yet known as a replica everywhere, and its master
 * may ignore the request (the manual failover times out after 5 s): then
 * it is asked again. */
static void promote(NmRedis *replica)
{
    for (int attempt = 0; attempt < 4 && !nm_topo_is_master(replica); attempt++) {
        gint64 end = nmt_now_ms() + nm_ms(6000);
        nm_redis_ok(replica, "CLUSTER FAILOVER");
        while (!nm_topo_is_master(replica) && nmt_now_ms() < end)
            nmt_sleep_ms(5);
    }
    g_assert_true(nm_topo_is_master(replica));
}

static bool wait_done(long long n, unsigned int timeout_ms)
{
    gint64 end = nmt_now_ms() + timeout_ms;
    while (__atomic_load_n(&shared->done, __ATOMIC_SEQ_CST) < n && nmt_now_ms() < end)
        nmt_sleep_ms(10);
    return __atomic_load_n(&shared->done, __ATOMIC_SEQ_CST) >= n;
}

/* A master is failed over (CLUSTER FAILOVER on its replica: the replica
 * catches up, then takes over) while processes lock names on every master.
 * The workers go on within seconds, the counters stay exact, and any lease
 * lost on the way is reported. */
static void test_failover_while_locking(void)
{
    pid_t pids[PROCS];
    g_assert_true(nm_topo_wait_ok(topo, PROMPT_MS)); /* replicas in sync */
    pick_names("failover");
    iterations = 0;
    lease_ms = nm_ms(2000);
    start_workers(pids);
    g_assert_true(wait_done(60, PROMPT_MS));

    NmRedis *master = nm_topo_master_of(topo, slot_of_name(names[0]));
    NmRedis *replica = replica_of(master);
    promote(replica);
    long long at_failover = __atomic_load_n(&shared->done, __ATOMIC_SEQ_CST);
    gint64 t0 = nmt_now_ms();
    /* Every name is used about as often, so 3 x NAMES more sections cover
     * the failed-over master's names too. */
    g_assert_true(wait_done(at_failover + 3 * NAMES, nm_ms(15000)));
    g_test_message("resumed: %d more sections within %lld ms of the switch", 3 * NAMES,
                   (long long)(nmt_now_ms() - t0));
    g_assert_true(nm_topo_wait_ok(topo, PROMPT_MS));

    __atomic_store_n(&shared->stop, 1, __ATOMIC_SEQ_CST);
    for (int i = 0; i < PROCS; i++)
        nm_child_wait_ok(pids[i], PROMPT_MS);
    check_outcome(shared->done);
    free_names();
}

/* DEL KEY on R as soon as R serves its slot: what DEL answered. */
static long long del_when_served(NmRedis *r, const char *key)
{
    gint64 end = nmt_now_ms() + PROMPT_MS;
    for (;;) {
        redisReply *reply = nm_redis_cmd(r, "DEL %s", key);
        long long n = reply->type == REDIS_REPLY_INTEGER ? reply->integer : -1;
        freeReplyObject(reply);
        if (n >= 0 || nmt_now_ms() > end)
            return n;
        nmt_sleep_ms(1);
    }
}

/* The new master lacks a held lease (as a replica promoted before it caught
 * up would; here the key is deleted there once it took over): the
 * watchdog's renewal, redirected there, finds the key gone and reports the
 * loss, and unlock says ENOLCK.  The lease outlasts the switch (the old
 * master holds requests back while its replica catches up and is elected,
 * a few hundred ms, up to the 5 s a manual failover may take before it
 * gives up and is asked again): only the deletion may cost it. */
static void test_failover_lost_lease_reported(void)
{
    char *name = nm_test_name("lost"), *key = nm_lock_key(name);
    netmutex_t m;
    netmutex_attr_t attr;
    NmLost lost;
    uint64_t left;

    g_assert_true(nm_topo_wait_ok(topo, PROMPT_MS)); /* replicas in sync */
    configure_cluster(nm_ms(10000));
    nm_lost_init(&lost);
    nm_assert_rc(netmutex_attr_init(&attr), 0);
    nm_assert_rc(netmutex_attr_setlostfn(&attr, nm_lost_record, &lost), 0);
    nm_assert_rc(netmutex_init(&m, name, &attr), 0);
    nm_assert_rc(netmutex_lock(&m), 0);
    NmRedis *master = nm_topo_master_of(topo, slot_of_name(name));
    NmRedis *replica = replica_of(master);
    promote(replica);
    g_assert_cmpint(del_when_served(replica, key), ==, 1);
    g_assert_cmpint(nm_lost_wait(&lost, nm_ms(20000)), ==, 1);
    g_assert_cmpstr(lost.name, ==, name);
    nm_assert_rc(netmutex_validity(&m, &left), ENOLCK);
    nm_assert_rc(netmutex_unlock(&m), ENOLCK);
    g_assert_true(nm_topo_wait_ok(topo, PROMPT_MS));
    nm_assert_rc(netmutex_trylock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_attr_destroy(&attr), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    nm_lost_clear(&lost);
    g_free(key);
    g_free(name);
}

/* A master dies with a lock held on it (the write reached its replica:
 * WAIT).  The cluster promotes the replica after the node timeout; the
 * holder's renewals and its unlock, refused by the dead node, read the map
 * again and reach the promoted replica: the lease is kept, the unlock
 * succeeds, and the name can be locked again.  The old master is then
 * restarted and rejoins as a replica. */
static void test_master_killed(void)
{
    char *name = nm_test_name("killed");
    netmutex_t m;
    netmutex_attr_t attr;
    NmLost lost;

    g_assert_true(nm_topo_wait_ok(topo, PROMPT_MS));
    configure_cluster(nm_ms(10000));
    nm_lost_init(&lost);
    nm_assert_rc(netmutex_attr_init(&attr), 0);
    nm_assert_rc(netmutex_attr_setlostfn(&attr, nm_lost_record, &lost), 0);
    nm_assert_rc(netmutex_init(&m, name, &attr), 0);
    nm_assert_rc(netmutex_lock(&m), 0);
    long long slot = slot_of_name(name);
    NmRedis *master = nm_topo_master_of(topo, slot);
    NmRedis *replica = replica_of(master);
    redisReply *r = nm_redis_cmd(master, "WAIT 1 %u", nm_ms(5000));
    g_assert_cmpint(r->integer, ==, 1);
    freeReplyObject(r);

    nm_redis_stop(master);
    gint64 t0 = nmt_now_ms(), end = t0 + PROMPT_MS;
    while (!nm_topo_is_master(replica) && nmt_now_ms() < end)
        nmt_sleep_ms(20);
    g_assert_true(nm_topo_is_master(replica));
    g_test_message("replica promoted %lld ms after the master died",
                   (long long)(nmt_now_ms() - t0));
    /* The failover is done once every live node tells the new map. */
    for (int i = 0; i < NM_TOPO_NODES; i++)
        while (topo->node[i] != master && nmt_now_ms() < end &&
               !nm_topo_is_master_of(topo->node[i], slot, replica))
            nmt_sleep_ms(10);
    nm_assert_rc(netmutex_unlock(&m), 0);
    g_assert_cmpint(nm_lost_calls(&lost), ==, 0);
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_attr_destroy(&attr), 0);
    nm_assert_rc(netmutex_shutdown(), 0);

    nm_redis_restart(master);
    g_assert_true(nm_topo_wait_ok(topo, PROMPT_MS));
    nm_lost_clear(&lost);
    g_free(name);
}

/* ---- slot migration -------------------------------------------------------------- */

/* Two names whose keys share a slot. */
static void two_names_one_slot(char **a, char **b)
{
    GHashTable *seen = g_hash_table_new_full(NULL, NULL, NULL, g_free);
    for (int k = 0;; k++) {
        char *suffix = g_strdup_printf("mig-%d", k);
        char *name = nm_test_name(suffix), *key = nm_lock_key(name);
        gpointer slot = GUINT_TO_POINTER(nm_slot_of(key, strlen(key)) + 1);
        g_free(suffix);
        g_free(key);
        char *other = g_hash_table_lookup(seen, slot);
        if (other) {
            *a = g_strdup(other);
            *b = name;
            break;
        }
        g_hash_table_insert(seen, slot, name);
    }
    g_hash_table_destroy(seen);
}

/* EXISTS KEY on R, after ASKING (R may only be importing its slot). */
static long long exists_asking(NmRedis *r, const char *key)
{
    redisContext *c = nm_redis_connect(r, 0);
    redisReply *reply = redisCommand(c, "ASKING");
    freeReplyObject(reply);
    reply = redisCommand(c, "EXISTS %s", key);
    long long n = reply && reply->type == REDIS_REPLY_INTEGER ? reply->integer : -1;
    freeReplyObject(reply);
    redisFree(c);
    return n;
}

/* A held lock's slot is migrated to another master: a new name of that
 * slot waits meanwhile (its lock key and the slot's fence floor are split
 * between the nodes: TRYAGAIN until the deadline, never EPROTO), the held
 * lease is renewed on its new node after the move (MOVED) and never
 * reported lost, its unlock finds it there, and the new name can be
 * locked once the migration is over. */
static void test_slot_migration(void)
{
    char *held_name, *fresh_name;
    netmutex_t held, fresh;
    netmutex_attr_t attr;
    NmLost lost;
    uint64_t left;

    two_names_one_slot(&held_name, &fresh_name);
    long long slot = slot_of_name(held_name);
    NmRedis *from = nm_topo_master_of(topo, slot), *to = nm_topo_other_master(topo, from);
    char *from_id = nm_topo_node_id(from), *to_id = nm_topo_node_id(to);
    char *fresh_key = nm_lock_key(fresh_name), *held_key = nm_lock_key(held_name);

    configure_cluster(nm_ms(600));
    nm_lost_init(&lost);
    nm_assert_rc(netmutex_attr_init(&attr), 0);
    nm_assert_rc(netmutex_attr_setlostfn(&attr, nm_lost_record, &lost), 0);
    /* Not cached: an unlock deletes the key, which is checked below. */
    nm_assert_rc(netmutex_attr_setcache(&attr, 0), 0);
    nm_assert_rc(netmutex_init(&held, held_name, &attr), 0);
    nm_assert_rc(netmutex_init(&fresh, fresh_name, &attr), 0);
    nm_assert_rc(netmutex_lock(&held), 0);

    nm_redis_ok(to, "CLUSTER SETSLOT %lld IMPORTING %s", slot, from_id);
    nm_redis_ok(from, "CLUSTER SETSLOT %lld MIGRATING %s", slot, to_id);
    struct timespec until;
    nm_deadline(&until, CLOCK_REALTIME, nm_ms(700)); /* renewals of HELD still on FROM */
    nm_assert_rc(netmutex_timedlock(&fresh, &until), ETIMEDOUT);
    g_assert_cmpint(exists_asking(to, fresh_key), ==, 0);

    nm_topo_finish_migration(topo, slot, from, to);
    nmt_sleep_ms(nm_ms(1500)); /* renewals now meet MOVED */
    g_assert_cmpint(nm_lost_calls(&lost), ==, 0);
    nm_assert_rc(netmutex_validity(&held, &left), 0);
    g_assert_cmpuint(left, >, 0);
    g_assert_cmpint(exists_asking(to, held_key), ==, 1);
    nm_assert_rc(netmutex_unlock(&held), 0);
    g_assert_cmpint(exists_asking(to, held_key), ==, 0);
    nm_assert_rc(netmutex_trylock(&fresh), 0);
    nm_assert_rc(netmutex_unlock(&fresh), 0);

    nm_assert_rc(netmutex_destroy(&held), 0);
    nm_assert_rc(netmutex_destroy(&fresh), 0);
    nm_assert_rc(netmutex_attr_destroy(&attr), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    nm_lost_clear(&lost);
    g_free(from_id);
    g_free(to_id);
    g_free(fresh_key);
    g_free(held_key);
    g_free(held_name);
    g_free(fresh_name);
}

/* A held lease's key is moved while its slot stays MIGRATING for longer
 * than three leases: every renewal meets ASK, follows it to the importing
 * node and renews the key there, so the lease is neither lost nor reported
 * lost, and the unlock after the migration finds it. */
static void test_migration_renewal_follows_ask(void)
{
    char *name = nm_test_name("ask-renew"), *key = nm_lock_key(name);
    long long slot = slot_of_name(name);
    NmRedis *from = nm_topo_master_of(topo, slot), *to = nm_topo_other_master(topo, from);
    char *from_id = nm_topo_node_id(from), *to_id = nm_topo_node_id(to);
    netmutex_t m;
    netmutex_attr_t attr;
    NmLost lost;
    uint64_t left;

    configure_cluster(nm_ms(600));
    nm_lost_init(&lost);
    nm_assert_rc(netmutex_attr_init(&attr), 0);
    nm_assert_rc(netmutex_attr_setlostfn(&attr, nm_lost_record, &lost), 0);
    nm_assert_rc(netmutex_attr_setcache(&attr, 0), 0);
    nm_assert_rc(netmutex_init(&m, name, &attr), 0);
    nm_assert_rc(netmutex_lock(&m), 0);

    nm_redis_ok(to, "CLUSTER SETSLOT %lld IMPORTING %s", slot, from_id);
    nm_redis_ok(from, "CLUSTER SETSLOT %lld MIGRATING %s", slot, to_id);
    nm_redis_ok(from, "MIGRATE 127.0.0.1 %d %s 0 5000", nm_redis_port(to), key);
    nmt_sleep_ms(nm_ms(2000)); /* over three 600 ms leases, all ASK */
    g_assert_cmpint(nm_lost_calls(&lost), ==, 0);
    nm_assert_rc(netmutex_validity(&m, &left), 0);
    g_assert_cmpuint(left, >, 0);
    g_assert_cmpint(exists_asking(to, key), ==, 1);

    nm_topo_finish_migration(topo, slot, from, to);
    nm_assert_rc(netmutex_unlock(&m), 0);
    g_assert_cmpint(exists_asking(to, key), ==, 0);
    g_assert_cmpint(nm_lost_calls(&lost), ==, 0);

    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_attr_destroy(&attr), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    nm_lost_clear(&lost);
    g_free(from_id);
    g_free(to_id);
    g_free(key);
    g_free(name);
}

/* Marks SLOT as moving from FROM to TO (IMPORTING first, as redis-cli
 * does), with no key moved yet. */
static void start_migration(long long slot, NmRedis *from, NmRedis *to)
{
    char *from_id = nm_topo_node_id(from), *to_id = nm_topo_node_id(to);
    nm_redis_ok(to, "CLUSTER SETSLOT %lld IMPORTING %s", slot, from_id);
    nm_redis_ok(from, "CLUSTER SETSLOT %lld MIGRATING %s", slot, to_id);
    g_free(from_id);
    g_free(to_id);
}

/* Moves whatever keys SLOT still has on FROM to TO until none is left
 * there (keys come and go while the slot is in use: a key gone meanwhile
 * answers NOKEY), then gives TO the slot on every master. */
static void finish_busy_migration(long long slot, NmRedis *from, NmRedis *to)
{
    char *to_id = nm_topo_node_id(to);
    gint64 end = nmt_now_ms() + PROMPT_MS;
    for (;;) {
        redisReply *keys = nm_redis_cmd(from, "CLUSTER GETKEYSINSLOT %lld 100", slot);
        g_assert_cmpint(keys->type, ==, REDIS_REPLY_ARRAY);
        size_t n = keys->elements;
        for (size_t i = 0; i < n; i++) {
            redisReply *r = nm_redis_cmd(from, "MIGRATE 127.0.0.1 %d %s 0 5000",
                                         nm_redis_port(to), keys->element[i]->str);
            g_assert_true(r->type == REDIS_REPLY_STATUS);
            freeReplyObject(r);
        }
        freeReplyObject(keys);
        if (n == 0)
            break;
        g_assert_true(nmt_now_ms() < end);
    }
    for (int i = 0; i < NM_TOPO_NODES; i++)
        if (nm_topo_is_master(topo->node[i]))
            nm_redis_ok(topo->node[i], "CLUSTER SETSLOT %lld NODE %s", slot, to_id);
    g_free(to_id);
}

/* The slot of a held name is marked MIGRATING/IMPORTING with no key moved
 * yet.  A waiter in another process must wait, not fail: its request
 * touches keys that are not all on one node, which Redis answers with ASK
 * and TRYAGAIN, both retried; before, the acquire script reached the
 * queue's keys undeclared, the node refused them as "non local" and lock
 * returned EPROTO at once.  Once the migration is over and the holder
 * unlocks, the waiter has the lock. */
static void test_migration_waiter_waits(void)
{
    char *url = nm_topo_url(topo), *name = nm_test_name("rx");
    long long slot = slot_of_name(name);
    NmRedis *from = nm_topo_master_of(topo, slot), *to = nm_topo_other_master(topo, from);
    netmutex_t a;

    configure_cluster(nm_ms(10000));
    NmRemote *waiter = nm_remote_start_url(url, NULL, name, NETMUTEX_NORMAL, 0);
    nm_assert_rc(netmutex_init(&a, name, NULL), 0);
    nm_assert_rc(netmutex_lock(&a), 0);
    start_migration(slot, from, to);
    nm_remote_send(waiter, 'l');
    g_assert_false(nm_remote_poll(waiter, nm_ms(1000))); /* waits, no EPROTO */
    finish_busy_migration(slot, from, to);
    nm_assert_rc(netmutex_unlock(&a), 0);
    nm_assert_rc(nm_remote_result(waiter), 0);
    nm_assert_rc(nm_remote(waiter, 'u'), 0);
    nm_assert_rc(netmutex_trylock(&a), 0);
    nm_assert_rc(netmutex_unlock(&a), 0);
    nm_assert_rc(netmutex_destroy(&a), 0);
    nm_remote_stop(waiter);
    nm_assert_rc(netmutex_shutdown(), 0);
    g_free(name);
    g_free(url);
}

/* A held name has a waiter queued; its slot is being migrated and the
 * queue's keys (:q, :w) have moved, the lock key not yet.  The holder's
 * unlock waits for the migration rather than fail, and the waiter has the
 * lock right after it: before, the release script reached the queue
 * undeclared, the node refused it ("non local key"), unlock failed and the
 * name stayed locked until the lease ran out. */
static void test_migration_release_queue_moved(void)
{
    char *url = nm_topo_url(topo), *name = nm_test_name("rx");
    char *q = nm_key_of("netmutex:", name, ":q"), *w = nm_key_of("netmutex:", name, ":w");
    long long slot = slot_of_name(name);
    NmRedis *from = nm_topo_master_of(topo, slot), *to = nm_topo_other_master(topo, from);
    netmutex_t a;

    configure_cluster(nm_ms(20000));
    NmRemote *waiter = nm_remote_start_url(url, NULL, name, NETMUTEX_NORMAL, 0);
    nm_assert_rc(netmutex_init(&a, name, NULL), 0);
    NmHolder *holder = nm_holder_start(&a);
    nm_remote_send(waiter, 'l');
    g_assert_true(nm_wait_queue_len(from, name, 1, PROMPT_MS));
    start_migration(slot, from, to);
    nm_redis_ok(from, "MIGRATE 127.0.0.1 %d %s 0 5000 KEYS %s %s", nm_redis_port(to), "", q, w);
    nm_holder_release_later(holder, 0);
    nmt_sleep_ms(nm_ms(300));
    finish_busy_migration(slot, from, to);
    gint64 t0 = nmt_now_ms();
    nm_assert_rc(nm_holder_join(holder), 0);
    nm_assert_rc(nm_remote_result(waiter), 0);
    g_test_message("the waiter had the lock %lld ms after the migration ended",
                   (long long)(nmt_now_ms() - t0));
    g_assert_cmpint(nmt_now_ms() - t0, <, nm_ms(5000)); /* well within the lease */
    nm_assert_rc(nm_remote(waiter, 'u'), 0);
    nm_assert_rc(netmutex_destroy(&a), 0);
    nm_remote_stop(waiter);
    nm_assert_rc(netmutex_shutdown(), 0);
    g_free(q);
    g_free(w);
    g_free(name);
    g_free(url);
}

/* NAMES_IN_SLOTS names in as many slots, all served by one master. */
#define NAMES_IN_SLOTS 4
static void pick_names_in_slots(const char *prefix, long long *slots)
{
    NmRedis *master = NULL;
    int n = 0;
    for (int k = 0; n < NAMES_IN_SLOTS; k++) {
        char *suffix = g_strdup_printf("%s-%d", prefix, k);
        char *name = nm_test_name(suffix);
        long long slot = slot_of_name(name);
        NmRedis *m = nm_topo_master_of(topo, slot);
        bool fresh = !master || m == master;
        for (int i = 0; i < n; i++)
            fresh = fresh && slots[i] != slot;
        if (fresh) {
            master = m;
            slots[n] = slot;
            names[n++] = name;
        } else {
            g_free(name);
        }
        g_free(suffix);
    }
}

/* Four slots in use (processes lock their names all along) are migrated
 * to another master together.  No lock or unlock fails on the way (ASK,
 * TRYAGAIN and MOVED are retried, never reported), the counters stay
 * exact, and once the migration is over every name can be locked again
 * within a second (scaled). */
static void test_migration_four_busy_slots(void)
{
    long long slots[NAMES_IN_SLOTS];
    pid_t pids[PROCS];
    netmutex_t m[NAMES_IN_SLOTS];

    pick_names_in_slots("busy", slots);
    nnames = NAMES_IN_SLOTS;
    iterations = 0;
    lease_ms = nm_ms(5000);
    NmRedis *from = nm_topo_master_of(topo, slots[0]), *to = nm_topo_other_master(topo, from);
    start_workers(pids);
    g_assert_true(wait_done(40, PROMPT_MS));
    for (int i = 0; i < NAMES_IN_SLOTS; i++)
        start_migration(slots[i], from, to);
    nmt_sleep_ms(nm_ms(200)); /* the workers meet the open slots */
    for (int i = 0; i < NAMES_IN_SLOTS; i++)
        finish_busy_migration(slots[i], from, to);
    long long at_end = __atomic_load_n(&shared->done, __ATOMIC_SEQ_CST);
    g_assert_true(wait_done(at_end + 3 * NAMES_IN_SLOTS, nm_ms(15000)));
    __atomic_store_n(&shared->stop, 1, __ATOMIC_SEQ_CST);
    for (int i = 0; i < PROCS; i++)
        nm_child_wait_ok(pids[i], PROMPT_MS);
    check_outcome(shared->done);

    configure_cluster(0);
    for (int i = 0; i < NAMES_IN_SLOTS; i++) {
        struct timespec until;
        nm_assert_rc(netmutex_init(&m[i], names[i], NULL), 0);
        nm_deadline(&until, CLOCK_REALTIME, nm_ms(1000));
        nm_assert_rc(netmutex_timedlock(&m[i], &until), 0);
        nm_assert_rc(netmutex_unlock(&m[i]), 0);
        nm_assert_rc(netmutex_destroy(&m[i]), 0);
    }
    nm_assert_rc(netmutex_shutdown(), 0);
    for (int i = 0; i < NAMES_IN_SLOTS; i++)
        g_assert_cmpint(shared->res[i].counter, >, 0);
    nnames = NAMES;
    free_names();
}

/* ---- the command line tool ------------------------------------------------------- */

/* Runs netmutex(1) with ARGS under NETMUTEX_URL=URL: its exit status, its
 * standard output in *OUT (if not NULL; kept off the TAP stream anyway). */
static int run_cli(const char *url, const char *const *args, char **out)
{
    char *ignored = NULL;
    const char *tool = cli_tool;
    GPtrArray *argv = g_ptr_array_new();
    char **env = g_environ_setenv(g_get_environ(), "NETMUTEX_URL", url, TRUE);
    GError *error = NULL;
    int status;

    g_assert_nonnull(tool);
    g_ptr_array_add(argv, (char *)tool);
    for (int i = 0; args[i]; i++)
        g_ptr_array_add(argv, (char *)args[i]);
    g_ptr_array_add(argv, NULL);
    g_spawn_sync(NULL, (char **)argv->pdata, env, G_SPAWN_DEFAULT, NULL, NULL,
                 out ? out : &ignored, NULL, &status, &error);
    g_assert_no_error(error);
    g_free(ignored);
    g_ptr_array_free(argv, TRUE);
    g_strfreev(env);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* netmutex(1) on the cluster, by its redis-cluster:// URL and by a plain
 * URL of one node: list finds the locks of every master, status, -n and
 * break see the lock on its node, and a command runs under a free one. */
static void test_cli(void)
{
    char *cluster = nm_topo_url(topo), *plain = nm_topo_node_url(topo, 4);
    const char *const urls[] = { cluster, plain };
    netmutex_t m[NAMES];
    netmutex_attr_t attr;

    pick_names("cli");
    configure_url(cluster, 0);
    /* Not cached: unlock frees the names, for list to find none. */
    nm_assert_rc(netmutex_attr_init(&attr), 0);
    nm_assert_rc(netmutex_attr_setcache(&attr, 0), 0);
    for (int i = 0; i < NAMES; i++) {
        nm_assert_rc(netmutex_init(&m[i], names[i], &attr), 0);
        nm_assert_rc(netmutex_lock(&m[i]), 0);
    }
    for (gsize u = 0; u < G_N_ELEMENTS(urls); u++) {
        char *out = NULL;
        g_assert_cmpint(run_cli(urls[u], (const char *[]){ "list", "--json", NULL }, &out), ==, 0);
        for (int i = 0; i < NAMES; i++) {
            char *quoted = g_strdup_printf("\"name\":\"%s\"", names[i]);
            g_assert_nonnull(strstr(out, quoted));
            g_free(quoted);
        }
        g_free(out);
        g_assert_cmpint(run_cli(urls[u], (const char *[]){ "status", names[1], NULL }, NULL), ==, 0);
        g_assert_cmpint(run_cli(urls[u], (const char *[]){ "-n", names[2], "true", NULL }, NULL), ==,
                        1);
        g_assert_cmpint(run_cli(urls[u], (const char *[]){ "cli-free", "true", NULL }, NULL), ==, 0);
    }
    g_assert_cmpint(run_cli(plain, (const char *[]){ "break", names[3], NULL }, NULL), ==, 0);
    nm_assert_rc(netmutex_unlock(&m[3]), ENOLCK);
    for (int i = 0; i < NAMES; i++) {
        if (i != 3)
            nm_assert_rc(netmutex_unlock(&m[i]), 0);
        nm_assert_rc(netmutex_destroy(&m[i]), 0);
    }
    g_assert_cmpint(run_cli(cluster, (const char *[]){ "list", NULL }, NULL), ==, 1);
    nm_assert_rc(netmutex_attr_destroy(&attr), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    free_names();
    g_free(cluster);
    g_free(plain);
}

/* ---- condition variables ----------------------------------------------------- */

/* Key SUFFIX of condition NAME: {c<tag>} where NAME's lock key has {<tag>}. */
static char *cond_key(const char *name, const char *suffix)
{
    char *lock = nm_lock_key(name);
    const char *brace = strchr(lock, '{');
    char *key = g_strdup_printf("%.*s{c%s%s", (int)(brace - lock), lock, brace + 1, suffix);
    g_free(lock);
    return key;
}

static long long cond_llen(NmRedis *node, const char *key)
{
    redisReply *r = nm_redis_cmd(node, "LLEN %s", key);
    long long n = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return n;
}

static bool cond_waiters(NmRedis *node, const char *cw, long long n)
{
    gint64 until = nmt_now_ms() + PROMPT_MS;
    while (cond_llen(node, cw) != n && nmt_now_ms() < until)
        nmt_sleep_ms(2);
    return cond_llen(node, cw) == n;
}

/* How many keys of the condition whose CW is CW are on NODE: those
 * under its tag (hex digits, so no glob character), whatever their
 * suffix. */
static long long cond_keys_of(NmRedis *node, const char *cw)
{
    const char *end = strchr(cw, '}');
    char *pattern = g_strdup_printf("%.*s*", (int)(end - cw + 1), cw);
    redisReply *r = nm_redis_cmd(node, "KEYS %s", pattern);
    long long n = r->type == REDIS_REPLY_ARRAY ? (long long)r->elements : -1;
    if (n > 0)
        g_test_message("left on a node: %s", r->element[0]->str);
    freeReplyObject(r);
    g_free(pattern);
    return n;
}

typedef struct CondWaiter {
    netmutex_cond_t *c;
    netmutex_t *m;
} CondWaiter;

static int cond_wait_once(void *p)
{
    CondWaiter *w = p;
    int err = netmutex_lock(w->m);
    if (!err)
        err = netmutex_cond_wait(w->c, w->m);
    int uerr = netmutex_unlock(w->m);
    return err ? err : uerr;
}

/* A condition name of this test whose keys are on another master than
 * MNAME's lock: its name in *CNAME, its waiter list's key in *CW; returns
 * its node. */
static NmRedis *cond_on_other_node(const char *mname, char **cname, char **cw)
{
    NmRedis *node = NULL;
    NmRedis *mnode = nm_topo_master_of(topo, slot_of_name(mname));
    *cname = *cw = NULL;
    for (int i = 0; !node; i++) {
        char *suffix = g_strdup_printf("c%d", i);
        g_free(*cname);
        g_free(*cw);
        *cname = nm_test_name(suffix);
        *cw = cond_key(*cname, ":cw");
        NmRedis *n = nm_topo_master_of(topo, nm_topo_keyslot(topo, *cw, strlen(*cw)));
        node = n != mnode ? n : NULL;
        g_free(suffix);
    }
    return node;
}

/* A condition whose slot is on another master than its mutex's: every
 * request of a wait goes to the condition's node, the lock's to the
 * mutex's, and signal and broadcast wake the waiters. */
static void test_cond_other_node(void)
{
    netmutex_cond_t c;
    netmutex_t m;
    char *cname, *mname = nm_test_name("m"), *cw;
    NmRedis *node = cond_on_other_node(mname, &cname, &cw);
    configure_cluster(0);
    nm_assert_rc(netmutex_init(&m, mname, NULL), 0);
    nm_assert_rc(netmutex_cond_init(&c, cname, NULL), 0);
    CondWaiter w = { &c, &m };
    NmCall *a = nm_call_start(cond_wait_once, &w);
    g_assert_true(cond_waiters(node, cw, 1));
    NmCall *b = nm_call_start(cond_wait_once, &w);
    g_assert_true(cond_waiters(node, cw, 2));
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_cond_signal(&c), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(nm_call_wait(a, PROMPT_MS), 0); /* FIFO: the first */
    nm_assert_rc(netmutex_cond_broadcast(&c), 0);
    nm_assert_rc(nm_call_wait(b, PROMPT_MS), 0);
    g_assert_cmpint(nm_redis_kind_keys(node, 'c'), ==, 0);
    nm_assert_rc(netmutex_cond_destroy(&c), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    g_free(cw);
    g_free(cname);
    g_free(mname);
}

/* A thread cancelled while it waits on a condition whose keys are on
 * another master than its mutex's: its clean-up handler runs with the
 * mutex held again (the lock from the mutex's node), its registration is
 * gone from the condition's node, and the next waiter gets the next
 * signal. */
static void test_cond_cancel_other_node(void)
{
    if (!nm_cancel_in_poll_is_checkable()) {
        g_test_skip("the sanitizers lose track of a thread cancelled in poll(2)");
        return;
    }
    netmutex_cond_t c;
    netmutex_t m;
    NmCondVictim v;
    char *cname, *mname = nm_test_name("m"), *cw;
    NmRedis *node = cond_on_other_node(mname, &cname, &cw);
    configure_cluster(0);
    nm_assert_rc(netmutex_init(&m, mname, NULL), 0);
    nm_assert_rc(netmutex_cond_init(&c, cname, NULL), 0);
    nm_cond_victim_start(&v, &c, &m);
    g_assert_true(cond_waiters(node, cw, 1));
    nm_cond_victim_cancel(&v, PROMPT_MS);
    nm_assert_rc(v.unlocked, 0); /* the handler held the mutex */
    g_assert_true(cond_waiters(node, cw, 0));

    CondWaiter w = { &c, &m };
    NmCall *a = nm_call_start(cond_wait_once, &w);
    g_assert_true(cond_waiters(node, cw, 1));
    nm_assert_rc(netmutex_cond_signal(&c), 0);
    nm_assert_rc(nm_call_wait(a, PROMPT_MS), 0);
    gint64 end = nmt_now_ms() + PROMPT_MS;
    while (cond_keys_of(node, cw) != 0 && nmt_now_ms() < end)
        nmt_sleep_ms(10);
    g_assert_cmpint(cond_keys_of(node, cw), ==, 0);
    nm_assert_rc(netmutex_cond_destroy(&c), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    g_free(cw);
    g_free(cname);
    g_free(mname);
}

/* Two processes hand a turn to each other through a condition and its
 * mutex (each waits for its turn, then hands it over and signals), for the
 * migration case below: a wake-up lost stalls them both, and any error
 * (EPROTO, a wait that ran out) ends the player. */
typedef struct CondPing {
    int turn, stop;          /* under the mutex */
    long long exchanges;     /* atomic */
    int err[2];              /* each player's first error */
    char what[2][32];
} CondPing;

static CondPing *ping;
static char *ping_cond, *ping_mutex;

static int ping_fail(int me, const char *what, int err)
{
    ping->err[me] = err;
    g_strlcpy(ping->what[me], what, sizeof ping->what[me]);
    return 1;
}

static int ping_player(void *p)
{
    int me = GPOINTER_TO_INT(p), err = 0, stop = 0;
    netmutex_t m;
    netmutex_cond_t c;
    configure_cluster(nm_ms(6000));
    if (netmutex_init(&m, ping_mutex, NULL) || netmutex_cond_init(&c, ping_cond, NULL))
        return ping_fail(me, "init", EINVAL);
    while (!stop) {
        struct timespec deadline;
        if ((err = netmutex_lock(&m)) != 0)
            return ping_fail(me, "lock", err);
        nm_deadline(&deadline, CLOCK_MONOTONIC, nm_ms(20000));
        while (ping->turn != me && !ping->stop && !err)
            err = netmutex_cond_clockwait(&c, &m, CLOCK_MONOTONIC, &deadline);
        if (err) {
            netmutex_unlock(&m);
            return ping_fail(me, "wait", err);
        }
        stop = ping->stop;
        if (!stop) {
            ping->turn = 1 - me;
            __atomic_add_fetch(&ping->exchanges, 1, __ATOMIC_SEQ_CST);
            /* EAGAIN: the slot's keys were split for longer than the I/O
             * timeout; the signal is the caller's to send again. */
            while ((err = netmutex_cond_signal(&c)) == EAGAIN)
                ;
        }
        int uerr = netmutex_unlock(&m);
        if (err || uerr)
            return ping_fail(me, err ? "signal" : "unlock", err ? err : uerr);
    }
    netmutex_cond_destroy(&c);
    netmutex_destroy(&m);
    netmutex_shutdown();
    return 0;
}

static bool ping_reaches(long long n, unsigned int timeout_ms)
{
    gint64 end = nmt_now_ms() + timeout_ms;
    while (__atomic_load_n(&ping->exchanges, __ATOMIC_SEQ_CST) < n && nmt_now_ms() < end &&
           !ping->err[0] && !ping->err[1])
        nmt_sleep_ms(5);
    return __atomic_load_n(&ping->exchanges, __ATOMIC_SEQ_CST) >= n;
}

/* The slot of a condition is migrated, keys moved one by one while they
 * are in use, as two processes wait on it and signal it in turn: the
 * scripts declare every key they touch, so the nodes answer ASK and
 * TRYAGAIN, which are followed and retried -- no EPROTO, no wake-up lost
 * (the two would stall), and the turns go on on the new node. */
static void test_cond_migration(void)
{
    netmutex_t m;
    netmutex_cond_t c;
    pid_t pids[2];
    ping_cond = nm_test_name("mc");
    ping_mutex = nm_test_name("mm");
    char *cw = cond_key(ping_cond, ":cw");
    long long slot = nm_topo_keyslot(topo, cw, strlen(cw));
    for (int i = 0; slot_of_name(ping_mutex) == slot; i++) { /* the mutex elsewhere */
        g_free(ping_mutex);
        ping_mutex = nm_test_name(i % 2 ? "mm2" : "mm3");
    }
    NmRedis *from = nm_topo_master_of(topo, slot), *to = nm_topo_other_master(topo, from);
    ping = mmap(NULL, sizeof *ping, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    g_assert_true(ping != MAP_FAILED);
    memset(ping, 0, sizeof *ping);

    for (int i = 0; i < 2; i++)
        pids[i] = nm_fork_run(ping_player, GINT_TO_POINTER(i));
    g_assert_true(ping_reaches(50, PROMPT_MS));
    start_migration(slot, from, to);
    long long at_start = __atomic_load_n(&ping->exchanges, __ATOMIC_SEQ_CST);
    nmt_sleep_ms(nm_ms(300)); /* the players meet the open slot */
    finish_busy_migration(slot, from, to);
    long long at_end = __atomic_load_n(&ping->exchanges, __ATOMIC_SEQ_CST);
    g_test_message("exchanges: %lld before the migration, %lld during it", at_start,
                   at_end - at_start);
    g_assert_true(ping_reaches(at_end + 50, PROMPT_MS));
    g_assert_cmpint(cond_llen(to, cw), >=, 0);

    configure_cluster(0);
    nm_assert_rc(netmutex_init(&m, ping_mutex, NULL), 0);
    nm_assert_rc(netmutex_cond_init(&c, ping_cond, NULL), 0);
    nm_assert_rc(netmutex_lock(&m), 0);
    ping->stop = 1;
    nm_assert_rc(netmutex_cond_broadcast(&c), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    for (int i = 0; i < 2; i++)
        nm_child_wait_ok(pids[i], PROMPT_MS);
    for (int i = 0; i < 2; i++)
        if (ping->err[i])
            g_error("player %d: %s: %s", i, ping->what[i], netmutex_errname(ping->err[i]));
    g_assert_true(cond_waiters(to, cw, 0));
    /* Nothing of the condition is left, on either node. */
    gint64 until = nmt_now_ms() + PROMPT_MS;
    while ((cond_keys_of(to, cw) != 0 || cond_keys_of(from, cw) != 0) && nmt_now_ms() < until)
        nmt_sleep_ms(10);
    g_assert_cmpint(cond_keys_of(from, cw), ==, 0);
    g_assert_cmpint(cond_keys_of(to, cw), ==, 0);
    nm_assert_rc(netmutex_cond_destroy(&c), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_shutdown(), 0);
    munmap(ping, sizeof *ping);
    g_free(cw);
    g_free(ping_cond);
    g_free(ping_mutex);
}

/* ---- read-write locks ------------------------------------------------------ */

/* The key <prefix>{r<tag>}NAME SUFFIX of rwlock NAME (lib.lua). */
static char *rw_key(const char *name, const char *suffix)
{
    char tag[NM_TEST_TAG_LEN + 1];
    nm_test_key_tag(name, strlen(name), tag);
    return g_strdup_printf("netmutex:{r%s}%s%s", tag, name, suffix);
}

static long long rw_len(NmRedis *node, const char *cmd, const char *key)
{
    redisReply *r = nm_redis_cmd(node, "%s %s", cmd, key);
    long long n = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return n;
}

/* Polls until NODE's KEY (a list or sorted set, CMD its length) holds N. */
static bool rw_wait_len(NmRedis *node, const char *cmd, const char *key, long long n)
{
    gint64 until = nmt_now_ms() + PROMPT_MS;
    while (rw_len(node, cmd, key) != n && nmt_now_ms() < until)
        nmt_sleep_ms(2);
    return rw_len(node, cmd, key) == n;
}

typedef struct RwHold {
    netmutex_rwlock_t *rw;
    int write;
    int got, release; /* atomic */
} RwHold;

static int rw_hold_run(void *p)
{
    RwHold *h = p;
    int err = h->write ? netmutex_rwlock_wrlock(h->rw) : netmutex_rwlock_rdlock(h->rw);
    if (err)
        return err;
    g_atomic_int_set(&h->got, 1);
    gint64 until = nmt_now_ms() + PROMPT_MS;
    while (!g_atomic_int_get(&h->release) && nmt_now_ms() < until)
        nmt_sleep_ms(1);
    return netmutex_rwlock_unlock(h->rw);
}

static bool rw_wait_got(RwHold *h)
{
    gint64 until = nmt_now_ms() + PROMPT_MS;
    while (!g_atomic_int_get(&h->got) && nmt_now_ms() < until)
        nmt_sleep_ms(1);
    return g_atomic_int_get(&h->got);
}

/* Read-write locks on the cluster: every key of one in one slot (its
 * fence floor's too), whatever its name's braces; the readers queued behind
 * a writer get in together at its unlock (each grant pushed to its list on
 * the node by the releaser), a writer queued behind them after them; the
 * holds renewed there past their leases; nothing left on the node. */
static void test_rwlock_cluster(void)
{
    static const char *const brace[] = { "}x", "{a}b", "plain" };
    static const char *const suffixes[] = { ":q", ":w", ":s",
                                            ":g:0123456789abcdef0123456789abcdef" };
    configure_cluster(nm_ms(600));
    for (gsize n = 0; n < G_N_ELEMENTS(brace); n++) {
        char *name = nm_test_name(brace[n]);
        char *k = rw_key(name, ""), *q = rw_key(name, ":q"), *sh = rw_key(name, ":s");
        long long slot = nm_topo_keyslot(topo, k, strlen(k));
        char *floor = g_strdup_printf("netmutex:{%s}fence", nm_slot_tag((unsigned int)slot));
        g_assert_cmpint(nm_topo_keyslot(topo, floor, strlen(floor)), ==, slot);
        for (gsize i = 0; i < G_N_ELEMENTS(suffixes); i++) {
            char *key = rw_key(name, suffixes[i]);
            g_assert_cmpint(nm_topo_keyslot(topo, key, strlen(key)), ==, slot);
            g_free(key);
        }
        NmRedis *node = nm_topo_master_of(topo, slot);
        netmutex_rwlock_t rw;
        nm_assert_rc(netmutex_rwlock_init(&rw, name, NULL), 0);
        RwHold w1 = { .rw = &rw, .write = 1 }, r1 = { .rw = &rw }, r2 = { .rw = &rw };
        RwHold w2 = { .rw = &rw, .write = 1 };
        NmCall *cw1 = nm_call_start(rw_hold_run, &w1);
        g_assert_true(rw_wait_got(&w1));
        NmCall *cr1 = nm_call_start(rw_hold_run, &r1);
        NmCall *cr2 = nm_call_start(rw_hold_run, &r2);
        g_assert_true(rw_wait_len(node, "LLEN", q, 2));
        nmt_sleep_ms(nm_ms(1300)); /* two leases: the writer is renewed there */
        g_assert_false(g_atomic_int_get(&r1.got) || g_atomic_int_get(&r2.got));
        g_atomic_int_set(&w1.release, 1);
        nm_assert_rc(nm_call_wait(cw1, PROMPT_MS), 0);
        g_assert_true(rw_wait_got(&r1) && rw_wait_got(&r2));
        g_assert_cmpint(rw_len(node, "ZCARD", sh), ==, 2);
        NmCall *cw2 = nm_call_start(rw_hold_run, &w2);
        g_assert_true(rw_wait_len(node, "LLEN", q, 1));
        nmt_sleep_ms(nm_ms(1300)); /* the shares are renewed there */
        g_assert_cmpint(rw_len(node, "ZCARD", sh), ==, 2);
        g_assert_false(g_atomic_int_get(&w2.got));
        g_atomic_int_set(&r1.release, 1);
        g_atomic_int_set(&r2.release, 1);
        nm_assert_rc(nm_call_wait(cr1, PROMPT_MS), 0);
        nm_assert_rc(nm_call_wait(cr2, PROMPT_MS), 0);
        g_assert_true(rw_wait_got(&w2));
        g_atomic_int_set(&w2.release, 1);
        nm_assert_rc(nm_call_wait(cw2, PROMPT_MS), 0);
        nm_assert_rc(netmutex_rwlock_destroy(&rw), 0);
        gint64 until = nmt_now_ms() + PROMPT_MS;
        redisReply *left;
        do {
            left = nm_redis_cmd(node, "KEYS netmutex:{r*");
            if (left->elements == 0 || nmt_now_ms() > until)
                break;
            freeReplyObject(left);
            nmt_sleep_ms(20);
        } while (1);
        g_assert_cmpint(left->elements, ==, 0);
        freeReplyObject(left);
        g_free(floor);
        g_free(k);
        g_free(q);
        g_free(sh);
        g_free(name);
    }
    nm_assert_rc(netmutex_shutdown(), 0);
}

/* ---- semaphores ------------------------------------------------------------ */

typedef struct SemHold {
    netmutex_sem_t *s;
    int got, release; /* atomic */
} SemHold;

static int sem_hold_run(void *p)
{
    SemHold *h = p;
    int err = netmutex_sem_wait(h->s);
    if (err)
        return err;
    g_atomic_int_set(&h->got, 1);
    gint64 until = nmt_now_ms() + PROMPT_MS;
    while (!g_atomic_int_get(&h->release) && nmt_now_ms() < until)
        nmt_sleep_ms(1);
    return netmutex_sem_post(h->s);
}

static bool sem_wait_got(SemHold *h)
{
    gint64 until = nmt_now_ms() + PROMPT_MS;
    while (!g_atomic_int_get(&h->got) && nmt_now_ms() < until)
        nmt_sleep_ms(1);
    return g_atomic_int_get(&h->got);
}

/* Semaphores on the cluster: every key of one in one slot, whatever its
 * name's braces; two permits held and renewed there past their leases,
 * two waiters queued there, each served (its grant pushed to its list on
 * the node) when a permit comes back; nothing left on the node. */
static void test_sem_cluster(void)
{
    static const char *const brace[] = { "}x", "{a}b", "plain" };
    static const char *const suffixes[] = { ":q", ":w", ":s",
                                            ":g:0123456789abcdef0123456789abcdef" };
    configure_cluster(nm_ms(600));
    for (gsize n = 0; n < G_N_ELEMENTS(brace); n++) {
        char tag[NM_TEST_TAG_LEN + 1];
        char *name = nm_test_name(brace[n]);
        nm_test_key_tag(name, strlen(name), tag);
        char *k = g_strdup_printf("netmutex:{s%s}%s", tag, name);
        char *q = g_strdup_printf("%s:q", k), *sh = g_strdup_printf("%s:s", k);
        long long slot = nm_topo_keyslot(topo, k, strlen(k));
        char *floor = g_strdup_printf("netmutex:{%s}fence", nm_slot_tag((unsigned int)slot));
        g_assert_cmpint(nm_topo_keyslot(topo, floor, strlen(floor)), ==, slot);
        for (gsize i = 0; i < G_N_ELEMENTS(suffixes); i++) {
            char *key = g_strdup_printf("%s%s", k, suffixes[i]);
            g_assert_cmpint(nm_topo_keyslot(topo, key, strlen(key)), ==, slot);
            g_free(key);
        }
        NmRedis *node = nm_topo_master_of(topo, slot);
        netmutex_sem_t sem;
        int value = -1;
        nm_assert_rc(netmutex_sem_init(&sem, name, 2, NULL), 0);
        SemHold h[4] = { { .s = &sem }, { .s = &sem }, { .s = &sem }, { .s = &sem } };
        NmCall *c[4];
        for (int i = 0; i < 2; i++) {
            c[i] = nm_call_start(sem_hold_run, &h[i]);
            g_assert_true(sem_wait_got(&h[i]));
        }
        for (int i = 2; i < 4; i++) {
            c[i] = nm_call_start(sem_hold_run, &h[i]);
            g_assert_true(rw_wait_len(node, "LLEN", q, i - 1));
        }
        nmt_sleep_ms(nm_ms(1300)); /* two leases: the permits are renewed there */
        g_assert_cmpint(rw_len(node, "ZCARD", sh), ==, 3); /* two permits, the bound */
        g_assert_false(g_atomic_int_get(&h[2].got) || g_atomic_int_get(&h[3].got));
        nm_assert_rc(netmutex_sem_getvalue(&sem, &value), 0);
        g_assert_cmpint(value, ==, 0);
        for (int i = 0; i < 2; i++) {
            g_atomic_int_set(&h[i].release, 1);
            nm_assert_rc(nm_call_wait(c[i], PROMPT_MS), 0);
            g_assert_true(sem_wait_got(&h[i + 2]));
        }
        for (int i = 2; i < 4; i++) {
            g_atomic_int_set(&h[i].release, 1);
            nm_assert_rc(nm_call_wait(c[i], PROMPT_MS), 0);
        }
        nm_assert_rc(netmutex_sem_getvalue(&sem, &value), 0);
        g_assert_cmpint(value, ==, 2);
        nm_assert_rc(netmutex_sem_destroy(&sem), 0);
        gint64 until = nmt_now_ms() + PROMPT_MS;
        redisReply *left;
        do {
            left = nm_redis_cmd(node, "KEYS netmutex:{s*");
            if (left->elements == 0 || nmt_now_ms() > until)
                break;
            freeReplyObject(left);
            nmt_sleep_ms(20);
        } while (1);
        g_assert_cmpint(left->elements, ==, 0);
        freeReplyObject(left);
        g_free(floor);
        g_free(k);
        g_free(q);
        g_free(sh);
        g_free(name);
    }
    nm_assert_rc(netmutex_shutdown(), 0);
}

/* ---- deadlock detection across nodes ------------------------------------- */

typedef struct DlShared {
    char names[2][128];
    int locked;  /* atomic */
    int rc[2];
    int rw;      /* names[0] is a read-write lock: member 0 reads it,
                    member 1 waits to write it (NETMUTEX_DEADLOCK=detect) */
} DlShared;

static DlShared *dl_shared;

/* Name I of a deadlock test: a mutex (ERRORCHECK: with detection), or
 * the read-write lock (names[0] when dl_shared->rw). */
typedef struct DlLock {
    netmutex_t m;
    netmutex_rwlock_t rw;
    int is_rw;
} DlLock;

static int dl_init(DlLock *l, int i)
{
    netmutex_attr_t a;
    l->is_rw = dl_shared->rw && i == 0;
    if (l->is_rw)
        return netmutex_rwlock_init(&l->rw, dl_shared->names[i], NULL);
    netmutex_attr_init(&a);
    netmutex_attr_settype(&a, NETMUTEX_ERRORCHECK);
    return netmutex_init(&l->m, dl_shared->names[i], &a);
}

/* Member WHO takes L: member 0 reads the read-write lock, member 1 writes. */
static int dl_take(DlLock *l, int who)
{
    if (!l->is_rw)
        return netmutex_lock(&l->m);
    return who == 0 ? netmutex_rwlock_rdlock(&l->rw) : netmutex_rwlock_wrlock(&l->rw);
}

static int dl_give(DlLock *l)
{
    return l->is_rw ? netmutex_rwlock_unlock(&l->rw) : netmutex_unlock(&l->m);
}

/* Member I: holds names[I], then waits for names[1 - I]. */
static int dl_member(void *arg)
{
    int i = GPOINTER_TO_INT(arg);
    DlLock own, next;
    if (dl_shared->rw)
        setenv("NETMUTEX_DEADLOCK", "detect", 1);
    configure_cluster(0);
    if (dl_init(&own, i) != 0 || dl_init(&next, 1 - i) != 0 || dl_take(&own, i) != 0)
        return 2;
    __atomic_add_fetch(&dl_shared->locked, 1, __ATOMIC_SEQ_CST);
    gint64 bound = nmt_now_ms() + PROMPT_MS;
    while (__atomic_load_n(&dl_shared->locked, __ATOMIC_SEQ_CST) < 2 && nmt_now_ms() < bound)
        nmt_sleep_ms(5);
    int rc = dl_take(&next, i);
    dl_shared->rc[i] = rc;
    if (rc == 0)
        dl_give(&next);
    else if (rc == EDEADLK && dl_give(&next) != EPERM)
        return 3;
    dl_give(&own);
    netmutex_shutdown();
    return rc == 0 || rc == EDEADLK ? 0 : 4;
}

/* An AB/BA cycle of two processes whose mutexes (or, with RW, a
 * read-write lock and a mutex) are on different masters: the records and
 * holder keys are read and written per key on their own nodes, and
 * exactly one member gets EDEADLK. */
static void test_deadlock_across_nodes(gconstpointer rw)
{
    dl_shared = mmap(NULL, sizeof *dl_shared, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    g_assert_true(dl_shared != MAP_FAILED);
    memset(dl_shared, 0, sizeof *dl_shared);
    dl_shared->rw = rw != NULL;
    char *a = nm_test_name("a");
    g_strlcpy(dl_shared->names[0], a, sizeof dl_shared->names[0]);
    NmRedis *master_a = nm_topo_master_of(topo, slot_of_name(a));
    for (int n = 0; n < 1000; n++) {
        char suffix[16];
        snprintf(suffix, sizeof suffix, "b%d", n);
        char *b = nm_test_name(suffix);
        int apart = nm_topo_master_of(topo, slot_of_name(b)) != master_a;
        g_strlcpy(dl_shared->names[1], b, sizeof dl_shared->names[1]);
        g_free(b);
        if (apart)
            break;
    }
    pid_t p0 = nm_fork_run(dl_member, GINT_TO_POINTER(0));
    pid_t p1 = nm_fork_run(dl_member, GINT_TO_POINTER(1));
    nm_child_wait_ok(p0, nm_ms(60000));
    nm_child_wait_ok(p1, nm_ms(60000));
    g_assert_cmpint((dl_shared->rc[0] == EDEADLK) + (dl_shared->rc[1] == EDEADLK), ==, 1);
    g_assert_cmpint(dl_shared->rc[0] == 0 || dl_shared->rc[1] == 0, ==, 1);
    munmap(dl_shared, sizeof *dl_shared);
    g_free(a);
}

int main(int argc, char **argv)
{
    int rc;

    cli_tool = g_strdup(g_getenv("NETMUTEX_CLI"));
    nm_test_init(&argc, &argv);
    shared = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
                  0);
    g_assert_true(shared != MAP_FAILED);
    topo = nm_topo_start();

    g_test_add_func("/cluster/slot/crc16-known-values", test_crc16_known_values);
    g_test_add_func("/cluster/slot/crc16-matches-cluster-keyslot", test_crc16_matches_server);
    g_test_add_func("/cluster/keys/brace-names-one-slot", test_brace_names_one_slot);
    g_test_add_func("/cluster/lock/cluster-url-handoff-status-break", test_lock_cluster_url);
    g_test_add_func("/cluster/lock/plain-url-detects-cluster", test_plain_url_detects_cluster);
    g_test_add_func("/cluster/config/quorum-with-cluster-einval",
                    test_quorum_with_cluster_refused);
    g_test_add_func("/cluster/acl/without-keyslot-eacces", test_acl_without_keyslot);
    g_test_add_func("/cluster/xproc/counters-on-all-masters", test_counters_all_masters);
    g_test_add_func("/cluster/failover/manual-failover-while-locking",
                    test_failover_while_locking);
    g_test_add_func("/cluster/failover/lost-lease-reported", test_failover_lost_lease_reported);
    g_test_add_func("/cluster/failover/master-killed", test_master_killed);
    g_test_add_func("/cluster/migration/ask-then-moved-held-lock", test_slot_migration);
    g_test_add_func("/cluster/migration/renewal-follows-ask", test_migration_renewal_follows_ask);
    g_test_add_func("/cluster/migration/waiter-waits-no-eproto", test_migration_waiter_waits);
    g_test_add_func("/cluster/migration/release-with-queue-moved",
                    test_migration_release_queue_moved);
    g_test_add_func("/cluster/migration/four-busy-slots", test_migration_four_busy_slots);
    g_test_add_func("/cluster/cli/list-status-break", test_cli);
    g_test_add_func("/cluster/cond/other-node-than-mutex", test_cond_other_node);
    g_test_add_func("/cluster/cond/cancelled-waiter", test_cond_cancel_other_node);
    g_test_add_func("/cluster/cond/migration-waiters-signallers", test_cond_migration);
    g_test_add_func("/cluster/rwlock/readers-writers-one-slot", test_rwlock_cluster);
    g_test_add_func("/cluster/sem/permits-one-slot", test_sem_cluster);
    g_test_add_data_func("/cluster/deadlock/cycle-across-nodes", NULL, test_deadlock_across_nodes);
    g_test_add_data_func("/cluster/deadlock/rwlock-cycle-across-nodes", "rw",
                         test_deadlock_across_nodes);

    rc = g_test_run();
    nm_topo_free(topo);
    munmap(shared, sizeof *shared);
    g_free(cli_tool);
    return rc;
}
