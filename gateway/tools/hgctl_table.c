/*
 * hgctl_table.c - JSON and CSV tables for hgctl's --format (hgctl_table.h).
 * Values arrive as the text hgctl would print, so the two formats carry
 * the same exact decimals as the terminal.
 */
#include "hgctl_table.h"

#include <string.h>

int hgctl_out_parse(const char *s, hgctl_out_t *out) {
  if (s == NULL || strcmp(s, "text") == 0) *out = HGCTL_OUT_TEXT;
  else if (strcmp(s, "json") == 0) *out = HGCTL_OUT_JSON;
  else if (strcmp(s, "csv") == 0) *out = HGCTL_OUT_CSV;
  else return -1;
  return 0;
}

void hgctl_table_start(hgctl_table_t *t, FILE *f, hgctl_out_t fmt, const hgctl_col_t *cols,
                       size_t ncols) {
  t->f = f;
  t->fmt = fmt;
  t->cols = cols;
  t->ncols = ncols;
  t->rows = 0;
  t->lines = 0;
  if (fmt == HGCTL_OUT_CSV) {
    for (size_t i = 0; i < ncols; i++) fprintf(f, "%s%s", i ? "," : "", cols[i].name);
    fputc('\n', f);
  }
}

static void json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
    else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
    else fputc(*p, f);
  }
  fputc('"', f);
}

static void csv_field(FILE *f, const char *s) {
  if (strpbrk(s, ",\"\r\n") == NULL) {
    fputs(s, f);
    return;
  }
  fputc('"', f);
  for (const char *p = s; *p; p++) {
    if (*p == '"') fputc('"', f);
    fputc(*p, f);
  }
  fputc('"', f);
}

void hgctl_table_row(hgctl_table_t *t, const char *const *vals) {
  /* The array opens with the first row (or at the end when there is none),
   * so that JSON lines may be chosen after the start. */
  if (t->fmt == HGCTL_OUT_JSON) fputs(t->lines ? "{" : t->rows ? ",{" : "[{", t->f);
  for (size_t i = 0; i < t->ncols; i++) {
    const char *v = vals[i];
    int missing = v == NULL || strcmp(v, "-") == 0;
    if (t->fmt == HGCTL_OUT_CSV) {
      if (i) fputc(',', t->f);
      if (!missing) csv_field(t->f, v);
      continue;
    }
    if (i) fputc(',', t->f);
    json_string(t->f, t->cols[i].name);
    fputc(':', t->f);
    if (missing) fputs("null", t->f);
    else if (t->cols[i].text) json_string(t->f, v);
    else fputs(v, t->f);
  }
  if (t->fmt == HGCTL_OUT_JSON) fputs(t->lines ? "}\n" : "}", t->f);
  else fputc('\n', t->f);
  t->rows++;
}

void hgctl_table_end(hgctl_table_t *t) {
  if (t->fmt == HGCTL_OUT_JSON && !t->lines) fputs(t->rows ? "]\n" : "[]\n", t->f);
}
