/* clock.c -- monotonic milliseconds and deadline conversions. */
#include "nm.h"

#include <errno.h>

#include "clock.h"

static int64_t timespec_ms(const struct timespec *ts)
{
    return (int64_t)ts->tv_sec * 1000 + ts->tv_nsec / 1000000;
}

int64_t nm_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t nm_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return timespec_ms(&ts);
}

static int64_t timespec_ns(const struct timespec *ts)
{
    return (int64_t)ts->tv_sec * 1000000000LL + ts->tv_nsec;
}

int nm_deadline_from_abstime(clockid_t clockid, const struct timespec *abstime,
                             int64_t *deadline)
{
    struct timespec now, mono;

    if (abstime == NULL || abstime->tv_nsec < 0 || abstime->tv_nsec >= 1000000000L)
        return EINVAL;
    if (clockid != CLOCK_REALTIME && clockid != CLOCK_MONOTONIC)
        return EINVAL;
    if (abstime->tv_sec > INT64_MAX / 1000000000LL - 1) {
        *deadline = NM_FOREVER;
        return 0;
    }
    /* Before the epoch (or boot): passed.  In nanoseconds, a time far
     * enough back would wrap around into the far future. */
    if (abstime->tv_sec < 0) {
        *deadline = nm_now_ms();
        return 0;
    }
    clock_gettime(clockid, &now);
    clock_gettime(CLOCK_MONOTONIC, &mono);
    int64_t left_ns = timespec_ns(abstime) - timespec_ns(&now);
    /* Rounded up to whole milliseconds: waking a little late is allowed,
     * returning ETIMEDOUT before the caller's deadline is not. */
    int64_t end_ns = timespec_ns(&mono) + (left_ns > 0 ? left_ns : 0);
    *deadline = (end_ns + 999999) / 1000000;
    return 0;
}

#define MIN_REPLY_WAIT_MS 10

int64_t nm_request_deadline(int64_t bound_ms, int64_t deadline)
{
    int64_t now = nm_now_ms();
    int64_t floor = now + NM_MIN(bound_ms, MIN_REPLY_WAIT_MS);
    return NM_MIN(now + bound_ms, NM_MAX(deadline, floor));
}

int64_t nm_remaining_ms(int64_t deadline)
{
    if (deadline == NM_FOREVER)
        return NM_FOREVER;
    int64_t left = deadline - nm_now_ms();
    return left > 0 ? left : 0;
}

struct timespec nm_deadline_timespec(int64_t deadline)
{
    struct timespec ts;
    ts.tv_sec = (time_t)(deadline / 1000);
    ts.tv_nsec = (long)(deadline % 1000) * 1000000L;
    return ts;
}

void nm_sleep_ms(int64_t ms)
{
    struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

void nm_cond_init_monotonic(pthread_cond_t *cv)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &ca);
    pthread_condattr_destroy(&ca);
}
