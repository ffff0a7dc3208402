/*
 * reply_shape.h -- checking and unpacking Redis replies: every error reply
 * maps to an errno here, and each shape of reply the scripts and commands
 * return has a helper, so that a caller need not inspect a redisReply by
 * hand.  Pure: no I/O (reply.h reads the replies).
 */
#ifndef NM_REPLY_SHAPE_H
#define NM_REPLY_SHAPE_H

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

/* The errno for an error reply (see above). */
int nm_reply_error_errno(const redisReply *r);

/* R, a reply just read: an error reply becomes its errno (its text kept
 * for nm_reply_last_error) and is freed; any other is 0 with *OUT = R. */
int nm_reply_check(redisReply *r, redisReply **out);

/* The text of the last error reply the calling thread received, for
 * messages that say what the server objected to ("" if none yet). */
const char *nm_reply_last_error(void);

/* The reply is the status SERVER_STATUS ("OK"). */
int nm_reply_expect_status(const redisReply *r, const char *status);

/* Whether the reply is nil (a missing key, a SET NX not done). */
int nm_reply_is_nil(const redisReply *r);

/* The reply is an integer. */
int nm_reply_integer(const redisReply *r, long long *out);

/* The reply is an array: *N its length. */
int nm_reply_array(const redisReply *r, size_t *n);

/* The reply is an array whose element AT is an integer. */
int nm_reply_integer_at(const redisReply *r, size_t at, long long *out);

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

#endif /* NM_REPLY_SHAPE_H */
