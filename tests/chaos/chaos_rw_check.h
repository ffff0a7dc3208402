/*
 * chaos_rw_check.h -- the read-write lock families' checker: pure
 * functions over the log of one netmutex_rwlock_t (records as chaos_log.h
 * describes them, each with its mode: 'r' a read lock call, 'w' a write
 * lock call), so that hand-made logs test it (chaos_rw_selftest.c).
 *
 * Valid interval.  A rwlock has no netmutex_validity: what the library
 * documents for its holds (netmutex_rwlock_rdlock(3), "Holds are leases")
 * is that each is a lease renewed by the background thread, and that a
 * hold that could not be renewed in time is reported lost (the callback)
 * before the server can have let anybody else in -- except for a holder
 * stopped past its lease, which only the fence guards against.  So a
 * hold's valid interval runs from its lock call's return to the earliest
 * of
 *   - the start of its unlock call,
 *   - the lost-hold notice (the callback's time; the worker stamps it on
 *     its open holds, and on a hold whose call returned while a notice
 *     came, at the return),
 *   - the driver's SIGKILL of its process (CHAOS_END_KILLED_*, end_ns),
 *   - the start of a SIGSTOP of its process (the documented exception);
 *     a hold whose lock call a SIGSTOP of its process overlapped has no
 *     valid interval at all: its lease may have run out before the call
 *     returned.
 * A hold with none of these ends (a call still open when the run ended)
 * has no valid interval either.
 *
 * What fails a run:
 *   - everything chaos_check() fails, over the writers' holds with these
 *     intervals (two writers that overlap, a later writer with a smaller
 *     fence, a lost update of the counter the writers read-modify-write)
 *     and over every call (a bound overrun, a hang, a result the API does
 *     not allow: see chaos_check.h; the read lock calls' results are the
 *     write lock's, lock for rdlock and wrlock, and so on);
 *   - overlap     a writer's valid interval intersects a reader's (readers
 *                 may overlap readers);
 *   - fence order a writer's fence not strictly greater than the fence of
 *                 every valid writer before it (in any process); a reader's
 *                 fence not greater than the fence of every valid writer
 *                 whose interval ended before the reader's began, or not
 *                 smaller than the fence of every valid writer whose
 *                 interval began after the reader's ended
 *                 (netmutex_rwlock_fence(3): a reader's fence is drawn
 *                 while its share keeps writers out).
 * An overlap, or a reader's fence out of order with a writer's, between
 * holds on either side of an empty restart of the single server is the
 * documented limit it is (the server forgot the holds), reported, not
 * failed.  The idle check (chaos_check.h) is not made.
 */
#ifndef CHAOS_RW_CHECK_H
#define CHAOS_RW_CHECK_H

#include <stddef.h>

#include "chaos_check.h"

/* R's valid end, as above (R's return when it has no valid interval). */
int64_t chaos_rw_valid_end(const ChaosRec *r, const ChaosFault *faults, size_t nfaults);

/* A copy of the N records with each hold's promise_ns set to its valid
 * end (0 when it has none), so that chaos_valid_end(), chaos_report_print
 * and chaos_dump show the intervals judged here.  g_free it. */
ChaosRec *chaos_rw_view(const ChaosRec *recs, size_t n, const ChaosFault *faults,
                        size_t nfaults);

/* Checks the N records of one rwlock against the faults, into OUT (zeroed,
 * or cleared with chaos_report_clear); the records the violations name
 * are indices into RECS (print them with chaos_rw_view's copy). */
void chaos_rw_check(const ChaosRec *recs, size_t n, const ChaosFault *faults, size_t nfaults,
                    const ChaosParams *p, ChaosReport *out);

/* What a family's log holds, for its summary: calls, holds and holds with
 * a valid interval, of each mode; the valid reads that began inside
 * another valid read's interval (readers did share the lock). */
typedef struct ChaosRwCounts {
    size_t reads, writes, read_holds, write_holds, read_valid, write_valid, shared;
} ChaosRwCounts;

void chaos_rw_count(const ChaosRec *recs, size_t n, const ChaosFault *faults, size_t nfaults,
                    ChaosRwCounts *out);

#endif /* CHAOS_RW_CHECK_H */
