/*
 * test_tls.c -- rediss:// against real TLS servers the test starts, with
 * certificates made at test time (tests/tls-certs.sh): locking with and
 * without a client certificate, a resumed session on the second dial, the
 * CA as a directory, and every refusal with its documented errno and its
 * reason logged within its bound: an unknown CA, a self-signed or expired
 * certificate, another host's, no client certificate, plain and TLS mixed
 * up both ways, and fake servers that accept and then stall or drip the
 * handshake; and fork(), also while other threads are inside OpenSSL.
 */
#include "ac_config.h"

#include "fixture.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "config.h"
#include "dial.h"
#include "reply.h"
#include "tls.h"

/* A refusal comes back well before this: no retry loop hides in it. */
#define PROMPT_MS nm_ms(15000)

static GString *logged;
static GMutex log_lock;

static void on_log(int level, const char *msg, void *arg)
{
    g_mutex_lock(&log_lock);
    g_string_append_printf(logged, "%s\n", msg);
    g_mutex_unlock(&log_lock);
}

static gboolean was_logged(const char *text)
{
    g_mutex_lock(&log_lock);
    gboolean yes = strstr(logged->str, text) != NULL;
    g_mutex_unlock(&log_lock);
    return yes;
}

static void log_reset(void)
{
    g_mutex_lock(&log_lock);
    g_string_truncate(logged, 0);
    g_mutex_unlock(&log_lock);
}

/* A TLS server with certificate CERT (server, expired, ...) that wants
 * client certificates when AUTH_CLIENTS. */
static NmRedis *tls_server(const char *cert, gboolean auth_clients)
{
    char *crt = g_strdup_printf("%s/%s.crt", nm_tls_certs(), cert);
    char *key = g_strdup_printf("%s/%s.key", nm_tls_certs(), cert);
    const char *extra[] = { "--port", "0", "--tls-cert-file", crt, "--tls-key-file", key,
                            "--tls-auth-clients", auth_clients ? "yes" : "no", NULL };
    NmRedisOpts o = { .tcp = true, .extra_args = extra };
    NmRedis *r;
    g_assert_true(nm_test_tls()); /* main() sets it: servers get TLS ports */
    r = nm_redis_start(&o);
    g_free(crt);
    g_free(key);
    return r;
}

static char *tls_url(NmRedis *r, const char *host)
{
    return g_strdup_printf("rediss://%s:%d", host, nm_redis_port(r));
}

/* Configures URL with the test CA and, if CLIENT, the client certificate;
 * CA overrides the CA file (a path under the certificates) when given. */
static int configure(const char *url, gboolean client, const char *ca, const char *name)
{
    char *ca_file = nm_tls_cert_file(ca ? ca : "ca.crt");
    char *cert = nm_tls_cert_file("client.crt"), *key = nm_tls_cert_file("client.key");
    netmutex_config_t cfg = {
        .url = url,
        .connect_timeout_ms = nm_ms(2000),
        .tls_ca = ca_file,
        .tls_cert = client ? cert : NULL,
        .tls_key = client ? key : NULL,
        .tls_server_name = name,
    };
    int rc = netmutex_configure(&cfg);
    g_free(ca_file);
    g_free(cert);
    g_free(key);
    return rc;
}

/* A lock/unlock cycle works with what is configured. */
static void expect_works(void)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

/* trylock fails with WANT within PROMPT_MS, and REASON was logged. */
static void expect_refused(int want, const char *reason)
{
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);
    log_reset();
    nm_assert_rc(nm_call_run(nm_call_trylock_unlock, &m, PROMPT_MS), want);
    g_test_message("logged: %s", logged->str);
    g_assert_true(was_logged(reason));
    nm_assert_rc(netmutex_destroy(&m), 0);
    g_free(name);
}

/* ---- what works ---------------------------------------------------------- */

static void test_lock_client_cert(void)
{
    NmRedis *r = tls_server("server", TRUE);
    char *url = tls_url(r, "127.0.0.1");
    nm_assert_rc(configure(url, TRUE, NULL, NULL), 0);
    expect_works();
    g_free(url);
    url = tls_url(r, "localhost");
    nm_assert_rc(configure(url, TRUE, NULL, NULL), 0);
    expect_works();
    nm_assert_rc(configure(url, TRUE, "cadir", NULL), 0); /* the CA as a directory */
    expect_works();
    nm_assert_rc(netmutex_configure(NULL), 0);
    g_free(url);
    nm_redis_free(r);
}

static void test_lock_no_client_cert(void)
{
    NmRedis *r = tls_server("server", FALSE);
    char *url = tls_url(r, "127.0.0.1");
    nm_assert_rc(configure(url, FALSE, NULL, NULL), 0);
    expect_works();
    nm_assert_rc(configure(url, FALSE, NULL, "localhost"), 0); /* SNI, verified */
    expect_works();
    nm_assert_rc(netmutex_configure(NULL), 0);
    g_free(url);
    nm_redis_free(r);
}

/* The second dial to a server resumes the first one's session. */
static void test_resumed(void)
{
    NmRedis *r = tls_server("server", TRUE);
    char *url = tls_url(r, "127.0.0.1");
    char *ca = nm_tls_cert_file("ca.crt"), *cert = nm_tls_cert_file("client.crt");
    char *key = nm_tls_cert_file("client.key");
    netmutex_config_t user = { .url = url, .tls_ca = ca, .tls_cert = cert, .tls_key = key };
    nm_config_t *cfg;
    redisContext *c[3];
    redisReply *reply;
    const char *ping[1] = { "PING" };
    char cause[256];
    nm_assert_rc(nm_config_build(&user, &cfg), 0);
    for (int i = 0; i < 3; i++) {
        int64_t t0 = nm_now_us();
        nm_assert_rc(nm_dial_open(&cfg->servers[0], "127.0.0.1", nm_redis_port(r),
                                  nm_now_ms() + nm_ms(5000), &c[i], cause, sizeof cause), 0);
        g_test_message("dial %d: %lld us, resumed %d", i, (long long)(nm_now_us() - t0),
                       nm_tls_resumed(c[i]));
        g_assert_cmpint(nm_tls_resumed(c[i]), ==, i > 0);
        /* TLS 1.3 hands the session over after the handshake: the first
         * reply brings it. */
        nm_assert_rc(nm_call(c[i], 1, ping, NULL, nm_now_ms() + nm_ms(5000), &reply), 0);
        freeReplyObject(reply);
    }
    for (int i = 0; i < 3; i++)
        nm_dial_close(c[i]);
    nm_config_unref(cfg);
    g_free(url);
    g_free(ca);
    g_free(cert);
    g_free(key);
    nm_redis_free(r);
}

/* A forked child's bound for one lock and unlock over TLS. */
#define CHILD_MS nm_ms(10000)

/* Waits for child PID by BOUND_MS: TRUE with *STATUS, or FALSE once it
 * has been killed for not exiting in time. */
static gboolean wait_child(pid_t pid, int *status, unsigned int bound_ms)
{
    gint64 until = nmt_now_ms() + bound_ms;
    for (;;) {
        if (waitpid(pid, status, WNOHANG) == pid)
            return TRUE;
        if (nmt_now_ms() >= until) {
            kill(pid, SIGKILL);
            g_assert_cmpint(waitpid(pid, status, 0), ==, pid);
            return FALSE;
        }
        g_usleep(1000);
    }
}

/* After fork() the child dials its own TLS connection, and the parent's,
 * which the child inherited and closed without a word, still works.  The
 * lease is not cached, so the background thread has nothing to do at the
 * fork: under the sanitizers, whose allocators a fork while another thread
 * allocates leaves locked in the child (nm_fork_with_threads_is_safe), an
 * idle thread is the one that cannot.  That a thread busy in OpenSSL at
 * the fork leaves the child nothing held is /tls/fork/busy's. */
static void test_fork(void)
{
    NmRedis *r = tls_server("server", TRUE);
    char *url = tls_url(r, "127.0.0.1");
    char *name = nm_test_name("m");
    netmutex_attr_t attr;
    netmutex_t m;
    nm_assert_rc(netmutex_attr_init(&attr), 0);
    nm_assert_rc(netmutex_attr_setcache(&attr, 0), 0);
    nm_assert_rc(netmutex_init(&m, name, &attr), 0);
    nm_assert_rc(netmutex_attr_destroy(&attr), 0);
    nm_assert_rc(configure(url, TRUE, NULL, NULL), 0);
    g_free(url); /* nothing of the test's own for the child to leak */
    nm_assert_rc(netmutex_lock(&m), 0);
    nm_assert_rc(netmutex_unlock(&m), 0);
    pid_t pid = fork();
    if (pid == 0) {
        int rc = netmutex_lock(&m);
        if (rc == 0)
            rc = netmutex_unlock(&m);
        g_free(name); /* the child leaks nothing of its own either */
        _exit(rc == 0 ? 0 : 1);
    }
    int status = -1;
    g_assert_true(wait_child(pid, &status, CHILD_MS));
    g_assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    for (int i = 0; i < 3; i++) {
        nm_assert_rc(netmutex_lock(&m), 0);
        nm_assert_rc(netmutex_unlock(&m), 0);
    }
    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_configure(NULL), 0);
    g_free(name);
    nm_redis_free(r);
}

/* ---- fork while other threads are inside OpenSSL ------------------------- */

#define DIALERS 3
#define FORKS 60

/* A thread of the parent's that keeps OpenSSL busy. */
typedef struct busy {
    const char *url;
    int stop;          /* atomic: the test thread sets it */
    int calls, failed; /* the thread's own until joined */
    pthread_t thread;
} busy_t;

/* netmutex_configure again and again: a new TLS context every time (the
 * certificates read, OpenSSL's stores filled), and every other thread's
 * next call dials anew, with a full handshake (no session of the new
 * context is stored yet). */
static void *reconfigure_run(void *p)
{
    busy_t *b = p;
    while (!__atomic_load_n(&b->stop, __ATOMIC_ACQUIRE)) {
        int rc = configure(b->url, TRUE, NULL, NULL);
        if (rc) {
            g_printerr("configure: %s\n", nm_errname(rc));
            b->failed++;
        } else {
            b->calls++;
        }
    }
    return NULL;
}

/* netmutex_status again and again: a thread of ours that dials (see
 * reconfigure_run) and talks TLS most of its time. */
static void *status_run(void *p)
{
    busy_t *b = p;
    while (!__atomic_load_n(&b->stop, __ATOMIC_ACQUIRE)) {
        netmutex_status_t st;
        int rc = netmutex_status("tls-fork-busy", &st);
        /* EAGAIN: no answer within status's bound, on a loaded machine. */
        if (rc != 0 && rc != EAGAIN) {
            g_printerr("status: %s\n", nm_errname(rc));
            b->failed++;
        } else {
            b->calls++;
        }
    }
    return NULL;
}

/* A forked child's one TLS lock and unlock, of a name of its own. */
static int child_lock_once(int i)
{
    char name[64];
    netmutex_t m;
    snprintf(name, sizeof name, "tls-fork-busy-%d", i);
    int rc = netmutex_init(&m, name, NULL);
    if (rc == 0 && (rc = netmutex_lock(&m)) == 0)
        rc = netmutex_unlock(&m);
    if (rc == 0)
        rc = netmutex_destroy(&m);
    return rc;
}

/* Not under the sanitizers: their allocators are not fork-safe while
 * other threads allocate (nm_fork_with_threads_is_safe), and
 * ThreadSanitizer, which does not see the atomics of an uninstrumented
 * OpenSSL, takes a session freed by the last of two threads that shared it
 * for a race.  Nor under valgrind, which runs one thread at a time and so
 * hardly meets the race, while each child would report as leaked what the
 * parent's other threads had allocated and not yet freed at the fork. */
static gboolean fork_busy_runs(void)
{
    return nm_fork_with_threads_is_safe() && !g_getenv("VALGRIND");
}

static void skip_fork_busy(void)
{
    g_test_skip("forking while threads allocate: not under the sanitizers nor valgrind");
}

/* fork() while other threads of ours are inside OpenSSL, over and over:
 * each child's first TLS dial must not wait for a lock of OpenSSL's that a
 * thread of the parent held at the fork (the random generator's, the
 * providers' and the certificate store's were seen).  Without the guard
 * (tls.c), about one run in two of FORKS forks hung. */
static void test_fork_busy(void)
{
    NmRedis *r = tls_server("server", TRUE);
    char *url = tls_url(r, "127.0.0.1");
    busy_t b[DIALERS + 1];
    int hung = -1, i, failed = 0;
    nm_assert_rc(configure(url, TRUE, NULL, NULL), 0);
    memset(b, 0, sizeof b);
    for (i = 0; i <= DIALERS; i++) {
        b[i].url = url;
        g_assert_cmpint(pthread_create(&b[i].thread, NULL,
                                       i == 0 ? reconfigure_run : status_run, &b[i]), ==, 0);
    }
    for (i = 0; i < FORKS; i++) {
        int status = -1;
        pid_t pid = fork();
        g_assert_cmpint(pid, >=, 0);
        if (pid == 0)
            _exit(child_lock_once(i) == 0 ? 0 : 1);
        if (!wait_child(pid, &status, CHILD_MS)) {
            hung = i;
            break;
        }
        g_assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    for (int j = 0; j <= DIALERS; j++) {
        __atomic_store_n(&b[j].stop, 1, __ATOMIC_RELEASE);
        g_assert_cmpint(pthread_join(b[j].thread, NULL), ==, 0);
        g_test_message("thread %d: %d calls, %d failed", j, b[j].calls, b[j].failed);
        failed += b[j].failed;
    }
    if (hung >= 0)
        g_test_message("child %d of %d: no TLS lock and unlock in %u ms, killed", hung,
                       FORKS, CHILD_MS);
    g_assert_cmpint(hung, ==, -1);
    g_assert_cmpint(failed, ==, 0);
    nm_assert_rc(netmutex_configure(NULL), 0);
    g_free(url);
    nm_redis_free(r);
}

/* ---- refusals -------------------------------------------------------------- */

static void test_refusals(void)
{
    static const struct {
        const char *cert, *ca, *host, *reason;
        gboolean client, auth_clients;
    } cases[] = {
        { "server", "other-ca.crt", "127.0.0.1", "certificate verify failed", 1, 1 },
        { "selfsigned", NULL, "127.0.0.1", "self-signed certificate", 1, 1 },
        { "expired", NULL, "127.0.0.1", "certificate has expired", 1, 1 },
        { "otherhost", NULL, "127.0.0.1", "IP address mismatch", 1, 1 },
        { "otherhost", NULL, "localhost", "hostname mismatch", 1, 1 },
        { "server", NULL, "127.0.0.1", "requires a client certificate", 0, 1 },
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        NmRedis *r = tls_server(cases[i].cert, cases[i].auth_clients);
        char *url = tls_url(r, cases[i].host);
        g_test_message("%s, %s", url, cases[i].reason);
        nm_assert_rc(configure(url, cases[i].client, cases[i].ca, NULL), 0);
        expect_refused(EACCES, cases[i].reason);
        g_free(url);
        nm_redis_free(r);
    }
    nm_assert_rc(netmutex_configure(NULL), 0);
}

/* NETMUTEX_TLS_VERIFY=0 accepts the self-signed server, and says so. */
static void test_verify_off(void)
{
    NmRedis *r = tls_server("selfsigned", FALSE);
    char *url = tls_url(r, "127.0.0.1");
    netmutex_config_t cfg = { .url = url, .tls_verify = NETMUTEX_TLS_VERIFY_OFF };
    nm_assert_rc(netmutex_configure(&cfg), 0);
    expect_works();
    cfg.tls_verify = 7;
    nm_assert_rc(netmutex_configure(&cfg), EINVAL);
    g_setenv("NETMUTEX_TLS_VERIFY", "0", TRUE);
    cfg.tls_verify = 0;
    nm_assert_rc(netmutex_configure(&cfg), 0);
    expect_works();
    cfg.tls_verify = 1; /* on, whatever the environment says */
    nm_assert_rc(netmutex_configure(&cfg), 0);
    expect_refused(EACCES, "self-signed certificate");
    g_unsetenv("NETMUTEX_TLS_VERIFY");
    nm_assert_rc(netmutex_configure(NULL), 0);
    g_free(url);
    nm_redis_free(r);
}

/* Plain to a TLS port; TLS to a plain port (which may say nothing, or
 * answer the hello as a bad command). */
static void test_mixups(void)
{
    NmRedis *r = tls_server("server", FALSE);
    char *url = g_strdup_printf("redis://127.0.0.1:%d", nm_redis_port(r));
    nm_assert_rc(configure(url, FALSE, NULL, NULL), 0);
    expect_refused(EAGAIN, "a TLS port?");
    g_free(url);
    nm_redis_free(r);

    NmRedisOpts plain = { .tcp = true };
    g_unsetenv("NETMUTEX_TEST_TLS");
    r = nm_redis_start(&plain);
    g_setenv("NETMUTEX_TEST_TLS", "1", TRUE);
    url = tls_url(r, "127.0.0.1");
    nm_assert_rc(configure(url, FALSE, NULL, NULL), 0);
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);
    log_reset();
    int rc = nm_call_run(nm_call_trylock_unlock, &m, PROMPT_MS);
    g_test_message("logged: %s", logged->str);
    g_assert_true(rc == EAGAIN || rc == EPROTO);
    g_assert_true(was_logged(rc == EPROTO ? "does not speak TLS" : "a plain port?"));
    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_configure(NULL), 0);
    g_free(name);
    g_free(url);
    nm_redis_free(r);
}

/* ---- fake servers that stall ---------------------------------------------- */

typedef struct staller {
    int lfd, port, drip;
    int stop; /* atomic: the test thread sets it, the server thread reads */
    pthread_t thread;
} staller_t;

/* Accepts, reads and drops; with DRIP, sends the start of a handshake
 * record one byte every 100 ms, forever. */
static void *staller_run(void *p)
{
    staller_t *s = p;
    int fds[16], pos[16], n = 0;
    static const char hello[] = "\x16\x03\x03\x40\x00\x02\x00\x3f\xfc\x03\x03";
    while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
        struct pollfd pf = { s->lfd, POLLIN, 0 };
        if (poll(&pf, 1, 100) > 0 && n < 16) {
            pos[n] = 0;
            fds[n++] = accept(s->lfd, NULL, NULL);
        }
        for (int i = 0; i < n; i++) {
            char buf[4096];
            if (fds[i] >= 0 && recv(fds[i], buf, sizeof buf, MSG_DONTWAIT) == 0)
                fds[i] = (close(fds[i]), -1);
            if (fds[i] >= 0 && s->drip)
                (void)!send(fds[i], hello + pos[i]++ % (sizeof hello - 1), 1, MSG_NOSIGNAL);
        }
    }
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    return NULL;
}

static void staller_start(staller_t *s, int drip)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof a;
    memset(s, 0, sizeof *s);
    s->drip = drip;
    s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    g_assert_cmpint(bind(s->lfd, (struct sockaddr *)&a, sizeof a), ==, 0);
    g_assert_cmpint(listen(s->lfd, 16), ==, 0);
    g_assert_cmpint(getsockname(s->lfd, (struct sockaddr *)&a, &len), ==, 0);
    s->port = ntohs(a.sin_port);
    g_assert_cmpint(pthread_create(&s->thread, NULL, staller_run, s), ==, 0);
}

static void staller_stop(staller_t *s)
{
    __atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
    pthread_join(s->thread, NULL);
    close(s->lfd);
}

/* A handshake that never ends is bounded by the call's deadline. */
static void test_stall(gconstpointer drip)
{
    staller_t s;
    struct timespec deadline;
    netmutex_t m;
    char *name = nm_mutex_init(&m, "m", NETMUTEX_NORMAL, 0);
    staller_start(&s, GPOINTER_TO_INT(drip));
    char *url = g_strdup_printf("rediss://127.0.0.1:%d", s.port);
    nm_assert_rc(configure(url, TRUE, NULL, NULL), 0);
    log_reset();
    int64_t t0 = nm_now_ms();
    nm_deadline(&deadline, CLOCK_REALTIME, 700);
    nm_assert_rc(netmutex_timedlock(&m, &deadline), ETIMEDOUT);
    int64_t took = nm_now_ms() - t0;
    g_test_message("%lld ms; logged: %s", (long long)took, logged->str);
    g_assert_cmpint(took, <, 700 + nm_ms(300));
    nm_assert_rc(nm_call_run(nm_call_trylock_unlock, &m, PROMPT_MS), EAGAIN);
    g_assert_true(was_logged("handshake timed out"));
    nm_assert_rc(netmutex_destroy(&m), 0);
    nm_assert_rc(netmutex_configure(NULL), 0);
    staller_stop(&s);
    g_free(url);
    g_free(name);
}

/* ---- settings -------------------------------------------------------------- */

static void test_bad_settings(void)
{
    netmutex_config_t cfg = { .url = "rediss://127.0.0.1:1", .tls_ca = "/nonexistent/ca.pem" };
    nm_assert_rc(netmutex_configure(&cfg), EINVAL);
    cfg.tls_ca = NULL;
    cfg.tls_cert = "/nonexistent/client.crt";
    nm_assert_rc(netmutex_configure(&cfg), EINVAL); /* no key */
    cfg.tls_key = "/nonexistent/client.key";
    nm_assert_rc(netmutex_configure(&cfg), EINVAL);
    g_setenv("NETMUTEX_TLS_VERIFY", "maybe", TRUE);
    cfg = (netmutex_config_t){ .url = "redis://127.0.0.1:1" }; /* checked without TLS too */
    nm_assert_rc(netmutex_configure(&cfg), EINVAL);
    g_unsetenv("NETMUTEX_TLS_VERIFY");
    nm_assert_rc(netmutex_configure(&cfg), 0);
    nm_assert_rc(netmutex_configure(NULL), 0);
}

int main(int argc, char **argv)
{
    nm_test_init(&argc, &argv);
    /* Each case says which certificates the client has: none from the
     * environment check-tls gives the other programs. */
    g_unsetenv("NETMUTEX_TLS_CA");
    g_unsetenv("NETMUTEX_TLS_CERT");
    g_unsetenv("NETMUTEX_TLS_KEY");
    g_setenv("NETMUTEX_TEST_TLS", "1", TRUE); /* tls_server's TLS ports */
    logged = g_string_new("");
    netmutex_set_log(NETMUTEX_LOG_INFO, on_log, NULL);
    g_test_add_func("/tls/lock/client-cert", test_lock_client_cert);
    g_test_add_func("/tls/lock/no-client-cert", test_lock_no_client_cert);
    g_test_add_func("/tls/resumed", test_resumed);
    g_test_add_func("/tls/fork", test_fork);
    if (fork_busy_runs())
        g_test_add_func("/tls/fork/busy", test_fork_busy);
    else
        g_test_add_func("/tls/fork/busy", skip_fork_busy);
    g_test_add_func("/tls/refused/certificates", test_refusals);
    g_test_add_func("/tls/refused/verify-off", test_verify_off);
    g_test_add_func("/tls/refused/mixups", test_mixups);
    g_test_add_data_func("/tls/stall/silent", GINT_TO_POINTER(0), test_stall);
    g_test_add_data_func("/tls/stall/drip", GINT_TO_POINTER(1), test_stall);
    g_test_add_func("/tls/settings", test_bad_settings);
    int rc = g_test_run();
    netmutex_set_log(NETMUTEX_LOG_OFF, NULL, NULL);
    g_string_free(logged, TRUE);
    return nm_test_finish(rc);
}
