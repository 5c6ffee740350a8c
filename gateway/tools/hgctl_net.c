/*
 * hgctl_net.c - what hgctl's network commands share: option parsing, the
 * units a value is typed and printed in, the session with the gateway
 * (hourglass/client.h), waiting for the reply to a request and printing
 * reports, and the instrument list. The commands themselves are in
 * hgctl_trade.c (order entry, orders, book, positions, quotes), hgctl_op.c
 * (operator and settlement commands) and hgctl_risk.c (drop copy, remote
 * statements).
 *
 * Each command opens one session (address from --host/--port or the
 * environment HG_HOST/HG_PORT, as the Python client reads them; key from
 * --key-id/--secret or HG_KEY_ID/HG_SECRET, secret in hex; TLS from --tls
 * and --ca or HG_TLS and HG_CA, with --tls-name, --tls-cert, --tls-key or
 * HG_TLS_NAME, HG_TLS_CERT, HG_TLS_KEY; a cluster's other nodes from
 * --nodes or HG_NODES, and a follower's LOGIN_NOT_LEADER followed to the
 * leader by the client library; an option wins over the
 * environment), sends its request, prints
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
#include "hgctl_net_util.h"
#include "hgctl_fmt.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "hourglass/error.h"
#include "hourglass/hmac.h"
/* ------------------------------------------------------------- options */

conn_t net_conn;
/* --raw: prices in ticks, money in micro-USD, times in ns, in and out. */
bool net_raw;

static const char CONN_HELP[] =
    "connection: --host H (127.0.0.1) --port P (7700) --key-id ID --secret HEX\n"
    "            (or HG_HOST, HG_PORT, HG_KEY_ID, HG_SECRET in the environment)\n"
    "            --timeout MS (5000)\n"
    "cluster:    --nodes H:P,H:P,... (HG_NODES): the other nodes, tried in turn when the\n"
    "            one given is down; a follower's LOGIN_NOT_LEADER is followed to the leader\n"
    "tls:        --tls (HG_TLS=1), --ca FILE (HG_CA; implies --tls): CAs to trust, else the\n"
    "            system's; --tls-name NAME (HG_TLS_NAME): name the certificate must carry,\n"
    "            else the host; --tls-cert FILE --tls-key FILE (HG_TLS_CERT, HG_TLS_KEY):\n"
    "            a client certificate for gateways that require one\n"
    "units:      prices in USD per GPU-hour (3 decimals, tick 0.001), money in USD,\n"
    "            times in UTC; --raw: ticks, micro-USD and ns as on the wire, in and out\n";

/* Parses --name value / --name=value / --flag; positional arguments go to
 * pos[0..npos). Returns 0, or EXIT_USAGE after printing why. */
int net_parse(const char *cmd, int argc, char **argv, const opt_t *opts, size_t n,
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
bool net_num(const char *s, int64_t lo, int64_t hi, int64_t *out) {
  if (s == NULL || *s == '\0') return false;
  char *end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

bool net_unum(const char *s, uint64_t hi, uint64_t *out) {
  if (s == NULL || *s == '\0' || *s == '-') return false;
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || *end != '\0' || v > hi) return false;
  *out = v;
  return true;
}

int net_need_num(const char *cmd, const char *name, const char *s, int64_t lo, int64_t hi,
                 int64_t *out) {
  if (s == NULL) {
    fprintf(stderr, "hgctl %s: --%s is required\n", cmd, name);
    return EXIT_USAGE;
  }
  if (!net_num(s, lo, hi, out)) {
    fprintf(stderr, "hgctl %s: --%s '%s' is not a number in %" PRId64 "..%" PRId64 "\n", cmd,
            name, s, lo, hi);
    return EXIT_USAGE;
  }
  return 0;
}

/* A price in USD per GPU-hour typed as a whole number from this many ticks
 * (1000 USD) up is taken for ticks typed without --raw. */
#define HGCTL_TICKS_TYPO_MIN 1000000

/* A price option in USD per GPU-hour ("3.42"), above zero; or in ticks
 * from lo up with --raw. */
int net_need_price(const char *cmd, const char *name, const char *s, int64_t lo,
                   int64_t *out) {
  if (net_raw || s == NULL) return net_need_num(cmd, name, s, lo, INT64_MAX, out);
  int rc = hgctl_decimal_parse(s, 3, 0, out);
  if (rc != 0) {
    fprintf(stderr, "hgctl %s: --%s '%s' %s\n", cmd, name, s, hgctl_decimal_error(rc, 3));
    return EXIT_USAGE;
  }
  /* A whole number of 1000 or more is ticks typed without --raw: no
   * contract trades at 1000 USD per GPU-hour. */
  if (strchr(s, '.') == NULL && *out >= HGCTL_TICKS_TYPO_MIN) {
    char ticks[HGCTL_FMT_LEN];
    fprintf(stderr, "hgctl %s: --%s '%s' is %s USD per GPU-hour: did you mean %s? (prices are "
                    "in USD per GPU-hour; --raw takes ticks)\n", cmd, name, s, s,
            hgctl_fmt_price(*out / 1000, ticks));
    return EXIT_USAGE;
  }
  return 0;
}

/* A money option in USD ("1250.50", up to 6 decimals), or micro-USD with
 * --raw; above zero. */
int net_need_money(const char *cmd, const char *name, const char *s, int64_t *out) {
  if (net_raw || s == NULL) return net_need_num(cmd, name, s, 1, INT64_MAX, out);
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

const char *net_px(int64_t ticks) { return hgctl_fmt_price_raw(ticks, net_raw, fmt_buf()); }

const char *net_usd(int64_t micro) { return hgctl_fmt_money_raw(micro, net_raw, fmt_buf()); }

/* An index value (micro-USD per GPU-hour): USD with six decimals. */
const char *net_index_usd(int64_t micro) {
  char *b = fmt_buf();
  if (!net_raw) return hgctl_fmt_decimal(micro, 6, b);
  snprintf(b, HGCTL_FMT_LEN, "%" PRId64, micro);
  return b;
}

/* --------------------------------------------------------------- session */

int net_timeout_ms = 5000;

/* Builds the client from the connection options and logs in. */
static const char *env_or_null(const char *name) {
  const char *v = getenv(name);
  return v != NULL && v[0] != '\0' ? v : NULL;
}

static const char *net_nodes; /* the node list of the session, NULL: none */

static uint64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* A failed login worth trying again: a cluster electing its leader (a node
 * that knows no leader, or that leads but does not take orders yet) or,
 * with a node list, nodes that did not answer (the leader just died). */
static bool during_election(hg_client_t *c, int rc) {
  if (rc == HG_EAUTH) {
    uint32_t code = 0;
    bool term = false;
    char text[8];
    return hg_client_login_reject(c, &code, &term, text, sizeof text) == 0 && !term &&
           code == HOURGLASS__V1__LOGIN_REJECT_CODE__LOGIN_NOT_LEADER;
  }
  return rc != 0 && net_nodes != NULL && net_nodes[0] != '\0';
}

/* Logs c in, again every 50 ms while the cluster elects a leader, for up
 * to timeout_ms. hg_client_connect's result. */
static int login_retrying(hg_client_t *c, int timeout_ms) {
  uint64_t end = mono_ms() + (uint64_t)timeout_ms;
  int rc;
  while ((rc = hg_client_connect(c)) != 0 && during_election(c, rc) && !net_stop &&
         mono_ms() + 50 < end)
    usleep(50000);
  return rc;
}

bool net_stream_lost(int r, const env_t *e) {
  if (r < 0) return r != -EINTR;
  return r > 0 && e->body_case == BODY(TERMINATE) &&
         e->terminate->code == HOURGLASS__V1__TERMINATE_CODE__TERM_NOT_LEADER;
}

int net_reconnect(const char *cmd, hg_client_t *c, int r) {
  fprintf(stderr, "hgctl %s: %s: logging in again\n", cmd,
          r < 0 ? hg_strerror(r) : "the node no longer takes orders");
  int rc = login_retrying(c, net_timeout_ms);
  char at[80];
  hg_client_address(c, at, sizeof at);
  if (rc != 0) {
    fprintf(stderr, "hgctl %s: cannot log in again within %d ms (the last tried: %s): %s\n",
            cmd, net_timeout_ms, at, hg_strerror(rc));
    return EXIT_FAIL;
  }
  fprintf(stderr, "hgctl %s: logged in again at %s\n", cmd, at);
  return 0;
}

int net_open_session(const char *cmd, hg_client_t **out) {
  const char *key = net_conn.key_id ? net_conn.key_id : getenv("HG_KEY_ID");
  const char *sec = net_conn.secret ? net_conn.secret : getenv("HG_SECRET");
  const char *host = net_conn.host ? net_conn.host : env_or_null("HG_HOST");
  const char *port_s = net_conn.port ? net_conn.port : env_or_null("HG_PORT");
  uint64_t key_id = 0, port = HG_CLIENT_DEFAULT_PORT, tmo = 5000;
  if (key == NULL || sec == NULL) {
    fprintf(stderr, "hgctl %s: no API key: give --key-id and --secret (or set HG_KEY_ID and "
                    "HG_SECRET)\n", cmd);
    return EXIT_USAGE;
  }
  if (!net_unum(key, UINT64_MAX, &key_id) || key_id == 0) {
    fprintf(stderr, "hgctl %s: key id '%s' is not a positive number\n", cmd, key);
    return EXIT_USAGE;
  }
  if (port_s && (!net_unum(port_s, 65535, &port) || port == 0)) {
    fprintf(stderr, "hgctl %s: %s '%s' is not in 1..65535\n", cmd,
            net_conn.port ? "port" : "HG_PORT", port_s);
    return EXIT_USAGE;
  }
  if (net_conn.timeout && (!net_unum(net_conn.timeout, 3600000, &tmo) || tmo == 0)) {
    fprintf(stderr, "hgctl %s: timeout '%s' is not in 1..3600000 ms\n", cmd, net_conn.timeout);
    return EXIT_USAGE;
  }
  net_timeout_ms = (int)tmo;
  uint8_t secret[HG_WIRE_SECRET_MAX];
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
  cfg.nodes = net_conn.nodes ? net_conn.nodes : env_or_null("HG_NODES");
  const char *tls_env = env_or_null("HG_TLS");
  cfg.tls_ca_file = net_conn.ca ? net_conn.ca : env_or_null("HG_CA");
  cfg.tls_server_name = net_conn.tls_name ? net_conn.tls_name : env_or_null("HG_TLS_NAME");
  cfg.tls_cert = net_conn.tls_cert ? net_conn.tls_cert : env_or_null("HG_TLS_CERT");
  cfg.tls_key = net_conn.tls_key ? net_conn.tls_key : env_or_null("HG_TLS_KEY");
  cfg.tls = net_conn.tls || cfg.tls_ca_file != NULL ||
            (tls_env != NULL && strcmp(tls_env, "0") != 0 && strcmp(tls_env, "no") != 0);
  hg_client_t *c = NULL;
  int rc = hg_client_create(&cfg, &c);
  hg_wipe(secret, sizeof secret);
  if (rc == HG_ETLS) {
    fprintf(stderr, "hgctl %s: cannot read the TLS files (--ca %s, --tls-cert %s, --tls-key %s)\n",
            cmd, cfg.tls_ca_file ? cfg.tls_ca_file : "-", cfg.tls_cert ? cfg.tls_cert : "-",
            cfg.tls_key ? cfg.tls_key : "-");
    return EXIT_FAIL;
  }
  if (rc != 0) {
    fprintf(stderr, "hgctl %s: %s\n", cmd, hg_strerror(rc));
    return EXIT_FAIL;
  }
  net_nodes = cfg.nodes;
  rc = login_retrying(c, (int)tmo);
  if (rc == HG_EAUTH) {
    uint32_t code = 0;
    bool term = false;
    char text[128];
    hg_client_login_reject(c, &code, &term, text, sizeof text);
    /* One reason: the gateway's text when it sent one, else the code's. */
    static const char *const why[] = {"?", "authentication failed (unknown key or wrong secret)",
                                      "clock skew above 5 s", "session id reused",
                                      "the key has as many live sessions as it may have",
                                      "the gateway's session limit is reached",
                                      "invalid login", "key store unavailable",
                                      "not the cluster's leader, and no leader is known: retry"};
    const char *reason = code == 1 && !term ? why[1]
                         : text[0]          ? text
                         : !term && code < sizeof why / sizeof why[0] ? why[code]
                                                                       : "terminated";
    fprintf(stderr, "hgctl %s: login refused: %s\n", cmd, reason);
    hg_client_destroy(c);
    return EXIT_FAIL;
  }
  if (rc != 0) {
    /* A TLS listener drops a plain client's first frame: say what to try. */
    bool maybe_tls = !cfg.tls && (rc == -ECONNRESET || rc == -EPIPE);
    /* With nodes the client went on through them: name them and the last. */
    char nodes[1200] = "", last[80];
    if (cfg.nodes != NULL && cfg.nodes[0] != '\0') {
      hg_client_address(c, last, sizeof last);
      snprintf(nodes, sizeof nodes, " nor to any of the nodes %s (the last tried: %s)", cfg.nodes,
               last);
    }
    fprintf(stderr, "hgctl %s: cannot connect to %s:%u%s: %s%s\n", cmd, cfg.host, (unsigned)port,
            nodes, hg_strerror(rc),
            maybe_tls ? " (if the port speaks TLS: --tls --ca FILE, or HG_TLS=1 HG_CA=FILE)" : "");
    hg_client_destroy(c);
    return EXIT_FAIL;
  }
  *out = c;
  return 0;
}

void net_close_session(hg_client_t *c) {
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
const char *net_reject_name(uint32_t r) {
  static char buf[48];
  return enum_name(&hourglass__v1__reject_reason__descriptor, "REJ_", r, buf, sizeof buf);
}

const char *net_cancel_name(uint32_t r) {
  static char buf[48];
  return enum_name(&hourglass__v1__cancel_reason__descriptor, "CXL_", r, buf, sizeof buf);
}

/* The settlement command a SettlementResult answers: the name of its field
 * in Command's body ("daily_settlement"). */
const char *net_command_name(uint32_t c) {
  const ProtobufCFieldDescriptor *f =
      protobuf_c_message_descriptor_get_field(&hourglass__v1__command__descriptor, c);
  return f != NULL ? f->name : "other";
}

const char *net_fixing_status_name(uint32_t s) {
  static char buf[32];
  return enum_name(&hourglass__v1__fixing_status__descriptor, "FIXING_", s, buf, sizeof buf);
}

const char *net_fixing_kind_name(uint32_t k) {
  static const char *const n[] = {"none", "computed", "carried", "external", "no_fix"};
  return k < sizeof n / sizeof n[0] ? n[k] : "other";
}

const char *net_fixing_outcome_name(uint32_t k) {
  static const char *const n[] = {"none", "published", "restated", "unchanged", "finalized"};
  return k < sizeof n / sizeof n[0] ? n[k] : "other";
}

static const char *exec_name(uint32_t t) {
  static const char *const n[] = {"?", "NEW", "REJECTED", "FILL", "CANCELLED", "REPLACED"};
  return t < sizeof n / sizeof n[0] ? n[t] : "?";
}

void net_print_exec(const env_t *e) {
  const Hourglass__V1__ExecutionReport *r = e->execution_report;
  printf("%s seq=%" PRIu64 " instrument=%u order_id=%" PRIu64 " clordid=%" PRIu64,
         exec_name(r->exec_type), e->seq, r->instrument_id, r->order_id, r->client_order_id);
  if (r->has_side) printf(" side=%s", r->side == HOURGLASS__V1__SIDE__SIDE_SELL ? "sell" : "buy");
  printf(" price=%s qty=%" PRId64 " leaves=%" PRId64, net_px(r->price), r->qty, r->leaves);
  if (r->exec_type == HOURGLASS__V1__EXEC_TYPE__EXEC_REJECTED)
    printf(" reason=%s(%u)", net_reject_name(r->reason), r->reason);
  if (r->has_risk_equity && r->reason == HOURGLASS__V1__REJECT_REASON__REJ_RISK_MARGIN_CALL) {
    /* A called or liquidating account (settlement/CONTRACT.md 4.6): its
     * figures at the last marks and the call; only reducing orders pass. */
    printf(" equity_at_marks=%s initial_margin_at_marks=%s call=%s (reduce only)",
           net_usd(r->risk_equity), net_usd(r->risk_initial_margin), net_usd(r->risk_high));
  } else if (r->has_risk_equity) {
    /* low/high are prices for a band reject, position limits otherwise. */
    printf(" equity=%s initial_margin=%s ref_price=%s position=%" PRId64, net_usd(r->risk_equity),
           net_usd(r->risk_initial_margin), net_px(r->risk_ref_price), r->risk_position);
    if (r->reason == HOURGLASS__V1__REJECT_REASON__REJ_RISK_PRICE_BAND)
      printf(" low=%s high=%s", net_px(r->risk_low), net_px(r->risk_high));
    else
      printf(" low=%" PRId64 " high=%" PRId64, r->risk_low, r->risk_high);
  }
  if (r->exec_type == HOURGLASS__V1__EXEC_TYPE__EXEC_CANCELLED)
    printf(" reason=%s(%u)", net_cancel_name(r->reason), r->reason);
  if (r->exec_type == HOURGLASS__V1__EXEC_TYPE__EXEC_FILL) printf(" maker=%d", r->maker ? 1 : 0);
  if (r->liquidation) printf(" liquidation=1"); /* the clearing's order (CONTRACT.md 4.6) */
  if (r->drop_copy) printf(" account=%u", r->account);
  /* The request a report answers: a wire number (with several sessions of
   * a key, above 2^32), so for scripts only. */
  if (r->ref_seq && net_raw) printf(" ref_seq=%" PRIu64, r->ref_seq);
  if (r->ts) {
    char t[HGCTL_FMT_LEN];
    if (net_raw) printf(" ts=%" PRIu64, r->ts);
    else printf(" time=%s", hgctl_fmt_time(r->ts, t));
  }
  printf("\n");
  fflush(stdout);
}

const hgctl_col_t *net_exec_cols(size_t *n) {
  static const hgctl_col_t usd[] = {
      {"exec_type", 1}, {"seq", 0},    {"instrument", 0}, {"symbol", 1}, {"order_id", 0},
      {"clordid", 0},   {"side", 1},   {"price_usd", 0},  {"qty", 0},    {"leaves", 0},
      {"maker", 0},     {"reason", 1}, {"account", 0},    {"time_utc", 1},
      {"liquidation", 0}};
  static const hgctl_col_t raw[] = {
      {"exec_type", 1}, {"seq", 0},    {"instrument", 0}, {"symbol", 1}, {"order_id", 0},
      {"clordid", 0},   {"side", 1},   {"price", 0},      {"qty", 0},    {"leaves", 0},
      {"maker", 0},     {"reason", 1}, {"account", 0},    {"ts", 0},
      {"liquidation", 0}};
  *n = sizeof usd / sizeof usd[0];
  return net_raw ? raw : usd;
}

void net_table_exec(hgctl_table_t *t, const env_t *e, const syms_t *syms) {
  const Hourglass__V1__ExecutionReport *r = e->execution_report;
  char seq[24], inst[16], oid[24], clid[24], qty[24], leaves[24], acct[16], ts[HGCTL_FMT_LEN];
  snprintf(seq, sizeof seq, "%" PRIu64, e->seq);
  snprintf(inst, sizeof inst, "%u", r->instrument_id);
  snprintf(oid, sizeof oid, "%" PRIu64, r->order_id);
  snprintf(clid, sizeof clid, "%" PRIu64, r->client_order_id);
  snprintf(qty, sizeof qty, "%" PRId64, r->qty);
  snprintf(leaves, sizeof leaves, "%" PRId64, r->leaves);
  snprintf(acct, sizeof acct, "%u", r->account);
  if (net_raw) snprintf(ts, sizeof ts, "%" PRIu64, r->ts);
  else hgctl_fmt_time(r->ts, ts);
  bool fill = r->exec_type == HOURGLASS__V1__EXEC_TYPE__EXEC_FILL;
  const char *reason = r->exec_type == HOURGLASS__V1__EXEC_TYPE__EXEC_REJECTED ? net_reject_name(r->reason)
                       : r->exec_type == HOURGLASS__V1__EXEC_TYPE__EXEC_CANCELLED
                           ? net_cancel_name(r->reason)
                           : NULL;
  const char *v[] = {exec_name(r->exec_type), seq, inst, net_symbol_of(syms, r->instrument_id), oid,
                     clid,
                     !r->has_side                                ? NULL
                     : r->side == HOURGLASS__V1__SIDE__SIDE_SELL ? "sell"
                                                                 : "buy",
                     net_px(r->price), qty, leaves, fill ? (r->maker ? "1" : "0") : NULL, reason,
                     r->drop_copy ? acct : NULL, r->ts ? ts : NULL,
                     /* a fill of the clearing's liquidation order (CONTRACT.md 4.6) */
                     fill ? (r->liquidation ? "1" : "0") : NULL};
  hgctl_table_row(t, v);
}

/* Receives until a frame answers request seq (ExecutionReport or Response
 * with that ref_seq, or the given body with that ref_seq). Returns 0 and *e,
 * or EXIT_FAIL after printing why. */
int net_await_reply(const char *cmd, hg_client_t *c, uint64_t seq, const env_t **e) {
  for (;;) {
    int rc = hg_client_recv(c, net_timeout_ms, e);
    if (rc == 0) {
      fprintf(stderr, "hgctl %s: no reply within %d ms\n", cmd, net_timeout_ms);
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
    case BODY(CLUSTER_STATUS): ref = f->cluster_status->ref_seq; break;
    case BODY(OPEN_ORDERS): ref = f->open_orders->ref_seq; break;
    case BODY(TERMINATE):
      fprintf(stderr, "hgctl %s: the gateway ended the session (code %u%s%s)\n", cmd,
              f->terminate->code, f->terminate->text ? ": " : "",
              f->terminate->text ? f->terminate->text : "");
      return EXIT_FAIL;
    default: break;
    }
    if (ref == seq) return 0;
  }
}

/* A Response's verdict; prints why on a refusal. */
int net_response_status(const char *cmd, const env_t *e) {
  if (e->body_case != BODY(RESPONSE) || e->response->reason == 0) return 0;
  fprintf(stderr, "hgctl %s: refused: %s (%u)%s%s\n", cmd, net_reject_name(e->response->reason),
          e->response->reason, e->response->text ? ": " : "",
          e->response->text ? e->response->text : "");
  return EXIT_FAIL;
}

bool net_stream_ended(const char *cmd, int r, const env_t *e) {
  if (r < 0) {
    fprintf(stderr, "hgctl %s: connection lost: %s\n", cmd, hg_strerror(r));
    return true;
  }
  if (e->body_case != BODY(TERMINATE)) return false;
  fprintf(stderr, "hgctl %s: the gateway ended the session (code %u)\n", cmd, e->terminate->code);
  return true;
}

/* Prints every report of this order (or of this request) that follows
 * within settle_ms, e.g. the fills after a NEW. */
void net_print_followers(hg_client_t *c, uint64_t seq, uint64_t order_id, int settle_ms) {
  for (;;) {
    const env_t *e = NULL;
    if (hg_client_recv(c, settle_ms, &e) != 1) return;
    if (e->body_case != BODY(EXECUTION_REPORT)) continue;
    const Hourglass__V1__ExecutionReport *r = e->execution_report;
    if (r->ref_seq == seq || (order_id && r->order_id == order_id)) net_print_exec(e);
  }
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
  if ((rc = net_await_reply(cmd, c, seq, &e)) != 0) return rc;
  if ((rc = net_response_status(cmd, e))) return rc;
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
    /* Symbols are upper case; b200.a.2027-03 names the same contract. */
    if (strcasecmp(l->instruments[i]->symbol, sym) == 0) {
      *id = l->instruments[i]->instrument_id;
      return 0;
    }
  }
  fprintf(stderr, "hgctl %s: no instrument '%s' (hgctl instruments lists them)\n", cmd, sym);
  return EXIT_FAIL;
}

int net_resolve_instrument(const char *cmd, hg_client_t *c, const char *val, uint32_t *id) {
  int64_t v;
  if (net_num(val, 1, UINT32_MAX, &v)) {
    *id = (uint32_t)v;
    return 0;
  }
  return instrument_by_symbol(cmd, c, val, id);
}

const char *net_state_name(uint32_t s) {
  return s == 1 ? "trading" : s == 2 ? "halted" : s == 3 ? "delisted" : "?";
}

int net_need_format(const char *cmd, const char *s, hgctl_out_t *out) {
  if (hgctl_out_parse(s, out) == 0) return 0;
  fprintf(stderr, "hgctl %s: --format must be text, json or csv\n", cmd);
  return EXIT_USAGE;
}

int net_list_instruments(const char *cmd, int argc, char **argv) {
  char usage[96];
  snprintf(usage, sizeof usage, "%s [--format text|json|csv]\n", cmd);
  const char *fmt_s = NULL;
  const opt_t opts[] = {CONN_OPTS, {"format", &fmt_s, NULL}};
  int rc = net_parse(cmd, argc, argv, opts, sizeof opts / sizeof opts[0], NULL, 0, usage);
  hgctl_out_t fmt;
  if (rc || (rc = net_need_format(cmd, fmt_s, &fmt))) return rc;
  hg_client_t *c = NULL;
  if ((rc = net_open_session(cmd, &c))) return rc;
  const Hourglass__V1__InstrumentList *l = NULL;
  if ((rc = fetch_instruments(cmd, c, &l)) == 0) {
    /* tick, min and max in one unit: USD per GPU-hour (raw: the wire's
     * micro-USD tick value and prices in ticks). */
    const hgctl_col_t cols[] = {{"id", 0},        {"symbol", 1},
                                {"grade", 1},     {"month", 1},
                                {net_raw ? "tick" : "tick_usd", 0},
                                {"unit", 0},      {net_raw ? "min" : "min_usd", 0},
                                {net_raw ? "max" : "max_usd", 0},
                                {"max_qty", 0},   {"state", 1}};
    hgctl_table_t t;
    if (fmt == HGCTL_OUT_TEXT)
      printf("%-6s %-20s %-8s %-8s %10s %8s %10s %10s %12s %s\n", cols[0].name, cols[1].name,
             cols[2].name, cols[3].name, cols[4].name, cols[5].name, cols[6].name, cols[7].name,
             cols[8].name, cols[9].name);
    else hgctl_table_start(&t, stdout, fmt, cols, sizeof cols / sizeof cols[0]);
    for (size_t i = 0; i < l->n_instruments; i++) {
      const Hourglass__V1__InstrumentInfo *x = l->instruments[i];
      char tick[HGCTL_FMT_LEN], id[16], unit[24], maxq[24];
      if (net_raw) snprintf(tick, sizeof tick, "%" PRId64, x->tick_size);
      else if (x->tick_size % HG_INDEX_TICK_MICRO_USD == 0)
        hgctl_fmt_price(x->tick_size / HG_INDEX_TICK_MICRO_USD, tick);
      else hgctl_fmt_decimal(x->tick_size, 6, tick);
      snprintf(id, sizeof id, "%u", x->instrument_id);
      snprintf(unit, sizeof unit, "%" PRId64, x->contract_unit);
      snprintf(maxq, sizeof maxq, "%" PRId64, x->max_order_qty);
      const char *v[] = {id, x->symbol, x->grade ? x->grade : "-",
                         x->delivery_month ? x->delivery_month : "-", tick, unit,
                         net_px(x->min_price), net_px(x->max_price), maxq,
                         net_state_name(x->state)};
      if (fmt == HGCTL_OUT_TEXT)
        printf("%-6s %-20s %-8s %-8s %10s %8s %10s %10s %12s %s\n", v[0], v[1], v[2], v[3], v[4],
               v[5], v[6], v[7], v[8], v[9]);
      else hgctl_table_row(&t, v);
    }
    if (fmt != HGCTL_OUT_TEXT) hgctl_table_end(&t);
  }
  net_close_session(c);
  return rc;
}
int net_fetch_symbols(const char *cmd, hg_client_t *c, syms_t *t) {
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

const char *net_symbol_of(const syms_t *t, uint32_t id) {
  for (uint32_t i = 0; i < t->n; i++)
    if (t->id[i] == id) return t->sym[i];
  return "-";
}

volatile sig_atomic_t net_stop;
void net_on_signal(int sig) {
  (void)sig;
  net_stop = 1;
}
/* An operator command's one Response: OK with the engine seq, and for cash
 * the amount and the new balance. */
int net_op_reply(const char *cmd, const char *verb, hg_client_t *c, uint64_t seq) {
  const env_t *e = NULL;
  int rc = net_await_reply(cmd, c, seq, &e);
  if (rc != 0) return rc;
  if ((rc = net_response_status(cmd, e)) != 0) return rc;
  if (e->body_case == BODY(RESPONSE)) {
    printf("OK %s engine_seq=%" PRIu64, verb, e->response->engine_seq);
    if (e->response->amount) printf(" amount=%s", net_usd(e->response->amount));
    if (e->response->has_balance) printf(" balance=%s", net_usd(e->response->balance));
    printf("\n");
  }
  return 0;
}
