/*
 * entry.h -- what one name is doing in this process: a header every
 * family shares, and the body of its family (a mutex's state machine, or
 * the list of holds of a read-write lock or a semaphore).
 *
 * The registry (registry.h) keeps one entry per family and name, and every
 * handle of that name and family points at it: two handles of a name
 * exclude each other locally as they exclude other processes.  A mutex
 * and a rwlock of one name are two locks, as their keys are: two entries.
 *
 * The header (nm_entry_t): the registry's links (next, refs), the name,
 * the entry's lock e->mu and condition variable e->cv, the family, the
 * lease cache's bookkeeping (e->cache, cache.h: a mutex's and a rwlock's;
 * a semaphore never caches, and its stays zero) and the statistics record
 * (e->stat, stats.h).  The body is the family's: mx = nm_entry_mutex(e)
 * for a mutex, hs = nm_entry_holds(e) for a rwlock or a semaphore, each of
 * which stops the process when asked for another family's.
 *
 *   family   body              a hold is                      moves
 *   mutex    nm_entry_mutex_t  its one hold, mx->hold (HELD)  the states
 *   rwlock   nm_entry_holds_t  one thread's read share or     hold_add,
 *                              the write lock, on hs->list    hold_remove
 *   sem      nm_entry_holds_t  one thread's permit (of one    hold_add,
 *                              or several), on hs->list       hold_remove
 *
 * A hold (nm_hold_t) is what one thread has of a name: a lease at the
 * server (its kind, nm_hold_kind_t, says what the lease stands for; a
 * read hold through a rwlock's cached share has none of its own, below),
 * who holds it through which handle, and how deep.  The renewal job
 * (renew.h) watches every lease, renews it (a mutex's unless its
 * attribute says not) and reports each one lost by itself; held.h lists
 * the calling thread's holds, pushed and popped by the moves below.
 *
 * A condition variable has no entry, and its waiter is not a hold: while
 * it waits the thread has given the mutex back (its lease went to the
 * servers) and has at the server only its registration in the
 * condition's hash, which its own looks keep alive, no renewal (src/api/
 * cond.c, the steps of a wait, and the process-local record that counts
 * waiters; src/server/condvar.c, the waiter at the server).  Its wait
 * ends by locking the mutex again: a move of the mutex's entry.
 *
 * ---- a mutex: the state machine ----
 *
 * One thread per name at a time talks to Redis about a mutex: the others
 * wait on e->cv.  The states (mx->state, under e->mu):
 *
 *   FREE        no lease here, and nobody getting one: a thread may start.
 *   ACQUIRING   one thread is getting a lease from the servers.
 *   HELD        a thread holds the name (mx->hold); the lease is ours.
 *   HANDOFF     unlocked, the lease kept for a local waiter (the cohort,
 *               mutex.c): the next local lock takes it with no round trip.
 *   CACHED      unlocked, the lease kept until another process asks for it
 *               (cache.h); the next local lock takes it.
 *   RELEASING   the unlocking thread gives the lease back to the servers.
 *   RETURNING   a cached lease goes back (asked for, idle, stale, destroy);
 *               trylock waits for that rather than report a holder.
 *
 * The main cycle, and every move (one function each, below):
 *
 *   FREE -> ACQUIRING -> HELD -> RELEASING -> FREE
 *                         ^ |
 *                         | +-> HANDOFF, CACHED -> (take) HELD
 *
 *   move          from                  to          when
 *   acquiring     FREE                  ACQUIRING   lock: nothing kept here
 *   granted       ACQUIRING             HELD        the servers granted
 *   not_granted   ACQUIRING             FREE        they did not, or error
 *   take          HANDOFF, CACHED       HELD        lock: a kept lease
 *   hand_off      HELD                  HANDOFF     unlock, a local waiter
 *   keep          HELD                  CACHED      unlock, lease cacheable
 *   releasing     HELD                  RELEASING   unlock otherwise
 *   unkeep        CACHED                ACQUIRING   lock: the lease is stale
 *                 CACHED                RETURNING   the cache gives it back
 *   freed         RELEASING, RETURNING  FREE        the lease went back
 *
 * A thread may start a lock in FREE, HANDOFF and CACHED; in the other
 * states the name is busy and local lockers wait (nm_entry_busy).  A move
 * from a state its event does not start from is a bug: it aborts.  The
 * body's other fields are mutex.c's turns: the local waiters, fair mode's
 * reserved turn, the cohort's budget, trylock's wait for a RETURNING
 * lease.
 *
 * ---- a rwlock, a semaphore: the list of holds ----
 *
 * Several threads of a rwlock hold it together, each its own read share;
 * a semaphore's threads hold permits, one or several each.  One hold
 * cannot stand for them, and a shared lease would make one thread's
 * unlock or lost renewal end another's share.  So each has its own lease
 * and token at the server, on the entry's list (hs->list): a read share
 * (NM_HOLD_SHARE), the write lock (NM_HOLD_WRITE) or a permit
 * (NM_HOLD_PERMIT).  The list's moves, hold_add and hold_remove, have no
 * states: the server orders the holders (its queue serves readers and
 * writers in turn, a semaphore's waiters in arrival order), and a thread
 * goes to it for a hold of its own without waiting for another local one.
 * What the list knows locally is who holds what: a thread's second read
 * lock counts in its hold (depth), a write lock asked by a holder is
 * EDEADLK rather than a wait for itself, and an unlock finds the caller's
 * hold.  With lease caching (cache.h), a rwlock's process keeps one read
 * share, hs->rshare, off the list: the threads that read through it have
 * holds on the list marked shared, with no lease of their own, counted in
 * hs->rreaders (a semaphore's stay NULL and 0).
 */
#ifndef NM_ENTRY_H
#define NM_ENTRY_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "lease.h"
#include "netmutex.h"

typedef enum nm_state {
    NM_FREE = 0,
    NM_ACQUIRING,
    NM_HELD,
    NM_HANDOFF,
    NM_CACHED,
    NM_RELEASING,
    NM_RETURNING
} nm_state_t;

typedef enum nm_hold_kind {
    NM_HOLD_MUTEX = 0,  /* exclusive, one thread (recursively, by type) */
    NM_HOLD_SHARE,      /* a rwlock's read share: one thread's, others may
                           hold theirs (recursively: depth) */
    NM_HOLD_WRITE,      /* a rwlock's write lock: one thread's, alone */
    NM_HOLD_PERMIT      /* a semaphore's permit: one thread's, which may
                           hold several, each a hold of its own */
} nm_hold_kind_t;

/* What a name's entry is for: the registry keeps one per family and name;
 * it says which body the entry has (see the top). */
typedef enum nm_entry_family {
    NM_FAMILY_MUTEX = 0, /* nm_entry_mutex_t */
    NM_FAMILY_RWLOCK,    /* nm_entry_holds_t */
    NM_FAMILY_SEM        /* nm_entry_holds_t: its permits on the list */
} nm_entry_family_t;

/* One thread's hold (see the top).  A mutex's is its body's one hold,
 * whose fields mean what they say in the states noted; a hold on a list
 * is the thread's from hold_add to hold_remove. */
typedef struct nm_hold {
    nm_lease_t lease;         /* the server-side acquisition: a mutex's in
                                 HELD, HANDOFF, CACHED (zeroed otherwise) */
    pthread_t owner;          /* HELD: the thread */
    const void *handle;       /* HELD: the handle it locked (netmutex_t,
                                 netmutex_rwlock_t, netmutex_sem_t) */
    unsigned int depth;       /* HELD: recursion depth */
    unsigned char kind;       /* nm_hold_kind_t */
    unsigned char inconsistent; /* robust: EOWNERDEAD given, not repaired */
    unsigned char shared;     /* a read hold through the rwlock's cached
                                 share (hs->rshare): no lease of its own */
    int64_t stat_t0;          /* HELD: when the hold started (stats.h), or 0 */
} nm_hold_t;

/* A hold on an entry's list of holds (see the top): one thread's. */
typedef struct nm_hold_node {
    struct nm_hold_node *next; /* e->mu */
    nm_hold_t hold;
} nm_hold_node_t;

/* cache.c's bookkeeping of a name, beside the state: whether the lease may
 * be kept, and whether requests for it reach us.  A mutex's, and a
 * rwlock's for its cached read share (listening, revoked, idle_since and
 * the list's fields; the others stay zero); a semaphore's stays zero. */
typedef struct nm_entry_cache {
    /* Bytes, not bit-fields: each is a memory location of its own, so
     * `listed` (the cache's list lock) shares none with the others (mu). */
    unsigned char able;       /* the lease may be kept after unlock */
    unsigned char revoked;    /* another process wants it: give it back at
                                 the next unlock (or now, if CACHED) */
    unsigned char listening;  /* requests for it reach us: the
                                 subscription is confirmed and not lost */
    unsigned char marked_idle;/* the server was told no thread is in it */
    unsigned char listed;     /* on cache.c's list (its own lock) */
    int64_t idle_since;       /* when it was last cached (monotonic ms) */
    int64_t used;             /* when it last had a cacheable lease (list lock) */
    struct nm_entry *next;    /* cache.c's list (list lock) */
    struct nm_chan *ch;       /* its channel (the sweeping thread) */
    char asked[NM_TOKEN_LEN + 1];  /* a request for a lease still being
                                      acquired: its token, or "" */
    char answer[NM_TOKEN_LEN + 1]; /* a trylock to tell the mutex is held */
} nm_entry_cache_t;

/* A mutex's body: the state machine and its one hold (e->mu). */
typedef struct nm_entry_mutex {
    unsigned char state;      /* nm_state_t */
    unsigned char reserved;   /* fair: the next turn is for a waiting thread */
    unsigned int waiters;     /* local threads waiting for their turn */
    unsigned int cohort_turns;/* hand-offs since the lease was acquired */
    int64_t cohort_start;     /* when the lease was acquired (monotonic ms) */
    int64_t returning_until;  /* RETURNING: trylock waits for it until then */
    nm_hold_t hold;
} nm_entry_mutex_t;

/* A rwlock's or a semaphore's body: the list of holds (e->mu). */
typedef struct nm_entry_holds {
    nm_hold_node_t *list;     /* the holds of several threads at once */
    nm_hold_node_t *rshare;   /* a rwlock's cached read share (cache.h):
                                 the process's, on no thread's list; its
                                 local readers hold through it */
    unsigned int rreaders;    /* the threads holding through rshare */
} nm_entry_holds_t;

/* The header every family shares, then its body. */
typedef struct nm_entry {
    struct nm_entry *next;    /* hash chain; registry lock */
    unsigned int refs;        /* handles pointing here; registry lock */
    unsigned int name_len;    /* at most NETMUTEX_NAME_MAX */

    pthread_mutex_t mu;       /* guards every field below but the cache's
                                 own (see nm_entry_cache_t) */
    pthread_cond_t cv;        /* CLOCK_MONOTONIC; signalled when a move lets
                                 a waiting thread go on */
    unsigned char family;     /* nm_entry_family_t, fixed */
    nm_entry_cache_t cache;
    struct nm_stat *stat;     /* its statistics record (stats.h), once
                                 statistics were on; e->mu to set, read
                                 atomically */
    union {                   /* by family: nm_entry_mutex(), nm_entry_holds() */
        nm_entry_mutex_t mutex;
        nm_entry_holds_t holds;
    } body;
    char name[];              /* NUL-terminated copy, in the entry's own
                                 allocation */
} nm_entry_t;

/* E's body asked for as the wrong family's: a bug, which stops the process. */
void nm_entry_wrong_family(const nm_entry_t *e, const char *body) __attribute__((noreturn));

static inline nm_entry_mutex_t *nm_entry_mutex_rw_(nm_entry_t *e)
{
    if (__builtin_expect(e->family != NM_FAMILY_MUTEX, 0))
        nm_entry_wrong_family(e, "mutex");
    return &e->body.mutex;
}

static inline const nm_entry_mutex_t *nm_entry_mutex_ro_(const nm_entry_t *e)
{
    return nm_entry_mutex_rw_((nm_entry_t *)e);
}

static inline nm_entry_holds_t *nm_entry_holds_rw_(nm_entry_t *e)
{
    if (__builtin_expect(e->family == NM_FAMILY_MUTEX, 0))
        nm_entry_wrong_family(e, "list of holds");
    return &e->body.holds;
}

static inline const nm_entry_holds_t *nm_entry_holds_ro_(const nm_entry_t *e)
{
    return nm_entry_holds_rw_((nm_entry_t *)e);
}

/* A mutex entry E's body; const for a const E. */
#define nm_entry_mutex(e)                                                          \
    _Generic((e), const nm_entry_t *: nm_entry_mutex_ro_, default: nm_entry_mutex_rw_)(e)

/* A rwlock or semaphore entry E's body; const for a const E. */
#define nm_entry_holds(e)                                                          \
    _Generic((e), const nm_entry_t *: nm_entry_holds_ro_, default: nm_entry_holds_rw_)(e)

/* Whether mutex E is busy: a thread of ours is at the servers for it or
 * holds it, so a local locker waits its turn. */
static inline int nm_entry_busy(const nm_entry_t *e)
{
    unsigned char s = nm_entry_mutex(e)->state;
    return s != NM_FREE && s != NM_HANDOFF && s != NM_CACHED;
}

/* Whether the calling thread holds mutex E. */
static inline int nm_entry_mine(const nm_entry_t *e)
{
    const nm_entry_mutex_t *mx = nm_entry_mutex(e);
    return mx->state == NM_HELD && pthread_equal(mx->hold.owner, pthread_self());
}

/* A mutex's moves (the table at the top), each under e->mu, of a mutex
 * entry only.  Those that let a waiting thread go on signal e->cv. */

/* FREE -> ACQUIRING: the calling thread goes to the servers. */
void nm_entry_acquiring(nm_entry_t *e);

/* ACQUIRING -> HELD by the calling thread through HANDLE, with LEASE. */
void nm_entry_granted(nm_entry_t *e, const void *handle, const nm_lease_t *lease);

/* ACQUIRING -> FREE: no lease came. */
void nm_entry_not_granted(nm_entry_t *e);

/* HANDOFF or CACHED -> HELD by the calling thread through HANDLE. */
void nm_entry_take(nm_entry_t *e, const void *handle);

/* HELD -> HANDOFF: the lease stays for a local waiter. */
void nm_entry_hand_off(nm_entry_t *e);

/* HELD -> CACHED: the lease stays until asked for (cache.c decided). */
void nm_entry_keep(nm_entry_t *e);

/* HELD -> RELEASING: the lease moves to *OUT, the caller gives it back
 * and then calls nm_entry_freed(). */
void nm_entry_releasing(nm_entry_t *e, nm_lease_t *out);

/* CACHED -> TO (ACQUIRING: a locker found it stale and gives it back
 * itself; RETURNING: the cache gives it back): the lease moves to *OUT. */
void nm_entry_unkeep(nm_entry_t *e, nm_state_t to, nm_lease_t *out);

/* RELEASING or RETURNING -> FREE: the lease went back (or expired). */
void nm_entry_freed(nm_entry_t *e);

/* The list's moves and looks, under e->mu, of a rwlock or semaphore entry
 * only. */

/* The calling thread got the lease in NODE's hold, a hold of KIND of its
 * own, through HANDLE: NODE goes on E's list of holds, held once. */
void nm_entry_hold_add(nm_entry_t *e, nm_hold_node_t *node, const void *handle,
                       nm_hold_kind_t kind);

/* NODE leaves E's list: its lease is the caller's to give back, NODE the
 * caller's to free. */
void nm_entry_hold_remove(nm_entry_t *e, nm_hold_node_t *node);

/* The calling thread's hold on E's list, or NULL. */
nm_hold_node_t *nm_entry_hold_mine(const nm_entry_t *e);

/* Whether a hold on E's list was taken through HANDLE. */
int nm_entry_hold_through(const nm_entry_t *e, const void *handle);

/* In a child after fork: whatever the parent did, nobody holds, keeps or
 * waits for E (the only thread left is the one that forked): a mutex's
 * is FREE, a list empty, the cache's bookkeeping clear. */
void nm_entry_reset_in_child(nm_entry_t *e);

/* E's statistics record (stats.h): NULL while statistics are off. */
struct nm_stat *nm_entry_stat(const nm_entry_t *e);

/* The state's name, for messages. */
const char *nm_entry_state_name(nm_state_t s);

/* How many names are held (HELD, HANDOFF, RELEASING, or a hold on a list)
 * in this process:
 * netmutex_configure and netmutex_shutdown refuse to pull the
 * configuration from under a held lock. */
int nm_entry_any_held(void);

/* In a child after fork: nothing is held. */
void nm_entry_after_fork_child(void);

#endif /* NM_ENTRY_H */
