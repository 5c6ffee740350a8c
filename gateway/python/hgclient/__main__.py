"""python3 -m hgclient: the client from the command line, in symbols and USD.

    python3 -m hgclient instruments [--format text|json|csv]
    python3 -m hgclient order --instrument B200.A.2027-03 --side buy --qty 3 --price 3.300
    python3 -m hgclient cancel --instrument B200.A.2027-03 --order-id N
    python3 -m hgclient positions [--account N] [--format text|json|csv]
    python3 -m hgclient orders [--account N] [--format text|json|csv]
    python3 -m hgclient md --instrument B200.A.2027-03 [--depth 5] [--idle 10] [--count N]

The address and key come from --host, --port, --key-id, --secret (hex) or
HG_HOST, HG_PORT, HG_KEY_ID, HG_SECRET, and TLS from --tls/--ca or HG_TLS=1
and HG_CA, as for hgctl. Prices in USD per GPU-hour, money in USD, times in
UTC. An error is one line on stderr: exit status 1 when the exchange or the
connection refused, 2 for a usage mistake.
"""

import argparse
import csv
import json
import os
import ssl
import sys
from decimal import Decimal

from . import Client, HgError, HgUsageError, LoginRefused, MarketData, ProtocolError, parse_address, tls_context

EXIT_FAIL, EXIT_USAGE = 1, 2


def _show(kind, sym, inst, book):
    bid, ask = book.best_bid(), book.best_ask()
    print("%s %s md_seq=%d bid %s ask %s" % (
        kind, sym, book.md_seq, "%d x %s" % (bid[1], inst.usd(bid[0])) if bid else "-",
        "%d x %s" % (ask[1], inst.usd(ask[0])) if ask else "-"), flush=True)


def _table(rows, fmt, columns):
    """rows (dicts) as a text table, JSON (one array) or CSV, columns in order."""
    if fmt == "json":
        # Decimals as bare numbers with their exact text (3.420), as hgctl.
        def val(v):
            return str(v) if isinstance(v, Decimal) else json.dumps(v)
        print("[" + ",".join("{" + ",".join("%s:%s" % (json.dumps(k), val(r[k])) for k in columns)
                             + "}" for r in rows) + "]")
        return
    if fmt == "csv":
        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(columns)
        for r in rows:
            w.writerow(["" if r[k] is None else r[k] for k in columns])
        return
    cells = [[("-" if r[k] is None else str(r[k])) for k in columns] for r in rows]
    width = [max([len(c)] + [len(x[i]) for x in cells]) for i, c in enumerate(columns)]
    for line in [list(columns)] + cells:
        print("  ".join(v.ljust(width[i]) for i, v in enumerate(line)).rstrip())


def _report_line(r):
    s = "%s %s order_id=%d side=%s" % (r["exec_type"].upper(), r["symbol"], r["order_id"], r["side"])
    if r["price_usd"] is not None:
        s += " price=%s" % r["price_usd"]
    s += " qty=%d leaves=%d" % (r["qty"], r["leaves"])
    if r["exec_type"] == "fill":
        s += " maker=%d" % r["maker"]
    if r["reason"]:
        s += " reason=%s" % r["reason"]
    return s + " time=%s" % r["time"]


def _parser():
    env = os.environ.get
    ap = argparse.ArgumentParser(prog="python3 -m hgclient", description="Hourglass client")
    ap.add_argument("--host", default=env("HG_HOST") or "127.0.0.1")
    ap.add_argument("--port", type=int, default=env("HG_PORT") or 7700)
    ap.add_argument("--key-id", type=int, default=env("HG_KEY_ID") or 0)
    ap.add_argument("--secret", default=env("HG_SECRET", ""), help="hex")
    ap.add_argument("--tls", action="store_true",
                    default=env("HG_TLS", "") not in ("", "0", "no"))
    ap.add_argument("--ca", default=env("HG_CA") or None, help="PEM CAs to trust (implies --tls)")
    ap.add_argument("--tls-name", default=env("HG_TLS_NAME"),
                    help="name the certificate must carry (default: --host)")
    ap.add_argument("--nodes", default=env("HG_NODES", ""),
                    help="a cluster's other nodes, host:port,host:port,... (the leader is followed)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    fmt = argparse.ArgumentParser(add_help=False)
    fmt.add_argument("--format", choices=["text", "json", "csv"], default="text")
    sub.add_parser("instruments", parents=[fmt], help="list the instruments")
    o = sub.add_parser("order", help="place one order and print its execution reports")
    o.add_argument("--instrument", required=True, help="symbol (any case) or id")
    o.add_argument("--side", choices=["buy", "sell"], required=True)
    o.add_argument("--price", help="USD per GPU-hour, e.g. 3.420 (limit orders)")
    o.add_argument("--qty", type=int, required=True)
    o.add_argument("--type", choices=["limit", "market"], default="limit")
    o.add_argument("--tif", choices=["gtc", "day", "ioc", "fok"], default="gtc")
    o.add_argument("--clordid", type=int, default=None)
    x = sub.add_parser("cancel", help="cancel one order")
    x.add_argument("--instrument", required=True, help="symbol (any case) or id")
    x.add_argument("--order-id", type=int, required=True)
    p = sub.add_parser("positions", parents=[fmt],
                       help="positions and cash (a risk viewer: every account of its firm)")
    p.add_argument("--account", type=int, default=None)
    q = sub.add_parser("orders", parents=[fmt],
                       help="live orders (a risk viewer: every account of its firm)")
    q.add_argument("--account", type=int, default=None)
    m = sub.add_parser("md", help="print an instrument's book and trades as they change")
    m.add_argument("--instrument", required=True, help="symbol (any case) or id")
    m.add_argument("--depth", type=int, default=5)
    m.add_argument("--idle", type=float, default=None,
                   help="stop after this many seconds without market data")
    m.add_argument("--count", type=int, default=None, help="stop after this many updates")
    return ap


def _run(args):
    try:
        secret = bytes.fromhex(args.secret)
    except ValueError:
        raise HgUsageError("the secret must be hex (--secret or HG_SECRET)") from None
    if args.key_id == 0 or not secret:
        raise HgUsageError("no API key: give --key-id and --secret (or set HG_KEY_ID and HG_SECRET)")
    try:
        tls = tls_context(args.ca) if args.tls or args.ca else None
    except (OSError, ssl.SSLError) as e:
        raise HgError("cannot read the CA file %s: %s" % (args.ca, e)) from None
    try:
        nodes = [parse_address(a) for a in args.nodes.split(",") if a]
    except ValueError as e:
        raise HgError(str(e)) from None
    c = Client(args.host, args.port, args.key_id, secret, tls=tls, nodes=nodes)
    if args.tls_name:
        c.tls_name = args.tls_name
    c.connect()
    status = 0
    if args.cmd == "instruments":
        rows = [dict(id=i.id, symbol=i.symbol, grade=i.grade, month=i.month,
                     tick_usd=i.tick_usd, unit=i.unit, min_usd=i.min_usd, max_usd=i.max_usd,
                     max_qty=i.max_qty, state=i.state, ref_usd=i.ref_usd)
                for i in c.list_instruments()]
        _table(rows, args.format, ["id", "symbol", "grade", "month", "tick_usd", "unit",
                                   "min_usd", "max_usd", "max_qty", "state", "ref_usd"])
    elif args.cmd == "order":
        reports = c.order(args.instrument, args.side, args.qty, args.price, tif=args.tif,
                          order_type=args.type, client_order_id=args.clordid)
        for r in reports:
            print(_report_line(r))
        status = EXIT_FAIL if reports[0]["exec_type"] == "rejected" else 0
    elif args.cmd == "cancel":
        reports = c.cancel_order(args.instrument, args.order_id)
        for r in reports:
            print(_report_line(r))
        status = EXIT_FAIL if reports[0]["exec_type"] == "rejected" else 0
    elif args.cmd == "positions":
        pos, accts = c.position_list(args.account)
        _table(pos, args.format, ["account", "symbol", "net", "bought", "sold", "avg_price",
                                  "settle_usd", "pnl_usd"])
        if args.format == "text":
            for a in accts:
                print("account %d cash %s USD, initial margin %s USD, excess equity %s USD" % (
                    a["account"], a["cash_usd"], a["initial_margin_usd"], a["excess_equity_usd"]))
    elif args.cmd == "orders":
        _table(c.open_order_list(args.account), args.format,
               ["account", "order_id", "client_order_id", "symbol", "side", "price_usd", "qty",
                "leaves", "quote_group"])
    else:
        inst = c.instrument(args.instrument)
        md = MarketData(c)
        _show("snapshot", inst.symbol, inst, md.subscribe(inst.id, args.depth))
        n = 0
        try:
            for u in md.updates(idle=args.idle):
                if u.kind == "trade":
                    print("trade %s %d @ %s" % (inst.symbol, u.msg.qty, inst.usd(u.msg.price)))
                _show(u.kind, inst.symbol, inst, u.book)
                n += 1
                if args.count is not None and n >= args.count:
                    break
        except KeyboardInterrupt:
            pass
    c.logout()
    return status


def main(argv=None):
    args = _parser().parse_args(argv)
    try:
        return _run(args)
    except HgError as e:
        print("hgclient %s: %s" % (args.cmd, e), file=sys.stderr)
        return EXIT_USAGE if isinstance(e, HgUsageError) else EXIT_FAIL
    except LoginRefused as e:
        print("hgclient %s: %s" % (args.cmd, e), file=sys.stderr)
        return EXIT_FAIL
    except (ConnectionError, ProtocolError, TimeoutError, ssl.SSLError, OSError) as e:
        hint = ""
        if not (args.tls or args.ca) and isinstance(e, ConnectionError):
            hint = " (if the port speaks TLS: --tls --ca FILE, or HG_TLS=1 HG_CA=FILE)"
        print("hgclient %s: cannot talk to %s:%d: %s%s" % (
            args.cmd, args.host, args.port, e.strerror or e if isinstance(e, OSError) else e,
            hint), file=sys.stderr)
        return EXIT_FAIL


if __name__ == "__main__":
    sys.exit(main())
