/*
 * clock.h -- time in milliseconds on the monotonic clock.
 *
 * Every deadline inside the library is a monotonic millisecond count, so a
 * wall-clock step (NTP, an admin) can neither stretch nor cut a wait short.
 * Caller deadlines on CLOCK_REALTIME are converted once, at entry.
 */
#ifndef NM_CLOCK_H
#define NM_CLOCK_H

#include <stdint.h>
#include <time.h>

#define NM_FOREVER INT64_MAX

int64_t nm_now_ms(void);
/* The same in microseconds. */
int64_t nm_now_us(void);

/* Converts an absolute time on CLOCKID (CLOCK_REALTIME or CLOCK_MONOTONIC)
 * into a monotonic deadline.  EINVAL for another clock or a bad tv_nsec. */
int nm_deadline_from_abstime(clockid_t clockid, const struct timespec *abstime,
                             int64_t *deadline);

/* When the answer to a request sent now is due: BOUND_MS from now (the I/O
 * timeout), but never much past the caller's DEADLINE.  A request made at
 * the deadline still gets a few milliseconds for its answer: giving up
 * mid-reply would cost the connection. */
int64_t nm_request_deadline(int64_t bound_ms, int64_t deadline);

/* Milliseconds left until DEADLINE, never negative. */
int64_t nm_remaining_ms(int64_t deadline);

/* The timespec (CLOCK_MONOTONIC) for DEADLINE, for pthread_cond_timedwait. */
struct timespec nm_deadline_timespec(int64_t deadline);

/* Initializes CV to measure timed waits on CLOCK_MONOTONIC. */
#include <pthread.h>
void nm_cond_init_monotonic(pthread_cond_t *cv);

/* Sleeps MS milliseconds, resuming after signals. */
void nm_sleep_ms(int64_t ms);

#endif /* NM_CLOCK_H */
