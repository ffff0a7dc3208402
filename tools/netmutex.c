/*
 * netmutex.c -- netmutex(1): run a command while holding a cluster-wide
 * lock, or look at, list or break locks.  This file holds main and what
 * every command shares; see cli.h for the map.
 *
 * Messages: the library writes its own line for each problem it meets (a
 * server it cannot use, with its URL and the cause; a bad setting, with
 * the variable and the value), filtered by NETMUTEX_LOG.  The tool's lines
 * come after it and sum up: what was being done, with which server(s), and
 * netmutex_strerror's text.  They claim no cause the tool does not know.
 */
#include "ac_config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <netmutex.h>

#include "cli.h"

/* One line on stderr, prefixed so it stands out in a cron mail among the
 * command's own output. */
void cli_say(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    fputs("netmutex: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* The exit code for a library error (see EXIT STATUS in netmutex.1). */
int cli_exit_code(int err)
{
    switch (err) {
    case 0: return 0;
    case EAGAIN: return CLI_EX_UNAVAILABLE;
    case EACCES: return CLI_EX_NOPERM;
    case EPROTO: return CLI_EX_PROTOCOL;
    case EINVAL: case ENOTSUP: return CLI_EX_CONFIG;
    case ENOTRECOVERABLE: return CLI_EX_UNRECOVERABLE;
    case ENOLCK: return CLI_EX_LOST;
    default: return CLI_EX_OSERR;
    }
}

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
 * struct (see bad_url in src/config.c).  Matching its text is brittle, but
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

/* The configuration comes from -u, --url-file or the environment; checking
 * it before anything else makes a bad URL a clear error, not a hang. */
int cli_configure(struct cli_opts *o, const char *holder)
{
    int rc;

    if (o->url_file != NULL) {
        if ((rc = cli_url_read_file(o->url_file, &o->url_buf)) != 0)
            return rc;
        o->url = o->url_buf;
    }
    netmutex_config_t cfg = { .url = o->url, .holder = holder };
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

static int run_command(struct cli_opts *o)
{
    int rc;

    /* run configures once it has forked its command (see run.c). */
    if (o->cmd == CLI_RUN)
        return cli_run(o);
    if ((rc = cli_configure(o, NULL)) != 0)
        return rc;
    switch (o->cmd) {
    case CLI_STATUS: return cli_status(o);
    case CLI_BREAK: return cli_break(o);
    default: return cli_list(o);
    }
}

int main(int argc, char **argv)
{
    struct cli_opts o;
    int rc = cli_parse(argc, argv, &o);

    if (rc == 0) {
        rc = run_command(&o);
        netmutex_shutdown();
    }
    free(o.url_buf);
    free(o.shown_url);
    return rc == CLI_EX_DONE ? 0 : rc;
}
