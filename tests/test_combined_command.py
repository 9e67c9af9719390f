"""The combined launch command: where two recommendations set the same flag or
environment variable differently, the better-ranked value is kept and the disagreement
is reported instead of the last one silently winning."""

from kb.recommend import combined_changes
from kb.records import FlagDiff, Recommendation


def rec(title: str, severity: str = "severe", flags=(), env=None) -> Recommendation:
    return Recommendation(rule="finding x", fix_class="eager-mode", title=title, severity=severity,
                          confidence=0.5, flags=[FlagDiff(flag=f, new=v) for f, v in flags], env=env or {})


def test_better_ranked_value_kept_and_disagreement_said():
    recs = [rec("first", env={"VLLM_USE_FLASHINFER_MOE_FP4": "1"}, flags=[("--max-num-seqs", 256)]),
            rec("second", env={"VLLM_USE_FLASHINFER_MOE_FP4": "0"}, flags=[("--max-num-seqs", 64)])]
    flags, env, conflicts = combined_changes(recs)
    assert env == {"VLLM_USE_FLASHINFER_MOE_FP4": "1"}
    assert flags == [("--max-num-seqs", 256)]
    assert len(conflicts) == 2
    assert "'first' sets it 1, 'second' sets it 0" in conflicts[1]
    assert "keeps 256" in conflicts[0]


def test_agreeing_and_low_severity_changes_are_no_conflict():
    recs = [rec("a", flags=[("--enforce-eager", True)]), rec("b", flags=[("--enforce-eager", True)]),
            rec("c", severity="low", flags=[("--enforce-eager", None)])]
    flags, env, conflicts = combined_changes(recs)
    assert flags == [("--enforce-eager", True)] and env == {} and conflicts == []
