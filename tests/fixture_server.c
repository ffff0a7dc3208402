/*
 * fixture_server.c -- see fixture.h: the private redis-server of a test
 * program and raw commands to it for assertions.
 *
 * The server is started by common/redis_server.c with fork+exec, not
 * GSubprocess: GLib's child-watch thread would make every test program
 * multi-threaded before its first fork(), which ThreadSanitizer does not
 * support.  The child asks the kernel to kill it when the test program
 * dies (PR_SET_PDEATHSIG), so an aborted test never leaves a redis-server
 * behind.
 */
#include "ac_config.h"

#include "fixture.h"
#include "fixture_int.h"
#include "keytag.h"
#include "redis_server.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>

/* ===================================================================== */
/* the private redis-server                                               */
/* ===================================================================== */

struct NmRedis {
    rs_server_t srv;   /* directory, socket, log, port, pid */
    const char *dir;   /* srv.dir */
    const char *sock;  /* srv.sock */
    char *pass;
    char **first;      /* before the usual arguments (a sentinel's) */
    char **extra;      /* after them: the caller's, DEBUG, cluster mode */
    bool paused;
    bool acl;          /* NETMUTEX_TEST_ACL: the users of acl_args */
};

/* The server dies with us anyway (PDEATHSIG); a failed g_error, a fatal
 * check (SIGTRAP, SIGABRT), a harness timeout or Ctrl-C (SIGTERM, SIGINT)
 * also removes its directory (redis_server.h). */
static void catch_fatal_once(void)
{
    static bool done;

    if (!done)
        rs_catch_fatal(NULL, 0, NULL);
    done = true;
}

/* ---- NETMUTEX_TEST_ACL=1: the library as a least-privileged user ------- */

/* With NETMUTEX_TEST_ACL=1 every plain server (not a sentinel, not a
 * cluster node, which have users of their own to think of) starts with
 * three users, from its command line so that they exist from its first
 * moment and again after every restart: ACL_USER with exactly the rule
 * netmutex_acl_rule() gives, which every URL of the fixture carries;
 * ACL_ADMIN with every right, for the fixture's own connections (a
 * test's assertions and admin commands) and a replica's link; and the
 * default user, allowed nothing but the start-up PING.  tests/acl.sh runs
 * part of the suite so. */
#define ACL_USER "nmuser"
#define ACL_USER_PASS "nmuser-pw"
#define ACL_ADMIN "nmadmin"
#define ACL_ADMIN_PASS "nmadmin-pw"

static bool acl_wanted(const NmRedisOpts *opts)
{
    const char *v = g_getenv("NETMUTEX_TEST_ACL");
    return v && strcmp(v, "1") == 0 && !(opts && (opts->sentinel_conf ||
                                                   opts->cluster_node_timeout_ms));
}

static void acl_args(GPtrArray *a, const NmRedis *r)
{
    char rule[NETMUTEX_ACL_RULE_MAX];
    char **words;

    nm_assert_rc(netmutex_acl_rule(NULL, rule, sizeof rule), 0);
    /* The default prefix needs no quoting: one rule per space. */
    g_assert_null(strchr(rule, '"'));
    words = g_strsplit(rule, " ", -1);
#define ARG(s) g_ptr_array_add(a, g_strdup(s))
    ARG("--user"), ARG("default"), ARG("on"), ARG("-@all"), ARG("+ping");
    if (r->pass)
        g_ptr_array_add(a, g_strconcat(">", r->pass, NULL));
    else
        ARG("nopass");
    ARG("--user"), ARG(ACL_ADMIN), ARG("on"), ARG(">" ACL_ADMIN_PASS), ARG("~*"), ARG("&*");
    ARG("+@all");
    ARG("--user"), ARG(ACL_USER), ARG("on"), ARG(">" ACL_USER_PASS);
    for (char **w = words; *w; w++)
        ARG(*w);
    ARG("--masteruser"), ARG(ACL_ADMIN), ARG("--masterauth"), ARG(ACL_ADMIN_PASS);
#undef ARG
    g_strfreev(words);
}

/* The credentials of a URL to R, "" for none. */
static char *url_auth(const NmRedis *r)
{
    if (r->acl)
        return g_strdup(ACL_USER ":" ACL_USER_PASS "@");
    return r->pass ? g_strdup_printf(":%s@", r->pass) : g_strdup("");
}

/* What goes after the usual arguments, for the life of R. */
static char **extra_args(const NmRedis *r, const NmRedisOpts *opts)
{
    GPtrArray *a = g_ptr_array_new();

#define ARG(s) g_ptr_array_add(a, g_strdup(s))
    ARG("--databases");
    ARG("16");
    /* Redis 7 refuses DEBUG unless told otherwise; older servers do not
     * know the option, so it is only passed when a test asks for it. */
    if (opts && opts->debug_command) {
        ARG("--enable-debug-command");
        ARG("yes");
    }
    for (const char *const *e = opts ? opts->extra_args : NULL; e && *e; e++)
        ARG(*e);
    if (opts && opts->cluster_node_timeout_ms) {
        ARG("--cluster-enabled");
        ARG("yes");
        ARG("--cluster-config-file");
        g_ptr_array_add(a, g_build_filename(r->dir, "nodes.conf", NULL));
        ARG("--cluster-node-timeout");
        g_ptr_array_add(a, g_strdup_printf("%u", opts->cluster_node_timeout_ms));
        /* A replica (re)joining syncs at once, not after the default 5 s
         * wait for more replicas: a failover waits for that sync. */
        ARG("--repl-diskless-sync-delay");
        ARG("0");
    }
    if (r->acl)
        acl_args(a, r);
#undef ARG
    g_ptr_array_add(a, NULL);
    return (char **)g_ptr_array_free(a, FALSE);
}

static char *redis_log_tail(const NmRedis *r)
{
    char *text = NULL;

    if (!g_file_get_contents(r->srv.log, &text, NULL, NULL))
        return g_strdup("(no log)");
    return text;
}

/* NETMUTEX_TEST_TLS=1: the certificates a server's TLS port uses. */
static const char *tls_dir(void)
{
    return nm_test_tls() ? nm_tls_certs() : NULL;
}

/* Starts the server on PORT (RS_PICK_PORT: a fresh free one). */
static void start_redis(NmRedis *r, int port)
{
    rs_opts_t o = {
        .port = port,
        .pass = r->pass,
        .first = (const char *const *)r->first,
        .extra = (const char *const *)r->extra,
        .ready_ms = nm_ms(NM_PROMPT_MS),
        .tls_dir = tls_dir(),
    };
    int err = rs_start(&r->srv, &o);
    char *log;

    r->paused = false;
    if (err == 0)
        return;
    if (err == ENOENT)
        g_error("redis-server not found (REDIS_SERVER=%s)", g_getenv("REDIS_SERVER"));
    log = redis_log_tail(r);
    if (err == ETIMEDOUT)
        g_error("redis-server did not answer PING in time; log:\n%s", log);
    g_error("redis-server (%s) exited during start-up (%s); log:\n%s", r->srv.exe,
            nm_errname(err), log);
}

NmRedis *nm_redis_start(const NmRedisOpts *opts)
{
    NmRedis *r = g_new0(NmRedis, 1);
    bool tcp = nm_test_tls() || (opts && (opts->tcp || opts->cluster_node_timeout_ms));
    int err;

    catch_fatal_once();
    err = rs_make_dir(&r->srv, "netmutex-test");
    if (err)
        g_error("a directory for redis-server: %s", g_strerror(err));
    r->dir = r->srv.dir;
    r->sock = r->srv.sock;
    r->pass = opts && opts->requirepass ? g_strdup(opts->requirepass) : NULL;
    r->acl = acl_wanted(opts);
    r->extra = extra_args(r, opts);
    if (opts && opts->sentinel_conf) {
        /* A sentinel: the configuration file must come first. */
        char *conf = g_build_filename(r->dir, "sentinel.conf", NULL);
        g_assert_true(g_file_set_contents(conf, opts->sentinel_conf, -1, NULL));
        r->first = g_new0(char *, 3);
        r->first[0] = conf;
        r->first[1] = g_strdup("--sentinel");
    }
    start_redis(r, tcp ? RS_PICK_PORT : 0);
    return r;
}

void nm_redis_stop(NmRedis *r)
{
    rs_stop(&r->srv, nm_ms(NM_PROMPT_MS));
    r->paused = false;
}

void nm_redis_restart(NmRedis *r)
{
    g_assert_cmpint(r->srv.pid, ==, 0);
    start_redis(r, r->srv.port);
}

void nm_redis_pause(NmRedis *r)
{
    g_assert_cmpint(r->srv.pid, >, 0);
    g_assert_cmpint(kill(r->srv.pid, SIGSTOP), ==, 0);
    r->paused = true;
}

void nm_redis_resume(NmRedis *r)
{
    g_assert_cmpint(r->srv.pid, >, 0);
    g_assert_cmpint(kill(r->srv.pid, SIGCONT), ==, 0);
    r->paused = false;
}

void nm_redis_free(NmRedis *r)
{
    if (!r)
        return;
    rs_destroy(&r->srv);
    g_free(r->pass);
    g_strfreev(r->first);
    g_strfreev(r->extra);
    g_free(r);
}

const char *nm_redis_dir(NmRedis *r) { return r->dir; }
const char *nm_redis_socket(NmRedis *r) { return r->sock; }
int nm_redis_port(NmRedis *r) { return r->srv.port; }

char *nm_redis_url(NmRedis *r)
{
    if (nm_test_tls())
        return nm_redis_tcp_url(r, -1);
    char *auth = url_auth(r);
    char *url = g_strdup_printf("unix://%s%s", auth, r->sock);

    g_free(auth);
    return url;
}

char *nm_redis_proxy_url(NmRedis *r, int port)
{
    char *auth = url_auth(r);
    char *url = g_strdup_printf("redis://%s127.0.0.1:%d", auth, port);

    g_free(auth);
    return url;
}

char *nm_redis_tcp_url(NmRedis *r, int db)
{
    char *auth = url_auth(r);
    char *path = db >= 0 ? g_strdup_printf("/%d", db) : g_strdup("");
    char *url;

    g_assert_cmpint(r->srv.port, >, 0);
    url = g_strdup_printf("%s://%s127.0.0.1:%d%s", nm_test_tls() ? "rediss" : "redis", auth,
                          r->srv.port, path);
    g_free(auth);
    g_free(path);
    return url;
}

void nm_configure_with(NmRedis *r, netmutex_config_t cfg)
{
    char *url = nm_redis_url(r);

    cfg.url = url;
    nm_assert_rc(netmutex_configure(&cfg), 0);
    g_free(url);
}

void nm_configure_timeouts(NmRedis *r, unsigned int connect_ms, unsigned int io_ms)
{
    netmutex_config_t cfg = {
        .connect_timeout_ms = connect_ms,
        .io_timeout_ms = io_ms,
    };

    nm_configure_with(r, cfg);
}

void nm_configure(NmRedis *r)
{
    nm_configure_timeouts(r, 0, 0);
}

static struct timeval tv_ms(unsigned int ms)
{
    struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };
    return tv;
}

static void expect_ok_reply(redisContext *c, redisReply *reply, const char *what)
{
    if (!reply)
        g_error("raw %s: no reply (%s)", what, c->errstr);
    if (reply->type == REDIS_REPLY_ERROR)
        g_error("raw %s: %s", what, reply->str);
    freeReplyObject(reply);
}

redisContext *nm_redis_connect(NmRedis *r, int db)
{
    redisContext *c = redisConnectUnixWithTimeout(r->sock, tv_ms(nm_ms(5000)));

    if (!c || c->err)
        g_error("raw connection to %s: %s", r->sock, c ? c->errstr : "out of memory");
    redisSetTimeout(c, tv_ms(nm_ms(10000)));
    if (r->acl)
        expect_ok_reply(c, redisCommand(c, "AUTH %s %s", ACL_ADMIN, ACL_ADMIN_PASS), "AUTH");
    else if (r->pass)
        expect_ok_reply(c, redisCommand(c, "AUTH %s", r->pass), "AUTH");
    if (db != 0)
        expect_ok_reply(c, redisCommand(c, "SELECT %d", db), "SELECT");
    return c;
}

static redisReply *vcmd(NmRedis *r, const char *fmt, va_list ap)
{
    redisContext *c = nm_redis_connect(r, 0);
    redisReply *reply = redisvCommand(c, fmt, ap);

    if (!reply)
        g_error("raw command '%s': %s", fmt, c->errstr);
    redisFree(c);
    return reply;
}

redisReply *nm_redis_cmd(NmRedis *r, const char *fmt, ...)
{
    va_list ap;
    redisReply *reply;

    va_start(ap, fmt);
    reply = vcmd(r, fmt, ap);
    va_end(ap);
    return reply;
}

long long nm_redis_count_keys(NmRedis *r, const char *pattern)
{
    char cursor[32] = "0";
    long long n = 0;

    do {
        redisReply *reply = nm_redis_cmd(r, "SCAN %s MATCH %s COUNT 1000", cursor, pattern);
        g_assert_cmpint(reply->type, ==, REDIS_REPLY_ARRAY);
        g_strlcpy(cursor, reply->element[0]->str, sizeof cursor);
        n += (long long)reply->element[1]->elements;
        freeReplyObject(reply);
    } while (strcmp(cursor, "0") != 0);
    return n;
}

long long nm_redis_kind_keys(NmRedis *r, char kind)
{
    char pattern[64];

    snprintf(pattern, sizeof pattern, "netmutex:{%c%.*s}*", kind, NM_TEST_TAG_LEN,
             "????????????????????????????????");
    return nm_redis_count_keys(r, pattern);
}

void nm_redis_add_user(NmRedis *r, const char *user, const char *password, const char *also)
{
    char rule[NETMUTEX_ACL_RULE_MAX];
    nm_assert_rc(netmutex_acl_rule(NULL, rule, sizeof rule), 0);
    /* The default prefix's rule has no quoted word: spaces split it. */
    char *line = g_strdup_printf("%s %s", rule, also ? also : "");
    gchar **words = g_strsplit(g_strstrip(line), " ", -1);
    GPtrArray *argv = g_ptr_array_new_with_free_func(g_free);
    g_ptr_array_add(argv, g_strdup("ACL"));
    g_ptr_array_add(argv, g_strdup("SETUSER"));
    g_ptr_array_add(argv, g_strdup(user));
    g_ptr_array_add(argv, g_strdup("reset"));
    g_ptr_array_add(argv, g_strdup("on"));
    g_ptr_array_add(argv, g_strdup_printf(">%s", password));
    for (gchar **w = words; *w; w++)
        g_ptr_array_add(argv, g_strdup(*w));
    redisContext *c = nm_redis_connect(r, 0);
    redisReply *reply = redisCommandArgv(c, (int)argv->len, (const char **)argv->pdata, NULL);
    g_assert_nonnull(reply);
    if (reply->type == REDIS_REPLY_ERROR)
        g_error("ACL SETUSER %s: %s", user, reply->str);
    freeReplyObject(reply);
    redisFree(c);
    g_ptr_array_unref(argv);
    g_strfreev(words);
    g_free(line);
}

char *nm_url_as_user(const char *url, const char *user, const char *password)
{
    const char *rest = strstr(url, "://");
    g_assert_nonnull(rest);
    rest += 3;
    /* Credentials already there end at the '@': the fixture's hosts are
     * addresses and its paths temporary directories, which have none. */
    const char *at = strchr(rest, '@');
    if (at)
        rest = at + 1;
    return g_strdup_printf("%.*s%s:%s@%s", (int)(strstr(url, "://") + 3 - url), url, user,
                           password, rest);
}

/* Whether KEY (LEN bytes) is one the library keeps without an expiry on
 * purpose (docs/deployment.md): a slot's fence floor, the counter of
 * waits. */
static bool meant_to_last(const char *key, size_t len)
{
    static const char floor[] = "}fence", seq[] = "{d}seq";
    return (len >= sizeof floor - 1 && memcmp(key + len - (sizeof floor - 1), floor,
                                              sizeof floor - 1) == 0) ||
           (len >= sizeof seq - 1 && memcmp(key + len - (sizeof seq - 1), seq,
                                            sizeof seq - 1) == 0);
}

long long nm_redis_keys_without_expiry(NmRedis *r)
{
    redisContext *c = nm_redis_connect(r, 0);
    char cursor[32] = "0";
    long long n = 0;

    do {
        redisReply *reply = redisCommand(c, "SCAN %s COUNT 1000", cursor);
        g_assert_nonnull(reply);
        g_assert_cmpint(reply->type, ==, REDIS_REPLY_ARRAY);
        g_strlcpy(cursor, reply->element[0]->str, sizeof cursor);
        for (size_t i = 0; i < reply->element[1]->elements; i++) {
            const redisReply *k = reply->element[1]->element[i];
            if (meant_to_last(k->str, k->len))
                continue;
            redisReply *t = redisCommand(c, "PTTL %b", k->str, k->len);
            g_assert_nonnull(t);
            g_assert_cmpint(t->type, ==, REDIS_REPLY_INTEGER);
            if (t->integer == -1) {
                g_test_message("key without expiry: %.*s", (int)k->len, k->str);
                n++;
            }
            freeReplyObject(t);
        }
        freeReplyObject(reply);
    } while (strcmp(cursor, "0") != 0);
    redisFree(c);
    return n;
}

void nm_redis_ok(NmRedis *r, const char *fmt, ...)
{
    va_list ap;
    redisReply *reply;

    va_start(ap, fmt);
    reply = vcmd(r, fmt, ap);
    va_end(ap);
    if (reply->type == REDIS_REPLY_ERROR)
        g_error("raw command '%s' failed: %s", fmt, reply->str);
    freeReplyObject(reply);
}

char *nm_redis_get(NmRedis *r, int db, const char *key, size_t keylen)
{
    redisContext *c = nm_redis_connect(r, db);
    const char *argv[] = { "GET", key };
    const size_t lens[] = { 3, keylen };
    redisReply *reply = redisCommandArgv(c, 2, argv, lens);
    char *value = NULL;

    if (!reply)
        g_error("raw GET: %s", c->errstr);
    if (reply->type == REDIS_REPLY_STRING)
        value = g_strndup(reply->str, reply->len);
    else if (reply->type != REDIS_REPLY_NIL)
        g_error("raw GET: unexpected reply type %d", reply->type);
    freeReplyObject(reply);
    redisFree(c);
    return value;
}

static long long int_reply(redisReply *reply, const char *what)
{
    long long v;

    if (reply->type == REDIS_REPLY_INTEGER)
        v = reply->integer;
    else if (reply->type == REDIS_REPLY_STRING)
        v = g_ascii_strtoll(reply->str, NULL, 10);
    else if (reply->type == REDIS_REPLY_NIL)
        v = 0;
    else
        g_error("%s: unexpected reply type %d", what, reply->type);
    freeReplyObject(reply);
    return v;
}

long long nm_redis_pttl(NmRedis *r, const char *key)
{
    return int_reply(nm_redis_cmd(r, "PTTL %s", key), "PTTL");
}

long long nm_redis_fence(NmRedis *r, const char *lock_key)
{
    char *value = nm_redis_get(r, 0, lock_key, strlen(lock_key));
    long long fence = 0;

    /* "<token><q><c> <fence> <holder>" (src/lua/lib.lua) */
    if (value && strlen(value) > 35)
        fence = g_ascii_strtoll(value + 35, NULL, 10);
    g_free(value);
    return fence;
}

char *nm_redis_string(NmRedis *r, const char *fmt, ...)
{
    va_list ap;
    redisReply *reply;
    char *value = NULL;

    va_start(ap, fmt);
    reply = vcmd(r, fmt, ap);
    va_end(ap);
    if (reply->type == REDIS_REPLY_STRING)
        value = g_strndup(reply->str, reply->len);
    freeReplyObject(reply);
    return value;
}

long long nm_redis_time_ms(NmRedis *r)
{
    redisReply *reply = nm_redis_cmd(r, "TIME");
    long long ms;

    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2)
        g_error("raw TIME: unexpected reply type %d", reply->type);
    ms = g_ascii_strtoll(reply->element[0]->str, NULL, 10) * 1000 +
         g_ascii_strtoll(reply->element[1]->str, NULL, 10) / 1000;
    freeReplyObject(reply);
    return ms;
}

long long nm_entry_written_ms(const char *entry)
{
    return g_ascii_strtoll(entry, NULL, 10) - NM_TEST_ENTRY_LIFE_MS;
}

char *nm_redis_wait_refresh(NmRedis *r, const char *w, const char *token, const char *was,
                            unsigned int timeout_ms)
{
    gint64 until = nmt_now_ms() + timeout_ms;

    do {
        char *entry = nm_redis_string(r, "HGET %s %s", w, token);
        if (entry && g_strcmp0(entry, was) != 0)
            return entry;
        g_free(entry);
        nmt_sleep_ms(1);
    } while (nmt_now_ms() < until);
    return NULL;
}

char *nm_key_of(const char *prefix, const char *name, const char *suffix)
{
    char tag[NM_TEST_TAG_LEN + 1];
    nm_test_key_tag(name, strlen(name), tag);
    return g_strdup_printf("%s{%s}%s%s", prefix, tag, name, suffix);
}

char *nm_lock_key(const char *name)
{
    return nm_key_of("netmutex:", name, "");
}

char *nm_token_of(NmRedis *r, const char *name)
{
    char *key = nm_lock_key(name);
    char *value = nm_redis_get(r, 0, key, strlen(key));
    char *token = value ? g_strndup(value, 32) : NULL;

    g_free(value);
    g_free(key);
    return token;
}

long long nm_queue_len(NmRedis *r, const char *name)
{
    char *key = nm_key_of("netmutex:", name, ":q");
    redisReply *reply = nm_redis_cmd(r, "LLEN %s", key);
    g_free(key);
    long long n = reply->type == REDIS_REPLY_INTEGER ? reply->integer : -1;

    freeReplyObject(reply);
    return n;
}

bool nm_wait_queue_len(NmRedis *r, const char *name, long long n, unsigned int timeout_ms)
{
    gint64 end = nmt_now_ms() + timeout_ms;

    while (nm_queue_len(r, name) != n) {
        if (nmt_now_ms() > end)
            return false;
        nmt_sleep_ms(2);
    }
    return true;
}
