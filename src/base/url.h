/*
 * url.h -- every URL form the library takes, in one place: parsing,
 * describing a server for a message, and masking passwords.
 *
 * The forms (docs/deployment.md is their user-facing reference):
 *
 *   redis://[[user]:password@]host[:port][/db]
 *   rediss://... the same over TLS (tls.h)
 *   unix://[[user]:password@]/path[?db=N]      (never TLS)
 *   a comma-separated list of 1 to NETMUTEX_SERVERS_MAX of those (quorum)
 *   redis-sentinel://[[user]:password@]host[:port][,host[:port]...][/db]
 *       [?sentinel_user=U&sentinel_password=P&master_tls=yes|no]#MASTERNAME
 *   rediss-sentinel://... the same with TLS to the sentinels; the masters
 *       they name are reached as the sentinels are, unless master_tls says
 *       otherwise
 *   redis-cluster://[[user]:password@]host[:port][,host[:port]...]
 *   rediss-cluster://... the same over TLS (every node: tls-cluster yes)
 *
 * The parser is strict on purpose: a typo should fail loudly at
 * netmutex_configure() with EINVAL and a reason, not become a lock that
 * talks to the wrong server or database.  Credentials are %XX-decoded; a
 * decoded NUL is refused.  A password never appears in a description or a
 * masked URL: it shows as "***".
 *
 * This is the bottom of the house: it knows text and nm_server_t, nothing
 * of connections, sentinels' answers or slot maps.
 */
#ifndef NM_URL_H
#define NM_URL_H

#include <stddef.h>

#define NM_URL_MAX 4096u
#define NM_SENTINEL_SCHEME "redis-sentinel://"
#define NM_SENTINEL_TLS_SCHEME "rediss-sentinel://"
#define NM_CLUSTER_SCHEME "redis-cluster://"
#define NM_CLUSTER_TLS_SCHEME "rediss-cluster://"
#define NM_SENTINEL_PORT 26379
#define NM_SENTINEL_NODES_MAX 16
#define NM_CLUSTER_SEEDS_MAX 16
#define NM_MASTER_NAME_MAX 255

typedef struct nm_server {
    int is_unix;
    char *host;     /* TCP: name or address, without IPv6 brackets */
    int port;       /* TCP only */
    char *path;     /* unix only */
    char *user;     /* NULL: no ACL user (AUTH password) */
    char *password; /* NULL: no AUTH */
    int db;         /* SELECT db when not 0 */
    int tls;        /* rediss: TLS (tls.h) */
    /* The configuration's TLS state when TLS is on (tls_config.c sets it;
     * the parser leaves it NULL). */
    struct nm_tls *tls_state;
    /* redis-sentinel:// only (host is NULL): the sentinels to ask, with
     * the query's credentials, and the master's name. */
    struct nm_server *sentinels;
    size_t nsentinels;
    char *master_name;
    /* What the sentinels said (sentinel.c): set when a configuration is
     * built from the server, freed with it; the parser leaves it NULL. */
    struct nm_sentinel *sentinel;
} nm_server_t;

/* What a URL string names: the configuration's servers and, for a
 * redis-cluster:// URL, every seed (SERVERS then holds the first alone). */
typedef struct nm_urls {
    nm_server_t *servers;
    size_t n;
    nm_server_t *seeds;
    size_t nseeds;
} nm_urls_t;

/* Parses URLS (any form above) into *OUT.  0; EINVAL with WHY (in words,
 * never a password); ENOMEM. */
int nm_url_parse(const char *urls, nm_urls_t *out, char *why, size_t size);

/* Frees what nm_url_parse made (not the sentinel states). */
void nm_urls_free(nm_urls_t *urls);
void nm_servers_free(nm_server_t *servers, size_t n);

/* Whether URLS is of the redis-sentinel:// (or rediss-sentinel://) form. */
int nm_url_is_sentinel(const char *urls);

/* SRV as a URL for messages, its passwords masked. */
void nm_url_describe(const nm_server_t *srv, char *buf, size_t size);

/* URLS as given, every password in it masked, for a message about it. */
void nm_url_mask(const char *urls, char *buf, size_t size);

/* The grammar URLS should have followed, in words, for that message. */
const char *nm_url_grammar(const char *urls);

/* All of [S, S+LEN) as a decimal number in [MIN, MAX]: 0 or EINVAL. */
int nm_parse_uint(const char *s, size_t len, long min, long max, long *out);

#endif /* NM_URL_H */
