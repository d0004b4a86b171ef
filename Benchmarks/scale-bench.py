#!/usr/bin/env python3
"""Benchmarks/scale: memory and CPU per connection from 1,000 to 50,000 connections, and
requests per second with 1 and 2 event loops.

(This is the body of Benchmarks/scale, which installs what is missing and raises the
descriptor limit first; run that.)

    Benchmarks/scale                     # build, 3 rounds (about 10 minutes on 2 cores)
    ROUNDS=1 Benchmarks/scale            # the quick look (3.4 minutes here, build checked)
    COUNTS="1000 10000" Benchmarks/scale
    SCALE_SERVERS="c-epoll bsd" LOOP_SERVERS="bsd-1 bsd-2 c-epoll-2" Benchmarks/scale
    PARTS=scale Benchmarks/scale         # or PARTS=loops: one of the two parts only
    NO_BUILD=1 Benchmarks/scale          # reuse the last build
    ECHO_SERVER=PATH Benchmarks/scale    # measure this echo-server

Servers (release builds, as Benchmarks/run makes them): echo-server raw mode on the bsd
and the libuv backend, Servers/c-epoll-echo.c, Servers/c-libuv-echo.c and SwiftNIO's
nio-echo-server. Per round, every server in turn (interleaved), a fresh process each.

Part 1, scale (SCALE_SERVERS, one event loop or thread each), for each N in COUNTS:
  the server is warmed up (4 connections, 0.2 s of 64 B ping-pong, closed), then
    base     /proc/PID/smaps_rollup (Rss, Anonymous; file-backed = Rss - Anonymous)
    idle     `loadgen scale PORT N` opens N connections and sends nothing; once the
             server holds N more descriptors (/proc/PID/fd) and 0.5 s later: smaps_rollup
             again; then the server's CPU over 1 s of the N idle connections
    active   "go RATE COUNT": COUNT round trips of 64 B, round-robin over the N
             connections (every connection the same number of times, at least once), RATE
             a second in all (RATE, default 5,000; COUNT = N x ceil(RATE x ACTIVE_SECONDS
             / N)); every echoed byte is checked by the load generator; then
             smaps_rollup with the N connections, each of which has now echoed
  memory per connection = (with N - base) / N, anonymous and file-backed apart;
  CPU per request = the server's CPU (sum of /proc/PID/task/*/schedstat's first field:
  ns on CPU, every thread) over the active load / COUNT; CPU per connection = its CPU
  from the first connect until the N are held / N (accept and set-up).
  A count above what the descriptor limit allows (the server holds N sockets plus its
  own; so does the load generator) is measured at the largest multiple of 1,000 that
  fits under the hard RLIMIT_NOFILE less 1,000, and the report says so.

Part 2, loops (LOOP_SERVERS): requests per second of `loadgen pingpong LOOP_CONNS 64 B
  LOOP_SECONDS` (each connection one round trip in flight, as fast as the server echoes)
  against bsd-1, bsd-2, libuv-1, libuv-2 (echo-server --event-loops 1 and 2), c-epoll-1,
  c-epoll-2 (c-epoll-echo --threads 2: SO_REUSEPORT), nio-1 and nio-2 (NIO's
  MultiThreadedEventLoopGroup of 1 and 2 threads), after a 0.3 s warm-up; server CPU per
  round trip as above. Not pinned: the single-threaded load generator shares the 2 cores
  with the server's loops (its own CPU time is reported).

Writes results/scale.md (tables: medians over rounds), results/scale-samples.json (every
sample, the machine, the load averages) and results/scale-memory.svg,
results/scale-cpu.svg, results/scale-loops.svg. Progress goes to standard error.
"""

import json
import math
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import benchlib

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
CBIN = benchlib.CBIN

ROUNDS = int(os.environ.get("ROUNDS", "3"))
COUNTS = [int(x) for x in os.environ.get("COUNTS", "1000 10000 50000").split()]
RATE = float(os.environ.get("RATE", "5000"))
ACTIVE_SECONDS = float(os.environ.get("ACTIVE_SECONDS", "2"))
LOOP_CONNS = [int(x) for x in os.environ.get("LOOP_CONNS", "64 1000").split()]
LOOP_SECONDS = float(os.environ.get("LOOP_SECONDS", "2"))
PARTS = os.environ.get("PARTS", "scale loops").split()
CPU = os.environ.get("CPU", "")
CC = benchlib.c_compiler()
SCALE_DEFAULT = "c-epoll c-libuv nio bsd libuv"
LOOP_DEFAULT = "bsd-1 bsd-2 libuv-1 libuv-2 c-epoll-1 c-epoll-2 nio-1 nio-2"
PIN = benchlib.pin(CPU)
log = benchlib.logger("scale")
sh = benchlib.sh


def swift():
    return benchlib.swift("scale")


def build():
    flags = ["-c", "release"]
    if not os.environ.get("NO_BUILD"):
        for product in ["nio-echo-server", "echo-server"]:
            log(f"building {product} (release)")
            sh([swift(), "build", *flags, "--product", product], cwd=HERE, stdout=sys.stderr)
    bin_dir = Path(sh([swift(), "build", *flags, "--show-bin-path"], cwd=HERE, capture_output=True).stdout.strip())
    CBIN.mkdir(parents=True, exist_ok=True)
    log(f"building the C servers and loadgen ({CC} -O2)")
    uv = sh(["pkg-config", "--cflags", "--libs", "libuv"], capture_output=True).stdout.split()
    sh([CC, "-O2", "-pthread", "-o", str(CBIN / "c-epoll-echo"), str(HERE / "Servers/c-epoll-echo.c")])
    sh([CC, "-O2", "-o", str(CBIN / "c-libuv-echo"), str(HERE / "Servers/c-libuv-echo.c"), *uv])
    benchlib.build_loadgen(CC)
    return bin_dir


def server_table(bin_dir):
    echo = os.environ.get("ECHO_SERVER") or str(bin_dir / "echo-server")
    if not Path(echo).is_file():
        sys.exit(f"scale: ECHO_SERVER={echo!r} is not a file")

    def sy(backend, loops):
        return [echo, "--backend", backend, "--mode", "raw", "--port", "0", "--event-loops", str(loops),
                "--grace-period", "0"]

    ce, cu, nio = str(CBIN / "c-epoll-echo"), str(CBIN / "c-libuv-echo"), str(bin_dir / "nio-echo-server")
    scale = {"c-epoll": [ce, "0"], "c-libuv": [cu, "0"], "nio": [nio, "0", "1"], "bsd": sy("bsd", 1),
             "libuv": sy("libuv", 1)}
    loops = {"bsd-1": sy("bsd", 1), "bsd-2": sy("bsd", 2), "libuv-1": sy("libuv", 1), "libuv-2": sy("libuv", 2),
             "c-epoll-1": [ce, "0"], "c-epoll-2": [ce, "0", "--threads", "2"], "c-libuv-1": [cu, "0"],
             "nio-1": [nio, "0", "1"], "nio-2": [nio, "0", "2"]}
    chosen_scale = os.environ.get("SCALE_SERVERS", SCALE_DEFAULT).split()
    chosen_loops = os.environ.get("LOOP_SERVERS", LOOP_DEFAULT).split()
    for n in chosen_scale:
        if n not in scale:
            sys.exit(f"scale: unknown scale server {n!r}; known: {' '.join(scale)}")
    for n in chosen_loops:
        if n not in loops:
            sys.exit(f"scale: unknown loop server {n!r}; known: {' '.join(loops)}")
    return {n: scale[n] for n in chosen_scale}, {n: loops[n] for n in chosen_loops}


class Server(benchlib.Server):
    """benchlib.Server pinned with PIN, with 30 s to start and 10 s to stop (a server that
    held 50,000 connections can take its time), and the readings only this driver takes."""

    def __init__(self, name, argv, log_path):
        try:
            super().__init__(name, argv, log_path, PIN, start_seconds=30, stop_seconds=10)
        except benchlib.DidNotStart as e:
            raise RuntimeError(f"{name} did not start: {e.output[-500:]}") from None

    def rollup(self):
        """(Rss, Anonymous) in KiB from smaps_rollup."""
        rss = anon = None
        for line in Path(f"/proc/{self.pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Rss:"):
                rss = int(line.split()[1])
            elif line.startswith("Anonymous:"):
                anon = int(line.split()[1])
        return rss, anon

    def fds(self):
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def tail(self):
        try:
            return Path(self.log_path).read_text()[-400:].strip()
        except OSError:
            return ""


kv = benchlib.key_values


def loadgen(*args, timeout=120):
    return benchlib.loadgen(PIN + [str(CBIN / "loadgen")], *args, timeout=timeout)


def read_line(proc, timeout, what):
    """One line of proc's stdout within timeout seconds (the load generator flushes each)."""
    import select
    deadline = time.time() + timeout
    buf = b""
    fd = proc.stdout.fileno()
    while time.time() < deadline:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.time()))
        if not ready:
            break
        ch = os.read(fd, 1)
        if not ch:
            raise RuntimeError(f"{what}: the load generator ended: {proc.stderr.read().decode(errors='replace').strip()}")
        if ch == b"\n":
            return buf.decode()
        buf += ch
    raise RuntimeError(f"{what}: no answer in {timeout} s")


def measure_scale(server, n):
    s = {"conns": n}
    loadgen("pingpong", server.port, 4, 64, 0.2)  # warm-up: code paths in, allocator warm
    time.sleep(0.3)
    fd0 = server.fds()
    rss0, anon0 = server.rollup()
    c0 = server.cpu_ns()
    count = n * max(1, math.ceil(RATE * ACTIVE_SECONDS / n))
    lg = subprocess.Popen(PIN + [str(CBIN / "loadgen"), "scale", str(server.port), str(n)], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        ready = kv(read_line(lg, 300, f"connecting {n}"))
        s["connect_ms"] = float(ready["connect_ms"])
        deadline = time.time() + 60
        while server.fds() < fd0 + n:
            if not server.alive():
                raise RuntimeError(f"the server exited holding connections: {server.tail()}")
            if time.time() > deadline:
                raise RuntimeError(f"the server holds {server.fds() - fd0} of {n} connections after 60 s: "
                                   f"{server.tail()}")
            time.sleep(0.05)
        c1 = server.cpu_ns()
        time.sleep(0.5)
        rss1, anon1 = server.rollup()
        c2 = server.cpu_ns()
        time.sleep(1.0)
        c3 = server.cpu_ns()
        lg.stdin.write(f"go {RATE:g} {count}\n".encode())
        lg.stdin.flush()
        c4 = server.cpu_ns()
        r = kv(read_line(lg, 60 + count / RATE * 3, f"{count} round trips on {n}"))
        c5 = server.cpu_ns()
        if int(r["round_trips"]) != count or int(r["untouched"]) != 0:
            raise RuntimeError(f"round trips {r['round_trips']} of {count}, untouched {r['untouched']}")
        time.sleep(0.3)
        rss2, anon2 = server.rollup()
        if not server.alive():
            raise RuntimeError(f"the server exited: {server.tail()}")
    finally:
        lg.stdin.close()
        try:
            lg.wait(60)
        except subprocess.TimeoutExpired:
            lg.kill()
            lg.wait()
    if lg.returncode != 0:
        raise RuntimeError(f"loadgen scale failed: {lg.stderr.read().decode(errors='replace').strip()}")
    s.update({
        "base_rss_kib": rss0, "base_anon_kib": anon0,
        "idle_rss_kib": rss1, "idle_anon_kib": anon1,
        "active_rss_kib": rss2, "active_anon_kib": anon2,
        "idle_anon_b": (anon1 - anon0) * 1024 / n, "idle_file_b": ((rss1 - anon1) - (rss0 - anon0)) * 1024 / n,
        "active_anon_b": (anon2 - anon0) * 1024 / n,
        "active_file_b": ((rss2 - anon2) - (rss0 - anon0)) * 1024 / n,
        "setup_cpu_us": (c1 - c0) / 1e3 / n,
        "idle_cpu_ms_per_s": (c3 - c2) / 1e6,
        "round_trips": count, "rps": float(r["rps"]), "p50_us": float(r["p50_us"]), "p99_us": float(r["p99_us"]),
        "late": int(r["late"]), "req_cpu_us": (c5 - c4) / 1e3 / count,
    })
    s["idle_b"] = s["idle_anon_b"] + s["idle_file_b"]
    s["active_b"] = s["active_anon_b"] + s["active_file_b"]
    return s


def measure_loops(server, conns):
    loadgen("pingpong", server.port, conns, 64, 0.3)  # warm-up, not measured
    c0 = server.cpu_ns()
    r = loadgen("pingpong", server.port, conns, 64, LOOP_SECONDS)
    c1 = server.cpu_ns()
    if not server.alive():
        raise RuntimeError(f"the server exited: {server.tail()}")
    return {"conns": conns, "rps": float(r["rps"]), "p50_us": float(r["p50_us"]), "p99_us": float(r["p99_us"]),
            "cpu_us": (c1 - c0) / 1e3 / int(r["round_trips"]),
            "client_cpu_share": float(r["client_cpu_ms"]) / 1e3 / float(r["seconds"]),
            "server_cpu_share": (c1 - c0) / 1e9 / float(r["seconds"])}


# ---------------------------------------------------------------------------- report

def machine():
    return benchlib.machine(swift(), CC)


def loadavg():
    return benchlib.loadavg(2)


med = benchlib.median


def f0(v):
    return "-" if v is None else f"{v:,.0f}"


def f2(v):
    return "-" if v is None else f"{v:,.2f}"


PALETTE = {"c-epoll": "#555555", "c-libuv": "#999999", "nio": "#d9822b", "bsd": "#2b6cb0", "libuv": "#2f855a"}


def line_chart(path, title, panels, xs, xlabels, series, ylabel, note):
    """panels: [(panel title, {series: [y per x or None]})]; x positions are evenly spaced."""
    W, H, left, right, topm, bottom, gap = 1000, 420, 70, 130, 50, 70, 60
    pw = (W - left - right - gap * (len(panels) - 1)) / len(panels)
    ph = H - topm - bottom
    top, step = benchlib.chart_axis(max([v for _, data in panels for ys in data.values() for v in ys
                                         if v is not None] + [1]))
    o = benchlib.svg_start(W, H, left, title)
    for pi, (ptitle, data) in enumerate(panels):
        x0 = left + pi * (pw + gap)

        def X(i):
            return x0 + 20 + i * (pw - 40) / max(1, len(xs) - 1)

        def Y(v):
            return topm + ph - v / top * ph
        o.append(f'<text x="{x0 + pw / 2:.1f}" y="{topm - 8}" text-anchor="middle" font-weight="bold">{ptitle}</text>')
        t = 0.0
        while t <= top + 1e-9:
            o.append(f'<line x1="{x0}" x2="{x0 + pw:.1f}" y1="{Y(t):.1f}" y2="{Y(t):.1f}" stroke="#e5e5e5"/>')
            o.append(f'<text x="{x0 - 6}" y="{Y(t) + 4:.1f}" text-anchor="end">{t:,.{0 if step >= 1 else 2}f}</text>')
            t += step
        o.append(f'<line x1="{x0}" x2="{x0}" y1="{topm}" y2="{topm + ph}" stroke="#333"/>')
        for i, lab in enumerate(xlabels):
            o.append(f'<text x="{X(i):.1f}" y="{topm + ph + 18}" text-anchor="middle">{lab}</text>')
        for name in series:
            ys = data.get(name)
            if not ys:
                continue
            pts = [(X(i), Y(v), v) for i, v in enumerate(ys) if v is not None]
            color = PALETTE.get(name, "#000")
            if len(pts) > 1:
                o.append('<polyline fill="none" stroke-width="2" stroke="{}" points="{}"/>'.format(
                    color, " ".join(f"{x:.1f},{y:.1f}" for x, y, _ in pts)))
            for x, y, v in pts:
                o.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{color}"><title>{name}: {v:,.2f}</title>'
                         f'</circle>')
    o.append(f'<text transform="translate(16,{topm + ph / 2}) rotate(-90)" text-anchor="middle">{ylabel}</text>')
    o += benchlib.svg_legend(W - right + 20, topm + 10, series, [PALETTE.get(name, "#000") for name in series])
    o.append(f'<text x="{left}" y="{H - 30}" fill="#555">connections</text>')
    o.append(f'<text x="{left}" y="{H - 12}" fill="#555">{note}</text>')
    o.append("</svg>")
    path.write_text("\n".join(o) + "\n")


def bar_chart(path, title, groups, names, values, note):
    """groups: labels; values[g][n]: number or None; bars per name in each group."""
    palette = ["#2b6cb0", "#90cdf4", "#2f855a", "#9ae6b4", "#555555", "#999999", "#d9822b", "#f6c08f", "#bbbbbb"]
    W, H, left, right, topm, bottom = 1000, 420, 80, 130, 40, 60
    pw, ph = W - left - right, H - topm - bottom
    top, step = benchlib.chart_axis(max([v for row in values for v in row if v is not None] + [1]))
    gw = pw / len(groups)
    bw = gw * 0.8 / len(names)

    def Y(v):
        return topm + ph - v / top * ph
    o = benchlib.svg_start(W, H, left, title)
    t = 0.0
    while t <= top + 1e-9:
        o.append(f'<line x1="{left}" x2="{left + pw}" y1="{Y(t):.1f}" y2="{Y(t):.1f}" stroke="#e5e5e5"/>')
        o.append(f'<text x="{left - 6}" y="{Y(t) + 4:.1f}" text-anchor="end">{t:,.0f}</text>')
        t += step
    for gi, label in enumerate(groups):
        x0 = left + gi * gw + gw * 0.1
        for ni, v in enumerate(values[gi]):
            if v is None:
                continue
            x = x0 + ni * bw
            o.append(f'<rect x="{x:.1f}" y="{Y(v):.1f}" width="{bw - 2:.1f}" height="{topm + ph - Y(v):.1f}" '
                     f'fill="{palette[ni % len(palette)]}"><title>{names[ni]}: {v:,.0f}</title></rect>')
        o.append(f'<text x="{left + gi * gw + gw / 2:.1f}" y="{topm + ph + 18}" text-anchor="middle">{label}</text>')
    o += benchlib.svg_legend(left + pw + 20, topm + 10, names, [palette[ni % len(palette)] for ni in range(len(names))])
    o.append(f'<text x="{left}" y="{H - 12}" fill="#555">{note}</text>')
    o.append("</svg>")
    path.write_text("\n".join(o) + "\n")


def report(info, plan, scale_samples, loop_samples, failures):
    L = ["### Machine", "",
         f"- {info['nproc']} cores (`nproc`), kernel {info['kernel']}, CPU: {info['cpu']}",
         f"- {info['swift']}; libuv {info['libuv']}; {info['cc']} -O2 for the C programs",
         f"- load average (1, 5, 15 min) at the start: {info['load_start']}; at the end: {info['load_end']}",
         f"- descriptor limit: {info['nofile']}",
         f"- `ROUNDS={ROUNDS}`, `COUNTS=\"{' '.join(map(str, COUNTS))}\"`, active load {RATE:g} round trips/s of "
         f"64 B for at least {ACTIVE_SECONDS:g} s, loops part {LOOP_SECONDS:g} s per load, "
         f"{'pinned to CPU ' + CPU if CPU else 'not pinned'}; took {info['minutes']:.1f} minutes", ""]
    for asked, n in plan:
        if asked != n:
            L.append(f"**{asked:,} connections could not be opened here**: a process may hold at most "
                     f"{info['nofile']} descriptors (the hard RLIMIT_NOFILE, which this user cannot raise), so that "
                     f"count was measured at {n:,} connections.")
            L.append("")
    if failures:
        L += ["### Failures", ""] + [f"- {f}" for f in failures] + [""]
    if scale_samples:
        names = list(scale_samples)
        L += [f"### Memory and CPU per connection (medians over {ROUNDS} rounds)", "",
              "Per connection: (smaps_rollup with N connections - with none) / N, in bytes, anonymous and "
              "file-backed apart; idle = open, nothing sent; active = after every connection echoed 64 B "
              "round trips. CPU per request: the server's CPU over the active load / round trips. "
              "Set-up: its CPU from the first connect until it held all N, / N. Idle CPU: over 1 s with "
              "the N connections silent.", "",
              "| server | conns | idle anon B | idle file B | active anon B | active file B | CPU us/request | "
              "CPU us/conn set-up | idle CPU ms/s | rt/s | p50 us | p99 us | late | base RSS KiB (anon) |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
        for _, n in plan:
            for name in names:
                ss = [s for s in scale_samples[name] if s["conns"] == n]
                if not ss:
                    L.append(f"| {name} | {n:,} | (failed) |" + " |" * 12)
                    continue
                m = {k: med([s[k] for s in ss]) for k in ss[0]}
                L.append(f"| {name} | {n:,} | {f0(m['idle_anon_b'])} | {f0(m['idle_file_b'])} | "
                         f"{f0(m['active_anon_b'])} | {f0(m['active_file_b'])} | {f2(m['req_cpu_us'])} | "
                         f"{f2(m['setup_cpu_us'])} | {f2(m['idle_cpu_ms_per_s'])} | {f0(m['rps'])} | "
                         f"{f0(m['p50_us'])} | {f0(m['p99_us'])} | {f0(m['late'])} | "
                         f"{f0(m['base_rss_kib'])} ({f0(m['base_anon_kib'])}) |")
        L += ["", "Per round (idle anon B / active anon B / CPU us per request):", ""]
        for _, n in plan:
            for name in names:
                ss = [s for s in scale_samples[name] if s["conns"] == n]
                L.append(f"- {name} at {n:,}: " + "; ".join(
                    f"{s['idle_anon_b']:,.0f} / {s['active_anon_b']:,.0f} / {s['req_cpu_us']:.2f}" for s in ss))
        L += ["", "![memory per connection](scale-memory.svg)", "", "![CPU per request](scale-cpu.svg)", ""]
    if loop_samples:
        names = list(loop_samples)
        L += [f"### Requests per second with 1 and 2 event loops (medians over {ROUNDS} rounds)", "",
              "`loadgen pingpong` (64 B, each connection one round trip in flight); CPU shares are CPU "
              "seconds per second (2.0 = both cores).", "",
              "| server | conns | rt/s | p50 us | p99 us | server CPU us/rt | server CPU share | loadgen CPU share |"
              " rt/s per round |", "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
        for c in LOOP_CONNS:
            for name in names:
                ss = [s for s in loop_samples[name] if s["conns"] == c]
                if not ss:
                    L.append(f"| {name} | {c:,} | (failed) | | | | | | |")
                    continue
                m = {k: med([s[k] for s in ss]) for k in ss[0]}
                L.append(f"| {name} | {c:,} | {f0(m['rps'])} | {f0(m['p50_us'])} | {f0(m['p99_us'])} | "
                         f"{f2(m['cpu_us'])} | {f2(m['server_cpu_share'])} | {f2(m['client_cpu_share'])} | "
                         + ", ".join(f"{s['rps']:,.0f}" for s in ss) + " |")
        L += ["", "![requests per second by event loops](scale-loops.svg)", ""]
    return "\n".join(L) + "\n"


def charts(plan, scale_samples, loop_samples):
    counts = [n for _, n in plan]
    labels = [f"{n:,}" if a == n else f"{n:,} ({a:,} asked)" for a, n in plan]
    names = list(scale_samples)

    def series(key):
        return {name: [med([s[key] for s in scale_samples[name] if s["conns"] == n]) for n in counts]
                for name in names}
    if scale_samples:
        line_chart(RESULTS / "scale-memory.svg", f"Server RSS per connection, bytes (anonymous + file-backed; "
                   f"medians of {ROUNDS} rounds)", [("idle: open, nothing sent", series("idle_b")),
                                                    ("active: after round trips", series("active_b"))],
                   counts, labels, names, "bytes per connection",
                   "(smaps_rollup Rss with N connections - with none) / N; lower is better. Points carry values.")
        line_chart(RESULTS / "scale-cpu.svg", f"Server CPU per request at {RATE:g} round trips/s, microseconds "
                   f"(medians of {ROUNDS} rounds)", [("CPU per 64 B round trip", series("req_cpu_us")),
                                                     ("CPU per connection set-up", series("setup_cpu_us"))],
                   counts, labels, names, "microseconds",
                   "schedstat of every server thread over the load / round trips (or connections); lower is "
                   "better.")
    if loop_samples:
        lnames = list(loop_samples)
        values = [[med([s["rps"] for s in loop_samples[n] if s["conns"] == c]) for n in lnames] for c in LOOP_CONNS]
        bar_chart(RESULTS / "scale-loops.svg", f"64 B round trips per second, 1 and 2 event loops (medians of "
                  f"{ROUNDS} rounds, 2 cores shared with the load generator)", [f"{c:,} connections" for c in
                                                                                  LOOP_CONNS], lnames, values,
                  "higher is better; -1/-2: event loops (threads for c-epoll)")


def main():
    t_start = time.time()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = max(COUNTS) + 1000
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(want, hard), max(want, hard)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    cap = (soft - 1000) // 1000 * 1000
    plan = []
    for n in COUNTS:
        m = min(n, cap)
        if m != n:
            log(f"{n} connections need more descriptors than the limit ({soft}) allows: measuring {m}")
        if (n, m) not in plan and m not in [x for _, x in plan]:
            plan.append((n, m))
    info = machine()
    info["load_start"] = loadavg()
    info["nofile"] = soft
    log(f"machine: {info['nproc']} cores, kernel {info['kernel']}, {info['cpu']}, load {info['load_start']}")
    bin_dir = build()
    scale_table, loop_table = server_table(bin_dir)
    if "scale" not in PARTS:
        scale_table = {}
    if "loops" not in PARTS:
        loop_table = {}
    scale_samples = {n: [] for n in scale_table}
    loop_samples = {n: [] for n in loop_table}
    failures = []
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"switchyard-scale-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    info["load_start"] = loadavg()  # after the build: the load the measuring began under
    for rnd in range(1, ROUNDS + 1):
        for _, n in plan:
            for name, argv in scale_table.items():
                try:
                    server = Server(name, argv, work / f"{name}-{n}-{rnd}.log")
                except RuntimeError as e:
                    failures.append(f"round {rnd}, {name}, {n:,} connections: {e}")
                    log(failures[-1])
                    continue
                try:
                    s = measure_scale(server, n)
                    s["round"], s["load1"] = rnd, os.getloadavg()[0]
                    scale_samples[name].append(s)
                    log(f"round {rnd}/{ROUNDS} {name} {n}: idle {s['idle_anon_b']:.0f}+{s['idle_file_b']:.0f} B/conn, "
                        f"active {s['active_anon_b']:.0f}+{s['active_file_b']:.0f} B/conn, "
                        f"{s['req_cpu_us']:.2f} us/req, set-up {s['setup_cpu_us']:.1f} us/conn, "
                        f"connect {s['connect_ms']:.0f} ms, load {s['load1']:.1f}")
                except (RuntimeError, subprocess.TimeoutExpired, KeyError, OSError) as e:
                    failures.append(f"round {rnd}, {name}, {n:,} connections: {e}")
                    log(failures[-1])
                finally:
                    server.stop()
                time.sleep(0.5)
        for c in LOOP_CONNS:
            for name, argv in loop_table.items():
                try:
                    server = Server(name, argv, work / f"{name}-loops-{c}-{rnd}.log")
                except RuntimeError as e:
                    failures.append(f"round {rnd}, {name}, pingpong {c}: {e}")
                    continue
                try:
                    s = measure_loops(server, c)
                    s["round"], s["load1"] = rnd, os.getloadavg()[0]
                    loop_samples[name].append(s)
                    log(f"round {rnd}/{ROUNDS} {name} {c} conns: {s['rps']:.0f} rt/s, {s['cpu_us']:.2f} us/rt, "
                        f"server CPU {s['server_cpu_share']:.2f}, loadgen {s['client_cpu_share']:.2f}")
                except (RuntimeError, subprocess.TimeoutExpired, KeyError, OSError) as e:
                    failures.append(f"round {rnd}, {name}, pingpong {c}: {e}")
                    log(failures[-1])
                finally:
                    server.stop()
                time.sleep(0.3)
    info["load_end"] = loadavg()
    info["minutes"] = (time.time() - t_start) / 60
    RESULTS.mkdir(exist_ok=True)
    text = report(info, plan, scale_samples, loop_samples, failures)
    (RESULTS / "scale.md").write_text(
        "## Scale curves (`Benchmarks/scale`)\n\n"
        f"Generated by `Benchmarks/scale` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.\n\n" + text)
    (RESULTS / "scale-samples.json").write_text(json.dumps(
        {"machine": info, "plan": plan, "rate": RATE, "scale": scale_samples, "loops": loop_samples,
         "failures": failures}, indent=1) + "\n")
    charts(plan, scale_samples, loop_samples)
    print(text)
    log(f"wrote {RESULTS / 'scale.md'}, scale-samples.json and the SVGs in {RESULTS}")
    for f in work.iterdir():
        f.unlink()
    work.rmdir()


if __name__ == "__main__":
    main()
