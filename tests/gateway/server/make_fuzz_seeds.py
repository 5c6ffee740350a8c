#!/usr/bin/env python3
"""Writes the seed inputs of fuzz_gateway into tests/gateway/server/fuzz_seeds/.

Each seed is what the fuzz target reads: one selector byte (bit 0 set:
a Login verdict activates the session), then length-delimited Envelope
frames. The frames are the hot shapes the hand-written codec handles
(NewOrderRequest, CancelRequest, ReplaceRequest, Heartbeat,
ExecutionReport), written here from the protobuf wire format by hand, so
that even a short run starts from inputs that reach those paths.
Field numbers follow proto/hourglass.proto.
"""
import os


def varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def field(num, v):
    return varint(num << 3) + varint(v)


def sub(num, body):
    return varint((num << 3) | 2) + varint(len(body)) + body


def frame(env):
    return varint(len(env)) + env


def envelope(seq, num, body):
    return field(1, seq) + sub(num, body)


new_order = (field(1, 1) + field(2, 7) + field(3, 1) + field(4, 1) + field(5, 1) +
             field(6, 1000) + field(7, 3))
new_order_all = new_order + field(8, 1) + field(9, 1) + field(10, 5)
cancel = field(1, 1) + field(2, 42)
replace = field(1, 1) + field(2, 42) + field(3, 1010) + field(4, -2)
report = (field(1, 1) + field(2, 1) + field(3, 9) + field(4, 7) + field(7, 1) +
          field(8, 1000) + field(9, 3) + field(10, 3) + field(12, 77) + field(13, 1 << 60) +
          field(14, 5))
open_orders = field(1, 101) + field(2, 1) + field(3, 101) + field(4, 42) + field(5, 2)

seeds = {
    "orders.bin": b"\x01" + frame(envelope(1, 12, b"")) + frame(envelope(2, 30, new_order)) +
                  frame(envelope(3, 30, new_order_all)) + frame(envelope(4, 31, cancel)) +
                  frame(envelope(5, 32, replace)),
    "report.bin": b"\x01" + frame(envelope(1, 80, report)) + frame(envelope(2, 12, b"")),
    "before_login.bin": b"\x00" + frame(envelope(1, 30, new_order)),
    "open_orders.bin": b"\x01" + frame(envelope(1, 72, open_orders)) +
                       frame(envelope(2, 72, b"")),
}

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fuzz_seeds")
os.makedirs(here, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(here, name), "wb") as f:
        f.write(data)
