/*
 * elfsym.h -- every definition of a symbol name in the running program's
 * ELF symbol tables: the executable's and each loaded object's, `static`
 * (local) symbols included, each with the source file the table records
 * for it.  This is what lets NETMUTEX_MUTEXES name a static mutex, which
 * has no dynamic symbol for dlsym to find.  Read with elfutils' libelf,
 * once, when the selection is parsed; what the definitions mean is
 * symbol.c's business.
 */
#ifndef NM_PORT_ELFSYM_H
#define NM_PORT_ELFSYM_H

#include <ac_config.h>

#include <stddef.h>
#include <stdint.h>

typedef enum nm_elfsym_kind {
    NM_ELFSYM_OBJECT,   /* a variable (STT_OBJECT) */
    NM_ELFSYM_FUNC,     /* a function */
    NM_ELFSYM_TLS,      /* a thread-local variable: no one address */
    NM_ELFSYM_OTHER,
} nm_elfsym_kind_t;

typedef struct nm_elfsym_def {
    uintptr_t addr;           /* run-time address: load base added */
    size_t size;              /* st_size */
    nm_elfsym_kind_t kind;
    int local;                /* STB_LOCAL: a static */
    char *file;               /* a local's source file (its STT_FILE), else NULL */
    char *object;             /* the ELF file it was read from */
    int in_exe;               /* that file is the executable */
} nm_elfsym_def_t;

typedef struct nm_elfsym_query {
    const char *name;         /* in: the symbol name */
    nm_elfsym_def_t *defs;    /* out: every definition, any file, any object */
    size_t ndefs;
} nm_elfsym_query_t;

typedef struct nm_elfsym_scan {
    nm_elfsym_query_t *queries;  /* in: the caller's array, filled in */
    size_t nqueries;
    char *exe;                   /* out: the executable's path, for messages */
    int exe_stripped;            /* out: it has no .symtab, only .dynsym was read */
    char *exe_error;             /* out: why it could not be read at all, or NULL */
} nm_elfsym_scan_t;

/* Reads the symbol tables once and fills in every query of SCAN.  Objects
 * that cannot be opened (the vDSO) are skipped, and so are libnetmutex's
 * own.  0, or ENOMEM (the definitions found so far are kept). */
int nm_elfsym_scan(nm_elfsym_scan_t *scan);
/* Frees what nm_elfsym_scan allocated (not the queries array). */
void nm_elfsym_free(nm_elfsym_scan_t *scan);

#endif /* NM_PORT_ELFSYM_H */
