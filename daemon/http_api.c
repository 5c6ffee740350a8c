/*
 * http_api.c - what hourglassd's HTTP port answers (daemon_http_handler):
 * /health, /metrics (Prometheus text), the public market data under
 * /api/v1/ (market_api.h, from the market view's published copy) and the
 * embedded web page; and the market event stream (daemon_http_stream).
 * Runs on the HTTP thread; it reads the pipeline's counters and the health
 * atomics, never the engine's memory, and touches the daemon's pointers
 * only once d->published is set.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "hourglass/error.h"
#include "hourglassd.h"
#include "market_api.h"
#include "web_assets.h"

static void metric(hg_sbuf_t *b, const char *name, const char *type, const char *help,
                   uint64_t v);

/* A member's lag on the leader: entries it lacks of the leader's log. */
static uint64_t member_lag(const daemon_cluster_status_t *cs, size_t i) {
  uint64_t m = cs->members[i].match_index;
  return cs->last_index > m ? cs->last_index - m : 0;
}

/* ,"cluster":{...} for /health. */
static void health_cluster(daemon_t *d, hg_sbuf_t *b) {
  daemon_cluster_status_t cs;
  daemon_cluster_status(d->cluster, &cs);
  hg_sbuf_printf(b,
                 ",\"cluster\":{\"id\":%u,\"role\":\"%s\",\"taking_orders\":%s,\"term\":%" PRIu64
                 ",\"leader\":%" PRIu64 ",\"commit_index\":%" PRIu64
                 ",\"applied_index\":%" PRIu64 ",\"last_index\":%" PRIu64
                 ",\"apply_queued\":%" PRIu64 ",\"leader_commit\":%" PRIu64
                 ",\"caught_up\":%s",
                 cs.id, daemon_cluster_role_name(cs.role),
                 daemon_cluster_writable(d->cluster) ? "true" : "false", cs.term, cs.leader,
                 cs.commit_index, cs.applied_index, cs.last_index, cs.apply_queued,
                 cs.leader_commit, cs.caught_up ? "true" : "false");
  if (cs.log_error != 0) {
    hg_sbuf_puts(b, ",\"log_error\":");
    hg_sbuf_json_str(b, cs.log_errmsg);
  }
  if (cs.role == HG_REPLICA_LEADER) {
    hg_sbuf_puts(b, ",\"followers\":[");
    int first = 1;
    for (size_t i = 0; i < cs.n_members; i++) {
      if (cs.members[i].id == cs.id) continue;
      hg_sbuf_printf(b, "%s{\"id\":%" PRIu64 ",\"match_index\":%" PRIu64 ",\"lag\":%" PRIu64 "}",
                     first ? "" : ",", cs.members[i].id, cs.members[i].match_index,
                     member_lag(&cs, i));
      first = 0;
    }
    hg_sbuf_puts(b, "]");
  }
  hg_sbuf_puts(b, "}");
}

static void metrics_cluster(daemon_t *d, hg_sbuf_t *b) {
  daemon_cluster_status_t cs;
  daemon_cluster_status(d->cluster, &cs);
  hg_sbuf_puts(b, "# HELP hourglass_cluster_role This node's Raft role (1 for the current one).\n"
                  "# TYPE hourglass_cluster_role gauge\n");
  static const int roles[] = {HG_REPLICA_FOLLOWER, HG_REPLICA_CANDIDATE, HG_REPLICA_LEADER,
                              HG_REPLICA_UNAVAILABLE};
  for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++)
    hg_sbuf_printf(b, "hourglass_cluster_role{role=\"%s\"} %d\n",
                   daemon_cluster_role_name(roles[i]), cs.role == roles[i]);
  metric(b, "hourglass_cluster_taking_orders", "gauge",
         "1 while this node is the leader and takes orders.",
         (uint64_t)daemon_cluster_writable(d->cluster));
  metric(b, "hourglass_cluster_term", "gauge", "Raft term.", cs.term);
  metric(b, "hourglass_cluster_leader", "gauge", "Id of the leader this node knows (0: none).",
         cs.leader);
  metric(b, "hourglass_cluster_commit_index", "gauge", "Raft log index known committed.",
         cs.commit_index);
  metric(b, "hourglass_cluster_applied_index", "gauge", "Raft log index applied here.",
         cs.applied_index);
  metric(b, "hourglass_cluster_last_index", "gauge", "Last index in this node's Raft log.",
         cs.last_index);
  metric(b, "hourglass_cluster_tls_failures_total", "counter",
         "Raft connections refused or broken by TLS (certificate, name, garbage, timeout).",
         cs.tls_failures);
  metric(b, "hourglass_cluster_log_write_failing", "gauge",
         "1 while writes to this node's Raft log (cluster.dir) fail, e.g. on a full disk.",
         (uint64_t)(cs.log_error != 0));
  metric(b, "hourglass_cluster_apply_queued_entries", "gauge",
         "Committed entries waiting to be applied here (the pipeline had no room for them).",
         cs.apply_queued);
  metric(b, "hourglass_cluster_apply_queued_bytes", "gauge",
         "Bytes of the committed entries waiting to be applied here.", cs.apply_queued_bytes);
  metric(b, "hourglass_cluster_apply_queued_entries_total", "counter",
         "Committed entries that waited to be applied here.", cs.apply_queued_total);
  metric(b, "hourglass_cluster_rebuilds_total", "counter",
         "Times this process rebuilt the node from the group in place (a snapshot installed "
         "by the leader, a lost proposal, an apply queue overflow).",
         atomic_load(&d->rebuilds));
  if (cs.role != HG_REPLICA_LEADER) return;
  hg_sbuf_puts(b, "# HELP hourglass_cluster_follower_lag Entries of the leader's log a "
                  "follower does not hold yet (leader only).\n"
                  "# TYPE hourglass_cluster_follower_lag gauge\n");
  for (size_t i = 0; i < cs.n_members; i++)
    if (cs.members[i].id != cs.id)
      hg_sbuf_printf(b, "hourglass_cluster_follower_lag{member=\"%" PRIu64 "\"} %" PRIu64 "\n",
                     cs.members[i].id, member_lag(&cs, i));
}

/* A cluster node that cannot write its Raft log (cluster.dir full or
 * failing) stores nothing the group sends: not healthy, though it runs.
 * 1 with the reason in why[cap] (why may be NULL with cap 0), or 0. */
static int cluster_log_failing(daemon_t *d, char *why, size_t cap) {
  if (d->cluster == NULL || !atomic_load(&d->published)) return 0;
  daemon_cluster_status_t cs;
  daemon_cluster_status(d->cluster, &cs);
  if (cs.log_error == 0) return 0;
  snprintf(why, cap, "the Raft log (cluster.dir) cannot be written: %s", cs.log_errmsg);
  return 1;
}

/* A cluster node that has not yet applied what the group committed when
 * it last heard from a leader (one that was rebuilt from the group is
 * catching up until it has heard from one): not ready for traffic or the
 * next step of a rolling restart. 1 with the reason in why[cap], or 0. */
static int cluster_catching_up(daemon_t *d, char *why, size_t cap) {
  if (d->cluster == NULL || !atomic_load(&d->published)) return 0;
  daemon_cluster_status_t cs;
  daemon_cluster_status(d->cluster, &cs);
  if (cs.caught_up || (cs.leader_commit == 0 && atomic_load(&d->rebuilds) == 0)) return 0;
  snprintf(why, cap, "catching up with the group: applied index %" PRIu64 " of %" PRIu64,
           cs.applied_index, cs.leader_commit);
  return 1;
}

static void health(daemon_t *d, hg_http_response_t *r) {
  hg_pipeline_stats_t st = {0};
  int ready = atomic_load(&d->ready);
  if (ready && atomic_load(&d->published)) hg_pipeline_stats(d->pipe, &st);
  r->content_type = "application/json";
  char why[400];
  if (ready && cluster_log_failing(d, why, sizeof why)) {
    r->status = 503;
    hg_sbuf_puts(&r->body, "{\"status\":\"not ready\",\"reason\":");
    hg_sbuf_json_str(&r->body, why);
  } else if (ready && cluster_catching_up(d, why, sizeof why)) {
    r->status = 503;
    hg_sbuf_puts(&r->body, "{\"status\":\"catching up\",\"reason\":");
    hg_sbuf_json_str(&r->body, why);
  } else if (ready) {
    hg_sbuf_puts(&r->body, "{\"status\":\"ready\"");
  }
  if (ready) {
    hg_sbuf_printf(&r->body, ",\"last_seq\":%" PRIu64 ",\"durable_seq\":%" PRIu64, st.last_seq,
                   st.durable_seq);
    if (d->cluster != NULL && atomic_load(&d->published)) {
      hg_sbuf_printf(&r->body, ",\"committed_seq\":%" PRIu64, st.committed_seq);
      health_cluster(d, &r->body);
    }
    hg_sbuf_puts(&r->body, ",\"version\":");
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

/* The clearing guarantee as Deribit publishes it: the insurance fund and
 * what went through it, aggregates only (no account ids). Micro-USD as
 * integers, like every money figure of the exchange. */
static void metrics_clearing(daemon_t *d, hg_sbuf_t *b) {
  hg_md_clearing_t g;
  hg_mdview_clearing(d->view, &g);
  static const struct {
    const char *name, *type, *help;
  } m[] = {
      {"hourglass_insurance_fund_micro_usd", "gauge", "Insurance fund balance."},
      {"hourglass_insurance_fund_deposits_micro_usd_total", "counter",
       "Operator deposits into the insurance fund."},
      {"hourglass_liquidation_fees_micro_usd_total", "counter",
       "Liquidation fees paid into the insurance fund."},
      {"hourglass_insurance_fund_used_micro_usd_total", "counter",
       "Paid by the insurance fund to cover bankruptcies."},
      {"hourglass_socialized_loss_micro_usd_total", "counter",
       "Losses the fund could not cover, charged to the winners of a daily cycle."},
      {"hourglass_bankruptcies_total", "counter",
       "Negative cash balances left by a daily cycle (one per holder and cycle)."},
      {"hourglass_margin_calls_open", "gauge",
       "Margin calls open as of the last mark round or daily cycle."},
      {"hourglass_liquidations_open", "gauge",
       "Liquidations under way as of the last mark round or daily cycle."},
      {"hourglass_liquidation_fills_total", "counter", "Fills of liquidation orders since start."},
      {"hourglass_mark_rounds_total", "counter", "Mark rounds since start."},
  };
  const int64_t v[] = {g.fund,
                       g.fund_deposits,
                       g.liq_fees,
                       g.fund_used,
                       g.socialized,
                       (int64_t)g.bankruptcies,
                       g.called,
                       g.liquidating,
                       (int64_t)g.liquidation_fills,
                       (int64_t)g.mark_rounds};
  for (size_t k = 0; k < sizeof m / sizeof m[0]; k++)
    hg_sbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n%s %" PRId64 "\n", m[k].name, m[k].help,
                   m[k].name, m[k].type, m[k].name, v[k]);
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
  metric(b, "hourglass_ready", "gauge", "1 when /health answers 200.",
         (uint64_t)(ready && !cluster_log_failing(d, NULL, 0) &&
                    !cluster_catching_up(d, NULL, 0)));
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
    metric(b, "hourglass_gateway_tls_failures_total", "counter",
           "Connections closed for a failed TLS handshake or record.", gs.tls_failures);
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
  if (pub && d->cluster != NULL) metrics_cluster(d, b);
  if (pub) {
    metric(b, "hourglass_events_total", "counter", "Pipeline records consumed by the daemon.",
           hg_mdview_records(d->view));
    metrics_clearing(d, b);
    hg_md_latency_t lat;
    hg_mdview_latency(d->view, &lat);
    hg_sbuf_puts(b, "# HELP hourglass_release_latency_seconds Sequencer stamp to events "
                    "consumed (includes the journal fsync in durable mode; in cluster mode the "
                    "group's commit instead).\n"
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
    metric(b, "hourglass_http_stream_watchers", "gauge",
           "Open event streams (" DAEMON_STREAM_PATH ").", hs.watchers);
    metric(b, "hourglass_http_stream_events_total", "counter", "Market events sent to the stream.",
           hs.events);
    metric(b, "hourglass_http_stream_dropped_total", "counter",
           "Event streams closed because the watcher fell behind or stopped reading.",
           hs.dropped);
  }
  metric(b, "hourglass_synthetic_submitted_total", "counter", "Synthetic orders submitted.",
         atomic_load(&d->synth_submitted));
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
    if (strcmp(path, "/api/v1/openapi.json") == 0) {
      const hg_web_asset_t *spec = hg_web_asset_find("/openapi.json");
      r->content_type = spec->content_type;
      hg_sbuf_put(&r->body, spec->data, spec->len);
      return;
    }
    hg_market_api(d->view, path, query, r);
    return;
  }
  /* The market web page (daemon/web, compiled in): public data only. The
   * API's description is served at /api/v1/openapi.json only. */
  const hg_web_asset_t *asset = hg_web_asset_find(path);
  if (asset != NULL && strcmp(path, "/openapi.json") != 0) {
    r->content_type = asset->content_type;
    hg_sbuf_put(&r->body, asset->data, asset->len);
    return;
  }
  r->status = 404;
  hg_sbuf_puts(&r->body, "not found\n");
}


void daemon_http_stream(void *ctx, hg_sbuf_t *out) {
  daemon_t *d = ctx;
  if (atomic_load(&d->published)) hg_market_stream(d->mstream, out);
}

int daemon_http_snapshot(void *ctx, const char *query, hg_sbuf_t *out, uint32_t *topic) {
  daemon_t *d = ctx;
  *topic = 0;
  if (!atomic_load(&d->published)) {
    hg_sbuf_puts(out, "{\"error\":\"starting\"}\n");
    return 503;
  }
  return hg_market_stream_snapshot(d->mstream, query, out, topic);
}
