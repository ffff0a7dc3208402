/*
 * fixture_case.c -- see fixture.h: a time limit on every test case.
 *
 * The fixture's assertions are not fatal (nm_test_init), so one failed
 * check lets the rest of the program run; but a case that failed half way
 * may then block for ever (a thread it waits for never got its go, an
 * unlock it expected to succeed did not).  Without a limit such a program
 * keeps its redis-servers and the whole `make check` waiting until CI's
 * own limit kills everything and says nothing of where it stuck.
 *
 * So every case registered through the fixture runs under an interval
 * timer: SIGALRM, when the case has run NETMUTEX_TEST_CASE_SECONDS
 * (default CASE_SECONDS, both scaled by the slowdown), names the case on
 * both streams and aborts; redis_server.h's SIGABRT handler removes the
 * servers' directories and the servers die with the program
 * (PR_SET_PDEATHSIG).  A timer, not a thread: a guard thread would make
 * every program multi-threaded before its first fork(), which
 * ThreadSanitizer does not support (fixture_server.c).
 */
#include "ac_config.h"

#include "fixture.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

/* The registrations below are GLib's own. */
#undef g_test_add_func
#undef g_test_add_data_func

/* Longer than any case of the suite takes on a loaded machine (the
 * longest, a Sentinel fail-over, takes about a minute), short enough that
 * a stuck case is reported well within CI's limit. */
#define CASE_SECONDS 180u

typedef struct {
    GTestFunc fn;          /* one of the two */
    GTestDataFunc data_fn;
    gconstpointer data;
    char *path;
} nm_case_t;

static unsigned int extra_s;      /* nm_test_case_allow's, unscaled */
static char stuck_msg[512];       /* written by the handler */
static size_t stuck_len;

static unsigned int case_limit_s(void)
{
    const char *s = g_getenv("NETMUTEX_TEST_CASE_SECONDS");
    double base = s ? g_ascii_strtod(s, NULL) : (double)CASE_SECONDS;

    if (base <= 0)
        return 0; /* 0: no limit (a developer's debugger session) */
    double limit = (base + extra_s) * nm_slowdown();
    return limit < 1 ? 1 : limit > 1e6 ? 1000000u : (unsigned int)limit;
}

void nm_test_case_allow(unsigned int seconds)
{
    extra_s = seconds;
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

/* Async-signal-safe: write(2) and abort(3) only. */
static void on_stuck(int sig)
{
    (void)sig;
    write_all(STDERR_FILENO, stuck_msg, stuck_len);
    write_all(STDOUT_FILENO, stuck_msg, stuck_len);
    abort();
}

static void arm(const nm_case_t *c, unsigned int limit_s)
{
    struct itimerval it = { { 0, 0 }, { (time_t)limit_s, 0 } };
    struct sigaction sa;
    int n = snprintf(stuck_msg, sizeof stuck_msg,
                     "Bail out! %s still running after %u s "
                     "(NETMUTEX_TEST_CASE_SECONDS; 0 turns the limit off)\n",
                     c->path, limit_s);

    stuck_len = n < 0 ? 0 : (size_t)n < sizeof stuck_msg ? (size_t)n : sizeof stuck_msg - 1;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stuck;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    setitimer(ITIMER_REAL, &it, NULL);
}

static void disarm(void)
{
    struct itimerval off = { { 0, 0 }, { 0, 0 } };

    setitimer(ITIMER_REAL, &off, NULL);
}

static void run_case(gconstpointer p)
{
    const nm_case_t *c = p;
    unsigned int limit_s = case_limit_s();

    if (limit_s)
        arm(c, limit_s);
    if (c->fn)
        c->fn();
    else
        c->data_fn(c->data);
    if (limit_s)
        disarm();
}

static void free_case(gpointer p)
{
    nm_case_t *c = p;

    g_free(c->path);
    g_free(c);
}

/* Every case registered, freed at exit: GLib frees a case's data only
 * after running it, so a program run with -p (a selection, tests/sel/)
 * would leave the others' to valgrind's leak check. */
static GPtrArray *cases;

static void free_cases(void)
{
    g_ptr_array_free(cases, TRUE);
    cases = NULL;
}

static void add_case(const char *path, GTestFunc fn, GTestDataFunc data_fn,
                     gconstpointer data)
{
    nm_case_t *c = g_new0(nm_case_t, 1);

    c->fn = fn;
    c->data_fn = data_fn;
    c->data = data;
    c->path = g_strdup(path);
    if (!cases) {
        cases = g_ptr_array_new_with_free_func(free_case);
        atexit(free_cases);
    }
    g_ptr_array_add(cases, c);
    g_test_add_data_func(path, c, run_case);
}

void nm_test_add_func(const char *path, GTestFunc fn)
{
    add_case(path, fn, NULL, NULL);
}

void nm_test_add_data_func(const char *path, gconstpointer data, GTestDataFunc fn)
{
    add_case(path, NULL, fn, data);
}
