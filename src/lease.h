/*
 * lease.h -- one acquisition of a mutex on the server: the Redis side of a
 * lock, without any of its process-local bookkeeping.
 *
 * A lease is the lock key holding our fresh token with an expiry.  Getting
 * it runs the acquire script until it succeeds, the caller's deadline
 * passes, or an error retrying cannot fix; giving it back runs the
 * owner-checked release script.  Neither ever touches a key that holds
 * another token.
 */
#ifndef NM_LEASE_H
#define NM_LEASE_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "token.h"

typedef struct nm_lease {
    nm_config_t *cfg;           /* reference: where the lease lives */
    char token[NM_TOKEN_LEN + 1];
    char *key;                  /* <prefix>{<name>}, then its :m :q :w keys */
    size_t key_len;             /* of the first */
    unsigned int lease_ms;
    long long fence;            /* from the acquire script */
    int64_t sent_at;            /* monotonic ms the granted request left */
    int64_t tried_at;           /* ... the latest attempt left */
    struct nm_watch *watch;     /* the watchdog's record, once tracked */
    int owner_died;             /* the previous holder's lease expired */
    int robust;                 /* robust bookkeeping (lib.lua) */
    unsigned int splits;        /* quorum mode: split votes in a row */
} nm_lease_t;

typedef enum nm_wait {
    NM_NOWAIT,  /* trylock: one attempt (a few if the connection breaks) */
    NM_WAIT     /* until DEADLINE (NM_FOREVER: through outages too) */
} nm_wait_t;

/* Acquires NAME for LEASE_MS (0: the configured lease) under the current
 * configuration, with the bookkeeping of a robust mutex if ROBUST (who died
 * holding it, ENOTRECOVERABLE).  On success *L holds the lease.
 * EBUSY (NM_NOWAIT, held elsewhere), EAGAIN (NM_NOWAIT, unreachable),
 * ETIMEDOUT (the deadline passed), ENOTRECOVERABLE, EACCES, EPROTO, ENOMEM,
 * EINVAL. */
int nm_lease_acquire(nm_lease_t *l, const char *name, size_t name_len,
                     unsigned int lease_ms, int robust, nm_wait_t wait, int64_t deadline);

/* Gives the lease back and frees what *L owns.  UNRECOVERABLE marks the
 * mutex ENOTRECOVERABLE (a robust holder unlocked without repairing).
 * 0, ENOLCK (it was lost: expired or taken over; nothing deleted),
 * EIO (the server could not be reached; the key expires by itself). */
int nm_lease_release(nm_lease_t *l, int unrecoverable);

/* Sets the lease's expiry to MS from now if it is still ours; *SENT_AT is
 * when the request left.  0, ENOLCK, EIO, EACCES, EPROTO. */
int nm_lease_extend(nm_lease_t *l, unsigned int ms, int64_t *sent_at);

/* Deletes NAME's lock whoever holds it and clears its robust state.
 * 0 (it was held), ENOENT (it was not), EAGAIN, EACCES, EPROTO, ENOMEM. */
int nm_lease_break(const char *name, size_t name_len);

/* Frees what *L owns without telling the server: after fork(), in the
 * child, which must leave the parent's lock alone. */
void nm_lease_forget(nm_lease_t *l);

/* pthread_atfork hooks for the list of queued waiters (see lease.c). */
void nm_lease_before_fork(void);
void nm_lease_after_fork_parent(void);
void nm_lease_after_fork_child(void);

#endif /* NM_LEASE_H */
