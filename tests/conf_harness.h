/*
 * conf_harness.h -- the little the porting-layer conformance programs need
 * beyond plain pthreads: TAP output, scaled time bounds and, when the
 * program runs with netmutex inside (the source or the link route), a
 * private redis-server and a way to look at it.
 *
 * The conformance sources use nothing of netmutex: the same object is
 * linked plain and relinked with --wrap.  Whether netmutex is inside is
 * found at run time (its symbols are there or not), not compiled in.
 */
#ifndef CONF_HARNESS_H
#define CONF_HARNESS_H

#include <time.h>

/* Starts the private server when netmutex is inside (it must be, unless
 * the program's name says _plain), sets NETMUTEX_URL,
 * NETMUTEX_MUTEXES=SELECTED and a short lease, arms a watchdog alarm of
 * LIMIT_S seconds (scaled), and cleans all of it up at exit or on a fatal
 * signal.  Call it first, before any thread or mutex is used. */
void conf_setup(const char *selected, unsigned int limit_s);
/* 1 when the mutexes are network mutexes in this build. */
int conf_networked(void);
/* Prints the plan and returns the exit status for main. */
int conf_done(void);

/* One TAP result: COND must hold. */
void conf_ok(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* One TAP result: an errno-style GOT must be WANT (names both). */
void conf_eq(int got, int want, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Networked: 1 if the lock key of NAME exists in the server, 2 if it does
 * and its holder caches it (kept after unlock), else 0.  Plain build: -1
 * (there is no server). */
int conf_key_exists(const char *name);
/* Networked: how many keys under the configured prefix match the KEYS
 * PATTERN (what follows the prefix); -1 in a plain build. */
int conf_count_keys(const char *pattern);
/* One TAP result: networked, the lock key of NAME exists if HELD, and is
 * gone (or only cached) if not; plain, there is no server to hold it. */
void conf_check_backing(const char *name, int held);

/* MS milliseconds, scaled by NETMUTEX_TEST_SLOWDOWN. */
unsigned int conf_ms(unsigned int ms);
/* *TS = now on CLOCK + MS milliseconds (not scaled). */
void conf_deadline(struct timespec *ts, clockid_t clock, unsigned int ms);
/* A - B in milliseconds. */
long conf_diff_ms(const struct timespec *a, const struct timespec *b);

#endif /* CONF_HARNESS_H */
