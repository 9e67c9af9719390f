"""Serving-benchmark client commands pasted without their results: `vllm bench serve …`,
`python benchmarks/benchmark_serving.py …`, `python3 -m sglang.bench_serving …`.

The command is the load the server was given: `--max-concurrency`, `--request-rate`,
`--num-prompts`, and the request lengths of the random dataset (`--random-input-len` /
`--random-output-len`; sglang's older spellings `--random-input` / `--random-output`). The
command itself is read by kb.benchcmd (the same reading the benchmark-method rule uses).
With those, rules that compare the server's settings with its load (a running cap below
the concurrency, a latency-only or a throughput question) have something to compare with,
even when nobody pasted the result block. A file that holds a result block as well is
left to the result readers (ingest.vllm_bench, ingest.sglang_bench), which read the same
settings with the measured numbers.

Every command found, with or without a result block, also travels on the evidence
(`commands()` → RunEvidence.bench_commands): this is the one place that finds benchmark
commands in files; the benchmark-method rule reads what it found.
"""

from __future__ import annotations

import re

from kb import benchcmd
from kb.evidence import BenchCommandText
from kb.records import BenchRun, Where

MAX_LINE = 4096
MAX_COMMANDS = 50
MAX_CONTINUED = 100

_RESULT = re.compile(r"Serving Benchmark Result")
# the lengths under every spelling the clients accept (argparse takes a unique prefix:
# older sglang scripts write `--random-input` / `--random-output`, some `--num-prompt`)
SPELLINGS = {
    "num_prompts": ("--num-prompts", "--num-prompt"),
    "input_len": ("--random-input-len", "--random-input", "--input-len"),
    "output_len": ("--random-output-len", "--random-output", "--output-len"),
}


def _first(cmd: benchcmd.BenchCommand, key: str) -> float | None:
    return next((v for v in (cmd.number(n) for n in SPELLINGS[key]) if v is not None), None)


def run_from_command(text: str, where: Where | None = None) -> BenchRun | None:
    """The load a benchmark command sets (kb.benchcmd reads the command), as a BenchRun
    without measurements; None when it is not a serving benchmark or sets no load at all."""
    cmd = benchcmd.parse(text)
    if cmd is None:
        return None
    conc, rate, prompts = cmd.number("--max-concurrency"), cmd.number("--request-rate"), _first(cmd, "num_prompts")
    if not any((conc, rate, prompts)):  # `${CONC}`: a shell variable, no value to read
        return None
    model = cmd.args.get("--model")
    backend = cmd.args.get("--backend")
    return BenchRun(tool=f"{cmd.tool}-bench", backend=backend if isinstance(backend, str) else None,
                    model=model if isinstance(model, str) and "$" not in model else None,
                    concurrency=int(conc) if conc and conc != float("inf") else None,
                    request_rate=rate, num_prompts=int(prompts) if prompts else None,
                    input_len=_first(cmd, "input_len"), output_len=_first(cmd, "output_len"),
                    server_args={"bench": {"command_only": True}}, source=where)


class BenchCommandLines:
    """LineParser: serving-benchmark commands (joining `\\` continuation lines): as load-only
    BenchRuns in a file with no result block (`results()`), and every one as found text
    (`commands()`)."""

    kind = "bench-command"

    def __init__(self, path: str) -> None:
        self.path = str(path)
        self.found: list[tuple[int, list[str]]] = []
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
        if benchcmd.ENTRY.search(line) and not line.lstrip().startswith("#") \
                and len(self.found) < MAX_COMMANDS:
            self.found.append((lineno, [line]))
            if line.rstrip().endswith("\\"):
                self.pending = self.found[-1][1]

    def commands(self) -> list[BenchCommandText]:
        """Every serving-benchmark command of the file, its continuations joined, in line order."""
        return [BenchCommandText(text=benchcmd.join("\n".join(lines)).strip(), where=Where(path=self.path, line=n))
                for n, lines in self.found]

    def results(self) -> list[BenchRun]:
        if self.has_result:
            return []
        runs = [run_from_command(c.text, c.where) for c in self.commands()]
        return [r for r in runs if r is not None]
