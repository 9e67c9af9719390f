"""Finding → canonical markdown (findings/FORMAT.md): what `kb attach` writes and
`kb show` prints in full; parse_findings reads it back to the same finding."""

from __future__ import annotations

from kb.records import Finding


def _fmt_num(v: float | None) -> str:
    if v is None:
        return "-"
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def _fmt_params(v: float) -> str:
    return f"{_fmt_num(v)}B"


def render(f: Finding) -> str:
    """A finding in the canonical format (reads back to an equal record)."""
    c = f.context
    lines = [f"## {f.title}", ""]
    fields = [
        ("ID", f.id), ("Symptoms", "; ".join(f.symptoms)), ("Engine", c.engine), ("Engine version", c.engine_version),
        ("GPU", c.gpu), ("GPU arch", c.gpu_arch), ("GPU count", c.gpu_count), ("Interconnect", c.interconnect),
        ("Model", c.model), ("Model family", c.model_family),
        ("Parameters", _fmt_params(c.params_b) if c.params_b is not None else None), ("Experts", c.experts),
        ("Experts per token", c.experts_per_token), ("Expert intermediate size", c.expert_intermediate_size),
        ("Quantization", c.quantization), ("Root cause", f.root_cause), ("Fix", f.fix),
        ("Fix classes", ", ".join(f.fix_classes)), ("Confidence", f.confidence),
        ("Sources", ", ".join(str(s) for s in f.sources)), ("Tags", ", ".join(f.tags)), ("Measured on", f.measured_on),
        *f.extra.items(),
    ]
    lines += [f"- **{label}:** {value}" for label, value in fields if value not in (None, "", [])]
    if f.applies_when:
        lines.append("- **Applies when:**")
        lines += [f"  - {c.key}: {c.value}" for c in f.applies_when]
    if f.body:
        lines += ["", *[p for para in f.body.split("\n") for p in (para, "")]]
        lines.pop()
    if f.commands:
        lines += ["", "Commands:"]
        for cmd in f.commands:
            fence = "````" if "```" in cmd else "```"
            lines += ["", f"{fence}bash", cmd, fence]
    if f.gains:
        lines += ["", "| Metric | Before | After | Unit | Concurrency | Runs |", "|---|---|---|---|---|---|"]
        for g in f.gains:
            metric = f"{g.metric} (computed)" if g.computed else g.metric
            lines.append(f"| {metric} | {_fmt_num(g.before)} | {_fmt_num(g.after)} | {g.unit or '-'} | "
                         f"{g.concurrency if g.concurrency is not None else '-'} | "
                         f"{g.runs if g.runs is not None else '-'} |")
    return "\n".join(lines) + "\n"
