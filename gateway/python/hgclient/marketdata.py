"""Market data over a Client: order books kept from snapshots and increments.

    md = MarketData(client)
    book = md.subscribe(1)                 # waits for the snapshot
    for u in md.updates(idle=5.0):         # stops after 5 s without market data
        if u.kind == "trade":
            print("trade", u.msg.price, u.msg.qty)
        print(u.book.best_bid(), u.book.best_ask())

The gateway answers MarketDataSubscribe with a MarketDataSnapshot (the book
at md_seq, at most `depth` levels per side), then sends MarketDataLevel (a
price level's new total quantity; 0 removes it), MarketDataTrade and
MarketDataStatus with md_seq + 1, + 2, ... per instrument. These are not in
the key's recoverable stream: when an increment's md_seq is not the next one,
MarketData subscribes again and ignores that instrument's increments until
the fresh snapshot, which it yields as an Update of kind "snapshot".

Increments name every level that changes, also beyond the subscribed depth;
levels that were beyond it at the snapshot are known only once an increment
names them.

Frames that are not market data (execution reports, responses, ...) and
arrive while MarketData reads are kept in MarketData.other (a deque, oldest
first) for the caller. One thread, like the Client.
"""

import collections
import time

from . import hourglass_pb2 as pb

Update = collections.namedtuple("Update", "kind instrument_id book msg")
Update.__doc__ = """One market-data message applied to its book: kind is "snapshot",
"level", "trade" or "status"; msg the protobuf message; book the Book after it."""

_MD_KINDS = {"md_snapshot": "snapshot", "md_level": "level", "md_trade": "trade",
             "md_status": "status"}


class MarketDataRefused(Exception):
    """The gateway refused a subscription (a Response with a RejectReason:
    132 REJ_INVALID_REQUEST for a depth outside 1..50, 64
    REJ_UNKNOWN_INSTRUMENT)."""

    def __init__(self, instrument_id, reason):
        super().__init__("market data of instrument %d refused: reason %d" % (instrument_id, reason))
        self.instrument_id = instrument_id
        self.reason = reason


class Book:
    """One instrument's book as market data shows it. bids and asks map a
    price (ticks) to the total quantity resting there; md_seq is the last
    message applied; state the InstrumentState; last_trade the last
    MarketDataTrade (None before one); stale is True between a detected gap
    and the fresh snapshot."""

    def __init__(self, instrument_id):
        self.instrument_id = instrument_id
        self.bids = {}
        self.asks = {}
        self.md_seq = 0
        self.state = 0
        self.last_trade = None
        self.stale = True

    def best_bid(self):
        """(price, qty) of the highest bid, or None."""
        return max(self.bids.items()) if self.bids else None

    def best_ask(self):
        """(price, qty) of the lowest ask, or None."""
        return min(self.asks.items()) if self.asks else None

    def levels(self, side, depth=10):
        """The best `depth` levels of side (pb.SIDE_BUY or pb.SIDE_SELL) as
        (price, qty) pairs, best first."""
        if side == pb.SIDE_BUY:
            return sorted(self.bids.items(), reverse=True)[:depth]
        return sorted(self.asks.items())[:depth]

    def _snapshot(self, m):
        self.bids = {lv.price: lv.qty for lv in m.bids}
        self.asks = {lv.price: lv.qty for lv in m.asks}
        self.md_seq = m.md_seq
        self.state = m.state
        self.stale = False

    def _increment(self, kind, m):
        self.md_seq = m.md_seq
        if kind == "level":
            side = self.bids if m.side == pb.SIDE_BUY else self.asks
            if m.qty:
                side[m.price] = m.qty
            else:
                side.pop(m.price, None)
        elif kind == "trade":
            self.last_trade = m
        else:
            self.state = m.state


class MarketData:
    """Books of the instruments a Client subscribed to through it."""

    def __init__(self, client):
        self.client = client
        self.books = {}          # instrument_id -> Book
        self.depth = {}          # instrument_id -> subscribed depth
        self.other = collections.deque()

    def subscribe(self, instrument_id, depth=10, timeout=5.0):
        """Subscribes and waits for the snapshot; returns the Book. Raises
        MarketDataRefused, or TimeoutError when no answer came in time.
        Subscribing again gives a fresh snapshot."""
        seq = self.client.md_subscribe(instrument_id, depth)
        self.depth[instrument_id] = depth
        book = self.books.setdefault(instrument_id, Book(instrument_id))
        book.stale = True
        deadline = time.monotonic() + timeout
        while True:
            e = self.client.recv(deadline - time.monotonic())
            if e is None:
                raise TimeoutError("no snapshot of instrument %d" % instrument_id)
            body = e.WhichOneof("body")
            if body == "response" and e.response.ref_seq == seq:
                del self.depth[instrument_id]
                del self.books[instrument_id]
                raise MarketDataRefused(instrument_id, e.response.reason)
            u = self._apply(e, body)
            if u is not None and u.kind == "snapshot" and u.instrument_id == instrument_id:
                return book

    def unsubscribe(self, instrument_id):
        """Stops the instrument's market data (the gateway's Response goes to
        other) and forgets its book."""
        self.client.md_unsubscribe(instrument_id)
        self.books.pop(instrument_id, None)
        self.depth.pop(instrument_id, None)

    def updates(self, idle=None):
        """Yields an Update for each market-data message of a subscribed
        instrument, in arrival order. Stops after `idle` seconds without one
        (None: never); a closed connection raises ConnectionError."""
        last = time.monotonic()
        while True:
            wait = 1.0 if idle is None else idle - (time.monotonic() - last)
            if wait <= 0:
                return
            e = self.client.recv(wait)
            if e is None:
                continue
            u = self._apply(e, e.WhichOneof("body"))
            if u is not None:
                last = time.monotonic()
                yield u

    def _apply(self, e, body):
        """Applies a market-data frame to its book and returns the Update
        (None for frames that are not one, which go to other)."""
        kind = _MD_KINDS.get(body)
        if kind is None:
            self.other.append(e)
            return None
        m = getattr(e, body)
        book = self.books.get(m.instrument_id)
        if book is None:
            return None          # unsubscribed meanwhile
        if kind == "snapshot":
            book._snapshot(m)
            return Update(kind, m.instrument_id, book, m)
        if book.stale:
            return None          # a fresh snapshot is on its way
        if m.md_seq != book.md_seq + 1:
            book.stale = True
            self.client.md_subscribe(m.instrument_id, self.depth[m.instrument_id])
            return None
        book._increment(kind, m)
        return Update(kind, m.instrument_id, book, m)
