/*
 * tls_io.h -- a TLS connection's bytes: the table that finds a
 * descriptor's connection, the BIO under its SSL, the reads and writes
 * reply.c makes through it, and its failures in words.  Below tls.c,
 * which makes the connections and calls down into this; nothing here
 * calls tls.c.
 */
#ifndef NM_TLS_IO_H
#define NM_TLS_IO_H

#include <hiredis/hiredis.h>
#include <openssl/ssl.h>
#include <stddef.h>

struct nm_tls; /* tls.h's nm_tls_t, used by tls.c alone */

typedef struct nm_tls_conn {
    SSL *ssl;
    struct nm_tls *owner;      /* a reference */
    int cert_wanted;           /* the server asked for a certificate we lack */
    int refused;               /* the server's alert refused our certificate */
    struct nm_tls_conn *orphan_next; /* a forked child's: set aside */
    char key[];                /* the server, for its session */
} nm_tls_conn_t;

/* Registers CONN as FD's: 0 or ENOMEM (FD beyond the table). */
int nm_tls_table_put(int fd, nm_tls_conn_t *conn);
/* FD's connection, or NULL. */
nm_tls_conn_t *nm_tls_table_get(int fd);
/* Takes FD's connection out of the table: it, or NULL. */
nm_tls_conn_t *nm_tls_table_take(int fd);
/* A forked child: every entry set aside, none freed or used again. */
void nm_tls_table_orphan_all(void);

/* A BIO on FD that sends with MSG_NOSIGNAL (a closed connection gives
 * EPIPE, never SIGPIPE) and never closes FD.  NULL: no memory. */
BIO *nm_tls_bio_new(int fd);

/* The reason for OpenSSL's failure ERR of CONN (an SSL_get_error code,
 * its queue), in words, into BUF; EACCES, EPROTO or NM_ECONN. */
int nm_tls_explain(nm_tls_conn_t *conn, int err, char *buf, size_t size);

/* Whether descriptor FD carries TLS. */
int nm_tls_on(int fd);

/* One write of what C has queued (reply.c's write_some for TLS): 0 with
 * *DONE when nothing is left, or NM_ECONN. */
int nm_tls_write(redisContext *c, int *done);

/* Reads everything C's server sent into C's reader: 0 or NM_ECONN, with
 * C's errstr saying why.  After it nothing waits inside OpenSSL (it reads
 * until OpenSSL holds no byte, SSL_has_pending), so poll() on the
 * descriptor stays the one test of "something to read". */
int nm_tls_read(redisContext *c);

/* EACCES if C's last failure was the server refusing our certificate (or
 * its absence), else 0. */
int nm_tls_refused(const redisContext *c);

/* Whether C's server asked for a client certificate this process has
 * none of: dial.c then asks for a reply at once, which tells whether the
 * server requires one (TLS 1.3 says so only after the handshake). */
int nm_tls_cert_wanted(const redisContext *c);

#endif /* NM_TLS_IO_H */
