/*
 * hostile.h -- a server that speaks just enough of the Redis protocol to
 * misbehave on purpose, for the cases a real redis-server cannot be made
 * to show: a wrong SHA1 answered to SCRIPT LOAD, a reply dripped one byte
 * every half second, a reply that never comes, a reply without end.
 *
 * It listens on a unix socket in a temporary directory and serves every
 * connection in one thread of its own.  Commands a client needs to connect
 * (AUTH, SELECT, INFO, PING) are answered properly; the mode decides what
 * becomes of the rest.
 */
#ifndef NM_TEST_HOSTILE_H
#define NM_TEST_HOSTILE_H

#include "fixture.h"

G_BEGIN_DECLS

typedef enum NmHostileMode {
    NM_HOSTILE_WRONG_SHA, /* SCRIPT LOAD: a wrong SHA1; EVALSHA: NOSCRIPT */
    NM_HOSTILE_DRIP,      /* scripts: a bulk header, then a byte per 500 ms */
    NM_HOSTILE_SILENT,    /* scripts: read, never answered */
    NM_HOSTILE_FLOOD,     /* scripts: a bulk reply of endless bytes */
    NM_HOSTILE_TRYAGAIN,  /* scripts: -TRYAGAIN, as a Cluster node would */
    NM_HOSTILE_MOVED,     /* scripts: -MOVED, as a Cluster node would */
    NM_HOSTILE_SLOW_LOAD, /* EVALSHA: NOSCRIPT; SCRIPT LOAD: never answered
                             (a server restarted empty, and too slow) */
} NmHostileMode;

typedef struct NmHostile NmHostile;

NmHostile *nm_hostile_start(NmHostileMode mode);
/* "unix:///tmp/.../hostile.sock" */
char *nm_hostile_url(NmHostile *h);
/* How many script calls (EVALSHA, SCRIPT LOAD) it received. */
unsigned int nm_hostile_scripts(NmHostile *h);
/* Stops the thread, closes every connection, removes the directory. */
void nm_hostile_free(NmHostile *h);

G_END_DECLS

#endif /* NM_TEST_HOSTILE_H */
