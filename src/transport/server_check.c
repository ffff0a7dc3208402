/* server_check.c -- the eviction-policy check of every new connection. */
#include "nm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "reply.h"
#include "server_check.h"
#include "url.h"

/* The value of FIELD ("maxmemory") in INFO text, copied to OUT. */
static int info_field(const char *info, const char *field, char *out, size_t size)
{
    size_t n = strlen(field);
    for (const char *line = info; line && *line; line = strchr(line, '\n')) {
        line += *line == '\n';
        if (strncmp(line, field, n) == 0 && line[n] == ':') {
            size_t len = strcspn(line + n + 1, "\r\n");
            if (len >= size)
                return EPROTO;
            memcpy(out, line + n + 1, len);
            out[len] = '\0';
            return 0;
        }
    }
    return ENOENT;
}

/* The server's words on eviction: 0 and whether it may evict, or ENOENT
 * when it would not say (INFO refused by an ACL or renamed away). */
static int read_policy(redisContext *c, int64_t deadline, char *policy, size_t size,
                       int *evicts)
{
    const char *argv[2] = { "INFO", "memory" };
    const char *text;
    size_t len;
    char maxmemory[32];
    redisReply *r;

    int err = nm_call(c, 2, argv, NULL, deadline, &r);
    if (err == EPROTO || err == EACCES)
        return ENOENT;
    if (err)
        return err;
    err = nm_reply_string(r, &text, &len);
    if (!err)
        err = info_field(text, "maxmemory", maxmemory, sizeof maxmemory);
    if (!err)
        err = info_field(text, "maxmemory_policy", policy, size);
    freeReplyObject(r);
    if (err)
        return ENOENT;
    *evicts = strtoull(maxmemory, NULL, 10) > 0 && strcmp(policy, "noeviction") != 0;
    return 0;
}

/* Says so once per configuration and server, not at every dial. */
static int first_time(const nm_config_t *cfg, const nm_server_t *srv)
{
    static uint64_t said[NETMUTEX_SERVERS_MAX]; /* atomic: a generation */
    /* A cluster node other than the configured server counts as it. */
    size_t i = srv >= cfg->servers && srv < cfg->servers + cfg->nservers
                   ? (size_t)(srv - cfg->servers) : 0;
    return __atomic_exchange_n(&said[i], cfg->generation, __ATOMIC_RELAXED) != cfg->generation;
}

int nm_server_check(redisContext *c, const nm_config_t *cfg, const nm_server_t *srv,
                    int64_t deadline)
{
    char policy[64], where[NM_URL_MAX];
    int evicts = 0;

    if (cfg->allow_eviction)
        return 0;
    int err = read_policy(c, deadline, policy, sizeof policy, &evicts);
    if (err && err != ENOENT)
        return err;
    if (!err && !evicts)
        return 0;
    if (first_time(cfg, srv)) {
        nm_url_describe(srv, where, sizeof where);
        if (err)
            netmutex_log(NETMUTEX_LOG_WARN, "%s: INFO memory refused; cannot check that the server "
                   "never evicts lock keys (see allow_eviction in netmutex_configure(3))",
                   where);
        else
            netmutex_log(NETMUTEX_LOG_ERROR, "%s: refused: maxmemory-policy %s with a maxmemory limit "
                   "can evict a held lock key; use noeviction, or set "
                   "NETMUTEX_ALLOW_EVICTION=1 to accept the risk", where, policy);
    }
    return err ? 0 : ENOTSUP;
}
