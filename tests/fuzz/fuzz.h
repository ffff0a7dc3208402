/*
 * fuzz.h -- what a fuzz target (fuzz_*.c) defines and shares.
 *
 * Each target is one LLVMFuzzerTestOneInput, built twice: with replay.c
 * as a plain program that make check runs on every build (it feeds the
 * target every file of its corpus, tests/fuzz/corpus/<target>/), and with
 * libFuzzer (clang -fsanitize=fuzzer) by `scripts/dev fuzz`, which
 * searches for new inputs.  A target judges its input the way the
 * library must: anything it is given may come back refused, never crash,
 * hang, leak or break a property the target checks (it abort()s then).
 */
#ifndef NM_FUZZ_H
#define NM_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The next line of [*P, END) (without its '\n') as a new NUL-terminated
 * string, *P moved past it; NULL when none is left or out of memory.  A
 * NUL inside a line ends the string there, as it would for a C caller. */
char *nm_fuzz_line(const uint8_t **p, const uint8_t *end);

/* Where a target's log lines go: formatted, measured, dropped (a fuzzer
 * logging every refusal to stderr would spend its time writing). */
void nm_fuzz_quiet_log(void);

#endif /* NM_FUZZ_H */
