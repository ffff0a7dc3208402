/*
 * port_static_a.c, port_static_b.c -- port_static, a plain pthread program
 * for conf_port_static.  Each file has a `static` mutex named mut: the
 * idiom the link route must reach through the ELF symbol tables, since
 * the program is linked with the --wrap list but without
 * -Wl,--export-dynamic, and no mutex has a dynamic symbol.
 *
 * It holds a's mut, then b's, printing "a" and "b" as it takes each and
 * waiting for a byte on stdin before letting it go, so that its driver
 * can look at Redis meanwhile; then it prints "done" and exits 0.
 */
#include <stdio.h>
#include <unistd.h>

#include "port_static.h"

static pthread_mutex_t mut = PTHREAD_MUTEX_INITIALIZER;

/* Not a mutex: an int that selectors name to see it refused.  Written by
 * the hold of either file, so the compiler keeps it in memory. */
int port_static_holds;

int port_static_hold(pthread_mutex_t *m, char tag)
{
    char go;
    int err = pthread_mutex_lock(m);
    if (err) {
        fprintf(stderr, "port_static: lock %c: error %d\n", tag, err);
        return 1;
    }
    printf("%c\n", tag);
    fflush(stdout);
    ssize_t n = read(STDIN_FILENO, &go, 1);
    port_static_holds++;
    err = pthread_mutex_unlock(m);
    if (n != 1 || err)
        fprintf(stderr, "port_static: unlock %c: error %d\n", tag, err);
    return n != 1 || err;
}

int main(void)
{
    int failed = port_static_hold(&mut, 'a');
    failed |= port_static_hold_b();
    printf("done %d\n", port_static_holds);
    return failed;
}
