"""The library facade (kb.app.KnowledgeBase): the CLI prints exactly what the library
returns, usage errors name settings and exit 2, and only bad values count as odd values."""

import json
import subprocess
import sys

import pytest
from conftest import DATA, ROOT

from kb import KnowledgeBase, signals
from kb.errors import UsageError
from kb.evidence import RunEvidence

GLM5 = DATA / "scenarios" / "glm5-rtx-pro-6000"
LLAMA = DATA / "samples" / "model_configs" / "p3_llama-3.1-70b-instruct.config.json"


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    return tmp_path_factory.mktemp("kbhome")


@pytest.fixture(scope="module")
def base(home):
    return KnowledgeBase(home)


def _kb(home, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kb", "--kb-dir", str(home), *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT, timeout=180)


def test_the_cli_prints_the_facades_ask(base, home):
    q = "throughput plateaus at 128 concurrent requests on RTX PRO 6000"
    res = base.ask(q, limit=3)
    assert len(res.answers) == 3 and res.to_json()["question"] == q
    assert res.text().startswith("1. ") and res.answers[0].finding.title in res.text()
    assert _kb(home, "ask", q, "-n", "3").stdout == res.text() + "\n"
    assert json.loads(_kb(home, "ask", q, "-n", "3", "--json").stdout) == res.to_json()


def test_the_cli_prints_the_facades_diagnosis(base, home):
    res = base.diagnose([GLM5], gpu="8x RTX PRO 6000")
    d = res.to_json()
    assert d["engine"] == "sglang" and d["recommendations"] and d["signals"]
    out = _kb(home, "diagnose", GLM5, "--gpu", "8x RTX PRO 6000", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["recommendations"] == json.loads(res.json_text())["recommendations"]
    assert _kb(home, "diagnose", GLM5, "--gpu", "8x RTX PRO 6000").stdout == res.text() + "\n"


def test_the_cli_prints_the_facades_launch_plan(base, home):
    res = base.plan_launch(str(LLAMA), "4x H100", "vllm", workload="1024:256")
    plan = res.to_json()
    assert plan["engine"] == "vllm" and plan["argv"][:2] == ["vllm", "serve"]
    assert plan["command"] in res.text().splitlines() and "Memory (per GPU)" in res.text()
    out = _kb(home, "launch", "--model", LLAMA, "--gpus", "4x H100", "--engine", "vllm", "--workload", "1024:256")
    assert out.returncode == 0, out.stderr
    assert out.stdout == res.text() + "\n"


def test_show_and_ingest_results(base, home, tmp_path):
    shown = base.show("glm5-throughput-plateau-kernel-bound")
    assert shown.to_json()["id"] == "glm5-throughput-plateau-kernel-bound"
    assert shown.text().splitlines()[0].startswith(shown.finding.title[:20]) or shown.finding.title in shown.text()
    res = base.ingest([GLM5 / "bench.jsonl"])
    assert res.findings == [] and res.bench and res.evidence[0]["path"].endswith("bench.jsonl")
    assert "(run evidence is read, not stored" in res.text()


@pytest.mark.parametrize("call, setting", [
    (lambda b: b.diagnose([GLM5], engine="tgi"), "engine: expected sglang or vllm, got 'tgi'"),
    (lambda b: b.plan_launch(str(LLAMA), "4x H100", "vllm", goal="fast"), "goal: expected throughput or latency"),
    (lambda b: b.plan_launch(str(LLAMA), "4x H100", "vllm", workload="lots"), "workload 'lots': expected"),
    (lambda b: b.compare([GLM5]), "runs: give two runs or more"),
])
def test_usage_errors_name_the_setting(base, call, setting):
    with pytest.raises(UsageError) as e:
        call(base)
    assert setting in str(e.value) and "--" not in str(e.value)


def test_bad_sweep_levels_are_usage_errors_exit_2(home):
    from kb.live.sweep_options import SweepOptions, check_levels, parse_levels

    with pytest.raises(UsageError, match="concurrency: levels above 4096"):
        check_levels(SweepOptions(levels=[8192]))
    with pytest.raises(UsageError, match="concurrency '1,x'"):
        parse_levels("1,x")
    out = _kb(home, "sweep", "http://127.0.0.1:9", "-c", "1,x")  # refused before any connection
    assert out.returncode == 2 and out.stderr.strip().splitlines() == [
        "kb: error: concurrency '1,x': expected comma-separated whole numbers, e.g. 1,8,32,128"]


def test_a_bad_value_skips_a_signal_a_bug_does_not_hide(monkeypatch):
    def odd(ev, t):
        raise ValueError("could not convert string to float: '${MAX_SEQS}'")

    def bug(ev, t):
        return {}["missing"]  # a KeyError in kb's own code

    ev = RunEvidence()
    monkeypatch.setitem(signals.DETECTORS, "low-load", odd)
    assert signals.detect(ev) == [] and "signal low-load not evaluated" in ev.warnings[-1]
    monkeypatch.setitem(signals.DETECTORS, "low-load", bug)
    with pytest.raises(KeyError):
        signals.detect(RunEvidence())


def test_the_facade_loads_on_first_use():
    code = ("import sys, kb.records, kb.errors; assert 'kb.app' not in sys.modules; "
            "from kb import KnowledgeBase; assert 'kb.app' in sys.modules; print(KnowledgeBase.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "kb.app", out.stderr
