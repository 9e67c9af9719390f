"""The knowledge we ship: enough of it, every finding sourced, commands exact."""

import json
import re
from pathlib import Path

import pytest

from ingest.detect import split_paths
from ingest.markdown import read_findings
from kb.store import STORIES_DIR, findings_files, shipped_findings_dir, shipped_source_file
from kb.conditions import ENGINES, parse_condition, setting_name
from kb.vocab import FIX_CLASSES

KB = Path(__file__).resolve().parents[1] / "kb"


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


def _flag_names() -> set[str]:
    """Every spelling (without dashes) any catalogued sglang or vLLM version accepts."""
    names = set()
    for p in (KB / "data" / "flags").glob("*.json"):
        for flag, spec in json.loads(p.read_text())["flags"].items():
            names.update(a.lstrip("-") for a in spec.get("aliases") or [flag])
    return names


def test_every_finding_says_when_it_applies_and_what_it_was_measured_on(shipped):
    for f in shipped:
        assert f.applies_when, f.id
        assert len(f.extra.get("measured on", "")) > 20, f.id


def test_conditions_name_real_signals_settings_and_engines(shipped):
    signals = set(re.findall(r'id="([a-z0-9-]+)"', (KB / "signals.py").read_text()))
    flags = _flag_names()
    seen = {"signal": 0, "setting": 0, "log": 0}
    for f in shipped:
        for text in f.applies_when:
            c = parse_condition(text)  # the grammar of findings/FORMAT.md
            if c.key == "signal":
                assert c.value in signals, (f.id, text)
            elif c.key == "setting":
                assert setting_name(c) in flags, (f.id, text)
            elif c.key == "engine":
                assert set(re.findall(r"[a-z]+", c.value.split(" ")[0])) <= set(ENGINES), (f.id, text)
            seen[c.key.split(" ")[0]] = seen.get(c.key.split(" ")[0], 0) + 1
    # the conditions are not all context: runs show signals, settings and log lines
    assert seen["signal"] >= 20 and seen["setting"] >= 30 and seen["log"] >= 15, seen


def test_a_version_bound_fix_names_its_versions(shipped):
    by_id = {f.id: f for f in shipped}
    for fid, bound in (("vllm-async-scheduling", "<0.14"), ("hw-gpt-oss-hopper-mxfp4-marlin", "<0.13")):
        assert any(c.startswith("engine:") and bound in c for c in by_id[fid].applies_when), fid


def test_kb_show_says_where_a_cited_story_lies(shipped):
    from kb.render import source_files

    (f,) = [f for f in shipped if f.id == "glm5-flashinfer-cutlass-moe-sm120"]
    lines = source_files(f)
    assert lines and all(line.startswith("source file: ") for line in lines)
    path = lines[0].removeprefix("source file: ").rsplit(":", 1)[0]
    assert Path(path).is_file() and "3,740" in Path(path).read_text(encoding="utf-8")
