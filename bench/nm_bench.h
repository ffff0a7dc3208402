/*
 * nm_bench.h -- what the benchmark's files share (nm_bench.c, bench_*.c,
 * scenarios_*.c; "FILES" at the top of nm_bench.c): options, statistics,
 * JSON lines, the admin connection and the private servers, worker
 * processes and the lock loop.  The scenarios themselves are described at
 * the top of nm_bench.c.
 */
#ifndef NM_BENCH_H
#define NM_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <hiredis/hiredis.h>

#include <netmutex.h>

/* Every function and variable declared here is the benchmark's own, and
 * named nmb_...: no name of this shared header can clash with one of the
 * library's, of hiredis or of the C library. */

/* Fair mode (netmutex_attr_setfair) is in the library: the fair_procs
 * scenario runs.  0 would print a "skipped" line instead. */
#define HAVE_FAIR_MODE 1

#define MAX_PROCS 64
#define RTT_PINGS 2000
#define MAX_THREADS 256
#define MAX_WORKERS 256              /* procs x threads */
#define SAMPLE_CAP (1u << 16)        /* wait samples kept per thread */
#define DEFAULT_RENEW_PERCENT 33     /* the library's, for the estimate */
#define READY_TIMEOUT_MS 30000       /* server start, workers' warm-up */
#define HANG_GRACE_MS 30000          /* after the end, before "hung" */

/* ---- options and process-wide state (nm_bench.c) ---------------------- */

typedef struct {
    const char *url;         /* -u or $NETMUTEX_URL; NULL: private server */
    int tcp;
    double duration_s;
    long procs, threads, hold_us, think_us;   /* -1: scenario default */
    long n_locks;            /* -1: scenario default */
    long lease_ms;           /* -1: scenario default */
    long delay_us;           /* --delay-us: one way; 0: no delayed link */
    long waiters;            /* --waiters: the waiters scenario's N; 0: its list */
} bench_opt_t;

extern bench_opt_t nmb_opt;
extern double nmb_rtt_us;            /* median PING round trip */
extern char nmb_server_url[640];     /* what the library is given */
extern const char *nmb_server_kind;  /* private-unix, private-tcp or url */
extern char nmb_name_prefix[64];     /* "nm_bench/PID" */
/* While the delayed link runs ("THE DELAYED LINK" in nm_bench.c): its
 * one-way delay, and the loopback round trip measured before it
 * (nmb_rtt_us is then the round trip through the proxy).  0 otherwise. */
extern long nmb_link_delay_us;
extern double nmb_loopback_rtt_us;

/* The private redis-server's pid, or 0 when the server is not ours (-u). */
pid_t nmb_private_server_pid(void);

/* V when it was given (> 0), else the scenario's default D. */
long nmb_opt_or(long v, long d);

/* The library's configuration for a scenario: nmb_server_url, and lease
 * caching on (the library's default idle period) only when CACHE is 1.
 * Every scenario but the cache_* ones measures the network path, which a
 * cached lease would skip, so they pass 0. */
netmutex_config_t nmb_bench_config(int cache);

void nmb_complain(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *nmb_errname(int err);
void nmb_mutex_name(char *buf, size_t len, const char *what);

/* ---- time, statistics ------------------------------------------------- */

int64_t nmb_now_ns(void);            /* CLOCK_MONOTONIC */
void nmb_sleep_us(long us);
int nmb_cmp_double(const void *a, const void *b);
double nmb_percentile(const double *v, size_t n, double p); /* v sorted */
double nmb_median(double *v, size_t n); /* sorts v */
long nmb_vmrss_kb(void);             /* VmRSS of this process, or -1 */

/* ---- JSON lines (see "OUTPUT" at the top of nm_bench.c) --------------- */

typedef struct {
    char buf[8192];
    size_t len;
    int targets, met;        /* figures with a target, and those met */
} jline_t;

enum { AT_LEAST, AT_MOST };

void nmb_j_raw(jline_t *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void nmb_j_key(jline_t *j, const char *key);
void nmb_j_str(jline_t *j, const char *key, const char *s);
void nmb_j_int(jline_t *j, const char *key, long long v);
void nmb_j_num(jline_t *j, const char *key, double v);
void nmb_j_bool(jline_t *j, const char *key, int v);
void nmb_j_int_array(jline_t *j, const char *key, const uint64_t *v, size_t n);
void nmb_j_figure(jline_t *j, const char *name, double value, double target, int sense);
void nmb_j_begin(jline_t *j, const char *scenario);
void nmb_j_end(jline_t *j);
int nmb_report_error(const char *scenario, const char *msg); /* returns -1 */
int nmb_report_pair_error(const char *scenario, const int err[2], const char *const what[2],
                      const char *fallback);   /* returns -1 */

/* ---- a plain hiredis connection to the server ------------------------- */

redisContext *nmb_admin_connect(void);
redisReply *nmb_admin_cmd(redisContext *c, const char *what, int argc, const char **argv);
int nmb_admin_do(redisContext *c, const char *what, int argc, const char **argv);
/* INFO SECTION as a string reply (NULL after a message); the number after
 * "FIELD:" on a line of such a reply, or NAN; the server's CPU seconds,
 * its main thread's where it says (*MAIN_THREAD), NAN after a message. */
redisReply *nmb_info(redisContext *c, const char *section);
double nmb_info_field(const char *info, const char *field);
double nmb_server_cpu_s(redisContext *c, int *main_thread);
/* Median time of RTT_PINGS PINGs, in us; -1 after a message. */
double nmb_measure_rtt(void);
/* Times N PINGs into V (in us, in order); 0, or -1 after a message. */
int nmb_time_pings(double *v, int n);

/* Redis counts the commands a script runs as well as the script itself. */
typedef struct {
    unsigned long long evalsha;   /* script calls */
    unsigned long long pexpire;   /* mostly from inside the renew script */
} cmdstats_t;

/* The server's command counters, from INFO commandstats. */
int nmb_read_cmdstats(redisContext *c, cmdstats_t *out);

/* ---- the private servers (bench_redis.c) ------------------------------ */

/* Server 0 serves every scenario; the quorum scenarios add two more. */
#define NSERVERS 3

/* Starts the private server 0 and sets nmb_server_url and nmb_server_kind;
 * 0, or -1 after a message.  nmb_stop_redis stops them all (main process
 * only). */
int nmb_start_redis(void);
void nmb_stop_redis(void);
/* The quorum scenarios' URL list: server 0 and two more private servers,
 * started on first use.  NULL (after a message) when they cannot be had. */
const char *nmb_quorum_url(void);

/* Puts the private servers behind the delaying proxy: server 0, and
 * with QUORUM the other two as well (started if need be), each behind its
 * own port; nmb_server_url and nmb_quorum_url() then name the proxy's
 * ports, and nmb_rtt_us is measured again through it.  0, or -1 after a
 * message.  nmb_delay_end undoes it all. */
int nmb_delay_begin(long delay_us, int quorum);
void nmb_delay_end(void);

/* ---- the delaying proxy (bench_proxy.c) ------------------------------- */

/* Where the proxy relays a port to: TCP 127.0.0.1:PORT when PORT > 0,
 * else the unix socket PATH. */
typedef struct {
    char path[128];
    int port;
} proxy_target_t;

/* Starts one process that relays a port of 127.0.0.1 to each of the N
 * (<= NSERVERS) targets, every chunk held back DELAY_US each way; PORTS
 * gets the ports.  Its pid, or -1 after a message. */
pid_t nmb_proxy_start(const proxy_target_t *targets, int n, long delay_us, int *ports);
void nmb_proxy_stop(pid_t pid);
/* The last proxy started runs with real-time priority (SCHED_FIFO). */
extern int nmb_proxy_realtime;

/* ---- the delayed link's figures (scenarios_delay.c) ------------------- */

/* The hand-off target on the delayed link is 2 x RTT plus this: the waiter
 * sleeps in BLPOP, and waking a process is not a round trip. */
#define HANDOFF_SLACK_US 100.0

/* What the round-trip targets are judged on, for one link (0: not
 * measured in this run). */
typedef struct {
    double cycles_per_s;     /* uncontended */
    double cycles_rtt_us;    /* nmb_rtt_us it was judged on */
    double handoff_p50_us;   /* handoff (caching off) */
    double handoff_rtt_us;
    double quorum_ratio;     /* quorum_uncontended's cycle_time_ratio */
} link_figures_t;

/* The figures of the link that runs now: loopback, or the delayed one. */
link_figures_t *nmb_link_figures(void);
/* The "rtt_targets" line: each round-trip target on the delayed link, with
 * the loopback figures beside, and the same as a table on stderr. */
void nmb_rtt_targets_report(void);

/* ---- worker processes ------------------------------------------------- */

/* Forked processes running one function, killed if they outlive a
 * deadline, and with us if we die. */
typedef struct {
    int n;
    pid_t pid[MAX_PROCS];    /* 0 once reaped */
    int failed;              /* one exited non-zero or died of a signal */
} crew_t;

typedef int (*crew_fn)(void *arg, int index);

int nmb_crew_spawn(crew_t *c, int n, crew_fn fn, void *arg);
int nmb_crew_reap(crew_t *c);
/* Waits until *READY, which the workers count up atomically, reaches N: 0;
 * -1 once a worker failed or READY_TIMEOUT_MS passed (C->failed says
 * which). */
int nmb_crew_ready(crew_t *c, int *ready, int n);
void nmb_crew_kill(crew_t *c);
int nmb_crew_wait(crew_t *c, int64_t deadline_ns);

/* ---- the lock loop ----------------------------------------------------- */

typedef struct {
    int procs, threads;      /* threads per process */
    long hold_us, think_us;  /* inside and between critical sections */
    int fair;                /* fair mode on the mutex */
    int pthread_ref;         /* a process-shared pthread mutex instead */
    int cache;               /* lease caching on (see nmb_bench_config) */
} load_t;

/* Statistics on in the workers nmb_run_load starts next
 * (netmutex_set_stats; scenarios_stats.c), 0 by default. */
extern int nmb_worker_stats;

typedef struct {
    double duration_s;
    uint64_t total;          /* acquisitions within the period */
    uint64_t per_proc[MAX_PROCS];
    uint64_t thread_min, thread_max;
    size_t nsamples;
    double wait_p50_us, wait_p99_us, wait_max_us;
    double hold_mean_us, unlock_mean_us;
    char error[192];
} group_result_t;

int nmb_run_load(const char *name, const load_t *ld, group_result_t *res);

/* Opt's -p, -t, --hold-us, --think-us over a scenario's defaults. */
load_t nmb_with_overrides(load_t ld);
/* Runs LD for SCENARIO and starts its JSON line with the parameters and
 * what every load scenario reports.  -1 after printing the error line. */
int nmb_measure(const char *scenario, const load_t *ld, group_result_t *res, jline_t *j);
double nmb_rate(const group_result_t *r);        /* acquisitions per second */
void nmb_j_rtt_bound(jline_t *j, double per_s);  /* two round trips a cycle */
double nmb_min_over_max(const uint64_t *v, int n); /* fairness of V */

/* ---- scenarios ---------------------------------------------------------- */

typedef struct scenario {
    const char *name;
    int (*run)(const struct scenario *sc);
    load_t load;             /* defaults, for the lock-loop scenarios */
    const char *delayed_name;   /* its name on the delayed link, or NULL:
                                   not run there */
    int (*delayed_run)(const struct scenario *sc);   /* there; NULL: run */
} scenario_t;

/* scenarios_tls.c */
int nmb_sc_tls_uncontended(const scenario_t *sc);
/* scenarios_basic.c */
int nmb_sc_uncontended(const scenario_t *sc);
int nmb_sc_contended_procs(const scenario_t *sc);
int nmb_sc_fair_procs(const scenario_t *sc);
int nmb_sc_threads(const scenario_t *sc);
int nmb_sc_threads_two_procs(const scenario_t *sc);
int nmb_sc_many_locks(const scenario_t *sc);
int nmb_sc_quorum_uncontended(const scenario_t *sc);
int nmb_sc_quorum_contended_procs(const scenario_t *sc);

/* scenarios_footprint.c */
int nmb_sc_server_cpu(const scenario_t *sc);
double nmb_reference_cycles_per_s(const char *scenario, double seconds);
int nmb_sc_handoff(const scenario_t *sc);
int nmb_sc_residue(const scenario_t *sc);

/* scenarios_cache.c */
int nmb_sc_cache_uncontended(const scenario_t *sc);
int nmb_sc_cache_revoke(const scenario_t *sc);
int nmb_sc_cache_porting(const scenario_t *sc);

/* scenarios_delay.c: uncontended and quorum_uncontended on the delayed
 * link, in turns with the PINGs or the single server they are judged on */
int nmb_sc_delayed_uncontended(const scenario_t *sc);
int nmb_sc_delayed_quorum(const scenario_t *sc);

/* scenarios_cluster.c */
int nmb_sc_cluster_names(const scenario_t *sc);

/* scenarios_wait.c */
int nmb_sc_timedlock_late(const scenario_t *sc);

/* scenarios_deadlock.c */
int nmb_sc_deadlock_cycle(const scenario_t *sc);

/* scenarios_cond.c */
int nmb_sc_cond_pingpong(const scenario_t *sc);
int nmb_sc_cond_broadcast16(const scenario_t *sc);

/* scenarios_rwlock.c */
int nmb_sc_rwlock_read_mostly(const scenario_t *sc);
int nmb_sc_rwlock_cached_read(const scenario_t *sc);
int nmb_sc_rwlock_revoke(const scenario_t *sc);
/* scenarios_stats.c */
int nmb_sc_stats_cache_uncontended(const scenario_t *sc);
int nmb_sc_stats_contended_procs(const scenario_t *sc);

/* scenarios_sem.c */
int nmb_sc_sem_permits(const scenario_t *sc);

/* scenarios_waiters.c */
int nmb_sc_waiters(const scenario_t *sc);

#endif
