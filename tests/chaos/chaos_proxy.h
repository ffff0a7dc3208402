/*
 * chaos_proxy.h -- the fixture's TCP proxy (proxy.h), hosted in a process
 * of its own for the blackhole family (chaos_proxy.c).
 *
 * The proxy is a thread.  Started in the test process, it would be running
 * when the workers are forked, and a child forked from a multi-threaded
 * process is what ThreadSanitizer ("dup thread") and ASan's allocator
 * cannot cope with.  So a forked host process starts it, and takes the
 * driver's orders over a pipe.
 */
#ifndef CHAOS_PROXY_H
#define CHAOS_PROXY_H

#include <stdbool.h>

#include "fixture.h"

typedef struct ChaosProxy ChaosProxy;

/* Forks the host; returns once the proxy listens (relaying to R). */
ChaosProxy *chaos_proxy_start(NmRedis *r);
/* "redis://127.0.0.1:PORT": a new string. */
char *chaos_proxy_url(ChaosProxy *p);
/* nm_proxy_blackhole in the host; returns once the proxy was told. */
void chaos_proxy_blackhole(ChaosProxy *p, bool on);
/* Stops the proxy and reaps its host. */
void chaos_proxy_free(ChaosProxy *p);

#endif /* CHAOS_PROXY_H */
