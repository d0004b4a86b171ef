#!/usr/bin/env python3
"""Benchmarks/tls: TLS echo servers under load: Switchyard (bsd and libuv, raw echo over
SwitchyardTLS) against a C epoll + OpenSSL server and SwiftNIO with NIOSSL.

(This is the body of Benchmarks/tls, which installs what is missing first; run that.)

    Benchmarks/tls                       # build, 3 rounds, write results/tls-echo.md
    ROUNDS=5 Benchmarks/tls
    SERVERS="c-epoll-tls bsd-tls" Benchmarks/tls
    SECONDS_PER_LOAD=1 BURST_CONNS=200 Benchmarks/tls     # a quick look
    NO_BUILD=1 Benchmarks/tls            # reuse the last build
    CPU= Benchmarks/tls                  # do not pin
    BASELINE_ECHO_SERVER=/tmp/base/.build/release/echo-server Benchmarks/tls   # adds bsd-tls@base, libuv-tls@base

What it does (the method is Benchmarks/run's, echo-bench.py; both take the server process,
the load generator's run and the machine description from benchlib.py):
- Builds, in release: nio-tls-echo-server (Benchmarks package, NIOSSL) and echo-server
  (in the root package's own .build, so a developer's release build is reused; ECHO_SERVER
  names another binary); with $BENCH_CC -O2 the C TLS server and the load generator (both
  against the system's OpenSSL 3) into Benchmarks/.build/c/.
- Makes throwaway certificates with scripts/make-test-certs (an EC P-256 server key for
  localhost from a test CA) into a temporary directory; every server gets the same ones.
- Servers (SERVERS, default all four): c-epoll-tls (Servers/c-epoll-tls-echo.c), nio-tls
  (Servers/nio-tls-echo-server), bsd-tls and libuv-tls (`echo-server --mode raw
  --tls-cert --tls-key`). One event loop thread each; c-epoll (plain, no TLS) can be added
  to SERVERS to show what TLS costs.
- Per round, every server in turn (interleaved), a fresh process per (server, round),
  pinned with the load generator to one core (CPU, default 0), warmed up with an
  unmeasured 0.3 s ping-pong, then, all with `loadgen --tls` (TLS 1.3, full handshakes):
    pp1     1 connection, 64 B ping-pong, SECONDS_PER_LOAD s    round trips/s, p50, p99
    stream  64 KiB writes on one connection, SECONDS_PER_LOAD s MiB/s echoed
    burst   BURST_CONNS (1000) connections: connect, handshake (all at once), BURST_ROUNDS
            (1) round trip of 64 B, close_notify + close       total ms, handshake ms
  Server CPU per unit of work from /proc/PID/task/*/schedstat (ns on CPU), as in
  Benchmarks/run; the load generator's own CPU (user + system, getrusage) as a share of
  the load's wall time: on one shared core, the part of the core the server did not get.
- Writes results/tls-echo.md (medians, ratios to c-epoll-tls and to nio-tls, the issue's
  targets with met/missed and the gap) and results/tls-echo-samples.json.
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import benchlib

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
CBIN = benchlib.CBIN
ROUNDS = int(os.environ.get("ROUNDS", "3"))
SECONDS_PER_LOAD = float(os.environ.get("SECONDS_PER_LOAD", "2"))
BURST_CONNS = int(os.environ.get("BURST_CONNS", "1000"))
BURST_ROUNDS = int(os.environ.get("BURST_ROUNDS", "1"))
OUT_NAME = os.environ.get("OUT_NAME", "tls-echo")
CPU = os.environ.get("CPU", "0")
CC = benchlib.c_compiler()
PIN = benchlib.pin(CPU)
# Progress and a server that does not start are told as Benchmarks/run tells them.
log = benchlib.logger("tls")
sh = benchlib.sh


def swift():
    return benchlib.swift("tls")


def build():
    flags = ["-c", "release"]
    if not os.environ.get("NO_BUILD"):
        log("building nio-tls-echo-server (release)")
        sh([swift(), "build", *flags, "--product", "nio-tls-echo-server"], cwd=HERE, stdout=sys.stderr)
        if not os.environ.get("ECHO_SERVER"):
            log("building echo-server (release, root package)")
            sh([swift(), "build", *flags, "--product", "echo-server"], cwd=ROOT, stdout=sys.stderr)
    bin_dir = Path(sh([swift(), "build", *flags, "--show-bin-path"], cwd=HERE, capture_output=True).stdout.strip())
    CBIN.mkdir(parents=True, exist_ok=True)
    if not os.environ.get("NO_BUILD") or not (CBIN / "c-epoll-tls-echo").exists():
        log(f"building the C TLS server, the C server and loadgen ({CC} -O2, OpenSSL)")
        sh([CC, "-O2", "-o", str(CBIN / "c-epoll-tls-echo"), str(HERE / "Servers/c-epoll-tls-echo.c"), "-lssl", "-lcrypto"])
        sh([CC, "-O2", "-o", str(CBIN / "c-epoll-echo"), str(HERE / "Servers/c-epoll-echo.c")])
        benchlib.build_loadgen(CC)
    return bin_dir


def servers(bin_dir, certs):
    cert, key = str(certs / "server.pem"), str(certs / "server.key")
    echo = os.environ.get("ECHO_SERVER") or str(Path(sh([swift(), "build", "-c", "release", "--show-bin-path"],
                                                            cwd=ROOT, capture_output=True).stdout.strip()) / "echo-server")
    common = ["--port", "0", "--event-loops", "1", "--grace-period", "0", "--tls-cert", cert, "--tls-key", key]
    table = {
        "c-epoll-tls": [str(CBIN / "c-epoll-tls-echo"), cert, key, "0"],
        "nio-tls": [str(bin_dir / "nio-tls-echo-server"), cert, key, "0", "1"],
        "bsd-tls": [echo, "--backend", "bsd", "--mode", "raw", *common],
        "libuv-tls": [echo, "--backend", "libuv", "--mode", "raw", *common],
    }
    extra = {"c-epoll": [str(CBIN / "c-epoll-echo"), "0"]}
    # A baseline build of echo-server (another commit, built by hand) runs interleaved
    # with the current one, as NAME@base, so a change is measured in one run (as in
    # Benchmarks/run).
    baseline = os.environ.get("BASELINE_ECHO_SERVER")
    if baseline:
        if not Path(baseline).is_file():
            sys.exit(f"tls: BASELINE_ECHO_SERVER={baseline!r} is not a file")
        for name in ["bsd-tls", "libuv-tls"]:
            table[name + "@base"] = [baseline, *table[name][1:]]
    chosen = os.environ.get("SERVERS", " ".join(table)).split()
    for name in chosen:
        if name not in table and name not in extra:
            sys.exit(f"tls: unknown server {name!r}; known: {' '.join(table)} {' '.join(extra)}")
    return {name: (table.get(name) or extra[name], name in table) for name in chosen}


def loadgen(tls, *args, timeout=120):
    return benchlib.loadgen(PIN + [str(CBIN / "loadgen")] + (["--tls"] if tls else []), *args, timeout=timeout)


def measure(server, tls):
    s = {}
    loadgen(tls, "pingpong", server.port, 1, 64, 0.3)  # warm-up, not measured

    c0 = server.cpu_ns()
    r = loadgen(tls, "pingpong", server.port, 1, 64, SECONDS_PER_LOAD)
    c1 = server.cpu_ns()
    s["pp1_rps"] = float(r["rps"])
    s["pp1_p50"] = float(r["p50_us"])
    s["pp1_p99"] = float(r["p99_us"])
    s["pp1_cpu_us"] = (c1 - c0) / 1e3 / int(r["round_trips"])
    s["pp1_client_share"] = float(r["client_cpu_ms"]) / (float(r["seconds"]) * 1e3)

    c0 = server.cpu_ns()
    r = loadgen(tls, "stream", server.port, 65536, SECONDS_PER_LOAD)
    c1 = server.cpu_ns()
    s["stream_mibps"] = float(r["mibps"])
    s["stream_cpu_us_per_mib"] = (c1 - c0) / 1e3 / (int(r["bytes"]) / 1048576)
    s["stream_client_share"] = float(r["client_cpu_ms"]) / (float(r["seconds"]) * 1e3)

    c0 = server.cpu_ns()
    t0 = time.time()
    r = loadgen(tls, "burst", server.port, BURST_CONNS, BURST_ROUNDS)
    wall_ms = (time.time() - t0) * 1e3
    c1 = server.cpu_ns()
    s["burst_ms"] = float(r["total_ms"])
    s["burst_handshake_ms"] = float(r.get("handshake_ms", 0))
    s["burst_cpu_us"] = (c1 - c0) / 1e3 / BURST_CONNS
    # The burst's client time includes its process start; its share is of the whole run.
    s["burst_client_share"] = float(r["client_cpu_ms"]) / wall_ms
    s["peak_rss_kib"] = server.status_kib("VmHWM")
    return s


# (key, header, higher is better, format)
METRICS = [
    ("pp1_rps", "1 conn rt/s", True, "{:.0f}"),
    ("pp1_p50", "1 conn p50 us", False, "{:.1f}"),
    ("pp1_p99", "1 conn p99 us", False, "{:.1f}"),
    ("stream_mibps", "stream MiB/s", True, "{:.0f}"),
    ("burst_ms", f"{BURST_CONNS} conns ms", False, "{:.0f}"),
    ("burst_handshake_ms", "of which handshakes ms", False, "{:.0f}"),
    ("pp1_cpu_us", "CPU us/rt (1 conn)", False, "{:.2f}"),
    ("stream_cpu_us_per_mib", "CPU us/MiB (stream)", False, "{:.0f}"),
    ("burst_cpu_us", "CPU us/conn (burst)", False, "{:.0f}"),
    ("peak_rss_kib", "peak RSS MiB", False, None),
    ("pp1_client_share", "loadgen CPU share pp1", None, "{:.2f}"),
    ("stream_client_share", "loadgen CPU share stream", None, "{:.2f}"),
    ("burst_client_share", "loadgen CPU share burst", None, "{:.2f}"),
]


def fmt(key, value):
    return benchlib.fmt(METRICS, key, value)


def ratio_table(med, names, ref, title):
    keys = [k for k, _, better, _ in METRICS if better is not None]
    if ref not in med:
        return []
    heads = [h for k, h, _, _ in METRICS if k in keys]
    out = [f"#### {title}", "", "| server | " + " | ".join(heads) + " |", "|---|" + "---:|" * len(heads)]
    for name in names:
        if name == ref or name not in med:
            continue
        cells = []
        for k in keys:
            a, b = med[name].get(k), med[ref].get(k)
            cells.append("-" if not a or not b else f"{a / b:.2f}x")
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    return out + [""]


def targets(med, samples):
    """The TLS targets: at least 0.9 of the C server, ahead of NIOSSL; as speeds (higher is better)."""
    rows = []
    loads = [("pp1_rps", "1 conn rt/s", True), ("stream_mibps", "stream MiB/s", True),
             ("burst_ms", f"{BURST_CONNS}-conn burst speed (ref ms / server ms)", False)]

    def speed(x, y, k, higher):
        return x[k] / y[k] if higher else y[k] / x[k]

    for server in ["bsd-tls", "libuv-tls"]:
        for ref, goal, ok, need in [("c-epoll-tls", ">= 0.9", lambda v: v >= 0.9, 0.9),
                                    ("nio-tls", "> 1", lambda v: v > 1.0, 1.0)]:
            if server not in med or ref not in med:
                continue
            for k, h, higher in loads:
                if not med[server].get(k) or not med[ref].get(k):
                    continue
                value = speed(med[server], med[ref], k, higher)
                per_round = [speed(x, y, k, higher) for x, y in zip(samples[server], samples[ref])
                             if x.get(k) and y.get(k)]
                spread = f"{min(per_round):.2f} to {max(per_round):.2f}" if len(per_round) > 1 else "-"
                if ok(value):
                    gap = f"{value - need:+.3f}"
                else:
                    gap = f"{value - need:+.3f}: {(need / value - 1) * 100:.1f}% faster needed"
                rows.append(f"| {server} / {ref}, {h} | {value:.3f} | {spread} | {goal} | "
                            f"{'met' if ok(value) else 'MISSED'} | {gap} |")
    if not rows:
        return []
    return ["#### Targets", "",
            "The value is the ratio of the medians as a speed (above 1 is faster than the reference); "
            "rounds: the lowest and highest ratio of one round's figures.", "",
            "| target | value | rounds | goal | status | gap |", "|---|---:|---:|---|---|---|"] + rows + [""]


def report(med, samples, names, info):
    lines = [
        "### Machine",
        "",
        f"- {info['nproc']} cores (`nproc`), kernel {info['kernel']} (`uname -r`), CPU: {info['cpu']}",
        f"- {info['swift']}; {info['openssl']}; {info['cc']} -O2 for the C programs",
        f"- load average at the start of the run: {info['load_start']}; at the end: {info['load']}",
        f"- `ROUNDS={ROUNDS}`, {SECONDS_PER_LOAD:g} s per timed load, burst {BURST_CONNS} conns x {BURST_ROUNDS} "
        f"round trip(s), TLS 1.3 (loadgen --tls: full handshakes, no verification on the client), "
        f"pinned to CPU {CPU or '(not pinned)'}",
        "",
    ] + benchlib.medians_table(METRICS, med, names, ROUNDS, fmt)
    lines += ["", "Every ratio below is server / reference of the medians: above 1 is better for rt/s and MiB/s, "
              "below 1 is better for latency, time, CPU and memory. The loadgen CPU share is the load "
              "generator's CPU time over the load's wall time (both share one core).", ""]
    lines += ratio_table(med, names, "c-epoll-tls", "Ratio to c-epoll-tls")
    lines += ratio_table(med, names, "nio-tls", "Ratio to nio-tls")
    lines += targets(med, samples)
    return "\n".join(lines) + "\n"


def main():
    if CPU and subprocess.run(["sh", "-c", "command -v taskset"], capture_output=True).returncode:
        sys.exit("tls: taskset not found (util-linux); set CPU= to run unpinned")
    load_start = benchlib.loadavg()
    bin_dir = build()
    info = {**benchlib.machine(swift(), CC), "load": benchlib.loadavg()}
    info["load_start"] = load_start
    info["openssl"] = subprocess.run(["openssl", "version"], capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="switchyard-tls-") as tmp:
        certs = Path(tmp) / "certs"
        sh([str(ROOT / "scripts" / "make-test-certs"), str(certs)], stdout=sys.stderr)
        table = servers(bin_dir, certs)
        names = list(table)
        log(f"machine: {info['nproc']} cores, kernel {info['kernel']}, {info['cpu']}, load {load_start}")
        samples = {n: [] for n in names}
        for rnd in range(1, ROUNDS + 1):
            for name in names:
                argv, tls = table[name]
                s = benchlib.measure_fresh("tls", rnd, name, argv, Path(tmp) / f"{name}-{rnd}.log", PIN,
                                           lambda server: measure(server, tls), log)
                if s:
                    samples[name].append(s)
                    log(f"round {rnd}/{ROUNDS} {name}: pp1 {s['pp1_rps']:.0f} rt/s p99 {s['pp1_p99']:.1f} us, "
                        f"stream {s['stream_mibps']:.0f} MiB/s, burst {s['burst_ms']:.0f} ms "
                        f"(handshakes {s['burst_handshake_ms']:.0f}), peak {s['peak_rss_kib'] / 1024:.1f} MiB")
                time.sleep(0.5)
    med = benchlib.medians(samples)
    info["load"] = benchlib.loadavg()
    text = report(med, samples, names, info)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{OUT_NAME}.md").write_text(
        "## TLS echo servers under load (`Benchmarks/tls`)\n\n"
        f"Generated by `Benchmarks/tls` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.\n\n" + text)
    (RESULTS / f"{OUT_NAME}-samples.json").write_text(json.dumps({"machine": info, "samples": samples}, indent=1) + "\n")
    print(text)
    log(f"wrote {RESULTS / (OUT_NAME + '.md')}, {RESULTS / (OUT_NAME + '-samples.json')}")


if __name__ == "__main__":
    main()
