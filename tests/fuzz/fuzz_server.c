/*
 * fuzz_server.c -- the fuzz target of a hostile server's replies: the
 * library talks to a fake Redis (fake_server.h) in this process that
 * answers every command with the input's next reply, whatever bytes it
 * holds, while the target makes the calls the input's first line names.
 *
 * The first line is the calls, one letter each (the table below; others
 * are skipped, at most MAX_OPS run), the rest the script of replies
 * (fake_server.h).  Every call is timed or a try, with short bounds, so
 * that a reply that never comes costs a few milliseconds; once the script
 * is spent the server answers every command with an error.  After the
 * calls the target gives back whatever it holds against a server that
 * answers nothing else, so that the next input starts from nothing held.
 *
 * What may come back is any documented errno; what must not happen is a
 * crash, a hang, a leak or a sanitizer's report.
 *
 * NM_FUZZ_RECORD=SOCKET NM_FUZZ_RECORD_OUT=FILE: the replies come from the
 * real server at unix socket SOCKET instead, and FILE gets the input's
 * calls and those replies, a seed for the corpus: run
 * `NM_FUZZ_RECORD=<socket> NM_FUZZ_RECORD_OUT=<file> fuzz_server <file
 * holding the calls' letters>`, then shorten the bulky INFO reply by hand.
 */
#include "ac_config.h"

#include "fuzz.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "netmutex.h"

#include "fake_server.h"

#define MAX_OPS 24
#define IO_MS 40        /* every request's bound */
#define WAIT_MS 10      /* a timed call's */

static nm_fake_t *fake;
static FILE *record;
static netmutex_t mutexes[2];   /* error-checking; recursive and robust */
static netmutex_rwlock_t rw;
static netmutex_sem_t sem;
static netmutex_cond_t cond;
static int cur;                 /* the mutex the mutex calls use */
static unsigned int permits;    /* held through sem */

static const struct timespec *soon(struct timespec *ts)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_nsec += WAIT_MS * 1000000L;
    ts->tv_sec += ts->tv_nsec / 1000000000L;
    ts->tv_nsec %= 1000000000L;
    return ts;
}

static int list_fn(const char *name, const netmutex_status_t *st, void *arg)
{
    (void)name, (void)st, (void)arg;
    return 0;
}
static int shared_fn(const char *name, int kind, const netmutex_shared_status_t *st, void *arg)
{
    (void)name, (void)kind, (void)st, (void)arg;
    return 0;
}
static int waits_fn(const netmutex_wait_t *w, void *arg)
{
    (void)w, (void)arg;
    return 0;
}
static int stats_fn(const char *name, const netmutex_stats_t *st, void *arg)
{
    (void)name, (void)st, (void)arg;
    return 0;
}

static void mutex_op(char op)
{
    netmutex_t *m = &mutexes[cur];
    netmutex_status_t st;
    struct timespec ts;
    uint64_t v;
    switch (op) {
    case 'L': (void)netmutex_clocklock(m, CLOCK_MONOTONIC, soon(&ts)); break;
    case 'T': (void)netmutex_trylock(m); break;
    case 'U': (void)netmutex_unlock(m); break;
    case 'F': (void)netmutex_fence(m, &v); break;
    case 'V': (void)netmutex_validity(m, &v); break;
    case 'E': (void)netmutex_extend(m, 1000); break;
    case 'C': (void)netmutex_consistent(m); break;
    case 'B': (void)netmutex_break("fuzz-mutex"); break;
    case 'S': (void)netmutex_status("fuzz-mutex", &st); break;
    case 'M': cur = !cur; break;
    case 'c': (void)netmutex_cond_clockwait(&cond, m, CLOCK_MONOTONIC, soon(&ts)); break;
    case 'n': (void)netmutex_cond_signal(&cond); break;
    case 'b': (void)netmutex_cond_broadcast(&cond); break;
    }
}

static void shared_op(char op)
{
    netmutex_shared_status_t st;
    struct timespec ts;
    uint64_t v;
    int value;
    switch (op) {
    case 'r': (void)netmutex_rwlock_clockrdlock(&rw, CLOCK_MONOTONIC, soon(&ts)); break;
    case 'w': (void)netmutex_rwlock_clockwrlock(&rw, CLOCK_MONOTONIC, soon(&ts)); break;
    case 'R': (void)netmutex_rwlock_tryrdlock(&rw); break;
    case 'W': (void)netmutex_rwlock_trywrlock(&rw); break;
    case 'u': (void)netmutex_rwlock_unlock(&rw); break;
    case 'f': (void)netmutex_rwlock_fence(&rw, &v); break;
    case 'q': (void)netmutex_rwlock_status("fuzz-rw", &st); break;
    case 's': permits += netmutex_sem_clockwait(&sem, CLOCK_MONOTONIC, soon(&ts)) == 0; break;
    case 't': permits += netmutex_sem_trywait(&sem) == 0; break;
    case 'p': permits -= permits && netmutex_sem_post(&sem) == 0; break;
    case 'g': (void)netmutex_sem_getvalue(&sem, &value); break;
    case 'Q': (void)netmutex_sem_status("fuzz-sem", &st); break;
    }
}

static void listing_op(char op)
{
    netmutex_list_info_t info;
    switch (op) {
    case 'l': (void)netmutex_list("*", list_fn, NULL, &info); break;
    case 'h': (void)netmutex_list_shared("fuzz-*", shared_fn, NULL, &info); break;
    case 'x': (void)netmutex_waits(waits_fn, NULL, &info); break;
    case 'y': (void)netmutex_stats_cluster("*", stats_fn, NULL, &info); break;
    }
}

/* Whatever is held goes back (the server answers errors alone by now:
 * a release it refuses still forgets the hold here). */
static void give_back(void)
{
    for (int i = 0; i < 2; i++)
        for (int n = 0; n < 4 && netmutex_unlock(&mutexes[i]) != EPERM; n++)
            ;
    for (int n = 0; n < 4 && netmutex_rwlock_unlock(&rw) != EPERM; n++)
        ;
    for (; permits > 0; permits--)
        (void)netmutex_sem_post(&sem);
}

static void fail(const char *what, int err)
{
    fprintf(stderr, "fuzz_server: %s: %s\n", what, strerror(err));
    abort();
}

static void at_exit(void)
{
    netmutex_shutdown();
    nm_fake_stop(fake);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *up = getenv("NM_FUZZ_RECORD"), *out = getenv("NM_FUZZ_RECORD_OUT");
    netmutex_attr_t a;
    int err;
    (void)argc;
    (void)argv;
    nm_fuzz_quiet_log();
    if (!(fake = nm_fake_start()))
        fail("the fake server", errno);
    if (up && out) {
        if (!(record = fopen(out, "wb")))
            fail(out, errno);
        nm_fake_record(fake, up, record);
    }
    netmutex_config_t cfg = {
        .url = nm_fake_url(fake), .connect_timeout_ms = IO_MS, .io_timeout_ms = IO_MS,
        .lease_ms = 10000, .cache_idle_ms = NETMUTEX_CACHE_OFF,
    };
    if ((err = netmutex_configure(&cfg)))
        fail("netmutex_configure", err);
    netmutex_attr_init(&a);
    netmutex_attr_settype(&a, NETMUTEX_ERRORCHECK);
    netmutex_attr_setautorenew(&a, 0);
    if ((err = netmutex_init(&mutexes[0], "fuzz-mutex", &a)))
        fail("netmutex_init", err);
    netmutex_attr_settype(&a, NETMUTEX_RECURSIVE);
    netmutex_attr_setrobust(&a, 1);
    if ((err = netmutex_init(&mutexes[1], "fuzz-robust", &a)))
        fail("netmutex_init", err);
    netmutex_attr_destroy(&a);
    if ((err = netmutex_rwlock_init(&rw, "fuzz-rw", NULL)) ||
        (err = netmutex_sem_init(&sem, "fuzz-sem", 2, NULL)) ||
        (err = netmutex_cond_init(&cond, "fuzz-cond", NULL)))
        fail("init", err);
    atexit(at_exit);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nl = memchr(data, '\n', size);
    size_t nops = nl ? (size_t)(nl - data) : size;
    const uint8_t *script = nl ? nl + 1 : data + size;
    if (record) {
        fwrite(data, 1, nops, record);
        fputc('\n', record);
    }
    nm_fake_play(fake, script, (size_t)(data + size - script));
    for (size_t i = 0, ran = 0; i < nops && ran < MAX_OPS; i++) {
        char op = (char)data[i];
        ran += strchr("LTUFVECBSMcnbrwRWufqstpgQlhxy", op) != NULL && op;
        mutex_op(op);
        shared_op(op);
        listing_op(op);
    }
    nm_fake_play(fake, NULL, 0);
    give_back();
    cur = 0;
    return 0;
}
