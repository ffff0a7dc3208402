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

#include <hiredis/hiredis.h>

#include "journal.h"
#include "script.h"
#include "acquisition.h"
#include "settings.h"

/* What an acquisition is for (nm_lease_acquire's FLAGS). */
#define NM_LEASE_ROBUST 1u  /* robust bookkeeping: who died holding it,
                               ENOTRECOVERABLE */
#define NM_LEASE_CACHE 2u   /* the process may keep it cached after unlock;
                               granted (l->cache) in single-server mode
                               with caching configured on */

/* Acquires NAME for LEASE_MS (0: the configured lease) under the current
 * configuration, as FLAGS say.  On success *L holds the lease.  A trylock
 * that finds the lock held by a caching process asks that process for it,
 * and waits (within the I/O timeout) for the lock or its answer.
 * EBUSY (NM_NOWAIT, held elsewhere), EAGAIN (NM_NOWAIT, unreachable),
 * ETIMEDOUT (the deadline passed), ENOTRECOVERABLE, EACCES, EPROTO, ENOMEM,
 * EINVAL. */
int nm_lease_acquire(nm_lease_t *l, const char *name, size_t name_len,
                     unsigned int lease_ms, unsigned int flags, nm_wait_t wait,
                     int64_t deadline);

/* Riders.  Another layer's script call (condvar.c's) may ride with the
 * first request of an acquisition or a release: on one server it goes
 * first in the same write (nm_script_run_pair), so both cost one round
 * trip and the server runs it just before; in a cluster, where it may
 * belong to another node, it runs by itself just before.  Its outcome is
 * in its fields (RIDER->sent 0: it never went, the caller may send it).
 * A release's rider may have a TRAILER, a blocking command sent last in
 * the same write, on one server only (TRAILER->pending says whether it
 * went: its reply is then the caller's to read before anything else on
 * the calling thread's connection to server 0).  Not in quorum mode. */
typedef struct nm_ride {
    nm_script_call_t *rider;
    nm_trailer_t *trailer;
} nm_ride_t;

int nm_lease_acquire_riding(nm_lease_t *l, const char *name, size_t name_len,
                            unsigned int lease_ms, unsigned int flags, nm_wait_t wait,
                            int64_t deadline, nm_script_call_t *rider);
int nm_lease_release_riding(nm_lease_t *l, int unrecoverable, int64_t deadline,
                            nm_script_call_t *rider, nm_trailer_t *trailer);

/* Gives the lease back and frees what *L owns.  UNRECOVERABLE marks the
 * mutex ENOTRECOVERABLE (a robust holder unlocked without repairing).
 * 0, ENOLCK (it was lost: expired or taken over; nothing deleted),
 * EIO (the server could not be reached; the key expires by itself). */
int nm_lease_release(nm_lease_t *l, int unrecoverable);
/* The same, done or given up by DEADLINE (monotonic ms; NM_FOREVER as
 * nm_lease_release): EIO when out of time, the key then expires. */
int nm_lease_release_by(nm_lease_t *l, int unrecoverable, int64_t deadline);

/* Sends the release of journal entry E again under CFG (journal.h), once,
 * by DEADLINE, and without noting it: 0 (whatever the script answered:
 * the key gone or another token's is no news), or the request's error. */
int nm_lease_resend(nm_config_t *cfg, const nm_journal_entry_t *e, int64_t deadline);

/* Sets the lease's expiry to MS from now if it is still ours; *SENT_AT is
 * when the request left.  0, ENOLCK, EIO, EACCES, EPROTO. */
int nm_lease_extend(nm_lease_t *l, unsigned int ms, int64_t *sent_at);

/* Tells the trylock of token ASKER, which asked for L (acquire.lua 't'),
 * that a thread holds it: 0, or an error (the asker then asks again).  L
 * needs only its configuration and lock key. */
int nm_lease_answer_held(nm_lease_t *l, const char *asker);

/* Tells the server whether a thread of ours is in the cached lease L
 * (IDLE 0) or none has been for a while (1), for netmutex_status: 0, or
 * an error (the status is only a description; nothing depends on it). */
int nm_lease_mark_idle(nm_lease_t *l, int idle);

/* Whether L is to be given back: *WANTED 1 if others are queued for it or
 * it is not ours any more, else 0; returns 0 or an error.  L needs only its
 * configuration, lock key and token. */
int nm_lease_wanted(nm_lease_t *l, int *wanted);

/* Deletes NAME's lock whoever holds it and clears its robust state.
 * 0 (it was held), ENOENT (it was not), EAGAIN, EACCES, EPROTO, ENOMEM. */
int nm_lease_break(const char *name, size_t name_len);

/* Frees what *L owns without telling the server: after fork(), in the
 * child, which must leave the parent's lock alone. */
void nm_lease_forget(nm_lease_t *l);

/* ---- what the other kinds of lease share with this one ---------------------
 * A read-write lock's holds (shares.c) are leases too, on keys of their
 * own, queued and granted as a mutex's are: these are the mutex's own
 * steps, for them. */


/* Runs script ID with ARGC words ARGV (its NKEYS keys first, all in the
 * slot of L's key) for L, on the calling thread's connection or the node
 * of that slot, the reply by DEADLINE (and the I/O timeout): 0 with *OUT,
 * or an error (a broken connection is dropped and reported).  *SENT tells
 * whether a failed call may have reached the server. */
int nm_lease_script(nm_lease_t *l, nm_script_t id, int nkeys, int argc, const char **argv,
                    const size_t *lens, int64_t deadline, redisReply **out, int *sent);

/* Pushes the wake-ups a script could not push itself (a Redis Cluster's:
 * lib.lua, Grants and Waiting): the {token, ms} pairs of its reply R from
 * element AT on, each to that waiter's grant list of L's key.  Hints, so
 * failures are not reported. */
void nm_lease_push_wakes(nm_lease_t *l, const redisReply *r, size_t at, int64_t deadline);

/* "host:pid:tid" of the calling thread (or CFG's holder:tid) in BUF, for
 * people and tools: its length. */
size_t nm_lease_holder(const nm_config_t *cfg, char *buf, size_t size);

/* In a forked child: its pid and thread ids are looked up anew. */
void nm_lease_after_fork_child(void);

#endif /* NM_LEASE_H */
