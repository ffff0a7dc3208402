/* entry.c -- a name's entry: a mutex's states and the moves between them,
 * a rwlock's or a semaphore's list of holds (entry.h). */
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

static const char *const family_names[] = {
    [NM_FAMILY_MUTEX] = "mutex", [NM_FAMILY_RWLOCK] = "rwlock", [NM_FAMILY_SEM] = "semaphore",
};

void nm_entry_wrong_family(const nm_entry_t *e, const char *body)
{
    const char *family = e->family < sizeof family_names / sizeof family_names[0]
                             ? family_names[e->family]
                             : "?";
    netmutex_log(NETMUTEX_LOG_ERROR, "internal error: the %s of \"%s\", a %s's entry", body,
                 e->name, family);
    abort();
}

#define BIT(s) (1u << (s))

/* Mutex E moves to TO for EVENT, which only starts from the states in
 * FROM.  Any other is a bug in the library, and going on would hold a
 * lock twice or lose one: say so and stop.  Returns E's body. */
static nm_entry_mutex_t *move(nm_entry_t *e, unsigned int from, nm_state_t to,
                              const char *event)
{
    nm_entry_mutex_t *mx = nm_entry_mutex(e);
    if (!(from & BIT(mx->state))) {
        netmutex_log(NETMUTEX_LOG_ERROR, "internal error: %s of \"%s\" while %s", event,
                     e->name, nm_entry_state_name((nm_state_t)mx->state));
        abort();
    }
    mx->state = (unsigned char)to;
    return mx;
}

static void note_held(int delta)
{
    __atomic_add_fetch(&held_total, delta, __ATOMIC_ACQ_REL);
}

/* The calling thread holds E through HANDLE, as a mutex holds: once. */
static void own(nm_entry_t *e, const void *handle)
{
    nm_hold_t *hold = &nm_entry_mutex(e)->hold;
    hold->owner = pthread_self();
    hold->handle = handle;
    hold->depth = 1;
    nm_held_push(NM_HELD_MUTEX, e, e->name);
    if (__builtin_expect(nm_lockdep_on, 0))
        nm_lockdep_taken();
}

/* Nobody holds E any more (the lease may stay: HANDOFF, CACHED). */
static void disown(nm_entry_t *e)
{
    nm_hold_t *hold = &nm_entry_mutex(e)->hold;
    nm_held_pop(NM_HELD_MUTEX, e);
    hold->handle = NULL;
    hold->depth = 0;
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
    nm_entry_mutex_t *mx = move(e, BIT(NM_ACQUIRING), NM_HELD, "granted");
    mx->hold.lease = *lease;
    mx->hold.kind = NM_HOLD_MUTEX;
    own(e, handle);
    note_held(1);
    mx->hold.stat_t0 = nm_stats_acquired(nm_entry_stat(e), lease->contended, 0);
}

void nm_entry_not_granted(nm_entry_t *e)
{
    move(e, BIT(NM_ACQUIRING), NM_FREE, "not granted");
    nm_stats_not_acquired();
    pthread_cond_signal(&e->cv);
}

void nm_entry_take(nm_entry_t *e, const void *handle)
{
    int from_cache = nm_entry_mutex(e)->state == NM_CACHED;
    nm_entry_mutex_t *mx = move(e, BIT(NM_HANDOFF) | BIT(NM_CACHED), NM_HELD, "take");
    own(e, handle);
    if (from_cache)
        note_held(1);
    mx->hold.stat_t0 = nm_stats_acquired(nm_entry_stat(e), 0, 0);
}

void nm_entry_hand_off(nm_entry_t *e)
{
    nm_entry_mutex_t *mx = move(e, BIT(NM_HELD), NM_HANDOFF, "hand off");
    hold_ended(e, &mx->hold);
    nm_stats_handoff(nm_entry_stat(e));
    disown(e);
    pthread_cond_signal(&e->cv);
}

void nm_entry_keep(nm_entry_t *e)
{
    nm_entry_mutex_t *mx = move(e, BIT(NM_HELD), NM_CACHED, "keep");
    hold_ended(e, &mx->hold);
    disown(e);
    note_held(-1);
    pthread_cond_signal(&e->cv);
}

void nm_entry_releasing(nm_entry_t *e, nm_lease_t *out)
{
    nm_entry_mutex_t *mx = move(e, BIT(NM_HELD), NM_RELEASING, "releasing");
    hold_ended(e, &mx->hold);
    *out = mx->hold.lease;
    memset(&mx->hold.lease, 0, sizeof mx->hold.lease);
    mx->hold.inconsistent = 0;
    disown(e);
}

void nm_entry_unkeep(nm_entry_t *e, nm_state_t to, nm_lease_t *out)
{
    if (to != NM_ACQUIRING && to != NM_RETURNING)
        to = NM_RETURNING; /* keeps move() from passing anything else */
    nm_entry_mutex_t *mx = move(e, BIT(NM_CACHED), to, "unkeep");
    *out = mx->hold.lease;
    memset(&mx->hold.lease, 0, sizeof mx->hold.lease);
    if (to == NM_RETURNING)
        mx->returning_until = nm_now_ms() + (int64_t)out->cfg->io_timeout_ms;
}

void nm_entry_freed(nm_entry_t *e)
{
    int released = nm_entry_mutex(e)->state == NM_RELEASING;
    nm_entry_mutex_t *mx = move(e, BIT(NM_RELEASING) | BIT(NM_RETURNING), NM_FREE, "freed");
    mx->returning_until = 0;
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
    nm_entry_holds_t *hs = nm_entry_holds(e);
    node->hold.kind = (unsigned char)kind;
    node->hold.owner = pthread_self();
    node->hold.handle = handle;
    node->hold.depth = 1;
    node->next = hs->list;
    hs->list = node;
    nm_held_push((nm_held_kind_t)kind, e, e->name);
    if (__builtin_expect(nm_lockdep_on, 0))
        nm_lockdep_taken();
    note_held(1);
    node->hold.stat_t0 = nm_stats_acquired(nm_entry_stat(e), node->hold.lease.contended,
                                           kind == NM_HOLD_SHARE);
}

void nm_entry_hold_remove(nm_entry_t *e, nm_hold_node_t *node)
{
    nm_hold_node_t **p = &nm_entry_holds(e)->list;
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
    nm_hold_node_t *n = nm_entry_holds(e)->list;
    while (n && !pthread_equal(n->hold.owner, pthread_self()))
        n = n->next;
    return n;
}

int nm_entry_hold_through(const nm_entry_t *e, const void *handle)
{
    for (const nm_hold_node_t *n = nm_entry_holds(e)->list; n; n = n->next)
        if (n->hold.handle == handle)
            return 1;
    return 0;
}

/* In a child: mutex E's lease, if any, stays the parent's; nobody here
 * waits for it. */
static void mutex_reset_in_child(nm_entry_mutex_t *mx)
{
    if (mx->hold.lease.key)
        nm_lease_forget(&mx->hold.lease);
    memset(&mx->hold, 0, sizeof mx->hold);
    mx->state = NM_FREE;
    mx->returning_until = 0;
    mx->waiters = 0;
    mx->reserved = 0;
}

/* In a child: the holds on the list are the parent's threads', and so is
 * the cached read share: their leases stay the parent's. */
static void holds_reset_in_child(nm_entry_holds_t *hs)
{
    while (hs->list) {
        nm_hold_node_t *n = hs->list;
        hs->list = n->next;
        nm_lease_forget(&n->hold.lease);
        free(n);
    }
    if (hs->rshare) {
        nm_lease_forget(&hs->rshare->hold.lease);
        free(hs->rshare);
        hs->rshare = NULL;
    }
    hs->rreaders = 0;
}

void nm_entry_reset_in_child(nm_entry_t *e)
{
    if (e->family == NM_FAMILY_MUTEX)
        mutex_reset_in_child(nm_entry_mutex(e));
    else
        holds_reset_in_child(nm_entry_holds(e));
    /* A lease cached by the parent stays the parent's (cache.c drops the
     * child's copy of its list and references). */
    memset(&e->cache, 0, sizeof e->cache);
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
