/*
 * chaos_wutil.h -- what the worker processes of the read-write lock and
 * semaphore families share (chaos_wutil.c): their random numbers, their
 * sleeps, and the lost-hold callback's stamp on a process's open holds.
 */
#ifndef CHAOS_WUTIL_H
#define CHAOS_WUTIL_H

#include <stdint.h>

#include "chaos_log.h"
#include "chaos_worker.h"

/* A seed for thread INDEX of process PID: never 0 (xorshift's fixed point). */
uint64_t chaos_rand_seed(int32_t pid, int index);
/* xorshift64*: the next number of the sequence in *STATE. */
uint64_t chaos_rand_next(uint64_t *state);
/* A number in [0, N]. */
unsigned int chaos_rand_upto(uint64_t *state, unsigned int n);

/* Sleeps US microseconds, through signals (SIGSTOP/SIGCONT among them). */
void chaos_sleep_us(unsigned int us);

/* The pause of a thread after a call that returned RC, drawn from *RNG:
 * a busy or unreachable lock (EBUSY, EAGAIN) is not tried again at once
 * (a trylock must not spin and fill the log), another error waits 5 ms,
 * a result 0 or ETIMEDOUT a little; then CFG's think time, and a prober's
 * own slower pace. */
void chaos_pause_after(uint64_t *rng, int rc, const ChaosWorkerCfg *cfg);

/* What a lost-hold callback does: stamps the time on the record of every
 * thread of PROC that holds or is unlocking, and counts the notice in
 * PROC->lost_calls.  The callback does not say whose hold was lost (each
 * thread's is a lease of its own): stamping them all only shortens valid
 * intervals. */
void chaos_stamp_lost(ChaosShared *log, ChaosProc *proc);

#endif /* CHAOS_WUTIL_H */
