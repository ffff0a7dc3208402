/*
 * symbol.c -- which mutex (NETMUTEX_MUTEXES), condition variable
 * (NETMUTEX_CONDS) or read-write lock (NETMUTEX_RWLOCKS) a SYMBOL or
 * FILE:SYMBOL selector means, given every definition of the symbol in the
 * program (elfsym.c), or why there is none.
 *
 * A selector selects when exactly one object of its kind answers to it:
 * for SYMBOL any static or global of that name, for FILE:SYMBOL the
 * statics of that name whose source file, as the symbol table records it,
 * is FILE.  A mutex is a variable the size of a pthread_mutex_t, or of the
 * source route's netmutex_pthread_mutex_t: this library serves both
 * routes; a condition variable is the size of a pthread_cond_t, a
 * read-write lock of a pthread_rwlock_t (both routes keep these types).
 * Anything else -- ambiguity, a symbol of another kind, a stripped
 * executable, no such symbol -- is one line that says so and what
 * to do, and selects nothing: guessing would network an object nobody
 * asked for.
 */
#define NETMUTEX_PTHREAD_DECLARE_ONLY
#include "symbol.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elfsym.h"
#include "notes.h"
#include "netmutex/pthread.h"

#define LISTED 4   /* candidates named in a message; more are counted */

const nm_symbol_kind_t nm_symbol_mutex = {
    "NETMUTEX_MUTEXES", "mutex", "mutexes", "pthread_mutex_t",
    { sizeof(pthread_mutex_t), sizeof(netmutex_pthread_mutex_t) },
};
const nm_symbol_kind_t nm_symbol_cond = {
    "NETMUTEX_CONDS", "condition variable", "condition variables", "pthread_cond_t",
    { sizeof(pthread_cond_t), 0 },
};
const nm_symbol_kind_t nm_symbol_rwlock = {
    "NETMUTEX_RWLOCKS", "read-write lock", "read-write locks", "pthread_rwlock_t",
    { sizeof(pthread_rwlock_t), 0 },
};

static int is_kind(const nm_symbol_kind_t *kind, const nm_elfsym_def_t *d)
{
    return d->kind == NM_ELFSYM_OBJECT &&
           (d->size == kind->sizes[0] || (kind->sizes[1] && d->size == kind->sizes[1]));
}

/* GCC records a source file's base name ("a.c"), clang the name it was
 * given ("../src/a.c"): whichever is longer must end with the other. */
static int in_file(const nm_elfsym_def_t *d, const char *file)
{
    if (!file)
        return 1;
    return d->local && d->file &&
           (nm_path_ends_with(d->file, file) || nm_path_ends_with(file, d->file));
}

/* "a.c:mut", "global mut", "static mut", with " in OBJECT" outside the
 * executable. */
static void describe(const nm_elfsym_def_t *d, const char *sym, char *buf, size_t size)
{
    int n;
    if (d->local && d->file && d->file[0])
        n = snprintf(buf, size, "%s:%s", d->file, sym);
    else
        n = snprintf(buf, size, "%s %s", d->local ? "static" : "global", sym);
    if (!d->in_exe && n >= 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, " in %s", d->object);
}

/* DEFS described, comma-separated, the first LISTED of them. */
static void list(const nm_elfsym_def_t *const *defs, size_t n, const char *sym, char *buf,
                 size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && i < LISTED && used < size; i++) {
        char one[512];
        describe(defs[i], sym, one, sizeof one);
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? ", " : "", one);
    }
    if (n > LISTED && used < size)
        snprintf(buf + used, size - used, " and %zu more", n - LISTED);
}

static void ambiguous(const nm_symbol_kind_t *kind, const nm_spec_t *spec,
                      const nm_elfsym_def_t *const *defs, size_t n)
{
    char names[2048];
    const nm_elfsym_def_t *example = NULL;
    list(defs, n, spec->symbol, names, sizeof names);
    for (size_t i = 0; i < n && !example; i++)
        example = defs[i]->local && defs[i]->file && defs[i]->file[0] ? defs[i] : NULL;
    if (!spec->file && example)
        nm_note(NETMUTEX_LOG_ERROR,
                "%s: '%s' is ambiguous: %zu %s have that name (%s); select "
                "one as FILE:SYMBOL, e.g. '%s:%s=NAME'; none of them is selected",
                kind->env, spec->text, n, kind->plural, names, example->file, spec->symbol);
    else
        nm_note(NETMUTEX_LOG_ERROR,
                "%s: '%s' is ambiguous: %zu %s match (%s) and their symbol "
                "tables cannot tell them apart; rename one%s; none of them is selected",
                kind->env, spec->text, n, kind->plural, names,
                kind == &nm_symbol_mutex ? " or select it in the code with "
                "netmutex_wrap_register()" : "");
}

static void not_a_kind(const nm_symbol_kind_t *kind, const nm_spec_t *spec,
                       const nm_elfsym_def_t *d)
{
    char what[64], name[600];
    describe(d, spec->symbol, name, sizeof name);
    switch (d->kind) {
    case NM_ELFSYM_FUNC: snprintf(what, sizeof what, "a function"); break;
    case NM_ELFSYM_TLS: snprintf(what, sizeof what, "a thread-local variable"); break;
    case NM_ELFSYM_OBJECT: snprintf(what, sizeof what, "an object of %zu bytes", d->size); break;
    default: snprintf(what, sizeof what, "not a variable"); break;
    }
    nm_note(NETMUTEX_LOG_ERROR,
            "%s: '%s' names a non-%s symbol: %s is %s, not a %s (a "
            "%s is an object of %zu bytes); it selects nothing",
            kind->env, spec->text, kind->noun, name, what, kind->noun, kind->type,
            kind->sizes[0]);
}

/* Nothing of that name (in that file): say what is there instead, or why
 * the tables could not tell.  An unreadable executable still has its
 * exported globals, which dlsym finds (unchecked: there is no size). */
static uintptr_t not_found(const nm_symbol_kind_t *kind, const nm_spec_t *spec,
                           const nm_elfsym_query_t *q,
                           const nm_elfsym_scan_t *scan, char *what, size_t size)
{
    const char *sel = spec->text, *sym = spec->symbol;
    void *addr = scan->exe_error && !spec->file ? dlsym(RTLD_DEFAULT, sym) : NULL;
    if (addr) {
        snprintf(what, size, "global %s (found by dlsym; %s)", sym, scan->exe_error);
        return (uintptr_t)addr;
    }
    if (spec->file && q->ndefs > 0) {
        char names[2048];
        const nm_elfsym_def_t *defs[LISTED];
        size_t n = q->ndefs < LISTED ? q->ndefs : LISTED;
        for (size_t i = 0; i < n; i++)
            defs[i] = &q->defs[i];
        list(defs, n, sym, names, sizeof names);
        nm_note(NETMUTEX_LOG_ERROR,
                "%s: '%s': no static %s recorded for a file %s (the symbol "
                "tables have %s%s); it selects nothing",
                kind->env, sel, sym, spec->file, names, q->ndefs > n ? ", ..." : "");
    } else if (scan->exe_error) {
        nm_note(NETMUTEX_LOG_ERROR, "%s: '%s': not found (%s); it selects nothing",
                kind->env, sel, scan->exe_error);
    } else if (scan->exe_stripped) {
        nm_note(NETMUTEX_LOG_ERROR,
                "%s: '%s': not found, and the executable %s is stripped (it has "
                "no .symtab, so only exported globals can be found); build it unstripped "
                "(no strip, no -s)%s; it selects nothing",
                kind->env, sel, scan->exe,
                kind == &nm_symbol_mutex ? ", or select the mutex in the code with "
                "netmutex_wrap_register()" : "");
    } else {
        nm_note(NETMUTEX_LOG_ERROR,
                "%s: '%s': no symbol %s in the program or its libraries; it "
                "selects nothing", kind->env, sel, sym);
    }
    return 0;
}

/* Q's definitions that SPEC matches and that are of KIND, one per address
 * (a global interposed by another object's is one object), into OUT;
 * *OTHER is the first match that is not of KIND. */
static size_t candidates(const nm_symbol_kind_t *kind, const nm_spec_t *spec,
                         const nm_elfsym_query_t *q,
                         const nm_elfsym_def_t **out, const nm_elfsym_def_t **other)
{
    size_t n = 0;
    *other = NULL;
    for (size_t i = 0; i < q->ndefs; i++) {
        const nm_elfsym_def_t *d = &q->defs[i];
        size_t k = 0;
        if (!in_file(d, spec->file))
            continue;
        if (!is_kind(kind, d)) {
            *other = *other ? *other : d;
            continue;
        }
        while (k < n && out[k]->addr != d->addr)
            k++;
        if (k == n)
            out[n++] = d;
    }
    return n;
}

uintptr_t nm_symbol_resolve(const nm_symbol_kind_t *kind, const nm_spec_t *spec,
                            const nm_elfsym_query_t *q, const nm_elfsym_scan_t *scan,
                            char *what, size_t size)
{
    const nm_elfsym_def_t **found = malloc((q->ndefs + 1) * sizeof *found);
    const nm_elfsym_def_t *other;
    uintptr_t addr = 0;
    if (!found) {
        nm_note(NETMUTEX_LOG_ERROR, "%s: '%s': out of memory", kind->env, spec->text);
        return 0;
    }
    size_t n = candidates(kind, spec, q, found, &other);
    if (n == 1) {
        describe(found[0], spec->symbol, what, size);
        addr = found[0]->addr;
    } else if (n > 1) {
        ambiguous(kind, spec, found, n);
    } else if (other) {
        not_a_kind(kind, spec, other);
    } else {
        addr = not_found(kind, spec, q, scan, what, size);
    }
    free(found);
    return addr;
}
