"""Everything known about one run: benchmark results, server logs, launch command,
model profile and hardware — the input to signals and rules."""

from __future__ import annotations

import math
from statistics import median

from pydantic import BaseModel, Field

from kb.records import BenchRun, Hardware, ModelProfile, ServerTrace, Where


def spread(values: list[float]) -> float | None:
    """(max - min) / median of repeated runs; None for a single run or a zero median."""
    if len(values) < 2:
        return None
    mid = median(values)
    return (max(values) - min(values)) / mid if mid else None


class TextLine(BaseModel):
    """A line of text a run's files hold: a notable log line (a warning, an error) or a
    line of prose (a pasted issue, notes). Findings' `log` and `text` conditions and the
    text-similarity query read these."""

    text: str
    where: Where | None = None
    kind: str = "log"  # log (from a recognised log) or prose (a file no parser recognised)
    count: int = 1  # how many times a log line with this message appeared


class BenchCommandText(BaseModel):
    """A serving-benchmark command found in a run's file (ingest.bench_command finds them,
    in any text file, beside a result block or not): its text with `\\` continuations
    joined, for kb.benchcmd.parse. The benchmark-method rule reads these."""

    text: str
    where: Where | None = None


class CurvePoint(BaseModel):
    level: float  # concurrency (or request rate when no concurrency was set)
    throughput: float  # total tok/s, median of the runs at this level
    output_throughput: float | None = None
    ttft_median_ms: float | None = None
    runs: int = 1
    spread: float = 0.0  # (max - min) / median of throughput across runs at this level
    sources: list[Where] = Field(default_factory=list)


class RunEvidence(BaseModel):
    engine: str | None = None
    engine_version: str | None = None
    bench: list[BenchRun] = Field(default_factory=list)
    traces: list[ServerTrace] = Field(default_factory=list)
    model: ModelProfile | None = None
    model_path: str | None = None  # what the server was launched with, for commands
    hardware: Hardware | None = None
    server_args: dict = Field(default_factory=dict)  # normalised: keys like "max_running_requests"
    server_args_source: str | None = None
    server_args_complete: bool = False  # all of the server's launch arguments are known (not a few probed ones)
    launch_argv: list[str] = Field(default_factory=list)  # the launch command in use, when known
    launch_env: dict[str, str] = Field(default_factory=dict)
    files: list[dict] = Field(default_factory=list)  # {"path", "kind", "yielded"} / {"path", "skipped"}
    text: list[TextLine] = Field(default_factory=list)  # notable log lines and prose lines
    bench_commands: list[BenchCommandText] = Field(default_factory=list)  # in file order, then line order
    text_context: dict = Field(default_factory=dict)  # model, model_family, quantization named in prose
    warnings: list[str] = Field(default_factory=list)

    def curve(self) -> list[CurvePoint]:
        """Throughput against load: runs at the same level become one point (median)."""
        by_level: dict[float, list[BenchRun]] = {}
        for r in self.bench:
            if r.throughput():
                by_level.setdefault(r.level(), []).append(r)
        points = []
        for level in sorted(by_level):
            runs = by_level[level]
            tps = [r.throughput() for r in runs]
            mid = median(tps)
            outs = [r.output_throughput for r in runs if r.output_throughput]
            ttfts = [r.ttft_ms.get("median", r.ttft_ms.get("mean")) for r in runs if r.ttft_ms]
            points.append(CurvePoint(
                level=level, throughput=mid, output_throughput=median(outs) if outs else None,
                ttft_median_ms=median([t for t in ttfts if t is not None]) if any(t is not None for t in ttfts)
                else None,
                runs=len(runs), spread=spread(tps) or 0.0,
                sources=[r.source for r in runs if r.source]))
        return points

    def arg(self, *names: str):
        """A server argument under any of its names (sglang and vLLM spell them differently)."""
        for n in names:
            key = n.lstrip("-").replace("-", "_")
            if key in self.server_args and self.server_args[key] is not None:
                return self.server_args[key]
        return None

    def tp_size(self) -> int | None:
        v = self.arg("tp_size", "tensor_parallel_size", "tp")
        try:
            return int(v) if v not in (None, "") else None
        except (TypeError, ValueError):  # `--tp-size x y` in a pasted command
            return None


def gain_per_doubling(t0: float, t1: float, c0: float, c1: float) -> float:
    """Throughput gain normalised to one doubling of load, so 32→128 and 128→256 compare."""
    if t0 <= 0 or c1 <= c0:
        return 0.0
    doublings = math.log2(c1 / c0)
    return (t1 / t0) ** (1 / doublings) - 1 if doublings > 0 else 0.0
