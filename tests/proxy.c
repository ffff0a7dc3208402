/*
 * proxy.c -- see proxy.h.  One thread, one poll loop, blocking writes (the
 * traffic is a few small commands, and the library always reads its
 * replies, so a write cannot block for long).
 */
#include "ac_config.h"

#include "proxy.h"

#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_PAIRS 64
#define PATTERN_MAX 63

typedef struct Pair {
    int client;
    int server;
    bool muted;
    gint64 relay_at; /* nothing relayed before (nmt_now_ms) */
    size_t tail_len;            /* the end of the requests so far, */
    char tail[PATTERN_MAX - 1]; /* for a pattern split across reads */
} Pair;

struct NmProxy {
    char *sock_path;  /* the server's unix socket, or */
    int server_port;  /* its port on 127.0.0.1 (nm_proxy_start_tcp) */
    int listen_fd;
    int port;
    int wake[2]; /* writing to wake[1] stops the thread */
    pthread_t thread;
    Pair pairs[MAX_PAIRS];
    int npairs; /* proxy thread only */
    pthread_mutex_t lock; /* guards the fields below */
    bool armed;
    unsigned int muted;
    bool blackhole;
    unsigned int delay_ms; /* nm_proxy_delay_new */
    char pattern[PATTERN_MAX + 1]; /* nm_proxy_mute_reply_to's, "" if none */
    char cut[PATTERN_MAX + 1];     /* nm_proxy_cut_request's, "" if none */
    unsigned int cuts;
};

/* Bytes written to wake[1]: REFRESH makes the thread look at the blackhole
 * flag again, anything else stops it. */
#define WAKE_REFRESH 'r'

static int listen_loopback(int *port)
{
    struct sockaddr_in sa = { .sin_family = AF_INET };
    socklen_t len = sizeof sa;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    g_assert_cmpint(fd, >=, 0);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    g_assert_cmpint(bind(fd, (struct sockaddr *)&sa, sizeof sa), ==, 0);
    g_assert_cmpint(listen(fd, 16), ==, 0);
    g_assert_cmpint(getsockname(fd, (struct sockaddr *)&sa, &len), ==, 0);
    *port = ntohs(sa.sin_port);
    return fd;
}

static int connect_unix(const char *path)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);

    g_strlcpy(sa.sun_path, path, sizeof sa.sun_path);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static int connect_loopback(int port)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static bool send_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
        if (n <= 0)
            return false;
        buf += n;
        len -= (size_t)n;
    }
    return true;
}

static void accept_pair(NmProxy *p)
{
    int client = accept(p->listen_fd, NULL, NULL);
    int server;

    if (client < 0)
        return;
    server = p->sock_path ? connect_unix(p->sock_path) : connect_loopback(p->server_port);
    if (server < 0 || p->npairs == MAX_PAIRS) {
        close(client);
        if (server >= 0)
            close(server);
        return;
    }
    pthread_mutex_lock(&p->lock);
    gint64 relay_at = nmt_now_ms() + p->delay_ms;
    pthread_mutex_unlock(&p->lock);
    p->pairs[p->npairs++] = (Pair){ .client = client, .server = server, .relay_at = relay_at };
}

static void drop_pair(NmProxy *p, int i)
{
    close(p->pairs[i].client);
    close(p->pairs[i].server);
    p->pairs[i] = p->pairs[--p->npairs];
}

/* Decides whether bytes from this pair's server are passed on. */
static bool should_drop_reply(NmProxy *p, Pair *pair)
{
    pthread_mutex_lock(&p->lock);
    if (!pair->muted && p->armed) {
        p->armed = false;
        pair->muted = true;
        p->muted++;
    }
    pthread_mutex_unlock(&p->lock);
    return pair->muted;
}

/* A request from PAIR's client (BUF, N bytes) that holds the pattern
 * mutes the pair before it is passed on; one that holds the cut pattern
 * ends the pair instead, unrelayed: false. */
static bool match_request(NmProxy *p, Pair *pair, const char *buf, size_t n)
{
    bool cut = false;
    char seen[sizeof pair->tail + 16384];
    size_t len = pair->tail_len + n, plen, keep;

    memcpy(seen, pair->tail, pair->tail_len);
    memcpy(seen + pair->tail_len, buf, n);
    pthread_mutex_lock(&p->lock);
    plen = strlen(p->pattern);
    if (plen > 0 && !pair->muted && memmem(seen, len, p->pattern, plen)) {
        p->pattern[0] = '\0';
        pair->muted = true;
        p->muted++;
    }
    plen = strlen(p->cut);
    if (plen > 0 && memmem(seen, len, p->cut, plen)) {
        p->cut[0] = '\0';
        p->cuts++;
        cut = true;
    }
    pthread_mutex_unlock(&p->lock);
    keep = MIN(len, sizeof pair->tail);
    memcpy(pair->tail, seen + len - keep, keep);
    pair->tail_len = keep;
    return !cut;
}

/* Relays what is readable on one side; false when the pair is finished. */
static bool relay(NmProxy *p, Pair *pair, bool from_server)
{
    char buf[16384];
    int src = from_server ? pair->server : pair->client;
    int dst = from_server ? pair->client : pair->server;
    ssize_t n = recv(src, buf, sizeof buf, 0);

    if (n <= 0)
        return false;
    if (from_server && should_drop_reply(p, pair))
        return true;
    if (!from_server && !match_request(p, pair, buf, (size_t)n))
        return false;
    return send_all(dst, buf, (size_t)n);
}

static bool in_blackhole(NmProxy *p)
{
    bool on;

    pthread_mutex_lock(&p->lock);
    on = p->blackhole;
    pthread_mutex_unlock(&p->lock);
    return on;
}

/* True when the thread was told to stop (and not merely to refresh). */
static bool told_to_stop(NmProxy *p)
{
    char c = 0;

    return read(p->wake[0], &c, 1) != 1 || c != WAKE_REFRESH;
}

static void *proxy_main(void *arg)
{
    NmProxy *p = arg;

    for (;;) {
        struct pollfd fds[2 + 2 * MAX_PAIRS];
        int n = 0;

        fds[n++] = (struct pollfd){ .fd = p->wake[0], .events = POLLIN };
        /* In a blackhole only the wake pipe is watched: the sockets stay
         * open and unread, both ways. */
        if (in_blackhole(p)) {
            if (poll(fds, 1, -1) > 0 && told_to_stop(p))
                break;
            continue;
        }
        fds[n++] = (struct pollfd){ .fd = p->listen_fd, .events = POLLIN };
        /* A pair still held (nm_proxy_delay_new) is not watched: what is
         * sent meanwhile waits in the kernel's buffers. */
        gint64 now = nmt_now_ms(), wake_at = G_MAXINT64;
        for (int i = 0; i < p->npairs; i++) {
            bool held = p->pairs[i].relay_at > now;
            if (held)
                wake_at = MIN(wake_at, p->pairs[i].relay_at);
            fds[n++] = (struct pollfd){ .fd = held ? -1 : p->pairs[i].client, .events = POLLIN };
            fds[n++] = (struct pollfd){ .fd = held ? -1 : p->pairs[i].server, .events = POLLIN };
        }
        if (poll(fds, (nfds_t)n, wake_at == G_MAXINT64 ? -1 : (int)(wake_at - now)) < 0)
            continue;
        if (fds[0].revents) {
            if (told_to_stop(p))
                break;
            continue; /* the blackhole flag changed: poll again */
        }
        /* Pairs first: accept_pair and drop_pair reorder the array. */
        for (int i = p->npairs - 1; i >= 0; i--) {
            short from_client = fds[2 + 2 * i].revents;
            short from_server = fds[3 + 2 * i].revents;
            bool alive = true;

            if (from_client)
                alive = relay(p, &p->pairs[i], false);
            if (alive && from_server)
                alive = relay(p, &p->pairs[i], true);
            if (!alive)
                drop_pair(p, i);
        }
        if (fds[1].revents)
            accept_pair(p);
    }
    while (p->npairs > 0)
        drop_pair(p, 0);
    return NULL;
}

static NmProxy *proxy_start(const char *sock_path, int server_port)
{
    NmProxy *p = g_new0(NmProxy, 1);

    p->sock_path = g_strdup(sock_path);
    p->server_port = server_port;
    p->listen_fd = listen_loopback(&p->port);
    g_assert_cmpint(pipe(p->wake), ==, 0);
    pthread_mutex_init(&p->lock, NULL);
    g_assert_cmpint(pthread_create(&p->thread, NULL, proxy_main, p), ==, 0);
    return p;
}

NmProxy *nm_proxy_start(NmRedis *r)
{
    return proxy_start(nm_redis_socket(r), 0);
}

NmProxy *nm_proxy_start_tcp(NmRedis *r)
{
    g_assert_cmpint(nm_redis_port(r), >, 0);
    return proxy_start(NULL, nm_redis_port(r));
}

int nm_proxy_port(NmProxy *p)
{
    return p->port;
}

void nm_proxy_delay_new(NmProxy *p, unsigned int ms)
{
    pthread_mutex_lock(&p->lock);
    p->delay_ms = ms;
    pthread_mutex_unlock(&p->lock);
}

char *nm_proxy_url(NmProxy *p)
{
    return g_strdup_printf("redis://127.0.0.1:%d", p->port);
}

void nm_proxy_mute_next_reply(NmProxy *p)
{
    pthread_mutex_lock(&p->lock);
    p->armed = true;
    pthread_mutex_unlock(&p->lock);
}

void nm_proxy_mute_reply_to(NmProxy *p, const char *pattern)
{
    g_assert_cmpuint(strlen(pattern), <=, PATTERN_MAX);
    pthread_mutex_lock(&p->lock);
    g_strlcpy(p->pattern, pattern, sizeof p->pattern);
    pthread_mutex_unlock(&p->lock);
}

void nm_proxy_cut_request(NmProxy *p, const char *pattern)
{
    g_assert_cmpuint(strlen(pattern), <=, PATTERN_MAX);
    pthread_mutex_lock(&p->lock);
    g_strlcpy(p->cut, pattern, sizeof p->cut);
    pthread_mutex_unlock(&p->lock);
}

unsigned int nm_proxy_cuts(NmProxy *p)
{
    unsigned int n;

    pthread_mutex_lock(&p->lock);
    n = p->cuts;
    pthread_mutex_unlock(&p->lock);
    return n;
}

unsigned int nm_proxy_muted(NmProxy *p)
{
    unsigned int n;

    pthread_mutex_lock(&p->lock);
    n = p->muted;
    pthread_mutex_unlock(&p->lock);
    return n;
}

void nm_proxy_blackhole(NmProxy *p, bool on)
{
    char c = WAKE_REFRESH;

    pthread_mutex_lock(&p->lock);
    p->blackhole = on;
    pthread_mutex_unlock(&p->lock);
    g_assert_cmpint(write(p->wake[1], &c, 1), ==, 1);
}

void nm_proxy_free(NmProxy *p)
{
    char c = 'x';

    g_assert_cmpint(write(p->wake[1], &c, 1), ==, 1);
    pthread_join(p->thread, NULL);
    close(p->wake[0]);
    close(p->wake[1]);
    close(p->listen_fd);
    pthread_mutex_destroy(&p->lock);
    g_free(p->sock_path);
    g_free(p);
}
