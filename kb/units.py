"""Measured values as people read them: three significant figures, in the unit that
suits the magnitude (19.4 µs, not 0.02 ms; 3.74 k tok/s). Every place that shows a
gain formats it here; stored values keep the unit and precision they were written in."""

from __future__ import annotations

import math

# unit as written → (family, size of one unit in the family's base unit)
_KNOWN = {
    "us": ("time", 1e-6), "µs": ("time", 1e-6), "μs": ("time", 1e-6),
    "ms": ("time", 1e-3), "s": ("time", 1.0), "sec": ("time", 1.0), "seconds": ("time", 1.0),
    "tok/s": ("rate", 1.0), "k tok/s": ("rate", 1e3),
}
# the units shown, smallest first: a value takes the largest one it reaches
_STEPS = {"time": [(1e-6, "µs"), (1e-3, "ms"), (1.0, "s")],
          "rate": [(1.0, "tok/s"), (1e3, "k tok/s")]}


def sig3(v: float) -> str:
    """Three significant figures, trailing zeros kept (4.00, 19.4, 880, 12,300)."""
    if v == 0 or not math.isfinite(v):
        return f"{v:g}"
    rounded = float(f"{v:.3g}")
    decimals = 2 - math.floor(math.log10(abs(rounded)))
    if decimals > 0:
        return f"{rounded:.{decimals}f}"
    return f"{rounded:,.0f}"


def scaled(value: float, unit: str | None) -> tuple[float, str | None]:
    """(value, unit) moved to the unit that suits its magnitude; unknown units unchanged."""
    known = _KNOWN.get((unit or "").strip())
    if not known or value == 0 or not math.isfinite(value):
        return value, unit
    family, size = known
    base = float(f"{value * size:.3g}")  # round first: 999.96 µs shows as 1.00 ms
    steps = _STEPS[family]
    size, name = next(((s, n) for s, n in reversed(steps) if abs(base) >= s), steps[0])
    return base / size, name


def quantity(value: float, unit: str | None) -> str:
    """'19.4 µs', '3.74 k tok/s', '880 tok/s', '12.0' (no unit)."""
    v, u = scaled(value, unit)
    return f"{sig3(v)} {u}" if u else sig3(v)


def change(before: float, after: float, unit: str | None) -> str:
    """'19.4 → 4.00 µs' when both values suit one unit, else '880 tok/s → 3.74 k tok/s'."""
    (b, ub), (a, ua) = scaled(before, unit), scaled(after, unit)
    if ub == ua:
        return f"{sig3(b)} → {sig3(a)}" + (f" {ua}" if ua else "")
    return f"{quantity(before, unit)} → {quantity(after, unit)}"


def factor(r: float) -> str:
    """An improvement factor: '4.85x'."""
    return f"{sig3(r)}x"
