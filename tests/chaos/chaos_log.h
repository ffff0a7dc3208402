/*
 * chaos_log.h -- the chaos suite's shared memory: the hold log, the worker
 * table, the fault log, the fenced resource and the shared counter.
 *
 * One region per fault family, mmap(MAP_SHARED | MAP_ANONYMOUS), created by
 * the test process before it forks any worker, so every worker (and every
 * respawned one) writes into the same pages and the records survive a
 * worker killed with SIGKILL.  Times are CLOCK_MONOTONIC nanoseconds, one
 * clock for every process of the host, so records of different processes
 * can be compared.
 *
 * One ChaosRec per lock call (lock, timedlock or trylock).  When the call
 * returned 0 or EOWNERDEAD the same record is the hold: fence, validity
 * promise, lost-lease notice, the read-modify-write of the counter and the
 * unlock.  Each record is written by the one worker thread that made the
 * call, except lost_ns (the library's background thread, through the
 * lost-lease callback) and end/end_ns (the driver, after the worker died).
 * Fields that are read while the workers run (the phases, the current
 * record, lost_ns, used, stop, the counter) go through the __atomic
 * builtins, so ThreadSanitizer sees no data race where none is meant.
 *
 * Condition families (chaos_cond_worker.c) log one ChaosRec per stretch
 * of holding one ring's mutex (a "segment"): one that starts when a lock
 * call returns (op 'l'), or when a condition wait returns (op 'w', an
 * untimed wait, or 'W', a timed one: call, return, rc and deadline are
 * the wait's, and prev the segment the wait was called in).  A segment
 * ends at its unlock, or at the next wait's call: then unlock_ns and
 * unlock_end_ns are both that call's time, unlock_rc 0 and next the wait's
 * record.  A signal or broadcast made in the segment is cond_op and its
 * call.
 */
#ifndef CHAOS_LOG_H
#define CHAOS_LOG_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define CHAOS_MAX_THREADS 4
#define CHAOS_MAX_PROCS 512  /* workers of one family, respawns included */
#define CHAOS_MAX_FAULTS 4096
#define CHAOS_MAX_RINGS 8   /* condition families: mutex + condition pairs */

/* The rc of a lock call that has not returned (yet). */
#define CHAOS_PENDING (-1)

/* What a worker thread is doing, for the driver to pick its victims. */
enum chaos_phase {
    CHAOS_IDLE,
    CHAOS_LOCKING,   /* in lock, timedlock or trylock */
    CHAOS_HOLDING,   /* the call returned 0 or EOWNERDEAD */
    CHAOS_UNLOCKING, /* in unlock */
    CHAOS_EXITED,
    CHAOS_WAITING    /* condition families: in a condition wait */
};

/* How a record ended, when it did not end normally (set by the driver). */
enum chaos_end {
    CHAOS_END_NORMAL,
    CHAOS_END_KILLED_LOCKING,   /* SIGKILL during the lock call */
    CHAOS_END_KILLED_HOLDING,   /* SIGKILL while holding */
    CHAOS_END_KILLED_UNLOCKING, /* SIGKILL during unlock */
    CHAOS_END_HUNG,             /* still in a call when the run had to end */
    CHAOS_END_KILLED_WAITING    /* SIGKILL during a condition wait */
};

/* States of the read-modify-write of the shared counter. */
enum chaos_rmw { CHAOS_RMW_NONE, CHAOS_RMW_READ, CHAOS_RMW_WRITTEN, CHAOS_RMW_SKIPPED };

typedef struct ChaosRec {
    int32_t pid;
    int32_t thread;        /* index of the thread in its process */
    int32_t op;            /* 'l' lock, 'T' timedlock, 't' trylock */
    int32_t rc;            /* the lock call's result, or CHAOS_PENDING */
    int64_t call_ns;       /* the lock call started */
    int64_t ret_ns;        /* it returned (0: not yet); a hold starts here */
    int64_t deadline_ns;   /* timedlock: its deadline */
    uint64_t fence;        /* netmutex_fence, when fence_rc is 0 */
    int32_t fence_rc;
    int32_t consistent_rc; /* after EOWNERDEAD */
    int32_t validity_rc;   /* of the last netmutex_validity call */
    int32_t accepted;      /* fenced resource: 1 accepted, 0 rejected, -1 not asked */
    int64_t promise_ns;    /* end of the last promise netmutex_validity made (0: none) */
    int64_t lost_ns;       /* the lost-lease callback ran (0: it did not) */
    int64_t rmw_read_ns;   /* just before the counter was read */
    int64_t rmw_write_ns;  /* just after it was written */
    int64_t rmw_value;     /* the value read */
    int32_t rmw_state;     /* enum chaos_rmw */
    int32_t unlock_rc;     /* CHAOS_PENDING until unlock returned */
    int64_t unlock_ns;     /* unlock was called (0: not yet) */
    int64_t unlock_end_ns; /* unlock returned */
    int32_t end;           /* enum chaos_end */
    int32_t ring;          /* condition families: the mutex and condition */
    int64_t end_ns;        /* when the driver killed the process */
    /* Condition families only (see above). */
    int32_t prev;          /* a wait's record: the segment it was called in, or -1 */
    int32_t next;          /* a segment ended by a wait: the wait's record, or -1 */
    int32_t cond_op;       /* 's' signal, 'b' broadcast, 0 none */
    int32_t cond_rc;       /* its result (CHAOS_PENDING until it returned) */
    int64_t cond_ns;       /* it was called */
    int64_t cond_end_ns;   /* it returned */
    int32_t relay;         /* the signal passes one on (the signaller's turn
                              had not come: see chaos_cond_worker.c) */
    int32_t mode;          /* read-write lock families: 'r' a read lock call,
                              'w' a write lock call (op as for a mutex);
                              0 elsewhere */
} ChaosRec;

/* What the driver did, and when. */
enum chaos_fault_kind {
    CHAOS_F_STOP,        /* SIGSTOP .. SIGCONT of a worker */
    CHAOS_F_KILL,        /* SIGKILL of a worker */
    CHAOS_F_CLIENT_KILL, /* CLIENT KILL: normal connections, or blocked waiters */
    CHAOS_F_DEBUG_SLEEP, /* the server busy in DEBUG SLEEP */
    CHAOS_F_RESTART,     /* the single server stopped and started empty */
    CHAOS_F_BLACKHOLE,   /* the proxy relayed nothing */
    CHAOS_F_FORGE,       /* a forged message on the lock's channel */
    CHAOS_F_SERVER_DOWN  /* quorum mode: one server stopped (then restarted) */
};

/* Flags of a fault. */
#define CHAOS_FF_HOLDER 1u /* the victim held the lock, or had been granted it */
#define CHAOS_FF_QUEUED 2u /* the victim's token was in the lock's Redis queue */

typedef struct ChaosFault {
    int32_t kind;   /* enum chaos_fault_kind */
    int32_t pid;    /* STOP, KILL: the victim (0 otherwise) */
    uint32_t flags; /* CHAOS_FF_* */
    int32_t detail; /* CLIENT_KILL: clients killed; FORGE: messages heard;
                       SERVER_DOWN: server index */
    int64_t begin_ns, end_ns;
} ChaosFault;

typedef struct ChaosProc {
    int32_t pid;
    int32_t nthreads;
    int32_t phase[CHAOS_MAX_THREADS]; /* enum chaos_phase */
    int32_t rec[CHAOS_MAX_THREADS];   /* index of the current record, -1 */
    int32_t lost_calls;               /* lost-lease callbacks in this process */
    int32_t reserved;
} ChaosProc;

/* One ring of a condition family: whose turn it is, a turn passed on but
 * not yet taken, the ring closed at the end, and its own counter.  Read
 * and written only under the ring's netmutex (and through the atomic
 * accessors). */
typedef struct ChaosRing {
    int32_t turn;
    int32_t pending;
    int32_t closed;
    int32_t reserved;
    int64_t counter;
    int64_t pending_ns; /* when the turn pending was passed on */
} ChaosRing;

typedef struct ChaosShared {
    uint32_t capacity; /* records */
    uint32_t used;     /* records handed out (may exceed capacity: full) */
    int32_t stop;      /* set by the driver: workers finish their round and exit */
    int32_t reserved;
    /* The fenced resource: it keeps the highest fence it accepted and
     * rejects smaller ones.  An equal fence is accepted from the same
     * process only: a cohort hand-off shares the lease and its fence. */
    pthread_mutex_t res_lock; /* PTHREAD_PROCESS_SHARED */
    uint64_t res_fence;
    int32_t res_pid;
    uint32_t res_rejected;
    int64_t counter; /* read-modify-written by holders, on purpose unlocked */
    uint32_t nprocs;
    uint32_t nfaults;
    ChaosProc procs[CHAOS_MAX_PROCS];
    ChaosFault faults[CHAOS_MAX_FAULTS];
    ChaosRing rings[CHAOS_MAX_RINGS];
    ChaosRec recs[];
} ChaosShared;

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t chaos_now_ns(void);

/* A fresh zeroed region for CAPACITY records (the test process only). */
ChaosShared *chaos_log_new(uint32_t capacity);
void chaos_log_free(ChaosShared *log);
/* Records in use (at most the capacity). */
uint32_t chaos_log_count(ChaosShared *log);

/* A new record for a call by PID/THREAD, with its index in *INDEX; NULL
 * when the log is full (the caller must then make no more calls). */
ChaosRec *chaos_log_add(ChaosShared *log, int32_t pid, int32_t thread, int32_t *index);

/* The fenced resource: true if FENCE (presented by PID) was accepted. */
bool chaos_resource_present(ChaosShared *log, uint64_t fence, int32_t pid);

/* The counter, read and written separately: two holders at once lose an
 * update, which is the point. */
int64_t chaos_counter_read(ChaosShared *log);
void chaos_counter_write(ChaosShared *log, int64_t value);

/* Atomic accessors for what is read while workers run. */
int32_t chaos_load(const int32_t *p);
void chaos_store(int32_t *p, int32_t v);
/* Sets *P to V unless it is already set (non-zero). */
void chaos_set_once(int64_t *p, int64_t v);
int64_t chaos_load64(const int64_t *p);

/* The driver's side: a worker slot (pid filled in by both sides after the
 * fork), NULL when the table is full; a fault that begins now, NULL when
 * the fault log is full. */
ChaosProc *chaos_proc_add(ChaosShared *log, int nthreads, int *index);
ChaosFault *chaos_fault_begin(ChaosShared *log, enum chaos_fault_kind kind, pid_t pid);
void chaos_fault_end(ChaosFault *f);

const char *chaos_fault_name(int kind);

#endif /* CHAOS_LOG_H */
