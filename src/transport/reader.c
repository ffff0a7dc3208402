/*
 * reader.c -- the bounds on a context's reader (reader.h): a reply's
 * arrays may not claim more elements than its bytes could hold.
 */
#include "nm.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "reader.h"

/* hiredis 0.14 allocates an array's element pointers as soon as it reads
 * the count ("*N"), before any element came: one line "*2000000000" from a
 * hostile or broken server cost 16 GB, and every array nested in it as
 * much again.  N elements take at least 3N bytes, and no reply of ours
 * comes near NM_READER_MAX, so the arrays of one reply may claim
 * NM_READER_MAX / 3 elements in all; a reply that claims more is refused
 * as malformed (hiredis sees its out-of-memory error, we a broken
 * connection).  The count is the context's own (the reader's privdata). */
#define NM_REPLY_ELEMENTS_MAX (NM_READER_MAX / 3)

typedef struct guard {
    size_t claimed; /* by the arrays of the reply being read */
    int refused;
} guard_t;

static pthread_mutex_t guard_lock = PTHREAD_MUTEX_INITIALIZER;
static redisReplyObjectFunctions *hiredis_fn; /* guard_lock; then read-only */
static redisReplyObjectFunctions guarded_fn;

/* hiredis 1.0 counts an array's elements in a size_t, 0.14 in an int. */
#if HIREDIS_MAJOR >= 1
typedef size_t elements_t;
#else
typedef int elements_t;
#endif

static void *create_array(const redisReadTask *task, elements_t elements)
{
    guard_t *g = task->privdata;
    long long n = (long long)elements;
    if (!task->parent)
        g->claimed = 0; /* a new reply */
    if (n < 0 || (unsigned long long)n > NM_REPLY_ELEMENTS_MAX - g->claimed) {
        g->refused = 1;
        return NULL;
    }
    g->claimed += (size_t)n;
    return hiredis_fn->createArray(task, elements);
}

int nm_reader_guard(redisContext *c)
{
    guard_t *g = calloc(1, sizeof *g);
    if (!g)
        return ENOMEM;
    pthread_mutex_lock(&guard_lock);
    if (!hiredis_fn) {
        hiredis_fn = c->reader->fn;
        guarded_fn = *hiredis_fn;
        guarded_fn.createArray = create_array;
    }
    pthread_mutex_unlock(&guard_lock);
    c->reader->fn = &guarded_fn;
    c->reader->privdata = g;
    return 0;
}

void nm_reader_unguard(redisContext *c)
{
    if (c->reader && c->reader->fn == &guarded_fn) {
        free(c->reader->privdata);
        c->reader->privdata = NULL;
        c->reader->fn = hiredis_fn;
    }
}

int nm_reader_error(const redisContext *c)
{
    const guard_t *g = c->reader && c->reader->fn == &guarded_fn ? c->reader->privdata : NULL;
    return c->err == REDIS_ERR_OOM && !(g && g->refused) ? ENOMEM : NM_ECONN;
}
