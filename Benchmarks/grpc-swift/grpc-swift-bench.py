#!/usr/bin/env python3
"""Benchmarks/grpc-swift/run: grpc-swift on SwitchyardGRPC against grpc-swift-nio-transport.

(This is the body of Benchmarks/grpc-swift/run, which builds first; run that.)

    Benchmarks/grpc-swift/run                      # build, 3 rounds, write results/grpc-swift.md
    ROUNDS=5 Benchmarks/grpc-swift/run
    DURATION=1 WARMUP=0.2 ROUNDS=1 Benchmarks/grpc-swift/run   # a quick look
    PAIRS="nio:nio bsd:nio" Benchmarks/grpc-swift/run          # SERVER:CLIENT pairs
    NO_BUILD=1 Benchmarks/grpc-swift/run           # reuse the last build
    CPU= Benchmarks/grpc-swift/run                 # do not pin
    Benchmarks/grpc-swift/run count                # instructions per RPC (callgrind), see below

One program, grpc-swift-bench (Benchmarks/grpc/swift-nio-echo/Sources/grpc-swift-bench),
holds one GRPCCore echo service (GRPCEchoService: a hand-written RegistrableRPCService over
raw bytes) and one GRPCCore load driver (GRPCEchoLoad); `--transport nio|switchyard
--backend bsd|libuv` picks what they run on, for the server (`serve`) and the client
(`load`) alike. A side is named here by its transport:
    nio     grpc-swift-nio-transport 2.9.2 (HTTP2ServerTransport.Posix /
            HTTP2ClientTransport.Posix), one event loop thread, plaintext
    bsd     SwitchyardGRPC on Switchyard's bsd backend, one event loop thread
    libuv   SwitchyardGRPC on Switchyard's libuv backend, one event loop thread

PAIRS (SERVER:CLIENT, default below) are run in turn within each round (interleaved), a
fresh server process per (pair, round), server and client pinned to CPU (default 0, as
Benchmarks/run and Benchmarks/grpc/run do). Per (pair, round), three loads, each a fresh
client process (one HTTP/2 connection) that runs WARMUP seconds unmeasured, then DURATION
seconds measured, every echo checked (a failed call or a wrong echo fails the run):
    u1   unary calls, 1 in flight, MESSAGE_SIZE (64) B     calls/s, p50, p99
    u64  unary calls, 64 in flight                         calls/s, p50, p99
    s    one bidirectional stream of 64 B messages, written as fast as the call takes
         them for DURATION, then half-closed and read to the end: messages echoed /
         time to the last echo
Server CPU per call (per message for s): utime + stime of /proc/PID/stat (10 ms ticks)
over the measured part (read when the client says `measuring` and when it exits) divided
by the calls (messages) the client counted. Client CPU likewise, from the client's rusage
(its whole run, warm-up included, so only comparable between clients).

Comparisons, all Switchyard / NIO, each a ratio per round then the median (min-max):
    servers, same client: bsd:C and libuv:C against nio:C, for each client C run
    each side's own client: bsd:bsd and libuv:libuv against nio:nio
Target: ahead on every figure (calls/s and messages/s higher, p99 lower), server CPU per
call lower.

`count` (callgrind): the server runs under `valgrind --tool=callgrind` (DWARF stripped, a
preloaded sigsuspend that passes a writable copy of its mask: valgrind 3.19 and Swift's
Dispatch threads, see Benchmarks/conncost/run), driven unpinned by the NIO client for
COUNT_SHORT and COUNT_LONG seconds (a fresh server each): instructions per call =
(Ir long - Ir short) / (calls long - calls short), which cancels start-up, connection
and shutdown.
"""

import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import benchlib  # noqa: E402 (Benchmarks/benchlib.py, found through the line above)

RESULTS = HERE / "results"
PACKAGE = HERE.parent / "grpc" / "swift-nio-echo"
WORK = Path(os.environ.get("WORK", "/tmp/switchyard-grpc-swift"))

ROUNDS = int(os.environ.get("ROUNDS", "3"))
CPU = os.environ.get("CPU", "0")
DURATION = float(os.environ.get("DURATION", "3"))
WARMUP = float(os.environ.get("WARMUP", "0.5"))
MESSAGE_SIZE = int(os.environ.get("MESSAGE_SIZE", "64"))
PAIRS = os.environ.get("PAIRS", "nio:nio bsd:nio libuv:nio nio:bsd bsd:bsd libuv:bsd nio:libuv libuv:libuv").split()
OUT_NAME = os.environ.get("OUT_NAME", "grpc-swift")
PIN = benchlib.pin(CPU)
SIDES = {"nio": ["--transport", "nio"],
         "bsd": ["--transport", "switchyard", "--backend", "bsd"],
         "libuv": ["--transport", "switchyard", "--backend", "libuv"]}
LOADS = [("u1", ["--method", "unary", "--concurrency", "1"]),
         ("u64", ["--method", "unary", "--concurrency", "64"]),
         ("s", ["--method", "stream", "--concurrency", "1"])]


log = benchlib.logger("grpc-swift")


def binary():
    own = os.environ.get("GRPC_SWIFT_BENCH")
    if own:
        return own
    out = subprocess.run(["swift", "build", "-c", "release", "--show-bin-path"], cwd=PACKAGE,
                         capture_output=True, text=True, check=True).stdout.strip()
    return str(Path(out) / "grpc-swift-bench")


class Server(benchlib.Server):
    """benchlib.Server for `argv` as given (pinning included), with two minutes to start (a
    server under valgrind is slow) and its CPU from /proc/PID/stat."""

    def __init__(self, argv, log_path):
        try:
            super().__init__("the server", argv, log_path, start_seconds=120, stop_seconds=10,
                             listening=r"listening on (\d+)")
        except benchlib.DidNotStart as e:
            sys.exit(f"grpc-swift: the server did not start: {' '.join(argv)}\n{e.output}")

    def cpu_seconds(self):
        return benchlib.stat_cpu_seconds(self.pid)


def run_load(bench, client, port, args, duration, warmup, server=None, pin=True):
    """Runs one client; returns (its JSON, server CPU s over the measured part, client CPU s)."""
    argv = (PIN if pin else []) + [bench, "load"] + SIDES[client] + [
        "--target", f"127.0.0.1:{port}", "--duration", str(duration), "--warmup", str(warmup),
        "--message-size", str(MESSAGE_SIZE)] + args
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    before = None
    errors = []
    for line in proc.stderr:
        if line.strip() == "measuring" and before is None:
            before = server.cpu_seconds() if server else 0.0
        else:
            errors.append(line)
    after = server.cpu_seconds() if server else 0.0
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0 or before is None:
        sys.exit(f"grpc-swift: the load failed ({' '.join(argv)}), exit {proc.returncode}:\n{''.join(errors)}{out}")
    return json.loads(out), after - before, usage.ru_utime + usage.ru_stime


def measure_pair(bench, pair, round_index):
    server_side, client_side = pair.split(":")
    server = Server(PIN + [bench, "serve"] + SIDES[server_side] + ["--port", "0"],
                    WORK / f"server-{server_side}.log")
    sample = {"pair": pair, "round": round_index, "load_before": loadavg()}
    try:
        for key, args in LOADS:
            out, cpu, client_cpu = run_load(bench, client_side, server.port, args, DURATION, WARMUP, server)
            n = max(out["messages"], 1)
            sample[f"{key}_rate"] = out["messages_per_s"]
            sample[f"{key}_n"] = out["messages"]
            sample[f"{key}_p50"] = out["p50_us"]
            sample[f"{key}_p99"] = out["p99_us"]
            sample[f"{key}_cpu_us"] = cpu * 1e6 / n
            sample[f"{key}_client_cpu_s"] = client_cpu
    finally:
        server.stop()
    return sample


# Figure key, heading, which way is better, format.
FIGURES = [
    ("u1_rate", "unary 1: calls/s", "hi", "{:.0f}"),
    ("u1_p99", "unary 1: p99 us", "lo", "{:.0f}"),
    ("u1_cpu_us", "unary 1: server CPU us/call", "lo", "{:.1f}"),
    ("u64_rate", "unary 64: calls/s", "hi", "{:.0f}"),
    ("u64_p99", "unary 64: p99 us", "lo", "{:.0f}"),
    ("u64_cpu_us", "unary 64: server CPU us/call", "lo", "{:.1f}"),
    ("s_rate", "stream 64 B: msg/s", "hi", "{:.0f}"),
    ("s_cpu_us", "stream 64 B: server CPU us/msg", "lo", "{:.2f}"),
]


median = benchlib.median


def ratios(samples, pair, reference):
    """Per figure: (median ratio, lowest, highest) of pair / reference within each round."""
    by_round = {}
    for s in samples:
        by_round.setdefault(s["round"], {})[s["pair"]] = s
    out = {}
    for key, *_ in FIGURES:
        rs = [r[pair][key] / r[reference][key] for r in by_round.values()
              if pair in r and reference in r and r[reference][key] and r[pair][key] is not None]
        out[key] = (statistics.median(rs), min(rs), max(rs)) if rs else None
    return out


def verdict(key, better, ratio):
    if ratio is None:
        return "not measured"
    if better == "hi":
        return "ahead" if ratio > 1 else f"behind: needs {(1 / ratio - 1) * 100:.0f}% more"
    return "ahead" if ratio < 1 else f"behind: needs {(1 - 1 / ratio) * 100:.0f}% less"


def machine():
    return {"nproc": os.cpu_count(), "cpu": benchlib.cpu_model(""), "kernel": platform.release(),
            "os": Path("/etc/debian_version").read_text().strip() if Path("/etc/debian_version").exists() else ""}


def table(samples, info):
    pairs = list(dict.fromkeys(s["pair"] for s in samples))
    lines = [f"# grpc-swift on SwitchyardGRPC against grpc-swift-nio-transport", "",
             f"- when: {info['start']} to {info['end']} (UTC)",
             f"- machine: Debian {info['os']}, {info['nproc']} cores, {info['cpu']}, kernel {info['kernel']}",
             f"- load average (1, 5, 15 min) before: {info['load_start']}, after: {info['load_end']}",
             f"- {info['rounds']} interleaved rounds; per load {WARMUP} s warm-up, {DURATION} s measured; "
             f"{MESSAGE_SIZE} B messages; server and client pinned to CPU {CPU or '(not pinned)'}",
             "- pair = server:client; nio = grpc-swift-nio-transport 2.9.2, bsd / libuv = SwitchyardGRPC "
             "on that backend; one event loop thread each side", "",
             "## Medians over rounds", "",
             "| pair | " + " | ".join(h for _, h, _, _ in FIGURES) + " |",
             "|---|" + "---:|" * len(FIGURES)]
    for pair in pairs:
        row = [fmt.format(median([s[key] for s in samples if s["pair"] == pair]))
               for key, _, _, fmt in FIGURES]
        lines.append(f"| {pair} | " + " | ".join(row) + " |")
    comparisons = []
    for client in ["nio", "bsd", "libuv"]:
        for server in ["bsd", "libuv"]:
            comparisons.append((f"{server}:{client}", f"nio:{client}", f"server {server} / server nio, both with the {client} client"))
    comparisons += [("bsd:bsd", "nio:nio", "bsd on both sides / nio on both sides"),
                    ("libuv:libuv", "nio:nio", "libuv on both sides / nio on both sides")]
    lines += ["", "## Ratios Switchyard / NIO (median of per-round ratios, lowest-highest)", "",
              "Calls/s and msg/s: above 1 is ahead. p99 and CPU: below 1 is ahead.", "",
              "| comparison | " + " | ".join(h for _, h, _, _ in FIGURES) + " |",
              "|---|" + "---:|" * len(FIGURES)]
    gaps = []
    for pair, reference, name in comparisons:
        if pair not in pairs or reference not in pairs:
            continue
        r = ratios(samples, pair, reference)
        cells = []
        for key, heading, better, _ in FIGURES:
            if r[key] is None:
                cells.append("-")
                continue
            m, lo, hi = r[key]
            ok = (m > 1) if better == "hi" else (m < 1)
            cells.append(f"{'' if ok else '**'}{m:.2f}{'' if ok else '**'} ({lo:.2f}-{hi:.2f})")
            if not ok:
                gaps.append(f"- {name}, {heading}: {m:.2f}, {verdict(key, better, m)}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "Bold: short of the target (ahead on every figure, server CPU per call lower).", ""]
    lines += ["## Gaps to the target", ""] + (gaps or ["- none: ahead on every figure"])
    return "\n".join(lines) + "\n"


def loadavg():
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def bench_main():
    bench = binary()
    RESULTS.mkdir(exist_ok=True)
    WORK.mkdir(parents=True, exist_ok=True)
    info = {"start": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()), "load_start": loadavg(),
            "rounds": ROUNDS, "pairs": PAIRS, "duration": DURATION, "warmup": WARMUP, "cpu_pin": CPU,
            **machine()}
    log(f"{info['nproc']} cores, load {info['load_start']}; pairs {' '.join(PAIRS)}; {ROUNDS} rounds")
    samples = []
    for round_index in range(ROUNDS):
        for pair in PAIRS:
            s = measure_pair(bench, pair, round_index)
            samples.append(s)
            log(f"round {round_index + 1} {pair}: u1 {s['u1_rate']:.0f}/s p99 {s['u1_p99']:.0f} us "
                f"cpu {s['u1_cpu_us']:.1f} us; u64 {s['u64_rate']:.0f}/s p99 {s['u64_p99']:.0f} us "
                f"cpu {s['u64_cpu_us']:.1f} us; stream {s['s_rate']:.0f} msg/s cpu {s['s_cpu_us']:.2f} us; "
                f"load {loadavg()}")
    info["end"] = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    info["load_end"] = loadavg()
    (RESULTS / f"{OUT_NAME}-samples.json").write_text(json.dumps({"info": info, "samples": samples}, indent=1) + "\n")
    text = table(samples, info)
    (RESULTS / f"{OUT_NAME}.md").write_text(text)
    print(text)


# ------------------------------------------------------------------------------ count

SHIM = r"""
#define _GNU_SOURCE
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>
int sigsuspend(const sigset_t *mask) { sigset_t copy = *mask; return syscall(SYS_rt_sigsuspend, &copy, 8); }
"""


def count_main():
    bench = binary()
    work = WORK / "count"
    work.mkdir(parents=True, exist_ok=True)
    stripped = work / "grpc-swift-bench"
    subprocess.run(["objcopy", "--strip-debug", bench, str(stripped)], check=True)
    (work / "vgfix.c").write_text(SHIM)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(work / "vgfix.so"), str(work / "vgfix.c")], check=True)
    short = float(os.environ.get("COUNT_SHORT", "3"))
    long = float(os.environ.get("COUNT_LONG", "9"))
    servers = os.environ.get("COUNT_SERVERS", "nio bsd libuv").split()
    client = os.environ.get("COUNT_CLIENT", "nio")
    loads = [l for l in LOADS if l[0] in os.environ.get("COUNT_LOADS", "u1 u64 s").split()]
    RESULTS.mkdir(exist_ok=True)
    info = {"start": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()), "load_start": loadavg(),
            "short_s": short, "long_s": long, "client": client, **machine()}
    results = {}
    for key, args in loads:
        for server_side in servers:
            ir, calls = {}, {}
            for seconds in (short, long):
                out_file = work / f"callgrind.{server_side}.{key}.{seconds}"
                out_file.unlink(missing_ok=True)
                server = Server(["env", f"LD_PRELOAD={work / 'vgfix.so'}", "valgrind", "--tool=callgrind",
                                 f"--callgrind-out-file={out_file}", str(stripped), "serve"] + SIDES[server_side]
                                + ["--port", "0"], work / f"server.{server_side}.log")
                try:
                    out, _, _ = run_load(bench, client, server.port, args, seconds, 0.0, None, pin=False)
                finally:
                    server.stop()
                summary = re.search(r"^summary:\s*(\d+)", out_file.read_text(), re.M)
                ir[seconds], calls[seconds] = int(summary.group(1)), out["messages"]
            per = (ir[long] - ir[short]) / max(calls[long] - calls[short], 1)
            results.setdefault(key, {})[server_side] = {"ir": ir, "calls": calls, "per_call": per}
            log(f"count {key} {server_side}: {per:.0f} instructions per call "
                f"({calls[short]} and {calls[long]} calls)")
    info["end"] = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    info["load_end"] = loadavg()
    (RESULTS / f"{OUT_NAME}-count.json").write_text(json.dumps({"info": info, "results": results}, indent=1) + "\n")
    names = {"u1": "unary, 1 in flight", "u64": "unary, 64 in flight", "s": "stream 64 B (per message)"}
    lines = [f"# Server instructions per call (callgrind), client {client}", "",
             f"- when: {info['start']} to {info['end']} (UTC); load average before {info['load_start']}",
             f"- loads of {short} s and {long} s against a fresh server under callgrind each; "
             "per call = difference of instructions / difference of calls", "",
             "| load | " + " | ".join(servers) + " | " + " | ".join(f"{s} / nio" for s in servers if s != "nio") + " |",
             "|---|" + "---|" * (len(servers) * 2 - (1 if "nio" in servers else 0))]
    for key, _ in loads:
        row = results[key]
        cells = [f"{row[s]['per_call']:.0f}" for s in servers]
        if "nio" in servers:
            cells += [f"{row[s]['per_call'] / row['nio']['per_call']:.2f}" for s in servers if s != "nio"]
        lines.append(f"| {names[key]} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    (RESULTS / f"{OUT_NAME}-count.md").write_text(text)
    print(text)


if __name__ == "__main__":
    if sys.argv[1:2] == ["count"]:
        count_main()
    elif sys.argv[1:]:
        sys.exit("usage: grpc-swift-bench.py [count]")
    else:
        bench_main()
