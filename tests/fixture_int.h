/*
 * fixture_int.h -- what the fixture's own files (fixture.c, the setup, time
 * and assertions; fixture_server.c; fixture_thread.c; fixture_proc.c)
 * share and the test programs do not see: they include fixture.h only.
 */
#ifndef NM_TEST_FIXTURE_INT_H
#define NM_TEST_FIXTURE_INT_H

/* A bound for things that are expected to finish promptly (server start,
 * a remote call, a thread told to unlock): generous, never a speed claim. */
#define NM_PROMPT_MS 30000u

/* Modes in which nm_test_init runs this program as a helper process
 * instead of its tests (see nm_fixture_remote_mode). */
#define REMOTE_FLAG "--nm-remote"
#define COUNT_SOCKETS_FLAG "--nm-count-sockets"
#define EXIT_FLAG "--nm-exit"

/* In a program started with one of the flags above: does that job and
 * exits.  Otherwise returns at once (fixture_proc.c). */
void nm_fixture_remote_mode(int argc, char **argv);

#endif /* NM_TEST_FIXTURE_INT_H */
