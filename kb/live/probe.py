"""`kb probe URL`: which engine answers there, and what it says about itself.

Endpoints read (all GET, each answer capped):
- `/v1/models` (both engines): the served model id and `max_model_len`; a server
  that does not answer it as JSON is not an OpenAI-compatible LLM server;
- sglang: `/server_info` (0.5.x; `/get_server_info` before) with every resolved
  server argument, `/model_info` (`/get_model_info` before);
- vLLM: `/version`;
- `/metrics` (vLLM always; sglang with `--enable-metrics`): the load gauges, and
  for vLLM the `vllm:cache_config_info` labels (memory fraction, prefix caching,
  KV cache size in tokens).

vLLM publishes no endpoint with `--max-num-seqs`; `kb doctor` reads it from the
server log (`--log`) or the launch command (`--launch`), or sees the cap in the
running-request gauge under load.
"""

from __future__ import annotations

from typing import Any

import httpx
from pydantic import BaseModel, Field

from ingest.metrics_text import Scrape, vllm_cache_config
from kb.errors import ServerError
from kb.live import client as cl
from kb.redact import redact, redact_data

# Server arguments shown by `kb probe` (all of them go to --json and to the sweep's server_info).
TUNING_KEYS = {
    "vllm": ("max_model_len", "max_num_seqs", "max_num_batched_tokens", "gpu_memory_utilization",
             "enable_prefix_caching", "enable_chunked_prefill", "kv_cache_dtype", "block_size",
             "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "quantization",
             "enforce_eager", "speculative_config", "kv_cache_memory_bytes"),
    "sglang": ("context_length", "max_running_requests", "max_total_tokens", "max_total_num_tokens",
               "max_prefill_tokens", "chunked_prefill_size", "mem_fraction_static", "tp_size", "tensor_parallel_size",
               "dp_size", "data_parallel_size",
               "ep_size", "pp_size", "enable_dp_attention", "cuda_graph_max_bs", "cuda_graph_max_bs_decode",
               "disable_cuda_graph", "schedule_policy", "schedule_conservativeness", "attention_backend",
               "moe_runner_backend", "moe_a2a_backend", "kv_cache_dtype", "quantization", "page_size",
               "disable_radix_cache", "enable_torch_compile", "speculative_algorithm", "speculative_num_steps",
               "speculative_eagle_topk", "speculative_num_draft_tokens"),
}
_DROP = {"internal_states", "launch_command", "kv_events", "version", "startup_time", "frontend"}


class ProbeResult(BaseModel):
    url: str
    engine: str | None = None  # vllm, sglang, or None for another OpenAI-compatible server
    version: str | None = None
    model: str | None = None  # the id requests must name
    model_path: str | None = None
    max_model_len: int | None = None
    server_args: dict = Field(default_factory=dict)  # every argument the server publishes (secrets redacted)
    tuning_args: dict = Field(default_factory=dict)  # the ones that matter for tuning
    startup: dict = Field(default_factory=dict)  # KV cache size and the like
    metrics: dict = Field(default_factory=dict)  # {"available", "names", "values"}
    endpoints: dict[str, int] = Field(default_factory=dict)  # path → HTTP status
    warnings: list[str] = Field(default_factory=list)

    def server_info(self) -> dict:
        """What a sweep records as `server_info` (sglang's bench_serving key)."""
        info: dict[str, Any] = dict(self.server_args)
        if self.model_path and "model_path" not in info:
            info["model_path"] = self.model_path
        if self.model and self.model != self.model_path:
            info.setdefault("served_model_name", self.model)
        if self.max_model_len and "max_model_len" not in info and "context_length" not in info:
            info["max_model_len"] = self.max_model_len
        if self.engine:
            info["engine"] = self.engine
        if self.version:
            info["version"] = self.version
        return info


def _redacted(args: dict) -> dict:
    out = {}
    for k, v in args.items():
        if k in _DROP:
            continue
        if isinstance(v, (dict, list)) and len(str(v)) > 2000:
            continue  # large nested state, not an argument
        # by name, and inside: nested credential keys, passwords in URLs, echoed headers
        out[str(k)] = redact(str(k), redact_data(v))
    return out


def _json(ans: cl.Answer):
    return ans.json() if ans.status == 200 else None


def probe(url: str, api_key: str | None = None, timeouts: cl.Timeouts | None = None,
          http: httpx.Client | None = None) -> ProbeResult:
    """Probe the server at `url`. ServerError when it cannot be reached or is not an LLM server."""
    t = timeouts or cl.Timeouts()
    base = cl.base_url(url)
    own = http is None
    c = http or cl.sync_client(api_key, t)
    try:
        return _probe(c, base, t)
    finally:
        if own:
            c.close()


def _probe(c: httpx.Client, base: httpx.URL, t: cl.Timeouts) -> ProbeResult:
    res = ProbeResult(url=cl.shown(base))
    where = cl.shown(base)

    models = cl.get(c, base, "/v1/models", timeouts=t)
    res.endpoints["/v1/models"] = models.status
    if models.status in (401, 403):
        raise ServerError(f"{where}: GET /v1/models answered {models.status}: the server wants an API key "
                          f"(--api-key or KB_API_KEY){' that it accepts' if c.headers.get('authorization') else ''}")
    doc = _json(models)
    data = doc.get("data") if isinstance(doc, dict) else None
    if models.status != 200 or not isinstance(data, list):
        what = f"HTTP {models.status}" if models.status != 200 else "not an OpenAI model list"
        kind = (models.content_type.split(";")[0] or "no content type")
        raise ServerError(f"{where} answers HTTP but is not an OpenAI-compatible LLM server "
                          f"(GET /v1/models: {what}, {kind})")
    if not data or not isinstance(data[0], dict):
        raise ServerError(f"{where}: GET /v1/models lists no model")
    first = data[0]
    res.model = str(first.get("id")) if first.get("id") is not None else None
    root = first.get("root")
    res.model_path = str(root) if isinstance(root, str) and root else res.model
    mml = first.get("max_model_len")
    res.max_model_len = int(mml) if isinstance(mml, (int, float)) and not isinstance(mml, bool) and mml > 0 else None
    owner = str(first.get("owned_by") or "").lower()

    # sglang: the full resolved server arguments
    info = None
    for path in ("/server_info", "/get_server_info"):
        ans = cl.get(c, base, path, timeouts=t)
        res.endpoints[path] = ans.status
        info = _json(ans)
        if isinstance(info, dict) and info:
            break
        info = None
    if info is not None:
        if isinstance(info.get("decode"), list) and info["decode"] and isinstance(info["decode"][0], dict):
            info = info["decode"][0]  # a PD router: the decode server's settings shape throughput
        res.engine = "sglang"
        v = info.get("version")
        res.version = v if isinstance(v, str) else None
        res.server_args = _redacted(info)
        for path in ("/model_info", "/get_model_info"):
            ans = cl.get(c, base, path, timeouts=t)
            res.endpoints[path] = ans.status
            mi = _json(ans)
            if isinstance(mi, dict):
                if isinstance(mi.get("model_path"), str):
                    res.model_path = mi["model_path"]
                break
        if res.max_model_len is None:
            cl_ = res.server_args.get("context_length")
            res.max_model_len = int(cl_) if isinstance(cl_, int) else None
        for key in ("max_total_num_tokens",):
            if isinstance(info.get(key), int):
                res.startup[key] = info[key]

    if res.engine != "sglang":
        ans = cl.get(c, base, "/version", timeouts=t)
        res.endpoints["/version"] = ans.status
        vdoc = _json(ans)
        if isinstance(vdoc, dict) and isinstance(vdoc.get("version"), str):
            res.version = vdoc["version"]

    scrape = None
    ans = cl.get(c, base, "/metrics", cap=cl.METRICS_CAP, timeouts=t)
    res.endpoints["/metrics"] = ans.status
    if ans.status == 200:
        try:
            scrape = Scrape.parse(ans.text(), f"{where}/metrics")
        except ServerError as e:
            res.warnings.append(str(e))
    m_engine = scrape.engine() if scrape else None
    if res.engine is None:
        res.engine = m_engine or ("vllm" if owner == "vllm" else "sglang" if owner == "sglang" else None)
    if res.engine is None:
        res.warnings.append("engine not recognised (neither vLLM nor sglang endpoints): treated as a generic "
                            "OpenAI-compatible server")
    if scrape and m_engine == res.engine and res.engine:
        res.metrics = {"available": True, "names": scrape.names(res.engine), "values": scrape.figures(res.engine)}
        if res.engine == "vllm":
            args, startup = vllm_cache_config(scrape)
            res.server_args = {**args, **res.server_args}
            res.startup.update(startup)
    else:
        res.metrics = {"available": False, "names": {}, "values": {}}
        if res.engine == "sglang":
            res.warnings.append("no sglang /metrics (start the server with --enable-metrics to see the running "
                                "batch and queue during a sweep)")
        elif res.engine == "vllm":
            res.warnings.append("no vllm: metrics at /metrics")
    if res.engine == "vllm":
        if res.max_model_len:
            res.server_args.setdefault("max_model_len", res.max_model_len)
        if res.model_path:
            res.server_args.setdefault("model", res.model_path)
    keys = TUNING_KEYS.get(res.engine or "", ())
    res.tuning_args = {k: res.server_args[k] for k in keys if res.server_args.get(k) is not None}
    return res


def report(p: ProbeResult) -> str:
    out = [f"kb probe — {p.url}", ""]
    out.append(f"  engine          {p.engine or 'unknown'}" + (f" {p.version}" if p.version else ""))
    out.append(f"  model           {p.model or '-'}"
               + (f" ({p.model_path})" if p.model_path and p.model_path != p.model else ""))
    out.append(f"  context length  {p.max_model_len:,} tokens" if p.max_model_len else "  context length  -")
    if p.startup.get("kv_cache_tokens"):
        blocks = p.startup.get("num_gpu_blocks")
        bs = p.startup.get("block_size")
        out.append(f"  KV cache        {int(p.startup['kv_cache_tokens']):,} tokens"
                   + (f" ({blocks:,} blocks of {bs})" if blocks and bs else ""))
    if p.startup.get("enable_prefix_caching") is not None:
        out.append(f"  prefix caching  {'on' if p.startup['enable_prefix_caching'] else 'off'}")
    if p.startup.get("max_total_num_tokens"):
        out.append(f"  KV cache        {int(p.startup['max_total_num_tokens']):,} tokens (max_total_num_tokens)")
    if p.metrics.get("available"):
        v = p.metrics.get("values") or {}
        now = ", ".join(f"{k} {_fmt(v[k])}" for k in ("running", "waiting", "kv_cache_usage") if v.get(k) is not None)
        out.append(f"  /metrics        {len(p.metrics.get('names') or {})} load figures"
                   + (f"; now: {now}" if now else ""))
    else:
        out.append("  /metrics        not available")
    out += ["", "Server arguments that matter for tuning"]
    if not p.tuning_args:
        out.append("  none published")
    width = max((len(k) for k in p.tuning_args), default=0)
    for k, v in p.tuning_args.items():
        out.append(f"  {k:<{width}}  {v}")
    if p.engine == "vllm" and "max_num_seqs" not in p.tuning_args:
        out.append("  (vLLM does not publish --max-num-seqs; give `kb doctor` the server log or launch command)")
    for w in p.warnings:
        out.append(f"warning: {w}")
    return "\n".join(out)


def _fmt(v) -> str:
    if isinstance(v, float) and not v.is_integer():
        return f"{v:.2f}"
    return f"{int(v):,}" if isinstance(v, (int, float)) else str(v)
