/*
 * chaos_sem_worker.h -- a chaos worker process of the semaphore families:
 * its threads take permits of one netmutex_sem_t and give them back,
 * logging every call and hold (see chaos_sem_worker.c).
 */
#ifndef CHAOS_SEM_WORKER_H
#define CHAOS_SEM_WORKER_H

#include "chaos_worker.h"

/* The worker's main (an NmCallFunc), as chaos_worker_main: runs until
 * log->stop, shuts the library down and returns 0, or a non-zero code if
 * netmutex could not even be set up. */
int chaos_sem_worker_main(void *cfg);

#endif /* CHAOS_SEM_WORKER_H */
