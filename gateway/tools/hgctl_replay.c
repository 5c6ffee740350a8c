/*
 * hgctl_replay.c - journal replay for hgctl (`hgctl replay`, declared in
 * hgctl_tools.h) and the private replay `hgctl statement` runs too
 * (hgctl_replay.h); statements are built in hgctl_statement.c and the
 * hedger's tools are in hgctl_hedge.c.
 *
 *   statement                            replays a data directory and prints
 *                                        one account's statement.
 *   replay                               replays a data directory from an
 *                                        empty exchange, prints the state hash
 *                                        at every settlement cycle, checks the
 *                                        latest snapshot, writes and compares
 *                                        statements, and runs what-ifs.
 *
 * Read-only by construction. The journal is read with hg_journal_reader
 * (read-only mappings); the LMDB state store is never opened in place: its
 * data file is copied into a private temporary directory and the snapshot
 * is read from the copy. Nothing is ever created or written under --data,
 * and --out may not point into it.
 *
 * A replay owns one hg_exchange_t (created with the capacities given on the
 * command line, which must match those of the exchange that wrote the
 * journal) and applies every journaled command in seq order, exactly as
 * recovery does, so its hashes are the live exchange's hashes; --until/--day
 * stop it after a UTC day. Statements are written from the clearing ledger
 * inside that exchange (hg_exchange_clearing). A what-if changes the
 * command stream (fixings) or the final settlement payments (FSP) of this
 * private replay only, or projects final settlement from where the replay
 * stopped without applying anything (hgctl_whatif.c). The replay also keeps
 * what the clearing does not: each fill's time and aggressor for the fills
 * export, the symbols of expired contracts, and per (instrument, account)
 * the sum of q x p since the last DSP, which a projection needs.
 */
#include "hgctl_tools.h"
#include "hgctl_args.h"
#include "hgctl_fmt.h"
#include "hgctl_replay.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hourglass/clearing.h"
#include "hourglass/error.h"
#include "hourglass/exchange.h"
#include "hourglass/grow.h"
#include "hourglass/hedge.h"
#include "hourglass/index.h"
#include "hourglass/journal.h"
#include "hourglass/names.h"
#include "hourglass/store.h"


static void hex32(const uint8_t h[32], char out[65]) {
  static const char d[] = "0123456789abcdef";
  for (int i = 0; i < 32; i++) {
    out[2 * i] = d[h[i] >> 4];
    out[2 * i + 1] = d[h[i] & 15];
  }
  out[64] = '\0';
}

/* ============================================================ replay */

/* Progress lines speak USD (prices per GPU-hour, three decimals); --raw
 * prints the state machine's ticks and micro-USD. */
static const char *px(const replay_t *rp, int64_t ticks, char buf[HGCTL_FMT_LEN]) {
  return hgctl_fmt_price_raw(ticks, rp->raw, buf);
}

static const char *usd(const replay_t *rp, int64_t micro, char buf[HGCTL_FMT_LEN]) {
  return hgctl_fmt_money_raw(micro, rp->raw, buf);
}


static int pos_add(replay_t *rp, uint32_t inst, hg_account_t acct, int64_t d, int64_t price) {
  if (rp->pos_n * 2 >= rp->pos_cap) {
    size_t ncap = rp->pos_cap ? rp->pos_cap * 2 : 1024;
    pos_slot_t *n = calloc(ncap, sizeof *n);
    if (n == NULL) return -ENOMEM;
    for (size_t i = 0; i < rp->pos_cap; i++) {
      if (rp->pos[i].key == 0) continue;
      size_t h = (size_t)(rp->pos[i].key * 0x9e3779b97f4a7c15ull) & (ncap - 1);
      while (n[h].key != 0) h = (h + 1) & (ncap - 1);
      n[h] = rp->pos[i];
    }
    free(rp->pos);
    rp->pos = n;
    rp->pos_cap = ncap;
  }
  uint64_t key = (uint64_t)inst << 32 | acct;
  size_t h = (size_t)(key * 0x9e3779b97f4a7c15ull) & (rp->pos_cap - 1);
  while (rp->pos[h].key != 0 && rp->pos[h].key != key) h = (h + 1) & (rp->pos_cap - 1);
  if (rp->pos[h].key == 0) {
    rp->pos[h].key = key;
    rp->pos_n++;
  }
  rp->pos[h].pos += d;
  rp->pos[h].day_qp += (__int128)d * price;
  return 0;
}

/* The sums of the fills since the last DSP of inst are settled by it. */
static void pos_cycle(replay_t *rp, uint32_t inst) {
  for (size_t i = 0; i < rp->pos_cap; i++)
    if (rp->pos[i].key >> 32 == inst) rp->pos[i].day_qp = 0;
}

static const pos_slot_t *pos_slot(const replay_t *rp, uint32_t inst, hg_account_t acct) {
  if (rp->pos_cap == 0) return NULL;
  uint64_t key = (uint64_t)inst << 32 | acct;
  size_t h = (size_t)(key * 0x9e3779b97f4a7c15ull) & (rp->pos_cap - 1);
  while (rp->pos[h].key != 0) {
    if (rp->pos[h].key == key) return &rp->pos[h];
    h = (h + 1) & (rp->pos_cap - 1);
  }
  return NULL;
}

__int128 hgctl_replay_day_qp(const replay_t *rp, uint32_t inst, hg_account_t acct) {
  const pos_slot_t *p = pos_slot(rp, inst, acct);
  return p ? p->day_qp : 0;
}

static int64_t pos_get(const replay_t *rp, uint32_t inst, hg_account_t acct) {
  const pos_slot_t *p = pos_slot(rp, inst, acct);
  return p ? p->pos : 0;
}

const char *hgctl_replay_symbol(const replay_t *rp, uint32_t id) {
  for (size_t k = 0; k < rp->n_syms; k++)
    if (rp->syms[k].id == id) return rp->syms[k].symbol;
  return NULL;
}

static void sym_note(void *ctx, const hg_exchange_instrument_info_t *info) {
  replay_t *rp = ctx;
  if (hgctl_replay_symbol(rp, info->id) != NULL) return;
  sym_slot_t *n = hg_grow(rp->syms, &rp->cap_syms, sizeof *n, rp->n_syms + 1, 16);
  if (n == NULL) {
    rp->pos_err = -ENOMEM;
    return;
  }
  rp->syms = n;
  rp->syms[rp->n_syms].id = info->id;
  snprintf(rp->syms[rp->n_syms].symbol, sizeof rp->syms[rp->n_syms].symbol, "%s", info->symbol);
  rp->n_syms++;
}

/* The fills export: one row per fill with its time and the aggressor's
 * (taker's) side, so that the DSP window's VWAP can be recomputed from the
 * file alone; USD per GPU-hour and UTC, or ticks and nanoseconds (--raw). */
static void fill_row(replay_t *rp, const hg_exchange_event_t *ev, hg_account_t buyer,
                     hg_account_t seller) {
  const hg_book_event_t *b = &ev->book;
  char px[HGCTL_FMT_LEN], ts[HGCTL_FMT_LEN];
  if (rp->raw) {
    snprintf(px, sizeof px, "%" PRId64, b->price);
    snprintf(ts, sizeof ts, "%" PRIu64, ev->ts);
  } else {
    hgctl_fmt_price(b->price, px);
    hgctl_fmt_time(ev->ts, ts);
  }
  const char *sym = hgctl_replay_symbol(rp, b->instrument_id);
  /* A liquidation slice is the aggressor: its account is the liquidated one. */
  char liq[16] = "";
  if (ev->kind == HG_XBOOK_LIQUIDATION) snprintf(liq, sizeof liq, "%" PRIu32, b->account);
  fprintf(rp->fills,
          "%" PRIu64 ",%" PRIu64 ".%" PRIu32 ",%s,%" PRIu32 ",%s,%s,%" PRId64 ",%s,%" PRIu32
          ",%" PRIu32 ",%" PRId64 ",%" PRId64 ",%s\n",
          ev->seq, ev->seq, rp->fill_k, ts, b->instrument_id, sym ? sym : "", px, b->qty,
          b->side == HG_SIDE_BUY ? "buy" : "sell", buyer, seller,
          pos_get(rp, b->instrument_id, buyer), pos_get(rp, b->instrument_id, seller), liq);
}

/* ------------------------------------------------- the clearing guarantee */

static const char *standing_str(unsigned s) {
  return s == HG_CLR_CALLED ? "called" : s == HG_CLR_LIQUIDATING ? "liquidating" : "good";
}

/* An HG_XEV_MARGIN_CALL: one line when the account's standing, call or due
 * cycle differs from what was last printed for it. */
static void call_note(replay_t *rp, const hg_exchange_event_t *ev) {
  /* Rounds name accounts in registration order and the table keeps the
   * order it learnt: the slot after the last one found is nearly always it. */
  call_slot_t *c = NULL;
  if (rp->call_hint < rp->n_calls && rp->calls[rp->call_hint].account == ev->account)
    c = &rp->calls[rp->call_hint];
  for (size_t i = 0; c == NULL && i < rp->n_calls; i++)
    if (rp->calls[i].account == ev->account) c = &rp->calls[i];
  if (c == NULL) {
    call_slot_t *n = hg_grow(rp->calls, &rp->cap_calls, sizeof *n, rp->n_calls + 1, 64);
    if (n == NULL) {
      rp->pos_err = -ENOMEM;
      return;
    }
    rp->calls = n;
    c = &rp->calls[rp->n_calls++];
    *c = (call_slot_t){.account = ev->account};
  }
  c->seen = true;
  rp->call_hint = (size_t)(c - rp->calls) + 1;
  if (c->status == ev->status && c->amount == ev->amount && c->due == (uint64_t)ev->qty) return;
  c->status = ev->status;
  c->amount = ev->amount;
  c->due = (uint64_t)ev->qty;
  rp->call_lines++;
  if (!rp->out) return;
  char b1[HGCTL_FMT_LEN], b2[HGCTL_FMT_LEN], b3[HGCTL_FMT_LEN], b4[HGCTL_FMT_LEN];
  fprintf(rp->out,
          "call seq=%" PRIu64 " account=%" PRIu32 " firm=%" PRIu32 " standing=%s%s call=%s"
          " equity=%s initial_margin=%s maintenance_margin=%s due_cycle=%" PRId64 "\n",
          ev->seq, ev->account, ev->firm, standing_str(ev->status),
          ev->kind == HG_CLR_LIQ_MM         ? " (below maintenance)"
          : ev->kind == HG_CLR_LIQ_DEADLINE ? " (call past due)"
                                            : "",
          usd(rp, ev->amount, b1), usd(rp, ev->balance, b2), usd(rp, ev->margin, b3),
          usd(rp, ev->lo, b4), ev->qty);
}

/* After a mark round or a cycle: the accounts it no longer names are in
 * good standing again. */
static void calls_sweep(replay_t *rp, uint64_t seq) {
  size_t k = 0;
  for (size_t i = 0; i < rp->n_calls; i++) {
    if (rp->calls[i].seen) {
      rp->calls[i].seen = false;
      rp->calls[k++] = rp->calls[i];
    } else if (rp->out) {
      fprintf(rp->out, "call seq=%" PRIu64 " account=%" PRIu32 " standing=good (cleared)\n", seq,
              rp->calls[i].account);
    }
  }
  rp->n_calls = k;
  rp->call_hint = 0;
}

/* HG_XEV_CASH: a fee to or a payment from the insurance fund (account 0),
 * or loss sharing. */
static void cash_line(replay_t *rp, const hg_exchange_event_t *ev) {
  if (!rp->out) return;
  char who[24], b1[HGCTL_FMT_LEN], b2[HGCTL_FMT_LEN], day[11] = "";
  if (ev->account == 0) snprintf(who, sizeof who, "fund");
  else snprintf(who, sizeof who, "%" PRIu32, ev->account);
  fprintf(rp->out, "cash seq=%" PRIu64 " kind=%s account=%s", ev->seq,
          hg_clearing_ledger_kind_str(ev->kind), who);
  if (ev->instrument_id != 0) fprintf(rp->out, " instrument=%" PRIu32, ev->instrument_id);
  if (ev->kind == HG_LEDGER_FUND_COVER || ev->kind == HG_LEDGER_SOCIALIZED) {
    hg_index_day_format(ev->day, day);
    fprintf(rp->out, " day=%s", day);
  }
  fprintf(rp->out, " amount=%s balance=%s\n", usd(rp, ev->amount, b1), usd(rp, ev->balance, b2));
}

/* The guarantee's totals at the end of the replay (aggregates of the
 * replayed clearing, hg_clearing_guarantee). */
static void guarantee_summary(const replay_t *rp, FILE *o) {
  hg_clearing_guarantee_t g;
  hg_clearing_guarantee(hg_exchange_clearing(rp->ex), &g);
  char b[6][HGCTL_FMT_LEN];
  fprintf(o,
          "guarantee call_changes=%" PRIu64 " liquidation_fills=%" PRIu64 " called=%" PRIu32
          " liquidating=%" PRIu32 " fund=%s fund_deposits=%s liquidation_fees=%s fund_used=%s"
          " socialized=%s uncovered=%s bankruptcies=%" PRIu64 "\n",
          rp->call_lines, rp->liq_fills, g.called, g.liquidating, usd(rp, g.fund, b[0]),
          usd(rp, g.fund_deposits, b[1]), usd(rp, g.liq_fees, b[2]), usd(rp, g.fund_used, b[3]),
          usd(rp, g.socialized, b[4]), usd(rp, g.uncovered, b[5]), g.bankruptcies);
}


static void replay_sink(void *ctx, const hg_exchange_event_t *ev) {
  replay_t *rp = ctx;
  if (ev->type == HG_XEV_BOOK && ev->book.type == HG_EV_FILL) {
    const hg_book_event_t *b = &ev->book;
    rp->fills_n++;
    /* the taker's side is b->side; the maker is on the other side */
    int64_t q = b->qty;
    hg_account_t buyer = b->side == HG_SIDE_BUY ? b->account : b->maker_account;
    hg_account_t seller = b->side == HG_SIDE_BUY ? b->maker_account : b->account;
    int rc = pos_add(rp, b->instrument_id, buyer, q, b->price);
    if (rc == 0) rc = pos_add(rp, b->instrument_id, seller, -q, b->price);
    if (rc != 0) rp->pos_err = rc;
    rp->fill_k++;
    if (rp->fills != NULL && rp->show) fill_row(rp, ev, buyer, seller);
    if (ev->kind == HG_XBOOK_LIQUIDATION) {
      rp->liq_fills++;
      char b1[HGCTL_FMT_LEN];
      if (rp->out)
        fprintf(rp->out,
                "liquidation seq=%" PRIu64 " trade_id=%" PRIu64 ".%" PRIu32 " account=%" PRIu32
                " instrument=%" PRIu32 " side=%s qty=%" PRId64 " price=%s counterparty=%" PRIu32
                "\n",
                ev->seq, ev->seq, rp->fill_k, b->account, b->instrument_id,
                b->side == HG_SIDE_BUY ? "buy" : "sell", q, px(rp, b->price, b1),
                b->maker_account);
    }
    if (rp->trades_of != 0 && (buyer == rp->trades_of || seller == rp->trades_of)) {
      /* a self-trade is two rows: one per side */
      for (int buy = 1; buy >= 0; buy--) {
        if ((buy ? buyer : seller) != rp->trades_of) continue;
        trade_t *n = hg_grow(rp->trades, &rp->cap_trades, sizeof *n, rp->n_trades + 1, 256);
        if (n == NULL) {
          rp->pos_err = -ENOMEM;
          return;
        }
        rp->trades = n;
        uint8_t side = buy ? HG_SIDE_BUY : HG_SIDE_SELL;
        rp->trades[rp->n_trades++] = (trade_t){
            .seq = ev->seq, .k = rp->fill_k, .ts = ev->ts, .instrument = b->instrument_id,
            .side = side, .aggressor = b->side == side, .price = b->price, .qty = q,
            .pos_after = pos_get(rp, b->instrument_id, rp->trades_of)};
      }
    }
    return;
  }
  char day[11] = "", b1[HGCTL_FMT_LEN], b2[HGCTL_FMT_LEN], b3[HGCTL_FMT_LEN];
  if (ev->type == HG_XEV_DSP || ev->type == HG_XEV_CYCLE || ev->type == HG_XEV_FIXING_MISSING)
    hg_index_day_format(ev->day, day);
  switch (ev->type) {
  case HG_XEV_BOOK:
    if (ev->book.type == HG_EV_REJECTED) rp->rejects++;
    break;
  case HG_XEV_REJECTED:
    rp->rejects++;
    break;
  case HG_XEV_SESSION_END:
    rp->cycle = true;
    snprintf(rp->cycle_desc, sizeof rp->cycle_desc, "SESSION_END expired_day_orders=%" PRId64,
             ev->amount);
    break;
  case HG_XEV_DSP:
    /* Tier 0: no price could be set, the contract is skipped and its fills
     * carry to the next cycle (CONTRACT.md 5.6), so their sums stay. */
    if (ev->tier != 0) pos_cycle(rp, ev->instrument_id);
    if (rp->out && ev->tier == 0)
      fprintf(rp->out, "dsp seq=%" PRIu64 " day=%s instrument=%" PRIu32 " %s\n", ev->seq, day,
              ev->instrument_id, HGCTL_DSP_SKIPPED);
    else if (rp->out)
      fprintf(rp->out, "dsp seq=%" PRIu64 " day=%s instrument=%" PRIu32 " price=%s tier=%u\n",
              ev->seq, day, ev->instrument_id, px(rp, ev->price, b1), ev->tier);
    break;
  case HG_XEV_CYCLE:
    rp->cycle = true;
    calls_sweep(rp, ev->seq);
    if (ev->margin > 0) {
      rp->bankrupt_cycles++;
      if (rp->out)
        fprintf(rp->out, "bankruptcy seq=%" PRIu64 " day=%s accounts=%" PRId64 " fund_used=%s\n",
                ev->seq, day, ev->margin, usd(rp, ev->price, b2));
    }
    snprintf(rp->cycle_desc, sizeof rp->cycle_desc,
             "DAILY_SETTLEMENT day=%s vm_sum=%s vm_paid=%s vm_received=%s vm_entries=%" PRId64
             " orders_expired=%" PRId64,
             day, usd(rp, ev->amount, b1), usd(rp, ev->lo, b2), usd(rp, ev->hi, b3), ev->balance,
             ev->qty);
    break;
  case HG_XEV_MARGIN_CALL:
    call_note(rp, ev);
    break;
  case HG_XEV_MARK_ROUND:
    calls_sweep(rp, ev->seq);
    if (rp->out && ev->qty > 0)
      fprintf(rp->out,
              "mark seq=%" PRIu64 " evaluated=%" PRId64 " called=%" PRId64 " liquidating=%" PRId64
              " liquidation_orders=%" PRId64 " liquidation_fills=%" PRId64 " fund=%s\n",
              ev->seq, ev->amount, ev->lo, ev->hi, ev->qty, ev->margin, usd(rp, ev->balance, b1));
    break;
  case HG_XEV_CASH:
    cash_line(rp, ev);
    break;
  case HG_XEV_FIXING_MISSING:
    if (rp->out)
      fprintf(rp->out, "expiry waits seq=%" PRIu64 " instrument=%" PRIu32 " day=%s status=%s\n",
              ev->seq, ev->instrument_id, day,
              ev->status == HG_CLR_FIX_PROVISIONAL ? "PROVISIONAL"
              : ev->status == HG_CLR_FIX_NO_FIX    ? "NO_FIX"
                                                   : "MISSING");
    break;
  case HG_XEV_EXPIRED: {
    rp->cycle = true;
    /* A --fsp what-if changes the statements only: say which FSP the line
     * and its hash are. */
    char wf[128] = "";
    for (size_t k = 0; k < rp->n_fsp; k++)
      if (rp->fsp[k].instrument == ev->instrument_id)
        snprintf(wf, sizeof wf, " (journal's; what-if fsp=%s in the statements)",
                 px(rp, rp->fsp[k].fsp, b2));
    snprintf(rp->cycle_desc, sizeof rp->cycle_desc,
             "EXPIRE instrument=%" PRIu32 " fsp=%s%s positions_closed=%" PRId64
             " orders_cancelled=%" PRId64,
             ev->instrument_id, px(rp, ev->price, b1), wf, ev->amount, ev->qty);
    break;
  }
  default:
    break;
  }
}

/* Copies the LMDB data file of the state store into a fresh temporary
 * directory and reads the newest snapshot's seq and hash from the copy. */
typedef struct snap_cb {
  uint64_t seq;
  uint8_t hash[HG_SHA256_LEN];
} snap_cb_t;

/* The snapshot passed the store's checks (header, seq, CRC32C over header
 * and blob, the ones recovery makes before restoring); its header's state
 * hash is what the replay must reach at its seq. */
static int snap_hash_cb(void *ctx, const hg_store_snapshot_t *snap) {
  snap_cb_t *s = ctx;
  s->seq = snap->seq;
  memcpy(s->hash, snap->hash, sizeof s->hash);
  return 0;
}

/* A newest snapshot that fails the checks: reported as BAD, the replay goes
 * on (recovery would fall back to an older snapshot or the journal). */
static void report_bad_snapshot(replay_t *rp, hg_store_t *s) {
  uint64_t seqs[1] = {0};
  size_t n = 0;
  const char *msg = hg_store_errmsg(s), *why = strstr(msg, " is bad: ");
  why = why != NULL ? why + strlen(" is bad: ") : msg;
  /* The newest key, read before the one-element list gets the oldest. */
  if (hg_store_list_snapshots(s, NULL, 0, &n) == 0 && n > 0) {
    uint64_t *all = malloc(n * sizeof *all);
    if (all != NULL && hg_store_list_snapshots(s, all, n, &n) == 0) seqs[0] = all[n - 1];
    free(all);
  }
  fprintf(stderr, "hgctl: the newest snapshot (seq %" PRIu64 ") in %s/state is bad: %s\n",
          seqs[0], rp->data_dir, why);
  if (rp->out) fprintf(rp->out, "snapshot seq=%" PRIu64 " BAD (%s)\n", seqs[0], why);
  rp->snap = 3;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

static int copy_file(const char *from, const char *to) {
  int in = open(from, O_RDONLY | O_CLOEXEC);
  if (in < 0) return -errno;
  int outfd = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (outfd < 0) {
    int e = errno;
    close(in);
    return -e;
  }
  char buf[1 << 16];
  int rc = 0;
  for (;;) {
    ssize_t r = read(in, buf, sizeof buf);
    if (r < 0) {
      if (errno == EINTR) continue;
      rc = -errno;
      break;
    }
    if (r == 0) break;
    for (ssize_t off = 0; off < r;) {
      ssize_t w = write(outfd, buf + off, (size_t)(r - off));
      if (w < 0) {
        if (errno == EINTR) continue;
        rc = -errno;
        break;
      }
      off += w;
    }
    if (rc) break;
  }
  close(in);
  if (close(outfd) != 0 && rc == 0) rc = -errno;
  return rc;
}

static int load_snapshot_hash(replay_t *rp) {
  struct stat st;
  if (stat(rp->state_file, &st) != 0) return errno == ENOENT ? HG_ENOTFOUND : -errno;
  char tmp[] = "/tmp/hgreplay-XXXXXX";
  if (mkdtemp(tmp) == NULL) return -errno;
  char copy[PATH_MAX];
  snprintf(copy, sizeof copy, "%s/data.mdb", tmp);
  int rc = copy_file(rp->state_file, copy);
  hg_store_t *s = NULL;
  snap_cb_t cb = {0};
  if (rc == 0) rc = hg_store_create(&s);
  if (rc == 0) {
    size_t map = HG_STORE_DEFAULT_MAP_SIZE;
    if ((size_t)st.st_size > map) map = (size_t)st.st_size + ((size_t)1 << 20);
    rc = hg_store_open(s, tmp, map);
    if (rc != 0)
      fprintf(stderr, "hgctl: state store copy: %s\n", hg_store_errmsg(s));
  }
  if (rc == 0) {
    rc = hg_store_load_snapshot(s, 0, snap_hash_cb, &cb);
    if (rc == HG_ECORRUPT) {
      report_bad_snapshot(rp, s);
      rc = 0;
    } else if (rc == 0) {
      rp->snap = 1;
    }
  }
  hg_store_close(s);
  nftw(tmp, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
  if (rc == 0 && rp->snap == 1) {
    rp->snap_seq = cb.seq;
    memcpy(rp->snap_hash, cb.hash, sizeof cb.hash);
  }
  return rc;
}

static void check_snapshot(replay_t *rp) {
  if (rp->snap != 1 || hg_exchange_last_seq(rp->ex) != rp->snap_seq) return;
  uint8_t h[HG_SHA256_LEN];
  char hx[65];
  hg_exchange_hash(rp->ex, h);
  rp->snap = memcmp(h, rp->snap_hash, sizeof h) == 0 ? 2 : 3;
  hex32(rp->snap_hash, hx);
  if (rp->out)
    fprintf(rp->out, "snapshot seq=%" PRIu64 " hash=%s %s\n", rp->snap_seq, hx,
            rp->snap == 2 ? "matches" : "MISMATCH");
}

static bool index_is(const char *gpu, const char *grade, const replay_t *rp) {
  return strcmp(gpu, rp->wf_gpu) == 0 && strcmp(grade, rp->wf_grade) == 0;
}

/*
 * What-if fixings: the journaled fixing commands (COMPUTE_FIXING,
 * PUBLISH_FIXING, FINALIZE_FIXING) of the chosen index for a day the file
 * gives are rewritten in place, keeping their seq: the first becomes
 * PUBLISH_FIXING of the file's value (source "what-if"), the second
 * FINALIZE_FIXING if the file says FINAL; every other one, and all of them
 * for a NO_FIX row, is dropped. Returns false to drop cmd.
 */
static bool whatif_rewrite(replay_t *rp, hg_command_t *cmd) {
  const hg_cmd_index_day_t *d = NULL;
  if (cmd->type == HG_COMMAND_COMPUTE_FIXING || cmd->type == HG_COMMAND_FINALIZE_FIXING)
    d = &cmd->u.index_day;
  if (d == NULL && cmd->type != HG_COMMAND_PUBLISH_FIXING) return true;
  const char *gpu = d ? d->gpu : cmd->u.fixing.gpu;
  const char *grade = d ? d->grade : cmd->u.fixing.grade;
  int32_t day = d ? d->day : cmd->u.fixing.day;
  if (!index_is(gpu, grade, rp)) return true;
  size_t k = 0;
  while (k < rp->n_wf && rp->wf[k].day != day) k++;
  if (k == rp->n_wf) return true; /* the file says nothing about that day */
  const hg_hedge_obs_t *w = &rp->wf[k];
  uint8_t slot = rp->wf_used[k] < 255 ? rp->wf_used[k]++ : 255;
  if (w->status == HG_HEDGE_NO_FIX || slot >= 2) return false;
  if (slot == 1 && w->status != HG_HEDGE_FINAL) return false;
  uint64_t seq = cmd->seq, ts = cmd->ts;
  memset(&cmd->u, 0, sizeof cmd->u);
  cmd->seq = seq;
  cmd->ts = ts;
  if (slot == 0) {
    cmd->type = HG_COMMAND_PUBLISH_FIXING;
    snprintf(cmd->u.fixing.gpu, sizeof cmd->u.fixing.gpu, "%s", rp->wf_gpu);
    snprintf(cmd->u.fixing.grade, sizeof cmd->u.fixing.grade, "%s", rp->wf_grade);
    cmd->u.fixing.day = day;
    cmd->u.fixing.value = w->value;
    snprintf(cmd->u.fixing.source, sizeof cmd->u.fixing.source, "what-if");
  } else {
    cmd->type = HG_COMMAND_FINALIZE_FIXING;
    snprintf(cmd->u.index_day.gpu, sizeof cmd->u.index_day.gpu, "%s", rp->wf_gpu);
    snprintf(cmd->u.index_day.grade, sizeof cmd->u.index_day.grade, "%s", rp->wf_grade);
    cmd->u.index_day.day = day;
  }
  return true;
}

/* Reports what-if rows the journal gave no room for. */
static void whatif_report(const replay_t *rp) {
  if (rp->out == NULL) return;
  for (size_t k = 0; k < rp->n_wf; k++) {
    char day[11];
    hg_index_day_format(rp->wf[k].day, day);
    if (rp->wf_used[k] == 0)
      fprintf(rp->out, "what-if fixing %s: the journal has no fixing command of that day to "
                       "replace; not applied\n", day);
    else if (rp->wf[k].status == HG_HEDGE_FINAL && rp->wf_used[k] < 2)
      fprintf(rp->out, "what-if fixing %s: published but the journal never finalized that day; "
                       "it stays PROVISIONAL\n", day);
  }
}

bool hgctl_replay_set_index(replay_t *rp, const char *index) {
  const char *dot = strchr(index, '.');
  size_t gl = dot ? (size_t)(dot - index) : 0;
  if (dot == NULL || !hg_name_ok_n(index, gl, sizeof rp->wf_gpu) ||
      !hg_name_ok(dot + 1, sizeof rp->wf_grade))
    return false;
  memcpy(rp->wf_gpu, index, gl);
  rp->wf_gpu[gl] = '\0';
  snprintf(rp->wf_grade, sizeof rp->wf_grade, "%s", dot + 1);
  return true;
}

void hgctl_replay_init(replay_t *rp) {
  memset(rp, 0, sizeof *rp);
  /* The capacities an exchange has unless configured otherwise. */
  hg_exchange_config_default(&rp->xcfg);
  rp->until_ns = UINT64_MAX;
  rp->show = true;
}

void hgctl_replay_dispose(replay_t *rp) {
  hg_exchange_destroy(rp->ex);
  free(rp->pos);
  free(rp->wf);
  free(rp->wf_used);
  free(rp->syms);
  free(rp->trades);
  free(rp->calls);
  rp->calls = NULL;
  rp->syms = NULL;
  rp->trades = NULL;
  rp->ex = NULL;
  rp->pos = NULL;
  rp->wf = NULL;
  rp->wf_used = NULL;
}

/* Runs the whole replay. Returns 0 or an error (printed). */
int hgctl_replay_run(replay_t *rp, bool check_snap) {
  struct stat st;
  rp->out_all = rp->out;
  if (stat(rp->data_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    fprintf(stderr, "hgctl: data directory '%s' does not exist or is not a directory\n",
            rp->data_dir);
    return -ENOENT;
  }
  if ((size_t)snprintf(rp->journal_dir, sizeof rp->journal_dir, "%s/journal", rp->data_dir) >=
          sizeof rp->journal_dir ||
      (size_t)snprintf(rp->state_file, sizeof rp->state_file, "%s/state/data.mdb", rp->data_dir) >=
          sizeof rp->state_file) {
    fprintf(stderr, "hgctl: data directory path too long\n");
    return HG_EINVAL;
  }
  int rc = hg_exchange_create(&rp->xcfg, replay_sink, rp, &rp->ex);
  if (rc != 0) {
    fprintf(stderr, "hgctl: exchange capacities rejected: %s\n", hg_strerror(rc));
    return rc;
  }
  if (check_snap) {
    rc = load_snapshot_hash(rp);
    if (rc != 0 && rc != HG_ENOTFOUND) {
      fprintf(stderr, "hgctl: cannot read the snapshot of '%s': %s\n", rp->data_dir,
              hg_strerror(rc));
      return rc;
    }
  }

  hg_journal_reader_t *rd = NULL;
  rc = hg_journal_reader_open(rp->journal_dir, 1, &rd);
  if (rc == HG_ENOTFOUND) {
    fprintf(stderr,
            "hgctl: journal %s does not start at seq 1 (or is missing): a replay from an empty "
            "exchange needs the whole journal\n",
            rp->journal_dir);
    /* A cluster node that started from the group's snapshot says which
     * records it lacks and where they are (daemon/history.c). */
    char note[sizeof rp->journal_dir + 32];
    snprintf(note, sizeof note, "%s/history.missing", rp->data_dir);
    FILE *nf = fopen(note, "r");
    if (nf != NULL) {
      char line[512];
      while (fgets(line, sizeof line, nf) != NULL) fprintf(stderr, "hgctl: %s", line);
      fclose(nf);
    }
    return rc;
  }
  if (rc != 0) {
    fprintf(stderr, "hgctl: cannot open journal %s: %s\n", rp->journal_dir, hg_strerror(rc));
    return rc;
  }
  hg_journal_record_t rec;
  char hx[65];
  uint8_t h[HG_SHA256_LEN];
  for (;;) {
    rc = hg_journal_reader_next(rd, UINT64_MAX, &rec);
    if (rc == HG_ENOTFOUND) {
      rc = 0;
      break;
    }
    if (rc != 0) {
      fprintf(stderr, "hgctl: journal unreadable after seq %" PRIu64 ": %s\n",
              hg_exchange_last_seq(rp->ex), hg_strerror(rc));
      break;
    }
    hg_command_t cmd;
    rc = hg_command_decode(rec.payload, rec.len, &cmd);
    if (rc != 0 || cmd.seq != rec.seq) {
      rc = rc ? rc : HG_ECORRUPT;
      fprintf(stderr, "hgctl: journal record seq %" PRIu64 " does not decode: %s\n", rec.seq,
              hg_strerror(rc));
      break;
    }
    cmd.ts = rec.ts;
    if (cmd.ts >= rp->until_ns) {
      rp->stopped = true;
      break;
    }
    rp->show = cmd.ts >= rp->from_ns;
    rp->fill_k = 0;
    rp->out = rp->show ? rp->out_all : NULL;
    if (rp->n_wf > 0 && !whatif_rewrite(rp, &cmd)) {
      rp->dropped++;
      continue;
    }
    rp->cycle = false;
    rc = hg_exchange_apply(rp->ex, &cmd);
    if (rc != 0) {
      fprintf(stderr, "hgctl: journal record seq %" PRIu64 " (%s) cannot be applied: %s\n",
              rec.seq, hg_command_type_str(cmd.type), hg_strerror(rc));
      break;
    }
    rp->commands++;
    if (cmd.type == HG_COMMAND_LIST_INSTRUMENT || cmd.type == HG_COMMAND_LIST_CURVE ||
        cmd.type == HG_COMMAND_EXPIRE)
      hg_exchange_foreach_instrument(rp->ex, sym_note, rp);
    if (rp->pos_err != 0) {
      rc = rp->pos_err;
      fprintf(stderr, "hgctl: seq %" PRIu64 ": cannot keep the position tally: %s\n", rec.seq,
              hg_strerror(rc));
      break;
    }
    if (rp->cycle) {
      rp->cycles++;
      if (rp->out) {
        hg_exchange_hash(rp->ex, h);
        hex32(h, hx);
        fprintf(rp->out, "cycle seq=%" PRIu64 " %s hash=%s%s\n", rec.seq, rp->cycle_desc, hx,
                rp->n_wf ? " (what-if)" : "");
      }
    }
    check_snapshot(rp);
  }
  hg_journal_reader_close(rd);
  rp->out = rp->out_all;
  if (rc != 0) return rc;
  if (rp->n_wf > 0) whatif_report(rp);
  /* Every position the fills add up to must be the clearing's (contracts not
   * yet finally settled; settlement closes the others). */
  uint64_t checked = 0, bad = 0;
  for (size_t i = 0; i < rp->pos_cap; i++) {
    if (rp->pos[i].key == 0) continue;
    uint32_t inst = (uint32_t)(rp->pos[i].key >> 32);
    hg_account_t acct = (hg_account_t)rp->pos[i].key;
    hg_clearing_instrument_info_t ii;
    hg_clearing_position_t cp;
    if (hg_clearing_instrument_info(hgctl_replay_ledger(rp), inst, &ii) != 0 || ii.settled) continue;
    checked++;
    if (hg_clearing_position(hgctl_replay_ledger(rp), acct, inst, &cp) != 0 || cp.pos != rp->pos[i].pos) {
      fprintf(stderr, "hgctl: position of account %" PRIu32 " in instrument %" PRIu32
                      ": fills add up to %" PRId64 ", the clearing holds %" PRId64 "\n",
              acct, inst, rp->pos[i].pos, cp.pos);
      bad++;
    }
  }
  if (bad) return HG_ECORRUPT;
  if (rp->out) fprintf(rp->out, "positions checked=%" PRIu64 " (fills agree with clearing)\n", checked);
  if (rp->out) guarantee_summary(rp, rp->out);
  if (rp->snap == 1 && rp->stopped) {
    if (rp->out)
      fprintf(rp->out, "snapshot seq=%" PRIu64 " not compared: the replay stopped before it\n",
              rp->snap_seq);
    rp->snap = 0;
  }
  if (rp->snap == 1) {
    fprintf(stderr, "hgctl: the latest snapshot (seq %" PRIu64 ") is beyond the journal's end (seq %" PRIu64 ")\n",
            rp->snap_seq, hg_exchange_last_seq(rp->ex));
    rp->snap = 3;
  }
  if (rp->out) {
    hg_exchange_hash(rp->ex, h);
    hex32(h, hx);
    fprintf(rp->out,
            "end seq=%" PRIu64 " commands=%" PRIu64 " fills=%" PRIu64 " rejects=%" PRIu64
            " cycles=%" PRIu64 " hash=%s%s\n",
            hg_exchange_last_seq(rp->ex), rp->commands, rp->fills_n, rp->rejects, rp->cycles, hx,
            rp->n_wf ? " (what-if)" : "");
  }
  return 0;
}

/* Capacity options shared by statement and replay. */
int hgctl_parse_caps(const char *cmd, const char *mi, const char *ma, const char *mo,
                      hg_exchange_config_t *x) {
  int64_t v;
  if (mi) {
    if (!hgctl_parse_i64(mi, 1, UINT32_MAX, &v)) goto bad;
    x->max_instruments = (uint32_t)v;
  }
  if (ma) {
    if (!hgctl_parse_i64(ma, 1, UINT32_MAX, &v)) goto bad;
    x->max_accounts = (uint32_t)v;
  }
  if (mo) {
    if (!hgctl_parse_i64(mo, 1, UINT32_MAX, &v)) goto bad;
    x->max_book_orders = (uint32_t)v;
  }
  return 0;
bad:
  fprintf(stderr, "hgctl %s: capacities must be whole numbers >= 1\n", cmd);
  return EXIT_USAGE;
}

/* ------------------------------------------------------------ replay */

static void replay_usage(FILE *o) {
  fputs("usage: hgctl replay --data DIR [--out DIR] [--expect DIR] [--fills FILE.csv]\n"
        "                    [--until YYYY-MM-DD | --day YYYY-MM-DD] [--raw]\n"
        "                    [--fsp INSTRUMENT=USD[,INSTRUMENT=USD...]]\n"
        "                    [--fixings FILE --index GPU.GRADE]\n"
        "                    [--project USD --index GPU.GRADE] [--quiet] [capacities]\n"
        "                    [--format text|json|csv]   (the what-if tables)\n"
        "  Replays DIR's journal from an empty exchange, read-only, and prints (prices\n"
        "  in USD per GPU-hour, money in USD; --raw: ticks and micro-USD, and in the\n"
        "  fills file nanoseconds instead of UTC times):\n"
        "    dsp seq=S day=D instrument=I price=P tier=T   each daily settlement price\n"
        "                                (or \"skipped ...\" when none could be set)\n"
        "    expiry waits seq=S instrument=I day=D status=X   a fixing an expiry lacks\n"
        "    cycle seq=S <what> hash=H   after every settlement cycle (end of session,\n"
        "                                daily settlement, expiry)\n"
        "    call seq=S account=A firm=F standing=called|liquidating call=X equity=E\n"
        "         initial_margin=IM maintenance_margin=MM due_cycle=N   a call opened or\n"
        "                                changed (the guarantee, settlement/CONTRACT.md\n"
        "                                4.6); standing=good (cleared) when it ends\n"
        "    liquidation seq=S trade_id=T account=A instrument=I side qty price\n"
        "                counterparty=C    each liquidation fill\n"
        "    mark seq=S ...              a mark round that sent liquidation orders\n"
        "    cash seq=S kind=K account=A|fund amount=X balance=Y   each fund deposit,\n"
        "                                liquidation fee, fund cover, loss share (4.7)\n"
        "    bankruptcy seq=S day=D accounts=N fund_used=X   a cycle with bankruptcies\n"
        "    positions checked=N         positions from the fills equal the clearing's\n"
        "    guarantee ...               calls, liquidations and the fund at the end\n"
        "    snapshot seq=S hash=H matches|MISMATCH   the newest snapshot in DIR/state\n"
        "    snapshot seq=S BAD (why)    it fails its checksum or header checks (a\n"
        "                                restart skips it and falls back)\n"
        "    end seq=S commands=N fills=F rejects=R cycles=C hash=H\n"
        "    verdict: OK | FAILED (why)  last, also with --quiet\n"
        "  --until DAY    stops after the last command stamped on DAY (UTC); the\n"
        "                 snapshot is compared only if the replay reaches it\n"
        "  --day DAY      the same, and prints the lines and fills of DAY only (the\n"
        "                 days before still replay, silently)\n"
        "  --out DIR      writes every statement: account-<A>.csv/.json (all entries)\n"
        "                 and account-<A>-instrument-<I>.csv/.json (per contract);\n"
        "                 DIR must not be inside the data directory\n"
        "  --expect DIR   compares them with recorded statement files of those names,\n"
        "                 or of the month scenario's <A>-<SYMBOL>.csv/.json (then only\n"
        "                 per-contract statements are compared): prints\n"
        "                 DIFF/MISSING/EXTRA lines, exit 1 if any\n"
        "  --fills FILE   writes every fill: seq,trade_id (seq.k: the command's k-th\n"
        "                 fill),time_utc,instrument,symbol,price_usd,qty,aggressor (the\n"
        "                 taker's side, buy or sell),buyer,seller,\n"
        "                 buyer_position,seller_position (positions after the fill),\n"
        "                 liquidated (the liquidated account of a liquidation fill);\n"
        "                 with --raw ts_ns and price_ticks instead\n"
        "  --fsp I=P      what-if: instrument I's final settlement paid at P USD per\n"
        "                 GPU-hour (ticks with --raw) instead, in the statements; the\n"
        "                 expiry line and the hashes stay the journal's and say so\n"
        "                 (later commands replay as journaled); prints each account's\n"
        "                 change as a table (USD; --raw: micro-USD, ticks)\n"
        "  --project USD --index GPU.GRADE   what-if before expiry: at the end of the\n"
        "                 replay (or of --until DAY), every day of each open contract's\n"
        "                 delivery month without a FINAL fixing fixes at USD; prints\n"
        "                 per contract the projected FSP, one line for the days filled\n"
        "                 and a row per account of its P&L to final settlement,\n"
        "                 positions held; then the P&L per firm over all contracts,\n"
        "                 and the accounts it would leave below zero with the\n"
        "                 insurance fund's use and the share of the winners;\n"
        "                 then the clearing's mark round at the projected FSPs\n"
        "                 (on a copy): each account's standing (good, called\n"
        "                 with the call, liquidating) and the fund's use\n"
        "                 (USD; --raw: micro-USD, ticks).\n"
        "                 Nothing is applied: state, hashes and statements stay\n"
        "                 the journal's\n"
        "  --fixings FILE --index GPU.GRADE   what-if: the index's fixings of the days\n"
        "                 in FILE (header day,value,status; value in USD per GPU-hour,\n"
        "                 status FINAL, PROVISIONAL or NO_FIX with an empty value)\n"
        "                 replace the journaled ones: a day's first journaled fixing\n"
        "                 command becomes PUBLISH_FIXING of the file's value, its second\n"
        "                 FINALIZE_FIXING if the file says FINAL, others are dropped\n"
        "                 (all of them for NO_FIX); same seqs. Cycle lines and the end\n"
        "                 line end with (what-if): another state. The snapshot is not\n"
        "                 compared. Nothing is written unless --out is given. Prints\n"
        "                 each account's cash against the journal's as a table.\n"
        "  --format json|csv   the --project and --fixings tables for scripts, alone\n"
        "                 on stdout (stable columns; `row` says what a row is:\n"
        "                 account, firm, total, mark, standing or guarantee);\n"
        "                 every other line, the verdict\n"
        "                 included, goes to stderr\n"
        "  Exit: 0 replay matched (snapshot and --expect), 1 differences or errors.\n"
        "  Nothing under DIR is written. Meant for a stopped exchange's directory (or a\n"
        "  copy): on a running one the journal's in-flight tail may read as corrupt and\n"
        "  the state store is copied with a plain file copy, which LMDB does not\n"
        "  guarantee consistent while a writer commits.\n" CAPS_HELP,
        o);
}

static int parse_fsp_list(const char *s, replay_t *rp) {
  size_t n = hgctl_list_count(s);
  rp->fsp = calloc(n, sizeof *rp->fsp);
  if (rp->fsp == NULL) return -ENOMEM;
  const char *next = s;
  for (size_t k = 0; k < n; k++) {
    char item[64];
    size_t len;
    const char *p = hgctl_list_next(&next, &len);
    if (len == 0 || len >= sizeof item) return HG_EPARSE;
    memcpy(item, p, len);
    item[len] = '\0';
    char *eq = strchr(item, '=');
    if (eq == NULL) return HG_EPARSE;
    *eq = '\0';
    int64_t id, px;
    if (!hgctl_parse_i64(item, 1, UINT32_MAX - 1, &id)) return HG_EPARSE;
    /* USD per GPU-hour, or ticks with --raw; no GPU-hour costs 1,000 USD,
     * so a larger price is ticks typed without --raw. */
    if (rp->raw ? !hgctl_parse_i64(eq + 1, 1, HG_CLR_PRICE_MAX, &px)
                : hgctl_decimal_parse(eq + 1, 3, 0, &px) != 0 || px > HGCTL_USD_PER_GPU_HOUR_MAX * 1000)
      return HG_EPARSE;
    for (size_t j = 0; j < rp->n_fsp; j++)
      if (rp->fsp[j].instrument == (uint32_t)id) return HG_EPARSE;
    rp->fsp[rp->n_fsp].instrument = (uint32_t)id;
    rp->fsp[rp->n_fsp].fsp = px;
    rp->n_fsp++;
  }
  return 0;
}

int hgctl_replay(int argc, char **argv) {
  const char *data = NULL, *out_dir = NULL, *expect = NULL, *fills = NULL, *fsp = NULL,
             *mi = NULL, *ma = NULL, *mo = NULL, *fixings = NULL, *index = NULL, *until = NULL,
             *day = NULL, *project = NULL, *fmt_s = NULL;
  bool quiet = false, raw = false;
  const hgctl_opt_t opts[] = {{"--data", &data, NULL},
                        {"--out", &out_dir, NULL},
                        {"--expect", &expect, NULL},
                        {"--fills", &fills, NULL},
                        {"--fsp", &fsp, NULL},
                        {"--fixings", &fixings, NULL},
                        {"--index", &index, NULL},
                        {"--quiet", NULL, &quiet},
                        {"--raw", NULL, &raw},
                        {"--until", &until, NULL},
                        {"--day", &day, NULL},
                        {"--project", &project, NULL},
                        {"--format", &fmt_s, NULL},
                        {"--max-instruments", &mi, NULL},
                        {"--max-accounts", &ma, NULL},
                        {"--max-book-orders", &mo, NULL}};
  int rc = hgctl_parse_opts("replay", argc, argv, opts, sizeof opts / sizeof opts[0],
                            replay_usage);
  if (rc != 0) return rc < 0 ? 0 : rc;
  if (!data) {
    fprintf(stderr, "hgctl replay: missing --data\n");
    replay_usage(stderr);
    return EXIT_USAGE;
  }
  hgctl_out_t fmt = HGCTL_OUT_TEXT;
  if (hgctl_out_parse(fmt_s, &fmt) != 0 ||
      (fmt != HGCTL_OUT_TEXT && ((!project && !fixings) || expect))) {
    fprintf(stderr, "hgctl replay: --format must be text, json or csv, and json or csv goes "
                    "with --project or --fixings (their tables), without --expect\n");
    return EXIT_USAGE;
  }
  /* A table for scripts has stdout to itself: every other line to stderr. */
  FILE *lines = fmt == HGCTL_OUT_TEXT ? stdout : stderr;
  replay_t rp;
  hgctl_replay_init(&rp);
  rp.data_dir = data;
  rp.out = quiet ? NULL : lines;
  rp.raw = raw;
  if ((rc = hgctl_parse_caps("replay", mi, ma, mo, &rp.xcfg)) != 0) return rc;
  int status = EXIT_INPUT;
  stmt_set_t set = {0};
  const char *why = NULL; /* the verdict's reason when the replay did not match */
  char why_buf[160];
  int64_t project_value = 0;
  if (until && day) {
    fprintf(stderr, "hgctl replay: give --until or --day, not both\n");
    status = EXIT_USAGE;
    goto out;
  }
  if (until || day) {
    const char *d = until ? until : day;
    int32_t dn;
    if (hg_index_day_parse(d, strlen(d), &dn) != 0) {
      fprintf(stderr, "hgctl replay: %s '%s' is not a valid YYYY-MM-DD date\n",
              until ? "--until" : "--day", d);
      status = EXIT_USAGE;
      goto out;
    }
    rp.until_ns = (uint64_t)(dn + 1) * HG_NS_PER_DAY;
    if (day) rp.from_ns = (uint64_t)dn * HG_NS_PER_DAY;
  }
  if (project) {
    if (index == NULL || fixings != NULL || fsp != NULL) {
      fprintf(stderr, "hgctl replay: --project needs --index GPU.GRADE and goes without "
                      "--fixings and --fsp\n");
      status = EXIT_USAGE;
      goto out;
    }
    int e = hgctl_decimal_parse(project, 6, 0, &project_value);
    if (e == 0 && project_value > HG_CLR_FIXING_MAX) e = HGCTL_DEC_RANGE;
    if (e != 0) {
      fprintf(stderr, "hgctl replay: --project '%s' %s\n", project,
              e == HGCTL_DEC_SYNTAX ? "is not an index value in USD per GPU-hour (e.g. 3.400)"
                                    : hgctl_decimal_error(e, 6));
      status = EXIT_USAGE;
      goto out;
    }
  }
  if (fsp && parse_fsp_list(fsp, &rp) != 0) {
    if (raw)
      fprintf(stderr, "hgctl replay: --fsp must be INSTRUMENT=TICKS[,...] with distinct ids >= 1 "
                      "and 1 <= TICKS <= %" PRId64 " (--raw)\n", HG_CLR_PRICE_MAX);
    else
      fprintf(stderr, "hgctl replay: --fsp must be INSTRUMENT=USD[,...] with distinct ids >= 1 "
                      "and a price in USD per GPU-hour above 0 and at most %d with at most 3 "
                      "decimals (e.g. 1=3.100; ticks with --raw)\n", HGCTL_USD_PER_GPU_HOUR_MAX);
    status = EXIT_USAGE;
    goto out;
  }
  if (fixings != NULL && index == NULL) {
    fprintf(stderr, "hgctl replay: --fixings and --index go together\n");
    status = EXIT_USAGE;
    goto out;
  }
  if (index && !fixings && !project) {
    fprintf(stderr, "hgctl replay: --index goes with --fixings or --project\n");
    status = EXIT_USAGE;
    goto out;
  }
  if (index && !hgctl_replay_set_index(&rp, index)) {
    fprintf(stderr, "hgctl replay: --index must be GPU.GRADE, e.g. B200.A\n");
    status = EXIT_USAGE;
    goto out;
  }
  if (fixings) {
    if (hgctl_load_series("fixings", fixings, true, &rp.wf, &rp.n_wf) != 0) goto out;
    rp.wf_used = calloc(rp.n_wf, 1);
    if (rp.wf_used == NULL) goto out;
  }
  /* Refuse an output directory inside the live data before replaying. */
  if (out_dir) {
    struct stat st;
    if (stat(out_dir, &st) == 0 && hgctl_path_inside(out_dir, data)) {
      fprintf(stderr, "hgctl replay: --out %s is inside the data directory %s; refusing to write "
                      "there\n", out_dir, data);
      status = EXIT_USAGE;
      goto out;
    }
  }
  if (fills) {
    rp.fills = fopen(fills, "w");
    if (rp.fills == NULL) {
      fprintf(stderr, "hgctl replay: cannot write %s: %s\n", fills, strerror(errno));
      goto out;
    }
    fprintf(rp.fills, "seq,trade_id,%s,instrument,symbol,%s,qty,aggressor,buyer,seller,"
                      "buyer_position,seller_position,liquidated\n",
            raw ? "ts_ns" : "time_utc", raw ? "price_ticks" : "price_usd");
  }
  /* A what-if state differs from the snapshot's by design: not compared. */
  if (rp.out && rp.n_wf) fprintf(rp.out, "what-if fixings of %s from %s: snapshot not compared\n",
                                 index, fixings);
  if (hgctl_replay_run(&rp, rp.n_wf == 0) != 0) goto out;
  bool ok = rp.snap != 3;
  if (!ok) why = "the snapshot does not match the replay";
  if (rp.stopped && rp.out) {
    char d[11];
    hg_index_day_format(hg_civil_day_of_ns(rp.until_ns) - 1, d);
    fprintf(rp.out, "stopped at the end of %s (later commands not replayed)\n", d);
  }
  if (project && hgctl_whatif_project(&rp, project_value, raw, fmt, stdout) != 0) goto out;
  if (rp.n_wf) {
    /* The journal's own replay, to the same point, for the change table. */
    replay_t base;
    hgctl_replay_init(&base);
    base.data_dir = data;
    base.xcfg = rp.xcfg;
    base.until_ns = rp.until_ns;
    rc = hgctl_replay_run(&base, false);
    if (rc == 0) rc = hgctl_whatif_cash_table(&rp, &base, raw, fmt, stdout);
    hgctl_replay_dispose(&base);
    if (rc != 0) goto out;
  }
  if (out_dir || expect || rp.n_fsp || rp.n_wf) {
    if ((rc = hgctl_stmt_build(&rp, &set)) != 0) {
      if (rc != HG_ENOTFOUND) fprintf(stderr, "hgctl replay: statements: %s\n", hg_strerror(rc));
      goto out;
    }
  }
  if (out_dir) {
    if (mkdir(out_dir, 0755) == 0 || errno == EEXIST) {
      if (hgctl_path_inside(out_dir, data)) {
        fprintf(stderr, "hgctl replay: --out %s is inside the data directory; refusing\n", out_dir);
        goto out;
      }
    }
    if (hgctl_stmt_write(&set, out_dir) != 0) goto out;
    if (rp.out) fprintf(rp.out, "statements %zu files written to %s\n", set.n, out_dir);
  }
  if (expect) {
    long d = hgctl_stmt_compare(&rp, &set, expect);
    if (d < 0) goto out;
    fprintf(lines, "statements compared with %s: %ld difference(s)\n", expect, d);
    if (d > 0) {
      snprintf(why_buf, sizeof why_buf, "%s%s%ld statement difference(s)", why ? why : "",
               why ? "; " : "", d);
      why = why_buf;
      ok = false;
    }
  }
  status = ok ? 0 : EXIT_INPUT;
out:
  /* The verdict, also under --quiet. */
  if (status == 0)
    fprintf(lines, "verdict: OK%s\n", rp.n_wf || rp.n_fsp || project ? " (what-if replay)" : "");
  else if (status == EXIT_INPUT)
    fprintf(lines, "verdict: FAILED (%s)\n", why ? why : "see the error above");
  if (rp.fills && fclose(rp.fills) != 0) status = EXIT_INPUT;
  hgctl_stmt_free(&set);
  free(rp.fsp);
  hgctl_replay_dispose(&rp);
  if (fflush(stdout) != 0) status = EXIT_INPUT;
  return status;
}

