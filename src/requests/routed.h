/*
 * routed.h -- one request about a key, routed (routed.c): on the calling
 * thread's connection to the one server (the sentinels' master, over TLS
 * or not, conn.h), or, when the server is a Redis Cluster node, on the
 * node of the key's slot (cluster_route.h); and what its outcome says,
 * noted in one place.  Quorum mode's requests go through quorum.h.
 */
#ifndef NM_ROUTED_H
#define NM_ROUTED_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

#include "script.h"
#include "settings.h"

/* What a request on the one server does around it, once its connection
 * is chosen (dialed if need be): BEFORE (if not NULL) before anything is
 * sent -- not 0 is the call's answer, nothing sent and nothing noted --,
 * AFTER (if not NULL) once the reply came or did not.  Neither is called
 * in a cluster.  condvar.c's block: the master W blocks on, and the wait's
 * cancellation point (reply.h). */
typedef struct nm_routed_hooks {
    int (*before)(void *arg);
    void (*after)(void *arg);
    void *arg;
} nm_routed_hooks_t;

/* One request.  KEY (KEY_LEN bytes) chooses the node in a cluster.  A
 * script (SCRIPT set) is script ID with ARGC words ARGV, its NKEYS keys
 * first (nm_script_run; NOSCRIPT is handled there); a command is ARGV
 * itself (nm_call), a blocking one (nm_call_blocking: nudged, its reply
 * due at UNTIL) when UNTIL is not 0. */
typedef struct nm_routed {
    const char *key;
    size_t key_len;
    int argc;
    const char **argv;
    const size_t *lens;
    int64_t until;
    int script;
    nm_script_t id;
    int nkeys;
    const nm_routed_hooks_t *hooks;
} nm_routed_t;

/* Runs Q, its reply due by REPLY_BY: 0 with *OUT set (free it with
 * freeReplyObject), or the errors of nm_call, nm_script_run and
 * nm_conn_get, noted (nm_routed_note) unless dialing failed (a dial
 * reports itself).  *SENT (if SENT is not NULL) tells whether a failed
 * call may still have reached a server. */
int nm_routed_call(nm_config_t *cfg, const nm_routed_t *q, int64_t reply_by, redisReply **out,
                   int *sent);

/* What ERR, the outcome of a request on CFG's one server or a cluster
 * node, says, noted: a broken connection to the one server is dropped
 * (cluster_route.c drops a node's itself) and the outage reported; an
 * error reply -- NOPERM and the like (EACCES), anything we do not
 * understand (EPROTO) -- is reported in the server's words
 * (nm_reply_last_error), once per outage (conn.h); an answer reports the
 * server reachable.  A redirection or TRYAGAIN from a server we do not
 * take for a Cluster node becomes EPROTO: the internal codes (nm.h) must
 * not reach a caller as its errors.  Returns ERR so mapped. */
int nm_routed_note(nm_config_t *cfg, int err);

#endif /* NM_ROUTED_H */
