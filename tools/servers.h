/*
 * servers.h -- talking to the Redis servers directly, for `netmutex list`:
 * the library has no call that enumerates locks, so the tool finds the
 * lock keys itself (list.c) and asks the library about each one.
 */
#ifndef NETMUTEX_CLI_SERVERS_H
#define NETMUTEX_CLI_SERVERS_H

#include <stddef.h>

#include <hiredis/hiredis.h>

/* One server of the URL list, as the library reads it (netmutex_configure(3)). */
struct cli_server {
    char *host;        /* redis://: the host, IPv6 without brackets */
    int port;
    char *path;        /* unix://: the socket */
    char *user;        /* NULL: no ACL user */
    char *password;    /* NULL: no AUTH */
    int db;
    char *shown;       /* the URL with its password masked, for messages */
    /* redis-sentinel://: the sentinels to ask where MASTER is (host, port
     * and the query's credentials); host and port above are unset. */
    struct cli_server *sentinels;
    size_t nsentinels;
    char *master;
};

#define CLI_CLUSTER_SCHEME "redis-cluster://"

/* The servers of the comma-separated URLS, which netmutex_configure has
 * accepted, in *SERVERS (*N of them); 0 or ENOMEM.  A redis-cluster:// URL
 * gives its seeds, each with the URL's credentials (see cluster.h). */
int cli_servers_parse(const char *urls, struct cli_server **servers, size_t *n);
void cli_servers_free(struct cli_server *servers, size_t n);

/* A connection to S (for redis-sentinel://, to the master the first
 * sentinel that answers names, if ROLE agrees), with AUTH and SELECT done
 * and the I/O timeout set;
 * NULL with an errno in *ERR (EAGAIN: unreachable, EACCES: refused,
 * ENOMEM) and the cause in WHY. */
redisContext *cli_server_dial(const struct cli_server *s, int *err, char *why, size_t len);

/* The errno for an error reply, as the library would return it: EACCES
 * for a refusal (credentials, database, ACL), EPROTO for anything else. */
int cli_reply_errno(const redisReply *r);

#endif /* NETMUTEX_CLI_SERVERS_H */
