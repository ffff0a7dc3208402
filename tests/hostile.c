/* hostile.c -- the misbehaving server of hostile.h. */
#include "ac_config.h"

#include "hostile.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_CONNS 16
#define DRIP_MS 500
#define FLOOD_CHUNK 65536

struct NmHostile {
    NmHostileMode mode;
    char *dir, *path;
    int listener;
    int wake[2];        /* a byte here ends the thread */
    pthread_t thread;
    unsigned int scripts; /* atomic */
};

typedef struct conn {
    int fd;
    GString *in;
    gint64 next_drip;   /* DRIP: when the next byte goes, 0: none due */
    bool flooding;
} conn_t;

static void send_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n <= 0)
            return; /* a full or closed socket: the client's problem */
        buf += n;
        len -= (size_t)n;
    }
}

/* The first word of the first complete command in IN ("*N\r\n$L\r\nword"),
 * upper-cased, and the command is consumed; NULL if none is complete. */
static char *take_command(GString *in)
{
    const char *p = in->str, *end = in->str + in->len;
    char *first = NULL;
    long n = 0;

    if (in->len < 4 || p[0] != '*' || !memchr(p, '\n', in->len))
        return NULL;
    n = strtol(p + 1, NULL, 10);
    p = memchr(p, '\n', (size_t)(end - p)) + 1;
    for (long i = 0; i < n; i++) {
        const char *nl = p < end ? memchr(p, '\n', (size_t)(end - p)) : NULL;
        if (!nl || *p != '$')
            goto incomplete;
        long len = strtol(p + 1, NULL, 10);
        p = nl + 1;
        if (end - p < len + 2)
            goto incomplete;
        if (i == 0)
            first = g_ascii_strup(p, len);
        p += len + 2;
    }
    g_string_erase(in, 0, p - in->str);
    return first;
incomplete:
    g_free(first);
    return NULL;
}

static const char wrong_sha[] = "$40\r\n0123456789012345678901234567890123456789\r\n";
static const char info[] = "$52\r\n# Memory\r\nmaxmemory:0\r\nmaxmemory_policy:noeviction\r\n\r\n";

static const char tryagain[] = "-TRYAGAIN Multiple keys request during rehashing of slot\r\n";
static const char moved[] = "-MOVED 3999 127.0.0.1:1\r\n";

static void answer_script(NmHostile *h, conn_t *c, const char *cmd)
{
    g_atomic_int_inc(&h->scripts);
    switch (h->mode) {
    case NM_HOSTILE_WRONG_SHA:
        if (strcmp(cmd, "SCRIPT") == 0)
            send_all(c->fd, wrong_sha, sizeof wrong_sha - 1);
        else
            send_all(c->fd, "-NOSCRIPT No matching script.\r\n", 31);
        break;
    case NM_HOSTILE_DRIP:
        send_all(c->fd, "$1000\r\n", 7);
        c->next_drip = g_get_monotonic_time() / 1000 + DRIP_MS;
        break;
    case NM_HOSTILE_SILENT:
        break;
    case NM_HOSTILE_FLOOD:
        send_all(c->fd, "$999999999999\r\n", 16);
        c->flooding = true;
        break;
    case NM_HOSTILE_TRYAGAIN:
        send_all(c->fd, tryagain, sizeof tryagain - 1);
        break;
    case NM_HOSTILE_MOVED:
        send_all(c->fd, moved, sizeof moved - 1);
        break;
    case NM_HOSTILE_SLOW_LOAD:
        if (strcmp(cmd, "SCRIPT") != 0)
            send_all(c->fd, "-NOSCRIPT No matching script.\r\n", 31);
        break;
    }
}

static void answer(NmHostile *h, conn_t *c, const char *cmd)
{
    if (strcmp(cmd, "EVALSHA") == 0 || strcmp(cmd, "SCRIPT") == 0 || strcmp(cmd, "EVAL") == 0)
        answer_script(h, c, cmd);
    else if (strcmp(cmd, "INFO") == 0)
        send_all(c->fd, info, sizeof info - 1);
    else if (strcmp(cmd, "PING") == 0)
        send_all(c->fd, "+PONG\r\n", 7);
    else
        send_all(c->fd, "+OK\r\n", 5);
}

static bool serve_input(NmHostile *h, conn_t *c)
{
    char buf[4096];
    ssize_t n = recv(c->fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
        return false;
    if (n > 0)
        g_string_append_len(c->in, buf, n);
    for (char *cmd; (cmd = take_command(c->in)) != NULL; g_free(cmd))
        answer(h, c, cmd);
    return true;
}

static void serve_output(conn_t *c)
{
    static char chunk[FLOOD_CHUNK];
    gint64 now = g_get_monotonic_time() / 1000;
    if (c->next_drip && now >= c->next_drip) {
        send_all(c->fd, "x", 1);
        c->next_drip = now + DRIP_MS;
    }
    if (c->flooding) {
        memset(chunk, 'x', sizeof chunk);
        send_all(c->fd, chunk, sizeof chunk);
    }
}

static void conn_close(conn_t *c)
{
    close(c->fd);
    g_string_free(c->in, TRUE);
    memset(c, 0, sizeof *c);
    c->fd = -1;
}

static void *hostile_main(void *arg)
{
    NmHostile *h = arg;
    conn_t conns[MAX_CONNS];
    for (int i = 0; i < MAX_CONNS; i++)
        conns[i] = (conn_t){ .fd = -1 };
    for (;;) {
        struct pollfd fds[2 + MAX_CONNS] = { { h->wake[0], POLLIN, 0 }, { h->listener, POLLIN, 0 } };
        for (int i = 0; i < MAX_CONNS; i++)
            fds[2 + i] = (struct pollfd){ conns[i].fd, POLLIN, 0 };
        poll(fds, 2 + MAX_CONNS, 20);
        if (fds[0].revents)
            break;
        if (fds[1].revents) {
            int fd = accept(h->listener, NULL, NULL);
            for (int i = 0; fd >= 0 && i < MAX_CONNS; i++)
                if (conns[i].fd < 0) {
                    conns[i] = (conn_t){ .fd = fd, .in = g_string_new(NULL) };
                    fd = -1;
                }
            if (fd >= 0)
                close(fd);
        }
        for (int i = 0; i < MAX_CONNS; i++) {
            if (conns[i].fd < 0)
                continue;
            if (fds[2 + i].revents && !serve_input(h, &conns[i]))
                conn_close(&conns[i]);
            else
                serve_output(&conns[i]);
        }
    }
    for (int i = 0; i < MAX_CONNS; i++)
        if (conns[i].fd >= 0)
            conn_close(&conns[i]);
    return NULL;
}

NmHostile *nm_hostile_start(NmHostileMode mode)
{
    NmHostile *h = g_new0(NmHostile, 1);
    struct sockaddr_un addr = { .sun_family = AF_UNIX };

    h->mode = mode;
    h->dir = g_dir_make_tmp("netmutex-hostile-XXXXXX", NULL);
    g_assert_nonnull(h->dir);
    h->path = g_build_filename(h->dir, "hostile.sock", NULL);
    g_assert_cmpuint(strlen(h->path), <, sizeof addr.sun_path);
    strcpy(addr.sun_path, h->path);
    h->listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    g_assert_cmpint(h->listener, >=, 0);
    g_assert_cmpint(bind(h->listener, (struct sockaddr *)&addr, sizeof addr), ==, 0);
    g_assert_cmpint(listen(h->listener, 16), ==, 0);
    g_assert_cmpint(pipe(h->wake), ==, 0);
    g_assert_cmpint(pthread_create(&h->thread, NULL, hostile_main, h), ==, 0);
    return h;
}

char *nm_hostile_url(NmHostile *h)
{
    return g_strdup_printf("unix://%s", h->path);
}

unsigned int nm_hostile_scripts(NmHostile *h)
{
    return (unsigned int)g_atomic_int_get(&h->scripts);
}

void nm_hostile_free(NmHostile *h)
{
    g_assert_cmpint(write(h->wake[1], "x", 1), ==, 1);
    pthread_join(h->thread, NULL);
    close(h->wake[0]);
    close(h->wake[1]);
    close(h->listener);
    unlink(h->path);
    rmdir(h->dir);
    g_free(h->path);
    g_free(h->dir);
    g_free(h);
}
