/*
 * hgctl_op.c - the operator's commands (`hgctl op ...`): daily and final
 * settlement, expiry, index fixings and samples, listing and delisting,
 * halt and resume, accounts, deposits and withdrawals, end of session, and
 * API keys, a cluster's membership (status, add, remove, leadership
 * transfer). Each
 * sends one operator command on an operator key's session (hgctl_net.c)
 * and prints its Response or SettlementResult as one "KEY=value" line.
 */
#include "hgctl_args.h"
#include "hgctl_fmt.h"
#include "hgctl_net.h"
#include "hgctl_net_util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hourglass/civil.h"
#include "hourglass/error.h"
#include "hourglass/hmac.h"

/* Waits for the SettlementResult of seq and prints it as KEY=value; a
 * refusal (or a role reject Response) goes to stderr first. 0 or
 * EXIT_FAIL. */
static int settle_reply(const char *cmd, hg_client_t *c, uint64_t seq) {
  const env_t *e = NULL;
  for (;;) {
    int rc = net_await_reply(cmd, c, seq, &e);
    if (rc != 0) return rc;
    if (e->body_case == BODY(RESPONSE)) return net_response_status(cmd, e);
    if (e->body_case == BODY(SETTLEMENT_RESULT) && e->settlement_result->ref_seq == seq) break;
  }
  const Hourglass__V1__SettlementResult *r = e->settlement_result;
  /* A refusal's reason first (a person reads it before the record). */
  if (r->reason != 0) {
    fprintf(stderr, "hgctl %s: refused: %s (%u)%s%s\n", cmd, net_reject_name(r->reason), r->reason,
            r->text ? ": " : "", r->text ? r->text : "");
    fflush(stderr);
  }
  char day[11] = "";
  if (r->has_day) hg_index_day_format(r->day, day);
  if (net_raw) printf("RESULT command=%u", r->command);
  else printf("RESULT command=%s", net_command_name(r->command));
  printf(" reason=%s(%u) engine_seq=%" PRIu64, net_reject_name(r->reason), r->reason, r->engine_seq);
  if (r->has_day) printf(" day=%s", day);
  if (r->has_samples_accepted)
    printf(" samples_accepted=%u samples_staged=%u", r->samples_accepted, r->samples_staged);
  if (r->has_samples_discarded) printf(" samples_discarded=%u", r->samples_discarded);
  if (r->has_fixing_value && net_raw)
    printf(" fixing=%s tier=%u status=%u kind=%u outcome=%u inputs=%u", net_index_usd(r->fixing_value),
           r->fixing_tier, r->fixing_status, r->fixing_kind, r->fixing_outcome, r->fixing_inputs);
  else if (r->has_fixing_value)
    printf(" fixing=%s tier=%u status=%s kind=%s outcome=%s inputs=%u", net_index_usd(r->fixing_value),
           r->fixing_tier, net_fixing_status_name(r->fixing_status), net_fixing_kind_name(r->fixing_kind),
           net_fixing_outcome_name(r->fixing_outcome), r->fixing_inputs);
  if (r->has_contracts_settled)
    printf(" contracts=%u vm_sum=%s vm_paid=%s vm_received=%s vm_entries=%u day_orders_expired=%" PRId64,
           r->contracts_settled, net_usd(r->vm_sum), net_usd(r->vm_paid), net_usd(r->vm_received), r->vm_entries,
           r->day_orders_expired);
  if (r->has_fsp)
    printf(" instrument=%u fsp=%s positions_closed=%u final_sum=%s", r->instrument_id, net_px(r->fsp),
           r->positions_closed, net_usd(r->final_sum));
  if (r->error) printf(" error=%d", r->error);
  printf("\n");
  for (size_t i = 0; i < r->n_contracts; i++) {
    if (r->contracts[i]->tier == 0)
      printf("DSP instrument=%u %s\n", r->contracts[i]->instrument_id, HGCTL_DSP_SKIPPED);
    else
      printf("DSP instrument=%u dsp=%s tier=%u\n", r->contracts[i]->instrument_id,
             net_px(r->contracts[i]->dsp), r->contracts[i]->tier);
  }
  for (size_t i = 0; i < r->n_missing; i++) {
    hg_index_day_format(r->missing[i]->day, day);
    if (net_raw) printf("MISSING day=%s status=%u\n", day, r->missing[i]->status);
    else printf("MISSING day=%s status=%s\n", day, net_fixing_status_name(r->missing[i]->status));
  }
  for (size_t i = 0; i < r->n_listed; i++) printf("LISTED instrument=%u\n", r->listed[i]);
  fflush(stdout);
  return r->reason != 0 ? EXIT_FAIL : 0;
}

static int parse_day(const char *cmd, const char *s, int32_t *day) {
  if (s == NULL || !hg_civil_parse_date(s, strlen(s), day)) {
    fprintf(stderr, "hgctl %s: --day must be YYYY-MM-DD\n", cmd);
    return EXIT_USAGE;
  }
  return 0;
}

int hgctl_op_settle(int argc, char **argv) {
  const char *cmd = "op settle", *day_s = NULL;
  const opt_t opts[] = {CONN_OPTS, {"day", &day_s, NULL}};
  int rc = net_parse(cmd, argc, argv, opts, sizeof opts / sizeof opts[0], NULL, 0,
                     "op settle --day YYYY-MM-DD   (the 16:00 UTC daily cycle of that day)\n");
  int32_t day = 0;
  if (rc || (rc = parse_day(cmd, day_s, &day))) return rc;
  hg_client_t *c = NULL;
  if ((rc = net_open_session(cmd, &c))) return rc;
  uint64_t seq = 0;
  rc = hg_client_daily_settlement(c, day, &seq);
  rc = rc == 0 ? settle_reply(cmd, c, seq) : EXIT_FAIL;
  net_close_session(c);
  return rc;
}

int hgctl_op_mark(int argc, char **argv) {
  const char *cmd = "op mark";
  const opt_t opts[] = {CONN_OPTS};
  int rc = net_parse(cmd, argc, argv, opts, sizeof opts / sizeof opts[0], NULL, 0,
                     "op mark   (a mark round: calls and liquidations)\n");
  if (rc) return rc;
  hg_client_t *c = NULL;
  if ((rc = net_open_session(cmd, &c))) return rc;
  uint64_t seq = 0;
  rc = hg_client_mark(c, &seq);
  rc = rc == 0 ? settle_reply(cmd, c, seq) : EXIT_FAIL;
  net_close_session(c);
  return rc;
}

int hgctl_op_fund(int argc, char **argv) {
  const char *cmd = "op fund", *amount = NULL;
  const opt_t opts[] = {CONN_OPTS, {"amount", &amount, NULL}};
  int rc = net_parse(cmd, argc, argv, opts, sizeof opts / sizeof opts[0], NULL, 0,
                     "op fund --amount USD   (a deposit into the insurance fund)\n");
  int64_t a = 0;
  if (rc || (rc = net_need_money(cmd, "amount", amount, &a))) return rc;
  hg_client_t *c = NULL;
  if ((rc = net_open_session(cmd, &c))) return rc;
  uint64_t seq = 0;
  rc = hg_client_fund_deposit(c, a, &seq);
  rc = rc == 0 ? settle_reply(cmd, c, seq) : EXIT_FAIL;
  net_close_session(c);
  return rc;
}

/* op expire, op delist: one instrument, by id or symbol, one request. */
typedef int (*instrument_send_fn)(hg_client_t *c, uint32_t instrument_id, uint64_t *seq);
typedef int (*instrument_reply_fn)(const char *cmd, hg_client_t *c, uint64_t seq);

/* The instrument of an operator command: --instrument, as for orders, or
 * the same value as its one positional argument. */
static int which_instrument(const char *cmd, const char *opt, const char *pos,
                            const char **out) {
  if (opt != NULL && pos != NULL) {
    fprintf(stderr, "hgctl %s: give the instrument once (--instrument or positional)\n", cmd);
    return EXIT_USAGE;
  }
  *out = opt != NULL ? opt : pos;
  if (*out == NULL) {
    fprintf(stderr, "hgctl %s: which instrument? (--instrument ID|SYMBOL)\n", cmd);
    return EXIT_USAGE;
  }
  return 0;
}

static int op_on_instrument(int argc, char **argv, const char *cmd, const char *usage,
                            instrument_send_fn send, instrument_reply_fn reply) {
  const char *pos[1] = {NULL}, *instr = NULL;
  const opt_t opts[] = {CONN_OPTS, {"instrument", &instr, NULL}};
  int rc = net_parse(cmd, argc, argv, opts, sizeof opts / sizeof opts[0], pos, 1, usage);
  if (rc || (rc = which_instrument(cmd, instr, pos[0], &pos[0]))) return rc;
  hg_client_t *c = NULL;
  if ((rc = net_open_session(cmd, &c))) return rc;
  uint32_t id = 0;
  uint64_t seq = 0;
  rc = net_resolve_instrument(cmd, c, pos[0], &id);
  if (rc == 0) rc = send(c, id, &seq) == 0 ? reply(cmd, c, seq) : EXIT_FAIL;
  net_close_session(c);
  return rc;
}

int hgctl_op_expire(int argc, char **argv) {
  return op_on_instrument(argc, argv, "op expire",
                          "op expire --instrument ID|SYMBOL   (final settlement after the last\n"
                          "  trading day; 'op expire ID|SYMBOL' also works)\n",
                          hg_client_expire, settle_reply);
}

int hgctl_op_fixing(int argc, char **argv) {
  const char *cmd = "op fixing", *pos[1] = {NULL}, *gpu = NULL, *grade = NULL, *day_s = NULL,
             *value = NULL, *source = NULL;
  const opt_t opts[] = {CONN_OPTS,          {"gpu", &gpu, NULL},       {"grade", &grade, NULL},
                        {"day", &day_s, NULL}, {"value", &value, NULL}, {"source", &source, NULL}};
  const char *usage =
      "op fixing compute|finalize|publish|discard --gpu GPU --grade G --day YYYY-MM-DD\n"
      "  publish also: --value USD_PER_GPU_HOUR (6 decimals) --source NAME (an external\n"
      "  fixing)\n";
  int rc = net_parse(cmd, argc, argv, opts, sizeof opts / sizeof opts[0], pos, 1, usage);
  int32_t day = 0;
  if (rc || (rc = parse_day(cmd, day_s, &day))) return rc;
  const char *verb = pos[0] ? pos[0] : "";
  int64_t v = 0;
  bool publish = strcmp(verb, "publish") == 0;
  if (!publish && strcmp(verb, "compute") != 0 && strcmp(verb, "finalize") != 0 &&
      strcmp(verb, "discard") != 0) {
    fprintf(stderr, "usage: hgctl %s", usage);
    return EXIT_USAGE;
  }
  if (gpu == NULL || grade == NULL) {
    fprintf(stderr, "hgctl %s: --gpu and --grade are required\n", cmd);
    return EXIT_USAGE;
  }
  if (publish && ((rc = net_need_money(cmd, "value", value, &v)) != 0)) return rc;
  if (publish && source == NULL) {
    fprintf(stderr, "hgctl %s: publish needs --source\n", cmd);
    return EXIT_USAGE;
  }
  hg_client_t *c = NULL;
  if ((rc = net_open_session(cmd, &c))) return rc;
  uint64_t seq = 0;
  if (publish) rc = hg_client_publish_fixing(c, gpu, grade, day, v, source, &seq);
  else if (verb[0] == 'c') rc = hg_client_compute_fixing(c, gpu, grade, day, &seq);
  else if (verb[0] == 'f') rc = hg_client_finalize_fixing(c, gpu, grade, day, &seq);
  else rc = hg_client_discard_samples(c, gpu, grade, day, &seq);
  rc = rc == 0 ? settle_reply(cmd, c, seq) : EXIT_FAIL;
  net_close_session(c);
  return rc;
}

int hgctl_op_samples(int argc, char **argv) {
  const char *cmd = "op samples", *file = NULL, *gpu = NULL, *grade = NULL, *day_s = NULL;
  bool allow = false;
  const opt_t opts[] = {CONN_OPTS,           {"file", &file, NULL},
                        {"gpu", &gpu, NULL}, {"grade", &grade, NULL},
                        {"day", &day_s, NULL}, {"allow-rejected", NULL, &allow}};
  const char *usage =
      "op samples --file SAMPLES.csv --gpu GPU --grade G --day YYYY-MM-DD [--allow-rejected]\n"
      "  stages the file's samples for that day's fixing (several messages if needed);\n"
      "  rejected CSV lines are listed with line numbers and nothing is sent, unless\n"
      "  --allow-rejected sends the good lines.\n";
  int rc = net_parse(cmd, argc, argv, opts, sizeof opts / sizeof opts[0], NULL, 0, usage);
  int32_t day = 0;
  if (rc || (rc = parse_day(cmd, day_s, &day))) return rc;
  if (file == NULL || gpu == NULL || grade == NULL) {
    fprintf(stderr, "hgctl %s: --file, --gpu and --grade are required\n", cmd);
    return EXIT_USAGE;
  }
  char *buf = NULL;
  size_t len = 0;
  if ((rc = hgctl_read_file(file, &buf, &len)) != 0) {
    fprintf(stderr, "hgctl %s: %s: %s\n", cmd, file, hg_strerror(rc));
    return EXIT_FAIL;
  }
  hg_index_sample_set_t set;
  memset(&set, 0, sizeof set);
  rc = hg_index_samples_parse(buf, len, &set);
  free(buf);
  if (rc != 0) {
    fprintf(stderr, "hgctl %s: %s\n", cmd, hg_strerror(rc));
    return EXIT_FAIL;
  }
  for (size_t k = 0; k < set.n_errors; k++)
    fprintf(stderr, "hgctl %s: %s:%" PRIu32 ": %s\n", cmd, file, set.errors[k].line,
            hg_index_csv_reason_str(set.errors[k].reason));
  int status = 0;
  if ((set.n_errors > 0 && !allow) || set.n == 0) {
    fprintf(stderr, "hgctl %s: %zu line(s) rejected, %zu good; nothing sent\n", cmd,
            set.n_errors, set.n);
    hg_index_samples_dispose(&set);
    return EXIT_FAIL;
  }
  hg_client_t *c = NULL;
  if ((rc = net_open_session(cmd, &c))) {
    hg_index_samples_dispose(&set);
    return rc;
  }
  size_t sent = 0;
  while (sent < set.n && status == 0) {
    size_t taken = 0;
    uint64_t seq = 0;
    rc = hg_client_publish_samples(c, gpu, grade, day, set.samples + sent, set.n - sent, &taken,
                                   &seq);
    if (rc != 0) {
      fprintf(stderr, "hgctl %s: %s\n", cmd, hg_strerror(rc));
      status = EXIT_FAIL;
      break;
    }
    printf("MESSAGE lines=%" PRIu32 "..%" PRIu32 " samples=%zu\n", set.lines[sent],
           set.lines[sent + taken - 1], taken);
    status = settle_reply(cmd, c, seq);
    sent += taken;
  }
  net_close_session(c);
  hg_index_samples_dispose(&set);
  return status;
}

/* halt, resume, add-account, deposit: one operator command, one Response. */
static int op_simple(const char *verb, int argc, char **argv) {
  char cmd[32];
  snprintf(cmd, sizeof cmd, "op %s", verb);
  const char *pos[1] = {NULL}, *account = NULL, *firm = NULL, *amount = NULL,
             *instrument = NULL;
  bool instr = strcmp(verb, "halt") == 0 || strcmp(verb, "resume") == 0;
  const opt_t opts[] = {CONN_OPTS, {"account", &account, NULL}, {"firm", &firm, NULL},
                        {"amount", &amount, NULL}, {"instrument", &instrument, NULL}};
  char usage[160];
  snprintf(usage, sizeof usage, "%s %s\n", cmd,
           instr ? "--instrument ID|SYMBOL   ('ID|SYMBOL' alone also works)"
           : strcmp(verb, "add-account") == 0 ? "--account N --firm N"
                                              : "--account N --amount USD");
  /* --instrument only for halt and resume. */
  int rc = net_parse(cmd, argc, argv, opts, sizeof opts / sizeof opts[0] - (instr ? 0 : 1), pos,
                     instr ? 1 : 0, usage);
  if (rc) return rc;
  int64_t a = 0, b = 0;
  if (instr && (rc = which_instrument(cmd, instrument, pos[0], &pos[0]))) return rc;
  if (!instr) {
    if ((rc = net_need_num(cmd, "account", account, 1, UINT32_MAX, &a))) return rc;
    if (strcmp(verb, "add-account") == 0) rc = net_need_num(cmd, "firm", firm, 1, UINT32_MAX, &b);
    else rc = net_need_money(cmd, "amount", amount, &b);
    if (rc) return rc;
  }
  hg_client_t *c = NULL;
  if ((rc = net_open_session(cmd, &c))) return rc;
  uint64_t seq = 0;
  uint32_t id = 0;
  if (instr) {
    rc = net_resolve_instrument(cmd, c, pos[0], &id);
    if (rc == 0) rc = hg_client_halt(c, id, verb[0] == 'r', &seq);
  } else if (strcmp(verb, "add-account") == 0) {
    rc = hg_client_add_account(c, (uint32_t)a, (uint32_t)b, &seq);
  } else {
    rc = hg_client_cash(c, (uint32_t)a, b, false, &seq);
  }
  if (rc == 0) {
    rc = net_op_reply(cmd, verb, c, seq);
  } else if (rc != EXIT_FAIL && rc != EXIT_USAGE) {
    rc = EXIT_FAIL;
  }
  net_close_session(c);
  return rc;
}
int hgctl_op_halt(int argc, char **argv) { return op_simple("halt", argc, argv); }
int hgctl_op_resume(int argc, char **argv) { return op_simple("resume", argc, argv); }
int hgctl_op_add_account(int argc, char **argv) {
  return op_simple("add-account", argc, argv);
}
int hgctl_op_deposit(int argc, char **argv) { return op_simple("deposit", argc, argv); }

int hgctl_op_list(int argc, char **argv) { return net_list_instruments("op list", argc, argv); }

int hgctl_op_end_of_session(int argc, char **argv) {
  const char *cmd = "op end-of-session", *day_s = NULL, *date = NULL;
  const opt_t opts[] = {CONN_OPTS, {"day", &day_s, NULL}, {"date", &date, NULL}};
  int rc = net_parse(cmd, argc, argv, opts, sizeof opts / sizeof opts[0], NULL, 0,
                     "op end-of-session [--day YYYY-MM-DD]   (every DAY order expires)\n");
  if (rc) return rc;
  /* The engine keeps the session date as YYYYMMDD; --day takes the form
   * every other operator command uses, --date the engine's own (kept for
   * scripts written against it). */
  int64_t d = 0;
  if (day_s != NULL && date != NULL) {
    fprintf(stderr, "hgctl %s: give --day or --date, not both\n", cmd);
    return EXIT_USAGE;
  }
  if (day_s != NULL) {
    int32_t day = 0;
    if ((rc = parse_day(cmd, day_s, &day))) return rc;
    hg_civil_t cd = hg_civil_from_day(day);
    d = (int64_t)cd.year * 10000 + cd.month * 100 + cd.day;
  } else if (date != NULL && (rc = net_need_num(cmd, "date", date, 19700101, 99991231, &d))) {
    return rc;
  }
  hg_client_t *c = NULL;
  if ((rc = net_open_session(cmd, &c))) return rc;
  uint64_t seq = 0;
  rc = hg_client_end_of_session(c, (uint32_t)d, &seq);
  rc = rc == 0 ? net_op_reply(cmd, "end-of-session", c, seq) : EXIT_FAIL;
  net_close_session(c);
  return rc;
}

static int delist_reply(const char *cmd, hg_client_t *c, uint64_t seq) {
  return net_op_reply(cmd, "delist", c, seq);
}

int hgctl_op_delist(int argc, char **argv) {
  return op_on_instrument(argc, argv, "op delist",
                          "op delist --instrument ID|SYMBOL   (cancels its orders and removes\n"
                          "  it; 'op delist ID|SYMBOL' also works)\n",
                          hg_client_delist, delist_reply);
}

int hgctl_op_withdraw(int argc, char **argv) {
  const char *cmd = "op withdraw", *account = NULL, *amount = NULL;
  const opt_t opts[] = {CONN_OPTS, {"account", &account, NULL}, {"amount", &amount, NULL}};
  int rc = net_parse(cmd, argc, argv, opts, sizeof opts / sizeof opts[0], NULL, 0,
                     "op withdraw --account N --amount USD\n");
  int64_t a = 0, b = 0;
  if (rc || (rc = net_need_num(cmd, "account", account, 1, UINT32_MAX, &a)) ||
      (rc = net_need_money(cmd, "amount", amount, &b)))
    return rc;
  hg_client_t *c = NULL;
  if ((rc = net_open_session(cmd, &c))) return rc;
  uint64_t seq = 0;
  rc = hg_client_cash(c, (uint32_t)a, b, true, &seq);
  rc = rc == 0 ? net_op_reply(cmd, "withdraw", c, seq) : EXIT_FAIL;
  net_close_session(c);
  return rc;
}

int hgctl_op_list_curve(int argc, char **argv) {
  const char *cmd = "op list-curve", *gpu = NULL, *grade = NULL, *from = NULL, *first = NULL,
             *mo = NULL, *ma = NULL, *ref = NULL;
  const opt_t opts[] = {CONN_OPTS,
                        {"gpu", &gpu, NULL},
                        {"grade", &grade, NULL},
                        {"from", &from, NULL},
                        {"first-id", &first, NULL},
                        {"max-orders", &mo, NULL},
                        {"max-accounts", &ma, NULL},
                        {"ref-price", &ref, NULL}};
  const char *usage = "op list-curve --gpu GPU --grade G --from YYYY-MM --first-id ID\n"
                      "              [--max-orders N (65536)] [--max-accounts N (1024)]\n"
                      "              [--ref-price USD]   (twelve monthly contracts)\n";
  int rc = net_parse(cmd, argc, argv, opts, sizeof opts / sizeof opts[0], NULL, 0, usage);
  if (rc) return rc;
  if (gpu == NULL || grade == NULL) {
    fprintf(stderr, "hgctl %s: --gpu and --grade are required\n", cmd);
    return EXIT_USAGE;
  }
  uint32_t y = 0, m = 0;
  /* twelve months from --from must stay within year 9999 */
  if (from == NULL || !hg_civil_parse_month(from, strlen(from), &y, &m) || y > 9998) {
    fprintf(stderr, "hgctl %s: --from must be YYYY-MM\n", cmd);
    return EXIT_USAGE;
  }
  int64_t id = 0, no = 65536, na = 1024, rp = 0;
  if ((rc = net_need_num(cmd, "first-id", first, 1, UINT32_MAX - 12, &id)) ||
      (mo && (rc = net_need_num(cmd, "max-orders", mo, 1, UINT32_MAX, &no))) ||
      (ma && (rc = net_need_num(cmd, "max-accounts", ma, 1, UINT32_MAX, &na))) ||
      (ref && (rc = net_need_price(cmd, "ref-price", ref, 0, &rp))))
    return rc;
  hg_client_t *c = NULL;
  if ((rc = net_open_session(cmd, &c))) return rc;
  uint64_t seq = 0;
  rc = hg_client_list_curve(c, gpu, grade, y, m, (uint32_t)id, (uint32_t)no, (uint32_t)na, rp,
                            &seq);
  rc = rc == 0 ? settle_reply(cmd, c, seq) : EXIT_FAIL;
  net_close_session(c);
  return rc;
}

/* op cluster: prints the ClusterStatus as a CLUSTER line and one MEMBER
 * line per member; a refusal's reason and text go to stderr first. */
int hgctl_op_cluster(int argc, char **argv) {
  const char *cmd = "op cluster", *pos[3] = {NULL, NULL, NULL};
  const opt_t opts[] = {CONN_OPTS};
  const char *usage =
      "op cluster status                      (members, roles, indexes, lags)\n"
      "  op cluster add ID RAFT_IP:PORT/CLIENT_HOST:PORT   (a node started with cluster.join)\n"
      "  op cluster remove ID                 (not the leader: transfer first)\n"
      "  op cluster transfer [ID]             (planned leader switch; no ID: the most\n"
      "                                        up-to-date voter)\n";
  int rc = net_parse(cmd, argc, argv, opts, sizeof opts / sizeof opts[0], pos, 3, usage);
  if (rc) return rc;
  const char *verb = pos[0] ? pos[0] : "";
  enum {
    STATUS = HOURGLASS__V1__CLUSTER_OP__CLUSTER_STATUS,
    ADD = HOURGLASS__V1__CLUSTER_OP__CLUSTER_ADD,
    REMOVE = HOURGLASS__V1__CLUSTER_OP__CLUSTER_REMOVE,
    TRANSFER = HOURGLASS__V1__CLUSTER_OP__CLUSTER_TRANSFER
  };
  uint32_t op = strcmp(verb, "status") == 0     ? STATUS
                : strcmp(verb, "add") == 0      ? ADD
                : strcmp(verb, "remove") == 0   ? REMOVE
                : strcmp(verb, "transfer") == 0 ? TRANSFER
                                                : 0;
  size_t want_pos = op == STATUS ? 1 : op == ADD ? 3 : 2;
  size_t got = pos[2] ? 3 : pos[1] ? 2 : pos[0] ? 1 : 0;
  if (op == 0 || got > want_pos || (op != TRANSFER && got < want_pos)) {
    fprintf(stderr, "usage: hgctl %s", usage);
    return EXIT_USAGE;
  }
  int64_t id = 0;
  if (pos[1] != NULL && (rc = net_need_num(cmd, "ID", pos[1], 1, 16, &id))) return rc;
  char raft[80] = "", client[80] = "";
  if (op == ADD) {
    const char *slash = strchr(pos[2], '/');
    if (slash == NULL || (size_t)(slash - pos[2]) >= sizeof raft ||
        strlen(slash + 1) >= sizeof client || slash == pos[2] || slash[1] == '\0') {
      fprintf(stderr, "hgctl %s: the addresses are RAFT_IP:PORT/CLIENT_HOST:PORT\n", cmd);
      return EXIT_USAGE;
    }
    memcpy(raft, pos[2], (size_t)(slash - pos[2]));
    snprintf(client, sizeof client, "%s", slash + 1);
  }
  hg_client_t *c = NULL;
  if ((rc = net_open_session(cmd, &c))) return rc;
  uint64_t seq = 0;
  rc = hg_client_cluster(c, op, (uint32_t)id, op == ADD ? raft : NULL, op == ADD ? client : NULL,
                         &seq);
  const env_t *e = NULL;
  if (rc != 0) {
    rc = EXIT_FAIL;
  } else {
    for (;;) {
      rc = net_await_reply(cmd, c, seq, &e);
      if (rc != 0) break;
      if (e->body_case == BODY(RESPONSE)) {
        rc = net_response_status(cmd, e);
        break;
      }
      if (e->body_case == BODY(CLUSTER_STATUS) && e->cluster_status->ref_seq == seq) {
        rc = 2;
        break;
      }
    }
  }
  if (rc == 2) {
    const Hourglass__V1__ClusterStatus *s = e->cluster_status;
    if (s->reason != 0) {
      fprintf(stderr, "hgctl %s: refused: %s (%u)%s%s\n", cmd, net_reject_name(s->reason),
              s->reason, s->text ? ": " : "", s->text ? s->text : "");
      fflush(stderr);
    }
    printf("CLUSTER result=%s(%u) node=%u leader=%u term=%" PRIu64 " commit_index=%" PRIu64
           " applied_index=%" PRIu64 "\n",
           s->reason == 0 ? "ok" : net_reject_name(s->reason), s->reason, s->node_id,
           s->leader_id, s->term, s->commit_index, s->applied_index);
    /* Only the leader knows what each member stores: elsewhere "-". */
    int known = s->node_id != 0 && s->node_id == s->leader_id;
    for (size_t i = 0; i < s->n_members; i++) {
      const Hourglass__V1__ClusterMember *m = s->members[i];
      char match[24] = "-", lag[24] = "-";
      if (known) {
        snprintf(match, sizeof match, "%" PRIu64, m->match_index);
        snprintf(lag, sizeof lag, "%" PRIu64, m->lag);
      }
      printf("MEMBER id=%u raft=%s client=%s role=%s match_index=%s lag=%s\n", m->id,
             m->raft_address ? m->raft_address : "-",
             m->client_address ? m->client_address : "-",
             m->id == s->leader_id ? "leader" : m->voter ? "voter" : "spare", match, lag);
    }
    fflush(stdout);
    rc = s->reason != 0 ? EXIT_FAIL : 0;
  }
  net_close_session(c);
  return rc;
}

/* op add-key: an API key from a file holding its secret in hex (never on
 * the command line, where ps would show it). */
int hgctl_op_add_key(int argc, char **argv) {
  const char *cmd = "op add-key", *pos[4] = {NULL, NULL, NULL, NULL}, *file = NULL;
  const opt_t opts[] = {CONN_OPTS, {"secret-file", &file, NULL}};
  const char *usage =
      "op add-key KEY_ID trader|market_maker|risk_viewer|operator ACCOUNT FIRM\n"
      "  --secret-file FILE   (FILE: the key's secret, 32..128 hex digits; account 0 for\n"
      "                        risk viewers and operators, firm 0 for operators)\n";
  int rc = net_parse(cmd, argc, argv, opts, sizeof opts / sizeof opts[0], pos, 4, usage);
  if (rc) return rc;
  if (pos[3] == NULL || file == NULL) {
    fprintf(stderr, "usage: hgctl %s", usage);
    return EXIT_USAGE;
  }
  int64_t id = 0, account = 0, firm = 0;
  if ((rc = net_need_num(cmd, "KEY_ID", pos[0], 1, INT64_MAX, &id)) ||
      (rc = net_need_num(cmd, "ACCOUNT", pos[2], 0, UINT32_MAX, &account)) ||
      (rc = net_need_num(cmd, "FIRM", pos[3], 0, UINT32_MAX, &firm)))
    return rc;
  uint32_t role = strcmp(pos[1], "trader") == 0         ? HOURGLASS__V1__ROLE__ROLE_TRADER
                  : strcmp(pos[1], "market_maker") == 0 ? HOURGLASS__V1__ROLE__ROLE_MARKET_MAKER
                  : strcmp(pos[1], "risk_viewer") == 0  ? HOURGLASS__V1__ROLE__ROLE_RISK_VIEWER
                  : strcmp(pos[1], "operator") == 0     ? HOURGLASS__V1__ROLE__ROLE_OPERATOR
                                                        : 0;
  if (role == 0) {
    fprintf(stderr, "hgctl %s: the role is trader, market_maker, risk_viewer or operator\n", cmd);
    return EXIT_USAGE;
  }
  char hex[160] = "";
  FILE *f = fopen(file, "r");
  if (f == NULL) {
    fprintf(stderr, "hgctl %s: %s: %s\n", cmd, file, strerror(errno));
    return EXIT_USAGE;
  }
  if (fgets(hex, sizeof hex, f) == NULL) hex[0] = '\0';
  fclose(f);
  hex[strcspn(hex, " \t\r\n")] = '\0';
  uint8_t secret[HG_WIRE_SECRET_MAX];
  int n = hg_client_parse_hex(hex, secret, sizeof secret);
  hg_wipe(hex, sizeof hex);
  if (n < HG_WIRE_SECRET_MIN) {
    hg_wipe(secret, sizeof secret);
    fprintf(stderr, "hgctl %s: %s must hold 32..128 hex digits (16..64 bytes)\n", cmd, file);
    return EXIT_USAGE;
  }
  hg_client_t *c = NULL;
  if ((rc = net_open_session(cmd, &c))) {
    hg_wipe(secret, sizeof secret);
    return rc;
  }
  uint64_t seq = 0;
  rc = hg_client_add_api_key(c, (uint64_t)id, role, (uint32_t)account, (uint32_t)firm, secret,
                             (size_t)n, &seq);
  hg_wipe(secret, sizeof secret);
  if (rc == 0) {
    const env_t *e = NULL;
    rc = net_await_reply(cmd, c, seq, &e);
    if (rc == 0) {
      rc = net_response_status(cmd, e);
      if (rc == 0) printf("OK add-key key_id=%" PRId64 " role=%s\n", id, pos[1]);
    }
  } else {
    rc = EXIT_FAIL;
  }
  net_close_session(c);
  return rc;
}
