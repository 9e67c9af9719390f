"""`kb launch`: a launch command that starts the first time, with its memory
arithmetic shown and every flag explained.

The arithmetic is deliberately conservative (weights rounded up, KV replicated where
the engine replicates it), so a command kb prints never asks for more memory than
the GPUs have; when the model cannot fit, kb refuses with the numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from kb import launchcmd
from kb.errors import KbError
from kb.flags import Catalog
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


class FlagChoice(BaseModel):
    flag: str
    value: object = True
    why: str
    source: str  # a finding id, a rule id, or "memory arithmetic"


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
    max_running: int


class LaunchPlan(BaseModel):
    engine: str
    version: str
    catalog_note: str | None = None
    command: str
    argv: list[str]
    env: dict[str, str] = Field(default_factory=dict)
    flags: list[FlagChoice]
    memory: Memory
    notes: list[str] = Field(default_factory=list)


class DoesNotFit(KbError):
    pass


# ------------------------------------------------------------------ arithmetic


def expert_params_b(m: ModelProfile) -> float:
    """Routed-expert parameters (billions): MoE layers × experts × 3 matrices (gate, up, down)."""
    if not (m.is_moe and m.experts and m.expert_intermediate_size and m.hidden_size and m.layers):
        return 0.0
    moe_layers = m.layers - (m.dense_layers or 0)
    return moe_layers * m.experts * 3 * m.hidden_size * m.expert_intermediate_size / 1e9


def weight_bytes(m: ModelProfile) -> float:
    if not m.params_b:
        raise KbError("the model's parameter count is unknown: config.json lacks the shapes kb needs")
    q = m.quantization if m.quantization in WEIGHT_BYTES else None
    if q == "compressed-tensors":
        q = None
    experts = expert_params_b(m) if q in EXPERT_ONLY else 0.0
    if q in EXPERT_ONLY and not m.is_moe:  # dense 4-bit: every linear layer is 4-bit
        embed = 2 * (m.vocab_size or 0) * (m.hidden_size or 0) / 1e9
        return ((m.params_b - embed) * WEIGHT_BYTES[q] + embed * 2.0) * 1e9
    rest = m.params_b - experts
    return (experts * WEIGHT_BYTES[q] + rest * (2.0 if q in EXPERT_ONLY else WEIGHT_BYTES[q])) * 1e9


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
           fraction: float, goal: str) -> Memory:
    total = weight_bytes(m)
    per_gpu = total / (lay.tp * lay.pp)
    if lay.dp_attention:  # attention (bounded above by every non-expert weight) is replicated per rank
        shared = total - expert_params_b(m) * 1e9 * WEIGHT_BYTES.get(m.quantization, 2.0)
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
    running = max(1, min(GOAL_RUNNING[goal], tokens // max(1, context // 2)))
    return Memory(gpu=hw.gpu, gpu_memory_gib=gpu_gib, gpus=hw.count, tp=lay.tp, pp=lay.pp, dp=lay.dp,
                  dp_attention=lay.dp_attention, weight_format=m.quantization or "bf16",
                  weights_total_gib=round(total / GIB, 1), weights_per_gpu_gib=round(per_gpu / GIB, 2),
                  fraction=fraction, usable_per_gpu_gib=round(usable, 2), kv_per_gpu_gib=round(kv_gib, 2),
                  kv_dtype=kv_dtype, kv_bytes_per_token_per_gpu=per_tok, kv_tokens=tokens, context=context,
                  full_context_requests=fit_full, max_running=running)


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
            return Layout(tp=tp, pp=size // tp, why=[f"TP{size} does not divide the attention heads: TP{tp} × PP{size // tp}"])
    return None


# ------------------------------------------------------------------ flags


def _moe_backend(m: ModelProfile, hw: Hardware) -> str | None:
    from kb.rules.moe_runner_backend import BLACKWELL, pick_backend

    return pick_backend(hw.arch, m.quantization) if m.is_moe and hw.arch in BLACKWELL else None


def plan(m: ModelProfile, hw: Hardware, engine: str, catalog: Catalog, model_path: str, context: int | None = None,
         goal: str = "throughput") -> LaunchPlan:
    if not hw.memory_gb:
        raise KbError(f"GPU memory for {hw.gpu!r} is unknown: name a GPU kb knows (see kb/hardware.py)")
    ctx = context or min(m.context_len or 32768, 32768)
    if m.context_len and ctx > m.context_len:
        raise KbError(f"--context {ctx} is longer than the model's {m.context_len:,} tokens")
    fraction = default_fraction(engine, hw)
    kv_dtype = "auto"
    lay = choose_layout(m, hw, engine, ctx, goal, fraction, kv_dtype)
    mem = memory(m, hw, engine, lay, ctx, kv_dtype, fraction, goal)
    notes: list[str] = []
    fp8_kv_ok = hw.arch in ("SM89", "SM100", "SM103", "SM120") or (hw.arch == "SM90" and ctx <= 32768)
    if mem.full_context_requests < 8 and fp8_kv_ok:
        lay8 = choose_layout(m, hw, engine, ctx, goal, fraction, "fp8_e4m3")
        mem8 = memory(m, hw, engine, lay8, ctx, "fp8_e4m3", fraction, goal)
        if mem8.kv_tokens > mem.kv_tokens:
            lay, mem, kv_dtype = lay8, mem8, "fp8_e4m3"
            notes.append("FP8 KV cache doubles the tokens that fit (vllm-fp8-kv-cache-throughput); check quality "
                         "on long contexts (vllm-fp8-kv-cache-accuracy-pitfalls)")
    if mem.kv_per_gpu_gib <= 0 or mem.kv_tokens < ctx:
        raise DoesNotFit(
            f"{m.name or 'the model'} does not fit on {hw.count}x {hw.gpu}: weights {mem.weights_total_gib:,.1f} GiB "
            f"({mem.weight_format}) = {mem.weights_per_gpu_gib:,.1f} GiB per GPU at TP{mem.tp}×PP{mem.pp}, against "
            f"{mem.usable_per_gpu_gib:,.1f} GiB usable per GPU ({mem.gpu_memory_gib:g} GiB × {fraction}); "
            f"KV left: {mem.kv_per_gpu_gib:,.1f} GiB = {mem.kv_tokens:,} tokens, less than one {ctx:,}-token request")
    flags = _flags(m, hw, engine, catalog, lay, mem, kv_dtype, ctx, goal, model_path)
    argv = list(launchcmd.LAUNCHERS[engine])
    if engine == "vllm":
        argv.append(model_path)
    for f in flags:
        if engine == "vllm" and f.flag == "--model":
            continue
        argv += [f.flag] if f.value is True else [f.flag, launchcmd.value_str(f.value)]
    env: dict[str, str] = {}
    notes += lay.why
    return LaunchPlan(engine=engine, version=catalog.version, catalog_note=catalog.note(),
                      command=launchcmd.render(argv, env), argv=argv, env=env, flags=flags, memory=mem, notes=notes)


def _flags(m, hw, engine, catalog: Catalog, lay: Layout, mem: Memory, kv_dtype: str, ctx: int, goal: str,
           model_path: str) -> list[FlagChoice]:
    out: list[FlagChoice] = []

    def add(setting: str, value, why: str, source: str) -> None:
        flag = catalog.flag_for(setting)
        if not flag:
            return
        problem = catalog.check(flag, value)
        if problem:
            return  # never print a flag this version rejects
        out.append(FlagChoice(flag=flag, value=value, why=why, source=source))

    add("model", model_path, "the checkpoint", "input")
    add("tp", lay.tp, f"tensor parallel over {lay.tp} GPU(s): holds {mem.weights_per_gpu_gib:g} GiB of weights per GPU",
        "memory arithmetic")
    if lay.pp > 1:
        add("pp", lay.pp, "pipeline stages: " + "; ".join(lay.why) if lay.why else "pipeline stages", "KB108")
    if lay.dp_attention:
        add("dp_attention", True, "each rank keeps its own requests and MLA KV", "KB107")
        add("dp", lay.tp, f"one attention replica per GPU of the TP{lay.tp} group", "KB107")
    elif lay.dp > 1:
        add("dp", lay.dp, f"{lay.dp} data-parallel replicas of TP{lay.tp}", "par-replicas-beat-tp8-qwen3-235b-h100")
    quant = {"nvfp4": "modelopt_fp4", "fp8": "fp8", "mxfp4": "mxfp4", "awq": "awq_marlin" if engine == "vllm" else "awq",
             "gptq": "gptq_marlin" if engine == "vllm" else "gptq"}.get(m.quantization or "")
    qflag = catalog.flag_for("quantization")
    if quant and qflag and quant in (catalog.choices(qflag) or []) and m.quantization in ("nvfp4",):
        add("quantization", quant, f"{m.quantization} checkpoint (ModelOpt): the matching kernels", "input")
    backend = _moe_backend(m, hw)
    if backend:
        add("moe_runner_backend", backend, f"{m.quantization} MoE on {hw.arch}: the FlashInfer kernels built for it",
            "glm5-flashinfer-cutlass-moe-sm120" if hw.arch == "SM120" else "KB106")
    if kv_dtype != "auto":
        choices = catalog.choices(catalog.flag_for("kv_cache_dtype") or "") or []
        value = kv_dtype if kv_dtype in choices else "fp8" if "fp8" in choices else None
        if value:
            add("kv_cache_dtype", value, "FP8 KV halves the bytes per token", "vllm-fp8-kv-cache-throughput")
    add("mem_fraction", mem.fraction, f"{mem.usable_per_gpu_gib:g} GiB per GPU for weights + KV "
        f"({mem.kv_per_gpu_gib:g} GiB KV = {mem.kv_tokens:,} tokens)", "memory arithmetic")
    add("context_length", ctx, f"{mem.full_context_requests} requests of the full context fit at once", "memory arithmetic")
    add("max_running_requests", mem.max_running,
        f"KV holds {mem.kv_tokens:,} tokens ≈ {mem.kv_tokens // max(1, ctx // 2):,} requests at half the context; "
        f"{goal} goal caps at {GOAL_RUNNING[goal]}", "KB101")
    graph = min(512, int(math.ceil(mem.max_running / 8) * 8))
    add("cuda_graph_max_bs", graph, "CUDA graphs up to the running cap, so full batches do not run eagerly", "KB102")
    chunk = (8192 if goal == "throughput" else 4096) if engine == "sglang" else (8192 if goal == "throughput" else 2048)
    add("chunked_prefill", chunk, "prefill chunk: larger for throughput, smaller keeps ITL low under long prompts",
        "vllm-chunked-prefill-batched-tokens")
    if m.mtp_layers and goal == "latency":
        if engine == "sglang":
            add("speculative_algorithm", "EAGLE", "the checkpoint ships MTP draft layers", "moep-mtp-deepseek-small-batch")
            add("speculative_num_steps", 3, "three draft steps", "moep-mtp-deepseek-small-batch")
            add("speculative_eagle_topk", 1, "one candidate per step", "moep-mtp-deepseek-small-batch")
            add("speculative_num_draft_tokens", 4, "steps + 1 verified per pass", "moep-mtp-deepseek-small-batch")
        else:
            add("speculative_config", '{"method":"mtp","num_speculative_tokens":1}', "the checkpoint ships MTP layers",
                "moep-vllm-mtp-speedup-shrinks-with-qps")
    if m.family in ("kimi", "glm", "deepseek") and m.architecture not in ("DeepseekV3ForCausalLM",):
        add("trust_remote_code", True, "the architecture ships its own modelling code", "input")
    return out
