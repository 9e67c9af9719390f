"""The knowledge we ship: enough of it, every finding sourced, commands exact."""

import re

import pytest

from ingest.markdown import read_findings
from kb.store import findings_files, shipped_findings_dir
from kb.vocab import FIX_CLASSES


@pytest.fixture(scope="module")
def shipped():
    return [f for p in findings_files(shipped_findings_dir()) for f in read_findings(p)]


def test_at_least_60_complete_findings(shipped):
    assert len([f for f in shipped if f.kind == "finding"]) >= 60


def test_every_finding_names_a_source(shipped):
    for f in shipped:
        assert any(s.url or (s.path and "seeds" in s.path) for s in f.sources), f.id


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
