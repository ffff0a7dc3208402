/* fuzz_util.c -- the helpers fuzz.h declares, shared by the targets. */
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

#include "netmutex.h"

char *nm_fuzz_line(const uint8_t **p, const uint8_t *end)
{
    if (*p >= end)
        return NULL;
    const uint8_t *nl = memchr(*p, '\n', (size_t)(end - *p));
    size_t len = nl ? (size_t)(nl - *p) : (size_t)(end - *p);
    char *line = malloc(len + 1);
    if (line) {
        memcpy(line, *p, len);
        line[len] = '\0';
    }
    *p += len + (nl != NULL);
    return line;
}

static void drop(int level, const char *message, void *arg)
{
    /* Read every byte, so that a message built from garbage is caught by
     * the sanitizers here rather than nowhere. */
    volatile size_t n = strlen(message);
    (void)level;
    (void)arg;
    (void)n;
}

void nm_fuzz_quiet_log(void)
{
    netmutex_set_log(NETMUTEX_LOG_DEBUG, drop, NULL);
}
