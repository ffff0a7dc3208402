/*
 * test_fork.c -- fork() from a process that already uses netmutex
 * (docs/design.md, "Processes and threads"): the child starts with no held locks and no
 * inherited connection, may configure itself, sees the parent's locks as
 * held by another process, and nothing it does disturbs the parent's locks
 * or the parent's connection -- not even when both talk to Redis at the
 * same time, or when another parent thread holds a lock during fork().
 *
 * Under AddressSanitizer and ThreadSanitizer the forks while threads run
 * are skipped (see nm_fork_with_threads_is_safe): the sanitizers'
 * allocators are not fork-safe then.  The plain and valgrind variants run
 * them all.
 */
#include "ac_config.h"

#include "fixture.h"

#include <string.h>

static NmRedis *redis;

#define PROMPT_MS nm_ms(30000)
#define CYCLES 200

/* In a child, the check of one call: on failure say which, and exit. */
static int child_expect(int got, int want, const char *what)
{
    if (got == want)
        return 0;
    g_printerr("child: %s returned %s, expected %s\n", what, nm_errname(got),
               nm_errname(want));
    return 1;
}

/* See nm_fork_with_threads_is_safe. */
static void skip_fork_with_threads(void)
{
    g_test_skip("the sanitizer's allocator is not fork-safe while other threads run");
}

static void add_fork_test(const char *path, GTestFunc fn)
{
    g_test_add_func(path, nm_fork_with_threads_is_safe() ? fn : skip_fork_with_threads);
}

/* exec() after fork: the library's sockets are close-on-exec, so a program
 * started by a netmutex user does not keep its connections open. */
static void test_exec_inherits_no_socket(void)
{
    netmutex_t mine, other;
    char *mine_name = nm_mutex_init(&mine, "mine", NETMUTEX_NORMAL, 0);
    char *other_name = nm_mutex_init(&other, "other", NETMUTEX_NORMAL, 0);
    NmHolder *h;

    /* Connections of this thread, of another thread, and whatever the
     * library keeps in the background while locks are held. */
    nm_assert_rc(netmutex_lock(&mine), 0);
    h = nm_holder_start(&other);
    g_assert_cmpint(nm_exec_count_sockets(), ==, 0);
    nm_assert_rc(nm_holder_release(h), 0);
    nm_assert_rc(netmutex_unlock(&mine), 0);
    nm_assert_rc(netmutex_destroy(&other), 0);
    nm_assert_rc(netmutex_destroy(&mine), 0);
    g_free(other_name);
    g_free(mine_name);
}

/* What a child of a holder must see.  ARG is the parent's held mutex. */
static int child_of_holder(void *arg)
{
    netmutex_t *held = arg;
    char *own_name = g_strdup_printf("%s/child-own", g_test_get_path());
    char *url = nm_redis_url(redis);
    netmutex_config_t cfg = { .url = url };
    netmutex_t own;
    int bad = 0;

    /* The parent's lock is the parent's: another process, for us. */
    bad |= child_expect(netmutex_trylock(held), EBUSY, "trylock parent's mutex");
    bad |= child_expect(netmutex_unlock(held), EPERM, "unlock parent's mutex");
    /* We hold nothing, so we may configure. */
    bad |= child_expect(netmutex_configure(&cfg), 0, "configure");
    bad |= child_expect(netmutex_trylock(held), EBUSY, "trylock after configure");
    bad |= child_expect(netmutex_init(&own, own_name, NULL), 0, "init");
    bad |= child_expect(nm_cycles(&own, 5), 0, "own lock/unlock");
    bad |= child_expect(netmutex_destroy(&own), 0, "destroy");
    bad |= child_expect(netmutex_shutdown(), 0, "shutdown");
    g_free(url);
    g_free(own_name);
    return bad;
}

static void test_child_does_not_inherit_lock(void)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_ERRORCHECK, 0);
    char *token, *after;

    nm_assert_rc(netmutex_lock(&m), 0);
    token = nm_token_of(redis, name);
    nm_child_wait_ok(nm_fork_run_unchecked(child_of_holder, &m), PROMPT_MS);
    /* Untouched by the child: same token, still ours to unlock. */
    after = nm_token_of(redis, name);
    g_assert_cmpstr(after, ==, token);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(after);
    g_free(token);
    g_free(name);
}

/* The same, while a second parent thread holds the mutex during fork():
 * the child must not deadlock on library state that thread had locked. */
static void test_child_of_multithreaded_holder(void)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);
    NmHolder *h = nm_holder_start(&m);

    nm_child_wait_ok(nm_fork_run_unchecked(child_of_holder, &m), PROMPT_MS);
    nm_assert_rc(nm_holder_release(h), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

/* Parent and child lock and unlock at the same time, each its own name.
 * A connection shared through fork() would mix up their replies. */
static int child_cycles(void *arg)
{
    netmutex_t m;
    int rc = netmutex_init(&m, arg, NULL);

    if (rc == 0)
        rc = nm_cycles(&m, CYCLES);
    if (rc == 0)
        rc = netmutex_destroy(&m);
    if (rc == 0)
        rc = netmutex_shutdown();
    return rc == 0 ? 0 : 1;
}

static void test_parent_and_child_connections_separate(void)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, "parent", NETMUTEX_NORMAL, 0);
    char *child_name = nm_test_name("child");
    pid_t pid;

    /* The parent's thread has a live connection before the fork. */
    nm_assert_rc(nm_cycles(&m, 1), 0);
    pid = nm_fork_run_unchecked(child_cycles, child_name);
    nm_assert_rc(nm_cycles(&m, CYCLES), 0);
    nm_child_wait_ok(pid, nm_ms(60000));
    /* And the parent's connection still works after the child exited. */
    nm_assert_rc(nm_cycles(&m, 5), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(child_name);
    g_free(name);
}

int main(int argc, char **argv)
{
    int rc;

    nm_test_init(&argc, &argv);
    redis = nm_redis_start(NULL);
    nm_configure(redis);

    add_fork_test("/fork/child-does-not-inherit-held-lock", test_child_does_not_inherit_lock);
    add_fork_test("/fork/child-of-multithreaded-holder", test_child_of_multithreaded_holder);
    add_fork_test("/fork/parent-and-child-connections-separate",
                  test_parent_and_child_connections_separate);
    /* fork+exec only: nothing runs in the child before exec. */
    g_test_add_func("/fork/exec-inherits-no-socket", test_exec_inherits_no_socket);

    rc = nm_test_finish(g_test_run());
    nm_redis_free(redis);
    return rc;
}
