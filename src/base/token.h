/*
 * token.h -- acquisition tokens: 128 random bits, as 32 lowercase hex chars.
 *
 * A fresh token is drawn for every acquisition, so a holder can only ever
 * release or extend the acquisition it made, never a later one of its own
 * process, nor anybody else's.
 */
#ifndef NM_TOKEN_H
#define NM_TOKEN_H

#define NM_TOKEN_LEN 32

/* Fills OUT with a new token and a terminating NUL.  0 or an errno value
 * (the kernel's entropy source failed). */
int nm_token_new(char out[NM_TOKEN_LEN + 1]);

#endif /* NM_TOKEN_H */
