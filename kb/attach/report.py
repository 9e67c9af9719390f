"""The text `kb attach` prints: what was written where, the finding's key lines, its
gains and the warnings."""

from __future__ import annotations

from kb.attach.writer import AttachResult


def report(res: AttachResult) -> str:
    f = res.finding
    if res.action == "duplicate":
        head = f"duplicate: {res.id} (in {res.path}) already records this fix in this context; nothing written"
    else:
        head = f"{res.action} {res.id} {'to' if res.action == 'written' else 'in'} {res.path}"
    out = [head, f"  title       {f.title}", f"  context     {f.context.line() or 'unknown'}",
           f"  fix         {f.fix}", f"  fix classes {', '.join(f.fix_classes)}", f"  confidence  {f.confidence}"]
    out += [f"  command     {c}" for c in f.commands]
    if f.gains:
        out.append("  gains")
        out += [f"    {g.describe()}" + (f"  [{g.runs} run{'s' * (g.runs != 1)} per side]" if g.runs else "")
                for g in f.gains]
    out += [f"warning: {w}" for w in res.warnings]
    return "\n".join(out)
