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

/* hg_command_encode() without its fast encoder: protobuf-c for every
 * command, for the differential test of the fast encoder. Same contract. */
int hg_command__encode_full(const hg_command_t *cmd, uint8_t *buf, size_t cap, size_t *len);

/* 1 if hg_command_encode() uses its fast encoder for the order commands,
 * that is if the generated descriptors have the layout it writes; 0 if it
 * falls back to protobuf-c for everything. Any thread. */
int hg_command__encode_fast_active(void);

/* The layout check behind hg_command__encode_fast_active(), on any
 * hourglass.v1.Command descriptor (and the body descriptors its fields 3..6
 * point to): 1 if it matches what the fast encoder writes, else 0. Pure. */
struct ProtobufCMessageDescriptor;
int hg_command__encode_layout_ok(const struct ProtobufCMessageDescriptor *command);

#endif
