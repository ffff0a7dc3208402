/*
 * dial.h -- one connection to one server, ready for requests: the socket
 * (sock.h), the hiredis context around it, non-blocking for our own
 * deadline-bounded I/O (reply.h), and the server's AUTH and SELECT.
 *
 * Every kind of server is reached through here: a configured server
 * (conn.c), a sentinel and the master it names (sentinel.c), a node of a
 * cluster (conn.c, for cluster.c).  What each kind checks after that (the
 * eviction policy, ROLE, INFO cluster) is its caller's.
 */
#ifndef NM_DIAL_H
#define NM_DIAL_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

#include "url.h"

/* Connects to HOST:PORT (SRV's unix socket when HOST is NULL) and does
 * SRV's AUTH and SELECT, by UNTIL.  0 with *OUT; NM_ECONN, EACCES (the
 * credentials refused), EPROTO, ENOMEM, or NM_EREDIRECT / NM_ETRYAGAIN
 * (reply.h: a server that answers so), with CAUSE in words.  SRV's tls
 * says whether to speak TLS (its tls_state); a failed handshake is
 * NM_ECONN (no answer in time, the connection closed), EACCES (the
 * certificate not accepted either way) or EPROTO (no TLS server). */
int nm_dial_open(const nm_server_t *srv, const char *host, int port, int64_t until,
                 redisContext **out, char *cause, size_t size);

/* Closes C and frees it, with its TLS state if any (tls.h): every
 * context of the library ends here, never in redisFree itself.  Sends
 * nothing, so an inherited connection may be closed so as well.  C may be
 * NULL. */
void nm_dial_close(redisContext *c);

/* Why a dial that got C (may be NULL) failed with ERR after BUDGET ms, in
 * words, into BUF: for the outage report.  EPROTO, a redirection and a
 * TRYAGAIN all read "unexpected answer: " and the server's words. */
void nm_dial_describe(const redisContext *c, int err, int64_t budget, char *buf,
                      size_t size);

#endif /* NM_DIAL_H */
