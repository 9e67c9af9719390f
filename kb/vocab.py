"""Words of the trade, in one place: how engineers name engines, models,
quantizations and fix classes. Used to read free-form notes and to understand
questions; rules and ranking use the fix-class slugs.
"""

from __future__ import annotations

import re

ENGINES = {
    "sglang": r"\bsg-?lang\b",
    "vllm": r"\bvllm\b",
    "trtllm": r"\b(?:trt-?llm|tensorrt-llm)\b",
}

# (regex, canonical model name, family). First match wins.
MODELS: list[tuple[str, str, str]] = [
    (r"\bglm-?5\b", "GLM-5", "glm"),
    (r"\bglm-?4\.6\b", "GLM-4.6", "glm"),
    (r"\bglm-?4\.5-?air\b", "GLM-4.5-Air", "glm"),
    (r"\bglm-?4\.5\b", "GLM-4.5", "glm"),
    (r"\bkimi[- ]?k2(?:\.5)?\b", "Kimi-K2", "kimi"),
    (r"\bdeepseek[- ]?v3\.2\b", "DeepSeek-V3.2", "deepseek"),
    (r"\bdeepseek[- ]?v3(?:\.1)?\b", "DeepSeek-V3", "deepseek"),
    (r"\bdeepseek[- ]?r1\b", "DeepSeek-R1", "deepseek"),
    (r"\bqwen3[- ]?235b", "Qwen3-235B-A22B", "qwen3-moe"),
    (r"\bqwen3[- ]?30b", "Qwen3-30B-A3B", "qwen3-moe"),
    (r"\bqwen3[- ]?coder", "Qwen3-Coder", "qwen3-moe"),
    (r"\bqwen3?-?next", "Qwen3-Next", "qwen3-moe"),
    (r"\bqwen3\b", "Qwen3", "qwen3"),
    (r"\bqwen2\.5", "Qwen2.5", "qwen2"),
    (r"\bgpt-?oss-?120b\b", "gpt-oss-120b", "gpt-oss"),
    (r"\bgpt-?oss-?20b\b", "gpt-oss-20b", "gpt-oss"),
    (r"\bgpt-?oss\b", "gpt-oss", "gpt-oss"),
    (r"\bllama[- ]?3(?:\.\d)?[- ]?405b", "Llama-3.1-405B", "llama"),
    (r"\bllama[- ]?3(?:\.\d)?[- ]?70b", "Llama-3.1-70B", "llama"),
    (r"\bllama[- ]?3(?:\.\d)?[- ]?8b", "Llama-3.1-8B", "llama"),
    (r"\bllama[- ]?4", "Llama-4", "llama"),
    (r"\bllama\b", "Llama", "llama"),
    (r"\bmixtral", "Mixtral", "mixtral"),
    (r"\bminimax[- ]?m2", "MiniMax-M2", "minimax"),
]

QUANTIZATIONS: list[tuple[str, str]] = [
    (r"\bnvfp4\b|\bmodelopt_fp4\b", "nvfp4"),
    (r"\bmxfp4\b", "mxfp4"),
    (r"\bw4a8\b", "w4a8"),
    (r"\bfp8\b|\bw8a8\b", "fp8"),
    (r"\bawq\b", "awq"),
    (r"\bgptq\b", "gptq"),
    (r"\bint4\b", "int4"),
    (r"\bint8\b", "int8"),
    (r"\bbf16\b|\bbfloat16\b", "bf16"),
    (r"\bfp16\b|\bfloat16\b", "fp16"),
]

# GPU mentions in prose; names are resolved through kb.hardware's table.
GPU_MENTION = re.compile(
    r"(?:(?<!\d)(?P<count>\d{1,5})\s*[x×]\s*)?(?<![A-Za-z0-9])(?P<name>(?:NVIDIA\s+)?(?:RTX\s*PRO\s*6000(?:\s+Blackwell)?|RTX\s*6000\s*Ada|RTX\s*A6000|"
    r"RTX\s*[345]0[789]0|GB[23]00|GB10|[BH]\s?[12]00|H[28]00|GH200|H100(?:\s+(?:SXM|PCIe|NVL))?|H20|"
    r"A100(?:[ -]?(?:40|80)GB)?|A800|A10G?|A40|L40S?|L4|V100|T4|MI3[02]5X|MI300X|MI355X|MI250X?))\b",
    re.I,
)
GPU_COUNT = re.compile(r"\b(\d{1,5})\s*(?:x\s*)?(?:gpus?|cards)\b", re.I)
INTERCONNECTS = {"PCIe": r"\bpcie\b", "NVLink": r"\bnvlink|nvswitch|\bnv18\b"}

# Fix class → words that name it in notes and questions. One table for ingest
# (classifying free-form notes) and for search (question understanding).
FIX_CLASS_WORDS: dict[str, list[str]] = {
    "max-running-requests": ["max-running-requests", "max running requests", "max-num-seqs", "max_num_seqs",
                             "running-req", "running requests cap"],
    "cuda-graph-max-bs": ["cuda-graph-max-bs", "cuda graph max bs", "cuda graph batch", "cuda-graph-bs",
                          "cudagraph capture", "cuda-graph-sizes", "capture sizes"],
    "kv-cache-capacity": ["kv cache pool is full", "kv cache capacity", "retract", "preempt", "max_total_num_tokens",
                          "kv cache usage"],
    "mem-fraction": ["mem-fraction-static", "mem_fraction_static", "gpu-memory-utilization", "gpu_memory_utilization",
                     "memory fraction"],
    "kv-cache-dtype": ["kv-cache-dtype", "fp8 kv", "fp8_e4m3", "fp4 kv", "kv cache dtype"],
    "chunked-prefill": ["chunked-prefill", "chunked prefill", "max-num-batched-tokens", "max_num_batched_tokens"],
    "scheduler-policy": ["schedule-conservativeness", "schedule-policy", "scheduler", "new_token_ratio"],
    "moe-kernel-config": ["tuning_fused_moe_triton", "benchmark_moe", "moe kernel config", "default moe", "fused moe",
                          "moe tuning", "tuned config"],
    "moe-runner-backend": ["moe-runner-backend", "flashinfer_cutlass", "flashinfer_trtllm", "cutlass moe",
                           "moe backend", "flashinfer moe"],
    "dp-attention": ["enable-dp-attention", "dp attention", "dp-attention", "data parallel attention"],
    "expert-parallelism": ["ep-size", "expert parallel", "enable-expert-parallel", "deepep", "eplb",
                           "expert parallelism"],
    "tensor-parallelism": ["tensor parallel", "tp-size", "tensor-parallel-size"],
    "pipeline-parallelism": ["pipeline parallel", "pp-size", "pipeline-parallel-size", "tp4+pp2", "tp4 pp2"],
    "pcie-topology": ["pcie", "numa", "p2p", "topo -m", "no nvlink"],
    "custom-all-reduce": ["custom all-reduce", "custom allreduce", "disable-custom-all-reduce", "all-reduce",
                          "allreduce"],
    "nccl-tuning": ["nccl_", "nccl "],
    "speculative-decoding": ["speculative", "eagle", "mtp", "nextn", "draft model", "ngram", "accept length"],
    "eager-mode": ["enforce-eager", "eager mode", "disable-cuda-graph"],
    "torch-compile": ["torch.compile", "torch compile", "enable-torch-compile"],
    "overlap-schedule": ["overlap schedule", "disable-overlap-schedule", "overlap scheduler", "async scheduling"],
    "attention-backend": ["attention-backend", "flashinfer", "fa3", "flashmla", "triton mla", "cutlass_mla",
                          "trtllm_mla"],
    "prefix-caching": ["prefix cach", "radix cache", "disable-radix-cache", "cache hit rate"],
    "kv-offload": ["lmcache", "kv offload", "cpu offload", "hicache", "offload"],
    "data-parallel-replicas": ["replicas", "data parallel", "dp-size", "data-parallel-size", "router"],
    "quantization": ["quantization", "nvfp4", "fp8 weights", "awq", "gptq", "mxfp4"],
    "driver-environment": ["driver", "cuinit", "hmm", "nvidia_uvm", "fabric manager", "persistence mode", "cuda error"],
    "virtualization": ["vfio", "kvm", "lxc", "iommu", "virtual machine", "passthrough", "proxmox"],
    "multi-node": ["multi-node", "multinode", "nnodes", "ray", "infiniband", "nccl_socket_ifname"],
    "long-prefill": ["long prompt", "long-prefill", "long prefill", "max-num-partial-prefills", "head-of-line"],
    "disaggregation": ["disaggregat", "prefill-decode", "pd disagg"],
    "benchmark-method": ["warmup", "warm-up", "benchmark method", "request-rate inf", "cold start"],
    "structured-output": ["structured output", "guided decoding", "guided_json", "xgrammar", "outlines backend",
                          "llguidance", "grammar-backend", "json schema", "response_format"],
    "lora": ["lora", "adapter", "max-loras", "max-lora-rank", "punica"],
    "multimodal-encoder": ["vision encoder", "mm-encoder-tp-mode", "image preprocess", "multimodal", "mm_processor",
                           "limit-mm-per-prompt"],
    "hybrid-state-cache": ["mamba", "linear attention", "hybrid model", "mamba_ssm_cache", "state cache",
                           "gated deltanet", "max-mamba-cache-size"],
    "quantization-kernel": ["awq_marlin", "gptq_marlin", "marlin", "machete", "quantization kernel", "w4a16",
                            "cutlass fp8", "exllama"],
    "cpu-offload": ["cpu-offload-gb", "cpu offload", "offload weights", "cpu_offload"],
    "api-server": ["api server", "api-server-count", "uvicorn", "http server", "detokeniz"],
    "tokenizer": ["tokenizer", "tokenization", "skip-tokenizer-init", "tokenizer-worker", "tokenizer pool"],
    "prefix-cache-retention": ["eviction", "prefix cache retention", "cache eviction", "radix eviction", "hicache",
                               "prefix hit rate drops"],
    "unified-memory": ["unified memory", "gb10", "dgx spark", "jetson", "coherent memory"],
    "engine-version": ["upgrade", "downgrade", "fixed in", "newer version"],
    "context-length": ["max-model-len", "context-length", "max_model_len", "context window", "yarn", "rope scaling"],
    "request-routing": ["load balancer", "cache-aware routing", "sglang-router", "routing policy"],
    "sampling": ["logprobs", "sampling", "top-k", "top_p", "penalty", "sampler"],
    "model-loading": ["load time", "startup time", "safetensors", "load-format", "model loading", "fastsafetensors",
                      "runai_streamer"],
    "rocm-aiter": ["aiter", "rocm", "vllm_rocm_use_aiter", "sglang_use_aiter", "mi300x", "mi355x", "hipblaslt"],
    "unclassified": [],
}

FIX_CLASSES = tuple(FIX_CLASS_WORDS)


def fix_classes_in(text: str) -> list[str]:
    """Fix classes whose words appear in the text, most mentioned first."""
    low = text.lower()
    counts = {fc: sum(low.count(w) for w in words) for fc, words in FIX_CLASS_WORDS.items()}
    return [fc for fc, n in sorted(counts.items(), key=lambda kv: -kv[1]) if n]


def engines_in(text: str) -> list[str]:
    return [name for name, rx in ENGINES.items() if re.search(rx, text, re.I)]


def model_in(text: str) -> tuple[str, str] | None:
    for rx, name, family in MODELS:
        if re.search(rx, text, re.I):
            return name, family
    return None


def quantization_in(text: str) -> str | None:
    for rx, q in QUANTIZATIONS:
        if re.search(rx, text, re.I):
            return q
    return None


# a parameter count in a model's name: "Mistral-7B", "CodeLlama-13b-hf", "Qwen3-235B-A22B" (the
# first count is the total); not "8x7B" (a count per expert), not "A22B" (the active part)
PARAMS_IN_NAME = re.compile(r"(?<![\dxX.A-Za-z])(\d{1,4}(?:\.\d)?)[bB](?![A-Za-z0-9])")


def params_in_name(name: str) -> float | None:
    """Billions of parameters a model's name states, if it states them."""
    m = PARAMS_IN_NAME.search(name.rstrip("/").rsplit("/", 1)[-1] if name else "")
    return float(m.group(1)) if m else None
