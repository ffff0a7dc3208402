/*
 * test_faults.c -- the server misbehaving: stopped (trylock EAGAIN,
 * timedlock ETIMEDOUT after its deadline, lock waiting until it is back,
 * unlock EIO), restarted without our key (ENOLCK), paused with SIGSTOP,
 * connections killed with CLIENT KILL, commands held back by CLIENT PAUSE
 * for longer than the I/O timeout, and a reply lost after the request was
 * applied (the retry must be recognized as ours).
 *
 * Server restarts happen on the main thread (see nm_redis_restart); calls
 * that block while the server is down run in helper threads.
 */
#include "ac_config.h"

#include "fixture.h"
#include "proxy.h"

#include <string.h>

static NmRedis *redis;

/* The library's timeouts here are short so that the tests are too. */
#define CONNECT_MS nm_ms(500)
#define IO_MS nm_ms(500)
/* Bound for a call that gives up on an unreachable server: a handful of
 * redials, each bounded by the timeouts above. */
#define GIVE_UP_MS nm_ms(20000)

static void configure_short_timeouts(void)
{
    nm_configure_timeouts(redis, CONNECT_MS, IO_MS);
}

/* Every test leaves a running, empty-enough server behind. */
static void ensure_running(void)
{
    nm_redis_stop(redis);
    nm_redis_restart(redis);
}

/* ---- server stopped -------------------------------------------------------- */

static void test_down_trylock_eagain(void)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);

    configure_short_timeouts();
    /* A live connection first: the library must notice it died. */
    nm_assert_rc(nm_call_lock_unlock(&m), 0);
    nm_redis_stop(redis);
    nm_assert_rc(nm_call_run(nm_call_trylock_unlock, &m, GIVE_UP_MS), EAGAIN);
    /* A thread that never had a connection gets the same. */
    nm_assert_rc(nm_call_run(nm_call_trylock_unlock, &m, GIVE_UP_MS), EAGAIN);
    ensure_running();
    nm_assert_rc(nm_call_lock_unlock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

static void test_down_trylock_eagain_tcp(void)
{
    char *url = nm_redis_tcp_url(redis, -1);
    netmutex_config_t cfg = { .url = url, .connect_timeout_ms = CONNECT_MS,
                              .io_timeout_ms = IO_MS };
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);

    nm_assert_rc(netmutex_configure(&cfg), 0);
    nm_assert_rc(nm_call_lock_unlock(&m), 0);
    nm_redis_stop(redis);
    nm_assert_rc(nm_call_run(nm_call_trylock_unlock, &m, GIVE_UP_MS), EAGAIN);
    ensure_running();
    nm_assert_rc(nm_call_lock_unlock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    configure_short_timeouts();
    g_free(name);
    g_free(url);
}

typedef struct Timed {
    netmutex_t *m;
    clockid_t clock;
    unsigned int ms;
    struct timespec deadline, returned;
} Timed;

static int call_timed(void *p)
{
    Timed *t = p;
    int rc;

    nm_deadline(&t->deadline, t->clock, t->ms);
    rc = t->clock == CLOCK_REALTIME ? netmutex_timedlock(t->m, &t->deadline)
                                    : netmutex_clocklock(t->m, t->clock, &t->deadline);
    clock_gettime(t->clock, &t->returned);
    if (rc == 0)
        rc = netmutex_unlock(t->m);
    return rc;
}

/* timedlock on a stopped server: ETIMEDOUT, not before the deadline. */
static void run_down_timedlock(clockid_t clock)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);
    Timed t = { .m = &m, .clock = clock, .ms = 1000 };

    configure_short_timeouts();
    nm_redis_stop(redis);
    nm_assert_rc(nm_call_run(call_timed, &t, t.ms + GIVE_UP_MS), ETIMEDOUT);
    nm_assert_timed_out_at(&t.returned, &t.deadline, GIVE_UP_MS);
    ensure_running();
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

static void test_down_timedlock_etimedout(void)
{
    run_down_timedlock(CLOCK_REALTIME);
}

static void test_down_clocklock_etimedout(void)
{
    run_down_timedlock(CLOCK_MONOTONIC);
}

static void test_down_lock_waits_for_restart(void)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);
    NmCall *locker;
    char *token;

    configure_short_timeouts();
    nm_redis_stop(redis);
    locker = nm_call_start(nm_call_lock_unlock, &m);
    /* Several connect timeouts long: it is still waiting, not failing. */
    nmt_sleep_ms(2 * CONNECT_MS + 500);
    g_assert_false(nm_call_done(locker));
    nm_redis_restart(redis);
    nm_assert_rc(nm_call_wait(locker, nm_ms(30000)), 0);
    token = nm_token_of(redis, name);
    g_assert_null(token); /* and it unlocked again */
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

static void test_down_unlock_eio(void)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);
    NmHolder *h;

    configure_short_timeouts();
    h = nm_holder_start(&m); /* a thread of its own: the unlock is bounded */
    nm_redis_stop(redis);
    nm_assert_rc(nm_holder_release(h), EIO);
    ensure_running();
    /* Released in this process: a new lock is not a relock (EDEADLK). */
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

/* ---- server restarted: our key is gone --------------------------------- */

static void test_restart_while_held_enolck(void)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);
    char *token;

    configure_short_timeouts();
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_redis_stop(redis);
    nm_redis_restart(redis);
    nm_assert_rc(netmutex_unlock(&m), ENOLCK);
    token = nm_token_of(redis, name);
    g_assert_null(token); /* nothing re-created */
    nm_assert_rc(netmutex_trylock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

/* ---- server paused (SIGSTOP) ------------------------------------------------- */

static void test_paused_trylock_eagain(void)
{
    netmutex_t m;
    /* The shortest lease: the request may still be executed once the
     * server continues, and must not linger. */
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, NETMUTEX_LEASE_MIN_MS);
    /* The warm-up (configuration, scripts loaded) on a mutex of its own
     * with the default lease: a 10 ms lease may run out between a slowed
     * thread's lock and unlock (valgrind), which is not what is tested. */
    netmutex_t warm;
    char *warm_name = nm_mutex_init(&warm, "warm", NETMUTEX_NORMAL, 0);

    configure_short_timeouts();
    nm_assert_rc(nm_call_lock_unlock(&warm), 0);
    nm_assert_rc(netmutex_destroy(&warm), 0);
    g_free(warm_name);
    nm_redis_pause(redis);
    nm_assert_rc(nm_call_run(nm_call_trylock_unlock, &m, GIVE_UP_MS), EAGAIN);
    nm_redis_resume(redis);
    nm_assert_rc(netmutex_destroy(&m), 0);
    ensure_running();
    g_free(name);
}

/* ---- connections killed ------------------------------------------------------- */

static void kill_all_clients(void)
{
    nm_redis_ok(redis, "CLIENT KILL TYPE normal SKIPME yes");
    nm_redis_ok(redis, "CLIENT KILL TYPE pubsub");
}

static void test_client_kill_between_lock_and_unlock(void)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);
    char *token;

    configure_short_timeouts();
    nm_assert_rc(netmutex_lock(&m), 0);
    kill_all_clients();
    nm_assert_rc(netmutex_unlock(&m), 0);
    token = nm_token_of(redis, name);
    g_assert_null(token);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

static void test_client_kill_before_lock(void)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);

    configure_short_timeouts();
    nm_assert_rc(nm_call_lock_unlock(&m), 0);
    kill_all_clients();
    nm_assert_rc(netmutex_lock(&m), 0);
    kill_all_clients();
    nm_assert_rc(netmutex_unlock(&m), 0);
    kill_all_clients();
    nm_assert_rc(netmutex_trylock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

/* ---- replies late or lost ---------------------------------------------------- */

/* Lock with a deadline of several I/O timeouts and a long lease. */
static void timedlock_long_lease(netmutex_t *m, unsigned int deadline_ms)
{
    struct timespec deadline;

    nm_deadline(&deadline, CLOCK_REALTIME, deadline_ms);
    nm_assert_rc(netmutex_timedlock(m, &deadline), 0);
}

/* CLIENT PAUSE WRITE holds the acquire script back for longer than the
 * I/O timeout: the library times out, retries, and still gets the lock. */
static void test_paused_longer_than_io_timeout(void)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 60000);
    char *token;

    nm_configure_timeouts(redis, 0, nm_ms(200));
    nm_assert_rc(nm_call_lock_unlock(&m), 0); /* connected, scripts loaded */
    nm_redis_ok(redis, "CLIENT PAUSE %u WRITE", nm_ms(1500));
    timedlock_long_lease(&m, nm_ms(10000));
    token = nm_token_of(redis, name);
    g_assert_true(nm_is_token(token));
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    configure_short_timeouts();
    g_free(token);
    g_free(name);
}

/* The acquire is applied but its reply never arrives.  The key now holds
 * our token for 60 s; only a retry recognized as ours (same token) can
 * succeed before the deadline. */
static void test_lost_reply_retry_is_ours(void)
{
    NmProxy *proxy = nm_proxy_start(redis);
    char *url = nm_proxy_url(proxy);
    netmutex_config_t cfg = { .url = url, .io_timeout_ms = nm_ms(300) };
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 60000);
    char *token;

    nm_assert_rc(netmutex_configure(&cfg), 0);
    nm_assert_rc(netmutex_lock(&m), 0); /* connected, scripts loaded */
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_proxy_mute_next_reply(proxy);
    timedlock_long_lease(&m, nm_ms(8000));
    g_assert_cmpuint(nm_proxy_muted(proxy), ==, 1); /* a reply was lost */
    token = nm_token_of(redis, name);
    g_assert_true(nm_is_token(token));
    nm_assert_rc(netmutex_unlock(&m), 0);
    g_free(token);
    token = nm_token_of(redis, name);
    g_assert_null(token);
    nm_assert_rc(netmutex_destroy(&m), 0);
    configure_short_timeouts();
    nm_proxy_free(proxy);
    g_free(name);
    g_free(url);
}

int main(int argc, char **argv)
{
    const NmRedisOpts opts = { .tcp = true };
    int rc;

    nm_test_init(&argc, &argv);
    nm_test_cache_off();
    redis = nm_redis_start(&opts);
    configure_short_timeouts();

    g_test_add_func("/faults/down/trylock-eagain", test_down_trylock_eagain);
    g_test_add_func("/faults/down/trylock-eagain-tcp", test_down_trylock_eagain_tcp);
    g_test_add_func("/faults/down/timedlock-etimedout-after-deadline", test_down_timedlock_etimedout);
    g_test_add_func("/faults/down/clocklock-monotonic-etimedout-after-deadline",
                    test_down_clocklock_etimedout);
    g_test_add_func("/faults/down/lock-waits-until-restart", test_down_lock_waits_for_restart);
    g_test_add_func("/faults/down/unlock-eio-and-released", test_down_unlock_eio);
    g_test_add_func("/faults/restart/unlock-after-data-loss-enolck", test_restart_while_held_enolck);
    g_test_add_func("/faults/paused/trylock-eagain", test_paused_trylock_eagain);
    g_test_add_func("/faults/client-kill/between-lock-and-unlock",
                    test_client_kill_between_lock_and_unlock);
    g_test_add_func("/faults/client-kill/between-calls", test_client_kill_before_lock);
    g_test_add_func("/faults/client-pause/longer-than-io-timeout", test_paused_longer_than_io_timeout);
    g_test_add_func("/faults/lost-reply/retry-recognized-as-ours", test_lost_reply_retry_is_ours);

    rc = nm_test_finish(g_test_run());
    nm_redis_free(redis);
    return rc;
}
