/*
 * admin.c -- `netmutex status` and `netmutex break`: the commands that look
 * at or free a lock without taking it.  Their exit codes answer the
 * script's question (held? broken?) so nobody has to parse the output.
 */
#include "ac_config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <netmutex.h>

#include "cli.h"

/* SINCE_MS (Unix ms) as local ISO 8601 with milliseconds and offset. */
static void format_time(int64_t since_ms, char *buf, size_t len)
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

/* A JSON string.  Names may hold any byte but NUL: quotes, backslashes and
 * control bytes are escaped; other bytes pass as they are. */
static void put_json_string(const char *s)
{
    putchar('"');
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static void print_json(const char *name, const netmutex_status_t *st, const char *since)
{
    fputs("{\"name\":", stdout);
    put_json_string(name);
    printf(",\"held\":%s,\"holder\":", st->held ? "true" : "false");
    put_json_string(st->holder);
    printf(",\"since_ms\":%" PRId64 ",\"since\":", st->since_ms);
    put_json_string(since);
    printf(",\"fence\":%" PRIu64 ",\"ttl_ms\":%" PRId64 ",\"waiters\":%u,"
           "\"unrecoverable\":%s}\n",
           st->fence, st->ttl_ms, st->waiters, st->unrecoverable ? "true" : "false");
}

static void print_text(const char *name, const netmutex_status_t *st, const char *since)
{
    printf("name:          %s\n", name);
    printf("held:          %s\n", st->held ? "yes" : "no");
    printf("holder:        %s\n", st->held ? st->holder : "-");
    printf("since:         %s (%" PRId64 " ms)\n", since, st->since_ms);
    printf("fence:         %" PRIu64 "\n", st->fence);
    printf("ttl:           %" PRId64 " ms\n", st->ttl_ms);
    printf("waiters:       %u\n", st->waiters);
    printf("unrecoverable: %s\n", st->unrecoverable ? "yes" : "no");
}

/* 0 held, 1 free, else the error's exit code. */
int cli_status(const struct cli_opts *o)
{
    netmutex_status_t st;
    char since[64];
    int err = netmutex_status(o->name, &st);

    if (err != 0) {
        cli_say("status of %s: %s", o->name, cli_strerror(err));
        return cli_exit_code(err);
    }
    format_time(st.since_ms, since, sizeof since);
    if (o->json)
        print_json(o->name, &st, since);
    else
        print_text(o->name, &st, since);
    if (fflush(stdout) != 0)
        return CLI_EX_OSERR;
    return st.held ? 0 : 1;
}

/* 0 broken, 1 there was nothing to break, else the error's exit code. */
int cli_break(const struct cli_opts *o)
{
    int err = netmutex_break(o->name);

    if (err == ENOENT) {
        if (o->verbose)
            cli_say("%s: nothing to break", o->name);
        return 1;
    }
    if (err != 0) {
        cli_say("break %s: %s", o->name, cli_strerror(err));
        return cli_exit_code(err);
    }
    if (o->verbose)
        cli_say("%s: broken", o->name);
    return 0;
}
