/*
 * opaque.h -- which private slot of the opaque netmutex_t and
 * netmutex_attr_t holds what.
 *
 * The public structs are fixed-size blocks of unsigned ints and pointers
 * (netmutex.h), so that a field added here later takes a free slot instead
 * of changing their size or layout, and a program built against an older
 * header keeps working.  The library reaches the slots only through these
 * accessors; moving a field means changing one line here.
 *
 * netmutex_t.nm_init is the lifecycle marker: NM_STATE_LIVE after
 * netmutex_init, NETMUTEX_STATIC_MARK_ ^ type from NETMUTEX_INITIALIZER,
 * anything else (0 after destroy) is not a mutex.  A statically
 * initialized mutex has its type there and zero in every other slot; its
 * handle is created by its first use.
 */
#ifndef NM_OPAQUE_H
#define NM_OPAQUE_H

#include <string.h>

#include "netmutex.h"

#define NM_STATE_LIVE 0x6e6d7478u /* "nmtx": netmutex_init ran */
#define NM_ATTR_MAGIC 0x6e6d6174u /* "nmat": netmutex_attr_init ran */

/* The slots of netmutex_t (live mutexes only, but for the handle). */
#define NM_M_TYPE(m) ((m)->nm_opaque_u[0])     /* int, NETMUTEX_NORMAL, ... */
#define NM_M_LEASE_MS(m) ((m)->nm_opaque_u[1]) /* 0: the configured default */
#define NM_M_FLAGS(m) ((m)->nm_opaque_u[2])    /* the attribute's flags */
#define NM_M_HANDLE(m) ((m)->nm_opaque_p[0])   /* nm_entry_t *, atomic */
#define NM_M_LOST(m) ((m)->nm_opaque_p[1])     /* netmutex_lost_fn */
#define NM_M_LOST_ARG(m) ((m)->nm_opaque_p[2])

/* The slots of netmutex_attr_t. */
#define NM_A_TYPE(a) ((a)->nm_opaque_u[0])
#define NM_A_LEASE_MS(a) ((a)->nm_opaque_u[1])
#define NM_A_FLAGS(a) ((a)->nm_opaque_u[2])
#define NM_A_LOST(a) ((a)->nm_opaque_p[0])
#define NM_A_LOST_ARG(a) ((a)->nm_opaque_p[1])

/* netmutex_cond_t.nm_init: NM_COND_LIVE after netmutex_cond_init,
 * NETMUTEX_COND_STATIC_MARK_ from NETMUTEX_COND_INITIALIZER, anything else
 * (0 after destroy) is not a condition.  cond.c alone reaches these. */
#define NM_COND_LIVE 0x6e6d6376u /* "nmcv" */
#define NM_CONDATTR_MAGIC 0x6e6d6361u /* "nmca" */
#define NM_C_HANDLE(c) ((c)->nm_opaque_p[0]) /* cond.c's record, atomic */
#define NM_CA_CLOCK(a) ((a)->nm_opaque_u[0]) /* clockid_t */

/* netmutex_rwlock_t.nm_init: NM_RWLOCK_LIVE after netmutex_rwlock_init,
 * NETMUTEX_RWLOCK_STATIC_MARK_ from NETMUTEX_RWLOCK_INITIALIZER, anything
 * else (0 after destroy) is not a rwlock.  rwlock.c alone reaches these. */
#define NM_RWLOCK_LIVE 0x6e6d7277u     /* "nmrw" */
#define NM_RWLOCKATTR_MAGIC 0x6e6d7261u /* "nmra" */
#define NM_RW_KIND(r) ((r)->nm_opaque_u[0])     /* NETMUTEX_RWLOCK_PREFER_* */
#define NM_RW_LEASE_MS(r) ((r)->nm_opaque_u[1]) /* 0: the configured default */
#define NM_RW_FLAGS(r) ((r)->nm_opaque_u[2])    /* NM_RW_FLAG_* */
#define NM_RW_HANDLE(r) ((r)->nm_opaque_p[0])   /* nm_entry_t *, atomic */
#define NM_RW_LOST(r) ((r)->nm_opaque_p[1])     /* netmutex_lost_fn */
#define NM_RW_LOST_ARG(r) ((r)->nm_opaque_p[2])
#define NM_RA_KIND(a) ((a)->nm_opaque_u[0])
#define NM_RA_LEASE_MS(a) ((a)->nm_opaque_u[1])
#define NM_RA_FLAGS(a) ((a)->nm_opaque_u[2])
#define NM_RA_LOST(a) ((a)->nm_opaque_p[0])
#define NM_RA_LOST_ARG(a) ((a)->nm_opaque_p[1])
#define NM_RW_FLAG_CACHE 1u /* read shares are cached (rwlockattr_setcache) */

/* Whether MS is a lease an attribute may name: 0 (the configured one) or
 * within [NETMUTEX_LEASE_MIN_MS, NETMUTEX_LEASE_MAX_MS]. */
static inline int nm_lease_ms_valid(unsigned int ms)
{
    return ms == 0 || (ms >= NETMUTEX_LEASE_MIN_MS && ms <= NETMUTEX_LEASE_MAX_MS);
}

/* A callback in a pointer slot.  POSIX makes function and object pointers
 * the same size (dlsym needs it); memcpy says so without a cast ISO C
 * frowns on. */
_Static_assert(sizeof(netmutex_lost_fn) == sizeof(void *), "a callback fits a pointer slot");

static inline netmutex_lost_fn nm_slot_fn(void *const *slot)
{
    netmutex_lost_fn fn;
    memcpy(&fn, slot, sizeof fn);
    return fn;
}

static inline void nm_slot_set_fn(void **slot, netmutex_lost_fn fn)
{
    memcpy(slot, &fn, sizeof fn);
}

/* The type of a mutex, live or statically initialized. */
static inline int nm_m_type(const netmutex_t *m)
{
    return m->nm_init == NM_STATE_LIVE ? (int)NM_M_TYPE(m)
                                       : (int)(m->nm_init ^ NETMUTEX_STATIC_MARK_);
}

/* netmutex_sem_t.nm_init: NM_SEM_LIVE after netmutex_sem_init, anything
 * else (0 after destroy) is not a semaphore.  sem.c alone reaches these. */
#define NM_SEM_LIVE 0x6e6d7365u    /* "nmse" */
#define NM_SEMATTR_MAGIC 0x6e6d7361u /* "nmsa" */
#define NM_S_PERMITS(s) ((s)->nm_opaque_u[0]) /* 1..NETMUTEX_SEM_PERMITS_MAX */
#define NM_S_HANDLE(s) ((s)->nm_opaque_p[0])  /* nm_entry_t * */

#endif /* NM_OPAQUE_H */
