"""`kb diagnose`: evidence → signals → ranked recommendations, and their report."""

from __future__ import annotations

from dataclasses import dataclass, field

from kb.errors import NotFoundError
from kb.evidence import RunEvidence
from kb.flags import Catalog, catalog
from kb.match import Match, Search, match_all
from kb.model_lookup import fill_model
from kb.recommend import TEXT_MIN, combined_changes, combined_command, recommend
from kb.records import Finding, Recommendation, Signal
from kb.render import file_line, signal_lines
from kb.rules import registry
from kb.rules.base import RuleContext
from kb.signals import detect


@dataclass
class Diagnosis:
    ev: RunEvidence
    engine: str | None
    catalog: Catalog | None
    signals: list[Signal]
    recommendations: list[Recommendation]
    combined: str | None
    warnings: list[str] = field(default_factory=list)
    matches: list[Match] = field(default_factory=list)  # every finding checked, for --why

    def to_json(self) -> dict:
        ev = self.ev
        return {
            "engine": self.engine, "engine_version": ev.engine_version,
            "flag_catalog": f"{self.catalog.engine} {self.catalog.version}" if self.catalog else None,
            "model": ev.model.model_dump(mode="json") if ev.model else None,
            "model_config": next((f["model_config"] for f in ev.files if "model_config" in f), None),
            "hardware": ev.hardware.model_dump(mode="json") if ev.hardware else None,
            "server_args": ev.server_args, "files": ev.files,
            "curve": [p.model_dump(mode="json", exclude={"sources"}) for p in ev.curve()],
            "signals": [s.model_dump(mode="json") for s in self.signals],
            "recommendations": [r.model_dump(mode="json") for r in self.recommendations],
            "combined_command": self.combined, "warnings": self.warnings,
        }


def diagnose(ev: RunEvidence, findings: list[Finding], thresholds: dict | None = None,
             search: Search | None = None) -> Diagnosis:
    """Signals, the computed rules and every finding whose conditions hold, ranked.
    `search` (text → [(finding, score)], the index `kb ask` uses) gives text similarity."""
    fill_model(ev)  # a model named by repo id only: its config from the hub cache or kb's copies
    signals = detect(ev, thresholds)
    warnings = list(ev.warnings)
    engine = ev.engine
    cat = None
    if not engine:
        warnings.append("engine unknown (no launch command, server log or --engine): no launch command can be written")
    else:
        cat = catalog(engine, ev.engine_version,
                      flags=[w.split("=", 1)[0] for w in ev.launch_argv if w.startswith("--")])
        if cat.note():
            warnings.append(cat.note())
        elif not ev.engine_version:
            warnings.append(f"{engine} version unknown: flags checked against {engine} {cat.version}, the newest "
                            "catalog")
    matches = match_all(ev, engine, cat, signals, findings, search)
    recs = recommend(ev, signals, engine, cat, findings, warnings, matches, thresholds)
    warnings += [f"recommendations disagree on {c}" for c in combined_changes(recs)[2]]
    return Diagnosis(ev, engine, cat, signals, recs, combined_command(ev, engine, cat, recs), warnings, matches)


# ------------------------------------------------------------------ text report


def _opt(v, fmt: str) -> str:
    width = int(fmt.split(",")[0])
    return format(v, fmt) if v is not None else "-".rjust(width)


def model_line(ev: RunEvidence) -> str:
    m = ev.model
    if not m:
        return "model unknown"
    bits = [m.name or m.architecture or "model"]
    if m.is_moe:
        bits.append(f"MoE {m.experts}×top-{m.experts_per_token}, expert N {m.expert_intermediate_size}")
    if m.attention:
        bits.append(m.attention)
    if m.quantization:
        bits.append(m.quantization)
    return ", ".join(bits)


def hw_line(ev: RunEvidence) -> str:
    hw = ev.hardware
    if not hw:
        return "hardware unknown"
    s = f"{hw.count}x {hw.gpu}" + (f" ({hw.arch})" if hw.arch else "")
    if hw.interconnect:
        s += f", {hw.interconnect}"
    if hw.numa_nodes:
        s += f", {hw.numa_nodes} NUMA nodes"
    return s


def report(d: Diagnosis) -> str:
    ev = d.ev
    out = [f"kb diagnose — {d.engine or 'engine?'} {ev.engine_version or ''}".rstrip()
           + f" · {model_line(ev)} · {hw_line(ev)}", ""]
    out.append("Files")
    for f in ev.files:
        out.append("  " + file_line(f))
    pts = ev.curve()
    if pts:
        out += ["", "Throughput curve",
                f"  {'load':>8}  {'total tok/s':>12}  {'output tok/s':>12}  {'TTFT p50 ms':>11}  runs"]
        for p in pts:
            out.append(f"  {p.level:>8g}  {p.throughput:>12,.1f}  {_opt(p.output_throughput, '12,.1f')}  "
                       f"{_opt(p.ttft_median_ms, '11,.0f')}  {p.runs}")
    out += ["", "Signals"]
    if not d.signals:
        out.append("  none: nothing in this evidence looks wrong")
    for s in d.signals:
        out += signal_lines(s, "  ")
    out += ["", "Recommendations"]
    if not d.recommendations:
        out.append("  none")
    for r in d.recommendations:
        out.append(f"  {r.rank}. {r.title}  [{r.rule} · {r.severity} · confidence {r.confidence:.2f} · {r.basis}]")
        out.append(f"     why: {r.rationale}")
        for m in r.matched[:4]:
            out.append(f"     matched: {m}")
        for f in r.flags:
            cur = "(unset)" if f.current is None else f.current
            new = "(remove)" if f.new is None else ("(on)" if f.new is True else f.new)
            out.append(f"     flag: {f.flag} {cur} → {new}: {f.why}")
        for c in r.commands:
            out.append(f"     $ {c}")
        out.append(f"     expected gain: {r.expected_gain or 'unmeasured for this context'}")
        for c in r.findings:
            out.append(f"     finding: {c.id} (similarity {c.similarity:.2f}): {c.gain or 'no measured gain'} — "
                       f"{c.source}")
        for n in r.notes:
            out.append(f"     note: {n}")
    if d.combined:
        out += ["", "All changes together (low-severity ones left out)", f"  $ {d.combined}"]
    for w in d.warnings:
        out.append(f"warning: {w}")
    return "\n".join(out)


# ------------------------------------------------------------------ --why


def why(d: Diagnosis, ident: str) -> dict:
    """Why a rule (id or name) or a finding (id) was or was not recommended for this run:
    each condition held / unknown / failed with what the run showed."""
    rec = next((r for r in d.recommendations if r.rule.split()[0] == ident or r.rule.endswith(f" {ident}")
                or any(c.id == ident for c in r.findings[:1]) or any(m.startswith(f"{ident}:") for m in r.matched)),
                None)
    rule = registry.get(ident)
    if rule:
        return _why_rule(d, rule, rec)
    m = next((x for x in d.matches if x.finding.id == ident), None)
    if m is None:
        raise NotFoundError(f"no rule or finding with id {ident!r} (rules: `kb rules`; findings: `kb ask`)")
    if rec:
        verdict = f"recommended at rank {rec.rank} ({rec.rule}, {rec.basis})"
    elif m.excluded:
        verdict = "excluded: " + "; ".join(f"{c.condition} ({c.detail})" for c in m.excluded)
    elif m.finding.kind != "finding" or not m.finding.fix_classes:
        verdict = "not recommended: a note without a fix class"
    else:
        held = "only a signal held, with context conditions unknown" if m.hits else "no evidence condition held"
        verdict = (f"not recommended: {held}, text similarity {m.text:.2f} (needs {TEXT_MIN}), "
                   f"and not every written context condition held")
    return {"id": m.finding.id, "kind": "finding", "title": m.finding.title,
            "fix_class": ", ".join(m.finding.fix_classes),
            "recommended": rec.rank if rec else None,
            "score": {"total": m.score, "evidence": [str(c.condition) for c in m.hits],
                      "closeness": round(m.closeness, 3),
                      "text_similarity": m.text},
            "checks": [{"condition": str(c.condition) + (" (inferred)" if c.condition.inferred else ""),
                        "state": c.state, "detail": c.detail} for c in m.checks],
            "verdict": verdict}


def _why_rule(d: Diagnosis, rule, rec: Recommendation | None) -> dict:
    """A rule's checks: the evidence it needs (held or absent), the signals it reads, its engine, its own check."""
    checks = []
    ctx = RuleContext(ev=d.ev, signals={s.id: s for s in d.signals}, engine=d.engine or "", catalog=d.catalog)
    lacking = registry.missing(rule, ctx)
    for need in rule.needs:
        what = " or ".join(registry.EVIDENCE[k][0] for k in need.split("|"))
        checks.append({"condition": f"needs: {need}", "state": "failed" if need in lacking else "held",
                       "detail": ("absent: " if need in lacking else "given: ") + what})
    detected = {s.id for s in d.signals}
    checks += [{"condition": f"reads signal: {s}", "state": "held" if s in detected else "failed",
                "detail": "detected" if s in detected else "not detected"} for s in rule.signals]
    other_engine = not d.engine or d.engine not in rule.engines
    if other_engine:
        checks.append({"condition": f"engine: {', '.join(rule.engines)}",
                       "state": "unknown" if not d.engine else "failed",
                       "detail": f"engine {d.engine or 'unknown: rules need it'}"})
    not_run = ("needed evidence absent" if lacking else "engine unknown or not the rule's" if other_engine else "")
    checks.append({"condition": f"check: {rule.reads}", "state": "held" if rec else "unknown" if not_run else "failed",
                   "detail": "the rule proposed a change" if rec else f"not run: {not_run}" if not_run
                   else "the rule's own check did not fire"})
    return {"id": rule.id, "kind": "rule", "title": rule.title, "fix_class": rule.fix_class,
            "recommended": rec.rank if rec else None, "checks": checks,
            "verdict": f"recommended at rank {rec.rank}" if rec else "not recommended"}


def why_report(w: dict) -> str:
    out = [f"{w['id']} ({w['kind']}): {w['title']}  [fix class {w['fix_class']}]"]
    if not w["checks"]:
        out.append("  no conditions: written or inferred")
    for c in w["checks"]:
        out.append(f"  {c['state']:<8} {c['condition']}  — {c['detail']}")
    if "score" in w:
        s = w["score"]
        out.append(f"  score {s['total']}: evidence {', '.join(s['evidence']) or 'none'}; closeness {s['closeness']}; "
                   f"text similarity {s['text_similarity']}")
    out.append(f"  → {w['verdict']}")
    return "\n".join(out)
