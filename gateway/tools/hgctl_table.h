/*
 * hgctl_table.h (internal) - hgctl's tables for scripts and notebooks
 * (hgctl_table.c): `--format json|csv` on the commands that print one.
 *
 * A table has fixed columns, each a name (stable: scripts key on it) and a
 * kind, number or text. JSON is one array of objects, one per row, keys in
 * column order, numbers bare (prices and money keep their exact decimal
 * text: "3.420" prints as 3.420), text quoted and escaped, a missing value
 * null. CSV is a header line of the names, then one line per row, a
 * missing value empty, text quoted when it holds a comma, quote or line
 * break. Text output (the default) stays each command's own.
 *
 * Writes to one FILE; main thread; no allocation.
 */
#ifndef HG_GATEWAY_HGCTL_TABLE_H
#define HG_GATEWAY_HGCTL_TABLE_H

#include <stddef.h>
#include <stdio.h>

typedef enum { HGCTL_OUT_TEXT = 0, HGCTL_OUT_JSON, HGCTL_OUT_CSV } hgctl_out_t;

/* Parses a --format value ("text", "json", "csv"; NULL: text) into *out.
 * 0, or -1 if it is none of them. */
int hgctl_out_parse(const char *s, hgctl_out_t *out);

typedef struct hgctl_col {
  const char *name;
  int text; /* 1: a string (quoted in JSON), 0: a number */
} hgctl_col_t;

typedef struct hgctl_table {
  FILE *f;
  hgctl_out_t fmt;
  int lines; /* JSON: one object per line, no brackets (a tail that never ends) */
  const hgctl_col_t *cols;
  size_t ncols;
  size_t rows;
} hgctl_table_t;

/* Starts a JSON or CSV table on f (CSV: the header line). t->lines may be
 * set after: JSON lines instead of one array. */
void hgctl_table_start(hgctl_table_t *t, FILE *f, hgctl_out_t fmt, const hgctl_col_t *cols,
                       size_t ncols);

/* One row: vals[i] the value of column i as printed text, NULL (or "-")
 * for a missing one. */
void hgctl_table_row(hgctl_table_t *t, const char *const *vals);

/* Ends the table (JSON: the closing bracket and a newline). */
void hgctl_table_end(hgctl_table_t *t);

#endif /* HG_GATEWAY_HGCTL_TABLE_H */
