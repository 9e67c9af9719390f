"""Log parsing speed and memory: kb's streaming reader against `grep -c` on the
same generated server log (real sglang and vLLM line formats, repeated).

    python benchmarks/log_parse.py [--size-mb 1024] [--engine sglang|vllm]

Prints a table; exits 0. The log is generated under a temp dir and removed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "tests" / "data" / "samples"
SOURCES = {"sglang": SAMPLES / "sglang_logs" / "src-sglang-0.5.5_deepseek-v3_tp8_rtx-pro-6000.log",
           "vllm": SAMPLES / "vllm_logs" / "src-vllm-0.11.0_v1_llama-3.1-70b_tp4_eagle3_ansi-prefix.log"}
NEEDLE = {"sglang": " batch", "vllm": "Avg prompt throughput"}


def generate(path: Path, source: Path, needle: str, size_mb: int) -> int:
    """The sample once (start-up lines, warnings), then its periodic stats lines
    repeated, as a long-running server's log is."""
    head = source.read_bytes()
    block = b"".join(ln for ln in head.splitlines(keepends=True) if needle.encode() in ln) or head
    return repeated(path, block, size_mb * 2**20, head)


def repeated(path: Path, unit: bytes, size: int, head: bytes = b"") -> int:
    """Write `head`, then `unit` over and over (in ~4 MiB writes) until `size` bytes; the bytes written."""
    chunk = unit * max(1, 4 * 2**20 // len(unit))
    with open(path, "wb") as fh:
        fh.write(head)
        written = len(head)
        while written < size:
            fh.write(chunk)
            written += len(chunk)
    return written


CHILD = """
import resource, sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
from ingest.run import read_run
t = time.perf_counter()
ev = read_run([Path({path!r})])
dt = time.perf_counter() - t
tr = ev.traces[0]
print(dt, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, tr.stats.get("samples"), len(tr.samples))
"""


def run_kb(path: Path) -> tuple[float, int, int, int]:
    out = subprocess.run([sys.executable, "-c", CHILD.format(root=str(ROOT), path=str(path))],
                         capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), int(out[1]), int(out[2]), int(out[3])


def run_grep(path: Path, needle: str) -> tuple[float, int]:
    t = time.perf_counter()
    out = subprocess.run(["grep", "-c", needle, str(path)], capture_output=True, text=True).stdout
    return time.perf_counter() - t, int(out.strip() or 0)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--engine", choices=sorted(SOURCES), default="sglang")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        log = Path(d) / "server.log"
        size = generate(log, SOURCES[args.engine], NEEDLE[args.engine], args.size_mb)
        mb = size / 2**20
        kb_s, rss_kb, samples, kept = run_kb(log)
        grep_s, grep_n = run_grep(log, NEEDLE[args.engine])
    print(f"generated {args.engine} log: {mb:,.0f} MB ({SOURCES[args.engine].name} repeated)")
    print(f"{'tool':<22}{'seconds':>10}{'MB/s':>10}{'peak RSS MB':>14}{'lines counted':>16}")
    print(f"{'kb read_run':<22}{kb_s:>10.1f}{mb / kb_s:>10.1f}{rss_kb / 1024:>14.0f}{samples:>16,}")
    print(f"{'grep -c':<22}{grep_s:>10.1f}{mb / grep_s:>10.1f}{'-':>14}{grep_n:>16,}")
    print(f"kb / grep time ratio: {kb_s / grep_s:.1f}x; samples kept in memory: {kept:,} (of {samples:,})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
