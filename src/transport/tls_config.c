/*
 * tls_config.c -- a configuration's TLS settings (tls_config.h): the fields of
 * netmutex_config_t, else NETMUTEX_TLS_* in the environment, else the
 * defaults; the TLS state built from them once, for every server whose
 * URL says rediss.
 *
 * Its own file, beside config.c, which calls nm_tls_configure once: the
 * settings are checked whether or not a URL uses TLS (a typo should not
 * wait for the day TLS is switched on), the files are read only when one
 * does.
 */
#include "nm.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "netmutex.h"
#include "tls.h"
#include "tls_config.h"
#include "url.h"

static const char *pick(const char *api, const char *env)
{
    const char *s = getenv(env);
    return api ? api : s && *s ? s : NULL;
}

/* Says which setting is wrong: ENV=VALUE, or the field named alike
 * (NETMUTEX_TLS_CA: tls_ca) when VALUE is NULL. */
static int refuse(const char *env, const char *value, const char *why)
{
    char field[32];
    size_t i = 0;
    for (const char *p = env + strlen("NETMUTEX_"); *p && i < sizeof field - 1; p++)
        field[i++] = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
    field[i] = '\0';
    if (value)
        netmutex_log(NETMUTEX_LOG_ERROR, "%s=%s: %s", env, value, why);
    else
        netmutex_log(NETMUTEX_LOG_ERROR, "netmutex_config_t.%s: %s", field, why);
    return EINVAL;
}

/* Verification: on, unless turned off explicitly (warned once). */
static int pick_verify(long api, int *out)
{
    static int warned; /* atomic */
    const char *s = getenv("NETMUTEX_TLS_VERIFY");
    if (api != 0 && api != 1 && api != NETMUTEX_TLS_VERIFY_OFF)
        return refuse("NETMUTEX_TLS_VERIFY", NULL, "neither 0, 1 nor NETMUTEX_TLS_VERIFY_OFF");
    if (api == 0 && s && *s && strcmp(s, "0") != 0 && strcmp(s, "1") != 0)
        return refuse("NETMUTEX_TLS_VERIFY", s, "neither 0 nor 1");
    *out = api == 1 || (api == 0 && !(s && strcmp(s, "0") == 0));
    if (!*out && !__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
        netmutex_log(NETMUTEX_LOG_WARN, "TLS: the servers' certificates are not verified "
                                        "(NETMUTEX_TLS_VERIFY=0): anybody on the path can "
                                        "impersonate them");
    return 0;
}

static int read_settings(const netmutex_config_t *u, nm_tls_settings_t *s)
{
    s->ca = pick(u->tls_ca, "NETMUTEX_TLS_CA");
    s->cert = pick(u->tls_cert, "NETMUTEX_TLS_CERT");
    s->key = pick(u->tls_key, "NETMUTEX_TLS_KEY");
    s->server_name = pick(u->tls_server_name, "NETMUTEX_TLS_SERVER_NAME");
    if (!s->cert != !s->key)
        return refuse(s->cert ? "NETMUTEX_TLS_KEY" : "NETMUTEX_TLS_CERT", NULL,
                      "a client certificate needs both NETMUTEX_TLS_CERT and NETMUTEX_TLS_KEY");
    if (s->server_name && (!*s->server_name || strpbrk(s->server_name, " \t\r\n/")))
        return refuse("NETMUTEX_TLS_SERVER_NAME", s->server_name, "not a host name");
    return pick_verify(u->tls_verify, &s->verify);
}

static int uses_tls(const nm_server_t *servers, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (servers[i].tls || uses_tls(servers[i].sentinels, servers[i].nsentinels))
            return 1;
    return 0;
}

static void attach(nm_server_t *servers, size_t n, nm_tls_t *t)
{
    for (size_t i = 0; i < n; i++) {
        if (servers[i].tls)
            servers[i].tls_state = t;
        attach(servers[i].sentinels, servers[i].nsentinels, t);
    }
}

int nm_tls_configure(const netmutex_config_t *user, nm_server_t *servers, size_t n,
                     nm_tls_t **out)
{
    static const netmutex_config_t none;
    nm_tls_settings_t s;
    char why[512] = "";
    *out = NULL;
    int err = read_settings(user ? user : &none, &s);
    if (err || !uses_tls(servers, n))
        return err;
    if ((err = nm_tls_new(&s, out, why, sizeof why)) == EINVAL)
        netmutex_log(NETMUTEX_LOG_ERROR, "TLS: %s", why);
    if (!err)
        attach(servers, n, *out);
    return err;
}
