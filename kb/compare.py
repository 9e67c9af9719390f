"""`kb compare`: runs aligned level by level, deltas with a noise band, and a verdict.

Runs are paired at the same load (concurrency, or request rate) and the same
input/output lengths (within 5%); a level that exists on one side only, or whose
lengths differ, is named and left out, never compared. Repeated runs at a level
are summarised by their median.

The noise band of a cell (one level, one metric) is how far the value moved
between repeats: the larger relative range, (max - min) / median, of the two
sides when both have two or more runs. A level measured once per side has no
spread to read, so the default band (±3%, `--noise`) stands in, and the output
says which band was used. A change inside the band is "within noise"; outside,
"better" or "worse" by the metric's direction (throughput up, latency down).
`kb attach` uses the same level pairing (levels, match_levels).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Callable

from ingest.run import read_run
from kb.errors import InputError, KbError
from kb.evidence import RunEvidence, spread
from kb.records import BenchRun
from kb.units import sig3  # the columns name the unit: three figures, as every gain is shown

LENGTH_TOLERANCE = 0.05  # mean input/output lengths within 5% count as the same workload
DEFAULT_NOISE = 0.03  # the band for a level without repeats; --noise changes it


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    unit: str
    higher_is_better: bool
    get: Callable[[BenchRun], float | None]


def _pct(attr: str, name: str) -> Callable[[BenchRun], float | None]:
    def get(r: BenchRun) -> float | None:
        d = getattr(r, attr)
        return d.get(name) if name != "median" else d.get("median", d.get("p50"))
    return get


# What a serving engineer reads off a sweep: throughput, then the latency percentiles.
METRICS: list[Metric] = [
    Metric("total_tok_s", "total throughput", "tok/s", True, lambda r: r.throughput()),
    Metric("output_tok_s", "output throughput", "tok/s", True, lambda r: r.output_throughput),
    Metric("ttft_p50_ms", "TTFT p50", "ms", False, _pct("ttft_ms", "median")),
    Metric("ttft_p99_ms", "TTFT p99", "ms", False, _pct("ttft_ms", "p99")),
    Metric("tpot_p50_ms", "TPOT p50", "ms", False, _pct("tpot_ms", "median")),
    Metric("tpot_p99_ms", "TPOT p99", "ms", False, _pct("tpot_ms", "p99")),
    Metric("itl_p50_ms", "ITL p50", "ms", False, _pct("itl_ms", "median")),
    Metric("itl_p99_ms", "ITL p99", "ms", False, _pct("itl_ms", "p99")),
]
BY_KEY = {m.key: m for m in METRICS}


# ------------------------------------------------------------------ load levels


@dataclass
class Level:
    """The runs of one side at one load level and workload."""

    key: tuple[str, float]  # ("concurrency", 256), ("rate", 16.0) or ("all", num_prompts)
    input_len: float | None
    output_len: float | None
    runs: list[BenchRun]

    def label(self) -> str:
        kind, value = self.key
        at = {"concurrency": f"{value:g} concurrency", "rate": f"{value:g} req/s"}.get(kind, "all requests at once")
        return at + (f", {self.lengths()} tokens in/out" if self.input_len or self.output_len else "")

    def lengths(self) -> str:
        return f"{self.input_len or '?'}/{self.output_len or '?'}"

    def values(self, get: Callable[[BenchRun], float | None]) -> list[float]:
        return [v for r in self.runs if (v := get(r)) is not None]


def _level_key(r: BenchRun) -> tuple[str, float]:
    if r.concurrency:
        return ("concurrency", r.concurrency)
    if r.request_rate and r.request_rate != float("inf"):
        return ("rate", r.request_rate)
    return ("all", r.num_prompts or 0)


def levels(runs: list[BenchRun]) -> list[Level]:
    groups: dict[tuple, Level] = {}
    for r in runs:
        lens = (round(r.input_len) if r.input_len else None, round(r.output_len) if r.output_len else None)
        groups.setdefault((_level_key(r), *lens), Level(_level_key(r), *lens, runs=[])).runs.append(r)
    return sorted(groups.values(), key=lambda lv: (lv.key, lv.input_len or 0, lv.output_len or 0))


def _same_len(a: float | None, b: float | None) -> bool:
    return a is None or b is None or abs(a - b) <= LENGTH_TOLERANCE * max(a, b)


Pair = tuple[Level, Level]


def match_levels(before: list[Level], after: list[Level], names: tuple[str, str]) -> tuple[list[Pair], list[str]]:
    """Pairs of levels to compare and warnings for what could not be; refuses when nothing pairs."""
    pairs, warnings, used, warned = [], [], set(), set()
    for b in before:
        same_load = [a for a in after if a.key == b.key and id(a) not in used]
        same_work = [a for a in same_load
                     if _same_len(a.input_len, b.input_len) and _same_len(a.output_len, b.output_len)]
        if same_work:
            pairs.append((b, same_work[0]))
            used.add(id(same_work[0]))
        elif same_load:
            warnings.append(f"at {b.label()} before vs {same_load[0].label()} after the input/output lengths differ: "
                            "not compared")
            warned.update(id(a) for a in same_load)
        else:
            warnings.append(f"{b.label()} is only in the before runs: not compared")
    warnings += [f"{a.label()} is only in the after runs: not compared" for a in after
                 if id(a) not in used | warned]
    if not pairs:
        raise KbError(f"no load level in common between before ({names[0]}: "
                      f"{'; '.join(lv.label() for lv in before)}) and after ({names[1]}: "
                      f"{'; '.join(lv.label() for lv in after)}): runs are compared at the same concurrency "
                      "or request rate and the same input/output lengths")
    warnings += [f"at {b.label()} the lengths differ slightly ({b.lengths()} vs {a.lengths()} tokens): compared anyway"
                 for b, a in pairs if b.lengths() != a.lengths()]
    return pairs, warnings


# ------------------------------------------------------------------ cells and verdicts


@dataclass
class Cell:
    """One metric at one level: baseline vs this side."""

    metric: Metric
    base: list[float]
    value: list[float]
    default_noise: float

    @property
    def base_median(self) -> float:
        return median(self.base)

    @property
    def median(self) -> float:
        return median(self.value)

    @property
    def delta(self) -> float | None:
        """Relative change of the median, signed as measured (+ = the number went up)."""
        return self.median / self.base_median - 1 if self.base_median else None

    @property
    def noise(self) -> tuple[float, str]:
        """(band, where it comes from): the repeats' spread, else the default."""
        sa, sb = spread(self.base), spread(self.value)
        if sa is not None and sb is not None:
            return max(sa, sb), "repeats"
        return self.default_noise, "default"

    @property
    def verdict(self) -> str:
        d = self.delta
        if d is None:
            return "n/a"
        if abs(d) <= self.noise[0]:
            return "within noise"
        return "better" if (d > 0) == self.metric.higher_is_better else "worse"

    def spreads(self) -> str:
        """The repeats' spread on each side, baseline/this ('-' for a single run)."""
        return "/".join(f"{v:.1%}" if v is not None else "-" for v in (spread(self.base), spread(self.value)))

    def worsening(self) -> float:
        """How much worse, as a positive fraction (0 when not worse)."""
        d = self.delta or 0.0
        return max(0.0, -d if self.metric.higher_is_better else d)

    def to_json(self) -> dict:
        band, source = self.noise
        return {"metric": self.metric.key, "label": self.metric.label, "unit": self.metric.unit,
                "higher_is_better": self.metric.higher_is_better,
                "baseline": round(self.base_median, 3), "value": round(self.median, 3),
                "runs": [len(self.base), len(self.value)],
                "spread": [_r(spread(self.base)), _r(spread(self.value))],
                "delta_pct": _r(self.delta * 100 if self.delta is not None else None),
                "noise_pct": round(band * 100, 2), "noise_from": source, "verdict": self.verdict}


def _r(v: float | None, n: int = 4) -> float | None:
    return round(v, n) if v is not None else None


@dataclass
class Row:
    level: str  # "8 concurrency, 32/64 tokens in/out"
    key: tuple[str, float]
    cells: list[Cell]


@dataclass
class Side:
    """One run (a file, several files or a directory) and how it compares with the baseline."""

    name: str
    ev: RunEvidence
    rows: list[Row] = field(default_factory=list)
    not_compared: list[str] = field(default_factory=list)


@dataclass
class Comparison:
    baseline: Side
    others: list[Side]
    default_noise: float
    warnings: list[str] = field(default_factory=list)

    @property
    def sides(self) -> list[Side]:
        return [self.baseline, *self.others]

    def regressions(self, pct: float) -> list[tuple[Side, Row, Cell]]:
        """Cells worse than the baseline beyond the noise band and by more than `pct` percent."""
        return [(s, row, c) for s in self.others for row in s.rows for c in row.cells
                if c.verdict == "worse" and c.worsening() * 100 > pct]

    def to_json(self, fail_pct: float | None = None) -> dict:
        out = {"baseline": self.baseline.name, "default_noise_pct": round(self.default_noise * 100, 2),
               "noise_rule": NOISE_RULE,
               "runs": [{"name": s.name, "files": s.ev.files} for s in self.sides],
               "comparisons": [{"name": s.name, "summary": summary(s), "not_compared": s.not_compared,
                                "levels": [{"level": r.level, "load": {"kind": r.key[0], "value": r.key[1]},
                                            "metrics": [c.to_json() for c in r.cells]} for r in s.rows]}
                               for s in self.others],
               "warnings": self.warnings}
        if fail_pct is not None:
            out["fail_on_regression_pct"] = fail_pct
            out["regressions"] = [{"run": s.name, "level": r.level, "metric": c.metric.key,
                                   "worse_pct": round(c.worsening() * 100, 2)}
                                  for s, r, c in self.regressions(fail_pct)]
        return out


NOISE_RULE = ("noise band per level and metric: the larger (max-min)/median of the repeated runs on either "
              "side when both sides have 2+ runs, else the default band")


def summary(s: Side) -> str:
    """How the cells of one run went, and its largest change for the worse."""
    cells = [(row, c) for row in s.rows for c in row.cells]
    counts = {v: sum(c.verdict == v for _, c in cells) for v in ("worse", "better", "within noise")}
    text = f"{counts['worse']} worse, {counts['better']} better, {counts['within noise']} within noise " \
           f"({len(cells)} metric-level cells)"
    worst = max(cells, key=lambda rc: rc[1].worsening(), default=None)
    if worst and worst[1].verdict == "worse":
        row, c = worst
        text += f"; most worse: {c.metric.label} {c.delta:+.1%} at {row.level}"
    return text


def read_side(paths: list[Path], name: str | None = None) -> Side:
    ev = read_run(list(paths))
    label = name or ", ".join(map(str, paths))
    if not ev.bench:
        raise InputError(label, "no benchmark results found (kb sweep, sglang/vLLM bench_serving, "
                                "GuideLLM, GenAI-Perf or AIPerf output)")
    return Side(label, ev)


def compare_sides(sides: list[Side], default_noise: float = DEFAULT_NOISE) -> Comparison:
    """Every side after the first against the first, level by level."""
    if len(sides) < 2:
        raise KbError("kb compare needs two runs or more: the first is the baseline")
    base = sides[0]
    base_levels = levels(base.ev.bench)
    warnings = [w for s in sides for w in s.ev.warnings]
    for s in sides[1:]:
        pairs, notes = match_levels(base_levels, levels(s.ev.bench), (base.name, s.name))
        s.not_compared = notes
        for b, a in pairs:
            cells = [Cell(m, bv, av, default_noise) for m in METRICS
                     if (bv := b.values(m.get)) and (av := a.values(m.get))]
            s.rows.append(Row(b.label(), b.key, cells))
    return Comparison(base, sides[1:], default_noise, warnings)


def compare(runs: list[list[Path]], default_noise: float = DEFAULT_NOISE) -> Comparison:
    return compare_sides([read_side(p) for p in runs], default_noise)


# ------------------------------------------------------------------ text


def table(c: Comparison, fail_pct: float | None = None) -> str:
    out = [f"kb compare — baseline: {c.baseline.name}"]
    out.append(f"  noise band: ±{c.default_noise:.0%} where a level has a single run per side; "
               "else the larger spread ((max-min)/median) of the repeats on either side")
    for s in c.others:
        out += ["", f"{s.name} vs baseline: {summary(s)}"]
        head = (f"  {'level':<34} {'metric':<24} {'baseline':>10} {'this':>10} {'delta':>8} {'noise':>7} {'runs':>5} "
                f"{'spread':>13}  verdict")
        out.append(head)
        for row in s.rows:
            for i, cell in enumerate(row.cells):
                band, src = cell.noise
                d = cell.delta
                out.append(f"  {row.level if i == 0 else '':<34} {cell.metric.label + ' ' + cell.metric.unit:<24} "
                           f"{sig3(cell.base_median):>10} {sig3(cell.median):>10} "
                           f"{(f'{d:+.1%}' if d is not None else '-'):>8} "
                           f"{'±' + format(band, '.1%') + ('' if src == 'repeats' else '*'):>7} "
                           f"{len(cell.base)}/{len(cell.value):<3} {cell.spreads():>13}  {cell.verdict}")
        for n in s.not_compared:
            out.append(f"  not compared: {n}")
    out.append("")
    out.append("  * default band (one run per side at that level); runs and spread ((max-min)/median of the repeats): "
               "baseline/this")
    if fail_pct is not None:
        bad = c.regressions(fail_pct)
        if bad:
            out.append(f"REGRESSION: {len(bad)} metric{'s' * (len(bad) != 1)} worse by more than {fail_pct:g}% "
                       "and the noise band:")
            out += [f"  {s.name}: {r.level}: {cl.metric.label} {cl.worsening():.1%} worse" for s, r, cl in bad[:20]]
            if len(bad) > 20:
                out.append(f"  (+{len(bad) - 20} more: --json lists them all)")
        else:
            out.append(f"no regression beyond {fail_pct:g}% and the noise band")
    for w in c.warnings:
        out.append(f"warning: {w}")
    return "\n".join(out)
