/*
 * test_xproc.c -- mutual exclusion between processes.  The parent of this
 * program never calls netmutex itself: every netmutex call happens in a
 * forked child that configures the library on its own, so no child can
 * inherit connections or lock state (test_fork covers that case).
 *
 * Covered: EBUSY / blocking / EPERM across processes, RECURSIVE held until
 * its last unlock as seen from another process, a dead holder's lease
 * expiring, and the read-modify-write counter: 4 processes x 4 threads
 * must not lose a single update with the lock, and demonstrably do without
 * it (so the test can fail); the fence read inside the critical section
 * never goes backwards, and grows whenever the holder's process changes.
 */
#include "ac_config.h"

#include "fixture.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static NmRedis *redis;

#define PROMPT_MS nm_ms(30000)

/* ---- simple cross-process rows of the semantics table ------------------ */

static void test_trylock_busy_other_process(gconstpointer data)
{
    int type = GPOINTER_TO_INT(data);
    char *name = nm_test_name("m");
    NmRemote *holder = nm_remote_start(redis, name, type, 0);

    nm_assert_rc(nm_remote(holder, 'l'), 0);
    nm_assert_rc(nm_probe_trylock(redis, name, type), EBUSY);
    nm_assert_rc(nm_remote(holder, 'u'), 0);
    nm_assert_rc(nm_probe_trylock(redis, name, type), 0);
    nm_remote_stop(holder);
    g_free(name);
}

static void test_lock_waits_for_other_process(void)
{
    char *name = nm_test_name("m");
    NmRemote *a = nm_remote_start(redis, name, NETMUTEX_NORMAL, 0);
    NmRemote *b = nm_remote_start(redis, name, NETMUTEX_NORMAL, 0);

    nm_assert_rc(nm_remote(a, 'l'), 0);
    nm_remote_send(b, 'l');
    g_assert_false(nm_remote_poll(b, 300));
    nm_assert_rc(nm_remote(a, 'u'), 0);
    nm_assert_rc(nm_remote_result(b), 0);
    /* Now B holds it, and A is the one locked out. */
    nm_assert_rc(nm_remote(a, 't'), EBUSY);
    nm_assert_rc(nm_remote(b, 'u'), 0);
    nm_remote_stop(a);
    nm_remote_stop(b);
    g_free(name);
}

static void test_unlock_not_owner_process(void)
{
    char *name = nm_test_name("m");
    NmRemote *a = nm_remote_start(redis, name, NETMUTEX_ERRORCHECK, 0);
    NmRemote *b = nm_remote_start(redis, name, NETMUTEX_ERRORCHECK, 0);
    char *token, *after;

    nm_assert_rc(nm_remote(a, 'l'), 0);
    token = nm_token_of(redis, name);
    nm_assert_rc(nm_remote(b, 'u'), EPERM);
    after = nm_token_of(redis, name);
    g_assert_cmpstr(after, ==, token);
    nm_assert_rc(nm_remote(a, 'u'), 0);
    nm_remote_stop(a);
    nm_remote_stop(b);
    g_free(after);
    g_free(token);
    g_free(name);
}

static void test_recursive_other_process(void)
{
    char *name = nm_test_name("m");
    NmRemote *owner = nm_remote_start(redis, name, NETMUTEX_RECURSIVE, 0);

    for (int i = 0; i < 3; i++)
        nm_assert_rc(nm_remote(owner, 'l'), 0);
    for (int level = 3; level > 0; level--) {
        nm_assert_rc(nm_probe_trylock(redis, name, NETMUTEX_RECURSIVE), EBUSY);
        nm_assert_rc(nm_remote(owner, 'u'), 0);
    }
    nm_assert_rc(nm_probe_trylock(redis, name, NETMUTEX_RECURSIVE), 0);
    nm_assert_rc(nm_remote(owner, 'u'), EPERM);
    nm_remote_stop(owner);
    g_free(name);
}

/* A holder killed without unlocking blocks others only until its lease
 * runs out. */
static void test_dead_holder_lease_expires(void)
{
    char *name = nm_test_name("m");
    NmRemote *doomed = nm_remote_start(redis, name, NETMUTEX_NORMAL, 500);
    NmRemote *next = nm_remote_start(redis, name, NETMUTEX_NORMAL, 0);

    nm_assert_rc(nm_remote(doomed, 'l'), 0);
    nm_remote_kill(doomed);
    nm_assert_rc(nm_remote(next, 'l'), 0);
    nm_assert_rc(nm_remote(next, 'u'), 0);
    nm_remote_stop(next);
    g_free(name);
}

/* ---- the read-modify-write counter ----------------------------------- */

#define PROCS 4
#define THREADS 4
#define ITERATIONS 25

/* Layout of the shared file: what the protected resource remembers. */
enum { OFF_COUNTER = 0, OFF_FENCE = 8, OFF_PID = 16, FILE_SIZE = 24 };

typedef struct Workload {
    const char *path; /* shared file */
    const char *name; /* NULL: no lock at all (the control run) */
    unsigned int hold_us;
    int start_fd;  /* read end: EOF means "go" */
    int start_out; /* write end: each child closes its copy */
} Workload;

typedef struct WorkerState {
    const Workload *w;
    int fd;
    gint failures;
} WorkerState;

static long long pread_ll(int fd, off_t off)
{
    long long v = 0;

    return pread(fd, &v, sizeof v, off) == sizeof v ? v : -1;
}

static bool pwrite_ll(int fd, off_t off, long long v)
{
    return pwrite(fd, &v, sizeof v, off) == sizeof v;
}

/* The critical section, seen from the resource: the counter is read, the
 * holder dawdles, and writes it back plus one.  With a lock it also checks
 * the fence against the last one the resource saw. */
static bool touch_resource(WorkerState *s, redisContext *raw, const char *key)
{
    long long counter = pread_ll(s->fd, OFF_COUNTER);
    bool ok = counter >= 0;

    if (raw) {
        /* The lock key's value: "<token><q><c> <fence> <holder>". */
        redisReply *reply = redisCommand(raw, "GET %s", key);
        long long fence = reply && reply->type == REDIS_REPLY_STRING && reply->len > 35
                              ? g_ascii_strtoll(reply->str + 35, NULL, 10) : -1;
        long long last = pread_ll(s->fd, OFF_FENCE);
        long long last_pid = pread_ll(s->fd, OFF_PID);

        freeReplyObject(reply);
        /* A lock handed on inside one process may keep its lease (and
         * fence); a new process must have acquired it anew. */
        if (fence < last || (last_pid != getpid() && fence == last)) {
            g_printerr("fence went from %lld (pid %lld) to %lld (pid %d)\n",
                       last, last_pid, fence, (int)getpid());
            ok = false;
        }
        ok = ok && pwrite_ll(s->fd, OFF_FENCE, fence) &&
             pwrite_ll(s->fd, OFF_PID, getpid());
    }
    g_usleep(s->w->hold_us);
    return ok && pwrite_ll(s->fd, OFF_COUNTER, counter + 1);
}

static void *counter_thread(void *p)
{
    WorkerState *s = p;
    const Workload *w = s->w;
    redisContext *raw = w->name ? nm_redis_connect(redis, 0) : NULL;
    char *key = w->name ? nm_lock_key(w->name) : NULL;
    netmutex_t m;

    if (w->name && netmutex_init(&m, w->name, NULL) != 0)
        g_atomic_int_inc(&s->failures);
    for (int i = 0; i < ITERATIONS; i++) {
        int rc = w->name ? netmutex_lock(&m) : 0;

        if (rc != 0) {
            g_printerr("lock: %s\n", nm_errname(rc));
            g_atomic_int_inc(&s->failures);
            continue;
        }
        if (!touch_resource(s, raw, key))
            g_atomic_int_inc(&s->failures);
        if (w->name && (rc = netmutex_unlock(&m)) != 0) {
            g_printerr("unlock: %s\n", nm_errname(rc));
            g_atomic_int_inc(&s->failures);
        }
    }
    if (w->name && netmutex_destroy(&m) != 0)
        g_atomic_int_inc(&s->failures);
    if (raw)
        redisFree(raw);
    g_free(key);
    return NULL;
}

/* One worker process: THREADS threads, released together by the parent. */
static int counter_process(void *p)
{
    const Workload *w = p;
    WorkerState s = { .w = w };
    pthread_t t[THREADS];
    char go;

    close(w->start_out); /* or EOF would never come */
    if (w->name)
        nm_configure(redis); /* our own configuration, after fork */
    s.fd = open(w->path, O_RDWR);
    if (s.fd < 0)
        return 10;
    /* Every process waits here until the parent closes the pipe, so the
     * processes really run at the same time. */
    if (read(w->start_fd, &go, 1) != 0)
        return 11;
    for (int i = 0; i < THREADS; i++)
        if (pthread_create(&t[i], NULL, counter_thread, &s) != 0)
            return 12;
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    close(s.fd);
    if (w->name && netmutex_shutdown() != 0)
        return 13;
    return g_atomic_int_get(&s.failures) == 0 ? 0 : 14;
}

/* Runs the workload in PROCS processes and returns the final counter. */
static long long run_counter(const char *name, unsigned int hold_us)
{
    char *path = g_build_filename(nm_redis_dir(redis), "counter", NULL);
    int start[2];
    pid_t pids[PROCS];
    Workload w = { .path = path, .name = name, .hold_us = hold_us };
    char zero[FILE_SIZE] = { 0 };
    long long counter;
    int fd;

    g_assert_true(g_file_set_contents(path, zero, sizeof zero, NULL));
    g_assert_cmpint(pipe(start), ==, 0);
    w.start_fd = start[0];
    w.start_out = start[1];
    for (int i = 0; i < PROCS; i++)
        pids[i] = nm_fork_run(counter_process, &w);
    close(start[0]);
    close(start[1]); /* go */
    for (int i = 0; i < PROCS; i++)
        nm_child_wait_ok(pids[i], nm_ms(120000));

    fd = open(path, O_RDONLY);
    g_assert_cmpint(fd, >=, 0);
    counter = pread_ll(fd, OFF_COUNTER);
    close(fd);
    g_free(path);
    return counter;
}

static void test_counter_locked_exact(void)
{
    char *name = nm_test_name("counter");
    long long counter = run_counter(name, 200);

    g_assert_cmpint(counter, ==, PROCS * THREADS * ITERATIONS);
    g_free(name);
}

/* The control: the same workload without the lock loses updates, which is
 * what makes the exact count above mean something. */
static void test_counter_unlocked_loses_updates(void)
{
    long long counter = run_counter(NULL, 500);

    g_test_message("unlocked: %lld of %d updates survived", counter,
                   PROCS * THREADS * ITERATIONS);
    g_assert_cmpint(counter, >, 0);
    g_assert_cmpint(counter, <, PROCS * THREADS * ITERATIONS);
}

/* ---- SIGPIPE --------------------------------------------------------- */

/* A program that never touched SIGPIPE must survive the server closing
 * the library's connection: writing to a unix socket whose peer is gone
 * raises SIGPIPE unless the library prevents it. */
static int sigpipe_child(void *p)
{
    const char *name = p;
    netmutex_t m;
    int rc;

    signal(SIGPIPE, SIG_DFL); /* the parent's SIG_IGN was inherited */
    nm_configure(redis);
    if (netmutex_init(&m, name, NULL) != 0 || netmutex_lock(&m) != 0)
        return 20;
    nm_redis_ok(redis, "CLIENT KILL TYPE normal SKIPME yes");
    nm_redis_ok(redis, "CLIENT KILL TYPE pubsub");
    rc = netmutex_unlock(&m);
    if (rc != 0) {
        g_printerr("unlock after CLIENT KILL: %s\n", nm_errname(rc));
        return 21;
    }
    netmutex_destroy(&m);
    netmutex_shutdown();
    return 0;
}

static void test_killed_connection_no_sigpipe(void)
{
    char *name = nm_test_name("m");

    nm_child_wait_ok(nm_fork_run(sigpipe_child, name), PROMPT_MS);
    g_free(name);
}

int main(int argc, char **argv)
{
    int rc;

    nm_test_init(&argc, &argv);
    redis = nm_redis_start(NULL);

    nm_test_add_for_types("/xproc/trylock/busy-other-process", test_trylock_busy_other_process);
    g_test_add_func("/xproc/lock/waits-for-other-process", test_lock_waits_for_other_process);
    g_test_add_func("/xproc/unlock/eperm-not-owner-process", test_unlock_not_owner_process);
    g_test_add_func("/xproc/recursive/held-until-last-unlock", test_recursive_other_process);
    g_test_add_func("/xproc/lease/dead-holder-expires", test_dead_holder_lease_expires);
    g_test_add_func("/xproc/counter/locked-exact-and-fences-increase", test_counter_locked_exact);
    g_test_add_func("/xproc/counter/unlocked-control-loses-updates",
                    test_counter_unlocked_loses_updates);
    g_test_add_func("/xproc/sigpipe/killed-connection-does-not-kill-process",
                    test_killed_connection_no_sigpipe);

    rc = g_test_run();
    nm_redis_free(redis);
    return rc;
}
