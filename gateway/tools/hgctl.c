/*
 * hgctl: the operator's command line.
 *
 * Commands are found through a two-level table (group, verb) so that new
 * groups (`hgctl order ...`, `hgctl settle ...`) are one table entry each.
 * For now only `hgctl index fix` exists: it reads a samples CSV and a provider
 * registry CSV, computes one day's fixing with the settlement library and
 * prints it as JSON on stdout. It is offline: no history is loaded, so a day
 * whose data are insufficient in both tiers is NO_FIX (nothing to carry).
 *
 * Exit status: 0 success, 1 input error (unreadable file, bad header, rejected
 * lines without --allow-rejected, bad registry), 2 usage error.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hourglass/error.h"
#include "hourglass/index.h"
#include "hgctl_args.h"
#include "hgctl_net.h"
#include "hgctl_tools.h"


typedef struct command {
  const char *name;
  const char *summary;
  int (*run)(int argc, char **argv);
} command_t;

typedef struct group {
  const char *name;
  const command_t *cmds;
  size_t n;
} group_t;

/* Column names per product (hg_index_product_t), for the error messages. */
static const char *const SAMPLE_COLUMNS[2][9] = {
    {"ts", "provider", "region", "gpu", "grade", "term_days", "price_usd_per_gpu_hour",
     "volume_gpu_hours", "kind"},
    {"ts", "provider", "region", "class", "grade", "term_days", "price_usd_per_million_tokens",
     "volume_million_tokens", "kind"}};
static const char *const REGISTRY_COLUMNS[2][4] = {
    {"provider", "gpu", "grade", "effective_from"},
    {"provider", "class", "grade", "effective_from"}};

/* ------------------------------------------------------------ JSON out */

static void json_str(FILE *o, const char *s) {
  fputc('"', o);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') {
      fputc('\\', o);
      fputc(c, o);
    } else if (c < 0x20) {
      fprintf(o, "\\u%04x", c);
    } else {
      fputc(c, o);
    }
  }
  fputc('"', o);
}

static void json_micro(FILE *o, int64_t v) {
  /* Decimal USD string with 6 places, from integers only. */
  uint64_t a = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  fprintf(o, "\"%s%" PRIu64 ".%06" PRIu64 "\"", v < 0 ? "-" : "", a / 1000000, a % 1000000);
}

static void print_csv_errors_json(FILE *o, const char *file, const char *const *cols,
                                  size_t ncols, const hg_index_csv_error_t *e, size_t n,
                                  bool *first) {
  for (size_t k = 0; k < n; k++) {
    fprintf(o, "%s\n    {\"file\": ", *first ? "" : ",");
    *first = false;
    json_str(o, file);
    fprintf(o, ", \"line\": %" PRIu32 ", \"column\": ", e[k].line);
    if (e[k].column >= 0 && (size_t)e[k].column < ncols) {
      json_str(o, cols[e[k].column]);
    } else {
      fputs("null", o);
    }
    fputs(", \"reason\": ", o);
    json_str(o, hg_index_csv_reason_str(e[k].reason));
    fputc('}', o);
  }
}

/* Rejected lines on stderr: the first CSV_ERRORS_SHOWN, then how many more
 * (the samples' JSON on stdout lists them all). */
#define CSV_ERRORS_SHOWN 20

static void print_csv_errors_stderr(const char *path, const char *const *cols, size_t ncols,
                                    const hg_index_csv_error_t *e, size_t n) {
  for (size_t k = 0; k < n && k < CSV_ERRORS_SHOWN; k++) {
    if (e[k].column >= 0 && (size_t)e[k].column < ncols) {
      fprintf(stderr, "hgctl: %s:%" PRIu32 ": %s: %s\n", path, e[k].line, cols[e[k].column],
              hg_index_csv_reason_str(e[k].reason));
    } else {
      fprintf(stderr, "hgctl: %s:%" PRIu32 ": %s\n", path, e[k].line,
              hg_index_csv_reason_str(e[k].reason));
    }
  }
  if (n > CSV_ERRORS_SHOWN)
    fprintf(stderr, "hgctl: %s: and %zu more rejected line(s)\n",
            path, n - CSV_ERRORS_SHOWN);
}

static void print_tier_json(FILE *o, int tier, const hg_index_tier_stats_t *t,
                            hg_index_product_t product) {
  fprintf(o,
          "{\"tier\": %d, \"tried\": %s, \"sufficient\": %s, \"eligible\": %" PRIu32
          ", \"used_samples\": %" PRIu32 ", \"providers\": %" PRIu32 ", \"hours\": %" PRIu32
          ", \"%s\": %" PRId64 ", \"value_micro_usd\": %" PRId64 "}",
          tier, t->tried ? "true" : "false", t->sufficient ? "true" : "false", t->eligible,
          t->used, t->providers, t->hours, hg_index_product_volume_name(product), t->volume,
          t->value);
}

/* The fixing as JSON; for TPX the underlying is printed as "class" and the
 * volumes in million output tokens (settlement/CONTRACT.md section 7.2). */
static void print_fix_json(FILE *o, const hg_index_result_t *r, const hg_index_sample_set_t *set,
                           const char *samples_path, const hg_index_sample_set_t *errs_of,
                           bool receipt, hg_index_product_t product) {
  const hg_index_fixing_t *f = &r->fixing;
  const hg_index_tier_stats_t *t = &r->tier[r->receipt_tier - 1];
  char day[11];
  hg_index_day_format(f->day, day);
  fprintf(o, "{\n  \"index\": \"%s-%s-%s\",\n  \"%s\": ", hg_index_product_prefix(product),
          r->gpu, r->grade, product == HG_INDEX_TOKENS ? "class" : "gpu");
  json_str(o, r->gpu);
  fputs(",\n  \"grade\": ", o);
  json_str(o, r->grade);
  fprintf(o, ",\n  \"day\": \"%s\",\n  \"methodology\": \"%s\",\n", day, r->methodology);
  fprintf(o, "  \"status\": \"%s\",\n  \"kind\": \"%s\",\n  \"tier\": %u,\n",
          hg_index_status_str(f->status), hg_index_kind_str(f->kind), f->tier);
  if (f->status == HG_INDEX_NO_FIX) {
    fputs("  \"value_micro_usd\": null,\n  \"value_usd\": null,\n", o);
  } else {
    fprintf(o, "  \"value_micro_usd\": %" PRId64 ",\n  \"value_usd\": ", f->value);
    json_micro(o, f->value);
    fputs(",\n", o);
  }
  fprintf(o, "  \"sample_count\": %" PRIu32 ",\n", r->input_count);
  fprintf(o, "  \"receipt_tier\": %u,\n", r->receipt_tier);
  fprintf(o, "  \"used_samples\": %" PRIu32 ",\n  \"providers\": %" PRIu32
             ",\n  \"hours\": %" PRIu32 ",\n  \"%s\": %" PRId64 ",\n",
          t->used, t->providers, t->hours, hg_index_product_volume_name(product), t->volume);
  fprintf(o, "  \"median_micro_usd\": %" PRId64 ",\n  \"mad_micro_usd\": %" PRId64 ",\n",
          t->median, t->mad);
  fprintf(o, "  \"provider_cap_applied\": %s,\n  \"cap_%s\": %" PRId64 ",\n",
          t->cap_applied ? "true" : "false",
          product == HG_INDEX_TOKENS ? "million_tokens" : "gpu_hours", t->cap);
  fputs("  \"bucket_values\": [", o);
  bool first = true;
  for (int h = 0; h < HG_INDEX_HOURS; h++) {
    if (t->bucket_n[h] == 0) continue;
    fprintf(o, "%s\n    {\"hour\": %d, \"samples\": %" PRIu32 ", \"value_micro_usd\": %" PRId64 "}",
            first ? "" : ",", h, t->bucket_n[h], t->bucket[h]);
    first = false;
  }
  fputs(first ? "],\n" : "\n  ],\n", o);
  fputs("  \"exclusions\": {", o);
  for (int k = 1; k < HG_INDEX_REASON_COUNT; k++) {
    fprintf(o, "%s\"%s\": %" PRIu32, k == 1 ? "" : ", ", hg_index_reason_str(k),
            t->reason_count[k]);
  }
  fputs("},\n  \"tiers\": [", o);
  print_tier_json(o, 1, &r->tier[0], product);
  if (r->tier[1].tried) {
    fputs(", ", o);
    print_tier_json(o, 2, &r->tier[1], product);
  }
  fputs("],\n", o);
  if (receipt) {
    fputs("  \"excluded\": [", o);
    for (size_t k = 0; k < r->n_exclusions; k++) {
      fprintf(o, "%s\n    {\"line\": %" PRIu32 ", \"reason\": \"%s\"}", k ? "," : "",
              set->lines[r->exclusions[k].sample], hg_index_reason_str((int)r->exclusions[k].reason));
    }
    fputs(r->n_exclusions ? "\n  ],\n" : "],\n", o);
    fputs("  \"weights\": [", o);
    for (size_t k = 0; k < r->n_weights; k++) {
      fprintf(o, "%s\n    {\"line\": %" PRIu32 ", \"weight\": %" PRId64 "}", k ? "," : "",
              set->lines[r->weights[k].sample], r->weights[k].weight);
    }
    fputs(r->n_weights ? "\n  ],\n" : "],\n", o);
  }
  fputs("  \"rejected_lines\": [", o);
  first = true;
  print_csv_errors_json(o, samples_path, SAMPLE_COLUMNS[product], 9, errs_of->errors,
                        errs_of->n_errors, &first);
  fputs(first ? "]\n}\n" : "\n  ]\n}\n", o);
}

/* ---------------------------------------------------------- index fix */

static void index_fix_usage(FILE *o) {
  fputs("usage: hgctl index fix --samples FILE.csv --providers FILE.csv (--gpu GPU | --class C)\n"
        "                       --grade G --day YYYY-MM-DD [--allow-rejected] [--receipt]\n"
        "  Computes the IGX-<GPU>-<GRADE> fixing of one UTC day (methodology v1) and\n"
        "  prints it as JSON. With --class it computes the token-price index\n"
        "  TPX-<CLASS>-<GRADE> (USD per million output tokens) by the same method,\n"
        "  from files with the token headers (settlement/CONTRACT.md section 7.2).\n"
        "  Any rejected samples line fails the run (exit 1) unless\n"
        "  --allow-rejected is given; --receipt adds every exclusion and weight.\n",
        o);
}

static int cmd_index_fix(int argc, char **argv) {
  const char *samples = NULL, *providers = NULL, *gpu = NULL, *grade = NULL, *day_s = NULL,
             *cls = NULL;
  bool allow_rejected = false, receipt = false;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    const char **dst = NULL;
    if (strcmp(a, "--samples") == 0) {
      dst = &samples;
    } else if (strcmp(a, "--providers") == 0) {
      dst = &providers;
    } else if (strcmp(a, "--gpu") == 0) {
      dst = &gpu;
    } else if (strcmp(a, "--class") == 0) {
      dst = &cls;
    } else if (strcmp(a, "--grade") == 0) {
      dst = &grade;
    } else if (strcmp(a, "--day") == 0) {
      dst = &day_s;
    } else if (strcmp(a, "--allow-rejected") == 0) {
      allow_rejected = true;
      continue;
    } else if (strcmp(a, "--receipt") == 0) {
      receipt = true;
      continue;
    } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      index_fix_usage(stdout);
      return 0;
    } else {
      fprintf(stderr, "hgctl index fix: unknown option '%s'\n", a);
      index_fix_usage(stderr);
      return EXIT_USAGE;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "hgctl index fix: option %s needs a value\n", a);
      return EXIT_USAGE;
    }
    if (*dst != NULL) {
      fprintf(stderr, "hgctl index fix: option %s given twice\n", a);
      return EXIT_USAGE;
    }
    *dst = argv[++i];
  }
  if (gpu && cls) {
    fprintf(stderr, "hgctl index fix: give --gpu (IGX) or --class (TPX), not both\n");
    return EXIT_USAGE;
  }
  hg_index_product_t product = cls ? HG_INDEX_TOKENS : HG_INDEX_GPU_HOURS;
  const char *what = cls ? "--class" : "--gpu";
  if (cls) gpu = cls;
  const char *missing = !samples     ? "--samples"
                        : !providers ? "--providers"
                        : !gpu       ? "--gpu or --class"
                        : !grade     ? "--grade"
                        : !day_s     ? "--day"
                                     : NULL;
  if (missing) {
    fprintf(stderr, "hgctl index fix: missing %s\n", missing);
    index_fix_usage(stderr);
    return EXIT_USAGE;
  }
  int32_t day;
  if (hg_index_day_parse(day_s, strlen(day_s), &day)) {
    fprintf(stderr, "hgctl index fix: --day '%s' is not a valid YYYY-MM-DD date\n", day_s);
    return EXIT_USAGE;
  }
  if (strlen(gpu) == 0 || strlen(gpu) >= HG_INDEX_GPU_MAX) {
    fprintf(stderr, "hgctl index fix: %s must be 1 to %d characters\n", what,
            HG_INDEX_GPU_MAX - 1);
    return EXIT_USAGE;
  }
  if (!hg_index_product_grade_known(product, gpu, grade)) {
    fprintf(stderr, "hgctl index fix: no grade '%s' for %s '%s' in the grade registry (known:",
            grade, cls ? "class" : "GPU", gpu);
    size_t ng;
    if (cls) {
      const hg_token_grade_t *g = hg_index_token_grades_default(&ng);
      for (size_t k = 0; k < ng; k++) fprintf(stderr, " %s.%s", g[k].cls, g[k].code);
    } else {
      const hg_grade_t *g = hg_index_grades_default(&ng);
      for (size_t k = 0; k < ng; k++) fprintf(stderr, " %s.%s", g[k].gpu, g[k].code);
    }
    fputs(")\n", stderr);
    return EXIT_USAGE;
  }

  int status = EXIT_INPUT;
  char *sbuf = NULL, *pbuf = NULL;
  size_t slen = 0, plen = 0;
  hg_index_sample_set_t set = {0};
  hg_index_registry_t reg = {0};
  hg_index_result_t res = {0};
  int rc;
  if ((rc = hgctl_read_file(samples, &sbuf, &slen))) {
    fprintf(stderr, "hgctl index fix: cannot read samples '%s': %s\n", samples, hg_strerror(rc));
    goto out;
  }
  if ((rc = hgctl_read_file(providers, &pbuf, &plen))) {
    fprintf(stderr, "hgctl index fix: cannot read providers '%s': %s\n", providers,
            hg_strerror(rc));
    goto out;
  }
  if ((rc = hg_index_registry_parse_product(pbuf, plen, product, &reg))) {
    fprintf(stderr, "hgctl index fix: providers: %s\n", hg_strerror(rc));
    goto out;
  }
  if (reg.n_errors) {
    print_csv_errors_stderr(providers, REGISTRY_COLUMNS[product], 4, reg.errors, reg.n_errors);
    fprintf(stderr, "hgctl index fix: %zu bad line(s) in the provider registry; nothing computed\n",
            reg.n_errors);
    goto out;
  }
  if ((rc = hg_index_samples_parse_product(sbuf, slen, product, &set))) {
    fprintf(stderr, "hgctl index fix: samples: %s\n", hg_strerror(rc));
    goto out;
  }
  print_csv_errors_stderr(samples, SAMPLE_COLUMNS[product], 9, set.errors, set.n_errors);
  bool header_bad = set.n_errors > 0 && set.errors[0].reason == HG_INDEX_CSV_HEADER;
  if (header_bad || (set.n_errors > 0 && !allow_rejected)) {
    fprintf(stdout, "{\n  \"index\": \"%s-%s-%s\",\n  \"day\": \"%s\",\n  \"error\": ",
            hg_index_product_prefix(product), gpu, grade, day_s);
    json_str(stdout, header_bad ? "samples header is wrong; nothing parsed"
                                : "rejected lines in the samples; fix them or pass --allow-rejected");
    fputs(",\n  \"rejected_lines\": [", stdout);
    bool first = true;
    print_csv_errors_json(stdout, samples, SAMPLE_COLUMNS[product], 9, set.errors, set.n_errors,
                          &first);
    fputs("\n  ]\n}\n", stdout);
    fprintf(stderr, "hgctl index fix: %zu rejected line(s)%s\n", set.n_errors,
            header_bad ? "" : "; pass --allow-rejected to compute from the other lines");
    goto out;
  }
  if ((rc = hg_index_fix(NULL, &reg, NULL, gpu, grade, day, set.samples, set.n, &res))) {
    fprintf(stderr, "hgctl index fix: %s\n", hg_strerror(rc));
    goto out;
  }
  print_fix_json(stdout, &res, &set, samples, &set, receipt, product);
  status = fflush(stdout) == 0 ? 0 : EXIT_INPUT;
out:
  hg_index_result_dispose(&res);
  hg_index_samples_dispose(&set);
  hg_index_registry_dispose(&reg);
  free(sbuf);
  free(pbuf);
  return status;
}

/* ------------------------------------------------------------- tables */

static const command_t INDEX_CMDS[] = {
    {"fix", "compute one day's index fixing from CSV files", cmd_index_fix},
    {"fixings", "an index's fixings from a data directory, as CSV", hgctl_index_fixings},
};

static const command_t HEDGE_CMDS[] = {
    {"size", "contracts per delivery month to hedge a GPU fleet", hgctl_hedge_size},
    {"ratio", "minimum-variance hedge ratio of your rent against the index", hgctl_hedge_ratio},
    {"margin", "both legs of an inference-margin hedge (tokens against GPU-hours)",
     hgctl_hedge_margin},
};

/* Groups whose only command has the name "" take their options directly
 * (`hgctl convert --price ...`). */
static const command_t CONVERT_CMDS[] = {
    {"", "USD per GPU-hour <-> USD per million output tokens", hgctl_convert},
};
static const command_t STATEMENT_CMDS[] = {
    {"", "an account's statement (--data DIR, or --remote from the gateway)", hgctl_statement},
};
static const command_t REPLAY_CMDS[] = {
    {"", "replay a data directory: hashes, statements, what-if", hgctl_replay},
};

/* Network commands (hgctl_net.c). A command named "" is its group's
 * default: `hgctl instruments`, `hgctl ladder SYMBOL`. */
static const command_t ORDER_CMDS[] = {
    {"new", "place an order and print its execution reports", hgctl_order_new},
    {"cancel", "cancel an order", hgctl_order_cancel},
    {"replace", "change an order's price and quantity", hgctl_order_replace},
    {"mass-cancel", "cancel all orders (of one instrument, one side)", hgctl_order_mass_cancel},
};
static const command_t INSTRUMENTS_CMDS[] = {{"", "list instruments", hgctl_instruments}};
static const command_t LADDER_CMDS[] = {{"", "SYMBOL: live depth ladder", hgctl_ladder}};
static const command_t POSITIONS_CMDS[] = {{"", "positions and cash", hgctl_positions}};
static const command_t ORDERS_CMDS[] = {
    {"", "live orders of the account (a risk viewer: its firm)", hgctl_orders}};
static const command_t EXECUTIONS_CMDS[] = {
    {"", "recent execution reports (--follow: tail)", hgctl_executions}};

static const command_t OP_CMDS[] = {
    {"samples", "stage a samples CSV for a day's fixing", hgctl_op_samples},
    {"fixing", "compute|finalize|publish|discard a day's fixing", hgctl_op_fixing},
    {"settle", "run the daily settlement cycle of a day", hgctl_op_settle},
    {"mark", "a mark round: margin calls and liquidations", hgctl_op_mark},
    {"fund", "deposit into the insurance fund", hgctl_op_fund},
    {"expire", "final settlement of a contract", hgctl_op_expire},
    {"list", "list instruments", hgctl_op_list},
    {"halt", "halt an instrument", hgctl_op_halt},
    {"resume", "resume a halted instrument", hgctl_op_resume},
    {"add-account", "add an account to a firm", hgctl_op_add_account},
    {"deposit", "deposit collateral", hgctl_op_deposit},
    {"withdraw", "withdraw collateral", hgctl_op_withdraw},
    {"end-of-session", "expire every DAY order", hgctl_op_end_of_session},
    {"delist", "delist an instrument (its orders are cancelled)", hgctl_op_delist},
    {"list-curve", "list twelve monthly contracts of an index", hgctl_op_list_curve},
    {"add-key", "add an API key (its secret read from a file)", hgctl_op_add_key},
    {"cluster", "status|add|remove|transfer: the Raft group's members", hgctl_op_cluster},
};
static const command_t QUOTE_CMDS[] = {
    {"", "mass quote (--quote ... --group G), or reset --group G", hgctl_quote}};
static const command_t DROPCOPY_CMDS[] = {
    {"", "tail the firm's drop copy (risk viewers)", hgctl_dropcopy}};

static const group_t GROUPS[] = {
    {"index", INDEX_CMDS, sizeof INDEX_CMDS / sizeof INDEX_CMDS[0]},
    {"hedge", HEDGE_CMDS, sizeof HEDGE_CMDS / sizeof HEDGE_CMDS[0]},
    {"convert", CONVERT_CMDS, 1},
    {"statement", STATEMENT_CMDS, 1},
    {"replay", REPLAY_CMDS, 1},
    {"order", ORDER_CMDS, sizeof ORDER_CMDS / sizeof ORDER_CMDS[0]},
    {"instruments", INSTRUMENTS_CMDS, 1},
    {"ladder", LADDER_CMDS, 1},
    {"orders", ORDERS_CMDS, 1},
    {"positions", POSITIONS_CMDS, 1},
    {"executions", EXECUTIONS_CMDS, 1},
    {"op", OP_CMDS, sizeof OP_CMDS / sizeof OP_CMDS[0]},
    {"quote", QUOTE_CMDS, 1},
    {"dropcopy", DROPCOPY_CMDS, 1},
};

static void usage(FILE *o) {
  fputs("usage: hgctl <group> <command> [options]\n", o);
  for (size_t g = 0; g < sizeof GROUPS / sizeof GROUPS[0]; g++) {
    for (size_t c = 0; c < GROUPS[g].n; c++) {
      char name[64];
      snprintf(name, sizeof name, "%s%s%s", GROUPS[g].name, GROUPS[g].cmds[c].name[0] ? " " : "",
               GROUPS[g].cmds[c].name);
      fprintf(o, "  hgctl %-17s %s\n", name, GROUPS[g].cmds[c].summary);
    }
  }
  fputs("Run 'hgctl <group> <command> --help' for a command's options.\n", o);
}

static void reverse(char **v, int from, int to) {
  for (to--; from < to; from++, to--) {
    char *t = v[from];
    v[from] = v[to];
    v[to] = t;
  }
}

/* Connection options written before the command ("hgctl --tls --ca FILE
 * instruments") move after it, where every network command parses them
 * (a rotation of argv in place). */
static void move_leading_options(int argc, char **argv) {
  static const char *const flags[] = {"--tls", "--raw"};
  static const char *const vals[] = {"--host",     "--port",     "--nodes",   "--key-id",
                                     "--secret",   "--timeout",  "--ca",      "--tls-name",
                                     "--tls-cert", "--tls-key"};
  int k = 1;
  while (k < argc) {
    int took = 0;
    for (size_t i = 0; !took && i < sizeof flags / sizeof flags[0]; i++)
      if (strcmp(argv[k], flags[i]) == 0) took = 1;
    for (size_t i = 0; !took && i < sizeof vals / sizeof vals[0]; i++) {
      size_t n = strlen(vals[i]);
      if (strcmp(argv[k], vals[i]) == 0 && k + 1 < argc) took = 2;
      else if (strncmp(argv[k], vals[i], n) == 0 && argv[k][n] == '=') took = 1;
    }
    if (!took) break;
    k += took;
  }
  if (k == 1 || k == argc) return;
  reverse(argv, 1, k);
  reverse(argv, k, argc);
  reverse(argv, 1, argc);
}

int main(int argc, char **argv) {
  move_leading_options(argc, argv);
  if (argc < 2) {
    usage(stderr);
    return EXIT_USAGE;
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
      strcmp(argv[1], "help") == 0) {
    usage(stdout);
    return 0;
  }
  for (size_t g = 0; g < sizeof GROUPS / sizeof GROUPS[0]; g++) {
    if (strcmp(argv[1], GROUPS[g].name) != 0) continue;
    if (GROUPS[g].n == 1 && GROUPS[g].cmds[0].name[0] == '\0')
      return GROUPS[g].cmds[0].run(argc - 2, argv + 2);
    if (argc < 3) {
      fprintf(stderr, "hgctl %s: missing command\n", argv[1]);
      usage(stderr);
      return EXIT_USAGE;
    }
    for (size_t c = 0; c < GROUPS[g].n; c++) {
      if (strcmp(argv[2], GROUPS[g].cmds[c].name) == 0)
        return GROUPS[g].cmds[c].run(argc - 3, argv + 3);
    }
    fprintf(stderr, "hgctl %s: unknown command '%s'\n", argv[1], argv[2]);
    usage(stderr);
    return EXIT_USAGE;
  }
  fprintf(stderr, "hgctl: unknown command group '%s'\n", argv[1]);
  usage(stderr);
  return EXIT_USAGE;
}
