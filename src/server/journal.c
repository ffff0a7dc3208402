/* journal.c -- recent releases, for a new master (see journal.h). */
#include "nm.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "journal.h"

/* A ring in the order of the notes (so of their times): entry SEQ sits at
 * ring[SEQ % NM_JOURNAL_MAX] while SEQ >= next_seq - count.  Allocated at
 * the first note: only a redis-sentinel:// configuration notes. */
static pthread_mutex_t journal_lock = PTHREAD_MUTEX_INITIALIZER; /* a leaf */
static nm_journal_entry_t *ring;
static uint64_t next_seq;
static size_t count;
static void (*hook)(void); /* atomic */

static nm_journal_entry_t *at_seq(uint64_t seq)
{
    return &ring[seq % NM_JOURNAL_MAX];
}

/* Under the lock: drops the oldest entry. */
static void drop_oldest_locked(void)
{
    nm_journal_entry_t *e = at_seq(next_seq - count);
    free(e->key);
    memset(e, 0, sizeof *e);
    count--;
}

/* Under the lock: drops the oldest entries while they are past their
 * time at NOW.  An entry of a short lease behind one of a longer lease
 * stays a little longer: kept, but no longer due (due_locked). */
static void expire_locked(int64_t now)
{
    while (count && at_seq(next_seq - count)->until <= now)
        drop_oldest_locked();
}

void nm_journal_note(const nm_config_t *cfg, uint64_t master_gen, const char *key,
                     size_t key_len, size_t keys_size, unsigned int lease_ms,
                     const char *token, int robust, int unrecoverable)
{
    char *copy = malloc(keys_size);
    if (!copy)
        return;
    memcpy(copy, key, keys_size);
    pthread_mutex_lock(&journal_lock);
    if (!ring && !(ring = calloc(NM_JOURNAL_MAX, sizeof *ring))) {
        pthread_mutex_unlock(&journal_lock);
        free(copy);
        return;
    }
    int64_t now = nm_now_ms();
    expire_locked(now);
    if (count == NM_JOURNAL_MAX)
        drop_oldest_locked();
    nm_journal_entry_t *e = at_seq(next_seq);
    *e = (nm_journal_entry_t){ .seq = next_seq, .cfg_gen = cfg->generation,
                               .master_gen = master_gen,
                               .until = now + lease_ms + NM_JOURNAL_SLACK_MS, .key = copy,
                               .key_len = key_len, .keys_size = keys_size, .robust = robust,
                               .unrecoverable = unrecoverable };
    memcpy(e->token, token, NM_TOKEN_LEN);
    next_seq++;
    count++;
    pthread_mutex_unlock(&journal_lock);
    void (*fn)(void) = __atomic_load_n(&hook, __ATOMIC_ACQUIRE);
    if (fn)
        fn();
}

int nm_journal_pending(uint64_t cfg_gen, int64_t now)
{
    int found = 0;
    pthread_mutex_lock(&journal_lock);
    expire_locked(now);
    for (size_t i = 0; i < count && !found; i++) {
        const nm_journal_entry_t *e = at_seq(next_seq - count + i);
        found = e->cfg_gen == cfg_gen && e->until > now;
    }
    pthread_mutex_unlock(&journal_lock);
    return found;
}

/* Under the lock: whether entry E is due for master MASTER_GEN at NOW. */
static int due_locked(const nm_journal_entry_t *e, uint64_t cfg_gen, uint64_t master_gen,
                      int64_t now)
{
    return e->cfg_gen == cfg_gen && e->master_gen < master_gen && e->until > now;
}

/* Under the lock: a copy of E into OUT (0), or ENOMEM. */
static int copy_locked(const nm_journal_entry_t *e, nm_journal_entry_t *out)
{
    *out = *e;
    out->key = malloc(e->keys_size);
    if (!out->key)
        return ENOMEM;
    memcpy(out->key, e->key, e->keys_size);
    return 0;
}

int nm_journal_due(uint64_t cfg_gen, uint64_t master_gen, int64_t now,
                   nm_journal_entry_t **out, size_t *n)
{
    int err = 0;
    *out = NULL;
    *n = 0;
    pthread_mutex_lock(&journal_lock);
    expire_locked(now);
    size_t want = 0;
    for (size_t i = 0; i < count; i++)
        want += due_locked(at_seq(next_seq - count + i), cfg_gen, master_gen, now);
    if (want && !(*out = calloc(want, sizeof **out)))
        err = ENOMEM;
    for (size_t i = 0; !err && i < count; i++) {
        const nm_journal_entry_t *e = at_seq(next_seq - count + i);
        if (due_locked(e, cfg_gen, master_gen, now) && !(err = copy_locked(e, &(*out)[*n])))
            (*n)++;
    }
    pthread_mutex_unlock(&journal_lock);
    if (err) {
        nm_journal_free(*out, *n);
        *out = NULL;
        *n = 0;
    }
    return err;
}

void nm_journal_sent(uint64_t seq, uint64_t master_gen)
{
    pthread_mutex_lock(&journal_lock);
    /* Gone meanwhile (expired, pushed out, or forgotten): nothing to do. */
    if (count && seq >= next_seq - count && seq < next_seq && at_seq(seq)->seq == seq)
        at_seq(seq)->master_gen = NM_MAX(at_seq(seq)->master_gen, master_gen);
    pthread_mutex_unlock(&journal_lock);
}

void nm_journal_free(nm_journal_entry_t *entries, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(entries[i].key);
    free(entries);
}

void nm_journal_set_hook(void (*fn)(void))
{
    __atomic_store_n(&hook, fn, __ATOMIC_RELEASE);
}

/* Under the lock (or in a child, alone): forgets everything. */
static void clear_locked(void)
{
    while (count)
        drop_oldest_locked();
    free(ring);
    ring = NULL;
}

void nm_journal_clear(void)
{
    pthread_mutex_lock(&journal_lock);
    clear_locked();
    pthread_mutex_unlock(&journal_lock);
}

void nm_journal_before_fork(void)
{
    pthread_mutex_lock(&journal_lock);
}

void nm_journal_after_fork_parent(void)
{
    pthread_mutex_unlock(&journal_lock);
}

/* The lock was held across fork(), so the ring is whole: the child frees
 * it.  Its own releases start a journal of their own. */
void nm_journal_after_fork_child(void)
{
    clear_locked();
    pthread_mutex_unlock(&journal_lock);
}
