"""Which reader handles a file, and walking directories."""

from __future__ import annotations

from pathlib import Path

from kb.errors import InputError
from kb.records import Finding


def expand_paths(paths: list[Path]) -> list[Path]:
    """Files named, and the markdown files below directories named."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out.extend(sorted(q for q in p.rglob("*.md") if q.is_file() and q.name != "FORMAT.md"))
        elif p.exists():
            out.append(p)
        else:
            raise InputError(p, "no such file or directory")
    return out


def load_findings(path: Path, shown: str) -> list[Finding]:
    from ingest.markdown import read_findings

    return read_findings(path, shown)
