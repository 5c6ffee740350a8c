/*
 * The exchange state machine.
 *
 * Structure: two arrays kept sorted by id, instruments (each owning its
 * hg_book_t) and accounts, searched by binary search. Sorted arrays give the
 * canonical iteration order (by id) for free, never depend on hash layout,
 * and cost a memmove only on listing, delisting and account creation, which
 * are operator commands; orders only search. Both arrays are allocated at
 * create from the config, so no order allocates.
 *
 * Money, positions and margin live in the clearing library (hg_clearing_t,
 * owned here): accounts are registered with it, deposits and withdrawals go
 * through it, every order passes its pre-trade check before the book, and
 * the book sink keeps it in step with the book: an accepted order's quantity
 * is open (ACCEPTED), fills move positions and reduce both sides' open
 * quantity (FILL), whatever leaves the book unfilled stops being open
 * (CANCELLED: user, IOC remainder, FOK, STP, mass cancel, expiry, delisting),
 * a replace swaps the old open quantity for the new (REPLACED). A clearing
 * call on that path cannot fail once the pre-trade check created the
 * position record; if one does anyway, the exchange records a sticky fault
 * and every later apply returns HG_ECORRUPT (the engine must stop: the state
 * can no longer be trusted).
 *
 * The index side: one index_t per (GPU, grade), created on first use, which
 * is also the clearing product group (group id = slot + 1). It owns the
 * fixing history (hourglass/index.h, fixed capacity), the receipts of
 * computed fixings and the rolling curve of auto-listed contracts. Samples
 * are staged in one array in publication order until COMPUTE_FIXING consumes
 * those of its (index, day). Settlement commands are operator commands: they
 * may allocate (staging, the fixing computation), never the order path.
 *
 * While a command is applied, ex->cur holds its seq, ts and type so that the
 * sink can stamp book events into exchange events, and so that a delisting
 * or an expiry can relabel the cancels it causes.
 *
 * Canonical serialization goes through one writer that either counts bytes,
 * copies them to a buffer, or feeds SHA-256 through a small staging buffer,
 * so the size, the blob and the hash can never disagree.
 */
#include "hourglass/exchange.h"
#include "hourglass/idhint.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hourglass/error.h"
#include "hourglass/sha256.h"

#define FORMAT_MAGIC 0x53584748u /* "HGXS" little-endian */
#define NS_PER_DAY ((uint64_t)86400 * 1000000000u)
#define DEFAULT_MAX_INDEXES 16u
#define DEFAULT_MAX_FIXING_DAYS 4096u
#define DEFAULT_MAX_STAGED (1u << 20)
/* Listed months per (GPU, grade) curve (settlement/CONTRACT.md section 1). */
#define CURVE_MONTHS 12u
/* Book parameters of curve contracts: 0.001 USD per GPU-hour ticks, 1,000
 * GPU-hours, prices 1 tick .. 100 USD per GPU-hour. The 20% band and the
 * 1,000-contract order size are the clearing check's. */
#define CURVE_MAX_PRICE 100000
#define CURVE_MAX_ORDER_QTY 1000

typedef struct instrument {
  uint32_t id;
  uint8_t halted;
  char symbol[HG_SYMBOL_MAX + 1];
  hg_book_t *book;   /* owned by the exchange */
  uint32_t index;    /* slot in ex->idx; group id = index + 1 */
  uint16_t year;
  uint8_t month;
  int32_t first_day; /* first and last calendar day of the delivery month */
  int32_t last_day;
  uint64_t cutoff_ts; /* last trading day, cycle time of day (16:00 UTC), ns */
} instrument_t;

typedef struct account {
  hg_account_t id;
  uint32_t firm;
} account_t;

/* A live order's identity, collected before a delisting cancels it. */
typedef struct order_ref {
  hg_oid_t order_id;
  hg_account_t account;
} order_ref_t;

typedef struct current {
  uint64_t seq;
  uint64_t ts;
  uint32_t type;
  uint16_t relabel;        /* cancel reason replacing HG_CXL_USER, 0 = none */
  hg_qty_t replace_leaves; /* leaves of the order being replaced */
} current_t;

typedef struct staged {
  uint32_t index;
  int32_t day;
  hg_index_sample_t s;
} staged_t;

typedef struct index {
  char gpu[HG_INDEX_GPU_MAX];
  char grade[HG_INDEX_GRADE_MAX];
  hg_index_fixing_t *fix;       /* owned; storage of hist, max_fixing_days */
  hg_index_history_t hist;
  hg_exchange_receipt_t *rcpt;  /* owned; max_fixing_days slots, by day */
  uint32_t n_rcpt;
  uint8_t has_curve;
  uint8_t next_month;           /* next month the curve lists */
  uint16_t next_year;
  uint32_t next_id;             /* its instrument id */
  uint32_t curve_max_orders;
  uint32_t curve_max_accounts;
  int64_t curve_ref;
} index_t;

struct hg_exchange {
  hg_exchange_config_t cfg;
  hg_exchange_sink_fn sink;
  void *sink_ctx;
  instrument_t *instr; /* owned; cfg.max_instruments slots, n_instr used, by id */
  uint32_t n_instr;
  account_t *acct;     /* owned; cfg.max_accounts slots, n_acct used, by id */
  uint32_t n_acct;
  /* Owned; position hints by id for instr[] and acct[] (hourglass/idhint.h),
   * confirmed against the array and backed by the binary search. */
  hg_idhint_t instr_dir, acct_dir;
  order_ref_t *scratch; /* owned; cfg.max_book_orders slots, delisting only */
  uint32_t scratch_n;
  hg_clearing_t *clr;   /* owned */
  hg_clearing_config_t ccfg; /* as created (restore: band and cycle time from the blob) */
  hg_clearing_top_t *tops;   /* owned; cfg.max_instruments slots, daily cycle only */
  index_t *idx;        /* owned; cfg.max_indexes slots, n_idx used, creation order */
  uint32_t n_idx;
  hg_index_registry_t reg; /* owned: provider grades */
  staged_t *staged;    /* owned; n_staged used of cap_staged (grows) */
  uint32_t n_staged, cap_staged;
  hg_index_config_t icfg;
  uint64_t last_seq;
  uint64_t last_ts;
  uint64_t sessions;          /* END_OF_SESSION commands applied */
  uint32_t last_session_date; /* date of the last one */
  int32_t last_cycle_day;     /* day of the last DAILY_SETTLEMENT, -1 none */
  /* UTC day the clearing's delivery-month flags were last set for, -1 none.
   * Not serialized: the flags are (in the clearing blob), and they are a
   * function of this day, so a restore simply sets them again. */
  int32_t flags_day;
  int fault;                  /* sticky: a clearing call failed on the book path */
  current_t cur;
  /* Book events are built here rather than in a zeroed local: only the
   * fields a book event sets are ever written, so the rest stay zero from
   * create, and no 216-byte clear runs per event. bev for events the book
   * emits, rev for the exchange's own order rejects. */
  hg_exchange_event_t bev, rev;
};

/* ------------------------------------------------------------------------ */
/* Dates                                                                     */
/* ------------------------------------------------------------------------ */

static int leap(unsigned y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

static unsigned month_days(unsigned y, unsigned m) {
  static const unsigned char len[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && leap(y) ? 29 : len[m - 1];
}

/* Day number (days since 1970-01-01) of y-m-d, proleptic Gregorian, y >= 1970. */
static int32_t day_number(unsigned y, unsigned m, unsigned d) {
  int64_t days = 0;
  for (unsigned yy = 1970; yy < y; yy++) days += leap(yy) ? 366 : 365;
  for (unsigned mm = 1; mm < m; mm++) days += month_days(y, mm);
  return (int32_t)(days + d - 1);
}

static int32_t ts_day(uint64_t ts) { return (int32_t)(ts / NS_PER_DAY); }

/* Parses "<GPU>.<GRADE>.<YYYY-MM>" (GPU [A-Za-z0-9]{1,15}, grade
 * [A-Za-z0-9]{1,7}, year 1970..9999, month 01..12). */
static int parse_contract(const char *sym, char gpu[HG_INDEX_GPU_MAX],
                          char grade[HG_INDEX_GRADE_MAX], unsigned *year, unsigned *month) {
  const char *p = sym;
  size_t n = 0;
  while (p[n] != '\0' && p[n] != '.') n++;
  if (n == 0 || n >= HG_INDEX_GPU_MAX || p[n] != '.') return 0;
  memcpy(gpu, p, n);
  gpu[n] = '\0';
  p += n + 1;
  n = 0;
  while (p[n] != '\0' && p[n] != '.') n++;
  if (n == 0 || n >= HG_INDEX_GRADE_MAX || p[n] != '.') return 0;
  memcpy(grade, p, n);
  grade[n] = '\0';
  p += n + 1;
  for (const char *q = gpu; *q; q++)
    if (!((*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z') || (*q >= '0' && *q <= '9')))
      return 0;
  for (const char *q = grade; *q; q++)
    if (!((*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z') || (*q >= '0' && *q <= '9')))
      return 0;
  if (strlen(p) != 7 || p[4] != '-') return 0;
  unsigned y = 0, m = 0;
  for (int i = 0; i < 4; i++) {
    if (p[i] < '0' || p[i] > '9') return 0;
    y = y * 10 + (unsigned)(p[i] - '0');
  }
  for (int i = 5; i < 7; i++) {
    if (p[i] < '0' || p[i] > '9') return 0;
    m = m * 10 + (unsigned)(p[i] - '0');
  }
  if (y < 1970 || m < 1 || m > 12) return 0;
  *year = y;
  *month = m;
  return 1;
}

/* GPU model or grade code: [A-Za-z0-9]{1,cap-1}, NUL inside the array. */
static int name_ok(const char *s, size_t cap) {
  const char *end = memchr(s, '\0', cap);
  if (end == NULL || end == s) return 0;
  for (const char *q = s; q < end; q++)
    if (!((*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z') || (*q >= '0' && *q <= '9')))
      return 0;
  return 1;
}

/* Free text as the CSV reader accepts it: 1..cap-1 printable bytes, no ','
 * and no '"'. */
static int text_ok(const char *s, size_t cap) {
  const char *end = memchr(s, '\0', cap);
  if (end == NULL || end == s) return 0;
  for (const char *q = s; q < end; q++) {
    unsigned char c = (unsigned char)*q;
    if (c < 0x20 || c > 0x7e || c == ',' || c == '"') return 0;
  }
  return 1;
}

static int day_ok(int32_t d) { return d >= 0 && d <= HG_DAY_MAX; }

/* ------------------------------------------------------------------------ */
/* Lookup                                                                    */
/* ------------------------------------------------------------------------ */

/* Index of id, or of where it would be inserted (with *found = 0). */
static uint32_t instr_pos(const hg_exchange_t *ex, uint32_t id, int *found) {
  uint32_t lo = 0, hi = ex->n_instr;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (ex->instr[mid].id < id) lo = mid + 1;
    else hi = mid;
  }
  *found = lo < ex->n_instr && ex->instr[lo].id == id;
  return lo;
}

static instrument_t *instr_find(const hg_exchange_t *ex, uint32_t id) {
  uint32_t h = hg_idhint_get(&ex->instr_dir, id);
  if (h < ex->n_instr && ex->instr[h].id == id) return &ex->instr[h];
  int found;
  uint32_t i = instr_pos(ex, id, &found);
  return found ? &ex->instr[i] : NULL;
}

/* Refreshes the hints of the instruments at positions [from, n_instr),
 * which an insertion or a removal at from has moved. */
static void instr_dir_refresh(hg_exchange_t *ex, uint32_t from) {
  for (uint32_t i = from; i < ex->n_instr; i++) hg_idhint_set(&ex->instr_dir, ex->instr[i].id, i);
}

static uint32_t acct_pos(const hg_exchange_t *ex, hg_account_t id, int *found) {
  uint32_t lo = 0, hi = ex->n_acct;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (ex->acct[mid].id < id) lo = mid + 1;
    else hi = mid;
  }
  *found = lo < ex->n_acct && ex->acct[lo].id == id;
  return lo;
}

static account_t *acct_find(const hg_exchange_t *ex, hg_account_t id) {
  uint32_t h = hg_idhint_get(&ex->acct_dir, id);
  if (h < ex->n_acct && ex->acct[h].id == id) return &ex->acct[h];
  int found;
  uint32_t i = acct_pos(ex, id, &found);
  return found ? &ex->acct[i] : NULL;
}

static void acct_dir_refresh(hg_exchange_t *ex, uint32_t from) {
  for (uint32_t i = from; i < ex->n_acct; i++) hg_idhint_set(&ex->acct_dir, ex->acct[i].id, i);
}

static int symbol_ok(const char *s, size_t cap) {
  const char *end = memchr(s, '\0', cap);
  if (end == NULL || end == s || (size_t)(end - s) > HG_SYMBOL_MAX) return 0;
  for (const char *p = s; p < end; p++) {
    char c = *p;
    int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
             c == '.' || c == '-' || c == '_';
    if (!ok) return 0;
  }
  return 1;
}

/* ------------------------------------------------------------------------ */
/* Events                                                                    */
/* ------------------------------------------------------------------------ */

static void event_init(const hg_exchange_t *ex, hg_exchange_event_t *ev, uint16_t type) {
  memset(ev, 0, sizeof *ev);
  ev->seq = ex->cur.seq;
  ev->ts = ex->cur.ts;
  ev->type = type;
  ev->command = (uint16_t)ex->cur.type;
}

static void emit_simple(hg_exchange_t *ex, uint16_t type, uint32_t instrument_id,
                        hg_account_t account) {
  hg_exchange_event_t ev;
  event_init(ex, &ev, type);
  ev.instrument_id = instrument_id;
  ev.account = account;
  ex->sink(ex->sink_ctx, &ev);
}

static void emit_reject(hg_exchange_t *ex, uint16_t reason, uint32_t instrument_id,
                        hg_account_t account) {
  hg_exchange_event_t ev;
  event_init(ex, &ev, HG_XEV_REJECTED);
  ev.reason = reason;
  ev.instrument_id = instrument_id;
  ev.account = account;
  ex->sink(ex->sink_ctx, &ev);
}

/* An exchange-level reject of an order command, shaped like the book's own
 * rejects so that the gateway answers every order reject the same way. */
static void emit_order_reject(hg_exchange_t *ex, uint8_t cmd, uint16_t reason,
                              uint32_t instrument_id, hg_account_t account, hg_oid_t order_id,
                              uint64_t client_order_id, uint8_t side, hg_price_t price,
                              hg_qty_t qty, const hg_clearing_result_t *res) {
  hg_exchange_event_t *ev = &ex->rev;
  ev->seq = ex->cur.seq;
  ev->ts = ex->cur.ts;
  ev->type = HG_XEV_BOOK;
  ev->command = (uint16_t)ex->cur.type;
  ev->balance = ev->margin = ev->price = ev->qty = ev->lo = ev->hi = 0;
  if (res != NULL) {
    ev->balance = res->equity;
    ev->margin = res->initial_margin;
    ev->price = res->ref_price;
    ev->qty = res->position;
    if (res->reason == HG_CLR_REJ_PRICE_BAND) {
      ev->lo = res->band_low;
      ev->hi = res->band_high;
    } else if (res->reason == HG_CLR_REJ_POSITION_LIMIT) {
      ev->lo = -res->limit;
      ev->hi = res->limit;
    }
  }
  ev->instrument_id = instrument_id;
  ev->account = account;
  ev->book = (hg_book_event_t){.type = HG_EV_REJECTED,
                               .cmd = cmd,
                               .reason = reason,
                               .instrument_id = instrument_id,
                               .account = account,
                               .order_id = order_id,
                               .client_order_id = client_order_id,
                               .side = side,
                               .price = price,
                               .qty = qty,
                               .ts = ex->cur.ts};
  ex->sink(ex->sink_ctx, ev);
}

/* The clearing's reference price of an instrument and its inclusive price
 * band, in ticks (all 0: no reference; lo and hi 0: the band is off). */
static void ref_band(const hg_exchange_t *ex, uint32_t id, int64_t *ref, int64_t *lo,
                     int64_t *hi) {
  hg_clearing_result_t r;
  *ref = *lo = *hi = 0;
  if (hg_clearing_check_band(ex->clr, id, 0, &r) != 0) return;
  *ref = r.ref_price;
  *lo = r.band_low;
  *hi = r.band_high;
}

/* HG_XEV_REFERENCE of every listed contract of index slot (whose reference
 * follows the index's fixing until a cycle sets its DSP), or of every
 * contract (slot UINT32_MAX). */
static void emit_references(hg_exchange_t *ex, uint32_t slot) {
  for (uint32_t i = 0; i < ex->n_instr; i++) {
    if (slot != UINT32_MAX && ex->instr[i].index != slot) continue;
    hg_exchange_event_t ev;
    event_init(ex, &ev, HG_XEV_REFERENCE);
    ev.instrument_id = ex->instr[i].id;
    ev.group = ex->instr[i].index + 1;
    ref_band(ex, ev.instrument_id, &ev.price, &ev.lo, &ev.hi);
    ex->sink(ex->sink_ctx, &ev);
  }
}

static hg_exchange_receipt_t *rcpt_find(index_t *x, int32_t day, uint32_t *pos);

/* The event carries the counts of the receipt kept with the day's fixing
 * (none for an external value), so that consumers can show them. */
static void emit_fixing(hg_exchange_t *ex, uint32_t slot, const hg_index_fixing_t *f,
                        uint8_t outcome, int64_t inputs) {
  hg_exchange_event_t ev;
  event_init(ex, &ev, HG_XEV_FIXING);
  uint32_t pos;
  const hg_exchange_receipt_t *r = rcpt_find(&ex->idx[slot], f->day, &pos);
  if (r != NULL && r->receipt_tier >= 1 && r->receipt_tier <= 2) {
    const hg_exchange_receipt_tier_t *t = &r->tier[r->receipt_tier - 1];
    ev.lo = t->providers;
    ev.hi = t->hours;
    ev.qty = t->used;
    ev.margin = t->volume;
  }
  ev.group = slot + 1;
  ev.day = f->day;
  ev.price = f->value;
  ev.tier = f->tier;
  ev.status = f->status;
  ev.kind = f->kind;
  ev.outcome = outcome;
  ev.amount = inputs;
  memcpy(ev.index.gpu, ex->idx[slot].gpu, sizeof ev.index.gpu);
  memcpy(ev.index.grade, ex->idx[slot].grade, sizeof ev.index.grade);
  ex->sink(ex->sink_ctx, &ev);
}

/* A settlement command that could not be applied (nothing changed). */
static void emit_failed(hg_exchange_t *ex, int rc, uint32_t instrument_id, int32_t day) {
  hg_exchange_event_t ev;
  event_init(ex, &ev, HG_XEV_REJECTED);
  ev.reason = HG_XREJ_SETTLEMENT_FAILED;
  ev.instrument_id = instrument_id;
  ev.day = day;
  ev.amount = rc;
  ex->sink(ex->sink_ctx, &ev);
}

static void emit_reject_day(hg_exchange_t *ex, uint16_t reason, uint32_t group, int32_t day) {
  hg_exchange_event_t ev;
  event_init(ex, &ev, HG_XEV_REJECTED);
  ev.reason = reason;
  ev.group = group;
  ev.day = day;
  ex->sink(ex->sink_ctx, &ev);
}

/* ------------------------------------------------------------------------ */
/* Indexes (product groups)                                                  */
/* ------------------------------------------------------------------------ */

static int idx_find(const hg_exchange_t *ex, const char *gpu, const char *grade) {
  for (uint32_t i = 0; i < ex->n_idx; i++)
    if (strcmp(ex->idx[i].gpu, gpu) == 0 && strcmp(ex->idx[i].grade, grade) == 0) return (int)i;
  return -1;
}

/* The slot of (gpu, grade), created if new: >= 0, HG_EFULL or -ENOMEM.
 * gpu and grade are valid names. */
static int idx_get(hg_exchange_t *ex, const char *gpu, const char *grade) {
  int i = idx_find(ex, gpu, grade);
  if (i >= 0) return i;
  if (ex->n_idx == ex->cfg.max_indexes) return HG_EFULL;
  index_t *x = &ex->idx[ex->n_idx];
  memset(x, 0, sizeof *x);
  x->fix = calloc(ex->cfg.max_fixing_days, sizeof *x->fix);
  x->rcpt = calloc(ex->cfg.max_fixing_days, sizeof *x->rcpt);
  if (x->fix == NULL || x->rcpt == NULL) {
    free(x->fix);
    free(x->rcpt);
    memset(x, 0, sizeof *x);
    return -ENOMEM;
  }
  hg_index_history_init(&x->hist, x->fix, ex->cfg.max_fixing_days);
  memcpy(x->gpu, gpu, strlen(gpu) + 1);
  memcpy(x->grade, grade, strlen(grade) + 1);
  return (int)ex->n_idx++;
}

/* Tells the clearing the group's latest FINAL fixing (DSP tier 4) and its
 * latest fixing of any status (the reference price before a first DSP), as
 * the history now holds them. Called after every change of the history and
 * after a listing registers the group. "Latest" is by day, whatever order
 * the days were published or finalized in. */
static void idx_push_fixings(hg_exchange_t *ex, uint32_t slot) {
  const hg_index_history_t *h = &ex->idx[slot].hist;
  const hg_index_fixing_t *any = NULL, *fin = NULL;
  for (size_t i = 0; i < h->n; i++) {
    const hg_index_fixing_t *f = &h->rec[i];
    if (f->value <= 0 || f->value > HG_CLR_FIXING_MAX) continue;
    any = f;
    if (f->status == HG_INDEX_FINAL) fin = f;
  }
  /* HG_ENOTFOUND: no contract of this group is registered yet; the listing
   * calls this again. */
  if (fin != NULL) (void)hg_clearing_set_fixing(ex->clr, slot + 1, fin->value, 1);
  if (any != NULL && any != fin) (void)hg_clearing_set_fixing(ex->clr, slot + 1, any->value, 0);
}

static hg_exchange_receipt_t *rcpt_find(index_t *x, int32_t day, uint32_t *pos) {
  uint32_t lo = 0, hi = x->n_rcpt;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (x->rcpt[mid].day < day) lo = mid + 1;
    else hi = mid;
  }
  *pos = lo;
  return lo < x->n_rcpt && x->rcpt[lo].day == day ? &x->rcpt[lo] : NULL;
}

static void rcpt_drop(index_t *x, int32_t day) {
  uint32_t pos;
  if (rcpt_find(x, day, &pos) == NULL) return;
  memmove(&x->rcpt[pos], &x->rcpt[pos + 1], (size_t)(x->n_rcpt - pos - 1) * sizeof *x->rcpt);
  x->n_rcpt--;
}

static void rcpt_store(index_t *x, const hg_index_result_t *res, uint32_t cap) {
  uint32_t pos;
  hg_exchange_receipt_t *r = rcpt_find(x, res->fixing.day, &pos);
  if (r == NULL) {
    if (x->n_rcpt == cap) return; /* cannot happen: one receipt per fixing record */
    memmove(&x->rcpt[pos + 1], &x->rcpt[pos], (size_t)(x->n_rcpt - pos) * sizeof *x->rcpt);
    x->n_rcpt++;
    r = &x->rcpt[pos];
  }
  memset(r, 0, sizeof *r);
  r->day = res->fixing.day;
  r->input_count = res->input_count;
  r->receipt_tier = res->receipt_tier;
  for (int t = 0; t < 2; t++) {
    const hg_index_tier_stats_t *s = &res->tier[t];
    hg_exchange_receipt_tier_t *d = &r->tier[t];
    d->tried = s->tried;
    d->sufficient = s->sufficient;
    d->cap_applied = s->cap_applied;
    d->eligible = s->eligible;
    d->used = s->used;
    d->providers = s->providers;
    d->hours = s->hours;
    d->volume = s->volume;
    d->median = s->median;
    d->mad = s->mad;
    d->cap = s->cap;
    d->value = s->value;
    memcpy(d->reason_count, s->reason_count, sizeof d->reason_count);
  }
}

/* Drops the staged samples of (slot, day); returns how many. */
static uint32_t staged_drop(hg_exchange_t *ex, uint32_t slot, int32_t day) {
  uint32_t w = 0;
  for (uint32_t r = 0; r < ex->n_staged; r++) {
    if (ex->staged[r].index == slot && ex->staged[r].day == day) continue;
    if (w != r) ex->staged[w] = ex->staged[r];
    w++;
  }
  uint32_t dropped = ex->n_staged - w;
  ex->n_staged = w;
  return dropped;
}

/* ------------------------------------------------------------------------ */
/* Clearing on the order path                                                */
/* ------------------------------------------------------------------------ */

static void clr_fault(hg_exchange_t *ex, int rc) {
  if (rc != 0 && ex->fault == 0) ex->fault = rc;
}

/* Whether the book would refuse the order on its own field checks; such an
 * order skips the clearing check so that it gets the book's reject reason. */
static int book_refuses(const hg_book_t *book, const hg_cmd_new_order_t *c, hg_price_t price) {
  const hg_book_params_t *p = hg_book_params(book);
  if (c->side > HG_SIDE_SELL || c->type > HG_ORD_MARKET || c->tif > HG_TIF_FOK ||
      c->stp > HG_STP_NONE || c->post_only > 1)
    return 1;
  if (c->qty <= 0 || c->qty > p->max_order_qty) return 1;
  if (c->type == HG_ORD_LIMIT && (price < p->min_price || price > p->max_price)) return 1;
  return 0;
}

/* Pre-trade check of a new order that passed the exchange checks: margin
 * with every open order and this one (delivery-month rate, spread credit),
 * position limits, band, order size (hg_clearing_check_order). Returns 0 or
 * the hg_clr_reject_t, with the numbers in *res. */
static uint16_t risk_check_new_order(hg_exchange_t *ex, const instrument_t *inst,
                                     const hg_cmd_new_order_t *c, hg_price_t price,
                                     hg_clearing_result_t *res) {
  if (book_refuses(inst->book, c, price)) return 0;
  int rc = hg_clearing_check_order(ex->clr, c->account, inst->id, c->side, c->qty, price, res);
  if (rc != 0) return HG_XREJ_RISK;
  return (uint16_t)res->reason;
}

/* Pre-trade check of a replace. A quantity increase is checked like a new
 * order of the increase at the new price; a decrease or an unchanged
 * quantity only needs the new price inside the band. An order the book does
 * not know is left to the book's UNKNOWN_ORDER reject. */
static uint16_t risk_check_replace(hg_exchange_t *ex, const instrument_t *inst,
                                   const hg_cmd_replace_t *c, hg_clearing_result_t *res) {
  hg_book_order_t o;
  ex->cur.replace_leaves = 0;
  if (hg_book_find(inst->book, c->order_id, c->account, &o) != 0) return 0;
  ex->cur.replace_leaves = o.leaves;
  const hg_book_params_t *p = hg_book_params(inst->book);
  if (c->new_qty <= 0 || c->new_qty > p->max_order_qty || c->new_price < p->min_price ||
      c->new_price > p->max_price)
    return 0; /* the book's reject */
  if (c->new_qty > o.leaves) {
    int rc = hg_clearing_check_order(ex->clr, c->account, inst->id, o.side, c->new_qty - o.leaves,
                                     c->new_price, res);
    if (rc != 0) return HG_XREJ_RISK;
    return (uint16_t)res->reason;
  }
  /* A replace that does not grow the order adds no risk: only the band. */
  if (hg_clearing_check_band(ex->clr, inst->id, c->new_price, res) != 0) return HG_XREJ_RISK;
  return (uint16_t)res->reason;
}

/* Books one fill the book just emitted: both positions, both sides' open
 * quantity (the taker's quantity was made open at ACCEPTED or REPLACED), the
 * day's sums and the DSP window. */
static void book_fill(hg_exchange_t *ex, const hg_book_event_t *f) {
  hg_account_t buyer = f->side == HG_SIDE_BUY ? f->account : f->maker_account;
  hg_account_t seller = f->side == HG_SIDE_BUY ? f->maker_account : f->account;
  clr_fault(ex, hg_clearing_fill(ex->clr, f->instrument_id, buyer, seller, f->qty, f->price,
                                 ex->cur.ts, HG_CLR_FILL_BUY_RESTING | HG_CLR_FILL_SELL_RESTING));
}

/* ------------------------------------------------------------------------ */
/* Book sink                                                                 */
/* ------------------------------------------------------------------------ */

static void book_sink(void *ctx, const hg_book_event_t *bev) {
  hg_exchange_t *ex = ctx;
  switch (bev->type) {
  case HG_EV_ACCEPTED:
    clr_fault(ex, hg_clearing_open_add(ex->clr, bev->account, bev->instrument_id, bev->side,
                                       bev->qty));
    break;
  case HG_EV_FILL: book_fill(ex, bev); break;
  case HG_EV_CANCELLED:
    if (bev->qty > 0)
      clr_fault(ex, hg_clearing_open_remove(ex->clr, bev->account, bev->instrument_id, bev->side,
                                            bev->qty));
    break;
  case HG_EV_REPLACED:
    if (ex->cur.replace_leaves > 0)
      clr_fault(ex, hg_clearing_open_remove(ex->clr, bev->account, bev->instrument_id, bev->side,
                                            ex->cur.replace_leaves));
    if (bev->leaves > 0)
      clr_fault(ex, hg_clearing_open_add(ex->clr, bev->account, bev->instrument_id, bev->side,
                                         bev->leaves));
    ex->cur.replace_leaves = 0;
    break;
  default: break;
  }
  hg_exchange_event_t *ev = &ex->bev;
  ev->seq = ex->cur.seq;
  ev->ts = ex->cur.ts;
  ev->type = HG_XEV_BOOK;
  ev->command = (uint16_t)ex->cur.type;
  ev->instrument_id = bev->instrument_id;
  ev->account = bev->account;
  /* The exchange's books build their events in ev->book already
   * (hg_book_set_event_buffer): copying an event just written would stall on
   * store forwarding. */
  if (bev != &ev->book) ev->book = *bev;
  if (ex->cur.relabel != 0 && bev->type == HG_EV_CANCELLED && bev->reason == HG_CXL_USER)
    ev->book.reason = ex->cur.relabel;
  ex->sink(ex->sink_ctx, ev);
}

/* ------------------------------------------------------------------------ */
/* Create / destroy                                                          */
/* ------------------------------------------------------------------------ */

static void free_indexes(hg_exchange_t *ex) {
  for (uint32_t i = 0; i < ex->n_idx; i++) {
    free(ex->idx[i].fix);
    free(ex->idx[i].rcpt);
  }
  memset(ex->idx, 0, (size_t)ex->cfg.max_indexes * sizeof *ex->idx);
  ex->n_idx = 0;
}

static void free_all(hg_exchange_t *ex) {
  for (uint32_t i = 0; i < ex->n_instr; i++) hg_book_destroy(ex->instr[i].book);
  if (ex->idx != NULL) free_indexes(ex);
  hg_clearing_destroy(ex->clr);
  hg_index_registry_dispose(&ex->reg);
  free(ex->staged);
  free(ex->instr);
  free(ex->acct);
  hg_idhint_free(&ex->instr_dir);
  hg_idhint_free(&ex->acct_dir);
  free(ex->scratch);
  free(ex->tops);
  free(ex->idx);
  free(ex);
}

int hg_exchange_create(const hg_exchange_config_t *cfg, hg_exchange_sink_fn sink, void *sink_ctx,
                       hg_exchange_t **out) {
  if (cfg == NULL || sink == NULL || out == NULL || cfg->max_instruments == 0 ||
      cfg->max_accounts == 0 || cfg->max_book_orders == 0)
    return HG_EINVAL;
  hg_exchange_t *ex = calloc(1, sizeof *ex);
  if (ex == NULL) return -ENOMEM;
  ex->cfg = *cfg;
  ex->cfg.clearing = NULL; /* not kept: only read here */
  if (ex->cfg.max_indexes == 0) ex->cfg.max_indexes = DEFAULT_MAX_INDEXES;
  if (ex->cfg.max_fixing_days == 0) ex->cfg.max_fixing_days = DEFAULT_MAX_FIXING_DAYS;
  if (ex->cfg.max_staged_samples == 0) ex->cfg.max_staged_samples = DEFAULT_MAX_STAGED;
  if (ex->cfg.max_staged_samples > HG_INDEX_SAMPLES_MAX)
    ex->cfg.max_staged_samples = HG_INDEX_SAMPLES_MAX;
  ex->sink = sink;
  ex->sink_ctx = sink_ctx;
  ex->last_cycle_day = -1;
  ex->flags_day = -1;
  hg_index_config_default(&ex->icfg);
  /* Delisted contracts stay registered with the clearing (their ledger and
   * any pending day sums), so it holds more than the listed ones. */
  uint32_t clr_instruments = cfg->max_instruments * 2 + 16;
  if (cfg->clearing != NULL) {
    ex->ccfg = *cfg->clearing;
  } else {
    /* The defaults, with tables no larger than this exchange can fill (the
     * clearing touches every page of them at create): at most one record
     * per (account, instrument), and a ledger that starts small and grows. */
    hg_clearing_config_default(&ex->ccfg);
    uint64_t pairs = (uint64_t)cfg->max_accounts * clr_instruments;
    if (pairs < ex->ccfg.max_positions) ex->ccfg.max_positions = (uint32_t)pairs;
    if (ex->ccfg.ledger_initial > 4096) ex->ccfg.ledger_initial = 4096;
  }
  ex->ccfg.max_accounts = cfg->max_accounts;
  ex->ccfg.max_instruments = clr_instruments;
  if (ex->ccfg.max_groups < ex->cfg.max_indexes) ex->ccfg.max_groups = ex->cfg.max_indexes;
  if (ex->ccfg.max_firms < cfg->max_accounts) ex->ccfg.max_firms = cfg->max_accounts;
  ex->instr = calloc(cfg->max_instruments, sizeof *ex->instr);
  ex->acct = calloc(cfg->max_accounts, sizeof *ex->acct);
  ex->scratch = calloc(cfg->max_book_orders, sizeof *ex->scratch);
  ex->tops = calloc(cfg->max_instruments, sizeof *ex->tops);
  ex->idx = calloc(ex->cfg.max_indexes, sizeof *ex->idx);
  int hints = hg_idhint_init(&ex->instr_dir, cfg->max_instruments) |
              hg_idhint_init(&ex->acct_dir, cfg->max_accounts);
  if (ex->instr == NULL || ex->acct == NULL || ex->scratch == NULL || ex->tops == NULL ||
      ex->idx == NULL || hints != 0) {
    free_all(ex);
    return -ENOMEM;
  }
  int rc = hg_clearing_create(&ex->ccfg, &ex->clr);
  if (rc != 0) {
    ex->clr = NULL;
    free_all(ex);
    return rc == -ENOMEM ? rc : HG_EINVAL;
  }
  *out = ex;
  return 0;
}

/* Back to the just-created state after a failed restore, which never
 * installs its clearing state: the empty one is still in place. */
static void reset(hg_exchange_t *ex) {
  for (uint32_t i = 0; i < ex->n_instr; i++) hg_book_destroy(ex->instr[i].book);
  memset(ex->instr, 0, (size_t)ex->cfg.max_instruments * sizeof *ex->instr);
  memset(ex->acct, 0, (size_t)ex->cfg.max_accounts * sizeof *ex->acct);
  ex->n_instr = 0;
  ex->n_acct = 0;
  free_indexes(ex);
  hg_index_registry_dispose(&ex->reg);
  memset(&ex->reg, 0, sizeof ex->reg);
  ex->n_staged = 0;
  ex->last_seq = 0;
  ex->last_ts = 0;
  ex->sessions = 0;
  ex->last_session_date = 0;
  ex->last_cycle_day = -1;
  ex->flags_day = -1;
  ex->fault = 0;
  memset(&ex->cur, 0, sizeof ex->cur);
}

void hg_exchange_destroy(hg_exchange_t *ex) {
  if (ex == NULL) return;
  free_all(ex);
}

void hg_exchange_set_sink(hg_exchange_t *ex, hg_exchange_sink_fn sink, void *sink_ctx) {
  ex->sink = sink;
  ex->sink_ctx = sink_ctx;
}

/* ------------------------------------------------------------------------ */
/* Commands                                                                  */
/* ------------------------------------------------------------------------ */

static void do_new_order(hg_exchange_t *ex, const hg_cmd_new_order_t *c) {
  hg_oid_t oid = ex->cur.seq;
  /* A market order's price means nothing and is not journaled; zero it so
   * that applying the struct and replaying its encoding emit the same. */
  hg_price_t price = c->type == HG_ORD_MARKET ? 0 : c->price;
  uint16_t rej = 0;
  hg_clearing_result_t res;
  memset(&res, 0, sizeof res);
  instrument_t *inst = instr_find(ex, c->instrument_id);
  if (inst == NULL) rej = HG_XREJ_UNKNOWN_INSTRUMENT;
  else if (inst->halted) rej = HG_XREJ_INSTRUMENT_HALTED;
  else if (ex->cur.ts >= inst->cutoff_ts) rej = HG_XREJ_TRADING_ENDED;
  else if (acct_find(ex, c->account) == NULL) rej = HG_XREJ_UNKNOWN_ACCOUNT;
  else rej = risk_check_new_order(ex, inst, c, price, &res);
  if (rej != 0) {
    emit_order_reject(ex, HG_CMD_NEW, rej, c->instrument_id, c->account, oid, c->client_order_id,
                      c->side, price, c->qty, res.reason != 0 ? &res : NULL);
    return;
  }
  hg_order_new_t o = {
      .order_id = oid,
      .client_order_id = c->client_order_id,
      .account = c->account,
      .smp_group = c->smp_group,
      .price = price,
      .qty = c->qty,
      .side = c->side,
      .type = c->type,
      .tif = c->tif,
      .stp = c->stp,
      .post_only = c->post_only,
      .session_scoped = c->session_scoped != 0,
      .ts = ex->cur.ts,
  };
  hg_book_submit(inst->book, &o);
}

static void do_cancel(hg_exchange_t *ex, const hg_cmd_cancel_t *c) {
  instrument_t *inst = instr_find(ex, c->instrument_id);
  uint16_t rej = 0;
  if (inst == NULL) rej = HG_XREJ_UNKNOWN_INSTRUMENT;
  else if (acct_find(ex, c->account) == NULL) rej = HG_XREJ_UNKNOWN_ACCOUNT;
  if (rej != 0) {
    emit_order_reject(ex, HG_CMD_CANCEL, rej, c->instrument_id, c->account, c->order_id, 0, 0, 0,
                      0, NULL);
    return;
  }
  hg_book_cancel(inst->book, c->order_id, c->account, ex->cur.ts);
}

static void do_replace(hg_exchange_t *ex, const hg_cmd_replace_t *c) {
  instrument_t *inst = instr_find(ex, c->instrument_id);
  uint16_t rej = 0;
  hg_clearing_result_t res;
  memset(&res, 0, sizeof res);
  if (inst == NULL) rej = HG_XREJ_UNKNOWN_INSTRUMENT;
  else if (inst->halted) rej = HG_XREJ_INSTRUMENT_HALTED;
  else if (ex->cur.ts >= inst->cutoff_ts) rej = HG_XREJ_TRADING_ENDED;
  else if (acct_find(ex, c->account) == NULL) rej = HG_XREJ_UNKNOWN_ACCOUNT;
  else rej = risk_check_replace(ex, inst, c, &res);
  if (rej != 0) {
    emit_order_reject(ex, HG_CMD_REPLACE, rej, c->instrument_id, c->account, c->order_id, 0, 0,
                      c->new_price, c->new_qty, res.reason != 0 ? &res : NULL);
    return;
  }
  hg_book_replace(inst->book, c->order_id, c->account, c->new_price, c->new_qty, ex->cur.ts);
  ex->cur.replace_leaves = 0;
}

static void do_mass_cancel(hg_exchange_t *ex, const hg_cmd_mass_cancel_t *c) {
  if (c->sides > HG_SIDES_BOTH) {
    emit_reject(ex, HG_XREJ_INVALID_PARAMS, c->instrument_id, c->account);
    return;
  }
  if (acct_find(ex, c->account) == NULL) {
    emit_reject(ex, HG_XREJ_UNKNOWN_ACCOUNT, c->instrument_id, c->account);
    return;
  }
  if (c->instrument_id != 0) {
    instrument_t *inst = instr_find(ex, c->instrument_id);
    if (inst == NULL) {
      emit_reject(ex, HG_XREJ_UNKNOWN_INSTRUMENT, c->instrument_id, c->account);
      return;
    }
    hg_book_mass_cancel(inst->book, c->account, c->sides, ex->cur.ts);
    return;
  }
  for (uint32_t i = 0; i < ex->n_instr; i++)
    hg_book_mass_cancel(ex->instr[i].book, c->account, c->sides, ex->cur.ts);
}

/* Fills the delivery-month fields of inst from (year, month). */
static void set_month(hg_exchange_t *ex, instrument_t *inst, unsigned year, unsigned month) {
  inst->year = (uint16_t)year;
  inst->month = (uint8_t)month;
  inst->first_day = day_number(year, month, 1);
  inst->last_day = inst->first_day + (int32_t)month_days(year, month) - 1;
  inst->cutoff_ts = (uint64_t)inst->last_day * NS_PER_DAY + ex->ccfg.cycle_time_of_day_ns;
}

static int in_delivery(const instrument_t *inst, int32_t day) {
  return day >= inst->first_day && day <= inst->last_day;
}

/* Sets every listed contract's delivery-month flag in the clearing for UTC
 * day `day`: the 20% rate and the 1,000-contract limit apply from the first
 * second of the month's first calendar day (settlement/CONTRACT.md section
 * 1), whether or not a daily cycle ran the day before. O(contracts), once
 * per day (hg_exchange_apply); a delisted contract keeps its flag until it
 * is listed again (it holds no position and no order: the flag counts for
 * nothing meanwhile). */
static void set_delivery_flags(hg_exchange_t *ex, int32_t day) {
  for (uint32_t i = 0; i < ex->n_instr; i++)
    clr_fault(ex, hg_clearing_set_delivery(ex->clr, ex->instr[i].id,
                                           in_delivery(&ex->instr[i], day)));
  ex->flags_day = day;
}

/*
 * Lists one contract: the checks of LIST_INSTRUMENT, then the book, then the
 * clearing registration (product group = index of (GPU, grade), delivery
 * month from the symbol, the listing's ref_price as its initial price,
 * which ranks after the index: settlement/README.md). Emits HG_XEV_LISTED or
 * one reject; returns 0 or -ENOMEM.
 */
static int list_one(hg_exchange_t *ex, const char *symbol, const hg_book_params_t *params) {
  uint32_t id = params->instrument_id;
  if (id == 0 || !symbol_ok(symbol, HG_SYMBOL_MAX + 1)) {
    emit_reject(ex, HG_XREJ_INVALID_PARAMS, id, 0);
    return 0;
  }
  int found;
  uint32_t pos = instr_pos(ex, id, &found);
  for (uint32_t i = 0; i < ex->n_instr && !found; i++)
    if (strcmp(ex->instr[i].symbol, symbol) == 0) found = 1;
  if (found) {
    emit_reject(ex, HG_XREJ_INSTRUMENT_EXISTS, id, 0);
    return 0;
  }
  if (ex->n_instr == ex->cfg.max_instruments || params->max_orders > ex->cfg.max_book_orders ||
      params->max_accounts > ex->cfg.max_accounts) {
    emit_reject(ex, HG_XREJ_CAPACITY, id, 0);
    return 0;
  }
  char gpu[HG_INDEX_GPU_MAX], grade[HG_INDEX_GRADE_MAX];
  unsigned year, month;
  if (!parse_contract(symbol, gpu, grade, &year, &month) || params->ref_price < 0 ||
      params->ref_price > HG_CLR_PRICE_MAX) {
    emit_reject(ex, HG_XREJ_INVALID_PARAMS, id, 0);
    return 0;
  }
  int slot = idx_get(ex, gpu, grade);
  if (slot == -ENOMEM) return slot;
  if (slot < 0) {
    emit_reject(ex, HG_XREJ_CAPACITY, id, 0);
    return 0;
  }
  /* A delisted contract stays registered with the clearing: relisting its id
   * must name the same contract. */
  hg_clearing_instrument_info_t info;
  int known = hg_clearing_instrument_info(ex->clr, id, &info) == 0;
  if (known && (info.inst.group_id != (uint32_t)slot + 1 || info.inst.year != year ||
                info.inst.month != month || info.settled)) {
    emit_reject(ex, HG_XREJ_INSTRUMENT_EXISTS, id, 0);
    return 0;
  }
  hg_book_t *book = NULL;
  int rc = hg_book_create(params, book_sink, ex, &book);
  if (rc == -ENOMEM) return rc;
  if (rc != 0) {
    emit_reject(ex, HG_XREJ_INVALID_PARAMS, id, 0);
    return 0;
  }
  hg_book_set_event_buffer(book, &ex->bev.book);
  instrument_t tmp;
  memset(&tmp, 0, sizeof tmp);
  set_month(ex, &tmp, year, month);
  if (!known) {
    hg_clearing_instrument_t ci = {.id = id, .group_id = (uint32_t)slot + 1,
                                   .year = (uint16_t)year, .month = (uint8_t)month,
                                   .in_delivery = (uint8_t)in_delivery(&tmp, ts_day(ex->cur.ts)),
                                   .tick_value = 0, .last_dsp = params->ref_price};
    rc = hg_clearing_instrument_add(ex->clr, &ci);
    if (rc != 0) {
      hg_book_destroy(book);
      if (rc == -ENOMEM) return rc;
      emit_reject(ex, rc == HG_EFULL ? HG_XREJ_CAPACITY : HG_XREJ_INVALID_PARAMS, id, 0);
      return 0;
    }
  } else {
    /* Relisted: its flag is the one it had when it was delisted. */
    clr_fault(ex, hg_clearing_set_delivery(ex->clr, id, in_delivery(&tmp, ts_day(ex->cur.ts))));
  }
  memmove(&ex->instr[pos + 1], &ex->instr[pos], (size_t)(ex->n_instr - pos) * sizeof *ex->instr);
  instrument_t *inst = &ex->instr[pos];
  *inst = tmp;
  inst->id = id;
  memcpy(inst->symbol, symbol, strlen(symbol) + 1);
  inst->book = book;
  inst->index = (uint32_t)slot;
  ex->n_instr++;
  instr_dir_refresh(ex, pos);
  idx_push_fixings(ex, (uint32_t)slot);
  hg_exchange_event_t ev;
  event_init(ex, &ev, HG_XEV_LISTED);
  ev.instrument_id = id;
  memcpy(ev.listed.symbol, inst->symbol, sizeof ev.listed.symbol);
  ev.listed.params = *params;
  ref_band(ex, id, &ev.price, &ev.lo, &ev.hi);
  ex->sink(ex->sink_ctx, &ev);
  return 0;
}

static int do_list(hg_exchange_t *ex, const hg_cmd_list_instrument_t *c) {
  if (memchr(c->symbol, '\0', sizeof c->symbol) == NULL) {
    emit_reject(ex, HG_XREJ_INVALID_PARAMS, c->params.instrument_id, 0);
    return 0;
  }
  return list_one(ex, c->symbol, &c->params);
}

static void collect_order(void *ctx, const hg_book_order_t *o) {
  hg_exchange_t *ex = ctx;
  /* A book never holds more than its max_orders, which listing capped at
   * the scratch size; the check keeps a broken invariant from writing past. */
  if (ex->scratch_n < ex->cfg.max_book_orders)
    ex->scratch[ex->scratch_n++] = (order_ref_t){o->order_id, o->account};
}

/* Cancels every resting order of inst in time priority, relabelled with
 * reason; returns how many. */
static uint32_t cancel_all(hg_exchange_t *ex, instrument_t *inst, uint16_t reason) {
  ex->scratch_n = 0;
  hg_book_foreach(inst->book, collect_order, ex);
  ex->cur.relabel = reason;
  for (uint32_t i = 0; i < ex->scratch_n; i++)
    hg_book_cancel(inst->book, ex->scratch[i].order_id, ex->scratch[i].account, ex->cur.ts);
  ex->cur.relabel = 0;
  uint32_t n = ex->scratch_n;
  ex->scratch_n = 0;
  return n;
}

static void remove_instrument(hg_exchange_t *ex, uint32_t pos) {
  hg_book_destroy(ex->instr[pos].book);
  memmove(&ex->instr[pos], &ex->instr[pos + 1],
          (size_t)(ex->n_instr - pos - 1) * sizeof *ex->instr);
  ex->n_instr--;
  memset(&ex->instr[ex->n_instr], 0, sizeof *ex->instr);
  instr_dir_refresh(ex, pos);
}

static void do_delist(hg_exchange_t *ex, uint32_t id) {
  int found;
  uint32_t pos = instr_pos(ex, id, &found);
  if (!found) {
    emit_reject(ex, HG_XREJ_UNKNOWN_INSTRUMENT, id, 0);
    return;
  }
  /* Open positions are closed by expiry and final settlement, never by a
   * delisting. */
  hg_clearing_instrument_info_t info;
  if (hg_clearing_instrument_info(ex->clr, id, &info) != 0 || info.open_interest != 0) {
    emit_reject(ex, HG_XREJ_NOT_IN_STATE, id, 0);
    return;
  }
  uint32_t cancelled = cancel_all(ex, &ex->instr[pos], HG_XCXL_DELISTED);
  remove_instrument(ex, pos);
  hg_exchange_event_t ev;
  event_init(ex, &ev, HG_XEV_DELISTED);
  ev.instrument_id = id;
  ev.amount = cancelled;
  ex->sink(ex->sink_ctx, &ev);
}

static void do_halt(hg_exchange_t *ex, uint32_t id, int halt) {
  instrument_t *inst = instr_find(ex, id);
  if (inst == NULL) {
    emit_reject(ex, HG_XREJ_UNKNOWN_INSTRUMENT, id, 0);
    return;
  }
  if (inst->halted == (halt ? 1 : 0)) {
    emit_reject(ex, HG_XREJ_NOT_IN_STATE, id, 0);
    return;
  }
  inst->halted = halt ? 1 : 0;
  emit_simple(ex, halt ? HG_XEV_HALTED : HG_XEV_RESUMED, id, 0);
}

static int64_t expire_day_orders(hg_exchange_t *ex) {
  int64_t expired = 0;
  for (uint32_t i = 0; i < ex->n_instr; i++)
    expired += hg_book_expire_day(ex->instr[i].book, ex->cur.ts);
  return expired;
}

static void do_end_of_session(hg_exchange_t *ex, const hg_cmd_end_of_session_t *c) {
  int64_t expired = expire_day_orders(ex);
  ex->sessions++;
  ex->last_session_date = c->session_date;
  hg_exchange_event_t ev;
  event_init(ex, &ev, HG_XEV_SESSION_END);
  ev.amount = expired;
  ex->sink(ex->sink_ctx, &ev);
}

/* The sessions that entered the session-scoped orders are gone (a restart):
 * their orders go, book by book in instrument id order. */
static void do_sessions_ended(hg_exchange_t *ex) {
  int64_t cancelled = 0;
  for (uint32_t i = 0; i < ex->n_instr; i++)
    cancelled += hg_book_cancel_scoped(ex->instr[i].book, ex->cur.ts);
  hg_exchange_event_t ev;
  event_init(ex, &ev, HG_XEV_SESSIONS_ENDED);
  ev.amount = cancelled;
  ex->sink(ex->sink_ctx, &ev);
}

static int do_add_account(hg_exchange_t *ex, const hg_cmd_add_account_t *c) {
  if (c->account == 0 || c->firm == 0) {
    emit_reject(ex, HG_XREJ_INVALID_PARAMS, 0, c->account);
    return 0;
  }
  int found;
  uint32_t pos = acct_pos(ex, c->account, &found);
  if (found) {
    emit_reject(ex, HG_XREJ_ACCOUNT_EXISTS, 0, c->account);
    return 0;
  }
  if (ex->n_acct == ex->cfg.max_accounts) {
    emit_reject(ex, HG_XREJ_CAPACITY, 0, c->account);
    return 0;
  }
  int rc = hg_clearing_account_add(ex->clr, c->account, c->firm);
  if (rc == -ENOMEM) return rc;
  if (rc != 0) {
    emit_reject(ex, rc == HG_EFULL ? HG_XREJ_CAPACITY : HG_XREJ_ACCOUNT_EXISTS, 0, c->account);
    return 0;
  }
  memmove(&ex->acct[pos + 1], &ex->acct[pos], (size_t)(ex->n_acct - pos) * sizeof *ex->acct);
  ex->acct[pos] = (account_t){.id = c->account, .firm = c->firm};
  ex->n_acct++;
  acct_dir_refresh(ex, pos);
  hg_exchange_event_t ev;
  event_init(ex, &ev, HG_XEV_ACCOUNT_ADDED);
  ev.account = c->account;
  ev.firm = c->firm;
  ex->sink(ex->sink_ctx, &ev);
  return 0;
}

static int64_t cash_of(const hg_exchange_t *ex, hg_account_t id) {
  hg_clearing_account_info_t info;
  if (hg_clearing_account_info(ex->clr, id, &info) != 0) return 0;
  return info.balance;
}

static void do_cash(hg_exchange_t *ex, const hg_cmd_cash_t *c, int deposit) {
  account_t *acct = acct_find(ex, c->account);
  uint16_t rej = 0;
  hg_clearing_result_t res;
  memset(&res, 0, sizeof res);
  if (acct == NULL) rej = HG_XREJ_UNKNOWN_ACCOUNT;
  else if (c->amount <= 0) rej = HG_XREJ_INVALID_AMOUNT;
  else if (deposit) {
    int rc = hg_clearing_deposit(ex->clr, c->account, c->amount, ex->cur.seq, ex->cur.ts);
    if (rc == HG_EOVERFLOW) rej = HG_XREJ_INVALID_AMOUNT;
    else if (rc != 0) rej = HG_XREJ_CAPACITY;
  } else {
    int rc = hg_clearing_withdraw(ex->clr, c->account, c->amount, ex->cur.seq, ex->cur.ts, &res);
    if (rc != 0) rej = HG_XREJ_CAPACITY;
    else if (res.reason == HG_CLR_REJ_INSUFFICIENT_MARGIN) rej = HG_XREJ_INSUFFICIENT_FUNDS;
    else if (res.reason != HG_CLR_REJ_NONE) rej = HG_XREJ_INVALID_AMOUNT;
  }
  hg_exchange_event_t ev;
  if (rej != 0) {
    event_init(ex, &ev, HG_XEV_REJECTED);
    ev.reason = rej;
    ev.account = c->account;
    ev.amount = c->amount;
    ev.balance = acct != NULL ? cash_of(ex, c->account) : 0;
    ev.margin = res.initial_margin;
    ex->sink(ex->sink_ctx, &ev);
    return;
  }
  event_init(ex, &ev, deposit ? HG_XEV_DEPOSIT : HG_XEV_WITHDRAWAL);
  ev.account = c->account;
  ev.firm = acct->firm;
  ev.amount = c->amount;
  ev.balance = cash_of(ex, c->account);
  ex->sink(ex->sink_ctx, &ev);
}

/* ------------------------------------------------------------------------ */
/* Settlement commands                                                       */
/* ------------------------------------------------------------------------ */

static int index_day_ok(const char *gpu, const char *grade, int32_t day) {
  return name_ok(gpu, HG_INDEX_GPU_MAX) && name_ok(grade, HG_INDEX_GRADE_MAX) && day_ok(day);
}

static int do_provider_grade(hg_exchange_t *ex, const hg_cmd_provider_grade_t *c) {
  if (!text_ok(c->provider, sizeof c->provider) || !name_ok(c->gpu, sizeof c->gpu) ||
      !name_ok(c->grade, sizeof c->grade) || !day_ok(c->effective_day)) {
    emit_reject_day(ex, HG_XREJ_INVALID_PARAMS, 0, c->effective_day);
    return 0;
  }
  /* A change applies from its effective date on and never rewrites past
   * fixings: it must start after the last day any index of that GPU has a
   * fixing for (a later restatement of such a day would otherwise see it). */
  for (uint32_t i = 0; i < ex->n_idx; i++) {
    const hg_index_history_t *h = &ex->idx[i].hist;
    if (strcmp(ex->idx[i].gpu, c->gpu) == 0 && h->n > 0 &&
        h->rec[h->n - 1].day >= c->effective_day) {
      emit_reject_day(ex, HG_XREJ_NOT_IN_STATE, i + 1, c->effective_day);
      return 0;
    }
  }
  int rc = hg_index_registry_add(&ex->reg, c->provider, c->gpu, c->grade, c->effective_day);
  if (rc == -ENOMEM) return rc;
  if (rc != 0) {
    emit_reject_day(ex, HG_XREJ_INVALID_PARAMS, 0, c->effective_day);
    return 0;
  }
  hg_exchange_event_t ev;
  event_init(ex, &ev, HG_XEV_GRADE_SET);
  ev.day = c->effective_day;
  ex->sink(ex->sink_ctx, &ev);
  return 0;
}

static int sample_ok(const hg_index_sample_t *s) {
  return text_ok(s->provider, sizeof s->provider) && text_ok(s->region, sizeof s->region) &&
         text_ok(s->gpu, sizeof s->gpu) && text_ok(s->grade, sizeof s->grade) &&
         (s->kind == HG_INDEX_TRADE || s->kind == HG_INDEX_QUOTE) &&
         s->volume <= HG_INDEX_VOLUME_MAX;
}

/* Whether (slot, day) holds a FINAL fixing. */
static int is_final(const hg_exchange_t *ex, uint32_t slot, int32_t day) {
  const hg_index_fixing_t *f = hg_index_history_get(&ex->idx[slot].hist, day);
  return f != NULL && f->status == HG_INDEX_FINAL;
}

/* The index of (gpu, grade), added if new, for a command that would change
 * day's fixing: the slot (>= 0); -ENOMEM; or -1 once the reject is emitted
 * (no room for another index, or the day's fixing is FINAL). */
static int idx_open_day(hg_exchange_t *ex, const char *gpu, const char *grade, int32_t day) {
  int slot = idx_get(ex, gpu, grade);
  if (slot == -ENOMEM) return slot;
  if (slot < 0) {
    emit_reject_day(ex, HG_XREJ_CAPACITY, 0, day);
    return -1;
  }
  if (is_final(ex, (uint32_t)slot, day)) {
    emit_reject_day(ex, HG_XREJ_FIXING_FINAL, (uint32_t)slot + 1, day);
    return -1;
  }
  return slot;
}

static int do_samples(hg_exchange_t *ex, const hg_cmd_samples_t *c) {
  int ok = index_day_ok(c->gpu, c->grade, c->day) && c->n >= 1 && c->n <= HG_SAMPLES_PER_COMMAND;
  for (uint32_t i = 0; ok && i < c->n; i++) ok = sample_ok(&c->s[i]);
  if (!ok) {
    emit_reject_day(ex, HG_XREJ_INVALID_PARAMS, 0, c->day);
    return 0;
  }
  int slot = idx_open_day(ex, c->gpu, c->grade, c->day);
  if (slot < 0) return slot == -ENOMEM ? slot : 0;
  if (c->n > ex->cfg.max_staged_samples - ex->n_staged) {
    emit_reject_day(ex, HG_XREJ_CAPACITY, (uint32_t)slot + 1, c->day);
    return 0;
  }
  if (ex->n_staged + c->n > ex->cap_staged) {
    uint64_t cap = ex->cap_staged ? (uint64_t)ex->cap_staged * 2 : 1024;
    if (cap > ex->cfg.max_staged_samples) cap = ex->cfg.max_staged_samples;
    staged_t *p = realloc(ex->staged, (size_t)cap * sizeof *p);
    if (p == NULL) return -ENOMEM;
    ex->staged = p;
    ex->cap_staged = (uint32_t)cap;
  }
  for (uint32_t i = 0; i < c->n; i++) {
    staged_t *d = &ex->staged[ex->n_staged++];
    memset(d, 0, sizeof *d);
    d->index = (uint32_t)slot;
    d->day = c->day;
    d->s = c->s[i];
  }
  hg_exchange_event_t ev;
  event_init(ex, &ev, HG_XEV_SAMPLES);
  ev.group = (uint32_t)slot + 1;
  ev.day = c->day;
  ev.amount = c->n;
  ev.balance = ex->n_staged;
  ex->sink(ex->sink_ctx, &ev);
  return 0;
}

static void do_discard(hg_exchange_t *ex, const hg_cmd_index_day_t *c) {
  if (!index_day_ok(c->gpu, c->grade, c->day)) {
    emit_reject_day(ex, HG_XREJ_INVALID_PARAMS, 0, c->day);
    return;
  }
  int slot = idx_find(ex, c->gpu, c->grade);
  hg_exchange_event_t ev;
  event_init(ex, &ev, HG_XEV_SAMPLES_DISCARDED);
  ev.group = slot >= 0 ? (uint32_t)slot + 1 : 0;
  ev.day = c->day;
  ev.amount = slot >= 0 ? staged_drop(ex, (uint32_t)slot, c->day) : 0;
  ex->sink(ex->sink_ctx, &ev);
}

static int do_compute(hg_exchange_t *ex, const hg_cmd_index_day_t *c) {
  if (!index_day_ok(c->gpu, c->grade, c->day)) {
    emit_reject_day(ex, HG_XREJ_INVALID_PARAMS, 0, c->day);
    return 0;
  }
  int slot = idx_open_day(ex, c->gpu, c->grade, c->day);
  if (slot < 0) return slot == -ENOMEM ? slot : 0;
  index_t *x = &ex->idx[slot];
  size_t n = 0;
  for (uint32_t i = 0; i < ex->n_staged; i++)
    if (ex->staged[i].index == (uint32_t)slot && ex->staged[i].day == c->day) n++;
  hg_index_sample_t *in = malloc((n ? n : 1) * sizeof *in);
  if (in == NULL) return -ENOMEM;
  n = 0;
  for (uint32_t i = 0; i < ex->n_staged; i++)
    if (ex->staged[i].index == (uint32_t)slot && ex->staged[i].day == c->day)
      in[n++] = ex->staged[i].s;
  hg_index_result_t res;
  int rc = hg_index_fix(&ex->icfg, &ex->reg, &x->hist, x->gpu, x->grade, c->day, in, n, &res);
  free(in);
  if (rc == -ENOMEM) return rc;
  if (rc != 0) {
    emit_failed(ex, rc, 0, c->day);
    return 0;
  }
  int outcome = 0;
  rc = hg_index_history_publish(&x->hist, &ex->icfg, &res.fixing, &outcome);
  if (rc != 0) {
    hg_index_result_dispose(&res);
    emit_reject_day(ex, rc == HG_EFULL ? HG_XREJ_CAPACITY : HG_XREJ_SETTLEMENT_FAILED,
                    (uint32_t)slot + 1, c->day);
    return 0;
  }
  if (outcome != HG_INDEX_UNCHANGED) rcpt_store(x, &res, ex->cfg.max_fixing_days);
  int64_t inputs = res.input_count;
  hg_index_result_dispose(&res);
  staged_drop(ex, (uint32_t)slot, c->day);
  idx_push_fixings(ex, (uint32_t)slot);
  emit_fixing(ex, (uint32_t)slot, hg_index_history_get(&x->hist, c->day), (uint8_t)outcome,
              inputs);
  emit_references(ex, (uint32_t)slot);
  return 0;
}

static int do_publish_fixing(hg_exchange_t *ex, const hg_cmd_publish_fixing_t *c) {
  if (!index_day_ok(c->gpu, c->grade, c->day) || !text_ok(c->source, sizeof c->source)) {
    emit_reject_day(ex, HG_XREJ_INVALID_PARAMS, 0, c->day);
    return 0;
  }
  if (c->value <= 0 || c->value > HG_CLR_FIXING_MAX) {
    emit_reject_day(ex, HG_XREJ_INVALID_AMOUNT, 0, c->day);
    return 0;
  }
  int slot = idx_open_day(ex, c->gpu, c->grade, c->day);
  if (slot < 0) return slot == -ENOMEM ? slot : 0;
  index_t *x = &ex->idx[slot];
  hg_index_fixing_t f;
  int outcome = 0;
  int rc = hg_index_fixing_external(c->day, c->value, c->source, &f);
  if (rc == 0) rc = hg_index_history_publish(&x->hist, &ex->icfg, &f, &outcome);
  if (rc != 0) {
    emit_reject_day(ex, rc == HG_EFULL ? HG_XREJ_CAPACITY : HG_XREJ_SETTLEMENT_FAILED,
                    (uint32_t)slot + 1, c->day);
    return 0;
  }
  if (outcome != HG_INDEX_UNCHANGED) rcpt_drop(x, c->day);
  idx_push_fixings(ex, (uint32_t)slot);
  emit_fixing(ex, (uint32_t)slot, hg_index_history_get(&x->hist, c->day), (uint8_t)outcome, 0);
  emit_references(ex, (uint32_t)slot);
  return 0;
}

static void do_finalize(hg_exchange_t *ex, const hg_cmd_index_day_t *c) {
  if (!index_day_ok(c->gpu, c->grade, c->day)) {
    emit_reject_day(ex, HG_XREJ_INVALID_PARAMS, 0, c->day);
    return;
  }
  int slot = idx_find(ex, c->gpu, c->grade);
  if (slot < 0) {
    emit_reject_day(ex, HG_XREJ_NO_FIXING, 0, c->day);
    return;
  }
  index_t *x = &ex->idx[slot];
  int rc = hg_index_history_finalize(&x->hist, c->day);
  if (rc != 0) {
    emit_reject_day(ex, rc == HG_ENOTFOUND ? HG_XREJ_NO_FIXING : HG_XREJ_NOT_IN_STATE,
                    (uint32_t)slot + 1, c->day);
    return;
  }
  staged_drop(ex, (uint32_t)slot, c->day); /* can no longer change anything */
  idx_push_fixings(ex, (uint32_t)slot);
  emit_fixing(ex, (uint32_t)slot, hg_index_history_get(&x->hist, c->day), HG_XFIX_FINALIZED, 0);
  emit_references(ex, (uint32_t)slot);
}

/* Emits one event per ledger entry posted since `from` (VM or FINAL);
 * returns their sum. */
static int64_t emit_ledger(hg_exchange_t *ex, uint64_t from, uint16_t type, int32_t day) {
  int64_t sum = 0;
  uint64_t to = hg_clearing_ledger_size(ex->clr);
  for (uint64_t i = from; i < to; i++) {
    hg_ledger_entry_t e;
    if (hg_clearing_ledger_get(ex->clr, i, &e) != 0) continue;
    const account_t *a = acct_find(ex, e.account);
    hg_exchange_event_t ev;
    event_init(ex, &ev, type);
    ev.account = e.account;
    ev.firm = a != NULL ? a->firm : 0;
    ev.instrument_id = e.instrument;
    ev.amount = e.amount;
    ev.balance = e.balance;
    ev.price = e.price;
    ev.qty = e.qty;
    ev.day = day;
    ex->sink(ex->sink_ctx, &ev);
    sum += e.amount;
  }
  return sum;
}

static int do_daily(hg_exchange_t *ex, const hg_cmd_daily_settlement_t *c) {
  if (!day_ok(c->day)) {
    emit_reject_day(ex, HG_XREJ_INVALID_PARAMS, 0, c->day);
    return 0;
  }
  uint64_t cycle_ts = (uint64_t)c->day * NS_PER_DAY + ex->ccfg.cycle_time_of_day_ns;
  /* One cycle per day, in day order, never before its 16:00. */
  if (c->day <= ex->last_cycle_day) {
    emit_reject_day(ex, HG_XREJ_ALREADY_SETTLED, 0, c->day);
    return 0;
  }
  if (ex->cur.ts < cycle_ts) {
    emit_reject_day(ex, HG_XREJ_NOT_IN_STATE, 0, c->day);
    return 0;
  }
  for (uint32_t i = 0; i < ex->n_instr; i++) {
    hg_clearing_top_t *t = &ex->tops[i];
    hg_qty_t q;
    t->instrument = ex->instr[i].id;
    if (hg_book_best(ex->instr[i].book, HG_SIDE_BUY, &t->best_bid, &q) != 0) t->best_bid = 0;
    if (hg_book_best(ex->instr[i].book, HG_SIDE_SELL, &t->best_ask, &q) != 0) t->best_ask = 0;
  }
  uint64_t before = hg_clearing_ledger_size(ex->clr);
  hg_clearing_cycle_report_t rep;
  int rc = hg_clearing_daily_cycle(ex->clr, ex->cur.seq, cycle_ts, ex->tops, ex->n_instr, &rep);
  if (rc == -ENOMEM) return rc;
  if (rc != 0) {
    emit_failed(ex, rc, 0, c->day);
    return 0;
  }
  for (uint32_t i = 0; i < ex->n_instr; i++) {
    hg_clearing_instrument_info_t info;
    if (hg_clearing_instrument_info(ex->clr, ex->instr[i].id, &info) != 0) continue;
    hg_exchange_event_t ev;
    event_init(ex, &ev, HG_XEV_DSP);
    ev.instrument_id = ex->instr[i].id;
    ev.group = ex->instr[i].index + 1;
    ev.day = c->day;
    ev.price = info.inst.last_dsp;
    ev.tier = (uint8_t)(info.inst.last_dsp != 0 ? info.last_dsp_tier : HG_DSP_TIER_NONE);
    ex->sink(ex->sink_ctx, &ev);
  }
  emit_references(ex, UINT32_MAX); /* the DSPs are the new references */
  int64_t vm_sum = emit_ledger(ex, before, HG_XEV_VM, c->day);
  if (vm_sum != 0 || rep.vm_paid + rep.vm_received != 0) clr_fault(ex, HG_ECORRUPT);
  int64_t expired = expire_day_orders(ex);
  /* Trading has ended for the contracts whose last trading day this is:
   * what still rests can never trade and stops counting for margin. */
  for (uint32_t i = 0; i < ex->n_instr; i++)
    if (ex->instr[i].last_day <= c->day) expired += cancel_all(ex, &ex->instr[i], HG_XCXL_EXPIRED);
  ex->last_cycle_day = c->day;
  hg_exchange_event_t ev;
  event_init(ex, &ev, HG_XEV_CYCLE);
  ev.day = c->day;
  ev.amount = vm_sum;
  ev.lo = rep.vm_paid;
  ev.hi = rep.vm_received;
  ev.qty = expired;
  ev.balance = (int64_t)rep.entries_posted;
  ex->sink(ex->sink_ctx, &ev);
  return 0;
}

static void next_month(uint16_t *y, uint8_t *m) {
  if (*m == 12) {
    *m = 1;
    (*y)++;
  } else {
    (*m)++;
  }
}

static hg_book_params_t curve_params(const index_t *x, uint32_t id) {
  return (hg_book_params_t){.instrument_id = id, .tick_size = HG_INDEX_TICK_MICRO_USD,
                            .contract_unit = 1000, .min_price = 1,
                            .max_price = CURVE_MAX_PRICE, .max_order_qty = CURVE_MAX_ORDER_QTY,
                            .ref_price = x->curve_ref, .band_bps = 0,
                            .max_orders = x->curve_max_orders,
                            .max_accounts = x->curve_max_accounts, .default_stp = 0};
}

static void contract_symbol(const index_t *x, unsigned y, unsigned m, char out[HG_SYMBOL_MAX + 1]) {
  /* gpu <= 15, grade <= 7 bytes: at most 31 with the separators */
  size_t gl = strlen(x->gpu), rl = strlen(x->grade);
  memcpy(out, x->gpu, gl);
  out[gl] = '.';
  memcpy(out + gl + 1, x->grade, rl);
  char *p = out + gl + 1 + rl;
  *p++ = '.';
  *p++ = (char)('0' + y / 1000 % 10);
  *p++ = (char)('0' + y / 100 % 10);
  *p++ = (char)('0' + y / 10 % 10);
  *p++ = (char)('0' + y % 10);
  *p++ = '-';
  *p++ = (char)('0' + m / 10);
  *p++ = (char)('0' + m % 10);
  *p = '\0';
}

/* Lists the curve's next month (after an expiry). */
static int roll_curve(hg_exchange_t *ex, uint32_t slot) {
  index_t *x = &ex->idx[slot];
  if (!x->has_curve) return 0;
  char sym[HG_SYMBOL_MAX + 1];
  contract_symbol(x, x->next_year, x->next_month, sym);
  hg_book_params_t p = curve_params(x, x->next_id);
  int rc = list_one(ex, sym, &p);
  if (rc != 0) return rc;
  if (instr_find(ex, p.instrument_id) != NULL) {
    next_month(&x->next_year, &x->next_month);
    x->next_id++;
  }
  return 0;
}

static int do_list_curve(hg_exchange_t *ex, const hg_cmd_list_curve_t *c) {
  uint32_t first = c->first_instrument_id;
  if (!name_ok(c->gpu, sizeof c->gpu) || !name_ok(c->grade, sizeof c->grade) || c->year < 1970 ||
      c->year > 9998 || c->month < 1 || c->month > 12 || first == 0 ||
      first > UINT32_MAX - 2 * CURVE_MONTHS || c->max_orders == 0 || c->max_accounts == 0 ||
      c->ref_price < 0 || c->ref_price > CURVE_MAX_PRICE) {
    emit_reject(ex, HG_XREJ_INVALID_PARAMS, first, 0);
    return 0;
  }
  if (c->max_orders > ex->cfg.max_book_orders || c->max_accounts > ex->cfg.max_accounts ||
      ex->n_instr + CURVE_MONTHS > ex->cfg.max_instruments) {
    emit_reject(ex, HG_XREJ_CAPACITY, first, 0);
    return 0;
  }
  int slot = idx_get(ex, c->gpu, c->grade);
  if (slot == -ENOMEM) return slot;
  if (slot < 0) {
    emit_reject(ex, HG_XREJ_CAPACITY, first, 0);
    return 0;
  }
  index_t *x = &ex->idx[slot];
  /* All twelve or none: every id and symbol must be free first. */
  uint16_t y = c->year;
  uint8_t m = c->month;
  for (uint32_t k = 0; k < CURVE_MONTHS; k++) {
    char sym[HG_SYMBOL_MAX + 1];
    contract_symbol(x, y, m, sym);
    int clash = x->has_curve || instr_find(ex, first + k) != NULL;
    for (uint32_t i = 0; i < ex->n_instr && !clash; i++)
      if (strcmp(ex->instr[i].symbol, sym) == 0) clash = 1;
    hg_clearing_instrument_info_t info;
    if (!clash && hg_clearing_instrument_info(ex->clr, first + k, &info) == 0)
      clash = info.inst.group_id != (uint32_t)slot + 1 || info.inst.year != y ||
              info.inst.month != m || info.settled;
    if (clash) {
      emit_reject(ex, HG_XREJ_INSTRUMENT_EXISTS, first + k, 0);
      return 0;
    }
    next_month(&y, &m);
  }
  x->has_curve = 1;
  x->curve_max_orders = c->max_orders;
  x->curve_max_accounts = c->max_accounts;
  x->curve_ref = c->ref_price;
  x->next_year = c->year;
  x->next_month = c->month;
  x->next_id = first;
  for (uint32_t k = 0; k < CURVE_MONTHS; k++) {
    int rc = roll_curve(ex, (uint32_t)slot);
    if (rc != 0) return rc;
  }
  return 0;
}

static int do_expire(hg_exchange_t *ex, const hg_cmd_expire_t *c) {
  int found;
  uint32_t pos = instr_pos(ex, c->instrument_id, &found);
  if (!found) {
    emit_reject(ex, HG_XREJ_UNKNOWN_INSTRUMENT, c->instrument_id, 0);
    return 0;
  }
  instrument_t *inst = &ex->instr[pos];
  uint32_t slot = inst->index;
  hg_clearing_instrument_info_t info;
  /* Trading must be over: the cycle of the last trading day has run. */
  if (ex->last_cycle_day < inst->last_day ||
      hg_clearing_instrument_info(ex->clr, inst->id, &info) != 0 || info.inst.last_dsp == 0) {
    emit_reject(ex, HG_XREJ_NOT_IN_STATE, inst->id, 0);
    return 0;
  }
  hg_clearing_fixing_t fx[31];
  size_t n = 0;
  for (int32_t d = inst->first_day; d <= inst->last_day; d++) {
    const hg_index_fixing_t *f = hg_index_history_get(&ex->idx[slot].hist, d);
    if (f == NULL) continue;
    fx[n].day = (uint8_t)(d - inst->first_day + 1);
    fx[n].status = f->status == HG_INDEX_FINAL         ? HG_CLR_FIX_FINAL
                   : f->status == HG_INDEX_PROVISIONAL ? HG_CLR_FIX_PROVISIONAL
                                                       : HG_CLR_FIX_NO_FIX;
    fx[n].value = f->value;
    n++;
  }
  hg_clearing_fsp_t fsp;
  int rc = hg_clearing_fsp(inst->year, inst->month, fx, n, &fsp);
  if (rc == HG_ESTATE) {
    int64_t bitmap = 0;
    for (uint32_t i = 0; i < fsp.n_missing; i++) {
      hg_exchange_event_t ev;
      event_init(ex, &ev, HG_XEV_FIXING_MISSING);
      ev.instrument_id = inst->id;
      ev.group = slot + 1;
      ev.day = inst->first_day + fsp.missing_day[i] - 1;
      ev.status = fsp.missing_status[i];
      ex->sink(ex->sink_ctx, &ev);
      bitmap |= (int64_t)1 << (fsp.missing_day[i] - 1);
    }
    hg_exchange_event_t ev;
    event_init(ex, &ev, HG_XEV_REJECTED);
    ev.reason = HG_XREJ_FIXINGS_MISSING;
    ev.instrument_id = inst->id;
    ev.group = slot + 1;
    ev.amount = fsp.n_missing;
    ev.balance = bitmap;
    ex->sink(ex->sink_ctx, &ev);
    return 0;
  }
  if (rc != 0) {
    emit_failed(ex, rc, inst->id, 0);
    return 0;
  }
  /* Orders were cancelled at the last trading day's cycle; a resting order
   * could only be left by a listing after that cycle. */
  uint32_t cancelled = cancel_all(ex, inst, HG_XCXL_EXPIRED);
  uint64_t before = hg_clearing_ledger_size(ex->clr);
  rc = hg_clearing_final_settle(ex->clr, inst->id, fsp.fsp, ex->cur.seq, ex->cur.ts);
  if (rc == -ENOMEM) return rc;
  if (rc != 0) {
    emit_failed(ex, rc, inst->id, 0);
    return 0;
  }
  int64_t sum = emit_ledger(ex, before, HG_XEV_FINAL_SETTLEMENT, ts_day(ex->cur.ts));
  if (sum != 0) clr_fault(ex, HG_ECORRUPT);
  uint64_t payments = hg_clearing_ledger_size(ex->clr) - before;
  clr_fault(ex, hg_clearing_instrument_remove(ex->clr, inst->id));
  uint32_t id = inst->id;
  remove_instrument(ex, pos);
  hg_exchange_event_t ev;
  event_init(ex, &ev, HG_XEV_EXPIRED);
  ev.instrument_id = id;
  ev.group = slot + 1;
  ev.price = fsp.fsp;
  ev.amount = (int64_t)payments;
  ev.qty = cancelled;
  ex->sink(ex->sink_ctx, &ev);
  return roll_curve(ex, slot);
}

void hg_exchange_prefetch(const hg_exchange_t *ex, const hg_command_t *cmd, int stage) {
  uint32_t instrument_id;
  hg_oid_t oid;
  switch (cmd->type) {
  case HG_COMMAND_NEW_ORDER: instrument_id = cmd->u.new_order.instrument_id; oid = cmd->seq; break;
  case HG_COMMAND_CANCEL: instrument_id = cmd->u.cancel.instrument_id; oid = cmd->u.cancel.order_id; break;
  case HG_COMMAND_REPLACE:
    instrument_id = cmd->u.replace.instrument_id;
    oid = cmd->u.replace.order_id;
    break;
  default: return;
  }
  const instrument_t *in = instr_find(ex, instrument_id);
  if (in == NULL || in->book == NULL) return;
  if (stage == 0) {
    hg_book_prefetch_order(in->book, oid);
  } else if (cmd->type == HG_COMMAND_NEW_ORDER) {
    hg_clearing_prefetch_account(ex->clr, cmd->u.new_order.account);
    const hg_cmd_new_order_t *c = &cmd->u.new_order;
    hg_order_new_t o = {.order_id = oid, .account = c->account, .price = c->price,
                        .qty = c->qty, .side = c->side, .type = c->type, .tif = c->tif};
    hg_book_prefetch_new(in->book, &o);
  } else {
    hg_book_prefetch_links(in->book, oid);
  }
}

int hg_exchange_apply(hg_exchange_t *ex, const hg_command_t *cmd) {
  if (cmd->seq == 0 || cmd->seq <= ex->last_seq) return HG_ESTATE;
  if (cmd->type < HG_COMMAND_NEW_ORDER || cmd->type > HG_COMMAND_LAST ||
      (cmd->type > HG_COMMAND_LAST_SETTLEMENT && cmd->type < HG_COMMAND_SESSIONS_ENDED))
    return HG_EINVAL;
  if (ex->fault != 0) return HG_ECORRUPT;
  ex->cur = (current_t){.seq = cmd->seq, .ts = cmd->ts, .type = cmd->type};
  /* The delivery-month flags follow the command's own UTC date, so every
   * check of this command (orders, replaces, withdrawals) sees the month it
   * is stamped in. */
  int32_t day = ts_day(cmd->ts);
  int flags_moved = day != ex->flags_day;
  if (flags_moved) set_delivery_flags(ex, day);
  int rc = 0;
  switch ((hg_command_type_t)cmd->type) {
  case HG_COMMAND_NEW_ORDER: do_new_order(ex, &cmd->u.new_order); break;
  case HG_COMMAND_CANCEL: do_cancel(ex, &cmd->u.cancel); break;
  case HG_COMMAND_REPLACE: do_replace(ex, &cmd->u.replace); break;
  case HG_COMMAND_MASS_CANCEL: do_mass_cancel(ex, &cmd->u.mass_cancel); break;
  case HG_COMMAND_LIST_INSTRUMENT: rc = do_list(ex, &cmd->u.list); break;
  case HG_COMMAND_DELIST_INSTRUMENT: do_delist(ex, cmd->u.instrument.instrument_id); break;
  case HG_COMMAND_HALT: do_halt(ex, cmd->u.instrument.instrument_id, 1); break;
  case HG_COMMAND_RESUME: do_halt(ex, cmd->u.instrument.instrument_id, 0); break;
  case HG_COMMAND_END_OF_SESSION: do_end_of_session(ex, &cmd->u.end_of_session); break;
  case HG_COMMAND_ADD_ACCOUNT: rc = do_add_account(ex, &cmd->u.add_account); break;
  case HG_COMMAND_DEPOSIT: do_cash(ex, &cmd->u.cash, 1); break;
  case HG_COMMAND_WITHDRAW: do_cash(ex, &cmd->u.cash, 0); break;
  case HG_COMMAND_SET_PROVIDER_GRADE: rc = do_provider_grade(ex, &cmd->u.provider_grade); break;
  case HG_COMMAND_PUBLISH_SAMPLES: rc = do_samples(ex, &cmd->u.samples); break;
  case HG_COMMAND_DISCARD_SAMPLES: do_discard(ex, &cmd->u.index_day); break;
  case HG_COMMAND_COMPUTE_FIXING: rc = do_compute(ex, &cmd->u.index_day); break;
  case HG_COMMAND_PUBLISH_FIXING: rc = do_publish_fixing(ex, &cmd->u.fixing); break;
  case HG_COMMAND_FINALIZE_FIXING: do_finalize(ex, &cmd->u.index_day); break;
  case HG_COMMAND_DAILY_SETTLEMENT: rc = do_daily(ex, &cmd->u.daily); break;
  case HG_COMMAND_EXPIRE: rc = do_expire(ex, &cmd->u.expire); break;
  case HG_COMMAND_LIST_CURVE: rc = do_list_curve(ex, &cmd->u.curve); break;
  case HG_COMMAND_SESSIONS_ENDED: do_sessions_ended(ex); break;
  }
  if (rc != 0) {
    /* An error changes nothing: the flags go back to the last applied
     * command's day. */
    if (flags_moved) set_delivery_flags(ex, ts_day(ex->last_ts));
    return rc;
  }
  ex->last_seq = cmd->seq;
  ex->last_ts = cmd->ts;
  /* A clearing call that failed on the book path left the two out of step:
   * the command is applied (its events are out) but nothing more may be. */
  if (ex->fault != 0) return HG_ECORRUPT;
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Queries                                                                   */
/* ------------------------------------------------------------------------ */

uint64_t hg_exchange_last_seq(const hg_exchange_t *ex) { return ex->last_seq; }

const hg_book_t *hg_exchange_book(const hg_exchange_t *ex, uint32_t instrument_id) {
  const instrument_t *inst = instr_find(ex, instrument_id);
  return inst != NULL ? inst->book : NULL;
}

int hg_exchange_instrument_status(const hg_exchange_t *ex, uint32_t instrument_id, int *halted) {
  const instrument_t *inst = instr_find(ex, instrument_id);
  if (inst == NULL) return HG_ENOTFOUND;
  *halted = inst->halted;
  return 0;
}

int hg_exchange_instrument_symbol(const hg_exchange_t *ex, uint32_t instrument_id, char *sym) {
  const instrument_t *inst = instr_find(ex, instrument_id);
  if (inst == NULL) return HG_ENOTFOUND;
  memcpy(sym, inst->symbol, sizeof inst->symbol);
  return 0;
}

uint32_t hg_exchange_instrument_count(const hg_exchange_t *ex) { return ex->n_instr; }

int hg_exchange_account(const hg_exchange_t *ex, hg_account_t account, int64_t *cash,
                        uint32_t *firm) {
  const account_t *a = acct_find(ex, account);
  if (a == NULL) return HG_ENOTFOUND;
  *cash = cash_of(ex, account);
  *firm = a->firm;
  return 0;
}

void hg_exchange_foreach_instrument(const hg_exchange_t *ex,
                                    void (*fn)(void *ctx,
                                               const hg_exchange_instrument_info_t *info),
                                    void *ctx) {
  for (uint32_t i = 0; i < ex->n_instr; i++) {
    const instrument_t *inst = &ex->instr[i];
    hg_exchange_instrument_info_t info;
    memset(&info, 0, sizeof info);
    info.id = inst->id;
    info.halted = inst->halted;
    memcpy(info.symbol, inst->symbol, sizeof info.symbol);
    info.params = *hg_book_params(inst->book);
    info.orders = hg_book_order_count(inst->book);
    ref_band(ex, inst->id, &info.ref_price, &info.band_low, &info.band_high);
    fn(ctx, &info);
  }
}

void hg_exchange_foreach_account(const hg_exchange_t *ex,
                                 void (*fn)(void *ctx, const hg_exchange_account_info_t *info),
                                 void *ctx) {
  for (uint32_t i = 0; i < ex->n_acct; i++) {
    hg_exchange_account_info_t info = {ex->acct[i].id, ex->acct[i].firm,
                                       cash_of(ex, ex->acct[i].id)};
    fn(ctx, &info);
  }
}

const hg_clearing_t *hg_exchange_clearing(const hg_exchange_t *ex) { return ex->clr; }

int32_t hg_exchange_last_cycle_day(const hg_exchange_t *ex) { return ex->last_cycle_day; }

void hg_exchange_foreach_fixing(const hg_exchange_t *ex,
                                void (*fn)(void *ctx, const hg_exchange_fixing_info_t *info),
                                void *ctx) {
  for (uint32_t i = 0; i < ex->n_idx; i++) {
    const index_t *x = &ex->idx[i];
    for (size_t k = 0; k < x->hist.n; k++) {
      hg_exchange_fixing_info_t info;
      memset(&info, 0, sizeof info);
      info.group = i + 1;
      memcpy(info.gpu, x->gpu, sizeof info.gpu);
      memcpy(info.grade, x->grade, sizeof info.grade);
      info.fixing = x->hist.rec[k];
      fn(ctx, &info);
    }
  }
}

int hg_exchange_fixing(const hg_exchange_t *ex, const char *gpu, const char *grade, int32_t day,
                       hg_index_fixing_t *out) {
  int slot = idx_find(ex, gpu, grade);
  if (slot < 0) return HG_ENOTFOUND;
  const hg_index_fixing_t *f = hg_index_history_get(&ex->idx[slot].hist, day);
  if (f == NULL) return HG_ENOTFOUND;
  *out = *f;
  return 0;
}

int hg_exchange_receipt(const hg_exchange_t *ex, const char *gpu, const char *grade, int32_t day,
                        hg_exchange_receipt_t *out) {
  int slot = idx_find(ex, gpu, grade);
  if (slot < 0) return HG_ENOTFOUND;
  uint32_t pos;
  const hg_exchange_receipt_t *r = rcpt_find(&ex->idx[slot], day, &pos);
  if (r == NULL) return HG_ENOTFOUND;
  *out = *r;
  return 0;
}

const char *hg_xreject_str(int reason) {
  switch (reason) {
#define HG_XREJECT_STR(name, num, msg) \
  case num:                            \
    return msg;
    HG_XREJECT_MAP(HG_XREJECT_STR)
#undef HG_XREJECT_STR
  default:
    if (HG_CLR_IS_REJECT(reason)) return hg_clearing_reject_str(reason);
    return hg_reject_str(reason);
  }
}

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

static void w_u64(writer_t *w, uint64_t v) {
  uint8_t b[8];
  for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
  w_bytes(w, b, 8);
}

static void w_u32(writer_t *w, uint32_t v) {
  uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
  w_bytes(w, b, 4);
}

static void w_u8(writer_t *w, uint8_t v) { w_bytes(w, &v, 1); }
static void w_i64(writer_t *w, int64_t v) { w_u64(w, (uint64_t)v); }
static void w_i32(writer_t *w, int32_t v) { w_u32(w, (uint32_t)v); }
static void w_u16(writer_t *w, uint16_t v) {
  uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
  w_bytes(w, b, 2);
}

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
 *             max_order_qty, ref_price; u32 band_bps, max_orders,
 *             max_accounts; u8 default_stp,
 *     u32 n_orders, then per order in time priority: u64 order_id,
 *       u64 client_order_id, u32 account, u32 smp_group, i64 price, i64 qty,
 *       i64 leaves, u64 ts, u8 side, tif, stp, post_only,
 *       (version 3) u8 session_scoped,
 *   u32 n_accounts, then per account by id: u32 id, u32 firm,
 *   (version 2) i32 last_cycle_day, u64 cycle_time_of_day_ns, u32 band_bps,
 *   u32 n_indexes, per index in creation order: str gpu, str grade, u8
 *     has_curve, u16 next_year, u8 next_month, u32 next_id, u32 max_orders,
 *     u32 max_accounts, i64 ref; u32 n_fixings, per fixing by day: i64
 *     value, i32 day, i32 carried_from, u8 status, kind, tier, str source;
 *     u32 n_receipts, per receipt by day (see w_receipt),
 *   u32 n_registry_rows (sorted): str provider, gpu, grade, i32 from,
 *   u32 n_staged, in publication order: u32 index, i32 day, sample,
 *   u64 clearing_len, the hg_clearing_serialize() bytes.
 * (str = u8 length + bytes.) Cash, positions and the ledger are the
 * clearing's.
 */
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
    const hg_book_params_t *p = hg_book_params(inst->book);
    size_t sl = strlen(inst->symbol);
    w_u32(w, inst->id);
    w_u8(w, inst->halted);
    w_u8(w, (uint8_t)sl);
    w_bytes(w, inst->symbol, sl);
    w_i64(w, p->tick_size);
    w_i64(w, p->contract_unit);
    w_i64(w, p->min_price);
    w_i64(w, p->max_price);
    w_i64(w, p->max_order_qty);
    w_i64(w, p->ref_price);
    w_u32(w, p->band_bps);
    w_u32(w, p->max_orders);
    w_u32(w, p->max_accounts);
    w_u8(w, p->default_stp);
    w_u32(w, hg_book_order_count(inst->book));
    hg_book_foreach(inst->book, w_order, w);
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

static uint64_t r_u64(reader_t *r) {
  uint8_t b[8];
  r_bytes(r, b, 8);
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | b[i];
  return v;
}

static uint32_t r_u32(reader_t *r) {
  uint8_t b[4];
  r_bytes(r, b, 4);
  return (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16) | ((uint32_t)b[3] << 24);
}

static uint8_t r_u8(reader_t *r) {
  uint8_t b;
  r_bytes(r, &b, 1);
  return b;
}

static int64_t r_i64(reader_t *r) { return (int64_t)r_u64(r); }
static int32_t r_i32(reader_t *r) { return (int32_t)r_u32(r); }
static uint16_t r_u16(reader_t *r) {
  uint8_t b[2];
  r_bytes(r, b, 2);
  return (uint16_t)(b[0] | (b[1] << 8));
}

/* A string of at most cap - 1 bytes into dst[cap], NUL-padded. */
static int r_str(reader_t *r, char *dst, size_t cap) {
  uint8_t n = r_u8(r);
  memset(dst, 0, cap);
  if (r->bad || n >= cap) return 0;
  r_bytes(r, dst, n);
  return !r->bad && memchr(dst, '\0', n) == NULL;
}

/* version: of the blob; a version 2 order has no session_scoped byte and is
 * read as an ordinary order (flag 0), as its gateway never set one. */
static int restore_instruments(hg_exchange_t *ex, reader_t *r, uint32_t version) {
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
    if (r->bad || !symbol_ok(inst->symbol, sizeof inst->symbol)) return HG_ECORRUPT;
    for (uint32_t j = 0; j < i; j++)
      if (strcmp(ex->instr[j].symbol, inst->symbol) == 0) return HG_ECORRUPT;
    hg_book_params_t p;
    memset(&p, 0, sizeof p);
    p.instrument_id = inst->id;
    p.tick_size = r_i64(r);
    p.contract_unit = r_i64(r);
    p.min_price = r_i64(r);
    p.max_price = r_i64(r);
    p.max_order_qty = r_i64(r);
    p.ref_price = r_i64(r);
    p.band_bps = r_u32(r);
    p.max_orders = r_u32(r);
    p.max_accounts = r_u32(r);
    p.default_stp = r_u8(r);
    uint32_t n_orders = r_u32(r);
    if (r->bad) return HG_ECORRUPT;
    if (p.max_orders > ex->cfg.max_book_orders || p.max_accounts > ex->cfg.max_accounts)
      return HG_EFULL;
    if (n_orders > p.max_orders) return HG_ECORRUPT;
    int rc = hg_book_create(&p, book_sink, ex, &inst->book);
    if (rc == -ENOMEM) return rc;
    if (rc != 0) return HG_ECORRUPT;
    hg_book_set_event_buffer(inst->book, &ex->bev.book);
    ex->n_instr = i + 1; /* from here on reset() frees the book */
    instr_dir_refresh(ex, i);
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
      o.session_scoped = version >= 3 ? r_u8(r) : 0;
      if (r->bad || o.order_id == 0 || o.order_id > ex->last_seq) return HG_ECORRUPT;
      if (hg_book_restore(inst->book, &o) != 0) return HG_ECORRUPT;
    }
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
  return sample_ok(s);
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
        !name_ok(gpu, sizeof gpu) || !name_ok(grade, sizeof grade) || idx_find(ex, gpu, grade) >= 0)
      return HG_ECORRUPT;
    int slot = idx_get(ex, gpu, grade);
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
    if (x->has_curve && (x->next_month < 1 || x->next_month > 12 || x->next_year < 1970 ||
                         x->next_id == 0 || x->curve_max_orders == 0 ||
                         x->curve_max_accounts == 0 || x->curve_ref < 0))
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
      ex->ccfg.cycle_time_of_day_ns >= NS_PER_DAY || ex->ccfg.band_bps > 100000)
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
    if (r->bad || !text_ok(row.provider, sizeof row.provider) || !name_ok(row.gpu, sizeof row.gpu) ||
        !name_ok(row.grade, sizeof row.grade) || !day_ok(row.effective_from))
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
    uint32_t v = (uint32_t)q[0] | ((uint32_t)q[1] << 8) | ((uint32_t)q[2] << 16) |
                 ((uint32_t)q[3] << 24);
    if (v > caps[k]) return HG_EFULL;
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
    unsigned y, m;
    hg_clearing_instrument_info_t ci;
    if (!parse_contract(inst->symbol, gpu, grade, &y, &m)) return HG_ECORRUPT;
    int slot = idx_find(ex, gpu, grade);
    if (slot < 0 || hg_clearing_instrument_info(clr, inst->id, &ci) != 0 ||
        ci.inst.group_id != (uint32_t)slot + 1 || ci.inst.year != y || ci.inst.month != m ||
        ci.settled)
      return HG_ECORRUPT;
    inst->index = (uint32_t)slot;
    set_month(ex, inst, y, m);
  }
  return 0;
}

static int restore_all(hg_exchange_t *ex, reader_t *r) {
  uint32_t magic = r_u32(r);
  uint32_t version = r_u32(r);
  if (r->bad || magic != FORMAT_MAGIC || version == 0) return HG_ECORRUPT;
  if (version != HG_EXCHANGE_FORMAT_VERSION && version != HG_EXCHANGE_FORMAT_OLDEST)
    return HG_EVERSION;
  ex->last_seq = r_u64(r);
  ex->last_ts = r_u64(r);
  ex->sessions = r_u64(r);
  ex->last_session_date = r_u32(r);
  if (r->bad) return HG_ECORRUPT;
  int rc = restore_instruments(ex, r, version);
  if (rc == 0) rc = restore_accounts(ex, r);
  hg_clearing_t *clr = NULL;
  if (rc == 0) rc = restore_settlement(ex, r, &clr);
  if (rc == 0 && (r->bad || r->left != 0)) rc = HG_ECORRUPT;
  if (rc != 0) {
    hg_clearing_destroy(clr);
    return rc;
  }
  hg_clearing_destroy(ex->clr);
  ex->clr = clr;
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
    reset(ex);
  }
  return rc;
}
