"""Text and JSON views of records, shared by every command that prints findings."""

from __future__ import annotations

import textwrap

from ingest.markdown import render
from kb.records import Finding
from kb.store import shipped_source_file

WIDTH = 100


def _field(label: str, text: str, indent: int = 4) -> list[str]:
    pad = " " * indent
    head = f"{pad}{label:<9}"
    return textwrap.wrap(" ".join(text.split()), WIDTH, initial_indent=head,
                         subsequent_indent=" " * len(head), break_on_hyphens=False,
                         break_long_words=False) or [head]


def finding_summary(f: Finding, rank: int | None = None, max_commands: int = 2) -> str:
    head = f"{rank}. " if rank is not None else ""
    lines = [f"{head}{f.title}  [{f.id} · {f.kind} · confidence {f.confidence}]"]
    ctx = f.context.line()
    if ctx:
        lines += _field("context", ctx)
    if f.symptoms:
        lines += _field("symptom", "; ".join(f.symptoms))
    if f.root_cause:
        lines += _field("cause", f.root_cause)
    if f.fix:
        lines += _field("fix", f.fix)
    if not (f.symptoms or f.root_cause or f.fix) and f.body:
        lines += _field("note", f.body[:400])
    for cmd in f.commands[:max_commands]:
        first, *rest = cmd.splitlines()
        lines.append(f"    {'command':<9}{first}")
        lines += [f"    {'':<9}{r}" for r in rest[:12]]
    if len(f.commands) > max_commands:
        lines.append(f"    {'':<9}(+{len(f.commands) - max_commands} more: kb show {f.id})")
    g = f.best_gain()
    if g:
        lines += _field("gain", g.describe())
    else:
        lines += _field("gain", "no measured gain recorded")
    if f.sources:
        lines += _field("source", ", ".join(str(s) for s in f.sources[:3]))
    return "\n".join(lines)


def finding_full(f: Finding) -> str:
    return render(f)


def finding_json(f: Finding) -> dict:
    d = f.model_dump(mode="json")
    d["context"]["gpu_arch"] = f.context.arch()
    d["sources"] = [str(s) for s in f.sources]
    for g, model in zip(d["gains"], f.gains, strict=True):
        g["ratio"] = round(model.ratio(), 3) if model.ratio() else None
    return d


def file_line(f: dict) -> str:
    """One line per input file: what it was recognised as and what it yielded, or why skipped."""
    return f"{f['path']}: " + (f"{f['kind']} → {f['yielded']}" if "kind" in f else f"skipped ({f['skipped']})")


def format_lines(f: dict) -> list[str]:
    """Under a file's line in `kb ingest --report`: what each format it was read as is
    (ingest/formats.py)."""
    from ingest.formats import describe

    return [f"  {k}: {d}" for k in f.get("kind", "").split(", ") if k and (d := describe(k))]


def signal_lines(s, indent: str = "", evidence: int = 4) -> list[str]:
    lines = [f"{indent}[{s.severity.upper()}] {s.id}: {s.summary}"]
    lines += [f"{indent}    · {e.text}" + (f"  ({e.where})" if e.where else "") for e in s.evidence[:evidence]]
    return lines


def source_files(f: Finding) -> list[str]:
    """Where a source that is a shipped document lies on this machine, so a cited
    `findings/stories/...:12-20` can be opened from any install."""
    out = []
    for s in f.sources:
        local = shipped_source_file(s.path) if s.path else None
        if local:
            lines = f":{s.line_start}-{s.line_end}" if s.line_start else ""
            out.append(f"source file: {local}{lines}")
    return out


def answers_json(question: str, answers: list, diag=None) -> dict:
    """`kb ask --json`: the answers, and with a run (`diag`, its diagnosis) its signals and top recommendations."""
    out: dict = {"question": question}
    if diag:
        out["run"] = {"signals": [s.model_dump(mode="json") for s in diag.signals],
                      "recommendations": [r.model_dump(mode="json") for r in diag.recommendations[:3]]}
    out["answers"] = [{"rank": i, "score": round(a.score, 3), **finding_json(a.finding)}
                      for i, a in enumerate(answers, 1)]
    return out


def answers_text(answers: list, diag=None) -> str:
    """`kb ask`: with a run, its signals and top three recommendations first; then the findings."""
    out = []
    if diag:
        out.append("This run")
        out += ["\n".join(signal_lines(s, "  ", evidence=0)) for s in diag.signals]
        out += [f"  → {r.title}  [{r.rule}]" + (f"\n    $ {r.commands[0]}" if r.commands else "")
                for r in diag.recommendations[:3]]
        out.append("\nPast findings")
    if not answers:
        out.append("no finding matches that question")
    else:
        out.append("\n\n".join(finding_summary(a.finding, i) for i, a in enumerate(answers, 1)))
    return "\n".join(out)
