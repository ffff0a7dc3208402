/*
 * condvar.h -- one condition variable on the server: a waiter's
 * registration, its wait for a signal, its looks and its leaving, and the
 * signals (cond.lua).
 *
 * A waiter is an entry of the condition's hash CH that expires by the
 * server's clock a lease after the waiter's registration or latest look;
 * a live waiter looks every third of its lease, so a dead or paused one
 * expires, which lets the server pass a signal chosen for it on to a live
 * waiter.  Its registration and its leaving may ride with the mutex's
 * release and acquisition (lease.h): the process-local side (the mutex,
 * the deadline) is src/api/cond.c's.
 */
#ifndef NM_CONDVAR_H
#define NM_CONDVAR_H

#include <stddef.h>
#include <stdint.h>

#include "keys.h"
#include "script.h"
#include "settings.h"
#include "token.h"

/* The operations of a waiter (cond.lua's letters). */
typedef enum nm_cond_op {
    NM_COND_REGISTER = 'w',
    NM_COND_LOOK = 'c',
    NM_COND_LEAVE = 'l',
    NM_COND_LEAVE_PASS = 'p'  /* leave, passing a signal it got on */
} nm_cond_op_t;

#define NM_COND_ARGS 5

typedef struct nm_waiter {
    nm_config_t *cfg;          /* reference */
    char token[NM_TOKEN_LEN + 1];
    unsigned int lease_ms;
    uint64_t gen;              /* the master the sentinels named when it
                                  registered (sentinel.h), or 0 */
    char *keys;                /* nm_keys_cond()'s */
    size_t lens[NM_CKEY_COUNT];
    /* The request being made (nm_cond_request): the call's words. */
    const char *argv[NM_CKEY_COUNT + NM_COND_ARGS];
    size_t alens[NM_CKEY_COUNT + NM_COND_ARGS];
    char op[2], ttl[24], lease[16];
    /* Its BLPOP (nm_cond_block_request). */
    const char *bargv[3];
    size_t blens[3];
    char timeout[24];
    /* Its blocks are cancellation points (nm_cond_cancelled). */
    int cancellable;
    int blocking;              /* in one: its BLPOP is pending */
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

/* Whether a registration of W may ride with the mutex's release
 * (lease.h): where it would go in one write with it, the server must be
 * known to have cond.lua (this thread's connection ran it), since the
 * release runs even when the registration is refused (NOSCRIPT). */
int nm_cond_may_ride(nm_waiter_t *w);

/* Fills *CALL with W's operation OP, to ride with a request of the mutex
 * (lease.h); nm_cond_rode() takes its outcome once it went. */
void nm_cond_request(nm_waiter_t *w, nm_cond_op_t op, nm_script_call_t *call);

/* The outcome of CALL, filled by nm_cond_request() and sent: its result
 * in *RESULT (cond.lua's for OP), the waiters it signalled woken.  0 or
 * its error (NM_ECONN, EACCES, EPROTO, ...; ENOENT: the server did not
 * have the script).  Frees the reply. */
int nm_cond_rode(nm_waiter_t *w, nm_script_call_t *call, long long *result);

/* Runs W's operation OP by itself: its result in *RESULT (for a leave, 1
 * also when the answer to a first attempt was lost, as it may have taken
 * the signal).  0 or an error: NM_ECONN (unreachable), NM_EUNDIALED,
 * NM_ETRYAGAIN, EACCES, EPROTO, ENOMEM. */
int nm_cond_run(nm_waiter_t *w, nm_cond_op_t op, long long *result);

/* Fills *T with W's BLPOP until UNTIL (monotonic ms), to go last with
 * the registration's write (lease.h, trailers): 0, or ETIMEDOUT when
 * UNTIL is too close to block for.  Once it went (T->pending), its answer
 * is read with nm_cond_await, or given up with nm_cond_abandon. */
int nm_cond_block_request(nm_waiter_t *w, int64_t until, nm_trailer_t *t);
int nm_cond_await(nm_waiter_t *w, int64_t until);
void nm_cond_abandon(nm_waiter_t *w);

/* Blocks on W's list until UNTIL (monotonic ms).  0 when a signal came,
 * ETIMEDOUT when none did, NM_ECONN (the connection was dropped, or the
 * sentinels name another master than the one W registered with: the new
 * one may lack a signal the old one had, so W wakes rather than block
 * there). */
int nm_cond_block(nm_waiter_t *w, int64_t until);

/* With W->cancellable set, nm_cond_await and nm_cond_block are
 * cancellation points while they wait for a signal (nm_reply_cancellable,
 * reply.h), and nothing else is.  A clean-up handler of a thread
 * cancelled there calls this first: the BLPOP still pending, its
 * connection is dropped.  W is then registered still: the handler leaves
 * with nm_cond_run or nm_cond_request, and frees W. */
void nm_cond_cancelled(nm_waiter_t *w);

/* Signals one waiter of NAME (ALL 0) or all of them: *WOKEN how many.
 * 0, ENOTSUP (quorum mode), EAGAIN (unreachable), EACCES, EPROTO, ENOMEM.
 *
 * With MAY_DEFER (the caller holds a lock of the library, so that it will
 * call again to give it back: see cond.c), on one server (Sentinel's
 * master included), on a connection known to have the script, the signal
 * is written and not waited for: it is at the
 * server as soon as a request that waits, and ahead of every later request
 * of the calling thread there, but its answer is read by the thread's next
 * read on that connection (reply.h, an owed reply) -- most often the
 * unlock that follows it, which so costs one round trip for both.  *WOKEN
 * is 0 then.  A signal whose answer says it did not run, or whose
 * connection broke before the answer, goes again as a request of its own
 * at nm_cond_flush (twice is a spurious wake-up at worst).
 *
 * nm_cond_flush takes the calling thread's owed signal reply, if any: the
 * one already received (WAIT 0), or within the I/O timeout (WAIT 1, the
 * connection dropped when none came); then sends a signal that must go
 * again, as a request of its own.  Called with WAIT 1 at the end of every
 * lock, unlock and wait call (nm_cond_flushed), and before a
 * configuration changes, so that no call after the signal returns before
 * its answer came (a release riding after it most often took it
 * already); with WAIT 0 before
 * a wait's registration (which then takes it) and another signal (which
 * then waits for its own answer). */
int nm_cond_signal(const char *name, size_t name_len, int all, int may_defer, long long *woken);
void nm_cond_flush(int wait);
/* ERR, once nm_cond_flush(1) ran: how every lock, unlock and wait call of
 * every kind of hold ends (a mutex, a read share or the write lock, a
 * semaphore permit), since a signal is written without waiting for its
 * answer whatever the thread holds, and the call that gives that hold
 * back may be the thread's last. */
int nm_cond_flushed(int err);
/* Whether the calling thread's latest signal is still owed its answer. */
int nm_cond_owed(void);
/* Whether the calling thread has a signal to send again (nm_cond_flush
 * would send it): its connection must have nothing pending then. */
int nm_cond_flush_due(void);

#endif /* NM_CONDVAR_H */
