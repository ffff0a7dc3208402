/*
 * handle.h -- what every kind's public calls (mutex.c, rwlock.c, sem.c,
 * cond.c) do alike with a handle: check a name, make a statically
 * initialized handle's object on its first use, hand a fresh hold's lease
 * to the renewal job, and give a hold's lease back with ENOLCK when it had
 * been lost.  Written once here, so that every kind answers the same.
 */
#ifndef NM_API_HANDLE_H
#define NM_API_HANDLE_H

#include <stddef.h>

#include "entry.h"
#include "lease.h"
#include "netmutex.h"
#include "renew.h"
#include "script.h"
#include "shares.h"

/* Whether NAME is a name a lock may have: not NULL, 1 to
 * NETMUTEX_NAME_MAX bytes (its length in *LEN then). */
int nm_name_ok(const char *name, size_t *len);

/* How a statically initialized handle's object is made from its name on
 * first use (NULL: out of memory), after SETUP (if not NULL), and dropped
 * by a thread that lost the race to install it.  FAMILY goes to MAKE as
 * it is. */
typedef struct nm_maker {
    void *(*make)(const char *name, size_t len, int family);
    void (*drop)(void *obj);
    void (*setup)(void);
    int family;
} nm_maker_t;

/* The object in *SLOT (atomic) into *OUT; when there is none yet and
 * IS_STATIC (the handle is still as its initializer left it), one made
 * from NAME by MK, threads racing to make it agreeing through one
 * compare-and-swap.  EINVAL: no object and not IS_STATIC, or a bad NAME;
 * ENOMEM. */
int nm_handle_object(void **slot, int is_static, const char *name, const nm_maker_t *mk,
                     void **out);

/* The maker of a registry entry of FAMILY (registry.h), the library set
 * up first by SETUP (mutex.h's nm_library_init, which this file cannot
 * name: mutex.c includes it). */
void *nm_handle_entry_make(const char *name, size_t len, int family);
void nm_handle_entry_drop(void *e);
#define NM_ENTRY_MAKER(family, setup) \
    { nm_handle_entry_make, nm_handle_entry_drop, (setup), (int)(family) }

/* nm_handle_object for an entry, made by MK (NM_ENTRY_MAKER). */
int nm_handle_entry(void **slot, int is_static, const char *name, const nm_maker_t *mk,
                    nm_entry_t **out);

/* How a hold's lease goes back to the servers: a mutex's lease (lease.h,
 * with its robust mark and riders), or, SHARE set, a share of KIND of a
 * read-write lock or semaphore of PERMITS (shares.h). */
typedef struct nm_give_back {
    const nm_entry_t *e;
    int share;
    nm_share_kind_t kind;
    unsigned int permits;
    int unrecoverable;
    nm_script_call_t *rider;
    nm_trailer_t *trailer;
} nm_give_back_t;

/* The renewal job's options for a fresh lease L of E: renewed if
 * AUTORENEW; its loss reported to LOST (LOST_ARG), or to the
 * configuration's callback when LOST is NULL; no wanted callback. */
nm_watch_opts_t nm_watch_opts(const nm_lease_t *l, const nm_entry_t *e, int autorenew,
                              netmutex_lost_fn lost, void *lost_arg);

/* Hands fresh lease L to the renewal job with OPTS; if it cannot take it,
 * L goes back as HOW says rather than be held unwatched.  0, or the
 * renewal job's error. */
int nm_handle_watch(nm_lease_t *l, const nm_watch_opts_t *opts, const nm_give_back_t *how);

/* The end of a hold: L no longer watched, then given back as HOW says.
 * The give-back's answer, or ENOLCK where it succeeded for a lease
 * declared lost: one lost by the clock may still be ours at the server
 * (it was paused, not expired), and the owner-checked release deletes it
 * then, and nothing otherwise; either way the caller learns ENOLCK. */
int nm_handle_release(nm_lease_t *l, const nm_give_back_t *how);

#endif /* NM_API_HANDLE_H */
