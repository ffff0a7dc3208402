/*
 * chaos_proxy.c -- see chaos_proxy.h.  Orders are single bytes on a pipe:
 * 'b' blackhole on, 'r' relay again (blackhole off); 'q', EOF or anything
 * else stops the proxy.  The host answers each order with one byte, and first
 * sends the proxy's URL in a fixed-size buffer.
 */
#include "ac_config.h"

#include "chaos_proxy.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "proxy.h"

#define URL_SIZE 64

struct ChaosProxy {
    pid_t pid;
    int orders;  /* to the host */
    int answers; /* from the host */
    char url[URL_SIZE];
};

typedef struct Host {
    NmRedis *redis;
    int fds[4]; /* orders in, orders out, answers in, answers out */
} Host;

static bool full_io(int fd, void *buf, size_t len, bool writing)
{
    size_t done = 0;

    while (done < len) {
        ssize_t n = writing ? write(fd, (char *)buf + done, len - done)
                            : read(fd, (char *)buf + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        done += (size_t)n;
    }
    return true;
}

/* The host process: the proxy thread, and this loop taking orders. */
static int host_main(void *arg)
{
    Host *h = arg;
    char url[URL_SIZE] = "", *u, order;
    NmProxy *p;

    close(h->fds[1]);
    close(h->fds[2]);
    p = nm_proxy_start(h->redis);
    u = nm_proxy_url(p);
    g_strlcpy(url, u, sizeof url);
    g_free(u);
    if (!full_io(h->fds[3], url, sizeof url, true))
        return 1;
    while (full_io(h->fds[0], &order, 1, false) && (order == 'b' || order == 'r')) {
        nm_proxy_blackhole(p, order == 'b');
        if (!full_io(h->fds[3], &order, 1, true))
            break;
    }
    nm_proxy_free(p);
    return 0;
}

ChaosProxy *chaos_proxy_start(NmRedis *r)
{
    ChaosProxy *p = g_new0(ChaosProxy, 1);
    Host h = { .redis = r };

    g_assert_cmpint(pipe(h.fds), ==, 0);
    g_assert_cmpint(pipe(h.fds + 2), ==, 0);
    p->pid = nm_fork_run_unchecked(host_main, &h);
    close(h.fds[0]);
    close(h.fds[3]);
    p->orders = h.fds[1];
    p->answers = h.fds[2];
    if (!full_io(p->answers, p->url, sizeof p->url, false))
        g_error("chaos: the proxy's host process did not start");
    return p;
}

char *chaos_proxy_url(ChaosProxy *p)
{
    return g_strdup(p->url);
}

void chaos_proxy_blackhole(ChaosProxy *p, bool on)
{
    char order = on ? 'b' : 'r';

    if (!full_io(p->orders, &order, 1, true) || !full_io(p->answers, &order, 1, false))
        g_error("chaos: the proxy's host process is gone");
}

void chaos_proxy_free(ChaosProxy *p)
{
    char order = 'q';

    full_io(p->orders, &order, 1, true);
    close(p->orders);
    close(p->answers);
    nm_child_wait_ok(p->pid, nm_ms(30000));
    g_free(p);
}
