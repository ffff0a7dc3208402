/*
 * waitfor.h -- the wait-for graph on the servers: what a waiter that
 * waits long publishes for the deadlock detector (deadlock.h), and the
 * reads that walk it.
 *
 * A waiter's record <prefix>{d..}w:<id> (keys.h) holds, as text, the
 * sequence number of its wait (INCR of <prefix>{d}seq: the youngest wait
 * has the highest), the name it waits for, and the mutexes and read-write
 * locks it holds, each with its kind; beside it, for each mutex it holds,
 * <prefix>{d..}h:<name> holds its id, and for each read-write lock, the
 * set <prefix>{d..}r:<name> has it (a read-write lock has many holders).
 * A set's members do not expire one by one: a member whose record is gone,
 * or no longer lists the hold, is stale, and the walk passes it over.
 * Both expire (PX) unless published again, and go when the wait ends;
 * no key is ever created without its expiry (SET PX, and a set's SADD
 * with its PEXPIRE in one script, add.lua), so a process killed at any
 * moment leaves nothing that lasts -- but the counter of waits, which
 * never expires on purpose: a wait number must never be given twice
 * while records live, and records live as long as their waits, without
 * bound, so no expiry could be safe (an empty restart resets it, but
 * takes every record with it).  One key in all, not one per name.
 * Every key is read and written by itself (GET, SET, DEL, INCR, that
 * script) on the one server, the master, or the node of its slot:
 * nothing here is atomic across keys, and the walk checks every hop
 * (deadlock.c).  Not in quorum mode, where no server alone says who
 * waits.
 */
#ifndef NM_WAITFOR_H
#define NM_WAITFOR_H

#include <stddef.h>

#include "settings.h"

/* Most holds a record lists (more are left out: the walk then misses a
 * cycle through them, never makes one up). */
#define NM_WAITREC_HELD_MAX 32

/* The kinds of a wait and of a hold, as records spell them. */
#define NM_WAIT_MUTEX 'm'
#define NM_WAIT_READ 'r'  /* a read-write lock's read share */
#define NM_WAIT_WRITE 'w' /* a read-write lock's write lock */

/* A record, read: pointers into the text it was parsed from. */
typedef struct nm_waitrec {
    long long seq;
    char wait_kind;                 /* NM_WAIT_* */
    const char *wait;               /* the name waited for */
    size_t wait_len;
    size_t nheld;
    const char *held[NM_WAITREC_HELD_MAX];
    size_t held_len[NM_WAITREC_HELD_MAX];
    char held_kind[NM_WAITREC_HELD_MAX];
} nm_waitrec_t;

/* The record's text for R (R->held... as listed): malloc'ed, with its
 * length; NULL when out of memory. */
char *nm_waitrec_format(const nm_waitrec_t *r, size_t *len);

/* Parses TEXT (LEN bytes, kept alive by the caller) into *R: 0 or
 * EPROTO. */
int nm_waitrec_parse(const char *text, size_t len, nm_waitrec_t *r);

/* Whether R lists mutex NAME among its holds. */
int nm_waitrec_holds(const nm_waitrec_t *r, const char *name, size_t len);

/* Whether R holds NAME in a way that keeps a wait of KIND for it out: a
 * mutex wait by the mutex, a write wait by a share or the write lock, a
 * read wait by the write lock.  (A reader queued behind a waiting writer
 * waits for that writer too; that edge is not in the graph, so such a
 * cycle goes unseen, never made up.) */
int nm_waitrec_blocks(const nm_waitrec_t *r, char kind, const char *name, size_t len);

/* A new sequence number in *SEQ: 0 or an error. */
int nm_waitfor_seq(nm_config_t *cfg, long long *seq);

/* Publishes waiter ID's record TEXT and its holder keys for R's holds, all
 * expiring in TTL_MS: 0 or the first error. */
int nm_waitfor_publish(nm_config_t *cfg, const char *id, const char *text, size_t len,
                       const nm_waitrec_t *r, unsigned int ttl_ms);

/* Deletes waiter ID's record and those of its holder keys that still name
 * it (another waiter may have taken one over since). */
void nm_waitfor_delete(nm_config_t *cfg, const char *id, const nm_waitrec_t *r);

/* Reads waiter ID's record (*TEXT malloc'ed, NULL when there is none) or
 * the holder of mutex NAME (*TEXT its id, NULL when none is published):
 * 0 or an error. */
int nm_waitfor_record(nm_config_t *cfg, const char *id, size_t id_len, char **text,
                      size_t *len);
int nm_waitfor_holder(nm_config_t *cfg, const char *name, size_t name_len, char **text,
                      size_t *len);

/* The published waiters that may hold NAME against a wait of KIND: the
 * mutex's holder key, or the read-write lock's set, in byte order (*IDS
 * malloc'ed, each id malloc'ed and NUL-terminated; free with
 * nm_waitfor_ids_free): 0 or an error. */
int nm_waitfor_holders(nm_config_t *cfg, char kind, const char *name, size_t name_len,
                       char ***ids, size_t *n);
void nm_waitfor_ids_free(char **ids, size_t n);

/* The first of the waiting holders of what R waits for whose record holds
 * it in a way that keeps R's wait out (*ID malloc'ed, NULL when none): 0
 * or an error. */
int nm_waitfor_blocker(nm_config_t *cfg, const nm_waitrec_t *r, char **id);

/* A kind of wait or hold in words: "lock", "read", "write", or NULL. */
const char *nm_waitfor_kind_word(char kind);

#endif /* NM_WAITFOR_H */
