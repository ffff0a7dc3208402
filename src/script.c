/* script.c -- loading and calling the embedded Lua scripts. */
#include "nm.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "lua_scripts.h"
#include "reply.h"
#include "script.h"

#define SHA_LEN 40

static const char *const sources[NM_SCRIPT_COUNT] = {
    [NM_SCRIPT_ACQUIRE] = nm_lua_acquire,
    [NM_SCRIPT_RELEASE] = nm_lua_release,
    [NM_SCRIPT_CANCEL] = nm_lua_cancel,
    [NM_SCRIPT_RENEW] = nm_lua_renew,
    [NM_SCRIPT_BREAK] = nm_lua_break,
    [NM_SCRIPT_STATUS] = nm_lua_status,
    [NM_SCRIPT_FENCE] = nm_lua_fence,
};

/* The SHA1 of each script, learned from the first SCRIPT LOAD.  It depends
 * on the text only, so it is the same on every server and connection. */
static char shas[NM_SCRIPT_COUNT][SHA_LEN + 1];
static int sha_known[NM_SCRIPT_COUNT]; /* atomic; set after shas[] is */
static pthread_mutex_t sha_lock = PTHREAD_MUTEX_INITIALIZER;

static int load(redisContext *c, nm_script_t id)
{
    const char *argv[3] = { "SCRIPT", "LOAD", sources[id] };
    const char *sha;
    size_t len;
    redisReply *r;

    int err = nm_call(c, 3, argv, NULL, &r);
    if (err)
        return err;
    err = nm_reply_string(r, &sha, &len);
    if (!err && len != SHA_LEN)
        err = EPROTO;
    if (!err && !__atomic_load_n(&sha_known[id], __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&sha_lock);
        if (!sha_known[id]) {
            memcpy(shas[id], sha, SHA_LEN);
            __atomic_store_n(&sha_known[id], 1, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&sha_lock);
    }
    freeReplyObject(r);
    return err;
}

/* EVALSHA sha nkeys argv... for one script call. */
typedef struct evalsha_cmd {
    const char *argv[NM_SCRIPT_MAX_ARGS + 3];
    size_t lens[NM_SCRIPT_MAX_ARGS + 3];
    char nkeys[12];
} evalsha_cmd_t;

static int evalsha_build(evalsha_cmd_t *cmd, nm_script_t id, int nkeys, int nargs,
                         const char **argv, const size_t *lens)
{
    if (nargs > NM_SCRIPT_MAX_ARGS || nkeys > nargs || nkeys < 0)
        return EINVAL;
    snprintf(cmd->nkeys, sizeof cmd->nkeys, "%d", nkeys);
    cmd->argv[0] = "EVALSHA";
    cmd->argv[1] = shas[id];
    cmd->argv[2] = cmd->nkeys;
    cmd->lens[0] = 7;
    cmd->lens[1] = SHA_LEN;
    cmd->lens[2] = strlen(cmd->nkeys);
    for (int i = 0; i < nargs; i++) {
        cmd->argv[i + 3] = argv[i];
        cmd->lens[i + 3] = lens[i];
    }
    return 0;
}

static int evalsha(redisContext *c, nm_script_t id, int nkeys, int nargs,
                   const char **argv, const size_t *lens, redisReply **out)
{
    evalsha_cmd_t cmd;
    int err = evalsha_build(&cmd, id, nkeys, nargs, argv, lens);
    return err ? err : nm_call(c, nargs + 3, cmd.argv, cmd.lens, out);
}

int nm_script_load(redisContext *c, nm_script_t id)
{
    return load(c, id);
}

int nm_script_append(redisContext *c, nm_script_t id, int nkeys, int nargs,
                     const char **argv, const size_t *lens)
{
    evalsha_cmd_t cmd;
    int err = evalsha_build(&cmd, id, nkeys, nargs, argv, lens);
    if (err)
        return err;
    if (!__atomic_load_n(&sha_known[id], __ATOMIC_ACQUIRE))
        return ENOENT; /* nm_script_load first */
    return redisAppendCommandArgv(c, nargs + 3, cmd.argv, cmd.lens) == REDIS_OK
               ? 0 : NM_ECONN;
}

int nm_script_run(redisContext *c, nm_script_t id, int nkeys, int nargs,
                  const char **argv, const size_t *lens, redisReply **out)
{
    int err;
    if (!__atomic_load_n(&sha_known[id], __ATOMIC_ACQUIRE)) {
        err = load(c, id);
        if (err)
            return err;
    }
    err = evalsha(c, id, nkeys, nargs, argv, lens, out);
    if (err == ENOENT) {
        err = load(c, id);
        if (!err)
            err = evalsha(c, id, nkeys, nargs, argv, lens, out);
        if (err == ENOENT) /* lost again at once: not a server we understand */
            err = EPROTO;
    }
    return err;
}

/* pthread_atfork: a thread may be recording a SHA1 when another forks. */
void nm_script_before_fork(void) { pthread_mutex_lock(&sha_lock); }
void nm_script_after_fork(void) { pthread_mutex_unlock(&sha_lock); }
