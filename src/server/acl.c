/* acl.c -- the ACL rule of a netmutex user (acl.h). */
#include "nm.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "acl.h"
#include "config.h"

/* Every command the library sends, by purpose, in the narrowest form ACL
 * SETUSER takes (a subcommand where only one is used).  AUTH and HELLO
 * need no permission; nothing is sent to a sentinel with this user (the
 * sentinels' own is in netmutex_acl_rule(3)). */
static const char *const commands[] = {
    /* every connection: the eviction and cluster checks (a script's
     * too, on a plain server where CLUSTER KEYSLOT is refused: lib.lua),
     * the URL's database, and the nudge that ends a blocked call on our
     * clock */
    "+ping", "+info", "+select",
    /* the scripts (script.c), then what they run (src/lua/) */
    "+evalsha", "+script|load",
    "+get", "+set", "+del", "+pexpire", "+pttl", "+time",
    "+rpush", "+lpop", "+lrem", "+llen",
    "+hget", "+hset", "+hdel", "+hlen", "+lrange", "+hexists",
    "+publish", "+spublish", "+cluster|keyslot",
    /* ... and what a read-write lock's queue and shares need besides */
    "+zadd", "+zscore", "+zrem", "+zrange", "+zremrangebyscore", "+zcard",
    /* the wait-for graph's counter, and a read-write lock's waiting
     * holders (waitfor.c) */
    "+incr", "+sadd", "+srem", "+smembers",
    /* a queued waiter's grant (lease.c) */
    "+blpop",
    /* wake-on-release and lease caching (wake.c) */
    "+subscribe", "+unsubscribe", "+ssubscribe", "+sunsubscribe",
    /* replica acknowledgement, sentinel mode's master check, listing */
    "+wait", "+role", "+scan",
    /* Redis Cluster: the slot map and migrations */
    "+cluster|slots", "+asking",
};

typedef struct out {
    char *buf;
    size_t size, len; /* len counts what did not fit too */
} out_t;

static void put(out_t *o, const char *s, size_t n)
{
    if (o->len + n < o->size)
        memcpy(o->buf + o->len, s, n);
    o->len += n;
}

static int plain_byte(unsigned char c)
{
    return c > ' ' && c < 0x7f && c != '"' && c != '\'';
}

/* WORD (N bytes), quoted when a reader would split or unquote it. */
static void put_word(out_t *o, const char *word, size_t n)
{
    size_t i = 0;
    while (i < n && plain_byte((unsigned char)word[i]))
        i++;
    if (o->len > 0)
        put(o, " ", 1);
    if (i == n) {
        put(o, word, n);
        return;
    }
    put(o, "\"", 1);
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)word[i];
        char esc[5];
        if (c == '\\' || c == '"') {
            esc[0] = '\\';
            esc[1] = (char)c;
            put(o, esc, 2);
        } else if (c >= ' ' && c < 0x7f) {
            put(o, (const char *)&c, 1);
        } else {
            snprintf(esc, sizeof esc, "\\x%02x", c);
            put(o, esc, 4);
        }
    }
    put(o, "\"", 1);
}

/* SIGIL, PREFIX with its glob characters quoted, then '*'.  Redis refuses
 * a pattern with white space in it (isspace): such a byte is matched by
 * '?', which makes the pattern a little wider than the prefix. */
static void put_pattern(out_t *o, char sigil, const char *prefix)
{
    char word[2 * NM_PREFIX_MAX + 3], *w = word;
    *w++ = sigil;
    for (const char *p = prefix; *p && w < word + sizeof word - 2; p++) {
        if (strchr(" \t\n\v\f\r", *p)) {
            *w++ = '?';
            continue;
        }
        if (strchr("*?[]\\", *p))
            *w++ = '\\';
        *w++ = *p;
    }
    *w++ = '*';
    put_word(o, word, (size_t)(w - word));
}

int nm_acl_rule(const char *prefix, char *buf, size_t size)
{
    out_t o = { buf, size, 0 };
    put_word(&o, "resetkeys", 9);
    put_pattern(&o, '~', prefix);
    put_word(&o, "resetchannels", 13);
    put_pattern(&o, '&', prefix);
    put_word(&o, "-@all", 5);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        put_word(&o, commands[i], strlen(commands[i]));
    if (o.len >= size) {
        if (size > 0)
            buf[0] = '\0';
        return ERANGE;
    }
    buf[o.len] = '\0';
    return 0;
}
