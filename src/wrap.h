/*
 * wrap.h -- internals of libnetmutex-wrap, the porting layer shared by the
 * source route (compat.c, <netmutex/pthread.h>) and the link route
 * (wrap.c, -Wl,--wrap=pthread_mutex_lock,...).
 *
 *   compat_core.c    a selected mutex: a netmutex plus the real pthread
 *                    mutex, locked in that order (what makes condition
 *                    variables work, see there)
 *   compat_select.c  which mutexes are selected: NETMUTEX_MUTEXES and
 *                    netmutex_wrap_register, by address or FILE:LINE
 *
 * The library itself is linked with the same --wrap list it hands out, so
 * __real_pthread_X below always reaches the C library's pthread_X, in the
 * shared library and in a static link alike.
 */
#ifndef NM_WRAP_H
#define NM_WRAP_H

#include <ac_config.h>

#include <pthread.h>
#include <time.h>

#include "netmutex.h"

int __real_pthread_mutex_init(pthread_mutex_t *m, const pthread_mutexattr_t *attr);
int __real_pthread_mutex_destroy(pthread_mutex_t *m);
int __real_pthread_mutex_lock(pthread_mutex_t *m);
int __real_pthread_mutex_trylock(pthread_mutex_t *m);
int __real_pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *abstime);
int __real_pthread_mutex_clocklock(pthread_mutex_t *m, clockid_t clockid,
                                   const struct timespec *abstime);
int __real_pthread_mutex_unlock(pthread_mutex_t *m);
int __real_pthread_mutex_consistent(pthread_mutex_t *m);
int __real_pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m);
int __real_pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m,
                                  const struct timespec *abstime);
int __real_pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m,
                                  clockid_t clockid, const struct timespec *abstime);

/* ---- a selected mutex (compat_core.c) ---------------------------------- */

typedef struct nm_port {
    netmutex_t net;     /* the cluster-wide lock */
    pthread_t owner;    /* atomic; meaningful while owned is 1 */
    int owned;          /* atomic */
    unsigned int depth; /* read and written by the owner only */
} nm_port_t;

/* How to wait: NM_PORT_FOREVER has no deadline, NM_PORT_TRY never waits,
 * NM_PORT_DEFAULT_CLOCK is the deadline of the timed calls (timedlock:
 * CLOCK_REALTIME; cond_timedwait: the condition variable's clock), and a
 * real clock id is that of the clock calls (clocklock, cond_clockwait). */
#define NM_PORT_FOREVER ((clockid_t)-1)
#define NM_PORT_TRY ((clockid_t)-2)
#define NM_PORT_DEFAULT_CLOCK ((clockid_t)-3)

typedef struct nm_port_wait {
    clockid_t clock;
    const struct timespec *abstime;
} nm_port_wait_t;

/* A port named NAME whose type and robustness are read from REAL. */
int nm_port_create(nm_port_t **out, const char *name, const pthread_mutex_t *real);
/* EBUSY while locked; frees P otherwise. */
int nm_port_free(nm_port_t *p);
int nm_port_lock(nm_port_t *p, pthread_mutex_t *local, nm_port_wait_t how);
int nm_port_unlock(nm_port_t *p, pthread_mutex_t *local);
int nm_port_consistent(nm_port_t *p);
int nm_port_cond_wait(nm_port_t *p, pthread_mutex_t *local, pthread_cond_t *c,
                      nm_port_wait_t how);
/* 1 when the name is one netmutex_init would take. */
int nm_port_name_ok(const char *name);
/* EBUSY when a thread of this process holds REAL as a plain mutex. */
int nm_port_idle(pthread_mutex_t *real);

/* The real call for an unselected mutex.  Inline, so that the link
 * route's wrappers, which pass a constant HOW, reduce to one call. */
static inline int nm_port_real_lock(pthread_mutex_t *m, nm_port_wait_t how)
{
    switch (how.clock) {
    case NM_PORT_FOREVER: return __real_pthread_mutex_lock(m);
    case NM_PORT_TRY: return __real_pthread_mutex_trylock(m);
    case NM_PORT_DEFAULT_CLOCK: return __real_pthread_mutex_timedlock(m, how.abstime);
    default: return __real_pthread_mutex_clocklock(m, how.clock, how.abstime);
    }
}

static inline int nm_port_real_cond_wait(pthread_cond_t *c, pthread_mutex_t *m,
                                         nm_port_wait_t how)
{
    switch (how.clock) {
    case NM_PORT_FOREVER: return __real_pthread_cond_wait(c, m);
    case NM_PORT_DEFAULT_CLOCK: return __real_pthread_cond_timedwait(c, m, how.abstime);
    default: return __real_pthread_cond_clockwait(c, m, how.clock, how.abstime);
    }
}

/* ---- selection (compat_select.c) --------------------------------------- */

/* The port of the mutex at ADDR if it is selected (made on first use),
 * NULL with *err 0 if it is not, NULL with *err set if it cannot be made. */
nm_port_t *nm_select_port_slow(pthread_mutex_t *addr, int *err);

/* What every wrapped call asks first: is anything selected at all?  Set
 * once NETMUTEX_MUTEXES was read, and counted up by every selection. */
#define NM_HIDDEN __attribute__((visibility("hidden")))
extern NM_HIDDEN int nm_select_parsed;
extern NM_HIDDEN unsigned int nm_select_nkeys;

/* Inline, so an unselected mutex in a process that selected nothing costs
 * two loads and no call. */
static inline nm_port_t *nm_select_port(pthread_mutex_t *addr, int *err)
{
    *err = 0;
    if (__atomic_load_n(&nm_select_parsed, __ATOMIC_ACQUIRE) &&
        __atomic_load_n(&nm_select_nkeys, __ATOMIC_RELAXED) == 0)
        return NULL;
    return nm_select_port_slow(addr, err);
}
/* Destroy of a selected mutex: frees its port (EBUSY while locked) and
 * forgets a runtime registration; env selections stay. */
int nm_select_drop(pthread_mutex_t *addr);
int nm_select_register(pthread_mutex_t *addr, const char *name);
/* For the source route: the cluster name of a mutex at ADDR initialized
 * at FILE:LINE (FILE may be NULL), or NULL when it is not selected. */
const char *nm_select_name(const void *addr, const char *file, int line);

#endif /* NM_WRAP_H */
