/*
 * reply.h -- one helper per shape of Redis reply, so no caller inspects a
 * redisReply by hand, and every error reply maps to an errno in one place.
 */
#ifndef NM_REPLY_H
#define NM_REPLY_H

#include <errno.h>
#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

/* Errors a call that talks to Redis can return (besides NM_ECONN):
 *   EACCES  NOAUTH / WRONGPASS / NOPERM: credentials or ACL refused;
 *   ENOENT  NOSCRIPT: the server lost our script (re-load and retry);
 *   NM_EREDIRECT  MOVED / ASK: a cluster node does not serve the key's
 *           slot (the reply's text, nm_reply_last_error, says who does);
 *   NM_ETRYAGAIN  TRYAGAIN, or a script refused a key as "non local": the
 *           slot is being migrated and the request's keys are split
 *           between the two nodes (lib.lua, "Declared keys"); nothing was
 *           done, and the same request will be served once the migration
 *           is over (cluster_route.c retries it within its deadline);
 *   EPROTO  any other error reply, or a reply of an unexpected shape.
 * A server that will answer later (LOADING, BUSY, ...) or is the wrong node
 * (READONLY: a demoted master) counts as NM_ECONN.  The NM_E* codes are
 * internal (nm.h), never errno values. */

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
 * DEADLINE passed (the context is unusable afterwards), or one of the errors
 * above. */
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

/* Every context the library makes (dial.c) bounds the element counts its
 * replies' arrays may claim, before hiredis allocates for them (reply.c,
 * "array counts"): 0 or ENOMEM.  Undone before the context is freed. */
int nm_reply_guard(redisContext *c);
void nm_reply_unguard(redisContext *c);
/* In a child after fork(): the parent's owed reply is the parent's. */
void nm_reply_forget_all(void);

/* The reply is the status SERVER_STATUS ("OK"). */
int nm_reply_expect_status(const redisReply *r, const char *status);

/* The reply is an integer. */
int nm_reply_integer(const redisReply *r, long long *out);

/* The reply is an array of at least N integers: copies the first N. */
int nm_reply_integers(const redisReply *r, long long *out, size_t n);

/* The reply is a bulk or status string: a pointer into the reply. */
int nm_reply_string(const redisReply *r, const char **str, size_t *len);

/* The reply is an array of at least N strings: pointers into the reply. */
int nm_reply_strings(const redisReply *r, const char **strs, size_t *lens, size_t n);

/* The reply is an array that names, at index AT, a queued waiter a script
 * reserved the lock for: its token (a string, a pointer into the reply)
 * and its claim in ms (an integer).  ENOENT when the array ends before AT
 * (nobody to hand the lock to), EPROTO for another shape. */
int nm_reply_grant(const redisReply *r, size_t at, const char **token, size_t *len,
                   long long *claim);

/* The reply is SCAN's page, [cursor, [key...]]: the next cursor (a
 * decimal number, at most NM_SCAN_CURSOR_MAX - 1 digits) copied to CURSOR,
 * the keys, every one a string, in KEYS (pointers into the reply) and *N. */
#define NM_SCAN_CURSOR_MAX 24
int nm_reply_scan(const redisReply *r, char cursor[NM_SCAN_CURSOR_MAX],
                  redisReply *const **keys, size_t *n);

/* The text of the last error reply the calling thread received, for
 * messages that say what the server objected to ("" if none yet). */
const char *nm_reply_last_error(void);

/* The errno for an error reply (see above). */
int nm_reply_error_errno(const redisReply *r);

#endif /* NM_REPLY_H */
