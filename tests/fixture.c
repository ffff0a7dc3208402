/*
 * fixture.c -- see fixture.h: program setup, time and assertions.  The
 * private redis-server is in fixture_server.c, threads in
 * fixture_thread.c, processes in fixture_proc.c.
 */
#include "ac_config.h"

#include "fixture.h"
#include "fixture_int.h"
#include "keytag.h"

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

extern char **environ;

static void init_slowdown(void);

/* ===================================================================== */
/* program setup                                                          */
/* ===================================================================== */

/* Removes every NETMUTEX_* variable except our own NETMUTEX_TEST_*, so the
 * library only sees the configuration a test gives it. */
static void clear_netmutex_env(void)
{
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);

    for (char **e = environ; *e; e++) {
        if (g_str_has_prefix(*e, "NETMUTEX_") &&
            !g_str_has_prefix(*e, "NETMUTEX_TEST_")) {
            const char *eq = strchr(*e, '=');
            g_ptr_array_add(names, g_strndup(*e, eq ? (gsize)(eq - *e) : strlen(*e)));
        }
    }
    for (guint i = 0; i < names->len; i++)
        g_unsetenv(names->pdata[i]);
    g_ptr_array_free(names, TRUE);
}

void nm_test_init(int *argc, char ***argv)
{
    nm_fixture_remote_mode(*argc, *argv);
    g_test_init(argc, argv, NULL);
    /* One library bug should fail its test, not hide every later test of
     * the program.  Infrastructure failures still use g_error (fatal). */
    g_test_set_nonfatal_assertions();
    clear_netmutex_env();
    if (nm_test_tls())
        nm_tls_client_env();
    init_slowdown();
    /* A server killed under a connection must surface as an errno from the
     * library, not kill the test program: hiredis writes with write(2). */
    signal(SIGPIPE, SIG_IGN);
}

int nm_test_finish(int run_result)
{
    int rc = netmutex_shutdown();

    /* EBUSY here means a test left a mutex held: a failure of its own,
     * reported through the exit status (the TAP driver shows it). */
    if (rc != 0) {
        g_printerr("netmutex_shutdown at exit: %s\n", nm_errname(rc));
        return run_result ? run_result : 1;
    }
    return run_result;
}

char *nm_test_name(const char *suffix)
{
    return g_strdup_printf("%s/%s", g_test_get_path(), suffix);
}

static const struct {
    const char *name;
    int type;
} mutex_types[] = {
    { "normal", NETMUTEX_NORMAL },
    { "errorcheck", NETMUTEX_ERRORCHECK },
    { "recursive", NETMUTEX_RECURSIVE },
    /* DEFAULT is NORMAL today; tested separately so a change shows up. */
    { "default", NETMUTEX_DEFAULT },
};

void nm_test_add_for_types(const char *path, GTestDataFunc fn)
{
    for (gsize i = 0; i < G_N_ELEMENTS(mutex_types); i++) {
        char *p = g_strdup_printf("%s/%s", path, mutex_types[i].name);
        g_test_add_data_func(p, GINT_TO_POINTER(mutex_types[i].type), fn);
        g_free(p);
    }
}

const char *nm_type_name(int type)
{
    for (gsize i = 0; i < G_N_ELEMENTS(mutex_types); i++)
        if (mutex_types[i].type == type)
            return mutex_types[i].name;
    return "(bad type)";
}

char *nm_mutex_init(netmutex_t *m, const char *suffix, int type,
                    unsigned int lease_ms)
{
    char *name = nm_test_name(suffix);
    netmutex_attr_t attr;

    nm_assert_rc(netmutex_attr_init(&attr), 0);
    nm_assert_rc(netmutex_attr_settype(&attr, type), 0);
    nm_assert_rc(netmutex_attr_setlease(&attr, lease_ms), 0);
    nm_assert_rc(netmutex_init(m, name, &attr), 0);
    nm_assert_rc(netmutex_attr_destroy(&attr), 0);
    return name;
}

/* ===================================================================== */
/* time                                                                   */
/* ===================================================================== */

/* Which sanitizer this program is built with (configure's --enable-asan
 * and --enable-tsan add the flags to every object, the tests' too). */
#if defined(__SANITIZE_THREAD__)
#define NM_BUILT_WITH_TSAN 1
#elif defined(__SANITIZE_ADDRESS__)
#define NM_BUILT_WITH_ASAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define NM_BUILT_WITH_TSAN 1
#elif __has_feature(address_sanitizer)
#define NM_BUILT_WITH_ASAN 1
#endif
#endif

/* Neither sanitizer's allocator survives a fork() made while another
 * thread allocates: the child inherits the allocator's lock held, and its
 * first malloc of that size class waits forever (seen under TSan: the
 * child's background thread stuck in the allocator's mutex, 1 run in 8). */
bool nm_fork_with_threads_is_safe(void)
{
#if defined(NM_BUILT_WITH_ASAN) || defined(NM_BUILT_WITH_TSAN)
    return false;
#else
    return true;
#endif
}

bool nm_cancel_in_poll_is_checkable(void)
{
#if defined(NM_BUILT_WITH_ASAN) || defined(NM_BUILT_WITH_TSAN)
    return false;
#else
    return true;
#endif
}

/* NETMUTEX_TEST_SLOWDOWN when set (CI sets it).  Otherwise a default for
 * the variant, so a developer's `make check-valgrind` or TSan build is not
 * flaky either: check-valgrind exports VALGRIND to the tests. */
static double default_slowdown(void)
{
    if (g_getenv("VALGRIND"))
        return 10;
#if defined(NM_BUILT_WITH_TSAN)
    return 5;
#elif defined(NM_BUILT_WITH_ASAN)
    return 2;
#else
    return 1;
#endif
}

/* Set once by nm_test_init, before any thread exists, and only read
 * afterwards (no lazy initialization: threads call nm_ms too). */
static double slowdown_factor = 1.0;

static void init_slowdown(void)
{
    const char *s = g_getenv("NETMUTEX_TEST_SLOWDOWN");
    double f = s ? g_ascii_strtod(s, NULL) : default_slowdown();

    slowdown_factor = f >= 1.0 ? f : 1.0;
}

double nm_slowdown(void)
{
    return slowdown_factor;
}

unsigned int nm_ms(unsigned int ms)
{
    return (unsigned int)(ms * nm_slowdown());
}

gint64 nmt_now_ms(void)
{
    return g_get_monotonic_time() / 1000;
}

void nm_deadline(struct timespec *ts, clockid_t clock, unsigned int ms)
{
    clock_gettime(clock, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

void nmt_sleep_ms(unsigned int ms)
{
    g_usleep((gulong)ms * 1000);
}

int nm_timespec_cmp(const struct timespec *a, const struct timespec *b)
{
    if (a->tv_sec != b->tv_sec)
        return a->tv_sec < b->tv_sec ? -1 : 1;
    if (a->tv_nsec != b->tv_nsec)
        return a->tv_nsec < b->tv_nsec ? -1 : 1;
    return 0;
}

static gint64 timespec_diff_us(const struct timespec *a, const struct timespec *b)
{
    return (gint64)(a->tv_sec - b->tv_sec) * 1000000 + (a->tv_nsec - b->tv_nsec) / 1000;
}

void nm_assert_timed_out_at(const struct timespec *returned,
                            const struct timespec *deadline,
                            unsigned int late_ms)
{
    gint64 after_us = timespec_diff_us(returned, deadline);

    if (nm_timespec_cmp(returned, deadline) < 0)
        g_error("ETIMEDOUT %" G_GINT64_FORMAT " us before the deadline", -after_us);
    if (after_us > (gint64)late_ms * 1000)
        g_error("ETIMEDOUT %" G_GINT64_FORMAT " us after the deadline", after_us);
}

/* ===================================================================== */
/* assertions                                                             */
/* ===================================================================== */

const char *nm_errname(int rc)
{
    const char *name = netmutex_errname(rc);
    return name ? name : "(other errno)";
}

void nm_assert_rc_failed(const char *file, int line, const char *func,
                         const char *expr, int got, int want)
{
    char *msg = g_strdup_printf("%s returned %s (%d), expected %s (%d)", expr,
                                nm_errname(got), got, nm_errname(want), want);
    g_assertion_message(G_LOG_DOMAIN, file, line, func, msg);
    g_free(msg);
}

void nm_test_cache_off(void)
{
    g_setenv("NETMUTEX_CACHE", "0", TRUE);
}

bool nm_is_token(const char *s)
{
    if (s == NULL || strlen(s) < 32)
        return false;
    for (int i = 0; i < 32; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    /* A lock key's value goes on with two flags and a space (lib.lua). */
    return s[32] == '\0' || (strchr("q-", s[32]) && s[33] && strchr("cki-", s[33]) &&
                              s[34] == ' ');
}
