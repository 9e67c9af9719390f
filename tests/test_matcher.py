"""kb/match.py and the merge in kb/recommend.py: conditions held / unknown / failed
against a run, exclusion by context, evidence over context, a finding's fix applied to
this engine version, and a rule and a finding proposing the same change merged."""

from pathlib import Path

import pytest

from ingest.markdown import read_findings
from ingest.run import read_run
from kb.diagnose import diagnose, why
from kb.flags import catalog
from kb.match import check, resolve_flag
from kb.records import Condition, Finding

DATA = Path(__file__).resolve().parent / "data" / "matcher"


@pytest.fixture(scope="module")
def fixtures():
    return {f.id: f for f in read_findings(DATA / "findings-conditions.md")}


@pytest.fixture(scope="module")
def issue_dx(fixtures):
    ev = read_run([DATA / "issue.txt"])
    return diagnose(ev, list(fixtures.values()))


def states(dx, fid):
    m = next(m for m in dx.matches if m.finding.id == fid)
    return {str(c.condition): c.state for c in m.checks}


def test_text_condition_and_version_range_hold_from_prose(issue_dx):
    s = states(issue_dx, "fx-bs32-collapse")
    assert s == {"engine: sglang >=0.5.0,<0.5.4": "held", 'text: "bs32 collapses"': "held"}
    top = issue_dx.recommendations[0]
    assert top.rule == "finding fx-bs32-collapse" and top.basis == "symptom"
    assert [(f.flag, f.new) for f in top.flags] == [("--disable-cuda-graph", True)]


def test_failed_context_condition_excludes_the_finding(issue_dx):
    s = states(issue_dx, "fx-vllm-only")
    assert s["engine: vllm"] == "failed" and s['text: "bs32 collapses"'] == "held"
    assert not any(r.rule == "finding fx-vllm-only" for r in issue_dx.recommendations)
    w = why(issue_dx, "fx-vllm-only")
    assert w["verdict"].startswith("excluded: engine: vllm")


def test_unknown_when_the_run_does_not_say(issue_dx):
    # no launch command or config.json: the prose's "Launch flags: --tp 4 --enable-dp-attention."
    # says how the server runs; a setting it never names stays unknown (absent is not proven)
    s = states(issue_dx, "fx-dp-attention-context")
    assert s["gpu count: <=4"] == "held"
    assert s["setting: enable-dp-attention present"] == "held"
    assert s["setting: max-running-requests absent"] == "unknown"
    assert s["model family: qwen3-moe"] == "held"  # named in the prose


def test_settings_from_a_launch_command(fixtures, tmp_path):
    (tmp_path / "launch.txt").write_text(
        "python -m sglang.launch_server --model-path Qwen/Qwen3-30B-A3B --tp-size 4 --enable-dp-attention\n")
    ev = read_run([tmp_path / "launch.txt"], gpu="4x H100")
    dx = diagnose(ev, [fixtures["fx-dp-attention-context"]])
    s = states(dx, "fx-dp-attention-context")
    assert s["setting: enable-dp-attention present"] == "held"
    assert s["setting: max-running-requests absent"] == "held"
    r = next(r for r in dx.recommendations if r.rule == "finding fx-dp-attention-context")
    assert r.basis == "context" and r.severity == "low"
    assert [(f.flag, f.new) for f in r.flags] == [("--enable-dp-attention", None)]
    assert "--enable-dp-attention" not in r.commands[0] and "--tp-size 4" in r.commands[0]


def test_renamed_flag_is_translated_and_missing_flag_dropped():
    new = catalog("sglang", "0.5.23")
    assert resolve_flag("--cuda-graph-max-bs", "sglang", new)[0] == "--cuda-graph-max-bs-decode"
    old = catalog("sglang", "0.5.8")
    flag, why_ = resolve_flag("--cuda-graph-max-bs-decode", "sglang", old)
    assert flag == "--cuda-graph-max-bs" and "spelled" in why_
    assert resolve_flag("--max-num-seqs", "sglang", old)[0] == "--max-running-requests"  # vLLM's name for it
    flag, why_ = resolve_flag("--no-such-knob", "vllm", catalog("vllm", "0.11.0"))
    assert flag is None and "not a vllm 0.11.0 flag" in why_


def test_evidence_counts_far_more_than_context(tmp_path):
    f = Finding(id="fx-log", title="t", fix="x", fix_classes=["unclassified"], confidence="low",
                applies_when=[Condition(key="log", value='"Detected a frozen decode loop"'),
                              Condition(key="gpu count", value=">=1")])
    g = Finding(id="fx-ctx", title="t", fix="x", fix_classes=["unclassified"], confidence="low",
                applies_when=[Condition(key="gpu count", value=">=1"), Condition(key="gpu arch", value="SM90")])
    log = tmp_path / "s.log"
    log.write_text("[2026-03-01 10:00:01 TP0] WARNING: Detected a frozen decode loop\n")
    dx = diagnose(read_run([log], gpu="1x H100", engine="sglang"), [g, f])
    by = {m.finding.id: m for m in dx.matches}
    assert by["fx-log"].score > by["fx-ctx"].score + 2
    assert [r.rule for r in dx.recommendations][:2] == ["finding fx-log", "finding fx-ctx"]


def test_rule_and_finding_with_the_same_change_merge(tmp_path):
    """KB110 removes --disable-cuda-graph; a finding of the same class whose log line
    matched joins that recommendation instead of standing beside it."""
    f = Finding(id="fx-eager-leftover", title="graphs off", fix="remove `--disable-cuda-graph`",
                fix_classes=["eager-mode"], confidence="low",
                applies_when=[Condition(key="log", value='"CUDA graph is disabled"')])
    log = tmp_path / "s.log"
    log.write_text("python -m sglang.launch_server --model-path m --disable-cuda-graph\n"
                   "[2026-03-01 10:00:01] WARNING: CUDA graph is disabled, decode is slow\n")
    dx = diagnose(read_run([log]), [f])
    eager = [r for r in dx.recommendations if r.fix_class == "eager-mode"]
    assert len(eager) == 1 and eager[0].rule.startswith("KB110")
    assert eager[0].findings[0].id == "fx-eager-leftover" and eager[0].matched


def test_finding_with_matched_evidence_withdraws_the_opposite_rule(tmp_path):
    """Both directions: eager mode kept on for a version with a known CUDA-graph
    regression (the finding's range holds) withdraws KB110's 'remove it'."""
    f = Finding(id="fx-graph-regression", title="graphs broken in 0.5.2", fix="keep `--disable-cuda-graph` on 0.5.2",
                fix_classes=["eager-mode"], confidence="low",
                applies_when=[Condition(key="engine", value="sglang >=0.5.2,<0.5.3"),
                              Condition(key="log regex", value="`illegal memory access.*cuda graph`")])
    log = tmp_path / "s.log"
    log.write_text("python -m sglang.launch_server --model-path m --disable-cuda-graph\n"
                   "RuntimeError: CUDA error: an illegal memory access was encountered during cuda graph replay\n")
    ev = read_run([log])
    ev.engine_version = "0.5.2"
    dx = diagnose(ev, [f])
    assert not any(r.rule.startswith("KB110") for r in dx.recommendations)
    top = dx.recommendations[0]
    assert top.rule == "finding fx-graph-regression" and any("KB110" in n for n in top.notes)


def test_condition_check_states_directly():
    from kb.evidence import RunEvidence
    from kb.match import Facts

    facts = Facts.of(RunEvidence(engine="vllm", engine_version="0.11.0"), "vllm", catalog("vllm", "0.11.0"), [])
    assert check(Condition(key="engine", value="vllm >=0.10,<0.12"), facts).state == "held"
    assert check(Condition(key="engine", value="vllm >=0.12"), facts).state == "failed"
    assert check(Condition(key="gpu arch", value="SM90"), facts).state == "unknown"
    assert check(Condition(key="signal", value="throughput-plateau"), facts).state == "unknown"
    assert check(Condition(key="setting", value="max-num-seqs <256"), facts).state == "unknown"


def test_unset_setting_fails_a_comparison_that_asks_for_a_set_value():
    from kb.evidence import RunEvidence
    from kb.match import Facts

    ev = RunEvidence(engine="sglang", engine_version="0.5.8", server_args={"tp_size": 8},
                     launch_argv=["python", "-m", "sglang.launch_server", "--tp-size", "8"])
    facts = Facts.of(ev, "sglang", catalog("sglang", "0.5.8"), [])
    assert check(Condition(key="setting", value="speculative-eagle-topk >1"), facts).state == "failed"
    assert check(Condition(key="setting", value="tp-size >=8"), facts).state == "held"
    assert check(Condition(key="setting", value="tensor-parallel-size >=8"), facts).state == "held"  # vLLM's name
    assert check(Condition(key="setting", value="enable-dp-attention absent"), facts).state == "held"


def test_a_signal_alone_needs_the_findings_context_to_hold():
    """A plateau has many causes: a finding about bitsandbytes weights claims it only when
    the run is known to use them; a matched log line needs no such proof."""
    from kb.records import BenchRun, Where

    def finding(fid, quant):
        return Finding(id=fid, title="t", fix="use an AWQ checkpoint", fix_classes=["quantization-kernel"],
                       confidence="low", applies_when=[Condition(key="quantization", value=quant),
                                                       Condition(key="signal", value="throughput-plateau")])

    runs = [BenchRun(tool="vllm-bench", concurrency=c, total_throughput=t, source=Where(path="b.txt"))
            for c, t in ((32, 800), (64, 830), (128, 840))]
    ev = run_with(runs)
    dx = diagnose(ev, [finding("fx-bnb", "bnb")])
    assert not any(r.rule == "finding fx-bnb" for r in dx.recommendations)
    assert "only a signal held" in why(dx, "fx-bnb")["verdict"]
    ev.text_context = {"quantization": "bnb"}
    dx = diagnose(ev, [finding("fx-bnb", "bnb")])
    assert dx.recommendations[0].rule == "finding fx-bnb" and dx.recommendations[0].basis == "symptom"


def run_with(runs):
    from kb.evidence import RunEvidence

    return RunEvidence(engine="vllm", engine_version="0.11.0", bench=runs)
