/*
 * unit_codes.c -- the library's internal result codes (src/base/nm.h):
 * none is an errno value or another code, each becomes a documented errno
 * at the API (nm_errno_public).
 */
#include "ac_config.h"

#include <errno.h>
#include <glib.h>
#include <stdio.h>
#include <string.h>

#include "nm.h"

/* Every internal code, with the errno a caller gets for it (nm.h); each
 * of those is in the manual pages' ERRORS of the calls (netmutex_lock(3),
 * netmutex_trylock(3), netmutex_status(3), netmutex_break(3)). */
static const struct {
    int code;
    const char *name;
    int public;
} codes[] = {
    { NM_ECONN, "NM_ECONN", EAGAIN },
    { NM_EASKED, "NM_EASKED", EBUSY },
    { NM_EHELD, "NM_EHELD", EBUSY },
    { NM_EKEYS, "NM_EKEYS", EPROTO },
    { NM_EUNDIALED, "NM_EUNDIALED", EAGAIN },
    { NM_EREDIRECT, "NM_EREDIRECT", EPROTO },
    { NM_ETRYAGAIN, "NM_ETRYAGAIN", EAGAIN },
};

/* What a netmutex call may return (test_errname.c's list, the manual
 * pages' ERRORS). */
static const int documented[] = { 0,      EINVAL,    ENOMEM, EBUSY,  EDEADLK, EOWNERDEAD,
                                  ENOTRECOVERABLE, EAGAIN, ETIMEDOUT, EPERM, ENOLCK,
                                  EIO,    ENOENT,    EACCES, ENOTSUP, EPROTO, ENOSPC };

/* Whether the C library has a text of its own for ERR. */
static gboolean known_errno(int err)
{
    char expected[32];
    snprintf(expected, sizeof expected, "Unknown error %d", err);
    return strcmp(strerror(err), expected) != 0;
}

static void test_all_listed(void)
{
    /* The table above has them all: NM_ECODE_BASE + 1 .. NM_ECODE_END - 1. */
    g_assert_cmpint(G_N_ELEMENTS(codes), ==, NM_ECODE_END - NM_ECODE_BASE - 1);
    for (int rc = NM_ECODE_BASE - 2; rc <= NM_ECODE_END + 1; rc++) {
        gboolean listed = FALSE;
        for (size_t i = 0; i < G_N_ELEMENTS(codes); i++)
            listed |= codes[i].code == rc;
        g_assert_cmpint(nm_errno_internal(rc), ==, listed);
    }
}

static void test_distinct(void)
{
    for (size_t i = 0; i < G_N_ELEMENTS(codes); i++)
        for (size_t j = i + 1; j < G_N_ELEMENTS(codes); j++)
            g_assert_cmpint(codes[i].code, !=, codes[j].code);
}

/* No code is a value errno can hold: none of those the C library knows,
 * and none it does not know either (it names them "Unknown error N"). */
static void test_not_errno(void)
{
    unsigned known = 0;
    for (int err = 0; err < 4096; err++) {
        if (!known_errno(err))
            continue;
        known++;
        g_assert_false(nm_errno_internal(err));
        for (size_t i = 0; i < G_N_ELEMENTS(codes); i++)
            g_assert_cmpint(codes[i].code, !=, err);
    }
    g_assert_cmpuint(known, >, 100); /* the loop saw the C library's errnos */
    for (size_t i = 0; i < G_N_ELEMENTS(codes); i++) {
        g_test_message("%s = %d", codes[i].name, codes[i].code);
        g_assert_cmpint(codes[i].code, >=, 4096);
        g_assert_false(known_errno(codes[i].code));
        g_assert_null(netmutex_errname(codes[i].code));
    }
}

static gboolean is_documented(int err)
{
    for (size_t i = 0; i < G_N_ELEMENTS(documented); i++)
        if (documented[i] == err)
            return TRUE;
    return FALSE;
}

static void test_public(void)
{
    for (size_t i = 0; i < G_N_ELEMENTS(codes); i++) {
        int pub = nm_errno_public(codes[i].code);
        g_test_message("%s -> %d", codes[i].name, pub);
        g_assert_cmpint(pub, ==, codes[i].public);
        g_assert_true(is_documented(pub));
        g_assert_nonnull(netmutex_errname(pub));
        g_assert_false(nm_errno_internal(pub));
    }
}

/* Every other value is left as it is: an errno, documented or not. */
static void test_public_passes_errnos(void)
{
    for (int err = -16; err < 4096; err++)
        g_assert_cmpint(nm_errno_public(err), ==, err);
    g_assert_cmpint(nm_errno_public(NM_ECODE_BASE), ==, NM_ECODE_BASE);
    g_assert_cmpint(nm_errno_public(NM_ECODE_END), ==, NM_ECODE_END);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/unit/codes/all-listed", test_all_listed);
    g_test_add_func("/unit/codes/distinct", test_distinct);
    g_test_add_func("/unit/codes/not-errno", test_not_errno);
    g_test_add_func("/unit/codes/public", test_public);
    g_test_add_func("/unit/codes/public-passes-errnos", test_public_passes_errnos);
    return g_test_run();
}
