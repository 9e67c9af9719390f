"""Run evidence end to end: content detection over the verbatim samples, mixed
terminal captures, directories with traps, truncated and garbled inputs."""

import json
import os

import pytest
from conftest import DATA

from ingest.run import read_run

SAMPLES = DATA / "samples"
# console tables of GenAI-Perf / AIPerf / GuideLLM are not parsed: their JSON exports are
CONSOLE_ONLY = ("_console.txt",)
NOT_RUN_FILES = ("live",
                 "prometheus")  # HTTP answers of live servers and Prometheus (kb probe, kb diagnose --prometheus)


def sample_files():
    for p in sorted(SAMPLES.rglob("*")):
        if p.relative_to(SAMPLES).parts[0] in NOT_RUN_FILES:
            continue
        if p.is_file() and p.suffix != ".md" and not p.name.endswith(CONSOLE_ONLY):
            yield p


@pytest.mark.parametrize("path", list(sample_files()), ids=lambda p: str(p.relative_to(SAMPLES)))
def test_every_sample_is_recognised_by_content(path, tmp_path):
    # renamed, so only the content can tell what it is
    blind = tmp_path / "capture"
    blind.write_bytes(path.read_bytes())
    if path.name.endswith("hf_quant_config.json"):
        blind = tmp_path / "hf_quant_config.json"
        blind.write_bytes(path.read_bytes())
    ev = read_run([blind])
    (entry,) = ev.files
    assert "kind" in entry, entry


def test_directory_report_and_curve():
    ev = read_run([SAMPLES / "sglang_bench_jsonl"])
    assert all("kind" in f for f in ev.files if not f["path"].endswith(".md"))
    assert len(ev.curve()) >= 3


def test_mixed_terminal_capture_yields_each_part(tmp_path):
    parts = [
        (SAMPLES / "launch_commands" / "p2_vllm_issue28228_env_continuation.txt").read_text(),
        (SAMPLES / "sglang_logs" / "p2_grok2_v052rc2_tp8_startup.log").read_text(),
        (SAMPLES / "sglang_bench_text" / "run-sglang-0.5.23_random_c256_peak.txt").read_text(),
    ]
    cap = tmp_path / "terminal.txt"
    cap.write_text("\n".join(parts))
    ev = read_run([cap])
    kinds = ev.files[0]["kind"]
    for kind in ("launch-command", "sglang-log", "sglang-bench-text"):
        assert kind in kinds
    assert ev.bench and ev.bench[0].concurrency == 256
    assert ev.traces[0].startup.get("max_total_num_tokens")
    assert ev.launch_argv


def test_launch_option_is_parsed_into_server_args(tmp_path):
    log = tmp_path / "s.log"
    log.write_text((SAMPLES / "sglang_logs" / "p2_grok2_v052rc2_tp8_startup.log").read_text())
    ev = read_run([log],
                  launch="python -m sglang.launch_server --model-path 'my models/x' --tp-size 4 "
                         "--max-running-requests 64")
    assert ev.server_args["tp_size"] == "4" and ev.model_path == "my models/x"
    assert ev.launch_argv[:3] == ["python", "-m", "sglang.launch_server"]


def test_traps_in_a_directory_are_reported_not_read(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    (d / "bench.jsonl").write_text((SAMPLES / "sglang_bench_jsonl" / "p1_sglang058_server_info.jsonl").read_text())
    os.mkfifo(d / "pipe")
    (d / "loop").symlink_to(d, target_is_directory=True)
    (d / "empty.log").write_text("")
    (d / "blob.bin").write_bytes(b"\x00\x01\x02" * 100)
    ev = read_run([d])
    by_name = {os.path.basename(f["path"]): f for f in ev.files}
    assert "FIFO" in by_name["pipe"]["skipped"]
    assert by_name["empty.log"]["skipped"] == "empty"
    assert "skipped" in by_name["blob.bin"]
    assert "kind" in by_name["bench.jsonl"]
    assert len(ev.bench) == 3


def test_truncated_benchmark_block_keeps_what_was_read(tmp_path):
    text = (SAMPLES / "sglang_bench_text" / "run-sglang-0.5.23_random_c256_peak.txt").read_text()
    cut = text[: text.index("Mean TTFT")]
    p = tmp_path / "cut.txt"
    p.write_text(cut)
    ev = read_run([p])
    assert ev.bench and ev.bench[0].total_throughput and not ev.bench[0].ttft_ms


def test_garbled_jsonl_line_is_a_warning_with_file_and_line(tmp_path):
    lines = (SAMPLES / "sglang_bench_jsonl" / "p1_sglang058_server_info.jsonl").read_text().splitlines()
    lines.insert(1, '{"backend": "sglang", "max_concurrency": 8, "total_thr')
    p = tmp_path / "b.jsonl"
    p.write_text("\n".join(lines) + "\n")
    ev = read_run([p])
    assert len(ev.bench) == 3
    assert any(w.startswith(f"{p}:2:") for w in ev.warnings)


def test_unknown_gpu_is_kept_with_a_warning(tmp_path):
    ev = read_run([], gpu="4x Voodoo 6000")
    assert ev.hardware.gpu == "Voodoo 6000" and not ev.hardware.known and ev.warnings


def test_plateau_curve_and_scaling_curve(tmp_path):
    from kb.signals import detect

    def curve(points):
        p = tmp_path / f"c{len(points)}.jsonl"
        p.write_text("\n".join(json.dumps({"backend": "sglang", "dataset_name": "random", "max_concurrency": c,
                                           "total_throughput": t, "request_rate": "inf"}) for c, t in points))
        return {s.id: s for s in detect(read_run([p]))}

    plateau = curve([(128, 806.0), (256, 879.87)])["throughput-plateau"]
    assert plateau.data["knee"] == 128 and plateau.data["gain_after_knee"] == pytest.approx(0.0917, abs=1e-3)
    assert "throughput-plateau" not in curve([(1, 100.0), (8, 700.0), (32, 2500.0), (128, 8000.0)])


def test_idle_gpus_during_a_benchmark_are_a_signal(tmp_path):
    """nvidia-smi -q taken while the benchmark ran shows 0 % utilisation (verbatim capture)."""
    from kb.signals import detect

    d = tmp_path / "run"
    d.mkdir()
    (d / "smi.txt").write_text((SAMPLES / "nvidia_smi" / "p3_H100SXMx8_nvidia-smi-q.txt").read_text())
    (d / "bench.jsonl").write_text((SAMPLES / "sglang_bench_jsonl" / "p1_sglang058_server_info.jsonl").read_text())
    ev = read_run([d])
    assert ev.hardware.utilization_pct == 0.0
    assert "gpu-idle" in {s.id for s in detect(ev)}


def test_flag_list_without_command_is_read_as_server_args(tmp_path):
    """GPUStack-style "backend parameters" (tests/data/diagnosis/gpustack-glm52-h200-max-running)."""
    d = DATA / "diagnosis" / "gpustack-glm52-h200-max-running"
    ev = read_run([d / "backend-params.txt"])
    assert ev.engine == "sglang" and ev.server_args["max_running_requests"] == "64"
    assert ev.files[0]["kind"] == "server-flags"


def test_new_sglang_capture_line_gives_the_graph_ceiling():
    ev = read_run([DATA / "diagnosis" / "sglang-33483-l40-cuda-graph-ceiling" / "server.log"])
    assert ev.traces[0].startup["cuda_graph_max_bs"] == 32
    assert ev.traces[0].startup["max_running_requests"] == 4096


def test_one_run_with_long_waits_is_queueing():
    from kb.signals import detect

    ev = read_run([DATA / "diagnosis" / "gpustack-glm52-h200-max-running"])
    sig = {s.id: s for s in detect(ev)}["ttft-queueing"]
    assert sig.data["level"] == 512 and sig.data["wait_share"] > 0.3


def test_flags_on_one_line_without_command_are_server_args(tmp_path):
    """An issue's "engine parameters" on one line (tests/data/diagnosis_heldout/vllm-8089-*)."""
    d = DATA / "diagnosis_heldout" / "vllm-8089-llama3-70b-fp8-tp8-vs-2x-tp4"
    ev = read_run([d / "backend-params.txt"])
    assert ev.engine == "vllm" and ev.files[0]["kind"] == "server-flags"
    assert ev.server_args["max_num_batched_tokens"] == "8192" and ev.server_args["enable_chunked_prefill"] is True
    # one flag with its value is not a flag list; a sentence with a flag in it is not either
    p = tmp_path / "notes.txt"
    p.write_text("--max-model-len 32768\nwe set --max-num-seqs 64 and it helped\n")
    assert not any(f.get("kind") == "server-flags" for f in read_run([p]).files)


def test_prose_naming_a_model_repo_gives_the_model_path(tmp_path):
    p = tmp_path / "issue.txt"
    p.write_text("Serving https://huggingface.co/Qwen/Qwen3-30B-A3B with vLLM 0.11.0 on 2x H100 is slow.\n"
                 "We built github.com/deepseek-ai/DeepGEMM2 from source; 1200 tok/s.\n")
    ev = read_run([p])
    assert ev.model_path == "Qwen/Qwen3-30B-A3B"
    q = tmp_path / "other.txt"
    q.write_text("Throughput is 1200 tok/s at 64 req/s, see github.com/deepseek-ai/DeepGEMM2.\n")
    assert read_run([q]).model_path is None


def test_gpu_named_in_prose_with_a_single_gpu_launch(tmp_path):
    """A launch with no parallel flags runs on one GPU: the GPU the prose names is that one."""
    launch = tmp_path / "launch.sh"
    launch.write_text("vllm serve Qwen/Qwen3-8B --max-model-len 8192\n")
    notes = tmp_path / "notes.txt"
    notes.write_text("On our H100 the decode speed is lower than expected.\n")
    hw = read_run([launch, notes]).hardware
    assert (hw.gpu, hw.count, hw.arch) == ("H100", 1, "SM90") and hw.source == "text evidence"
    # without a launch command the count stays unknown, and so do the GPUs
    assert read_run([notes]).hardware is None
    # a data-parallel launch does not say how many GPUs either
    launch.write_text("vllm serve Qwen/Qwen3-8B --data-parallel-size 4\n")
    assert read_run([launch, notes]).hardware is None


def test_prose_around_a_pasted_command_stays_prose(tmp_path):
    """A pasted issue holds sentences around a launch command: the command is read as
    server arguments and the sentences stay prose (for `text` conditions and similarity),
    while the command line itself and a result line are not prose."""
    p = tmp_path / "issue.txt"
    p.write_text("After upgrading the container the decode speed dropped by half on the same hardware.\n"
                 "vllm serve Qwen/Qwen3-8B --max-num-seqs 64 --gpu-memory-utilization 0.9\n"
                 "Output token throughput (tok/s): 812.4\n")
    ev = read_run([p])
    assert str(ev.server_args.get("max_num_seqs")) == "64"
    prose = [t.text for t in ev.text if t.kind == "prose"]
    assert prose == ["After upgrading the container the decode speed dropped by half on the same hardware."]


# issue 13: any text is evidence. A service's JSON log lines (llm-d's router, verbatim from a
# public thread) were skipped as "not a recognised format"; their messages are log lines.
LLMD_LINE = ('{"level":"error","caller":"prefix/plugin.go:113","msg":"PrefixCacheMatchInfo not found '
             'for endpoint, assigning score 0"}\n')


@pytest.mark.parametrize("name", ["server.log", "epp.txt", "epp.jsonl"])
def test_json_log_lines_are_read_as_text(tmp_path, name):
    p = tmp_path / name
    p.write_text(LLMD_LINE + '{"level":"info","ts":"2026-08-01T10:00:00Z","msg":"Starting endpoint picker"}\n')
    ev = read_run([p])
    assert "skipped" not in ev.files[0], ev.files
    texts = [t.text for t in ev.text]
    assert any(t.startswith("ERROR PrefixCacheMatchInfo not found for endpoint, assigning score 0") for t in texts)
    assert any("caller=prefix/plugin.go:113" in t for t in texts)


def test_a_json_line_without_a_message_stays_as_written():
    from ingest.jsonlog import as_text

    assert as_text('{"a": 1}') == '{"a": 1}'
    assert as_text('{"message": "engine died", "severity": "warning", "pid": 7}') == "WARNING engine died pid=7"
