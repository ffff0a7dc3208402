/*
 * fuzz_config.c -- the fuzz target of everything a user configures: the
 * URL in every form, netmutex_configure()'s fields and every NETMUTEX_*
 * variable the libraries read.
 *
 * The input is lines.  "NETMUTEX_X=VALUE" sets that variable, "field=VALUE"
 * that field of netmutex_config_t (numbers as strtol/strtod read them,
 * any value, out of range too); the other lines are ignored.  Then the
 * URL in force goes through the parser, the describer and the masker, the
 * configuration through netmutex_configure() (which never dials), and the
 * readers of the other variables run: the porting layer's selectors
 * (NETMUTEX_MUTEXES, NETMUTEX_CONDS, NETMUTEX_RWLOCKS, item by item as
 * select.c takes them apart), NETMUTEX_STATS and NETMUTEX_LOCKDEP.  A
 * server's description must never depend on its password.
 *
 * TLS file settings are kept only when they name a file without a '/'
 * (the fuzzer's own directory): a fuzzer must not make the library read
 * a device or the whole disk.
 */
#include "ac_config.h"

#include "fuzz.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netmutex.h"

#include "config.h"
#include "lockdep.h"
#include "spec.h"
#include "stats.h"
#include "url.h"

/* Every variable the libraries read (grep getenv src/). */
static const char *const vars[] = {
    "NETMUTEX_URL", "NETMUTEX_PREFIX", "NETMUTEX_CONNECT_TIMEOUT_MS",
    "NETMUTEX_IO_TIMEOUT_MS", "NETMUTEX_LEASE_MS", "NETMUTEX_RENEW_PERCENT",
    "NETMUTEX_COHORT_MAX", "NETMUTEX_COHORT_MS", "NETMUTEX_SERVER_TIMEOUT_MS",
    "NETMUTEX_DRIFT_FACTOR", "NETMUTEX_DRIFT_MS", "NETMUTEX_ALLOW_EVICTION",
    "NETMUTEX_HOLDER", "NETMUTEX_CACHE", "NETMUTEX_CACHE_IDLE_MS",
    "NETMUTEX_MIN_REPLICAS", "NETMUTEX_REPLICA_TIMEOUT_MS", "NETMUTEX_TLS_CA",
    "NETMUTEX_TLS_CERT", "NETMUTEX_TLS_KEY", "NETMUTEX_TLS_SERVER_NAME",
    "NETMUTEX_TLS_VERIFY", "NETMUTEX_LOG", "NETMUTEX_DEADLOCK", "NETMUTEX_LOCKDEP",
    "NETMUTEX_STATS", "NETMUTEX_MUTEXES", "NETMUTEX_CONDS", "NETMUTEX_RWLOCKS",
};
#define NVARS (sizeof vars / sizeof vars[0])

/* The strings the fields point into, one per field. */
enum { F_URL, F_PREFIX, F_HOLDER, F_CA, F_CERT, F_KEY, F_SNI, F_COUNT };

typedef struct input {
    netmutex_config_t cfg;
    char *str[F_COUNT];
} input_t;

/* VAR=VALUE, one buffer per variable, written over by the next input:
 * setenv() would keep every value a fuzzer tries (glibc never frees
 * them).  A value longer than any setting takes is cut. */
#define VALUE_MAX (NM_URL_MAX * 2)
static char env_buf[NVARS][sizeof "NETMUTEX_REPLICA_TIMEOUT_MS=" + VALUE_MAX];

static void put(size_t i, const char *value)
{
    snprintf(env_buf[i], sizeof env_buf[i], "%s=%.*s", vars[i], (int)VALUE_MAX, value);
    putenv(env_buf[i]);
}

static int is_path_var(const char *name)
{
    return !strcmp(name, "tls_ca") || !strcmp(name, "tls_cert") || !strcmp(name, "tls_key") ||
           !strcmp(name, "NETMUTEX_TLS_CA") || !strcmp(name, "NETMUTEX_TLS_CERT") ||
           !strcmp(name, "NETMUTEX_TLS_KEY");
}

static void take_string(input_t *in, int which, const char *value, const char **field)
{
    free(in->str[which]);
    in->str[which] = strdup(value);
    *field = in->str[which];
}

static unsigned int uint_of(const char *v) { return (unsigned int)strtoul(v, NULL, 0); }

/* "field=VALUE" into IN; 0 when FIELD is none of netmutex_config_t's. */
static int take_field(input_t *in, const char *name, const char *v)
{
    netmutex_config_t *c = &in->cfg;
    static const struct { const char *name; size_t off; } uints[] = {
        { "connect_timeout_ms", offsetof(netmutex_config_t, connect_timeout_ms) },
        { "io_timeout_ms", offsetof(netmutex_config_t, io_timeout_ms) },
        { "lease_ms", offsetof(netmutex_config_t, lease_ms) },
        { "renew_percent", offsetof(netmutex_config_t, renew_percent) },
        { "cohort_max", offsetof(netmutex_config_t, cohort_max) },
        { "cohort_ms", offsetof(netmutex_config_t, cohort_ms) },
        { "server_timeout_ms", offsetof(netmutex_config_t, server_timeout_ms) },
        { "drift_ms", offsetof(netmutex_config_t, drift_ms) },
        { "cache_idle_ms", offsetof(netmutex_config_t, cache_idle_ms) },
        { "min_replicas", offsetof(netmutex_config_t, min_replicas) },
        { "replica_timeout_ms", offsetof(netmutex_config_t, replica_timeout_ms) },
    };
    for (size_t i = 0; i < sizeof uints / sizeof uints[0]; i++)
        if (!strcmp(name, uints[i].name)) {
            *(unsigned int *)((char *)c + uints[i].off) = uint_of(v);
            return 1;
        }
    if (!strcmp(name, "drift_factor"))
        c->drift_factor = strtod(v, NULL);
    else if (!strcmp(name, "allow_eviction"))
        c->allow_eviction = (int)strtol(v, NULL, 0);
    else if (!strcmp(name, "tls_verify"))
        c->tls_verify = strtol(v, NULL, 0);
    else if (!strcmp(name, "url"))
        take_string(in, F_URL, v, &c->url);
    else if (!strcmp(name, "key_prefix"))
        take_string(in, F_PREFIX, v, &c->key_prefix);
    else if (!strcmp(name, "holder"))
        take_string(in, F_HOLDER, v, &c->holder);
    else if (!strcmp(name, "tls_ca"))
        take_string(in, F_CA, v, &c->tls_ca);
    else if (!strcmp(name, "tls_cert"))
        take_string(in, F_CERT, v, &c->tls_cert);
    else if (!strcmp(name, "tls_key"))
        take_string(in, F_KEY, v, &c->tls_key);
    else if (!strcmp(name, "tls_server_name"))
        take_string(in, F_SNI, v, &c->tls_server_name);
    else
        return 0;
    return 1;
}

static void take_line(input_t *in, char *line)
{
    char *eq = strchr(line, '=');
    if (!eq)
        return;
    *eq = '\0';
    if (is_path_var(line) && strchr(eq + 1, '/'))
        return;
    for (size_t i = 0; i < NVARS; i++)
        if (!strcmp(line, vars[i])) {
            put(i, eq + 1);
            return;
        }
    take_field(in, line, eq + 1);
}

/* A description never shows a password: it is the same whatever the
 * passwords of the server and of its sentinels are, so long as each is
 * there or not as before.  (Looking for the password in the text would
 * also find it where the URL repeats its bytes, in a path say.) */
static void check_hidden(const nm_server_t *s)
{
    char a[NM_URL_MAX + 256], b[NM_URL_MAX + 256];
    nm_server_t other = *s, sentinels[NM_SENTINEL_NODES_MAX];
    static char changed[] = "\x01 not the password";
    if (s->nsentinels > NM_SENTINEL_NODES_MAX)
        abort();
    for (size_t i = 0; i < s->nsentinels; i++) {
        sentinels[i] = s->sentinels[i];
        sentinels[i].password = sentinels[i].password ? changed : NULL;
    }
    other.sentinels = s->nsentinels ? sentinels : NULL;
    other.password = s->password ? changed : NULL;
    nm_url_describe(s, a, sizeof a);
    nm_url_describe(&other, b, sizeof b);
    if (strcmp(a, b) != 0) {
        fprintf(stderr, "fuzz_config: a password shows: '%s' / '%s'\n", a, b);
        abort();
    }
}

static void check_servers(const nm_server_t *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        check_hidden(&s[i]);
}

static void parse_url(const char *url)
{
    char why[160], masked[64], full[NM_URL_MAX * 2];
    nm_urls_t urls;
    if (!url)
        return;
    nm_url_mask(url, masked, sizeof masked); /* a buffer too small for it */
    nm_url_mask(url, full, sizeof full);
    (void)nm_url_grammar(url);
    if (nm_url_parse(url, &urls, why, sizeof why) == 0) {
        check_servers(urls.servers, urls.n);
        check_servers(urls.seeds, urls.nseeds);
        nm_urls_free(&urls);
    }
}

/* A selector list item by item, as select.c reads it. */
static void parse_selectors(const char *var)
{
    const char *env = getenv(var), *why;
    char *copy = env ? strdup(env) : NULL, *save = NULL;
    for (char *item = copy ? strtok_r(copy, ",", &save) : NULL; item;
         item = strtok_r(NULL, ",", &save)) {
        nm_spec_t spec;
        if (nm_spec_parse(item, &spec, &why) == 0)
            nm_spec_free(&spec);
    }
    free(copy);
}

/* Whether variable VAR is set to exactly VALUE. */
static int is(const char *var, const char *value)
{
    const char *v = getenv(var);
    return v && strcmp(v, value) == 0;
}

static void other_variables(void)
{
    parse_selectors("NETMUTEX_MUTEXES");
    parse_selectors("NETMUTEX_CONDS");
    parse_selectors("NETMUTEX_RWLOCKS");
    /* The values that switch something on are read once in a program,
     * not once per input: NETMUTEX_STATS=1 adds a table printed at exit
     * at every call, NETMUTEX_LOCKDEP=1 a job for the background thread. */
    if (!is("NETMUTEX_STATS", "1"))
        nm_stats_init_from_env();
    netmutex_set_stats(NETMUTEX_STATS_OFF);
    if (!is("NETMUTEX_LOCKDEP", "1"))
        nm_lockdep_register();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    nm_fuzz_quiet_log();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *p = data, *end = data + size;
    input_t in;
    char *line, *prefix = NULL;
    memset(&in, 0, sizeof in);
    for (size_t i = 0; i < NVARS; i++)
        unsetenv(vars[i]);
    while ((line = nm_fuzz_line(&p, end)) != NULL) {
        take_line(&in, line);
        free(line);
    }
    parse_url(in.cfg.url ? in.cfg.url : getenv("NETMUTEX_URL"));
    if (netmutex_configure(&in.cfg) == 0)
        netmutex_shutdown();
    if (nm_config_prefix(&prefix) == 0)
        free(prefix);
    other_variables();
    for (int i = 0; i < F_COUNT; i++)
        free(in.str[i]);
    return 0;
}
