/*
 * list.c -- `netmutex list [PATTERN]`: the locks held now under the key
 * prefix, as netmutex_list(3) finds the mutexes and netmutex_list_shared(3)
 * the read-write locks and semaphores (on every server of a quorum list,
 * every master of a Redis Cluster), in byte order of their names, a
 * mutex, a rwlock then a semaphore of one name; under a mutex, the waits
 * for it that deadlock detection published (waits.c), read once.
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

/* Room for one more lock in LS, zeroed, named NAME; NULL: out of memory. */
static struct cli_lock *add(struct locks *ls, const char *name)
{
    if (ls->n == ls->cap) {
        size_t cap = ls->cap != 0 ? 2 * ls->cap : 64;
        struct cli_lock *v = realloc(ls->v, cap * sizeof *v);
        if (v == NULL)
            return NULL;
        ls->v = v;
        ls->cap = cap;
    }
    memset(&ls->v[ls->n], 0, sizeof ls->v[ls->n]);
    if ((ls->v[ls->n].name = strdup(name)) == NULL)
        return NULL;
    return &ls->v[ls->n++];
}

static int keep(const char *name, const netmutex_status_t *st, void *arg)
{
    struct cli_lock *l = add(arg, name);

    if (l == NULL)
        return ENOMEM;
    l->kind = CLI_KIND_MUTEX;
    l->st = *st;
    return 0;
}

static int keep_shared(const char *name, int kind, const netmutex_shared_status_t *sh, void *arg)
{
    struct cli_lock *l = add(arg, name);

    if (l == NULL)
        return ENOMEM;
    l->kind = kind == NETMUTEX_KIND_SEM ? CLI_KIND_SEM : CLI_KIND_RWLOCK;
    l->sh = *sh;
    return 0;
}

/* By name, then mutex, rwlock, semaphore. */
static int by_name(const void *a, const void *b)
{
    const struct cli_lock *x = a, *y = b;
    int c = strcmp(x->name, y->name);

    return c != 0 ? c : (int)x->kind - (int)y->kind;
}

/* Whether RW, a read-write lock, only repeats M, the mutex of its name
 * listed before it: an exclusive run of netmutex(1) holds both (run.c),
 * its write side by the mutex's holder, with no reader and nobody
 * queued.  Such a pair is one line, the mutex's. */
static int repeats(const struct cli_lock *m, const struct cli_lock *rw)
{
    return m->kind == CLI_KIND_MUTEX && rw->kind == CLI_KIND_RWLOCK &&
           strcmp(m->name, rw->name) == 0 && rw->sh.writer && rw->sh.shares == 0 &&
           rw->sh.waiters == 0 && rw->sh.writers_waiting == 0 &&
           strcmp(m->st.holder, rw->sh.holder) == 0;
}

/* Sorted LS without the read-write locks that only repeat a mutex. */
static void fold(struct locks *ls)
{
    size_t n = 0;
    for (size_t i = 0; i < ls->n; i++) {
        if (n > 0 && repeats(&ls->v[n - 1], &ls->v[i])) {
            free(ls->v[i].name);
            continue;
        }
        ls->v[n++] = ls->v[i];
    }
    ls->n = n;
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

static void print_json(const struct cli_lock *locks, size_t n, const struct cli_waits *ws)
{
    putchar('[');
    for (size_t i = 0; i < n; i++) {
        fputs(i > 0 ? ",\n" : "\n", stdout);
        cli_print_json(&locks[i], 1, locks[i].kind == CLI_KIND_MUTEX ? ws : NULL);
    }
    fputs(n > 0 ? "\n]\n" : "]\n", stdout);
}

static int width_of(const struct cli_lock *locks, size_t n, int holder, int least)
{
    char text[CLI_TEXT_MAX];
    size_t w = (size_t)least;

    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(cli_text(!holder ? locks[i].name
                                     : locks[i].kind == CLI_KIND_MUTEX ? locks[i].st.holder
                                                                       : locks[i].sh.holder,
                                     text, sizeof text));
        w = len > w ? len : w;
    }
    return (int)w;
}

/* HELD: a mutex's holder count (1), a rwlock's "write" or "read:N"
 * (N readers), a semaphore's "N/M" permits held ("N/-": the server keeps
 * M only while a permit is held). */
static void held_text(const struct cli_lock *l, char *buf, size_t size)
{
    if (l->kind == CLI_KIND_MUTEX)
        snprintf(buf, size, "1");
    else if (l->kind == CLI_KIND_RWLOCK && l->sh.writer)
        snprintf(buf, size, "write");
    else if (l->kind == CLI_KIND_RWLOCK)
        snprintf(buf, size, "read:%u", l->sh.shares);
    else if (l->sh.permits > 0)
        snprintf(buf, size, "%u/%u", l->sh.shares, l->sh.permits);
    else
        snprintf(buf, size, "%u/-", l->sh.shares);
}

/* One line per lock, in columns: a rwlock's holder, since, ttl and fence
 * are its writer's; its waiters, writers and readers.  Under a mutex's
 * line, an indented line per wait for it in WS (if not NULL). */
static void print_table(const struct cli_lock *locks, size_t n, const struct cli_waits *ws)
{
    char name[CLI_TEXT_MAX], holder[CLI_TEXT_MAX], since[64], held[32];
    int wn = width_of(locks, n, 0, 4), wh = width_of(locks, n, 1, 6);

    printf("%-*s  %-6s  %-11s  %-*s  %-28s  %8s  %20s  %7s  %s\n", wn, "NAME", "KIND", "HELD",
           wh, "HOLDER", "SINCE", "TTL_MS", "FENCE", "WAITERS", "CACHED");
    for (size_t i = 0; i < n; i++) {
        const struct cli_lock *l = &locks[i];
        int mutex = l->kind == CLI_KIND_MUTEX;
        const char *who = mutex ? l->st.holder : l->sh.writer ? l->sh.holder : "-";
        held_text(l, held, sizeof held);
        cli_format_time(mutex ? l->st.since_ms : l->sh.since_ms, since, sizeof since);
        printf("%-*s  %-6s  %-11s  %-*s  %-28s  %8" PRId64 "  %20" PRIu64 "  %7u  %s\n", wn,
               cli_text(l->name, name, sizeof name), cli_kind_name(l->kind), held, wh,
               cli_text(who, holder, sizeof holder), since,
               mutex ? l->st.ttl_ms : l->sh.ttl_ms, mutex ? l->st.fence : l->sh.fence,
               mutex ? l->st.waiters : l->sh.waiters + l->sh.writers_waiting,
               !mutex ? "-" : !l->st.cached ? "no" : l->st.idle ? "idle" : "yes");
        if (mutex && ws != NULL)
            cli_print_waited_for(ws, l->name, "  ");
    }
}

/* The published waits into WS, when a mutex is listed to show them
 * under: WS, or NULL when there is none, or they cannot be read (in
 * quorum mode, where detection does not run; after an error, with a
 * warning: the locks are listed all the same). */
static const struct cli_waits *read_waits(const struct cli_opts *o, const struct locks *ls,
                                          struct cli_waits *ws)
{
    size_t i = 0;
    int err;

    while (i < ls->n && ls->v[i].kind != CLI_KIND_MUTEX)
        i++;
    if (i == ls->n)
        return NULL;
    err = cli_waits_read(ws);
    if (err != 0 && err != ENOTSUP)
        cli_say("warning: cannot read the waits at %s: %s", o->shown_url,
                netmutex_strerror(err));
    return err == 0 ? ws : NULL;
}

/* LS as O asks, with the waits for its mutexes. */
static void print_locks(const struct cli_opts *o, const struct locks *ls)
{
    struct cli_waits store = CLI_WAITS_INIT;
    const struct cli_waits *ws = read_waits(o, ls, &store);

    if (o->json)
        print_json(ls->v, ls->n, ws);
    else
        print_table(ls->v, ls->n, ws);
    cli_waits_free(&store);
}

/* 0 when a lock was listed, 1 when none is held, else an error's code. */
int cli_list(const struct cli_opts *o)
{
    struct locks ls = { NULL, 0, 0 };
    netmutex_list_info_t info;
    /* No name is empty, so the empty PATTERN matches none: nothing to ask. */
    int empty = o->pattern != NULL && *o->pattern == '\0';
    int err = empty ? 0 : netmutex_list(o->pattern, keep, &ls, &info), rc = 0;

    /* Quorum mode has neither read-write locks nor semaphores (ENOTSUP). */
    if (err == 0 && !empty) {
        err = netmutex_list_shared(o->pattern, keep_shared, &ls, &info);
        err = err == ENOTSUP ? 0 : err;
        if (err == 0 && ls.n > 1) {
            qsort(ls.v, ls.n, sizeof *ls.v, by_name);
            fold(&ls);
        }
    }
    if (err == ECANCELED) /* keep ran out of memory */
        err = ENOMEM;
    if (err == EINVAL && o->pattern != NULL) {
        cli_say("list: malformed PATTERN (an empty one, a lone '\\' at its end, or a '[' "
                "never closed)");
        rc = CLI_EX_USAGE;
    } else if (err != 0) {
        say_failed(o, &info, err);
        rc = cli_exit_code(err);
    } else {
        print_locks(o, &ls);
    }
    if (rc == 0 && fflush(stdout) != 0)
        rc = CLI_EX_OSERR;
    if (rc == 0 && ls.n == 0)
        rc = 1;
    locks_free(&ls);
    return rc;
}
