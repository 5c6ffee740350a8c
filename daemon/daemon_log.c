/*
 * daemon_log.c - the structured log (see daemon_log.h). A record is built in
 * a stack buffer and written with one write(2); the level is an atomic so a
 * reload can change it while other threads log.
 */
#include "daemon_log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static _Atomic int log_fd = 2;
static _Atomic int log_level = HG_LOG_INFO;

void hg_dlog_init(int fd, int level) {
  atomic_store(&log_fd, fd);
  atomic_store(&log_level, level);
}

void hg_dlog_set_level(int level) { atomic_store(&log_level, level); }

void hg_dlog(int level, const char *component, const char *msg, const char *kvfmt, ...) {
  /* relaxed: a record racing a level change may go either way. */
  if (level < atomic_load_explicit(&log_level, memory_order_relaxed)) return;
  char line[HG_LOG_LINE_MAX];
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ %s %s msg=\"",
                   tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                   ts.tv_nsec / 1000, hg_log_level_name(level), component);
  size_t pos = n > 0 ? (size_t)n : 0;
  const size_t stop = sizeof line - 8; /* room for `"`, escapes and '\n' */
  for (const unsigned char *m = (const unsigned char *)msg; *m && pos < stop; m++) {
    if (*m == '"' || *m == '\\') {
      line[pos++] = '\\';
      line[pos++] = (char)*m;
    } else if (*m < 0x20 || *m == 0x7f) {
      line[pos++] = ' ';
    } else {
      line[pos++] = (char)*m;
    }
  }
  line[pos++] = '"';
  if (kvfmt != NULL && kvfmt[0] != '\0' && pos < sizeof line - 2) {
    line[pos++] = ' ';
    va_list ap;
    va_start(ap, kvfmt);
    int k = vsnprintf(line + pos, sizeof line - 1 - pos, kvfmt, ap);
    va_end(ap);
    if (k > 0) pos += (size_t)k < sizeof line - 1 - pos ? (size_t)k : sizeof line - 2 - pos;
  }
  for (size_t i = 0; i < pos; i++)
    if (line[i] == '\n') line[i] = ' ';
  line[pos++] = '\n';
  /* relaxed: the fd is set once at start-up, before other threads exist. */
  ssize_t w = write(atomic_load_explicit(&log_fd, memory_order_relaxed), line, pos);
  (void)w; /* nowhere to report a failed log write */
}

void hg_dlog_pipe_cb(void *ctx, int level, const char *msg) {
  hg_dlog(level, ctx != NULL ? (const char *)ctx : "engine", msg, NULL);
}
