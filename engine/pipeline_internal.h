/*
 * pipeline_internal.h - test hooks of the pipeline. Not public API.
 */
#ifndef HOURGLASS_ENGINE_PIPELINE_INTERNAL_H
#define HOURGLASS_ENGINE_PIPELINE_INTERNAL_H

#include "hourglass/pipeline.h"

/* The pipeline's journal, for fault injection before hg_pipeline_start()
 * (the owner thread owns it until then). */
hg_journal_t *hg_pipeline__journal(hg_pipeline_t *p);

/* True while both the engine and the journal thread sleep on their waiters
 * (announced sleep). Any thread; a snapshot that may be stale at once. */
int hg_pipeline__threads_asleep(hg_pipeline_t *p);

#endif
