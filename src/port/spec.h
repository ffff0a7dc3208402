/*
 * spec.h -- one NETMUTEX_MUTEXES item taken apart (spec.c): SYMBOL,
 * FILE:SYMBOL or FILE:LINE, each with an optional =NAME.  Only the syntax
 * is judged here, apart from any lookup, so a malformed item gets its own
 * message; what a selector matches is for symbol.c and select.c to find
 * out.
 */
#ifndef NM_PORT_SPEC_H
#define NM_PORT_SPEC_H

#include <ac_config.h>

typedef enum nm_spec_kind { NM_SPEC_SYMBOL, NM_SPEC_LINE } nm_spec_kind_t;

typedef struct nm_spec {
    nm_spec_kind_t kind;
    char *text;      /* the selector as written, without =NAME */
    char *file;      /* FILE of FILE:LINE or FILE:SYMBOL; NULL for SYMBOL */
    char *symbol;    /* NM_SPEC_SYMBOL */
    int line;        /* NM_SPEC_LINE */
    char *name;      /* the cluster-wide name: NAME, or the selector */
} nm_spec_t;

/* ITEM ("SYMBOL", "FILE:SYMBOL" or "FILE:LINE", each with an optional
 * "=NAME") into *SPEC: 0, EINVAL with *WHY saying what is wrong with it (a
 * static string), or ENOMEM; *SPEC is empty unless 0. */
int nm_spec_parse(const char *item, nm_spec_t *spec, const char **why);
void nm_spec_free(nm_spec_t *spec);
/* 1 when the name is one netmutex_init would take. */
int nm_port_name_ok(const char *name);
/* 1 when PATH is TAIL or ends with "/" TAIL. */
int nm_path_ends_with(const char *path, const char *tail);

#endif /* NM_PORT_SPEC_H */
