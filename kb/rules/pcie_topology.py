"""KB108 pcie-topology

What it flags: tensor parallelism across GPUs joined only by PCIe (no NVLink): TP8
on a box of 8 RTX PRO 6000 split over two NUMA nodes, TP4 on four L40S or V100s, and
TP2 over two cards whose link goes through the CPU (no common PCIe switch).

Why it matters: TP all-reduces activations twice per layer; over PCIe (and across
the CPU interconnect between NUMA nodes) that traffic, not compute, bounds decode.
vLLM's low-latency custom all-reduce is off for more than two PCIe-only GPUs, so
from TP4 every all-reduce pays NCCL's fixed cost (par-pcie-custom-allreduce-disabled);
the vLLM parallelism guide recommends PP over TP without NVLink (par-pp-for-pcie-l40s).
Pipeline parallelism sends one activation per stage boundary instead, so TP inside a
NUMA node / switch and PP across moves far less data. At TP2 the pair's link decides:
two GPUs under one switch (PIX/PXB) are fine, a pair joined through the CPU
(PHB/NODE/SYS) is not (vLLM issue 4238), and ACS/IOMMU can force that path too
(par-p2p-acs-iommu-hang).

Evidence: nvidia-smi topo -m (PIX/PXB/PHB/NODE/SYS, no NV#), NUMA affinity, GPU
names with "PCIe", TP size.

Fix: TP4 + PP2 on 8 PCIe GPUs (TP inside each NUMA node), TP2 + PP2 on 4; at TP2,
read the topology and run the pair under one PCIe switch (CUDA_VISIBLE_DEVICES), or
fall back to PP2 / replicas. Keep the custom all-reduce on only where P2P works (bare
metal or a container, not a VM without P2P).
"""

from __future__ import annotations

from kb import launchcmd
from kb.rules.base import Proposal, Rule, RuleContext, change

SAME_SWITCH = ("PIX", "PXB")  # through PCIe switches only, not the CPU
THROUGH_CPU = ("PHB", "NODE", "SYS")
TOPO_COMMANDS = ["nvidia-smi topo -m", "nvidia-smi topo -p2p r"]


def _link(links: dict[str, str], a: int, b: int) -> str | None:
    code = links.get(f"GPU{a}-GPU{b}") or links.get(f"GPU{b}-GPU{a}")
    return str(code).upper() if code else None


def check(ctx: RuleContext) -> Proposal | None:
    sig = ctx.signals.get("tp-over-pcie")
    if not sig:
        return None
    tp = ctx.tp()
    pp = int(ctx.arg("pp") or 1)
    if pp > 1 or tp < 2:
        return None
    supporting = ["tp-over-pcie"] + [s for s in ("throughput-plateau", "low-single-stream-decode") if s in ctx.signals]
    if tp == 2:
        return _pair(ctx, sig, supporting)
    new_tp = tp // 2
    m = ctx.model
    if m and m.heads and m.attention != "MLA" and (m.kv_heads or m.heads) % new_tp and m.heads % new_tp:
        return None
    numa = ctx.hw.numa_nodes if ctx.hw else None
    where = f"inside one NUMA node ({new_tp} GPUs)" if numa and numa >= 2 else f"over {new_tp} GPUs"
    c_tp = change(ctx, "tp", new_tp, f"TP {where}: half the ranks in every all-reduce")
    c_pp = change(ctx, "pp", 2, "pipeline stages across the two halves: one activation transfer per boundary")
    if not c_tp or not c_pp:
        return None
    c_tp.current = tp
    notes = ["PP adds a pipeline bubble at low concurrency: compare single-stream speed before and after"]
    if tp == 4 and ctx.engine == "vllm":
        notes.append("vLLM keeps its custom all-reduce only for two PCIe GPUs: TP2 groups stay on it "
                     "(par-pcie-custom-allreduce-disabled)")
    return Proposal(title=f"TP{new_tp} + PP2 instead of TP{tp} over PCIe", severity=sig.severity,
                    rationale=sig.summary + "; PP moves far less data across PCIe and the NUMA boundary.",
                    changes=[c_tp, c_pp], evidence=sig.evidence, supporting=supporting,
                    commands=list(TOPO_COMMANDS), notes=notes)


def _pair(ctx: RuleContext, sig, supporting: list[str]) -> Proposal | None:
    """TP2 over PCIe: fine under one switch; through the CPU, move the pair or stop sharding."""
    hw = ctx.hw
    links = hw.links if hw else {}
    link = _link(links, 0, 1)
    if link in SAME_SWITCH:
        return None  # the pair shares a PCIe switch: nothing to gain from the topology
    commands = list(TOPO_COMMANDS)
    notes = ["if `topo -m` shows PHB, NODE or SYS between the pair, each all-reduce crosses the CPU: "
             "NVLink, or two GPUs under one PCIe switch, or no tensor parallelism (PP2, or one replica per GPU "
             "when the model fits) is the fix", "ACS/IOMMU on the bridges also routes P2P through the CPU: "
             "`sudo lspci -vvv | grep -i acsctl` (par-p2p-acs-iommu-hang)"]
    better = None
    if link in THROUGH_CPU and hw:
        better = next(((a, b) for a in range(hw.count) for b in range(a + 1, hw.count)
                       if _link(links, a, b) in SAME_SWITCH), None)
    if better:
        base = launchcmd.current(ctx.ev, ctx.engine, ctx.catalog)
        env = {**ctx.ev.launch_env, "CUDA_VISIBLE_DEVICES": f"{better[0]},{better[1]}"}
        commands.append(base.command(base.argv, env))
        notes.insert(0, f"GPU{better[0]} and GPU{better[1]} share a PCIe switch ({_link(links, *better)}): "
                        "run the TP2 pair there")
    severity = "moderate" if link in THROUGH_CPU else "low"
    if link not in THROUGH_CPU:
        # an unread link is a check to make, not a diagnosis: two PCIe GPUs are a setup fact,
        # so only a measured symptom (a plateau, slow single-stream decode) backs this
        supporting = [s for s in supporting if s != "tp-over-pcie"]
    what = (f"the TP2 pair is joined through the CPU ({link})" if link in THROUGH_CPU
            else "the link between the TP2 pair is unknown (no `nvidia-smi topo -m`)")
    return Proposal(title="Check the PCIe path between the TP2 pair", severity=severity,
                    rationale=f"{sig.summary}; {what}: without a common PCIe switch every all-reduce goes "
                              "through the CPU root complex and TP2 gains little over one GPU.",
                    evidence=sig.evidence, supporting=supporting, commands=commands, notes=notes)


RULE = Rule(id="KB108", name="pcie-topology", title="Tensor parallelism over PCIe only",
            fix_class="pcie-topology", signals=("tp-over-pcie", "throughput-plateau", "low-single-stream-decode"),
            needs=("gpu",), severity="moderate",
            reads="hardware interconnect (nvidia-smi topo -m or --gpu), TP size",
            example=("Llama-3.1-70B at TP4 on four GPUs joined by SYS links in `nvidia-smi topo -m` → --tp-size 2 "
                     "--pp-size 2 (tests/rules/KB108/fires)"),
            check=check, doc=__doc__)
