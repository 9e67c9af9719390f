"""Offline benchmarks that run the engine in-process (sglang bench_latency / bench_one_batch,
vLLM benchmark_throughput / `vllm bench throughput`): their output becomes BenchRuns and their
command lines the server arguments, never a command to relaunch."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingest.offline_bench import SglangOneBatchText, VllmThroughputText
from ingest.run import read_run
from kb.errors import InputError

SAMPLES = Path(__file__).resolve().parent / "data" / "samples"
HELDOUT = Path(__file__).resolve().parent / "data" / "diagnosis_heldout"


def feed(cls, lines, path="x.txt"):
    p = cls(path)
    for i, line in enumerate(lines, 1):
        p.feed(i, line)
    return p.results()


def runs(records):
    return [r for r in records if type(r).__name__ == "BenchRun"]


def launches(records):
    return [r for r in records if type(r).__name__ == "LaunchCommand"]


def test_vllm_throughput_sample_ran_by_vllm_0_32():
    path = SAMPLES / "vllm_throughput_text" / "run-vllm-0.32.0_bench_throughput_random_tiny-cpu.txt"
    (run,) = runs(feed(VllmThroughputText, path.read_text().splitlines(), str(path)))
    assert (run.request_throughput, run.total_throughput, run.output_throughput) == (7.15, 8245.76, 915.58)
    assert run.tool == "vllm-throughput" and run.backend == "vllm"


def test_vllm_throughput_old_line_and_namespace_give_tp():
    lines = ["Namespace(backend='vllm', dataset=None, input_len=1024, output_len=128, "
             "model='meta-llama/Llama-2-7b-hf', "
             "tokenizer='meta-llama/Llama-2-7b-hf', quantization=None, tensor_parallel_size=4, n=1, num_prompts=200, "
             "seed=0, max_model_len=None, dtype='auto', enforce_eager=False)",
             "Throughput: 3.21 requests/s, 3698.25 tokens/s"]
    got = feed(VllmThroughputText, lines)
    (run,) = runs(got)
    assert run.total_throughput == 3698.25 and run.output_throughput is None and run.num_prompts == 200
    assert run.input_len == 1024 and run.model == "meta-llama/Llama-2-7b-hf"
    (cmd,) = launches(got)
    assert cmd.entry.startswith("bench:") and cmd.get("tensor-parallel-size") == 4


def test_vllm_benchmark_command_alone_gives_server_args_not_a_launch(tmp_path):
    d = HELDOUT / "vllm-1888-mistral7b-tp8-throughput"
    ev = read_run([d / "bench-command.txt"])
    assert ev.engine == "vllm" and ev.tp_size() == 8 and ev.server_args["dtype"] == "float16"
    assert "input_len" not in ev.server_args and "num_prompts" not in ev.server_args  # the benchmark's own
    assert ev.launch_argv == []  # never relaunch the benchmark as if it were the server
    assert ev.model_path == "mistralai/Mistral-7B-Instruct-v0.1"


def test_vllm_hf_backend_is_not_vllm_server_args():
    got = feed(VllmThroughputText, ["python benchmark_throughput.py --backend hf --model gpt2 --hf-max-batch-size 8",
                                    "Throughput: 1.00 requests/s, 100.00 tokens/s"])
    assert not launches(got)


def test_sglang_new_format_sweep_skips_warmup_and_maps_batches():
    path = SAMPLES / "sglang_one_batch_text" / "src-sglang-0.5.23_benchmark-one_batch_bs1-32.txt"
    got = feed(SglangOneBatchText, path.read_text().splitlines(), str(path))
    rs = runs(got)
    assert [r.concurrency for r in rs] == [1, 32]  # the warmup pass is not a result
    assert [(r.input_len, r.output_len) for r in rs] == [(512, 64), (512, 64)]
    assert rs[0].tpot_ms["median"] == pytest.approx(7.09, abs=0.05) and rs[0].ttft_ms["median"] == pytest.approx(39.87)
    assert rs[1].output_throughput == pytest.approx(32 / 0.02451, rel=0.01)
    (cmd,) = launches(got)
    assert cmd.engine == "sglang" and cmd.get("tp-size") == "2" and cmd.get("cuda-graph-max-bs") == "16"
    assert cmd.get("batch-size") is None  # a benchmark argument, not a server flag


def test_sglang_real_output_posted_in_a_pr():
    """Verbatim bench_one_batch output from sglang PR #30147 (no command line was posted)."""
    path = SAMPLES / "sglang_one_batch_text" / "pr30147_qwen3-0.6b_bench_one_batch_bs1.txt"
    (run,) = runs(feed(SglangOneBatchText, path.read_text().splitlines(), str(path)))
    assert run.concurrency == 1  # the warmup pass (median 0.00585 s) is not a result
    assert run.tpot_ms["median"] == pytest.approx(5.72) and run.ttft_ms["median"] == pytest.approx(10.14)
    assert run.output_throughput == pytest.approx(174.85, rel=0.01)
    ev = read_run([path])  # found by content like any other file
    assert len(ev.bench) == 1 and ev.bench[0].tpot_ms["median"] == pytest.approx(5.72)


def test_sglang_old_format_and_disable_cuda_graph_reaches_the_server_args():
    path = SAMPLES / "sglang_one_batch_text" / "src-sglang-0.3.0_bench_latency_bs8_disable-cuda-graph.txt"
    ev = read_run([path])
    (run,) = ev.bench
    assert run.concurrency == 8 and run.output_len == 32 and run.total_throughput == 2193.91
    assert ev.server_args.get("disable_cuda_graph") is True and ev.launch_argv == []


def test_sglang_result_before_its_command_and_abbreviated_flags():
    lines = ["# flashinfer w/o cuda graph",
             "# Decode.  median latency: 0.00823 s, median throughput:    121.46 token/s",
             "python3 -m sglang.bench_latency --model meta-llama/Meta-Llama-3-8B --batch-size 1 --input 128 "
             "--output 8 --attention-backend flashinfer --disable-cuda-graph"]
    got = feed(SglangOneBatchText, lines)
    (run,) = runs(got)
    assert (run.concurrency, run.input_len, run.output_len) == (1, 128, 8)  # `--input` is argparse's abbreviation
    assert run.tpot_ms["median"] == pytest.approx(8.23)
    (cmd,) = launches(got)
    assert cmd.get("disable-cuda-graph") is True and cmd.get("attention-backend") == "flashinfer"


def test_continued_command_lines_are_joined():
    lines = ["python benchmark_throughput.py \\", "    --backend vllm \\", "    --model m/x \\",
             "    --tensor-parallel-size 2 \\", "    --num-prompts 10", "Throughput: 1.50 requests/s, 300.00 tokens/s"]
    got = feed(VllmThroughputText, lines)
    (cmd,) = launches(got)
    assert cmd.get("tensor-parallel-size") == "2"
    assert runs(got)[0].num_prompts == 10


@pytest.mark.parametrize("lines", [
    ["Prefill. latency: nan s, throughput: inf token/s", "Total. latency: 0 s, throughput: 1e999 token/s"],
    ["Decode.  median latency: 9" * 500 + " s, median throughput: 1 token/s"],
    ["python -m sglang.bench_latency \\"] * 400,
    ["python -m sglang.bench_latency --batch-size x y --input-len -3 --output-len 1e9"],
    ["Throughput: 1,2,3 requests/s, 4 tokens/s", "Total num prompt tokens:  99999999999999999999"],
    ["vllm bench throughput --model 'unterminated",
     "Throughput: 1.0 requests/s, 2.0 total tokens/s, 3.0 output tokens/s"],
])
def test_garbage_never_raises_anything_but_input_error(lines):
    for cls in (SglangOneBatchText, VllmThroughputText):
        try:
            feed(cls, lines)
        except InputError:
            pass
