"""The two shapes an input-format module takes.

Text formats are read line by line in one streaming pass (a 1 GB log must not
need 1 GB of RAM, and one terminal capture may hold a launch command, start-up
lines, Decode batch lines and a benchmark block): each `LineParser` is fed every
line and keeps only what it recognises, in bounded memory.

JSON formats receive the decoded document (or each JSONL line) and return records,
or None when the document is not theirs.

Every reader class has one line in ingest/formats.py, the table that detection, the
fuzzer and the sample tests read.
"""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import BaseModel


class LineParser(Protocol):
    kind: str  # e.g. "sglang-bench-text", "sglang-log"

    def __init__(self, path: str) -> None: ...

    def feed(self, lineno: int, line: str) -> None:
        """One line (without its newline), numbered from 1."""

    def results(self) -> list[BaseModel]:
        """Records found so far; empty when the input held nothing of this kind."""


class JsonReader(Protocol):
    kind: str

    def read(self, doc: Any, path: str, line: int | None) -> list[BaseModel] | None:
        """Records from one JSON document (`line` is set for JSONL), or None if not this format
        (an empty list: this format's, but read with another file: ingest/formats.py `companion`)."""
