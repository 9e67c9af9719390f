"""kb tune against the grid vLLM's benchmarks/auto_tune/auto_tune.sh runs, on the same
real vLLM CPU server (tiny random Llama, tests/live/vllm_server.py) and workload.

auto_tune.sh (vLLM repository, benchmarks/auto_tune/) restarts the server for every
pair in NUM_SEQS_LIST="128 256" × NUM_BATCHED_TOKENS_LIST="512 1024 2048 4096" (its
defaults: 8 trials) and keeps the best throughput. Here each grid trial is one server
start and one `kb sweep` of the workload after the same warm-up kb tune sends (the top
level's 32 requests, unrecorded), so both sides measure alike. kb tune starts from
--max-num-seqs 8, the cap the live tests use, with a budget of 8 server starts (a trial
is a server start on both sides). Both launch with --enforce-eager: torch.compile at
start-up costs each start about a minute on this machine and is the same for both.

Prints: the grid's trials and best; kb tune's trials, minutes, and how many trials and
minutes it took to come within 5% of the grid's best. Needs the engines venv
(scripts/build_env_engines.sh). Takes about 15-30 minutes on the 2-core machine.

    python benchmarks/tune_vs_grid.py [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from live import vllm_server as vs  # noqa: E402

NUM_SEQS = (128, 256)
BATCHED = (512, 1024, 2048, 4096)
WORKLOAD = ["-c", "32", "-n", "96", "--input-len", "64", "--output-len", "32"]
WARMUP = ["--warmup", "32"]  # what kb tune sends before each trial's sweep at -c 32 (kb.tune.default_warmup)
ENV = ("VLLM_CPU_KVCACHE_SPACE=1 VLLM_LOG_STATS_INTERVAL=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "
       "VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1")


def launch(model: Path, extra: str) -> str:
    return (f"{ENV} {vs.ENGINES_PY} -m vllm.entrypoints.openai.api_server --model {model} --load-format dummy "
            f"--max-model-len 512 --enforce-eager {extra}")


def kb(*args, home: Path, timeout: float = 3600) -> subprocess.CompletedProcess:
    env = {**os.environ, "KB_HOME": str(home)}
    env.pop("KB_API_KEY", None)
    return subprocess.run([sys.executable, "-m", "kb", *map(str, args)], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=timeout)


def grid_trial(model: Path, seqs: int, batched: int, work: Path) -> tuple[float, float]:
    """(output tok/s, minutes) of one grid point: start, sweep, stop."""
    import shlex

    from kb.live.server import ManagedServer

    t0 = time.monotonic()
    env_words = dict(w.split("=", 1) for w in ENV.split())
    argv = shlex.split(launch(model, f"--max-num-seqs {seqs} --max-num-batched-tokens {batched}"))
    argv = argv[len(env_words):]  # the KEY=VALUE prefix goes to the environment
    out = work / f"grid-{seqs}-{batched}.jsonl"
    with ManagedServer(argv, work / f"grid-{seqs}-{batched}.server.log", env=env_words) as s:
        p = kb("sweep", s.url, *WORKLOAD, *WARMUP, "--out", out, "--json", home=work / "home")
        if p.returncode != 0:
            return 0.0, (time.monotonic() - t0) / 60
        doc = json.loads(p.stdout)
    return max(lv["output_throughput"] for lv in doc["levels"]), (time.monotonic() - t0) / 60


def _interrupt(signum, frame):
    raise KeyboardInterrupt  # so the server of the running grid trial is stopped on the way out


def main() -> None:
    signal.signal(signal.SIGTERM, _interrupt)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="kb-tune-grid-"))
    work.mkdir(parents=True, exist_ok=True)
    model = vs.build_model(work / "model")
    load = os.getloadavg()[0]

    grid = []
    for seqs in NUM_SEQS:
        for batched in BATCHED:
            tput, minutes = grid_trial(model, seqs, batched, work)
            grid.append((seqs, batched, tput, minutes))
            print(f"grid  max-num-seqs {seqs:>4}  max-num-batched-tokens {batched:>5}: {tput:8.1f} out tok/s "
                  f"({minutes:.1f} min)", flush=True)
    best = max(g[2] for g in grid)
    grid_minutes = sum(g[3] for g in grid)

    t0 = time.monotonic()
    p = kb("tune", "--launch", launch(model, "--max-num-seqs 8"), *WORKLOAD, *WARMUP, "--max-trials", "8",
           "--no-attach", "--out-dir", work / "tune", "--json", home=work / "home")
    if p.returncode != 0:
        sys.exit(f"kb tune failed: {p.stderr[-2000:]}")
    doc = json.loads(p.stdout)
    tune_minutes = (time.monotonic() - t0) / 60
    reached = None
    elapsed = 0.0
    running_best = 0.0
    starts = 0
    for t in doc["trials"]:
        starts += t["starts"]  # a candidate kb's flag catalog refuses is not started
        elapsed += t["minutes"]
        if t["status"] == "ok":
            running_best = max(running_best, t["score"] or 0.0)
        if reached is None and running_best >= 0.95 * best:
            reached = (starts, elapsed)
    print()
    print(f"load average at start {load:.2f}, at end {os.getloadavg()[0]:.2f}")
    print("| | trials (server starts) | minutes | best out tok/s |")
    print("|---|---|---|---|")
    print(f"| auto_tune.sh grid (8 pairs) | {len(grid)} | {grid_minutes:.1f} | {best:.1f} |")
    print(f"| kb tune (from --max-num-seqs 8) | {starts} | {tune_minutes:.1f} | "
          f"{max((t['score'] or 0) for t in doc['trials'] if t['status'] == 'ok'):.1f} |")
    if reached:
        print(f"| kb tune within 5% of the grid's best | {reached[0]} | {reached[1]:.1f} | |")
    else:
        print("| kb tune within 5% of the grid's best | not reached | | |")
    print(f"kb tune noise band ±{doc['noise'] * 100:.1f}% ({doc['noise_note']}); stopped: {doc['stopped']}")
    print("\nkb tune trials: " + "; ".join(f"{t['label']} → {t['status']} {t['scores'] or '-'}" for t in doc["trials"]))


if __name__ == "__main__":
    main()
