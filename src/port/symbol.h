/*
 * symbol.h -- the one mutex a SYMBOL or FILE:SYMBOL selector names
 * (symbol.c), from the definitions elfsym.c read, or a note saying why
 * there is none: guessing would network a mutex nobody asked for.
 */
#ifndef NM_PORT_SYMBOL_H
#define NM_PORT_SYMBOL_H

#include <ac_config.h>

#include <stddef.h>
#include <stdint.h>

#include "spec.h"

struct nm_elfsym_query;
struct nm_elfsym_scan;
/* The address of the one mutex SPEC (a symbol selector) names among Q's
 * definitions, described in WHAT for messages; 0 when there is no such
 * one mutex, with a note saying why. */
uintptr_t nm_symbol_resolve(const nm_spec_t *spec, const struct nm_elfsym_query *q,
                            const struct nm_elfsym_scan *scan, char *what, size_t size);

#endif /* NM_PORT_SYMBOL_H */
