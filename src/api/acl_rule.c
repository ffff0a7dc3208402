/*
 * acl_rule.c -- netmutex_acl_rule: the argument checks and which prefix; the
 * rule itself is server/acl.c's.
 */
#include "nm.h"

#include <errno.h>
#include <stdlib.h>

#include "acl.h"
#include "config.h"

int netmutex_acl_rule(const char *prefix, char *buf, size_t size)
{
    char *configured = NULL;
    int err;

    if (!buf)
        return EINVAL;
    if (prefix) {
        if (!nm_config_valid_prefix(prefix))
            return EINVAL;
    } else if ((err = nm_config_prefix(&configured)) != 0) {
        return err;
    }
    err = nm_acl_rule(prefix ? prefix : configured, buf, size);
    free(configured);
    return err;
}
