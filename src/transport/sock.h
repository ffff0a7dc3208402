/*
 * sock.h -- a stream socket to a server, opened by a deadline.
 *
 * The bottom of every dial: TCP (each address the name resolves to, in
 * turn) or a unix socket, non-blocking and close-on-exec from birth, with
 * TCP_NODELAY.  Name resolution itself is not bounded by the deadline
 * (getaddrinfo has no timeout); the connects are.
 */
#ifndef NM_SOCK_H
#define NM_SOCK_H

#include <stddef.h>
#include <stdint.h>

/* Connects to HOST:PORT, or to the unix socket PATH when HOST is NULL, by
 * UNTIL (monotonic ms).  The socket, or -1 with CAUSE in words. */
int nm_sock_open(const char *host, int port, const char *path, int64_t until, char *cause,
                 size_t size);

#endif /* NM_SOCK_H */
