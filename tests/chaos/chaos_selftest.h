/* chaos_selftest.h -- the checker's own test cases (chaos_selftest.c). */
#ifndef CHAOS_SELFTEST_H
#define CHAOS_SELFTEST_H

/* Registers /chaos/checker/... with GLib's test framework. */
void chaos_selftest_register(void);
/* /chaos/checker/cond/...: the condition families' checker
 * (chaos_cond_selftest.c). */
void chaos_cond_selftest_register(void);
/* /chaos/checker/rwlock/...: the read-write lock families' checker
 * (chaos_rw_selftest.c). */
void chaos_rw_selftest_register(void);
/* /chaos/checker/sem/...: the semaphore families' checker
 * (chaos_sem_selftest.c). */
void chaos_sem_selftest_register(void);

#endif /* CHAOS_SELFTEST_H */
