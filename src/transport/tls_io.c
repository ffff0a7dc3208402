/*
 * tls_io.c -- a TLS connection's bytes (tls_io.h): the table that finds a
 * descriptor's SSL, the BIO under it, the reads and writes reply.c makes
 * through it, and the reasons of failures (a handshake's too) in words.
 *
 * The table is two levels of atomic pointers indexed by descriptor: a
 * plain connection's lookup is one load that finds no chunk or an empty
 * slot, with no lock; a chunk, once made, is never freed (descriptors are
 * reused).  Each slot is written only by the thread that owns the
 * connection.
 */
#include "nm.h"

#include <errno.h>
#include <hiredis/sds.h>
#include <openssl/err.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "reader.h"
#include "tls_guard.h"
#include "tls_io.h"

#define CHUNK 1024
#define CHUNKS 1024 /* descriptors up to 1M */
#define READ_SIZE 16384

static nm_tls_conn_t **table[CHUNKS]; /* atomic pointers */
static nm_tls_conn_t *orphans;        /* a forked child's, kept reachable */

static nm_tls_conn_t **chunk_of(int fd, int create)
{
    if (fd < 0 || fd / CHUNK >= CHUNKS)
        return NULL;
    nm_tls_conn_t **c = __atomic_load_n(&table[fd / CHUNK], __ATOMIC_ACQUIRE), **none = NULL;
    if (c || !create)
        return c;
    if (!(c = calloc(CHUNK, sizeof *c)))
        return NULL;
    if (!__atomic_compare_exchange_n(&table[fd / CHUNK], &none, c, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        free(c);
        c = none;
    }
    return c;
}

int nm_tls_table_put(int fd, nm_tls_conn_t *conn)
{
    nm_tls_conn_t **c = chunk_of(fd, 1);
    if (!c)
        return ENOMEM;
    __atomic_store_n(&c[fd % CHUNK], conn, __ATOMIC_RELEASE);
    return 0;
}

nm_tls_conn_t *nm_tls_table_get(int fd)
{
    nm_tls_conn_t **c = chunk_of(fd, 0);
    return c ? __atomic_load_n(&c[fd % CHUNK], __ATOMIC_ACQUIRE) : NULL;
}

nm_tls_conn_t *nm_tls_table_take(int fd)
{
    nm_tls_conn_t **c = chunk_of(fd, 0);
    return c ? __atomic_exchange_n(&c[fd % CHUNK], NULL, __ATOMIC_ACQ_REL) : NULL;
}

void nm_tls_table_orphan_all(void)
{
    for (int i = 0; i < CHUNKS; i++) {
        nm_tls_conn_t **c = table[i];
        for (int j = 0; c && j < CHUNK; j++) {
            if (c[j]) {
                c[j]->orphan_next = orphans;
                orphans = c[j];
                c[j] = NULL;
            }
        }
    }
}

int nm_tls_on(int fd)
{
    return nm_tls_table_get(fd) != NULL;
}

/* ---- the BIO: send(MSG_NOSIGNAL), recv, never close ------------------- */

static int bio_write(BIO *b, const char *buf, int len)
{
    ssize_t n = send((int)(intptr_t)BIO_get_data(b), buf, (size_t)len, MSG_NOSIGNAL);
    BIO_clear_retry_flags(b);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        BIO_set_retry_write(b);
    return (int)n;
}

static int bio_read(BIO *b, char *buf, int len)
{
    ssize_t n = recv((int)(intptr_t)BIO_get_data(b), buf, (size_t)len, 0);
    BIO_clear_retry_flags(b);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        BIO_set_retry_read(b);
    return (int)n;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

static int bio_create(BIO *b)
{
    BIO_set_init(b, 1);
    return 1;
}

static BIO_METHOD *method;
static pthread_once_t method_once = PTHREAD_ONCE_INIT;

static void method_make(void)
{
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "netmutex");
    if (m && BIO_meth_set_write(m, bio_write) && BIO_meth_set_read(m, bio_read) &&
        BIO_meth_set_ctrl(m, bio_ctrl) && BIO_meth_set_create(m, bio_create))
        method = m;
    else if (m)
        BIO_meth_free(m);
}

BIO *nm_tls_bio_new(int fd)
{
    pthread_once(&method_once, method_make);
    BIO *b = method ? BIO_new(method) : NULL;
    if (b)
        BIO_set_data(b, (void *)(intptr_t)fd);
    return b;
}

/* ---- why a handshake or a read failed --------------------------------- */

static int is_cert_alert(int reason)
{
    return reason == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED ||
           reason == SSL_R_SSLV3_ALERT_BAD_CERTIFICATE ||
           reason == SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED ||
           reason == SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED ||
           reason == SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN ||
           reason == SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE ||
           reason == SSL_R_TLSV1_ALERT_UNKNOWN_CA ||
           reason == SSL_R_TLSV1_ALERT_DECRYPT_ERROR;
}

static int not_tls(int reason)
{
    return reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_PACKET_LENGTH_TOO_LONG ||
           reason == SSL_R_UNKNOWN_PROTOCOL || reason == SSL_R_RECORD_LENGTH_MISMATCH;
}

/* A failure the library's queue explains (SSL_ERROR_SSL). */
static int explain_ssl(nm_tls_conn_t *conn, char *buf, size_t size)
{
    long v = SSL_get_verify_result(conn->ssl);
    unsigned long e = ERR_peek_last_error();
    int reason = ERR_GET_REASON(e);
    const char *text = e ? ERR_reason_error_string(e) : NULL;
    if (v != X509_V_OK && ERR_GET_LIB(e) == ERR_LIB_SSL &&
        reason == SSL_R_CERTIFICATE_VERIFY_FAILED) {
        snprintf(buf, size, "TLS: certificate verify failed: %s", X509_verify_cert_error_string(v));
        return EACCES;
    }
    if (is_cert_alert(reason) && (conn->cert_wanted || reason ==
                                  SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED)) {
        snprintf(buf, size, "TLS: the server requires a client certificate (%s)",
                 text ? text : "alert");
        return EACCES;
    }
    if (is_cert_alert(reason)) {
        snprintf(buf, size, "TLS: the server refused the client certificate (%s)", text);
        return EACCES;
    }
    if (not_tls(reason)) {
        snprintf(buf, size, "TLS: the server does not speak TLS (%s): a plain port? "
                            "(redis:// is plain, rediss:// TLS)", text);
        return EPROTO;
    }
    snprintf(buf, size, "TLS: %s", text ? text : "handshake failed");
    return NM_ECONN;
}

int nm_tls_explain(nm_tls_conn_t *conn, int err, char *buf, size_t size)
{
    int code = NM_ECONN;
    if (err == SSL_ERROR_SSL)
        code = explain_ssl(conn, buf, size);
    else if (err == SSL_ERROR_ZERO_RETURN || (err == SSL_ERROR_SYSCALL && errno == 0))
        snprintf(buf, size, "TLS: the server closed the connection");
    else if (err == SSL_ERROR_SYSCALL)
        snprintf(buf, size, "TLS: %s", strerror(errno));
    else
        snprintf(buf, size, "TLS: error %d", err);
    ERR_clear_error();
    return code;
}

/* ---- reads and writes ------------------------------------------------- */

/* C failed with OpenSSL's ERR: C's errstr says why.  NM_ECONN. */
static int failed(redisContext *c, nm_tls_conn_t *conn, int err)
{
    char why[sizeof c->errstr];
    int code = nm_tls_explain(conn, err, why, sizeof why);
    conn->refused = code == EACCES;
    c->err = REDIS_ERR_IO;
    snprintf(c->errstr, sizeof c->errstr, "%s", why);
    return NM_ECONN;
}

static int tls_write(redisContext *c, int *done)
{
    nm_tls_conn_t *conn = nm_tls_table_get(c->fd);
    size_t len = sdslen(c->obuf);
    *done = 0;
    if (len > 0) {
        ERR_clear_error();
        int n = SSL_write(conn->ssl, c->obuf, (int)NM_MIN(len, (size_t)1 << 30));
        if (n <= 0) {
            int e = SSL_get_error(conn->ssl, n);
            return e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ ? 0
                                                                          : failed(c, conn, e);
        }
        sdsrange(c->obuf, n, -1);
    }
    *done = sdslen(c->obuf) == 0;
    return 0;
}

static int tls_read(redisContext *c)
{
    nm_tls_conn_t *conn = nm_tls_table_get(c->fd);
    char buf[READ_SIZE];
    while (c->reader->len <= NM_READER_MAX) {
        ERR_clear_error();
        int n = SSL_read(conn->ssl, buf, sizeof buf);
        if (n <= 0) {
            int e = SSL_get_error(conn->ssl, n);
            return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE ? 0
                                                                          : failed(c, conn, e);
        }
        if (redisReaderFeed(c->reader, buf, (size_t)n) != REDIS_OK)
            return NM_ECONN;
        /* Nothing buffered in OpenSSL (read-ahead, tls.c): the rest, if
         * any, is in the socket, where poll() sees it.  Saves a read that
         * would only say EAGAIN. */
        if (!SSL_has_pending(conn->ssl))
            return 0;
    }
    return 0; /* the caller sees the flood */
}

/* Inside the fork guard (tls_guard.h), as every call into OpenSSL. */
int nm_tls_write(redisContext *c, int *done)
{
    nm_tls_enter();
    int err = tls_write(c, done);
    nm_tls_leave();
    return err;
}

int nm_tls_read(redisContext *c)
{
    nm_tls_enter();
    int err = tls_read(c);
    nm_tls_leave();
    return err;
}

int nm_tls_refused(const redisContext *c)
{
    nm_tls_conn_t *conn = nm_tls_table_get(c->fd);
    return conn && conn->refused ? EACCES : 0;
}

int nm_tls_cert_wanted(const redisContext *c)
{
    nm_tls_conn_t *conn = nm_tls_table_get(c->fd);
    return conn && conn->cert_wanted;
}
