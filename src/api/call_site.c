/*
 * call_site.c -- netmutex_call_site: the argument checks over the calling
 * thread's held list (local/held.h), which gives the site to its next
 * hold.  No server, no configuration: <netmutex/pthread.h>'s call-site
 * macros call it twice around every lock call, so it costs a store.
 */
#include "nm.h"

#include <errno.h>

#include "held.h"

int netmutex_call_site(const char *file, int line)
{
    if (file ? line < 1 : line != 0)
        return EINVAL;
    nm_held_set_site(file, line);
    return 0;
}
