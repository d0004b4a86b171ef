#!/usr/bin/env python3
"""grpc-count.py: a fixed, repeatable gRPC load for counting a server's work per message.

Benchmarks/grpc/grpc-bench.py measures time; on a shared 2-core machine its CPU figures
move with the neighbours' load. This driver instead makes a fixed amount of work, the same
bytes in the same batches every run, so that instruction counts (`valgrind --tool=callgrind`
on the server) and system call counts (`strace -c -f`) per message can be compared between
two builds of a server:

    grpc-count.py --port P stream --messages 10000 --batch 16
        one `/switchyard.bench.Echo/Stream` call: `--batch` 64-byte messages sent with one
        send (each its own DATA frame), then every echo of them read, `--messages` in all;
        then the half-close and the trailers.
    grpc-count.py --port P unary --calls 2000
        `--calls` `/switchyard.bench.Echo/Unary` calls one after the other on one
        connection: HEADERS and DATA (END_STREAM) in one send, then the whole answer read.

The client grants the server the largest windows HTTP/2 allows at the start, so it sends
no WINDOW_UPDATE of its own while measuring; what the server writes is only its answer
(and its own WINDOW_UPDATEs for what it read). Prints what it did and the answers' DATA
bytes; exits 1 if an echo or a status is wrong. Needs the `h2` package (pip install h2).

`grpc-count.py measure --server "CMD"` runs CMD under callgrind and then under strace for a
small and a large load of each kind and prints per-message differences (the difference
cancels the server's start and the connection's set-up).
"""

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import h2.config
import h2.connection
import h2.events
import h2.settings

STREAM = "/switchyard.bench.Echo/Stream"
UNARY = "/switchyard.bench.Echo/Unary"
MAX_WINDOW = 2**31 - 1


def message(size: int) -> bytes:
    """One gRPC message: flag 0, the 32-bit length, `size` bytes."""
    return b"\x00" + size.to_bytes(4, "big") + b"m" * size


class Client:
    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        config = h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
        self.conn = h2.connection.H2Connection(config=config)
        self.conn.local_settings = h2.settings.Settings(client=True, initial_values={
            h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: MAX_WINDOW,
            h2.settings.SettingCodes.MAX_FRAME_SIZE: 1 << 14,
        })
        self.conn.initiate_connection()
        self.conn.increment_flow_control_window(MAX_WINDOW - 65535)
        self.send()
        self.data = {}
        self.ended = {}
        self.status = {}
        self.acked = False
        self.settings = False
        # The server's SETTINGS and the ack of ours.
        while not (self.acked and self.settings):
            self.read()

    def send(self):
        out = self.conn.data_to_send()
        if out:
            self.sock.sendall(out)

    def read(self):
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise SystemExit("grpc-count: the server closed the connection")
        for event in self.conn.receive_data(chunk):
            if isinstance(event, h2.events.DataReceived):
                self.data[event.stream_id] = self.data.get(event.stream_id, 0) + len(event.data)
            elif isinstance(event, h2.events.TrailersReceived) or (
                    isinstance(event, h2.events.ResponseReceived) and event.stream_ended):
                self.status[event.stream_id] = dict(event.headers).get("grpc-status")
            elif isinstance(event, h2.events.SettingsAcknowledged):
                self.acked = True
            elif isinstance(event, h2.events.RemoteSettingsChanged):
                self.settings = True
            elif isinstance(event, h2.events.StreamEnded):
                self.ended[event.stream_id] = True
            elif isinstance(event, h2.events.StreamReset):
                raise SystemExit(f"grpc-count: stream {event.stream_id} reset ({event.error_code})")
            elif isinstance(event, h2.events.ConnectionTerminated):
                raise SystemExit(f"grpc-count: GOAWAY ({event.error_code})")
        self.send()

    def open(self, path: str, end: bool = False) -> int:
        stream = self.conn.get_next_available_stream_id()
        self.conn.send_headers(stream, [
            (":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "127.0.0.1"),
            ("content-type", "application/grpc"), ("te", "trailers"),
        ], end_stream=end)
        return stream

    def finish(self, stream: int):
        while not self.ended.get(stream):
            self.read()
        if self.status.get(stream) != "0":
            raise SystemExit(f"grpc-count: stream {stream} ended with grpc-status {self.status.get(stream)}")


def run_stream(port: int, messages: int, batch: int, size: int):
    client = Client(port)
    stream = client.open(STREAM)
    client.send()
    one = message(size)
    sent = 0
    while sent < messages:
        count = min(batch, messages - sent)
        for _ in range(count):
            client.conn.send_data(stream, one)
        client.send()
        sent += count
        while client.data.get(stream, 0) < sent * len(one):
            client.read()
    client.conn.end_stream(stream)
    client.send()
    client.finish(stream)
    print(f"stream: {messages} messages of {size} B in batches of {batch}, {client.data[stream]} B echoed")


def run_unary(port: int, calls: int, size: int):
    client = Client(port)
    one = message(size)
    for _ in range(calls):
        stream = client.open(UNARY)
        client.conn.send_data(stream, one, end_stream=True)
        client.send()
        client.finish(stream)
        if client.data.get(stream) != len(one):
            raise SystemExit(f"grpc-count: unary echo of {client.data.get(stream)} B, not {len(one)}")
    print(f"unary: {calls} calls of {size} B")


def start_server(command: list[str], wrapper: list[str]) -> tuple[subprocess.Popen, int]:
    process = subprocess.Popen(wrapper + command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                               start_new_session=True)
    line = process.stdout.readline()
    if not line.startswith("listening on "):
        process.kill()
        raise SystemExit(f"grpc-count: the server said {line!r}")
    return process, int(line.split()[2])


def stop_server(process: subprocess.Popen):
    # The whole group: the server and the tool running it (strace goes once it has gone).
    os.killpg(process.pid, signal.SIGINT)
    try:
        process.wait(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def callgrind_total(path: str) -> int:
    with open(path) as file:
        for line in file:
            if line.startswith("summary:") or line.startswith("totals:"):
                return int(line.split()[1])
    raise SystemExit(f"grpc-count: no total in {path}")


# Valgrind 3.19 (Debian 12's) faults in its own sigsuspend wrapper on the thread where
# libdispatch parks the main thread of a Swift program with an async main; this parks it
# with pause() instead (the process still ends on SIGINT). Measurement only.
SIGSUSPEND_SHIM = """
#include <signal.h>
#include <unistd.h>
int sigsuspend(const sigset_t *mask) { (void)mask; for (;;) pause(); }
"""


def measure(args):
    """Runs the server under callgrind, then under strace, for a small and a large load of
    each kind, and prints per-message differences: instructions and write system calls.

    Valgrind 3.19 cannot read the DWARF 5 of a Swift build either: the server's binary
    (the command's first word) is measured as a copy without debug information."""
    work = tempfile.mkdtemp(prefix="grpc-count-")
    command = args.server.split()
    binary = os.path.join(work, "server")
    subprocess.run(["strip", "--strip-debug", "-o", binary, command[0]], check=True)
    command[0] = binary
    shim_c = os.path.join(work, "shim.c")
    shim = os.path.join(work, "shim.so")
    with open(shim_c, "w") as file:
        file.write(SIGSUSPEND_SHIM)
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", shim, shim_c], check=True)
    loads = {
        "stream": lambda port, n: run_stream(port, n, args.batch, args.size),
        "unary": lambda port, n: run_unary(port, n, args.size),
    }
    sizes = {"stream": (args.stream_small, args.stream_large), "unary": (args.unary_small, args.unary_large)}
    for kind in args.kinds.split(","):
        small, large = sizes[kind]
        ir = {}
        writes = {}
        for count in (small, large):
            out = os.path.join(work, f"callgrind.{kind}.{count}")
            process, port = start_server(command, ["env", f"LD_PRELOAD={shim}", "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"])
            loads[kind](port, count)
            stop_server(process)
            ir[count] = callgrind_total(out)
            trace = os.path.join(work, f"strace.{kind}.{count}")
            process, port = start_server(command, ["strace", "-f", "-c", "-o", trace])
            loads[kind](port, count)
            stop_server(process)
            calls = 0
            with open(trace) as file:
                for line in file:
                    fields = line.split()
                    if fields and fields[-1] in ("write", "writev", "sendmsg", "sendto", "send"):
                        calls += int(fields[3])
            writes[count] = calls
        per_ir = (ir[large] - ir[small]) / (large - small)
        per_write = (writes[large] - writes[small]) / (large - small)
        unit = "message" if kind == "stream" else "call"
        batch = f", batches of {args.batch}" if kind == "stream" else ""
        print(f"{kind} ({small} and {large}{batch}): {per_ir:,.0f} instructions per {unit}, "
              f"{per_write:.3f} write system calls per {unit} "
              f"(totals {ir[small]:,} / {ir[large]:,} Ir, {writes[small]} / {writes[large]} writes)")
    shutil.rmtree(work)


def server_cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as file:
        fields = file.read().rsplit(")", 1)[1].split()
    # utime and stime, fields 14 and 15 of the line (12 and 13 after the command).
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu(args):
    """Server CPU time (user + system, from /proc) per message or call under the same
    fixed loads, servers taken in turn within each round: the medians, and each server's
    ratio to the first. Noisy on a shared machine: see `measure` for counts."""
    servers = args.servers.split(";")
    loads = {
        "stream": (args.messages, lambda port: run_stream(port, args.messages, args.batch, args.size)),
        "unary": (args.calls, lambda port: run_unary(port, args.calls, args.size)),
    }
    for kind in args.kinds.split(","):
        count, load = loads[kind]
        samples = {server: [] for server in servers}
        for _ in range(args.rounds):
            for server in servers:
                process, port = start_server(server.split(), [])
                load(port)
                samples[server].append(server_cpu_seconds(process.pid) / count * 1e6)
                stop_server(process)
        first = sorted(samples[servers[0]])[args.rounds // 2]
        for server in servers:
            values = sorted(samples[server])
            median = values[args.rounds // 2]
            print(f"{kind}: {server}: {median:.2f} us CPU per {'message' if kind == 'stream' else 'call'} "
                  f"(rounds {', '.join(f'{v:.2f}' for v in samples[server])}), {median / first:.2f}x of the first")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int)
    parser.add_argument("--size", type=int, default=64, help="message payload bytes (64)")
    sub = parser.add_subparsers(dest="load", required=True)
    stream = sub.add_parser("stream")
    stream.add_argument("--messages", type=int, default=10000)
    stream.add_argument("--batch", type=int, default=16)
    unary = sub.add_parser("unary")
    unary.add_argument("--calls", type=int, default=2000)
    both = sub.add_parser("measure", help="callgrind and strace a server: per-message differences of two loads")
    both.add_argument("--server", required=True, help="the server's command line, printing `listening on PORT`")
    both.add_argument("--kinds", default="stream,unary")
    both.add_argument("--batch", type=int, default=16)
    both.add_argument("--stream-small", type=int, default=2000)
    both.add_argument("--stream-large", type=int, default=10000)
    both.add_argument("--unary-small", type=int, default=500)
    both.add_argument("--unary-large", type=int, default=2500)
    times = sub.add_parser("cpu", help="server CPU per message under the same loads, servers in turn")
    times.add_argument("--servers", required=True, help="server command lines separated by ';'")
    times.add_argument("--kinds", default="stream,unary")
    times.add_argument("--rounds", type=int, default=3)
    times.add_argument("--batch", type=int, default=16)
    times.add_argument("--messages", type=int, default=50000)
    times.add_argument("--calls", type=int, default=5000)
    args = parser.parse_args()
    if args.load == "stream":
        run_stream(args.port, args.messages, args.batch, args.size)
    elif args.load == "unary":
        run_unary(args.port, args.calls, args.size)
    elif args.load == "cpu":
        cpu(args)
    else:
        measure(args)


if __name__ == "__main__":
    main()
