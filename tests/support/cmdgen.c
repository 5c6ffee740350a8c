/*
 * cmdgen.c - the deterministic command stream of cmdgen.h: a setup prefix
 * (one instrument, accounts, deposits), then a mix drawn from cmdgen_mix of
 * (i, seed): 60% new orders, 25% cancels, 12% replaces, 3% mass cancels.
 */
#include "cmdgen.h"

#include <stdio.h>
#include <string.h>

uint64_t cmdgen_mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

void cmdgen_book_params(hg_book_params_t *bp, uint32_t instrument_id, uint32_t max_orders,
                        uint32_t max_accounts) {
  memset(bp, 0, sizeof *bp);
  bp->instrument_id = instrument_id;
  bp->tick_size = 1000;
  bp->contract_unit = 1000;
  bp->min_price = 1;
  bp->max_price = 100000;
  bp->max_order_qty = 1000;
  bp->ref_price = 3000;
  bp->max_orders = max_orders;
  bp->max_accounts = max_accounts;
}

void cmdgen_instrument_params(hg_book_params_t *bp) {
  cmdgen_book_params(bp, CMDGEN_INSTRUMENT, 1u << 16, 64);
}

void cmdgen_new_order(hg_command_t *c, uint32_t instrument, hg_account_t account,
                      uint64_t client_order_id, uint64_t r, int64_t mid, uint32_t spread,
                      int64_t cross) {
  hg_cmd_new_order_t *o = &c->u.new_order;
  c->type = HG_COMMAND_NEW_ORDER;
  o->instrument_id = instrument;
  o->account = account;
  o->client_order_id = client_order_id;
  o->side = (uint8_t)((r >> 16) & 1);
  o->type = HG_ORD_LIMIT;
  uint32_t t = (uint32_t)((r >> 40) % 8);
  o->tif = t == 0 ? HG_TIF_IOC : t == 1 ? HG_TIF_DAY : HG_TIF_GTC;
  int64_t off = (int64_t)((r >> 24) % spread) - cross;
  o->price = o->side == HG_SIDE_BUY ? mid - off : mid + off;
  o->qty = (hg_qty_t)(1 + (r >> 32) % 20);
}

void cmdgen_cancel(hg_command_t *c, uint32_t instrument, hg_account_t account, hg_oid_t oid) {
  c->type = HG_COMMAND_CANCEL;
  c->u.cancel.instrument_id = instrument;
  c->u.cancel.account = account;
  c->u.cancel.order_id = oid;
}

void cmdgen_replace(hg_command_t *c, uint32_t instrument, hg_account_t account, hg_oid_t oid,
                    uint64_t r, int64_t mid) {
  c->type = HG_COMMAND_REPLACE;
  c->u.replace.instrument_id = instrument;
  c->u.replace.account = account;
  c->u.replace.order_id = oid;
  c->u.replace.new_price = mid + (int64_t)((r >> 24) % 9) - 4;
  c->u.replace.new_qty = (hg_qty_t)(1 + (r >> 32) % 20);
}

void cmdgen_mass_cancel(hg_command_t *c, uint32_t instrument, hg_account_t account) {
  c->type = HG_COMMAND_MASS_CANCEL;
  c->u.mass_cancel.instrument_id = instrument;
  c->u.mass_cancel.account = account;
  c->u.mass_cancel.sides = HG_SIDES_BOTH;
}

void cmdgen_command(uint64_t i, uint64_t seed, hg_command_t *c) {
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
  if (kind < 60)
    cmdgen_new_order(c, CMDGEN_INSTRUMENT, acct, i, r, mid, 12, 4); /* mostly passive */
  else if (kind < 85)
    cmdgen_cancel(c, CMDGEN_INSTRUMENT, acct, target);
  else if (kind < 97)
    cmdgen_replace(c, CMDGEN_INSTRUMENT, acct, target, r, mid);
  else
    cmdgen_mass_cancel(c, CMDGEN_INSTRUMENT, acct);
}
