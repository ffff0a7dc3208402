/*
 * reply.c -- a command's reply by a deadline (reply.h): every wait is a
 * poll() bounded by the call's deadline, every write a send that cannot
 * raise SIGPIPE; a reply owed to another layer is taken by the next read;
 * a blocking command is nudged with PING so that it ends on our clock.
 * Replies are checked by reply_shape.c, the reader bounded by reader.c.
 */
#include "nm.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "clock.h"
#include "reader.h"
#include "reply.h"
#include "tls_io.h"

int nm_io_setup(redisContext *c)
{
    int flags = fcntl(c->fd, F_GETFL);
    if (flags < 0 || fcntl(c->fd, F_SETFL, flags | O_NONBLOCK) < 0)
        return NM_ECONN;
    /* hiredis treats EAGAIN as "try later" only on a context it believes
     * non-blocking; our poll() loops below do the waiting. */
    c->flags &= ~REDIS_BLOCK;
    return 0;
}

/* Whether the calling thread's wait for a blocked command's reply is a
 * cancellation point (nm_reply_cancellable). */
static __thread int cancellable;

void nm_reply_cancellable(int on)
{
    cancellable = on;
}

/* poll(), a cancellation point when CANCEL (see nm_reply_cancellable):
 * cancellation is enabled around it alone, so that a thread is only ever
 * cancelled in the poll itself. */
static int poll_one(struct pollfd *p, int timeout, int cancel)
{
    int old, n;
    if (!cancel)
        return poll(p, 1, timeout);
    pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &old);
    n = poll(p, 1, timeout);
    pthread_setcancelstate(old, NULL);
    return n;
}

/* Waits until C's socket is ready for EVENTS or UNTIL passes: 0,
 * ETIMEDOUT, or NM_ECONN (poll failed).  CANCEL: a cancellation point. */
static int poll_cancel(redisContext *c, short events, int64_t until, int cancel)
{
    for (;;) {
        int64_t left = nm_remaining_ms(until);
        if (left == 0)
            return ETIMEDOUT;
        struct pollfd p = { c->fd, events, 0 };
        int n = poll_one(&p, (int)NM_MIN(left, 60000), cancel);
        if (n > 0)
            return 0;
        if (n < 0 && errno != EINTR)
            return NM_ECONN;
    }
}

static int poll_until(redisContext *c, short events, int64_t until)
{
    return poll_cancel(c, events, until, 0);
}

/* The same by DEADLINE, out of time being NM_ECONN. */
static int wait_ready(redisContext *c, short events, int64_t deadline)
{
    int err = poll_until(c, events, deadline);
    return err == ETIMEDOUT ? NM_ECONN : err;
}

/* Writing to a connection the server closed raises SIGPIPE, whose default
 * action kills the process: a library must never do that to its caller. */
#if HIREDIS_MAJOR == 0
#include <hiredis/sds.h>

/* One write of what C has queued, with send(MSG_NOSIGNAL): a server that
 * closed the connection gives EPIPE, never SIGPIPE, with no signal mask to
 * set and restore around it -- four system calls per request, a tenth of
 * an uncontended cycle's client time.  hiredis 0.x exposes its output
 * buffer as an sds string, so the bytes sent are taken off it as its own
 * write does.  0 (*DONE: nothing left), or NM_ECONN. */
static int write_some(redisContext *c, int *done)
{
    if (nm_tls_on(c->fd))
        return nm_tls_write(c, done);
    size_t len = sdslen(c->obuf);
    ssize_t n = len ? send(c->fd, c->obuf, len, MSG_NOSIGNAL) : 0;
    *done = 0;
    if (n < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : NM_ECONN;
    if ((size_t)n == len) {
        sdsfree(c->obuf);
        c->obuf = sdsempty();
        if (!c->obuf)
            return NM_ECONN;
    } else {
        sdsrange(c->obuf, (ssize_t)n, -1);
    }
    *done = sdslen(c->obuf) == 0;
    return 0;
}
#else
/* hiredis 1.x writes with write(2), and hides its buffer: SIGPIPE is
 * blocked for the duration of the write, and one that our own write raised
 * is consumed before it is unblocked. */
typedef struct sigpipe_guard {
    sigset_t old;
    int was_pending;
} sigpipe_guard_t;

static int sigpipe_pending(void)
{
    sigset_t pending;
    sigpending(&pending);
    return sigismember(&pending, SIGPIPE);
}

static void sigpipe_hold(sigpipe_guard_t *g)
{
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    g->was_pending = sigpipe_pending();
    pthread_sigmask(SIG_BLOCK, &pipe, &g->old);
}

static void sigpipe_release(const sigpipe_guard_t *g)
{
    if (!g->was_pending && sigpipe_pending()) {
        static const struct timespec zero = { 0, 0 };
        sigset_t pipe;
        sigemptyset(&pipe);
        sigaddset(&pipe, SIGPIPE);
        while (sigtimedwait(&pipe, NULL, &zero) == -1 && errno == EINTR)
            ;
    }
    pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

static int write_some(redisContext *c, int *done)
{
    if (nm_tls_on(c->fd))
        return nm_tls_write(c, done);
    sigpipe_guard_t guard;
    sigpipe_hold(&guard);
    int err = redisBufferWrite(c, done) == REDIS_OK ? 0 : NM_ECONN;
    sigpipe_release(&guard);
    return err;
}
#endif

int nm_send(redisContext *c, int64_t deadline)
{
    int done = 0, err = 0;
    while (!err) {
        err = write_some(c, &done);
        if (!err && done)
            break;
        if (!err)
            err = wait_ready(c, POLLOUT, deadline);
    }
    return err;
}

int nm_receive(redisContext *c)
{
    if (nm_tls_on(c->fd) ? nm_tls_read(c) != 0 : redisBufferRead(c) != REDIS_OK)
        return NM_ECONN;
    /* Our replies are small: a server that keeps sending is not one to
     * keep buffering for. */
    return c->reader->len > NM_READER_MAX ? NM_ECONN : 0;
}

/* The calling thread's owed reply (nm_reply_owe): the next reply
 * on C is FN's.  One at a time. */
static __thread struct {
    redisContext *c;
    nm_owed_fn fn;
    void *arg;
} owed;

void nm_reply_owe(redisContext *c, nm_owed_fn fn, void *arg)
{
    owed.c = c;
    owed.fn = fn;
    owed.arg = arg;
}

int nm_reply_owing(void)
{
    return owed.c != NULL;
}

/* The owed reply's outcome goes to its owner, who is owed nothing more. */
static void owed_done(int err, redisReply *r)
{
    nm_owed_fn fn = owed.fn;
    void *arg = owed.arg;
    owed.c = NULL;
    fn(arg, err, r);
}

/* Takes the reply owed on C, if one is and it is complete: 0 (none owed
 * any more, or not complete yet: *PENDING), or NM_ECONN/ENOMEM. */
static int take_owed(redisContext *c, int *pending)
{
    *pending = 0;
    if (owed.c != c || !c)
        return 0;
    void *raw = NULL;
    if (redisGetReplyFromReader(c, &raw) != REDIS_OK) {
        int err = nm_reader_error(c);
        owed_done(NM_ECONN, NULL);
        return err;
    }
    if (!raw) {
        *pending = 1;
        return 0;
    }
    redisReply *r = NULL;
    int err = nm_reply_check(raw, &r);
    owed_done(err, err ? NULL : r);
    return 0;
}

void nm_reply_forget(redisContext *c)
{
    if (c && owed.c == c)
        owed_done(NM_ECONN, NULL);
}

void nm_reply_forget_all(void)
{
    owed.c = NULL;
}

int nm_reply_settle(int64_t deadline)
{
    redisContext *c = owed.c;
    int pending = 0, err = take_owed(c, &pending);
    while (!err && pending) {
        err = poll_until(c, POLLIN, deadline);
        if (!err)
            err = nm_receive(c);
        if (!err)
            err = take_owed(c, &pending);
    }
    return err;
}

int nm_take_reply(redisContext *c, redisReply **out)
{
    void *raw = NULL;
    int pending, err = take_owed(c, &pending);
    *out = NULL;
    if (err || pending)
        return err;
    if (redisGetReplyFromReader(c, &raw) != REDIS_OK)
        return nm_reader_error(c);
    return raw ? nm_reply_check(raw, out) : 0;
}

int nm_get_reply(redisContext *c, int64_t deadline, redisReply **out)
{
    for (;;) {
        int err = nm_take_reply(c, out);
        if (err || *out)
            return err;
        err = wait_ready(c, POLLIN, deadline);
        if (!err)
            err = nm_receive(c);
        if (err)
            return err;
    }
}

int nm_call(redisContext *c, int argc, const char **argv, const size_t *lens,
            int64_t deadline, redisReply **out)
{
    if (redisAppendCommandArgv(c, argc, argv, lens) != REDIS_OK)
        return c->err == REDIS_ERR_OOM ? ENOMEM : NM_ECONN;
    int err = nm_send(c, deadline);
    return err ? err : nm_get_reply(c, deadline, out);
}

/* Sends one PING behind what C waits for: 0 or NM_ECONN. */
static int nudge(redisContext *c, int64_t deadline)
{
    static const char *ping[1] = { "PING" };
    if (redisAppendCommandArgv(c, 1, ping, NULL) != REDIS_OK)
        return NM_ECONN;
    return nm_send(c, deadline);
}

/* Reads and drops the N replies to nudge() by DEADLINE: any reply, an
 * error reply too (an ACL may refuse PING), leaves the connection as clean
 * as before the blocking command.  0 or NM_ECONN. */
static int drop_replies(redisContext *c, int n, int64_t deadline)
{
    while (n > 0) {
        redisReply *r;
        int err = nm_get_reply(c, deadline, &r);
        if (err == NM_ECONN || err == ENOMEM)
            return NM_ECONN;
        if (!err)
            freeReplyObject(r);
        n--;
    }
    return 0;
}

/* Waits for the reply of the blocking command just sent, nudging the
 * server from UNTIL on (nm_call_blocking).  *NUDGES counts the PINGs sent. */
static int get_blocked_reply(redisContext *c, int64_t until, int64_t deadline,
                             redisReply **out, int *nudges)
{
    int64_t step = 1;
    for (;;) {
        int err = nm_take_reply(c, out);
        if (err || *out)
            return err;
        /* Only the wait before UNTIL, when no nudge is owed an answer. */
        err = poll_cancel(c, POLLIN, NM_MIN(until, deadline), cancellable && *nudges == 0);
        if (err == ETIMEDOUT && nm_remaining_ms(deadline) > 0) {
            err = nudge(c, deadline);
            /* After the last one, the server's own tick answers. */
            until = ++*nudges < NM_NUDGES ? nm_now_ms() + step : NM_FOREVER;
            step = NM_MIN(step * 2, NM_NUDGE_MAX_MS);
        } else if (!err) {
            err = nm_receive(c);
        }
        if (err)
            return err == ETIMEDOUT ? NM_ECONN : err;
    }
}

int nm_call_blocking(redisContext *c, int argc, const char **argv, const size_t *lens,
                     int64_t until, int64_t deadline, redisReply **out)
{
    *out = NULL;
    if (redisAppendCommandArgv(c, argc, argv, lens) != REDIS_OK)
        return c->err == REDIS_ERR_OOM ? ENOMEM : NM_ECONN;
    int err = nm_send(c, deadline);
    return err ? err : nm_await_blocking(c, until, deadline, out);
}

int nm_await_blocking(redisContext *c, int64_t until, int64_t deadline, redisReply **out)
{
    int nudges = 0;
    *out = NULL;
    int err = get_blocked_reply(c, until, deadline, out, &nudges);
    if (err != NM_ECONN && err != ENOMEM && drop_replies(c, nudges, deadline) != 0) {
        if (*out)
            freeReplyObject(*out);
        *out = NULL;
        err = NM_ECONN;
    }
    return err;
}
