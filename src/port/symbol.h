/*
 * symbol.h -- the one mutex, condition variable or read-write lock a
 * SYMBOL or FILE:SYMBOL selector names (symbol.c), from the definitions
 * elfsym.c read, or a note saying why there is none: guessing would
 * network an object nobody asked for.
 */
#ifndef NM_PORT_SYMBOL_H
#define NM_PORT_SYMBOL_H

#include <ac_config.h>

#include <stddef.h>
#include <stdint.h>

#include "spec.h"

/* What a selector of one list selects: its variable's name in messages,
 * the sizes an object of that type has (the routes' types differ), and
 * the list's name. */
typedef struct nm_symbol_kind {
    const char *env;      /* "NETMUTEX_MUTEXES" */
    const char *noun;     /* "mutex" */
    const char *plural;   /* "mutexes" */
    const char *type;     /* "pthread_mutex_t" */
    size_t sizes[2];      /* of an object of that type; 0: unused */
} nm_symbol_kind_t;

extern const nm_symbol_kind_t nm_symbol_mutex, nm_symbol_cond, nm_symbol_rwlock;

struct nm_elfsym_query;
struct nm_elfsym_scan;
/* The address of the one object of KIND that SPEC (a symbol selector)
 * names among Q's definitions, described in WHAT for messages; 0 when
 * there is no such one object, with a note saying why. */
uintptr_t nm_symbol_resolve(const nm_symbol_kind_t *kind, const nm_spec_t *spec,
                            const struct nm_elfsym_query *q,
                            const struct nm_elfsym_scan *scan, char *what, size_t size);

#endif /* NM_PORT_SYMBOL_H */
