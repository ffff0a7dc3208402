/*
 * reader.h -- the bounds on what a server may make a context's reader
 * hold: unread bytes (NM_READER_MAX) and the element counts its replies'
 * arrays claim, checked before hiredis allocates for them.
 */
#ifndef NM_READER_H
#define NM_READER_H

#include <hiredis/hiredis.h>

/* More unread bytes than any reply of ours needs: the server floods
 * (reply.c's nm_receive, tls_io.c's reads). */
#define NM_READER_MAX (16u << 20)

/* Every context the library makes (dial.c) bounds the element counts its
 * replies' arrays may claim (reader.c, "array counts"): 0 or ENOMEM.
 * Undone before the context is freed. */
int nm_reader_guard(redisContext *c);
void nm_reader_unguard(redisContext *c);

/* What a failed read of C's reader means: ENOMEM when memory ran out,
 * else NM_ECONN (a protocol error, a refused array count). */
int nm_reader_error(const redisContext *c);

#endif /* NM_READER_H */
