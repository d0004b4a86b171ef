#!/usr/bin/env python3
"""Benchmarks/run: Switchyard's echo servers against C and SwiftNIO peers, under load.

(This is the body of Benchmarks/run, which installs what is missing first; run that.)

    Benchmarks/run                       # build, 3 rounds, write results/echo.{md,svg}
    ROUNDS=5 Benchmarks/run
    SERVERS="c-epoll bsd-raw" Benchmarks/run
    SECONDS_PER_LOAD=1 IDLE_CONNS=2000 Benchmarks/run     # a quick look
    NO_BUILD=1 Benchmarks/run            # reuse the last build
    CPU= Benchmarks/run                  # do not pin
    BASELINE_ECHO_SERVER=/tmp/base/.build/release/echo-server BASELINE_NAME=43e828c Benchmarks/run
                                         # also run another commit's echo-server, interleaved
    ECHO_SERVER=PATH Benchmarks/run      # measure this echo-server instead of the Benchmarks
                                         # package's build (a plaintext or static build: README)

What it does (see Benchmarks/README.md for the why):
- Builds, in release: the Benchmarks package's nio-echo-server and the root package's
  echo-server (through the Benchmarks package, which depends on it by path), and with
  $BENCH_CC -O2 (the `run` wrapper picks CC, else gcc, cc or clang) the C servers and the load generator
  (into Benchmarks/.build/c/).
- Servers under test (SERVERS, default all): c-epoll, c-libuv, nio, bsd-raw, libuv-raw.
  One event loop thread each. (echo-server's framed mode serves gRPC calls over HTTP/2,
  which loadgen does not speak: Benchmarks/grpc and Benchmarks/framed-vs-raw measure it.)
- Per round, every server in turn (interleaved: A, B, C, A, B, C, ...), a fresh process
  per (server, round), pinned with the load generator to one core (CPU, default 0),
  warmed up with an unmeasured 0.3 s ping-pong, then:
    pp1     loadgen pingpong 1 conn, 64 B, SECONDS_PER_LOAD s  round trips/s, p50, p99
    pp32    loadgen pingpong 32 conns, 64 B                    round trips/s, p99
    stream  loadgen stream 64 KiB writes, one connection       MiB/s echoed
    burst   loadgen burst BURST_CONNS (1000) x 5 round trips   total ms (connects included)
  then the server's peak RSS (VmHWM) under that load, its anonymous RSS (RssAnon:
  heap, stacks, written data pages) and its file-backed RSS (RssFile: the binary's and
  the shared libraries' pages read in), each the largest value seen after each load, then
    idle    IDLE_CONNS (10000) connections held open           (RSS with them - RSS before) / N
  With nio in SERVERS, each round also measures swift-floor (Servers/swift-floor), a
  Swift program that only waits: the resident size no Swift server can go below.
  Server CPU per unit of work: the sum of /proc/PID/task/*/schedstat's first field (ns on
  CPU) before and after each load, divided by its round trips or MiB.
- Prints the machine, then Markdown tables (medians over rounds; ratios to c-epoll, of
  libuv-* to c-libuv and to nio; the issue's targets) and writes them to
  results/echo.md, the chart of ratios to results/echo.svg, the samples to
  results/echo-samples.json. Progress goes to standard error.
"""

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import benchlib

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
CBIN = benchlib.CBIN

ROUNDS = int(os.environ.get("ROUNDS", "3"))
CPU = os.environ.get("CPU", "0")
SECONDS_PER_LOAD = float(os.environ.get("SECONDS_PER_LOAD", "2"))
BURST_CONNS = int(os.environ.get("BURST_CONNS", "1000"))
BURST_ROUNDS = int(os.environ.get("BURST_ROUNDS", "5"))
IDLE_CONNS = int(os.environ.get("IDLE_CONNS", "10000"))
OUT_NAME = os.environ.get("OUT_NAME", "echo")
FLOOR = "swift-floor"
CC = benchlib.c_compiler()
log = benchlib.logger("run")
sh = benchlib.sh


# ---------------------------------------------------------------------------- build

def swift():
    return benchlib.swift("run")


def build():
    flags = ["-c", "release"]
    if not os.environ.get("NO_BUILD"):
        for product in ["nio-echo-server", "echo-server", "swift-floor"]:
            log(f"building {product} (release)")
            sh([swift(), "build", *flags, "--product", product], cwd=HERE, stdout=sys.stderr)
    bin_dir = Path(sh([swift(), "build", *flags, "--show-bin-path"], cwd=HERE, capture_output=True).stdout.strip())
    CBIN.mkdir(parents=True, exist_ok=True)
    if not os.environ.get("NO_BUILD") or not (CBIN / "loadgen").exists():
        uv = sh(["pkg-config", "--cflags", "--libs", "libuv"], capture_output=True).stdout.split()
        log(f"building the C servers and loadgen ({CC} -O2)")
        sh([CC, "-O2", "-o", str(CBIN / "c-epoll-echo"), str(HERE / "Servers/c-epoll-echo.c")])
        sh([CC, "-O2", "-o", str(CBIN / "c-libuv-echo"), str(HERE / "Servers/c-libuv-echo.c"), *uv])
        benchlib.build_loadgen(CC)
    return bin_dir


# ---------------------------------------------------------------------------- servers

def servers(bin_dir):
    echo = os.environ.get("ECHO_SERVER") or str(bin_dir / "echo-server")
    if not Path(echo).is_file():
        sys.exit(f"run: ECHO_SERVER={echo!r} is not a file")
    common = ["--port", "0", "--event-loops", "1", "--grace-period", "0"]
    table = {
        "c-epoll": [str(CBIN / "c-epoll-echo"), "0"],
        "c-libuv": [str(CBIN / "c-libuv-echo"), "0"],
        "nio": [str(bin_dir / "nio-echo-server"), "0", "1"],
        "bsd-raw": [echo, "--backend", "bsd", "--mode", "raw", *common],
        "libuv-raw": [echo, "--backend", "libuv", "--mode", "raw", *common],
    }
    # A baseline build of echo-server (another commit, built by hand) runs interleaved
    # with the current one, as NAME@base, so a change is measured in one run.
    baseline = os.environ.get("BASELINE_ECHO_SERVER")
    if baseline:
        if not Path(baseline).is_file():
            sys.exit(f"run: BASELINE_ECHO_SERVER={baseline!r} is not a file")
        for name in ["bsd-raw", "libuv-raw"]:
            table[name + "@base"] = [baseline, *table[name][1:]]
    chosen = os.environ.get("SERVERS", " ".join(table)).split()
    for name in chosen:
        if name not in table:
            sys.exit(f"run: unknown server {name!r}; known: {' '.join(table)}")
    return {name: table[name] for name in chosen}


PIN = benchlib.pin(CPU)


def loadgen(*args, timeout=120):
    return benchlib.loadgen(PIN + [str(CBIN / "loadgen")], *args, timeout=timeout)


def measure(server):
    """One round of every load against one fresh server; returns a dict of figures."""
    s = {}
    loadgen("pingpong", server.port, 1, 64, 0.3)  # warm-up, not measured
    anon = [server.status_kib("RssAnon")]
    file = [server.status_kib("RssFile")]

    c0 = server.cpu_ns()
    r = loadgen("pingpong", server.port, 1, 64, SECONDS_PER_LOAD)
    c1 = server.cpu_ns()
    s["pp1_rps"] = float(r["rps"])
    s["pp1_p50"] = float(r["p50_us"])
    s["pp1_p99"] = float(r["p99_us"])
    s["pp1_cpu_us"] = (c1 - c0) / 1e3 / int(r["round_trips"])
    anon.append(server.status_kib("RssAnon"))
    file.append(server.status_kib("RssFile"))

    c0 = server.cpu_ns()
    r = loadgen("pingpong", server.port, 32, 64, SECONDS_PER_LOAD)
    c1 = server.cpu_ns()
    s["pp32_rps"] = float(r["rps"])
    s["pp32_p99"] = float(r["p99_us"])
    s["pp32_cpu_us"] = (c1 - c0) / 1e3 / int(r["round_trips"])
    anon.append(server.status_kib("RssAnon"))
    file.append(server.status_kib("RssFile"))

    c0 = server.cpu_ns()
    r = loadgen("stream", server.port, 65536, SECONDS_PER_LOAD)
    c1 = server.cpu_ns()
    s["stream_mibps"] = float(r["mibps"])
    s["stream_cpu_us_per_mib"] = (c1 - c0) / 1e3 / (int(r["bytes"]) / 1048576)
    anon.append(server.status_kib("RssAnon"))
    file.append(server.status_kib("RssFile"))

    c0 = server.cpu_ns()
    r = loadgen("burst", server.port, BURST_CONNS, BURST_ROUNDS)
    c1 = server.cpu_ns()
    s["burst_ms"] = float(r["total_ms"])
    s["burst_cpu_us"] = (c1 - c0) / 1e3 / (BURST_CONNS * BURST_ROUNDS)
    anon.append(server.status_kib("RssAnon"))
    file.append(server.status_kib("RssFile"))

    s["peak_rss_kib"] = server.status_kib("VmHWM")
    # RssAnon has no high-water mark: the largest of its values right after each load.
    s["peak_anon_kib"] = max(anon)
    s["peak_file_kib"] = max(file)

    if IDLE_CONNS > 0:
        time.sleep(0.3)
        before = server.status_kib("VmRSS")
        argv = PIN + [str(CBIN / "loadgen"), "idle", str(server.port), str(IDLE_CONNS)]
        idle = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = idle.stdout.readline()
        if not line.startswith("ready"):
            idle.kill()
            raise RuntimeError(f"loadgen idle failed: {line} {idle.stderr.read()}")
        time.sleep(0.5)  # let the server finish with the last batch
        with_idle = server.status_kib("VmRSS")
        idle.stdin.close()
        idle.wait(60)
        s["idle_rss_before_kib"] = before
        s["idle_rss_with_kib"] = with_idle
        s["idle_bytes_per_conn"] = (with_idle - before) * 1024 / IDLE_CONNS
    return s


def measure_floor(bin_dir):
    """The resident size of swift-floor, a Swift program that only waits (see its header)."""
    proc = subprocess.Popen(PIN + [str(bin_dir / "swift-floor")], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    try:
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError("swift-floor did not start")
        time.sleep(0.2)
        status = {line.split(":")[0]: line.split()[1] for line in
                  Path(f"/proc/{proc.pid}/status").read_text().splitlines() if line.endswith("kB")}
        return {"peak_rss_kib": int(status["VmHWM"]), "peak_anon_kib": int(status["RssAnon"]),
                "peak_file_kib": int(status["RssFile"])}
    finally:
        proc.stdin.close()
        proc.wait(10)


# ---------------------------------------------------------------------------- report

# (key, header, higher is better, format)
METRICS = [
    ("pp1_rps", "1 conn rt/s", True, "{:.0f}"),
    ("pp1_p50", "1 conn p50 us", False, "{:.1f}"),
    ("pp1_p99", "1 conn p99 us", False, "{:.1f}"),
    ("pp32_rps", "32 conns rt/s", True, "{:.0f}"),
    ("pp32_p99", "32 conns p99 us", False, "{:.0f}"),
    ("stream_mibps", "stream MiB/s", True, "{:.0f}"),
    ("burst_ms", f"{BURST_CONNS} conns ms", False, "{:.0f}"),
    ("pp1_cpu_us", "CPU us/rt (1 conn)", False, "{:.2f}"),
    ("pp32_cpu_us", "CPU us/rt (32 conns)", False, "{:.2f}"),
    ("stream_cpu_us_per_mib", "CPU us/MiB (stream)", False, "{:.0f}"),
    ("burst_cpu_us", "CPU us/rt (burst)", False, "{:.1f}"),
    ("peak_rss_kib", "peak RSS MiB", False, None),
    ("peak_anon_kib", "anon RSS MiB", False, None),
    ("peak_file_kib", "file RSS MiB", False, None),
    ("idle_bytes_per_conn", "RSS B/idle conn", False, "{:.0f}"),
]


def fmt(key, value):
    return benchlib.fmt(METRICS, key, value)


def machine():
    """benchlib.machine and the load average now."""
    return {**benchlib.machine(swift(), CC), "load": benchlib.loadavg()}


def ratio_table(med, names, ref, title, keys=None):
    keys = keys or [m[0] for m in METRICS]
    if ref not in med or not any(n in med and n != ref for n in names):
        return []
    heads = [h for k, h, _, _ in METRICS if k in keys]
    out = [f"#### {title}", "", "| server | " + " | ".join(heads) + " |", "|---|" + "---:|" * len(heads)]
    for name in names:
        if name not in med or ref not in med:
            continue
        cells = []
        for k in keys:
            a, b = med[name].get(k), med[ref].get(k)
            cells.append("-" if not a or not b else f"{a / b:.2f}x")
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    return out + [""]


def report(med, samples, names, info):
    lines = [
        "### Machine",
        "",
        f"- {info['nproc']} cores (`nproc`), kernel {info['kernel']} (`uname -r`), CPU: {info['cpu']}",
        f"- {info['swift']}; libuv {info['libuv']}; {info['cc']} -O2 for the C programs",
        f"- load average at the end of the run: {info['load']}",
        f"- `ROUNDS={ROUNDS}`, {SECONDS_PER_LOAD:g} s per timed load, burst {BURST_CONNS} conns x {BURST_ROUNDS} "
        f"round trips, {IDLE_CONNS} idle conns, pinned to CPU {CPU or '(not pinned)'}",
        "",
    ] + benchlib.medians_table(METRICS, med, names, ROUNDS, fmt)
    lines += ["", "Every ratio below is server / reference of the median: above 1 is better for rt/s and MiB/s, "
              "below 1 is better for latency, time, CPU and memory.", ""]
    lines += ratio_table(med, names, "c-epoll", "Ratio to c-epoll")
    lines += ratio_table(med, [n for n in names if n.startswith("libuv") or n == "c-libuv"], "c-libuv",
                         "libuv: ratio to c-libuv")
    lines += ratio_table(med, [n for n in names if n != "nio"], "nio", "Ratio to nio")
    based = [n for n in names if n + "@base" in med and n in med]
    if based:
        label = os.environ.get("BASELINE_NAME", "the baseline build")
        keys = ["pp1_rps", "pp1_p99", "pp32_rps", "pp32_p99", "stream_mibps", "burst_ms", "pp1_cpu_us",
                "stream_cpu_us_per_mib", "peak_rss_kib", "idle_bytes_per_conn"]
        heads = [h for k, h, _, _ in METRICS if k in keys]
        lines += [f"#### This build / {label} (same run, interleaved)", "",
                  "| server | " + " | ".join(heads) + " |", "|---|" + "---:|" * len(heads)]
        for n in based:
            cells = []
            for k in keys:
                a, b = med[n].get(k), med[n + "@base"].get(k)
                cells.append("-" if not a or not b else f"{a / b:.2f}x")
            lines.append(f"| {n} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += targets(med, samples)
    return "\n".join(lines) + "\n"


def targets(med, samples):
    rows = []

    def r(a, k, b):
        if a in med and b in med and med[a].get(k) and med[b].get(k):
            return (med[a][k] / med[b][k], a, k, b)
        return None

    def spread(a, k, b):
        """The lowest and highest of the per-round ratios (round i of a over round i of b)."""
        per_round = [x[k] / y[k] for x, y in zip(samples.get(a, []), samples.get(b, [])) if x.get(k) and y.get(k)]
        if len(per_round) < 2:
            return "-"
        return f"{min(per_round):.2f} to {max(per_round):.2f}"

    def add(what, found, ok, goal):
        if found is None:
            return
        value, a, k, b = found
        rows.append(f"| {what} | {value:.2f} | {spread(a, k, b)} | {goal} | {'met' if ok(value) else 'MISSED'} |")

    thr = [("pp1_rps", "1 conn rt/s"), ("pp32_rps", "32 conns rt/s"), ("stream_mibps", "stream MiB/s")]
    for k, h in thr:
        add(f"bsd-raw / c-epoll, {h}", r("bsd-raw", k, "c-epoll"), lambda v: v >= 0.9, ">= 0.9")
    v = r("c-epoll", "burst_ms", "bsd-raw")
    add("bsd-raw / c-epoll, burst speed (c-epoll ms / bsd ms)", v, lambda v: v >= 0.9, ">= 0.9")
    for k, h in [("pp1_p99", "1 conn p99"), ("pp32_p99", "32 conns p99")]:
        add(f"bsd-raw / c-epoll, {h}", r("bsd-raw", k, "c-epoll"), lambda v: v <= 1.2, "<= 1.2")
    for k, h in thr:
        add(f"libuv-raw / c-libuv, {h}", r("libuv-raw", k, "c-libuv"), lambda v: v >= 0.9, ">= 0.9")
    v = r("c-libuv", "burst_ms", "libuv-raw")
    add("libuv-raw / c-libuv, burst speed", v, lambda v: v >= 0.9, ">= 0.9")
    for s in ["bsd-raw", "libuv-raw"]:
        for k, h in thr:
            add(f"{s} / nio, {h}", r(s, k, "nio"), lambda v: v > 1.0, "> 1")
    for s, ref in [("bsd-raw", "c-epoll"), ("libuv-raw", "c-libuv")]:
        for k, h in [("pp1_cpu_us", "CPU/rt 1 conn"), ("pp32_cpu_us", "CPU/rt 32 conns"),
                     ("stream_cpu_us_per_mib", "CPU/MiB stream"), ("burst_cpu_us", "CPU/rt burst")]:
            add(f"{s} / {ref}, {h}", r(s, k, ref), lambda v: v <= 1.2, "<= 1.2")
    for s in ["bsd-raw", "libuv-raw"]:
        add(f"{s} / nio, peak RSS", r(s, "peak_rss_kib", "nio"), lambda v: v <= 0.5, "<= 0.5")
    add("swift-floor / nio, peak RSS (a Swift program that only waits: the least any Swift server can reach)",
        r("swift-floor", "peak_rss_kib", "nio"), lambda v: v <= 0.5, "<= 0.5")
    for s in ["bsd-raw", "libuv-raw"]:
        if s in med and med[s].get("idle_bytes_per_conn") is not None:
            v = med[s]["idle_bytes_per_conn"] / 1024
            rows.append(f"| {s}, KiB per idle connection | {v:.2f} | - | < 2 | {'met' if v < 2 else 'MISSED'} |")
    if not rows:
        return []
    return ["#### Targets", "",
            "The value is the ratio of the medians; the rounds column, the lowest and highest ratio of one "
            "round's figures (servers run interleaved, so round i of each ran close together in time).", "",
            "| target | value | rounds | goal | status |", "|---|---:|---:|---|---|"] + rows + [""]


def chart(med, names, path):
    """Grouped bars: per load, each server's speed relative to c-epoll (higher is better)."""
    groups = [
        ("1 conn rt/s", "pp1_rps", True),
        ("32 conns rt/s", "pp32_rps", True),
        ("stream MiB/s", "stream_mibps", True),
        (f"{BURST_CONNS} conns (1/time)", "burst_ms", False),
        ("1/CPU per rt", "pp1_cpu_us", False),
        ("1/CPU per MiB", "stream_cpu_us_per_mib", False),
        ("1/peak RSS", "peak_rss_kib", False),
    ]
    names = [n for n in names if n in med]
    if "c-epoll" not in med or not names:
        return
    palette = ["#555555", "#999999", "#d9822b", "#2b6cb0", "#2f855a", "#63b3ed", "#90cdf4", "#68d391", "#9ae6b4"]
    values = []
    for _, k, higher in groups:
        row = []
        for n in names:
            a, b = med[n].get(k), med["c-epoll"].get(k)
            row.append(None if not a or not b else (a / b if higher else b / a))
        values.append(row)
    top = max(1.2, max(v for row in values for v in row if v is not None) * 1.08)
    top = min(top, 4.0)
    W, H, left, right, topm, bottom = 1100, 460, 60, 200, 40, 70
    pw, ph = W - left - right, H - topm - bottom
    gw = pw / len(groups)
    bw = gw * 0.8 / len(names)

    def y(v):
        return topm + ph - min(v, top) / top * ph

    o = benchlib.svg_start(W, H, left, f"Echo servers relative to c-epoll (higher is better; medians of {ROUNDS} "
                                        "rounds, one core)")
    step = 0.25 if top <= 2 else 0.5
    t = 0.0
    while t <= top + 1e-9:
        o.append(f'<line x1="{left}" x2="{left + pw}" y1="{y(t):.1f}" y2="{y(t):.1f}" stroke="#e5e5e5"/>')
        o.append(f'<text x="{left - 6}" y="{y(t) + 4:.1f}" text-anchor="end">{t:.2f}</text>')
        t += step
    for level, color in [(1.0, "#333"), (0.9, "#c53030")]:
        o.append(f'<line x1="{left}" x2="{left + pw}" y1="{y(level):.1f}" y2="{y(level):.1f}" stroke="{color}" '
                 f'stroke-dasharray="{"" if level == 1.0 else "5,4"}"/>')
    for gi, (label, _, _) in enumerate(groups):
        x0 = left + gi * gw + gw * 0.1
        for si, v in enumerate(values[gi]):
            if v is None:
                continue
            x = x0 + si * bw
            o.append(f'<rect x="{x:.1f}" y="{y(v):.1f}" width="{bw - 1:.1f}" height="{topm + ph - y(v):.1f}" '
                     f'fill="{palette[si % len(palette)]}"><title>{names[si]}: {v:.2f}x</title></rect>')
            if v > top:
                o.append(f'<text x="{x + bw / 2:.1f}" y="{topm - 3}" text-anchor="middle" font-size="9">{v:.1f}</text>')
        o.append(f'<text x="{left + gi * gw + gw / 2:.1f}" y="{topm + ph + 18}" text-anchor="middle">{label}</text>')
    o += benchlib.svg_legend(left + pw + 20, topm + 10, names, [palette[si % len(palette)] for si in range(len(names))])
    o.append(f'<text x="{left + pw + 20}" y="{topm + 10 + len(names) * 20 + 20}" fill="#c53030">- - 0.9 target</text>')
    o.append(f'<text x="{left}" y="{H - 12}" fill="#555">Bars: server / c-epoll for rt/s and MiB/s; '
             f'c-epoll / server for time, CPU and RSS. Tooltips carry the values.</text>')
    o.append("</svg>")
    path.write_text("\n".join(o) + "\n")


def main():
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = max(hard, 2 * IDLE_CONNS + 1000)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, want))
        except (ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        pass
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < IDLE_CONNS + 100:
        sys.exit(f"run: the descriptor limit ({soft}) is below IDLE_CONNS ({IDLE_CONNS}); raise ulimit -n")
    if CPU and subprocess.run(["sh", "-c", "command -v taskset"], capture_output=True).returncode:
        sys.exit("run: taskset not found (util-linux); set CPU= to run unpinned")

    bin_dir = build()
    table = servers(bin_dir)
    names = list(table)
    info = machine()
    log(f"machine: {info['nproc']} cores, kernel {info['kernel']}, {info['cpu']}")
    samples = {n: [] for n in names}
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"switchyard-run-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    for rnd in range(1, ROUNDS + 1):
        for name in names:
            s = benchlib.measure_fresh("run", rnd, name, table[name], work / f"{name}-{rnd}.log", PIN,
                                       measure, log)
            if s:
                samples[name].append(s)
                log(f"round {rnd}/{ROUNDS} {name}: pp1 {s['pp1_rps']:.0f} rt/s p99 {s['pp1_p99']:.1f} us, "
                    f"pp32 {s['pp32_rps']:.0f} rt/s, stream {s['stream_mibps']:.0f} MiB/s, burst {s['burst_ms']:.0f} ms, "
                    f"peak {s['peak_rss_kib'] / 1024:.1f} MiB, idle {s.get('idle_bytes_per_conn', 0):.0f} B/conn")
            time.sleep(0.5)
        if "nio" in names:
            samples.setdefault(FLOOR, []).append(measure_floor(bin_dir))
    if FLOOR in samples:
        names.append(FLOOR)
    med = benchlib.medians(samples)
    info["load"] = benchlib.loadavg()
    text = report(med, samples, names, info)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{OUT_NAME}.md").write_text(
        "## Echo servers under load (`Benchmarks/run`)\n\n"
        f"Generated by `Benchmarks/run` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.\n\n" + text
        + f"\n![chart]({OUT_NAME}.svg)\n")
    (RESULTS / f"{OUT_NAME}-samples.json").write_text(json.dumps({"machine": info, "samples": samples}, indent=1) + "\n")
    chart(med, [n for n in names if n != FLOOR], RESULTS / f"{OUT_NAME}.svg")
    print(text)
    log(f"wrote {RESULTS / (OUT_NAME + '.md')}, {RESULTS / (OUT_NAME + '.svg')}, {RESULTS / (OUT_NAME + '-samples.json')}")
    for f in work.iterdir():
        f.unlink()
    work.rmdir()


if __name__ == "__main__":
    main()
