/*
 * The month scenario (scenario.h). A loop over simulated days drives the
 * pipeline in lock-step batches: set the clock, submit a batch, consume until
 * every command of it is DONE, look at the events, move on. Lock-step keeps
 * the run deterministic (one submitter, timestamps chosen here, the demo's
 * seeded generator) and lets the demo's makers learn their order ids before
 * their next step, exactly as in the live demo.
 *
 * What the scenario checks itself, beyond what the state machine enforces:
 * no settlement command is refused except the expiry attempts that must wait
 * for FINAL fixings; an order after the last trading day is refused; every
 * position is closed by the expiry; the cash of the contract (variation
 * margin, final settlement, fees) sums to zero across accounts, in the
 * events and in the ledger alike. Any failure makes the exit status non-zero.
 *
 * The summary is read from the clearing's ledger after the pipeline stopped
 * (the owner thread may read the exchange then), and so are the statements.
 */
#include "scenario.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "demo.h"
#include "scenario_run.h"
#include "hourglass/civil.h"
#include "hourglass/clearing.h"
#include "hourglass/error.h"

#define YEAR 2027
#define MONTH 3
#define SEED UINT64_C(20270301)
#define ORIGIN UINT64_C(0x5c)
#define NPROV 6
#define BATCH_MAX 2048
#define NACCT 5

static const struct {
  hg_account_t id;
  const char *name;
} accounts[NACCT] = {
    {HG_DEMO_MAKER_ACCOUNT(0), "maker-1"}, {HG_DEMO_MAKER_ACCOUNT(1), "maker-2"},
    {HG_DEMO_HEDGER_ACCOUNT(0), "hedger-1"}, {HG_DEMO_HEDGER_ACCOUNT(1), "hedger-2"},
    {HG_DEMO_USER_ACCOUNT, "trader"},
};

static const char *const providers[NPROV] = {"aurora", "basalt", "cirrus",
                                             "dunlin", "ember", "fjord"};
static const char *const regions[NPROV] = {"us-east", "us-west", "eu-west",
                                           "eu-north", "ap-south", "us-central"};
/* Provider's usual price relative to the market, micro-USD per GPU-hour. */
static const int64_t prov_offset[NPROV] = {-9000, 4000, 12000, -3000, 7000, -14000};

typedef struct fixing_seen {
  int64_t value;  /* micro-USD, 0 = none */
  uint8_t status, tier;
} fixing_seen_t;

typedef struct sim {
  hg_scenario_run_t run; /* pipeline, clock, output, failure flag */
  hg_demo_t *demo;
  uint32_t instrument;
  int32_t day0, first_day, last_day; /* listing day; the delivery month */
  hg_command_t cmds[BATCH_MAX];
  /* What the events said (consumer = this thread). */
  uint64_t fills, volume, book_rejects, risk_rejects, ended_rejects;
  uint64_t dsp_tier[5], cycles;
  hg_price_t last_dsp;
  int32_t last_dsp_day;
  fixing_seen_t fx[31];  /* the delivery month's fixings, by day - 1 */
  uint64_t fixings_computed, fixings_final;
  uint32_t missing;      /* bitmap of the last FIXINGS_MISSING reject */
  int expired, expect_wait;
  hg_price_t fsp;
  int64_t ev_vm[NACCT], ev_final[NACCT], ev_pos[NACCT];
  int64_t cycle_sum_abs;  /* |sum of VM| over cycles: must stay 0 */
} sim_t;

static int acct_index(hg_account_t a) {
  for (int i = 0; i < NACCT; i++)
    if (accounts[i].id == a) return i;
  return -1;
}

static void on_event(sim_t *s, const hg_exchange_event_t *ev) {
  int i;
  switch (ev->type) {
  case HG_XEV_BOOK:
    if (ev->book.type == HG_EV_FILL) {
      s->fills++;
      s->volume += (uint64_t)ev->book.qty;
    } else if (ev->book.type == HG_EV_REJECTED) {
      s->book_rejects++;
      if (ev->book.reason == HG_XREJ_TRADING_ENDED) s->ended_rejects++;
      if (ev->book.reason >= 32 && ev->book.reason < 64) s->risk_rejects++;
    }
    break;
  case HG_XEV_REJECTED:
    if (ev->command == HG_COMMAND_EXPIRE && ev->reason == HG_XREJ_FIXINGS_MISSING &&
        s->expect_wait) {
      s->missing = (uint32_t)ev->balance;
    } else if (ev->command == HG_COMMAND_NEW_ORDER && ev->reason == HG_XREJ_TRADING_ENDED) {
      s->ended_rejects++;
    } else {
      hg_scenario_fail(&s->run, "%s refused: %s (day %d)", hg_command_type_str(ev->command),
           hg_xreject_str(ev->reason), (int)ev->day);
    }
    break;
  case HG_XEV_DSP:
    if (ev->instrument_id == s->instrument && ev->tier < 5) {
      s->dsp_tier[ev->tier]++;
      s->last_dsp = ev->price;
      s->last_dsp_day = ev->day;
    }
    break;
  case HG_XEV_CYCLE:
    s->cycles++;
    s->cycle_sum_abs += ev->amount < 0 ? -ev->amount : ev->amount;
    break;
  case HG_XEV_VM:
    if ((i = acct_index(ev->account)) >= 0) s->ev_vm[i] += ev->amount;
    break;
  case HG_XEV_FIXING:
    if (ev->outcome == HG_XFIX_FINALIZED) s->fixings_final++;
    else s->fixings_computed++;
    if (ev->day >= s->first_day && ev->day <= s->last_day) {
      fixing_seen_t *f = &s->fx[ev->day - s->first_day];
      if (ev->outcome != HG_XFIX_FINALIZED) {
        f->value = ev->price;
        f->tier = ev->tier;
      }
      f->status = ev->status;
    }
    break;
  case HG_XEV_FINAL_SETTLEMENT:
    if ((i = acct_index(ev->account)) >= 0) {
      s->ev_final[i] += ev->amount;
      s->ev_pos[i] = ev->qty;
    }
    break;
  case HG_XEV_EXPIRED:
    if (ev->instrument_id == s->instrument) {
      s->expired = 1;
      s->fsp = ev->price;
    }
    break;
  default:
    break;
  }
}

/* Every record polled: the events to the checks, everything to the demo's
 * makers (they learn their order ids). */
static void on_record(void *ctx, const hg_pipe_out_t *r) {
  sim_t *s = ctx;
  if (r->kind == HG_PIPE_EVENT) on_event(s, &r->event);
  hg_demo_observe(s->demo, r);
}

/* Submits s->cmds[0..n) at the current simulated time and consumes until
 * all of them are processed. 0, or a pipeline error. */
static int run_batch(sim_t *s, size_t n) { return hg_scenario_run_batch(&s->run, s->cmds, n); }

static hg_command_t *add(sim_t *s, size_t *n, uint32_t type) {
  hg_command_t *c = &s->cmds[(*n)++];
  memset(c, 0, sizeof *c);
  c->type = type;
  return c;
}

static void index_name(char *gpu, char *grade) {
  snprintf(gpu, HG_INDEX_GPU_MAX, "B200");
  snprintf(grade, HG_INDEX_GRADE_MAX, "A");
}

/* The rental market of day d: each hour from 06:00 to 19:00 five of the six
 * providers trade (one rests in turn), around a rent that drifts up by 0.0005
 * USD a day; one quote (not used in tier 1) and one far-off print a day (an
 * outlier) show the exclusions at work. */
static size_t day_samples(sim_t *s, int32_t d, hg_index_sample_t *out) {
  size_t n = 0;
  int64_t centre = 3385000 + 500 * (int64_t)(d - s->day0);
  for (int h = 6; h < 20; h++) {
    for (int p = 0; p < NPROV; p++) {
      if ((d + h) % NPROV == p) continue;
      uint32_t r = hg_demo_mix((uint32_t)d * 1000003u + (uint32_t)h * 131u + (uint32_t)p);
      hg_index_sample_t *x = &out[n++];
      memset(x, 0, sizeof *x);
      x->ts = (int64_t)d * 86400 + h * 3600 + p * 60 + (int64_t)(r % 60);
      x->price = centre + prov_offset[p] + (int64_t)(r % 12001) - 6000;
      x->volume = 40 + (int64_t)((r >> 16) % 81);
      x->term_days = 1 + (int32_t)((r >> 8) % 30);
      x->kind = HG_INDEX_TRADE;
      snprintf(x->provider, sizeof x->provider, "%s", providers[p]);
      snprintf(x->region, sizeof x->region, "%s", regions[p]);
      index_name(x->gpu, x->grade);
    }
  }
  hg_index_sample_t *q = &out[n++];
  *q = out[0];
  q->ts += 1800;
  q->kind = HG_INDEX_QUOTE;
  q->price = centre + 30000;
  hg_index_sample_t *o = &out[n++];
  *o = out[1];
  o->ts += 1200;
  o->price = centre * 2; /* a fat-finger print */
  return n;
}

/* Stages day d's samples, computes its fixing and finalizes day d - 2
 * (published on d + 1, final on d + 3). */
static void index_day(sim_t *s, size_t *n, int32_t d) {
  static hg_index_sample_t smp[NPROV * 24 + 8]; /* scenario thread only */
  size_t ns = day_samples(s, d, smp);
  for (size_t i = 0; i < ns; i += HG_SAMPLES_PER_COMMAND) {
    hg_command_t *c = add(s, n, HG_COMMAND_PUBLISH_SAMPLES);
    index_name(c->u.samples.gpu, c->u.samples.grade);
    c->u.samples.day = d;
    c->u.samples.n = (uint32_t)(ns - i < HG_SAMPLES_PER_COMMAND ? ns - i : HG_SAMPLES_PER_COMMAND);
    memcpy(c->u.samples.s, &smp[i], c->u.samples.n * sizeof smp[0]);
  }
  hg_command_t *c = add(s, n, HG_COMMAND_COMPUTE_FIXING);
  index_name(c->u.index_day.gpu, c->u.index_day.grade);
  c->u.index_day.day = d;
  if (d - 2 >= s->day0) {
    c = add(s, n, HG_COMMAND_FINALIZE_FIXING);
    index_name(c->u.index_day.gpu, c->u.index_day.grade);
    c->u.index_day.day = d - 2;
  }
}

static int step_demo(sim_t *s, int32_t d, int hour, int minute) {
  hg_scenario_set_time(&s->run, d, hour, minute);
  size_t n = hg_demo_step(s->demo, s->cmds, BATCH_MAX);
  return run_batch(s, n);
}

/* --------------------------------------------------------------- report */

typedef struct acct_sum {
  int64_t vm, final, fees, pos;
} acct_sum_t;

static int write_statements(sim_t *s, const hg_clearing_t *c, const char *dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/statements", dir);
  if (mkdir(path, 0750) != 0 && errno != EEXIST) return -errno;
  for (int i = 0; i < NACCT; i++) {
    for (int json = 0; json < 2; json++) {
      snprintf(path, sizeof path, "%s/statements/%u-B200.A.%04d-%02d.%s", dir,
               (unsigned)accounts[i].id, YEAR, MONTH, json ? "json" : "csv");
      FILE *f = fopen(path, "w");
      if (f == NULL) return -errno;
      int rc = json ? hg_clearing_statement_json_file(c, accounts[i].id, s->instrument, f)
                    : hg_clearing_statement_csv_file(c, accounts[i].id, s->instrument, f);
      if (fclose(f) != 0 && rc == 0) rc = -EIO;
      if (rc != 0) return rc;
    }
  }
  return 0;
}

static void report(sim_t *s, const char *dir) {
  FILE *o = s->run.out;
  const hg_exchange_t *ex = hg_pipeline_exchange(s->run.p);
  const hg_clearing_t *c = hg_exchange_clearing(ex);
  char a[32], b[32], e[32], f[32], g[32], day[32];
  acct_sum_t sum[NACCT];
  memset(sum, 0, sizeof sum);
  int64_t fee_income = 0, other = 0;
  uint64_t nl = hg_clearing_ledger_size(c);
  for (uint64_t k = 0; k < nl; k++) {
    hg_ledger_entry_t le;
    if (hg_clearing_ledger_get(c, k, &le) != 0 || le.instrument != s->instrument) continue;
    int i = acct_index(le.account);
    if (i < 0) {
      other += le.amount;
      continue;
    }
    if (le.kind == HG_LEDGER_VM) sum[i].vm += le.amount;
    else if (le.kind == HG_LEDGER_FINAL) sum[i].final += le.amount, sum[i].pos = le.qty;
    else if (le.kind == HG_LEDGER_FEE) sum[i].fees += le.amount, fee_income -= le.amount;
  }

  fprintf(o, "\nfixings of %04d-%02d (IGX B200.A, USD per GPU-hour):\n", YEAR, MONTH);
  int64_t fsum = 0;
  for (int32_t d = s->first_day; d <= s->last_day; d++) {
    const fixing_seen_t *x = &s->fx[d - s->first_day];
    hg_civil_format_date(d, day);
    hg_scenario_usd(x->value, a, sizeof a);
    fprintf(o, "  fixing %s %s %s tier %u\n", day, a,
            x->status == HG_INDEX_FINAL ? "FINAL" : x->status == HG_INDEX_PROVISIONAL ? "PROVISIONAL"
                                                                                     : "NONE",
            x->tier);
    fsum += x->value;
  }
  int64_t nd = s->last_day - s->first_day + 1;
  hg_scenario_usd(fsum, a, sizeof a);
  fprintf(o, "  %" PRId64 " days, sum %s\n", nd, a);
  hg_scenario_usd(s->fsp * 1000, a, sizeof a);
  hg_scenario_usd(s->last_dsp * 1000, b, sizeof b);
  hg_civil_format_date(s->last_dsp_day, day);
  fprintf(o, "FSP %" PRId64 " ticks = %s USD per GPU-hour (mean of the %" PRId64
             " FINAL fixings, rounded half up to a tick)\n"
             "last DSP %" PRId64 " ticks = %s (%s)\n",
          s->fsp, a, nd, s->last_dsp, b, day);

  fprintf(o, "\nsettlement summary B200.A.%04d-%02d (USD)\n", YEAR, MONTH);
  fprintf(o, "%-7s %-9s %9s %18s %18s %12s %18s\n", "account", "name", "position",
          "variation_margin", "final_settlement", "fees", "net");
  int64_t total = 0, tvm = 0, tfin = 0, tfee = 0;
  for (int i = 0; i < NACCT; i++) {
    int64_t net = sum[i].vm + sum[i].final + sum[i].fees;
    hg_scenario_usd(sum[i].vm, a, sizeof a);
    hg_scenario_usd(sum[i].final, b, sizeof b);
    hg_scenario_usd(sum[i].fees, e, sizeof e);
    hg_scenario_usd(net, f, sizeof f);
    fprintf(o, "%-7u %-9s %9" PRId64 " %18s %18s %12s %18s\n", (unsigned)accounts[i].id,
            accounts[i].name, sum[i].pos, a, b, e, f);
    total += net;
    tvm += sum[i].vm;
    tfin += sum[i].final;
    tfee += sum[i].fees;
    if (sum[i].vm != s->ev_vm[i] || sum[i].final != s->ev_final[i] || sum[i].pos != s->ev_pos[i])
      hg_scenario_fail(&s->run, "account %u: ledger and events disagree", (unsigned)accounts[i].id);
  }
  hg_scenario_usd(tvm, a, sizeof a);
  hg_scenario_usd(tfin, b, sizeof b);
  hg_scenario_usd(tfee, e, sizeof e);
  hg_scenario_usd(total, f, sizeof f);
  fprintf(o, "%-7s %-9s %9s %18s %18s %12s %18s\n", "total", "", "", a, b, e, f);
  hg_scenario_usd(fee_income, a, sizeof a);
  total += fee_income + other;
  hg_scenario_usd(total, g, sizeof g);
  fprintf(o, "exchange fee income %s\n", a);
  fprintf(o, "sum of all cash flows: %s %s\n", g, total == 0 ? "(zero: ok)" : "(NOT ZERO)");
  if (total != 0 || other != 0)
    hg_scenario_fail(&s->run,
                     "cash flows sum to %" PRId64 " micro-USD (%" PRId64
                     " outside the demo accounts)",
                     total, other);

  hg_scenario_print_hash(&s->run);

  int rc = write_statements(s, c, dir);
  if (rc != 0) hg_scenario_fail(&s->run, "cannot write statements: %s", hg_strerror(rc));
  else
    fprintf(o, "statements: statements/<account>-B200.A.%04d-%02d.csv and .json in the data dir\n",
            YEAR, MONTH);
}

/* ------------------------------------------------------------------ run */

static int drive(sim_t *s) {
  FILE *o = s->run.out;
  char day[32];
  size_t n = 0;
  int rc;
  const hg_demo_instrument_t *in = hg_demo_instruments(s->demo);
  s->instrument = in[0].id;

  /* Listing day: the demo's market, the providers' grades. */
  hg_scenario_set_time(&s->run, s->day0, 9, 0);
  n = hg_demo_setup(s->demo, s->cmds, BATCH_MAX);
  for (int p = 0; p < NPROV; p++) {
    hg_command_t *c = add(s, &n, HG_COMMAND_SET_PROVIDER_GRADE);
    snprintf(c->u.provider_grade.provider, sizeof c->u.provider_grade.provider, "%s",
             providers[p]);
    index_name(c->u.provider_grade.gpu, c->u.provider_grade.grade);
    c->u.provider_grade.effective_day = s->day0 - 31;
  }
  if ((rc = run_batch(s, n)) != 0) return rc;
  hg_civil_format_date(s->day0, day);
  fprintf(o, "%s 09:00 listed %s (id %u); makers 1001, 1002; hedgers 2001, 2002; trader 3001\n",
          day, in[0].symbol, (unsigned)s->instrument);

  for (int32_t d = s->day0; !s->expired; d++) {
    if (d > s->last_day + 31) {
      hg_scenario_fail(&s->run, "no expiry %d days after listing", (int)(d - s->day0));
      return 0;
    }
    hg_civil_format_date(d, day);
    if (d > s->day0) { /* yesterday's rental market */
      hg_scenario_set_time(&s->run, d, 0, 30);
      n = 0;
      index_day(s, &n, d - 1);
      if ((rc = run_batch(s, n)) != 0) return rc;
    }
    if (d <= s->last_day) {
      static const int at[][2] = {{10, 0}, {12, 0}, {14, 0}, {15, 57}};
      for (size_t k = 0; k < sizeof at / sizeof at[0]; k++)
        if ((rc = step_demo(s, d, at[k][0], at[k][1])) != 0) return rc;
      hg_scenario_set_time(&s->run, d, 16, 0);
      n = 0;
      add(s, &n, HG_COMMAND_DAILY_SETTLEMENT)->u.daily.day = d;
      if ((rc = run_batch(s, n)) != 0) return rc;
      if (d == s->first_day)
        fprintf(o, "%s delivery month begins (20%% margin rate, 1,000-contract limit)\n", day);
      if (d == s->last_day) {
        fprintf(o, "%s 16:00 last trading day's cycle: trading ends, resting orders expire\n",
                day);
        /* One more order must be refused. */
        hg_scenario_set_time(&s->run, d, 16, 30);
        n = 0;
        hg_command_t *c = add(s, &n, HG_COMMAND_NEW_ORDER);
        c->u.new_order.instrument_id = s->instrument;
        c->u.new_order.account = HG_DEMO_HEDGER_ACCOUNT(0);
        c->u.new_order.client_order_id = 1u << 30;
        c->u.new_order.side = HG_SIDE_BUY;
        c->u.new_order.type = HG_ORD_LIMIT;
        c->u.new_order.tif = HG_TIF_IOC;
        c->u.new_order.price = s->last_dsp;
        c->u.new_order.qty = 1;
        uint64_t before = s->ended_rejects;
        if ((rc = run_batch(s, n)) != 0) return rc;
        if (s->ended_rejects != before + 1)
          hg_scenario_fail(&s->run, "an order after the last trading day was not refused");
        else
          fprintf(o, "%s 16:30 an order after the last trading day is refused: %s\n", day,
                  hg_xreject_str(HG_XREJ_TRADING_ENDED));
      }
    } else {
      hg_scenario_set_time(&s->run, d, 1, 0);
      n = 0;
      add(s, &n, HG_COMMAND_EXPIRE)->u.expire.instrument_id = s->instrument;
      s->missing = 0;
      s->expect_wait = 1;
      if ((rc = run_batch(s, n)) != 0) return rc;
      s->expect_wait = 0;
      if (s->expired) {
        fprintf(o, "%s 01:00 expiry: every fixing of the month is FINAL; final settlement\n",
                day);
      } else if (s->missing != 0) {
        fprintf(o, "%s 01:00 expiry waits for FINAL fixings of", day);
        for (int k = 0; k < 31; k++) {
          if (!(s->missing & (1u << k))) continue;
          char md[32];
          hg_civil_format_date(s->first_day + k, md);
          fprintf(o, " %s", md);
        }
        fputc('\n', o);
      } else {
        hg_scenario_fail(&s->run, "EXPIRE neither settled nor waited for fixings");
        return 0;
      }
    }
  }
  fprintf(o, "\ntrading: %" PRIu64 " fills, %" PRIu64 " contracts; %" PRIu64
             " orders refused (%" PRIu64 " by the risk check, %" PRIu64 " after trading ended)\n",
          s->fills, s->volume, s->book_rejects, s->risk_rejects, s->ended_rejects);
  fprintf(o, "daily cycles: %" PRIu64 "; DSP tiers: vwap %" PRIu64 ", midpoint %" PRIu64
             ", previous %" PRIu64 ", index %" PRIu64 "\n",
          s->cycles, s->dsp_tier[1], s->dsp_tier[2], s->dsp_tier[3], s->dsp_tier[4]);
  fprintf(o, "index: %" PRIu64 " fixings computed, %" PRIu64 " finalized\n",
          s->fixings_computed, s->fixings_final);
  if (s->cycle_sum_abs != 0) hg_scenario_fail(&s->run, "a cycle's VM did not sum to zero");
  for (int i = 0; i < NACCT; i++)
    if (s->ev_pos[i] != 0 && s->ev_final[i] == 0 && s->fsp != s->last_dsp)
      hg_scenario_fail(&s->run, "account %u: position left open", (unsigned)accounts[i].id);
  return 0;
}

int hg_scenario_month(const hg_pipeline_config_t *base, const char *data_dir, FILE *out,
                      FILE *err) {
  sim_t *s = calloc(1, sizeof *s);
  if (s == NULL) return HG_SCENARIO_ERROR;
  s->run.out = out;
  s->run.err = err;
  s->first_day = hg_civil_to_day(YEAR, MONTH, 1);
  s->last_day = hg_civil_to_day(YEAR, MONTH + 1, 1) - 1;
  s->day0 = hg_civil_to_day(YEAR, MONTH - 1, 1);
  int rc = hg_demo_create_months(YEAR, MONTH - 1, 1, SEED, &s->demo);
  if (rc != 0) {
    fprintf(err, "scenario: cannot create the demo: %s\n", hg_strerror(rc));
    free(s);
    return HG_SCENARIO_ERROR;
  }
  s->run.on_record = on_record;
  s->run.ctx = s;
  s->run.origin = ORIGIN;
  int result = HG_SCENARIO_ERROR;
  if (hg_scenario_open(&s->run, base, data_dir) != 0) goto done;
  fprintf(out, "Hourglass month scenario: B200.A.%04d-%02d from listing to final settlement "
               "(simulated time, UTC)\n",
          YEAR, MONTH);
  if (hg_scenario_stop(&s->run, drive(s)) != 0) goto done;
  if (!s->expired) {
    fprintf(err, "scenario: the contract did not expire\n");
    result = HG_SCENARIO_FAILED;
    goto done;
  }
  report(s, data_dir);
  result = s->run.failed ? HG_SCENARIO_FAILED : HG_SCENARIO_OK;
done:
  fflush(out);
  hg_pipeline_close(s->run.p);
  hg_demo_destroy(s->demo);
  free(s);
  return result;
}
