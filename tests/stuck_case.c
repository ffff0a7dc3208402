/*
 * stuck_case.c -- a test program with a case that never ends, for
 * caselimit.sh, which checks that the fixture's time limit on a case
 * (fixture_case.c) ends it: not a test of its own.
 *
 * Its private redis-server's directory goes to standard error first, so
 * the script can see that the server and its directory are gone after.
 */
#include "ac_config.h"

#include <stdio.h>
#include <unistd.h>

#include "fixture.h"

static NmRedis *redis;

static void test_blocks(void)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);
    NmHolder *h = nm_holder_start(&m);

    /* A case that failed half way and now waits for something that will
     * not come: here, a lock another thread of its own never gives up. */
    fprintf(stderr, "server-dir %s\n", nm_redis_dir(redis));
    netmutex_lock(&m);
    nm_holder_release(h);
    g_free(name);
}

static void test_never_runs(void)
{
    printf("the case after the stuck one ran\n");
}

int main(int argc, char **argv)
{
    nm_test_init(&argc, &argv);
    redis = nm_redis_start(NULL);
    nm_configure(redis);
    g_test_add_func("/stuck/blocks", test_blocks);
    g_test_add_func("/stuck/after", test_never_runs);
    return nm_test_finish(g_test_run());
}
