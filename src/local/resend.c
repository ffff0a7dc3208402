/*
 * resend.c -- the resend job of the background thread (resend.h): the
 * recent releases, sent again when the sentinels name a new
 * master (journal.h says why).
 *
 * The journal calls journal_noted() after it noted a release, under
 * whatever lock the releasing thread holds: it takes none, and only makes
 * sure the thread does not sleep past the next time it should ask the
 * sentinels (nm_watchdog_nudge_within).
 */
#include "nm.h"

#include "clock.h"
#include "journal.h"
#include "lease.h"
#include "log.h"
#include "resend.h"
#include "sentinel.h"
#include "settings.h"
#include "watchdog.h"

/* The least time a pass of re-sent releases gets (resend_releases). */
#define RESEND_MIN_MS 100

/* The configuration the thread is bound to (watchdog.h), borrowed; the
 * thread's alone.  A forked child's stale copy is never read: its own
 * thread binds anew before it runs the job. */
static nm_config_t *bound_cfg;

/* With a redis-sentinel:// server and releases noted recently, asks the
 * sentinels where the master is (every NM_SENTINEL_RECHECK_MS), and sends
 * again to it the releases noted while they named an older one.  Bounded
 * like the subscriber's dialing, so that a silent sentinel or master cannot
 * delay a lost-lease notice much.  Returns when to look again. */
static int64_t resend_releases(int64_t now, int64_t next_check)
{
    const nm_server_t *srv = &bound_cfg->servers[0];
    if (!srv->sentinel || !nm_journal_pending(bound_cfg->generation, now))
        return NM_FOREVER;
    int64_t deadline = NM_MIN(now + (int64_t)bound_cfg->connect_timeout_ms,
                              NM_MAX(next_check, now + RESEND_MIN_MS));
    uint64_t gen = nm_sentinel_recheck(bound_cfg, srv, deadline);
    nm_journal_entry_t *due;
    size_t n, sent = 0;
    if (gen && nm_journal_due(bound_cfg->generation, gen, now, &due, &n) == 0) {
        for (size_t i = 0; i < n && nm_remaining_ms(deadline) > 0; i++) {
            if (nm_lease_resend(bound_cfg, &due[i], deadline) == 0) {
                nm_journal_sent(due[i].seq, gen);
                sent++;
            }
        }
        /* Said once per pass that sent any: one that sent none (the new
         * master does not answer yet) is tried again in a moment. */
        if (sent)
            netmutex_log(NETMUTEX_LOG_INFO, "a new master: %zu of %zu recent releases sent "
                         "to it again", sent, n);
        nm_journal_free(due, n);
    }
    return nm_now_ms() + NM_SENTINEL_RECHECK_MS;
}

/* journal.h's hook, after a release was noted: the thread asks the
 * sentinels within NM_SENTINEL_RECHECK_MS from now on (resend_releases),
 * so it must not sleep past that.  No lock: a release may run under any of
 * the library's locks.  A thread awake (its sleep_until passed) is woken
 * too: it may have looked at the journal before this note. */
static void journal_noted(void)
{
    nm_watchdog_nudge_within(NM_SENTINEL_RECHECK_MS);
}

static void resend_job_bind(nm_config_t *cfg)
{
    bound_cfg = cfg;
}

/* Bounded like the subscriber's dialing by the jobs before it. */
static int64_t resend_job_run(int64_t bound)
{
    return resend_releases(nm_now_ms(), bound);
}

static const nm_job_t resend_job = {
    .bind = resend_job_bind,
    .run = resend_job_run,
};

void nm_resend_register(void)
{
    nm_journal_set_hook(journal_noted);
    nm_watchdog_add_job(&resend_job);
}
