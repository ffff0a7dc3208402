/*
 * watchdog.h -- the one background thread of a process, a scheduler of
 * jobs.
 *
 * The thread runs the jobs registered with nm_watchdog_add_job(): lease
 * renewal (renew.h), the cache's sweep (cache.h), the resend of releases
 * after a failover (resend.h), the subscribers that serve wake.h's
 * channels (subscriber.h) and the lock-order checker's publishing
 * (lockdep.h).  It is started by the first acquisition or wait
 * that needs it (nm_watchdog_start, nm_watchdog_poke), has connections of
 * its own (the jobs', never a caller thread's), and is stopped by
 * netmutex_shutdown() and at exit.
 *
 * Calls go one way: a job includes this header; this module includes no
 * job's.  The jobs are registered once, in the order the thread runs them
 * at every pass, by the API layer (mutex.c, library_init), before any
 * thread can start.  Not at their first use: wake.c starts the thread for
 * quorum mode's waiters (lease.c), which use no job, and could only
 * register the subscriber job by including subscriber.h, which includes
 * wake.h -- the circle this design undoes.  Nor do jobs get fork hooks
 * here: the fork handlers take every lock in the lock order, and the jobs'
 * locks sit at different places in it (the cache's sweep lock first of
 * all, the renewal job's records just before this module's lock), so
 * mutex.c calls each job's handler in its place.
 *
 * A pass: the thread follows netmutex_configure() (bind: every job gets
 * the new configuration), runs every job in turn (run), asks those that
 * have one for their next due time again (due), then sleeps in poll() on
 * the jobs' descriptors (fds) and its own wake-up pipe until the earliest
 * time, a poke or a descriptor readable, and hands the descriptors back
 * to their jobs (polled).  The thread holds none of its own locks while it
 * calls a job, so a job's callbacks may take any lock the job's code may
 * take, and may call this module.
 */
#ifndef NM_WATCHDOG_H
#define NM_WATCHDOG_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#include "settings.h"

/* Most jobs the thread runs, and most descriptors it polls for them. */
#define NM_JOBS_MAX 8
#define NM_JOB_FDS_MAX 64

/* A job: a static struct of function pointers, each optional (NULL).
 * Every one runs on the background thread, except stopped(). */
typedef struct nm_job {
    /* The thread's configuration is now CFG (borrowed: valid until the
     * next bind): drop what was made under the one before.  NULL: the
     * thread is ending (stopped() follows, once it is joined). */
    void (*bind)(nm_config_t *cfg);
    /* Does what is due now.  BOUND: when a job run before it in this pass
     * next needs the thread (NM_FOREVER: none), so that I/O here does not
     * delay it much.  Returns when this job next needs the thread. */
    int64_t (*run)(int64_t bound);
    /* Asked again after every job ran, just before the thread sleeps, for
     * state that other threads change between passes (they call
     * nm_watchdog_look_by() after changing it). */
    int64_t (*due)(void);
    /* Fills up to ROOM descriptors to poll (events set) and returns how
     * many.  Called right before each poll(). */
    size_t (*fds)(struct pollfd *fds, size_t room);
    /* After each poll(): the job's FDS with their revents (N as fds()
     * returned); READY, poll() returned at least one descriptor (the
     * wake-up pipe, already drained, or any job's). */
    void (*polled)(const struct pollfd *fds, size_t n, int ready);
    /* On the thread that stopped the thread, once it is joined. */
    void (*stopped)(void);
} nm_job_t;

/* Registers JOB (a static struct): the thread runs it at every pass from
 * now on, after the jobs registered before it.  Once per job (a second
 * registration is ignored), at most NM_JOBS_MAX.  Takes no lock, so it is
 * called from one thread at a time: mutex.c's once, before any thread can
 * start. */
void nm_watchdog_add_job(const nm_job_t *job);

/* Starts the thread if it does not run: 0, EAGAIN (it could not be
 * started), or an errno of pipe2(). */
int nm_watchdog_start(void);

/* Wakes the thread, starting it if needed, so it sees new work. */
int nm_watchdog_poke(void);

/* Wakes the thread if it sleeps past T (monotonic ms): something will be
 * due then.  Cheap when it will look by then anyway.  A job whose due()
 * time another thread lowered calls it after the change. */
void nm_watchdog_look_by(int64_t t);

/* Wakes the thread if it sleeps past MS from now, or is awake (it may have
 * looked at what changed before the change).  Takes no lock: it may run
 * under any of the library's (journal.h's hook). */
void nm_watchdog_nudge_within(int64_t ms);

/* Stops the thread and closes its connections (netmutex_shutdown). */
void nm_watchdog_stop(void);

/* pthread_atfork hooks: the child has no thread and no wake-up pipe.
 * The jobs' state has hooks of its own (renew.h, subscriber.h). */
void nm_watchdog_before_fork(void);
void nm_watchdog_after_fork_parent(void);
void nm_watchdog_after_fork_child(void);

#endif /* NM_WATCHDOG_H */
