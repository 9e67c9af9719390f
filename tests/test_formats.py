"""The format registry (ingest/formats.py): every reader class in ingest/ has a line in it,
every line has real samples, and every sample is detected as its format the way
`kb ingest` detects it (ingest.detect.split_paths, then ingest.run.read_file)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import ingest
from ingest.detect import split_paths
from ingest.formats import FORMATS, TEXT, Format, describe, of_shape, reported_kind, sample_files, unknown_file
from ingest.run import read_file

SAMPLES = Path(__file__).resolve().parent / "data" / "samples"

# Formats with no public sample yet, and why. The test below fails when one gains samples
# (then remove it here) or when another format lacks them.
NO_PUBLIC_SAMPLE = {
    ("generic-results", "json"): "no verbatim public JSON list of per-level results was found "
                                 "(tests/data/samples/generic_results/SOURCES.md); test_generic_results.py builds one",
}


def _reader_classes() -> set[type]:
    """Classes in ingest/ shaped like a reader (ingest/base.py): a `kind` and feed/results or
    read. A base class other readers extend (ServingBenchText, ServerLogBase) is not one."""
    found = set()
    for mod in pkgutil.iter_modules(ingest.__path__):
        m = importlib.import_module(f"ingest.{mod.name}")
        for _, cls in inspect.getmembers(m, inspect.isclass):
            if cls.__module__ != m.__name__ or not isinstance(getattr(cls, "kind", None), str):
                continue
            if (callable(getattr(cls, "feed", None)) and callable(getattr(cls, "results", None))) \
                    or callable(getattr(cls, "read", None)):
                found.add(cls)
    return {c for c in found if not any(o is not c and issubclass(o, c) for o in found)}


def test_every_reader_class_has_a_registry_line():
    readers = _reader_classes()
    registered = {f.reader for f in FORMATS}
    assert readers - registered == set(), "reader classes with no line in ingest/formats.py"
    assert registered <= readers
    assert len(readers) >= 25  # the scan finds the readers (it found 25 when written)


def test_each_line_is_consistent():
    for f in FORMATS:
        assert f.reader.kind == f.kind, f
        assert f.shape in ("lines", "json") and f.description and f.family and f.samples
    for shape in ("lines", "json"):
        prios = [f.priority for f in of_shape(shape)]
        assert len(prios) == len(set(prios)), f"two {shape} formats share a priority"
    keys = [(f.kind, f.shape) for f in FORMATS]
    assert len(keys) == len(set(keys))
    # a leftover reader reads what the others did not claim: it comes after all of them
    for shape in ("lines", "json"):
        order = of_shape(shape)
        first_leftover = next(i for i, f in enumerate(order) if f.leftover)
        assert all(f.leftover or f.companion for f in order[first_leftover:]), shape
    assert of_shape("lines")[-1].kind == TEXT


def test_every_format_has_a_samples_folder():
    missing = set()
    for f in FORMATS:
        folder = SAMPLES / f.samples
        assert folder.is_dir(), f"{f.kind}: no folder tests/data/samples/{f.samples}"
        assert list(folder.glob("SOURCES*.md")), f"{folder}: no SOURCES.md saying where the samples came from"
        if not sample_files(f, SAMPLES):
            missing.add((f.kind, f.shape))
    assert missing == set(NO_PUBLIC_SAMPLE)


CASES = [(f, p) for f in FORMATS for p in sample_files(f, SAMPLES)]


@pytest.mark.parametrize("fmt,path", CASES, ids=[f"{f.kind}:{p.parent.name}/{p.name}" for f, p in CASES])
def test_sample_is_detected_as_its_format(fmt: Format, path: Path):
    findings, evidence, skipped = split_paths([path])
    assert evidence == [path], "taken for findings markdown" if findings else skipped
    records, kinds = read_file(path, [])
    assert reported_kind(fmt) in kinds
    assert records or fmt.companion


def test_registry_names_what_ingest_reports():
    assert describe("hf-quant-config (read with the config.json beside it)") == "a ModelOpt hf_quant_config.json"
    assert describe("sglang-log").startswith("sglang server log")
    assert describe("no-such-format") is None
    msg = unknown_file()
    assert msg.startswith("not a recognised format (")
    for family in ("benchmark output", "server log", "launch command", "nvidia-smi output", "config.json"):
        assert family in msg


def test_comment_lines_are_not_markdown_headings(tmp_path):
    """A saved /metrics page (`# HELP`/`# TYPE` on every metric) and a log annotated with
    `# --- worker ---` banners were taken for findings: `kb ingest` indexed 184 and 2
    "findings" from two samples. Notes in a .txt with real headings still are findings."""
    from ingest.detect import is_findings

    metrics = SAMPLES / "live" / "vllm-0.32.0_metrics_under_load.txt"
    banner = SAMPLES / "sglang_logs" / "src-sglang-0.5.5_pd-disaggregation_prefill_decode.log"
    assert not is_findings(metrics) and not is_findings(banner)
    notes = tmp_path / "notes.txt"
    notes.write_text("# MoE kernels on H20\n\nThe default config was slow.\n\n## Fix\n\nTune the kernel.\n")
    assert is_findings(notes)


def test_ingest_report_describes_each_format_and_names_them_for_an_unknown_file(kb, tmp_path):
    smi = SAMPLES / "nvidia_smi" / "p3_a100x8_list_and_query_csv.txt"
    quant = SAMPLES / "model_configs" / "p3_nvidia--GLM-5-NVFP4_hf_quant_config.json"
    blob = tmp_path / "blob.bin"
    blob.write_bytes(b"\x00\x01" * 10)
    p = kb("ingest", "--report", smi, quant, tmp_path)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    at = lines.index(f"{smi}: nvidia-smi-csv, nvidia-smi-list → GPU facts: 8x NVIDIA A100-SXM4-80GB")
    assert lines[at + 1:at + 3] == ["  nvidia-smi-csv: `nvidia-smi --query-gpu=… --format=csv`",
                                    "  nvidia-smi-list: `nvidia-smi -L` and env dumps' `GPU 0,1: NAME` lines"]
    assert "  hf-quant-config (read with the config.json beside it): a ModelOpt hf_quant_config.json" in lines
    assert f"{blob}: skipped ({unknown_file()})" in lines
    plain = kb("ingest", smi).stdout
    assert "nvidia-smi-csv:" not in plain  # descriptions only with --report


def test_docs_formats_page_is_current():
    from ingest.formats import document

    page = Path(__file__).resolve().parent.parent / "docs" / "FORMATS.md"
    assert page.read_text(encoding="utf-8") == document(), "regenerate: python -m ingest.formats > docs/FORMATS.md"


def test_a_kind_read_from_text_and_json_is_described_as_both():
    text, js = (f.description for f in FORMATS if f.kind == "generic-results")
    assert describe("generic-results") == f"{text} / {js}"
