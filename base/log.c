/* log.c - level names (hourglass/log.h). */
#include "hourglass/log.h"

const char *hg_log_level_name(int level) {
  switch (level) {
  case HG_LOG_DEBUG: return "debug";
  case HG_LOG_INFO: return "info";
  case HG_LOG_WARN: return "warn";
  case HG_LOG_ERROR: return "error";
  default: return "?";
  }
}
