/*
 * netmutex.c -- netmutex(1): run a command while holding a cluster-wide
 * lock, or look at, list or break locks, or say what a Redis user needs.  This file holds main and the
 * dispatch to the commands; what they share is in say.c and config.c
 * (cli.h has the map).
 */
#include "ac_config.h"

#include <stdlib.h>

#include <netmutex.h>

#include "cli.h"

static int run_command(struct cli_opts *o)
{
    int rc;

    /* run configures once it has forked its command (see run.c). */
    if (o->cmd == CLI_RUN)
        return o->nofork ? cli_run_nofork(o) : cli_run(o);
    if (o->cmd == CLI_ACL)
        return cli_acl(o);
    if ((rc = cli_configure(o, NULL)) != 0)
        return rc;
    switch (o->cmd) {
    case CLI_STATUS: return cli_status(o);
    case CLI_BREAK: return cli_break(o);
    case CLI_WAITS: return cli_waits(o);
    case CLI_DEADLOCKS: return cli_deadlocks(o);
    case CLI_TOP: return cli_top(o);
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
