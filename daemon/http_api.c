/*
 * http_api.c - what hourglassd's HTTP port answers (daemon_http_handler):
 * /health, /metrics (Prometheus text), the public market data under
 * /api/v1/ (from the market view's published copy, mdview.h) and the
 * embedded web page. Runs on the HTTP thread; it reads the pipeline's
 * counters and the health atomics, never the engine's memory, and touches
 * the daemon's pointers only once d->published is set.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hourglass/civil.h"
#include "hourglass/error.h"
#include "hourglassd.h"
#include "web_assets.h"

static long query_u32(const char *query, const char *name) {
  size_t nl = strlen(name);
  for (const char *q = query; q && *q;) {
    if (strncmp(q, name, nl) == 0 && q[nl] == '=') {
      char *end;
      unsigned long v = strtoul(q + nl + 1, &end, 10);
      if (end == q + nl + 1 || (*end != '\0' && *end != '&') || v == 0 || v > UINT32_MAX)
        return -1;
      return (long)v;
    }
    q = strchr(q, '&');
    if (q) q++;
  }
  return -1;
}

static void health(daemon_t *d, hg_http_response_t *r) {
  hg_pipeline_stats_t st = {0};
  int ready = atomic_load(&d->ready);
  if (ready && atomic_load(&d->published)) hg_pipeline_stats(d->pipe, &st);
  r->content_type = "application/json";
  if (ready) {
    hg_sbuf_printf(&r->body,
                   "{\"status\":\"ready\",\"last_seq\":%" PRIu64 ",\"durable_seq\":%" PRIu64
                   ",\"version\":",
                   st.last_seq, st.durable_seq);
  } else {
    r->status = 503;
    hg_sbuf_puts(&r->body, "{\"status\":\"not ready\",\"reason\":");
    hg_sbuf_json_str(&r->body, atomic_load(&d->reason));
    hg_sbuf_puts(&r->body, ",\"version\":");
  }
  hg_sbuf_json_str(&r->body, HG_VERSION);
  hg_sbuf_puts(&r->body, "}\n");
}

static void metric(hg_sbuf_t *b, const char *name, const char *type, const char *help,
                   uint64_t v) {
  hg_sbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n%s %" PRIu64 "\n", name, help, name, type, name,
                 v);
}

static void metrics(daemon_t *d, hg_http_response_t *r) {
  hg_sbuf_t *b = &r->body;
  r->content_type = "text/plain; version=0.0.4; charset=utf-8";
  hg_pipeline_stats_t st = {0};
  int ready = atomic_load(&d->ready);
  int pub = atomic_load(&d->published);
  if (pub) hg_pipeline_stats(d->pipe, &st);
  hg_sbuf_printf(b, "# HELP hourglass_build_info Version of the running daemon.\n"
                    "# TYPE hourglass_build_info gauge\nhourglass_build_info{version=\"%s\"} 1\n",
                 HG_VERSION);
  metric(b, "hourglass_ready", "gauge", "1 when /health answers 200.", (uint64_t)ready);
  metric(b, "hourglass_uptime_seconds", "gauge", "Seconds since start.",
         (now_ns() - d->start_ns) / 1000000000u);
  metric(b, "hourglass_commands_total", "counter", "Commands sequenced since start.", st.commands);
  metric(b, "hourglass_last_seq", "gauge", "Seq of the last sequenced command.", st.last_seq);
  metric(b, "hourglass_durable_seq", "gauge", "Journal durable up to this seq.", st.durable_seq);
  metric(b, "hourglass_durable_lag", "gauge", "last_seq - durable_seq: commands awaiting fsync.",
         st.last_seq >= st.durable_seq ? st.last_seq - st.durable_seq : 0);
  metric(b, "hourglass_released_seq", "gauge", "Events released to consumers up to this seq.",
         st.released_seq);
  metric(b, "hourglass_snapshots_total", "counter", "Snapshots written since start.",
         st.snapshots);
  metric(b, "hourglass_replayed_commands", "gauge", "Commands replayed by the last recovery.",
         st.replayed);
  metric(b, "hourglass_busy_rejects_total", "counter",
         "Submits refused because the inbound ring was full.", st.busy_rejects);
  metric(b, "hourglass_journal_failed", "gauge", "1 once the journal failed (intake stopped).",
         pub ? (uint64_t)(hg_pipeline_failed(d->pipe) != 0) : 0);
  metric(b, "hourglass_config_reloads_total", "counter", "SIGHUP reloads applied.",
         atomic_load(&d->reloads));
  metric(b, "hourglass_config_reload_failures_total", "counter", "SIGHUP reloads refused.",
         atomic_load(&d->reload_failures));
  uint64_t sessions = 0;
  if (pub && d->gw != NULL) {
    hg_gateway_stats_t gs;
    hg_gateway_stats(d->gw, &gs);
    sessions = gs.sessions;
    metric(b, "hourglass_gateway_connections_total", "counter", "Connections accepted.",
           gs.connections);
    metric(b, "hourglass_gateway_logins_total", "counter", "Successful logins.", gs.logins);
    metric(b, "hourglass_gateway_login_rejects_total", "counter", "Refused logins.",
           gs.login_rejects);
    metric(b, "hourglass_gateway_frames_in_total", "counter", "Frames received.", gs.frames_in);
    metric(b, "hourglass_gateway_frames_out_total", "counter", "Frames sent.", gs.frames_out);
    metric(b, "hourglass_gateway_throttled_total", "counter", "Requests throttled.",
           gs.throttled);
    metric(b, "hourglass_gateway_busy_total", "counter", "Submits refused as busy.", gs.busy);
    metric(b, "hourglass_gateway_refused_total", "counter",
           "Connections refused at accept: too many awaiting login (per address or in all).",
           gs.refused);
    metric(b, "hourglass_gateway_outlog_write_errors_total", "counter",
           "Failed writes to the outbound journal (e.g. disk full).", gs.outlog_write_errors);
    metric(b, "hourglass_gateway_outlog_dropped_total", "counter",
           "Outbound journal records never written.", gs.outlog_dropped);
    metric(b, "hourglass_gateway_outlog_corrupt_total", "counter",
           "Bad outbound journal records met.", gs.outlog_corrupt);
    metric(b, "hourglass_gateway_outlog_segments", "gauge", "Outbound journal segments on disk.",
           gs.outlog_segments);
    metric(b, "hourglass_gateway_outlog_failing", "gauge",
           "1 while writes to the outbound journal fail.", (uint64_t)gs.outlog_failing);
  }
  metric(b, "hourglass_sessions", "gauge", "Logged-in client sessions.", sessions);
  if (pub) {
    metric(b, "hourglass_events_total", "counter", "Pipeline records consumed by the daemon.",
           hg_mdview_records(d->view));
    hg_md_latency_t lat;
    hg_mdview_latency(d->view, &lat);
    hg_sbuf_puts(b, "# HELP hourglass_release_latency_seconds Sequencer stamp to events "
                    "consumed (includes the journal fsync in durable mode).\n"
                    "# TYPE hourglass_release_latency_seconds histogram\n");
    for (size_t i = 0; i < HG_MD_LAT_BUCKETS; i++)
      hg_sbuf_printf(b, "hourglass_release_latency_seconds_bucket{le=\"%g\"} %" PRIu64 "\n",
                     (double)hg_md_lat_bounds_ns[i] / 1e9, lat.bucket[i]);
    hg_sbuf_printf(b,
                   "hourglass_release_latency_seconds_bucket{le=\"+Inf\"} %" PRIu64 "\n"
                   "hourglass_release_latency_seconds_sum %.9f\n"
                   "hourglass_release_latency_seconds_count %" PRIu64 "\n",
                   lat.bucket[HG_MD_LAT_BUCKETS], (double)lat.sum_ns / 1e9, lat.count);
    enum { MAXI = 1024 };
    hg_md_instrument_t *ins = malloc(MAXI * sizeof *ins);
    size_t n = ins ? hg_mdview_instruments(d->view, ins, MAXI) : 0;
    if (ins == NULL) b->oom = 1;
    if (n > MAXI) n = MAXI;
    static const struct {
      const char *name, *type, *help;
      size_t off;
    } per[] = {
        {"hourglass_instrument_trades_total", "counter", "Trades since start.",
         offsetof(hg_md_instrument_t, trades)},
        {"hourglass_instrument_volume_total", "counter", "Contracts traded since start.",
         offsetof(hg_md_instrument_t, volume)},
        {"hourglass_instrument_orders_total", "counter", "Orders accepted since start.",
         offsetof(hg_md_instrument_t, orders)},
        {"hourglass_instrument_cancels_total", "counter", "Orders cancelled since start.",
         offsetof(hg_md_instrument_t, cancels)},
    };
    for (size_t k = 0; k < sizeof per / sizeof per[0]; k++) {
      hg_sbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", per[k].name, per[k].help, per[k].name,
                     per[k].type);
      for (size_t i = 0; i < n; i++) {
        uint64_t v;
        memcpy(&v, (const char *)&ins[i] + per[k].off, sizeof v);
        hg_sbuf_printf(b, "%s{instrument=\"%s\",id=\"%u\"} %" PRIu64 "\n", per[k].name,
                       ins[i].symbol, ins[i].id, v);
      }
    }
    hg_sbuf_puts(b, "# HELP hourglass_instrument_halted 1 while halted.\n"
                    "# TYPE hourglass_instrument_halted gauge\n");
    for (size_t i = 0; i < n; i++)
      if (ins[i].listed)
        hg_sbuf_printf(b, "hourglass_instrument_halted{instrument=\"%s\",id=\"%u\"} %u\n",
                       ins[i].symbol, ins[i].id, ins[i].halted);
    free(ins);
  }
  if (pub) {
    hg_http_stats_t hs;
    hg_http_stats(d->http, &hs);
    metric(b, "hourglass_http_requests_total", "counter", "HTTP requests.", hs.requests);
    metric(b, "hourglass_http_bad_requests_total", "counter", "HTTP requests refused as bad.",
           hs.bad_requests);
    metric(b, "hourglass_http_connections", "gauge", "Open HTTP connections.", hs.open);
  }
  metric(b, "hourglass_synthetic_submitted_total", "counter", "Synthetic orders submitted.",
         atomic_load(&d->synth_submitted));
}

static void json_instrument(hg_sbuf_t *b, const hg_md_instrument_t *in, const hg_tob_t *t) {
  hg_sbuf_printf(b, "{\"id\":%u,\"symbol\":", in->id);
  hg_sbuf_json_str(b, in->symbol);
  hg_sbuf_printf(b,
                 ",\"listed\":%s,\"halted\":%s,\"tick_size\":%" PRId64 ",\"contract_unit\":%" PRId64
                 ",\"min_price\":%" PRId64 ",\"max_price\":%" PRId64 ",\"seq\":%" PRIu64
                 ",\"trades\":%" PRIu64 ",\"volume\":%" PRIu64 ",\"last_price\":%" PRId64
                 ",\"last_qty\":%" PRId64,
                 in->listed ? "true" : "false", in->halted ? "true" : "false", in->tick_size,
                 in->contract_unit, in->min_price, in->max_price, in->seq, in->trades, in->volume,
                 in->last_price, in->last_qty);
  if (in->dsp > 0) hg_sbuf_printf(b, ",\"dsp\":%" PRId64, in->dsp);
  if (t != NULL) {
    hg_sbuf_puts(b, ",\"bid\":");
    if (t->bid_qty > 0)
      hg_sbuf_printf(b, "{\"price\":%" PRId64 ",\"qty\":%" PRId64 "}", t->bid_px, t->bid_qty);
    else
      hg_sbuf_puts(b, "null");
    hg_sbuf_puts(b, ",\"ask\":");
    if (t->ask_qty > 0)
      hg_sbuf_printf(b, "{\"price\":%" PRId64 ",\"qty\":%" PRId64 "}", t->ask_px, t->ask_qty);
    else
      hg_sbuf_puts(b, "null");
  }
  hg_sbuf_puts(b, "}");
}

static void levels(hg_sbuf_t *b, const hg_md_level_t *l, size_t n) {
  hg_sbuf_puts(b, "[");
  for (size_t i = 0; i < n; i++)
    hg_sbuf_printf(b, "%s[%" PRId64 ",%" PRId64 "]", i ? "," : "", l[i].price, l[i].qty);
  hg_sbuf_puts(b, "]");
}

static void not_found(hg_http_response_t *r, const char *msg) {
  r->status = 404;
  r->content_type = "application/json";
  hg_sbuf_puts(&r->body, "{\"error\":");
  hg_sbuf_json_str(&r->body, msg);
  hg_sbuf_puts(&r->body, "}\n");
}

/* The value of query parameter `name` (up to '&'), copied into out[cap]; 0,
 * or -1 when absent, empty or too long. */
static int query_str(const char *query, const char *name, char *out, size_t cap) {
  size_t nl = strlen(name);
  for (const char *q = query; q && *q;) {
    if (strncmp(q, name, nl) == 0 && q[nl] == '=') {
      size_t len = strcspn(q + nl + 1, "&");
      if (len == 0 || len >= cap) return -1;
      memcpy(out, q + nl + 1, len);
      out[len] = '\0';
      return 0;
    }
    q = strchr(q, '&');
    if (q) q++;
  }
  return -1;
}

/* /api/v1/fixings: the kept fixings, oldest day first, each with the counts
 * of its receipt and, when the exchange keeps one (computed fixings), the
 * address of /api/v1/fixings/receipt?index=GPU.GRADE&day=YYYY-MM-DD, which
 * answers that one fixing with its receipt (404 when there is none). */
static void fixings(daemon_t *d, int receipt, const char *query, hg_http_response_t *r) {
  static _Thread_local hg_md_fixing_t fx[HG_MD_FIXINGS];
  static const char *const status[] = {"", "PROVISIONAL", "FINAL", "NO_FIX"};
  static const char *const kind[] = {"", "computed", "carried", "external"};
  hg_sbuf_t *b = &r->body;
  char want_index[2 * HG_INDEX_GPU_MAX + HG_INDEX_GRADE_MAX], want_day[16];
  if (receipt && (query_str(query, "index", want_index, sizeof want_index) != 0 ||
                  query_str(query, "day", want_day, sizeof want_day) != 0)) {
    r->status = 400;
    hg_sbuf_puts(b, "{\"error\":\"expected ?index=<GPU.GRADE>&day=<YYYY-MM-DD>\"}\n");
    return;
  }
  size_t n = hg_mdview_fixings(d->view, fx, HG_MD_FIXINGS), shown = 0;
  if (!receipt) hg_sbuf_printf(b, "{\"available\":%s,\"fixings\":[", n ? "true" : "false");
  for (size_t i = 0; i < n; i++) {
    char index[2 * HG_INDEX_GPU_MAX + HG_INDEX_GRADE_MAX], day[16];
    snprintf(index, sizeof index, "%s.%s", fx[i].gpu, fx[i].grade);
    hg_civil_format_date(fx[i].day, day);
    int has_receipt = fx[i].providers > 0;
    if (receipt && (strcmp(index, want_index) != 0 || strcmp(day, want_day) != 0 || !has_receipt))
      continue;
    hg_sbuf_printf(b,
                   "%s{\"index\":\"IGX %s\",\"day\":\"%s\",\"value_micro_usd\":%" PRId64
                   ",\"tier\":%u,\"status\":\"%s\",\"source\":\"%s\",\"inputs\":%" PRIu64,
                   shown++ ? "," : "", index, day, fx[i].value, fx[i].tier,
                   fx[i].status < 4 ? status[fx[i].status] : "",
                   fx[i].kind < 4 ? kind[fx[i].kind] : "", fx[i].inputs);
    if (has_receipt) {
      hg_sbuf_printf(b, ",\"providers\":%u,\"hours\":%u", fx[i].providers, fx[i].hours);
      if (receipt)
        hg_sbuf_printf(b, ",\"used\":%u,\"volume_gpu_hours\":%" PRId64, fx[i].used,
                       fx[i].volume);
      else
        hg_sbuf_printf(b, ",\"receipt\":\"/api/v1/fixings/receipt?index=%s&day=%s\"", index, day);
    }
    hg_sbuf_puts(b, "}");
    if (receipt) break;
  }
  if (!receipt) {
    hg_sbuf_puts(b, "]}\n");
  } else if (shown == 0) {
    not_found(r, "no receipt kept for that index and day");
  } else {
    hg_sbuf_puts(b, "\n");
  }
}

static void market(daemon_t *d, const char *path, const char *query, hg_http_response_t *r) {
  r->content_type = "application/json";
  hg_sbuf_t *b = &r->body;
  if (strcmp(path, "/api/v1/instruments") == 0) {
    enum { MAXI = 1024 };
    hg_md_instrument_t *ins = malloc(MAXI * sizeof *ins);
    if (ins == NULL) {
      b->oom = 1;
      return;
    }
    size_t n = hg_mdview_instruments(d->view, ins, MAXI);
    if (n > MAXI) n = MAXI;
    hg_sbuf_puts(b, "{\"instruments\":[");
    for (size_t i = 0; i < n; i++) {
      hg_tob_t t;
      if (i) hg_sbuf_puts(b, ",");
      json_instrument(b, &ins[i], hg_mdview_tob(d->view, ins[i].id, &t) == 0 ? &t : NULL);
    }
    hg_sbuf_puts(b, "]}\n");
    free(ins);
    return;
  }
  if (strcmp(path, "/api/v1/fixings") == 0 || strcmp(path, "/api/v1/fixings/receipt") == 0) {
    fixings(d, strcmp(path, "/api/v1/fixings") != 0, query, r);
    return;
  }
  long id = query_u32(query, "instrument");
  if (id < 0) {
    r->status = 400;
    hg_sbuf_puts(b, "{\"error\":\"expected ?instrument=<id>\"}\n");
    return;
  }
  if (strcmp(path, "/api/v1/tob") == 0) {
    hg_tob_t t;
    if (hg_mdview_tob(d->view, (uint32_t)id, &t) != 0) {
      not_found(r, "unknown instrument");
      return;
    }
    hg_sbuf_printf(b,
                   "{\"instrument\":%ld,\"seq\":%" PRIu64 ",\"bid\":[%" PRId64 ",%" PRId64
                   "],\"ask\":[%" PRId64 ",%" PRId64 "],\"last\":[%" PRId64 ",%" PRId64 "]}\n",
                   id, t.version, t.bid_px, t.bid_qty, t.ask_px, t.ask_qty, t.last_px,
                   t.last_qty);
    return;
  }
  uint32_t depth = hg_mdview_depth(d->view), tcap = hg_mdview_trade_cap(d->view);
  hg_md_level_t *bids = malloc(depth * sizeof *bids), *asks = malloc(depth * sizeof *asks);
  hg_md_trade_t *trades = malloc(tcap * sizeof *trades);
  size_t nb = 0, na = 0, nt = 0;
  hg_md_instrument_t in;
  if (bids == NULL || asks == NULL || trades == NULL) {
    b->oom = 1;
  } else if (hg_mdview_book(d->view, (uint32_t)id, &in, bids, &nb, asks, &na, trades, &nt) != 0) {
    not_found(r, "unknown instrument");
  } else if (strcmp(path, "/api/v1/book") == 0) {
    hg_sbuf_printf(b, "{\"instrument\":%u,\"symbol\":", in.id);
    hg_sbuf_json_str(b, in.symbol);
    hg_sbuf_printf(b, ",\"seq\":%" PRIu64 ",\"truncated\":%s,\"bids\":", in.seq,
                   in.depth_truncated ? "true" : "false");
    levels(b, bids, nb);
    hg_sbuf_puts(b, ",\"asks\":");
    levels(b, asks, na);
    hg_sbuf_puts(b, "}\n");
  } else if (strcmp(path, "/api/v1/trades") == 0) {
    hg_sbuf_printf(b, "{\"instrument\":%u,\"trades\":[", in.id);
    for (size_t i = 0; i < nt; i++)
      hg_sbuf_printf(b,
                     "%s{\"seq\":%" PRIu64 ",\"ts\":%" PRIu64 ",\"price\":%" PRId64
                     ",\"qty\":%" PRId64 ",\"aggressor\":\"%s\"}",
                     i ? "," : "", trades[i].seq, trades[i].ts, trades[i].price, trades[i].qty,
                     trades[i].aggressor == HG_SIDE_BUY ? "buy" : "sell");
    hg_sbuf_puts(b, "]}\n");
  } else {
    not_found(r, "no such endpoint");
  }
  free(bids);
  free(asks);
  free(trades);
}

void daemon_http_handler(void *ctx, const char *path, const char *query, hg_http_response_t *r) {
  daemon_t *d = ctx;
  if (strcmp(path, "/health") == 0) {
      health(d, r);
      return;
    }
  if (strcmp(path, "/metrics") == 0) {
      metrics(d, r);
      return;
    }
  if (strncmp(path, "/api/v1/", 8) == 0) {
    if (!atomic_load(&d->published)) {
      r->status = 503;
      r->content_type = "application/json";
      hg_sbuf_puts(&r->body, "{\"error\":\"starting\"}\n");
      return;
    }
    {
      market(d, path, query, r);
      return;
    }
  }
  /* The market web page (daemon/web, compiled in): public data only. */
  const hg_web_asset_t *asset = hg_web_asset_find(path);
  if (asset != NULL) {
    r->content_type = asset->content_type;
    hg_sbuf_put(&r->body, asset->data, asset->len);
    return;
  }
  r->status = 404;
  hg_sbuf_puts(&r->body, "not found\n");
}

