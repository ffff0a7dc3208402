/*
 * test_api.c -- the pthread-style semantics of one process: every row of
 * the table "What differs from pthreads" of docs/porting.md (threads stand
 * in for "anyone else"; test_xproc repeats the cross-process rows), the
 * lifecycle (init, destroy, static initializer, same-name objects) and
 * argument validation of the mutex calls.
 */
#include "ac_config.h"

#include "fixture.h"

#include <limits.h>
#include <string.h>

static NmRedis *redis;

/* Generous bound for a call that must return without waiting for anyone. */
#define PROMPT_MS nm_ms(20000)

static bool relock_is_deadlock(int type)
{
    return type != NETMUTEX_RECURSIVE;
}

/* ---- lock / trylock on a free mutex ----------------------------------- */

static void test_lock_free(gconstpointer data)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", GPOINTER_TO_INT(data), 0);

    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

static void test_trylock_free(gconstpointer data)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", GPOINTER_TO_INT(data), 0);

    nm_assert_rc(netmutex_trylock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

/* ---- held by another thread ------------------------------------------ */

static void test_trylock_busy_other_thread(gconstpointer data)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", GPOINTER_TO_INT(data), 0);
    NmHolder *h = nm_holder_start(&m);

    nm_assert_rc(netmutex_trylock(&m), EBUSY);
    nm_assert_rc(nm_holder_release(h), 0);
    /* ...and free again once the other thread let go. */
    nm_assert_rc(netmutex_trylock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

static void test_lock_waits_for_other_thread(gconstpointer data)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", GPOINTER_TO_INT(data), 0);
    NmHolder *h = nm_holder_start(&m);
    NmCall *waiter = nm_call_start(nm_call_lock_unlock, &m);

    /* Not a speed claim: only that it does not get in while held. */
    nmt_sleep_ms(300);
    g_assert_false(nm_call_done(waiter));
    nm_assert_rc(nm_holder_release(h), 0);
    nm_assert_rc(nm_call_wait(waiter, PROMPT_MS), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

/* ---- relock by the owner --------------------------------------------- */

static void test_lock_relock_by_owner(gconstpointer data)
{
    int type = GPOINTER_TO_INT(data);
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", type, 0);

    nm_assert_rc(netmutex_lock(&m), 0);
    if (relock_is_deadlock(type)) {
        nm_assert_rc(netmutex_lock(&m), EDEADLK);
        /* The failed relock did not add a level: one unlock frees it. */
        nm_assert_rc(netmutex_unlock(&m), 0);
    } else {
        nm_assert_rc(netmutex_lock(&m), 0);
        nm_assert_rc(netmutex_unlock(&m), 0);
        nm_assert_rc(netmutex_unlock(&m), 0);
    }
    nm_assert_rc(netmutex_unlock(&m), EPERM);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

static void test_trylock_relock_by_owner(gconstpointer data)
{
    int type = GPOINTER_TO_INT(data);
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", type, 0);

    nm_assert_rc(netmutex_lock(&m), 0);
    /* Like pthread: EBUSY for NORMAL/ERRORCHECK, one more level for
     * RECURSIVE. */
    nm_assert_rc(netmutex_trylock(&m), relock_is_deadlock(type) ? EBUSY : 0);
    if (!relock_is_deadlock(type))
        nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), EPERM);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

static void test_timedlock_relock_by_owner(gconstpointer data)
{
    int type = GPOINTER_TO_INT(data);
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", type, 0);
    struct timespec deadline;

    nm_deadline(&deadline, CLOCK_REALTIME, nm_ms(60000));
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_timedlock(&m, &deadline),
                 relock_is_deadlock(type) ? EDEADLK : 0);
    if (!relock_is_deadlock(type))
        nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

/* ---- unlock by someone who does not hold it --------------------------- */

static void test_unlock_not_owner_thread(gconstpointer data)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", GPOINTER_TO_INT(data), 0);
    NmHolder *h = nm_holder_start(&m);
    char *token = nm_token_of(redis, name);
    char *after;

    nm_assert_rc(netmutex_unlock(&m), EPERM);
    /* The failed unlock changed nothing: still held, same token. */
    nm_assert_rc(netmutex_trylock(&m), EBUSY);
    after = nm_token_of(redis, name);
    g_assert_cmpstr(after, ==, token);
    nm_assert_rc(nm_holder_release(h), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(after);
    g_free(token);
    g_free(name);
}

static void test_unlock_unlocked(gconstpointer data)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", GPOINTER_TO_INT(data), 0);

    nm_assert_rc(netmutex_unlock(&m), EPERM);
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), EPERM);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

/* ---- RECURSIVE -------------------------------------------------------- */

static void test_recursive_depth(void)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_RECURSIVE, 0);
    struct timespec deadline;

    /* Three levels, through each way of locking. */
    nm_deadline(&deadline, CLOCK_REALTIME, nm_ms(60000));
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_trylock(&m), 0);
    nm_assert_rc(netmutex_timedlock(&m, &deadline), 0);
    for (int level = 3; level > 0; level--) {
        /* Until the last unlock, nobody else gets in. */
        nm_assert_rc(nm_call_run(nm_call_trylock_unlock, &m, PROMPT_MS), EBUSY);
        nm_assert_rc(netmutex_unlock(&m), 0);
    }
    nm_assert_rc(netmutex_unlock(&m), EPERM);
    /* Released for real: another thread can take it. */
    nm_assert_rc(nm_call_run(nm_call_trylock_unlock, &m, PROMPT_MS), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

/* ---- timedlock / clocklock ------------------------------------------- */

/* Locks M with a deadline MS from now on CLOCK (timedlock for REALTIME
 * when USE_TIMEDLOCK), while another thread holds it; asserts ETIMEDOUT no
 * earlier than the deadline and within a generous bound after it. */
static void expect_timeout(netmutex_t *m, clockid_t clock, bool use_timedlock,
                           unsigned int ms)
{
    struct timespec deadline, now;
    int rc;

    nm_deadline(&deadline, clock, ms);
    rc = use_timedlock ? netmutex_timedlock(m, &deadline)
                       : netmutex_clocklock(m, clock, &deadline);
    clock_gettime(clock, &now);
    nm_assert_rc(rc, ETIMEDOUT);
    nm_assert_timed_out_at(&now, &deadline, nm_ms(10000));
}

static void run_timeout_case(clockid_t clock, bool use_timedlock)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);
    NmHolder *h = nm_holder_start(&m);

    expect_timeout(&m, clock, use_timedlock, 300);
    nm_assert_rc(nm_holder_release(h), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

static void test_timedlock_times_out(void)
{
    run_timeout_case(CLOCK_REALTIME, true);
}

static void test_clocklock_monotonic_times_out(void)
{
    run_timeout_case(CLOCK_MONOTONIC, false);
}

static void test_clocklock_realtime_times_out(void)
{
    run_timeout_case(CLOCK_REALTIME, false);
}

/* The holder lets go well before the deadline: the wait ends with 0. */
static void run_freed_before_deadline(clockid_t clock, bool use_timedlock)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);
    NmHolder *h = nm_holder_start(&m);
    struct timespec deadline;
    int rc;

    nm_deadline(&deadline, clock, nm_ms(30000));
    nm_holder_release_later(h, 200);
    rc = use_timedlock ? netmutex_timedlock(&m, &deadline)
                       : netmutex_clocklock(&m, clock, &deadline);
    nm_assert_rc(rc, 0);
    nm_assert_rc(nm_holder_join(h), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

static void test_timedlock_freed_before_deadline(void)
{
    run_freed_before_deadline(CLOCK_REALTIME, true);
}

static void test_clocklock_monotonic_freed_before_deadline(void)
{
    run_freed_before_deadline(CLOCK_MONOTONIC, false);
}

/* pthread: a free mutex is taken even when the deadline already passed. */
static void test_timedlock_past_deadline_free(void)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);
    struct timespec past = { .tv_sec = 1, .tv_nsec = 0 };

    nm_assert_rc(netmutex_timedlock(&m, &past), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_clocklock(&m, CLOCK_MONOTONIC, &past), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

static void test_timedlock_bad_nsec(void)
{
    static const long bad[] = { -1, 1000000000L, LONG_MAX, LONG_MIN };
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);
    /* The table's row: the lock is busy, so abstime must be looked at. */
    NmHolder *h = nm_holder_start(&m);

    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        struct timespec ts;

        nm_deadline(&ts, CLOCK_REALTIME, 60000);
        ts.tv_nsec = bad[i];
        g_test_message("tv_nsec = %ld", bad[i]);
        nm_assert_rc(netmutex_timedlock(&m, &ts), EINVAL);
        nm_assert_rc(netmutex_clocklock(&m, CLOCK_MONOTONIC, &ts), EINVAL);
    }
    nm_assert_rc(netmutex_timedlock(&m, NULL), EINVAL);
    nm_assert_rc(netmutex_clocklock(&m, CLOCK_MONOTONIC, NULL), EINVAL);
    nm_assert_rc(nm_holder_release(h), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

static void test_clocklock_bad_clock(void)
{
    static const clockid_t bad[] = { CLOCK_PROCESS_CPUTIME_ID,
                                     CLOCK_THREAD_CPUTIME_ID, -1, 12345 };
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);
    struct timespec ts;

    nm_deadline(&ts, CLOCK_MONOTONIC, 60000);
    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        NmHolder *h;

        g_test_message("clockid = %d", (int)bad[i]);
        /* Rejected whether or not the lock is free... */
        nm_assert_rc(netmutex_clocklock(&m, bad[i], &ts), EINVAL);
        /* ...and without having taken it. */
        nm_assert_rc(netmutex_unlock(&m), EPERM);
        h = nm_holder_start(&m);
        nm_assert_rc(netmutex_clocklock(&m, bad[i], &ts), EINVAL);
        nm_assert_rc(nm_holder_release(h), 0);
    }
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

/* ---- destroy ---------------------------------------------------------- */

static void test_destroy_while_locked(void)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);
    NmHolder *h;

    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), EBUSY);
    /* The refused destroy left the mutex intact and held. */
    nm_assert_rc(netmutex_unlock(&m), 0);

    /* Held by another thread of this process counts too. */
    h = nm_holder_start(&m);
    nm_assert_rc(netmutex_destroy(&m), EBUSY);
    nm_assert_rc(nm_holder_release(h), 0);

    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

/* Every call on M returns EINVAL (M was never initialized, or destroyed). */
static void expect_all_einval(netmutex_t *m)
{
    struct timespec ts;

    nm_deadline(&ts, CLOCK_REALTIME, 1000);
    nm_assert_rc(netmutex_lock(m), EINVAL);
    nm_assert_rc(netmutex_trylock(m), EINVAL);
    nm_assert_rc(netmutex_timedlock(m, &ts), EINVAL);
    nm_assert_rc(netmutex_clocklock(m, CLOCK_REALTIME, &ts), EINVAL);
    nm_assert_rc(netmutex_unlock(m), EINVAL);
    nm_assert_rc(netmutex_destroy(m), EINVAL);
}

static void test_destroyed_mutex(void)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);

    nm_assert_rc(netmutex_destroy(&m), 0);
    expect_all_einval(&m);
    g_free(name);
}

static void test_zeroed_mutex(void)
{
    netmutex_t m;

    memset(&m, 0, sizeof m);
    expect_all_einval(&m);
}

static void test_null_mutex(void)
{
    expect_all_einval(NULL);
    nm_assert_rc(netmutex_init(NULL, "x", NULL), EINVAL);
}

/* ---- init: names and attributes --------------------------------------- */

static void test_init_bad_names(void)
{
    netmutex_t m;
    char *huge = g_malloc(1024 * 1024 + 1);
    char *over = g_malloc(NETMUTEX_NAME_MAX + 2);

    memset(huge, 'n', 1024 * 1024);
    huge[1024 * 1024] = '\0';
    memset(over, 'n', NETMUTEX_NAME_MAX + 1);
    over[NETMUTEX_NAME_MAX + 1] = '\0';

    nm_assert_rc(netmutex_init(&m, NULL, NULL), EINVAL);
    nm_assert_rc(netmutex_init(&m, "", NULL), EINVAL);
    nm_assert_rc(netmutex_init(&m, over, NULL), EINVAL);
    nm_assert_rc(netmutex_init(&m, huge, NULL), EINVAL);
    g_free(over);
    g_free(huge);
}

/* A name of exactly NETMUTEX_NAME_MAX bytes is accepted and usable. */
static void test_init_max_name(void)
{
    char *name = g_malloc(NETMUTEX_NAME_MAX + 1);
    char *token;
    netmutex_t m;

    memset(name, 'x', NETMUTEX_NAME_MAX);
    name[NETMUTEX_NAME_MAX] = '\0';
    /* Unique per run of this test, still exactly the maximum length. */
    memcpy(name, "max-name:", 9);
    nm_assert_rc(netmutex_init(&m, name, NULL), 0);
    nm_assert_rc(netmutex_lock(&m), 0);
    token = nm_token_of(redis, name);
    g_assert_true(nm_is_token(token));
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(token);
    g_free(name);
}

static void test_init_bad_attr(void)
{
    netmutex_attr_t attr;
    netmutex_t m;
    char *name = nm_test_name("m");

    memset(&attr, 0, sizeof attr);
    nm_assert_rc(netmutex_init(&m, name, &attr), EINVAL);

    nm_assert_rc(netmutex_attr_init(&attr), 0);
    nm_assert_rc(netmutex_attr_destroy(&attr), 0);
    nm_assert_rc(netmutex_init(&m, name, &attr), EINVAL);
    g_free(name);
}

/* The name is copied: the caller's buffer may change after init. */
static void test_init_copies_name(void)
{
    char *name = nm_test_name("m");
    char *scratch = g_strdup(name);
    netmutex_t m;
    char *token;

    nm_assert_rc(netmutex_init(&m, scratch, NULL), 0);
    memset(scratch, 'Z', strlen(scratch));
    nm_assert_rc(netmutex_lock(&m), 0);
    token = nm_token_of(redis, name);
    g_assert_true(nm_is_token(token));
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(token);
    g_free(scratch);
    g_free(name);
}

/* ---- static initializer ------------------------------------------------ */

static netmutex_t static_plain = NETMUTEX_INITIALIZER("test_api/static/plain");
static netmutex_t static_recursive =
    NETMUTEX_INITIALIZER_TYPE("test_api/static/recursive", NETMUTEX_RECURSIVE);
static netmutex_t static_empty = NETMUTEX_INITIALIZER("");
static netmutex_t static_null = NETMUTEX_INITIALIZER(NULL);
static netmutex_t static_bad_type = NETMUTEX_INITIALIZER_TYPE("test_api/static/bad-type", 7);

static void test_static_initializer(void)
{
    char *token;

    nm_assert_rc(netmutex_lock(&static_plain), 0);
    token = nm_token_of(redis, "test_api/static/plain");
    g_assert_true(nm_is_token(token));
    nm_assert_rc(nm_call_run(nm_call_trylock_unlock, &static_plain, PROMPT_MS), EBUSY);
    nm_assert_rc(netmutex_lock(&static_plain), EDEADLK);
    nm_assert_rc(netmutex_unlock(&static_plain), 0);
    nm_assert_rc(netmutex_destroy(&static_plain), 0);
    g_free(token);
}

static void test_static_initializer_type(void)
{
    nm_assert_rc(netmutex_lock(&static_recursive), 0);
    nm_assert_rc(netmutex_lock(&static_recursive), 0);
    nm_assert_rc(netmutex_unlock(&static_recursive), 0);
    nm_assert_rc(nm_call_run(nm_call_trylock_unlock, &static_recursive, PROMPT_MS), EBUSY);
    nm_assert_rc(netmutex_unlock(&static_recursive), 0);
    nm_assert_rc(netmutex_unlock(&static_recursive), EPERM);
    nm_assert_rc(netmutex_destroy(&static_recursive), 0);
}

static void test_static_initializer_bad_name(void)
{
    nm_assert_rc(netmutex_lock(&static_empty), EINVAL);
    nm_assert_rc(netmutex_trylock(&static_null), EINVAL);
}

/* The type travels in the lifecycle marker: a value that is no type must
 * not pass for one. */
static void test_static_initializer_bad_type(void)
{
    nm_assert_rc(netmutex_lock(&static_bad_type), EINVAL);
    nm_assert_rc(netmutex_trylock(&static_bad_type), EINVAL);
    nm_assert_rc(netmutex_unlock(&static_bad_type), EINVAL);
    nm_assert_rc(netmutex_destroy(&static_bad_type), EINVAL);
}

/* The opaque types' sizes are part of the ABI: they never change within
 * a major version (the abidiff baseline checks the rest). */
static void test_abi_sizes(void)
{
    if (sizeof(void *) != 8) {
        g_test_skip("the sizes are pinned for LP64 only");
        return;
    }
    g_assert_cmpuint(sizeof(netmutex_t), ==, 96);
    g_assert_cmpuint(sizeof(netmutex_attr_t), ==, 64);
    g_assert_cmpuint(sizeof(netmutex_cond_t), ==, 96);
    g_assert_cmpuint(sizeof(netmutex_condattr_t), ==, 64);
    g_assert_cmpuint(sizeof(netmutex_rwlock_t), ==, 96);
    g_assert_cmpuint(sizeof(netmutex_rwlockattr_t), ==, 64);
    /* A static initializer sets the two public members and nothing else. */
    static netmutex_t m = NETMUTEX_INITIALIZER("x");
    netmutex_t zero;
    memset(&zero, 0, sizeof zero);
    g_assert_cmpint(memcmp((char *)&m + offsetof(netmutex_t, nm_opaque_u),
                           (char *)&zero + offsetof(netmutex_t, nm_opaque_u),
                           sizeof m - offsetof(netmutex_t, nm_opaque_u)), ==, 0);
}

/* ---- two objects, one name ---------------------------------------------- */

static void test_same_name_objects_exclude(void)
{
    char *name = nm_test_name("shared");
    netmutex_t a, b;
    NmHolder *h;
    NmCall *waiter;

    nm_assert_rc(netmutex_init(&a, name, NULL), 0);
    nm_assert_rc(netmutex_init(&b, name, NULL), 0);

    h = nm_holder_start(&a);
    nm_assert_rc(netmutex_trylock(&b), EBUSY);
    waiter = nm_call_start(nm_call_lock_unlock, &b);
    nmt_sleep_ms(300);
    g_assert_false(nm_call_done(waiter));
    nm_assert_rc(nm_holder_release(h), 0);
    nm_assert_rc(nm_call_wait(waiter, PROMPT_MS), 0);
    nm_assert_rc(netmutex_destroy(&a), 0);
    nm_assert_rc(netmutex_destroy(&b), 0);
    g_free(name);
}

int main(int argc, char **argv)
{
    int rc;

    nm_test_init(&argc, &argv);
    redis = nm_redis_start(NULL);
    nm_configure(redis);

    nm_test_add_for_types("/mutex/lock/free", test_lock_free);
    nm_test_add_for_types("/mutex/trylock/free", test_trylock_free);
    nm_test_add_for_types("/mutex/trylock/busy-other-thread", test_trylock_busy_other_thread);
    nm_test_add_for_types("/mutex/lock/waits-for-other-thread", test_lock_waits_for_other_thread);
    nm_test_add_for_types("/mutex/lock/relock-by-owner", test_lock_relock_by_owner);
    nm_test_add_for_types("/mutex/trylock/relock-by-owner", test_trylock_relock_by_owner);
    nm_test_add_for_types("/mutex/timedlock/relock-by-owner", test_timedlock_relock_by_owner);
    nm_test_add_for_types("/mutex/unlock/eperm-not-owner-thread", test_unlock_not_owner_thread);
    nm_test_add_for_types("/mutex/unlock/eperm-unlocked", test_unlock_unlocked);
    g_test_add_func("/mutex/recursive/depth-count", test_recursive_depth);
    g_test_add_func("/mutex/timedlock/deadline-passes-etimedout", test_timedlock_times_out);
    g_test_add_func("/mutex/clocklock/monotonic-deadline-passes-etimedout",
                    test_clocklock_monotonic_times_out);
    g_test_add_func("/mutex/clocklock/realtime-deadline-passes-etimedout",
                    test_clocklock_realtime_times_out);
    g_test_add_func("/mutex/timedlock/freed-before-deadline", test_timedlock_freed_before_deadline);
    g_test_add_func("/mutex/clocklock/monotonic-freed-before-deadline",
                    test_clocklock_monotonic_freed_before_deadline);
    g_test_add_func("/mutex/timedlock/past-deadline-free-mutex-acquired",
                    test_timedlock_past_deadline_free);
    g_test_add_func("/mutex/timedlock/bad-abstime-einval", test_timedlock_bad_nsec);
    g_test_add_func("/mutex/clocklock/bad-clockid-einval", test_clocklock_bad_clock);
    g_test_add_func("/mutex/destroy/while-locked-ebusy", test_destroy_while_locked);
    g_test_add_func("/mutex/destroy/destroyed-mutex-einval", test_destroyed_mutex);
    g_test_add_func("/mutex/args/zeroed-mutex-einval", test_zeroed_mutex);
    g_test_add_func("/mutex/args/null-mutex-einval", test_null_mutex);
    g_test_add_func("/mutex/init/bad-names-einval", test_init_bad_names);
    g_test_add_func("/mutex/init/name-of-max-length", test_init_max_name);
    g_test_add_func("/mutex/init/bad-attr-einval", test_init_bad_attr);
    g_test_add_func("/mutex/init/name-is-copied", test_init_copies_name);
    g_test_add_func("/mutex/static-initializer/lock-unlock", test_static_initializer);
    g_test_add_func("/mutex/static-initializer/recursive-type", test_static_initializer_type);
    g_test_add_func("/mutex/static-initializer/bad-name-einval", test_static_initializer_bad_name);
    g_test_add_func("/mutex/static-initializer/bad-type-einval", test_static_initializer_bad_type);
    g_test_add_func("/abi/sizes", test_abi_sizes);
    g_test_add_func("/mutex/same-name/two-objects-exclude", test_same_name_objects_exclude);

    rc = nm_test_finish(g_test_run());
    nm_redis_free(redis);
    return rc;
}
