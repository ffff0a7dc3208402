/*
 * deadlock.h -- deadlock detection across processes and hosts: a waiter
 * registered here publishes, once it has waited DELAY, what it waits for
 * and what it holds (waitfor.h), and the background thread's deadlock job
 * walks the wait-for graph from it.  A walk that comes back to the waiter
 * is a cycle; read again a pass later, the same cycle (the same waiters
 * with the same sequence numbers) ends the wait of its youngest member
 * (the highest sequence), which every member computes alike, so one
 * waiter per cycle returns EDEADLK, holding nothing new.
 *
 * The waiting thread registers (nm_deadlock_begin, its holds copied from
 * held.h) before its acquisition and ends the registration after it
 * (nm_deadlock_end): no I/O on its path but what a victim's acquisition
 * does to leave the queue.  The job publishes, renews (the record expires
 * in NM_DEADLOCK_TTL_MS unless renewed), walks and deletes.  A victim is
 * told through a flag the acquisition loop looks at after every failed
 * attempt (waiting.h, nm_wait_stop_flag): it ends within a queued
 * waiter's pause, leaves the queue, and takes the lock instead when it
 * was granted meanwhile.
 */
#ifndef NM_DEADLOCK_H
#define NM_DEADLOCK_H

#include <stddef.h>

#include "waitfor.h" /* NM_WAIT_*: the kinds of a wait */

/* A waiter publishes after this long, its job walks this often, and its
 * record lives this long without a renewal. */
#define NM_DEADLOCK_DELAY_MS 150
#define NM_DEADLOCK_WALK_MS 150
#define NM_DEADLOCK_TTL_MS 2000

typedef struct nm_deadlock_wait nm_deadlock_wait_t;

/* Whether NETMUTEX_DEADLOCK=detect asks detection for every lock (read
 * once; another value is logged once and ignored). */
int nm_deadlock_everywhere(void);

struct nm_entry;

/* The calling thread will wait for NAME (LEN bytes), a mutex or a
 * read-write lock's share or write lock as KIND says (waitfor.h,
 * NM_WAIT_*): registers it when ON, and arms the acquisition's stop
 * flag.  ENTRY, when not NULL,
 * is the entry whose turn it waits for locally, under its lock (another
 * local thread holds the name or is getting it): a victim's wake-up then
 * broadcasts its condition variable, and the waiter asks
 * nm_deadlock_chosen() as it wakes.  NULL when not ON, or out of memory
 * (the wait is then simply not watched). */
nm_deadlock_wait_t *nm_deadlock_begin(char kind, const char *name, size_t len,
                                      struct nm_entry *entry, int on);

/* Whether W (may be NULL) was chosen as its cycle's victim. */
int nm_deadlock_chosen(const nm_deadlock_wait_t *w);

/* The wait W (may be NULL) ended with ERR: returns ERR, or EDEADLK when W
 * was chosen as a victim and the wait gave up for it. */
int nm_deadlock_end(nm_deadlock_wait_t *w, int err);

/* The job (watchdog.h): registered once by mutex.c. */
void nm_deadlock_register(void);

/* pthread_atfork hooks: the list of waiters is a leaf lock; the child
 * waits for nothing. */
void nm_deadlock_before_fork(void);
void nm_deadlock_after_fork_parent(void);
void nm_deadlock_after_fork_child(void);

#endif /* NM_DEADLOCK_H */
