/*
 * scenarios_cluster.c -- cluster_names: many names on a Redis Cluster.
 *
 * nm_bench starts a cluster of its own for it: 3 masters (no replicas: the
 * figure is throughput, not failover) on 127.0.0.1, each with a third of the
 * slots, joined with CLUSTER MEET.  P processes x T threads (default 4 x 2,
 * -p/-t) lock and unlock names picked at random among N (default 96, -n)
 * for -d seconds; every process dials every master.  "acq_per_s" in total,
 * "acq_per_s_per_master" and "names_per_master" (which master serves each
 * name, by CLUSTER KEYSLOT of its lock key) say how evenly the names and
 * the work spread.  Lease caching is off.  Not available with -u (the
 * cluster must be ours).
 */
#include "ac_config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <hiredis/hiredis.h>

#include <netmutex.h>

#include "keytag.h"
#include "nm_bench.h"
#include "redis_server.h"

#define MASTERS 3
#define MAX_NAMES 4096

/* Each node in a directory of its own (redis_server.h), removed with it. */
static rs_server_t node[MASTERS];
static int node_port[MASTERS];

static redisReply *node_cmd(int i, const char *fmt, ...)
{
    struct timeval tv = { 2, 0 };
    redisContext *c = redisConnectWithTimeout("127.0.0.1", node_port[i], tv);
    redisReply *r = NULL;
    if (c && !c->err) {
        va_list ap;
        va_start(ap, fmt);
        r = redisvCommand(c, fmt, ap);
        va_end(ap);
    }
    if (c)
        redisFree(c);
    return r;
}

/* Whether node I answers FMT with a reply containing WANT (NULL: any
 * non-error reply). */
static int node_says(int i, const char *want, const char *fmt)
{
    redisReply *r = node_cmd(i, fmt);
    int ok = r && r->type != REDIS_REPLY_ERROR &&
             (!want || (r->type == REDIS_REPLY_STRING && strstr(r->str, want)) ||
              (r->type == REDIS_REPLY_STATUS && strstr(r->str, want)));
    if (r)
        freeReplyObject(r);
    return ok;
}

static void stop_nodes(void)
{
    for (int i = 0; i < MASTERS; i++)
        rs_destroy(&node[i]);
}

static int spawn_node(int i)
{
    static const char *const cluster[] = { "--cluster-enabled", "yes", "--cluster-config-file",
                                           "nodes.conf", NULL };
    rs_opts_t o = { .port = RS_PICK_PORT, .extra = cluster, .ready_ms = READY_TIMEOUT_MS };
    int err = rs_make_dir(&node[i], "nm_bench_cluster");

    if (err == 0 && (err = rs_start(&node[i], &o)) == ECHILD)
        rs_print_log(&node[i]);
    if (err) {
        nmb_complain("cluster node %d did not start: %s", i, strerror(err));
        return -1;
    }
    node_port[i] = node[i].port;
    return 0;
}

/* Three masters, a third of the slots each, all saying cluster_state:ok. */
static int start_cluster(void)
{
    for (int i = 0; i < MASTERS; i++)
        if (spawn_node(i) != 0)
            return -1;
    for (int i = 0; i < MASTERS; i++) {
        char cmd[96];
        snprintf(cmd, sizeof cmd, "CLUSTER ADDSLOTSRANGE %d %d", i * 16384 / MASTERS,
                 (i + 1) * 16384 / MASTERS - 1);
        if (!node_says(i, NULL, cmd))
            return -1;
        snprintf(cmd, sizeof cmd, "CLUSTER MEET 127.0.0.1 %d", node_port[0]);
        if (i > 0 && !node_says(i, NULL, cmd))
            return -1;
    }
    for (int waited = 0; waited < READY_TIMEOUT_MS; waited += 50) {
        int ok = 0;
        for (int i = 0; i < MASTERS; i++)
            ok += node_says(i, "cluster_state:ok", "CLUSTER INFO");
        if (ok == MASTERS)
            return 0;
        nmb_sleep_us(50000);
    }
    nmb_complain("the cluster did not reach cluster_state:ok");
    return -1;
}

/* ---- the load ---------------------------------------------------------- */

typedef struct {
    int ready, go, failed;   /* atomic */
    int64_t end_ns;
    uint64_t count[MAX_NAMES];
    char first_error[128];
} cboard_t;

typedef struct {
    cboard_t *b;
    char (*names)[96];
    int n;
    char url[512];
    unsigned int seed;
} cjob_t;

static void *cl_thread(void *p)
{
    cjob_t *job = p;
    cboard_t *b = job->b;
    unsigned int seed = __atomic_add_fetch(&job->seed, 7919, __ATOMIC_RELAXED);
    netmutex_t *m = calloc((size_t)job->n, sizeof *m);
    int err = m ? 0 : ENOMEM;
    for (int i = 0; !err && i < job->n; i++) /* warm-up: every node dialed */
        if (!(err = netmutex_init(&m[i], job->names[i], NULL)) && !(err = netmutex_lock(&m[i])))
            err = netmutex_unlock(&m[i]);
    __atomic_add_fetch(&b->ready, 1, __ATOMIC_SEQ_CST);
    while (!err && !__atomic_load_n(&b->go, __ATOMIC_ACQUIRE))
        nmb_sleep_us(1000);
    while (!err && nmb_now_ns() < b->end_ns) {
        int i = (int)(rand_r(&seed) % (unsigned int)job->n);
        if (!(err = netmutex_lock(&m[i])) && !(err = netmutex_unlock(&m[i])) &&
            nmb_now_ns() < b->end_ns)
            __atomic_add_fetch(&b->count[i], 1, __ATOMIC_RELAXED);
    }
    if (err && !__atomic_exchange_n(&b->failed, 1, __ATOMIC_SEQ_CST))
        snprintf(b->first_error, sizeof b->first_error, "%s", nmb_errname(err));
    for (int i = 0; m && i < job->n; i++)
        netmutex_destroy(&m[i]);
    free(m);
    return NULL;
}

static int cl_child(void *arg, int index)
{
    cjob_t *job = arg;
    /* The network path, as the scenarios before the cache ones measure. */
    netmutex_config_t cfg = { .url = job->url, .cache_idle_ms = NETMUTEX_CACHE_OFF };
    long threads = nmb_opt_or(nmb_opt.threads, 2);
    pthread_t t[64];
    job->seed += (unsigned int)index * 104729u;
    if (netmutex_configure(&cfg) != 0)
        return 1;
    for (long i = 0; i < threads && i < 64; i++)
        pthread_create(&t[i], NULL, cl_thread, job);
    for (long i = 0; i < threads && i < 64; i++)
        pthread_join(t[i], NULL);
    netmutex_shutdown();
    return 0;
}

/* Which master serves NAME: CLUSTER KEYSLOT of its lock key. */
static int master_of(const char *name)
{
    char tag[NM_TEST_TAG_LEN + 1], key[160];
    nm_test_key_tag(name, strlen(name), tag);
    snprintf(key, sizeof key, "netmutex:{%s}%s", tag, name);
    redisReply *r = node_cmd(0, "CLUSTER KEYSLOT %s", key);
    long long slot = r && r->type == REDIS_REPLY_INTEGER ? r->integer : 0;
    if (r)
        freeReplyObject(r);
    return (int)(slot * MASTERS / 16384);
}

static void report(const scenario_t *sc, const cjob_t *job, long procs, long threads)
{
    uint64_t per[MASTERS] = { 0 }, total = 0;
    int names_per[MASTERS] = { 0 };
    jline_t j;
    for (int i = 0; i < job->n; i++) {
        int m = master_of(job->names[i]);
        per[m] += job->b->count[i];
        names_per[m]++;
        total += job->b->count[i];
    }
    nmb_j_begin(&j, sc->name);
    nmb_j_int(&j, "procs", procs);
    nmb_j_int(&j, "threads", threads);
    nmb_j_int(&j, "names", job->n);
    nmb_j_int(&j, "masters", MASTERS);
    nmb_j_num(&j, "duration_s", nmb_opt.duration_s);
    nmb_j_int(&j, "acquisitions", (long long)total);
    nmb_j_num(&j, "acq_per_s", (double)total / nmb_opt.duration_s);
    nmb_j_raw(&j, ",\"acq_per_s_per_master\":[%.1f,%.1f,%.1f]", (double)per[0] / nmb_opt.duration_s,
          (double)per[1] / nmb_opt.duration_s, (double)per[2] / nmb_opt.duration_s);
    nmb_j_raw(&j, ",\"names_per_master\":[%d,%d,%d]", names_per[0], names_per[1], names_per[2]);
    nmb_j_end(&j);
}

static int run_cluster_load(const scenario_t *sc, cjob_t *job)
{
    long procs = nmb_opt_or(nmb_opt.procs, 4), threads = nmb_opt_or(nmb_opt.threads, 2);
    crew_t crew;
    if (nmb_crew_spawn(&crew, (int)procs, cl_child, job) != 0) {
        nmb_crew_kill(&crew);
        return nmb_report_error(sc->name, "fork failed");
    }
    int64_t ready_by = nmb_now_ns() + (int64_t)READY_TIMEOUT_MS * 1000000;
    while (__atomic_load_n(&job->b->ready, __ATOMIC_SEQ_CST) < procs * threads &&
           nmb_now_ns() < ready_by && !job->b->failed)
        nmb_sleep_us(2000);
    job->b->end_ns = nmb_now_ns() + (int64_t)(nmb_opt.duration_s * 1e9);
    __atomic_store_n(&job->b->go, 1, __ATOMIC_RELEASE);
    int err = nmb_crew_wait(&crew, job->b->end_ns + (int64_t)HANG_GRACE_MS * 1000000);
    if (job->b->failed)
        return nmb_report_error(sc->name, job->b->first_error);
    if (err)
        return nmb_report_error(sc->name, "a worker failed or hung");
    report(sc, job, procs, threads);
    return 0;
}

int nmb_sc_cluster_names(const scenario_t *sc)
{
    static char names[MAX_NAMES][96];
    cjob_t job = { .n = (int)nmb_opt_or(nmb_opt.n_locks, 96), .names = names };
    int rc;
    if (nmb_opt.url)
        return nmb_report_error(sc->name, "needs its own cluster: not with -u");
    if (job.n > MAX_NAMES)
        job.n = MAX_NAMES;
    job.b = mmap(NULL, sizeof *job.b, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (job.b == MAP_FAILED)
        return nmb_report_error(sc->name, "mmap failed");
    memset(job.b, 0, sizeof *job.b);
    for (int i = 0; i < job.n; i++) {
        char what[32];
        snprintf(what, sizeof what, "cluster/%d", i);
        nmb_mutex_name(names[i], sizeof names[i], what);
    }
    if (start_cluster() != 0) {
        rc = nmb_report_error(sc->name, "could not start the cluster");
    } else {
        snprintf(job.url, sizeof job.url, "redis-cluster://127.0.0.1:%d,127.0.0.1:%d",
                 node_port[0], node_port[1]);
        rc = run_cluster_load(sc, &job);
    }
    stop_nodes();
    munmap(job.b, sizeof *job.b);
    return rc;
}
