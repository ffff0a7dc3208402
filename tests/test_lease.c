/*
 * test_lease.c -- what comes with holding a lock by lease: automatic
 * renewal (and its absence), losing the lease (validity turns ENOLCK, the
 * lost-lease callback fires, unlock reports ENOLCK and deletes nothing),
 * extending it, fencing tokens, robust mutexes after a holder died
 * (EOWNERDEAD, netmutex_consistent, ENOTRECOVERABLE) and netmutex_break.
 *
 * A "dead holder" is a separate process (nm_remote) killed with SIGKILL
 * while it holds the lock with a short lease.
 */
#include "ac_config.h"

#include "fixture.h"

#include <pthread.h>
#include <string.h>

static NmRedis *redis;

#define PROMPT_MS nm_ms(20000)
#define FOREIGN_TOKEN "0123456789abcdef0123456789abcdef"

/* A mutex named after the test with every attribute a test here needs. */
static char *init_mutex(netmutex_t *m, const char *suffix, int robust,
                        int autorenew, unsigned int lease_ms)
{
    char *name = nm_test_name(suffix);
    netmutex_attr_t attr;

    nm_assert_rc(netmutex_attr_init(&attr), 0);
    nm_assert_rc(netmutex_attr_setrobust(&attr, robust), 0);
    nm_assert_rc(netmutex_attr_setautorenew(&attr, autorenew), 0);
    nm_assert_rc(netmutex_attr_setlease(&attr, lease_ms), 0);
    nm_assert_rc(netmutex_init(m, name, &attr), 0);
    nm_assert_rc(netmutex_attr_destroy(&attr), 0);
    return name;
}

/* Replaces our token in Redis with someone else's: our lease is lost. */
static void steal(const char *name)
{
    char *key = nm_lock_key(name);

    nm_redis_ok(redis, "SET %s %s PX 3600000", key, FOREIGN_TOKEN);
    g_free(key);
}

/* Polls netmutex_validity until it reports ENOLCK (bounded). */
static void wait_validity_lost(netmutex_t *m)
{
    gint64 deadline = nmt_now_ms() + nm_ms(10000);
    uint64_t left;
    int rc;

    while ((rc = netmutex_validity(m, &left)) == 0 && nmt_now_ms() < deadline)
        nmt_sleep_ms(10);
    nm_assert_rc(rc, ENOLCK);
}

/* ---- attributes ------------------------------------------------------- */

static void test_attr_robust_autorenew(void)
{
    netmutex_attr_t attr;
    int v = -1;

    nm_assert_rc(netmutex_attr_init(&attr), 0);
    nm_assert_rc(netmutex_attr_getrobust(&attr, &v), 0);
    g_assert_cmpint(v, ==, NETMUTEX_STALLED);
    nm_assert_rc(netmutex_attr_getautorenew(&attr, &v), 0);
    g_assert_cmpint(v, ==, 1);
    nm_assert_rc(netmutex_attr_setrobust(&attr, NETMUTEX_ROBUST), 0);
    nm_assert_rc(netmutex_attr_getrobust(&attr, &v), 0);
    g_assert_cmpint(v, ==, NETMUTEX_ROBUST);
    nm_assert_rc(netmutex_attr_setrobust(&attr, 2), EINVAL);
    nm_assert_rc(netmutex_attr_setrobust(&attr, -1), EINVAL);
    nm_assert_rc(netmutex_attr_getrobust(&attr, &v), 0);
    g_assert_cmpint(v, ==, NETMUTEX_ROBUST);
    nm_assert_rc(netmutex_attr_setautorenew(&attr, 0), 0);
    nm_assert_rc(netmutex_attr_getautorenew(&attr, &v), 0);
    g_assert_cmpint(v, ==, 0);
    nm_assert_rc(netmutex_attr_setrobust(NULL, NETMUTEX_ROBUST), EINVAL);
    nm_assert_rc(netmutex_attr_getrobust(&attr, NULL), EINVAL);
    nm_assert_rc(netmutex_attr_setautorenew(NULL, 1), EINVAL);
    nm_assert_rc(netmutex_attr_getautorenew(&attr, NULL), EINVAL);
    nm_assert_rc(netmutex_attr_setlostfn(NULL, NULL, NULL), EINVAL);
    nm_assert_rc(netmutex_attr_destroy(&attr), 0);
}

/* ---- renewal ------------------------------------------------------------ */

/* Locks M (lease LEASE), holds it for several leases and checks that it is
 * still ours at the server and by netmutex_validity, then unlocks. */
static void hold_for_several_leases(netmutex_t *m, const char *name, unsigned int lease)
{
    char *token, *later;
    uint64_t left = 0;

    nm_assert_rc(netmutex_lock(m), 0);
    token = nm_token_of(redis, name);
    nmt_sleep_ms(3 * lease + lease / 2);
    later = nm_token_of(redis, name);
    g_assert_cmpstr(later, ==, token);
    nm_assert_rc(netmutex_validity(m, &left), 0);
    g_assert_cmpuint(left, >, 0);
    g_assert_cmpuint(left, <=, lease);
    nm_assert_rc(netmutex_unlock(m), 0);
    g_free(later);
    g_free(token);
}

/* Held for several leases: still ours, thanks to the watchdog.  The lease
 * is long enough that a busy machine does not delay a renewal past it. */
static void test_autorenew_keeps_lease(void)
{
    unsigned int lease = nm_ms(1000);
    netmutex_t m;
    char *name = init_mutex(&m, "m", NETMUTEX_STALLED, 1, lease);

    hold_for_several_leases(&m, name, lease);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

/* The same after the process held nothing for a few seconds: whatever the
 * watchdog does while idle, a new lease must be renewed again. */
static void test_autorenew_after_idle(void)
{
    unsigned int lease = nm_ms(1000);
    netmutex_t m;
    char *name = init_mutex(&m, "m", NETMUTEX_STALLED, 1, lease);

    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nmt_sleep_ms(3000);
    hold_for_several_leases(&m, name, lease);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

/* Without renewal the key simply runs out, and the holder learns it. */
static void test_no_autorenew_expires(void)
{
    unsigned int lease = nm_ms(300);
    netmutex_t m;
    char *name = init_mutex(&m, "m", NETMUTEX_STALLED, 0, lease);
    char *token;

    nm_assert_rc(netmutex_lock(&m), 0);
    /* Gone after one lease: polled for, up to three. */
    for (gint64 end = nmt_now_ms() + 3 * (gint64)lease;
         (token = nm_token_of(redis, name)) != NULL && nmt_now_ms() < end;
         nmt_sleep_ms(10))
        g_free(token);
    g_assert_null(token);
    g_free(token);
    wait_validity_lost(&m);
    nm_assert_rc(netmutex_unlock(&m), ENOLCK);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

static int call_extend(void *m)
{
    return netmutex_extend(m, 60000);
}

static void test_extend(void)
{
    netmutex_t m;
    char *name = init_mutex(&m, "m", NETMUTEX_STALLED, 0, 5000);
    char *key = nm_lock_key(name);
    char *after;
    long long pttl;

    nm_assert_rc(netmutex_extend(&m, 60000), EPERM); /* not held */
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(nm_call_run(call_extend, &m, PROMPT_MS), EPERM); /* not the owner */
    nm_assert_rc(netmutex_extend(&m, 60000), 0);
    pttl = nm_redis_pttl(redis, key);
    g_assert_cmpint(pttl, >, 5000);
    g_assert_cmpint(pttl, <=, 60000);
    nm_assert_rc(netmutex_extend(&m, NETMUTEX_LEASE_MIN_MS - 1), EINVAL);
    nm_assert_rc(netmutex_extend(&m, NETMUTEX_LEASE_MAX_MS + 1), EINVAL);
    steal(name);
    nm_assert_rc(netmutex_extend(&m, 60000), ENOLCK);
    nm_assert_rc(netmutex_unlock(&m), ENOLCK);
    /* The thief's key is untouched. */
    after = nm_token_of(redis, name);
    g_assert_cmpstr(after, ==, FOREIGN_TOKEN);
    nm_redis_ok(redis, "DEL %s", key);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(after);
    g_free(key);
    g_free(name);
}

/* ---- losing the lease ---------------------------------------------------- */

/* What the lost-lease callback saw.  pthread, not GMutex: GLib's futex
 * based mutex is invisible to ThreadSanitizer. */
typedef struct Lost {
    pthread_mutex_t lock;
    int calls;
    char *name;
} Lost;

static void on_lost(const char *name, void *arg)
{
    Lost *l = arg;

    pthread_mutex_lock(&l->lock);
    l->calls++;
    g_free(l->name);
    l->name = g_strdup(name);
    pthread_mutex_unlock(&l->lock);
}

static int lost_calls(Lost *l)
{
    int calls;

    pthread_mutex_lock(&l->lock);
    calls = l->calls;
    pthread_mutex_unlock(&l->lock);
    return calls;
}

/* Waits (bounded) for the first call; returns the number of calls. */
static int wait_lost(Lost *l)
{
    gint64 deadline = nmt_now_ms() + nm_ms(10000);

    while (lost_calls(l) == 0 && nmt_now_ms() < deadline)
        nmt_sleep_ms(5);
    return lost_calls(l);
}

/* Our key is replaced while we hold it: validity turns ENOLCK, the
 * callback fires once with the name, unlock says ENOLCK and leaves the
 * other owner's key alone. */
static void run_lost_lease(bool callback_in_attr)
{
    unsigned int lease = nm_ms(1000);
    Lost lost = { PTHREAD_MUTEX_INITIALIZER, 0, NULL };
    netmutex_attr_t attr;
    netmutex_t m;
    char *name = nm_test_name("m");
    char *url = nm_redis_url(redis);
    netmutex_config_t cfg = { .url = url };
    char *after;

    if (!callback_in_attr) {
        cfg.on_lost = on_lost;
        cfg.on_lost_arg = &lost;
    }
    nm_assert_rc(netmutex_configure(&cfg), 0);
    nm_assert_rc(netmutex_attr_init(&attr), 0);
    nm_assert_rc(netmutex_attr_setlease(&attr, lease), 0);
    if (callback_in_attr)
        nm_assert_rc(netmutex_attr_setlostfn(&attr, on_lost, &lost), 0);
    nm_assert_rc(netmutex_init(&m, name, &attr), 0);
    nm_assert_rc(netmutex_attr_destroy(&attr), 0);

    nm_assert_rc(netmutex_lock(&m), 0);
    steal(name);
    g_assert_cmpint(wait_lost(&lost), ==, 1);
    pthread_mutex_lock(&lost.lock);
    g_assert_cmpstr(lost.name, ==, name);
    pthread_mutex_unlock(&lost.lock);
    wait_validity_lost(&m);
    nm_assert_rc(netmutex_unlock(&m), ENOLCK);
    after = nm_token_of(redis, name);
    g_assert_cmpstr(after, ==, FOREIGN_TOKEN);
    /* Not called again for the same loss. */
    nmt_sleep_ms(2 * lease);
    g_assert_cmpint(lost_calls(&lost), ==, 1);

    char *key = nm_lock_key(name);
    nm_redis_ok(redis, "DEL %s", key);
    g_free(key);
    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_configure(redis);
    pthread_mutex_destroy(&lost.lock);
    g_free(lost.name);
    g_free(after);
    g_free(url);
    g_free(name);
}

static void test_lost_callback_attr(void)
{
    run_lost_lease(true);
}

static void test_lost_callback_config(void)
{
    run_lost_lease(false);
}

/* ---- fences ----------------------------------------------------------------- */

static void test_fence(void)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);
    char *key = nm_lock_key(name);
    uint64_t f1 = 0, f2 = 0;

    nm_assert_rc(netmutex_fence(&m, &f1), EPERM);
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_fence(&m, NULL), EINVAL);
    nm_assert_rc(netmutex_fence(&m, &f1), 0);
    g_assert_cmpint((long long)f1, ==, nm_redis_fence(redis, key));
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_trylock(&m), 0);
    nm_assert_rc(netmutex_fence(&m, &f2), 0);
    g_assert_cmpuint(f2, >, f1);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(key);
    g_free(name);
}

static void test_validity(void)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 5000);
    uint64_t left = 0;

    nm_assert_rc(netmutex_validity(&m, &left), EPERM);
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_validity(&m, NULL), EINVAL);
    nm_assert_rc(netmutex_validity(&m, &left), 0);
    g_assert_cmpuint(left, >, 0);
    g_assert_cmpuint(left, <=, 5000);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

/* The latest request sets the lease, also when it shortens it: validity
 * follows an extension down as well as up, never past the server's expiry. */
static void test_validity_follows_shorter_extend(void)
{
    netmutex_t m;
    char *name = init_mutex(&m, "m", NETMUTEX_STALLED, 0, 60000);
    char *key = nm_lock_key(name);
    uint64_t left = 0;

    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_validity(&m, &left), 0);
    g_assert_cmpuint(left, >, 30000);
    nm_assert_rc(netmutex_extend(&m, 2000), 0);
    g_assert_cmpint(nm_redis_pttl(redis, key), <=, 2000);
    nm_assert_rc(netmutex_validity(&m, &left), 0);
    g_assert_cmpuint(left, <=, 2000);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(key);
    g_free(name);
}

/* ---- a holder that died ----------------------------------------------------- */

/* Another process takes NAME with a short lease and is killed holding it. */
static void holder_dies(const char *name)
{
    NmRemote *doomed = nm_remote_start(redis, name, NETMUTEX_NORMAL | NM_REMOTE_ROBUST, nm_ms(300));

    nm_assert_rc(nm_remote(doomed, 'l'), 0);
    nm_remote_kill(doomed);
}

static void test_stalled_dead_holder(void)
{
    netmutex_t m;
    char *name = init_mutex(&m, "m", NETMUTEX_STALLED, 1, 0);

    holder_dies(name);
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_consistent(&m), EINVAL); /* nothing to repair */
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

static void test_robust_ownerdead_consistent(void)
{
    netmutex_t m;
    char *name = init_mutex(&m, "m", NETMUTEX_ROBUST, 1, 0);

    nm_assert_rc(netmutex_consistent(&m), EPERM); /* not held */
    holder_dies(name);
    nm_assert_rc(netmutex_lock(&m), EOWNERDEAD);
    /* EOWNERDEAD means we own it now. */
    nm_assert_rc(nm_call_run(nm_call_trylock_unlock, &m, PROMPT_MS), EBUSY);
    nm_assert_rc(nm_probe_trylock(redis, name, NETMUTEX_NORMAL), EBUSY);
    nm_assert_rc(netmutex_consistent(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    /* Repaired: the next owner hears nothing of it. */
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

static void test_robust_not_recoverable_then_break(void)
{
    netmutex_t m;
    char *name = init_mutex(&m, "m", NETMUTEX_ROBUST, 1, 0);

    holder_dies(name);
    nm_assert_rc(netmutex_lock(&m), EOWNERDEAD);
    /* Unlocked without netmutex_consistent(): unusable for everyone. */
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_lock(&m), ENOTRECOVERABLE);
    nm_assert_rc(netmutex_trylock(&m), ENOTRECOVERABLE);
    nm_assert_rc(nm_probe_trylock(redis, name, NETMUTEX_NORMAL), ENOTRECOVERABLE);
    /* Only the administrator's break clears it. */
    nm_assert_rc(netmutex_break(name), 0);
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

/* ---- break ------------------------------------------------------------------- */

static void test_break(void)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);
    char *key = nm_lock_key(name);
    NmHolder *h = nm_holder_start(&m);
    long long fence = nm_redis_fence(redis, key);
    char *huge = g_strnfill(NETMUTEX_NAME_MAX + 1, 'b');
    char *token;

    nm_assert_rc(netmutex_break(name), 0);
    token = nm_token_of(redis, name);
    g_assert_null(token);
    g_assert_cmpint(fence, >, 0);
    /* Free for another process at once, with a newer fence... */
    nm_assert_rc(nm_probe_trylock(redis, name, NETMUTEX_NORMAL), 0);
    /* ...and the holder learns it lost the lock. */
    nm_assert_rc(nm_holder_release(h), ENOLCK);
    nm_assert_rc(netmutex_break(name), ENOENT);
    nm_assert_rc(netmutex_break(NULL), EINVAL);
    nm_assert_rc(netmutex_break(""), EINVAL);
    nm_assert_rc(netmutex_break(huge), EINVAL);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(huge);
    g_free(key);
    g_free(name);
}

int main(int argc, char **argv)
{
    int rc;

    nm_test_init(&argc, &argv);
    nm_test_cache_off();
    redis = nm_redis_start(NULL);
    nm_configure(redis);

    g_test_add_func("/lease/attr/robust-and-autorenew", test_attr_robust_autorenew);
    g_test_add_func("/lease/renew/held-for-several-leases", test_autorenew_keeps_lease);
    g_test_add_func("/lease/renew/held-for-several-leases-after-idle", test_autorenew_after_idle);
    g_test_add_func("/lease/renew/off-lease-runs-out-enolck", test_no_autorenew_expires);
    g_test_add_func("/lease/extend/sets-pttl-and-enolck-when-lost", test_extend);
    g_test_add_func("/lease/extend/validity-follows-a-shorter-lease",
                    test_validity_follows_shorter_extend);
    g_test_add_func("/lease/lost/attr-callback-validity-unlock-enolck", test_lost_callback_attr);
    g_test_add_func("/lease/lost/config-callback", test_lost_callback_config);
    g_test_add_func("/lease/fence/matches-redis-and-increases", test_fence);
    g_test_add_func("/lease/validity/within-lease", test_validity);
    g_test_add_func("/robust/stalled/dead-holder-lock-succeeds", test_stalled_dead_holder);
    g_test_add_func("/robust/dead-holder/eownerdead-then-consistent",
                    test_robust_ownerdead_consistent);
    g_test_add_func("/robust/dead-holder/unlock-without-consistent-enotrecoverable",
                    test_robust_not_recoverable_then_break);
    g_test_add_func("/break/frees-held-lock-keeps-fence", test_break);

    rc = nm_test_finish(g_test_run());
    nm_redis_free(redis);
    return rc;
}
