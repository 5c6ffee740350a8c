/*
 * hgctl_statement.c - account statements from a replay (hgctl_replay.h):
 * `hgctl statement` prints one account's, `hgctl replay --out/--expect`
 * writes or compares every account's (the month scenario's file names
 * included), all with the clearing library's
 * writer (hg_clearing_statement_of) over a copy of the replay's ledger, so
 * a what-if FSP prints the way the ledger would. `statement --remote`
 * fetches the gateway's instead (hgctl_risk.c).
 */
#include "hgctl_args.h"
#include "hgctl_fmt.h"
#include "hgctl_net.h"
#include "hgctl_replay.h"
#include "hgctl_table.h"
#include "hgctl_tools.h"

#include <dirent.h>
#include <errno.h>
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


void hgctl_stmt_free(stmt_set_t *s) {
  for (size_t i = 0; i < s->n; i++) free(s->f[i].data);
  free(s->f);
  memset(s, 0, sizeof *s);
}

/* A statement's text (malloc'd, NUL-terminated, len without the NUL). */
typedef struct sbuf {
  char *p;
  size_t len;
} sbuf_t;

/* Writes the statement of account (all instruments when instrument is
 * HG_CLR_NO_INSTRUMENT) from entries e[0..n) with the clearing library's
 * writer (hg_clearing_statement_of), so that a what-if that changed entries
 * prints the same way as the ledger would. 0, HG_EOVERFLOW or -ENOMEM. */
static int write_statement(const hg_ledger_entry_t *e, size_t n, hg_account_t account,
                           uint32_t instrument, bool json, sbuf_t *b) {
  size_t len = 0;
  int rc = hg_clearing_statement_of(e, n, account, instrument, json, NULL, 0, &len);
  if (rc != HG_ERANGE) return rc < 0 ? rc : HG_ECORRUPT; /* an empty text has a header */
  char *p = malloc(len + 1);
  if (p == NULL) return -ENOMEM;
  rc = hg_clearing_statement_of(e, n, account, instrument, json, p, len + 1, &len);
  if (rc != 0) {
    free(p);
    return rc;
  }
  b->p = p;
  b->len = len;
  return 0;
}

int hgctl_statement_print(const hg_ledger_entry_t *e, size_t n, uint32_t account,
                          uint32_t instrument, bool json, FILE *out) {
  sbuf_t b = {0};
  int rc = write_statement(e, n, account, instrument, json, &b);
  if (rc == 0 && b.len > 0 && fwrite(b.p, 1, b.len, out) != b.len) rc = -EIO;
  if (rc == 0 && fflush(out) != 0) rc = -EIO;
  free(b.p);
  return rc;
}

int hgctl_statement_print_usd(const hg_ledger_entry_t *e, size_t n, uint32_t account,
                              uint32_t instrument, bool json,
                              const char *(*sym)(const void *ctx, uint32_t id), const void *ctx,
                              FILE *out) {
  static const hgctl_col_t cols[] = {
      {"index", 0},  {"seq", 0},         {"time_utc", 1},    {"account", 0},
      {"instrument", 0}, {"symbol", 1},  {"kind", 1},        {"amount_usd", 0},
      {"balance_usd", 0}, {"price_usd", 0}, {"qty", 0}};
  static const char *const kinds[] = {"?", "DEPOSIT", "WITHDRAWAL", "VM", "FINAL", "FEE"};
  hgctl_table_t t;
  hgctl_table_start(&t, out, json ? HGCTL_OUT_JSON : HGCTL_OUT_CSV, cols,
                    sizeof cols / sizeof cols[0]);
  for (size_t i = 0; i < n; i++) {
    const hg_ledger_entry_t *x = &e[i];
    if (x->account != account ||
        (instrument != HG_CLR_NO_INSTRUMENT && x->instrument != instrument))
      continue;
    bool has_inst = x->instrument != HG_CLR_NO_INSTRUMENT;
    /* price and qty mean something for VM (DSP, position) and FINAL (FSP,
     * position closed) only. */
    bool has_px = x->kind == HG_LEDGER_VM || x->kind == HG_LEDGER_FINAL;
    char idx[24], seq[24], ts[HGCTL_FMT_LEN], acct[16], inst[16], amt[HGCTL_FMT_LEN],
        bal[HGCTL_FMT_LEN], px[HGCTL_FMT_LEN], qty[24];
    snprintf(idx, sizeof idx, "%" PRIu64, x->index);
    snprintf(seq, sizeof seq, "%" PRIu64, x->seq);
    snprintf(acct, sizeof acct, "%" PRIu32, x->account);
    snprintf(inst, sizeof inst, "%" PRIu32, x->instrument);
    snprintf(qty, sizeof qty, "%" PRId64, x->qty);
    const char *sy = has_inst && sym != NULL ? sym(ctx, x->instrument) : NULL;
    const char *v[] = {idx,
                       seq,
                       hgctl_fmt_time(x->ts, ts),
                       acct,
                       has_inst ? inst : NULL,
                       sy,
                       x->kind >= 1 && x->kind <= 5 ? kinds[x->kind] : kinds[0],
                       hgctl_fmt_money(x->amount, amt),
                       hgctl_fmt_money(x->balance, bal),
                       has_px ? hgctl_fmt_price(x->price, px) : NULL,
                       has_px ? qty : NULL};
    hgctl_table_row(&t, v);
  }
  hgctl_table_end(&t);
  return fflush(out) == 0 ? 0 : -EIO;
}

static int collect_ledger(const hg_clearing_t *c, hg_ledger_entry_t **out, size_t *n) {
  uint64_t sz = hg_clearing_ledger_size(c);
  hg_ledger_entry_t *e = malloc((sz ? sz : 1) * sizeof *e);
  if (e == NULL) return -ENOMEM;
  for (uint64_t i = 0; i < sz; i++) {
    int rc = hg_clearing_ledger_get(c, i, &e[i]);
    if (rc != 0) {
      free(e);
      return rc;
    }
  }
  *out = e;
  *n = (size_t)sz;
  return 0;
}

/*
 * What-if FSP: every FINAL entry of an overridden instrument is paid at the
 * new price instead: amount += qty x (FSP' - FSP) x TV, and the balances of
 * that account's later entries move by the same amount. The sum of the
 * changes over accounts is (FSP' - FSP) x TV x (sum of positions closed) = 0.
 * Commands after the expiry are replayed as journaled: a different FSP does
 * not change which later orders or withdrawals would have passed.
 */
static int apply_fsp_overrides(replay_t *rp, hg_ledger_entry_t *e, size_t n) {
  for (size_t k = 0; k < rp->n_fsp; k++) {
    fsp_override_t *o = &rp->fsp[k];
    int64_t tv = 1000000; /* settlement/CONTRACT.md section 1: TV, micro-USD */
    hg_clearing_instrument_info_t ii;
    if (hg_clearing_instrument_info(hgctl_replay_ledger(rp), o->instrument, &ii) == 0 &&
        ii.inst.tick_value > 0)
      tv = ii.inst.tick_value;
    __int128 sum = 0;
    for (size_t i = 0; i < n; i++) {
      if (e[i].kind != HG_LEDGER_FINAL || e[i].instrument != o->instrument) continue;
      o->recorded = e[i].price;
      __int128 d = (__int128)e[i].qty * (o->fsp - e[i].price) * tv;
      __int128 na = (__int128)e[i].amount + d;
      if (na > INT64_MAX || na < INT64_MIN) return HG_EOVERFLOW;
      e[i].amount = (int64_t)na;
      e[i].price = o->fsp;
      sum += d;
      for (size_t j = i; j < n; j++) {
        if (e[j].account != e[i].account) continue;
        __int128 nb = (__int128)e[j].balance + d;
        if (nb > INT64_MAX || nb < INT64_MIN) return HG_EOVERFLOW;
        e[j].balance = (int64_t)nb;
      }
    }
    if (o->recorded == 0) {
      fprintf(stderr, "hgctl replay: instrument %" PRIu32
                      " was never finally settled in this journal; nothing to override (before "
                      "expiry: --project USD --index GPU.GRADE)\n",
              o->instrument);
      return HG_ENOTFOUND;
    }
    if (sum != 0) return HG_ECORRUPT;
    if (rp->out) {
      char b1[HGCTL_FMT_LEN], b2[HGCTL_FMT_LEN], b3[HGCTL_FMT_LEN];
      fprintf(rp->out, "what-if instrument=%" PRIu32 " fsp=%s (journal: %s)\n", o->instrument,
              hgctl_fmt_price_raw(o->fsp, rp->raw, b1),
              hgctl_fmt_price_raw(o->recorded, rp->raw, b2));
      fprintf(rp->out, "what-if final settlement change per account (%s):\n"
                       "  %-10s %10s %10s %10s %18s\n",
              rp->raw ? "micro-USD; prices in ticks" : "USD; prices in USD per GPU-hour",
              "account", "position", "journal", "what-if", "change");
      for (size_t i = 0; i < n; i++) {
        if (e[i].kind != HG_LEDGER_FINAL || e[i].instrument != o->instrument) continue;
        __int128 d = (__int128)e[i].qty * (o->fsp - o->recorded) * tv;
        fprintf(rp->out, "  %-10" PRIu32 " %10" PRId64 " %10s %10s %18s\n", e[i].account, e[i].qty,
                hgctl_fmt_price_raw(o->recorded, rp->raw, b1),
                hgctl_fmt_price_raw(o->fsp, rp->raw, b2),
                d > INT64_MAX || d < INT64_MIN ? "overflow"
                                               : hgctl_fmt_money_raw((int64_t)d, rp->raw, b3));
      }
    }
  }
  return 0;
}

static int add_file(stmt_set_t *s, const char *name, sbuf_t *b) {
  stmt_file_t *nf = hg_grow(s->f, &s->cap, sizeof *nf, s->n + 1, 16);
  if (nf == NULL) return -ENOMEM;
  s->f = nf;
  stmt_file_t *f = &s->f[s->n++];
  snprintf(f->name, sizeof f->name, "%s", name);
  f->data = b->p ? b->p : calloc(1, 1);
  f->len = b->len;
  memset(b, 0, sizeof *b);
  return f->data ? 0 : -ENOMEM;
}

static void collect_account(void *ctx, const hg_exchange_account_info_t *info) {
  acct_list_t *l = ctx;
  if (l->err != 0) return;
  hg_account_t *ni = hg_grow(l->id, &l->cap, sizeof *ni, l->n + 1, 64);
  if (ni == NULL) {
    l->err = -ENOMEM;
    return;
  }
  l->id = ni;
  l->id[l->n++] = info->id;
}

int hgctl_replay_accounts(const replay_t *rp, acct_list_t *out) {
  memset(out, 0, sizeof *out);
  hg_exchange_foreach_account(rp->ex, collect_account, out);
  if (out->err != 0) {
    free(out->id);
    memset(out, 0, sizeof *out);
    return -ENOMEM;
  }
  return 0;
}

/*
 * Every statement of the replayed ledger: for each account (id order)
 * account-<A>.csv/.json with all its entries, and for each instrument it has
 * entries of, account-<A>-instrument-<I>.csv/.json.
 */
int hgctl_stmt_build(replay_t *rp, stmt_set_t *set) {
  hg_ledger_entry_t *e = NULL;
  size_t n = 0;
  int rc = collect_ledger(hgctl_replay_ledger(rp), &e, &n);
  if (rc != 0) return rc;
  if ((rc = apply_fsp_overrides(rp, e, n)) != 0) goto out;
  acct_list_t al = {0};
  if ((rc = hgctl_replay_accounts(rp, &al)) != 0) goto out_al;
  uint32_t *insts = NULL;
  for (size_t a = 0; a < al.n && rc == 0; a++) {
    hg_account_t id = al.id[a];
    char name[96];
    for (int json = 0; json < 2 && rc == 0; json++) {
      sbuf_t b = {0};
      rc = write_statement(e, n, id, HG_CLR_NO_INSTRUMENT, json, &b);
      snprintf(name, sizeof name, "account-%" PRIu32 ".%s", id, json ? "json" : "csv");
      if (rc == 0) rc = add_file(set, name, &b);
      free(b.p);
    }
    /* instruments of this account, in order of first entry */
    size_t ni = 0;
    free(insts);
    insts = malloc((n ? n : 1) * sizeof *insts);
    if (insts == NULL) {
      rc = -ENOMEM;
      break;
    }
    for (size_t i = 0; i < n; i++) {
      if (e[i].account != id || e[i].instrument == HG_CLR_NO_INSTRUMENT) continue;
      size_t k = 0;
      while (k < ni && insts[k] != e[i].instrument) k++;
      if (k == ni) insts[ni++] = e[i].instrument;
    }
    for (size_t k = 0; k < ni && rc == 0; k++) {
      for (int json = 0; json < 2 && rc == 0; json++) {
        sbuf_t b = {0};
        rc = write_statement(e, n, id, insts[k], json, &b);
        snprintf(name, sizeof name, "account-%" PRIu32 "-instrument-%" PRIu32 ".%s", id, insts[k],
                 json ? "json" : "csv");
        if (rc == 0) rc = add_file(set, name, &b);
        free(b.p);
      }
    }
  }
  free(insts);
out_al:
  free(al.id);
out:
  free(e);
  return rc;
}

/* Is path inside dir (or dir itself)? Both must exist. */
bool hgctl_path_inside(const char *path, const char *dir) {
  char rp[PATH_MAX], rd[PATH_MAX];
  if (realpath(path, rp) == NULL || realpath(dir, rd) == NULL) return false;
  size_t n = strlen(rd);
  return strncmp(rp, rd, n) == 0 && (rp[n] == '\0' || rp[n] == '/');
}

int hgctl_stmt_write(const stmt_set_t *set, const char *dir) {
  if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
    fprintf(stderr, "hgctl replay: cannot create %s: %s\n", dir, strerror(errno));
    return -errno;
  }
  for (size_t i = 0; i < set->n; i++) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, set->f[i].name);
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(set->f[i].data, 1, set->f[i].len, f) != set->f[i].len) {
      fprintf(stderr, "hgctl replay: cannot write %s: %s\n", path, strerror(errno));
      if (f) fclose(f);
      return -EIO;
    }
    if (fclose(f) != 0) return -EIO;
  }
  return 0;
}

/* The extension of a statement file name (".csv" or ".json"), or NULL. */
static const char *stmt_ext(const char *n) {
  size_t l = strlen(n);
  if (l > 4 && strcmp(n + l - 4, ".csv") == 0) return n + l - 4;
  if (l > 5 && strcmp(n + l - 5, ".json") == 0) return n + l - 5;
  return NULL;
}

static bool is_statement_name(const char *n) {
  return strncmp(n, "account-", 8) == 0 && stmt_ext(n) != NULL;
}

/*
 * The month scenario's name of a per-contract statement,
 * "<account>-<SYMBOL>.csv" or ".json" (daemon/scenario.c): 0 with the
 * replay's name of the same statement in out (account-<A>-instrument-<I>),
 * *account and *instrument; HG_EPARSE if name is not of that form,
 * HG_ENOTFOUND if the replay never listed that symbol.
 */
static int scenario_name(const replay_t *rp, const char *name, char out[96], hg_account_t *account,
                         uint32_t *instrument) {
  const char *ext = stmt_ext(name), *dash = strchr(name, '-');
  if (ext == NULL || dash == NULL || dash == name || dash > ext) return HG_EPARSE;
  char num[16], sym[HG_SYMBOL_MAX + 1];
  size_t nl = (size_t)(dash - name), sl = (size_t)(ext - dash - 1);
  if (nl >= sizeof num || sl == 0 || sl >= sizeof sym) return HG_EPARSE;
  memcpy(num, name, nl);
  num[nl] = '\0';
  memcpy(sym, dash + 1, sl);
  sym[sl] = '\0';
  int64_t a;
  if (!hgctl_parse_i64(num, 1, UINT32_MAX, &a)) return HG_EPARSE;
  const char *known = NULL;
  for (size_t k = rp->n_syms; k-- > 0 && known == NULL;)
    if (strcmp(rp->syms[k].symbol, sym) == 0) {
      known = rp->syms[k].symbol;
      *instrument = rp->syms[k].id;
    }
  if (known == NULL) return HG_ENOTFOUND;
  *account = (hg_account_t)a;
  snprintf(out, 96, "account-%" PRIu32 "-instrument-%" PRIu32 "%s", *account, *instrument, ext);
  return 0;
}

/* Prints up to 5 differing lines of two texts. */
static void print_line_diff(const char *name, const char *a, size_t al, const char *b, size_t bl) {
  printf("DIFF %s\n", name);
  const char *pa = a, *pb = b, *ea = a + al, *eb = b + bl;
  unsigned line = 1, shown = 0;
  while ((pa < ea || pb < eb) && shown < 5) {
    const char *na = pa < ea ? memchr(pa, '\n', (size_t)(ea - pa)) : NULL;
    const char *nb = pb < eb ? memchr(pb, '\n', (size_t)(eb - pb)) : NULL;
    size_t la = pa < ea ? (size_t)((na ? na : ea) - pa) : 0;
    size_t lb = pb < eb ? (size_t)((nb ? nb : eb) - pb) : 0;
    bool ha = pa < ea, hb = pb < eb;
    if (ha != hb || la != lb || memcmp(pa, pb, la) != 0) {
      printf("  line %u\n    recorded: %s%.*s\n    replayed: %s%.*s\n", line,
             ha ? "" : "(none)", (int)(la > 300 ? 300 : la), pa, hb ? "" : "(none)",
             (int)(lb > 300 ? 300 : lb), pb);
      shown++;
    }
    pa = ha ? (na ? na + 1 : ea) : ea;
    pb = hb ? (nb ? nb + 1 : eb) : eb;
    line++;
  }
}

/* Compares the produced set with a directory of recorded statement files
 * (account-*.csv / account-*.json). Returns the number of differences, or a
 * negative error. */
long hgctl_stmt_compare(const replay_t *rp, const stmt_set_t *set, const char *dir) {
  DIR *d = opendir(dir);
  if (d == NULL) {
    fprintf(stderr, "hgctl replay: cannot open recorded statements %s: %s\n", dir,
            strerror(errno));
    return -errno;
  }
  long diffs = 0;
  bool *seen = calloc(set->n ? set->n : 1, sizeof *seen);
  if (seen == NULL) {
    closedir(d);
    return -ENOMEM;
  }
  /* readdir order is arbitrary: collect and sort names for stable output */
  char **names = NULL;
  size_t nn = 0, nc = 0;
  struct dirent *de;
  bool replay_names = false;
  while ((de = readdir(d)) != NULL) {
    char alias[96];
    hg_account_t a;
    uint32_t in;
    if (is_statement_name(de->d_name)) replay_names = true;
    else if (scenario_name(rp, de->d_name, alias, &a, &in) == HG_EPARSE) continue;
    char **x = hg_grow(names, &nc, sizeof *x, nn + 1, 32);
    if (x == NULL) break;
    names = x;
    names[nn++] = strdup(de->d_name);
  }
  closedir(d);
  for (size_t i = 1; i < nn; i++)
    for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
      char *t = names[j];
      names[j] = names[j - 1];
      names[j - 1] = t;
    }
  for (size_t i = 0; i < nn; i++) {
    if (names[i] == NULL) continue;
    /* A scenario name stands for the replay's per-contract file. */
    const char *want = names[i];
    char alias[96];
    hg_account_t acct = 0;
    uint32_t inst = 0;
    bool scen = !is_statement_name(names[i]);
    if (scen && scenario_name(rp, names[i], alias, &acct, &inst) == 0) want = alias;
    size_t k = 0;
    while (k < set->n && strcmp(set->f[k].name, want) != 0) k++;
    /* An account with no entry in the contract has an empty statement,
     * which the replay writes only for the scenario's names. */
    sbuf_t empty = {0};
    hg_clearing_account_info_t ai;
    if (k == set->n && want == alias &&
        hg_clearing_account_info(hgctl_replay_ledger(rp), acct, &ai) == 0 &&
        write_statement(NULL, 0, acct, inst, strcmp(stmt_ext(alias), ".json") == 0, &empty) != 0)
      empty.p = NULL;
    if (k == set->n && empty.p == NULL) {
      printf("MISSING %s: recorded, not produced by the replay\n", names[i]);
      diffs++;
      free(names[i]);
      continue;
    }
    const char *data = empty.p ? empty.p : set->f[k].data;
    size_t dlen = empty.p ? empty.len : set->f[k].len;
    if (empty.p == NULL) seen[k] = true;
    char path[PATH_MAX], *buf = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    int rc = hgctl_read_file(path, &buf, &len);
    if (rc != 0) {
      printf("UNREADABLE %s: %s\n", names[i], hg_strerror(rc));
      diffs++;
    } else if (len != dlen || memcmp(buf, data, len) != 0) {
      print_line_diff(names[i], buf, len, data, dlen);
      diffs++;
    }
    free(empty.p);
    free(buf);
    free(names[i]);
  }
  free(names);
  for (size_t k = 0; k < set->n; k++) {
    /* Against the scenario's names only per-contract files are expected. */
    if (!seen[k] && (replay_names || strstr(set->f[k].name, "-instrument-") != NULL)) {
      printf("EXTRA %s: produced by the replay, not recorded\n", set->f[k].name);
      diffs++;
    }
  }
  free(seen);
  return diffs;
}

/* --------------------------------------------------------- statement */

static void statement_usage(FILE *o) {
  fputs(
      "usage: hgctl statement --data DIR --account A [--instrument I] [--format csv|json]\n"
      "                       [--trades] [capacities]\n"
      "  Replays the data directory's journal (read-only) and prints account A's\n"
      "  statement: every cash movement (deposits, withdrawals, variation margin,\n"
      "  final settlement, fees), oldest first, with the balance after each; only\n"
      "  those of instrument I with --instrument. CSV (default) or JSON, in the\n"
      "  ledger's units (micro-USD, ticks, ns, instrument ids: what a replay\n"
      "  compares byte for byte).\n"
      "  --usd          instead in USD, USD per GPU-hour, UTC times and symbols:\n"
      "                 index,seq,time_utc,account,instrument,symbol,kind,amount_usd,\n"
      "                 balance_usd,price_usd,qty (price and qty: VM and FINAL only;\n"
      "                 with --remote the symbol of a contract no longer listed is empty)\n"
      "  --trades       instead, the account's trades (CSV): trade_id (seq.k, as\n"
      "                 in replay --fills),seq,time_utc,instrument,symbol,side,\n"
      "                 aggressor (yes: the account's order took liquidity),\n"
      "                 price_usd,qty,position_after, and settled_by_index and\n"
      "                 settled_by_seq: the statement entry (VM or FINAL) whose\n"
      "                 amount includes the trade, empty while none has\n" CAPS_HELP
      "   or: hgctl statement --remote [--account N] [--instrument I] [--format csv|json] [--usd]\n"
      "  The same statement of the own account from the gateway (risk viewers:\n"
      "  --account of the own firm); 'hgctl statement --remote --help' for the\n"
      "  connection options.\n",
      o);
}

/* The account's trades (rp->trades), each with the ledger entry that
 * settled it: the account's first VM or FINAL entry of the instrument
 * posted by a later command. */
static int print_trades(const replay_t *rp, uint32_t instrument, FILE *o) {
  hg_ledger_entry_t *e = NULL;
  size_t n = 0;
  int rc = collect_ledger(hgctl_replay_ledger(rp), &e, &n);
  if (rc != 0) return rc;
  fputs("trade_id,seq,time_utc,instrument,symbol,side,aggressor,price_usd,qty,position_after,"
        "settled_by_index,settled_by_seq\n",
        o);
  size_t from = 0; /* trades are in seq order, so the settling entry only moves on */
  for (size_t t = 0; t < rp->n_trades; t++) {
    const trade_t *x = &rp->trades[t];
    if (instrument != HG_CLR_NO_INSTRUMENT && x->instrument != instrument) continue;
    while (from < n && e[from].seq <= x->seq) from++;
    size_t k = from;
    while (k < n && !(e[k].account == rp->trades_of && e[k].instrument == x->instrument &&
                      (e[k].kind == HG_LEDGER_VM || e[k].kind == HG_LEDGER_FINAL)))
      k++;
    char ts[HGCTL_FMT_LEN], px[HGCTL_FMT_LEN], by[48] = ",";
    if (k < n) snprintf(by, sizeof by, "%" PRIu64 ",%" PRIu64, e[k].index, e[k].seq);
    const char *sym = hgctl_replay_symbol(rp, x->instrument);
    fprintf(o, "%" PRIu64 ".%" PRIu32 ",%" PRIu64 ",%s,%" PRIu32 ",%s,%s,%s,%s,%" PRId64 ",%" PRId64
               ",%s\n",
            x->seq, x->k, x->seq, hgctl_fmt_time(x->ts, ts), x->instrument, sym ? sym : "",
            x->side == HG_SIDE_BUY ? "buy" : "sell", x->aggressor ? "yes" : "no",
            hgctl_fmt_price(x->price, px), x->qty, x->pos_after, by);
  }
  free(e);
  return 0;
}

static const char *replay_sym(const void *ctx, uint32_t id) {
  return hgctl_replay_symbol(ctx, id);
}

int hgctl_statement(int argc, char **argv) {
  for (int i = 0; i < argc; i++)
    if (strcmp(argv[i], "--remote") == 0) return hgctl_statement_remote(argc, argv);
  const char *data = NULL, *acct_s = NULL, *inst_s = NULL, *fmt = NULL, *mi = NULL, *ma = NULL,
             *mo = NULL;
  bool trades = false, usd = false;
  const hgctl_opt_t opts[] = {{"--data", &data, NULL},
                        {"--account", &acct_s, NULL},
                        {"--instrument", &inst_s, NULL},
                        {"--format", &fmt, NULL},
                        {"--max-instruments", &mi, NULL},
                        {"--max-accounts", &ma, NULL},
                        {"--max-book-orders", &mo, NULL},
                        {"--trades", NULL, &trades},
                        {"--usd", NULL, &usd}};
  int rc = hgctl_parse_opts("statement", argc, argv, opts, 9, statement_usage);
  if (rc != 0) return rc < 0 ? 0 : rc;
  if (!data || !acct_s) {
    fprintf(stderr, "hgctl statement: missing %s\n", !data ? "--data" : "--account");
    statement_usage(stderr);
    return EXIT_USAGE;
  }
  int64_t acct, inst = HG_CLR_NO_INSTRUMENT;
  if (!hgctl_parse_i64(acct_s, 1, UINT32_MAX, &acct)) {
    fprintf(stderr, "hgctl statement: --account '%s' must be an account id >= 1\n", acct_s);
    return EXIT_USAGE;
  }
  if (inst_s && !hgctl_parse_i64(inst_s, 1, UINT32_MAX - 1, &inst)) {
    fprintf(stderr, "hgctl statement: --instrument '%s' must be an instrument id >= 1\n", inst_s);
    return EXIT_USAGE;
  }
  bool json = false;
  if (fmt && strcmp(fmt, "json") == 0) json = true;
  else if (fmt && strcmp(fmt, "csv") != 0) {
    fprintf(stderr, "hgctl statement: --format must be csv or json\n");
    return EXIT_USAGE;
  }
  if (trades && (json || usd)) {
    fprintf(stderr, "hgctl statement: --trades is CSV only, in USD already\n");
    return EXIT_USAGE;
  }
  replay_t rp;
  hgctl_replay_init(&rp);
  rp.data_dir = data;
  if (trades) rp.trades_of = (hg_account_t)acct;
  if ((rc = hgctl_parse_caps("statement", mi, ma, mo, &rp.xcfg)) != 0) return rc;
  int status = EXIT_INPUT;
  if (hgctl_replay_run(&rp, false) != 0) goto out;
  const hg_clearing_t *c = hgctl_replay_ledger(&rp);
  hg_clearing_account_info_t ai;
  if (hg_clearing_account_info(c, (hg_account_t)acct, &ai) != 0) {
    fprintf(stderr, "hgctl statement: account %" PRId64 " does not exist in %s (replayed to seq %" PRIu64 ")\n",
            acct, data, hg_exchange_last_seq(rp.ex));
    goto out;
  }
  if (trades) {
    rc = print_trades(&rp, (uint32_t)inst, stdout);
    if (rc != 0) fprintf(stderr, "hgctl statement: %s\n", hg_strerror(rc));
    status = rc == 0 && fflush(stdout) == 0 ? 0 : EXIT_INPUT;
    goto out;
  }
  if (usd) {
    hg_ledger_entry_t *le = NULL;
    size_t ln = 0;
    rc = collect_ledger(c, &le, &ln);
    if (rc == 0)
      rc = hgctl_statement_print_usd(le, ln, (uint32_t)acct, (uint32_t)inst, json, replay_sym,
                                     &rp, stdout);
    free(le);
  } else {
    rc = json ? hg_clearing_statement_json_file(c, (hg_account_t)acct, (uint32_t)inst, stdout)
              : hg_clearing_statement_csv_file(c, (hg_account_t)acct, (uint32_t)inst, stdout);
  }
  if (rc != 0) {
    fprintf(stderr, "hgctl statement: %s\n", hg_strerror(rc));
    goto out;
  }
  status = fflush(stdout) == 0 ? 0 : EXIT_INPUT;
out:
  hgctl_replay_dispose(&rp);
  return status;
}

