/*
 * opts.c -- the command line of netmutex(1).
 *
 *   netmutex [options] [run] [--] NAME COMMAND [ARGS...]
 *   netmutex [options] [run] [--] NAME -c 'shell command'
 *   netmutex [options] status [--json] NAME
 *   netmutex [options] break NAME
 *   netmutex [options] list [--json] [PATTERN]
 *   netmutex acl [PREFIX]
 *   netmutex [options] top [-n COUNT] [--json] [--once | --iterations N]
 *                          [--interval MS] [PATTERN]
 *
 * "status", "break", "list", "acl", "waits", "deadlocks" and "top" are words only
 * in the first position after the options; a lock with such a name is reached with "run" or "--" (both
 * make the next word a NAME whatever it is).  Options stop at the first word
 * that is not one, as in flock(1), so the command's own options are never
 * ours.  flock's own spellings are taken too (--nb, --nonblocking, --wait,
 * -x, -e, -o, -s, -F); see "DIFFERENCES FROM FLOCK(1)" in netmutex.1.  As
 * in flock, the last of -s and -x wins.  flock's options for a file or a
 * descriptor (--unlock, --fcntl, --start, --length, --fd, and a lone
 * number for a descriptor) are usage errors that say why.
 */
#include "ac_config.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <netmutex.h>

#include "cli.h"

/* The commands an option applies to, to reject e.g. `status -n`. */
#define FOR_RUN 1u
#define FOR_STATUS 2u
#define FOR_BREAK 4u
#define FOR_LIST 8u
#define FOR_ACL 16u
#define FOR_WAITS 32u          /* waits and deadlocks */
#define FOR_TOP 64u            /* top: its own options are read by take_top */
#define FOR_ALL (FOR_RUN | FOR_STATUS | FOR_BREAK | FOR_LIST | FOR_ACL | FOR_WAITS | FOR_TOP)

enum {
    OPT_LEASE = 256, OPT_ON_LOST, OPT_JSON, OPT_URL_FILE,
    OPT_TLS_CA, OPT_TLS_CERT, OPT_TLS_KEY, OPT_TLS_SERVER_NAME, OPT_TLS_INSECURE,
    OPT_PERMITS, OPT_RWLOCK, OPT_SEM,
    /* flock(1)'s options for a file or a descriptor, refused by name. */
    OPT_FLOCK_UNLOCK, OPT_FLOCK_FCNTL, OPT_FLOCK_START, OPT_FLOCK_LENGTH, OPT_FLOCK_FD
};

static const struct option long_opts[] = {
    { "nonblock", no_argument, NULL, 'n' },
    { "nonblocking", no_argument, NULL, 'n' },
    { "nb", no_argument, NULL, 'n' },
    { "timeout", required_argument, NULL, 'w' },
    { "wait", required_argument, NULL, 'w' },
    { "exclusive", no_argument, NULL, 'x' },
    { "close", no_argument, NULL, 'o' },
    { "shared", no_argument, NULL, 's' },
    { "no-fork", no_argument, NULL, 'F' },
    { "conflict-exit-code", required_argument, NULL, 'E' },
    { "verbose", no_argument, NULL, 'v' },
    { "url", required_argument, NULL, 'u' },
    { "url-file", required_argument, NULL, OPT_URL_FILE },
    { "tls-ca", required_argument, NULL, OPT_TLS_CA },
    { "tls-cert", required_argument, NULL, OPT_TLS_CERT },
    { "tls-key", required_argument, NULL, OPT_TLS_KEY },
    { "tls-server-name", required_argument, NULL, OPT_TLS_SERVER_NAME },
    { "tls-insecure", no_argument, NULL, OPT_TLS_INSECURE },
    { "lease", required_argument, NULL, OPT_LEASE },
    { "permits", required_argument, NULL, OPT_PERMITS },
    { "rwlock", no_argument, NULL, OPT_RWLOCK },
    { "sem", no_argument, NULL, OPT_SEM },
    { "on-lost", required_argument, NULL, OPT_ON_LOST },
    { "json", no_argument, NULL, OPT_JSON },
    { "unlock", no_argument, NULL, OPT_FLOCK_UNLOCK },
    { "fcntl", no_argument, NULL, OPT_FLOCK_FCNTL },
    { "start", required_argument, NULL, OPT_FLOCK_START },
    { "length", required_argument, NULL, OPT_FLOCK_LENGTH },
    { "fd", required_argument, NULL, OPT_FLOCK_FD },
    { "help", no_argument, NULL, 'h' },
    { "version", no_argument, NULL, 'V' },
    { NULL, 0, NULL, 0 }
};

/* The leading '+' stops at the first non-option (no permutation), and the
 * ':' lets us word the message for a missing argument ourselves.  After
 * status, break or list, which run no command whose options could be
 * mistaken for ours, options may also follow the operand (permuted). */
#define SHORT_OPTS ":nw:E:vu:hVxeosF"
static const char short_opts[] = "+" SHORT_OPTS;
static const char short_opts_permuted[] = SHORT_OPTS;

static void usage(FILE *f)
{
    fputs("Usage:\n"
          "  netmutex [options] [run] [--] NAME COMMAND [ARGS...]\n"
          "  netmutex [options] [run] [--] NAME -c 'SHELL COMMAND'\n"
          "  netmutex [-u URL] status [--json] [--rwlock | --sem] NAME\n"
          "  netmutex [-u URL] break NAME\n"
          "  netmutex [-u URL] list [--json] [PATTERN]\n"
          "  netmutex acl [PREFIX]\n"
          "  netmutex [-u URL] waits | deadlocks\n"
          "  netmutex [-u URL] top [-n COUNT] [--json] [--once | --iterations N]\n"
          "                        [--interval MS] [PATTERN]\n"
          "\n"
          "Runs COMMAND while holding the cluster-wide lock NAME (kept in Redis).\n"
          "\n"
          "  -s, --shared              hold a share of NAME: shared holders run\n"
          "                            together, an exclusive one excludes them\n"
          "  -x, -e, --exclusive       hold NAME alone (the default)\n"
          "  -n, --nb, --nonblock, --nonblocking\n"
          "                            fail at once if NAME is held\n"
          "  -w, --wait, --timeout SECS  give up after SECS (fractions allowed;\n"
          "                            0: as -n)\n"
          "  -o, --close               accepted for flock(1); COMMAND never holds\n"
          "                            anything of the lock\n"
          "  -F, --no-fork             exec COMMAND in place (it keeps our pid);\n"
          "                            a keeper process holds the lock meanwhile\n"
          "  -E, --conflict-exit-code N  exit code for -n and -w (default 1)\n"
          "      --lease MS            lease length in milliseconds\n"
          "      --permits N           NAME is a semaphore: at most N commands\n"
          "                            run at once under it, cluster-wide\n"
          "      --on-lost SIGNAL      signal for COMMAND if the lease is lost\n"
          "                            (default TERM; 'none' to send nothing)\n"
          "  -u, --url URL             Redis URL(s), default $NETMUTEX_URL\n"
          "      --url-file FILE       read the URL(s) from FILE (keeps a password\n"
          "                            off the command line)\n"
          "      --tls-ca FILE|DIR     rediss://: the CAs to trust, default\n"
          "                            $NETMUTEX_TLS_CA, else the system's\n"
          "      --tls-cert FILE       rediss://: a client certificate (PEM) ...\n"
          "      --tls-key FILE        ... and its key; both or neither\n"
          "      --tls-server-name NAME  rediss://: the name to verify (and SNI)\n"
          "      --tls-insecure        rediss://: verify no certificate (unsafe)\n"
          "      --json                status, list: print JSON\n"
          "      --rwlock, --sem       status: NAME is a read-write lock, a semaphore\n"
          "  -v, --verbose             report waiting, acquired, released\n"
          "  -h, --help                this text\n"
          "  -V, --version             the version\n"
          "flock(1)'s --unlock, --fcntl, --start, --length and --fd are refused:\n"
          "a NAME is no file (netmutex(1), DIFFERENCES FROM FLOCK(1)).\n"
          "\n"
          "list prints the held locks whose names match PATTERN (a Redis glob).\n"
          "acl prints the ACL SETUSER command of a Redis user that may use the\n"
          "locks under PREFIX (default $NETMUTEX_PREFIX, else netmutex:) and\n"
          "nothing else: put the user's name and password in its place.\n"
          "waits prints who waits for whom (deadlock detection's records);\n"
          "deadlocks prints their cycles (exit 0: some, 1: none).\n"
          "top shows the names that processes run with NETMUTEX_STATS=publish\n"
          "report, merged, by total wait, every second (MS with --interval).\n"
          "\n"
          "Exit: COMMAND's status (128+N if killed by signal N); 1 conflict;\n"
          "2 usage; 65 unrecoverable; 69 unreachable; 75 lease lost;\n"
          "76 protocol; 77 refused; 78 bad configuration; 126/127 cannot run;\n"
          "128+N if signal N came before COMMAND started.\n"
          "See netmutex(1).\n", f);
}

static int usage_error(const char *fmt, const char *what)
{
    fputs("netmutex: ", stderr);
    fprintf(stderr, fmt, what);
    fputs("\nTry 'netmutex --help'.\n", stderr);
    return CLI_EX_USAGE;
}

/* A whole decimal number in [MIN, MAX]; strtoul alone would take "-1",
 * " 7" and "7x". */
static int parse_uint(const char *s, unsigned long min, unsigned long max,
                      unsigned long *out)
{
    char *end;

    if (!isdigit((unsigned char)s[0]))
        return EINVAL;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < min || v > max)
        return EINVAL;
    *out = v;
    return 0;
}

/* Seconds for -w: fractions allowed, no sign, nothing that is not finite.
 * The upper bound keeps the deadline well inside a time_t. */
static int parse_seconds(const char *s, double *out)
{
    char *end;

    if (!isdigit((unsigned char)s[0]) && s[0] != '.')
        return EINVAL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || *end != '\0' || !isfinite(v) || v > 1e8)
        return EINVAL;
    *out = v;
    return 0;
}

static const struct { const char *name; int sig; } signals[] = {
    { "HUP", SIGHUP }, { "INT", SIGINT }, { "QUIT", SIGQUIT },
    { "KILL", SIGKILL }, { "USR1", SIGUSR1 }, { "USR2", SIGUSR2 },
    { "ALRM", SIGALRM }, { "TERM", SIGTERM },
};

/* "TERM", "SIGTERM", "term", "15"; "none" gives 0. */
static int parse_signal(const char *s, int *sig)
{
    unsigned long n;

    if (strcasecmp(s, "none") == 0) {
        *sig = 0;
        return 0;
    }
    if (parse_uint(s, 1, NSIG - 1, &n) == 0) {
        *sig = (int)n;
        return 0;
    }
    if (strncasecmp(s, "SIG", 3) == 0)
        s += 3;
    for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++) {
        if (strcasecmp(s, signals[i].name) == 0) {
            *sig = signals[i].sig;
            return 0;
        }
    }
    return EINVAL;
}

/* The spelling of a refused flock(1) option, for its message (ARG is its
 * value, not its name, when it takes one). */
static const char *flock_file_option(int c)
{
    switch (c) {
    case OPT_FLOCK_FCNTL: return "--fcntl";
    case OPT_FLOCK_START: return "--start";
    case OPT_FLOCK_LENGTH: return "--length";
    default: return "--fd";
    }
}

/* -u: the URL is copied, and then its password, if any, overwritten where
 * ps(1) shows it (see url.c); the caller warns once all options are read. */
static int take_url(char *arg, struct cli_opts *o)
{
    char *copy = strdup(arg);

    if (copy == NULL) {
        cli_say("%s", strerror(ENOMEM));
        return CLI_EX_OSERR;
    }
    free(o->url_buf);
    o->url_buf = copy;
    o->url = copy;
    o->url_secret |= cli_url_scrub(arg);
    return 0;
}

/* One option's value into O; 0 or an exit code. */
static int take_option(int c, char *arg, struct cli_opts *o)
{
    unsigned long n;

    switch (c) {
    case 'n': o->nonblock = 1; return 0;
    case 'v': o->verbose = 1; return 0;
    /* flock's -x and -e ask for the default mode, -s for a shared one (see
     * run.c); its -o is what netmutex always does (see "DIFFERENCES FROM
     * FLOCK(1)"). */
    case 'x': case 'e': o->shared = 0; return 0;
    case 'o': return 0;
    case 's': o->shared = 1; return 0;
    case 'F': o->nofork = 1; return 0;
    case 'u': return take_url(arg, o);
    case OPT_URL_FILE: o->url_file = arg; return 0;
    case OPT_TLS_CA: o->tls_ca = arg; return 0;
    case OPT_TLS_CERT: o->tls_cert = arg; return 0;
    case OPT_TLS_KEY: o->tls_key = arg; return 0;
    case OPT_TLS_SERVER_NAME:
        /* The library's rule (tls_config.c), checked here so that a typo
         * is a usage error like any other malformed value. */
        if (arg[0] != '\0' && strpbrk(arg, " \t\r\n/") == NULL) {
            o->tls_server_name = arg;
            return 0;
        }
        return usage_error("bad TLS server name '%s': want a host name or an address", arg);
    case OPT_TLS_INSECURE: o->tls_insecure = 1; return 0;
    case OPT_JSON: o->json = 1; return 0;
    case OPT_RWLOCK: case OPT_SEM: {
        enum cli_kind k = c == OPT_RWLOCK ? CLI_KIND_RWLOCK : CLI_KIND_SEM;
        if (o->kind != CLI_KIND_MUTEX && o->kind != k)
            return usage_error("%s", "--rwlock and --sem exclude each other");
        o->kind = k;
        return 0;
    }
    case 'w':
        o->has_timeout = 1;
        if (parse_seconds(arg, &o->timeout_s) == 0)
            return 0;
        return usage_error("bad timeout '%s': want seconds, e.g. 10 or 0.5", arg);
    case 'E':
        if (parse_uint(arg, 0, 255, &n) == 0) {
            o->conflict_code = (int)n;
            return 0;
        }
        return usage_error("bad conflict exit code '%s': want 0 to 255", arg);
    case OPT_LEASE:
        if (parse_uint(arg, NETMUTEX_LEASE_MIN_MS, NETMUTEX_LEASE_MAX_MS, &n) == 0) {
            o->lease_ms = (unsigned int)n;
            return 0;
        }
        return usage_error("bad lease '%s': want milliseconds, 10 to 86400000", arg);
    case OPT_PERMITS:
        if (parse_uint(arg, 1, NETMUTEX_SEM_PERMITS_MAX, &n) == 0) {
            o->permits = (unsigned int)n;
            return 0;
        }
        return usage_error("bad permits '%s': want 1 to 65536", arg);
    case OPT_ON_LOST:
        if (parse_signal(arg, &o->lost_sig) == 0)
            return 0;
        return usage_error("bad signal '%s': want e.g. TERM, KILL, 9 or none", arg);
    case OPT_FLOCK_UNLOCK:
        return usage_error("%s", "--unlock is flock(1)'s for a descriptor: NAME is released "
                           "when COMMAND exits, and 'netmutex break NAME' frees a held one");
    case OPT_FLOCK_FCNTL: case OPT_FLOCK_START: case OPT_FLOCK_LENGTH: case OPT_FLOCK_FD:
        return usage_error("%s is flock(1)'s for a file: a NAME has no descriptor, "
                           "fcntl(2) lock or byte range", flock_file_option(c));
    case 'h': usage(stdout); return CLI_EX_DONE;
    case 'V': puts("netmutex " PACKAGE_VERSION); return CLI_EX_DONE;
    case ':': return usage_error("option '%s' needs a value", arg);
    default: return usage_error("unknown option '%s'", arg);
    }
}

static unsigned int option_scope(int c)
{
    switch (c) {
    case 'n': case 'w': case 'E': case OPT_LEASE: case OPT_ON_LOST: case OPT_PERMITS:
    case 'x': case 'e': case 'o': case 's': case 'F':
        return FOR_RUN;
    case 'u': case OPT_URL_FILE: case 'v':
    case OPT_TLS_CA: case OPT_TLS_CERT: case OPT_TLS_KEY: case OPT_TLS_SERVER_NAME:
    case OPT_TLS_INSECURE:
        return FOR_ALL & ~FOR_ACL;
    case OPT_JSON:
        return FOR_STATUS | FOR_LIST;
    case OPT_RWLOCK: case OPT_SEM:
        return FOR_STATUS | FOR_BREAK;
    default:
        return FOR_ALL;
    }
}

/* getopt over ARGV[1..]; leaves the first operand at optind, and in *SCOPE
 * the commands that every option seen applies to. */
static int parse_options(int argc, char **argv, const char *shorts, struct cli_opts *o,
                         unsigned int *scope)
{
    int c;

    /* 0, not 1: glibc then starts afresh, re-reading the '+' of SHORTS. */
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, shorts, long_opts, NULL)) != -1) {
        /* getopt names the bad option only through optopt or argv. */
        char *arg = (c == '?' || c == ':') ? argv[optind - 1] : optarg;
        int rc = take_option(c, arg, o);
        if (rc != 0)
            return rc;
        *scope &= option_scope(c);
    }
    return 0;
}

static int check_name(const char *name)
{
    if (name == NULL)
        return usage_error("%s", "missing lock NAME");
    if (name[0] == '\0')
        return usage_error("%s", "empty lock NAME");
    if (strlen(name) > NETMUTEX_NAME_MAX)
        return usage_error("lock NAME longer than %s bytes", "1024");
    return 0;
}

static void set_name(const char *name, struct cli_opts *o)
{
    o->name = name;
    cli_text(name, o->shown_name, sizeof o->shown_name);
}

/* NAME COMMAND [ARGS...] or NAME -c 'COMMAND'. */
static int take_command(char **rest, struct cli_opts *o)
{
    int rc = check_name(rest[0]);

    if (rc != 0)
        return rc;
    set_name(rest[0], o);
    /* flock(1) takes a lone number for a descriptor to lock (flock 9). */
    if (rest[1] == NULL && strspn(rest[0], "0123456789") == strlen(rest[0]))
        return usage_error("missing COMMAND after NAME '%s' (a NAME, never a file "
                           "descriptor as in flock(1)'s 'flock 9')", o->shown_name);
    if (rest[1] == NULL)
        return usage_error("%s", "missing COMMAND");
    if (strcmp(rest[1], "-c") != 0 && strcmp(rest[1], "--command") != 0) {
        o->argv = rest + 1;
        return 0;
    }
    if (rest[2] == NULL || rest[3] != NULL)
        return usage_error("%s", "-c takes exactly one shell command");
    o->shell_cmd = rest[2];
    return 0;
}

static int take_name_only(char **rest, struct cli_opts *o)
{
    int rc = check_name(rest[0]);

    if (rc != 0)
        return rc;
    if (rest[1] != NULL)
        return usage_error("unexpected argument '%s'", rest[1]);
    set_name(rest[0], o);
    return 0;
}

/* list [PATTERN]: no pattern lists every held lock. */
static int take_pattern(char **rest, struct cli_opts *o)
{
    if (rest[0] != NULL && rest[1] != NULL)
        return usage_error("unexpected argument '%s'", rest[1]);
    o->pattern = rest[0];
    return 0;
}

/* acl [PREFIX]: no prefix is the configured one. */
static int take_prefix(char **rest, struct cli_opts *o)
{
    if (rest[0] != NULL && rest[1] != NULL)
        return usage_error("unexpected argument '%s'", rest[1]);
    o->prefix = rest[0];
    return 0;
}

/* top's own arguments: [-n COUNT] [--json] [--once | --iterations N]
 * [--interval MS] [--] [PATTERN]. */
static int take_top(char **rest, struct cli_opts *o)
{
    unsigned long n;
    int literal = 0;
    o->top_interval_ms = 1000;
    for (; *rest; rest++) {
        const char *a = rest[0];
        if (!literal && strcmp(a, "--") == 0) {
            literal = 1;
        } else if (!literal && strcmp(a, "--json") == 0) {
            o->json = 1;
        } else if (!literal && strcmp(a, "--once") == 0) {
            o->top_iterations = 1;
        } else if (!literal && (strcmp(a, "-n") == 0 || strcmp(a, "--iterations") == 0 ||
                                strcmp(a, "--interval") == 0)) {
            if (!rest[1])
                return usage_error("option '%s' needs a value", a);
            if (strcmp(a, "--interval") == 0 ? parse_uint(rest[1], 100, 3600000, &n)
                                             : parse_uint(rest[1], 1, 1000000, &n))
                return usage_error("bad number '%s'", rest[1]);
            if (a[1] == 'n')
                o->top_limit = (unsigned int)n;
            else if (strcmp(a, "--iterations") == 0)
                o->top_iterations = n;
            else
                o->top_interval_ms = n;
            rest++;
        } else if (!literal && a[0] == '-' && a[1] != '\0') {
            return usage_error("unknown option '%s'", a);
        } else if (o->pattern) {
            return usage_error("unexpected argument '%s'", a);
        } else {
            o->pattern = a;
        }
    }
    return 0;
}

static int command_word(const char *w, enum cli_cmd *cmd)
{
    if (w == NULL)
        return 0;
    if (strcmp(w, "run") == 0)
        *cmd = CLI_RUN;
    else if (strcmp(w, "status") == 0)
        *cmd = CLI_STATUS;
    else if (strcmp(w, "break") == 0)
        *cmd = CLI_BREAK;
    else if (strcmp(w, "list") == 0)
        *cmd = CLI_LIST;
    else if (strcmp(w, "acl") == 0)
        *cmd = CLI_ACL;
    else if (strcmp(w, "waits") == 0)
        *cmd = CLI_WAITS;
    else if (strcmp(w, "deadlocks") == 0)
        *cmd = CLI_DEADLOCKS;
    else if (strcmp(w, "top") == 0)
        *cmd = CLI_TOP;
    else
        return 0;
    return 1;
}

static int parse_all(int argc, char **argv, struct cli_opts *o)
{
    static const unsigned int bit[] = { [CLI_RUN] = FOR_RUN, [CLI_STATUS] = FOR_STATUS,
                                        [CLI_BREAK] = FOR_BREAK, [CLI_LIST] = FOR_LIST,
                                        [CLI_ACL] = FOR_ACL, [CLI_WAITS] = FOR_WAITS,
                                        [CLI_DEADLOCKS] = FOR_WAITS, [CLI_TOP] = FOR_TOP };
    unsigned int scope = FOR_ALL;
    int rc;

    if ((rc = parse_options(argc, argv, short_opts, o, &scope)) != 0)
        return rc;
    /* After "--" the next word is a NAME even if it spells a command. */
    int literal = optind > 1 && strcmp(argv[optind - 1], "--") == 0;
    if (!literal && command_word(argv[optind], &o->cmd)) {
        argc -= optind;
        argv += optind;
        /* top's -n takes a COUNT, where run's means --nonblock. */
        if (o->cmd == CLI_TOP)
            rc = take_top(argv + 1, o);
        else
            rc = parse_options(argc, argv, o->cmd == CLI_RUN ? short_opts : short_opts_permuted,
                               o, &scope);
        if (rc != 0)
            return rc;
    }
    if ((scope & bit[o->cmd]) == 0)
        return usage_error("%s", "an option does not apply to this command");
    if (o->url_buf != NULL && o->url_file != NULL)
        return usage_error("%s", "-u and --url-file exclude each other");
    if ((o->tls_cert == NULL) != (o->tls_key == NULL))
        return usage_error("%s", "--tls-cert and --tls-key go together");
    if (o->permits && o->shared)
        return usage_error("%s", "-s and --permits exclude each other: a permit is neither");
    if (o->cmd == CLI_RUN)
        return take_command(argv + optind, o);
    if (o->cmd == CLI_LIST)
        return take_pattern(argv + optind, o);
    if (o->cmd == CLI_ACL)
        return take_prefix(argv + optind, o);
    if (o->cmd == CLI_TOP)
        return 0;
    if (o->cmd == CLI_WAITS || o->cmd == CLI_DEADLOCKS)
        return argv[optind] ? usage_error("unexpected argument '%s'", argv[optind]) : 0;
    return take_name_only(argv + optind, o);
}

int cli_parse(int argc, char **argv, struct cli_opts *o)
{
    memset(o, 0, sizeof *o);
    o->conflict_code = CLI_EX_CONFLICT;
    o->lost_sig = SIGTERM;
    int rc = parse_all(argc, argv, o);
    /* Like redis-cli's warning for -a and -u: the password was readable by
     * every local user from our exec until take_url hid it. */
    if (o->url_secret)
        cli_say("warning: a password in -u on the command line may not be "
                "safe; use NETMUTEX_URL or --url-file");
    return rc;
}
