"""Benchmark-result readers against the sample files under tests/data/samples.

Every sample file is a test case of its own (glob): it must give at least one
BenchRun with a throughput, claimed by exactly one reader of the right tool.
Specific tests below pin field-name variants, truncation and bad values.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ingest import genai_perf, guidellm, sglang_bench, vllm_bench
from ingest.bench_common import has_throughput, stat_key
from kb.errors import InputError

SAMPLES = Path(__file__).parent / "data" / "samples"
TEXT_PARSERS = (sglang_bench.SglangBenchText, vllm_bench.VllmBenchText)
JSON_READERS = (*sglang_bench.READERS, *vllm_bench.READERS, *guidellm.READERS, *genai_perf.READERS)
DIR_TOOLS = {
    "sglang_bench_text": {"sglang-bench"},
    "sglang_bench_jsonl": {"sglang-bench"},
    "vllm_bench_text": {"vllm-bench"},
    "vllm_bench_json": {"vllm-bench"},
    "guidellm_json": {"guidellm"},
    "genai_perf": {"genai-perf", "aiperf"},
}
# Load levels each known sample holds, in file order (None = no limit / not recorded).
CONCURRENCY = {
    "p1_sglang040_three_runs_typo.txt": [4, 16, None],
    "p1_sglang0410_spec_two_runs.txt": [8, 32],
    "p1_sglang058_three_runs_peak.txt": [1, 8, 32],
    "p1_sglang040_output_file.jsonl": [4, 16, None],
    "p1_sglang0410_output_file.jsonl": [8, 32],
    "p1_sglang058_server_info.jsonl": [1, 8, 32],
    "p1_sglang058_spec_server_info.jsonl": [16],
    "p1_vllm_serve_new_two_runs_spec_goodput.txt": [8, 32],
    "p1_vllm_benchmark_serving_old_rate.txt": [None],
    "p1_vllm_serve_append_result.json": [8, 32],
    "p1_guidellm081_concurrent.json": [1, 4, 16],
    "p1_guidellm081_constant.json": [None, None],
    "p1_guidellm031_concurrent.json": [2, 8],
    "p1_aiperf013_c8_profile_export_aiperf.json": [8],
    "p1_aiperf013_c32_profile_export_aiperf.json": [32],
    "p1_aiperf013_c8_profile_export_aiperf.csv": [None],
    "p1_genai_perf_profile_export_genai_perf.json": [8],
    "p1_genai_perf_profile_export_genai_perf.csv": [None],
}


def sample_files() -> list[Path]:
    """The samples of the formats in those folders, as the format registry names them
    (console tables of GuideLLM, GenAI-Perf and AIPerf are kept beside them as provenance)."""
    from ingest.formats import FORMATS, sample_files as of_format

    return sorted({p for f in FORMATS if f.samples in DIR_TOOLS for p in of_format(f, SAMPLES)},
                  key=lambda p: (p.parent.name, p.name))


def feed_text(cls, path: Path, lines: list[str] | None = None):
    p = cls(str(path))
    for i, line in enumerate(lines if lines is not None else path.read_text(encoding="utf-8").splitlines(), 1):
        p.feed(i, line)
    return p.results()


def json_docs(path: Path):
    """(doc, line) pairs: the whole file, else one per JSONL line."""
    text = path.read_text(encoding="utf-8")
    try:
        return [(json.loads(text), None)]
    except json.JSONDecodeError:
        return [(json.loads(line), i) for i, line in enumerate(text.splitlines(), 1) if line.strip()]


def parse(path: Path) -> dict[str, list]:
    """{reader kind: runs} for every reader that claimed something in the file."""
    out: dict[str, list] = {}
    if path.suffix in (".txt", ".log"):
        for cls in TEXT_PARSERS:
            if runs := feed_text(cls, path):
                out[cls.kind] = runs
    elif path.suffix == ".csv":
        if runs := feed_text(genai_perf.GenAiPerfCsv, path):
            out[genai_perf.CSV_KIND] = runs
    else:
        for doc, line in json_docs(path):
            for reader in JSON_READERS:
                got = reader.read(doc, str(path), line)
                if got is not None:
                    out.setdefault(reader.kind, []).extend(got)
    return out


@pytest.mark.parametrize("path", sample_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_sample_parses(path):
    claimed = parse(path)
    assert len(claimed) == 1, f"claimed by {sorted(claimed)}"
    (runs,) = claimed.values()
    assert runs
    for run in runs:
        assert run.tool in DIR_TOOLS[path.parent.name]
        assert run.throughput() and run.throughput() > 0
        assert run.source is not None and run.source.path == str(path)
    if path.name in CONCURRENCY:
        assert [r.concurrency for r in runs] == CONCURRENCY[path.name]


def by_name(name: str) -> Path:
    (found,) = [p for p in sample_files() if p.name == name]
    return found


def runs_of(name: str):
    (runs,) = parse(by_name(name)).values()
    return runs


# ---------------------------------------------------------------- sglang text


def test_sglang_old_names_typo_and_not_set():
    runs = runs_of("p1_sglang040_three_runs_typo.txt")
    assert [r.request_rate for r in runs] == [math.inf, math.inf, 16.0]
    first = runs[0]
    assert first.tool == "sglang-bench" and first.backend == "sglang-oai"
    assert first.model == "mock-llama-3.1-8b" and first.num_prompts == 48  # from Namespace(...)
    assert first.source.line > 1 and first.completed == 48
    assert first.total_throughput == 3364.54 and first.input_len == 256 and first.output_len == 64
    assert first.ttft_ms["p99"] > first.ttft_ms["median"] > 0 and "mean" in first.e2e_ms
    assert first.peak_output_throughput is None and first.peak_concurrency is None
    assert first.server_args["bench"]["dataset_name"] == "random"


def test_namespace_line_fills_what_the_block_lacks():
    lines = [line for line in lines_of("p1_sglang040_three_runs_typo.txt") if not line.startswith("Max reqeuest")]
    runs = feed_text(sglang_bench.SglangBenchText, Path("x.txt"), lines)
    assert [r.concurrency for r in runs] == [4, 16, None]  # max_concurrency=4/16/None in Namespace(...)
    assert all(r.model == "mock-llama-3.1-8b" for r in runs)


def test_sglang_new_peak_lines_and_p90_e2e():
    runs = runs_of("p1_sglang058_three_runs_peak.txt")
    assert all(r.peak_output_throughput and r.peak_concurrency for r in runs)
    assert runs[2].peak_concurrency == 64 and runs[2].e2e_ms["p90"] > 0
    assert runs[2].server_args["bench"]["mean_concurrency"] == 30.79  # "Concurrency:" is not the limit


def test_sglang_accept_length_line():
    assert [r.accept_length for r in runs_of("p1_sglang0410_spec_two_runs.txt")] == [2.87, 2.87]
    assert all(r.accept_length is None for r in runs_of("p1_sglang040_three_runs_typo.txt"))


def lines_of(name: str) -> list[str]:
    return by_name(name).read_text(encoding="utf-8").splitlines()


def test_truncated_block_keeps_what_was_read():
    lines = lines_of("p1_sglang058_three_runs_peak.txt")
    last = max(i for i, line in enumerate(lines) if "Serving Benchmark Result" in line)
    cut = next(i for i in range(last, len(lines)) if lines[i].startswith("Mean TTFT"))
    runs = feed_text(sglang_bench.SglangBenchText, Path("cut.txt"), lines[: cut + 1])
    assert [r.concurrency for r in runs] == [1, 8, 32]
    assert runs[2].total_throughput == 20106.72 and runs[2].ttft_ms == {"mean": 89.99}
    assert runs[2].itl_ms == {}


def test_block_cut_before_any_throughput_is_dropped():
    lines = lines_of("p1_sglang040_three_runs_typo.txt")
    head = lines.index(next(line for line in lines if "Serving Benchmark Result" in line))
    cut = next(i for i in range(head, len(lines)) if lines[i].startswith("Total input tokens"))
    assert feed_text(sglang_bench.SglangBenchText, Path("cut.txt"), lines[: cut + 1]) == []


def test_block_cut_then_other_output_is_closed():
    lines = lines_of("p1_sglang040_three_runs_typo.txt")
    head = next(i for i, line in enumerate(lines) if "Serving Benchmark Result" in line)
    cut = next(i for i in range(head, len(lines)) if lines[i].startswith("Concurrency") or lines[i].startswith("-"))
    noise = ["Traceback (most recent call last):", '  File "x.py", line 1', "    boom()", "KeyboardInterrupt", "$ ls"]
    tail = lines[cut:]
    runs = feed_text(sglang_bench.SglangBenchText, Path("x.txt"), lines[:cut] + noise + ["Mean TTFT (ms): 1.0"] + tail)
    assert runs[0].ttft_ms.get("mean") != 1.0  # the stray line after the noise is not this block's


def test_garbled_number_drops_only_that_field():
    lines = [line.replace("8300.06", "83OO.06") for line in lines_of("p1_sglang040_three_runs_typo.txt")]
    runs = feed_text(sglang_bench.SglangBenchText, Path("x.txt"), lines)
    assert runs[1].total_throughput is None and runs[1].output_throughput == 1660.01


def test_text_parsers_keep_only_their_tool_blocks():
    mixed = lines_of("p1_sglang0410_spec_two_runs.txt") + lines_of("p1_vllm_serve_new_two_runs_spec_goodput.txt")
    sg = feed_text(sglang_bench.SglangBenchText, Path("mixed.txt"), mixed)
    vl = feed_text(vllm_bench.VllmBenchText, Path("mixed.txt"), mixed)
    assert [r.concurrency for r in sg] == [8, 32] and [r.concurrency for r in vl] == [8, 32]
    assert {r.tool for r in sg} == {"sglang-bench"} and {r.tool for r in vl} == {"vllm-bench"}
    assert vl[0].model is None  # the sglang Namespace line is not carried into vLLM's runs


def test_log_prefixes_do_not_hide_labels():
    lines = [f"[2025-10-14 10:15:02] {line}" for line in lines_of("p1_vllm_benchmark_serving_old_rate.txt")]
    (run,) = feed_text(vllm_bench.VllmBenchText, Path("x.log"), lines)
    assert run.total_throughput and run.ttft_ms["p99"] and run.request_rate == 10.0


# ---------------------------------------------------------------- vLLM text


def test_vllm_old_block_total_token_spelling_and_prelude_rate():
    (run,) = runs_of("p1_vllm_benchmark_serving_old_rate.txt")
    assert run.tool == "vllm-bench" and run.request_rate == 10.0 and run.concurrency is None
    assert run.failed is None and run.peak_output_throughput is None
    assert run.total_throughput and run.tpot_ms["p99"] and run.itl_ms["median"]


def test_vllm_new_block_goodput_peak_and_spec_decoding():
    first, second = runs_of("p1_vllm_serve_new_two_runs_spec_goodput.txt")
    assert first.failed == 0 and first.peak_concurrency == 8.0 and first.accept_length is None
    assert "request_goodput" not in first.server_args.get("bench", {})
    assert second.server_args["bench"]["request_goodput"] == 16.47
    assert second.accept_length == 2.87 and second.server_args["bench"]["acceptance_rate_pct"] == 62.43
    assert second.server_args["bench"]["burstiness"] == 1.0


# ---------------------------------------------------------------- JSON lines


def test_sglang_jsonl_server_info_kept():
    runs = runs_of("p1_sglang058_server_info.jsonl")
    assert all(r.engine_version == "0.5.8" for r in runs)
    args = runs[0].server_args
    assert args["model_path"] == "mock-llama-3.1-8b" and "internal_states" not in args and "version" not in args
    assert runs[0].model == "mock-llama-3.1-8b"
    assert runs[0].peak_output_throughput and runs[0].e2e_ms["p90"]


def test_sglang_jsonl_spec_accept_length_and_args():
    (run,) = runs_of("p1_sglang058_spec_server_info.jsonl")
    assert run.accept_length == 2.87 and run.server_args["speculative_algorithm"] == "EAGLE3"


def test_sglang_jsonl_oldest_keys():
    runs = runs_of("p1_sglang040_output_file.jsonl")
    assert runs[2].request_rate == 16.0 and runs[0].request_rate == math.inf
    assert all(r.output_throughput and r.input_len == 256 for r in runs)
    assert runs[0].ttft_ms == {"median": pytest.approx(17.176, abs=1e-3)}
    # 0.4.0 wrote no request/input throughput: derived as sglang defines them
    assert runs[0].input_throughput == pytest.approx(12288 / runs[0].duration_s)
    assert runs[0].request_throughput == pytest.approx(48 / runs[0].duration_s)


def test_vllm_append_result_lines():
    runs = runs_of("p1_vllm_serve_append_result.json")
    assert [r.source.line for r in runs] == [1, 2]
    assert runs[0].model == "mock-llama-3.1-8b" and runs[0].num_prompts == 64 and runs[0].request_rate == math.inf
    assert runs[1].accept_length == 2.87 and runs[1].server_args["bench"]["request_goodput"] > 0
    assert "latencies" not in runs[1].server_args["bench"]  # per-request arrays are not kept
    assert runs[1].ttft_ms["p99"] == 318.66 and runs[1].total_throughput


def test_json_garbled_value_drops_only_that_field():
    doc, _ = json_docs(by_name("p1_vllm_serve_append_result.json"))[0]
    doc = dict(doc, output_throughput="n/a", mean_ttft_ms="12,5ms", max_concurrency="eight")
    (run,) = vllm_bench.read(doc, "x.json", 3)
    assert run.output_throughput is None and "mean" not in run.ttft_ms and run.concurrency is None
    assert run.total_throughput and run.ttft_ms["median"] == 58.12


def test_json_flavours_are_told_apart():
    (sg, _), *_ = json_docs(by_name("p1_sglang040_output_file.jsonl"))
    (vl, _), *_ = json_docs(by_name("p1_vllm_serve_append_result.json"))
    assert vllm_bench.read(sg, "x", 1) is None and sglang_bench.read(vl, "x", 1) is None
    for reader in (guidellm.read, genai_perf.read, genai_perf.read_aiperf):
        assert reader(sg, "x", 1) is None and reader(vl, "x", 1) is None


# ---------------------------------------------------------------- GuideLLM


def test_guidellm_concurrent_sweep():
    runs = runs_of("p1_guidellm081_concurrent.json")
    for r in runs:
        assert r.tool == "guidellm" and r.model == "mock-llama-3.1-8b" and r.completed == 16
        assert r.input_len == pytest.approx(256, rel=0.1) and r.output_len == pytest.approx(64, rel=0.1)
        assert r.output_throughput and r.total_throughput > r.output_throughput
        assert {"mean", "median", "p99", "p99.9", "p0.1"} <= set(r.ttft_ms)
        assert r.e2e_ms["mean"] > r.ttft_ms["mean"]  # request_latency is seconds in the report
        assert r.tpot_ms["mean"] > 0 and r.itl_ms == {}  # GuideLLM's ITL is TPOT's formula
        assert r.server_args["bench"]["time_per_output_token_ms"]["mean"] > 0
        assert r.server_args["bench"]["strategy"] == "concurrent"


def test_guidellm_constant_rates():
    runs = runs_of("p1_guidellm081_constant.json")
    assert [r.request_rate for r in runs] == [5.0, 20.0]


# ---------------------------------------------------------------- GenAI-Perf / AIPerf


def test_aiperf_json():
    (run,) = runs_of("p1_aiperf013_c8_profile_export_aiperf.json")
    assert run.tool == "aiperf" and run.model == "mock-llama-3.1-8b" and run.completed == 64
    assert run.duration_s and run.input_len == 256 and run.output_len == 64
    assert run.total_throughput and run.input_throughput and run.request_throughput
    assert {"mean", "p50", "median", "p99", "min", "max", "std"} <= set(run.ttft_ms)
    assert run.tpot_ms["mean"] > 0 and run.itl_ms["mean"] > 0  # inter_token vs inter_chunk latency
    assert run.server_args["bench"]["aiperf_version"] == "0.13.0"


def test_aiperf_csv_matches_json():
    (csv_run,) = runs_of("p1_aiperf013_c8_profile_export_aiperf.csv")
    (json_run,) = runs_of("p1_aiperf013_c8_profile_export_aiperf.json")
    assert csv_run.tool == "aiperf"
    assert csv_run.output_throughput == pytest.approx(json_run.output_throughput, abs=0.01)
    assert csv_run.ttft_ms["p99"] == pytest.approx(json_run.ttft_ms["p99"], abs=0.01)
    assert csv_run.completed == 64 and csv_run.duration_s == pytest.approx(json_run.duration_s, abs=0.01)


def test_genai_perf_json_and_csv():
    (run,) = runs_of("p1_genai_perf_profile_export_genai_perf.json")
    assert run.tool == "genai-perf" and run.model == "mock-llama-3.1-8b"
    assert run.ttft_ms["p99"] and run.tpot_ms["mean"] and run.e2e_ms["p50"]
    (csv_run,) = runs_of("p1_genai_perf_profile_export_genai_perf.csv")
    assert csv_run.tool == "genai-perf" and csv_run.output_throughput == pytest.approx(run.output_throughput, abs=0.01)


def test_profile_export_units_convert_to_ms():
    doc = {"request_throughput": {"unit": "requests/sec", "avg": 2.0},
           "time_to_first_token": {"unit": "ns", "avg": 5e6, "p99": 9e6},
           "request_latency": {"unit": "sec", "avg": 1.5}, "input_config": {"concurrency": 4}}
    (run,) = genai_perf.read(doc, "x.json", None)
    assert run.ttft_ms == {"mean": 5.0, "p99": 9.0} and run.e2e_ms == {"mean": 1500.0} and run.concurrency == 4


# ---------------------------------------------------------------- robustness


def test_stat_key_names():
    assert [stat_key(k) for k in ("avg", "P99", "p99.9", "p001", "p01", "p05", "p999", "p50", "std_dev", "x")] == [
        "mean", "p99", "p99.9", "p0.1", "p1", "p5", "p99.9", "p50", "std", None]


def test_reader_bugs_surface_as_input_error(monkeypatch):
    def boom(*_a, **_k):
        raise ZeroDivisionError("x")

    monkeypatch.setattr(sglang_bench.bc, "flat_stats", boom)
    (doc, line), *_ = json_docs(by_name("p1_sglang040_output_file.jsonl"))
    with pytest.raises(InputError) as e:
        sglang_bench.read(doc, "f.jsonl", 7)
    assert e.value.path == "f.jsonl" and e.value.line == 7


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=12), kids, max_size=6),
    max_leaves=30,
)
KEYS = ["backend", "dataset_name", "server_info", "model_id", "date", "request_throughput", "output_throughput",
        "max_concurrency", "request_rate", "completed", "mean_ttft_ms", "p99_itl_ms", "benchmarks", "metrics",
        "input_config", "time_to_first_token", "request_latency", "phases", "decode", "internal_states"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(KEYS), json_values, max_size=8) | json_values)
def test_json_readers_never_crash(doc):
    for reader in JSON_READERS:
        got = reader.read(doc, "fuzz.json", 1)
        assert got is None or isinstance(got, list)


def _sample_lines() -> list[str]:
    out = []
    for d in ("sglang_bench_text", "vllm_bench_text"):
        for p in sorted((SAMPLES / d).glob("p1_*")):
            out += p.read_text(encoding="utf-8").splitlines()
    return out


SAMPLE_LINES = _sample_lines()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(SAMPLE_LINES) | st.text(max_size=60), max_size=80))
def test_text_parsers_never_crash(lines):
    for cls in (*TEXT_PARSERS, genai_perf.GenAiPerfCsv):
        p = cls("fuzz.txt")
        for i, line in enumerate(lines, 1):
            p.feed(i, line)
        for run in p.results():
            assert has_throughput(run)
