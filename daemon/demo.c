/*
 * The demo market. Beside the B200 curve (below) the live demo lists a
 * token curve, TOK.OW671B.S (settlement/CONTRACT.md section 7.3), whose
 * front months maker 0 quotes five levels a side around 4.000 USD per
 * million output tokens once it has seen them LISTED (an exchange without
 * room for the curve refuses it, and then nothing is quoted); the month scenario
 * (hg_demo_create_months) lists no token curve, so its commands are those of a demo without one.
 *
 * Two makers keep five levels a side each (ten price
 * levels a side in all, 2 to 15 ticks from the fair value) in each of the twelve
 * monthly contracts, around a fair curve in contango (later months dearer,
 * as a rising rent market would price them) whose front end wanders with a
 * mean-reverting random walk. Two hedgers (inference producers locking in
 * rent) now and then buy a three-month strip with IOC orders that cross the
 * makers' offers, and sometimes sell part of it back; makers replenish what
 * was filled on the next step.
 *
 * Each maker order sits in a fixed slot (maker, contract, side, level); its
 * client order id encodes the slot, so the ACCEPTED event tells which slot an
 * exchange order id belongs to, and fills and cancels free the slot again.
 * A slot with an order in flight is "pending" until the exchange answers.
 */
#include "demo.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hourglass/error.h"

#define LEVELS 5 /* per maker and side */
#define GPU_SLOTS (HG_DEMO_MAKERS * HG_DEMO_MONTHS * 2 * LEVELS)
/* The token curve's quotes come after every B200 slot, so the B200 quotes'
 * client order ids are those of a demo without tokens. */
#define TOKEN_SLOTS (HG_DEMO_TOKEN_QUOTED * 2 * LEVELS)
#define SLOTS (GPU_SLOTS + TOKEN_SLOTS)
#define TOKEN_FAIR 4000  /* ticks: 4.000 USD per million output tokens */
#define TOKEN_CONTANGO 4 /* ticks per month further out */
#define FRONT_FAIR 3400   /* ticks: 3.400 USD per GPU-hour */
#define CONTANGO 9        /* ticks per month further out */

typedef struct slot {
  hg_oid_t order_id; /* live order, 0 = none */
  hg_price_t price;
  hg_qty_t qty;
  int pending;       /* a new order is in flight */
} slot_t;

struct hg_demo {
  hg_demo_instrument_t inst[HG_DEMO_MONTHS];
  uint32_t months;   /* listed: 1..HG_DEMO_MONTHS */
  slot_t slots[SLOTS];
  uint64_t rng;
  int64_t walk;      /* front-month deviation from FRONT_FAIR, ticks */
  uint64_t steps;
  uint64_t next_clid;/* hedgers' client order ids */
  int32_t today;     /* UTC day number, 0 = unknown */
  int tokens;        /* the token curve is asked for and quoted */
  uint32_t token_listed; /* bit j: token month j was LISTED (quoted only then) */
};

void hg_demo_set_today(hg_demo_t *d, int32_t day) { d->today = day; }

/* The demo's index history: rent drifting up towards the front month's fair
 * value with a little day-to-day noise, micro-USD per GPU-hour. */
static int64_t demo_fixing(int32_t days_ago, int32_t day) {
  int64_t noise = (int64_t)(((uint32_t)day * 2654435761u) >> 27) - 16; /* -16..15 */
  return (FRONT_FAIR - 2 * (int64_t)days_ago) * 1000 + noise * 250;
}

/* The providers whose rentals make the demo's index. */
#define DEMO_PROVIDERS 6 /* the methodology's tier 1 wants five */
static const char *const demo_providers[DEMO_PROVIDERS] = {"aurora", "basalt", "cirrus",
                                                           "dunlin", "ember",  "fjord"};
/* Each provider's usual price relative to the market, micro-USD. */
static const int64_t demo_prov_offset[DEMO_PROVIDERS] = {-6000, 3000, 8000, -4000, 5000, -2000};
#define DEMO_FIRST_HOUR 8 /* UTC; rentals each hour from 08:00 to 19:59 */
#define DEMO_HOURS 12

uint32_t hg_demo_mix(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  return x ^ (x >> 16);
}

/* Rental k (0..DEMO_PROVIDERS * DEMO_HOURS - 1) of the demo's market on
 * `day`: every provider rents out B200 grade-A hours once an hour, around
 * demo_fixing(), so that the computed fixing lands near it. */
static void demo_sample(int32_t days_ago, int32_t day, uint32_t k, hg_index_sample_t *x) {
  uint32_t p = k % DEMO_PROVIDERS, h = DEMO_FIRST_HOUR + k / DEMO_PROVIDERS;
  uint32_t r = hg_demo_mix((uint32_t)day * 1000003u + k * 131u);
  memset(x, 0, sizeof *x);
  x->ts = (int64_t)day * 86400 + (int64_t)h * 3600 + (int64_t)p * 600 + (int64_t)(r % 60);
  x->price = demo_fixing(days_ago, day) + demo_prov_offset[p] + (int64_t)(r % 4001) - 2000;
  x->volume = 40 + (int64_t)((r >> 16) % 81);
  x->term_days = 1 + (int32_t)((r >> 8) % 30);
  x->kind = HG_INDEX_TRADE;
  snprintf(x->provider, sizeof x->provider, "%s", demo_providers[p]);
  snprintf(x->region, sizeof x->region, "%s", p % 2 ? "eu-west" : "us-east");
  snprintf(x->gpu, sizeof x->gpu, "B200");
  snprintf(x->grade, sizeof x->grade, "A");
}

static uint64_t next_rand(hg_demo_t *d) {
  d->rng += 0x9e3779b97f4a7c15ull;
  uint64_t x = d->rng;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static size_t slot_index(uint32_t maker, uint32_t k, uint32_t side, uint32_t level) {
  return ((maker * HG_DEMO_MONTHS + k) * 2 + side) * LEVELS + level;
}

/* Token month j's quote slots (one maker quotes the token curve). */
static size_t token_slot_index(uint32_t j, uint32_t side, uint32_t level) {
  return GPU_SLOTS + (j * 2 + side) * LEVELS + level;
}

/* Slot s's client order id: 1 << 40 marks a maker quote. */
static uint64_t slot_clid(size_t s) { return (1ull << 40) | s; }

int hg_demo_create(int year, int month, uint64_t seed, hg_demo_t **out) {
  int rc = hg_demo_create_months(year, month, HG_DEMO_MONTHS, seed, out);
  if (rc == 0) (*out)->tokens = 1;
  return rc;
}

int64_t hg_demo_token_fair(const hg_demo_t *d, size_t j) {
  return TOKEN_FAIR + d->walk + (int64_t)j * TOKEN_CONTANGO;
}

int hg_demo_has_tokens(const hg_demo_t *d) { return d->tokens; }

int hg_demo_create_months(int year, int month, int months, uint64_t seed, hg_demo_t **out) {
  if (out == NULL || month < 1 || month > 12 || year < 2000 || year > 9000 || months < 1 ||
      months > HG_DEMO_MONTHS)
    return HG_EINVAL;
  hg_demo_t *d = calloc(1, sizeof *d);
  if (d == NULL) return -ENOMEM;
  d->rng = seed;
  d->next_clid = 1;
  d->months = (uint32_t)months;
  for (int k = 0; k < months; k++) {
    int m = month + 1 + k;
    int y = year + (m - 1) / 12;
    m = (m - 1) % 12 + 1;
    hg_demo_instrument_t *in = &d->inst[k];
    in->id = HG_DEMO_FIRST_INSTRUMENT + (uint32_t)k;
    in->year = y;
    in->month = m;
    snprintf(in->symbol, sizeof in->symbol, "B200.A.%04d-%02d", y, m);
  }
  *out = d;
  return 0;
}

void hg_demo_destroy(hg_demo_t *d) { free(d); }

const hg_demo_instrument_t *hg_demo_instruments(const hg_demo_t *d) { return d->inst; }

int64_t hg_demo_fair(const hg_demo_t *d, size_t k) {
  return FRONT_FAIR + d->walk + (int64_t)k * CONTANGO;
}

size_t hg_demo_setup(hg_demo_t *d, hg_command_t *out, size_t cap) {
  size_t n = 0;
#define EMIT(c)                  \
  do {                           \
    if (n < cap) out[n] = (c);   \
    n++;                         \
  } while (0)
  for (uint32_t k = 0; k < d->months; k++) {
    hg_command_t c;
    memset(&c, 0, sizeof c);
    c.type = HG_COMMAND_LIST_INSTRUMENT;
    memcpy(c.u.list.symbol, d->inst[k].symbol, sizeof c.u.list.symbol);
    hg_book_params_t *bp = &c.u.list.params;
    bp->instrument_id = d->inst[k].id;
    bp->tick_size = 1000;     /* micro-USD per GPU-hour */
    bp->contract_unit = 1000; /* GPU-hours */
    bp->min_price = 1;
    bp->max_price = 100000;   /* 100 USD per GPU-hour */
    bp->max_order_qty = 1000;
    bp->ref_price = hg_demo_fair(d, (size_t)k);
    bp->max_orders = 1u << 14;
    bp->max_accounts = 64;
    EMIT(c);
  }
  if (d->tokens) {
    /* The token curve: twelve TOK.OW671B.S months from the same month as
     * the B200 curve (settlement/CONTRACT.md section 7.3). */
    hg_command_t c;
    memset(&c, 0, sizeof c);
    c.type = HG_COMMAND_LIST_CURVE;
    snprintf(c.u.curve.gpu, sizeof c.u.curve.gpu, "%s", HG_DEMO_TOKEN_CLASS);
    snprintf(c.u.curve.grade, sizeof c.u.curve.grade, "%s", HG_DEMO_TOKEN_GRADE);
    c.u.curve.year = (uint16_t)d->inst[0].year;
    c.u.curve.month = (uint8_t)d->inst[0].month;
    c.u.curve.first_instrument_id = HG_DEMO_TOKEN_FIRST_INSTRUMENT;
    c.u.curve.max_orders = 1u << 14;
    c.u.curve.max_accounts = 64;
    c.u.curve.ref_price = hg_demo_token_fair(d, 0);
    EMIT(c);
  }
  static const struct {
    hg_account_t account;
    uint32_t firm;
    int64_t usd;
  } accounts[] = {
      {HG_DEMO_MAKER_ACCOUNT(0), 100, 50000000}, {HG_DEMO_MAKER_ACCOUNT(1), 101, 50000000},
      {HG_DEMO_HEDGER_ACCOUNT(0), 200, 20000000}, {HG_DEMO_HEDGER_ACCOUNT(1), 201, 20000000},
      {HG_DEMO_USER_ACCOUNT, 300, 1000000},
  };
  for (size_t i = 0; i < sizeof accounts / sizeof accounts[0]; i++) {
    hg_command_t c;
    memset(&c, 0, sizeof c);
    c.type = HG_COMMAND_ADD_ACCOUNT;
    c.u.add_account.account = accounts[i].account;
    c.u.add_account.firm = accounts[i].firm;
    EMIT(c);
    memset(&c, 0, sizeof c);
    c.type = HG_COMMAND_DEPOSIT;
    c.u.cash.account = accounts[i].account;
    c.u.cash.amount = accounts[i].usd * 1000000;
    EMIT(c);
  }
  /* The index history: the providers' grades, then for each of the last 30
   * days its rentals, the computed fixing (with the receipt the exchange
   * keeps) and, but for the last three days, its finalization. */
  for (uint32_t p = 0; d->today > 0 && p < DEMO_PROVIDERS; p++) {
    hg_command_t c;
    memset(&c, 0, sizeof c);
    c.type = HG_COMMAND_SET_PROVIDER_GRADE;
    snprintf(c.u.provider_grade.provider, sizeof c.u.provider_grade.provider, "%s",
             demo_providers[p]);
    snprintf(c.u.provider_grade.gpu, sizeof c.u.provider_grade.gpu, "B200");
    snprintf(c.u.provider_grade.grade, sizeof c.u.provider_grade.grade, "A");
    c.u.provider_grade.effective_day = d->today - 31;
    EMIT(c);
  }
  for (int32_t ago = 30; d->today > 0 && ago >= 1; ago--) {
    hg_command_t c;
    int32_t day = d->today - ago;
    for (uint32_t k = 0; k < DEMO_PROVIDERS * DEMO_HOURS; k += HG_SAMPLES_PER_COMMAND) {
      memset(&c, 0, sizeof c);
      c.type = HG_COMMAND_PUBLISH_SAMPLES;
      snprintf(c.u.samples.gpu, sizeof c.u.samples.gpu, "B200");
      snprintf(c.u.samples.grade, sizeof c.u.samples.grade, "A");
      c.u.samples.day = day;
      while (c.u.samples.n < HG_SAMPLES_PER_COMMAND &&
             k + c.u.samples.n < DEMO_PROVIDERS * DEMO_HOURS) {
        demo_sample(ago, day, k + c.u.samples.n, &c.u.samples.s[c.u.samples.n]);
        c.u.samples.n++;
      }
      EMIT(c);
    }
    memset(&c, 0, sizeof c);
    c.type = HG_COMMAND_COMPUTE_FIXING;
    snprintf(c.u.index_day.gpu, sizeof c.u.index_day.gpu, "B200");
    snprintf(c.u.index_day.grade, sizeof c.u.index_day.grade, "A");
    c.u.index_day.day = day;
    EMIT(c);
    if (ago > 3) { /* the last three days are still provisional */
      c.type = HG_COMMAND_FINALIZE_FIXING;
      EMIT(c);
    }
  }
#undef EMIT
  return n;
}

static void order(hg_command_t *c, uint32_t instrument, hg_account_t account, uint64_t clid,
                  int side, hg_price_t price, hg_qty_t qty, int tif) {
  memset(c, 0, sizeof *c);
  c->type = HG_COMMAND_NEW_ORDER;
  hg_cmd_new_order_t *o = &c->u.new_order;
  o->instrument_id = instrument;
  o->account = account;
  o->client_order_id = clid;
  o->side = (uint8_t)side;
  o->type = HG_ORD_LIMIT;
  o->tif = (uint8_t)tif;
  o->price = price;
  o->qty = qty;
}

/* Keeps slot s's quote at px: a replace if it has a live order at another
 * price, a new order if it has none and none in flight. Writes at most one
 * command to *out; returns how many. */
static size_t quote(hg_demo_t *d, size_t s, uint32_t instrument, hg_account_t account, int side,
                    hg_price_t px, hg_qty_t qty, hg_command_t *out) {
  slot_t *sl = &d->slots[s];
  if (sl->order_id != 0) {
    if (sl->price == px) return 0;
    memset(out, 0, sizeof *out);
    out->type = HG_COMMAND_REPLACE;
    out->u.replace.instrument_id = instrument;
    out->u.replace.account = account;
    out->u.replace.order_id = sl->order_id;
    out->u.replace.new_price = px;
    out->u.replace.new_qty = qty;
  } else if (!sl->pending) {
    order(out, instrument, account, slot_clid(s), side, px, qty, HG_TIF_GTC);
    sl->pending = 1;
  } else {
    return 0;
  }
  sl->price = px;
  sl->qty = qty;
  return 1;
}

size_t hg_demo_step(hg_demo_t *d, hg_command_t *out, size_t cap) {
  size_t n = 0;
  d->steps++;
  /* Mean-reverting walk of the front month, one tick at a time. */
  uint64_t r = next_rand(d);
  int64_t pull = d->walk > 30 ? -1 : d->walk < -30 ? 1 : 0;
  d->walk += (int64_t)(r % 3) - 1 + pull;
  for (uint32_t mk = 0; mk < HG_DEMO_MAKERS; mk++) {
    for (uint32_t k = 0; k < d->months; k++) {
      int64_t fair = hg_demo_fair(d, k);
      for (uint32_t side = 0; side < 2; side++) {
        for (uint32_t lv = 0; lv < LEVELS; lv++) {
          size_t s = slot_index(mk, k, side, lv);
          int64_t off = 2 + (int64_t)mk + 3 * (int64_t)lv;
          hg_price_t px = side == HG_SIDE_BUY ? fair - off : fair + off;
          hg_qty_t qty = 10 + (hg_qty_t)((s * 7 + d->steps / 8) % 5) * 10;
          if (n >= cap) return n;
          n += quote(d, s, d->inst[k].id, HG_DEMO_MAKER_ACCOUNT(mk), (int)side, px, qty, &out[n]);
        }
      }
    }
  }
  /* The token curve: maker 0 quotes its front months around the token fair
   * value (no random draw, so the B200 flow is the same with or without). */
  for (uint32_t j = 0; d->tokens && j < HG_DEMO_TOKEN_QUOTED; j++) {
    if (!(d->token_listed >> j & 1)) continue; /* refused (capacity): nothing to quote */
    int64_t fair = hg_demo_token_fair(d, j);
    for (uint32_t side = 0; side < 2; side++) {
      for (uint32_t lv = 0; lv < LEVELS; lv++) {
        size_t s = token_slot_index(j, side, lv);
        int64_t off = 2 + 3 * (int64_t)lv;
        hg_price_t px = side == HG_SIDE_BUY ? fair - off : fair + off;
        hg_qty_t qty = 10 + (hg_qty_t)((s * 7 + d->steps / 8) % 5) * 10;
        if (n >= cap) return n;
        n += quote(d, s, HG_DEMO_TOKEN_FIRST_INSTRUMENT + j, HG_DEMO_MAKER_ACCOUNT(0), (int)side,
                   px, qty, &out[n]);
      }
    }
  }
  /* Hedgers: a strip of three months (fewer if fewer are listed) every
   * other step; some unwinds. */
  r = next_rand(d);
  if (r % 2 == 0) {
    uint32_t width = d->months < 3 ? d->months : 3;
    uint32_t h = (uint32_t)(r >> 8) % HG_DEMO_HEDGERS;
    uint32_t k0 = (uint32_t)(r >> 16) % (d->months - width + 1);
    int sell = (r >> 24) % 4 == 0;
    hg_qty_t q = 5 + (hg_qty_t)((r >> 32) % 16);
    for (uint32_t k = k0; k < k0 + width && n < cap; k++) {
      int64_t fair = hg_demo_fair(d, k);
      order(&out[n++], d->inst[k].id, HG_DEMO_HEDGER_ACCOUNT(h), d->next_clid++,
            sell ? HG_SIDE_SELL : HG_SIDE_BUY, sell ? fair - 6 : fair + 6, q, HG_TIF_IOC);
    }
  }
  return n;
}

static slot_t *slot_of(hg_demo_t *d, hg_oid_t order_id) {
  for (size_t s = 0; s < SLOTS; s++)
    if (d->slots[s].order_id == order_id) return &d->slots[s];
  return NULL;
}

static int is_maker(hg_account_t a) {
  return a >= HG_DEMO_MAKER_ACCOUNT(0) && a < HG_DEMO_MAKER_ACCOUNT(HG_DEMO_MAKERS);
}

void hg_demo_observe(hg_demo_t *d, const hg_pipe_out_t *rec) {
  if (rec->kind == HG_PIPE_EVENT && rec->event.type == HG_XEV_LISTED &&
      rec->event.instrument_id >= HG_DEMO_TOKEN_FIRST_INSTRUMENT &&
      rec->event.instrument_id < HG_DEMO_TOKEN_FIRST_INSTRUMENT + HG_DEMO_TOKEN_QUOTED)
    d->token_listed |= 1u << (rec->event.instrument_id - HG_DEMO_TOKEN_FIRST_INSTRUMENT);
  if (rec->kind != HG_PIPE_EVENT || rec->event.type != HG_XEV_BOOK) return;
  const hg_book_event_t *e = &rec->event.book;
  slot_t *sl;
  switch (e->type) {
  case HG_EV_ACCEPTED:
  case HG_EV_REJECTED:
    if (!is_maker(e->account) || e->cmd == HG_CMD_CANCEL || e->cmd == HG_CMD_REPLACE) break;
    if ((e->client_order_id >> 40) != 1 || (e->client_order_id & 0xffffffffu) >= SLOTS) break;
    sl = &d->slots[e->client_order_id & 0xffffffffu];
    sl->pending = 0;
    if (e->type == HG_EV_ACCEPTED) sl->order_id = e->order_id;
    break;
  case HG_EV_FILL:
    if (is_maker(e->maker_account) && e->maker_leaves == 0 &&
        (sl = slot_of(d, e->maker_order_id)) != NULL)
      sl->order_id = 0;
    /* An aggressive maker replace that trades away fully. */
    if (is_maker(e->account) && e->leaves == 0 && (sl = slot_of(d, e->order_id)) != NULL)
      sl->order_id = 0;
    break;
  case HG_EV_CANCELLED:
    if (is_maker(e->account) && (sl = slot_of(d, e->order_id)) != NULL) sl->order_id = 0;
    break;
  default:
    break;
  }
}

/* The cycle of day D may run from D 16:00 UTC on (exchange.h), so the
 * latest day a cycle can settle at time t is the day of t - 16 h. */
int hg_demo_daily_settlement(uint64_t now_ns, int32_t last_cycle_day, hg_command_t *out) {
  int64_t s = (int64_t)(now_ns / 1000000000u) - 16 * 3600;
  int32_t day = (int32_t)((s >= 0 ? s : s - 86399) / 86400);
  if (day <= last_cycle_day) return last_cycle_day;
  memset(out, 0, sizeof *out);
  out->type = HG_COMMAND_DAILY_SETTLEMENT;
  out->u.daily.day = day;
  return day;
}
