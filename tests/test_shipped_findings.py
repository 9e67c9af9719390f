"""The knowledge we ship: enough of it, every finding sourced, commands exact."""

import re

import pytest

from ingest.detect import split_paths
from ingest.markdown import read_findings
from kb.store import STORIES_DIR, findings_files, shipped_findings_dir, shipped_source_file
from kb.vocab import FIX_CLASSES


@pytest.fixture(scope="module")
def shipped():
    return [f for p in findings_files(shipped_findings_dir()) for f in read_findings(p)]


def test_at_least_60_complete_findings(shipped):
    assert len([f for f in shipped if f.kind == "finding"]) >= 60


def test_no_shipped_finding_lacks_a_required_field(shipped):
    for f in shipped:
        assert f.kind == "finding" and not f.missing_required(), (f.id, f.missing_required())


def test_every_finding_names_a_source(shipped):
    for f in shipped:
        assert any(s.url or s.path for s in f.sources), f.id


def test_every_cited_file_ships_with_kb_and_holds_the_cited_lines(shipped):
    """A finding may cite a file only if it is part of the package (under findings/,
    which pyproject force-includes whole), so `kb show` points at something real."""
    cited = 0
    for f in shipped:
        for s in f.sources:
            if s.url:
                continue
            local = shipped_source_file(s.path)
            assert local is not None, (f.id, str(s))
            n_lines = len(local.read_text(encoding="utf-8").splitlines())
            assert s.line_start and 1 <= s.line_start <= s.line_end <= n_lines, (f.id, str(s), n_lines)
            cited += 1
    assert cited >= 9  # the GLM-5 story findings cite their story


def test_the_findings_directory_ships_whole():
    text = (shipped_findings_dir().parent / "pyproject.toml").read_text() if (
        shipped_findings_dir().parent / "pyproject.toml").is_file() else None
    if text is None:  # installed from a wheel: the stories came along
        assert (shipped_findings_dir() / STORIES_DIR).is_dir()
    else:
        assert re.search(r'^"findings" = "kb/shipped_findings"$', text, re.M)


def test_stories_are_not_read_as_findings():
    stories = sorted((shipped_findings_dir() / STORIES_DIR).glob("*.md"))
    assert stories
    assert not set(stories) & set(findings_files(shipped_findings_dir()))
    findings, evidence, skipped = split_paths([shipped_findings_dir()])
    assert not set(stories) & set(findings) and not set(stories) & set(evidence)
    assert set(stories) <= {p for p, _ in skipped}


def test_fix_classes_use_the_shared_vocabulary(shipped):
    for f in shipped:
        assert f.fix_classes and set(f.fix_classes) <= set(FIX_CLASSES), (f.id, f.fix_classes)


def test_commands_have_no_placeholders(shipped):
    for f in shipped:
        for c in f.commands:
            assert not re.search(r"<[A-Za-z_ -]+>|\.\.\.|YOUR_", c), (f.id, c)


def test_gains_carry_numbers(shipped):
    for f in shipped:
        for g in f.gains:
            assert g.before is not None or g.after is not None, (f.id, g)


def test_coverage_of_engines_gpus_and_models(shipped):
    text = " ".join(f.model_dump_json() for f in shipped).lower()
    for engine in ("sglang", "vllm"):
        assert engine in text
    for gpu in ("h100", "h200", "b200", "rtx pro 6000", "rtx 5090", "a100", "mi300x"):
        assert gpu in text, gpu
    for model in ("deepseek", "kimi", "glm", "qwen3", "gpt-oss", "llama"):
        assert model in text, model
