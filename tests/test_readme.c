/*
 * test_readme.c -- every C block of README.md is compiled and run against
 * a private redis-server, so the first program a newcomer copies cannot
 * rot.  A block is the text between a line "```c" and the next "```".
 *
 * The compiler and flags of the build under test come from the test
 * environment (tests/Makefile.am): NM_CC, NM_CFLAGS, NM_LDFLAGS, and the
 * library in NM_LIBDIR.  Each program gets NETMUTEX_URL pointing at the
 * private server and must exit 0 within a generous bound.
 */
#include "ac_config.h"

#include "fixture.h"

#include <glib/gstdio.h>
#include <string.h>

static NmRedis *redis;

/* The C blocks of the README, in order. */
static GPtrArray *read_blocks(void)
{
    char *path = g_build_filename(g_getenv("NM_TOP_SRCDIR"), "README.md", NULL);
    char *text = NULL;
    GPtrArray *blocks = g_ptr_array_new_with_free_func(g_free);
    GString *cur = NULL;

    g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
    char **lines = g_strsplit(text, "\n", -1);
    for (char **l = lines; *l; l++) {
        if (!cur && strcmp(*l, "```c") == 0) {
            cur = g_string_new(NULL);
        } else if (cur && g_str_has_prefix(*l, "```")) {
            g_ptr_array_add(blocks, g_string_free(cur, FALSE));
            cur = NULL;
        } else if (cur) {
            g_string_append_printf(cur, "%s\n", *l);
        }
    }
    g_assert_null(cur); /* an unterminated block */
    g_strfreev(lines);
    g_free(text);
    g_free(path);
    return blocks;
}

/* Runs ARGV (a shell command line) with ENVP; asserts exit status 0 and
 * prints its output on failure. */
static void run_ok(const char *what, const char *cmdline, char **envp)
{
    char *argv[] = { (char *)"/bin/sh", (char *)"-c", (char *)cmdline, NULL };
    char *out = NULL, *err = NULL;
    int status = -1;
    GError *error = NULL;

    g_assert_true(g_spawn_sync(NULL, argv, envp, G_SPAWN_DEFAULT, NULL, NULL, &out, &err,
                               &status, &error));
    if (!g_spawn_check_wait_status(status, NULL))
        g_error("%s failed:\n$ %s\n%s%s", what, cmdline, out, err);
    g_free(out);
    g_free(err);
}

static void compile_and_run(const char *source, int n, const char *dir)
{
    char *c = g_strdup_printf("%s/block%d.c", dir, n);
    char *exe = g_strdup_printf("%s/block%d", dir, n);
    char *url = nm_redis_url(redis);
    char **envp = g_get_environ();
    char *cc = g_strdup_printf("%s %s -I%s/include %s -o %s %s -L%s -lnetmutex -lpthread",
                               g_getenv("NM_CC"), g_getenv("NM_CFLAGS"),
                               g_getenv("NM_TOP_SRCDIR"), c, exe, g_getenv("NM_LDFLAGS"),
                               g_getenv("NM_LIBDIR"));
    char *run = g_strdup_printf("timeout %u %s", nm_ms(60000) / 1000 + 1, exe);

    g_assert_true(g_file_set_contents(c, source, -1, NULL));
    run_ok("compiling a README block", cc, envp);
    envp = g_environ_setenv(envp, "NETMUTEX_URL", url, TRUE);
    envp = g_environ_setenv(envp, "LD_LIBRARY_PATH", g_getenv("NM_LIBDIR"), TRUE);
    run_ok("running a README block", run, envp);
    g_unlink(c);
    g_unlink(exe);
    g_strfreev(envp);
    g_free(run);
    g_free(cc);
    g_free(url);
    g_free(exe);
    g_free(c);
}

static void test_readme_blocks(void)
{
    GPtrArray *blocks = read_blocks();
    char *dir = g_dir_make_tmp("netmutex-readme-XXXXXX", NULL);

    g_assert_cmpuint(blocks->len, >, 0);
    for (guint i = 0; i < blocks->len; i++)
        compile_and_run(g_ptr_array_index(blocks, i), (int)i + 1, dir);
    g_test_message("%u C blocks compiled and run", blocks->len);
    g_rmdir(dir);
    g_free(dir);
    g_ptr_array_unref(blocks);
}

int main(int argc, char **argv)
{
    nm_test_init(&argc, &argv);
    redis = nm_redis_start(NULL);
    g_test_add_func("/readme/c-blocks-compile-and-run", test_readme_blocks);
    int rc = nm_test_finish(g_test_run());
    nm_redis_free(redis);
    return rc;
}
