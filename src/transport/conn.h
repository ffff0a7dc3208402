/*
 * conn.h -- every thread's own Redis connections.
 *
 * Each thread lazily dials one hiredis context per configured server and
 * keeps it in a pthread key; the key's destructor closes them when the
 * thread exits.  A thread never uses another thread's context, so no
 * context is ever shared and none needs a lock.
 *
 * The cache follows the configuration it was dialed for: a call made under
 * another configuration (netmutex_configure ran) closes and re-dials.  After
 * fork() the child closes its inherited copies without writing to them, so
 * nothing the child does can reach the parent's connections.
 */
#ifndef NM_CONN_H
#define NM_CONN_H

#include <hiredis/hiredis.h>
#include <stdint.h>

#include "settings.h"

/* The calling thread's connection to server I of CFG, dialed (connect, AUTH,
 * SELECT, the server check of server_check.h) if needed, within DEADLINE (a
 * monotonic ms deadline, or NM_FOREVER) and the connect timeout.
 * 0, NM_ECONN (unreachable), EACCES (credentials or db refused), ENOTSUP
 * (the server may evict lock keys), EPROTO, ENOMEM. */
int nm_conn_get(nm_config_t *cfg, size_t i, int64_t deadline, redisContext **out);

/* nm_conn_get, with the cause of a failure in words in CAUSE (SIZE
 * bytes), for a caller that says it itself (a listing's warning). */
int nm_conn_get_why(nm_config_t *cfg, size_t i, int64_t deadline, redisContext **out,
                    char *cause, size_t size);
/* Dials SRV of CFG (connect, AUTH, SELECT) for a caller that keeps the
 * context itself: the watchdog's own connections.  Same errors. */
int nm_conn_dial(const nm_config_t *cfg, const nm_server_t *srv, int64_t deadline,
                 redisContext **out);

/* How server I of CFG is doing, for the people watching: ERR 0 (it
 * answered) or the error of a dial or request, with CAUSE in words.  A
 * server that cannot be used is reported once per outage (warn), its
 * return once (info).  Dialing reports by itself. */
void nm_conn_report(const nm_config_t *cfg, size_t i, int err, const char *cause);

/* Closes the calling thread's connection to server I: it failed, and the
 * next nm_conn_get re-dials. */
void nm_conn_drop(size_t i);

/* Whether the calling thread has a connection to server I of CFG. */
int nm_conn_cached(const nm_config_t *cfg, size_t i);

/* The calling thread's connection to server I of CFG as it is, without
 * dialing or any check: the one the thread's last request used, or NULL. */
redisContext *nm_conn_peek(const nm_config_t *cfg, size_t i);

/* The serial number of the calling thread's connection to server I of CFG
 * as it is (0: none): every dial of the process gets a new one, so a layer
 * above can tell the session it learnt something on (a script it ran, say)
 * from a later one, to another server perhaps. */
unsigned long nm_conn_serial(const nm_config_t *cfg, size_t i);

/* Quorum mode: closes the calling thread's connection to server I, which
 * failed, and has nm_conn_get answer NM_ECONN at once until UNTIL
 * (monotonic ms): a dead server costs the next calls no time. */
void nm_conn_set_down(size_t i, int64_t until);

/* Cluster mode (cluster.h): the calling thread's connection to node
 * HOST:PORT of CFG's cluster, dialed as server 0 is (its credentials, db 0)
 * if needed.  The node that is server 0 itself uses that connection.
 * Errors of nm_conn_get. */
int nm_conn_get_node(nm_config_t *cfg, const char *host, int port, int64_t deadline,
                     redisContext **out);

/* Dials node HOST:PORT of CFG's cluster as nm_conn_get_node does, for a
 * caller that keeps the context itself: the watchdog's subscribers. */
int nm_conn_dial_node(const nm_config_t *cfg, const char *host, int port, int64_t deadline,
                      redisContext **out);

/* Closes the calling thread's connection to node HOST:PORT. */
void nm_conn_drop_node(const char *host, int port);

/* How many connections the calling thread has dialed (attempts, failed
 * ones included), for statistics (stats.h). */
unsigned long nm_conn_thread_dials(void);

/* Closes every connection of the calling thread. */
void nm_conn_close_thread(void);

/* Called in the child after fork(): forget every inherited connection. */
void nm_conn_after_fork_child(void);

#endif /* NM_CONN_H */
