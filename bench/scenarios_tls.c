/*
 * scenarios_tls.c -- tls_uncontended: what TLS costs (the top of
 * nm_bench.c describes the figures).
 *
 * One private server of its own listens on a plain TCP port and on a TLS
 * port at once, with certificates made for the run by tests/tls-certs.sh
 * (openssl(1)) in its directory, so that the two cycles compare the same
 * server.  The handshake's cost is measured in a forked child, which
 * configures the library (the main process never does): the first lock
 * of a new thread dials, and a new configuration's first thread makes a
 * full handshake where the threads after it resume the session.
 */
#include "ac_config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <netmutex.h>

#include "nm_bench.h"
#include "redis_server.h"

#define DIALS 41 /* new threads per kind of dial: the median is taken */

static rs_server_t tls_server;
static char certs[RS_PATH_MAX + 16];
static int tls_port;

/* Stops the server and removes its directory, the certificates' first
 * (rs_destroy removes the files it finds there, not directories). */
static void stop(void)
{
    char cmd[sizeof certs + 16];
    if (certs[0]) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", certs);
        if (system(cmd) != 0)
            nmb_complain("could not remove %s", certs);
    }
    rs_destroy(&tls_server);
}

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The server, plain on its port and TLS on TLS_PORT.  0 or -1. */
static int start(void)
{
    char cmd[2 * RS_PATH_MAX + 64], port[16], crt[RS_PATH_MAX + 32], key[RS_PATH_MAX + 32],
        ca[RS_PATH_MAX + 32];
    if (rs_make_dir(&tls_server, "nm_bench_tls") != 0)
        return -1;
    snprintf(certs, sizeof certs, "%s/certs", tls_server.dir);
    snprintf(cmd, sizeof cmd, "sh '%s' '%s'", TLS_CERTS_SH, certs);
    if (system(cmd) != 0 || (tls_port = rs_free_port()) < 0)
        return -1;
    snprintf(port, sizeof port, "%d", tls_port);
    snprintf(crt, sizeof crt, "%s/server.crt", certs);
    snprintf(key, sizeof key, "%s/server.key", certs);
    snprintf(ca, sizeof ca, "%s/ca.crt", certs);
    const char *extra[] = { "--tls-port", port, "--tls-cert-file", crt, "--tls-key-file", key,
                            "--tls-ca-cert-file", ca, "--tls-auth-clients", "no", NULL };
    rs_opts_t o = { .port = RS_PICK_PORT, .extra = extra, .ready_ms = READY_TIMEOUT_MS };
    return rs_start(&tls_server, &o) == 0 ? 0 : -1;
}

/* ---- the handshake, in a child -------------------------------------------- */

/* One new thread's first lock+unlock: the dial is in it. */
static void *first_cycle(void *arg)
{
    netmutex_t m = NETMUTEX_INITIALIZER("nm_bench:tls:dial");
    int64_t t0 = now_us();
    int rc = netmutex_lock(&m);
    if (rc == 0)
        rc = netmutex_unlock(&m);
    *(int64_t *)arg = rc == 0 ? now_us() - t0 : -1;
    return NULL;
}

static int64_t one_dial(void)
{
    pthread_t t;
    int64_t us = -1;
    if (pthread_create(&t, NULL, first_cycle, &us) == 0)
        pthread_join(t, NULL);
    return us;
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static int configure(const char *url)
{
    netmutex_config_t cfg = nmb_bench_config(0);
    cfg.url = url;
    return netmutex_configure(&cfg);
}

/* Medians of a first cycle over plain TCP, over TLS with a full handshake
 * (a new configuration each time) and resumed, into OUT[3]; -1 if any
 * failed. */
static void dial_medians(const char *tcp, const char *tls, int64_t out[3])
{
    int64_t v[3][DIALS];
    for (int i = 0; i < DIALS; i++) {
        v[0][i] = configure(tcp) == 0 ? one_dial() : -1;
        v[1][i] = configure(tls) == 0 ? one_dial() : -1;
        v[2][i] = one_dial(); /* the same configuration: resumed */
    }
    for (int k = 0; k < 3; k++) {
        qsort(v[k], DIALS, sizeof v[k][0], cmp64);
        out[k] = v[k][0] < 0 ? -1 : v[k][DIALS / 2];
    }
}

static int measure_dials(const char *tcp, const char *tls, int64_t out[3])
{
    int fd[2];
    if (pipe(fd) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        dial_medians(tcp, tls, out);
        _exit(write(fd[1], out, 3 * sizeof out[0]) == 3 * (ssize_t)sizeof out[0] ? 0 : 1);
    }
    close(fd[1]);
    ssize_t n = pid > 0 ? read(fd[0], out, 3 * sizeof out[0]) : -1;
    close(fd[0]);
    if (pid > 0)
        waitpid(pid, NULL, 0);
    return n == 3 * (ssize_t)sizeof out[0] && out[0] > 0 && out[1] > 0 && out[2] > 0 ? 0 : -1;
}

/* ---- the scenario ------------------------------------------------------ */

static int run(const scenario_t *sc, const char *tcp, const char *tls)
{
    char saved[sizeof nmb_server_url];
    group_result_t r_tls, r_tcp;
    int64_t dial[3];
    jline_t j;
    memcpy(saved, nmb_server_url, sizeof saved);
    snprintf(nmb_server_url, sizeof nmb_server_url, "%s", tcp);
    fprintf(stderr, "nm_bench: %s: the same cycle over plain TCP first\n", sc->name);
    if (nmb_run_load("tls_uncontended_tcp", &sc->load, &r_tcp) != 0) {
        memcpy(nmb_server_url, saved, sizeof saved);
        return nmb_report_error(sc->name, r_tcp.error);
    }
    snprintf(nmb_server_url, sizeof nmb_server_url, "%s", tls);
    int rc = nmb_measure(sc->name, &sc->load, &r_tls, &j);
    memcpy(nmb_server_url, saved, sizeof saved);
    if (rc != 0)
        return -1;
    nmb_j_num(&j, "tcp_cycles_per_s", nmb_rate(&r_tcp));
    nmb_j_num(&j, "tls_cycles_per_s", nmb_rate(&r_tls));
    nmb_j_figure(&j, "tls_ratio_to_tcp", nmb_rate(&r_tls) / nmb_rate(&r_tcp), 0.8, AT_LEAST);
    if (measure_dials(tcp, tls, dial) == 0) {
        nmb_j_num(&j, "first_cycle_tcp_us", (double)dial[0]);
        nmb_j_num(&j, "first_cycle_tls_full_us", (double)dial[1]);
        nmb_j_num(&j, "first_cycle_tls_resumed_us", (double)dial[2]);
        nmb_j_num(&j, "handshake_full_us", (double)(dial[1] - dial[0]));
        nmb_j_num(&j, "handshake_resumed_us", (double)(dial[2] - dial[0]));
    }
    nmb_j_end(&j);
    return 0;
}

int nmb_sc_tls_uncontended(const scenario_t *sc)
{
    char tcp[64], tls[64];
    if (start() != 0) {
        stop();
        return nmb_report_error(sc->name, "the TLS server could not be started "
                                          "(openssl and redis-server with TLS needed)");
    }
    char ca[sizeof certs + 16];
    snprintf(ca, sizeof ca, "%s/ca.crt", certs);
    setenv("NETMUTEX_TLS_CA", ca, 1);
    snprintf(tcp, sizeof tcp, "redis://127.0.0.1:%d", tls_server.port);
    snprintf(tls, sizeof tls, "rediss://127.0.0.1:%d", tls_port);
    int rc = run(sc, tcp, tls);
    unsetenv("NETMUTEX_TLS_CA");
    stop();
    return rc;
}
