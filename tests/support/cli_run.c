/*
 * cli_run.c - a command line run through popen with one stream captured
 * (see cli_run.h); failures are cmocka assertions.
 */
#include "cli_run.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

int cli_run(const char *bin, const char *args, const char *redirect, char **out) {
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

void cli_expect(const char *hay, const char *needle) {
  if (strstr(hay, needle) == NULL) fail_msg("missing '%s' in:\n%s", needle, hay);
}

char *cli_slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) fail_msg("cannot open %s", path);
  char *b = calloc(1, 1 << 20);
  assert_non_null(b);
  size_t n = fread(b, 1, (1 << 20) - 1, f);
  b[n] = '\0';
  fclose(f);
  return b;
}
