/*
 * wake.h -- waking local waiters when a lock is released anywhere.
 *
 * The release script PUBLISHes on a channel named like the lock key.  The
 * background thread (watchdog.c) owns one subscriber connection per server
 * and subscribes to the channel of every name that has a waiter in this
 * process; each message, from any server, bumps that channel's sequence
 * number and wakes its waiters.  A waiter reads the sequence number before each attempt and
 * sleeps only while it is unchanged, so a release between a failed attempt
 * and the sleep is never missed once the subscription is confirmed.
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

/* Whether any channel is wanted (so a subscriber connection is needed). */
int nm_wake_wanted(void);

/* Sends the SUBSCRIBEs and UNSUBSCRIBEs due on SUB, the subscriber
 * connection to server SERVER, by DEADLINE, and tells callbacks that came
 * after their channel's subscription took that it is in place; returns 0
 * or NM_ECONN.  *NEXT is lowered to when an idle channel should be
 * unsubscribed. */
int nm_wake_flush(redisContext *sub, size_t server, int64_t deadline, int64_t *next);

/* Reads what SUB (to SERVER) has for us (poll said readable): 0 or NM_ECONN. */
int nm_wake_read(redisContext *sub, size_t server);

/* The subscriber connection to SERVER (NM_WAKE_ALL: every one) is gone:
 * nothing is subscribed there any more, and every waiter retries (a
 * release may have been missed). */
#define NM_WAKE_ALL ((size_t)-1)
void nm_wake_disconnected(size_t server);

/* pthread_atfork hooks. */
void nm_wake_before_fork(void);
void nm_wake_after_fork_parent(void);
void nm_wake_after_fork_child(void);

#endif /* NM_WAKE_H */
