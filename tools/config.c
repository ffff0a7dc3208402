/*
 * config.c -- the library's configuration as every command of netmutex(1)
 * makes it: from -u, --url-file or the environment, and the --tls-*
 * options (their files checked first), with the library's own lines held
 * back until the tool knows which setting they blame (see say.c for how
 * the tool's lines and the library's go together).
 */
#include "ac_config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <netmutex.h>

#include "cli.h"

/* ---- what the library says while it reads the configuration ----------- */

/* The lines the library logs during netmutex_configure are held back and
 * passed on afterwards: the tool needs to know whether one of them named
 * the URL, and only then can it tell -u from the environment (the library
 * calls -u's URL netmutex_config_t.url, since that is how it gets it). */
#define HELD_MAX 8
static struct {
    int level[HELD_MAX];
    char *text[HELD_MAX];
    int n;
    int url_named;
} held;

/* The library's words when it refuses a URL it was handed in the config
 * struct (see bad_url in src/transport/config.c).  Matching its text is brittle, but
 * it is the only sign the library gives of which setting it refused. */
#define URL_FIELD "netmutex_config_t.url "

static void hold_line(int level, const char *message, void *arg)
{
    if (strncmp(message, URL_FIELD, strlen(URL_FIELD)) == 0)
        held.url_named = 1;
    if (held.n < HELD_MAX && (held.text[held.n] = strdup(message)) != NULL)
        held.level[held.n++] = level;
}

/* The level NETMUTEX_LOG asks for, read as the library reads it: the
 * library cannot be told to go back to reading it itself. */
static int env_log_level(void)
{
    static const char *const names[] = { "off", "error", "warn", "info", "debug" };
    const char *s = getenv("NETMUTEX_LOG");

    for (int i = NETMUTEX_LOG_OFF; s != NULL && i <= NETMUTEX_LOG_DEBUG; i++) {
        if (strcasecmp(s, names[i]) == 0)
            return i;
    }
    return NETMUTEX_LOG_WARN;
}

/* Back to stderr at the user's level, and the held lines through it, so
 * that they are filtered and formatted as every other line. */
static void pass_held_lines(void)
{
    netmutex_set_log(env_log_level(), NULL, NULL);
    for (int i = 0; i < held.n; i++) {
        netmutex_log(held.level[i], "%s", held.text[i]);
        free(held.text[i]);
    }
    held.n = 0;
}

/* ---- configuration ------------------------------------------------------ */

/* What a refused configuration is blamed on: the option that gave the URL
 * when the library named the URL, else the configuration as a whole,
 * whose faulty variable the library's line above names. */
static void say_bad_config(const struct cli_opts *o, int err)
{
    if (held.url_named && o->url_file != NULL)
        cli_say("cannot use the URL in --url-file %s: %s", o->url_file,
                netmutex_strerror(err));
    else if (held.url_named && o->url != NULL)
        cli_say("cannot use the URL given with -u: %s", netmutex_strerror(err));
    else
        cli_say("cannot use the configuration: %s", netmutex_strerror(err));
}

/* A --tls-* file (or, for --tls-ca, directory) that cannot be read is
 * named here, whatever the URL: the library reads the files only for a
 * rediss URL, and then blames the variable it would have read instead. */
static int check_tls_file(const char *option, const char *path, int dir_ok)
{
    struct stat st;
    int err = 0;

    if (path == NULL)
        return 0;
    if (stat(path, &st) != 0 || access(path, R_OK) != 0)
        err = errno;
    else if (S_ISDIR(st.st_mode) && !dir_ok)
        err = EISDIR;
    if (err == 0)
        return 0;
    cli_say("%s %s: %s", option, path, strerror(err));
    return CLI_EX_CONFIG;
}

/* The configuration comes from -u, --url-file or the environment, and the
 * --tls-* options; checking it before anything else makes a bad URL a
 * clear error, not a hang. */
int cli_configure(struct cli_opts *o, const char *holder)
{
    int rc;

    if ((rc = check_tls_file("--tls-ca", o->tls_ca, 1)) != 0 ||
        (rc = check_tls_file("--tls-cert", o->tls_cert, 0)) != 0 ||
        (rc = check_tls_file("--tls-key", o->tls_key, 0)) != 0)
        return rc;
    if (o->url_file != NULL) {
        if ((rc = cli_url_read_file(o->url_file, &o->url_buf)) != 0)
            return rc;
        o->url = o->url_buf;
    }
    netmutex_config_t cfg = {
        .url = o->url,
        .holder = holder,
        .tls_ca = o->tls_ca,
        .tls_cert = o->tls_cert,
        .tls_key = o->tls_key,
        .tls_server_name = o->tls_server_name,
        .tls_verify = o->tls_insecure ? NETMUTEX_TLS_VERIFY_OFF : 0,
        /* A semaphore's permits take the lease and the lost-lease
         * callback from the configuration, having no attribute for them. */
        .lease_ms = o->permits ? o->lease_ms : 0,
        .on_lost = o->permits ? cli_run_on_lost : NULL,
    };
    netmutex_set_log(NETMUTEX_LOG_DEBUG, hold_line, NULL);
    int err = netmutex_configure(&cfg);
    pass_held_lines();
    if (err != 0) {
        say_bad_config(o, err);
        return cli_exit_code(err);
    }
    if ((o->shown_url = cli_url_mask(cli_url_in_use(o))) == NULL) {
        cli_say("%s", strerror(ENOMEM));
        return CLI_EX_OSERR;
    }
    return 0;
}
