/*
 * Canonical serialization, state hash and restore of the exchange state
 * machine (exchange_int.h; the layout is at write_state()).
 *
 * Canonical serialization goes through one writer that either counts bytes,
 * copies them to a buffer, or feeds SHA-256 through a small staging buffer,
 * so the size, the blob and the hash can never disagree.
 *
 * Restore checks every field it reads, so a damaged blob is HG_ECORRUPT (or
 * HG_EFULL past this exchange's configured capacities), never undefined
 * behaviour, and a failed restore leaves the just-created state.
 */
#include "exchange_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hourglass/bytes.h"
#include "hourglass/error.h"
#include "hourglass/names.h"
#include "hourglass/sha256.h"

#define FORMAT_MAGIC 0x53584748u /* "HGXS" little-endian */

/* ------------------------------------------------------------------------ */
/* Canonical serialization                                                   */
/* ------------------------------------------------------------------------ */

typedef struct writer {
  uint8_t *buf;     /* copy mode when non-NULL */
  hg_sha256_t *sha; /* hash mode when non-NULL */
  size_t len;       /* bytes written so far, every mode */
  uint8_t stage[512];
  size_t staged;
  int err; /* sticky: the clearing serialization failed (-ENOMEM) */
} writer_t;

static void w_bytes(writer_t *w, const void *p, size_t n) {
  if (w->buf != NULL) {
    memcpy(w->buf + w->len, p, n);
  } else if (w->sha != NULL) {
    if (w->staged + n > sizeof w->stage) {
      hg_sha256_update(w->sha, w->stage, w->staged);
      w->staged = 0;
    }
    if (n > sizeof w->stage) {
      hg_sha256_update(w->sha, p, n);
    } else {
      memcpy(w->stage + w->staged, p, n);
      w->staged += n;
    }
  }
  w->len += n;
}

static void w_le(writer_t *w, uint64_t v, int n) {
  uint8_t b[8];
  w_bytes(w, b, hg_st_le(b, v, n));
}

static void w_u64(writer_t *w, uint64_t v) { w_le(w, v, 8); }
static void w_u32(writer_t *w, uint32_t v) { w_le(w, v, 4); }
static void w_u16(writer_t *w, uint16_t v) { w_le(w, v, 2); }
static void w_u8(writer_t *w, uint8_t v) { w_bytes(w, &v, 1); }
static void w_i64(writer_t *w, int64_t v) { w_u64(w, (uint64_t)v); }
static void w_i32(writer_t *w, int32_t v) { w_u32(w, (uint32_t)v); }

/* u8 length, then the bytes (strings are at most 255 bytes here). */
static void w_str(writer_t *w, const char *s, size_t cap) {
  const char *end = memchr(s, '\0', cap);
  size_t n = end != NULL ? (size_t)(end - s) : cap;
  w_u8(w, (uint8_t)n);
  w_bytes(w, s, n);
}

static int w_clearing(void *ctx, const void *data, size_t len) {
  w_bytes(ctx, data, len);
  return 0;
}

static void w_sample(writer_t *w, const hg_index_sample_t *s) {
  w_i64(w, s->ts);
  w_i64(w, s->price);
  w_i64(w, s->volume);
  w_i32(w, s->term_days);
  w_u8(w, s->kind);
  w_str(w, s->provider, sizeof s->provider);
  w_str(w, s->region, sizeof s->region);
  w_str(w, s->gpu, sizeof s->gpu);
  w_str(w, s->grade, sizeof s->grade);
}

static void w_receipt(writer_t *w, const hg_exchange_receipt_t *r) {
  w_i32(w, r->day);
  w_u32(w, r->input_count);
  w_u8(w, r->receipt_tier);
  for (int t = 0; t < 2; t++) {
    const hg_exchange_receipt_tier_t *x = &r->tier[t];
    w_u8(w, x->tried);
    w_u8(w, x->sufficient);
    w_u8(w, x->cap_applied);
    w_u32(w, x->eligible);
    w_u32(w, x->used);
    w_u32(w, x->providers);
    w_u32(w, x->hours);
    w_i64(w, x->volume);
    w_i64(w, x->median);
    w_i64(w, x->mad);
    w_i64(w, x->cap);
    w_i64(w, x->value);
    for (int k = 0; k < HG_INDEX_REASON_COUNT; k++) w_u32(w, x->reason_count[k]);
  }
}

static void write_settlement(const hg_exchange_t *ex, writer_t *w) {
  w_u32(w, ex->n_idx);
  for (uint32_t i = 0; i < ex->n_idx; i++) {
    const index_t *x = &ex->idx[i];
    w_str(w, x->gpu, sizeof x->gpu);
    w_str(w, x->grade, sizeof x->grade);
    w_u8(w, x->has_curve);
    w_u16(w, x->next_year);
    w_u8(w, x->next_month);
    w_u32(w, x->next_id);
    w_u32(w, x->curve_max_orders);
    w_u32(w, x->curve_max_accounts);
    w_i64(w, x->curve_ref);
    w_u32(w, (uint32_t)x->hist.n);
    for (size_t k = 0; k < x->hist.n; k++) {
      const hg_index_fixing_t *f = &x->hist.rec[k];
      w_i64(w, f->value);
      w_i32(w, f->day);
      w_i32(w, f->carried_from);
      w_u8(w, f->status);
      w_u8(w, f->kind);
      w_u8(w, f->tier);
      w_str(w, f->source, sizeof f->source);
    }
    w_u32(w, x->n_rcpt);
    for (uint32_t k = 0; k < x->n_rcpt; k++) w_receipt(w, &x->rcpt[k]);
  }
  w_u32(w, (uint32_t)ex->reg.n);
  for (size_t k = 0; k < ex->reg.n; k++) {
    const hg_index_reg_row_t *r = &ex->reg.rows[k];
    w_str(w, r->provider, sizeof r->provider);
    w_str(w, r->gpu, sizeof r->gpu);
    w_str(w, r->grade, sizeof r->grade);
    w_i32(w, r->effective_from);
  }
  w_u32(w, ex->n_staged);
  for (uint32_t k = 0; k < ex->n_staged; k++) {
    w_u32(w, ex->staged[k].index);
    w_i32(w, ex->staged[k].day);
    w_sample(w, &ex->staged[k].s);
  }
  /* The clearing state, length first: a counting pass, then the bytes. */
  writer_t count = {0};
  int rc = hg_clearing_serialize(ex->clr, w_clearing, &count);
  if (rc == 0) {
    w_u64(w, count.len);
    rc = hg_clearing_serialize(ex->clr, w_clearing, w);
  }
  if (rc != 0 && w->err == 0) w->err = rc;
}

static void w_order(void *ctx, const hg_book_order_t *o) {
  writer_t *w = ctx;
  w_u64(w, o->order_id);
  w_u64(w, o->client_order_id);
  w_u32(w, o->account);
  w_u32(w, o->smp_group);
  w_i64(w, o->price);
  w_i64(w, o->qty);
  w_i64(w, o->leaves);
  w_u64(w, o->ts);
  w_u8(w, o->side);
  w_u8(w, o->tif);
  w_u8(w, o->stp);
  w_u8(w, o->post_only);
  w_u8(w, o->session_scoped);
}

/*
 * Layout (all integers little-endian):
 *   u32 magic "HGXS", u32 version,
 *   u64 last_seq, u64 last_ts, u64 sessions, u32 last_session_date,
 *   u32 n_instruments, then per instrument by id:
 *     u32 id, u8 halted, u8 symbol_len, symbol bytes,
 *     params: i64 tick_size, contract_unit, min_price, max_price,
 *             max_order_qty, ref_price; u32 max_orders,
 *             max_accounts; u8 default_stp,
 *     u32 n_orders, then per order in time priority: u64 order_id,
 *       u64 client_order_id, u32 account, u32 smp_group, i64 price, i64 qty,
 *       i64 leaves, u64 ts, u8 side, tif, stp, post_only,
 *       u8 session_scoped,
 *   u32 n_accounts, then per account by id: u32 id, u32 firm,
 *   i32 last_cycle_day, u64 cycle_time_of_day_ns, u32 band_bps,
 *   u32 n_indexes, per index in creation order: str gpu, str grade, u8
 *     has_curve, u16 next_year, u8 next_month, u32 next_id, u32 max_orders,
 *     u32 max_accounts, i64 ref; u32 n_fixings, per fixing by day: i64
 *     value, i32 day, i32 carried_from, u8 status, kind, tier, str source;
 *     u32 n_receipts, per receipt by day (see w_receipt),
 *   u32 n_registry_rows (sorted): str provider, gpu, grade, i32 from,
 *   u32 n_staged, in publication order: u32 index, i32 day, sample,
 *   u64 clearing_len, the hg_clearing_serialize() bytes,
 *   u32 n_spreads, per spread by id: u32 id, u8 halted, u8
 *     symbol_len, symbol bytes, u32 leg_token, leg_gpu, n_t, n_g, then its
 *     params and orders as an instrument's.
 * (str = u8 length + bytes.) Cash, positions and the ledger are the
 * clearing's.
 */
/* An instrument's id, halted flag and symbol. */
static void w_head(writer_t *w, uint32_t id, uint8_t halted, const char *symbol) {
  size_t sl = strlen(symbol);
  w_u32(w, id);
  w_u8(w, halted);
  w_u8(w, (uint8_t)sl);
  w_bytes(w, symbol, sl);
}

/* A book's params, then its orders in time priority. */
static void w_book(writer_t *w, const hg_book_t *book) {
  const hg_book_params_t *p = hg_book_params(book);
  w_i64(w, p->tick_size);
  w_i64(w, p->contract_unit);
  w_i64(w, p->min_price);
  w_i64(w, p->max_price);
  w_i64(w, p->max_order_qty);
  w_i64(w, p->ref_price);
  w_u32(w, p->max_orders);
  w_u32(w, p->max_accounts);
  w_u8(w, p->default_stp);
  w_u32(w, hg_book_order_count(book));
  hg_book_foreach(book, w_order, w);
}

static void write_state(const hg_exchange_t *ex, writer_t *w) {
  w_u32(w, FORMAT_MAGIC);
  w_u32(w, HG_EXCHANGE_FORMAT_VERSION);
  w_u64(w, ex->last_seq);
  w_u64(w, ex->last_ts);
  w_u64(w, ex->sessions);
  w_u32(w, ex->last_session_date);
  w_u32(w, ex->n_instr);
  for (uint32_t i = 0; i < ex->n_instr; i++) {
    const instrument_t *inst = &ex->instr[i];
    w_head(w, inst->id, inst->halted, inst->symbol);
    w_book(w, inst->book);
  }
  w_u32(w, ex->n_acct);
  for (uint32_t i = 0; i < ex->n_acct; i++) {
    w_u32(w, ex->acct[i].id);
    w_u32(w, ex->acct[i].firm);
  }
  w_i32(w, ex->last_cycle_day);
  w_u64(w, ex->ccfg.cycle_time_of_day_ns);
  w_u32(w, ex->ccfg.band_bps);
  write_settlement(ex, w);
  w_u32(w, ex->n_spr);
  for (uint32_t i = 0; i < ex->n_spr; i++) {
    const spread_t *sp = &ex->spr[i];
    w_head(w, sp->id, sp->halted, sp->symbol);
    w_u32(w, sp->leg_t);
    w_u32(w, sp->leg_g);
    w_u32(w, sp->n_t);
    w_u32(w, sp->n_g);
    w_book(w, sp->book);
  }
}

size_t hg_exchange_serialized_size(const hg_exchange_t *ex) {
  writer_t w = {0};
  write_state(ex, &w);
  return w.len;
}

int hg_exchange_serialize(const hg_exchange_t *ex, uint8_t *buf, size_t cap, size_t *len) {
  size_t need = hg_exchange_serialized_size(ex);
  *len = need;
  if (need > cap) return HG_EFULL;
  writer_t w = {0};
  w.buf = buf;
  write_state(ex, &w);
  return w.err;
}

void hg_exchange_hash(const hg_exchange_t *ex, uint8_t out[HG_SHA256_LEN]) {
  hg_sha256_t sha;
  hg_sha256_init(&sha);
  writer_t w = {0};
  w.sha = &sha;
  write_state(ex, &w);
  hg_sha256_update(&sha, w.stage, w.staged);
  hg_sha256_final(&sha, out);
}

/* ------------------------------------------------------------------------ */
/* Restore                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct reader {
  const uint8_t *p;
  size_t left;
  int bad; /* sticky: a read past the end */
} reader_t;

static void r_bytes(reader_t *r, void *out, size_t n) {
  if (r->bad || n > r->left) {
    r->bad = 1;
    memset(out, 0, n);
    return;
  }
  memcpy(out, r->p, n);
  r->p += n;
  r->left -= n;
}

static uint64_t r_le(reader_t *r, int n) {
  uint8_t b[8];
  r_bytes(r, b, (size_t)n);
  return hg_ld_le(b, n);
}

static uint64_t r_u64(reader_t *r) { return r_le(r, 8); }
static uint32_t r_u32(reader_t *r) { return (uint32_t)r_le(r, 4); }
static uint16_t r_u16(reader_t *r) { return (uint16_t)r_le(r, 2); }
static uint8_t r_u8(reader_t *r) { return (uint8_t)r_le(r, 1); }
static int64_t r_i64(reader_t *r) { return (int64_t)r_u64(r); }
static int32_t r_i32(reader_t *r) { return (int32_t)r_u32(r); }

/* A string of at most cap - 1 bytes into dst[cap], NUL-padded. */
static int r_str(reader_t *r, char *dst, size_t cap) {
  uint8_t n = r_u8(r);
  memset(dst, 0, cap);
  if (r->bad || n >= cap) return 0;
  r_bytes(r, dst, n);
  return !r->bad && memchr(dst, '\0', n) == NULL;
}

/* A book's params and orders (w_book) into a new book of id with sink.
 * *count is set to slot + 1 once the book exists, so that a reset frees it. */
static int r_book(hg_exchange_t *ex, reader_t *r, uint32_t id,
                  void (*sink)(void *, const hg_book_event_t *), hg_book_t **out,
                  uint32_t *count, uint32_t slot) {
  hg_book_params_t p;
  memset(&p, 0, sizeof p);
  p.instrument_id = id;
  p.tick_size = r_i64(r);
  p.contract_unit = r_i64(r);
  p.min_price = r_i64(r);
  p.max_price = r_i64(r);
  p.max_order_qty = r_i64(r);
  p.ref_price = r_i64(r);
  p.max_orders = r_u32(r);
  p.max_accounts = r_u32(r);
  p.default_stp = r_u8(r);
  uint32_t n_orders = r_u32(r);
  if (r->bad) return HG_ECORRUPT;
  if (p.max_orders > ex->cfg.max_book_orders || p.max_accounts > ex->cfg.max_accounts)
    return HG_EFULL;
  if (n_orders > p.max_orders) return HG_ECORRUPT;
  int rc = hg_book_create(&p, sink, ex, out);
  if (rc == -ENOMEM) return rc;
  if (rc != 0) return HG_ECORRUPT;
  hg_book_set_event_buffer(*out, &ex->bev.book);
  *count = slot + 1; /* from here on hg_ex__reset() frees the book */
  if (sink == hg_ex__book_sink) instr_dir_refresh(ex, slot);
  for (uint32_t k = 0; k < n_orders; k++) {
    hg_book_order_t o;
    memset(&o, 0, sizeof o);
    o.order_id = r_u64(r);
    o.client_order_id = r_u64(r);
    o.account = r_u32(r);
    o.smp_group = r_u32(r);
    o.price = r_i64(r);
    o.qty = r_i64(r);
    o.leaves = r_i64(r);
    o.ts = r_u64(r);
    o.side = r_u8(r);
    o.tif = r_u8(r);
    o.stp = r_u8(r);
    o.post_only = r_u8(r);
    o.session_scoped = r_u8(r);
    if (r->bad || o.order_id == 0 || o.order_id > ex->last_seq) return HG_ECORRUPT;
    if (hg_book_restore(*out, &o) != 0) return HG_ECORRUPT;
  }
  return 0;
}

/* The spreads, after the clearing: their legs must be listed contracts. */
static int restore_spreads(hg_exchange_t *ex, reader_t *r) {
  uint32_t n = r_u32(r);
  if (r->bad) return HG_ECORRUPT;
  if (n > HG_EX_MAX_SPREADS) return HG_EFULL;
  for (uint32_t i = 0; i < n; i++) {
    spread_t *sp = &ex->spr[i];
    sp->id = r_u32(r);
    uint8_t halted = r_u8(r);
    uint8_t sl = r_u8(r);
    if (r->bad || sp->id == 0 || halted > 1 || sl == 0 || sl > HG_SYMBOL_MAX) return HG_ECORRUPT;
    if ((i > 0 && sp->id <= ex->spr[i - 1].id) || instr_find(ex, sp->id) != NULL)
      return HG_ECORRUPT;
    sp->halted = halted;
    r_bytes(r, sp->symbol, sl);
    sp->symbol[sl] = '\0';
    sp->leg_t = r_u32(r);
    sp->leg_g = r_u32(r);
    sp->n_t = r_u32(r);
    sp->n_g = r_u32(r);
    const instrument_t *lt = instr_find(ex, sp->leg_t);
    if (r->bad || !hg_symbol_ok(sp->symbol, sizeof sp->symbol) || lt == NULL ||
        instr_find(ex, sp->leg_g) == NULL || sp->n_t == 0 || sp->n_g == 0 ||
        sp->n_t > HG_EX_SPREAD_RATIO_MAX || sp->n_g > HG_EX_SPREAD_RATIO_MAX)
      return HG_ECORRUPT;
    sp->last_day = lt->last_day;
    sp->cutoff_ts = lt->cutoff_ts;
    int rc = r_book(ex, r, sp->id, hg_ex__spread_sink, &sp->book, &ex->n_spr, i);
    if (rc != 0) return rc;
  }
  return 0;
}

static int restore_instruments(hg_exchange_t *ex, reader_t *r) {
  uint32_t n = r_u32(r);
  if (r->bad) return HG_ECORRUPT;
  if (n > ex->cfg.max_instruments) return HG_EFULL;
  for (uint32_t i = 0; i < n; i++) {
    instrument_t *inst = &ex->instr[i];
    inst->id = r_u32(r);
    uint8_t halted = r_u8(r);
    uint8_t sl = r_u8(r);
    if (r->bad || inst->id == 0 || halted > 1 || sl == 0 || sl > HG_SYMBOL_MAX) return HG_ECORRUPT;
    if (i > 0 && inst->id <= ex->instr[i - 1].id) return HG_ECORRUPT;
    inst->halted = halted;
    r_bytes(r, inst->symbol, sl);
    inst->symbol[sl] = '\0';
    if (r->bad || !hg_symbol_ok(inst->symbol, sizeof inst->symbol)) return HG_ECORRUPT;
    for (uint32_t j = 0; j < i; j++)
      if (strcmp(ex->instr[j].symbol, inst->symbol) == 0) return HG_ECORRUPT;
    int rc = r_book(ex, r, inst->id, hg_ex__book_sink, &inst->book, &ex->n_instr, i);
    if (rc != 0) return rc;
  }
  return 0;
}

static int restore_accounts(hg_exchange_t *ex, reader_t *r) {
  uint32_t n = r_u32(r);
  if (r->bad) return HG_ECORRUPT;
  if (n > ex->cfg.max_accounts) return HG_EFULL;
  for (uint32_t i = 0; i < n; i++) {
    account_t a;
    a.id = r_u32(r);
    a.firm = r_u32(r);
    if (r->bad || a.id == 0 || a.firm == 0) return HG_ECORRUPT;
    if (i > 0 && a.id <= ex->acct[i - 1].id) return HG_ECORRUPT;
    ex->acct[i] = a;
    ex->n_acct = i + 1;
    acct_dir_refresh(ex, i);
  }
  return 0;
}

static int restore_sample(reader_t *r, hg_index_sample_t *s) {
  memset(s, 0, sizeof *s);
  s->ts = r_i64(r);
  s->price = r_i64(r);
  s->volume = r_i64(r);
  s->term_days = r_i32(r);
  s->kind = r_u8(r);
  if (!r_str(r, s->provider, sizeof s->provider) || !r_str(r, s->region, sizeof s->region) ||
      !r_str(r, s->gpu, sizeof s->gpu) || !r_str(r, s->grade, sizeof s->grade))
    return 0;
  return hg_ex__sample_ok(s);
}

static int restore_receipt(reader_t *r, hg_exchange_receipt_t *x) {
  memset(x, 0, sizeof *x);
  x->day = r_i32(r);
  x->input_count = r_u32(r);
  x->receipt_tier = r_u8(r);
  for (int t = 0; t < 2; t++) {
    hg_exchange_receipt_tier_t *d = &x->tier[t];
    d->tried = r_u8(r);
    d->sufficient = r_u8(r);
    d->cap_applied = r_u8(r);
    d->eligible = r_u32(r);
    d->used = r_u32(r);
    d->providers = r_u32(r);
    d->hours = r_u32(r);
    d->volume = r_i64(r);
    d->median = r_i64(r);
    d->mad = r_i64(r);
    d->cap = r_i64(r);
    d->value = r_i64(r);
    for (int k = 0; k < HG_INDEX_REASON_COUNT; k++) d->reason_count[k] = r_u32(r);
  }
  return !r->bad && day_ok(x->day) && x->receipt_tier <= 2;
}

static int restore_indexes(hg_exchange_t *ex, reader_t *r) {
  uint32_t n = r_u32(r);
  if (r->bad) return HG_ECORRUPT;
  if (n > ex->cfg.max_indexes) return HG_EFULL;
  for (uint32_t i = 0; i < n; i++) {
    char gpu[HG_INDEX_GPU_MAX], grade[HG_INDEX_GRADE_MAX];
    if (!r_str(r, gpu, sizeof gpu) || !r_str(r, grade, sizeof grade) ||
        !hg_name_ok(gpu, sizeof gpu) || !hg_name_ok(grade, sizeof grade) ||
        hg_ex__idx_find(ex, gpu, grade) >= 0)
      return HG_ECORRUPT;
    int slot = hg_ex__idx_get(ex, gpu, grade);
    if (slot < 0) return slot == -ENOMEM ? slot : HG_ECORRUPT;
    index_t *x = &ex->idx[slot];
    x->has_curve = r_u8(r);
    x->next_year = r_u16(r);
    x->next_month = r_u8(r);
    x->next_id = r_u32(r);
    x->curve_max_orders = r_u32(r);
    x->curve_max_accounts = r_u32(r);
    x->curve_ref = r_i64(r);
    if (r->bad || x->has_curve > 1) return HG_ECORRUPT;
    if (x->has_curve &&
        (x->next_month < 1 || x->next_month > 12 || x->next_year < HG_CURVE_YEAR_MIN ||
         x->next_id == 0 || x->curve_max_orders == 0 || x->curve_max_accounts == 0 ||
         x->curve_ref < 0))
      return HG_ECORRUPT;
    uint32_t nf = r_u32(r);
    if (r->bad) return HG_ECORRUPT;
    if (nf > ex->cfg.max_fixing_days) return HG_EFULL;
    for (uint32_t k = 0; k < nf; k++) {
      hg_index_fixing_t *f = &x->fix[k];
      memset(f, 0, sizeof *f);
      f->value = r_i64(r);
      f->day = r_i32(r);
      f->carried_from = r_i32(r);
      f->status = r_u8(r);
      f->kind = r_u8(r);
      f->tier = r_u8(r);
      if (!r_str(r, f->source, sizeof f->source)) return HG_ECORRUPT;
      if (!day_ok(f->day) || (k > 0 && f->day <= x->fix[k - 1].day) ||
          f->status < HG_INDEX_PROVISIONAL || f->status > HG_INDEX_NO_FIX ||
          f->kind > HG_INDEX_EXTERNAL || f->tier > 2 || f->value < 0 ||
          (f->status != HG_INDEX_NO_FIX && f->value == 0))
        return HG_ECORRUPT;
    }
    x->hist.n = nf;
    x->n_rcpt = r_u32(r);
    if (r->bad) return HG_ECORRUPT;
    if (x->n_rcpt > ex->cfg.max_fixing_days) return HG_EFULL;
    for (uint32_t k = 0; k < x->n_rcpt; k++) {
      if (!restore_receipt(r, &x->rcpt[k])) return HG_ECORRUPT;
      if (k > 0 && x->rcpt[k].day <= x->rcpt[k - 1].day) return HG_ECORRUPT;
    }
  }
  return 0;
}

/* On success *clr is the restored clearing state (the caller's to install). */
static int restore_settlement(hg_exchange_t *ex, reader_t *r, hg_clearing_t **out) {
  ex->last_cycle_day = r_i32(r);
  ex->ccfg.cycle_time_of_day_ns = r_u64(r);
  ex->ccfg.band_bps = r_u32(r);
  if (r->bad || ex->last_cycle_day < -1 || ex->last_cycle_day > HG_DAY_MAX ||
      ex->ccfg.cycle_time_of_day_ns >= HG_NS_PER_DAY || ex->ccfg.band_bps > 100000)
    return HG_ECORRUPT;
  int rc = restore_indexes(ex, r);
  if (rc != 0) return rc;
  uint32_t nreg = r_u32(r);
  if (r->bad) return HG_ECORRUPT;
  for (uint32_t k = 0; k < nreg; k++) {
    hg_index_reg_row_t row;
    if (!r_str(r, row.provider, sizeof row.provider) || !r_str(r, row.gpu, sizeof row.gpu) ||
        !r_str(r, row.grade, sizeof row.grade))
      return HG_ECORRUPT;
    row.effective_from = r_i32(r);
    if (r->bad || !hg_text_ok(row.provider, sizeof row.provider) ||
        !hg_name_ok(row.gpu, sizeof row.gpu) || !hg_name_ok(row.grade, sizeof row.grade) ||
        !day_ok(row.effective_from))
      return HG_ECORRUPT;
    rc = hg_index_registry_add(&ex->reg, row.provider, row.gpu, row.grade, row.effective_from);
    if (rc == -ENOMEM) return rc;
    if (rc != 0) return HG_ECORRUPT;
  }
  uint32_t ns = r_u32(r);
  if (r->bad) return HG_ECORRUPT;
  if (ns > ex->cfg.max_staged_samples) return HG_EFULL;
  /* A staged sample takes at least 41 bytes (u32, i32, 3 x i64, i32, u8 and
   * four non-empty strings): a damaged count cannot ask for more room than
   * the blob could fill. */
  if (ns > r->left / 41) return HG_ECORRUPT;
  if (ns > ex->cap_staged) {
    staged_t *p = realloc(ex->staged, (size_t)ns * sizeof *p);
    if (p == NULL) return -ENOMEM;
    ex->staged = p;
    ex->cap_staged = ns;
  }
  for (uint32_t k = 0; k < ns; k++) {
    staged_t *s = &ex->staged[k];
    memset(s, 0, sizeof *s);
    s->index = r_u32(r);
    s->day = r_i32(r);
    if (!restore_sample(r, &s->s) || s->index >= ex->n_idx || !day_ok(s->day)) return HG_ECORRUPT;
    ex->n_staged = k + 1;
  }
  uint64_t clen = r_u64(r);
  if (r->bad || clen > r->left) return HG_ECORRUPT;
  /* The clearing blob sizes its tables from its own header (u32 magic,
   * version, max_accounts, max_instruments, max_firms, max_groups,
   * max_positions): hold them to this exchange's configuration before a
   * damaged field can ask for a huge allocation. */
  if (clen < 28) return HG_ECORRUPT;
  const uint32_t caps[5] = {ex->ccfg.max_accounts, ex->ccfg.max_instruments, ex->ccfg.max_firms,
                            ex->ccfg.max_groups, ex->ccfg.max_positions};
  for (int k = 0; k < 5; k++) {
    const uint8_t *q = r->p + 8 + 4 * k;
    if (hg_ld_le(q, 4) > caps[k]) return HG_EFULL;
  }
  hg_clearing_t *clr = NULL;
  rc = hg_clearing_restore(r->p, (size_t)clen, &clr);
  if (rc == -ENOMEM) return rc;
  if (rc != 0) return HG_ECORRUPT;
  *out = clr;
  r->p += clen;
  r->left -= (size_t)clen;
  /* Every account and listed contract must be the clearing's. */
  for (uint32_t i = 0; i < ex->n_acct; i++) {
    hg_clearing_account_info_t a;
    if (hg_clearing_account_info(clr, ex->acct[i].id, &a) != 0 || a.firm_id != ex->acct[i].firm)
      return HG_ECORRUPT;
  }
  for (uint32_t i = 0; i < ex->n_instr; i++) {
    instrument_t *inst = &ex->instr[i];
    char gpu[HG_INDEX_GPU_MAX], grade[HG_INDEX_GRADE_MAX];
    uint32_t y, m;
    hg_clearing_instrument_info_t ci;
    if (!hg_symbol_parse(inst->symbol, gpu, sizeof gpu, grade, sizeof grade, &y, &m))
      return HG_ECORRUPT;
    int slot = hg_ex__idx_find(ex, gpu, grade);
    if (slot < 0 || hg_clearing_instrument_info(clr, inst->id, &ci) != 0 ||
        ci.inst.group_id != (uint32_t)slot + 1 || ci.inst.year != y || ci.inst.month != m ||
        ci.settled)
      return HG_ECORRUPT;
    inst->index = (uint32_t)slot;
    hg_ex__set_month(ex, inst, y, m);
  }
  return 0;
}

static int restore_all(hg_exchange_t *ex, reader_t *r) {
  uint32_t magic = r_u32(r);
  uint32_t version = r_u32(r);
  if (r->bad || magic != FORMAT_MAGIC || version == 0) return HG_ECORRUPT;
  if (version != HG_EXCHANGE_FORMAT_VERSION) return HG_EVERSION;
  ex->last_seq = r_u64(r);
  ex->last_ts = r_u64(r);
  ex->sessions = r_u64(r);
  ex->last_session_date = r_u32(r);
  if (r->bad) return HG_ECORRUPT;
  int rc = restore_instruments(ex, r);
  if (rc == 0) rc = restore_accounts(ex, r);
  hg_clearing_t *clr = NULL;
  if (rc == 0) rc = restore_settlement(ex, r, &clr);
  if (rc == 0) rc = restore_spreads(ex, r);
  if (rc == 0 && (r->bad || r->left != 0)) rc = HG_ECORRUPT;
  if (rc != 0) {
    hg_clearing_destroy(clr);
    return rc;
  }
  hg_clearing_destroy(ex->clr);
  ex->clr = clr;
  hg_ex__spread_sync(ex); /* the pairs are the spreads' */
  ex->flags_day = -1; /* the next command sets the flags for its own day */
  return 0;
}

int hg_exchange_restore(hg_exchange_t *ex, const uint8_t *blob, size_t len) {
  if (ex->n_instr != 0 || ex->n_acct != 0 || ex->last_seq != 0 || ex->n_idx != 0 ||
      ex->reg.n != 0 || ex->n_staged != 0)
    return HG_ESTATE;
  if (blob == NULL) return HG_ECORRUPT;
  reader_t r = {.p = blob, .left = len, .bad = 0};
  hg_clearing_config_t saved = ex->ccfg;
  int rc = restore_all(ex, &r);
  if (rc != 0) {
    ex->ccfg = saved;
    hg_ex__reset(ex);
  }
  return rc;
}
