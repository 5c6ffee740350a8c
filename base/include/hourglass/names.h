/*
 * hourglass/names.h - the names Hourglass accepts: GPU models, grade codes,
 * provider text and contract symbols. One definition, used by the command
 * decoder, the state machine, the CSV readers and the tools alike, so a name
 * one of them accepts is never refused by another.
 *
 * Pure functions: no state, no allocation, any thread.
 */
#ifndef HOURGLASS_NAMES_H
#define HOURGLASS_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A GPU model or grade code held in a char array of cap bytes: 1..cap-1
 * bytes of [A-Za-z0-9], then a NUL inside the array. */
bool hg_name_ok(const char *s, size_t cap);

/* The same rule for len bytes not NUL-terminated (len 1..cap-1). */
bool hg_name_ok_n(const char *s, size_t len, size_t cap);

/* Free text (a provider's name) as the CSV files carry it: 1..cap-1
 * printable ASCII bytes, no ',' and no '"', then a NUL inside the array. */
bool hg_text_ok(const char *s, size_t cap);

/* The characters an instrument symbol may have, as commands and snapshots
 * carry it: 1..cap-1 bytes of [A-Za-z0-9._-], then a NUL inside the array
 * (cap is HG_SYMBOL_MAX + 1 for a symbol). A listing's symbol must also
 * parse (hg_symbol_parse below); a command only needs to be well formed. */
bool hg_symbol_ok(const char *s, size_t cap);

/* A contract symbol "<GPU>.<GRADE>.<YYYY-MM>", e.g. "B200.A.2027-03", or a
 * token contract symbol "TOK.<CLASS>.<GRADE>.<YYYY-MM>", e.g.
 * "TOK.OW671B.S.2027-03" (settlement/CONTRACT.md sections 1 and 7.3): GPU or
 * class a name of gpu_cap, grade a name of grade_cap, year 1970..9999, month
 * 01..12. *token (may be NULL in hg_symbol_parse) is set to whether the TOK
 * form was used; gpu receives the GPU model or the class. Returns true and
 * fills every output; false (outputs unspecified) otherwise. */
bool hg_symbol_parse_product(const char *sym, bool *token, char *gpu, size_t gpu_cap,
                             char *grade, size_t grade_cap, uint32_t *year, uint32_t *month);

/* hg_symbol_parse_product without the product: either form. */
bool hg_symbol_parse(const char *sym, char *gpu, size_t gpu_cap, char *grade, size_t grade_cap,
                     uint32_t *year, uint32_t *month);

/* The prefix that marks a token contract. */
#define HG_SYMBOL_TOKEN_PREFIX "TOK."

#endif /* HOURGLASS_NAMES_H */
