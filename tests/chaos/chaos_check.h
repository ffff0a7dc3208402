/*
 * chaos_check.h -- the chaos suite's checker: pure functions over a hold
 * log (records and faults, see chaos_log.h), so that hand-made logs can
 * test it (chaos_selftest.c).
 *
 * A hold is a record whose lock call returned 0 or EOWNERDEAD, or, in the
 * condition families, whose wait returned with the mutex held again
 * (anything but EINVAL, EPERM and ENOTRECOVERABLE).  Its valid
 * interval runs from the call's return to the earliest of
 *   - the start of its unlock call,
 *   - the lost-lease notice (the callback's time),
 *   - the end of the last promise netmutex_validity made for it
 *     (the time read just before that call + ms_left, when ms_left > 0:
 *     "0 ms left" means the hold is no longer safe, which promises nothing).
 * A hold without any promise (validity said ENOLCK or 0 at once) has no valid
 * interval: the library never claimed it past its return, and a process
 * that stalls between the grant and the return is exactly what a lease
 * cannot prevent.  A worker killed while holding simply has no unlock: its
 * interval ends at its promise.  Intervals are compared strictly: two
 * intervals that only touch do not overlap.
 *
 * What fails a run (each "violation", printed with the holds involved):
 *   overlap       two valid intervals of different threads intersect;
 *   fence order   a valid hold that starts after another valid hold has a
 *                 smaller fence, or the same fence in another process (equal
 *                 fences are a cohort hand-off only inside one process);
 *   lost update   two holds read the same counter value, both with their
 *                 read-modify-write inside their valid intervals (a stale
 *                 holder losing an update is what fences are for: counted,
 *                 not failed);
 *   EOWNERDEAD    missed: the acquisition right after a holder killed
 *                 while validly holding (fence + 1, started after the kill)
 *                 did not get it; spurious: it was returned although the
 *                 previous acquisition (fence - 1, or the previous hand-off
 *                 of the same fence) ended in unlocks that all returned 0.
 *                 Not judged when the truth is ambiguous: a server restart
 *                 in between, a fence gap (an acquisition nobody logged: a
 *                 worker killed inside lock, a failed quorum round), an
 *                 unlock that returned ENOLCK or EIO, a lost lease; nor for
 *                 a mutex that is not robust (non_robust), which may never
 *                 return EOWNERDEAD at all: there it is a "result";
 *   bound         trylock took longer than try_bound, unlock longer than
 *                 unlock_bound, timedlock returned more than timed_slack
 *                 after its deadline, or ETIMEDOUT came before the deadline
 *                 (calls of a process that was SIGSTOPped meanwhile are not
 *                 judged);
 *   hang          a call that never returned (and whose process was not
 *                 killed by the driver);
 *   result        a result the API does not allow there (lock failing,
 *                 EOWNERDEAD from a mutex that is not robust,
 *                 unlock EPERM, fence or consistent failing,
 *                 ENOTRECOVERABLE although every EOWNERDEAD was repaired);
 *   idle          (only with idle_bound set) after an unlock that returned
 *                 0 nobody got the lock for idle_bound although a lock or
 *                 timedlock call was waiting all that time; the time counts
 *                 from the release, or from keep_ns after the end of the
 *                 last fault that may rightly keep the lock (anything but
 *                 the kill of a waiter that had not been granted it).
 *
 * Counted, not judged: a cached relock, a hold whose lock call began after
 * the previous hold (by start) had returned from its unlock, in the same
 * process and with the same fence, while no other thread of that process
 * was in a lock call during that unlock.  Every acquisition from the
 * server has a fence of its own (the server's clock), and an unlock hands
 * the lease only to a thread of its process that is then waiting (which
 * may give up right after, leaving the lease to the next local caller: so
 * such unlocks are left out), so only a lease that outlived its unlock
 * with no taker -- a lease kept cached -- gives one.  The suite uses it to
 * tell that caching was exercised (and that a robust mutex never is).
 *
 * Documented limit: a single server that restarts empty forgets the lock,
 * so an overlap (or lost update) between a hold that started before an
 * empty restart was over and one that started after it had begun (the
 * server loses its data somewhere in between) is reported as
 * "documented limit: empty restart" and does not fail the run.  Fences
 * get no such excuse.
 */
#ifndef CHAOS_CHECK_H
#define CHAOS_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "chaos_log.h"

typedef struct ChaosParams {
    int64_t try_bound_ns;    /* trylock */
    int64_t unlock_bound_ns; /* unlock */
    int64_t timed_slack_ns;  /* timedlock, past its deadline */
    int64_t early_ns;        /* ETIMEDOUT this much before the deadline is wrong */
    int64_t idle_bound_ns;   /* 0: no idle check */
    int64_t keep_ns;         /* how long after a fault the lock may be kept */
    bool non_robust;         /* the mutex is not robust: EOWNERDEAD is never
                                right, so it is never expected either */
    /* Condition families (chaos_cond_check.h). */
    int64_t lease_ns;        /* the waiters' and holders' lease */
    int64_t relock_bound_ns; /* a free mutex retaken by a wait */
    int64_t redeliver_ns;    /* slack on top of the re-delivery bounds */
} ChaosParams;

enum chaos_violation_kind {
    CV_OVERLAP,
    CV_FENCE_ORDER,
    CV_LOST_UPDATE,
    CV_MISSED_OWNERDEAD,
    CV_SPURIOUS_OWNERDEAD,
    CV_BOUND,
    CV_HANG,
    CV_RESULT,
    CV_IDLE,
    CV_LOST_WAKEUP, /* condition families: see chaos_cond_check.h */
    CV_UNHELD,
    CV_NKINDS
};

typedef struct ChaosViolation {
    int kind;       /* enum chaos_violation_kind */
    bool limit;     /* a documented limit: reported, not failed */
    int32_t a, b;   /* records involved (b: -1 when only one) */
    int64_t amount; /* overlap or overrun in ns, idle time, ... */
    const char *why;
} ChaosViolation;

typedef struct ChaosStats {
    size_t calls, holds, valid, ownerdead, lost, rejected, stale_lost_updates;
    size_t killed_holding, unlock_enolck, unlock_eio;
    size_t cached_relocks; /* see "cached relock" above */
    /* Condition families (chaos_cond_check.h): signals (and broadcasts)
     * that returned 0 within a valid hold, relays among them, those that
     * found a waiter registered (by the log), the judged ones; waits, timed
     * ones, how they ended; timed-out waits judged, and excused by a
     * fault. */
    size_t signals, broadcasts, relays, to_waiters, signal_failed;
    size_t waits, timed_waits, wakes, timeouts, wait_enolck, killed_waiting;
    size_t timeouts_judged, timeouts_excused, needy_signals;
} ChaosStats;

typedef struct ChaosReport {
    ChaosViolation *v; /* the first CHAOS_REPORT_KEEP of them */
    size_t nv;
    size_t kept_limits;       /* documented-limit cases among them */
    size_t count[CV_NKINDS];  /* failures per kind (all of them) */
    size_t limits[CV_NKINDS]; /* documented-limit cases per kind */
    ChaosStats stats;
} ChaosReport;

#define CHAOS_REPORT_KEEP 200

/* Checks the N records against the faults.  OUT must be zeroed, or cleared
 * with chaos_report_clear. */
void chaos_check(const ChaosRec *recs, size_t n, const ChaosFault *faults,
                 size_t nfaults, const ChaosParams *p, ChaosReport *out);
void chaos_report_clear(ChaosReport *r);
/* Violations that fail the run (documented limits excluded). */
size_t chaos_report_failures(const ChaosReport *r);
/* One paragraph per kept violation: the kind, why, and the holds involved
 * (process, thread, start, valid end, fence, results), times in ms since
 * T0_NS; at most MAX of them. */
void chaos_report_print(const ChaosReport *r, const ChaosRec *recs, int64_t t0_ns,
                        size_t max, FILE *out);
const char *chaos_violation_name(int kind);
/* Every record, in the format of chaos_report_print, for debugging. */
void chaos_dump(const ChaosRec *recs, size_t n, int64_t t0_ns, FILE *out);

/* Adds a violation (or, LIMIT, a documented-limit case) to OUT: for
 * the checkers. */
void chaos_report_add(ChaosReport *out, int kind, bool limit, int32_t a, int32_t b,
                      int64_t amount, const char *why);

/* Used by the checker, and by the selftest to build its logs. */
bool chaos_is_wait(const ChaosRec *r);
bool chaos_is_hold(const ChaosRec *r);
int64_t chaos_valid_end(const ChaosRec *r);
bool chaos_has_interval(const ChaosRec *r);

#endif /* CHAOS_CHECK_H */
