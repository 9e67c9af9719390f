"""KB108 pcie-topology

What it flags: tensor parallelism across GPUs joined only by PCIe (no NVLink),
e.g. TP8 on a box of 8 RTX PRO 6000 split over two NUMA nodes.

Why it matters: TP all-reduces activations twice per layer; over PCIe (and
across the CPU interconnect between NUMA nodes) that traffic, not compute,
bounds decode. Pipeline parallelism sends one activation per stage boundary
instead, so TP within a NUMA node and PP across nodes moves far less data.

Evidence: nvidia-smi topo -m (PIX/PXB/NODE/SYS, no NV#), NUMA affinity, TP size.

Fix: TP4 + PP2 on 8 PCIe GPUs (TP inside each NUMA node); keep the custom
all-reduce on only where P2P works (bare metal or a container, not a VM without
P2P).
"""

from kb.rules.base import Proposal, Rule, RuleContext, change


def check(ctx: RuleContext) -> Proposal | None:
    sig = ctx.signals.get("tp-over-pcie")
    if not sig:
        return None
    tp = ctx.tp()
    pp = int(ctx.arg("pp") or 1)
    if tp < 8 or pp > 1:
        return None
    new_tp = tp // 2
    m = ctx.model
    if m and m.heads and m.attention != "MLA" and (m.kv_heads or m.heads) % new_tp and m.heads % new_tp:
        return None
    c_tp = change(ctx, "tp", new_tp, f"TP inside one NUMA node ({new_tp} GPUs)")
    c_pp = change(ctx, "pp", 2, "pipeline stages across the two halves: one activation transfer per boundary")
    if not c_tp or not c_pp:
        return None
    c_tp.current = tp
    return Proposal(title=f"TP{new_tp} + PP2 instead of TP{tp} over PCIe", severity=sig.severity,
                    rationale=sig.summary + "; PP moves far less data across the PCIe/NUMA boundary.",
                    changes=[c_tp, c_pp], evidence=sig.evidence,
                    supporting=["tp-over-pcie"] + [s for s in ("throughput-plateau", "low-single-stream-decode")
                                                   if s in ctx.signals],
                    commands=["nvidia-smi topo -m"],
                    notes=["PP adds a pipeline bubble at low concurrency: compare single-stream speed before and after"])


RULE = Rule(id="KB108", name="pcie-topology", title="Tensor parallelism over PCIe only",
            fix_class="pipeline-parallelism", signals=("tp-over-pcie",),
            needs="hardware interconnect (nvidia-smi topo -m or --gpu), TP size",
            check=check, doc=__doc__)
