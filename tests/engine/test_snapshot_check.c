/*
 * Snapshots are trusted only after they are checked. A data directory is
 * built through the pipeline with two snapshots (seq M, then seq N at the
 * journal's end); then single bits of the newest snapshot's stored value
 * (header and blob) are flipped with LMDB directly, one at a time, and each
 * time recovery (hg_pipeline_open) must either refuse with a log naming the
 * snapshot, or start on a state whose hash equals a replay of the journal
 * from an empty exchange up to the same seq. Never a third outcome. The
 * default run flips every header bit and a spread sample of blob bits;
 * `--slow` flips every bit of the value.
 *
 * Then the fallbacks end to end: both snapshots bad (the journal alone,
 * from seq 1), both bad with a journal that does not start at seq 1 (a
 * refused start naming both), both bad with the journal gone (a refused
 * start, not an empty exchange), a store format 1 (bare, unchecked)
 * snapshot, and hgctl-style reading of a bad snapshot through the store.
 */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <lmdb.h>

#include "cmdgen.h"
#include "hourglass/error.h"
#include "hourglass/journal.h"
#include "hourglass/store.h"
#include "pipeline_util.h"

#define SEED 7u
#define SEQ_M 150u /* the older snapshot */
#define SEQ_N 220u /* the newest, at the journal's end */

static int g_slow;

/* Every message of one recovery, for assertions on what it named. */
typedef struct biglog {
  char text[16384];
  size_t used;
  int errors;
} biglog_t;

static void biglog_fn(void *ctx, int level, const char *msg) {
  biglog_t *l = ctx;
  if (level >= HG_LOG_ERROR) l->errors++;
  if (l->used < sizeof l->text) {
    int n = snprintf(l->text + l->used, sizeof l->text - l->used, "%s\n", msg);
    if (n > 0) l->used += (size_t)n;
    if (l->used > sizeof l->text) l->used = sizeof l->text;
  }
}

static int log_names(const biglog_t *l, uint64_t seq) {
  char want[64];
  snprintf(want, sizeof want, "snapshot at seq %llu ", (unsigned long long)seq);
  return strstr(l->text, want) != NULL;
}

typedef struct fixture {
  char dir[64];
  char state[96], journal[96];
  util_log_t quiet;
  hg_pipeline_config_t cfg;
} fixture_t;

static int setup(void **state) {
  fixture_t *f = calloc(1, sizeof *f);
  if (f == NULL || util_tmpdir(f->dir, "snapchk") == NULL) return -1;
  snprintf(f->state, sizeof f->state, "%s/state", f->dir);
  snprintf(f->journal, sizeof f->journal, "%s/journal", f->dir);
  util_config(&f->cfg, f->dir, &f->quiet);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture_t *f = *state;
  util_rm_rf(f->dir);
  free(f);
  return 0;
}

/* Opens the pipeline, runs commands [from, to) of the stream, stops (the
 * final snapshot is at seq to) and closes. */
static void run_commands(fixture_t *f, uint64_t from, uint64_t to, uint8_t hash[HG_SHA256_LEN]) {
  hg_pipeline_t *p = NULL;
  f->cfg.log = util_log_fn;
  f->cfg.log_ctx = &f->quiet;
  assert_int_equal(hg_pipeline_open(&f->cfg, &p), 0);
  assert_int_equal(hg_exchange_last_seq(hg_pipeline_exchange(p)), from);
  assert_int_equal(hg_pipeline_start(p), 0);
  assert_int_equal(util_run_cmdgen(p, from, to, SEED), 0);
  assert_int_equal(hg_pipeline_stop(p), 0);
  if (hash != NULL) hg_pipeline_state_hash(p, hash);
  hg_pipeline_close(p);
}

/* A data directory with snapshots at SEQ_M and SEQ_N. */
static void build(fixture_t *f) {
  run_commands(f, 0, SEQ_M, NULL);
  run_commands(f, SEQ_M, SEQ_N, NULL);
}

/* The state hash of a replay of the journal from an empty exchange up to
 * seq (hourglassd --state-hash --upto seq). */
static void replay_hash(fixture_t *f, uint64_t seq, uint8_t out[HG_SHA256_LEN]) {
  hg_exchange_t *ex = NULL;
  assert_int_equal(hg_exchange_create(&f->cfg.exchange, util_null_sink, NULL, &ex), 0);
  uint64_t last = 0;
  assert_int_equal(hg_pipeline_replay_journal(f->journal, ex, seq, &last), 0);
  assert_int_equal(last, seq);
  hg_exchange_hash(ex, out);
  hg_exchange_destroy(ex);
}

/* Raw LMDB access to the snapshots table, as a flipped disk bit would. */
static void raw_open(fixture_t *f, MDB_env **env, MDB_txn **txn, MDB_dbi *dbi, int rdonly) {
  assert_int_equal(mdb_env_create(env), 0);
  assert_int_equal(mdb_env_set_maxdbs(*env, 16), 0);
  assert_int_equal(mdb_env_set_mapsize(*env, (size_t)1 << 30), 0);
  assert_int_equal(mdb_env_open(*env, f->state, 0, 0640), 0);
  assert_int_equal(mdb_txn_begin(*env, NULL, rdonly ? MDB_RDONLY : 0, txn), 0);
  assert_int_equal(mdb_dbi_open(*txn, "snapshots", 0, dbi), 0);
}

static void snap_key(uint8_t kb[8], uint64_t seq) {
  for (int i = 0; i < 8; i++) kb[i] = (uint8_t)(seq >> (56 - 8 * i));
}

/* Copies the stored value of snapshot seq into a malloc'd buffer. */
static uint8_t *raw_get(fixture_t *f, uint64_t seq, size_t *len) {
  MDB_env *env;
  MDB_txn *txn;
  MDB_dbi dbi;
  raw_open(f, &env, &txn, &dbi, 1);
  uint8_t kb[8];
  snap_key(kb, seq);
  MDB_val k = {.mv_size = 8, .mv_data = kb}, v;
  assert_int_equal(mdb_get(txn, dbi, &k, &v), 0);
  uint8_t *copy = malloc(v.mv_size);
  assert_non_null(copy);
  memcpy(copy, v.mv_data, v.mv_size);
  *len = v.mv_size;
  mdb_txn_abort(txn);
  mdb_env_close(env);
  return copy;
}

static void raw_put(fixture_t *f, uint64_t seq, const uint8_t *val, size_t len) {
  MDB_env *env;
  MDB_txn *txn;
  MDB_dbi dbi;
  raw_open(f, &env, &txn, &dbi, 0);
  uint8_t kb[8];
  snap_key(kb, seq);
  MDB_val k = {.mv_size = 8, .mv_data = kb}, v = {.mv_size = len, .mv_data = (void *)val};
  assert_int_equal(mdb_put(txn, dbi, &k, &v, 0), 0);
  assert_int_equal(mdb_txn_commit(txn), 0);
  mdb_env_close(env);
}

/* Stores snapshot seq's value with bit `bit` flipped (bit < 8 * len). */
static void put_flipped(fixture_t *f, uint64_t seq, const uint8_t *orig, size_t len, size_t bit) {
  uint8_t *v = malloc(len);
  assert_non_null(v);
  memcpy(v, orig, len);
  v[bit / 8] ^= (uint8_t)(1u << (bit % 8));
  raw_put(f, seq, v, len);
  free(v);
}

/* Runs recovery on the directory as it is. 0 with the state's seq and hash
 * (the pipeline closed again, nothing written), or the error. */
static int recover_once(fixture_t *f, biglog_t *log, uint64_t *seq, uint8_t hash[HG_SHA256_LEN]) {
  memset(log, 0, sizeof *log);
  f->cfg.log = biglog_fn;
  f->cfg.log_ctx = log;
  hg_pipeline_t *p = NULL;
  int rc = hg_pipeline_open(&f->cfg, &p);
  if (rc == 0) {
    *seq = hg_exchange_last_seq(hg_pipeline_exchange(p));
    hg_pipeline_state_hash(p, hash);
    hg_pipeline_close(p);
  }
  return rc;
}

/* The value's bits to flip: every bit (slow), or every header bit and a
 * spread of blob bits, one per SPREAD bytes at a rotating position. */
#define SPREAD 13u

static size_t bits_to_flip(size_t len, size_t *bits, size_t cap) {
  size_t n = 0;
  for (size_t b = 0; b < 8 * len && n < cap; b++) {
    size_t byte = b / 8;
    int take = g_slow || byte < HG_STORE_SNAPSHOT_HEADER ||
               (byte % SPREAD == 0 && b % 8 == (byte / SPREAD) % 8);
    if (take) bits[n++] = b;
  }
  return n;
}

static void every_flip_is_refused_or_harmless(void **state) {
  fixture_t *f = *state;
  build(f);
  uint8_t want[HG_SHA256_LEN];
  replay_hash(f, SEQ_N, want);
  size_t len = 0;
  uint8_t *orig = raw_get(f, SEQ_N, &len);
  assert_true(len > HG_STORE_SNAPSHOT_HEADER);
  size_t *bits = malloc(8 * len * sizeof *bits);
  assert_non_null(bits);
  size_t nbits = bits_to_flip(len, bits, 8 * len);
  if (g_slow) assert_true(nbits >= 2000);
  size_t refused = 0, fell_back = 0, undetected = 0;
  biglog_t *log = malloc(sizeof *log);
  assert_non_null(log);
  for (size_t i = 0; i < nbits; i++) {
    put_flipped(f, SEQ_N, orig, len, bits[i]);
    uint64_t seq = 0;
    uint8_t got[HG_SHA256_LEN];
    int rc = recover_once(f, log, &seq, got);
    if (rc != 0) {
      /* Outcome 1: a refusal that names the snapshot. */
      if (!log_names(log, SEQ_N))
        fail_msg("bit %zu: open failed (%s) without naming snapshot %u:\n%s", bits[i],
                 hg_strerror(rc), SEQ_N, log->text);
      refused++;
    } else {
      /* Outcome 2: a start on the state the journal reproduces. */
      if (seq != SEQ_N || memcmp(got, want, sizeof want) != 0)
        fail_msg("bit %zu: started at seq %llu on a state the journal does not reproduce:\n%s",
                 bits[i], (unsigned long long)seq, log->text);
      if (log_names(log, SEQ_N)) {
        fell_back++;
        assert_non_null(strstr(log->text, "trying the one at seq 150"));
      } else {
        undetected++;
      }
    }
  }
  /* The CRC covers every byte of the value: no flip goes unnoticed. */
  assert_int_equal(undetected, 0);
  assert_int_equal(refused + fell_back, nbits);
  fprintf(stderr, "flipped %zu of %zu bits: %zu fell back, %zu refused\n", nbits, 8 * len,
          fell_back, refused);
  /* Put back, the directory recovers from the newest snapshot again. */
  raw_put(f, SEQ_N, orig, len);
  uint64_t seq = 0;
  uint8_t got[HG_SHA256_LEN];
  assert_int_equal(recover_once(f, log, &seq, got), 0);
  assert_false(log_names(log, SEQ_N));
  assert_memory_equal(got, want, sizeof want);
  free(log);
  free(bits);
  free(orig);
}

/* Both snapshots bad: the journal alone, from seq 1, gives the same state;
 * the log names both. */
static void both_bad_replays_the_journal(void **state) {
  fixture_t *f = *state;
  build(f);
  uint8_t want[HG_SHA256_LEN];
  replay_hash(f, SEQ_N, want);
  size_t ln = 0, lm = 0;
  uint8_t *vn = raw_get(f, SEQ_N, &ln), *vm = raw_get(f, SEQ_M, &lm);
  put_flipped(f, SEQ_N, vn, ln, 8 * (ln - 1));      /* a blob bit */
  put_flipped(f, SEQ_M, vm, lm, 8 * 16 + 3);        /* the header's length */
  biglog_t log;
  uint64_t seq = 0;
  uint8_t got[HG_SHA256_LEN];
  assert_int_equal(recover_once(f, &log, &seq, got), 0);
  assert_int_equal(seq, SEQ_N);
  assert_memory_equal(got, want, sizeof want);
  assert_true(log_names(&log, SEQ_N));
  assert_true(log_names(&log, SEQ_M));
  assert_non_null(strstr(log.text, "checksum mismatch"));
  assert_non_null(strstr(log.text, "replaying journal"));
  assert_non_null(strstr(log.text, f->state));

  /* The start-up after that writes good snapshots; the bad ones go once
   * two good ones are newer (pruning keeps the newest two good ones). */
  run_commands(f, SEQ_N, SEQ_N + 10, NULL);
  hg_store_t *s = NULL;
  assert_int_equal(hg_store_create(&s), 0);
  assert_int_equal(hg_store_open(s, f->state, 0), 0);
  uint64_t seqs[4];
  size_t n = 0;
  assert_int_equal(hg_store_list_snapshots(s, seqs, 4, &n), 0);
  assert_int_equal(n, 3); /* M and N bad, N + 10 the only good one */
  assert_int_equal(seqs[2], SEQ_N + 10);
  hg_store_close(s);
  run_commands(f, SEQ_N + 10, SEQ_N + 20, NULL);
  assert_int_equal(hg_store_create(&s), 0);
  assert_int_equal(hg_store_open(s, f->state, 0), 0);
  assert_int_equal(hg_store_list_snapshots(s, seqs, 4, &n), 0);
  assert_int_equal(n, 2);
  assert_int_equal(seqs[0], SEQ_N + 10);
  assert_int_equal(seqs[1], SEQ_N + 20);
  hg_store_close(s);
  free(vn);
  free(vm);
}

/* Removes every journal segment. */
static void drop_journal(fixture_t *f) {
  util_rm_rf(f->journal);
}

/* A journal that begins at seq first on purpose (its older segments
 * archived, with the durable mark that vouched for them). */
static void archive_journal(fixture_t *f, uint64_t first) {
  drop_journal(f);
  char mark[160];
  snprintf(mark, sizeof mark, "%s/durable.mark", f->dir);
  assert_int_equal(unlink(mark), 0);
  hg_journal_options_t jo = f->cfg.journal;
  jo.first_seq = first;
  jo.log = NULL;
  hg_journal_t *j = NULL;
  assert_int_equal(mkdir(f->journal, 0750), 0);
  assert_int_equal(hg_journal_open(f->journal, &jo, &j), 0);
  assert_int_equal(hg_journal_close(j), 0);
}

/* A journal that starts after seq 1 cannot stand in for bad snapshots:
 * the start is refused, naming both. One bad snapshot still falls back. */
static void both_bad_without_whole_journal_refuses(void **state) {
  fixture_t *f = *state;
  uint8_t h_n[HG_SHA256_LEN];
  run_commands(f, 0, SEQ_M, NULL);
  archive_journal(f, SEQ_M + 1); /* the journal now begins after the snapshot at M */
  run_commands(f, SEQ_M, SEQ_N, h_n);
  size_t ln = 0, lm = 0;
  uint8_t *vn = raw_get(f, SEQ_N, &ln), *vm = raw_get(f, SEQ_M, &lm);

  biglog_t log;
  uint64_t seq = 0;
  uint8_t got[HG_SHA256_LEN];
  put_flipped(f, SEQ_N, vn, ln, 8 * 40);
  assert_int_equal(recover_once(f, &log, &seq, got), 0);
  assert_int_equal(seq, SEQ_N);
  assert_memory_equal(got, h_n, sizeof h_n);
  assert_true(log_names(&log, SEQ_N));

  put_flipped(f, SEQ_M, vm, lm, 8 * lm - 5);
  assert_int_equal(recover_once(f, &log, &seq, got), HG_ECORRUPT);
  assert_true(log_names(&log, SEQ_N));
  assert_true(log_names(&log, SEQ_M));
  assert_non_null(strstr(log.text, "start refused: 2 bad snapshot(s)"));
  free(vn);
  free(vm);
}

/* All snapshots bad and the journal gone: refused, never an empty exchange
 * at seq 0 that quietly forgets the commands the snapshots covered. */
static void journal_behind_a_bad_snapshot_refuses(void **state) {
  fixture_t *f = *state;
  build(f);
  size_t ln = 0, lm = 0;
  uint8_t *vn = raw_get(f, SEQ_N, &ln), *vm = raw_get(f, SEQ_M, &lm);
  put_flipped(f, SEQ_N, vn, ln, 7);
  put_flipped(f, SEQ_M, vm, lm, 8 * 30);
  drop_journal(f);
  biglog_t log;
  uint64_t seq = 0;
  uint8_t got[HG_SHA256_LEN];
  assert_int_equal(recover_once(f, &log, &seq, got), HG_ECORRUPT);
  /* The journal names what it lacks (the durable mark says seq 220 was
   * durable), and the refusal names the snapshots it skipped. */
  assert_non_null(strstr(log.text, "holds no segment but seq 220 was durable"));
  assert_non_null(strstr(log.text, "start refused: 2 bad snapshot(s)"));
  assert_true(log_names(&log, SEQ_M));
  free(vn);
  free(vm);
}

/* A snapshot as store format 1 wrote it (the bare blob, no checksum) is not
 * trusted: recovery falls back and the log says why. */
static void format1_snapshot_is_not_trusted(void **state) {
  fixture_t *f = *state;
  build(f);
  uint8_t want[HG_SHA256_LEN];
  replay_hash(f, SEQ_N, want);
  size_t ln = 0;
  uint8_t *vn = raw_get(f, SEQ_N, &ln);
  raw_put(f, SEQ_N, vn + HG_STORE_SNAPSHOT_HEADER, ln - HG_STORE_SNAPSHOT_HEADER);
  biglog_t log;
  uint64_t seq = 0;
  uint8_t got[HG_SHA256_LEN];
  assert_int_equal(recover_once(f, &log, &seq, got), 0);
  assert_memory_equal(got, want, sizeof want);
  assert_true(log_names(&log, SEQ_N));
  assert_non_null(strstr(log.text, "no snapshot header"));
  free(vn);
}

/* A snapshot whose bytes are intact but whose claimed state hash is not
 * that of its state (rewritten with a consistent CRC, as a buggy writer
 * would): the hash check after the restore refuses it. */
static uint32_t crc32c_ref(uint32_t crc, const uint8_t *p, size_t n) {
  crc = ~crc;
  while (n--) {
    crc ^= *p++;
    for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

static void wrong_claimed_hash_is_refused(void **state) {
  fixture_t *f = *state;
  build(f);
  uint8_t want[HG_SHA256_LEN];
  replay_hash(f, SEQ_N, want);
  size_t ln = 0;
  uint8_t *vn = raw_get(f, SEQ_N, &ln);
  vn[24] ^= 1; /* the claimed hash */
  uint32_t crc = crc32c_ref(0, vn, HG_STORE_SNAPSHOT_HEADER - 4);
  crc = crc32c_ref(crc, vn + HG_STORE_SNAPSHOT_HEADER, ln - HG_STORE_SNAPSHOT_HEADER);
  for (int i = 0; i < 4; i++) vn[60 + i] = (uint8_t)(crc >> (8 * i));
  raw_put(f, SEQ_N, vn, ln);
  biglog_t log;
  uint64_t seq = 0;
  uint8_t got[HG_SHA256_LEN];
  assert_int_equal(recover_once(f, &log, &seq, got), 0);
  assert_memory_equal(got, want, sizeof want);
  assert_true(log_names(&log, SEQ_N));
  assert_non_null(strstr(log.text, "does not hash to"));

  /* The store's own readers: the newest is refused by name, the older one
   * is handed over with the hash its header claims. */
  hg_store_t *s = NULL;
  assert_int_equal(hg_store_create(&s), 0);
  assert_int_equal(hg_store_open(s, f->state, 0), 0);
  hg_exchange_t *ex = NULL;
  assert_int_equal(hg_exchange_create(&f->cfg.exchange, util_null_sink, NULL, &ex), 0);
  assert_int_equal(hg_store_restore_snapshot(s, 0, ex), HG_ECORRUPT);
  assert_non_null(strstr(hg_store_errmsg(s), "snapshot at seq 220 "));
  hg_exchange_destroy(ex);
  assert_int_equal(hg_exchange_create(&f->cfg.exchange, util_null_sink, NULL, &ex), 0);
  assert_int_equal(hg_store_restore_snapshot(s, SEQ_M, ex), 0);
  assert_int_equal(hg_exchange_last_seq(ex), SEQ_M);
  uint8_t hm[HG_SHA256_LEN];
  replay_hash(f, SEQ_M, hm);
  hg_exchange_hash(ex, got);
  assert_memory_equal(got, hm, sizeof hm);
  hg_exchange_destroy(ex);
  hg_store_close(s);
  free(vn);
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--slow") == 0) g_slow = 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(every_flip_is_refused_or_harmless, setup, teardown),
      cmocka_unit_test_setup_teardown(both_bad_replays_the_journal, setup, teardown),
      cmocka_unit_test_setup_teardown(both_bad_without_whole_journal_refuses, setup, teardown),
      cmocka_unit_test_setup_teardown(journal_behind_a_bad_snapshot_refuses, setup, teardown),
      cmocka_unit_test_setup_teardown(format1_snapshot_is_not_trusted, setup, teardown),
      cmocka_unit_test_setup_teardown(wrong_claimed_hash_is_refused, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
