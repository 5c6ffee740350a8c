/*
 * web_assets.h - the market web page (daemon/web/), compiled into the
 * daemon by daemon/web/embed.cmake. Internal to the daemon.
 */
#ifndef HOURGLASS_WEB_ASSETS_H
#define HOURGLASS_WEB_ASSETS_H

#include <stddef.h>

typedef struct hg_web_asset {
  const char *path;         /* "/index.html", "/app.js", "/style.css", "/openapi.json" */
  const char *content_type;
  const unsigned char *data;
  size_t len;
} hg_web_asset_t;

/* The asset served at path ("/" is "/index.html"), or NULL. Static data;
 * any thread. */
const hg_web_asset_t *hg_web_asset_find(const char *path);

#endif /* HOURGLASS_WEB_ASSETS_H */
