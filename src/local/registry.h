/*
 * registry.h -- one process-local entry per mutex name.
 *
 * Every netmutex_t of a name in this process points at the same entry, so
 * two handles of one name exclude each other locally the way they exclude
 * other processes, and only one thread per name talks to Redis at a time:
 * the others wait on the entry's condition variable.
 */
#ifndef NM_REGISTRY_H
#define NM_REGISTRY_H

#include <pthread.h>
#include <stddef.h>

#include "lease.h"
#include "netmutex.h"

typedef struct nm_entry {
    struct nm_entry *next;    /* hash chain; registry lock */
    unsigned int refs;        /* handles pointing here; registry lock */
    unsigned int name_len;    /* at most NETMUTEX_NAME_MAX */

    pthread_mutex_t mu;       /* guards every field below but cache.c's */
    pthread_cond_t cv;        /* CLOCK_MONOTONIC; signalled when busy clears */
    int64_t returning_until;  /* busy giving a cached lease back (0: not):
                                 trylock waits for that, until then at
                                 most, rather than report a holder */
    pthread_t owner;          /* that thread, when held */
    const netmutex_t *owner_handle; /* and the handle it locked */
    unsigned int depth;       /* recursion depth, when held */
    unsigned int waiters;     /* local threads in wait_local_turn */
    unsigned int cohort_turns;/* hand-offs since the lease was acquired */
    /* The flags are one byte each, not bit-fields: every byte is a memory
     * location of its own, so cache_listed (list_lock) shares none with
     * the others (mu), and a held lock costs the fewest bytes
     * (docs/design.md, "Memory per held lock"). */
    unsigned char busy;       /* the server-side lock is ours or being got
                                 or given back by a local thread */
    unsigned char held;       /* a local thread holds it */
    unsigned char inconsistent; /* robust: EOWNERDEAD given, not repaired yet */
    unsigned char handoff;    /* unlocked, lease kept for a local waiter */
    unsigned char reserved;   /* fair: the next turn is for a waiting thread */
    /* Lease caching (cache.h). */
    unsigned char cacheable;  /* the lease may be kept after unlock */
    unsigned char cached;     /* kept, and no local thread holds it: busy
                                 is 0, and the next lock takes it */
    unsigned char revoked;    /* another process wants it: give it back at
                                 the next unlock (or now, if cached) */
    unsigned char listening;  /* requests for it reach us: the
                                 subscription is confirmed and not lost */
    unsigned char marked_idle;/* the server was told no thread is in it */
    unsigned char cache_listed; /* cache.c's list (its own lock) */
    int64_t cohort_start;     /* when the lease was acquired (monotonic ms) */
    nm_lease_t lease;         /* the server-side acquisition, when held
                                 or cached */
    int64_t idle_since;       /* when it was last cached (monotonic ms) */
    /* cache.c's list (its own lock) and its channel (the sweeping thread) */
    struct nm_entry *cache_next;
    int64_t cache_used;       /* when it last had a cacheable lease */
    struct nm_chan *revoke_ch;
    char asked[NM_TOKEN_LEN + 1];  /* a request for a lease still being
                                      acquired: its token, or "" */
    char answer[NM_TOKEN_LEN + 1]; /* a trylock to tell the mutex is held */
    char name[];              /* NUL-terminated copy, in the entry's own
                                 allocation */
} nm_entry_t;

/* The entry for NAME, created if needed, with one more reference; NULL when
 * out of memory. */
nm_entry_t *nm_registry_get(const char *name, size_t len);

/* Calls FN with NAME's entry if it exists (no lock held during the call). */
void nm_registry_with(const char *name, size_t len, void (*fn)(nm_entry_t *));

/* One more reference to E, which the caller already has one of. */
void nm_registry_ref(nm_entry_t *e);

/* Drops a reference; the last one frees the entry. */
void nm_registry_put(nm_entry_t *e);

/* Bookkeeping of how many entries are held, for netmutex_configure and
 * netmutex_shutdown, which refuse to pull the configuration from under a
 * held lock. */
void nm_registry_note_held(int delta);
int nm_registry_any_held(void);

/* pthread_atfork hooks: quiesce every entry before fork(); afterwards the
 * parent carries on, and the child starts with nothing held. */
void nm_registry_before_fork(void);
void nm_registry_after_fork_parent(void);
void nm_registry_after_fork_child(void);

#endif /* NM_REGISTRY_H */
