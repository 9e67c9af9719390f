"""Launch commands pasted into captures: engines, flags as written and normalised,
env prefixes, continuations, prompts, redirections, secrets."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingest.launch_command import LaunchCommand, LaunchCommandLines, parse_launch_command
from ingest.vllm_log import VllmLog

SAMPLES = Path(__file__).resolve().parent / "data" / "samples"
COMMAND_FILES = sorted(p for p in (SAMPLES / "launch_commands").glob("*") if p.suffix != ".md")


def scan(path: Path) -> list[LaunchCommand]:
    p = LaunchCommandLines(str(path))
    with open(path, encoding="utf-8") as fh:
        for i, line in enumerate(fh, 1):
            p.feed(i, line.rstrip("\r\n"))
    return p.results()


@pytest.mark.parametrize("path", COMMAND_FILES, ids=lambda p: p.name)
def test_every_sample_has_a_command(path):
    cmds = scan(path)
    assert cmds
    for c in cmds:
        assert c.engine in ("sglang", "vllm") and c.raw and c.source.path == str(path)
        assert LaunchCommand.model_validate_json(c.model_dump_json()) == c


def test_exported_args_and_benchmark_are_told_apart():
    path = SAMPLES / "launch_commands" / "p2_sglang_issue16067_exported_args.txt"
    (cmd,) = scan(path)  # sglang.bench_serving is not a server launch
    lines = path.read_text(encoding="utf-8").splitlines()
    assert cmd.source.line == lines.index("python -m sglang.launch_server ${COMMON_LAUNCH_ARGS}") + 1
    assert (cmd.engine, cmd.entry, cmd.positional, cmd.args, cmd.model) == (
        "sglang", "sglang.launch_server", ["${COMMON_LAUNCH_ARGS}"], {}, None)


def test_env_on_a_continued_line_before_the_command():
    (cmd,) = scan(SAMPLES / "launch_commands" / "p2_vllm_issue28228_env_continuation.txt")
    assert cmd.engine == "vllm" and cmd.entry == "vllm serve"
    assert cmd.model == "cyankiwi/Kimi-Linear-48B-A3B-Instruct-AWQ-4bit"
    assert cmd.env == {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "VLLM_USE_V1": "1",
                       "CUDA_VISIBLE_DEVICES": "0,1"}
    assert cmd.source.line == 1
    assert cmd.args["--max_model_len"] == "120000"  # as written ...
    assert cmd.get("max-model-len") == "120000" and cmd.norm_args["tensor-parallel"] == "2"  # ... and normalised
    assert cmd.get("--max-num-seqs") == "8" and cmd.get("enable_prefix_caching") is True
    assert cmd.args["--port"] == ["8111--gpu-memory-utilization", "0.95"]  # the reporter's typo, kept as typed


def test_command_inside_a_vllm_log_capture():
    path = SAMPLES / "vllm_logs" / "p2_v1_startup_pr12569_blocks.log"
    (cmd,) = scan(path)
    assert cmd.model == "neuralmagic/Meta-Llama-3.1-70B-Instruct-quantized.w8a8" and cmd.env == {"VLLM_USE_V1": "1"}
    assert cmd.get("gpu-memory-utilization") == "0.98" and cmd.source.line == 1
    # the same capture still reads as a vLLM log
    p = VllmLog(str(path))
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        p.feed(i, line)
    assert p.results()[0].startup["num_gpu_blocks"] == 1381


@pytest.mark.parametrize("text, engine, entry, model", [
    ("python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8", "sglang", "sglang.launch_server",
     "deepseek-ai/DeepSeek-V3"),
    ("python3 -m sglang.launch_server --model Qwen/Qwen3-30B-A3B --tp-size 8", "sglang", "sglang.launch_server",
     "Qwen/Qwen3-30B-A3B"),
    ("/opt/venv/bin/python3.12 -m sglang.launch_server --model-path m", "sglang", "sglang.launch_server", "m"),
    ("python -m sglang_router.launch_server --model-path m --dp-size 4", "sglang", "sglang_router.launch_server", "m"),
    ("sglang serve --model-path m --port 30000", "sglang", "sglang serve", "m"),
    ("vllm serve Qwen/Qwen3-8B --max-num-seqs 128", "vllm", "vllm serve", "Qwen/Qwen3-8B"),
    ("vllm serve --model Qwen/Qwen3-8B", "vllm", "vllm serve", "Qwen/Qwen3-8B"),
    ("python -m vllm.entrypoints.openai.api_server --model m -tp 2", "vllm", "vllm.entrypoints.openai.api_server", "m"),
    ("$ vllm serve m", "vllm", "vllm serve", "m"),
    ("user@box:~$ CUDA_VISIBLE_DEVICES=0 python -m sglang.launch_server --model-path m", "sglang",
     "sglang.launch_server", "m"),
    ("➜  python git:(main) ✗ python3 -m sglang.launch_server --model-path m", "sglang", "sglang.launch_server", "m"),
    ("`vllm serve m --enforce-eager`", "vllm", "vllm serve", "m"),
    ("docker run --gpus all lmsysorg/sglang:latest python3 -m sglang.launch_server --model-path m", "sglang",
     "sglang.launch_server", "m"),
])
def test_entries(text, engine, entry, model):
    cmd = parse_launch_command(text)
    assert (cmd.engine, cmd.entry, cmd.model) == (engine, entry, model)


def test_program_path_is_kept_and_is_not_env():
    cmd = parse_launch_command("CUDA_VISIBLE_DEVICES=1 /opt/venv/bin/python3.12 -m sglang.launch_server --model-path m")
    assert cmd.env == {"CUDA_VISIBLE_DEVICES": "1"}
    assert cmd.raw == "CUDA_VISIBLE_DEVICES=1 /opt/venv/bin/python3.12 -m sglang.launch_server --model-path m"


@pytest.mark.parametrize("line", [
    "a=b " * 100_000 + "python -m sglang.launch_server --model-path m",
    "x" * 1_000_000 + " vllm serve m",
    "vllm serve " + "y" * 1_000_000,
    "/" * 1_000_000 + "vllm serve m",
])
def test_pathological_lines_stay_fast(line):
    import time

    t0 = time.perf_counter()
    p = LaunchCommandLines("x")
    p.feed(1, line)
    p.results()
    assert time.perf_counter() - t0 < 5


def test_values_switches_lists_and_negative_numbers():
    cmd = parse_launch_command(
        "python -m sglang.launch_server --model-path m --chunked-prefill-size -1 --cuda-graph-bs 1 2 4 8 "
        "--enable-dp-attention --mem-fraction-static=0.85 --json-model-override-args '{\"a\": 1}'")
    assert cmd.args == {"--model-path": "m", "--chunked-prefill-size": "-1", "--cuda-graph-bs": ["1", "2", "4", "8"],
                        "--enable-dp-attention": True, "--mem-fraction-static": "0.85",
                        "--json-model-override-args": '{"a": 1}'}
    assert cmd.norm_args["cuda-graph-bs"] == ["1", "2", "4", "8"]


def test_shell_tail_is_cut():
    cmd = parse_launch_command("nohup python -m sglang.launch_server --model-path m --tp 2 2>&1 | tee log &")
    assert cmd.args == {"--model-path": "m", "--tp": "2"}
    assert cmd.raw == "python -m sglang.launch_server --model-path m --tp 2"
    cmd = parse_launch_command("vllm serve m --port 8000 > server.log 2>&1 & echo started")
    assert cmd.args == {"--port": "8000"}
    cmd = parse_launch_command("vllm serve m --tp 2 # two GPUs")
    assert cmd.args == {"--tp": "2"}


def test_continuations_and_ps2_prompts():
    p = LaunchCommandLines("capture.txt")
    for i, line in enumerate([
        "$ python -m sglang.launch_server \\",
        "> --model-path m \\",
        ">   --tp 4",
        "[2025-01-01 00:00:00] server_args=ServerArgs(model_path='m')",
    ], 1):
        p.feed(i, line)
    (cmd,) = p.results()
    assert cmd.args == {"--model-path": "m", "--tp": "4"} and cmd.source.line == 1


def test_unfinished_continuation_at_end_of_file():
    p = LaunchCommandLines("capture.txt")
    p.feed(1, "vllm serve m \\")
    p.feed(2, "  --max-model-len 4096 \\")
    (cmd,) = p.results()
    assert cmd.get("max-model-len") == "4096"


def test_prose_and_comments_are_not_commands():
    assert parse_launch_command("Run vllm serve to start the server") is None
    assert parse_launch_command("# python -m sglang.launch_server --model-path old") is None
    assert parse_launch_command("python3 -m sglang.bench_serving --backend sglang") is None
    p = LaunchCommandLines("x")
    p.feed(1, "# vllm serve old-model \\")
    p.feed(2, "vllm serve new-model")
    assert [c.model for c in p.results()] == ["new-model"]


def test_secrets_are_redacted_everywhere():
    cmd = parse_launch_command("HF_TOKEN=hf_abc123 vllm serve m --api-key sk-123 --hf-token=hf_x --port 1")
    assert cmd.env == {"HF_TOKEN": "<redacted>"}
    assert cmd.args["--api-key"] == "<redacted>" and cmd.args["--hf-token"] == "<redacted>"
    assert "hf_abc123" not in cmd.raw and "sk-123" not in cmd.raw and "hf_x" not in cmd.raw
    assert cmd.args["--port"] == "1"


def test_broken_quotes_do_not_raise():
    cmd = parse_launch_command("vllm serve m --chat-template 'unterminated")
    assert cmd.model == "m"


def test_duplicates_are_kept_once():
    p = LaunchCommandLines("x")
    p.feed(1, "vllm serve m --tp 2")
    p.feed(2, "vllm serve m --tp 2")
    p.feed(3, "vllm serve m --tp 4")
    assert [c.get("tp") for c in p.results()] == ["2", "4"]


def test_nothing_is_executed(monkeypatch):
    import os
    import subprocess

    def boom(*a, **k):
        raise AssertionError("executed")

    monkeypatch.setattr(subprocess, "Popen", boom)
    monkeypatch.setattr(os, "system", boom)
    assert parse_launch_command("vllm serve m --tp $(rm -rf /tmp/x) `whoami`").model == "m"


# ---------------------------------------------------------------- docker run


def test_vllm_openai_image_args_are_the_server_args():
    text = ("docker run -it --rm --gpus all -v /:/host -p 8802:8802 --ipc=host --env \"VLLM_ATTENTION_BACKEND=X\" "
            "vllm/vllm-openai:gptoss --served-model-name g --tensor-parallel-size=2 --model openai/gpt-oss-120b "
            "--port 8802")
    c = parse_launch_command(text)
    assert (c.engine, c.entry, c.model) == ("vllm", "vllm serve", "openai/gpt-oss-120b")
    assert c.get("tensor-parallel-size") == "2" and c.get("port") == "8802" and c.get("gpus") is None


def test_vllm_openai_image_positional_model_and_secret_env():
    c = parse_launch_command("docker run --runtime nvidia --gpus all --env "
                             "\"HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123\" "
                             "-p 8000:8000 --ipc=host vllm/vllm-openai:v0.10.1 Qwen/Qwen3-8B --tensor-parallel-size 2")
    assert c.model == "Qwen/Qwen3-8B" and c.get("tensor-parallel-size") == "2"
    assert "hf_abc" not in c.raw and '"HF_TOKEN=<redacted>"' in c.raw


def test_docker_entrypoint_python_then_module_after_the_image():
    c = parse_launch_command("docker run -d --gpus all --ipc=host --net=host -v /models:/models --name t "
                             "--entrypoint /usr/bin/python3 -e CUDA_VISIBLE_DEVICES=0,1 lmsysorg/sglang:v0.4.1 "
                             "-m sglang.launch_server --model-path /models/DeepSeek-V3 --tp 8 --enable-dp-attention")
    assert (c.engine, c.entry, c.model) == ("sglang", "sglang.launch_server", "/models/DeepSeek-V3")
    assert c.get("tp") == "8" and c.get("enable-dp-attention") is True


def test_other_images_and_multiline_docker(tmp_path):
    assert parse_launch_command("docker run --gpus all ubuntu:22.04 nvidia-smi") is None
    f = tmp_path / "run.sh"
    f.write_text("docker run --gpus all \\\n  -p 8000:8000 \\\n  vllm/vllm-openai:latest \\\n  --model m/x \\\n"
                 "  --max-num-seqs 64\necho done\n")
    (c,) = scan(f)
    assert c.model == "m/x" and c.get("max-num-seqs") == "64" and c.source.line == 1


def test_docker_command_is_relaunched_with_its_prefix():
    from ingest.run import _argv
    from kb import launchcmd

    c = parse_launch_command("docker run --gpus all -p 8000:8000 vllm/vllm-openai:latest m/x -tp 8 --port 8000")
    argv = launchcmd.apply(_argv(c), [("--tensor-parallel-size", 4, ["-tp"])])
    assert argv[:6] == ["docker", "run", "--gpus", "all", "-p", "8000:8000"]
    assert "-tp" not in argv and argv[argv.index("--tensor-parallel-size") + 1] == "4"


# issue 13: a launch command written inside a sentence ends where the sentence's words resume
# (verbatim from a knowledge helper's evidence of this session)
def test_command_in_a_sentence_ends_at_the_prose():
    text = ("DeepSeek-V4-Pro FP8 on 8x H200 with sglang serve --tp 8 --mem-fraction-static 0.88 aborts at "
            "scheduler init before serving anything:\n")
    cmd = parse_launch_command(text)
    assert cmd.args == {"--tp": "8", "--mem-fraction-static": "0.88"}
    assert cmd.raw == "sglang serve --tp 8 --mem-fraction-static 0.88"


def test_serve_followed_by_prose_words_has_no_model():
    text = ("vllm serve on 2x RTX 5090 with --data-parallel-size 2 --moe-backend flashinfer_b12x, NVFP4 "
            "Qwen3.6-35B-A3B. Startup fails in profile_run:\n")
    cmd = parse_launch_command(text)
    assert cmd.model is None and cmd.positional == []
    assert cmd.args == {"--data-parallel-size": "2", "--moe-backend": "flashinfer_b12x"}
    assert cmd.raw == "vllm serve --data-parallel-size 2 --moe-backend flashinfer_b12x"


def test_prose_command_keeps_numeric_lists_and_switches():
    cmd = parse_launch_command("On 4x H100 with sglang serve --model-path org/m --enable-dp-attention "
                               "--cuda-graph-bs 1 2 4 8 it hangs")
    assert cmd.model == "org/m"
    assert cmd.args["--enable-dp-attention"] is True
    assert cmd.args["--cuda-graph-bs"] == ["1", "2", "4", "8"]
    assert "hangs" not in cmd.raw


def test_real_command_keeps_multi_value_flags():
    cmd = parse_launch_command("vllm serve org/m --cuda-graph-sizes 1 2 4 --compilation-config "
                               "'{\"level\": 3, \"cudagraph_mode\": \"FULL\"}'")
    assert cmd.args["--cuda-graph-sizes"] == ["1", "2", "4"]
    assert cmd.args["--compilation-config"] == '{"level": 3, "cudagraph_mode": "FULL"}'
