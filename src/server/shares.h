/*
 * shares.h -- the server side of a share set and of the lock that
 * excludes it: a read-write lock's read shares and its write lock
 * (rwlock.lua; docs/design.md, 9b); and a semaphore's permits, shares of
 * a set bounded by its permits (9c), through the same requests.
 *
 * Every hold is a lease of its own, with its own token: a read share is a
 * member of the lock's share set S, whose score is its expiry; the write
 * lock is the lock key K, as a mutex's.  The renewal job renews both
 * through renew.lua (renew.h), so a hold's nm_lease_t names the key its
 * renewal needs, S or K.  Waiters queue in Redis and block on a grant list
 * of their own, as a mutex's waiters do (waiting.h): no polling.
 */
#ifndef NM_SHARES_H
#define NM_SHARES_H

#include <stddef.h>
#include <stdint.h>

#include "lease.h"

/* What a hold is. */
typedef enum nm_share_kind {
    NM_SHARE_READ,  /* a read share: many at once */
    NM_SHARE_WRITE, /* the write lock: alone, no share */
    NM_SHARE_PERMIT /* a semaphore's permit: a share of a bounded set, on
                       the semaphore's keys (nm_keys_sem) */
} nm_share_kind_t;

/* nm_shares_acquire's FLAGS. */
#define NM_SHARES_PREFER_READERS 1u /* a reader waits for a writer that
                                       holds the lock, never for one that
                                       waits (default: it does, so writers
                                       are not starved) */

/* Acquires a hold of KIND on read-write lock NAME (a permit: on semaphore
 * NAME of PERMITS permits; PERMITS is 0 for the other kinds) for LEASE_MS
 * (0: the configured lease) under the current configuration.  On success *L holds
 * the lease: its configuration, token, fence, lease_ms, sent_at, and as
 * its key the key its renewal renews (S for a share, K for the write
 * lock).  A reader's fence is drawn while its share keeps writers out: it
 * is greater than every earlier writer's fence and smaller than every
 * later one's (a permit has none: 0).  EBUSY (NM_NOWAIT: not free for
 * it), EAGAIN (NM_NOWAIT: unreachable), ETIMEDOUT, ENOTSUP (quorum mode),
 * EACCES, EPROTO, ENOMEM, EINVAL (also: the semaphore's set is bounded by
 * another number of permits). */
int nm_shares_acquire(nm_lease_t *l, nm_share_kind_t kind, const char *name, size_t name_len,
                      unsigned int lease_ms, unsigned int flags, unsigned int permits,
                      nm_wait_t wait, int64_t deadline);

/* Gives hold *L of KIND on NAME back, serving the waiters it let in, and
 * frees what *L owns.  0, ENOLCK (it was lost: run out, or the write lock
 * is another's; nothing deleted), EIO (the server could not be reached:
 * the hold runs out by itself). */
int nm_shares_release(nm_lease_t *l, nm_share_kind_t kind, const char *name, size_t name_len,
                      unsigned int permits);

/* The permits of semaphore NAME (of PERMITS) no live share holds, as the
 * server counts them, in *FREE.  0, EINVAL (the server's set is bounded by
 * another number of permits), ENOTSUP (quorum mode), EAGAIN (unreachable),
 * EACCES, EPROTO, ENOMEM. */
int nm_shares_free(const char *name, size_t name_len, unsigned int permits, unsigned int *free_out);

#endif /* NM_SHARES_H */
