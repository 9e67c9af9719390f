"""The rule registry: every rule in one table, its metadata checked at import.

Modelled on ruff's rule registry: a rule says what it reads (signals), what evidence
it cannot fire without (needs), what it proposes (fix class, strongest severity) and
the numbers it judges by (thresholds). Those claims are checked here against the
vocabularies, so a rule that names an unknown signal, fix class, evidence kind or
severity stops kb at import with a message naming the rule; `kb rules` and
docs/RULES.md are printed from the same table.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from kb.records import SEVERITIES
from kb.rules import (
    async_scheduling,
    benchmark_method,
    cuda_graph_ceiling,
    data_parallel_replicas,
    dp_attention,
    dp_attention_low_load,
    eager_mode,
    fp8_checkpoint,
    kv_cache_capacity,
    moe_kernel_config,
    moe_runner_backend,
    pcie_topology,
    running_request_cap,
    scheduler_policy,
    speculative_decoding,
    version_regression,
)
from kb.rules.base import Proposal, Rule, RuleContext
from kb.signals import DETECTORS, THRESHOLDS as SIGNAL_THRESHOLDS, load_thresholds as _load_table
from kb.vocab import FIX_CLASSES

# Evidence kinds a rule may need: (what it is, in words; whether this run has it).
EVIDENCE: dict[str, tuple[str, Callable[[RuleContext], bool]]] = {
    "server-args": ("server arguments: a launch command, server_info, or the start-up log's settings",
                    lambda c: bool(c.ev.server_args or c.ev.launch_argv or any(t.startup for t in c.ev.traces))),
    "server-log": ("a server log or /metrics samples", lambda c: bool(c.ev.traces)),
    "benchmark": ("benchmark results", lambda c: bool(c.ev.bench)),
    "model-config": ("the model's config.json", lambda c: c.model is not None),
    "model-path": ("the served model path", lambda c: bool(c.ev.model_path)),
    "gpu": ("the GPUs (nvidia-smi or --gpu)", lambda c: c.hw is not None),
    "gpu-arch": ("the GPU architecture", lambda c: bool(c.hw and c.hw.arch)),
    "gpu-memory": ("the GPU memory size", lambda c: bool(c.hw and c.hw.memory_gb)),
}

RULES: tuple[Rule, ...] = (
    running_request_cap.RULE,
    cuda_graph_ceiling.RULE,
    kv_cache_capacity.RULE,
    scheduler_policy.RULE,
    moe_kernel_config.RULE,
    moe_runner_backend.RULE,
    dp_attention.RULE,
    pcie_topology.RULE,
    speculative_decoding.RULE,
    eager_mode.RULE,
    async_scheduling.RULE,
    data_parallel_replicas.RULE,
    dp_attention_low_load.RULE,
    fp8_checkpoint.RULE,
    benchmark_method.RULE,
    version_regression.RULE,
)

ENGINES = ("sglang", "vllm")


class RuleMetadataError(Exception):
    """A rule's metadata names something outside kb's vocabularies: a programming error."""


def problems(rule: Rule) -> list[str]:
    """What is wrong with a rule's metadata, each as one sentence; empty when it is sound."""
    out = []
    if not (rule.id.startswith("KB") and rule.id[2:].isdigit() and len(rule.id) == 5):
        out.append(f"id {rule.id!r} is not of the form KB123")
    if rule.fix_class not in FIX_CLASSES:
        out.append(f"fix class {rule.fix_class!r} is not in kb.vocab.FIX_CLASSES")
    out += [f"signal {s!r} is not a signal kb.signals detects ({', '.join(DETECTORS)})"
            for s in rule.signals if s not in DETECTORS]
    for need in rule.needs:
        out += [f"needs {k!r}: not an evidence kind ({', '.join(EVIDENCE)})" for k in need.split("|")
                if k not in EVIDENCE]
    if rule.severity not in SEVERITIES:
        out.append(f"severity {rule.severity!r} is not one of {', '.join(SEVERITIES)}")
    out += [f"engine {e!r} is not one of {', '.join(ENGINES)}" for e in rule.engines if e not in ENGINES]
    names = [t.name for t in rule.thresholds]
    out += [f"threshold {n!r} declared twice" for n in sorted({n for n in names if names.count(n) > 1})]
    if not rule.example:
        out.append("no example of firing")
    if not rule.doc.strip() or "Why it matters" not in rule.doc:
        out.append("docstring missing or without a 'Why it matters' section")
    return out


def validate(rules: tuple[Rule, ...] | list[Rule]) -> None:
    """Raise RuleMetadataError listing every problem of every rule (ids and names unique)."""
    errors = [f"{r.id} {r.name}: {p}" for r in rules for p in problems(r)]
    for what in ("id", "name"):
        seen = [getattr(r, what) for r in rules]
        errors += [f"rule {what} {v!r} used by more than one rule"
                   for v in sorted({v for v in seen if seen.count(v) > 1})]
    clash = sorted({r.id for r in rules} & set(SIGNAL_THRESHOLDS))
    errors += [f"rule id {c!r} is also a signal id: their thresholds would share one TOML table" for c in clash]
    if errors:
        raise RuleMetadataError("bad rule metadata:\n  " + "\n  ".join(errors))


validate(RULES)


def get(ident: str) -> Rule | None:
    """A rule by id (KB112, any case) or name (data-parallel-replicas)."""
    return next((r for r in RULES if ident.upper() == r.id or ident == r.name), None)


def defaults() -> dict[str, dict[str, float]]:
    """Every rule's thresholds at their defaults, one table per rule id."""
    return {r.id: {t.name: t.default for t in r.thresholds} for r in RULES}


def load_thresholds(path: str | None) -> dict[str, dict[str, float]]:
    """Signal and rule thresholds, with a TOML file's values over the defaults:
    `[throughput-plateau] knee_gain = 0.08`, `[KB112] latency_max_level = 4`."""
    return _load_table(path, {**SIGNAL_THRESHOLDS, **defaults()})


def missing(rule: Rule, ctx: RuleContext) -> list[str]:
    """The needed evidence this run lacks (each as its kind, or "a|b" when neither is there)."""
    return [need for need in rule.needs if not any(EVIDENCE[k][1](ctx) for k in need.split("|"))]


def applies(rule: Rule, ctx: RuleContext) -> bool:
    return ctx.engine in rule.engines and not missing(rule, ctx)


def run(rule: Rule, ctx: RuleContext, thresholds: dict | None = None) -> Proposal | None:
    """The rule's proposal for this run; None when it does not apply (another engine,
    needed evidence absent) or its check stays quiet. Its thresholds are its defaults
    with any overrides from `thresholds` (as load_thresholds returns)."""
    if not applies(rule, ctx):
        return None
    limits = {t.name: t.default for t in rule.thresholds}
    limits.update((thresholds or {}).get(rule.id, {}))
    return rule.check(replace(ctx, thresholds=limits))
