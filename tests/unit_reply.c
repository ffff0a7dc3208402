/*
 * unit_reply.c -- error replies to errno values and the reply-shape
 * helpers (src/transport/reply_shape.c), the reads of reply.c and the
 * reader's bounds (reader.c), without a server: replies are built by hand
 * (unit_replies.h), and the pipeline calls read what the test writes into
 * the other end of a socketpair, in RESP, as a server would.
 */
#include "ac_config.h"

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <limits.h>
#include <string.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "nm.h"
#include "clock.h"
#include "dial.h"
#include "reply.h"
#include "unit_replies.h"

static int error_errno(const char *text)
{
    redisReply *r = ur_str(REDIS_REPLY_ERROR, text);
    int err = nm_reply_error_errno(r);
    freeReplyObject(r);
    return err;
}

/* The error replies Redis 7 sends, and what each means (reply.h). */
static void test_error_errno(void)
{
    static const struct {
        const char *text;
        int err;
    } cases[] = {
        { "NOAUTH Authentication required.", EACCES },
        { "WRONGPASS invalid username-password pair or user is disabled.", EACCES },
        { "NOPERM User u has no permissions to run the 'evalsha' command", EACCES },
        { "ERR invalid password", EACCES },
        { "ERR AUTH <password> called without any password configured for the default user. "
          "Are you sure your configuration is correct?", EACCES },
        { "ERR DB index is out of range", EACCES },
        { "ERR Protocol error: unauthenticated multibulk length", EACCES },
        { "NOSCRIPT No matching script. Please use EVAL.", ENOENT },
        { "LOADING Redis is loading the dataset in memory", NM_ECONN },
        { "BUSY Redis is busy running a script.", NM_ECONN },
        { "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
          NM_ECONN },
        { "CLUSTERDOWN The cluster is down", NM_ECONN },
        { "READONLY You can't write against a read only replica.", NM_ECONN },
        { "UNBLOCKED force unblock from blocking operation, instance state changed", NM_ECONN },
        { "MOVED 3999 127.0.0.1:6381", NM_EREDIRECT },
        { "ASK 3999 127.0.0.1:6381", NM_EREDIRECT },
        /* A migration under way (cluster_route.c retries these). */
        { "TRYAGAIN Multiple keys request during rehashing of slot", NM_ETRYAGAIN },
        { "ERR Error running script (call to f_0123): @user_script:1: @user_script: 1: "
          "Script attempted to access a non local key in a cluster node", NM_ETRYAGAIN },
        /* Anything else, and near misses, are protocol errors. */
        { "ERR unknown command 'FOO'", EPROTO },
        { "ERR Error running script (call to f_0123): @user_script:1: oops", EPROTO },
        { "MOVEDX 1 a:1", EPROTO },
        { "ASKING", EPROTO },
        { "noauth lower case", EPROTO },
        { "NOAUT", EPROTO },
        { "", EPROTO },
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_test_message("'%s'", cases[i].text);
        g_assert_cmpint(error_errno(cases[i].text), ==, cases[i].err);
    }
}

/* Only the reply's LEN bytes count; no text at all is EPROTO. */
static void test_error_errno_bounds(void)
{
    redisReply *r = ur_str(REDIS_REPLY_ERROR, "NOSCRIPT x");
    r->len = 4; /* "NOSC" */
    g_assert_cmpint(nm_reply_error_errno(r), ==, EPROTO);
    freeReplyObject(r);
    r = ur_new(REDIS_REPLY_ERROR);
    g_assert_cmpint(nm_reply_error_errno(r), ==, EPROTO);
    freeReplyObject(r);
}

static void test_expect_status(void)
{
    redisReply *ok = ur_str(REDIS_REPLY_STATUS, "OK");
    redisReply *okay = ur_str(REDIS_REPLY_STATUS, "OKAY");
    redisReply *str = ur_str(REDIS_REPLY_STRING, "OK");
    redisReply *nostr = ur_new(REDIS_REPLY_STATUS);
    redisReply *nil = ur_new(REDIS_REPLY_NIL);

    g_assert_cmpint(nm_reply_expect_status(ok, "OK"), ==, 0);
    g_assert_cmpint(nm_reply_expect_status(ok, "QUEUED"), ==, EPROTO);
    g_assert_cmpint(nm_reply_expect_status(okay, "OK"), ==, EPROTO);
    g_assert_cmpint(nm_reply_expect_status(str, "OK"), ==, EPROTO);
    g_assert_cmpint(nm_reply_expect_status(nostr, "OK"), ==, EPROTO);
    g_assert_cmpint(nm_reply_expect_status(nil, "OK"), ==, EPROTO);
    freeReplyObject(ok);
    freeReplyObject(okay);
    freeReplyObject(str);
    freeReplyObject(nostr);
    freeReplyObject(nil);
}

static void test_integer(void)
{
    redisReply *i = ur_int(-42), *s = ur_str(REDIS_REPLY_STRING, "7"), *nil = ur_new(REDIS_REPLY_NIL);
    long long v = 5;

    g_assert_cmpint(nm_reply_integer(i, &v), ==, 0);
    g_assert_cmpint(v, ==, -42);
    v = 5;
    g_assert_cmpint(nm_reply_integer(s, &v), ==, EPROTO);
    g_assert_cmpint(nm_reply_integer(nil, &v), ==, EPROTO);
    g_assert_cmpint(v, ==, 5); /* untouched on failure */
    freeReplyObject(i);
    freeReplyObject(s);
    freeReplyObject(nil);
}

static void test_integers(void)
{
    redisReply *a = ur_array(3, ur_int(1), ur_int(LLONG_MAX), ur_int(LLONG_MIN));
    redisReply *mixed = ur_array(3, ur_int(1), ur_str(REDIS_REPLY_STRING, "2"), ur_int(3));
    redisReply *empty = ur_array(0), *i = ur_int(1);
    long long v[4] = { 0 };

    g_assert_cmpint(nm_reply_integers(a, v, 3), ==, 0);
    g_assert_cmpint(v[0], ==, 1);
    g_assert_cmpint(v[1], ==, LLONG_MAX);
    g_assert_cmpint(v[2], ==, LLONG_MIN);
    g_assert_cmpint(nm_reply_integers(a, v, 2), ==, 0); /* at least N */
    g_assert_cmpint(nm_reply_integers(a, v, 4), ==, EPROTO);
    g_assert_cmpint(nm_reply_integers(mixed, v, 1), ==, 0);
    g_assert_cmpint(nm_reply_integers(mixed, v, 2), ==, EPROTO);
    g_assert_cmpint(nm_reply_integers(empty, v, 0), ==, 0);
    g_assert_cmpint(nm_reply_integers(empty, v, 1), ==, EPROTO);
    g_assert_cmpint(nm_reply_integers(i, v, 1), ==, EPROTO);
    freeReplyObject(a);
    freeReplyObject(mixed);
    freeReplyObject(empty);
    freeReplyObject(i);
}

/* The accessors for arrays read element by element, and nil. */
static void test_array(void)
{
    redisReply *a = ur_array(2, ur_int(7), ur_str(REDIS_REPLY_STRING, "8"));
    redisReply *empty = ur_array(0), *i = ur_int(1), *nil = ur_new(REDIS_REPLY_NIL);
    size_t n = 9;
    long long v = 5;

    g_assert_cmpint(nm_reply_array(a, &n), ==, 0);
    g_assert_cmpuint(n, ==, 2);
    g_assert_cmpint(nm_reply_array(empty, &n), ==, 0);
    g_assert_cmpuint(n, ==, 0);
    g_assert_cmpint(nm_reply_array(i, &n), ==, EPROTO);
    g_assert_cmpint(nm_reply_array(nil, &n), ==, EPROTO);
    g_assert_cmpint(nm_reply_integer_at(a, 0, &v), ==, 0);
    g_assert_cmpint(v, ==, 7);
    v = 5;
    g_assert_cmpint(nm_reply_integer_at(a, 1, &v), ==, EPROTO); /* a string */
    g_assert_cmpint(nm_reply_integer_at(a, 2, &v), ==, EPROTO); /* past the end */
    g_assert_cmpint(nm_reply_integer_at(empty, 0, &v), ==, EPROTO);
    g_assert_cmpint(nm_reply_integer_at(i, 0, &v), ==, EPROTO);
    g_assert_cmpint(v, ==, 5);
    g_assert_true(nm_reply_is_nil(nil));
    g_assert_false(nm_reply_is_nil(empty));
    g_assert_false(nm_reply_is_nil(i));
    freeReplyObject(a);
    freeReplyObject(empty);
    freeReplyObject(i);
    freeReplyObject(nil);
}

static void test_string(void)
{
    redisReply *bulk = ur_bytes(REDIS_REPLY_STRING, "a\0b", 3);
    redisReply *status = ur_str(REDIS_REPLY_STATUS, "PONG");
    redisReply *err = ur_str(REDIS_REPLY_ERROR, "ERR x");
    redisReply *i = ur_int(3), *nil = ur_new(REDIS_REPLY_NIL);
    redisReply *nostr = ur_new(REDIS_REPLY_STRING);
    const char *s = NULL;
    size_t len = 0;

    g_assert_cmpint(nm_reply_string(bulk, &s, &len), ==, 0);
    g_assert_cmpmem(s, len, "a\0b", 3);
    g_assert_true(s == bulk->str); /* a pointer into the reply */
    g_assert_cmpint(nm_reply_string(status, &s, &len), ==, 0);
    g_assert_cmpmem(s, len, "PONG", 4);
    g_assert_cmpint(nm_reply_string(err, &s, &len), ==, EPROTO);
    g_assert_cmpint(nm_reply_string(i, &s, &len), ==, EPROTO);
    g_assert_cmpint(nm_reply_string(nil, &s, &len), ==, EPROTO);
    g_assert_cmpint(nm_reply_string(nostr, &s, &len), ==, EPROTO);
    freeReplyObject(bulk);
    freeReplyObject(status);
    freeReplyObject(err);
    freeReplyObject(i);
    freeReplyObject(nil);
    freeReplyObject(nostr);
}

static void test_strings(void)
{
    redisReply *a = ur_array(3, ur_str(REDIS_REPLY_STRING, "127.0.0.1"),
                             ur_str(REDIS_REPLY_STRING, "6379"), ur_int(9));
    const char *s[3];
    size_t lens[3];

    g_assert_cmpint(nm_reply_strings(a, s, lens, 2), ==, 0);
    g_assert_cmpmem(s[0], lens[0], "127.0.0.1", 9);
    g_assert_cmpmem(s[1], lens[1], "6379", 4);
    g_assert_cmpint(nm_reply_strings(a, s, lens, 3), ==, EPROTO);
    g_assert_cmpint(nm_reply_strings(a->element[0], s, lens, 1), ==, EPROTO);
    freeReplyObject(a);
}

/* ---- pipelines over a socketpair ---------------------------------------- */

typedef struct pipe_end {
    redisContext *c; /* ours, as if dialed */
    int server;      /* the other end: what the "server" writes */
} pipe_end_t;

static void pipe_open(pipe_end_t *p)
{
    int fds[2];
    g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), ==, 0);
    p->c = redisConnectFd(fds[0]);
    g_assert_nonnull(p->c);
    g_assert_cmpint(nm_io_setup(p->c), ==, 0);
    p->server = fds[1];
}

static void pipe_close(pipe_end_t *p)
{
    redisFree(p->c);
    if (p->server >= 0)
        close(p->server);
}

static void serve(pipe_end_t *p, const char *resp)
{
    size_t len = strlen(resp);
    g_assert_cmpint(write(p->server, resp, len), ==, (ssize_t)len);
}

/* Replies come out one by one, error replies as their errno with their
 * text kept; a reply cut in two is complete only once its rest came. */
static void test_take_replies(void)
{
    pipe_end_t p;
    redisReply *r;
    pipe_open(&p);

    serve(&p, "+OK\r\n:5\r\n-NOSCRIPT No matching script.\r\n$5\r\nhel");
    g_assert_cmpint(nm_receive(p.c), ==, 0);
    g_assert_cmpint(nm_take_reply(p.c, &r), ==, 0);
    g_assert_cmpint(nm_reply_expect_status(r, "OK"), ==, 0);
    freeReplyObject(r);
    g_assert_cmpint(nm_take_reply(p.c, &r), ==, 0);
    g_assert_cmpint(r->type, ==, REDIS_REPLY_INTEGER);
    g_assert_cmpint(r->integer, ==, 5);
    freeReplyObject(r);
    g_assert_cmpint(nm_take_reply(p.c, &r), ==, ENOENT);
    g_assert_cmpstr(nm_reply_last_error(), ==, "NOSCRIPT No matching script.");
    g_assert_cmpint(nm_take_reply(p.c, &r), ==, 0);
    g_assert_null(r); /* "hel" of "hello" */
    serve(&p, "lo\r\n");
    g_assert_cmpint(nm_get_reply(p.c, nm_now_ms() + 60000, &r), ==, 0);
    g_assert_cmpmem(r->str, r->len, "hello", 5);
    freeReplyObject(r);
    pipe_close(&p);
}

/* A long error text is kept cut, NUL-terminated. */
static void test_last_error_long(void)
{
    pipe_end_t p;
    redisReply *r;
    char resp[600];
    pipe_open(&p);
    memset(resp, 'E', sizeof resp);
    memcpy(resp, "-ERR ", 5);
    memcpy(resp + 500, "\r\n", 3);
    serve(&p, resp);
    g_assert_cmpint(nm_get_reply(p.c, nm_now_ms() + 60000, &r), ==, EPROTO);
    g_assert_cmpuint(strlen(nm_reply_last_error()), ==, 159);
    g_assert_true(g_str_has_prefix(nm_reply_last_error(), "ERR EEEE"));
    pipe_close(&p);
}

/* A command goes out, its answer comes back: nm_call. */
static void test_call(void)
{
    pipe_end_t p;
    redisReply *r;
    const char *argv[] = { "PING" };
    const size_t lens[] = { 4 };
    char got[64] = { 0 };
    pipe_open(&p);
    serve(&p, "+PONG\r\n"); /* answered before it is asked: the socket keeps it */
    g_assert_cmpint(nm_call(p.c, 1, argv, lens, nm_now_ms() + 60000, &r), ==, 0);
    g_assert_cmpint(nm_reply_expect_status(r, "PONG"), ==, 0);
    freeReplyObject(r);
    g_assert_cmpint(read(p.server, got, sizeof got - 1), ==, 14);
    g_assert_cmpstr(got, ==, "*1\r\n$4\r\nPING\r\n");
    pipe_close(&p);
}

/* A server that says nothing costs the deadline, then NM_ECONN. */
static void test_silent_server(void)
{
    pipe_end_t p;
    redisReply *r = NULL;
    const char *argv[] = { "PING" };
    const size_t lens[] = { 4 };
    pipe_open(&p);
    int64_t deadline = nm_now_ms() + 50;
    g_assert_cmpint(nm_call(p.c, 1, argv, lens, deadline, &r), ==, NM_ECONN);
    g_assert_cmpint(nm_now_ms(), >=, deadline);
    g_assert_null(r);
    pipe_close(&p);
}

/* A server that closed the connection: NM_ECONN, and no SIGPIPE (which
 * would end this process) on the write. */
static void test_closed_server(void)
{
    pipe_end_t p;
    redisReply *r = NULL;
    const char *argv[] = { "PING" };
    const size_t lens[] = { 4 };
    pipe_open(&p);
    close(p.server);
    p.server = -1;
    g_assert_cmpint(nm_call(p.c, 1, argv, lens, nm_now_ms() + 60000, &r), ==, NM_ECONN);
    g_assert_cmpint(nm_receive(p.c), ==, NM_ECONN);
    pipe_close(&p);
}

/* More unread bytes than any reply of ours (16 MiB) is a flood. */
static void test_flood(void)
{
    enum { CHUNK = 1 << 16 };
    static char chunk[CHUNK];
    pipe_end_t p;
    size_t sent = 0;
    int err = 0;
    pipe_open(&p);
    g_assert_cmpint(fcntl(p.server, F_SETFL, O_NONBLOCK), ==, 0);
    memset(chunk, 'x', sizeof chunk);
    serve(&p, "$100000000\r\n");
    while (!err && sent < (64u << 20)) {
        ssize_t n = write(p.server, chunk, sizeof chunk);
        if (n > 0)
            sent += (size_t)n;
        err = nm_receive(p.c);
    }
    g_assert_cmpint(err, ==, NM_ECONN);
    g_assert_cmpuint(sent, >, 16u << 20);
    pipe_close(&p);
}

/* A context as the library dials it (nm_dial_open), on a unix socket in
 * a directory of its own, with the accepted end as the "server". */
typedef struct dialed {
    char dir[64], path[96];
    int listener;
    pipe_end_t p;
} dialed_t;

static void dial_open(dialed_t *d)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    char cause[256];
    snprintf(d->dir, sizeof d->dir, "%s/unit_reply.XXXXXX", g_get_tmp_dir());
    g_assert_nonnull(mkdtemp(d->dir));
    snprintf(d->path, sizeof d->path, "%s/s.sock", d->dir);
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", d->path);
    d->listener = socket(AF_UNIX, SOCK_STREAM, 0);
    g_assert_cmpint(bind(d->listener, (struct sockaddr *)&sa, sizeof sa), ==, 0);
    g_assert_cmpint(listen(d->listener, 1), ==, 0);
    nm_server_t srv = { .is_unix = 1, .path = d->path };
    g_assert_cmpint(nm_dial_open(&srv, NULL, 0, nm_now_ms() + 60000, &d->p.c, cause,
                                 sizeof cause), ==, 0);
    d->p.server = accept(d->listener, NULL, NULL);
    g_assert_cmpint(d->p.server, >=, 0);
}

static void dial_close(dialed_t *d)
{
    nm_dial_close(d->p.c);
    close(d->p.server);
    close(d->listener);
    unlink(d->path);
    rmdir(d->dir);
}

/* Whether the arrays' claims in RESP are refused as soon as they are read
 * (NM_ECONN), before any element came; else the reply must be pending. */
static int claims_refused(const char *resp)
{
    dialed_t d;
    redisReply *r = NULL;
    dial_open(&d);
    serve(&d.p, resp);
    g_assert_cmpint(nm_receive(d.p.c), ==, 0);
    int err = nm_take_reply(d.p.c, &r);
    g_assert_null(r);
    g_assert_true(err == 0 || err == NM_ECONN);
    dial_close(&d);
    return err == NM_ECONN;
}

/* An array count is only a claim: hiredis allocates for it as it reads
 * it, so a count no reply of ours needs is refused at once -- it used to
 * cost 16 GB ("*2000000000"), and every nested array as much again. */
static void test_array_claims(void)
{
    dialed_t d;
    redisReply *r;
    g_assert_true(claims_refused("*2000000000\r\n"));
    g_assert_true(claims_refused("*2147483647\r\n:1\r\n"));
    /* Claims add up over the arrays of one reply: 3 x 2,000,000 is more
     * than 16 MiB of reply could hold (5,592,405 elements of 3 bytes). */
    g_assert_true(claims_refused("*3\r\n*2000000\r\n*2000000\r\n*2000000\r\n"));
    g_assert_false(claims_refused("*2\r\n*2000000\r\n*2000000\r\n"));
    g_assert_false(claims_refused("*5592405\r\n"));
    g_assert_true(claims_refused("*5592406\r\n"));

    /* Each reply's claims are its own: many of them go through. */
    dial_open(&d);
    for (int i = 0; i < 4; i++) {
        serve(&d.p, "*3\r\n*2\r\n:1\r\n:2\r\n*0\r\n$1\r\nx\r\n");
        g_assert_cmpint(nm_get_reply(d.p.c, nm_now_ms() + 60000, &r), ==, 0);
        g_assert_cmpint(r->type, ==, REDIS_REPLY_ARRAY);
        g_assert_cmpuint(r->elements, ==, 3);
        g_assert_cmpuint(r->element[0]->elements, ==, 2);
        g_assert_cmpint(r->element[0]->element[1]->integer, ==, 2);
        freeReplyObject(r);
    }
    dial_close(&d);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/unit/reply/error-errno/known", test_error_errno);
    g_test_add_func("/unit/reply/error-errno/bounds", test_error_errno_bounds);
    g_test_add_func("/unit/reply/shape/status", test_expect_status);
    g_test_add_func("/unit/reply/shape/integer", test_integer);
    g_test_add_func("/unit/reply/shape/integers", test_integers);
    g_test_add_func("/unit/reply/shape/array", test_array);
    g_test_add_func("/unit/reply/shape/string", test_string);
    g_test_add_func("/unit/reply/shape/strings", test_strings);
    g_test_add_func("/unit/reply/pipe/take", test_take_replies);
    g_test_add_func("/unit/reply/pipe/last-error-long", test_last_error_long);
    g_test_add_func("/unit/reply/pipe/call", test_call);
    g_test_add_func("/unit/reply/pipe/silent", test_silent_server);
    g_test_add_func("/unit/reply/pipe/closed", test_closed_server);
    g_test_add_func("/unit/reply/pipe/flood", test_flood);
    g_test_add_func("/unit/reply/dial/array-claims", test_array_claims);
    return g_test_run();
}
