/*
 * wake.h -- waking local waiters when a lock is released anywhere.
 *
 * The release script PUBLISHes on a channel named like the lock key.  The
 * background thread (its subscriber job, subscriber.c) owns one subscriber
 * connection per server and subscribes to the channel of every name that
 * has a waiter in this process; each message, from any server, bumps that channel's sequence
 * number and wakes its waiters.  A waiter reads the sequence number before each attempt and
 * sleeps only while it is unchanged, so a release between a failed attempt
 * and the sleep is never missed once the subscription is confirmed.
 *
 * In a Redis Cluster the channels are shard channels (SSUBSCRIBE): each
 * one is subscribed on the master that serves its slot, through the
 * subscriber the background thread keeps for that master, and a channel
 * whose slot moves is subscribed again where the slot went.  A subscriber
 * is known by its index: the server's in quorum mode, the master's in the
 * background thread's table in cluster mode.
 */
#ifndef NM_WAKE_H
#define NM_WAKE_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

typedef struct nm_chan nm_chan_t;

/* ---- for waiters ---- */

/* Starts listening on KEY's channel (quorum mode's waiters); NULL if that
 * is impossible (no memory, no background thread): the caller then polls. */
nm_chan_t *nm_wake_listen(const char *key, size_t len);
void nm_wake_unlisten(nm_chan_t *ch);

/* Waits until NEED servers confirmed the subscription (in quorum mode a
 * quorum: any release reaches at least one of them): 0, or ETIMEDOUT at
 * UNTIL (monotonic ms) if they did not (subscribers are down). */
int nm_wake_ready(nm_chan_t *ch, size_t need, int64_t until);

uint64_t nm_wake_seq(nm_chan_t *ch);

/* Sleeps until the sequence number differs from SEEN (a message on the
 * channel, or the subscriber reconnected) or UNTIL: 0 woken, ETIMEDOUT.
 * Being woken proves nothing (messages can be forged): the waiter tries
 * again. */
int nm_wake_wait(nm_chan_t *ch, uint64_t seen, int64_t until);

/* ---- for code of the background thread (cache.c) ---- */

/* What a channel's callback is told.  SUBSCRIBED: the subscription on the
 * server took (messages published before it were missed); DROPPED: the
 * subscriber connection went away (messages may be missed until the next
 * SUBSCRIBED). */
typedef enum nm_wake_event { NM_WAKE_MESSAGE, NM_WAKE_SUBSCRIBED, NM_WAKE_DROPPED } nm_wake_event_t;
typedef void (*nm_wake_fn)(void *arg, nm_wake_event_t ev, const char *msg, size_t len);

/* Listens on KEY's channel and calls FN(ARG, ...) for its events, on the
 * background thread (or, for DROPPED, the thread stopping it), with none of
 * this module's locks held, until nm_wake_unsubscribe().  NULL if that is
 * impossible (no memory, no background thread). */
nm_chan_t *nm_wake_subscribe(const char *key, size_t len, nm_wake_fn fn, void *arg);
/* Stops the calls: once it returns, FN is running nowhere and will not be
 * called again, so ARG may be freed (when called from FN itself, only the
 * calling invocation may still be running).  The subscription lingers
 * like any other. */
void nm_wake_unsubscribe(nm_chan_t *ch);

/* ---- for the background thread ---- */

/* Subscribers a channel can be known to: NM_SERVERS_MAX servers in quorum
 * mode, up to this many masters of a cluster (names whose slots live on
 * further masters are not listened to, so their leases are not kept
 * cached). */
#define NM_WAKE_SUBS_MAX 32

/* Cluster mode: the index of the subscriber that serves SLOT now, or -1
 * (no master known for it, or no room for one more subscriber).  Called
 * with this module's lock held. */
typedef int (*nm_wake_route_fn)(unsigned int slot, void *arg);

/* Whether any channel is wanted (so a subscriber connection is needed). */
int nm_wake_wanted(void);

/* Cluster mode: whether subscriber INDEX has anything to do: a channel to
 * subscribe there (ROUTE says so) or a subscription there to undo. */
int nm_wake_wanted_on(size_t index, nm_wake_route_fn route, void *arg);

/* Cluster mode: asks ROUTE about every wanted channel, so that every
 * subscriber needed exists before the flushes. */
void nm_wake_route(nm_wake_route_fn route, void *arg);

/* Sends the SUBSCRIBEs and UNSUBSCRIBEs due on SUB, subscriber INDEX, by
 * DEADLINE, and tells callbacks that came after their channel's
 * subscription took that it is in place; returns 0 or NM_ECONN.  *NEXT is
 * lowered to when an idle channel should be unsubscribed.  ROUTE NULL:
 * SUBSCRIBE every channel on every server; else (cluster mode) SSUBSCRIBE
 * a channel only where ROUTE puts it, and SUNSUBSCRIBE it where it was
 * if its slot moved (its callback is told DROPPED). */
int nm_wake_flush(redisContext *sub, size_t index, nm_wake_route_fn route, void *arg,
                  int64_t deadline, int64_t *next);

/* What a read learnt about the cluster's slot map: MOVED, the text of a
 * MOVED answer to an SSUBSCRIBE (the channels of that slot are wanted
 * again); STALE, a master dropped shard channels by itself (their slot
 * went elsewhere): the map is to be read again. */
typedef struct nm_wake_remap {
    int stale;
    char moved[160];
} nm_wake_remap_t;

/* Reads what SUB (subscriber INDEX) has for us (poll said readable): 0 or
 * NM_ECONN; *REMAP says what the slot map needs. */
int nm_wake_read(redisContext *sub, size_t index, nm_wake_remap_t *remap);

/* The subscriber connection to SERVER (NM_WAKE_ALL: every one) is gone:
 * nothing is subscribed there any more, and every waiter retries (a
 * release may have been missed). */
#define NM_WAKE_ALL ((size_t)-1)
void nm_wake_disconnected(size_t server);

/* Who serves the channels: SERVE has the thread that runs the
 * subscribers look at the table soon, 0 or an errno (the background
 * thread's poke, registered by subscriber.c with its job: the table calls
 * it rather than include a layer above). */
void nm_wake_set_server(int (*serve)(void));

/* pthread_atfork hooks. */
void nm_wake_before_fork(void);
void nm_wake_after_fork_parent(void);
void nm_wake_after_fork_child(void);

#endif /* NM_WAKE_H */
