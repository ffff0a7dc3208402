/* held.c -- the calling thread's holds (held.h). */
#include "nm.h"

#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "held.h"

/* A hold given back out of order leaves a tombstone (kind DEAD) rather
 * than shift the list: unlocking in the order of locking (FIFO) or the
 * reverse (LIFO) costs O(1) each, since both ends are looked at first
 * and trimmed; the tombstones are swept out when they are half the list. */
#define DEAD 0xff

typedef struct held_list {
    size_t n;           /* slots in use, tombstones included */
    size_t head;        /* slots before it are tombstones */
    size_t live;        /* holds listed */
    size_t cap;         /* of more (0: none) */
    size_t lost;        /* left out */
    uint64_t seq;       /* acquisitions so far */
    const char *site_file; /* the next hold's site (nm_held_set_site) */
    int site_line;
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

/* Sweeps the tombstones out, keeping the order. */
static void compact(void)
{
    size_t w = 0;
    for (size_t i = held.head; i < held.n; i++)
        if (slot(i)->kind != DEAD)
            *slot(w++) = *slot(i);
    held.n = w;
    held.head = 0;
}

void nm_held_push(nm_held_kind_t kind, const void *lock, const char *name)
{
    const char *file = held.site_file;
    int line = held.site_line;
    held.site_file = NULL; /* one hold's: never a later one's */
    held.site_line = 0;
    held.seq++;
    if (held.n - held.live >= NM_HELD_INLINE && 2 * (held.n - held.live) >= held.n)
        compact();
    if (make_room() != 0) {
        held.lost++;
        return;
    }
    nm_held_t *h = slot(held.n++);
    h->lock = lock;
    h->name = name;
    h->seq = held.seq;
    h->since = nm_now_ms();
    h->file = file;
    h->line = file ? line : 0;
    h->kind = (unsigned char)kind;
    held.live++;
}

static int is(size_t i, nm_held_kind_t kind, const void *lock)
{
    const nm_held_t *h = slot(i);
    return h->kind == kind && h->lock == lock;
}

void nm_held_pop(nm_held_kind_t kind, const void *lock)
{
    size_t i = held.n;
    /* The oldest first (FIFO unlocking), then from the newest down. */
    if (held.head < held.n && is(held.head, kind, lock) &&
        !(held.n - 1 > held.head && is(held.n - 1, kind, lock)))
        i = held.head + 1;
    else
        while (i > held.head && !is(i - 1, kind, lock))
            i--;
    if (i == held.head) {
        if (held.lost > 0)
            held.lost--;
        return;
    }
    slot(i - 1)->kind = DEAD;
    held.live--;
    while (held.n > held.head && slot(held.n - 1)->kind == DEAD)
        held.n--;
    while (held.head < held.n && slot(held.head)->kind == DEAD)
        held.head++;
    if (held.live == 0)
        held.n = held.head = 0;
    if (held.more && held.n <= NM_HELD_INLINE) {
        free(held.more);
        held.more = NULL;
        held.cap = 0;
    }
}

void nm_held_set_site(const char *file, int line)
{
    held.site_file = file;
    held.site_line = file ? line : 0;
}

size_t nm_held_count(void)
{
    return held.live;
}

size_t nm_held_lost(void)
{
    return held.lost;
}

int nm_held_each(int (*fn)(const nm_held_t *h, void *arg), void *arg)
{
    for (size_t i = held.head; i < held.n; i++) {
        if (slot(i)->kind == DEAD)
            continue;
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
