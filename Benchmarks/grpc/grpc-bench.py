#!/usr/bin/env python3
"""Benchmarks/grpc/run: gRPC echo servers under load, interleaved, with ratios to gRPC C++.

(This is the body of Benchmarks/grpc/run, which installs what is missing and builds first;
run that.)

    Benchmarks/grpc/run                          # build, 3 rounds, write results/grpc-echo.md
    ROUNDS=5 Benchmarks/grpc/run
    SERVERS="cpp nio" Benchmarks/grpc/run
    SWITCHYARD_GRPC_ECHO="/path/to/server --port 0" Benchmarks/grpc/run   # another build as `switchyard`
    NO_BUILD=1 Benchmarks/grpc/run               # reuse the last build
    CPU= Benchmarks/grpc/run                     # do not pin

Servers (SERVERS, default "cpp nio nio-el switchyard switchyard-libuv"), each serving
/switchyard.bench.Echo/Unary and /switchyard.bench.Echo/Stream over plaintext HTTP/2 on
127.0.0.1, printing `listening on PORT` once bound:
    cpp         cpp-echo-server/: gRPC C++ (Debian's libgrpc++), callback API, generic service
    nio         swift-nio-echo/: grpc-swift 2 on grpc-swift-nio-transport, one event loop
                thread, handlers on Swift's default global executor (out of the box)
    nio-el      the same with `--executor nio`: the one event loop installed as Swift's
                global executor, so handlers run on the loop's thread (no thread hops)
    switchyard  Benchmarks/Servers/switchyard-grpc-echo (the Benchmarks package's release
                build): a CallServer on the handler face, bsd backend, one event loop
                thread; or the command in SWITCHYARD_GRPC_ECHO when set (split like a shell
                would, run as given; it must pick a port and print `listening on PORT`)
    switchyard-libuv  the same with `--backend libuv` (SWITCHYARD_GRPC_ECHO_LIBUV overrides)

Method (that of Benchmarks/run, see Benchmarks/README.md): each round runs every server in
turn (interleaved), a fresh process per (server, round), pinned with the load drivers to
one core (CPU, default 0; CPU= runs unpinned); before the first round each server is
checked once with real gRPC clients (below). Per (server, round):
    warm-up  h2load, WARMUP_CALLS (2000) unary calls, one at a time, not measured
    unary1   h2load -c 1 -m 1: CALLS_1 (20000) unary calls, one in flight    calls/s, p50, p99
    unary64  h2load -c 1 -m 64: CALLS_64 (50000) calls, 64 in flight         calls/s, p50, p99
    stream   grpc-nio-echo-client --method stream, one call on one connection, no
             warm-up of its own: the client writes for STREAM_SECONDS (2) as fast as the
             call takes messages, then half-closes and reads the rest; messages echoed /
             time to the last echo: messages/s and MiB/s (one direction). Twice: messages
             of 64 B and of STREAM_BIG (65536) B
Every load runs on one HTTP/2 connection. Unary calls carry MESSAGE_SIZE (64) bytes of
payload, length-prefixed as gRPC frames them. Latency is each call's time from h2load's
--log-file (request start to end of response), nearest-rank percentiles.

Server CPU per call (or per message, or per MiB): the server's time on CPU during the
load, from /proc: the sum of /proc/PID/task/*/schedstat's first field (ns) when no thread
of the server exited during the load, else utime + stime of /proc/PID/stat (clock ticks,
which counts exited threads too); the samples say which was used.

Correctness, which makes the run fail (exit 1) while the rest is still measured:
- before the first round, per server: `nghttp -v` makes one unary call and its trailers
  must say grpc-status 0 with the payload echoed; with Python's grpcio installed, a unary
  call and a 100-message stream must come back byte for byte (any non-zero status raises);
- every h2load load must have every call answered 2xx, and exactly calls x (5 + size)
  bytes of DATA: each call's message came back (a gRPC error answer carries no message);
- the stream client exits non-zero on any non-OK status or echo of the wrong size.
"""

import json
import os
import platform
import re
import shlex
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import benchlib  # noqa: E402 (Benchmarks/benchlib.py, found through the line above)

RESULTS = HERE / "results"
CPP_SERVER = HERE / "cpp-echo-server" / "cpp-echo-server"
SWIFT_PACKAGE = HERE / "swift-nio-echo"
BENCHMARKS_PACKAGE = HERE.parent

ROUNDS = int(os.environ.get("ROUNDS", "3"))
CPU = os.environ.get("CPU", "0")
MESSAGE_SIZE = int(os.environ.get("MESSAGE_SIZE", "64"))
WARMUP_CALLS = int(os.environ.get("WARMUP_CALLS", "2000"))
CALLS_1 = int(os.environ.get("CALLS_1", "20000"))
CALLS_64 = int(os.environ.get("CALLS_64", "50000"))
STREAM_SECONDS = float(os.environ.get("STREAM_SECONDS", "2"))
STREAM_BIG = int(os.environ.get("STREAM_BIG", "65536"))
OUT_NAME = os.environ.get("OUT_NAME", "grpc-echo")
UNARY_PATH = "/switchyard.bench.Echo/Unary"
STREAM_PATH = "/switchyard.bench.Echo/Stream"
GRPC_HEADERS = ["-H", "content-type: application/grpc", "-H", "te: trailers"]
PIN = benchlib.pin(CPU)
REFERENCE = "cpp"
# Switchyard's rows are also given as ratios to grpc-swift out of the box.
PEER = "nio"


log = benchlib.logger("grpc-run")


class Failure(Exception):
    """A server answered wrongly: the run goes on without it and exits 1."""


def payload(size):
    """The benchmark's message: a periodic pattern (the same one grpc-nio-echo-client sends)."""
    return bytes((i * 31 + 7) & 0xFF for i in range(size))


def grpc_frame(message):
    return b"\0" + struct.pack(">I", len(message)) + message


# ---------------------------------------------------------------------------- servers

def swift_bin_dir():
    out = subprocess.run(["swift", "build", "-c", "release", "--show-bin-path"], cwd=SWIFT_PACKAGE,
                         capture_output=True, text=True, check=True).stdout.strip()
    return Path(out)


def switchyard_server():
    """The Benchmarks package's switchyard-grpc-echo (built by `run`), or None if not built."""
    try:
        out = subprocess.run(["swift", "build", "-c", "release", "--show-bin-path"], cwd=BENCHMARKS_PACKAGE,
                             capture_output=True, text=True, check=True).stdout.strip()
    except subprocess.CalledProcessError:
        return None
    path = Path(out) / "switchyard-grpc-echo"
    return path if path.exists() else None


def servers():
    bin_dir = swift_bin_dir()
    table = {
        "cpp": [str(CPP_SERVER), "0"],
        "nio": [str(bin_dir / "grpc-nio-echo-server"), "--port", "0", "--event-loops", "1"],
        "nio-el": [str(bin_dir / "grpc-nio-echo-server"), "--port", "0", "--event-loops", "1", "--executor", "nio"],
    }
    # Switchyard's: SWITCHYARD_GRPC_ECHO (and _LIBUV) when set, else the Benchmarks
    # package's switchyard-grpc-echo on each backend.
    built = switchyard_server()
    for name, variable, backend in [("switchyard", "SWITCHYARD_GRPC_ECHO", "bsd"),
                                    ("switchyard-libuv", "SWITCHYARD_GRPC_ECHO_LIBUV", "libuv")]:
        own = os.environ.get(variable, "").strip()
        if own:
            table[name] = shlex.split(own)
        elif built:
            table[name] = [str(built), "--backend", backend, "--port", "0", "--event-loops", "1"]
    chosen = os.environ.get("SERVERS", "cpp nio nio-el switchyard switchyard-libuv").split()
    names = []
    for name in chosen:
        if name.startswith("switchyard") and name not in table:
            log(f"note: {name}: switchyard-grpc-echo is not built (Benchmarks/grpc/run builds it) and "
                "SWITCHYARD_GRPC_ECHO is not set: skipped")
            continue
        if name not in table:
            sys.exit(f"grpc-run: unknown server {name!r}; known: cpp nio nio-el switchyard switchyard-libuv")
        names.append(name)
    return {n: table[n] for n in names}, bin_dir / "grpc-nio-echo-client"


class Server(benchlib.Server):
    """benchlib.Server pinned with PIN; one that does not start is a Failure of its own."""

    def __init__(self, name, argv, log_path):
        try:
            super().__init__(name, argv, log_path, PIN)
        except benchlib.DidNotStart as e:
            raise Failure(str(e)) from None

    def cpu(self):
        """(per-thread ns on CPU from schedstat, utime + stime in seconds from stat)."""
        return benchlib.schedstat_threads(self.pid), benchlib.stat_cpu_seconds(self.pid)

    def peak_rss_kib(self):
        return self.status_kib("VmHWM")


def cpu_seconds(before, after):
    """Server CPU seconds between two Server.cpu() readings, and the source used."""
    (t0, s0), (t1, s1) = before, after
    if set(t0) <= set(t1):
        return sum(t1[k] - t0.get(k, 0) for k in t1) / 1e9, "schedstat"
    return s1 - s0, "stat"


# ---------------------------------------------------------------------------- checks

def check_with_nghttp(server, work):
    """One unary call with nghttp -v: status 200, the payload echoed, grpc-status 0."""
    body = work / "check-body"
    body.write_bytes(grpc_frame(payload(MESSAGE_SIZE)))
    r = subprocess.run(["nghttp", "-v", "-d", str(body), *GRPC_HEADERS,
                        f"http://127.0.0.1:{server.port}{UNARY_PATH}"], capture_output=True, timeout=20)
    text = r.stdout.decode("latin-1")
    statuses = re.findall(r"recv \(stream_id=\d+\) grpc-status: (\S+)", text)
    if r.returncode != 0 or ":status: 200" not in text:
        raise Failure(f"{server.name}: nghttp unary call failed (exit {r.returncode}):\n{text[-2000:]}")
    if statuses != ["0"]:
        message = re.findall(r"recv \(stream_id=\d+\) grpc-message: (.*)", text)
        raise Failure(f"{server.name}: unary call answered grpc-status {statuses or 'none'} {message}")
    data = re.findall(r"recv DATA frame <length=(\d+)", text)
    if sum(int(n) for n in data) != MESSAGE_SIZE + 5:
        raise Failure(f"{server.name}: unary call echoed {data} bytes of DATA, expected {MESSAGE_SIZE + 5}")


def check_with_grpcio(server):
    """A unary call and a 100-message stream through grpcio, when it is installed."""
    try:
        import grpc  # noqa: PLC0415 (optional)
    except ImportError:
        return "grpcio not installed: unary checked with nghttp only"
    message = payload(MESSAGE_SIZE)
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        try:
            echoed = channel.unary_unary(UNARY_PATH)(message, timeout=10)
            if echoed != message:
                raise Failure(f"{server.name}: grpcio unary echo differs")
            messages = [payload(MESSAGE_SIZE)[i:] + bytes([i]) for i in range(100)]
            got = list(channel.stream_stream(STREAM_PATH)(iter(messages), timeout=10))
            if got != messages:
                raise Failure(f"{server.name}: grpcio stream echoed {len(got)} messages, not the 100 sent")
        except grpc.RpcError as e:
            raise Failure(f"{server.name}: grpcio call ended with {e.code()}: {e.details()}") from None
    return f"grpcio {grpc.__version__}: unary and stream OK"


# ---------------------------------------------------------------------------- loads

def h2load(server, work, calls, in_flight, tag):
    """h2load on one connection: `calls` unary calls, `in_flight` at a time."""
    body = work / "body"
    body.write_bytes(grpc_frame(payload(MESSAGE_SIZE)))
    log_file = work / f"h2load-{tag}.log"
    argv = PIN + ["h2load", "-n", str(calls), "-c", "1", "-t", "1", "-m", str(in_flight), "-d", str(body),
                  *GRPC_HEADERS, "--log-file", str(log_file), f"http://127.0.0.1:{server.port}{UNARY_PATH}"]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    out = r.stdout
    m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded", out)
    codes = re.search(r"status codes: (\d+) 2xx", out)
    data = re.search(r"\((\d+)\) data", out)
    rate = re.search(r"finished in [^,]+, ([\d.]+) req/s", out)
    if r.returncode != 0 or not (m and codes and data and rate):
        raise Failure(f"{server.name}: h2load {tag} failed (exit {r.returncode}):\n{out[-1500:]}{r.stderr[-500:]}")
    if int(m.group(4)) != calls or int(codes.group(1)) != calls:
        raise Failure(f"{server.name}: h2load {tag}: {m.group(4)} of {calls} calls succeeded, {codes.group(1)} 2xx")
    if int(data.group(1)) != calls * (MESSAGE_SIZE + 5):
        raise Failure(f"{server.name}: h2load {tag}: {data.group(1)} bytes of DATA for {calls} calls, expected "
                      f"{calls * (MESSAGE_SIZE + 5)}: some calls came back without their message")
    times = sorted(int(line.split("\t")[2]) for line in log_file.read_text().splitlines() if line.strip())
    log_file.unlink()
    return float(rate.group(1)), percentile(times, 0.50), percentile(times, 0.99)


def percentile(sorted_values, q):
    rank = max(1, -(-len(sorted_values) * q // 1))
    return float(sorted_values[min(int(rank), len(sorted_values)) - 1])


def stream(client, server, size):
    argv = PIN + [str(client), "--target", f"127.0.0.1:{server.port}", "--method", "stream", "--concurrency", "1",
                  "--duration", str(STREAM_SECONDS), "--warmup", "0", "--message-size", str(size)]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise Failure(f"{server.name}: stream of {size} B messages failed: {r.stderr.strip()[-1000:]}")
    return json.loads(r.stdout)


def measure(server, client, work):
    s = {"load1_start": os.getloadavg()[0]}
    h2load(server, work, WARMUP_CALLS, 1, "warmup")
    for in_flight, calls in [(1, CALLS_1), (64, CALLS_64)]:
        before = server.cpu()
        rate, p50, p99 = h2load(server, work, calls, in_flight, f"m{in_flight}")
        cpu, source = cpu_seconds(before, server.cpu())
        s[f"u{in_flight}_cps"], s[f"u{in_flight}_p50"], s[f"u{in_flight}_p99"] = rate, p50, p99
        s[f"u{in_flight}_cpu_us"] = cpu * 1e6 / calls
        s[f"u{in_flight}_cpu_source"] = source
    for key, size in [("s64", 64), ("sbig", STREAM_BIG)]:
        before = server.cpu()
        out = stream(client, server, size)
        cpu, source = cpu_seconds(before, server.cpu())
        s[f"{key}_mps"], s[f"{key}_mibps"] = out["messages_per_s"], out["mib_per_s"]
        s[f"{key}_cpu_us"] = cpu * 1e6 / max(out["messages"], 1)
        s[f"{key}_cpu_us_per_mib"] = cpu * 1e6 / max(out["messages"] * size / 1048576, 1e-9)
        s[f"{key}_cpu_source"] = source
    s["peak_rss_kib"] = server.peak_rss_kib()
    s["load1_end"] = os.getloadavg()[0]
    return s


# ---------------------------------------------------------------------------- report

# key, heading, better ("hi" or "lo"), format
METRICS = [
    ("u1_cps", "unary 1 calls/s", "hi", "{:.0f}"),
    ("u1_p50", "unary 1 p50 us", "lo", "{:.0f}"),
    ("u1_p99", "unary 1 p99 us", "lo", "{:.0f}"),
    ("u1_cpu_us", "CPU us/call (1)", "lo", "{:.1f}"),
    ("u64_cps", "unary 64 calls/s", "hi", "{:.0f}"),
    ("u64_p99", "unary 64 p99 us", "lo", "{:.0f}"),
    ("u64_cpu_us", "CPU us/call (64)", "lo", "{:.1f}"),
    ("s64_mps", "stream 64 B msgs/s", "hi", "{:.0f}"),
    ("s64_mibps", "stream 64 B MiB/s", "hi", "{:.1f}"),
    ("s64_cpu_us", "CPU us/msg (64 B)", "lo", "{:.2f}"),
    ("sbig_mps", "stream big msgs/s", "hi", "{:.0f}"),
    ("sbig_mibps", "stream big MiB/s", "hi", "{:.0f}"),
    ("sbig_cpu_us_per_mib", "CPU us/MiB (big)", "lo", "{:.0f}"),
    ("peak_rss_kib", "peak RSS MiB", "lo", None),
]


def fmt(key, value):
    return benchlib.fmt(METRICS, key, value)


def machine():
    return {
        "nproc": os.cpu_count(),
        "kernel": platform.release(),
        "cpu": benchlib.cpu_model(),
        "swift": benchlib.first_line(["swift", "--version"]),
        "grpc++": benchlib.first_line(["pkg-config", "--modversion", "grpc++"]),
        "h2load": benchlib.first_line(["h2load", "--version"]),
        "load_start": benchlib.loadavg(),
    }


def report(med, samples, names, info, checks):
    metric_keys = [k for k, _, _, _ in METRICS]
    lines = [
        "### Machine",
        "",
        f"- {info['nproc']} cores (`nproc`), kernel {info['kernel']}, CPU: {info['cpu']}",
        f"- {info['swift']}; gRPC C++ {info['grpc++']} (Debian); {info['h2load']}",
        f"- load average (1, 5, 15 min) at the start: {info['load_start']}, at the end: {info['load_end']}",
        f"- `ROUNDS={ROUNDS}`, {MESSAGE_SIZE} B unary messages, {CALLS_1} calls at -m 1, {CALLS_64} at -m 64, "
        f"streams {STREAM_SECONDS:g} s of 64 B and of {STREAM_BIG} B messages, "
        f"pinned to CPU {CPU or '(not pinned)'}",
        "- 1-minute load average at the start and end of each (server, round): " + "; ".join(
            f"{n} " + ", ".join(f"{x['load1_start']:.1f}-{x['load1_end']:.1f}" for x in samples[n])
            for n in names if samples.get(n)),
        "",
        "Checks: " + "; ".join(f"{n}: {c}" for n, c in checks.items()),
        "",
    ] + benchlib.medians_table(METRICS, med, names, ROUNDS, fmt)
    for reference, subjects in [(REFERENCE, [n for n in names if n != REFERENCE]),
                                (PEER, [n for n in names if n.startswith("switchyard")])]:
        subjects = [n for n in subjects if n in med]
        if reference not in med or not subjects:
            continue
        lines += ["", f"### Ratio to {reference}",
                  "",
                  f"Server / {reference} of the medians, with the lowest and highest ratio of one round's figures "
                  "(a round runs every server back to back). Above 1 is better for calls/s, msgs/s and MiB/s; "
                  "below 1 is better for latency, CPU and memory.",
                  "",
                  "| server | " + " | ".join(h for _, h, _, _ in METRICS) + " |",
                  "|---|" + "---:|" * len(METRICS)]
        for name in subjects:
            cells = []
            for k in metric_keys:
                a, b = med[name].get(k), med[reference].get(k)
                if not a or not b:
                    cells.append("-")
                    continue
                per_round = [x[k] / y[k] for x, y in zip(samples[name], samples[reference]) if x.get(k) and y.get(k)]
                spread = f" ({min(per_round):.2f}-{max(per_round):.2f})" if len(per_round) > 1 else ""
                cells.append(f"{a / b:.2f}x{spread}")
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main():
    if CPU and subprocess.run(["sh", "-c", "command -v taskset"], capture_output=True).returncode:
        sys.exit("grpc-run: taskset not found (util-linux); set CPU= to run unpinned")
    table, client = servers()
    names = list(table)
    info = machine()
    log(f"machine: {info['nproc']} cores, {info['cpu']}, load {info['load_start']}; servers: {' '.join(names)}")
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"switchyard-grpc-run-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    samples = {n: [] for n in names}
    checks, failures = {}, {}

    for name in names:
        try:
            server = Server(name, table[name], work / f"{name}-check.log")
            try:
                check_with_nghttp(server, work)
                checks[name] = "nghttp unary grpc-status 0; " + check_with_grpcio(server)
            finally:
                server.stop()
            log(f"{name}: {checks[name]}")
        except Failure as e:
            failures[name] = str(e)
            log(f"FAILED: {e}")
    live = [n for n in names if n not in failures]

    for rnd in range(1, ROUNDS + 1):
        for name in list(live):
            try:
                server = Server(name, table[name], work / f"{name}-{rnd}.log")
                try:
                    s = measure(server, client, work)
                finally:
                    server.stop()
            except (Failure, subprocess.TimeoutExpired) as e:
                failures[name] = str(e)
                live.remove(name)
                log(f"round {rnd} {name}: FAILED: {e}")
                continue
            samples[name].append(s)
            log(f"round {rnd}/{ROUNDS} {name}: unary1 {s['u1_cps']:.0f}/s p99 {s['u1_p99']:.0f} us, "
                f"unary64 {s['u64_cps']:.0f}/s p99 {s['u64_p99']:.0f} us, CPU {s['u1_cpu_us']:.1f}/"
                f"{s['u64_cpu_us']:.1f} us/call, stream {s['s64_mps']:.0f} msg/s, {s['sbig_mibps']:.0f} MiB/s; "
                f"load {s['load1_start']:.1f} -> {s['load1_end']:.1f}")
            time.sleep(0.5)

    med = {}
    for n, ss in samples.items():
        if ss and n in live:
            med[n] = {k: statistics.median([s[k] for s in ss]) for k, _, _, _ in METRICS}
    info["load_end"] = benchlib.loadavg()
    text = report(med, samples, names, info, checks)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{OUT_NAME}.md").write_text(
        "## gRPC echo servers under load (`Benchmarks/grpc/run`)\n\n"
        f"Generated by `Benchmarks/grpc/run` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.\n\n" + text)
    (RESULTS / f"{OUT_NAME}-samples.json").write_text(
        json.dumps({"machine": info, "samples": samples, "failures": failures}, indent=1) + "\n")
    print(text)
    log(f"wrote {RESULTS / (OUT_NAME + '.md')}, {RESULTS / (OUT_NAME + '-samples.json')}")
    for f in work.iterdir():
        f.unlink()
    work.rmdir()
    if failures:
        for name, why in failures.items():
            log(f"{name} FAILED: {why}")
        sys.exit(1)


if __name__ == "__main__":
    main()
