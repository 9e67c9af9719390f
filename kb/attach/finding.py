"""The finding `kb attach` writes: built from the measurement, the runs' context and
the user's words, classified, titled and redacted, before anything is written."""

from __future__ import annotations

from kb import units, vocab
from kb.attach.context import context, sources
from kb.attach.measure import measure
from kb.attach.request import Request
from kb.errors import UsageError
from kb.launchcmd import render as render_command
from kb.records import Context, Finding, Gain
from kb.redact import redact_data, redact_text


def _one_line(text: str | None) -> str:
    return " ".join((text or "").split())


UNCLASSIFIED = "unclassified"


def _fix_classes(given: list[str], flags: list[str], text: str) -> tuple[list[str], str | None]:
    """The fix classes as given; else what the changed flags name (exact), else what the text
    names; else `unclassified`: a finding is never turned away for want of a class (it is
    still searched by `kb ask`). Returns the classes and a warning when they were not given."""
    wanted = [c.strip() for g in given for c in g.split(",") if c.strip()]
    bad = [c for c in wanted if c not in vocab.FIX_CLASSES]
    if bad:
        raise UsageError(f"fix_classes: unknown fix class {', '.join(bad)}; expected one of "
                         f"{', '.join(vocab.FIX_CLASSES)}")
    if wanted:
        return wanted, None
    found = vocab.fix_classes_in(" ".join(flags))[:3] or vocab.fix_classes_in(text)[:2]
    if found:
        return found, f"fix classes inferred: {', '.join(found)} (set them with fix_classes)"
    return [UNCLASSIFIED], ("no fix class could be inferred from the fix, the commands or the changed server "
                            "arguments: "
                            f"stored as {UNCLASSIFIED} (classify it by editing its 'Fix classes' line)")


def _headline(rows: list[Gain]) -> Gain | None:
    """The gain a title quotes: the best throughput row, else the best row."""
    tput = [g for g in rows if g.metric.startswith("total throughput") and g.ratio()]
    return max(tput, key=lambda g: g.ratio()) if tput else max((g for g in rows if g.ratio()),
                                                                key=lambda g: g.ratio(), default=None)


def _title(given: str | None, fix: str, ctx: Context, head: Gain | None) -> str:
    if given:
        return _one_line(given).rstrip("#").strip()
    what = fix if len(fix) <= 80 else fix[:79].rsplit(" ", 1)[0] + "…"
    where = ", ".join(x for x in (ctx.model, f"{ctx.gpu_count}x {ctx.gpu}" if ctx.gpu else None) if x)
    return what + (f" on {where}" if where else "") + (f" — {head.describe()}" if head else "")


def _symptom(head: Gain, ctx: Context) -> str:
    at = f" at {head.concurrency} concurrency" if head.concurrency else ""
    on = f" on {ctx.model}" + (f" ({ctx.gpu_count}x {ctx.gpu})" if ctx.gpu else "") if ctx.model else ""
    return f"{head.metric} {units.quantity(head.before, head.unit)}{at}{on} before the change"


def build(req: Request) -> tuple[Finding, list[str]]:
    """The finding (id still 'pending') and the warnings, before anything is written."""
    if not (req.fix or req.title):
        raise UsageError("fix: say what changed (or give a title)")
    if req.before and not req.after:
        raise UsageError("before needs after: the run after the change")
    m = measure(req)
    ctx, missing = context(m.evs)
    warnings = [w for ev in m.evs for w in ev.warnings] + m.warnings + (missing if m.evs else [])
    if len({ev.hardware.gpu for ev in m.evs if ev.hardware}) > 1:
        warnings.append("the before and after runs name different GPUs: the gain may not be the change alone")
    head = _headline(m.gains)
    symptoms = [_one_line(s).replace(";", ",") for s in req.symptoms if s.strip()]
    if not symptoms and head and head.before is not None:
        symptoms = [_symptom(head, ctx)]
    fix = _one_line(req.fix or req.title) + (f" (changed: {', '.join(m.changes)})" if m.changes else "")
    commands = [c.strip() for c in req.commands if c.strip()]
    if not commands and m.evs and m.evs[0].launch_argv:
        commands = [render_command(m.evs[0].launch_argv, m.evs[0].launch_env)]
    classes, why = _fix_classes(req.fix_classes, [c.split()[0] for c in m.changes if c.startswith("`--")],
                                " ".join([fix, req.title or "", *commands]))
    warnings += [why] if why else []
    body = m.body + ([f"Note: {_one_line(req.note)}"] if req.note else [])
    finding = Finding(
        id="pending", title=_title(req.title, _one_line(req.fix or req.title), ctx, head),
        symptoms=symptoms, context=ctx, root_cause=_one_line(req.cause) or None, fix=fix,
        fix_classes=classes, commands=commands, gains=m.gains, sources=sources(m.evs, m.used),
        confidence=m.confidence, tags=[t.strip() for g in req.tags for t in g.split(",") if t.strip()],
        body="\n".join(body))
    # credentials never reach the file, the index or the output
    clean = Finding.model_validate(redact_data(finding.model_dump()))
    return clean, [redact_text(w) for w in warnings]
