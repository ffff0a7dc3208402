/* dial.c -- one connection to one server, ready for requests (dial.h). */
#include "nm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "dial.h"
#include "reader.h"
#include "reply.h"
#include "sock.h"
#include "tls.h"
#include "tls_io.h"
#include "url.h"

/* AUTH and SELECT, in that order, as the server requires. */
static int handshake(redisContext *c, const nm_server_t *srv, int64_t deadline)
{
    redisReply *r;
    char db[16];
    int err = 0;

    if (srv->password) {
        const char *argv[3] = { "AUTH", srv->user, srv->password };
        if (!srv->user)
            argv[1] = srv->password;
        err = nm_call(c, srv->user ? 3 : 2, argv, NULL, deadline, &r);
        if (!err) {
            err = nm_reply_expect_status(r, "OK");
            freeReplyObject(r);
        }
    }
    if (!err && srv->db != 0) {
        snprintf(db, sizeof db, "%d", srv->db);
        const char *argv[2] = { "SELECT", db };
        err = nm_call(c, 2, argv, NULL, deadline, &r);
        if (!err) {
            err = nm_reply_expect_status(r, "OK");
            freeReplyObject(r);
        }
    }
    return err;
}

/* Whether plain C was cut off as a TLS server cuts off a client that
 * does not speak TLS: a reset or a close, or an alert record (0x15). */
static int plain_cut(const redisContext *c)
{
    return c->connection_type == REDIS_CONN_TCP &&
           (strstr(c->errstr, "reset by peer") || strstr(c->errstr, "closed the connection") ||
            strstr(c->errstr, "\\x15"));
}

/* Why dialing failed, in words, for the outage report.  A redirection or
 * TRYAGAIN (reply.h) answered to AUTH, SELECT or INFO is an answer no
 * server should give there: said as the unexpected answer it is, in the
 * server's words, not as the time out it is not. */
void nm_dial_describe(const redisContext *c, int err, int64_t budget, char *buf,
                      size_t size)
{
    if (err == ENOMEM)
        snprintf(buf, size, "out of memory");
    else if (c && c->err && c->errstr[0] && (err == EACCES || err == EPROTO))
        snprintf(buf, size, "%s", c->errstr); /* TLS's reason (tls_io.c) */
    else if (err == EACCES)
        snprintf(buf, size, "refused: %s", nm_reply_last_error());
    else if (err == EINVAL)
        snprintf(buf, size, "a Redis Cluster node, in quorum mode");
    else if (err == EPROTO || err == NM_EREDIRECT || err == NM_ETRYAGAIN)
        snprintf(buf, size, "unexpected answer: %s", *nm_reply_last_error()
                 ? nm_reply_last_error() : "a reply of another shape");
    else if (c && c->err && c->errstr[0] && !nm_tls_on(c->fd) && plain_cut(c))
        snprintf(buf, size, "%s (a TLS port? redis:// is plain, rediss:// TLS)", c->errstr);
    else if (c && c->err && c->errstr[0])
        snprintf(buf, size, "%s", c->errstr);
    else
        snprintf(buf, size, "no answer within %lld ms", (long long)budget);
}

/* A context on our own socket (sock.h), which is close-on-exec from its
 * birth: hiredis's own connect opens a socket without SOCK_CLOEXEC, and a
 * fork() by another thread of the caller before the flag could be set gave
 * the child's exec() our socket.  The address is kept as hiredis keeps the
 * one it dials: the Sentinel check compares it with the master's. */
static redisContext *context_on(int fd, const char *host, int port)
{
    redisContext *c = redisConnectFd(fd);
    if (!c) {
        close(fd);
        return NULL;
    }
    if (nm_reader_guard(c) != 0) {
        nm_dial_close(c);
        return NULL;
    }
    if (host) {
        c->connection_type = REDIS_CONN_TCP;
        c->tcp.port = port;
        if (!(c->tcp.host = strdup(host))) {
            nm_dial_close(c);
            return NULL;
        }
    }
    return c;
}

/* A server that asked for a client certificate we have none of may
 * require one, and TLS 1.3 says so only after the handshake: one PING
 * tells, so that the dial, not a later request, fails with the reason. */
static int cert_probe(redisContext *c, int64_t until)
{
    static const char *ping[1] = { "PING" };
    redisReply *r;
    if (!nm_tls_cert_wanted(c))
        return 0;
    int err = nm_call(c, 1, ping, NULL, until, &r);
    if (!err)
        freeReplyObject(r);
    /* Refused by an alert, or the connection reset before it was read. */
    if (err == NM_ECONN && (nm_tls_refused(c) || c->err != 0 || nm_remaining_ms(until) > 0)) {
        c->err = REDIS_ERR_IO;
        snprintf(c->errstr, sizeof c->errstr, "TLS: the server requires a client certificate "
                                              "(set NETMUTEX_TLS_CERT and NETMUTEX_TLS_KEY)");
        err = EACCES;
    }
    return err == EACCES || err == NM_ECONN || err == ENOMEM ? err : 0;
}

/* TLS first, when SRV says so (never over a unix socket), then AUTH and
 * SELECT.  A TLS failure leaves its reason in CAUSE (*TOLD set). */
static int setup(redisContext *c, const nm_server_t *srv, const char *host, int port,
                 int64_t until, char *cause, size_t size, int *told)
{
    int err = nm_io_setup(c) != 0 ? NM_ECONN : 0;
    if (!err && host)
        redisEnableKeepAlive(c);
    if (!err && host && srv->tls) {
        err = nm_tls_connect(srv->tls_state, c, host, port, until, cause, size);
        *told = err != 0;
        if (!err)
            err = cert_probe(c, until);
    }
    return err ? err : handshake(c, srv, until);
}

int nm_dial_open(const nm_server_t *srv, const char *host, int port, int64_t until,
                 redisContext **out, char *cause, size_t size)
{
    int64_t budget = NM_MAX(nm_remaining_ms(until), 1);
    int told = 0;
    int fd = nm_sock_open(host, port, srv->path, nm_now_ms() + budget, cause, size);
    if (fd < 0)
        return NM_ECONN;
    redisContext *c = context_on(fd, host, port);
    int err = c == NULL ? ENOMEM : setup(c, srv, host, port, until, cause, size, &told);
    if (err) {
        if (!told)
            nm_dial_describe(c, err, budget, cause, size);
        nm_dial_close(c);
        return err;
    }
    *out = c;
    return 0;
}

void nm_dial_close(redisContext *c)
{
    if (!c)
        return;
    nm_reply_forget(c);
    nm_reader_unguard(c);
    nm_tls_close(c->fd);
    redisFree(c);
}

