/*
 * registry.h -- one process-local entry per family and name (entry.h),
 * found by them and kept alive by the handles pointing at it.
 */
#ifndef NM_REGISTRY_H
#define NM_REGISTRY_H

#include <pthread.h>
#include <stddef.h>

#include "entry.h"


/* The entry of FAMILY (entry.h) for NAME, created if needed, with one more
 * reference; NULL when out of memory.  A mutex and a rwlock of one name
 * have an entry each. */
nm_entry_t *nm_registry_get(nm_entry_family_t family, const char *name, size_t len);

/* Calls FN with the mutex entry of NAME if it exists (no lock held during
 * the call). */
void nm_registry_with(const char *name, size_t len, void (*fn)(nm_entry_t *));

/* One more reference to E, which the caller already has one of. */
void nm_registry_ref(nm_entry_t *e);

/* Drops a reference; the last one frees the entry. */
void nm_registry_put(nm_entry_t *e);

/* pthread_atfork hooks: quiesce every entry before fork(); afterwards the
 * parent carries on, and the child starts with nothing held. */
void nm_registry_before_fork(void);
void nm_registry_after_fork_parent(void);
void nm_registry_after_fork_child(void);

#endif /* NM_REGISTRY_H */
