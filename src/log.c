/* log.c -- one line to stderr per event a person must know about. */
#include "nm.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "log.h"

static int level = -1; /* read once from NETMUTEX_LOG */
static pthread_once_t level_once = PTHREAD_ONCE_INIT;

static void read_level(void)
{
    static const char *const names[] = { "off", "error", "warn", "info", "debug" };
    const char *s = getenv("NETMUTEX_LOG");
    level = NM_LOG_WARN;
    for (int i = 0; s && i <= NM_LOG_DEBUG; i++)
        if (strcasecmp(s, names[i]) == 0)
            level = i;
}

int nm_log_enabled(enum nm_log_level lv)
{
    pthread_once(&level_once, read_level);
    return lv != NM_LOG_OFF && (int)lv <= level;
}

void nm_log(enum nm_log_level lv, const char *fmt, ...)
{
    static const char *const tags[] = { "", "error", "warning", "info", "debug" };
    char msg[1024];
    va_list ap;

    if (!nm_log_enabled(lv))
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* One write per line, so lines of several threads do not interleave. */
    fprintf(stderr, "netmutex: %s: %s\n", tags[lv], msg);
}

void nm_server_describe(const nm_server_t *srv, char *buf, size_t size)
{
    const char *user = srv->user ? srv->user : "";
    const char *auth = srv->password ? ":***@" : srv->user ? "@" : "";
    if (srv->is_unix)
        snprintf(buf, size, "unix://%s%s%s", user, auth, srv->path);
    else if (strchr(srv->host, ':'))
        snprintf(buf, size, "redis://%s%s[%s]:%d", user, auth, srv->host, srv->port);
    else
        snprintf(buf, size, "redis://%s%s%s:%d", user, auth, srv->host, srv->port);
}
