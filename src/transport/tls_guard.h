/*
 * tls_guard.h -- the fork guard of TLS: a count of the threads inside
 * OpenSSL, which fork() waits to see reach zero (tls.c's fork handlers).
 */
#ifndef NM_TLS_GUARD_H
#define NM_TLS_GUARD_H

/* Every call into OpenSSL, and every use of the stored sessions, is made
 * between these two, which a thread may nest.  Nothing between them
 * blocks, nor takes a lock of the library but tls.c's store_lock. */
void nm_tls_enter(void);
void nm_tls_leave(void);

/* Before fork(): waits until no thread is inside and keeps new ones out
 * (the caller holds every other lock of the library but store_lock);
 * open again after fork(), in the parent and in the child. */
void nm_tls_guard_shut(void);
void nm_tls_guard_open(void);

#endif /* NM_TLS_GUARD_H */
