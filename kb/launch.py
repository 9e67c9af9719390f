"""`kb launch`: a launch command that starts the first time, with its memory
arithmetic shown and every flag explained.

The arithmetic is deliberately conservative (weights rounded up, KV replicated where
the engine replicates it), so a command kb prints never asks for more memory than
the GPUs have; when the model cannot fit, kb refuses with the numbers.
"""

from __future__ import annotations

import math
import re

from pydantic import BaseModel, Field

from kb import launchcmd
from kb.errors import KbError, UsageError
from kb.flags import Catalog
from kb.moebackend import backend_for
from kb.records import Hardware, ModelProfile
from kb.sizing import (
    DEFAULT_MAX_RUNNING,
    DEFAULT_WORKLOAD,
    Layout,
    Memory,
    Workload,
    choose_layout,
    default_fraction,
    memory,
)

# The benchmarks' own random-dataset defaults (sglang/benchmark/serving.py 0.5.23:
# --random-input-len 1024 --random-output-len 1024; vllm/benchmarks/datasets/datasets.py
# 0.32.0: 1024 and 128). With no workload given kb assumes 1,024:1,024.
RANDOM_DATASET = {"sglang": (1024, 1024), "vllm": (1024, 128)}


class FlagChoice(BaseModel):
    flag: str
    value: object = True
    why: str
    source: str  # a finding id, a rule id, or "memory arithmetic"


class LaunchPlan(BaseModel):
    engine: str
    version: str
    catalog_note: str | None = None
    command: str
    argv: list[str]
    env: dict[str, str] = Field(default_factory=dict)
    flags: list[FlagChoice]
    memory: Memory
    workload: Workload | None = None
    sizing: list[str] = Field(default_factory=list)  # each chosen number with its arithmetic
    notes: list[str] = Field(default_factory=list)


class Alternative(BaseModel):
    """A nearby plan that fits, shown when the asked one does not."""

    change: str
    kv_tokens: int
    requests: int  # requests of the context (or workload) that fit at once
    unit: str = "requests"  # what a request is: "requests of 32,768 tokens"
    layout: str


class DoesNotFit(KbError):
    def __init__(self, message: str, alternatives: list[Alternative] | None = None):
        self.alternatives = alternatives or []
        if self.alternatives:
            message += "\nwhat would fit:\n" + "\n".join(
                f"  - {a.change}: {a.layout}, KV {a.kv_tokens:,} tokens = {a.requests:,} {a.unit}"
                for a in self.alternatives)
        super().__init__(message)


# ------------------------------------------------------------------ flags


def workload_from(spec: str | None, dataset: str | None, concurrency: int | None, engine: str) -> Workload | None:
    """`ISL:OSL`, a benchmark file or run directory (its mean lengths and highest
    concurrency), or a benchmark's random-dataset defaults; None when nothing is given
    (plan() then assumes 1,024:1,024 and says so)."""
    if spec and re.fullmatch(r"\s*\d+\s*:\s*\d+\s*", spec):
        isl, osl = (int(x) for x in spec.split(":"))
        if isl < 1 or osl < 1:
            raise UsageError(f"workload {spec!r}: expected positive INPUT:OUTPUT token counts, e.g. 1024:1024")
        return Workload(input_len=isl, output_len=osl, concurrency=concurrency, source=f"given {isl}:{osl}")
    if spec:
        raise UsageError(f"workload {spec!r}: expected INPUT:OUTPUT token counts such as 1024:1024, or a benchmark "
                         "file")
    if dataset:
        if dataset != "random":
            raise UsageError(f"dataset {dataset!r}: kb knows the length distribution of 'random' only")
        isl, osl = RANDOM_DATASET[engine]
        return Workload(input_len=isl, output_len=osl, concurrency=concurrency,
                        source=f"{engine}'s benchmark random-dataset defaults")
    if concurrency:
        return Workload(input_len=DEFAULT_WORKLOAD[0], output_len=DEFAULT_WORKLOAD[1], concurrency=concurrency,
                        source="assumed: 1,024 in, 1,024 out (sglang bench_serving's random defaults)")
    return None


def workload_from_runs(runs: list, concurrency: int | None, source: str) -> Workload:
    """The workload a benchmark ran: mean input/output tokens and its highest concurrency."""
    lens = [(r.input_len, r.output_len) for r in runs if r.input_len and r.output_len]
    if not lens:
        raise KbError(f"{source}: no benchmark run with input and output lengths to size from")
    isl = round(sum(i for i, _ in lens) / len(lens))
    osl = round(sum(o for _, o in lens) / len(lens))
    levels = [r.concurrency for r in runs if r.concurrency]
    return Workload(input_len=max(1, isl), output_len=max(1, osl),
                    concurrency=concurrency or (max(levels) if levels else None),
                    source=f"read from {source}")


def plan(m: ModelProfile, hw: Hardware, engine: str, catalog: Catalog, model_path: str, context: int | None = None,
         goal: str = "throughput", workload: Workload | None = None) -> LaunchPlan:
    if not hw.memory_gb:
        raise KbError(f"GPU memory for {hw.gpu!r} is unknown: name a GPU kb knows (see kb/hardware.py)")
    ctx = context or min(m.context_len or 32768, 32768)
    if m.context_len and ctx > m.context_len:
        raise KbError(f"the context {ctx:,} is longer than the model's {m.context_len:,} tokens")
    wl = workload or Workload(input_len=DEFAULT_WORKLOAD[0], output_len=DEFAULT_WORKLOAD[1],
                              source="assumed: 1,024 in, 1,024 out (sglang bench_serving's random defaults)")
    if wl.tokens > ctx:
        raise KbError(f"the workload's requests ({wl.input_len:,} + {wl.output_len:,} tokens) are longer than "
                      f"the context {ctx:,}: raise the context or shorten the workload")
    fraction = default_fraction(engine, hw)
    lay, mem, kv_dtype, notes = _fit(m, hw, engine, ctx, goal, fraction, wl)
    if mem.kv_per_gpu_gib <= 0 or mem.kv_tokens < ctx:
        raise DoesNotFit(
            f"{m.name or 'the model'} does not fit on {hw.count}x {hw.gpu}: weights {mem.weights_total_gib:,.1f} GiB "
            f"({mem.weight_format}) = {mem.weights_per_gpu_gib:,.1f} GiB per GPU at TP{mem.tp}×PP{mem.pp}, against "
            f"{mem.usable_per_gpu_gib:,.1f} GiB usable per GPU ({mem.gpu_memory_gib:g} GiB × {fraction}); "
            f"KV left: {mem.kv_per_gpu_gib:,.1f} GiB = {mem.kv_tokens:,} tokens, less than one {ctx:,}-token request",
            alternatives(m, hw, engine, ctx, goal, fraction, wl))
    if wl.concurrency and mem.workload_requests < wl.concurrency:
        held = alternatives(m, hw, engine, ctx, goal, fraction, wl, need=wl.concurrency)
        notes.append(f"the KV cache holds {mem.workload_requests:,} requests of {wl.tokens:,} tokens, fewer than the "
                     f"{wl.concurrency:,} asked: the running cap is {mem.max_running:,} and the rest queue"
                     + ("; what would hold them: " + "; ".join(
                         f"{a.change} ({a.layout}, {a.requests:,} requests)" for a in held) if held else ""))
    flags = _flags(m, hw, engine, catalog, lay, mem, kv_dtype, ctx, goal, model_path, wl)
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
                      command=launchcmd.render(argv, env), argv=argv, env=env, flags=flags, memory=mem,
                      workload=wl, sizing=sizing(mem, wl, ctx, goal, engine), notes=notes)


def _fit(m: ModelProfile, hw: Hardware, engine: str, ctx: int, goal: str, fraction: float,
         wl: Workload) -> tuple[Layout, Memory, str, list[str]]:
    """Layout and memory at 16-bit KV, or FP8 KV where the GPU supports it and 16-bit
    holds fewer than 8 requests of the full context."""
    kv_dtype, notes = "auto", []
    lay = choose_layout(m, hw, engine, ctx, goal, fraction, kv_dtype)
    mem = memory(m, hw, engine, lay, ctx, kv_dtype, fraction, goal, wl)
    fp8_kv_ok = hw.arch in ("SM89", "SM100", "SM103", "SM120") or (hw.arch == "SM90" and ctx <= 32768)
    if mem.full_context_requests < 8 and fp8_kv_ok:
        lay8 = choose_layout(m, hw, engine, ctx, goal, fraction, "fp8_e4m3")
        mem8 = memory(m, hw, engine, lay8, ctx, "fp8_e4m3", fraction, goal, wl)
        if mem8.kv_tokens > mem.kv_tokens:
            lay, mem, kv_dtype = lay8, mem8, "fp8_e4m3"
            notes.append("FP8 KV cache doubles the tokens that fit (vllm-fp8-kv-cache-throughput); check quality "
                         "on long contexts (vllm-fp8-kv-cache-accuracy-pitfalls)")
    return lay, mem, kv_dtype, notes


def alternatives(m: ModelProfile, hw: Hardware, engine: str, ctx: int, goal: str, fraction: float,
                 wl: Workload, need: int | None = None) -> list[Alternative]:
    """The nearest plans that fit (need=None: one request of the context; else `need`
    requests of the workload): more GPUs, an FP8 or 4-bit checkpoint of the same model,
    FP8 KV cache, DP attention (MLA), a higher memory fraction, a shorter context."""
    def count(mem: Memory) -> int:
        return mem.full_context_requests if need is None else mem.workload_requests

    def try_(change: str, model=m, hard=hw, context=ctx, frac=fraction, kv="auto", lay=None) -> Alternative | None:
        layout = lay or choose_layout(model, hard, engine, context, goal, frac, kv)
        mem = memory(model, hard, engine, layout, context, kv, frac, goal, wl)
        if not (mem.kv_per_gpu_gib > 0 and mem.kv_tokens >= context
                and (need is None or mem.workload_requests >= need)):
            return None
        desc = (f"TP{mem.tp}×PP{mem.pp}" + (f"×DP{mem.dp}" if mem.dp > 1 else "")
                + (" DP-attention" if mem.dp_attention else ""))
        unit = f"requests of {context:,} tokens" if need is None else f"requests of {wl.tokens:,} tokens"
        return Alternative(change=change, kv_tokens=mem.kv_tokens, requests=count(mem), unit=unit, layout=desc)

    out: list[Alternative] = []
    for n in (2, 4, 8, 16):  # more GPUs of the same kind: the smallest count that fits
        if n > hw.count:
            alt = try_(f"{n}x {hw.gpu}", hard=hw.model_copy(update={"count": n}))
            if alt:
                out.append(alt)
                break
    if (m.quantization or "bf16") in ("bf16", "fp16", "fp32"):
        for q, name in (("fp8", "the FP8 checkpoint of the same model"),
                        ("nvfp4" if hw.arch in ("SM100", "SM103", "SM120") else "awq",
                         "a 4-bit checkpoint (NVFP4)" if hw.arch in ("SM100", "SM103", "SM120")
                         else "a 4-bit checkpoint (AWQ/GPTQ)")):
            alt = try_(name, model=m.model_copy(update={"quantization": q}))
            if alt:
                out.append(alt)
    fp8_kv_ok = hw.arch in ("SM89", "SM100", "SM103", "SM120") or (hw.arch == "SM90" and ctx <= 32768)
    if need and fp8_kv_ok:
        alt = try_("FP8 KV cache (--kv-cache-dtype fp8_e4m3)", kv="fp8_e4m3")
        if alt:
            out.append(alt)
    if need and m.attention == "MLA" and engine == "sglang" and hw.count >= 4:
        alt = try_("DP attention (MLA KV is otherwise replicated on every TP rank)",
                   lay=Layout(tp=hw.count, dp_attention=True))
        if alt:
            out.append(alt)
    for frac in (0.92, 0.95):
        if frac > fraction:
            alt = try_(f"memory fraction {frac}", frac=frac)
            if alt:
                out.append(alt)
                break
    shorter = ctx // 2
    while shorter >= max(2048, wl.tokens):
        alt = try_(f"context {shorter:,}", context=shorter)
        if alt:
            out.append(alt)
            break
        shorter //= 2
    return out


def sizing(mem: Memory, wl: Workload, ctx: int, goal: str, engine: str) -> list[str]:
    """Each number kb chose, with its arithmetic and what happens beyond it."""
    load = f"{wl.concurrency:,} asked" if wl.concurrency else f"none given: up to {DEFAULT_MAX_RUNNING[goal]} ({goal})"
    graph = round_up8(mem.max_running)
    chunk = prefill_budget(wl, goal, engine)
    past = mem.kv_tokens // max(1, mem.max_running)
    stop = "retract" if engine == "sglang" else "preempt"
    return [
        f"workload: {wl.input_len:,} in + {wl.output_len:,} out = {wl.tokens:,} tokens per request ({wl.source})",
        f"requests held: {mem.kv_tokens:,} KV tokens / {wl.tokens:,} = {mem.workload_requests:,}",
        f"running cap: min(load {load}, held {mem.workload_requests:,}) = {mem.max_running:,}",
        f"CUDA-graph ceiling: the running cap rounded up to 8 = {graph:,}",
        f"prefill budget: {chunk:,} tokens per step = {max(1, chunk // max(1, wl.input_len)):,} prompts of "
        f"{wl.input_len:,} tokens",
        f"longest request accepted: {ctx:,} tokens ({mem.full_context_requests:,} of them fit at once)",
        f"beyond: at {mem.max_running:,} running the KV is full once the mean request passes {past:,} tokens; "
        f"a longer mix makes {engine} {stop} requests there",
    ]


def round_up8(n: int) -> int:
    return int(math.ceil(n / 8) * 8)


def prefill_budget(wl: Workload, goal: str, engine: str) -> int:
    """Tokens prefilled per step: at least one whole prompt of the workload; 8,192 floor for
    throughput (several prompts per step), 2,048 (vLLM) / 4,096 (sglang) for latency so decode
    steps that share the batch stay short (vllm-chunked-prefill-batched-tokens)."""
    floor = 8192 if goal == "throughput" else (2048 if engine == "vllm" else 4096)
    prompt = 1 << max(0, wl.input_len - 1).bit_length()
    return min(max(floor, prompt), 32768)


def _flags(m, hw, engine, catalog: Catalog, lay: Layout, mem: Memory, kv_dtype: str, ctx: int, goal: str,
           model_path: str, wl: Workload) -> list[FlagChoice]:
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
    quant = {"nvfp4": "modelopt_fp4", "fp8": "fp8", "mxfp4": "mxfp4",
             "awq": "awq_marlin" if engine == "vllm" else "awq",
             "gptq": "gptq_marlin" if engine == "vllm" else "gptq"}.get(m.quantization or "")
    qflag = catalog.flag_for("quantization")
    if quant and qflag and quant in (catalog.choices(qflag) or []) and m.quantization in ("nvfp4",):
        add("quantization", quant, f"{m.quantization} checkpoint (ModelOpt): the matching kernels", "input")
    backend = backend_for(m, hw)
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
    add("context_length", ctx, f"the longest request accepted; {mem.full_context_requests} of that length fit at once",
        "memory arithmetic")
    add("max_running_requests", mem.max_running,
        f"KV holds {mem.kv_tokens:,} tokens = {mem.workload_requests:,} requests of {wl.tokens:,} tokens "
        f"({wl.input_len:,}:{wl.output_len:,}); "
        + (f"{wl.concurrency:,} asked" if wl.concurrency
           else f"no load given, {goal} goal caps at {DEFAULT_MAX_RUNNING[goal]}"),
        "KB101")
    add("cuda_graph_max_bs", round_up8(mem.max_running),
        "CUDA graphs up to the running cap, so full batches do not run eagerly", "KB102")
    add("chunked_prefill", prefill_budget(wl, goal, engine),
        f"at least one {wl.input_len:,}-token prompt per step; larger for throughput, smaller keeps ITL low",
        "vllm-chunked-prefill-batched-tokens")
    if m.mtp_layers and goal == "latency":
        if engine == "sglang":
            add("speculative_algorithm", "EAGLE", "the checkpoint ships MTP draft layers",
                "moep-mtp-deepseek-small-batch")
            add("speculative_num_steps", 3, "three draft steps", "moep-mtp-deepseek-small-batch")
            add("speculative_eagle_topk", 1, "one candidate per step", "moep-mtp-deepseek-small-batch")
            add("speculative_num_draft_tokens", 4, "steps + 1 verified per pass", "moep-mtp-deepseek-small-batch")
        else:
            add("speculative_config", '{"method":"mtp","num_speculative_tokens":1}', "the checkpoint ships MTP layers",
                "moep-vllm-mtp-speedup-shrinks-with-qps")
    if m.family in ("kimi", "glm", "deepseek") and m.architecture not in ("DeepseekV3ForCausalLM",):
        add("trust_remote_code", True, "the architecture ships its own modelling code", "input")
    return out


def report(p: LaunchPlan, model: str, hw: Hardware) -> str:
    """`kb launch`'s text: the command, its memory arithmetic, the sizing and every flag with why."""
    m = p.memory
    out = [launchcmd.one_line(f"# {p.engine} {p.version}: {model} on {hw.count}x {hw.gpu} ({hw.arch}, "
                              f"{hw.interconnect})")]
    if p.catalog_note:
        out.append(launchcmd.one_line(f"# note: {p.catalog_note}"))
    out += [p.command, "", "Memory (per GPU)",
            f"  weights   {m.weights_total_gib:,.1f} GiB total ({m.weight_format}) over TP{m.tp} × PP{m.pp} = "
            f"{m.weights_per_gpu_gib:,.2f} GiB" + (" (attention replicated per DP-attention rank)" if m.dp_attention
                                                   else ""),
            f"  usable    {m.gpu_memory_gib:g} GiB × {m.fraction} − reserve = {m.usable_per_gpu_gib:,.2f} GiB",
            f"  KV cache  {m.kv_per_gpu_gib:,.2f} GiB / {m.kv_bytes_per_token_per_gpu:,} B per token ({m.kv_dtype}) = "
            f"{m.kv_tokens:,} tokens" + (" (× DP attention ranks)" if m.dp_attention else ""),
            f"  requests  {m.full_context_requests:,} at the full {m.context:,}-token context; running cap "
            f"{m.max_running}",
            "", "Sized for the workload"]
    out += [f"  {line}" for line in p.sizing]
    out += ["", "Flags"]
    for f in p.flags:
        val = "" if f.value is True else f" {f.value}"
        out.append(f"  {f.flag}{val}\n      {f.why}  [{f.source}]")
    out += [f"note: {n}" for n in p.notes]
    return "\n".join(out)
