/*
 * spec.c -- one NETMUTEX_MUTEXES item taken apart:
 *
 *   SYMBOL[=NAME]        a mutex variable, static or global
 *   FILE:SYMBOL[=NAME]   the static SYMBOL of source file FILE, for when
 *                        several files have a static of that name
 *   FILE:LINE[=NAME]     where a source-route PTHREAD_MUTEX_INITIALIZER is
 *
 * Digits after the last colon make a line, anything else a symbol.  Only
 * the syntax is judged here; what a selector matches is for
 * symbol.c and select.c to find out.
 */
#include "spec.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "netmutex.h"

#define STR_(x) #x
#define STR(x) STR_(x)

static const char nomem[] = "out of memory";

/* Here, beside the selectors' syntax it judges, so that spec.c stands
 * alone (its fuzz target builds it without the rest of the port). */
int nm_port_name_ok(const char *name)
{
    return name && name[0] && strnlen(name, NETMUTEX_NAME_MAX + 1) <= NETMUTEX_NAME_MAX;
}

/* What C compilers put in symbol tables: an identifier, plus the '.' of
 * the names GCC and clang give statics inside functions ("lock.0"). */
static int is_symbol(const char *s)
{
    if (!*s || isdigit((unsigned char)*s))
        return 0;
    for (; *s; s++) {
        if (!isalnum((unsigned char)*s) && *s != '_' && *s != '.' && *s != '$')
            return 0;
    }
    return 1;
}

static int all_digits(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++) {
        if (!isdigit((unsigned char)*s))
            return 0;
    }
    return 1;
}

static const char *take_line(nm_spec_t *spec, const char *digits)
{
    char *end;
    errno = 0;
    long line = strtol(digits, &end, 10);
    if (errno || *end || line <= 0 || line > INT32_MAX)
        return "line number out of range";
    spec->kind = NM_SPEC_LINE;
    spec->line = (int)line;
    return NULL;
}

static const char *take_symbol(nm_spec_t *spec, const char *sym)
{
    spec->kind = NM_SPEC_SYMBOL;
    if (!(spec->symbol = strdup(sym)))
        return nomem;
    if (!is_symbol(sym))
        return spec->file ? "after ':' neither a line number nor a symbol name"
                          : "not a symbol name";
    return NULL;
}

/* SPEC->text into kind, file and line or symbol. */
static const char *take_selector(nm_spec_t *spec)
{
    const char *text = spec->text, *colon = strrchr(text, ':');
    if (!text[0])
        return "empty selector";
    if (!colon)
        return take_symbol(spec, text);
    if (colon == text)
        return "no file name before ':'";
    if (!colon[1])
        return "nothing after ':'";
    if (!(spec->file = strndup(text, (size_t)(colon - text))))
        return nomem;
    return all_digits(colon + 1) ? take_line(spec, colon + 1) : take_symbol(spec, colon + 1);
}

int nm_spec_parse(const char *item, nm_spec_t *spec, const char **why)
{
    const char *eq = strchr(item, '=');
    memset(spec, 0, sizeof *spec);
    *why = NULL;
    spec->text = eq ? strndup(item, (size_t)(eq - item)) : strdup(item);
    if (!spec->text)
        return ENOMEM;
    *why = take_selector(spec);
    if (!*why && !(spec->name = strdup(eq ? eq + 1 : spec->text)))
        *why = nomem;
    if (!*why && !nm_port_name_ok(spec->name))
        *why = spec->name[0] ? "name longer than " STR(NETMUTEX_NAME_MAX) " bytes"
                             : "empty name after '='";
    if (!*why)
        return 0;
    nm_spec_free(spec);
    return *why == nomem ? ENOMEM : EINVAL;
}

int nm_path_ends_with(const char *path, const char *tail)
{
    size_t pl = strlen(path), tl = strlen(tail);
    if (pl < tl || strcmp(path + pl - tl, tail) != 0)
        return 0;
    return pl == tl || path[pl - tl - 1] == '/';
}

void nm_spec_free(nm_spec_t *spec)
{
    free(spec->text);
    free(spec->file);
    free(spec->symbol);
    free(spec->name);
    memset(spec, 0, sizeof *spec);
}
