/*
 * script.c -- loading and calling the embedded Lua scripts.
 *
 * A script is called by EVALSHA with the SHA1 that embed-lua.sh computed at
 * build time.  A server that does not have it answers NOSCRIPT; the script
 * is then sent with SCRIPT LOAD and the call repeated, once.  The SHA1 the
 * server answers to SCRIPT LOAD is only compared with ours: a server that
 * answers another one is not a Redis we understand (EPROTO), and nothing it
 * says is remembered, so it cannot spoil calls to any other server.
 */
#include "nm.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "lua_scripts.h"
#include "reply.h"
#include "script.h"

#define SHA_LEN 40

static const struct {
    const char *text;
    const char *sha;
} scripts[NM_SCRIPT_COUNT] = {
    [NM_SCRIPT_ACQUIRE] = { nm_lua_acquire, nm_lua_acquire_sha },
    [NM_SCRIPT_RELEASE] = { nm_lua_release, nm_lua_release_sha },
    [NM_SCRIPT_CANCEL] = { nm_lua_cancel, nm_lua_cancel_sha },
    [NM_SCRIPT_RENEW] = { nm_lua_renew, nm_lua_renew_sha },
    [NM_SCRIPT_BREAK] = { nm_lua_break, nm_lua_break_sha },
    [NM_SCRIPT_STATUS] = { nm_lua_status, nm_lua_status_sha },
    [NM_SCRIPT_FENCE] = { nm_lua_fence, nm_lua_fence_sha },
    [NM_SCRIPT_MARK] = { nm_lua_mark, nm_lua_mark_sha },
    [NM_SCRIPT_GRANT] = { nm_lua_grant, nm_lua_grant_sha },
    [NM_SCRIPT_COND] = { nm_lua_cond, nm_lua_cond_sha },
    [NM_SCRIPT_RWLOCK] = { nm_lua_rwlock, nm_lua_rwlock_sha },
    [NM_SCRIPT_RWSTATUS] = { nm_lua_rwstatus, nm_lua_rwstatus_sha },
    [NM_SCRIPT_ADD] = { nm_lua_add, nm_lua_add_sha },
};

int nm_script_load(redisContext *c, nm_script_t id, int64_t deadline)
{
    const char *argv[3] = { "SCRIPT", "LOAD", scripts[id].text };
    const char *sha;
    size_t len;
    redisReply *r;

    int err = nm_call(c, 3, argv, NULL, deadline, &r);
    if (err)
        return err;
    err = nm_reply_string(r, &sha, &len);
    if (!err && (len != SHA_LEN || memcmp(sha, scripts[id].sha, SHA_LEN) != 0))
        err = EPROTO;
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
    cmd->argv[1] = scripts[id].sha;
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

int nm_script_append(redisContext *c, nm_script_t id, int nkeys, int nargs,
                     const char **argv, const size_t *lens)
{
    evalsha_cmd_t cmd;
    int err = evalsha_build(&cmd, id, nkeys, nargs, argv, lens);
    if (err)
        return err;
    return redisAppendCommandArgv(c, nargs + 3, cmd.argv, cmd.lens) == REDIS_OK
               ? 0 : NM_ECONN;
}

static int evalsha(redisContext *c, nm_script_t id, int nkeys, int nargs,
                   const char **argv, const size_t *lens, int64_t deadline,
                   redisReply **out)
{
    int err = nm_script_append(c, id, nkeys, nargs, argv, lens);
    if (!err)
        err = nm_send(c, deadline);
    return err ? err : nm_get_reply(c, deadline, out);
}

int nm_script_run(redisContext *c, nm_script_t id, int nkeys, int nargs,
                  const char **argv, const size_t *lens, int64_t deadline,
                  redisReply **out)
{
    int err = evalsha(c, id, nkeys, nargs, argv, lens, deadline, out);
    if (err == ENOENT) {
        err = nm_script_load(c, id, deadline);
        if (!err)
            err = evalsha(c, id, nkeys, nargs, argv, lens, deadline, out);
        if (err == ENOENT) /* lost again at once: not a server we understand */
            err = EPROTO;
    }
    return err;
}

/* Reads the reply to CALL, sent on C, into its fields. */
static void take(redisContext *c, nm_script_call_t *call, int64_t deadline)
{
    call->reply = NULL;
    call->err = nm_get_reply(c, deadline, &call->reply);
}

int nm_script_run_pair(redisContext *c, nm_script_call_t *first, nm_script_call_t *second,
                       nm_trailer_t *trailer, int64_t deadline)
{
    nm_script_call_t *both[2] = { first, second };
    int err = 0;
    for (int i = 0; i < 2 && !err; i++)
        err = nm_script_append(c, both[i]->id, both[i]->nkeys, both[i]->nargs, both[i]->argv,
                               both[i]->lens);
    if (!err && trailer &&
        redisAppendCommandArgv(c, trailer->argc, trailer->argv, trailer->lens) != REDIS_OK)
        err = NM_ECONN;
    if (!err)
        err = nm_send(c, deadline);
    first->reply = second->reply = NULL;
    first->sent = second->sent = 1;
    if (err) {
        /* Either may have gone out, or half a pipeline waits in C's
         * buffer: the connection is not to be used again. */
        first->err = second->err = NM_ECONN;
        return NM_ECONN;
    }
    take(c, first, deadline);
    if (first->err != NM_ECONN)
        take(c, second, deadline);
    else
        second->err = NM_ECONN;
    if (second->err == NM_ECONN)
        return NM_ECONN;
    if (trailer && second->err == ENOENT) {
        /* Nothing more can be asked on C before the trailer's answer:
         * SECOND, which did not run, goes again on another connection. */
        second->err = NM_ECONN;
        return NM_ECONN;
    }
    if (trailer) {
        /* FIRST's ENOENT, if any, is the caller's to see (and to drop C,
         * trailer and all). */
        trailer->pending = 1;
        return 0;
    }
    if (first->err == ENOENT && (err = nm_script_load(c, first->id, deadline)) == NM_ECONN)
        return NM_ECONN;
    if (second->err == ENOENT)
        second->err = nm_script_run(c, second->id, second->nkeys, second->nargs, second->argv,
                                    second->lens, deadline, &second->reply);
    return second->err == NM_ECONN ? NM_ECONN : 0;
}
