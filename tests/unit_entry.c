/*
 * unit_entry.c -- a name's entry (src/local/entry.c), without a server:
 * every move of entry.h's table of a mutex's states from the states it
 * starts from, a rwlock's list of holds, the count of held names that
 * netmutex_configure and netmutex_shutdown rely on, and that a move from a
 * state its event does not start from, or of another family's body, stops
 * the process rather than go on with a lock held twice or lost.
 */
#include "ac_config.h"

#include <glib.h>
#include <stdlib.h>
#include <string.h>

#include "nm.h"
#include "clock.h"
#include "config.h"
#include "entry.h"

static nm_config_t cfg = { .io_timeout_ms = 2000, .refs = 1 };

static nm_entry_t *entry_new(nm_entry_family_t family)
{
    nm_entry_t *e = calloc(1, sizeof *e + 2);
    g_assert_nonnull(e);
    e->family = (unsigned char)family;
    strcpy(e->name, "n");
    e->name_len = 1;
    pthread_mutex_init(&e->mu, NULL);
    nm_cond_init_monotonic(&e->cv);
    return e;
}

static void entry_free(nm_entry_t *e)
{
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

/* A lease as nm_lease_acquire() leaves it, with a key of its own. */
static nm_lease_t lease_of(const char *key)
{
    nm_lease_t l = { .cfg = &cfg, .lease_ms = 30000, .fence = 7 };
    l.key = g_strdup(key);
    l.key_len = strlen(key);
    return l;
}

static int handle; /* stands for a netmutex_t */

static void test_main_cycle(void)
{
    nm_entry_t *e = entry_new(NM_FAMILY_MUTEX);
    nm_entry_mutex_t *mx = nm_entry_mutex(e);
    nm_lease_t l = lease_of("k"), out;
    g_assert_false(nm_entry_busy(e));
    nm_entry_acquiring(e);
    g_assert_true(nm_entry_busy(e));
    g_assert_false(nm_entry_any_held());
    nm_entry_granted(e, &handle, &l);
    g_assert_true(nm_entry_mine(e));
    g_assert_true(nm_entry_any_held());
    g_assert_true(mx->hold.handle == &handle);
    g_assert_cmpuint(mx->hold.depth, ==, 1);
    g_assert_cmpint(mx->hold.lease.fence, ==, 7);

    nm_entry_releasing(e, &out);
    g_assert_true(nm_entry_busy(e));
    g_assert_false(nm_entry_mine(e));
    g_assert_null(mx->hold.lease.key);
    g_assert_cmpstr(out.key, ==, "k");
    g_assert_true(nm_entry_any_held()); /* until the release is done */
    nm_entry_freed(e);
    g_assert_cmpint(mx->state, ==, NM_FREE);
    g_assert_false(nm_entry_any_held());
    g_free(out.key);
    entry_free(e);
}

static void test_not_granted(void)
{
    nm_entry_t *e = entry_new(NM_FAMILY_MUTEX);
    nm_entry_mutex_t *mx = nm_entry_mutex(e);
    nm_entry_acquiring(e);
    nm_entry_not_granted(e);
    g_assert_cmpint(mx->state, ==, NM_FREE);
    g_assert_false(nm_entry_any_held());
    entry_free(e);
}

/* HELD -> HANDOFF -> HELD keeps the lease and counts as held throughout;
 * HELD -> CACHED does not count; CACHED -> HELD counts again. */
static void test_kept_leases(void)
{
    nm_entry_t *e = entry_new(NM_FAMILY_MUTEX);
    nm_entry_mutex_t *mx = nm_entry_mutex(e);
    nm_lease_t l = lease_of("k"), out;
    nm_entry_acquiring(e);
    nm_entry_granted(e, &handle, &l);

    nm_entry_hand_off(e);
    g_assert_false(nm_entry_busy(e));
    g_assert_false(nm_entry_mine(e));
    g_assert_true(nm_entry_any_held());
    g_assert_nonnull(mx->hold.lease.key);
    nm_entry_take(e, &handle);
    g_assert_true(nm_entry_mine(e));

    nm_entry_keep(e);
    g_assert_cmpint(mx->state, ==, NM_CACHED);
    g_assert_false(nm_entry_busy(e));
    g_assert_false(nm_entry_any_held());
    nm_entry_take(e, &handle);
    g_assert_true(nm_entry_any_held());

    nm_entry_keep(e);
    nm_entry_unkeep(e, NM_RETURNING, &out);
    g_assert_cmpint(mx->state, ==, NM_RETURNING);
    g_assert_true(nm_entry_busy(e));
    g_assert_cmpint(mx->returning_until, >, nm_now_ms());
    g_assert_false(nm_entry_any_held());
    nm_entry_freed(e);
    g_assert_cmpint(mx->returning_until, ==, 0);
    g_assert_false(nm_entry_any_held());
    g_free(out.key);

    /* A stale cached lease: the locker gives it back and acquires anew. */
    l = lease_of("k2");
    nm_entry_acquiring(e);
    nm_entry_granted(e, &handle, &l);
    nm_entry_keep(e);
    nm_entry_unkeep(e, NM_ACQUIRING, &out);
    g_assert_cmpint(mx->state, ==, NM_ACQUIRING);
    g_assert_cmpint(mx->returning_until, ==, 0);
    g_assert_cmpstr(out.key, ==, "k2");
    nm_entry_not_granted(e);
    g_free(out.key);
    entry_free(e);
}

static void test_reset_in_child(void)
{
    nm_entry_t *e = entry_new(NM_FAMILY_MUTEX);
    nm_entry_mutex_t *mx = nm_entry_mutex(e);
    nm_lease_t l = lease_of("k");
    nm_config_ref(&cfg);
    nm_entry_acquiring(e);
    nm_entry_granted(e, &handle, &l);
    mx->waiters = 3;
    e->cache.able = 1;
    nm_entry_reset_in_child(e);
    nm_entry_after_fork_child();
    g_assert_cmpint(mx->state, ==, NM_FREE);
    g_assert_null(mx->hold.lease.key); /* freed: valgrind checks */
    g_assert_cmpuint(mx->waiters, ==, 0);
    g_assert_cmpuint(e->cache.able, ==, 0);
    g_assert_false(nm_entry_any_held());
    entry_free(e);
}

/* Holds of several threads (a rwlock's): each thread finds its own; the
 * list counts as held; the child forgets them and the cached read share,
 * freeing their leases. */
typedef struct hold_arg {
    nm_entry_t *e;
    nm_hold_node_t *node;
    nm_hold_node_t *found;
} hold_arg_t;

static void *add_other(void *p)
{
    hold_arg_t *a = p;
    pthread_mutex_lock(&a->e->mu);
    nm_entry_hold_add(a->e, a->node, &handle, NM_HOLD_SHARE);
    a->found = nm_entry_hold_mine(a->e);
    pthread_mutex_unlock(&a->e->mu);
    return NULL;
}

static void test_holds(void)
{
    nm_entry_t *e = entry_new(NM_FAMILY_RWLOCK);
    nm_hold_node_t mine = { 0 }, *other = calloc(1, sizeof *other);
    int other_handle;
    hold_arg_t a = { e, other, NULL };
    pthread_t t;
    g_assert_null(nm_entry_hold_mine(e));
    nm_entry_hold_add(e, &mine, &other_handle, NM_HOLD_WRITE);
    g_assert_true(nm_entry_hold_mine(e) == &mine);
    g_assert_cmpuint(mine.hold.depth, ==, 1);
    g_assert_cmpuint(mine.hold.kind, ==, NM_HOLD_WRITE);
    g_assert_true(nm_entry_any_held());
    g_assert_cmpint(pthread_create(&t, NULL, add_other, &a), ==, 0);
    g_assert_cmpint(pthread_join(t, NULL), ==, 0);
    g_assert_true(a.found == other);
    g_assert_true(nm_entry_hold_mine(e) == &mine); /* not the other's */
    g_assert_true(nm_entry_hold_through(e, &handle));
    g_assert_true(nm_entry_hold_through(e, &other_handle));
    nm_entry_hold_remove(e, &mine);
    g_assert_null(nm_entry_hold_mine(e));
    g_assert_false(nm_entry_hold_through(e, &other_handle));
    g_assert_true(nm_entry_holds(e)->list == other);
    g_assert_true(nm_entry_any_held());
    /* The child forgets the other thread's hold and the process's cached
     * share, leases and all. */
    nm_entry_holds_t *hs = nm_entry_holds(e);
    other->hold.lease = lease_of("s");
    nm_config_ref(&cfg);
    hs->rshare = calloc(1, sizeof *hs->rshare);
    hs->rshare->hold.lease = lease_of("s");
    nm_config_ref(&cfg);
    hs->rreaders = 2;
    nm_entry_reset_in_child(e);
    nm_entry_after_fork_child();
    g_assert_null(hs->list);
    g_assert_null(hs->rshare);
    g_assert_cmpuint(hs->rreaders, ==, 0);
    g_assert_false(nm_entry_any_held());
    entry_free(e);
}

static void test_names(void)
{
    g_assert_cmpstr(nm_entry_state_name(NM_FREE), ==, "free");
    g_assert_cmpstr(nm_entry_state_name(NM_RETURNING), ==, "returning");
    g_assert_cmpstr(nm_entry_state_name((nm_state_t)99), ==, "?");
}

/* Each of these is a move from a state its event does not start from, or
 * of another family's body. */
static void wrong_release(nm_entry_t *e)
{
    nm_lease_t out;
    nm_entry_releasing(e, &out);
}
static void wrong_grant(nm_entry_t *e)
{
    nm_lease_t l = { 0 };
    nm_entry_granted(e, &handle, &l);
}
static void wrong_take(nm_entry_t *e) { nm_entry_take(e, &handle); }
static void wrong_free(nm_entry_t *e) { nm_entry_freed(e); }
static void wrong_acquire_held(nm_entry_t *e)
{
    nm_lease_t l = lease_of("k");
    nm_entry_acquiring(e);
    nm_entry_granted(e, &handle, &l);
    nm_entry_acquiring(e); /* a second lock of a held name */
}

static void wrong_hold_remove(nm_entry_t *e)
{
    nm_hold_node_t n = { 0 };
    nm_entry_hold_remove(e, &n); /* never added */
}

static void wrong_acquire(nm_entry_t *e) { nm_entry_acquiring(e); }
static void wrong_busy(nm_entry_t *e) { (void)nm_entry_busy(e); }
static void wrong_hold_add(nm_entry_t *e)
{
    nm_hold_node_t n = { 0 };
    nm_entry_hold_add(e, &n, &handle, NM_HOLD_SHARE);
}

static const struct wrong_move {
    void (*fn)(nm_entry_t *);
    nm_entry_family_t family; /* the entry's it is tried on */
} wrong[] = {
    { wrong_release, NM_FAMILY_MUTEX },      { wrong_grant, NM_FAMILY_MUTEX },
    { wrong_take, NM_FAMILY_MUTEX },         { wrong_free, NM_FAMILY_MUTEX },
    { wrong_acquire_held, NM_FAMILY_MUTEX }, { wrong_hold_remove, NM_FAMILY_RWLOCK },
    { wrong_acquire, NM_FAMILY_RWLOCK },     { wrong_busy, NM_FAMILY_SEM },
    { wrong_hold_add, NM_FAMILY_MUTEX },
};

static void test_wrong_move_aborts(void)
{
    if (g_test_subprocess()) {
        const struct wrong_move *w = &wrong[atoi(g_getenv("NM_WRONG"))];
        w->fn(entry_new(w->family));
        return; /* not reached */
    }
    for (size_t i = 0; i < G_N_ELEMENTS(wrong); i++) {
        char n[8];
        g_snprintf(n, sizeof n, "%zu", i);
        g_setenv("NM_WRONG", n, 1);
        g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
        g_test_trap_assert_failed();
        g_test_trap_assert_stderr("*internal error*");
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/entry/moves/main-cycle", test_main_cycle);
    g_test_add_func("/entry/moves/not-granted", test_not_granted);
    g_test_add_func("/entry/moves/kept-leases", test_kept_leases);
    g_test_add_func("/entry/moves/reset-in-child", test_reset_in_child);
    g_test_add_func("/entry/holds/threads", test_holds);
    g_test_add_func("/entry/names", test_names);
    g_test_add_func("/entry/moves/wrong-aborts", test_wrong_move_aborts);
    return g_test_run();
}
