"""GenAI-Perf (`profile_export_genai_perf.json` / `.csv`) and its successor AIPerf
(`profile_export_aiperf.json` / `.csv`): one run per file.

Both write {metric: {"unit": …, "avg": …, "p50": …, …}} at the top level
(AIPerf's JsonExportData "mimics the GenAI-Perf JSON output") plus "input_config",
whose layout differs: GenAI-Perf flat (≤0.0.12: "concurrency", "model") or nested
(perf_analyzer.stimulus, model_names); AIPerf "loadgen" (0.1-0.2) or "phases" (0.3+).
Sources: triton-inference-server/perf_analyzer genai-perf/genai_perf/export_data/
{json,csv}_exporter.py, ai-dynamo/aiperf aiperf/common/models/export_models.py and
aiperf/exporters/metrics_csv_exporter.py.

Both tools' "inter_token_latency" is (request latency - TTFT) / (output tokens - 1),
which vLLM and sglang call TPOT, so it goes to tpot_ms; AIPerf's per-chunk gap
("inter_chunk_latency") is what they call ITL and goes to itl_ms.
"""

from __future__ import annotations

import csv
import re
from typing import Any, Mapping

from ingest import bench_common as bc
from kb.records import BenchRun

KIND = "genai-perf-json"
AIPERF_KIND = "aiperf-json"
CSV_KIND = "genai-perf-csv"

_METRIC_KEYS = ("request_throughput", "output_token_throughput", "time_to_first_token", "request_latency")
_AIPERF_TOP = ("aiperf_version", "schema_version", "was_cancelled", "benchmark_id", "error_summary", "run_info")
_AIPERF_CFG = ("loadgen", "phases", "models", "cli_command")

# metric name → (BenchRun field, kind): "stats" = latency dict, "avg" = one value,
# "duration" = seconds, "x" = kept in server_args["bench"].
METRICS = {
    "request_throughput": ("request_throughput", "avg"),
    "output_token_throughput": ("output_throughput", "avg"),
    "total_token_throughput": ("total_throughput", "avg"),
    "input_token_throughput": ("input_throughput", "avg"),
    "time_to_first_token": ("ttft_ms", "stats"),
    "inter_token_latency": ("tpot_ms", "stats"),
    "inter_chunk_latency": ("itl_ms", "stats"),
    "request_latency": ("e2e_ms", "stats"),
    "input_sequence_length": ("input_len", "avg"),
    "output_sequence_length": ("output_len", "avg"),
    "request_count": ("completed", "count"),
    "error_request_count": ("failed", "count"),
    "benchmark_duration": ("duration_s", "duration"),
    "request_goodput": ("request_goodput", "x"),
    "goodput": ("request_goodput", "x"),
    "output_token_throughput_per_user": ("output_token_throughput_per_user", "x"),
}


def flavour(doc: Any) -> str | None:
    """'genai-perf' or 'aiperf' for a profile export, else None."""
    if not isinstance(doc, Mapping):
        return None
    if not any(isinstance(doc.get(k), Mapping) and ("avg" in doc[k] or "unit" in doc[k]) for k in _METRIC_KEYS):
        return None
    cfg = doc.get("input_config")
    if any(k in doc for k in _AIPERF_TOP) or (isinstance(cfg, Mapping) and any(k in cfg for k in _AIPERF_CFG)):
        return "aiperf"
    return "genai-perf"


def fields_from_metrics(metrics: Mapping[str, Mapping]) -> tuple[dict[str, Any], dict[str, Any]]:
    """BenchRun fields and extras from {metric name: {"unit", "avg", "p99", …}}."""
    fields: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for name, (dest, how) in METRICS.items():
        m = metrics.get(name)
        if not isinstance(m, Mapping):
            continue
        avg = bc.num(m.get("avg"))
        if how == "stats":
            scale = bc.ms_scale(m.get("unit"))
            if scale is not None:
                fields[dest] = bc.stats({k: v for k, v in m.items() if k != "unit"}, scale)
        elif how == "avg":
            fields[dest] = avg
        elif how == "count":
            fields[dest] = bc.count(round(avg)) if avg is not None else None
        elif how == "duration":
            scale = bc.ms_scale(m.get("unit"), default=1000.0)  # AIPerf reports seconds
            fields[dest] = avg * scale / 1000 if avg is not None and scale else None
        elif avg is not None:
            extra[dest] = avg
    return fields, extra


def _first_str(v: Any) -> str | None:
    if isinstance(v, list) and v:
        v = v[0]
    if isinstance(v, Mapping):
        v = v.get("name")
    return v if isinstance(v, str) else None


def _load(cfg: Mapping) -> tuple[int | None, float | None]:
    """(concurrency, request rate) from input_config, whichever layout it has."""
    phase: Any = None
    phases = cfg.get("phases")
    if isinstance(phases, list):  # AIPerf 0.3+: the profiling phase, not the warmup
        named = [p for p in phases if isinstance(p, Mapping) and p.get("name") != "warmup"]
        phase = named[-1] if named else None
    conc = bc.dig(cfg, "concurrency", "perf_analyzer.stimulus.concurrency", "loadgen.concurrency")
    req_rate = bc.dig(cfg, "request_rate", "perf_analyzer.stimulus.request_rate", "loadgen.request_rate")
    if isinstance(phase, Mapping):
        conc = conc if conc is not None else phase.get("concurrency")
        req_rate = req_rate if req_rate is not None else phase.get("rate")
    return bc.concurrency(conc), bc.rate(req_rate)


def _read(doc: Any, path: str, line: int | None, want: str) -> list[BenchRun] | None:
    tool = flavour(doc)
    if tool != want:
        return None
    fields, extra = fields_from_metrics(doc)
    cfg = doc.get("input_config") if isinstance(doc.get("input_config"), Mapping) else {}
    conc, req_rate = _load(cfg)
    model = _first_str(bc.dig(cfg, "model", "model_names", "endpoint.model_names", "models.items", "models"))
    backend = None
    if bc.dig(cfg, "service_kind", "endpoint.service_kind") == "triton":  # else "backend" is an unused default
        backend = bc.dig(cfg, "backend", "endpoint.backend")
    for k in ("aiperf_version", "was_cancelled", "is_complete"):
        if isinstance(doc.get(k), (str, bool)):
            extra[k] = doc[k]
    run = bc.make_run(path, line, tool=tool, model=model, concurrency=conc, request_rate=req_rate,
                      backend=backend if isinstance(backend, str) else None,
                      server_args={"bench": extra} if extra else None, **fields)
    return [run] if bc.has_throughput(run) else []


@bc.guarded(KIND)
def read(doc: Any, path: str, line: int | None) -> list[BenchRun] | None:
    """A profile_export_genai_perf.json document → [BenchRun], else None."""
    return _read(doc, path, line, "genai-perf")


@bc.guarded(AIPERF_KIND)
def read_aiperf(doc: Any, path: str, line: int | None) -> list[BenchRun] | None:
    """A profile_export_aiperf.json document → [BenchRun], else None."""
    return _read(doc, path, line, "aiperf")


class GenAiPerfJson:
    kind = KIND
    read = staticmethod(read)


class AiPerfJson:
    kind = AIPERF_KIND
    read = staticmethod(read_aiperf)


READERS = (GenAiPerfJson, AiPerfJson)

# ---------------------------------------------------------------- CSV

_NAME = re.compile(r"^\s*(?P<name>[^()]+?)\s*(?:\((?P<unit>[^()]*)\))?\s*$")


class GenAiPerfCsv:
    """The two tables of profile_export_genai_perf.csv (and AIPerf's
    profile_export_aiperf.csv): "Metric,avg,min,max,p99,…" rows of per-request
    statistics, then "Metric,Value" rows of run totals. No load level is written
    in these files, so concurrency stays unknown."""

    kind = CSV_KIND

    def __init__(self, path: str) -> None:
        self.path = str(path)
        self.columns: list[str] | None = None
        self.first_line: int | None = None
        self.metrics: dict[str, dict[str, Any]] = {}

    @bc.guarded(CSV_KIND)
    def feed(self, lineno: int, line: str) -> None:
        if "," not in line:
            return
        try:
            row = next(csv.reader([line]))
        except (csv.Error, StopIteration):
            return
        if row and row[0].strip() == "Metric":  # a table header
            self.columns = [c.strip() for c in row]
            self.first_line = self.first_line or lineno
            return
        if self.columns is None or len(row) < 2:
            return
        m = _NAME.match(row[0])
        if not m:
            return
        name = "_".join(m.group("name").lower().split())
        if name not in METRICS:
            return
        stats: dict[str, Any] = {"unit": (m.group("unit") or "").strip() or None}
        for col, val in zip(self.columns[1:], row[1:], strict=False):
            stats["avg" if col == "Value" else col] = val
        self.metrics[name] = stats

    @bc.guarded(CSV_KIND)
    def results(self) -> list[BenchRun]:
        if not self.metrics:
            return []
        fields, extra = fields_from_metrics(self.metrics)
        tool = "aiperf" if "aiperf" in self.path.rsplit("/", 1)[-1].lower() else "genai-perf"
        run = bc.make_run(self.path, self.first_line, tool=tool,
                          server_args={"bench": extra} if extra else None, **fields)
        return [run] if bc.has_throughput(run) else []
