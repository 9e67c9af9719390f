"""GuideLLM's benchmarks report (`guidellm benchmark ... --output-path benchmarks.json`).

One BenchRun per entry of "benchmarks" (one per strategy/load level of a sweep).
Schema read from vllm-project/guidellm: src/guidellm/benchmark/benchmark.py
(v0.2.x-v0.3.x: benchmark.args.strategy, benchmark.worker.backend_model,
benchmark.request_totals) and src/guidellm/benchmark/schemas/ (v0.4+: benchmark.config
.strategy/.backend, metrics.request_totals). The metrics block is the same in all:
metrics.<name>.{successful,errored,incomplete,total} distribution summaries with
mean/median/std_dev/min/max and percentiles p001..p999. GuideLLM 0.1.x reports
(a different layout) are not read.

GuideLLM's inter_token_latency_ms is (last token - first token) / (tokens - 1) per
request: what vLLM and sglang call TPOT, so it fills tpot_ms. Its own
time_per_output_token_ms divides by all tokens (and, from 0.4, counts from the request
start), which no other tool reports; it is kept in server_args["bench"]. GuideLLM has
no per-chunk gap statistic, so itl_ms stays empty.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from ingest import bench_common as bc
from kb.records import BenchRun

KIND = "guidellm-json"
TOOL = "guidellm"


def _dist(metrics: Mapping, name: str, status: str = "successful") -> Mapping:
    d = metrics.get(name)
    if not isinstance(d, Mapping):
        return {}
    got = d.get(status)
    return got if isinstance(got, Mapping) else {}


def _mean(metrics: Mapping, name: str) -> float | None:
    return bc.num(_dist(metrics, name).get("mean"))


def _load(strategy: Any) -> tuple[int | None, float | None]:
    """(concurrency, request rate) a scheduling strategy ran at."""
    if not isinstance(strategy, Mapping):
        return None, None
    kind = strategy.get("type_")
    limit = bc.concurrency(strategy.get("max_concurrency"))
    if kind == "synchronous":
        return 1, None
    if kind == "concurrent":
        return bc.concurrency(strategy.get("streams")), None
    if kind == "throughput":  # everything at once, up to max_concurrency
        return limit, math.inf
    if kind in ("constant", "poisson"):
        # the load level is the rate; max_concurrency here is only GuideLLM's worker cap
        return None, bc.rate(strategy.get("rate"))
    return None, None


def _run(b: Mapping, report: Mapping, path: str, line: int | None) -> BenchRun | None:
    m = b.get("metrics")
    if not isinstance(m, Mapping):
        return None
    strategy = bc.dig(b, "config.strategy", "args.strategy")
    conc, req_rate = _load(strategy)
    totals = bc.dig(b, "metrics.request_totals", "request_totals") or {}
    totals = totals if isinstance(totals, Mapping) else {}
    model = bc.dig(b, "config.backend.model", "worker.backend_model", "config.requests.model")
    model = model or bc.dig(report, "args.model", "config.backend.model", "config.model")
    extra = {
        "strategy": strategy.get("type_") if isinstance(strategy, Mapping) else None,
        "incomplete": bc.count(totals.get("incomplete")),
        "backend_type": bc.dig(b, "config.backend.type_", "worker.backend_type"),
        "mean_concurrency": _mean(m, "request_concurrency"),
        "max_concurrency": bc.concurrency(strategy.get("max_concurrency")) if isinstance(strategy, Mapping) else None,
        "guidellm_version": bc.dig(report, "metadata.guidellm_version"),
        "time_per_output_token_ms": bc.stats(_dist(m, "time_per_output_token_ms")) or None,
    }
    peak = bc.num(_dist(m, "request_concurrency", "total").get("max"))
    run = bc.make_run(
        path, line, tool=TOOL,
        model=model if isinstance(model, str) else None,
        concurrency=conc, request_rate=req_rate,
        completed=bc.count(totals.get("successful")), failed=bc.count(totals.get("errored")),
        duration_s=bc.num(b.get("duration")),
        input_len=_mean(m, "prompt_token_count"), output_len=_mean(m, "output_token_count"),
        request_throughput=_mean(m, "requests_per_second"),
        input_throughput=_mean(m, "prompt_tokens_per_second"),
        output_throughput=_mean(m, "output_tokens_per_second"),
        total_throughput=_mean(m, "tokens_per_second"),
        peak_concurrency=peak if peak is not None else bc.num(_dist(m, "request_concurrency").get("max")),
        ttft_ms=bc.stats(_dist(m, "time_to_first_token_ms")),
        tpot_ms=bc.stats(_dist(m, "inter_token_latency_ms")),  # see the module docstring
        e2e_ms=bc.stats(_dist(m, "request_latency"), scale=1000.0),  # GuideLLM keeps seconds here
        server_args={"bench": kept} if (kept := {k: v for k, v in extra.items() if v is not None}) else None,
    )
    return run if bc.has_throughput(run) else None


@bc.guarded(KIND)
def read(doc: Any, path: str, line: int | None) -> list[BenchRun] | None:
    """A GuideLLM report → one BenchRun per benchmark, or None if not a report."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("benchmarks"), list):
        return None
    found = [b for b in doc["benchmarks"] if isinstance(b, Mapping) and isinstance(b.get("metrics"), Mapping)
             and ("requests_per_second" in b["metrics"] or "time_to_first_token_ms" in b["metrics"])]
    if not found:
        return None
    return [r for b in found if (r := _run(b, doc, path, line)) is not None]


class GuidellmJson:
    kind = KIND
    read = staticmethod(read)


READERS = (GuidellmJson,)
