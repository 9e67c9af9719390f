"""What a rule sees and what it proposes.

A rule holds no knowledge of gains: it says "this signal, in this context, calls
for this class of fix, with this exact change". Ranking (kb/recommend.py) joins the
proposal with the findings of the same fix class.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from kb.evidence import RunEvidence
from kb.flags import Catalog
from kb.records import Evidence, Hardware, ModelProfile, Severity, Signal


@dataclass
class RuleContext:
    ev: RunEvidence
    signals: dict[str, Signal]
    engine: str
    catalog: Catalog
    # the running rule's thresholds (its defaults, overridden from the --thresholds TOML
    # file); kb.rules.registry.run fills them in before calling the rule's check
    thresholds: dict[str, float] = field(default_factory=dict)

    def limit(self, name: str) -> float:
        """One of the running rule's thresholds, by the name it declares."""
        return self.thresholds[name]

    @property
    def model(self) -> ModelProfile | None:
        return self.ev.model

    @property
    def hw(self) -> Hardware | None:
        return self.ev.hardware

    def arg(self, setting: str):
        """Current value of a setting from the known server arguments."""
        flag = self.catalog.flag_for(setting)
        names = [setting]
        if flag:
            info = self.catalog.flags.get(flag) or {}
            names = [flag, *(info.get("aliases") or []), info.get("dest") or flag, setting]
        value = self.ev.arg(*names)
        if value is None:  # the effective value the server logged at start-up
            keys = {n.lstrip("-").replace("-", "_") for n in names}
            value = next((t.startup[k] for t in self.ev.traces for k in keys if t.startup.get(k) is not None), None)
        return value

    def tp(self) -> int:
        return int(self.arg("tp") or self.ev.tp_size() or (self.hw.count if self.hw else 1) or 1)

    def arch(self) -> str | None:
        return self.hw.arch if self.hw else None

    def max_level(self) -> int:
        return int(max((r.level() for r in self.ev.bench if r.concurrency), default=0))

    def max_running_seen(self) -> int:
        return int(max((t.stats.get("running_max") or 0 for t in self.ev.traces), default=0))


@dataclass
class FlagChange:
    setting: str
    flag: str
    new: object  # True for a switch; None to remove the flag
    current: object = None
    why: str = ""


@dataclass
class Proposal:
    title: str
    severity: str
    rationale: str
    changes: list[FlagChange] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)  # extra steps (tuning, env, checks)
    env: dict[str, str] = field(default_factory=dict)
    evidence: list[Evidence] = field(default_factory=list)
    supporting: list[str] = field(default_factory=list)  # signal ids behind it
    notes: list[str] = field(default_factory=list)
    # a check to make, proposed from context alone with no symptom behind it (KB105 without
    # a log): ranked after every recommendation a detected symptom supports
    reminder: bool = False


@dataclass(frozen=True)
class Threshold:
    """A number a rule judges by, overridable as `[KB112] latency_max_level = 4`."""
    name: str
    default: float
    meaning: str


@dataclass(frozen=True)
class Rule:
    """A rule and what it says about itself; kb.rules.registry checks every field
    against the vocabularies (signal ids, fix classes, evidence kinds, severities)."""
    id: str  # permanent, e.g. KB101
    name: str  # slug
    title: str
    fix_class: str  # a kb.vocab.FIX_CLASSES slug: joins the rule to the findings of that class
    signals: tuple[str, ...]  # every signal its check reads (kb.signals.DETECTORS ids)
    # evidence kinds (kb.rules.registry.EVIDENCE) all required for it to fire; "a|b" is
    # either. The registry skips the rule when one is absent.
    needs: tuple[str, ...]
    reads: str  # what it reads, in words
    check: Callable[[RuleContext], Proposal | None]
    severity: Severity  # the strongest severity it proposes
    engines: tuple[str, ...] = ("sglang", "vllm")
    thresholds: tuple[Threshold, ...] = ()
    example: str = ""  # evidence on which it fires → what it proposes (its fires/ fixture, in words)
    doc: str = ""
    # whether a finding of the same class with a close context says what this fix gains here;
    # not for classes whose findings are each a different bug (one regression's gain says
    # nothing about another's)
    gain_from_class: bool = True


def change(ctx: RuleContext, setting: str, new, why: str) -> FlagChange | None:
    """A flag change for this engine version, or None if the version has no such flag."""
    flag = ctx.catalog.flag_for(setting)
    if not flag:
        return None
    return FlagChange(setting, flag, new, ctx.arg(setting), why)


def round_up(n: float, step: int = 8) -> int:
    return int(math.ceil(n / step) * step)


def pow2_at_least(n: float) -> int:
    return 1 << max(0, math.ceil(math.log2(max(1, n))))


def target_running_cap(ctx: RuleContext) -> int | None:
    """How many running requests the evidence asks for: enough for the highest load
    tested (at least double the current cap), within the KV capacity when known."""
    cap = ctx.arg("max_running_requests") or next(
        (t.startup.get("max_running_requests") or t.startup.get("max_num_seqs") for t in ctx.ev.traces
         if t.startup.get("max_running_requests") or t.startup.get("max_num_seqs")), None)
    sig = ctx.signals.get("running-cap-with-queue")
    cap = int(cap or (sig.data["cap"] if sig else 0)) or None
    want = max(ctx.max_level(), 2 * cap if cap else 0)
    if not want:
        return None
    fit = kv_fit(ctx)
    if fit and fit < want:
        want = fit
    return int(want) if not cap or want > cap else None


def kv_fit(ctx: RuleContext) -> int | None:
    """Requests of this benchmark's length that fit in the KV pool (start-up log)."""
    tokens = next((t.startup.get("max_total_num_tokens") or t.startup.get("kv_cache_tokens")
                   for t in ctx.ev.traces if t.startup.get("max_total_num_tokens") or t.startup.get("kv_cache_tokens")),
                   None)
    lens = [(r.input_len or 0) + (r.output_len or 0) for r in ctx.ev.bench if r.input_len or r.output_len]
    if not tokens or not lens:
        return None
    per_req = max(lens)
    return int(int(tokens) // per_req) if per_req else None
