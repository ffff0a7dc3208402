/*
 * redis_server.h -- a private redis-server for a program that needs one:
 * the test fixture, the conformance harness, the benchmark and the demo.
 *
 * Each server gets a fresh temporary directory (its socket, log and
 * whatever its program puts there), listens on a unix socket in it and,
 * if asked, on a TCP port of 127.0.0.1, and never outlives the program
 * that started it:
 *
 *   - the server asks the kernel for SIGKILL when its parent thread dies
 *     (PR_SET_PDEATHSIG), so even a SIGKILLed program leaves none behind;
 *   - rs_catch_fatal() makes fatal signals kill the servers and remove
 *     their directories before the program dies of the signal;
 *   - rs_cleanup_all() (for atexit) does the same on an ordinary exit.
 *
 * Plain C and hiredis: the benchmark and the demo build without GLib.
 * Only the process that made a server cleans it up: a forked worker that
 * inherits the handlers or the atexit call leaves its parent's alone.
 */
#ifndef NM_REDIS_SERVER_H
#define NM_REDIS_SERVER_H

#include <signal.h>
#include <stddef.h>
#include <sys/types.h>

/* sun_path holds 108 bytes: the directory must leave room for the name. */
#define RS_DIR_MAX 80
#define RS_PATH_MAX 128
/* Servers one program may have registered for cleanup at a time. */
#define RS_MAX_SERVERS 32
/* rs_opts_t.port: a port that was free a moment ago. */
#define RS_PICK_PORT (-1)

typedef struct rs_opts {
    const char *exe;          /* NULL: $REDIS_SERVER, else the configured */
    int port;                 /* RS_PICK_PORT, 0 (unix socket only) or one */
    const char *pass;         /* --requirepass, and AUTH before the PING */
    const char *const *first; /* NULL-terminated, before the usual
                                 arguments (a sentinel's configuration
                                 file must be first) */
    const char *const *extra; /* NULL-terminated, after them */
    unsigned int ready_ms;    /* bound on start-up (0: 30 s) */
    /* A directory of certificates (tests/tls-certs.sh: ca.crt,
     * server.crt, server.key): the TCP port speaks TLS only (--port 0
     * --tls-port), wants client certificates, and so do replication and
     * a cluster's bus.  NULL: plain.  The unix socket is always plain. */
    const char *tls_dir;
} rs_opts_t;

typedef struct rs_server {
    char dir[RS_DIR_MAX];     /* "" until rs_make_dir */
    char sock[RS_PATH_MAX];   /* DIR/redis.sock */
    char log[RS_PATH_MAX];    /* DIR/redis.log */
    char exe[RS_PATH_MAX];    /* the binary, resolved before fork */
    int port;                 /* 0: unix socket only */
    volatile pid_t pid;       /* 0: not running */
    pid_t owner;              /* the process that made the directory */
} rs_server_t;

/* Makes S's directory, $TMPDIR/STEM.XXXXXX, and registers S for cleanup.
 * 0, or an errno value (ENAMETOOLONG: TMPDIR too long for a socket path;
 * ENOSPC: RS_MAX_SERVERS registered). */
int rs_make_dir(rs_server_t *s, const char *stem);

/* Starts the server and waits until it answers PING on its socket.  With
 * RS_PICK_PORT a port taken by someone else between the pick and the
 * server's bind is retried with another.  0, or an errno value: ENOENT
 * (no such binary), ECHILD (it exited; its log says why), ETIMEDOUT (it
 * neither answered nor exited within the bound), or fork's error.  S keeps
 * no pointer to OPTS. */
int rs_start(rs_server_t *s, const rs_opts_t *opts);

/* SIGTERM (and SIGCONT, should it be stopped), then SIGKILL after
 * BOUND_MS; reaps it and removes its socket (a stopped server never
 * leaves one behind).  Nothing if it does not run. */
void rs_stop(rs_server_t *s, unsigned int bound_ms);

/* Stops the server, removes its directory and everything in it, and
 * unregisters S. */
void rs_destroy(rs_server_t *s);

/* One PING on a fresh connection to socket SOCK (AUTH PASS first unless
 * NULL), each step bounded by TIMEOUT_MS: 1 if it said PONG. */
int rs_answers(const char *sock, const char *pass, unsigned int timeout_ms);

/* A TCP port of 127.0.0.1 that was free a moment ago, below 55536 so that
 * a cluster node's bus port (port + 10000) exists too; -1 with errno. */
int rs_free_port(void);

/* Copies S's log to stderr, each line indented (for start-up failures). */
void rs_print_log(const rs_server_t *s);

/* Kills every server this process registered and removes their
 * directories.  Async-signal-safe; fit for atexit. */
void rs_cleanup_all(void);

/* On each of SIGS (N of them; NULL: SIGABRT, SIGTRAP, SIGTERM, SIGINT,
 * SIGHUP): BEFORE(sig) if not NULL, then rs_cleanup_all(), then death by
 * the same signal.  BEFORE must be async-signal-safe, and runs in forked
 * children that inherit the handler too. */
void rs_catch_fatal(const int *sigs, size_t n, void (*before)(int sig));

#endif /* NM_REDIS_SERVER_H */
