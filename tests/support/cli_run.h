/*
 * cli_run.h - runs a command-line binary from a cmocka test through the shell
 * and captures one of its streams, for the tests that drive hgctl end to end
 * without a server (tests/gateway/tools, tests/settlement). Failures to start
 * the command or to allocate are cmocka test failures, so only a cmocka test
 * may call these (main thread).
 *
 * Which stream the test sees is the redirection it passes: CLI_STDOUT,
 * CLI_BOTH or CLI_STDERR.
 */
#ifndef HOURGLASS_TESTS_CLI_RUN_H
#define HOURGLASS_TESTS_CLI_RUN_H

#define CLI_STDOUT "2>/dev/null"      /* stdout only; stderr discarded */
#define CLI_BOTH "2>&1"               /* stdout and stderr interleaved */
#define CLI_STDERR "2>&1 >/dev/null"  /* stderr only; stdout discarded */

/* Runs `bin args redirect` through popen; returns the exit status (-1 if
 * the command did not exit normally) and sets *out to all it printed on the
 * captured stream, NUL-terminated, malloc'd (the caller may free it). */
int cli_run(const char *bin, const char *args, const char *redirect, char **out);

/* Fails the test, showing hay, unless needle occurs in it. */
void cli_expect(const char *hay, const char *needle);

/* The first MiB of file path, NUL-terminated, malloc'd (the caller frees
 * it); fails the test when it cannot be read. */
char *cli_slurp(const char *path);

#endif /* HOURGLASS_TESTS_CLI_RUN_H */
