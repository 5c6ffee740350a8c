/*
 * cmdgen.h - a deterministic command stream for pipeline, crash and recovery
 * tests and benchmarks: command i is a pure function of (i, seed), so a test
 * can regenerate what it sent and compare it with what the journal holds.
 *
 * Commands 0..CMDGEN_SETUP-1 list one instrument, add CMDGEN_ACCOUNTS accounts
 * and fund them; later commands are new orders, cancels, replaces and mass
 * cancels around a slowly moving price. Order ids are the seq of the command
 * that created the order, and a stream submitted from seq 1 gives command i
 * seq i + 1, so cancels aim at recent orders by index.
 */
#ifndef HOURGLASS_TESTS_CMDGEN_H
#define HOURGLASS_TESTS_CMDGEN_H

#include <stdio.h>
#include <string.h>

#include "hourglass/exchange.h"

#define CMDGEN_ACCOUNTS 8u
#define CMDGEN_SETUP (1u + 2u * CMDGEN_ACCOUNTS)
#define CMDGEN_INSTRUMENT 1u

static inline uint64_t cmdgen_mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static inline void cmdgen_instrument_params(hg_book_params_t *bp) {
  memset(bp, 0, sizeof *bp);
  bp->instrument_id = CMDGEN_INSTRUMENT;
  bp->tick_size = 1000;
  bp->contract_unit = 1000;
  bp->min_price = 1;
  bp->max_price = 100000;
  bp->max_order_qty = 1000;
  bp->ref_price = 3000;
  bp->band_bps = 2000;
  bp->max_orders = 1u << 16;
  bp->max_accounts = 64;
}

/* Fills *c with command i of the stream (seq and ts left 0). */
static inline void cmdgen_command(uint64_t i, uint64_t seed, hg_command_t *c) {
  memset(c, 0, sizeof *c);
  if (i == 0) {
    c->type = HG_COMMAND_LIST_INSTRUMENT;
    snprintf(c->u.list.symbol, sizeof c->u.list.symbol, "B200.A.2027-03");
    cmdgen_instrument_params(&c->u.list.params);
    return;
  }
  if (i <= CMDGEN_ACCOUNTS) {
    c->type = HG_COMMAND_ADD_ACCOUNT;
    c->u.add_account.account = (hg_account_t)i;
    c->u.add_account.firm = (uint32_t)(i + 1) / 2;
    return;
  }
  if (i < CMDGEN_SETUP) {
    c->type = HG_COMMAND_DEPOSIT;
    c->u.cash.account = (hg_account_t)(i - CMDGEN_ACCOUNTS);
    c->u.cash.amount = 1000000000000ll; /* 1,000,000 USD */
    return;
  }
  uint64_t r = cmdgen_mix(i ^ (seed * 0x100000001b3ull));
  hg_account_t acct = (hg_account_t)(1 + (r >> 8) % CMDGEN_ACCOUNTS);
  int64_t mid = 3000 + (int64_t)((i / 5000) % 40) - 20;
  uint32_t kind = (uint32_t)(r % 100);
  uint64_t back = 1 + (r >> 20) % 64; /* how many commands back a cancel aims */
  hg_oid_t target = i + 1 > back ? (hg_oid_t)(i + 1 - back) : 1;
  if (kind < 60) {
    hg_cmd_new_order_t *o = &c->u.new_order;
    c->type = HG_COMMAND_NEW_ORDER;
    o->instrument_id = CMDGEN_INSTRUMENT;
    o->account = acct;
    o->client_order_id = i;
    o->side = (uint8_t)((r >> 16) & 1);
    o->type = HG_ORD_LIMIT;
    o->tif = ((r >> 40) % 8 == 0) ? HG_TIF_IOC : ((r >> 40) % 8 == 1 ? HG_TIF_DAY : HG_TIF_GTC);
    int64_t off = (int64_t)((r >> 24) % 12) - 4; /* mostly passive, some crossing */
    o->price = o->side == HG_SIDE_BUY ? mid - off : mid + off;
    o->qty = (hg_qty_t)(1 + (r >> 32) % 20);
  } else if (kind < 85) {
    c->type = HG_COMMAND_CANCEL;
    c->u.cancel.instrument_id = CMDGEN_INSTRUMENT;
    c->u.cancel.account = acct;
    c->u.cancel.order_id = target;
  } else if (kind < 97) {
    c->type = HG_COMMAND_REPLACE;
    c->u.replace.instrument_id = CMDGEN_INSTRUMENT;
    c->u.replace.account = acct;
    c->u.replace.order_id = target;
    c->u.replace.new_price = mid + (int64_t)((r >> 24) % 9) - 4;
    c->u.replace.new_qty = (hg_qty_t)(1 + (r >> 32) % 20);
  } else {
    c->type = HG_COMMAND_MASS_CANCEL;
    c->u.mass_cancel.instrument_id = CMDGEN_INSTRUMENT;
    c->u.mass_cancel.account = acct;
    c->u.mass_cancel.sides = HG_SIDES_BOTH;
  }
}

#endif /* HOURGLASS_TESTS_CMDGEN_H */
