/*
 * Error strings. Hourglass codes come from the HG_ERRNO_MAP table in
 * error.h; negative errno values are described with strerrordesc_np(),
 * which, unlike strerror(), is thread-safe and never allocates.
 */
#include "hourglass/error.h"

#include <errno.h>
#include <string.h>

const char *hg_strerror(int err) {
  switch (err) {
  case 0:
    return "ok";
#define HG_ERRNO_STR(name, off, msg) \
  case HG_E##name:                   \
    return msg;
    HG_ERRNO_MAP(HG_ERRNO_STR)
#undef HG_ERRNO_STR
  default:
    break;
  }
  if (err < 0 && err > HG_ERRNO_BASE) {
    const char *s = strerrordesc_np(-err);
    if (s != NULL) return s;
  }
  return "unknown error";
}

const char *hg_err_name(int err) {
  switch (err) {
  case 0:
    return "OK";
#define HG_ERRNO_NAME(name, off, msg) \
  case HG_E##name:                    \
    return "HG_E" #name;
    HG_ERRNO_MAP(HG_ERRNO_NAME)
#undef HG_ERRNO_NAME
  default:
    break;
  }
  if (err < 0 && err > HG_ERRNO_BASE) {
    const char *s = strerrorname_np(-err);
    if (s != NULL) return s;
  }
  return "UNKNOWN";
}
