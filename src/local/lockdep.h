/*
 * lockdep.h -- lock-order checking (NETMUTEX_LOCKDEP=1): the orders in
 * which the process's threads take pairs of names, published through the
 * server with a lease, and an inversion -- one process took A then B,
 * another (or this one) B then A -- logged once in the cluster, with both
 * call sites, before the deadlock it makes possible happens.
 *
 * Off by default: the entry moves (entry.c) then pay one predictable
 * branch on nm_lockdep_on.  On, a hold taken while the thread holds
 * others (held.h) looks its orders up in a process-local set; a new one is
 * queued for the background thread's job (watchdog.h), which does all the
 * I/O, so a lock call never waits for the server because of it.
 * docs/design.md, "Lock-order checking", says why and how.
 */
#ifndef NM_LOCKDEP_H
#define NM_LOCKDEP_H

/* Whether checking is on: set once by nm_lockdep_register(), before any
 * thread can take a lock; read without a lock. */
extern int nm_lockdep_on;

/* The calling thread just took a hold (the newest on its held.h list):
 * notes the orders from each of its other holds to it.  Call only when
 * nm_lockdep_on.  Takes this module's lock, a leaf, and may poke the
 * background thread after it is released. */
void nm_lockdep_taken(void);

/* Reads NETMUTEX_LOCKDEP and, when it is 1, registers the job with the
 * background thread (once; mutex.c's register_jobs). */
void nm_lockdep_register(void);

/* pthread_atfork hooks (mutex.c): the lock, a leaf; the child forgets the
 * parent's orders (its own are published under its own pid). */
void nm_lockdep_before_fork(void);
void nm_lockdep_after_fork_parent(void);
void nm_lockdep_after_fork_child(void);

#endif /* NM_LOCKDEP_H */
