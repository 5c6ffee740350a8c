/*
 * libFuzzer target over hourglassd's configuration file parser
 * (daemon/daemon_config.c): the input is the file's text, copied into an
 * exact-size allocation (a read past its end is an ASan report). Checked: no
 * crash, leak or UB; a failure returns one of the documented codes with a
 * NUL-terminated, non-empty reason and a line within the text; parsing is
 * deterministic (the same text on the defaults twice gives equal configs);
 * and applying an accepted text again on its own result changes nothing
 * (the parser has no writer, so this stands in for the round trip). The
 * cross-key check and the mapping onto the pipeline's configuration run on
 * every accepted config.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon_config.h"
#include "hourglass/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void differs(void *ctx, const char *key, int reloadable) {
  (void)ctx;
  (void)key;
  (void)reloadable;
  abort();
}

static void check_error(int rc, const hg_dcfg_error_t *err, size_t lines) {
  if (rc != HG_EPARSE && rc != HG_ENOTFOUND && rc != HG_ERANGE && rc != HG_EINVAL) abort();
  if (memchr(err->reason, '\0', sizeof err->reason) == NULL || err->reason[0] == '\0') abort();
  if (memchr(err->key, '\0', sizeof err->key) == NULL) abort();
  if (err->line == 0 || err->line > lines) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size ? size : 1);
  if (text == NULL) abort();
  memcpy(text, data, size);
  size_t lines = 1;
  for (size_t i = 0; i < size; i++) lines += data[i] == '\n';
  hg_daemon_config_t a, b;
  hg_dcfg_error_t err;
  hg_daemon_config_defaults(&a);
  memset(&err, 0, sizeof err);
  int rc = hg_daemon_config_parse(&a, text, size, &err);
  if (rc != 0) {
    check_error(rc, &err, lines);
    free(text);
    return 0;
  }
  hg_daemon_config_defaults(&b);
  if (hg_daemon_config_parse(&b, text, size, &err) != 0) abort();
  hg_daemon_config_diff(&a, &b, differs, NULL);
  if (hg_daemon_config_parse(&b, text, size, &err) != 0) abort();
  hg_daemon_config_diff(&a, &b, differs, NULL);
  memset(&err, 0, sizeof err);
  if (hg_daemon_config_check(&a, &err) != 0) {
    if (memchr(err.reason, '\0', sizeof err.reason) == NULL || err.reason[0] == '\0') abort();
  }
  hg_pipeline_config_t p;
  memset(&p, 0, sizeof p);
  hg_daemon_config_pipeline(&a, &p);
  if (p.data_dir != a.data_dir) abort();
  free(text);
  return 0;
}
