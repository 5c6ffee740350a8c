/*
 * keys.c - the API key store (LMDB records, store names of session ids and
 * stream seqs) and the keys file (hg_gateway_add_key, hg_gateway_load_keys,
 * hg_gateway_key_line_parse). Owner thread before start, loop thread after
 * (operators add keys over the wire; in cluster mode every node stores the
 * keys the group commits, hg_gateway_apply_key).
 */
#include "gateway_int.h"

/* ------------------------------------------------------------------ login */

static void hex_into(char *dst, const uint8_t *b, size_t n) {
  static const char H[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    dst[2 * i] = H[b[i] >> 4];
    dst[2 * i + 1] = H[b[i] & 15];
  }
  dst[2 * n] = 0;
}

static void key_be(uint8_t out[8], uint64_t v) {
  for (int i = 7; i >= 0; i--) {
    out[i] = (uint8_t)v;
    v >>= 8;
  }
}

/* Store names: "u<key><session id>" marks a used session id,
 * "o<key>" holds a stream's last sequenced seq. */
void gw_used_name(char *out, uint64_t key_id, const uint8_t *sid) {
  uint8_t k[8];
  key_be(k, key_id);
  out[0] = 'u';
  hex_into(out + 1, k, 8);
  hex_into(out + 17, sid, HG_WIRE_SESSION_ID_LEN);
}

void gw_seq_name(char *out, uint64_t key_id) {
  uint8_t k[8];
  key_be(k, key_id);
  out[0] = 'o';
  hex_into(out + 1, k, 8);
}

int gw_key_load(hg_gateway_t *gw, uint64_t key_id, hg_key_record_t *out) {
  uint8_t buf[HG_KEY_RECORD_SIZE];
  size_t len = 0;
  int rc = hg_store_get(gw->store, HG_STORE_API_KEYS, key_id, buf, sizeof buf, &len);
  if (rc == HG_ERANGE) rc = HG_ECORRUPT;
  if (rc == 0) rc = hg_key_record_decode(buf, len, out);
  hg_wipe(buf, sizeof buf);
  return rc;
}

int gw_key_absent(hg_gateway_t *gw, uint64_t key_id) {
  hg_key_record_t old;
  int rc = gw_key_load(gw, key_id, &old);
  hg_wipe(&old, sizeof old);
  return rc == 0 ? HG_EEXISTS : rc == HG_ENOTFOUND ? 0 : rc;
}

/* gateway.h publishes the record's size for those that keep keys. */
_Static_assert(HG_GATEWAY_KEY_BYTES == HG_KEY_RECORD_SIZE, "key record size");

/* key as a record; a secret longer than a record holds is left out (the
 * record then fails hg_key_record_check). The caller wipes *k. */
static void record_of(const hg_gateway_key_t *key, hg_key_record_t *k) {
  memset(k, 0, sizeof *k);
  k->key_id = key->key_id;
  k->role = key->role;
  k->account = key->account;
  k->firm = key->firm;
  k->secret_len = (uint8_t)(key->secret_len <= HG_WIRE_SECRET_MAX ? key->secret_len : 0);
  memcpy(k->secret, key->secret, k->secret_len);
}

void hg_gateway_key_encode(const hg_gateway_key_t *key, uint8_t out[HG_GATEWAY_KEY_BYTES]) {
  hg_key_record_t k;
  record_of(key, &k);
  hg_key_record_encode(&k, out);
  hg_wipe(&k, sizeof k);
}

int hg_gateway_key_decode(const uint8_t *buf, size_t len, hg_gateway_key_t *key,
                          uint8_t secret[HG_WIRE_SECRET_MAX]) {
  hg_key_record_t k;
  int rc = hg_key_record_decode(buf, len, &k);
  if (rc == 0) {
    memcpy(secret, k.secret, k.secret_len);
    *key = (hg_gateway_key_t){.key_id = k.key_id, .role = k.role, .account = k.account,
                              .firm = k.firm, .secret = secret, .secret_len = k.secret_len};
  }
  hg_wipe(&k, sizeof k);
  return rc;
}

int gw_key_store(hg_gateway_t *gw, const hg_key_record_t *k, int replace) {
  if (hg_key_record_check(k) != 0) return HG_EINVAL;
  if (!replace) {
    int rc = gw_key_absent(gw, k->key_id);
    if (rc != 0) return rc;
  }
  uint8_t buf[HG_KEY_RECORD_SIZE];
  hg_key_record_encode(k, buf);
  int rc = hg_store_put(gw->store, HG_STORE_API_KEYS, k->key_id, buf, sizeof buf);
  hg_wipe(buf, sizeof buf);
  return rc;
}

/* key as a store record, stored (replace: over a key with its id). */
static int store_key(hg_gateway_t *gw, const hg_gateway_key_t *key, int replace) {
  if (key == NULL || key->secret == NULL || key->secret_len > HG_WIRE_SECRET_MAX) return HG_EINVAL;
  hg_key_record_t k;
  record_of(key, &k);
  int rc = gw_key_store(gw, &k, replace);
  hg_wipe(&k, sizeof k);
  return rc;
}

int hg_gateway_add_key(hg_gateway_t *gw, const hg_gateway_key_t *key, int replace) {
  return gw->started ? HG_EINVAL : store_key(gw, key, replace);
}

int hg_gateway_apply_key(hg_gateway_t *gw, const hg_gateway_key_t *key) {
  return store_key(gw, key, 1);
}

typedef struct key_walk {
  int (*fn)(void *ctx, const hg_gateway_key_t *key);
  void *ctx;
} key_walk_t;

static int key_visit(void *ctx, uint64_t id, const void *val, size_t len) {
  key_walk_t *w = ctx;
  hg_key_record_t k;
  (void)id;
  int rc = hg_key_record_decode(val, len, &k);
  if (rc == 0) {
    hg_gateway_key_t key = {.key_id = k.key_id, .role = k.role, .account = k.account,
                            .firm = k.firm, .secret = k.secret, .secret_len = k.secret_len};
    rc = w->fn(w->ctx, &key);
  }
  hg_wipe(&k, sizeof k);
  return rc;
}

int hg_gateway_keys_foreach(hg_gateway_t *gw, int (*fn)(void *ctx, const hg_gateway_key_t *key),
                            void *ctx) {
  key_walk_t w = {fn, ctx};
  return hg_store_foreach(gw->store, HG_STORE_API_KEYS, key_visit, &w);
}

static int hexval(char ch) {
  if (ch >= '0' && ch <= '9') return ch - '0';
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
  return -1;
}

/* Hex digits only (no sign, prefix or space: a typo must not become a
 * different secret). */
static int unhex(const char *s, uint8_t *out, size_t cap, size_t *n) {
  size_t len = strlen(s);
  if (len % 2 != 0 || len / 2 > cap) return HG_EPARSE;
  for (size_t i = 0; i < len / 2; i++) {
    int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
    if (hi < 0 || lo < 0) return HG_EPARSE;
    out[i] = (uint8_t)(hi << 4 | lo);
  }
  *n = len / 2;
  return 0;
}

/* Plain decimal digits, at most max (no sign, no wrap-around). */
static int decimal(const char *s, uint64_t max, uint64_t *out) {
  uint64_t v = 0;
  if (*s == '\0') return HG_EPARSE;
  for (; *s != '\0'; s++) {
    if (*s < '0' || *s > '9') return HG_EPARSE;
    uint64_t d = (uint64_t)(*s - '0');
    if (v > (max - d) / 10) return HG_EPARSE;
    v = v * 10 + d;
  }
  *out = v;
  return 0;
}

int hg_gateway_key_line_parse(char *line, hg_gateway_key_t *key,
                              uint8_t secret_out[HG_WIRE_SECRET_MAX]) {
  char *hash = strchr(line, '#');
  if (hash != NULL) *hash = 0;
  /* Blank-separated fields, whole (a width limit would split a long field
   * in two and so accept a line missing a separator). */
  char *f[5], *save = NULL;
  size_t nf = 0;
  for (char *t = strtok_r(line, " \t\n\v\f\r", &save); t != NULL;
       t = strtok_r(NULL, " \t\n\v\f\r", &save)) {
    if (nf == 5) return HG_EPARSE;
    f[nf++] = t;
  }
  if (nf == 0) return 1;
  uint64_t id, acct, firm;
  if (nf != 5 || decimal(f[0], UINT64_MAX, &id) != 0 || decimal(f[2], UINT32_MAX, &acct) != 0 ||
      decimal(f[3], UINT32_MAX, &firm) != 0)
    return HG_EPARSE;
  const char *role = f[1], *secret = f[4];
  hg_gateway_key_t k = {.key_id = id, .account = (uint32_t)acct, .firm = (uint32_t)firm};
  k.role = strcmp(role, "trader") == 0         ? HG_ROLE_TRADER
           : strcmp(role, "market_maker") == 0 ? HG_ROLE_MARKET_MAKER
           : strcmp(role, "risk_viewer") == 0  ? HG_ROLE_RISK_VIEWER
           : strcmp(role, "operator") == 0     ? HG_ROLE_OPERATOR
                                               : 0;
  size_t slen = 0;
  if (k.role == 0 || unhex(secret, secret_out, 64, &slen) != 0) return HG_EPARSE;
  k.secret = secret_out;
  k.secret_len = slen;
  *key = k;
  return 0;
}

/* The loader's line buffer: a line of up to 510 bytes, its newline and the
 * NUL (a longer line is refused unless what is cut off is comment). */
#define KEYS_LINE_BUF 512

int hg_gateway_load_keys(hg_gateway_t *gw, const char *path, unsigned *line) {
  FILE *f = fopen(path, "r");
  if (f == NULL) return -errno;
  char buf[KEYS_LINE_BUF];
  unsigned ln = 0;
  int rc = 0;
  while (rc == 0 && fgets(buf, sizeof buf, f) != NULL) {
    ln++;
    if (strchr(buf, '\n') == NULL && !feof(f)) {
      /* Longer than the buffer: fine only if what is cut off is comment
       * (which is then skipped), never read as a line of its own. */
      if (strchr(buf, '#') == NULL) {
        rc = HG_EPARSE;
        break;
      }
      int ch;
      while ((ch = fgetc(f)) != EOF && ch != '\n') {
      }
    }
    hg_gateway_key_t k;
    uint8_t sec[HG_WIRE_SECRET_MAX];
    rc = hg_gateway_key_line_parse(buf, &k, sec);
    if (rc == 1) {
      rc = 0;
      continue;
    }
    if (rc == 0) rc = hg_gateway_add_key(gw, &k, 1);
    hg_wipe(sec, sizeof sec);
  }
  hg_wipe(buf, sizeof buf);
  fclose(f);
  if (rc != 0 && line != NULL) *line = ln;
  return rc;
}
