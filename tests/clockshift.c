/*
 * clockshift.c -- an LD_PRELOAD library for the tests: it shifts the wall
 * clock of the process it is loaded into (a private redis-server, see
 * test_safety.c) by the whole seconds written in the file that
 * NM_CLOCKSHIFT_FILE names ("-600": ten minutes back), read again at most
 * every 10 ms, so a test can step a running server's clock back the way
 * NTP or a VM restore would.  gettimeofday, time and
 * clock_gettime(CLOCK_REALTIME*) are shifted; every other clock is not.
 *
 * Only system calls: the library runs before the server's allocator is
 * ready (which is where a general-purpose time faker gets into trouble),
 * so it neither allocates nor looks symbols up.  It is built without the
 * sanitizers of the test build (tests/Makefile.am): the server it is
 * loaded into is not instrumented.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define REREAD_NS 10000000LL

static long long offset_s;   /* atomic */
static long long read_at_ns; /* atomic: CLOCK_MONOTONIC of the last read */

static long long mono_ns(void)
{
    struct timespec ts;
    syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The file's signed number of seconds; 0 without a file. */
static long long read_offset(void)
{
    const char *path = getenv("NM_CLOCKSHIFT_FILE");
    char buf[32];
    long long v = 0;
    int neg = 0;
    int fd = path ? (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY) : -1;
    if (fd < 0)
        return 0;
    long n = syscall(SYS_read, fd, buf, sizeof buf - 1);
    syscall(SYS_close, fd);
    for (long i = 0; i < n; i++) {
        if (buf[i] == '-' && i == 0)
            neg = 1;
        else if (buf[i] >= '0' && buf[i] <= '9')
            v = v * 10 + (buf[i] - '0');
        else
            break;
    }
    return neg ? -v : v;
}

static long long shift_s(void)
{
    long long now = mono_ns(), at = __atomic_load_n(&read_at_ns, __ATOMIC_RELAXED);
    if (at == 0 || now - at > REREAD_NS) {
        __atomic_store_n(&offset_s, read_offset(), __ATOMIC_RELAXED);
        __atomic_store_n(&read_at_ns, now, __ATOMIC_RELAXED);
    }
    return __atomic_load_n(&offset_s, __ATOMIC_RELAXED);
}

int clock_gettime(clockid_t id, struct timespec *ts)
{
    if (syscall(SYS_clock_gettime, id, ts) != 0)
        return -1;
    if (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)
        ts->tv_sec += (time_t)shift_s();
    return 0;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
    struct timespec ts;
    (void)tz;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
        return -1;
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
    return 0;
}

time_t time(time_t *t)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (t)
        *t = ts.tv_sec;
    return ts.tv_sec;
}
