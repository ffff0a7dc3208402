/* token.c -- random acquisition tokens from the kernel's CSPRNG. */
#include "nm.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#ifdef HAVE_SYS_RANDOM_H
#include <sys/random.h>
#endif

#include "token.h"

/* getrandom() may return fewer bytes or be interrupted; loop until full.
 * Kernels older than 3.17 lack it, hence the /dev/urandom fallback. */
static int fill_random(unsigned char *buf, size_t len)
{
    size_t got = 0;
#ifdef HAVE_GETRANDOM
    while (got < len) {
        ssize_t n = getrandom(buf + got, len - got, 0);
        if (n > 0)
            got += (size_t)n;
        else if (errno == ENOSYS)
            break;
        else if (errno != EINTR)
            return errno;
    }
    if (got == len)
        return 0;
#endif
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    while (got < len) {
        ssize_t n = read(fd, buf + got, len - got);
        if (n > 0) {
            got += (size_t)n;
        } else if (n == 0 || errno != EINTR) {
            int err = n == 0 ? EIO : errno;
            close(fd);
            return err;
        }
    }
    close(fd);
    return 0;
}

int nm_token_new(char out[NM_TOKEN_LEN + 1])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char raw[NM_TOKEN_LEN / 2];
    int err = fill_random(raw, sizeof raw);
    if (err)
        return err;
    for (size_t i = 0; i < sizeof raw; i++) {
        out[2 * i] = hex[raw[i] >> 4];
        out[2 * i + 1] = hex[raw[i] & 15];
    }
    out[NM_TOKEN_LEN] = '\0';
    return 0;
}
