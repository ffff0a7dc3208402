/*
 * journal.h -- the recent releases, kept to be sent again
 * to a new master after a Sentinel failover.
 *
 * Why.  After SENTINEL FAILOVER (sentinel.h) the sentinels go on naming the
 * old master for about a second after the replica was promoted, and the
 * old master goes on taking writes: a release sent there then never
 * reaches the new master, where the key keeps the token of a lease nobody
 * renews any more, until the lease ends (30 s by default).  Every release
 * is affected, a cached lease's give-back as well as an unlock: caching only
 * makes it likely, since a cached lease is held on the server nearly all
 * the time and goes back at a moment nobody chooses.  A release is a
 * compare-and-delete by token (release.lua), so sending it again anywhere
 * is harmless: it does nothing where the key is gone or holds another
 * token, and frees the name where it still holds ours.  So with a
 * redis-sentinel:// server every release sent is noted here (lock key,
 * token, the release's mode, and which master the sentinels named when it
 * left: sentinel.c's generation), and when the sentinels name another
 * master the background thread sends those still kept again to it
 * (resend.c), and marks them sent there.
 *
 * How long.  A release matters on a new master only while the key it
 * frees may still be there: the key's time to live was at most the lease
 * when the release left, so a release is kept for its lease plus
 * NM_JOURNAL_SLACK_MS (the old and the new master's clocks may differ, and
 * the sentinels take a moment to switch).  Not a fixed few seconds: a
 * failover noticed late (a loaded machine, a slow sentinel) still finds
 * the releases it needs, and none is kept past the point where it could
 * free anything.
 *
 * Bounded: entries past that time go, and at most NM_JOURNAL_MAX
 * are kept (the oldest go first: a process releasing more than that many
 * locks in the seconds between a promotion and the sentinels' switch may
 * leave a name to expire).  The journal lives in the process that released:
 * one that exits right after a release cannot send it again.
 *
 * Lock: the journal's own, a leaf (HACKING.md, "Lock order"); the hook set
 * with nm_journal_set_hook() runs after it is released and must take no
 * lock (a release may run under any of the library's).  The child of a
 * fork() starts with an empty journal: the releases were its parent's.
 */
#ifndef NM_JOURNAL_H
#define NM_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#include "settings.h"
#include "token.h"

/* Beyond the lease: for the sentinels to name the new master after a
 * promotion (about a second), for the background thread to ask them, and
 * for the new master's clock to be behind the old one's. */
#define NM_JOURNAL_SLACK_MS 10000
#define NM_JOURNAL_MAX 4096

typedef struct nm_journal_entry {
    uint64_t seq;          /* for nm_journal_sent */
    uint64_t cfg_gen;      /* the configuration's generation (config.h) */
    uint64_t master_gen;   /* the sentinels' master when last sent */
    int64_t until;         /* monotonic ms: kept until then (see above) */
    char *key;             /* every key of the lock (keys.h), keys_size
                              bytes (owned): a release re-sent may need
                              them all; the lock key is the first key_len */
    size_t key_len, keys_size;
    char token[NM_TOKEN_LEN + 1];
    int robust;            /* release.lua's 'r' */
    int unrecoverable;     /* release.lua's 'u' */
} nm_journal_entry_t;

/* Notes a release of TOKEN on lock key KEY (of length KEY_LEN, the first
 * of KEYS_SIZE bytes of keys, nm_keys_size()), a lease of LEASE_MS, under
 * CFG, sent while the sentinels' master was MASTER_GEN (read before it was
 * sent: a master published meanwhile has a greater one, and gets it
 * again).  Out of memory, nothing is noted. */
void nm_journal_note(const nm_config_t *cfg, uint64_t master_gen, const char *key,
                     size_t key_len, size_t keys_size, unsigned int lease_ms,
                     const char *token, int robust, int unrecoverable);

/* Whether releases under configuration CFG_GEN are kept at NOW (the
 * background thread then asks the sentinels often). */
int nm_journal_pending(uint64_t cfg_gen, int64_t now);

/* Copies of the entries under configuration CFG_GEN last sent while the
 * master was older than MASTER_GEN: *OUT (free with nm_journal_free), *N.
 * 0 or ENOMEM. */
int nm_journal_due(uint64_t cfg_gen, uint64_t master_gen, int64_t now,
                   nm_journal_entry_t **out, size_t *n);

/* Entry SEQ was sent again to master MASTER_GEN. */
void nm_journal_sent(uint64_t seq, uint64_t master_gen);

void nm_journal_free(nm_journal_entry_t *entries, size_t n);

/* FN runs after every note (see above): the background thread's nudge. */
void nm_journal_set_hook(void (*fn)(void));

/* Forgets every entry (netmutex_shutdown). */
void nm_journal_clear(void);

/* pthread_atfork hooks: the child forgets the parent's releases. */
void nm_journal_before_fork(void);
void nm_journal_after_fork_parent(void);
void nm_journal_after_fork_child(void);

#endif /* NM_JOURNAL_H */
