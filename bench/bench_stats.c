/*
 * bench_stats.c -- time and statistics for nm_bench (see nm_bench.h).
 */
#include "ac_config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <hiredis/hiredis.h>

#include <netmutex.h>

#include "nm_bench.h"
#include "redis_server.h"

/* ===================================================================== */
/* time, statistics                                                       */
/* ===================================================================== */

int64_t nmb_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Sleeps, not spins: with 2 cores and several workers, a spinning holder
 * would steal the CPU its waiters and the server need. */
void nmb_sleep_us(long us)
{
    if (us <= 0)
        return;
    struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };
    while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
        ;
}

int nmb_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile (P in (0, 1]) of V[0..N), sorted ascending. */
double nmb_percentile(const double *v, size_t n, double p)
{
    if (n == 0)
        return NAN;
    size_t rank = (size_t)(p * (double)n);
    if ((double)rank < p * (double)n)
        rank++;
    return v[rank == 0 ? 0 : rank - 1];
}

double nmb_median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, nmb_cmp_double);
    return nmb_percentile(v, n, 0.5);
}

/* VmRSS of this process in kB, or -1. */
long nmb_vmrss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}
