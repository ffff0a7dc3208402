/*
 * fixture_thread.c -- see fixture.h: a call run in a thread and waited for
 * with a bound, a netmutex held in another thread, a worker thread driven
 * one operation at a time, and lost-lease callbacks recorded.
 */
#include "ac_config.h"

#include "fixture.h"
#include "fixture_int.h"
#include "keytag.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>

/* ===================================================================== */
/* threads                                                                */
/* ===================================================================== */

struct NmCall {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool done;
    int result;
    NmCallFunc fn;
    void *arg;
};

static void cond_init_monotonic(pthread_cond_t *cond)
{
    pthread_condattr_t attr;

    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(cond, &attr);
    pthread_condattr_destroy(&attr);
}

static void *call_main(void *p)
{
    NmCall *c = p;
    int result = c->fn(c->arg);

    pthread_mutex_lock(&c->lock);
    c->result = result;
    c->done = true;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

NmCall *nm_call_start(NmCallFunc fn, void *arg)
{
    NmCall *c = g_new0(NmCall, 1);

    c->fn = fn;
    c->arg = arg;
    pthread_mutex_init(&c->lock, NULL);
    cond_init_monotonic(&c->cond);
    g_assert_cmpint(pthread_create(&c->thread, NULL, call_main, c), ==, 0);
    return c;
}

bool nm_call_done(NmCall *c)
{
    bool done;

    pthread_mutex_lock(&c->lock);
    done = c->done;
    pthread_mutex_unlock(&c->lock);
    return done;
}

int nm_call_wait(NmCall *c, unsigned int timeout_ms)
{
    struct timespec deadline;
    int result;

    nm_deadline(&deadline, CLOCK_MONOTONIC, timeout_ms);
    pthread_mutex_lock(&c->lock);
    while (!c->done) {
        if (pthread_cond_timedwait(&c->cond, &c->lock, &deadline) == ETIMEDOUT)
            break;
    }
    if (!c->done) {
        pthread_mutex_unlock(&c->lock);
        /* The thread still uses C, so C is deliberately not freed. */
        g_error("a call did not return within %u ms", timeout_ms);
    }
    result = c->result;
    pthread_mutex_unlock(&c->lock);
    pthread_join(c->thread, NULL);
    pthread_cond_destroy(&c->cond);
    pthread_mutex_destroy(&c->lock);
    g_free(c);
    return result;
}

int nm_call_run(NmCallFunc fn, void *arg, unsigned int timeout_ms)
{
    return nm_call_wait(nm_call_start(fn, arg), timeout_ms);
}

int nm_cycles(netmutex_t *m, int n)
{
    for (int i = 0; i < n; i++) {
        int rc = netmutex_lock(m);

        if (rc == 0)
            rc = netmutex_unlock(m);
        if (rc != 0) {
            g_printerr("cycle %d: %s\n", i, nm_errname(rc));
            return rc;
        }
    }
    return 0;
}

int nm_call_lock_unlock(void *m)
{
    int rc = netmutex_lock(m);

    return rc ? rc : netmutex_unlock(m);
}

int nm_call_trylock_unlock(void *m)
{
    int rc = netmutex_trylock(m);

    return rc ? rc : netmutex_unlock(m);
}

static void victim_cleanup(void *p)
{
    NmCondVictim *v = p;
    v->unlocked = netmutex_unlock(v->m);
    g_atomic_int_set(&v->cleaned, 1);
}

static void *victim_run(void *p)
{
    NmCondVictim *v = p;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL); /* lock is no cancellation point */
    if (netmutex_lock(v->m) != 0)
        return NULL;
    pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
    pthread_cleanup_push(victim_cleanup, v);
    do
        v->rc = netmutex_cond_wait(v->c, v->m);
    while (v->rc == 0);
    pthread_cleanup_pop(0);
    netmutex_unlock(v->m);
    return NULL;
}

void nm_cond_victim_start(NmCondVictim *v, netmutex_cond_t *c, netmutex_t *m)
{
    memset(v, 0, sizeof *v);
    v->c = c;
    v->m = m;
    v->rc = v->unlocked = -1;
    g_assert_cmpint(pthread_create(&v->thread, NULL, victim_run, v), ==, 0);
}

void nm_cond_victim_cancel(NmCondVictim *v, unsigned int bound_ms)
{
    void *res = NULL;
    g_assert_cmpint(pthread_cancel(v->thread), ==, 0);
    gint64 until = nmt_now_ms() + bound_ms;
    while (!g_atomic_int_get(&v->cleaned) && nmt_now_ms() < until)
        nmt_sleep_ms(2);
    g_assert_true(g_atomic_int_get(&v->cleaned));
    g_assert_cmpint(pthread_join(v->thread, &res), ==, 0);
    g_assert_true(res == PTHREAD_CANCELED);
}

struct NmHolder {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    netmutex_t *m;
    bool locked;
    int lock_rc;
    bool release;
    unsigned int delay_ms;
    bool finished;
    int unlock_rc;
};

static void *holder_main(void *p)
{
    NmHolder *h = p;
    int rc = netmutex_lock(h->m);
    unsigned int delay;

    pthread_mutex_lock(&h->lock);
    h->lock_rc = rc;
    h->locked = true;
    pthread_cond_broadcast(&h->cond);
    while (!h->release && rc == 0)
        pthread_cond_wait(&h->cond, &h->lock);
    delay = h->delay_ms;
    pthread_mutex_unlock(&h->lock);

    if (rc == 0) {
        nmt_sleep_ms(delay);
        rc = netmutex_unlock(h->m);
    }
    pthread_mutex_lock(&h->lock);
    h->unlock_rc = rc;
    h->finished = true;
    pthread_cond_broadcast(&h->cond);
    pthread_mutex_unlock(&h->lock);
    return NULL;
}

NmHolder *nm_holder_start(netmutex_t *m)
{
    NmHolder *h = g_new0(NmHolder, 1);
    struct timespec deadline;

    h->m = m;
    pthread_mutex_init(&h->lock, NULL);
    cond_init_monotonic(&h->cond);
    g_assert_cmpint(pthread_create(&h->thread, NULL, holder_main, h), ==, 0);

    nm_deadline(&deadline, CLOCK_MONOTONIC, nm_ms(NM_PROMPT_MS));
    pthread_mutex_lock(&h->lock);
    while (!h->locked &&
           pthread_cond_timedwait(&h->cond, &h->lock, &deadline) != ETIMEDOUT)
        ;
    if (!h->locked)
        g_error("holder thread did not get the lock in time");
    pthread_mutex_unlock(&h->lock);
    nm_assert_rc(h->lock_rc, 0);
    return h;
}

void nm_holder_release_later(NmHolder *h, unsigned int delay_ms)
{
    pthread_mutex_lock(&h->lock);
    h->release = true;
    h->delay_ms = delay_ms;
    pthread_cond_broadcast(&h->cond);
    pthread_mutex_unlock(&h->lock);
}

int nm_holder_join(NmHolder *h)
{
    struct timespec deadline;
    int rc;

    nm_deadline(&deadline, CLOCK_MONOTONIC, nm_ms(NM_PROMPT_MS) + h->delay_ms);
    pthread_mutex_lock(&h->lock);
    while (!h->finished &&
           pthread_cond_timedwait(&h->cond, &h->lock, &deadline) != ETIMEDOUT)
        ;
    if (!h->finished)
        g_error("holder thread did not unlock in time");
    rc = h->unlock_rc;
    pthread_mutex_unlock(&h->lock);
    pthread_join(h->thread, NULL);
    pthread_cond_destroy(&h->cond);
    pthread_mutex_destroy(&h->lock);
    g_free(h);
    return rc;
}

int nm_holder_release(NmHolder *h)
{
    nm_holder_release_later(h, 0);
    return nm_holder_join(h);
}

struct NmWorker {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    netmutex_t *m;
    char op;     /* pending request, 0 when none */
    bool done;   /* RESULT is the answer to the last request */
    int result;
};

static void *worker_main(void *p)
{
    NmWorker *w = p;

    pthread_mutex_lock(&w->lock);
    for (;;) {
        char op;
        int rc;

        while (w->op == 0)
            pthread_cond_wait(&w->cond, &w->lock);
        op = w->op;
        if (op == 'q')
            break;
        pthread_mutex_unlock(&w->lock);
        rc = op == 'l' ? netmutex_lock(w->m)
           : op == 't' ? netmutex_trylock(w->m)
           : op == 'u' ? netmutex_unlock(w->m) : EINVAL;
        pthread_mutex_lock(&w->lock);
        w->op = 0;
        w->result = rc;
        w->done = true;
        pthread_cond_broadcast(&w->cond);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

NmWorker *nm_worker_start(netmutex_t *m)
{
    NmWorker *w = g_new0(NmWorker, 1);

    w->m = m;
    pthread_mutex_init(&w->lock, NULL);
    cond_init_monotonic(&w->cond);
    g_assert_cmpint(pthread_create(&w->thread, NULL, worker_main, w), ==, 0);
    return w;
}

int nm_worker(NmWorker *w, char op)
{
    struct timespec deadline;
    int rc;

    nm_deadline(&deadline, CLOCK_MONOTONIC, nm_ms(NM_PROMPT_MS));
    pthread_mutex_lock(&w->lock);
    w->op = op;
    w->done = false;
    pthread_cond_broadcast(&w->cond);
    while (!w->done &&
           pthread_cond_timedwait(&w->cond, &w->lock, &deadline) != ETIMEDOUT)
        ;
    if (!w->done)
        g_error("worker thread did not answer in time");
    rc = w->result;
    pthread_mutex_unlock(&w->lock);
    return rc;
}

void nm_worker_stop(NmWorker *w)
{
    pthread_mutex_lock(&w->lock);
    w->op = 'q';
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
    g_free(w);
}

static int count_entries(const char *dir)
{
    GDir *d = g_dir_open(dir, 0, NULL);
    int n = 0;

    g_assert_nonnull(d);
    while (g_dir_read_name(d))
        n++;
    g_dir_close(d);
    return n;
}

int nm_count_fds(void)
{
    return count_entries("/proc/self/fd");
}

int nm_count_threads(void)
{
    return count_entries("/proc/self/task");
}

/* ---- lost-lease callbacks ---------------------------------------------- */

void nm_lost_init(NmLost *l)
{
    memset(l, 0, sizeof *l);
    pthread_mutex_init(&l->lock, NULL);
    cond_init_monotonic(&l->cond);
}

void nm_lost_clear(NmLost *l)
{
    pthread_mutex_destroy(&l->lock);
    pthread_cond_destroy(&l->cond);
    g_free(l->name);
}

void nm_lost_record(const char *name, void *arg)
{
    NmLost *l = arg;
    gint64 now = nmt_now_ms();

    pthread_mutex_lock(&l->lock);
    if (l->calls++ == 0) {
        l->first_at = now;
        l->name = g_strdup(name);
    }
    pthread_cond_broadcast(&l->cond);
    pthread_mutex_unlock(&l->lock);
}

int nm_lost_calls(NmLost *l)
{
    int calls;

    pthread_mutex_lock(&l->lock);
    calls = l->calls;
    pthread_mutex_unlock(&l->lock);
    return calls;
}

/* Waits at most TIMEOUT_MS (not scaled) for a first call; returns the
 * number of calls so far. */
int nm_lost_wait(NmLost *l, unsigned int timeout_ms)
{
    struct timespec end;
    int calls;

    nm_deadline(&end, CLOCK_MONOTONIC, timeout_ms);
    pthread_mutex_lock(&l->lock);
    while (l->calls == 0 && pthread_cond_timedwait(&l->cond, &l->lock, &end) != ETIMEDOUT)
        ;
    calls = l->calls;
    pthread_mutex_unlock(&l->lock);
    return calls;
}
