/*
 * notes.c -- the messages of the NETMUTEX_MUTEXES parse, held back
 * until the parse is over.
 *
 * The parse runs inside pthread_once, on the first wrapped call.  In a
 * static link the logger's own pthread_mutex_lock is wrapped too: a
 * message logged from inside the parse would ask the selection about the
 * logger's mutex, wait on the very pthread_once it runs in, and hang.
 * Once the table is published, logging is safe.  Only the parse writes
 * notes, so pthread_once is all the locking they need.
 */
#include "notes.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "netmutex.h"

typedef struct note {
    int level;
    char *text;
} note_t;

static note_t *notes;
static size_t nnotes;

void nm_note(int level, const char *fmt, ...)
{
    va_list ap;
    char *text;
    va_start(ap, fmt);
    int n = vasprintf(&text, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;   /* out of memory: the message is lost, not the program */
    note_t *grown = realloc(notes, (nnotes + 1) * sizeof *notes);
    if (!grown) {
        free(text);
        return;
    }
    notes = grown;
    notes[nnotes++] = (note_t){ level, text };
}

void nm_notes_flush(void)
{
    for (size_t i = 0; i < nnotes; i++) {
        netmutex_log(notes[i].level, "%s", notes[i].text);
        free(notes[i].text);
    }
    free(notes);
    notes = NULL;
    nnotes = 0;
}
