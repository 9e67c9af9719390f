"""Memory arithmetic for a serving layout: weight bytes per GPU, KV bytes per token, how
many tokens of KV a model replica holds, and the smallest TP/PP group that leaves room
for a useful batch. `kb launch` chooses its layout with it and rule KB112
(data-parallel-replicas) uses the same code to judge a running layout.

The arithmetic is deliberately conservative (weights rounded up, KV replicated where
the engine replicates it), so a layout never asks for more memory than the GPUs have.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from pydantic import BaseModel

from kb import quantsize
from kb.errors import KbError
from kb.records import Hardware, ModelProfile

GIB = 2**30
# bytes per parameter by weight format; 4-bit formats carry block scales (NVFP4: one
# FP8 scale per 16 values ≈ 4.5 bits; MXFP4: one E8M0 per 32 ≈ 4.25 bits)
WEIGHT_BYTES = {"nvfp4": 0.5625, "mxfp4": 0.53125, "awq": 0.53125, "gptq": 0.53125, "int4": 0.53125,
                "w4a8": 0.53125, "fp8": 1.03, "int8": 1.03, "bf16": 2.0, "fp16": 2.0, None: 2.0}
# 4-bit MoE checkpoints quantize the experts; attention, embeddings and shared parts stay 16-bit
EXPERT_ONLY = {"nvfp4", "mxfp4", "w4a8"}
CUDA_CONTEXT_GIB = 1.0  # CUDA context + NCCL buffers per GPU, outside any fraction
GOAL_RUNNING = {"throughput": 256, "latency": 32}
# With no load given, kb sizes for what the KV holds, up to this many running requests:
# the largest batch it captures CUDA graphs for by default (graphs cost memory per size).
DEFAULT_MAX_RUNNING = {"throughput": 512, "latency": 32}
# With no workload given kb assumes 1,024 input and 1,024 output tokens per request.
DEFAULT_WORKLOAD = (1024, 1024)


class Workload(BaseModel):
    """The load the server is sized for: mean input and output tokens per request and
    the concurrency to hold (None: as many as the KV cache holds)."""

    input_len: int
    output_len: int
    concurrency: int | None = None
    source: str = "assumed"

    @property
    def tokens(self) -> int:
        return self.input_len + self.output_len


class Memory(BaseModel):
    gpu: str
    gpu_memory_gib: float
    gpus: int
    tp: int
    pp: int
    dp: int
    dp_attention: bool
    weight_format: str
    weights_total_gib: float
    weights_per_gpu_gib: float
    fraction: float
    usable_per_gpu_gib: float  # memory × fraction − CUDA context (− activation reserve for vLLM)
    kv_per_gpu_gib: float
    kv_dtype: str
    kv_bytes_per_token_per_gpu: int
    kv_tokens: int  # tokens of KV cache one model replica holds
    context: int
    full_context_requests: int  # requests at the full context that fit at once
    workload_requests: int = 0  # requests of the workload's full length (input + output) the KV holds
    max_running: int


def expert_params_b(m: ModelProfile) -> float:
    """Routed-expert parameters (billions): MoE layers × experts × 3 matrices (gate, up, down)."""
    if not (m.is_moe and m.experts and m.expert_intermediate_size and m.hidden_size and m.layers):
        return 0.0
    moe_layers = m.layers - (m.dense_layers or 0)
    return moe_layers * m.experts * 3 * m.hidden_size * m.expert_intermediate_size / 1e9


def weight_bytes(m: ModelProfile) -> float:
    if not m.params_b:
        raise KbError("the model's parameter count is unknown: config.json lacks the shapes kb needs")
    if m.quantization == "compressed-tensors" and m.quant_details.get("groups") and m.param_groups_b:
        return quantsize.compressed_tensors_bytes(m.param_groups_b, m.quant_details["groups"],
                                                  m.quant_details.get("ignore") or [])
    q = m.quantization if m.quantization in WEIGHT_BYTES else None
    if q == "compressed-tensors":
        q = None
    experts = expert_params_b(m) if q in EXPERT_ONLY else 0.0
    if q in EXPERT_ONLY and not m.is_moe:  # dense 4-bit: every linear layer is 4-bit
        embed = 2 * (m.vocab_size or 0) * (m.hidden_size or 0) / 1e9
        return ((m.params_b - embed) * WEIGHT_BYTES[q] + embed * 2.0) * 1e9
    rest = m.params_b - experts
    return (experts * WEIGHT_BYTES[q] + rest * (2.0 if q in EXPERT_ONLY else WEIGHT_BYTES[q])) * 1e9


def expert_weight_bytes(m: ModelProfile) -> float:
    """Bytes of the routed experts alone, in the checkpoint's format."""
    if m.quantization == "compressed-tensors" and m.quant_details.get("groups") and m.param_groups_b:
        g = quantsize.scheme_for("experts", m.quant_details["groups"], m.quant_details.get("ignore") or [])
        return m.param_groups_b.get("experts", 0.0) * 1e9 * (quantsize.bytes_per_param(g) if g else 2.0)
    return expert_params_b(m) * 1e9 * WEIGHT_BYTES.get(m.quantization, 2.0)


def kv_bytes_per_token(m: ModelProfile, tp: int, pp: int, kv_bytes: int) -> int:
    """KV bytes one GPU stores per token. MLA keeps one compressed latent per layer,
    replicated on every TP rank; MHA/GQA keeps K and V per KV head, split across TP
    (replicated once TP exceeds the KV heads)."""
    layers = math.ceil((m.layers or 0) / pp)
    if m.attention == "MLA":
        return layers * ((m.kv_lora_rank or 0) + (m.qk_rope_head_dim or 0)) * kv_bytes
    kv_heads = m.kv_heads or m.heads or 1
    head_dim = m.head_dim or ((m.hidden_size or 0) // (m.heads or 1))
    return 2 * layers * math.ceil(kv_heads / tp) * head_dim * kv_bytes


@dataclass
class Layout:
    tp: int
    pp: int = 1
    dp: int = 1
    dp_attention: bool = False
    why: list[str] = field(default_factory=list)


def _tp_ok(m: ModelProfile, tp: int) -> bool:
    heads = m.heads or 1
    kv = m.kv_heads or heads
    return heads % tp == 0 and (kv % tp == 0 or tp % kv == 0) and \
        (not m.is_moe or not m.experts or m.experts % tp == 0 or tp % 2 == 0)


def memory(m: ModelProfile, hw: Hardware, engine: str, lay: Layout, context: int, kv_dtype: str,
           fraction: float, goal: str, workload: Workload | None = None) -> Memory:
    total = weight_bytes(m)
    per_gpu = total / (lay.tp * lay.pp)
    if lay.dp_attention:  # attention (bounded above by every non-expert weight) is replicated per rank
        shared = total - expert_weight_bytes(m)
        per_gpu += shared * (1 - 1 / lay.tp)
    gpu_gib = hw.memory_gb or 0.0
    reserve = CUDA_CONTEXT_GIB + (2.0 if engine == "vllm" else 0.0)  # vLLM's fraction also covers activations
    usable = gpu_gib * fraction - reserve
    kv_gib = usable - per_gpu / GIB
    kv_b = 1 if kv_dtype.startswith("fp8") else 2
    per_tok = kv_bytes_per_token(m, lay.tp, lay.pp, kv_b)
    tokens = int(kv_gib * GIB // per_tok) if kv_gib > 0 and per_tok else 0
    if lay.dp_attention:
        tokens *= lay.tp  # each attention rank keeps its own requests' KV
    fit_full = tokens // context if context else 0
    wl = workload or Workload(input_len=DEFAULT_WORKLOAD[0], output_len=DEFAULT_WORKLOAD[1])
    # each request sized at its full final length (input + output): the headroom for growth
    held = tokens // max(1, wl.tokens)
    want = wl.concurrency or DEFAULT_MAX_RUNNING[goal]
    running = max(1, min(want, held))
    return Memory(gpu=hw.gpu, gpu_memory_gib=gpu_gib, gpus=hw.count, tp=lay.tp, pp=lay.pp, dp=lay.dp,
                  dp_attention=lay.dp_attention, weight_format=m.quantization or "bf16",
                  weights_total_gib=round(total / GIB, 1), weights_per_gpu_gib=round(per_gpu / GIB, 2),
                  fraction=fraction, usable_per_gpu_gib=round(usable, 2), kv_per_gpu_gib=round(kv_gib, 2),
                  kv_dtype=kv_dtype, kv_bytes_per_token_per_gpu=per_tok, kv_tokens=tokens, context=context,
                  full_context_requests=fit_full, workload_requests=held, max_running=running)


def default_fraction(engine: str, hw: Hardware) -> float:
    """The share of GPU memory kb gives the engine (weights + KV) when none is set."""
    return 0.88 if engine == "sglang" and (hw.memory_gb or 0) >= 80 else 0.85 if engine == "sglang" else 0.90


def roomy(mem: Memory, context: int, goal: str, size: int) -> bool:
    """Room for a useful batch: min(64, goal's cap, 8 per GPU of the group) requests at half the context."""
    want = min(GOAL_RUNNING[goal], 64)
    return mem.kv_tokens >= context and mem.kv_tokens // max(1, context // 2) >= min(want, 8 * size)


def fitting_group(m: ModelProfile, hw: Hardware, engine: str, context: int, goal: str, fraction: float,
                  kv_dtype: str, sizes: list[int]) -> tuple[Layout | None, bool]:
    """(layout, roomy) over the group sizes given (ascending): the smallest group whose KV
    holds a useful batch (roomy=True); else the largest that holds one request of the
    context (roomy=False); else (None, False)."""
    fits = None
    for size in sizes:
        lay = _layout_for(m, hw, size, engine)
        if lay is None:
            continue
        mem = memory(m, hw, engine, lay, context, kv_dtype, fraction, goal)
        if mem.kv_tokens < context:
            continue
        fits = lay
        if roomy(mem, context, goal, size):
            return lay, True
    return fits, False


def choose_layout(m: ModelProfile, hw: Hardware, engine: str, context: int, goal: str, fraction: float,
                  kv_dtype: str) -> Layout:
    """The smallest model-parallel group that holds the weights and room for a useful
    batch, with replicas (DP) over the remaining GPUs; else the largest group that fits.
    PCIe boxes of 8 split TP4 × PP2 across NUMA halves; MLA MoE models on 4+ NVLink
    GPUs use DP attention for throughput."""
    n = hw.count
    sizes = [s for s in (1, 2, 4, 8, 16) if s <= n and n % s == 0]
    fits, _ = fitting_group(m, hw, engine, context, goal, fraction, kv_dtype, sizes)
    if fits is None:  # nothing fits: the largest layout, for the refusal message
        return _layout_for(m, hw, sizes[-1], engine) or Layout(tp=sizes[-1])
    size = fits.tp * fits.pp
    if (goal == "throughput" and m.is_moe and m.attention == "MLA" and size >= 4 and engine == "sglang"
            and hw.interconnect == "NVLink" and fits.pp == 1):
        dpa = Layout(tp=fits.tp, dp_attention=True, why=[
            "MLA KV is replicated on every TP rank; DP attention gives each rank its own requests "
            "(moep-dp-attention-deepseek-kv-duplication)"])
        if memory(m, hw, engine, dpa, context, kv_dtype, fraction, goal).kv_tokens >= context:
            fits = dpa
    fits.dp = n // size
    if fits.dp > 1:
        fits.why.append(f"the model fits on {size} GPU(s): {fits.dp} replicas serve more requests than one larger "
                        "group (par-replicas-beat-tp8-qwen3-235b-h100)")
    return fits


def _layout_for(m: ModelProfile, hw: Hardware, size: int, engine: str) -> Layout | None:
    if hw.interconnect == "PCIe" and size == 8 and (hw.numa_nodes or 2) >= 2 and _tp_ok(m, 4):
        return Layout(tp=4, pp=2, why=["PCIe only: TP4 inside each NUMA half and PP2 across them moves far less "
                                       "data over PCIe than TP8 (glm5-tp4-pp2-pcie-plan, par-pp-for-pcie-l40s)"])
    if _tp_ok(m, size):
        return Layout(tp=size)
    for tp in (size // 2, size // 4):
        if tp >= 1 and _tp_ok(m, tp):
            return Layout(tp=tp, pp=size // tp,
                          why=[f"TP{size} does not divide the attention heads: TP{tp} × PP{size // tp}"])
    return None
