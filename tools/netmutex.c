/*
 * netmutex.c -- netmutex(1): run a command while holding a cluster-wide
 * lock, or look at or break one.  This file holds main and what every
 * command shares; see cli.h for the map.
 */
#include "ac_config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* strerror, in the words of this tool where the errno alone misleads
 * (EAGAIN reads "Resource temporarily unavailable"). */
const char *cli_strerror(int err)
{
    switch (err) {
    case EAGAIN: return "Redis server unreachable";
    case EACCES: return "refused by the server (AUTH or SELECT)";
    case EPROTO: return "unexpected answer from the server";
    case ENOTRECOVERABLE: return "marked unrecoverable (see netmutex break)";
    default: return strerror(err);
    }
}

/* The configuration comes from -u, --url-file or the environment; checking
 * it before anything else makes a bad URL a clear error, not a hang. */
static int configure(struct cli_opts *o)
{
    const char *from = o->url_file ? "--url-file" : o->url ? "-u" : "environment";
    int rc;

    if (o->url_file != NULL) {
        if ((rc = cli_url_read_file(o->url_file, &o->url_buf)) != 0)
            return rc;
        o->url = o->url_buf;
    }
    netmutex_config_t cfg = { .url = o->url };
    int err = netmutex_configure(&cfg);

    if (err != 0)
        cli_say("bad configuration (%s): %s", from, strerror(err));
    return cli_exit_code(err);
}

static int run_command(const struct cli_opts *o)
{
    int rc;

    switch (o->cmd) {
    case CLI_STATUS: rc = cli_status(o); break;
    case CLI_BREAK: rc = cli_break(o); break;
    default: rc = cli_run(o); break;
    }
    netmutex_shutdown();
    return rc;
}

int main(int argc, char **argv)
{
    struct cli_opts o;
    int rc = cli_parse(argc, argv, &o);

    if (rc == 0)
        rc = configure(&o);
    /* The library has made its own copy. */
    free(o.url_buf);
    o.url = o.url_buf = NULL;
    if (rc == 0)
        rc = run_command(&o);
    return rc == CLI_EX_DONE ? 0 : rc;
}
