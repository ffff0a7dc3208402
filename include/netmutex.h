/*
 * netmutex.h -- a pthread-style mutex that is held in Redis, so threads in
 * different processes on different machines exclude each other.
 *
 * Every call returns 0 or an errno value, exactly like the pthread_mutex_*
 * family, and none of them sets errno.  The error values and the situations
 * that produce them are listed next to each call and, as one table, in
 * README.md.
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

typedef struct netmutex_attr {
    unsigned int nm_magic;    /* private: set by netmutex_attr_init */
    int nm_type;              /* private: use the accessors */
    unsigned int nm_lease_ms; /* private: 0 means the configured default */
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

/* ---- the mutex ------------------------------------------------------- */

/* Treat every field as private.  The struct is public only so that
 * NETMUTEX_INITIALIZER can build one at compile time. */
typedef struct netmutex {
    const char *nm_name;     /* name given to NETMUTEX_INITIALIZER */
    int nm_type;             /* NETMUTEX_NORMAL, ... */
    unsigned int nm_lease_ms;
    void *nm_handle;         /* process-local state, created on first use */
    unsigned int nm_state;   /* private lifecycle marker */
} netmutex_t;

/* Static initializer for globals: the process-local state behind it is
 * created lazily and thread-safely by the first call that uses it.  NAME must
 * stay valid for as long as the mutex is used (a string literal is typical). */
#define NETMUTEX_INITIALIZER(name) { (name), NETMUTEX_DEFAULT, 0u, NULL, 1u }
#define NETMUTEX_INITIALIZER_TYPE(name, type) { (name), (type), 0u, NULL, 1u }

/* NAME is copied.  Mutexes of the same name in one process share one
 * process-wide lock state: they exclude each other exactly as they exclude
 * other processes.  ATTR may be NULL for the defaults.
 * EINVAL: NULL mutex or name, empty or oversized name, bad attr. */
NETMUTEX_API int netmutex_init(netmutex_t *m, const char *name,
                               const netmutex_attr_t *attr);
/* EBUSY if this process holds the mutex (through any thread). */
NETMUTEX_API int netmutex_destroy(netmutex_t *m);

/* Blocks until the mutex is ours.  While Redis is unreachable it keeps
 * retrying until the connection returns.
 * EDEADLK: the calling thread already holds it (not RECURSIVE).
 * EAGAIN:  RECURSIVE depth would overflow. */
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

/* ---- global configuration -------------------------------------------- */

/* Fields left 0 or NULL fall back to the environment variable named beside
 * them, then to the built-in default. */
typedef struct netmutex_config {
    /* NETMUTEX_URL, default "redis://127.0.0.1:6379".
     *   redis://[[user]:password@]host[:port][/db]
     *   unix://[[user]:password@]/absolute/path[?db=N]
     * host may be a name, an IPv4 address or [IPv6]; user and password may
     * use %XX escapes.  A comma-separated list names independent masters
     * (quorum mode, not yet implemented: ENOTSUP). */
    const char *url;
    /* NETMUTEX_PREFIX, default "netmutex:".  At most 256 bytes, no braces. */
    const char *key_prefix;
    unsigned int connect_timeout_ms; /* NETMUTEX_CONNECT_TIMEOUT_MS, 2000 */
    unsigned int io_timeout_ms;      /* NETMUTEX_IO_TIMEOUT_MS, 2000 */
    unsigned int lease_ms;           /* NETMUTEX_LEASE_MS, 30000 */
} netmutex_config_t;

/* Sets the process-wide configuration.  CFG may be NULL: environment and
 * defaults only.  May be called again while this process holds no netmutex;
 * each thread re-dials with the new settings on its next call.
 * EINVAL:  malformed URL or prefix, a value out of range.
 * ENOTSUP: more than one server (quorum mode) in this version.
 * EBUSY:   some netmutex is held by this process. */
NETMUTEX_API int netmutex_configure(const netmutex_config_t *cfg);

/* Closes the calling thread's connections and forgets the configuration, so
 * the next call configures again from the environment.
 * EBUSY: some netmutex is held by this process. */
NETMUTEX_API int netmutex_shutdown(void);

#ifdef __cplusplus
}
#endif

#endif /* NETMUTEX_H */
