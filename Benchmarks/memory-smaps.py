#!/usr/bin/env python3
"""Benchmarks/memory-smaps.py: where an echo server's resident pages are, per mapping.

    python3 Benchmarks/memory-smaps.py                   # nio, bsd-raw, libuv-raw, 3 rounds
    ECHO_SERVER=PATH BASELINE_ECHO_SERVER=PATH python3 Benchmarks/memory-smaps.py
    SERVERS="nio bsd-raw" ROUNDS=1 python3 Benchmarks/memory-smaps.py

Runs the same loads as Benchmarks/run (echo-bench.py) against each server in turn,
interleaved over ROUNDS (default 3), a fresh process each time, pinned to CPU (default 0)
with the load generator: an unmeasured 0.3 s ping-pong, then pp1, pp32, stream and a
BURST_CONNS (1000) x 5 burst, SECONDS_PER_LOAD (2) s each. It reads /proc/PID/smaps at
idle (0.3 s after the server says it listens, before any load) and at peak (after the
loads, when VmHWM is read), and sums it per mapped file (the executable, each shared
library) and per kind of anonymous mapping ([heap], [stack], other anonymous):
Rss, Anonymous (copy-on-write pages: relocated data, written .data), and the rest
file-backed. For the executable it also reads /proc/PID/pagemap (root) to say which of its
ELF sections the resident pages belong to, and for .text which Swift modules (from the
symbols' mangled names; `nm`) those pages hold.

Needs the Benchmarks package's nio-echo-server (NIO_ECHO_SERVER, else Benchmarks/.build's
release build) and loadgen (LOADGEN, else Benchmarks/.build/c/loadgen): `Benchmarks/run`
builds both. ECHO_SERVER defaults to the root package's release echo-server. Writes
results/memory-smaps.md (medians over rounds per row) and results/memory-smaps.json.
"""

import bisect
import json
import os
import re
import statistics
import struct
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
ROUNDS = int(os.environ.get("ROUNDS", "3"))
CPU = os.environ.get("CPU", "0")
SECONDS_PER_LOAD = float(os.environ.get("SECONDS_PER_LOAD", "2"))
BURST_CONNS = int(os.environ.get("BURST_CONNS", "1000"))
OUT_NAME = os.environ.get("OUT_NAME", "memory-smaps")
PIN = ["taskset", "-c", CPU] if CPU else []
LOADGEN = os.environ.get("LOADGEN") or str(HERE / ".build" / "c" / "loadgen")
PAGE = os.sysconf("SC_PAGE_SIZE")


def log(*parts):
    print("memory-smaps:", *parts, file=sys.stderr, flush=True)


def servers():
    nio = os.environ.get("NIO_ECHO_SERVER") or str(HERE / ".build" / "release" / "nio-echo-server")
    echo = os.environ.get("ECHO_SERVER") or str(ROOT / ".build" / "release" / "echo-server")
    common = ["--port", "0", "--event-loops", "1", "--grace-period", "0"]
    table = {
        "nio": [nio, "0", "1"],
        "bsd-raw": [echo, "--backend", "bsd", "--mode", "raw", *common],
        "libuv-raw": [echo, "--backend", "libuv", "--mode", "raw", *common],
    }
    base = os.environ.get("BASELINE_ECHO_SERVER")
    if base:
        table["bsd-raw@base"] = [base, *table["bsd-raw"][1:]]
        table["libuv-raw@base"] = [base, *table["libuv-raw"][1:]]
    chosen = os.environ.get("SERVERS", " ".join(table)).split()
    for name in chosen:
        if name not in table:
            sys.exit(f"memory-smaps: unknown server {name!r}; known: {' '.join(table)}")
        if not Path(table[name][0]).is_file():
            sys.exit(f"memory-smaps: {table[name][0]} (for {name}) is not a file")
    if not Path(LOADGEN).is_file():
        sys.exit(f"memory-smaps: no loadgen at {LOADGEN}: run Benchmarks/run once, or set LOADGEN")
    return {name: table[name] for name in chosen}


def loadgen(*args):
    r = subprocess.run(PIN + [LOADGEN, *map(str, args)], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"loadgen {args} failed: {r.stderr.strip()}")


# ------------------------------------------------------------------- /proc readers

def smaps(pid):
    """[(start, end, offset, path, perms, {field: KiB})] for every mapping."""
    maps = []
    head = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) (\S+) ([0-9a-f]+) \S+ \d+\s*(.*)$")
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        m = head.match(line)
        if m:
            maps.append([int(m[1], 16), int(m[2], 16), int(m[4], 16), m[5].strip(), m[3], {}])
        elif line.endswith(" kB"):
            key, value = line.split(":", 1)
            maps[-1][5][key] = int(value.split()[0])
    return maps


def status_kib(pid, field):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def mapping_name(path, exe):
    if path == exe:
        return "(the executable)"
    if not path:
        return "(anonymous)"
    if path.startswith("["):
        return path
    return os.path.basename(path)


def per_mapping(maps, exe):
    """{name: {rss, anon, file, private_dirty, shared}} in KiB."""
    out = defaultdict(lambda: defaultdict(int))
    for start, end, offset, path, perms, f in maps:
        row = out[mapping_name(path, exe)]
        row["rss"] += f.get("Rss", 0)
        row["anon"] += f.get("Anonymous", 0)
        row["file"] += f.get("Rss", 0) - f.get("Anonymous", 0)
        row["shared"] += f.get("Shared_Clean", 0) + f.get("Shared_Dirty", 0)
        row["private_dirty"] += f.get("Private_Dirty", 0)
    return {k: dict(v) for k, v in out.items()}


def resident_pages(pid, maps, path):
    """File offsets (page-aligned) of the pages of `path` present in the process."""
    offsets = []
    with open(f"/proc/{pid}/pagemap", "rb") as pm:
        for start, end, offset, p, perms, f in maps:
            if p != path:
                continue
            n = (end - start) // PAGE
            pm.seek(start // PAGE * 8)
            data = pm.read(n * 8)
            for i in range(n):
                (entry,) = struct.unpack_from("<Q", data, i * 8)
                if entry >> 63 & 1:  # present
                    offsets.append((offset + i * PAGE, "w" in perms))
    return offsets


# ------------------------------------------------------------------- the executable's ELF

class Elf:
    def __init__(self, path):
        self.sections = []  # (file offset, size, name, addr)
        out = subprocess.run(["readelf", "-SW", path], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            m = re.match(r"\s*\[\s*\d+\]\s+(\S+)\s+\S+\s+([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)", line)
            if m and m[1] != "NULL":
                name, addr, off, size = m[1], int(m[2], 16), int(m[3], 16), int(m[4], 16)
                if size and not name.startswith(".debug"):
                    self.sections.append((off, size, name, addr))
        self.sections.sort()
        text = next((s for s in self.sections if s[2] == ".text"), None)
        self.text = text
        self.symbols = []  # (addr, size, module) inside .text
        nm = subprocess.run(["nm", "-S", "--defined-only", path], capture_output=True, text=True).stdout
        for line in nm.splitlines():
            parts = line.split()
            if len(parts) != 4 or parts[2] not in "tTwW":
                continue
            self.symbols.append((int(parts[0], 16), int(parts[1], 16), module_of(parts[3])))
        self.symbols.sort()
        self.starts = [s[0] for s in self.symbols]

    def section_at(self, off):
        for s_off, size, name, addr in self.sections:
            if s_off <= off < s_off + size:
                return name
        return "(between sections)"

    def modules_in_page(self, off):
        """The modules whose code lies in the page at file offset `off` (in .text)."""
        t_off, t_size, _, t_addr = self.text
        lo, hi = off - t_off + t_addr, off - t_off + t_addr + PAGE
        found = defaultdict(int)
        i = max(0, bisect.bisect_right(self.starts, lo) - 1)
        while i < len(self.symbols) and self.symbols[i][0] < hi:
            a, size, mod = self.symbols[i]
            overlap = min(a + size, hi) - max(a, lo)
            if overlap > 0:
                found[mod] += overlap
            i += 1
        return found


SWIFT_MODULE = re.compile(r"^_?\$s(s|(\d+)(\w+))")


def module_of(symbol):
    m = SWIFT_MODULE.match(symbol)
    if not m:
        return "(C, C++ or runtime)"
    if m[1] == "s":
        return "Swift"
    n = int(m[2])
    return m[3][:n]


def exe_breakdown(pid, maps, exe, elf):
    """KiB of the executable resident, per section, and per module inside .text."""
    by_section = defaultdict(int)
    by_module = defaultdict(float)
    for off, writable in resident_pages(pid, maps, exe):
        name = elf.section_at(off)
        if writable:
            name += " (written)" if name in (".data", ".bss", ".got", ".data.rel.ro", ".got.plt") else ""
        by_section[name] += PAGE // 1024
        if name == ".text" and elf.text:
            mods = elf.modules_in_page(off)
            total = sum(mods.values()) or 1
            for mod, b in mods.items():
                by_module[mod] += PAGE / 1024 * b / total
    return dict(by_section), dict(by_module)


# ------------------------------------------------------------------- a run

def one(name, argv, elf_cache):
    log_path = Path(f"/tmp/memory-smaps-{name}.log")
    out = open(log_path, "w+")
    proc = subprocess.Popen(PIN + argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        port = None
        deadline = time.time() + 20
        while time.time() < deadline and port is None:
            m = re.search(r"listening on (?:\S*:)?(\d+)\b", log_path.read_text())
            if m:
                port = int(m[1])
            elif proc.poll() is not None:
                break
            else:
                time.sleep(0.02)
        if port is None:
            sys.exit(f"memory-smaps: {name} did not start:\n{log_path.read_text()}")
        time.sleep(0.3)
        exe = os.readlink(f"/proc/{proc.pid}/exe")
        if exe not in elf_cache:
            elf_cache[exe] = Elf(exe)
        sample = {}
        maps = smaps(proc.pid)
        sample["idle"] = per_mapping(maps, exe)
        sample["idle_exe"] = exe_breakdown(proc.pid, maps, exe, elf_cache[exe])
        loadgen("pingpong", port, 1, 64, 0.3)
        loadgen("pingpong", port, 1, 64, SECONDS_PER_LOAD)
        loadgen("pingpong", port, 32, 64, SECONDS_PER_LOAD)
        loadgen("stream", port, 65536, SECONDS_PER_LOAD)
        loadgen("burst", port, BURST_CONNS, 5)
        maps = smaps(proc.pid)
        sample["peak"] = per_mapping(maps, exe)
        sample["peak_exe"] = exe_breakdown(proc.pid, maps, exe, elf_cache[exe])
        sample["vmhwm"] = status_kib(proc.pid, "VmHWM")
        sample["rss_anon"] = status_kib(proc.pid, "RssAnon")
        sample["rss_file"] = status_kib(proc.pid, "RssFile")
        sample["exe_size"] = os.path.getsize(exe)
        return sample
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        out.close()


def median_rows(samples, key):
    names = sorted({n for s in samples for n in s[key]})
    rows = {}
    for n in names:
        rows[n] = {f: statistics.median(s[key].get(n, {}).get(f, 0) for s in samples)
                   for f in ("rss", "anon", "file", "shared", "private_dirty")}
    return rows


def median_flat(samples, key, index):
    names = sorted({n for s in samples for n in s[key][index]})
    return {n: statistics.median(s[key][index].get(n, 0) for s in samples) for n in names}


def report(all_samples, chosen):
    lines = [f"## Resident pages per mapping (`Benchmarks/memory-smaps.py`)", "",
             f"Generated on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {ROUNDS} interleaved rounds, "
             f"medians; load average at the end: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}. "
             "KiB. *anon* is a mapping's copy-on-write pages (smaps `Anonymous`), *file* the rest "
             "of its `Rss`; *shared* the pages another process maps too (`Shared_*`).", ""]
    lines += ["| server | binary size, bytes | VmHWM KiB | RssAnon KiB | RssFile KiB |", "|---|---:|---:|---:|---:|"]
    for name in chosen:
        s = all_samples[name]
        med = lambda k: statistics.median(x[k] for x in s)
        lines.append(f"| {name} | {s[0]['exe_size']:,} | {med('vmhwm'):,.0f} | {med('rss_anon'):,.0f} | {med('rss_file'):,.0f} |")
    lines.append("")
    for phase in ("idle", "peak"):
        rows = {name: median_rows(all_samples[name], phase) for name in chosen}
        mappings = sorted({m for r in rows.values() for m in r},
                          key=lambda m: -max(r.get(m, {}).get("rss", 0) for r in rows.values()))
        lines += [f"### {phase.capitalize()}: Rss (anon / file) per mapping, KiB", "",
                  "| mapping | " + " | ".join(chosen) + " |", "|---|" + "---:|" * len(chosen)]
        total = {name: [0, 0, 0] for name in chosen}
        for m in mappings:
            cells = []
            for name in chosen:
                r = rows[name].get(m)
                if not r or r["rss"] == 0:
                    cells.append("-")
                    continue
                total[name][0] += r["rss"]
                total[name][1] += r["anon"]
                total[name][2] += r["file"]
                cells.append(f"{r['rss']:,.0f} ({r['anon']:,.0f} / {r['file']:,.0f})")
            if any(c != "-" for c in cells):
                lines.append(f"| {m} | " + " | ".join(cells) + " |")
        lines.append("| **sum** | " + " | ".join(f"**{t[0]:,.0f}** ({t[1]:,.0f} / {t[2]:,.0f})" for t in total.values()) + " |")
        lines.append("")
        lines += [f"### {phase.capitalize()}: the executable's resident KiB per ELF section", "",
                  "| section | " + " | ".join(chosen) + " |", "|---|" + "---:|" * len(chosen)]
        secs = {name: median_flat(all_samples[name], phase + "_exe", 0) for name in chosen}
        for sec in sorted({k for v in secs.values() for k in v}, key=lambda k: -max(v.get(k, 0) for v in secs.values())):
            lines.append(f"| {sec} | " + " | ".join(f"{secs[n].get(sec, 0):,.0f}" if sec in secs[n] else "-" for n in chosen) + " |")
        lines.append("")
        mods = {name: median_flat(all_samples[name], phase + "_exe", 1) for name in chosen}
        lines += [f"### {phase.capitalize()}: resident .text KiB by the module its code belongs to (top 15)", "",
                  "| module | " + " | ".join(chosen) + " |", "|---|" + "---:|" * len(chosen)]
        order = sorted({k for v in mods.values() for k in v}, key=lambda k: -max(v.get(k, 0) for v in mods.values()))
        for mod in order[:15]:
            lines.append(f"| {mod} | " + " | ".join(f"{mods[n].get(mod, 0):,.0f}" for n in chosen) + " |")
        lines.append("")
    return "\n".join(lines)


def main():
    chosen = servers()
    log(f"servers: {' '.join(chosen)}; {ROUNDS} rounds")
    all_samples = {name: [] for name in chosen}
    elf_cache = {}
    for rnd in range(ROUNDS):
        for name, argv in chosen.items():
            log(f"round {rnd + 1}: {name}")
            all_samples[name].append(one(name, argv, elf_cache))
    text = report(all_samples, list(chosen))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{OUT_NAME}.md").write_text(text + "\n")
    (RESULTS / f"{OUT_NAME}.json").write_text(json.dumps(all_samples, indent=1) + "\n")
    print(text)


if __name__ == "__main__":
    main()
