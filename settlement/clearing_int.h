/*
 * clearing_int.h - the clearing state's layout, shared by clearing.c (tables,
 * cash, order path, margin) and settle.c (settlement prices, daily cycle,
 * final settlement, statements). Not installed.
 */
#ifndef HOURGLASS_CLEARING_INT_H
#define HOURGLASS_CLEARING_INT_H

#include <stdint.h>

#include "hourglass/clearing.h"
#include "hourglass/idhint.h"

#define NIL32 UINT32_MAX
#define NIL64 UINT64_MAX

typedef __int128 i128;

/* Open-addressing map, uint64 key -> uint32 value, linear probing with
 * backward-shift deletion (no tombstones, so lookups stay short forever).
 * Sized at create to at least twice its capacity; never grows. */
typedef struct map_slot {
  uint64_t key;
  uint32_t val; /* value + 1; 0 = empty, so a calloc'ed table is empty */
} map_slot_t;

typedef struct map {
  map_slot_t *slots;
  uint64_t mask;
} map_t;

/* One (account, instrument) record. Linked into its account's list (margin
 * walks it) and its instrument's list (cycle and final settlement walk it),
 * both in creation order. Owned by the pool in hg_clearing. */
typedef struct posrec {
  /* What the margin walk over an account's records reads comes first, in
   * 32 bytes: with the 96-byte stride from a 64-byte aligned pool it never
   * straddles a cache line. */
  int64_t pos;        /* current position */
  int64_t open_buy;
  int64_t open_sell;
  uint32_t inst;      /* instrument slot */
  uint32_t a_next;    /* account list (doubly linked: removal at expiry) */
  uint32_t a_prev;
  uint32_t acct;      /* account slot */
  i128 day_qp;        /* sum of q * p of fills since the last cycle */
  int64_t pos_prev;   /* position at the last cycle */
  int64_t day_q;      /* sum of signed q since the last cycle */
  int64_t scratch;    /* VM or final payment between the check and apply passes */
  uint32_t i_next;         /* instrument list (freed all at once) */
  uint32_t fills;          /* 1 if any fill since the last cycle */
} posrec_t;

typedef struct account {
  hg_account_t id;
  uint32_t firm_id;
  int64_t balance;
  uint32_t rec_head, rec_tail; /* position records */
  uint32_t nrec;
  uint64_t led_first, led_last; /* this account's ledger chain */
  i128 scratch;                 /* pending cash during cycle checks */
  uint64_t mark;                /* == mark_gen: already listed by the current scan */
  /* the guarantee (CONTRACT.md 4.6, 4.7) */
  uint8_t state;                /* hg_clr_standing_t */
  uint8_t liq_reason;           /* HG_CLR_LIQ_* */
  uint64_t call_due;            /* cycle count the call is due at; 0 = none */
  int64_t call_amount;
  int64_t wf;                   /* waterfall amount between check and post */
} account_t;

typedef struct instrument {
  hg_clearing_instrument_t def;
  uint32_t group;       /* group slot */
  uint32_t live;        /* slot in use */
  uint32_t settled;
  int32_t dsp_tier;
  hg_price_t fsp;
  uint32_t rec_head, rec_tail;
  uint64_t reg_order;   /* registration counter: iteration order */
  /* tier-1 window sums of UTC day win_day */
  uint64_t win_day;
  int64_t win_q;
  i128 win_qp;
  hg_price_t mark;       /* last mark, 0 = never marked */
  hg_price_t last_trade; /* last fill price, 0 = none */
} instrument_t;

typedef struct group {
  uint32_t id;
  int64_t fixing;       /* latest fixing, any status; 0 = none */
  int64_t final_fixing; /* latest FINAL fixing; 0 = none */
} group_t;

typedef struct ledger_rec {
  hg_ledger_entry_t e;
  uint64_t next_same; /* next entry of the same account, NIL64 = last */
  uint32_t acct;      /* account slot */
} ledger_rec_t;

struct hg_clearing {
  hg_clearing_config_t cfg;

  account_t *accounts;
  uint32_t naccounts;
  map_t acct_map;

  /* owned: slot hints by id (hourglass/idhint.h), used only when the slot
   * holds that id (and, for instruments, is live); else the maps answer. */
  hg_idhint_t acct_hint, inst_hint;

  instrument_t *insts;
  uint32_t *inst_order; /* live instrument slots in registration order */
  uint32_t ninst_order;
  uint32_t *inst_free;  /* free instrument slots (stack) */
  uint32_t ninst_free;
  uint64_t inst_counter;
  map_t inst_map;

  group_t *groups;
  uint32_t ngroups;
  map_t group_map;

  uint32_t nfirms;
  map_t firm_map;

  posrec_t *recs;
  uint32_t rec_free;  /* free list through a_next */
  uint32_t rec_hw;    /* records [rec_hw, max_positions) were never used */
  uint32_t nrec_used;
  map_t rec_map;      /* (acct slot << 32 | inst slot) -> record */
  /* owned: record of (acct slot, inst slot) at [acct * max_instruments +
   * inst], NIL32 for none; a dense table is a handful of KiB where the map
   * is hundreds, so the order path's lookups stay in cache. NULL when the
   * configured product is too large (then rec_map is used). */
  uint32_t *rec_dir;

  /* the inter-commodity pairs (hg_clearing_spreads_set), in the owner's
   * order; not serialized: the owner sets them again after a restore */
  hg_clearing_spread_t spreads[HG_CLR_MAX_SPREADS];
  uint32_t nspreads;

  /* margin scratch: per group L and S, and the groups touched */
  i128 *grp_l, *grp_s;
  uint32_t *grp_touched;

  /* daily-cycle scratch, per instrument slot */
  hg_price_t *cyc_dsp, *top_bid, *top_ask;
  int32_t *cyc_tier;
  uint8_t *top_seen;

  ledger_rec_t *ledger;
  uint64_t ledger_len, ledger_cap;

  int64_t tot_deposits, tot_withdrawals, tot_fees;
  uint64_t mark_gen;

  /* the guarantee */
  int64_t fund;
  int64_t g_fund_deposits, g_liq_fees, g_fund_used, g_socialized, g_uncovered;
  uint64_t g_bankruptcies;
  uint64_t ncycles; /* daily cycles run */
};

/* clearing.c helpers used by settle.c and guarantee.c */
hg_price_t hg_clr__ref_price(const hg_clearing_t *c, const instrument_t *in);
/* Initial margin of account slot s: positions and open orders at the
 * reference prices (at_mark 0), or positions alone at the marks (at_mark 1,
 * an unmarked instrument at its reference price). */
i128 hg_clr__account_im(hg_clearing_t *c, uint32_t s, int at_mark);
/* Appends a fund entry (capacity reserved) and applies it to the fund. */
void hg_clr__post_fund(hg_clearing_t *c, uint32_t kind, uint32_t instrument, int64_t amount,
                       hg_price_t price, int64_t qty, uint64_t seq, uint64_t ts);
/* settle.c: checks tops and loads them into the per-slot scratch (daily
 * cycle and mark round). HG_EINVAL (unknown or repeated instrument, bad
 * prices). */
int hg_clr__load_tops(hg_clearing_t *c, const hg_clearing_top_t *tops, size_t ntops);
/* guarantee.c, used by clearing.c and settle.c */
/* E of account slot s at the last marks; *has_pos = any position. */
i128 hg_clr__equity(const hg_clearing_t *c, uint32_t s, int *has_pos);
/* Full evaluation of account slot s (mark round or cycle; deadline: a cycle,
 * calls due at the cycle count become liquidations); rep counts. */
void hg_clr__evaluate(hg_clearing_t *c, uint32_t s, int deadline, hg_clearing_mark_report_t *rep);
/* Improve-only re-evaluation after a deposit or fill (no-op when OK). */
void hg_clr__improve(hg_clearing_t *c, uint32_t s);
/* Marks := DSP of the instruments settled by a cycle; then every account is
 * evaluated with the deadline rule. */
void hg_clr__evaluate_all(hg_clearing_t *c, int deadline, hg_clearing_mark_report_t *rep);
uint32_t hg_clr__inst_slot(const hg_clearing_t *c, uint32_t id);
uint32_t hg_clr__acct_slot(const hg_clearing_t *c, hg_account_t id);
int hg_clr__ledger_reserve(hg_clearing_t *c, uint64_t n);
/* Appends an entry (capacity reserved) and applies it to the balance. */
void hg_clr__post(hg_clearing_t *c, uint32_t acct, uint32_t kind, uint32_t instrument,
                  int64_t amount, hg_price_t price, int64_t qty, uint64_t seq, uint64_t ts);
int64_t hg_clr__tv(const hg_clearing_t *c, const instrument_t *in);
uint32_t hg_clr__group_slot(const hg_clearing_t *c, uint32_t id);
/* Adds group id (absent, with room) and returns its slot. */
uint32_t hg_clr__group_add(hg_clearing_t *c, uint32_t id);
uint32_t hg_clr__rec_find(const hg_clearing_t *c, uint32_t acct, uint32_t inst);
/* Returns the record of (acct, inst), creating it; NIL32 if the pool is full. */
uint32_t hg_clr__rec_get_or_create(hg_clearing_t *c, uint32_t acct, uint32_t inst);
void hg_clr__rec_free_instrument(hg_clearing_t *c, uint32_t inst_slot);
/* Frees the instrument's records that hold nothing: no position now or at the
 * last cycle, no open quantity, no fills since the last cycle. */
void hg_clr__rec_sweep(hg_clearing_t *c, uint32_t inst_slot);

#endif
