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
 *   compat_spec.c    one NETMUTEX_MUTEXES item, taken apart
 *   compat_symbol.c  the one mutex a SYMBOL or FILE:SYMBOL item names,
 *                    from the symbol tables elfsym.c reads
 *   compat_notes.c   the parse's messages, logged once it is over
 *
 * The library itself is linked with the same --wrap list it hands out, so
 * __real_pthread_X below always reaches the C library's pthread_X, in the
 * shared library and in a static link alike.
 */
#ifndef NM_WRAP_H
#define NM_WRAP_H

#include <ac_config.h>

#include <pthread.h>
#include <stdint.h>
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
/* EBUSY when a thread of this process holds REAL (as a plain mutex). */
int nm_port_idle(pthread_mutex_t *real);

/* The calls on a mutex whose port is P, or the real calls when P is NULL
 * (not selected).  Inline, so that the link route's wrappers, which pass
 * a constant HOW, reduce to a test and one call for an unselected mutex. */
static inline int nm_port_lock_any(nm_port_t *p, pthread_mutex_t *local, nm_port_wait_t how)
{
    if (p)
        return nm_port_lock(p, local, how);
    switch (how.clock) {
    case NM_PORT_FOREVER: return __real_pthread_mutex_lock(local);
    case NM_PORT_TRY: return __real_pthread_mutex_trylock(local);
    case NM_PORT_DEFAULT_CLOCK: return __real_pthread_mutex_timedlock(local, how.abstime);
    default: return __real_pthread_mutex_clocklock(local, how.clock, how.abstime);
    }
}

static inline int nm_port_unlock_any(nm_port_t *p, pthread_mutex_t *local)
{
    return p ? nm_port_unlock(p, local) : __real_pthread_mutex_unlock(local);
}

static inline int nm_port_consistent_any(nm_port_t *p, pthread_mutex_t *local)
{
    return p ? nm_port_consistent(p) : __real_pthread_mutex_consistent(local);
}

static inline int nm_port_cond_wait_any(nm_port_t *p, pthread_mutex_t *local,
                                        pthread_cond_t *c, nm_port_wait_t how)
{
    if (p)
        return nm_port_cond_wait(p, local, c, how);
    switch (how.clock) {
    case NM_PORT_FOREVER: return __real_pthread_cond_wait(c, local);
    case NM_PORT_DEFAULT_CLOCK: return __real_pthread_cond_timedwait(c, local, how.abstime);
    default: return __real_pthread_cond_clockwait(c, local, how.clock, how.abstime);
    }
}

/* ---- selection (compat_select.c) --------------------------------------- */

/* The port of the mutex at ADDR if it is selected (made on first use),
 * NULL with *err 0 if it is not, NULL with *err set if it cannot be made. */
nm_port_t *nm_select_port_slow(pthread_mutex_t *addr, int *err);

/* The selection table (compat_select.c): open addressing over mutex
 * addresses, probed without a lock.  Public to this library only so that
 * the question every wrapped call asks first can be inlined. */
#define NM_SELECT_SLOTS 1024u  /* a power of two */
typedef struct nm_slot {
    uintptr_t key;       /* atomic; 0: empty, never reset */
    char *name;          /* atomic; NULL: not selected (any more) */
    nm_port_t *port;     /* atomic; made on first use */
    int permanent;       /* from NETMUTEX_MUTEXES: survives destroy */
} nm_slot_t;

#define NM_HIDDEN __attribute__((visibility("hidden")))
extern NM_HIDDEN nm_slot_t nm_select_table[NM_SELECT_SLOTS];
extern NM_HIDDEN int nm_select_parsed;          /* NETMUTEX_MUTEXES was read */
extern NM_HIDDEN unsigned int nm_select_nkeys;  /* keys in the table */

static inline size_t nm_select_hash(const void *addr)
{
    uint64_t key = (uint64_t)(uintptr_t)addr;
    return (size_t)((key >> 3) * 0x9e3779b97f4a7c15ull >> 40) & (NM_SELECT_SLOTS - 1);
}

/* Inline, so an unselected mutex costs a few loads and no call: when
 * nothing is selected, or when its home slot is empty. */
static inline nm_port_t *nm_select_port(pthread_mutex_t *addr, int *err)
{
    *err = 0;
    if (__atomic_load_n(&nm_select_parsed, __ATOMIC_ACQUIRE)) {
        if (__atomic_load_n(&nm_select_nkeys, __ATOMIC_RELAXED) == 0)
            return NULL;
        if (__atomic_load_n(&nm_select_table[nm_select_hash(addr)].key, __ATOMIC_ACQUIRE) == 0)
            return NULL;
    }
    return nm_select_port_slow(addr, err);
}

/* Destroy of a selected mutex: frees its port (EBUSY while locked) and
 * forgets a runtime registration; env selections stay. */
int nm_select_drop(pthread_mutex_t *addr);
int nm_select_register(pthread_mutex_t *addr, const char *name);
/* For the source route: the cluster name of a mutex at ADDR initialized
 * at FILE:LINE (FILE may be NULL), or NULL when it is not selected. */
const char *nm_select_name(const void *addr, const char *file, int line);

/* ---- NETMUTEX_MUTEXES items (compat_spec.c) ---------------------------- */

typedef enum nm_spec_kind { NM_SPEC_SYMBOL, NM_SPEC_LINE } nm_spec_kind_t;

typedef struct nm_spec {
    nm_spec_kind_t kind;
    char *text;      /* the selector as written, without =NAME */
    char *file;      /* FILE of FILE:LINE or FILE:SYMBOL; NULL for SYMBOL */
    char *symbol;    /* NM_SPEC_SYMBOL */
    int line;        /* NM_SPEC_LINE */
    char *name;      /* the cluster-wide name: NAME, or the selector */
} nm_spec_t;

/* ITEM ("SYMBOL", "FILE:SYMBOL" or "FILE:LINE", each with an optional
 * "=NAME") into *SPEC: 0, EINVAL with *WHY saying what is wrong with it (a
 * static string), or ENOMEM; *SPEC is empty unless 0. */
int nm_spec_parse(const char *item, nm_spec_t *spec, const char **why);
void nm_spec_free(nm_spec_t *spec);
/* 1 when PATH is TAIL or ends with "/" TAIL. */
int nm_path_ends_with(const char *path, const char *tail);

/* ---- symbol selectors (compat_symbol.c) -------------------------------- */

struct nm_elfsym_query;
struct nm_elfsym_scan;
/* The address of the one mutex SPEC (a symbol selector) names among Q's
 * definitions, described in WHAT for messages; 0 when there is no such
 * one mutex, with a note saying why. */
uintptr_t nm_symbol_resolve(const nm_spec_t *spec, const struct nm_elfsym_query *q,
                            const struct nm_elfsym_scan *scan, char *what, size_t size);

/* ---- the parse's messages (compat_notes.c) ----------------------------- */

/* A message for netmutex_log, held until nm_notes_flush: see there why. */
void nm_note(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void nm_notes_flush(void);

#endif /* NM_WRAP_H */
