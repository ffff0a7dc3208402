/*
 * stats_board.h -- this process's published statistics on the servers
 * (NETMUTEX_STATS=publish): one short-lived key of its own, keys.c's
 * <prefix>stats:<host>:<pid>, written again every second by the
 * background thread's publishing job (local/stats_publish.c).
 *
 * Where: with one server, the server (a sentinel URL: the master the
 * sentinels name); on a Redis Cluster, the master of the key's slot
 * (any slot: a reader scans every master); in quorum mode the first
 * server of the list only (a reader scans it alone).
 */
#ifndef NM_STATS_BOARD_H
#define NM_STATS_BOARD_H

#include <stddef.h>
#include <stdint.h>

#include "settings.h"

/* SET <key> VALUE PX TTL_MS under CFG, by DEADLINE (monotonic ms).
 * 0, or an errno (EAGAIN: no server answered). */
int nm_stats_board_put(nm_config_t *cfg, const char *value, size_t len, unsigned int ttl_ms,
                       int64_t deadline);

/* DEL <key> under CFG, by DEADLINE: 0 or an errno. */
int nm_stats_board_remove(nm_config_t *cfg, int64_t deadline);

/* GET KEY (LEN bytes) under CFG, by DEADLINE: 0 with *TEXT (malloc'ed,
 * NUL-terminated) and *TEXT_LEN, ENOENT (gone since it was found), or an
 * errno (EAGAIN: no answer). */
int nm_stats_board_get(nm_config_t *cfg, const char *key, size_t len, int64_t deadline,
                       char **text, size_t *text_len);

#endif /* NM_STATS_BOARD_H */
