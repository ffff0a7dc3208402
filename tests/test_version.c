/*
 * test_version.c -- the version a program can ask for is configure's
 * version everywhere: in the header's macros, in what the loaded library
 * answers, and in the netmutex.pc the build wrote.  (src/api/version.c already
 * refuses to build when the header's numbers and configure's differ; this
 * checks what reaches a program.)
 */
#include "ac_config.h"

#include "fixture.h"

#include <stdio.h>
#include <string.h>

static void test_macros_match_package(void)
{
    char text[64];

    g_snprintf(text, sizeof text, "%d.%d.%d", NETMUTEX_VERSION_MAJOR, NETMUTEX_VERSION_MINOR,
               NETMUTEX_VERSION_PATCH);
    g_assert_cmpstr(text, ==, PACKAGE_VERSION);
    g_assert_cmphex(NETMUTEX_VERSION_HEX, ==,
                    ((unsigned)NETMUTEX_VERSION_MAJOR << 16) |
                        ((unsigned)NETMUTEX_VERSION_MINOR << 8) |
                        (unsigned)NETMUTEX_VERSION_PATCH);
    g_assert_cmpint(NETMUTEX_VERSION_MINOR, <, 256);
    g_assert_cmpint(NETMUTEX_VERSION_PATCH, <, 256);
}

static void test_library_answers(void)
{
    g_assert_cmpstr(netmutex_version(), ==, PACKAGE_VERSION);
    g_assert_cmphex(netmutex_version_hex(), ==, NETMUTEX_VERSION_HEX);
    /* A static string: the same pointer every time. */
    g_assert_true(netmutex_version() == netmutex_version());
}

/* The "Version:" line of the netmutex.pc that configure wrote. */
static void test_pkgconfig_file(void)
{
    const char *top = g_getenv("NM_TOP_BUILDDIR");
    g_assert_nonnull(top);
    char *path = g_build_filename(top, "netmutex.pc", NULL);
    char *text = NULL;
    g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
    char *want = g_strdup_printf("\nVersion: %s\n", netmutex_version());
    g_assert_nonnull(strstr(text, want));
    g_free(want);
    g_free(text);
    g_free(path);
}

int main(int argc, char **argv)
{
    nm_test_init(&argc, &argv);
    g_test_add_func("/version/macros-match-package", test_macros_match_package);
    g_test_add_func("/version/library-answers", test_library_answers);
    g_test_add_func("/version/pkgconfig-file", test_pkgconfig_file);
    return nm_test_finish(g_test_run());
}
