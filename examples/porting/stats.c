/*
 * stats.c -- an ordinary pthread module: a counter in a file, bumped by a
 * read-modify-write under a file-scope mutex.  Nothing here knows about
 * netmutex.  Ported (see porting.mk), with NETMUTEX_MUTEXES=stats_lock, the
 * same code excludes every process on every host that shares the file.
 */
#include "stats.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

/* Guards the file.  static, as most mutexes are: the program's symbol
 * table still names it, which is what NETMUTEX_MUTEXES=stats_lock finds. */
static pthread_mutex_t stats_lock = PTHREAD_MUTEX_INITIALIZER;

/* Guards this process's tally; never selected, so it stays a plain,
 * process-local pthread mutex even in the ported program. */
static pthread_mutex_t tally_lock = PTHREAD_MUTEX_INITIALIZER;
static long tally;

static int read_at(int fd, long *value)
{
    ssize_t n = pread(fd, value, sizeof *value, 0);
    if (n == 0)
        *value = 0;
    return n == 0 || n == (ssize_t)sizeof *value ? 0 : -1;
}

/* The unprotected read-modify-write the lock exists for. */
static int bump_file(const char *path)
{
    long value;
    int fd = open(path, O_RDWR | O_CREAT, 0600);
    if (fd < 0)
        return -1;
    int rc = read_at(fd, &value);
    value++;
    if (rc == 0 && pwrite(fd, &value, sizeof value, 0) != (ssize_t)sizeof value)
        rc = -1;
    close(fd);
    return rc;
}

int stats_bump(const char *path)
{
    pthread_mutex_lock(&stats_lock);
    int rc = bump_file(path);
    pthread_mutex_unlock(&stats_lock);

    pthread_mutex_lock(&tally_lock);
    tally++;
    pthread_mutex_unlock(&tally_lock);
    return rc;
}

long stats_read(const char *path)
{
    long value;
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    int rc = read_at(fd, &value);
    close(fd);
    return rc == 0 ? value : -1;
}

long stats_local_bumps(void)
{
    pthread_mutex_lock(&tally_lock);
    long n = tally;
    pthread_mutex_unlock(&tally_lock);
    return n;
}
