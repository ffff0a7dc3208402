/*
 * renew.h -- the background thread's renewal job: every lease this process
 * holds (or keeps cached) is renewed, and declared lost when it could not
 * be renewed in time.
 *
 * What it guarantees: a lease it renews stays ours at the server as long as
 * renewals get through; when they do not, the lease is declared lost at
 * (last successful send + lease - margin) by this host's monotonic clock,
 * which is before the server can have expired it (clocks drifting less than
 * the margin).  What it cannot guarantee: that a thread stalled for longer
 * than that (a pause, a swap storm, SIGSTOP) does not act after its lease
 * ended.  Fencing tokens exist for that.
 *
 * The job runs on the background thread (watchdog.h), first of its jobs;
 * the lost-lease callbacks and cache.c's wanted callbacks run there too,
 * with none of this module's locks held.
 */
#ifndef NM_RENEW_H
#define NM_RENEW_H

#include <stdint.h>

#include "lease.h"

typedef void (*nm_lost_fn)(const char *name, void *arg);

/* A renewal found other processes waiting for the lease of TOKEN. */
typedef void (*nm_wanted_fn)(void *arg, const char *token);

typedef struct nm_watch_opts {
    int autorenew;    /* renew at the configured fraction of the lease */
    nm_lost_fn lost;  /* called once, from the background thread; may be NULL */
    void *lost_arg;
    nm_wanted_fn wanted; /* cache.c's; may be NULL */
    void *wanted_arg;
    struct nm_stat *stat; /* its statistics record (stats.h), or NULL */
} nm_watch_opts_t;

/* Registers the job with the background thread (once; mutex.c). */
void nm_renew_register(void);

/* Starts watching lease L of NAME (acquired at L->acquired_at), starting
 * the background thread if needed.  0, ENOMEM, EAGAIN (the thread could
 * not be started). */
int nm_renew_track(nm_lease_t *l, const char *name, const nm_watch_opts_t *opts);

/* Stops watching L (before it is released). */
void nm_renew_untrack(nm_lease_t *l);

/* Whether L was declared lost. */
int nm_renew_lost(const nm_lease_t *l);

/* Milliseconds L is still ours at the least, by the local clock, or 0. */
int64_t nm_renew_valid_ms(const nm_lease_t *l);

/* L was extended to MS by a request sent at SENT_AT. */
void nm_renew_extended(nm_lease_t *l, int64_t sent_at, unsigned int ms);

/* pthread_atfork hooks: the child has no record and no connection. */
void nm_renew_before_fork(void);
void nm_renew_after_fork_parent(void);
void nm_renew_after_fork_child(void);

#endif /* NM_RENEW_H */
