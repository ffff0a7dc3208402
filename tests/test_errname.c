/*
 * test_errname.c -- netmutex_errname() and netmutex_strerror() agree on
 * which values a netmutex call can return, and name each one right.
 */
#include "ac_config.h"

#include "fixture.h"

#include <errno.h>
#include <string.h>

/* Every value some call returns (the manual pages' ERRORS, netmutex_wrap(3)). */
static const struct {
    int err;
    const char *name;
} returned[] = {
    { 0, "0" },
    { EINVAL, "EINVAL" },
    { ENOMEM, "ENOMEM" },
    { EBUSY, "EBUSY" },
    { EDEADLK, "EDEADLK" },
    { EOWNERDEAD, "EOWNERDEAD" },
    { ENOTRECOVERABLE, "ENOTRECOVERABLE" },
    { EAGAIN, "EAGAIN" },
    { ETIMEDOUT, "ETIMEDOUT" },
    { EPERM, "EPERM" },
    { ENOLCK, "ENOLCK" },
    { EIO, "EIO" },
    { ENOENT, "ENOENT" },
    { EACCES, "EACCES" },
    { ENOTSUP, "ENOTSUP" },
    { EPROTO, "EPROTO" },
    { ENOSPC, "ENOSPC" },
    { ECANCELED, "ECANCELED" },
    { ERANGE, "ERANGE" },
};

static void test_names(void)
{
    for (size_t i = 0; i < G_N_ELEMENTS(returned); i++)
        g_assert_cmpstr(netmutex_errname(returned[i].err), ==, returned[i].name);
}

static void test_unknown_is_null(void)
{
    g_assert_null(netmutex_errname(-1));
    g_assert_null(netmutex_errname(123456));
    g_assert_null(netmutex_errname(ECONNRESET)); /* no call returns it */
    g_assert_null(netmutex_errname(EINTR));
}

/* A value has a name exactly when it has a text of its own. */
static void test_agrees_with_strerror(void)
{
    unsigned named = 0;

    for (int err = -16; err < 4096; err++) {
        const char *name = netmutex_errname(err);
        const char *text = netmutex_strerror(err);
        g_assert_nonnull(text);
        if (name == NULL) {
            g_assert_cmpstr(text, ==, "unknown error");
        } else {
            g_assert_cmpstr(text, !=, "unknown error");
            named++;
        }
    }
    g_assert_cmpuint(named, ==, G_N_ELEMENTS(returned));
}

/* The porting layer's ENOSPC had no text before it had a name. */
static void test_enospc_has_text(void)
{
    g_assert_nonnull(strstr(netmutex_strerror(ENOSPC), "table"));
}

int main(int argc, char **argv)
{
    nm_test_init(&argc, &argv);
    g_test_add_func("/errname/names", test_names);
    g_test_add_func("/errname/unknown-is-null", test_unknown_is_null);
    g_test_add_func("/errname/agrees-with-strerror", test_agrees_with_strerror);
    g_test_add_func("/errname/enospc-has-text", test_enospc_has_text);
    return nm_test_finish(g_test_run());
}
