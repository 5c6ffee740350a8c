"""Run by test_client_install (C) with only an installed hgclient on the
path: the package imports from there (not from the build or source tree),
logs in, places an order and follows it through the market-data helper: the
bid it adds, a trade against another key's order and the level it leaves,
a gap in md_seq (answered by a new snapshot), and the cancel that empties
the book again. Exits 0 when every check passed; raises at the first failure.

Arguments: port key_a account_a key_b install_dir build_dir source_dir.
Secrets follow the harness rule (byte i of key k's secret is
(k * 31 + i) mod 256).
"""

import os
import sys

import hgclient
from hgclient import Client, MarketData, MarketDataRefused, pb


def secret(key_id):
    return bytes((key_id * 31 + i) % 256 for i in range(32))


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def until(md, want, what):
    """The first market-data Update for which want(u) holds."""
    for u in md.updates(idle=5.0):
        if want(u):
            return u
    raise AssertionError("no market data: " + what)


def main():
    port, key_a, acc_a, key_b = (int(x) for x in sys.argv[1:5])
    install, build, source = (os.path.realpath(p) for p in sys.argv[5:8])
    here = os.path.realpath(hgclient.__file__)
    check(here.startswith(install + os.sep), "hgclient imported from %s" % here)
    check(os.path.realpath(pb.__file__).startswith(install + os.sep), "hourglass_pb2 from elsewhere")
    for p in sys.path:
        rp = os.path.realpath(p) if p else os.getcwd()
        check(not rp.startswith(build) and not rp.startswith(os.path.join(source, "gateway")),
              "build or source folder on the path: %s" % p)

    a = Client(port=port, key_id=key_a, secret=secret(key_a))
    check(a.connect().account == acc_a, "login of key a")
    md = MarketData(a)
    book = md.subscribe(1, depth=5)
    check(book.best_bid() is None and book.best_ask() is None, "an empty book at first: %s %s" % (book.bids, book.asks))
    try:
        md.subscribe(77)
        check(False, "instrument 77 subscribed")
    except MarketDataRefused as e:
        check(e.reason == 64, "refusal reason %d" % e.reason)

    seq = a.new_order(1, 501, pb.SIDE_BUY, qty=3, price=500)
    u = until(md, lambda u: u.kind == "level", "the new bid")
    check(u.msg.side == pb.SIDE_BUY and u.msg.price == 500 and u.msg.qty == 3, "level %s" % u.msg)
    check(book.best_bid() == (500, 3), "best bid %s" % (book.best_bid(),))
    # The execution report arrived while the helper read: it is kept in md.other.
    acks = [e.execution_report for e in md.other if e.WhichOneof("body") == "execution_report"]
    check(any(r.ref_seq == seq and r.exec_type == pb.EXEC_NEW for r in acks),
          "order acknowledged: %s" % acks)

    b = Client(port=port, key_id=key_b, secret=secret(key_b))
    b.connect()
    b.new_order(1, 502, pb.SIDE_SELL, qty=2, price=500)
    t = until(md, lambda u: u.kind == "trade", "the trade")
    check(t.msg.price == 500 and t.msg.qty == 2 and t.msg.aggressor == pb.SIDE_SELL,
          "trade %s" % t.msg)
    check(book.last_trade is t.msg, "last trade kept")
    until(md, lambda u: u.kind == "level" and u.msg.qty == 1, "the bid left")
    check(book.best_bid() == (500, 1) and book.levels(pb.SIDE_BUY) == [(500, 1)],
          "book after the trade %s" % book.bids)
    check(book.md_seq > 0 and not book.stale, "md_seq %d" % book.md_seq)
    # A gap in md_seq: the helper subscribes again and the snapshot restores the book.
    gap = pb.Envelope()
    gap.md_level.instrument_id = 1
    gap.md_level.md_seq = book.md_seq + 3
    gap.md_level.side = pb.SIDE_BUY
    gap.md_level.price = 400
    gap.md_level.qty = 9
    check(md._apply(gap, "md_level") is None and book.stale, "a gap marks the book stale")
    check(400 not in book.bids, "an increment after a gap applied")
    until(md, lambda u: u.kind == "snapshot", "the snapshot after a gap")
    check(not book.stale and book.bids == {500: 1}, "book after the new snapshot %s" % book.bids)
    # Cancelling the rest empties the book again (the test runs this twice).
    a.mass_cancel(1)
    until(md, lambda u: u.kind == "level" and u.msg.qty == 0, "the bid cancelled")
    check(book.best_bid() is None and book.levels(pb.SIDE_BUY) == [], "book after the cancel")

    md.unsubscribe(1)
    check(1 not in md.books, "unsubscribed book forgotten")
    b.logout()
    a.logout()
    print("python client install: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
