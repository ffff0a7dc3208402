/*
 * nm_wrap_bench.c -- what the link route costs a mutex it does not select.
 *
 *   nm_wrap_bench [-n ITERATIONS] [-r ROUNDS]
 *
 * The program is linked with netmutex-wrap's --wrap list, so its
 * pthread_mutex_lock/unlock calls go through __wrap_pthread_mutex_*; the
 * baseline calls __real_pthread_mutex_* directly, i.e. the C library.
 * Each scenario times ROUNDS (default 15) rounds of ITERATIONS (default
 * 2,000,000) uncontended lock+unlock pairs on one thread, plain and
 * wrapped rounds interleaved so that drift hits both alike, and reports
 * the median ns per pair of each and their ratio.  No Redis is involved:
 * an unselected mutex never leaves the process.
 *
 *   wrap_unselected_none  nothing is selected: the wrapper's NULL check,
 *                         once-check and an empty-table test;
 *   wrap_unselected_some  another mutex is registered, so every call also
 *                         probes the selection table.
 *
 * OUTPUT.  One JSON line per scenario: "scenario", "iterations", "rounds",
 * "plain_ns", "wrapped_ns" (medians, per lock+unlock pair), "ratio"
 * (wrapped / plain) and "overhead_ns" (wrapped - plain).  Exit status 0,
 * 1 if a call failed, 2 for a usage error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NETMUTEX_PTHREAD_DECLARE_ONLY
#include <netmutex/pthread.h>

int __real_pthread_mutex_lock(pthread_mutex_t *m);
int __real_pthread_mutex_unlock(pthread_mutex_t *m);

#define MAX_ROUNDS 101

typedef int (*mutex_fn)(pthread_mutex_t *);

static pthread_mutex_t target = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t other = PTHREAD_MUTEX_INITIALIZER;

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* ns per lock+unlock pair over N pairs; a negative value if a call failed.
 * The calls go through pointers the compiler cannot see through, for the
 * plain and the wrapped loop alike. */
static double time_pairs(mutex_fn lock, mutex_fn unlock, long n)
{
    int failed = 0;
    double start = now_ns();
    for (long i = 0; i < n; i++) {
        failed |= lock(&target);
        failed |= unlock(&target);
    }
    double ns = (now_ns() - start) / (double)n;
    return failed ? -1.0 : ns;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int run(const char *scenario, long n, int rounds)
{
    static mutex_fn volatile plain_lock = __real_pthread_mutex_lock;
    static mutex_fn volatile plain_unlock = __real_pthread_mutex_unlock;
    static mutex_fn volatile wrapped_lock = pthread_mutex_lock;
    static mutex_fn volatile wrapped_unlock = pthread_mutex_unlock;
    double plain[MAX_ROUNDS], wrapped[MAX_ROUNDS];

    time_pairs(wrapped_lock, wrapped_unlock, n / 10);        /* warm-up */
    for (int r = 0; r < rounds; r++) {
        plain[r] = time_pairs(plain_lock, plain_unlock, n);
        wrapped[r] = time_pairs(wrapped_lock, wrapped_unlock, n);
        if (plain[r] < 0 || wrapped[r] < 0) {
            fprintf(stderr, "nm_wrap_bench: %s: a lock call failed\n", scenario);
            return 1;
        }
    }
    double p = median(plain, rounds), w = median(wrapped, rounds);
    printf("{\"scenario\": \"%s\", \"iterations\": %ld, \"rounds\": %d, "
           "\"plain_ns\": %.2f, \"wrapped_ns\": %.2f, \"ratio\": %.3f, "
           "\"overhead_ns\": %.2f}\n",
           scenario, n, rounds, p, w, w / p, w - p);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    long n = 2000000;
    int rounds = 15, opt, err;

    while ((opt = getopt(argc, argv, "n:r:")) != -1) {
        if (opt == 'n')
            n = atol(optarg);
        else if (opt == 'r')
            rounds = atoi(optarg);
        else
            n = 0;
    }
    if (n <= 0 || rounds <= 0 || rounds > MAX_ROUNDS) {
        fprintf(stderr, "usage: nm_wrap_bench [-n ITERATIONS] [-r ROUNDS (1-%d)]\n",
                MAX_ROUNDS);
        return 2;
    }
    /* An inherited selection would change what is measured. */
    unsetenv("NETMUTEX_MUTEXES");
    if (run("wrap_unselected_none", n, rounds))
        return 1;
    if ((err = netmutex_wrap_register(&other, "nm_wrap_bench:other")) != 0) {
        fprintf(stderr, "nm_wrap_bench: netmutex_wrap_register: %s\n", strerror(err));
        return 1;
    }
    return run("wrap_unselected_some", n, rounds);
}
