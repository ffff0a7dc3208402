/*
 * waits.c -- `netmutex waits` and `netmutex deadlocks`: the waits that
 * deadlock detection published (netmutex_waits(3)), who waits for whom,
 * and the cycles among them; and the "waited for by" of one name that
 * status and list print.  A snapshot read key by key: a cycle shown is one
 * that every member's record showed at its read.
 */
#include "ac_config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <netmutex.h>

#include "cli.h"

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

static int keep(const netmutex_wait_t *w, void *arg)
{
    struct cli_waits *ws = arg;
    if (ws->n == ws->cap) {
        size_t cap = ws->cap ? 2 * ws->cap : 16;
        struct cli_wait *v = realloc(ws->v, cap * sizeof *v);
        if (!v)
            return 1;
        ws->v = v;
        ws->cap = cap;
    }
    struct cli_wait *x = &ws->v[ws->n];
    x->waiter = strdup(w->waiter);
    x->name = strdup(w->name);
    x->holder = dup_or_null(w->holder);
    x->seq = w->seq;
    /* A library without the field (0.2.0) waited for mutexes only. */
    snprintf(x->as, sizeof x->as, "%s", w->wait_as ? w->wait_as : "lock");
    x->shown = 0;
    if (!x->waiter || !x->name || (w->holder && !x->holder)) {
        free(x->waiter);
        free(x->name);
        free(x->holder);
        return 1;
    }
    ws->n++;
    return 0;
}

void cli_waits_free(struct cli_waits *ws)
{
    for (size_t i = 0; i < ws->n; i++) {
        free(ws->v[i].waiter);
        free(ws->v[i].name);
        free(ws->v[i].holder);
    }
    free(ws->v);
    *ws = (struct cli_waits)CLI_WAITS_INIT;
}

int cli_waits_read(struct cli_waits *ws)
{
    int err = netmutex_waits(keep, ws, NULL);
    if (err != 0)
        cli_waits_free(ws);
    return err == ECANCELED ? ENOMEM : err; /* keep ran out of memory */
}

/* Whether wait X is for a mutex. */
static int for_mutex(const struct cli_wait *x)
{
    return strcmp(x->as, "lock") == 0;
}

/* Room for a name as shown (cli_text), in quotes, and " (write)". */
#define WAIT_TEXT_MAX (CLI_TEXT_MAX + 16)

/* X's name as shown (in quotes if QUOTE), with " (read)" or " (write)"
 * after a read-write lock's: BUF, of WAIT_TEXT_MAX bytes. */
static const char *wait_text(const struct cli_wait *x, int quote, char buf[WAIT_TEXT_MAX])
{
    char name[CLI_TEXT_MAX];
    const char *q = quote ? "\"" : "";
    cli_text(x->name, name, sizeof name);
    if (for_mutex(x))
        snprintf(buf, WAIT_TEXT_MAX, "%s%s%s", q, name, q);
    else
        snprintf(buf, WAIT_TEXT_MAX, "%s%s%s (%s)", q, name, q, x->as);
    return buf;
}

/* The waits, or an exit code (0 when read). */
static int read_waits(const struct cli_opts *o, struct cli_waits *ws)
{
    int err = cli_waits_read(ws);
    if (err == 0)
        return 0;
    if (err == ENOTSUP)
        cli_say("deadlock detection does not run in quorum mode");
    else
        cli_say("cannot read the waits at %s: %s", o->shown_url, netmutex_strerror(err));
    return cli_exit_code(err);
}

/* 0 when a wait was listed, 1 when none is published, else an error's
 * code. */
int cli_waits(const struct cli_opts *o)
{
    struct cli_waits ws = CLI_WAITS_INIT;
    char a[CLI_TEXT_MAX], b[WAIT_TEXT_MAX], c[CLI_TEXT_MAX];
    int rc = read_waits(o, &ws);
    if (rc == 0 && ws.n > 0) {
        printf("%-30s %-10s %-30s %s\n", "WAITER", "WAIT", "WAITS FOR", "HELD BY (WAITING)");
        for (size_t i = 0; i < ws.n; i++)
            printf("%-30s %-10llu %-30s %s\n", cli_text(ws.v[i].waiter, a, sizeof a),
                   ws.v[i].seq, wait_text(&ws.v[i], 0, b),
                   ws.v[i].holder ? cli_text(ws.v[i].holder, c, sizeof c) : "-");
    }
    if (rc == 0 && fflush(stdout) != 0)
        rc = CLI_EX_OSERR;
    if (rc == 0 && ws.n == 0)
        rc = 1;
    cli_waits_free(&ws);
    return rc;
}

void cli_print_waited_for(const struct cli_waits *ws, const char *name, const char *indent)
{
    char a[CLI_TEXT_MAX];
    for (size_t i = 0; i < ws->n; i++)
        if (for_mutex(&ws->v[i]) && strcmp(ws->v[i].name, name) == 0)
            printf("%swaited for by: %s (wait %llu)\n", indent,
                   cli_text(ws->v[i].waiter, a, sizeof a), ws->v[i].seq);
}

void cli_put_waited_for_json(const struct cli_waits *ws, const char *name)
{
    const char *sep = "";
    fputs(",\"waited_for_by\":[", stdout);
    for (size_t i = 0; i < ws->n; i++) {
        if (!for_mutex(&ws->v[i]) || strcmp(ws->v[i].name, name) != 0)
            continue;
        printf("%s{\"waiter\":", sep);
        cli_put_json(stdout, ws->v[i].waiter);
        printf(",\"wait\":%llu}", ws->v[i].seq);
        sep = ",";
    }
    putchar(']');
}

/* For `netmutex status NAME`: nothing when none is published or the waits
 * cannot be read (status has said what it came for already). */
void cli_print_waiting_for(const char *name)
{
    struct cli_waits ws = CLI_WAITS_INIT;
    if (cli_waits_read(&ws) == 0)
        cli_print_waited_for(&ws, name, "");
    cli_waits_free(&ws);
}

static long find(const struct cli_waits *ws, const char *waiter)
{
    for (size_t i = 0; waiter && i < ws->n; i++)
        if (strcmp(ws->v[i].waiter, waiter) == 0)
            return (long)i;
    return -1;
}

/* Prints the cycle through wait I, if its chain of holders comes back to
 * a wait on it: 1 when one was printed. */
static int print_cycle_from(struct cli_waits *ws, size_t i)
{
    char a[CLI_TEXT_MAX], b[WAIT_TEXT_MAX], c[CLI_TEXT_MAX];
    size_t steps = 0;
    long at = (long)i;
    /* Walk n steps: if there is a cycle on the chain, AT is on it then. */
    while (at >= 0 && steps++ < ws->n)
        at = find(ws, ws->v[at].holder);
    if (at < 0 || ws->v[at].shown)
        return 0;
    size_t len = 0;
    long k = at;
    do {
        len++;
        k = find(ws, ws->v[k].holder);
    } while (k != at);
    printf("cycle of %zu:\n", len);
    k = at;
    do {
        ws->v[k].shown = 1;
        printf("  %s (wait %llu) waits for %s, held by %s\n",
               cli_text(ws->v[k].waiter, a, sizeof a), ws->v[k].seq,
               wait_text(&ws->v[k], 1, b), cli_text(ws->v[k].holder, c, sizeof c));
        k = find(ws, ws->v[k].holder);
    } while (k != at);
    return 1;
}

/* 0 when a cycle was printed, 1 when there is none, else an error's
 * code. */
int cli_deadlocks(const struct cli_opts *o)
{
    struct cli_waits ws = CLI_WAITS_INIT;
    int cycles = 0;
    int rc = read_waits(o, &ws);
    for (size_t i = 0; rc == 0 && i < ws.n; i++)
        cycles += print_cycle_from(&ws, i);
    if (rc == 0 && fflush(stdout) != 0)
        rc = CLI_EX_OSERR;
    if (rc == 0 && cycles == 0)
        rc = 1;
    cli_waits_free(&ws);
    return rc;
}
