"""What the Python drivers under Benchmarks/ share: each rule of how a benchmark starts a
server, reads its CPU and memory, drives the load generator and describes the machine is
written here once, so that two drivers cannot measure the same figure two ways.

Imported by echo-bench.py (Benchmarks/run), tls-bench.py (Benchmarks/tls),
scale-bench.py (Benchmarks/scale), transfer-bench.py (Benchmarks/transfer),
grpc/grpc-bench.py (Benchmarks/grpc/run) and grpc-swift/grpc-swift-bench.py
(Benchmarks/grpc-swift/run); the last two put this folder on sys.path first. Nothing here
reads the environment but the C compiler's choice (c_compiler); each driver keeps its own
variables and passes what it needs.
"""

import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

# What every server under test prints once it accepts: `listening on PORT`, or with a host.
LISTENING = r"listening on (?:\S*:)?(\d+)\b"
# Where the C programs (servers and the load generator) are built.
CBIN = Path(__file__).resolve().parent / ".build" / "c"
LOADGEN = CBIN / "loadgen"


def c_compiler():
    """The C compiler for the C peers and the load generator: BENCH_CC (what the shell
    wrappers pick: CC, else gcc, cc or clang), else CC, else gcc."""
    return os.environ.get("BENCH_CC") or os.environ.get("CC") or "gcc"


def build_loadgen(cc):
    """Compiles LoadGen/loadgen.c into LOADGEN with `cc -O2`; it links OpenSSL for its
    --tls mode (Benchmarks/tls), which plain loads do not use."""
    CBIN.mkdir(parents=True, exist_ok=True)
    sh([cc, "-O2", "-o", str(LOADGEN), str(Path(__file__).resolve().parent / "LoadGen" / "loadgen.c"),
        "-lssl", "-lcrypto"])


def logger(prefix):
    """A progress printer: `PREFIX: ...` on standard error, flushed at once."""

    def log(*parts):
        print(f"{prefix}:", *parts, file=sys.stderr, flush=True)

    return log


def sh(cmd, **kw):
    """Runs a command that must succeed; text in and out."""
    return subprocess.run(cmd, check=True, text=True, **kw)


def swift(prefix):
    """The swift driver: on PATH, else the toolchain's usual place; exits naming the driver."""
    if shutil.which("swift"):
        return "swift"
    if Path("/opt/swift/usr/bin/swift").exists():
        return "/opt/swift/usr/bin/swift"
    sys.exit(f"{prefix}: swift not found (PATH or /opt/swift)")


def pin(cpu):
    """The taskset prefix that pins to CPU `cpu`; none when it is empty."""
    return ["taskset", "-c", cpu] if cpu else []


def key_values(text):
    """The `key=value` words of a line the load generator prints."""
    return dict(word.split("=", 1) for word in text.split() if "=" in word)


def loadgen(argv, *args, timeout=120):
    """Runs the load generator (`argv`: pinning, its path and mode flags) on `args`; returns
    its figures, or raises RuntimeError with what it said when it fails."""
    r = subprocess.run(list(argv) + [str(a) for a in args], capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"loadgen {' '.join(map(str, args))} failed: {r.stderr.strip()}")
    return key_values(r.stdout)


# ---------------------------------------------------------------------------- a process's CPU and memory

def schedstat_threads(pid):
    """Nanoseconds on CPU of each thread of `pid` (the first field of its schedstat)."""
    threads = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            threads[task.name] = int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return threads


def schedstat_ns(pid):
    """Nanoseconds on CPU of every thread of `pid`: finer than the 10 ms ticks of stat."""
    return sum(schedstat_threads(pid).values())


def stat_cpu_seconds(pid):
    """utime + stime of `pid` in seconds (/proc/PID/stat, clock ticks); counts exited threads too."""
    # Fields after the command name (which may hold spaces): utime and stime are 14, 15.
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")


def status_kib(pid, field):
    """A KiB field of /proc/PID/status (VmHWM, VmRSS, RssAnon, ...); 0 when absent."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


class DidNotStart(RuntimeError):
    """A server exited, or did not say where it listens, in time; carries its output."""

    def __init__(self, name, output):
        super().__init__(f"{name} did not start:\n{output}")
        self.name = name
        self.output = output


class Server:
    """A server under test, started (behind the `pin` prefix) with its output in `log_path`;
    ready once it prints a line that `listening` matches, whose group is its port. Raises
    DidNotStart when it exits first or start_seconds pass."""

    def __init__(self, name, argv, log_path, pin=(), start_seconds=20, stop_seconds=5, listening=LISTENING):
        self.name = name
        self.log_path = Path(log_path)
        self.stop_seconds = stop_seconds
        self.out = open(log_path, "w+")
        self.proc = subprocess.Popen(list(pin) + list(argv), stdout=self.out, stderr=subprocess.STDOUT)
        deadline = time.time() + start_seconds
        while time.time() < deadline:
            m = re.search(listening, self.log_path.read_text())
            if m:
                self.port = int(m.group(1))
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        self.stop()
        raise DidNotStart(name, self.log_path.read_text())

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc.poll() is None

    def cpu_ns(self):
        return schedstat_ns(self.pid)

    def status_kib(self, field):
        return status_kib(self.pid, field)

    def stop(self):
        """SIGTERM, then SIGKILL after stop_seconds; closes its output."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(self.stop_seconds)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.out.close()


def start_or_exit(prefix, *args, **kw):
    """A Server (same arguments), or the driver's exit naming it and its output."""
    try:
        return Server(*args, **kw)
    except DidNotStart as e:
        sys.exit(f"{prefix}: {e}")


def measure_fresh(prefix, rnd, name, argv, log_path, pin, measure, log):
    """Round `rnd` of server `name` in an interleaved run: a fresh server (the driver exits
    when it does not start), measure(server), the server stopped. A load that fails or
    times out is logged and gives None: the round goes on with the next server."""
    server = start_or_exit(prefix, name, argv, log_path, pin)
    try:
        return measure(server)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        log(f"round {rnd} {name}: FAILED: {e}")
        return None
    finally:
        server.stop()


# ---------------------------------------------------------------------------- the machine and the figures

def cpu_model(unknown="unknown"):
    """The CPU's model name from /proc/cpuinfo, or `unknown`."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return unknown


def first_line(argv, missing="?"):
    """The first line a command prints, or `missing` when it prints none or cannot run."""
    try:
        out = subprocess.run(argv, capture_output=True, text=True).stdout.strip().splitlines()
        return out[0] if out else missing
    except OSError:
        return missing


def machine(swift_path, cc):
    """Cores, kernel, CPU, the Swift toolchain, libuv and the C compiler (for the report's
    Machine section and the samples file)."""
    return {
        "nproc": os.cpu_count(),
        "kernel": platform.release(),
        "cpu": cpu_model(),
        "swift": first_line([swift_path, "--version"]),
        "libuv": subprocess.run(["pkg-config", "--modversion", "libuv"], capture_output=True, text=True).stdout.strip(),
        "cc": first_line([cc, "--version"], cc),
    }


def loadavg(places=1):
    """The 1, 5 and 15 minute load averages, `places` decimals each."""
    return " ".join(f"{x:.{places}f}" for x in os.getloadavg())


def median(values):
    """The median of the values that are not None; None when there are none."""
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def medians(samples):
    """{server: {figure: median over its rounds}} of {server: [one dict of figures a round]}."""
    return {name: {k: statistics.median([s[k] for s in ss if k in s]) for k in ss[0]}
            for name, ss in samples.items() if ss}


def medians_table(metrics, med, names, rounds, fmt):
    """The Markdown table of the medians over `rounds` rounds: a row a server of `names`
    that has them, a column a figure of `metrics`, each shown by fmt(key, value)."""
    lines = [f"### Medians over {rounds} rounds",
             "",
             "| server | " + " | ".join(h for _, h, _, _ in metrics) + " |",
             "|---|" + "---:|" * len(metrics)]
    for name in names:
        if name in med:
            lines.append(f"| {name} | " + " | ".join(fmt(k, med[name].get(k)) for k, _, _, _ in metrics) + " |")
    return lines


def fmt(metrics, key, value):
    """A figure as its (key, header, better, format) row in `metrics` says; a None format
    is KiB shown in MiB."""
    if value is None:
        return "-"
    for k, _, _, f in metrics:
        if k == key:
            return f"{value / 1024:.1f}" if f is None else f.format(value)
    return f"{value:.2f}"


def chart_axis(largest):
    """The top of a chart's value axis above `largest` (with a tenth to spare) and its step:
    a round number, at most six steps."""
    top = largest * 1.1
    mag = 10 ** math.floor(math.log10(top))
    step = next(s * mag for s in (0.2, 0.25, 0.5, 1, 2, 2.5, 5, 10) if top / (s * mag) <= 6)
    return math.ceil(top / step) * step, step


# ---------------------------------------------------------------------------- SVG charts

def svg_start(width, height, title_x, title):
    """The opening of a chart: the SVG element (sans-serif, 12 px), a white ground and the
    title (15 px) at x = title_x on the first line."""
    return [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
            f'font-size="12">',
            f'<rect width="{width}" height="{height}" fill="white"/>',
            f'<text x="{title_x}" y="22" font-size="15">{title}</text>']


def svg_legend(x, y, names, colors):
    """One swatch and name a line, 20 px apart, from (x, y) down; colors[i] is names[i]'s."""
    out = []
    for i, (name, color) in enumerate(zip(names, colors)):
        ly = y + i * 20
        out.append(f'<rect x="{x}" y="{ly}" width="14" height="14" fill="{color}"/>')
        out.append(f'<text x="{x + 20}" y="{ly + 12}">{name}</text>')
    return out
