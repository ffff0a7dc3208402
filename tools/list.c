/*
 * list.c -- `netmutex list [PATTERN]`: the locks held now under the key
 * prefix, as netmutex_list(3) finds them (on every server of a quorum
 * list, every master of a Redis Cluster), in byte order of their names.
 */
#include "ac_config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <netmutex.h>

#include "cli.h"

/* The held locks, as netmutex_list hands them out (in byte order). */
struct locks {
    struct cli_lock *v;
    size_t n, cap;
};

static int keep(const char *name, const netmutex_status_t *st, void *arg)
{
    struct locks *ls = arg;

    if (ls->n == ls->cap) {
        size_t cap = ls->cap != 0 ? 2 * ls->cap : 64;
        struct cli_lock *v = realloc(ls->v, cap * sizeof *v);
        if (v == NULL)
            return ENOMEM;
        ls->v = v;
        ls->cap = cap;
    }
    if ((ls->v[ls->n].name = strdup(name)) == NULL)
        return ENOMEM;
    ls->v[ls->n++].st = *st;
    return 0;
}

static void locks_free(struct locks *ls)
{
    for (size_t i = 0; i < ls->n; i++)
        free(ls->v[i].name);
    free(ls->v);
}

/* Why the listing failed, with where the library looked. */
static void say_failed(const struct cli_opts *o, const netmutex_list_info_t *info, int err)
{
    if (info->cluster && info->servers == 0)
        cli_say("cannot read the cluster's masters: %s", netmutex_strerror(err));
    else if (info->cluster && info->answered < info->needed)
        cli_say("cannot list the locks: %u of the cluster's %u masters answered: %s",
                info->answered, info->servers, netmutex_strerror(err));
    else if (info->servers > 1 && info->answered < info->needed)
        cli_say("cannot list the locks: %u of %u servers answered, fewer than a quorum: %s",
                info->answered, info->servers, netmutex_strerror(err));
    else
        cli_say("cannot list the locks at %s: %s", o->shown_url, netmutex_strerror(err));
}

static void print_json(const struct cli_lock *locks, size_t n)
{
    putchar('[');
    for (size_t i = 0; i < n; i++) {
        fputs(i > 0 ? ",\n" : "\n", stdout);
        cli_print_json(&locks[i]);
    }
    fputs(n > 0 ? "\n]\n" : "]\n", stdout);
}

static int width_of(const struct cli_lock *locks, size_t n, int holder, int least)
{
    char text[CLI_TEXT_MAX];
    size_t w = (size_t)least;

    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(cli_text(holder ? locks[i].st.holder : locks[i].name, text,
                                     sizeof text));
        w = len > w ? len : w;
    }
    return (int)w;
}

/* One line per lock, in columns. */
static void print_table(const struct cli_lock *locks, size_t n)
{
    char name[CLI_TEXT_MAX], holder[CLI_TEXT_MAX], since[64];
    int wn = width_of(locks, n, 0, 4), wh = width_of(locks, n, 1, 6);

    printf("%-*s  %-*s  %-28s  %8s  %20s  %7s  %s\n", wn, "NAME", wh, "HOLDER", "SINCE",
           "TTL_MS", "FENCE", "WAITERS", "CACHED");
    for (size_t i = 0; i < n; i++) {
        const netmutex_status_t *st = &locks[i].st;
        cli_format_time(st->since_ms, since, sizeof since);
        printf("%-*s  %-*s  %-28s  %8" PRId64 "  %20" PRIu64 "  %7u  %s\n", wn,
               cli_text(locks[i].name, name, sizeof name), wh,
               cli_text(st->holder, holder, sizeof holder), since, st->ttl_ms, st->fence,
               st->waiters, !st->cached ? "no" : st->idle ? "idle" : "yes");
    }
}

/* 0 when a lock was listed, 1 when none is held, else an error's code. */
int cli_list(const struct cli_opts *o)
{
    struct locks ls = { NULL, 0, 0 };
    netmutex_list_info_t info;
    /* No name is empty, so the empty PATTERN matches none: nothing to ask. */
    int empty = o->pattern != NULL && *o->pattern == '\0';
    int err = empty ? 0 : netmutex_list(o->pattern, keep, &ls, &info), rc = 0;

    if (err == ECANCELED) /* keep ran out of memory */
        err = ENOMEM;
    if (err == EINVAL && o->pattern != NULL) {
        cli_say("list: malformed PATTERN (an empty one, a lone '\\' at its end, or a '[' "
                "never closed)");
        rc = CLI_EX_USAGE;
    } else if (err != 0) {
        say_failed(o, &info, err);
        rc = cli_exit_code(err);
    } else if (o->json) {
        print_json(ls.v, ls.n);
    } else {
        print_table(ls.v, ls.n);
    }
    if (rc == 0 && fflush(stdout) != 0)
        rc = CLI_EX_OSERR;
    if (rc == 0 && ls.n == 0)
        rc = 1;
    locks_free(&ls);
    return rc;
}
