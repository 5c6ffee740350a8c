#!/usr/bin/env python3
"""Interop check run by test_python_interop (C): the Python client, on
Google's protobuf runtime, against the C gateway on protobuf-c.

Arguments: port key_a account_a key_b key_operator, or
`tls port key_a account_a ca other_ca` against a TLS listener (login and a
request over TLS, a server certificate from an untrusted CA refused). Secrets
follow the harness rule
(byte i of key k's secret is (k * 31 + i) mod 256). Exits 0 when every
check passed; prints the first failure otherwise.
"""

import sys
import socket
import ssl

from hgclient import (APP_BODIES, Client, LoginRefused, ProtocolError, decode_varint,
                      encode_varint, pb, tls_context)


def secret(key_id):
    return bytes((key_id * 31 + i) % 256 for i in range(32))


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def tls_main():
    port, key_a, acc_a = (int(x) for x in sys.argv[2:5])
    ca, other_ca = sys.argv[5:7]
    a = Client(port=port, key_id=key_a, secret=secret(key_a), tls=tls_context(ca))
    ack = a.connect()
    check(ack.account == acc_a, "account %d over TLS" % ack.account)
    check(a.sock.version() == "TLSv1.3", "TLS version %s" % a.sock.version())
    seq = a.instruments()
    check(a.expect("instrument_list").instrument_list.ref_seq == seq, "instruments over TLS")
    a.logout()
    bad = Client(port=port, key_id=key_a, secret=secret(key_a), tls=tls_context(other_ca))
    try:
        bad.connect()
        check(False, "a server certificate from an untrusted CA was accepted")
    except ssl.SSLCertVerificationError:
        pass
    print("python interop over TLS: all checks passed")
    return 0


def main():
    if sys.argv[1] == "tls":
        return tls_main()
    port, key_a, acc_a, key_b, key_op = (int(x) for x in sys.argv[1:6])

    # Framing helpers agree with the rules (minimal varints only).
    check(encode_varint(300) == b"\xac\x02", "varint 300")
    check(decode_varint(b"\xac\x02") == (300, 2), "decode 300")
    check(decode_varint(b"\xac") is None, "incomplete varint")
    try:
        decode_varint(b"\x80\x00")
        check(False, "non-minimal varint accepted")
    except ProtocolError:
        pass

    # A wrong secret is refused with LOGIN_AUTH_FAILED.
    bad = Client(port=port, key_id=key_a, secret=b"\x01" * 32)
    try:
        bad.connect()
        check(False, "login with a wrong secret succeeded")
    except LoginRefused as e:
        check(e.code == pb.LOGIN_AUTH_FAILED, "reject code %d" % e.code)
    bad.close()

    a = Client(port=port, key_id=key_a, secret=secret(key_a), keepalive_ms=200)
    ack = a.connect()
    check(ack.account == acc_a, "account %d" % ack.account)
    check(ack.role == pb.ROLE_TRADER, "role")
    # A fresh exchange: its first start.
    check(a.epoch == 1 and not a.restarted, "epoch %d" % a.epoch)

    seq = a.instruments()
    lst = a.expect("instrument_list").instrument_list
    check(lst.ref_seq == seq, "instrument list ref_seq")
    syms = [i.symbol for i in lst.instruments]
    check(syms[:2] == ["B200.A.2027-01", "B200.A.2027-02"], "symbols %r" % syms)

    # Place and cancel; a client order id that needs a 9-byte varint.
    clid = (1 << 62) + 12345
    seq = a.new_order(1, clid, pb.SIDE_BUY, qty=10, price=500)
    r = a.expect("execution_report").execution_report
    check(r.exec_type == pb.EXEC_NEW, "exec_type %d" % r.exec_type)
    check(r.ref_seq == seq and r.client_order_id == clid, "new ack fields")
    check(r.leaves == 10 and r.price == 500 and r.side == pb.SIDE_BUY, "new ack values")
    oid = r.order_id
    seq = a.cancel(1, oid)
    r = a.expect("execution_report").execution_report
    check(r.exec_type == pb.EXEC_CANCELLED and r.order_id == oid, "cancelled")
    check(r.ref_seq == seq and r.leaves == 0, "cancel fields")
    seq = a.cancel(1, oid)
    r = a.expect("execution_report").execution_report
    check(r.exec_type == pb.EXEC_REJECTED and r.reason == pb.REJ_UNKNOWN_ORDER, "second cancel")
    check(r.request == pb.REQ_CANCEL, "reject request kind")

    # A second session of the same key: a ref_seq base of its own, and
    # the reply reaches both sessions with the seq the joiner waits for.
    a2 = Client(port=port, key_id=key_a, secret=secret(key_a))
    check(a2.connect().ref_seq_base > 0 and a.ref_seq_base == 0, "ref_seq_base")
    seq2 = a2.instruments()
    check(seq2 == 1 + a2.ref_seq_base, "joiner's ref_seq %d" % seq2)
    check(a2.expect("instrument_list").instrument_list.ref_seq == seq2, "joiner's reply")
    check(a.expect("instrument_list").instrument_list.ref_seq == seq2, "reply seen by both")
    a2.logout()

    # A trade between two Python sessions: fills on both sides.
    b = Client(port=port, key_id=key_b, secret=secret(key_b))
    b.connect()
    b.new_order(2, 1, pb.SIDE_SELL, qty=3, price=700)
    rb = b.expect("execution_report").execution_report
    check(rb.exec_type == pb.EXEC_NEW, "b resting")
    a.new_order(2, 2, pb.SIDE_BUY, qty=2, price=800)
    fills = []
    while len(fills) < 1:
        r = a.expect("execution_report").execution_report
        if r.exec_type == pb.EXEC_FILL:
            fills.append(r)
    check(fills[0].price == 700 and fills[0].qty == 2 and not fills[0].maker, "a fill %s" % fills[0])
    r = b.expect("execution_report").execution_report
    check(r.exec_type == pb.EXEC_FILL and r.maker and r.leaves == 1, "b fill %s" % r)
    seq = a.positions()
    pos = a.expect("positions").positions
    check(pos.ref_seq == seq and pos.account == acc_a, "positions header")
    net = {p.instrument_id: p.net_qty for p in pos.positions}
    check(net.get(2) == 2, "position %r" % net)
    # B's remaining 1 lot is its only live order, in symbols and USD too.
    seq = b.open_orders(limit=10)
    oo = b.expect("open_orders").open_orders
    check(oo.ref_seq == seq and oo.account == b.ack.account and len(oo.orders) == 1, "open orders %s" % oo)
    check(oo.orders[0].order_id == rb.order_id and oo.orders[0].leaves == 1, "open order %s" % oo)
    rows = b.open_order_list()
    check(len(rows) == 1 and rows[0]["symbol"] == "B200.A.2027-02" and rows[0]["side"] == "sell"
          and rows[0]["qty"] == 3 and rows[0]["leaves"] == 1, "open_order_list %r" % rows)
    check(a.open_order_list() == [], "a has no live order")
    seq = a.open_orders(account=b.ack.account)
    check(a.expect("open_orders").open_orders.reason == pb.REJ_UNKNOWN_ACCOUNT, "another account")
    b.mass_cancel()
    r = b.expect("execution_report").execution_report
    check(r.exec_type == pb.EXEC_CANCELLED and r.reason == pb.CXL_MASS_CANCEL, "mass cancel")

    # Heartbeats keep an idle session alive past two keepalive intervals.
    e = a.recv(timeout=0.6)
    check(e is None or e.WhichOneof("body") in ("heartbeat", "warning"), "idle frame %s" % e)
    a.positions()
    a.expect("positions")

    # Every client request carries a seq, settlement commands and statement
    # requests included (without one the session would end, TERM_MISSING_SEQ).
    for body in ("compute_fixing", "publish_samples", "daily_settlement", "expire",
                 "list_curve", "statement_request", "new_order", "add_api_key",
                 "open_orders_request"):
        check(body in APP_BODIES, "%s not sequenced" % body)
    for body in ("login", "logout", "heartbeat", "retransmit_request", "execution_report"):
        check(body not in APP_BODIES, "%s sequenced" % body)
    env = pb.Envelope()
    env.statement_request.SetInParent()
    seq = a.send(env)
    check(seq is not None, "statement request without seq")
    st = a.expect("statement").statement
    check(st.ref_seq == seq, "statement ref_seq %d, sent %d" % (st.ref_seq, seq))
    env = pb.Envelope()
    env.compute_fixing.gpu = "B200"
    env.compute_fixing.grade = "A"
    env.compute_fixing.day = 20000
    seq = a.send(env)
    r = a.expect("response").response
    check(r.ref_seq == seq and r.reason == pb.REJ_NOT_PERMITTED, "trader fixing %s" % r)
    op = Client(port=port, key_id=key_op, secret=secret(key_op))
    op.connect()
    seq = op.send(env)
    check(seq == 1, "operator's first seq %r" % seq)
    sr = op.expect("settlement_result").settlement_result
    check(sr.ref_seq == seq, "settlement result %s" % sr)
    op.logout()

    # A protocol violation from our side: the server's Terminate decodes here.
    a.sock.sendall(b"\x00")
    t = a.expect("terminate").terminate
    check(t.code == pb.TERM_FRAME_ZERO_LENGTH, "terminate code %d" % t.code)
    a.close()
    b.logout()
    print("python interop: all checks passed")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (AssertionError, ConnectionError, TimeoutError, socket.error) as e:
        print("python interop FAILED: %s" % e, file=sys.stderr)
        sys.exit(1)
