"""Free-form note sections, read generously: commands from code blocks and
command-looking inline code, gains from arrows / `4.25x` / `+44%` / before-after tables,
context from mentions, log lines it quotes as conditions. Nothing is dropped: what
cannot be classified becomes a `note`."""

from __future__ import annotations

import re

from ingest import gains as gain_text
from ingest.md_sections import Section, field_of
from kb import vocab
from kb.conditions import log_condition, quoted_log_lines
from kb.engineversion import version_in
from kb.hardware import lookup_gpu
from kb.records import Condition, Context, Finding, Source

# how engineers label the same things in free-form notes
LOOSE_LABELS = {
    "symptom": "symptoms", "symptoms": "symptoms", "problem": "symptoms", "issue": "symptoms",
    "observed": "symptoms", "cause": "root_cause", "root cause": "root_cause", "why": "root_cause",
    "diagnosis": "root_cause", "fix": "fix", "fixes": "fix", "solution": "fix", "workaround": "fix",
    "resolution": "fix", "action": "fix", "source": "sources", "sources": "sources", "ref": "sources",
    "refs": "sources", "see": "sources", "result": "result", "results": "result", "outcome": "result",
}


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


def context_from(text: str) -> dict:
    ctx: dict = {}
    engines = vocab.engines_in(text)
    if len(engines) == 1:
        ctx["engine"] = engines[0]
    hit = version_in(text, ctx.get("engine"))  # the one engine named: only its version
    if hit:
        ctx.setdefault("engine", hit[0])
        ctx["engine_version"] = hit[1]
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
    found: list[str] = []
    for block in blocks:
        for ln in block.splitlines():
            if _LOG_LEVEL.search(ln):
                msg = _stable_part(log_message(ln))
                if len(msg) >= 12 and msg not in found:
                    found.append(msg[:300])
    for t in texts:
        found += [q for q in quoted_log_lines(t) if q not in found]
    return [log_condition(q) for q in found[:MAX_INFERRED_LOGS]]


def slug(text: str, limit: int = 48) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return s[:limit].strip("-") or "section"


def freeform(sec: Section, path: str, stem: str) -> Finding:
    commands, other_blocks = _command_blocks(sec)
    labelled: dict[str, list[str]] = {}
    texts: list[str] = []
    for item in sec.items:
        f = field_of(item)
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

    symptoms = labelled.get("symptoms") or [t for t in texts if SYMPTOM_WORDS.search(t)
                                            and not CAUSE_WORDS.search(t)][:3]
    root = labelled.get("root_cause") or [t for t in texts if CAUSE_WORDS.search(t)][:2]
    fix = labelled.get("fix") or [t for t in texts if FIX_WORDS.search(t) and t not in symptoms and t not in root][:3]
    sources = [Source(path=path, line_start=sec.line_start, line_end=sec.line_end)]
    for s in labelled.get("sources", []):
        sources.extend(Source(url=u) for u in re.findall(r"https?://\S+", s))
    sources.extend(Source(url=u.rstrip(").,")) for u in re.findall(r"https?://[^\s)>\]]+", all_text)
                   if Source(url=u.rstrip(").,")) not in sources)

    ctx: dict = {}
    for parent in sec.parents:  # a heading's context holds for the sections below it
        ctx.update(context_from("\n".join([parent.title, *(i.text for i in parent.items)])))
    ctx.update(context_from(all_text))
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
