/*
 * unit_held.c -- the calling thread's list of holds (src/local/held.c),
 * without a server: pushes and pops in any order, recursion counted once
 * through the entry moves, the heap array past the fixed one, another
 * thread's list kept apart, the call site slot (a site named goes to the
 * next hold only), and the walk's order.
 */
#include "ac_config.h"

#include <errno.h>
#include <glib.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "nm.h"
#include "clock.h"
#include "config.h"
#include "entry.h"
#include "held.h"

static int collect(const nm_held_t *h, void *arg)
{
    g_ptr_array_add(arg, (gpointer)h->name);
    return 0;
}

static GPtrArray *names(void)
{
    GPtrArray *a = g_ptr_array_new();
    nm_held_each(collect, a);
    return a;
}

static void test_push_pop(void)
{
    int a = 0, b = 0, c = 0;
    g_assert_cmpuint(nm_held_count(), ==, 0);
    nm_held_push(NM_HELD_MUTEX, &a, "a");
    nm_held_push(NM_HELD_READ, &b, "b");
    nm_held_push(NM_HELD_PERMIT, &c, "c");
    nm_held_push(NM_HELD_PERMIT, &c, "c");
    g_assert_cmpuint(nm_held_count(), ==, 4);
    /* Out of order: b first; a pop of another kind of b is not b's. */
    nm_held_pop(NM_HELD_WRITE, &b);
    g_assert_cmpuint(nm_held_count(), ==, 4);
    nm_held_pop(NM_HELD_READ, &b);
    GPtrArray *n = names();
    g_assert_cmpuint(n->len, ==, 3);
    g_assert_cmpstr(n->pdata[0], ==, "a");
    g_assert_cmpstr(n->pdata[1], ==, "c");
    g_assert_cmpstr(n->pdata[2], ==, "c");
    g_ptr_array_free(n, TRUE);
    nm_held_pop(NM_HELD_PERMIT, &c);
    nm_held_pop(NM_HELD_PERMIT, &c);
    nm_held_pop(NM_HELD_MUTEX, &a);
    nm_held_pop(NM_HELD_MUTEX, &a); /* not held: ignored */
    g_assert_cmpuint(nm_held_count(), ==, 0);
    g_assert_cmpuint(nm_held_lost(), ==, 0);
}

static int first_seq(const nm_held_t *h, void *arg)
{
    *(const nm_held_t **)arg = h;
    return 1;
}

static void test_fields(void)
{
    int a = 0, b = 0;
    int64_t before = nm_now_ms();
    nm_held_set_site("x.c", 12);
    nm_held_push(NM_HELD_WRITE, &a, "a");
    nm_held_push(NM_HELD_MUTEX, &b, "b");
    const nm_held_t *h = NULL;
    g_assert_cmpint(nm_held_each(first_seq, &h), ==, 1);
    g_assert_nonnull(h);
    g_assert_true(h->lock == &a);
    g_assert_cmpint(h->kind, ==, NM_HELD_WRITE);
    g_assert_cmpstr(h->file, ==, "x.c");
    g_assert_cmpint(h->line, ==, 12);
    g_assert_cmpint(h->since, >=, before);
    uint64_t seq_a = h->seq;
    nm_held_pop(NM_HELD_WRITE, &a);
    g_assert_cmpint(nm_held_each(first_seq, &h), ==, 1);
    g_assert_true(h->lock == &b);
    g_assert_null(h->file);
    g_assert_cmpuint(h->seq, >, seq_a);
    nm_held_pop(NM_HELD_MUTEX, &b);
}

static const nm_held_t *newest_h;

static int newest(const nm_held_t *h, void *arg)
{
    (void)arg;
    newest_h = h;
    return 0;
}

/* The site of the newest hold, as "file:line", or "-" for none. */
static char *newest_site(void)
{
    newest_h = NULL;
    nm_held_each(newest, NULL);
    g_assert_nonnull(newest_h);
    return newest_h->file ? g_strdup_printf("%s:%d", newest_h->file, newest_h->line)
                          : g_strdup("-");
}

static void assert_newest_site(const char *want)
{
    char *got = newest_site();
    g_assert_cmpstr(got, ==, want);
    g_free(got);
}

/* A site named goes to the next hold only, then is gone: a later hold
 * taken without one has none; one forgotten (FILE NULL) goes to no hold;
 * a newer site replaces an older one.  netmutex_call_site is the public
 * way in, with its argument checks. */
static void test_site_once(void)
{
    int a = 0, b = 0, c = 0, d = 0;
    g_assert_cmpint(netmutex_call_site("p.c", 7), ==, 0);
    nm_held_push(NM_HELD_MUTEX, &a, "a");
    assert_newest_site("p.c:7");
    nm_held_push(NM_HELD_READ, &b, "b");
    assert_newest_site("-");
    nm_held_pop(NM_HELD_READ, &b);
    nm_held_pop(NM_HELD_MUTEX, &a);

    /* named, then forgotten: a call that made no hold */
    g_assert_cmpint(netmutex_call_site("q.c", 9), ==, 0);
    g_assert_cmpint(netmutex_call_site(NULL, 0), ==, 0);
    nm_held_push(NM_HELD_PERMIT, &c, "c");
    assert_newest_site("-");
    nm_held_pop(NM_HELD_PERMIT, &c);

    /* the newer site wins */
    nm_held_set_site("r.c", 1);
    nm_held_set_site("s.c", 2);
    nm_held_push(NM_HELD_WRITE, &d, "d");
    assert_newest_site("s.c:2");
    nm_held_pop(NM_HELD_WRITE, &d);
    g_assert_cmpuint(nm_held_count(), ==, 0);

    /* EINVAL, and the pending site left as it was */
    g_assert_cmpint(netmutex_call_site("t.c", 3), ==, 0);
    g_assert_cmpint(netmutex_call_site("u.c", 0), ==, EINVAL);
    g_assert_cmpint(netmutex_call_site("u.c", -1), ==, EINVAL);
    g_assert_cmpint(netmutex_call_site(NULL, 5), ==, EINVAL);
    nm_held_push(NM_HELD_MUTEX, &a, "a");
    assert_newest_site("t.c:3");
    nm_held_pop(NM_HELD_MUTEX, &a);
}

static void *name_site(void *arg)
{
    (void)arg;
    nm_held_set_site("other.c", 99);
    return NULL;
}

/* A site is the naming thread's: another thread's next hold never gets it. */
static void test_site_per_thread(void)
{
    int a = 0;
    pthread_t t;
    g_assert_cmpint(pthread_create(&t, NULL, name_site, NULL), ==, 0);
    g_assert_cmpint(pthread_join(t, NULL), ==, 0);
    nm_held_push(NM_HELD_MUTEX, &a, "a");
    assert_newest_site("-");
    nm_held_pop(NM_HELD_MUTEX, &a);
}

static void test_many(void)
{
    enum { N = 5 * NM_HELD_INLINE };
    static int locks[N];
    static char labels[N][8];
    for (int i = 0; i < N; i++) {
        snprintf(labels[i], sizeof labels[i], "%d", i);
        nm_held_push(NM_HELD_MUTEX, &locks[i], labels[i]);
    }
    g_assert_cmpuint(nm_held_count(), ==, N);
    GPtrArray *n = names();
    for (int i = 0; i < N; i++)
        g_assert_cmpstr(n->pdata[i], ==, labels[i]);
    g_ptr_array_free(n, TRUE);
    /* Every other one, then the rest: the order stays. */
    for (int i = 0; i < N; i += 2)
        nm_held_pop(NM_HELD_MUTEX, &locks[i]);
    n = names();
    g_assert_cmpuint(n->len, ==, N / 2);
    for (guint i = 0; i < n->len; i++)
        g_assert_cmpstr(n->pdata[i], ==, labels[2 * i + 1]);
    g_ptr_array_free(n, TRUE);
    for (int i = 1; i < N; i += 2)
        nm_held_pop(NM_HELD_MUTEX, &locks[i]);
    g_assert_cmpuint(nm_held_count(), ==, 0);
}

/* 10,000 holds given back oldest first, then newest first: each pop is
 * cheap (this would take seconds if each one shifted the list). */
static void test_fifo_lifo(void)
{
    enum { N = 10000 };
    static int locks[N];
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N; i++)
            nm_held_push(NM_HELD_MUTEX, &locks[i], "x");
        g_assert_cmpuint(nm_held_count(), ==, N);
        for (int i = 0; i < N; i++)
            nm_held_pop(NM_HELD_MUTEX, &locks[round == 0 ? i : N - 1 - i]);
        g_assert_cmpuint(nm_held_count(), ==, 0);
    }
    /* Tombstones in the middle are swept out as the list grows again. */
    for (int i = 0; i < N; i++)
        nm_held_push(NM_HELD_MUTEX, &locks[i], "x");
    for (int i = 1; i < N - 1; i++)
        nm_held_pop(NM_HELD_MUTEX, &locks[i]);
    for (int i = 1; i < N - 1; i++)
        nm_held_push(NM_HELD_MUTEX, &locks[i], "x");
    g_assert_cmpuint(nm_held_count(), ==, N);
    GPtrArray *n = names();
    g_assert_cmpuint(n->len, ==, N);
    g_ptr_array_free(n, TRUE);
    for (int i = 0; i < N; i++)
        nm_held_pop(NM_HELD_MUTEX, &locks[i]);
    g_assert_cmpuint(nm_held_count(), ==, 0);
}

static void *other_thread(void *arg)
{
    (void)arg;
    return GSIZE_TO_POINTER(nm_held_count());
}

static void test_per_thread(void)
{
    int a = 0;
    pthread_t t;
    void *seen;
    nm_held_push(NM_HELD_MUTEX, &a, "a");
    g_assert_cmpint(pthread_create(&t, NULL, other_thread, NULL), ==, 0);
    g_assert_cmpint(pthread_join(t, &seen), ==, 0);
    g_assert_cmpuint(GPOINTER_TO_SIZE(seen), ==, 0);
    g_assert_cmpuint(nm_held_count(), ==, 1);
    nm_held_pop(NM_HELD_MUTEX, &a);
}

/* Through the entry moves: a mutex's lease taken and left every way, and
 * the lists of holds of a rwlock and a semaphore. */
static nm_config_t cfg = { .io_timeout_ms = 2000, .refs = 1 };

/* An entry of FAMILY named "e", as the registry makes one. */
static nm_entry_t *entry_of(nm_entry_family_t family)
{
    nm_entry_t *e = calloc(1, sizeof *e + 2);
    g_assert_nonnull(e);
    strcpy(e->name, "e");
    e->name_len = 1;
    e->family = (unsigned char)family;
    pthread_mutex_init(&e->mu, NULL);
    nm_cond_init_monotonic(&e->cv);
    return e;
}

static void entry_done(nm_entry_t *e)
{
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

static void test_entry_moves(void)
{
    nm_entry_t *e = entry_of(NM_FAMILY_MUTEX);
    int handle = 0;
    nm_lease_t l = { .cfg = &cfg, .lease_ms = 30000 }, out;
    l.key = g_strdup("k");
    l.key_len = 1;

    nm_entry_acquiring(e);
    g_assert_cmpuint(nm_held_count(), ==, 0);
    nm_entry_granted(e, &handle, &l);
    g_assert_cmpuint(nm_held_count(), ==, 1);
    nm_entry_mutex(e)->hold.depth++; /* a recursive relock: no move */
    nm_entry_hand_off(e);
    g_assert_cmpuint(nm_held_count(), ==, 0);
    nm_entry_take(e, &handle);
    g_assert_cmpuint(nm_held_count(), ==, 1);
    nm_entry_keep(e);
    g_assert_cmpuint(nm_held_count(), ==, 0);
    nm_entry_take(e, &handle);
    nm_entry_releasing(e, &out);
    g_assert_cmpuint(nm_held_count(), ==, 0);
    nm_entry_freed(e);
    g_free(out.key);
    entry_done(e);

    nm_entry_t *rw = entry_of(NM_FAMILY_RWLOCK), *sem = entry_of(NM_FAMILY_SEM);
    nm_hold_node_t a = { 0 }, b = { 0 };
    nm_entry_hold_add(rw, &a, &handle, NM_HOLD_SHARE);
    nm_entry_hold_add(sem, &b, &handle, NM_HOLD_PERMIT);
    g_assert_cmpuint(nm_held_count(), ==, 2);
    nm_entry_hold_remove(rw, &a);
    const nm_held_t *h = NULL;
    nm_held_each(first_seq, &h);
    g_assert_cmpint(h->kind, ==, NM_HELD_PERMIT);
    g_assert_cmpstr(h->name, ==, "e");
    nm_entry_hold_remove(sem, &b);
    g_assert_cmpuint(nm_held_count(), ==, 0);
    entry_done(rw);
    entry_done(sem);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/unit/held/push_pop", test_push_pop);
    g_test_add_func("/unit/held/fields", test_fields);
    g_test_add_func("/unit/held/site_once", test_site_once);
    g_test_add_func("/unit/held/site_per_thread", test_site_per_thread);
    g_test_add_func("/unit/held/many", test_many);
    g_test_add_func("/unit/held/fifo_lifo", test_fifo_lifo);
    g_test_add_func("/unit/held/per_thread", test_per_thread);
    g_test_add_func("/unit/held/entry_moves", test_entry_moves);
    return g_test_run();
}
