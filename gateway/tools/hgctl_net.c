/*
 * hgctl_net.c - hgctl's network commands: orders, instruments, a live depth
 * ladder, positions and executions, mass quotes, the drop copy tail,
 * statements (--remote) and the operator's commands, over the gateway's
 * wire protocol through the client library (hourglass/client.h).
 *
 * Each command opens one session (address from --host/--port or the
 * environment HG_HOST/HG_PORT, as the Python client reads them; key from
 * --key-id/--secret or HG_KEY_ID/HG_SECRET, secret in hex; an option wins
 * over the environment), sends its request, prints
 * the replies that carry its request seq (ref_seq) as one line each, and
 * logs out. Output is plain "KEY=value" text, one event per line, so it
 * greps and diffs well; the ladder redraws the terminal instead.
 *
 * Units (hgctl_fmt.h): prices are typed and printed in USD per GPU-hour with
 * three decimals, money in USD, times in UTC; --raw, accepted by every
 * command here, switches input and output to the wire's integer ticks,
 * micro-USD and nanoseconds.
 *
 * Exit status: 0 done, 1 refused (reject, login failure, connection error,
 * timeout), 2 usage error.
 */
#include "hgctl_net.h"
#include "hgctl_fmt.h"
#include "hgctl_tools.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hourglass/client.h"
#include "hourglass/error.h"
#include "hourglass/index.h"

#define EXIT_FAIL 1
#define EXIT_USAGE 2

typedef Hourglass__V1__Envelope env_t;
#define BODY(x) HOURGLASS__V1__ENVELOPE__BODY_##x

/* ------------------------------------------------------------- options */

typedef struct opt {
  const char *name;  /* without "--" */
  const char **val;  /* option with a value */
  bool *flag;        /* option without one */
} opt_t;

typedef struct conn {
  const char *host, *port, *key_id, *secret, *timeout;
} conn_t;

static conn_t g_conn;
/* --raw: prices in ticks, money in micro-USD, times in ns, in and out. */
static bool g_raw;

#define CONN_OPTS                                                                        \
  {"host", &g_conn.host, NULL}, {"port", &g_conn.port, NULL},                            \
      {"key-id", &g_conn.key_id, NULL}, {"secret", &g_conn.secret, NULL},                \
      {"timeout", &g_conn.timeout, NULL}, {"raw", NULL, &g_raw}
#define CONN_NOPTS 6

static const char CONN_HELP[] =
    "connection: --host H (127.0.0.1) --port P (7700) --key-id ID --secret HEX\n"
    "            (or HG_HOST, HG_PORT, HG_KEY_ID, HG_SECRET in the environment)\n"
    "            --timeout MS (5000)\n"
    "units:      prices in USD per GPU-hour (3 decimals, tick 0.001), money in USD,\n"
    "            times in UTC; --raw: ticks, micro-USD and ns as on the wire, in and out\n";

/* Parses --name value / --name=value / --flag; positional arguments go to
 * pos[0..npos). Returns 0, or EXIT_USAGE after printing why. */
static int parse(const char *cmd, int argc, char **argv, const opt_t *opts, size_t n,
                 const char **pos, size_t npos, const char *usage) {
  size_t got = 0;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      printf("usage: hgctl %s\n%s", usage, CONN_HELP);
      exit(0);
    }
    if (strncmp(a, "--", 2) != 0) {
      if (got == npos) {
        fprintf(stderr, "hgctl %s: unexpected argument '%s'\n", cmd, a);
        goto bad;
      }
      pos[got++] = a;
      continue;
    }
    const char *name = a + 2, *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    const opt_t *o = NULL;
    for (size_t k = 0; k < n; k++)
      if (strlen(opts[k].name) == len && strncmp(opts[k].name, name, len) == 0) o = &opts[k];
    if (o == NULL) {
      fprintf(stderr, "hgctl %s: unknown option '%s'\n", cmd, a);
      goto bad;
    }
    if (o->flag) {
      if (eq) {
        fprintf(stderr, "hgctl %s: --%s takes no value\n", cmd, o->name);
        goto bad;
      }
      *o->flag = true;
    } else if (eq) {
      *o->val = eq + 1;
    } else if (i + 1 < argc) {
      *o->val = argv[++i];
    } else {
      fprintf(stderr, "hgctl %s: --%s needs a value\n", cmd, o->name);
      goto bad;
    }
  }
  return 0;
bad:
  fprintf(stderr, "usage: hgctl %s\n%s", usage, CONN_HELP);
  return EXIT_USAGE;
}

/* Strict decimal parse into [lo, hi]. */
static bool num(const char *s, int64_t lo, int64_t hi, int64_t *out) {
  if (s == NULL || *s == '\0') return false;
  char *end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

static bool unum(const char *s, uint64_t hi, uint64_t *out) {
  if (s == NULL || *s == '\0' || *s == '-') return false;
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || *end != '\0' || v > hi) return false;
  *out = v;
  return true;
}

static int need_num(const char *cmd, const char *name, const char *s, int64_t lo, int64_t hi,
                    int64_t *out) {
  if (s == NULL) {
    fprintf(stderr, "hgctl %s: --%s is required\n", cmd, name);
    return EXIT_USAGE;
  }
  if (!num(s, lo, hi, out)) {
    fprintf(stderr, "hgctl %s: --%s '%s' is not a number in %" PRId64 "..%" PRId64 "\n", cmd,
            name, s, lo, hi);
    return EXIT_USAGE;
  }
  return 0;
}

/* A price option in USD per GPU-hour ("3.42"), above zero; or in ticks
 * from lo up with --raw. */
static int need_price(const char *cmd, const char *name, const char *s, int64_t lo,
                      int64_t *out) {
  if (g_raw || s == NULL) return need_num(cmd, name, s, lo, INT64_MAX, out);
  int rc = hgctl_decimal_parse(s, 3, 0, out);
  if (rc != 0) {
    fprintf(stderr, "hgctl %s: --%s '%s' %s\n", cmd, name, s, hgctl_decimal_error(rc, 3));
    return EXIT_USAGE;
  }
  return 0;
}

/* A money option in USD ("1250.50", up to 6 decimals), or micro-USD with
 * --raw; above zero. */
static int need_money(const char *cmd, const char *name, const char *s, int64_t *out) {
  if (g_raw || s == NULL) return need_num(cmd, name, s, 1, INT64_MAX, out);
  int rc = hgctl_decimal_parse(s, 6, 0, out);
  if (rc != 0) {
    fprintf(stderr, "hgctl %s: --%s '%s' %s\n", cmd, name, s, hgctl_decimal_error(rc, 6));
    return EXIT_USAGE;
  }
  return 0;
}

/* Printed forms, each in one of eight rotating buffers so that one printf
 * may show several: valid until eight more calls. */
static char *fmt_buf(void) {
  static char bufs[8][HGCTL_FMT_LEN];
  static unsigned next;
  return bufs[next++ % 8];
}

static const char *px(int64_t ticks) {
  char *b = fmt_buf();
  if (!g_raw) return hgctl_fmt_price(ticks, b);
  snprintf(b, HGCTL_FMT_LEN, "%" PRId64, ticks);
  return b;
}

static const char *usd(int64_t micro) {
  char *b = fmt_buf();
  if (!g_raw) return hgctl_fmt_money(micro, b);
  snprintf(b, HGCTL_FMT_LEN, "%" PRId64, micro);
  return b;
}

/* An index value (micro-USD per GPU-hour): USD with six decimals. */
static const char *index_usd(int64_t micro) {
  char *b = fmt_buf();
  if (!g_raw) return hgctl_fmt_decimal(micro, 6, b);
  snprintf(b, HGCTL_FMT_LEN, "%" PRId64, micro);
  return b;
}

/* --------------------------------------------------------------- session */

static int g_timeout_ms = 5000;

/* Builds the client from the connection options and logs in. */
static const char *env_or_null(const char *name) {
  const char *v = getenv(name);
  return v != NULL && v[0] != '\0' ? v : NULL;
}

static int open_session(const char *cmd, hg_client_t **out) {
  const char *key = g_conn.key_id ? g_conn.key_id : getenv("HG_KEY_ID");
  const char *sec = g_conn.secret ? g_conn.secret : getenv("HG_SECRET");
  const char *host = g_conn.host ? g_conn.host : env_or_null("HG_HOST");
  const char *port_s = g_conn.port ? g_conn.port : env_or_null("HG_PORT");
  uint64_t key_id = 0, port = HG_CLIENT_DEFAULT_PORT, tmo = 5000;
  if (key == NULL || sec == NULL) {
    fprintf(stderr, "hgctl %s: no API key: give --key-id and --secret (or set HG_KEY_ID and "
                    "HG_SECRET)\n", cmd);
    return EXIT_USAGE;
  }
  if (!unum(key, UINT64_MAX, &key_id) || key_id == 0) {
    fprintf(stderr, "hgctl %s: key id '%s' is not a positive number\n", cmd, key);
    return EXIT_USAGE;
  }
  if (port_s && (!unum(port_s, 65535, &port) || port == 0)) {
    fprintf(stderr, "hgctl %s: %s '%s' is not in 1..65535\n", cmd,
            g_conn.port ? "port" : "HG_PORT", port_s);
    return EXIT_USAGE;
  }
  if (g_conn.timeout && (!unum(g_conn.timeout, 3600000, &tmo) || tmo == 0)) {
    fprintf(stderr, "hgctl %s: timeout '%s' is not in 1..3600000 ms\n", cmd, g_conn.timeout);
    return EXIT_USAGE;
  }
  g_timeout_ms = (int)tmo;
  uint8_t secret[64];
  int n = hg_client_parse_hex(sec, secret, sizeof secret);
  if (n < 0) {
    fprintf(stderr, "hgctl %s: the secret must be hex, 2 to 128 digits\n", cmd);
    return EXIT_USAGE;
  }
  hg_client_config_t cfg;
  hg_client_config_init(&cfg);
  cfg.host = host ? host : HG_CLIENT_DEFAULT_HOST;
  cfg.port = (uint16_t)port;
  cfg.key_id = key_id;
  cfg.secret = secret;
  cfg.secret_len = (size_t)n;
  cfg.timeout_ms = (uint32_t)tmo;
  hg_client_t *c = NULL;
  int rc = hg_client_create(&cfg, &c);
  memset(secret, 0, sizeof secret);
  if (rc != 0) {
    fprintf(stderr, "hgctl %s: %s\n", cmd, hg_strerror(rc));
    return EXIT_FAIL;
  }
  rc = hg_client_connect(c);
  if (rc == HG_EAUTH) {
    uint32_t code = 0;
    bool term = false;
    char text[128];
    hg_client_login_reject(c, &code, &term, text, sizeof text);
    static const char *const why[] = {"?", "authentication failed (unknown key or wrong secret)",
                                      "clock skew above 5 s", "session id reused",
                                      "this key already has a live session",
                                      "the gateway's session limit is reached",
                                      "invalid login", "key store unavailable"};
    fprintf(stderr, "hgctl %s: login refused: %s%s%s\n", cmd,
            !term && code < sizeof why / sizeof why[0] ? why[code] : "terminated",
            text[0] ? ": " : "", text);
    hg_client_destroy(c);
    return EXIT_FAIL;
  }
  if (rc != 0) {
    fprintf(stderr, "hgctl %s: cannot connect to %s:%u: %s\n", cmd, cfg.host, (unsigned)port,
            hg_strerror(rc));
    hg_client_destroy(c);
    return EXIT_FAIL;
  }
  *out = c;
  return 0;
}

static void close_session(hg_client_t *c) {
  hg_client_logout(c, 1000);
  hg_client_destroy(c);
}

/* ---------------------------------------------------------------- names */

/* The wire name of value v of enum d without its prefix, lower case
 * ("REJ_PRICE_BAND" -> "price_band"), in buf; "other" if the schema has no
 * such value. One table (hourglass.proto) names every code. */
static const char *enum_name(const ProtobufCEnumDescriptor *d, const char *prefix, uint32_t v,
                             char *buf, size_t len) {
  const ProtobufCEnumValue *e = v <= INT32_MAX ? protobuf_c_enum_descriptor_get_value(d, (int)v) : NULL;
  if (e == NULL) return "other";
  const char *n = e->name;
  size_t pl = strlen(prefix);
  if (strncmp(n, prefix, pl) == 0) n += pl;
  size_t i = 0;
  for (; n[i] != '\0' && i + 1 < len; i++) buf[i] = (char)tolower((unsigned char)n[i]);
  buf[i] = '\0';
  return buf;
}

/* Each returns its own static buffer: valid until its next call, so one
 * printf may show one reject and one cancel name. */
static const char *reject_name(uint32_t r) {
  static char buf[48];
  return enum_name(&hourglass__v1__reject_reason__descriptor, "REJ_", r, buf, sizeof buf);
}

static const char *cancel_name(uint32_t r) {
  static char buf[48];
  return enum_name(&hourglass__v1__cancel_reason__descriptor, "CXL_", r, buf, sizeof buf);
}

/* The settlement command a SettlementResult answers: the name of its field
 * in Command's body ("daily_settlement"). */
static const char *command_name(uint32_t c) {
  const ProtobufCFieldDescriptor *f =
      protobuf_c_message_descriptor_get_field(&hourglass__v1__command__descriptor, c);
  return f != NULL ? f->name : "other";
}

static const char *fixing_status_name(uint32_t s) {
  static char buf[32];
  return enum_name(&hourglass__v1__fixing_status__descriptor, "FIXING_", s, buf, sizeof buf);
}

static const char *fixing_kind_name(uint32_t k) {
  static const char *const n[] = {"none", "computed", "carried", "external", "no_fix"};
  return k < sizeof n / sizeof n[0] ? n[k] : "other";
}

static const char *fixing_outcome_name(uint32_t k) {
  static const char *const n[] = {"none", "published", "restated", "unchanged", "finalized"};
  return k < sizeof n / sizeof n[0] ? n[k] : "other";
}

static const char *exec_name(uint32_t t) {
  static const char *const n[] = {"?", "NEW", "REJECTED", "FILL", "CANCELLED", "REPLACED"};
  return t < sizeof n / sizeof n[0] ? n[t] : "?";
}

static void print_exec(const env_t *e) {
  const Hourglass__V1__ExecutionReport *r = e->execution_report;
  printf("%s seq=%" PRIu64 " instrument=%u order_id=%" PRIu64 " clordid=%" PRIu64,
         exec_name(r->exec_type), e->seq, r->instrument_id, r->order_id, r->client_order_id);
  if (r->has_side) printf(" side=%s", r->side == HOURGLASS__V1__SIDE__SIDE_SELL ? "sell" : "buy");
  printf(" price=%s qty=%" PRId64 " leaves=%" PRId64, px(r->price), r->qty, r->leaves);
  if (r->exec_type == HOURGLASS__V1__EXEC_TYPE__EXEC_REJECTED)
    printf(" reason=%s(%u)", reject_name(r->reason), r->reason);
  if (r->has_risk_equity) {
    /* low/high are prices for a band reject, position limits otherwise. */
    printf(" equity=%s initial_margin=%s ref_price=%s position=%" PRId64, usd(r->risk_equity),
           usd(r->risk_initial_margin), px(r->risk_ref_price), r->risk_position);
    if (r->reason == HOURGLASS__V1__REJECT_REASON__REJ_RISK_PRICE_BAND)
      printf(" low=%s high=%s", px(r->risk_low), px(r->risk_high));
    else
      printf(" low=%" PRId64 " high=%" PRId64, r->risk_low, r->risk_high);
  }
  if (r->exec_type == HOURGLASS__V1__EXEC_TYPE__EXEC_CANCELLED)
    printf(" reason=%s(%u)", cancel_name(r->reason), r->reason);
  if (r->exec_type == HOURGLASS__V1__EXEC_TYPE__EXEC_FILL) printf(" maker=%d", r->maker ? 1 : 0);
  if (r->drop_copy) printf(" account=%u", r->account);
  if (r->ref_seq) printf(" ref_seq=%" PRIu64, r->ref_seq);
  if (r->ts) {
    char t[HGCTL_FMT_LEN];
    if (g_raw) printf(" ts=%" PRIu64, r->ts);
    else printf(" time=%s", hgctl_fmt_time(r->ts, t));
  }
  printf("\n");
  fflush(stdout);
}

/* Receives until a frame answers request seq (ExecutionReport or Response
 * with that ref_seq, or the given body with that ref_seq). Returns 1 and *e,
 * or EXIT_FAIL after printing why. */
static int await_reply(const char *cmd, hg_client_t *c, uint64_t seq, const env_t **e) {
  for (;;) {
    int rc = hg_client_recv(c, g_timeout_ms, e);
    if (rc == 0) {
      fprintf(stderr, "hgctl %s: no reply within %d ms\n", cmd, g_timeout_ms);
      return EXIT_FAIL;
    }
    if (rc < 0) {
      fprintf(stderr, "hgctl %s: connection lost: %s\n", cmd, hg_strerror(rc));
      return EXIT_FAIL;
    }
    const env_t *f = *e;
    uint64_t ref = 0;
    switch (f->body_case) {
    case BODY(EXECUTION_REPORT): ref = f->execution_report->ref_seq; break;
    case BODY(RESPONSE): ref = f->response->ref_seq; break;
    case BODY(POSITIONS): ref = f->positions->ref_seq; break;
    case BODY(INSTRUMENT_LIST): ref = f->instrument_list->ref_seq; break;
    case BODY(ORDER_STATUS): ref = f->order_status->ref_seq; break;
    case BODY(MD_SNAPSHOT): ref = f->md_snapshot->ref_seq; break;
    case BODY(SETTLEMENT_RESULT): ref = f->settlement_result->ref_seq; break;
    case BODY(STATEMENT): ref = f->statement->ref_seq; break;
    case BODY(TERMINATE):
      fprintf(stderr, "hgctl %s: the gateway ended the session (code %u%s%s)\n", cmd,
              f->terminate->code, f->terminate->text ? ": " : "",
              f->terminate->text ? f->terminate->text : "");
      return EXIT_FAIL;
    default: break;
    }
    if (ref == seq) return 1;
  }
}

/* A Response's verdict; prints why on a refusal. */
static int response_status(const char *cmd, const env_t *e) {
  if (e->body_case != BODY(RESPONSE) || e->response->reason == 0) return 0;
  fprintf(stderr, "hgctl %s: refused: %s (%u)%s%s\n", cmd, reject_name(e->response->reason),
          e->response->reason, e->response->text ? ": " : "",
          e->response->text ? e->response->text : "");
  return EXIT_FAIL;
}

/* Prints every report of this order (or of this request) that follows
 * within settle_ms, e.g. the fills after a NEW. */
static void print_followers(hg_client_t *c, uint64_t seq, uint64_t order_id, int settle_ms) {
  for (;;) {
    const env_t *e = NULL;
    if (hg_client_recv(c, settle_ms, &e) != 1) return;
    if (e->body_case != BODY(EXECUTION_REPORT)) continue;
    const Hourglass__V1__ExecutionReport *r = e->execution_report;
    if (r->ref_seq == seq || (order_id && r->order_id == order_id)) print_exec(e);
  }
}

/* ------------------------------------------------------------- commands */

static int instrument_by_symbol(const char *cmd, hg_client_t *c, const char *sym, uint32_t *id);

static int resolve_instrument(const char *cmd, hg_client_t *c, const char *val, uint32_t *id) {
  int64_t v;
  if (num(val, 1, UINT32_MAX, &v)) {
    *id = (uint32_t)v;
    return 0;
  }
  return instrument_by_symbol(cmd, c, val, id);
}

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
  int rc = parse(cmd, argc, argv, opts, sizeof opts / sizeof opts[0], NULL, 0, usage);
  if (rc) return rc;
  hg_client_order_t o = {0};
  int64_t v;
  if (side == NULL || (strcmp(side, "buy") != 0 && strcmp(side, "sell") != 0)) {
    fprintf(stderr, "hgctl %s: --side must be buy or sell\n", cmd);
    return EXIT_USAGE;
  }
  o.side = strcmp(side, "sell") == 0 ? HOURGLASS__V1__SIDE__SIDE_SELL : HOURGLASS__V1__SIDE__SIDE_BUY;
  if ((rc = need_num(cmd, "qty", qty, 1, INT64_MAX, &v))) return rc;
  o.qty = v;
  o.type = HOURGLASS__V1__ORD_TYPE__ORD_TYPE_LIMIT;
  if (type && strcmp(type, "market") == 0) o.type = HOURGLASS__V1__ORD_TYPE__ORD_TYPE_MARKET;
  else if (type && strcmp(type, "limit") != 0) {
    fprintf(stderr, "hgctl %s: --type must be limit or market\n", cmd);
    return EXIT_USAGE;
  }
  if (o.type == HOURGLASS__V1__ORD_TYPE__ORD_TYPE_LIMIT) {
    if ((rc = need_price(cmd, "price", price, INT64_MIN, &v))) return rc;
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
    if (!unum(clordid, INT64_MAX, &u)) {
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
  if ((rc = open_session(cmd, &c))) return rc;
  if ((rc = resolve_instrument(cmd, c, instr, &o.instrument_id))) {
    close_session(c);
    return rc;
  }
  uint64_t seq = 0;
  const env_t *e = NULL;
  rc = hg_client_new_order(c, &o, &seq);
  if (rc != 0) {
    fprintf(stderr, "hgctl %s: send failed: %s\n", cmd, hg_strerror(rc));
    close_session(c);
    return EXIT_FAIL;
  }
  if ((rc = await_reply(cmd, c, seq, &e)) != 1) {
    close_session(c);
    return rc;
  }
  int status = response_status(cmd, e);
  if (e->body_case == BODY(EXECUTION_REPORT)) {
    print_exec(e);
    uint64_t oid = e->execution_report->order_id;
    status = e->execution_report->exec_type == HOURGLASS__V1__EXEC_TYPE__EXEC_REJECTED ? EXIT_FAIL : 0;
    print_followers(c, seq, oid, 200);
  }
  close_session(c);
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
  if ((rc = await_reply(cmd, c, seq, &e)) != 1) return rc;
  int status = response_status(cmd, e);
  if (e->body_case == BODY(EXECUTION_REPORT)) {
    print_exec(e);
    status = e->execution_report->exec_type == HOURGLASS__V1__EXEC_TYPE__EXEC_REJECTED ? EXIT_FAIL : 0;
    print_followers(c, seq, e->execution_report->order_id, 100);
  }
  return status;
}

static int cancel_or_replace(int argc, char **argv, int kind) {
  const char *cmd = kind == 0 ? "order cancel" : "order replace";
  const char *instr = NULL, *oid = NULL, *price = NULL, *qty = NULL;
  const opt_t opts[] = {CONN_OPTS,
                        {"instrument", &instr, NULL},
                        {"order-id", &oid, NULL},
                        {"price", &price, NULL},
                        {"qty", &qty, NULL}};
  const char *usage = kind == 0 ? "order cancel --instrument ID|SYMBOL --order-id N\n"
                                : "order replace --instrument ID|SYMBOL --order-id N --price USD "
                                  "--qty N\n";
  int rc = parse(cmd, argc, argv, opts, kind == 0 ? CONN_NOPTS + 2 : CONN_NOPTS + 4, NULL, 0,
                 usage);
  if (rc) return rc;
  int64_t id, price_ticks = 0, q = 0;
  if (instr == NULL) {
    fprintf(stderr, "hgctl %s: --instrument is required\n", cmd);
    return EXIT_USAGE;
  }
  if ((rc = need_num(cmd, "order-id", oid, 1, INT64_MAX, &id))) return rc;
  if (kind == 1) {
    if ((rc = need_price(cmd, "price", price, INT64_MIN, &price_ticks))) return rc;
    if ((rc = need_num(cmd, "qty", qty, 1, INT64_MAX, &q))) return rc;
  }
  hg_client_t *c = NULL;
  if ((rc = open_session(cmd, &c))) return rc;
  uint32_t iid = 0;
  rc = resolve_instrument(cmd, c, instr, &iid);
  if (rc == 0) rc = order_request(cmd, c, kind, iid, (uint64_t)id, price_ticks, q);
  close_session(c);
  return rc;
}

int hgctl_order_cancel(int argc, char **argv) { return cancel_or_replace(argc, argv, 0); }
int hgctl_order_replace(int argc, char **argv) { return cancel_or_replace(argc, argv, 1); }

int hgctl_order_mass_cancel(int argc, char **argv) {
  const char *cmd = "order mass-cancel";
  const char *instr = NULL, *side = NULL;
  const opt_t opts[] = {CONN_OPTS, {"instrument", &instr, NULL}, {"side", &side, NULL}};
  const char *usage = "order mass-cancel [--instrument ID|SYMBOL] [--side buy|sell|both]\n";
  int rc = parse(cmd, argc, argv, opts, sizeof opts / sizeof opts[0], NULL, 0, usage);
  if (rc) return rc;
  uint32_t sides = HOURGLASS__V1__SIDE_FILTER__SIDES_BOTH;
  if (side && strcmp(side, "buy") == 0) sides = HOURGLASS__V1__SIDE_FILTER__SIDES_BUY;
  else if (side && strcmp(side, "sell") == 0) sides = HOURGLASS__V1__SIDE_FILTER__SIDES_SELL;
  else if (side && strcmp(side, "both") != 0) {
    fprintf(stderr, "hgctl %s: --side must be buy, sell or both\n", cmd);
    return EXIT_USAGE;
  }
  hg_client_t *c = NULL;
  if ((rc = open_session(cmd, &c))) return rc;
  uint32_t iid = 0;
  if (instr && (rc = resolve_instrument(cmd, c, instr, &iid))) {
    close_session(c);
    return rc;
  }
  uint64_t seq = 0;
  rc = hg_client_mass_cancel(c, iid, sides, &seq);
  if (rc != 0) {
    fprintf(stderr, "hgctl %s: send failed: %s\n", cmd, hg_strerror(rc));
    close_session(c);
    return EXIT_FAIL;
  }
  /* The gateway answers with a Response after the cancels (which carry
   * reason mass_cancel but may have no ref_seq); stop at that Response, or
   * after a quiet spell if none comes. */
  int status = 0, cancelled = 0;
  for (;;) {
    const env_t *e = NULL;
    int r = hg_client_recv(c, cancelled ? 300 : g_timeout_ms, &e);
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
      status = response_status(cmd, e);
      break;
    }
    if (e->body_case != BODY(EXECUTION_REPORT)) continue;
    const Hourglass__V1__ExecutionReport *x = e->execution_report;
    bool mine = x->ref_seq == seq ||
                (x->ref_seq == 0 && x->exec_type == HOURGLASS__V1__EXEC_TYPE__EXEC_CANCELLED &&
                 x->reason == HOURGLASS__V1__CANCEL_REASON__CXL_MASS_CANCEL);
    if (!mine) continue;
    print_exec(e);
    if (x->exec_type == HOURGLASS__V1__EXEC_TYPE__EXEC_REJECTED) {
      status = EXIT_FAIL;
      break;
    }
    cancelled++;
  }
  printf("cancelled %d order%s\n", cancelled, cancelled == 1 ? "" : "s");
  close_session(c);
  return status;
}

/* Fetches the instrument list (caller's arena until the next recv). */
static int fetch_instruments(const char *cmd, hg_client_t *c, const Hourglass__V1__InstrumentList **out) {
  uint64_t seq = 0;
  int rc = hg_client_instruments(c, &seq);
  if (rc != 0) {
    fprintf(stderr, "hgctl %s: send failed: %s\n", cmd, hg_strerror(rc));
    return EXIT_FAIL;
  }
  const env_t *e = NULL;
  if ((rc = await_reply(cmd, c, seq, &e)) != 1) return rc;
  if ((rc = response_status(cmd, e))) return rc;
  if (e->body_case != BODY(INSTRUMENT_LIST)) {
    fprintf(stderr, "hgctl %s: unexpected reply to the instrument list request\n", cmd);
    return EXIT_FAIL;
  }
  *out = e->instrument_list;
  return 0;
}

static int instrument_by_symbol(const char *cmd, hg_client_t *c, const char *sym, uint32_t *id) {
  const Hourglass__V1__InstrumentList *l = NULL;
  int rc = fetch_instruments(cmd, c, &l);
  if (rc) return rc;
  for (size_t i = 0; i < l->n_instruments; i++) {
    if (strcmp(l->instruments[i]->symbol, sym) == 0) {
      *id = l->instruments[i]->instrument_id;
      return 0;
    }
  }
  fprintf(stderr, "hgctl %s: no instrument '%s' (hgctl instruments lists them)\n", cmd, sym);
  return EXIT_FAIL;
}

static const char *state_name(uint32_t s) {
  return s == 1 ? "trading" : s == 2 ? "halted" : s == 3 ? "delisted" : "?";
}

static int list_instruments(const char *cmd, int argc, char **argv) {
  char usage[48];
  snprintf(usage, sizeof usage, "%s\n", cmd);
  const opt_t opts[] = {CONN_OPTS};
  int rc = parse(cmd, argc, argv, opts, sizeof opts / sizeof opts[0], NULL, 0, usage);
  if (rc) return rc;
  hg_client_t *c = NULL;
  if ((rc = open_session(cmd, &c))) return rc;
  const Hourglass__V1__InstrumentList *l = NULL;
  if ((rc = fetch_instruments(cmd, c, &l)) == 0) {
    /* tick, min and max in one unit: USD per GPU-hour (raw: the wire's
     * micro-USD tick value and prices in ticks). */
    printf("%-6s %-20s %-8s %-8s %10s %8s %10s %10s %12s %s\n", "id", "symbol", "grade", "month",
           g_raw ? "tick" : "tick_usd", "unit", g_raw ? "min" : "min_usd",
           g_raw ? "max" : "max_usd", "max_qty", "state");
    for (size_t i = 0; i < l->n_instruments; i++) {
      const Hourglass__V1__InstrumentInfo *x = l->instruments[i];
      char tick[HGCTL_FMT_LEN];
      if (g_raw) snprintf(tick, sizeof tick, "%" PRId64, x->tick_size);
      else if (x->tick_size % HG_INDEX_TICK_MICRO_USD == 0)
        hgctl_fmt_price(x->tick_size / HG_INDEX_TICK_MICRO_USD, tick);
      else hgctl_fmt_decimal(x->tick_size, 6, tick);
      printf("%-6u %-20s %-8s %-8s %10s %8" PRId64 " %10s %10s %12" PRId64 " %s\n",
             x->instrument_id, x->symbol, x->grade ? x->grade : "-",
             x->delivery_month ? x->delivery_month : "-", tick, x->contract_unit,
             px(x->min_price), px(x->max_price), x->max_order_qty, state_name(x->state));
    }
  }
  close_session(c);
  return rc;
}

int hgctl_instruments(int argc, char **argv) { return list_instruments("instruments", argc, argv); }
int hgctl_op_list(int argc, char **argv) { return list_instruments("op list", argc, argv); }

/* Symbols of the listed instruments, fetched before a reply that names
 * instruments by id (a reply lives only until the next receive). */
#define SYMS_MAX 1024
typedef struct syms {
  uint32_t n;
  uint32_t id[SYMS_MAX];
  char sym[SYMS_MAX][40];
} syms_t;

static int fetch_symbols(const char *cmd, hg_client_t *c, syms_t *t) {
  const Hourglass__V1__InstrumentList *l = NULL;
  int rc = fetch_instruments(cmd, c, &l);
  if (rc) return rc;
  t->n = 0;
  for (size_t i = 0; i < l->n_instruments && t->n < SYMS_MAX; i++, t->n++) {
    t->id[t->n] = l->instruments[i]->instrument_id;
    snprintf(t->sym[t->n], sizeof t->sym[t->n], "%s",
             l->instruments[i]->symbol ? l->instruments[i]->symbol : "-");
  }
  return 0;
}

static const char *symbol_of(const syms_t *t, uint32_t id) {
  for (uint32_t i = 0; i < t->n; i++)
    if (t->id[i] == id) return t->sym[i];
  return "-";
}

int hgctl_positions(int argc, char **argv) {
  const char *cmd = "positions";
  const char *account = NULL;
  const opt_t opts[] = {CONN_OPTS, {"account", &account, NULL}};
  int rc = parse(cmd, argc, argv, opts, sizeof opts / sizeof opts[0], NULL, 0,
                 "positions [--account N (risk viewers: an account of the own firm)]\n");
  if (rc) return rc;
  int64_t acc = 0;
  if (account && (rc = need_num(cmd, "account", account, 1, UINT32_MAX, &acc))) return rc;
  hg_client_t *c = NULL;
  if ((rc = open_session(cmd, &c))) return rc;
  static syms_t syms;
  if ((rc = fetch_symbols(cmd, c, &syms))) {
    close_session(c);
    return rc;
  }
  uint64_t seq = 0;
  const env_t *e = NULL;
  rc = hg_client_positions(c, (uint32_t)acc, &seq);
  if (rc != 0) {
    fprintf(stderr, "hgctl %s: send failed: %s\n", cmd, hg_strerror(rc));
    rc = EXIT_FAIL;
  } else if ((rc = await_reply(cmd, c, seq, &e)) == 1 && (rc = response_status(cmd, e)) == 0) {
    const Hourglass__V1__Positions *p = e->positions;
    if (p->reason != 0) {
      fprintf(stderr, "hgctl %s: refused: %s (%u)\n", cmd, reject_name(p->reason), p->reason);
      rc = EXIT_FAIL;
    } else {
      printf("account %u cash %s %s\n", p->account, usd(p->cash), g_raw ? "micro-USD" : "USD");
      printf("%-10s %-20s %10s %10s %10s\n", "instrument", "symbol", "net", "bought", "sold");
      for (size_t i = 0; i < p->n_positions; i++) {
        const Hourglass__V1__Position *x = p->positions[i];
        printf("%-10u %-20s %10" PRId64 " %10" PRId64 " %10" PRId64 "\n", x->instrument_id,
               symbol_of(&syms, x->instrument_id), x->net_qty, x->bought_qty, x->sold_qty);
      }
    }
  }
  close_session(c);
  return rc;
}

static volatile sig_atomic_t g_stop;
static void on_signal(int sig) {
  (void)sig;
  g_stop = 1;
}

int hgctl_executions(int argc, char **argv) {
  const char *cmd = "executions";
  const char *last = NULL;
  bool follow = false;
  const opt_t opts[] = {CONN_OPTS, {"last", &last, NULL}, {"follow", NULL, &follow}};
  int rc = parse(cmd, argc, argv, opts, sizeof opts / sizeof opts[0], NULL, 0,
                 "executions [--last N (default 20)] [--follow]\n");
  if (rc) return rc;
  int64_t n = 20;
  if (last && (rc = need_num(cmd, "last", last, 0, 1000, &n))) return rc;
  hg_client_t *c = NULL;
  if ((rc = open_session(cmd, &c))) return rc;
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  /* The last n frames of this key's stream, then (with --follow) live ones. */
  uint64_t next = hg_client_session(c)->login_next_seq;
  uint64_t from = next > (uint64_t)n ? next - (uint64_t)n : 1;
  uint32_t count = (uint32_t)(next - from);
  uint32_t left = 0;
  if (count > 0) {
    rc = hg_client_retransmit(c, from, count);
    if (rc != 0) {
      fprintf(stderr, "hgctl %s: %s\n", cmd, hg_strerror(rc));
      close_session(c);
      return EXIT_FAIL;
    }
    left = count + 1; /* the header, then count frames */
  }
  rc = 0;
  while (!g_stop && (follow || left > 0)) {
    const env_t *e = NULL;
    int r = hg_client_recv(c, follow ? 500 : g_timeout_ms, &e);
    if (r == 0) {
      if (follow) continue;
      fprintf(stderr, "hgctl %s: the gateway did not resend the history in time\n", cmd);
      rc = EXIT_FAIL;
      break;
    }
    if (r < 0) {
      if (r == -EINTR) continue;
      fprintf(stderr, "hgctl %s: connection lost: %s\n", cmd, hg_strerror(r));
      rc = EXIT_FAIL;
      break;
    }
    if (e->body_case == BODY(TERMINATE)) {
      fprintf(stderr, "hgctl %s: the gateway ended the session (code %u)\n", cmd,
              e->terminate->code);
      rc = EXIT_FAIL;
      break;
    }
    if (e->body_case == BODY(RETRANSMISSION)) {
      if (e->retransmission->reason != 0) {
        fprintf(stderr, "hgctl %s: history not available (%s)\n", cmd,
                reject_name(e->retransmission->reason));
        left = 0;
      } else if (left > 0) {
        left = e->retransmission->count;
      }
      continue;
    }
    if (e->has_seq && left > 0 && e->seq < next) left--;
    if (e->body_case == BODY(EXECUTION_REPORT)) {
      print_exec(e);
      if (follow) fflush(stdout); /* a tail is read as it happens, often through a pipe */
    }
  }
  close_session(c);
  return rc;
}

/* ----------------------------------------------------------------- orders */

/* The protocol answers an order's status by id (OrderStatusRequest) and has
 * no "all open orders" request, so `hgctl orders` finds the candidates in
 * the key's own stream (retransmitted from seq 1, 1000 frames a request):
 * every order id of a NEW report, less those a CANCELLED or a FILL with
 * leaves 0 ended. Each remaining one is asked for its status, so what is
 * printed is live now. If the gateway no longer keeps the stream's start
 * (REJ_RETRANSMIT_EXPIRED), orders entered before the kept part are not
 * seen: hgctl says so and exits 1. */
typedef struct order_ref {
  uint64_t oid;
  uint32_t instrument;
} order_ref_t;

static int cmp_oid(const void *a, const void *b) {
  uint64_t x = ((const order_ref_t *)a)->oid, y = ((const order_ref_t *)b)->oid;
  return x < y ? -1 : x > y;
}

static int push_ref(order_ref_t **v, size_t *n, size_t *cap, uint64_t oid, uint32_t inst) {
  if (*n == *cap) {
    size_t nc = *cap ? *cap * 2 : 256;
    order_ref_t *nv = realloc(*v, nc * sizeof *nv);
    if (nv == NULL) return -ENOMEM;
    *v = nv;
    *cap = nc;
  }
  (*v)[(*n)++] = (order_ref_t){oid, inst};
  return 0;
}

/* Reads the key's stream [from, next) into the new and ended order lists.
 * Returns 0 (with *expired set if the gateway no longer keeps its start),
 * or EXIT_FAIL after printing why. */
static int scan_stream(const char *cmd, hg_client_t *c, uint64_t next, order_ref_t **nv,
                       size_t *nn, size_t *ncap, order_ref_t **ev, size_t *en, size_t *ecap,
                       bool *expired) {
  uint64_t from = 1;
  *expired = false;
  while (from < next) {
    uint32_t count = next - from > 1000 ? 1000 : (uint32_t)(next - from);
    int rc = hg_client_retransmit(c, from, count);
    if (rc != 0) {
      fprintf(stderr, "hgctl %s: %s\n", cmd, hg_strerror(rc));
      return EXIT_FAIL;
    }
    uint32_t left = count + 1; /* the header, then count frames */
    while (left > 0) {
      const env_t *e = NULL;
      int r = hg_client_recv(c, g_timeout_ms, &e);
      if (r == -EINTR) continue;
      if (r <= 0) {
        fprintf(stderr, "hgctl %s: %s while reading the order history\n", cmd,
                r == 0 ? "no reply" : hg_strerror(r));
        return EXIT_FAIL;
      }
      if (e->body_case == BODY(TERMINATE)) {
        fprintf(stderr, "hgctl %s: the gateway ended the session (code %u)\n", cmd,
                e->terminate->code);
        return EXIT_FAIL;
      }
      if (e->body_case == BODY(RETRANSMISSION)) {
        uint32_t why = e->retransmission->reason;
        if (why == HOURGLASS__V1__REJECT_REASON__REJ_RETRANSMIT_EXPIRED) {
          /* The start is gone: look for the oldest part still kept. */
          *expired = true;
          left = 0;
          count = (uint32_t)((next - from + 1) / 2);
          if (count == 0) count = 1;
        } else if (why != 0) {
          fprintf(stderr, "hgctl %s: order history not available (%s)\n", cmd, reject_name(why));
          return EXIT_FAIL;
        } else {
          left = e->retransmission->count;
          count = e->retransmission->count;
        }
        continue;
      }
      if (!e->has_seq || e->seq >= next) continue; /* live traffic */
      left--;
      if (e->body_case != BODY(EXECUTION_REPORT)) continue;
      const Hourglass__V1__ExecutionReport *x = e->execution_report;
      bool ended = x->exec_type == HOURGLASS__V1__EXEC_TYPE__EXEC_CANCELLED ||
                   (x->exec_type == HOURGLASS__V1__EXEC_TYPE__EXEC_FILL && x->leaves == 0);
      int pr = 0;
      if (x->exec_type == HOURGLASS__V1__EXEC_TYPE__EXEC_NEW && x->order_id)
        pr = push_ref(nv, nn, ncap, x->order_id, x->instrument_id);
      else if (ended && x->order_id)
        pr = push_ref(ev, en, ecap, x->order_id, x->instrument_id);
      if (pr != 0) {
        fprintf(stderr, "hgctl %s: out of memory\n", cmd);
        return EXIT_FAIL;
      }
    }
    if (count == 0) {
      fprintf(stderr, "hgctl %s: the gateway resent no frame from seq %" PRIu64 "\n", cmd, from);
      return EXIT_FAIL;
    }
    from += count;
  }
  return 0;
}

int hgctl_orders(int argc, char **argv) {
  const char *cmd = "orders";
  const opt_t opts[] = {CONN_OPTS};
  int rc = parse(cmd, argc, argv, opts, sizeof opts / sizeof opts[0], NULL, 0,
                 "orders   (this key's live orders: price, quantity, what is left)\n");
  if (rc) return rc;
  hg_client_t *c = NULL;
  if ((rc = open_session(cmd, &c))) return rc;
  static syms_t syms;
  order_ref_t *nv = NULL, *ev = NULL;
  size_t nn = 0, ncap = 0, en = 0, ecap = 0;
  bool expired = false;
  if ((rc = fetch_symbols(cmd, c, &syms)) == 0)
    rc = scan_stream(cmd, c, hg_client_session(c)->login_next_seq, &nv, &nn, &ncap, &ev, &en,
                     &ecap, &expired);
  if (rc == 0) {
    qsort(ev, en, sizeof *ev, cmp_oid);
    printf("%-12s %-20s %-4s %10s %10s %10s %-6s %s\n", "order_id", "symbol", "side",
           g_raw ? "price" : "price_usd", "qty", "leaves", "group", "clordid");
  }
  for (size_t i = 0; rc == 0 && i < nn; i++) {
    if (en > 0 && bsearch(&nv[i], ev, en, sizeof *ev, cmp_oid) != NULL) continue;
    uint64_t seq = 0;
    const env_t *e = NULL;
    if (hg_client_order_status(c, nv[i].instrument, nv[i].oid, &seq) != 0) {
      fprintf(stderr, "hgctl %s: send failed\n", cmd);
      rc = EXIT_FAIL;
      break;
    }
    if ((rc = await_reply(cmd, c, seq, &e)) != 1) break;
    rc = response_status(cmd, e);
    if (rc != 0 || e->body_case != BODY(ORDER_STATUS)) {
      if (rc == 0) rc = EXIT_FAIL;
      break;
    }
    const Hourglass__V1__OrderStatus *st = e->order_status;
    if (!st->live) continue;
    char group[12] = "-";
    if (st->quote_group) snprintf(group, sizeof group, "%u", st->quote_group);
    printf("%-12" PRIu64 " %-20s %-4s %10s %10" PRId64 " %10" PRId64 " %-6s %" PRIu64 "\n",
           st->order_id, symbol_of(&syms, st->instrument_id),
           st->side == HOURGLASS__V1__SIDE__SIDE_SELL ? "sell" : "buy", px(st->price), st->qty,
           st->leaves, group, st->client_order_id);
  }
  fflush(stdout);
  if (rc == 0 && expired) {
    fprintf(stderr, "hgctl %s: the gateway no longer keeps all of this key's history: orders "
                    "entered in the part it dropped may be missing above\n", cmd);
    rc = EXIT_FAIL;
  }
  free(nv);
  free(ev);
  close_session(c);
  return rc;
}

/* ----------------------------------------------------------------- ladder */

#define LADDER_MAX 50

typedef struct book_side {
  int64_t px[LADDER_MAX], qty[LADDER_MAX];
  int n;
} book_side_t;

/* Sets price's aggregate (0 removes); keeps best first (bids high, asks low). */
static void side_set(book_side_t *s, bool bids, int64_t px, int64_t qty) {
  int i = 0;
  while (i < s->n && s->px[i] != px) i++;
  if (i < s->n) {
    if (qty > 0) {
      s->qty[i] = qty;
      return;
    }
    memmove(&s->px[i], &s->px[i + 1], (size_t)(s->n - i - 1) * sizeof s->px[0]);
    memmove(&s->qty[i], &s->qty[i + 1], (size_t)(s->n - i - 1) * sizeof s->qty[0]);
    s->n--;
    return;
  }
  if (qty <= 0) return;
  int at = 0;
  while (at < s->n && (bids ? s->px[at] > px : s->px[at] < px)) at++;
  if (at >= LADDER_MAX) return; /* beyond the depth shown */
  int keep = s->n < LADDER_MAX ? s->n : LADDER_MAX - 1;
  memmove(&s->px[at + 1], &s->px[at], (size_t)(keep - at) * sizeof s->px[0]);
  memmove(&s->qty[at + 1], &s->qty[at], (size_t)(keep - at) * sizeof s->qty[0]);
  s->px[at] = px;
  s->qty[at] = qty;
  s->n = keep + 1;
}

static void draw(const char *sym, uint32_t id, const book_side_t *b, const book_side_t *a,
                 int depth, uint64_t md_seq, uint32_t state, int64_t last_px, int64_t last_qty,
                 bool clear) {
  if (clear) fputs("\033[H\033[2J", stdout);
  printf("%s (id %u)  md_seq %" PRIu64 "  %s", sym, id, md_seq, state_name(state));
  if (last_qty > 0) printf("  last %" PRId64 " x %s", last_qty, px(last_px));
  printf("\n%12s %12s | %-12s %-12s\n", "bid qty", "bid", "ask", "ask qty");
  for (int i = 0; i < depth; i++) {
    char bq[24] = "", bp[HGCTL_FMT_LEN] = "", ap[HGCTL_FMT_LEN] = "", aq[24] = "";
    if (i < b->n) {
      snprintf(bq, sizeof bq, "%" PRId64, b->qty[i]);
      snprintf(bp, sizeof bp, "%s", px(b->px[i]));
    }
    if (i < a->n) {
      snprintf(ap, sizeof ap, "%s", px(a->px[i]));
      snprintf(aq, sizeof aq, "%" PRId64, a->qty[i]);
    }
    if (i >= b->n && i >= a->n) break;
    printf("%12s %12s | %-12s %-12s\n", bq, bp, ap, aq);
  }
  fflush(stdout);
}

int hgctl_ladder(int argc, char **argv) {
  const char *cmd = "ladder";
  const char *depth_s = NULL, *pos[1] = {NULL};
  bool once = false;
  const opt_t opts[] = {CONN_OPTS, {"depth", &depth_s, NULL}, {"once", NULL, &once}};
  int rc = parse(cmd, argc, argv, opts, sizeof opts / sizeof opts[0], pos, 1,
                 "ladder SYMBOL|ID [--depth N (1..50, default 10)] [--once]\n");
  if (rc) return rc;
  if (pos[0] == NULL) {
    fprintf(stderr, "hgctl %s: which instrument? (hgctl ladder SYMBOL)\n", cmd);
    return EXIT_USAGE;
  }
  int64_t depth = 10;
  if (depth_s && (rc = need_num(cmd, "depth", depth_s, 1, LADDER_MAX, &depth))) return rc;
  hg_client_t *c = NULL;
  if ((rc = open_session(cmd, &c))) return rc;
  uint32_t id = 0;
  if ((rc = resolve_instrument(cmd, c, pos[0], &id))) {
    close_session(c);
    return rc;
  }
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  bool tty = isatty(STDOUT_FILENO) && !once;
  static book_side_t bids, asks;
  uint64_t md_seq = 0, sub_seq = 0;
  uint32_t state = 0;
  int64_t last_px = 0, last_qty = 0;
  bool have = false, dirty = false;
  struct timespec last_draw = {0, 0};
  rc = hg_client_md_subscribe(c, id, (uint32_t)depth, &sub_seq);
  while (rc == 0 && !g_stop) {
    const env_t *e = NULL;
    int r = hg_client_recv(c, 100, &e);
    if (r < 0) {
      if (r == -EINTR) continue;
      fprintf(stderr, "hgctl %s: connection lost: %s\n", cmd, hg_strerror(r));
      rc = EXIT_FAIL;
      break;
    }
    if (r == 1) {
      switch (e->body_case) {
      case BODY(MD_SNAPSHOT): {
        const Hourglass__V1__MarketDataSnapshot *s = e->md_snapshot;
        if (s->instrument_id != id) break;
        if (s->reason != 0) {
          fprintf(stderr, "hgctl %s: subscription refused: %s (%u)\n", cmd, reject_name(s->reason),
                  s->reason);
          rc = EXIT_FAIL;
          break;
        }
        bids.n = asks.n = 0;
        for (size_t i = 0; i < s->n_bids && i < LADDER_MAX; i++)
          side_set(&bids, true, s->bids[i]->price, s->bids[i]->qty);
        for (size_t i = 0; i < s->n_asks && i < LADDER_MAX; i++)
          side_set(&asks, false, s->asks[i]->price, s->asks[i]->qty);
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
          side_set(e->md_level->side == HOURGLASS__V1__SIDE__SIDE_SELL ? &asks : &bids,
                   e->md_level->side != HOURGLASS__V1__SIDE__SIDE_SELL, e->md_level->price,
                   e->md_level->qty);
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
      draw(pos[0], id, &bids, &asks, (int)depth, md_seq, state, last_px, last_qty, false);
      break;
    }
    /* Redraw at most 20 times a second. */
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long ms = (now.tv_sec - last_draw.tv_sec) * 1000 + (now.tv_nsec - last_draw.tv_nsec) / 1000000;
    if (dirty && have && ms >= 50) {
      draw(pos[0], id, &bids, &asks, (int)depth, md_seq, state, last_px, last_qty, tty);
      if (!tty) puts("");
      dirty = false;
      last_draw = now;
    }
  }
  if (rc < 0) {
    fprintf(stderr, "hgctl %s: send failed: %s\n", cmd, hg_strerror(rc));
    rc = EXIT_FAIL;
  }
  close_session(c);
  return rc;
}

/* ------------------------------------------------------ operator (op) */

/* Waits for the SettlementResult of seq and prints it as KEY=value; a
 * refusal (or a role reject Response) also goes to stderr. 0 or EXIT_FAIL. */
static int settle_reply(const char *cmd, hg_client_t *c, uint64_t seq) {
  const env_t *e = NULL;
  for (;;) {
    int rc = await_reply(cmd, c, seq, &e);
    if (rc != 1) return rc;
    if (e->body_case == BODY(RESPONSE)) return response_status(cmd, e);
    if (e->body_case == BODY(SETTLEMENT_RESULT) && e->settlement_result->ref_seq == seq) break;
  }
  const Hourglass__V1__SettlementResult *r = e->settlement_result;
  char day[11] = "";
  if (r->has_day) hg_index_day_format(r->day, day);
  if (g_raw) printf("RESULT command=%u", r->command);
  else printf("RESULT command=%s", command_name(r->command));
  printf(" reason=%s(%u) engine_seq=%" PRIu64, reject_name(r->reason), r->reason, r->engine_seq);
  if (r->has_day) printf(" day=%s", day);
  if (r->has_samples_accepted)
    printf(" samples_accepted=%u samples_staged=%u", r->samples_accepted, r->samples_staged);
  if (r->has_samples_discarded) printf(" samples_discarded=%u", r->samples_discarded);
  if (r->has_fixing_value && g_raw)
    printf(" fixing=%s tier=%u status=%u kind=%u outcome=%u inputs=%u", index_usd(r->fixing_value),
           r->fixing_tier, r->fixing_status, r->fixing_kind, r->fixing_outcome, r->fixing_inputs);
  else if (r->has_fixing_value)
    printf(" fixing=%s tier=%u status=%s kind=%s outcome=%s inputs=%u", index_usd(r->fixing_value),
           r->fixing_tier, fixing_status_name(r->fixing_status), fixing_kind_name(r->fixing_kind),
           fixing_outcome_name(r->fixing_outcome), r->fixing_inputs);
  if (r->has_contracts_settled)
    printf(" contracts=%u vm_sum=%s vm_paid=%s vm_received=%s vm_entries=%u day_orders_expired=%" PRId64,
           r->contracts_settled, usd(r->vm_sum), usd(r->vm_paid), usd(r->vm_received), r->vm_entries,
           r->day_orders_expired);
  if (r->has_fsp)
    printf(" instrument=%u fsp=%s positions_closed=%u final_sum=%s", r->instrument_id, px(r->fsp),
           r->positions_closed, usd(r->final_sum));
  if (r->error) printf(" error=%d", r->error);
  printf("\n");
  for (size_t i = 0; i < r->n_contracts; i++)
    printf("DSP instrument=%u dsp=%s tier=%u\n", r->contracts[i]->instrument_id,
           px(r->contracts[i]->dsp), r->contracts[i]->tier);
  for (size_t i = 0; i < r->n_missing; i++) {
    hg_index_day_format(r->missing[i]->day, day);
    if (g_raw) printf("MISSING day=%s status=%u\n", day, r->missing[i]->status);
    else printf("MISSING day=%s status=%s\n", day, fixing_status_name(r->missing[i]->status));
  }
  for (size_t i = 0; i < r->n_listed; i++) printf("LISTED instrument=%u\n", r->listed[i]);
  fflush(stdout);
  if (r->reason != 0) {
    fprintf(stderr, "hgctl %s: refused: %s (%u)%s%s\n", cmd, reject_name(r->reason), r->reason,
            r->text ? ": " : "", r->text ? r->text : "");
    return EXIT_FAIL;
  }
  return 0;
}

static int parse_day(const char *cmd, const char *s, int32_t *day) {
  if (s == NULL || strlen(s) != 10 || hg_index_day_parse(s, 10, day) != 0) {
    fprintf(stderr, "hgctl %s: --day must be YYYY-MM-DD\n", cmd);
    return EXIT_USAGE;
  }
  return 0;
}

int hgctl_op_settle(int argc, char **argv) {
  const char *cmd = "op settle", *day_s = NULL;
  const opt_t opts[] = {CONN_OPTS, {"day", &day_s, NULL}};
  int rc = parse(cmd, argc, argv, opts, sizeof opts / sizeof opts[0], NULL, 0,
                 "op settle --day YYYY-MM-DD   (the 16:00 UTC daily cycle of that day)\n");
  int32_t day = 0;
  if (rc || (rc = parse_day(cmd, day_s, &day))) return rc;
  hg_client_t *c = NULL;
  if ((rc = open_session(cmd, &c))) return rc;
  uint64_t seq = 0;
  rc = hg_client_daily_settlement(c, day, &seq);
  rc = rc == 0 ? settle_reply(cmd, c, seq) : EXIT_FAIL;
  close_session(c);
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
  int rc = parse(cmd, argc, argv, opts, sizeof opts / sizeof opts[0], pos, 1, usage);
  if (rc || (rc = which_instrument(cmd, instr, pos[0], &pos[0]))) return rc;
  hg_client_t *c = NULL;
  if ((rc = open_session(cmd, &c))) return rc;
  uint32_t id = 0;
  uint64_t seq = 0;
  rc = resolve_instrument(cmd, c, pos[0], &id);
  if (rc == 0) rc = send(c, id, &seq) == 0 ? reply(cmd, c, seq) : EXIT_FAIL;
  close_session(c);
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
  int rc = parse(cmd, argc, argv, opts, sizeof opts / sizeof opts[0], pos, 1, usage);
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
  if (publish && ((rc = need_money(cmd, "value", value, &v)) != 0)) return rc;
  if (publish && source == NULL) {
    fprintf(stderr, "hgctl %s: publish needs --source\n", cmd);
    return EXIT_USAGE;
  }
  hg_client_t *c = NULL;
  if ((rc = open_session(cmd, &c))) return rc;
  uint64_t seq = 0;
  if (publish) rc = hg_client_publish_fixing(c, gpu, grade, day, v, source, &seq);
  else if (verb[0] == 'c') rc = hg_client_compute_fixing(c, gpu, grade, day, &seq);
  else if (verb[0] == 'f') rc = hg_client_finalize_fixing(c, gpu, grade, day, &seq);
  else rc = hg_client_discard_samples(c, gpu, grade, day, &seq);
  rc = rc == 0 ? settle_reply(cmd, c, seq) : EXIT_FAIL;
  close_session(c);
  return rc;
}

static int slurp(const char *path, char **buf, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return -errno;
  size_t cap = 1 << 16, n = 0;
  char *b = malloc(cap);
  while (b != NULL) {
    if (n == cap) {
      char *nb = realloc(b, cap * 2);
      if (nb == NULL) break;
      b = nb;
      cap *= 2;
    }
    size_t r = fread(b + n, 1, cap - n, f);
    n += r;
    if (r == 0) {
      fclose(f);
      *buf = b;
      *len = n;
      return 0;
    }
  }
  free(b);
  fclose(f);
  return -ENOMEM;
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
  int rc = parse(cmd, argc, argv, opts, sizeof opts / sizeof opts[0], NULL, 0, usage);
  int32_t day = 0;
  if (rc || (rc = parse_day(cmd, day_s, &day))) return rc;
  if (file == NULL || gpu == NULL || grade == NULL) {
    fprintf(stderr, "hgctl %s: --file, --gpu and --grade are required\n", cmd);
    return EXIT_USAGE;
  }
  char *buf = NULL;
  size_t len = 0;
  if ((rc = slurp(file, &buf, &len)) != 0) {
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
  if ((rc = open_session(cmd, &c))) {
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
  close_session(c);
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
  int rc = parse(cmd, argc, argv, opts, sizeof opts / sizeof opts[0] - (instr ? 0 : 1), pos,
                 instr ? 1 : 0, usage);
  if (rc) return rc;
  int64_t a = 0, b = 0;
  if (instr && (rc = which_instrument(cmd, instrument, pos[0], &pos[0]))) return rc;
  if (!instr) {
    if ((rc = need_num(cmd, "account", account, 1, UINT32_MAX, &a))) return rc;
    if (strcmp(verb, "add-account") == 0) rc = need_num(cmd, "firm", firm, 1, UINT32_MAX, &b);
    else rc = need_money(cmd, "amount", amount, &b);
    if (rc) return rc;
  }
  hg_client_t *c = NULL;
  if ((rc = open_session(cmd, &c))) return rc;
  uint64_t seq = 0;
  uint32_t id = 0;
  if (instr) {
    rc = resolve_instrument(cmd, c, pos[0], &id);
    if (rc == 0) rc = hg_client_halt(c, id, verb[0] == 'r', &seq);
  } else if (strcmp(verb, "add-account") == 0) {
    rc = hg_client_add_account(c, (uint32_t)a, (uint32_t)b, &seq);
  } else {
    rc = hg_client_cash(c, (uint32_t)a, b, false, &seq);
  }
  if (rc == 0) {
    const env_t *e = NULL;
    rc = await_reply(cmd, c, seq, &e);
    if (rc == 1) {
      rc = response_status(cmd, e);
      if (rc == 0) printf("OK %s engine_seq=%" PRIu64 "\n", verb, e->response->engine_seq);
    }
  } else if (rc != EXIT_FAIL && rc != EXIT_USAGE) {
    rc = EXIT_FAIL;
  }
  close_session(c);
  return rc;
}
int hgctl_op_halt(int argc, char **argv) { return op_simple("halt", argc, argv); }
int hgctl_op_resume(int argc, char **argv) { return op_simple("resume", argc, argv); }
int hgctl_op_add_account(int argc, char **argv) {
  return op_simple("add-account", argc, argv);
}
int hgctl_op_deposit(int argc, char **argv) { return op_simple("deposit", argc, argv); }

/* end-of-session, delist, withdraw: one operator command, one Response. */
static int op_reply(const char *cmd, const char *verb, hg_client_t *c, uint64_t seq) {
  const env_t *e = NULL;
  int rc = await_reply(cmd, c, seq, &e);
  if (rc != 1) return rc;
  if ((rc = response_status(cmd, e)) != 0) return rc;
  if (e->body_case == BODY(RESPONSE)) {
    printf("OK %s engine_seq=%" PRIu64, verb, e->response->engine_seq);
    if (e->response->amount) printf(" amount=%s", usd(e->response->amount));
    if (e->response->has_balance) printf(" balance=%s", usd(e->response->balance));
    printf("\n");
  }
  return 0;
}

int hgctl_op_end_of_session(int argc, char **argv) {
  const char *cmd = "op end-of-session", *day_s = NULL, *date = NULL;
  const opt_t opts[] = {CONN_OPTS, {"day", &day_s, NULL}, {"date", &date, NULL}};
  int rc = parse(cmd, argc, argv, opts, sizeof opts / sizeof opts[0], NULL, 0,
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
    d = strtol(day_s, NULL, 10) * 10000 + strtol(day_s + 5, NULL, 10) * 100 +
        strtol(day_s + 8, NULL, 10);
  } else if (date != NULL && (rc = need_num(cmd, "date", date, 19700101, 99991231, &d))) {
    return rc;
  }
  hg_client_t *c = NULL;
  if ((rc = open_session(cmd, &c))) return rc;
  uint64_t seq = 0;
  rc = hg_client_end_of_session(c, (uint32_t)d, &seq);
  rc = rc == 0 ? op_reply(cmd, "end-of-session", c, seq) : EXIT_FAIL;
  close_session(c);
  return rc;
}

static int delist_reply(const char *cmd, hg_client_t *c, uint64_t seq) {
  return op_reply(cmd, "delist", c, seq);
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
  int rc = parse(cmd, argc, argv, opts, sizeof opts / sizeof opts[0], NULL, 0,
                 "op withdraw --account N --amount USD\n");
  int64_t a = 0, b = 0;
  if (rc || (rc = need_num(cmd, "account", account, 1, UINT32_MAX, &a)) ||
      (rc = need_money(cmd, "amount", amount, &b)))
    return rc;
  hg_client_t *c = NULL;
  if ((rc = open_session(cmd, &c))) return rc;
  uint64_t seq = 0;
  rc = hg_client_cash(c, (uint32_t)a, b, true, &seq);
  rc = rc == 0 ? op_reply(cmd, "withdraw", c, seq) : EXIT_FAIL;
  close_session(c);
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
  int rc = parse(cmd, argc, argv, opts, sizeof opts / sizeof opts[0], NULL, 0, usage);
  if (rc) return rc;
  if (gpu == NULL || grade == NULL) {
    fprintf(stderr, "hgctl %s: --gpu and --grade are required\n", cmd);
    return EXIT_USAGE;
  }
  unsigned y = 0, m = 0;
  char tail;
  if (from == NULL || sscanf(from, "%4u-%2u%c", &y, &m, &tail) != 2 || y < 1970 || y > 9998 ||
      m < 1 || m > 12) {
    fprintf(stderr, "hgctl %s: --from must be YYYY-MM\n", cmd);
    return EXIT_USAGE;
  }
  int64_t id = 0, no = 65536, na = 1024, rp = 0;
  if ((rc = need_num(cmd, "first-id", first, 1, UINT32_MAX - 12, &id)) ||
      (mo && (rc = need_num(cmd, "max-orders", mo, 1, UINT32_MAX, &no))) ||
      (ma && (rc = need_num(cmd, "max-accounts", ma, 1, UINT32_MAX, &na))) ||
      (ref && (rc = need_price(cmd, "ref-price", ref, 0, &rp))))
    return rc;
  hg_client_t *c = NULL;
  if ((rc = open_session(cmd, &c))) return rc;
  uint64_t seq = 0;
  rc = hg_client_list_curve(c, gpu, grade, y, m, (uint32_t)id, (uint32_t)no, (uint32_t)na, rp,
                            &seq);
  rc = rc == 0 ? settle_reply(cmd, c, seq) : EXIT_FAIL;
  close_session(c);
  return rc;
}

/* ------------------------------------------------------------ quotes */

/* One side of a quote, "QTY@PRICE" in [s, end): the price in USD (ticks
 * with --raw); "0@0" leaves the side unquoted. */
static bool quote_side(const char *s, const char *end, int64_t *qty, int64_t *price) {
  char buf[64];
  if (end <= s || (size_t)(end - s) >= sizeof buf) return false;
  memcpy(buf, s, (size_t)(end - s));
  buf[end - s] = '\0';
  char *at = strchr(buf, '@');
  if (at == NULL) return false;
  *at = '\0';
  if (!num(buf, 0, INT64_MAX, qty)) return false;
  if (g_raw) return num(at + 1, 0, INT64_MAX, price);
  return hgctl_decimal_parse(at + 1, 3, 1, price) == 0;
}

/* "SYMBOL:BIDQTY@BID/ASKQTY@ASK" (either side may be "0@0": unquoted). */
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
            cmd, s, g_raw ? "ticks" : "USD per GPU-hour, e.g. 10@3.400/10@3.440");
    return EXIT_USAGE;
  }
  snprintf(sym, sizeof sym, "%.*s", (int)(colon - s), s);
  hourglass__v1__quote_entry__init(q);
  int rc = resolve_instrument(cmd, c, sym, &q->instrument_id);
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
  const char *group = NULL, *mmp_qty = NULL, *mmp_win = NULL;
  const opt_t opts[] = {CONN_OPTS, {"group", &group, NULL}, {"mmp-qty", &mmp_qty, NULL},
                        {"mmp-window-ms", &mmp_win, NULL}};
  const char *usage =
      "quote --group G --quote SYMBOL:BIDQTY@BID/ASKQTY@ASK [--quote ...]   (prices in USD)\n"
      "            [--mmp-qty Q --mmp-window-ms MS]   (market makers; replaces the quotes)\n"
      "       hgctl quote reset --group G   (re-enables a group pulled by protection)\n";
  int rc = parse(cmd, nr, rest, opts, sizeof opts / sizeof opts[0], NULL, 0, usage);
  int64_t g = 0, mq = 0, mw = 0;
  if (rc || (rc = need_num(cmd, "group", group, 1, UINT32_MAX, &g)) ||
      (mmp_qty && (rc = need_num(cmd, "mmp-qty", mmp_qty, 1, INT64_MAX, &mq))) ||
      (mmp_win && (rc = need_num(cmd, "mmp-window-ms", mmp_win, 1, UINT32_MAX, &mw))))
    return rc;
  if (!reset && nq == 0) {
    fprintf(stderr, "hgctl %s: give at least one --quote\n", cmd);
    return EXIT_USAGE;
  }
  hg_client_t *c = NULL;
  if ((rc = open_session(cmd, &c))) return rc;
  uint64_t seq = 0;
  const env_t *e = NULL;
  if (reset) {
    rc = hg_client_quote_group_reset(c, (uint32_t)g, &seq);
    if (rc == 0) rc = op_reply(cmd, "quote-reset", c, seq);
    else rc = EXIT_FAIL;
    close_session(c);
    return rc;
  }
  Hourglass__V1__QuoteEntry q[QUOTES_MAX];
  const Hourglass__V1__QuoteEntry *qp[QUOTES_MAX];
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
  /* The MassQuoteAck, then the quotes' reports (NEW, fills) for a moment. */
  while (rc == 0) {
    int r = hg_client_recv(c, g_timeout_ms, &e);
    if (r <= 0) {
      fprintf(stderr, "hgctl %s: no acknowledgement within %d ms\n", cmd, g_timeout_ms);
      rc = EXIT_FAIL;
      break;
    }
    if (e->body_case == BODY(EXECUTION_REPORT) && e->execution_report->ref_seq == seq) {
      print_exec(e);
    } else if (e->body_case == BODY(RESPONSE) && e->response->ref_seq == seq) {
      rc = response_status(cmd, e);
      break;
    } else if (e->body_case == BODY(MASS_QUOTE_ACK) && e->mass_quote_ack->ref_seq == seq) {
      const Hourglass__V1__MassQuoteAck *a = e->mass_quote_ack;
      printf("ACK group=%u reason=%s(%u) rejects=%zu\n", a->quote_group, reject_name(a->reason),
             a->reason, a->n_rejects);
      for (size_t k = 0; k < a->n_rejects; k++)
        printf("REJECT quote=%s reason=%s(%u)\n", quotes[a->rejects[k]->index < (uint32_t)nq
                                                             ? a->rejects[k]->index
                                                             : 0],
               reject_name(a->rejects[k]->reason), a->rejects[k]->reason);
      fflush(stdout);
      if (a->reason != 0) {
        fprintf(stderr, "hgctl %s: refused: %s (%u)\n", cmd, reject_name(a->reason), a->reason);
        rc = EXIT_FAIL;
        break;
      }
      rc = a->n_rejects > 0 ? EXIT_FAIL : 0; /* a is gone after the next receive */
      print_followers(c, seq, 0, 200);
      break;
    } else if (e->body_case == BODY(TERMINATE)) {
      fprintf(stderr, "hgctl %s: the gateway ended the session (code %u)\n", cmd,
              e->terminate->code);
      rc = EXIT_FAIL;
    }
  }
  close_session(c);
  return rc;
}

/* ---------------------------------------------------------- drop copy */

int hgctl_dropcopy(int argc, char **argv) {
  const char *cmd = "dropcopy", *count_s = NULL;
  const opt_t opts[] = {CONN_OPTS, {"count", &count_s, NULL}};
  int rc = parse(cmd, argc, argv, opts, sizeof opts / sizeof opts[0], NULL, 0,
                 "dropcopy [--count N]   (risk viewers: the firm's order events, one line\n"
                 "          each, until interrupted or N events)\n");
  int64_t count = 0;
  if (rc || (count_s && (rc = need_num(cmd, "count", count_s, 1, INT64_MAX, &count)))) return rc;
  hg_client_t *c = NULL;
  if ((rc = open_session(cmd, &c))) return rc;
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  uint64_t seq = 0;
  const env_t *e = NULL;
  rc = hg_client_drop_copy(c, &seq);
  if (rc != 0) {
    fprintf(stderr, "hgctl %s: send failed: %s\n", cmd, hg_strerror(rc));
    close_session(c);
    return EXIT_FAIL;
  }
  if ((rc = await_reply(cmd, c, seq, &e)) != 1 || (rc = response_status(cmd, e)) != 0) {
    close_session(c);
    return rc;
  }
  printf("SUBSCRIBED\n");
  fflush(stdout);
  int64_t seen = 0;
  while (!g_stop && (count == 0 || seen < count)) {
    int r = hg_client_recv(c, 500, &e);
    if (r == 0 || r == -EINTR) continue;
    if (r < 0) {
      fprintf(stderr, "hgctl %s: connection lost: %s\n", cmd, hg_strerror(r));
      rc = EXIT_FAIL;
      break;
    }
    if (e->body_case == BODY(TERMINATE)) {
      fprintf(stderr, "hgctl %s: the gateway ended the session (code %u)\n", cmd,
              e->terminate->code);
      rc = EXIT_FAIL;
      break;
    }
    if (e->body_case == BODY(EXECUTION_REPORT) && e->execution_report->drop_copy) {
      print_exec(e);
      seen++;
    }
  }
  close_session(c);
  return rc;
}

/* ---------------------------------------------------------- statement */

/* Fetches every page of the account's statement and prints it with the
 * same writer as `hgctl statement --data`. */
int hgctl_statement_remote(int argc, char **argv) {
  const char *cmd = "statement", *account = NULL, *instr = NULL, *fmt = NULL;
  bool remote = false;
  const opt_t opts[] = {CONN_OPTS,
                        {"remote", NULL, &remote},
                        {"account", &account, NULL},
                        {"instrument", &instr, NULL},
                        {"format", &fmt, NULL}};
  int rc = parse(cmd, argc, argv, opts, sizeof opts / sizeof opts[0], NULL, 0,
                 "statement --remote [--account N] [--instrument I] [--format csv|json]\n"
                 "  the statement of the own account (risk viewers: --account of the own\n"
                 "  firm) from the gateway, in the format of `hgctl statement --data`\n");
  int64_t acc = 0, inst = 0;
  if (rc || (account && (rc = need_num(cmd, "account", account, 1, UINT32_MAX, &acc))) ||
      (instr && (rc = need_num(cmd, "instrument", instr, 1, UINT32_MAX - 1, &inst))))
    return rc;
  bool json = fmt != NULL && strcmp(fmt, "json") == 0;
  if (fmt != NULL && !json && strcmp(fmt, "csv") != 0) {
    fprintf(stderr, "hgctl %s: --format must be csv or json\n", cmd);
    return EXIT_USAGE;
  }
  hg_client_t *c = NULL;
  if ((rc = open_session(cmd, &c))) return rc;
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
    if ((rc = await_reply(cmd, c, seq, &e)) != 1) break;
    if (e->body_case != BODY(STATEMENT)) {
      rc = response_status(cmd, e);
      if (rc == 0) rc = EXIT_FAIL;
      break;
    }
    rc = 0;
    const Hourglass__V1__Statement *s = e->statement;
    if (s->reason != 0) {
      fprintf(stderr, "hgctl %s: refused: %s (%u)\n", cmd, reject_name(s->reason), s->reason);
      rc = EXIT_FAIL;
      break;
    }
    who = s->account;
    if (n + s->n_entries > cap) {
      size_t ncap = cap ? cap * 2 : 1024;
      while (ncap < n + s->n_entries) ncap *= 2;
      hg_ledger_entry_t *ne = realloc(ent, ncap * sizeof *ne);
      if (ne == NULL) {
        fprintf(stderr, "hgctl %s: out of memory\n", cmd);
        rc = EXIT_FAIL;
        break;
      }
      ent = ne;
      cap = ncap;
    }
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
  close_session(c);
  if (rc == 0) {
    rc = hgctl_statement_print(ent, n, who, inst ? (uint32_t)inst : HG_CLR_NO_INSTRUMENT, json,
                               stdout);
    if (rc != 0) {
      fprintf(stderr, "hgctl %s: %s\n", cmd, hg_strerror(rc));
      rc = EXIT_FAIL;
    }
  }
  free(ent);
  return rc;
}
