"""kb's load generator against vLLM's own serving benchmark, on the same server in one run.

    python benchmarks/sweep_vs_vllm.py [--url http://127.0.0.1:PORT] [--concurrency 1,4,16]
        [--requests 32,64,128] [--input-len 32] [--output-len 64] [--repeat 5] [--before /work/main]
        [--max-num-seqs 64]

Without --url it builds the tiny random-weight Llama of the live tests and starts a
vLLM (CPU) server on 127.0.0.1 from the engines venv (scripts/build_env_engines.sh).

Both clients stay loaded between runs (one kb worker process calling the library's
`sweep`, one engines-venv process calling `vllm.benchmarks.serve.main`, the module behind
`vllm bench serve`), so no interpreter or torch start-up falls next to a timed run; each
prints a run's figures on stdout when given a line on stdin. At each level they run
alternately (kb, vLLM, vLLM, kb, ...), --repeat times each, with the same workload:
`ignore_eos`, input --input-len tokens (vLLM's random dataset; kb's calibrated word
prompts), output --output-len tokens, --requests requests (one count, or one per level)
at concurrency c, a warm-up before each run (vLLM's initial test request; kb's
calibration requests). The table gives
the medians and two ratios: of the medians, and the median of the ratios of each adjacent
kb/vLLM pair (the pair ran seconds apart, so load from others on the machine hits both
alike), with that ratio's range. It also prints each client's CPU per 1,000 output tokens
during its timed part (process CPU; vLLM's around its `benchmark()` coroutine, kb's the
level's own figure), the prompt and output tokens per request each sent, and the load
average. With --before, that checkout's kb runs in the same rotation. Exit 0; all traffic
to the given URL (127.0.0.1 when self-started).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PINNED = "; server pinned to CPU 0, clients to CPU 1"
sys.path.insert(0, str(ROOT / "tests"))

from live import vllm_server as vs  # noqa: E402

# The vLLM worker: one process, imported once; a line "c n" runs one benchmark and prints
# its result JSON on one line with the CPU seconds of its benchmark() coroutine.
VLLM_WORKER = r'''
import json, sys, time
import vllm.benchmarks.serve as S
from vllm.utils.argparse_utils import FlexibleArgumentParser
cpu = [0.0]
run = S.benchmark
async def timed(*a, **k):
    t = time.process_time()
    r = await run(*a, **k)
    cpu[0] = time.process_time() - t
    return r
S.benchmark = timed
base = sys.argv[1:]
for line in sys.stdin:
    c, n = line.split()
    p = FlexibleArgumentParser(); S.add_cli_args(p)
    r = S.main(p.parse_args(base + ["--max-concurrency", c, "--num-prompts", n]))
    keep = {k: r[k] for k in ("total_token_throughput", "output_throughput", "median_ttft_ms", "median_tpot_ms",
                              "total_input_tokens", "total_output_tokens", "completed", "duration")}
    print("RESULT " + json.dumps({**keep, "client_cpu_s": cpu[0]}), flush=True)
'''

# The kb worker: the checkout's library, probed once; a line "c n" runs one sweep level.
KB_WORKER = r'''
import json, sys
sys.path.insert(0, sys.argv[1])
from kb.live.probe import probe
from kb.live.sweep import SweepOptions, sweep
url, inp, out = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
p = probe(url)
for line in sys.stdin:
    c, n = (int(x) for x in line.split())
    res = sweep(p, SweepOptions(levels=[c], requests=n, input_len=inp, output_len=out))
    if not res.levels:
        print("ERROR " + str(res.error), flush=True)
        continue
    r = res.levels[0]
    keep = {k: r[k] for k in ("total_throughput", "output_throughput", "median_ttft_ms", "median_tpot_ms",
                              "total_input_tokens", "total_output_tokens", "completed", "duration")}
    print("RESULT " + json.dumps({**keep, "client_cpu_s": r["client"]["cpu_s"]}), flush=True)
'''

# (label, kb key, vLLM key)
FIGURES = [("total tok/s", "total_throughput", "total_token_throughput"),
           ("output tok/s", "output_throughput", "output_throughput"),
           ("TTFT p50 ms", "median_ttft_ms", "median_ttft_ms"),
           ("TPOT p50 ms", "median_tpot_ms", "median_tpot_ms")]


class Worker:
    """A client kept loaded: one line in, one RESULT line out."""

    def __init__(self, name: str, cmd: list[str], env: dict, cwd: Path, log: Path):
        self.name = name
        self.log = open(log, "w")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
                                     env=env, cwd=cwd)

    def run(self, c: int, n: int) -> dict:
        self.proc.stdin.write(f"{c} {n}\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            if line.startswith("RESULT "):
                return json.loads(line[7:])
            if line.startswith("ERROR "):
                raise SystemExit(f"{self.name}: {line[6:].strip()}")
        raise SystemExit(f"{self.name} worker ended (exit {self.proc.wait()}); see {self.log.name}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()


def kb_worker(name: str, root: Path, url: str, args, work: Path) -> Worker:
    env = {**os.environ, "KB_HOME": str(work / f"kb-home-{name}")}
    return Worker(name, [sys.executable, "-c", KB_WORKER, str(root), url, str(args.input_len), str(args.output_len)],
                  env, root, work / f"{name}.log")


def vllm_worker(url: str, model: str, args, work: Path) -> Worker:
    base = ["--backend", "vllm", "--base-url", url, "--model", model, "--tokenizer", args.tokenizer or model,
            "--dataset-name", "random", "--random-input-len", str(args.input_len),
            "--random-output-len", str(args.output_len), "--ignore-eos", "--disable-tqdm",
            "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,99"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return Worker("vLLM", [str(vs.ENGINES_PY), "-u", "-c", VLLM_WORKER, *base], env, work, work / "vllm.log")


def _pct(x: float) -> str:
    return f"{x:.3f}"


def report(name: str, rows: list[tuple[int, list[dict], list[dict]]]) -> None:
    """Per level: medians, ratio of medians, median (min–max) of the adjacent-pair ratios."""
    print(name)
    print(f"{'conc':>5}  {'figure':<13} {'kb':>10} {'vLLM':>10}  {'ratio of medians':>16}  "
          f"{'pair ratios: median (min–max)':>30}")
    for c, kbr, vr in rows:
        for label, kk, vk in FIGURES:
            k = statistics.median(r[kk] for r in kbr)
            v = statistics.median(r[vk] for r in vr)
            pairs = [a[kk] / b[vk] for a, b in zip(kbr, vr, strict=True) if b[vk]]
            print(f"{c:>5}  {label:<13} {k:>10,.2f} {v:>10,.2f}  {_pct(k / v) if v else '-':>16}  "
                  f"{_pct(statistics.median(pairs)):>12} ({_pct(min(pairs))}–{_pct(max(pairs))})")
    print("workload per request (median over runs): "
          + "; ".join(f"c={c} kb {statistics.median(r['total_input_tokens'] / r['completed'] for r in kbr):.2f} in / "
                      f"{statistics.median(r['total_output_tokens'] / r['completed'] for r in kbr):.0f} out, vLLM "
                      f"{statistics.median(r['total_input_tokens'] / r['completed'] for r in vr):.2f} in / "
                      f"{statistics.median(r['total_output_tokens'] / r['completed'] for r in vr):.0f} out"
                      for c, kbr, vr in rows))
    print("client CPU per 1,000 output tokens during the timed part, ms (median): "
          + "; ".join(f"c={c} kb {_cpu_k(kbr):.1f}, vLLM {_cpu_k(vr):.1f}" for c, kbr, vr in rows))


def _cpu_k(runs: list[dict]) -> float:
    """Median client CPU ms per 1,000 output tokens."""
    return statistics.median(1e6 * r["client_cpu_s"] / r["total_output_tokens"] for r in runs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url")
    ap.add_argument("--model", help="model id (default: the server's first)")
    ap.add_argument("--tokenizer", help="tokenizer path for vLLM's benchmark (default: the model)")
    ap.add_argument("--concurrency", default="1,4,16")
    ap.add_argument("--requests", default="32,64,128", help="requests per run: one count, or one per level")
    ap.add_argument("--input-len", type=int, default=32)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--max-num-seqs", type=int, default=64, help="of the self-started server")
    ap.add_argument("--before", help="another kb checkout (e.g. /work/main) run in the same rotation")
    ap.add_argument("--pin", action="store_true",
                    help="self-started server on CPU 0, both clients on CPU 1: neither client's CPU "
                         "can slow the server, so what is left is how each measures")
    args = ap.parse_args()
    levels = [int(x) for x in args.concurrency.split(",") if x]
    counts = [int(x) for x in args.requests.split(",") if x]
    counts = counts * len(levels) if len(counts) == 1 else counts
    if len(counts) != len(levels):
        ap.error("--requests: give one count, or one per level")
    server = None
    workers: list[Worker] = []
    with tempfile.TemporaryDirectory(prefix="kb-vs-vllm-") as tmp:
        work = Path(tmp)
        url, model = args.url, args.model
        try:
            if not url:
                vs.require_engines()
                mdir = vs.build_model(work / "model")
                print(f"starting vLLM (CPU) on 127.0.0.1, --max-num-seqs {args.max_num_seqs} …", file=sys.stderr)
                if args.pin:  # the server's processes and threads inherit this affinity
                    os.sched_setaffinity(0, {0})
                server = vs.start(mdir, work / "server.log", max_num_seqs=args.max_num_seqs)
                if args.pin:  # and the client workers started below inherit this one
                    os.sched_setaffinity(0, {1})
                url, model = server.url, str(mdir)
            if not model:
                import urllib.request

                with urllib.request.urlopen(f"{url.rstrip('/')}/v1/models", timeout=10) as r:
                    first = json.load(r)["data"][0]
                    model = first.get("root") or first["id"]
            kb = kb_worker("kb", ROOT, url, args, work)
            vl = vllm_worker(url, model, args, work)
            old = kb_worker("kb-before", Path(args.before), url, args, work) if args.before else None
            workers = [w for w in (kb, vl, old) if w]
            rows, old_rows = [], []
            load = [os.getloadavg()]
            t0 = time.strftime("%H:%M", time.gmtime())
            for c, n in zip(levels, counts, strict=True):
                kbr, vr, oldr = [], [], []
                for i in range(args.repeat):  # ABBA order: a load trend within a level favours neither
                    order = [(old, oldr), (kb, kbr), (vl, vr)] if old else [(kb, kbr), (vl, vr)]
                    for w, got in (order if i % 2 == 0 else order[::-1]):
                        got.append(w.run(c, n))
                rows.append((c, kbr, vr))
                old_rows.append((c, oldr, vr))
                load.append(os.getloadavg())
                print(f"  level {c} done", file=sys.stderr)
        finally:
            for w in workers:
                w.stop()
            if server:
                server.stop()
    print(f"kb sweep vs vllm.benchmarks.serve — {url}, {t0}–{time.strftime('%H:%M', time.gmtime())} UTC, "
          f"input {args.input_len} / output {args.output_len} tokens, {args.requests} requests per run, "
          f"{args.repeat} alternating runs per level{PINNED if args.pin else ''}; "
          "load average (1, 5, 15 min) at the start and after each level: "
          + " → ".join("/".join(f"{x:.1f}" for x in la) for la in load))
    report("kb (this checkout) / vLLM", rows)
    if args.before:
        report(f"kb ({args.before}) / vLLM, same rotation", old_rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
