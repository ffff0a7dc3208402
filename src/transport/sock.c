/* sock.c -- opening a stream socket to a server by a deadline. */
#include "nm.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "clock.h"
#include "sock.h"

/* Waits for a non-blocking connect on FD to end, by UNTIL: 0 or an errno. */
static int connect_wait(int fd, int64_t until)
{
    for (;;) {
        int64_t left = nm_remaining_ms(until);
        if (left == 0)
            return ETIMEDOUT;
        struct pollfd p = { fd, POLLOUT, 0 };
        int n = poll(&p, 1, (int)NM_MIN(left, 60000));
        if (n < 0 && errno != EINTR)
            return errno;
        if (n > 0) {
            int err = 0;
            socklen_t len = sizeof err;
            if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
                return errno;
            return err;
        }
    }
}

/* One attempt at ADDR: the socket, or -1 with *ERR set.  The socket is
 * born close-on-exec: a fork() by another thread of the caller while we
 * dial cannot hand it to a child's exec(). */
static int try_connect(int family, const struct sockaddr *addr, socklen_t len, int64_t until,
                       int *err)
{
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        *err = errno;
        return -1;
    }
    *err = connect(fd, addr, len) == 0 ? 0
         : errno == EINPROGRESS || errno == EAGAIN ? connect_wait(fd, until) : errno;
    if (*err) {
        close(fd);
        return -1;
    }
    return fd;
}

/* In hiredis's words, which the CLI and its manual quote. */
static void describe(int err, char *cause, size_t size)
{
    snprintf(cause, size, "%s", strerror(err));
}

static int open_unix(const char *path, int64_t until, char *cause, size_t size)
{
    struct sockaddr_un sun = { .sun_family = AF_UNIX };
    int err;
    if (strlen(path) >= sizeof sun.sun_path) {
        snprintf(cause, size, "unix socket path too long");
        return -1;
    }
    memcpy(sun.sun_path, path, strlen(path) + 1);
    int fd = try_connect(AF_UNIX, (const struct sockaddr *)&sun, sizeof sun, until, &err);
    if (fd < 0)
        describe(err, cause, size);
    return fd;
}

static int open_tcp(const char *host, int port, int64_t until, char *cause, size_t size)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
    struct addrinfo *list;
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    int rc = getaddrinfo(host, service, &hints, &list);
    if (rc != 0) {
        snprintf(cause, size, "%s", gai_strerror(rc));
        return -1;
    }
    int fd = -1, err = ECONNREFUSED;
    for (struct addrinfo *a = list; a && fd < 0 && nm_remaining_ms(until) > 0; a = a->ai_next)
        fd = try_connect(a->ai_family, a->ai_addr, a->ai_addrlen, until, &err);
    freeaddrinfo(list);
    if (fd < 0) {
        describe(err, cause, size);
        return -1;
    }
    int one = 1; /* requests are small and each waits for its answer */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

int nm_sock_open(const char *host, int port, const char *path, int64_t until, char *cause,
                 size_t size)
{
    return host ? open_tcp(host, port, until, cause, size)
                : open_unix(path, until, cause, size);
}
