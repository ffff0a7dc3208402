/*
 * tls.h -- TLS (rediss://) under the hiredis contexts of dial.c.
 *
 * hiredis 0.14 knows no TLS, and serves us only as the RESP formatter and
 * parser: our own non-blocking, deadline-bounded I/O (reply.c) moves the
 * bytes.  So TLS sits beside it: a connection's SSL is found by its
 * descriptor in tls_io.h's table, reply.c's read and write go through
 * nm_tls_read / nm_tls_write (tls_io.h) when the descriptor has one, and
 * every context is closed through nm_dial_close (dial.h), which frees the
 * SSL first (nm_tls_close).  After nm_tls_read nothing waits inside
 * OpenSSL, so poll() on the descriptor stays the one test of "something
 * to read", wherever it is made (quorum.c, the subscribers).
 *
 * One nm_tls_t per configuration (tls_config.c builds it): the SSL_CTX,
 * built once and never changed, shared by every thread's connections, and
 * the settings' names.  Sessions for resumption are kept per server
 * (host, port, name verified), so a thread's reconnect or another
 * thread's first dial is an abbreviated handshake.
 *
 * Fork: no thread of ours is inside OpenSSL at the fork (tls_guard.h's
 * guard, which nm_tls_before_fork shuts), so the child finds none of
 * OpenSSL's locks held.  The child never writes to an inherited TLS
 * connection, nor frees an SSL another thread of the parent may have been
 * using: every entry of the table is set aside (kept reachable, never
 * used), the descriptors are closed by their owners as plain ones, and
 * the stored sessions are set aside too.
 */
#ifndef NM_TLS_H
#define NM_TLS_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

typedef struct nm_tls nm_tls_t;

/* What a configuration says about TLS (tls_config.c reads it). */
typedef struct nm_tls_settings {
    const char *ca;          /* PEM file or directory; NULL: the system's */
    const char *cert, *key;  /* client certificate (PEM), or both NULL */
    const char *server_name; /* SNI and the name verified; NULL: the host */
    int verify;              /* 0: no verification at all (warned) */
} nm_tls_settings_t;

/* Builds the TLS state of S: 0 with *OUT (one reference), EINVAL with WHY
 * (a file that cannot be read or a key that does not match), ENOMEM. */
int nm_tls_new(const nm_tls_settings_t *s, nm_tls_t **out, char *why, size_t size);
nm_tls_t *nm_tls_ref(nm_tls_t *t);
void nm_tls_unref(nm_tls_t *t);

/* The TLS handshake on C's socket (connected to HOST:PORT), by UNTIL.
 * 0; NM_ECONN (no handshake in time, or the connection closed: CAUSE says
 * which); EACCES (the certificate was not accepted, or the server refused
 * ours or its absence); EPROTO (no TLS server at the other end); ENOMEM.
 * CAUSE gets the reason in words. */
int nm_tls_connect(nm_tls_t *t, redisContext *c, const char *host, int port, int64_t until,
                   char *cause, size_t size);

/* Whether C's handshake resumed a stored session (for the tests). */
int nm_tls_resumed(const redisContext *c);

/* fork(), from mutex.c's handlers, after every other lock: waits until
 * no thread is inside OpenSSL and keeps the guard shut across fork(), with
 * the stored sessions' lock (a leaf); the child sets the sessions and every
 * TLS connection aside, unused and unfreed. */
void nm_tls_before_fork(void);
void nm_tls_after_fork_parent(void);
void nm_tls_after_fork_child(void);

/* Frees FD's TLS state, if any, without a word to the server: the
 * descriptor is closed by its context (dial.h's nm_dial_close). */
void nm_tls_close(int fd);

#endif /* NM_TLS_H */
