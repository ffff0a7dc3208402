/*
 * replay.c -- a fuzz target (fuzz.h) as a test: every file of its corpus
 * fed to LLVMFuzzerTestOneInput once, in name order, one TAP line each.
 * An input that crashes, hangs or trips a sanitizer fails the program (the
 * TAP driver reports the signal or the exit), so what a fuzzer once found
 * stays found on every build, under valgrind too.
 *
 *   fuzz_<target> [FILE|DIR...]   default: NM_FUZZ_CORPUS, set at build time
 */
#include "fuzz.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct files {
    char **path;
    size_t n;
} files_t;

static int add(files_t *f, const char *dir, const char *name)
{
    char **grown = realloc(f->path, (f->n + 1) * sizeof *grown);
    size_t len = strlen(dir) + strlen(name) + 2;
    if (!grown)
        return ENOMEM;
    f->path = grown;
    if (!(f->path[f->n] = malloc(len)))
        return ENOMEM;
    snprintf(f->path[f->n++], len, "%s%s%s", dir, *dir ? "/" : "", name);
    return 0;
}

/* The files of DIR (no dot files), or ARG itself when it is a file. */
static int collect(files_t *f, const char *arg)
{
    struct dirent **names;
    struct stat st;
    int err = 0;
    if (stat(arg, &st) != 0)
        return errno;
    if (!S_ISDIR(st.st_mode))
        return add(f, "", arg);
    int n = scandir(arg, &names, NULL, alphasort);
    if (n < 0)
        return errno;
    for (int i = 0; i < n; i++) {
        if (!err && names[i]->d_name[0] != '.')
            err = add(f, arg, names[i]->d_name);
        free(names[i]);
    }
    free(names);
    return err;
}

static int replay(const char *path)
{
    FILE *in = fopen(path, "rb");
    uint8_t *buf = NULL;
    size_t size = 0, cap = 0, n;
    if (!in)
        return errno;
    do {
        if (size == cap) {
            uint8_t *grown = realloc(buf, cap = cap ? 2 * cap : 4096);
            if (!grown) {
                free(buf);
                fclose(in);
                return ENOMEM;
            }
            buf = grown;
        }
        n = fread(buf + size, 1, cap - size, in);
        size += n;
    } while (n > 0);
    fclose(in);
    /* A copy of exactly SIZE bytes: a read past the input is caught. */
    uint8_t *exact = malloc(size ? size : 1);
    if (exact)
        memcpy(exact, buf, size);
    free(buf);
    if (!exact)
        return ENOMEM;
    LLVMFuzzerTestOneInput(exact, size);
    free(exact);
    return 0;
}

int main(int argc, char **argv)
{
    files_t f = { NULL, 0 };
    int failed = 0;
    LLVMFuzzerInitialize(&argc, &argv);
    for (int i = 1; i < argc || (i == 1 && argc == 1); i++) {
        const char *arg = argc > 1 ? argv[i] : NM_FUZZ_CORPUS;
        int err = collect(&f, arg);
        if (err) {
            printf("Bail out! %s: %s\n", arg, strerror(err));
            return 1;
        }
    }
    printf("1..%zu\n", f.n);
    if (f.n == 0)
        printf("Bail out! an empty corpus\n");
    for (size_t i = 0; i < f.n; i++) {
        fflush(stdout);
        int err = replay(f.path[i]);
        printf("%s %zu - %s%s%s\n", err ? "not ok" : "ok", i + 1, f.path[i],
               err ? ": " : "", err ? strerror(err) : "");
        failed |= err != 0;
        free(f.path[i]);
    }
    free(f.path);
    return failed || f.n == 0;
}
