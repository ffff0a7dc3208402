/*
 * counter.c -- threads bumping a counter file (stats.c).
 *
 *   counter FILE [THREADS [BUMPS]]   bump FILE THREADS x BUMPS times
 *   counter FILE show                print the counter in FILE
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"

static const char *path;
static long bumps = 100;

static void *worker(void *arg)
{
    long failed = 0;
    for (long i = 0; i < bumps; i++)
        failed += stats_bump(path) != 0;
    return (void *)failed;
}

int main(int argc, char **argv)
{
    int nthreads = 3;
    long failed = 0;

    if (argc < 2) {
        fprintf(stderr, "usage: counter FILE [THREADS [BUMPS] | show]\n");
        return 2;
    }
    path = argv[1];
    if (argc > 2 && strcmp(argv[2], "show") == 0) {
        printf("%ld\n", stats_read(path));
        return 0;
    }
    if (argc > 2)
        nthreads = atoi(argv[2]);
    if (argc > 3)
        bumps = atol(argv[3]);
    if (nthreads < 1 || nthreads > 64 || bumps < 1) {
        fprintf(stderr, "counter: 1-64 threads, at least 1 bump\n");
        return 2;
    }

    pthread_t t[64];
    for (int i = 0; i < nthreads; i++)
        pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < nthreads; i++) {
        void *f;
        pthread_join(t[i], &f);
        failed += (long)f;
    }
    printf("counter: %ld bumps here, %ld failed; %s is at %ld\n", stats_local_bumps(),
           failed, path, stats_read(path));
    return failed != 0;
}
