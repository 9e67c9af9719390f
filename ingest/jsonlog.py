"""Structured (JSON) log lines as the text line a plain logger would have printed.

Go and Python services log one JSON object a line (zap, as llm-d's router and endpoint
picker use: `{"level":"error","caller":"prefix/plugin.go:113","msg":"..."}`; logrus and
python-json-logger use "message"/"levelname"/"severity"). No benchmark or server reader
knows them, and a JSON line is not prose, so without this a file of them was skipped."""

from __future__ import annotations

import json

_MESSAGE = ("msg", "message")
_LEVEL = ("level", "levelname", "severity")


def as_text(line: str) -> str:
    """`LEVEL message key=value ...` for a JSON log line; any other line unchanged."""
    s = line.strip()
    if not s.startswith("{") or not s.endswith("}"):
        return line
    try:
        doc = json.loads(s)
    except (ValueError, RecursionError):
        return line
    if not isinstance(doc, dict):
        return line
    msg = next((doc[k] for k in _MESSAGE if isinstance(doc.get(k), str)), None)
    if msg is None:
        return line
    level = next((doc[k] for k in _LEVEL if isinstance(doc.get(k), str)), "")
    used = {*_MESSAGE, *_LEVEL}
    rest = [f"{k}={v}" for k, v in doc.items()
            if k not in used and isinstance(v, (str, int, float)) and not isinstance(v, bool)]
    return " ".join(filter(None, [level.upper(), msg, *rest]))
