/*
 * fake_server.h -- a Redis that answers from a script, for fuzz_server.c.
 *
 * It listens on a unix socket in a temporary directory of its own and
 * answers every complete command it reads, on any connection, with the
 * script's next reply, raw bytes sent as they are (hostile ones included);
 * once the script is spent it answers every command with an error, so
 * that a client fails fast rather than wait out its timeouts or redial
 * for ever (a blocking lock retries a server it cannot reach).  A script
 * is replies each ended by a line "~~" ("~~\n" right after the reply's
 * bytes; the last may lack it).
 *
 * Record mode, for making seeds: every command goes on to the real server
 * at a unix socket instead, and its reply goes back and into a file, as a
 * script the replay of the same calls would be answered with.
 */
#ifndef NM_FAKE_SERVER_H
#define NM_FAKE_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define NM_FAKE_SEP "~~\n"

typedef struct nm_fake nm_fake_t;

/* A server listening, with an empty script; NULL on failure (errno). */
nm_fake_t *nm_fake_start(void);
/* Its URL, unix://<dir>/fake.sock. */
const char *nm_fake_url(const nm_fake_t *f);
/* Closes every connection, then answers from SCRIPT (LEN bytes, copied;
 * NULL: none, every command gets the error).  Returns once the old
 * connections are closed. */
void nm_fake_play(nm_fake_t *f, const uint8_t *script, size_t len);
/* Record mode from now on: commands go to the server at UPSTREAM (a
 * unix socket path), replies into OUT as a script. */
void nm_fake_record(nm_fake_t *f, const char *upstream, FILE *out);
/* Stops the thread, closes everything, removes the directory. */
void nm_fake_stop(nm_fake_t *f);

#endif /* NM_FAKE_SERVER_H */
