/* slot.c -- CRC16, the hash tag rule of Redis Cluster, and slot tags. */
#include "slot.h"

#include <pthread.h>
#include <string.h>

/* CRC after one more byte B. */
static uint16_t crc_step(uint16_t crc, char b)
{
    crc ^= (uint16_t)((unsigned char)b << 8);
    /* Bit by bit: keys are short, and there is no table to get wrong. */
    for (int bit = 0; bit < 8; bit++)
        crc = crc & 0x8000 ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
    return crc;
}

uint16_t nm_crc16(const char *buf, size_t len)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++)
        crc = crc_step(crc, buf[i]);
    return crc;
}

/* ---- slot tags ---- */

static const char alphabet[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
#define ALPHABET_LEN (sizeof alphabet - 1)

static pthread_once_t tags_once = PTHREAD_ONCE_INIT;
static char tags[NM_SLOTS][NM_SLOT_TAG_MAX + 1];
static unsigned int tags_found;

/* Every string of LEN characters that starts with BUF's DEPTH (whose CRC
 * is CRC): each names the slots it hashes to, if they have no tag yet.
 * The CRC is carried from the prefix: 62^3 strings cover nearly every
 * slot, at one step each. */
static void visit(char *buf, size_t depth, size_t len, uint16_t crc)
{
    for (size_t i = 0; i < ALPHABET_LEN && tags_found < NM_SLOTS; i++) {
        uint16_t c = crc_step(crc, alphabet[i]);
        buf[depth] = alphabet[i];
        if (depth + 1 < len) {
            visit(buf, depth + 1, len, c);
        } else if (!tags[c & (NM_SLOTS - 1)][0]) {
            memcpy(tags[c & (NM_SLOTS - 1)], buf, len);
            tags_found++;
        }
    }
}

static void fill_tags(void)
{
    char buf[NM_SLOT_TAG_MAX];
    for (size_t len = 1; len <= NM_SLOT_TAG_MAX && tags_found < NM_SLOTS; len++)
        visit(buf, 0, len, 0);
}

const char *nm_slot_tag(unsigned int slot)
{
    pthread_once(&tags_once, fill_tags);
    return tags[slot & (NM_SLOTS - 1)];
}

unsigned int nm_slot_of(const char *key, size_t len)
{
    const char *open = memchr(key, '{', len);
    if (open) {
        size_t rest = len - (size_t)(open - key) - 1;
        const char *close = memchr(open + 1, '}', rest);
        if (close && close > open + 1)
            return nm_crc16(open + 1, (size_t)(close - open - 1)) & (NM_SLOTS - 1);
    }
    return nm_crc16(key, len) & (NM_SLOTS - 1);
}
