"""Parsers never crash: every ingest entry point on hypothesis-generated input and on
damaged copies of the real samples (benchmarks/fuzz.py, small budget here; run that
script for ≥10,000 cases per parser). The only exceptions allowed out are KbErrors
naming the file (and the line, for a line parser). Plus one regression test per
crash the fuzzing found."""

from __future__ import annotations

import importlib.util
import math
import os
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from kb.errors import InputError, KbError

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("kb_fuzz", ROOT / "benchmarks" / "fuzz.py")
fuzz = importlib.util.module_from_spec(_spec)
sys.modules["kb_fuzz"] = fuzz
_spec.loader.exec_module(fuzz)

EXAMPLES = int(os.environ.get("KB_FUZZ_EXAMPLES", "200"))  # per parser; benchmarks/fuzz.py runs 10,000
TARGETS = {t.name: t for t in fuzz.targets()}


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_parser_never_crashes(name):
    target = TARGETS[name]

    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
              phases=[Phase.generate, Phase.shrink], suppress_health_check=list(HealthCheck))
    @given(target.strategy())
    def check(example):
        target.run(example)  # raises fuzz.Escape for anything but a KbError naming the file

    check()


def test_every_registered_format_is_fuzzed():
    from ingest.formats import FORMATS

    names = {fuzz.target_name(f) for f in FORMATS}
    assert len(names) == len(FORMATS) and names <= set(TARGETS)
    assert {"json.GenericResultsJson", "generic_results.GenericResultsText", "textevidence.TextLines"} <= names


def test_the_fuzzer_reports_an_escape():
    with pytest.raises(fuzz.Escape):
        fuzz._call(lambda: int("x"), "/some/file")
    with pytest.raises(fuzz.Escape, match="does not name the file"):
        fuzz._call(lambda: (_ for _ in ()).throw(InputError("/other", "bad")), "/some/file")
    fuzz._call(lambda: (_ for _ in ()).throw(InputError("/some/file", "bad", 3)), "/some/file", 3)


# ---------------------------------------------------------------- regressions

HUGE = "9" * 5000  # int() of more than 4300 digits raises ValueError


@pytest.mark.parametrize("lines", [
    [f"|   {HUGE}  NVIDIA H100 80GB HBM3   On  |"],
    [f"GPU {HUGE}: NVIDIA H100 (UUID: GPU-1)"],
    [f"GPU 0,{HUGE}: NVIDIA H100"],
    ["Attached GPUs : " + HUGE, "GPU 00000000:01:00.0", "    Product Name : NVIDIA H100"],
    ["Attached GPUs : ²", "GPU 00000000:01:00.0", "    Product Name : NVIDIA H100"],
    ["\tGPU0\tGPU1", "GPU0\tX\tNV18", f"GPU{HUGE}\tNV18\tX"],
    ["NVIDIA H100, " + HUGE],
    ["name, memory.total [MiB]", "NVIDIA H100, 1.2.3 MiB"],
    ["GPU 00000000:01:00.0", "    Product Name : NVIDIA H100", "    FB Memory Usage", f"        Total : {HUGE} MiB"],
])
def test_nvidia_smi_long_numbers(lines):
    from ingest import nvidia_smi

    for hw in nvidia_smi.parse_lines(lines, "smi.txt"):
        assert hw.count < 10_000 and (hw.memory_gb is None or math.isfinite(hw.memory_gb))


def test_nvidia_smi_q_keeps_a_bounded_number_of_gpus():
    from ingest import nvidia_smi

    p = nvidia_smi.NvidiaSmiQ("smi.txt")
    for i in range(5000):
        p.feed(2 * i + 1, f"GPU 0000{i:04X}:01:00.0")
        p.feed(2 * i + 2, "    Product Name : NVIDIA H100")
    assert len(p.gpus) <= nvidia_smi.MAX_GPUS


@pytest.mark.parametrize("text", [
    f"# A\n\nOn {HUGE}x H100 throughput went 1 → 2 tok/s with `vllm serve m`",
    f"# A\n\n{HUGE} GPUs, fix: set --tp 8, throughput 880 → 3740 tok/s `vllm serve m`",
    f"# A\n\n- **ID:** a\n- **Sources:** notes.md:{HUGE}\n",
    f"# A\n\n| Metric | Before | After |\n|---|---|---|\n| tput | 1 | {HUGE} |\n",
])
def test_markdown_long_numbers(text):
    from ingest.markdown import parse_findings

    for f in parse_findings(text, "notes.md"):
        for g in f.gains:
            assert g.before is None or math.isfinite(g.before)
            assert g.after is None or math.isfinite(g.after)
        f.model_dump_json()


@pytest.mark.parametrize("cell", ["1e999", "inf", "nan", "-inf"])
def test_markdown_canonical_gain_not_finite(cell):
    from ingest.markdown import parse_findings

    text = (f"# A\n\n- **ID:** a\n- **Fix:** x\n\n| Metric | Before | After | Unit | Concurrency | Runs |\n"
            f"|---|---|---|---|---|---|\n| tput | 1 | 2 | tok/s | {cell} | 1 |\n")
    with pytest.raises(InputError, match=r"notes.md:8: .*Concurrency"):
        parse_findings(text, "notes.md")


def test_markdown_long_digit_runs_stay_linear():
    """gains.ARROW and vocab.GPU_MENTION could start a match at every digit of a run
    and scan to its end: 10,000 digits took 25 s."""
    from ingest.markdown import parse_findings

    t = time.perf_counter()
    parse_findings("# A\n\nthroughput " + "7" * 20000 + " tok/s 8x H100 " + "5" * 20000 + "x faster\n", "n.md")
    assert time.perf_counter() - t < 5


@pytest.mark.parametrize("gpus", [f"{HUGE}x H100", f"H100 x {HUGE}"])
def test_gpu_string_long_count(gpus):
    from ingest.nvidia_smi import hardware_from_string

    hw, _ = hardware_from_string(gpus)
    assert hw.count < 10**7


@pytest.mark.parametrize("line", ["a" * 200_000, "Mean TTFT " * 20_000, "Namespace(" * 20_000,
                                  "--x " * 50_000, "vllm serve " * 20_000])
def test_bench_text_long_line_in_a_block_is_linear(line):
    """FIELD's lazy label was quadratic in a long line without a colon (20,000 chars: 14 s)."""
    from ingest import run

    t = time.perf_counter()
    for p in run._line_parsers("bench.txt"):
        p.feed(1, "============ Serving Benchmark Result ============")
        p.feed(2, line)
        p.results()
    assert time.perf_counter() - t < 5


def test_bench_text_keeps_a_bounded_number_of_runs(monkeypatch):
    from ingest import bench_text
    from ingest.sglang_bench import SglangBenchText

    monkeypatch.setattr(bench_text, "MAX_RUNS", 3)
    p = SglangBenchText("b.txt")
    n = 0
    for _ in range(10):
        for line in ("============ Serving Benchmark Result ============", "Backend: sglang",
                     "Request throughput (req/s): 1.5", "=" * 50):
            n += 1
            p.feed(n, line)
    assert len(p.results()) == 3


@pytest.mark.parametrize("cfg", [
    [],
    {"num_hidden_layers": [], "n_routed_experts": {"a": 1}},
    {"architectures": {"x": 1}, "num_hidden_layers": 2},
    {"architectures": [[]], "model_type": "llama", "num_hidden_layers": 2},
    {"model_type": "llama", "num_hidden_layers": 10**12, "hidden_size": 8, "num_attention_heads": 1, "vocab_size": 8},
    {"model_type": "x", "num_hidden_layers": 2,
     "rope_scaling": {"factor": 1e308, "original_max_position_embeddings": 1e308}},
    {"model_type": "x", "num_hidden_layers": 2, "hidden_size": "4096", "num_attention_heads": 32},
    {"model_type": "x", "num_hidden_layers": 2, "mlp_only_layers": [[1]]},
    {"model_type": "x", "num_hidden_layers": True},
    {"model_type": "x", "_name_or_path": 5, "num_hidden_layers": 1},
])
def test_hf_config_wrong_types(cfg):
    from ingest.hf_config import profile_from_config

    try:
        profile_from_config(cfg, source="/m/config.json")
    except KbError as e:
        assert "/m/config.json" in str(e)


@pytest.mark.parametrize("quant", [
    {"producer": [], "quantization": {"quant_algo": "NVFP4"}},
    {"producer": {"name": "modelopt"}, "quantization": []},
    {"quantization": {"quant_algo": "MIXED_PRECISION", "quantized_layers": [1]}},
    {"quantization": {"exclude_modules": 5}},
])
def test_hf_quant_wrong_types(quant):
    from ingest.hf_config import profile_from_config

    cfg = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 8, "num_attention_heads": 2, "vocab_size": 8}
    profile_from_config(cfg, quant=quant, source="/m/config.json")


def test_hf_config_wrong_type_names_field(tmp_path):
    from ingest.hf_config import load_profile

    (tmp_path / "config.json").write_text('{"model_type": "llama", "num_hidden_layers": "32"}')
    with pytest.raises(InputError, match=r"config.json: field 'num_hidden_layers': expected a whole number"):
        load_profile(str(tmp_path))


def test_log_parsers_keep_a_bounded_number_of_fields():
    from ingest.serverlog import MAX_EXTRA
    from ingest.sglang_log import SglangLog

    p = SglangLog("s.log")
    for i in range(2000):
        p.feed(2 * i + 1, f"[2025-01-01 00:00:00 TP0] Decode batch, #running-req: 1, field{i}: {i}, token usage: 0.1")
        p.feed(2 * i + 2, f"max_total_num_tokens=5, key{i}=1, other{i}=2")
    (t,) = p.results()
    assert len(t.stats["extra_max"]) <= MAX_EXTRA and len(t.startup) <= 256


def test_gpu_name_normalising_is_linear_in_a_digit_run():
    """kb.hardware._normalise's "40GB" rule backtracked from every digit of a run: a
    5,000-digit name in an nvidia-smi CSV row cost 0.9 s per row (found by fuzzing
    NvidiaSmiCsv, which then spent its time there)."""
    from kb.hardware import _normalise, lookup_gpu

    t = time.perf_counter()
    for _ in range(20):
        _normalise("NVIDIA H100 " + "9" * 20_000)
    assert time.perf_counter() - t < 2
    assert _normalise("NVIDIA A100-SXM4-40GB") == "a100sxm440"
    assert lookup_gpu("NVIDIA H100 80GB HBM3").arch == "SM90"
