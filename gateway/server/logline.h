/*
 * logline.h (internal) - one formatted log line for a log callback, shared by
 * the gateway and its outbound journal: formatted into a bounded buffer
 * (longer messages are cut) and given to the callback, or without one
 * written to stderr as "<who>: <message>". Levels are the caller's
 * (HG_LOG_*, hourglass/log.h). Any thread; the callback must be safe on
 * the caller's.
 */
#ifndef HG_GATEWAY_LOGLINE_H
#define HG_GATEWAY_LOGLINE_H

#include <stdarg.h>
#include <stdio.h>

/* Bytes of a formatted message, NUL included: the longest fixed text is
 * under 200 bytes; the rest is room for numbers and the journal's file
 * paths (which may be cut). */
#define HG_LOGLINE_MAX 512

__attribute__((format(printf, 5, 0))) static inline void
hg_logline_v(void (*fn)(void *ctx, int level, const char *msg), void *ctx, const char *who,
             int level, const char *fmt, va_list ap) {
  char buf[HG_LOGLINE_MAX];
  vsnprintf(buf, sizeof buf, fmt, ap);
  if (fn != NULL) {
    fn(ctx, level, buf);
  } else {
    fprintf(stderr, "%s: %s\n", who, buf);
  }
}

#endif /* HG_GATEWAY_LOGLINE_H */
