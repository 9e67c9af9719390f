"""sglang's serving benchmark (`python -m sglang.bench_serving`, later
`sglang.benchmark.serving`): the printed result block and the `--output-file` JSONL.

JSONL keys read from sglang python/sglang/bench_serving.py (2024-2026) and
python/sglang/benchmark/metrics.py: one object per run, appended per invocation.
"""

from __future__ import annotations

from typing import Any, Mapping

from ingest import bench_common as bc
from ingest.bench_text import ServingBenchText
from kb.records import BenchRun
from kb.redact import redact

KIND = "sglang-bench-jsonl"
TOOL = "sglang-bench"


class SglangBenchText(ServingBenchText):
    """The "Serving Benchmark Result" blocks sglang prints (several per capture)."""

    kind = "sglang-bench-text"
    tool = TOOL
    flavour = "s"


# JSON key → BenchRun field; the refactored benchmark/metrics.py dumps the metrics
# dataclass as-is, hence total_input/total_output/total_throughput beside the old names.
_FIELDS = {
    "duration": ("duration_s", bc.num),
    "completed": ("completed", bc.count),
    "failed": ("failed", bc.count),
    "num_prompts": ("num_prompts", bc.count),
    "request_throughput": ("request_throughput", bc.num),
    "input_throughput": ("input_throughput", bc.num),
    "output_throughput": ("output_throughput", bc.num),
    "total_throughput": ("total_throughput", bc.num),
    "max_output_tokens_per_s": ("peak_output_throughput", bc.num),
    "max_concurrent_requests": ("peak_concurrency", bc.num),
    "accept_length": ("accept_length", bc.num),
}
_METRICS = {"ttft_ms": "ttft", "tpot_ms": "tpot", "itl_ms": "itl", "e2e_ms": "e2e_latency"}
_USED = frozenset(_FIELDS) | {"backend", "max_concurrency", "request_rate", "server_info", "concurrency",
                              "model", "model_id", "model_path"}


@bc.guarded(KIND)
def read(doc: Any, path: str, line: int | None) -> list[BenchRun] | None:
    """One `--output-file` JSONL object → [BenchRun], or None if not sglang's."""
    if bc.serving_flavour(doc) != "sglang":
        return None
    fields = {dest: conv(doc.get(key)) for key, (dest, conv) in _FIELDS.items()}
    completed = fields["completed"]
    total_in = doc.get("total_input_tokens", doc.get("total_input"))
    total_out = doc.get("total_output_tokens", doc.get("total_output"))
    server_args, version, spec_len = _server_info(doc.get("server_info"))
    extra = bc.scalars(doc, _USED | {k for k in doc if k.endswith("_ms")})
    if bc.num(doc.get("concurrency")) is not None:
        extra["mean_concurrency"] = bc.num(doc["concurrency"])  # sum(latency)/duration, not the limit
    if extra:
        server_args["bench"] = extra
    if fields["accept_length"] is None:
        fields["accept_length"] = spec_len
    # sglang ≤0.4.0 wrote only output_throughput; its other rates are these same quotients.
    duration = fields["duration_s"]
    if duration:
        if fields["request_throughput"] is None and completed is not None:
            fields["request_throughput"] = completed / duration
        if fields["input_throughput"] is None and bc.num(total_in) is not None:
            fields["input_throughput"] = bc.num(total_in) / duration
    model = doc.get("model") or server_args.get("served_model_name") or server_args.get("model_path")
    run = bc.make_run(
        path, line, tool=TOOL,
        backend=doc["backend"] if isinstance(doc.get("backend"), str) else None,
        model=model if isinstance(model, str) else None,
        concurrency=bc.concurrency(doc.get("max_concurrency")),
        request_rate=bc.rate(doc.get("request_rate")),
        input_len=bc.per_request(total_in, completed),
        output_len=bc.per_request(total_out, completed),
        server_args=server_args, engine_version=version,
        **fields, **{f: bc.flat_stats(doc, m) for f, m in _METRICS.items()},
    )
    return [run]


def _server_info(info: Any) -> tuple[dict, str | None, float | None]:
    """(server args, sglang version, accept length) from /get_server_info's answer.

    A PD-disaggregated router answers {"prefill": [...], "decode": [...]}; the
    decode server is the one whose settings shape throughput, as bench_serving
    itself assumes when it reads the accept length."""
    if not isinstance(info, Mapping):
        return {}, None, None
    if isinstance(info.get("decode"), list) and info["decode"] and isinstance(info["decode"][0], Mapping):
        info = info["decode"][0]
    args = {str(k): redact(str(k), v) for k, v in info.items() if k not in ("internal_states", "version")}
    version = info.get("version")
    spec = bc.num(bc.dig(info, "internal_states.0.avg_spec_accept_length"))
    return args, version if isinstance(version, str) else None, spec


class SglangBenchJsonl:
    kind = KIND
    read = staticmethod(read)


READERS = (SglangBenchJsonl,)
