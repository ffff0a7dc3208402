/*
 * proxy.h -- a TCP-to-unix-socket relay in front of the private server,
 * used to lose a reply on purpose: the request reaches Redis and is
 * applied, but the client never hears back.  This is the one situation a
 * client cannot tell apart from "not applied", and the only way to test it
 * deterministically (CLIENT PAUSE or SIGSTOP delay the request instead of
 * losing the reply).  It can also play a network partition (blackhole):
 * the chaos suite's clients connect through it.  And it can make every
 * new connection slow to start (a slow dial).
 */
#ifndef NM_TEST_PROXY_H
#define NM_TEST_PROXY_H

#include "fixture.h"

G_BEGIN_DECLS

typedef struct NmProxy NmProxy;

/* Listens on 127.0.0.1:<free port> and relays every connection to R's unix
 * socket, in a thread of its own. */
NmProxy *nm_proxy_start(NmRedis *r);
/* The same relaying to R's port on 127.0.0.1 (R started with tcp, or any
 * server with NETMUTEX_TEST_TLS=1): the bytes pass untouched, TLS too. */
NmProxy *nm_proxy_start_tcp(NmRedis *r);
/* The port it listens on. */
int nm_proxy_port(NmProxy *p);
/* Every connection accepted from now on is relayed only MS milliseconds
 * (not scaled) after it was accepted, both ways: a slow dial, while the
 * connections made before are relayed at once.  0: no delay again. */
void nm_proxy_delay_new(NmProxy *p, unsigned int ms);
/* "redis://127.0.0.1:PORT" */
char *nm_proxy_url(NmProxy *p);
/* The next bytes any server sends back are dropped, and so is everything
 * that server connection sends afterwards: its client's next request is
 * executed by Redis, but the reply is lost. */
void nm_proxy_mute_next_reply(NmProxy *p);
/* The reply to the next request that contains PATTERN (at most 63 bytes,
 * found within one connection's requests, across reads) is dropped, and
 * everything that server connection sends afterwards: the request is
 * executed, its client never hears back.  For a request a client sends
 * after others it no longer waits for (the reply to be lost is then the
 * next bytes that come back). */
void nm_proxy_mute_reply_to(NmProxy *p, const char *pattern);
/* The next request that contains PATTERN (as above) never reaches the
 * server: its connection is closed, both ways, before it is relayed (what
 * the same read held besides goes with it), as a connection killed after
 * the client wrote a request and before the server read it. */
void nm_proxy_cut_request(NmProxy *p, const char *pattern);
/* How many requests have been cut so far. */
unsigned int nm_proxy_cuts(NmProxy *p);
/* How many connections have been muted so far. */
unsigned int nm_proxy_muted(NmProxy *p);
/* Blackhole mode, for a network partition: while ON, nothing is relayed
 * in either direction and no connection is accepted, but every socket stays
 * open, so clients see neither an error nor a reply (only their own
 * timeouts end their wait).  Bytes sent meanwhile wait in the kernel's
 * buffers, and new connections in the listen backlog (beyond it, connects
 * time out).  Turning it OFF heals the partition: everything that waited is
 * relayed late, as TCP retransmission would deliver it. */
void nm_proxy_blackhole(NmProxy *p, bool on);
/* Stops the thread and closes every connection. */
void nm_proxy_free(NmProxy *p);

G_END_DECLS

#endif /* NM_TEST_PROXY_H */
