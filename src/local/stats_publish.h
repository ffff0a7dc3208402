/*
 * stats_publish.h -- the background thread's publishing job
 * (NETMUTEX_STATS=publish, netmutex_set_stats(NETMUTEX_STATS_PUBLISH)):
 * every NM_STATS_PUBLISH_MS this process's statistics (stats.h's text) go
 * to its key on the servers (server/stats_board.h), which expires after
 * NM_STATS_PUBLISH_TTL_MS; the key is deleted when publishing stops, at
 * netmutex_shutdown() and at exit.
 */
#ifndef NM_STATS_PUBLISH_H
#define NM_STATS_PUBLISH_H

#define NM_STATS_PUBLISH_MS 1000
#define NM_STATS_PUBLISH_TTL_MS 3000

/* Registers the job with the background thread (once; mutex.c). */
void nm_stats_publish_register(void);

/* pthread_atfork hook: the child has published nothing yet. */
void nm_stats_publish_after_fork_child(void);

#endif /* NM_STATS_PUBLISH_H */
