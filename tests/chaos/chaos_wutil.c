/*
 * chaos_wutil.c -- see chaos_wutil.h.
 */
#include "ac_config.h"

#include "chaos_wutil.h"

#include <errno.h>
#include <time.h>

uint64_t chaos_rand_seed(int32_t pid, int index)
{
    return (((uint64_t)pid << 20) ^ (uint64_t)chaos_now_ns() ^ ((uint64_t)index << 8)) | 1;
}

uint64_t chaos_rand_next(uint64_t *state)
{
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return *state * 2685821657736338717ull;
}

unsigned int chaos_rand_upto(uint64_t *state, unsigned int n)
{
    return n ? (unsigned int)(chaos_rand_next(state) % (n + 1u)) : 0;
}

void chaos_sleep_us(unsigned int us)
{
    struct timespec ts = { .tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000 };

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

void chaos_stamp_lost(ChaosShared *log, ChaosProc *proc)
{
    int64_t now = chaos_now_ns();

    __atomic_fetch_add(&proc->lost_calls, 1, __ATOMIC_SEQ_CST);
    for (int i = 0; i < proc->nthreads; i++) {
        int phase = chaos_load(&proc->phase[i]);
        int32_t rec = chaos_load(&proc->rec[i]);

        if ((phase == CHAOS_HOLDING || phase == CHAOS_UNLOCKING) && rec >= 0)
            chaos_set_once(&log->recs[rec].lost_ns, now);
    }
}

void chaos_pause_after(uint64_t *rng, int rc, const ChaosWorkerCfg *cfg)
{
    if (rc == EBUSY || rc == EAGAIN)
        chaos_sleep_us(2000 + chaos_rand_upto(rng, 3000));
    else if (rc != 0 && rc != ETIMEDOUT)
        chaos_sleep_us(5000);
    else
        chaos_sleep_us(chaos_rand_upto(rng, 1000));
    chaos_sleep_us(chaos_rand_upto(rng, cfg->think_us));
    if (cfg->prober)
        chaos_sleep_us(10000 + chaos_rand_upto(rng, 20000));
}
