"""A serving-benchmark command pasted without its results is the load the server was
given (ingest/bench_command.py): concurrency, request rate, prompts and lengths."""

from conftest import DATA

from ingest.run import read_run
from kb.diagnose import diagnose

SAMPLES = DATA / "samples" / "bench_commands"


def test_vllm_bench_serve_command_gives_its_load():
    ev = read_run([SAMPLES / "vllm-bench-serve-random-c64.txt"])
    (r,) = ev.bench
    assert (r.tool, r.concurrency, r.num_prompts, r.input_len, r.output_len) == ("vllm-bench", 64, 640, 1024, 256)
    assert r.total_throughput is None and r.ttft_ms == {}  # a command measures nothing
    assert ev.model_path == "Qwen/Qwen3-8B" and ev.engine == "vllm"
    assert ev.files[0]["kind"] == "bench-command"


def test_sglang_older_spellings_and_rate(tmp_path):
    p = tmp_path / "bench.sh"
    p.write_text("python3 -m sglang.bench_serving --backend sglang --dataset-name random --random-input 2048 "
                 "--random-output 128 --num-prompt 600 --request-rate 2 --output-file online.jsonl\n")
    (r,) = read_run([p]).bench
    assert (r.tool, r.request_rate, r.num_prompts, r.input_len, r.output_len) == ("sglang-bench", 2.0, 600, 2048, 128)
    assert r.level() == 2.0


def test_shell_variables_and_result_blocks_give_no_command_run(tmp_path):
    p = tmp_path / "sweep.sh"
    p.write_text("python3 -m sglang.bench_serving --backend sglang --max-concurrency ${CONC} \\\n"
                 "    --num-prompts $((CONC*10))\n")
    assert read_run([p]).bench == []
    with_result = DATA / "samples" / "vllm_bench_text" / "run-vllm-0.11.0_bench_serve_rate20_c128_goodput.txt"
    runs = read_run([with_result]).bench
    assert len(runs) == 1 and runs[0].total_throughput  # the result block's run, not a second one


def test_launch_line_and_bench_command_show_a_cap_below_the_load(tmp_path):
    launch = tmp_path / "launch.sh"
    launch.write_text("vllm serve Qwen/Qwen3-8B --max-num-seqs 16\n")
    d = diagnose(read_run([launch, SAMPLES / "vllm-bench-serve-random-c64.txt"], gpu="1x H100"), [])
    rec = next(r for r in d.recommendations if r.rule.startswith("KB101"))
    assert rec.title == "Raise --max-num-seqs from 16 to 64" and rec.severity == "low"


def test_a_nan_value_reads_as_no_value(tmp_path):
    # found by the fuzzer: `--max-concurrency nan` parses as a float (argparse takes it too)
    # and int(nan) raised inside ingest; a NaN is no load at all
    from ingest.bench_command import run_from_command

    run = run_from_command("vllm bench serve --model m --max-concurrency nan --num-prompts 100")
    assert run is not None and run.concurrency is None and run.num_prompts == 100
    assert run_from_command("vllm bench serve --model m --max-concurrency nan --num-prompts nan") is None
