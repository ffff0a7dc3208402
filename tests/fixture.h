/*
 * fixture.h -- shared helpers for the netmutex test programs.
 *
 * Every test program starts one private redis-server (unix socket in a fresh
 * temporary directory, optionally a TCP port on 127.0.0.1), runs its GLib
 * test cases against it and stops it.  The helpers here exist so that the
 * test programs themselves only say *what* they check:
 *
 *   - time:       a slowdown factor (NETMUTEX_TEST_SLOWDOWN) scales every
 *                 time bound, so valgrind and TSan runs are not flaky;
 *   - the server: start/stop/restart/pause, raw commands for assertions;
 *   - threads:    run a call in a thread and wait for it with a bound, hold a
 *                 netmutex in another thread;
 *   - processes:  fork a worker (which dies with the test), wait for it with a
 *                 bound, drive a netmutex in another process over pipes;
 *   - assertions: errno results printed by name;
 *   - the log:    the library's messages kept, to say what it told people.
 */
#ifndef NM_TEST_FIXTURE_H
#define NM_TEST_FIXTURE_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/types.h>
#include <time.h>

#include <glib.h>
#include <hiredis.h>

#include "netmutex.h"

G_BEGIN_DECLS

/* ---- program setup ---------------------------------------------------- */

/* g_test_init plus what every program needs: NETMUTEX_* variables from the
 * caller's environment removed (so a developer's shell cannot change the
 * outcome), SIGPIPE ignored (a killed server must not kill the test). */
void nm_test_init(int *argc, char ***argv);

/* Every case a program registers runs under a time limit: 180 s scaled
 * by the slowdown, or NETMUTEX_TEST_CASE_SECONDS (0: none).  A case still
 * running then is named on both streams ("Bail out!") and the program
 * aborts, taking its servers with it, instead of blocking `make check`.
 * The two macros route GLib's registrations through it (fixture_case.c);
 * a program whose cases are meant to run longer says by how much. */
void nm_test_add_func(const char *path, GTestFunc fn);
void nm_test_add_data_func(const char *path, gconstpointer data, GTestDataFunc fn);
#define g_test_add_func(path, fn) nm_test_add_func((path), (fn))
#define g_test_add_data_func(path, data, fn) nm_test_add_data_func((path), (data), (fn))
void nm_test_case_allow(unsigned int seconds);

/* For programs that check what the server sees at each lock and unlock:
 * turns lease caching (on by default, which keeps a lease after unlock)
 * off in this process and the processes it starts (NETMUTEX_CACHE=0).  The
 * behaviour suites run with caching on; test_cache.c tests it. */
void nm_test_cache_off(void);

/* netmutex_shutdown() for the main thread, so leak checkers see no open
 * connection at exit; returns g_test_run()'s value for `return`, or 1 if
 * shutdown failed (a mutex was left held). */
int nm_test_finish(int run_result);

/* A name unique to the running test case: "<test path>/<suffix>". */
char *nm_test_name(const char *suffix);

/* Registers FN four times, as PATH/normal, PATH/errorcheck, PATH/recursive
 * and PATH/default, with the mutex type as its data (GINT_TO_POINTER). */
void nm_test_add_for_types(const char *path, GTestDataFunc fn);
const char *nm_type_name(int type);

/* netmutex_init of M named nm_test_name(SUFFIX), with TYPE and LEASE_MS
 * (0: the configured default); asserts success.  Returns the name. */
char *nm_mutex_init(netmutex_t *m, const char *suffix, int type,
                    unsigned int lease_ms);

/* False in an AddressSanitizer build: its allocator (GCC 12's libasan) is
 * not locked across fork(), so a child forked while another thread is in
 * malloc can block forever on the first allocation of that size.  Tests
 * that fork while threads run (the library's watchdog, say) skip then. */
bool nm_fork_with_threads_is_safe(void);

/* False in a sanitizer build: a thread cancelled where a wait sleeps, in
 * poll(2), unwinds from the sanitizer's own interceptor, and the sanitizer
 * loses track of it (ASan: the frames left keep their poisoned redzones;
 * TSan: the clean-up handler's locks go unseen, its accesses look like
 * races).  Cancellations at the C library's own points are unaffected. */
bool nm_cancel_in_poll_is_checkable(void);

/* ---- time ------------------------------------------------------------- */

/* NETMUTEX_TEST_SLOWDOWN, at least 1. */
double nm_slowdown(void);
/* MS milliseconds scaled by the slowdown factor. */
unsigned int nm_ms(unsigned int ms);
/* CLOCK_MONOTONIC in milliseconds.  (nmt_, here and in nmt_sleep_ms: the
 * library has an nm_now_ms and an nm_sleep_ms of its own, src/base/clock.h,
 * which a test that links internals must still be able to see.) */
gint64 nmt_now_ms(void);
/* *TS = now on CLOCK + MS milliseconds (MS is not scaled here). */
void nm_deadline(struct timespec *ts, clockid_t clock, unsigned int ms);
/* Sleeps MS milliseconds (not scaled). */
void nmt_sleep_ms(unsigned int ms);
/* Compare two timespecs: <0, 0, >0. */
int nm_timespec_cmp(const struct timespec *a, const struct timespec *b);
/* Asserts that a call that returned ETIMEDOUT at RETURNED (read on the
 * deadline's clock right after the call) did not return before DEADLINE,
 * and did return within LATE_MS (not scaled) after it. */
void nm_assert_timed_out_at(const struct timespec *returned,
                            const struct timespec *deadline,
                            unsigned int late_ms);

/* ---- assertions ------------------------------------------------------- */

/* "EBUSY", "0", ... for the values this library returns (netmutex_errname),
 * "(other errno)" for any other. */
const char *nm_errname(int rc);

/* Asserts that EXPR (an int) equals WANT and prints both by name. */
#define nm_assert_rc(expr, want)                                              \
    do {                                                                      \
        int nm_rc_ = (expr);                                                  \
        int nm_want_ = (want);                                                \
        if (nm_rc_ != nm_want_)                                               \
            nm_assert_rc_failed(__FILE__, __LINE__, G_STRFUNC, #expr, nm_rc_, \
                                nm_want_);                                    \
    } while (0)

void nm_assert_rc_failed(const char *file, int line, const char *func,
                         const char *expr, int got, int want);

/* True if S is exactly 32 lowercase hex digits (an acquisition token), or
 * a lock key's value, which starts with one (src/lua/lib.lua). */
bool nm_is_token(const char *s);

/* ---- the private redis-server ----------------------------------------- */

typedef struct NmRedis NmRedis;

typedef struct NmRedisOpts {
    bool tcp;                /* also listen on 127.0.0.1:<free port> */
    const char *requirepass; /* NULL: no password */
    bool debug_command;      /* --enable-debug-command yes (DEBUG SLEEP ...);
                                kept across nm_redis_restart */
    const char *const *extra_args; /* NULL-terminated, appended to the
                                      command line ("--replicaof", ...) */
    const char *sentinel_conf; /* run as a sentinel (--sentinel) with this
                                  configuration, written to sentinel.conf
                                  in the server's directory */
    unsigned int cluster_node_timeout_ms; /* not 0: a Redis Cluster node
                                (--cluster-enabled yes, nodes.conf in its
                                directory), with this node timeout; implies
                                tcp (see tests/topo_cluster.h) */
} NmRedisOpts;

/* TLS (fixture_tls.c).  Whether NETMUTEX_TEST_TLS=1: every server then
 * listens on a TLS port only (its unix socket, for raw commands, stays
 * plain), wants client certificates, and nm_redis_url names it rediss://;
 * nm_test_init sets the client's NETMUTEX_TLS_* variables. */
bool nm_test_tls(void);
/* The program's certificates (tests/tls-certs.sh), made on first use. */
const char *nm_tls_certs(void);
/* NAME in that directory (g_free it). */
char *nm_tls_cert_file(const char *name);
/* NETMUTEX_TLS_CA, _CERT and _KEY: the test CA and client certificate. */
void nm_tls_client_env(void);

/* Starts a server (OPTS may be NULL: unix socket only) and waits, with a
 * bound, until it answers PING.  Aborts the test program on failure. */
NmRedis *nm_redis_start(const NmRedisOpts *opts);
/* Stops the server if it runs and removes its directory. */
void nm_redis_free(NmRedis *r);

/* SIGTERM + waitpid: the socket goes away, the data is lost. */
void nm_redis_stop(NmRedis *r);
/* Starts it again on the same socket and port, with no data.  The server
 * dies with the thread that started it (PR_SET_PDEATHSIG), so start and
 * restart it from the main thread. */
void nm_redis_restart(NmRedis *r);
/* SIGSTOP / SIGCONT: the sockets stay open but nothing is answered. */
void nm_redis_pause(NmRedis *r);
void nm_redis_resume(NmRedis *r);

const char *nm_redis_dir(NmRedis *r);
const char *nm_redis_socket(NmRedis *r);
int nm_redis_port(NmRedis *r);
/* "unix://[:pass@]/dir/redis.sock" (with the server's password); with
 * NETMUTEX_TEST_TLS=1 "rediss://[:pass@]127.0.0.1:PORT". */
char *nm_redis_url(NmRedis *r);
/* "redis://[:pass@]127.0.0.1:PORT[/DB]" (DB < 0: no path); rediss://
 * with NETMUTEX_TEST_TLS=1. */
char *nm_redis_tcp_url(NmRedis *r, int db);

/* "redis://[user:pass@]127.0.0.1:PORT": R's credentials (its password, or
 * the ACL user under NETMUTEX_TEST_ACL=1), to a plain proxy in front of R
 * listening on PORT. */
char *nm_redis_proxy_url(NmRedis *r, int port);

/* netmutex_configure() with nm_redis_url() and defaults; asserts 0. */
void nm_configure(NmRedis *r);
/* The same with explicit timeouts and default lease (0: library default). */
void nm_configure_timeouts(NmRedis *r, unsigned int connect_ms,
                           unsigned int io_ms);
/* netmutex_configure() of CFG with its url replaced by nm_redis_url();
 * asserts 0. */
void nm_configure_with(NmRedis *r, netmutex_config_t cfg);

/* A fresh raw connection (authenticated, SELECTed to DB), for assertions.
 * A new connection per call keeps assertions independent of CLIENT KILL and
 * of what the library does on its own connections. */
redisContext *nm_redis_connect(NmRedis *r, int db);
/* One command on a fresh connection to db 0.  Asserts a reply arrived (an
 * error reply is returned, not asserted); the caller frees it. */
redisReply *nm_redis_cmd(NmRedis *r, const char *fmt, ...);
/* Like nm_redis_cmd, and also asserts the reply is not an error. */
void nm_redis_ok(NmRedis *r, const char *fmt, ...);
/* How many keys in R's db 0 belong to the primitives whose tag letter is
 * KIND ('c' conditions, 'r' read-write locks, 's' semaphores): those under
 * "netmutex:{" KIND and a 16-digit tag "}", by SCAN.  The tag's length is
 * matched too, so a lock's own keys, whose hex tag may begin with 'c',
 * never count. */
long long nm_redis_kind_keys(NmRedis *r, char kind);
/* Keys of R matching the SCAN pattern PATTERN. */
long long nm_redis_count_keys(NmRedis *r, const char *pattern);
/* ACL SETUSER USER reset on >PASSWORD with the rule netmutex_acl_rule(3)
 * gives for the default prefix, then the words of ALSO (NULL: none), e.g.
 * "-cluster|keyslot" for a user that lacks a permission; asserts OK. */
void nm_redis_add_user(NmRedis *r, const char *user, const char *password, const char *also);
/* URL with its credentials (if any) replaced by USER:PASSWORD (g_free). */
char *nm_url_as_user(const char *url, const char *user, const char *password);
/* How many keys of R's db 0 have no expiry, leaving out those the library
 * keeps so on purpose (a slot's fence floor, the counter of waits: the key
 * schema in docs/deployment.md); each is named in the test's log.  After
 * a process died at any moment, anything else it left would stay for
 * ever. */
long long nm_redis_keys_without_expiry(NmRedis *r);
/* Binary-safe GET of KEY (KEYLEN bytes) in DB: a new string, or NULL if the
 * key does not exist. */
char *nm_redis_get(NmRedis *r, int db, const char *key, size_t keylen);
/* PTTL of KEY in db 0 (-2: no key, -1: no expiry). */
long long nm_redis_pttl(NmRedis *r, const char *key);
/* The fence in the lock key's value (0 when the lock is free). */
long long nm_redis_fence(NmRedis *r, const char *lock_key);
/* The string a command answers (as nm_redis_cmd: HGET, LINDEX...), a new
 * string, or NULL for any other reply (nil: no such key or field). */
char *nm_redis_string(NmRedis *r, const char *fmt, ...);
/* The server's clock (TIME) in ms, as the library's scripts read it. */
long long nm_redis_time_ms(NmRedis *r);
/* How long a queue entry counts as live after its waiter's latest look
 * (src/server/lease.h, NM_QUEUE_TTL_MS): a test that drives an
 * interleaving around a stopped waiter checks its requests came within
 * it. */
#define NM_TEST_ENTRY_LIFE_MS 15000
/* When the waiter of queue ENTRY (src/lua/lib.lua, Waiting: it begins
 * with the server's ms at which it runs out) wrote it, in server ms. */
long long nm_entry_written_ms(const char *entry);
/* Polls until queued waiter TOKEN's entry in the queue entries' hash W
 * (src/lua/lib.lua) is there and differs from WAS (NULL: any): its next
 * refresh.  Returns the entry, or NULL after TIMEOUT_MS. */
char *nm_redis_wait_refresh(NmRedis *r, const char *w, const char *token, const char *was,
                            unsigned int timeout_ms);

/* The lock key of NAME with the default prefix: "netmutex:{TAG}NAME"
 * (tests/keytag.h), binary-safe up to a NUL. */
char *nm_lock_key(const char *name);

/* Key SUFFIX ("" for the lock key, ":q", ":w", ":h"...) of NAME under
 * PREFIX. */
char *nm_key_of(const char *prefix, const char *name, const char *suffix);

/* Waiters in NAME's FIFO queue in Redis (LLEN of its :q list), -1 on an
 * unexpected reply. */
long long nm_queue_len(NmRedis *r, const char *name);

/* Polls until NAME's queue holds N waiters; false after TIMEOUT_MS. */
bool nm_wait_queue_len(NmRedis *r, const char *name, long long n, unsigned int timeout_ms);
/* The current token in Redis for NAME (the first 32 bytes of the lock
 * key's value; NULL: not held), db 0. */
char *nm_token_of(NmRedis *r, const char *name);

/* ---- threads ---------------------------------------------------------- */

/* A function run in its own thread whose result can be awaited with a
 * bound; a call that never returns makes the test fail instead of hang. */
typedef int (*NmCallFunc)(void *arg);
typedef struct NmCall NmCall;

NmCall *nm_call_start(NmCallFunc fn, void *arg);
/* True once the call has returned (without waiting). */
bool nm_call_done(NmCall *c);
/* Waits at most TIMEOUT_MS (not scaled) for the call; on return frees C and
 * gives the result.  Fails the test if the call did not return in time. */
int nm_call_wait(NmCall *c, unsigned int timeout_ms);
/* nm_call_start + nm_call_wait. */
int nm_call_run(NmCallFunc fn, void *arg, unsigned int timeout_ms);

/* For nm_call_*: lock (or trylock) the netmutex_t M and, if that worked,
 * unlock it again before the thread exits; the result is the first
 * non-zero result.  A thread must never exit holding a mutex, or the test
 * program could not shut down cleanly. */
/* N lock+unlock cycles of M in this thread: the first failure (printed
 * with its cycle), or 0. */
int nm_cycles(netmutex_t *m, int n);
int nm_call_lock_unlock(void *m);
int nm_call_trylock_unlock(void *m);

/* A thread that locks M and waits on C until it is cancelled
 * (netmutex_cond_wait is a cancellation point while it blocks); its
 * clean-up handler unlocks M.  nm_cond_victim_start starts it (the
 * caller then waits until it is registered); nm_cond_victim_cancel
 * cancels it, asserts that the handler ran within BOUND_MS and that the
 * thread ended cancelled, and joins it.  Then RC is what a wait returned
 * had one returned (-1: none), UNLOCKED the handler's netmutex_unlock. */
typedef struct NmCondVictim {
    netmutex_cond_t *c;
    netmutex_t *m;
    int rc;
    int unlocked;
    int cleaned;      /* atomic */
    pthread_t thread;
} NmCondVictim;
void nm_cond_victim_start(NmCondVictim *v, netmutex_cond_t *c, netmutex_t *m);
void nm_cond_victim_cancel(NmCondVictim *v, unsigned int bound_ms);

/* A thread that locks M and holds it until told to unlock. */
typedef struct NmHolder NmHolder;
/* Returns once the holder owns M (asserts that lock returned 0). */
NmHolder *nm_holder_start(netmutex_t *m);
/* Tells the holder to unlock and joins it (bounded: fails the test if the
 * unlock does not return within a generous time); returns its result. */
int nm_holder_release(NmHolder *h);
/* Tells the holder to unlock after DELAY_MS, without waiting. */
void nm_holder_release_later(NmHolder *h, unsigned int delay_ms);
/* Joins a holder told to release later; returns unlock's result. */
int nm_holder_join(NmHolder *h);

/* A thread that runs netmutex calls on M on request and keeps running in
 * between, so one thread's connection outlives several calls (and, say, a
 * reconfiguration by another thread).  OP as for nm_remote: 'l', 't', 'u'. */
typedef struct NmWorker NmWorker;
NmWorker *nm_worker_start(netmutex_t *m);
/* Runs OP in the worker and returns its result (bounded wait). */
int nm_worker(NmWorker *w, char op);
/* Ends and joins the worker. */
void nm_worker_stop(NmWorker *w);

/* Number of open file descriptors of this process. */
int nm_count_fds(void);
/* Number of threads of this process. */
int nm_count_threads(void);

/* ---- processes -------------------------------------------------------- */

/* fork() for test workers: the child dies with the test program
 * (PR_SET_PDEATHSIG) and writes to stderr only, so a failed assertion in a
 * child cannot corrupt the TAP stream.  Returns like fork(). */
pid_t nm_fork(void);
/* Forks a child that runs FN(ARG) and _exit()s with its result. */
pid_t nm_fork_run(NmCallFunc fn, void *arg);
/* The same, for a parent that has other threads: the child ends without
 * the exit-time leak check of valgrind or LeakSanitizer.  In such a child
 * the memory of the parent's other threads (their stacks, thread-local
 * data) is unreachable by nature, so a leak report there says nothing
 * about the code under test. */
pid_t nm_fork_run_unchecked(NmCallFunc fn, void *arg);
/* The stacks of every thread of PID (WHO names it: "child", "worker"), on
 * stderr, when gdb is at hand: a hang seen once in a CI run is then told
 * where it is. */
void nm_print_stacks(pid_t pid, const char *who);
/* Waits at most TIMEOUT_MS for PID; on timeout prints its stacks and kills
 * it.  Asserts that it exited with status 0. */
void nm_child_wait_ok(pid_t pid, unsigned int timeout_ms);

/* Another process that operates one netmutex on command, so a test can
 * place a holder or a prober in a different process.  It is this program
 * exec'd anew (nm_test_init runs it), so it shares nothing with the test
 * process and can be used whatever the test process did before. */
typedef struct NmRemote NmRemote;
NmRemote *nm_remote_start(NmRedis *r, const char *name, int type,
                          unsigned int lease_ms);
/* Or'ed into a remote's TYPE: its mutex is NETMUTEX_ROBUST. */
#define NM_REMOTE_ROBUST 0x100
/* The same for any URL (a comma-separated list: quorum mode), with ENV
 * (NULL, or a NULL-terminated list of "NETMUTEX_X=value") added to the
 * remote's environment, where its netmutex_configure() finds them. */
NmRemote *nm_remote_start_url(const char *url, const char *const *env,
                              const char *name, int type, unsigned int lease_ms);
/* SIGKILLs the remote (a holder that dies without unlocking) and reaps it. */
void nm_remote_kill(NmRemote *rem);
/* The remote's process id (to pause it with SIGSTOP, say). */
pid_t nm_remote_pid(NmRemote *rem);
/* Asks the remote to exit() at once, whatever its threads are doing (its
 * atexit handlers run), and reaps it (asserts exit status 0). */
void nm_remote_exit(NmRemote *rem);

/* Kills VICTIM (SIGKILL) once NAME's Redis queue holds a waiter: run it with
 * nm_call_start while the test's own thread waits in netmutex_lock.
 * KILLED_AT is set when it struck; the call returns 1 if the waiter never
 * showed up in time (the kill happens anyway). */
typedef struct NmKiller {
    NmRedis *redis;
    NmRemote *victim;
    const char *name;
    gint64 killed_at;
} NmKiller;
int nm_kill_when_queued(void *killer);
/* Runs one call in the remote process and returns its result.  OP is 'l'
 * (lock), 't' (trylock), 'u' (unlock), 'b' (netmutex_break of its name),
 * or 'w': start a thread that waits in netmutex_lock and return 0 at once
 * (its own result is never reported: end such a remote with
 * nm_remote_exit or nm_remote_kill); 'd': start such a thread, which
 * first dials with a trylock (the result) and then waits for 'g' (result
 * 0 at once) before it locks. */
int nm_remote(NmRemote *rem, char op);
/* netmutex_fence in the remote: its result, and the fence in *FENCE. */
int nm_remote_fence(NmRemote *rem, uint64_t *fence);
/* The same in two halves, for a call that is expected to block: send, check
 * with nm_remote_poll that no result arrives yet, then collect it. */
void nm_remote_send(NmRemote *rem, char op);
/* True if a result is ready within TIMEOUT_MS (not scaled). */
bool nm_remote_poll(NmRemote *rem, unsigned int timeout_ms);
/* Waits (bounded) for the result of the last nm_remote_send. */
int nm_remote_result(NmRemote *rem);
/* Asks the remote to destroy its mutex, shut down and exit 0; waits. */
void nm_remote_stop(NmRemote *rem);
/* Starts this program anew with fork+exec and returns how many sockets it
 * found open on start-up: the ones it inherited without FD_CLOEXEC. */
int nm_exec_count_sockets(void);
/* A fresh process's trylock result on NAME (it unlocks again on success). */
int nm_probe_trylock(NmRedis *r, const char *name, int type);

/* ---- the library's log (fixture_log.c) ---------------------------------- */

/* From now on the library's messages of LEVEL and above are kept
 * (netmutex_set_log), not written, until nm_log_capture_stop. */
void nm_log_capture_start(int level);
/* Whether a message kept since nm_log_capture_start contains WHAT. */
bool nm_log_captured(const char *what);
/* Puts the default log back (stderr, warnings), shows what was kept in
 * the test's output, and forgets it. */
void nm_log_capture_stop(void);

/* ---- lost-lease callbacks ---------------------------------------------- */

/* What a lost-lease callback saw.  pthread primitives, not GMutex:
 * GLib's futex-based GMutex is invisible to ThreadSanitizer. */
typedef struct NmLost {
    pthread_mutex_t lock;
    pthread_cond_t cond; /* CLOCK_MONOTONIC */
    int calls;
    gint64 first_at; /* nmt_now_ms() of the first call */
    char *name;      /* name given to the first call */
} NmLost;

void nm_lost_init(NmLost *l);
void nm_lost_clear(NmLost *l);
/* A netmutex_lost_fn: give it an NmLost as its argument. */
void nm_lost_record(const char *name, void *arg);
int nm_lost_calls(NmLost *l);
/* Waits at most TIMEOUT_MS (not scaled) for a first call; returns the
 * number of calls so far. */
int nm_lost_wait(NmLost *l, unsigned int timeout_ms);

G_END_DECLS

#endif /* NM_TEST_FIXTURE_H */
