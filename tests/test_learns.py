"""kb learns: a finding ingested from free-form notes or written by `kb attach` takes
part in the very next diagnosis, with no code change; `--why` explains it; any text
(a pasted issue, standard input) is evidence."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

# the `kb` runs here read the shipped findings: each test's home starts with them indexed
pytestmark = pytest.mark.usefixtures("shipped_home")

DATA = Path(__file__).resolve().parent / "data" / "matcher"
NOTES = DATA / "notes-block-fp8.md"
LOG = DATA / "vllm-block-fp8.log"
NOTE_ID = "notes-block-fp8-block-fp8-gemms-on-the-default-kernel-config"
FIX = "python benchmarks/kernels/benchmark_w8a8_block_fp8.py --tp-size 8 --input-type fp8"
BUDGET = "max_num_batched_tokens ({}) exceeds max_num_seqs * max_model_len ({}). This may lead to unexpected behavior."


def test_unseen_symptom_before_the_notes_gets_no_such_fix(kb):
    out = kb("diagnose", LOG, "--json", check_json=True)
    assert not any(FIX in c for r in out["recommendations"] for c in r["commands"])


def test_ingested_notes_fix_comes_first(kb):
    assert kb("ingest", NOTES).returncode == 0
    out = kb("diagnose", LOG, "--json", check_json=True)
    top = out["recommendations"][0]
    assert top["rule"] == f"finding {NOTE_ID}" and top["basis"] == "symptom"
    assert FIX in top["commands"]
    assert any(m.startswith(f"{NOTE_ID}: log") and "kernel\\ config" in m for m in top["matched"])


def test_why_shows_held_and_failed_conditions(kb, tmp_path):
    assert kb("ingest", NOTES).returncode == 0
    proc = kb("diagnose", LOG, "--why", NOTE_ID)
    assert proc.returncode == 0, proc.stderr
    assert "held     log regex: `Using\\ default\\ W" in proc.stdout and "recommended at rank 1" in proc.stdout
    other = tmp_path / "other.log"
    other.write_text("INFO 03-14 08:00:09 [api_server.py:1395] vLLM API server version 0.10.1.1\n"
                     "WARNING 03-14 08:00:10 [config.py:1] something else entirely went wrong here\n")
    w = kb("diagnose", other, "--why", NOTE_ID, "--json", check_json=True)
    assert [c["state"] for c in w["checks"] if c["condition"].startswith("log")] == ["failed"]
    assert w["recommended"] is None and w["verdict"].startswith("not recommended")
    bad = kb("diagnose", LOG, "--why", "no-such-id")
    assert bad.returncode == 1 and "no rule or finding" in bad.stderr and "Traceback" not in bad.stderr


def test_why_for_a_rule(kb):
    w = kb("diagnose", LOG, "--why", "KB105", "--json", check_json=True)
    assert w["kind"] == "rule" and w["recommended"] is None


def test_attached_finding_is_matched_by_the_next_diagnosis(kb, tmp_path):
    """The warning vLLM's SchedulerConfig prints (vllm/config/scheduler.py) when the
    prefill budget exceeds what the batch can hold; no shipped finding quotes it."""
    log = tmp_path / "vllm.log"
    log.write_text("INFO 03-14 08:00:09 [api_server.py:1395] vLLM API server version 0.11.0\n"
                   f"WARNING 03-14 08:00:10 [scheduler.py:345] {BUDGET.format(65536, 32768)}\n")
    before = kb("diagnose", log, "--json", check_json=True)
    assert not [r for r in before["recommendations"] if r["basis"] == "symptom"]
    proc = kb("attach", "--fix", "lower --max-num-batched-tokens to the batch the server can hold",
              "--symptom", f'server log warns "{BUDGET.format(16384, 8192)}"', "--command",
              "vllm serve Qwen/Qwen3-8B --max-num-batched-tokens 8192", "--fix-class", "chunked-prefill",
              "--engine", "vllm", "--json")
    assert proc.returncode == 0, proc.stderr
    out = kb("diagnose", log, "--json", check_json=True)
    top = out["recommendations"][0]
    assert top["basis"] == "symptom" and top["fix_class"] == "chunked-prefill"
    assert [(f["flag"], f["new"]) for f in top["flags"]] == [("--max-num-batched-tokens", "8192")]


def test_prose_and_stdin_are_text_evidence(kb_home):
    """A pasted issue on standard input: read as text, its engine, version and GPUs used."""
    proc = subprocess.run([sys.executable, "-m", "kb", "diagnose", "-", "--json"],
                          input=(DATA / "issue.txt").read_text(),
                          capture_output=True, text=True, env={**os.environ, "KB_HOME": str(kb_home)}, cwd=ROOT,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    (f,) = out["files"]
    assert f["path"] == "-" and f["kind"] == "text"
    assert out["engine"] == "sglang" and out["engine_version"] == "0.5.2"
    assert out["hardware"]["gpu"] == "H100" and out["hardware"]["count"] == 4
