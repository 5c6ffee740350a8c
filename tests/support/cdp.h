/*
 * cdp.h - headless Chromium driven through the DevTools protocol (a
 * WebSocket to one page target): navigate, evaluate JavaScript, take a
 * screenshot. For pages that never finish loading (a Server-Sent Events
 * stream keeps a request open), where --dump-dom and --screenshot would
 * wait for ever. Tests only; one thread per du_cdp_t.
 */
#ifndef HOURGLASS_TESTS_CDP_H
#define HOURGLASS_TESTS_CDP_H

#include <sys/types.h>

typedef struct du_cdp {
  pid_t pid; /* the browser */
  int fd;    /* the page's WebSocket */
  int next_id;
} du_cdp_t;

/* Starts chromium (headless, profile in user_dir, extra flag appended, NULL
 * for none), connects to its first page and sets that page's viewport to
 * width x height CSS pixels at scale 1 (kept across navigations). 0 or -1. */
int du_cdp_open(du_cdp_t *c, const char *chromium, const char *user_dir, int width, int height,
                const char *extra_flag);

/* Sends method with params (a JSON object text, NULL for none) and waits
 * up to 30 s for its answer: the answer's text, malloc'd, or NULL. */
char *du_cdp_call(du_cdp_t *c, const char *method, const char *params);

/* Evaluates expr (awaiting a promise) in the page; its value, which must
 * be a string, decoded and malloc'd; NULL on failure or another type. */
char *du_cdp_eval(du_cdp_t *c, const char *expr);

/* Navigates to url and waits (up to timeout_s) until expr, evaluated every
 * 50 ms, returns "1". 0 or -1. */
int du_cdp_goto(du_cdp_t *c, const char *url, const char *expr, int timeout_s);

/* Saves a PNG screenshot of the viewport at path. 0 or -1. */
int du_cdp_screenshot(du_cdp_t *c, const char *path);

/* Saves a PNG screenshot of the whole page (its scroll size) at path. 0 or -1. */
int du_cdp_screenshot_full(du_cdp_t *c, const char *path);

/* Closes the connection, stops and reaps the browser. */
void du_cdp_close(du_cdp_t *c);

#endif /* HOURGLASS_TESTS_CDP_H */
