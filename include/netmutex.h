/*
 * netmutex.h -- a pthread-style mutex that is held in Redis, so threads in
 * different processes on different machines exclude each other.
 *
 * Every call returns 0 or an errno value, exactly like the pthread_mutex_*
 * family, and none of them sets errno.  The error values and the situations
 * that produce them are listed next to each call here, and completely in
 * each call's manual page (netmutex_lock(3) and the others).
 *
 * Errors shared by every call:
 *   EINVAL   a NULL pointer, a mutex that was never initialized or was
 *            destroyed, an empty name or one longer than NETMUTEX_NAME_MAX,
 *            a malformed URL or configuration value.
 *   ENOMEM   out of memory.
 *
 * Errors of the calls that talk to Redis:
 *   EACCES   the server refused our credentials (AUTH) or the database
 *            number (SELECT).  Retrying cannot help, so it is not retried.
 *   EPROTO   the server answered something this library does not expect
 *            (for example a key of the wrong type under our prefix).
 */
#ifndef NETMUTEX_H
#define NETMUTEX_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && defined(NETMUTEX_BUILDING)
#define NETMUTEX_API __attribute__((visibility("default")))
#else
#define NETMUTEX_API
#endif

/* ---- version ----------------------------------------------------------- */

/* The version of this header, MAJOR.MINOR.PATCH.  NETMUTEX_VERSION_HEX packs
 * it as 0xMMmmpp, so that code can test for a release at compile time:
 * #if NETMUTEX_VERSION_HEX >= 0x000200.  The build refuses a header whose
 * numbers differ from configure's version (src/api/version.c). */
#define NETMUTEX_VERSION_MAJOR 0
#define NETMUTEX_VERSION_MINOR 3
#define NETMUTEX_VERSION_PATCH 0
#define NETMUTEX_VERSION_HEX                                                  \
    ((NETMUTEX_VERSION_MAJOR << 16) | (NETMUTEX_VERSION_MINOR << 8) |         \
     NETMUTEX_VERSION_PATCH)

/* The version of the library that is actually loaded, which may be newer
 * than the header a program was built with: "MAJOR.MINOR.PATCH", a static
 * string, and the same as NETMUTEX_VERSION_HEX would be in its header. */
NETMUTEX_API const char *netmutex_version(void);
NETMUTEX_API unsigned int netmutex_version_hex(void);

/* Longest mutex name, in bytes.  Names are NUL-terminated byte strings; any
 * other byte (spaces, newlines, braces, UTF-8, binary) is allowed, and the
 * name is sent to Redis as a separate argument, never formatted into a
 * command string. */
#define NETMUTEX_NAME_MAX 1024

/* Mutex types, as in pthread_mutexattr_settype(3). */
enum {
    NETMUTEX_NORMAL = 0,     /* relock by the owner: EDEADLK (never hangs) */
    NETMUTEX_ERRORCHECK = 1, /* relock by the owner: EDEADLK */
    NETMUTEX_RECURSIVE = 2,  /* relock by the owner: depth + 1, one Redis key */
    NETMUTEX_DEFAULT = NETMUTEX_NORMAL
};

/* ---- attributes ------------------------------------------------------ */

/* Called once, from the library's background thread, when a lease this
 * process held was lost (see netmutex_attr_setlostfn).  It must return
 * quickly and must not call netmutex functions on the same mutex. */
typedef void (*netmutex_lost_fn)(const char *name, void *arg);

/* Opaque, like pthread_mutexattr_t: reach it only through the calls below.
 * Its size is fixed for good (64 bytes on LP64) and leaves room for new
 * attributes, so a program built against this header keeps working with
 * any later 1.x library. */
typedef struct netmutex_attr {
    unsigned int nm_magic;     /* private: set by netmutex_attr_init */
    unsigned int nm_opaque_u[7];
    void *nm_opaque_p[4];
} netmutex_attr_t;

NETMUTEX_API int netmutex_attr_init(netmutex_attr_t *attr);
NETMUTEX_API int netmutex_attr_destroy(netmutex_attr_t *attr);
/* EINVAL for an unknown type. */
NETMUTEX_API int netmutex_attr_settype(netmutex_attr_t *attr, int type);
NETMUTEX_API int netmutex_attr_gettype(const netmutex_attr_t *attr, int *type);
/* Lease length in milliseconds: how long the Redis key lives if its holder
 * vanishes.  0 selects the configured default (netmutex_config_t.lease_ms).
 * EINVAL outside [NETMUTEX_LEASE_MIN_MS, NETMUTEX_LEASE_MAX_MS] (except 0). */
#define NETMUTEX_LEASE_MIN_MS 10u
#define NETMUTEX_LEASE_MAX_MS (24u * 3600u * 1000u)
NETMUTEX_API int netmutex_attr_setlease(netmutex_attr_t *attr, unsigned int ms);
NETMUTEX_API int netmutex_attr_getlease(const netmutex_attr_t *attr, unsigned int *ms);

/* Robustness, as pthread_mutexattr_setrobust(3).
 * NETMUTEX_STALLED (default): when the previous holder's lease expired
 *   instead of being released, the next locker simply gets the mutex (0).
 *   (pthread would block forever; a lease makes that unnecessary.)
 * NETMUTEX_ROBUST: that locker gets EOWNERDEAD, owning the mutex; see
 *   netmutex_consistent().  EINVAL for another value. */
enum { NETMUTEX_STALLED = 0, NETMUTEX_ROBUST = 1 };
NETMUTEX_API int netmutex_attr_setrobust(netmutex_attr_t *attr, int robust);
NETMUTEX_API int netmutex_attr_getrobust(const netmutex_attr_t *attr, int *robust);

/* Automatic renewal by the watchdog (default 1: on).  With 0 the lease
 * runs out LEASE ms after the acquisition unless netmutex_extend() pushes
 * it further. */
NETMUTEX_API int netmutex_attr_setautorenew(netmutex_attr_t *attr, int on);
NETMUTEX_API int netmutex_attr_getautorenew(const netmutex_attr_t *attr, int *on);

/* Fair mode (default 0).  Waiters from different processes are always
 * served in arrival order: they queue in Redis, and a release hands the lock
 * to the head of that queue.  With fair mode on, the mutex also gives up
 * the throughput tricks inside a process: no cohort hand-off (every
 * acquisition takes its own turn in the Redis queue and gets its own
 * fence), and a thread that unlocks and locks again cannot overtake a
 * thread of its process that was already waiting. */
NETMUTEX_API int netmutex_attr_setfair(netmutex_attr_t *attr, int on);
NETMUTEX_API int netmutex_attr_getfair(const netmutex_attr_t *attr, int *on);

/* Lease caching (on by default): after the last local unlock the process
 * keeps the Redis lease while no other process wants the name, and the next
 * local lock takes it without a round trip; another process asking for it
 * gets it back within a few round trips.  ON: 1 or 0.  Robust mutexes,
 * mutexes without autorenew and quorum mode are never cached; see
 * netmutex_configure() for the process-wide switch.  EINVAL. */
NETMUTEX_API int netmutex_attr_setcache(netmutex_attr_t *attr, int on);
NETMUTEX_API int netmutex_attr_getcache(const netmutex_attr_t *attr, int *on);

/* Deadlock detection across processes and hosts (on for ERRORCHECK
 * mutexes, off for the others, unless NETMUTEX_DEADLOCK=detect in the
 * environment turns it on for every lock; this attribute overrides both).
 * A lock call of a mutex with detection that waits longer than about
 * 150 ms publishes, with an expiry, what it waits for and which mutexes
 * it holds; when these waits close a cycle across processes, hosts and
 * threads, one waiter of the cycle (the youngest wait) returns EDEADLK,
 * holding nothing new, and the others go on.  A cycle is read twice
 * before a waiter is chosen, so one that breaks by itself gives no
 * EDEADLK.  Not in quorum mode.  ON: 1 or 0.  EINVAL.  getdeadlock gives
 * what a mutex made with ATTR does. */
NETMUTEX_API int netmutex_attr_setdeadlock(netmutex_attr_t *attr, int on);
NETMUTEX_API int netmutex_attr_getdeadlock(const netmutex_attr_t *attr, int *on);

/* The callback for a lost lease of mutexes made with ATTR (FN NULL: the
 * global one of netmutex_config_t, if any). */
NETMUTEX_API int netmutex_attr_setlostfn(netmutex_attr_t *attr, netmutex_lost_fn fn,
                                         void *arg);

/* ---- the mutex ------------------------------------------------------- */

/* Opaque, like pthread_mutex_t: reach it only through the calls below.
 * Its size is fixed for good (96 bytes on LP64) and leaves room for new
 * state.  Only its first two members are public, and only so that
 * NETMUTEX_INITIALIZER can build one at compile time: they keep their
 * place and meaning in every 1.x version, and a static initializer sets
 * nothing else, so adding private state never breaks a built program. */
typedef struct netmutex {
    const char *nm_name;  /* NETMUTEX_INITIALIZER's name, NULL once inited */
    unsigned int nm_init; /* lifecycle marker; NETMUTEX_INITIALIZER's type */
    unsigned int nm_opaque_u[5];
    void *nm_opaque_p[8];
} netmutex_t;

/* Static initializer for globals: the process-local state behind it is
 * created lazily and thread-safely by the first call that uses it.  NAME must
 * stay valid for as long as the mutex is used (a string literal is typical).
 * TYPE is one of NETMUTEX_NORMAL, ...; any other value makes every call on
 * the mutex fail with EINVAL.  The private blocks are zero (spelled out,
 * so -Wextra has nothing to say), and new state only ever goes inside them. */
#define NETMUTEX_STATIC_MARK_ 0x6e6d7300u /* "nms": see nm_init */
#define NETMUTEX_INITIALIZER_TYPE(name, type) \
    { (name), NETMUTEX_STATIC_MARK_ ^ (unsigned int)(type), { 0 }, { 0 } }
#define NETMUTEX_INITIALIZER(name) NETMUTEX_INITIALIZER_TYPE(name, NETMUTEX_DEFAULT)

/* NAME is copied.  Mutexes of the same name in one process share one
 * process-wide lock state: they exclude each other exactly as they exclude
 * other processes.  ATTR may be NULL for the defaults.
 * EINVAL: NULL mutex or name, empty or oversized name, bad attr. */
NETMUTEX_API int netmutex_init(netmutex_t *m, const char *name,
                               const netmutex_attr_t *attr);
/* EBUSY if M is locked (by any thread of this process).  Another handle of
 * the same name may be destroyed while M is locked: like two pthread
 * mutexes, each netmutex_t is its own object. */
NETMUTEX_API int netmutex_destroy(netmutex_t *m);

/* Blocks until the mutex is ours.  While Redis is unreachable it keeps
 * retrying until the connection returns.  A waiter sleeps until a release
 * is published (or the holder's lease would have run out); it never polls
 * at a fixed interval while the server is reachable.
 * EDEADLK: the calling thread already holds it (not RECURSIVE); or, with
 *          deadlock detection (netmutex_attr_setdeadlock), this wait closed
 *          a cycle of waits across threads, processes or hosts and was
 *          chosen to end it: nothing new is held (timedlock and clocklock
 *          too; a condition wait's re-take of the mutex is such a wait).
 * EAGAIN:  RECURSIVE depth would overflow.
 * EOWNERDEAD: (ROBUST only) the mutex is ours, but its previous holder's
 *          lease expired while it held it; call netmutex_consistent() once
 *          the protected state is repaired, before unlocking.
 * ENOTRECOVERABLE: a robust holder unlocked after EOWNERDEAD without
 *          netmutex_consistent(); only netmutex_break() clears that.
 * The last two apply to trylock, timedlock and clocklock as well. */
NETMUTEX_API int netmutex_lock(netmutex_t *m);

/* Never waits for another holder.
 * EBUSY:   held by anyone else: another thread, process or host; for
 *          NORMAL and ERRORCHECK also when the caller holds it, like pthread.
 * EAGAIN:  Redis could not be reached (after a bounded number of redials). */
NETMUTEX_API int netmutex_trylock(netmutex_t *m);

/* Like netmutex_lock, but gives up at ABSTIME (CLOCK_REALTIME).
 * ETIMEDOUT: the deadline passed, also while Redis was unreachable.
 * EINVAL:    abstime is NULL or tv_nsec is outside [0, 1e9). */
NETMUTEX_API int netmutex_timedlock(netmutex_t *m, const struct timespec *abstime);

/* netmutex_timedlock measured on CLOCKID: CLOCK_MONOTONIC or CLOCK_REALTIME
 * (glibc's pthread_mutex_clocklock).  EINVAL for any other clock. */
NETMUTEX_API int netmutex_clocklock(netmutex_t *m, clockid_t clockid,
                                    const struct timespec *abstime);

/* EPERM:  the calling thread does not hold the mutex (every type).
 * ENOLCK: our lease was lost while we held the mutex: the key expired or now
 *         holds another owner's token.  Nothing is deleted.
 * EIO:    the lock is released in this process, but the server could not
 *         be told; the key expires by itself when its lease runs out.
 * Whatever it returns, the calling thread no longer holds the mutex (except
 * EPERM, where it never did), and nothing that is not ours is ever deleted. */
NETMUTEX_API int netmutex_unlock(netmutex_t *m);

/* ---- robustness, leases and fences -------------------------------------- */

/* After EOWNERDEAD: the protected state is consistent again.  EPERM if the
 * caller does not hold M, EINVAL if M is not in the EOWNERDEAD state. */
NETMUTEX_API int netmutex_consistent(netmutex_t *m);

/* The fencing token of the caller's current hold of M: strictly greater
 * than that of every earlier acquisition of the name, in any process, kept
 * in Redis and never reset.  Hand it to the protected resource so it can
 * reject a writer whose lease has ended (a paused process, say).
 * Acquisitions handed from thread to thread inside one process without a
 * round trip (see netmutex_config_t.cohort_max) share one token.
 * EPERM if the caller does not hold M. */
NETMUTEX_API int netmutex_fence(netmutex_t *m, uint64_t *token);

/* Before a critical side effect: is M still ours, and for how long at
 * least?  *MS_LEFT is the time until the lease could end at the server, by
 * this host's monotonic clock, minus a safety margin (5% + 2 ms).  Purely
 * local: no round trip.
 * ENOLCK: the lease was lost (the lost-lease callback has run or is about
 * to); EPERM: the caller does not hold M. */
NETMUTEX_API int netmutex_validity(netmutex_t *m, uint64_t *ms_left);

/* Sets the lease of the caller's hold of M to MS from now, if it is still
 * ours at the server (for mutexes without automatic renewal, but allowed
 * on any).  EINVAL for MS outside the lease range, EPERM if the caller does
 * not hold M, ENOLCK if the lease was lost, EIO if the server could not be
 * reached. */
NETMUTEX_API int netmutex_extend(netmutex_t *m, unsigned int ms);

/* Administrator's tool: frees NAME whoever holds it (the holder's unlock
 * will return ENOLCK) and clears ENOTRECOVERABLE; the fence is kept.
 * 0 when it was held or marked, ENOENT when there was nothing to free,
 * EINVAL, EAGAIN (server unreachable), EACCES. */
NETMUTEX_API int netmutex_break(const char *name);

/* ---- condition variables ----------------------------------------------- */

/* A condition variable across processes and hosts, as pthread_cond_t is
 * across threads: every process using the name is a thread of one
 * program.  Its waiters are kept in Redis, under keys of the condition's
 * own (netmutex_cond_wait(3) has the protocol), so any netmutex may guard
 * it.  Not in quorum mode: every call that needs the server returns
 * ENOTSUP there (the servers' separate lists of waiters would need a
 * quorum protocol of their own to agree on who was signalled).
 *
 * netmutex_condattr_t: opaque, like pthread_condattr_t; its size is fixed
 * for good (64 bytes on LP64) and leaves room for new attributes. */
typedef struct netmutex_condattr {
    unsigned int nm_magic;     /* private: set by netmutex_condattr_init */
    unsigned int nm_opaque_u[7];
    void *nm_opaque_p[4];
} netmutex_condattr_t;

NETMUTEX_API int netmutex_condattr_init(netmutex_condattr_t *attr);
NETMUTEX_API int netmutex_condattr_destroy(netmutex_condattr_t *attr);
/* The clock of netmutex_cond_timedwait: CLOCK_REALTIME (default) or
 * CLOCK_MONOTONIC, as pthread_condattr_setclock(3).  EINVAL for another. */
NETMUTEX_API int netmutex_condattr_setclock(netmutex_condattr_t *attr, clockid_t clock);
NETMUTEX_API int netmutex_condattr_getclock(const netmutex_condattr_t *attr,
                                            clockid_t *clock);

/* Opaque, like pthread_cond_t; its size is fixed for good (96 bytes on
 * LP64).  As with netmutex_t, only its first two members are public, for
 * NETMUTEX_COND_INITIALIZER, and keep their place in every 1.x version. */
typedef struct netmutex_cond {
    const char *nm_name;  /* NETMUTEX_COND_INITIALIZER's name, NULL once inited */
    unsigned int nm_init; /* lifecycle marker */
    unsigned int nm_opaque_u[5];
    void *nm_opaque_p[8];
} netmutex_cond_t;

/* Static initializer (CLOCK_REALTIME): the process-local state behind it
 * is created by the first call that uses it.  NAME must stay valid while
 * the condition is used. */
#define NETMUTEX_COND_STATIC_MARK_ 0x6e6d6373u /* "nmcs" */
#define NETMUTEX_COND_INITIALIZER(name) \
    { (name), NETMUTEX_COND_STATIC_MARK_, { 0 }, { 0 } }

/* NAME is copied (the limits of a mutex's name); ATTR may be NULL.
 * EINVAL, ENOMEM. */
NETMUTEX_API int netmutex_cond_init(netmutex_cond_t *c, const char *name,
                                    const netmutex_condattr_t *attr);
/* EBUSY while a thread of this process waits on C; EINVAL. */
NETMUTEX_API int netmutex_cond_destroy(netmutex_cond_t *c);

/* Releases M, which the calling thread holds, and waits until C is
 * signalled, as one step for any signaller that holds M; returns with M
 * held again, whatever it returns (but EINVAL and EPERM, which touch
 * nothing).  Spurious wake-ups happen (rarely): loop on the predicate.
 * EINVAL:  a bad C or M, M recursive and locked more than once.
 * EPERM:   the calling thread does not hold M.
 * EOWNERDEAD, ENOTRECOVERABLE: as netmutex_lock, taking M again.
 * ENOLCK:  M's lease had been lost when the wait released it; the call
 *          returns at once, M taken again.
 * ENOTSUP: quorum mode (M is left held).
 * EACCES, EPROTO, ENOMEM: the server refused, or memory ran out (M is
 *          left held).
 * A server that cannot be reached, or a Sentinel failover, makes a
 * spurious wake-up (0), never a hang. */
NETMUTEX_API int netmutex_cond_wait(netmutex_cond_t *c, netmutex_t *m);
/* The same until ABSTIME on C's clock: ETIMEDOUT, M held again; EINVAL for
 * a NULL ABSTIME or a tv_nsec outside [0, 1e9).  A waiter signalled as its
 * deadline passed returns 0: it consumed the signal. */
NETMUTEX_API int netmutex_cond_timedwait(netmutex_cond_t *c, netmutex_t *m,
                                         const struct timespec *abstime);
/* The same on CLOCKID, CLOCK_REALTIME or CLOCK_MONOTONIC (EINVAL). */
NETMUTEX_API int netmutex_cond_clockwait(netmutex_cond_t *c, netmutex_t *m, clockid_t clockid,
                                         const struct timespec *abstime);

/* Wakes at least one thread, of any process, waiting on C now (signal) or
 * all of them (broadcast); a signal with no waiter is not remembered.  The
 * caller may hold the guarding mutex or not, as with pthread.
 * EINVAL, ENOTSUP (quorum mode), EAGAIN (the server could not be reached:
 * the signal may be lost), EACCES, EPROTO, ENOMEM. */
NETMUTEX_API int netmutex_cond_signal(netmutex_cond_t *c);
NETMUTEX_API int netmutex_cond_broadcast(netmutex_cond_t *c);

/* ---- read-write locks --------------------------------------------------- */

/* A read-write lock across processes and hosts, as pthread_rwlock_t is
 * across threads: many readers at once, or one writer.  Every hold is a
 * lease of its own in Redis (a read share, or the write lock), renewed by
 * the background thread and reported lost as a mutex's is, so a holder
 * that dies holds nothing for longer than its lease.  A thread may take
 * the read lock again while it holds it (each one unlocked once), never
 * the write lock while it holds either.  Waiters queue in Redis: writers
 * in arrival order, and, by default, a waiting writer keeps new readers
 * out so that writers are not starved (netmutex_rwlockattr_setkind).  A
 * rwlock and a mutex of the same name are two locks.  Not in quorum mode:
 * every call that needs the server returns ENOTSUP there.
 *
 * netmutex_rwlockattr_t: opaque, like pthread_rwlockattr_t; its size is
 * fixed for good (64 bytes on LP64) and leaves room for new attributes. */
typedef struct netmutex_rwlockattr {
    unsigned int nm_magic;     /* private: set by netmutex_rwlockattr_init */
    unsigned int nm_opaque_u[7];
    void *nm_opaque_p[4];
} netmutex_rwlockattr_t;

/* Who goes first, as glibc's pthread_rwlockattr_setkind_np(3):
 * NETMUTEX_RWLOCK_PREFER_WRITER (default): a writer waiting keeps new
 *   readers out, so a stream of readers cannot starve the writers;
 * NETMUTEX_RWLOCK_PREFER_READER: a reader waits only for a writer that
 *   holds the lock, and one that waits for it gets it before the writers
 *   waiting (writers may starve).
 * The choice is each handle's: it decides how its own readers wait. */
enum {
    NETMUTEX_RWLOCK_PREFER_WRITER = 0,
    NETMUTEX_RWLOCK_PREFER_READER = 1,
    NETMUTEX_RWLOCK_DEFAULT = NETMUTEX_RWLOCK_PREFER_WRITER
};

NETMUTEX_API int netmutex_rwlockattr_init(netmutex_rwlockattr_t *attr);
NETMUTEX_API int netmutex_rwlockattr_destroy(netmutex_rwlockattr_t *attr);
/* EINVAL for another kind. */
NETMUTEX_API int netmutex_rwlockattr_setkind(netmutex_rwlockattr_t *attr, int kind);
NETMUTEX_API int netmutex_rwlockattr_getkind(const netmutex_rwlockattr_t *attr, int *kind);
/* The lease of each hold, as netmutex_attr_setlease (0: the configured
 * lease; EINVAL outside [NETMUTEX_LEASE_MIN_MS, NETMUTEX_LEASE_MAX_MS]). */
NETMUTEX_API int netmutex_rwlockattr_setlease(netmutex_rwlockattr_t *attr, unsigned int ms);
NETMUTEX_API int netmutex_rwlockattr_getlease(const netmutex_rwlockattr_t *attr,
                                              unsigned int *ms);
/* Lease caching of read shares (off by default): after the last local
 * reader's unlock the process keeps its read share while no writer wants
 * the lock, and the next rdlock of any of its threads reads through it
 * without a round trip (several threads at once through one share); a
 * writer of any process that finds it kept out makes every caching process
 * give its share back as soon as no local reader is in it, and keeps new
 * local readers out meanwhile.  ON: 1 or 0.  NETMUTEX_CACHE=0 (or
 * NETMUTEX_CACHE_OFF, netmutex_configure()) turns it off for the process,
 * and cache_idle_ms bounds how long an unused share is kept.  EINVAL. */
NETMUTEX_API int netmutex_rwlockattr_setcache(netmutex_rwlockattr_t *attr, int on);
NETMUTEX_API int netmutex_rwlockattr_getcache(const netmutex_rwlockattr_t *attr, int *on);
/* The callback for a lost hold, as netmutex_attr_setlostfn (FN NULL: the
 * global one of netmutex_config_t). */
NETMUTEX_API int netmutex_rwlockattr_setlostfn(netmutex_rwlockattr_t *attr,
                                               netmutex_lost_fn fn, void *arg);

/* Opaque, like pthread_rwlock_t; its size is fixed for good (96 bytes on
 * LP64).  As with netmutex_t, only its first two members are public, for
 * NETMUTEX_RWLOCK_INITIALIZER, and keep their place in every 1.x version. */
typedef struct netmutex_rwlock {
    const char *nm_name;  /* NETMUTEX_RWLOCK_INITIALIZER's name, NULL once inited */
    unsigned int nm_init; /* lifecycle marker */
    unsigned int nm_opaque_u[5];
    void *nm_opaque_p[8];
} netmutex_rwlock_t;

/* Static initializer (the default attributes): the process-local state
 * behind it is created by the first call that uses it.  NAME must stay
 * valid while the lock is used. */
#define NETMUTEX_RWLOCK_STATIC_MARK_ 0x6e6d7273u /* "nmrs" */
#define NETMUTEX_RWLOCK_INITIALIZER(name) \
    { (name), NETMUTEX_RWLOCK_STATIC_MARK_, { 0 }, { 0 } }

/* NAME is copied (the limits of a mutex's name); ATTR may be NULL.
 * Handles of one name in one process share its holds: a thread's hold
 * through one is its hold through the other.  EINVAL, ENOMEM. */
NETMUTEX_API int netmutex_rwlock_init(netmutex_rwlock_t *rw, const char *name,
                                      const netmutex_rwlockattr_t *attr);
/* EBUSY while a thread of this process holds the lock through RW; EINVAL. */
NETMUTEX_API int netmutex_rwlock_destroy(netmutex_rwlock_t *rw);

/* The read lock: blocks while a writer holds RW (and, preferring writers,
 * while one waits).  A thread that holds it takes it again at once.
 * EDEADLK: the calling thread holds the write lock.
 * EAGAIN:  the calling thread's read locks would overflow (UINT_MAX).
 * ENOTSUP: quorum mode.  EINVAL, EACCES, EPROTO, ENOMEM as netmutex_lock;
 * while Redis is unreachable it keeps trying. */
NETMUTEX_API int netmutex_rwlock_rdlock(netmutex_rwlock_t *rw);
/* Never waits.  EBUSY: a writer holds RW or, preferring writers, waits;
 * also when the calling thread holds the write lock.  EAGAIN: Redis could
 * not be reached, or the read locks would overflow. */
NETMUTEX_API int netmutex_rwlock_tryrdlock(netmutex_rwlock_t *rw);
/* Until ABSTIME on CLOCK_REALTIME: ETIMEDOUT; EINVAL for a NULL ABSTIME or
 * a tv_nsec outside [0, 1e9). */
NETMUTEX_API int netmutex_rwlock_timedrdlock(netmutex_rwlock_t *rw,
                                             const struct timespec *abstime);
/* The same on CLOCKID, CLOCK_REALTIME or CLOCK_MONOTONIC (EINVAL). */
NETMUTEX_API int netmutex_rwlock_clockrdlock(netmutex_rwlock_t *rw, clockid_t clockid,
                                             const struct timespec *abstime);

/* The write lock: blocks while anybody holds RW; writers get it in the
 * order they asked for it.  EDEADLK: the calling thread holds RW (read or
 * write).  ENOTSUP, EINVAL, EACCES, EPROTO, ENOMEM as rdlock. */
NETMUTEX_API int netmutex_rwlock_wrlock(netmutex_rwlock_t *rw);
/* Never waits.  EBUSY: anybody holds RW, the calling thread included, or
 * a writer waits before it.  EAGAIN: Redis could not be reached. */
NETMUTEX_API int netmutex_rwlock_trywrlock(netmutex_rwlock_t *rw);
NETMUTEX_API int netmutex_rwlock_timedwrlock(netmutex_rwlock_t *rw,
                                             const struct timespec *abstime);
NETMUTEX_API int netmutex_rwlock_clockwrlock(netmutex_rwlock_t *rw, clockid_t clockid,
                                             const struct timespec *abstime);

/* Releases the calling thread's hold: the write lock, or one of its read
 * locks (the share goes back with the last).  EPERM: the calling thread
 * holds neither.  ENOLCK: the hold's lease was lost (the lost-hold
 * callback has run or is about to).  EIO: released here, but the server
 * could not be told: the hold runs out by itself. */
NETMUTEX_API int netmutex_rwlock_unlock(netmutex_rwlock_t *rw);

/* The fencing token of the calling thread's hold of RW.  A writer's is
 * strictly greater than every earlier writer's (and reader's) fence of the
 * name, as a mutex's.  A reader's is drawn while its share keeps writers
 * out: greater than the fence of every writer before it, smaller than the
 * fence of every writer after it -- the writer fence it reads under.  A
 * resource that remembers the greatest writer fence it accepted rejects a
 * reader's whose fence is smaller: a writer came after that reader's share
 * ended.  EPERM: the calling thread does not hold RW. */
NETMUTEX_API int netmutex_rwlock_fence(netmutex_rwlock_t *rw, uint64_t *token);

/* ---- counting semaphores ------------------------------------------------ */

/* A counting semaphore across processes and hosts: at most PERMITS
 * threads of the whole cluster hold a permit of a name at once.  Unlike
 * sem_t's, a permit belongs to the thread that took it: it is a lease of
 * its own in Redis (a share of the name's bounded set), renewed by the
 * background thread and reported lost as a mutex's hold is, so a permit
 * held by a process that dies comes back when its lease runs out.  The
 * thread gives it back with netmutex_sem_post.  A thread may hold several
 * permits (each waited for, each posted once).  Waiters queue in Redis and
 * are served in arrival order, each woken by a push.  Every process must
 * give a name the same PERMITS: one that gives another number while a
 * permit of the name is held is refused (EINVAL), never mixed in.  A
 * semaphore, a rwlock and a mutex of the same name are three locks.  Not
 * in quorum mode: every call that needs the server returns ENOTSUP there.
 *
 * netmutex_semattr_t: opaque; its size is fixed for good (64 bytes on
 * LP64) and leaves room for attributes to come (there are none yet). */
typedef struct netmutex_semattr {
    unsigned int nm_magic;     /* private: set by netmutex_semattr_init */
    unsigned int nm_opaque_u[7];
    void *nm_opaque_p[4];
} netmutex_semattr_t;

NETMUTEX_API int netmutex_semattr_init(netmutex_semattr_t *attr);
/* EINVAL: ATTR was not initialized. */
NETMUTEX_API int netmutex_semattr_destroy(netmutex_semattr_t *attr);

/* Opaque; its size is fixed for good (96 bytes on LP64), with room for
 * what is to come. */
typedef struct netmutex_sem {
    unsigned int nm_init;      /* private: lifecycle marker */
    unsigned int nm_opaque_u[7];
    void *nm_opaque_p[8];
} netmutex_sem_t;

/* The most permits a semaphore may have. */
#define NETMUTEX_SEM_PERMITS_MAX 65536

/* NAME is copied (the limits of a mutex's name); PERMITS in [1,
 * NETMUTEX_SEM_PERMITS_MAX]; ATTR may be NULL.  Talks to no server.
 * EINVAL, ENOMEM. */
NETMUTEX_API int netmutex_sem_init(netmutex_sem_t *s, const char *name, unsigned int permits,
                                   const netmutex_semattr_t *attr);
/* EBUSY while a thread of this process holds a permit through S; EINVAL. */
NETMUTEX_API int netmutex_sem_destroy(netmutex_sem_t *s);

/* Takes a permit, waiting while all are held.  EINVAL: S is not a
 * semaphore, or the name is in use with another number of permits.
 * ENOTSUP: quorum mode.  EACCES, EPROTO, ENOMEM as netmutex_lock; while
 * Redis is unreachable it keeps trying. */
NETMUTEX_API int netmutex_sem_wait(netmutex_sem_t *s);
/* Never waits.  EAGAIN: every permit is held (as sem_trywait), or Redis
 * could not be reached. */
NETMUTEX_API int netmutex_sem_trywait(netmutex_sem_t *s);
/* Until ABSTIME on CLOCK_REALTIME: ETIMEDOUT; EINVAL for a NULL ABSTIME or
 * a tv_nsec outside [0, 1e9). */
NETMUTEX_API int netmutex_sem_timedwait(netmutex_sem_t *s, const struct timespec *abstime);
/* The same on CLOCKID, CLOCK_REALTIME or CLOCK_MONOTONIC (EINVAL). */
NETMUTEX_API int netmutex_sem_clockwait(netmutex_sem_t *s, clockid_t clockid,
                                        const struct timespec *abstime);
/* Gives back the calling thread's permit (its latest, if it holds
 * several).  EPERM: the calling thread holds none through S's name.
 * ENOLCK: the permit's lease was lost (the lost-hold callback has run or
 * is about to).  EIO: given back here, but the server could not be told:
 * the permit comes back when its lease runs out. */
NETMUTEX_API int netmutex_sem_post(netmutex_sem_t *s);
/* The permits no thread of the cluster holds, as the server counts them
 * (a snapshot: it may change at once).  EINVAL (also: the name is in use
 * with another number of permits), ENOTSUP, EAGAIN (Redis could not be
 * reached), EACCES, EPROTO, ENOMEM. */
NETMUTEX_API int netmutex_sem_getvalue(netmutex_sem_t *s, int *value);

/* ---- call sites ---------------------------------------------------------- */

/* Names the source FILE and LINE of the calling thread's next lock call,
 * for lock-order checking (NETMUTEX_LOCKDEP=1) to report instead of a
 * return address: the next mutex, read or write lock or permit this
 * thread takes gets the site, and the site is then forgotten, so it never
 * names a later hold.  FILE NULL (LINE 0) forgets a site no hold took (the
 * call failed, or made no hold).  FILE must live as long as the hold: a
 * string literal, __FILE__.  <netmutex/pthread.h> calls it for every lock
 * call when NETMUTEX_CALL_SITES is defined (netmutex_pthread(3)).
 * Costs a store; needs no configuration.  0, EINVAL (LINE below 1 with a
 * FILE, or not 0 without one). */
NETMUTEX_API int netmutex_call_site(const char *file, int line);

/* ---- inspection ---------------------------------------------------------- */

/* What the servers know about NAME, for people and tools (netmutex(1)
 * status).  Changes nothing.  In quorum mode it reports what a majority of
 * the servers agree on: NAME is held when a quorum holds the same token.
 * 0, EINVAL, EAGAIN (fewer than a quorum of servers answered), EACCES,
 * EPROTO, ENOMEM. */
#define NETMUTEX_HOLDER_MAX 320
typedef struct netmutex_status {
    int held;                         /* 1: someone holds NAME now */
    char holder[NETMUTEX_HOLDER_MAX]; /* "host:pid:tid" of the holder, "" if free */
    int64_t since_ms;                 /* when it was taken: Unix time in ms by
                                         the holder's clock (0 if free) */
    int64_t ttl_ms;                   /* what is left of the lease unless it is
                                         renewed; -1 if free */
    uint64_t fence;                   /* the latest fencing token handed out for
                                         NAME, 0 if it was never locked */
    unsigned int waiters;             /* waiters queued in Redis (one per
                                         process; quorum mode never queues) */
    int unrecoverable;                /* marked ENOTRECOVERABLE */
    int cached;                       /* held by a process that caches it: it
                                         may be idle there, and is given back
                                         when another process asks */
    int idle;                         /* cached, and that process said a while
                                         ago (~100 ms) that none of its
                                         threads is in it */
    /* Room for what later versions report; netmutex_status zeroes it. */
    void *nm_reserved[8];
} netmutex_status_t;
NETMUTEX_API int netmutex_status(const char *name, netmutex_status_t *st);

/* What the servers know about the read-write lock or the semaphore NAME,
 * for people and tools (netmutex(1) status --rwlock, --sem).  Changes
 * nothing.  A rwlock, a semaphore and a mutex of one name are three locks:
 * each call reads its own kind's keys.  Shares whose lease ran out and
 * waiters that stopped refreshing their place are not counted, as the
 * next lock call would drop them.
 * 0, EINVAL, ENOTSUP (quorum mode, where neither kind exists), EAGAIN (the
 * server could not be reached), EACCES, EPROTO, ENOMEM. */
typedef struct netmutex_shared_status {
    unsigned int shares;              /* read shares held (rwlock: one per
                                         reading thread), or permits held
                                         (semaphore); reservations for
                                         served waiters included */
    unsigned int permits;             /* semaphore: its number of permits,
                                         as the server keeps it while one
                                         is held; 0 when none is, and for
                                         a rwlock */
    int writer;                       /* rwlock: 1 while a writer holds it */
    char holder[NETMUTEX_HOLDER_MAX]; /* the writer's "host:pid:tid", "" */
    int64_t since_ms;                 /* when the writer took it: Unix ms by
                                         the server's clock (0: no writer) */
    int64_t ttl_ms;                   /* what is left of the writer's lease;
                                         -1 without a writer */
    uint64_t fence;                   /* the writer's fencing token, 0
                                         without a writer */
    unsigned int writers_waiting;     /* rwlock: writers queued in Redis */
    unsigned int waiters;             /* readers queued (rwlock), or
                                         threads waiting for a permit */
    /* Room for what later versions report; the calls zero it. */
    void *nm_reserved[8];
} netmutex_shared_status_t;
NETMUTEX_API int netmutex_rwlock_status(const char *name, netmutex_shared_status_t *st);
NETMUTEX_API int netmutex_sem_status(const char *name, netmutex_shared_status_t *st);

/* Every lock held now under the configured key prefix, for people and
 * tools (netmutex(1) list).  Changes nothing.
 *
 * FN is called once per held name that PATTERN matches as a whole, in
 * byte order (strcmp), with what netmutex_status() says of it: holder,
 * since, ttl, fence, waiters, cached.  A name nobody holds is not handed
 * out (the servers keep nothing of a free name but its fence).  A callback
 * rather than a caller's array: the number of locks has no bound the
 * caller could know, and FN may stop early (it returns non-zero; then
 * netmutex_list returns ECANCELED).  FN runs on the calling thread after
 * the servers were read, with no lock of the library held: it may call
 * any netmutex function.  NAME and ST are valid during the call only.
 *
 * PATTERN: a Redis glob (SCAN MATCH) on the name: '*' any bytes, '?' one
 * byte, [abc] / [^a-c] a set, '\' quotes the next byte; NULL lists every
 * name.  The key prefix is matched literally.
 *
 * Where it looks: the one server (or the master the sentinels name),
 * every server of a quorum list, of which a majority must answer (a key
 * on fewer than a quorum is no held lock, as netmutex_status says), every
 * master of a Redis Cluster, all of which must answer.  Each server that
 * does not answer is logged (warn).  Every request is bounded by the
 * configured io_timeout_ms (a dial by connect_timeout_ms); a listing takes
 * one request per 1000 keys per server, then one status per name found.
 *
 * INFO (may be NULL) says where it looked, for messages such as "2 of 3
 * servers answered"; it is filled whatever the result.
 *
 * 0 (also when none is held), ECANCELED (FN stopped it), EINVAL (FN NULL;
 * PATTERN empty, longer than 2 * NETMUTEX_NAME_MAX, ending in a lone '\' or
 * with a '[' never closed; a malformed configuration), EAGAIN (too few
 * servers answered), EACCES, EPROTO, ENOTSUP, ENOMEM. */
typedef int (*netmutex_list_fn)(const char *name, const netmutex_status_t *st, void *arg);
typedef struct netmutex_list_info {
    unsigned int servers;  /* servers asked: 1, the quorum list's, or the
                              cluster's masters (0 if they were not known) */
    unsigned int answered; /* how many of them answered */
    unsigned int needed;   /* how many must: 1, a majority, or all masters */
    int cluster;           /* 1: the servers are a Redis Cluster's masters */
    /* Room for what later versions report; netmutex_list zeroes it. */
    void *nm_reserved[8];
} netmutex_list_info_t;
NETMUTEX_API int netmutex_list(const char *pattern, netmutex_list_fn fn, void *arg,
                               netmutex_list_info_t *info);

/* The read-write locks and semaphores held now under the key prefix (a
 * write lock, a read share or a permit), for people and tools (netmutex(1)
 * list), as netmutex_list lists the mutexes: FN is called once per held
 * lock whose name PATTERN matches, in byte order of the names (a rwlock
 * before a semaphore of the same name), with its KIND and what
 * netmutex_rwlock_status() or netmutex_sem_status() says of it.  Looks
 * where netmutex_list looks, and takes three requests per 1000 keys per
 * server (the keys either kind keeps while it is held or waited for), then
 * one status per name found.  Changes nothing.
 * 0, ECANCELED, EINVAL, EAGAIN, EACCES, EPROTO, ENOMEM as netmutex_list;
 * ENOTSUP in quorum mode, where neither kind exists. */
enum {
    NETMUTEX_KIND_MUTEX = 0,  /* a netmutex_t's name (netmutex_stats) */
    NETMUTEX_KIND_RWLOCK = 1, /* a netmutex_rwlock_t's name */
    NETMUTEX_KIND_SEM = 2,    /* a netmutex_sem_t's name */
    NETMUTEX_KIND_COND = 3    /* a netmutex_cond_t's name (netmutex_stats) */
};
typedef int (*netmutex_list_shared_fn)(const char *name, int kind,
                                       const netmutex_shared_status_t *st, void *arg);
NETMUTEX_API int netmutex_list_shared(const char *pattern, netmutex_list_shared_fn fn,
                                      void *arg, netmutex_list_info_t *info);

/* ---- statistics ----------------------------------------------------------- */

/* What this process did with each lock, for finding contention
 * (netmutex_stats(3)): counters and wait and hold times per name and kind,
 * kept while statistics are on.  NETMUTEX_STATS in the environment, read
 * once at the first call of the library: "1" on, printed to stderr at exit;
 * "publish" on (and published); "0" or unset off; anything else is logged
 * once and means off.  netmutex_set_stats() switches at run time:
 * 0, EINVAL (MODE none of the three).  PUBLISH: on, and every second
 * this process's numbers go to a key of its own on the servers, which
 * expires 3 s after the last write and is deleted when publishing stops,
 * at netmutex_shutdown() and at exit (netmutex_stats_cluster reads them). */
enum {
    NETMUTEX_STATS_OFF = 0,
    NETMUTEX_STATS_ON = 1,
    NETMUTEX_STATS_PUBLISH = 2
};
NETMUTEX_API int netmutex_set_stats(int mode);

/* A distribution of times: how many, their sum, the median, the 99th
 * percentile and the largest, in nanoseconds.  The percentiles come from
 * a log-scale histogram (4 buckets per power of two: within 12.5 %). */
typedef struct netmutex_timing {
    uint64_t count;
    uint64_t total_ns;
    uint64_t p50_ns;
    uint64_t p99_ns;
    uint64_t max_ns;
} netmutex_timing_t;

/* One name's numbers (what each field means per kind: netmutex_stats(3)). */
typedef struct netmutex_stats {
    int kind;                /* NETMUTEX_KIND_* */
    unsigned int processes;  /* how many processes these are the sum of */
    uint64_t acquisitions;   /* locks, read and write locks, permits, waits */
    uint64_t contended;      /* of which had to wait (here or at a server) */
    uint64_t shared;         /* rwlock: of which read locks */
    uint64_t handoffs;       /* mutex: passed to a local waiter */
    uint64_t renewals;       /* leases renewed */
    uint64_t lost;           /* leases lost */
    uint64_t revocations;    /* cached leases asked back by other processes */
    uint64_t reconnects;     /* connections dialed while acquiring it */
    uint64_t deadlocks;      /* EDEADLK from deadlock detection */
    uint64_t signals;        /* condition: netmutex_cond_signal calls */
    uint64_t broadcasts;     /* condition: netmutex_cond_broadcast calls */
    uint64_t timeouts;       /* waits that ended in ETIMEDOUT */
    uint64_t wakeups;        /* condition: waits that returned 0 */
    netmutex_timing_t wait;  /* from the call to the lock (condition: the wait) */
    netmutex_timing_t hold;  /* from the lock to the unlock */
    /* Room for what later versions report; the calls zero it. */
    uint64_t nm_reserved[16];
} netmutex_stats_t;

/* FN is called once per name and kind this process used since statistics
 * were turned on (or since netmutex_stats_reset), destroyed ones too, in
 * descending order of total wait time; it returns non-zero to stop (then
 * ECANCELED).  It runs with no lock of the library held.  NAME and ST are
 * valid during the call only.  0, ECANCELED, EINVAL (FN NULL), ENOMEM. */
typedef int (*netmutex_stats_fn)(const char *name, const netmutex_stats_t *st, void *arg);
NETMUTEX_API int netmutex_stats(netmutex_stats_fn fn, void *arg);

/* Zeroes every name's numbers: 0. */
NETMUTEX_API int netmutex_stats_reset(void);

/* The waits deadlock detection published (netmutex_attr_setdeadlock), for
 * people and tools (netmutex(1) waits, deadlocks): FN is called once per
 * thread that has waited more than about 150 ms for a mutex with
 * detection, or for a read-write lock under NETMUTEX_DEADLOCK=detect, in
 * byte order of the waiters, until it returns non-zero.  WAITER is its
 * "host:pid:tid" (the holder string of netmutex_status), NAME the lock it
 * waits for and WAIT_AS how ("lock" a mutex, "read" or "write" a
 * read-write lock), HELD the NHELD locks it holds and HELD_AS[i] how it
 * holds HELD[i] (the same words), SEQ the wait's number (the highest is
 * the youngest wait, the one a cycle ends), and HOLDER a waiter that
 * holds NAME in a way that keeps this wait out, when that holder waits
 * too (NULL otherwise; of several, the first in byte order): following
 * HOLDER from waiter to waiter walks the wait-for graph.  The strings
 * live until FN returns.  Looks where netmutex_list looks (SCAN), then
 * the record of each waiter and of the holders tried (one, for a mutex);
 * a snapshot, not atomic.  Changes nothing.  0, ECANCELED, EINVAL (FN
 * NULL), EAGAIN, EACCES, EPROTO, ENOMEM as netmutex_list; ENOTSUP in
 * quorum mode. */
typedef struct netmutex_wait {
    const char *waiter;
    const char *name;
    const char *holder;
    unsigned long long seq;
    const char *const *held;
    unsigned int nheld;
    /* After 0.2.0, taken from the reserved room. */
    const char *wait_as;
    const char *const *held_as;
    /* Room for what later versions report; zeroed. */
    void *nm_reserved[2];
} netmutex_wait_t;
typedef int (*netmutex_waits_fn)(const netmutex_wait_t *w, void *arg);
NETMUTEX_API int netmutex_waits(netmutex_waits_fn fn, void *arg, netmutex_list_info_t *info);

/* Every process's published statistics (NETMUTEX_STATS=publish) under the
 * key prefix, for people and tools (netmutex(1) top): FN is called once
 * per name and kind whose name PATTERN (NULL: every name; a glob as
 * netmutex_list's) matches, in descending order of total wait, with the
 * sum of what the processes that published it reported (st->processes:
 * how many), their histograms merged exactly.  Looks where netmutex_list
 * looks, for the keys <prefix>stats:<host>:<pid>, and reads each.
 * Changes nothing.  0, ECANCELED, EINVAL, EAGAIN, EACCES, EPROTO, ENOMEM
 * as netmutex_list. */
NETMUTEX_API int netmutex_stats_cluster(const char *pattern, netmutex_stats_fn fn, void *arg,
                                        netmutex_list_info_t *info);

/* ---- permissions ---------------------------------------------------------- */

/* The Redis ACL rule a netmutex user needs under the key prefix PREFIX
 * (NULL: the configured one, else NETMUTEX_PREFIX, else the default;
 * nothing is configured by the call), for ACL SETUSER after the user's
 * name, "on" and password: "resetkeys ~<prefix>* resetchannels &<prefix>*
 * -@all +<command>...", one line, each argument as redis-cli reads it.
 * Written to BUF, NUL-terminated, when it fits in SIZE bytes;
 * NETMUTEX_ACL_RULE_MAX always suffices.  No server is asked.
 * 0, EINVAL (BUF NULL; PREFIX longer than 256 bytes or holding a brace;
 * with PREFIX NULL, a bad NETMUTEX_PREFIX), ERANGE (SIZE too small; BUF
 * then holds ""), ENOMEM. */
#define NETMUTEX_ACL_RULE_MAX 4096
NETMUTEX_API int netmutex_acl_rule(const char *prefix, char *buf, size_t size);

/* ---- global configuration -------------------------------------------- */

/* Fields left 0 or NULL fall back to the environment variable named beside
 * them, then to the built-in default. */
#define NETMUTEX_DEFAULT_URL "redis://127.0.0.1:6379"
#define NETMUTEX_DEFAULT_PREFIX "netmutex:"
#define NETMUTEX_COHORT_OFF 0xffffffffu
#define NETMUTEX_CACHE_OFF 0xffffffffu
/* netmutex_config_t.tls_verify: no verification of the servers' certificates. */
#define NETMUTEX_TLS_VERIFY_OFF 2
#define NETMUTEX_SERVERS_MAX 9
typedef struct netmutex_config {
    /* NETMUTEX_URL, default NETMUTEX_DEFAULT_URL.  The forms, which
     * netmutex_configure(3) describes in full:
     *   redis://[[user]:password@]host[:port][/db]
     *   unix://[[user]:password@]/absolute/path[?db=N]
     * host may be a name, an IPv4 address or [IPv6]; user and password may
     * use %XX escapes.  A comma-separated list of 2 to NETMUTEX_SERVERS_MAX
     * such URLs names independent masters: quorum mode (Redlock), where
     * every call needs a majority of them (netmutex(3), QUORUM MODE).
     *   redis-sentinel://[[user]:password@]host[:port][,host[:port]...][/db]
     *       [?sentinel_user=U&sentinel_password=P]#MASTERNAME
     * finds the master MASTERNAME through Redis Sentinel (default port
     * 26379) and follows its failovers; user and password are the data
     * nodes', the query's the sentinels'.
     *   redis-cluster://[[user]:password@]host[:port][,host[:port]...]
     * names 1 to 16 seeds of one Redis Cluster (a redis:// or unix:// URL
     * of one of its nodes works too): each name goes to the master of its
     * hash slot (netmutex(3), REDIS CLUSTER).  Sentinel and Cluster URLs
     * stand alone, never in a list.  rediss://, rediss-sentinel:// and
     * rediss-cluster:// are the same over TLS (the tls_* fields below;
     * redis[s]-sentinel:// takes master_tls=yes|no in its query when the
     * masters differ from the sentinels); unix:// is always plain. */
    const char *url;
    /* NETMUTEX_PREFIX, default NETMUTEX_DEFAULT_PREFIX.  At most 256 bytes, no braces. */
    const char *key_prefix;
    unsigned int connect_timeout_ms; /* NETMUTEX_CONNECT_TIMEOUT_MS, 2000 */
    unsigned int io_timeout_ms;      /* NETMUTEX_IO_TIMEOUT_MS, 2000 */
    unsigned int lease_ms;           /* NETMUTEX_LEASE_MS, 30000 */
    /* How far into a lease the watchdog renews it, in percent.
     * NETMUTEX_RENEW_PERCENT, 33; 5 to 80. */
    unsigned int renew_percent;
    /* Cohort hand-off: a thread unlocking while other threads of this
     * process wait for the same name passes the lock to one of them without
     * a round trip, at most COHORT_MAX times in a row and for at most
     * COHORT_MS since the lease was taken from Redis; then it goes back to
     * Redis, where other processes get their turn.  Hand-offs share the
     * lease and its fence.  NETMUTEX_COHORT_MAX (default 256; 0 or
     * NETMUTEX_COHORT_OFF here: never), NETMUTEX_COHORT_MS (default 5). */
    unsigned int cohort_max;
    unsigned int cohort_ms;
    /* Quorum mode only.  SERVER_TIMEOUT_MS bounds how long one server may
     * take to answer (dialing included) before it counts as unreachable:
     * NETMUTEX_SERVER_TIMEOUT_MS, default lease/50 (at least 10, at most
     * io_timeout_ms).  A quorum's grant is valid for lease - elapsed -
     * drift, drift = DRIFT_FACTOR * lease + DRIFT_MS, the bound assumed on
     * how much the servers' clocks may run fast against ours:
     * NETMUTEX_DRIFT_FACTOR (default 0.01; 0 < f <= 0.25) and
     * NETMUTEX_DRIFT_MS (default 2). */
    unsigned int server_timeout_ms;
    double drift_factor;
    unsigned int drift_ms;
    /* Lost-lease callback for mutexes whose attributes name none. */
    netmutex_lost_fn on_lost;
    void *on_lost_arg;
    /* A server with a memory limit (maxmemory) and an eviction policy other
     * than noeviction may evict a held lock key, after which a second
     * process acquires while the first still holds: such a server is
     * refused with ENOTSUP unless this is 1.  NETMUTEX_ALLOW_EVICTION
     * (0 or 1, default 0). */
    int allow_eviction;
    /* How this process names itself to netmutex_status() and netmutex(1)
     * "status": the holder of a lock shows as "<holder>:<tid>".  Default
     * "<hostname>:<pid>".  At most 256 bytes, no control characters.  No
     * environment variable (netmutex(1) sets it to its command's pid). */
    const char *holder;
    /* Lease caching (netmutex_attr_setcache): a cached lease no thread has
     * locked for CACHE_IDLE_MS is given back.  NETMUTEX_CACHE_IDLE_MS
     * (default 1000; 1 to 3600000); NETMUTEX_CACHE_OFF here, or
     * NETMUTEX_CACHE=0 in the environment, turns caching off for the
     * process. */
    unsigned int cache_idle_ms;
    /* Replica acknowledgement, one server (redis://, unix://,
     * redis-sentinel://) only: an acquisition counts only once WAIT
     * confirmed that MIN_REPLICAS replicas have it, within
     * REPLICA_TIMEOUT_MS; otherwise it is given back, and trylock returns
     * EAGAIN while lock and timedlock try again.  NETMUTEX_MIN_REPLICAS
     * (default 0: off; at most 100), NETMUTEX_REPLICA_TIMEOUT_MS (default
     * 1000; 1 ms to 1 h).  See netmutex_configure(3). */
    unsigned int min_replicas;
    unsigned int replica_timeout_ms;
    /* TLS, for the rediss:// forms of the URL (netmutex_configure(3),
     * TLS).  TLS_CA: NETMUTEX_TLS_CA, a PEM file or a directory of
     * hashed certificates (c_rehash) to verify the servers with; default
     * the system's trust store.  TLS_CERT and TLS_KEY: NETMUTEX_TLS_CERT,
     * NETMUTEX_TLS_KEY, PEM files of the client certificate (chain) and
     * its key, for servers with tls-auth-clients yes; both or neither.
     * TLS_SERVER_NAME: NETMUTEX_TLS_SERVER_NAME, the name sent (SNI) and
     * verified; default each URL's host.  The chain and the host name (or
     * IP address) are always verified, unless TLS_VERIFY is
     * NETMUTEX_TLS_VERIFY_OFF, or it is 0 and NETMUTEX_TLS_VERIFY=0 (a
     * warning is logged once); 1 verifies whatever the environment says.
     * The settings apply when some URL says rediss. */
    const char *tls_ca;
    const char *tls_cert;
    const char *tls_key;
    const char *tls_server_name;
    long tls_verify;
    /* Room for settings of later versions, which will mean "the default"
     * when 0: must be zero (initialize the struct with = { ... } or
     * memset), or netmutex_configure fails with EINVAL.  That is what lets
     * a program built against this header run with a later library. */
    void *nm_reserved[3];
} netmutex_config_t;

/* Sets the process-wide configuration.  CFG may be NULL: environment and
 * defaults only.  May be called again while this process holds no netmutex;
 * each thread re-dials with the new settings on its next call.
 * EINVAL:  malformed URL or prefix, a value out of range, nm_reserved
 *          not zero.
 * EBUSY:   some netmutex is held by this process. */
NETMUTEX_API int netmutex_configure(const netmutex_config_t *cfg);

/* Stops the background thread, closes the calling thread's connections and
 * forgets the configuration, so the next call configures again from the
 * environment.  Nothing needs it at exit: the thread is stopped then too.
 * EBUSY: some netmutex is held by this process. */
NETMUTEX_API int netmutex_shutdown(void);

/* ---- messages and error texts ------------------------------------------ */

/* What the library has to tell a person -- a server it cannot reach and
 * why, a server it refuses, a lost lease -- goes to stderr as one line
 * "netmutex: <level>: <message>", for every message at least as severe as
 * NETMUTEX_LOG says (off, error, warn, info, debug; default warn). */
#define NETMUTEX_LOG_OFF 0
#define NETMUTEX_LOG_ERROR 1
#define NETMUTEX_LOG_WARN 2
#define NETMUTEX_LOG_INFO 3
#define NETMUTEX_LOG_DEBUG 4
/* MESSAGE is one line without a newline; the call must not block long. */
typedef void (*netmutex_log_fn)(int level, const char *message, void *arg);

/* Sends the messages of LEVEL and more severe to FN (NULL: to stderr)
 * instead, overriding NETMUTEX_LOG.  EINVAL for another LEVEL. */
NETMUTEX_API int netmutex_set_log(int level, netmutex_log_fn fn, void *arg);

/* Writes a message through the same channel (the porting layer and
 * netmutex(1) use it for theirs). */
NETMUTEX_API void netmutex_log(int level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* What ERR means when a netmutex call returns it: several errno values
 * have a meaning of their own here (EAGAIN, ENOLCK, ENOTSUP, EPROTO...).
 * A static string; never NULL. */
NETMUTEX_API const char *netmutex_strerror(int err);

/* ERR's symbolic name, "EBUSY", "ENOLCK", ..., for logs and machine-read
 * output; "0" for 0.  A static string, or NULL for a value no netmutex call
 * returns, so that the caller can fall back to a number or strerror(3). */
NETMUTEX_API const char *netmutex_errname(int err);

#ifdef __cplusplus
}
#endif

#endif /* NETMUTEX_H */
