/*
 * chaos_fault.c -- the injectors (see chaos_fault.h).
 *
 * Victims.  A holder is a worker one of whose threads is in CHAOS_HOLDING
 * (the shared worker table).  A queued waiter is found in Redis, as the
 * key schema in docs/deployment.md describes it: a token in the lock's FIFO queue
 * <key>:q whose entry in <key>:w ("<expires>:<lease>:<host>:<pid>:<tid>")
 * names one of our workers, and that worker has a thread in a lock call
 * and none holding.  Only such a waiter is handed the lock by a release,
 * which is what stopping or killing it is about.
 *
 * Durations, all scaled with the lease: a worker is stopped for 1.5 to 2
 * leases ("beyond the lease": its lease, or the grant it is sent while it
 * sleeps, runs out meanwhile); a server sleeps (DEBUG SLEEP) for 0.5 to
 * 1 s (times the slowdown), always longer than the I/O timeout, sometimes
 * longer than a lease; the single server stays down up to half a lease;
 * the proxy blackholes for 1.5 leases; a quorum server stays down 2 to 3
 * leases, and of a majority the first comes back after 2 leases, the
 * second 1.5 leases later, so that never more than one server rejoins
 * empty within a lease (docs/deployment.md's condition for a quorum to
 * stay safe).
 *
 * Forged grants: one Lua script (atomic on the server, so the lock really
 * is held by another process at that instant) PUBLISHes on the lock's
 * channel, for every queued token but the holder's, one of
 *     granted <token> <current fence + 1> 0
 *     granted <token> 999999999 0
 *     released
 * in turn.  A library must take none of them at its word.
 */
#include "ac_config.h"

#include "chaos_fault.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- victims ------------------------------------------------------------ */

static bool has_phase(ChaosProc *p, int phase)
{
    for (int i = 0; i < p->nthreads; i++)
        if (chaos_load(&p->phase[i]) == phase)
            return true;
    return false;
}

static bool is_waiting(ChaosProc *p)
{
    return has_phase(p, CHAOS_LOCKING) && !has_phase(p, CHAOS_HOLDING) &&
           !has_phase(p, CHAOS_UNLOCKING);
}

/* Every thread of P that is in a lock call is in netmutex_lock, which
 * cannot give up: a grant it is sent while stopped is then still wanted
 * when it wakes up (a timedlock would more likely just time out). */
static bool only_blocking(ChaosRun *run, ChaosProc *p)
{
    for (int i = 0; i < p->nthreads; i++) {
        int32_t idx = chaos_load(&p->rec[i]);
        if (chaos_load(&p->phase[i]) == CHAOS_LOCKING && idx >= 0 &&
            run->log->recs[idx].op != 'l')
            return false;
    }
    return true;
}

static int holder_once(ChaosRun *run)
{
    for (int s = 0; s < run->nworkers; s++) {
        ChaosProc *p = chaos_run_proc(run, s);
        if (p && has_phase(p, CHAOS_HOLDING))
            return s;
    }
    return -1;
}

/* A worker slot that holds the mutex, -1 if none did within TIMEOUT_MS. */
static int find_holder(ChaosRun *run, unsigned int timeout_ms)
{
    gint64 end = nmt_now_ms() + timeout_ms;
    int s;

    while ((s = holder_once(run)) < 0 && nmt_now_ms() < end)
        nmt_sleep_ms(1);
    return s;
}

/* The pid in a queue entry "<expires>:<lease>:<host>:<pid>:<tid>". */
static long entry_pid(const char *entry)
{
    const char *tid = strrchr(entry, ':'), *p;

    if (!tid)
        return -1;
    for (p = tid - 1; p > entry && *p != ':'; p--)
        ;
    return *p == ':' ? strtol(p + 1, NULL, 10) : -1;
}

static int slot_of(ChaosRun *run, long pid)
{
    for (int s = 0; s < run->nworkers; s++) {
        ChaosProc *p = chaos_run_proc(run, s);
        if (p && p->pid == pid)
            return s;
    }
    return -1;
}

/* The slot of a worker waiting with TOKEN in the queue (if STRICT, only
 * in netmutex_lock), or -1. */
static int waiter_of(ChaosRun *run, const char *token, bool strict)
{
    redisReply *e = nm_redis_cmd(run->redis, "HGET %s:w %s", run->key, token);
    int s = -1;
    ChaosProc *p;

    if (e->type == REDIS_REPLY_STRING)
        s = slot_of(run, entry_pid(e->str));
    freeReplyObject(e);
    p = s >= 0 ? chaos_run_proc(run, s) : NULL;
    return p && is_waiting(p) && (!strict || only_blocking(run, p)) ? s : -1;
}

/* The queue is read head first: the head is the next to be granted. */
static int queued_waiter_once(ChaosRun *run, bool strict, char **token)
{
    redisReply *q = nm_redis_cmd(run->redis, "LRANGE %s:q 0 -1", run->key);
    int s = -1;

    for (size_t i = 0; q->type == REDIS_REPLY_ARRAY && i < q->elements && s < 0; i++) {
        if (q->element[i]->type != REDIS_REPLY_STRING)
            continue;
        s = waiter_of(run, q->element[i]->str, strict);
        if (s >= 0)
            *token = g_strdup(q->element[i]->str);
    }
    freeReplyObject(q);
    return s;
}

/* A worker slot queued in Redis (its token in *TOKEN), -1 if none was
 * within TIMEOUT_MS; one waiting in netmutex_lock is preferred during the
 * first half of that time. */
static int find_queued_waiter(ChaosRun *run, unsigned int timeout_ms, char **token)
{
    gint64 now = nmt_now_ms(), strict_end = now + timeout_ms / 2, end = now + timeout_ms;
    int s;

    while ((s = queued_waiter_once(run, nmt_now_ms() < strict_end, token)) < 0 &&
           nmt_now_ms() < end)
        nmt_sleep_ms(2);
    return s;
}

/* ---- workers stopped or killed ------------------------------------------------ */

static void stop_for(ChaosRun *run, int slot, uint32_t flags)
{
    pid_t pid = chaos_run_proc(run, slot)->pid;
    unsigned int ms = chaos_run_between(run, 3 * run->lease_ms / 2, 2 * run->lease_ms);
    ChaosFault *f = chaos_fault_begin(run->log, CHAOS_F_STOP, pid);

    kill(pid, SIGSTOP);
    nmt_sleep_ms(ms);
    kill(pid, SIGCONT);
    chaos_fault_end(f);
    if (f)
        f->flags = flags;
    run->flagged++;
}

bool chaos_inject_stop_holder(ChaosRun *run)
{
    int s = find_holder(run, nm_ms(1000));

    if (s < 0)
        return false;
    stop_for(run, s, CHAOS_FF_HOLDER);
    return true;
}

bool chaos_inject_stop_waiter(ChaosRun *run)
{
    char *token = NULL;
    int s = find_queued_waiter(run, nm_ms(1000), &token);

    if (s < 0)
        return false;
    stop_for(run, s, CHAOS_FF_QUEUED);
    g_free(token);
    return true;
}

bool chaos_inject_kill_holder(ChaosRun *run)
{
    int s = find_holder(run, nm_ms(1000));
    ChaosFault *f;

    if (s < 0)
        return false;
    f = chaos_run_kill(run, s);
    if (f)
        f->flags = CHAOS_FF_HOLDER;
    run->flagged++;
    chaos_run_respawn(run, s);
    return true;
}

/* The token of the lock key's holder (a mutex's, or a rwlock's writer),
 * NULL if none. */
static char *lock_token(ChaosRun *run)
{
    char *value = nm_redis_get(run->redis, 0, run->key, strlen(run->key));
    char *token = value ? g_strndup(value, 32) : NULL;

    g_free(value);
    return token;
}

/* A waiter that had been granted the lock when it died is a dead holder:
 * the lock is then rightly kept for its lease. */
bool chaos_inject_kill_waiter(ChaosRun *run)
{
    char *token = NULL, *now;
    int s = find_queued_waiter(run, nm_ms(1000), &token);
    ChaosFault *f;

    if (s < 0)
        return false;
    f = chaos_run_kill(run, s);
    now = lock_token(run);
    if (f)
        f->flags = CHAOS_FF_QUEUED | (g_strcmp0(now, token) == 0 ? CHAOS_FF_HOLDER : 0);
    run->flagged += g_strcmp0(now, token) == 0;
    chaos_run_respawn(run, s);
    g_free(now);
    g_free(token);
    return true;
}

/* ---- condition waiters stopped or killed ---------------------------------------- */

/* A condition family's worker with a thread that has been in a condition
 * wait for a few milliseconds (so it most likely registered and blocks)
 * and none holding a ring's mutex; the search starts at a random slot. */
static int cond_waiter_once(ChaosRun *run)
{
    int first = (int)chaos_run_between(run, 0, (unsigned int)run->nworkers - 1);
    int64_t before = chaos_now_ns() - (int64_t)nm_ms(2) * 1000000;

    for (int k = 0; k < run->nworkers; k++) {
        int s = (first + k) % run->nworkers;
        ChaosProc *p = chaos_run_proc(run, s);
        bool waits = false;

        if (!p || has_phase(p, CHAOS_HOLDING) || has_phase(p, CHAOS_UNLOCKING))
            continue;
        for (int i = 0; i < p->nthreads && !waits; i++) {
            int32_t idx = chaos_load(&p->rec[i]);
            waits = chaos_load(&p->phase[i]) == CHAOS_WAITING && idx >= 0 &&
                    run->log->recs[idx].call_ns < before;
        }
        if (waits)
            return s;
    }
    return -1;
}

static int find_cond_waiter(ChaosRun *run, unsigned int timeout_ms)
{
    gint64 end = nmt_now_ms() + timeout_ms;
    int s;

    while ((s = cond_waiter_once(run)) < 0 && nmt_now_ms() < end)
        nmt_sleep_ms(1);
    return s;
}

bool chaos_inject_stop_cond_waiter(ChaosRun *run)
{
    int s = find_cond_waiter(run, nm_ms(1000));

    if (s < 0)
        return false;
    stop_for(run, s, CHAOS_FF_QUEUED);
    return true;
}

/* Its other threads may have been about to take a ring's mutex, or been
 * handed it: the mutex checker's idle check is off in these families. */
bool chaos_inject_kill_cond_waiter(ChaosRun *run)
{
    int s = find_cond_waiter(run, nm_ms(1000));
    ChaosFault *f;

    if (s < 0)
        return false;
    f = chaos_run_kill(run, s);
    if (f)
        f->flags = CHAOS_FF_QUEUED;
    chaos_run_respawn(run, s);
    return true;
}

/* ---- the server misbehaving ------------------------------------------------------ */

static bool client_kill(ChaosRun *run, const char *type)
{
    ChaosFault *f = chaos_fault_begin(run->log, CHAOS_F_CLIENT_KILL, 0);
    redisReply *r = nm_redis_cmd(run->redis, "CLIENT KILL TYPE %s", type);
    long long n = r->type == REDIS_REPLY_INTEGER ? r->integer : 0;

    freeReplyObject(r);
    chaos_fault_end(f);
    if (f)
        f->detail = (int32_t)n;
    return n > 0;
}

bool chaos_inject_client_kill_normal(ChaosRun *run)
{
    return client_kill(run, "normal");
}

/* The connections queued waiters block on for their grant (BLPOP), one
 * CLIENT KILL ID each: the waiter must dial again and stay in line. */
bool chaos_inject_client_kill_blocked(ChaosRun *run)
{
    ChaosFault *f = chaos_fault_begin(run->log, CHAOS_F_CLIENT_KILL, 0);
    redisReply *r = nm_redis_cmd(run->redis, "CLIENT LIST TYPE normal");
    gchar **lines = g_strsplit(r->type == REDIS_REPLY_STRING ? r->str : "", "\n", -1);
    int32_t n = 0;

    freeReplyObject(r);
    for (gchar **l = lines; *l; l++) {
        if (!strstr(*l, " cmd=blpop ") || !g_str_has_prefix(*l, "id="))
            continue;
        redisReply *k = nm_redis_cmd(run->redis, "CLIENT KILL ID %lld",
                                     g_ascii_strtoll(*l + 3, NULL, 10));
        n += k->type == REDIS_REPLY_INTEGER && k->integer > 0;
        freeReplyObject(k);
    }
    g_strfreev(lines);
    chaos_fault_end(f);
    if (f)
        f->detail = n;
    return n > 0;
}

bool chaos_inject_debug_sleep(ChaosRun *run)
{
    unsigned int ms = chaos_run_between(run, 500, 1000);
    char secs[32];
    ChaosFault *f;
    redisReply *r;
    bool ok;

    g_snprintf(secs, sizeof secs, "%.3f", ms / 1000.0 * nm_slowdown());
    f = chaos_fault_begin(run->log, CHAOS_F_DEBUG_SLEEP, 0);
    r = nm_redis_cmd(run->redis, "DEBUG SLEEP %s", secs);
    chaos_fault_end(f);
    ok = r->type != REDIS_REPLY_ERROR;
    if (!ok)
        g_printerr("chaos: DEBUG SLEEP refused: %s\n", r->str);
    freeReplyObject(r);
    return ok;
}

bool chaos_inject_restart_empty(ChaosRun *run)
{
    ChaosFault *f = chaos_fault_begin(run->log, CHAOS_F_RESTART, 0);

    nm_redis_stop(run->redis);
    nmt_sleep_ms(chaos_run_between(run, 0, run->lease_ms / 2));
    nm_redis_restart(run->redis);
    chaos_fault_end(f);
    return true;
}

bool chaos_inject_blackhole(ChaosRun *run)
{
    ChaosFault *f = chaos_fault_begin(run->log, CHAOS_F_BLACKHOLE, 0);

    chaos_proxy_blackhole(run->proxy, true);
    nmt_sleep_ms(3 * run->lease_ms / 2);
    chaos_proxy_blackhole(run->proxy, false);
    chaos_fault_end(f);
    return true;
}

/* ---- forged messages ------------------------------------------------------------- */

/* KEYS: the lock key (also the channel), its queue, its meta hash.
 * ARGV[1]: next, huge or released.  Returns {sent, heard}. */
static const char forge_script[] =
    "local holder = redis.call('GET', KEYS[1])\n"
    "if not holder then return {0, 0} end\n"
    "local sent, heard = 0, 0\n"
    "for _, t in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do\n"
    "  if t ~= holder and (ARGV[1] ~= 'released' or sent == 0) then\n"
    "    local msg = 'released'\n"
    "    if ARGV[1] == 'next' then\n"
    "      local f = tonumber(redis.call('HGET', KEYS[3], 'fence') or '0') + 1\n"
    "      msg = 'granted ' .. t .. ' ' .. f .. ' 0'\n"
    "    elseif ARGV[1] == 'huge' then\n"
    "      msg = 'granted ' .. t .. ' 999999999 0'\n"
    "    end\n"
    "    heard = heard + redis.call('PUBLISH', KEYS[1], msg)\n"
    "    sent = sent + 1\n"
    "  end\n"
    "end\n"
    "return {sent, heard}\n";

static void forge_reply(redisReply *r, long long *sent, long long *heard)
{
    *sent = *heard = 0;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2) {
        *sent = r->element[0]->integer;
        *heard = r->element[1]->integer;
    } else if (r->type == REDIS_REPLY_ERROR) {
        g_printerr("chaos: forging script failed: %s\n", r->str);
    }
}

bool chaos_inject_forged_grant(ChaosRun *run)
{
    static const char *const variants[] = { "next", "huge", "released" };
    const char *v = variants[run->turn++ % 3];
    int64_t begin = chaos_now_ns();
    redisReply *r = nm_redis_cmd(run->redis, "EVAL %s 3 %s %s:q %s:m %s", forge_script,
                                 run->key, run->key, run->key, v);
    long long sent, heard;
    ChaosFault *f;

    forge_reply(r, &sent, &heard);
    freeReplyObject(r);
    if (sent == 0)
        return false;
    f = chaos_fault_begin(run->log, CHAOS_F_FORGE, 0);
    if (f) {
        f->begin_ns = begin;
        f->detail = (int32_t)heard;
    }
    return true;
}

/* Forged wake-ups: KEYS[1] a ring's CW list; ARGV[1] 'head' (its longest
 * waiter) or 'all' (every waiter); ARGV[2] how long a forged push may stay
 * (ms).  Only waiters still registered in the hash CH get one (a dead
 * waiter's would stay behind).  Returns the pushes made. */
static const char cond_forge_script[] =
    "local base, pushed = string.sub(KEYS[1], 1, -4), 0\n"
    "for _, t in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do\n"
    "  if redis.call('HEXISTS', base .. ':ch', t) == 1 then\n"
    "    redis.call('RPUSH', base .. ':cg:' .. t, 'f')\n"
    "    redis.call('PEXPIRE', base .. ':cg:' .. t, ARGV[2])\n"
    "    pushed = pushed + 1\n"
    "    if ARGV[1] == 'head' then return pushed end\n"
    "  end\n"
    "end\n"
    "return pushed\n";

static long long forge_ring(ChaosRun *run, int ring, const char *variant)
{
    char ttl[24];
    redisReply *r;
    long long pushed;

    g_snprintf(ttl, sizeof ttl, "%u", 3 * run->lease_ms);
    r = nm_redis_cmd(run->redis, "EVAL %s 1 %s %s %s", cond_forge_script, run->cw[ring],
                     variant, ttl);
    pushed = r->type == REDIS_REPLY_INTEGER ? r->integer : 0;
    if (r->type == REDIS_REPLY_ERROR)
        g_printerr("chaos: forging script failed: %s\n", r->str);
    freeReplyObject(r);
    return pushed;
}

/* A third party that may write the keys pushes on waiters' signal lists
 * (CG), in turn to the longest waiter of one ring and to every waiter of
 * every ring: each push must cost one spurious wake-up, no more, and no
 * wake-up of anyone else may be lost for it. */
bool chaos_inject_forged_wakeup(ChaosRun *run)
{
    int turn = run->turn++;
    int64_t begin = chaos_now_ns();
    long long pushed = 0;
    ChaosFault *f;

    if (turn % 2)
        for (int r = 0; r < run->nrings; r++)
            pushed += forge_ring(run, r, "all");
    else
        pushed = forge_ring(run, turn / 2 % run->nrings, "head");
    if (pushed == 0)
        return false;
    f = chaos_fault_begin(run->log, CHAOS_F_FORGE, 0);
    if (f) {
        f->begin_ns = begin;
        f->detail = (int32_t)pushed;
    }
    return true;
}

/* ---- quorum servers down ------------------------------------------------------------ */

static ChaosFault *server_down(ChaosRun *run, int i)
{
    ChaosFault *f = chaos_fault_begin(run->log, CHAOS_F_SERVER_DOWN, 0);

    if (f)
        f->detail = i;
    nm_redis_stop(run->servers[i]);
    return f;
}

static void server_up(ChaosRun *run, int i, ChaosFault *f)
{
    nm_redis_restart(run->servers[i]);
    chaos_fault_end(f);
}

/* Forged grants to a read-write lock's waiters: KEYS[1] its write lock
 * key K; ARGV[1] how long a forged push may stay (ms).  Every waiter
 * queued in K:q with its entry in K:w gets a "1" on its grant list
 * K:g:<token>, as a release pushes it (grant.lua).  Returns the pushes
 * made.  A waiter must confirm a grant with its own request: one that
 * took a push at its word would come in beside the holders. */
static const char rw_forge_script[] =
    "local pushed = 0\n"
    "for _, t in ipairs(redis.call('LRANGE', KEYS[1] .. ':q', 0, -1)) do\n"
    "  if redis.call('HEXISTS', KEYS[1] .. ':w', t) == 1 then\n"
    "    redis.call('RPUSH', KEYS[1] .. ':g:' .. t, '1')\n"
    "    redis.call('PEXPIRE', KEYS[1] .. ':g:' .. t, ARGV[1])\n"
    "    pushed = pushed + 1\n"
    "  end\n"
    "end\n"
    "return pushed\n";

bool chaos_inject_forged_rw_grant(ChaosRun *run)
{
    int64_t begin = chaos_now_ns();
    char ttl[24];
    redisReply *r;
    long long pushed;
    ChaosFault *f;

    g_snprintf(ttl, sizeof ttl, "%u", run->lease_ms);
    r = nm_redis_cmd(run->redis, "EVAL %s 1 %s %s", rw_forge_script, run->key, ttl);
    pushed = r->type == REDIS_REPLY_INTEGER ? r->integer : 0;
    if (r->type == REDIS_REPLY_ERROR)
        g_printerr("chaos: forging script failed: %s\n", r->str);
    freeReplyObject(r);
    if (pushed == 0)
        return false;
    f = chaos_fault_begin(run->log, CHAOS_F_FORGE, 0);
    if (f) {
        f->begin_ns = begin;
        f->detail = (int32_t)pushed;
    }
    return true;
}

bool chaos_inject_quorum_minority(ChaosRun *run)
{
    int i = run->turn++ % CHAOS_QUORUM_N;
    ChaosFault *f = server_down(run, i);

    nmt_sleep_ms(chaos_run_between(run, 2 * run->lease_ms, 3 * run->lease_ms));
    server_up(run, i, f);
    return true;
}

bool chaos_inject_quorum_majority(ChaosRun *run)
{
    int i = run->turn++ % CHAOS_QUORUM_N, j = (i + 1) % CHAOS_QUORUM_N;
    ChaosFault *fi = server_down(run, i), *fj = server_down(run, j);

    nmt_sleep_ms(2 * run->lease_ms);
    server_up(run, i, fi);
    nmt_sleep_ms(3 * run->lease_ms / 2);
    server_up(run, j, fj);
    return true;
}
