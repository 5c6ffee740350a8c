/*
 * hgctl_args.c - option parsing, comma-separated lists and whole-file
 * input for hgctl's local commands (hgctl_args.h).
 */
#include "hgctl_args.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Parses --name value pairs and flags. Returns 0, -1 for --help (usage
 * printed on stdout) or 2 (message printed). */
int hgctl_parse_opts(const char *cmd, int argc, char **argv, const hgctl_opt_t *opts, size_t n,
                     void (*usage)(FILE *)) {
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      return -1;
    }
    const hgctl_opt_t *o = NULL;
    for (size_t k = 0; k < n; k++)
      if (strcmp(a, opts[k].name) == 0) o = &opts[k];
    if (o == NULL) {
      fprintf(stderr, "hgctl %s: unknown option '%s'\n", cmd, a);
      usage(stderr);
      return 2;
    }
    if (o->val == NULL) {
      *o->flag = true;
      continue;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "hgctl %s: option %s needs a value\n", cmd, a);
      return 2;
    }
    if (*o->val != NULL) {
      fprintf(stderr, "hgctl %s: option %s given twice\n", cmd, a);
      return 2;
    }
    *o->val = argv[++i];
  }
  return 0;
}

/* Decimal integer in [lo, hi]; false otherwise. */
bool hgctl_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
  if (s == NULL || *s == '\0') return false;
  errno = 0;
  char *end;
  long long v = strtoll(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

size_t hgctl_list_count(const char *s) {
  size_t n = 1;
  for (; *s; s++) n += *s == ',';
  return n;
}

const char *hgctl_list_next(const char **p, size_t *len) {
  const char *item = *p;
  *len = strcspn(item, ",");
  *p = item + *len + (item[*len] == ',');
  return item;
}

int hgctl_read_file(const char *path, char **buf, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return -errno;
  size_t cap = 1 << 16, n = 0;
  char *b = malloc(cap + 1);
  if (b == NULL) {
    fclose(f);
    return -ENOMEM;
  }
  for (;;) {
    if (n == cap) {
      char *nb = realloc(b, cap * 2 + 1);
      if (nb == NULL) {
        free(b);
        fclose(f);
        return -ENOMEM;
      }
      b = nb;
      cap *= 2;
    }
    size_t r = fread(b + n, 1, cap - n, f);
    n += r;
    if (r == 0) break;
  }
  int err = ferror(f) ? -EIO : 0;
  fclose(f);
  if (err) {
    free(b);
    return err;
  }
  b[n] = '\0';
  *buf = b;
  *len = n;
  return 0;
}
