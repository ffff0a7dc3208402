/*
 * held.h -- what the calling thread holds now: every mutex, read share,
 * write lock and semaphore permit it has taken and not given back, in the
 * order it took them.
 *
 * The entry moves (entry.c) keep the list, so that every way of taking or
 * leaving a hold is counted without a hook in each API call: a mutex's
 * granted and take (a lease from the servers, handed off or cached: the
 * re-take after a condition wait is one of them) push; its hand_off, keep
 * and releasing pop; a hold on an entry's list of holds (a read share, the
 * write lock, a permit) is pushed by hold_add and popped by hold_remove.
 * Recursion counts once: a mutex's depth and a second read lock of one
 * thread never pass through these moves.
 *
 * Readers: the deadlock detector (deadlock.h) publishes a waiter's holds;
 * a lock-order checker may walk them too.  Only the calling thread's own
 * list is read, so nothing here takes a lock.  Cheap: a fixed array in
 * thread-local storage; past NM_HELD_INLINE holds the list goes on in a
 * heap array (grown by doubling, freed when the thread holds no more than
 * the fixed array again).  When that allocation fails the hold is not
 * listed and nm_held_lost() says how many were left out, so a reader knows
 * its picture is partial.
 */
#ifndef NM_HELD_H
#define NM_HELD_H

#include <stddef.h>
#include <stdint.h>

/* Holds kept in the thread-local array before the heap is used. */
#define NM_HELD_INLINE 16

typedef enum nm_held_kind {
    NM_HELD_MUTEX = 0,
    NM_HELD_READ,       /* a read-write lock's read share */
    NM_HELD_WRITE,      /* a read-write lock's write lock */
    NM_HELD_PERMIT      /* one semaphore permit (several may be held) */
} nm_held_kind_t;

typedef struct nm_held {
    const void *lock;   /* the name's entry: identity, never dereferenced */
    const char *name;   /* the entry's name: valid while the hold lasts */
    uint64_t seq;       /* the thread's acquisition count when taken */
    int64_t since;      /* monotonic ms when taken */
    const char *file;   /* the call site, when a caller named it */
    int line;           /*   (nm_held_set_site); else NULL and 0 */
    unsigned char kind; /* nm_held_kind_t */
} nm_held_t;

/* The calling thread took a hold of KIND of the name NAME (LOCK its
 * entry). */
void nm_held_push(nm_held_kind_t kind, const void *lock, const char *name);

/* The calling thread gave back a hold of KIND of LOCK: one such hold goes
 * (of several, as semaphore permits, any one: they differ only in their
 * times).  A hold not on the list (left out, or another thread's) is
 * ignored.  O(1) when holds are given back newest first or oldest first;
 * a hold in the middle leaves a tombstone, swept out later. */
void nm_held_pop(nm_held_kind_t kind, const void *lock);

/* Names the call site of the calling thread's next hold, for a caller
 * that knows it (netmutex_call_site): the thread's next nm_held_push takes
 * FILE and LINE and forgets them, so that a site is given to one hold at
 * most.  FILE NULL forgets a site not taken yet (after a call that made no
 * hold: a failed try, a recursive lock, a process-local mutex).  FILE must
 * outlive the hold (a string literal). */
void nm_held_set_site(const char *file, int line);

/* How many holds the calling thread has listed. */
size_t nm_held_count(void);

/* How many of its holds could not be listed (out of memory). */
size_t nm_held_lost(void);

/* Calls FN for each of the calling thread's holds, oldest first, until FN
 * returns non-zero (returned).  FN must not take or give back a hold. */
int nm_held_each(int (*fn)(const nm_held_t *h, void *arg), void *arg);

/* In a child after fork: the forking thread holds nothing (entry.h). */
void nm_held_after_fork_child(void);

#endif /* NM_HELD_H */
