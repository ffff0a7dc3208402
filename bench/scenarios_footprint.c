/*
 * scenarios_footprint.c -- nm_bench's server-footprint scenarios:
 * server_cpu, handoff (and cache_handoff, the same with lease caching on)
 * and residue.  What each one measures and reports is
 * described at the top of nm_bench.c; the helpers they share with the
 * other scenarios are declared in nm_bench.h.
 */
#include "ac_config.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include <netmutex.h>

#include "nm_bench.h"

/* ===================================================================== */
/* what the server says about itself                                      */
/* ===================================================================== */

#define MAX_CMDSTATS 256

typedef struct {
    char name[48];
    unsigned long long calls;
} cmdcount_t;

/* The server's CPU time and command counters at one moment. */
typedef struct {
    double cpu_s;            /* used_cpu_user + used_cpu_sys */
    int main_thread;         /* ... of the main thread alone (Redis >= 7) */
    int ncmds;
    cmdcount_t cmds[MAX_CMDSTATS];
} server_snap_t;

/* The main thread's CPU time where the server reports it (bench_redis.c,
 * nmb_server_cpu_s). */
static int read_cpu(redisContext *c, server_snap_t *s)
{
    s->cpu_s = nmb_server_cpu_s(c, &s->main_thread);
    return isnan(s->cpu_s) ? -1 : 0;
}

/* Lines look like "cmdstat_evalsha:calls=12,usec=...".  Commands run
 * inside a script are counted too, so this is the server's real work. */
static int read_calls(redisContext *c, server_snap_t *s)
{
    redisReply *r = nmb_info(c, "commandstats");
    if (!r)
        return -1;
    s->ncmds = 0;
    for (const char *line = r->str; line && s->ncmds < MAX_CMDSTATS; line = strchr(line, '\n')) {
        cmdcount_t *cc = &s->cmds[s->ncmds];
        line += *line == '\n';
        if (sscanf(line, "cmdstat_%47[^:]:calls=%llu", cc->name, &cc->calls) == 2)
            s->ncmds++;
    }
    freeReplyObject(r);
    return 0;
}

/* Before a measured period the CPU is read last, after it first: the
 * INFO commandstats calls stay outside the CPU window. */
static int snap_before(redisContext *c, server_snap_t *s)
{
    return read_calls(c, s) == 0 && read_cpu(c, s) == 0 ? 0 : -1;
}

static int snap_after(redisContext *c, server_snap_t *s)
{
    return read_cpu(c, s) == 0 && read_calls(c, s) == 0 ? 0 : -1;
}

static unsigned long long calls_of(const server_snap_t *s, const char *name)
{
    for (int i = 0; i < s->ncmds; i++)
        if (strcmp(s->cmds[i].name, name) == 0)
            return s->cmds[i].calls;
    return 0;
}

/* The INFO calls of the snapshots are the bench's, not the lock's. */
static int counts_for_cycle(const char *name)
{
    return strcmp(name, "info") != 0;
}

/* A name Redis gave, safe inside a JSON string without escaping. */
static int plain_name(const char *s)
{
    for (; *s; s++)
        if (*s == '"' || *s == '\\' || (unsigned char)*s < 0x20)
            return 0;
    return 1;
}

/* ===================================================================== */
/* server_cpu                                                             */
/* ===================================================================== */

/* The two sides take turns in chunks of this length, in the order ABBA
 * ABBA...: on a shared machine the cost of a request drifts with the load
 * of the moment, and turns this short let both sides see the same load
 * (a linear drift cancels out exactly). */
#define CPU_CHUNK_MS 200
#define CPU_STALL_MS 10000           /* a worker that does not answer */

/* What one side's cycles cost the server, summed over its chunks. */
typedef struct {
    double cpu_s, duration_s;
    uint64_t cycles;
    int main_thread;
    int ncmds;
    cmdcount_t cmds[MAX_CMDSTATS];   /* commands run, but INFO */
} cpu_side_t;

static void side_count(cpu_side_t *s, const char *name, unsigned long long n)
{
    int i = 0;
    while (i < s->ncmds && strcmp(s->cmds[i].name, name) != 0)
        i++;
    if (i == s->ncmds) {
        if (s->ncmds == MAX_CMDSTATS)
            return;
        snprintf(s->cmds[s->ncmds++].name, sizeof s->cmds[0].name, "%s", name);
    }
    s->cmds[i].calls += n;
}

/* Adds one chunk: the server's counters at its start (A) and end (B). */
static void side_add(cpu_side_t *s, const server_snap_t *a, const server_snap_t *b,
                     uint64_t cycles, double seconds)
{
    s->cpu_s += b->cpu_s - a->cpu_s;
    s->duration_s += seconds;
    s->cycles += cycles;
    s->main_thread = b->main_thread;
    for (int i = 0; i < b->ncmds; i++) {
        unsigned long long n = b->cmds[i].calls - calls_of(a, b->cmds[i].name);
        if (n && counts_for_cycle(b->cmds[i].name))
            side_count(s, b->cmds[i].name, n);
    }
}

static double cpu_us_per_cycle(const cpu_side_t *s)
{
    return s->cpu_s * 1e6 / (double)s->cycles;
}

static double calls_per_cycle(const cpu_side_t *s)
{
    unsigned long long total = 0;
    for (int i = 0; i < s->ncmds; i++)
        total += s->cmds[i].calls;
    return (double)total / (double)s->cycles;
}

/* "KEY": {"evalsha": 2, "get": 1, ...}: commands per cycle, by name. */
static void j_calls_per_cycle(jline_t *j, const char *key, const cpu_side_t *s)
{
    int first = 1;
    nmb_j_key(j, key);
    nmb_j_raw(j, "{");
    for (int i = 0; i < s->ncmds; i++) {
        if (!plain_name(s->cmds[i].name))
            continue;
        nmb_j_raw(j, "%s\"%s\":%.4g", first ? "" : ",", s->cmds[i].name,
              (double)s->cmds[i].calls / (double)s->cycles);
        first = 0;
    }
    nmb_j_raw(j, "}");
}

/* ---- the netmutex side: a worker process the main one starts and stops - */

enum { CPU_PAUSE, CPU_RUN, CPU_EXIT };

typedef struct {
    int ready;               /* atomic: warmed up (or failed) */
    int cmd;                 /* atomic, set by the main process: CPU_* */
    int running;             /* atomic, set by the worker: inside a chunk */
    uint64_t cycles;         /* atomic: lock+unlock cycles completed */
    int err;
    char what[32];
} cpu_board_t;

static int cpu_fail(cpu_board_t *b, const char *what, int err)
{
    b->err = err;
    snprintf(b->what, sizeof b->what, "%s", what);
    return -1;
}

static int cpu_cycle(cpu_board_t *b, netmutex_t *m)
{
    int err;
    if ((err = netmutex_lock(m)) != 0)
        return cpu_fail(b, "netmutex_lock", err);
    if ((err = netmutex_unlock(m)) != 0)
        return cpu_fail(b, "netmutex_unlock", err);
    return 0;
}

/* Cycles while the main process says CPU_RUN.  "running" drops to 0 only
 * between cycles, so a chunk's end snapshot sees no request in flight. */
static int cpu_worker_loop(cpu_board_t *b, netmutex_t *m)
{
    int rc = cpu_cycle(b, m);       /* warm-up: dials Redis, loads the scripts */
    __atomic_store_n(&b->ready, 1, __ATOMIC_SEQ_CST);
    while (rc == 0) {
        int cmd = __atomic_load_n(&b->cmd, __ATOMIC_SEQ_CST);
        if (cmd == CPU_EXIT)
            break;
        __atomic_store_n(&b->running, cmd == CPU_RUN, __ATOMIC_SEQ_CST);
        if (cmd != CPU_RUN) {
            nmb_sleep_us(200);
            continue;
        }
        if ((rc = cpu_cycle(b, m)) == 0)
            __atomic_add_fetch(&b->cycles, 1, __ATOMIC_SEQ_CST);
    }
    __atomic_store_n(&b->running, 0, __ATOMIC_SEQ_CST);
    return rc;
}

static int cpu_worker(void *arg, int index)
{
    cpu_board_t *b = arg;
    netmutex_config_t cfg = nmb_bench_config(0);
    netmutex_t m;
    char name[128];
    int err;
    (void)index;
    nmb_mutex_name(name, sizeof name, "server_cpu");
    if ((err = netmutex_configure(&cfg)) != 0 || (err = netmutex_init(&m, name, NULL)) != 0) {
        cpu_fail(b, "netmutex_configure/init", err);
        __atomic_store_n(&b->ready, 1, __ATOMIC_SEQ_CST);
        return -1;
    }
    int rc = cpu_worker_loop(b, &m);
    if ((err = netmutex_destroy(&m)) != 0 || (err = netmutex_shutdown()) != 0)
        rc = rc ? rc : cpu_fail(b, "netmutex_destroy/shutdown", err);
    return rc;
}

/* ---- the reference: the commands a plain SET-NX lock sends ------------- */

/* Written for this bench: acquire is SET NX PX the lease, release deletes
 * the key only while it holds our value (GET, compare, DEL). */
static const char REF_ACQUIRE[] =
    "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end return 0";
static const char REF_RELEASE[] =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";
#define REF_LEASE_MS "30000"         /* netmutex's default lease */

typedef struct {
    redisContext *c;
    char acquire[41], release[41];   /* SHA1s, from SCRIPT LOAD */
    char key[160];
    uint64_t rng;
} ref_lock_t;

/* Scripts are called by EVALSHA, as netmutex calls its own, so that both
 * sides pay for a script lookup and neither for hashing a script body. */
static int ref_script(redisContext *c, const char *body, char sha[41])
{
    redisReply *r = nmb_admin_cmd(c, "SCRIPT LOAD", 3, (const char *[]){ "SCRIPT", "LOAD", body });
    if (!r)
        return -1;
    int ok = r->type == REDIS_REPLY_STRING && r->len == 40;
    if (ok)
        memcpy(sha, r->str, 41);
    else
        nmb_complain("SCRIPT LOAD: unexpected reply");
    freeReplyObject(r);
    return ok ? 0 : -1;
}

/* One script call whose reply must be the integer 1 (ours, or deleted). */
static int ref_call(ref_lock_t *l, const char *sha, const char *token, const char *lease)
{
    const char *argv[] = { "EVALSHA", sha, "1", l->key, token, lease };
    redisReply *r = nmb_admin_cmd(l->c, "EVALSHA", lease ? 6 : 5, argv);
    if (!r)
        return -1;
    int ok = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    if (!ok)
        nmb_complain("reference lock: the script did not return 1");
    freeReplyObject(r);
    return ok ? 0 : -1;
}

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* A fresh 32-hex-digit value per acquisition, the size of netmutex's
 * tokens, so both sides store and compare the same number of bytes. */
static int ref_cycle(ref_lock_t *l)
{
    char token[33];
    unsigned long long hi = xorshift(&l->rng), lo = xorshift(&l->rng);
    snprintf(token, sizeof token, "%016llx%016llx", hi, lo);
    if (ref_call(l, l->acquire, token, REF_LEASE_MS) != 0)
        return -1;
    return ref_call(l, l->release, token, NULL);
}

/* On a connection of the bench's own, from the main process: nothing but
 * the two script calls per cycle reach the server.  Warmed up: the
 * scripts loaded and one cycle run. */
static int ref_open(ref_lock_t *l, const char *scenario)
{
    char name[128];
    memset(l, 0, sizeof *l);
    l->rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)nmb_now_ns();
    nmb_mutex_name(name, sizeof name, scenario);
    snprintf(l->key, sizeof l->key, "nm_bench_reference:{%s}", name);
    if (!(l->c = nmb_admin_connect()))
        return -1;
    if (ref_script(l->c, REF_ACQUIRE, l->acquire) == 0 &&
        ref_script(l->c, REF_RELEASE, l->release) == 0 && ref_cycle(l) == 0)
        return 0;
    redisFree(l->c);
    l->c = NULL;
    return -1;
}

/* The reference's uncontended rate: its cycles per second over SECONDS,
 * on a connection of its own, as the client of any SET-NX lock would run
 * it (not pinned); -1 if it failed.  For uncontended's comparison. */
double nmb_reference_cycles_per_s(const char *scenario, double seconds)
{
    ref_lock_t l;
    uint64_t n = 0;
    int64_t t0, end, t;
    if (ref_open(&l, scenario) != 0)
        return -1;
    t0 = nmb_now_ns();
    end = t0 + (int64_t)(seconds * 1e9);
    do {
        if (ref_cycle(&l) != 0) {
            redisFree(l.c);
            return -1;
        }
        n++;
    } while ((t = nmb_now_ns()) < end);
    redisFree(l.c);
    return (double)n / ((double)(t - t0) / 1e9);
}

/* ---- one CPU for the server and the clients ------------------------------ */

/* With the server and its client on different cores, every request also
 * pays a cross-core wake-up and an exit from idle, which vary with where
 * the scheduler put them: on this 2-core machine the server's CPU per
 * cycle varied up to 4x from one 200 ms chunk to the next, and the ratio
 * from one run to the next.  On one core, repeated runs agree within a
 * few per cent.  So when the server is ours, its main thread (the one
 * measured) and the bench's processes share one CPU for this scenario,
 * and get their old masks back afterwards. */
typedef struct {
    int cpu;                 /* -1: nothing pinned */
    pid_t server;
    cpu_set_t server_mask, own_mask;
} pin_t;

static void pin_one_cpu(pin_t *p)
{
    cpu_set_t one;
    p->cpu = -1;
    p->server = nmb_private_server_pid();
    if (p->server <= 0 || sched_getaffinity(0, sizeof p->own_mask, &p->own_mask) != 0 ||
        sched_getaffinity(p->server, sizeof p->server_mask, &p->server_mask) != 0)
        return;
    int cpu = 0;
    while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &p->own_mask))
        cpu++;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(p->server, sizeof one, &one) != 0)
        return;
    if (sched_setaffinity(0, sizeof one, &one) != 0) {
        sched_setaffinity(p->server, sizeof p->server_mask, &p->server_mask);
        return;
    }
    p->cpu = cpu;
}

static void unpin(const pin_t *p)
{
    if (p->cpu < 0)
        return;
    sched_setaffinity(p->server, sizeof p->server_mask, &p->server_mask);
    sched_setaffinity(0, sizeof p->own_mask, &p->own_mask);
}

/* ---- taking turns -------------------------------------------------------- */

typedef struct {
    redisContext *admin;     /* INFO */
    ref_lock_t ref;
    cpu_board_t *board;      /* shared with the netmutex worker */
    crew_t crew;
    server_snap_t a, b;      /* a chunk's start and end */
    cpu_side_t nm, rf;       /* netmutex's side, the reference's */
    pin_t pin;
    char error[96];
} cpu_run_t;

/* Until the worker's "running" is WANT; -1 if it died, failed or stalled. */
static int await_worker(cpu_run_t *x, int want)
{
    int64_t deadline = nmb_now_ns() + (int64_t)CPU_STALL_MS * 1000000;
    while (__atomic_load_n(&x->board->running, __ATOMIC_SEQ_CST) != want) {
        if (x->board->err || nmb_crew_reap(&x->crew) == 0 || nmb_now_ns() > deadline) {
            snprintf(x->error, sizeof x->error, "the netmutex worker %s",
                     x->board->err ? "failed" : "stopped answering");
            return -1;
        }
        nmb_sleep_us(50);
    }
    return 0;
}

static int chunk_netmutex(cpu_run_t *x)
{
    uint64_t c0 = __atomic_load_n(&x->board->cycles, __ATOMIC_SEQ_CST);
    if (snap_before(x->admin, &x->a) != 0)
        return -1;
    int64_t t0 = nmb_now_ns();
    __atomic_store_n(&x->board->cmd, CPU_RUN, __ATOMIC_SEQ_CST);
    if (await_worker(x, 1) != 0)
        return -1;
    nmb_sleep_us(CPU_CHUNK_MS * 1000L);
    __atomic_store_n(&x->board->cmd, CPU_PAUSE, __ATOMIC_SEQ_CST);
    if (await_worker(x, 0) != 0)
        return -1;
    int64_t t1 = nmb_now_ns();
    if (snap_after(x->admin, &x->b) != 0)
        return -1;
    uint64_t c1 = __atomic_load_n(&x->board->cycles, __ATOMIC_SEQ_CST);
    side_add(&x->nm, &x->a, &x->b, c1 - c0, (double)(t1 - t0) / 1e9);
    return 0;
}

static int chunk_reference(cpu_run_t *x)
{
    uint64_t cycles = 0;
    if (snap_before(x->admin, &x->a) != 0)
        return -1;
    int64_t t0 = nmb_now_ns(), end = t0 + (int64_t)CPU_CHUNK_MS * 1000000, t1;
    while ((t1 = nmb_now_ns()) < end) {
        if (ref_cycle(&x->ref) != 0) {
            snprintf(x->error, sizeof x->error, "the reference lock failed");
            return -1;
        }
        cycles++;
    }
    if (snap_after(x->admin, &x->b) != 0)
        return -1;
    side_add(&x->rf, &x->a, &x->b, cycles, (double)(t1 - t0) / 1e9);
    return 0;
}

/* -d seconds for each side, in turns ABBA ABBA ... */
static int take_turns(cpu_run_t *x)
{
    long per_side = (long)(nmb_opt.duration_s * 1000.0 / CPU_CHUNK_MS + 0.5);
    per_side = per_side < 1 ? 1 : per_side;
    for (long i = 0; i < 2 * per_side; i++) {
        int reference = (int)(((i + 1) / 2) % 2);
        if ((reference ? chunk_reference(x) : chunk_netmutex(x)) != 0)
            return -1;
    }
    return 0;
}

/* Starts the netmutex worker and waits for its warm-up. */
static int start_worker(cpu_run_t *x)
{
    int64_t deadline = nmb_now_ns() + (int64_t)READY_TIMEOUT_MS * 1000000;
    if (nmb_crew_spawn(&x->crew, 1, cpu_worker, x->board) != 0)
        return -1;
    while (!__atomic_load_n(&x->board->ready, __ATOMIC_SEQ_CST)) {
        if (nmb_crew_reap(&x->crew) == 0 || nmb_now_ns() > deadline)
            return -1;
        nmb_sleep_us(1000);
    }
    return x->board->err ? -1 : 0;
}

static void stop_worker(cpu_run_t *x)
{
    __atomic_store_n(&x->board->cmd, CPU_EXIT, __ATOMIC_SEQ_CST);
    if (nmb_crew_wait(&x->crew, nmb_now_ns() + (int64_t)HANG_GRACE_MS * 1000000) != 0 && !x->error[0])
        snprintf(x->error, sizeof x->error, "the netmutex worker failed at exit");
}

static void j_cpu_line(const scenario_t *sc, const cpu_run_t *x)
{
    const cpu_side_t *nm = &x->nm, *rf = &x->rf;
    jline_t j;
    nmb_j_begin(&j, sc->name);
    nmb_j_num(&j, "duration_s", nm->duration_s);
    nmb_j_int(&j, "chunk_ms", CPU_CHUNK_MS);
    nmb_j_str(&j, "cpu_source", nm->main_thread ? "main_thread" : "process");
    nmb_j_int(&j, "pinned_cpu", x->pin.cpu);
    nmb_j_int(&j, "cycles", (long long)nm->cycles);
    nmb_j_num(&j, "cycles_per_s", (double)nm->cycles / nm->duration_s);
    nmb_j_num(&j, "server_cpu_us_per_cycle", cpu_us_per_cycle(nm));
    nmb_j_num(&j, "redis_calls_per_cycle", calls_per_cycle(nm));
    j_calls_per_cycle(&j, "calls_per_cycle", nm);
    nmb_j_str(&j, "reference", "the commands a plain SET-NX lock sends: EVALSHA of SET NX PX, "
                           "EVALSHA of GET + compare + DEL");
    nmb_j_num(&j, "reference_duration_s", rf->duration_s);
    nmb_j_int(&j, "reference_cycles", (long long)rf->cycles);
    nmb_j_num(&j, "reference_cycles_per_s", (double)rf->cycles / rf->duration_s);
    nmb_j_num(&j, "reference_cpu_us_per_cycle", cpu_us_per_cycle(rf));
    nmb_j_num(&j, "reference_calls_per_cycle", calls_per_cycle(rf));
    nmb_j_figure(&j, "cpu_ratio_to_reference", cpu_us_per_cycle(nm) / cpu_us_per_cycle(rf), 1.0,
             AT_MOST);
    nmb_j_end(&j);
}

/* The error line: the worker's own error first, then what stopped us. */
static int cpu_error(const scenario_t *sc, const cpu_run_t *x)
{
    char msg[192];
    if (x->board->err)
        snprintf(msg, sizeof msg, "%s: %s", x->board->what, nmb_errname(x->board->err));
    else
        snprintf(msg, sizeof msg, "%s", x->error[0] ? x->error : "INFO or the reference lock failed");
    return nmb_report_error(sc->name, msg);
}

/* An idle server's cron costs about 2 ms of CPU per second, under 1% of
 * either side's figure at these rates: nothing is subtracted. */
int nmb_sc_server_cpu(const scenario_t *sc)
{
    static cpu_run_t x;              /* static: the snapshots are large */
    int rc = -1;
    memset(&x, 0, sizeof x);
    fprintf(stderr, "nm_bench: %s: netmutex and the plain SET-NX commands in turns of %d ms, "
            "%g s each\n", sc->name, CPU_CHUNK_MS, nmb_opt.duration_s);
    x.board = mmap(NULL, sizeof *x.board, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
    if (x.board == MAP_FAILED)
        return nmb_report_error(sc->name, "mmap failed");
    pin_one_cpu(&x.pin);             /* before the fork: the worker inherits it */
    if ((x.admin = nmb_admin_connect()) && ref_open(&x.ref, sc->name) == 0) {
        if (start_worker(&x) == 0)
            rc = take_turns(&x);
        stop_worker(&x);
        rc = rc == 0 && !x.error[0] ? 0 : -1;
    }
    unpin(&x.pin);
    if (rc == 0)
        j_cpu_line(sc, &x);
    else
        cpu_error(sc, &x);
    if (x.ref.c)
        redisFree(x.ref.c);
    if (x.admin)
        redisFree(x.admin);
    munmap(x.board, sizeof *x.board);
    return rc;
}

/* ===================================================================== */
/* handoff                                                                */
/* ===================================================================== */

/* Long enough after the waiter called netmutex_lock for its request to be
 * queued on the server, so the unlock hands the lock over instead of
 * racing a newcomer. */
#define HANDOFF_SETTLE_US 2000
#define HANDOFF_CAP (1u << 16)       /* samples kept per process */

typedef struct {
    int err;
    char what[32];
    uint32_t n, nunlock;
    uint32_t overtakes;              /* our lock returned after our own unlock */
    float handoff_us[HANDOFF_CAP];   /* the other's unlock call -> our lock returns */
    float unlock_us[HANDOFF_CAP];    /* how long our netmutex_unlock took */
} hside_t;

/* Shared by the two processes and the main one. */
typedef struct {
    int ready, go, stop;             /* atomic */
    int cache;                       /* lease caching on (cache_handoff) */
    int first_held;                  /* atomic: process 0 holds the lock */
    int64_t end_ns;
    int64_t unlock_start_ns;         /* atomic: the holder, just before unlock */
    int unlock_by;                   /* atomic: that holder, 1 + its index */
    int64_t waiting_ns[2];           /* atomic: when each called lock, or 0 */
    double floor_p50_us, floor_p99_us; /* the bare hand-off (blpop_floor) */
    hside_t side[2];
} hboard_t;

typedef struct {
    hboard_t *b;
    int me;
    netmutex_t m;
} hand_t;

static int64_t load64(const int64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_SEQ_CST);
}

static void store64(int64_t *p, int64_t v)
{
    __atomic_store_n(p, v, __ATOMIC_SEQ_CST);
}

/* Records the failure and stops the other process too.  Returns -1. */
static int hand_fail(hand_t *h, const char *what, int err)
{
    hside_t *s = &h->b->side[h->me];
    s->err = err;
    snprintf(s->what, sizeof s->what, "%s", what);
    __atomic_store_n(&h->b->stop, 1, __ATOMIC_SEQ_CST);
    return -1;
}

static void keep(float *v, uint32_t *n, float us)
{
    if (*n < HANDOFF_CAP)
        v[(*n)++] = us;
}

/* Unlocks for the last time: the run is over.  Returns 1, or -1. */
static int hand_finish(hand_t *h)
{
    __atomic_store_n(&h->b->stop, 1, __ATOMIC_SEQ_CST);
    int err = netmutex_unlock(&h->m);
    return err ? hand_fail(h, "netmutex_unlock", err) : 1;
}

/* Waits for the lock as the other process holds it, and records the time
 * from the other's unlock call to our return.  0 we hold it, 1 the run is
 * over, -1 failed. */
static int take_turn(hand_t *h)
{
    hboard_t *b = h->b;
    store64(&b->waiting_ns[h->me], nmb_now_ns());
    int err = netmutex_lock(&h->m);
    int64_t t = nmb_now_ns();
    store64(&b->waiting_ns[h->me], 0);
    if (err)
        return hand_fail(h, "netmutex_lock", err);
    if (__atomic_load_n(&b->stop, __ATOMIC_SEQ_CST))
        return hand_finish(h);
    hside_t *s = &b->side[h->me];
    /* We unlocked last, and the other still waits: not a hand-off. */
    if (__atomic_load_n(&b->unlock_by, __ATOMIC_SEQ_CST) == h->me + 1)
        s->overtakes++;
    else
        keep(s->handoff_us, &s->n, (float)(t - load64(&b->unlock_start_ns)) / 1e3f);
    return 0;
}

/* Holding the lock: waits until the other process has been waiting for it
 * HANDOFF_SETTLE_US, then unlocks.  0 unlocked, 1 the run is over, -1. */
static int give_turn(hand_t *h)
{
    hboard_t *b = h->b;
    for (;;) {
        int64_t since = load64(&b->waiting_ns[1 - h->me]), t = nmb_now_ns();
        if (t >= b->end_ns || __atomic_load_n(&b->stop, __ATOMIC_SEQ_CST))
            return hand_finish(h);
        if (since && t - since >= (int64_t)HANDOFF_SETTLE_US * 1000)
            break;
        nmb_sleep_us(100);
    }
    int64_t t0 = nmb_now_ns();
    store64(&b->unlock_start_ns, t0);
    __atomic_store_n(&b->unlock_by, h->me + 1, __ATOMIC_SEQ_CST);
    int err = netmutex_unlock(&h->m);
    if (err)
        return hand_fail(h, "netmutex_unlock", err);
    hside_t *s = &b->side[h->me];
    keep(s->unlock_us, &s->nunlock, (float)(nmb_now_ns() - t0) / 1e3f);
    return 0;
}

/* The two processes pass the lock back and forth: process 0 takes it
 * first, process 1 waits for that, then each gives and takes in turn. */
static int handoff_loop(hand_t *h)
{
    hboard_t *b = h->b;
    int r, err;
    if (h->me == 0) {
        if ((err = netmutex_lock(&h->m)) != 0)
            return hand_fail(h, "netmutex_lock", err);
        __atomic_store_n(&b->first_held, 1, __ATOMIC_SEQ_CST);
    } else {
        while (!__atomic_load_n(&b->first_held, __ATOMIC_SEQ_CST)) {
            if (__atomic_load_n(&b->stop, __ATOMIC_SEQ_CST))
                return 0;            /* process 0 failed */
            nmb_sleep_us(100);
        }
        if ((r = take_turn(h)) != 0)
            return r < 0 ? -1 : 0;
    }
    for (;;) {
        if ((r = give_turn(h)) != 0 || (r = take_turn(h)) != 0)
            return r < 0 ? -1 : 0;
    }
}

static int handoff_child(void *arg, int me)
{
    hand_t h = { arg, me, { 0 } };
    netmutex_config_t cfg = nmb_bench_config(h.b->cache);
    char name[128];
    int err, rc = -1;
    nmb_mutex_name(name, sizeof name, h.b->cache ? "cache_handoff" : "handoff");
    if ((err = netmutex_configure(&cfg)) != 0)
        hand_fail(&h, "netmutex_configure", err);
    else if ((err = netmutex_init(&h.m, name, NULL)) != 0)
        hand_fail(&h, "netmutex_init", err);
    else if ((err = netmutex_lock(&h.m)) != 0 || (err = netmutex_unlock(&h.m)) != 0)
        hand_fail(&h, "warm-up", err);      /* dials Redis, loads the scripts */
    __atomic_add_fetch(&h.b->ready, 1, __ATOMIC_SEQ_CST);
    if (err)
        return -1;
    while (!__atomic_load_n(&h.b->go, __ATOMIC_ACQUIRE))
        nmb_sleep_us(100);
    rc = handoff_loop(&h);
    /* After a failure the mutex may still be held: keep the first error. */
    if (((err = netmutex_destroy(&h.m)) != 0 || (err = netmutex_shutdown()) != 0) && rc == 0)
        rc = hand_fail(&h, "netmutex_destroy/shutdown", err);
    return rc;
}

/* Both processes' samples of one kind, sorted.  NULL when out of memory. */
static double *merged(const hboard_t *b, int unlock, size_t *n)
{
    size_t total = 0;
    for (int p = 0; p < 2; p++)
        total += unlock ? b->side[p].nunlock : b->side[p].n;
    double *v = malloc((total ? total : 1) * sizeof *v);
    if (!v)
        return NULL;
    *n = 0;
    for (int p = 0; p < 2; p++) {
        const hside_t *s = &b->side[p];
        for (uint32_t i = 0; i < (unlock ? s->nunlock : s->n); i++)
            v[(*n)++] = unlock ? s->unlock_us[i] : s->handoff_us[i];
    }
    qsort(v, *n, sizeof *v, nmb_cmp_double);
    return v;
}

static int handoff_report(const scenario_t *sc, const hboard_t *b, double duration_s)
{
    size_t n, nu;
    double *v = merged(b, 0, &n), *u = merged(b, 1, &nu);
    jline_t j;
    if (!v || !u || n == 0) {
        free(v);
        free(u);
        return nmb_report_error(sc->name, v && u ? "no hand-off measured" : "out of memory");
    }
    nmb_j_begin(&j, sc->name);
    nmb_j_int(&j, "procs", 2);
    nmb_j_num(&j, "duration_s", duration_s);
    nmb_j_int(&j, "settle_us", HANDOFF_SETTLE_US);
    nmb_j_int(&j, "samples", (long long)n);
    double p50 = nmb_percentile(v, n, 0.50);
    /* On the delayed link the target is 2 x RTT + HANDOFF_SLACK_US. */
    if (nmb_link_delay_us)
        nmb_j_figure(&j, "handoff_p50_us", p50, 2.0 * nmb_rtt_us + HANDOFF_SLACK_US, AT_MOST);
    else
        nmb_j_num(&j, "handoff_p50_us", p50);
    nmb_j_num(&j, "handoff_p99_us", nmb_percentile(v, n, 0.99));
    nmb_j_num(&j, "handoff_max_us", v[n - 1]);
    nmb_j_num(&j, "unlock_p50_us", nmb_percentile(u, nu, 0.50));
    nmb_j_num(&j, "unlock_p99_us", nmb_percentile(u, nu, 0.99));
    if (nmb_link_delay_us)
        nmb_j_num(&j, "handoff_p50_rtt", p50 / nmb_rtt_us);
    else
        nmb_j_figure(&j, "handoff_p50_rtt", p50 / nmb_rtt_us, 2.0, AT_MOST);
    if (!b->cache) {
        nmb_link_figures()->handoff_p50_us = p50;
        nmb_link_figures()->handoff_rtt_us = nmb_rtt_us;
    }
    if (b->floor_p50_us > 0) {
        /* What no hand-off to a sleeping process can beat on this machine. */
        nmb_j_num(&j, "blpop_floor_p50_us", b->floor_p50_us);
        nmb_j_num(&j, "blpop_floor_p99_us", b->floor_p99_us);
        nmb_j_num(&j, "blpop_floor_p50_rtt", b->floor_p50_us / nmb_rtt_us);
    }
    /* The waiter was queued first: the unlocking process must not get the
     * lock back before it. */
    nmb_j_figure(&j, "overtakes", (double)(b->side[0].overtakes + b->side[1].overtakes), 0.0,
             AT_MOST);
    nmb_j_end(&j);
    free(v);
    free(u);
    return 0;
}

/* The first error either process recorded, as the scenario's line. */
static int handoff_error(const scenario_t *sc, const hboard_t *b, const char *fallback)
{
    int err[2] = { b->side[0].err, b->side[1].err };
    const char *what[2] = { b->side[0].what, b->side[1].what };
    return nmb_report_pair_error(sc->name, err, what, fallback);
}

/* The floor under any hand-off through Redis to a process that sleeps
 * until it is served: process A RPUSHes to a list that process B blocks on
 * with BLPOP, on plain hiredis connections; a sample is the time from A's
 * call to B's return, with A waiting HANDOFF_SETTLE_US after B blocked, as
 * the netmutex hand-off does.  It is one round trip for A and a wake-up
 * for B, with nothing of netmutex in between. */
#define FLOOR_SAMPLES 400

typedef struct {
    int64_t pushed_ns;               /* atomic */
    int blocked, taken;              /* atomic */
    double us[FLOOR_SAMPLES];
} floor_board_t;

static int floor_child(void *arg, int me)
{
    floor_board_t *f = arg;
    redisContext *c = nmb_admin_connect();
    (void)me;
    for (int i = 0; c && i < FLOOR_SAMPLES; i++) {
        __atomic_store_n(&f->blocked, i + 1, __ATOMIC_SEQ_CST);
        redisReply *r = nmb_admin_cmd(c, "BLPOP", 3, (const char *[]){ "BLPOP", "nm_bench:floor", "10" });
        int64_t t = nmb_now_ns();
        if (!r)
            break;
        freeReplyObject(r);
        f->us[i] = (double)(t - __atomic_load_n(&f->pushed_ns, __ATOMIC_SEQ_CST)) / 1e3;
        __atomic_store_n(&f->taken, i + 1, __ATOMIC_SEQ_CST);
    }
    if (c)
        redisFree(c);
    return c ? 0 : 1;
}

static int floor_push(floor_board_t *f, redisContext *c, crew_t *crew, int i)
{
    int64_t deadline = nmb_now_ns() + (int64_t)READY_TIMEOUT_MS * 1000000;
    while (__atomic_load_n(&f->blocked, __ATOMIC_SEQ_CST) <= i && nmb_now_ns() < deadline)
        nmb_sleep_us(100);
    nmb_sleep_us(HANDOFF_SETTLE_US);
    __atomic_store_n(&f->pushed_ns, nmb_now_ns(), __ATOMIC_SEQ_CST);
    redisReply *r = nmb_admin_cmd(c, "RPUSH", 3, (const char *[]){ "RPUSH", "nm_bench:floor", "x" });
    if (!r)
        return -1;
    freeReplyObject(r);
    while (__atomic_load_n(&f->taken, __ATOMIC_SEQ_CST) <= i && nmb_now_ns() < deadline)
        nmb_crew_reap(crew) == 0 ? nmb_sleep_us(50) : (void)0;
    return __atomic_load_n(&f->taken, __ATOMIC_SEQ_CST) > i ? 0 : -1;
}

/* Measures the floor into B; -1 if it could not be measured (then the
 * scenario reports without it). */
static int measure_floor(hboard_t *b)
{
    floor_board_t *f = mmap(NULL, sizeof *f, PROT_READ | PROT_WRITE,
                            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    redisContext *c = nmb_admin_connect();
    crew_t crew;
    int rc = -1, i = 0;
    if (f != MAP_FAILED && c && nmb_crew_spawn(&crew, 1, floor_child, f) == 0) {
        while (i < FLOOR_SAMPLES && floor_push(f, c, &crew, i) == 0)
            i++;
        nmb_crew_wait(&crew, nmb_now_ns() + (int64_t)READY_TIMEOUT_MS * 1000000);
        if (i == FLOOR_SAMPLES) {
            qsort(f->us, FLOOR_SAMPLES, sizeof f->us[0], nmb_cmp_double);
            b->floor_p50_us = nmb_percentile(f->us, FLOOR_SAMPLES, 0.50);
            b->floor_p99_us = nmb_percentile(f->us, FLOOR_SAMPLES, 0.99);
            rc = 0;
        }
    }
    if (c)
        redisFree(c);
    if (f != MAP_FAILED)
        munmap(f, sizeof *f);
    return rc;
}

int nmb_sc_handoff(const scenario_t *sc)
{
    crew_t crew;
    int rc;
    hboard_t *b = mmap(NULL, sizeof *b, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (b == MAP_FAILED)
        return nmb_report_error(sc->name, "mmap failed");
    b->cache = sc->load.cache;
    if (measure_floor(b) != 0)
        fprintf(stderr, "nm_bench: %s: the bare BLPOP hand-off could not be measured\n",
                sc->name);
    fprintf(stderr, "nm_bench: %s: 2 processes pass one lock back and forth, %g s%s\n",
            sc->name, nmb_opt.duration_s, b->cache ? ", lease caching on" : "");
    if (nmb_crew_spawn(&crew, 2, handoff_child, b) != 0 || nmb_crew_ready(&crew, &b->ready, 2) != 0) {
        nmb_crew_kill(&crew);
        rc = handoff_error(sc, b, "the workers did not start");
        goto out;
    }
    int64_t start = nmb_now_ns();
    b->end_ns = start + (int64_t)(nmb_opt.duration_s * 1e9);
    __atomic_store_n(&b->go, 1, __ATOMIC_RELEASE);
    if (nmb_crew_wait(&crew, b->end_ns + (int64_t)HANG_GRACE_MS * 1000000) != 0)
        rc = handoff_error(sc, b, crew.failed ? "a worker failed" : "a lock call hung");
    else
        rc = handoff_report(sc, b, (double)(nmb_now_ns() - start) / 1e9);
out:
    munmap(b, sizeof *b);
    return rc;
}

/* ===================================================================== */
/* residue                                                                */
/* ===================================================================== */

#define RESIDUE_N 20000              /* -n */
#define RESIDUE_LEASE_MS 500         /* --lease-ms */
#define SCAN_COUNT "1000"

/* What the server holds at one moment. */
typedef struct {
    long long used_memory;   /* INFO memory: what the allocator handed out */
    long long dbsize;        /* every key of the database, expired or not */
    long long keys;          /* live keys whose names contain the scenario's */
    long long floors;        /* fence floors: one per hash slot, not per name */
} residue_snap_t;

/* The fence floors' keys, <prefix>{<slot tag>}fence (src/lua/lib.lua): at
 * most one per hash slot, 16384 in all, so what they take is bounded and
 * is not residue of any name; it is reported on its own. */
#define FLOOR_PATTERN "*}fence"

/* Keys matching PATTERN, by SCAN (which also drops those that expired). */
static long long count_keys(redisContext *c, const char *pattern)
{
    char cursor[32] = "0";
    long long n = 0;
    do {
        const char *argv[] = { "SCAN", cursor, "MATCH", pattern, "COUNT", SCAN_COUNT };
        redisReply *r = nmb_admin_cmd(c, "SCAN", 6, argv);
        if (!r)
            return -1;
        int ok = r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
                 r->element[0]->type == REDIS_REPLY_STRING &&
                 r->element[1]->type == REDIS_REPLY_ARRAY;
        if (ok) {
            snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
            n += (long long)r->element[1]->elements;
        }
        freeReplyObject(r);
        if (!ok) {
            nmb_complain("SCAN: unexpected reply");
            return -1;
        }
    } while (strcmp(cursor, "0") != 0);
    return n;
}

/* Memory and DBSIZE first, then SCAN: SCAN deletes expired keys it meets,
 * and the first two should see what the server itself kept. */
static int read_residue(redisContext *c, const char *pattern, residue_snap_t *s)
{
    redisReply *r = nmb_info(c, "memory");
    if (!r)
        return -1;
    s->used_memory = (long long)nmb_info_field(r->str, "used_memory");
    freeReplyObject(r);
    if (!(r = nmb_admin_cmd(c, "DBSIZE", 1, (const char *[]){ "DBSIZE" })))
        return -1;
    s->dbsize = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    s->keys = count_keys(c, pattern);
    s->floors = count_keys(c, FLOOR_PATTERN);
    return s->keys < 0 || s->dbsize < 0 || s->floors < 0 ? -1 : 0;
}

/* Locks and unlocks N names one after the other, each with a mutex of its
 * own that is destroyed after use, as an application would.  0 or errno. */
static int residue_cycles(const netmutex_attr_t *attr, long n, char *msg, size_t msglen)
{
    for (long i = 0; i < n; i++) {
        char what[48], name[128];
        netmutex_t m;
        int err;
        snprintf(what, sizeof what, "residue/%ld", i);
        nmb_mutex_name(name, sizeof name, what);
        if ((err = netmutex_init(&m, name, attr)) != 0 || (err = netmutex_lock(&m)) != 0 ||
            (err = netmutex_unlock(&m)) != 0 || (err = netmutex_destroy(&m)) != 0) {
            snprintf(msg, msglen, "name %ld of %ld: %s", i + 1, n, nmb_errname(err));
            return err;
        }
    }
    return 0;
}

/* The library configured, a lease set, and one warm-up cycle on a name
 * outside the pattern: connection and scripts exist before the baseline. */
static int residue_setup(netmutex_attr_t *attr, long lease_ms)
{
    netmutex_config_t cfg = nmb_bench_config(0);
    netmutex_t warm;
    char name[128];
    int err;
    nmb_mutex_name(name, sizeof name, "residue-warm-up");
    if ((err = netmutex_configure(&cfg)) != 0 || (err = netmutex_attr_init(attr)) != 0 ||
        (err = netmutex_attr_setlease(attr, (unsigned int)lease_ms)) != 0)
        return err;
    if ((err = netmutex_init(&warm, name, attr)) != 0 || (err = netmutex_lock(&warm)) != 0 ||
        (err = netmutex_unlock(&warm)) != 0 || (err = netmutex_destroy(&warm)) != 0)
        return err;
    return 0;
}

static void residue_report(const char *scenario, long n, long lease_ms, double cycle_s,
                           const residue_snap_t s[3])
{
    jline_t j;
    nmb_j_begin(&j, scenario);
    nmb_j_int(&j, "names", n);
    nmb_j_int(&j, "lease_ms", lease_ms);
    nmb_j_num(&j, "cycles_s", cycle_s);
    nmb_j_int(&j, "dbsize_before", s[0].dbsize);
    nmb_j_int(&j, "dbsize_after", s[1].dbsize);
    nmb_j_int(&j, "dbsize_after_2_leases", s[2].dbsize);
    nmb_j_int(&j, "keys_before", s[0].keys);
    nmb_j_int(&j, "keys_after", s[1].keys);
    nmb_j_figure(&j, "keys_after_2_leases", (double)s[2].keys, 0.0, AT_MOST);
    nmb_j_int(&j, "floor_keys_before", s[0].floors);
    nmb_j_int(&j, "floor_keys_after_2_leases", s[2].floors);
    nmb_j_int(&j, "used_memory_before", s[0].used_memory);
    nmb_j_int(&j, "used_memory_after", s[1].used_memory);
    nmb_j_int(&j, "used_memory_after_2_leases", s[2].used_memory);
    nmb_j_num(&j, "bytes_per_name_after", (double)(s[1].used_memory - s[0].used_memory) / (double)n);
    nmb_j_figure(&j, "bytes_per_name_after_2_leases",
             (double)(s[2].used_memory - s[0].used_memory) / (double)n, 16.0, AT_MOST);
    nmb_j_end(&j);
}

/* Runs in a process of its own (see nmb_sc_residue) and prints the line. */
static int residue_child(void *arg, int index)
{
    const char *scenario = ((const scenario_t *)arg)->name;
    long n = nmb_opt_or(nmb_opt.n_locks, RESIDUE_N), lease_ms = nmb_opt_or(nmb_opt.lease_ms, RESIDUE_LEASE_MS);
    residue_snap_t s[3];
    netmutex_attr_t attr;
    char pattern[160], prefix[128], msg[192];
    int err;
    (void)index;

    /* Counted by name, not by DBSIZE alone: earlier scenarios' keys are
     * on the same server. */
    nmb_mutex_name(prefix, sizeof prefix, "residue/");
    snprintf(pattern, sizeof pattern, "*%s*", prefix);
    redisContext *admin = nmb_admin_connect();
    if (!admin)
        return nmb_report_error(scenario, "cannot connect to the server for INFO");
    if ((err = residue_setup(&attr, lease_ms)) != 0) {
        snprintf(msg, sizeof msg, "setup: %s", nmb_errname(err));
        redisFree(admin);
        return nmb_report_error(scenario, msg);
    }
    int rc = read_residue(admin, pattern, &s[0]);
    int64_t t0 = nmb_now_ns();
    if (rc == 0 && (err = residue_cycles(&attr, n, msg, sizeof msg)) != 0)
        rc = -1;
    int64_t t1 = nmb_now_ns();
    if (rc == 0)
        rc = read_residue(admin, pattern, &s[1]);
    if (rc == 0) {
        nmb_sleep_us((long)((t1 + 2 * lease_ms * 1000000LL - nmb_now_ns()) / 1000));
        rc = read_residue(admin, pattern, &s[2]);
    }
    redisFree(admin);
    netmutex_attr_destroy(&attr);
    netmutex_shutdown();
    if (rc != 0)
        return nmb_report_error(scenario, err ? msg : "INFO, DBSIZE or SCAN failed");
    residue_report(scenario, n, lease_ms, (double)(t1 - t0) / 1e9, s);
    return 0;
}

/* Its own process, so the library's state starts fresh and goes with it. */
int nmb_sc_residue(const scenario_t *sc)
{
    crew_t crew;
    long lease_ms = nmb_opt_or(nmb_opt.lease_ms, RESIDUE_LEASE_MS);
    int64_t limit_ms = 2 * lease_ms + 600000;   /* a hang, not a slow run */
    fprintf(stderr, "nm_bench: %s: %ld names locked and unlocked, %ld ms lease\n", sc->name,
            nmb_opt_or(nmb_opt.n_locks, RESIDUE_N), lease_ms);
    if (nmb_crew_spawn(&crew, 1, residue_child, (void *)sc) != 0) {
        nmb_crew_kill(&crew);
        return nmb_report_error(sc->name, "fork failed");
    }
    if (nmb_crew_wait(&crew, nmb_now_ns() + limit_ms * 1000000) != 0) {
        if (crew.failed)
            return -1;               /* the child printed its own line */
        return nmb_report_error(sc->name, "still running after its time limit: killed");
    }
    return 0;
}
