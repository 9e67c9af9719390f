"""Bounded work: no input makes kb hang or grow without bound. Huge lines and files
stream in flat memory (measured with getrusage in a subprocess), deeply nested JSON,
enormous markdown, symlink loops, FIFOs and devices are each reported, not hung on.
benchmarks/bounds.py runs the same with bigger inputs (a 10 GB log with --log-gb 10)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import DATA, ROOT

from kb.errors import InputError, KbError

SCENARIO = DATA / "scenarios" / "glm5-rtx-pro-6000"

RSS_CHILD = """
import resource, sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
from ingest.run import read_run
t = time.perf_counter()
ev = read_run([Path(p) for p in {paths!r}])
print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024, len(ev.files))
"""


def read_run_rss(*paths: Path) -> tuple[float, int]:
    """(seconds, peak RSS in MB) of read_run over `paths`, in a fresh interpreter."""
    out = subprocess.run([sys.executable, "-c", RSS_CHILD.format(root=str(ROOT), paths=[str(p) for p in paths])],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    seconds, rss, _ = out.stdout.split()
    return float(seconds), int(rss)


def write_repeated(path: Path, unit: bytes, size: int) -> Path:
    chunk = unit * max(1, 2**20 // len(unit))
    with open(path, "wb") as fh:
        written = 0
        while written < size:
            fh.write(chunk)
            written += len(chunk)
    return path


def test_a_line_without_end_streams_in_flat_memory(tmp_path):
    """192 MB without a newline (a binary-ish dump, a broken capture): read in 1 MiB
    pieces, the rest of the line skipped, never held whole."""
    small = write_repeated(tmp_path / "small.log", b"x", 2**20)
    big = write_repeated(tmp_path / "big.log", b"Decode batch, #running-req: 1, " * 3 + b"x", 192 * 2**20)
    _, base = read_run_rss(small)
    seconds, rss = read_run_rss(big)
    assert rss - base < 40, (base, rss)  # holding the line would take 192 MB or more
    assert seconds < 60


def test_a_long_log_streams_in_flat_memory(tmp_path):
    """read_run's peak RSS over a 12 MB server log is that of a 1 MB one: every parser
    keeps bounded state (test_log_parsers checks the figures on 50 MB; benchmarks/bounds.py
    reads 10 GB)."""
    src = DATA / "samples" / "sglang_logs" / "src-sglang-0.5.5_deepseek-v3_tp8_rtx-pro-6000.log"
    unit = src.read_bytes()
    _, small = read_run_rss(write_repeated(tmp_path / "small.log", unit, 2**20))
    seconds, big = read_run_rss(write_repeated(tmp_path / "big.log", unit, 12 * 2**20))
    assert big - small < 30, (small, big)


# ---------------------------------------------------------------- JSON nesting


@pytest.mark.parametrize("text", [
    "[" * 200_000 + "]" * 200_000,
    '{"a":' * 100_000 + "1" + "}" * 100_000,
    "[" * 200_000,
    '{"completed": 1, "request_throughput": 1.0, "backend": "sglang", "dataset_name": "r", "server_info": '
    + "[" * 100_000 + "]" * 100_000 + "}",
])
def test_deeply_nested_json_file(tmp_path, text):
    """Nesting past the interpreter's limit (json.loads raises RecursionError): the file
    is reported as not recognised, quickly, as a whole document and as JSON lines."""
    from ingest.run import read_file, read_run

    t = time.perf_counter()
    p = tmp_path / "deep.json"
    p.write_text(text)
    assert read_file(p, []) == ([], [])
    p2 = tmp_path / "deep.jsonl"
    p2.write_text(text + "\n" + text + "\n")
    for f in (p, p2):
        (got,) = read_run([f]).files
        assert got["path"] == str(f) and got["skipped"].startswith("not a recognised format"), got
    assert time.perf_counter() - t < 30


def test_nested_but_parseable_server_info_is_read_and_printed(tmp_path, kb):
    """A document json.loads can read (depth 500) still goes through the readers, the
    redaction and `kb diagnose --json` without a RecursionError."""
    sweep = DATA / "samples" / "sglang_bench_jsonl" / "run-sglang-0.5.5_sweep_c1-32-128-256_server-info.jsonl"
    line = json.loads(sweep.read_text().splitlines()[0])
    deep: object = 1
    for _ in range(500):
        deep = [deep]
    line["server_info"]["deep"] = deep
    p = tmp_path / "bench.jsonl"
    p.write_text(json.dumps(line) + "\n")
    proc = kb("diagnose", str(p), "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    json.loads(proc.stdout)


@pytest.mark.parametrize("text", ['{"a":' * 100_000 + "1" + "}" * 100_000, '{"num_hidden_layers": ' + "9" * 5000 + "}"])
def test_deep_or_huge_config_json(tmp_path, text):
    from ingest.hf_config import load_profile

    (tmp_path / "config.json").write_text(text)
    with pytest.raises(InputError, match="config.json"):
        load_profile(str(tmp_path))


# ---------------------------------------------------------------- markdown


def test_a_50mb_markdown_file_is_refused_at_once(tmp_path, kb):
    big = tmp_path / "notes.md"
    with open(big, "wb") as fh:
        fh.write(b"# Notes\n\n" + b"word " * 1000 + b"\n")
        fh.truncate(50 * 2**20)
    t = time.perf_counter()
    proc = kb("ingest", str(big))
    assert proc.returncode == 1
    assert "notes.md: too large (50.0 MiB; the limit is 1.0 MiB)" in proc.stderr
    assert time.perf_counter() - t < 20


def test_read_text_cap(tmp_path):
    from kb.textfile import read_text

    p = tmp_path / "a.md"
    p.write_text("# a\n" * 1000)
    with pytest.raises(InputError, match="too large"):
        read_text(p, max_bytes=100)
    assert read_text(p).startswith("# a")


def test_an_enormous_markdown_table_is_parsed_in_bounded_time(tmp_path):
    """5,000 rows × 6 columns (~150 KB): parsed whole; 1 MiB (the cap) bounds the worst case."""
    from ingest.markdown import read_findings

    p = tmp_path / "table.md"
    rows = "".join(f"| tput {i} | {i} | {i + 1} | tok/s | {i % 512} | 1 |\n" for i in range(5000))
    p.write_text("# Sweep\n\n| Metric | Before | After | Unit | Concurrency | Runs |\n|---|---|---|---|---|---|\n"
                 + rows)
    t = time.perf_counter()
    recs = read_findings(p)
    assert time.perf_counter() - t < 30
    assert len(recs) == 1 and "tput 4999" in recs[0].body


def test_a_wide_markdown_table_is_bounded(tmp_path):
    from ingest.markdown import read_findings

    p = tmp_path / "wide.md"
    p.write_text("# Wide\n\n" + "|a" * 3000 + "|\n" + "|-" * 3000 + "|\n" + ("|1" * 3000 + "|\n") * 20)
    t = time.perf_counter()
    read_findings(p)
    assert time.perf_counter() - t < 30


# ---------------------------------------------------------------- links, FIFOs, devices


def test_symlink_loops_in_a_directory(tmp_path, kb):
    run = tmp_path / "run"
    (run / "sub").mkdir(parents=True)
    (run / "bench.jsonl").write_text((SCENARIO / "bench.jsonl").read_text())
    (run / "sub" / "up").symlink_to(run, target_is_directory=True)  # a directory loop
    (run / "self").symlink_to(run / "self")  # a link to itself
    (run / "a").symlink_to(run / "b")
    (run / "b").symlink_to(run / "a")  # a two-link loop
    (run / "dangling").symlink_to(tmp_path / "nowhere")
    for args in (["diagnose", str(run), "--json"], ["signals", str(run), "--json"]):
        proc = kb(*args)
        assert proc.returncode == 0, proc.stderr
        files = json.loads(proc.stdout)["files"]
        skipped = {Path(f["path"]).name: f["skipped"] for f in files if "skipped" in f}
        assert {"self", "a", "b", "dangling"} <= set(skipped)
        assert "symbolic links" in skipped["self"] and "no such file" in skipped["dangling"].lower()
        assert any(f.get("kind") for f in files if f["path"].endswith("bench.jsonl"))
    proc = kb("ingest", str(run))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr


@pytest.fixture
def specials(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    fifo_md = tmp_path / "notes.md"
    os.mkfifo(fifo_md)
    return fifo, fifo_md


def test_fifos_and_devices_as_arguments(specials, kb_home, tmp_path):
    """Every way a path reaches kb, given a FIFO (which would block a reader forever) or
    /dev/zero (which never ends): each command ends promptly, exit 0 with the file
    reported as skipped, or exit 1 naming it; none hangs, none prints a traceback."""
    fifo, fifo_md = specials
    own = kb_home / "findings"
    own.mkdir(parents=True)
    os.mkfifo(own / "fifo.md")  # an auto source that is not a file
    cmds = [
        (["ingest", "/dev/zero"], 1), (["ingest", str(fifo)], 1), (["ingest", str(fifo_md)], 1),
        (["ingest", str(tmp_path)], 0), (["diagnose", "/dev/zero"], 0), (["signals", str(fifo)], 0),
        (["ask", "throughput plateau", "--run", "/dev/zero"], 0),
        (["diagnose", str(SCENARIO), "--config", "/dev/zero"], 1),
        (["diagnose", str(SCENARIO), "--thresholds", "/dev/zero"], 1),
        (["diagnose", str(SCENARIO), "--thresholds", str(fifo)], 1),
        (["launch", "--model", "/dev/zero", "--gpus", "8x H100", "--engine", "vllm"], 1),
        (["launch", "--model", str(fifo), "--gpus", "8x H100", "--engine", "vllm"], 1),
        (["attach", "--before", "/dev/zero", "--after", str(fifo), "--fix", "x"], 1),
    ]
    env = {**os.environ, "KB_HOME": str(kb_home), "KB_FINDINGS": str(fifo_md)}
    procs = [subprocess.Popen([sys.executable, "-m", "kb", *c], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for c, _ in cmds]
    try:
        results = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for (c, want), p, (out, err) in zip(cmds, procs, results, strict=True):
        assert p.returncode == want, (c, out[-500:], err[-500:])
        assert "Traceback" not in err, (c, err)
        shown = out + err
        assert "not a regular file" in shown or "no config.json" in shown or "no benchmark results" in shown \
            or c[0] in ("ask",), (c, shown[-800:])


def test_read_text_never_opens_a_fifo_for_a_blocking_read(specials):
    from kb.textfile import read_text

    fifo, _ = specials
    t = time.perf_counter()
    with pytest.raises(InputError, match="not a regular file"):
        read_text(fifo)
    with pytest.raises(InputError, match="not a regular file"):
        read_text("/dev/zero")
    assert time.perf_counter() - t < 5


def test_thresholds_of_the_wrong_type(tmp_path):
    from kb.signals import load_thresholds

    p = tmp_path / "t.toml"
    p.write_text('[throughput-plateau]\nknee_gain = "high"\n')
    with pytest.raises(KbError, match="expected a number"):
        load_thresholds(str(p))


def test_json_lines_records_are_capped_with_a_warning(tmp_path, monkeypatch):
    from ingest import run

    monkeypatch.setattr(run, "MAX_RECORDS", 3)
    sweep = DATA / "samples" / "sglang_bench_jsonl" / "run-sglang-0.5.5_sweep_c1-32-128-256_server-info.jsonl"
    p = tmp_path / "many.jsonl"
    p.write_text(sweep.read_text() * 3)
    ev = run.read_run([p])
    assert len(ev.bench) == 3
    assert any("more than 3 records" in w and "many.jsonl:" in w for w in ev.warnings)


def test_stream_lines_cuts_long_lines():
    import io

    from kb.textfile import lines

    text = "short\n" + "x" * 10_000 + "\nafter\n" + "y" * 5000
    assert [len(x) for x in lines(io.StringIO(text), limit=1024)] == [5, 1024, 5, 1024]
    assert list(lines(io.BytesIO(b"a\r\nb"), limit=4)) == [b"a", b"b"]
