/*
 * cli_run.h - runs a command-line binary from a cmocka test through the shell
 * and captures one of its streams, for the tests that drive hgctl end to end
 * without a server (tests/tools, tests/settlement). Include <cmocka.h> (and
 * its prerequisites) first: failures to start the command or to allocate are
 * test failures.
 *
 * Which stream the test sees is the redirection it passes: CLI_STDOUT,
 * CLI_BOTH or CLI_STDERR.
 */
#ifndef HOURGLASS_TESTS_CLI_RUN_H
#define HOURGLASS_TESTS_CLI_RUN_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define CLI_STDOUT "2>/dev/null"      /* stdout only; stderr discarded */
#define CLI_BOTH "2>&1"               /* stdout and stderr interleaved */
#define CLI_STDERR "2>&1 >/dev/null"  /* stderr only; stdout discarded */

/* Runs `bin args redirect` through popen; returns the exit status (-1 if
 * the command did not exit normally) and sets *out to all it printed on the
 * captured stream, NUL-terminated, malloc'd (the caller may free it). */
static inline int cli_run(const char *bin, const char *args, const char *redirect, char **out) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "%s %s %s", bin, args, redirect);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  assert_non_null(buf);
  size_t r;
  while ((r = fread(buf + n, 1, cap - n - 1, p)) > 0) {
    n += r;
    if (n + 1 == cap) {
      cap *= 2;
      buf = realloc(buf, cap);
      assert_non_null(buf);
    }
  }
  buf[n] = '\0';
  int st = pclose(p);
  *out = buf;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Fails the test, showing hay, unless needle occurs in it. */
static inline void cli_expect(const char *hay, const char *needle) {
  if (strstr(hay, needle) == NULL) fail_msg("missing '%s' in:\n%s", needle, hay);
}

#endif /* HOURGLASS_TESTS_CLI_RUN_H */
