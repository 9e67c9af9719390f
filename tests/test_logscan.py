"""The fast log reader (ingest/logscan.py) gives exactly what the line-by-line reader
gave (tests/reference_read_lines.py, kept verbatim): every sample log, a mixed log long
enough for the down-sampler to skip lines, the fuzz corpus, and the awkward line ends."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from ingest import logscan, run
from tests.reference_read_lines import read_lines_reference

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "tests" / "data" / "samples"
LOGS = sorted(SAMPLES.glob("*_logs/*.log"))


def _module(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, mod)
    spec.loader.exec_module(mod)
    return mod


log_parse = _module("log_parse")
fuzz = sys.modules.get("kb_fuzz") or _module("fuzz")


def dump(result: tuple[list, list[str]]) -> tuple[list, list[str]]:
    """The parsers' records and kinds. The lines kept as text evidence (ingest/textevidence.py,
    for findings' log conditions) came after the reference reader and are left out here;
    a prose file's are its only records, so its kind "text" is left out with them."""
    from kb.evidence import TextLine

    records, kinds = result
    return [r.model_dump() for r in records if not isinstance(r, TextLine)], [k for k in kinds if k != "text"]


def assert_same(path: Path) -> tuple[list, list[str]]:
    new = dump(run._read_lines(path))
    assert new == dump(read_lines_reference(path)), path.name
    return new


def test_sample_dirs_hold_logs():
    assert len(LOGS) >= 40


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.name)
def test_every_sample_log_reads_the_same(path):
    records, kinds = assert_same(path)
    assert kinds  # every sample is recognised as something


@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("mixed") / "server.log"
    log_parse.generate_mixed(p, 3)
    return p


def test_mixed_log_reads_the_same_and_mostly_fast(mixed, monkeypatch):
    fed = []
    real = run._line_parsers

    def counting(path):
        parsers = real(path)
        for p in parsers:
            if p.kind == "sglang-log":
                orig = p.feed
                p.feed = lambda n, line, orig=orig: (fed.append(n), orig(n, line))
        return parsers

    monkeypatch.setattr(run, "_line_parsers", counting)
    records, _ = assert_same(mixed)
    traces = [r for r in records if r.get("engine") in ("sglang", "vllm")]
    assert {t["engine"] for t in traces} == {"sglang", "vllm"}
    lines = mixed.read_bytes().count(b"\n")
    for t in traces:
        assert t["stats"]["samples"] > 4000 and t["stats"]["sample_stride"] > 1  # the sampler skipped lines
        assert t["lines"] == lines
    assert len(fed) < lines / 4  # most lines never reach a per-line parser (the old reader fed all)


def test_line_numbers_of_kept_samples_point_at_their_lines(mixed):
    text = mixed.read_bytes().split(b"\n")
    for t in run._read_lines(mixed)[0]:
        if getattr(t, "engine", None) == "sglang":
            assert t.samples and all(b" batch" in text[s.line - 1] for s in t.samples)


LINE_ENDS = {
    "crlf": lambda u: u.replace(b"\n", b"\r\n"),
    "lone-cr": lambda u: u.replace(b"\n", b"\r", 50),
    "no-final-newline": lambda u: u.rstrip(b"\n"),
    "bad-utf8": lambda u: u.replace(b"Decode batch", b"Decode\xff batch", 3).replace(b"INFO", b"\xe2\x82INFO", 5),
    "blank-lines": lambda u: u.replace(b"\n", b"\n\n", 200),
}


@pytest.mark.parametrize("name", sorted(LINE_ENDS))
def test_awkward_line_ends_read_the_same(tmp_path, name):
    unit = log_parse.mixed_unit(lines=6000, seed=3)
    p = tmp_path / "log"
    p.write_bytes(LINE_ENDS[name](unit * 2))
    assert_same(p)


@pytest.mark.parametrize("cr", [False, True])
def test_overlong_lines_are_cut_as_before(tmp_path, cr):
    unit = log_parse.mixed_unit(lines=3000, seed=5)
    long = b"Decode batch, x: 1, " * (5 * 2**20 // 20)  # past logscan.OVERLONG without a \n
    if cr:
        long = long[: 3 * 2**20] + b"\r" + long
    p = tmp_path / "log"
    p.write_bytes(unit + long + b"\n" + unit + long + b"\r\n" + unit + long)
    assert len(long) > logscan.OVERLONG
    assert_same(p)


def test_every_stats_marker_orders_the_fast_rows():
    for m in run.STATS_MARKERS:
        assert logscan._ORDERED.search(m.encode())


def test_damaged_long_logs_read_the_same(tmp_path):
    """Seeded damage (benchmarks/fuzz.py mutate_bytes) to every sample log, repeated past
    the sampler's first stride so the fast rows are folded, not only fed."""
    rnd = random.Random(16)
    for i, path in enumerate(LOGS):
        data = fuzz.mutate_bytes(path.read_bytes(), rnd)
        p = tmp_path / f"{i}.log"
        p.write_bytes(data * max(1, 4000 // max(1, data.count(b"\n"))) + log_parse.mixed_unit(lines=5000, seed=i))
        assert_same(p)


@settings(max_examples=150, deadline=None, database=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(fuzz.file_bytes())
def test_fuzz_corpus_reads_the_same(data):
    d = fuzz._tmpdir()
    p = d / "same.log"
    p.write_bytes(data)
    assert dump(run._read_lines(p)) == dump(read_lines_reference(p))
