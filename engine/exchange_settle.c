/*
 * Settlement commands of the exchange state machine (exchange_int.h):
 * provider grades, index samples, fixings, the daily cycle, expiry with
 * final settlement, and the rolling curve.
 *
 * The index side: one index_t per (GPU, grade), created on first use, which
 * is also the clearing product group (group id = slot + 1). It owns the
 * fixing history (hourglass/index.h, fixed capacity), the receipts of
 * computed fixings and the rolling curve of auto-listed contracts. Samples
 * are staged in one array in publication order until COMPUTE_FIXING consumes
 * those of its (index, day). Settlement commands are operator commands: they
 * Settlement commands are operator commands: they may allocate (staging, the
 * fixing computation), never the order path.
 */
#include "exchange_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hourglass/error.h"
#include "hourglass/names.h"

/* ------------------------------------------------------------------------ */
/* Events                                                                    */
/* ------------------------------------------------------------------------ */

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
    hg_ex__ref_band(ex, ev.instrument_id, &ev.price, &ev.lo, &ev.hi);
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

/* A settlement command's reject (nothing changed). */
static void emit_settle_reject(hg_exchange_t *ex, uint16_t reason, uint32_t instrument_id,
                               uint32_t group, int32_t day, int64_t amount) {
  hg_exchange_event_t ev;
  event_init(ex, &ev, HG_XEV_REJECTED);
  ev.reason = reason;
  ev.instrument_id = instrument_id;
  ev.group = group;
  ev.day = day;
  ev.amount = amount;
  ex->sink(ex->sink_ctx, &ev);
}

/* A settlement command that could not be applied: the error in amount. */
static void emit_failed(hg_exchange_t *ex, int rc, uint32_t instrument_id, int32_t day) {
  emit_settle_reject(ex, HG_XREJ_SETTLEMENT_FAILED, instrument_id, 0, day, rc);
}

static void emit_reject_day(hg_exchange_t *ex, uint16_t reason, uint32_t group, int32_t day) {
  emit_settle_reject(ex, reason, 0, group, day, 0);
}

/* ------------------------------------------------------------------------ */
/* Indexes (product groups)                                                  */
/* ------------------------------------------------------------------------ */

int hg_ex__idx_find(const hg_exchange_t *ex, const char *gpu, const char *grade) {
  for (uint32_t i = 0; i < ex->n_idx; i++)
    if (strcmp(ex->idx[i].gpu, gpu) == 0 && strcmp(ex->idx[i].grade, grade) == 0) return (int)i;
  return -1;
}

/* The slot of (gpu, grade), created if new: >= 0, HG_EFULL or -ENOMEM.
 * gpu and grade are valid names. */
void hg_ex__free_indexes(hg_exchange_t *ex) {
  for (uint32_t i = 0; i < ex->n_idx; i++) {
    free(ex->idx[i].fix);
    free(ex->idx[i].rcpt);
  }
  memset(ex->idx, 0, (size_t)ex->cfg.max_indexes * sizeof *ex->idx);
  ex->n_idx = 0;
}


int hg_ex__idx_get(hg_exchange_t *ex, const char *gpu, const char *grade) {
  int i = hg_ex__idx_find(ex, gpu, grade);
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
void hg_ex__idx_push_fixings(hg_exchange_t *ex, uint32_t slot) {
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
/* Settlement commands                                                       */
/* ------------------------------------------------------------------------ */

static int index_day_ok(const char *gpu, const char *grade, int32_t day) {
  return hg_name_ok(gpu, HG_INDEX_GPU_MAX) && hg_name_ok(grade, HG_INDEX_GRADE_MAX) && day_ok(day);
}

static int do_provider_grade(hg_exchange_t *ex, const hg_cmd_provider_grade_t *c) {
  if (!hg_text_ok(c->provider, sizeof c->provider) || !hg_name_ok(c->gpu, sizeof c->gpu) ||
      !hg_name_ok(c->grade, sizeof c->grade) || !day_ok(c->effective_day)) {
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

int hg_ex__sample_ok(const hg_index_sample_t *s) {
  return hg_text_ok(s->provider, sizeof s->provider) && hg_text_ok(s->region, sizeof s->region) &&
         hg_text_ok(s->gpu, sizeof s->gpu) && hg_text_ok(s->grade, sizeof s->grade) &&
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
  int slot = hg_ex__idx_get(ex, gpu, grade);
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
  for (uint32_t i = 0; ok && i < c->n; i++) ok = hg_ex__sample_ok(&c->s[i]);
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
  int slot = hg_ex__idx_find(ex, c->gpu, c->grade);
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
  hg_ex__idx_push_fixings(ex, (uint32_t)slot);
  emit_fixing(ex, (uint32_t)slot, hg_index_history_get(&x->hist, c->day), (uint8_t)outcome,
              inputs);
  emit_references(ex, (uint32_t)slot);
  return 0;
}

static int do_publish_fixing(hg_exchange_t *ex, const hg_cmd_publish_fixing_t *c) {
  if (!index_day_ok(c->gpu, c->grade, c->day) || !hg_text_ok(c->source, sizeof c->source)) {
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
  hg_ex__idx_push_fixings(ex, (uint32_t)slot);
  emit_fixing(ex, (uint32_t)slot, hg_index_history_get(&x->hist, c->day), (uint8_t)outcome, 0);
  emit_references(ex, (uint32_t)slot);
  return 0;
}

static void do_finalize(hg_exchange_t *ex, const hg_cmd_index_day_t *c) {
  if (!index_day_ok(c->gpu, c->grade, c->day)) {
    emit_reject_day(ex, HG_XREJ_INVALID_PARAMS, 0, c->day);
    return;
  }
  int slot = hg_ex__idx_find(ex, c->gpu, c->grade);
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
  hg_ex__idx_push_fixings(ex, (uint32_t)slot);
  emit_fixing(ex, (uint32_t)slot, hg_index_history_get(&x->hist, c->day), HG_XFIX_FINALIZED, 0);
  emit_references(ex, (uint32_t)slot);
}

/* Emits one event per ledger entry posted since `from`: VM and FINAL entries
 * as `type` (their sum is returned), the guarantee's entries (waterfall,
 * fees, the fund's side) as HG_XEV_CASH. */
static int64_t emit_ledger(hg_exchange_t *ex, uint64_t from, uint16_t type, int32_t day) {
  int64_t sum = 0;
  uint64_t to = hg_clearing_ledger_size(ex->clr);
  for (uint64_t i = from; i < to; i++) {
    hg_ledger_entry_t e;
    if (hg_clearing_ledger_get(ex->clr, i, &e) != 0) continue;
    const account_t *a = e.account == HG_CLR_FUND_ACCOUNT ? NULL : acct_find(ex, e.account);
    hg_exchange_event_t ev;
    int cash = e.kind != HG_LEDGER_VM && e.kind != HG_LEDGER_FINAL;
    event_init(ex, &ev, cash ? HG_XEV_CASH : type);
    ev.kind = cash ? (uint8_t)e.kind : 0;
    ev.account = e.account;
    ev.firm = a != NULL ? a->firm : 0;
    ev.instrument_id = cash && e.instrument == HG_CLR_NO_INSTRUMENT ? 0 : e.instrument;
    ev.amount = e.amount;
    ev.balance = e.balance;
    ev.price = e.price;
    ev.qty = e.qty;
    ev.day = day;
    ex->sink(ex->sink_ctx, &ev);
    if (!cash) sum += e.amount;
  }
  return sum;
}

void hg_ex__emit_cash(hg_exchange_t *ex, uint64_t from, int32_t day) {
  (void)emit_ledger(ex, from, HG_XEV_CASH, day);
}

/* One HG_XEV_MARGIN_CALL per account called or liquidating, in id order;
 * returns how many. */
static uint32_t emit_calls(hg_exchange_t *ex) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < ex->n_acct; i++) {
    hg_clearing_standing_t st;
    if (hg_clearing_standing(ex->clr, ex->acct[i].id, &st) != 0 || st.state == HG_CLR_OK)
      continue;
    hg_exchange_event_t ev;
    event_init(ex, &ev, HG_XEV_MARGIN_CALL);
    ev.account = ex->acct[i].id;
    ev.firm = ex->acct[i].firm;
    ev.status = (uint8_t)st.state;
    ev.kind = (uint8_t)st.liq_reason;
    ev.amount = st.call_amount;
    ev.balance = st.equity;
    ev.margin = st.im;
    ev.lo = st.mm;
    ev.qty = (int64_t)st.call_due;
    ex->sink(ex->sink_ctx, &ev);
    n++;
  }
  return n;
}

/* Best bid and ask of every listed contract into ex->tops. */
static void fill_tops(hg_exchange_t *ex) {
  for (uint32_t i = 0; i < ex->n_instr; i++) {
    hg_clearing_top_t *t = &ex->tops[i];
    hg_qty_t q;
    t->instrument = ex->instr[i].id;
    if (hg_book_best(ex->instr[i].book, HG_SIDE_BUY, &t->best_bid, &q) != 0) t->best_bid = 0;
    if (hg_book_best(ex->instr[i].book, HG_SIDE_SELL, &t->best_ask, &q) != 0) t->best_ask = 0;
  }
}

static void collect_account_order(void *ctx, const hg_book_order_t *o) {
  hg_exchange_t *ex = ctx;
  if (o->account == ex->cur.liq_account && ex->scratch_n < ex->cfg.max_book_orders)
    ex->scratch[ex->scratch_n++] = (order_ref_t){o->order_id, o->account};
}

/* Cancels every resting order of account in every book (id order, time
 * priority), relabelled HG_XCXL_LIQUIDATION. */
static void cancel_account_orders(hg_exchange_t *ex, hg_book_t *book, hg_account_t account) {
  ex->scratch_n = 0;
  hg_book_foreach(book, collect_account_order, ex);
  ex->cur.relabel = HG_XCXL_LIQUIDATION;
  for (uint32_t k = 0; k < ex->scratch_n; k++)
    hg_book_cancel(book, ex->scratch[k].order_id, account, ex->cur.ts);
  ex->cur.relabel = 0;
  ex->scratch_n = 0;
}

/* ... and then in every spread book (id order): a spread order holds open
 * quantity on its legs. */
static void cancel_for_liquidation(hg_exchange_t *ex, hg_account_t account) {
  ex->cur.liq_account = account;
  for (uint32_t i = 0; i < ex->n_instr; i++) cancel_account_orders(ex, ex->instr[i].book, account);
  for (uint32_t i = 0; i < ex->n_spr; i++) cancel_account_orders(ex, ex->spr[i].book, account);
}

/* MARK: a mark round, then the liquidation slices (exchange.h). */
static int do_mark(hg_exchange_t *ex) {
  fill_tops(ex);
  hg_clearing_mark_report_t rep;
  int rc = hg_clearing_mark(ex->clr, ex->tops, ex->n_instr, &rep);
  if (rc != 0) {
    emit_failed(ex, rc, 0, 0);
    return 0;
  }
  for (uint32_t i = 0; i < ex->n_instr; i++) {
    hg_price_t m;
    if (hg_clearing_mark_get(ex->clr, ex->instr[i].id, &m, NULL) != 0 || m == 0) continue;
    hg_exchange_event_t ev;
    event_init(ex, &ev, HG_XEV_MARK);
    ev.instrument_id = ex->instr[i].id;
    ev.group = ex->instr[i].index + 1;
    ev.price = m;
    int64_t ref;
    hg_ex__ref_band(ex, ex->instr[i].id, &ref, &ev.lo, &ev.hi);
    ex->sink(ex->sink_ctx, &ev);
  }
  (void)emit_calls(ex);
  size_t n = 0;
  (void)hg_clearing_liq_slices(ex->clr, NULL, 0, &n);
  if (n > ex->n_liq_cap) {
    hg_clearing_liq_slice_t *p = realloc(ex->liq, n * sizeof *p);
    if (p == NULL) return -ENOMEM;
    ex->liq = p;
    ex->n_liq_cap = n;
  }
  if (n > 0 && hg_clearing_liq_slices(ex->clr, ex->liq, ex->n_liq_cap, &n) != 0)
    clr_fault(ex, HG_ECORRUPT);
  ex->cur.liq_fills = 0;
  uint32_t sent = 0;
  for (size_t k = 0; k < n; k++) {
    const hg_clearing_liq_slice_t *sl = &ex->liq[k];
    if (k == 0 || sl->account != ex->liq[k - 1].account) cancel_for_liquidation(ex, sl->account);
    instrument_t *inst = instr_find(ex, sl->instrument);
    if (inst == NULL || inst->halted || ex->cur.ts >= inst->cutoff_ts) continue;
    const hg_book_params_t *bp = hg_book_params(inst->book);
    /* the band edge around the mark, kept inside the price band around the
     * reference (the clearing's, the only one): an order outside it would be
     * refused (CONTRACT.md 5.12) */
    hg_price_t px = sl->limit, lo = bp->min_price, hi = bp->max_price;
    int64_t ref, blo, bhi;
    hg_ex__ref_band(ex, inst->id, &ref, &blo, &bhi);
    if (blo > lo) lo = blo;
    if (bhi != 0 && bhi < hi) hi = bhi;
    if (px != 0 && px < lo) px = lo;
    if (px > hi) px = hi;
    hg_qty_t q = sl->qty < bp->max_order_qty ? sl->qty : bp->max_order_qty;
    hg_order_new_t o = {
        .order_id = HG_XLIQ_OID(ex->cur.seq, k),
        .account = sl->account,
        .price = px,
        .qty = q,
        .side = (uint8_t)sl->side,
        .type = px == 0 ? HG_ORD_MARKET : HG_ORD_LIMIT,
        .tif = HG_TIF_IOC,
        .stp = HG_STP_CANCEL_INCOMING,
        .ts = ex->cur.ts,
    };
    ex->cur.liq = 1;
    ex->cur.liq_side = (uint8_t)sl->side;
    ex->cur.liq_account = sl->account;
    hg_book_submit(inst->book, &o);
    ex->cur.liq = 0;
    sent++;
  }
  hg_clearing_guarantee_t g;
  hg_clearing_guarantee(ex->clr, &g);
  hg_exchange_event_t ev;
  event_init(ex, &ev, HG_XEV_MARK_ROUND);
  ev.amount = rep.accounts_evaluated;
  ev.lo = g.called;
  ev.hi = g.liquidating;
  ev.qty = sent;
  ev.margin = ex->cur.liq_fills;
  ev.balance = g.fund;
  ex->sink(ex->sink_ctx, &ev);
  return 0;
}

/* FUND_DEPOSIT: credits the insurance fund. */
static int do_fund(hg_exchange_t *ex, const hg_cmd_fund_t *c) {
  uint64_t before = hg_clearing_ledger_size(ex->clr);
  int rc = c->amount <= 0 ? HG_EINVAL : hg_clearing_fund_deposit(ex->clr, c->amount, ex->cur.seq, ex->cur.ts);
  if (rc == -ENOMEM) return rc;
  if (rc == HG_EINVAL || rc == HG_EOVERFLOW) {
    hg_exchange_event_t ev;
    event_init(ex, &ev, HG_XEV_REJECTED);
    ev.reason = HG_XREJ_INVALID_AMOUNT;
    ev.amount = c->amount;
    ex->sink(ex->sink_ctx, &ev);
    return 0;
  }
  if (rc != 0) {
    emit_failed(ex, rc, 0, 0);
    return 0;
  }
  hg_ex__emit_cash(ex, before, -1);
  return 0;
}

static int do_daily(hg_exchange_t *ex, const hg_cmd_daily_settlement_t *c) {
  if (!day_ok(c->day)) {
    emit_reject_day(ex, HG_XREJ_INVALID_PARAMS, 0, c->day);
    return 0;
  }
  uint64_t cycle_ts = (uint64_t)c->day * HG_NS_PER_DAY + ex->ccfg.cycle_time_of_day_ns;
  /* One cycle per day, in day order, never before its 16:00. */
  if (c->day <= ex->last_cycle_day) {
    emit_reject_day(ex, HG_XREJ_ALREADY_SETTLED, 0, c->day);
    return 0;
  }
  if (ex->cur.ts < cycle_ts) {
    emit_reject_day(ex, HG_XREJ_NOT_IN_STATE, 0, c->day);
    return 0;
  }
  fill_tops(ex);
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
  (void)emit_calls(ex); /* the evaluation at the DSPs (CONTRACT.md 4.7) */
  int64_t expired = hg_ex__expire_day_orders(ex);
  /* Trading has ended for the contracts whose last trading day this is:
   * what still rests can never trade and stops counting for margin. */
  for (uint32_t i = 0; i < ex->n_instr; i++)
    if (ex->instr[i].last_day <= c->day)
      expired += hg_ex__cancel_all(ex, ex->instr[i].book, HG_XCXL_EXPIRED);
  expired += hg_ex__spread_cycle(ex, c->day);
  ex->last_cycle_day = c->day;
  hg_exchange_event_t ev;
  event_init(ex, &ev, HG_XEV_CYCLE);
  ev.day = c->day;
  ev.amount = vm_sum;
  ev.lo = rep.vm_paid;
  ev.hi = rep.vm_received;
  ev.qty = expired;
  ev.balance = (int64_t)rep.entries_posted;
  ev.margin = rep.bankrupt;
  ev.price = rep.fund_used;
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
                            .ref_price = x->curve_ref,
                            .max_orders = x->curve_max_orders,
                            .max_accounts = x->curve_max_accounts, .default_stp = 0};
}

/* Token product groups (settlement/CONTRACT.md 7.3): the (class, grade)
 * pairs of the output grade table. Their contracts are named
 * TOK.<CLASS>.<GRADE>.<YYYY-MM>; everything else is the GPU-hour rule. */
bool hg_ex__idx_is_token(const char *gpu, const char *grade) {
  return hg_index_token_grade_find(gpu, grade) != NULL;
}

/* The token prefix fits: 4 + class + 1 + grade + 8 <= HG_SYMBOL_MAX. */
#define TOKEN_NAMES_MAX (HG_SYMBOL_MAX - (sizeof HG_SYMBOL_TOKEN_PREFIX - 1) - 9)

static void contract_symbol(const index_t *x, unsigned y, unsigned m, char out[HG_SYMBOL_MAX + 1]) {
  /* gpu <= 15, grade <= 7 bytes: at most 31 with the separators; a token
   * group's class and grade at most TOKEN_NAMES_MAX together (checked when
   * the curve is listed) */
  size_t gl = strlen(x->gpu), rl = strlen(x->grade);
  if (hg_ex__idx_is_token(x->gpu, x->grade)) {
    size_t pl = sizeof HG_SYMBOL_TOKEN_PREFIX - 1;
    memcpy(out, HG_SYMBOL_TOKEN_PREFIX, pl);
    out += pl;
  }
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
  int rc = hg_ex__list_one(ex, sym, &p);
  if (rc != 0) return rc;
  if (instr_find(ex, p.instrument_id) != NULL) {
    next_month(&x->next_year, &x->next_month);
    x->next_id++;
  }
  return 0;
}

static int do_list_curve(hg_exchange_t *ex, const hg_cmd_list_curve_t *c) {
  uint32_t first = c->first_instrument_id;
  if (!hg_name_ok(c->gpu, sizeof c->gpu) || !hg_name_ok(c->grade, sizeof c->grade) ||
      c->year < HG_CURVE_YEAR_MIN || c->year > HG_CURVE_YEAR_MAX || c->month < 1 || c->month > 12 ||
      first == 0 || first > UINT32_MAX - 2 * CURVE_MONTHS || c->max_orders == 0 ||
      c->max_accounts == 0 || c->ref_price < 0 || c->ref_price > CURVE_MAX_PRICE ||
      (hg_ex__idx_is_token(c->gpu, c->grade) &&
       strlen(c->gpu) + strlen(c->grade) > TOKEN_NAMES_MAX)) {
    hg_ex__emit_reject(ex, HG_XREJ_INVALID_PARAMS, first, 0);
    return 0;
  }
  if (c->max_orders > ex->cfg.max_book_orders || c->max_accounts > ex->cfg.max_accounts ||
      ex->n_instr + CURVE_MONTHS > ex->cfg.max_instruments) {
    hg_ex__emit_reject(ex, HG_XREJ_CAPACITY, first, 0);
    return 0;
  }
  int slot = hg_ex__idx_get(ex, c->gpu, c->grade);
  if (slot == -ENOMEM) return slot;
  if (slot < 0) {
    hg_ex__emit_reject(ex, HG_XREJ_CAPACITY, first, 0);
    return 0;
  }
  index_t *x = &ex->idx[slot];
  /* All twelve or none: every id and symbol must be free first. */
  uint16_t y = c->year;
  uint8_t m = c->month;
  for (uint32_t k = 0; k < CURVE_MONTHS; k++) {
    char sym[HG_SYMBOL_MAX + 1];
    contract_symbol(x, y, m, sym);
    int clash = x->has_curve || instr_find(ex, first + k) != NULL ||
                hg_ex__spread_taken(ex, first + k, sym);
    for (uint32_t i = 0; i < ex->n_instr && !clash; i++)
      if (strcmp(ex->instr[i].symbol, sym) == 0) clash = 1;
    hg_clearing_instrument_info_t info;
    if (!clash && hg_clearing_instrument_info(ex->clr, first + k, &info) == 0)
      clash = info.inst.group_id != (uint32_t)slot + 1 || info.inst.year != y ||
              info.inst.month != m || info.settled;
    if (clash) {
      hg_ex__emit_reject(ex, HG_XREJ_INSTRUMENT_EXISTS, first + k, 0);
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
    hg_ex__emit_reject(ex, HG_XREJ_UNKNOWN_INSTRUMENT, c->instrument_id, 0);
    return 0;
  }
  instrument_t *inst = &ex->instr[pos];
  uint32_t slot = inst->index;
  hg_clearing_instrument_info_t info;
  /* Trading must be over: the cycle of the last trading day has run. */
  if (ex->last_cycle_day < inst->last_day ||
      hg_clearing_instrument_info(ex->clr, inst->id, &info) != 0 || info.inst.last_dsp == 0) {
    hg_ex__emit_reject(ex, HG_XREJ_NOT_IN_STATE, inst->id, 0);
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
  uint32_t cancelled = hg_ex__cancel_all(ex, inst->book, HG_XCXL_EXPIRED);
  uint64_t before = hg_clearing_ledger_size(ex->clr);
  rc = hg_clearing_final_settle(ex->clr, inst->id, fsp.fsp, ex->cur.seq, ex->cur.ts);
  if (rc == -ENOMEM) return rc;
  if (rc != 0) {
    emit_failed(ex, rc, inst->id, 0);
    return 0;
  }
  int64_t sum = emit_ledger(ex, before, HG_XEV_FINAL_SETTLEMENT, hg_civil_day_of_ns(ex->cur.ts));
  if (sum != 0) clr_fault(ex, HG_ECORRUPT);
  uint64_t payments = hg_clearing_ledger_size(ex->clr) - before;
  clr_fault(ex, hg_clearing_instrument_remove(ex->clr, inst->id));
  uint32_t id = inst->id;
  hg_ex__remove_instrument(ex, pos);
  hg_ex__spread_drop_leg(ex, id); /* a spread goes with its leg */
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

int hg_ex__apply_settlement(hg_exchange_t *ex, const hg_command_t *cmd) {
  switch ((hg_command_type_t)cmd->type) {
  case HG_COMMAND_SET_PROVIDER_GRADE: return do_provider_grade(ex, &cmd->u.provider_grade);
  case HG_COMMAND_PUBLISH_SAMPLES: return do_samples(ex, &cmd->u.samples);
  case HG_COMMAND_DISCARD_SAMPLES: do_discard(ex, &cmd->u.index_day); return 0;
  case HG_COMMAND_COMPUTE_FIXING: return do_compute(ex, &cmd->u.index_day);
  case HG_COMMAND_PUBLISH_FIXING: return do_publish_fixing(ex, &cmd->u.fixing);
  case HG_COMMAND_FINALIZE_FIXING: do_finalize(ex, &cmd->u.index_day); return 0;
  case HG_COMMAND_DAILY_SETTLEMENT: return do_daily(ex, &cmd->u.daily);
  case HG_COMMAND_EXPIRE: return do_expire(ex, &cmd->u.expire);
  case HG_COMMAND_LIST_CURVE: return do_list_curve(ex, &cmd->u.curve);
  case HG_COMMAND_MARK: return do_mark(ex);
  case HG_COMMAND_FUND_DEPOSIT: return do_fund(ex, &cmd->u.fund);
  default: return 0; /* not a settlement command: hg_exchange_apply() dispatches it */
  }
}

/* ------------------------------------------------------------------------ */
/* Queries                                                                   */
/* ------------------------------------------------------------------------ */

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
  int slot = hg_ex__idx_find(ex, gpu, grade);
  if (slot < 0) return HG_ENOTFOUND;
  const hg_index_fixing_t *f = hg_index_history_get(&ex->idx[slot].hist, day);
  if (f == NULL) return HG_ENOTFOUND;
  *out = *f;
  return 0;
}

int hg_exchange_receipt(const hg_exchange_t *ex, const char *gpu, const char *grade, int32_t day,
                        hg_exchange_receipt_t *out) {
  int slot = hg_ex__idx_find(ex, gpu, grade);
  if (slot < 0) return HG_ENOTFOUND;
  uint32_t pos;
  const hg_exchange_receipt_t *r = rcpt_find(&ex->idx[slot], day, &pos);
  if (r == NULL) return HG_ENOTFOUND;
  *out = *r;
  return 0;
}

