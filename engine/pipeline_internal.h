/*
 * pipeline_internal.h - test hooks of the pipeline. Not public API.
 */
#ifndef HOURGLASS_ENGINE_PIPELINE_INTERNAL_H
#define HOURGLASS_ENGINE_PIPELINE_INTERNAL_H

#include "hourglass/pipeline.h"

/* The pipeline's journal, for fault injection before hg_pipeline_start()
 * (the owner thread owns it until then). */
hg_journal_t *hg_pipeline__journal(hg_pipeline_t *p);

/* Threads mode only (loop mode has no journal thread: this would wait
 * forever). hold nonzero: parks the journal thread at the top of its loop and returns
 * once it is parked (it then takes no record and touches no journal state,
 * so the caller may inject a journal fault); call only when everything
 * committed so far is durable. hold 0: lets it go on. Owner thread. */
void hg_pipeline__hold_journal(hg_pipeline_t *p, int hold);

/* True when consumer's outbound ring holds no record, released or not.
 * Any thread; a snapshot. */
int hg_pipeline__outbound_empty(hg_pipeline_t *p, uint32_t consumer);

/* True while both the engine and the journal thread sleep on their waiters
 * (announced sleep). Any thread; a snapshot that may be stale at once. */
int hg_pipeline__threads_asleep(hg_pipeline_t *p);

/* True while the engine thread sleeps on its waiter. It announces sleep only
 * after a pass that released nothing with no command waiting, so once
 * last_seq covers what was submitted, every record staged so far is in the
 * consumers' rings (unless a ring is full). Any thread; a snapshot. */
int hg_pipeline__engine_asleep(hg_pipeline_t *p);

#endif
