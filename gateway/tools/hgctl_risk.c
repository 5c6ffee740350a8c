/*
 * hgctl_risk.c - the commands of risk viewers and account holders that read
 * rather than trade: the drop copy tail (the firm's order events, one line
 * each) and the statement fetched from the gateway (--remote), printed by
 * the same writer as `hgctl statement --data`.
 */
#include "hgctl_net.h"
#include "hgctl_net_util.h"
#include "hgctl_tools.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hourglass/error.h"
#include "hourglass/grow.h"

int hgctl_dropcopy(int argc, char **argv) {
  const char *cmd = "dropcopy", *count_s = NULL;
  const opt_t opts[] = {CONN_OPTS, {"count", &count_s, NULL}};
  int rc = net_parse(cmd, argc, argv, opts, sizeof opts / sizeof opts[0], NULL, 0,
                     "dropcopy [--count N]   (risk viewers: the firm's order events, one line\n"
                 "          each, until interrupted or N events)\n");
  int64_t count = 0;
  if (rc || (count_s && (rc = net_need_num(cmd, "count", count_s, 1, INT64_MAX, &count)))) return rc;
  hg_client_t *c = NULL;
  if ((rc = net_open_session(cmd, &c))) return rc;
  signal(SIGINT, net_on_signal);
  signal(SIGTERM, net_on_signal);
  uint64_t seq = 0;
  const env_t *e = NULL;
  rc = hg_client_drop_copy(c, &seq);
  if (rc != 0) {
    fprintf(stderr, "hgctl %s: send failed: %s\n", cmd, hg_strerror(rc));
    net_close_session(c);
    return EXIT_FAIL;
  }
  if ((rc = net_await_reply(cmd, c, seq, &e)) != 0 || (rc = net_response_status(cmd, e)) != 0) {
    net_close_session(c);
    return rc;
  }
  printf("SUBSCRIBED\n");
  fflush(stdout);
  int64_t seen = 0;
  while (!net_stop && (count == 0 || seen < count)) {
    int r = hg_client_recv(c, 500, &e);
    if (r == 0 || r == -EINTR) continue;
    if (net_stream_ended(cmd, r, e)) {
      rc = EXIT_FAIL;
      break;
    }
    if (e->body_case == BODY(EXECUTION_REPORT) && e->execution_report->drop_copy) {
      net_print_exec(e);
      seen++;
    }
  }
  net_close_session(c);
  return rc;
}

/* ---------------------------------------------------------- statement */

/* A listed instrument's symbol, NULL if none. */
static const char *syms_symbol(const void *ctx, uint32_t id) {
  const char *s = net_symbol_of(ctx, id);
  return strcmp(s, "-") == 0 ? NULL : s;
}

/* A risk viewer's statement needs --account: says which accounts of its
 * firm it may name (a Positions request without an account lists them).
 * Returns the exit status (usage). */
static int name_firm_accounts(const char *cmd, hg_client_t *c) {
  uint64_t seq = 0;
  const env_t *e = NULL;
  int rc;
  if (hg_client_positions(c, 0, &seq) != 0 || (rc = net_await_reply(cmd, c, seq, &e)) != 0 ||
      e->body_case != BODY(POSITIONS)) {
    fprintf(stderr, "hgctl %s: a risk viewer names the account: --account N\n", cmd);
    return EXIT_USAGE;
  }
  const Hourglass__V1__Positions *p = e->positions;
  fprintf(stderr, "hgctl %s: a risk viewer names the account: --account N, one of firm %u's:",
          cmd, (unsigned)hg_client_session(c)->firm);
  for (size_t k = 0; k < p->n_firm_accounts; k++)
    fprintf(stderr, "%s %u", k ? "," : "", (unsigned)p->firm_accounts[k]);
  fprintf(stderr, "%s\n", p->n_firm_accounts ? "" : " (none yet)");
  return EXIT_USAGE;
}

/* Fetches every page of the account's statement and prints it with the
 * same writer as `hgctl statement --data`. */
int hgctl_statement_remote(int argc, char **argv) {
  const char *cmd = "statement", *account = NULL, *instr = NULL, *fmt = NULL;
  bool remote = false, usd = false;
  const opt_t opts[] = {CONN_OPTS,
                        {"remote", NULL, &remote},
                        {"usd", NULL, &usd},
                        {"account", &account, NULL},
                        {"instrument", &instr, NULL},
                        {"format", &fmt, NULL}};
  int rc = net_parse(cmd, argc, argv, opts, sizeof opts / sizeof opts[0], NULL, 0,
                     "statement --remote [--account N] [--instrument I] [--format csv|json] "
                     "[--usd]\n"
                 "  the statement of the own account (risk viewers: --account of the own\n"
                 "  firm) from the gateway, in the format of `hgctl statement --data`\n"
                 "  (--usd: in USD, UTC times and symbols)\n");
  int64_t acc = 0, inst = 0;
  if (rc || (account && (rc = net_need_num(cmd, "account", account, 1, UINT32_MAX, &acc))) ||
      (instr && (rc = net_need_num(cmd, "instrument", instr, 1, UINT32_MAX - 1, &inst))))
    return rc;
  bool json = fmt != NULL && strcmp(fmt, "json") == 0;
  if (fmt != NULL && !json && strcmp(fmt, "csv") != 0) {
    fprintf(stderr, "hgctl %s: --format must be csv or json\n", cmd);
    return EXIT_USAGE;
  }
  hg_client_t *c = NULL;
  if ((rc = net_open_session(cmd, &c))) return rc;
  if (acc == 0 && hg_client_session(c)->role == HOURGLASS__V1__ROLE__ROLE_RISK_VIEWER) {
    rc = name_firm_accounts(cmd, c);
    net_close_session(c);
    return rc;
  }
  static syms_t syms;
  if (usd && (rc = net_fetch_symbols(cmd, c, &syms)) != 0) {
    net_close_session(c);
    return rc;
  }
  hg_ledger_entry_t *ent = NULL;
  size_t n = 0, cap = 0;
  uint64_t from = 0;
  uint32_t who = 0;
  for (;;) {
    uint64_t seq = 0;
    const env_t *e = NULL;
    if (hg_client_statement(c, (uint32_t)acc, (uint32_t)inst, from, &seq) != 0) {
      fprintf(stderr, "hgctl %s: send failed\n", cmd);
      rc = EXIT_FAIL;
      break;
    }
    /* The Statement, or a Response (role reject) with this ref_seq. */
    if ((rc = net_await_reply(cmd, c, seq, &e)) != 0) break;
    if (e->body_case != BODY(STATEMENT)) {
      rc = net_response_status(cmd, e);
      if (rc == 0) rc = EXIT_FAIL;
      break;
    }
    rc = 0;
    const Hourglass__V1__Statement *s = e->statement;
    if (s->reason != 0) {
      fprintf(stderr, "hgctl %s: refused: %s (%u)\n", cmd, net_reject_name(s->reason), s->reason);
      rc = EXIT_FAIL;
      break;
    }
    who = s->account;
    hg_ledger_entry_t *ne = hg_grow(ent, &cap, sizeof *ne, n + s->n_entries, 1024);
    if (ne == NULL) {
      fprintf(stderr, "hgctl %s: out of memory\n", cmd);
      rc = EXIT_FAIL;
      break;
    }
    ent = ne;
    for (size_t k = 0; k < s->n_entries; k++) {
      const Hourglass__V1__LedgerEntry *x = s->entries[k];
      hg_ledger_entry_t *y = &ent[n++];
      memset(y, 0, sizeof *y);
      y->index = x->index;
      y->seq = x->seq;
      y->ts = x->ts;
      y->account = s->account;
      y->instrument = x->has_instrument_id ? x->instrument_id : HG_CLR_NO_INSTRUMENT;
      y->kind = x->kind;
      y->amount = x->amount;
      y->balance = x->balance;
      y->price = x->price;
      y->qty = x->qty;
    }
    if (s->next_index == 0) break;
    if (s->next_index <= from) {
      fprintf(stderr, "hgctl %s: the gateway's pages do not advance\n", cmd);
      rc = EXIT_FAIL;
      break;
    }
    from = s->next_index;
  }
  net_close_session(c);
  if (rc == 0) {
    uint32_t which = inst ? (uint32_t)inst : HG_CLR_NO_INSTRUMENT;
    rc = usd ? hgctl_statement_print_usd(ent, n, who, which, json, syms_symbol, &syms, stdout)
             : hgctl_statement_print(ent, n, who, which, json, stdout);
    if (rc != 0) {
      fprintf(stderr, "hgctl %s: %s\n", cmd, hg_strerror(rc));
      rc = EXIT_FAIL;
    }
  }
  free(ent);
  return rc;
}
