/*
 * watchdog.c -- the background thread's life, and the scheduler of its jobs
 * (watchdog.h): start, stop, exit, fork, the wake-up pipe and the poll()
 * loop.  What the thread does is the jobs' business: renew.c, cache.c,
 * resend.c and subscriber.c, none of whose headers this file includes.
 *
 * Sleeping without missing work.  Before it sleeps the thread publishes
 * when it will look again (sleep_until), then asks the jobs' due() once
 * more and lowers what it published if one is due sooner.  Another thread
 * that makes a job due sooner changes the job's state first, under the
 * job's lock, then reads sleep_until (nm_watchdog_look_by) and pokes if the
 * thread would sleep past it.  due() takes the same lock, so either the
 * thread's second look sees the change, or the other thread reads what the
 * thread published before that look, and pokes.  The thread holds its own
 * lock only to publish, never while it calls a job: jobs take their locks
 * first, then this one (HACKING.md, "Lock order").
 */
#include "nm.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "clock.h"
#include "config.h"
#include "watchdog.h"

/* How long the thread waits for a configuration it could not get. */
#define NO_CONFIG_RETRY_MS 1000
/* The renewal job keeps argument arrays of 3 * NM_RENEW_BATCH entries on
 * the stack (about 24 KiB); sanitizers want far more (TSan asks for ~900
 * KiB).  Only the pages touched cost memory. */
#define WATCHDOG_STACK (2 * 1024 * 1024)

static struct {
    pthread_mutex_t lock;
    pthread_t thread;
    int running, stop, exiting;
    int pipe[2];          /* wakes the thread; -1 when not made yet */
    int64_t sleep_until;  /* when the sleeping thread will look again;
                             atomic, read without the lock too */
    void *stack;          /* the thread's stack, reused by every restart */
} wd = { PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0, { -1, -1 }, 0, NULL };

/* The jobs, in the order they run.  A slot is filled before njobs grows
 * past it (release), so the thread reads them without a lock. */
static const nm_job_t *jobs[NM_JOBS_MAX];
static size_t njobs; /* atomic */

/* The pipe's write end, + 1 (0 before it exists), for
 * nm_watchdog_nudge_within(), which may take no lock. */
static int nudge_fd; /* atomic */

/* The configuration the jobs are bound to: the thread's alone (and a
 * child's after fork, which has no thread). */
static nm_config_t *cfg;

/* No lock: registrations come from one thread, in mutex.c's pthread_once,
 * and a fork() by another thread meanwhile must not leave the child a lock
 * of ours held (mutex.c's fork handlers are not installed yet). */
void nm_watchdog_add_job(const nm_job_t *job)
{
    size_t n = __atomic_load_n(&njobs, __ATOMIC_ACQUIRE);
    for (size_t i = 0; i < n; i++)
        if (jobs[i] == job)
            return;
    if (n == NM_JOBS_MAX)
        return;
    jobs[n] = job;
    __atomic_store_n(&njobs, n + 1, __ATOMIC_RELEASE);
}

static size_t jobs_count(void)
{
    return __atomic_load_n(&njobs, __ATOMIC_ACQUIRE);
}

/* ---- waking and starting the thread ------------------------------------ */

static void poke_locked(void)
{
    char byte = 1;
    if (wd.pipe[1] >= 0 && write(wd.pipe[1], &byte, 1) < 0) {
        /* full pipe: the thread has wake-ups pending anyway */
    }
}

static void *watchdog_main(void *arg);

void nm_watchdog_nudge_within(int64_t ms)
{
    int fd = __atomic_load_n(&nudge_fd, __ATOMIC_ACQUIRE) - 1;
    int64_t now = nm_now_ms(), sleep_until = __atomic_load_n(&wd.sleep_until, __ATOMIC_ACQUIRE);
    char byte = 1;
    if (fd >= 0 && (now + ms < sleep_until || sleep_until <= now) && write(fd, &byte, 1) < 0) {
        /* full pipe: the thread has wake-ups pending anyway */
    }
}

static void stop_at_exit(void)
{
    pthread_mutex_lock(&wd.lock);
    wd.exiting = 1;
    pthread_mutex_unlock(&wd.lock);
    nm_watchdog_stop();
}

/* The thread runs on a stack of its own making rather than one from
 * glibc's cache.  After fork(), a child that starts its own watchdog would
 * otherwise get the parent's cached watchdog stack, hence the same pthread_t
 * as a thread that ThreadSanitizer still believes alive ("dup thread with
 * used id"): users run their tests under TSan.  A fresh mapping can never
 * land on the inherited one, which the child leaves in place. */
static int create_thread(void)
{
    pthread_attr_t attr;
    if (!wd.stack) {
        void *p = mmap(NULL, WATCHDOG_STACK, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (p == MAP_FAILED)
            return EAGAIN;
        wd.stack = p;
    }
    pthread_attr_init(&attr);
    int err = pthread_attr_setstack(&attr, wd.stack, WATCHDOG_STACK);
    if (!err)
        err = pthread_create(&wd.thread, &attr, watchdog_main, NULL);
    pthread_attr_destroy(&attr);
    return err ? EAGAIN : 0; /* the documented "no background thread" */
}

static int start_locked(void)
{
    static int atexit_done;
    sigset_t all, old;

    if (wd.running)
        return 0;
    if (wd.exiting)
        return EAGAIN;
    if (wd.pipe[0] < 0 && pipe2(wd.pipe, O_CLOEXEC | O_NONBLOCK) != 0)
        return errno == EMFILE || errno == ENFILE ? EAGAIN : errno;
    __atomic_store_n(&nudge_fd, wd.pipe[1] + 1, __ATOMIC_RELEASE);
    /* The thread must never take the program's signals. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int err = create_thread();
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err)
        return err;
    wd.running = 1;
    wd.stop = 0;
    if (!atexit_done)
        atexit_done = atexit(stop_at_exit) == 0;
    return 0;
}

int nm_watchdog_start(void)
{
    pthread_mutex_lock(&wd.lock);
    int err = start_locked();
    pthread_mutex_unlock(&wd.lock);
    return err;
}

void nm_watchdog_look_by(int64_t t)
{
    /* Read without the lock first: this runs at every acquisition and at
     * every unlock that keeps a lease cached, and the thread mostly looks
     * soon enough. */
    if (t >= __atomic_load_n(&wd.sleep_until, __ATOMIC_ACQUIRE))
        return;
    pthread_mutex_lock(&wd.lock);
    if (t < wd.sleep_until)
        poke_locked();
    pthread_mutex_unlock(&wd.lock);
}

int nm_watchdog_poke(void)
{
    pthread_mutex_lock(&wd.lock);
    int err = start_locked();
    if (!err)
        poke_locked();
    pthread_mutex_unlock(&wd.lock);
    return err;
}

void nm_watchdog_stop(void)
{
    pthread_mutex_lock(&wd.lock);
    int running = wd.running;
    wd.stop = 1;
    poke_locked();
    pthread_mutex_unlock(&wd.lock);
    if (running) {
        pthread_join(wd.thread, NULL);
        pthread_mutex_lock(&wd.lock);
        wd.running = 0;
        pthread_mutex_unlock(&wd.lock);
    }
    for (size_t i = 0, n = jobs_count(); running && i < n; i++)
        if (jobs[i]->stopped)
            jobs[i]->stopped();
}

/* ---- the thread ------------------------------------------------------------ */

/* Binds every job to CFG (NULL: the thread ends), then drops the one
 * they were bound to. */
static void bind_jobs(nm_config_t *fresh)
{
    for (size_t i = 0, n = jobs_count(); i < n; i++)
        if (jobs[i]->bind)
            jobs[i]->bind(fresh);
    nm_config_unref(cfg);
    cfg = fresh;
}

/* Follows netmutex_configure(): new settings, new connections. */
static void bind_config(void)
{
    nm_config_t *fresh;
    if (cfg && cfg->generation == nm_config_current_generation())
        return;
    if (nm_config_current(&fresh) != 0)
        return;
    bind_jobs(fresh);
}

/* Sleeps until UNTIL, a poke, or a job's descriptor readable; then hands
 * each job its descriptors back. */
static void wait_events(int64_t until)
{
    struct pollfd fds[1 + NM_JOB_FDS_MAX] = { { wd.pipe[0], POLLIN, 0 } };
    size_t first[NM_JOBS_MAX], count[NM_JOBS_MAX], n = 1, njob = jobs_count();
    int64_t left = nm_remaining_ms(until);
    int timeout = until == NM_FOREVER ? -1 : (int)NM_MIN(left, 60000);
    char buf[64];

    for (size_t j = 0; j < njob; j++) {
        first[j] = n;
        count[j] = jobs[j]->fds ? jobs[j]->fds(fds + n, 1 + NM_JOB_FDS_MAX - n) : 0;
        n += count[j];
    }
    int ready = poll(fds, n, timeout) > 0;
    if (ready && fds[0].revents)
        while (read(wd.pipe[0], buf, sizeof buf) > 0)
            ;
    for (size_t j = 0; j < njob; j++)
        if (jobs[j]->polled)
            jobs[j]->polled(fds + first[j], count[j], ready);
}

static int64_t jobs_due(int64_t next)
{
    for (size_t i = 0, n = jobs_count(); i < n; i++)
        if (jobs[i]->due)
            next = NM_MIN(next, jobs[i]->due());
    return next;
}

static void publish_sleep(int64_t until)
{
    pthread_mutex_lock(&wd.lock);
    __atomic_store_n(&wd.sleep_until, until, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&wd.lock);
}

/* Every job's run, in order; returns when the thread must look again.
 * Each job's bound is the earliest time the jobs before it gave. */
static int64_t run_jobs(void)
{
    int64_t next = NM_FOREVER;
    for (size_t i = 0, n = jobs_count(); i < n; i++)
        if (jobs[i]->run)
            next = NM_MIN(next, jobs[i]->run(next));
    return next;
}

static int stop_requested(void)
{
    pthread_mutex_lock(&wd.lock);
    int stop = wd.stop;
    pthread_mutex_unlock(&wd.lock);
    return stop;
}

static void *watchdog_main(void *arg)
{
    (void)arg;
    while (!stop_requested()) {
        bind_config();
        if (!cfg) {
            wait_events(nm_now_ms() + NO_CONFIG_RETRY_MS);
            continue;
        }
        int64_t next = run_jobs();
        /* Published first, then the jobs asked again (see the top). */
        publish_sleep(next);
        int64_t due = jobs_due(next);
        if (due < next) {
            next = due;
            publish_sleep(next);
        }
        wait_events(next);
    }
    bind_jobs(NULL);
    return NULL;
}

/* ---- fork ----------------------------------------------------------------- */

void nm_watchdog_before_fork(void)
{
    pthread_mutex_lock(&wd.lock);
}

void nm_watchdog_after_fork_parent(void)
{
    pthread_mutex_unlock(&wd.lock);
}

/* What a forked child keeps of the thread's configuration, only so that it
 * stays reachable.  volatile: nothing reads it, and the compiler would
 * otherwise drop the store. */
static nm_config_t *volatile orphaned_cfg;

/* The child inherits no thread.  The thread may have been swapping cfg
 * when fork() copied it: its reference is kept (reachable), never dropped.
 * The jobs' connections are their own hooks' business (renew.h,
 * subscriber.h); the jobs stay registered. */
void nm_watchdog_after_fork_child(void)
{
    wd.running = wd.stop = 0;
    wd.stack = NULL; /* the parent's mapping stays, unused (see create_thread) */
    nudge_fd = 0;
    if (wd.pipe[0] >= 0) {
        close(wd.pipe[0]);
        close(wd.pipe[1]);
        wd.pipe[0] = wd.pipe[1] = -1;
    }
    orphaned_cfg = cfg;
    cfg = NULL;
    pthread_mutex_unlock(&wd.lock);
}
