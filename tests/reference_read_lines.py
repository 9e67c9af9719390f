"""The line-by-line reader ingest.run used before ingest/logscan.py (kept verbatim as
the reference the fast reader must equal: tests/test_logscan.py). Every line, decoded
with universal newlines, to every line parser (stats lines to the log parsers only)."""

from __future__ import annotations

from pathlib import Path

from ingest.run import STATS_MARKERS, _line_parsers
from kb.records import Hardware
from kb.textfile import lines


def read_lines_reference(p: Path) -> tuple[list, list[str]]:
    parsers = _line_parsers(str(p))
    logs = [x for x in parsers if x.kind in ("sglang-log", "vllm-log")]
    with open(p, encoding="utf-8", errors="replace", newline=None) as fh:
        for n, line in enumerate(lines(fh), 1):
            for parser in (logs if any(m in line for m in STATS_MARKERS) else parsers):
                parser.feed(n, line)
    records, kinds = [], []
    hw = []
    for parser in parsers:
        found = parser.results()
        if not found:
            continue
        kinds.append(parser.kind)
        if found and isinstance(found[0], Hardware):
            hw += found
        else:
            records += found
    if hw:
        from ingest.nvidia_smi import merge_hardware

        records.append(merge_hardware(hw))
    return records, kinds
