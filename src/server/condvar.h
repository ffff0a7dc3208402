/*
 * condvar.h -- one condition variable on the server: a waiter's
 * registration, its wait for a signal, its looks and its leaving, and the
 * signals (cond.lua).
 *
 * A waiter is an entry of the condition's hash CH that expires by the
 * server's clock a lease after the waiter's registration or latest look;
 * a live waiter looks every third of its lease, so a dead or paused one
 * expires, which lets the server pass a signal chosen for it on to a live
 * waiter.  The process-local side (the mutex, the deadline) is
 * src/api/cond.c's.
 */
#ifndef NM_CONDVAR_H
#define NM_CONDVAR_H

#include <stddef.h>
#include <stdint.h>

#include "keys.h"
#include "settings.h"
#include "token.h"

/* The operations of a waiter (cond.lua's letters). */
typedef enum nm_cond_op {
    NM_COND_REGISTER = 'w',
    NM_COND_LOOK = 'c',
    NM_COND_LEAVE = 'l',
    NM_COND_LEAVE_PASS = 'p'  /* leave, passing a signal it got on */
} nm_cond_op_t;

typedef struct nm_waiter {
    nm_config_t *cfg;          /* reference */
    char token[NM_TOKEN_LEN + 1];
    unsigned int lease_ms;
    char *keys;                /* nm_keys_cond()'s */
    size_t lens[NM_CKEY_COUNT];
} nm_waiter_t;

/* Makes *W a new waiter of condition NAME (its token and keys), whose
 * entry lives LEASE_MS (0: the configured lease) past each look.  Nothing
 * is sent.  0, ENOTSUP (quorum mode: the servers' separate lists would
 * need a quorum protocol of their own to agree on who was signalled),
 * ENOMEM.  On error nothing is left in *W. */
int nm_cond_waiter(nm_waiter_t *w, const char *name, size_t name_len, unsigned int lease_ms);

/* Frees what *W owns (a waiter that did not leave expires with its
 * lease). */
void nm_cond_waiter_free(nm_waiter_t *w);

/* Runs W's operation OP: its result in *RESULT (cond.lua's for OP; for a
 * leave 1 also when the answer to a first attempt was lost, as it may
 * have taken the signal), the waiters it signalled woken.  0 or an error: NM_ECONN (unreachable),
 * NM_EUNDIALED, NM_ETRYAGAIN, EACCES, EPROTO, ENOMEM. */
int nm_cond_run(nm_waiter_t *w, nm_cond_op_t op, long long *result);

/* Blocks on W's list until UNTIL (monotonic ms).  0 when a signal came,
 * ETIMEDOUT when none did, NM_ECONN (the connection was dropped). */
int nm_cond_block(nm_waiter_t *w, int64_t until);

/* Signals one waiter of NAME (ALL 0) or all of them: *WOKEN how many.
 * 0, ENOTSUP (quorum mode), EAGAIN (unreachable), EACCES, EPROTO, ENOMEM. */
int nm_cond_signal(const char *name, size_t name_len, int all, long long *woken);

#endif /* NM_CONDVAR_H */
