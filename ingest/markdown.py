"""Markdown findings → Finding records, and Finding → canonical markdown.

Two readings of one parse (ingest.md_sections: markdown-it-py tokens, with their
source line maps):

- canonical sections (a `- **ID:** ...` field present) are read strictly, as
  findings/FORMAT.md documents; a malformed value is an InputError naming the line
  (ingest.findings_canonical).
- any other section is read free-form: commands from code blocks and command-looking
  inline code, gains from arrows / `4.25x` / `+44%` / before-after tables, context from
  mentions. Nothing is dropped: what cannot be classified becomes a `note`
  (ingest.findings_freeform).

Writing is ingest.findings_render.
"""

from __future__ import annotations

import re
from pathlib import Path

from ingest.findings_canonical import canonical
from ingest.findings_freeform import context_from, freeform, log_message, slug
from ingest.findings_render import render
from ingest.md_sections import Section, field_of, parse_sections
from kb.errors import InputError
from kb.records import Finding
from kb.redact import redact_data
from kb.textfile import MAX_FINDINGS_BYTES, read_text

# What other modules read from here, wherever it is defined.
__all__ = ["context_from", "finding_spans", "log_message", "looks_like_markdown", "parse_findings", "read_findings",
           "render", "slug"]


def looks_like_markdown(text: str) -> bool:
    return bool(re.search(r"^\s{0,3}#{1,6}\s+\S", text, re.M))


def parse_findings(text: str, path: str) -> list[Finding]:
    """All records in a markdown document. `path` is how sources cite the file."""
    if not looks_like_markdown(text):
        raise InputError(path, "not markdown findings: no '#' headings found (see findings/FORMAT.md)")
    sections = parse_sections(text)
    stem = slug(Path(path).stem, 24)
    canonical_file = any(_has_id(s) for s in sections)
    out: list[Finding] = []
    seen: set[str] = set()
    for sec in sections:
        if _has_id(sec):
            f = canonical(sec, path)
            if f.id in seen:
                raise InputError(path, f"duplicate finding id {f.id!r}", sec.line_start)
        elif canonical_file and sec.level <= 1 and not sec.fences and not sec.tables:
            continue  # a canonical file's title and intro are not findings
        else:
            f = freeform(sec, path, stem)
            base = f"{stem}-{slug(sec.title or 'preface')}"
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
        fid = next((f[1] for i in sec.items if i.in_list and (f := field_of(i)) and f[0] == "id"), None)
        if fid:
            spans[fid] = (sec.line_start, sec.line_end)
    return spans


def _has_id(sec: Section) -> bool:
    return any((f := field_of(i)) and f[0] == "id" for i in sec.items if i.in_list)


def read_findings(path: str | Path, display_path: str | None = None) -> list[Finding]:
    text = read_text(path, MAX_FINDINGS_BYTES)
    return parse_findings(text, display_path or str(path))
