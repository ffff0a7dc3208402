/*
 * cache.h -- lease caching: a process keeps a lease after its last local
 * unlock, until another process wants the name.
 *
 * Hot mutexes of ported programs are locked and unlocked thousands of times
 * a second, mostly by one process at a time.  So, as distributed lock
 * managers have long done, an unlock leaves the Redis lease in place
 * (renewed by the watchdog like a held one) and the next local lock takes it
 * with no round trip.  Another process that wants the name asks for it: its
 * acquire script publishes "<holder token> <kind><asker token>" on the
 * name's channel <key>:r when the lock key says its holder caches (lib.lua),
 * and this process gives the lease back at once if no thread holds it, at
 * the next unlock if one does.  The asking process is queued in Redis as
 * any waiter, so the release hands it the lock and FIFO order holds.
 *
 * Messages can be missed (pub/sub is at most once; the subscription takes a
 * moment to start), so there are backstops: a renewal that finds waiters
 * queued counts as a request (renew.lua answers 2), a dropped subscriber
 * connection counts as a request, and a cached lease nobody used for
 * cache_idle_ms is given back.  A lease is kept only while the process
 * listens for requests: from the moment the subscription is confirmed and
 * the server said whether anybody queued for the lease held then (a
 * request published before was missed) until the subscription is lost (a
 * server that refuses SUBSCRIBE to the user, say, means no caching, not a
 * holder that cannot be asked).
 *
 * A cached lease is taken by a local lock only while the watchdog's clock
 * says at least half of it is left and nothing said it is gone: a lease
 * lost while cached is given back and acquired anew, never used.
 *
 * Never cached: robust mutexes (EOWNERDEAD must tell a death while a thread
 * held the mutex from one while it was only cached, which would need a
 * message per local lock), mutexes without autorenew, fair mutexes and
 * quorum mode.
 *
 * Read shares of a read-write lock (netmutex_rwlockattr_setcache) are
 * cached the same way, one share per process and name: the last local
 * reader's unlock keeps it (the entry's rshare, entry.h, renewed like any
 * hold) and a later rdlock of any thread of the process reads through it
 * with no round trip, several threads at once (rreaders counts them).  A
 * writer kept out by live shares publishes on the lock's channel R
 * (rwlock.lua, at every attempt of the first writer queued: a missed
 * message costs a look); a process that caches marks its share
 * revoked: no new local reader joins it (they queue at the server behind
 * the writer, so writers are not starved), and it goes back as soon as no
 * local reader is in it.  A writer of the process itself revokes it the same way.
 *
 * Locks: every function named _locked runs under the entry's mutex.  The
 * cache's own locks: sweep_lock, taken first of all, serializes the walks
 * that give leases back (the background thread's sweep job, flush); the
 * list lock is a leaf.
 */
#ifndef NM_CACHE_H
#define NM_CACHE_H

#include <stdint.h>

#include "registry.h"

/* In lock, under e->mu, E not busy: whether the calling thread may take
 * E's cached lease (1: it does so, nm_entry_take); ALLOWED says whether its
 * handle may use one.  0 otherwise, and then a cached lease that cannot be
 * used is moved to *STALE and E is ACQUIRING (entry.h): the caller gives
 * the stale lease back with nm_cache_give_back() once e->mu is released. */
int nm_cache_take_locked(nm_entry_t *e, int allowed, nm_lease_t *stale);

/* In unlock, under e->mu, E still HELD by the caller: whether its lease
 * may be kept cached (1: the caller moves E to CACHED, nm_entry_keep).  It
 * releases e->mu for a moment to let the background thread read requests
 * that have arrived (the caller still holds E). */
int nm_cache_keep_locked(nm_entry_t *e);

/* Gives back a lease taken out of the cache, by DEADLINE (NM_FOREVER: no
 * bound but the I/O timeout); one not given back in time expires. */
void nm_cache_give_back(nm_lease_t *l, int64_t deadline);

/* After a network acquisition of cacheable lease L of E, before it is
 * tracked: listens for requests on its channel (a rwlock entry's: L is a
 * read share, its key the share set S, the channel its lock's R).  0, or
 * an error: then the lease (share) must not be cached (the caller clears
 * l->cache). */
int nm_cache_attach(nm_entry_t *e, const nm_lease_t *l);

/* Under e->mu, once E holds a freshly acquired lease: its caching state,
 * and a request that came while it was being acquired. */
void nm_cache_acquired_locked(nm_entry_t *e);

/* Under e->mu, when E's lease goes back to the server. */
void nm_cache_released_locked(nm_entry_t *e);

/* Gives back E's cached lease (or idle cached read share) now, if it has
 * one (netmutex_destroy, netmutex_rwlock_destroy). */
void nm_cache_drop(nm_entry_t *e);

/* E's lease was broken by this process (netmutex_break): never keep it. */
void nm_cache_broken(nm_entry_t *e);

/* The renewal job's wanted callback (nm_watch_opts_t, renew.h): a renewal of ARG's
 * lease TOKEN found waiters. */
void nm_cache_wanted(void *arg, const char *token);

/* Registers the cache's sweep with the background thread (once;
 * mutex.c): at every pass it gives back the cached leases that are asked
 * for, idle for too long or no longer usable, answers trylocks, and stops
 * listening for names no longer used. */
void nm_cache_register(void);

/* Gives back every cached lease now (exit, netmutex_configure(),
 * netmutex_shutdown()). */
void nm_cache_flush(void);

/* netmutex_shutdown(), after the flush, with the watchdog stopped: stops
 * listening for every name. */
void nm_cache_forget(void);

/* ---- read shares of read-write locks (see the top) ---- */

/* Under e->mu, in rdlock (READER) or wrlock (!READER) of rwlock entry E by
 * a thread without a hold: 1 when a reader joins E's cached share
 * (rreaders counts it); else 0 (a writer revokes the share), with
 * *SWEEP set when a cached share no thread is in is to go back: the
 * caller calls nm_cache_sweep_soon() once e->mu is released. */
int nm_cache_share_join_locked(nm_entry_t *e, int reader, int *sweep);

/* Has the background thread sweep at once (it has a share to give back). */
void nm_cache_sweep_soon(void);

/* Under e->mu: N becomes E's cached share, the calling thread its first
 * reader (1); 0 when E has one already. */
int nm_cache_share_install_locked(nm_entry_t *e, nm_hold_node_t *n);

/* Under e->mu, in unlock of a hold through E's cached share: whether the
 * share was lost meanwhile (*LOST), and the share to give back with
 * nm_cache_share_give_back() (NULL: readers are still in it, or it stays
 * cached).  Releases e->mu for a moment, as nm_cache_keep_locked(). */
nm_hold_node_t *nm_cache_share_leave_locked(nm_entry_t *e, int *lost);

/* Gives share N of E back to the server and frees it: 0, ENOLCK (it was
 * lost), or the release's error. */
int nm_cache_share_give_back(nm_entry_t *e, nm_hold_node_t *n);

/* pthread_atfork hooks: the child has nothing cached. */
void nm_cache_before_fork(void);
void nm_cache_after_fork_parent(void);
void nm_cache_after_fork_child(void);

#endif /* NM_CACHE_H */
