/*
 * script.h -- the Lua scripts that make every lock operation atomic on the
 * server, and calling them.
 *
 * Scripts are sent once (SCRIPT LOAD, which also tells us their SHA1) and
 * then called by EVALSHA.  A server that lost them (restart, SCRIPT FLUSH,
 * another server behind the same address) answers NOSCRIPT: the script is
 * loaded again on that connection and the call repeated, once.
 */
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
    NM_SCRIPT_COUNT
} nm_script_t;

/* Renewals batch many keys into one call; everything else uses a few. */
#define NM_RENEW_BATCH 256
#define NM_SCRIPT_MAX_ARGS (3 * NM_RENEW_BATCH)

/* Runs script ID with NKEYS keys followed by NARGS - NKEYS arguments, all
 * binary-safe (ARGV/LENS).  Errors as nm_call(). */
int nm_script_run(redisContext *c, nm_script_t id, int nkeys, int nargs,
                  const char **argv, const size_t *lens, redisReply **out);

/* Loads script ID on C (and learns its SHA1). */
int nm_script_load(redisContext *c, nm_script_t id);

/* Queues a call of script ID on C's pipeline; read its reply with
 * nm_get_reply().  ENOENT if the script was never loaded (nm_script_load). */
int nm_script_append(redisContext *c, nm_script_t id, int nkeys, int nargs,
                     const char **argv, const size_t *lens);

/* pthread_atfork hooks (parent and child alike release the lock). */
void nm_script_before_fork(void);
void nm_script_after_fork(void);

#endif /* NM_SCRIPT_H */
