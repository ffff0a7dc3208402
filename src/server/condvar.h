/*
 * condvar.h -- one condition variable on the server: a waiter's registration,
 * its wait for a signal, its leaving, and the signals (cond.lua).
 *
 * A waiter is a lease of its own: its key CK holds its token, so the
 * renewal job (renew.h) keeps it alive while the waiter lives, and a dead
 * waiter's CK expires, which lets the server pass a signal chosen for it
 * on to a live waiter.  The process-local side (the mutex, the deadline,
 * the renewal) is src/api/cond.c's.
 */
#ifndef NM_CONDVAR_H
#define NM_CONDVAR_H

#include <stddef.h>
#include <stdint.h>

#include "keys.h"
#include "lease.h"

typedef struct nm_waiter {
    nm_lease_t lease;          /* CK: cfg, token, key (a copy), lease_ms,
                                  sent_at; what nm_renew_track needs */
    char *keys;                /* nm_keys_cond()'s */
    size_t lens[NM_CKEY_COUNT];
} nm_waiter_t;

/* Registers a new waiter of condition NAME in *W, its CK living LEASE_MS
 * (0: the configured lease).  The caller still holds the mutex: a signal
 * sent after the caller's unlock finds it.  0, ENOTSUP (quorum mode: the
 * servers' separate queues would need a quorum protocol of their own to
 * agree on who was signalled), NM_ECONN, EACCES, EPROTO, ENOMEM.  On
 * error nothing is left in *W. */
int nm_cond_register(nm_waiter_t *w, const char *name, size_t name_len,
                     unsigned int lease_ms);

/* Blocks on W's signal list until UNTIL (monotonic ms).  0 when a signal
 * came, ETIMEDOUT when none did, NM_ECONN (the connection was dropped). */
int nm_cond_block(nm_waiter_t *w, int64_t until);

/* A waiter's periodic look (cond.lua 'c'): passes on the signals of dead
 * waiters and keeps the lists alive.  0 or an error. */
int nm_cond_look(nm_waiter_t *w);

/* W leaves: *SIGNALLED 1 if it had been signalled, or may have been (the
 * answer to a first attempt was lost).  PASS: a signal it got goes on to
 * the next waiter.  Frees what *W owns, whatever happens (a
 * waiter that could not be removed expires with its lease).  0 or an
 * error. */
int nm_cond_leave(nm_waiter_t *w, int pass, int *signalled);

/* Signals one waiter of NAME (ALL 0) or all of them: *WOKEN how many.
 * 0, ENOTSUP (quorum mode), EAGAIN (unreachable), EACCES, EPROTO, ENOMEM. */
int nm_cond_signal(const char *name, size_t name_len, int all, long long *woken);

#endif /* NM_CONDVAR_H */
