/*
 * url.c -- keeping Redis passwords out of sight: hiding the one given with
 * -u from ps(1) and /proc/PID/cmdline, and reading the URL from a file
 * (--url-file) so that it never has to be on the command line at all.
 *
 * Any local user can read another process's command line; its environment
 * (/proc/PID/environ) only the same user and root can.  So a password in
 * -u is overwritten in our argv as soon as the options are parsed, which
 * shortens its exposure but cannot end it: it was readable from the exec
 * until then.  NETMUTEX_URL and --url-file have no such window.
 */
#include "ac_config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* Larger than any URL list the library accepts, so that the library, not
 * this file, is the one to call a long list malformed. */
#define URL_FILE_MAX (64 * 1024)
#define SENTINEL_SCHEME "redis-sentinel://"

/* The last '@' in [S, END), or NULL. */
static const char *last_at(const char *s, const char *end)
{
    while (end > s) {
        if (*--end == '@')
            return end;
    }
    return NULL;
}

/* Where the password of the one URL in [S, END) lies: [*FROM, *TO), empty
 * when there is none.  The credentials are found as the library finds
 * them: they end at the last '@' before the host, or for unix:// before the
 * first '/' of the path (which may itself hold an '@').  Without a ':' the
 * library refuses the URL, but the whole user part counts as the password
 * anyway: it was most likely meant as one. */
static void find_secret(const char *s, const char *end, const char **from, const char **to)
{
    const char *sep = strstr(s, "://");
    const char *start = sep != NULL && sep < end ? sep + 3 : s;
    const char *limit = end;

    *from = *to = end;
    if (strncmp(s, "unix://", 7) == 0) {
        const char *slash = memchr(start, '/', (size_t)(end - start));
        if (slash != NULL)
            limit = slash;
    }
    if (strncmp(s, SENTINEL_SCHEME, strlen(SENTINEL_SCHEME)) == 0)
        limit = start + strcspn(start, "?#");
    const char *at = last_at(start, limit);
    if (at == NULL)
        return;
    const char *colon = memchr(start, ':', (size_t)(at - start));
    *from = colon != NULL ? colon + 1 : start;
    *to = at;
}

/* The sentinels' password of a redis-sentinel:// URL in [S, END), the
 * value of its query's sentinel_password: [*FROM, *TO), empty if none. */
static void find_sentinel_secret(const char *s, const char *end, const char **from,
                                 const char **to)
{
    const char *q = strncmp(s, SENTINEL_SCHEME, strlen(SENTINEL_SCHEME)) == 0
                    ? memchr(s, '?', (size_t)(end - s)) : NULL;
    const char *key = q != NULL ? strstr(q, "sentinel_password=") : NULL;

    *from = *to = end;
    if (key != NULL && key < end) {
        *from = key + strlen("sentinel_password=");
        *to = *from + strcspn(*from, "&#");
    }
}

/* Overwrites the passwords of the one URL in [S, END) and says whether
 * there was one. */
static int scrub_one(char *s, char *end)
{
    const char *from, *to, *sfrom, *sto;

    find_secret(s, end, &from, &to);
    find_sentinel_secret(s, end, &sfrom, &sto);
    memset(s + (from - s), '*', (size_t)(to - from));
    memset(s + (sfrom - s), '*', (size_t)(sto - sfrom));
    return to > from || sto > sfrom;
}

/* The end of the URL that starts at S: the next ',' or the NUL; a
 * redis-sentinel:// URL is the whole list (its commas part sentinels). */
static const char *url_end(const char *s)
{
    const char *comma = strchr(s, ',');
    if (strncmp(s, SENTINEL_SCHEME, strlen(SENTINEL_SCHEME)) == 0)
        comma = NULL;
    return comma != NULL ? comma : s + strlen(s);
}

int cli_url_scrub(char *urls)
{
    int found = 0;

    /* The library splits a list at every ',': a password cannot hold a raw
     * one (it would be %2C), so neither do we need to care. */
    for (char *s = urls;; s++) {
        char *end = (char *)url_end(s);
        found |= scrub_one(s, end);
        if (*end == '\0')
            return found;
        s = end;
    }
}

/* A password, however long, shows as this: its length is none of a
 * reader's business.  The library masks it the same way. */
#define MASK "***"

/* Copies [S, FROM) to W, then the mask if [FROM, TO) is not empty. */
static char *mask_range(char *w, const char *s, const char *from, const char *to)
{
    memcpy(w, s, (size_t)(from - s));
    w += from - s;
    return to > from ? stpcpy(w, MASK) : w;
}

char *cli_url_mask(const char *urls)
{
    /* Each URL grows by at most twice the mask's length. */
    size_t cap = strlen(urls) + 1, n = 1;
    for (const char *p = urls; *p != '\0'; p++)
        n += *p == ',';
    char *out = malloc(cap + 2 * n * strlen(MASK)), *w = out;

    for (const char *s = urls; out != NULL; s++) {
        const char *end = url_end(s), *from, *to, *sfrom, *sto;
        find_secret(s, end, &from, &to);
        find_sentinel_secret(s, end, &sfrom, &sto);
        if (to == from)
            from = to = s; /* none: the copy goes on from the start */
        w = mask_range(w, s, from, to);
        w = mask_range(w, to, sfrom, sto);
        memcpy(w, sto, (size_t)(end - sto));
        w += end - sto;
        *w++ = *end;
        if (*end == '\0')
            break;
        s = end;
    }
    return out;
}

const char *cli_url_in_use(const struct cli_opts *o)
{
    const char *env = getenv("NETMUTEX_URL");

    /* As the library reads it: an empty variable counts as unset. */
    if (o->url != NULL)
        return o->url;
    return env != NULL && *env != '\0' ? env : NETMUTEX_DEFAULT_URL;
}

/* Drops the trailing white space, which an editor's final newline leaves;
 * any other is the library's to refuse. */
static void chomp(char *s, size_t *len)
{
    while (*len > 0 && (s[*len - 1] == '\n' || s[*len - 1] == '\r' ||
                        s[*len - 1] == ' ' || s[*len - 1] == '\t'))
        s[--*len] = '\0';
}

/* What FD holds, into BUF of CAP + 1 bytes; 0 or an errno (EFBIG: more
 * than CAP - 1 bytes). */
static int read_all(int fd, char *buf, size_t cap, size_t *len)
{
    size_t n = 0;

    for (;;) {
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return errno;
        if (r == 0)
            break;
        n += (size_t)r;
        if (n == cap)
            return EFBIG;
    }
    buf[n] = '\0';
    *len = n;
    return 0;
}

/* 0 or why the file's text cannot be a URL. */
static const char *bad_content(const char *s, size_t len)
{
    if (len == 0)
        return "it is empty";
    return memchr(s, '\0', len) != NULL ? "it holds a NUL byte" : NULL;
}

int cli_url_read_file(const char *path, char **url)
{
    char *buf = malloc(URL_FILE_MAX + 2);
    size_t len = 0;
    int err = buf != NULL ? 0 : ENOMEM;
    int fd = err == 0 ? open(path, O_RDONLY | O_CLOEXEC) : -1;

    if (err == 0 && fd < 0)
        err = errno;
    if (fd >= 0) {
        err = read_all(fd, buf, URL_FILE_MAX + 1, &len);
        close(fd);
    }
    const char *why = err == EFBIG ? "it is too large" : err ? strerror(err) : NULL;
    if (why == NULL) {
        chomp(buf, &len);
        why = bad_content(buf, len);
    }
    if (why == NULL) {
        *url = buf;
        return 0;
    }
    cli_say("cannot use --url-file %s: %s", path, why);
    free(buf);
    return err == ENOMEM ? CLI_EX_OSERR : CLI_EX_CONFIG;
}
