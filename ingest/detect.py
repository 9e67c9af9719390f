"""Which reader handles a file: findings markdown (into the index) or run evidence
(benchmarks, logs, configs, nvidia-smi; read by ingest.run). Decided by content;
a `.md` name only settles the markdown case for a file with a single heading, and a
file of nothing but headings and result tables (a sweep script's output) is evidence."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

from kb.records import Finding
from kb.textfile import SNIFF_BYTES

# A markdown heading; not a Prometheus exposition comment (`# HELP`, `# TYPE`: a saved
# /metrics page) nor a banner comment in a capture (`# --- decode worker ---`)
_HEADING = re.compile(rb"^#{1,6} (?!(?:HELP|TYPE|UNIT|EOF)\b|[-=*~#]{2})\S", re.M)
_FENCE = re.compile(rb"^(```|~~~).*?^(```|~~~)", re.M | re.S)


def is_findings(p: Path) -> bool:
    try:
        with open(p, "rb") as fh:
            head = fh.read(4 * SNIFF_BYTES)
    except OSError:
        return p.suffix.lower() in (".md", ".markdown")
    if _results_only(head):
        return False  # a sweep script's markdown results (headings and tables only): run evidence
    if p.suffix.lower() in (".md", ".markdown"):
        return True
    if b"\x00" in head or head.lstrip()[:1] in (b"{", b"["):
        return False
    return len(_HEADING.findall(_FENCE.sub(b"", head))) >= 2


def _results_only(head: bytes) -> bool:
    """A whole small file that a run format claims as its own output (ingest.formats)."""
    if b"|" not in head or len(head) >= 4 * SNIFF_BYTES:  # every such claim is a table, of a small file
        return False
    from ingest.formats import FORMATS

    text = head.decode("utf-8", errors="replace")
    return any(f.markdown(text) for f in FORMATS if f.markdown)


def split_paths(paths: list[Path], exclude: Callable[[Path], str | None] | None = None
                ) -> tuple[list[Path], list[Path], list[tuple[Path, str]]]:
    """(findings files, run-evidence files, skipped with why) for files and directories.
    `exclude` says why a file is left out (the caller's knowledge, e.g. the shipped
    findings' source documents), or None."""
    from ingest.run import walk

    findings, evidence, skipped = [], [], []
    for p, why in walk(paths):
        if not why and p.name == "FORMAT.md":
            continue
        why = why or (exclude(p) if exclude else None)
        if why:
            skipped.append((p, why))
        elif is_findings(p):
            findings.append(p)
        else:
            evidence.append(p)
    return findings, evidence, skipped


def load_findings(path: Path, shown: str) -> list[Finding]:
    from ingest.markdown import read_findings

    return read_findings(path, shown)
