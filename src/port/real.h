/*
 * real.h -- the C library's pthread mutex, condition variable and
 * read-write lock calls, under the names the link route leaves them.
 *
 * libnetmutex-wrap is itself linked with the --wrap list it hands out to
 * programs (NETMUTEX_WRAP_LDFLAGS), so __real_pthread_X always reaches the
 * C library's pthread_X, in the shared library and in a static link alike.
 * Every file of the layer that means the real call says __real_*: a plain
 * pthread_mutex_lock here would be wrapped too in a static link, and would
 * come back into the layer.
 */
#ifndef NM_PORT_REAL_H
#define NM_PORT_REAL_H

#include <ac_config.h>

#include <pthread.h>
#include <time.h>

int __real_pthread_mutex_init(pthread_mutex_t *m, const pthread_mutexattr_t *attr);
int __real_pthread_mutex_destroy(pthread_mutex_t *m);
int __real_pthread_mutex_lock(pthread_mutex_t *m);
int __real_pthread_mutex_trylock(pthread_mutex_t *m);
int __real_pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *abstime);
int __real_pthread_mutex_clocklock(pthread_mutex_t *m, clockid_t clockid,
                                   const struct timespec *abstime);
int __real_pthread_mutex_unlock(pthread_mutex_t *m);
int __real_pthread_mutex_consistent(pthread_mutex_t *m);
int __real_pthread_cond_init(pthread_cond_t *c, const pthread_condattr_t *attr);
int __real_pthread_cond_destroy(pthread_cond_t *c);
int __real_pthread_cond_signal(pthread_cond_t *c);
int __real_pthread_cond_broadcast(pthread_cond_t *c);
int __real_pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m);
int __real_pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m,
                                  const struct timespec *abstime);
int __real_pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m,
                                  clockid_t clockid, const struct timespec *abstime);
int __real_pthread_rwlock_init(pthread_rwlock_t *rw, const pthread_rwlockattr_t *attr);
int __real_pthread_rwlock_destroy(pthread_rwlock_t *rw);
int __real_pthread_rwlock_rdlock(pthread_rwlock_t *rw);
int __real_pthread_rwlock_tryrdlock(pthread_rwlock_t *rw);
int __real_pthread_rwlock_timedrdlock(pthread_rwlock_t *rw, const struct timespec *abstime);
int __real_pthread_rwlock_clockrdlock(pthread_rwlock_t *rw, clockid_t clockid,
                                      const struct timespec *abstime);
int __real_pthread_rwlock_wrlock(pthread_rwlock_t *rw);
int __real_pthread_rwlock_trywrlock(pthread_rwlock_t *rw);
int __real_pthread_rwlock_timedwrlock(pthread_rwlock_t *rw, const struct timespec *abstime);
int __real_pthread_rwlock_clockwrlock(pthread_rwlock_t *rw, clockid_t clockid,
                                      const struct timespec *abstime);
int __real_pthread_rwlock_unlock(pthread_rwlock_t *rw);

#endif /* NM_PORT_REAL_H */
