/*
 * sites.h -- test_lockdep's lock calls through <netmutex/pthread.h>,
 * compiled with NETMUTEX_CALL_SITES (sites_on.c) and without it
 * (sites_off.c).  The mutexes are the source route's; each function takes
 * and gives back, returns 0 or the first error, and stores the line of
 * the lock call that makes its order (the second name's) in *LINE.
 */
#ifndef SITES_H
#define SITES_H

struct netmutex_pthread_mutex;

/* A then B. */
int sites_on_forward(struct netmutex_pthread_mutex *a, struct netmutex_pthread_mutex *b,
                     int *line);
/* B then A, on another line. */
int sites_on_reverse(struct netmutex_pthread_mutex *a, struct netmutex_pthread_mutex *b,
                     int *line);
/* A, then B, then a 10 ms timed wait on A (a process-local condition)
 * while B is held: A is taken again after B.  *LINE: B's lock; *WAIT_LINE:
 * the wait's. */
int sites_on_cond(struct netmutex_pthread_mutex *a, struct netmutex_pthread_mutex *b, int *line,
                  int *wait_line);
/* Calls that name a site and take no hold: a process-local mutex locked
 * and unlocked (twice: once through &pthread_mutex_lock), and a trylock of
 * HELD, which the caller holds (it fails). */
int sites_on_no_hold(struct netmutex_pthread_mutex *held);

int sites_off_forward(struct netmutex_pthread_mutex *a, struct netmutex_pthread_mutex *b,
                      int *line);
int sites_off_reverse(struct netmutex_pthread_mutex *a, struct netmutex_pthread_mutex *b,
                      int *line);
/* Locks or unlocks M alone. */
int sites_off_lock(struct netmutex_pthread_mutex *m);
int sites_off_unlock(struct netmutex_pthread_mutex *m);

#endif /* SITES_H */
