/*
 * select.h -- which pthread mutexes are network mutexes (select.c): the
 * NETMUTEX_MUTEXES items, read once, and netmutex_wrap_register's runtime
 * registrations, by address or (source route) by FILE:LINE.
 *
 * The table of selected addresses is visible to the layer, not only to
 * select.c, so that the question every wrapped call asks first --
 * is this mutex selected? -- is inline: for an unselected mutex it costs a
 * few loads and no call.
 */
#ifndef NM_PORT_SELECT_H
#define NM_PORT_SELECT_H

#include <ac_config.h>

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "core.h"

/* The port of the mutex at ADDR if it is selected (made on first use),
 * NULL with *err 0 if it is not, NULL with *err set if it cannot be made. */
nm_port_t *nm_select_port_slow(pthread_mutex_t *addr, int *err);

/* The selection table (select.c): open addressing over mutex
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

#endif /* NM_PORT_SELECT_H */
