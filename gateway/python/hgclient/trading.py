"""Symbols and USD on top of Client, as hgctl speaks them.

The wire speaks instrument ids, prices in ticks (InstrumentInfo.tick_size
micro-USD per GPU-hour each), money in micro-USD and times in nanoseconds.
These helpers take and give what a trader reads instead: symbols (in any
case), prices in USD per GPU-hour as exact decimal.Decimal values (typed as
"3.420" or Decimal; a price that is not on the tick is refused, never
rounded), money in USD (Decimal), times as UTC ISO strings and enum names;
answers are dataclasses and plain dicts with stable keys, so that a list of
them is a table (`dataframe()` turns one into a pandas DataFrame where
pandas is installed; pandas is no dependency of the package).

Errors a user can fix raise HgError with one line that says what to do.
"""

import datetime
import time
from dataclasses import asdict, dataclass
from decimal import Decimal, InvalidOperation

from . import hourglass_pb2 as pb

MICRO = Decimal(1000000)

STATE_NAMES = {pb.STATE_TRADING: "trading", pb.STATE_HALTED: "halted",
               pb.STATE_DELISTED: "delisted"}


class HgError(Exception):
    """A refusal or a mistake in the request, as one line."""


class HgUsageError(HgError):
    """A mistake in what was asked (a price off the tick, a bad side),
    found before anything is sent."""


def _enum_name(enum, value, prefix):
    try:
        return enum.Name(value)[len(prefix):].lower()
    except ValueError:
        return str(value)


def utc(ts_ns):
    """Nanoseconds since the epoch as an ISO 8601 UTC string ('' for 0)."""
    if not ts_ns:
        return ""
    s, ns = divmod(int(ts_ns), 1000000000)
    t = datetime.datetime.fromtimestamp(s, datetime.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%09dZ" % ns


CENT = Decimal("0.01")
MICRO_STEP = Decimal("0.000001")


def usd_money(micro):
    """Micro-USD as USD (Decimal, exact): two decimals, six when the amount
    is not whole cents (as hgctl prints it)."""
    micro = int(micro)
    return (Decimal(micro) / MICRO).quantize(CENT if micro % 10000 == 0 else MICRO_STEP)


def _price(micro, tick_usd):
    """A price of micro micro-USD per GPU-hour, with the tick's decimals
    (six when it is not on a tick)."""
    d = Decimal(micro) / MICRO
    q = d.quantize(tick_usd)
    return q if q == d else d.quantize(MICRO_STEP)


@dataclass(frozen=True)
class Instrument:
    """A listed contract: prices in USD per GPU-hour, unit in GPU-hours."""
    id: int
    symbol: str
    grade: str
    month: str
    tick_usd: Decimal
    unit: int
    min_usd: Decimal
    max_usd: Decimal
    max_qty: int
    state: str
    ref_usd: Decimal
    band_low_usd: Decimal
    band_high_usd: Decimal
    tick_micro: int  # the wire's tick size, micro-USD per GPU-hour

    @classmethod
    def from_pb(cls, i):
        t = i.tick_size
        tick_usd = Decimal(t) / MICRO

        def px(ticks):
            return _price(int(ticks) * t, tick_usd)
        return cls(i.instrument_id, i.symbol, i.grade, i.delivery_month, px(1), i.contract_unit,
                   px(i.min_price), px(i.max_price), i.max_order_qty,
                   STATE_NAMES.get(i.state, str(i.state)), px(i.ref_price), px(i.band_low),
                   px(i.band_high), t)

    def usd(self, ticks):
        """A price in ticks as USD per GPU-hour (Decimal)."""
        return _price(int(ticks) * self.tick_micro, self.tick_usd)

    def ticks(self, price):
        """A price in USD per GPU-hour ("3.420", Decimal or int) as ticks;
        HgError if it is not a positive price on the tick."""
        text = str(price).strip()
        try:
            d = Decimal(text)
        except InvalidOperation:
            raise HgUsageError("price %r is not a price in USD per GPU-hour (e.g. 3.42)" % text) from None
        if not d.is_finite() or d <= 0:
            raise HgUsageError("price %r must be above zero" % text)
        if "." not in text and d >= 1000:
            raise HgUsageError("price %r is %s USD per GPU-hour: did you mean %s? (prices are in USD "
                          "per GPU-hour)" % (text, text, self.usd(int(d))))
        micro = d * MICRO
        if micro != micro.to_integral_value() or int(micro) % self.tick_micro:
            raise HgUsageError("price %r is not on the tick: prices are on a tick of %s USD per "
                          "GPU-hour" % (text, self.tick_usd))
        return int(micro) // self.tick_micro


def dataframe(rows):
    """A pandas DataFrame of rows (dicts or dataclasses), one column per key.
    Needs pandas (not a dependency of hgclient: install python3-pandas)."""
    try:
        import pandas
    except ImportError:
        raise HgError("dataframe() needs pandas: apt-get install python3-pandas "
                      "(or pip install pandas)") from None
    return pandas.DataFrame([asdict(r) if hasattr(r, "__dataclass_fields__") else r
                             for r in rows])


class TradingMixin:
    """Client's calls in symbols and USD (see the module's docstring)."""

    _instruments = None

    def list_instruments(self, timeout=5.0):
        """The listed contracts, as Instrument (asked afresh; also cached for
        the symbol lookups of the other calls)."""
        seq = self.instruments()
        lst = self._reply(seq, "instrument_list", timeout).instrument_list
        self._instruments = [Instrument.from_pb(i) for i in lst.instruments]
        return list(self._instruments)

    def instrument(self, which):
        """The Instrument named by symbol (any case) or id; HgError if none."""
        if self._instruments is None:
            self.list_instruments()
        key = str(which).strip()
        for i in self._instruments:
            if i.symbol.upper() == key.upper() or (key.isdigit() and i.id == int(key)):
                return i
        raise HgError("no instrument %r (list_instruments(), or `python3 -m hgclient "
                      "instruments`, lists them)" % key)

    def order(self, instrument, side, qty, price=None, tif="gtc", order_type="limit",
              post_only=False, client_order_id=None, timeout=5.0, settle=0.2):
        """Places an order (instrument: symbol or id; side "buy" or "sell";
        price in USD per GPU-hour) and returns its execution reports as dicts
        (report()), the first the answer, then the fills and cancels that
        follow within `settle` seconds. A rejected order is a report with
        exec_type "rejected", not an exception."""
        inst = self.instrument(instrument)
        if side not in ("buy", "sell"):
            raise HgUsageError("side must be buy or sell, not %r" % (side,))
        if order_type not in ("limit", "market"):
            raise HgUsageError("order_type must be limit or market, not %r" % (order_type,))
        tifs = {"gtc": pb.TIF_GTC, "day": pb.TIF_DAY, "ioc": pb.TIF_IOC, "fok": pb.TIF_FOK}
        if tif not in tifs:
            raise HgUsageError("tif must be gtc, day, ioc or fok, not %r" % (tif,))
        ticks = None
        if order_type == "limit":
            if price is None:
                raise HgUsageError("a limit order needs a price (USD per GPU-hour)")
            ticks = inst.ticks(price)
        elif price is not None:
            raise HgUsageError("a market order takes no price")
        if client_order_id is None:
            client_order_id = time.time_ns() >> 1
        seq = self.new_order(inst.id, client_order_id, pb.SIDE_SELL if side == "sell" else pb.SIDE_BUY,
                             int(qty), ticks,
                             pb.ORD_TYPE_MARKET if order_type == "market" else pb.ORD_TYPE_LIMIT,
                             pb.TIF_IOC if order_type == "market" and tif == "gtc" else tifs[tif],
                             post_only)
        return self._reports(seq, timeout, settle)

    def cancel_order(self, instrument, order_id, timeout=5.0):
        """Cancels one order; returns its reports as dicts."""
        seq = self.cancel(self.instrument(instrument).id, int(order_id))
        return self._reports(seq, timeout, 0.0)

    def position_list(self, account=None, timeout=5.0):
        """The positions of the key's account (a risk viewer: of account, or
        of every account of its firm when None), one dict per account and
        contract (position rows), and the accounts' cash and margin as dicts
        (account rows): returns (positions, accounts)."""
        if self._instruments is None:
            self.list_instruments()
        accounts = [account] if account is not None else [None]
        pos_rows, acct_rows = [], []
        while accounts:
            a = accounts.pop(0)
            env = pb.Envelope()
            env.positions_request.SetInParent()
            if a is not None:
                env.positions_request.account = a
            p = self._reply(self.send(env), "positions", timeout).positions
            if p.reason:
                raise HgError("positions refused: %s (%d)" % (
                    _enum_name(pb.RejectReason, p.reason, "REJ_"), p.reason))
            if a is None and p.firm_accounts:
                accounts.extend(p.firm_accounts)
                continue
            for x in p.positions:
                inst = self.instrument(x.instrument_id)  # cached above: reads nothing
                avg = None
                if x.HasField("open_value") and x.net_qty:
                    avg = _price(Decimal(x.open_value) * inst.tick_micro / x.net_qty,
                                 inst.tick_usd)
                pos_rows.append({
                    "account": p.account, "symbol": inst.symbol, "net": x.net_qty,
                    "bought": x.bought_qty, "sold": x.sold_qty, "avg_price": avg,
                    "settle_usd": inst.usd(x.settle_price) if x.HasField("settle_price") else None,
                    "pnl_usd": usd_money(x.pnl) if x.HasField("pnl") else None})
            acct_rows.append({
                "account": p.account, "cash_usd": usd_money(p.cash),
                "initial_margin_usd": usd_money(p.initial_margin)
                if p.HasField("initial_margin") else None,
                "open_order_margin_usd": usd_money(p.open_order_margin)
                if p.HasField("open_order_margin") else None,
                "excess_equity_usd": usd_money(p.excess_equity)
                if p.HasField("excess_equity") else None})
        return pos_rows, acct_rows

    def open_order_list(self, account=None, instrument=None, timeout=5.0):
        """The live orders from the gateway's list (OpenOrdersRequest, every
        page), one dict each: account, order_id, client_order_id, symbol,
        side, price_usd, qty, leaves, quote_group (None: not a quote); by
        account, then order id. The key's account; a risk viewer: every
        account of its firm, or `account`'s. instrument: symbol or id, None
        for all."""
        if self._instruments is None:
            self.list_instruments()
        inst_id = self.instrument(instrument).id if instrument is not None else 0
        rows, from_account, from_oid = [], 0, 0
        while True:
            seq = self.open_orders(account or 0, inst_id, from_account, from_oid)
            m = self._reply(seq, "open_orders", timeout).open_orders
            if m.reason:
                raise HgError("open orders refused: %s (%d)" % (
                    _enum_name(pb.RejectReason, m.reason, "REJ_"), m.reason))
            for o in m.orders:
                inst = self.instrument(o.instrument_id)  # cached above: reads nothing
                rows.append({
                    "account": o.account, "order_id": o.order_id,
                    "client_order_id": o.client_order_id, "symbol": inst.symbol,
                    "side": "sell" if o.side == pb.SIDE_SELL else "buy",
                    "price_usd": inst.usd(o.price), "qty": o.qty, "leaves": o.leaves,
                    "quote_group": o.quote_group or None})
            if not m.next_order_id:
                return rows
            from_account, from_oid = m.next_account, m.next_order_id

    def report(self, r):
        """An ExecutionReport as a dict: time (UTC), exec_type, order_id,
        client_order_id, symbol, side, price_usd, qty, leaves, maker, reason
        (its name, "" for none)."""
        # From the cache only: fetching here would read past other replies.
        inst = next((i for i in self._instruments or () if i.id == r.instrument_id), None)
        sym = inst.symbol if inst else str(r.instrument_id)
        if r.exec_type == pb.EXEC_REJECTED:
            reason = _enum_name(pb.RejectReason, r.reason, "REJ_")
        elif r.exec_type == pb.EXEC_CANCELLED:
            reason = _enum_name(pb.CancelReason, r.reason, "CXL_")
        else:
            reason = ""
        return {"time": utc(r.ts), "exec_type": _enum_name(pb.ExecType, r.exec_type, "EXEC_"),
                "order_id": r.order_id, "client_order_id": r.client_order_id, "symbol": sym,
                "side": "sell" if r.side == pb.SIDE_SELL else "buy",
                "price_usd": inst.usd(r.price) if inst and r.price else None,
                "qty": r.qty, "leaves": r.leaves, "maker": r.maker, "reason": reason}

    # ------------------------------------------------------------ internal
    def _reply(self, seq, kind, timeout):
        """The reply of kind to request seq; a Response refusing it raises
        HgError."""
        deadline = time.monotonic() + timeout
        while True:
            e = self.recv(max(deadline - time.monotonic(), 0))
            if e is None:
                raise HgError("no answer from the gateway within %g s" % timeout)
            body = e.WhichOneof("body")
            if body == "terminate":
                raise HgError("the gateway ended the session: code %d %s" % (
                    e.terminate.code, e.terminate.text))
            msg = getattr(e, body)
            if getattr(msg, "ref_seq", None) != seq:
                continue
            if body == kind:
                return e
            if body == "response" and msg.reason:
                raise HgError("refused: %s (%d)" % (
                    _enum_name(pb.RejectReason, msg.reason, "REJ_"), msg.reason))

    def _reports(self, seq, timeout, settle):
        """The execution reports answering request seq, then those of the same
        order arriving within settle seconds, until the order is done."""
        first = self._reply(seq, "execution_report", timeout).execution_report
        out = [self.report(first)]
        done = first.exec_type in (pb.EXEC_REJECTED, pb.EXEC_CANCELLED) or (
            first.exec_type == pb.EXEC_FILL and first.leaves == 0)
        deadline = time.monotonic() + settle
        while not done and time.monotonic() < deadline:
            e = self.recv(max(deadline - time.monotonic(), 0))
            if e is None or e.WhichOneof("body") != "execution_report":
                continue
            r = e.execution_report
            if r.order_id != first.order_id:
                continue
            out.append(self.report(r))
            done = r.leaves == 0
        return out


__all__ = ["HgError", "HgUsageError", "Instrument", "TradingMixin", "dataframe", "usd_money", "utc"]
