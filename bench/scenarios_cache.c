/*
 * scenarios_cache.c -- nm_bench's lease-caching scenarios: cache_uncontended,
 * cache_revoke and cache_porting (cache_handoff and cache_contended_procs
 * are handoff and contended_procs with caching on).  What each one measures
 * and reports is described at the top of nm_bench.c; the helpers they share
 * with the other scenarios are declared in nm_bench.h.
 */
#include "ac_config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include <netmutex.h>

#include "keytag.h"
#include "nm_bench.h"

#ifndef PORTING_DIR
#define PORTING_DIR "../examples/porting"
#endif

/* Script calls the server has run (EVAL, EVALSHA, FCALL and their _RO
 * forms), from INFO commandstats, or -1. */
static long long script_calls(redisContext *c)
{
    redisReply *r = nmb_admin_cmd(c, "INFO commandstats", 2, (const char *[]){ "INFO", "commandstats" });
    long long total = 0;
    if (!r)
        return -1;
    for (const char *line = r->type == REDIS_REPLY_STRING ? r->str : NULL; line;
         line = strchr(line, '\n')) {
        char cmd[64];
        unsigned long long calls;
        line += *line == '\n';
        if (sscanf(line, "cmdstat_%63[^:]:calls=%llu", cmd, &calls) == 2 &&
            (strncmp(cmd, "eval", 4) == 0 || strncmp(cmd, "fcall", 5) == 0))
            total += (long long)calls;
    }
    freeReplyObject(r);
    return total;
}

/* Does NAME's lock key (default prefix) exist: is its lease held or
 * cached?  -1 if the server could not say. */
static int lock_key_exists(redisContext *c, const char *name)
{
    char key[192], tag[NM_TEST_TAG_LEN + 1];
    nm_test_key_tag(name, strlen(name), tag);
    snprintf(key, sizeof key, "netmutex:{%s}%s", tag, name);
    redisReply *r = nmb_admin_cmd(c, "EXISTS", 2, (const char *[]){ "EXISTS", key });
    int exists = r && r->type == REDIS_REPLY_INTEGER ? r->integer > 0 : -1;
    if (r)
        freeReplyObject(r);
    return exists;
}

/* A process keeps a lease only once it listens for requests for the name,
 * a moment after its first acquisition: lock+unlock until the lease stays.
 * 0, or -1 if it never did within the warm-up time. */
#define CACHE_WARMUP_MS 5000

static int take_cached(netmutex_t *m, const char *name, redisContext *c)
{
    int64_t end = nmb_now_ns() + (int64_t)CACHE_WARMUP_MS * 1000000;
    do {
        if (netmutex_lock(m) != 0 || netmutex_unlock(m) != 0)
            return -1;
        if (lock_key_exists(c, name) == 1)
            return 0;
        nmb_sleep_us(1000);
    } while (nmb_now_ns() < end);
    return -1;
}

static double median_of(double *v, size_t n)
{
    qsort(v, n, sizeof *v, nmb_cmp_double);
    return nmb_percentile(v, n, 0.5);
}

/* ===================================================================== */
/* cache_uncontended                                                      */
/* ===================================================================== */

/* The two sides take turns in this many slices of -d / (2 x ROUNDS) each,
 * so both see the same machine load; the figure is each side's median. */
#define UNC_ROUNDS 10
#define UNC_BATCH 1024               /* cycles between two looks at the clock */

/* The design caching leaves out (docs/design.md, "Lease caching"): a robust mutex
 * could keep EOWNERDEAD exact under caching only if the server learned at
 * every local lock and unlock whether a thread is inside.  The third side
 * measures the least that costs: the cached cycle plus one marker write
 * per lock and one per unlock, each sent at once (a process that dies
 * inside must have told the server) on a connection of its own, with the
 * replies read only once MARK_DEPTH are pending. */
#define MARK_DEPTH 256

typedef struct {
    netmutex_t m;
    pthread_mutex_t pm;
    redisContext *marks;             /* the third side's connection */
    char mark_key[160];
    int marks_pending;
    int err;
    const char *what;
} unc_t;

static int cycle_netmutex(unc_t *u)
{
    int err = netmutex_lock(&u->m);
    if (err) {
        u->what = "netmutex_lock";
        return u->err = err;
    }
    if ((err = netmutex_unlock(&u->m)) != 0) {
        u->what = "netmutex_unlock";
        u->err = err;
    }
    return err;
}

static int cycle_pthread(unc_t *u)
{
    int err = pthread_mutex_lock(&u->pm);
    if (!err)
        err = pthread_mutex_unlock(&u->pm);
    if (err) {
        u->what = "pthread_mutex";
        u->err = err;
    }
    return err;
}

/* Reads the replies to the marker writes sent so far. */
static int marks_drain(unc_t *u)
{
    for (; u->marks_pending > 0; u->marks_pending--) {
        void *r = NULL;
        if (redisGetReply(u->marks, &r) != REDIS_OK)
            return -1;
        freeReplyObject(r);
    }
    return 0;
}

/* Appends SET <mark_key> VALUE and writes it out before returning. */
static int mark_send(unc_t *u, const char *value)
{
    int done = 0;
    if (redisAppendCommand(u->marks, "SET %s %s PX 60000", u->mark_key, value) != REDIS_OK)
        return -1;
    while (!done)
        if (redisBufferWrite(u->marks, &done) != REDIS_OK)
            return -1;
    return ++u->marks_pending < MARK_DEPTH ? 0 : marks_drain(u);
}

static int cycle_marked(unc_t *u)
{
    int err = netmutex_lock(&u->m);
    if (err) {
        u->what = "netmutex_lock";
        return u->err = err;
    }
    int marked = mark_send(u, "in");
    if ((err = netmutex_unlock(&u->m)) != 0) {
        u->what = "netmutex_unlock";
        return u->err = err;
    }
    if (marked != 0 || mark_send(u, "out") != 0) {
        u->what = "marker write";
        return u->err = EIO;
    }
    return 0;
}

/* Cycles of CYCLE for SECONDS; cycles per second, or -1. */
static double run_slice(int (*cycle)(unc_t *), unc_t *u, double seconds)
{
    int64_t t0 = nmb_now_ns(), end = t0 + (int64_t)(seconds * 1e9), t;
    uint64_t n = 0;
    do {
        for (int i = 0; i < UNC_BATCH; i++)
            if (cycle(u) != 0)
                return -1;
        n += UNC_BATCH;
    } while ((t = nmb_now_ns()) < end);
    return (double)n / ((double)(t - t0) / 1e9);
}

static int unc_report(const char *scenario, double *cached, double *plain, double *marked,
                      long long calls, int same_fence)
{
    double per_s = median_of(cached, UNC_ROUNDS), ref = median_of(plain, UNC_ROUNDS);
    double robust = median_of(marked, UNC_ROUNDS);
    jline_t j;
    nmb_j_begin(&j, scenario);
    nmb_j_int(&j, "procs", 1);
    nmb_j_int(&j, "threads", 1);
    nmb_j_num(&j, "duration_s", nmb_opt.duration_s);
    nmb_j_int(&j, "rounds", UNC_ROUNDS);
    nmb_j_num(&j, "ns_per_cycle", 1e9 / per_s);
    nmb_j_num(&j, "pthread_cycles_per_s", ref);
    nmb_j_num(&j, "pthread_ns_per_cycle", 1e9 / ref);
    nmb_j_num(&j, "slowdown_vs_pthread", ref / per_s);
    nmb_j_num(&j, "marked_cycles_per_s", robust);
    nmb_j_num(&j, "marked_ns_per_cycle", 1e9 / robust);
    nmb_j_int(&j, "script_calls", calls);
    nmb_j_bool(&j, "same_fence_throughout", same_fence);
    nmb_j_figure(&j, "cycles_per_s", per_s, 1e6, AT_LEAST);
    nmb_j_end(&j);
    return 0;
}

static int unc_error(const char *scenario, const unc_t *u, const char *fallback)
{
    char msg[96];
    if (!u->err)
        return nmb_report_error(scenario, fallback);
    snprintf(msg, sizeof msg, "%s: %s", u->what, nmb_errname(u->err));
    return nmb_report_error(scenario, msg);
}

/* The rounds, once the lease stays cached. */
static int unc_measure(const char *scenario, const char *name, unc_t *u, redisContext *admin)
{
    double cached[UNC_ROUNDS], plain[UNC_ROUNDS], marked[UNC_ROUNDS];
    double slice = nmb_opt.duration_s / (3.0 * UNC_ROUNDS);
    uint64_t f0 = 0, f1 = 0;
    long long c0, c1;
    if (take_cached(&u->m, name, admin) != 0 || netmutex_lock(&u->m) != 0 ||
        netmutex_fence(&u->m, &f0) != 0 || netmutex_unlock(&u->m) != 0)
        return unc_error(scenario, u, "warm-up failed: the lease did not stay cached");
    c0 = script_calls(admin);
    for (int r = 0; r < UNC_ROUNDS; r++)
        if ((cached[r] = run_slice(cycle_netmutex, u, slice)) < 0 ||
            (plain[r] = run_slice(cycle_pthread, u, slice)) < 0 ||
            (marked[r] = run_slice(cycle_marked, u, slice)) < 0 || marks_drain(u) != 0)
            return unc_error(scenario, u, "a cycle failed");
    c1 = script_calls(admin);
    if (netmutex_lock(&u->m) != 0 || netmutex_fence(&u->m, &f1) != 0 ||
        netmutex_unlock(&u->m) != 0)
        return unc_error(scenario, u, "the last cycle failed");
    return unc_report(scenario, cached, plain, marked, c0 < 0 || c1 < 0 ? -1 : c1 - c0, f0 == f1);
}

/* Its own process, configured as an application would be (caching on by
 * default). */
static int unc_child(void *arg, int index)
{
    const char *scenario = ((const scenario_t *)arg)->name;
    netmutex_config_t cfg = nmb_bench_config(1);
    unc_t u = { .pm = PTHREAD_MUTEX_INITIALIZER };
    char name[128];
    int err, rc;
    (void)index;
    redisContext *admin = nmb_admin_connect();
    if (!admin || !(u.marks = nmb_admin_connect())) {
        if (admin)
            redisFree(admin);
        return nmb_report_error(scenario, "cannot connect to the server for INFO");
    }
    nmb_mutex_name(name, sizeof name, scenario);
    snprintf(u.mark_key, sizeof u.mark_key, "nm_bench:marker:%s", name);
    if ((err = netmutex_configure(&cfg)) != 0 || (err = netmutex_init(&u.m, name, NULL)) != 0) {
        redisFree(admin);
        redisFree(u.marks);
        u.err = err;
        u.what = "netmutex_configure/init";
        return unc_error(scenario, &u, "");
    }
    rc = unc_measure(scenario, name, &u, admin);
    nmb_admin_do(admin, "DEL", 2, (const char *[]){ "DEL", u.mark_key });
    redisFree(u.marks);
    redisFree(admin);
    if ((err = netmutex_destroy(&u.m)) != 0 || (err = netmutex_shutdown()) != 0) {
        u.err = err;
        u.what = "netmutex_destroy/shutdown";
        return rc ? rc : unc_error(scenario, &u, "");
    }
    return rc;
}

/* Runs FN in one child process, which prints the scenario's line itself. */
static int in_child(const scenario_t *sc, crew_fn fn, int64_t limit_ms)
{
    crew_t crew;
    if (nmb_crew_spawn(&crew, 1, fn, (void *)sc) != 0) {
        nmb_crew_kill(&crew);
        return nmb_report_error(sc->name, "fork failed");
    }
    if (nmb_crew_wait(&crew, nmb_now_ns() + limit_ms * 1000000) != 0)
        return crew.failed ? -1 : nmb_report_error(sc->name, "still running after its time limit: killed");
    return 0;
}

int nmb_sc_cache_uncontended(const scenario_t *sc)
{
    fprintf(stderr, "nm_bench: %s: 1 process x 1 thread, lease caching on, %g s\n", sc->name,
            nmb_opt.duration_s);
    return in_child(sc, unc_child, (int64_t)(nmb_opt.duration_s * 1000) + HANG_GRACE_MS);
}

/* ===================================================================== */
/* cache_revoke                                                           */
/* ===================================================================== */

#define REVOKE_MIN_SAMPLES 200
#define REVOKE_CAP (1u << 16)        /* samples kept per process */
#define REVOKE_WAIT_S 10             /* timedlock's deadline: a hang, not a sample */
#define REVOKE_WARMUP_TURNS 5        /* per process: dialing, subscribing */

typedef struct {
    int err;
    char what[32];
    uint32_t n;
    uint32_t not_cached;             /* turns the other had given it back already */
    float us[REVOKE_CAP];            /* timedlock call -> return */
} rside_t;

/* Shared by the two processes and the main one. */
typedef struct {
    int ready, go, stop;             /* atomic */
    int turn;                        /* atomic: whose timedlock is next */
    int64_t end_ns, limit_ns;
    rside_t side[2];
} rboard_t;

static int revoke_fail(rboard_t *b, int me, const char *what, int err)
{
    b->side[me].err = err;
    snprintf(b->side[me].what, sizeof b->side[me].what, "%s", what);
    __atomic_store_n(&b->stop, 1, __ATOMIC_SEQ_CST);
    return -1;
}

/* Enough samples, and the measured period is over (or the hard limit). */
static int revoke_done(rboard_t *b)
{
    int64_t t = nmb_now_ns();
    uint32_t n = b->side[0].n + b->side[1].n;
    return __atomic_load_n(&b->stop, __ATOMIC_SEQ_CST) || t >= b->limit_ns ||
           (t >= b->end_ns && n >= REVOKE_MIN_SAMPLES);
}

/* One turn: the other process holds the lease cached and idle (ADMIN
 * checks that the key is there); our timedlock takes it back.  A turn in
 * the warm-up (FIRST: dialing, loading scripts, subscribing), or one that
 * found the lease already given back, is not a sample. */
static int revoke_turn(rboard_t *b, int me, netmutex_t *m, const char *name,
                       redisContext *admin, int first)
{
    struct timespec deadline;
    rside_t *s = &b->side[me];
    int cached = lock_key_exists(admin, name) == 1;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += REVOKE_WAIT_S;
    int64_t t0 = nmb_now_ns();
    int err = netmutex_timedlock(m, &deadline);
    int64_t t1 = nmb_now_ns();
    if (err)
        return revoke_fail(b, me, "netmutex_timedlock", err);
    if ((err = netmutex_unlock(m)) != 0)          /* cached idle, now ours */
        return revoke_fail(b, me, "netmutex_unlock", err);
    if (!first && !cached)
        s->not_cached++;
    else if (!first && s->n < REVOKE_CAP)
        s->us[s->n++] = (float)(t1 - t0) / 1e3f;
    __atomic_store_n(&b->turn, 1 - me, __ATOMIC_SEQ_CST);
    return 0;
}

static int revoke_loop(rboard_t *b, int me, netmutex_t *m, const char *name,
                       redisContext *admin)
{
    for (int turn = 0; !revoke_done(b); turn++) {
        while (__atomic_load_n(&b->turn, __ATOMIC_SEQ_CST) != me)
            if (revoke_done(b))
                return 0;
            else
                nmb_sleep_us(50);
        if (revoke_turn(b, me, m, name, admin, turn < REVOKE_WARMUP_TURNS) != 0)
            return -1;
    }
    __atomic_store_n(&b->stop, 1, __ATOMIC_SEQ_CST);
    return 0;
}

static int revoke_child(void *arg, int me)
{
    rboard_t *b = arg;
    netmutex_config_t cfg = nmb_bench_config(1);
    netmutex_t m;
    char name[128];
    int err, rc = -1;
    redisContext *admin = nmb_admin_connect();
    nmb_mutex_name(name, sizeof name, "cache_revoke");
    if (!admin || (err = netmutex_configure(&cfg)) != 0 ||
        (err = netmutex_init(&m, name, NULL)) != 0) {
        revoke_fail(b, me, admin ? "netmutex_configure/init" : "admin connection",
                    admin ? err : EIO);
        __atomic_add_fetch(&b->ready, 1, __ATOMIC_SEQ_CST);
        if (admin)
            redisFree(admin);
        return -1;
    }
    __atomic_add_fetch(&b->ready, 1, __ATOMIC_SEQ_CST);
    while (!__atomic_load_n(&b->go, __ATOMIC_ACQUIRE))
        nmb_sleep_us(100);
    rc = revoke_loop(b, me, &m, name, admin);
    redisFree(admin);
    if (((err = netmutex_destroy(&m)) != 0 || (err = netmutex_shutdown()) != 0) && rc == 0)
        rc = revoke_fail(b, me, "netmutex_destroy/shutdown", err);
    return rc;
}

static int revoke_report(const scenario_t *sc, const rboard_t *b, double duration_s)
{
    size_t n = 0;
    double *v = malloc((REVOKE_CAP * 2) * sizeof *v);
    jline_t j;
    if (!v)
        return nmb_report_error(sc->name, "out of memory");
    for (int p = 0; p < 2; p++)
        for (uint32_t i = 0; i < b->side[p].n; i++)
            v[n++] = b->side[p].us[i];
    if (n == 0) {
        free(v);
        return nmb_report_error(sc->name, "no revocation measured");
    }
    qsort(v, n, sizeof *v, nmb_cmp_double);
    nmb_j_begin(&j, sc->name);
    nmb_j_int(&j, "procs", 2);
    nmb_j_num(&j, "duration_s", duration_s);
    nmb_j_int(&j, "samples", (long long)n);
    nmb_j_int(&j, "not_cached_turns", (long long)(b->side[0].not_cached + b->side[1].not_cached));
    nmb_j_num(&j, "revoke_p50_us", nmb_percentile(v, n, 0.50));
    nmb_j_num(&j, "revoke_p90_us", nmb_percentile(v, n, 0.90));
    nmb_j_num(&j, "revoke_max_us", v[n - 1]);
    nmb_j_num(&j, "revoke_p50_rtt", nmb_percentile(v, n, 0.50) / nmb_rtt_us);
    nmb_j_figure(&j, "revoke_p99_ms", nmb_percentile(v, n, 0.99) / 1e3, 2.0, AT_MOST);
    nmb_j_end(&j);
    free(v);
    return 0;
}

static int revoke_error(const scenario_t *sc, const rboard_t *b, const char *fallback)
{
    int err[2] = { b->side[0].err, b->side[1].err };
    const char *what[2] = { b->side[0].what, b->side[1].what };
    return nmb_report_pair_error(sc->name, err, what, fallback);
}

/* Two processes take the lock from each other in turn, each time from the
 * other's idle cache. */
int nmb_sc_cache_revoke(const scenario_t *sc)
{
    crew_t crew;
    int rc;
    rboard_t *b = mmap(NULL, sizeof *b, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (b == MAP_FAILED)
        return nmb_report_error(sc->name, "mmap failed");
    fprintf(stderr, "nm_bench: %s: 2 processes take a cached idle lease from each other, %g s\n",
            sc->name, nmb_opt.duration_s);
    if (nmb_crew_spawn(&crew, 2, revoke_child, b) != 0 || nmb_crew_ready(&crew, &b->ready, 2) != 0) {
        nmb_crew_kill(&crew);
        rc = revoke_error(sc, b, "the workers did not start");
        goto out;
    }
    int64_t start = nmb_now_ns();
    b->end_ns = start + (int64_t)(nmb_opt.duration_s * 1e9);
    b->limit_ns = b->end_ns + (int64_t)HANG_GRACE_MS * 1000000;
    __atomic_store_n(&b->go, 1, __ATOMIC_RELEASE);
    if (nmb_crew_wait(&crew, b->limit_ns + (int64_t)REVOKE_WAIT_S * 1000000000) != 0)
        rc = revoke_error(sc, b, crew.failed ? "a worker failed" : "a lock call hung");
    else
        rc = revoke_report(sc, b, (double)(nmb_now_ns() - start) / 1e9);
out:
    munmap(b, sizeof *b);
    return rc;
}

/* ===================================================================== */
/* cache_porting                                                          */
/* ===================================================================== */

/* examples/porting's counter: plain, and ported by both routes with its
 * stats_lock selected.  Each run is PORT_PROCS processes one after the
 * other (the selected mutex is used by one process at a time), each
 * THREADS x BUMPS bumps of the counter file; the figure is the median of
 * PORT_ROUNDS runs, the kinds taking turns. */
#define PORT_PROCS 2
#define PORT_ROUNDS 3
#define PORT_BUMPS 20000
#define PORT_UNCACHED_DIV 20         /* the uncached run does 1/20 of the bumps */

enum { PORT_PLAIN, PORT_WRAP, PORT_SOURCE, PORT_UNCACHED, PORT_KINDS };
static const char *const port_prog[PORT_KINDS] = { "counter", "counter-wrap",
                                                   "counter-source", "counter-wrap" };
static const char *const port_key[PORT_KINDS] = { "plain", "wrap", "source", "wrap_uncached" };

/* One process of KIND bumping FILE; 0 when it exited 0. */
static int port_process(int kind, const char *file, int threads, long bumps)
{
    char path[512], nthreads[16], nbumps[24];
    int status;
    snprintf(path, sizeof path, "%s/%s", PORTING_DIR, port_prog[kind]);
    snprintf(nthreads, sizeof nthreads, "%d", threads);
    snprintf(nbumps, sizeof nbumps, "%ld", bumps);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == -1)
        return -1;
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0)
            dup2(devnull, STDOUT_FILENO);   /* its summary line is not JSON */
        setenv("NETMUTEX_URL", nmb_server_url, 1);
        setenv("NETMUTEX_MUTEXES", "stats_lock", 1);
        if (kind == PORT_UNCACHED)
            setenv("NETMUTEX_CACHE", "0", 1);
        execl(path, path, file, nthreads, nbumps, (char *)NULL);
        fprintf(stderr, "nm_bench: exec %s: %s\n", path, strerror(errno));
        _exit(127);
    }
    while (waitpid(pid, &status, 0) == -1)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* The counter in FILE (a long at offset 0), or -1. */
static long port_count(const char *file)
{
    long v = 0;
    int fd = open(file, O_RDONLY);
    ssize_t n = fd >= 0 ? pread(fd, &v, sizeof v, 0) : -1;
    if (fd >= 0)
        close(fd);
    return n == (ssize_t)sizeof v ? v : -1;
}

/* One run of KIND: seconds per bump, or -1 (the count must be exact). */
static double port_run(int kind, const char *dir, int threads, long bumps)
{
    char file[256];
    snprintf(file, sizeof file, "%s/count-%s", dir, port_key[kind]);
    unlink(file);
    int64_t t0 = nmb_now_ns();
    for (int p = 0; p < PORT_PROCS; p++)
        if (port_process(kind, file, threads, bumps) != 0)
            return -1;
    double s = (double)(nmb_now_ns() - t0) / 1e9;
    long want = (long)PORT_PROCS * threads * bumps, got = port_count(file);
    unlink(file);
    if (got != want) {
        nmb_complain("cache_porting: %s counted %ld, want %ld", port_key[kind], got, want);
        return -1;
    }
    return s / (double)want;
}

static int port_report(const scenario_t *sc, int threads, double per_bump[PORT_KINDS][PORT_ROUNDS])
{
    double med[PORT_KINDS];
    char key[64];
    jline_t j;
    for (int k = 0; k < PORT_KINDS; k++)
        med[k] = median_of(per_bump[k], k == PORT_UNCACHED ? 1 : PORT_ROUNDS);
    nmb_j_begin(&j, sc->name);
    nmb_j_int(&j, "procs_in_turn", PORT_PROCS);
    nmb_j_int(&j, "threads", threads);
    nmb_j_int(&j, "bumps_per_thread", PORT_BUMPS);
    nmb_j_int(&j, "rounds", PORT_ROUNDS);
    for (int k = 0; k < PORT_KINDS; k++) {
        snprintf(key, sizeof key, "%s_us_per_bump", port_key[k]);
        nmb_j_num(&j, key, med[k] * 1e6);
    }
    nmb_j_num(&j, "source_time_ratio", med[PORT_SOURCE] / med[PORT_PLAIN]);
    nmb_j_num(&j, "uncached_time_ratio", med[PORT_UNCACHED] / med[PORT_PLAIN]);
    nmb_j_figure(&j, "time_ratio", med[PORT_WRAP] / med[PORT_PLAIN], 2.0, AT_MOST);
    nmb_j_end(&j);
    return 0;
}

static int port_measure(const scenario_t *sc, const char *dir)
{
    int threads = sc->load.threads;
    double per_bump[PORT_KINDS][PORT_ROUNDS];
    for (int r = 0; r < PORT_ROUNDS; r++)
        for (int k = 0; k < PORT_UNCACHED; k++)
            if ((per_bump[k][r] = port_run(k, dir, threads, PORT_BUMPS)) < 0)
                return nmb_report_error(sc->name, "a counter run failed (see stderr)");
    /* Two round trips a bump: a shorter run says as much. */
    per_bump[PORT_UNCACHED][0] = port_run(PORT_UNCACHED, dir, threads,
                                          PORT_BUMPS / PORT_UNCACHED_DIV);
    if (per_bump[PORT_UNCACHED][0] < 0)
        return nmb_report_error(sc->name, "the uncached counter run failed (see stderr)");
    return port_report(sc, threads, per_bump);
}

int nmb_sc_cache_porting(const scenario_t *sc)
{
    char path[512], dir[128];
    const char *tmp = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/counter-wrap", PORTING_DIR);
    if (access(path, X_OK) != 0) {
        nmb_complain("%s: %s", path, strerror(errno));
        return nmb_report_error(sc->name, "no ported counter: build examples/ first");
    }
    snprintf(dir, sizeof dir, "%s/nm_bench_porting.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return nmb_report_error(sc->name, "mkdtemp failed");
    fprintf(stderr, "nm_bench: %s: examples/porting/counter, plain and ported, %d processes "
            "in turn x %d threads x %d bumps\n", sc->name, PORT_PROCS, sc->load.threads, PORT_BUMPS);
    int rc = port_measure(sc, dir);
    rmdir(dir);
    return rc;
}
