"""The benchmark scripts run and print their tables (smallest settings). No timing is
asserted here: the speed aims live in the benchmarks and docs/PERFORMANCE.md."""

import json
import os
import subprocess
import sys

from conftest import ROOT

BENCH = ROOT / "benchmarks"


def run(script: str, tmp_path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("KB_HOME", "KB_FINDINGS")}
    env["KB_HOME"] = str(tmp_path / "unused-kbhome")  # the scripts use their own temp homes
    proc = subprocess.run([sys.executable, str(BENCH / script), "--quick", *args], capture_output=True, text=True,
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
    # every table at its smallest (one size, one timed run, a 1 MB log): what is checked is
    # that each is printed, not its figures
    out = run("speed.py", tmp_path, "--sizes", "100", "--runs", "1", "--log-mb", "1")
    for heading in ("kb ask end to end", "importtime", "index build and re-ingest", "query latency in process",
                    "kb diagnose end to end"):
        assert heading in out, out


def _ask_quality_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("ask_quality", BENCH / "ask_quality.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_heldout_2026_questions_are_labelled_by_fix_class():
    """Questions on the 2026 topics, written from public threads before the findings
    for those topics exist: labelled by fix class, one thread each, none in the dev sets."""
    from urllib.parse import urlparse

    from kb.vocab import FIX_CLASSES

    questions = json.loads((BENCH / "data" / "ask_heldout_2026.json").read_text())
    data = ROOT / "tests" / "data"
    dev = {q["q"].lower() for name in ("ask_questions.json", "ask_dev_extra.json")
           for q in json.loads((data / name).read_text())}
    dev |= {q["q"].lower() for q in json.loads((BENCH / "data" / "ask_heldout.json").read_text())}
    assert len(questions) >= 30
    assert len({q["source"] for q in questions}) == len(questions)
    for q in questions:
        assert set(q) == {"q", "expect_classes", "source"}, q
        assert q["q"].strip() and q["q"].lower() not in dev, q
        assert q["expect_classes"] and all(c in FIX_CLASSES and c != "unclassified" for c in q["expect_classes"]), q
        url = urlparse(q["source"])
        assert url.scheme == "https" and url.netloc == "github.com", q


def test_class_labelled_questions_score_by_the_classes_findings_carry():
    mod = _ask_quality_module()
    classes = {"f-lora": {"lora"}, "f-offload": {"cpu-offload", "unified-memory"}, "f-other": {"eager-mode"}}
    q = {"q": "why so slow with cpu offload", "expect_classes": ["cpu-offload"]}
    assert mod.reciprocal_rank(["f-lora", "f-offload"], q, classes) == 0.5
    assert mod.reciprocal_rank(["f-other", "unknown-id"], q, classes) == 0.0
    by_id = {"q": "x", "expect": ["f-lora"]}  # id-labelled sets keep their meaning
    assert mod.reciprocal_rank(["f-offload", "f-lora"], by_id, classes) == 0.5
    assert mod.is_hit("f-offload", {"q": "x", "expect_classes": ["unified-memory", "lora"]}, classes)
