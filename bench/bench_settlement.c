/*
 * bench_settlement: the clearing state at exchange scale.
 *   - daily cycle over 100,000 accounts x 10 contracts (1M position records,
 *     every one with fills that day): DSP, VM for every record, ledger, roll;
 *   - final settlement of those 1M positions (10 contracts);
 *   - per-call cost of hg_clearing_fill and hg_clearing_check_order.
 * --quick runs 10,000 accounts. Prints RESULT lines.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hourglass/clearing.h"
#include "hourglass/error.h"

#define NINST 10u
#define DAYNO 20600ull

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void check(int rc, const char *what) {
  if (rc != 0) {
    fprintf(stderr, "bench_settlement: %s: %s\n", what, hg_strerror(rc));
    exit(1);
  }
}

int main(int argc, char **argv) {
  int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
  uint32_t naccts = quick ? 10000 : 100000;
  uint64_t npos = (uint64_t)naccts * NINST;

  hg_clearing_config_t cfg;
  hg_clearing_config_default(&cfg);
  cfg.max_accounts = naccts;
  cfg.max_instruments = NINST;
  cfg.max_firms = 1024;
  cfg.max_positions = (uint32_t)npos;
  /* deposits + one VM and one final entry per record */
  cfg.ledger_initial = naccts + 2 * npos + 16;
  hg_clearing_t *c = NULL;
  check(hg_clearing_create(&cfg, &c), "create");
  for (uint32_t i = 0; i < NINST; i++) {
    hg_clearing_instrument_t in = {.id = i + 1, .group_id = 1, .year = 2027,
                                   .month = (uint8_t)(1 + i), .last_dsp = 2000};
    check(hg_clearing_instrument_add(c, &in), "instrument");
  }
  for (uint32_t a = 0; a < naccts; a++) {
    check(hg_clearing_account_add(c, a + 1, a % 1024), "account");
    check(hg_clearing_deposit(c, a + 1, (int64_t)1000000 * 1000000, a, 0), "deposit");
  }

  /* fills: in every contract, account 2k buys from 2k+1, so every account
   * holds a position in every contract */
  uint64_t ts = DAYNO * HG_NS_PER_DAY + (uint64_t)10 * 3600 * 1000000000u;
  double t0 = now();
  uint64_t nfills = 0;
  for (uint32_t i = 0; i < NINST; i++)
    for (uint32_t a = 0; a + 1 < naccts; a += 2) {
      int64_t q = 1 + (a / 2 + i) % 7;
      int64_t p = 1990 + (int64_t)((a + i) % 21);
      check(hg_clearing_fill(c, i + 1, a + 1, a + 2, q, p, ts, 0), "fill");
      nfills++;
    }
  double t_fill = now() - t0;

  /* pre-trade check of an account holding 10 contracts in one group */
  uint32_t nchecks = quick ? 200000 : 1000000;
  hg_clearing_result_t r;
  t0 = now();
  for (uint32_t k = 0; k < nchecks; k++) {
    check(hg_clearing_check_order(c, 1 + (k % naccts), 1 + (k % NINST), (int)(k & 1), 5, 2000,
                                  &r),
          "check");
    if (r.reason != HG_CLR_REJ_NONE) {
      fprintf(stderr, "bench_settlement: unexpected reject %s\n",
              hg_clearing_reject_str(r.reason));
      return 1;
    }
  }
  double t_check = now() - t0;

  hg_clearing_top_t tops[NINST];
  for (uint32_t i = 0; i < NINST; i++)
    tops[i] = (hg_clearing_top_t){.instrument = i + 1, .best_bid = 2001, .best_ask = 2004};
  hg_clearing_cycle_report_t rep;
  t0 = now();
  check(hg_clearing_daily_cycle(c, 1, DAYNO * HG_NS_PER_DAY +
                                          (uint64_t)16 * 3600 * 1000000000u,
                                tops, NINST, &rep),
        "daily cycle");
  double t_cycle = now() - t0;
  if (rep.entries_posted != npos) {
    fprintf(stderr, "bench_settlement: %llu VM entries, expected %llu\n",
            (unsigned long long)rep.entries_posted, (unsigned long long)npos);
    return 1;
  }

  /* one mark round of the clearing guarantee over every account (each holds
   * 10 positions): marks from the quotes, equity and margin at the marks */
  for (uint32_t i = 0; i < NINST; i++)
    tops[i] = (hg_clearing_top_t){.instrument = i + 1, .best_bid = 2101, .best_ask = 2104};
  hg_clearing_mark_report_t mrep;
  t0 = now();
  check(hg_clearing_mark(c, tops, NINST, &mrep), "mark");
  double t_mark = now() - t0;
  if (mrep.accounts_evaluated != naccts) {
    fprintf(stderr, "bench_settlement: %u accounts marked, expected %u\n",
            mrep.accounts_evaluated, naccts);
    return 1;
  }

  t0 = now();
  for (uint32_t i = 0; i < NINST; i++)
    check(hg_clearing_final_settle(c, i + 1, 2010 + (int64_t)i, 2, 0), "final settle");
  double t_final = now() - t0;

  hg_clearing_totals_t tot;
  hg_clearing_totals(c, &tot);
  if (tot.balances + tot.fund != tot.deposits - tot.withdrawals) {
    fprintf(stderr, "bench_settlement: cash not conserved\n");
    return 1;
  }
  printf("accounts %u, positions %llu, fills %llu, ledger entries %llu\n", naccts,
         (unsigned long long)npos, (unsigned long long)nfills,
         (unsigned long long)hg_clearing_ledger_size(c));
  if (quick) {
    printf("RESULT settlement.daily_cycle_10k_accounts_s %.4f s\n", t_cycle);
    printf("RESULT settlement.final_100k_positions_s %.4f s\n", t_final);
  } else {
    printf("RESULT settlement.daily_cycle_100k_accounts_s %.4f s\n", t_cycle);
    printf("RESULT settlement.final_1m_positions_s %.4f s\n", t_final);
  }
  printf("RESULT clearing.mark_round_%s_accounts_us %.0f us\n", quick ? "10k" : "100k",
         t_mark * 1e6);
  printf("RESULT settlement.fill_ns %.1f ns\n", t_fill * 1e9 / (double)nfills);
  printf("RESULT settlement.check_order_10_contracts_ns %.1f ns\n",
         t_check * 1e9 / (double)nchecks);
  hg_clearing_destroy(c);
  return 0;
}
