/*
 * waiting.h -- the one client wait loop (waiting.c) of every kind that
 * queues at the server: a mutex's lease (lease.c), a read-write lock's
 * share or write lock and a semaphore's permit (shares.c).  A kind gives
 * its requests (nm_wait_ops_t); the loop does the rest, the same for all:
 *
 *  - attempts, the first without ceremony, then queued: one that finds the
 *    name taken queues with that same request (lib.lua, Waiting);
 *  - waits between attempts: queued, for its grant on its own list (BLPOP)
 *    until what keeps it out runs out, a deputy's claim is over, or its
 *    next look (lease.h, NM_QUEUE_LOOK_MS); in quorum mode, which does not
 *    queue, for a release on pub/sub (wake.h); after a failed request, a
 *    back-off;
 *  - retries: a broken connection is the next attempt's to redial; a
 *    trylock redials once;
 *  - gives up by the caller's deadline (ETIMEDOUT, a trylock's EAGAIN), at
 *    a final error, or when the deadlock detector chose it (EDEADLK):
 *    leaves the queue, taking a grant that came meanwhile, or undoes what
 *    a request whose answer was lost may have taken, within CLEANUP_MS.
 */
#ifndef NM_WAITING_H
#define NM_WAITING_H

#include <stdint.h>

#include "acquisition.h"
#include "wake.h"

/* A waiter in a queue, listed so that an exiting process takes it out
 * (waiting.c, "leaving the queue at exit").  LEAVE is how: it is given a
 * copy of the lease's fixed fields (cfg, token, key, lease_ms, robust),
 * ARG and the exit's deadline, runs on the exiting thread, and gives back
 * a grant it finds. */
typedef void (*nm_leave_fn)(nm_lease_t *l, void *arg, int64_t deadline);
typedef struct nm_queued {
    struct nm_queued *next;
    const nm_lease_t *lease; /* the waiter's: cfg, token, key (fixed) */
    nm_leave_fn leave;
    void *leave_arg;
    int listed;              /* the list's lock: in the list */
    int in_flight;           /* the list's lock: a request that may queue is out */
    int left;                /* the list's lock: the exit handler took it out */
} nm_queued_t;

typedef struct nm_waiting nm_waiting_t;

/* A kind's requests.  ATTEMPT: one try, queueing for TTL ms when that is
 * not 0 (W->queued: it is queued already), by DEADLINE: 0 (held), EBUSY
 * with *PTTL (ms until what keeps it out runs out, -1 none), NM_EASKED (a
 * trylock asked a caching holder), NM_ECONN, or a final error; *SENT
 * whether a failed request may have reached the server.  CANCEL: leave
 * the queue by DEADLINE, 0 when a grant came meanwhile (this request
 * confirmed it: held).  UNDO: give back what W may hold by DEADLINE.
 * LEAVE: the exit handler's way out (above).
 * TRY_QUEUES: a trylock queues too (a mutex's asks a caching holder). */
typedef struct nm_wait_ops {
    int (*attempt)(nm_waiting_t *w, unsigned int ttl, int64_t deadline, long long *pttl,
                   int *sent);
    int (*cancel)(nm_waiting_t *w, int64_t deadline);
    void (*undo)(nm_waiting_t *w, int64_t deadline);
    nm_leave_fn leave;
    int try_queues;
} nm_wait_ops_t;

/* One acquisition's wait: L its lease (token, key, configuration), OPS and
 * ARG the kind's, QUORUM set for quorum mode (no queue: it listens).  The
 * rest is the loop's. */
struct nm_waiting {
    nm_lease_t *l;
    const nm_wait_ops_t *ops;
    void *arg;
    int quorum;
    int trylock;       /* the call is a trylock (NM_NOWAIT) */
    int queued;        /* an attempt may have put it in the queue */
    int maybe_applied; /* a request whose answer was lost may have won */
    nm_chan_t *ch;     /* quorum mode: the release channel */
    nm_queued_t entry; /* listed for the exit handler while queued */
};

/* Attempts until W holds, a final error, or DEADLINE (a trylock's: the
 * I/O timeout, which the caller computed); gives up as the top says on
 * error.  0 or the error. */
int nm_wait_run(nm_waiting_t *w, nm_wait_t wait, int64_t deadline);

/* A queued waiter of L's key blocks on its grant list for up to PAUSE ms
 * (never past DEADLINE): 0 when a grant came (the next attempt confirms
 * it), EBUSY when none did (or after a deputy's claim: the next attempt
 * looks), NM_EHELD when a caching holder answered a trylock that a thread
 * holds it, or an error. */
int nm_wait_grant(nm_lease_t *l, int64_t pause, int64_t deadline);

/* The calling thread's wait gives up with EDEADLK once *FLAG is set
 * (deadlock.c; NULL: no flag).  A waiter with a flag looks every
 * NM_QUEUE_WATCHED_MS, the others every NM_QUEUE_LOOK_MS (lease.h). */
void nm_wait_stop_flag(const int *flag);

/* pthread_atfork hooks for the list of queued waiters (waiting.c). */
void nm_wait_before_fork(void);
void nm_wait_after_fork_parent(void);
void nm_wait_after_fork_child(void);

#endif /* NM_WAITING_H */
