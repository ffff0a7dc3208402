/* fake_server.c -- the scripted Redis of fake_server.h. */
#include "ac_config.h"

#include "fake_server.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#define MAX_CONNS 16

typedef struct conn {
    int fd;
    int upstream;      /* record mode: its own connection on, -1: none */
    char *in;
    size_t len, cap;
} conn_t;

struct nm_fake {
    char dir[64], path[80], url[96];
    int listener;
    int wake[2];
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* Under mu. */
    uint8_t *script;
    size_t script_len, pos;
    int reset, stop;
    char *upstream;
    FILE *record;
    /* The thread's alone. */
    conn_t conns[MAX_CONNS];
    size_t nconns;
};

static void send_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n <= 0)
            return; /* a closed socket: the client's problem */
        p += n;
        len -= (size_t)n;
    }
}

/* The length of the first complete command in C's input ("*N\r\n$L\r\n
 * ...", as a client sends), 0 while it is incomplete, -1 if it is none. */
static long command_len(const conn_t *c)
{
    const char *p = c->in, *end = c->in + c->len, *nl;
    if (c->len == 0)
        return 0;
    if (*p != '*')
        return -1;
    if (!(nl = memchr(p, '\n', c->len)))
        return 0;
    long n = strtol(p + 1, NULL, 10);
    p = nl + 1;
    for (long i = 0; i < n; i++) {
        if (p >= end || !(nl = memchr(p, '\n', (size_t)(end - p))))
            return 0;
        if (*p != '$')
            return -1;
        long len = strtol(p + 1, NULL, 10);
        p = nl + 1;
        if (len < 0 || end - p < len + 2)
            return len < 0 ? -1 : 0;
        p += len + 2;
    }
    return (long)(p - c->in);
}

static const char spent[] = "-ERR the fuzz script is spent\r\n";

/* Under mu: the script's next reply into [*OUT, *OUT + *LEN), or the
 * error that answers everything once it is spent. */
static void next_reply(nm_fake_t *f, const uint8_t **out, size_t *len)
{
    if (f->pos >= f->script_len) {
        *out = (const uint8_t *)spent;
        *len = strlen(spent);
        return;
    }
    const uint8_t *p = f->script + f->pos, *end = f->script + f->script_len;
    const uint8_t *sep = memmem(p, (size_t)(end - p), NM_FAKE_SEP, strlen(NM_FAKE_SEP));
    *out = p;
    *len = sep ? (size_t)(sep - p) : (size_t)(end - p);
    f->pos += *len + (sep ? strlen(NM_FAKE_SEP) : 0);
}

static int dial_unix(const char *path)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Record mode: CMD (LEN bytes) to the real server, its one reply back to
 * C and into the record. */
static int forward(nm_fake_t *f, conn_t *c, const char *cmd, size_t len)
{
    redisReader *r = redisReaderCreate();
    char buf[16384], *raw = NULL;
    size_t raw_len = 0;
    void *reply = NULL;
    int ok = 0;
    if (c->upstream < 0)
        c->upstream = dial_unix(f->upstream);
    if (!r || c->upstream < 0)
        goto out;
    send_all(c->upstream, cmd, len);
    while (!reply) {
        ssize_t n = recv(c->upstream, buf, sizeof buf, 0);
        char *grown = n > 0 ? realloc(raw, raw_len + (size_t)n) : NULL;
        if (!grown || redisReaderFeed(r, buf, (size_t)n) != REDIS_OK ||
            redisReaderGetReply(r, &reply) != REDIS_OK)
            goto out;
        raw = grown;
        memcpy(raw + raw_len, buf, (size_t)n);
        raw_len += (size_t)n;
    }
    send_all(c->fd, raw, raw_len);
    fwrite(raw, 1, raw_len, f->record);
    fputs(NM_FAKE_SEP, f->record);
    fflush(f->record);
    ok = 1;
out:
    if (reply)
        freeReplyObject(reply);
    if (r)
        redisReaderFree(r);
    free(raw);
    return ok;
}

static void drop(nm_fake_t *f, size_t i)
{
    close(f->conns[i].fd);
    if (f->conns[i].upstream >= 0)
        close(f->conns[i].upstream);
    free(f->conns[i].in);
    f->conns[i] = f->conns[--f->nconns];
}

/* Answers every complete command of connection I; 0 when it is closed. */
static int serve(nm_fake_t *f, size_t i)
{
    conn_t *c = &f->conns[i];
    long n;
    while ((n = command_len(c)) > 0) {
        const uint8_t *reply;
        size_t len;
        int ok;
        pthread_mutex_lock(&f->mu);
        if (f->record) {
            ok = forward(f, c, c->in, (size_t)n);
        } else {
            next_reply(f, &reply, &len);
            send_all(c->fd, reply, len);
            ok = 1;
        }
        pthread_mutex_unlock(&f->mu);
        if (!ok)
            break;
        memmove(c->in, c->in + n, c->len - (size_t)n);
        c->len -= (size_t)n;
    }
    if (n != 0) {
        drop(f, i);
        return 0;
    }
    return 1;
}

static void take_input(nm_fake_t *f, size_t i)
{
    conn_t *c = &f->conns[i];
    if (c->cap - c->len < 4096) {
        char *grown = realloc(c->in, c->cap + 8192);
        if (!grown) {
            drop(f, i);
            return;
        }
        c->in = grown;
        c->cap += 8192;
    }
    ssize_t n = recv(c->fd, c->in + c->len, c->cap - c->len, 0);
    if (n <= 0) {
        drop(f, i);
        return;
    }
    c->len += (size_t)n;
    serve(f, i);
}

static void take_conn(nm_fake_t *f)
{
    int fd = accept4(f->listener, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    if (f->nconns == MAX_CONNS) {
        close(fd);
        return;
    }
    f->conns[f->nconns++] = (conn_t){ .fd = fd, .upstream = -1 };
}

/* A reset asked for: every connection closed, then the asker told. */
static int after_wake(nm_fake_t *f)
{
    char b[64];
    int stop;
    while (read(f->wake[0], b, sizeof b) > 0)
        ;
    pthread_mutex_lock(&f->mu);
    if (f->reset) {
        while (f->nconns)
            drop(f, f->nconns - 1);
        f->reset = 0;
        pthread_cond_broadcast(&f->cv);
    }
    stop = f->stop;
    pthread_mutex_unlock(&f->mu);
    return !stop;
}

static void *loop(void *arg)
{
    nm_fake_t *f = arg;
    struct pollfd pf[MAX_CONNS + 2];
    for (;;) {
        size_t n = f->nconns;
        pf[0] = (struct pollfd){ .fd = f->wake[0], .events = POLLIN };
        pf[1] = (struct pollfd){ .fd = f->listener, .events = POLLIN };
        for (size_t i = 0; i < n; i++)
            pf[i + 2] = (struct pollfd){ .fd = f->conns[i].fd, .events = POLLIN };
        if (poll(pf, n + 2, -1) < 0 && errno != EINTR)
            break;
        if ((pf[0].revents & POLLIN) && !after_wake(f))
            break;
        if (pf[0].revents)
            continue; /* the connections may be gone */
        for (size_t i = n; i-- > 0;)
            if (pf[i + 2].revents)
                take_input(f, i);
        if (pf[1].revents & POLLIN)
            take_conn(f);
    }
    while (f->nconns)
        drop(f, f->nconns - 1);
    return NULL;
}

nm_fake_t *nm_fake_start(void)
{
    nm_fake_t *f = calloc(1, sizeof *f);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    const char *tmp = getenv("TMPDIR");
    if (!f)
        return NULL;
    snprintf(f->dir, sizeof f->dir, "%s/nmfuzz.XXXXXX",
             tmp && *tmp && strlen(tmp) < 40 ? tmp : "/tmp");
    if (!mkdtemp(f->dir)) {
        free(f);
        return NULL;
    }
    snprintf(f->path, sizeof f->path, "%s/fake.sock", f->dir);
    snprintf(f->url, sizeof f->url, "unix://%s", f->path);
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", f->path);
    f->listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (f->listener < 0 || bind(f->listener, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(f->listener, 64) != 0 || pipe2(f->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        int err = errno;
        if (f->listener >= 0)
            close(f->listener);
        unlink(f->path);
        rmdir(f->dir);
        free(f);
        errno = err;
        return NULL;
    }
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    if (pthread_create(&f->thread, NULL, loop, f) != 0) {
        close(f->listener);
        close(f->wake[0]);
        close(f->wake[1]);
        unlink(f->path);
        rmdir(f->dir);
        free(f);
        errno = EAGAIN;
        return NULL;
    }
    return f;
}

const char *nm_fake_url(const nm_fake_t *f) { return f->url; }

static void wake(nm_fake_t *f)
{
    ssize_t n = write(f->wake[1], "x", 1);
    (void)n;
}

void nm_fake_play(nm_fake_t *f, const uint8_t *script, size_t len)
{
    uint8_t *copy = len ? malloc(len) : NULL;
    if (copy)
        memcpy(copy, script, len);
    pthread_mutex_lock(&f->mu);
    free(f->script);
    f->script = copy;
    f->script_len = copy ? len : 0;
    f->pos = 0;
    f->reset = 1;
    wake(f);
    while (f->reset)
        pthread_cond_wait(&f->cv, &f->mu);
    pthread_mutex_unlock(&f->mu);
}

void nm_fake_record(nm_fake_t *f, const char *upstream, FILE *out)
{
    pthread_mutex_lock(&f->mu);
    free(f->upstream);
    f->upstream = strdup(upstream);
    f->record = f->upstream ? out : NULL;
    pthread_mutex_unlock(&f->mu);
}

void nm_fake_stop(nm_fake_t *f)
{
    pthread_mutex_lock(&f->mu);
    f->stop = 1;
    wake(f);
    pthread_mutex_unlock(&f->mu);
    pthread_join(f->thread, NULL);
    close(f->listener);
    close(f->wake[0]);
    close(f->wake[1]);
    unlink(f->path);
    rmdir(f->dir);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    free(f->script);
    free(f->upstream);
    free(f);
}
