"""hgclient: a client of the Hourglass gateway in Python.

Speaks the hourglass.v1 wire protocol (proto/README.md) with Google's
protobuf runtime (Debian's python3-protobuf). The package carries
hgclient.hourglass_pb2 (also exported as hgclient.pb), which the build
generates from proto/hourglass.proto with protoc; gateway/python/README.md
says how to install the package and documents every call.

    from hgclient import Client, MarketData, pb
    c = Client.from_env()          # HG_HOST, HG_PORT, HG_KEY_ID, HG_SECRET, HG_TLS, HG_CA
    c.connect()
    reports = c.order("B200.A.2027-03", "buy", qty=3, price="3.300")  # dicts, USD
    seq = c.new_order(1, client_order_id=7, side=pb.SIDE_BUY, qty=3, price=3400)  # the wire
    report = c.expect("execution_report").execution_report

Calls in symbols and USD (hgclient.trading: order, cancel_order,
list_instruments, position_list, dataframe) return dataclasses and dicts;
the others speak the wire's units.

Framing is written here from the protobuf "delimited" convention (a
base-128 varint length, then one Envelope), independently of the C codec,
so the interop test checks two implementations against each other.

It drops repeated stream frames but does not fill gaps by retransmission
(the C library, <hourglass/client.h>, does).

With tls=tls_context(...) the connection runs TLS 1.3 through Python's ssl
module: the server's certificate must chain to the CA file (else the
system's trust store) and carry the host's name or address (Client.tls_name
to check another name). The command line is `python3 -m hgclient --help`.

Against a cluster, a follower's LOGIN_NOT_LEADER is followed to the leader
it names, and Client(nodes=[(host, port), ...]) (--nodes H:P,H:P or
HG_NODES on the command line) lists the other nodes to try when the one
given is down.
"""

import hashlib
import hmac
import os
import select
import socket
import ssl
import struct
import time

from . import hourglass_pb2 as pb
from .trading import HgError, HgUsageError, Instrument, TradingMixin, dataframe  # noqa: F401

DEFAULT_MAX_FRAME = 64 * 1024

# Body names of the oneof that are client requests (need seq): the field
# numbers the schema's BodyRange gives them (BODY_CLIENT_REQUEST_FIRST..LAST),
# read from proto/hourglass.proto, so a request added there gets its seq here
# too, as in the gateway and the C client.
APP_BODIES = frozenset(
    f.name for f in pb.Envelope.DESCRIPTOR.oneofs_by_name["body"].fields
    if pb.BODY_CLIENT_REQUEST_FIRST <= f.number <= pb.BODY_CLIENT_REQUEST_LAST)


class ProtocolError(Exception):
    """The peer broke the framing rules."""


LOGIN_NOT_LEADER = 8  # a cluster follower; LoginReject.leader names the leader


# LoginReject.code's meaning, as hgctl says it.
LOGIN_REASONS = {1: "authentication failed (unknown key or wrong secret)",
                 2: "clock skew above 5 s", 3: "session id reused",
                 4: "the key has as many live sessions as it may have",
                 5: "the gateway's session limit is reached", 6: "invalid login",
                 7: "key store unavailable",
                 8: "not the cluster's leader, and no leader is known: retry"}


class LoginRefused(Exception):
    def __init__(self, code, text, terminated=False, leader=""):
        # One reason: for a wrong key the code's (the text is terse), else
        # the gateway's text when it sent one, else the code's.
        why = (LOGIN_REASONS[1] if code == 1 and not terminated else text
               or (LOGIN_REASONS.get(code, "code %d" % code) if not terminated
                   else "terminated (code %d)" % code))
        super().__init__("login refused: %s" % why)
        self.code = code
        self.text = text
        self.terminated = terminated
        self.leader = leader  # "host:port" with LOGIN_NOT_LEADER, else ""


def parse_address(a):
    """'host:port' or '[v6]:port' -> (host, port)."""
    host, _, port = a.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host or not port.isdigit():
        raise ValueError("not host:port: %r" % a)
    return host, int(port)


def encode_varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def decode_varint(buf, pos=0):
    """Returns (value, bytes used) or None if incomplete; raises on a bad varint."""
    value = 0
    for i in range(10):
        if pos + i >= len(buf):
            return None
        b = buf[pos + i]
        value |= (b & 0x7F) << (7 * i)
        if not b & 0x80:
            if i > 0 and b == 0:
                raise ProtocolError("non-minimal varint")
            if value >= 1 << 64:
                raise ProtocolError("varint above 64 bits")
            return value, i + 1
    raise ProtocolError("varint longer than 10 bytes")


def frame(env):
    body = env.SerializeToString()
    return encode_varint(len(body)) + body


def login_mac(secret, timestamp_ns, session_id, key_id):
    msg = b"HGv1" + struct.pack(">Q", timestamp_ns) + session_id + struct.pack(">Q", key_id)
    return hmac.new(secret, msg, hashlib.sha256).digest()


def tls_context(ca_file=None, cert_file=None, key_file=None):
    """A TLS 1.3 client context that verifies the server's certificate and
    name against ca_file (None: the system's trust store); cert_file and
    key_file give a client certificate for gateways that require one."""
    ctx = ssl.create_default_context(cafile=ca_file)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    if cert_file:
        ctx.load_cert_chain(cert_file, key_file)
    return ctx


def _env_on(name):
    v = os.environ.get(name, "")
    return v not in ("", "0", "no")


class Client(TradingMixin):
    """One session. Blocking socket calls with timeouts; one thread."""

    @classmethod
    def from_env(cls, **kw):
        """A Client from the environment hgctl reads: HG_HOST (127.0.0.1),
        HG_PORT (7700), HG_KEY_ID, HG_SECRET (hex), HG_TLS=1 and HG_CA (a CA
        file, implies TLS), HG_TLS_NAME, HG_NODES (host:port,...); keyword
        arguments go to Client(). HgError when one is malformed."""
        try:
            port = int(os.environ.get("HG_PORT") or 7700)
            key_id = int(os.environ.get("HG_KEY_ID") or 0)
        except ValueError:
            raise HgError("HG_PORT and HG_KEY_ID must be numbers") from None
        try:
            secret = bytes.fromhex(os.environ.get("HG_SECRET", ""))
        except ValueError:
            raise HgError("HG_SECRET must be the key's secret in hex") from None
        if key_id == 0 or not secret:
            raise HgError("no API key: set HG_KEY_ID and HG_SECRET (ops/run prints the lines)")
        ca = os.environ.get("HG_CA") or None
        tls = tls_context(ca) if ca or _env_on("HG_TLS") else None
        nodes = [parse_address(a) for a in os.environ.get("HG_NODES", "").split(",") if a]
        c = cls(os.environ.get("HG_HOST") or "127.0.0.1", port, key_id, secret, tls=tls,
                nodes=nodes, **kw)
        if os.environ.get("HG_TLS_NAME"):
            c.tls_name = os.environ["HG_TLS_NAME"]
        return c

    def __init__(self, host="127.0.0.1", port=7700, key_id=0, secret=b"",
                 cancel_on_disconnect=False, keepalive_ms=1000, max_frame=DEFAULT_MAX_FRAME,
                 tls=None, nodes=()):
        """tls: None for plain TCP, or an ssl.SSLContext (see tls_context).
        nodes: a cluster's other nodes as (host, port) pairs; connect() tries
        them in turn when the current one is down or knows no leader, and
        follows a follower's LOGIN_NOT_LEADER to the leader it names."""
        self.host, self.port = host, port
        self.nodes = list(nodes)
        self.tls = tls
        self.tls_name = host
        self.key_id, self.secret = key_id, secret
        self.cancel_on_disconnect = cancel_on_disconnect
        self.keepalive_ms = keepalive_ms
        self.max_frame = max_frame
        self.sock = None
        self.rx = bytearray()
        self.tx_seq = 1
        self.rx_next = None
        self.ack = None
        # LoginAck.epoch of the last login (0: not sent); restarted is True when
        # it differs from the one before: the exchange restarted in between,
        # its session-scoped orders are cancelled (the cancels are in the
        # stream) and kept orders are best re-read with OrderStatus.
        self.epoch = 0
        self.ref_seq_base = 0
        self.restarted = False
        self.last_tx = 0.0

    # -------------------------------------------------------------- session
    def connect(self, timeout=5.0):
        """Logs in at host:port, or at the cluster's leader (see nodes)."""
        last = None
        for host, port in [(self.host, self.port)] + self.nodes:
            self.host, self.port = host, port
            try:
                for _ in range(3):
                    try:
                        return self._connect_once(timeout)
                    except LoginRefused as r:
                        self.close()
                        if r.terminated or r.code != LOGIN_NOT_LEADER:
                            raise
                        last = r
                        if not r.leader:
                            break
                        self.host, self.port = parse_address(r.leader)
            except OSError as e:
                self.close()
                last = e
        raise last

    def _connect_once(self, timeout):
        self.sock = socket.create_connection((self.host, self.port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.tls is not None:
            self.sock = self.tls.wrap_socket(self.sock, server_hostname=self.tls_name)
        self.rx = bytearray()
        self.tx_seq = 1
        sid = os.urandom(16)
        ts = time.time_ns()
        env = pb.Envelope()
        env.login.key_id = self.key_id
        env.login.session_id = sid
        env.login.timestamp_ns = ts
        env.login.hmac = login_mac(self.secret, ts, sid, self.key_id)
        env.login.cancel_on_disconnect = self.cancel_on_disconnect
        env.login.keepalive_ms = self.keepalive_ms
        self._write(env)
        deadline = time.monotonic() + timeout
        while True:
            e = self._read_frame(deadline - time.monotonic())
            if e is None:
                raise TimeoutError("no login reply")
            kind = e.WhichOneof("body")
            if kind == "login_ack":
                self.ack = e.login_ack
                self.rx_next = e.login_ack.next_seq
                self.ref_seq_base = e.login_ack.ref_seq_base
                epoch = e.login_ack.epoch if e.login_ack.HasField("epoch") else 0
                self.restarted = self.epoch != 0 and epoch != self.epoch
                self.epoch = epoch
                return e.login_ack
            if kind == "login_reject":
                raise LoginRefused(e.login_reject.code, e.login_reject.text,
                                   leader=e.login_reject.leader)
            if kind == "terminate":
                raise LoginRefused(e.terminate.code, e.terminate.text, terminated=True)

    def close(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def logout(self, timeout=2.0):
        env = pb.Envelope()
        env.logout.SetInParent()
        self._write(env)
        deadline = time.monotonic() + timeout
        try:
            while True:
                e = self._read_frame(deadline - time.monotonic())
                if e is None or e.WhichOneof("body") == "terminate":
                    return e
        except ConnectionError:
            return None
        finally:
            self.close()

    # ----------------------------------------------------------------- send
    def send(self, env):
        """Sends env; application messages get the next request seq. Returns
        the ref_seq the replies carry: the seq plus the session's
        LoginAck.ref_seq_base (0 unless another session of the key was
        live at login)."""
        kind = env.WhichOneof("body")
        seq = None
        if kind in APP_BODIES:
            seq = self.tx_seq
            env.seq = seq
            self.tx_seq += 1
        self._write(env)
        return None if seq is None else seq + self.ref_seq_base

    def new_order(self, instrument_id, client_order_id, side, qty, price=None,
                  ord_type=pb.ORD_TYPE_LIMIT, tif=pb.TIF_GTC, post_only=False):
        env = pb.Envelope()
        o = env.new_order
        o.instrument_id = instrument_id
        o.client_order_id = client_order_id
        o.side = side
        o.type = ord_type
        o.tif = tif
        o.qty = qty
        if price is not None:
            o.price = price
        if post_only:
            o.post_only = True
        return self.send(env)

    def cancel(self, instrument_id, order_id):
        env = pb.Envelope()
        env.cancel.instrument_id = instrument_id
        env.cancel.order_id = order_id
        return self.send(env)

    def replace(self, instrument_id, order_id, new_price, new_qty):
        env = pb.Envelope()
        env.replace.instrument_id = instrument_id
        env.replace.order_id = order_id
        env.replace.new_price = new_price
        env.replace.new_qty = new_qty
        return self.send(env)

    def mass_cancel(self, instrument_id=0, sides=pb.SIDES_BOTH):
        env = pb.Envelope()
        env.mass_cancel.instrument_id = instrument_id
        env.mass_cancel.sides = sides
        return self.send(env)

    def instruments(self):
        env = pb.Envelope()
        env.instruments_request.SetInParent()
        return self.send(env)

    def positions(self):
        env = pb.Envelope()
        env.positions_request.SetInParent()
        return self.send(env)

    def open_orders(self, account=0, instrument_id=0, from_account=0, from_order_id=0,
                    limit=0):
        """OpenOrdersRequest: one page of live orders, answered by
        `open_orders` (proto/README.md, "Open orders"); returns the seq."""
        env = pb.Envelope()
        r = env.open_orders_request
        r.SetInParent()
        for name, v in (("account", account), ("instrument_id", instrument_id),
                        ("from_account", from_account), ("from_order_id", from_order_id),
                        ("limit", limit)):
            if v:
                setattr(r, name, v)
        return self.send(env)

    def md_subscribe(self, instrument_id, depth=10):
        """Asks for an instrument's market data: a MarketDataSnapshot, then
        increments (MarketData does the bookkeeping). Refused by a Response."""
        env = pb.Envelope()
        env.md_subscribe.instrument_id = instrument_id
        env.md_subscribe.depth = depth
        return self.send(env)

    def md_unsubscribe(self, instrument_id):
        env = pb.Envelope()
        env.md_unsubscribe.instrument_id = instrument_id
        return self.send(env)

    def heartbeat(self):
        env = pb.Envelope()
        env.heartbeat.SetInParent()
        self._write(env)

    # -------------------------------------------------------------- receive
    def recv(self, timeout=5.0):
        """Next frame (an Envelope) or None on timeout. Sends heartbeats while waiting."""
        deadline = time.monotonic() + timeout
        while True:
            ka = (self.ack.keepalive_ms if self.ack else self.keepalive_ms) / 1000.0
            left = deadline - time.monotonic()
            if time.monotonic() - self.last_tx >= ka:
                self.heartbeat()
            e = self._read_frame(min(left, ka))
            if e is not None:
                if e.HasField("seq") and e.WhichOneof("body") not in (
                        "md_snapshot", "md_level", "md_trade", "md_status"):
                    if self.rx_next is not None and e.seq < self.rx_next:
                        continue  # already seen
                    self.rx_next = e.seq + 1
                return e
            if time.monotonic() >= deadline:
                return None

    def expect(self, kind, timeout=5.0):
        """Next frame whose body is `kind` (others skipped); raises on timeout or terminate."""
        deadline = time.monotonic() + timeout
        while True:
            e = self.recv(deadline - time.monotonic())
            if e is None:
                raise TimeoutError("no %s" % kind)
            body = e.WhichOneof("body")
            if body == kind:
                return e
            if body == "terminate":
                raise ConnectionError("terminated: code %d %s" % (e.terminate.code, e.terminate.text))

    # ------------------------------------------------------------- framing
    def _write(self, env):
        self.sock.sendall(frame(env))
        self.last_tx = time.monotonic()

    def _read_frame(self, timeout):
        """One decoded frame, or None when nothing complete arrived in time."""
        deadline = time.monotonic() + max(timeout, 0)
        while True:
            got = decode_varint(self.rx)
            if got is not None:
                length, used = got
                if length == 0:
                    raise ProtocolError("zero-length frame")
                if length > self.max_frame:
                    raise ProtocolError("frame of %d bytes above the maximum" % length)
                if len(self.rx) >= used + length:
                    body = bytes(self.rx[used:used + length])
                    del self.rx[:used + length]
                    env = pb.Envelope()
                    env.ParseFromString(body)
                    return env
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            r, _, _ = select.select([self.sock], [], [], left)
            if not r:
                return None
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed by the server")
            self.rx += chunk



from .marketdata import Book, MarketData, MarketDataRefused, Update  # noqa: E402

__all__ = ["APP_BODIES", "Book", "Client", "HgError", "HgUsageError", "Instrument", "LoginRefused", "MarketData",
           "MarketDataRefused", "ProtocolError", "Update", "dataframe", "decode_varint",
           "encode_varint", "frame", "login_mac", "pb", "tls_context"]
