/*
 * select.h -- which pthread mutexes, condition variables and read-write
 * locks are network ones (select.c): the NETMUTEX_MUTEXES, NETMUTEX_CONDS
 * and NETMUTEX_RWLOCKS items, read once, and netmutex_wrap_register's runtime registrations of mutexes, by
 * address or (source route) by FILE:LINE.
 *
 * The table of selected addresses is visible to the layer, not only to
 * select.c, so that the question every wrapped call asks first --
 * is this mutex (condition variable, read-write lock) selected? -- is inline: for an
 * unselected one it costs a few loads and no call.
 */
#ifndef NM_PORT_SELECT_H
#define NM_PORT_SELECT_H

#include <ac_config.h>

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "core.h"
#include "netmutex.h"

/* The port of the mutex at ADDR if it is selected (made on first use),
 * NULL with *err 0 if it is not, NULL with *err set if it cannot be made. */
nm_port_t *nm_select_port_slow(pthread_mutex_t *addr, int *err);
/* The same for the condition variable at ADDR: its netmutex condition. */
netmutex_cond_t *nm_select_cond_slow(pthread_cond_t *addr, int *err);
/* The same for the read-write lock at ADDR: its netmutex read-write lock,
 * which prefers readers or writers as the real one at ADDR does. */
netmutex_rwlock_t *nm_select_rwlock_slow(pthread_rwlock_t *addr, int *err);

/* What a selected address is; a slot keeps the kind it was selected as. */
typedef enum nm_select_kind {
    NM_SELECT_MUTEX = 0,
    NM_SELECT_COND,
    NM_SELECT_RWLOCK
} nm_select_kind_t;

/* The selection table (select.c): open addressing over the addresses of
 * mutexes, condition variables and read-write locks, probed without a lock.  Public to this library only so that
 * the question every wrapped call asks first can be inlined. */
#define NM_SELECT_SLOTS 1024u  /* a power of two */
typedef struct nm_slot {
    uintptr_t key;       /* atomic; 0: empty, never reset */
    char *name;          /* atomic; NULL: not selected (any more) */
    nm_port_t *port;     /* atomic; a mutex's, made on first use */
    netmutex_cond_t *cond; /* atomic; a condition variable's, the same */
    netmutex_rwlock_t *rw; /* atomic; a read-write lock's, the same */
    nm_select_kind_t kind; /* what the slot selects; set before name */
    int permanent;       /* from the environment: survives destroy */
} nm_slot_t;

#define NM_HIDDEN __attribute__((visibility("hidden")))
extern NM_HIDDEN nm_slot_t nm_select_table[NM_SELECT_SLOTS];
extern NM_HIDDEN int nm_select_parsed;          /* the environment was read */
extern NM_HIDDEN unsigned int nm_select_nkeys;  /* keys in the table */

static inline size_t nm_select_hash(const void *addr)
{
    uint64_t key = (uint64_t)(uintptr_t)addr;
    return (size_t)((key >> 3) * 0x9e3779b97f4a7c15ull >> 40) & (NM_SELECT_SLOTS - 1);
}

/* 0 when ADDR is surely not selected: nothing is, or its home slot is
 * empty.  Inline, so an unselected object costs a few loads and no call. */
static inline int nm_select_maybe(const void *addr)
{
    if (__atomic_load_n(&nm_select_parsed, __ATOMIC_ACQUIRE)) {
        if (__atomic_load_n(&nm_select_nkeys, __ATOMIC_RELAXED) == 0)
            return 0;
        if (__atomic_load_n(&nm_select_table[nm_select_hash(addr)].key, __ATOMIC_ACQUIRE) == 0)
            return 0;
    }
    return 1;
}

static inline nm_port_t *nm_select_port(pthread_mutex_t *addr, int *err)
{
    *err = 0;
    return nm_select_maybe(addr) ? nm_select_port_slow(addr, err) : NULL;
}

static inline netmutex_cond_t *nm_select_cond(pthread_cond_t *addr, int *err)
{
    *err = 0;
    return nm_select_maybe(addr) ? nm_select_cond_slow(addr, err) : NULL;
}

static inline netmutex_rwlock_t *nm_select_rwlock(pthread_rwlock_t *addr, int *err)
{
    *err = 0;
    return nm_select_maybe(addr) ? nm_select_rwlock_slow(addr, err) : NULL;
}

/* Destroy of a selected mutex: frees its port (EBUSY while locked) and
 * forgets a runtime registration; env selections stay. */
int nm_select_drop(pthread_mutex_t *addr);
/* Destroy of a selected condition variable: frees its netmutex condition
 * (EBUSY while a thread of this process waits on it); the selection
 * stays, and the next use makes the condition again. */
int nm_select_cond_drop(pthread_cond_t *addr);
/* Destroy of a selected read-write lock: frees its netmutex read-write
 * lock; the selection stays, and the next use makes the lock again.  One
 * that a thread of this process still holds (undefined for pthread, 0 in
 * glibc) is set aside with its holds, which end at that thread's unlock
 * or the process's exit, and 0 is returned, once said (netmutex_log). */
int nm_select_rwlock_drop(pthread_rwlock_t *addr);
int nm_select_register(pthread_mutex_t *addr, const char *name);
/* For the source route: the cluster name of a mutex at ADDR initialized
 * at FILE:LINE (FILE may be NULL), or NULL when it is not selected. */
const char *nm_select_name(const void *addr, const char *file, int line);

#endif /* NM_PORT_SELECT_H */
