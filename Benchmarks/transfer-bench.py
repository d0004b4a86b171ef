#!/usr/bin/env python3
"""Benchmarks/transfer: a 1 GiB transfer against the raw stream echo, per backend.

(This is the body of Benchmarks/transfer, which installs what is missing first; run that.)

What it does:
- Builds in release, from the root package: transfer-server, transfer-client, echo-server;
  and with $BENCH_CC -O2 the load generator into Benchmarks/.build/c/ (as Benchmarks/run).
- Makes one 1 GiB file (TRANSFER_BYTES), a periodic pattern, in a temporary folder under
  TRANSFER_DIR (default /var/tmp); the server's --dir is a fresh folder next to it, so
  both are on the same filesystem. Its SHA-256 and its transfer digests (Python's
  hashlib and libxxhash: the SHA-256 of its 64 KiB leaves' SHA-256s, or of their
  XXH3-128 digests) are the expected ones: tools of protocol version 1 print the first,
  version 2 the second, version 3 the third (its default leaf digest).
  The file is written and fsynced once; the sender then reads it from the page cache.
- Per round (ROUNDS, default 3), per backend (BACKENDS, default "bsd libuv"), in turn:
    raw       echo-server --mode raw --event-loops 1 under `loadgen stream PORT 65536 2`
              after an unmeasured 0.3 s ping-pong, exactly as Benchmarks/run measures
              `stream`: MiB/s echoed on one connection;
    transfer  a fresh `transfer-server --dir DIR --port 0 --event-loops 1`, then
              `transfer-client send FILE --port P --backend B`: MiB/s = 1 GiB / the
              client's wall time from its start (fork/exec) to its summary line. That time
              covers: the client's start, the connect and offer, the whole transfer
              (chunks of 256 KiB, a 4 MiB window; each 64 KiB leaf hashed once at each end
              as it goes by, on workers; the receiver writes each chunk while a task behind
              it fsyncs the file, its leaf digests and its state record, at least every
              1 MiB, and acknowledges what each sync covered), and the receiver's final
              fsync, its check of the transfer digest from the stored leaf digests and its
              `done` answer. It does not cover the client's shutdown after the summary (up
              to its 1 s grace period). (Tools of protocol version 1 also hashed the whole
              file before sending and the received file after it.)
    shm       the same transfer with the file and --dir on /dev/shm (tmpfs: fsync costs
              nothing), to see what durability on disk costs (SHM=0 skips it).
    floor     per round, before the backends: two `openssl dgst -sha256` passes and one
              `dd bs=256k conv=fsync` copy of the file on the same filesystem, pinned (see
              measure_floor): the least any transfer with a whole-file SHA-256 at both
              ends does on the core, network aside. Its MiB/s against raw says whether the
              0.8 target can be met on this machine at all.
    before    with BEFORE_BIN=DIR (an earlier release build's transfer-server and
              transfer-client), the same transfers with those tools in the same round
              (`before`, `before-shm`), so before and after see the same load; the
              earlier build's transfers go first in every other round, since the first
              disk transfer of a round pays for the floor's writeback.
  Server and client (or loadgen) are pinned to one core (CPU, default 0), as in
  Benchmarks/run; the sender's transport has its default event loops on that core.
- The phases of each transfer come from the times the client's plain `progress:` lines
  arrive (it flushes each): `setup+hash` = start to the first line (the receiver's resume
  answer, sent once the client connected; with protocol version 1 also after it hashed
  the file); `data` = first line to the line that shows every byte acknowledged (the
  receiver's last fsync'd ack); `final` = that to the summary (the receiver's final sync
  and check, `done`; with version 1 its whole-file SHA-256 too). CPU
  seconds of the client (getrusage of children) and of the server (/proc schedstat).
- Every transfer is checked: the client's summary sha256 and the server's `received` line
  must match the expected SHA-256, the received file must have the full size.
- Prints progress to standard error, writes results/transfer.md (medians over rounds,
  the ratio transfer/raw per backend with the lowest and highest ratio of one round, the
  target >= 0.8 met or missed, the phases) and results/transfer-samples.json.
"""

import ctypes
import hashlib
import json
import os
import platform
import re
import resource
import shutil
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
BACKENDS = os.environ.get("BACKENDS", "bsd libuv").split()
CPU = os.environ.get("CPU", "0")
SECONDS_PER_LOAD = float(os.environ.get("SECONDS_PER_LOAD", "2"))
TRANSFER_BYTES = int(os.environ.get("TRANSFER_BYTES", str(1 << 30)))
TRANSFER_DIR = os.environ.get("TRANSFER_DIR", "/var/tmp")
SHM = os.environ.get("SHM", "1") != "0" and Path("/dev/shm").is_dir()
CC = benchlib.c_compiler()
SWIFT_BUILD_FLAGS = os.environ.get("SWIFT_BUILD_FLAGS", "").split()
OUT_NAME = os.environ.get("OUT_NAME", "transfer")
# A folder with an earlier build's transfer-server and transfer-client (release), to
# measure interleaved with this one: kinds `before` (disk) and `before-shm`. Tools of
# protocol version 1 print the file's SHA-256, later ones its transfer digest.
BEFORE_BIN = os.environ.get("BEFORE_BIN")
PIN = benchlib.pin(CPU)
MIB = 1 << 20
log = benchlib.logger("transfer")
sh = benchlib.sh


def swift():
    return benchlib.swift("transfer")


def build():
    flags = ["-c", "release", *SWIFT_BUILD_FLAGS]
    if not os.environ.get("NO_BUILD"):
        for product in ["transfer-server", "transfer-client", "echo-server"]:
            log(f"building {product} (release)")
            sh([swift(), "build", *flags, "--product", product], cwd=ROOT, stdout=sys.stderr)
    bin_dir = Path(sh([swift(), "build", *flags, "--show-bin-path"], cwd=ROOT, capture_output=True).stdout.strip())
    CBIN.mkdir(parents=True, exist_ok=True)
    if not os.environ.get("NO_BUILD") or not (CBIN / "loadgen").exists():
        log(f"building loadgen ({CC} -O2)")
        benchlib.build_loadgen(CC)
    for name in ["transfer-server", "transfer-client", "echo-server"]:
        if not (bin_dir / name).exists():
            sys.exit(f"transfer: {bin_dir / name} is missing (run without NO_BUILD)")
    return bin_dir


# ---------------------------------------------------------------------------- processes

def start_server(name, argv, log_path):
    """A server pinned with PIN (benchlib.Server: waits for its `listening on HOST:PORT`
    line); the run stops when one does not start."""
    return benchlib.start_or_exit("transfer", name, argv, log_path, PIN, stop_seconds=10)


def loadgen(*args, timeout=120):
    return benchlib.loadgen(PIN + [str(CBIN / "loadgen")], *args, timeout=timeout)


def measure_raw(bin_dir, backend, work):
    argv = [str(bin_dir / "echo-server"), "--backend", backend, "--mode", "raw",
            "--port", "0", "--event-loops", "1", "--grace-period", "0"]
    server = start_server(f"echo-server {backend}", argv, work / "echo-server.log")
    try:
        loadgen("pingpong", server.port, 1, 64, 0.3)  # warm-up, not measured
        r = loadgen("stream", server.port, 65536, SECONDS_PER_LOAD)
        return {"mibps": float(r["mibps"])}
    finally:
        server.stop()


LEAF = 64 << 10


class _XXH128(ctypes.Structure):
    _fields_ = [("low64", ctypes.c_uint64), ("high64", ctypes.c_uint64)]


_libxxhash = ctypes.CDLL("libxxhash.so.0")  # libxxhash0, which scripts/ensure-deps installs
_libxxhash.XXH3_128bits.restype = _XXH128
_libxxhash.XXH3_128bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]


def xxh3_leaf_digest(leaf):
    """A leaf digest of protocol version 3's default: XXH3-128 in canonical (big-endian)
    form, then 16 zero bytes (TransferLeafDigest)."""
    h = _libxxhash.XXH3_128bits(leaf, len(leaf))
    return h.high64.to_bytes(8, "big") + h.low64.to_bytes(8, "big") + bytes(16)


def transfer_digest(part, leaves, xxh3_leaves):
    """Appends the digest of each 64 KiB leaf of `part` (a multiple of the leaf size, or
    the file's end) to `leaves` (SHA-256, protocol version 2, and version 3's
    `--leaf-digest sha256`) and to `xxh3_leaves` (version 3's default): the transfer
    digest is the SHA-256 of one list (TransferChunkDigest)."""
    for start in range(0, len(part), LEAF):
        leaf = part[start:start + LEAF]
        leaves.append(hashlib.sha256(leaf).digest())
        xxh3_leaves.append(xxh3_leaf_digest(leaf))


def make_file(folder):
    """A TRANSFER_BYTES file of a periodic pattern (a 1 MiB block, each block's first 8
    bytes its index), fsynced; returns its path, SHA-256 hex and transfer digests hex
    (what the tools print since protocol version 2: SHA-256 leaves, then XXH3-128's)."""
    path = Path(folder) / "transfer-bench.bin"
    block = bytearray((i * 7 + (i >> 8)) & 0xFF for i in range(MIB))
    hasher = hashlib.sha256()
    leaves = []
    xxh3_leaves = []
    with open(path, "wb") as f:
        written = 0
        index = 0
        while written < TRANSFER_BYTES:
            block[0:8] = index.to_bytes(8, "little")
            part = bytes(block[: min(MIB, TRANSFER_BYTES - written)])
            f.write(part)
            hasher.update(part)
            transfer_digest(part, leaves, xxh3_leaves)
            written += len(part)
            index += 1
        f.flush()
        os.fsync(f.fileno())
    return (path, hasher.hexdigest(), hashlib.sha256(b"".join(leaves)).hexdigest(),
            hashlib.sha256(b"".join(xxh3_leaves)).hexdigest())


def measure_floor(file, parent):
    """What any transfer of `file` with a whole-file SHA-256 at both ends must do on the
    one core, without the network: two SHA-256 passes over the file (`openssl dgst
    -sha256`, OpenSSL's SHA-NI code, as fast as swift-crypto's BoringSSL here) and one copy
    of it into a new file on the receiver's filesystem (`dd bs=256k conv=fsync`: read from
    the page cache, written, fsynced once). Pinned like the rest. Its MiB/s is a ceiling:
    a transfer also copies every byte through loopback and syncs more often."""
    def timed(argv):
        t = time.monotonic()
        r = subprocess.run(PIN + argv, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed: {r.stderr.strip()}")
        return time.monotonic() - t
    hash_s = timed(["openssl", "dgst", "-sha256", str(file)])
    copy = Path(parent) / "floor-copy.bin"
    try:
        copy_s = timed(["dd", f"if={file}", f"of={copy}", "bs=256k", "conv=fsync", "status=none"])
    finally:
        copy.unlink(missing_ok=True)
    floor_s = 2 * hash_s + copy_s
    return {"mibps": TRANSFER_BYTES / MIB / floor_s, "hash_s": hash_s, "copy_s": copy_s}


def measure_transfer(bin_dir, backend, file, expected, parent, work):
    """`expected`: the hex digests a summary may carry (the file's SHA-256 for tools of
    protocol version 1, its transfer digest for later ones)."""
    """One transfer into a fresh --dir under `parent`; returns its figures."""
    recv = Path(tempfile.mkdtemp(prefix="recv.", dir=parent))
    argv = [str(bin_dir / "transfer-server"), "--dir", str(recv), "--backend", backend,
            "--host", "127.0.0.1", "--port", "0", "--event-loops", "1"]
    server = start_server(f"transfer-server {backend}", argv, work / "transfer-server.log")
    try:
        client_argv = PIN + [str(bin_dir / "transfer-client"), "send", str(file),
                             "--port", str(server.port), "--backend", backend]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        server_cpu0 = server.cpu_ns() / 1e9
        t0 = time.monotonic()
        proc = subprocess.Popen(client_argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        t_first = t_all = t_summary = None
        summary = None
        lines = []
        for line in proc.stdout:
            now = time.monotonic()
            lines.append(line.rstrip("\n"))
            if line.startswith("progress: "):
                if t_first is None:
                    t_first = now
                m = re.match(r"progress: (\d+) of (\d+) bytes", line)
                if m and m.group(1) == m.group(2) and t_all is None:
                    t_all = now
            elif line.startswith("sent "):
                t_summary = now
                summary = line.strip()
        err = proc.stderr.read()
        proc.wait()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        server_cpu = server.cpu_ns() / 1e9 - server_cpu0
        if proc.returncode != 0 or summary is None:
            raise RuntimeError(f"transfer-client ({backend}) failed ({proc.returncode}):\n" + "\n".join(lines) + "\n" + err)
        m = re.match(r"sent (\d+) bytes, resent (\d+) bytes, resumes (\d+), sha256 ([0-9a-f]{64})$", summary)
        if not m or m.group(4) not in expected or int(m.group(1)) != TRANSFER_BYTES:
            raise RuntimeError(f"unexpected summary: {summary!r} (expected {TRANSFER_BYTES} bytes, sha256 one of {expected})")
        expected = m.group(4)
        # The server's `received` line comes once the file is complete and checked.
        deadline = time.time() + 10
        while expected not in Path(server.log_path).read_text() and time.time() < deadline:
            time.sleep(0.02)
        if expected not in Path(server.log_path).read_text():
            raise RuntimeError(f"the server did not report {expected}:\n{Path(server.log_path).read_text()}")
        received = recv / file.name
        if received.stat().st_size != TRANSFER_BYTES:
            raise RuntimeError(f"{received} has {received.stat().st_size} bytes")
        wall = t_summary - t0
        return {
            "mibps": TRANSFER_BYTES / MIB / wall,
            "wall_s": wall,
            "setup_hash_s": (t_first or t_summary) - t0,
            "data_s": (t_all or t_summary) - (t_first or t0),
            "final_s": t_summary - (t_all or t_summary),
            "client_cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "server_cpu_s": server_cpu,
            "resumes": int(m.group(3)),
            "resent": int(m.group(2)),
        }
    finally:
        server.stop()
        shutil.rmtree(recv, ignore_errors=True)


# ---------------------------------------------------------------------------- report

def fs_type(path):
    """The filesystem type of `path` (findmnt; `stat -f` names ext4 "ext2/ext3")."""
    for argv in (["findmnt", "-no", "FSTYPE", "-T", str(path)], ["stat", "-f", "-c", "%T", str(path)]):
        try:
            return sh(argv, capture_output=True).stdout.split("\n")[0].strip()
        except (subprocess.CalledProcessError, FileNotFoundError):
            continue
    return "?"


def machine():
    return f"{os.cpu_count()} cores, {benchlib.cpu_model('?')}, Linux {platform.release()}"


def med(samples, kind, backend, key):
    return benchlib.median([s[key] for s in samples if s["kind"] == kind and s["backend"] == backend])


def round_ratios(samples, kind, backend):
    out = []
    for r in sorted({s["round"] for s in samples}):
        a = [s["mibps"] for s in samples if s["kind"] == kind and s["backend"] == backend and s["round"] == r]
        b = [s["mibps"] for s in samples if s["kind"] == "raw" and s["backend"] == backend and s["round"] == r]
        if a and b:
            out.append(a[0] / b[0])
    return out


def report(samples, info):
    kinds = ["transfer"] + (["shm"] if SHM else [])
    shm_note = f"`shm`: both on /dev/shm ({info['shm_fs']}); " if SHM else ""
    lines = [f"# Transfer against raw stream echo ({info['date']})", "",
             f"`Benchmarks/transfer`, {ROUNDS} round(s), {info['machine']}; "
             f"{'server and client pinned to CPU ' + CPU if CPU else 'not pinned'}. "
             f"{TRANSFER_BYTES / MIB:.0f} MiB file and server --dir on {info['fs']} ({TRANSFER_DIR}); "
             f"{shm_note}{info['load']}. {info['note']}", "",
             "MiB/s: raw = loadgen `stream` (64 KiB writes, echoed bytes, 2 s); transfer = file size / "
             "client wall time from start to its summary line (the transfer, each 64 KiB leaf hashed once at each "
             "end, with fsyncs behind the receiver's writes, at least one per MiB, each acknowledged; the "
             "receiver's final sync and its check of the transfer digest from the stored leaf digests).", "",
             "| backend | raw MiB/s | transfer MiB/s | transfer / raw | rounds | shm MiB/s | shm / raw | rounds |",
             "|---|---:|---:|---:|---|---:|---:|---|"]
    for b in BACKENDS:
        raw = med(samples, "raw", b, "mibps")
        row = [b, f"{raw:.0f}"]
        for k in ["transfer", "shm"]:
            if k not in kinds:
                row += ["-", "-", "-"]
                continue
            v = med(samples, k, b, "mibps")
            rr = round_ratios(samples, k, b)
            row += [f"{v:.0f}", f"{v / raw:.2f}", f"{min(rr):.2f} to {max(rr):.2f}"]
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "The floor: what any transfer with a whole-file SHA-256 at both ends must do on the one core, "
              "without the network (see measure_floor: two `openssl dgst -sha256` passes and one `dd conv=fsync` "
              "copy of the file), as MiB/s of the file; a ceiling for every transfer, not only this one:", "",
              "| where | SHA-256 s | copy + fsync s | floor MiB/s | floor / raw bsd | floor / raw libuv | bsd transfer / floor | libuv transfer / floor |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for k, fk in [("transfer", "floor")] + ([("shm", "floor-shm")] if SHM else []):
        fl = med(samples, fk, "-", "mibps")
        cells = ["disk" if k == "transfer" else "/dev/shm", f"{med(samples, fk, '-', 'hash_s'):.2f}",
                 f"{med(samples, fk, '-', 'copy_s'):.2f}", f"{fl:.0f}"]
        for b in ["bsd", "libuv"]:
            raw = med(samples, "raw", b, "mibps")
            cells.append(f"{fl / raw:.2f}" if raw else "-")
        for b in ["bsd", "libuv"]:
            v = med(samples, k, b, "mibps")
            cells.append(f"{v / fl:.2f}" if v else "-")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Against the copy alone (`dd bs=256k conv=fsync` of the file on the same filesystem, no "
              "hashing, no network: MiB/s of the file):", "",
              "| backend | where | dd MiB/s | build | transfer MiB/s | transfer / dd |", "|---|---|---:|---|---:|---:|"]
    for b in BACKENDS:
        for k, fk, where in [("transfer", "floor", "disk"), ("shm", "floor-shm", "/dev/shm")]:
            if k not in kinds:
                continue
            dd = TRANSFER_BYTES / MIB / med(samples, fk, "-", "copy_s")
            for kk, build_name in [(k, "this"), ("before" if k == "transfer" else "before-shm", "before")]:
                v = med(samples, kk, b, "mibps")
                if v:
                    lines.append(f"| {b} | {where} | {dd:.0f} | {build_name} | {v:.0f} | {v / dd:.2f} |")
    if BEFORE_BIN:
        lines += ["", f"Before and after, interleaved (before: {BEFORE_BIN}), medians:", "",
                  "| backend | where | before MiB/s | before / raw | after MiB/s | after / raw | after / before |",
                  "|---|---|---:|---:|---:|---:|---:|"]
        for b in BACKENDS:
            raw = med(samples, "raw", b, "mibps")
            for k, bk, where in [("transfer", "before", "disk"), ("shm", "before-shm", "/dev/shm")]:
                if k not in kinds:
                    continue
                v, w = med(samples, bk, b, "mibps"), med(samples, k, b, "mibps")
                lines.append(f"| {b} | {where} | {v:.0f} | {v / raw:.2f} | {w:.0f} | {w / raw:.2f} | {w / v:.2f} |")
    lines += ["", "Against the issue's target (transfer MiB/s >= 0.8 x raw stream MiB/s, same backend):", "",
              "| target | value | rounds | goal | status |", "|---|---:|---|---|---|"]
    for b in BACKENDS:
        raw = med(samples, "raw", b, "mibps")
        v = med(samples, "transfer", b, "mibps") / raw
        rr = round_ratios(samples, "transfer", b)
        lines.append(f"| {b}: transfer / raw stream | {v:.2f} | {min(rr):.2f} to {max(rr):.2f} | >= 0.8 | {'met' if v >= 0.8 else 'MISSED'} |")
    lines += ["", "Where the time goes (medians, seconds; phases from the times of the client's progress lines, "
              "see transfer-bench.py):", "",
              "| backend | where | wall s | setup + client SHA-256 s | data (to last ack) s | data MiB/s | final (receiver sync + SHA-256) s | client CPU s | server CPU s |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for b in BACKENDS:
        for k in kinds + (["before", "before-shm"] if BEFORE_BIN else []):
            d = med(samples, k, b, "data_s")
            lines.append("| " + " | ".join([
                b, {"transfer": "disk", "shm": "/dev/shm", "before": "disk, before", "before-shm": "/dev/shm, before"}[k],
                f"{med(samples, k, b, 'wall_s'):.2f}", f"{med(samples, k, b, 'setup_hash_s'):.2f}",
                f"{d:.2f}", f"{TRANSFER_BYTES / MIB / d:.0f}", f"{med(samples, k, b, 'final_s'):.2f}",
                f"{med(samples, k, b, 'client_cpu_s'):.2f}", f"{med(samples, k, b, 'server_cpu_s'):.2f}"]) + " |")
    lines += ["", f"Python's hashlib SHA-256 of the same file on this machine: {info['hashlib_s']:.2f} s "
              f"({TRANSFER_BYTES / MIB / info['hashlib_s']:.0f} MiB/s, from the page cache; a reference, not part of any figure).", ""]
    lines += ["Every sample:", "", "| round | backend | kind | MiB/s | wall s | setup+hash s | data s | final s | client CPU s | server CPU s |",
              "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for s in samples:
        if s["kind"] == "raw":
            lines.append(f"| {s['round']} | {s['backend']} | raw | {s['mibps']:.0f} | - | - | - | - | - | - |")
        elif s["kind"].startswith("floor"):
            lines.append(f"| {s['round']} | - | {s['kind']} | {s['mibps']:.0f} | {2 * s['hash_s'] + s['copy_s']:.2f} | "
                         f"SHA-256 {s['hash_s']:.2f} | copy {s['copy_s']:.2f} | - | - | - |")
        else:
            lines.append(f"| {s['round']} | {s['backend']} | {s['kind']} | {s['mibps']:.0f} | {s['wall_s']:.2f} | "
                         f"{s['setup_hash_s']:.2f} | {s['data_s']:.2f} | {s['final_s']:.2f} | {s['client_cpu_s']:.2f} | {s['server_cpu_s']:.2f} |")
    return "\n".join(lines) + "\n"


def main():
    if CPU and not shutil.which("taskset"):
        sys.exit("transfer: taskset not found (util-linux); set CPU= to run unpinned")
    bin_dir = build()
    Path(TRANSFER_DIR).mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="transfer-bench.", dir=TRANSFER_DIR))
    shm_work = Path(tempfile.mkdtemp(prefix="transfer-bench.", dir="/dev/shm")) if SHM else None
    try:
        log(f"making a {TRANSFER_BYTES} byte file in {work} ({fs_type(work)})")
        file, sha, tree, xxh3_tree = make_file(work)
        expected = (sha, tree, xxh3_tree)
        # Python's hashlib (OpenSSL) over the file, from the page cache: a reference speed.
        t = time.monotonic()
        h = hashlib.sha256()
        with open(file, "rb") as f:
            while chunk := f.read(4 * MIB):
                h.update(chunk)
        hashlib_s = time.monotonic() - t
        shm_file = None
        if shm_work:
            shm_file = shm_work / file.name
            shutil.copyfile(file, shm_file)
        load_before = os.getloadavg()[0]
        samples = []
        for r in range(1, ROUNDS + 1):
            for kind, f, parent in [("floor", file, work)] + ([("floor-shm", shm_file, shm_work)] if shm_work else []):
                s = measure_floor(f, parent)
                samples.append({"round": r, "backend": "-", "kind": kind, **s})
                log(f"round {r} {kind:9} {s['mibps']:7.0f} MiB/s  (SHA-256 {s['hash_s']:.2f} s, copy+fsync {s['copy_s']:.2f} s)")
            for b in BACKENDS:
                s = measure_raw(bin_dir, b, work)
                samples.append({"round": r, "backend": b, "kind": "raw", **s})
                log(f"round {r} {b:5} raw      {s['mibps']:7.0f} MiB/s")
                runs = [("transfer", bin_dir, file, work)] + ([("shm", bin_dir, shm_file, shm_work)] if shm_work else [])
                if BEFORE_BIN:
                    before = Path(BEFORE_BIN)
                    earlier = [("before", before, file, work)] + ([("before-shm", before, shm_file, shm_work)] if shm_work else [])
                    # Each build goes first every other round: the first disk transfer of a
                    # round follows the floor's `dd conv=fsync` and pays for its writeback.
                    runs = runs + earlier if r % 2 == 1 else earlier + runs
                for kind, bins, f, parent in runs:
                    s = measure_transfer(bins, b, f, expected, parent, work)
                    samples.append({"round": r, "backend": b, "kind": kind, **s})
                    log(f"round {r} {b:5} {kind:8} {s['mibps']:7.0f} MiB/s  wall {s['wall_s']:.2f} s "
                        f"(setup+hash {s['setup_hash_s']:.2f}, data {s['data_s']:.2f}, final {s['final_s']:.2f}; "
                        f"CPU client {s['client_cpu_s']:.2f}, server {s['server_cpu_s']:.2f})")
        info = {
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "machine": machine(),
            "fs": fs_type(work),
            "shm_fs": fs_type("/dev/shm") if SHM else "-",
            "hashlib_s": hashlib_s,
            "load": f"load average {load_before:.2f} at the start, {os.getloadavg()[0]:.2f} at the end",
            "note": os.environ.get("TRANSFER_NOTE", ""),
        }
        text = report(samples, info)
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / f"{OUT_NAME}.md").write_text(text)
        (RESULTS / f"{OUT_NAME}-samples.json").write_text(json.dumps({"info": info, "samples": samples}, indent=1) + "\n")
        print(text)
        log(f"wrote {RESULTS / (OUT_NAME + '.md')}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if shm_work:
            shutil.rmtree(shm_work, ignore_errors=True)


if __name__ == "__main__":
    main()
