/*
 * log.c -- one line per event a person must know about (the texts of the
 * errno values the API returns are in errors.c).
 *
 * The sink (stderr or the application's function) and the level are read
 * under a lock and the line is written outside it, so a slow logger never
 * holds up another thread's message.
 */
#include "nm.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "log.h"

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static int level = -1;          /* log_lock; -1: not read from NETMUTEX_LOG yet */
static netmutex_log_fn sink;    /* log_lock; NULL: stderr */
static void *sink_arg;

static const char *const level_names[] = { "off", "error", "warn", "info", "debug" };

static int env_level(void)
{
    const char *s = getenv("NETMUTEX_LOG");
    for (int i = NETMUTEX_LOG_OFF; s && i <= NETMUTEX_LOG_DEBUG; i++)
        if (strcasecmp(s, level_names[i]) == 0)
            return i;
    return NETMUTEX_LOG_WARN;
}

/* The level in force, and (if OUT_FN) the sink, consistently. */
static int current(netmutex_log_fn *out_fn, void **out_arg)
{
    pthread_mutex_lock(&log_lock);
    if (level < 0)
        level = env_level();
    int lv = level;
    if (out_fn) {
        *out_fn = sink;
        *out_arg = sink_arg;
    }
    pthread_mutex_unlock(&log_lock);
    return lv;
}

int nm_log_enabled(int lv)
{
    return lv > NETMUTEX_LOG_OFF && lv <= current(NULL, NULL);
}

int netmutex_set_log(int lv, netmutex_log_fn fn, void *arg)
{
    if (lv < NETMUTEX_LOG_OFF || lv > NETMUTEX_LOG_DEBUG)
        return EINVAL;
    pthread_mutex_lock(&log_lock);
    level = lv;
    sink = fn;
    sink_arg = arg;
    pthread_mutex_unlock(&log_lock);
    return 0;
}

void netmutex_log(int lv, const char *fmt, ...)
{
    static const char *const tags[] = { "", "error", "warning", "info", "debug" };
    netmutex_log_fn fn;
    void *arg;
    char msg[1024];
    va_list ap;

    if (!fmt || lv <= NETMUTEX_LOG_OFF || lv > current(&fn, &arg))
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (fn)
        fn(lv, msg, arg);
    else /* one call per line, so lines of several threads do not mix */
        fprintf(stderr, "netmutex: %s: %s\n", tags[lv], msg);
}
