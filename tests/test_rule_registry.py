"""The rule registry: metadata checked against the vocabularies, thresholds overridable
from the --thresholds TOML file, `kb rules`, `--why` showing needed evidence, and
docs/RULES.md generated from it."""

import ast
import inspect
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from kb.records import SEVERITIES, SEVERITY_ORDER, shift_severity
from kb.rules import registry
from kb.rules.base import Rule, Threshold
from kb.rules.describe import markdown
from kb.signals import DETECTORS

# the `kb` runs here read the shipped findings: each test's home starts with them indexed
pytestmark = pytest.mark.usefixtures("shipped_home")

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "rules"


def _strings(rule: Rule) -> set[str]:
    """Every string constant in the rule's module."""
    tree = ast.parse(inspect.getsource(sys.modules[rule.check.__module__]))
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def test_shipped_rules_pass_validation():
    registry.validate(registry.RULES)
    assert len(registry.RULES) == len({r.id for r in registry.RULES}) == 16


@pytest.mark.parametrize("rule", registry.RULES, ids=[r.id for r in registry.RULES])
def test_a_rule_declares_every_signal_it_reads(rule):
    read = _strings(rule) & set(DETECTORS)
    assert read == set(rule.signals), f"{rule.id} reads {sorted(read)} but declares {sorted(rule.signals)}"


@pytest.mark.parametrize("rule", registry.RULES, ids=[r.id for r in registry.RULES])
def test_a_rule_uses_every_threshold_it_declares(rule):
    unused = {t.name for t in rule.thresholds} - _strings(rule)
    assert not unused, f"{rule.id} declares thresholds it never reads: {unused}"


def test_bad_metadata_fails_with_one_line_per_problem():
    good = registry.get("KB110")
    bad = replace(good, id="KB901", name="bad-rule", signals=("no-such-signal",), fix_class="faster",
                  needs=("server-log|telepathy",), severity="catastrophic", engines=("trtllm",),
                  thresholds=(Threshold("x", 1, "a"), Threshold("x", 2, "b")))
    with pytest.raises(registry.RuleMetadataError) as e:
        registry.validate([*registry.RULES, bad, replace(good, name="eager-mode-2")])
    msg = str(e.value)
    for text in ("KB901 bad-rule: signal 'no-such-signal'", "KB901 bad-rule: fix class 'faster'",
                 "KB901 bad-rule: needs 'telepathy'", "KB901 bad-rule: severity 'catastrophic'",
                 "KB901 bad-rule: engine 'trtllm'", "threshold 'x' declared twice", "rule id 'KB110' used by more"):
        assert text in msg, (text, msg)


def test_severity_has_one_order():
    assert SEVERITIES == ("none", "low", "moderate", "severe", "critical")
    assert [SEVERITY_ORDER[s] for s in SEVERITIES] == [0, 1, 2, 3, 4]
    assert shift_severity("moderate", -1) == "low" and shift_severity("none", -1) == "none"
    assert shift_severity("severe", 5) == "critical"


def test_rule_thresholds_load_beside_signal_thresholds(tmp_path):
    from kb.errors import InputError

    t = tmp_path / "t.toml"
    t.write_text("[throughput-plateau]\nknee_gain = 0.08\n\n[KB112]\nlatency_max_level = 64\n")
    th = registry.load_thresholds(str(t))
    assert th["throughput-plateau"]["knee_gain"] == 0.08 and th["KB112"]["latency_max_level"] == 64
    assert th["KB103"]["fraction_step"] == 0.04  # untouched defaults stay
    t.write_text("[KB112]\nlatency_max_levl = 4\n")
    with pytest.raises(InputError, match="has no threshold 'latency_max_levl'; known: latency_max_level"):
        registry.load_thresholds(str(t))


def test_an_overridden_threshold_changes_the_diagnosis(kb, tmp_path):
    """KB112's fixture fires at 64 concurrency; calling everything up to 64 a latency
    question (`[KB112] latency_max_level = 64`) keeps it quiet."""
    case = FIXTURES / "KB112" / "fires" / "llama70b-tp8-throughput"
    files = [p for p in sorted(case.iterdir()) if p.name != "case.json"]
    t = tmp_path / "t.toml"
    t.write_text("[KB112]\nlatency_max_level = 64\nthroughput_level = 128\n")

    def rules(*extra):
        out = kb("diagnose", *files, "--gpu", "8x H100", *extra, "--json", check_json=True)
        return [r["rule"].split()[0] for r in out["recommendations"]]

    assert "KB112" in rules()
    assert "KB112" not in rules("--thresholds", t)


def test_kb_rules_lists_and_explains(kb, tmp_path):
    proc = kb("rules")
    assert proc.returncode == 0, proc.stderr
    for r in registry.RULES:
        assert r.id in proc.stdout and r.fix_class in proc.stdout
    assert "server-args, benchmark (sglang only)" in proc.stdout  # KB113's needs
    t = tmp_path / "t.toml"
    t.write_text("[KB103]\nfraction_step = 0.02\n")
    proc = kb("rules", "kv-cache-capacity", "--thresholds", t)
    assert proc.returncode == 0, proc.stderr
    assert "[KB103] fraction_step = 0.02 (default 0.04)" in proc.stdout
    assert "Why: retracted or preempted requests" in proc.stdout and "Example: " in proc.stdout
    row = kb("rules", "--json", check_json=True)[0]
    assert row["id"] == "KB101" and row["needs"] == ["server-log|benchmark"]
    bad = kb("rules", "KB999")
    assert bad.returncode == 1 and "no rule 'KB999'" in bad.stderr and "Traceback" not in bad.stderr


def test_why_shows_the_evidence_a_rule_needs(kb):
    case = FIXTURES / "KB110" / "fires" / "disable-cuda-graph"
    w = kb("diagnose", case / "launch.sh", "--gpu", "1x H100", "--why", "KB103", "--json", check_json=True)
    needs = [c for c in w["checks"] if c["condition"].startswith("needs:")]
    assert needs == [{"condition": "needs: server-log", "state": "failed",
                      "detail": "absent: a server log or /metrics samples"}]
    assert w["checks"][-1]["detail"] == "not run: needed evidence absent"
    w = kb("diagnose", case / "launch.sh", "--gpu", "1x H100", "--why", "KB110", "--json", check_json=True)
    assert [c["state"] for c in w["checks"]] == ["held", "held"] and w["recommended"] == 1


def test_docs_rules_md_is_current():
    doc = ROOT / "docs" / "RULES.md"
    assert doc.read_text() == markdown(), "docs/RULES.md is stale: run python scripts/gen_rules_doc.py"
    for r in registry.RULES:
        assert f"## {r.id} {r.name}" in doc.read_text()
