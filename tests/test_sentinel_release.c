/*
 * test_sentinel_release.c -- releases sent in the second of a Sentinel
 * failover when the replica is promoted but the sentinels still name the
 * old master (which still takes writes), against a real master, replica and
 * three sentinels (topo_sentinel.h).
 *
 * Such a release lands on the old master and never reaches the new one,
 * where the key keeps a token its process forgot: before journal.h, the
 * name stayed held until the lease ran out.  Each test has a holder process
 * take its names, starts SENTINEL FAILOVER, and, once the replica says it
 * is a master while the sentinels still name the old one, has the holder's
 * releases sent:
 *  - cached: the holder keeps its leases cached, and this process locks
 *    the names, so the holder gives them back (the release script) -- two
 *    processes locking a name in turn, as in a program with lease caching
 *    on (the default);
 *  - uncached: the holder holds the locks and unlocks them;
 *  - late: uncached, and the window stays open LATE_MS longer after the
 *    releases, as when the sentinels are slow to switch.
 * The promoted replica is paused meanwhile, so that the window stays open
 * however slow the machine.  Then, from the moment every
 * sentinel names the new master, this process must be able to lock every
 * name at the new master within WITHIN_MS (the goal is a second; the bound
 * is generous and scaled).  The lease is long enough that a name
 * left to expire takes far longer.  Each test prints the longest time a
 * name took (the gap), measured before it asserts the bound.
 */
#include "ac_config.h"

#include "topo_sentinel.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define PROMPT_MS nm_ms(30000)
#define CONNECT_MS nm_ms(1000)
#define IO_MS nm_ms(1000)
/* How long the "late" test keeps the window open beyond the releases:
 * more than a few seconds, as on a machine or a sentinel slow to switch.
 * A release is kept to be sent again for as long as its lease could keep
 * the key (journal.h), so even a failover noticed this late frees the
 * name at once.  Not scaled: it is the length of the window under test. */
#define LATE_MS 12000
/* Long next to the bound below, so that a name left to expire fails it,
 * even after the late window: renewed every third of a lease, the key a
 * release missed lives on for two thirds of a lease at least. */
#define LEASE_MS (nm_ms(10000) + 4 * LATE_MS)
/* The goal is a second from the sentinels' switch; this is the bound. */
#define WITHIN_MS (nm_ms(1000) + nm_ms(2000))
#define NAMES_MAX 8

/* What the holder and this process share (MAP_SHARED). */
typedef struct shared {
    int held;     /* holder: its names are locked (or cached) */
    int release;  /* this process: unlock them now (uncached) */
    int released; /* holder: unlocked, with what result */
    int unlock_rc;
    int finish;   /* this process: shut down and exit */
} shared_t;

typedef struct params {
    bool cached;
    int names;
    bool late; /* the window stays open LATE_MS longer */
} params_t;

typedef struct holder {
    shared_t *sh;
    const params_t *p;
    const char *url;
    NmRedis *master;
    char *names[NAMES_MAX];
} holder_t;

static int get(int *v)
{
    return __atomic_load_n(v, __ATOMIC_SEQ_CST);
}

static void set(int *v, int x)
{
    __atomic_store_n(v, x, __ATOMIC_SEQ_CST);
}

/* Waits (bounded) until *V is non-zero; false if it never was. */
static bool wait_set(int *v)
{
    gint64 until = nmt_now_ms() + PROMPT_MS;
    while (!get(v) && nmt_now_ms() < until)
        nmt_sleep_ms(2);
    return get(v) != 0;
}

static void configure(const char *url)
{
    netmutex_config_t cfg = {
        .url = url, .connect_timeout_ms = CONNECT_MS, .io_timeout_ms = IO_MS,
        .lease_ms = LEASE_MS,
        /* A cached lease stays until asked for, never given back idle. */
        .cache_idle_ms = 3600000,
    };
    nm_assert_rc(netmutex_configure(&cfg), 0);
}

/* Unlocks M, locked, until its lease stays cached: a lease is kept only
 * once its process listens for requests (cache.h), which takes a moment
 * after the first acquisition of the name. */
static void keep_cached(holder_t *h, netmutex_t *m, const char *name)
{
    gint64 until = nmt_now_ms() + PROMPT_MS;
    for (;;) {
        nm_assert_rc(netmutex_unlock(m), 0);
        char *token = nm_token_of(h->master, name);
        g_free(token);
        if (token)
            return;
        if (nmt_now_ms() > until)
            g_error("the lease of %s was never kept cached", name);
        nmt_sleep_ms(20);
        nm_assert_rc(netmutex_lock(m), 0);
    }
}

/* The holder: takes the names, then keeps them (cached: unlocked; not:
 * locked) until told, and goes on running (its background thread is the
 * one that sends its releases again) until the test is over. */
static int holder_main(void *arg)
{
    holder_t *h = arg;
    netmutex_t m[NAMES_MAX];
    netmutex_attr_t attr;
    configure(h->url);
    nm_assert_rc(netmutex_attr_init(&attr), 0);
    nm_assert_rc(netmutex_attr_setcache(&attr, h->p->cached), 0);
    for (int i = 0; i < h->p->names; i++) {
        nm_assert_rc(netmutex_init(&m[i], h->names[i], &attr), 0);
        nm_assert_rc(netmutex_lock(&m[i]), 0);
        if (h->p->cached)
            keep_cached(h, &m[i], h->names[i]);
    }
    set(&h->sh->held, 1);
    if (!h->p->cached && wait_set(&h->sh->release)) {
        int rc = 0;
        for (int i = 0; i < h->p->names; i++)
            rc = rc ? rc : netmutex_unlock(&m[i]);
        h->sh->unlock_rc = rc;
        set(&h->sh->released, 1);
    }
    wait_set(&h->sh->finish);
    for (int i = 0; i < h->p->names; i++)
        netmutex_destroy(&m[i]);
    netmutex_attr_destroy(&attr);
    return netmutex_shutdown();
}

/* Cached: locks (and unlocks: this process caches them in turn) every
 * name, which has the holder give its cached leases back. */
static void take_from_holder(holder_t *h, netmutex_t *m)
{
    for (int i = 0; i < h->p->names; i++) {
        nm_assert_rc(netmutex_lock(&m[i]), 0);
        nm_assert_rc(netmutex_unlock(&m[i]), 0);
    }
}

/* Locks NAME through M until the new MASTER has the lock: a process may
 * still be granted it by the old master for up to a check interval after
 * the switch (sentinel.h), which only the new master's key tells -- by a
 * token other than the holder's HELD (which the new master may still
 * have).  0 or the lock's error. */
static int lock_at(netmutex_t *m, NmRedis *master, const char *name, const char *held)
{
    struct timespec deadline;
    nm_deadline(&deadline, CLOCK_REALTIME, LEASE_MS + PROMPT_MS);
    for (;;) {
        int rc = netmutex_timedlock(m, &deadline);
        if (rc != 0)
            return rc;
        char *token = nm_token_of(master, name);
        bool ours = token && strcmp(token, held) != 0;
        rc = netmutex_unlock(m);
        g_free(token);
        if (ours) {
            nm_assert_rc(rc, 0);
            return 0;
        }
        /* The old master's grant; the unlock may reach either. */
        g_assert_true(rc == 0 || rc == ENOLCK);
        nmt_sleep_ms(10);
    }
}

/* Locks every name at the new MASTER and returns the longest time one
 * took from FROM (nmt_now_ms()); -1 if one failed.  Through handles that
 * may not use a cached lease: this process may still have one from the
 * window, which the new master never saw. */
static gint64 lock_all(holder_t *h, NmRedis *master, char **held, gint64 from)
{
    netmutex_attr_t attr;
    gint64 longest = 0;
    nm_assert_rc(netmutex_attr_init(&attr), 0);
    nm_assert_rc(netmutex_attr_setcache(&attr, 0), 0);
    for (int i = 0; i < h->p->names && longest >= 0; i++) {
        netmutex_t m;
        nm_assert_rc(netmutex_init(&m, h->names[i], &attr), 0);
        int rc = lock_at(&m, master, h->names[i], held[i]);
        if (rc == 0) {
            longest = MAX(longest, nmt_now_ms() - from);
        } else {
            g_test_message("name %d: %s", i, nm_errname(rc));
            longest = -1;
        }
        nm_assert_rc(netmutex_destroy(&m), 0);
    }
    nm_assert_rc(netmutex_attr_destroy(&attr), 0);
    return longest;
}

/* The window below is held open by pausing the promoted replica, so that
 * sentinel 0, which runs the failover, cannot see it is a master yet (not
 * by pausing sentinel 0: a sentinel whose clock jumps by more than 2 s
 * goes into TILT mode and does nothing for 30 s).  On a slow machine
 * (TSan, valgrind, a loaded CI) the releases made in the window take many
 * seconds, and two things would end a long window the wrong way; both are
 * switched off here:
 *  - sentinel 0 aborts a failover that waits longer than its
 *    failover-timeout, and turns the promoted replica back: this test's
 *    failovers may take a minute;
 *  - sentinels 1 and 2, which do not run the failover, see a replica that
 *    says it is a master for longer than their fixed grace (8 s, not a
 *    setting) and make it a replica again (+convert-to-slave): their
 *    SLAVEOF is renamed to a command the servers do not have, so only
 *    sentinel 0 can move a replica. */
static void prepare_failover(NmTopo *t)
{
    for (int i = 0; i < NM_TOPO_SENTINELS; i++)
        nm_redis_ok(t->sentinel[i], "SENTINEL SET %s failover-timeout %u", NM_TOPO_MASTER_NAME,
                    nm_ms(60000));
    for (int i = 1; i < NM_TOPO_SENTINELS; i++)
        nm_redis_ok(t->sentinel[i], "SENTINEL SET %s rename-command SLAVEOF NM-NOT-A-COMMAND",
                    NM_TOPO_MASTER_NAME);
}

static void test_release_in_window(gconstpointer data)
{
    const params_t *p = data;
    NmTopo *t = nm_topo_start(1);
    shared_t *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                        -1, 0);
    g_assert_true(sh != MAP_FAILED);
    memset(sh, 0, sizeof *sh);
    char *url = nm_topo_url(t);
    holder_t h = { sh, p, url, t->node[0], { NULL } };
    netmutex_t m[NAMES_MAX];
    for (int i = 0; i < p->names; i++) {
        char suffix[8];
        g_snprintf(suffix, sizeof suffix, "n%d", i);
        h.names[i] = nm_mutex_init(&m[i], suffix, NETMUTEX_NORMAL, 0);
    }

    /* Forked before this process uses the library: no thread of it runs. */
    pid_t pid = nm_fork_run(holder_main, &h);
    g_assert_true(wait_set(&sh->held));
    char *held[NAMES_MAX];
    for (int i = 0; i < p->names; i++) {
        held[i] = nm_token_of(t->node[0], h.names[i]);
        g_assert_nonnull(held[i]); /* held, or cached */
    }
    nm_topo_wait_synced(t); /* the replica has the holder's keys */
    configure(url);
    prepare_failover(t);

    NmRedis *old = nm_topo_failover_start(t);
    NmRedis *promoted = nm_topo_promoted(t, old);
    /* The window: the replica is a master, the sentinels name the old.
     * It lasts until sentinel 0, which runs the failover, next asks the
     * replica for INFO (about a second); with the replica paused, it stays
     * open for as long as the releases take on a slow machine. */
    nm_redis_pause(promoted);
    if (p->cached) {
        take_from_holder(&h, m);
    } else {
        set(&sh->release, 1);
        g_assert_true(wait_set(&sh->released));
        nm_assert_rc(sh->unlock_rc, 0); /* the old master took them */
    }
    if (p->late)
        nmt_sleep_ms(LATE_MS);
    /* Still in the window: the releases went to the old master. */
    for (int i = 0; i < NM_TOPO_SENTINELS; i++)
        g_assert_cmpint(nm_topo_named_port(t, i), ==, nm_redis_port(old));
    nm_redis_resume(promoted);

    NmRedis *master = nm_topo_failover_wait(t, old);
    gint64 switched = nmt_now_ms();
    gint64 gap = lock_all(&h, master, held, switched);
    g_test_message("%s%s, %d name(s): the longest a name took to lock after the sentinels "
                   "named the new master: %lld ms (bound %u ms, lease %u ms)",
                   p->cached ? "cached" : "uncached", p->late ? " late" : "", p->names, (long long)gap, WITHIN_MS,
                   LEASE_MS);
    g_assert_cmpint(gap, >=, 0);
    g_assert_cmpint(gap, <=, WITHIN_MS);

    set(&sh->finish, 1);
    nm_child_wait_ok(pid, PROMPT_MS);
    for (int i = 0; i < p->names; i++) {
        nm_assert_rc(netmutex_destroy(&m[i]), 0);
        g_free(h.names[i]);
        g_free(held[i]);
    }
    nm_assert_rc(netmutex_shutdown(), 0);
    munmap(sh, sizeof *sh);
    g_free(url);
    nm_topo_free(t);
}

static const params_t cached1 = { true, 1, false }, cached8 = { true, 8, false },
                      uncached1 = { false, 1, false }, late1 = { false, 1, true };

int main(int argc, char **argv)
{
    nm_test_init(&argc, &argv);
    g_test_add_data_func("/sentinel/release/cached", &cached1, test_release_in_window);
    g_test_add_data_func("/sentinel/release/cached-8-names", &cached8, test_release_in_window);
    g_test_add_data_func("/sentinel/release/uncached", &uncached1, test_release_in_window);
    g_test_add_data_func("/sentinel/release/late", &late1, test_release_in_window);
    return nm_test_finish(g_test_run());
}
