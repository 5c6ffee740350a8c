/*
 * hgctl_whatif.c - `hgctl replay --project VALUE --index GPU.GRADE`: final
 * settlement projected from the state a replay reached (hgctl_replay.h),
 * before the month's fixings are all FINAL.
 *
 * For each open contract of the index, the days of its delivery month whose
 * fixing in the replayed exchange is FINAL keep it; every other day (never
 * published, PROVISIONAL or NO_FIX) takes VALUE. The FSP is the clearing
 * library's (hg_clearing_fsp: the exact mean, one rounding half up to a
 * tick). Each account's P&L from the replay's end to final settlement, if
 * it holds its position, is what the remaining daily cycles and the final
 * payment add up to: the VMs telescope, so only the last DSP, the position
 * at that cycle and the fills since it matter (settlement/CONTRACT.md
 * sections 4.2, 4.3 and 5.6):
 *
 *   TV x (pos_prev x (FSP - last DSP) + FSP x sum q - sum q x p)
 *
 * Then the guarantee under it (CONTRACT.md 4.7): the accounts whose cash
 * would fall below zero, and what the insurance fund would pay and the
 * winners share. Then the clearing's own mark round (4.6) at the projected
 * FSPs, run on a copy of the replayed clearing state (standing_use): each
 * account's standing, call and margins, and the fund's use if the
 * liquidating accounts were closed out at the marks.
 *
 * Nothing is applied to the exchange: the state, its hash and the
 * statements stay the journal's. Integer arithmetic only (128-bit sums).
 *
 * With --format json|csv the tables are one table each (hgctl_table.h):
 * stable columns, a `row` column saying what a row is (an account's
 * contract, a firm, the total, a projected mark, an account's standing,
 * the fund's use), and the notes around them on stderr.
 */
#include "hgctl_fmt.h"
#include "hgctl_replay.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hourglass/civil.h"
#include "hourglass/clearing.h"
#include "hourglass/error.h"
#include "hourglass/exchange.h"
#include "hourglass/index.h"
#include "hourglass/names.h"

#define TV_DEFAULT 1000000 /* settlement/CONTRACT.md section 1, micro-USD */
#define PROJECT_NCOLS 19 /* project_cols() */

typedef struct inst_list {
  uint32_t id[256];
  size_t n;
  const replay_t *rp;
} inst_list_t;

/* Open (not finally settled) contracts of the what-if index. */
static void pick_instrument(void *ctx, const hg_exchange_instrument_info_t *info) {
  inst_list_t *l = ctx;
  char gpu[HG_INDEX_GPU_MAX], grade[HG_INDEX_GRADE_MAX];
  uint32_t y, m;
  if (!hg_symbol_parse(info->symbol, gpu, sizeof gpu, grade, sizeof grade, &y, &m)) return;
  if (strcmp(gpu, l->rp->wf_gpu) != 0 || strcmp(grade, l->rp->wf_grade) != 0) return;
  if (l->n < sizeof l->id / sizeof l->id[0]) l->id[l->n++] = info->id;
}

static const char *money(__int128 v, bool raw, char *buf) {
  if (v > INT64_MAX || v < INT64_MIN) return "overflow";
  return hgctl_fmt_money_raw((int64_t)v, raw, buf);
}

/* The projection's table for scripts (hgctl_whatif_project). */
static const hgctl_col_t *project_cols(bool raw, size_t *n) {
  static const hgctl_col_t usd[] = {
      {"row", 1},           {"firm", 0},          {"account", 0},
      {"instrument", 0},    {"symbol", 1},        {"position", 0},
      {"last_dsp_usd", 0},  {"fsp_usd", 0},       {"pnl_usd", 0},
      {"mark_usd", 0},      {"standing", 1},      {"equity_usd", 0},
      {"initial_margin_usd", 0}, {"maintenance_margin_usd", 0}, {"call_usd", 0},
      {"shortfall_usd", 0}, {"fund_usd", 0},      {"fund_used_usd", 0},
      {"socialized_usd", 0}};
  static const hgctl_col_t ticks[] = {
      {"row", 1},        {"firm", 0},     {"account", 0},        {"instrument", 0},
      {"symbol", 1},     {"position", 0}, {"last_dsp", 0},       {"fsp", 0},
      {"pnl", 0},        {"mark", 0},     {"standing", 1},       {"equity", 0},
      {"initial_margin", 0}, {"maintenance_margin", 0}, {"call", 0}, {"shortfall", 0},
      {"fund", 0},       {"fund_used", 0}, {"socialized", 0}};
  _Static_assert(sizeof usd / sizeof usd[0] == PROJECT_NCOLS, "usd columns");
  _Static_assert(sizeof ticks / sizeof ticks[0] == PROJECT_NCOLS, "ticks columns");
  *n = PROJECT_NCOLS;
  return raw ? ticks : usd;
}

/* A money cell: NULL (missing) rather than a word where a number goes. */
static const char *money_cell(__int128 v, bool raw, char *buf) {
  return v > INT64_MAX || v < INT64_MIN ? NULL : hgctl_fmt_money_raw((int64_t)v, raw, buf);
}

static uint32_t firm_of(const replay_t *rp, hg_account_t acct) {
  int64_t cash;
  uint32_t f = 0;
  return hg_exchange_account(rp->ex, acct, &cash, &f) == 0 ? f : 0;
}

/* One contract: the projected FSP, one line for the days the value fills,
 * and the P&L table, one row per account holding it; each account's P&L is
 * added to pnl_acc[k] (accts->id[k]) for the firm totals. */
static int project_one(const replay_t *rp, uint32_t inst, int64_t value, bool raw,
                       const acct_list_t *accts, __int128 *pnl_acc, hgctl_table_t *t, FILE *o,
                       hg_price_t *fsp_out) {
  FILE *note = t != NULL ? stderr : o; /* a table keeps stdout for itself */
  const hg_clearing_t *c = hgctl_replay_ledger(rp);
  hg_clearing_instrument_info_t ii;
  if (hg_clearing_instrument_info(c, inst, &ii) != 0 || ii.settled) return 0;
  const char *sym = hgctl_replay_symbol(rp, inst);
  unsigned year = ii.inst.year, month = ii.inst.month;
  uint32_t nd = hg_civil_month_days(year, month);
  hg_clearing_fixing_t fx[31];
  unsigned kept = 0;
  char b1[HGCTL_FMT_LEN], b2[HGCTL_FMT_LEN], b3[HGCTL_FMT_LEN], day[11], last_day[11];
  fprintf(note, "what-if %s (instrument %" PRIu32 "): the rest of %04u-%02u fixes at %s\n",
          sym ? sym : "?", inst, year, month, hgctl_fmt_decimal(value, 6, b1));
  unsigned unpublished = 0, provisional = 0, nofix = 0;
  day[0] = last_day[0] = '\0';
  for (uint32_t d = 1; d <= nd; d++) {
    int32_t dn = hg_civil_to_day(year, month, d);
    hg_index_fixing_t f;
    bool have = hg_exchange_fixing(rp->ex, rp->wf_gpu, rp->wf_grade, dn, &f) == 0;
    fx[d - 1].day = (uint8_t)d;
    fx[d - 1].status = HG_CLR_FIX_FINAL;
    if (have && f.status == HG_INDEX_FINAL) {
      fx[d - 1].value = f.value;
      kept++;
      continue;
    }
    fx[d - 1].value = value;
    hg_index_day_format(dn, day[0] ? last_day : day);
    if (!have) unpublished++;
    else if (f.status == HG_INDEX_PROVISIONAL) provisional++;
    else nofix++;
  }
  /* One line, not one per day: how many days take the value, and why. */
  if (kept < nd)
    fprintf(note,
            "  %u days %s%s%s take %s (what-if): %u not published, %u PROVISIONAL, %u NO_FIX\n",
            nd - kept, day, last_day[0] ? ".." : "", last_day, b1, unpublished, provisional, nofix);
  hg_clearing_fsp_t fsp;
  int rc = hg_clearing_fsp(year, month, fx, nd, &fsp);
  if (rc != 0) {
    fprintf(stderr, "hgctl replay: %s: FSP: %s\n", sym ? sym : "?", hg_strerror(rc));
    return rc;
  }
  *fsp_out = fsp.fsp;
  int64_t tv = ii.inst.tick_value > 0 ? ii.inst.tick_value : TV_DEFAULT;
  int64_t last = ii.inst.last_dsp;
  fprintf(note, "what-if fsp=%s (%u FINAL fixings kept, %u filled) last_dsp=%s\n",
          hgctl_fmt_price_raw(fsp.fsp, raw, b1), kept, nd - kept,
          last ? hgctl_fmt_price_raw(last, raw, b2) : "none");
  if (t == NULL) {
    fprintf(o, "what-if P&L to final settlement, positions held (%s):\n",
            raw ? "micro-USD; prices in ticks" : "USD; prices in USD per GPU-hour");
    fprintf(o, "  %-10s %-16s %10s %10s %10s %18s\n", "account", "symbol", "position",
            "last_dsp", "fsp", "pnl");
  }
  __int128 total = 0;
  for (size_t k = 0; k < accts->n; k++) {
    hg_clearing_position_t p;
    if (hg_clearing_position(c, accts->id[k], inst, &p) != 0) continue;
    __int128 qp = hgctl_replay_day_qp(rp, inst, accts->id[k]);
    if (p.pos == 0 && p.pos_prev == 0 && p.day_qty == 0 && qp == 0) continue;
    __int128 pnl = ((__int128)p.pos_prev * (fsp.fsp - last) + (__int128)fsp.fsp * p.day_qty - qp) *
                   tv;
    total += pnl;
    pnl_acc[k] += pnl;
    if (t != NULL) {
      char firm[16], acct[16], id[16], pos[24];
      snprintf(firm, sizeof firm, "%" PRIu32, firm_of(rp, accts->id[k]));
      snprintf(acct, sizeof acct, "%" PRIu32, accts->id[k]);
      snprintf(id, sizeof id, "%" PRIu32, inst);
      snprintf(pos, sizeof pos, "%" PRId64, p.pos);
      const char *v[PROJECT_NCOLS] = {"account", firm, acct, id, sym, pos,
                         last ? hgctl_fmt_price_raw(last, raw, b1) : NULL,
                         hgctl_fmt_price_raw(fsp.fsp, raw, b2), money_cell(pnl, raw, b3)};
      hgctl_table_row(t, v);
      continue;
    }
    fprintf(o, "  %-10" PRIu32 " %-16s %10" PRId64 " %10s %10s %18s\n", accts->id[k],
            sym ? sym : "?", p.pos, last ? hgctl_fmt_price_raw(last, raw, b1) : "none",
            hgctl_fmt_price_raw(fsp.fsp, raw, b2), money(pnl, raw, b3));
  }
  if (t == NULL)
    fprintf(o, "  %-10s %-16s %10s %10s %10s %18s\n", "total", "", "", "", "",
            money(total, raw, b3));
  return total == 0 ? 0 : HG_ECORRUPT;
}

int hgctl_whatif_cash_table(const replay_t *wf, const replay_t *base, bool raw, hgctl_out_t fmt,
                            FILE *o) {
  acct_list_t accts;
  if (hgctl_replay_accounts(wf, &accts) != 0) return -ENOMEM;
  char b1[HGCTL_FMT_LEN], b2[HGCTL_FMT_LEN], b3[HGCTL_FMT_LEN];
  hgctl_table_t t;
  if (fmt != HGCTL_OUT_TEXT) {
    static const hgctl_col_t usd[] = {{"row", 1},          {"firm", 0},        {"account", 0},
                                      {"journal_usd", 0},  {"whatif_usd", 0},  {"change_usd", 0}};
    static const hgctl_col_t micro[] = {{"row", 1},     {"firm", 0},    {"account", 0},
                                        {"journal", 0}, {"whatif", 0},  {"change", 0}};
    hgctl_table_start(&t, o, fmt, raw ? micro : usd, sizeof usd / sizeof usd[0]);
  } else {
    fprintf(o, "what-if cash change per account against the journal (%s):\n",
            raw ? "micro-USD" : "USD");
    fprintf(o, "  %-10s %20s %20s %18s\n", "account", "journal", "what-if", "change");
  }
  __int128 total = 0;
  for (size_t k = 0; k < accts.n; k++) {
    int64_t cw = 0, cb = 0;
    uint32_t firm;
    if (hg_exchange_account(wf->ex, accts.id[k], &cw, &firm) != 0) continue;
    if (hg_exchange_account(base->ex, accts.id[k], &cb, &firm) != 0) cb = 0;
    __int128 d = (__int128)cw - cb;
    total += d;
    if (fmt != HGCTL_OUT_TEXT) {
      char f[16], a[16];
      snprintf(f, sizeof f, "%" PRIu32, firm);
      snprintf(a, sizeof a, "%" PRIu32, accts.id[k]);
      const char *v[] = {"account", f, a, money_cell(cb, raw, b1), money_cell(cw, raw, b2),
                         money_cell(d, raw, b3)};
      hgctl_table_row(&t, v);
      continue;
    }
    fprintf(o, "  %-10" PRIu32 " %20s %20s %18s\n", accts.id[k], money(cb, raw, b1),
            money(cw, raw, b2), money(d, raw, b3));
  }
  if (fmt != HGCTL_OUT_TEXT) {
    const char *v[] = {"total", NULL, NULL, NULL, NULL, money_cell(total, raw, b3)};
    hgctl_table_row(&t, v);
    hgctl_table_end(&t);
  } else {
    fprintf(o, "  %-10s %20s %20s %18s\n", "total", "", "", money(total, raw, b3));
  }
  free(accts.id);
  return 0;
}

/* The projected P&L summed over every contract, per firm (ascending) and
 * in all (zero: the contracts' totals are). */
static void firm_totals(const replay_t *rp, const acct_list_t *accts, const __int128 *pnl,
                        bool raw, hgctl_table_t *t, FILE *o) {
  char b[HGCTL_FMT_LEN];
  if (t == NULL) {
    fprintf(o, "what-if P&L to final settlement per firm, all contracts (%s):\n",
            raw ? "micro-USD" : "USD");
    fprintf(o, "  %-10s %18s\n", "firm", "pnl");
  }
  __int128 total = 0;
  int64_t prev = -1; /* the last firm printed */
  for (;;) {
    /* the next firm above prev: accounts are few, firms fewer */
    uint32_t firm = UINT32_MAX;
    bool any = false;
    for (size_t k = 0; k < accts->n; k++) {
      int64_t cash;
      uint32_t f;
      if (hg_exchange_account(rp->ex, accts->id[k], &cash, &f) == 0 && (int64_t)f > prev &&
          f <= firm) {
        firm = f;
        any = true;
      }
    }
    if (!any) break;
    __int128 sum = 0;
    for (size_t k = 0; k < accts->n; k++) {
      int64_t cash;
      uint32_t f;
      if (hg_exchange_account(rp->ex, accts->id[k], &cash, &f) == 0 && f == firm) sum += pnl[k];
    }
    total += sum;
    if (t != NULL) {
      char f[16];
      snprintf(f, sizeof f, "%" PRIu32, firm);
      const char *v[PROJECT_NCOLS] = {"firm", f,    NULL, NULL, NULL,
                                      NULL,   NULL, NULL, money_cell(sum, raw, b)};
      hgctl_table_row(t, v);
    } else {
      fprintf(o, "  %-10" PRIu32 " %18s\n", firm, money(sum, raw, b));
    }
    if (firm == UINT32_MAX) break;
    prev = firm;
  }
  if (t != NULL) {
    const char *v[PROJECT_NCOLS] = {"total", NULL, NULL, NULL, NULL,
                                    NULL,    NULL, NULL, money_cell(total, raw, b)};
    hgctl_table_row(t, v);
  } else {
    fprintf(o, "  %-10s %18s\n", "total", money(total, raw, b));
  }
}

/* The guarantee under the projection (settlement/CONTRACT.md 4.7): each
 * account whose cash now plus its projected P&L is below zero would be
 * bankrupt at final settlement; the fund covers the shortfall as far as it
 * goes, the winners share the rest. Other contracts' P&L is not counted. */
static void guarantee_use(const replay_t *rp, const acct_list_t *accts, const __int128 *pnl,
                          bool raw, FILE *o) {
  hg_clearing_guarantee_t g;
  hg_clearing_guarantee(hgctl_replay_ledger(rp), &g);
  char b1[HGCTL_FMT_LEN], b2[HGCTL_FMT_LEN], b3[HGCTL_FMT_LEN], b4[HGCTL_FMT_LEN];
  fprintf(o, "what-if the guarantee at final settlement, cash now plus the P&L above (%s):\n",
          raw ? "micro-USD" : "USD");
  __int128 shortfall = 0;
  size_t bankrupt = 0;
  for (size_t k = 0; k < accts->n; k++) {
    int64_t cash;
    uint32_t firm;
    if (hg_exchange_account(rp->ex, accts->id[k], &cash, &firm) != 0) continue;
    __int128 after = (__int128)cash + pnl[k];
    if (after >= 0) continue;
    bankrupt++;
    shortfall -= after;
    fprintf(o, "  bankrupt account=%" PRIu32 " firm=%" PRIu32 " cash=%s pnl=%s shortfall=%s\n",
            accts->id[k], firm, money(cash, raw, b1), money(pnl[k], raw, b2),
            money(-after, raw, b3));
  }
  __int128 used = shortfall < g.fund ? shortfall : g.fund;
  fprintf(o, "  bankrupt=%zu shortfall=%s fund=%s fund_used=%s socialized=%s\n", bankrupt,
          money(shortfall, raw, b1), money(g.fund, raw, b2), money(used, raw, b3),
          money(shortfall - used, raw, b4));
}

/* A growing copy of a serialized clearing state (hg_clearing_write_fn). */
typedef struct blob {
  unsigned char *p;
  size_t n, cap;
} blob_t;

static int blob_write(void *ctx, const void *data, size_t len) {
  blob_t *b = ctx;
  if (b->n + len > b->cap) {
    size_t cap = b->cap ? b->cap : 65536;
    while (cap < b->n + len) cap *= 2;
    unsigned char *q = realloc(b->p, cap);
    if (q == NULL) return -ENOMEM;
    b->p = q;
    b->cap = cap;
  }
  memcpy(b->p + b->n, data, len);
  b->n += len;
  return 0;
}

typedef struct all_insts {
  uint32_t id[256];
  size_t n;
} all_insts_t;

static void every_instrument(void *ctx, const hg_exchange_instrument_info_t *info) {
  all_insts_t *l = ctx;
  if (l->n < sizeof l->id / sizeof l->id[0]) l->id[l->n++] = info->id;
}

static const char *standing_word(int state) {
  return state == HG_CLR_LIQUIDATING ? "liquidating" : state == HG_CLR_CALLED ? "called" : "good";
}

/* The clearing's own mark round at the projection (CONTRACT.md 4.6, 4.7),
 * on a copy of the replayed clearing state (serialize, restore): each
 * projected contract quoted at its projected FSP (both sides, so its mark is
 * that price when it lies inside the band around its reference; outside, the
 * mark rule takes the last trade or the reference, clamped), every other
 * contract at its last mark (one never marked: by the rule, from its last
 * trade or its reference). Then each account holding a position with the
 * standing the round leaves it in, and the fund's use if the liquidating
 * accounts were closed out at the marks: a negative equity is what the
 * account would owe after its position is gone; the fund pays it as far as
 * it goes, the winners share the rest. The replayed state is not touched. */
static int standing_use(const replay_t *rp, const inst_list_t *l, const hg_price_t *proj,
                        const acct_list_t *accts, bool raw, hgctl_table_t *t, FILE *o) {
  FILE *note = t != NULL ? stderr : o;
  blob_t b = {0};
  hg_clearing_t *cp = NULL;
  int rc = hg_clearing_serialize(hgctl_replay_ledger(rp), blob_write, &b);
  if (rc == 0) rc = hg_clearing_restore(b.p, b.n, &cp);
  free(b.p);
  if (rc != 0) {
    fprintf(stderr, "hgctl replay: what-if marks: copying the clearing state: %s\n",
            hg_strerror(rc));
    return rc;
  }
  all_insts_t all = {0};
  hg_exchange_foreach_instrument(rp->ex, every_instrument, &all);
  hg_clearing_top_t tops[256];
  size_t nt = 0;
  for (size_t i = 0; i < all.n; i++) {
    hg_price_t m = 0;
    for (size_t k = 0; k < l->n; k++)
      if (l->id[k] == all.id[i] && proj[k] > 0) m = proj[k];
    if (m == 0 && (hg_clearing_mark_get(cp, all.id[i], &m, NULL) != 0 || m <= 0)) continue;
    tops[nt++] = (hg_clearing_top_t){.instrument = all.id[i], .best_bid = m, .best_ask = m};
  }
  rc = hg_clearing_mark(cp, tops, nt, NULL);
  if (rc != 0) {
    fprintf(stderr, "hgctl replay: what-if marks: %s\n", hg_strerror(rc));
    hg_clearing_destroy(cp);
    return rc;
  }
  char b1[HGCTL_FMT_LEN], b2[HGCTL_FMT_LEN], b3[HGCTL_FMT_LEN], b4[HGCTL_FMT_LEN],
      b5[HGCTL_FMT_LEN];
  fprintf(note, "what-if standing at the projected marks, the clearing's mark round on a copy "
                "(%s):\n", raw ? "micro-USD; prices in ticks" : "USD");
  for (size_t k = 0; k < l->n; k++) {
    hg_price_t m = 0;
    if (proj[k] <= 0 || hg_clearing_mark_get(cp, l->id[k], &m, NULL) != 0) continue;
    const char *sym = hgctl_replay_symbol(rp, l->id[k]);
    fprintf(note, "  mark %s instrument=%" PRIu32 " projected=%s mark=%s%s\n", sym ? sym : "?",
            l->id[k], hgctl_fmt_price_raw(proj[k], raw, b1), hgctl_fmt_price_raw(m, raw, b2),
            m != proj[k] ? " (the projection lies outside the band around the reference: the mark "
                           "rule takes the last trade or the reference, within the band)"
                         : "");
    if (t != NULL) {
      char id[16];
      snprintf(id, sizeof id, "%" PRIu32, l->id[k]);
      const char *v[PROJECT_NCOLS] = {"mark", NULL, NULL, id, sym, NULL, NULL,
                                      hgctl_fmt_price_raw(proj[k], raw, b1), NULL,
                                      hgctl_fmt_price_raw(m, raw, b2)};
      hgctl_table_row(t, v);
    }
  }
  __int128 shortfall = 0;
  uint32_t called = 0, liquidating = 0;
  for (size_t k = 0; k < accts->n; k++) {
    hg_clearing_standing_t st;
    if (hg_clearing_standing(cp, accts->id[k], &st) != 0) continue;
    if (st.im == 0 && st.state == HG_CLR_OK) continue; /* holds no position */
    /* equity saturates at INT64_MIN: its negation saturates too */
    int64_t owed = st.state != HG_CLR_LIQUIDATING || st.equity >= 0 ? 0
                   : st.equity == INT64_MIN                          ? INT64_MAX
                                                                     : -st.equity;
    shortfall += owed;
    called += st.state == HG_CLR_CALLED;
    liquidating += st.state == HG_CLR_LIQUIDATING;
    uint32_t firm = firm_of(rp, accts->id[k]);
    if (t != NULL) {
      char f[16], a[16];
      snprintf(f, sizeof f, "%" PRIu32, firm);
      snprintf(a, sizeof a, "%" PRIu32, accts->id[k]);
      const char *v[PROJECT_NCOLS] = {
          "standing", f, a, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
          standing_word(st.state), money_cell(st.equity, raw, b1), money_cell(st.im, raw, b2),
          money_cell(st.mm, raw, b3), money_cell(st.call_amount, raw, b4),
          money_cell(owed, raw, b5)};
      hgctl_table_row(t, v);
    }
    fprintf(note, "  account=%" PRIu32 " firm=%" PRIu32 " standing=%s equity=%s "
                  "initial_margin=%s maintenance_margin=%s call=%s shortfall=%s\n",
            accts->id[k], firm, standing_word(st.state), money(st.equity, raw, b1),
            money(st.im, raw, b2), money(st.mm, raw, b3), money(st.call_amount, raw, b4),
            money(owed, raw, b5));
  }
  hg_clearing_guarantee_t g;
  hg_clearing_guarantee(cp, &g);
  hg_clearing_destroy(cp);
  __int128 used = shortfall < g.fund ? shortfall : g.fund;
  fprintf(note, "  called=%" PRIu32 " liquidating=%" PRIu32 " shortfall=%s fund=%s fund_used=%s "
                "socialized=%s\n", called, liquidating, money(shortfall, raw, b1),
          money(g.fund, raw, b2), money(used, raw, b3), money(shortfall - used, raw, b4));
  if (t != NULL) {
    const char *v[PROJECT_NCOLS] = {"guarantee", NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                    NULL, NULL, NULL, NULL, NULL, NULL,
                                    money_cell(shortfall, raw, b1), money_cell(g.fund, raw, b2),
                                    money_cell(used, raw, b3),
                                    money_cell(shortfall - used, raw, b4)};
    hgctl_table_row(t, v);
  }
  return 0;
}

int hgctl_whatif_project(const replay_t *rp, int64_t value, bool raw, hgctl_out_t fmt, FILE *o) {
  inst_list_t l = {.rp = rp};
  hg_exchange_foreach_instrument(rp->ex, pick_instrument, &l);
  acct_list_t accts;
  if (hgctl_replay_accounts(rp, &accts) != 0) return -ENOMEM;
  __int128 *pnl = calloc(accts.n ? accts.n : 1, sizeof *pnl);
  if (pnl == NULL) {
    free(accts.id);
    return -ENOMEM;
  }
  hgctl_table_t table, *t = NULL;
  if (fmt != HGCTL_OUT_TEXT) {
    size_t ncols;
    const hgctl_col_t *cols = project_cols(raw, &ncols);
    hgctl_table_start(&table, o, fmt, cols, ncols);
    t = &table;
  }
  size_t done = 0;
  hg_price_t proj[sizeof l.id / sizeof l.id[0]] = {0}; /* projected FSP per l.id, 0: none */
  for (size_t k = 0; k < l.n; k++) {
    hg_clearing_instrument_info_t ii;
    if (hg_clearing_instrument_info(hgctl_replay_ledger(rp), l.id[k], &ii) != 0 || ii.settled)
      continue;
    int rc = project_one(rp, l.id[k], value, raw, &accts, pnl, t, o, &proj[k]);
    if (rc != 0) {
      free(pnl);
      free(accts.id);
      return rc;
    }
    done++;
  }
  if (done > 0) {
    firm_totals(rp, &accts, pnl, raw, t, o);
    /* a json or csv table keeps stdout to itself: the guarantee's lines go
     * beside the replay's own, to stderr */
    guarantee_use(rp, &accts, pnl, raw, t != NULL ? stderr : o);
    int rc = standing_use(rp, &l, proj, &accts, raw, t, o);
    if (rc != 0) {
      if (t != NULL) hgctl_table_end(t);
      free(pnl);
      free(accts.id);
      return rc;
    }
  }
  if (t != NULL) hgctl_table_end(t);
  free(pnl);
  free(accts.id);
  if (done == 0) {
    fprintf(stderr, "hgctl replay: no open contract of %s.%s at the end of the replay: nothing to "
                    "project\n", rp->wf_gpu, rp->wf_grade);
    return HG_ENOTFOUND;
  }
  fputs("what-if: nothing was applied; the state, its hashes and the statements are the "
        "journal's\n", t != NULL ? stderr : o);
  return 0;
}
