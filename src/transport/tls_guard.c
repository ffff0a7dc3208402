/*
 * tls_guard.c -- the fork guard of TLS (tls_guard.h).
 *
 * Every call of ours into OpenSSL is made inside the guard: before fork()
 * the handlers wait until no thread is inside and keep new ones out until
 * it has returned, so that no thread of ours holds one of OpenSSL's locks
 * (the random generator's, the certificate store's) in the child's copy,
 * where the child's first handshake would wait for it forever.  Our calls
 * never block (our own non-blocking, deadline-bounded I/O), so the wait is
 * short.
 *
 * A count of the threads inside OpenSSL under a mutex, not a rwlock:
 * glibc's rwlock knows its writer by thread id, which a forked child's
 * thread does not keep, and re-making a lock in the child misleads
 * ThreadSanitizer.  A thread enters through GATE, which the fork handlers
 * hold across fork(); it leaves through INSIDE_LOCK alone, so the last one
 * out can tell a waiting handler.  Nested entries (a connection freed in
 * a call, its state unreferenced) count once, by the thread's depth.
 */
#include "nm.h"

#include <pthread.h>

#include "tls_guard.h"

static pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t inside_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t all_out = PTHREAD_COND_INITIALIZER;
static int inside;          /* inside_lock */
static __thread int depth;  /* this thread's entries */

void nm_tls_enter(void)
{
    if (depth++ > 0)
        return;
    pthread_mutex_lock(&gate);
    pthread_mutex_lock(&inside_lock);
    inside++;
    pthread_mutex_unlock(&inside_lock);
    pthread_mutex_unlock(&gate);
}

void nm_tls_leave(void)
{
    if (--depth > 0)
        return;
    pthread_mutex_lock(&inside_lock);
    if (--inside == 0)
        pthread_cond_signal(&all_out);
    pthread_mutex_unlock(&inside_lock);
}

/* The gate stays held across fork(), which keeps new threads out. */
void nm_tls_guard_shut(void)
{
    pthread_mutex_lock(&gate);
    pthread_mutex_lock(&inside_lock);
    while (inside > 0)
        pthread_cond_wait(&all_out, &inside_lock);
    pthread_mutex_unlock(&inside_lock);
}

void nm_tls_guard_open(void)
{
    pthread_mutex_unlock(&gate);
}
