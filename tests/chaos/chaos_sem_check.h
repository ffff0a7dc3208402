/*
 * chaos_sem_check.h -- the semaphore families' checker: pure functions
 * over the log of one netmutex_sem_t of PERMITS permits (records as
 * chaos_log.h describes them, mode 's': op 'l' netmutex_sem_wait, 'T'
 * netmutex_sem_clockwait, 't' netmutex_sem_trywait; the post is the
 * unlock), so that hand-made logs test it (chaos_sem_selftest.c).
 *
 * Valid interval: a permit is a lease of its own, renewed by the
 * background thread and reported lost as a read-write lock's hold is, so
 * its valid interval is a rwlock hold's (chaos_rw_check.h,
 * chaos_rw_valid_end): from the wait's return to the earliest of the
 * post's call, the lost-hold notice, the driver's SIGKILL of its process
 * and the start of a SIGSTOP of its process; none at all when a SIGSTOP
 * of its process overlapped the wait, or when the hold never ended.
 * Intervals are compared strictly: two that only touch do not overlap.
 *
 * What fails a run:
 *   - too many   at some moment more than PERMITS valid intervals are
 *                open (one "overlap" per hold whose start makes them
 *                PERMITS + 1 or more, naming it and the earliest open
 *                hold); between holds on either side of an empty restart
 *                of the single server it is the documented limit
 *                (the server forgot the permits), reported, not failed;
 *   - everything chaos_check() fails over the calls: a bound overrun
 *     (trywait: the I/O timeout + slack, clockwait: its deadline + slack,
 *     post: the unlock bound), a hang, a result the API does not allow
 *     (wait failing, trywait other than 0 or EAGAIN, clockwait other than
 *     0 or ETIMEDOUT, post other than 0, ENOLCK or EIO); a record whose
 *     call was never made (call_ns 0) by a process the driver killed is
 *     not a hang: the kill came between the worker taking the record and
 *     the call.
 * Counted for the summary (chaos_sem_count): the most valid holders open
 * at once, how many holds began with every permit then held (PERMITS
 * valid intervals open, theirs included) and for how long all were held:
 * the proof that the permits were really used, not just never exceeded.
 */
#ifndef CHAOS_SEM_CHECK_H
#define CHAOS_SEM_CHECK_H

#include <stddef.h>

#include "chaos_check.h"

/* Checks the N records of one semaphore of PERMITS permits against the
 * faults, into OUT (zeroed, or cleared with chaos_report_clear); the
 * records the violations name are indices into RECS (print them with
 * chaos_rw_view's copy, whose promise_ns is each hold's valid end). */
void chaos_sem_check(const ChaosRec *recs, size_t n, const ChaosFault *faults, size_t nfaults,
                     unsigned int permits, const ChaosParams *p, ChaosReport *out);

typedef struct ChaosSemCounts {
    size_t calls, holds, valid;  /* wait calls, permits taken, with a valid interval */
    size_t max_holders;          /* valid intervals open at once, at most */
    size_t full;                 /* holds that began with all PERMITS held */
    int64_t full_ns;             /* how long all PERMITS were held, in all */
} ChaosSemCounts;

void chaos_sem_count(const ChaosRec *recs, size_t n, const ChaosFault *faults, size_t nfaults,
                     unsigned int permits, ChaosSemCounts *out);

#endif /* CHAOS_SEM_CHECK_H */
