"""The "==== Serving Benchmark Result ====" block that sglang's bench_serving and
vLLM's `vllm bench serve` / benchmark_serving.py print (sglang's is a fork of
vLLM's, so one reader serves both; each subclass keeps only its own tool's blocks).

Label spellings covered, from the tools' print statements over their versions:
sglang python/sglang/bench_serving.py (2024 → 2026: "Max reqeuest concurrency"
typo, "Total throughput" → "Total token throughput", Peak lines, Accept length)
and vllm benchmarks/benchmark_serving.py → vllm/benchmarks/serve.py ("Total Token
throughput", Failed requests, goodput, Peak lines, Speculative Decoding section).
"""

from __future__ import annotations

import ast
import re
from typing import Any

from ingest import bench_common as bc
from kb.records import BenchRun

HEADER = "Serving Benchmark Result"
FOOTER = re.compile(r"^\s*={20,}\s*$")
FIELD = re.compile(r"([A-Za-z][A-Za-z0-9 ()/%.,'\-]*?)\s*:\s+(\S+)")
STAT = re.compile(r"^(mean|median|std|min|max|p\d+(?:\.\d+)?) (ttft|tpot|itl|e2el|e2e latency) \(ms\)$")
NAMESPACE = re.compile(r"(?:^|[\s=:])[Nn]amespace\((.*)\)\s*$")
STAT_FIELD = {"ttft": "ttft_ms", "tpot": "tpot_ms", "itl": "itl_ms", "e2el": "e2e_ms", "e2e latency": "e2e_ms"}
MAX_UNKNOWN = 5  # consecutive unreadable lines that end a block cut short
# A result line is short ("Mean TTFT (ms):   12.3", with a log prefix at most); FIELD's lazy
# label is quadratic in the length of a line without a colon, so longer lines are not fields.
MAX_FIELD_LINE = 512
MAX_RUNS = 10_000  # result blocks kept from one file

# normalised label → (where it goes, how to read it, whose label it is: s=sglang v=vLLM)
# where: a BenchRun field, or "x:<name>" for server_args["bench"][name].
LABELS: dict[str, tuple[str, Any, str]] = {
    "backend": ("backend", str, "s"),
    "traffic request rate": ("request_rate", bc.rate, "s"),
    "request rate configured (rps)": ("request_rate", bc.rate, "v"),
    "max request concurrency": ("concurrency", bc.concurrency, "s"),
    "max reqeuest concurrency": ("concurrency", bc.concurrency, "s"),
    "maximum request concurrency": ("concurrency", bc.concurrency, "v"),
    "successful requests": ("completed", bc.count, ""),
    "failed requests": ("failed", bc.count, "v"),
    "benchmark duration (s)": ("duration_s", bc.num, ""),
    "total input tokens": ("x:total_input_tokens", bc.count, ""),
    "total generated tokens": ("x:total_output_tokens", bc.count, ""),
    "total generated tokens (retokenized)": ("x:total_output_tokens_retokenized", bc.count, "s"),
    "request throughput (req/s)": ("request_throughput", bc.num, ""),
    "request goodput (req/s)": ("x:request_goodput", bc.num, "v"),
    "input token throughput (tok/s)": ("input_throughput", bc.num, ""),
    "input throughput (tok/s)": ("input_throughput", bc.num, ""),
    "output token throughput (tok/s)": ("output_throughput", bc.num, ""),
    "output throughput (tok/s)": ("output_throughput", bc.num, ""),
    "total token throughput (tok/s)": ("total_throughput", bc.num, ""),
    "total throughput (tok/s)": ("total_throughput", bc.num, ""),
    "peak output token throughput (tok/s)": ("peak_output_throughput", bc.num, ""),
    "peak concurrent requests": ("peak_concurrency", bc.num, ""),
    "concurrency": ("x:mean_concurrency", bc.num, "s"),  # sum(latency)/duration, not the limit
    "accept length": ("accept_length", bc.num, "s"),
    "acceptance length": ("accept_length", bc.num, "v"),
    "acceptance rate (%)": ("x:acceptance_rate_pct", bc.num, "v"),
    "drafts": ("x:spec_drafts", bc.count, "v"),
    "draft tokens": ("x:spec_draft_tokens", bc.count, "v"),
    "accepted tokens": ("x:spec_accepted_tokens", bc.count, "v"),
}
# Printed by vLLM before its block (and by older vLLM only there).
PRELUDE = {"traffic request rate": "request_rate", "maximum request concurrency": "concurrency",
           "burstiness factor": "x:burstiness"}
PRELUDE_LINE = re.compile(r"(traffic request rate|maximum request concurrency|burstiness factor):\s*(\S+)", re.I)
# Benchmark arguments worth keeping from the Namespace(...) line.
NS_KEYS = ("model", "served_model_name", "backend", "max_concurrency", "request_rate", "num_prompts",
           "dataset_name", "random_input_len", "random_output_len", "random_range_ratio", "burstiness")


def _norm(label: str) -> str:
    return " ".join(label.lower().split())


def lookup(label: str) -> tuple[str, Any, str] | None:
    """The LABELS entry (or a latency statistic) for a label, trying shorter
    word suffixes so log prefixes ("INFO 05-12 Mean TTFT (ms)") do not hide it."""
    words = _norm(label).split(" ")
    for i in range(min(len(words), 6)):
        key = " ".join(words[i:])
        if key in LABELS:
            return LABELS[key]
        m = STAT.match(key)
        if m:
            owner = "v" if m.group(2) == "e2el" else "s" if m.group(2) == "e2e latency" else ""
            return (f"{STAT_FIELD[m.group(2)]}:{bc.stat_key(m.group(1))}", bc.num, owner)
    return None


def read_field(line: str) -> tuple[str, str] | None:
    """(label, value) from a `Label:   value` line, else None."""
    if len(line) > MAX_FIELD_LINE or ":" not in line:
        return None
    for m in FIELD.finditer(line):
        if line[m.end():].strip() == "":
            return m.group(1), m.group(2)
    return None


def parse_namespace(text: str) -> dict[str, Any]:
    """The NS_KEYS values of a printed argparse/SimpleNamespace repr."""
    out: dict[str, Any] = {}
    for key in NS_KEYS:
        m = re.search(rf"(?<![\w.]){key}=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^,()\[\]{{}}]*)", text)
        if not m:
            continue
        raw = m.group(1).strip()
        if raw in ("inf", "float('inf')"):
            out[key] = float("inf")
            continue
        try:
            out[key] = ast.literal_eval(raw)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            continue
    return out


class Block:
    """What one result block said, as read so far."""

    def __init__(self, line: int) -> None:
        self.line = line
        self.values: dict[str, Any] = {}
        self.owner = {"s": 0, "v": 0}
        self.unknown = 0


class ServingBenchText:
    """Streaming reader of result blocks; subclasses name the tool they keep."""

    kind = "serving-bench-text"
    tool = ""
    flavour = ""  # "s" or "v": whose blocks this parser keeps

    def __init__(self, path: str) -> None:
        self.path = str(path)
        self.runs: list[BenchRun] = []
        self.block: Block | None = None
        self.prelude: dict[str, Any] = {}  # vLLM's lines before a block
        self.args: dict[str, Any] = {}  # the last Namespace(...) line
        self.args_used = False

    @bc.guarded("benchmark result block")
    def feed(self, lineno: int, line: str) -> None:
        if HEADER in line:
            self._close()
            self.block = Block(lineno)
            return
        if self.block is None:
            self._outside(line)
            return
        if FOOTER.match(line):
            self._close()
            return
        got = read_field(line)
        if got is None:
            # Section rules ("----Time to First Token----") and blanks belong to the block;
            # several other lines in a row mean the block was cut short.
            if line.strip() and "-----" not in line:
                self.block.unknown += 1
                if self.block.unknown >= MAX_UNKNOWN:
                    self._close()
            return
        self.block.unknown = 0
        entry = lookup(got[0])
        if entry is None:  # a label this reader does not use (RTFx, probe requests, ...)
            return
        dest, conv, owner = entry
        if owner:
            self.block.owner[owner] += 1
        value = got[1]
        if conv is str:
            self.block.values[dest] = value
            return
        v = conv(value)
        if v is not None or conv in (bc.concurrency, bc.rate):  # "not set" is a value
            self.block.values[dest] = v

    def _outside(self, line: str) -> None:
        if "amespace(" in line:
            # NAMESPACE ends in `\)\s*$`: without a closing parenthesis every "Namespace(" in the
            # line would be tried to the end of it (quadratic)
            m = NAMESPACE.search(line) if line.rstrip().endswith(")") else None
            if m:
                self.args = parse_namespace(m.group(1))
                self.args_used = False
            return
        m = PRELUDE_LINE.search(line)
        if m:
            dest = PRELUDE[m.group(1).lower()]
            conv = bc.rate if dest == "request_rate" else bc.concurrency if dest == "concurrency" else bc.num
            self.prelude[dest] = conv(m.group(2))

    def _close(self) -> None:
        block, self.block = self.block, None
        if block is None:
            return
        run = self._run(block)
        if run is not None and len(self.runs) < MAX_RUNS:
            self.runs.append(run)
        if block.values:  # what came before this block was about this block
            self.prelude = {}
            if self._owns(block):
                self.args_used = True  # later runs of the same invocation keep the model
            else:
                self.args = {}

    def _owns(self, block: Block) -> bool:
        # sglang always prints "Backend:" first; otherwise count the labels only one tool prints.
        sglang = "backend" in block.values or block.owner["s"] > block.owner["v"]
        return sglang == (self.flavour == "s")

    def _run(self, block: Block) -> BenchRun | None:
        if not self._owns(block):
            return None
        fields: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        stats: dict[str, dict[str, float]] = {}
        for dest, v in block.values.items():
            if dest.startswith("x:"):
                extra[dest[2:]] = v
            elif "_ms:" in dest:
                name, _, stat = dest.partition(":")
                if v is not None:
                    stats.setdefault(name, {})[stat] = v
            else:
                fields[dest] = v
        # Fill what the block lacks from the lines before it (never overriding it).
        args = self.args if not self.args_used else {"model": self.args.get("model")}
        for dest, v in self.prelude.items():
            if dest.startswith("x:"):
                extra.setdefault(dest[2:], v)
            elif dest not in fields:
                fields[dest] = v
        if "concurrency" not in fields and "max_concurrency" in args:
            fields["concurrency"] = bc.concurrency(args["max_concurrency"])
        if "request_rate" not in fields and "request_rate" in args:
            fields["request_rate"] = bc.rate(args["request_rate"])
        fields.setdefault("backend", args.get("backend") if isinstance(args.get("backend"), str) else None)
        model = args.get("model") or args.get("served_model_name")
        for k in ("dataset_name", "random_input_len", "random_output_len", "random_range_ratio", "burstiness"):
            if isinstance(args.get(k), (str, int, float)) and not isinstance(args.get(k), bool):
                extra.setdefault(k, args[k])
        completed = fields.get("completed")
        run = bc.make_run(
            self.path, block.line, tool=self.tool, model=model if isinstance(model, str) else None,
            num_prompts=bc.count(args.get("num_prompts")),
            input_len=bc.per_request(extra.get("total_input_tokens"), completed),
            output_len=bc.per_request(extra.get("total_output_tokens"), completed),
            server_args={"bench": kept} if (kept := {k: v for k, v in extra.items() if v is not None}) else None,
            **fields, **{k: bc.with_median(v) for k, v in stats.items()},
        )
        return run if bc.has_throughput(run) else None

    @bc.guarded("benchmark result block")
    def results(self) -> list[BenchRun]:
        """Runs so far, plus the block still open (a capture cut mid-block)."""
        pending = self._run(self.block) if self.block is not None else None
        return self.runs + ([pending] if pending else [])
