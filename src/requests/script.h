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

/* Queues a call of script ID on C's pipeline; read its reply with
 * nm_get_reply() or nm_take_reply() (NOSCRIPT: ENOENT, nm_script_load). */
int nm_script_append(redisContext *c, nm_script_t id, int nkeys, int nargs,
                     const char **argv, const size_t *lens);

#endif /* NM_SCRIPT_H */
