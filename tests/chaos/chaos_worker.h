/*
 * chaos_worker.h -- a chaos worker process: THREADS threads hammering one
 * netmutex (robust, or plain with lease caching) and logging every call and
 * hold (see chaos_worker.c).
 */
#ifndef CHAOS_WORKER_H
#define CHAOS_WORKER_H

#include <stdbool.h>

#include "chaos_log.h"

typedef struct ChaosWorkerCfg {
    ChaosShared *log;
    const char *url;   /* one URL, or a comma-separated list (quorum mode) */
    const char *name;  /* the mutex */
    unsigned int lease_ms;
    unsigned int connect_ms, io_ms;
    unsigned int server_ms;                  /* quorum mode; 0: the default */
    unsigned int timed_min_ms, timed_max_ms; /* timedlock deadlines, from now */
    unsigned int rmw_us;                     /* between the read and the write */
    unsigned int hold_us;                    /* at most this much longer held */
    unsigned int think_us;                   /* at most this much between rounds */
    int threads;                             /* at most CHAOS_MAX_THREADS */
    bool robust;                             /* else a plain mutex, cached */
    bool prober;                             /* trylock and timedlock only,
                                                with a pause between rounds */
    unsigned int long_one_in;                /* 1 hold in N is long (0: none) */
    unsigned int long_min_ms, long_max_ms;   /* how long such a hold lasts */
    int proc;                                /* slot in log->procs, set per fork */
    int slot;                                /* the driver's worker slot, set per
                                                fork: a condition family's
                                                rings follow it (respawns too) */
    int rings;                               /* condition families: how many
                                                (one per worker slot) */
    unsigned int permits;                    /* semaphore families: the
                                                semaphore's permits */
} ChaosWorkerCfg;

/* The worker's main (an NmCallFunc): runs until log->stop, then unlocks,
 * shuts the library down and returns 0, or a non-zero code if netmutex
 * could not even be set up. */
int chaos_worker_main(void *cfg);

#endif /* CHAOS_WORKER_H */
