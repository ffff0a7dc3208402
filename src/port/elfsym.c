/*
 * elfsym.c -- see elfsym.h.
 *
 * dl_iterate_phdr lists the loaded objects with their load bases; each
 * file is read with libelf, its .symtab if it has one (locals are only
 * there), else its .dynsym.  In .symtab every file's locals follow an
 * STT_FILE symbol naming that source file, which is how a static is told
 * from another of the same name.  A symbol's address is its value plus the
 * object's load base (0 for a non-PIE executable).  A global of a shared
 * object may be interposed -- by the executable's copy, say -- so its
 * address is the one the dynamic linker binds, dlsym's.
 */
#include "elfsym.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct object {
    char *path;        /* what to open */
    uintptr_t base;
    int is_exe;
} object_t;

typedef struct objects {
    object_t *v;
    size_t n;
    int oom;
} objects_t;

/* libnetmutex's own mutexes are never wrapped, and must not make a user's
 * selector ambiguous: their objects are not read. */
static int ours(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return strncmp(base, "libnetmutex.so", 14) == 0 ||
           strncmp(base, "libnetmutex-wrap.so", 19) == 0;
}

/* glibc lists the executable first, with an empty name. */
static int collect(struct dl_phdr_info *info, size_t size, void *arg)
{
    objects_t *all = arg;
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    int is_exe = all->n == 0 && !name[0];
    if ((!is_exe && !name[0]) || ours(name))
        return 0;
    object_t *grown = realloc(all->v, (all->n + 1) * sizeof *all->v);
    char *path = strdup(is_exe ? "/proc/self/exe" : name);
    if (!grown || !path) {
        free(path);
        if (grown)
            all->v = grown;
        all->oom = 1;
        return 1;
    }
    all->v = grown;
    all->v[all->n++] = (object_t){ path, (uintptr_t)info->dlpi_addr, is_exe };
    return 0;
}

static void free_objects(objects_t *all)
{
    for (size_t i = 0; i < all->n; i++)
        free(all->v[i].path);
    free(all->v);
}

/* .symtab, or .dynsym when the file was stripped; *STRIPPED says which. */
static Elf_Scn *symbol_table(Elf *elf, int *stripped)
{
    Elf_Scn *scn = NULL, *dynsym = NULL;
    GElf_Shdr sh;
    while ((scn = elf_nextscn(elf, scn)) != NULL) {
        if (!gelf_getshdr(scn, &sh))
            continue;
        if (sh.sh_type == SHT_SYMTAB) {
            *stripped = 0;
            return scn;
        }
        if (sh.sh_type == SHT_DYNSYM)
            dynsym = scn;
    }
    *stripped = 1;
    return dynsym;
}

static nm_elfsym_kind_t kind_of(const GElf_Sym *sym)
{
    switch (GELF_ST_TYPE(sym->st_info)) {
    case STT_OBJECT: return NM_ELFSYM_OBJECT;
    case STT_FUNC: return NM_ELFSYM_FUNC;
    case STT_TLS: return NM_ELFSYM_TLS;
    default: return NM_ELFSYM_OTHER;
    }
}

static uintptr_t address_of(const object_t *o, const char *name, const GElf_Sym *sym)
{
    if (!o->is_exe && GELF_ST_BIND(sym->st_info) != STB_LOCAL) {
        void *bound = dlsym(RTLD_DEFAULT, name);
        if (bound)
            return (uintptr_t)bound;
    }
    return o->base + (uintptr_t)sym->st_value;
}

static int add_def(nm_elfsym_query_t *q, const object_t *o, const char *display,
                   const char *file, const GElf_Sym *sym)
{
    nm_elfsym_def_t *grown = realloc(q->defs, (q->ndefs + 1) * sizeof *q->defs);
    if (!grown)
        return ENOMEM;
    q->defs = grown;
    nm_elfsym_def_t d = {
        .addr = address_of(o, q->name, sym),
        .size = (size_t)sym->st_size,
        .kind = kind_of(sym),
        .local = GELF_ST_BIND(sym->st_info) == STB_LOCAL,
        .file = file ? strdup(file) : NULL,
        .object = strdup(display),
        .in_exe = o->is_exe,
    };
    if ((file && !d.file) || !d.object) {
        free(d.file);
        free(d.object);
        return ENOMEM;
    }
    q->defs[q->ndefs++] = d;
    return 0;
}

/* Hands every defined symbol of TAB named in a query to add_def, with the
 * source file of the STT_FILE before it if it is a local. */
static int read_table(nm_elfsym_scan_t *scan, const object_t *o, const char *display,
                      Elf *elf, Elf_Scn *tab)
{
    GElf_Shdr sh;
    Elf_Data *data = gelf_getshdr(tab, &sh) ? elf_getdata(tab, NULL) : NULL;
    size_t n = data && sh.sh_entsize ? sh.sh_size / sh.sh_entsize : 0;
    const char *file = NULL;
    int err = 0;
    for (size_t i = 0; i < n && !err; i++) {
        GElf_Sym sym;
        const char *name;
        if (!gelf_getsym(data, (int)i, &sym) || !(name = elf_strptr(elf, sh.sh_link, sym.st_name)))
            continue;
        if (GELF_ST_TYPE(sym.st_info) == STT_FILE) {
            file = name;
            continue;
        }
        if (sym.st_shndx == SHN_UNDEF || sym.st_shndx == SHN_ABS || !name[0])
            continue;
        int local = GELF_ST_BIND(sym.st_info) == STB_LOCAL;
        for (size_t q = 0; q < scan->nqueries && !err; q++) {
            if (strcmp(name, scan->queries[q].name) == 0)
                err = add_def(&scan->queries[q], o, display, local ? file : NULL, &sym);
        }
    }
    return err;
}

static void exe_unreadable(nm_elfsym_scan_t *scan, const char *why)
{
    char buf[256];
    snprintf(buf, sizeof buf, "cannot read %s: %s", scan->exe ? scan->exe : "/proc/self/exe",
             why);
    free(scan->exe_error);
    scan->exe_error = strdup(buf);
}

/* An object that cannot be opened is skipped: the vDSO has no file, and a
 * library's file may have been replaced since it was loaded. */
static int read_object(nm_elfsym_scan_t *scan, const object_t *o)
{
    const char *display = o->is_exe && scan->exe ? scan->exe : o->path;
    int fd = open(o->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (o->is_exe)
            exe_unreadable(scan, strerror(errno));
        return 0;
    }
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    Elf_Scn *tab = NULL;
    int stripped = 1, err = 0;
    if (elf && elf_kind(elf) == ELF_K_ELF)
        tab = symbol_table(elf, &stripped);
    else if (o->is_exe)
        exe_unreadable(scan, elf_errmsg(-1));
    if (o->is_exe)
        scan->exe_stripped = stripped;
    if (tab)
        err = read_table(scan, o, display, elf, tab);
    elf_end(elf);
    close(fd);
    return err;
}

static char *exe_path(void)
{
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0)
        return strdup("/proc/self/exe");
    buf[n] = '\0';
    return strdup(buf);
}

int nm_elfsym_scan(nm_elfsym_scan_t *scan)
{
    objects_t all = { NULL, 0, 0 };
    int err = 0;
    scan->exe = exe_path();
    scan->exe_stripped = 0;
    scan->exe_error = NULL;
    if (elf_version(EV_CURRENT) == EV_NONE) {
        exe_unreadable(scan, elf_errmsg(-1));
        return 0;
    }
    dl_iterate_phdr(collect, &all);
    for (size_t i = 0; i < all.n && !err; i++)
        err = read_object(scan, &all.v[i]);
    if (all.oom)
        err = ENOMEM;
    free_objects(&all);
    return err;
}

void nm_elfsym_free(nm_elfsym_scan_t *scan)
{
    for (size_t q = 0; q < scan->nqueries; q++) {
        nm_elfsym_query_t *query = &scan->queries[q];
        for (size_t i = 0; i < query->ndefs; i++) {
            free(query->defs[i].file);
            free(query->defs[i].object);
        }
        free(query->defs);
        query->defs = NULL;
        query->ndefs = 0;
    }
    free(scan->exe);
    free(scan->exe_error);
    scan->exe = scan->exe_error = NULL;
}
