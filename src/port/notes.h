/*
 * notes.h -- the messages of the NETMUTEX_MUTEXES parse (notes.c), held
 * back until the parse is over: logging from inside it can hang a static
 * link (notes.c says how).
 */
#ifndef NM_PORT_NOTES_H
#define NM_PORT_NOTES_H

#include <ac_config.h>

/* A message for netmutex_log, held until nm_notes_flush: see there why. */
void nm_note(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void nm_notes_flush(void);

#endif /* NM_PORT_NOTES_H */
