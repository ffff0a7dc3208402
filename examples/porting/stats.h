/* stats.h -- a counter kept in a file, shared by every process given the
 * same path (see stats.c). */
#ifndef STATS_H
#define STATS_H

/* Adds one to the counter in PATH; 0, or -1 with errno set. */
int stats_bump(const char *path);
/* The counter in PATH (0 for a new file), or -1 with errno set. */
long stats_read(const char *path);
/* How many bumps this process made. */
long stats_local_bumps(void);

#endif
