"""Benchmark-method: kb.benchcmd reads serving-benchmark commands; the shipped benchmark-method
findings and KB115 recommend the corrected command."""

import pytest

from kb import benchcmd


def test_parse_vllm_bench_serve_with_continuations_and_defaults():
    cmd = benchcmd.parse("$ vllm bench serve --model Qwen/Qwen3-8B \\\n  --dataset-name random --num-prompts=50 \\\n"
                         "  --max-concurrency 64 --ignore-eos\n")
    assert cmd.tool == "vllm"
    assert cmd.number("--num-prompts") == 50 and cmd.number("--max-concurrency") == 64
    assert cmd.ignores_eos and cmd.warmups == 0  # vLLM sends no warm-up unless --num-warmups is given


def test_parse_sglang_bench_serving_defaults():
    cmd = benchcmd.parse("python3 -m sglang.bench_serving --backend sglang --dataset-name random --request-rate inf")
    assert cmd.tool == "sglang"
    assert cmd.number("--request-rate") == float("inf")
    assert cmd.ignores_eos and cmd.warmups == 1  # sglang ignores EOS and sends one warm-up request by default
    assert not benchcmd.parse("python3 -m sglang.bench_serving --disable-ignore-eos").ignores_eos


def test_with_args_replaces_values_and_switches_and_keeps_the_rest():
    cmd = benchcmd.parse("vllm bench serve --model m --num-prompts 50 --ignore-eos --max-concurrency 64")
    out = cmd.with_args({"--num-prompts": 640, "--num-warmups": 128})
    assert out == "vllm bench serve --model m --ignore-eos --max-concurrency 64 --num-prompts 640 --num-warmups 128"


@pytest.mark.parametrize("text", ["vllm serve Qwen/Qwen3-8B --max-num-seqs 64", "benchmark results below", ""])
def test_parse_is_none_without_a_benchmark_command(text):
    assert benchcmd.parse(text) is None


@pytest.fixture(scope="module")
def shipped():
    from ingest.markdown import read_findings
    from kb.store import findings_files, shipped_findings_dir

    return [f for p in findings_files(shipped_findings_dir()) for f in read_findings(p)]


def test_unbounded_request_rate_inf_command_gets_the_queueing_finding(shipped, tmp_path):
    from ingest.run import read_run
    from kb.diagnose import diagnose

    (tmp_path / "notes.txt").write_text(
        "Why is our TTFT 40 seconds? We ran:\n"
        "vllm bench serve --model Qwen/Qwen3-8B --dataset-name sharegpt --request-rate inf --num-prompts 2000\n")
    dx = diagnose(read_run([tmp_path / "notes.txt"], engine="vllm"), shipped)
    rec = next(r for r in dx.recommendations if r.rule == "finding bm-request-rate-inf-queueing")
    assert rec.fix_class == "benchmark-method" and rec.basis == "symptom"


def test_the_same_command_with_a_concurrency_limit_is_not_that_finding(shipped, tmp_path):
    from ingest.run import read_run
    from kb.diagnose import diagnose

    (tmp_path / "notes.txt").write_text(
        "vllm bench serve --model Qwen/Qwen3-8B --dataset-name sharegpt --request-rate inf --max-concurrency 64 "
        "--num-prompts 640 --num-warmups 128\n")
    dx = diagnose(read_run([tmp_path / "notes.txt"], engine="vllm"), shipped)
    assert all(r.rule != "finding bm-request-rate-inf-queueing" for r in dx.recommendations)
    assert all(r.fix_class != "benchmark-method" or not r.rule.startswith("KB115") for r in dx.recommendations)
