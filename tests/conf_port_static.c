/*
 * conf_port_static.c -- the link route reaches `static` mutexes through the
 * ELF symbol tables.  port_static (port_static_a.c + port_static_b.c, each
 * with a static mutex named mut, linked with the --wrap list and without
 * -Wl,--export-dynamic) and port_static_stripped (the same, stripped) run
 * under several NETMUTEX_MUTEXES; while the program holds each mutex, the
 * lock keys in Redis show which mutexes are network mutexes, and its
 * stderr, read once it has exited, what it said about the selection.
 */
#include <poll.h>
#include <stdarg.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture.h"
#include "keytag.h"

static NmRedis *redis;

typedef struct run {
    GPid pid;
    int in, out, err;
} run_t;

static run_t start(const char *prog, const char *mutexes, const char *log_level)
{
    char *path = g_test_build_filename(G_TEST_BUILT, prog, NULL);
    char *argv[] = { path, NULL };
    char *url = nm_redis_url(redis);
    char **env = g_get_environ();
    GError *error = NULL;
    run_t r;

    env = g_environ_setenv(env, "NETMUTEX_URL", url, TRUE);
    env = g_environ_setenv(env, "NETMUTEX_MUTEXES", mutexes, TRUE);
    if (log_level)
        env = g_environ_setenv(env, "NETMUTEX_LOG", log_level, TRUE);
    g_spawn_async_with_pipes(NULL, argv, env, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, &r.pid,
                             &r.in, &r.out, &r.err, &error);
    g_assert_no_error(error);
    g_strfreev(env);
    g_free(url);
    g_free(path);
    return r;
}

/* The next line the program prints on stdout, without its newline. */
static char *next_line(run_t *r)
{
    GString *line = g_string_new(NULL);
    struct pollfd p = { r->out, POLLIN, 0 };
    char c;
    while (poll(&p, 1, (int)nm_ms(10000)) == 1 && read(r->out, &c, 1) == 1 && c != '\n')
        g_string_append_c(line, c);
    return g_string_free(line, FALSE);
}

/* Lock keys ("netmutex:{TAG}NAME", TAG the digest of NAME: a key with a
 * suffix has a tag that is not its remainder's, and a slot's fence floor
 * "netmutex:{<slot tag>}fence" a short one) in the server: the mutexes
 * held now. */
static long long held_count(void)
{
    redisReply *reply = nm_redis_cmd(redis, "KEYS netmutex:{*");
    g_assert_cmpint(reply->type, ==, REDIS_REPLY_ARRAY);
    long long n = 0;
    for (size_t i = 0; i < reply->elements; i++) {
        const char *k = reply->element[i]->str + strlen("netmutex:{");
        char tag[NM_TEST_TAG_LEN + 1];
        if (strlen(k) <= NM_TEST_TAG_LEN || k[NM_TEST_TAG_LEN] != '}')
            continue;
        const char *name = k + NM_TEST_TAG_LEN + 1;
        nm_test_key_tag(name, strlen(name), tag);
        n += strncmp(k, tag, NM_TEST_TAG_LEN) == 0;
    }
    freeReplyObject(reply);
    return n;
}

/* Waits until the program holds the mutex TAG ('a' or 'b') and checks
 * that NAME, or nothing at all when NAME is NULL, is held in Redis; then
 * lets it go on. */
static void expect_hold(run_t *r, char tag, const char *name)
{
    char want[2] = { tag, '\0' };
    char *line = next_line(r);
    g_assert_cmpstr(line, ==, want);
    g_free(line);
    if (name) {
        char *token = nm_token_of(redis, name);
        g_assert_nonnull(token);
        g_free(token);
    }
    g_assert_cmpint(held_count(), ==, name ? 1 : 0);
    g_assert_cmpint(write(r->in, "g", 1), ==, 1);
}

/* Waits (bounded) for the program to end with status 0 and returns all it
 * wrote on stderr. */
static char *finish(run_t *r)
{
    GString *text = g_string_new(NULL);
    char buf[512], *done = next_line(r);
    ssize_t n;
    int status = -1;

    g_assert_cmpstr(done, ==, "done 2");
    g_free(done);
    for (gint64 end = nmt_now_ms() + nm_ms(10000); nmt_now_ms() < end; nmt_sleep_ms(10)) {
        if (waitpid(r->pid, &status, WNOHANG) == r->pid)
            break;
    }
    while ((n = read(r->err, buf, sizeof buf)) > 0)
        g_string_append_len(text, buf, n);
    close(r->in);
    close(r->out);
    close(r->err);
    g_test_message("stderr: %s", text->str);
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 0);
    return g_string_free(text, FALSE);
}

/* Lines of TEXT that contain every one of the NULL-terminated strings. */
static int lines_with(const char *text, ...)
{
    char **lines = g_strsplit(text, "\n", -1);
    int count = 0;
    for (char **l = lines; *l; l++) {
        va_list ap;
        const char *s;
        int all = **l != '\0';
        va_start(ap, text);
        while (all && (s = va_arg(ap, const char *)) != NULL)
            all = strstr(*l, s) != NULL;
        va_end(ap);
        count += all;
    }
    g_strfreev(lines);
    return count;
}

static int line_count(const char *text)
{
    return lines_with(text, (const char *)NULL);
}

static void setup(void)
{
    nm_redis_ok(redis, "FLUSHALL");
}

/* FILE:SYMBOL picks one of two statics of the same name; the other stays
 * local, and nothing is said at the default level. */
static void test_file_symbol(void)
{
    setup();
    run_t r = start("port_static", "port_static_a.c:mut=x", NULL);
    expect_hold(&r, 'a', "x");
    expect_hold(&r, 'b', NULL);
    char *err = finish(&r);
    g_assert_cmpint(line_count(err), ==, 0);
    g_free(err);
}

/* A bare SYMBOL that two statics answer to selects neither, in one line
 * naming both. */
static void test_ambiguous(void)
{
    setup();
    run_t r = start("port_static", "mut", NULL);
    expect_hold(&r, 'a', NULL);
    expect_hold(&r, 'b', NULL);
    char *err = finish(&r);
    g_assert_cmpint(line_count(err), ==, 1);
    g_assert_cmpint(lines_with(err, "netmutex: error: NETMUTEX_MUTEXES: 'mut' is ambiguous",
                               "port_static_a.c:mut", "port_static_b.c:mut", NULL), ==, 1);
    g_free(err);
}

/* Each bad item is one line and selects nothing; the good item among them
 * still selects (once: a second item for the same mutex is refused), and
 * the program runs to its end. */
static void test_bad_items(void)
{
    setup();
    run_t r = start("port_static",
                    "main, port_static_holds,port_static_a.c:=z,nosuch.c:mut,nosuch,"
                    "port_static_b.c:mut=y,port_static_b.c:mut=w", NULL);
    expect_hold(&r, 'a', NULL);
    expect_hold(&r, 'b', "y");
    char *err = finish(&r);
    g_assert_cmpint(line_count(err), ==, 6);
    g_assert_cmpint(lines_with(err, "'main' names a non-mutex symbol", "a function", NULL), ==, 1);
    g_assert_cmpint(lines_with(err, "'port_static_holds' names a non-mutex symbol",
                               "an object of 4 bytes", NULL), ==, 1);
    g_assert_cmpint(lines_with(err, "'port_static_a.c:=z': malformed selector", NULL), ==, 1);
    g_assert_cmpint(lines_with(err, "'nosuch.c:mut': no static mut", "port_static_a.c:mut",
                               "port_static_b.c:mut", NULL), ==, 1);
    g_assert_cmpint(lines_with(err, "'nosuch': no symbol nosuch", NULL), ==, 1);
    g_assert_cmpint(lines_with(err, "warning: NETMUTEX_MUTEXES: 'port_static_b.c:mut' names "
                               "port_static_b.c:mut, which an earlier item already selected "
                               "as 'y'", NULL), ==, 1);
    g_free(err);
}

/* Without .symtab no static can be found, and the message says why. */
static void test_stripped(void)
{
    setup();
    run_t r = start("port_static_stripped", "port_static_a.c:mut=x", NULL);
    expect_hold(&r, 'a', NULL);
    expect_hold(&r, 'b', NULL);
    char *err = finish(&r);
    g_assert_cmpint(line_count(err), ==, 1);
    g_assert_cmpint(lines_with(err, "'port_static_a.c:mut': not found", "port_static_stripped",
                               "is stripped", NULL), ==, 1);
    g_free(err);
}

/* At level info every selection is listed with its name (the default name
 * is the selector), and a FILE:LINE that matched nothing -- none can on
 * the link route -- is reported by exit. */
static void test_info(void)
{
    setup();
    run_t r = start("port_static", "port_static_a.c:mut=x,port_static_b.c:mut,nowhere.c:12=z",
                    "info");
    expect_hold(&r, 'a', "x");
    expect_hold(&r, 'b', "port_static_b.c:mut");
    char *err = finish(&r);
    g_assert_cmpint(lines_with(err, "netmutex: info: NETMUTEX_MUTEXES: 'port_static_a.c:mut' "
                               "selects the mutex port_static_a.c:mut as 'x'", NULL), ==, 1);
    g_assert_cmpint(lines_with(err, "'port_static_b.c:mut' selects the mutex "
                               "port_static_b.c:mut as 'port_static_b.c:mut'", NULL), ==, 1);
    g_assert_cmpint(lines_with(err, "netmutex: warning: NETMUTEX_MUTEXES: 'nowhere.c:12' "
                               "matched no mutex", NULL), ==, 1);
    g_free(err);
}

int main(int argc, char **argv)
{
    int rc;

    nm_test_init(&argc, &argv);
    /* Counts lock keys to see which mutexes the program holds. */
    nm_test_cache_off();
    redis = nm_redis_start(NULL);

    g_test_add_func("/port/static/file-symbol", test_file_symbol);
    g_test_add_func("/port/static/ambiguous", test_ambiguous);
    g_test_add_func("/port/static/bad-items", test_bad_items);
    g_test_add_func("/port/static/stripped", test_stripped);
    g_test_add_func("/port/static/info", test_info);

    rc = nm_test_finish(g_test_run());
    nm_redis_free(redis);
    return rc;
}
