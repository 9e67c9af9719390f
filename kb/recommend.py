"""Rules × findings → ranked recommendations.

A rule proposes a change for a fix class; the findings of that class say what it
gained before, and where. A finding counts as evidence of gain for this run only
when its context is close (same engine, GPU architecture, interconnect, model
family, quantization); otherwise the recommendation says no finding covers this
context rather than borrowing a number.
"""

from __future__ import annotations

import math

from kb import fixflags, launchcmd
from kb.errors import ODD_VALUE
from kb.evidence import RunEvidence
from kb.flags import Catalog
from kb.match import COVERS, NAMED_BONUS, Match, classes_named, other_engine_command, signal_severity, similarity
from kb.records import SEVERITY_ORDER, CitedFinding, Evidence, Finding, FlagDiff, Recommendation, Signal
from kb.rules import registry
from kb.rules.base import Proposal, Rule, RuleContext


def cite(ev: RunEvidence, fix_class: str, findings: list[Finding], engine: str) -> list[CitedFinding]:
    rows = []
    for f in findings:
        if f.kind != "finding" or fix_class not in f.fix_classes:
            continue
        g = f.best_gain()
        rows.append(CitedFinding(id=f.id, title=f.title, similarity=round(similarity(ev, f, engine), 3),
                                 gain=g.describe() if g else None,
                                 ratio=round(g.ratio(), 3) if g and g.ratio() else None,
                                 context=f.context.line(), source=str(f.sources[0]) if f.sources else ""))
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


def build(rule: Rule, p: Proposal, ctx: RuleContext, findings: list[Finding],
          base: launchcmd.Current) -> Recommendation:
    cited = cite(ctx.ev, rule.fix_class, findings, ctx.engine)
    covering = next((c for c in cited if c.similarity >= COVERS and c.ratio), None) if rule.gain_from_class else None
    if covering:
        expected = f"{covering.gain} in {covering.id} (context {covering.context or 'unstated'})"
    elif cited and not rule.gain_from_class:
        expected = None
        p.notes.append(f"the {rule.fix_class} findings cited are other cases of this class: their gains are not "
                       "this fix's, so the gain here is unmeasured")
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
        changes = [(c.flag, c.new, ctx.catalog.spellings(c.flag)) for c in p.changes]
        commands.insert(0, base.command(launchcmd.apply(base.argv, changes), {**ctx.ev.launch_env, **p.env}))
    conf = _confidence(p, ctx.signals, bool(covering))
    ratio = covering.ratio if covering else None
    return Recommendation(rule=f"{rule.id} {rule.name}", fix_class=rule.fix_class, title=p.title, severity=p.severity,
                          confidence=conf, score=_score(p.severity, conf, ratio), expected_gain=expected,
                          expected_ratio=ratio, commands=commands, flags=flags, env=p.env, rationale=p.rationale,
                          evidence=p.evidence, findings=cited, notes=p.notes)


def recommend(ev: RunEvidence, signals: list[Signal], engine: str | None, catalog: Catalog | None,
              findings: list[Finding], warnings: list[str] | None = None,
              matches: list[Match] | None = None, thresholds: dict | None = None) -> list[Recommendation]:
    """The computed rules' proposals and the matching findings' fixes, merged where
    they propose the same change, ranked: symptom-backed first, then what the run's
    words resemble, then context-only checks, then reminders."""
    matches = matches or []
    excluded = {m.finding.id for m in matches if m.excluded}
    usable = [f for f in findings if f.id not in excluded]
    recs: list[Recommendation] = []
    base: launchcmd.Current | None = None
    named = classes_named(ev)
    if engine and catalog:
        ctx = RuleContext(ev=ev, signals={s.id: s for s in signals}, engine=engine, catalog=catalog)
        base = launchcmd.current(ev, engine, catalog)
        if warnings is not None:
            warnings.extend(base.notes)
        if base.missing and warnings is not None:
            warnings.append("no launch command known (give --launch \"CMD\"): the commands below show kb's changes"
                            + (f" on {launchcmd.MODEL}, a placeholder for your model,"
                               if launchcmd.MODEL in base.missing
                               else "") + " and the rest of your launch command goes with them")
        for rule in registry.RULES:
            try:
                p = registry.run(rule, ctx, thresholds)
                if p:
                    r = build(rule, p, ctx, usable, base)
                    if p.reminder and not any(s in ctx.signals for s in p.supporting):
                        r.basis = "reminder"
                    elif not any(s in ctx.signals for s in p.supporting) and p.severity == "low":
                        # a low-severity check from the setup's facts alone; it answers the run's
                        # words when they name its class (the user asked about that part)
                        r.basis = "text" if rule.fix_class in named else "context"
                    recs.append(r)
            except ODD_VALUE as e:
                if warnings is not None:
                    warnings.append(f"rule {rule.id} {rule.name} skipped: a server argument has an unexpected value "
                                    f"({type(e).__name__}: {str(e)[:120]})")
    signal_map = {s.id: s for s in signals}
    for m in select(matches):
        fr = from_finding(m, ev, engine, catalog, base, signal_map)
        if not _merge_into(recs, fr, m):
            recs.append(fr)
    _resolve_conflicts(recs)
    # a reminder (a check with no symptom behind it) ranks after every proposal this run's
    # symptoms or its own facts support, whatever gain its class's findings measured elsewhere
    # within the text tier the closest words come first: a measured gain elsewhere does not make
    # a finding the run's words resemble less the better explanation of them
    words = {m.finding.id: m.wording for m in matches}

    def wording(r: Recommendation) -> float:
        own = NAMED_BONUS if r.fix_class in named else 0.0  # a rule's check of the part the user names
        return max([words.get(c.id, 0.0) for c in r.findings] + [own])

    recs.sort(key=lambda r: (TIERS[r.basis], -wording(r) if r.basis == "text" else 0.0, -r.score))
    for i, r in enumerate(recs, 1):
        r.rank = i
    return recs


TIERS = {"symptom": 0, "text": 1, "context": 2, "reminder": 3}
TEXT_MIN = 0.5  # text similarity (rank-based, 1.0 for the best hit) for a finding to be proposed on words alone
MAX_FROM_FINDINGS = 6
MAX_CITED = 4  # findings cited by one recommendation  # finding-only proposals per run: past these, the rest are noise


def select(matches: list[Match]) -> list[Match]:
    """Matches that make a proposal: a matched symptom; or words close to the finding's;
    or a context check: every written context condition held, two or more of them
    specific (three when the finding also names a symptom this run does not show)."""
    out = []
    for m in matches:
        f = m.finding
        if m.excluded or f.kind != "finding" or not f.fix_classes or not (f.fix or f.commands):
            continue
        specific = len(m.specific_held)
        context = len(m.context_held) == len(m.context_written) and specific >= (3 if m.evidence_written else 2)
        if m.symptom or m.wording >= TEXT_MIN or context:
            out.append(m)
    # the cut keeps what would rank first: by the order recommend() ranks in, not by the match
    # score (where a context check with many held conditions outscores the run's closest words)
    out.sort(key=lambda m: (TIERS[_basis(m)], -m.wording if _basis(m) == "text" else 0.0, -m.score))
    return out[:MAX_FROM_FINDINGS]


def _basis(m: Match) -> str:
    return "symptom" if m.symptom else "text" if m.wording >= TEXT_MIN else "context"


def from_finding(m: Match, ev: RunEvidence, engine: str | None, catalog: Catalog | None,
                 base: launchcmd.Current | None,
                 signals: dict[str, Signal]) -> Recommendation:
    """A finding's fix applied to this run: flag changes as a diff of the launch command,
    checked against this engine version; its other commands; its gain when close."""
    f = m.finding
    notes: list[str] = []
    flags: list[FlagDiff] = []
    commands: list[str] = []
    env: dict[str, str | None] = {}
    if engine and catalog:
        changes, notes = fixflags.for_version(
            f, engine, catalog, lambda fl: ev.arg(fl, (catalog.flags.get(fl) or {}).get("dest") or fl))
        for flag, value, written in changes:
            info = catalog.flags.get(flag) or {}
            flags.append(FlagDiff(flag=flag, current=ev.arg(flag, info.get("dest") or flag), new=value,
                                  why=f"from finding {f.id}" + (f" (written {written})" if written != flag else "")))
        env, env_notes = fixflags.env_for_version(f, engine, catalog.version)
        notes += env_notes
        if (changes or env) and base:
            argv = launchcmd.apply(base.argv, [(fl, v, catalog.spellings(fl)) for fl, v, _ in changes])
            commands.append(base.command(argv, {**ev.launch_env, **env}))
    elif fixflags.flags_of(f) or fixflags.env_of(f)[0]:
        notes.append("engine unknown: the finding's flags and environment are not checked against a version")
    extra = fixflags.extra_commands(f)
    commands += [c for c in extra if not other_engine_command(c, engine)]
    if any(other_engine_command(c, engine) for c in extra):
        notes.append(f"left out the finding's commands for {f.context.engine or 'another engine'}: "
                     f"this run is {engine}")
    basis = _basis(m)
    close = m.closeness >= COVERS
    if basis == "symptom":
        logs = any(c.condition.key in ("log", "log regex") for c in m.hits)
        severity = "severe" if logs else signal_severity(m, signals)
        if all(c.condition.key == "signal" for c in m.hits):
            # a signal has many causes: a rule reading the same signal computes exact values,
            # a finding matched by it alone counts by how specifically its context held
            conf = 0.3 + 0.1 * min(len(m.specific_held), 3) + 0.1 * close
        else:
            conf = 0.5 + 0.1 * min(len(m.hits), 3) + 0.2 * m.text + 0.1 * close
    elif basis == "text":
        severity, conf = "moderate", 0.2 + 0.3 * m.text + 0.1 * close
    else:
        severity, conf = "low", 0.2 + 0.2 * m.closeness
    conf = round(min(conf, 0.95), 2)
    g = f.best_gain()
    ratio = round(g.ratio(), 3) if g and g.ratio() and close else None
    expected = f"{g.describe()} in {f.id} (context {f.context.line() or 'unstated'})" if ratio else None
    if g and g.ratio() and not close:
        notes.append(f"{f.id} measured {g.describe()} in another context (similarity {m.closeness:.2f}): "
                     "the gain here is unmeasured")
    if not flags and not env:  # nothing to diff against this launch: the finding's own command, for reference
        notes += [f"the finding's launch command: {c}" for c in f.commands if launchcmd_like(c)][:1]
    if f.measured_on:
        notes.append(f"measured on: {f.measured_on}")
    matched = [f"{f.id}: {c.condition}" for c in m.hits] + [f"{f.id}: {c.condition}" for c in m.context_held]
    why = _short(f.root_cause or f.fix or f.title)
    if basis == "text":
        why = f"this run's words resemble finding {f.id} (text similarity {m.text:.2f}): " + why
    cited = CitedFinding(id=f.id, title=f.title, similarity=round(m.closeness, 3), gain=g.describe() if g else None,
                         ratio=round(g.ratio(), 3) if g and g.ratio() else None, context=f.context.line(),
                         source=str(f.sources[0]) if f.sources else "")
    return Recommendation(rule=f"finding {f.id}", fix_class=f.fix_classes[0], title=_short(f.fix or f.title, 120),
                          severity=severity, confidence=conf, score=_score(severity, conf, ratio),
                          expected_gain=expected, expected_ratio=ratio, commands=commands, flags=flags, env=env,
                          rationale=why, evidence=[Evidence(text=f"{c.condition}: {c.detail}") for c in m.hits],
                          findings=[cited], notes=notes, basis=basis, matched=matched)


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rsplit(" ", 1)[0] + "…"


def _opposite(r: Recommendation, fr: Recommendation) -> bool:
    """One removes a flag the other sets."""
    a = {x.flag: x.new is None for x in r.flags}
    return any(x.flag in a and a[x.flag] != (x.new is None) for x in fr.flags)


def _same_change(r: Recommendation, fr: Recommendation, f: Finding) -> bool:
    if _opposite(r, fr):
        return False
    if f.fix_classes and r.fix_class == f.fix_classes[0] and r.fix_class != "unclassified":
        return True
    return bool({x.flag for x in r.flags if x.new is not None} & {x.flag for x in fr.flags if x.new is not None})


def _merge_into(recs: list[Recommendation], fr: Recommendation, m: Match) -> bool:
    """A finding that proposes what a recommendation already proposes joins it: the
    rule's exact values stay, the finding adds its matched evidence, its other commands
    and its citation; a matched symptom lifts a context check or reminder."""
    target = next((r for r in recs if _same_change(r, fr, m.finding)), None)
    if target is None:
        return False
    cited = fr.findings[0]
    target.findings = ([cited] + [c for c in target.findings if c.id != cited.id])[:MAX_CITED]
    target.evidence += fr.evidence
    target.matched += fr.matched or [f"{cited.id}: {fr.basis} "
                                     f"({'text similarity' if fr.basis == 'text' else 'context'})"]
    have = {x.flag for x in target.flags}
    for x in fr.flags:
        if x.flag not in have:
            target.notes.append(f"finding {cited.id} also sets {x.flag}" + ("" if x.new is True else f" {x.new}"))
    for k, v in fr.env.items():
        if k not in target.env:
            target.notes.append(f"finding {cited.id} also " + (f"sets {k}={v}" if v is not None else f"unsets {k}"))
    for c in fr.commands:
        if c not in target.commands and not launchcmd_like(c):
            target.commands.append(c)
    target.notes += [n for n in fr.notes if n not in target.notes]
    if TIERS[fr.basis] < TIERS[target.basis]:
        target.basis = fr.basis
    if fr.basis in ("symptom", "text"):
        target.confidence = round(min(1.0, max(target.confidence, fr.confidence) + 0.1), 2)
    if not target.expected_gain and fr.expected_gain:
        target.expected_gain, target.expected_ratio = fr.expected_gain, fr.expected_ratio
    target.score = max(_score(target.severity, target.confidence, target.expected_ratio), fr.score)
    return True


def launchcmd_like(cmd: str) -> bool:
    return bool(fixflags.LAUNCH.search(cmd))


def _resolve_conflicts(recs: list[Recommendation]) -> None:
    """A finding whose symptom matched and that sets a flag a rule would remove (eager
    mode kept on for a version with a known CUDA-graph regression) wins: the rule's
    opposite proposal is dropped, and the finding says so."""
    for fr in [r for r in recs if r.rule.startswith("finding ") and r.basis == "symptom"]:
        sets = {x.flag for x in fr.flags if x.new is not None}
        for r in list(recs):
            if r is fr or r.rule.startswith("finding "):
                continue
            if any(x.flag in sets and x.new is None for x in r.flags):
                recs.remove(r)
                fr.notes.append(f"{r.rule} would remove {', '.join(sorted(sets))}; this finding's conditions hold "
                                "for this run, so that proposal is withdrawn")


def combined_changes(recs: list[Recommendation]) -> tuple[list, dict[str, str | None], list[str]]:
    """The flag and environment changes of every recommendation that is not low severity,
    best-ranked first. Where two of them set the same flag or variable differently the
    better-ranked value is kept (they come ranked) and the disagreement is said, not
    resolved silently by whichever came last."""
    flags: dict[str, tuple[object, str]] = {}
    env: dict[str, tuple[str | None, str]] = {}
    conflicts: list[str] = []
    for r in (r for r in recs if r.severity != "low"):
        for f in r.flags:
            if f.flag in flags and flags[f.flag][0] != f.new:
                conflicts.append(_disagree(f.flag, flags[f.flag], (f.new, r.title)))
            flags.setdefault(f.flag, (f.new, r.title))
        for k, v in r.env.items():
            if k in env and env[k][0] != v:
                conflicts.append(_disagree(k, env[k], (v, r.title)))
            env.setdefault(k, (v, r.title))
    return ([(k, v) for k, (v, _) in flags.items()], {k: v for k, (v, _) in env.items()}, conflicts)


def _disagree(name: str, kept: tuple, other: tuple) -> str:
    def shown(v: object) -> str:
        return "removed" if v is None else "on" if v is True else str(v)
    return (f"{name}: '{kept[1]}' sets it {shown(kept[0])}, '{other[1]}' sets it {shown(other[0])}; "
            f"the combined command keeps {shown(kept[0])} (the better-ranked)")


def combined_command(ev: RunEvidence, engine: str | None, catalog: Catalog | None,
                     recs: list[Recommendation]) -> str | None:
    """Every flag change together, as one launch command."""
    if not engine or not catalog:
        return None
    flags, env, _ = combined_changes(recs)
    if not flags and not env:
        return None
    changes = [(flag, new, catalog.spellings(flag)) for flag, new in flags]
    base = launchcmd.current(ev, engine, catalog)
    return base.command(launchcmd.apply(base.argv, changes), {**ev.launch_env, **env})
