/* entry.c -- a name's states and the moves between them (entry.h). */
#include "nm.h"

#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "entry.h"
#include "held.h"
#include "lockdep.h"
#include "log.h"
#include "stats.h"

static int held_total; /* atomic: names HELD, HANDOFF or RELEASING, and list holds */

static const char *const state_names[] = {
    [NM_FREE] = "free",         [NM_ACQUIRING] = "acquiring", [NM_HELD] = "held",
    [NM_HANDOFF] = "handoff",   [NM_CACHED] = "cached",       [NM_RELEASING] = "releasing",
    [NM_RETURNING] = "returning",
};

const char *nm_entry_state_name(nm_state_t s)
{
    return (size_t)s < sizeof state_names / sizeof state_names[0] ? state_names[s] : "?";
}

#define BIT(s) (1u << (s))

/* E moves to TO for EVENT, which only starts from the states in FROM.  Any
 * other is a bug in the library, and going on would hold a lock twice or
 * lose one: say so and stop. */
static void move(nm_entry_t *e, unsigned int from, nm_state_t to, const char *event)
{
    if (!(from & BIT(e->state))) {
        netmutex_log(NETMUTEX_LOG_ERROR, "internal error: %s of \"%s\" while %s", event,
                     e->name, nm_entry_state_name((nm_state_t)e->state));
        abort();
    }
    e->state = (unsigned char)to;
}

static void note_held(int delta)
{
    __atomic_add_fetch(&held_total, delta, __ATOMIC_ACQ_REL);
}

/* The calling thread holds E through HANDLE, as a mutex holds: once. */
static void own(nm_entry_t *e, const void *handle)
{
    e->hold.owner = pthread_self();
    e->hold.handle = handle;
    e->hold.depth = 1;
    nm_held_push(NM_HELD_MUTEX, e, e->name);
    if (__builtin_expect(nm_lockdep_on, 0))
        nm_lockdep_taken();
}

/* Nobody holds E any more (the lease may stay: HANDOFF, CACHED). */
static void disown(nm_entry_t *e)
{
    nm_held_pop(NM_HELD_MUTEX, e);
    e->hold.handle = NULL;
    e->hold.depth = 0;
}

/* ---- statistics (stats.h) ------------------------------------------------ */

struct nm_stat *nm_entry_stat(const nm_entry_t *e)
{
    if (!nm_stats_on())
        return NULL;
    struct nm_stat *s = __atomic_load_n(&e->stat, __ATOMIC_ACQUIRE);
    if (!s) {
        /* The family is the kind: mutex, rwlock, semaphore.  Threads
         * racing here find the same record. */
        s = nm_stats_record((int)e->family, e->name, e->name_len);
        __atomic_store_n(&((nm_entry_t *)e)->stat, s, __ATOMIC_RELEASE);
    }
    return s;
}

/* Under e->mu: HOLD ends. */
static void hold_ended(nm_entry_t *e, nm_hold_t *hold)
{
    if (hold->stat_t0) {
        nm_stats_released(__atomic_load_n(&e->stat, __ATOMIC_ACQUIRE), hold->stat_t0);
        hold->stat_t0 = 0;
    }
}

void nm_entry_acquiring(nm_entry_t *e)
{
    move(e, BIT(NM_FREE), NM_ACQUIRING, "acquiring");
}

void nm_entry_granted(nm_entry_t *e, const void *handle, const nm_lease_t *lease)
{
    move(e, BIT(NM_ACQUIRING), NM_HELD, "granted");
    e->hold.lease = *lease;
    e->hold.kind = NM_HOLD_MUTEX;
    own(e, handle);
    note_held(1);
    e->hold.stat_t0 = nm_stats_acquired(nm_entry_stat(e), lease->contended, 0);
}

void nm_entry_not_granted(nm_entry_t *e)
{
    move(e, BIT(NM_ACQUIRING), NM_FREE, "not granted");
    nm_stats_not_acquired();
    pthread_cond_signal(&e->cv);
}

void nm_entry_take(nm_entry_t *e, const void *handle)
{
    int from_cache = e->state == NM_CACHED;
    move(e, BIT(NM_HANDOFF) | BIT(NM_CACHED), NM_HELD, "take");
    own(e, handle);
    if (from_cache)
        note_held(1);
    e->hold.stat_t0 = nm_stats_acquired(nm_entry_stat(e), 0, 0);
}

void nm_entry_hand_off(nm_entry_t *e)
{
    move(e, BIT(NM_HELD), NM_HANDOFF, "hand off");
    hold_ended(e, &e->hold);
    nm_stats_handoff(nm_entry_stat(e));
    disown(e);
    pthread_cond_signal(&e->cv);
}

void nm_entry_keep(nm_entry_t *e)
{
    move(e, BIT(NM_HELD), NM_CACHED, "keep");
    hold_ended(e, &e->hold);
    disown(e);
    note_held(-1);
    pthread_cond_signal(&e->cv);
}

void nm_entry_releasing(nm_entry_t *e, nm_lease_t *out)
{
    move(e, BIT(NM_HELD), NM_RELEASING, "releasing");
    hold_ended(e, &e->hold);
    *out = e->hold.lease;
    memset(&e->hold.lease, 0, sizeof e->hold.lease);
    e->hold.inconsistent = 0;
    disown(e);
}

void nm_entry_unkeep(nm_entry_t *e, nm_state_t to, nm_lease_t *out)
{
    if (to != NM_ACQUIRING && to != NM_RETURNING)
        to = NM_RETURNING; /* keeps move() from passing anything else */
    move(e, BIT(NM_CACHED), to, "unkeep");
    *out = e->hold.lease;
    memset(&e->hold.lease, 0, sizeof e->hold.lease);
    if (to == NM_RETURNING)
        e->returning_until = nm_now_ms() + (int64_t)out->cfg->io_timeout_ms;
}

void nm_entry_freed(nm_entry_t *e)
{
    int released = e->state == NM_RELEASING;
    move(e, BIT(NM_RELEASING) | BIT(NM_RETURNING), NM_FREE, "freed");
    e->returning_until = 0;
    if (released) {
        note_held(-1);
        pthread_cond_signal(&e->cv);
    } else {
        /* Every waiter: a trylock waiting for the give-back is one. */
        pthread_cond_broadcast(&e->cv);
    }
}

void nm_entry_hold_add(nm_entry_t *e, nm_hold_node_t *node, const void *handle,
                       nm_hold_kind_t kind)
{
    node->hold.kind = (unsigned char)kind;
    node->hold.owner = pthread_self();
    node->hold.handle = handle;
    node->hold.depth = 1;
    node->next = e->holds;
    e->holds = node;
    nm_held_push((nm_held_kind_t)kind, e, e->name);
    if (__builtin_expect(nm_lockdep_on, 0))
        nm_lockdep_taken();
    note_held(1);
    node->hold.stat_t0 = nm_stats_acquired(nm_entry_stat(e), node->hold.lease.contended,
                                           kind == NM_HOLD_SHARE);
}

void nm_entry_hold_remove(nm_entry_t *e, nm_hold_node_t *node)
{
    nm_hold_node_t **p = &e->holds;
    while (*p && *p != node)
        p = &(*p)->next;
    if (!*p) {
        netmutex_log(NETMUTEX_LOG_ERROR, "internal error: a hold of \"%s\" not on its list",
                     e->name);
        abort();
    }
    *p = node->next;
    node->next = NULL;
    if (pthread_equal(node->hold.owner, pthread_self()))
        nm_held_pop((nm_held_kind_t)node->hold.kind, e);
    note_held(-1);
    hold_ended(e, &node->hold);
}

nm_hold_node_t *nm_entry_hold_mine(const nm_entry_t *e)
{
    nm_hold_node_t *n = e->holds;
    while (n && !pthread_equal(n->hold.owner, pthread_self()))
        n = n->next;
    return n;
}

int nm_entry_hold_through(const nm_entry_t *e, const void *handle)
{
    for (const nm_hold_node_t *n = e->holds; n; n = n->next)
        if (n->hold.handle == handle)
            return 1;
    return 0;
}

void nm_entry_reset_in_child(nm_entry_t *e)
{
    /* The holds on the list are the parent's threads': their leases stay
     * the parent's, as the one below does. */
    while (e->holds) {
        nm_hold_node_t *n = e->holds;
        e->holds = n->next;
        nm_lease_forget(&n->hold.lease);
        free(n);
    }
    if (e->rshare) { /* the parent's cached read share */
        nm_lease_forget(&e->rshare->hold.lease);
        free(e->rshare);
        e->rshare = NULL;
    }
    e->rreaders = 0;
    if (e->hold.lease.key)
        nm_lease_forget(&e->hold.lease);
    memset(&e->hold, 0, sizeof e->hold);
    /* A lease cached by the parent stays the parent's (cache.c drops the
     * child's copy of its list and references). */
    memset(&e->cache, 0, sizeof e->cache);
    e->state = NM_FREE;
    e->returning_until = 0;
    e->waiters = 0;
    e->reserved = 0;
}

int nm_entry_any_held(void)
{
    return __atomic_load_n(&held_total, __ATOMIC_ACQUIRE) > 0;
}

void nm_entry_after_fork_child(void)
{
    held_total = 0;
    nm_held_after_fork_child();
}
