"""Benchmark-method: kb.benchcmd reads serving-benchmark commands; the shipped benchmark-method
findings and KB115 recommend the corrected command."""

from pathlib import Path

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


@pytest.mark.parametrize("pasted", ["$ ", "(venv) $ ", "root@5f2c:/workspace# ", "`"])
def test_a_pasted_prompt_is_not_part_of_the_command(pasted):
    cmd = benchcmd.parse(pasted + "vllm bench serve --model m --num-prompts 50" + "`" * (pasted == "`"))
    assert cmd.text == "vllm bench serve --model m --num-prompts 50" and cmd.number("--num-prompts") == 50
    assert cmd.with_args({"--num-prompts": 640}) == "vllm bench serve --model m --num-prompts 640"


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


# ---- the command KB115 reads is the one ingest found (RunEvidence.bench_commands) ----

RESULT_BLOCK = (Path(__file__).parent / "rules" / "KB115" / "fires" / "vllm-cold-burst" / "bench.txt").read_text()
ALONE = Path(__file__).parent / "data" / "samples" / "bench_commands" / "vllm-bench-serve-random-c64.txt"
PASTED = ("$ vllm bench serve --model Qwen/Qwen3-8B --dataset-name random \\\n"
          "    --random-input-len 340 --random-output-len 115 --num-prompts 128\n")
IN_PROSE = ("We benchmarked the new build on one H100 and the numbers look far too low.\n"
            "The command was\n"
            "    vllm bench serve --model Qwen/Qwen3-8B --dataset-name random --num-prompts $N \\\n"
            "        --random-input-len 1024 --random-output-len 128\n"
            "and throughput differs a lot from one run to the next, any idea why?\n")


def _kb115(ev):
    from kb.diagnose import diagnose

    return [r for r in diagnose(ev, []).recommendations if r.rule == "KB115 benchmark-method"]


@pytest.mark.parametrize("name,text,kind,line,joined", [
    # above its result block: the file is the result reader's; the command still travels
    ("bench.txt", PASTED + RESULT_BLOCK, "vllm-bench-text", 1,
     "$ vllm bench serve --model Qwen/Qwen3-8B --dataset-name random --random-input-len 340 "
     "--random-output-len 115 --num-prompts 128"),
    # alone: the bench-command reader's file (a real multi-line sample)
    ("cmd.txt", ALONE.read_text(), "bench-command", 1,
     "vllm bench serve --backend vllm --model Qwen/Qwen3-8B --dataset-name random --random-input-len 1024 "
     "--random-output-len 256 --max-concurrency 64 --num-prompts 640"),
    # inside notes, with no load it can read (`$N`): the file stays prose
    ("notes.txt", IN_PROSE, "text", 3,
     "vllm bench serve --model Qwen/Qwen3-8B --dataset-name random --num-prompts $N --random-input-len 1024 "
     "--random-output-len 128"),
])
def test_ingest_finds_the_command_and_kb115_reads_it(tmp_path, name, text, kind, line, joined):
    from ingest.run import read_run

    p = tmp_path / name
    p.write_text(text)
    ev = read_run([p], engine="vllm")
    assert [f["kind"] for f in ev.files] == [kind]
    (c,) = ev.bench_commands
    assert (c.text, c.where.path, c.where.line) == (joined, str(p), line)
    (rec,) = _kb115(ev)
    assert rec.commands[0].startswith(joined.lstrip("$ ").split(" --num-prompts")[0])
    assert "--ignore-eos" in rec.commands[0]  # random prompts on vLLM's client without it, in all three
    assert any(e.text.startswith("benchmark command:") and e.where == c.where for e in rec.evidence)


def test_stdin_command_travels_with_its_path_as_dash(kb_home):
    import json
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    proc = subprocess.run([sys.executable, "-m", "kb", "diagnose", "-", "--engine", "vllm", "--json"],
                          input=PASTED + RESULT_BLOCK, capture_output=True, text=True,
                          env={**os.environ, "KB_HOME": str(kb_home)}, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert [(f["path"], f["kind"]) for f in out["files"]] == [("-", "vllm-bench-text")]
    (rec,) = [r for r in out["recommendations"] if r["rule"] == "KB115 benchmark-method"]
    assert "--num-warmups 256 --ignore-eos" in rec["commands"][0]  # 128 in flight at once, 3.2 s, cold
    assert {"path": "-", "line": 1} in [{k: e["where"][k] for k in ("path", "line")}
                                        for e in rec["evidence"] if e.get("where")]


def test_kb115_reads_the_found_command_not_the_text_lines():
    """Fails if the rule went back to scanning text: the found command alone fires it; the same
    command as a text line, with nothing found, does not."""
    from kb.evidence import BenchCommandText, RunEvidence, TextLine
    from kb.records import Where

    text = "vllm bench serve --model Qwen/Qwen3-8B --dataset-name random --num-prompts 50 --max-concurrency 64"
    found = RunEvidence(engine="vllm", bench_commands=[BenchCommandText(text=text, where=Where(path="b.sh", line=3))])
    (rec,) = _kb115(found)
    assert "--num-prompts 640 --num-warmups 128 --ignore-eos" in rec.commands[0]
    assert not _kb115(RunEvidence(engine="vllm", text=[TextLine(text=text, where=Where(path="b.sh", line=3))]))


def test_kb115_module_reads_no_lines_itself():
    """The rule imports the command parser and records only: nothing that finds commands in
    files or reads text lines (ingest does that once)."""
    import ast

    from kb.rules import benchmark_method

    tree = ast.parse(Path(benchmark_method.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert imported <= {"__future__", "kb", "kb.records", "kb.rules.base"}, imported
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "text"
                and isinstance(n.value, ast.Attribute) and n.value.attr == "ev"], "the rule reads ev.text"
