"""vLLM server logs → one ServerTrace.

Formats read (vllm-project/vllm):
- V1 periodic stats (v1/metrics/loggers.py): `Engine 000: Avg prompt throughput: X tokens/s,
  Avg generation throughput: Y tokens/s, Running: N reqs, Waiting: M reqs[, Preemptions: K], GPU KV
  cache usage: P%, Prefix cache hit rate: Q%` (K counted as preempt events), and `SpecDecoding metrics:
  Mean acceptance length: ...`.
- V0 periodic stats (engine/metrics.py): `Avg prompt throughput: ..., Running: N reqs, Swapped: N reqs,
  Pending: N reqs, GPU KV cache usage: ..%, CPU KV cache usage: ..%.` and its
  `Prefix cache hit rate: GPU: ..%, CPU: ..%` line.
- V0 preemption warnings, `GPU KV cache size: N tokens`, `# GPU blocks: N`,
  `Maximum concurrency for L tokens per request: Cx`, `non-default args: {...}`, `args: Namespace(...)`,
  `vLLM API server version X`, `Initializing a V1 LLM engine (vX) with config: ...`, default MoE /
  W8A8 kernel configs, OOM and errors.
"""

from __future__ import annotations

import re

from ingest.serverlog import (
    ServerLogBase,
    as_int,
    line_time,
    moe_config_data,
    num,
    parse_call_args,
    parse_dict_repr,
    split_fields,
)
from kb.engineversion import VLLM_START_UP
from kb.records import Sample

STATS_START = re.compile(r"(?:Engine (\d+): )?(?=Avg prompt throughput: |Total generation tokens: |Avg generation "
                         r"throughput: )")
PREEMPT = re.compile(
    r"Sequence group (\S+) is preempted by PreemptionMode\.(\w+) mode"
    r".*?total_(?:num_)?cumulative_preemption(?:_cnt)?=(\d+)"
)
# "GPU" on CUDA, else the device type upper-cased ("CPU KV cache size: …"), " + host" with
# hisparse (vllm/v1/core/kv_cache_utils.py, 0.32).
KV_TOKENS = re.compile(r"(?:GPU|CPU|XPU|TPU|NPU|HPU)(?: \+ host)? KV cache size: ([\d,]+) tokens")
MAX_CONC = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")
GPU_BLOCKS = re.compile(r"# (?:GPU|cuda|npu|xpu|hpu|tpu) blocks: (\d+)")
MAX_MODEL_LEN = re.compile(r"Using max model len (\d+)")
BATCHED = re.compile(r"Chunked prefill is enabled with max_num_batched_tokens=(\d+)")
KV_MEM = re.compile(r"Available KV cache memory: ([\d.]+) GiB")
WEIGHTS = re.compile(r"(?:Model loading took|Loading model weights took) ([\d.]+) (?:GiB|GB)")
GRAPH_DONE = re.compile(r"Graph capturing finished in ([\d.]+) secs?(?:, took ([\d.]+) GiB)?")
CAPTURE_SIZES = re.compile(r'"(?:cudagraph_)?capture_sizes":\s*\[([\d,\s]+)\]')
ACCEPT = re.compile(r"Mean acceptance length: ([\d.]+)")
# The attention backend the engine chose: "Using FLASH_ATTN attention backend out of potential
# backends: [...]" (auto, vLLM >= 0.11), "Using AttentionBackendEnum.FLASHINFER backend." (set by
# the user), and the older prose names ("Using XFormers backend.", "Using Flash Attention backend on
# V1 engine."). Not "Using FLASH_ATTN MLA prefill backend." nor MoE/linear kernel lines.
ATTN_BACKEND = re.compile(r"Using (?:([A-Z][A-Z0-9_]+) attention backend out of potential backends"
                          r"|AttentionBackendEnum\.([A-Z][A-Z0-9_]+) backend\b"
                          r"|(Flash Attention|FlashAttention|FlashInfer|XFormers|FlashMLA|Triton MLA|CUTLASS MLA)"
                          r" backend(?:\.| on V1 engine))")
OLD_BACKEND_NAMES = {"Flash Attention": "FLASH_ATTN", "FlashAttention": "FLASH_ATTN", "FlashInfer": "FLASHINFER",
                     "XFormers": "XFORMERS", "FlashMLA": "FLASHMLA", "Triton MLA": "TRITON_MLA",
                     "CUTLASS MLA": "CUTLASS_MLA"}
# vLLM's own logger format from one of its engine modules; sglang logs can hold vLLM lines
# too (it imports vLLM pieces), but not from these files
ENGINE_LINE = re.compile(
    r"\b(?:INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? "
    r"\[?(?:engine|core|llm_engine|async_llm_engine"
    r"|api_server|launcher|gpu_worker|gpu_model_runner|multiproc_executor|kv_cache_utils|loggers|metrics)\.py:\d+\]"
)
ENGINE_KEYS = (
    "model", "served_model_name", "dtype", "max_seq_len", "tensor_parallel_size", "pipeline_parallel_size",
    "data_parallel_size", "quantization", "enforce_eager", "kv_cache_dtype", "enable_prefix_caching",
    "chunked_prefill_enabled", "speculative_config", "load_format",
)
# stats fields that have a Sample slot; the rest feed stats["extra_max"]
_KNOWN = {"Avg prompt throughput", "Avg generation throughput", "Running", "Waiting", "Pending",
          "GPU KV cache usage", "Prefix cache hit rate"}


class VllmLog(ServerLogBase):
    kind = "vllm-log"
    engine = "vllm"

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.last: Sample | None = None
        self.engines: set[str] = set()
        self.args_from_namespace = False

    def handle(self, lineno: int, line: str) -> None:
        if "throughput: " in line or "Total generation tokens" in line:
            m = STATS_START.search(line)
            if m:
                self._stats(lineno, line, m)
                return
        if "Prefix cache hit rate: GPU:" in line:
            f = split_fields(line.split("Prefix cache hit rate: ", 1)[1])
            if self.last is not None and "GPU" in f:
                self.last.prefix_hit_rate = _pct(f.get("GPU"))
            self.stats.extra("CPU prefix cache hit rate", _pct(f.get("CPU")))
            return
        if "acceptance length" in line:
            m = ACCEPT.search(line)
            if m:
                self._accept(float(m.group(1)))
                return
        if "is preempted by PreemptionMode" in line:
            m = PREEMPT.search(line)
            data = {"seq_group": m.group(1), "mode": m.group(2), "cumulative": int(m.group(3))} if m else {}
            self.recognised = True
            self.events.add("preempt", lineno, line, data)
            return
        if "args: " in line and self._args(line):
            return
        if ("version" in line or "LLM engine" in line) and self._version(line):
            return
        if "Config file not found" in line:
            self._kernel_config(lineno, line)
            return
        if self._startup(line):
            return
        if self.error_event(lineno, line) and ENGINE_LINE.search(line):
            self.recognised = True

    def _stats(self, lineno: int, line: str, m: re.Match) -> None:
        f = split_fields(line[m.end():].rstrip("."))
        time, _ = line_time(line)
        usage = f.get("GPU KV cache usage", f.get("KV cache usage", f.get("CPU KV cache usage")))
        s = Sample(
            line=lineno, time=time, kind="stats",
            running=as_int(f.get("Running")), queued=as_int(f.get("Waiting", f.get("Pending"))),
            token_usage=_pct(usage), gen_throughput=num(f.get("Avg generation throughput")),
            prompt_throughput=num(f.get("Avg prompt throughput")), prefix_hit_rate=_pct(f.get("Prefix cache hit rate")),
        )
        if s.running is None and s.gen_throughput is None:
            return
        if m.group(1) is not None and len(self.engines) < 256:
            self.engines.add(m.group(1))
        # V1 prints `Preemptions: N` (requests preempted since the previous stats line; the
        # counter resets each interval, v1/metrics/loggers.py) only when N > 0 and prints no
        # per-request preemption warning: these are the log's preempt events
        preempted = as_int(f.get("Preemptions"))
        if preempted:
            self.events.add("preempt", lineno, line, {"interval": preempted}, count=preempted)
        for key, value in f.items():
            if key not in _KNOWN:
                v = num(value)
                self.stats.extra(key, v / 100 if v is not None and value.strip().endswith("%") else v)
        self.last = s
        self.add_sample(s, f"Engine {m.group(1)}" if m.group(1) is not None else None)

    def _accept(self, value: float) -> None:
        """SpecDecoding metrics follow the stats line they belong to."""
        self.recognised = True
        self.stats.accept(value)
        if self.last is not None and self.last.accept_len is None:
            self.last.accept_len = value

    def _args(self, line: str) -> bool:
        if "non-default args: " in line:
            text = line.split("non-default args: ", 1)[1]
            if text and text == self.args_text:
                return True  # the same dump again (a restart appended to the same file)
            args = parse_dict_repr(text)
            if args:
                self.args_text = text
                self.recognised = True
                self.server_args = args
                self.args_from_namespace = False
                return True
        if "args: Namespace(" in line and (not self.server_args or self.args_from_namespace):
            args = parse_call_args(line.split("args: ", 1)[1].strip())
            if args:
                self.recognised = True
                self.server_args = args  # every argument, defaults included (vLLM < 0.9)
                self.args_from_namespace = True
                return True
        return False

    def _version(self, line: str) -> bool:
        m = VLLM_START_UP.search(line)
        if not m:
            return False
        self.recognised = True
        self.version = self.version or m.group(1) or m.group(2)
        if "with config: " in line:
            cfg = parse_call_args(line.split("with config: ", 1)[1])
            engine = {k: cfg[k] for k in ENGINE_KEYS if k in cfg}
            if engine:
                self.startup["engine_config"] = engine
                if isinstance(engine.get("max_seq_len"), int):
                    self.startup.setdefault("max_model_len", engine["max_seq_len"])
            sizes = CAPTURE_SIZES.search(line)
            if sizes:
                bs = sorted({int(x) for x in sizes.group(1).replace(" ", "").split(",") if x})
                if bs:
                    self.startup["cuda_graph_bs"] = bs
                    self.startup["cuda_graph_max_bs"] = bs[-1]
        return True

    def _kernel_config(self, lineno: int, line: str) -> None:
        data = moe_config_data(line)
        if "Using default MoE config" in line:
            kind = "moe-default-config"
        elif "W8A8 Block FP8 kernel config" in line:
            kind = "w8a8-default-config"
        else:
            self.error_event(lineno, line)
            return
        # sglang once printed the same words; only a vLLM path or logger makes the line vLLM's
        if "/vllm/" in line or "[fused_moe.py:" in line or "[fp8_utils.py:" in line:
            self.recognised = True
        self.events.add(kind, lineno, line, data)

    def _startup(self, line: str) -> bool:
        found = False
        for marker, rx, key, conv in _STARTUP_FIELDS:
            if marker in line:
                m = rx.search(line)
                if m:
                    self.startup[key] = conv(m.group(1))
                    found = True
        if "backend" in line and "attention_backend" not in self.startup:
            m = ATTN_BACKEND.search(line)
            if m:
                self.startup["attention_backend"] = m.group(1) or m.group(2) or OLD_BACKEND_NAMES[m.group(3)]
                found = True
        if "Maximum concurrency" in line:
            m = MAX_CONC.search(line)
            if m:
                self.startup["max_concurrency"] = float(m.group(2))
                self.startup.setdefault("max_model_len", as_int(m.group(1)))
                found = True
        m = GRAPH_DONE.search(line) if "Graph capturing finished" in line else None
        if m:
            self.startup["cuda_graph_capture_s"] = float(m.group(1))
            if m.group(2):
                self.startup["cuda_graph_mem_gib"] = float(m.group(2))
            found = True
        if found:
            self.recognised = True
        return found

    def results(self):
        if self.engines:
            self.extra_stats["engines"] = len(self.engines)
        for key in ("max_num_seqs", "max_num_batched_tokens", "gpu_memory_utilization", "max_model_len"):
            if key in self.server_args and key not in self.startup:
                self.startup[key] = self.server_args[key]
        return super().results()


def _pct(value: str | None) -> float | None:
    v = num(value)
    return round(v / 100, 6) if v is not None else None


# (cheap substring test, pattern, startup key, conversion)
_STARTUP_FIELDS = (
    ("KV cache size: ", KV_TOKENS, "kv_cache_tokens", as_int),
    (" blocks: ", GPU_BLOCKS, "num_gpu_blocks", int),
    ("Using max model len", MAX_MODEL_LEN, "max_model_len", int),
    ("max_num_batched_tokens=", BATCHED, "max_num_batched_tokens", int),
    ("Available KV cache memory", KV_MEM, "kv_cache_memory_gib", float),
    (" took ", WEIGHTS, "weights_mem_gib", float),
)
