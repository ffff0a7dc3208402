/* port_spec.c -- the porting layer's selector parser (src/port/spec.c),
 * compiled into the fuzz target alone: libnetmutex-wrap hides it, and the
 * rest of that library wraps pthread's calls. */
#include "spec.c"
