/*
 * The squeeze scenario (scenario.h): the clearing guarantee under stress.
 * One contract, B200.A.2027-12, listed on 2027-06-07 at 2.000 USD per
 * GPU-hour; a GPU shortage then takes the index and the contract to 3.200
 * (+60%) in five trading days, a 19.5% gap on the first, against a short
 * producer and a thinly collateralised maker, with one liquidity provider
 * whose offers are thin.
 *
 * Like the month scenario it drives the real pipeline in lock-step batches
 * with a clock of its own, so two runs write the same journal, state and
 * output. It draws nothing at random: every order, price and quantity is in
 * the tables below, so each figure of the output can be recomputed by hand
 * from settlement/CONTRACT.md sections 4 and 6 and the fills export.
 *
 * Each simulated day d >= 1 (all UTC):
 *   00:30  PUBLISH_FIXING of day d - 1 (the index follows the squeeze);
 *   10:00  the provider requotes: bid P_d - 5 (1 lot), ask P_d + 5 (ask_qty);
 *   10:05  MARK (mark = the mid, P_d; liquidation slices hit the thin ask);
 *   12:00  the producer meets a call: deposits the call amount it was told;
 *   12:30  the provider requotes (1 lot each side);  13:00 MARK;
 *   15:58  the provider requotes (1 lot each side: the DSP is the mid P_d);
 *   16:00  DAILY_SETTLEMENT (VM, the waterfall, the evaluation at the DSP).
 *
 * What it checks itself: every command of the script is accepted (the
 * producer's refusals aside, there are none), the VM of each cycle sums to
 * zero, and the clearing's totals are conserved (balances + fund ==
 * deposits - withdrawals - fees). The last line of the output is the
 * summary; statements (every account, and the fund) and fills.csv go to the
 * data directory.
 */
#include "scenario.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hourglass/civil.h"
#include "hourglass/clearing.h"
#include "hourglass/error.h"
#include "hourglass/exchange.h"
#include "scenario_run.h"

#define SQ_ORIGIN UINT64_C(0x5d)
#define SQ_INSTR 1u
#define SQ_DAYS 7 /* days after listing */
#define SQ_BATCH 64
#define SQ_NACCT 5
#define SQ_FILLS_MAX 256
#define SQ_USD INT64_C(1000000)

enum { PRODUCER, MAKER, HEDGER1, HEDGER2, PROVIDER };

static const struct {
  hg_account_t id;
  uint32_t firm;
  const char *name;
  int64_t deposit; /* micro-USD, at listing */
} sq_accounts[SQ_NACCT] = {
    {101, 10, "producer", 14000 * SQ_USD}, /* short 20: called on day 1 */
    {102, 11, "maker", 3000 * SQ_USD},     /* short 10 on exactly its IM */
    {201, 20, "hedger-1", 60000 * SQ_USD}, /* long 20 */
    {202, 21, "hedger-2", 30000 * SQ_USD}, /* long 10 */
    {301, 30, "provider", 1000000 * SQ_USD},
};

/* The operator's funding of the insurance fund, before any trade. */
#define SQ_FUND (1000 * SQ_USD)
/* The squeeze: the provider's mid (ticks) on day d, and its offer size at
 * 10:00 (what a liquidation can buy that day). */
static const int64_t sq_price[SQ_DAYS + 1] = {2000, 2390, 2640, 2880, 3040, 3200, 3200, 3200};
static const int64_t sq_ask_qty[SQ_DAYS + 1] = {1, 2, 2, 10, 10, 10, 10, 10};

typedef struct sq_fill {
  uint64_t seq, ts;
  int64_t price, qty;
  hg_account_t buyer, seller, liquidated; /* liquidated: 0 = an ordinary fill */
  int aggressor;                          /* HG_SIDE_* */
} sq_fill_t;

typedef struct sq {
  hg_scenario_run_t run; /* pipeline, clock, output, failure flag */
  int32_t day0, day;
  hg_command_t cmds[SQ_BATCH];
  uint64_t coid;
  sq_fill_t fills[SQ_FILLS_MAX];
  size_t nfills;
  int64_t call[SQ_NACCT]; /* the last MARGIN_CALL's amount, 0 = none */
  int state[SQ_NACCT];    /* its standing, 0 = in good standing */
  int ever_called[SQ_NACCT], ever_liq[SQ_NACCT], ever_bankrupt[SQ_NACCT];
  int64_t cover[SQ_NACCT], social[SQ_NACCT];
  int64_t dsp[SQ_DAYS + 1];
  int64_t fund;
} sq_t;

static void sq_time(sq_t *s, int hour, int minute) {
  hg_scenario_set_time(&s->run, s->day0 + s->day, hour, minute);
}

static int sq_index(hg_account_t a) {
  for (int i = 0; i < SQ_NACCT; i++)
    if (sq_accounts[i].id == a) return i;
  return -1;
}

/* "2027-06-08 10:05" of an event's timestamp. */
static void sq_when(uint64_t ts, char out[32]) {
  char d[11];
  uint64_t sec = ts / 1000000000u;
  hg_civil_format_date((int32_t)(sec / 86400u), d);
  snprintf(out, 32, "%s %02u:%02u", d, (unsigned)(sec % 86400u / 3600u),
           (unsigned)(sec % 3600u / 60u));
}

static void sq_event(sq_t *s, const hg_exchange_event_t *ev) {
  char w[32], a[32], b[32], c[32];
  int i = sq_index(ev->account);
  sq_when(ev->ts, w);
  switch (ev->type) {
  case HG_XEV_BOOK:
    if (ev->book.type == HG_EV_FILL) {
      if (s->nfills == SQ_FILLS_MAX) {
        hg_scenario_fail(&s->run, "more than %d fills", SQ_FILLS_MAX);
        break;
      }
      sq_fill_t *f = &s->fills[s->nfills++];
      f->seq = ev->seq;
      f->ts = ev->ts;
      f->price = ev->book.price;
      f->qty = ev->book.qty;
      f->aggressor = ev->book.side;
      f->buyer = ev->book.side == HG_SIDE_BUY ? ev->book.account : ev->book.maker_account;
      f->seller = ev->book.side == HG_SIDE_BUY ? ev->book.maker_account : ev->book.account;
      f->liquidated = ev->kind == HG_XBOOK_LIQUIDATION ? ev->book.account : 0;
      if (f->liquidated != 0) {
        int k = sq_index(f->liquidated);
        if (k >= 0) s->ever_liq[k] = 1;
        fprintf(s->run.out, "%s   liquidation: %s %s %" PRId64 " at %" PRId64 "\n", w,
                k >= 0 ? sq_accounts[k].name : "?", f->aggressor == HG_SIDE_BUY ? "buys" : "sells",
                f->qty, f->price);
      }
    } else if (ev->book.type == HG_EV_REJECTED) {
      hg_scenario_fail(&s->run, "%s: order refused (reason %u)", w, (unsigned)ev->book.reason);
    }
    break;
  case HG_XEV_REJECTED:
    hg_scenario_fail(&s->run, "%s: %s refused: %s", w, hg_command_type_str(ev->command),
            hg_xreject_str(ev->reason));
    break;
  case HG_XEV_MARK:
    fprintf(s->run.out, "%s MARK %" PRId64 " (band %" PRId64 "..%" PRId64 ")\n", w, ev->price,
            ev->lo, ev->hi);
    break;
  case HG_XEV_MARGIN_CALL:
    if (i < 0) break;
    s->call[i] = ev->amount;
    s->state[i] = ev->status;
    if (ev->status == HG_CLR_LIQUIDATING) s->ever_liq[i] |= 2;
    s->ever_called[i] = 1;
    hg_scenario_usd(ev->balance, a, sizeof a);
    hg_scenario_usd(ev->margin, b, sizeof b);
    hg_scenario_usd(ev->amount, c, sizeof c);
    fprintf(s->run.out, "%s   %s %s: equity %s, margin %s, call %s\n", w, sq_accounts[i].name,
            ev->status == HG_CLR_LIQUIDATING ? "LIQUIDATING" : "CALLED", a, b, c);
    break;
  case HG_XEV_CASH:
    if (ev->account == HG_CLR_FUND_ACCOUNT) s->fund = ev->balance;
    if (i < 0) break;
    if (ev->kind == HG_LEDGER_FUND_COVER) {
      s->cover[i] += ev->amount;
      s->ever_bankrupt[i] = 1;
      hg_scenario_usd(ev->amount, a, sizeof a);
      fprintf(s->run.out, "%s   bankrupt: %s, the fund pays %s\n", w, sq_accounts[i].name, a);
    } else if (ev->kind == HG_LEDGER_SOCIALIZED) {
      s->social[i] += ev->amount;
      if (ev->amount > 0) s->ever_bankrupt[i] = 1;
      hg_scenario_usd(ev->amount, a, sizeof a);
      fprintf(s->run.out, "%s   socialized: %s %s\n", w, sq_accounts[i].name, a);
    }
    break;
  case HG_XEV_DSP:
    if (ev->instrument_id == SQ_INSTR && s->day >= 0 && s->day <= SQ_DAYS)
      s->dsp[s->day] = ev->price;
    break;
  case HG_XEV_CYCLE:
    if (ev->amount != 0)
      hg_scenario_fail(&s->run, "%s: the cycle's VM sums to %" PRId64, w, ev->amount);
    hg_scenario_usd(ev->hi, a, sizeof a);
    fprintf(s->run.out,
            "%s cycle: DSP %" PRId64 ", VM paid to winners %s, bankrupt %" PRId64 "\n", w,
            s->dsp[s->day], a, ev->margin);
    break;
  default:
    break;
  }
}

static void sq_record(void *ctx, const hg_pipe_out_t *r) {
  if (r->kind == HG_PIPE_EVENT) sq_event(ctx, &r->event);
}

static int sq_run(sq_t *s, size_t n) { return hg_scenario_run_batch(&s->run, s->cmds, n); }

static hg_command_t *sq_add(sq_t *s, size_t *n, uint32_t type) {
  hg_command_t *c = &s->cmds[(*n)++];
  memset(c, 0, sizeof *c);
  c->type = type;
  return c;
}

static void sq_order(sq_t *s, size_t *n, int who, int side, int64_t price, int64_t qty, int tif) {
  hg_command_t *c = sq_add(s, n, HG_COMMAND_NEW_ORDER);
  c->u.new_order.instrument_id = SQ_INSTR;
  c->u.new_order.account = sq_accounts[who].id;
  c->u.new_order.client_order_id = ++s->coid;
  c->u.new_order.side = (uint8_t)side;
  c->u.new_order.type = HG_ORD_LIMIT;
  c->u.new_order.tif = (uint8_t)tif;
  c->u.new_order.price = price;
  c->u.new_order.qty = qty;
}

/* The provider cancels its quotes and quotes P_d -/+ 5 ticks. */
static int sq_quote(sq_t *s, int64_t ask_qty) {
  size_t n = 0;
  hg_command_t *c = sq_add(s, &n, HG_COMMAND_MASS_CANCEL);
  c->u.mass_cancel.instrument_id = SQ_INSTR;
  c->u.mass_cancel.account = sq_accounts[PROVIDER].id;
  c->u.mass_cancel.sides = HG_SIDES_BOTH;
  sq_order(s, &n, PROVIDER, HG_SIDE_BUY, sq_price[s->day] - 5, 1, HG_TIF_GTC);
  sq_order(s, &n, PROVIDER, HG_SIDE_SELL, sq_price[s->day] + 5, ask_qty, HG_TIF_GTC);
  return sq_run(s, n);
}

static int sq_one(sq_t *s, uint32_t type) {
  size_t n = 0;
  hg_command_t *c = sq_add(s, &n, type);
  if (type == HG_COMMAND_DAILY_SETTLEMENT) c->u.daily.day = s->day0 + s->day;
  return sq_run(s, n);
}

static void sq_fixing(sq_t *s, size_t *n, int32_t day, int64_t ticks) {
  hg_command_t *c = sq_add(s, n, HG_COMMAND_PUBLISH_FIXING);
  snprintf(c->u.fixing.gpu, sizeof c->u.fixing.gpu, "B200");
  snprintf(c->u.fixing.grade, sizeof c->u.fixing.grade, "A");
  snprintf(c->u.fixing.source, sizeof c->u.fixing.source, "squeeze");
  c->u.fixing.day = day;
  c->u.fixing.value = ticks * 1000;
}

static int sq_setup(sq_t *s) {
  size_t n = 0;
  s->day = 0;
  sq_time(s, 9, 0);
  hg_command_t *c = sq_add(s, &n, HG_COMMAND_LIST_INSTRUMENT);
  snprintf(c->u.list.symbol, sizeof c->u.list.symbol, "B200.A.2027-12");
  hg_book_params_t *bp = &c->u.list.params;
  bp->instrument_id = SQ_INSTR;
  bp->tick_size = 1000;
  bp->contract_unit = 1000;
  bp->min_price = 1;
  bp->max_price = 100000;
  bp->max_order_qty = 1000;
  bp->ref_price = sq_price[0]; /* no book band: the clearing's, around the last DSP */
  bp->max_orders = 1024;
  bp->max_accounts = 16;
  for (int i = 0; i < SQ_NACCT; i++) {
    c = sq_add(s, &n, HG_COMMAND_ADD_ACCOUNT);
    c->u.add_account.account = sq_accounts[i].id;
    c->u.add_account.firm = sq_accounts[i].firm;
    c = sq_add(s, &n, HG_COMMAND_DEPOSIT);
    c->u.cash.account = sq_accounts[i].id;
    c->u.cash.amount = sq_accounts[i].deposit;
  }
  sq_fixing(s, &n, s->day0 - 1, sq_price[0]);
  sq_add(s, &n, HG_COMMAND_FUND_DEPOSIT)->u.fund.amount = SQ_FUND;
  int rc = sq_run(s, n);
  if (rc != 0) return rc;
  char d[11], a[32];
  hg_civil_format_date(s->day0, d);
  hg_scenario_usd(SQ_FUND, a, sizeof a);
  fprintf(s->run.out, "%s 09:00 listed B200.A.2027-12 (id %u) at %" PRId64
                  "; the operator funds the insurance fund with %s\n",
          d, SQ_INSTR, sq_price[0], a);
  for (int i = 0; i < SQ_NACCT; i++) {
    hg_scenario_usd(sq_accounts[i].deposit, a, sizeof a);
    fprintf(s->run.out, "  account %u %-9s deposits %s\n", (unsigned)sq_accounts[i].id,
            sq_accounts[i].name, a);
  }
  /* The positions: the producer sells 20 and the maker 10 to the hedgers. */
  sq_time(s, 10, 0);
  if ((rc = sq_quote(s, sq_ask_qty[0])) != 0) return rc;
  n = 0;
  sq_order(s, &n, HEDGER1, HG_SIDE_BUY, sq_price[0], 20, HG_TIF_GTC);
  sq_order(s, &n, PRODUCER, HG_SIDE_SELL, sq_price[0], 20, HG_TIF_IOC);
  sq_order(s, &n, HEDGER2, HG_SIDE_BUY, sq_price[0], 10, HG_TIF_GTC);
  sq_order(s, &n, MAKER, HG_SIDE_SELL, sq_price[0], 10, HG_TIF_IOC);
  if ((rc = sq_run(s, n)) != 0) return rc;
  fprintf(s->run.out, "%s 10:00 producer sells 20 to hedger-1 and maker sells 10 to hedger-2 at "
                  "%" PRId64 "\n",
          d, sq_price[0]);
  sq_time(s, 16, 0);
  return sq_one(s, HG_COMMAND_DAILY_SETTLEMENT);
}

static int sq_day(sq_t *s) {
  int rc;
  size_t n = 0;
  char d[11];
  hg_civil_format_date(s->day0 + s->day, d);
  sq_time(s, 0, 30);
  sq_fixing(s, &n, s->day0 + s->day - 1, sq_price[s->day - 1]);
  if ((rc = sq_run(s, n)) != 0) return rc;
  fprintf(s->run.out,
          "%s index fixing of the day before: %" PRId64 "; provider's mid today %" PRId64
          ", offer %" PRId64 " lots\n",
          d, sq_price[s->day - 1], sq_price[s->day], sq_ask_qty[s->day]);
  sq_time(s, 10, 0);
  if ((rc = sq_quote(s, sq_ask_qty[s->day])) != 0) return rc;
  sq_time(s, 10, 5);
  if ((rc = sq_one(s, HG_COMMAND_MARK)) != 0) return rc;
  if (s->call[PRODUCER] > 0 && s->state[PRODUCER] != 0) {
    char a[32];
    sq_time(s, 12, 0);
    n = 0;
    hg_command_t *c = sq_add(s, &n, HG_COMMAND_DEPOSIT);
    c->u.cash.account = sq_accounts[PRODUCER].id;
    c->u.cash.amount = s->call[PRODUCER];
    s->call[PRODUCER] = 0;
    s->state[PRODUCER] = 0;
    if ((rc = sq_run(s, n)) != 0) return rc;
    hg_scenario_usd(c->u.cash.amount, a, sizeof a);
    fprintf(s->run.out, "%s 12:00   producer meets its call: deposits %s\n", d, a);
  }
  sq_time(s, 12, 30);
  if ((rc = sq_quote(s, 1)) != 0) return rc;
  sq_time(s, 13, 0);
  if ((rc = sq_one(s, HG_COMMAND_MARK)) != 0) return rc;
  sq_time(s, 15, 58);
  if ((rc = sq_quote(s, 1)) != 0) return rc;
  sq_time(s, 16, 0);
  return sq_one(s, HG_COMMAND_DAILY_SETTLEMENT);
}

/* ---------------------------------------------------------------- output */

static int sq_write(const char *dir, const char *name, const hg_ledger_entry_t *e, size_t n,
                    hg_account_t account, int json) {
  char path[4096];
  size_t len = 0;
  int rc = hg_clearing_statement_of(e, n, account, HG_CLR_NO_INSTRUMENT, json, NULL, 0, &len);
  if (rc != 0 && rc != HG_ERANGE) return rc;
  char *buf = malloc(len + 1);
  if (buf == NULL) return -ENOMEM;
  rc = hg_clearing_statement_of(e, n, account, HG_CLR_NO_INSTRUMENT, json, buf, len + 1, &len);
  snprintf(path, sizeof path, "%s/statements/%s.%s", dir, name, json ? "json" : "csv");
  FILE *f = rc == 0 ? fopen(path, "w") : NULL;
  if (rc == 0 && f == NULL) rc = -errno;
  if (f != NULL) {
    if (fwrite(buf, 1, len, f) != len) rc = -EIO;
    if (fclose(f) != 0 && rc == 0) rc = -EIO;
  }
  free(buf);
  return rc;
}

/* Statements of every account and of the fund (all their entries, deposits
 * included), and the fills export. */
static int sq_files(sq_t *s, const hg_clearing_t *c, const char *dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/statements", dir);
  if (mkdir(path, 0750) != 0 && errno != EEXIST) return -errno;
  uint64_t nl = hg_clearing_ledger_size(c);
  hg_ledger_entry_t *e = calloc(nl ? nl : 1, sizeof *e);
  if (e == NULL) return -ENOMEM;
  int rc = 0;
  for (uint64_t k = 0; k < nl && rc == 0; k++) rc = hg_clearing_ledger_get(c, k, &e[k]);
  for (int i = 0; i <= SQ_NACCT && rc == 0; i++) {
    char name[32];
    hg_account_t a = i < SQ_NACCT ? sq_accounts[i].id : HG_CLR_FUND_ACCOUNT;
    if (i < SQ_NACCT) snprintf(name, sizeof name, "%u", (unsigned)a);
    else snprintf(name, sizeof name, "fund");
    for (int json = 0; json < 2 && rc == 0; json++) rc = sq_write(dir, name, e, nl, a, json);
  }
  free(e);
  if (rc != 0) return rc;
  snprintf(path, sizeof path, "%s/fills.csv", dir);
  FILE *f = fopen(path, "w");
  if (f == NULL) return -errno;
  fprintf(f, "seq,ts,instrument,price,qty,buyer,seller,aggressor,liquidated\n");
  for (size_t k = 0; k < s->nfills; k++) {
    const sq_fill_t *x = &s->fills[k];
    fprintf(f, "%" PRIu64 ",%" PRIu64 ",%u,%" PRId64 ",%" PRId64 ",%u,%u,%s,%u\n", x->seq, x->ts,
            SQ_INSTR, x->price, x->qty, (unsigned)x->buyer, (unsigned)x->seller,
            x->aggressor == HG_SIDE_BUY ? "BUY" : "SELL", (unsigned)x->liquidated);
  }
  return fclose(f) != 0 ? -EIO : 0;
}

static void sq_report(sq_t *s, const char *dir) {
  FILE *o = s->run.out;
  const hg_exchange_t *ex = hg_pipeline_exchange(s->run.p);
  const hg_clearing_t *c = hg_exchange_clearing(ex);
  char a[32], b[32], e[32];
  fprintf(o, "\nDSPs (ticks):");
  for (int d = 0; d <= SQ_DAYS; d++) fprintf(o, " %" PRId64, s->dsp[d]);
  fprintf(o, "\n%-7s %-9s %9s %18s %16s %16s\n", "account", "name", "position", "cash",
          "fund_cover", "socialized");
  for (int i = 0; i < SQ_NACCT; i++) {
    hg_clearing_position_t pos;
    hg_clearing_account_info_t ai;
    if (hg_clearing_position(c, sq_accounts[i].id, SQ_INSTR, &pos) != 0 ||
        hg_clearing_account_info(c, sq_accounts[i].id, &ai) != 0) {
      hg_scenario_fail(&s->run, "account %u: no clearing record", (unsigned)sq_accounts[i].id);
      continue;
    }
    hg_scenario_usd(ai.balance, a, sizeof a);
    hg_scenario_usd(s->cover[i], b, sizeof b);
    hg_scenario_usd(s->social[i], e, sizeof e);
    fprintf(o, "%-7u %-9s %9" PRId64 " %18s %16s %16s\n", (unsigned)sq_accounts[i].id,
            sq_accounts[i].name, pos.pos, a, b, e);
  }
  hg_clearing_guarantee_t g;
  hg_clearing_totals_t t;
  hg_clearing_guarantee(c, &g);
  hg_clearing_totals(c, &t);
  hg_scenario_usd(g.liq_fees, a, sizeof a);
  hg_scenario_usd(g.fund_used, b, sizeof b);
  fprintf(o, "fund: liquidation fees %s, paid to bankrupt accounts %s\n", a, b);
  int conserved = hg_clearing_conserved(c) &&
                  t.balances + t.fund == t.deposits - t.withdrawals - t.fees && g.fund == s->fund;
  if (!conserved) hg_scenario_fail(&s->run, "conservation failed");
  hg_scenario_print_hash(&s->run);
  int rc = sq_files(s, c, dir);
  if (rc != 0) hg_scenario_fail(&s->run, "cannot write statements or fills: %s", hg_strerror(rc));
  else
    fprintf(o, "statements/<account>.csv|.json, statements/fund.csv|.json and fills.csv in the "
               "data dir\n");
  int calls = 0, liq = 0, bankrupt = 0;
  for (int i = 0; i < SQ_NACCT; i++) {
    calls += s->ever_called[i];
    liq += (s->ever_liq[i] & 1) != 0;
    bankrupt += s->ever_bankrupt[i];
  }
  fprintf(o, "squeeze: accounts=%d calls=%d liquidated=%d bankrupt=%d fund_start=%" PRId64
             " fund_end=%" PRId64 " socialized=%" PRId64 " conservation=%s\n",
          SQ_NACCT, calls, liq, bankrupt, (int64_t)SQ_FUND, g.fund, g.socialized,
          conserved ? "OK" : "FAILED");
}

int hg_scenario_squeeze(const hg_pipeline_config_t *base, const char *data_dir, FILE *out,
                        FILE *err) {
  sq_t *s = calloc(1, sizeof *s);
  if (s == NULL) return HG_SCENARIO_ERROR;
  s->run.out = out;
  s->run.err = err;
  s->day0 = hg_civil_to_day(2027, 6, 7);
  s->run.on_record = sq_record;
  s->run.ctx = s;
  s->run.origin = SQ_ORIGIN;
  int result = HG_SCENARIO_ERROR;
  if (hg_scenario_open(&s->run, base, data_dir) != 0) goto done;
  fprintf(out, "Hourglass squeeze scenario: a GPU shortage against a short producer and a thin "
               "maker (simulated time, UTC; prices in ticks of 0.001 USD per GPU-hour)\n");
  int rc = sq_setup(s);
  for (s->day = 1; rc == 0 && s->day <= SQ_DAYS; s->day++) rc = sq_day(s);
  if (hg_scenario_stop(&s->run, rc) != 0) goto done;
  sq_report(s, data_dir);
  result = s->run.failed ? HG_SCENARIO_FAILED : HG_SCENARIO_OK;
done:
  fflush(out);
  hg_pipeline_close(s->run.p);
  free(s);
  return result;
}
