/*
 * chaos_fault.h -- the fault injectors of the chaos suite (chaos_fault.c).
 * Each injects one fault of its family and returns once the system is
 * whole again (a stopped process continued, a server restarted, the proxy
 * relaying); false if no fault could be injected this time (no victim).
 */
#ifndef CHAOS_FAULT_H
#define CHAOS_FAULT_H

#include <stdbool.h>

#include "chaos_run.h"

bool chaos_inject_stop_holder(ChaosRun *run);
bool chaos_inject_stop_waiter(ChaosRun *run);
bool chaos_inject_kill_holder(ChaosRun *run);
bool chaos_inject_kill_waiter(ChaosRun *run);
bool chaos_inject_client_kill_normal(ChaosRun *run);
bool chaos_inject_client_kill_blocked(ChaosRun *run);
bool chaos_inject_debug_sleep(ChaosRun *run);
bool chaos_inject_restart_empty(ChaosRun *run);
bool chaos_inject_blackhole(ChaosRun *run);
bool chaos_inject_forged_grant(ChaosRun *run);
bool chaos_inject_quorum_minority(ChaosRun *run);
/* Condition families: a worker waiting on a condition stopped or killed;
 * forged pushes on waiters' signal lists. */
bool chaos_inject_stop_cond_waiter(ChaosRun *run);
bool chaos_inject_kill_cond_waiter(ChaosRun *run);
bool chaos_inject_forged_wakeup(ChaosRun *run);
/* Read-write lock families: forged grants pushed to queued waiters. */
bool chaos_inject_forged_rw_grant(ChaosRun *run);
bool chaos_inject_quorum_majority(ChaosRun *run);

#endif /* CHAOS_FAULT_H */
