/*
 * unit_slot.c -- CRC16 and the hash slot of Redis Cluster (src/base/slot.c),
 * without a server.
 *
 * The expected slots are what CLUSTER KEYSLOT of redis-server 7 answered
 * for these keys, written down here, so the test checks the library
 * against Redis rather than against itself.
 */
#include "ac_config.h"

#include <glib.h>
#include <string.h>

#include "slot.h"

/* CRC-16/XMODEM: the catalogue's check value, and a few short inputs. */
static void test_crc16_known(void)
{
    g_assert_cmpuint(nm_crc16("123456789", 9), ==, 0x31c3);
    g_assert_cmpuint(nm_crc16("", 0), ==, 0);
    g_assert_cmpuint(nm_crc16("A", 1), ==, 0x58e5);
    /* Only LEN bytes count, NUL bytes included. */
    g_assert_cmpuint(nm_crc16("123456789xyz", 9), ==, 0x31c3);
    g_assert_cmpuint(nm_crc16("\0", 1), ==, 0);
    g_assert_cmpuint(nm_crc16("a\0b", 3), !=, nm_crc16("a", 1));
    /* High bytes are unsigned, not sign-extended. */
    g_assert_cmpuint(nm_crc16("\xff", 1), ==, 0x1ef0);
}

typedef struct keyslot {
    const char *key;
    size_t len;
    unsigned int slot;
} keyslot_t;

#define K(s, slot) { s, sizeof s - 1, slot }

/* CLUSTER KEYSLOT's answers (redis-server 7.0). */
static const keyslot_t known[] = {
    K("foo", 12182),
    K("bar", 5061),
    K("hello", 866),
    K("123456789", 12739), /* 0x31c3 % 16384 */
    K("", 0),
    K("user1000", 3443),
    /* The hash tag: only what lies between the first '{' and the next '}'. */
    K("{user1000}.following", 3443),
    K("{user1000}.followers", 3443),
    K("foo{bar}{zap}", 5061),     /* "bar" */
    K("a{b}c{d}", 3300),
    K("foo{{bar}}zap", 4015),     /* "{bar" */
    /* An empty tag, or no closing brace: the whole key. */
    K("foo{}{bar}", 8363),
    K("{}x", 10595),
    K("a{b", 13340),
    /* Binary-safe. */
    K("a\0b", 8383),
    /* A lock key of the key schema's example (keys.h), and its tag alone. */
    K("netmutex:{41b90dde29446fdd}jobs", 15523),
    K("41b90dde29446fdd", 15523),
};

static void test_slot_known(void)
{
    for (size_t i = 0; i < G_N_ELEMENTS(known); i++) {
        g_test_message("key %zu", i);
        g_assert_cmpuint(nm_slot_of(known[i].key, known[i].len), ==, known[i].slot);
    }
}

/* Every slot is below NM_SLOTS, and the tag rule is the same function of
 * the tag's bytes wherever the tag sits. */
static void test_slot_range_and_tag(void)
{
    char key[64];
    for (unsigned int i = 0; i < 2000; i++) {
        int len = g_snprintf(key, sizeof key, "k%u", i * 2654435761u);
        g_assert_cmpuint(nm_slot_of(key, (size_t)len), <, NM_SLOTS);
        g_assert_cmpuint(nm_slot_of(key, (size_t)len), ==, nm_crc16(key, (size_t)len) % NM_SLOTS);
        char tagged[80];
        int tlen = g_snprintf(tagged, sizeof tagged, "pre}{%s}post{x}", key);
        g_assert_cmpuint(nm_slot_of(tagged, (size_t)tlen), ==, nm_slot_of(key, (size_t)len));
    }
}

/* A brace beyond LEN does not count: the key is LEN bytes, not a C string. */
static void test_slot_len_bounds(void)
{
    g_assert_cmpuint(nm_slot_of("a{b}", 3), ==, 13340); /* "a{b" */
    g_assert_cmpuint(nm_slot_of("{user1000}", 9), ==, nm_crc16("{user1000", 9) % NM_SLOTS);
    g_assert_cmpuint(nm_slot_of("{", 1), ==, nm_crc16("{", 1) % NM_SLOTS);
    g_assert_cmpuint(nm_slot_of("}", 1), ==, nm_crc16("}", 1) % NM_SLOTS);
    g_assert_cmpuint(nm_slot_of("{}", 2), ==, nm_crc16("{}", 2) % NM_SLOTS);
    g_assert_cmpuint(nm_slot_of("{x}", 3), ==, nm_crc16("x", 1) % NM_SLOTS);
    g_assert_cmpuint(nm_slot_of("", 0), ==, 0);
}

/* Every slot has a tag of 1 to NM_SLOT_TAG_MAX letters and digits that a
 * key {<tag>}... hashes to that slot; the first ones follow the fixed
 * order (CRC16 of "0" is 0x3653, of "1" 0x2672: slots 13907 and 9842). */
static void test_tag_every_slot(void)
{
    for (unsigned int slot = 0; slot < NM_SLOTS; slot++) {
        const char *tag = nm_slot_tag(slot);
        size_t len = strlen(tag);
        g_assert_cmpuint(len, >=, 1);
        g_assert_cmpuint(len, <=, NM_SLOT_TAG_MAX);
        for (size_t i = 0; i < len; i++)
            g_assert_true(g_ascii_isalnum(tag[i]));
        char *key = g_strdup_printf("p{%s}fence", tag);
        g_assert_cmpuint(nm_slot_of(key, strlen(key)), ==, slot);
        g_free(key);
    }
    g_assert_cmpstr(nm_slot_tag(nm_crc16("0", 1) % NM_SLOTS), ==, "0");
    g_assert_cmpstr(nm_slot_tag(nm_crc16("1", 1) % NM_SLOTS), ==, "1");
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/unit/slot/crc16/known", test_crc16_known);
    g_test_add_func("/unit/slot/keyslot/known", test_slot_known);
    g_test_add_func("/unit/slot/keyslot/range-and-tag", test_slot_range_and_tag);
    g_test_add_func("/unit/slot/keyslot/len-bounds", test_slot_len_bounds);
    g_test_add_func("/unit/slot/tag/every-slot", test_tag_every_slot);
    return g_test_run();
}
