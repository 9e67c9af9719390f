"""Serving-benchmark client commands pasted without their results: `vllm bench serve …`,
`python benchmarks/benchmark_serving.py …`, `python3 -m sglang.bench_serving …`.

The command is the load the server was given: `--max-concurrency`, `--request-rate`,
`--num-prompts`, and the request lengths of the random dataset (`--random-input-len` /
`--random-output-len`; sglang's older spellings `--random-input` / `--random-output`).
With those, rules that compare the server's settings with its load (a running cap below
the concurrency, a latency-only or a throughput question) have something to compare with,
even when nobody pasted the result block. A file that holds a result block as well is
left to the result readers (ingest.vllm_bench, ingest.sglang_bench), which read the same
settings with the measured numbers.
"""

from __future__ import annotations

import re

from ingest.launch_command import shell_words
from kb.records import BenchRun, Where

MAX_LINE = 4096
MAX_COMMANDS = 50
MAX_CONTINUED = 100

_VLLM = re.compile(r"(?:\bvllm\s+bench\s+serve\b|\bbenchmark_serving\.py\b)")
_SGLANG = re.compile(r"\bsglang\.bench_serving\b")
_RESULT = re.compile(r"Serving Benchmark Result")
# the client's own flags, each under every spelling its tool accepts (argparse takes a
# unique prefix too: `--num-prompt` for `--num-prompts` appears in real scripts)
FLAGS = {
    "concurrency": ("--max-concurrency",),
    "request_rate": ("--request-rate",),
    "num_prompts": ("--num-prompts", "--num-prompt"),
    "input_len": ("--random-input-len", "--random-input", "--input-len"),
    "output_len": ("--random-output-len", "--random-output", "--output-len"),
    "model": ("--model",),
    "backend": ("--backend",),
}


def _number(v: str | None) -> float | None:
    if v is None:
        return None
    try:
        return float(v)  # "inf" included: all requests at once
    except ValueError:  # `${CONCURRENCY}`: a shell variable, no value to read
        return None


def _values(words: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for i, w in enumerate(words):
        name, eq, val = w.partition("=")
        for key, spellings in FLAGS.items():
            if name in spellings and key not in out:
                if eq:
                    out[key] = val
                elif i + 1 < len(words) and not words[i + 1].startswith("--"):
                    out[key] = words[i + 1]
    return out


def run_from_command(text: str, where: Where | None = None) -> BenchRun | None:
    """The load a benchmark command sets, as a BenchRun without measurements; None when
    the command is not a serving benchmark or sets no load at all."""
    tool = "sglang-bench" if _SGLANG.search(text) else "vllm-bench" if _VLLM.search(text) else None
    if tool is None:
        return None
    v = _values(shell_words(text.replace("\\\n", " ")))
    conc, rate, prompts = (_number(v.get(k)) for k in ("concurrency", "request_rate", "num_prompts"))
    if not any((conc, rate, prompts)):
        return None
    model = v.get("model")
    return BenchRun(tool=tool, backend=v.get("backend"), model=model if model and "$" not in model else None,
                    concurrency=int(conc) if conc and conc != float("inf") else None,
                    request_rate=rate, num_prompts=int(prompts) if prompts else None,
                    input_len=_number(v.get("input_len")), output_len=_number(v.get("output_len")),
                    server_args={"bench": {"command_only": True}}, source=where)


class BenchCommandLines:
    """LineParser: serving-benchmark commands (joining `\\` continuation lines) in a file
    with no result block."""

    kind = "bench-command"

    def __init__(self, path: str) -> None:
        self.path = str(path)
        self.commands: list[tuple[int, list[str]]] = []
        self.pending: list[str] | None = None
        self.has_result = False

    def feed(self, lineno: int, line: str) -> None:
        if len(line) > MAX_LINE:
            return
        if _RESULT.search(line):
            self.has_result = True
        if self.pending is not None:
            self.pending.append(line)
            if line.rstrip().endswith("\\") and len(self.pending) < MAX_CONTINUED:
                return
            self.pending = None
            return
        if (_VLLM.search(line) or _SGLANG.search(line)) and not line.lstrip().startswith("#") \
                and len(self.commands) < MAX_COMMANDS:
            self.commands.append((lineno, [line]))
            if line.rstrip().endswith("\\"):
                self.pending = self.commands[-1][1]

    def results(self) -> list[BenchRun]:
        if self.has_result:
            return []
        runs = [run_from_command("\n".join(lines), Where(path=self.path, line=n)) for n, lines in self.commands]
        return [r for r in runs if r is not None]
