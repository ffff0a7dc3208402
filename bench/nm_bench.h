/*
 * nm_bench.h -- what nm_bench.c shares with the scenario files beside it
 * (scenarios_footprint.c): options, JSON lines, the admin connection,
 * worker processes and the lock loop.  The scenarios themselves are
 * described at the top of nm_bench.c.
 */
#ifndef NM_BENCH_H
#define NM_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <hiredis/hiredis.h>

#define MAX_PROCS 64
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
} bench_opt_t;

extern bench_opt_t opt;
extern double rtt_us;                /* median PING round trip */
extern char server_url[640];         /* what the library is given */

/* The private redis-server's pid, or 0 when the server is not ours (-u). */
pid_t private_server_pid(void);

/* V when it was given (> 0), else the scenario's default D. */
long opt_or(long v, long d);

void complain(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *errname(int err);
void mutex_name(char *buf, size_t len, const char *what);

/* ---- time, statistics ------------------------------------------------- */

int64_t now_ns(void);                /* CLOCK_MONOTONIC */
void sleep_us(long us);
int cmp_double(const void *a, const void *b);
double percentile(const double *v, size_t n, double p);   /* v sorted */

/* ---- JSON lines (see "OUTPUT" at the top of nm_bench.c) --------------- */

typedef struct {
    char buf[8192];
    size_t len;
    int targets, met;        /* figures with a target, and those met */
} jline_t;

enum { AT_LEAST, AT_MOST };

void j_raw(jline_t *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void j_key(jline_t *j, const char *key);
void j_str(jline_t *j, const char *key, const char *s);
void j_int(jline_t *j, const char *key, long long v);
void j_num(jline_t *j, const char *key, double v);
void j_bool(jline_t *j, const char *key, int v);
void j_figure(jline_t *j, const char *name, double value, double target, int sense);
void j_begin(jline_t *j, const char *scenario);
void j_end(jline_t *j);
int report_error(const char *scenario, const char *msg);   /* returns -1 */

/* ---- a plain hiredis connection to the server ------------------------- */

redisContext *admin_connect(void);
redisReply *admin_cmd(redisContext *c, const char *what, int argc, const char **argv);
int admin_do(redisContext *c, const char *what, int argc, const char **argv);

/* ---- worker processes ------------------------------------------------- */

/* Forked processes running one function, killed if they outlive a
 * deadline, and with us if we die. */
typedef struct {
    int n;
    pid_t pid[MAX_PROCS];    /* 0 once reaped */
    int failed;              /* one exited non-zero or died of a signal */
} crew_t;

typedef int (*crew_fn)(void *arg, int index);

int crew_spawn(crew_t *c, int n, crew_fn fn, void *arg);
int crew_reap(crew_t *c);
void crew_kill(crew_t *c);
int crew_wait(crew_t *c, int64_t deadline_ns);

/* ---- the lock loop ----------------------------------------------------- */

typedef struct {
    int procs, threads;      /* threads per process */
    long hold_us, think_us;  /* inside and between critical sections */
    int fair;                /* fair mode on the mutex */
    int pthread_ref;         /* a process-shared pthread mutex instead */
} load_t;

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

int run_load(const char *name, const load_t *ld, group_result_t *res);

/* ---- scenarios ---------------------------------------------------------- */

typedef struct scenario {
    const char *name;
    int (*run)(const struct scenario *sc);
    load_t load;             /* defaults, for the lock-loop scenarios */
} scenario_t;

/* scenarios_footprint.c */
int sc_server_cpu(const scenario_t *sc);
int sc_handoff(const scenario_t *sc);
int sc_residue(const scenario_t *sc);

#endif
