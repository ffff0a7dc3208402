/*
 * unit_clock.c -- monotonic milliseconds and deadline arithmetic
 * (src/base/clock.c), without a server.  Bounds that depend on the time are
 * checked between readings taken before and after the call, never as
 * speeds: the machine may be slow.
 */
#include "ac_config.h"

#include <errno.h>
#include <glib.h>
#include <time.h>

#include "nm.h"
#include "clock.h"

static int64_t ts_ns(const struct timespec *ts)
{
    return (int64_t)ts->tv_sec * 1000000000LL + ts->tv_nsec;
}

static void test_now(void)
{
    int64_t ms = nm_now_ms(), us = nm_now_us(), ms2 = nm_now_ms();
    g_assert_cmpint(ms, >, 0);
    g_assert_cmpint(ms2, >=, ms);
    g_assert_cmpint(us / 1000, >=, ms);
    g_assert_cmpint(us / 1000, <=, ms2);
    nm_sleep_ms(2);
    g_assert_cmpint(nm_now_ms(), >=, ms2 + 2);
    nm_sleep_ms(0); /* returns at once */
}

static void test_abstime_invalid(void)
{
    struct timespec ts = { 1, 0 };
    int64_t d = 12345;

    g_assert_cmpint(nm_deadline_from_abstime(CLOCK_REALTIME, NULL, &d), ==, EINVAL);
    ts.tv_nsec = -1;
    g_assert_cmpint(nm_deadline_from_abstime(CLOCK_REALTIME, &ts, &d), ==, EINVAL);
    ts.tv_nsec = 1000000000L;
    g_assert_cmpint(nm_deadline_from_abstime(CLOCK_MONOTONIC, &ts, &d), ==, EINVAL);
    ts.tv_nsec = 0;
    g_assert_cmpint(nm_deadline_from_abstime(CLOCK_PROCESS_CPUTIME_ID, &ts, &d), ==, EINVAL);
    g_assert_cmpint(nm_deadline_from_abstime(CLOCK_BOOTTIME, &ts, &d), ==, EINVAL);
    g_assert_cmpint(d, ==, 12345); /* untouched */
}

/* A time in the past is a deadline that has passed already: now. */
static void test_abstime_past(void)
{
    struct timespec ts = { 0, 999999999L };
    int64_t before = nm_now_ms(), d;
    g_assert_cmpint(nm_deadline_from_abstime(CLOCK_REALTIME, &ts, &d), ==, 0);
    g_assert_cmpint(d, >=, before);
    g_assert_cmpint(d, <=, nm_now_ms() + 1);
    g_assert_cmpint(nm_remaining_ms(d - 1), ==, 0);
}

/* A time before the epoch (or before boot) has passed as well, however
 * far back: it must not wrap around into a far future. */
static void test_abstime_negative(void)
{
    static const time_t secs[] = { -1, -86400, -9223372036LL, -9223372037LL, INT64_MIN / 2,
                                   INT64_MIN };
    for (size_t i = 0; i < G_N_ELEMENTS(secs); i++) {
        struct timespec ts = { secs[i], 0 };
        int64_t before = nm_now_ms(), d;
        g_test_message("tv_sec %lld", (long long)secs[i]);
        g_assert_cmpint(nm_deadline_from_abstime(CLOCK_REALTIME, &ts, &d), ==, 0);
        g_assert_cmpint(d, >=, before);
        g_assert_cmpint(d, <=, nm_now_ms() + 1);
        g_assert_cmpint(nm_deadline_from_abstime(CLOCK_MONOTONIC, &ts, &d), ==, 0);
        g_assert_cmpint(d, >=, before);
        g_assert_cmpint(d, <=, nm_now_ms() + 1);
    }
}

/* A time too far to count in nanoseconds waits for ever. */
static void test_abstime_far(void)
{
    struct timespec ts = { (time_t)(INT64_MAX / 1000000000LL), 0 };
    int64_t d = 0;
    g_assert_cmpint(nm_deadline_from_abstime(CLOCK_REALTIME, &ts, &d), ==, 0);
    g_assert_cmpint(d, ==, NM_FOREVER);
    d = 0;
    g_assert_cmpint(nm_deadline_from_abstime(CLOCK_MONOTONIC, &ts, &d), ==, 0);
    g_assert_cmpint(d, ==, NM_FOREVER);
}

/* Rounded up: a monotonic deadline never falls before the caller's time,
 * and is within a millisecond (plus the time the call took) after it. */
static void test_abstime_rounding(void)
{
    for (long ns = 1; ns < 1000000000L; ns = ns * 7 + 3) {
        struct timespec now, ts;
        clock_gettime(CLOCK_MONOTONIC, &now);
        int64_t target = ts_ns(&now) + 1500000000LL + ns; /* 1.5 s and a bit ahead */
        ts.tv_sec = (time_t)(target / 1000000000LL);
        ts.tv_nsec = (long)(target % 1000000000LL);
        int64_t d;
        g_assert_cmpint(nm_deadline_from_abstime(CLOCK_MONOTONIC, &ts, &d), ==, 0);
        g_assert_cmpint(d * 1000000LL, >=, target);
        g_assert_cmpint(d, <=, target / 1000000LL + 2 + (nm_now_ms() - ts_ns(&now) / 1000000LL));
    }
}

/* CLOCK_REALTIME times become the same distance on the monotonic clock. */
static void test_abstime_realtime(void)
{
    struct timespec real;
    clock_gettime(CLOCK_REALTIME, &real);
    int64_t before = nm_now_ms();
    real.tv_sec += 10;
    int64_t d;
    g_assert_cmpint(nm_deadline_from_abstime(CLOCK_REALTIME, &real, &d), ==, 0);
    int64_t after = nm_now_ms();
    g_assert_cmpint(d, >=, before + 10000);
    g_assert_cmpint(d, <=, after + 10001);
    int64_t left = nm_remaining_ms(d);
    g_assert_cmpint(left, >, 0);
    g_assert_cmpint(left, <=, 10001);
}

static void test_remaining(void)
{
    g_assert_cmpint(nm_remaining_ms(NM_FOREVER), ==, NM_FOREVER);
    g_assert_cmpint(nm_remaining_ms(0), ==, 0);
    int64_t before = nm_now_ms();
    int64_t left = nm_remaining_ms(before + 60000);
    g_assert_cmpint(left, <=, 60000);
    g_assert_cmpint(left, >=, 60000 - (nm_now_ms() - before));
}

/* The bound, cut to the caller's deadline, but never below a few ms. */
static void test_request_deadline(void)
{
    int64_t before = nm_now_ms();
    int64_t a = nm_request_deadline(1000, NM_FOREVER);
    int64_t b = nm_request_deadline(1000, 0);            /* deadline passed */
    int64_t c = nm_request_deadline(5, 0);               /* bound below the floor */
    int64_t d = nm_request_deadline(1000, before + 300); /* deadline first */
    int64_t e = nm_request_deadline(1000, before + 5000);
    int64_t after = nm_now_ms();

    g_assert_cmpint(a, >=, before + 1000);
    g_assert_cmpint(a, <=, after + 1000);
    g_assert_cmpint(b, >=, before + 10);
    g_assert_cmpint(b, <=, after + 10);
    g_assert_cmpint(c, >=, before + 5);
    g_assert_cmpint(c, <=, after + 5);
    g_assert_cmpint(d, ==, before + 300);
    g_assert_cmpint(e, >=, before + 1000);
    g_assert_cmpint(e, <=, after + 1000);
}

static void test_deadline_timespec(void)
{
    struct timespec ts = nm_deadline_timespec(1234);
    g_assert_cmpint(ts.tv_sec, ==, 1);
    g_assert_cmpint(ts.tv_nsec, ==, 234000000L);
    ts = nm_deadline_timespec(0);
    g_assert_cmpint(ts.tv_sec, ==, 0);
    g_assert_cmpint(ts.tv_nsec, ==, 0);
    ts = nm_deadline_timespec(999);
    g_assert_cmpint(ts.tv_sec, ==, 0);
    g_assert_cmpint(ts.tv_nsec, ==, 999000000L);
    ts = nm_deadline_timespec(NM_FOREVER);
    g_assert_cmpint(ts.tv_sec, ==, (time_t)(INT64_MAX / 1000));
    g_assert_cmpint(ts.tv_nsec, ==, (INT64_MAX % 1000) * 1000000L);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/unit/clock/now", test_now);
    g_test_add_func("/unit/clock/abstime/invalid", test_abstime_invalid);
    g_test_add_func("/unit/clock/abstime/past", test_abstime_past);
    g_test_add_func("/unit/clock/abstime/far", test_abstime_far);
    g_test_add_func("/unit/clock/abstime/negative", test_abstime_negative);
    g_test_add_func("/unit/clock/abstime/rounding", test_abstime_rounding);
    g_test_add_func("/unit/clock/abstime/realtime", test_abstime_realtime);
    g_test_add_func("/unit/clock/remaining", test_remaining);
    g_test_add_func("/unit/clock/request-deadline", test_request_deadline);
    g_test_add_func("/unit/clock/deadline-timespec", test_deadline_timespec);
    return g_test_run();
}
