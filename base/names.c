/* names.c - names and symbols (hourglass/names.h). */
#include "hourglass/names.h"

#include <string.h>

#include "hourglass/civil.h"

static bool alnum(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

bool hg_name_ok_n(const char *s, size_t len, size_t cap) {
  if (s == NULL || len == 0 || len >= cap) return false;
  for (size_t i = 0; i < len; i++)
    if (!alnum(s[i])) return false;
  return true;
}

bool hg_name_ok(const char *s, size_t cap) {
  const char *end = s == NULL ? NULL : memchr(s, '\0', cap);
  return end != NULL && hg_name_ok_n(s, (size_t)(end - s), cap);
}

bool hg_text_ok(const char *s, size_t cap) {
  const char *end = s == NULL ? NULL : memchr(s, '\0', cap);
  if (end == NULL || end == s) return false;
  for (const char *q = s; q < end; q++) {
    unsigned char c = (unsigned char)*q;
    if (c < 0x20 || c > 0x7e || c == ',' || c == '"') return false;
  }
  return true;
}

bool hg_symbol_ok(const char *s, size_t cap) {
  const char *end = s == NULL ? NULL : memchr(s, '\0', cap);
  if (end == NULL || end == s) return false;
  for (const char *q = s; q < end; q++)
    if (!alnum(*q) && *q != '.' && *q != '-' && *q != '_') return false;
  return true;
}

/* Copies the name before the next '.' of *p into out and steps past the dot. */
static bool take_name(const char **p, char *out, size_t cap) {
  const char *dot = strchr(*p, '.');
  if (dot == NULL || !hg_name_ok_n(*p, (size_t)(dot - *p), cap)) return false;
  memcpy(out, *p, (size_t)(dot - *p));
  out[dot - *p] = '\0';
  *p = dot + 1;
  return true;
}

bool hg_symbol_parse_product(const char *sym, bool *token, char *gpu, size_t gpu_cap,
                             char *grade, size_t grade_cap, uint32_t *year, uint32_t *month) {
  if (sym == NULL) return false;
  const char *p = sym;
  /* "TOK.<CLASS>.<GRADE>.<YYYY-MM>" has one more dot than a GPU symbol; a
   * GPU named TOK keeps the three-part form. */
  size_t plen = sizeof HG_SYMBOL_TOKEN_PREFIX - 1;
  const char *after = strchr(sym, '.');
  bool tok = strncmp(sym, HG_SYMBOL_TOKEN_PREFIX, plen) == 0 && after != NULL &&
             strchr(after + 1, '.') != NULL && strchr(strchr(after + 1, '.') + 1, '.') != NULL;
  if (tok) p += plen;
  if (!take_name(&p, gpu, gpu_cap) || !take_name(&p, grade, grade_cap)) return false;
  if (token) *token = tok;
  return hg_civil_parse_month(p, strlen(p), year, month);
}

bool hg_symbol_parse(const char *sym, char *gpu, size_t gpu_cap, char *grade, size_t grade_cap,
                     uint32_t *year, uint32_t *month) {
  return hg_symbol_parse_product(sym, NULL, gpu, gpu_cap, grade, grade_cap, year, month);
}
