"""KB112 data-parallel-replicas

What it flags: a tensor-parallel group wider than the model needs: the weights plus
a KV pool with room for a useful batch fit in a group a half (or less) the size, and
the run is about throughput (a high-concurrency or offline throughput benchmark, or
no latency evidence at all).

Why it matters: once weights and enough KV fit, extra TP ranks mostly add all-reduce
traffic and shrink each GPU's matrix work, while independent replicas scale almost
linearly (two TP4 replicas beat one TP8 group by +85% for Qwen3-235B on 8x H100,
par-replicas-beat-tp8-qwen3-235b-h100). For single-stream latency the wider group can
still win, so a latency-only benchmark keeps the rule quiet.

Evidence: config.json (parameters, layers, KV heads) and GPU memory through kb
launch's memory arithmetic (`kb.sizing.fitting_group`, the same code `kb launch`
uses to choose its layout); TP/PP from the server arguments; the benchmark's load
level and request length.

Fix: sglang `--dp-size N --tp-size M` (sglang's data-parallel controller starts N
replicas of TP M; the router, `python -m sglang_router.launch_server`, takes the same
flags); vLLM `--data-parallel-size N --tensor-parallel-size M` for dense models, and
N separate `vllm serve` processes for MoE models (vLLM's DP couples MoE ranks,
par-dp-moe-coupling).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kb import launchcmd
from kb.flagdata import version_key
from kb.records import Evidence
from kb.rules.base import FlagChange, Proposal, Rule, RuleContext, Threshold, change, pow2_at_least
from kb.sizing import GIB, WEIGHT_BYTES, default_fraction, fitting_group, memory
from kb.vocab import params_in_name, quantization_in

OFFLINE_TOOLS = ("vllm-throughput",)  # every prompt at once
DEFAULT_PORT = {"sglang": 30000, "vllm": 8000}


def _int(v) -> int | None:
    try:
        return int(v) if v not in (None, "", True, False) else None
    except (TypeError, ValueError):  # `${ENGINE_TP:?}`, a list from a pasted command
        return None


def workload_context(ctx: RuleContext) -> tuple[int, float | None]:
    """(context the layout must serve, tokens per request of the benchmark or None): the
    configured context length, else the benchmark's request length (at least 4,096,
    rounded up to a power of two), else min(model context, 32,768) as `kb launch` uses."""
    m = ctx.model
    lens = [(r.input_len or 0) + (r.output_len or 0) for r in ctx.ev.bench if r.input_len or r.output_len]
    per_req = max(lens) if lens else None
    configured = _int(ctx.arg("context_length"))
    if configured:
        context = configured
    elif per_req:
        context = max(4096, pow2_at_least(per_req))
    else:
        context = min(m.context_len or 32768, 32768)
    if m.context_len:
        context = min(context, m.context_len)
    return context, per_req


def served_profile(ctx: RuleContext):
    """The model profile with the weight format of the checkpoint actually served: a
    config.json that declares no quantization (often the base model's) beside a served
    path that names one (`...-Instruct-2507-FP8`, `...-AWQ`) is sized by the name."""
    m = ctx.model
    named = quantization_in(ctx.ev.model_path or "") if ctx.ev.model_path else None
    if m and named and named not in ("bf16", "fp16") and m.quantization in (None, "bf16", "fp16"):
        return m.model_copy(update={"quantization": named}), named
    return m, None


def goal(ctx: RuleContext) -> str | None:
    """'throughput' (evidence of high load), 'unknown' (no benchmark), or None (latency only)."""
    runs = ctx.ev.bench
    if not runs:
        return "unknown"
    if any(r.tool in OFFLINE_TOOLS for r in runs) or any(r.level() >= ctx.limit("throughput_level") for r in runs):
        return "throughput"
    if any(s in ctx.signals for s in ("throughput-plateau", "running-cap-with-queue", "ttft-queueing")):
        return "throughput"
    if all(r.concurrency and r.concurrency <= ctx.limit("latency_max_level") for r in runs):
        return None
    return "unknown"


@dataclass
class Plan:
    """One TP group replaced by `replicas` smaller ones: the layout and its memory arithmetic."""
    tp: int  # the current group
    pp: int
    lay: object  # kb.sizing.Layout of one replica
    mem: object  # kb.sizing.Memory of one replica
    fraction: float
    context: int
    level: float  # highest benchmark load, 0 without one

    @property
    def size(self) -> int:
        return self.lay.tp * self.lay.pp

    @property
    def group(self) -> int:
        return self.tp * self.pp

    @property
    def replicas(self) -> int:
        return self.group // self.size


def current_group(ctx: RuleContext) -> tuple[int, int] | None:
    """(TP, PP) of a multi-GPU group that is not data-parallel yet; None otherwise. The TP
    size must be given: a guess from the GPU count would be no evidence."""
    tp, pp = _int(ctx.arg("tp")), _int(ctx.arg("pp")) or 1
    if not tp or tp * pp < 2:
        return None
    if ctx.arg("dp_attention") or (_int(ctx.arg("dp")) or 1) > 1:
        return None  # already data-parallel
    return tp, pp


def smaller_layout(ctx: RuleContext, m, tp: int, pp: int) -> Plan | None:
    """The smallest group that holds the weights and a useful KV pool (kb launch's own
    arithmetic), if smaller than the current one and able to hold its share of the load."""
    hw = ctx.hw
    group = tp * pp
    context, per_req = workload_context(ctx)
    fraction = float(ctx.arg("mem_fraction") or 0) or default_fraction(ctx.engine, hw)
    kv_dtype = "fp8_e4m3" if str(ctx.arg("kv_cache_dtype") or "auto").startswith("fp8") else "auto"
    sizes = [s for s in (1, 2, 4, 8) if s < group and group % s == 0]
    hw_group = hw.model_copy(update={"count": group})
    lay, room = fitting_group(m, hw_group, ctx.engine, context, "throughput", fraction, kv_dtype, sizes)
    if lay is None or not room:
        return None
    mem = memory(m, hw_group, ctx.engine, lay, context, kv_dtype, fraction, "throughput")
    plan = Plan(tp, pp, lay, mem, fraction, context, max((r.level() for r in ctx.ev.bench), default=0))
    if per_req and plan.level:
        share = min(plan.level / plan.replicas, ctx.limit("replica_share_max"))  # each replica's part of the load
        if mem.kv_tokens < share * per_req:
            return None  # a replica could not hold its share of this benchmark's batch
    return plan


def layout_changes(ctx: RuleContext, plan: Plan) -> list[FlagChange]:
    """TP (and PP, and sglang's EP, which lives inside the TP group) of one replica."""
    lay, mem = plan.lay, plan.mem
    changes: list[FlagChange] = []
    c_tp = change(ctx, "tp", lay.tp, f"one replica needs {plan.size} GPU(s): {mem.weights_per_gpu_gib:g} GiB of "
                                     f"weights and {mem.kv_tokens:,} KV tokens per replica")
    if c_tp:
        c_tp.current = plan.tp
        changes.append(c_tp)
    if lay.pp != plan.pp:
        c_pp = change(ctx, "pp", lay.pp if lay.pp > 1 else None, "pipeline stages of one replica")
        if c_pp:
            changes.append(c_pp)
    ep = _int(ctx.arg("ep"))
    if ctx.engine == "sglang" and ep and ep > lay.tp:
        c_ep = change(ctx, "ep", lay.tp if lay.tp > 1 else None, f"expert parallelism within each TP{lay.tp} replica")
        if c_ep:
            changes.append(c_ep)
    return changes


def memory_note(ctx: RuleContext, plan: Plan) -> str:
    hw, lay, mem = ctx.hw, plan.lay, plan.mem
    return (f"memory arithmetic ({hw.gpu}, {hw.memory_gb:g} GiB, fraction {plan.fraction:g}, context "
            f"{plan.context:,}): "
            f"TP{lay.tp}" + (f"×PP{lay.pp}" if lay.pp > 1 else "") + f" holds {mem.weights_per_gpu_gib:g} GiB of "
            f"weights per GPU and leaves {mem.kv_per_gpu_gib:g} GiB = {mem.kv_tokens:,} KV tokens per replica "
            f"({mem.full_context_requests} requests of the full context)")


def replica_changes(ctx: RuleContext, plan: Plan, changes: list[FlagChange], moe_vllm: bool,
                    notes: list[str]) -> tuple[list[FlagChange], list[str]] | None:
    """(flag changes, extra commands): the engine's data-parallel flag, or one server per
    replica where that flag does not give independent replicas; None if neither can be written."""
    lay, replicas = plan.lay, plan.replicas
    commands: list[str] = []
    if not moe_vllm:
        c_dp = change(ctx, "dp", replicas,
                      f"{replicas} independent replicas of TP{lay.tp} on the same {plan.group} GPUs")
        if not c_dp:
            return None
        changes = [*changes, c_dp]
        if ctx.engine == "sglang":
            notes.append("sglang's docs prefer the router for data parallelism: "
                         "`python -m sglang_router.launch_server` takes the same --dp-size/--tp-size")
        else:
            notes.append("--max-num-seqs and the KV cache apply per DP rank (par-dp-moe-coupling)")
    if moe_vllm or _older_than_catalog(ctx):
        commands += _instances(ctx, changes, replicas, plan.size)
        notes.append("MoE under vLLM --data-parallel-size is one expert group across all ranks, not independent "
                     "replicas: start separate servers (par-dp-moe-coupling)" if moe_vllm else
                     f"{ctx.ev.engine_version} predates kb's oldest {ctx.engine} flag catalog: separate servers "
                     "work on any version")
        if moe_vllm:  # one command cannot express it: the servers above are the change
            changes = []
    return changes, commands


def _group_name(tp: int, pp: int) -> str:
    return f"TP{tp}" + (f"×PP{pp}" if pp > 1 else "")


def check(ctx: RuleContext) -> Proposal | None:
    m, named = served_profile(ctx)
    hw = ctx.hw
    if m is None:
        return by_name(ctx)
    if not m.params_b or not (m.layers and (m.heads or m.kv_heads or m.kv_lora_rank)):
        return None
    if not hw or not hw.memory_gb:
        return None
    group = current_group(ctx)
    aim = goal(ctx) if group else None
    if aim is None:
        return None
    plan = smaller_layout(ctx, m, *group)
    if plan is None:
        return None
    notes = [memory_note(ctx, plan)]
    if named:
        notes.append(f"weights sized as {named}, the format the served checkpoint's name gives "
                     f"({ctx.ev.model_path}); the config.json given declares none")
    planned = replica_changes(ctx, plan, layout_changes(ctx, plan), ctx.engine == "vllm" and m.is_moe, notes)
    if planned is None or planned == ([], []):
        return None
    changes, commands = planned
    tp, pp, lay, mem = plan.tp, plan.pp, plan.lay, plan.mem
    evidence = [r.source for r in ctx.ev.bench if r.source][:1]
    load = ("offline throughput benchmark" if any(r.tool in OFFLINE_TOOLS for r in ctx.ev.bench)
            else f"benchmark load {plan.level:g}" if plan.level else "no benchmark given")
    return Proposal(
        title=f"{plan.replicas} replicas of {_group_name(lay.tp, lay.pp)} instead of one {_group_name(tp, pp)} group "
              f"({ctx.ev.model_path or m.name or 'the model'} fits on {plan.size} GPU(s))",
        severity="moderate" if aim == "throughput" else "low",
        rationale=(f"the weights and a KV pool of {mem.kv_tokens:,} tokens fit in {plan.size} GPU(s); the other "
                   f"{plan.group - plan.size} GPU(s) of the TP{tp} group add all-reduce traffic rather than throughput "
                   f"({load})"),
        changes=changes, commands=commands, notes=notes,
        evidence=[Evidence(text=f"{_group_name(tp, pp)} on {hw.count}x {hw.gpu}; "
                                f"{m.params_b:g}B parameters ({m.quantization or 'bf16'})",
                           where=None)] + [Evidence(text=load, where=w) for w in evidence],
        supporting=[s for s in ("throughput-plateau", "ttft-queueing", "running-cap-with-queue") if s in ctx.signals])


DTYPE_BYTES = {"float32": 4.0, "float": 4.0, "float16": 2.0, "half": 2.0, "bfloat16": 2.0, "auto": 2.0}
MOE_NAME = re.compile(r"-A\d+(?:\.\d+)?B\b|moe|mixtral", re.I)  # Qwen3-30B-A3B: 3B active of 30B


def by_name(ctx: RuleContext) -> Proposal | None:
    """Without config.json: the parameter count the served model's name states, at the
    weight format its name or --dtype gives. No KV arithmetic is possible without the
    model's layers and heads, so the smaller group must keep most of its memory free of
    weights (`weights_share_max`), and the check is low severity."""
    path = ctx.ev.model_path if isinstance(ctx.ev.model_path, str) else ""
    params = params_in_name(path)
    hw, group = ctx.hw, current_group(ctx)
    if not params or not hw or not hw.memory_gb or not group or goal(ctx) is None:
        return None
    tp, pp = group
    quant = quantization_in(path) or (ctx.arg("quantization") if ctx.arg("quantization") in WEIGHT_BYTES else None)
    per_param = WEIGHT_BYTES[quant] if quant else DTYPE_BYTES.get(str(ctx.arg("dtype") or "auto").lower(), 2.0)
    weights_gib = params * 1e9 * per_param / GIB
    fraction = float(ctx.arg("mem_fraction") or 0) or default_fraction(ctx.engine, hw)
    usable = hw.memory_gb * fraction
    size = next((s for s in (1, 2, 4, 8) if s < tp * pp and (tp * pp) % s == 0
                 and weights_gib / s <= ctx.limit("weights_share_max") * usable), None)
    if size is None:
        return None
    replicas = tp * pp // size
    changes = []
    c_tp = change(ctx, "tp", size, f"{weights_gib / size:.1f} GiB of weights per GPU at TP{size}")
    if c_tp:
        c_tp.current = tp
        changes.append(c_tp)
    if pp > 1:
        c_pp = change(ctx, "pp", None, "one replica needs no pipeline stages")
        if c_pp:
            changes.append(c_pp)
    moe = ctx.engine == "vllm" and bool(MOE_NAME.search(path))
    notes = [f"weights computed from the name: {params:g}B parameters × {per_param:g} bytes "
             f"({quant or ctx.arg('dtype') or '16-bit'}) = {weights_gib:.1f} GiB; at TP{size} that is "
             f"{weights_gib / size:.1f} GiB of the {usable:.0f} GiB kb counts per {hw.gpu} (fraction {fraction:g}), "
             "the rest is KV cache",
             "the model's layers and heads are not known: the KV room per replica is not computed; check the "
             "start-up log's KV cache size (or give the model's config) before moving"]
    planned = replica_changes(ctx, Plan(tp, pp, _SizeOnly(size), None, fraction, 0, 0), changes, moe, notes)
    if planned is None or planned == ([], []):
        return None
    changes, commands = planned
    return Proposal(
        title=f"{replicas} replicas of TP{size} instead of one {_group_name(tp, pp)} group ({path} fits on {size} "
              "GPU(s))",
        severity="low",
        rationale=(f"{path} holds {weights_gib:.1f} GiB of weights: TP{size} keeps them within "
                   f"{weights_gib / size / usable:.0%} of each GPU's usable memory; the other GPUs of the "
                   f"{_group_name(tp, pp)} group add all-reduce traffic rather than throughput"),
        changes=changes, commands=commands, notes=notes,
        evidence=[Evidence(text=f"{_group_name(tp, pp)} on {hw.gpu}; {params:g}B parameters by the name {path}",
                           where=None)],
        supporting=[s for s in ("throughput-plateau", "ttft-queueing", "running-cap-with-queue") if s in ctx.signals])


@dataclass
class _SizeOnly:
    """A replica's layout when only its TP size is known (no config for the memory arithmetic)."""
    tp: int
    pp: int = 1


def _older_than_catalog(ctx: RuleContext) -> bool:
    v = ctx.ev.engine_version
    return bool(v) and version_key(v) < version_key(ctx.catalog.version)


def _instances(ctx: RuleContext, changes: list[FlagChange], replicas: int, size: int) -> list[str]:
    """One server per replica on its own GPUs and port (works on every version)."""
    base = launchcmd.current(ctx.ev, ctx.engine, ctx.catalog)
    port_flag = ctx.catalog.flag_for("port") or "--port"
    port = _int(ctx.arg("port")) or DEFAULT_PORT[ctx.engine]
    visible = str(ctx.ev.launch_env.get("CUDA_VISIBLE_DEVICES") or "")
    gpus = [g for g in visible.split(",") if g.strip()] or [str(i) for i in range(replicas * size)]
    out = []
    for i in range(replicas):
        ids = ",".join(gpus[i * size:(i + 1) * size]) or ",".join(str(j) for j in range(i * size, (i + 1) * size))
        argv = launchcmd.apply(base.argv, [(c.flag, c.new, ctx.catalog.spellings(c.flag))
                                      for c in changes if c.setting != "dp"] + [(port_flag, port + i, [])])
        env = {**ctx.ev.launch_env, "CUDA_VISIBLE_DEVICES": ids}
        out.append(base.command(argv, env, " &"))
    return out


RULE = Rule(id="KB112", name="data-parallel-replicas", title="Tensor parallelism wider than the model needs",
            fix_class="data-parallel-replicas",
            signals=("throughput-plateau", "running-cap-with-queue", "ttft-queueing"),
            needs=("model-config|model-path", "gpu-memory", "server-args"), severity="moderate",
            reads="config.json (parameters, layers, KV heads), GPU memory, the TP size from the server arguments, "
                  "and no latency-only benchmark",
            thresholds=(Threshold("latency_max_level", 8, "every benchmark at this concurrency or below: a latency "
                                                          "question, the rule stays quiet"),
                        Threshold("throughput_level", 32, "a benchmark at this load or above: a throughput question"),
                        Threshold("replica_share_max", 256, "most requests one replica must hold of the tested load"),
                        Threshold("weights_share_max", 0.4, "without config.json: the largest share of a GPU's usable "
                                                            "memory the weights may take in the smaller group")),
            example=("Llama-3.1-70B (BF16) at TP8 on 8x H100 with a benchmark at 64 concurrency → 2 replicas of TP4 "
                     "(--tp-size 4 --dp-size 2) (tests/rules/KB112/fires)"),
            check=check, doc=__doc__)
