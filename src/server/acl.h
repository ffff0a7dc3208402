/*
 * acl.h -- the Redis ACL rule a netmutex user needs (netmutex_acl_rule(3)).
 *
 * The one place that knows which commands the library sends, and which
 * keys and channels it touches, as ACL SETUSER rules: every key and
 * channel name starts with the prefix (keys.h: <prefix>{<tag>}...), so one
 * pattern each covers them.  A new command sent anywhere in src/, or run
 * by a script of src/lua/, goes in this file's list, or the ACL suite
 * (tests/acl.sh) fails.
 */
#ifndef NM_ACL_H
#define NM_ACL_H

#include <stddef.h>

/* The rule for PREFIX (a valid prefix, config.h: at most NM_PREFIX_MAX
 * bytes, no brace) in BUF of SIZE bytes, NUL-terminated: ACL SETUSER rules
 * separated by single spaces, each written as redis-cli and redis.conf
 * read an argument (in double quotes, with \\, \" and \xHH escapes, when it
 * holds a space, a quote or a byte outside printable ASCII).  The key and
 * channel patterns quote the prefix's glob characters with '\'.  0, or
 * ERANGE when it does not fit (BUF then holds no rule). */
int nm_acl_rule(const char *prefix, char *buf, size_t size);

#endif /* NM_ACL_H */
