"""The benchmark scripts run and print their tables (smallest settings). No timing is
asserted here: the speed aims live in the benchmarks and docs/PERFORMANCE.md."""

import json
import os
import subprocess
import sys

from conftest import ROOT

BENCH = ROOT / "benchmarks"


def run(script: str, tmp_path) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("KB_HOME", "KB_FINDINGS")}
    env["KB_HOME"] = str(tmp_path / "unused-kbhome")  # the scripts use their own temp homes
    proc = subprocess.run([sys.executable, str(BENCH / script), "--quick"], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_heldout_questions_are_labelled_with_shipped_findings():
    from ingest.detect import load_findings
    from kb.store import findings_files, shipped_findings_dir

    known = {f.id for p in findings_files(shipped_findings_dir()) for f in load_findings(p, str(p))}
    questions = json.loads((BENCH / "data" / "ask_heldout.json").read_text())
    dev = {q["q"].lower() for q in json.loads((ROOT / "tests" / "data" / "ask_questions.json").read_text())}
    assert len(questions) >= 45
    for q in questions:
        assert q["expect"] and set(q["expect"]) <= known, q
        assert q["q"].lower() not in dev, q


def test_ask_quality_prints_its_table(tmp_path):
    out = run("ask_quality.py", tmp_path)
    assert "hit@1" in out and "MRR" in out
    for ranker in ("kb ask", "BM25", "grep -il"):
        assert any(line.startswith(ranker) for line in out.splitlines()), out


def test_speed_prints_its_tables(tmp_path):
    out = run("speed.py", tmp_path)
    for heading in ("kb ask end to end", "importtime", "index build and re-ingest", "query latency in process",
                    "kb diagnose end to end"):
        assert heading in out, out
