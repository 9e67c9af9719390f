"""Rules × findings → ranked recommendations.

A rule proposes a change for a fix class; the findings of that class say what it
gained before, and where. A finding counts as evidence of gain for this run only
when its context is close (same engine, GPU architecture, interconnect, model
family, quantization); otherwise the recommendation says no finding covers this
context rather than borrowing a number.
"""

from __future__ import annotations

import math

from kb import launchcmd
from kb.evidence import RunEvidence
from kb.flags import Catalog
from kb.records import SEVERITY_ORDER, CitedFinding, Finding, FlagDiff, Recommendation, Signal
from kb.render import context_line
from kb.rules import RULES
from kb.rules.base import Proposal, Rule, RuleContext

# how much each part of the context counts towards similarity
WEIGHTS = {"engine": 0.2, "arch": 0.25, "family": 0.25, "interconnect": 0.1, "quantization": 0.1,
           "version": 0.05, "gpu_count": 0.05}
COVERS = 0.6  # similarity at which a finding's gain is taken as the expected gain


def _same(a, b) -> float | None:
    if a is None or b is None:
        return None
    return 1.0 if str(a).lower() == str(b).lower() else 0.0


def similarity(ev: RunEvidence, f: Finding, engine: str) -> float:
    """0..1: a field unknown on either side counts half (a generic finding is half-relevant)."""
    c = f.context
    hw, m = ev.hardware, ev.model
    version = None
    if c.engine_version and ev.engine_version:
        version = 1.0 if c.engine_version.split(".")[:2] == ev.engine_version.split(".")[:2] else 0.0
    engine_match = None if (c.engine in (None, "any")) else _same(c.engine, engine)
    parts = {
        "engine": engine_match,
        "arch": _same(c.arch(), hw.arch if hw else None),
        "family": _same(c.model_family, m.family if m else None),
        "interconnect": _same(c.interconnect, hw.interconnect if hw else None),
        "quantization": _same(c.quantization, m.quantization if m else None),
        "version": version,
        "gpu_count": _same(c.gpu_count, hw.count if hw else None),
    }
    return sum(WEIGHTS[k] * (0.5 if v is None else v) for k, v in parts.items())


def cite(ev: RunEvidence, fix_class: str, findings: list[Finding], engine: str) -> list[CitedFinding]:
    rows = []
    for f in findings:
        if f.kind != "finding" or fix_class not in f.fix_classes:
            continue
        g = f.best_gain()
        rows.append(CitedFinding(id=f.id, title=f.title, similarity=round(similarity(ev, f, engine), 3),
                                 gain=g.describe() if g else None, ratio=round(g.ratio(), 3) if g and g.ratio() else None,
                                 context=context_line(f), source=str(f.sources[0]) if f.sources else ""))
    # close context first; among equals, findings that measured something
    rows.sort(key=lambda r: (-r.similarity, r.ratio is None, -(r.ratio or 0)))
    return rows[:3]


def _confidence(p: Proposal, signals: dict[str, Signal], covered: bool) -> float:
    if p.reminder:
        return 0.2  # no symptom and nothing measured in this run: a check, not a diagnosis
    real = [s for s in p.supporting if s in signals]
    conf = 0.3 + 0.2 * min(len(real), 3) + (0.1 if covered else 0.0)
    if not real:
        conf = 0.4 if p.supporting else 0.3  # context or server arguments alone
    return round(min(conf, 1.0), 2)


def _score(severity: str, confidence: float, ratio: float | None) -> float:
    gain = 1 + min(max(math.log2(ratio), 0), 2.5) / 2.5 if ratio and ratio > 1 else 1.0
    return round(SEVERITY_ORDER[severity] * confidence * gain, 3)


def build(rule: Rule, p: Proposal, ctx: RuleContext, findings: list[Finding], base: launchcmd.Current) -> Recommendation:
    cited = cite(ctx.ev, rule.fix_class, findings, ctx.engine)
    covering = next((c for c in cited if c.similarity >= COVERS and c.ratio), None)
    if covering:
        expected = f"{covering.gain} in {covering.id} (context {covering.context or 'unstated'})"
    elif cited:
        expected = None
        p.notes.append(f"no finding covers this context closely (best match {cited[0].id}, similarity "
                       f"{cited[0].similarity:.2f}): the gain here is unmeasured")
    else:
        expected = None
        p.notes.append(f"no finding of class {rule.fix_class} yet: the gain here is unmeasured")
    flags = [FlagDiff(flag=c.flag, current=c.current, new=c.new, why=c.why) for c in p.changes]
    commands = list(p.commands)
    if p.changes:
        changes = [(c.flag, c.new, _aliases(ctx.catalog, c.flag)) for c in p.changes]
        commands.insert(0, base.command(launchcmd.apply(base.argv, changes), {**ctx.ev.launch_env, **p.env}))
    conf = _confidence(p, ctx.signals, bool(covering))
    ratio = covering.ratio if covering else None
    return Recommendation(rule=f"{rule.id} {rule.name}", fix_class=rule.fix_class, title=p.title, severity=p.severity,
                          confidence=conf, score=_score(p.severity, conf, ratio), expected_gain=expected,
                          expected_ratio=ratio, commands=commands, flags=flags, env=p.env, rationale=p.rationale,
                          evidence=p.evidence, findings=cited, notes=p.notes)


def _aliases(catalog: Catalog, flag: str) -> list[str]:
    """Other spellings of the same setting, in this version and others (catalog.spellings)."""
    return catalog.spellings(flag)


# What a rule may raise on a server argument of an unexpected shape (a list where one
# number was meant, text where a number was): that rule is skipped with a warning.
ODD_VALUE = (TypeError, ValueError, KeyError, IndexError, ZeroDivisionError, OverflowError, AttributeError)


def recommend(ev: RunEvidence, signals: list[Signal], engine: str, catalog: Catalog,
              findings: list[Finding], warnings: list[str] | None = None) -> list[Recommendation]:
    ctx = RuleContext(ev=ev, signals={s.id: s for s in signals}, engine=engine, catalog=catalog)
    base = launchcmd.current(ev, engine, catalog)
    if base.missing and warnings is not None:
        warnings.append("no launch command known (give --launch \"CMD\"): the commands below show kb's changes"
                        + (f" on {launchcmd.MODEL}, a placeholder for your model," if launchcmd.MODEL in base.missing
                           else "") + " and the rest of your launch command goes with them")
    recs = []
    reminders: set[int] = set()
    for rule in RULES:
        try:
            p = rule.check(ctx)
            if p:
                recs.append(build(rule, p, ctx, findings, base))
                if p.reminder and not any(s in ctx.signals for s in p.supporting):
                    reminders.add(id(recs[-1]))
        except ODD_VALUE as e:
            if warnings is not None:
                warnings.append(f"rule {rule.id} {rule.name} skipped: a server argument has an unexpected value "
                                f"({type(e).__name__}: {str(e)[:120]})")
    # a reminder (a check with no symptom behind it) ranks after every proposal this run's
    # symptoms or its own facts support, whatever gain its class's findings measured elsewhere
    recs.sort(key=lambda r: (id(r) in reminders, -r.score))
    for i, r in enumerate(recs, 1):
        r.rank = i
    return recs


def combined_command(ev: RunEvidence, engine: str, catalog: Catalog, recs: list[Recommendation]) -> str | None:
    """Every flag change together, as one launch command."""
    changes = [(f.flag, f.new, _aliases(catalog, f.flag)) for r in recs if r.severity != "low" for f in r.flags]
    if not changes:
        return None
    base = launchcmd.current(ev, engine, catalog)
    env = {k: v for r in recs for k, v in r.env.items()}
    return base.command(launchcmd.apply(base.argv, changes), {**ev.launch_env, **env})
