/*
 * hgctl_args.h (internal) - option parsing, comma-separated lists (--months,
 * --fsp) and file input shared by hgctl's local commands (hgctl.c,
 * hgctl_hedge.c, hgctl_replay.c, hgctl_statement.c) and hgctl_op.c's
 * samples file, defined in hgctl_args.c. The network commands parse their
 * options with net_parse (hgctl_net_util.h), which also takes --name=value
 * and positional arguments.
 *
 * Main thread only (they print on stdout and stderr).
 */
#ifndef HG_GATEWAY_HGCTL_ARGS_H
#define HG_GATEWAY_HGCTL_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* hgctl's exit statuses, every command: 0 done; 1 refused or failed
 * (EXIT_INPUT: a local command's input was refused); 2 a usage error. */
#define EXIT_FAIL 1
#define EXIT_INPUT EXIT_FAIL
#define EXIT_USAGE 2

/* One option: "--name value" when val is set, the flag "--name" otherwise. */
typedef struct hgctl_opt {
  const char *name; /* with the "--" */
  const char **val; /* NULL for a flag */
  bool *flag;
} hgctl_opt_t;

/* Parses argv[0..argc) against opts[0..n). An option given twice, one
 * missing its value or an unknown one is a usage error. Returns 0, -1 for
 * --help (usage printed on stdout) or 2 (why printed on stderr). */
int hgctl_parse_opts(const char *cmd, int argc, char **argv, const hgctl_opt_t *opts, size_t n,
                     void (*usage)(FILE *));

/* Decimal integer in [lo, hi]; false otherwise (*out untouched). */
bool hgctl_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);

/* Comma-separated lists ("2027-03,2027-04", "1=3.100,2=3.200"): the item
 * count, one more than the commas (empty items count), and the item at *p,
 * whose length goes to *len; *p moves past it and its comma. Call next
 * exactly count times from p = s. */
size_t hgctl_list_count(const char *s);
const char *hgctl_list_next(const char **p, size_t *len);

/* Reads the whole file into a malloc'd buffer with a NUL after the len
 * bytes (the caller frees *buf). 0, -errno from fopen, -ENOMEM or -EIO. */
int hgctl_read_file(const char *path, char **buf, size_t *len);

#endif /* HG_GATEWAY_HGCTL_ARGS_H */
