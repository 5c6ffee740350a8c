/*
 * command_internal.h - test hook of the command codec. Not public API.
 */
#ifndef HOURGLASS_ENGINE_COMMAND_INTERNAL_H
#define HOURGLASS_ENGINE_COMMAND_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "hourglass/exchange.h"

/* hg_command_decode() without its fast path: protobuf-c and the checks
 * only, for the differential test of the fast path. Same contract. */
int hg_command__decode_full(const uint8_t *buf, size_t len, hg_command_t *out);

/* hg_command_decode() for journal replay, which applies each command and
 * drops it: the same result, except that on success the bytes of out past
 * the member of u that out->type selects may keep what they held before
 * (hg_exchange_apply() reads only that member). Saves clearing the whole
 * ~0.5 KiB command per record. */
int hg_command__decode_prefix(const uint8_t *buf, size_t len, hg_command_t *out);

#endif
