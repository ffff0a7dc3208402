/*
 * stats.h -- what this process did with each lock, while statistics are
 * on (netmutex_stats(3)): a record per kind and name, its counters and two
 * log-scale histograms of times (wait, hold).
 *
 * Records live in a table of their own and outlive the entries that point
 * at them (entry.h's e->stat): a destroyed lock's numbers are reported
 * until netmutex_stats_reset, which zeroes records and frees none (so no
 * pointer to one ever dangles).
 *
 * Cost.  Off, every hook is one predictable branch on nm_stats_mode.  On,
 * the counters an entry's moves change are written under e->mu (a relaxed
 * load and store: no locked instruction), the others (renewals, losses,
 * revocations, conditions, deadlocks) with atomic additions, off the hot
 * path.  The clock (clock_gettime, some 20 to 40 ns) is read only where a
 * round trip or a wait is paid anyway, and for one hold in
 * NM_STATS_SAMPLE of those that pay none (a cached lease taken, a cohort
 * hand-off): such a lock's wait is 0 without a clock, its hold time
 * sampled.  The snapshot reads every field with relaxed atomic loads.
 *
 * An acquisition in progress is the calling thread's (thread-local): the
 * API layer says when it starts (nm_stats_call: whether it must wait for a
 * local holder) and when it goes to the servers (nm_stats_remote); the
 * entry's move that grants it (nm_stats_acquired) closes it.
 */
#ifndef NM_STATS_H
#define NM_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "netmutex.h"

/* One cheap hold in this many is timed. */
#define NM_STATS_SAMPLE 64

typedef struct nm_stat nm_stat_t;

/* NETMUTEX_STATS_OFF, _ON or _PUBLISH; read relaxed. */
extern int nm_stats_mode;

static inline int nm_stats_on(void)
{
    return __builtin_expect(__atomic_load_n(&nm_stats_mode, __ATOMIC_RELAXED) != 0, 0);
}

/* Reads NETMUTEX_STATS (once, at library init): "1" on and printed at
 * exit, "publish" on, "0" or unset off, anything else logged and off. */
void nm_stats_init_from_env(void);

/* Switches statistics (netmutex_set_stats): 0 or EINVAL. */
int nm_stats_set_mode(int mode);

/* The record of KIND (NETMUTEX_KIND_*) and NAME, created on first use:
 * NULL when statistics are off or memory ran out. */
nm_stat_t *nm_stats_record(int kind, const char *name, size_t len);

/* ---- an acquisition of the calling thread ---------------------------------- */

void nm_stats_call_slow(int busy);
void nm_stats_remote_slow(void);

/* An acquisition starts; BUSY: it waits for a local holder first
 * (contended, and timed from now). */
static inline void nm_stats_call(int busy)
{
    if (nm_stats_on())
        nm_stats_call_slow(busy);
}

/* The acquisition goes to the servers: timed from now (if not already). */
static inline void nm_stats_remote(void)
{
    if (nm_stats_on())
        nm_stats_remote_slow();
}

/* Under the owner's lock (e->mu): S's acquisition by the calling thread is
 * done; SERVER_WAITED, a server queued it; SHARED, a read lock.  Returns
 * when the hold started (monotonic ns), or 0 if it is not timed. */
int64_t nm_stats_acquired(nm_stat_t *s, int server_waited, int shared);

/* Under the owner's lock: the acquisition ended without the lock. */
void nm_stats_not_acquired(void);

/* Under the owner's lock: the hold that started at T0 (0: untimed) ends. */
void nm_stats_released(nm_stat_t *s, int64_t t0);

/* Under the owner's lock: the lease went to a local waiter. */
void nm_stats_handoff(nm_stat_t *s);

/* From any thread (atomic). */
void nm_stats_renewed(nm_stat_t *s);
void nm_stats_lost(nm_stat_t *s);
void nm_stats_revoked(nm_stat_t *s);

/* A condition's wait (by name): starts (returns its start, 0 when off),
 * and ends with ERR. */
int64_t nm_stats_cond_wait_begin(void);
void nm_stats_cond_wait_end(const char *name, size_t len, int64_t t0, int err);
/* A condition's signal (ALL: broadcast). */
void nm_stats_cond_signal(const char *name, size_t len, int all);

/* Deadlock detection returned EDEADLK for a lock of KIND and NAME. */
void nm_stats_deadlock(int kind, const char *name, size_t len);

/* ---- reading ---------------------------------------------------------------- */

/* netmutex_stats: every used record, sorted by total wait (descending). */
int nm_stats_snapshot(netmutex_stats_fn fn, void *arg);

/* netmutex_stats_reset. */
void nm_stats_reset(void);

/* ---- the published form (stats.c documents the format) ---------------------- */

/* This process's used records as the text it publishes: *OUT (malloc'ed,
 * not NUL-terminated) of *LEN bytes.  0 or ENOMEM. */
int nm_stats_encode(char **out, size_t *len);

/* Many processes' texts, merged by kind and name. */
typedef struct nm_stats_merge nm_stats_merge_t;

/* An empty merge, NULL when out of memory; freed by nm_stats_merge_free. */
nm_stats_merge_t *nm_stats_merge_new(void);
void nm_stats_merge_free(nm_stats_merge_t *m);

/* Adds one process's TEXT (LEN bytes) into M: 0, EPROTO (not this
 * format: what came before the bad line is kept) or ENOMEM. */
int nm_stats_merge_add(nm_stats_merge_t *m, const char *text, size_t len);

/* FN for every name and kind of M, sorted by total wait (descending),
 * with st->processes the number of texts that had it.  0, ECANCELED (FN
 * returned non-zero) or ENOMEM. */
int nm_stats_merge_each(const nm_stats_merge_t *m,
                        int (*fn)(const char *name, const netmutex_stats_t *st, void *arg),
                        void *arg);

/* pthread_atfork hooks (mutex.c): the table's lock is a leaf lock; the
 * child starts with every record zeroed, so it reports (and prints at
 * exit) only what it did itself. */
void nm_stats_before_fork(void);
void nm_stats_after_fork_parent(void);
void nm_stats_after_fork_child(void);

#endif /* NM_STATS_H */
