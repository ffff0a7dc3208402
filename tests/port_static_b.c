/*
 * port_static_b.c -- the second file of port_static (see port_static_a.c),
 * with a `static` mutex of the same name as the first's.
 */
#include "port_static.h"

static pthread_mutex_t mut = PTHREAD_MUTEX_INITIALIZER;

int port_static_hold_b(void)
{
    return port_static_hold(&mut, 'b');
}
