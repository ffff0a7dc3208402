/*
 * say.c -- how netmutex(1) talks to its user: one message line, one exit
 * code per library error.
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
