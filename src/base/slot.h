/*
 * slot.h -- which Redis Cluster slot a key belongs to.
 *
 * Redis Cluster hashes a key to one of 16384 slots with CRC16 (the XMODEM
 * variant: polynomial 0x1021, initial value 0) modulo 16384.  When the key
 * holds a '{' followed later by a '}' with at least one byte between them,
 * only those bytes are hashed: the hash tag.  A pure function, kept apart
 * from the cluster's state (cluster.h) so that it can be tested alone.
 */
#ifndef NM_SLOT_H
#define NM_SLOT_H

#include <stddef.h>
#include <stdint.h>

#define NM_SLOTS 16384

/* CRC16/XMODEM of LEN bytes at BUF. */
uint16_t nm_crc16(const char *buf, size_t len);

/* The cluster slot of KEY (LEN bytes, binary-safe), hash tag rule included. */
unsigned int nm_slot_of(const char *key, size_t len);

/* The slot tag of SLOT: a short string (1 to NM_SLOT_TAG_MAX letters and
 * digits, NUL-terminated) that CRC16 hashes to SLOT, so that a key tagged
 * {<it>} lives in SLOT.  The per-slot keys (lib.lua, "Fences") are named
 * with it.  It is the first such string in a fixed order (shorter first,
 * then by the alphabet 0-9, a-z, A-Z), so every process and version agrees;
 * the table is computed once, at the first call (a few milliseconds). */
#define NM_SLOT_TAG_MAX 4
const char *nm_slot_tag(unsigned int slot);

#endif /* NM_SLOT_H */
