"""vLLM's serving benchmark (`vllm bench serve`, formerly benchmarks/benchmark_serving.py):
the printed result block and the `--save-result` / `--append-result` JSON.

JSON keys read from vllm vllm/benchmarks/serve.py (main_async/benchmark) and the
older benchmarks/benchmark_serving.py. `--append-result` writes one object per
line, so such a file is read as JSONL; `--save-detailed` arrays are ignored.
"""

from __future__ import annotations

from typing import Any

from ingest import bench_common as bc
from ingest.bench_text import ServingBenchText
from kb.records import BenchRun

KIND = "vllm-bench-json"
TOOL = "vllm-bench"


class VllmBenchText(ServingBenchText):
    """The "Serving Benchmark Result" blocks vLLM prints, with the
    "Traffic request rate"/"Maximum request concurrency" lines printed before them."""

    kind = "vllm-bench-text"
    tool = TOOL
    flavour = "v"


_FIELDS = {
    "duration": ("duration_s", bc.num),
    "completed": ("completed", bc.count),
    "failed": ("failed", bc.count),
    "num_prompts": ("num_prompts", bc.count),
    "request_throughput": ("request_throughput", bc.num),
    "input_throughput": ("input_throughput", bc.num),  # older benchmark_serving.py
    "output_throughput": ("output_throughput", bc.num),
    "total_token_throughput": ("total_throughput", bc.num),
    "max_output_tokens_per_s": ("peak_output_throughput", bc.num),
    "max_concurrent_requests": ("peak_concurrency", bc.num),
    "spec_decode_acceptance_length": ("accept_length", bc.num),
}
_METRICS = {"ttft_ms": "ttft", "tpot_ms": "tpot", "itl_ms": "itl", "e2e_ms": "e2el"}
_USED = frozenset(_FIELDS) | {"backend", "endpoint_type", "model_id", "max_concurrency", "request_rate"}


@bc.guarded(KIND)
def read(doc: Any, path: str, line: int | None) -> list[BenchRun] | None:
    """One saved result object → [BenchRun], or None if not vLLM's."""
    if bc.serving_flavour(doc) != "vllm":
        return None
    fields = {dest: conv(doc.get(key)) for key, (dest, conv) in _FIELDS.items()}
    completed = fields["completed"]
    # Everything else plain at the top level: tool args, `--metadata KEY=VALUE` tags,
    # goodput, spec-decode counters; arrays (--save-detailed) are skipped by scalars().
    extra = bc.scalars(doc, _USED | {k for k in doc if k.endswith("_ms")})
    backend = doc.get("backend", doc.get("endpoint_type"))
    run = bc.make_run(
        path, line, tool=TOOL,
        backend=backend if isinstance(backend, str) else None,
        model=doc["model_id"] if isinstance(doc.get("model_id"), str) else None,
        concurrency=bc.concurrency(doc.get("max_concurrency")),
        request_rate=bc.rate(doc.get("request_rate")),
        input_len=bc.per_request(doc.get("total_input_tokens"), completed),
        output_len=bc.per_request(doc.get("total_output_tokens"), completed),
        server_args={"bench": extra} if extra else None,
        **fields, **{f: bc.flat_stats(doc, m) for f, m in _METRICS.items()},
    )
    return [run]


class VllmBenchJson:
    kind = KIND
    read = staticmethod(read)


READERS = (VllmBenchJson,)
