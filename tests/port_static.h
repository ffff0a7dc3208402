/*
 * port_static.h -- the two files of port_static, a plain pthread program
 * run by conf_port_static (see port_static_a.c).
 */
#ifndef PORT_STATIC_H
#define PORT_STATIC_H

#include <pthread.h>

/* Locks M, prints TAG on a line of its own, waits for a byte on stdin and
 * unlocks M: 0, or 1 if any of it failed (said on stderr). */
int port_static_hold(pthread_mutex_t *m, char tag);
/* port_static_hold of port_static_b.c's own `mut`, tagged 'b'. */
int port_static_hold_b(void);

#endif /* PORT_STATIC_H */
