/*
 * select.c -- which pthread mutexes, condition variables and read-write
 * locks are network ones.
 *
 * NETMUTEX_MUTEXES="sym[=name],file.c:sym[=name],file.c:LINE[=name],..."
 * and NETMUTEX_CONDS and NETMUTEX_RWLOCKS, the same for condition
 * variables and read-write locks (but no FILE:LINE: their initializers
 * record no line), are read once, on the first
 * call that needs them (spec.c takes the items apart).  A SYM or FILE:SYM
 * is looked up, for all items at once, in the ELF symbol tables of the
 * program and its loaded objects, statics included (elfsym.c), and must
 * name exactly one mutex or condition variable (symbol.c); its address
 * goes into the table below.  A FILE:LINE is where a
 * source-route PTHREAD_MUTEX_INITIALIZER stands, matched when a mutex
 * initialized there is first used (nm_select_name).  NAME defaults to the
 * selector itself; the configured key prefix keeps applications apart.
 *
 * Nothing here fails in silence, since a mutex silently left local would
 * be the worst failure: an item that selects nothing says why in one line
 * when it is read, a FILE:LINE that no used mutex matched says so at exit,
 * and at log level info every selection is listed with its name.
 *
 * Selected addresses live in a fixed open-addressing table that readers
 * probe without a lock: the link route asks it on every call, so for an
 * unselected mutex the answer must cost a hash and a load or two.  Keys
 * are only ever added, and a slot whose selection ended (a registration,
 * at destroy) keeps its key as a tombstone so probe chains stay intact;
 * writers serialize on table_lock.
 */
#include "select.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "elfsym.h"
#include "notes.h"
#include "real.h"
#include "spec.h"
#include "symbol.h"

#define SLOTS NM_SELECT_SLOTS
#define MAX_KEYS (SLOTS / 2)   /* keeps probe chains short */

typedef nm_slot_t slot_t;

/* One item of either list, with the kind of object it selects. */
typedef struct item {
    nm_spec_t spec;
    const nm_symbol_kind_t *kind;
} item_t;

typedef struct line_sel {
    nm_spec_t spec;   /* an NM_SPEC_LINE */
    int used;         /* atomic: a mutex initialized there was used */
} line_sel_t;

slot_t nm_select_table[SLOTS];
unsigned int nm_select_nkeys;  /* atomic: keys in the table */
int nm_select_parsed;          /* atomic: parse_env has run */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static line_sel_t *lines;      /* written once, by parse_env */
static size_t nlines;
static pthread_once_t parse_once = PTHREAD_ONCE_INIT;

static slot_t *find(const void *addr)
{
    uintptr_t want = (uintptr_t)addr;
    size_t i = nm_select_hash(addr);
    for (size_t n = 0; n < SLOTS; n++, i = (i + 1) & (SLOTS - 1)) {
        uintptr_t k = __atomic_load_n(&nm_select_table[i].key, __ATOMIC_ACQUIRE);
        if (k == want)
            return &nm_select_table[i];
        if (k == 0)
            return NULL;
    }
    return NULL;
}

/* Under table_lock: the slot of ADDR, claiming an empty slot or a
 * tombstone for it.  NULL when the table is full. */
static slot_t *claim(const void *addr)
{
    uintptr_t want = (uintptr_t)addr;
    slot_t *tomb = NULL;
    size_t i = nm_select_hash(addr);
    for (size_t n = 0; n < SLOTS; n++, i = (i + 1) & (SLOTS - 1)) {
        slot_t *s = &nm_select_table[i];
        if (s->key == want)
            return s;
        if (s->key == 0)
            break;
        if (!tomb && !s->name && !s->port && !s->cond && !s->rw)
            tomb = s;
    }
    if (tomb) {
        tomb->permanent = 0;
        __atomic_store_n(&tomb->key, want, __ATOMIC_RELEASE);
        return tomb;
    }
    if (nm_select_nkeys >= MAX_KEYS || nm_select_table[i].key != 0)
        return NULL;
    __atomic_store_n(&nm_select_table[i].key, want, __ATOMIC_RELEASE);
    __atomic_add_fetch(&nm_select_nkeys, 1, __ATOMIC_RELEASE);
    return &nm_select_table[i];
}

/* What an item of KIND's list selects. */
static nm_select_kind_t select_kind(const nm_symbol_kind_t *kind)
{
    if (kind == &nm_symbol_cond)
        return NM_SELECT_COND;
    return kind == &nm_symbol_rwlock ? NM_SELECT_RWLOCK : NM_SELECT_MUTEX;
}

/* Under table_lock: ADDR selected as IT says; WHAT describes it. */
static void select_locked(void *addr, const item_t *it, const char *what, char *copy)
{
    const nm_spec_t *spec = &it->spec;
    slot_t *s = claim(addr);
    if (!s) {
        nm_note(NETMUTEX_LOG_ERROR, "%s: '%s': more than %u mutexes, condition variables and "
                "read-write locks selected; it selects nothing", it->kind->env, spec->text, MAX_KEYS);
    } else if (s->name) {
        nm_note(NETMUTEX_LOG_WARN, "%s: '%s' names %s, which an earlier item "
                "already selected as '%s'; that name stays", it->kind->env, spec->text, what,
                s->name);
    } else {
        s->kind = select_kind(it->kind);
        __atomic_store_n(&s->name, copy, __ATOMIC_RELEASE);
        s->permanent = 1;
        nm_note(NETMUTEX_LOG_INFO, "%s: '%s' selects the %s %s as '%s'",
                it->kind->env, spec->text, it->kind->noun, what, copy);
        return;
    }
    free(copy);
}

static void select_address(void *addr, const item_t *it, const char *what)
{
    char *copy = strdup(it->spec.name);
    if (!copy) {
        nm_note(NETMUTEX_LOG_ERROR, "%s: '%s': out of memory", it->kind->env, it->spec.text);
        return;
    }
    __real_pthread_mutex_lock(&table_lock);
    select_locked(addr, it, what, copy);
    __real_pthread_mutex_unlock(&table_lock);
}

/* The symbol items of ITEMS, all looked up in one reading of the symbol
 * tables: it is the slow part, and it happens once. */
static void select_symbols(const item_t *items, size_t n)
{
    nm_elfsym_query_t *queries = calloc(n ? n : 1, sizeof *queries);
    nm_elfsym_scan_t scan = { queries, 0, NULL, 0, NULL };
    for (size_t i = 0; queries && i < n; i++) {
        if (items[i].spec.kind == NM_SPEC_SYMBOL)
            queries[scan.nqueries++].name = items[i].spec.symbol;
    }
    if (!queries || (scan.nqueries && nm_elfsym_scan(&scan) != 0))
        nm_note(NETMUTEX_LOG_ERROR, "NETMUTEX_MUTEXES: out of memory reading the symbol tables");
    for (size_t i = 0, q = 0; queries && i < n; i++) {
        char what[1024];
        if (items[i].spec.kind != NM_SPEC_SYMBOL)
            continue;
        uintptr_t addr = nm_symbol_resolve(items[i].kind, &items[i].spec, &queries[q++], &scan,
                                           what, sizeof what);
        if (addr)
            select_address((void *)addr, &items[i], what);
    }
    nm_elfsym_free(&scan);
    free(queries);
}

/* The FILE:LINE items of ITEMS move to LINES, for nm_select_name; a
 * condition variable's or read-write lock's selects nothing, and says so. */
static void keep_lines(item_t *items, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        nm_spec_t *spec = &items[i].spec;
        if (spec->kind != NM_SPEC_LINE)
            continue;
        if (items[i].kind != &nm_symbol_mutex) {
            nm_note(NETMUTEX_LOG_ERROR, "%s: '%s': FILE:LINE selects mutexes only "
                    "(PTHREAD_COND_INITIALIZER and PTHREAD_RWLOCK_INITIALIZER record no "
                    "line); select the %s as SYMBOL or FILE:SYMBOL; it selects nothing",
                    items[i].kind->env, spec->text, items[i].kind->noun);
            continue;
        }
        line_sel_t *grown = realloc(lines, (nlines + 1) * sizeof *lines);
        if (!grown) {
            nm_note(NETMUTEX_LOG_ERROR, "NETMUTEX_MUTEXES: '%s': out of memory", spec->text);
            continue;
        }
        lines = grown;
        lines[nlines++] = (line_sel_t){ *spec, 0 };
        memset(spec, 0, sizeof *spec);
    }
}

/* At exit: a FILE:LINE that no used mutex matched may be a typo, a line
 * that moved, or a program built by the link route, which has no
 * initializer lines -- the mutex it meant stayed local all along. */
static void report_unused_lines(void)
{
    for (size_t i = 0; i < nlines; i++) {
        if (!__atomic_load_n(&lines[i].used, __ATOMIC_ACQUIRE))
            netmutex_log(NETMUTEX_LOG_WARN,
                         "NETMUTEX_MUTEXES: '%s' matched no mutex: none initialized by the "
                         "PTHREAD_MUTEX_INITIALIZER of that line was used (FILE:LINE works on "
                         "the source route only, -include netmutex/pthread.h)",
                         lines[i].spec.text);
    }
}

static char *trim(char *s)
{
    char *end = s + strlen(s);
    while (isspace((unsigned char)*s))
        s++;
    while (end > s && isspace((unsigned char)end[-1]))
        *--end = '\0';
    return s;
}

/* One item of KIND's list into ITEMS, or a note on why it is not one. */
static void read_item(char *text, const nm_symbol_kind_t *kind, item_t **items, size_t *n)
{
    const char *why;
    nm_spec_t spec;
    item_t *grown = realloc(*items, (*n + 1) * sizeof **items);
    int err = grown ? nm_spec_parse(text, &spec, &why) : ENOMEM;
    if (grown)
        *items = grown;
    if (err == EINVAL)
        nm_note(NETMUTEX_LOG_ERROR, "%s: '%s': malformed selector: %s; an item "
                "is SYMBOL, FILE:SYMBOL or FILE:LINE, each optionally followed by =NAME; it "
                "selects nothing", kind->env, text, why);
    else if (err)
        nm_note(NETMUTEX_LOG_ERROR, "%s: '%s': out of memory", kind->env, text);
    else
        (*items)[(*n)++] = (item_t){ spec, kind };
}

/* The items of KIND's list, appended to ITEMS. */
static void read_items(const nm_symbol_kind_t *kind, item_t **items, size_t *n)
{
    const char *env = getenv(kind->env);
    char *copy, *save = NULL;
    if (!env || !(copy = strdup(env)))
        return;
    for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        item = trim(item);
        if (item[0])
            read_item(item, kind, items, n);
    }
    free(copy);
}

/* The table is published before the notes are logged: see notes.c. */
static void parse_env(void)
{
    item_t *items = NULL;
    size_t n = 0;
    read_items(&nm_symbol_mutex, &items, &n);
    read_items(&nm_symbol_cond, &items, &n);
    read_items(&nm_symbol_rwlock, &items, &n);
    select_symbols(items, n);
    keep_lines(items, n);
    for (size_t i = 0; i < n; i++)
        nm_spec_free(&items[i].spec);
    free(items);
    if (nlines)
        atexit(report_unused_lines);
    __atomic_store_n(&nm_select_parsed, 1, __ATOMIC_RELEASE);
    nm_notes_flush();
}

/* The parse reads files and may log: cancellation points, which the
 * pthread calls it runs under are not (core.h). */
static void ensure_parsed(void)
{
    if (!__atomic_load_n(&nm_select_parsed, __ATOMIC_ACQUIRE)) {
        int old = nm_port_nocancel();
        pthread_once(&parse_once, parse_env);
        nm_port_recancel(old);
    }
}

/* Under table_lock: the port of S, made now if it has none yet. */
static nm_port_t *make_port(slot_t *s, pthread_mutex_t *addr, int *err)
{
    nm_port_t *p = s->port;
    if (!p && s->name && s->kind == NM_SELECT_MUTEX && (*err = nm_port_create(&p, s->name, addr)) == 0)
        __atomic_store_n(&s->port, p, __ATOMIC_RELEASE);
    return p;
}

/* Under table_lock: the netmutex condition of S, made now if it has none
 * yet.  Its clock does not matter: a wait names the real one's. */
static netmutex_cond_t *make_cond(slot_t *s, int *err)
{
    netmutex_cond_t *c = s->cond;
    if (c || !s->name || s->kind != NM_SELECT_COND)
        return c;
    if (!(c = malloc(sizeof *c))) {
        *err = ENOMEM;
    } else if ((*err = netmutex_cond_init(c, s->name, NULL)) != 0) {
        free(c);
        c = NULL;
    } else {
        __atomic_store_n(&s->cond, c, __ATOMIC_RELEASE);
    }
    return c;
}

/* glibc's kind of the real read-write lock REAL, as netmutex's: its
 * default, PTHREAD_RWLOCK_PREFER_READER_NP, is 0 in __flags; the two
 * writer kinds prefer writers (netmutex's readers may always read again). */
static int rwlock_kind(const pthread_rwlock_t *real)
{
    return real->__data.__flags == PTHREAD_RWLOCK_PREFER_READER_NP
               ? NETMUTEX_RWLOCK_PREFER_READER
               : NETMUTEX_RWLOCK_PREFER_WRITER;
}

/* Under table_lock: the netmutex read-write lock of S, made now if it has
 * none yet, with the kind of the real one at ADDR. */
static netmutex_rwlock_t *make_rwlock(slot_t *s, const pthread_rwlock_t *addr, int *err)
{
    netmutex_rwlock_t *rw = s->rw;
    netmutex_rwlockattr_t attr;
    if (rw || !s->name || s->kind != NM_SELECT_RWLOCK)
        return rw;
    netmutex_rwlockattr_init(&attr);
    netmutex_rwlockattr_setkind(&attr, rwlock_kind(addr));
    if (!(rw = malloc(sizeof *rw))) {
        *err = ENOMEM;
    } else if ((*err = netmutex_rwlock_init(rw, s->name, &attr)) != 0) {
        free(rw);
        rw = NULL;
    } else {
        __atomic_store_n(&s->rw, rw, __ATOMIC_RELEASE);
    }
    netmutex_rwlockattr_destroy(&attr);
    return rw;
}

/* The slot of ADDR if it is selected, NULL if it is not. */
static slot_t *find_selected(const void *addr)
{
    ensure_parsed();
    if (__atomic_load_n(&nm_select_nkeys, __ATOMIC_ACQUIRE) == 0)
        return NULL;
    slot_t *s = find(addr);
    return s && __atomic_load_n(&s->name, __ATOMIC_ACQUIRE) ? s : NULL;
}

nm_port_t *nm_select_port_slow(pthread_mutex_t *addr, int *err)
{
    *err = 0;
    slot_t *s = find_selected(addr);
    if (!s)
        return NULL;
    nm_port_t *p = __atomic_load_n(&s->port, __ATOMIC_ACQUIRE);
    if (p)
        return p;
    __real_pthread_mutex_lock(&table_lock);
    p = make_port(s, addr, err);
    __real_pthread_mutex_unlock(&table_lock);
    return p;
}

netmutex_cond_t *nm_select_cond_slow(pthread_cond_t *addr, int *err)
{
    *err = 0;
    slot_t *s = find_selected(addr);
    if (!s)
        return NULL;
    netmutex_cond_t *c = __atomic_load_n(&s->cond, __ATOMIC_ACQUIRE);
    if (c)
        return c;
    __real_pthread_mutex_lock(&table_lock);
    c = make_cond(s, err);
    __real_pthread_mutex_unlock(&table_lock);
    return c;
}

netmutex_rwlock_t *nm_select_rwlock_slow(pthread_rwlock_t *addr, int *err)
{
    *err = 0;
    slot_t *s = find_selected(addr);
    if (!s)
        return NULL;
    netmutex_rwlock_t *rw = __atomic_load_n(&s->rw, __ATOMIC_ACQUIRE);
    if (rw)
        return rw;
    __real_pthread_mutex_lock(&table_lock);
    rw = make_rwlock(s, addr, err);
    __real_pthread_mutex_unlock(&table_lock);
    return rw;
}

/* Under table_lock: frees S's port unless it is locked. */
static int drop_port(slot_t *s)
{
    int err = s->port ? nm_port_free(s->port) : 0;
    if (!err)
        __atomic_store_n(&s->port, NULL, __ATOMIC_RELEASE);
    return err;
}

int nm_select_drop(pthread_mutex_t *addr)
{
    ensure_parsed();
    slot_t *s = find(addr);
    if (!s)
        return 0;
    __real_pthread_mutex_lock(&table_lock);
    int err = drop_port(s);
    if (!err && !s->permanent) {
        free(s->name);
        __atomic_store_n(&s->name, NULL, __ATOMIC_RELEASE);
    }
    __real_pthread_mutex_unlock(&table_lock);
    return err;
}

int nm_select_cond_drop(pthread_cond_t *addr)
{
    ensure_parsed();
    slot_t *s = find(addr);
    int err = 0;
    if (!s)
        return 0;
    __real_pthread_mutex_lock(&table_lock);
    if (s->cond && (err = netmutex_cond_destroy(s->cond)) == 0) {
        free(s->cond);
        __atomic_store_n(&s->cond, NULL, __ATOMIC_RELEASE);
    }
    __real_pthread_mutex_unlock(&table_lock);
    return err;
}

/* A netmutex read-write lock destroyed while held here, set aside. */
typedef struct orphan {
    struct orphan *next;
    netmutex_rwlock_t *rw;
} orphan_t;

static orphan_t *orphans;  /* under table_lock */

/* Under table_lock: RW, which a thread of this process holds, set aside
 * for good; 0, or ENOMEM. */
static int set_aside(netmutex_rwlock_t *rw)
{
    orphan_t *o = malloc(sizeof *o);
    if (!o)
        return ENOMEM;
    *o = (orphan_t){ orphans, rw };
    orphans = o;
    return 0;
}

static void tell_set_aside(const pthread_rwlock_t *addr)
{
    static int told;
    if (__atomic_exchange_n(&told, 1, __ATOMIC_RELAXED))
        return;
    int old = nm_port_nocancel();
    netmutex_log(NETMUTEX_LOG_WARN, "pthread_rwlock_destroy: the selected read-write lock at "
                 "%p is still held by a thread of this process; its holds stay until that "
                 "thread unlocks it or the process exits (reported once)", (const void *)addr);
    nm_port_recancel(old);
}

int nm_select_rwlock_drop(pthread_rwlock_t *addr)
{
    ensure_parsed();
    slot_t *s = find(addr);
    int err = 0, held = 0;
    if (!s)
        return 0;
    __real_pthread_mutex_lock(&table_lock);
    if (s->rw) {
        err = netmutex_rwlock_destroy(s->rw);
        if (err == EBUSY)
            held = (err = set_aside(s->rw)) == 0;
        else if (err == 0)
            free(s->rw);
        if (err == 0)
            __atomic_store_n(&s->rw, NULL, __ATOMIC_RELEASE);
    }
    __real_pthread_mutex_unlock(&table_lock);
    if (held)
        tell_set_aside(addr);
    return err;
}

int nm_select_register(pthread_mutex_t *addr, const char *name)
{
    char *copy;
    int err;
    if (!addr || !nm_port_name_ok(name))
        return EINVAL;
    if ((err = nm_port_idle(addr)) != 0)
        return err;
    if (!(copy = strdup(name)))
        return ENOMEM;
    ensure_parsed();
    __real_pthread_mutex_lock(&table_lock);
    slot_t *s = claim(addr);
    err = !s ? ENOSPC : s->kind != NM_SELECT_MUTEX && s->name ? EINVAL : drop_port(s);
    if (!err) {
        free(s->name);
        s->kind = NM_SELECT_MUTEX;
        __atomic_store_n(&s->name, copy, __ATOMIC_RELEASE);
        copy = NULL;
    }
    __real_pthread_mutex_unlock(&table_lock);
    free(copy);
    if (!err)
        netmutex_log(NETMUTEX_LOG_INFO, "netmutex_wrap_register: the mutex at %p is '%s'",
                     (void *)addr, name);
    return err;
}

/* FILE as the compiler saw it ("../src/a.c") matches a selector "a.c",
 * "src/a.c" or the whole path.  The first use of a mutex a FILE:LINE
 * selects is listed at level info, once per selector. */
const char *nm_select_name(const void *addr, const char *file, int line)
{
    ensure_parsed();
    for (size_t i = 0; file && i < nlines; i++) {
        line_sel_t *l = &lines[i];
        if (l->spec.line != line || !nm_path_ends_with(file, l->spec.file))
            continue;
        if (!__atomic_exchange_n(&l->used, 1, __ATOMIC_ACQ_REL)) {
            int old = nm_port_nocancel();
            netmutex_log(NETMUTEX_LOG_INFO, "NETMUTEX_MUTEXES: '%s' selects the mutex "
                         "initialized at %s:%d as '%s'", l->spec.text, file, line, l->spec.name);
            nm_port_recancel(old);
        }
        return l->spec.name;
    }
    slot_t *s = find(addr);
    const char *name = s ? __atomic_load_n(&s->name, __ATOMIC_ACQUIRE) : NULL;
    return name && s->kind == NM_SELECT_MUTEX ? name : NULL;
}
