/* slot.c -- CRC16 and the hash tag rule of Redis Cluster. */
#include "slot.h"

#include <string.h>

uint16_t nm_crc16(const char *buf, size_t len)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)((unsigned char)buf[i] << 8);
        /* Bit by bit: keys are short, and there is no table to get wrong. */
        for (int bit = 0; bit < 8; bit++)
            crc = crc & 0x8000 ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
    }
    return crc;
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
