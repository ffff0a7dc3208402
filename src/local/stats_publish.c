/*
 * stats_publish.c -- the publishing job of the background thread
 * (stats_publish.h).
 *
 * While the mode is NETMUTEX_STATS_PUBLISH the job writes the text of
 * stats.c to the process's key every NM_STATS_PUBLISH_MS, with an expiry
 * of NM_STATS_PUBLISH_TTL_MS: a process that dies without a word is gone
 * from the readers within that.  The mode is read at every pass; when it
 * is no longer PUBLISH, or the thread follows a new configuration or
 * ends (netmutex_shutdown, exit), the key is deleted under the
 * configuration it was written with.  A failure is logged once, until a
 * write succeeds again.  Each request is bounded by the I/O timeout and
 * by a publishing period, so it never delays the renewals long.
 */
#include "nm.h"

#include <stdlib.h>

#include "clock.h"
#include "log.h"
#include "settings.h"
#include "stats.h"
#include "stats_board.h"
#include "stats_publish.h"
#include "watchdog.h"

/* The thread's alone (watchdog.h): the bound configuration, whether the
 * key was written under it, when the next write is due, whether the last
 * one failed. */
static nm_config_t *bound_cfg;
static int published;
static int64_t next_at;
static int failing;

static int64_t deadline_of(int64_t now)
{
    return now + NM_MIN((int64_t)bound_cfg->io_timeout_ms, NM_STATS_PUBLISH_MS);
}

static void unpublish(void)
{
    if (published && bound_cfg)
        nm_stats_board_remove(bound_cfg, deadline_of(nm_now_ms()));
    published = 0;
}

static void publish_bind(nm_config_t *cfg)
{
    unpublish();
    bound_cfg = cfg;
    next_at = 0;
}

static int64_t publish_run(int64_t bound)
{
    (void)bound;
    if (__atomic_load_n(&nm_stats_mode, __ATOMIC_RELAXED) != NETMUTEX_STATS_PUBLISH) {
        unpublish();
        return NM_FOREVER;
    }
    int64_t now = nm_now_ms();
    if (!bound_cfg)
        return NM_FOREVER;
    if (now < next_at)
        return next_at;
    char *text;
    size_t len;
    int err = nm_stats_encode(&text, &len);
    if (!err) {
        err = nm_stats_board_put(bound_cfg, text, len, NM_STATS_PUBLISH_TTL_MS,
                                 deadline_of(now));
        free(text);
    }
    if (err && !failing)
        netmutex_log(NETMUTEX_LOG_WARN, "cannot publish this process's statistics: %s",
                     netmutex_strerror(err));
    failing = err != 0;
    published = published || !err;
    next_at = now + NM_STATS_PUBLISH_MS;
    return next_at;
}

static const nm_job_t publish_job = {
    .bind = publish_bind,
    .run = publish_run,
};

void nm_stats_publish_after_fork_child(void)
{
    /* The parent's key and configuration are the parent's. */
    bound_cfg = NULL;
    published = 0;
    next_at = 0;
    failing = 0;
}

void nm_stats_publish_register(void)
{
    nm_watchdog_add_job(&publish_job);
}
