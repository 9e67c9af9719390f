"""Speed and memory of kb:

1. `kb ask` end to end (subprocess, warm index, shipped findings) and the import
   costs of `kb.cli` (`python -X importtime`);
2. at growing knowledge-base sizes (a scale set generated from the shipped findings
   by varying their context: engine, GPU, model, GPU count, gain numbers; written
   as canonical markdown, many findings per file): index build (`Store.sync`),
   re-ingest of the unchanged knowledge base (second sync), in-process query
   latency p50/p95 of `kb.search.ask` beside SQLite FTS5 (bm25) over the same
   text, and `kb ask` end to end on that knowledge base;
3. `kb diagnose` end to end on a run directory of 10 benchmark files (verbatim
   samples) with and without a generated sglang server log.

    python benchmarks/speed.py [--quick] [--sizes 1000,10000,100000] [--runs 10] [--log-mb 100]

Prints tables; exits 0. Every timing carries the 1-minute load average taken when
it was measured (`load`), because this machine is shared. Everything is built under
a temp dir and removed. Each size is generated, then measured, in processes of its
own, so that the peak RSS reported is kb's alone.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from log_parse import NEEDLE, SOURCES, generate  # noqa: E402

QUESTIONS = ROOT / "benchmarks" / "data" / "ask_heldout.json"
SAMPLES = ROOT / "tests" / "data" / "samples"
ASK_QUESTION = "why does thruput plateau at 128 conc on 8x rtx pro 6000"
FINDINGS_PER_FILE = 100
AIM_ASK_S, AIM_FTS_RATIO, AIM_RESYNC_S = 0.35, 3.0, 0.2

# context the scale set cycles through
ENGINES = ["sglang", "vllm"]
GPUS = ["H100", "H200", "A100", "B200", "L40S", "RTX PRO 6000 Blackwell", "MI300X", "RTX 5090", "GB200", "A10"]
MODELS = [("DeepSeek-V3", "deepseek"), ("Qwen3-235B-A22B", "qwen3-moe"), ("Llama-3.1-70B", "llama"),
          ("gpt-oss-120b", "gpt-oss"), ("GLM-5", "glm"), ("Kimi-K2", "kimi"), ("Mixtral-8x7B", "mixtral"),
          ("Qwen3-30B-A3B", "qwen3-moe")]
GPU_COUNTS = [1, 2, 4, 8]


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


def met(value: float, aim: float) -> str:
    return f"{'met' if value <= aim else 'missed'}: {value:.3g} vs ≤ {aim:g}"


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(p / 100 * (len(values) - 1)))]


def questions() -> list[str]:
    return [q["q"] for q in json.loads(QUESTIONS.read_text())]


# ------------------------------------------------------------------ subprocess runs


def kb_command() -> list[str]:
    script = Path(sys.executable).parent / "kb"
    return [str(script)] if script.exists() else [sys.executable, "-m", "kb"]


def kb_env(home: Path, findings_dir: Path | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "KB_FINDINGS"}
    env["KB_HOME"] = str(home)
    if findings_dir:
        env["KB_FINDINGS"] = str(findings_dir)
    return env


def timed(cmd: list[str], env: dict) -> tuple[float, float | None]:
    """Wall seconds and peak RSS (MB) of one command, which must exit 0. The RSS comes
    from GNU time: a child's own rusage would include this (large) process's RSS at fork,
    which Linux keeps in ru_maxrss across exec."""
    gnu_time = shutil.which("time")
    full = [gnu_time, "-f", "maxrss_kb=%M", *cmd] if gnu_time else cmd
    t = time.perf_counter()
    proc = subprocess.run(full, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    dt = time.perf_counter() - t
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])}… exited {proc.returncode}: {proc.stderr[-500:]}")
    m = re.search(r"maxrss_kb=(\d+)", proc.stderr)
    return dt, int(m.group(1)) / 1024 if m else None


def median_run(cmd: list[str], env: dict, runs: int) -> dict:
    timed(cmd, env)  # warm: builds or syncs the index, fills the page cache
    times, rss, loads = [], [], []
    for _ in range(runs):
        loads.append(loadavg())
        dt, peak = timed(cmd, env)
        times.append(dt)
        rss.append(peak or 0)
    return {"median": statistics.median(times), "min": min(times), "max": max(times), "rss": max(rss),
            "load": f"{min(loads)}–{max(loads)}"}


def import_costs(args: list[str], env: dict | None = None, top: int = 8) -> tuple[float, list[tuple[str, float]]]:
    """`python -X importtime ARGS`: total import time and the `top` costliest modules
    imported directly or one level down (cumulative ms)."""
    err = subprocess.run([sys.executable, "-X", "importtime", *args], capture_output=True, text=True,
                         cwd=ROOT, env=env).stderr
    rows = []
    for line in err.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", line)
        if m:
            rows.append((m.group(4), int(m.group(2)) / 1000, len(m.group(3))))
    total = sum(ms for _, ms, depth in rows if depth == 1)
    return total, [(name, ms) for name, ms, depth in sorted(rows, key=lambda r: -r[1]) if depth <= 3][:top]


# ------------------------------------------------------------------ the scale set


def scale_set(n: int) -> list:
    """n findings: the shipped ones repeated with varied context and numbers."""
    from ingest.detect import load_findings
    from kb.store import findings_files, shipped_findings_dir

    base = [f for p in findings_files(shipped_findings_dir()) for f in load_findings(p, str(p))]
    out = []
    for k in range(n // len(base) + 1):
        for f in base[: n - len(out)]:
            out.append(_variant(f, k))
    return out


def _variant(f, k: int):
    engine, gpu = ENGINES[k % 2], GPUS[(k // 2) % len(GPUS)]
    model, family = MODELS[(k // 20) % len(MODELS)]
    count, factor = GPU_COUNTS[(k // 160) % len(GPU_COUNTS)], 1 + (k % 37) / 100
    context = f.context.model_copy(update={"engine": engine, "gpu": gpu, "gpu_arch": None, "gpu_count": count,
                                           "model": model, "model_family": family})
    gains = [g.model_copy(update={"before": g.before and round(g.before * factor, 2),
                                  "after": g.after and round(g.after * factor, 2)}) for g in f.gains]
    return f.model_copy(update={"id": f"{f.id}-s{k}", "title": f"{f.title} [{model} on {count}x {gpu}, {engine}]",
                                "context": context, "gains": gains})


def write_scale_set(findings: list, folder: Path) -> None:
    """Canonical markdown files of FINDINGS_PER_FILE findings each."""
    from ingest.markdown import render

    folder.mkdir(parents=True)
    texts = [render(f) for f in findings]
    for i in range(0, len(texts), FINDINGS_PER_FILE):
        part = "\n\n".join(texts[i:i + FINDINGS_PER_FILE])
        (folder / f"part-{i // FINDINGS_PER_FILE:05d}.md").write_text(f"# Scale set, part {i}\n\n{part}\n")


# ------------------------------------------------------------------ SQLite FTS5


def fts5_build(db: Path, texts: list[str]) -> sqlite3.Connection:
    conn = sqlite3.connect(db)
    conn.execute("CREATE VIRTUAL TABLE docs USING fts5(body)")
    conn.executemany("INSERT INTO docs(body) VALUES (?)", ((t,) for t in texts))
    conn.commit()
    return conn


def fts5_query(conn: sqlite3.Connection, question: str, limit: int = 5) -> list:
    terms = dict.fromkeys(re.findall(r"\w+", question.lower()))
    match = " OR ".join(f'"{t}"' for t in terms)
    return conn.execute("SELECT rowid FROM docs WHERE docs MATCH ? ORDER BY bm25(docs) LIMIT ?",
                        (match, limit)).fetchall()


def latencies(fn, qs: list[str]) -> list[float]:
    fn(qs[0])  # warm: opens the index / statement cache
    out = []
    for q in qs:
        t = time.perf_counter()
        fn(q)
        out.append(time.perf_counter() - t)
    return out


# ------------------------------------------------------------------ one size (child process)


def read_sections(folder: Path) -> list[str]:
    """The findings' markdown back from the scale-set files (each section starts "## ")."""
    texts = []
    for p in sorted(folder.glob("*.md")):
        texts += ["## " + s for s in p.read_text().split("\n\n## ")[1:]]
    return texts


def measure_size(tmp: Path) -> dict:
    """Build, re-sync and query the knowledge base of tmp/findings (plus the shipped
    findings, which are always indexed). Runs in its own process, after the scale set
    was written, so that its peak RSS is kb's alone."""
    import resource

    from ingest.detect import load_findings
    from kb.search import ask
    from kb.store import Store

    os.environ["KB_FINDINGS"] = str(tmp / "findings")
    store = Store(tmp / "home")
    r = {"load_build": loadavg()}
    t = time.perf_counter()
    store.sync(load_findings)
    r["build_s"] = time.perf_counter() - t
    r["build_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    r["load_resync"] = loadavg()
    t = time.perf_counter()
    store.sync(load_findings)
    r["resync_s"] = time.perf_counter() - t
    qs = questions()
    r["load_query"] = loadavg()
    r["kb_ms"] = [x * 1000 for x in latencies(lambda q: ask(store.index_dir, q, limit=5), qs)]
    texts = read_sections(tmp / "findings")
    t = time.perf_counter()
    conn = fts5_build(tmp / "fts.db", texts)
    r["fts_build_s"] = time.perf_counter() - t
    r["fts_ms"] = [x * 1000 for x in latencies(lambda q: fts5_query(conn, q), qs)]
    r["index_mb"] = sum(p.stat().st_size for p in (tmp / "home" / "index").iterdir()) / 2**20
    r["fts_mb"] = (tmp / "fts.db").stat().st_size / 2**20
    return r


def child(*args: str) -> str:
    """This script in a new process. The parent never generates or loads findings, so
    the child's peak RSS (which on Linux starts from the parent's at fork) is its own."""
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, cwd=ROOT)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {out.stderr[-1000:]}")
    return out.stdout


def run_size(n: int, tmp: Path, ask_runs: int) -> dict:
    child("--generate", str(n), "--child-dir", str(tmp))
    r = {"n": n, **json.loads(child("--child-dir", str(tmp)))}
    cli = median_run([*kb_command(), "ask", ASK_QUESTION], kb_env(tmp / "home", tmp / "findings"), ask_runs)
    r["cli_s"], r["cli_rss"], r["load_cli"] = cli["median"], cli["rss"], cli["load"]
    print(f"size {n:,} measured: " + json.dumps({k: v for k, v in r.items() if not k.endswith("_ms")}),
          file=sys.stderr, flush=True)  # progress, and the figures kept should a later step fail
    return r


# ------------------------------------------------------------------ kb diagnose


def run_dir(folder: Path, log_mb: int) -> float:
    """10 verbatim benchmark outputs and, if log_mb, a generated sglang log; returns MB."""
    folder.mkdir(parents=True)
    for sub, pattern in (("sglang_bench_jsonl", "run-*.jsonl"), ("sglang_bench_text", "run-*.txt")):
        for p in sorted((SAMPLES / sub).glob(pattern))[:5]:
            shutil.copy(p, folder / p.name)
    if log_mb:
        generate(folder / "server.log", SOURCES["sglang"], NEEDLE["sglang"], log_mb)
    return sum(p.stat().st_size for p in folder.iterdir()) / 2**20


def bench_diagnose(tmp: Path, log_mb: int) -> list[dict]:
    env = kb_env(tmp / "home")
    subprocess.run([*kb_command(), "reindex"], env=env, capture_output=True, check=True)
    rows = []
    for name, mb in (("10 bench files", 0), (f"10 bench files + {log_mb} MB log", log_mb)):
        size = run_dir(tmp / f"run{mb}", mb)
        load = loadavg()
        dt, rss = timed([*kb_command(), "diagnose", str(tmp / f"run{mb}")], env)
        rows.append({"name": name, "mb": size, "s": dt, "rss": rss, "load": load})
    return rows


# ------------------------------------------------------------------ tables


def print_ask(clis: dict[str, dict], runs: int, imports: dict[str, tuple[float, list]]) -> None:
    print(f"kb ask end to end (subprocess, warm index, shipped findings), {runs} runs")
    print(f"{'':<22}{'median s':>10}{'min s':>8}{'max s':>8}{'peak RSS MB':>13}{'load':>12}   aim")
    for name, cli in clis.items():
        print(f"{name:<22}{cli['median']:>10.3f}{cli['min']:>8.3f}{cli['max']:>8.3f}{cli['rss']:>13.0f}"
              f"{cli['load']:>12}   {met(cli['median'], AIM_ASK_S)}")
    for what, (total, top) in imports.items():
        print(f"\npython -X importtime {what}: {total:.0f} ms of imports (load {loadavg()}); costliest, cumulative:")
        for name, ms in top:
            print(f"  {ms:>7.1f} ms  {name}")


def print_sizes(rows: list[dict]) -> None:
    print("\nindex build and re-ingest (Store.sync; sizes are generated findings + the 73 shipped)")
    print(f"{'findings':>9}{'build s':>9}{'peak RSS MB':>13}{'index MB':>10}{'FTS5 build s':>14}{'FTS5 MB':>9}"
          f"{'load':>6}{'re-sync s':>11}{'load':>6}   aim (re-sync)")
    for r in rows:
        print(f"{r['n']:>9,}{r['build_s']:>9.1f}{r['build_rss']:>13.0f}{r['index_mb']:>10.1f}{r['fts_build_s']:>14.2f}"
              f"{r['fts_mb']:>9.1f}{r['load_build']:>6}{r['resync_s']:>11.3f}{r['load_resync']:>6}   "
              f"{met(r['resync_s'], AIM_RESYNC_S)}")
    print(f"\nquery latency in process, {len(rows[0]['kb_ms'])} held-out questions, top 5 "
          "(kb.search.ask vs SQLite FTS5 bm25 over the same markdown)")
    print(f"{'findings':>9}{'kb p50 ms':>11}{'kb p95 ms':>11}{'FTS5 p50':>10}{'FTS5 p95':>10}{'p50 ratio':>11}"
          f"{'p95 ratio':>11}{'load':>6}   aim (≤ {AIM_FTS_RATIO:g}x FTS5 at 10k)")
    for r in rows:
        kb50, kb95, f50, f95 = (pct(r["kb_ms"], 50), pct(r["kb_ms"], 95), pct(r["fts_ms"], 50), pct(r["fts_ms"], 95))
        aim = met(kb50 / f50, AIM_FTS_RATIO) if r["n"] == 10_000 else ""
        print(f"{r['n']:>9,}{kb50:>11.1f}{kb95:>11.1f}{f50:>10.2f}{f95:>10.2f}{kb50 / f50:>10.0f}x{kb95 / f95:>10.0f}x"
              f"{r['load_query']:>6}   {aim}")
    print("\nkb ask end to end on those knowledge bases (subprocess, warm index, KB_FINDINGS = the scale set)")
    print(f"{'findings':>9}{'median s':>10}{'peak RSS MB':>13}{'load':>12}")
    for r in rows:
        print(f"{r['n']:>9,}{r['cli_s']:>10.3f}{r['cli_rss']:>13.0f}{r['load_cli']:>12}")


def print_diagnose(rows: list[dict]) -> None:
    print("\nkb diagnose end to end (subprocess, shipped findings indexed)")
    print(f"{'run directory':<32}{'MB':>8}{'seconds':>9}{'MB/s':>8}{'peak RSS MB':>13}{'load':>6}")
    for r in rows:
        print(f"{r['name']:<32}{r['mb']:>8.2f}{r['s']:>9.2f}{r['mb'] / r['s']:>8.1f}"
              f"{r['rss'] or 0:>13.0f}{r['load']:>6}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true",
                    help="small sizes, few runs (a smoke test): --sizes 100,300 --runs 3 --log-mb 5 unless given")
    ap.add_argument("--sizes", help="generated findings per knowledge base (default 1000,10000,100000)")
    ap.add_argument("--runs", type=int, help="kb ask end-to-end runs (median; default 10)")
    ap.add_argument("--log-mb", type=int, help="generated sglang server log for kb diagnose (default 100)")
    ap.add_argument("--generate", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--child-dir", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.generate:
        write_scale_set(scale_set(args.generate), args.child_dir / "findings")
        return 0
    if args.child_dir:
        print(json.dumps(measure_size(args.child_dir)))
        return 0
    sizes = [int(s) for s in (args.sizes or ("100,300" if args.quick else "1000,10000,100000")).split(",")]
    runs = args.runs or (3 if args.quick else 10)
    log_mb = args.log_mb or (5 if args.quick else 100)
    ask_runs = 1 if args.quick else 3
    print(f"machine: {os.cpu_count()} cores, python {sys.version.split()[0]}, load at start {loadavg()}\n")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        env = kb_env(tmp / "ask")
        # the console script (kb.cli:main, which imports typer) and `python -m kb`
        # (kb/__main__.py: a plain `kb ask` without typer)
        clis = {"kb ask": median_run([*kb_command(), "ask", ASK_QUESTION], env, runs),
                "python -m kb ask": median_run([sys.executable, "-m", "kb", "ask", ASK_QUESTION], env, runs)}
        imports = {'-c "import kb.cli"': import_costs(["-c", "import kb.cli"]),
                   "-m kb ask …": import_costs(["-m", "kb", "ask", ASK_QUESTION], env)}
        print_ask(clis, runs, imports)
        print_sizes([run_size(n, tmp / f"size{n}", ask_runs) for n in sizes])
        print_diagnose(bench_diagnose(tmp / "diagnose", log_mb))
    return 0


if __name__ == "__main__":
    sys.exit(main())
