/*
 * real.h -- the C library's pthread mutex, condition variable and
 * read-write lock calls, under the names the link route leaves them.
 *
 * libnetmutex-wrap is itself linked with the --wrap list it hands out to
 * programs (NETMUTEX_WRAP_LDFLAGS), so __real_pthread_X always reaches the
 * C library's pthread_X, in the shared library and in a static link alike.
 * Every file of the layer that means the real call says __real_*: a plain
 * pthread_mutex_lock here would be wrapped too in a static link, and would
 * come back into the layer.  The calls are calls.def's.
 */
#ifndef NM_PORT_REAL_H
#define NM_PORT_REAL_H

#include <ac_config.h>

#include <pthread.h>
#include <time.h>

/* __real_pthread_NAME for every call of calls.def. */
#define NM_MUTEX_T pthread_mutex_t
#define NM_PORT_CALL(name, params, body) int __real_pthread_##name params;
#include "calls.def"
#undef NM_PORT_CALL
#undef NM_MUTEX_T

#endif /* NM_PORT_REAL_H */
