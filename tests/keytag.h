/*
 * keytag.h -- the hash tag of a name's keys, computed here independently
 * of the library (src/server/keys.c) so that a test of the key schema checks the
 * library against the documented rule rather than against itself: 16
 * lowercase hex digits of the 64-bit FNV-1a digest of the name's bytes.
 */
#ifndef NM_TEST_KEYTAG_H
#define NM_TEST_KEYTAG_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define NM_TEST_TAG_LEN 16

/* TAG gets NM_TEST_TAG_LEN hex digits and a NUL. */
static inline void nm_test_key_tag(const char *name, size_t len, char *tag)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)name[i]) * 0x100000001b3ull;
    snprintf(tag, NM_TEST_TAG_LEN + 1, "%016llx", (unsigned long long)h);
}

#endif /* NM_TEST_KEYTAG_H */
