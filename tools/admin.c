/*
 * admin.c -- `netmutex status` and `netmutex break`: the commands that look
 * at or free a lock without taking it, and the printing of one lock's
 * state that `list` shares; `netmutex acl`, what an administrator gives a
 * Redis user of the locks.  Their exit codes answer the script's question
 * (held? broken?) so nobody has to parse the output.
 *
 * Names and holders may hold any byte: they are printed only through
 * escape.c.
 */
#include "ac_config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <netmutex.h>

#include "cli.h"

/* "held", "idle" or "free".  The servers keep nothing of a released name,
 * so a free name and one nobody ever locked look the same.  "idle": held
 * by a process that keeps it cached, none of whose threads is in it. */
static const char *state_text(const netmutex_status_t *st)
{
    return !st->held ? "free" : st->idle ? "idle" : "held";
}

void cli_format_time(int64_t since_ms, char *buf, size_t len)
{
    time_t secs = (time_t)(since_ms / 1000);
    struct tm tm;
    char date[32], zone[8];

    if (since_ms <= 0 || localtime_r(&secs, &tm) == NULL) {
        snprintf(buf, len, "-");
        return;
    }
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
    strftime(zone, sizeof zone, "%z", &tm);
    snprintf(buf, len, "%s.%03d%s", date, (int)(since_ms % 1000), zone);
}

const char *cli_kind_name(enum cli_kind kind)
{
    return kind == CLI_KIND_RWLOCK ? "rwlock" : kind == CLI_KIND_SEM ? "sem" : "mutex";
}

int cli_lock_held(const struct cli_lock *l)
{
    return l->kind == CLI_KIND_MUTEX ? l->st.held : l->sh.writer || l->sh.shares > 0;
}

/* A read-write lock's or a semaphore's object. */
static void print_shared_json(const struct cli_lock *l)
{
    const netmutex_shared_status_t *sh = &l->sh;
    char since[64];

    fputs("{\"name\":", stdout);
    cli_put_json(stdout, l->name);
    printf(",\"kind\":\"%s\",\"held\":%s", cli_kind_name(l->kind),
           cli_lock_held(l) ? "true" : "false");
    if (l->kind == CLI_KIND_SEM) {
        printf(",\"permits_held\":%u,\"permits\":%u,\"waiters\":%u}", sh->shares,
               sh->permits, sh->waiters);
        return;
    }
    cli_format_time(sh->since_ms, since, sizeof since);
    printf(",\"readers\":%u,\"writer\":%s,\"holder\":", sh->shares,
           sh->writer ? "true" : "false");
    cli_put_json(stdout, sh->holder);
    printf(",\"since_ms\":%" PRId64 ",\"since\":", sh->since_ms);
    cli_put_json(stdout, since);
    printf(",\"fence\":%" PRIu64 ",\"ttl_ms\":%" PRId64 ",\"waiters\":%u,"
           "\"writers_waiting\":%u,\"readers_waiting\":%u}",
           sh->fence, sh->ttl_ms, sh->writers_waiting + sh->waiters, sh->writers_waiting,
           sh->waiters);
}

void cli_print_json(const struct cli_lock *l, int kind_field, const struct cli_waits *ws)
{
    const netmutex_status_t *st = &l->st;
    char since[64];

    if (l->kind != CLI_KIND_MUTEX) {
        print_shared_json(l);
        return;
    }
    cli_format_time(st->since_ms, since, sizeof since);
    fputs("{\"name\":", stdout);
    cli_put_json(stdout, l->name);
    printf(",\"held\":%s,\"holder\":", st->held ? "true" : "false");
    cli_put_json(stdout, st->holder);
    printf(",\"since_ms\":%" PRId64 ",\"since\":", st->since_ms);
    cli_put_json(stdout, since);
    printf(",\"fence\":%" PRIu64 ",\"ttl_ms\":%" PRId64 ",\"waiters\":%u,\"cached\":%s,"
           "\"idle\":%s,\"unrecoverable\":%s%s",
           st->fence, st->ttl_ms, st->waiters, st->cached ? "true" : "false",
           st->idle ? "true" : "false", st->unrecoverable ? "true" : "false",
           kind_field ? ",\"kind\":\"mutex\"" : "");
    if (ws != NULL)
        cli_put_waited_for_json(ws, l->name);
    putchar('}');
}

static void print_text(const struct cli_lock *l)
{
    const netmutex_status_t *st = &l->st;
    char text[CLI_TEXT_MAX], since[64];

    cli_format_time(st->since_ms, since, sizeof since);
    printf("name:          %s\n", cli_text(l->name, text, sizeof text));
    printf("state:         %s\n", state_text(st));
    printf("holder:        %s\n", st->held ? cli_text(st->holder, text, sizeof text) : "-");
    printf("since:         %s (%" PRId64 " ms)\n", since, st->since_ms);
    printf("fence:         %" PRIu64 "\n", st->fence);
    printf("ttl:           %" PRId64 " ms\n", st->ttl_ms);
    printf("waiters:       %u\n", st->waiters);
    /* The server cannot tell an idle cached lease from a held one. */
    printf("cached:        %s\n", !st->cached ? "no"
                                    : st->idle ? "yes, idle (its process gives it back when "
                                                 "another process asks)"
                                               : "yes (its process gives it back when another "
                                                 "process asks)");
    printf("unrecoverable: %s\n", st->unrecoverable ? "yes" : "no");
    /* Who waits for it, when deadlock detection published the waits. */
    cli_print_waiting_for(l->name);
}

/* A read-write lock's or a semaphore's lines. */
static void print_shared_text(const struct cli_lock *l)
{
    const netmutex_shared_status_t *sh = &l->sh;
    char text[CLI_TEXT_MAX], since[64];

    printf("name:          %s\n", cli_text(l->name, text, sizeof text));
    printf("kind:          %s\n", cli_kind_name(l->kind));
    if (l->kind == CLI_KIND_SEM) {
        printf("state:         %s\n", sh->shares > 0 ? "held" : "free");
        /* The server keeps the number of permits only while one is held. */
        if (sh->permits > 0)
            printf("permits:       %u/%u held\n", sh->shares, sh->permits);
        else
            printf("permits:       %u/- held\n", sh->shares);
        printf("waiters:       %u\n", sh->waiters);
        return;
    }
    cli_format_time(sh->since_ms, since, sizeof since);
    printf("state:         %s\n", sh->writer ? "write-locked" : sh->shares > 0 ? "read-locked"
                                                                                : "free");
    printf("readers:       %u\n", sh->shares);
    printf("writer:        %s\n", sh->writer ? cli_text(sh->holder, text, sizeof text) : "-");
    printf("since:         %s (%" PRId64 " ms)\n", since, sh->since_ms);
    printf("fence:         %" PRIu64 "\n", sh->fence);
    printf("ttl:           %" PRId64 " ms\n", sh->ttl_ms);
    printf("waiters:       %u (writers %u, readers %u)\n", sh->writers_waiting + sh->waiters,
           sh->writers_waiting, sh->waiters);
}

/* 0 held, 1 free, else the error's exit code. */
int cli_status(const struct cli_opts *o)
{
    struct cli_lock l = { .name = (char *)o->name, .kind = o->kind };
    int err = o->kind == CLI_KIND_RWLOCK ? netmutex_rwlock_status(o->name, &l.sh)
              : o->kind == CLI_KIND_SEM  ? netmutex_sem_status(o->name, &l.sh)
                                         : netmutex_status(o->name, &l.st);

    if (err != 0) {
        cli_say("status of %s%s at %s: %s",
                o->kind == CLI_KIND_RWLOCK ? "rwlock " : o->kind == CLI_KIND_SEM ? "sem " : "",
                o->shown_name, o->shown_url, netmutex_strerror(err));
        return cli_exit_code(err);
    }
    if (o->json) {
        cli_print_json(&l, 0, NULL);
        putchar('\n');
    } else if (o->kind != CLI_KIND_MUTEX) {
        print_shared_text(&l);
    } else {
        print_text(&l);
    }
    if (fflush(stdout) != 0)
        return CLI_EX_OSERR;
    return cli_lock_held(&l) ? 0 : 1;
}

/* Why there was nothing to break, with where we looked: a free name is
 * often a typo, or the wrong server or prefix. */
static void say_nothing_to_break(const struct cli_opts *o)
{
    cli_say("break %s: nothing to break: it is free at %s", o->shown_name, o->shown_url);
}

/* 0 broken, 1 there was nothing to break, else the error's exit code. */
int cli_break(const struct cli_opts *o)
{
    int err;

    /* A hold of either is a share of a set or the write lock, each a lease
     * its holder renews: nothing the library frees by name (yet). */
    if (o->kind != CLI_KIND_MUTEX) {
        cli_say("break %s: breaking a %s is not supported: its holds end with their "
                "leases", o->shown_name, o->kind == CLI_KIND_RWLOCK ? "read-write lock"
                                                                     : "semaphore");
        return CLI_EX_USAGE;
    }
    err = netmutex_break(o->name);

    if (err == ENOENT) {
        say_nothing_to_break(o);
        return 1;
    }
    if (err != 0) {
        cli_say("break %s at %s: %s", o->shown_name, o->shown_url, netmutex_strerror(err));
        return cli_exit_code(err);
    }
    if (o->verbose)
        cli_say("%s: broken", o->shown_name);
    return 0;
}

/* The library's rule after the user's name, "on" and password, which the
 * administrator fills in: one line to paste into redis-cli. */
int cli_acl(const struct cli_opts *o)
{
    char rule[NETMUTEX_ACL_RULE_MAX];
    int err = netmutex_acl_rule(o->prefix, rule, sizeof rule);

    if (err == EINVAL) {
        if (o->prefix) {
            cli_say("bad PREFIX: at most 256 bytes, without { or }");
            return CLI_EX_USAGE;
        }
        cli_say("bad NETMUTEX_PREFIX: at most 256 bytes, without { or }");
    } else if (err) {
        cli_say("acl: %s", netmutex_strerror(err));
    } else {
        printf("ACL SETUSER <user> on ><password> %s\n", rule);
    }
    return cli_exit_code(err);
}
