/*
 * chaos_cond_check.h -- the condition families' checker: pure functions
 * over the log of one ring (one netmutex and the netmutex_cond_t it
 * guards; records as chaos_log.h describes them for these families), so
 * that hand-made logs test it (chaos_cond_selftest.c).  chaos_check()
 * judges the same records as holds of the mutex (overlaps, fences, lost
 * updates, hangs, results); this adds what is about the condition.
 *
 * Terms, all read off the log:
 *   signal S      a record whose netmutex_cond_signal (or _broadcast)
 *                 returned 0 and was called inside the record's valid
 *                 interval (chaos_check.h): the signaller held the mutex.
 *                 Its hold began at the record's start (the lock call's
 *                 or the wait's return), it was called at cond_ns and
 *                 returned at cond_end_ns.  Others are not counted: a
 *                 signal that failed (EAGAIN: the server was unreachable)
 *                 or was made by a stale holder promises nothing;
 *   registered    wait W was called inside the valid interval of the
 *                 segment it was called in (prev): it registered while it
 *                 held the mutex, so a signaller whose hold began after
 *                 W's call finds it (the mutex's exclusion orders them);
 *   waiting at S  W registered, and called before S's hold began;
 *   woken         a wait that returned 0, or whose process was killed
 *                 while it waited (it may have consumed a signal before
 *                 it died); it may have been woken by any signal that it
 *                 was waiting at and that was called before it returned
 *                 (or died);
 *   timed out     a timed wait that returned ETIMEDOUT;
 *   live          the waiter's process was never stopped (SIGSTOP)
 *                 during the wait.
 *
 * Lost wake-up.  A timed-out, live wait W that was waiting at a signal S
 * which returned before W's deadline "needed" S: had S reached W, or any
 * waiter older than W, W or that one would have returned 0.  A broadcast
 * S that W needed is a lost wake-up at once.  The signals needed by some
 * wait must each be paired with a distinct woken wait that was waiting
 * at it (the checker finds the largest such pairing, earliest return
 * first, which is optimal for these intervals); every needed signal left
 * unpaired is a lost wake-up.  Excused (counted, not failed), as the
 * documented faults that may delay a signal:
 *   - a SIGSTOP or SIGKILL of another process that began before W's
 *     deadline, less than a lease (+ redeliver_ns) before it: the signal
 *     may have chosen a waiter of that process, and goes on to the next
 *     live waiter once that waiter's lease ran out;
 *   - DEBUG SLEEP or the blackholing proxy, from its beginning to two
 *     leases (+ redeliver_ns) after its end: waiters (W among them) may
 *     have lost their lease, be passed over, and wake within a lease;
 *   - an empty restart, in the same window, reported as the documented
 *     limit it is (the server forgot the waiters).
 *
 * Also failed:
 *   unheld        a wait returned, said it held the mutex again, and then
 *                 netmutex_fence, netmutex_validity or netmutex_unlock
 *                 said EPERM (not held by the caller), or the next wait
 *                 was refused with EPERM;
 *   bound         a timed wait that returned ETIMEDOUT more than early_ns
 *                 before its deadline, or returned more than
 *                 timed_slack_ns after its deadline and more than
 *                 relock_bound_ns after the latest of: the release of the
 *                 mutex by any segment of another thread that began
 *                 before the wait returned (one ended by a wait: at that
 *                 wait's call, the bound covering its registration), and
 *                 a lease after any fault that began before it returned
 *                 (skipped when its process was stopped meanwhile): the
 *                 wait must take a free mutex again as a lock call must,
 *                 within the mutex families' idle bound; a signal or
 *                 broadcast
 *                 that took longer than unlock_bound_ns;
 *   result        a signal or broadcast that failed with anything but
 *                 EAGAIN.
 */
#ifndef CHAOS_COND_CHECK_H
#define CHAOS_COND_CHECK_H

#include <stddef.h>

#include "chaos_check.h"

/* Checks the N records of one ring against the faults, adding to OUT
 * (which chaos_check may have filled for the same records first). */
void chaos_cond_check(const ChaosRec *recs, size_t n, const ChaosFault *faults,
                      size_t nfaults, const ChaosParams *p, ChaosReport *out);

#endif /* CHAOS_COND_CHECK_H */
