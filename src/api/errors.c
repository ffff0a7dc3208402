/*
 * errors.c -- the names and texts of the errno values the API returns.
 *
 * One table, so a code cannot get a text without a name or the reverse.
 * The texts say what a code means when a netmutex call returns it, which
 * for several of them is not what strerror(3) says (EAGAIN: the server
 * could not be reached; ENOLCK: the lease was lost).  Only the codes some
 * call of this library or its porting layer returns are here: a name for
 * any other would suggest the library can return it.
 */
#include "nm.h"

#include <errno.h>

static const struct {
    int err;
    const char *name;
    const char *text;
} codes[] = {
    { 0, "0", "success" },
    { EINVAL, "EINVAL", "invalid argument (pointer, name, attribute, URL or setting)" },
    { ENOMEM, "ENOMEM", "out of memory" },
    { EBUSY, "EBUSY", "held by someone else (or, for destroy and configure, in use here)" },
    { EDEADLK, "EDEADLK", "the calling thread already holds the mutex" },
    { EOWNERDEAD, "EOWNERDEAD", "acquired; the previous holder died holding it" },
    { ENOTRECOVERABLE, "ENOTRECOVERABLE",
      "not recoverable: a robust holder unlocked without repairing" },
    { EAGAIN, "EAGAIN", "Redis server unreachable or not answering in time, or too few replicas acknowledged" },
    { ETIMEDOUT, "ETIMEDOUT", "the deadline passed" },
    { EPERM, "EPERM", "the calling thread does not hold the mutex" },
    { ENOLCK, "ENOLCK", "the lease was lost while the mutex was held" },
    { EIO, "EIO", "released here, but the server could not be told" },
    { ENOENT, "ENOENT", "there was nothing to free" },
    { EACCES, "EACCES",
      "refused by the server (credentials, database or ACL permission), "
      "or a TLS certificate not accepted" },
    { ENOTSUP, "ENOTSUP", "the server may evict lock keys (maxmemory policy), or quorum mode (conditions)" },
    { EPROTO, "EPROTO", "unexpected answer from the server (or no TLS where rediss:// wants it)" },
    { ENOSPC, "ENOSPC", "the porting layer's table of selected mutexes is full" },
    { ECANCELED, "ECANCELED", "stopped by the caller's callback" },
    { ERANGE, "ERANGE", "the caller's buffer is too small" },
};

static int find(int err)
{
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        if (codes[i].err == err)
            return (int)i;
    }
    return -1;
}

const char *netmutex_strerror(int err)
{
    int i = find(err);
    return i < 0 ? "unknown error" : codes[i].text;
}

const char *netmutex_errname(int err)
{
    int i = find(err);
    return i < 0 ? NULL : codes[i].name;
}
