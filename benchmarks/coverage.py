"""How much knowledge kb ships, per fix class, per engine and per GPU architecture.

    .venv/bin/python benchmarks/coverage.py [FINDINGS_DIR]

Prints markdown tables (the "Knowledge coverage" section of docs/PERFORMANCE.md is this
output). A finding counts once under each of its fix classes; its GPU architecture is the
`GPU arch` field, else the one kb.hardware knows for its `GPU`, else "(none named)".
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from ingest.markdown import read_findings
from kb.hardware import gpu_arch
from kb.store import findings_files, shipped_findings_dir
from kb.vocab import FIX_CLASSES

NONE = "(none named)"


def load(directory: Path):
    return [f for p in findings_files(directory) for f in read_findings(p) if f.kind == "finding"]


def table(title: str, counts: Counter, order: list[str] | None = None) -> str:
    keys = order if order is not None else sorted(counts, key=lambda k: (-counts[k], k))
    rows = [f"| {title} | findings |", "|---|---|"]
    rows += [f"| {k} | {counts.get(k, 0)} |" for k in keys]
    return "\n".join(rows)


def arch_of(f) -> str:
    """`GPU arch` as written, else looked up from `GPU`; SM names upper-cased (a finding may
    write `sm90`), gfx names kept as AMD writes them."""
    arch = f.context.gpu_arch or gpu_arch(f.context.gpu)
    if not arch:
        return NONE
    return arch.upper() if arch.lower().startswith("sm") else arch


def coverage(findings) -> str:
    by_class = Counter(c for f in findings for c in set(f.fix_classes))
    by_engine = Counter(f.context.engine or NONE for f in findings)
    by_arch = Counter(arch_of(f) for f in findings)
    empty = [c for c in FIX_CLASSES if not by_class.get(c)]
    parts = [
        f"{len(findings)} findings; {len(FIX_CLASSES) - len(empty)} of {len(FIX_CLASSES)} fix classes covered"
        + (f" (none yet: {', '.join(empty)})" if empty else "") + ".",
        table("fix class", by_class, sorted(FIX_CLASSES, key=lambda k: (-by_class.get(k, 0), k))),
        table("engine", by_engine),
        table("GPU arch", by_arch),
    ]
    return "\n\n".join(parts)


def main(argv: list[str]) -> int:
    directory = Path(argv[0]) if argv else shipped_findings_dir()
    if directory is None or not directory.is_dir():
        print(f"coverage: no findings directory at {directory}", file=sys.stderr)
        return 2
    print(coverage(load(directory)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
