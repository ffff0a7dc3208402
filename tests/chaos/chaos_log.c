/*
 * chaos_log.c -- see chaos_log.h.  Nothing here knows about netmutex: it is
 * memory shared by forked processes, and the few operations on it that
 * must be atomic or mutually exclusive.
 */
#include "ac_config.h"

#include "chaos_log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

int64_t chaos_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static size_t region_size(uint32_t capacity)
{
    return sizeof(ChaosShared) + (size_t)capacity * sizeof(ChaosRec);
}

/* The resource's mutex is shared by every worker process, and a worker can
 * be killed with SIGKILL while inside it: robust, or one kill would hang
 * every later presenter. */
static void init_resource_lock(pthread_mutex_t *m)
{
    pthread_mutexattr_t a;

    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(m, &a);
    pthread_mutexattr_destroy(&a);
}

ChaosShared *chaos_log_new(uint32_t capacity)
{
    ChaosShared *log = mmap(NULL, region_size(capacity), PROT_READ | PROT_WRITE,
                            MAP_SHARED | MAP_ANONYMOUS, -1, 0);

    if (log == MAP_FAILED) {
        perror("chaos: mmap of the hold log");
        abort();
    }
    /* Anonymous pages are zeroed; only what is not 0 is set here. */
    log->capacity = capacity;
    init_resource_lock(&log->res_lock);
    return log;
}

void chaos_log_free(ChaosShared *log)
{
    pthread_mutex_destroy(&log->res_lock);
    munmap(log, region_size(log->capacity));
}

uint32_t chaos_log_count(ChaosShared *log)
{
    uint32_t used = __atomic_load_n(&log->used, __ATOMIC_ACQUIRE);

    return used < log->capacity ? used : log->capacity;
}

ChaosRec *chaos_log_add(ChaosShared *log, int32_t pid, int32_t thread, int32_t *index)
{
    uint32_t i = __atomic_fetch_add(&log->used, 1, __ATOMIC_ACQ_REL);
    ChaosRec *r;

    if (i >= log->capacity)
        return NULL;
    r = &log->recs[i];
    r->pid = pid;
    r->thread = thread;
    r->rc = CHAOS_PENDING;
    r->unlock_rc = CHAOS_PENDING;
    r->accepted = -1;
    r->prev = r->next = -1;
    r->cond_rc = CHAOS_PENDING;
    *index = (int32_t)i;
    return r;
}

/* Locks the resource; a presenter killed inside it leaves it consistent
 * (its update is a single store), so EOWNERDEAD is simply repaired. */
static void resource_lock(ChaosShared *log)
{
    if (pthread_mutex_lock(&log->res_lock) == EOWNERDEAD)
        pthread_mutex_consistent(&log->res_lock);
}

bool chaos_resource_present(ChaosShared *log, uint64_t fence, int32_t pid)
{
    bool ok;

    resource_lock(log);
    ok = fence > log->res_fence || (fence == log->res_fence && pid == log->res_pid);
    if (ok) {
        log->res_fence = fence;
        log->res_pid = pid;
    } else {
        log->res_rejected++;
    }
    pthread_mutex_unlock(&log->res_lock);
    return ok;
}

int64_t chaos_counter_read(ChaosShared *log)
{
    return __atomic_load_n(&log->counter, __ATOMIC_RELAXED);
}

void chaos_counter_write(ChaosShared *log, int64_t value)
{
    __atomic_store_n(&log->counter, value, __ATOMIC_RELAXED);
}

int32_t chaos_load(const int32_t *p)
{
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

void chaos_store(int32_t *p, int32_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}

void chaos_set_once(int64_t *p, int64_t v)
{
    int64_t zero = 0;

    __atomic_compare_exchange_n(p, &zero, v, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

int64_t chaos_load64(const int64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

ChaosProc *chaos_proc_add(ChaosShared *log, int nthreads, int *index)
{
    ChaosProc *p;

    if (log->nprocs >= CHAOS_MAX_PROCS)
        return NULL;
    *index = (int)log->nprocs;
    p = &log->procs[log->nprocs++];
    p->nthreads = nthreads;
    for (int t = 0; t < CHAOS_MAX_THREADS; t++)
        p->rec[t] = -1;
    return p;
}

ChaosFault *chaos_fault_begin(ChaosShared *log, enum chaos_fault_kind kind, pid_t pid)
{
    ChaosFault *f;

    if (log->nfaults >= CHAOS_MAX_FAULTS)
        return NULL;
    f = &log->faults[log->nfaults++];
    f->kind = kind;
    f->pid = (int32_t)pid;
    f->begin_ns = f->end_ns = chaos_now_ns();
    return f;
}

void chaos_fault_end(ChaosFault *f)
{
    if (f)
        f->end_ns = chaos_now_ns();
}

const char *chaos_fault_name(int kind)
{
    switch (kind) {
    case CHAOS_F_STOP: return "SIGSTOP";
    case CHAOS_F_KILL: return "SIGKILL";
    case CHAOS_F_CLIENT_KILL: return "CLIENT KILL";
    case CHAOS_F_DEBUG_SLEEP: return "DEBUG SLEEP";
    case CHAOS_F_RESTART: return "empty restart";
    case CHAOS_F_BLACKHOLE: return "blackhole";
    case CHAOS_F_FORGE: return "forged message";
    case CHAOS_F_SERVER_DOWN: return "server down";
    default: return "?";
    }
}
