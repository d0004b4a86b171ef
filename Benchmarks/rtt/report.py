#!/usr/bin/env python3
"""Benchmarks/rtt's report: the table of results/rtt.md from rtt/run's measurements, and
each capture's packets as a timeline (results/<config>.txt). Run by rtt/run; its header
says what is measured."""
import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
from pathlib import Path


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def machine():
    pretty = "?"
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                pretty = line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return f"{pretty}, {os.cpu_count()} cores, kernel {os.uname().release}"


def timeline(pcap, port, security, rtt, client_addr):
    """The packets of one capture, one line each: time since the SYN in ms and in round
    trips, direction, TCP flags and payload, and what tshark makes of it (HTTP/2 frames on
    the h2c port; TLS records otherwise)."""
    fields = ["frame.time_relative", "ip.src", "tcp.len", "tcp.flags.str", "_ws.col.Protocol", "_ws.col.Info"]
    command = ["tshark", "-r", str(pcap), "-o", "gui.column.format:\"Info\",\"%i\"", "-d", f"tcp.port=={port},{'tls' if security == 'tls' else 'http2'}", "-T", "fields", "-E", "separator=\t"]
    for field in fields:
        command += ["-e", field]
    out = subprocess.run(command, capture_output=True, text=True).stdout
    lines = [f"{'ms':>8} {'RTT':>5}  {'dir':<5} {'len':>5}  {'flags':<12} what"]
    for row in out.splitlines():
        parts = row.split("\t")
        if len(parts) < 6:
            continue
        t, src, length, flags, proto, info = parts[:6]
        ms = float(t) * 1000
        direction = "c->s" if src == client_addr else "s->c"
        info = re.sub(r"\s+", " ", info)
        lines.append(f"{ms:8.2f} {ms / rtt:5.2f}  {direction:<5} {length:>5}  {flags.replace(chr(0xb7), '.'):<12} {proto} {info}")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ping", required=True)
    parser.add_argument("--calls", required=True)
    parser.add_argument("--configs", required=True)
    parser.add_argument("--link", required=True)
    parser.add_argument("--results", required=True)
    parser.add_argument("--capture", default="1")
    parser.add_argument("--priority", default="normal")
    parser.add_argument("--load-before", default="?")
    args = parser.parse_args()

    ping = Path(args.ping).read_text()
    pings = [float(m) for m in re.findall(r"time=([\d.]+) ms", ping)]
    # ping's summary has the mean to the microsecond; each reply's time has 3 digits only.
    summary = re.search(r"= ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms", ping)
    rtt = float(summary.group(2)) if summary else statistics.median(pings)
    configs = {}
    for line in Path(args.configs).read_text().splitlines():
        name, backend, security, port = line.split()
        configs[name] = (backend, security, int(port))
    runs = [json.loads(line) for line in Path(args.calls).read_text().splitlines()]
    results = Path(args.results)

    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load = Path("/proc/loadavg").read_text().split()[:3]
    out = [
        "# Calls over a 20 ms round trip",
        "",
        f"- When: {now}; machine: {machine()}; load average at the start {args.load_before}, at the end {' '.join(load)} "
        f"(other builds on the machine).",
        f"- Link: {args.link}. Ping over it before the calls: mean {rtt:.3f} ms "
        f"(min {min(pings):.1f}, max {max(pings):.1f}, {len(pings)} pings); **1 RTT = {rtt:.3f} ms** below.",
        "- Each round: a fresh `rtt-probe calls` process makes one `CallChannel` and calls the unary echo "
        "one after another (64-byte message); the first call's time includes the connect. "
        f"Server and client on the same backend, one event loop each, release build, {args.priority} priority; "
        f"the link's relay (if any) at real-time priority.",
        "",
        "| configuration | rounds | first call ms: median (min–max) | first call RTT | calls 2..N ms: median (p90, max) | calls 2..N RTT |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, (backend, security, port) in configs.items():
        counted = [r["result"] for r in runs if r["config"] == name and r["round"] > 0]
        if not counted:
            continue
        first = [r["first_ms"] for r in counted]
        rest = [t for r in counted for t in r["rest_ms"]]
        label = f"{backend}, {'TLS 1.3' if security == 'tls' else 'plaintext h2c'}"
        out.append(
            f"| {label} | {len(counted)} | {statistics.median(first):.1f} ({min(first):.1f}–{max(first):.1f}) | "
            f"{statistics.median(first) / rtt:.2f} | {statistics.median(rest):.1f} ({percentile(rest, 90):.1f}, {max(rest):.1f}) | "
            f"{statistics.median(rest) / rtt:.2f} |")
    out.append("")
    if args.capture == "1":
        out.append("Captures (round 0, not counted above; tcpdump on the client's end): ")
        for name, (backend, security, port) in configs.items():
            pcap = results / f"{name}.pcap"
            if not pcap.exists():
                continue
            zero = [r["result"] for r in runs if r["config"] == name and r["round"] == 0]
            text = timeline(pcap, port, security, rtt, "10.213.9.1")
            header = f"# {name}: tcpdump on the client's end; 1 RTT = {rtt:.2f} ms"
            if zero:
                header += f"; this round's first call took {zero[0]['first_ms']:.1f} ms ({zero[0]['first_ms'] / rtt:.2f} RTT)"
            (results / f"{name}.txt").write_text(header + "\n" + text + "\n")
            out.append(f"- `{name}.txt` ({name}.pcap)")
        out.append("")
    (results / "rtt.md").write_text("\n".join(out))
    print("\n".join(out))


if __name__ == "__main__":
    main()
