"""KB103 kv-cache-capacity

What it flags: the KV cache is the limit: token usage near 100%, sglang
retractions (`KV cache pool is full. Retract requests.`) or vLLM preemptions.

Why it matters: retracted or preempted requests are recomputed from scratch;
the running batch cannot grow, so throughput stops scaling with load.

Evidence: peak token usage / GPU KV cache usage; retract and preempt events.

Fix: give the KV pool more memory (static memory fraction / GPU memory
utilisation), store KV in FP8 where the hardware and attention kernels handle it
well (Hopper and Blackwell), or spread the model over more GPUs (TP/DP).
"""

from kb.rules.base import Proposal, Rule, RuleContext, Threshold, change

FP8_KV_ARCHS = ("SM89", "SM90", "SM100", "SM103", "SM120")


def check(ctx: RuleContext) -> Proposal | None:
    sig = ctx.signals.get("kv-cache-pressure")
    if not sig:
        return None
    changes, notes = [], []
    current = ctx.arg("mem_fraction")
    ceiling = ctx.limit("sglang_fraction_ceiling" if ctx.engine == "sglang" else "vllm_fraction_ceiling")
    base = float(current) if current else (0.85 if ctx.engine == "sglang" else 0.90)
    if base < ceiling:
        new = round(min(ceiling, base + ctx.limit("fraction_step")), 2)
        c = change(ctx, "mem_fraction", new, f"more memory for the KV pool ({base} → {new})")
        if c:
            c.current = current
            changes.append(c)
    kv = ctx.arg("kv_cache_dtype")
    if ctx.arch() in FP8_KV_ARCHS and (not kv or kv == "auto"):
        choice = next((x for x in ("fp8_e4m3", "fp8")
                       if x in (ctx.catalog.choices(ctx.catalog.flag_for("kv_cache_dtype") or "") or [])), None)
        if choice:
            c = change(ctx, "kv_cache_dtype", choice,
                       "FP8 KV entries take half the memory of BF16: about twice the tokens")
            if c:
                changes.append(c)
                notes.append("FP8 KV can cost accuracy on long contexts with some attention kernels: check quality")
    if not changes:
        return None
    notes.append("if the pool is still too small, add GPUs (more TP, or DP replicas)")
    return Proposal(title="Give the KV cache more room", severity=sig.severity,
                    rationale=sig.summary + "; requests are retracted/preempted or cannot join the batch.",
                    changes=changes, evidence=sig.evidence, supporting=["kv-cache-pressure"], notes=notes)


RULE = Rule(id="KB103", name="kv-cache-capacity", title="KV cache capacity limits the batch",
            fix_class="kv-cache-capacity", signals=("kv-cache-pressure",),
            needs=("server-log",), severity="severe",
            reads="server log token usage / KV usage, retractions or preemptions; GPU architecture for FP8 KV",
            thresholds=(Threshold("fraction_step", 0.04, "how much to raise the static memory fraction by"),
                        Threshold("sglang_fraction_ceiling", 0.93, "highest --mem-fraction-static proposed"),
                        Threshold("vllm_fraction_ceiling", 0.95, "highest --gpu-memory-utilization proposed")),
            example=("twelve `KV cache pool is full. Retract requests.` lines, token usage 0.98, --mem-fraction-static"
                     " 0.85 on an H100 → --mem-fraction-static 0.89 and --kv-cache-dtype fp8_e4m3 "
                     "(tests/rules/KB103/fires)"),
            check=check, doc=__doc__)
