"""Canonical finding sections (a `- **ID:** ...` field present), read strictly as
findings/FORMAT.md documents them: a malformed value is an InputError naming the line."""

from __future__ import annotations

import math
import re

from ingest.md_sections import Item, Section, field_of
from kb.conditions import parse
from kb.errors import InputError
from kb.records import Condition, Context, Finding, Gain, Source

# canonical label → attribute
LABELS = {
    "id": "id", "symptoms": "symptoms", "engine": "engine", "engine version": "engine_version",
    "gpu": "gpu", "gpu arch": "gpu_arch", "gpu count": "gpu_count", "interconnect": "interconnect",
    "model": "model", "model family": "model_family", "parameters": "params_b", "experts": "experts",
    "experts per token": "experts_per_token", "expert intermediate size": "expert_intermediate_size",
    "quantization": "quantization", "root cause": "root_cause", "fix": "fix",
    "fix classes": "fix_classes", "confidence": "confidence", "sources": "sources", "tags": "tags",
    "measured on": "measured_on",
}
APPLIES_WHEN = "applies when"
CONTEXT_INT = {"gpu_count", "experts", "experts_per_token", "expert_intermediate_size"}
CONTEXT_STR = {"engine", "engine_version", "gpu", "gpu_arch", "interconnect", "model", "model_family", "quantization"}
GAIN_HEADER = ["metric", "before", "after", "unit", "concurrency", "runs"]


def _split(value: str, sep: str) -> list[str]:
    return [v.strip() for v in value.split(sep) if v.strip()]


def _int(path: str, line: int, label: str, value: str) -> int:
    try:
        return int(value.replace(",", ""))
    except ValueError:
        raise InputError(path, f"field {label!r}: expected a whole number, got {value!r}", line) from None


def _params(path: str, line: int, value: str) -> float:
    m = re.match(r"^\s*([\d.]+)\s*([BbMmTt]?)\s*$", value)
    if not m:
        raise InputError(path, f"field 'Parameters': expected a size like 744B, got {value!r}", line)
    n = float(m.group(1))
    unit = m.group(2).upper()
    return n / 1000 if unit == "M" else n * 1000 if unit == "T" else n


def _number(path: str, line: int, column: str, cell: str) -> float | None:
    cell = cell.strip()
    if cell in ("", "-", "—"):
        return None
    try:
        v = float(cell.replace(",", ""))
    except ValueError:
        v = math.nan
    if not math.isfinite(v):
        raise InputError(path, f"gains table column {column!r}: expected a number or '-', got {cell[:40]!r}", line)
    return v


def _condition(item: Item, path: str) -> Condition:
    """One nested bullet under "Applies when": `key: value` (checked by kb.conditions)."""
    m = re.match(r"^\*{0,2}([A-Za-z][A-Za-z ]*?)\*{0,2}\s*:\*{0,2}\s*(.*)$", item.text, re.S)
    if not m:
        raise InputError(path, f"Applies when: expected a condition 'key: value' (see findings/FORMAT.md), "
                               f"got {item.text[:80]!r}", item.line)
    key, value = " ".join(m.group(1).lower().split()), " ".join(m.group(2).split())
    try:
        parse(key, value)
    except ValueError as e:
        raise InputError(path, f"Applies when: {e}", item.line) from None
    return Condition(key=key, value=value, line=item.line)


COMPUTED = re.compile(r"\s*\(computed\)\s*$", re.I)


def _metric_cell(cell: str) -> tuple[str, bool]:
    """A Metric cell ending in "(computed)" marks a gain derived by arithmetic, not measured."""
    metric = COMPUTED.sub("", cell)
    return metric, metric != cell


def canonical(sec: Section, path: str) -> Finding:
    fields: dict[str, tuple[str, int]] = {}
    extra: dict[str, str] = {}
    body: list[str] = []
    conditions: list[Condition] = []
    under: int | None = None  # depth of the "Applies when" bullet while reading its nested bullets
    for item in sec.items:
        if under is not None and item.in_list and item.depth > under:
            conditions.append(_condition(item, path))
            continue
        under = None
        f = field_of(item) if item.in_list else None
        if f and f[0] == APPLIES_WHEN:
            if f[1]:
                raise InputError(path, "Applies when: expected the conditions as nested bullets below it, "
                                       "one 'key: value' each", item.line)
            under = item.depth
            continue
        if f and f[0] in LABELS:
            fields[LABELS[f[0]]] = (f[1], item.line)
        elif f:
            extra[f[0]] = f[1]
        elif item.text.rstrip(":").lower() != "commands":
            body.append(item.text)
    ctx: dict = {}
    for attr in CONTEXT_STR:
        if attr in fields:
            ctx[attr] = fields[attr][0] or None
    for attr in CONTEXT_INT:
        if attr in fields:
            ctx[attr] = _int(path, fields[attr][1], attr, fields[attr][0])
    if "params_b" in fields:
        ctx["params_b"] = _params(path, fields["params_b"][1], fields["params_b"][0])
    confidence = "low"
    if "confidence" in fields:
        confidence = fields["confidence"][0].lower()
        if confidence not in ("low", "medium", "high"):
            raise InputError(path, f"field 'Confidence': expected low, medium or high, got {confidence!r}",
                             fields["confidence"][1])
    gains: list[Gain] = []
    for table in sec.tables:
        header = [h.lower() for h in table.header]
        if header[:3] != GAIN_HEADER[:3]:
            body.append(" | ".join(table.header))
            body.extend(" | ".join(cells) for cells, _ in table.rows)
            continue
        for cells, line in table.rows:
            if len([c for c in cells if c.strip()]) < 2:
                raise InputError(path, "gains table row: expected Metric | Before | After | Unit | Concurrency | Runs",
                                 line)
            cells = cells + [""] * (6 - len(cells))
            conc = _number(path, line, "Concurrency", cells[4])
            runs = _number(path, line, "Runs", cells[5])
            metric, computed = _metric_cell(cells[0])
            gains.append(Gain(metric=metric, computed=computed, before=_number(path, line, "Before", cells[1]),
                              after=_number(path, line, "After", cells[2]),
                              unit=cells[3].strip() or None if cells[3].strip() != "-" else None,
                              concurrency=int(conc) if conc is not None else None,
                              runs=int(runs) if runs is not None else None))
    get = lambda k: fields[k][0] if k in fields else ""  # noqa: E731
    try:
        return Finding(
            id=get("id"), title=sec.title, kind="finding",
            symptoms=_split(get("symptoms"), ";"), context=Context(**ctx),
            root_cause=get("root_cause") or None, fix=get("fix") or None,
            fix_classes=_split(get("fix_classes"), ","),
            commands=[content for _, content, _ in sec.fences],
            gains=gains, sources=[Source.parse(s) for s in _split(get("sources"), ",")],
            confidence=confidence, tags=_split(get("tags"), ","), extra=extra,
            body="\n".join(body), applies_when=conditions, measured_on=get("measured_on") or None,
        )
    except ValueError as e:  # pydantic ValidationError is a ValueError
        raise InputError(path, f"section {sec.title!r}: {_first_error(e)}",
                         fields.get("id", ("", sec.line_start))[1]) from None


def _first_error(e: Exception) -> str:
    errors = getattr(e, "errors", None)
    if callable(errors):
        err = errors()[0]
        return f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}"
    return str(e)
