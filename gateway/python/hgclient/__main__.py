"""python3 -m hgclient: the client from the command line.

    python3 -m hgclient --port 7700 --key-id 10 --secret HEX instruments
    python3 -m hgclient ... order --instrument 1 --side buy --price 3400 --qty 3
    python3 -m hgclient ... md --instrument 1 [--depth 5] [--idle 10]
    python3 -m hgclient --tls --ca var/tls/ca.pem ... instruments

The address and key also come from HG_HOST, HG_PORT, HG_KEY_ID, HG_SECRET
(hex), and TLS from HG_TLS=1 and HG_CA, as for hgctl. Prices are in ticks.
"""

import argparse
import os
import sys
import time

from . import Client, MarketData, parse_address, pb, tls_context


def _show(kind, book):
    bid, ask = book.best_bid(), book.best_ask()
    print("%s md_seq=%d bid %s ask %s" % (
        kind, book.md_seq, "%d x %d" % (bid[1], bid[0]) if bid else "-",
        "%d x %d" % (ask[1], ask[0]) if ask else "-"), flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m hgclient", description="Hourglass client")
    ap.add_argument("--host", default=os.environ.get("HG_HOST", "127.0.0.1"))
    ap.add_argument("--port", type=int, default=int(os.environ.get("HG_PORT", "7700")))
    ap.add_argument("--key-id", type=int, default=int(os.environ.get("HG_KEY_ID", "0")))
    ap.add_argument("--secret", default=os.environ.get("HG_SECRET", ""), help="hex")
    ap.add_argument("--tls", action="store_true",
                    default=os.environ.get("HG_TLS", "") not in ("", "0", "no"))
    ap.add_argument("--ca", default=os.environ.get("HG_CA"), help="PEM CAs to trust (implies --tls)")
    ap.add_argument("--tls-name", default=os.environ.get("HG_TLS_NAME"),
                    help="name the certificate must carry (default: --host)")
    ap.add_argument("--nodes", default=os.environ.get("HG_NODES", ""),
                    help="a cluster's other nodes, host:port,host:port,... (the leader is followed)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("instruments", help="list the instruments")
    o = sub.add_parser("order", help="place one limit order and print the answer")
    o.add_argument("--instrument", type=int, required=True)
    o.add_argument("--side", choices=["buy", "sell"], required=True)
    o.add_argument("--price", type=int, required=True, help="ticks")
    o.add_argument("--qty", type=int, required=True)
    o.add_argument("--clordid", type=int, default=int(time.time()))
    m = sub.add_parser("md", help="print an instrument's book and trades as they change")
    m.add_argument("--instrument", type=int, required=True)
    m.add_argument("--depth", type=int, default=5)
    m.add_argument("--idle", type=float, default=None,
                   help="stop after this many seconds without market data")
    args = ap.parse_args(argv)
    tls = tls_context(args.ca) if args.tls or args.ca else None
    nodes = [parse_address(a) for a in args.nodes.split(",") if a]
    c = Client(args.host, args.port, args.key_id, bytes.fromhex(args.secret), tls=tls,
               nodes=nodes)
    if args.tls_name:
        c.tls_name = args.tls_name
    c.connect()
    if args.cmd == "instruments":
        c.instruments()
        for i in c.expect("instrument_list").instrument_list.instruments:
            print("%u %s tick=%d unit=%d state=%u ref=%d band=%d..%d" % (
                i.instrument_id, i.symbol, i.tick_size, i.contract_unit, i.state,
                i.ref_price, i.band_low, i.band_high))
    elif args.cmd == "order":
        side = pb.SIDE_BUY if args.side == "buy" else pb.SIDE_SELL
        c.new_order(args.instrument, args.clordid, side, args.qty, args.price)
        print(c.expect("execution_report").execution_report)
    else:
        md = MarketData(c)
        _show("snapshot", md.subscribe(args.instrument, args.depth))
        try:
            for u in md.updates(idle=args.idle):
                if u.kind == "trade":
                    print("trade %d @ %d" % (u.msg.qty, u.msg.price))
                _show(u.kind, u.book)
        except KeyboardInterrupt:
            pass
    c.logout()
    return 0


if __name__ == "__main__":
    sys.exit(main())
