/*
 * list.c -- `netmutex list [PATTERN]`: the locks held now under the key
 * prefix.  The library has no call that enumerates locks, so the lock keys
 * are found here, with SCAN on every server of the URL list, and each name
 * found is handed to netmutex_status, which keeps the quorum logic in the
 * library: a key left on a minority of the servers (a stale grant) is not
 * a held lock, and status says so.
 *
 * The lock of NAME is the key <prefix>{TAG}NAME, TAG 16 hex digits of a
 * digest of NAME (docs/deployment.md, "Redis key schema"); the other keys of a lock add
 * a suffix (":q", ":w", ...).  What follows the tag of any key is taken as
 * a candidate name: the suffixed keys give names such as "NAME:q", which
 * netmutex_status finds free (its tag is another), unless that name is
 * held too -- and then it belongs in the list.  So no digest is computed
 * here, and only held names are shown.
 */
#include "ac_config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <netmutex.h>

#include "cli.h"
#include "cluster.h"
#include "servers.h"

/* A cursor is a 64-bit number in decimal. */
#define CURSOR_MAX 32
#define TAG_LEN 16

struct names {
    char **v;
    size_t n, cap;
};

static int names_add(struct names *ns, const char *s, size_t len)
{
    if (ns->n == ns->cap) {
        size_t cap = ns->cap != 0 ? 2 * ns->cap : 64;
        char **v = realloc(ns->v, cap * sizeof *v);
        if (v == NULL)
            return ENOMEM;
        ns->v = v;
        ns->cap = cap;
    }
    if ((ns->v[ns->n] = malloc(len + 1)) == NULL)
        return ENOMEM;
    memcpy(ns->v[ns->n], s, len);
    ns->v[ns->n++][len] = '\0';
    return 0;
}

static void names_free(struct names *ns)
{
    for (size_t i = 0; i < ns->n; i++)
        free(ns->v[i]);
    free(ns->v);
}

static int by_bytes(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted, and each name once: a server may return a key twice in one
 * SCAN, and in quorum mode every server of the quorum has it. */
static void names_unique(struct names *ns)
{
    size_t w = 0;

    if (ns->n == 0)
        return;
    qsort(ns->v, ns->n, sizeof *ns->v, by_bytes);
    for (size_t i = 1; i < ns->n; i++) {
        if (strcmp(ns->v[i], ns->v[w]) == 0)
            free(ns->v[i]);
        else
            ns->v[++w] = ns->v[i];
    }
    ns->n = w + 1;
}

/* The candidate name in key K if K is a key of a lock under PREFIX; other
 * keys are skipped, and so are those no netmutex could have made (a NUL,
 * too long). */
static int take_key(const redisReply *k, const char *prefix, struct names *ns)
{
    size_t plen = strlen(prefix);

    if (k->type != REDIS_REPLY_STRING)
        return EPROTO;
    if (k->len < plen + TAG_LEN + 3 || memcmp(k->str, prefix, plen) != 0 ||
        k->str[plen] != '{' || k->str[plen + TAG_LEN + 1] != '}' ||
        strspn(k->str + plen + 1, "0123456789abcdef") != TAG_LEN)
        return 0;
    const char *name = k->str + plen + TAG_LEN + 2;
    size_t len = k->len - plen - TAG_LEN - 2;
    if (len > NETMUTEX_NAME_MAX || memchr(name, '\0', len) != NULL)
        return 0;
    return names_add(ns, name, len);
}

/* SCAN's MATCH: PREFIX with its glob characters escaped, then {TAG}PATTERN
 * with any 16 characters for TAG (a glob matches the whole key, so PATTERN
 * must match the whole name). */
static char *match_for(const char *prefix, const char *pattern)
{
    char *out = malloc(2 * strlen(prefix) + strlen(pattern) + TAG_LEN + 3), *w = out;

    for (const char *p = prefix; out != NULL && *p != '\0'; p++) {
        if (strchr("*?[]\\", *p) != NULL)
            *w++ = '\\';
        *w++ = *p;
    }
    if (out != NULL)
        sprintf(w, "{%.*s}%s", TAG_LEN, "????????????????", pattern);
    return out;
}

/* One SCAN reply: [cursor, [key...]]. */
static int take_page(const redisReply *r, char *cursor, const char *prefix, struct names *ns)
{
    int err = 0;

    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[0]->len >= CURSOR_MAX ||
        r->element[1]->type != REDIS_REPLY_ARRAY)
        return EPROTO;
    memcpy(cursor, r->element[0]->str, r->element[0]->len + 1);
    for (size_t i = 0; err == 0 && i < r->element[1]->elements; i++)
        err = take_key(r->element[1]->element[i], prefix, ns);
    return err;
}

/* Every lock key on the server C into NS; 0 or an errno, the cause in WHY. */
static int scan_server(redisContext *c, const char *match, const char *prefix,
                       struct names *ns, char *why, size_t len)
{
    char cursor[CURSOR_MAX] = "0";
    int err;

    do {
        const char *argv[] = { "SCAN", cursor, "MATCH", match, "COUNT", "1000" };
        redisReply *r = redisCommandArgv(c, 6, argv, NULL);
        if (r == NULL) {
            snprintf(why, len, "%s", c->errstr);
            return EAGAIN;
        }
        if (r->type == REDIS_REPLY_ERROR) {
            snprintf(why, len, "SCAN refused: %s", r->str);
            err = cli_reply_errno(r);
        } else if ((err = take_page(r, cursor, prefix, ns)) == EPROTO) {
            snprintf(why, len, "unexpected answer to SCAN");
        }
        freeReplyObject(r);
        if (err != 0)
            return err;
    } while (strcmp(cursor, "0") != 0);
    return 0;
}

static int list_server(const struct cli_server *s, const char *match, const char *prefix,
                       struct names *ns)
{
    char why[256] = "out of memory";
    int err;
    redisContext *c = cli_server_dial(s, &err, why, sizeof why);

    if (c != NULL) {
        err = scan_server(c, match, prefix, ns, why, sizeof why);
        redisFree(c);
    }
    if (err != 0)
        netmutex_log(NETMUTEX_LOG_WARN, "%s: cannot list the locks: %s", s->shown, why);
    return err;
}

/* Which of two errors the exit code reports: a refusal or a strange
 * answer says more than a server that was down. */
static int worse(int a, int b)
{
    static const int order[] = { ENOMEM, EACCES, EPROTO, EAGAIN };

    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        if (a == order[i] || b == order[i])
            return order[i];
    }
    return a != 0 ? a : b;
}

/* The names on the servers, from a quorum of them at least: any lock a
 * quorum holds is then on one of them.  On a Redis Cluster, from every
 * master (each holds its slots' locks alone).  0 or an errno, said. */
static int collect(const struct cli_opts *o, const char *match, const char *prefix,
                   struct names *ns)
{
    struct cli_server *srv = NULL;
    size_t n = 0, answered = 0;
    const char *url = cli_url_in_use(o);
    int cluster = 0, err = cli_servers_parse(url, &srv, &n), worst = err;

    if (err == 0)
        worst = err = cli_cluster_expand(&srv, &n, strncmp(url, CLI_CLUSTER_SCHEME,
                                                         strlen(CLI_CLUSTER_SCHEME)) == 0,
                                         &cluster);
    for (size_t i = 0; err == 0 && i < n; i++) {
        int e = list_server(&srv[i], match, prefix, ns);
        answered += e == 0;
        worst = worse(worst, e);
        err = e == ENOMEM ? e : 0;
    }
    if (err == 0 && answered >= (cluster ? n : n / 2 + 1))
        worst = 0;
    else if (cluster)
        cli_say("cannot list the locks: %zu of the cluster's %zu masters answered: %s", answered,
                n, netmutex_strerror(worst));
    else if (n > 1)
        cli_say("cannot list the locks: %zu of %zu servers answered, fewer than a quorum: %s",
                answered, n, netmutex_strerror(worst));
    else
        cli_say("cannot list the locks at %s: %s", o->shown_url, netmutex_strerror(worst));
    cli_servers_free(srv, n);
    return worst;
}

/* The held ones among NS, as the library sees them now, into LOCKS. */
static int fill(const struct cli_opts *o, const struct names *ns, struct cli_lock *locks,
                size_t *n)
{
    char text[CLI_TEXT_MAX];

    *n = 0;
    for (size_t i = 0; i < ns->n; i++) {
        struct cli_lock *l = &locks[*n];
        int err = netmutex_status(ns->v[i], &l->st);
        if (err != 0) {
            cli_say("status of %s at %s: %s", cli_text(ns->v[i], text, sizeof text),
                    o->shown_url, netmutex_strerror(err));
            return cli_exit_code(err);
        }
        l->name = ns->v[i];
        *n += l->st.held != 0;
    }
    return 0;
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

static int list_names(const struct cli_opts *o, const char *match, const char *prefix)
{
    struct names ns = { NULL, 0, 0 };
    struct cli_lock *locks = NULL;
    size_t n = 0;
    int rc = cli_exit_code(collect(o, match, prefix, &ns));

    names_unique(&ns);
    if (rc == 0 && ns.n > 0 && (locks = calloc(ns.n, sizeof *locks)) == NULL)
        rc = cli_exit_code(ENOMEM);
    if (rc == 0)
        rc = fill(o, &ns, locks, &n);
    if (rc == 0 && o->json)
        print_json(locks, n);
    else if (rc == 0)
        print_table(locks, n);
    if (rc == 0 && fflush(stdout) != 0)
        rc = CLI_EX_OSERR;
    free(locks);
    names_free(&ns);
    return rc != 0 ? rc : n > 0 ? 0 : 1;
}

/* 0 when a lock was listed, 1 when none is held, else an error's code. */
int cli_list(const struct cli_opts *o)
{
    const char *env = getenv("NETMUTEX_PREFIX");
    const char *prefix = env != NULL && *env != '\0' ? env : CLI_DEFAULT_PREFIX;
    char *match = match_for(prefix, o->pattern != NULL ? o->pattern : "*");

    if (match == NULL) {
        cli_say("%s", strerror(ENOMEM));
        return CLI_EX_OSERR;
    }
    int rc = list_names(o, match, prefix);
    free(match);
    return rc;
}
