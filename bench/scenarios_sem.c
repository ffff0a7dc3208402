/*
 * scenarios_sem.c -- nm_bench's counting semaphore scenario.
 *
 * sem_permits: SEM_CMDS (8) netmutex(1) commands started at once with
 * `--permits 3` on one name, the tool's own program from the build tree
 * (NETMUTEX_CLI, or the program libtool's wrapper script of that name
 * runs, with the library path it sets: the script costs a shell and more
 * processes per command, ten times the tool's own start), each running a shell command that appends "i <ns>" to a
 * shared file when it starts, holds SEM_HOLD_MS (200 ms) and appends
 * "o <ns>" before it ends (CLOCK_REALTIME, `date +%s%N`).  Each recorded
 * stay lies inside the command's permit, so the most stays open at once
 * in the file is at most the most permits held, and shows that many held.
 * Runs of the 8 repeat for -d seconds (SEM_MIN_RUNS at least).  Then, for
 * reference, one thread of a worker process takes a permit and posts it
 * back in a loop (netmutex_sem_wait + netmutex_sem_post, nobody else on
 * the name) for -d / 2 seconds.
 *
 * The top of nm_bench.c describes what it reports.
 */
#include "ac_config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <netmutex.h>

#include "nm_bench.h"

#ifndef NETMUTEX_CLI
#define NETMUTEX_CLI "../tools/netmutex"
#endif
/* libtool, to find the program its wrapper script runs (NETMUTEX_CLI is
 * that script in a build tree with shared libraries). */
#ifndef NMB_LIBTOOL
#define NMB_LIBTOOL ""
#endif

#define SEM_CMDS 8
#define SEM_PERMITS 3
#define SEM_HOLD_MS 200
#define SEM_MIN_RUNS 3
#define SEM_MAX_RUNS 64
#define SEM_GRACE_S 60

/* What the commands run, inside their permit: $1 is the shared file. */
static const char sem_inside[] =
    "echo \"i $(date +%s%N) $$\" >>\"$1\"; sleep 0.2; echo \"o $(date +%s%N) $$\" >>\"$1\"";

typedef struct {
    const char *file;
    const char *name;
} semrun_t;

/* The tool's program and the LD_LIBRARY_PATH it needs ("": none). */
static char sem_cli[1024], sem_libpath[4096];

/* Asks libtool what its wrapper NETMUTEX_CLI would run, as tests/cli/lib.sh
 * does; NETMUTEX_CLI itself when that cannot be had. */
static void sem_find_cli(void)
{
    char cmd[2048];
    FILE *p;
    snprintf(sem_cli, sizeof sem_cli, "%s", NETMUTEX_CLI);
    sem_libpath[0] = '\0';
    if (!*NMB_LIBTOOL)
        return;
    snprintf(cmd, sizeof cmd,
             "%s --mode=execute sh -c 'printf \"%%s\\n%%s\\n\" \"$1\" \"${LD_LIBRARY_PATH-}\"' sh %s",
             NMB_LIBTOOL, NETMUTEX_CLI);
    p = popen(cmd, "r");
    if (!p)
        return;
    char prog[sizeof sem_cli], lib[sizeof sem_libpath];
    if (fgets(prog, sizeof prog, p) && fgets(lib, sizeof lib, p)) {
        prog[strcspn(prog, "\n")] = '\0';
        lib[strcspn(lib, "\n")] = '\0';
        if (*prog && access(prog, X_OK) == 0) {
            snprintf(sem_cli, sizeof sem_cli, "%s", prog);
            snprintf(sem_libpath, sizeof sem_libpath, "%s", lib);
        }
    }
    pclose(p);
}

static int sem_exec(void *arg, int index)
{
    const semrun_t *r = arg;
    (void)index;
    setenv("NETMUTEX_URL", nmb_server_url, 1);
    if (*sem_libpath)
        setenv("LD_LIBRARY_PATH", sem_libpath, 1);
    execl(sem_cli, "netmutex", "--permits", "3", r->name, "sh", "-c", sem_inside, "sh",
          r->file, (char *)NULL);
    nmb_complain("%s: %s", sem_cli, strerror(errno));
    return -1;
}

typedef struct {
    long long t;
    int in;
    int pid;
} semev_t;

static int ev_cmp(const void *x, const void *y)
{
    const semev_t *a = x, *b = y;
    if (a->t != b->t)
        return a->t < b->t ? -1 : 1;
    return a->in - b->in; /* an exit before an entry at the same time */
}

/* The longest chain of the stays in EV (sorted by time) each of which
 * began after the one before it in the chain ended: the rounds the
 * commands went through in (3 for 8 commands and 3 permits, when they
 * start together and are let in as permits come back). */
static int sem_chain(const semev_t *ev, int n)
{
    long long in[SEM_CMDS], out[SEM_CMDS];
    int pid[SEM_CMDS], k = 0, best = 0, chain[SEM_CMDS];
    for (int i = 0; i < n; i++)
        if (ev[i].in && k < SEM_CMDS) {
            pid[k] = ev[i].pid;
            in[k] = ev[i].t;
            out[k++] = 0;
        }
    for (int i = 0; i < n; i++)
        for (int m = 0; m < k; m++)
            if (!ev[i].in && pid[m] == ev[i].pid)
                out[m] = ev[i].t;
    /* in[] is in time order: a stay can only follow an earlier one. */
    for (int m = 0; m < k; m++) {
        chain[m] = 1;
        for (int p = 0; p < m; p++)
            if (out[p] > 0 && out[p] <= in[m] && chain[p] + 1 > chain[m])
                chain[m] = chain[p] + 1;
        best = chain[m] > best ? chain[m] : best;
    }
    return best;
}

/* What one run of the commands showed. */
typedef struct {
    int max_inside;          /* stays open at once, at most */
    int rounds;              /* the longest chain of stays, each begun
                                after the one before it ended */
    double first_in_ms;      /* from the start of the commands */
    double all_ms;           /* until the last command exited */
} semfig_t;

/* Reads FILE's stays into F (all but all_ms); -1 unless every command
 * left one.  T0 is when the commands were started, CLOCK_REALTIME ns. */
static int sem_read(const char *file, long long t0, semfig_t *f_out)
{
    semev_t ev[2 * SEM_CMDS + 2];
    int n = 0, ins = 0, inside = 0;
    char kind;
    long long t;
    FILE *f = fopen(file, "r");
    if (!f)
        return -1;
    int pid;
    while (n < (int)(sizeof ev / sizeof ev[0]) &&
           fscanf(f, " %c %lld %d", &kind, &t, &pid) == 3) {
        ev[n++] = (semev_t){ t, kind == 'i', pid };
        ins += kind == 'i';
    }
    fclose(f);
    if (ins != SEM_CMDS || n != 2 * SEM_CMDS)
        return -1;
    qsort(ev, (size_t)n, sizeof ev[0], ev_cmp);
    f_out->max_inside = 0;
    for (int i = 0; i < n; i++) {
        inside += ev[i].in ? 1 : -1;
        if (inside > f_out->max_inside)
            f_out->max_inside = inside;
    }
    f_out->rounds = sem_chain(ev, n);
    f_out->first_in_ms = (double)(ev[0].t - t0) / 1e6;
    return 0;
}

static long long sem_realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* One run of the 8: 0, with its figures, or -1 after a message. */
static int sem_once(const char *dir, int run, semfig_t *f)
{
    char file[512], name[160], what[32];
    snprintf(file, sizeof file, "%s/stays.%d", dir, run);
    snprintf(what, sizeof what, "sem_permits/%d", run);
    nmb_mutex_name(name, sizeof name, what);
    semrun_t r = { file, name };
    crew_t crew;
    int64_t t0 = nmb_now_ns();
    long long wall0 = sem_realtime_ns();
    if (nmb_crew_spawn(&crew, SEM_CMDS, sem_exec, &r) != 0) {
        nmb_crew_kill(&crew);
        return -1;
    }
    if (nmb_crew_wait(&crew, t0 + (int64_t)SEM_GRACE_S * 1000000000) != 0) {
        nmb_complain("sem_permits: a command failed or hung");
        return -1;
    }
    double all_ms = (double)(nmb_now_ns() - t0) / 1e6;
    int rc = sem_read(file, wall0, f);
    f->all_ms = all_ms;
    if (rc != 0)
        nmb_complain("sem_permits: %s does not have a stay of every command", file);
    unlink(file);
    return rc;
}

/* ---- the uncontended reference ----------------------------------------- */

typedef struct {
    int ready;
    uint64_t cycles;
    double secs;
    int err;
} semref_t;

static int sem_ref_child(void *arg, int index)
{
    semref_t *b = arg;
    netmutex_config_t cfg = nmb_bench_config(0);
    netmutex_sem_t s;
    char name[160];
    int err;
    (void)index;
    nmb_mutex_name(name, sizeof name, "sem_permits/uncontended");
    if ((err = netmutex_configure(&cfg)) != 0 ||
        (err = netmutex_sem_init(&s, name, SEM_PERMITS, NULL)) != 0 ||
        (err = netmutex_sem_wait(&s)) != 0 || (err = netmutex_sem_post(&s)) != 0) {
        b->err = err;
        return -1;
    }
    int64_t t0 = nmb_now_ns(), end = t0 + (int64_t)(nmb_opt.duration_s / 2 * 1e9);
    uint64_t n = 0;
    while (nmb_now_ns() < end) {
        if ((err = netmutex_sem_wait(&s)) != 0 || (err = netmutex_sem_post(&s)) != 0)
            break;
        n++;
    }
    b->secs = (double)(nmb_now_ns() - t0) / 1e9;
    b->cycles = n;
    b->err = err;
    netmutex_sem_destroy(&s);
    netmutex_shutdown();
    return err ? -1 : 0;
}

static int sem_reference(semref_t *b)
{
    crew_t crew;
    if (nmb_crew_spawn(&crew, 1, sem_ref_child, b) != 0) {
        nmb_crew_kill(&crew);
        return -1;
    }
    int64_t deadline = nmb_now_ns() + (int64_t)((nmb_opt.duration_s + SEM_GRACE_S) * 1e9);
    return nmb_crew_wait(&crew, deadline) == 0 && b->secs > 0 ? 0 : -1;
}

/* ---- the scenario ---------------------------------------------------------- */

/* The median of the N values GET picks out of F. */
static double sem_median(const semfig_t *f, int n, double (*get)(const semfig_t *))
{
    double v[SEM_MAX_RUNS];
    for (int i = 0; i < n; i++)
        v[i] = get(&f[i]);
    return nmb_median(v, (size_t)n);
}

static double get_rounds(const semfig_t *f) { return (double)f->rounds; }
static double get_first(const semfig_t *f) { return f->first_in_ms; }
static double get_all(const semfig_t *f) { return f->all_ms; }

static int sem_report(const scenario_t *sc, int runs, const semfig_t *f, const semref_t *ref)
{
    jline_t j;
    int most = 0, least = SEM_CMDS;
    double all_max = 0;
    for (int i = 0; i < runs; i++) {
        most = f[i].max_inside > most ? f[i].max_inside : most;
        least = f[i].max_inside < least ? f[i].max_inside : least;
        all_max = f[i].all_ms > all_max ? f[i].all_ms : all_max;
    }
    nmb_j_begin(&j, sc->name);
    nmb_j_int(&j, "commands", SEM_CMDS);
    nmb_j_int(&j, "permits", SEM_PERMITS);
    nmb_j_int(&j, "hold_ms", SEM_HOLD_MS);
    nmb_j_int(&j, "runs", runs);
    nmb_j_figure(&j, "max_inside", most, SEM_PERMITS, AT_MOST);
    nmb_j_figure(&j, "min_run_max_inside", least, SEM_PERMITS, AT_LEAST);
    nmb_j_num(&j, "rounds_p50", sem_median(f, runs, get_rounds));
    nmb_j_int(&j, "rounds_ideal", (SEM_CMDS + SEM_PERMITS - 1) / SEM_PERMITS);
    nmb_j_num(&j, "first_in_p50_ms", sem_median(f, runs, get_first));
    nmb_j_num(&j, "all_through_p50_ms", sem_median(f, runs, get_all));
    nmb_j_num(&j, "all_through_max_ms", all_max);
    nmb_j_int(&j, "uncontended_cycles", (long long)ref->cycles);
    nmb_j_num(&j, "uncontended_cycles_per_s", (double)ref->cycles / ref->secs);
    nmb_j_rtt_bound(&j, (double)ref->cycles / ref->secs);
    nmb_j_end(&j);
    return 0;
}

int nmb_sc_sem_permits(const scenario_t *sc)
{
    semfig_t f[SEM_MAX_RUNS];
    int runs = 0, rc = 0;
    const char *tmp = getenv("TMPDIR");
    char dir[256];
    if (access(NETMUTEX_CLI, X_OK) != 0) {
        nmb_complain("%s: %s", NETMUTEX_CLI, strerror(errno));
        return nmb_report_error(sc->name, "no netmutex tool: build tools/ first");
    }
    sem_find_cli();
    snprintf(dir, sizeof dir, "%s/nm_bench_sem.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return nmb_report_error(sc->name, "mkdtemp failed");
    fprintf(stderr,
            "nm_bench: %s: %d netmutex --permits %d commands at once, each inside %d ms, "
            "for %g s (%d runs at least); then sem_wait+sem_post alone, %g s\n"
            "nm_bench: %s: the tool: %s\n",
            sc->name, SEM_CMDS, SEM_PERMITS, SEM_HOLD_MS, nmb_opt.duration_s, SEM_MIN_RUNS,
            nmb_opt.duration_s / 2, sc->name, sem_cli);
    int64_t end = nmb_now_ns() + (int64_t)(nmb_opt.duration_s * 1e9);
    while (runs < SEM_MAX_RUNS && (runs < SEM_MIN_RUNS || nmb_now_ns() < end)) {
        if (sem_once(dir, runs, &f[runs]) != 0) {
            rc = -1;
            break;
        }
        runs++;
    }
    rmdir(dir);
    if (rc != 0)
        return nmb_report_error(sc->name, "a run of the commands failed");
    semref_t *ref = mmap(NULL, sizeof *ref, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                         -1, 0);
    if (ref == MAP_FAILED)
        return nmb_report_error(sc->name, "mmap failed");
    memset(ref, 0, sizeof *ref);
    if (sem_reference(ref) != 0) {
        char msg[96];
        snprintf(msg, sizeof msg, "sem_wait/sem_post: %s", ref->err ? nmb_errname(ref->err)
                                                                    : "the worker failed");
        rc = nmb_report_error(sc->name, msg);
    } else {
        rc = sem_report(sc, runs, f, ref);
    }
    munmap(ref, sizeof *ref);
    return rc;
}
