/*
 * watchdog.h -- the one background thread of a process.
 *
 * It renews every lease this process holds, declares a lease lost when it
 * could not be renewed in time, and hosts the subscriber that wakes waiters
 * (wake.h).  It is started by the first acquisition or wait that needs it,
 * has connections of its own (never a caller thread's), and is stopped by
 * netmutex_shutdown() and at exit.
 *
 * What it guarantees: a lease it renews stays ours at the server as long as
 * renewals get through; when they do not, the lease is declared lost at
 * (last successful send + lease - margin) by this host's monotonic clock,
 * which is before the server can have expired it (clocks drifting less than
 * the margin).  What it cannot guarantee: that a thread stalled for longer
 * than that (a pause, a swap storm, SIGSTOP) does not act after its lease
 * ended.  Fencing tokens exist for that.
 */
#ifndef NM_WATCHDOG_H
#define NM_WATCHDOG_H

#include <stdint.h>

#include "lease.h"

typedef void (*nm_lost_fn)(const char *name, void *arg);

/* A renewal found other processes waiting for the lease of TOKEN. */
typedef void (*nm_wanted_fn)(void *arg, const char *token);

typedef struct nm_watch_opts {
    int autorenew;    /* renew at the configured fraction of the lease */
    nm_lost_fn lost;  /* called once, from the watchdog thread; may be NULL */
    void *lost_arg;
    nm_wanted_fn wanted; /* cache.c's; may be NULL */
    void *wanted_arg;
} nm_watch_opts_t;

/* Starts watching lease L of NAME (acquired at L->acquired_at).  0, ENOMEM,
 * EAGAIN (the thread could not be started). */
int nm_watchdog_track(nm_lease_t *l, const char *name, const nm_watch_opts_t *opts);

/* Stops watching L (before it is released). */
void nm_watchdog_untrack(nm_lease_t *l);

/* Whether L was declared lost. */
int nm_watchdog_lost(const nm_lease_t *l);

/* Milliseconds L is still ours at the least, by the local clock, or 0. */
int64_t nm_watchdog_valid_ms(const nm_lease_t *l);

/* L was extended to MS by a request sent at SENT_AT. */
void nm_watchdog_extended(nm_lease_t *l, int64_t sent_at, unsigned int ms);

/* If requests may have arrived on a subscriber that the thread has not
 * read yet, has it read them (until UNTIL at the latest): an unlock about
 * to keep a lease cached calls it, so that a request Redis had handled
 * before the unlock is honoured (cache.c). */
void nm_watchdog_settle(int64_t until);

/* Wakes the thread if it sleeps past T (monotonic ms): something will be
 * due then.  Cheap when it will look by then anyway. */
void nm_watchdog_look_by(int64_t t);

/* Wakes the thread, starting it if needed, so it sees new work. */
int nm_watchdog_poke(void);

/* Stops the thread and closes its connections (netmutex_shutdown). */
void nm_watchdog_stop(void);

/* pthread_atfork hooks: the child has no thread, no record, no socket. */
void nm_watchdog_before_fork(void);
void nm_watchdog_after_fork_parent(void);
void nm_watchdog_after_fork_child(void);

#endif /* NM_WATCHDOG_H */
