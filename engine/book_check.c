/*
 * book_check.c - hg_book_check() (book_internal.h): walks every structure
 * of the book (book_int.h) and checks that they agree. Tests and debug
 * builds only; nothing on the order path calls it.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>

#include "book_int.h"
#include "book_internal.h"

int hg_book_check(const hg_book_t *b) {
  uint32_t total = 0;
  for (int side = 0; side < 2; side++) {
    const bitmap_t *bm = &b->bm[side];
    int64_t first = -1, last = -1;
    /* Small books: every level. Wide ones: the levels the bitmap marks;
     * orders outside them are caught by the slot walk below. */
    bool full = b->nlevels <= (1u << 16);
    for (int64_t ii = full ? 0 : hg_book__bm_next(bm, 0); ii >= 0 && ii < (int64_t)b->nlevels;
         ii = full ? ii + 1 : ((uint64_t)ii + 1 < b->nlevels ? hg_book__bm_next(bm, (uint64_t)ii + 1) : -1)) {
      uint32_t i = (uint32_t)ii;
      const level_t *lv = &b->levels[side][i];
      hg_qty_t sum = 0;
      uint32_t n = 0, prev = NIL;
      for (uint32_t s = lv->count ? lv->head : NIL; s != NIL; s = b->pool[s].lnext) {
        const order_t *o = &b->pool[s];
        if (o->lprev != prev) return -1;
        if (o->side != side || o->lvl != i || o->leaves <= 0 || o->leaves > b->cold[s].qty)
          return -2;
        if (n++ > b->params.max_orders) return -3;
        sum += o->leaves;
        prev = s;
      }
      if (n > 0 && lv->tail != prev) return -4;
      if (sum != lv->qty || n != lv->count) return -5;
      if (bm_test(bm, i) != (n > 0)) return -6;
      if (n > 0) {
        if (first < 0) first = i;
        last = i;
      }
      total += n;
    }
    /* Upper bitmap levels: bit set exactly when the word below is non-zero. */
    for (int k = 1; k < bm->depth; k++)
      for (uint32_t w = 0; w < bm->nwords[k - 1]; w++) {
        bool set = (bm->w[k][w >> 6] >> (w & 63)) & 1u;
        if (set != (bm->w[k - 1][w] != 0)) return -7;
      }
    int64_t want = side == HG_SIDE_BUY ? last : first;
    if (b->best[side] != want) return -8;
  }
  if (b->best[0] >= 0 && b->best[1] >= 0 && b->best[0] >= b->best[1]) return -9;
  if (total != b->count) return -10;

  /* Every live slot is indexed and on a marked level; entry numbers grow
   * along every FIFO and account list (checked below), and are unique. */
  uint32_t n = 0, prev = NIL, displaced = 0, clid_indexed = 0;
  for (uint32_t s = 0; s < b->nslots; s++) {
    const order_t *o = &b->pool[s];
    if (o->id == 0) continue;
    n++;
    if (b->cold[s].seq >= b->next_seq) return -11;
    if (acct_find(b, o->account) != o->acct) return -13;
    bool indexed = b->accts[o->acct].indexed;
    if (order_find(b, o->id) != s || (indexed && clid_find(b, o->account, o->clid) != s))
      return -12;
    if (s != pref_slot(b, o->id)) displaced++;
    if (indexed) clid_indexed++;
    if (o->id > b->oid_hi || o->clid > b->accts[o->acct].clid_hi) return -13;
    if (!bm_test(&b->bm[o->side], o->lvl)) return -6;
    if (o->lnext != NIL && b->cold[o->lnext].seq <= b->cold[s].seq) return -14;
    if (o->anext != NIL && b->cold[o->anext].seq <= b->cold[s].seq) return -14;
  }
  if (n != b->count) return -14;

  uint32_t accounts = 0, in_accounts = 0;
  for (uint32_t r = 0; r < b->params.max_accounts; r++) {
    const acct_t *a = &b->accts[r];
    if (a->count == 0) continue;
    accounts++;
    if (acct_find(b, a->account) != r) return -15;
    uint32_t c = 0;
    prev = NIL;
    for (uint32_t s = a->head; s != NIL; s = b->pool[s].anext) {
      const order_t *o = &b->pool[s];
      if (o->aprev != prev || o->acct != r || o->account != a->account) return -16;
      if (++c > a->count) return -17;
      prev = s;
    }
    if (c != a->count || a->tail != prev) return -17;
    in_accounts += c;
  }
  if (accounts != b->acct_count || in_accounts != b->count) return -18;

  uint32_t free_n = 0;
  /* Every free slot below fresh is on the free stack, and the marks match
   * the stack. */
  uint32_t marked = 0;
  if (b->fresh > b->nslots) return -19;
  for (uint32_t s = 0; s < b->nslots; s++) {
    if (b->pool[s].id == 0) free_n++;
    if (b->pool[s].stacked) {
      marked++;
      if (s >= b->fresh) return -19;
    } else if (b->pool[s].id == 0 && s < b->fresh) {
      return -19;
    }
  }
  if (free_n + b->count != b->nslots || marked != b->free_top) return -20;
  for (uint32_t k = 0; k < b->free_top; k++)
    if (b->free_stack[k] >= b->nslots || !b->pool[b->free_stack[k]].stacked) return -20;

  uint64_t used_oid = 0, used_clid = 0;
  for (uint64_t i = 0; i <= b->id_mask; i++) {
    used_oid += b->oid_tab[i].slot1 != 0;
    used_clid += b->clid_tab[i].slot1 != 0;
  }
  if (used_oid != displaced || used_clid != clid_indexed) return -21;
  /* The parts in use: powers of two within what is allocated, the tables
   * no fuller than 2/3 unless whole, counted right. */
  if (used_oid != b->oid_used || used_clid != b->clid_used) return -24;
  if (b->id_mask > b->id_max_mask || ((b->id_mask + 1) & b->id_mask) != 0) return -24;
  if (b->id_mask < b->id_max_mask && (b->oid_used * 3 > (b->id_mask + 1) * 2 ||
                                      b->clid_used * 3 > (b->id_mask + 1) * 2))
    return -24;
  if ((uint64_t)b->slot_mask + 1 > b->pref_max || ((b->slot_mask + 1) & b->slot_mask) != 0)
    return -25;
  for (uint32_t s = live_end(b); s < b->nslots; s++)
    if (b->pool[s].id != 0) return -25; /* the walks would miss it */

  /* Each slot's displaced count against a recount (a stuck count may be
   * anything: it is never decremented). Scratch memory of this test hook
   * only. */
  uint32_t *recount = calloc(b->nslots, sizeof *recount);
  if (recount == NULL) return -ENOMEM;
  for (uint32_t s = 0; s < b->nslots; s++) {
    const order_t *o = &b->pool[s];
    if (o->id != 0 && s != pref_slot(b, o->id)) recount[pref_slot(b, o->id)]++;
  }
  int bad = 0;
  for (uint32_t s = 0; s < b->nslots && bad == 0; s++) {
    uint32_t d = b->pool[s].displaced;
    if (d != DISP_STUCK && d != recount[s]) bad = -23;
  }
  free(recount);
  if (bad != 0) return bad;
  uint64_t used_acct = 0;
  for (uint64_t i = 0; i <= b->acct_mask; i++) used_acct += b->acct_tab[i].rec != NIL;
  if (used_acct != b->acct_count) return -22;
  return 0;
}

void hg_book__start_small(hg_book_t *b) {
  assert(b->count == 0);
  b->slot_mask = b->pref_max < 2 ? b->pref_max - 1 : 1;
  b->id_mask = b->id_max_mask < 15 ? b->id_max_mask : 15;
}
