"""The index survives SIGKILL: start `kb ingest` / `kb reindex` on a knowledge base,
kill it with SIGKILL at a random moment, then check that the next `kb ask` works
(on the old index, or after a rebuild it announces on stderr) and that no finding
ingested before is lost.

    python benchmarks/kill.py [--kills 200] [--seed N] [--cli-every 10]
    python benchmarks/kill.py --rounds 5 [--writers 8,4,4]   # concurrent writers instead

Prints how many kills landed in each phase of the work, how many were followed by
an announced rebuild, and any failure; exits 1 on a failure. tests/test_reliability.py
runs the same loop with 10 kills.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import redirect_stderr
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

VERSION = re.compile(r"version (\d+)\)")
QUESTION = "throughput plateaus at high concurrency"
NOTES = 6  # user findings files, ingested and pinned


def note(i: int, version: int) -> str:
    """A canonical findings file with two or three findings (by version, so that the
    record count changes) whose ids are unique to file i."""
    out = [f"# Kill test notes {i}\n"]
    for j in range(3 - version % 2):
        out.append(f"""## Raising max running requests lifts throughput plateau {i}-{j} v{version}

- **ID:** kill-note-{i}-{j}
- **Symptoms:** throughput plateaus at 128 concurrency; queue grows
- **Engine:** sglang
- **Root cause:** the running-request cap is reached (note {i}, finding {j}, version {version})
- **Fix:** raise --max-running-requests
- **Fix classes:** max-running-requests
- **Confidence:** medium

```bash
python -m sglang.launch_server --model-path m --max-running-requests {256 + version}
```
""")
    return "\n".join(out)


def env_for(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "KB_FINDINGS"}
    env["KB_HOME"] = str(home)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def kb(home: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kb", *args], cwd=ROOT, env=env_for(home), capture_output=True,
                          text=True, timeout=timeout)


def expected_ids(notes_dir: Path) -> set[str]:
    return {m for p in notes_dir.glob("notes*.md") for m in re.findall(r"\*\*ID:\*\* (\S+)", p.read_text())}


class Harness:
    def __init__(self, work: Path, seed: int):
        self.rnd = random.Random(seed)
        self.home = work / "kbhome"
        self.notes = work / "notes"
        self.notes.mkdir(parents=True)
        self.version = 0
        for i in range(NOTES):
            (self.notes / f"notes{i}.md").write_text(note(i, 0))
        first = kb(self.home, "ingest", str(self.notes))
        assert first.returncode == 0, first.stderr
        # kills are aimed between start-up (imports, which touch nothing) and the end of the work
        self.durations = {"startup": self._time("--help"), "ingest": self._time("ingest", str(self.notes)),
                          "reindex": self._time("reindex")}
        self.stats = {"kills": 0, "rebuilt": 0, "finished first": 0, "failures": []}

    def _time(self, *args: str) -> float:
        self._change()
        t = time.perf_counter()
        proc = kb(self.home, *args)
        assert proc.returncode == 0, proc.stderr
        return time.perf_counter() - t

    def _change(self) -> None:
        """Give the next ingest work: rewrite some notes files."""
        self.version += 1
        for i in self.rnd.sample(range(NOTES), 2):
            (self.notes / f"notes{i}.md").write_text(note(i, self.version))

    def one(self, cli: bool) -> None:
        """One kill, then the checks."""
        action = self.rnd.choice(["ingest", "ingest", "reindex"])
        args = ["ingest", str(self.notes)] if action == "ingest" else ["reindex"]
        self._change()
        proc = subprocess.Popen([sys.executable, "-m", "kb", *args], cwd=ROOT, env=env_for(self.home),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(self.rnd.uniform(self.durations["startup"] * 0.8, self.durations[action]))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            self.stats["kills"] += 1
            self.durations[action] *= 1.02
        else:  # it was quicker than thought (the machine is shared): aim earlier next time
            self.stats["finished first"] += 1
            self.durations[action] *= 0.85
        proc.wait()
        self.check(cli)

    def check(self, cli: bool) -> None:
        if cli:
            proc = kb(self.home, "ask", QUESTION, "--json")
            err = proc.stderr
            ok = proc.returncode == 0 and json.loads(proc.stdout)["answers"]
            if not ok:
                self.stats["failures"].append(f"kb ask exited {proc.returncode}: {err[-500:]}")
                return
        else:  # what `kb ask` does, in this process (much faster than a new interpreter)
            from ingest.detect import load_findings
            from kb.search import ask
            from kb.store import Store

            buf = io.StringIO()
            try:
                with redirect_stderr(buf):
                    store = Store(self.home)
                    store.sync(load_findings)
                    answers = ask(store.index_dir, QUESTION, 5)
            except Exception as e:  # noqa: BLE001
                self.stats["failures"].append(f"ask failed: {type(e).__name__}: {e}")
                return
            err = buf.getvalue()
            if not answers:
                self.stats["failures"].append("ask found nothing")
        lines = [ln for ln in err.splitlines() if ln.strip()]
        if any("rebuilding" not in ln for ln in lines):
            self.stats["failures"].append(f"unexpected stderr: {err[-500:]}")
        if lines:
            self.stats["rebuilt"] += 1
        self.check_nothing_lost()
        # the ask above wrote (the notes changed), so what a killed process left is cleared
        left = sorted(p.name for p in self.home.iterdir() if p.name.startswith((".index.", ".manifest.json.")))
        if left:
            self.stats["failures"].append(f"left behind by a killed process: {left}")

    def check_nothing_lost(self) -> None:
        """Every notes file was ingested once and completely (pinned), so after the
        next sync every one of its findings is in the index, in its current version."""
        from kb import index as kbindex
        from kb.store import Store

        records = {f.id: f for f in kbindex.all_records(Store(self.home).index_dir)}
        want = expected_ids(self.notes)
        missing = want - set(records)
        if missing:
            self.stats["failures"].append(f"lost findings: {sorted(missing)[:5]}")
        stale = {r for r in records if r.startswith("kill-note-")} - want
        if stale:
            self.stats["failures"].append(f"findings no longer in their file: {sorted(stale)[:5]}")
        for i in range(NOTES):
            current = VERSION.search((self.notes / f"notes{i}.md").read_text()).group(1)
            f = records.get(f"kill-note-{i}-0")
            if f and VERSION.search(f.root_cause or "").group(1) != current:
                self.stats["failures"].append(f"kill-note-{i}-0 is stale: {f.root_cause} (file has version {current})")


def run(kills: int, seed: int = 0, cli_every: int = 10, work: Path | None = None) -> dict:
    own = work is None
    work = Path(tempfile.mkdtemp(prefix="kb-kill-")) if own else work
    try:
        h = Harness(work, seed)
        attempts = 0
        while h.stats["kills"] < kills and attempts < 3 * kills:  # a run that ends before its kill is retried
            attempts += 1
            h.one(cli=cli_every > 0 and attempts % cli_every == 0)
        h.stats["attempts"] = attempts
        h.check(cli=True)  # the real command line at the end
        h.stats["durations"] = h.durations
        return h.stats
    finally:
        if own:
            shutil.rmtree(work, ignore_errors=True)


def concurrent(home: Path, work: Path, rounds: int = 1, ingests: int = 4, attaches: int = 2, asks: int = 3) -> dict:
    """`ingests` x `kb ingest` (each its own two notes files), `attaches` x `kb attach` and
    `asks` x `kb ask`, all started at once on `home`, `rounds` times (the knowledge base
    grows): every command must succeed without a word on stderr, every finding written
    must be in the index, and the index must hold exactly what the manifest says."""
    from kb import index as kbindex
    from kb.store import Store

    stats = {"rounds": 0, "processes": 0, "failures": []}
    want: set[str] = set()
    for r in range(rounds):
        cmds = []
        for g in range(ingests):
            d = work / f"round{r}-team{g}"
            d.mkdir(parents=True)
            for i in range(2):
                (d / f"n{i}.md").write_text(note(i, 0).replace("kill-note-", f"r{r}-t{g}-"))
                want |= {f"r{r}-t{g}-{i}-{j}" for j in range(3)}
            cmds.append(["ingest", str(d / "n0.md"), str(d / "n1.md")])
        cmds += [["attach", "--title", f"Driver note {r}-{i}", "--fix", f"modprobe nvidia_uvm ({r}-{i})",
                  "--fix-class", "driver-environment", "--force-new", "--json"] for i in range(attaches)]
        cmds += [["ask", QUESTION, "--json"] for _ in range(asks)]
        procs = [subprocess.Popen([sys.executable, "-m", "kb", *c], cwd=ROOT, env=env_for(home),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for c in cmds]
        results = [p.communicate(timeout=600) for p in procs]
        stats["rounds"] += 1
        stats["processes"] += len(procs)
        for c, p, (out, err) in zip(cmds, procs, results, strict=True):
            if p.returncode != 0 or err:
                stats["failures"].append(f"round {r}: kb {c[0]} exited {p.returncode}: {err[-300:]}")
            elif c[0] == "attach":
                want.add(json.loads(out)["id"])
            elif c[0] == "ask" and not json.loads(out)["answers"]:
                stats["failures"].append(f"round {r}: kb ask found nothing")
        store = Store(home)
        ids = {f.id for f in kbindex.all_records(store.index_dir)}
        if want - ids:
            stats["failures"].append(f"round {r}: lost findings: {sorted(want - ids)[:5]}")
        known = store.manifest()["sources"]
        problem = kbindex.check(store.index_dir, sum(len(e["ids"]) for e in known.values()))
        if problem:
            stats["failures"].append(f"round {r}: {problem}")
    stats["findings"] = len(want)
    return stats


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=200, help="kills that land while kb works")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cli-every", type=int, default=10, help="check with a real `kb ask` every N kills")
    ap.add_argument("--rounds", type=int, default=0,
                    help="instead of kills: rounds of concurrent kb ingest/attach/ask (see --writers)")
    ap.add_argument("--writers", type=str, default="8,4,4", help="per round: ingests,attaches,asks (default 8,4,4)")
    args = ap.parse_args(argv)
    t = time.perf_counter()
    if args.rounds:
        ingests, attaches, asks = (int(x) for x in args.writers.split(","))
        with tempfile.TemporaryDirectory(prefix="kb-conc-") as work:
            st = concurrent(Path(work) / "kbhome", Path(work), args.rounds, ingests, attaches, asks)
        print(f"{st['rounds']} rounds of {ingests} kb ingest + {attaches} kb attach + {asks} kb ask at once: "
              f"{st['processes']} processes, {st['findings']} findings written, all indexed unless listed; "
              f"failures {len(st['failures'])}; {time.perf_counter() - t:.0f} s")
        for f in st["failures"][:20]:
            print("  FAIL", f)
        return 1 if st["failures"] else 0
    stats = run(args.kills, args.seed, args.cli_every)
    print(f"attempts {stats['attempts']}: killed mid-work {stats['kills']}, finished before the kill "
          f"{stats['finished first']}; rebuilds announced {stats['rebuilt']}; failures {len(stats['failures'])}; "
          f"{time.perf_counter() - t:.0f} s (an ingest takes {stats['durations']['ingest']:.2f} s, "
          f"a reindex {stats['durations']['reindex']:.2f} s)")
    for f in stats["failures"][:20]:
        print("  FAIL", f)
    return 1 if stats["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
