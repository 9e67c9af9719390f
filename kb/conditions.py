"""The "Applies when" conditions of a finding (grammar in findings/FORMAT.md).

A condition is one `key: value` line. This module only reads and checks the shape of a
condition; deciding whether it holds for a run is the matcher's business. Context keys say
what the run must not contradict; evidence keys are what the run shows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

CONTEXT_KEYS = ("engine", "gpu", "gpu arch", "gpu count", "interconnect", "model", "model family",
                "experts", "quantization", "params", "context", "setting")
EVIDENCE_KEYS = ("signal", "log", "log regex", "text")
MODEL_TRAITS = ("moe", "dense", "mla", "hybrid", "multimodal")
ENGINES = ("sglang", "vllm", "trtllm", "any")

_CMP = r"(?:[<>]=?|==?|!=)"
_VERSION = r"\d+(?:\.\d+)*(?:[a-z]+\d*)?"
_ENGINE_PART = re.compile(rf"^(?:(?P<name>[a-z]+)(?:\s+{_CMP}\s*{_VERSION})?|{_CMP}\s*{_VERSION})$")
_NUMBERS = re.compile(rf"^{_CMP}?\s*\d+(?:\.\d+)?B?(?:\s*,\s*{_CMP}\s*\d+(?:\.\d+)?B?)*$")
_ARCH = re.compile(r"^(?:SM\d{2,3}[a-z]?|gfx\d{3,4}[a-z]?)$")
_SETTING = re.compile(rf"^(?P<name>[a-z0-9][a-z0-9-]*)\s+(?P<test>present|absent|{_CMP}\s*\S+|=\s*\S.*)$")
_QUOTED = re.compile(r'^"(?P<s>.+)"$')
_BACKTICKED = re.compile(r"^`(?P<s>.+)`$")


@dataclass(frozen=True)
class Condition:
    key: str
    value: str

    @property
    def evidence(self) -> bool:
        return self.key in EVIDENCE_KEYS

    def __str__(self) -> str:
        return f"{self.key}: {self.value}"


def _items(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def parse_condition(text: str) -> Condition:
    """One `key: value` line → Condition; ValueError says what was expected."""
    m = re.match(r"^(?P<key>[a-z][a-z ]*?)\s*:\s*(?P<value>.+)$", text.strip())
    if not m:
        raise ValueError(f"expected 'key: value', got {text[:60]!r}")
    key, value = m.group("key"), m.group("value").strip()
    if key not in CONTEXT_KEYS + EVIDENCE_KEYS:
        raise ValueError(f"unknown condition key {key!r} (expected one of {', '.join(CONTEXT_KEYS + EVIDENCE_KEYS)})")
    check = _CHECKS.get(key)
    if check and not check(value):
        raise ValueError(f"condition {key!r}: {_EXPECTED[key]}, got {value[:60]!r}")
    return Condition(key, value)


def _engine(v: str) -> bool:
    """`sglang`, `vllm, sglang`, `sglang >=0.5.0,<0.5.10` or one range per engine
    (`vllm >=0.10.2, sglang >=0.5.8`): comma-separated parts, each an engine name with an
    optional comparison, or a further comparison for the engine before it."""
    parts = [_ENGINE_PART.match(p) for p in _items(v)]
    if not parts or not all(parts) or not parts[0].group("name"):
        return False
    return all(m.group("name") in ENGINES for m in parts if m.group("name"))


def _regex(v: str) -> bool:
    m = _BACKTICKED.match(v)
    if not m:
        return False
    try:
        re.compile(m.group("s"))
    except re.error:
        return False
    return True


_CHECKS = {
    "engine": _engine,
    "gpu arch": lambda v: all(_ARCH.match(a) for a in _items(v)),
    "gpu count": lambda v: bool(_NUMBERS.match(v)),
    "experts": lambda v: bool(_NUMBERS.match(v)),
    "params": lambda v: bool(_NUMBERS.match(v)),
    "context": lambda v: bool(_NUMBERS.match(v)),
    "model": lambda v: bool(_items(v)) and all(t in MODEL_TRAITS for t in _items(v)),
    "setting": lambda v: bool(_SETTING.match(v)),
    "signal": lambda v: bool(re.match(r"^[a-z0-9]+(?:-[a-z0-9]+)*$", v)),
    "log": lambda v: bool(_QUOTED.match(v)),
    "text": lambda v: bool(_QUOTED.match(v)),
    "log regex": _regex,
}
_EXPECTED = {
    "engine": f"expected engine names ({', '.join(ENGINES)}) and an optional version range like >=0.5.0,<0.5.10",
    "gpu arch": "expected architectures like SM90, SM120 or gfx942",
    "gpu count": "expected a number or comparisons like >=4",
    "experts": "expected a number or comparisons like >=64,<=512",
    "params": "expected billions or comparisons like >=100B",
    "context": "expected tokens or comparisons like >=32768",
    "model": f"expected traits from {', '.join(MODEL_TRAITS)}",
    "setting": "expected a setting name then present, absent, a comparison (<256) or = value",
    "signal": "expected a signal id like throughput-plateau",
    "log": 'expected a literal in double quotes, like "Using default MoE kernel config"',
    "text": 'expected a phrase in double quotes',
    "log regex": "expected a valid Python regular expression in backticks",
}


def setting_name(c: Condition) -> str | None:
    """The setting a `setting:` condition names (its canonical flag without dashes)."""
    return c.value.split()[0] if c.key == "setting" else None


def unquoted(c: Condition) -> str:
    """The literal of a log/text condition, the pattern of a log regex, else the value."""
    m = (_BACKTICKED if c.key == "log regex" else _QUOTED).match(c.value)
    return m.group("s") if m else c.value
