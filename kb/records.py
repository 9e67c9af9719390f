"""Pydantic records: the one shape every part of kb agrees on.

Findings are knowledge (from markdown); BenchRun, ServerTrace, ModelProfile and
Hardware are evidence from this run; Signal and Recommendation are what kb derives.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from kb.hardware import gpu_arch

Confidence = Literal["low", "medium", "high"]

LOWER_IS_BETTER_UNITS = {"ms", "s", "sec", "seconds", "us"}
LOWER_IS_BETTER_METRICS = ("ttft", "tpot", "itl", "latency", "e2e")


class Context(BaseModel):
    """Where a finding was measured: engine, hardware and model."""

    engine: str | None = None
    engine_version: str | None = None
    gpu: str | None = None
    gpu_arch: str | None = None
    gpu_count: int | None = None
    interconnect: str | None = None
    model: str | None = None
    model_family: str | None = None
    params_b: float | None = None  # total parameters, billions
    experts: int | None = None
    experts_per_token: int | None = None
    expert_intermediate_size: int | None = None
    quantization: str | None = None

    def arch(self) -> str | None:
        """Explicit architecture, else the one the GPU table gives."""
        return self.gpu_arch or gpu_arch(self.gpu)

    def is_empty(self) -> bool:
        return not any(v is not None for v in self.model_dump().values())


class Gain(BaseModel):
    metric: str
    before: float | None = None
    after: float | None = None
    unit: str | None = None
    concurrency: int | None = None
    runs: int | None = None

    def lower_is_better(self) -> bool:
        unit = (self.unit or "").lower()
        metric = self.metric.lower()
        return unit in LOWER_IS_BETTER_UNITS or any(w in metric for w in LOWER_IS_BETTER_METRICS)

    def ratio(self) -> float | None:
        """Improvement factor (>1 is better), whichever direction the metric runs."""
        if not self.before or not self.after:
            return None
        r = self.after / self.before
        return 1 / r if self.lower_is_better() else r

    def describe(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        at = f" at {self.concurrency} concurrency" if self.concurrency else ""
        if self.before is not None and self.after is not None:
            r = self.ratio()
            x = f" ({r:.2f}x)" if r else ""
            return f"{self.metric}: {_num(self.before)} → {_num(self.after)}{unit}{at}{x}"
        val = self.after if self.after is not None else self.before
        return f"{self.metric}: {_num(val)}{unit}{at}" if val is not None else self.metric


def _num(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{int(v):,}" if float(v).is_integer() else f"{v:,.2f}".rstrip("0").rstrip(".")


class Source(BaseModel):
    """A URL, or a file with a line range."""

    url: str | None = None
    path: str | None = None
    line_start: int | None = None
    line_end: int | None = None

    def __str__(self) -> str:
        if self.url:
            return self.url
        if self.line_start:
            end = f"-{self.line_end}" if self.line_end and self.line_end != self.line_start else ""
            return f"{self.path}:{self.line_start}{end}"
        return self.path or ""

    @classmethod
    def parse(cls, text: str) -> "Source":
        text = text.strip()
        if re.match(r"^[a-z][a-z0-9+.-]*://", text, re.I):
            return cls(url=text)
        m = re.match(r"^(.*?):(\d+)(?:-(\d+))?$", text)
        if m:
            return cls(path=m.group(1), line_start=int(m.group(2)),
                       line_end=int(m.group(3)) if m.group(3) else int(m.group(2)))
        return cls(path=text)


SLUG = re.compile(r"^[a-z0-9][a-z0-9-]*$")


class Finding(BaseModel):
    """One thing we learned. `kind` is 'finding' for a complete record, 'note' for a
    section that could not be classified (kept searchable with its source lines)."""

    id: str
    title: str
    kind: Literal["finding", "note"] = "finding"
    symptoms: list[str] = Field(default_factory=list)
    context: Context = Field(default_factory=Context)
    root_cause: str | None = None
    fix: str | None = None
    fix_classes: list[str] = Field(default_factory=list)
    commands: list[str] = Field(default_factory=list)
    gains: list[Gain] = Field(default_factory=list)
    sources: list[Source] = Field(default_factory=list)
    confidence: Confidence = "low"
    tags: list[str] = Field(default_factory=list)
    extra: dict[str, str] = Field(default_factory=dict)
    body: str = ""  # the section's remaining prose, searchable

    @field_validator("id")
    @classmethod
    def _slug(cls, v: str) -> str:
        if not SLUG.match(v):
            raise ValueError(f"id {v!r} is not a slug ([a-z0-9-]+)")
        return v

    def best_gain(self) -> Gain | None:
        rated = [g for g in self.gains if g.ratio()]
        return max(rated, key=lambda g: g.ratio()) if rated else (self.gains[0] if self.gains else None)

    def missing_fields(self) -> list[str]:
        """Fields a complete finding has and this one lacks (for `kb ingest --report`)."""
        missing = []
        for name in ("symptoms", "root_cause", "fix", "fix_classes", "commands", "gains", "sources"):
            if not getattr(self, name):
                missing.append(name)
        if self.context.is_empty():
            missing.append("context")
        return missing
