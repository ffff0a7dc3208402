/*
 * nm_bench.c -- the netmutex benchmark (the targets are DESIGN.md section 5).
 *
 *   nm_bench [-u URL] [--tcp] [-s NAME[,NAME...]] [-d SECONDS] [-p PROCS]
 *            [-t THREADS] [--hold-us US] [--think-us US] [-n LOCKS]
 *            [--lease-ms MS]
 *
 * WHERE REDIS IS.  -u URL, else $NETMUTEX_URL, else a private redis-server
 * that nm_bench starts itself (the binary configure found, or
 * $REDIS_SERVER) on a unix socket in a temporary directory, or with --tcp
 * on a free port of 127.0.0.1 (most figures scale with the round-trip time,
 * and TCP's differs from the unix socket's).  The private server is stopped
 * and its directory removed at exit, on error and on SIGINT/TERM/HUP.
 *
 * THE ROUND TRIP.  Before any scenario, nm_bench times 2,000 PINGs on a
 * hiredis connection of its own; their median is "rtt_us".  A lock+unlock
 * cycle needs at least two round trips (acquire script, release script), so
 * one thread alone can do at most 1/(2 x rtt) cycles per second: that is
 * "rtt_bound_per_s" below.
 *
 * OUTPUT.  One JSON line per scenario on stdout; notes and errors go to
 * stderr.  Every line has "scenario", "server" (private-unix, private-tcp or
 * url), "rtt_us", the scenario's parameters and raw counts, then its
 * figures.  A figure with a target is four keys:
 *     "X": value, "X_target": target, "X_vs_target": value / target,
 *     "X_meets_target": true or false
 * ("X_vs_target" is left out when the target is 0), and such a line ends
 * with "meets_all_targets".  Times are in ms unless the key says _us or _s.
 * Wait times ("wait_p50_ms", "wait_p99_ms", "wait_max_ms") are measured from
 * the call of netmutex_lock to its return, over every acquisition of the
 * measured period ("wait_samples" of them: beyond 65,536 per thread, a
 * uniform sample).  "hold_mean_ms" is how long the critical section really
 * lasted (sleeps overshoot) and "unlock_mean_ms" how long netmutex_unlock
 * took: both limit what one name can do.  "per_proc" lists the acquisitions
 * of each process, "thread_min"/"thread_max" those of the least and most
 * successful thread.  A scenario that failed prints "error" instead of
 * figures.
 * The exit status is 0 whether or not targets are met -- the benchmark
 * measures, it does not judge -- 1 when something failed (a lock call
 * returned an unexpected error, a worker hung, Redis did not start), 2 for
 * a usage error.
 *
 * SCENARIOS (-s picks some, default all, always in this order; -d is the
 * measured time of each, default 5 s):
 *   uncontended        1 process x 1 thread, one name, lock+unlock in a loop.
 *                      "cycles_per_s"; target 0.9 x rtt_bound_per_s.
 *   server_cpu         What a cycle costs the server.  One worker process
 *                      locks and unlocks one name; the reference is the
 *                      commands a plain SET-NX lock sends, run by the main
 *                      process on a hiredis connection of its own: EVALSHA
 *                      of a script doing SET key value NX PX lease, EVALSHA
 *                      of one doing GET, compare, DEL, with a fresh
 *                      32-hex-digit value per cycle.  The two take turns in
 *                      200 ms chunks ("chunk_ms"), in the order ABBA ABBA,
 *                      -d seconds each, so both see the same machine load.
 *                      Around every chunk the main process reads INFO cpu
 *                      (used_cpu_user + used_cpu_sys of the server's main
 *                      thread: "cpu_source" "main_thread", or "process" on
 *                      a server that does not report it) and INFO
 *                      commandstats.  With the private server, its main
 *                      thread and the bench's processes are pinned to one
 *                      CPU for this scenario ("pinned_cpu", -1 with -u):
 *                      across cores, wake-ups and idle exits made the
 *                      figure vary up to 4x between chunks.
 *                      "server_cpu_us_per_cycle",
 *                      "reference_cpu_us_per_cycle";
 *                      "cpu_ratio_to_reference" = the first / the second,
 *                      target <= 1.  "redis_calls_per_cycle" = commands
 *                      the server ran per cycle, those run inside scripts
 *                      included (the bench's INFO calls excluded), and
 *                      "calls_per_cycle" the same by command;
 *                      "reference_calls_per_cycle".  (An idle server's
 *                      cron, ~2 ms of CPU per second, is in both and not
 *                      subtracted.)
 *   contended_procs    4 processes x 1 thread, one name, hold 1 ms, think
 *                      1 ms.  Then the reference: the same load (processes,
 *                      sleeps, duration) on a process-shared pthread mutex
 *                      in the board, "pthread_acq_per_s",
 *                      "pthread_wait_p50_ms", "pthread_wait_p99_ms",
 *                      "pthread_fairness".  "acq_per_s" (total acquisitions
 *                      per second), target 0.9 x pthread_acq_per_s;
 *                      "ideal_per_s" is the most the hold and think times
 *                      allow (1,000/s by default: the lock is never idle);
 *                      wait p50/p99/max, target p99 <= 5 ms; "fairness" =
 *                      min/max acquisitions per process, target >= 0.8.
 *   handoff            How long the lock takes to change hands.  2 processes
 *                      pass one name back and forth: the holder waits until
 *                      the other has been inside netmutex_lock for
 *                      "settle_us" (2 ms: its request is queued by then),
 *                      then unlocks.  A sample is the time from the start of
 *                      the holder's netmutex_unlock call to the return of
 *                      the waiter's netmutex_lock, both stamped with
 *                      CLOCK_MONOTONIC on the board.  "handoff_p50_us",
 *                      "handoff_p99_us", "handoff_max_us"; "unlock_p50_us",
 *                      "unlock_p99_us" = the unlock call alone;
 *                      "handoff_p50_rtt" = handoff_p50_us / rtt_us, target
 *                      <= 2.
 *   threads            1 process x 8 threads, one name, empty critical
 *                      section.  "acq_per_s", target >= 100,000; well above
 *                      rtt_bound_per_s only if threads hand the lock to
 *                      each other without a round trip.
 *   threads_two_procs  2 processes x 8 threads, one name, empty critical
 *                      section.  "acq_per_s" and "min_proc_share", the
 *                      smallest share of acquisitions a process got; target
 *                      >= 1/3 with two processes (in general 2/3 of an even
 *                      share, 2/(3 x procs)).
 *   residue            What the server keeps of names no longer used.  One
 *                      process locks and unlocks N distinct names one after
 *                      the other (-n, default 20,000) with a short lease
 *                      (--lease-ms, default 500), each with a netmutex_t of
 *                      its own, destroyed after use.  Before the first,
 *                      right after the last and 2 leases after it:
 *                      "used_memory_*" (INFO memory), "dbsize_*" (the whole
 *                      database, other scenarios' keys included) and
 *                      "keys_*" = live keys whose names contain the
 *                      scenario's mutex names (SCAN MATCH).  "keys_after";
 *                      "keys_after_2_leases", target 0;
 *                      "bytes_per_name_after" and
 *                      "bytes_per_name_after_2_leases" = growth of
 *                      used_memory since before the first, per name, target
 *                      <= 16 for the latter.
 *   many_locks         One process locks N distinct names (-n, default
 *                      100,000) with a short lease (--lease-ms, default
 *                      3,000), holds them for 3 lease periods while the
 *                      watchdog renews them, then unlocks them all.
 *                      "lost" = unlocks that returned ENOLCK, target 0;
 *                      "rss_bytes_per_lock" = growth of VmRSS from before
 *                      the first lock to the end of the hold, per lock,
 *                      target <= 1024; "acquire_s", "release_s";
 *                      "renew_evalsha_calls" and "renew_pexpire_calls" =
 *                      script calls and key renewals (PEXPIREs, most of
 *                      them run inside the renew script) the server
 *                      counted (INFO commandstats) during the hold period
 *                      alone; "key_renewals_expected" = N x the renewal
 *                      rounds a hold of that length needs.  Many keys per
 *                      call ("keys_per_renew_call") means the renewals are
 *                      batched.
 *   fair_procs         contended_procs with the mutex in fair mode; prints
 *                      "skipped" while netmutex.h has no fair mode.  Its
 *                      pthread reference is the same plain mutex (pthread
 *                      mutexes have no fair mode).
 *   quorum_uncontended uncontended in quorum mode: server 0 and two more
 *                      private servers started for it (not available with
 *                      -u).  "cycles_per_s"; "cycle_time_ratio" = this
 *                      run's single-server rate / the quorum rate, target
 *                      <= 1.3 (needs the uncontended scenario in the run).
 *   quorum_contended_procs  contended_procs in quorum mode, with its
 *                      "cycle_time_ratio" to contended_procs (no target).
 * -p, -t, --hold-us and --think-us replace the defaults of contended_procs,
 * threads, threads_two_procs and fair_procs (and of their pthread
 * references); uncontended, server_cpu and handoff stay as described.
 * -n and --lease-ms apply to residue and many_locks.
 * Targets other than the fixed ones (p99, fairness, lost, RSS) follow the
 * parameters, as described above.
 *
 * HOW IT RUNS.  The main process never uses netmutex (server_cpu's
 * reference lock runs there, on a plain hiredis connection): each scenario
 * runs in freshly forked worker processes, which configure the library
 * after the fork as an application would, so one scenario's connections,
 * watchdog thread and memory do not colour the next.  Workers write their
 * counts and wait samples to a shared anonymous mapping (the "board") that
 * the main process reads once they have exited.  Each worker thread locks
 * and unlocks once before the start signal, so dialing Redis and loading
 * the scripts are not measured.  Mutex names start with "nm_bench/PID/",
 * so runs against a shared server do not meet each other's keys.
 *
 * FILES.  server_cpu, handoff and residue are in scenarios_footprint.c;
 * what the scenario files share with this one is declared in nm_bench.h.
 */
#include "ac_config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <hiredis/hiredis.h>

#include <netmutex.h>

#include "nm_bench.h"

#ifndef REDIS_SERVER_PATH
#define REDIS_SERVER_PATH "redis-server"
#endif

/* Fair mode (netmutex_attr_setfair) is in the library: the fair_procs
 * scenario runs.  0 would print a "skipped" line instead. */
#define HAVE_FAIR_MODE 1

#define RTT_PINGS 2000
#define MAX_THREADS 256
#define MAX_WORKERS 256              /* procs x threads */
#define SAMPLE_CAP (1u << 16)        /* wait samples kept per thread */
#define DEFAULT_RENEW_PERCENT 33     /* the library's, for the estimate */

/* ===================================================================== */
/* options and process-wide state                                         */
/* ===================================================================== */

bench_opt_t opt = { NULL, 0, 5.0, -1, -1, -1, -1, -1, -1 };

static pid_t main_pid;
double rtt_us;
static const char *server_kind = "url";
char server_url[640];
static char name_prefix[64];         /* "nm_bench/PID" */

long opt_or(long v, long d)
{
    return v > 0 ? v : d;
}

void complain(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("nm_bench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* The errno values netmutex documents, by name: "ENOLCK" says more in a
 * JSON line than "No locks available". */
const char *errname(int err)
{
    switch (err) {
    case EINVAL: return "EINVAL";
    case ENOMEM: return "ENOMEM";
    case EACCES: return "EACCES";
    case EPROTO: return "EPROTO";
    case EDEADLK: return "EDEADLK";
    case EAGAIN: return "EAGAIN";
    case EBUSY: return "EBUSY";
    case EPERM: return "EPERM";
    case ENOLCK: return "ENOLCK";
    case EIO: return "EIO";
    case ETIMEDOUT: return "ETIMEDOUT";
    case EOWNERDEAD: return "EOWNERDEAD";
    case ENOTRECOVERABLE: return "ENOTRECOVERABLE";
    case ENOTSUP: return "ENOTSUP";
    default: return strerror(err);
    }
}

/* ===================================================================== */
/* time, statistics                                                       */
/* ===================================================================== */

int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Sleeps, not spins: with 2 cores and several workers, a spinning holder
 * would steal the CPU its waiters and the server need. */
void sleep_us(long us)
{
    if (us <= 0)
        return;
    struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };
    while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
        ;
}

int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile (P in (0, 1]) of V[0..N), sorted ascending. */
double percentile(const double *v, size_t n, double p)
{
    if (n == 0)
        return NAN;
    size_t rank = (size_t)(p * (double)n);
    if ((double)rank < p * (double)n)
        rank++;
    return v[rank == 0 ? 0 : rank - 1];
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return percentile(v, n, 0.5);
}

/* VmRSS of this process in kB, or -1. */
static long vmrss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

/* ===================================================================== */
/* JSON lines                                                             */
/* ===================================================================== */

void j_raw(jline_t *j, const char *fmt, ...)
{
    va_list ap;
    if (j->len >= sizeof j->buf)
        return;
    va_start(ap, fmt);
    int n = vsnprintf(j->buf + j->len, sizeof j->buf - j->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        j->len = j->len + (size_t)n < sizeof j->buf ? j->len + (size_t)n : sizeof j->buf;
}

/* Keys are literals of this file: they need no escaping. */
void j_key(jline_t *j, const char *key)
{
    j_raw(j, "%s\"%s\":", j->len > 1 ? "," : "", key);
}

void j_str(jline_t *j, const char *key, const char *s)
{
    j_key(j, key);
    j_raw(j, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            j_raw(j, "\\%c", c);
        else if (c < 0x20)
            j_raw(j, "\\u%04x", c);
        else
            j_raw(j, "%c", c);
    }
    j_raw(j, "\"");
}

void j_int(jline_t *j, const char *key, long long v)
{
    j_key(j, key);
    j_raw(j, "%lld", v);
}

/* JSON has no NaN or infinity: they become null. */
void j_num(jline_t *j, const char *key, double v)
{
    j_key(j, key);
    if (isfinite(v))
        j_raw(j, "%.6g", v);
    else
        j_raw(j, "null");
}

void j_bool(jline_t *j, const char *key, int v)
{
    j_key(j, key);
    j_raw(j, v ? "true" : "false");
}

static void j_int_array(jline_t *j, const char *key, const uint64_t *v, size_t n)
{
    j_key(j, key);
    j_raw(j, "[");
    for (size_t i = 0; i < n; i++)
        j_raw(j, "%s%llu", i ? "," : "", (unsigned long long)v[i]);
    j_raw(j, "]");
}

/* A figure with its target: see "OUTPUT" at the top. */
void j_figure(jline_t *j, const char *name, double value, double target, int sense)
{
    char key[96];
    int meets = sense == AT_LEAST ? value >= target : value <= target;
    j_num(j, name, value);
    snprintf(key, sizeof key, "%s_target", name);
    j_num(j, key, target);
    if (target != 0) {
        snprintf(key, sizeof key, "%s_vs_target", name);
        j_num(j, key, value / target);
    }
    snprintf(key, sizeof key, "%s_meets_target", name);
    j_bool(j, key, meets);
    j->targets++;
    j->met += meets;
}

/* Every line starts alike, so lines from different runs can be compared. */
void j_begin(jline_t *j, const char *scenario)
{
    j->len = 0;
    j->targets = j->met = 0;
    j_raw(j, "{");
    j_str(j, "scenario", scenario);
    j_str(j, "server", server_kind);
    j_num(j, "rtt_us", rtt_us);
}

void j_end(jline_t *j)
{
    if (j->targets)
        j_bool(j, "meets_all_targets", j->met == j->targets);
    j_raw(j, "}");
    fwrite(j->buf, 1, j->len, stdout);
    fputc('\n', stdout);
    fflush(stdout);
}

/* The line of a scenario that could not be measured.  Returns -1. */
int report_error(const char *scenario, const char *msg)
{
    jline_t j;
    j_begin(&j, scenario);
    j_str(&j, "error", msg);
    j_end(&j);
    return -1;
}

/* ===================================================================== */
/* talking to Redis directly: RTT and server counters                     */
/* ===================================================================== */

/* Where an admin connection goes: the first server of a netmutex URL
 * (unix://[[user]:pass@]/path[?db=N] or redis://[[user]:pass@]host[:port][/db]). */
typedef struct {
    char path[256];          /* unix socket; empty for TCP */
    char host[256];
    int port;
    char user[128], pass[256];
    int db;
} endpoint_t;

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Copies S[0..N) to OUT, decoding %XX escapes.  -1 if it does not fit. */
static int pct_decode(const char *s, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '%' && i + 2 < n && hex_digit(s[i + 1]) >= 0 && hex_digit(s[i + 2]) >= 0) {
            c = (char)(hex_digit(s[i + 1]) * 16 + hex_digit(s[i + 2]));
            i += 2;
        }
        if (o + 1 >= cap)
            return -1;
        out[o++] = c;
    }
    out[o] = '\0';
    return 0;
}

static int parse_url(const char *url, endpoint_t *ep)
{
    const char *p, *end = url + strcspn(url, ",");
    int is_unix = strncmp(url, "unix://", 7) == 0;

    memset(ep, 0, sizeof *ep);
    ep->port = 6379;
    if (is_unix)
        p = url + 7;
    else if (strncmp(url, "redis://", 8) == 0)
        p = url + 8;
    else
        return -1;

    /* Credentials come before the first '/' in both forms. */
    const char *slash = memchr(p, '/', (size_t)(end - p));
    const char *auth_end = slash ? slash : end, *at = NULL;
    for (const char *q = p; q < auth_end; q++)
        if (*q == '@')
            at = q;
    if (at) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        if (colon && pct_decode(p, (size_t)(colon - p), ep->user, sizeof ep->user) != 0)
            return -1;
        const char *pw = colon ? colon + 1 : p;
        if (pct_decode(pw, (size_t)(at - pw), ep->pass, sizeof ep->pass) != 0)
            return -1;
        p = at + 1;
    }

    if (is_unix) {
        const char *q = memchr(p, '?', (size_t)(end - p));
        if (pct_decode(p, (size_t)((q ? q : end) - p), ep->path, sizeof ep->path) != 0)
            return -1;
        if (q && strncmp(q, "?db=", 4) == 0)
            ep->db = atoi(q + 4);
        return ep->path[0] == '/' ? 0 : -1;
    }
    const char *host_end;
    if (*p == '[') {
        host_end = memchr(p, ']', (size_t)(end - p));
        if (!host_end)
            return -1;
        p++;
    } else {
        host_end = p + strcspn(p, ":/,");
    }
    if (pct_decode(p, (size_t)(host_end - p), ep->host, sizeof ep->host) != 0)
        return -1;
    p = host_end + (*host_end == ']');
    if (*p == ':')
        ep->port = atoi(p + 1);
    const char *db = memchr(p, '/', (size_t)(end - p));
    if (db)
        ep->db = atoi(db + 1);
    return ep->host[0] ? 0 : -1;
}

/* A command whose reply must not be an error; NULL after a message. */
redisReply *admin_cmd(redisContext *c, const char *what, int argc, const char **argv)
{
    redisReply *r = redisCommandArgv(c, argc, argv, NULL);
    if (!r) {
        complain("%s: %s", what, c->errstr);
        return NULL;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        complain("%s: %s", what, r->str);
        freeReplyObject(r);
        return NULL;
    }
    return r;
}

/* The same for a command whose reply is not needed: 0, or -1. */
int admin_do(redisContext *c, const char *what, int argc, const char **argv)
{
    redisReply *r = admin_cmd(c, what, argc, argv);
    if (!r)
        return -1;
    freeReplyObject(r);
    return 0;
}

/* A plain hiredis connection to server_url, authenticated and on the
 * right database; NULL after a message. */
redisContext *admin_connect(void)
{
    endpoint_t ep;
    struct timeval tv = { 5, 0 };
    if (parse_url(server_url, &ep) != 0) {
        complain("cannot parse the URL %s", server_url);
        return NULL;
    }
    redisContext *c = ep.path[0] ? redisConnectUnixWithTimeout(ep.path, tv)
                                 : redisConnectWithTimeout(ep.host, ep.port, tv);
    if (!c || c->err) {
        complain("connecting to %s: %s", server_url, c ? c->errstr : "out of memory");
        if (c)
            redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    int ok = 1;
    if (ep.pass[0] && ep.user[0])
        ok = admin_do(c, "AUTH", 3, (const char *[]){ "AUTH", ep.user, ep.pass }) == 0;
    else if (ep.pass[0])
        ok = admin_do(c, "AUTH", 2, (const char *[]){ "AUTH", ep.pass }) == 0;
    if (ok && ep.db) {
        char db[16];
        snprintf(db, sizeof db, "%d", ep.db);
        ok = admin_do(c, "SELECT", 2, (const char *[]){ "SELECT", db }) == 0;
    }
    if (!ok) {
        redisFree(c);
        return NULL;
    }
    return c;
}

/* Median time of RTT_PINGS PINGs, in us; -1 after a message. */
static double measure_rtt(void)
{
    static double v[RTT_PINGS];
    redisContext *c = admin_connect();
    if (!c)
        return -1;
    for (int i = 0; i < RTT_PINGS; i++) {
        int64_t t0 = now_ns();
        redisReply *r = admin_cmd(c, "PING", 1, (const char *[]){ "PING" });
        v[i] = (double)(now_ns() - t0) / 1e3;
        if (!r) {
            redisFree(c);
            return -1;
        }
        freeReplyObject(r);
    }
    redisFree(c);
    return median(v, RTT_PINGS);
}

/* Redis counts the commands a script runs as well as the script itself. */
typedef struct {
    unsigned long long evalsha;   /* script calls */
    unsigned long long pexpire;   /* mostly from inside the renew script */
} cmdstats_t;

/* The server's command counters, from INFO commandstats. */
static int read_cmdstats(redisContext *c, cmdstats_t *out)
{
    redisReply *r = admin_cmd(c, "INFO commandstats", 2, (const char *[]){ "INFO", "commandstats" });
    if (!r)
        return -1;
    memset(out, 0, sizeof *out);
    /* Lines look like "cmdstat_evalsha:calls=12,usec=...". */
    for (const char *line = r->str; line; line = strchr(line, '\n')) {
        char cmd[64];
        unsigned long long calls;
        line += *line == '\n';
        if (sscanf(line, "cmdstat_%63[^:]:calls=%llu", cmd, &calls) != 2)
            continue;
        if (strcmp(cmd, "evalsha") == 0)
            out->evalsha = calls;
        else if (strcmp(cmd, "pexpire") == 0)
            out->pexpire = calls;
    }
    freeReplyObject(r);
    return 0;
}

/* ===================================================================== */
/* the private redis-server                                               */
/* ===================================================================== */

/* Only the main process touches these, and the signal handler only in the
 * main process (checked with getpid: workers inherit the handler). */
/* Server 0 serves every scenario; the quorum scenarios add servers 1 and 2
 * (independent masters) beside it. */
#define NSERVERS 3
static volatile pid_t redis_pid[NSERVERS];
static char tmp_dir[128], sock_path[NSERVERS][192], log_path[NSERVERS][192];

static void remove_tmp_dir(void)
{
    if (tmp_dir[0] == '\0')
        return;
    for (int i = 0; i < NSERVERS; i++) {
        unlink(sock_path[i]);
        unlink(log_path[i]);
    }
    rmdir(tmp_dir);
}

static void stop_redis(void)
{
    if (getpid() != main_pid)
        return;
    for (int i = 0; i < NSERVERS; i++) {
        pid_t pid = redis_pid[i];
        if (pid <= 0)
            continue;
        kill(pid, SIGTERM);
        while (waitpid(pid, NULL, 0) == -1 && errno == EINTR)
            ;
        redis_pid[i] = 0;
    }
    remove_tmp_dir();
    tmp_dir[0] = '\0';
}

/* Async-signal-safe cleanup, then death by the same signal.  Workers die
 * with us through PR_SET_PDEATHSIG. */
static void on_fatal_signal(int sig)
{
    if (getpid() == main_pid) {
        for (int i = 0; i < NSERVERS; i++)
            if (redis_pid[i] > 0) {
                kill(redis_pid[i], SIGTERM);
                waitpid(redis_pid[i], NULL, 0);
            }
        remove_tmp_dir();
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static void set_fatal_signals(void (*handler)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* A port nobody listens on right now.  Another program could take it
 * before redis-server does; start_redis then tries again. */
static int free_tcp_port(void)
{
    struct sockaddr_in sa = { .sin_family = AF_INET };
    socklen_t len = sizeof sa;
    int port = -1, fd = socket(AF_INET, SOCK_STREAM, 0);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
        port = ntohs(sa.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

/* Does server I answer PING on its unix socket?  (Used for readiness in
 * both modes: the socket is always there, even with --tcp.) */
static int redis_answers(int i)
{
    struct timeval tv = { 0, 200000 };
    redisContext *c = redisConnectUnixWithTimeout(sock_path[i], tv);
    int ok = 0;
    if (c && c->err == 0) {
        redisSetTimeout(c, tv);
        redisReply *r = redisCommand(c, "PING");
        ok = r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0;
        if (r)
            freeReplyObject(r);
    }
    if (c)
        redisFree(c);
    return ok;
}

static void print_log(int i)
{
    FILE *f = fopen(log_path[i], "r");
    char line[512];
    if (!f)
        return;
    while (fgets(line, sizeof line, f))
        fprintf(stderr, "  %s", line);
    fclose(f);
}

/* One attempt to start redis-server I on PORT (0: unix socket only);
 * waits, bounded, until it answers.  0, or -1 after a message. */
static int spawn_redis(int i, const char *server, int port)
{
    char port_arg[16];
    snprintf(port_arg, sizeof port_arg, "%d", port);

    fflush(NULL);
    pid_t pid = fork();
    if (pid == -1) {
        complain("fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        set_fatal_signals(SIG_DFL);
        /* Should nm_bench be killed outright, the server goes too. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != main_pid)
            _exit(127);
        int fd = open(log_path[i], O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd != -1) {
            dup2(fd, STDOUT_FILENO);
            dup2(fd, STDERR_FILENO);
            close(fd);
        }
        execlp(server, server, "--port", port_arg, "--bind", "127.0.0.1",
               "--unixsocket", sock_path[i], "--unixsocketperm", "700",
               "--dir", tmp_dir, "--save", "", "--appendonly", "no",
               "--daemonize", "no", (char *)NULL);
        fprintf(stderr, "exec %s: %s\n", server, strerror(errno));
        _exit(127);
    }
    redis_pid[i] = pid;
    for (int waited = 0; waited < READY_TIMEOUT_MS; waited += 20) {
        if (waitpid(pid, NULL, WNOHANG) == pid) {
            redis_pid[i] = 0;
            complain("%s exited before it was ready; its log:", server);
            print_log(i);
            return -1;
        }
        if (redis_answers(i))
            return 0;
        sleep_us(20000);
    }
    complain("%s did not answer on %s within %d ms", server, sock_path[i], READY_TIMEOUT_MS);
    stop_redis();
    return -1;
}

static const char *redis_binary(void)
{
    const char *server = getenv("REDIS_SERVER");
    return server && *server ? server : REDIS_SERVER_PATH;
}

/* Starts private server I (its socket and log in tmp_dir) and writes its
 * URL to URL.  0, or -1 after a message. */
static int start_server(int i, char *url, size_t url_size)
{
    snprintf(sock_path[i], sizeof sock_path[i], "%s/redis%d.sock", tmp_dir, i);
    snprintf(log_path[i], sizeof log_path[i], "%s/redis%d.log", tmp_dir, i);
    /* With --tcp, a port found free may be taken before the server binds
     * it: a few attempts. */
    for (int attempt = 0; attempt < (opt.tcp ? 3 : 1); attempt++) {
        int port = opt.tcp ? free_tcp_port() : 0;
        if (port < 0) {
            complain("no free TCP port on 127.0.0.1: %s", strerror(errno));
            return -1;
        }
        if (spawn_redis(i, redis_binary(), port) == 0) {
            if (opt.tcp)
                snprintf(url, url_size, "redis://127.0.0.1:%d", port);
            else
                snprintf(url, url_size, "unix://%s", sock_path[i]);
            return 0;
        }
    }
    return -1;
}

pid_t private_server_pid(void)
{
    return redis_pid[0];
}

/* Starts the private server and sets server_url.  0, or -1 after a message. */
static int start_redis(void)
{
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp)
        tmp = "/tmp";

    /* A unix socket path must fit in sun_path (108 bytes on Linux). */
    if ((size_t)snprintf(tmp_dir, sizeof tmp_dir, "%s/nm_bench.XXXXXX", tmp) >= 80) {
        tmp_dir[0] = '\0';
        complain("TMPDIR is too long for a unix socket path: %s", tmp);
        return -1;
    }
    if (!mkdtemp(tmp_dir)) {
        complain("mkdtemp %s: %s", tmp_dir, strerror(errno));
        tmp_dir[0] = '\0';
        return -1;
    }
    if (start_server(0, server_url, sizeof server_url) != 0)
        return -1;
    server_kind = opt.tcp ? "private-tcp" : "private-unix";
    return 0;
}

/* The quorum scenarios' URL list: server 0 and two more private servers,
 * started on first use.  NULL (after a message) when they cannot be had. */
static const char *quorum_url(void)
{
    static char list[sizeof server_url + 2 * 200];
    char one[200];
    if (list[0])
        return list;
    if (tmp_dir[0] == '\0') {
        complain("quorum scenarios need the private servers (no -u / NETMUTEX_URL)");
        return NULL;
    }
    snprintf(list, sizeof list, "%s", server_url);
    for (int i = 1; i < NSERVERS; i++) {
        if (start_server(i, one, sizeof one) != 0) {
            list[0] = '\0';
            return NULL;
        }
        strncat(list, ",", sizeof list - strlen(list) - 1);
        strncat(list, one, sizeof list - strlen(list) - 1);
    }
    return list;
}

/* ===================================================================== */
/* worker processes                                                       */
/* ===================================================================== */

/* Starts N processes running FN(ARG, i) and exiting 0 if it returns 0. */
int crew_spawn(crew_t *c, int n, crew_fn fn, void *arg)
{
    pid_t parent = getpid();
    memset(c, 0, sizeof *c);
    fflush(NULL);
    for (int i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid == -1) {
            complain("fork: %s", strerror(errno));
            return -1;
        }
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent)
                _exit(1);
            /* _exit, not exit: the parent's atexit cleanup is not ours. */
            _exit(fn(arg, i) == 0 ? 0 : 1);
        }
        c->pid[c->n++] = pid;
    }
    return 0;
}

/* Reaps the processes that have exited; returns how many still run. */
int crew_reap(crew_t *c)
{
    int running = 0;
    for (int i = 0; i < c->n; i++) {
        int status;
        if (c->pid[i] == 0)
            continue;
        pid_t r = waitpid(c->pid[i], &status, WNOHANG);
        if (r == c->pid[i] || (r == -1 && errno == ECHILD)) {
            if (r == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                c->failed = 1;
                if (r != -1 && WIFSIGNALED(status))
                    complain("worker %ld died of signal %d", (long)c->pid[i], WTERMSIG(status));
            }
            c->pid[i] = 0;
        } else {
            running++;
        }
    }
    return running;
}

void crew_kill(crew_t *c)
{
    for (int i = 0; i < c->n; i++)
        if (c->pid[i] > 0)
            kill(c->pid[i], SIGKILL);
    while (crew_reap(c) > 0)
        sleep_us(1000);
}

/* Waits until all have exited; kills them at DEADLINE_NS.  0 if all
 * exited in time and cleanly. */
int crew_wait(crew_t *c, int64_t deadline_ns)
{
    while (crew_reap(c) > 0) {
        if (now_ns() > deadline_ns) {
            crew_kill(c);
            return -1;
        }
        sleep_us(2000);
    }
    return c->failed ? -1 : 0;
}

/* ===================================================================== */
/* the lock loop: most scenarios are this with other knobs                */
/* ===================================================================== */

/* One worker thread's results. */
typedef struct {
    uint64_t acquisitions;   /* locks that returned within the period */
    uint64_t hold_ns;        /* time from lock's return to unlock's call */
    uint64_t unlock_ns;      /* time spent in netmutex_unlock, summed */
    uint32_t nsamples;       /* wait_us[0..nsamples) */
    float max_wait_us;
    int err;                 /* first unexpected netmutex error */
    char what[32];           /* the call that returned it */
    float wait_us[SAMPLE_CAP];
} slot_t;

/* Shared between the main process and the workers. */
typedef struct {
    int ready;               /* threads warmed up (atomic) */
    int go;                  /* set once end_ns is (atomic) */
    int64_t end_ns;
    pthread_mutex_t pmutex;  /* the reference runs' process-shared mutex */
    slot_t slots[];          /* procs x threads, process by process */
} board_t;

typedef struct {
    board_t *board;
    const load_t *load;
    const char *name;
} crew_job_t;

typedef struct {
    board_t *board;
    slot_t *slot;
    netmutex_t *m;           /* NULL in the pthread reference runs */
    const load_t *load;
    uint64_t rng;
} worker_t;

/* The lock under test: the netmutex, or in the reference runs the
 * process-shared pthread mutex on the board, taken the same way. */
static int w_lock(worker_t *w)
{
    return w->m ? netmutex_lock(w->m) : pthread_mutex_lock(&w->board->pmutex);
}

static int w_unlock(worker_t *w)
{
    return w->m ? netmutex_unlock(w->m) : pthread_mutex_unlock(&w->board->pmutex);
}

static const char *w_call(const worker_t *w, int unlock)
{
    if (w->m)
        return unlock ? "netmutex_unlock" : "netmutex_lock";
    return unlock ? "pthread_mutex_unlock" : "pthread_mutex_lock";
}

static void slot_fail(slot_t *s, const char *what, int err)
{
    s->err = err;
    snprintf(s->what, sizeof s->what, "%s", what);
}

/* Keeps every wait up to SAMPLE_CAP per thread, then a uniform sample of
 * them (reservoir sampling), so long runs do not favour their start. */
static void record_wait(worker_t *w, float us)
{
    slot_t *s = w->slot;
    uint64_t seen = s->acquisitions;   /* already counts this one */
    if (us > s->max_wait_us)
        s->max_wait_us = us;
    if (s->nsamples < SAMPLE_CAP) {
        s->wait_us[s->nsamples++] = us;
        return;
    }
    w->rng ^= w->rng << 13;            /* xorshift64 */
    w->rng ^= w->rng >> 7;
    w->rng ^= w->rng << 17;
    uint64_t k = w->rng % seen;
    if (k < SAMPLE_CAP)
        s->wait_us[k] = us;
}

static void *worker_thread(void *arg)
{
    worker_t *w = arg;
    int err;

    /* Warm-up: the thread's first lock dials Redis and loads the scripts. */
    if ((err = w_lock(w)) != 0)
        slot_fail(w->slot, w_call(w, 0), err);
    else if ((err = w_unlock(w)) != 0)
        slot_fail(w->slot, w_call(w, 1), err);
    __atomic_add_fetch(&w->board->ready, 1, __ATOMIC_SEQ_CST);
    if (err)
        return NULL;
    while (!__atomic_load_n(&w->board->go, __ATOMIC_ACQUIRE))
        sleep_us(100);

    int64_t end = w->board->end_ns;
    for (;;) {
        int64_t t0 = now_ns();
        if (t0 >= end)
            break;
        if ((err = w_lock(w)) != 0) {
            slot_fail(w->slot, w_call(w, 0), err);
            break;
        }
        int64_t t1 = now_ns();
        sleep_us(w->load->hold_us);
        int64_t t2 = now_ns();
        if ((err = w_unlock(w)) != 0) {
            slot_fail(w->slot, w_call(w, 1), err);
            break;
        }
        /* A lock that returned after the end is not part of the period. */
        if (t1 < end) {
            w->slot->acquisitions++;
            w->slot->hold_ns += (uint64_t)(t2 - t1);
            w->slot->unlock_ns += (uint64_t)(now_ns() - t2);
            record_wait(w, (float)(t1 - t0) / 1e3f);
        }
        sleep_us(w->load->think_us);
    }
    return NULL;
}

static int set_fair_mode(netmutex_attr_t *attr)
{
    return netmutex_attr_setfair(attr, 1);
}

/* Runs the process's threads on M (NULL: the board's pthread mutex) until
 * they are done.  Threads that never ran still count as ready, so the
 * main process sees the failure now instead of at its timeout. */
static int run_threads(crew_job_t *job, slot_t *slots, netmutex_t *m)
{
    const load_t *ld = job->load;
    pthread_t tid[MAX_THREADS];
    worker_t w[MAX_THREADS];
    int err = 0, started = 0;

    for (; started < ld->threads; started++) {
        w[started] = (worker_t){ job->board, &slots[started], m, ld,
                                 0x9e3779b97f4a7c15ull ^ ((uint64_t)getpid() << 16 | (uint64_t)started) };
        if ((err = pthread_create(&tid[started], NULL, worker_thread, &w[started])) != 0) {
            slot_fail(&slots[started], "pthread_create", err);
            break;
        }
    }
    for (int t = 0; t < started; t++)
        pthread_join(tid[t], NULL);
    __atomic_add_fetch(&job->board->ready, ld->threads - started, __ATOMIC_SEQ_CST);
    return err;
}

/* Worker process PROC: its own configuration, one netmutex_t shared by
 * its threads, as a program would have.  In the pthread reference runs,
 * only the threads. */
static int worker_process(void *arg, int proc)
{
    crew_job_t *job = arg;
    const load_t *ld = job->load;
    slot_t *slots = job->board->slots + (size_t)proc * (size_t)ld->threads;
    netmutex_config_t cfg = { .url = server_url };
    netmutex_attr_t attr;
    netmutex_t m;
    int err;

    if (ld->pthread_ref)
        return run_threads(job, slots, NULL);
    if ((err = netmutex_configure(&cfg)) != 0) {
        slot_fail(&slots[0], "netmutex_configure", err);
    } else if ((err = netmutex_attr_init(&attr)) != 0 ||
               (ld->fair && (err = set_fair_mode(&attr)) != 0)) {
        slot_fail(&slots[0], "netmutex_attr", err);
    } else if ((err = netmutex_init(&m, job->name, &attr)) != 0) {
        slot_fail(&slots[0], "netmutex_init", err);
    } else {
        netmutex_attr_destroy(&attr);
        if ((err = run_threads(job, slots, &m)) != 0)
            return err;
        if ((err = netmutex_destroy(&m)) != 0)
            slot_fail(&slots[0], "netmutex_destroy", err);
        else if ((err = netmutex_shutdown()) != 0)
            slot_fail(&slots[0], "netmutex_shutdown", err);
        return err;
    }
    /* Setup failed: no thread runs. */
    __atomic_add_fetch(&job->board->ready, ld->threads, __ATOMIC_SEQ_CST);
    return err;
}

/* What the board says, once the workers are gone. */
static int collect(const board_t *b, const load_t *ld, group_result_t *res)
{
    size_t nslots = (size_t)ld->procs * (size_t)ld->threads, n = 0;
    for (size_t i = 0; i < nslots; i++) {
        const slot_t *s = &b->slots[i];
        if (s->err) {
            snprintf(res->error, sizeof res->error, "%s: %s (process %zu, thread %zu)",
                     s->what, errname(s->err), i / (size_t)ld->threads, i % (size_t)ld->threads);
            return -1;
        }
        res->total += s->acquisitions;
        res->hold_mean_us += (double)s->hold_ns / 1e3;
        res->unlock_mean_us += (double)s->unlock_ns / 1e3;
        res->per_proc[i / (size_t)ld->threads] += s->acquisitions;
        if (i == 0 || s->acquisitions < res->thread_min)
            res->thread_min = s->acquisitions;
        if (s->acquisitions > res->thread_max)
            res->thread_max = s->acquisitions;
        if (s->max_wait_us > res->wait_max_us)
            res->wait_max_us = s->max_wait_us;
        n += s->nsamples;
    }
    res->hold_mean_us /= res->total ? (double)res->total : 1.0;
    res->unlock_mean_us /= res->total ? (double)res->total : 1.0;
    double *all = malloc((n ? n : 1) * sizeof *all);
    if (!all) {
        snprintf(res->error, sizeof res->error, "out of memory");
        return -1;
    }
    n = 0;
    for (size_t i = 0; i < nslots; i++)
        for (uint32_t k = 0; k < b->slots[i].nsamples; k++)
            all[n++] = b->slots[i].wait_us[k];
    qsort(all, n, sizeof *all, cmp_double);
    res->nsamples = n;
    res->wait_p50_us = percentile(all, n, 0.50);
    res->wait_p99_us = percentile(all, n, 0.99);
    free(all);
    return 0;
}

/* The reference runs' mutex, in the shared mapping where every worker
 * process sees it.  0, or an errno value. */
static int init_shared_mutex(pthread_mutex_t *pm)
{
    pthread_mutexattr_t a;
    int err = pthread_mutexattr_init(&a);
    if (err)
        return err;
    err = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    if (!err)
        err = pthread_mutex_init(pm, &a);
    pthread_mutexattr_destroy(&a);
    return err;
}

/* Runs LD on the mutex NAME (or LD->pthread_ref's pthread mutex) for
 * opt.duration_s and fills RES.  -1 with RES->error set when anything
 * failed. */
int run_load(const char *name, const load_t *ld, group_result_t *res)
{
    size_t nslots = (size_t)ld->procs * (size_t)ld->threads;
    size_t size = sizeof(board_t) + nslots * sizeof(slot_t);
    crew_t crew;
    int rc = -1;

    memset(res, 0, sizeof *res);
    /* Only the pages the workers write get memory. */
    board_t *b = mmap(NULL, size, PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (b == MAP_FAILED) {
        snprintf(res->error, sizeof res->error, "mmap: %s", strerror(errno));
        return -1;
    }
    int err = ld->pthread_ref ? init_shared_mutex(&b->pmutex) : 0;
    if (err) {
        snprintf(res->error, sizeof res->error, "pthread_mutex_init: %s", strerror(err));
        munmap(b, size);
        return -1;
    }
    crew_job_t job = { b, ld, name };
    if (crew_spawn(&crew, ld->procs, worker_process, &job) != 0) {
        crew_kill(&crew);
        snprintf(res->error, sizeof res->error, "fork failed");
        goto out;
    }

    int64_t deadline = now_ns() + (int64_t)READY_TIMEOUT_MS * 1000000;
    while (__atomic_load_n(&b->ready, __ATOMIC_SEQ_CST) < (int)nslots) {
        crew_reap(&crew);
        if (crew.failed || now_ns() > deadline) {
            crew_kill(&crew);
            if (collect(b, ld, res) == 0)
                snprintf(res->error, sizeof res->error,
                         crew.failed ? "a worker died during warm-up"
                                     : "workers not ready after %d ms", READY_TIMEOUT_MS);
            goto out;
        }
        sleep_us(1000);
    }

    int64_t start = now_ns();
    b->end_ns = start + (int64_t)(opt.duration_s * 1e9);
    __atomic_store_n(&b->go, 1, __ATOMIC_RELEASE);
    if (crew_wait(&crew, b->end_ns + (int64_t)HANG_GRACE_MS * 1000000) != 0) {
        if (collect(b, ld, res) == 0)
            snprintf(res->error, sizeof res->error,
                     crew.failed ? "a worker failed"
                                 : "workers still running %d ms after the end: a lock call hung",
                     HANG_GRACE_MS);
        goto out;
    }
    res->duration_s = (double)(b->end_ns - start) / 1e9;
    rc = collect(b, ld, res);
out:
    if (ld->pthread_ref)
        pthread_mutex_destroy(&b->pmutex);
    munmap(b, size);
    return rc;
}

/* Opt's -p, -t, --hold-us, --think-us over a scenario's defaults. */
static load_t with_overrides(load_t ld)
{
    if (opt.procs > 0)
        ld.procs = (int)opt.procs;
    if (opt.threads > 0)
        ld.threads = (int)opt.threads;
    if (opt.hold_us >= 0)
        ld.hold_us = opt.hold_us;
    if (opt.think_us >= 0)
        ld.think_us = opt.think_us;
    return ld;
}

void mutex_name(char *buf, size_t len, const char *what)
{
    snprintf(buf, len, "%s/%s", name_prefix, what);
}

/* Runs LD for SCENARIO and starts its JSON line with the parameters and
 * what every load scenario reports.  -1 after printing the error line. */
static int measure(const char *scenario, const load_t *ld, group_result_t *res, jline_t *j)
{
    char name[128];
    mutex_name(name, sizeof name, scenario);
    fprintf(stderr, "nm_bench: %s: %d process(es) x %d thread(s), hold %ld us, think %ld us, %g s\n",
            scenario, ld->procs, ld->threads, ld->hold_us, ld->think_us, opt.duration_s);
    if (run_load(name, ld, res) != 0)
        return report_error(scenario, res->error);

    j_begin(j, scenario);
    j_int(j, "procs", ld->procs);
    j_int(j, "threads", ld->threads);
    j_int(j, "hold_us", ld->hold_us);
    j_int(j, "think_us", ld->think_us);
    j_num(j, "duration_s", res->duration_s);
    j_int(j, "acquisitions", (long long)res->total);
    j_int_array(j, "per_proc", res->per_proc, (size_t)ld->procs);
    j_int(j, "thread_min", (long long)res->thread_min);
    j_int(j, "thread_max", (long long)res->thread_max);
    j_int(j, "wait_samples", (long long)res->nsamples);
    j_num(j, "wait_p50_ms", res->wait_p50_us / 1e3);
    /* The hold really slept (a sleep overshoots, on a busy host by a lot),
     * and the time unlock took: both eat into the lock's throughput. */
    j_num(j, "hold_mean_ms", res->hold_mean_us / 1e3);
    j_num(j, "unlock_mean_ms", res->unlock_mean_us / 1e3);
    return 0;
}

static double rate(const group_result_t *r)
{
    return (double)r->total / r->duration_s;
}

/* The RTT bound of a rate: one lock+unlock needs two round trips. */
static void j_rtt_bound(jline_t *j, double per_s)
{
    double bound = 1e6 / (2.0 * rtt_us);
    j_num(j, "rtt_bound_per_s", bound);
    j_num(j, "ratio_to_rtt_bound", per_s / bound);
}

static double min_over_max(const uint64_t *v, int n)
{
    uint64_t lo = v[0], hi = v[0];
    for (int i = 1; i < n; i++) {
        lo = v[i] < lo ? v[i] : lo;
        hi = v[i] > hi ? v[i] : hi;
    }
    return hi ? (double)lo / (double)hi : 0.0;
}

/* ===================================================================== */
/* scenarios                                                              */
/* ===================================================================== */

/* This run's single-server figures, for the quorum scenarios' ratios (0:
 * not measured in this run). */
static double single_cycles_per_s, single_contended_per_s;

static int sc_uncontended(const scenario_t *sc)
{
    group_result_t r;
    jline_t j;
    if (measure(sc->name, &sc->load, &r, &j) != 0)   /* never overridden */
        return -1;
    single_cycles_per_s = rate(&r);
    double bound = 1e6 / (2.0 * rtt_us);
    j_num(&j, "wait_p99_ms", r.wait_p99_us / 1e3);
    j_figure(&j, "cycles_per_s", rate(&r), 0.9 * bound, AT_LEAST);
    j_rtt_bound(&j, rate(&r));
    j_end(&j);
    return 0;
}

/* The same load on a process-shared pthread mutex: what the machine and
 * the hold/think sleeps allow a lock that costs nothing, in this run.
 * -1 after printing SCENARIO's error line. */
static int measure_pthread_ref(const char *scenario, const load_t *ld, group_result_t *ref)
{
    load_t pl = *ld;
    char msg[sizeof ref->error + 32];
    pl.pthread_ref = 1;
    pl.fair = 0;                       /* pthread mutexes have no fair mode */
    fprintf(stderr, "nm_bench: %s: the same load on a process-shared pthread mutex\n", scenario);
    if (run_load("pthread", &pl, ref) == 0)
        return 0;
    snprintf(msg, sizeof msg, "pthread reference: %s", ref->error);
    return report_error(scenario, msg);
}

/* contended_procs and fair_procs. */
static int contended(const scenario_t *sc, int fair)
{
    load_t ld = with_overrides(sc->load);
    group_result_t r, ref;
    jline_t j;
    ld.fair = fair;
    if (measure(sc->name, &ld, &r, &j) != 0 || measure_pthread_ref(sc->name, &ld, &ref) != 0)
        return -1;
    j_figure(&j, "wait_p99_ms", r.wait_p99_us / 1e3, 5.0, AT_MOST);
    j_num(&j, "wait_max_ms", r.wait_max_us / 1e3);
    /* The target is the pthread mutex's rate, measured under the same
     * timer slack and machine load, not the arithmetic ideal. */
    j_figure(&j, "acq_per_s", rate(&r), 0.9 * rate(&ref), AT_LEAST);
    j_num(&j, "pthread_acq_per_s", rate(&ref));
    j_num(&j, "pthread_wait_p50_ms", ref.wait_p50_us / 1e3);
    j_num(&j, "pthread_wait_p99_ms", ref.wait_p99_us / 1e3);
    j_num(&j, "pthread_fairness", min_over_max(ref.per_proc, ld.procs));
    /* The most the parameters allow: the lock busy all the time, or every
     * worker always either holding or thinking.  With no hold time the
     * round trips set the limit. */
    if (ld.hold_us > 0) {
        double workers = (double)ld.procs * ld.threads;
        double ideal = 1e6 / (double)ld.hold_us;
        double demand = workers * 1e6 / (double)(ld.hold_us + ld.think_us);
        j_num(&j, "ideal_per_s", demand < ideal ? demand : ideal);
    } else {
        j_rtt_bound(&j, rate(&r));
    }
    if (ld.procs > 1)
        j_figure(&j, "fairness", min_over_max(r.per_proc, ld.procs), 0.8, AT_LEAST);
    j_end(&j);
    if (!fair)
        single_contended_per_s = rate(&r);
    return 0;
}

/* measure() with the library pointed at three independent servers. */
static int measure_quorum(const scenario_t *sc, const load_t *ld, group_result_t *r, jline_t *j)
{
    char single[sizeof server_url];
    const char *list = quorum_url();
    if (!list)
        return report_error(sc->name, "the quorum servers could not be started");
    memcpy(single, server_url, sizeof single);
    snprintf(server_url, sizeof server_url, "%s", list);
    int rc = measure(sc->name, ld, r, j);
    memcpy(server_url, single, sizeof single);
    if (rc == 0)
        j_int(j, "servers", NSERVERS);
    return rc;
}

/* How many times longer a quorum cycle takes than a single-server one,
 * from two rates measured in this run (left out when the single-server
 * scenario did not run). */
static void j_vs_single(jline_t *j, double single_per_s, double quorum_per_s, double target)
{
    if (single_per_s <= 0 || quorum_per_s <= 0)
        return;
    j_num(j, "single_server_per_s", single_per_s);
    if (target > 0)
        j_figure(j, "cycle_time_ratio", single_per_s / quorum_per_s, target, AT_MOST);
    else
        j_num(j, "cycle_time_ratio", single_per_s / quorum_per_s);
}

static int sc_quorum_uncontended(const scenario_t *sc)
{
    group_result_t r;
    jline_t j;
    if (measure_quorum(sc, &sc->load, &r, &j) != 0)
        return -1;
    j_num(&j, "cycles_per_s", rate(&r));
    j_num(&j, "wait_p99_ms", r.wait_p99_us / 1e3);
    j_vs_single(&j, single_cycles_per_s, rate(&r), 1.3);
    j_end(&j);
    return 0;
}

static int sc_quorum_contended_procs(const scenario_t *sc)
{
    load_t ld = with_overrides(sc->load);
    group_result_t r;
    jline_t j;
    if (measure_quorum(sc, &ld, &r, &j) != 0)
        return -1;
    j_num(&j, "acq_per_s", rate(&r));
    j_num(&j, "wait_p50_ms", r.wait_p50_us / 1e3);
    j_num(&j, "wait_p99_ms", r.wait_p99_us / 1e3);
    j_num(&j, "fairness", min_over_max(r.per_proc, ld.procs));
    j_vs_single(&j, single_contended_per_s, rate(&r), 0);
    j_end(&j);
    return 0;
}

static int sc_contended_procs(const scenario_t *sc)
{
    return contended(sc, 0);
}

static int sc_fair_procs(const scenario_t *sc)
{
    if (!HAVE_FAIR_MODE) {
        jline_t j;
        j_begin(&j, sc->name);
        j_str(&j, "skipped", "no fair mode in this build");
        j_end(&j);
        return 0;
    }
    return contended(sc, 1);
}

static int sc_threads(const scenario_t *sc)
{
    load_t ld = with_overrides(sc->load);
    group_result_t r;
    jline_t j;
    if (measure(sc->name, &ld, &r, &j) != 0)
        return -1;
    j_num(&j, "wait_p99_ms", r.wait_p99_us / 1e3);
    j_num(&j, "wait_max_ms", r.wait_max_us / 1e3);
    j_figure(&j, "acq_per_s", rate(&r), 100000.0, AT_LEAST);
    j_rtt_bound(&j, rate(&r));
    j_num(&j, "thread_fairness", r.thread_max ? (double)r.thread_min / (double)r.thread_max : 0.0);
    j_end(&j);
    return 0;
}

static int sc_threads_two_procs(const scenario_t *sc)
{
    load_t ld = with_overrides(sc->load);
    group_result_t r;
    jline_t j;
    if (measure(sc->name, &ld, &r, &j) != 0)
        return -1;
    j_num(&j, "wait_p99_ms", r.wait_p99_us / 1e3);
    j_num(&j, "wait_max_ms", r.wait_max_us / 1e3);
    j_num(&j, "acq_per_s", rate(&r));
    j_rtt_bound(&j, rate(&r));
    uint64_t least = r.per_proc[0];
    for (int p = 1; p < ld.procs; p++)
        least = r.per_proc[p] < least ? r.per_proc[p] : least;
    double share = r.total ? (double)least / (double)r.total : 0.0;
    /* 2/3 of an even share: 1/3 each for the two processes of DESIGN.md. */
    j_figure(&j, "min_proc_share", share, 2.0 / (3.0 * ld.procs), AT_LEAST);
    j_end(&j);
    return 0;
}

/* ---- many_locks -------------------------------------------------------- */

#define MANY_LOCKS_N 100000          /* -n */
#define MANY_LOCKS_LEASE_MS 3000     /* --lease-ms */

static int lost_callbacks;   /* atomic */

static void count_lost(const char *name, void *arg)
{
    (void)name;
    __atomic_add_fetch((int *)arg, 1, __ATOMIC_SEQ_CST);
}

/* Runs in a process of its own (see sc_many_locks) and prints the line. */
static int many_locks_child(void *arg, int index)
{
    const char *scenario = ((const scenario_t *)arg)->name;
    size_t n = (size_t)opt_or(opt.n_locks, MANY_LOCKS_N), locked = 0, lost = 0, other = 0;
    long lease_ms = opt_or(opt.lease_ms, MANY_LOCKS_LEASE_MS);
    netmutex_config_t cfg = { .url = server_url };
    netmutex_attr_t attr;
    netmutex_t warm;
    char name[128], msg[192];
    int err, first_other = 0;
    (void)index;

    redisContext *admin = admin_connect();
    if (!admin)
        return report_error(scenario, "cannot connect to the server for INFO");
    /* The caller's own netmutex_t array is made resident before the
     * baseline: only the library's memory per lock should count. */
    netmutex_t *ms = malloc(n * sizeof *ms);
    if (!ms)
        return report_error(scenario, "out of memory");
    memset(ms, 0xa5, n * sizeof *ms);

    if ((err = netmutex_configure(&cfg)) != 0 || (err = netmutex_attr_init(&attr)) != 0 ||
        (err = netmutex_attr_setlease(&attr, (unsigned int)lease_ms)) != 0 ||
        (err = netmutex_attr_setlostfn(&attr, count_lost, &lost_callbacks)) != 0) {
        snprintf(msg, sizeof msg, "setup: %s", errname(err));
        return report_error(scenario, msg);
    }
    /* Warm-up: connection, scripts and the watchdog thread exist before
     * the baseline, so they are not charged to the locks. */
    mutex_name(name, sizeof name, "many/warm-up");
    if ((err = netmutex_init(&warm, name, &attr)) != 0 || (err = netmutex_lock(&warm)) != 0 ||
        (err = netmutex_unlock(&warm)) != 0 || (err = netmutex_destroy(&warm)) != 0) {
        snprintf(msg, sizeof msg, "warm-up: %s", errname(err));
        return report_error(scenario, msg);
    }

    long rss_before = vmrss_kb();
    int64_t t0 = now_ns();
    for (; locked < n; locked++) {
        char what[48];
        snprintf(what, sizeof what, "many/%zu", locked);
        mutex_name(name, sizeof name, what);
        if ((err = netmutex_init(&ms[locked], name, &attr)) != 0)
            break;
        if ((err = netmutex_lock(&ms[locked])) != 0) {
            netmutex_destroy(&ms[locked]);
            break;
        }
    }
    int64_t t1 = now_ns();
    if (err)
        snprintf(msg, sizeof msg, "lock %zu of %zu: %s", locked + 1, n, errname(err));

    /* The hold: only the watchdog talks to the server now, so the counters'
     * difference is its renewal traffic. */
    cmdstats_t s0 = { 0, 0 }, s1 = { 0, 0 };
    int stats_ok = 0;
    int64_t hold_ms = 3 * lease_ms;
    if (!err) {
        fprintf(stderr, "nm_bench: many_locks: holding %zu locks for %lld ms\n", n, (long long)hold_ms);
        stats_ok = read_cmdstats(admin, &s0) == 0;
        sleep_us((long)hold_ms * 1000);
        stats_ok = stats_ok && read_cmdstats(admin, &s1) == 0;
    }
    long rss_held = vmrss_kb();

    int64_t t2 = now_ns();
    for (size_t i = 0; i < locked; i++) {
        int e = netmutex_unlock(&ms[i]);
        if (e == ENOLCK) {
            lost++;
        } else if (e != 0) {
            other++;
            first_other = first_other ? first_other : e;
        }
        netmutex_destroy(&ms[i]);
    }
    int64_t t3 = now_ns();
    free(ms);
    redisFree(admin);
    if (err)
        return report_error(scenario, msg);

    jline_t j;
    j_begin(&j, scenario);
    j_int(&j, "locks", (long long)n);
    j_int(&j, "lease_ms", lease_ms);
    j_int(&j, "hold_ms", hold_ms);
    /* An acquisition alone needs one round trip: 1/rtt per second. */
    double acquire_rate = (double)n / ((double)(t1 - t0) / 1e9);
    j_num(&j, "acquire_s", (double)(t1 - t0) / 1e9);
    j_num(&j, "acquire_per_s", acquire_rate);
    j_num(&j, "acquire_ratio_to_rtt_bound", acquire_rate / (1e6 / rtt_us));
    j_num(&j, "release_s", (double)(t3 - t2) / 1e9);
    j_figure(&j, "lost", (double)lost, 0.0, AT_MOST);
    j_int(&j, "lost_callbacks", __atomic_load_n(&lost_callbacks, __ATOMIC_SEQ_CST));
    j_int(&j, "unlock_errors", (long long)other);
    j_int(&j, "rss_kb_before", rss_before);
    j_int(&j, "rss_kb_held", rss_held);
    j_figure(&j, "rss_bytes_per_lock", (double)(rss_held - rss_before) * 1024.0 / (double)n,
             1024.0, AT_MOST);
    if (stats_ok) {
        const char *env = getenv("NETMUTEX_RENEW_PERCENT");
        int pct = env && atoi(env) > 0 ? atoi(env) : DEFAULT_RENEW_PERCENT;
        double rounds = (double)hold_ms / ((double)lease_ms * pct / 100.0);
        unsigned long long calls = s1.evalsha - s0.evalsha;
        unsigned long long keys = s1.pexpire - s0.pexpire;
        j_int(&j, "renew_evalsha_calls", (long long)calls);
        j_int(&j, "renew_pexpire_calls", (long long)keys);
        j_num(&j, "renew_rounds_expected", rounds);
        j_num(&j, "key_renewals_expected", rounds * (double)n);
        j_num(&j, "keys_per_renew_call", calls ? (double)keys / (double)calls : NAN);
    }
    if (other) {
        snprintf(msg, sizeof msg, "%zu unlocks failed, first with %s", other, errname(first_other));
        j_str(&j, "error", msg);
    }
    j_end(&j);
    return other ? -1 : 0;
}

/* Its own process, so that VmRSS is the library's and nothing else's. */
static int sc_many_locks(const scenario_t *sc)
{
    crew_t crew;
    int64_t limit_ms = 3 * opt_or(opt.lease_ms, MANY_LOCKS_LEASE_MS) + 600000;   /* a hang, not a slow run */
    if (crew_spawn(&crew, 1, many_locks_child, (void *)sc) != 0) {
        crew_kill(&crew);
        return report_error(sc->name, "fork failed");
    }
    if (crew_wait(&crew, now_ns() + limit_ms * 1000000) != 0) {
        /* The child prints its own error line, unless it died or hung. */
        if (crew.failed)
            return -1;
        return report_error(sc->name, "still running after its time limit: killed");
    }
    return 0;
}

/* ===================================================================== */
/* main                                                                   */
/* ===================================================================== */

static const scenario_t scenarios[] = {
    { "uncontended", sc_uncontended, { 1, 1, 0, 0, 0, 0 } },
    { "server_cpu", sc_server_cpu, { 1, 1, 0, 0, 0, 0 } },
    { "contended_procs", sc_contended_procs, { 4, 1, 1000, 1000, 0, 0 } },
    { "handoff", sc_handoff, { 2, 1, 0, 0, 0, 0 } },
    { "threads", sc_threads, { 1, 8, 0, 0, 0, 0 } },
    { "threads_two_procs", sc_threads_two_procs, { 2, 8, 0, 0, 0, 0 } },
    { "residue", sc_residue, { 1, 1, 0, 0, 0, 0 } },
    { "many_locks", sc_many_locks, { 1, 1, 0, 0, 0, 0 } },
    { "fair_procs", sc_fair_procs, { 4, 1, 1000, 1000, 0, 0 } },
    { "quorum_uncontended", sc_quorum_uncontended, { 1, 1, 0, 0, 0, 0 } },
    { "quorum_contended_procs", sc_quorum_contended_procs, { 4, 1, 1000, 1000, 0, 0 } },
};
#define NSCENARIOS (sizeof scenarios / sizeof scenarios[0])

static void usage(FILE *f)
{
    fprintf(f,
            "usage: nm_bench [-u URL] [--tcp] [-s NAME[,NAME...]] [-d SECONDS] [-p PROCS]\n"
            "                [-t THREADS] [--hold-us US] [--think-us US] [-n LOCKS] [--lease-ms MS]\n"
            "  -u URL         Redis to use (default $NETMUTEX_URL, else a private redis-server)\n"
            "  --tcp          private server on 127.0.0.1 TCP instead of a unix socket\n"
            "  -s NAMES       scenarios, comma-separated (default all):\n"
            "                 ");
    for (size_t i = 0; i < NSCENARIOS; i++)
        fprintf(f, "%s%s", scenarios[i].name, i + 1 < NSCENARIOS ? " " : "\n");
    fprintf(f,
            "  -d SECONDS     measured time per scenario (default 5)\n"
            "  -p, -t         processes, threads per process (override the defaults)\n"
            "  --hold-us, --think-us  time in and between critical sections\n"
            "  -n LOCKS       many_locks, residue: how many names (default 100000, 20000)\n"
            "  --lease-ms MS  many_locks, residue: lease (default 3000, 500)\n"
            "One JSON line per scenario on stdout; see the top of nm_bench.c.\n");
}

static long parse_long(const char *s, long lo, long hi, const char *what)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        complain("%s: expected an integer from %ld to %ld, got '%s'", what, lo, hi, s);
        exit(2);
    }
    return v;
}

/* Which scenarios -s names, as a bit mask. */
static unsigned int parse_scenarios(const char *list)
{
    unsigned int mask = 0;
    char *copy = strdup(list), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        size_t i = 0;
        while (i < NSCENARIOS && strcmp(scenarios[i].name, tok) != 0)
            i++;
        if (i == NSCENARIOS) {
            complain("unknown scenario '%s'", tok);
            usage(stderr);
            exit(2);
        }
        mask |= 1u << i;
    }
    free(copy);
    return mask;
}

enum { OPT_TCP = 256, OPT_HOLD, OPT_THINK, OPT_LEASE };

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "url", required_argument, NULL, 'u' },
        { "tcp", no_argument, NULL, OPT_TCP },
        { "scenarios", required_argument, NULL, 's' },
        { "duration", required_argument, NULL, 'd' },
        { "procs", required_argument, NULL, 'p' },
        { "threads", required_argument, NULL, 't' },
        { "hold-us", required_argument, NULL, OPT_HOLD },
        { "think-us", required_argument, NULL, OPT_THINK },
        { "locks", required_argument, NULL, 'n' },
        { "lease-ms", required_argument, NULL, OPT_LEASE },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    unsigned int selected = (1u << NSCENARIOS) - 1;
    int c, failures = 0;

    while ((c = getopt_long(argc, argv, "u:s:d:p:t:n:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'u': opt.url = optarg; break;
        case OPT_TCP: opt.tcp = 1; break;
        case 's': selected = parse_scenarios(optarg); break;
        case 'd': {
            char *end;
            opt.duration_s = strtod(optarg, &end);
            if (end == optarg || *end || !(opt.duration_s > 0 && opt.duration_s <= 3600)) {
                complain("-d: expected seconds in (0, 3600], got '%s'", optarg);
                return 2;
            }
            break;
        }
        case 'p': opt.procs = parse_long(optarg, 1, MAX_PROCS, "-p"); break;
        case 't': opt.threads = parse_long(optarg, 1, MAX_THREADS, "-t"); break;
        case OPT_HOLD: opt.hold_us = parse_long(optarg, 0, 10000000, "--hold-us"); break;
        case OPT_THINK: opt.think_us = parse_long(optarg, 0, 10000000, "--think-us"); break;
        case 'n': opt.n_locks = parse_long(optarg, 1, 10000000, "-n"); break;
        case OPT_LEASE:
            opt.lease_ms = parse_long(optarg, NETMUTEX_LEASE_MIN_MS, 600000, "--lease-ms");
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        usage(stderr);
        return 2;
    }
    for (size_t i = 0; i < NSCENARIOS; i++) {
        load_t ld = with_overrides(scenarios[i].load);
        if ((selected & (1u << i)) && ld.procs * ld.threads > MAX_WORKERS) {
            complain("%s: %d processes x %d threads is more than %d workers",
                     scenarios[i].name, ld.procs, ld.threads, MAX_WORKERS);
            return 2;
        }
    }

    main_pid = getpid();
    snprintf(name_prefix, sizeof name_prefix, "nm_bench/%ld", (long)main_pid);
    /* A server that goes away must surface as an error, not kill us. */
    signal(SIGPIPE, SIG_IGN);
    set_fatal_signals(on_fatal_signal);
    atexit(stop_redis);

    if (!opt.url) {
        const char *env = getenv("NETMUTEX_URL");
        opt.url = env && *env ? env : NULL;
    }
    if (opt.url) {
        if (opt.tcp)
            complain("--tcp is ignored with a URL");
        snprintf(server_url, sizeof server_url, "%s", opt.url);
    } else if (start_redis() != 0) {
        return 1;
    }
    if ((rtt_us = measure_rtt()) < 0)
        return 1;
    fprintf(stderr, "nm_bench: %s server %s, PING round trip %.1f us (median of %d)\n",
            server_kind, server_url, rtt_us, RTT_PINGS);

    for (size_t i = 0; i < NSCENARIOS; i++)
        if ((selected & (1u << i)) && scenarios[i].run(&scenarios[i]) != 0)
            failures++;
    return failures ? 1 : 0;
}
