/*
 * reply.h -- a command's reply by a deadline: the library's own
 * non-blocking I/O on a hiredis context (poll, send without SIGPIPE,
 * reading), replies owed to another layer, blocking commands nudged with
 * PING, and the one cancellation point.  What it reads is checked and
 * unpacked by reply_shape.h, which it includes for its callers.
 */
#ifndef NM_REPLY_H
#define NM_REPLY_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

#include "reply_shape.h"

/* Deadlines.  Every connection is non-blocking at the socket (nm_io_setup)
 * and every wait for it is a poll() bounded by the call's DEADLINE
 * (monotonic ms): a per-read socket timeout would let a server that drips
 * one byte at a time stretch a call without end.  A call that runs out of
 * time answers NM_ECONN, and the connection must be dropped: a reply may
 * still be on its way. */

/* Makes C, fresh from a hiredis connect call, non-blocking: from now on only
 * the calls below may do its I/O (never redisGetReply).  0 or NM_ECONN. */
int nm_io_setup(redisContext *c);

/* Runs one command (argv form: binary-safe) and checks it: 0 with *OUT set
 * (free it with freeReplyObject), or NM_ECONN when the connection failed or
 * DEADLINE passed (the context is unusable afterwards), or one of
 * reply_shape.h's errors. */
int nm_call(redisContext *c, int argc, const char **argv, const size_t *lens,
            int64_t deadline, redisReply **out);

/* Blocking commands (BLPOP, WAIT).  A server answers a blocked command
 * whose timeout passed only when its event loop wakes up: for a request of
 * any client, or at its next `hz` tick -- up to 1000/hz ms late, a second
 * at `hz 1`.  Waiting for that tick would make every timed wait late by it,
 * and a bound on the reply that does not allow for it takes a live server
 * for a dead one.  So the caller gives the command a timeout that ends
 * NM_BLOCK_EARLY_MS before UNTIL, the moment it wants the answer by; if
 * none has come by UNTIL, a PING is sent behind the command, and more at
 * growing intervals (1, 2, 4 ... NM_NUDGE_MAX_MS ms, NM_NUDGES in all,
 * some 80 ms: beyond that the server's own tick answers): the first
 * request that arrives after the server's timeout wakes it, and it
 * answers the command at once, then the PINGs, which are read and
 * dropped.  A live
 * server so answers within a round trip of UNTIL, whatever its `hz`; one
 * that does not answer by DEADLINE is treated as any other (NM_ECONN).  (A
 * server before Redis 6.0 handles these timeouts in its tick whatever
 * arrives, but the scripts need 6.0 anyway.) */
#define NM_BLOCK_EARLY_MS 2
#define NM_NUDGE_MAX_MS 16
#define NM_NUDGES 8

/* Runs blocking command ARGV, as nm_call() does, its reply due at UNTIL
 * and by DEADLINE at the latest; the connection is left with nothing
 * pending.  Errors of nm_call(). */
int nm_call_blocking(redisContext *c, int argc, const char **argv, const size_t *lens,
                     int64_t until, int64_t deadline, redisReply **out);

/* The reply of a blocking command sent already (a pipeline's last, see
 * script.h's trailers), as nm_call_blocking() waits for it. */
int nm_await_blocking(redisContext *c, int64_t until, int64_t deadline, redisReply **out);

/* ON: from now on, until called with 0, the calling thread's waits for
 * the reply of a blocking command (nm_call_blocking, nm_await_blocking),
 * up to their UNTIL, are cancellation points: the poll() alone runs with
 * deferred cancellation enabled (pthread_cancel(3)), for a caller that
 * had it enabled before the library disabled it.  A thread cancelled
 * there has its blocking command still pending, its reply perhaps half
 * read: the caller's clean-up handler calls this with 0 and drops the
 * connection.  netmutex_cond_wait(3)'s block (condvar.c) is the one
 * user. */
void nm_reply_cancellable(int on);

/* Reads the next reply of a pipeline, checked as nm_call() does. */
int nm_get_reply(redisContext *c, int64_t deadline, redisReply **out);

/* ---- pipelines driven by poll() (quorum.c, the watchdog) ---- */

/* Writes out every command appended to C by DEADLINE: 0 or NM_ECONN. */
int nm_send(redisContext *c, int64_t deadline);

/* Reads what C's socket holds (poll() said it is readable): 0 or NM_ECONN
 * (an error, the server closed the connection, or it sent more than any
 * reply of ours can be: a flood). */
int nm_receive(redisContext *c);

/* The next complete reply received on C, checked as nm_get_reply() does:
 * 0 with *OUT set, or NULL when no reply is complete yet; an error reply's
 * errno (the reply is consumed); NM_ECONN, ENOMEM. */
int nm_take_reply(redisContext *c, redisReply **out);

/* A reply owed to another layer: a request written without waiting for
 * its answer (condvar.c's signal), whose reply the calling thread's next
 * read on C takes first, whatever reads it (nm_take_reply and every read
 * built on it), so that a request written after it rides in the same
 * round trip.  FN gets its outcome, once: 0 and the reply (FN frees it),
 * an error reply's errno, or NM_ECONN when C broke or is closed before it
 * came (nm_reply_forget, from nm_dial_close).  FN runs inside a read of
 * C: it may not use C.  One owed reply per thread; nm_reply_settle reads
 * it by DEADLINE (a deadline now: only what already came): 0 once FN ran
 * (or nothing was owed), NM_ECONN or ENOMEM (FN had NM_ECONN: drop C), or
 * ETIMEDOUT (still owed). */
typedef void (*nm_owed_fn)(void *arg, int err, redisReply *r);
void nm_reply_owe(redisContext *c, nm_owed_fn fn, void *arg);
int nm_reply_owing(void);
int nm_reply_settle(int64_t deadline);
void nm_reply_forget(redisContext *c);

/* In a child after fork(): the parent's owed reply is the parent's. */
void nm_reply_forget_all(void);

#endif /* NM_REPLY_H */
