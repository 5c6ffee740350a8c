/*
 * scenario.h - `hourglassd --scenario month`: one contract's life from
 * listing through final settlement, in simulated time, on the real pipeline
 * (sequencer, journal, state machine, snapshots).
 *
 * The scenario is the only submitter and the only consumer (consumer 0). It
 * sets the sequencer's clock (the pipeline's clock hook) before each batch
 * and waits until the batch is fully processed before moving the clock, so
 * every command's timestamp is the scenario's choice and two runs write the
 * same journal, the same state and the same output, byte for byte.
 *
 * Timeline (settlement/CONTRACT.md sections 1, 3 and 4): B200.A.2027-03 is
 * listed on 2027-02-01 with the demo's makers and hedgers (daemon/demo.c,
 * one month listed); each day the makers quote and the hedgers trade at
 * 10:00, 12:00, 14:00 and 15:57 UTC (the last inside the [15:55, 16:00) DSP
 * window), the daily settlement cycle runs at 16:00 through the last trading
 * day (2027-03-31); rental samples of day d are published and the fixing
 * computed at d+1 00:30 and finalized at d+3 00:30; EXPIRE is tried each day
 * from 2027-04-01 01:00 and succeeds once every fixing of March is FINAL
 * (2027-04-03).
 */
#ifndef HOURGLASS_SCENARIO_H
#define HOURGLASS_SCENARIO_H

#include <stdio.h>

#include "hourglass/pipeline.h"

/* Exit statuses of hg_scenario_month() and hg_scenario_squeeze(). */
#define HG_SCENARIO_OK 0
#define HG_SCENARIO_FAILED 1   /* a check failed (cash not zero-sum, a step refused) */
#define HG_SCENARIO_ERROR 3    /* could not run (data dir, pipeline, memory) */

/*
 * Runs the month scenario. base: pipeline parameters (capacities, journal
 * options, durability, snapshots; data_dir, consumers and clock are
 * replaced). data_dir must exist and be empty. The narrative and the
 * settlement summary go to out (deterministic: no wall time, no paths);
 * statements are written to data_dir/statements/<account>.csv and .json.
 * Returns HG_SCENARIO_OK when every check passed (the summary sums to zero),
 * HG_SCENARIO_FAILED or HG_SCENARIO_ERROR with the reason on err. Call from
 * one thread; it starts and stops the pipeline itself.
 */
int hg_scenario_month(const hg_pipeline_config_t *base, const char *data_dir, FILE *out,
                      FILE *err);

/*
 * `hourglassd --scenario squeeze` (daemon/squeeze.c): the clearing guarantee
 * under a 60% squeeze in a week. Same contract as hg_scenario_month (fresh
 * data_dir, deterministic output, same exit statuses); writes
 * data_dir/statements/<account>.csv|.json, statements/fund.csv|.json and
 * data_dir/fills.csv, and ends its output with the one line
 * `squeeze: accounts=N calls=C liquidated=L bankrupt=B fund_start=X
 * fund_end=Y socialized=Z conservation=OK|FAILED`.
 */
int hg_scenario_squeeze(const hg_pipeline_config_t *base, const char *data_dir, FILE *out,
                        FILE *err);

#endif /* HOURGLASS_SCENARIO_H */
