/*
 * fixture_log.c -- see fixture.h: the library's messages kept, so that a
 * test can say what the library told people (a refusal in the server's
 * words, say).
 */
#include "ac_config.h"

#include "fixture.h"

#include <pthread.h>
#include <string.h>

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static GString *logged; /* under log_lock */

static void keep(int level, const char *message, void *arg)
{
    (void)level;
    (void)arg;
    pthread_mutex_lock(&log_lock);
    if (logged)
        g_string_append_printf(logged, "%s\n", message);
    pthread_mutex_unlock(&log_lock);
}

void nm_log_capture_start(int level)
{
    pthread_mutex_lock(&log_lock);
    if (logged)
        g_string_free(logged, TRUE);
    logged = g_string_new("");
    pthread_mutex_unlock(&log_lock);
    nm_assert_rc(netmutex_set_log(level, keep, NULL), 0);
}

bool nm_log_captured(const char *what)
{
    pthread_mutex_lock(&log_lock);
    bool has = logged && strstr(logged->str, what) != NULL;
    pthread_mutex_unlock(&log_lock);
    return has;
}

void nm_log_capture_stop(void)
{
    nm_assert_rc(netmutex_set_log(NETMUTEX_LOG_WARN, NULL, NULL), 0);
    pthread_mutex_lock(&log_lock);
    if (logged)
        g_test_message("logged: %s", logged->str);
    g_string_free(logged, TRUE);
    logged = NULL;
    pthread_mutex_unlock(&log_lock);
}
