/*
 * chaos_run.h -- one fault family from start to verdict: the servers (or
 * proxy) it needs, the worker processes, the driver loop that injects the
 * family's fault again and again, the stop, and the checker's verdict
 * (chaos_run.c).  The injectors themselves are in chaos_fault.c.
 */
#ifndef CHAOS_RUN_H
#define CHAOS_RUN_H

#include <stdbool.h>
#include <sys/types.h>

#include "fixture.h"

#include "chaos_log.h"
#include "chaos_proxy.h"
#include "chaos_worker.h"

#define CHAOS_QUORUM_N 3
#define CHAOS_MAX_WORKERS 8

typedef enum { CHAOS_SINGLE, CHAOS_PROXY, CHAOS_QUORUM } ChaosMode;

typedef struct ChaosRun ChaosRun;

typedef struct ChaosFamily {
    const char *name;            /* test path under /chaos/, e.g. "sigstop/holder" */
    bool (*inject)(ChaosRun *);  /* one fault; false if none could be injected now;
                                    NULL: the baseline, no fault at all */
    unsigned int gap_ms;         /* between two faults (scaled by nm_ms) */
    ChaosMode mode;
    bool idle_check;             /* see ChaosParams.idle_bound_ns */
    unsigned int weight;         /* its share of the time (0 counts as 1) */
    bool cached;                 /* a plain mutex with lease caching, not a
                                    robust one (single server and proxy) */
    bool cond;                   /* a condition family: rings of turns passed
                                    through netmutex_cond_t (chaos_cond_worker.c)
                                    instead of one mutex hammered */
    bool rw;                     /* a read-write lock family: one
                                    netmutex_rwlock_t read and written
                                    (chaos_rw_worker.c) */
    bool detect;                 /* the workers run with deadlock detection
                                    (NETMUTEX_DEADLOCK=detect): their long
                                    waits are published, and never one
                                    EDEADLK (no worker holds two names) */
} ChaosFamily;

/* The semaphore families' permits: fewer than the threads that want one. */
#define CHAOS_SEM_PERMITS 3u

/* What all families share. */
typedef struct ChaosEnv {
    NmRedis *redis;         /* the single server, --enable-debug-command yes */
    unsigned int family_ms; /* how long faults are injected, per unit of
                               a family's weight */
} ChaosEnv;

struct ChaosRun {
    const ChaosFamily *fam;
    ChaosShared *log;
    ChaosWorkerCfg wcfg;
    NmRedis *redis;                         /* single server and proxy modes */
    NmRedis *servers[CHAOS_QUORUM_N];       /* quorum mode */
    ChaosProxy *proxy;                      /* proxy mode */
    char *url, *name, *key;                 /* key: the lock key of NAME */
    int slot[CHAOS_MAX_WORKERS];            /* index in log->procs, -1: none */
    int nworkers;
    unsigned int lease_ms;                  /* scaled */
    int64_t t0_ns;
    GRand *rand;
    unsigned int injected;                  /* faults that struck */
    unsigned int flagged;                   /* ... with CHAOS_FF_* set */
    int turn;                               /* rotates the injectors' variants */
    unsigned int cache_marks;               /* samples of the lock key marked
                                               cacheable ('k' or 'i') */
    int nrings;                             /* condition families: one ring per
                                               worker slot */
    char *cw[CHAOS_MAX_RINGS];              /* each ring's list of waiters (CW) */
    bool sem;                               /* a semaphore family's run */
};

/* What the condition families added up to in this run (for the summary
 * at the end, and the long run's count of signals). */
typedef struct ChaosCondTotals {
    unsigned int families;
    size_t signals, broadcasts, to_waiters, waits, wakes, timeouts, timeouts_judged;
    size_t lost, faults;
} ChaosCondTotals;

extern ChaosCondTotals chaos_cond_totals;

/* What the read-write lock families added up to in this run. */
typedef struct ChaosRwTotals {
    unsigned int families;
    size_t reads, writes, read_holds, write_holds, read_valid, write_valid, shared;
    size_t lost, faults;
} ChaosRwTotals;

extern ChaosRwTotals chaos_rw_totals;

/* What the semaphore families added up to in this run. */
typedef struct ChaosSemTotals {
    unsigned int families;
    size_t calls, holds, valid, lost, full, max_holders, faults;
} ChaosSemTotals;

extern ChaosSemTotals chaos_sem_totals;

/* Runs FAM (a GLib test case's body): fails the test case on violations. */
void chaos_run_family(const ChaosFamily *fam, const ChaosEnv *env);
/* The same for a semaphore family: one netmutex_sem_t of
 * CHAOS_SEM_PERMITS permits taken and posted (chaos_sem_worker.c), judged
 * by chaos_sem_check.h, under FAM's faults (a single server's). */
void chaos_run_sem_family(const ChaosFamily *fam, const ChaosEnv *env);

/* For the injectors. */
ChaosProc *chaos_run_proc(ChaosRun *run, int slot); /* NULL: none */
/* SIGKILLs the worker in SLOT, reaps it, marks its open records and logs
 * the fault (the caller may add flags); then chaos_run_respawn starts a
 * fresh worker in the slot (unless the process table is full). */
ChaosFault *chaos_run_kill(ChaosRun *run, int slot);
void chaos_run_respawn(ChaosRun *run, int slot);
/* Marks the records P had open when it was killed (or found hung, HUNG)
 * at T: its threads' current records, and any record it took but had not
 * yet published or called, so that none looks like a call that never
 * returned. */
void chaos_run_mark_open(ChaosShared *log, ChaosProc *p, int64_t t, bool hung);
/* Milliseconds in [lo, hi]. */
unsigned int chaos_run_between(ChaosRun *run, unsigned int lo, unsigned int hi);

#endif /* CHAOS_RUN_H */
