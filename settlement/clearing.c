/*
 * Clearing state: accounts, instruments, position records, the cash ledger,
 * the order-path calls (pre-trade check, open quantities, fills) and initial
 * margin.
 *
 * Layout. Accounts, instruments and product groups live in arrays sized at
 * create; caller-chosen ids map to array slots through fixed-size
 * open-addressing maps (linear probing, backward-shift deletion), so a lookup
 * never allocates and never depends on insertion history for correctness.
 * Iteration never walks a map: accounts in registration order, instruments
 * through inst_order (registration order), position records through
 * per-account and per-instrument intrusive lists in creation order. That is
 * what makes the ledger byte-for-byte reproducible.
 *
 * Position records come from one pool (free list) sized by max_positions; a
 * record is created by the pre-trade check or the first open/fill of an
 * (account, instrument) pair; the daily cycle returns records that hold
 * nothing (no position, no open quantity) to the pool, and removing a settled
 * instrument frees all of its records. Fills keep per record sum q and sum q*p (__int128) since
 * the last daily cycle, which is all variation margin needs.
 *
 * The ledger is an append-only array of entries, each chained to the next
 * entry of the same account so statements walk one account's history
 * without scanning. It grows with realloc only inside calls that post cash
 * (never on the order path), after a reserve step, so failure changes nothing.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "clearing_int.h"
#include "hourglass/error.h"

/* ---------------------------------------------------------------- maps -- */

static uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

/* Writes one byte per page so that the kernel maps every page now, at
 * create, and never later on the order path (a first-touch page fault is
 * kernel work per message). volatile: the stores must happen although the
 * memory is already zero. */
static void prefault(void *p, size_t n) {
  volatile unsigned char *b = p;
  for (size_t i = 0; i < n; i += 4096) b[i] = 0;
}

static int map_init(map_t *m, uint64_t capacity) {
  uint64_t n = 8;
  while (n < capacity * 2) n <<= 1;
  m->slots = calloc(n, sizeof *m->slots); /* all zero = empty */
  if (m->slots == NULL) return -ENOMEM;
  prefault(m->slots, n * sizeof *m->slots);
  m->mask = n - 1;
  return 0;
}

static uint32_t map_get(const map_t *m, uint64_t key) {
  for (uint64_t i = mix64(key) & m->mask;; i = (i + 1) & m->mask) {
    if (m->slots[i].val == 0) return NIL32;
    if (m->slots[i].key == key) return m->slots[i].val - 1;
  }
}

/* The caller guarantees the key is absent and the map has room (capacity is
 * at most half the table). */
static void map_put(map_t *m, uint64_t key, uint32_t val) {
  uint64_t i = mix64(key) & m->mask;
  while (m->slots[i].val != 0) i = (i + 1) & m->mask;
  m->slots[i].key = key;
  m->slots[i].val = val + 1;
}

static void map_del(map_t *m, uint64_t key) {
  uint64_t i = mix64(key) & m->mask;
  while (m->slots[i].val != 0 && m->slots[i].key != key) i = (i + 1) & m->mask;
  if (m->slots[i].val == 0) return;
  /* Backward shift: pull later members of the probe run into the hole when
   * their home slot does not lie cyclically in (hole, j]. */
  uint64_t hole = i;
  for (uint64_t j = (i + 1) & m->mask; m->slots[j].val != 0; j = (j + 1) & m->mask) {
    uint64_t home = mix64(m->slots[j].key) & m->mask;
    int in_range = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
    if (!in_range) {
      m->slots[hole] = m->slots[j];
      hole = j;
    }
  }
  m->slots[hole].val = 0;
}

/* ------------------------------------------------------------- helpers -- */

static inline uint32_t acct_lookup(const hg_clearing_t *c, hg_account_t id) {
  uint32_t h = hg_idhint_get(&c->acct_hint, id);
  if (h < c->naccounts && c->accounts[h].id == id) return h;
  return map_get(&c->acct_map, id);
}

static inline uint32_t inst_lookup(const hg_clearing_t *c, uint32_t id) {
  uint32_t h = hg_idhint_get(&c->inst_hint, id);
  if (h < c->cfg.max_instruments && c->insts[h].live && c->insts[h].def.id == id) return h;
  return map_get(&c->inst_map, id);
}

uint32_t hg_clr__acct_slot(const hg_clearing_t *c, hg_account_t id) { return acct_lookup(c, id); }

uint32_t hg_clr__inst_slot(const hg_clearing_t *c, uint32_t id) { return inst_lookup(c, id); }

int64_t hg_clr__tv(const hg_clearing_t *c, const instrument_t *in) {
  return in->def.tick_value > 0 ? in->def.tick_value : c->cfg.tick_value;
}

static uint64_t rec_key(uint32_t acct, uint32_t inst) {
  return ((uint64_t)acct << 32) | inst;
}

/* Largest max_accounts * max_instruments given a dense record table
 * (16 MiB); beyond it records are found through rec_map. */
#define REC_DIR_MAX (1u << 22)

static uint32_t rec_find(const hg_clearing_t *c, uint32_t acct, uint32_t inst) {
  if (c->rec_dir != NULL) return c->rec_dir[(size_t)acct * c->cfg.max_instruments + inst];
  return map_get(&c->rec_map, rec_key(acct, inst));
}

static uint32_t rec_free_count(const hg_clearing_t *c) {
  return c->cfg.max_positions - c->nrec_used;
}

uint32_t hg_clr__rec_find(const hg_clearing_t *c, uint32_t acct, uint32_t inst) {
  return rec_find(c, acct, inst);
}

/* Returns the record of (acct, inst), creating it; NIL32 if the pool is full. */
uint32_t hg_clr__rec_get_or_create(hg_clearing_t *c, uint32_t acct, uint32_t inst) {
  uint32_t r = rec_find(c, acct, inst);
  if (r != NIL32) return r;
  if (c->rec_free != NIL32) {
    r = c->rec_free;
    c->rec_free = c->recs[r].a_next;
  } else if (c->rec_hw < c->cfg.max_positions) {
    r = c->rec_hw++; /* never used before: no free list to pre-link at create */
  } else {
    return NIL32;
  }
  posrec_t *p = &c->recs[r];
  memset(p, 0, sizeof *p);
  p->acct = acct;
  p->inst = inst;
  p->a_next = NIL32;
  p->i_next = NIL32;
  account_t *a = &c->accounts[acct];
  p->a_prev = a->rec_tail;
  if (a->rec_tail != NIL32) c->recs[a->rec_tail].a_next = r;
  else a->rec_head = r;
  a->rec_tail = r;
  a->nrec++;
  instrument_t *in = &c->insts[inst];
  if (in->rec_tail != NIL32) c->recs[in->rec_tail].i_next = r;
  else in->rec_head = r;
  in->rec_tail = r;
  if (c->rec_dir != NULL) c->rec_dir[(size_t)acct * c->cfg.max_instruments + inst] = r;
  else map_put(&c->rec_map, rec_key(acct, inst), r);
  c->nrec_used++;
  return r;
}

/* Unlinks record r (whose predecessor in its instrument's list is prev, NIL32
 * if r is the head) from both lists and the map, and returns it to the pool. */
static void rec_release(hg_clearing_t *c, uint32_t prev, uint32_t r) {
  posrec_t *p = &c->recs[r];
  account_t *a = &c->accounts[p->acct];
  instrument_t *in = &c->insts[p->inst];
  if (p->a_prev != NIL32) c->recs[p->a_prev].a_next = p->a_next;
  else a->rec_head = p->a_next;
  if (p->a_next != NIL32) c->recs[p->a_next].a_prev = p->a_prev;
  else a->rec_tail = p->a_prev;
  a->nrec--;
  if (prev != NIL32) c->recs[prev].i_next = p->i_next;
  else in->rec_head = p->i_next;
  if (in->rec_tail == r) in->rec_tail = prev;
  if (c->rec_dir != NULL) c->rec_dir[(size_t)p->acct * c->cfg.max_instruments + p->inst] = NIL32;
  else map_del(&c->rec_map, rec_key(p->acct, p->inst));
  p->a_next = c->rec_free;
  c->rec_free = r;
  c->nrec_used--;
}

void hg_clr__rec_free_instrument(hg_clearing_t *c, uint32_t inst_slot) {
  while (c->insts[inst_slot].rec_head != NIL32)
    rec_release(c, NIL32, c->insts[inst_slot].rec_head);
}

void hg_clr__rec_sweep(hg_clearing_t *c, uint32_t inst_slot) {
  uint32_t prev = NIL32;
  for (uint32_t r = c->insts[inst_slot].rec_head; r != NIL32;) {
    const posrec_t *p = &c->recs[r];
    uint32_t next = p->i_next;
    if (p->pos == 0 && p->pos_prev == 0 && p->open_buy == 0 && p->open_sell == 0 && !p->fills)
      rec_release(c, prev, r);
    else
      prev = r;
    r = next;
  }
}

/* Reference price in ticks: last DSP, else the group's latest fixing rounded
 * half up to a tick, else the initial price given at registration (a
 * last_dsp that no cycle has replaced yet: dsp_tier NONE); 0 = none. */
static hg_price_t ref_price(const hg_clearing_t *c, const instrument_t *in) {
  if (in->dsp_tier != HG_DSP_TIER_NONE && in->def.last_dsp > 0) return in->def.last_dsp;
  int64_t f = c->groups[in->group].fixing;
  if (f > 0 && (f + 500) / 1000 > 0) return (f + 500) / 1000;
  return in->def.last_dsp;
}

hg_price_t hg_clr__ref_price(const hg_clearing_t *c, const instrument_t *in) {
  return ref_price(c, in);
}

/* ------------------------------------------------------------- create -- */

void hg_clearing_config_default(hg_clearing_config_t *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->max_accounts = 1024;
  cfg->max_instruments = 64;
  cfg->max_firms = 256;
  cfg->max_groups = 16;
  cfg->max_positions = 65536;
  cfg->ledger_initial = 65536;
  cfg->ledger_max_entries = 0;
  cfg->tick_value = 1000000;
  cfg->position_limit = 10000;
  cfg->position_limit_delivery = 1000;
  cfg->max_order_qty = 1000;
  cfg->band_bps = 2000;
  cfg->im_rate_bps = 1500;
  cfg->im_rate_delivery_bps = 2000;
  cfg->dsp_max_spread = 10;
  cfg->dsp_window_ns = (uint64_t)5 * 60 * 1000000000u;
  cfg->cycle_time_of_day_ns = (uint64_t)16 * 3600 * 1000000000u;
  cfg->mm_rate_bps = 7500;
  cfg->liq_fee_bps = 50;
  cfg->liq_slice_qty = 10;
  cfg->call_cycles = 1;
}

static int config_valid(const hg_clearing_config_t *g) {
  if (g->max_accounts == 0 || g->max_instruments == 0 || g->max_firms == 0 ||
      g->max_groups == 0 || g->max_positions == 0 || g->ledger_initial == 0)
    return 0;
  /* slots are uint32 with NIL32 reserved; keep tables well inside size_t */
  if (g->max_accounts >= (1u << 30) || g->max_instruments >= (1u << 30) ||
      g->max_firms >= (1u << 30) || g->max_groups >= (1u << 30) ||
      g->max_positions >= (1u << 30) || g->ledger_initial >= ((uint64_t)1 << 40))
    return 0;
  if (g->ledger_max_entries != 0 && g->ledger_max_entries < g->ledger_initial) return 0;
  if (g->tick_value <= 0 || g->tick_value > HG_CLR_TICK_VALUE_MAX) return 0;
  if (g->position_limit <= 0 || g->position_limit > HG_CLR_QTY_MAX) return 0;
  if (g->position_limit_delivery <= 0 || g->position_limit_delivery > HG_CLR_QTY_MAX) return 0;
  if (g->max_order_qty <= 0 || g->max_order_qty > HG_CLR_QTY_MAX) return 0;
  if (g->band_bps > 100000 || g->im_rate_bps > 100000 || g->im_rate_delivery_bps > 100000)
    return 0;
  if (g->dsp_max_spread < 0 || g->dsp_max_spread > HG_CLR_PRICE_MAX) return 0;
  if (g->cycle_time_of_day_ns >= HG_NS_PER_DAY) return 0;
  if (g->dsp_window_ns > g->cycle_time_of_day_ns) return 0;
  if (g->mm_rate_bps == 0 || g->mm_rate_bps > 10000 || g->liq_fee_bps > 10000) return 0;
  if (g->liq_slice_qty <= 0 || g->liq_slice_qty > HG_CLR_QTY_MAX || g->call_cycles == 0 ||
      g->call_cycles > 1000000)
    return 0;
  return 1;
}

int hg_clearing_create(const hg_clearing_config_t *cfg, hg_clearing_t **out) {
  if (cfg == NULL || out == NULL || !config_valid(cfg)) return HG_EINVAL;
  hg_clearing_t *c = calloc(1, sizeof *c);
  if (c == NULL) return -ENOMEM;
  c->cfg = *cfg;
  int rc = -ENOMEM;
  c->accounts = calloc(cfg->max_accounts, sizeof *c->accounts);
  c->insts = calloc(cfg->max_instruments, sizeof *c->insts);
  c->inst_order = calloc(cfg->max_instruments, sizeof *c->inst_order);
  c->inst_free = calloc(cfg->max_instruments, sizeof *c->inst_free);
  c->groups = calloc(cfg->max_groups, sizeof *c->groups);
  /* cache-line aligned: see posrec_t */
  size_t recs_bytes = ((size_t)cfg->max_positions * sizeof *c->recs + 63u) & ~(size_t)63u;
  c->recs = aligned_alloc(64, recs_bytes);
  if (c->recs != NULL) memset(c->recs, 0, recs_bytes);
  c->grp_l = calloc(cfg->max_groups, sizeof *c->grp_l);
  c->grp_s = calloc(cfg->max_groups, sizeof *c->grp_s);
  c->grp_touched = calloc(cfg->max_groups, sizeof *c->grp_touched);
  c->cyc_dsp = calloc(cfg->max_instruments, sizeof *c->cyc_dsp);
  c->top_bid = calloc(cfg->max_instruments, sizeof *c->top_bid);
  c->top_ask = calloc(cfg->max_instruments, sizeof *c->top_ask);
  c->cyc_tier = calloc(cfg->max_instruments, sizeof *c->cyc_tier);
  c->top_seen = calloc(cfg->max_instruments, sizeof *c->top_seen);
  c->ledger = malloc(cfg->ledger_initial * sizeof *c->ledger);
  int hints = hg_idhint_init(&c->acct_hint, cfg->max_accounts) |
              hg_idhint_init(&c->inst_hint, cfg->max_instruments);
  if (hints != 0 ||
      c->cyc_dsp == NULL || c->top_bid == NULL || c->top_ask == NULL || c->cyc_tier == NULL ||
      c->top_seen == NULL ||
      c->accounts == NULL || c->insts == NULL || c->inst_order == NULL ||
      c->inst_free == NULL || c->groups == NULL || c->recs == NULL || c->grp_l == NULL ||
      c->grp_s == NULL || c->grp_touched == NULL || c->ledger == NULL)
    goto fail;
  if ((rc = map_init(&c->acct_map, cfg->max_accounts)) < 0 ||
      (rc = map_init(&c->inst_map, cfg->max_instruments)) < 0 ||
      (rc = map_init(&c->group_map, cfg->max_groups)) < 0 ||
      (rc = map_init(&c->firm_map, cfg->max_firms)) < 0 ||
      (rc = map_init(&c->rec_map,
                     (uint64_t)cfg->max_accounts * cfg->max_instruments <= REC_DIR_MAX
                         ? 1
                         : cfg->max_positions)) < 0)
    goto fail;
  if ((uint64_t)cfg->max_accounts * cfg->max_instruments <= REC_DIR_MAX) {
    size_t n = (size_t)cfg->max_accounts * cfg->max_instruments;
    c->rec_dir = malloc(n * sizeof *c->rec_dir);
    if (c->rec_dir == NULL) {
      rc = -ENOMEM;
      goto fail;
    }
    memset(c->rec_dir, 0xff, n * sizeof *c->rec_dir); /* all NIL32 */
  }
  c->ledger_cap = cfg->ledger_initial;
  prefault(c->accounts, cfg->max_accounts * sizeof *c->accounts);
  prefault(c->recs, cfg->max_positions * sizeof *c->recs);
  /* free stack pops the lowest slot first */
  for (uint32_t i = 0; i < cfg->max_instruments; i++)
    c->inst_free[i] = cfg->max_instruments - 1 - i;
  c->ninst_free = cfg->max_instruments;
  c->rec_free = NIL32;
  c->rec_hw = 0;
  *out = c;
  return 0;
fail:
  hg_clearing_destroy(c);
  return rc;
}

void hg_clearing_destroy(hg_clearing_t *c) {
  if (c == NULL) return;
  free(c->accounts);
  free(c->insts);
  free(c->inst_order);
  free(c->inst_free);
  free(c->groups);
  free(c->recs);
  free(c->grp_l);
  free(c->grp_s);
  free(c->grp_touched);
  free(c->cyc_dsp);
  free(c->top_bid);
  free(c->top_ask);
  free(c->cyc_tier);
  free(c->top_seen);
  free(c->ledger);
  free(c->acct_map.slots);
  free(c->inst_map.slots);
  hg_idhint_free(&c->acct_hint);
  hg_idhint_free(&c->inst_hint);
  free(c->group_map.slots);
  free(c->firm_map.slots);
  free(c->rec_map.slots);
  free(c->rec_dir);
  free(c);
}

/* ------------------------------------------------------------- ledger -- */

int hg_clr__ledger_reserve(hg_clearing_t *c, uint64_t n) {
  if (n > UINT64_MAX - c->ledger_len) return HG_EFULL;
  uint64_t need = c->ledger_len + n;
  if (need <= c->ledger_cap) return 0;
  uint64_t max = c->cfg.ledger_max_entries;
  if (max != 0 && need > max) return HG_EFULL;
  uint64_t cap = c->ledger_cap * 2 > need ? c->ledger_cap * 2 : need;
  if (max != 0 && cap > max) cap = max;
  if (cap > SIZE_MAX / sizeof(ledger_rec_t)) return -ENOMEM;
  ledger_rec_t *l = realloc(c->ledger, cap * sizeof *l);
  if (l == NULL) return -ENOMEM;
  c->ledger = l;
  c->ledger_cap = cap;
  return 0;
}

void hg_clr__post(hg_clearing_t *c, uint32_t acct, uint32_t kind, uint32_t instrument,
                  int64_t amount, hg_price_t price, int64_t qty, uint64_t seq, uint64_t ts) {
  account_t *a = &c->accounts[acct];
  uint64_t idx = c->ledger_len++;
  ledger_rec_t *l = &c->ledger[idx];
  a->balance += amount;
  l->e = (hg_ledger_entry_t){.index = idx,
                             .seq = seq,
                             .ts = ts,
                             .account = a->id,
                             .instrument = instrument,
                             .kind = kind,
                             .amount = amount,
                             .balance = a->balance,
                             .price = price,
                             .qty = qty};
  l->next_same = NIL64;
  l->acct = acct;
  if (a->led_last != NIL64) c->ledger[a->led_last].next_same = idx;
  else a->led_first = idx;
  a->led_last = idx;
}

void hg_clr__post_fund(hg_clearing_t *c, uint32_t kind, uint32_t instrument, int64_t amount,
                       hg_price_t price, int64_t qty, uint64_t seq, uint64_t ts) {
  uint64_t idx = c->ledger_len++;
  ledger_rec_t *l = &c->ledger[idx];
  c->fund += amount;
  l->e = (hg_ledger_entry_t){.index = idx,
                             .seq = seq,
                             .ts = ts,
                             .account = HG_CLR_FUND_ACCOUNT,
                             .instrument = instrument,
                             .kind = kind,
                             .amount = amount,
                             .balance = c->fund,
                             .price = price,
                             .qty = qty};
  l->next_same = NIL64;
  l->acct = NIL32; /* the fund is no member account: no statement chain */
}

uint64_t hg_clearing_ledger_size(const hg_clearing_t *c) { return c->ledger_len; }

int hg_clearing_ledger_get(const hg_clearing_t *c, uint64_t index, hg_ledger_entry_t *out) {
  if (index >= c->ledger_len) return HG_ENOTFOUND;
  *out = c->ledger[index].e;
  return 0;
}

void hg_clearing_totals(const hg_clearing_t *c, hg_clearing_totals_t *out) {
  out->deposits = c->tot_deposits;
  out->withdrawals = c->tot_withdrawals;
  out->fees = c->tot_fees;
  int64_t sum = 0;
  for (uint32_t i = 0; i < c->naccounts; i++) sum += c->accounts[i].balance;
  out->balances = sum;
  out->fund = c->fund;
}

int hg_clearing_conserved(const hg_clearing_t *c) {
  i128 sum = c->fund;
  for (uint32_t i = 0; i < c->naccounts; i++) sum += c->accounts[i].balance;
  return sum == (i128)c->tot_deposits - c->tot_withdrawals - c->tot_fees;
}

/* ----------------------------------------------------------- accounts -- */

int hg_clearing_account_add(hg_clearing_t *c, hg_account_t id, uint32_t firm_id) {
  if (id == HG_CLR_FUND_ACCOUNT) return HG_EINVAL;
  if (acct_lookup(c, id) != NIL32) return HG_EEXISTS;
  if (c->naccounts == c->cfg.max_accounts) return HG_EFULL;
  int new_firm = map_get(&c->firm_map, firm_id) == NIL32;
  if (new_firm && c->nfirms == c->cfg.max_firms) return HG_EFULL;
  if (new_firm) map_put(&c->firm_map, firm_id, c->nfirms++);
  uint32_t s = c->naccounts++;
  account_t *a = &c->accounts[s];
  memset(a, 0, sizeof *a);
  a->id = id;
  a->firm_id = firm_id;
  a->rec_head = a->rec_tail = NIL32;
  a->led_first = a->led_last = NIL64;
  map_put(&c->acct_map, id, s);
  hg_idhint_set(&c->acct_hint, id, s);
  return 0;
}

int hg_clearing_deposit(hg_clearing_t *c, hg_account_t id, int64_t amount, uint64_t seq,
                        uint64_t ts) {
  uint32_t s = acct_lookup(c, id);
  if (s == NIL32) return HG_ENOTFOUND;
  if (amount <= 0) return HG_EINVAL;
  int64_t nb, nt;
  if (__builtin_add_overflow(c->accounts[s].balance, amount, &nb) ||
      __builtin_add_overflow(c->tot_deposits, amount, &nt))
    return HG_EOVERFLOW;
  int rc = hg_clr__ledger_reserve(c, 1);
  if (rc < 0) return rc;
  hg_clr__post(c, s, HG_LEDGER_DEPOSIT, HG_CLR_NO_INSTRUMENT, amount, 0, 0, seq, ts);
  c->tot_deposits = nt;
  hg_clr__improve(c, s); /* a deposit may meet a call */
  return 0;
}

int hg_clearing_fee(hg_clearing_t *c, hg_account_t id, uint32_t instrument, int64_t amount,
                    uint64_t seq, uint64_t ts) {
  uint32_t s = acct_lookup(c, id);
  if (s == NIL32) return HG_ENOTFOUND;
  if (instrument != HG_CLR_NO_INSTRUMENT && inst_lookup(c, instrument) == NIL32)
    return HG_ENOTFOUND;
  if (amount <= 0) return HG_EINVAL;
  int64_t nb, nt;
  if (__builtin_sub_overflow(c->accounts[s].balance, amount, &nb) ||
      __builtin_add_overflow(c->tot_fees, amount, &nt))
    return HG_EOVERFLOW;
  int rc = hg_clr__ledger_reserve(c, 1);
  if (rc < 0) return rc;
  hg_clr__post(c, s, HG_LEDGER_FEE, instrument, -amount, 0, 0, seq, ts);
  c->tot_fees = nt;
  return 0;
}

/* ------------------------------------------------------------- margin -- */

/* ceil(|w| * ref * tv * rate / 10000); every factor is bounded (header) so
 * the product stays below 2^109. */
static i128 contract_margin(int64_t w, hg_price_t ref, int64_t tv, uint32_t rate) {
  /* The same integer result in 64 bits whenever the product fits, which is
   * every realistic order: a 128-bit division is a library call. */
  uint64_t n, uw = w < 0 ? -(uint64_t)w : (uint64_t)w;
  if (ref >= 0 && tv >= 0 && !__builtin_mul_overflow(uw, (uint64_t)ref, &n) &&
      !__builtin_mul_overflow(n, (uint64_t)tv, &n) &&
      !__builtin_mul_overflow(n, (uint64_t)rate, &n) && n <= UINT64_MAX - 9999)
    return (i128)((n + 9999) / 10000);
  i128 aw = w < 0 ? -(i128)w : (i128)w;
  i128 num = aw * ref * tv * rate;
  return (num + 9999) / 10000;
}

/* Adds one contract's worst case into the group scratch. */
static void margin_add(hg_clearing_t *c, uint32_t *ntouched, const instrument_t *in,
                       int64_t pos, int64_t open_buy, int64_t open_sell, int at_mark) {
  int64_t a = pos + open_buy, b = pos - open_sell;
  int64_t aa = a < 0 ? -a : a, ab = b < 0 ? -b : b;
  int64_t w = aa >= ab ? a : b; /* a on a tie */
  if (w == 0) return;
  hg_price_t ref = at_mark && in->mark > 0 ? in->mark : ref_price(c, in);
  uint32_t rate = in->def.in_delivery ? c->cfg.im_rate_delivery_bps : c->cfg.im_rate_bps;
  i128 m = contract_margin(w, ref, hg_clr__tv(c, in), rate);
  if (m == 0) return;
  uint32_t g = in->group;
  if (c->grp_l[g] == 0 && c->grp_s[g] == 0) {
    /* first margin in this group: remember it for the sum and the reset
     * (a group with only zero margins needs neither) */
    c->grp_touched[(*ntouched)++] = g;
  }
  if (w > 0) c->grp_l[g] += m;
  else c->grp_s[g] += m;
}

/* Worst case (4.4) of account slot s in instrument slot is, counting
 * extra_qty on side when is == extra_inst; the open quantity only when
 * orders > 0. */
static int64_t worst_case(const hg_clearing_t *c, uint32_t s, uint32_t is, uint32_t extra_inst,
                          int side, int64_t extra_qty, int orders) {
  uint32_t r = rec_find(c, s, is);
  int64_t pos = 0, ob = 0, os = 0;
  if (r != NIL32) {
    pos = c->recs[r].pos;
    if (orders > 0) {
      ob = c->recs[r].open_buy;
      os = c->recs[r].open_sell;
    }
  }
  if (is == extra_inst) {
    if (side == HG_CLR_BUY) ob += extra_qty;
    else os += extra_qty;
  }
  int64_t a = pos + ob, b = pos - os;
  return (a < 0 ? -a : a) >= (b < 0 ? -b : b) ? a : b;
}

/* The inter-commodity credit of account slot s (CONTRACT.md 7.4), same
 * arguments as account_im. Each pair's legs' contracts are used once: a
 * leg in several pairs gives what earlier pairs left. */
static i128 spread_credit(hg_clearing_t *c, uint32_t s, uint32_t extra_inst, int side,
                          int64_t extra_qty, int orders) {
  i128 credit = 0;
  int64_t used_t[HG_CLR_MAX_SPREADS], used_g[HG_CLR_MAX_SPREADS];
  for (uint32_t i = 0; i < c->nspreads; i++) {
    const hg_clearing_spread_t *p = &c->spreads[i];
    used_t[i] = used_g[i] = 0;
    uint32_t it = inst_lookup(c, p->token), ig = inst_lookup(c, p->gpu);
    if (it == NIL32 || ig == NIL32) continue;
    int64_t wt = worst_case(c, s, it, extra_inst, side, extra_qty, orders);
    int64_t wg = worst_case(c, s, ig, extra_inst, side, extra_qty, orders);
    if (wt == 0 || wg == 0 || (wt > 0) == (wg > 0)) continue;
    int64_t at = wt < 0 ? -wt : wt, ag = wg < 0 ? -wg : wg;
    for (uint32_t j = 0; j < i; j++) { /* contracts earlier pairs used */
      if (c->spreads[j].token == p->token) at -= used_t[j];
      if (c->spreads[j].gpu == p->gpu) ag -= used_g[j];
    }
    int64_t k = at / (int64_t)p->n_t < ag / (int64_t)p->n_g ? at / (int64_t)p->n_t
                                                             : ag / (int64_t)p->n_g;
    if (k <= 0) continue;
    used_t[i] = k * p->n_t;
    used_g[i] = k * p->n_g;
    const instrument_t *t = &c->insts[it], *g = &c->insts[ig];
    int at_mark = orders < 0;
    hg_price_t rt = at_mark && t->mark > 0 ? t->mark : ref_price(c, t);
    hg_price_t rg = at_mark && g->mark > 0 ? g->mark : ref_price(c, g);
    i128 mt =
        contract_margin(1, rt, hg_clr__tv(c, t),
                        t->def.in_delivery ? c->cfg.im_rate_delivery_bps : c->cfg.im_rate_bps);
    i128 mg =
        contract_margin(1, rg, hg_clr__tv(c, g),
                        g->def.in_delivery ? c->cfg.im_rate_delivery_bps : c->cfg.im_rate_bps);
    credit += (i128)k * ((i128)p->n_t * mt + (i128)p->n_g * mg) * HG_CLR_SPREAD_CREDIT_BPS / 10000;
  }
  return credit;
}

int hg_clearing_spreads_set(hg_clearing_t *c, const hg_clearing_spread_t *pairs, size_t n) {
  if (n > HG_CLR_MAX_SPREADS || (n > 0 && pairs == NULL)) return HG_EINVAL;
  for (size_t i = 0; i < n; i++)
    if (pairs[i].n_t == 0 || pairs[i].n_g == 0 || pairs[i].n_t > 100 || pairs[i].n_g > 100)
      return HG_EINVAL;
  if (n > 0) memcpy(c->spreads, pairs, n * sizeof *pairs);
  c->nspreads = (uint32_t)n;
  return 0;
}

/* Initial margin of account slot s, with extra_qty added to the open quantity
 * of side on instrument slot extra_inst (NIL32 = none); orders 0 leaves every
 * open quantity out (the positions' margin alone), orders -1 too and prices
 * the positions at the marks (CONTRACT.md 4.6). Uses the group
 * scratch arrays (the clearing state is single-threaded) and leaves them
 * zeroed. */
static i128 account_im(hg_clearing_t *c, uint32_t s, uint32_t extra_inst, int side,
                       int64_t extra_qty, int orders) {
  uint32_t ntouched = 0;
  int extra_done = extra_inst == NIL32;
  for (uint32_t r = c->accounts[s].rec_head; r != NIL32; r = c->recs[r].a_next) {
    const posrec_t *p = &c->recs[r];
    int64_t ob = orders > 0 ? p->open_buy : 0, os = orders > 0 ? p->open_sell : 0;
    if (p->inst == extra_inst) {
      if (side == HG_CLR_BUY) ob += extra_qty;
      else os += extra_qty;
      extra_done = 1;
    }
    margin_add(c, &ntouched, &c->insts[p->inst], p->pos, ob, os, orders < 0);
  }
  if (!extra_done)
    margin_add(c, &ntouched, &c->insts[extra_inst], 0, side == HG_CLR_BUY ? extra_qty : 0,
               side == HG_CLR_SELL ? extra_qty : 0, 0);
  i128 im = 0;
  for (uint32_t i = 0; i < ntouched; i++) {
    uint32_t g = c->grp_touched[i];
    i128 l = c->grp_l[g], sh = c->grp_s[g];
    im += l + sh - (l < sh ? l : sh) / 2;
    c->grp_l[g] = c->grp_s[g] = 0;
  }
  if (__builtin_expect(c->nspreads != 0, 0))
    im -= spread_credit(c, s, extra_inst, side, extra_qty, orders);
  return im;
}

static int64_t sat64(i128 v) { return v > INT64_MAX ? INT64_MAX : (int64_t)v; }

i128 hg_clr__account_im(hg_clearing_t *c, uint32_t s, int at_mark) {
  return account_im(c, s, NIL32, 0, 0, at_mark ? -1 : 1);
}

int hg_clearing_initial_margin(const hg_clearing_t *c, hg_account_t account, int64_t *out) {
  uint32_t s = acct_lookup(c, account);
  if (s == NIL32) return HG_ENOTFOUND;
  /* the scratch arrays are restored to zero before returning, so the state
   * is logically unchanged */
  *out = sat64(account_im((hg_clearing_t *)c, s, NIL32, 0, 0, 1));
  return 0;
}

int hg_clearing_account_info(const hg_clearing_t *c, hg_account_t id,
                             hg_clearing_account_info_t *out) {
  uint32_t s = acct_lookup(c, id);
  if (s == NIL32) return HG_ENOTFOUND;
  const account_t *a = &c->accounts[s];
  out->firm_id = a->firm_id;
  out->balance = a->balance;
  out->initial_margin = sat64(account_im((hg_clearing_t *)c, s, NIL32, 0, 0, 1));
  out->position_margin = sat64(account_im((hg_clearing_t *)c, s, NIL32, 0, 0, 0));
  out->positions = a->nrec;
  return 0;
}

int hg_clearing_withdraw(hg_clearing_t *c, hg_account_t id, int64_t amount, uint64_t seq,
                         uint64_t ts, hg_clearing_result_t *res) {
  if (res == NULL) return HG_EINVAL;
  memset(res, 0, sizeof *res);
  res->amount = amount;
  uint32_t s = acct_lookup(c, id);
  if (s == NIL32) {
    res->reason = HG_CLR_REJ_UNKNOWN_ACCOUNT;
    return 0;
  }
  account_t *a = &c->accounts[s];
  res->equity = a->balance;
  if (amount <= 0) {
    res->reason = HG_CLR_REJ_INVALID_AMOUNT;
    return 0;
  }
  if (a->state != HG_CLR_OK) {
    res->reason = HG_CLR_REJ_MARGIN_CALL;
    res->amount = a->call_amount;
    return 0;
  }
  /* only money a loser has paid may leave: an open loss at the marks
   * lowers what may be withdrawn, an open profit does not raise it */
  i128 eq = hg_clr__equity(c, s, NULL);
  if (eq > a->balance) eq = a->balance;
  res->equity = eq < INT64_MIN ? INT64_MIN : (int64_t)eq;
  i128 im = account_im(c, s, NIL32, 0, 0, 1);
  res->initial_margin = sat64(im);
  if (eq - amount - im < 0) {
    res->reason = HG_CLR_REJ_INSUFFICIENT_MARGIN;
    return 0;
  }
  int64_t nt;
  if (__builtin_add_overflow(c->tot_withdrawals, amount, &nt)) return HG_EOVERFLOW;
  int rc = hg_clr__ledger_reserve(c, 1);
  if (rc < 0) return rc;
  hg_clr__post(c, s, HG_LEDGER_WITHDRAWAL, HG_CLR_NO_INSTRUMENT, -amount, 0, 0, seq, ts);
  c->tot_withdrawals = nt;
  return 0;
}

/* -------------------------------------------------------- instruments -- */

uint32_t hg_clr__group_slot(const hg_clearing_t *c, uint32_t id) {
  return map_get(&c->group_map, id);
}

uint32_t hg_clr__group_add(hg_clearing_t *c, uint32_t id) {
  uint32_t g = c->ngroups++;
  c->groups[g] = (group_t){.id = id};
  map_put(&c->group_map, id, g);
  return g;
}

int hg_clearing_instrument_add(hg_clearing_t *c, const hg_clearing_instrument_t *d) {
  if (d == NULL || d->month < 1 || d->month > 12 || d->tick_value < 0 ||
      d->tick_value > HG_CLR_TICK_VALUE_MAX || d->last_dsp < 0 ||
      d->last_dsp > HG_CLR_PRICE_MAX)
    return HG_EINVAL;
  if (inst_lookup(c, d->id) != NIL32) return HG_EEXISTS;
  if (c->ninst_free == 0) return HG_EFULL;
  uint32_t g = map_get(&c->group_map, d->group_id);
  if (g == NIL32) {
    if (c->ngroups == c->cfg.max_groups) return HG_EFULL;
    g = hg_clr__group_add(c, d->group_id);
  }
  uint32_t s = c->inst_free[--c->ninst_free];
  instrument_t *in = &c->insts[s];
  memset(in, 0, sizeof *in);
  in->def = *d;
  in->def.in_delivery = d->in_delivery ? 1 : 0;
  in->group = g;
  in->live = 1;
  in->dsp_tier = HG_DSP_TIER_NONE;
  in->rec_head = in->rec_tail = NIL32;
  in->reg_order = c->inst_counter++;
  in->win_day = NIL64;
  c->inst_order[c->ninst_order++] = s;
  map_put(&c->inst_map, d->id, s);
  hg_idhint_set(&c->inst_hint, d->id, s);
  return 0;
}

int hg_clearing_set_delivery(hg_clearing_t *c, uint32_t instrument, int in_delivery) {
  uint32_t s = inst_lookup(c, instrument);
  if (s == NIL32) return HG_ENOTFOUND;
  c->insts[s].def.in_delivery = in_delivery ? 1 : 0;
  return 0;
}

int hg_clearing_set_fixing(hg_clearing_t *c, uint32_t group_id, int64_t value_micro,
                           int final) {
  uint32_t g = map_get(&c->group_map, group_id);
  if (g == NIL32) return HG_ENOTFOUND;
  if (value_micro <= 0 || value_micro > HG_CLR_FIXING_MAX) return HG_EINVAL;
  c->groups[g].fixing = value_micro;
  if (final) c->groups[g].final_fixing = value_micro;
  return 0;
}

int hg_clearing_ref_price(const hg_clearing_t *c, uint32_t instrument, hg_price_t *out) {
  uint32_t s = inst_lookup(c, instrument);
  if (s == NIL32) return HG_ENOTFOUND;
  *out = ref_price(c, &c->insts[s]);
  return 0;
}

int hg_clearing_instrument_info(const hg_clearing_t *c, uint32_t instrument,
                                hg_clearing_instrument_info_t *out) {
  uint32_t s = inst_lookup(c, instrument);
  if (s == NIL32) return HG_ENOTFOUND;
  const instrument_t *in = &c->insts[s];
  memset(out, 0, sizeof *out);
  out->inst = in->def;
  out->last_dsp_tier = in->dsp_tier;
  out->ref_price = ref_price(c, in);
  out->settled = (int)in->settled;
  out->fsp = in->fsp;
  for (uint32_t r = in->rec_head; r != NIL32; r = c->recs[r].i_next)
    if (c->recs[r].pos > 0) out->open_interest += c->recs[r].pos;
  return 0;
}

int hg_clearing_instrument_remove(hg_clearing_t *c, uint32_t instrument) {
  uint32_t s = inst_lookup(c, instrument);
  if (s == NIL32) return HG_ENOTFOUND;
  if (!c->insts[s].settled) return HG_ESTATE;
  hg_clr__rec_free_instrument(c, s);
  for (uint32_t i = 0; i < c->ninst_order; i++) {
    if (c->inst_order[i] == s) {
      memmove(&c->inst_order[i], &c->inst_order[i + 1],
              (c->ninst_order - i - 1) * sizeof *c->inst_order);
      c->ninst_order--;
      break;
    }
  }
  c->insts[s].live = 0;
  map_del(&c->inst_map, instrument);
  c->inst_free[c->ninst_free++] = s;
  return 0;
}

/* --------------------------------------------------------- order path -- */

const char *hg_clearing_reject_str(int reason) {
  switch (reason) {
#define HG_CLR_REJECT_STR(name, num, msg) \
  case num:                               \
    return msg;
    HG_CLR_REJECT_MAP(HG_CLR_REJECT_STR)
#undef HG_CLR_REJECT_STR
  default:
    return "unknown reason";
  }
}

static int64_t abs64(int64_t v) { return v < 0 ? -v : v; }

/* The price band around ref (> 0): sets res->band_low / band_high and, for
 * a price (> 0; 0 = market, never banded) outside it, res->reason =
 * PRICE_BAND. False iff rejected. band_bps 0 disables the band. */
static bool band_ok(const hg_clearing_t *c, hg_price_t ref, hg_price_t price,
                    hg_clearing_result_t *res) {
  uint32_t bps = c->cfg.band_bps;
  if (bps == 0) return true;
  /* inclusive band: |p - ref| * 10000 <= ref * bps */
  int64_t lo64, hi64; /* 64-bit whenever the products fit */
  if (!__builtin_mul_overflow(ref, 10000 - (int64_t)bps, &lo64) &&
      !__builtin_mul_overflow(ref, 10000 + (int64_t)bps, &hi64)) {
    res->band_low = lo64 <= 0 ? 1 : (lo64 - 1) / 10000 + 1;
    res->band_high = hi64 / 10000;
  } else {
    i128 lo_num = (i128)ref * (10000 - (int64_t)bps);
    res->band_low = lo_num <= 0 ? 1 : (int64_t)((lo_num + 9999) / 10000);
    res->band_high = (int64_t)((i128)ref * (10000 + (int64_t)bps) / 10000);
  }
  if (price > 0 && (i128)abs64(price - ref) * 10000 > (i128)ref * bps) {
    res->reason = HG_CLR_REJ_PRICE_BAND;
    return false;
  }
  return true;
}

int hg_clearing_check_band(const hg_clearing_t *c, uint32_t instrument, hg_price_t price,
                           hg_clearing_result_t *res) {
  if (res == NULL) return HG_EINVAL;
  memset(res, 0, sizeof *res);
  uint32_t s = inst_lookup(c, instrument);
  if (s == NIL32) return HG_ENOTFOUND;
  hg_price_t ref = ref_price(c, &c->insts[s]);
  res->ref_price = ref;
  if (ref > 0) (void)band_ok(c, ref, price, res);
  return 0;
}

void hg_clearing_prefetch_account(const hg_clearing_t *c, hg_account_t account) {
  uint32_t s = acct_lookup(c, account);
  if (s == NIL32) return;
  __builtin_prefetch(&c->accounts[s]);
  if (c->rec_dir == NULL) return;
  /* The dense table names the account's records without walking its list
   * (whose links are the very loads this is meant to hide). */
  const uint32_t *row = &c->rec_dir[(size_t)s * c->cfg.max_instruments];
  uint32_t n = c->ninst_order < 8 ? c->ninst_order : 8;
  for (uint32_t k = 0; k < n; k++) {
    uint32_t r = row[c->inst_order[k]];
    if (r != NIL32) __builtin_prefetch(&c->recs[r]);
  }
}

int hg_clearing_check_order(hg_clearing_t *c, hg_account_t account, uint32_t instrument,
                            int side, hg_qty_t qty, hg_price_t price,
                            hg_clearing_result_t *res) {
  if (res == NULL) return HG_EINVAL;
  memset(res, 0, sizeof *res);
  uint32_t s = acct_lookup(c, account);
  if (s == NIL32) {
    res->reason = HG_CLR_REJ_UNKNOWN_ACCOUNT;
    return 0;
  }
  res->equity = c->accounts[s].balance;
  uint32_t is = inst_lookup(c, instrument);
  if (is == NIL32) {
    res->reason = HG_CLR_REJ_UNKNOWN_INSTRUMENT;
    return 0;
  }
  const instrument_t *in = &c->insts[is];
  if (in->settled) {
    res->reason = HG_CLR_REJ_INSTRUMENT_CLOSED;
    return 0;
  }
  if (side != HG_CLR_BUY && side != HG_CLR_SELL) {
    res->reason = HG_CLR_REJ_INVALID_SIDE;
    return 0;
  }
  if (qty <= 0) {
    res->reason = HG_CLR_REJ_INVALID_QTY;
    return 0;
  }
  if (qty > c->cfg.max_order_qty) {
    res->reason = HG_CLR_REJ_QTY_TOO_LARGE;
    res->limit = c->cfg.max_order_qty;
    return 0;
  }
  if (price < 0 || price > HG_CLR_PRICE_MAX) {
    res->reason = HG_CLR_REJ_INVALID_PRICE;
    return 0;
  }
  hg_price_t ref = ref_price(c, in);
  res->ref_price = ref;
  if (ref == 0) {
    res->reason = HG_CLR_REJ_NO_REFERENCE;
    return 0;
  }
  if (!band_ok(c, ref, price, res)) return 0;
  uint32_t r = rec_find(c, s, is);
  int64_t pos = 0, ob = 0, os = 0;
  if (r != NIL32) {
    pos = c->recs[r].pos;
    ob = c->recs[r].open_buy;
    os = c->recs[r].open_sell;
  }
  if (__builtin_expect(c->accounts[s].state != HG_CLR_OK, 0) &&
      !(side == HG_CLR_BUY ? pos < 0 && pos + ob + qty <= 0 : pos > 0 && pos - os - qty >= 0)) {
    hg_clearing_standing_t st;
    (void)hg_clearing_standing(c, account, &st);
    res->reason = HG_CLR_REJ_MARGIN_CALL;
    res->equity = st.equity;
    res->initial_margin = st.im;
    res->amount = st.call_amount;
    return 0;
  }
  int64_t before = side == HG_CLR_BUY ? pos + ob : pos - os;
  int64_t x = side == HG_CLR_BUY ? before + qty : before - qty;
  int64_t limit = in->def.in_delivery ? c->cfg.position_limit_delivery : c->cfg.position_limit;
  res->position = x;
  res->limit = limit;
  if (abs64(x) > limit && abs64(x) > abs64(before)) {
    res->reason = HG_CLR_REJ_POSITION_LIMIT;
    return 0;
  }
  /* open quantities stay within HG_CLR_QTY_MAX, as open_add enforces */
  if ((side == HG_CLR_BUY ? ob : os) + qty > HG_CLR_QTY_MAX) {
    res->reason = HG_CLR_REJ_POSITION_LIMIT;
    return 0;
  }
  i128 im = account_im(c, s, is, side, qty, 1);
  res->initial_margin = sat64(im);
  if ((i128)res->equity - im < 0) {
    res->reason = HG_CLR_REJ_INSUFFICIENT_MARGIN;
    return 0;
  }
  if (r == NIL32 && hg_clr__rec_get_or_create(c, s, is) == NIL32) {
    res->reason = HG_CLR_REJ_POSITIONS_FULL;
    return 0;
  }
  return 0;
}

static int open_args(hg_clearing_t *c, hg_account_t account, uint32_t instrument, int side,
                     hg_qty_t qty, uint32_t *s, uint32_t *is) {
  *s = acct_lookup(c, account);
  *is = inst_lookup(c, instrument);
  if (*s == NIL32 || *is == NIL32) return HG_ENOTFOUND;
  if ((side != HG_CLR_BUY && side != HG_CLR_SELL) || qty <= 0) return HG_EINVAL;
  return 0;
}

int hg_clearing_open_add(hg_clearing_t *c, hg_account_t account, uint32_t instrument,
                         int side, hg_qty_t qty) {
  uint32_t s, is;
  int rc = open_args(c, account, instrument, side, qty, &s, &is);
  if (rc < 0) return rc;
  if (c->insts[is].settled) return HG_ESTATE;
  if (qty > HG_CLR_QTY_MAX) return HG_EOVERFLOW;
  uint32_t r = rec_find(c, s, is);
  int64_t cur = 0;
  if (r != NIL32) cur = side == HG_CLR_BUY ? c->recs[r].open_buy : c->recs[r].open_sell;
  if (cur + qty > HG_CLR_QTY_MAX) return HG_EOVERFLOW;
  if (r == NIL32 && (r = hg_clr__rec_get_or_create(c, s, is)) == NIL32) return HG_EFULL;
  if (side == HG_CLR_BUY) c->recs[r].open_buy += qty;
  else c->recs[r].open_sell += qty;
  return 0;
}

int hg_clearing_open_remove(hg_clearing_t *c, hg_account_t account, uint32_t instrument,
                            int side, hg_qty_t qty) {
  uint32_t s, is;
  int rc = open_args(c, account, instrument, side, qty, &s, &is);
  if (rc < 0) return rc;
  uint32_t r = rec_find(c, s, is);
  if (r == NIL32) return HG_EINVAL;
  int64_t *open = side == HG_CLR_BUY ? &c->recs[r].open_buy : &c->recs[r].open_sell;
  if (*open < qty) return HG_EINVAL;
  *open -= qty;
  return 0;
}

static int fill_impl(hg_clearing_t *c, uint32_t instrument, hg_account_t buyer,
                     hg_account_t seller, hg_qty_t qty, hg_price_t price, uint64_t ts,
                     unsigned flags, uint32_t *bsp, uint32_t *ssp) {
  uint32_t bs = acct_lookup(c, buyer), ss = acct_lookup(c, seller);
  uint32_t is = inst_lookup(c, instrument);
  if (bs == NIL32 || ss == NIL32 || is == NIL32) return HG_ENOTFOUND;
  instrument_t *in = &c->insts[is];
  if (in->settled) return HG_ESTATE;
  if (qty <= 0 || qty > HG_CLR_QTY_MAX || price <= 0 || price > HG_CLR_PRICE_MAX ||
      (flags & ~(HG_CLR_FILL_BUY_RESTING | HG_CLR_FILL_SELL_RESTING | HG_CLR_FILL_NO_DSP)) != 0)
    return HG_EINVAL;
  uint32_t br = rec_find(c, bs, is), sr = rec_find(c, ss, is);
  uint32_t need = (br == NIL32) + (sr == NIL32 && ss != bs);
  if (need > rec_free_count(c)) return HG_EFULL;
  /* validate everything before the first change */
  if ((flags & HG_CLR_FILL_BUY_RESTING) && (br == NIL32 || c->recs[br].open_buy < qty))
    return HG_EINVAL;
  if ((flags & HG_CLR_FILL_SELL_RESTING) && (sr == NIL32 || c->recs[sr].open_sell < qty))
    return HG_EINVAL;
  if (bs != ss) {
    if (br != NIL32 && c->recs[br].pos > HG_CLR_QTY_MAX - qty) return HG_EOVERFLOW;
    if (sr != NIL32 && c->recs[sr].pos < -HG_CLR_QTY_MAX + qty) return HG_EOVERFLOW;
  }
  uint64_t tod = ts % HG_NS_PER_DAY;
  int in_window = !(flags & HG_CLR_FILL_NO_DSP) && tod < c->cfg.cycle_time_of_day_ns &&
                  tod >= c->cfg.cycle_time_of_day_ns - c->cfg.dsp_window_ns;
  uint64_t day = ts / HG_NS_PER_DAY;
  int64_t wq = in->win_day == day ? in->win_q : 0;
  if (in_window && wq > INT64_MAX - qty) return HG_EOVERFLOW;

  br = hg_clr__rec_get_or_create(c, bs, is);
  sr = hg_clr__rec_get_or_create(c, ss, is);
  i128 qp = (i128)qty * price;
  posrec_t *b = &c->recs[br], *sl = &c->recs[sr];
  b->pos += qty;
  b->day_q += qty;
  b->day_qp += qp;
  b->fills = 1;
  sl->pos -= qty;
  sl->day_q -= qty;
  sl->day_qp -= qp;
  sl->fills = 1;
  if (flags & HG_CLR_FILL_BUY_RESTING) b->open_buy -= qty;
  if (flags & HG_CLR_FILL_SELL_RESTING) sl->open_sell -= qty;
  if (in_window) {
    if (in->win_day != day) {
      in->win_day = day;
      in->win_q = 0;
      in->win_qp = 0;
    }
    in->win_q += qty;
    in->win_qp += qp;
  }
  in->last_trade = price;
  *bsp = bs;
  *ssp = ss;
  return 0;
}

int hg_clearing_fill(hg_clearing_t *c, uint32_t instrument, hg_account_t buyer,
                     hg_account_t seller, hg_qty_t qty, hg_price_t price, uint64_t ts,
                     unsigned flags) {
  uint32_t bs, ss;
  int rc = fill_impl(c, instrument, buyer, seller, qty, price, ts, flags, &bs, &ss);
  if (rc < 0) return rc;
  /* a called account's fill may meet its call (a flag test otherwise) */
  if (__builtin_expect(c->accounts[bs].state != HG_CLR_OK, 0)) hg_clr__improve(c, bs);
  if (__builtin_expect(c->accounts[ss].state != HG_CLR_OK, 0)) hg_clr__improve(c, ss);
  return 0;
}

int hg_clearing_liq_fill(hg_clearing_t *c, uint32_t instrument, hg_account_t buyer,
                         hg_account_t seller, hg_qty_t qty, hg_price_t price, unsigned flags,
                         int liq_side, uint64_t seq, uint64_t ts, int64_t *fee) {
  if (fee != NULL) *fee = 0;
  if (liq_side != HG_CLR_BUY && liq_side != HG_CLR_SELL) return HG_EINVAL;
  int rc = hg_clr__ledger_reserve(c, 2);
  if (rc < 0) return rc;
  uint32_t bs, ss;
  rc = fill_impl(c, instrument, buyer, seller, qty, price, ts, flags, &bs, &ss);
  if (rc < 0) return rc;
  uint32_t ls = liq_side == HG_CLR_BUY ? bs : ss;
  const instrument_t *in = &c->insts[inst_lookup(c, instrument)];
  /* ceil(q p TV bps / 10000); q, p, TV <= 1e9 and bps <= 1e4: < 2^103 */
  i128 full = ((i128)qty * price * hg_clr__tv(c, in) * c->cfg.liq_fee_bps + 9999) / 10000;
  i128 eq = hg_clr__equity(c, ls, NULL);
  i128 f = full < eq ? full : eq;
  i128 room = (i128)c->accounts[ls].balance - INT64_MIN;
  if (f > room) f = room;
  if (f > (i128)INT64_MAX - c->fund) f = (i128)INT64_MAX - c->fund;
  if (f > 0) { /* f <= E: the balance stays above the open loss, no overflow */
    hg_clr__post(c, ls, HG_LEDGER_LIQ_FEE, instrument, -(int64_t)f, price, qty, seq, ts);
    hg_clr__post_fund(c, HG_LEDGER_LIQ_FEE, instrument, (int64_t)f, price, qty, seq, ts);
    c->g_liq_fees += (int64_t)f;
    if (fee != NULL) *fee = (int64_t)f;
  }
  if (c->accounts[bs].state != HG_CLR_OK) hg_clr__improve(c, bs);
  if (c->accounts[ss].state != HG_CLR_OK) hg_clr__improve(c, ss);
  return 0;
}

int hg_clearing_position(const hg_clearing_t *c, hg_account_t account, uint32_t instrument,
                         hg_clearing_position_t *out) {
  uint32_t s = acct_lookup(c, account), is = inst_lookup(c, instrument);
  if (s == NIL32 || is == NIL32) return HG_ENOTFOUND;
  memset(out, 0, sizeof *out);
  uint32_t r = rec_find(c, s, is);
  if (r == NIL32) return 0;
  const posrec_t *p = &c->recs[r];
  out->pos = p->pos;
  out->pos_prev = p->pos_prev;
  out->open_buy = p->open_buy;
  out->open_sell = p->open_sell;
  out->day_qty = p->day_q;
  out->day_value = p->day_qp > INT64_MAX ? INT64_MAX : p->day_qp < INT64_MIN ? INT64_MIN
                                                                             : (int64_t)p->day_qp;
  return 0;
}
