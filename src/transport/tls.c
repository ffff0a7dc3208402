/*
 * tls.c -- a configuration's TLS state, the handshake, sessions for
 * resumption, the fork handlers (tls.h).  Calls down into tls_io.c (the
 * connections' table, their bytes, their failures in words) and
 * tls_guard.c (the fork guard), never the other way.
 *
 * The SSL_CTX is built once per configuration and never changed after:
 * OpenSSL lets threads share it as long as nobody changes it.  Sessions
 * are stored here, not in the SSL_CTX's cache, keyed by the state that
 * made them and the server (the name verified, host and port), under one
 * leaf lock that mutex.c's fork handlers hold across fork(): a child
 * sets them aside, and never resumes a session of its parent.
 *
 * Every call of ours into OpenSSL is made inside the fork guard
 * (tls_guard.c), which mutex.c's fork handlers shut through
 * nm_tls_before_fork.
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
#include "tls_guard.h"
#include "tls_io.h"

struct nm_tls {
    int refs;          /* atomic */
    SSL_CTX *ctx;
    char *server_name; /* NULL: the host dialed */
};

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
    nm_tls_guard_shut();
    pthread_mutex_lock(&store_lock);
}

void nm_tls_after_fork_parent(void)
{
    pthread_mutex_unlock(&store_lock);
    nm_tls_guard_open();
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
    nm_tls_guard_open();
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

/* Frees CONN: its SSL (nothing is sent), its reference, itself. */
static void conn_free(nm_tls_conn_t *conn)
{
    nm_tls_enter();
    SSL_free(conn->ssl);
    nm_tls_unref(conn->owner);
    nm_tls_leave();
    free(conn);
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
        conn_free(conn);
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
        conn_free(conn);
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

void nm_tls_close(int fd)
{
    nm_tls_conn_t *conn = nm_tls_table_take(fd);
    if (conn)
        conn_free(conn);
}
