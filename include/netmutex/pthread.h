/*
 * netmutex/pthread.h -- the source route of the porting layer.
 *
 * Include it (or put `-include netmutex/pthread.h` on the compiler line)
 * and a program's pthread mutexes become netmutex-capable without other
 * source changes:
 *
 *   pthread_mutex_t                      -> netmutex_pthread_mutex_t
 *   PTHREAD_MUTEX_INITIALIZER (+ the glibc recursive/errorcheck NP ones)
 *   pthread_mutex_{init,destroy,lock,trylock,timedlock,clocklock,unlock,
 *                  consistent}            -> netmutex_pthread_mutex_*
 *   pthread_mutexattr_{init,destroy,settype,gettype,setrobust,getrobust}
 *                                        -> netmutex_pthread_mutexattr_*
 *   pthread_cond_{wait,timedwait,clockwait,signal,broadcast,init,destroy}
 *                                        -> netmutex_pthread_cond_*
 *   pthread_rwlock_{init,destroy,rdlock,tryrdlock,timedrdlock,clockrdlock,
 *                   wrlock,trywrlock,timedwrlock,clockwrlock,unlock}
 *                                        -> netmutex_pthread_rwlock_*
 *
 * A mutex stays an ordinary process-local pthread mutex (the one embedded
 * in the struct below) unless it is selected: by NETMUTEX_MUTEXES (its
 * symbol name, global or static, FILE:SYMBOL where several files have a
 * static of that name, or the FILE:LINE of its PTHREAD_MUTEX_INITIALIZER)
 * or by netmutex_pthread_setname().  A condition variable stays a
 * process-local one unless NETMUTEX_CONDS selects it (its symbol name,
 * global or static, or FILE:SYMBOL); a selected one is a netmutex condition
 * and must be waited on with a selected mutex.  A read-write lock stays a
 * process-local one unless NETMUTEX_RWLOCKS selects it (the same way); a
 * selected one is a netmutex read-write lock.  See netmutex_pthread(3).
 *
 * Define NETMUTEX_CALL_SITES before including it and the calls that take a
 * lock name their file and line to lock-order checking (at the end).
 *
 * Link with libnetmutex-wrap: `pkg-config --libs netmutex-wrap`.
 */
#ifndef NETMUTEX_PTHREAD_H
#define NETMUTEX_PTHREAD_H

#include <pthread.h>
#include <time.h>

#include <netmutex.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Treat every field as private.  The struct is public only so that the
 * static initializers can build one at compile time. */
typedef struct netmutex_pthread_mutex {
    pthread_mutex_t nmp_local;   /* the real mutex: all of it when local */
    const char *nmp_file;        /* where PTHREAD_MUTEX_INITIALIZER was */
    int nmp_line;
    void *nmp_port;              /* NULL until the first use decides */
    void *nmp_reserved[4];       /* room to grow, zero */
} netmutex_pthread_mutex_t;

/* The real initializer with a given glibc kind: the public macro expands
 * to it, and the NP variants are the same with another kind. */
#ifndef __PTHREAD_MUTEX_INITIALIZER
#error "netmutex/pthread.h needs glibc's pthread.h"
#endif
#define NETMUTEX_PTHREAD_REAL_INIT_(kind) { { __PTHREAD_MUTEX_INITIALIZER(kind) } }
#define NETMUTEX_PTHREAD_INITIALIZER_KIND(kind) \
    { NETMUTEX_PTHREAD_REAL_INIT_(kind), __FILE__, __LINE__, (void *)0, { (void *)0 } }
#define NETMUTEX_PTHREAD_INITIALIZER NETMUTEX_PTHREAD_INITIALIZER_KIND(0)

/* Names M cluster-wide (it becomes a network mutex) whatever
 * NETMUTEX_MUTEXES says.  M must be initialized and unlocked.
 * EINVAL: NULL, empty or oversized name; EBUSY: M is locked. */
NETMUTEX_API int netmutex_pthread_setname(netmutex_pthread_mutex_t *m, const char *name);

NETMUTEX_API int netmutex_pthread_mutex_init(netmutex_pthread_mutex_t *m,
                                             const pthread_mutexattr_t *attr);
NETMUTEX_API int netmutex_pthread_mutex_destroy(netmutex_pthread_mutex_t *m);
NETMUTEX_API int netmutex_pthread_mutex_lock(netmutex_pthread_mutex_t *m);
NETMUTEX_API int netmutex_pthread_mutex_trylock(netmutex_pthread_mutex_t *m);
NETMUTEX_API int netmutex_pthread_mutex_timedlock(netmutex_pthread_mutex_t *m,
                                                  const struct timespec *abstime);
NETMUTEX_API int netmutex_pthread_mutex_clocklock(netmutex_pthread_mutex_t *m,
                                                  clockid_t clockid,
                                                  const struct timespec *abstime);
NETMUTEX_API int netmutex_pthread_mutex_unlock(netmutex_pthread_mutex_t *m);
NETMUTEX_API int netmutex_pthread_mutex_consistent(netmutex_pthread_mutex_t *m);

NETMUTEX_API int netmutex_pthread_mutexattr_init(pthread_mutexattr_t *attr);
NETMUTEX_API int netmutex_pthread_mutexattr_destroy(pthread_mutexattr_t *attr);
NETMUTEX_API int netmutex_pthread_mutexattr_settype(pthread_mutexattr_t *attr, int type);
NETMUTEX_API int netmutex_pthread_mutexattr_gettype(const pthread_mutexattr_t *attr,
                                                    int *type);
NETMUTEX_API int netmutex_pthread_mutexattr_setrobust(pthread_mutexattr_t *attr, int robust);
NETMUTEX_API int netmutex_pthread_mutexattr_getrobust(const pthread_mutexattr_t *attr,
                                                      int *robust);

NETMUTEX_API int netmutex_pthread_cond_wait(pthread_cond_t *cond,
                                            netmutex_pthread_mutex_t *m);
NETMUTEX_API int netmutex_pthread_cond_timedwait(pthread_cond_t *cond,
                                                 netmutex_pthread_mutex_t *m,
                                                 const struct timespec *abstime);
NETMUTEX_API int netmutex_pthread_cond_clockwait(pthread_cond_t *cond,
                                                 netmutex_pthread_mutex_t *m,
                                                 clockid_t clockid,
                                                 const struct timespec *abstime);
NETMUTEX_API int netmutex_pthread_cond_signal(pthread_cond_t *cond);
NETMUTEX_API int netmutex_pthread_cond_broadcast(pthread_cond_t *cond);
NETMUTEX_API int netmutex_pthread_cond_init(pthread_cond_t *cond,
                                            const pthread_condattr_t *attr);
NETMUTEX_API int netmutex_pthread_cond_destroy(pthread_cond_t *cond);

NETMUTEX_API int netmutex_pthread_rwlock_init(pthread_rwlock_t *rw,
                                              const pthread_rwlockattr_t *attr);
NETMUTEX_API int netmutex_pthread_rwlock_destroy(pthread_rwlock_t *rw);
NETMUTEX_API int netmutex_pthread_rwlock_rdlock(pthread_rwlock_t *rw);
NETMUTEX_API int netmutex_pthread_rwlock_tryrdlock(pthread_rwlock_t *rw);
NETMUTEX_API int netmutex_pthread_rwlock_timedrdlock(pthread_rwlock_t *rw,
                                                     const struct timespec *abstime);
NETMUTEX_API int netmutex_pthread_rwlock_clockrdlock(pthread_rwlock_t *rw, clockid_t clockid,
                                                     const struct timespec *abstime);
NETMUTEX_API int netmutex_pthread_rwlock_wrlock(pthread_rwlock_t *rw);
NETMUTEX_API int netmutex_pthread_rwlock_trywrlock(pthread_rwlock_t *rw);
NETMUTEX_API int netmutex_pthread_rwlock_timedwrlock(pthread_rwlock_t *rw,
                                                     const struct timespec *abstime);
NETMUTEX_API int netmutex_pthread_rwlock_clockwrlock(pthread_rwlock_t *rw, clockid_t clockid,
                                                     const struct timespec *abstime);
NETMUTEX_API int netmutex_pthread_rwlock_unlock(pthread_rwlock_t *rw);

/* The link route's one-line registration (libnetmutex-wrap): names the
 * real pthread mutex M cluster-wide, as if NETMUTEX_MUTEXES selected it,
 * until pthread_mutex_destroy(M).  M must be unlocked.  EINVAL: NULL,
 * empty or oversized name; EBUSY: M is locked; ENOSPC: too many selected
 * mutexes.  Code built for that route includes this header with
 * NETMUTEX_PTHREAD_DECLARE_ONLY defined, so nothing is renamed. */
NETMUTEX_API int netmutex_wrap_register(pthread_mutex_t *m, const char *name);

#ifndef NETMUTEX_PTHREAD_DECLARE_ONLY

/* The GNU initializers are defined whatever the feature macros: with
 * -include, this header comes before the program's own #define
 * _GNU_SOURCE, and <pthread.h> would not be read again. */
#undef PTHREAD_MUTEX_INITIALIZER
#define PTHREAD_MUTEX_INITIALIZER NETMUTEX_PTHREAD_INITIALIZER
#undef PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP
#define PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP \
    NETMUTEX_PTHREAD_INITIALIZER_KIND(PTHREAD_MUTEX_RECURSIVE_NP)
#undef PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP
#define PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP \
    NETMUTEX_PTHREAD_INITIALIZER_KIND(PTHREAD_MUTEX_ERRORCHECK_NP)
#undef PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP
#define PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP \
    NETMUTEX_PTHREAD_INITIALIZER_KIND(PTHREAD_MUTEX_ADAPTIVE_NP)

#define pthread_mutex_t netmutex_pthread_mutex_t
#define pthread_mutex_init netmutex_pthread_mutex_init
#define pthread_mutex_destroy netmutex_pthread_mutex_destroy
#define pthread_mutex_lock netmutex_pthread_mutex_lock
#define pthread_mutex_trylock netmutex_pthread_mutex_trylock
#define pthread_mutex_timedlock netmutex_pthread_mutex_timedlock
#undef pthread_mutex_clocklock
#define pthread_mutex_clocklock netmutex_pthread_mutex_clocklock
#define pthread_mutex_unlock netmutex_pthread_mutex_unlock
#define pthread_mutex_consistent netmutex_pthread_mutex_consistent
#define pthread_mutexattr_init netmutex_pthread_mutexattr_init
#define pthread_mutexattr_destroy netmutex_pthread_mutexattr_destroy
#define pthread_mutexattr_settype netmutex_pthread_mutexattr_settype
#define pthread_mutexattr_gettype netmutex_pthread_mutexattr_gettype
#define pthread_mutexattr_setrobust netmutex_pthread_mutexattr_setrobust
#define pthread_mutexattr_getrobust netmutex_pthread_mutexattr_getrobust
#define pthread_cond_wait netmutex_pthread_cond_wait
#define pthread_cond_timedwait netmutex_pthread_cond_timedwait
#undef pthread_cond_clockwait
#define pthread_cond_clockwait netmutex_pthread_cond_clockwait
#define pthread_cond_signal netmutex_pthread_cond_signal
#define pthread_cond_broadcast netmutex_pthread_cond_broadcast
#define pthread_cond_init netmutex_pthread_cond_init
#define pthread_cond_destroy netmutex_pthread_cond_destroy
#define pthread_rwlock_init netmutex_pthread_rwlock_init
#define pthread_rwlock_destroy netmutex_pthread_rwlock_destroy
#define pthread_rwlock_rdlock netmutex_pthread_rwlock_rdlock
#define pthread_rwlock_tryrdlock netmutex_pthread_rwlock_tryrdlock
#define pthread_rwlock_timedrdlock netmutex_pthread_rwlock_timedrdlock
#undef pthread_rwlock_clockrdlock
#define pthread_rwlock_clockrdlock netmutex_pthread_rwlock_clockrdlock
#define pthread_rwlock_wrlock netmutex_pthread_rwlock_wrlock
#define pthread_rwlock_trywrlock netmutex_pthread_rwlock_trywrlock
#define pthread_rwlock_timedwrlock netmutex_pthread_rwlock_timedwrlock
#undef pthread_rwlock_clockwrlock
#define pthread_rwlock_clockwrlock netmutex_pthread_rwlock_clockwrlock
#define pthread_rwlock_unlock netmutex_pthread_rwlock_unlock

/* Call sites, opt-in: with NETMUTEX_CALL_SITES defined before this header,
 * every call that takes a lock (a condition wait takes its mutex again)
 * names its __FILE__ and __LINE__ first (netmutex_call_site), for
 * lock-order checking to report (NETMUTEX_LOCKDEP=1), and forgets it after
 * the call, whatever the call did.  The function-like macros have the
 * functions' own names, so that pthread_mutex_lock (object-like, above)
 * still names the function where no call follows: &pthread_mutex_lock
 * stays a function pointer, of a call without a site. */
#ifdef NETMUTEX_CALL_SITES
static __inline__ int netmutex_pthread_site_done_(int result)
{
    netmutex_call_site((const char *)0, 0);
    return result;
}
#define NETMUTEX_PTHREAD_AT_(call) \
    (netmutex_call_site(__FILE__, __LINE__), netmutex_pthread_site_done_(call))
#define netmutex_pthread_mutex_lock(m) NETMUTEX_PTHREAD_AT_(netmutex_pthread_mutex_lock(m))
#define netmutex_pthread_mutex_trylock(m) \
    NETMUTEX_PTHREAD_AT_(netmutex_pthread_mutex_trylock(m))
#define netmutex_pthread_mutex_timedlock(m, t) \
    NETMUTEX_PTHREAD_AT_(netmutex_pthread_mutex_timedlock(m, t))
#define netmutex_pthread_mutex_clocklock(m, c, t) \
    NETMUTEX_PTHREAD_AT_(netmutex_pthread_mutex_clocklock(m, c, t))
#define netmutex_pthread_cond_wait(cv, m) NETMUTEX_PTHREAD_AT_(netmutex_pthread_cond_wait(cv, m))
#define netmutex_pthread_cond_timedwait(cv, m, t) \
    NETMUTEX_PTHREAD_AT_(netmutex_pthread_cond_timedwait(cv, m, t))
#define netmutex_pthread_cond_clockwait(cv, m, c, t) \
    NETMUTEX_PTHREAD_AT_(netmutex_pthread_cond_clockwait(cv, m, c, t))
#define netmutex_pthread_rwlock_rdlock(rw) NETMUTEX_PTHREAD_AT_(netmutex_pthread_rwlock_rdlock(rw))
#define netmutex_pthread_rwlock_tryrdlock(rw) \
    NETMUTEX_PTHREAD_AT_(netmutex_pthread_rwlock_tryrdlock(rw))
#define netmutex_pthread_rwlock_timedrdlock(rw, t) \
    NETMUTEX_PTHREAD_AT_(netmutex_pthread_rwlock_timedrdlock(rw, t))
#define netmutex_pthread_rwlock_clockrdlock(rw, c, t) \
    NETMUTEX_PTHREAD_AT_(netmutex_pthread_rwlock_clockrdlock(rw, c, t))
#define netmutex_pthread_rwlock_wrlock(rw) NETMUTEX_PTHREAD_AT_(netmutex_pthread_rwlock_wrlock(rw))
#define netmutex_pthread_rwlock_trywrlock(rw) \
    NETMUTEX_PTHREAD_AT_(netmutex_pthread_rwlock_trywrlock(rw))
#define netmutex_pthread_rwlock_timedwrlock(rw, t) \
    NETMUTEX_PTHREAD_AT_(netmutex_pthread_rwlock_timedwrlock(rw, t))
#define netmutex_pthread_rwlock_clockwrlock(rw, c, t) \
    NETMUTEX_PTHREAD_AT_(netmutex_pthread_rwlock_clockwrlock(rw, c, t))
#endif /* NETMUTEX_CALL_SITES */

#endif /* NETMUTEX_PTHREAD_DECLARE_ONLY */

#ifdef __cplusplus
}
#endif

#endif /* NETMUTEX_PTHREAD_H */
