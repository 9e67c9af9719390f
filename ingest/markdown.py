"""Markdown findings → Finding records, and Finding → canonical markdown.

Two readings of one parse (markdown-it-py tokens, with their source line maps):

- canonical sections (a `- **ID:** ...` field present) are read strictly, as
  findings/FORMAT.md documents; a malformed value is an InputError naming the line.
- any other section is read free-form: commands from code blocks and command-looking
  inline code, gains from arrows / `4.25x` / `+44%` / before-after tables, context from
  mentions. Nothing is dropped: what cannot be classified becomes a `note`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from kb import vocab
from kb.errors import InputError
from kb.hardware import lookup_gpu
from kb.records import Condition, Context, Finding, Gain, Source
from ingest import gains as gain_text
from ingest.textfile import MAX_FINDINGS_BYTES, read_text
from kb.redact import redact_data

# ---------------------------------------------------------------- parsing


@dataclass
class Item:
    """A piece of text inside a section: a paragraph or list item."""

    text: str
    line: int
    in_list: bool = False
    depth: int = 0  # list nesting: 1 for a top-level bullet, 2 for a bullet inside it


@dataclass
class Table:
    header: list[str]
    rows: list[tuple[list[str], int]]
    line: int


@dataclass
class Section:
    title: str
    level: int
    line_start: int
    line_end: int
    items: list[Item] = field(default_factory=list)
    fences: list[tuple[str, str, int]] = field(default_factory=list)  # (info, content, line)
    tables: list[Table] = field(default_factory=list)
    parents: list["Section"] = field(default_factory=list)


def _md():
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table")


def parse_sections(text: str) -> list[Section]:
    """Split a markdown document into sections (one per heading; a preface before
    the first heading is a section with level 0)."""
    tokens = _md().parse(text)
    n_lines = text.count("\n") + 1
    sections: list[Section] = []
    stack: list[Section] = []
    current = Section(title="", level=0, line_start=1, line_end=1)
    in_list = 0
    table: Table | None = None
    row: list[str] | None = None
    row_line = 0
    in_head = False
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        t = tok.type
        if t == "heading_open":
            level = int(tok.tag[1])
            title = tokens[i + 1].content.strip()
            sections.append(current)
            while stack and stack[-1].level >= level:
                stack.pop()
            current = Section(title=title, level=level, line_start=tok.map[0] + 1,
                              line_end=tok.map[1], parents=list(stack))
            stack.append(current)
            i += 3
            continue
        if tok.map:
            current.line_end = max(current.line_end, tok.map[1])
        if t in ("bullet_list_open", "ordered_list_open"):
            in_list += 1
        elif t in ("bullet_list_close", "ordered_list_close"):
            in_list -= 1
        elif t == "inline" and table is None:
            line = tok.map[0] + 1 if tok.map else current.line_start
            current.items.append(Item(tok.content.strip(), line, in_list > 0, in_list))
        elif t in ("fence", "code_block"):
            line = tok.map[0] + 1 if tok.map else current.line_start
            current.fences.append((tok.info.strip(), tok.content.rstrip("\n"), line))
        elif t == "table_open":
            table = Table(header=[], rows=[], line=tok.map[0] + 1 if tok.map else current.line_start)
        elif t == "thead_open":
            in_head = True
        elif t == "thead_close":
            in_head = False
        elif t == "tr_open":
            row, row_line = [], (tok.map[0] + 1 if tok.map else table.line)
        elif t == "inline" and table is not None:
            row.append(tok.content.strip())
        elif t == "tr_close" and table is not None:
            if in_head:
                table.header = row
            else:
                table.rows.append((row, row_line))
        elif t == "table_close":
            current.tables.append(table)
            table = None
        i += 1
    sections.append(current)
    for s in sections:
        s.line_end = min(max(s.line_end, s.line_start), n_lines)
    return [s for s in sections if s.title or s.items or s.fences or s.tables]


# ---------------------------------------------------------------- canonical fields

FIELD = re.compile(r"^\*\*(?P<label>[^*]+?):\*\*\s*(?P<value>.*)$|^\*\*(?P<label2>[^*]+?)\*\*:\s*(?P<value2>.*)$", re.S)

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
# how engineers label the same things in free-form notes
LOOSE_LABELS = {
    "symptom": "symptoms", "symptoms": "symptoms", "problem": "symptoms", "issue": "symptoms",
    "observed": "symptoms", "cause": "root_cause", "root cause": "root_cause", "why": "root_cause",
    "diagnosis": "root_cause", "fix": "fix", "fixes": "fix", "solution": "fix", "workaround": "fix",
    "resolution": "fix", "action": "fix", "source": "sources", "sources": "sources", "ref": "sources",
    "refs": "sources", "see": "sources", "result": "result", "results": "result", "outcome": "result",
}
CONTEXT_INT = {"gpu_count", "experts", "experts_per_token", "expert_intermediate_size"}
CONTEXT_STR = {"engine", "engine_version", "gpu", "gpu_arch", "interconnect", "model", "model_family", "quantization"}
GAIN_HEADER = ["metric", "before", "after", "unit", "concurrency", "runs"]


def _field(item: Item) -> tuple[str, str] | None:
    m = FIELD.match(item.text)
    if not m:
        return None
    label = (m.group("label") or m.group("label2")).strip().lower()
    value = (m.group("value") if m.group("label") else m.group("value2")) or ""
    return label, " ".join(value.split())


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
    from kb.conditions import parse

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


def _canonical(sec: Section, path: str) -> Finding:
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
        f = _field(item) if item.in_list else None
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
                raise InputError(path, "gains table row: expected Metric | Before | After | Unit | Concurrency | Runs", line)
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
        raise InputError(path, f"section {sec.title!r}: {_first_error(e)}", fields.get("id", ("", sec.line_start))[1]) from None




def _first_error(e: Exception) -> str:
    errors = getattr(e, "errors", None)
    if callable(errors):
        err = errors()[0]
        return f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}"
    return str(e)


# ---------------------------------------------------------------- free-form

COMMAND_START = re.compile(
    r"^(?:\$\s+)?(?:sudo\s+)?(?:[A-Z_][A-Z0-9_]*=\S*\s+)*"
    r"(?:python3?|vllm|sglang|export|nvidia-smi|pip3?|uv|docker|bash|sh|modprobe|torchrun|ray|"
    r"huggingface-cli|hf|guidellm|genai-perf|aiperf|lm_eval|curl|systemctl|echo|git|cd|numactl|"
    r"nsys|ncu|rocm-smi|amd-smi|kubectl|ulimit|sysctl|update-initramfs|apt(?:-get)?|"
    r"CUDA_VISIBLE_DEVICES|NCCL_\w+|SGLANG_\w+|VLLM_\w+)\b"
)
INLINE_CODE = re.compile(r"`([^`]+)`")
SYMPTOM_WORDS = re.compile(
    r"plateau|flat|slow|stuck|stall|bottleneck|saturat|stops? scaling|doesn'?t scale|not scaling|"
    r"oom|out of memory|error|crash|hang|warning|spike|queue|retract|preempt|regress|degrad|only \d|"
    r"low (?:throughput|util)|idle|0% util|fails?\b|failed", re.I)
CAUSE_WORDS = re.compile(r"because|caused by|root cause|due to|the cause|culprit|turned out|the reason", re.I)
FIX_WORDS = re.compile(r"\bfix(?:ed)?\b|solution|workaround|solved|resolved|helped|switch(?:ed)? to|"
                       r"\b(?:raise|raised|increase|increased|set|enable|enabled|use|used|added)\b", re.I)


def is_command(line: str) -> bool:
    return bool(COMMAND_START.match(line.strip()))


def _command_blocks(sec: Section) -> tuple[list[str], list[str]]:
    """Code blocks that hold commands, and the rest (outputs, configs) as text."""
    commands, other = [], []
    for info, content, _ in sec.fences:
        lines = [ln for ln in content.splitlines() if ln.strip() and not ln.strip().startswith("#")]
        starts = [ln for ln in lines if not ln.startswith((" ", "\t")) and not ln.rstrip().endswith(")")]
        cmd_lines = [ln for ln in starts if is_command(ln)]
        shell = info.lower() in ("bash", "sh", "shell", "console", "zsh")
        if lines and (cmd_lines and (shell or len(cmd_lines) * 2 >= len(starts))):
            commands.append(content.strip())
        else:
            other.append(content)
    for item in sec.items:
        for code in INLINE_CODE.findall(item.text):
            if is_command(code) and code not in commands:
                commands.append(code.strip())
    return commands, other


def _context_from(text: str) -> dict:
    ctx: dict = {}
    engines = vocab.engines_in(text)
    if len(engines) == 1:
        ctx["engine"] = engines[0]
    m = vocab.ENGINE_VERSION.search(text)
    if m and (not engines or m.group(1).lower().replace("-", "") == ctx.get("engine", m.group(1).lower())):
        ctx.setdefault("engine", m.group(1).lower().replace("-", ""))
        ctx["engine_version"] = m.group(2)
    g = vocab.GPU_MENTION.search(text)
    if g:
        spec = lookup_gpu(g.group("name"))
        ctx["gpu"] = spec.name if spec else g.group("name")
        if g.group("count"):
            ctx["gpu_count"] = int(g.group("count"))
    if "gpu_count" not in ctx:
        c = vocab.GPU_COUNT.search(text)
        if c:
            ctx["gpu_count"] = int(c.group(1))
    for name, rx in vocab.INTERCONNECTS.items():
        if re.search(rx, text, re.I):
            ctx["interconnect"] = name
            break
    mm = vocab.model_in(text)
    if mm:
        ctx["model"], ctx["model_family"] = mm
    q = vocab.quantization_in(text)
    if q:
        ctx["quantization"] = q
    return ctx


# a log line's prefix that differs between runs: sglang "[2025-01-01 12:00:00 TP0] ",
# vLLM "INFO 01-02 12:00:00 [file.py:123] ", "(EngineCore_DP0 pid=123) ", plain ISO times
_LOG_PREFIX = re.compile(
    r"^\s*(?:\([\w ]+pid=\d+\)\s*)?(?:\[[^\]]*\d{2}:\d{2}:\d{2}[^\]]*\]\s*)?"
    r"(?:(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+\d{2}-\d{2}\s+\d{2}:\d{2}:\d{2}(?:\.\d+)?\s+\[[^\]]+\]\s*)?"
    r"(?:\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}\S*\s*)?(?:(?:WARNING|ERROR|INFO|CRITICAL)\s*[:\-]?\s*)?")
_LOG_LEVEL = re.compile(r"\b(?:WARNING|WARN|ERROR|CRITICAL)\b|Traceback|Error:|Exception")
MAX_INFERRED_LOGS = 5


def log_message(line: str) -> str:
    """A log line without the time, level and process prefix that differ between runs."""
    return _LOG_PREFIX.sub("", line, count=1).strip()


_VARYING = re.compile(r"\S*(?:/|=|\d{2,})\S*")


def _stable_part(msg: str, least: int = 20) -> str:
    """The message up to its first run-specific word (a path, a `key=value`, a number
    of two digits or more), so the same warning matches in another run."""
    m = _VARYING.search(msg)
    head = msg[: m.start()].rstrip(" :,([") if m else msg
    return head if len(head) >= least else msg


def _quoted_logs(texts: list[str], blocks: list[str]) -> list[Condition]:
    """Log lines a free-form note quotes (a warning in a code block or in quotes):
    `log` conditions, so a run that prints the same line matches the note."""
    from kb.conditions import quoted_log_lines

    found: list[str] = []
    for block in blocks:
        for ln in block.splitlines():
            if _LOG_LEVEL.search(ln):
                msg = _stable_part(log_message(ln))
                if len(msg) >= 12 and msg not in found:
                    found.append(msg[:300])
    for t in texts:
        found += [q for q in quoted_log_lines(t) if q not in found]
    from kb.conditions import log_condition

    return [log_condition(q) for q in found[:MAX_INFERRED_LOGS]]


def _slug(text: str, limit: int = 48) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return s[:limit].strip("-") or "section"


def _freeform(sec: Section, path: str, stem: str) -> Finding:
    commands, other_blocks = _command_blocks(sec)
    labelled: dict[str, list[str]] = {}
    texts: list[str] = []
    for item in sec.items:
        f = _field(item)
        if f is None:
            m = re.match(r"^(\w[\w ]{0,15}):\s+(.+)$", item.text, re.S)
            if m and m.group(1).lower() in LOOSE_LABELS:
                f = (m.group(1).lower(), " ".join(m.group(2).split()))
        if f and f[0] in LOOSE_LABELS:
            labelled.setdefault(LOOSE_LABELS[f[0]], []).append(f[1])
        texts.append(item.text)
    table_texts = []
    for t in sec.tables:
        table_texts.append(" | ".join(t.header))
        table_texts.extend(" | ".join(cells) for cells, _ in t.rows)
    all_text = "\n".join([sec.title, *texts, *table_texts, *commands])

    gains = gain_text.dedupe(gain_text.from_texts([sec.title, *texts]) + gain_text.from_tables(
        [(t.header, [cells for cells, _ in t.rows]) for t in sec.tables]))

    symptoms = labelled.get("symptoms") or [t for t in texts if SYMPTOM_WORDS.search(t) and not CAUSE_WORDS.search(t)][:3]
    root = labelled.get("root_cause") or [t for t in texts if CAUSE_WORDS.search(t)][:2]
    fix = labelled.get("fix") or [t for t in texts if FIX_WORDS.search(t) and t not in symptoms and t not in root][:3]
    sources = [Source(path=path, line_start=sec.line_start, line_end=sec.line_end)]
    for s in labelled.get("sources", []):
        sources.extend(Source(url=u) for u in re.findall(r"https?://\S+", s))
    sources.extend(Source(url=u.rstrip(").,")) for u in re.findall(r"https?://[^\s)>\]]+", all_text)
                   if Source(url=u.rstrip(").,")) not in sources)

    ctx: dict = {}
    for parent in sec.parents:  # a heading's context holds for the sections below it
        ctx.update(_context_from("\n".join([parent.title, *(i.text for i in parent.items)])))
    ctx.update(_context_from(all_text))
    fix_classes = vocab.fix_classes_in(all_text)[:4]
    is_finding = bool((commands or gains) and (fix or root or fix_classes))
    body = "\n".join([*texts, *table_texts, *other_blocks])
    title = " / ".join([p.title for p in sec.parents if p.title] + [sec.title]) if sec.title else f"{stem} (preface)"
    return Finding(
        id="pending", title=title, kind="finding" if is_finding else "note",
        symptoms=[_short(s) for s in symptoms], context=Context(**ctx),
        root_cause=_short(" ".join(root)) or None, fix=_short(" ".join(fix)) or None,
        fix_classes=fix_classes, commands=commands, gains=gains, sources=sources,
        confidence="medium" if gains and is_finding else "low", body=body,
        applies_when=_quoted_logs(texts, other_blocks),
    )


def _short(text: str, limit: int = 400) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rsplit(" ", 1)[0] + "…"


# ---------------------------------------------------------------- entry points


def looks_like_markdown(text: str) -> bool:
    return bool(re.search(r"^\s{0,3}#{1,6}\s+\S", text, re.M))


def parse_findings(text: str, path: str) -> list[Finding]:
    """All records in a markdown document. `path` is how sources cite the file."""
    if not looks_like_markdown(text):
        raise InputError(path, "not markdown findings: no '#' headings found (see findings/FORMAT.md)")
    sections = parse_sections(text)
    stem = _slug(Path(path).stem, 24)
    canonical_file = any(_has_id(s) for s in sections)
    out: list[Finding] = []
    seen: set[str] = set()
    for sec in sections:
        if _has_id(sec):
            f = _canonical(sec, path)
            if f.id in seen:
                raise InputError(path, f"duplicate finding id {f.id!r}", sec.line_start)
        elif canonical_file and sec.level <= 1 and not sec.fences and not sec.tables:
            continue  # a canonical file's title and intro are not findings
        else:
            f = _freeform(sec, path, stem)
            base = f"{stem}-{_slug(sec.title or 'preface')}"
            fid, n = base, 2
            while fid in seen:
                fid, n = f"{base}-{n}", n + 1
            f = f.model_copy(update={"id": fid})
        seen.add(f.id)
        out.append(f)
    _document_model(text, out, canonical_file)
    # credentials pasted into notes (a token in a code block, a password in a URL) are
    # never stored: every record leaves here redacted
    return [Finding.model_validate(redact_data(f.model_dump())) for f in out]


# a model named with its size: Qwen3-8B, Llama-3.1-405B, Qwen3-235B-A22B, gpt-oss-120b
_MODEL_NAME = re.compile(r"\b[A-Za-z][\w.]*(?:-[A-Za-z][\w.]*)*-\d+(?:\.\d+)?[BbMm](?:-A\d+(?:\.\d+)?[Bb])?\b")


def _document_model(text: str, records: list[Finding], canonical_file: bool) -> None:
    """Notes name the model they measured once (a setup section), then write about
    "the H100 run" or "KV cache FP8": when a free-form document names one model, the
    sections that name none carry it as a tag, as a heading's context holds below it."""
    if canonical_file:
        return
    names = {m.group(0).lower(): m.group(0) for m in _MODEL_NAME.finditer(text)}
    # "Qwen3-235B" and "Qwen3-235B-A22B" are one model, named short and long
    longest = [k for k in names if not any(o != k and o.startswith(k) for o in names)]
    if len(longest) != 1:
        return
    name = names[longest[0]]
    for i, f in enumerate(records):
        own = " ".join([f.title, f.body, *f.commands])
        if not _MODEL_NAME.search(own) and name not in f.tags:
            records[i] = f.model_copy(update={"tags": [*f.tags, name]})


def finding_spans(text: str) -> dict[str, tuple[int, int]]:
    """Canonical finding id → (first line, last line) of its section, 1-based, so one
    finding can be rewritten in place and the rest of the file kept byte for byte."""
    spans = {}
    for sec in parse_sections(text):
        fid = next((f[1] for i in sec.items if i.in_list and (f := _field(i)) and f[0] == "id"), None)
        if fid:
            spans[fid] = (sec.line_start, sec.line_end)
    return spans


def _has_id(sec: Section) -> bool:
    return any((f := _field(i)) and f[0] == "id" for i in sec.items if i.in_list)


def read_findings(path: str | Path, display_path: str | None = None) -> list[Finding]:
    text = read_text(path, MAX_FINDINGS_BYTES)
    return parse_findings(text, display_path or str(path))


# ---------------------------------------------------------------- writing


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

    def add(label: str, value) -> None:
        if value not in (None, "", []):
            lines.append(f"- **{label}:** {value}")

    add("ID", f.id)
    add("Symptoms", "; ".join(f.symptoms))
    add("Engine", c.engine)
    add("Engine version", c.engine_version)
    add("GPU", c.gpu)
    add("GPU arch", c.gpu_arch)
    add("GPU count", c.gpu_count)
    add("Interconnect", c.interconnect)
    add("Model", c.model)
    add("Model family", c.model_family)
    add("Parameters", _fmt_params(c.params_b) if c.params_b is not None else None)
    add("Experts", c.experts)
    add("Experts per token", c.experts_per_token)
    add("Expert intermediate size", c.expert_intermediate_size)
    add("Quantization", c.quantization)
    add("Root cause", f.root_cause)
    add("Fix", f.fix)
    add("Fix classes", ", ".join(f.fix_classes))
    add("Confidence", f.confidence)
    add("Sources", ", ".join(str(s) for s in f.sources))
    add("Tags", ", ".join(f.tags))
    add("Measured on", f.measured_on)
    for k, v in f.extra.items():
        add(k, v)
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
                         f"{g.concurrency if g.concurrency is not None else '-'} | {g.runs if g.runs is not None else '-'} |")
    return "\n".join(lines) + "\n"
