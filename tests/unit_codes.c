/*
 * unit_codes.c -- the library's internal result codes (src/base/nm.h):
 * none is an errno value or another code, each becomes a documented errno
 * at the API (nm_errno_public), and a dial that met a redirection or a
 * TRYAGAIN says it met an unexpected answer (nm_dial_describe).
 */
#include "ac_config.h"

#include <errno.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "nm.h"
#include "clock.h"
#include "dial.h"
#include "reply.h"

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
    { NM_EDEPUTY, "NM_EDEPUTY", EBUSY },
};

/* What a netmutex call may return (test_errname.c's list, the manual
 * pages' ERRORS). */
static const int documented[] = { 0,      EINVAL,    ENOMEM, EBUSY,  EDEADLK, EOWNERDEAD,
                                  ENOTRECOVERABLE, EAGAIN, ETIMEDOUT, EPERM, ENOLCK,
                                  EIO,    ENOENT,    EACCES, ENOTSUP, EPROTO, ENOSPC,
                                  ECANCELED };

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

/* ---- dial: a server that answers the handshake with a Cluster's words ---- */

typedef struct answerer {
    int listener;
    const char *reply; /* sent as soon as the client connects */
} answerer_t;

/* Accepts one client, answers its first command with REPLY, and waits for
 * it to hang up. */
static gpointer answer_one(gpointer arg)
{
    answerer_t *a = arg;
    char buf[512];
    int fd = accept(a->listener, NULL, NULL);
    if (fd < 0)
        return NULL;
    g_assert_cmpint(send(fd, a->reply, strlen(a->reply), MSG_NOSIGNAL), ==,
                    (ssize_t)strlen(a->reply));
    while (read(fd, buf, sizeof buf) > 0)
        ;
    close(fd);
    return NULL;
}

/* Dials a unix socket whose server answers SELECT with REPLY: the dial's
 * error, and its cause in CAUSE. */
static int dial_answered(const char *reply, char *cause, size_t size)
{
    char *dir = g_dir_make_tmp("netmutex-codes-XXXXXX", NULL);
    char *path = g_build_filename(dir, "s.sock", NULL);
    struct sockaddr_un sun = { .sun_family = AF_UNIX };
    answerer_t a = { socket(AF_UNIX, SOCK_STREAM, 0), reply };
    redisContext *c = NULL;

    g_assert_cmpint(a.listener, >=, 0);
    g_assert_cmpuint(strlen(path), <, sizeof sun.sun_path);
    strcpy(sun.sun_path, path);
    g_assert_cmpint(bind(a.listener, (struct sockaddr *)&sun, sizeof sun), ==, 0);
    g_assert_cmpint(listen(a.listener, 1), ==, 0);
    GThread *t = g_thread_new("answerer", answer_one, &a);

    nm_server_t srv = { .is_unix = 1, .path = path, .db = 1 };
    int err = nm_dial_open(&srv, NULL, 0, nm_now_ms() + 5000, &c, cause, size);
    if (c)
        redisFree(c);
    g_thread_join(t);
    close(a.listener);
    unlink(path);
    g_rmdir(dir);
    g_free(path);
    g_free(dir);
    return err;
}

static void test_dial_redirected(void)
{
    char cause[256];
    int err = dial_answered("-MOVED 3999 127.0.0.1:1\r\n", cause, sizeof cause);
    g_test_message("%s", cause);
    g_assert_cmpint(err, ==, NM_EREDIRECT);
    g_assert_cmpstr(cause, ==, "unexpected answer: MOVED 3999 127.0.0.1:1");
    g_assert_cmpint(nm_errno_public(err), ==, EPROTO);
}

static void test_dial_tryagain(void)
{
    char cause[256];
    int err = dial_answered("-TRYAGAIN Multiple keys request during rehashing of slot\r\n",
                            cause, sizeof cause);
    g_test_message("%s", cause);
    g_assert_cmpint(err, ==, NM_ETRYAGAIN);
    g_assert_cmpstr(cause, ==,
                    "unexpected answer: TRYAGAIN Multiple keys request during rehashing of slot");
    g_assert_cmpint(nm_errno_public(err), ==, EAGAIN);
}

/* Without a reply's words (a reply of another shape), the same prefix. */
static void test_describe_codes(void)
{
    char buf[256];
    nm_dial_describe(NULL, NM_EREDIRECT, 100, buf, sizeof buf);
    g_assert_true(g_str_has_prefix(buf, "unexpected answer: "));
    nm_dial_describe(NULL, NM_ETRYAGAIN, 100, buf, sizeof buf);
    g_assert_true(g_str_has_prefix(buf, "unexpected answer: "));
    nm_dial_describe(NULL, NM_ECONN, 100, buf, sizeof buf);
    g_assert_cmpstr(buf, ==, "no answer within 100 ms");
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/unit/codes/all-listed", test_all_listed);
    g_test_add_func("/unit/codes/distinct", test_distinct);
    g_test_add_func("/unit/codes/not-errno", test_not_errno);
    g_test_add_func("/unit/codes/public", test_public);
    g_test_add_func("/unit/codes/public-passes-errnos", test_public_passes_errnos);
    g_test_add_func("/unit/codes/dial/redirected", test_dial_redirected);
    g_test_add_func("/unit/codes/dial/tryagain", test_dial_tryagain);
    g_test_add_func("/unit/codes/dial/describe", test_describe_codes);
    return g_test_run();
}
