/*
 * chaos_cond_worker.h -- a chaos worker process of the condition families:
 * its threads pass turns around rings through a netmutex_cond_t and the
 * netmutex guarding it, logging every hold, wait, signal and broadcast
 * (see chaos_cond_worker.c).
 */
#ifndef CHAOS_COND_WORKER_H
#define CHAOS_COND_WORKER_H

#include <stddef.h>

#include "chaos_worker.h"

/* The names of ring RING's mutex (KIND 'm') and condition (KIND 'c'):
 * "<base>/m<ring>", "<base>/c<ring>", in BUF of SIZE bytes. */
void chaos_cond_ring_name(char *buf, size_t size, const char *base, char kind, int ring);

/* Even rings' mutexes have lease caching on (the default), odd ones off,
 * so that both paths are under every fault (ring 0's lock key is the one
 * the driver samples for the cache flag). */
#define CHAOS_COND_CACHED(ring) ((ring) % 2 == 0)

/* The worker's main (an NmCallFunc), as chaos_worker_main: runs until
 * log->stop, closes its rings, shuts the library down and returns 0, or
 * a non-zero code if netmutex could not even be set up. */
int chaos_cond_worker_main(void *cfg);

#endif /* CHAOS_COND_WORKER_H */
