"""What the thin-evidence test files share (tests/test_findings_*.py): a run written
from a few evidence files and diagnosed as `kb diagnose` does (against the shipped
findings of tests/conftest.py's shipped_records), and where a finding lands among the
recommendations."""

from __future__ import annotations

from ingest.run import read_run
from kb.diagnose import diagnose

LAUNCH = "launch.txt"
LOG = "server.log"
NOTES = "notes.txt"


def diagnose_files(shipped, tmp_path, files: dict[str, str], gpu: str | None = None, engine: str | None = None):
    paths = []
    for name, text in files.items():
        p = tmp_path / name
        p.write_text(text)
        paths.append(p)
    findings, search = shipped
    return diagnose(read_run(paths, gpu=gpu, engine=engine), findings, search=search)


def position(dx, finding_id: str) -> int | None:
    """1-based rank of the recommendation that carries the finding (its own or merged into another)."""
    for i, r in enumerate(dx.recommendations, 1):
        if r.rule == f"finding {finding_id}" or any(c.id == finding_id for c in r.findings):
            return i
    return None


def assert_in_top_3(dx, finding_id: str) -> None:
    """The finding's fix is among the first three recommendations, and that recommendation
    carries a fix (a flag change, an environment change, a command or its prose)."""
    pos = position(dx, finding_id)
    top = [(r.fix_class, r.rule) for r in dx.recommendations[:5]]
    assert pos is not None and pos <= 3, (finding_id, top)
    rec = dx.recommendations[pos - 1]
    assert rec.flags or rec.commands or rec.env or rec.title


def assert_fix_in_top_3(dx, finding_id: str, findings) -> None:
    """assert_in_top_3, and the recommendation that carries the finding is of one of its fix classes."""
    assert_in_top_3(dx, finding_id)
    rec = dx.recommendations[position(dx, finding_id) - 1]
    f = next(f for f in findings if f.id == finding_id)
    assert rec.fix_class in f.fix_classes, (rec.fix_class, f.fix_classes)


def carrying(dx, prefix: str, top: int | None = None) -> list[str]:
    """The recommendations (the first `top`, or all) that carry a finding whose id starts with `prefix`."""
    recs = dx.recommendations[:top] if top else dx.recommendations
    return [r.rule for r in recs
            if r.rule.startswith("finding " + prefix) or any(c.id.startswith(prefix) for c in r.findings)]
