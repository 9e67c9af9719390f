"""Every format kb reads from a run's files, in one table.

Detection (ingest.run reads a file with these readers, in this order; ingest.detect asks
them whether a markdown file is their output), `kb ingest`'s report and its message for
an unknown file, the fuzzer (benchmarks/fuzz.py) and the sample tests (tests/test_formats.py,
tests/test_bench_parsers.py) all read FORMATS. A new format is:

1. a module in ingest/ with a reader class (ingest/base.py: a LineParser or a JsonReader);
2. one line in FORMATS;
3. a folder of real outputs under tests/data/samples/ with a SOURCES.md saying where
   each came from.

tests/test_formats.py fails when a reader class has no line here, a line has no samples,
or a sample is not detected as its format.

Findings markdown is not a run format: it goes to the index, and ingest.detect sets it
apart before any of these readers runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Literal

from ingest.bench_command import BenchCommandLines
from ingest.genai_perf import AiPerfJson, GenAiPerfCsv, GenAiPerfJson
from ingest.generic_results import GenericResultsJson, GenericResultsText, only_a_results_table
from ingest.guidellm import GuidellmJson
from ingest.hf_config import HfConfigReader
from ingest.hf_quant import HfQuantConfigReader
from ingest.kb_sweep import KbSweepJsonl
from ingest.launch_command import FlagListLines, LaunchCommandLines
from ingest.nvidia_smi import NvidiaSmiCsv, NvidiaSmiList, NvidiaSmiQ, NvidiaSmiTable, NvidiaSmiTopo
from ingest.offline_bench import SglangOneBatchText, VllmThroughputText
from ingest.sglang_bench import SglangBenchJsonl, SglangBenchText
from ingest.sglang_log import SglangLog
from ingest.textevidence import TextLines
from ingest.vllm_bench import VllmBenchJson, VllmBenchText
from ingest.vllm_log import VllmLog

Shape = Literal["lines", "json"]


@dataclass(frozen=True)
class Format:
    kind: str  # what `kb ingest` reports a file as; the reader's own `kind`
    reader: type  # LineParser class (built with the file's path) or JsonReader class
    shape: Shape  # "lines": fed every line of a text file; "json": given each decoded document
    # JSON readers are tried in this order and the first to return records owns the document;
    # line parsers are all fed every line, and their records are gathered in this order
    priority: int
    description: str  # one line: which tool prints it, and how
    family: str  # what the message for an unknown file names ("benchmark output", ...)
    samples: str  # folder under tests/data/samples holding real outputs of this format
    pattern: str = ""  # regex on a file name: which of the folder's files are this format (a folder may hold several)
    stats_lines: bool = False  # a server log: the only parsers fed the periodic stats lines
    leftover: bool = False  # reads only what no other reader of its shape claimed
    companion: str = ""  # recognised, but read together with this other file (yields nothing alone)
    markdown: Callable[[str], bool] | None = None  # says a .md file is this format's output, not findings


FORMATS: tuple[Format, ...] = (
    Format("sglang-bench-text", SglangBenchText, "lines", 10, "sglang bench_serving's printed result block",
           "benchmark output", "sglang_bench_text"),
    Format("vllm-bench-text", VllmBenchText, "lines", 20,
           "vLLM benchmark_serving / `vllm bench serve` printed result block",
           "benchmark output", "vllm_bench_text"),
    Format("genai-perf-csv", GenAiPerfCsv, "lines", 30, "GenAI-Perf / AIPerf profile_export_*.csv",
           "benchmark output", "genai_perf", r"\.csv$"),
    Format("sglang-log", SglangLog, "lines", 40, "sglang server log: start-up facts, server_args, batch stats, events",
           "server log", "sglang_logs", stats_lines=True),
    Format("vllm-log", VllmLog, "lines", 50, "vLLM server log: start-up facts, engine args, stats lines, events",
           "server log", "vllm_logs", stats_lines=True),
    Format("launch-command", LaunchCommandLines, "lines", 60,
           "a `python -m sglang.launch_server …`, `vllm serve …` or docker run command in any capture",
           "launch command", "launch_commands"),
    Format("server-flags", FlagListLines, "lines", 70, "server flags listed one per line, without the command",
           "launch command", "server_flags"),
    Format("sglang-one-batch-text", SglangOneBatchText, "lines", 80,
           "sglang bench_latency / bench_one_batch output with its command", "benchmark output",
           "sglang_one_batch_text"),
    Format("vllm-throughput-text", VllmThroughputText, "lines", 90,
           "vLLM benchmark_throughput / `vllm bench throughput` output with its command", "benchmark output",
           "vllm_throughput_text"),
    Format("bench-command", BenchCommandLines, "lines", 95,
           "a `vllm bench serve` / benchmark_serving.py / sglang.bench_serving command without its result block",
           "benchmark command", "bench_commands"),
    Format("nvidia-smi-q", NvidiaSmiQ, "lines", 100, "`nvidia-smi -q`", "nvidia-smi output", "nvidia_smi", r"-q\.txt$"),
    Format("nvidia-smi-csv", NvidiaSmiCsv, "lines", 110, "`nvidia-smi --query-gpu=… --format=csv`",
           "nvidia-smi output", "nvidia_smi", "csv"),
    Format("nvidia-smi-table", NvidiaSmiTable, "lines", 120, "the plain `nvidia-smi` table",
           "nvidia-smi output", "nvidia_smi", r"_nvidia-smi\.txt$"),
    Format("nvidia-smi-list", NvidiaSmiList, "lines", 130, "`nvidia-smi -L` and env dumps' `GPU 0,1: NAME` lines",
           "nvidia-smi output", "nvidia_smi", "list"),
    Format("nvidia-smi-topo", NvidiaSmiTopo, "lines", 140, "`nvidia-smi topo -m`", "nvidia-smi output",
           "nvidia_smi", "topo"),
    Format("generic-results", GenericResultsText, "lines", 900,
           "any results table (markdown, box-drawn, aligned, CSV) whose header names a load column",
           "results table", "generic_results", leftover=True, markdown=only_a_results_table),
    Format("text", TextLines, "lines", 1000,
           "any other text (a pasted issue, notes): its lines, read as prose evidence",
           "text", "prose", leftover=True),  # TEXT
    Format("hf-config", HfConfigReader, "json", 10, "a Hugging Face model config.json", "config.json", "model_configs",
           r"(?<!hf_quant)[._]config\.json$"),
    Format("kb-sweep-jsonl", KbSweepJsonl, "json", 20, "`kb sweep` output: sglang's JSON lines plus /metrics samples",
           "benchmark output", "kb_sweep", r"\.jsonl$"),
    Format("sglang-bench-jsonl", SglangBenchJsonl, "json", 30, "sglang bench_serving --output-file JSON lines",
           "benchmark output", "sglang_bench_jsonl"),
    Format("vllm-bench-json", VllmBenchJson, "json", 40,
           "vLLM benchmark_serving / `vllm bench serve` --save-result JSON",
           "benchmark output", "vllm_bench_json"),
    Format("guidellm-json", GuidellmJson, "json", 50, "GuideLLM benchmarks.json", "benchmark output",
           "guidellm_json", r"\.json$"),
    Format("genai-perf-json", GenAiPerfJson, "json", 60, "GenAI-Perf profile_export_genai_perf.json",
           "benchmark output", "genai_perf", r"genai_perf\.json$"),
    Format("aiperf-json", AiPerfJson, "json", 70, "AIPerf profile_export_aiperf.json", "benchmark output",
           "genai_perf", r"aiperf\.json$"),
    Format("generic-results", GenericResultsJson, "json", 900, "a JSON list of result rows whose keys name a load",
           "results table", "generic_results", r"\.json$", leftover=True),
    Format("hf-quant-config", HfQuantConfigReader, "json", 950, "a ModelOpt hf_quant_config.json",
           "config.json", "model_configs", r"hf_quant_config\.json$", companion="the config.json beside it"),
)


TEXT = "text"  # prose: every text file's lines; the kind of one that no other format recognised


def of_shape(shape: Shape) -> list[Format]:
    return sorted((f for f in FORMATS if f.shape == shape), key=lambda f: f.priority)


def prose() -> Format:
    return by_kind(TEXT)[0]


def stats_kinds() -> set[str]:
    return {f.kind for f in FORMATS if f.stats_lines}


def leftover_kinds(shape: Shape) -> set[str]:
    return {f.kind for f in FORMATS if f.leftover and f.shape == shape}


def by_kind(kind: str) -> list[Format]:
    return [f for f in FORMATS if f.kind == kind]


def reported_kind(f: Format) -> str:
    """The kind `kb ingest` shows: a companion file says what it is read with."""
    return f"{f.kind} (read with {f.companion})" if f.companion else f.kind


def describe(reported: str) -> str | None:
    """The description of a kind as `kb ingest` reports it (the companion note stripped);
    a kind read both from text and from JSON (generic-results) has both."""
    found = by_kind(reported.split(" (", 1)[0])
    return " / ".join(dict.fromkeys(f.description for f in found)) or None


def unknown_file() -> str:
    """Why a file was skipped: it is none of the formats (their families, text formats first)."""
    families = list(dict.fromkeys(f.family for f in of_shape("lines") + of_shape("json")
                                  if not f.companion and f.kind != TEXT))
    return f"not a recognised format ({', '.join(families[:-1])} or {families[-1]})"


def sample_files(f: Format, samples_root: Path) -> list[Path]:
    """The sample outputs of a format (its folder's provenance notes left out)."""
    folder = samples_root / f.samples
    return sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("SOURCES")
                  and re.search(f.pattern, p.name)) if folder.is_dir() else []


def document() -> str:
    """docs/FORMATS.md: what kb reads from a run, from this table (`python -m ingest.formats`)."""
    rows = [f"| `{f.kind}` | {f.description}{' (read with ' + f.companion + ')' if f.companion else ''} | "
            f"{'lines' if f.shape == 'lines' else 'JSON / JSON lines'} | tests/data/samples/{f.samples} |"
            for shape in ("lines", "json") for f in of_shape(shape)]
    return "\n".join([
        "# Run formats",
        "",
        "What `kb ingest`, `kb diagnose` and `kb signals` read from a run's files, recognised by",
        "content, never by name. Generated from ingest/formats.py (`python -m ingest.formats >",
        "docs/FORMATS.md`); tests/test_formats.py checks it is current. Text formats are read in",
        "one pass, every parser fed every line, so one capture can hold several; a JSON document",
        "goes to the first reader, in this order, that finds records in it. Findings markdown",
        "is not listed: it goes to the index (findings/FORMAT.md).",
        "",
        "| kind | what it is | read as | samples |",
        "| --- | --- | --- | --- |",
        *rows,
        "",
        "A file none of these recognise is skipped: " + unknown_file() + ".",
        "",
        "To add a format: a module in ingest/ with a reader class (ingest/base.py), one line in",
        "`FORMATS`, a folder of real outputs under tests/data/samples with a SOURCES.md, then",
        "regenerate this page.",
        "",
    ])


if __name__ == "__main__":
    print(document(), end="")
