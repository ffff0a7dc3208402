/*
 * script.h -- the Lua scripts that make every lock operation atomic on the
 * server, and calling them.
 *
 * Scripts are called by EVALSHA with their SHA1, computed at build time.  A
 * server that does not have them (new, restarted, SCRIPT FLUSH, another
 * server behind the same address) answers NOSCRIPT: the script is loaded on
 * that connection and the call repeated, once.
 */
#include <stdint.h>
#ifndef NM_SCRIPT_H
#define NM_SCRIPT_H

#include <hiredis/hiredis.h>

typedef enum nm_script {
    NM_SCRIPT_ACQUIRE,
    NM_SCRIPT_RELEASE,
    NM_SCRIPT_CANCEL,
    NM_SCRIPT_RENEW,
    NM_SCRIPT_BREAK,
    NM_SCRIPT_STATUS,
    NM_SCRIPT_FENCE,
    NM_SCRIPT_MARK,
    NM_SCRIPT_GRANT,
    NM_SCRIPT_COND,
    NM_SCRIPT_RWLOCK,
    NM_SCRIPT_RWSTATUS,
    NM_SCRIPT_ADD,
    NM_SCRIPT_COUNT
} nm_script_t;

/* Renewals batch many keys into one call; everything else uses a few. */
#define NM_RENEW_BATCH 256
#define NM_SCRIPT_MAX_ARGS (3 * NM_RENEW_BATCH)

/* Runs script ID with NKEYS keys followed by NARGS - NKEYS arguments, all
 * binary-safe (ARGV/LENS), by DEADLINE.  Errors as nm_call(). */
int nm_script_run(redisContext *c, nm_script_t id, int nkeys, int nargs,
                  const char **argv, const size_t *lens, int64_t deadline,
                  redisReply **out);

/* Loads script ID on C by DEADLINE.  EPROTO if the server names it by
 * another SHA1 than ours. */
int nm_script_load(redisContext *c, nm_script_t id, int64_t deadline);

/* One script call described for a pipeline of two (nm_script_run_pair),
 * which another layer may hand over to go beside a request of its own
 * (lease.h's riders): what to send, and, once sent, what came back. */
typedef struct nm_script_call {
    nm_script_t id;
    int nkeys, nargs;        /* NARGS words in ARGV, the NKEYS keys first */
    const char **argv;
    const size_t *lens;
    int sent;                /* out: 1 once it went out (it may have run) */
    int err;                 /* out, once sent: as nm_script_run's */
    redisReply *reply;       /* out: the reply when ERR is 0 (the caller
                                frees it), else NULL */
} nm_script_call_t;

/* A command that follows a pair in the same write and whose reply the
 * pair leaves on the connection: a blocking one (a condition waiter's
 * BLPOP), read later with nm_await_blocking (reply.h). */
typedef struct nm_trailer {
    int argc;
    const char **argv;
    const size_t *lens;
    int pending;             /* out: 1 when its reply is to be read */
} nm_trailer_t;

/* Runs FIRST, then SECOND, on C by DEADLINE in one write: one round trip,
 * and the server runs them in that order, one right after the other; then
 * TRAILER (NULL: none), whose reply is left to read.  Each one's outcome
 * goes to its fields.  A script the server did not have (NOSCRIPT) is
 * loaded; SECOND is then run again by itself (after FIRST, as asked),
 * FIRST never (SECOND ran without it: the caller decides what that
 * means), and keeps ENOENT.  With a TRAILER nothing more can be asked on
 * C before its answer: nothing is loaded, FIRST keeps ENOENT (the caller
 * drops C), and a SECOND that did not run is NM_ECONN, to go again on
 * another connection.  Returns NM_ECONN when the connection failed
 * (either may have run; drop it, TRAILER is not pending then), else 0. */
int nm_script_run_pair(redisContext *c, nm_script_call_t *first, nm_script_call_t *second,
                       nm_trailer_t *trailer, int64_t deadline);

/* Queues a call of script ID on C's pipeline; read its reply with
 * nm_get_reply() or nm_take_reply() (NOSCRIPT: ENOENT, nm_script_load). */
int nm_script_append(redisContext *c, nm_script_t id, int nkeys, int nargs,
                     const char **argv, const size_t *lens);

#endif /* NM_SCRIPT_H */
