/*
 * hgctl_trade.c - hgctl's trading commands: order new/cancel/replace/mass
 * cancel, instruments, positions, executions, the key's live orders, the
 * depth ladder and mass quotes. One session per command (hgctl_net.c);
 * output is "KEY=value" lines except for the ladder, which redraws the
 * terminal.
 */
#include "hgctl_net.h"
#include "hgctl_net_util.h"
#include "hgctl_fmt.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hourglass/error.h"
#include "hourglass/grow.h"
#include "hourglass/levels.h"

int hgctl_order_new(int argc, char **argv) {
  const char *cmd = "order new";
  const char *instr = NULL, *side = NULL, *qty = NULL, *price = NULL, *type = NULL, *tif = NULL,
             *clordid = NULL, *stp = NULL;
  bool post_only = false;
  const opt_t opts[] = {CONN_OPTS,
                        {"instrument", &instr, NULL},
                        {"side", &side, NULL},
                        {"qty", &qty, NULL},
                        {"price", &price, NULL},
                        {"type", &type, NULL},
                        {"tif", &tif, NULL},
                        {"clordid", &clordid, NULL},
                        {"stp", &stp, NULL},
                        {"post-only", NULL, &post_only}};
  const char *usage = "order new --instrument ID|SYMBOL --side buy|sell --qty N [--price USD]\n"
                      "  [--type limit|market] [--tif gtc|day|ioc|fok] [--post-only]\n"
                      "  [--stp cancel_resting|cancel_incoming|cancel_both|none] [--clordid N]\n";
  int rc = net_parse(cmd, argc, argv, opts, sizeof opts / sizeof opts[0], NULL, 0, usage);
  if (rc) return rc;
  hg_client_order_t o = {0};
  int64_t v;
  if (side == NULL || (strcmp(side, "buy") != 0 && strcmp(side, "sell") != 0)) {
    fprintf(stderr, "hgctl %s: --side must be buy or sell\n", cmd);
    return EXIT_USAGE;
  }
  o.side = strcmp(side, "sell") == 0 ? HOURGLASS__V1__SIDE__SIDE_SELL : HOURGLASS__V1__SIDE__SIDE_BUY;
  if ((rc = net_need_num(cmd, "qty", qty, 1, INT64_MAX, &v))) return rc;
  o.qty = v;
  o.type = HOURGLASS__V1__ORD_TYPE__ORD_TYPE_LIMIT;
  if (type && strcmp(type, "market") == 0) o.type = HOURGLASS__V1__ORD_TYPE__ORD_TYPE_MARKET;
  else if (type && strcmp(type, "limit") != 0) {
    fprintf(stderr, "hgctl %s: --type must be limit or market\n", cmd);
    return EXIT_USAGE;
  }
  if (o.type == HOURGLASS__V1__ORD_TYPE__ORD_TYPE_LIMIT) {
    if ((rc = net_need_price(cmd, "price", price, INT64_MIN, &v))) return rc;
    o.has_price = true;
    o.price = v;
  } else if (price) {
    fprintf(stderr, "hgctl %s: a market order takes no --price\n", cmd);
    return EXIT_USAGE;
  }
  static const char *const tifs[] = {"gtc", "day", "ioc", "fok"};
  o.tif = o.type == HOURGLASS__V1__ORD_TYPE__ORD_TYPE_MARKET ? 2u : 0u;
  if (tif) {
    size_t k = 0;
    while (k < 4 && strcmp(tif, tifs[k]) != 0) k++;
    if (k == 4) {
      fprintf(stderr, "hgctl %s: --tif must be gtc, day, ioc or fok\n", cmd);
      return EXIT_USAGE;
    }
    o.tif = (uint32_t)k;
  }
  if (stp) {
    static const char *const stps[] = {"default", "cancel_resting", "cancel_incoming",
                                       "cancel_both", "none"};
    size_t k = 0;
    while (k < 5 && strcmp(stp, stps[k]) != 0) k++;
    if (k == 5) {
      fprintf(stderr, "hgctl %s: --stp must be cancel_resting, cancel_incoming, cancel_both or "
                      "none\n", cmd);
      return EXIT_USAGE;
    }
    o.stp = (uint32_t)k;
  }
  o.post_only = post_only;
  if (clordid) {
    uint64_t u;
    if (!net_unum(clordid, INT64_MAX, &u)) {
      fprintf(stderr, "hgctl %s: --clordid must be below 2^63\n", cmd);
      return EXIT_USAGE;
    }
    o.client_order_id = u;
  } else {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    o.client_order_id = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) >> 1;
  }
  if (instr == NULL) {
    fprintf(stderr, "hgctl %s: --instrument is required\n", cmd);
    return EXIT_USAGE;
  }
  hg_client_t *c = NULL;
  if ((rc = net_open_session(cmd, &c))) return rc;
  if ((rc = net_resolve_instrument(cmd, c, instr, &o.instrument_id))) {
    net_close_session(c);
    return rc;
  }
  uint64_t seq = 0;
  const env_t *e = NULL;
  rc = hg_client_new_order(c, &o, &seq);
  if (rc != 0) {
    fprintf(stderr, "hgctl %s: send failed: %s\n", cmd, hg_strerror(rc));
    net_close_session(c);
    return EXIT_FAIL;
  }
  if ((rc = net_await_reply(cmd, c, seq, &e)) != 0) {
    net_close_session(c);
    return rc;
  }
  int status = net_response_status(cmd, e);
  if (e->body_case == BODY(EXECUTION_REPORT)) {
    net_print_exec(e);
    uint64_t oid = e->execution_report->order_id;
    status = e->execution_report->exec_type == HOURGLASS__V1__EXEC_TYPE__EXEC_REJECTED ? EXIT_FAIL : 0;
    net_print_followers(c, seq, oid, 200);
  }
  net_close_session(c);
  return status;
}

/* Sends one order-id request, prints the reply, returns the status. */
static int order_request(const char *cmd, hg_client_t *c, int kind, uint32_t instrument,
                         uint64_t oid, int64_t px, int64_t qty) {
  uint64_t seq = 0;
  int rc = kind == 0 ? hg_client_cancel(c, instrument, oid, &seq)
                     : hg_client_replace(c, instrument, oid, px, qty, &seq);
  if (rc != 0) {
    fprintf(stderr, "hgctl %s: send failed: %s\n", cmd, hg_strerror(rc));
    return EXIT_FAIL;
  }
  const env_t *e = NULL;
  if ((rc = net_await_reply(cmd, c, seq, &e)) != 0) return rc;
  int status = net_response_status(cmd, e);
  if (e->body_case == BODY(EXECUTION_REPORT)) {
    net_print_exec(e);
    status = e->execution_report->exec_type == HOURGLASS__V1__EXEC_TYPE__EXEC_REJECTED ? EXIT_FAIL : 0;
    net_print_followers(c, seq, e->execution_report->order_id, 100);
  }
  return status;
}

/* The instrument of the account's live order oid, found by asking each
 * listed instrument for the order's status (an order of another account
 * answers like none). 0, or EXIT_FAIL after saying why. */
static int order_instrument(const char *cmd, hg_client_t *c, uint64_t oid, uint32_t *iid) {
  static syms_t syms;
  int rc = net_fetch_symbols(cmd, c, &syms);
  for (uint32_t i = 0; rc == 0 && i < syms.n; i++) {
    uint64_t seq = 0;
    const env_t *e = NULL;
    if (hg_client_order_status(c, syms.id[i], oid, &seq) != 0) {
      fprintf(stderr, "hgctl %s: send failed\n", cmd);
      return EXIT_FAIL;
    }
    if ((rc = net_await_reply(cmd, c, seq, &e)) != 0) return rc;
    if ((rc = net_response_status(cmd, e)) != 0) return rc;
    if (e->body_case == BODY(ORDER_STATUS) && e->order_status->live) {
      *iid = syms.id[i];
      return 0;
    }
  }
  if (rc == 0) {
    fprintf(stderr, "hgctl %s: no live order %" PRIu64 " of this account (hgctl orders lists "
                    "them)\n", cmd, oid);
    rc = EXIT_FAIL;
  }
  return rc;
}

static int cancel_or_replace(int argc, char **argv, int kind) {
  const char *cmd = kind == 0 ? "order cancel" : "order replace";
  const char *instr = NULL, *oid = NULL, *price = NULL, *qty = NULL;
  const opt_t opts[] = {CONN_OPTS,
                        {"instrument", &instr, NULL},
                        {"order-id", &oid, NULL},
                        {"price", &price, NULL},
                        {"qty", &qty, NULL}};
  const char *usage = kind == 0 ? "order cancel --order-id N [--instrument ID|SYMBOL]\n"
                                  "  (without --instrument, the order's is looked up)\n"
                                : "order replace --order-id N --price USD --qty N "
                                  "[--instrument ID|SYMBOL]\n"
                                  "  (without --instrument, the order's is looked up)\n";
  int rc = net_parse(cmd, argc, argv, opts, kind == 0 ? CONN_NOPTS + 2 : CONN_NOPTS + 4, NULL, 0,
                     usage);
  if (rc) return rc;
  int64_t id, price_ticks = 0, q = 0;
  if ((rc = net_need_num(cmd, "order-id", oid, 1, INT64_MAX, &id))) return rc;
  if (kind == 1) {
    if ((rc = net_need_price(cmd, "price", price, INT64_MIN, &price_ticks))) return rc;
    if ((rc = net_need_num(cmd, "qty", qty, 1, INT64_MAX, &q))) return rc;
  }
  hg_client_t *c = NULL;
  if ((rc = net_open_session(cmd, &c))) return rc;
  uint32_t iid = 0;
  rc = instr != NULL ? net_resolve_instrument(cmd, c, instr, &iid)
                     : order_instrument(cmd, c, (uint64_t)id, &iid);
  if (rc == 0) rc = order_request(cmd, c, kind, iid, (uint64_t)id, price_ticks, q);
  net_close_session(c);
  return rc;
}

int hgctl_order_cancel(int argc, char **argv) { return cancel_or_replace(argc, argv, 0); }
int hgctl_order_replace(int argc, char **argv) { return cancel_or_replace(argc, argv, 1); }

int hgctl_order_mass_cancel(int argc, char **argv) {
  const char *cmd = "order mass-cancel";
  const char *instr = NULL, *side = NULL;
  const opt_t opts[] = {CONN_OPTS, {"instrument", &instr, NULL}, {"side", &side, NULL}};
  const char *usage = "order mass-cancel [--instrument ID|SYMBOL] [--side buy|sell|both]\n";
  int rc = net_parse(cmd, argc, argv, opts, sizeof opts / sizeof opts[0], NULL, 0, usage);
  if (rc) return rc;
  uint32_t sides = HOURGLASS__V1__SIDE_FILTER__SIDES_BOTH;
  if (side && strcmp(side, "buy") == 0) sides = HOURGLASS__V1__SIDE_FILTER__SIDES_BUY;
  else if (side && strcmp(side, "sell") == 0) sides = HOURGLASS__V1__SIDE_FILTER__SIDES_SELL;
  else if (side && strcmp(side, "both") != 0) {
    fprintf(stderr, "hgctl %s: --side must be buy, sell or both\n", cmd);
    return EXIT_USAGE;
  }
  hg_client_t *c = NULL;
  if ((rc = net_open_session(cmd, &c))) return rc;
  uint32_t iid = 0;
  if (instr && (rc = net_resolve_instrument(cmd, c, instr, &iid))) {
    net_close_session(c);
    return rc;
  }
  uint64_t seq = 0;
  rc = hg_client_mass_cancel(c, iid, sides, &seq);
  if (rc != 0) {
    fprintf(stderr, "hgctl %s: send failed: %s\n", cmd, hg_strerror(rc));
    net_close_session(c);
    return EXIT_FAIL;
  }
  /* The gateway answers with a Response after the cancels (which carry
   * reason mass_cancel but may have no ref_seq); stop at that Response, or
   * after a quiet spell if none comes. */
  int status = 0, cancelled = 0;
  for (;;) {
    const env_t *e = NULL;
    int r = hg_client_recv(c, cancelled ? 300 : net_timeout_ms, &e);
    if (r != 1) {
      if (r < 0 || !cancelled) {
        fprintf(stderr, "hgctl %s: no reply: %s\n", cmd, r < 0 ? hg_strerror(r) : "timeout");
        status = EXIT_FAIL;
      }
      break;
    }
    if (e->body_case == BODY(TERMINATE)) {
      fprintf(stderr, "hgctl %s: the gateway ended the session (code %u)\n", cmd,
              e->terminate->code);
      status = EXIT_FAIL;
      break;
    }
    if (e->body_case == BODY(RESPONSE) && e->response->ref_seq == seq) {
      status = net_response_status(cmd, e);
      break;
    }
    if (e->body_case != BODY(EXECUTION_REPORT)) continue;
    const Hourglass__V1__ExecutionReport *x = e->execution_report;
    bool mine = x->ref_seq == seq ||
                (x->ref_seq == 0 && x->exec_type == HOURGLASS__V1__EXEC_TYPE__EXEC_CANCELLED &&
                 x->reason == HOURGLASS__V1__CANCEL_REASON__CXL_MASS_CANCEL);
    if (!mine) continue;
    net_print_exec(e);
    if (x->exec_type == HOURGLASS__V1__EXEC_TYPE__EXEC_REJECTED) {
      status = EXIT_FAIL;
      break;
    }
    cancelled++;
  }
  printf("cancelled %d order%s\n", cancelled, cancelled == 1 ? "" : "s");
  net_close_session(c);
  return status;
}
int hgctl_instruments(int argc, char **argv) { return net_list_instruments("instruments", argc, argv); }

/* Asks for account's positions (0: the own account; for a risk viewer,
 * the firm's account list) and returns the reply in *p (valid until the
 * next receive on c). 0 or EXIT_FAIL after printing why. */
static int fetch_positions(const char *cmd, hg_client_t *c, uint32_t account,
                           const Hourglass__V1__Positions **p) {
  uint64_t seq = 0;
  const env_t *e = NULL;
  int rc = hg_client_positions(c, account, &seq);
  if (rc != 0) {
    fprintf(stderr, "hgctl %s: send failed: %s\n", cmd, hg_strerror(rc));
    return EXIT_FAIL;
  }
  if ((rc = net_await_reply(cmd, c, seq, &e)) != 0) return rc;
  if ((rc = net_response_status(cmd, e)) != 0) return rc;
  if (e->body_case != BODY(POSITIONS)) {
    fprintf(stderr, "hgctl %s: unexpected reply to the positions request\n", cmd);
    return EXIT_FAIL;
  }
  if (e->positions->reason != 0) {
    fprintf(stderr, "hgctl %s: refused: %s (%u)\n", cmd, net_reject_name(e->positions->reason),
            e->positions->reason);
    return EXIT_FAIL;
  }
  *p = e->positions;
  return 0;
}

/* The open position's average price (USD per GPU-hour: three decimals on
 * the tick, else six, truncated), or with --raw its entry value (ticks x
 * contracts); "-" when unknown or flat. */
static const char *avg_price(const Hourglass__V1__Position *x, char *buf) {
  if (!x->has_open_value || (x->net_qty == 0 && !net_raw)) return "-";
  if (net_raw) {
    snprintf(buf, HGCTL_FMT_LEN, "%" PRId64, x->open_value);
    return buf;
  }
  if (x->open_value % x->net_qty == 0) return hgctl_fmt_price(x->open_value / x->net_qty, buf);
  /* one tick is 1000 micro-USD per GPU-hour */
  __int128 micro = (__int128)x->open_value * HG_INDEX_TICK_MICRO_USD / x->net_qty;
  return hgctl_fmt_decimal((int64_t)micro, 6, buf);
}

/* The positions table for scripts: one row per account and contract (an
 * account without positions: one row with the contract columns missing),
 * each with the account's cash and margin. */
static const hgctl_col_t *position_cols(size_t *n) {
  static const hgctl_col_t usd[] = {
      {"account", 0}, {"instrument", 0}, {"symbol", 1}, {"net", 0}, {"bought", 0}, {"sold", 0},
      {"avg_price", 0}, {"settle_usd", 0}, {"pnl_usd", 0}, {"cash_usd", 0},
      {"initial_margin_usd", 0}, {"excess_equity_usd", 0}, {"standing", 1},
      {"mark_equity_usd", 0}, {"maintenance_margin_usd", 0}, {"call_usd", 0},
      {"call_due_cycle", 0}};
  static const hgctl_col_t raw[] = {
      {"account", 0}, {"instrument", 0}, {"symbol", 1}, {"net", 0}, {"bought", 0}, {"sold", 0},
      {"open_value", 0}, {"settle", 0}, {"pnl", 0}, {"cash", 0},
      {"initial_margin", 0}, {"excess_equity", 0}, {"standing", 1},
      {"mark_equity", 0}, {"maintenance_margin", 0}, {"call", 0}, {"call_due_cycle", 0}};
  *n = sizeof usd / sizeof usd[0];
  return net_raw ? raw : usd;
}

/* The account's standing under the clearing guarantee (settlement/
 * CONTRACT.md 4.6): good, called (reduce only until the call is met) or
 * liquidating; NULL when the reply does not carry it (threads mode). */
static const char *standing_name(const Hourglass__V1__Positions *p) {
  if (!p->has_standing) return NULL;
  switch (p->standing) {
  case HOURGLASS__V1__STANDING__STANDING_GOOD: return "good";
  case HOURGLASS__V1__STANDING__STANDING_CALLED: return "called";
  case HOURGLASS__V1__STANDING__STANDING_LIQUIDATING: return "liquidating";
  default: return "other";
  }
}

static void table_positions(hgctl_table_t *t, const Hourglass__V1__Positions *p,
                            const syms_t *syms) {
  char acct[16], inst[16], net[24], bought[24], sold[24], avg[HGCTL_FMT_LEN], due[24];
  snprintf(acct, sizeof acct, "%u", p->account);
  /* The account's figures, copied: the printed forms rotate through eight
   * buffers and each row takes two more. */
  char acc_s[6][HGCTL_FMT_LEN];
  const int64_t acc_v[6] = {p->cash, p->initial_margin, p->excess_equity, p->mark_equity,
                            p->maintenance_margin, p->call_amount};
  for (int k = 0; k < 6; k++) snprintf(acc_s[k], sizeof acc_s[k], "%s", net_usd(acc_v[k]));
  const char *cash = acc_s[0];
  const char *im = p->has_initial_margin ? acc_s[1] : NULL;
  const char *ee = p->has_excess_equity ? acc_s[2] : NULL;
  const char *me = p->has_mark_equity ? acc_s[3] : NULL;
  const char *mm = p->has_maintenance_margin ? acc_s[4] : NULL;
  const char *call = p->has_call_amount ? acc_s[5] : NULL;
  snprintf(due, sizeof due, "%" PRIu64, p->call_due_cycle);
  for (size_t i = 0; i < p->n_positions || (i == 0 && p->n_positions == 0); i++) {
    const Hourglass__V1__Position *x = p->n_positions ? p->positions[i] : NULL;
    if (x != NULL) {
      snprintf(inst, sizeof inst, "%u", x->instrument_id);
      snprintf(net, sizeof net, "%" PRId64, x->net_qty);
      snprintf(bought, sizeof bought, "%" PRId64, x->bought_qty);
      snprintf(sold, sizeof sold, "%" PRId64, x->sold_qty);
    }
    const char *v[] = {acct,
                       x ? inst : NULL,
                       x ? net_symbol_of(syms, x->instrument_id) : NULL,
                       x ? net : NULL,
                       x ? bought : NULL,
                       x ? sold : NULL,
                       x ? avg_price(x, avg) : NULL,
                       x && x->has_settle_price ? net_px(x->settle_price) : NULL,
                       x && x->has_pnl ? net_usd(x->pnl) : NULL,
                       cash,
                       im,
                       ee,
                       standing_name(p),
                       me,
                       mm,
                       call,
                       p->has_call_due_cycle ? due : NULL};
    hgctl_table_row(t, v);
  }
}

static void print_positions(const Hourglass__V1__Positions *p, const syms_t *syms) {
  printf("account %u cash %s %s\n", p->account, net_usd(p->cash), net_raw ? "micro-USD" : "USD");
  printf("%-10s %-20s %8s %8s %8s %12s %10s %14s\n", "instrument", "symbol", "net", "bought",
         "sold", net_raw ? "open_value" : "avg_price", net_raw ? "settle" : "settle_usd",
         net_raw ? "pnl" : "pnl_usd");
  int64_t total = 0;
  for (size_t i = 0; i < p->n_positions; i++) {
    const Hourglass__V1__Position *x = p->positions[i];
    char avg[HGCTL_FMT_LEN];
    printf("%-10u %-20s %8" PRId64 " %8" PRId64 " %8" PRId64 " %12s %10s %14s\n",
           x->instrument_id, net_symbol_of(syms, x->instrument_id), x->net_qty, x->bought_qty,
           x->sold_qty, avg_price(x, avg), x->has_settle_price ? net_px(x->settle_price) : "-",
           x->has_pnl ? net_usd(x->pnl) : "-");
    total += x->pnl;
  }
  /* The P&L of the fills since each contract's last daily settlement, at
   * its settlement price: what the next cycle pays if prices stay. */
  printf("pnl against the last settlement: %s %s\n", net_usd(total),
         net_raw ? "micro-USD" : "USD");
  /* Margin as of the exchange's last command (absent in threads mode). */
  if (p->has_initial_margin && p->has_open_order_margin && p->has_excess_equity) {
    const char *unit = net_raw ? "micro-USD" : "USD";
    printf("initial margin %s %s (open orders %s), excess equity %s %s\n",
           net_usd(p->initial_margin), unit, net_usd(p->open_order_margin),
           net_usd(p->excess_equity), unit);
  }
  /* The guarantee's view at the last marks (settlement/CONTRACT.md 4.6). */
  if (p->has_standing && p->has_mark_equity && p->has_maintenance_margin) {
    const char *unit = net_raw ? "micro-USD" : "USD";
    printf("standing %s: equity at the marks %s %s, maintenance margin %s %s", standing_name(p),
           net_usd(p->mark_equity), unit, net_usd(p->maintenance_margin), unit);
    if (p->standing != HOURGLASS__V1__STANDING__STANDING_GOOD && p->has_call_amount)
      printf(", call %s %s due at daily cycle %" PRIu64, net_usd(p->call_amount), unit,
             p->call_due_cycle);
    printf("\n");
  }
}

int hgctl_positions(int argc, char **argv) {
  const char *cmd = "positions";
  const char *account = NULL, *fmt_s = NULL;
  const opt_t opts[] = {CONN_OPTS, {"account", &account, NULL}, {"format", &fmt_s, NULL}};
  int rc = net_parse(cmd, argc, argv, opts, sizeof opts / sizeof opts[0], NULL, 0,
                     "positions [--account N] [--format text|json|csv]\n"
                     "  traders and market makers: the own account; risk viewers: every\n"
                     "  account of the own firm, or the one --account names. json and csv:\n"
                     "  one row per account and contract, with the account's cash and margin\n");
  hgctl_out_t fmt;
  if (rc || (rc = net_need_format(cmd, fmt_s, &fmt))) return rc;
  size_t ncols;
  const hgctl_col_t *cols = position_cols(&ncols);
  hgctl_table_t t;
  int64_t acc = 0;
  if (account && (rc = net_need_num(cmd, "account", account, 1, UINT32_MAX, &acc))) return rc;
  hg_client_t *c = NULL;
  if ((rc = net_open_session(cmd, &c))) return rc;
  static syms_t syms;
  const Hourglass__V1__Positions *p = NULL;
  if ((rc = net_fetch_symbols(cmd, c, &syms)) == 0 &&
      (rc = fetch_positions(cmd, c, (uint32_t)acc, &p)) == 0) {
    if (fmt != HGCTL_OUT_TEXT) hgctl_table_start(&t, stdout, fmt, cols, ncols);
    if (p->account != 0) {
      if (fmt == HGCTL_OUT_TEXT) print_positions(p, &syms);
      else table_positions(&t, p, &syms);
    } else if (p->n_firm_accounts == 0) {
      if (fmt == HGCTL_OUT_TEXT) printf("firm %u has no accounts\n", hg_client_session(c)->firm);
    } else {
      /* A risk viewer's firm: each account in turn (the list is copied
       * first: a reply lives until the next receive). */
      size_t n = p->n_firm_accounts;
      uint32_t *ids = malloc(n * sizeof *ids);
      if (ids == NULL) {
        fprintf(stderr, "hgctl %s: out of memory\n", cmd);
        rc = EXIT_FAIL;
      } else {
        memcpy(ids, p->firm_accounts, n * sizeof *ids);
        for (size_t i = 0; i < n && rc == 0; i++) {
          if ((rc = fetch_positions(cmd, c, ids[i], &p)) != 0) break;
          if (fmt != HGCTL_OUT_TEXT) {
            table_positions(&t, p, &syms);
            continue;
          }
          if (i > 0) printf("\n");
          print_positions(p, &syms);
        }
        free(ids);
      }
    }
    if (fmt != HGCTL_OUT_TEXT && rc == 0) hgctl_table_end(&t);
  }
  net_close_session(c);
  return rc;
}

/* Frames a history request asks for at once (the client's default
 * retransmit_max). */
#define HISTORY_CHUNK 1000u

/* What read_history does with each execution report of the history. */
typedef struct history {
  uint64_t seqs[HISTORY_CHUNK]; /* scan: the reports' seqs in this chunk */
  size_t n;
  hgctl_out_t fmt;              /* print: how */
  hgctl_table_t *t;
  const syms_t *syms;
  bool print;
} history_t;

/* Resends the key's stream [lo, lo + count) and hands each execution
 * report in it to h (kept or printed). Live frames (seq >= *end) that
 * arrive meanwhile are not handled here: *end moves past them, so that a
 * later request fetches them in order. *expired: the gateway no longer
 * keeps the start. 0, or EXIT_FAIL after printing why. */
static int read_history(const char *cmd, hg_client_t *c, uint64_t lo, uint32_t count,
                        uint64_t *end, history_t *h, bool *expired) {
  int rc = hg_client_retransmit(c, lo, count);
  if (rc != 0) {
    fprintf(stderr, "hgctl %s: %s\n", cmd, hg_strerror(rc));
    return EXIT_FAIL;
  }
  h->n = 0;
  *expired = false;
  uint32_t left = count + 1; /* the header, then count frames */
  while (left > 0 && !net_stop) {
    const env_t *e = NULL;
    int r = hg_client_recv(c, net_timeout_ms, &e);
    if (r == -EINTR) continue;
    if (r == 0) {
      fprintf(stderr, "hgctl %s: the gateway did not resend the history in time\n", cmd);
      return EXIT_FAIL;
    }
    if (net_stream_ended(cmd, r, e)) return EXIT_FAIL;
    if (e->body_case == BODY(RETRANSMISSION)) {
      uint32_t why = e->retransmission->reason;
      if (why == HOURGLASS__V1__REJECT_REASON__REJ_RETRANSMIT_EXPIRED) {
        *expired = true;
        return 0;
      }
      if (why != 0) {
        fprintf(stderr, "hgctl %s: history not available (%s)\n", cmd, net_reject_name(why));
        return EXIT_FAIL;
      }
      left = e->retransmission->count;
      continue;
    }
    if (!e->has_seq || e->seq == 0) continue; /* market data, heartbeats */
    if (e->seq >= lo + count) {
      if (e->seq + 1 > *end) *end = e->seq + 1;
      continue;
    }
    if (e->seq < lo) continue;
    left--;
    if (e->body_case != BODY(EXECUTION_REPORT)) continue;
    if (!h->print) {
      if (h->n < HISTORY_CHUNK) h->seqs[h->n++] = e->seq;
    } else if (h->fmt == HGCTL_OUT_TEXT) {
      net_print_exec(e);
    } else {
      net_table_exec(h->t, e, h->syms);
    }
  }
  return 0;
}

/* The seq from which [from, next) holds the last n execution reports of
 * the stream before next (all of them when it has fewer, or all the
 * gateway keeps), found by scanning back a chunk at a time. */
static int history_start(const char *cmd, hg_client_t *c, uint64_t next, uint64_t n,
                         uint64_t *end, history_t *h, uint64_t *from) {
  uint64_t hi = next, found = 0;
  *from = next;
  while (found < n && hi > 1) {
    uint64_t lo = hi > HISTORY_CHUNK ? hi - HISTORY_CHUNK : 1;
    bool expired = false;
    int rc = read_history(cmd, c, lo, (uint32_t)(hi - lo), end, h, &expired);
    if (rc != 0) return rc;
    if (expired) {
      fprintf(stderr, "hgctl %s: the gateway no longer keeps older frames: fewer than %" PRIu64
                      " reports shown\n", cmd, n);
      return 0;
    }
    if (found + h->n >= n) {
      *from = h->seqs[h->n - (n - found)];
      return 0;
    }
    found += h->n;
    *from = lo;
    hi = lo;
  }
  return 0;
}

int hgctl_executions(int argc, char **argv) {
  const char *cmd = "executions";
  const char *last = NULL, *fmt_s = NULL;
  bool follow = false;
  const opt_t opts[] = {CONN_OPTS, {"last", &last, NULL}, {"follow", NULL, &follow},
                        {"format", &fmt_s, NULL}};
  int rc = net_parse(cmd, argc, argv, opts, sizeof opts / sizeof opts[0], NULL, 0,
                     "executions [--last N (default 20)] [--follow] [--format text|json|csv]\n"
                     "  the key's last N execution reports (0..1000), oldest first; then, with\n"
                     "  --follow, new ones as they come. json: one array, or with --follow one\n"
                     "  object per line\n");
  hgctl_out_t fmt;
  if (rc || (rc = net_need_format(cmd, fmt_s, &fmt))) return rc;
  int64_t n = 20;
  if (last && (rc = net_need_num(cmd, "last", last, 0, 1000, &n))) return rc;
  hg_client_t *c = NULL;
  if ((rc = net_open_session(cmd, &c))) return rc;
  static syms_t syms;
  static history_t h;
  hgctl_table_t t;
  if (fmt != HGCTL_OUT_TEXT) {
    if ((rc = net_fetch_symbols(cmd, c, &syms)) != 0) {
      net_close_session(c);
      return rc;
    }
    size_t ncols;
    const hgctl_col_t *cols = net_exec_cols(&ncols);
    hgctl_table_start(&t, stdout, fmt, cols, ncols);
    t.lines = follow;
  }
  signal(SIGINT, net_on_signal);
  signal(SIGTERM, net_on_signal);
  /* The last n reports of this key's stream (frames of other kinds, the
   * symbol lookup's reply among them, do not count), in seq order, and
   * any that arrive meanwhile; then (with --follow) live ones. */
  uint64_t next = hg_client_session(c)->login_next_seq, from = next, end = next;
  memset(&h, 0, sizeof h);
  h.fmt = fmt;
  h.t = &t;
  h.syms = &syms;
  if (n > 0) rc = history_start(cmd, c, next, (uint64_t)n, &end, &h, &from);
  h.print = true;
  while (rc == 0 && from < end && !net_stop) {
    uint32_t count = end - from > HISTORY_CHUNK ? HISTORY_CHUNK : (uint32_t)(end - from);
    bool expired = false;
    rc = read_history(cmd, c, from, count, &end, &h, &expired);
    if (expired) {
      fprintf(stderr, "hgctl %s: history not available (%s)\n", cmd,
              net_reject_name(HOURGLASS__V1__REJECT_REASON__REJ_RETRANSMIT_EXPIRED));
      break;
    }
    from += count;
  }
  fflush(stdout);
  /* Following, frames up to floor were printed before a failover: the
   * stream is resumed after them at the new leader. */
  uint64_t seen = end > 0 ? end - 1 : 0, floor = 0;
  while (rc == 0 && follow && !net_stop) {
    const env_t *e = NULL;
    int r = hg_client_recv(c, 500, &e);
    if (r == 0 || r == -EINTR) continue;
    if (net_stream_lost(r, e)) {
      if ((rc = net_reconnect(cmd, c, r)) != 0) break;
      floor = seen;
      uint64_t now_next = hg_client_session(c)->login_next_seq;
      if (now_next > floor + 1 && hg_client_retransmit(c, floor + 1,
                                                       (uint32_t)(now_next - floor - 1)) != 0)
        fprintf(stderr, "hgctl %s: cannot ask for frames %" PRIu64 "..%" PRIu64 "\n", cmd,
                floor + 1, now_next - 1);
      continue;
    }
    if (net_stream_ended(cmd, r, e)) {
      rc = EXIT_FAIL;
      break;
    }
    if (e->has_seq && e->seq != 0 && e->seq <= floor) continue; /* printed before the failover */
    if (e->has_seq && e->seq > seen) seen = e->seq;
    if (e->body_case != BODY(EXECUTION_REPORT) || (e->has_seq && e->seq != 0 && e->seq < end))
      continue; /* shown above */
    if (fmt == HGCTL_OUT_TEXT) net_print_exec(e);
    else net_table_exec(&t, e, &syms);
    fflush(stdout); /* a tail is read as it happens, often through a pipe */
  }
  if (fmt != HGCTL_OUT_TEXT && rc == 0) hgctl_table_end(&t);
  net_close_session(c);
  return rc;
}

/* ----------------------------------------------------------------- orders */

/* The live orders come from the gateway's own list (OpenOrdersRequest),
 * page by page: nothing is replayed from the key's stream, so the answer
 * does not depend on how much of it the gateway still keeps. */
#define ORDERS_PAGE 1000u

int hgctl_orders(int argc, char **argv) {
  const char *cmd = "orders", *fmt_s = NULL, *account = NULL;
  const opt_t opts[] = {CONN_OPTS, {"account", &account, NULL}, {"format", &fmt_s, NULL}};
  int rc = net_parse(cmd, argc, argv, opts, sizeof opts / sizeof opts[0], NULL, 0,
                     "orders [--account N] [--format text|json|csv]\n"
                     "  live orders (price, quantity, what is left), by account and order id:\n"
                     "  traders and market makers the own account's; risk viewers every\n"
                     "  account of the own firm, or the one --account names\n");
  hgctl_out_t fmt;
  if (rc || (rc = net_need_format(cmd, fmt_s, &fmt))) return rc;
  int64_t acc = 0;
  if (account && (rc = net_need_num(cmd, "account", account, 1, UINT32_MAX, &acc))) return rc;
  const hgctl_col_t cols[] = {{"account", 0}, {"order_id", 0}, {"symbol", 1}, {"side", 1},
                              {net_raw ? "price" : "price_usd", 0}, {"qty", 0}, {"leaves", 0},
                              {"group", 0}, {"clordid", 0}};
  hgctl_table_t t;
  hg_client_t *c = NULL;
  if ((rc = net_open_session(cmd, &c))) return rc;
  static syms_t syms;
  rc = net_fetch_symbols(cmd, c, &syms);
  bool started = false; /* the header goes out with the first page, not before a refusal */
  uint32_t from_acc = 0;
  uint64_t from = 0;
  while (rc == 0) {
    uint64_t seq = 0;
    const env_t *e = NULL;
    if (hg_client_open_orders(c, (uint32_t)acc, 0, from_acc, from, ORDERS_PAGE, &seq) != 0) {
      fprintf(stderr, "hgctl %s: send failed\n", cmd);
      rc = EXIT_FAIL;
      break;
    }
    if ((rc = net_await_reply(cmd, c, seq, &e)) != 0) break;
    rc = net_response_status(cmd, e);
    if (rc != 0 || e->body_case != BODY(OPEN_ORDERS)) {
      if (rc == 0) rc = EXIT_FAIL;
      break;
    }
    const Hourglass__V1__OpenOrders *m = e->open_orders;
    if (m->reason != 0) {
      fprintf(stderr, "hgctl %s: refused: %s (%u)%s\n", cmd, net_reject_name(m->reason),
              m->reason,
              m->reason == HOURGLASS__V1__REJECT_REASON__REJ_UNKNOWN_ACCOUNT
                  ? ": not an account this key may see"
                  : "");
      rc = EXIT_FAIL;
      break;
    }
    if (!started && fmt == HGCTL_OUT_TEXT)
      printf("%-8s %-12s %-20s %-4s %10s %10s %10s %-6s %s\n", cols[0].name, cols[1].name,
             cols[2].name, cols[3].name, cols[4].name, cols[5].name, cols[6].name, cols[7].name,
             cols[8].name);
    else if (!started) hgctl_table_start(&t, stdout, fmt, cols, sizeof cols / sizeof cols[0]);
    started = true;
    for (size_t i = 0; i < m->n_orders; i++) {
      const Hourglass__V1__OpenOrder *o = m->orders[i];
      char group[12] = "-", acct[12], oid[24], qty[24], leaves[24], clid[24];
      if (o->quote_group) snprintf(group, sizeof group, "%u", o->quote_group);
      snprintf(acct, sizeof acct, "%u", o->account);
      snprintf(oid, sizeof oid, "%" PRIu64, o->order_id);
      snprintf(qty, sizeof qty, "%" PRId64, o->qty);
      snprintf(leaves, sizeof leaves, "%" PRId64, o->leaves);
      snprintf(clid, sizeof clid, "%" PRIu64, o->client_order_id);
      const char *v[] = {acct, oid, net_symbol_of(&syms, o->instrument_id),
                         o->side == HOURGLASS__V1__SIDE__SIDE_SELL ? "sell" : "buy",
                         net_px(o->price), qty, leaves, group, clid};
      if (fmt == HGCTL_OUT_TEXT)
        printf("%-8s %-12s %-20s %-4s %10s %10s %10s %-6s %s\n", v[0], v[1], v[2], v[3], v[4],
               v[5], v[6], v[7], v[8]);
      else hgctl_table_row(&t, v);
    }
    if (m->next_order_id == 0) break;
    from_acc = m->next_account;
    from = m->next_order_id;
  }
  if (rc == 0 && started && fmt != HGCTL_OUT_TEXT) hgctl_table_end(&t);
  fflush(stdout);
  net_close_session(c);
  return rc;
}

/* ----------------------------------------------------------------- ladder */

#define LADDER_MAX 50

/* One side of the ladder: the best LADDER_MAX levels (base/levels.h keeps
 * them sorted and evicts the worst when a better price arrives). */
typedef struct book_side {
  hg_level_t store[LADDER_MAX];
  hg_levels_t l;
} book_side_t;

static void side_reset(book_side_t *s, int side) { hg_levels_init(&s->l, side, s->store, LADDER_MAX); }

static void draw(const char *sym, uint32_t id, const book_side_t *b, const book_side_t *a,
                 int depth, uint64_t md_seq, uint32_t state, int64_t last_px, int64_t last_qty,
                 bool clear) {
  if (clear) fputs("\033[H\033[2J", stdout);
  printf("%s (id %u)  md_seq %" PRIu64 "  %s", sym, id, md_seq, net_state_name(state));
  if (last_qty > 0) printf("  last %" PRId64 " x %s", last_qty, net_px(last_px));
  printf("\n%12s %12s | %-12s %-12s\n", "bid qty", "bid", "ask", "ask qty");
  for (int i = 0; i < depth; i++) {
    char bq[24] = "", bp[HGCTL_FMT_LEN] = "", ap[HGCTL_FMT_LEN] = "", aq[24] = "";
    if ((uint32_t)i < b->l.n) {
      snprintf(bq, sizeof bq, "%" PRId64, b->l.lv[i].qty);
      snprintf(bp, sizeof bp, "%s", net_px(b->l.lv[i].price));
    }
    if ((uint32_t)i < a->l.n) {
      snprintf(ap, sizeof ap, "%s", net_px(a->l.lv[i].price));
      snprintf(aq, sizeof aq, "%" PRId64, a->l.lv[i].qty);
    }
    if ((uint32_t)i >= b->l.n && (uint32_t)i >= a->l.n) break;
    printf("%12s %12s | %-12s %-12s\n", bq, bp, ap, aq);
  }
  fflush(stdout);
}

int hgctl_ladder(int argc, char **argv) {
  const char *cmd = "ladder";
  const char *depth_s = NULL, *pos[1] = {NULL};
  bool once = false;
  const opt_t opts[] = {CONN_OPTS, {"depth", &depth_s, NULL}, {"once", NULL, &once}};
  int rc = net_parse(cmd, argc, argv, opts, sizeof opts / sizeof opts[0], pos, 1,
                     "ladder SYMBOL|ID [--depth N (1..50, default 10)] [--once]\n");
  if (rc) return rc;
  if (pos[0] == NULL) {
    fprintf(stderr, "hgctl %s: which instrument? (hgctl ladder SYMBOL)\n", cmd);
    return EXIT_USAGE;
  }
  int64_t depth = 10;
  if (depth_s && (rc = net_need_num(cmd, "depth", depth_s, 1, LADDER_MAX, &depth))) return rc;
  hg_client_t *c = NULL;
  if ((rc = net_open_session(cmd, &c))) return rc;
  uint32_t id = 0;
  static syms_t syms;
  if ((rc = net_resolve_instrument(cmd, c, pos[0], &id)) ||
      (rc = net_fetch_symbols(cmd, c, &syms))) {
    net_close_session(c);
    return rc;
  }
  /* The instrument's own symbol, however it was named (b200.a.2027-03, 1). */
  const char *sym = net_symbol_of(&syms, id);
  if (strcmp(sym, "-") == 0) sym = pos[0];
  signal(SIGINT, net_on_signal);
  signal(SIGTERM, net_on_signal);
  bool tty = isatty(STDOUT_FILENO) && !once;
  static book_side_t bids, asks;
  side_reset(&bids, HG_LEVELS_BID);
  side_reset(&asks, HG_LEVELS_ASK);
  uint64_t md_seq = 0, sub_seq = 0;
  uint32_t state = 0;
  int64_t last_px = 0, last_qty = 0;
  bool have = false, dirty = false;
  struct timespec last_draw = {0, 0};
  rc = hg_client_md_subscribe(c, id, (uint32_t)depth, &sub_seq);
  while (rc == 0 && !net_stop) {
    const env_t *e = NULL;
    int r = hg_client_recv(c, 100, &e);
    if (r == -EINTR) continue;
    if (net_stream_lost(r, e)) {
      /* A failover: log in again and subscribe anew (a fresh snapshot). */
      have = false;
      if (net_reconnect(cmd, c, r) != 0 ||
          hg_client_md_subscribe(c, id, (uint32_t)depth, &sub_seq) != 0) {
        rc = EXIT_FAIL;
        break;
      }
      continue;
    }
    if (r == 1) {
      switch (e->body_case) {
      case BODY(MD_SNAPSHOT): {
        const Hourglass__V1__MarketDataSnapshot *s = e->md_snapshot;
        if (s->instrument_id != id) break;
        if (s->reason != 0) {
          fprintf(stderr, "hgctl %s: subscription refused: %s (%u)\n", cmd, net_reject_name(s->reason),
                  s->reason);
          rc = EXIT_FAIL;
          break;
        }
        side_reset(&bids, HG_LEVELS_BID);
        side_reset(&asks, HG_LEVELS_ASK);
        for (size_t i = 0; i < s->n_bids; i++) hg_levels_set(&bids.l, s->bids[i]->price, s->bids[i]->qty);
        for (size_t i = 0; i < s->n_asks; i++) hg_levels_set(&asks.l, s->asks[i]->price, s->asks[i]->qty);
        md_seq = s->md_seq;
        state = s->state;
        have = dirty = true;
        break;
      }
      case BODY(MD_LEVEL):
      case BODY(MD_TRADE):
      case BODY(MD_STATUS): {
        uint32_t iid = e->body_case == BODY(MD_LEVEL)   ? e->md_level->instrument_id
                       : e->body_case == BODY(MD_TRADE) ? e->md_trade->instrument_id
                                                        : e->md_status->instrument_id;
        uint64_t s = e->body_case == BODY(MD_LEVEL)   ? e->md_level->md_seq
                     : e->body_case == BODY(MD_TRADE) ? e->md_trade->md_seq
                                                      : e->md_status->md_seq;
        if (iid != id || !have || s <= md_seq) break;
        if (s != md_seq + 1) { /* a gap: start again from a fresh snapshot */
          have = false;
          rc = hg_client_md_subscribe(c, id, (uint32_t)depth, &sub_seq);
          break;
        }
        md_seq = s;
        if (e->body_case == BODY(MD_LEVEL))
          hg_levels_set(e->md_level->side == HOURGLASS__V1__SIDE__SIDE_SELL ? &asks.l : &bids.l,
                        e->md_level->price, e->md_level->qty);
        else if (e->body_case == BODY(MD_TRADE)) {
          last_px = e->md_trade->price;
          last_qty = e->md_trade->qty;
        } else {
          state = e->md_status->state;
        }
        dirty = true;
        break;
      }
      case BODY(TERMINATE):
        fprintf(stderr, "hgctl %s: the gateway ended the session (code %u)\n", cmd,
                e->terminate->code);
        rc = EXIT_FAIL;
        break;
      default: break;
      }
      if (rc != 0) break;
    }
    if (once && have) {
      draw(sym, id, &bids, &asks, (int)depth, md_seq, state, last_px, last_qty, false);
      break;
    }
    /* Redraw at most 20 times a second. */
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long ms = (now.tv_sec - last_draw.tv_sec) * 1000 + (now.tv_nsec - last_draw.tv_nsec) / 1000000;
    if (dirty && have && ms >= 50) {
      draw(sym, id, &bids, &asks, (int)depth, md_seq, state, last_px, last_qty, tty);
      if (!tty) puts("");
      dirty = false;
      last_draw = now;
    }
  }
  if (rc < 0) {
    fprintf(stderr, "hgctl %s: send failed: %s\n", cmd, hg_strerror(rc));
    rc = EXIT_FAIL;
  }
  net_close_session(c);
  return rc;
}

/* ------------------------------------------------------------ quotes */

/* One side of a quote, "QTY@PRICE" in [s, end): the price in USD (ticks
 * with --raw); nothing (or "0@0") leaves the side unquoted. */
static bool quote_side(const char *s, const char *end, int64_t *qty, int64_t *price) {
  char buf[64];
  if (end == s) {
    *qty = *price = 0;
    return true;
  }
  if (end < s || (size_t)(end - s) >= sizeof buf) return false;
  memcpy(buf, s, (size_t)(end - s));
  buf[end - s] = '\0';
  char *at = strchr(buf, '@');
  if (at == NULL) return false;
  *at = '\0';
  if (!net_num(buf, 0, INT64_MAX, qty)) return false;
  if (net_raw) return net_num(at + 1, 0, INT64_MAX, price);
  return hgctl_decimal_parse(at + 1, 3, 1, price) == 0;
}

/* "SYMBOL:BIDQTY@BID/ASKQTY@ASK"; either side may be left out (SYMBOL:10@3.400/
 * bids only, SYMBOL:/10@3.440 offers only; "0@0" says the same). */
static int parse_quote(const char *cmd, hg_client_t *c, const char *s,
                       Hourglass__V1__QuoteEntry *q) {
  const char *colon = strrchr(s, ':');
  const char *slash = colon ? strchr(colon, '/') : NULL;
  char sym[64];
  int64_t bq, bp, aq, ap;
  if (colon == NULL || colon == s || (size_t)(colon - s) >= sizeof sym || slash == NULL ||
      !quote_side(colon + 1, slash, &bq, &bp) ||
      !quote_side(slash + 1, slash + 1 + strlen(slash + 1), &aq, &ap) || (bq == 0 && aq == 0)) {
    fprintf(stderr, "hgctl %s: --quote '%s' must be SYMBOL:BIDQTY@BID/ASKQTY@ASK (prices in %s)\n",
            cmd, s, net_raw ? "ticks" : "USD per GPU-hour, e.g. 10@3.400/10@3.440");
    return EXIT_USAGE;
  }
  snprintf(sym, sizeof sym, "%.*s", (int)(colon - s), s);
  hourglass__v1__quote_entry__init(q);
  int rc = net_resolve_instrument(cmd, c, sym, &q->instrument_id);
  if (rc) return rc;
  q->has_bid_qty = q->has_bid_price = bq > 0;
  q->bid_qty = bq;
  q->bid_price = bp;
  q->has_ask_qty = q->has_ask_price = aq > 0;
  q->ask_qty = aq;
  q->ask_price = ap;
  return 0;
}

#define QUOTES_MAX 64

int hgctl_quote(int argc, char **argv) {
  bool reset = argc > 0 && strcmp(argv[0], "reset") == 0;
  const char *cmd = reset ? "quote reset" : "quote";
  if (reset) {
    argc--;
    argv++;
  }
  /* --quote repeats: taken out before the common parser sees the rest. */
  const char *quotes[QUOTES_MAX];
  char *rest[64];
  int nq = 0, nr = 0;
  for (int i = 0; i < argc; i++) {
    const char *v = NULL;
    if (strcmp(argv[i], "--quote") == 0 && i + 1 < argc) v = argv[++i];
    else if (strncmp(argv[i], "--quote=", 8) == 0) v = argv[i] + 8;
    if (v != NULL && !reset) {
      if (nq == QUOTES_MAX) {
        fprintf(stderr, "hgctl %s: at most %d --quote\n", cmd, QUOTES_MAX);
        return EXIT_USAGE;
      }
      quotes[nq++] = v;
    } else if (nr < 64) {
      rest[nr++] = argv[i];
    } else {
      fprintf(stderr, "hgctl %s: too many arguments\n", cmd);
      return EXIT_USAGE;
    }
  }
  const char *group = NULL, *mmp_qty = NULL, *mmp_win = NULL, *fmt_s = NULL;
  const opt_t opts[] = {CONN_OPTS, {"group", &group, NULL}, {"mmp-qty", &mmp_qty, NULL},
                        {"mmp-window-ms", &mmp_win, NULL}, {"format", &fmt_s, NULL}};
  const char *usage =
      "quote --group G --quote SYMBOL:BIDQTY@BID/ASKQTY@ASK [--quote ...]   (prices in USD)\n"
      "            [--mmp-qty Q --mmp-window-ms MS]   (market makers; replaces the quotes)\n"
      "            [--format text|json|csv]\n"
      "  one side only: SYMBOL:BIDQTY@BID/ (bids) or SYMBOL:/ASKQTY@ASK (offers)\n"
      "            prints the ACK, each side's report and QUOTED sides=N accepted=A\n"
      "            refused=R; exits 1 if any side or entry was refused\n"
      "  json and csv: the quote's execution reports in the columns of `executions`,\n"
      "  and a REJECTED row (symbol, reason) per entry the gateway refused\n"
      "       hgctl quote reset --group G   (re-enables a group pulled by protection)\n";
  int rc = net_parse(cmd, nr, rest, opts, sizeof opts / sizeof opts[0], NULL, 0, usage);
  int64_t g = 0, mq = 0, mw = 0;
  hgctl_out_t fmt;
  if (rc || (rc = net_need_format(cmd, fmt_s, &fmt))) return rc;
  if (reset && fmt != HGCTL_OUT_TEXT) {
    fprintf(stderr, "hgctl %s: prints one line, no table: leave out --format\n", cmd);
    return EXIT_USAGE;
  }
  if ((rc = net_need_num(cmd, "group", group, 1, UINT32_MAX, &g)) ||
      (mmp_qty && (rc = net_need_num(cmd, "mmp-qty", mmp_qty, 1, INT64_MAX, &mq))) ||
      (mmp_win && (rc = net_need_num(cmd, "mmp-window-ms", mmp_win, 1, UINT32_MAX, &mw))))
    return rc;
  if (!reset && nq == 0) {
    fprintf(stderr, "hgctl %s: give at least one --quote\n", cmd);
    return EXIT_USAGE;
  }
  hg_client_t *c = NULL;
  if ((rc = net_open_session(cmd, &c))) return rc;
  uint64_t seq = 0;
  const env_t *e = NULL;
  if (reset) {
    rc = hg_client_quote_group_reset(c, (uint32_t)g, &seq);
    if (rc == 0) rc = net_op_reply(cmd, "quote-reset", c, seq);
    else rc = EXIT_FAIL;
    net_close_session(c);
    return rc;
  }
  Hourglass__V1__QuoteEntry q[QUOTES_MAX];
  const Hourglass__V1__QuoteEntry *qp[QUOTES_MAX];
  static syms_t syms;
  hgctl_table_t t;
  memset(&t, 0, sizeof t); /* t.f stays NULL until the table starts */
  size_t ncols = 0;
  const hgctl_col_t *cols = net_exec_cols(&ncols);
  if (fmt != HGCTL_OUT_TEXT && (rc = net_fetch_symbols(cmd, c, &syms)) == 0)
    hgctl_table_start(&t, stdout, fmt, cols, ncols);
  for (int i = 0; i < nq && rc == 0; i++) {
    rc = parse_quote(cmd, c, quotes[i], &q[i]);
    qp[i] = &q[i];
  }
  if (rc == 0) {
    rc = hg_client_mass_quote(c, (uint32_t)g, qp, (size_t)nq, mq, (uint32_t)mw, &seq);
    if (rc != 0) {
      fprintf(stderr, "hgctl %s: send failed: %s\n", cmd, hg_strerror(rc));
      rc = EXIT_FAIL;
    }
  }
  /* The MassQuoteAck, and each quoted side's first report: NEW, or
   * REJECTED by the engine (a post-only side that would cross, the band,
   * risk). A refused side fails the command like a refused order. */
  int sides = 0, accepted = 0, refused = 0;
  for (int i = 0; i < nq; i++) sides += (q[i].bid_qty > 0) + (q[i].ask_qty > 0);
  bool acked = false;
  while (rc == 0) {
    int r = hg_client_recv(c, net_timeout_ms, &e);
    if (r <= 0) {
      fprintf(stderr, "hgctl %s: no %s within %d ms\n", cmd,
              acked ? "report for every quoted side" : "acknowledgement", net_timeout_ms);
      rc = EXIT_FAIL;
      break;
    }
    if (e->body_case == BODY(EXECUTION_REPORT) && e->execution_report->ref_seq == seq) {
      if (fmt == HGCTL_OUT_TEXT) net_print_exec(e);
      else net_table_exec(&t, e, &syms);
      accepted += e->execution_report->exec_type == HOURGLASS__V1__EXEC_TYPE__EXEC_NEW;
      refused += e->execution_report->exec_type == HOURGLASS__V1__EXEC_TYPE__EXEC_REJECTED;
      if (acked && accepted + refused >= sides) break;
    } else if (e->body_case == BODY(RESPONSE) && e->response->ref_seq == seq) {
      rc = net_response_status(cmd, e);
      break;
    } else if (e->body_case == BODY(MASS_QUOTE_ACK) && e->mass_quote_ack->ref_seq == seq) {
      const Hourglass__V1__MassQuoteAck *a = e->mass_quote_ack;
      if (fmt == HGCTL_OUT_TEXT)
        printf("ACK group=%u reason=%s(%u) rejects=%zu\n", a->quote_group,
               net_reject_name(a->reason), a->reason, a->n_rejects);
      for (size_t k = 0; k < a->n_rejects; k++) {
        uint32_t ix = a->rejects[k]->index < (uint32_t)nq ? a->rejects[k]->index : 0;
        if (fmt == HGCTL_OUT_TEXT) {
          printf("REJECT quote=%s reason=%s(%u)\n", quotes[ix],
                 net_reject_name(a->rejects[k]->reason), a->rejects[k]->reason);
          continue;
        }
        /* The gateway's refusal of an entry: no report, one row in the
         * executions' columns (exec_type, instrument, symbol, reason). */
        char inst[16];
        snprintf(inst, sizeof inst, "%u", q[ix].instrument_id);
        const char *v[16] = {NULL};
        v[0] = "REJECTED";
        v[2] = inst;
        v[3] = net_symbol_of(&syms, q[ix].instrument_id);
        v[11] = net_reject_name(a->rejects[k]->reason);
        hgctl_table_row(&t, v);
      }
      fflush(stdout);
      if (a->reason != 0) {
        fprintf(stderr, "hgctl %s: refused: %s (%u)\n", cmd, net_reject_name(a->reason), a->reason);
        rc = EXIT_FAIL;
        break;
      }
      /* Entries the gateway refused send no side (the few that sent a bid
       * first are counted when their report comes). */
      for (size_t k = 0; k < a->n_rejects; k++) {
        uint32_t i = a->rejects[k]->index;
        if (i < (uint32_t)nq) sides -= (q[i].bid_qty > 0) + (q[i].ask_qty > 0);
      }
      rc = a->n_rejects > 0 ? EXIT_FAIL : 0; /* a is gone after the next receive */
      acked = true;
      if (accepted + refused >= sides) break;
    } else if (e->body_case == BODY(TERMINATE)) {
      fprintf(stderr, "hgctl %s: the gateway ended the session (code %u)\n", cmd,
              e->terminate->code);
      rc = EXIT_FAIL;
    }
  }
  if (acked) {
    if (fmt == HGCTL_OUT_TEXT) {
      net_print_followers(c, seq, 0, 200); /* fills that follow at once */
    } else {
      /* The same, as rows (net_print_followers prints lines). */
      while (hg_client_recv(c, 200, &e) == 1)
        if (e->body_case == BODY(EXECUTION_REPORT) && e->execution_report->ref_seq == seq)
          net_table_exec(&t, e, &syms);
    }
    /* A table keeps stdout for its rows: the summary goes to stderr. */
    fprintf(fmt == HGCTL_OUT_TEXT ? stdout : stderr, "QUOTED sides=%d accepted=%d refused=%d\n",
            sides, accepted, refused);
    fflush(stdout);
    if (refused > 0) {
      fprintf(stderr, "hgctl %s: %d of %d quoted sides refused (the REJECTED lines say why)\n",
              cmd, refused, sides);
      rc = EXIT_FAIL;
    }
  }
  /* The table stays valid JSON whatever ended the quote (errors: stderr). */
  if (fmt != HGCTL_OUT_TEXT && t.f != NULL) hgctl_table_end(&t);
  net_close_session(c);
  return rc;
}
