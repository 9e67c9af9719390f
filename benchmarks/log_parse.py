"""Log parsing speed and memory: kb's reader (ingest.run.read_run) against `grep -c` on
the same generated server log, interleaved in one run: a mixed log of real sample lines
(sglang and vLLM stats lines of several versions, uvicorn access lines, start-up lines,
warnings, errors and long lines; see MIX), repeated to the size asked for.

    python benchmarks/log_parse.py [--size-mb 1024] [--runs 3]

Prints wall time and MB/s, CPU time (user + system of all of kb's processes: what a loaded
machine distorts least), the peak RSS of each process (kb reads a large file with two) and
their sum, and the load average before and after. The log is written under a temp dir and removed.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "tests" / "data" / "samples"
SOURCES = {"sglang": SAMPLES / "sglang_logs" / "src-sglang-0.5.5_deepseek-v3_tp8_rtx-pro-6000.log",
           "vllm": SAMPLES / "vllm_logs" / "src-vllm-0.11.0_v1_llama-3.1-70b_tp4_eagle3_ansi-prefix.log"}
NEEDLE = {"sglang": " batch", "vllm": "Avg prompt throughput"}


STATS = ("Decode batch", "Prefill batch", "Avg prompt throughput")
ACCESS = re.compile(rb'INFO: +\S+ - "(?:GET|POST) ')


def pools() -> dict[str, list[bytes]]:
    """Lines of the sample server logs, sorted into stats lines (by engine), access lines,
    the longest lines and everything else (start-up, warnings, errors). Stats and access
    lines come from the `src-` samples (each rendered from one engine release's own format
    strings: sglang 0.3.6, 0.4.6.post5, 0.5.5 incl. EAGLE and PD disaggregation; vLLM 0.6.4.post1
    V0, 0.8.5.post1 V1, 0.11.0 V1 with its coloured prefix, 0.33.0 V1), as a server writes
    them; the rest comes from every sample, pasted excerpts included."""
    out: dict[str, list[bytes]] = {"sglang": [], "vllm": [], "access": [], "other": [], "long": []}
    for f in sorted(SAMPLES.glob("*_logs/*.log")):
        own = f.name.startswith("src-")
        for ln in f.read_bytes().splitlines():
            if b"Decode batch" in ln or b"Prefill batch" in ln:
                kind = "sglang" if own else None
            elif b"Avg prompt throughput" in ln:
                kind = "vllm" if own else None
            elif ACCESS.search(ln):
                kind = "access" if own else None
            else:
                kind = "long" if len(ln) > 2000 else "other" if ln.strip() else None
            if kind:
                out[kind].append(ln)
    return out


# share of lines by kind: a busy server's log is mostly stats and access lines
MIX = (("sglang", 0.46), ("vllm", 0.16), ("access", 0.3789), ("other", 0.001), ("long", 0.0001))


def mixed_unit(lines: int = 20_000, seed: int = 0) -> bytes:
    """`lines` lines drawn from the real samples' lines in the MIX proportions."""
    rnd = random.Random(seed)
    p = pools()
    kinds = [k for k, _ in MIX]
    weights = [w for _, w in MIX]
    return b"".join(rnd.choice(p[k]) + b"\n" for k in rnd.choices(kinds, weights, k=lines))


def generate_mixed(path: Path, size_mb: float, seed: int = 0) -> int:
    """A mixed log of about `size_mb` MiB: one 20,000-line unit of sample lines, repeated."""
    return repeated(path, mixed_unit(seed=seed), int(size_mb * 2**20))


def generate(path: Path, source: Path, needle: str, size_mb: int) -> int:
    """One sample once (start-up lines, warnings), then its periodic stats lines
    repeated, as a long-running server's log is (benchmarks/speed.py's log)."""
    head = source.read_bytes()
    block = b"".join(ln for ln in head.splitlines(keepends=True) if needle.encode() in ln) or head
    return repeated(path, block, size_mb * 2**20, head)


def repeated(path: Path, unit: bytes, size: int, head: bytes = b"") -> int:
    """Write `head`, then `unit` over and over until `size` bytes; the bytes written."""
    with open(path, "wb") as fh:
        fh.write(head)
        written = len(head)
        while written < size:
            fh.write(unit)
            written += len(unit)
    return written


CHILD = """
import sys
from pathlib import Path
sys.path.insert(0, {root!r})
from ingest.run import read_run
ev = read_run([Path({path!r})])
print(" ".join(str(t.stats.get("samples")) + "/" + str(len(t.samples)) for t in ev.traces))
print("VmHWM", open("/proc/self/status").read().split("VmHWM:")[1].split()[0])  # its own peak, read last
"""
GREP = ["grep", "-c", "-F", "-e", "Decode batch", "-e", "Prefill batch", "-e", "Avg prompt throughput"]


def _children(pids: set[int]) -> set[int]:
    """The processes whose parent is in `pids` (one pass over /proc)."""
    out = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:  # "pid (name) state ppid ...": the name may hold spaces, the fields after it do not
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) in pids:
                    out.add(int(d.name))
            except (OSError, IndexError, ValueError):
                continue
    return out


_TICKS = os.sysconf("SC_CLK_TCK")


def _tree_peaks(pid: int, peaks: dict, stop: threading.Event) -> None:
    """Each process's own peak RSS (VmHWM: the high-water mark of its memory since its exec)
    and its CPU time so far (to within the last read: how the work is shared between
    processes), for `pid` and its descendants: read every 20 ms, descendants looked for every 100 ms,
    until `stop`. (wait4's ru_maxrss is not used for this: a child started by fork/vfork +
    exec keeps its parent's RSS at the exec as its ru_maxrss, so a 24 MB worker of a 35 MB
    parent would report 35.)"""
    tree, tick = {pid}, 0
    while not stop.is_set():
        if tick % 5 == 0:
            tree |= _children(tree)
        tick += 1
        for p in tree:
            try:
                hwm = int(Path(f"/proc/{p}/status").read_text().split("VmHWM:")[1].split()[0]) / 1024
                utime, stime = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[11:13]
            except (OSError, IndexError, ValueError):
                continue
            peaks[p] = (max(hwm, peaks.get(p, (0, 0))[0]), (int(utime) + int(stime)) / _TICKS)
        stop.wait(0.02)


def measure(argv: list[str]) -> tuple[float, float, list[tuple[float, float]], str]:
    """(wall s, CPU s, each process's (peak RSS MB, CPU s), stdout) of one child process and the
    processes it starts: CPU from its own rusage (which holds its reaped children's), peak
    RSS per process from /proc (_tree_peaks)."""
    peaks: dict = {}
    stop = threading.Event()
    t = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    watch = threading.Thread(target=_tree_peaks, args=(proc.pid, peaks, stop), daemon=True)
    watch.start()
    out = proc.stdout.read()  # (read to the child's exit; its peak is a high-water mark, read till then)
    stop.set()
    watch.join()
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{argv[0]} failed with exit code {proc.returncode}")
    rss = [v for _, v in sorted(peaks.items())] or [(ru.ru_maxrss / 1024, ru.ru_utime + ru.ru_stime)]
    out, _, own = out.strip().partition("\nVmHWM ")
    if own:  # kb's reading process reports its own peak at its end (the poll, starved on a loaded machine, can miss it)
        rss[0] = (max(rss[0][0], int(own) / 1024), rss[0][1])
    return wall, ru.ru_utime + ru.ru_stime, rss, out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mb", type=float, default=1024)
    ap.add_argument("--runs", type=int, default=3, help="kb and grep runs, interleaved; medians reported")
    ap.add_argument("--root", default=str(ROOT), help="the kb checkout to time (another worktree: before/after)")
    args = ap.parse_args()
    load = Path("/proc/loadavg").read_text().split()[:3]
    with tempfile.TemporaryDirectory() as d:
        log = Path(d) / "server.log"
        mb = generate_mixed(log, args.size_mb) / 2**20
        kb, grep = [], []
        for _ in range(args.runs):
            kb.append(measure([sys.executable, "-c", CHILD.format(root=args.root, path=str(log))]))
            grep.append(measure(GREP + [str(log)]))
    load_end = Path("/proc/loadavg").read_text().split()[:3]
    mb_dec = mb * 2**20 / 1e6
    print(f"mixed log: {mb:,.0f} MiB = {mb_dec:,.0f} MB (sample lines: {', '.join(f'{k} {w:.2%}' for k, w in MIX)}); "
          f"{args.runs} interleaved runs, medians; load average {' '.join(load)} before, {' '.join(load_end)} after")
    head = subprocess.run(["git", "-C", args.root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    print(f"kb = {args.root} at {head.stdout.strip()}; MB = 10^6 bytes; CPU = user + system of all its processes")
    print(f"{'tool':<10}{'wall s':>9}{'MB/s':>9}{'CPU s':>9}{'MB/CPU-s':>10}  {'peak RSS MB (each = sum)':<26}"
          f"{'CPU s each':<16}result")
    rows = {}
    for name, runs in (("kb", kb), ("grep -c", grep)):
        wall, cpu = (statistics.median(r[i] for r in runs) for i in range(2))
        procs = max((r[2] for r in runs), key=lambda ps: sum(x for x, _ in ps))  # the run with the largest sum
        rows[name] = wall, cpu
        rss = [x for x, _ in procs]
        each = " + ".join(f"{x:.1f}" for x in rss) + (f" = {sum(rss):.1f}" if len(rss) > 1 else "")
        cpus = " + ".join(f"{c:.2f}" for _, c in procs)
        print(f"{name:<10}{wall:>9.2f}{mb_dec / wall:>9.1f}{cpu:>9.2f}{mb_dec / cpu:>10.1f}  {each:<26}{cpus:<16}"
              f"{runs[0][3]}")
    print(f"kb / grep: wall {rows['kb'][0] / rows['grep -c'][0]:.1f}x, CPU {rows['kb'][1] / rows['grep -c'][1]:.1f}x "
          "(kb: stats lines seen/kept per engine; grep: stats lines counted)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
