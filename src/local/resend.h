/*
 * resend.h -- the background thread's resend job (sentinel mode): while
 * the journal holds recent releases (journal.h), it asks the sentinels
 * where the master is, and sends again to a new master the releases noted
 * while they named an older one.
 */
#ifndef NM_RESEND_H
#define NM_RESEND_H

/* Registers the job with the background thread, and its hook with the
 * journal (once; mutex.c). */
void nm_resend_register(void);

#endif /* NM_RESEND_H */
