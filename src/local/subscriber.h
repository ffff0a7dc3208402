/*
 * subscriber.h -- the background thread's subscriber job: the connections
 * that serve wake.h's channels, one per server (quorum mode: every server;
 * cluster mode: one per master that serves the slot of a channel listened
 * to, up to NM_WAKE_SUBS_MAX).
 *
 * The job dials the subscribers while channels are wanted, has wake.c send
 * their SUBSCRIBEs and UNSUBSCRIBEs, and gives the background thread their
 * sockets to poll; what arrives is wake.c's to read (nm_wake_read).  It
 * also keeps the count of those reads that nm_subscriber_settle() waits
 * on: requests for a cached lease that Redis handled before an unlock must
 * be read before the unlock keeps the lease (cache.c).
 */
#ifndef NM_SUBSCRIBER_H
#define NM_SUBSCRIBER_H

#include <stdint.h>

/* Registers the job with the background thread (once; mutex.c). */
void nm_subscriber_register(void);

/* If requests may have arrived on a subscriber that the thread has not
 * read yet, has it read them (until UNTIL at the latest): an unlock about
 * to keep a lease cached calls it, so that a request Redis had handled
 * before the unlock is honoured (cache.c). */
void nm_subscriber_settle(int64_t until);

/* pthread_atfork hook: the child has no subscriber connection. */
void nm_subscriber_after_fork_child(void);

#endif /* NM_SUBSCRIBER_H */
