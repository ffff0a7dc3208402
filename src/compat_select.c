/*
 * compat_select.c -- which pthread mutexes are network mutexes.
 *
 * NETMUTEX_MUTEXES="sym[=name],file.c:LINE[=name],..." is read once, on
 * the first call that needs it.  A SYM is the symbol of a global mutex,
 * found with dlsym(RTLD_DEFAULT) -- so the executable must export its
 * symbols (-Wl,--export-dynamic) -- and FILE:LINE is where a source-route
 * PTHREAD_MUTEX_INITIALIZER stands, which also reaches static mutexes
 * that have no symbol.  NAME defaults to the selector itself; the
 * configured key prefix keeps applications apart.  A selector that
 * matches nothing is reported on stderr: silently keeping a mutex local
 * would be the worst failure.
 *
 * Selected addresses live in a fixed open-addressing table that readers
 * probe without a lock: the link route asks it on every call, so for an
 * unselected mutex the answer must cost a hash and a load or two.  Keys
 * are only ever added, and a slot whose selection ended (a registration,
 * at destroy) keeps its key as a tombstone so probe chains stay intact;
 * writers serialize on table_lock.
 */
#include "wrap.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS NM_SELECT_SLOTS
#define MAX_KEYS (SLOTS / 2)   /* keeps probe chains short */

typedef nm_slot_t slot_t;

typedef struct line_sel {
    char *file;
    int line;
    char *name;
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
        if (!tomb && !s->name && !s->port)
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

static void complain(const char *item, const char *why)
{
    fprintf(stderr, "netmutex: NETMUTEX_MUTEXES: '%s': %s\n", item, why);
}

static int add_symbol(const char *sym, const char *name)
{
    void *addr = dlsym(RTLD_DEFAULT, sym);
    if (!addr)
        return ENOENT;
    char *copy = strdup(name);
    if (!copy)
        return ENOMEM;
    __real_pthread_mutex_lock(&table_lock);
    slot_t *s = claim(addr);
    if (s) {
        free(s->name);
        __atomic_store_n(&s->name, copy, __ATOMIC_RELEASE);
        s->permanent = 1;
    }
    __real_pthread_mutex_unlock(&table_lock);
    if (!s)
        free(copy);
    return s ? 0 : ENOSPC;
}

static int add_line(char *file, char *colon, const char *name)
{
    char *end;
    long line = strtol(colon + 1, &end, 10);
    if (colon == file || *end || line <= 0 || line > INT32_MAX)
        return EINVAL;
    line_sel_t *grown = realloc(lines, (nlines + 1) * sizeof *lines);
    if (!grown)
        return ENOMEM;
    lines = grown;
    *colon = '\0';
    line_sel_t sel = { strdup(file), (int)line, strdup(name) };
    *colon = ':';
    if (!sel.file || !sel.name) {
        free(sel.file);
        free(sel.name);
        return ENOMEM;
    }
    lines[nlines++] = sel;
    return 0;
}

static void add_item(char *item)
{
    char *eq = strchr(item, '='), *name = item;
    if (eq) {
        *eq = '\0';
        name = eq + 1;
    }
    char *colon = strrchr(item, ':');
    int err = !item[0] || !nm_port_name_ok(name) ? EINVAL
              : colon ? add_line(item, colon, name) : add_symbol(item, name);
    if (err == ENOENT)
        complain(item, "no such global symbol (was the program linked with "
                       "-Wl,--export-dynamic?)");
    else if (err)
        complain(item, strerror(err));
}

static void parse_items(void)
{
    const char *env = getenv("NETMUTEX_MUTEXES");
    char *copy, *save = NULL;
    if (!env || !(copy = strdup(env)))
        return;
    for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save))
        add_item(item);
    free(copy);
}

static void parse_env(void)
{
    parse_items();
    __atomic_store_n(&nm_select_parsed, 1, __ATOMIC_RELEASE);
}

static void ensure_parsed(void)
{
    if (!__atomic_load_n(&nm_select_parsed, __ATOMIC_ACQUIRE))
        pthread_once(&parse_once, parse_env);
}

/* Under table_lock: the port of S, made now if it has none yet. */
static nm_port_t *make_port(slot_t *s, pthread_mutex_t *addr, int *err)
{
    nm_port_t *p = s->port;
    if (!p && s->name && (*err = nm_port_create(&p, s->name, addr)) == 0)
        __atomic_store_n(&s->port, p, __ATOMIC_RELEASE);
    return p;
}

nm_port_t *nm_select_port_slow(pthread_mutex_t *addr, int *err)
{
    *err = 0;
    ensure_parsed();
    if (__atomic_load_n(&nm_select_nkeys, __ATOMIC_ACQUIRE) == 0)
        return NULL;
    slot_t *s = find(addr);
    if (!s)
        return NULL;
    nm_port_t *p = __atomic_load_n(&s->port, __ATOMIC_ACQUIRE);
    if (p || !__atomic_load_n(&s->name, __ATOMIC_ACQUIRE))
        return p;
    __real_pthread_mutex_lock(&table_lock);
    p = make_port(s, addr, err);
    __real_pthread_mutex_unlock(&table_lock);
    return p;
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
    err = !s ? ENOSPC : drop_port(s);
    if (!err) {
        free(s->name);
        __atomic_store_n(&s->name, copy, __ATOMIC_RELEASE);
        copy = NULL;
    }
    __real_pthread_mutex_unlock(&table_lock);
    free(copy);
    return err;
}

/* FILE as the compiler saw it ("../src/a.c") matches a selector "a.c",
 * "src/a.c" or the whole path. */
static int same_file(const char *file, const char *sel)
{
    size_t fl = strlen(file), sl = strlen(sel);
    if (fl < sl || strcmp(file + fl - sl, sel) != 0)
        return 0;
    return fl == sl || file[fl - sl - 1] == '/';
}

const char *nm_select_name(const void *addr, const char *file, int line)
{
    ensure_parsed();
    for (size_t i = 0; file && i < nlines; i++) {
        if (lines[i].line == line && same_file(file, lines[i].file))
            return lines[i].name;
    }
    slot_t *s = find(addr);
    return s ? __atomic_load_n(&s->name, __ATOMIC_ACQUIRE) : NULL;
}
