"""Bounded work on big and hostile inputs: time and peak RSS of kb reading each, in a
fresh interpreter (resource.getrusage), next to the size of the input and the rate
(MB/s) it was read at. Peak RSS that does not grow with the input is flat memory.

    python benchmarks/bounds.py [--log-gb 1] [--line-mb 512] [--jsonl-mb 300]

    --log-gb 10   a 10 GB sglang server log (its stats and access-log lines repeated,
                  as a long-running server writes them); needs 11 GB of free disk
                  (checked) under $TMPDIR

Cases: the server log; one line of --line-mb MB without a newline; a JSON-lines file
larger than the whole-document limit (streamed); JSON nested 200,000 deep; a 50 MB
markdown file; a 1 MiB markdown table (the findings limit); a directory of symlink
loops; a FIFO and /dev/zero. Prints a table; exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from log_parse import repeated  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "tests" / "data" / "samples"
LOG = SAMPLES / "sglang_logs" / "src-sglang-0.5.5_deepseek-v3_tp8_rtx-pro-6000.log"
SWEEP = SAMPLES / "sglang_bench_jsonl" / "run-sglang-0.5.5_sweep_c1-32-128-256_server-info.jsonl"

CHILD = """
import resource, sys, time, json
sys.path.insert(0, {root!r})
from pathlib import Path
t = time.perf_counter()
try:
{body}
except Exception as e:  # a KbError is the expected way to refuse
    out = f"{{type(e).__name__}}: {{str(e)[:90]}}"
print(json.dumps([time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024, out]))
"""

READ_RUN = """    from ingest.run import read_run
    ev = read_run([Path(p) for p in {paths!r}])
    out = "; ".join(f.get("yielded") or f.get("skipped") or "" for f in ev.files)[:90]"""
INGEST = """    from ingest.detect import load_findings
    from kb.store import Store
    import tempfile
    rep = Store(Path(tempfile.mkdtemp())).sync(load_findings, [Path({path!r})])
    out = f"{{sum(len(f.records) for f in rep.files)}} records"
"""


def child(body: str, timeout: float = 7200) -> tuple[float, int, str]:
    proc = subprocess.run([sys.executable, "-c", CHILD.format(root=str(ROOT), body=body)], capture_output=True,
                          text=True, timeout=timeout)
    if proc.returncode:
        return 0.0, 0, f"CRASHED: {proc.stderr.strip().splitlines()[-1][:80]}"
    seconds, rss, out = json.loads(proc.stdout.strip().splitlines()[-1])
    return seconds, rss, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--log-gb", type=float, default=1.0, help="server log size in GB (10 for the full test)")
    ap.add_argument("--line-mb", type=int, default=512, help="size of the line without a newline, MB")
    ap.add_argument("--jsonl-mb", type=int, default=300, help="JSON-lines file size, MB (> 256 MB is streamed)")
    args = ap.parse_args()
    rows = []

    def row(name: str, size: int, result: tuple[float, int, str]) -> None:
        rows.append((name, size, *result))
        s, rss, out = result
        mbs = size / 2**20 / s if size and s else 0
        rate = f"{mbs:,.0f}" if mbs >= 10 else f"{mbs:.1f}" if mbs else "-"
        print(f"{name:<28}{size / 2**20:>12,.0f}{s:>10.1f}{rate:>8}{rss:>10,}  {out}", flush=True)

    with tempfile.TemporaryDirectory(prefix="kb-bounds-") as d:
        d = Path(d)
        # the inputs are written one at a time and deleted after use: the largest must fit
        need = max(args.log_gb * 2**30, args.line_mb * 2**20, args.jsonl_mb * 2**20) + 2**30
        free = shutil.disk_usage(d).free
        if free < need:
            print(f"{d}: {free / 2**30:.1f} GiB free, {need / 2**30:.1f} GiB needed; use a smaller --log-gb "
                  f"or TMPDIR=elsewhere")
            return 1
        print(f"{'input':<28}{'size MB':>12}{'seconds':>10}{'MB/s':>8}{'RSS MB':>10}  result")
        base = d / "tiny.log"
        base.write_bytes(LOG.read_bytes())
        row("baseline: one real log", base.stat().st_size, child(READ_RUN.format(paths=[str(base)])))
        base.unlink()

        p = d / "server.log"
        text = LOG.read_bytes()
        # what a serving server keeps writing: its stats lines (read by the log parsers
        # alone) and its access-log lines (read by every line parser, the slower path)
        stats = b"".join(ln for ln in text.splitlines(keepends=True) if b" batch" in ln or b'HTTP/1.1"' in ln)
        size = repeated(p, stats, int(args.log_gb * 2**30), head=text)
        row(f"server log {args.log_gb:g} GB", size, child(READ_RUN.format(paths=[str(p)])))
        p.unlink()

        p = d / "one-line.log"
        size = repeated(p, b"Decode batch, #running-req: 1, x" * 8, args.line_mb * 2**20)
        row("one line, no newline", size, child(READ_RUN.format(paths=[str(p)])))
        p.unlink()

        p = d / "sweep.jsonl"
        size = repeated(p, SWEEP.read_bytes(), args.jsonl_mb * 2**20)
        row("JSON lines (streamed)", size, child(READ_RUN.format(paths=[str(p)])))
        p.unlink()

        p = d / "deep.json"
        p.write_text('{"a":' * 200_000 + "1" + "}" * 200_000)
        row("JSON nested 200,000 deep", p.stat().st_size, child(READ_RUN.format(paths=[str(p)])))

        p = d / "big.md"
        with open(p, "wb") as fh:
            fh.write(b"# Notes\n\n" + b"prose " * 100_000)
            fh.truncate(50 * 2**20)
        row("markdown 50 MB", p.stat().st_size, child(INGEST.format(path=str(p))))

        p = d / "table.md"
        rows_ = "".join(f"| tput {i} | {i} | {i + 1} | tok/s | {i % 512} | 1 |\n" for i in range(40_000))
        text = "# Sweep\n\n| Metric | Before | After | Unit | Concurrency | Runs |\n|---|---|---|---|---|---|\n" + rows_
        p.write_text(text[: 2**20 - 100].rsplit("\n", 1)[0] + "\n")
        row("markdown table at the cap", p.stat().st_size, child(INGEST.format(path=str(p))))

        loops = d / "loops"
        (loops / "sub").mkdir(parents=True)
        (loops / "sub" / "up").symlink_to(loops, target_is_directory=True)
        (loops / "self").symlink_to(loops / "self")
        (loops / "a").symlink_to(loops / "b")
        (loops / "b").symlink_to(loops / "a")
        row("symlink loops", 0, child(READ_RUN.format(paths=[str(loops)])))

        fifo = d / "fifo"
        os.mkfifo(fifo)
        row("FIFO and /dev/zero", 0, child(READ_RUN.format(paths=[str(fifo), "/dev/zero"])))
    return 0


if __name__ == "__main__":
    t = time.perf_counter()
    code = main()
    print(f"total {time.perf_counter() - t:.0f} s")
    sys.exit(code)
