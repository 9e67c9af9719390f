"""KB107 dp-attention

What it flags: a MoE model with multi-head latent attention (DeepSeek-V3/R1,
Kimi K2, GLM-5) on a TP group of 4 or more GPUs, limited by KV capacity or
plateauing under high concurrency, without DP attention.

Why it matters: with MLA, tensor parallelism replicates the compressed KV cache
on every rank, so adding GPUs adds almost no KV capacity; DP attention gives each
rank its own requests and KV, multiplying the batch the cluster can hold.

Evidence: attention kind MLA and experts in config.json; TP size; KV pressure or
a plateau at 64+ concurrency.

Fix: sglang `--enable-dp-attention --dp-size TP`; vLLM
`--data-parallel-size N --enable-expert-parallel` with TP 1 per rank.
"""

from kb.rules.base import FlagChange, Proposal, Rule, RuleContext, Threshold, change


def check(ctx: RuleContext) -> Proposal | None:
    m = ctx.model
    tp = ctx.tp()
    if not m or not m.is_moe or m.attention != "MLA" or tp < ctx.limit("min_tp"):
        return None
    if ctx.arg("dp_attention") or (ctx.engine == "vllm" and int(ctx.arg("dp") or 1) > 1):
        return None
    hot = [s for s in ("kv-cache-pressure", "throughput-plateau") if s in ctx.signals]
    if not hot or ctx.max_level() < ctx.limit("min_level"):
        return None
    changes: list[FlagChange] = []
    if ctx.engine == "sglang":
        changes += [change(ctx, "dp_attention", True, "each rank keeps its own requests and MLA KV cache"),
                    change(ctx, "dp", tp, f"one attention replica per GPU (TP {tp})")]
    else:
        changes += [change(ctx, "dp", tp, "attention data-parallel across the GPUs"),
                    change(ctx, "tp", 1, "experts are sharded by expert parallelism instead"),
                    change(ctx, "ep", True, "experts spread over all ranks")]
    changes = [c for c in changes if c]
    pcie = ctx.hw is not None and ctx.hw.interconnect == "PCIe"
    return Proposal(title=f"DP attention for {m.name or 'this MLA MoE model'} across {tp} GPUs",
                    severity="low" if pcie else "moderate",
                    rationale="MLA KV is replicated on every TP rank; data-parallel attention multiplies the KV "
                              "capacity and the running batch.",
                    changes=changes, supporting=hot,
                    notes=["over PCIe the all-to-all traffic of expert parallelism may cost more than it gains: "
                           "measure"] if pcie else [])


RULE = Rule(id="KB107", name="dp-attention", title="MLA MoE model without DP attention",
            fix_class="dp-attention", signals=("kv-cache-pressure", "throughput-plateau"),
            needs=("model-config", "benchmark"), severity="moderate",
            reads="model profile (MoE, MLA), TP size, KV pressure or plateau at high concurrency",
            thresholds=(Threshold("min_tp", 4, "smallest TP group proposed for DP attention"),
                        Threshold("min_level", 64, "highest benchmark concurrency must reach this")),
            example=("DeepSeek-V3 (MLA MoE) at TP8 on 8x H200, throughput flat from 64 to 128 concurrency → --enable-"
                     "dp-attention --dp-size 8 (tests/rules/KB107/fires)"),
            check=check, doc=__doc__)
