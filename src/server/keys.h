/*
 * keys.h -- the Redis keys of one mutex (src/lua/lib.lua has the schema).
 *
 * Redis Cluster refuses, while a slot is being migrated, any key a script
 * touches that its caller did not declare (lib.lua), so a script is given
 * every key it may touch, as a prefix of one fixed order (nm_key_t).  They
 * live in one allocation, each NUL-terminated: the lock key first, then
 * its siblings.  Keys are passed to Redis with explicit lengths, so any
 * byte of the name is safe.
 */
#ifndef NM_KEYS_H
#define NM_KEYS_H

#include <stddef.h>

#include "settings.h"
#include "token.h"

/* The order of a script's KEYS (lib.lua): every script takes the first N
 * of these, N its own (lease.c, status.c). */
typedef enum nm_key {
    NM_KEY_LOCK,    /* K */
    NM_KEY_FLOOR,   /* P: the fence floor of K's slot (not of the name) */
    NM_KEY_QUEUE,   /* Q */
    NM_KEY_WAITERS, /* W */
    NM_KEY_MARKER,  /* H */
    NM_KEY_GRANT,   /* G: the caller's own grant list */
    NM_KEY_COUNT
} nm_key_t;

/* The hash tag of every key of a name: 16 lowercase hex digits of a 64-bit
 * FNV-1a digest of the name's bytes, NUL-terminated in TAG. */
#define NM_KEY_TAG_LEN 16
void nm_keys_tag(const char *name, size_t name_len, char tag[NM_KEY_TAG_LEN + 1]);

/* Builds every key of the name under CFG's prefix: the lock key
 * <prefix>{<tag>}<name> first, then the others in nm_key_t's order: the
 * floor of its slot <prefix>{<slot tag>}fence (slot.h), its siblings, the
 * grant list <prefix>{<tag>}<name>:g:<TOKEN> last (TOKEN may be NULL when
 * no grant is awaited: a script that takes it is then never called).  The
 * prefix holds no brace and the tag is hex, so Redis Cluster hashes the
 * tag alone: every key of a name is in one slot, whatever bytes the name
 * holds.  *KEYS is malloc'ed; *LEN is the lock key's length.  0 or
 * ENOMEM. */
int nm_keys_build(const nm_config_t *cfg, const char *name, size_t name_len,
                  const char *token, char **keys, size_t *len);

/* Key WHICH in KEYS (of lock key length LEN), and its length. */
const char *nm_keys_get(const char *keys, size_t len, nm_key_t which, size_t *key_len);

/* The size in bytes of the first two keys of KEYS (of lock key length
 * LEN), the lock key and its floor, with their NULs: all a lease keeps
 * (lease.c), since the others follow from them and the token, and only
 * the contended paths' scripts are given them. */
size_t nm_keys_size(const char *keys, size_t len);

/* Every key of the name, in a new allocation *FULL (malloc'ed), from the
 * first two at KEYS (of lock key length LEN) and TOKEN (may be NULL), as
 * nm_keys_build() gives them.  0 or ENOMEM. */
int nm_keys_full(const char *keys, size_t len, const char *token, char **full);

/* Listing (list.c): the SCAN MATCH pattern for the lock keys under CFG's
 * prefix whose name PATTERN (a Redis glob) matches as a whole: the prefix
 * with its glob characters quoted, then {<any tag>}PATTERN.  Malloc'ed,
 * NULL when out of memory. */
char *nm_keys_match(const nm_config_t *cfg, const char *pattern);

/* Whether KEY (LEN bytes) is the lock key of a name under CFG's prefix:
 * the prefix, then the name's own tag in braces, then a name no longer
 * than NETMUTEX_NAME_MAX without a NUL.  The siblings (":q"...) and the
 * floors are not: their tag is another name's, or no name's.  1 with the
 * name in [*NAME, *NAME + *NAME_LEN) (a pointer into KEY), else 0. */
int nm_keys_name_of(const nm_config_t *cfg, const char *key, size_t len, const char **name,
                    size_t *name_len);

/* The grant list's name in KEYS (of lock key length LEN), and its length. */
const char *nm_keys_grant(const char *keys, size_t len, size_t *grant_len);

/* The grant list of waiter TOKEN for lock key KEY (of length LEN),
 * malloc'ed, with its length in *GRANT_LEN; NULL when out of memory. */
char *nm_keys_grant_for(const char *key, size_t len, const char *token, size_t *grant_len);

/* ---- a condition variable's keys (lib.lua, "Keys of one condition") ---- */

/* The order of cond.lua's KEYS: CW, CS and CH for everybody, the waiter's
 * own CG for its calls. */
typedef enum nm_ckey {
    NM_CKEY_WAITERS,  /* CW */
    NM_CKEY_SIGNALLED,/* CS */
    NM_CKEY_ENTRIES,  /* CH: every waiter's state and expiry */
    NM_CKEY_GRANT,    /* CG: the list the waiter blocks on */
    NM_CKEY_COUNT
} nm_ckey_t;

/* The keys of condition NAME under CFG's prefix, <prefix>{c<tag>}<name>
 * then ":cw", ":cs", ":ch", ":cg:<TOKEN>" (the last only with a TOKEN),
 * each NUL-terminated, in one allocation *KEYS (malloc'ed), the lengths in
 * LENS.  The tag is 'c' and nm_keys_tag()'s digest: one slot per
 * condition, and never a mutex's key.  0 or ENOMEM. */
int nm_keys_cond(const nm_config_t *cfg, const char *name, size_t name_len,
                 const char *token, char **keys, size_t lens[NM_CKEY_COUNT]);

/* Key WHICH of KEYS as nm_keys_cond() built them. */
const char *nm_keys_cond_get(const char *keys, const size_t lens[NM_CKEY_COUNT],
                             nm_ckey_t which);

/* The CG of waiter TOKEN (TOKEN_LEN bytes) of the condition whose CW is
 * KEYS' first key, malloc'ed, with its length in *LEN; NULL when out of
 * memory or TOKEN is not a token's length. */
char *nm_keys_cond_grant_for(const char *keys, const size_t lens[NM_CKEY_COUNT],
                             const char *token, size_t token_len, size_t *len);

/* ---- a read-write lock's keys (lib.lua, "Keys of one read-write lock") ---- */

/* The order of rwlock.lua's KEYS. */
typedef enum nm_rkey {
    NM_RKEY_LOCK,    /* K: the write lock */
    NM_RKEY_FLOOR,   /* P: the fence floor of K's slot */
    NM_RKEY_QUEUE,   /* Q */
    NM_RKEY_WAITERS, /* W */
    NM_RKEY_SHARES,  /* S: the read shares (a share set) */
    NM_RKEY_GRANT,   /* G: the caller's own grant list */
    NM_RKEY_COUNT
} nm_rkey_t;

/* The keys of read-write lock NAME under CFG's prefix: K
 * <prefix>{r<tag>}<name>, the floor of its slot, then K's ":q", ":w", ":s"
 * and ":g:<TOKEN>" (G only with a TOKEN), each NUL-terminated, in one
 * allocation *KEYS (malloc'ed), the lengths in LENS.  The tag is 'r' and
 * nm_keys_tag()'s digest: one slot per lock, and never a mutex's or a
 * condition's key.  0 or ENOMEM. */
int nm_keys_rwlock(const nm_config_t *cfg, const char *name, size_t name_len,
                   const char *token, char **keys, size_t lens[NM_RKEY_COUNT]);

/* The keys of semaphore NAME (lib.lua, "Keys of one semaphore"): as
 * nm_keys_rwlock()'s, in the same order, under the tag 's' and the
 * digest: K <prefix>{s<tag>}<name> (declared, never set), P, ":q", ":w",
 * ":s" (the permits, a bounded share set), ":g:<TOKEN>".  0 or ENOMEM. */
int nm_keys_sem(const nm_config_t *cfg, const char *name, size_t name_len, const char *token,
                char **keys, size_t lens[NM_RKEY_COUNT]);

/* Key WHICH of KEYS as nm_keys_rwlock() or nm_keys_sem() built them. */
const char *nm_keys_rwlock_get(const char *keys, const size_t lens[NM_RKEY_COUNT],
                               nm_rkey_t which);

/* Listing (list.c) of read-write locks and semaphores: the SCAN MATCH
 * pattern of the keys under CFG's prefix whose tag is 'r' or 's' and a
 * digest, then PATTERN, then END ("" for K, ":s", ":q"): the keys one of
 * them keeps while it is held or waited for.  Malloc'ed, NULL when out of
 * memory. */
char *nm_keys_match_shared(const nm_config_t *cfg, const char *pattern, const char *end);
/* Whether KEY (LEN bytes) is K, S or Q of a read-write lock ('r' in
 * *KIND) or a semaphore ('s') under CFG's prefix, the name's own tag after
 * the kind's letter: 1 with the name in [*NAME, *NAME + *NAME_LEN) (a
 * pointer into KEY), else 0. */
int nm_keys_shared_name_of(const nm_config_t *cfg, const char *key, size_t len, char *kind,
                           const char **name, size_t *name_len);

/* Deadlock detection (deadlock.h, waitfor.c), each key in a slot of its
 * own, tagged 'd' and the digest of what it is about:
 *   <prefix>{d<tag of ID>}w:<ID>            a waiter's record (ID is its
 *                                           "host:pid:tid")
 *   <prefix>{d<tag of NAME>}h:<NAME>        the waiter holding mutex NAME
 *   <prefix>{d<tag of NAME>}r:<NAME>        a set: the waiters holding a
 *                                           share or the write lock of
 *                                           read-write lock NAME
 *   <prefix>{d}seq                          the counter of waits (no
 *                                           expiry, on purpose: waitfor.h)
 * Malloc'ed, with the length in *LEN; NULL when out of memory. */
char *nm_keys_waiter(const nm_config_t *cfg, const char *id, size_t id_len, size_t *len);
char *nm_keys_held_by(const nm_config_t *cfg, const char *name, size_t name_len, size_t *len);
char *nm_keys_rw_held_by(const nm_config_t *cfg, const char *name, size_t name_len, size_t *len);
char *nm_keys_wait_seq(const nm_config_t *cfg, size_t *len);
/* Listing the waiters: the SCAN MATCH pattern of every waiter's record
 * under CFG's prefix (malloc'ed, NULL when out of memory), and whether KEY
 * (LEN bytes) is one: 1 with the waiter's id in [*ID, *ID + *ID_LEN). */
char *nm_keys_match_waiters(const nm_config_t *cfg);
int nm_keys_waiter_of(const nm_config_t *cfg, const char *key, size_t len, const char **id,
                      size_t *id_len);

/* ---- lock-order checking's keys (lockdep.c; docs/design.md) ---- */

/* The key of the order "A then B" (A, B: a kind letter, ':', a name),
 * <prefix>{o<tag>}<A>><B>, or with CLAIM the claim key of the unordered
 * pair {A, B} (whoever logs its inversion), <prefix>{i<tag>}<X><><Y>, X
 * and Y the two in byte order.  The tag is nm_keys_tag()'s digest of the
 * two joined by a NUL (names hold none): one slot per key, and never
 * another primitive's key.  *KEY is malloc'ed, *LEN its length.  0 or
 * ENOMEM. */
int nm_keys_order(const nm_config_t *cfg, const char *a, size_t a_len, const char *b,
                  size_t b_len, int claim, char **key, size_t *len);

/* ---- a process's published statistics (stats_board.c) ---- */

/* The key process PID of HOST publishes its statistics to,
 * <prefix>stats:<host>:<pid> (no brace after the prefix: never a lock
 * key), malloc'ed, its length in *LEN; NULL when out of memory. */
char *nm_keys_stats(const nm_config_t *cfg, const char *host, long pid, size_t *len);

/* The SCAN MATCH pattern of every process's statistics key under CFG's
 * prefix (its glob characters quoted), malloc'ed or NULL. */
char *nm_keys_stats_match(const nm_config_t *cfg);

/* Whether KEY (LEN bytes) is a statistics key under CFG's prefix. */
int nm_keys_is_stats(const nm_config_t *cfg, const char *key, size_t len);

#endif /* NM_KEYS_H */
