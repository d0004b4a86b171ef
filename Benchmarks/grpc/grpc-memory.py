#!/usr/bin/env python3
"""Benchmarks/grpc/grpc-memory.py: what an idle HTTP/2 connection and an open call cost a gRPC
echo server in resident memory.

    python3 Benchmarks/grpc/grpc-memory.py                    # every server grpc-bench.py knows
    SERVERS="switchyard cpp" CONNS=1000 STREAM_CONNS=10 python3 Benchmarks/grpc/grpc-memory.py

Builds nothing: run Benchmarks/grpc/run first (or NO_BUILD=1 after a build). The servers and
their commands are grpc-bench.py's (SERVERS, SWITCHYARD_GRPC_ECHO, ...). Per server, ROUNDS
(3) times, each phase on a fresh server process (pinned like grpc-bench.py's, CPU=0):

- warm-up: one connection makes one unary call and a 10-message stream, then closes, so
  what every server sets up once (buffers, tables, lazily made code) is not counted;
- idle connections: VmRSS, then CONNS (1000) client connections, each one HTTP/2
  handshake (the preface, SETTINGS both ways and their ACKs) and nothing more, held open;
  once every one has the server's SETTINGS and RSS stopped changing (1 s apart): VmRSS
  again. (after - before) / CONNS is the cost of one idle connection;
- open streams: STREAM_CONNS (10) connections handshaken and idle, VmRSS; then on each,
  as many streams as the server allows at once (its SETTINGS_MAX_CONCURRENT_STREAMS,
  at most STREAMS_PER_CONN, 100): HEADERS for /switchyard.bench.Echo/Stream and one 64 B
  message, without ending the stream; once every stream's message came back (a call
  that is open, answered once, and waiting for more): VmRSS again. (after - before) /
  streams is the cost of one open call.

The client is this script: raw sockets, hand-made frames (HPACK literals without
indexing), no library. Medians over rounds; the samples go to
results/grpc-memory-samples.json and the table to standard output.
"""

import importlib.util
import json
import os
import resource
import select
import socket
import statistics
import struct
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("grpc_bench", HERE / "grpc-bench.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

CONNS = int(os.environ.get("CONNS", "1000"))
STREAM_CONNS = int(os.environ.get("STREAM_CONNS", "10"))
STREAMS_PER_CONN = int(os.environ.get("STREAMS_PER_CONN", "100"))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE = 0, 1, 3, 4, 6, 7, 8


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def literal(name, value):
    """An HPACK literal header field without indexing, new name, no Huffman (both < 127 B)."""
    n, v = name.encode(), value.encode()
    return b"\x00" + bytes([len(n)]) + n + bytes([len(v)]) + v


def request_headers(port, path):
    return b"".join(literal(k, v) for k, v in [
        (":method", "POST"), (":scheme", "http"), (":path", path), (":authority", f"127.0.0.1:{port}"),
        ("content-type", "application/grpc"), ("te", "trailers")])


class H2Client:
    """One client connection: handshake, streams, and a reader that answers SETTINGS and PING."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.port = port
        self.buffer = b""
        self.got_settings = False
        self.max_streams = None
        self.data_bytes = {}
        self.ended = {}
        self.goaway = False
        # A large connection window, so echoes never wait for WINDOW_UPDATE.
        self.sock.sendall(PREFACE + frame(SETTINGS, 0, 0) + frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1 << 24)))

    def fileno(self):
        return self.sock.fileno()

    def pump(self, block=False):
        """Reads what is there and handles every whole frame."""
        self.sock.setblocking(block)
        try:
            chunk = self.sock.recv(1 << 16)
        except BlockingIOError:
            return
        finally:
            self.sock.setblocking(True)
        if not chunk:
            raise RuntimeError("the server closed a connection")
        self.buffer += chunk
        while len(self.buffer) >= 9:
            length = int.from_bytes(self.buffer[:3], "big")
            if len(self.buffer) < 9 + length:
                break
            kind, flags = self.buffer[3], self.buffer[4]
            stream = int.from_bytes(self.buffer[5:9], "big") & 0x7FFFFFFF
            payload = self.buffer[9:9 + length]
            self.buffer = self.buffer[9 + length:]
            if kind == SETTINGS and not flags & 1:
                for i in range(0, len(payload), 6):
                    ident, value = struct.unpack(">HI", payload[i:i + 6])
                    if ident == 3:
                        self.max_streams = value
                self.got_settings = True
                self.sock.sendall(frame(SETTINGS, 1, 0))
            elif kind == PING and not flags & 1:
                self.sock.sendall(frame(PING, 1, 0, payload))
            elif kind == DATA:
                self.data_bytes[stream] = self.data_bytes.get(stream, 0) + length
            elif kind == RST_STREAM:
                raise RuntimeError(f"the server reset stream {stream} (code {int.from_bytes(payload, 'big')})")
            elif kind == GOAWAY:
                self.goaway = True
            if kind in (HEADERS, DATA) and flags & 1:
                self.ended[stream] = True

    def open_streams(self, count, message):
        body = bench.grpc_frame(message)
        out = b""
        for i in range(count):
            stream = 1 + 2 * i
            out += frame(HEADERS, 0x4, stream, request_headers(self.port, bench.STREAM_PATH)) + frame(DATA, 0, stream, body)
        self.sock.sendall(out)
        return [1 + 2 * i for i in range(count)]

    def close(self):
        self.sock.close()


def pump_until(clients, done, what, timeout=30):
    deadline = time.time() + timeout
    while not done():
        if time.time() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        poller = select.poll()
        by_fd = {c.fileno(): c for c in clients}
        for fd in by_fd:
            poller.register(fd, select.POLLIN)
        for fd, _ in poller.poll(200):
            by_fd[fd].pump()


def rss_kib(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def settled_rss(pid):
    """VmRSS once two readings 1 s apart agree within 16 KiB (at most 10 s)."""
    last = rss_kib(pid)
    for _ in range(10):
        time.sleep(1)
        now = rss_kib(pid)
        if abs(now - last) <= 16:
            return now
        last = now
    return last


def warm_up(server):
    c = H2Client(server.port)
    pump_until([c], lambda: c.got_settings, "SETTINGS")
    body = bench.grpc_frame(bench.payload(bench.MESSAGE_SIZE))
    c.sock.sendall(frame(HEADERS, 0x4, 1, request_headers(server.port, bench.UNARY_PATH)) + frame(DATA, 1, 1, body))
    c.sock.sendall(frame(HEADERS, 0x4, 3, request_headers(server.port, bench.STREAM_PATH))
                   + b"".join(frame(DATA, 0, 3, body) for _ in range(10)) + frame(DATA, 1, 3))
    pump_until([c], lambda: c.ended.get(1) and c.ended.get(3), "the warm-up calls")
    if c.data_bytes.get(1) != len(body) or c.data_bytes.get(3) != 10 * len(body):
        raise RuntimeError(f"warm-up echoed {c.data_bytes}, expected {len(body)} and {10 * len(body)} bytes")
    c.close()
    time.sleep(0.3)


def idle_connections(name, argv, work):
    server = bench.Server(name, argv, work / f"{name}-mem-idle.log")
    try:
        warm_up(server)
        before = settled_rss(server.proc.pid)
        clients = []
        for i in range(CONNS):
            clients.append(H2Client(server.port))
            if i % 100 == 99:
                pump_until(clients, lambda: all(c.got_settings for c in clients), "SETTINGS")
        pump_until(clients, lambda: all(c.got_settings for c in clients), "SETTINGS")
        after = settled_rss(server.proc.pid)
        if server.proc.poll() is not None:
            raise RuntimeError("the server exited")
        for c in clients:
            c.close()
        return (after - before) * 1024 / CONNS, before, after
    finally:
        server.stop()


def open_streams(name, argv, work):
    server = bench.Server(name, argv, work / f"{name}-mem-streams.log")
    try:
        warm_up(server)
        clients = [H2Client(server.port) for _ in range(STREAM_CONNS)]
        pump_until(clients, lambda: all(c.got_settings for c in clients), "SETTINGS")
        before = settled_rss(server.proc.pid)
        per_conn = min(STREAMS_PER_CONN, min(c.max_streams or STREAMS_PER_CONN for c in clients))
        message = bench.payload(bench.MESSAGE_SIZE)
        want = len(bench.grpc_frame(message))
        opened = [(c, c.open_streams(per_conn, message)) for c in clients]
        pump_until(clients, lambda: all(c.data_bytes.get(s, 0) >= want for c, ss in opened for s in ss),
                   "every stream's echo")
        after = settled_rss(server.proc.pid)
        if any(c.ended for c in clients) or any(c.goaway for c in clients):
            raise RuntimeError("a stream ended or the server said GOAWAY while the streams should be open")
        for c in clients:
            c.close()
        streams = per_conn * STREAM_CONNS
        return (after - before) * 1024 / streams, before, after, per_conn
    finally:
        server.stop()


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, CONNS * 2 + 256)), hard))
    table, _ = bench.servers()
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"switchyard-grpc-memory-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    samples = {n: [] for n in table}
    load = [os.getloadavg()[0]]
    for rnd in range(1, ROUNDS + 1):
        for name, argv in table.items():
            idle, i0, i1 = idle_connections(name, argv, work)
            stream, s0, s1, per_conn = open_streams(name, argv, work)
            samples[name].append({"idle_conn_bytes": idle, "idle_rss_kib": [i0, i1], "stream_bytes": stream,
                                  "stream_rss_kib": [s0, s1], "streams_per_conn": per_conn,
                                  "load1": os.getloadavg()[0]})
            bench.log(f"memory round {rnd}/{ROUNDS} {name}: {idle:.0f} B/idle connection ({i0} -> {i1} KiB), "
                      f"{stream:.0f} B/open stream ({per_conn} x {STREAM_CONNS}; {s0} -> {s1} KiB)")
            load.append(os.getloadavg()[0])
    print(f"Resident memory per idle HTTP/2 connection ({CONNS} connections) and per open call "
          f"({STREAM_CONNS} connections x the server's limit, at most {STREAMS_PER_CONN} streams each); "
          f"medians over {ROUNDS} rounds; 1-minute load average {min(load):.1f} to {max(load):.1f}.\n")
    print("| server | B per idle connection | B per open stream | streams per connection |")
    print("|---|---:|---:|---:|")
    for name, ss in samples.items():
        print(f"| {name} | {statistics.median(s['idle_conn_bytes'] for s in ss):.0f} "
              f"| {statistics.median(s['stream_bytes'] for s in ss):.0f} | {ss[0]['streams_per_conn']} |")
    bench.RESULTS.mkdir(exist_ok=True)
    (bench.RESULTS / "grpc-memory-samples.json").write_text(json.dumps(
        {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "conns": CONNS, "stream_conns": STREAM_CONNS,
         "load1": load, "samples": samples}, indent=1) + "\n")
    for f in work.iterdir():
        f.unlink()
    work.rmdir()


if __name__ == "__main__":
    sys.exit(main())
