/*
 * test_deadlock.c -- deadlock detection against a real server: rings of
 * members, each holding its own mutex and then waiting for the next
 * member's, in 2, 3 and 8 processes and with members as threads of one
 * process.  A ring is a cycle: exactly one member returns EDEADLK holding
 * nothing new (its unlock of the name it waited for is EPERM), and the
 * others get their lock once it lets its own go.  A chain (the last member
 * waits for nobody, and lets go once the others' waits were seen) is no
 * cycle: no EDEADLK.  A member killed or stopped in a cycle: at most one
 * EDEADLK, and every other member finishes.  Detection by type (ERRORCHECK
 * on, NORMAL off), by attribute and by NETMUTEX_DEADLOCK=detect; the
 * attribute's argument checks.  No timing is asserted: the bench measures how soon.
 */
#include "ac_config.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture.h"
#include "keytag.h"
#include "proxy.h"

static NmRedis *redis;

#define MAX_MEMBERS 8
#define NAME_LEN 160

typedef struct Ring {
    int n;              /* members */
    int type;           /* of every mutex */
    int attr;           /* -1: no setdeadlock; else its argument */
    int env;            /* the members set NETMUTEX_DEADLOCK=detect */
    int chain;          /* the last member waits for nobody */
    unsigned int timed_ms;  /* not 0: the waits are timed */
    unsigned int lease_ms;  /* 0: the default */
    int seen;           /* atomic, chain: the waits were looked at, the */
                        /* last lets go (see chain_release) */
    int threads_of_first;   /* members 0..k-1 are threads of one process */
    char own_kind[MAX_MEMBERS];  /* how member i holds its name: 'm' (0) a */
    char wait_kind[MAX_MEMBERS]; /* mutex, 'r'/'w' a read-write lock; and */
                                 /* how it waits for the next one's */
    char names[MAX_MEMBERS][NAME_LEN];
    int locked;         /* atomic: members holding their own name */
    int result[MAX_MEMBERS];
    int edeadlk;        /* atomic */
    int bad;            /* atomic: something the API must not do */
} Ring;

static Ring *ring_new(int n, int type, const char *what)
{
    Ring *r = mmap(NULL, sizeof *r, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    g_assert_true(r != MAP_FAILED);
    memset(r, 0, sizeof *r);
    r->n = n;
    r->type = type;
    r->attr = -1;
    for (int i = 0; i < n; i++) {
        char suffix[32];
        snprintf(suffix, sizeof suffix, "%s%d", what, i);
        char *name = nm_test_name(suffix);
        g_strlcpy(r->names[i], name, NAME_LEN);
        g_free(name);
        r->result[i] = -1;
    }
    return r;
}

static void ring_free(Ring *r)
{
    munmap(r, sizeof *r);
}

typedef struct Member {
    Ring *r;
    int i;
} Member;

static void mutex_of(Ring *r, netmutex_t *m, const char *name)
{
    netmutex_attr_t a;
    netmutex_attr_init(&a);
    netmutex_attr_settype(&a, r->type);
    if (r->attr >= 0)
        netmutex_attr_setdeadlock(&a, r->attr);
    if (r->lease_ms)
        netmutex_attr_setlease(&a, r->lease_ms);
    if (netmutex_init(m, name, &a) != 0)
        __atomic_add_fetch(&r->bad, 1, __ATOMIC_SEQ_CST);
    netmutex_attr_destroy(&a);
}

/* A member's name: a mutex, or a read-write lock taken for reading ('r')
 * or writing ('w'). */
typedef struct Lockable {
    char kind;
    netmutex_t m;
    netmutex_rwlock_t rw;
} Lockable;

static void lk_init(Ring *r, Lockable *l, char kind, const char *name)
{
    l->kind = kind ? kind : 'm';
    if (l->kind == 'm') {
        mutex_of(r, &l->m, name);
    } else if (netmutex_rwlock_init(&l->rw, name, NULL) != 0) {
        __atomic_add_fetch(&r->bad, 1, __ATOMIC_SEQ_CST);
    }
}

/* Takes L, waiting at most TIMED_MS (0: as long as it takes). */
static int lk_take(Lockable *l, unsigned int timed_ms)
{
    struct timespec ts;
    nm_deadline(&ts, CLOCK_REALTIME, timed_ms);
    if (l->kind == 'm')
        return timed_ms ? netmutex_timedlock(&l->m, &ts) : netmutex_lock(&l->m);
    if (l->kind == 'r')
        return timed_ms ? netmutex_rwlock_timedrdlock(&l->rw, &ts) : netmutex_rwlock_rdlock(&l->rw);
    return timed_ms ? netmutex_rwlock_timedwrlock(&l->rw, &ts) : netmutex_rwlock_wrlock(&l->rw);
}

static int lk_give(Lockable *l)
{
    return l->kind == 'm' ? netmutex_unlock(&l->m) : netmutex_rwlock_unlock(&l->rw);
}

static void lk_destroy(Lockable *l)
{
    if (l->kind == 'm')
        netmutex_destroy(&l->m);
    else
        netmutex_rwlock_destroy(&l->rw);
}

/* One member: its own name, then the next one's. */
static int member(void *p)
{
    Member *mb = p;
    Ring *r = mb->r;
    int i = mb->i, rc;
    Lockable own, next;
    lk_init(r, &own, r->own_kind[i], r->names[i]);
    if ((rc = lk_take(&own, 0)) != 0) {
        g_printerr("member %d: lock of its own: %s\n", i, nm_errname(rc));
        __atomic_add_fetch(&r->bad, 1, __ATOMIC_SEQ_CST);
        return 1;
    }
    __atomic_add_fetch(&r->locked, 1, __ATOMIC_SEQ_CST);
    gint64 bound = nmt_now_ms() + nm_ms(60000);
    while (__atomic_load_n(&r->locked, __ATOMIC_SEQ_CST) < r->n && nmt_now_ms() < bound)
        nmt_sleep_ms(5);
    if (r->chain && i == r->n - 1) {
        /* Holds until the waits were looked at, not for a time the others
         * might not publish in on a busy machine. */
        bound = nmt_now_ms() + nm_ms(60000);
        while (!__atomic_load_n(&r->seen, __ATOMIC_SEQ_CST) && nmt_now_ms() < bound)
            nmt_sleep_ms(5);
        r->result[i] = 0;
        lk_give(&own);
        lk_destroy(&own);
        return 0;
    }
    lk_init(r, &next, r->wait_kind[i], r->names[(i + 1) % r->n]);
    rc = lk_take(&next, r->timed_ms);
    r->result[i] = rc;
    if (rc == 0) {
        lk_give(&next);
    } else if (rc == EDEADLK) {
        __atomic_add_fetch(&r->edeadlk, 1, __ATOMIC_SEQ_CST);
        /* Nothing new held: the name it waited for is not its own. */
        if (lk_give(&next) != EPERM)
            __atomic_add_fetch(&r->bad, 1, __ATOMIC_SEQ_CST);
    } else if (rc != ETIMEDOUT) {
        g_printerr("member %d: lock of the next: %s\n", i, nm_errname(rc));
        __atomic_add_fetch(&r->bad, 1, __ATOMIC_SEQ_CST);
    }
    rc = lk_give(&own);
    if (rc != 0 && rc != ENOLCK)
        __atomic_add_fetch(&r->bad, 1, __ATOMIC_SEQ_CST);
    lk_destroy(&next);
    lk_destroy(&own);
    return 0;
}

static Member members[MAX_MEMBERS];

static void *member_thread(void *p)
{
    return GINT_TO_POINTER(member(p));
}

/* A process of members FROM..TO-1 (threads when more than one). */
typedef struct Proc {
    Ring *r;
    int from, to;
} Proc;

static Proc procs[MAX_MEMBERS];

static int process(void *p)
{
    Proc *pr = p;
    pthread_t t[MAX_MEMBERS];
    if (pr->r->env)
        setenv("NETMUTEX_DEADLOCK", "detect", 1);
    nm_configure(redis);
    for (int i = pr->from; i < pr->to; i++) {
        members[i] = (Member){ pr->r, i };
        if (pthread_create(&t[i], NULL, member_thread, &members[i]) != 0)
            return 2;
    }
    int rc = 0;
    for (int i = pr->from; i < pr->to; i++) {
        void *res;
        pthread_join(t[i], &res);
        rc |= GPOINTER_TO_INT(res);
    }
    netmutex_shutdown();
    return rc;
}

/* Runs R: one process per member, but the first THREADS_OF_FIRST members
 * share one.  Waits for all but KILLED (may be -1), which it kills (9) or
 * stops for a while (SIGSTOP) once every member holds its own name. */
static void (*during_run)(Ring *r); /* called once the members run */

static void ring_run(Ring *r, int victim_signal, int victim)
{
    pid_t pids[MAX_MEMBERS];
    int np = 0, first = r->threads_of_first > 1 ? r->threads_of_first : 1;
    procs[np] = (Proc){ r, 0, first };
    pids[np] = nm_fork_run(process, &procs[np]);
    np++;
    for (int i = first; i < r->n; i++) {
        procs[np] = (Proc){ r, i, i + 1 };
        pids[np] = nm_fork_run(process, &procs[np]);
        np++;
    }
    int sig_proc = victim < 0 ? -1 : victim < first ? 0 : victim - first + 1;
    if (during_run)
        during_run(r);
    if (victim_signal) {
        gint64 bound = nmt_now_ms() + nm_ms(60000);
        while (__atomic_load_n(&r->locked, __ATOMIC_SEQ_CST) < r->n && nmt_now_ms() < bound)
            nmt_sleep_ms(5);
        nmt_sleep_ms(300); /* the cycle closed, its waits published or not */
        kill(pids[sig_proc], victim_signal);
        if (victim_signal == SIGSTOP) {
            nmt_sleep_ms(3000);
            kill(pids[sig_proc], SIGCONT);
        } else {
            waitpid(pids[sig_proc], NULL, 0);
        }
    }
    for (int i = 0; i < np; i++)
        if (!(victim_signal == SIGKILL && i == sig_proc))
            nm_child_wait_ok(pids[i], nm_ms(120000));
}

static void assert_one_victim(Ring *r)
{
    int victims = 0;
    for (int i = 0; i < r->n; i++) {
        g_assert_true(r->result[i] == 0 || r->result[i] == EDEADLK);
        victims += r->result[i] == EDEADLK;
    }
    g_assert_cmpint(victims, ==, 1);
    g_assert_cmpint(r->edeadlk, ==, 1);
    g_assert_cmpint(r->bad, ==, 0);
}

static void test_cycle(gconstpointer data)
{
    int n = GPOINTER_TO_INT(data);
    Ring *r = ring_new(n, NETMUTEX_ERRORCHECK, "ring");
    ring_run(r, 0, -1);
    assert_one_victim(r);
    ring_free(r);
}

static void test_cycle_threads(void)
{
    Ring *r = ring_new(3, NETMUTEX_ERRORCHECK, "ring");
    r->threads_of_first = 2;
    ring_run(r, 0, -1);
    assert_one_victim(r);
    ring_free(r);
}

static void test_cycle_attribute(void)
{
    Ring *r = ring_new(2, NETMUTEX_NORMAL, "ring");
    r->attr = 1;
    ring_run(r, 0, -1);
    assert_one_victim(r);
    ring_free(r);
}

static void test_cycle_env(void)
{
    Ring *r = ring_new(2, NETMUTEX_RECURSIVE, "ring");
    r->env = 1;
    ring_run(r, 0, -1);
    assert_one_victim(r);
    ring_free(r);
}

/* Detection off: NORMAL by default, ERRORCHECK turned off by its
 * attribute.  Timed waits end the ring: ETIMEDOUT, never EDEADLK. */
static void test_off(gconstpointer data)
{
    int type = GPOINTER_TO_INT(data);
    Ring *r = ring_new(2, type, "ring");
    if (type == NETMUTEX_ERRORCHECK)
        r->attr = 0;
    r->timed_ms = nm_ms(1500);
    ring_run(r, 0, -1);
    g_assert_cmpint(r->edeadlk, ==, 0);
    g_assert_cmpint(r->bad, ==, 0);
    for (int i = 0; i < 2; i++)
        g_assert_true(r->result[i] == ETIMEDOUT || r->result[i] == 0);
    ring_free(r);
}

typedef struct Seen {
    const Ring *r;
    int n, others; /* the ring's waits; the others' */
    char waiter[2][128], holder[2][128], name[2][NAME_LEN];
    char as[2][8], held[2][NAME_LEN], held_as[2][8];
} Seen;

/* Whether NAME is one of R's. */
static int of_ring(const Ring *r, const char *name)
{
    for (int i = 0; i < r->n; i++)
        if (strcmp(r->names[i], name) == 0)
            return 1;
    return 0;
}

/* Only the ring's waits: a record may outlive its wait by up to its
 * expiry (a waiter killed), and the server is the other cases' too. */
static int see(const netmutex_wait_t *w, void *arg)
{
    Seen *s = arg;
    if (!of_ring(s->r, w->name)) {
        s->others++;
        return 0;
    }
    if (s->n < 2) {
        g_strlcpy(s->waiter[s->n], w->waiter, sizeof s->waiter[0]);
        g_strlcpy(s->holder[s->n], w->holder ? w->holder : "", sizeof s->holder[0]);
        g_strlcpy(s->name[s->n], w->name, sizeof s->name[0]);
        g_strlcpy(s->as[s->n], w->wait_as ? w->wait_as : "?", sizeof s->as[0]);
        g_strlcpy(s->held[s->n], w->nheld ? w->held[0] : "", sizeof s->held[0]);
        g_strlcpy(s->held_as[s->n], w->nheld ? w->held_as[0] : "", sizeof s->held_as[0]);
    }
    s->n++;
    return 0;
}

/* The waits of a chain (members 0 and 1; the last holds until
 * chain_release) once both are published: the index in S of the one for
 * names[1], or fails. */
static int seen_chain(Ring *r, Seen *s)
{
    gint64 bound = nmt_now_ms() + nm_ms(60000);
    nm_configure(redis);
    do {
        memset(s, 0, sizeof *s);
        s->r = r;
        nm_assert_rc(netmutex_waits(see, s, NULL), 0);
        if (s->n == 2)
            break;
        nmt_sleep_ms(20);
    } while (nmt_now_ms() < bound);
    g_test_message("%d other waits passed over", s->others);
    g_assert_cmpint(s->n, ==, 2);
    return strcmp(s->name[0], r->names[1]) == 0 ? 0 : 1;
}

/* The waits were looked at: the chain's last member lets go. */
static void chain_release(Ring *r)
{
    __atomic_store_n(&r->seen, 1, __ATOMIC_SEQ_CST);
    nm_assert_rc(netmutex_shutdown(), 0);
}

/* While the chain waits: netmutex_waits shows members 0 and 1 waiting,
 * 0 for a name 1 holds (a holder that waits too), 1 for the last one's
 * (a holder that does not wait: none). */
static void chain_waits_seen(Ring *r)
{
    Seen s;
    int zero = seen_chain(r, &s);
    g_assert_cmpstr(s.name[zero], ==, r->names[1]);
    g_assert_cmpstr(s.name[1 - zero], ==, r->names[2]);
    g_assert_cmpstr(s.holder[zero], ==, s.waiter[1 - zero]);
    g_assert_cmpstr(s.holder[1 - zero], ==, "");
    nm_assert_rc(netmutex_waits(NULL, NULL, NULL), EINVAL);
    chain_release(r);
}

/* A chain of read-write locks and a mutex ("rmw", see rw_chain): member 0
 * reads names[0] and waits for mutex names[1]; member 1 holds that and
 * waits to read names[2], which the last member writes and waits for
 * nothing. */
static void rw_chain_seen(Ring *r)
{
    Seen s;
    int zero = seen_chain(r, &s), one = 1 - zero;
    g_assert_cmpstr(s.name[zero], ==, r->names[1]);
    g_assert_cmpstr(s.as[zero], ==, "lock");
    g_assert_cmpstr(s.held[zero], ==, r->names[0]);
    g_assert_cmpstr(s.held_as[zero], ==, "read");
    g_assert_cmpstr(s.holder[zero], ==, s.waiter[one]);
    g_assert_cmpstr(s.name[one], ==, r->names[2]);
    g_assert_cmpstr(s.as[one], ==, "read");
    g_assert_cmpstr(s.held[one], ==, r->names[1]);
    g_assert_cmpstr(s.held_as[one], ==, "lock");
    g_assert_cmpstr(s.holder[one], ==, "");
    chain_release(r);
}

/* A chain that ends: the last member waits for nobody and lets go. */
static void test_chain(void)
{
    Ring *r = ring_new(3, NETMUTEX_ERRORCHECK, "chain");
    r->chain = 1;
    during_run = chain_waits_seen;
    ring_run(r, 0, -1);
    during_run = NULL;
    g_assert_cmpint(r->edeadlk, ==, 0);
    g_assert_cmpint(r->bad, ==, 0);
    for (int i = 0; i < 3; i++)
        g_assert_cmpint(r->result[i], ==, 0);
    ring_free(r);
}

/* A member killed, or stopped past its lease, in a 3-cycle: the others
 * finish, with one EDEADLK at most (the cycle may be broken for them
 * before it is found). */
static void test_member_signalled(gconstpointer data)
{
    int sig = GPOINTER_TO_INT(data);
    Ring *r = ring_new(3, NETMUTEX_ERRORCHECK, "ring");
    r->lease_ms = 1000;
    ring_run(r, sig, 2);
    g_assert_cmpint(r->edeadlk, <=, 1);
    g_assert_cmpint(r->bad, ==, 0);
    for (int i = 0; i < 2; i++)
        g_assert_true(r->result[i] == 0 || r->result[i] == EDEADLK);
    ring_free(r);
}

/* Read-write locks in a ring (NETMUTEX_DEADLOCK=detect): OWN and WAIT
 * spell each member's kinds (see Ring). */
typedef struct RwCase {
    int n;
    const char *own, *wait;
    int chain;
} RwCase;

static const RwCase rw_read_then_write = { 2, "rm", "mw", 0 };
static const RwCase rw_write_then_read = { 2, "wm", "mr", 0 };
static const RwCase rw_readers_3 = { 3, "rrr", "www", 0 };
static const RwCase rw_chain = { 3, "rmw", "mrx", 1 };

static void test_rw(gconstpointer data)
{
    const RwCase *c = data;
    Ring *r = ring_new(c->n, NETMUTEX_NORMAL, "rw");
    r->env = 1;
    memcpy(r->own_kind, c->own, (size_t)c->n);
    memcpy(r->wait_kind, c->wait, (size_t)c->n);
    if (c->chain) {
        r->chain = 1;
        during_run = rw_chain_seen;
    }
    ring_run(r, 0, -1);
    during_run = NULL;
    if (c->chain) {
        g_assert_cmpint(r->edeadlk, ==, 0);
        g_assert_cmpint(r->bad, ==, 0);
        for (int i = 0; i < c->n; i++)
            g_assert_cmpint(r->result[i], ==, 0);
    } else {
        assert_one_victim(r);
    }
    ring_free(r);
}

/* ---- a waiter killed while it publishes ------------------------------------ */

typedef struct Residue {
    char m[NAME_LEN], rw[NAME_LEN];
    int port;  /* the proxy's */
    int stage; /* atomic: 1 the child holds its read share, 2 it waits */
} Residue;

static bool stage_reached(int *stage, int want)
{
    gint64 bound = nmt_now_ms() + nm_ms(30000);
    while (__atomic_load_n(stage, __ATOMIC_SEQ_CST) < want && nmt_now_ms() < bound)
        nmt_sleep_ms(5);
    return __atomic_load_n(stage, __ATOMIC_SEQ_CST) >= want;
}

/* The waiter, through the proxy: a first wait for M holding nothing (its
 * record goes out on the background thread's connection, which so exists
 * before the proxy delays new ones), then a read share of RW, then a
 * wait for M again, which publishes RW's holder set; it is killed there. */
static int residue_child(void *p)
{
    Residue *s = p;
    char *url = nm_redis_proxy_url(redis, s->port);
    netmutex_config_t cfg = { .url = url };
    netmutex_attr_t a;
    netmutex_t m;
    netmutex_rwlock_t rw;
    setenv("NETMUTEX_DEADLOCK", "detect", 1);
    setenv("NETMUTEX_CACHE", "0", 1);
    nm_assert_rc(netmutex_configure(&cfg), 0);
    nm_assert_rc(netmutex_attr_init(&a), 0);
    nm_assert_rc(netmutex_attr_settype(&a, NETMUTEX_ERRORCHECK), 0);
    nm_assert_rc(netmutex_init(&m, s->m, &a), 0);
    nm_assert_rc(netmutex_rwlock_init(&rw, s->rw, NULL), 0);
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_rwlock_rdlock(&rw), 0);
    __atomic_store_n(&s->stage, 1, __ATOMIC_SEQ_CST);
    if (!stage_reached(&s->stage, 2))
        return 1;
    netmutex_lock(&m); /* until killed */
    return 1;
}

static bool keys_appear(const char *pattern)
{
    gint64 bound = nmt_now_ms() + nm_ms(30000);
    while (nm_redis_count_keys(redis, pattern) == 0 && nmt_now_ms() < bound)
        nmt_sleep_ms(5);
    return nm_redis_count_keys(redis, pattern) > 0;
}

/* A waiter holding a read share is killed while it publishes its wait:
 * the set naming the read-write lock's waiting holders is created with
 * its expiry in one request, so no moment of death leaves it for ever.
 * The worst moment is played by the proxy: it closes the waiter's
 * connection before a PEXPIRE sent by itself would reach the server, and
 * holds every new connection back until the waiter is killed. */
static void test_killed_publishing(void)
{
    Residue *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    g_assert_true(s != MAP_FAILED);
    memset(s, 0, sizeof *s);
    char *m = nm_test_name("m"), *rw = nm_test_name("rw");
    g_strlcpy(s->m, m, sizeof s->m);
    g_strlcpy(s->rw, rw, sizeof s->rw);
    char tag[NM_TEST_TAG_LEN + 1];
    nm_test_key_tag(rw, strlen(rw), tag);
    char *set = g_strdup_printf("netmutex:{d%s}r:%s", tag, rw);
    NmProxy *p = nm_proxy_start(redis);
    s->port = nm_proxy_port(p);
    NmRemote *h = nm_remote_start(redis, m, NETMUTEX_ERRORCHECK, 0);
    nm_assert_rc(nm_remote(h, 'l'), 0);
    pid_t pid = nm_fork_run(residue_child, s);
    /* Its first wait's record (the key names the waiter, host:pid:tid):
     * any waiter's would do no good, one left by an earlier case, its 2 s
     * not yet over, let the child's first wait end unpublished, and its
     * background thread dialed first behind the proxy's hold. */
    char *first = g_strdup_printf("netmutex:{d*}w:*:%d:*", (int)pid);
    g_assert_true(keys_appear(first));
    g_free(first);
    nm_assert_rc(nm_remote(h, 'u'), 0);
    g_assert_true(stage_reached(&s->stage, 1));
    nm_assert_rc(nm_remote(h, 'l'), 0);
    nm_proxy_delay_new(p, nm_ms(120000));
    /* The set's own PEXPIRE alone: a slow waiter may renew its wait's
     * record (a bare PEXPIRE too) before it adds itself to the set, and
     * that cut would leave it no connection to add itself with. */
    char *cut = g_strdup_printf("\r\nPEXPIRE\r\n$%zu\r\nnetmutex:{d%s}r:", strlen(set), tag);
    nm_proxy_cut_request(p, cut);
    __atomic_store_n(&s->stage, 2, __ATOMIC_SEQ_CST);
    g_assert_true(keys_appear(set));
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    g_test_message("%u cut; the set's pttl %lld", nm_proxy_cuts(p), nm_redis_pttl(redis, set));
    g_assert_cmpint(nm_redis_keys_without_expiry(redis), ==, 0);
    nm_assert_rc(nm_remote(h, 'u'), 0);
    nm_remote_stop(h);
    nm_proxy_free(p);
    munmap(s, sizeof *s);
    g_free(cut);
    g_free(set);
    g_free(m);
    g_free(rw);
}

/* In a child: the parent never reads NETMUTEX_DEADLOCK (read once per
 * process), so that env-detect's children still can. */
static int attribute_checks(void *unused)
{
    (void)unused;
    netmutex_attr_t a;
    int on = -1;
    nm_assert_rc(netmutex_attr_setdeadlock(NULL, 1), EINVAL);
    nm_assert_rc(netmutex_attr_getdeadlock(NULL, &on), EINVAL);
    memset(&a, 0, sizeof a);
    nm_assert_rc(netmutex_attr_setdeadlock(&a, 1), EINVAL); /* not initialized */
    nm_assert_rc(netmutex_attr_init(&a), 0);
    nm_assert_rc(netmutex_attr_getdeadlock(&a, NULL), EINVAL);
    nm_assert_rc(netmutex_attr_setdeadlock(&a, 2), EINVAL);
    nm_assert_rc(netmutex_attr_setdeadlock(&a, -1), EINVAL);
    if (!getenv("NETMUTEX_DEADLOCK")) {
        nm_assert_rc(netmutex_attr_getdeadlock(&a, &on), 0);
        g_assert_cmpint(on, ==, 0);
    }
    nm_assert_rc(netmutex_attr_settype(&a, NETMUTEX_ERRORCHECK), 0);
    nm_assert_rc(netmutex_attr_getdeadlock(&a, &on), 0);
    g_assert_cmpint(on, ==, 1);
    nm_assert_rc(netmutex_attr_setdeadlock(&a, 0), 0);
    nm_assert_rc(netmutex_attr_getdeadlock(&a, &on), 0);
    g_assert_cmpint(on, ==, 0);
    nm_assert_rc(netmutex_attr_settype(&a, NETMUTEX_NORMAL), 0);
    nm_assert_rc(netmutex_attr_setdeadlock(&a, 1), 0);
    nm_assert_rc(netmutex_attr_getdeadlock(&a, &on), 0);
    g_assert_cmpint(on, ==, 1);
    nm_assert_rc(netmutex_attr_destroy(&a), 0);
    nm_assert_rc(netmutex_attr_getdeadlock(&a, &on), EINVAL);
    return 0;
}

/* A child that sets NETMUTEX_DEADLOCK=detect after fork() gets detection,
 * although its parent had read the variable (unset) before. */
static int env_after_fork(void *unused)
{
    (void)unused;
    netmutex_attr_t a;
    int on = -1;
    setenv("NETMUTEX_DEADLOCK", "detect", 1);
    nm_assert_rc(netmutex_attr_init(&a), 0);
    nm_assert_rc(netmutex_attr_getdeadlock(&a, &on), 0);
    g_assert_cmpint(on, ==, 1);
    return 0;
}

static void test_env_after_fork(void)
{
    netmutex_attr_t a;
    int on = -1;
    g_assert_null(getenv("NETMUTEX_DEADLOCK"));
    nm_assert_rc(netmutex_attr_init(&a), 0);
    nm_assert_rc(netmutex_attr_getdeadlock(&a, &on), 0);
    g_assert_cmpint(on, ==, 0);
    nm_child_wait_ok(nm_fork_run(env_after_fork, NULL), nm_ms(30000));
}

static void test_attribute(void)
{
    nm_child_wait_ok(nm_fork_run(attribute_checks, NULL), nm_ms(30000));
}

int main(int argc, char **argv)
{
    nm_test_init(&argc, &argv);
    redis = nm_redis_start(NULL);
    g_test_add_func("/deadlock/attribute/arguments", test_attribute);
    g_test_add_func("/deadlock/env/read-again-after-fork", test_env_after_fork);
    g_test_add_data_func("/deadlock/cycle/2-processes", GINT_TO_POINTER(2), test_cycle);
    g_test_add_data_func("/deadlock/cycle/3-processes", GINT_TO_POINTER(3), test_cycle);
    g_test_add_data_func("/deadlock/cycle/8-processes", GINT_TO_POINTER(8), test_cycle);
    g_test_add_func("/deadlock/cycle/threads-of-one-process", test_cycle_threads);
    g_test_add_func("/deadlock/cycle/attribute-on-normal", test_cycle_attribute);
    g_test_add_func("/deadlock/cycle/env-detect", test_cycle_env);
    g_test_add_data_func("/deadlock/off/normal", GINT_TO_POINTER(NETMUTEX_NORMAL), test_off);
    g_test_add_data_func("/deadlock/off/errorcheck-attribute-off",
                         GINT_TO_POINTER(NETMUTEX_ERRORCHECK), test_off);
    g_test_add_func("/deadlock/chain/breaks-by-itself", test_chain);
    g_test_add_data_func("/deadlock/rwlock/read-held-write-waits", &rw_read_then_write, test_rw);
    g_test_add_data_func("/deadlock/rwlock/write-held-read-waits", &rw_write_then_read, test_rw);
    g_test_add_data_func("/deadlock/rwlock/readers-3-processes", &rw_readers_3, test_rw);
    g_test_add_data_func("/deadlock/rwlock/chain-breaks-by-itself", &rw_chain, test_rw);
    g_test_add_func("/deadlock/rwlock/killed-publishing-leaves-no-lasting-key",
                    test_killed_publishing);
    g_test_add_data_func("/deadlock/member/killed", GINT_TO_POINTER(SIGKILL),
                         test_member_signalled);
    g_test_add_data_func("/deadlock/member/stopped", GINT_TO_POINTER(SIGSTOP),
                         test_member_signalled);
    int rc = g_test_run();
    nm_redis_free(redis);
    return nm_test_finish(rc);
}
