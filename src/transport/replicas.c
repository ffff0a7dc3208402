/* replicas.c -- WAIT after a grant (see replicas.h). */
#include "nm.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "conn.h"
#include "log.h"
#include "replicas.h"
#include "reply.h"
#include "url.h"

/* A caller with a deadline gets this much past WAIT's own timeout for the
 * reply to arrive; one without, the I/O timeout.  WAIT is a blocking
 * command: the server would answer its timeout at its next `hz` tick, so
 * it is nudged for (nm_call_blocking, reply.h). */
#define REPLY_SLACK_MS 50

/* Says when acknowledgements start and stop falling short: once each, not
 * at every attempt of a lock() that keeps trying. */
static void report(const nm_config_t *cfg, long long got)
{
    static int short_of; /* atomic */
    int now_short = got < (long long)cfg->min_replicas;
    char where[NM_URL_MAX];
    if (__atomic_exchange_n(&short_of, now_short, __ATOMIC_RELAXED) == now_short)
        return;
    nm_url_describe(&cfg->servers[0], where, sizeof where);
    if (now_short)
        netmutex_log(NETMUTEX_LOG_WARN, "%s: only %lld of %u replicas acknowledged a lock "
                     "within %u ms (NETMUTEX_MIN_REPLICAS); locks are given back until "
                     "enough replicas do", where, got, cfg->min_replicas,
                     cfg->replica_timeout_ms);
    else
        netmutex_log(NETMUTEX_LOG_INFO, "%s: %u replicas acknowledge locks again", where,
                     cfg->min_replicas);
}

int nm_replicas_confirm(nm_config_t *cfg, int64_t deadline)
{
    if (cfg->min_replicas == 0)
        return 0;
    /* The connection that granted: WAIT counts the writes of its own
     * connection, and a fresh one would have none to wait for. */
    redisContext *c = nm_conn_peek(cfg, 0);
    if (!c)
        return NM_ECONN;
    int64_t ms = NM_MAX(NM_MIN((int64_t)cfg->replica_timeout_ms, nm_remaining_ms(deadline)), 1);
    int64_t slack = deadline == NM_FOREVER ? cfg->io_timeout_ms
                                           : NM_MIN(cfg->io_timeout_ms, REPLY_SLACK_MS);
    char n[16], timeout[24];
    snprintf(n, sizeof n, "%u", cfg->min_replicas);
    int64_t until = nm_now_ms() + ms;
    /* never 0: forever */
    snprintf(timeout, sizeof timeout, "%lld", (long long)NM_MAX(ms - NM_BLOCK_EARLY_MS, 1));
    const char *argv[3] = { "WAIT", n, timeout };
    redisReply *r;
    long long got = 0;

    int err = nm_call_blocking(c, 3, argv, NULL, until, until + slack, &r);
    if (err == NM_ECONN)
        nm_conn_drop(0);
    if (err)
        return err;
    err = nm_reply_integer(r, &got);
    freeReplyObject(r);
    if (err)
        return err;
    report(cfg, got);
    return got >= (long long)cfg->min_replicas ? 0 : NM_ECONN;
}
