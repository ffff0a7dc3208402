/*
 * chaos_rw_worker.h -- a chaos worker process of the read-write lock
 * families: its threads take one netmutex_rwlock_t to read and to write,
 * logging every call and hold (see chaos_rw_worker.c).
 */
#ifndef CHAOS_RW_WORKER_H
#define CHAOS_RW_WORKER_H

#include "chaos_worker.h"

/* The worker's main (an NmCallFunc), as chaos_worker_main: runs until
 * log->stop, shuts the library down and returns 0, or a non-zero code if
 * netmutex could not even be set up. */
int chaos_rw_worker_main(void *cfg);

#endif /* CHAOS_RW_WORKER_H */
