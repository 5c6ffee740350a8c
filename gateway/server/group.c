/*
 * group.c - what a gateway in cluster mode adds so that a key's stream is
 * the same on every node (hourglass/pipeline.h "Routes" and "Stream
 * records"; proto/README.md "Cluster"). Loop thread.
 *
 *  - Routes: each command this node submits travels in the replicated
 *    batch with where its results go (the pending entry's key, ref_seq,
 *    kind, ...); a node applying it from the group makes the same pending
 *    entry, so events.c routes every result the same way on every node.
 *  - Held frames: a frame the gateway decides itself while handling a
 *    request (a query's reply, a refusal, a quote acknowledgement, a
 *    market-maker protection trip) for a key that trades or operates is
 *    not sequenced at once: its Envelope without seq goes into the batch
 *    as a stream record and into the hold ring, and when the pipeline
 *    releases the record (committed, in log order) every node sequences
 *    the same bytes into the key's stream at the same place. The released
 *    frame is the length, field 1 (seq) and the held body, so its bytes
 *    are the same on every node.
 *  - Route state: what a node starting from a snapshot needs to route as
 *    the others do (hg_gateway_route_state / hg_gateway_seed_routes).
 */
#include "gateway_int.h"

/* Route layout (HG_PIPE_ROUTE_BYTES, zero elsewhere): u64 key id, u64
 * ref_seq, u32 kind (0: no pending entry), u32 quote group, u32 part, u32
 * parts, u32 refused, u8 cod, u8 replied. */
#define RT_KEY 0
#define RT_REF 8
#define RT_KIND 16
#define RT_GROUP 20
#define RT_PART 24
#define RT_PARTS 28
#define RT_REFUSED 32
#define RT_COD 36
#define RT_REPLIED 37

void hg_gateway_route_out(void *ctx, uint64_t origin, uint8_t *out) {
  hg_gateway_t *gw = ctx;
  pending_t *p = gw_pending_of(gw, origin);
  if (p == NULL) return;
  uint64_t key = p->stream != NONE32 && p->stream < gw->cfg.max_streams
                     ? gw->streams[p->stream].key_id
                     : 0;
  hg_st64(out + RT_KEY, key);
  hg_st64(out + RT_REF, p->ref_seq);
  hg_st32(out + RT_KIND, p->kind);
  hg_st32(out + RT_GROUP, p->quote_group);
  hg_st32(out + RT_PART, p->part);
  hg_st32(out + RT_PARTS, p->parts);
  hg_st32(out + RT_REFUSED, p->refused);
  out[RT_COD] = p->cod;
  out[RT_REPLIED] = p->replied;
}

uint32_t gw_stream_of_key(hg_gateway_t *gw, uint64_t key_id) {
  if (key_id == 0) return NONE32;
  uint32_t si = gw_map_get(&gw->stream_map, key_id);
  if (si != NONE32) return si;
  hg_key_record_t k;
  int rc = gw_key_load(gw, key_id, &k);
  hg_wipe(k.secret, sizeof k.secret);
  if (rc != 0 || gw_stream_get(gw, &k, &si) == NULL) {
    /* A key the leader knows and this node does not (keys are each node's
     * own): logged at the 1st, 2nd, 4th, ... such frame, not each. */
    uint64_t n = ++gw->unrouted;
    if ((n & (n - 1)) == 0)
      gw_log(gw, HG_LOG_WARN, "key %" PRIu64 " of a replicated command: %s; its reports reach "
             "no stream on this node (%" PRIu64 " so far)", key_id,
             rc != 0 ? hg_strerror(rc) : "stream table full", n);
    return NONE32;
  }
  return si;
}

uint64_t hg_gateway_route_in(void *ctx, const uint8_t *route, size_t len,
                             const hg_command_t *cmd) {
  hg_gateway_t *gw = ctx;
  if (len < HG_PIPE_ROUTE_BYTES) return 0;
  uint32_t kind = hg_ld32(route + RT_KIND);
  if (kind == 0) return 0;
  if (gw->pend_next - gw->pend_tail >= gw->cfg.pending_capacity) return HG_PIPE_ROUTE_BUSY;
  uint64_t counter = gw->pend_next++;
  pending_t *p = gw_pend_at(gw, counter);
  memset(p, 0, sizeof *p);
  p->origin = ORIGIN_TAG | (counter & ORIGIN_MASK);
  p->ref_seq = hg_ld64(route + RT_REF);
  p->stream = gw_stream_of_key(gw, hg_ld64(route + RT_KEY));
  p->conn_gen = UINT32_MAX;
  p->kind = kind;
  p->quote_group = hg_ld32(route + RT_GROUP);
  p->part = hg_ld32(route + RT_PART);
  p->parts = hg_ld32(route + RT_PARTS);
  p->refused = hg_ld32(route + RT_REFUSED);
  p->cod = route[RT_COD];
  p->replied = route[RT_REPLIED];
  p->applied = 1;
  p->cmd = *cmd;
  if (cmd->type == HG_COMMAND_NEW_ORDER) gw->orders_reserved++;
  return p->origin;
}

/* ---------------------------------------------------------- held frames */

bool gw_hold_applies(const hg_gateway_t *gw, const stream_t *st) {
  return gw->hold != NULL && gw->local && st->role != HG_ROLE_RISK_VIEWER;
}

static void hold_put(hg_gateway_t *gw, const void *src, size_t n) {
  size_t at = (size_t)(gw->hold_tail % HOLD_BYTES);
  size_t first = n < HOLD_BYTES - at ? n : HOLD_BYTES - at;
  memcpy(gw->hold + at, src, first);
  memcpy(gw->hold, (const uint8_t *)src + first, n - first);
  gw->hold_tail += n;
}

static void hold_get(hg_gateway_t *gw, void *dst, size_t n) {
  size_t at = (size_t)(gw->hold_head % HOLD_BYTES);
  size_t first = n < HOLD_BYTES - at ? n : HOLD_BYTES - at;
  memcpy(dst, gw->hold + at, first);
  memcpy((uint8_t *)dst + first, gw->hold, n - first);
  gw->hold_head += n;
}

/* Room for a record of n bytes (key and body) in the hold ring. */
static bool hold_room(const hg_gateway_t *gw, size_t n) {
  return HOLD_BYTES - (gw->hold_tail - gw->hold_head) >= 4 + n;
}

/* Appends a record of n bytes (key and body; hold_room said yes). */
static void hold_push(hg_gateway_t *gw, const uint8_t *rec, size_t n) {
  uint32_t l = (uint32_t)n;
  hold_put(gw, &l, sizeof l);
  hold_put(gw, rec, n);
}

void gw_hold_frame(hg_gateway_t *gw, stream_t *st, const uint8_t *frame, size_t len) {
  /* Skip the frame's length varint: the record is the key and the body. */
  size_t h = 0;
  while (h < len && (frame[h] & 0x80) != 0) h++;
  h++;
  size_t body = len > h ? len - h : 0;
  size_t n = 8 + body;
  int rc = HG_EINVAL;
  if (body > 0 && n <= HG_PIPE_STREAM_MAX && hold_room(gw, n)) {
    uint8_t *rec = gw->scratch; /* frame points into it: move the body up */
    memmove(rec + 8, frame + h, body);
    hg_st64(rec, st->key_id);
    rc = hg_pipeline_stream_add(gw->pipe, rec, n);
    if (rc == 0) {
      hold_push(gw, rec, n);
      return;
    }
  } else if (body > 0 && n <= HG_PIPE_STREAM_MAX) {
    rc = HG_EFULL;
  }
  gw_log(gw, HG_LOG_ERROR, "a reply to key %" PRIu64 " is not sent: it cannot be replicated: %s",
         st->key_id, hg_strerror(rc));
}

int hg_gateway_stream_in(void *ctx, const uint8_t *bytes, size_t len) {
  hg_gateway_t *gw = ctx;
  if (gw->hold == NULL || len < 8 || len > HG_PIPE_STREAM_MAX) return 0; /* not ours: dropped */
  if (!hold_room(gw, len)) return HG_EBUSY;
  hold_push(gw, bytes, len);
  return 0;
}

void gw_hold_release(hg_gateway_t *gw) {
  if (gw->hold == NULL || gw->hold_tail - gw->hold_head < 4) return;
  uint32_t n;
  hold_get(gw, &n, sizeof n);
  uint8_t key[8];
  hold_get(gw, key, sizeof key);
  size_t rest = n - 8;
  uint32_t si = gw_stream_of_key(gw, hg_ld64(key));
  if (si == NONE32) {
    gw->hold_head += rest;
    return;
  }
  stream_t *st = &gw->streams[si];
  if (gw_relogged(gw, st)) {
    gw->hold_head += rest;
    return;
  }
  uint64_t seq = st->next_seq;
  size_t body = 1 + hg_wire_varint_len(seq) + rest;
  size_t h = hg_wire_varint_len(body);
  if (h + body > SCRATCH_SIZE) { /* cannot happen: the hold takes at most HG_PIPE_STREAM_MAX */
    gw->hold_head += rest;
    return;
  }
  uint8_t *f = gw->scratch;
  size_t at = hg_wire_varint_encode(body, f);
  f[at++] = 0x08; /* Envelope.seq: field 1, varint */
  at += hg_wire_varint_encode(seq, f + at);
  hold_get(gw, f + at, rest);
  st->next_seq++;
  gw_stream_emit(gw, st, seq, h + body);
}

/* ---- route state (cluster snapshots) ------------------------------------ */

#define RS_HEADER 16u
#define RS_STREAM 16u
#define RS_ACCOUNT 16u
#define RS_ORDER 24u

static uint64_t stream_key(const hg_gateway_t *gw, uint32_t si) {
  return si != NONE32 && si < gw->cfg.max_streams ? gw->streams[si].key_id : 0;
}

size_t hg_gateway_route_state(hg_gateway_t *gw, uint8_t *buf, size_t cap) {
  uint32_t ns = 0, na = 0;
  for (uint32_t i = 0; i < gw->cfg.max_streams; i++) ns += gw->streams[i].key_id != 0;
  for (uint32_t i = 0; i < gw->cfg.max_accounts; i++)
    na += gw->accounts[i].id != 0 && stream_key(gw, gw->accounts[i].stream) != 0;
  size_t need = RS_HEADER + (size_t)ns * RS_STREAM + (size_t)na * RS_ACCOUNT +
                (size_t)gw->n_orders * RS_ORDER;
  if (buf == NULL || cap < need) return need;
  memset(buf, 0, need);
  hg_st32(buf, HG_GATEWAY_ROUTES_MAGIC);
  hg_st32(buf + 4, ns);
  hg_st32(buf + 8, na);
  hg_st32(buf + 12, gw->n_orders);
  uint8_t *p = buf + RS_HEADER;
  for (uint32_t i = 0; i < gw->cfg.max_streams; i++) {
    if (gw->streams[i].key_id == 0) continue;
    hg_st64(p, gw->streams[i].key_id);
    hg_st64(p + 8, gw->streams[i].next_seq);
    p += RS_STREAM;
  }
  for (uint32_t i = 0; i < gw->cfg.max_accounts; i++) {
    uint64_t key = stream_key(gw, gw->accounts[i].stream);
    if (gw->accounts[i].id == 0 || key == 0) continue;
    hg_st32(p, gw->accounts[i].id);
    hg_st64(p + 8, key);
    p += RS_ACCOUNT;
  }
  for (uint32_t i = 0, n = 0; i < gw->cfg.max_orders && n < gw->n_orders; i++) {
    const order_t *o = &gw->orders[i];
    if (o->order_id == 0) continue;
    hg_st64(p, o->order_id);
    hg_st64(p + 8, stream_key(gw, o->stream));
    hg_st32(p + 16, o->quote_group);
    p[20] = o->cod;
    p += RS_ORDER;
    n++;
  }
  return need;
}

int hg_gateway_seed_routes(hg_gateway_t *gw, const uint8_t *b, size_t len) {
  if (!gw->attached || gw->started) return HG_ESTATE;
  if (len < RS_HEADER || hg_ld32(b) != HG_GATEWAY_ROUTES_MAGIC) return HG_ECORRUPT;
  uint64_t ns = hg_ld32(b + 4), na = hg_ld32(b + 8), no = hg_ld32(b + 12);
  if (ns * RS_STREAM + na * RS_ACCOUNT + no * RS_ORDER != len - RS_HEADER) return HG_ECORRUPT;
  const uint8_t *p = b + RS_HEADER;
  uint32_t raised = 0, homes = 0, routed = 0;
  for (uint64_t i = 0; i < ns; i++, p += RS_STREAM) {
    uint32_t si = gw_stream_of_key(gw, hg_ld64(p));
    uint64_t next = hg_ld64(p + 8);
    if (si == NONE32 || gw->streams[si].next_seq >= next || gw->streams[si].n_ent != 0) continue;
    gw->streams[si].next_seq = next;
    gw->streams[si].first_seq = next;
    raised++;
  }
  for (uint64_t i = 0; i < na; i++, p += RS_ACCOUNT) {
    account_t *a = gw_account_find(gw, hg_ld32(p));
    uint32_t si = gw_stream_of_key(gw, hg_ld64(p + 8));
    if (a == NULL || si == NONE32) continue;
    a->stream = si;
    homes++;
  }
  for (uint64_t i = 0; i < no; i++, p += RS_ORDER) {
    order_t *o = gw_order_find(gw, hg_ld64(p));
    if (o == NULL) continue;
    uint64_t key = hg_ld64(p + 8);
    uint32_t si = key != 0 ? gw_stream_of_key(gw, key) : NONE32;
    if (key != 0 && si == NONE32) continue;
    if (o->stream != si) gw_order_move(gw, o, si);
    o->quote_group = hg_ld32(p + 16);
    o->cod = p[20];
    routed++;
  }
  gw_log(gw, HG_LOG_INFO, "routes from the snapshot: %" PRIu32 " streams numbered on from it, %"
         PRIu32 " accounts' home keys, %" PRIu32 " orders' entering keys", raised, homes, routed);
  return 0;
}
