/*
 * The rental index IGX-<GPU>-<GRADE> and the token-price index
 * TPX-<CLASS>-<GRADE>: one day's fixing (settlement/CONTRACT.md sections 3
 * and 7.2, methodology v1), the grade tables and the fixing history. The two
 * indexes are one computation: a token sample is a sample whose `gpu` is a
 * model class, priced per million output tokens, with a volume in million
 * output tokens; nothing below depends on the unit.
 *
 * hg_index_fix works on flat per-sample arrays (provider rank, reason code,
 * weight) indexed like the input, so the receipt can name every sample by its
 * input position. Providers are interned once through a hash table and then
 * ranked by their bytes, which turns the "provider as bytes" tie-break and the
 * duplicate key into integer comparisons; hash layout never decides an output
 * because ids are replaced by ranks before use. Medians use an LSD radix sort
 * (O(n), deterministic), hourly buckets a counting partition by hour followed
 * by a sort of each hour. All arithmetic is integer; products that can exceed
 * 64 bits (outlier test, cap weights, cumulative weights, bucket sums) are
 * done in unsigned/signed __int128.
 *
 * The history is a day-sorted array in caller storage: the engine owns it and
 * stores records byte for byte; restatement and finalization rules live here
 * so that every user applies them the same way.
 */
#include "hourglass/index.h"

#include "hourglass/error.h"
#include "hourglass/grow.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define SECONDS_PER_DAY INT64_C(86400)
#define WEIGHT_ONE (INT64_C(1) << 20)

/* ---------------------------------------------------------------- grades */

static const hg_grade_t DEFAULT_GRADES[] = {
    {.gpu = "B200", .code = "A", .min_uptime_bp = 9950, .rdma_required = 1,
     .min_allreduce_gbps = 0, .attestation_required = 1, .tenant_isolation = 1,
     .health_checks = 1, .tenant_metrics = 1, .max_provisioning_h = 24, .burn_in_h = 48},
    {.gpu = "B200", .code = "B", .min_uptime_bp = 9900, .rdma_required = 1,
     .min_allreduce_gbps = 0, .attestation_required = 0, .tenant_isolation = 0,
     .health_checks = 0, .tenant_metrics = 0, .max_provisioning_h = 0, .burn_in_h = 0},
    {.gpu = "B200", .code = "C", .min_uptime_bp = 9500, .rdma_required = 0,
     .min_allreduce_gbps = 0, .attestation_required = 0, .tenant_isolation = 0,
     .health_checks = 0, .tenant_metrics = 0, .max_provisioning_h = 0, .burn_in_h = 0},
};

const hg_grade_t *hg_index_grades_default(size_t *n) {
  if (n) *n = sizeof DEFAULT_GRADES / sizeof DEFAULT_GRADES[0];
  return DEFAULT_GRADES;
}

const hg_grade_t *hg_index_grade_find(const char *gpu, const char *code) {
  if (gpu == NULL || code == NULL) return NULL;
  for (size_t i = 0; i < sizeof DEFAULT_GRADES / sizeof DEFAULT_GRADES[0]; i++) {
    if (strcmp(DEFAULT_GRADES[i].gpu, gpu) == 0 && strcmp(DEFAULT_GRADES[i].code, code) == 0)
      return &DEFAULT_GRADES[i];
  }
  return NULL;
}

/* Output grades, settlement/CONTRACT.md section 7.1. */
static const hg_token_grade_t TOKEN_GRADES[] = {
    {.cls = "OW70B", .code = "S", .family = "open-weights dense, about 70B parameters",
     .input_tokens = 8000, .output_tokens = 1000, .p50_tps_floor = 100,
     .min_availability_bp = 9950},
    {.cls = "OW70B", .code = "F", .family = "open-weights dense, about 70B parameters",
     .input_tokens = 8000, .output_tokens = 1000, .p50_tps_floor = 200,
     .min_availability_bp = 9950},
    {.cls = "OW671B", .code = "S",
     .family = "open-weights mixture of experts, about 671B total parameters",
     .input_tokens = 8000, .output_tokens = 1000, .p50_tps_floor = 100,
     .min_availability_bp = 9950},
    {.cls = "OW671B", .code = "F",
     .family = "open-weights mixture of experts, about 671B total parameters",
     .input_tokens = 8000, .output_tokens = 1000, .p50_tps_floor = 200,
     .min_availability_bp = 9950},
};

const hg_token_grade_t *hg_index_token_grades_default(size_t *n) {
  if (n) *n = sizeof TOKEN_GRADES / sizeof TOKEN_GRADES[0];
  return TOKEN_GRADES;
}

const hg_token_grade_t *hg_index_token_grade_find(const char *cls, const char *code) {
  if (cls == NULL || code == NULL) return NULL;
  for (size_t i = 0; i < sizeof TOKEN_GRADES / sizeof TOKEN_GRADES[0]; i++) {
    if (strcmp(TOKEN_GRADES[i].cls, cls) == 0 && strcmp(TOKEN_GRADES[i].code, code) == 0)
      return &TOKEN_GRADES[i];
  }
  return NULL;
}

const char *hg_index_product_prefix(hg_index_product_t product) {
  return product == HG_INDEX_GPU_HOURS ? "IGX" : product == HG_INDEX_TOKENS ? "TPX" : NULL;
}

int hg_index_product_grade_known(hg_index_product_t product, const char *underlying,
                                 const char *code) {
  if (product == HG_INDEX_GPU_HOURS) return hg_index_grade_find(underlying, code) != NULL;
  if (product == HG_INDEX_TOKENS) return hg_index_token_grade_find(underlying, code) != NULL;
  return 0;
}

/* --------------------------------------------------------------- strings */

const char *hg_index_reason_str(int reason) {
  switch (reason) {
  case HG_INDEX_USED:
    return "USED";
#define HG_INDEX_REASON_STR(name) \
  case HG_INDEX_##name:           \
    return #name;
    HG_INDEX_REASONS(HG_INDEX_REASON_STR)
#undef HG_INDEX_REASON_STR
  default:
    return "UNKNOWN";
  }
}

const char *hg_index_status_str(int status) {
  switch (status) {
  case HG_INDEX_PROVISIONAL:
    return "PROVISIONAL";
  case HG_INDEX_FINAL:
    return "FINAL";
  case HG_INDEX_NO_FIX:
    return "NO_FIX";
  default:
    return "UNKNOWN";
  }
}

const char *hg_index_kind_str(int kind) {
  switch (kind) {
  case HG_INDEX_NONE:
    return "NONE";
  case HG_INDEX_COMPUTED:
    return "COMPUTED";
  case HG_INDEX_CARRIED:
    return "CARRIED";
  case HG_INDEX_EXTERNAL:
    return "EXTERNAL";
  default:
    return "UNKNOWN";
  }
}

void hg_index_config_default(hg_index_config_t *cfg) {
  *cfg = (hg_index_config_t){
      .max_term_days = 31,
      .outlier_k_num = 44478,
      .outlier_k_den = 10000,
      .cap_divisor = 5,
      .cap_min_providers = 5,
      .min_providers = 5,
      .min_hours = 12,
      .min_volume = 1000,
      .max_carry_days = 3,
      .restate_min_move = HG_INDEX_TICK_MICRO_USD,
  };
}

/* ------------------------------------------------------------ utilities */

static uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= UINT64_C(0xff51afd7ed558ccd);
  x ^= x >> 33;
  x *= UINT64_C(0xc4ceb9fe1a85ec53);
  x ^= x >> 33;
  return x;
}

static uint64_t hash_str(const char *s) {
  uint64_t h = UINT64_C(0xcbf29ce484222325);
  for (; *s; s++) h = (h ^ (unsigned char)*s) * UINT64_C(0x100000001b3);
  return mix64(h);
}

static size_t pow2_at_least(size_t n) {
  size_t c = 16;
  while (c < n) c *= 2;
  return c;
}

/* LSD radix sort of a[0..n) ascending; tmp has room for n. Passes whose byte
 * is the same for every key are skipped (high bytes of prices usually are). */
static void radix_sort_u64(uint64_t *a, uint64_t *tmp, size_t n) {
  uint64_t *src = a, *dst = tmp;
  for (unsigned shift = 0; shift < 64; shift += 8) {
    size_t count[256] = {0};
    for (size_t i = 0; i < n; i++) count[(src[i] >> shift) & 0xff]++;
    if (n == 0 || count[(src[0] >> shift) & 0xff] == n) continue;
    size_t pos = 0;
    for (int b = 0; b < 256; b++) {
      size_t c = count[b];
      count[b] = pos;
      pos += c;
    }
    for (size_t i = 0; i < n; i++) dst[count[(src[i] >> shift) & 0xff]++] = src[i];
    uint64_t *t = src;
    src = dst;
    dst = t;
  }
  if (src != a) memcpy(a, src, n * sizeof *a);
}

/* The lower median (element (n-1)/2 of the sorted values); sorts a. */
static int64_t lower_median(uint64_t *a, uint64_t *tmp, size_t n) {
  radix_sort_u64(a, tmp, n);
  return (int64_t)a[(n - 1) / 2];
}

/* One sample in an hourly bucket, ordered by (price, provider rank, ts, index). */
typedef struct hour_item {
  int64_t price;
  int64_t ts;
  int64_t weight;
  uint32_t prov;
  uint32_t idx;
} hour_item_t;

static int hour_item_cmp(const void *pa, const void *pb) {
  const hour_item_t *a = pa, *b = pb;
  if (a->price != b->price) return a->price < b->price ? -1 : 1;
  if (a->prov != b->prov) return a->prov < b->prov ? -1 : 1;
  if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
  return (a->idx > b->idx) - (a->idx < b->idx);
}

/* -------------------------------------------------------------- workspace */

typedef struct work {
  const hg_index_sample_t *s;
  size_t n;
  const hg_index_config_t *cfg;
  int64_t day_start;
  uint32_t n_prov;
  uint32_t *prov;       /* provider rank per sample (in-window samples only) */
  const char **names;   /* provider name per id, later per rank */
  uint8_t *graded;      /* per rank: registered grade == index grade */
  uint8_t *base;        /* step-1 reason without the tier rule */
  uint8_t *reason;      /* reason of the tier being computed */
  int64_t *weight;      /* weight of the tier being computed (0 if excluded) */
  uint32_t *elig;       /* indices of samples currently in play */
  uint64_t *keys, *tmp; /* radix sort buffers */
  int64_t *vprov;       /* volume per provider rank */
  hour_item_t *items;
} work_t;

static void work_free(work_t *w) {
  free(w->prov);
  free(w->names);
  free(w->graded);
  free(w->base);
  free(w->reason);
  free(w->weight);
  free(w->elig);
  free(w->keys);
  free(w->tmp);
  free(w->vprov);
  free(w->items);
}

static int name_ptr_cmp(const void *pa, const void *pb) {
  return strcmp(*(const char *const *)pa, *(const char *const *)pb);
}

static bool in_window(const work_t *w, size_t i) {
  int64_t ts = w->s[i].ts;
  return ts >= w->day_start && ts < w->day_start + SECONDS_PER_DAY;
}

/* Interns the providers of in-window samples and ranks them by bytes. The
 * table grows with the number of distinct providers (hundreds, not the
 * sample count), so it stays in cache. */
static int intern_providers(work_t *w) {
  size_t cap = 1024;
  uint32_t *slot = calloc(cap, sizeof *slot); /* id + 1, 0 = empty */
  if (slot == NULL) return -ENOMEM;
  size_t names_cap = 256;
  w->names = malloc(names_cap * sizeof *w->names);
  if (w->names == NULL) {
    free(slot);
    return -ENOMEM;
  }
  uint32_t n_prov = 0;
  for (size_t i = 0; i < w->n; i++) {
    if (!in_window(w, i)) continue;
    const char *p = w->s[i].provider;
    size_t h = (size_t)hash_str(p) & (cap - 1);
    while (slot[h] != 0 && strcmp(w->names[slot[h] - 1], p) != 0) h = (h + 1) & (cap - 1);
    if (slot[h] == 0) {
      const char **nn = hg_grow(w->names, &names_cap, sizeof *nn, (size_t)n_prov + 1, 256);
      if (nn == NULL) {
        free(slot);
        return -ENOMEM;
      }
      w->names = nn;
      w->names[n_prov] = p;
      slot[h] = ++n_prov;
      if ((size_t)n_prov * 2 > cap) { /* rehash at half load */
        size_t ncap = cap * 2;
        uint32_t *ns = calloc(ncap, sizeof *ns);
        if (ns == NULL) {
          free(slot);
          return -ENOMEM;
        }
        for (uint32_t id = 0; id < n_prov; id++) {
          size_t k = (size_t)hash_str(w->names[id]) & (ncap - 1);
          while (ns[k] != 0) k = (k + 1) & (ncap - 1);
          ns[k] = id + 1;
        }
        free(slot);
        slot = ns;
        cap = ncap;
        w->prov[i] = n_prov - 1;
        continue;
      }
    }
    w->prov[i] = slot[h] - 1;
  }
  free(slot);
  /* Replace first-seen ids by byte-order ranks. */
  uint32_t *rank = malloc((n_prov + 1) * sizeof *rank);
  const char **sorted = malloc((n_prov + 1) * sizeof *sorted);
  if (rank == NULL || sorted == NULL) {
    free(rank);
    free(sorted);
    return -ENOMEM;
  }
  memcpy(sorted, w->names, n_prov * sizeof *sorted);
  qsort(sorted, n_prov, sizeof *sorted, name_ptr_cmp);
  /* Names are distinct, so a binary search finds each id's rank. */
  for (uint32_t id = 0; id < n_prov; id++) {
    size_t lo = 0, hi = n_prov;
    while (lo < hi) {
      size_t mid = (lo + hi) / 2;
      if (strcmp(sorted[mid], w->names[id]) < 0) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    rank[id] = (uint32_t)lo;
  }
  for (size_t i = 0; i < w->n; i++) {
    if (in_window(w, i)) w->prov[i] = rank[w->prov[i]];
  }
  memcpy(w->names, sorted, n_prov * sizeof *sorted);
  free(rank);
  free(sorted);
  w->n_prov = n_prov;
  return 0;
}

static uint64_t dup_hash(const hg_index_sample_t *s, uint32_t prov) {
  uint64_t h = mix64((uint64_t)prov * UINT64_C(0x9e3779b97f4a7c15) ^ (uint64_t)s->ts);
  h = mix64(h ^ (uint64_t)s->price);
  h = mix64(h ^ (uint64_t)s->volume ^ ((uint64_t)s->kind << 56));
  return h;
}

static bool dup_equal(const work_t *w, size_t a, size_t b) {
  const hg_index_sample_t *x = &w->s[a], *y = &w->s[b];
  return w->prov[a] == w->prov[b] && x->ts == y->ts && x->price == y->price &&
         x->volume == y->volume && x->kind == y->kind;
}

/* Step 1 without the tier rule. The duplicate rule looks at every earlier
 * line, whatever became of it; only in-window lines can match an in-window
 * line because ts is part of the key. */
static int base_eligibility(work_t *w, const hg_index_registry_t *reg, const char *gpu,
                            const char *grade, int32_t day) {
  for (uint32_t r = 0; r < w->n_prov; r++) {
    const char *g = hg_index_registry_grade(reg, w->names[r], gpu, day);
    w->graded[r] = g != NULL && strcmp(g, grade) == 0;
  }
  size_t cap = pow2_at_least(w->n * 2 + 2);
  uint32_t *slot = calloc(cap, sizeof *slot); /* sample index + 1 */
  if (slot == NULL) return -ENOMEM;
  for (size_t i = 0; i < w->n; i++) {
    const hg_index_sample_t *s = &w->s[i];
    if (!in_window(w, i)) {
      w->base[i] = HG_INDEX_OUT_OF_WINDOW;
      continue;
    }
    size_t h = (size_t)dup_hash(s, w->prov[i]) & (cap - 1);
    bool dup = false;
    while (slot[h] != 0) {
      if (dup_equal(w, slot[h] - 1, i)) {
        dup = true;
        break;
      }
      h = (h + 1) & (cap - 1);
    }
    if (!dup) slot[h] = (uint32_t)i + 1;
    uint8_t r = HG_INDEX_USED;
    if (strcmp(s->gpu, gpu) != 0) {
      r = HG_INDEX_WRONG_GPU;
    } else if (s->price <= 0 || s->volume <= 0) {
      r = HG_INDEX_INVALID;
    } else if (strcmp(s->grade, grade) != 0) {
      r = HG_INDEX_WRONG_GRADE;
    } else if (!w->graded[w->prov[i]]) {
      r = HG_INDEX_NOT_GRADED;
    } else if (s->term_days > w->cfg->max_term_days) {
      r = HG_INDEX_TERM_TOO_LONG;
    } else if (dup) {
      r = HG_INDEX_DUPLICATE;
    }
    w->base[i] = r;
  }
  free(slot);
  return 0;
}

/* Steps 1 (tier rule) to 6 for one tier; fills st and w->reason/w->weight. */
static void compute_tier(work_t *w, int tier, hg_index_tier_stats_t *st) {
  const hg_index_config_t *cfg = w->cfg;
  memset(st, 0, sizeof *st);
  st->tried = 1;
  size_t ne = 0;
  for (size_t i = 0; i < w->n; i++) {
    uint8_t r = w->base[i];
    if (r == HG_INDEX_USED && tier == 1 && w->s[i].kind != HG_INDEX_TRADE) r = HG_INDEX_QUOTE_NOT_USED;
    w->reason[i] = r;
    w->weight[i] = 0;
    if (r == HG_INDEX_USED) w->elig[ne++] = (uint32_t)i;
  }
  st->eligible = (uint32_t)ne;

  /* Step 2: outliers around the lower median, scaled by the lower-median MAD. */
  size_t nu = 0;
  if (ne > 0) {
    for (size_t k = 0; k < ne; k++) w->keys[k] = (uint64_t)w->s[w->elig[k]].price;
    int64_t m = lower_median(w->keys, w->tmp, ne);
    for (size_t k = 0; k < ne; k++) {
      int64_t p = w->s[w->elig[k]].price;
      w->keys[k] = (uint64_t)(p >= m ? p - m : m - p); /* both > 0: no overflow */
    }
    int64_t mad = lower_median(w->keys, w->tmp, ne);
    st->median = m;
    st->mad = mad;
    for (size_t k = 0; k < ne; k++) {
      uint32_t i = w->elig[k];
      int64_t p = w->s[i].price;
      unsigned __int128 dev = (unsigned __int128)(uint64_t)(p >= m ? p - m : m - p);
      if (mad > 0 && dev * (uint64_t)cfg->outlier_k_den >
                         (unsigned __int128)(uint64_t)mad * (uint64_t)cfg->outlier_k_num) {
        w->reason[i] = HG_INDEX_OUTLIER;
      } else {
        w->elig[nu++] = i;
      }
    }
  }
  st->used = (uint32_t)nu;

  /* Step 3: provider cap. Volumes fit int64 by the input limits. */
  memset(w->vprov, 0, w->n_prov * sizeof *w->vprov);
  int64_t vtot = 0;
  for (size_t k = 0; k < nu; k++) {
    uint32_t i = w->elig[k];
    if (w->vprov[w->prov[i]] == 0) st->providers++;
    w->vprov[w->prov[i]] += w->s[i].volume;
    vtot += w->s[i].volume;
  }
  st->volume = vtot;
  int64_t cap = 0;
  if (st->providers >= cfg->cap_min_providers && cfg->cap_divisor > 0) {
    cap = vtot / (int64_t)cfg->cap_divisor;
    st->cap_applied = 1;
    st->cap = cap;
  }
  for (size_t k = 0; k < nu; k++) {
    uint32_t i = w->elig[k];
    int64_t v = w->s[i].volume, vp = w->vprov[w->prov[i]];
    if (st->cap_applied && vp > cap) {
      unsigned __int128 num = (unsigned __int128)(uint64_t)v * (uint64_t)cap * (uint64_t)WEIGHT_ONE;
      w->weight[i] = (int64_t)(num / (uint64_t)vp);
    } else {
      w->weight[i] = v * WEIGHT_ONE; /* v <= 10^12 < 2^43 */
    }
  }

  /* Step 4: partition by hour (stable counting sort), then order each hour. */
  size_t start[HG_INDEX_HOURS + 1] = {0};
  for (size_t k = 0; k < nu; k++) {
    int64_t h = (w->s[w->elig[k]].ts - w->day_start) / 3600;
    start[h + 1]++;
  }
  for (int h = 0; h < HG_INDEX_HOURS; h++) start[h + 1] += start[h];
  size_t fill[HG_INDEX_HOURS];
  memcpy(fill, start, sizeof fill);
  for (size_t k = 0; k < nu; k++) {
    uint32_t i = w->elig[k];
    const hg_index_sample_t *s = &w->s[i];
    int64_t h = (s->ts - w->day_start) / 3600;
    w->items[fill[h]++] = (hour_item_t){
        .price = s->price, .ts = s->ts, .weight = w->weight[i], .prov = w->prov[i], .idx = i};
  }
  __int128 sum = 0;
  for (int h = 0; h < HG_INDEX_HOURS; h++) {
    size_t a = start[h], b = start[h + 1];
    st->bucket_n[h] = (uint32_t)(b - a);
    if (a == b) continue;
    qsort(&w->items[a], b - a, sizeof *w->items, hour_item_cmp);
    __int128 total = 0, cum = 0;
    for (size_t k = a; k < b; k++) total += w->items[k].weight;
    for (size_t k = a; k < b; k++) {
      cum += w->items[k].weight;
      if (2 * cum >= total) {
        st->bucket[h] = w->items[k].price;
        st->bucket_sample[h] = w->items[k].idx;
        break;
      }
    }
    st->hours++;
    sum += st->bucket[h];
  }
  /* Step 5: round half up of the mean. */
  if (st->hours > 0) {
    __int128 n2 = 2 * (__int128)st->hours;
    st->value = (int64_t)((2 * sum + st->hours) / n2);
  }
  /* Step 6: sufficiency, counted after step 2. */
  st->sufficient = st->providers >= cfg->min_providers && st->hours >= cfg->min_hours &&
                   st->volume >= cfg->min_volume && st->hours > 0;
  for (size_t i = 0; i < w->n; i++) st->reason_count[w->reason[i]]++;
}

static int build_receipt(const work_t *w, hg_index_result_t *out) {
  size_t nx = 0, nw = 0;
  for (size_t i = 0; i < w->n; i++) {
    if (w->reason[i] != HG_INDEX_USED) {
      nx++;
    } else {
      nw++;
    }
  }
  out->exclusions = malloc((nx ? nx : 1) * sizeof *out->exclusions);
  out->weights = malloc((nw ? nw : 1) * sizeof *out->weights);
  if (out->exclusions == NULL || out->weights == NULL) return -ENOMEM;
  for (size_t i = 0; i < w->n; i++) {
    if (w->reason[i] != HG_INDEX_USED) {
      out->exclusions[out->n_exclusions++] =
          (hg_index_exclusion_t){.sample = (uint32_t)i, .reason = w->reason[i]};
    } else {
      out->weights[out->n_weights++] =
          (hg_index_weight_t){.sample = (uint32_t)i, .weight = w->weight[i]};
    }
  }
  return 0;
}

/* Step 6, last part: carry the previous FINAL fixing forward for at most
 * max_carry_days consecutive days without a fixing of their own. A day missing
 * from the history counts as a day without a fixing. */
static void carry_forward(const hg_index_history_t *h, const hg_index_config_t *cfg, int32_t day,
                          hg_index_fixing_t *f) {
  f->status = HG_INDEX_NO_FIX;
  f->kind = HG_INDEX_NONE;
  f->tier = 0;
  f->value = 0;
  f->carried_from = -1;
  if (h == NULL) return;
  uint32_t run = 0;
  while (run < cfg->max_carry_days) {
    const hg_index_fixing_t *r = hg_index_history_get(h, day - 1 - (int32_t)run);
    bool own = r != NULL && r->status != HG_INDEX_NO_FIX && r->kind != HG_INDEX_CARRIED;
    if (own) break;
    run++;
  }
  if (run >= cfg->max_carry_days) return;
  for (size_t k = h->n; k-- > 0;) {
    const hg_index_fixing_t *r = &h->rec[k];
    if (r->day >= day || r->status != HG_INDEX_FINAL) continue;
    f->status = HG_INDEX_PROVISIONAL;
    f->kind = HG_INDEX_CARRIED;
    f->value = r->value;
    f->carried_from = r->kind == HG_INDEX_CARRIED ? r->carried_from : r->day;
    return;
  }
}

static bool str_ok(const char *s, size_t cap) { return memchr(s, '\0', cap) != NULL; }

int hg_index_fix(const hg_index_config_t *cfg, const hg_index_registry_t *reg,
                 const hg_index_history_t *history, const char *gpu, const char *grade,
                 int32_t day, const hg_index_sample_t *samples, size_t n,
                 hg_index_result_t *out) {
  if (out == NULL) return HG_EINVAL;
  memset(out, 0, sizeof *out);
  if (reg == NULL || gpu == NULL || grade == NULL || (samples == NULL && n > 0)) return HG_EINVAL;
  size_t gl = strlen(gpu), rl = strlen(grade);
  if (gl == 0 || gl >= HG_INDEX_GPU_MAX || rl == 0 || rl >= HG_INDEX_GRADE_MAX) return HG_EINVAL;
  if (n > HG_INDEX_SAMPLES_MAX) return HG_ERANGE;
  for (size_t i = 0; i < n; i++) {
    const hg_index_sample_t *s = &samples[i];
    if (!str_ok(s->provider, sizeof s->provider) || !str_ok(s->region, sizeof s->region) ||
        !str_ok(s->gpu, sizeof s->gpu) || !str_ok(s->grade, sizeof s->grade))
      return HG_EINVAL;
    if (s->kind != HG_INDEX_TRADE && s->kind != HG_INDEX_QUOTE) return HG_EINVAL;
    if (s->volume > HG_INDEX_VOLUME_MAX) return HG_ERANGE;
  }
  hg_index_config_t defcfg;
  if (cfg == NULL) {
    hg_index_config_default(&defcfg);
    cfg = &defcfg;
  }

  work_t w = {.s = samples, .n = n, .cfg = cfg, .day_start = (int64_t)day * SECONDS_PER_DAY};
  size_t m = n ? n : 1;
  w.prov = malloc(m * sizeof *w.prov);
  w.base = malloc(m);
  w.reason = malloc(m);
  w.weight = malloc(m * sizeof *w.weight);
  w.elig = malloc(m * sizeof *w.elig);
  w.keys = malloc(m * sizeof *w.keys);
  w.tmp = malloc(m * sizeof *w.tmp);
  w.items = malloc(m * sizeof *w.items);
  int rc = -ENOMEM;
  if (!w.prov || !w.base || !w.reason || !w.weight || !w.elig || !w.keys || !w.tmp || !w.items)
    goto fail;
  if ((rc = intern_providers(&w))) goto fail;
  rc = -ENOMEM;
  w.graded = malloc(w.n_prov + 1);
  w.vprov = malloc((w.n_prov + 1) * sizeof *w.vprov);
  if (!w.graded || !w.vprov) goto fail;
  if ((rc = base_eligibility(&w, reg, gpu, grade, day))) goto fail;

  memcpy(out->methodology, HG_INDEX_METHODOLOGY, sizeof HG_INDEX_METHODOLOGY);
  memcpy(out->gpu, gpu, gl + 1);
  memcpy(out->grade, grade, rl + 1);
  out->input_count = (uint32_t)n;
  hg_index_fixing_t *f = &out->fixing;
  f->day = day;
  f->carried_from = -1;

  compute_tier(&w, 1, &out->tier[0]);
  out->receipt_tier = 1;
  if (out->tier[0].sufficient) {
    f->status = HG_INDEX_PROVISIONAL;
    f->kind = HG_INDEX_COMPUTED;
    f->tier = 1;
    f->value = out->tier[0].value;
  } else {
    compute_tier(&w, 2, &out->tier[1]);
    out->receipt_tier = 2;
    if (out->tier[1].sufficient) {
      f->status = HG_INDEX_PROVISIONAL;
      f->kind = HG_INDEX_COMPUTED;
      f->tier = 2;
      f->value = out->tier[1].value;
    } else {
      carry_forward(history, cfg, day, f);
    }
  }
  if ((rc = build_receipt(&w, out))) goto fail;
  work_free(&w);
  return 0;
fail:
  work_free(&w);
  hg_index_result_dispose(out);
  return rc;
}

void hg_index_result_dispose(hg_index_result_t *res) {
  if (res == NULL) return;
  free(res->exclusions);
  free(res->weights);
  memset(res, 0, sizeof *res);
}

/* --------------------------------------------------------------- history */

void hg_index_history_init(hg_index_history_t *h, hg_index_fixing_t *storage, size_t cap) {
  h->rec = storage;
  h->n = 0;
  h->cap = storage ? cap : 0;
}

/* First record with day >= `day`. */
static size_t hist_lower(const hg_index_history_t *h, int32_t day) {
  size_t lo = 0, hi = h->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (h->rec[mid].day < day) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

const hg_index_fixing_t *hg_index_history_get(const hg_index_history_t *h, int32_t day) {
  if (h == NULL) return NULL;
  size_t at = hist_lower(h, day);
  return at < h->n && h->rec[at].day == day ? &h->rec[at] : NULL;
}

int hg_index_history_publish(hg_index_history_t *h, const hg_index_config_t *cfg,
                             const hg_index_fixing_t *f, int *outcome) {
  if (h == NULL || f == NULL) return HG_EINVAL;
  if (f->status != HG_INDEX_PROVISIONAL && f->status != HG_INDEX_NO_FIX) return HG_EINVAL;
  if (f->status == HG_INDEX_PROVISIONAL && f->value <= 0) return HG_EINVAL;
  hg_index_config_t defcfg;
  if (cfg == NULL) {
    hg_index_config_default(&defcfg);
    cfg = &defcfg;
  }
  size_t at = hist_lower(h, f->day);
  if (at < h->n && h->rec[at].day == f->day) {
    hg_index_fixing_t *old = &h->rec[at];
    if (old->status == HG_INDEX_FINAL) return HG_ESTATE;
    bool old_has = old->status != HG_INDEX_NO_FIX;
    bool new_has = f->status != HG_INDEX_NO_FIX;
    int res = HG_INDEX_RESTATED;
    if (old_has && !new_has) {
      res = HG_INDEX_UNCHANGED;
    } else if (old_has && new_has) {
      int64_t d = f->value >= old->value ? f->value - old->value : old->value - f->value;
      if (d < cfg->restate_min_move) res = HG_INDEX_UNCHANGED;
    }
    if (res == HG_INDEX_RESTATED) *old = *f;
    if (outcome) *outcome = res;
    return 0;
  }
  if (h->n >= h->cap) return HG_EFULL;
  memmove(&h->rec[at + 1], &h->rec[at], (h->n - at) * sizeof *h->rec);
  h->rec[at] = *f;
  h->n++;
  if (outcome) *outcome = HG_INDEX_PUBLISHED;
  return 0;
}

int hg_index_history_finalize(hg_index_history_t *h, int32_t day) {
  if (h == NULL) return HG_EINVAL;
  size_t at = hist_lower(h, day);
  if (at >= h->n || h->rec[at].day != day) return HG_ENOTFOUND;
  if (h->rec[at].status == HG_INDEX_NO_FIX) return HG_ESTATE;
  h->rec[at].status = HG_INDEX_FINAL;
  return 0;
}

int hg_index_fixing_external(int32_t day, int64_t value, const char *source,
                             hg_index_fixing_t *out) {
  if (out == NULL || source == NULL || value <= 0) return HG_EINVAL;
  size_t l = strlen(source);
  if (l == 0 || l >= HG_INDEX_SOURCE_MAX) return HG_EINVAL;
  memset(out, 0, sizeof *out);
  out->day = day;
  out->value = value;
  out->carried_from = -1;
  out->status = HG_INDEX_PROVISIONAL;
  out->kind = HG_INDEX_EXTERNAL;
  out->tier = 0;
  memcpy(out->source, source, l + 1);
  return 0;
}
