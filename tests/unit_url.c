/*
 * unit_url.c -- the URL forms of NETMUTEX_URL, without a server (all of
 * them src/base/url.c's): redis:// and unix:// and their lists,
 * redis-sentinel://, redis-cluster://, checked against the forms that
 * docs/deployment.md and include/netmutex.h give, and the way servers are
 * named in messages (nm_url_describe), passwords masked.
 * The library's messages are captured, so a refused URL is checked to be
 * named with its passwords masked too.
 */
#include "ac_config.h"

#include <errno.h>
#include <glib.h>
#include <string.h>

#include "nm.h"
#include "config.h"
#include "url.h"

/* ---- the library's messages ---------------------------------------------- */

static GString *logged;

static void capture(int level, const char *message, void *arg)
{
    (void)level;
    (void)arg;
    g_string_append(logged, message);
    g_string_append_c(logged, '\n');
}

/* ---- helpers ----------------------------------------------------------- */

/* nm_url_parse, for the configuration's servers alone. */
static int parse_servers(const char *urls, nm_server_t **s, size_t *n)
{
    char why[160];
    nm_urls_t u;
    int err = nm_url_parse(urls, &u, why, sizeof why);
    if (err)
        return err;
    g_assert_cmpstr(why, ==, "");
    nm_servers_free(u.seeds, u.nseeds);
    *s = u.servers;
    *n = u.n;
    return 0;
}

/* URLS parses into one or more servers; the first is described as WANT. */
static nm_server_t *parse_ok(const char *urls, size_t want_n, const char *want)
{
    nm_server_t *s = NULL;
    size_t n = 0;
    char buf[NM_URL_MAX + 64];
    g_test_message("'%s'", urls);
    g_assert_cmpint(parse_servers(urls, &s, &n), ==, 0);
    g_assert_cmpuint(n, ==, want_n);
    nm_url_describe(&s[0], buf, sizeof buf);
    g_assert_cmpstr(buf, ==, want);
    return s;
}

static void parse_bad(const char *urls)
{
    nm_server_t *s = (nm_server_t *)&s;
    size_t n = 77;
    g_test_message("'%s'", urls ? urls : "(null)");
    g_assert_cmpint(parse_servers(urls, &s, &n), ==, EINVAL);
    g_assert_true(s == (nm_server_t *)&s); /* untouched */
    g_assert_cmpuint(n, ==, 77);
}

/* ---- rediss:// (TLS) ---------------------------------------------------- */

/* docs/deployment.md, "URL forms": the rediss forms, each described as it
 * was given; unix:// has none. */
static void test_tls_forms(void)
{
    nm_server_t *s = parse_ok("rediss://:pw@h:6380/2", 1, "rediss://:***@h:6380");
    g_assert_true(s->tls);
    g_assert_null(s->tls_state); /* the configuration's, not the parser's */
    nm_servers_free(s, 1);
    s = parse_ok("redis://a,rediss://b:7000,unix:///tmp/x.sock", 3, "redis://a:6379");
    g_assert_false(s[0].tls);
    g_assert_true(s[1].tls);
    g_assert_false(s[2].tls);
    nm_servers_free(s, 3);
    parse_bad("rediss:///tmp/x.sock");
    parse_bad("unixs:///tmp/x.sock");
    parse_bad("redisss://h");
}

static void test_tls_sentinel(void)
{
    static const struct {
        const char *url, *described;
        int sentinels, master;
    } cases[] = {
        { "rediss-sentinel://s1,s2#m", "rediss-sentinel://s1:26379,s2:26379#m", 1, 1 },
        { "rediss-sentinel://s1?master_tls=no#m",
          "rediss-sentinel://s1:26379?master_tls=no#m", 1, 0 },
        { "redis-sentinel://s1?master_tls=yes#m",
          "redis-sentinel://s1:26379?master_tls=yes#m", 0, 1 },
        { "redis-sentinel://s1?sentinel_password=x&master_tls=no#m",
          "redis-sentinel://s1:26379?sentinel_password=***#m", 0, 0 },
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        nm_server_t *s = parse_ok(cases[i].url, 1, cases[i].described);
        g_assert_cmpint(s->tls, ==, cases[i].master);
        for (size_t k = 0; k < s->nsentinels; k++)
            g_assert_cmpint(s->sentinels[k].tls, ==, cases[i].sentinels);
        nm_servers_free(s, 1);
    }
    parse_bad("redis-sentinel://s1?master_tls=maybe#m");
    parse_bad("redis-sentinel://s1?master_tls=yes&master_tls=no#m");
}

static void test_tls_cluster(void)
{
    char why[160];
    nm_urls_t u;
    g_assert_cmpint(nm_url_parse("rediss-cluster://:pw@a:7000,b:7001", &u, why, sizeof why),
                    ==, 0);
    g_assert_true(u.servers[0].tls);
    g_assert_true(u.seeds[0].tls && u.seeds[1].tls);
    nm_urls_free(&u);
    g_assert_cmpint(nm_url_parse("redis://a,rediss-cluster://b", &u, why, sizeof why), ==,
                    EINVAL);
}

/* ---- redis:// ------------------------------------------------------------ */

static void test_redis_forms(void)
{
    nm_server_t *s;

    /* docs/deployment.md's examples. */
    s = parse_ok("redis://localhost", 1, "redis://localhost:6379");
    g_assert_false(s->is_unix);
    g_assert_null(s->user);
    g_assert_null(s->password);
    g_assert_cmpint(s->db, ==, 0);
    nm_servers_free(s, 1);
    s = parse_ok("redis://:s3cret@10.0.0.5:6380/2", 1, "redis://:***@10.0.0.5:6380");
    g_assert_null(s->user);
    g_assert_cmpstr(s->password, ==, "s3cret");
    g_assert_cmpint(s->port, ==, 6380);
    g_assert_cmpint(s->db, ==, 2);
    nm_servers_free(s, 1);

    /* An ACL user; the edges of the port and db ranges. */
    s = parse_ok("redis://alice:pw@h.example-1_x:1/0", 1, "redis://alice:***@h.example-1_x:1");
    g_assert_cmpstr(s->user, ==, "alice");
    g_assert_cmpstr(s->password, ==, "pw");
    nm_servers_free(s, 1);
    s = parse_ok("redis://h:65535/2147483647", 1, "redis://h:65535");
    g_assert_cmpint(s->db, ==, 2147483647);
    nm_servers_free(s, 1);
    s = parse_ok("redis://h/", 1, "redis://h:6379");
    g_assert_cmpint(s->db, ==, 0);
    nm_servers_free(s, 1);
    /* An empty password is a password (AUTH ""), an empty user is none. */
    s = parse_ok("redis://:@h", 1, "redis://:***@h:6379");
    g_assert_cmpstr(s->password, ==, "");
    g_assert_null(s->user);
    nm_servers_free(s, 1);
}

/* %XX escapes in user and password; a raw '@' in a password (the last
 * '@' ends the credentials). */
static void test_redis_escapes(void)
{
    nm_server_t *s;
    s = parse_ok("redis://u%3Ax%2c:p%40ss%25%2C%7e@h", 1, "redis://u:x,:***@h:6379");
    g_assert_cmpstr(s->user, ==, "u:x,");
    g_assert_cmpstr(s->password, ==, "p@ss%,~");
    nm_servers_free(s, 1);
    s = parse_ok("redis://:p@ss@h:7", 1, "redis://:***@h:7");
    g_assert_cmpstr(s->password, ==, "p@ss");
    nm_servers_free(s, 1);
    s = parse_ok("redis://:%ff%01@h", 1, "redis://:***@h:6379");
    g_assert_cmpstr(s->password, ==, "\xff\x01");
    nm_servers_free(s, 1);

    parse_bad("redis://:%zz@h");
    parse_bad("redis://:%4@h");   /* cut short */
    parse_bad("redis://:ab%@h");
    parse_bad("redis://:%00@h");  /* a NUL would cut the password */
    parse_bad("redis://%00:p@h");
    parse_bad("redis://:%g1@h");
    parse_bad("redis://u@h");     /* no ':' between user and password */
    parse_bad("redis://@h");
}

static void test_redis_ipv6(void)
{
    nm_server_t *s;
    s = parse_ok("redis://[::1]:7000/1", 1, "redis://[::1]:7000");
    g_assert_cmpstr(s->host, ==, "::1");
    g_assert_cmpint(s->port, ==, 7000);
    g_assert_cmpint(s->db, ==, 1);
    nm_servers_free(s, 1);
    s = parse_ok("redis://:pw@[fe80::1%eth0]", 1, "redis://:***@[fe80::1%eth0]:6379");
    g_assert_cmpstr(s->host, ==, "fe80::1%eth0");
    nm_servers_free(s, 1);
    s = parse_ok("redis://[2001:db8::a]/", 1, "redis://[2001:db8::a]:6379");
    nm_servers_free(s, 1);

    parse_bad("redis://[::1");       /* no ']' */
    parse_bad("redis://[]:6379");
    parse_bad("redis://[::1]x");
    parse_bad("redis://[::1]:");
    parse_bad("redis://::1");        /* IPv6 without brackets */
    parse_bad("redis://::1:6379");
    parse_bad("redis://[::1]:6379]");
    parse_bad("redis://[::1/64]");
    parse_bad("redis://h:6379:6380");
    parse_bad("redis://h%1");        /* '%' only inside brackets */
}

static void test_redis_bad(void)
{
    static const char *const bad[] = {
        "", "redis://", "redis:/h", "http://h", "REDIS://h", " redis://h", "redis://h ",
        "redis://h\t", "redis://h\n", "redis://a b", "redis://h\x7f",
        "redis://h:0", "redis://h:65536", "redis://h:", "redis://h:abc", "redis://h:-1",
        "redis://h:+80", "redis://h:99999999999", "redis://h:80x", "redis://:6379",
        "redis://h/abc", "redis://h/1/2", "redis://h/-1", "redis://h/2147483648",
        "redis://h/1x", "redis://h?db=1", "redis://h#x", "redis://h/ 1",
        "redis://h!", "redis://h,", ",redis://h", "redis://a,,redis://b",
        "redis://a;redis://b", "redis-sentinel://s", /* no #MASTERNAME */
    };
    parse_bad(NULL);
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++)
        parse_bad(bad[i]);
}

/* At most NM_URL_MAX bytes per URL. */
static void test_redis_long(void)
{
    char *url = g_malloc(NM_URL_MAX + 2);
    nm_server_t *s = NULL;
    size_t n = 0;

    memcpy(url, "redis://", 8);
    memset(url + 8, 'h', NM_URL_MAX - 8);
    url[NM_URL_MAX] = '\0';
    g_assert_cmpint(parse_servers(url, &s, &n), ==, 0);
    g_assert_cmpuint(strlen(s->host), ==, NM_URL_MAX - 8);
    nm_servers_free(s, n);
    url[NM_URL_MAX] = 'h';
    url[NM_URL_MAX + 1] = '\0';
    parse_bad(url);
    g_free(url);
}

/* ---- unix:// ------------------------------------------------------------- */

static void test_unix(void)
{
    nm_server_t *s;
    s = parse_ok("unix:///run/redis/redis-server.sock?db=1", 1,
                 "unix:///run/redis/redis-server.sock");
    g_assert_true(s->is_unix);
    g_assert_cmpstr(s->path, ==, "/run/redis/redis-server.sock");
    g_assert_cmpint(s->db, ==, 1);
    g_assert_null(s->host);
    nm_servers_free(s, 1);
    /* Credentials end before the path, which may hold an '@'. */
    s = parse_ok("unix://u:p%2F@/tmp/a@b.sock", 1, "unix://u:***@/tmp/a@b.sock");
    g_assert_cmpstr(s->user, ==, "u");
    g_assert_cmpstr(s->password, ==, "p/");
    g_assert_cmpstr(s->path, ==, "/tmp/a@b.sock");
    nm_servers_free(s, 1);

    /* sun_path holds 108 bytes with the NUL. */
    char url[200] = "unix:///";
    memset(url + 8, 'p', 106);
    s = parse_ok(url, 1, url);
    nm_servers_free(s, 1);
    url[8 + 106] = 'p';
    parse_bad(url);

    static const char *const bad[] = {
        "unix://", "unix:///", "unix://relative/path", "unix://tmp", "unix:///tmp/s?db=",
        "unix:///tmp/s?db=x", "unix:///tmp/s?db=-1", "unix:///tmp/s?foo=1", "unix:///tmp/s?",
        "unix:///tmp/s?db=1&x=2", "unix:///tmp/s?db=2147483648", "unix://u@/tmp/s",
        "unix:///tmp/a b",
    };
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++)
        parse_bad(bad[i]);
}

/* ---- lists: quorum mode ---------------------------------------------------- */

static void test_lists(void)
{
    nm_server_t *s;
    GString *list = g_string_new(NULL);

    s = parse_ok("redis://a,unix:///tmp/b,redis://:pw@[::1]:7", 3, "redis://a:6379");
    g_assert_true(s[1].is_unix);
    g_assert_cmpstr(s[2].host, ==, "::1");
    g_assert_cmpstr(s[2].password, ==, "pw");
    nm_servers_free(s, 3);

    /* NETMUTEX_SERVERS_MAX servers, not one more. */
    for (int i = 0; i < NETMUTEX_SERVERS_MAX; i++)
        g_string_append_printf(list, "%sredis://h%d:%d", i ? "," : "", i, 7000 + i);
    s = parse_ok(list->str, NETMUTEX_SERVERS_MAX, "redis://h0:7000");
    g_assert_cmpint(s[NETMUTEX_SERVERS_MAX - 1].port, ==, 7000 + NETMUTEX_SERVERS_MAX - 1);
    nm_servers_free(s, NETMUTEX_SERVERS_MAX);
    g_string_append(list, ",redis://h9");
    parse_bad(list->str);

    /* One bad URL spoils the list, wherever it is. */
    parse_bad("redis://a,redis://b:0,redis://c");
    parse_bad("redis://a,redis://b,");
    parse_bad("redis://a,redis-sentinel://s#m");
    parse_bad("redis://a,redis-cluster://b");
    g_string_free(list, TRUE);
}

/* ---- redis-sentinel:// ------------------------------------------------------- */

static nm_server_t *sentinel_ok(const char *url, const char *want)
{
    nm_server_t *s = parse_ok(url, 1, want);
    g_assert_nonnull(s->master_name);
    g_assert_cmpuint(s->nsentinels, >, 0);
    g_assert_null(s->host);
    return s;
}

static void test_sentinel(void)
{
    nm_server_t *s;
    /* docs/deployment.md's example: port 26379 unless given. */
    s = sentinel_ok("redis-sentinel://:s3cret@sentinel-a:26379,sentinel-b,sentinel-c#locks",
                    "redis-sentinel://:***@sentinel-a:26379,sentinel-b:26379,sentinel-c:26379"
                    "#locks");
    g_assert_cmpstr(s->password, ==, "s3cret");
    g_assert_null(s->user);
    nm_servers_free(s, 1);
    /* The data nodes' credentials and db, the sentinels' in the query. */
    s = sentinel_ok("redis-sentinel://u:p%23w@[::1]:26380,[fe80::2]/3"
                    "?sentinel_user=su&sentinel_password=sp#m-1",
                    "redis-sentinel://u:***@[::1]:26380,[fe80::2]:26379/3"
                    "?sentinel_password=***#m-1");
    g_assert_cmpstr(s->user, ==, "u");
    g_assert_cmpstr(s->password, ==, "p#w");
    g_assert_cmpint(s->db, ==, 3);
    nm_servers_free(s, 1);
    s = sentinel_ok("redis-sentinel://h?sentinel_password=only#m",
                    "redis-sentinel://h:26379?sentinel_password=***#m");
    g_assert_null(s->password);
    nm_servers_free(s, 1);
}

static void test_sentinel_bad(void)
{
    GString *many = g_string_new("redis-sentinel://");
    static const char *const bad[] = {
        "redis-sentinel://", "redis-sentinel://h", "redis-sentinel://h#",
        "redis-sentinel://#m", "redis-sentinel://h#a b", "redis-sentinel://h#a\tb",
        "redis-sentinel://h,,k#m", "redis-sentinel://h,#m", "redis-sentinel://,h#m",
        "redis-sentinel://h:0#m", "redis-sentinel://h:70000#m", "redis-sentinel://::1#m",
        "redis-sentinel://h/x#m", "redis-sentinel://u@h#m",
        "redis-sentinel://h?sentinel_user=u#m", "redis-sentinel://h?foo=1#m",
        "redis-sentinel://h?sentinel_password=a&sentinel_password=b#m",
        "redis-sentinel://h?sentinel_password#m", "redis-sentinel://:%zz@h#m",
        "redis-sentinel://h%2C#m",
    };
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++)
        parse_bad(bad[i]);

    /* 16 sentinels, not 17; a MASTERNAME of 255 bytes, not 256. */
    nm_server_t *srv = NULL;
    size_t n = 0;
    for (int i = 0; i < NM_SENTINEL_NODES_MAX; i++)
        g_string_append_printf(many, "%ss%d", i ? "," : "", i);
    g_string_append(many, "#m");
    g_assert_cmpint(parse_servers(many->str, &srv, &n), ==, 0);
    nm_servers_free(srv, n);
    g_string_insert(many, strlen("redis-sentinel://"), "s16,");
    parse_bad(many->str);
    g_string_assign(many, "redis-sentinel://h#");
    for (int i = 0; i < 255; i++)
        g_string_append_c(many, 'n');
    g_assert_cmpint(parse_servers(many->str, &srv, &n), ==, 0);
    nm_servers_free(srv, n);
    g_string_append_c(many, 'n');
    parse_bad(many->str);
    g_string_free(many, TRUE);
}

/* Fills the stack below the caller with bytes no pointer has, so that a
 * variable the parser reads or frees before setting it holds garbage, as
 * in a long-running program, rather than the zeros of a fresh stack. */
static void __attribute__((noinline)) dirty_stack(void)
{
    volatile unsigned char junk[64 * 1024];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = 0xa5;
}

/* A raw ',' in the data nodes' credentials or db: EINVAL with the reason
 * (it once freed the parser's uninitialised stack copy of the server). */
static void test_sentinel_comma(void)
{
    static const char *const bad[] = {
        "redis-sentinel://a,b@h#m", "redis-sentinel://:p,w@h#m",
        "redis-sentinel://u,v:p@h,k#m", "redis-sentinel://h/1,2#m",
        "redis-sentinel://:p@h,k/1,#m", "rediss-sentinel://,@h#m",
    };
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        char why[160];
        nm_urls_t u;
        dirty_stack();
        g_test_message("'%s'", bad[i]);
        g_assert_cmpint(nm_url_parse(bad[i], &u, why, sizeof why), ==, EINVAL);
        g_assert_cmpstr(why, ==, "malformed credentials or db");
        g_assert_null(u.servers);
        g_assert_cmpuint(u.n, ==, 0);
    }
}

/* A refused sentinel URL is named with the reason, both passwords masked. */
static void test_sentinel_message(void)
{
    static const struct {
        const char *url, *why;
    } cases[] = {
        { "redis-sentinel://u:topsecret@h?sentinel_password=alsosecret#", "no #MASTERNAME" },
        { "redis-sentinel://u:topsecret@h?sentinel_password=alsosecret&x=1#m",
          "sentinel_user and sentinel_password" },
        { "redis-sentinel://:topsecret@h,,k?sentinel_password=alsosecret#m", "empty host" },
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        netmutex_config_t user = { .url = cases[i].url };
        nm_config_t *cfg = NULL;
        g_string_truncate(logged, 0);
        g_assert_cmpint(nm_config_build(&user, &cfg), ==, EINVAL);
        g_test_message("%s", logged->str);
        g_assert_nonnull(strstr(logged->str, cases[i].why));
        g_assert_nonnull(strstr(logged->str, "netmutex_config_t.url"));
        g_assert_null(strstr(logged->str, "topsecret"));
        g_assert_null(strstr(logged->str, "alsosecret"));
    }
}

/* ---- messages about a refused URL ------------------------------------------- */

/* netmutex_configure's check (nm_config_build) names a refused URL with
 * every password masked, whichever form it has. */
static void test_refused_masked(void)
{
    static const char *const urls[] = {
        "redis://:topsecret@h:0",
        "redis://u:topsecret@a,redis://:alsosecret@b/x",
        "redis://:top@secret@h,unix://:alsosecret@/tmp/s?db=x",
        "redis-sentinel://u:topsecret@h?sentinel_password=alsosecret",
        "redis-cluster://u:topsecret@a/1",
        /* A raw comma inside a password (it should be %2C). */
        "redis://:top,secret@h:0",
        "redis-cluster://u:top,secret@a/1",
        "redis://:a@h,redis://:top,secret@h:0",
    };
    for (size_t i = 0; i < G_N_ELEMENTS(urls); i++) {
        netmutex_config_t user = { .url = urls[i] };
        nm_config_t *cfg = NULL;
        g_string_truncate(logged, 0);
        g_test_message("'%s'", urls[i]);
        g_assert_cmpint(nm_config_build(&user, &cfg), ==, EINVAL);
        g_assert_null(cfg);
        g_test_message("%s", logged->str);
        g_assert_nonnull(strstr(logged->str, "netmutex_config_t.url"));
        g_assert_null(strstr(logged->str, "secret"));
    }
}

/* ---- redis-cluster:// -------------------------------------------------------- */

/* nm_url_parse of a redis-cluster:// URL: 0 with the first seed as the
 * one server, every seed in *SEEDS. */
static int parse_cluster(const char *url, nm_server_t **s, nm_urls_t *seeds)
{
    char why[160];
    int err = nm_url_parse(url, seeds, why, sizeof why);
    if (err)
        return err;
    g_assert_cmpuint(seeds->n, ==, 1);
    *s = seeds->servers;
    return 0;
}

static void test_cluster(void)
{
    nm_server_t *s = NULL;
    nm_urls_t u;
    char buf[256];

    g_assert_cmpint(parse_cluster("redis://h", &s, &u), ==, 0);
    g_assert_null(u.seeds); /* not a cluster's URL */
    nm_urls_free(&u);

    /* The first seed is the configuration's one server. */
    g_assert_cmpint(parse_cluster("redis-cluster://a:7000,b:7001,[::1]:7002", &s, &u), ==, 0);
    g_assert_cmpuint(u.nseeds, ==, 3);
    nm_url_describe(s, buf, sizeof buf);
    g_assert_cmpstr(buf, ==, "redis://a:7000");
    nm_url_describe(&u.seeds[2], buf, sizeof buf);
    g_assert_cmpstr(buf, ==, "redis://[::1]:7002");
    nm_urls_free(&u);

    /* The credentials, written once, with ',' as %2C; /0 alone as a db. */
    g_assert_cmpint(parse_cluster("redis-cluster://u:p%2Cq@[::1]/0,b", &s, &u), ==, 0);
    g_assert_cmpstr(s->host, ==, "::1");
    g_assert_cmpint(s->port, ==, 6379);
    g_assert_cmpstr(s->user, ==, "u");
    g_assert_cmpstr(s->password, ==, "p,q");
    g_assert_cmpstr(u.seeds[1].password, ==, "p,q");
    nm_urls_free(&u);
}

static void test_cluster_bad(void)
{
    static const char *const bad[] = {
        "redis-cluster://", "redis-cluster://a,,b", "redis-cluster://a,", "redis-cluster://a/1",
        "redis-cluster://a:0", "redis-cluster://u:p,q@a", "redis-cluster://a,redis://b",
        "redis://x,redis-cluster://a", "unix:///tmp/s,redis-cluster://a",
        "redis-cluster://u@a", "redis-cluster://::1", "redis-cluster://a b",
    };
    GString *seeds = g_string_new("redis-cluster://");
    nm_server_t *s;
    nm_urls_t u;

    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_test_message("'%s'", bad[i]);
        g_assert_cmpint(parse_cluster(bad[i], &s, &u), ==, EINVAL);
        g_assert_null(u.servers); /* nothing left to free */
        g_assert_null(u.seeds);
    }
    /* Up to 16 seeds. */
    for (int i = 0; i < 16; i++)
        g_string_append_printf(seeds, "%sh%d:%d", i ? "," : "", i, 7000 + i);
    g_assert_cmpint(parse_cluster(seeds->str, &s, &u), ==, 0);
    g_assert_cmpuint(u.nseeds, ==, 16);
    nm_urls_free(&u);
    g_string_append(seeds, ",h16");
    g_assert_cmpint(parse_cluster(seeds->str, &s, &u), ==, EINVAL);
    g_string_free(seeds, TRUE);
}

/* A configuration gets the state its URL's kind needs: a cluster state
 * for one plain URL (it may reach a cluster) and for redis-cluster://, a
 * sentinel state for redis-sentinel://, neither for a quorum list. */
static void test_config_states(void)
{
    static const struct {
        const char *url;
        int cluster, sentinel;
    } cases[] = {
        { "redis://h", 1, 0 },
        { "unix:///tmp/s", 1, 0 },
        { "redis-cluster://a,b", 1, 0 },
        { "redis-sentinel://s#m", 0, 1 },
        { "redis://a,redis://b,redis://c", 0, 0 },
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        netmutex_config_t user = { .url = cases[i].url };
        nm_config_t *cfg = NULL;
        g_test_message("'%s'", cases[i].url);
        g_assert_cmpint(nm_config_build(&user, &cfg), ==, 0);
        g_assert_cmpint(cfg->cluster != NULL, ==, cases[i].cluster);
        g_assert_cmpint(cfg->servers[0].sentinel != NULL, ==, cases[i].sentinel);
        nm_config_unref(cfg);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    logged = g_string_new(NULL);
    netmutex_set_log(NETMUTEX_LOG_DEBUG, capture, NULL);
    g_test_add_func("/unit/url/redis/forms", test_redis_forms);
    g_test_add_func("/unit/url/tls/forms", test_tls_forms);
    g_test_add_func("/unit/url/tls/sentinel", test_tls_sentinel);
    g_test_add_func("/unit/url/tls/cluster", test_tls_cluster);
    g_test_add_func("/unit/url/redis/escapes", test_redis_escapes);
    g_test_add_func("/unit/url/redis/ipv6", test_redis_ipv6);
    g_test_add_func("/unit/url/redis/bad", test_redis_bad);
    g_test_add_func("/unit/url/redis/long", test_redis_long);
    g_test_add_func("/unit/url/unix", test_unix);
    g_test_add_func("/unit/url/lists", test_lists);
    g_test_add_func("/unit/url/sentinel/forms", test_sentinel);
    g_test_add_func("/unit/url/sentinel/bad", test_sentinel_bad);
    g_test_add_func("/unit/url/sentinel/comma", test_sentinel_comma);
    g_test_add_func("/unit/url/sentinel/message", test_sentinel_message);
    g_test_add_func("/unit/url/refused-masked", test_refused_masked);
    g_test_add_func("/unit/url/cluster/forms", test_cluster);
    g_test_add_func("/unit/url/cluster/bad", test_cluster_bad);
    g_test_add_func("/unit/url/config-states", test_config_states);
    int rc = g_test_run();
    netmutex_set_log(NETMUTEX_LOG_WARN, NULL, NULL);
    g_string_free(logged, TRUE);
    return rc;
}
