/*
 * quorum.h -- talking to several independent Redis masters at once.
 *
 * Quorum mode (Redlock) sends every request to all N servers in parallel
 * from the calling thread: the connections are made first (a dial has a
 * bound of its own, nm_quorum_dial_bound), then the commands are written
 * to every connection, then poll() collects the answers as they come, each
 * server bounded by the configured server timeout, so one slow or dead
 * server costs at most that bound and never delays the others.  What the answers mean (a grant
 * needs N/2 + 1 of them) is for the caller to decide; this file only moves
 * requests and replies.
 */
#ifndef NM_QUORUM_H
#define NM_QUORUM_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

#include "script.h"
#include "settings.h"

#define NM_SERVERS_MAX NETMUTEX_SERVERS_MAX

/* Pipelines on up to NM_SERVERS_MAX connections, their commands already
 * appended (redisAppendCommand*), collected together. */
typedef struct nm_fan {
    size_t n;
    redisContext *ctx[NM_SERVERS_MAX]; /* NULL: this server takes no part */
    size_t want[NM_SERVERS_MAX];       /* replies expected from it */
    size_t got[NM_SERVERS_MAX];
    redisReply **out[NM_SERVERS_MAX];  /* want[i] slots: NULL for an error reply */
    int64_t until[NM_SERVERS_MAX];     /* when to give up on it (monotonic
                                          ms); 0: the UNTIL of nm_fan_run */
    int err[NM_SERVERS_MAX];           /* 0, or its first error: NM_ECONN,
                                          ETIMEDOUT (no answer in time: the
                                          connection must go), ENOENT
                                          (NOSCRIPT), EACCES, EPROTO */
} nm_fan_t;

/* Writes every pipeline out and reads the replies until each server has
 * answered or failed, or its own deadline (UNTIL, monotonic ms, for those
 * without one) passes. */
void nm_fan_run(nm_fan_t *f, int64_t until);

/* The answers of one script call made on every server. */
typedef struct nm_votes {
    size_t n;
    redisReply *reply[NM_SERVERS_MAX]; /* NULL where err[i] */
    int err[NM_SERVERS_MAX];           /* 0, NM_ECONN (unreachable, too slow),
                                          EACCES, EPROTO, ENOMEM */
    int64_t sent_at;                   /* monotonic ms the requests left */
} nm_votes_t;

/* Calls script ID on every server of CFG at once, through the calling
 * thread's connections.  A server that fails is not dialed again for a
 * moment (conn.h); one whose cached connection turned out stale is redialed
 * once.  Waits no longer than the server timeout, nor (much) past DEADLINE.
 * Always fills *V; free it with nm_votes_clear(). */
void nm_quorum_call(nm_config_t *cfg, nm_script_t id, int nkeys, int nargs,
                    const char **argv, const size_t *lens, int64_t deadline,
                    nm_votes_t *v);
void nm_votes_clear(nm_votes_t *v);

/* Server I of CFG failed: in quorum mode it is left alone for a moment
 * (nm_conn_set_down), where the others can do without it; a single server
 * is redialed at once (nm_conn_drop). */
void nm_quorum_set_down(const nm_config_t *cfg, size_t i);

/* How long one server may take to answer one request: the server timeout
 * in quorum mode, else the I/O timeout. */
unsigned int nm_quorum_server_bound(const nm_config_t *cfg);

/* How long dialing one server may take in quorum mode (connect, TLS
 * handshake, AUTH, SELECT and the checks of a new connection, several
 * round trips where a request is one): the server timeout, but at least
 * NM_QUORUM_DIAL_MS, and never more than the connect timeout; with one
 * server, its request bound as before.  A server that takes that long
 * still costs a call one bound, not more (docs/deployment.md, "Quorum
 * mode"). */
#define NM_QUORUM_DIAL_MS 500u
unsigned int nm_quorum_dial_bound(const nm_config_t *cfg);

/* How many servers answered without error. */
size_t nm_votes_answered(const nm_votes_t *v);

/* The error to report when fewer than a quorum answered: EINVAL if a
 * server is a Redis Cluster node (cluster.h), EACCES or EPROTO if some
 * server said so, else NM_ECONN. */
int nm_votes_failure(const nm_votes_t *v);

#endif /* NM_QUORUM_H */
