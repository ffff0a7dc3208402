/*
 * test_threads.c -- many threads of one process: mutual exclusion under
 * contention (one object, several objects of one name, a static
 * initializer whose lazy set-up is raced), and per-thread connections
 * being closed when a thread exits (1,000 short-lived threads do not grow
 * the descriptor table).
 */
#include "ac_config.h"

#include "fixture.h"

#include <pthread.h>
#include <string.h>

static NmRedis *redis;

#define NTHREADS 8
#define PROMPT_MS nm_ms(20000)

/* ---- a checked critical section --------------------------------------- */

/* Shared by the threads of one contention run.  OCCUPIED detects two
 * threads inside at once directly; COUNTER (a plain int updated with a
 * pause between read and write) detects it after the fact.  COUNTER is
 * deliberately not atomic: like a pthread mutex, netmutex must order the
 * memory of the threads it hands the lock between (TSan checks this). */
typedef struct Arena {
    netmutex_t *objects[NTHREADS]; /* thread i uses objects[i] */
    int iterations;
    gint occupied;
    int counter;
    gint overlaps;
    gint errors;
    pthread_barrier_t start;
} Arena;

typedef struct Contender {
    Arena *arena;
    int index;
} Contender;

static void critical_section(Arena *a)
{
    int seen;

    if (!g_atomic_int_compare_and_exchange(&a->occupied, 0, 1))
        g_atomic_int_inc(&a->overlaps);
    seen = a->counter;
    g_usleep(50);
    a->counter = seen + 1;
    g_atomic_int_set(&a->occupied, 0);
}

static void *contender_main(void *p)
{
    Contender *c = p;
    Arena *a = c->arena;
    netmutex_t *m = a->objects[c->index];

    pthread_barrier_wait(&a->start);
    for (int i = 0; i < a->iterations; i++) {
        /* Alternate lock and trylock+lock so both paths contend. */
        int rc = (i % 3 == 0) ? netmutex_trylock(m) : netmutex_lock(m);

        if (rc == EBUSY)
            rc = netmutex_lock(m);
        if (rc != 0) {
            g_atomic_int_inc(&a->errors);
            continue;
        }
        critical_section(a);
        if (netmutex_unlock(m) != 0)
            g_atomic_int_inc(&a->errors);
    }
    return NULL;
}

/* Runs NTHREADS contenders over A's objects and checks the outcome. */
static void run_contention(Arena *a)
{
    pthread_t threads[NTHREADS];
    Contender c[NTHREADS];

    pthread_barrier_init(&a->start, NULL, NTHREADS);
    for (int i = 0; i < NTHREADS; i++) {
        c[i] = (Contender){ a, i };
        g_assert_cmpint(pthread_create(&threads[i], NULL, contender_main, &c[i]), ==, 0);
    }
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&a->start);
    g_assert_cmpint(g_atomic_int_get(&a->errors), ==, 0);
    g_assert_cmpint(g_atomic_int_get(&a->overlaps), ==, 0);
    g_assert_cmpint(a->counter, ==, NTHREADS * a->iterations);
}

static void test_exclusion_one_object(void)
{
    Arena a = { .iterations = 40 };
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);

    for (int i = 0; i < NTHREADS; i++)
        a.objects[i] = &m;
    run_contention(&a);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

/* One object per thread, all of the same name: they share one lock. */
static void test_exclusion_same_name_objects(void)
{
    Arena a = { .iterations = 40 };
    netmutex_t m[NTHREADS];
    char *name = nm_test_name("shared");

    for (int i = 0; i < NTHREADS; i++) {
        nm_assert_rc(netmutex_init(&m[i], name, NULL), 0);
        a.objects[i] = &m[i];
    }
    run_contention(&a);
    for (int i = 0; i < NTHREADS; i++)
        nm_assert_rc(netmutex_destroy(&m[i]), 0);
    g_free(name);
}

static void test_exclusion_recursive(void)
{
    Arena a = { .iterations = 40 };
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_RECURSIVE, 0);

    for (int i = 0; i < NTHREADS; i++)
        a.objects[i] = &m;
    run_contention(&a);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

/* The first use of a static initializer happens in NTHREADS threads at
 * once: its lazy set-up must be thread-safe and still exclude. */
static netmutex_t static_raced = NETMUTEX_INITIALIZER("test_threads/static-raced");

static void test_static_first_use_race(void)
{
    Arena a = { .iterations = 20 };

    for (int i = 0; i < NTHREADS; i++)
        a.objects[i] = &static_raced;
    run_contention(&a);
    nm_assert_rc(netmutex_destroy(&static_raced), 0);
}

/* ---- connections of exited threads -------------------------------------- */

#define SHORT_LIVED_THREADS 1000
#define BATCH 10

static void *short_lived_main(void *m)
{
    return GINT_TO_POINTER(nm_call_lock_unlock(m));
}

/* The number of clients the server sees. */
static long long server_clients(void)
{
    redisReply *reply = nm_redis_cmd(redis, "CLIENT LIST");
    long long lines = 0;

    g_assert_cmpint(reply->type, ==, REDIS_REPLY_STRING);
    for (const char *p = reply->str; *p; p++)
        lines += *p == '\n';
    freeReplyObject(reply);
    return lines - 1; /* our own raw connection */
}

static void test_thread_exit_closes_connections(void)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);
    int fds_before, fds_after;
    long long clients_before, clients_after;
    gint64 deadline;

    /* Whatever the library creates once per process (the main thread's
     * connection, a background thread...) exists before counting. */
    nm_assert_rc(nm_call_run(nm_call_lock_unlock, &m, PROMPT_MS), 0);
    nm_assert_rc(nm_call_lock_unlock(&m), 0);
    fds_before = nm_count_fds();
    clients_before = server_clients();

    for (int done = 0; done < SHORT_LIVED_THREADS; done += BATCH) {
        pthread_t t[BATCH];

        for (int i = 0; i < BATCH; i++)
            g_assert_cmpint(pthread_create(&t[i], NULL, short_lived_main, &m), ==, 0);
        for (int i = 0; i < BATCH; i++) {
            void *rc;

            pthread_join(t[i], &rc);
            nm_assert_rc(GPOINTER_TO_INT(rc), 0);
        }
    }

    fds_after = nm_count_fds();
    g_test_message("fds before %d after %d", fds_before, fds_after);
    g_assert_cmpint(fds_after, <=, fds_before + 4);

    /* The server agrees, once it has noticed the closed sockets. */
    deadline = nmt_now_ms() + nm_ms(10000);
    while ((clients_after = server_clients()) > clients_before + 4 &&
           nmt_now_ms() < deadline)
        nmt_sleep_ms(20);
    g_test_message("server clients before %lld after %lld", clients_before, clients_after);
    g_assert_cmpint(clients_after, <=, clients_before + 4);

    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

int main(int argc, char **argv)
{
    int rc;

    nm_test_init(&argc, &argv);
    redis = nm_redis_start(NULL);
    nm_configure(redis);

    g_test_add_func("/threads/exclusion/one-object", test_exclusion_one_object);
    g_test_add_func("/threads/exclusion/same-name-objects", test_exclusion_same_name_objects);
    g_test_add_func("/threads/exclusion/recursive", test_exclusion_recursive);
    g_test_add_func("/threads/static-initializer/first-use-race", test_static_first_use_race);
    g_test_add_func("/threads/exit/closes-connections", test_thread_exit_closes_connections);

    rc = nm_test_finish(g_test_run());
    nm_redis_free(redis);
    return rc;
}
