/*
 * fixture_tls.c -- see fixture.h: NETMUTEX_TEST_TLS=1 runs a program's
 * fixture servers on TLS only, with client certificates, and points the
 * library at them through the environment (NETMUTEX_TLS_CA, _CERT, _KEY),
 * so that the same tests run over TLS unchanged.  The certificates are
 * made once per program by tests/tls-certs.sh (openssl(1)) in a
 * temporary directory the program removes at exit.
 */
#include "ac_config.h"

#include "fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <glib/gstdio.h>

static char *certs_dir;
static pid_t certs_owner;

bool nm_test_tls(void)
{
    const char *s = g_getenv("NETMUTEX_TEST_TLS");
    return s && strcmp(s, "1") == 0;
}

static void certs_remove(void)
{
    if (certs_dir && getpid() == certs_owner) {
        char *argv[] = { "rm", "-rf", certs_dir, NULL };
        g_spawn_sync(NULL, argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, NULL, NULL,
                     NULL);
    }
}

const char *nm_tls_certs(void)
{
    const char *top = g_getenv("NM_TOP_SRCDIR");
    if (certs_dir)
        return certs_dir;
    certs_dir = g_dir_make_tmp("netmutex-tls.XXXXXX", NULL);
    if (!certs_dir)
        g_error("a directory for the TLS certificates");
    certs_owner = getpid();
    atexit(certs_remove);
    char *script = g_build_filename(top ? top : "..", "tests", "tls-certs.sh", NULL);
    char *argv[] = { "sh", script, certs_dir, NULL };
    gint status = 0;
    GError *e = NULL;
    if (!g_spawn_sync(NULL, argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, NULL, &status,
                      &e) || !g_spawn_check_wait_status(status, NULL))
        g_error("%s failed (openssl missing?)", script);
    g_free(script);
    return certs_dir;
}

char *nm_tls_cert_file(const char *name)
{
    return g_build_filename(nm_tls_certs(), name, NULL);
}

void nm_tls_client_env(void)
{
    static const char *const vars[][2] = {
        { "NETMUTEX_TLS_CA", "ca.crt" },
        { "NETMUTEX_TLS_CERT", "client.crt" },
        { "NETMUTEX_TLS_KEY", "client.key" },
    };
    for (size_t i = 0; i < G_N_ELEMENTS(vars); i++) {
        char *f = nm_tls_cert_file(vars[i][1]);
        g_setenv(vars[i][0], f, TRUE);
        g_free(f);
    }
}
