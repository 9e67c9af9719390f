"""What the user asked `kb attach` to record (the options of the command)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Request:
    """What the user asked to attach (the CLI's options)."""

    before: list[Path] = field(default_factory=list)
    after: list[Path] = field(default_factory=list)
    fix: str | None = None
    commands: list[str] = field(default_factory=list)
    title: str | None = None
    tags: list[str] = field(default_factory=list)
    fix_classes: list[str] = field(default_factory=list)
    symptoms: list[str] = field(default_factory=list)
    cause: str | None = None
    note: str | None = None
    to: Path | None = None
    update: str | None = None
    force_new: bool = False
    engine: str | None = None
    gpu: str | None = None
    config: str | None = None
