/*
 * acquisition.h -- what one acquisition at the server is, for the modules
 * that make one (lease.c, shares.c) and the one wait loop they share
 * (waiting.h): the lease, how long a call may wait, and the queue's
 * timings.  Types and constants only.
 */
#ifndef NM_ACQUISITION_H
#define NM_ACQUISITION_H

#include <stddef.h>
#include <stdint.h>

#include "settings.h"
#include "token.h"

typedef struct nm_lease {
    nm_config_t *cfg;           /* reference: where the lease lives */
    char token[NM_TOKEN_LEN + 1];
    /* Flags of a byte each, in the token's padding: a lease is part of
     * every held lock's memory. */
    unsigned char owner_died;   /* the previous holder's lease expired */
    unsigned char robust;       /* robust bookkeeping (lib.lua) */
    unsigned char cache;        /* may be kept after unlock (cache.h) */
    unsigned char waited;       /* others were queued when it was acquired */
    unsigned char contended;    /* refused busy at least once before the
                                   grant (statistics, stats.h) */
    char *key;                  /* <prefix>{<tag>}<name>, then its :m :q :w keys */
    size_t key_len;             /* of the first */
    unsigned int lease_ms;
    unsigned int splits;        /* quorum mode: split votes in a row */
    long long fence;            /* from the acquire script */
    int64_t sent_at;            /* monotonic ms the granted request left */
    int64_t tried_at;           /* ... the latest attempt left */
    struct nm_watch *watch;     /* renew.c's record, once tracked */
} nm_lease_t;

typedef enum nm_wait {
    NM_NOWAIT,  /* trylock: one attempt (a few if the connection breaks) */
    NM_WAIT     /* until DEADLINE (NM_FOREVER: through outages too) */
} nm_wait_t;

/* A queued waiter looks at the lock (an attempt, which also moves its
 * entry's end on) when what keeps it out runs out, when it is woken
 * (lib.lua, Waiting), and at least this often (up to a fifth sooner, at
 * random, waiting.c): NM_QUEUE_LOOK_MS, or
 * NM_QUEUE_WATCHED_MS while the deadlock detector may choose it (it holds
 * something), so that EDEADLK comes soon after.  Its entry lives
 * NM_QUEUE_TTL_MS, three looks: past that it surely died (waiting.h). */
#define NM_QUEUE_LOOK_MS 5000
#define NM_QUEUE_WATCHED_MS 250
#define NM_QUEUE_TTL_MS (3 * NM_QUEUE_LOOK_MS)
/* How long leaving the queue, or undoing an acquisition whose reply was
 * lost, may take after the caller's deadline passed. */
#define NM_CLEANUP_MS 50

#endif /* NM_ACQUISITION_H */
