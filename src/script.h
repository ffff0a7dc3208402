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
    NM_SCRIPT_COUNT
} nm_script_t;

#define NM_SCRIPT_MAX_ARGS 8

/* Runs script ID with NKEYS keys followed by NARGS - NKEYS arguments, all
 * binary-safe (ARGV/LENS).  Errors as nm_call(). */
int nm_script_run(redisContext *c, nm_script_t id, int nkeys, int nargs,
                  const char **argv, const size_t *lens, redisReply **out);

#endif /* NM_SCRIPT_H */
