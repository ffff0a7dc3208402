/* held.c -- the calling thread's holds (held.h). */
#include "nm.h"

#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "held.h"

typedef struct held_list {
    size_t n;           /* listed */
    size_t cap;         /* of more (0: none) */
    size_t lost;        /* left out */
    uint64_t seq;       /* acquisitions so far */
    nm_held_t inline_[NM_HELD_INLINE];
    nm_held_t *more;    /* holds NM_HELD_INLINE.. */
} held_list_t;

static __thread held_list_t held;

static nm_held_t *slot(size_t i)
{
    return i < NM_HELD_INLINE ? &held.inline_[i] : &held.more[i - NM_HELD_INLINE];
}

/* Room for one more hold: 0, or -1 when the heap array cannot grow. */
static int make_room(void)
{
    if (held.n < NM_HELD_INLINE + held.cap)
        return 0;
    size_t cap = held.cap ? 2 * held.cap : NM_HELD_INLINE;
    nm_held_t *more = realloc(held.more, cap * sizeof *more);
    if (!more)
        return -1;
    held.more = more;
    held.cap = cap;
    return 0;
}

void nm_held_push(nm_held_kind_t kind, const void *lock, const char *name)
{
    held.seq++;
    if (make_room() != 0) {
        held.lost++;
        return;
    }
    nm_held_t *h = slot(held.n++);
    h->lock = lock;
    h->name = name;
    h->seq = held.seq;
    h->since = nm_now_ms();
    h->file = NULL;
    h->line = 0;
    h->kind = (unsigned char)kind;
}

void nm_held_pop(nm_held_kind_t kind, const void *lock)
{
    size_t i = held.n;
    while (i > 0 && !(slot(i - 1)->lock == lock && slot(i - 1)->kind == kind))
        i--;
    if (i == 0) {
        if (held.lost > 0)
            held.lost--;
        return;
    }
    for (i--; i + 1 < held.n; i++)
        *slot(i) = *slot(i + 1);
    held.n--;
    if (held.more && held.n <= NM_HELD_INLINE) {
        free(held.more);
        held.more = NULL;
        held.cap = 0;
    }
}

void nm_held_set_site(const char *file, int line)
{
    if (held.n == 0)
        return;
    nm_held_t *h = slot(held.n - 1);
    h->file = file;
    h->line = line;
}

size_t nm_held_count(void)
{
    return held.n;
}

size_t nm_held_lost(void)
{
    return held.lost;
}

int nm_held_each(int (*fn)(const nm_held_t *h, void *arg), void *arg)
{
    for (size_t i = 0; i < held.n; i++) {
        int r = fn(slot(i), arg);
        if (r)
            return r;
    }
    return 0;
}

void nm_held_after_fork_child(void)
{
    /* The heap array is the child's copy: its own to free. */
    free(held.more);
    memset(&held, 0, sizeof held);
}
