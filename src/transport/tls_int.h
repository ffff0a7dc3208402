/*
 * tls_int.h -- what tls.c and tls_io.c share, and nothing else includes:
 * one TLS connection's state, and the table that finds it by descriptor.
 */
#ifndef NM_TLS_INT_H
#define NM_TLS_INT_H

#include <openssl/ssl.h>
#include <stddef.h>

struct nm_tls; /* tls.h's nm_tls_t: not included, so no circle */

typedef struct nm_tls_conn {
    SSL *ssl;
    struct nm_tls *owner;      /* a reference */
    int cert_wanted;           /* the server asked for a certificate we lack */
    int refused;               /* the server's alert refused our certificate */
    struct nm_tls_conn *orphan_next; /* a forked child's: set aside */
    char key[];                /* the server, for its session */
} nm_tls_conn_t;

/* The fork guard (tls.c): every call into OpenSSL, and every use of the
 * stored sessions, is made between these two, which a thread may nest.
 * mutex.c's fork handlers (nm_tls_before_fork) wait until no thread is
 * between them and keep new ones out until fork() has returned.  Nothing
 * between them blocks, nor takes a lock of the library but store_lock. */
void nm_tls_enter(void);
void nm_tls_leave(void);

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

/* Frees CONN: its SSL (nothing is sent), its reference, itself (tls.c). */
void nm_tls_conn_free(nm_tls_conn_t *conn);

/* The reason for OpenSSL's failure ERR of CONN (an SSL_get_error code,
 * its queue), in words, into BUF; EACCES, EPROTO or NM_ECONN (tls.c). */
int nm_tls_explain(nm_tls_conn_t *conn, int err, char *buf, size_t size);

#endif /* NM_TLS_INT_H */
