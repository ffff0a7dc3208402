/*
 * tls.c -- a configuration's TLS state, the handshake, sessions for
 * resumption and the reasons of failures in words (tls.h).
 *
 * The SSL_CTX is built once per configuration and never changed after:
 * OpenSSL lets threads share it as long as nobody changes it.  Sessions
 * are stored here, not in the SSL_CTX's cache, keyed by the state that
 * made them and the server (the name verified, host and port), under one
 * leaf lock that mutex.c's fork handlers hold across fork(): a child
 * sets them aside, and never resumes a session of its parent.
 *
 * Every call of ours into OpenSSL is made inside the fork guard
 * (nm_tls_enter, nm_tls_leave): before fork() the handlers wait until no
 * thread is inside and keep new ones out until it has returned, so that no
 * thread of ours holds one of OpenSSL's locks (the random generator's, the
 * certificate store's) in the child's copy, where the child's first
 * handshake would wait for it forever.  Our calls never block (our own
 * non-blocking, deadline-bounded I/O), so the wait is short.
 */
#include "nm.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <arpa/inet.h>

#include "clock.h"
#include "tls.h"
#include "tls_int.h"

struct nm_tls {
    int refs;          /* atomic */
    SSL_CTX *ctx;
    char *server_name; /* NULL: the host dialed */
};

/* ---- the fork guard ---------------------------------------------------- */

/* A count of the threads inside OpenSSL under a mutex, not a rwlock:
 * glibc's rwlock knows its writer by thread id, which a forked child's
 * thread does not keep, and re-making a lock in the child misleads
 * ThreadSanitizer.  A thread enters through GATE, which the fork handlers
 * hold across fork(); it leaves through INSIDE_LOCK alone, so the last one
 * out can tell a waiting handler.  Nested entries (a connection freed in
 * a call, its state unreferenced) count once, by the thread's depth. */
static pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t inside_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t all_out = PTHREAD_COND_INITIALIZER;
static int inside;          /* inside_lock */
static __thread int depth;  /* this thread's entries */

void nm_tls_enter(void)
{
    if (depth++ > 0)
        return;
    pthread_mutex_lock(&gate);
    pthread_mutex_lock(&inside_lock);
    inside++;
    pthread_mutex_unlock(&inside_lock);
    pthread_mutex_unlock(&gate);
}

void nm_tls_leave(void)
{
    if (--depth > 0)
        return;
    pthread_mutex_lock(&inside_lock);
    if (--inside == 0)
        pthread_cond_signal(&all_out);
    pthread_mutex_unlock(&inside_lock);
}

/* ---- stored sessions -------------------------------------------------- */

typedef struct stored {
    struct stored *next;
    const nm_tls_t *owner;
    SSL_SESSION *session;
    char key[];
} stored_t;

static pthread_mutex_t store_lock = PTHREAD_MUTEX_INITIALIZER; /* a leaf */
static stored_t *store;
static stored_t *set_aside; /* a forked child's copy of its parent's, never used */

static stored_t **store_find(const nm_tls_t *owner, const char *key)
{
    stored_t **p = &store;
    while (*p && ((*p)->owner != owner || strcmp((*p)->key, key) != 0))
        p = &(*p)->next;
    return p;
}

/* OpenSSL hands over a new session (TLS 1.3: a ticket after the
 * handshake): it replaces the server's stored one.  1: we keep it. */
static int session_new(SSL *ssl, SSL_SESSION *session)
{
    nm_tls_conn_t *conn = SSL_get_app_data(ssl);
    if (!conn || !SSL_SESSION_is_resumable(session))
        return 0;
    pthread_mutex_lock(&store_lock);
    stored_t **p = store_find(conn->owner, conn->key), *s = *p;
    if (!s && (s = calloc(1, sizeof *s + strlen(conn->key) + 1)) != NULL) {
        s->owner = conn->owner;
        strcpy(s->key, conn->key);
        s->next = store;
        store = s;
    }
    if (s && s->session)
        SSL_SESSION_free(s->session);
    if (s)
        s->session = session;
    pthread_mutex_unlock(&store_lock);
    return s != NULL;
}

/* The stored session of CONN's server, if any, for SSL to resume. */
static void session_offer(nm_tls_conn_t *conn)
{
    pthread_mutex_lock(&store_lock);
    stored_t *s = *store_find(conn->owner, conn->key);
    if (s && s->session)
        SSL_set_session(conn->ssl, s->session);
    pthread_mutex_unlock(&store_lock);
}

/* Drops OWNER's sessions (all of them when NULL).  Under store_lock. */
static void store_drop(const nm_tls_t *owner)
{
    for (stored_t **p = &store, *s; (s = *p) != NULL;) {
        if (owner && s->owner != owner) {
            p = &s->next;
            continue;
        }
        *p = s->next;
        SSL_SESSION_free(s->session);
        free(s);
    }
}

/* mutex.c's fork handlers call these last of all: the gate once every
 * other lock of the library is held (a thread may hold one of those when
 * it enters), then store_lock (taken inside the guard, a leaf).  The gate
 * stays held across fork(), which keeps new threads out. */
void nm_tls_before_fork(void)
{
    pthread_mutex_lock(&gate);
    pthread_mutex_lock(&inside_lock);
    while (inside > 0)
        pthread_cond_wait(&all_out, &inside_lock);
    pthread_mutex_unlock(&inside_lock);
    pthread_mutex_lock(&store_lock);
}

void nm_tls_after_fork_parent(void)
{
    pthread_mutex_unlock(&store_lock);
    pthread_mutex_unlock(&gate);
}

/* The child calls nothing of OpenSSL here: a thread of the program's own,
 * outside the guard, may have held one of its locks at the fork, and
 * freeing a session takes some.  The parent's sessions are set aside, kept
 * reachable, never used. */
void nm_tls_after_fork_child(void)
{
    stored_t *s = store;
    while (s && s->next)
        s = s->next;
    if (s) {
        s->next = set_aside;
        set_aside = store;
    }
    store = NULL;
    pthread_mutex_unlock(&store_lock);
    pthread_mutex_unlock(&gate);
    nm_tls_table_orphan_all();
}

/* ---- the SSL_CTX ------------------------------------------------------ */

/* The server asked for a certificate and we have none: noted, so that
 * dial.c asks whether it needs one (tls.h). */
static int cert_asked(SSL *ssl, X509 **x509, EVP_PKEY **pkey)
{
    nm_tls_conn_t *conn = SSL_get_app_data(ssl);
    if (conn)
        conn->cert_wanted = 1;
    return 0;
}

static int fail_why(char *why, size_t size, const char *what, const char *path)
{
    unsigned long e = ERR_peek_last_error();
    snprintf(why, size, "%s '%s': %s", what, path,
             e ? ERR_reason_error_string(e) : "cannot be read");
    ERR_clear_error();
    return EINVAL;
}

static int load_ca(SSL_CTX *ctx, const char *ca, char *why, size_t size)
{
    struct stat st;
    if (!ca)
        return SSL_CTX_set_default_verify_paths(ctx) ? 0 : ENOMEM;
    if (stat(ca, &st) != 0)
        return fail_why(why, size, "NETMUTEX_TLS_CA", ca);
    int ok = S_ISDIR(st.st_mode) ? SSL_CTX_load_verify_locations(ctx, NULL, ca)
                                 : SSL_CTX_load_verify_locations(ctx, ca, NULL);
    return ok ? 0 : fail_why(why, size, "NETMUTEX_TLS_CA", ca);
}

static int load_cert(SSL_CTX *ctx, const nm_tls_settings_t *s, char *why, size_t size)
{
    if (!s->cert)
        return 0;
    if (SSL_CTX_use_certificate_chain_file(ctx, s->cert) != 1)
        return fail_why(why, size, "NETMUTEX_TLS_CERT", s->cert);
    if (SSL_CTX_use_PrivateKey_file(ctx, s->key, SSL_FILETYPE_PEM) != 1)
        return fail_why(why, size, "NETMUTEX_TLS_KEY", s->key);
    if (SSL_CTX_check_private_key(ctx) != 1)
        return fail_why(why, size, "NETMUTEX_TLS_KEY", s->key);
    return 0;
}

static SSL_CTX *ctx_new(const nm_tls_settings_t *s)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx)
        return NULL;
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    /* One read takes what the socket has, not a record's header and then
     * its body: tls_io.c reads on while OpenSSL holds bytes. */
    SSL_CTX_set_read_ahead(ctx, 1);
    SSL_CTX_set_verify(ctx, s->verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(ctx, session_new);
    SSL_CTX_set_client_cert_cb(ctx, cert_asked);
    return ctx;
}

static int tls_new(const nm_tls_settings_t *s, nm_tls_t **out, char *why, size_t size)
{
    nm_tls_t *t = calloc(1, sizeof *t);
    int err = t ? 0 : ENOMEM;
    if (!err && !(t->ctx = ctx_new(s)))
        err = ENOMEM;
    if (!err)
        err = load_ca(t->ctx, s->ca, why, size);
    if (!err)
        err = load_cert(t->ctx, s, why, size);
    if (!err && s->server_name && !(t->server_name = strdup(s->server_name)))
        err = ENOMEM;
    if (err) {
        ERR_clear_error();
        if (t)
            SSL_CTX_free(t->ctx);
        free(t);
        return err;
    }
    t->refs = 1;
    *out = t;
    return 0;
}

int nm_tls_new(const nm_tls_settings_t *s, nm_tls_t **out, char *why, size_t size)
{
    nm_tls_enter();
    int err = tls_new(s, out, why, size);
    nm_tls_leave();
    return err;
}

nm_tls_t *nm_tls_ref(nm_tls_t *t)
{
    __atomic_add_fetch(&t->refs, 1, __ATOMIC_RELAXED);
    return t;
}

void nm_tls_unref(nm_tls_t *t)
{
    if (!t || __atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    nm_tls_enter();
    pthread_mutex_lock(&store_lock);
    store_drop(t); /* a later state at the same address must not resume them */
    pthread_mutex_unlock(&store_lock);
    SSL_CTX_free(t->ctx);
    nm_tls_leave();
    free(t->server_name);
    free(t);
}

void nm_tls_conn_free(nm_tls_conn_t *conn)
{
    nm_tls_enter();
    SSL_free(conn->ssl);
    nm_tls_unref(conn->owner);
    nm_tls_leave();
    free(conn);
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

/* ---- the handshake ---------------------------------------------------- */

static int is_ip(const char *name)
{
    unsigned char a[16];
    return inet_pton(AF_INET, name, a) == 1 || inet_pton(AF_INET6, name, a) == 1;
}

/* The name CONN's server must prove, and the SNI when it is a DNS name. */
static int set_name(SSL *ssl, const char *name)
{
    if (is_ip(name))
        return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name) == 1 ? 0 : ENOMEM;
    if (SSL_set_tlsext_host_name(ssl, name) != 1 || SSL_set1_host(ssl, name) != 1)
        return ENOMEM;
    return 0;
}

static nm_tls_conn_t *conn_new(nm_tls_t *t, int fd, const char *name, const char *host,
                               int port)
{
    size_t klen = strlen(name) + strlen(host) + 24;
    nm_tls_conn_t *conn = calloc(1, sizeof *conn + klen);
    BIO *bio = NULL;
    if (!conn)
        return NULL;
    snprintf(conn->key, klen, "%s|%s|%d", name, host, port);
    conn->owner = nm_tls_ref(t);
    if (!(conn->ssl = SSL_new(t->ctx)) || !(bio = nm_tls_bio_new(fd)) ||
        set_name(conn->ssl, name) != 0) {
        BIO_free(bio);
        nm_tls_conn_free(conn);
        return NULL;
    }
    SSL_set_bio(conn->ssl, bio, bio);
    SSL_set_app_data(conn->ssl, conn);
    session_offer(conn);
    return conn;
}

/* Waits for FD to be ready for EVENTS by UNTIL: 0, or ETIMEDOUT. */
static int wait_fd(int fd, short events, int64_t until)
{
    for (;;) {
        int64_t left = nm_remaining_ms(until);
        if (left == 0)
            return ETIMEDOUT;
        struct pollfd p = { fd, events, 0 };
        int n = poll(&p, 1, (int)NM_MIN(left, 60000));
        if (n > 0)
            return 0;
        if (n < 0 && errno != EINTR)
            return errno;
    }
}

/* One step of CONN's handshake, inside the guard: 0 with *WANT the
 * event to wait for (0: done), or the failure's code with CAUSE. */
static int handshake_step(nm_tls_conn_t *conn, short *want, char *cause, size_t size)
{
    int err = 0;
    nm_tls_enter();
    ERR_clear_error();
    int r = SSL_connect(conn->ssl);
    int e = r == 1 ? SSL_ERROR_NONE : SSL_get_error(conn->ssl, r);
    *want = e == SSL_ERROR_WANT_READ ? POLLIN : e == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
    if (e != SSL_ERROR_NONE && !*want)
        err = nm_tls_explain(conn, e, cause, size);
    nm_tls_leave();
    return err;
}

static int handshake(nm_tls_conn_t *conn, int fd, int64_t until, char *cause, size_t size)
{
    int64_t began = nm_now_ms();
    for (;;) {
        short want;
        int err = handshake_step(conn, &want, cause, size);
        if (err || !want)
            return err;
        if (wait_fd(fd, want, until) != 0) {
            nm_tls_enter();
            int silent = BIO_number_read(SSL_get_rbio(conn->ssl)) == 0;
            nm_tls_leave();
            snprintf(cause, size, "TLS: handshake timed out (%lld ms)%s",
                     (long long)(nm_now_ms() - began),
                     silent ? ": the server sent nothing (a plain port? redis:// is plain)"
                            : "");
            return NM_ECONN;
        }
    }
}

int nm_tls_connect(nm_tls_t *t, redisContext *c, const char *host, int port, int64_t until,
                   char *cause, size_t size)
{
    nm_tls_enter();
    nm_tls_conn_t *conn = conn_new(t, c->fd, t->server_name ? t->server_name : host, host,
                                   port);
    nm_tls_leave();
    if (!conn)
        return ENOMEM;
    if (nm_tls_table_put(c->fd, conn) != 0) {
        nm_tls_conn_free(conn);
        return ENOMEM;
    }
    int err = handshake(conn, c->fd, until, cause, size);
    if (err)
        nm_tls_close(c->fd);
    return err;
}

int nm_tls_resumed(const redisContext *c)
{
    nm_tls_conn_t *conn = nm_tls_table_get(c->fd);
    nm_tls_enter();
    int resumed = conn && SSL_session_reused(conn->ssl);
    nm_tls_leave();
    return resumed;
}
