/*
 * bench_proxy.c -- the delaying proxy of nm_bench's delayed link ("THE
 * DELAYED LINK" at the top of nm_bench.c): a process that listens on a
 * port of 127.0.0.1 for each server it is given and relays every
 * connection to that server, holding every chunk of bytes back a fixed
 * time in each direction.  Round-trip targets cannot be judged on this
 * machine's loopback, where a script request costs several PINGs; behind
 * the proxy the round trip is long enough to dominate, as on a real link.
 *
 * How a chunk is delayed: whatever one recv() returns is stamped with the
 * monotonic clock and queued on its lane (one lane per direction of a
 * connection); it is sent once the clock reaches stamp + delay.  A lane
 * keeps its order and the delay is the same for all, so the due times on a
 * lane never decrease and only its head needs watching.
 *
 * Precision.  One thread waits in ppoll() until a socket is readable or
 * the next head falls due, with the timer slack set to 1 ns (the default,
 * 50 us, would add up to 50 us to every hop).  On this kind of machine a
 * timed wake-up still comes 50-60 us late (an idle virtual CPU takes that
 * long to wake), so the thread learns how late its wake-ups come and asks
 * for them that much early, sending whatever falls due before it would
 * wake again: on average a chunk leaves when it is due.  There is no busy
 * wait: a spinning proxy took the CPU the server and the clients needed,
 * and slowed down exactly what involves several of them (a hand-off, a
 * quorum).  The proxy runs SCHED_FIFO (priority 1) when the system allows
 * it (nmb_proxy_realtime), so that a loaded machine does not make its wake-ups
 * later still: a link's delay does not depend on the hosts' load.  No
 * Nagle: TCP_NODELAY on every TCP socket.  What is left is in the round
 * trip the bench measures through the proxy (a PING), not assumed.
 *
 * Why a process, not a thread: the bench forks its workers from the main
 * process, and a thread there could hold a lock of the C library (malloc's)
 * at the fork.  The process dies with the bench (PR_SET_PDEATHSIG) and
 * never runs its atexit handlers (_exit), which belong to the bench.
 */
#include "ac_config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>

#include "nm_bench.h"

#define PROXY_MAX_PAIRS 512          /* connections at a time, all servers */
#define PROXY_READ_MAX 65536         /* bytes one recv() may take */

int nmb_proxy_realtime;

typedef struct chunk {
    struct chunk *next;
    int64_t due_ns;                  /* when it may leave */
    size_t len, off;                 /* off: already sent */
    char data[];
} chunk_t;

/* One direction of a connection: what FROM sent, on its way to TO. */
typedef struct {
    int from, to;
    chunk_t *head, *tail;
    int stuck;                       /* TO's buffer is full: wait for POLLOUT */
} lane_t;

/* A client's connection and ours to its server: lane 0 carries the
 * requests, lane 1 the replies. */
typedef struct {
    int client, server;
    lane_t lane[2];
} pair_t;

typedef struct {
    int n;
    int listen_fd[NSERVERS];
    proxy_target_t target[NSERVERS];
    int64_t delay_ns;
    int npairs;
    pair_t pairs[PROXY_MAX_PAIRS];
} relay_t;

static void no_delay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* A connection to T, non-blocking, or -1. */
static int dial_target(const proxy_target_t *t)
{
    int fd;
    if (t->port > 0) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)t->port) };
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
            close(fd);
            return -1;
        }
        if (fd >= 0)
            no_delay(fd);
    } else {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", t->path);
        fd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
            close(fd);
            return -1;
        }
    }
    if (fd >= 0)
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

static void accept_pair(relay_t *r, int i)
{
    int client = accept(r->listen_fd[i], NULL, NULL);
    if (client < 0)
        return;
    int server = r->npairs < PROXY_MAX_PAIRS ? dial_target(&r->target[i]) : -1;
    if (server < 0) {
        close(client);               /* the client sees the server refuse */
        return;
    }
    no_delay(client);
    fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK);
    pair_t *p = &r->pairs[r->npairs++];
    memset(p, 0, sizeof *p);
    p->client = client;
    p->server = server;
    p->lane[0].from = p->lane[1].to = client;
    p->lane[0].to = p->lane[1].from = server;
}

static void drop_pair(relay_t *r, int i)
{
    pair_t *p = &r->pairs[i];
    for (int l = 0; l < 2; l++)
        while (p->lane[l].head) {
            chunk_t *c = p->lane[l].head;
            p->lane[l].head = c->next;
            free(c);
        }
    close(p->client);
    close(p->server);
    *p = r->pairs[--r->npairs];
}

/* Sends what is due on L at NOW.  0, or -1 when the connection broke. */
static int flush_lane(lane_t *l, int64_t now)
{
    l->stuck = 0;
    while (l->head && l->head->due_ns <= now) {
        chunk_t *c = l->head;
        ssize_t n = send(l->to, c->data + c->off, c->len - c->off, MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            l->stuck = 1;
            return 0;
        }
        if (n <= 0)
            return -1;
        c->off += (size_t)n;
        if (c->off < c->len)
            continue;
        l->head = c->next;
        if (!l->head)
            l->tail = NULL;
        free(c);
    }
    return 0;
}

/* Reads one chunk from L's source and queues it, stamped now.  0, or -1
 * when the source closed or failed. */
static int fill_lane(lane_t *l, int64_t delay_ns)
{
    static char buf[PROXY_READ_MAX];
    ssize_t n = recv(l->from, buf, sizeof buf, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return 0;
    if (n <= 0)
        return -1;
    chunk_t *c = malloc(sizeof *c + (size_t)n);
    if (!c)
        return -1;
    c->due_ns = nmb_now_ns() + delay_ns;
    c->len = (size_t)n;
    c->off = 0;
    c->next = NULL;
    memcpy(c->data, buf, (size_t)n);
    if (l->tail)
        l->tail->next = c;
    else
        l->head = c;
    l->tail = c;
    return 0;
}

/* Sends everything due by SEND_BY, drops broken pairs, and returns when
 * the next head falls due (INT64_MAX: nothing queued). */
static int64_t flush_all(relay_t *r, int64_t send_by)
{
    int64_t next = INT64_MAX;
    for (int i = r->npairs - 1; i >= 0; i--) {
        pair_t *p = &r->pairs[i];
        if (flush_lane(&p->lane[0], send_by) != 0 || flush_lane(&p->lane[1], send_by) != 0) {
            drop_pair(r, i);
            continue;
        }
        for (int l = 0; l < 2; l++)
            if (p->lane[l].head && !p->lane[l].stuck && p->lane[l].head->due_ns < next)
                next = p->lane[l].head->due_ns;
    }
    return next;
}

/* What one pass waits for: the listeners, then two sockets per pair. */
static int fill_pollfds(const relay_t *r, struct pollfd *fds)
{
    int n = 0;
    for (int i = 0; i < r->n; i++)
        fds[n++] = (struct pollfd){ .fd = r->listen_fd[i], .events = POLLIN };
    for (int i = 0; i < r->npairs; i++) {
        const pair_t *p = &r->pairs[i];
        /* A lane stuck on its destination waits for it to drain. */
        fds[n++] = (struct pollfd){ .fd = p->client,
                                    .events = POLLIN | (p->lane[1].stuck ? POLLOUT : 0) };
        fds[n++] = (struct pollfd){ .fd = p->server,
                                    .events = POLLIN | (p->lane[0].stuck ? POLLOUT : 0) };
    }
    return n;
}

/* How late timed wake-ups come, on average (an exponential average of
 * the last ones), so that the thread can ask for them that much early and
 * send what falls due before it wakes again: chunks leave on time on
 * average, without a busy wait.  Never more than half the delay, so no
 * chunk leaves before half its delay has passed. */
static void learn_lateness(const relay_t *r, int64_t *early_ns, int64_t late_ns)
{
    *early_ns += (late_ns - *early_ns) / 8;
    *early_ns = *early_ns < 0 ? 0 : *early_ns > r->delay_ns / 2 ? r->delay_ns / 2 : *early_ns;
}

static void relay_loop(relay_t *r)
{
    static struct pollfd fds[NSERVERS + 2 * PROXY_MAX_PAIRS];
    int64_t early_ns = 0;
    for (;;) {
        int64_t next = flush_all(r, nmb_now_ns() + early_ns), asked = 0;
        int nfds = fill_pollfds(r, fds);
        struct timespec ts = { 0, 0 }, *tsp = NULL;
        if (next != INT64_MAX) {
            int64_t now = nmb_now_ns(), wait = next - now - early_ns;
            if (wait > 0) {
                ts.tv_sec = (time_t)(wait / 1000000000);
                ts.tv_nsec = (long)(wait % 1000000000);
                asked = now + wait;
            }
            tsp = &ts;
        }
        int ready = ppoll(fds, (nfds_t)nfds, tsp, NULL);
        if (ready == 0 && asked)
            learn_lateness(r, &early_ns, nmb_now_ns() - asked);
        if (ready <= 0)
            continue;                /* something fell due */
        /* Pairs from the last, so that drop_pair's move is harmless. */
        for (int i = r->npairs - 1; i >= 0; i--) {
            short from_client = fds[r->n + 2 * i].revents;
            short from_server = fds[r->n + 2 * i + 1].revents;
            pair_t *p = &r->pairs[i];
            if (((from_client & (POLLIN | POLLHUP | POLLERR)) &&
                 fill_lane(&p->lane[0], r->delay_ns) != 0) ||
                ((from_server & (POLLIN | POLLHUP | POLLERR)) &&
                 fill_lane(&p->lane[1], r->delay_ns) != 0))
                drop_pair(r, i);
        }
        for (int i = 0; i < r->n; i++)
            if (fds[i].revents & POLLIN)
                accept_pair(r, i);
    }
}

/* A listening socket on a free port of 127.0.0.1, or -1. */
static int listen_loopback(int *port)
{
    struct sockaddr_in sa = { .sin_family = AF_INET };
    socklen_t len = sizeof sa;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 128) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    *port = ntohs(sa.sin_port);
    return fd;
}

static void close_listeners(relay_t *r)
{
    for (int i = 0; i < r->n; i++)
        close(r->listen_fd[i]);
}

/* The listeners are made before the fork, so the ports are known and
 * connections queue in their backlog while the process starts. */
pid_t nmb_proxy_start(const proxy_target_t *targets, int n, long delay_us, int *ports)
{
    static relay_t r;                /* large: not on the stack */
    struct sched_param rt = { .sched_priority = 1 };
    pid_t parent = getpid();
    memset(&r, 0, sizeof r);
    r.delay_ns = (int64_t)delay_us * 1000;
    for (r.n = 0; r.n < n; r.n++) {
        r.target[r.n] = targets[r.n];
        if ((r.listen_fd[r.n] = listen_loopback(&ports[r.n])) < 0) {
            nmb_complain("delaying proxy: a port of 127.0.0.1: %s", strerror(errno));
            close_listeners(&r);
            return -1;
        }
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        prctl(PR_SET_TIMERSLACK, 1UL);
        relay_loop(&r);
        _exit(0);
    }
    if (pid < 0)
        nmb_complain("delaying proxy: fork: %s", strerror(errno));
    else
        nmb_proxy_realtime = sched_setscheduler(pid, SCHED_FIFO, &rt) == 0;
    close_listeners(&r);
    return pid;
}

void nmb_proxy_stop(pid_t pid)
{
    if (pid <= 0)
        return;
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
}
