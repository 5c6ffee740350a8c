/*
 * cdp.c - the DevTools protocol client of cdp.h. The browser writes the
 * port it listens on into <user_dir>/DevToolsActivePort; /json/list names
 * the page's WebSocket. Frames are sent masked (with a zero key, which the
 * protocol allows) and read unmasked; replies are matched by "id".
 */
#include "cdp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon_util.h"

static int send_all(int fd, const void *p, size_t n) {
  const char *b = p;
  while (n > 0) {
    ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
    if (w <= 0) return -1;
    b += w;
    n -= (size_t)w;
  }
  return 0;
}

static int recv_all(int fd, void *p, size_t n, double deadline) {
  char *b = p;
  while (n > 0) {
    ssize_t r = recv(fd, b, n, 0);
    if (r == 0) return -1;
    if (r < 0) {
      if ((errno == EAGAIN || errno == EINTR) && du_now() < deadline) continue;
      return -1;
    }
    b += r;
    n -= (size_t)r;
  }
  return 0;
}

static int ws_send(int fd, const char *text) {
  size_t n = strlen(text);
  unsigned char h[14];
  size_t hl = 0;
  h[hl++] = 0x81; /* FIN, text */
  if (n < 126) {
    h[hl++] = (unsigned char)(0x80 | n);
  } else if (n < 65536) {
    h[hl++] = 0x80 | 126;
    h[hl++] = (unsigned char)(n >> 8);
    h[hl++] = (unsigned char)n;
  } else {
    h[hl++] = 0x80 | 127;
    for (int i = 7; i >= 0; i--) h[hl++] = (unsigned char)((uint64_t)n >> (8 * i));
  }
  memset(h + hl, 0, 4); /* masking key 0: the payload goes as is */
  hl += 4;
  return send_all(fd, h, hl) == 0 && send_all(fd, text, n) == 0 ? 0 : -1;
}

/* One whole message (continuations joined), malloc'd; NULL on failure. */
static char *ws_recv(int fd, double deadline) {
  char *msg = NULL;
  size_t len = 0;
  for (;;) {
    unsigned char h[2];
    if (recv_all(fd, h, 2, deadline) != 0) break;
    uint64_t n = h[1] & 0x7f;
    if (n == 126 || n == 127) {
      unsigned char e[8];
      size_t el = n == 126 ? 2 : 8;
      if (recv_all(fd, e, el, deadline) != 0) break;
      n = 0;
      for (size_t i = 0; i < el; i++) n = n << 8 | e[i];
    }
    unsigned char mask[4] = {0};
    if ((h[1] & 0x80) && recv_all(fd, mask, 4, deadline) != 0) break;
    char *m = realloc(msg, len + n + 1);
    if (m == NULL) break;
    msg = m;
    if (recv_all(fd, msg + len, n, deadline) != 0) break;
    for (uint64_t i = 0; i < n; i++) msg[len + i] ^= (char)mask[i % 4];
    int op = h[0] & 0x0f;
    if (op == 0x8) break; /* close */
    if (op == 0x9 || op == 0xA) continue; /* ping/pong: not part of a message */
    len += n;
    msg[len] = '\0';
    if (h[0] & 0x80) return msg;
  }
  free(msg);
  return NULL;
}

int du_cdp_open(du_cdp_t *c, const char *chromium, const char *user_dir, int width, int height,
                const char *extra_flag) {
  memset(c, 0, sizeof *c);
  c->fd = -1;
  char port_file[600], size[64], profile[600];
  snprintf(port_file, sizeof port_file, "%s/DevToolsActivePort", user_dir);
  snprintf(size, sizeof size, "--window-size=%d,%d", width, height);
  snprintf(profile, sizeof profile, "--user-data-dir=%s", user_dir);
  remove(port_file);
  c->pid = fork();
  if (c->pid < 0) return -1;
  if (c->pid == 0) {
    int null = open("/dev/null", O_RDWR);
    dup2(null, 1);
    dup2(null, 2);
    char *argv[] = {(char *)chromium, "--headless", "--no-sandbox", "--disable-gpu",
                    "--disable-quic", "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--hide-scrollbars", size,
                    profile, "--remote-debugging-port=0", "about:blank", NULL, NULL};
    if (extra_flag != NULL) argv[13] = (char *)extra_flag, argv[14] = "about:blank";
    execv(chromium, argv);
    _exit(127);
  }
  int port = 0;
  for (double end = du_now() + 30; port <= 0 && du_now() < end; du_sleep_ms(50)) {
    FILE *f = fopen(port_file, "r");
    if (f == NULL) continue;
    if (fscanf(f, "%d", &port) != 1) port = 0;
    fclose(f);
  }
  if (port <= 0) return -1;
  char *list = NULL, *ws = NULL;
  for (double end = du_now() + 10; du_now() < end; du_sleep_ms(50)) {
    free(list);
    char rq[128]; /* the browser answers only a Host that is an address */
    int rn = snprintf(rq, sizeof rq,
                      "GET /json/list HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n",
                      port);
    list = du_http_raw(port, rq, (size_t)rn, 0);
    const char *t = strstr(list, "\"type\": \"page\"");
    if (t == NULL) continue;
    /* the page's entry: search around it for its WebSocket address */
    const char *start = list;
    for (const char *p = t; p > list; p--)
      if (*p == '{') {
        start = p;
        break;
      }
    ws = strstr(start, "ws://127.0.0.1:");
    if (ws != NULL) break;
  }
  if (ws == NULL) {
    free(list);
    return -1;
  }
  const char *path = strchr(ws + 5, '/');
  size_t pl = strcspn(path, "\"");
  char req[1024];
  snprintf(req, sizeof req,
           "GET %.*s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\n"
           "Connection: Upgrade\r\nSec-WebSocket-Key: aG91cmdsYXNzdGVzdGtleQ==\r\n"
           "Sec-WebSocket-Version: 13\r\n\r\n",
           (int)pl, path, port);
  free(list);
  c->fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  struct timeval tv = {1, 0};
  setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (connect(c->fd, (struct sockaddr *)&a, sizeof a) != 0 || send_all(c->fd, req, strlen(req)))
    return -1;
  char head[2048];
  size_t n = 0;
  double end = du_now() + 10;
  while (n + 1 < sizeof head && (n < 4 || memcmp(head + n - 4, "\r\n\r\n", 4) != 0)) {
    if (recv_all(c->fd, head + n, 1, end) != 0) return -1;
    n++;
  }
  head[n] = '\0';
  if (strncmp(head, "HTTP/1.1 101", 12) != 0) return -1;
  /* --window-size counts the browser's own frame, so headless Chromium's
   * viewport is shorter than the window: the page's is set exactly. */
  char metrics[128];
  snprintf(metrics, sizeof metrics,
           "{\"width\":%d,\"height\":%d,\"deviceScaleFactor\":1,\"mobile\":false}", width,
           height);
  char *r = du_cdp_call(c, "Emulation.setDeviceMetricsOverride", metrics);
  int ok = r != NULL && strstr(r, "\"error\"") == NULL;
  free(r);
  return ok ? 0 : -1;
}

char *du_cdp_call(du_cdp_t *c, const char *method, const char *params) {
  int id = ++c->next_id;
  size_t cap = strlen(method) + (params ? strlen(params) : 2) + 64;
  char *req = malloc(cap);
  snprintf(req, cap, "{\"id\":%d,\"method\":\"%s\",\"params\":%s}", id, method,
           params ? params : "{}");
  int rc = ws_send(c->fd, req);
  free(req);
  if (rc != 0) return NULL;
  char want[32];
  snprintf(want, sizeof want, "{\"id\":%d,", id);
  double end = du_now() + 30;
  while (du_now() < end) {
    char *m = ws_recv(c->fd, end);
    if (m == NULL) return NULL;
    if (strncmp(m, want, strlen(want)) == 0) return m;
    free(m); /* an event */
  }
  return NULL;
}

/* Appends s as a JSON string literal to out (cap bytes); the length, or
 * -1 when it does not fit. */
static long json_quote(const char *s, char *out, size_t cap) {
  size_t n = 0;
  out[n++] = '"';
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (n + 8 >= cap) return -1;
    if (*p == '"' || *p == '\\') {
      out[n++] = '\\';
      out[n++] = (char)*p;
    } else if (*p < 0x20) {
      n += (size_t)snprintf(out + n, cap - n, "\\u%04x", *p);
    } else {
      out[n++] = (char)*p;
    }
  }
  out[n++] = '"';
  out[n] = '\0';
  return (long)n;
}

/* Decodes the JSON string literal at s (just past its opening quote) into
 * a new allocation. */
static char *json_unquote(const char *s) {
  char *out = malloc(strlen(s) + 1), *o = out;
  for (; *s && *s != '"'; s++) {
    if (*s != '\\') {
      *o++ = *s;
      continue;
    }
    s++;
    switch (*s) {
      case 'n': *o++ = '\n'; break;
      case 't': *o++ = '\t'; break;
      case 'r': *o++ = '\r'; break;
      case 'b': *o++ = '\b'; break;
      case 'f': *o++ = '\f'; break;
      case 'u': {
        unsigned v = 0;
        if (sscanf(s + 1, "%4x", &v) != 1) break;
        s += 4;
        if (v < 0x80) {
          *o++ = (char)v;
        } else if (v < 0x800) {
          *o++ = (char)(0xc0 | v >> 6);
          *o++ = (char)(0x80 | (v & 0x3f));
        } else {
          *o++ = (char)(0xe0 | v >> 12);
          *o++ = (char)(0x80 | ((v >> 6) & 0x3f));
          *o++ = (char)(0x80 | (v & 0x3f));
        }
        break;
      }
      default: *o++ = *s; break; /* \" \\ \/ */
    }
    if (*s == '\0') break;
  }
  *o = '\0';
  return out;
}

char *du_cdp_eval(du_cdp_t *c, const char *expr) {
  size_t cap = strlen(expr) * 6 + 128;
  char *q = malloc(cap), *params = malloc(cap + 128);
  char *r = NULL;
  if (json_quote(expr, q, cap) >= 0) {
    snprintf(params, cap + 128, "{\"expression\":%s,\"returnByValue\":true,\"awaitPromise\":true}",
             q);
    r = du_cdp_call(c, "Runtime.evaluate", params);
  }
  free(q);
  free(params);
  if (r == NULL) return NULL;
  const char *v = strstr(r, "\"result\":{\"type\":\"string\",\"value\":\"");
  char *s = v ? json_unquote(v + strlen("\"result\":{\"type\":\"string\",\"value\":\"")) : NULL;
  free(r);
  return s;
}

int du_cdp_goto(du_cdp_t *c, const char *url, const char *expr, int timeout_s) {
  char params[1200], q[1100];
  if (json_quote(url, q, sizeof q) < 0) return -1;
  snprintf(params, sizeof params, "{\"url\":%s}", q);
  free(du_cdp_call(c, "Page.navigate", params));
  for (double end = du_now() + timeout_s; du_now() < end; du_sleep_ms(50)) {
    char *v = du_cdp_eval(c, expr);
    int ok = v != NULL && strcmp(v, "1") == 0;
    free(v);
    if (ok) return 0;
  }
  return -1;
}

static int b64(int ch) {
  if (ch >= 'A' && ch <= 'Z') return ch - 'A';
  if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
  if (ch >= '0' && ch <= '9') return ch - '0' + 52;
  if (ch == '+') return 62;
  if (ch == '/') return 63;
  return -1;
}

/* Page.captureScreenshot with params, its PNG written to path. */
static int capture(du_cdp_t *c, const char *params, const char *path) {
  char *r = du_cdp_call(c, "Page.captureScreenshot", params);
  const char *d = r ? strstr(r, "\"data\":\"") : NULL;
  if (d == NULL) {
    free(r);
    return -1;
  }
  d += 8;
  FILE *f = fopen(path, "wb");
  unsigned acc = 0;
  int bits = 0;
  for (; f != NULL && *d && *d != '"'; d++) {
    int v = b64((unsigned char)*d);
    if (v < 0) continue; /* padding */
    acc = acc << 6 | (unsigned)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      fputc((int)((acc >> bits) & 0xff), f);
    }
  }
  free(r);
  return f != NULL && fclose(f) == 0 ? 0 : -1;
}

int du_cdp_screenshot(du_cdp_t *c, const char *path) {
  return capture(c, "{\"format\":\"png\"}", path);
}

int du_cdp_screenshot_full(du_cdp_t *c, const char *path) {
  char *wh = du_cdp_eval(c, "document.documentElement.scrollWidth + ' ' + "
                            "document.documentElement.scrollHeight");
  int w = 0, h = 0;
  if (wh == NULL || sscanf(wh, "%d %d", &w, &h) != 2 || w <= 0 || h <= 0) {
    free(wh);
    return -1;
  }
  free(wh);
  char params[256];
  snprintf(params, sizeof params,
           "{\"format\":\"png\",\"captureBeyondViewport\":true,\"clip\":{\"x\":0,\"y\":0,"
           "\"width\":%d,\"height\":%d,\"scale\":1}}",
           w, h);
  return capture(c, params, path);
}

void du_cdp_close(du_cdp_t *c) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  if (c->pid > 0) {
    kill(c->pid, SIGTERM);
    int st;
    for (int i = 0; i < 100 && waitpid(c->pid, &st, WNOHANG) == 0; i++) du_sleep_ms(50);
    if (waitpid(c->pid, &st, WNOHANG) == 0) {
      kill(c->pid, SIGKILL);
      waitpid(c->pid, &st, 0);
    }
  }
  c->pid = 0;
}
