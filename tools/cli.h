/*
 * cli.h -- the pieces of netmutex(1), the command line tool that runs a
 * command while holding a netmutex (see netmutex.1 for the user's view).
 *
 *   netmutex.c  main: the command line, then the command
 *   say.c       messages and exit codes
 *   config.c    the library's configuration, shared by every command
 *   opts.c      the command line
 *   run.c       netmutex NAME COMMAND (with --permits, under a semaphore)
 *   nofork.c    netmutex -F: the command exec'd in place, a keeper holding
 *               the lock
 *   admin.c     status, break, and acl (the rule a Redis ACL user needs)
 *   list.c      list: the held locks (netmutex_list)
 *   waits.c     waits and deadlocks: who waits for whom (netmutex_waits)
 *   escape.c    names and holders made safe for a terminal and for JSON
 *   url.c       passwords: hidden in argv, masked in messages, --url-file
 *
 * Exit codes follow <sysexits.h> where one fits, and a shell where a command
 * could not be run (126, 127) or died of a signal (128 + signal), so the
 * tool can stand in a script exactly where the command stood.
 */
#ifndef NETMUTEX_CLI_H
#define NETMUTEX_CLI_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <sysexits.h>

#include <netmutex.h>

#define CLI_EX_CONFLICT 1     /* default for -n and -w, see -E */
#define CLI_EX_USAGE 2        /* like most tools, not EX_USAGE (64) */
#define CLI_EX_UNRECOVERABLE EX_DATAERR
#define CLI_EX_UNAVAILABLE EX_UNAVAILABLE
#define CLI_EX_OSERR EX_OSERR
#define CLI_EX_LOST EX_TEMPFAIL
#define CLI_EX_PROTOCOL EX_PROTOCOL
#define CLI_EX_NOPERM EX_NOPERM
#define CLI_EX_CONFIG EX_CONFIG
#define CLI_EX_NOEXEC 126
#define CLI_EX_NOTFOUND 127

/* Room for any name or holder once escaped: 4 bytes per byte at most. */
#define CLI_TEXT_MAX (4 * NETMUTEX_NAME_MAX + 1)

enum cli_cmd {
    CLI_RUN, CLI_STATUS, CLI_BREAK, CLI_LIST, CLI_ACL, CLI_WAITS, CLI_DEADLOCKS, CLI_TOP
};

/* What NAME is: status --rwlock, --sem. */
enum cli_kind { CLI_KIND_MUTEX, CLI_KIND_RWLOCK, CLI_KIND_SEM };

struct cli_opts {
    enum cli_cmd cmd;
    const char *name;
    char shown_name[CLI_TEXT_MAX]; /* NAME escaped, for messages */
    const char *pattern;      /* list: a glob on the names, NULL for all */
    const char *prefix;       /* acl: the key prefix, NULL: the configured */
    char **argv;              /* the command to run, NULL-terminated */
    const char *shell_cmd;    /* -c: run through /bin/sh instead */
    int nonblock;
    int shared;               /* -s: a read share of the read-write lock */
    int nofork;               /* -F: exec the command in place (nofork.c) */
    int has_timeout;
    double timeout_s;
    int conflict_code;
    int verbose;
    unsigned int lease_ms;    /* 0: the configured default */
    unsigned int permits;     /* --permits: a semaphore of this many; 0: a mutex */
    enum cli_kind kind;       /* status --rwlock, --sem; break refuses them */
    int lost_sig;             /* 0: --on-lost none */
    const char *url;          /* NULL: NETMUTEX_URL or the default */
    const char *url_file;     /* --url-file: where to read the URL from */
    char *url_buf;            /* owns what url points to, if anything */
    int url_secret;           /* -u held a password, now hidden in argv */
    char *shown_url;          /* the URL(s) in use, passwords masked */
    int json;
    const char *tls_ca;       /* --tls-ca etc.: NULL for the environment's */
    const char *tls_cert;
    const char *tls_key;
    const char *tls_server_name;
    int tls_insecure;         /* --tls-insecure: no verification at all */
    unsigned int top_limit;   /* top -n: at most this many names; 0: all */
    unsigned long top_iterations; /* top --once (1), --iterations; 0: for ever */
    unsigned long top_interval_ms; /* top --interval: between refreshes */
};

/* opts.c: fills O from the command line; 0 or an exit code (the message is
 * already printed; -h and -V give CLI_EX_DONE). */
#define CLI_EX_DONE (-1)
int cli_parse(int argc, char **argv, struct cli_opts *o);

/* run.c: the lost-lease callback, which config.c hands the library for a
 * semaphore's permits (a mutex's goes through its attribute). */
void cli_run_on_lost(const char *name, void *arg);

/* The process the command runs in, as run.c drives it: its child, or with
 * -F the process that started the keeper, which execs the command itself
 * (in_place).  It waits on the pipe GO for one struct cli_go: RC 0 and the
 * fence to run the command under, or (-F) the exit code to leave with. */
struct cli_command {
    pid_t pid;
    int go;                   /* our end; -1 once closed */
    int pidfd;                /* in place: its pidfd, -1 if none (polled) */
    int in_place;
};
struct cli_go {
    uint64_t fence;
    int32_t rc;
    int32_t unused;           /* no padding: every byte written is set */
};
/* run.c: the command in this process (setenv, exec; on failure the exit
 * of a shell: 126, 127); EXACTLY LEN bytes from FD, -1 if it closes first;
 * the keeper's part of -F (the exit code, once the command ended or was
 * not started); what nofork.c's watcher calls when the command's process
 * ended. */
void cli_exec_command(const struct cli_opts *o, uint64_t fence) __attribute__((noreturn));
int cli_read_full(int fd, void *buf, size_t len);
int cli_run_keeper(struct cli_opts *o, struct cli_command *c);
void cli_run_command_gone(void);
/* nofork.c: netmutex -F (returns only where the command did not start);
 * whether C's process has ended; SIG sent to it; a thread that calls
 * cli_run_command_gone when an in-place command's process ends (0, or an
 * errno; nothing for a child). */
int cli_run_nofork(struct cli_opts *o);
int cli_command_gone(const struct cli_command *c);
void cli_command_signal(const struct cli_command *c, int sig);
int cli_watch_command(const struct cli_command *c);

/* url.c: cli_url_scrub overwrites, in place, the password of every URL of
 * the comma-separated list URLS and says whether there was one;
 * cli_url_mask gives a new copy of URLS with each password shown as ***
 * (NULL: out of memory); cli_url_read_file gives the URL list kept in PATH
 * (a new string), or an exit code with the message printed;
 * cli_url_in_use is the list the library is configured with. */
int cli_url_scrub(char *urls);
char *cli_url_mask(const char *urls);
int cli_url_read_file(const char *path, char **url);
const char *cli_url_in_use(const struct cli_opts *o);

/* escape.c: cli_text gives S (any bytes, NULL for "") with backslashes,
 * control characters and bytes that are not UTF-8 written as \xNN, in BUF
 * of SIZE bytes (cut short, never within an escape, if it does not fit);
 * cli_put_json writes S as a JSON string (RFC 8259), valid UTF-8 whatever
 * the bytes. */
const char *cli_text(const char *s, char *buf, size_t size);
void cli_put_json(FILE *f, const char *s);

/* say.c: one message line on stderr; the exit code for a library error. */
void cli_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int cli_exit_code(int err);
/* config.c: configures the library from O (and HOLDER, if not NULL); 0 or
 * an exit code, with the message printed. */
int cli_configure(struct cli_opts *o, const char *holder);

/* admin.c: one lock's state as status and list print it: a mutex's ST,
 * or a read-write lock's or a semaphore's SH. */
struct cli_lock {
    char *name;
    enum cli_kind kind;
    netmutex_status_t st;
    netmutex_shared_status_t sh;
};
/* KIND_FIELD: list's objects say their kind ("kind"), status's of a mutex
 * do not (they never did).  WS (waits.c): a mutex's object ends with the
 * waits for it ("waited_for_by", as list prints it); NULL: no such field. */
struct cli_waits;
void cli_print_json(const struct cli_lock *l, int kind_field, const struct cli_waits *ws);
/* "mutex", "rwlock" or "sem"; whether L is held (by anybody). */
const char *cli_kind_name(enum cli_kind kind);
int cli_lock_held(const struct cli_lock *l);
/* SINCE_MS (Unix ms) as local ISO 8601 with milliseconds and offset, "-"
 * for none. */
void cli_format_time(int64_t since_ms, char *buf, size_t len);

/* run.c, admin.c, list.c: each returns the process's exit code.  cli_run
 * configures the library itself (see run.c); the others expect it done. */
int cli_run(struct cli_opts *o);
int cli_status(const struct cli_opts *o);
int cli_break(const struct cli_opts *o);
int cli_list(const struct cli_opts *o);

/* waits.c: the waits deadlock detection published (netmutex_waits), as
 * read once; HOLDER may be NULL; SHOWN is for deadlocks' use. */
struct cli_wait {
    char *waiter, *name, *holder;
    unsigned long long seq;
    char as[8]; /* "lock" a mutex, "read" or "write" a read-write lock */
    int shown;
};
struct cli_waits {
    struct cli_wait *v;
    size_t n, cap;
};
#define CLI_WAITS_INIT { NULL, 0, 0 }

/* waits.c: the waits and deadlocks commands.  cli_waits_read fills WS
 * (empty: CLI_WAITS_INIT) with every published wait: 0, or
 * netmutex_waits's error (ENOTSUP in quorum mode) with WS left empty;
 * cli_waits_free empties it.  For each wait in WS for the mutex NAME (a
 * read-write lock's waits are left to waits and deadlocks):
 * cli_print_waited_for prints INDENT "waited for by: WAITER (wait SEQ)",
 * cli_put_waited_for_json the field ,"waited_for_by":[...] of objects
 * {"waiter":WAITER,"wait":SEQ}.  cli_print_waiting_for reads the waits
 * and prints NAME's lines, none when they cannot be read (status). */
int cli_waits(const struct cli_opts *o);
int cli_deadlocks(const struct cli_opts *o);
int cli_waits_read(struct cli_waits *ws);
void cli_waits_free(struct cli_waits *ws);
void cli_print_waited_for(const struct cli_waits *ws, const char *name, const char *indent);
void cli_put_waited_for_json(const struct cli_waits *ws, const char *name);
void cli_print_waiting_for(const char *name);
/* top.c: netmutex top. */
int cli_top(const struct cli_opts *o);
/* admin.c: prints the ACL SETUSER command of a netmutex user (no server
 * is asked, nothing configured). */
int cli_acl(const struct cli_opts *o);

#endif /* NETMUTEX_CLI_H */
