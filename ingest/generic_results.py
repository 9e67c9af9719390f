"""Results of benchmark scripts kb has no reader for: a table of one row per load level.

Teams run their own load scripts and keep what they print: CSV files, markdown tables,
box-drawn console tables (rich, tabulate), JSON lists of per-level results. Whatever the
layout, such a table has a column that names the load (concurrency, batch size or request
rate) and columns of throughput or latency. This reader finds that column, maps the
others by their names, and turns each row into a BenchRun, so a curve and its signals
(plateau, queueing) come from any script.

A mapping read from a name kb knows exactly ("max_concurrency", "output_throughput",
"mean_ttft_ms") is certain; one read from a looser name ("Tok/s", "TTFT (ms)", "C") is a
guess, and every guess is named in a warning and shown by `kb ingest --report`.
This reader comes last: a file any specific reader recognises is never read here.
"""

from __future__ import annotations

import csv
import functools
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from ingest import bench_common as bc
from kb.records import BenchRun

KIND = "generic-results"
MAX_ROWS = 5_000

# ------------------------------------------------------------------ columns


@dataclass
class Column:
    header: str
    field: str  # a BenchRun field, "load:concurrency|batch|rate", or "extra:<name>"
    stat: str | None = None  # for latency dicts: mean, median, p99, ...
    scale: float = 1.0  # to milliseconds for latencies
    guessed: str | None = None  # why this mapping is a guess, or None when certain

    def describe(self) -> str:
        dest = {"load:concurrency": "concurrency", "load:batch": "batch size (as concurrency)",
                "load:rate": "request rate"}.get(self.field, self.field.replace("extra:", "kept: ").replace("_", " "))
        if self.stat:
            dest += f" {self.stat}" + (" (s→ms)" if self.scale == 1000.0 else "")
        return f"{self.header!s} → {dest}" + (f" (guessed: {self.guessed})" if self.guessed else "")


def _norm(header: str) -> tuple[str, str | None]:
    """("ttft", "ms") from "Mean TTFT (ms)"; markdown emphasis and backticks dropped."""
    h = re.sub(r"[*`_]+", " ", header).strip().lower()
    h = " ".join(h.split())
    unit = None
    m = re.search(r"\(([^()]*)\)\s*$", h)
    if m:
        unit, h = m.group(1).strip(), h[: m.start()].strip()
    return h, unit


# exact names (vLLM/sglang result keys and their spaced forms): certain mappings
_EXACT_LOAD = {"concurrency": "load:concurrency", "max concurrency": "load:concurrency",
               "max-concurrency": "load:concurrency", "batch size": "load:batch", "batch-size": "load:batch",
               "request rate": "load:rate", "request-rate": "load:rate"}
_LOOSE_LOAD = [
    (re.compile(r"^(?:conc\.?|c|cc|concurrent(?: requests)?|num concurrent|parallel|users|clients|streams|"
                r"max concurrent requests|concurrency level)$"), "load:concurrency"),
    (re.compile(r"^(?:bs|batch|num seqs|batch size per gpu)$"), "load:batch"),
    (re.compile(r"^(?:qps|rate|target rps|req rate|arrival rate)$"), "load:rate"),
]
_STAT = re.compile(r"\b(mean|avg|average|median|p\d+(?:\.\d+)?|std|min|max)\b")
_STAT_NAME = {"avg": "mean", "average": "mean", "p50": "median"}


def _latency_scale(name: str, unit: str | None, default: str | None = None) -> tuple[float, str | None]:
    """To-milliseconds factor from the header's unit, its name's suffix ("p99_ms"), or
    a unit the file's schema implies; ms, said as a guess, when nothing names one."""
    u = (unit or "").strip()
    if not u:
        m = re.search(r"\b(ms|s|sec|seconds|us)$", name)
        if m:
            u = m.group(1)
        elif default:
            return bc.ms_scale(default) or 1.0, f"no unit given: read as {default}, as the file's layout writes them"
    scale = bc.ms_scale(u) if u else None
    if scale is None:
        return 1.0, "no unit given: read as ms"
    return scale, None


def _load(name: str) -> tuple[str, bool] | None:
    """(the load field a normalised header names, whether guessed); the only way classify
    gives a load column."""
    flat = " ".join(name.replace("-", " ").replace("/", " / ").split())
    if name in _EXACT_LOAD or flat in _EXACT_LOAD:
        return _EXACT_LOAD.get(name) or _EXACT_LOAD[flat], False
    for rx, dest in _LOOSE_LOAD:
        if rx.match(name):
            return dest, True
    return None


@functools.lru_cache(maxsize=4096)
def names_load(header: str) -> bool:
    """Whether classify(header) is a load column, without the rest of classify (a CSV
    header is found by its load column; a long log's comma lines are all asked, and their
    cells repeat: sglang's server_args dump is ~200 of them, logged again at each restart)."""
    return _load(_norm(header)[0]) is not None


def classify(header: str, seconds: bool = False) -> Column | None:
    """What a column holds, from its header; None for a column kb does not map."""
    name, unit = _norm(header)
    load = _load(name)
    if load:
        return Column(header, load[0], guessed=f"{header!r} read as the load level" if load[1] else None)
    words = f"{name} {unit or ''}".strip()
    if re.search(r"per[- ]?(?:request|req|user|stream)|/\s*user|tok/s/user", words):
        return Column(header, "extra:" + re.sub(r"\W+", "_", name).strip("_"))
    stat_m = _STAT.search(name)
    stat = _STAT_NAME.get(stat_m.group(1), stat_m.group(1)) if stat_m else None
    for rx, dest in ((r"\bttft\b|time to first token|first token", "ttft_ms"),
                     (r"\btpot\b|time per output token", "tpot_ms"),
                     (r"\bitl\b|inter token|inter-token", "itl_ms"),
                     (r"\be2e\b|end to end|end-to-end|\blatency\b", "e2e_ms")):
        if re.search(rx, name.replace("_", " ")):
            scale, unit_guess = _latency_scale(name, unit, "s" if seconds else None)
            guesses = [g for g in (unit_guess, None if stat else "no statistic named: read as the mean",
                                   "a latency without a kind: read as request latency" if dest == "e2e_ms"
                                   and not re.search(r"e2e|end", name) else None) if g]
            return Column(header, dest, stat=stat or "mean", scale=scale, guessed="; ".join(guesses) or None)
    if stat and re.fullmatch(r"(?:mean|avg|average|median|p\d+(?:\.\d+)?|min|max)[ _]?(?:ms|s|sec)?", name) \
            and (unit or re.search(r"(?:ms|s|sec)$", name)):
        scale, _ = _latency_scale(name, unit)  # "p99_ms": a latency, of the request as a whole
        return Column(header, "e2e_ms", stat=stat, scale=scale,
                      guessed="a latency without a kind: read as request latency")
    if re.search(r"request[s]? throughput|requests? per second|req(?:uest)?s?\s*/\s*s|^rps$|^req/s$|^req per s$",
                 words):
        return Column(header, "request_throughput",
                      guessed=None if "request throughput" in words else f"{header!r} read as completed requests/s")
    rate = re.search(r"/\s*s\b|/\s*sec|per\s*sec|\btps\b|throughput|\btput\b|gen/s|tokens per second", words)
    if not rate:
        # token counts per request ("prompt tok", "output_len", "output tok/request"); totals are not mapped
        if re.search(r"\btotal\b", words) or not re.search(r"\btok|\blen\b|length|\bisl\b|\bosl\b", words):
            return None
        exact = name in ("input len", "output len", "input length", "output length", "isl", "osl")
        if re.search(r"\b(?:input|prompt|prefill|isl)\b", words):
            return Column(header, "input_len",
                          guessed=None if exact else f"{header!r} read as input tokens per request")
        if re.search(r"\b(?:output|gen|generated|completion|osl)\b", words):
            return Column(header, "output_len",
                          guessed=None if exact else f"{header!r} read as output tokens per request")
        return None
    if re.search(r"\b(?:input|prompt|prefill|pp)\b", words):
        return Column(header, "input_throughput",
                      guessed=None if "input" in words else f"{header!r} read as input tok/s")
    if re.search(r"\btotal\b", words):
        return Column(header, "total_throughput")
    if re.search(r"\b(?:output|gen|generation|generated|decode|tg|aggregate)\b|gen/s", words):
        certain = re.search(r"\boutput\b", words)
        return Column(header, "output_throughput", guessed=None if certain else f"{header!r} read as output tok/s")
    if re.search(r"\btok|\btps\b|tokens per second|throughput|tput", words):
        return Column(header, "output_throughput", guessed=f"{header!r} names no direction: read as output tok/s")
    return None


# ------------------------------------------------------------------ rows → runs


_NUM = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?")


def cell_number(cell: Any) -> float | None:
    """The first number of a cell ("1,204" → 1204, "63.1 1k/14" → 63.1, "26/26" → 26);
    None for "-", "N/A", "crash" or an empty cell."""
    if isinstance(cell, bool):
        return None
    if isinstance(cell, (int, float)):
        return bc.num(cell)
    m = _NUM.search(str(cell).strip().replace("\u2009", ""))
    if not m:
        return None
    try:
        return bc.num(float(m.group(0).replace(",", "")))
    except ValueError:
        return None


@dataclass
class Table:
    header: list[str]
    rows: list[tuple[list[Any], int | None]]  # cells and the line each row is on
    form: str  # "csv", "markdown", "box", "json"
    line: int | None = None
    seconds: bool = False  # latencies without a unit are in seconds (a schema that says so)
    caption: str | None = None  # the text line above the table (a heading that names its values)


@dataclass
class Reading:
    runs: list[BenchRun] = field(default_factory=list)
    columns: list[Column] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # series left out, rows skipped

    def mapping(self) -> str:
        return "; ".join(c.describe() for c in self.columns)

    def guesses(self) -> list[str]:
        return [c.describe() for c in self.columns if c.guessed]


def read_table(t: Table, path: str) -> Reading | None:
    """BenchRuns from a table whose header has a load column and at least one
    throughput or latency column; None when it is not such a table."""
    cols = [classify(h, t.seconds) if isinstance(h, str) else None for h in t.header]
    loads = [i for i, c in enumerate(cols) if c and c.field.startswith("load:")]
    metrics = [i for i, c in enumerate(cols) if c and not c.field.startswith(("load:", "extra:"))]
    if not loads:
        return read_matrix(t, path)
    if not metrics:
        return None
    # the load column: numbers on most rows and more than one value (vLLM's request_rate
    # is "inf" when max_concurrency sets the load), a certain name before a guessed one
    def load_rank(i: int) -> tuple:
        nums = [cell_number(cells[i]) for cells, _ in t.rows if i < len(cells)]
        have = [n for n in nums if n is not None]
        return (len(have) * 2 > len(nums), len(set(have)) > 1, not cols[i].guessed)
    li = max(loads, key=load_rank)
    # the other columns that vary with text (GPU, engine, ISL/OSL labels) name a series
    rows = [(cells, line) for cells, line in t.rows if li < len(cells) and cell_number(cells[li]) is not None]
    if not rows:
        return None
    # (a token length that changes at one load level is a workload of its own: ISL/OSL)
    varying = [i for i, c in enumerate(cols) if (c is None or c.field in ("input_len", "output_len"))
               and _names_a_series(t.header[i], i, li, rows)]

    def label(cells) -> str:
        return ", ".join(f"{t.header[i].strip()}={str(cells[i]).strip()}" for i in varying if i < len(cells))

    reading = Reading(columns=[cols[li]] + [cols[i] for i in metrics] +
                      [c for i, c in enumerate(cols) if c and c.field.startswith("extra:")])
    labels = list(dict.fromkeys(label(cells) for cells, _ in rows))
    if len(labels) > 1:
        reading.notes.append(f"{len(labels)} series in one table ({'; '.join(labels[:4])}"
                             f"{'; …' if len(labels) > 4 else ''}): the first is read as this run's curve, "
                             f"the rest are left out (split the file to diagnose each)")
        rows = [(cells, line) for cells, line in rows if label(cells) == labels[0]]
    load = cols[li].field
    for cells, line in rows[:MAX_ROWS]:
        level = cell_number(cells[li])
        fields: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for i in metrics + [i for i, c in enumerate(cols) if c and c.field.startswith("extra:")]:
            if i >= len(cells):
                continue
            v = cell_number(cells[i])
            if v is None:
                continue
            c = cols[i]
            if c.field.startswith("extra:"):
                extra[c.field[6:]] = v
            elif c.stat:
                fields.setdefault(c.field, {})[bc.stat_key(c.stat) or c.stat] = v * c.scale
            else:
                fields.setdefault(c.field, v)
        if not fields:
            continue
        extra["columns"] = reading.mapping()
        if reading.guesses():
            extra["guessed"] = reading.guesses()
        if reading.notes:
            extra["notes"] = reading.notes
        if labels[0]:
            extra["series"] = labels[0]
        if load == "load:batch":
            extra["load"] = "batch size"
        run = bc.make_run(path, line, tool=KIND,
                          concurrency=bc.concurrency(level) if load != "load:rate" else None,
                          request_rate=bc.rate(level) if load == "load:rate" else None,
                          server_args={"bench": extra} if extra else None, **fields)
        reading.runs.append(run)
    return reading if reading.runs else None


# A decode matrix prints the load levels as columns ("| ctx \\ conc | 1 | 2 | 4 |", "C=1", "cc8")
# and one row per context length or configuration; its values are named by the heading above
# (llm_decode_bench's "Aggregate Throughput (tok/s)"), so without such a heading nothing is read.
_LEVEL_HEADER = re.compile(r"^(?:c|cc|conc|concurrency)?\s*[=:]?\s*(\d+)$")
_CONC_HINT = re.compile(r"\bconc|concurren|\busers?\b|parallel|\bstreams?\b|\bclients?\b")


def read_matrix(t: Table, path: str) -> Reading | None:
    """BenchRuns from a table whose column headers are concurrency levels: the first row is
    read as this run's curve (the others are named and left out), its cells measure what the
    heading above names."""
    levels = {i: int(m.group(1)) for i, h in enumerate(t.header)
              if isinstance(h, str) and (m := _LEVEL_HEADER.match(_norm(h)[0]))}
    labels = [i for i in range(len(t.header)) if i not in levels]
    if len(levels) < 2 or not labels or min(levels) < max(labels):
        return None
    prefixed = all(not t.header[i].strip().strip("*").isdigit() for i in levels)
    named = " ".join([t.caption or ""] + [str(t.header[i]) for i in labels]).lower()
    if not (prefixed or _CONC_HINT.search(named)):
        return None  # bare numbers as columns could be anything (years, context lengths)
    caption = re.sub(r"^#+\s*", "", t.caption or "").strip()
    value = next((c for c in (classify(caption) if caption else None, classify(str(t.header[labels[0]])))
                  if c and not c.field.startswith(("load:", "extra:"))), None)
    if value is None:
        return None
    if value.stat and not value.guessed:
        value.guessed = "the statistic is the heading's"
    first, last = t.header[min(levels)].strip(), t.header[max(levels)].strip()
    load = Column(f"{first} … {last} (column headers)", "load:concurrency",
                  guessed="concurrency read from the column headers of a matrix")
    reading = Reading(columns=[load, value])
    rows = [(cells, line) for cells, line in t.rows if any(
        i < len(cells) and cell_number(cells[i]) is not None for i in levels)]
    if not rows:
        return None

    def label(cells) -> str:
        return ", ".join(f"{str(t.header[i]).strip()}={str(cells[i]).strip()}" for i in labels if i < len(cells))

    if len(rows) > 1:
        reading.notes.append(f"{len(rows)} rows in one matrix ({'; '.join(label(c) for c, _ in rows[:4])}"
                             f"{'; …' if len(rows) > 4 else ''}): the first is read as this run's curve, "
                             f"the rest are left out (split the file to diagnose each)")
    cells, line = rows[0]
    extra: dict[str, Any] = {"columns": reading.mapping(), "guessed": reading.guesses(), "series": label(cells)}
    if reading.notes:
        extra["notes"] = reading.notes
    for i, level in sorted(levels.items(), key=lambda kv: kv[1]):
        v = cell_number(cells[i]) if i < len(cells) else None
        if v is None:
            continue
        fields = {value.field: {bc.stat_key(value.stat) or value.stat: v * value.scale}} if value.stat \
            else {value.field: v}
        reading.runs.append(bc.make_run(path, line, tool=KIND, concurrency=bc.concurrency(level),
                                        server_args={"bench": extra}, **fields))
    return reading if reading.runs else None


def _names_a_series(header: str, i: int, li: int, rows: list) -> bool:
    """True for a column that tells configurations apart (GPU, engine, tool, ISL, a
    prefill:decode split): its value changes between rows at the same load level, and it
    is text, or a small set of whole numbers whose name is not a measurement."""
    if _is_bookkeeping(header):
        return False
    values = [(cell_number(cells[li]), str(cells[i]).strip()) for cells, _ in rows if i < len(cells)]
    per_level: dict = {}
    for level, v in values:
        per_level.setdefault(level, set()).add(v)
    if not any(len(vs) > 1 for vs in per_level.values()):
        return False  # constant, or set by the load level itself
    if sum(bool(re.search(r"[A-Za-z]", v)) for _, v in values) * 2 > len(values):
        return True  # text: "8xH100", "AIPerf 0.7.0"
    nums = [cell_number(v) for _, v in values]
    if any(n is None or n != int(n) for n in nums) or len(set(nums)) > 8:
        return False  # measured values
    h = header.lower()
    if re.search(r"context|ctx|\bisl\b|\bosl\b|input[ _]?len|output[ _]?len|prompt[ _]?len|prefill|decode", h):
        return True  # a workload or layout setting ("context_tokens", "isl", "prefill" workers)
    return not re.search(r"ms\b|tok|lat|throughput|%|diff|std|rate|time|dur|total|count|mem|util", h)


def _is_bookkeeping(header: str) -> bool:
    """Columns that differ on every row without naming a configuration."""
    return bool(re.search(r"date|time|file|source|path|label|id$|^#$|requests$|success|status|completed|errors?|num",
                          header.strip().lower()))


# ------------------------------------------------------------------ text tables

_BOX_V = "│┃║|"
_RULE = re.compile(r"^[\s─━═┄┈╌\-+┌┐└┘├┤┬┴┼┏┓┗┛┣┫┳┻╋┡┩╇╈╞╡╪╒╕╘╛╔╗╚╝╠╣╦╩╬:|│┃║]+$")


def _split_bar(line: str) -> list[str]:
    s = line.strip()
    for ch in _BOX_V:
        s = s.replace(ch, "\x00")
    parts = s.split("\x00")
    if parts and not parts[0].strip():
        parts = parts[1:]
    if parts and not parts[-1].strip():
        parts = parts[:-1]
    return [p.strip() for p in parts]


class GenericResultsText:
    """Line parser: markdown tables, box-drawn tables (vertical bars of any box style),
    rule-underlined aligned columns (rich SIMPLE_HEAD) and CSV/TSV tables whose header
    names a load column. Only a table's lines are kept, so a long log costs nothing."""

    kind = KIND

    def __init__(self, path: str) -> None:
        self.path = str(path)
        self.tables: list[Table] = []
        self._bar: Table | None = None  # a markdown/box table being read
        self._csv: tuple[Table, str, int] | None = None  # (table, delimiter, cells)
        self._prev: tuple[int, str] | None = None  # the line before a rule: an aligned header
        self._caption: str | None = None  # the last text line outside a table: a table's heading
        self._aligned: Table | None = None
        self._rows = 0

    @bc.guarded(KIND)
    def feed(self, lineno: int, line: str) -> None:
        if self._rows >= MAX_ROWS:
            return
        raw = line.rstrip("\r\n").lstrip("\ufeff")
        s = raw.strip()
        if self._feed_bar(lineno, s) or self._feed_csv(lineno, raw) or self._feed_aligned(lineno, s):
            self._prev = None
            return
        self._prev = (lineno, s) if s else None
        if s:
            self._caption = s[:200]

    def _feed_bar(self, lineno: int, s: str) -> bool:
        has_bar = any(ch in s for ch in _BOX_V)
        if _RULE.match(s) if s else False:
            if self._bar is not None:
                return True
            return False
        if not has_bar:
            self._bar = None
            return False
        cells = _split_bar(s)
        if len(cells) < 2:
            self._bar = None
            return False
        if self._bar is None:
            bare = [c for c in cells if cell_number(c) is not None and not re.search(r"[A-Za-z]", c)]
            # a data row without a header is not a table kb can map; a matrix header is: a
            # label, then whole-number load levels ("| ctx \\ conc | 1 | 2 | 4 |")
            matrix = re.search(r"[A-Za-z]", cells[0]) and all(re.fullmatch(r"\*{0,2}\d+\*{0,2}", c) for c in bare)
            if bare and not matrix:
                return False
            self._bar = Table(header=cells, rows=[], form="markdown" if s.startswith("|") else "box", line=lineno,
                              caption=self._caption)
            self.tables.append(self._bar)
        else:
            self._bar.rows.append((cells, lineno))
            self._rows += 1
        return True

    def _feed_csv(self, lineno: int, raw: str) -> bool:
        if self._csv is not None:
            table, delim, n = self._csv
            try:
                cells = next(csv.reader([raw], delimiter=delim))
            except (csv.Error, StopIteration):
                cells = []
            if len(cells) == n:
                table.rows.append(([c.strip() for c in cells], lineno))
                self._rows += 1
                return True
            self._csv = None
        for delim in (",", "\t"):
            if delim not in raw:
                continue
            try:
                cells = [c.strip() for c in next(csv.reader([raw], delimiter=delim))]
            except (csv.Error, StopIteration):
                continue
            if len(cells) >= 2 and any(map(names_load, cells)) \
                    and not any(cell_number(h) is not None and not re.search(r"[A-Za-z]", h) for h in cells):
                table = Table(header=cells, rows=[], form="csv", line=lineno)
                self.tables.append(table)
                self._csv = (table, delim, len(cells))
                return True
        return False

    def _feed_aligned(self, lineno: int, s: str) -> bool:
        if self._aligned is not None:
            cells = re.split(r"\s{2,}", s) if s else []
            if s and not _RULE.match(s) and len(cells) == len(self._aligned.header):
                self._aligned.rows.append((cells, lineno))
                self._rows += 1
                return True
            self._aligned = None
            return bool(s) and bool(_RULE.match(s))
        if s and _RULE.match(s) and self._prev and len(s) >= 8:
            header = re.split(r"\s{2,}", self._prev[1])
            if len(header) >= 2 and any(map(names_load, header)):
                self._aligned = Table(header=header, rows=[], form="aligned", line=self._prev[0])
                self.tables.append(self._aligned)
                return True
        return False

    @bc.guarded(KIND)
    def results(self) -> list[BenchRun]:
        self.readings = [r for t in self.tables if t.rows and (r := read_table(t, self.path))]
        return [run for r in self.readings for run in r.runs]


# ------------------------------------------------------------------ JSON

_LIST_KEYS = ("results", "runs", "benchmarks", "levels", "data", "rows", "sweep", "points")


def _flatten(d: Mapping, prefix: str = "") -> dict[str, Any]:
    """{"ttft": {"p50": 1}} → {"ttft p50": 1}: nested statistics become named columns."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix} {k}".strip() if prefix else str(k)
        if isinstance(v, Mapping):
            out.update(_flatten(v, key))
        elif isinstance(v, (int, float, str)) and not isinstance(v, bool):
            out[key] = v
    return out


def json_table(doc: Any) -> Table | None:
    """A list of per-level result objects, at the top or under a "results"-like key."""
    rows = None
    if isinstance(doc, list):
        rows = doc
    elif isinstance(doc, Mapping):
        rows = next((doc[k] for k in _LIST_KEYS if isinstance(doc.get(k), list)), None)
    if not rows or not all(isinstance(r, Mapping) for r in rows[:MAX_ROWS]):
        return None
    flat = [_flatten(r) for r in rows[:MAX_ROWS]]
    header = list(dict.fromkeys(k for r in flat for k in r))
    # llm_decode_bench (voipmonitor/llm-inference-bench) writes rows with "aggregate_tps" and
    # "context_tokens", and its latencies ("ttft_p50", "inter_token_latency_p50") in seconds
    # (its consumers convert them with msec()); a guess all the same, and said as one
    seconds = "aggregate_tps" in header and "context_tokens" in header
    return Table(header=header, rows=[([r.get(h, "") for h in header], None) for r in flat], form="json",
                 seconds=seconds)


class GenericResultsJson:
    kind = KIND

    @staticmethod
    @bc.guarded(KIND)
    def read(doc: Any, path: str, line: int | None) -> list[BenchRun] | None:
        t = json_table(doc)
        if t is None:
            return None
        r = read_table(t, path)
        return r.runs if r else None


READERS = (GenericResultsJson,)



def only_a_results_table(text: str) -> bool:
    """True for a document that is nothing but result tables under headings (the
    `benchmark_result_<ISL>_<OSL>.md` a sweep script writes): run evidence, not notes."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines or not all(ln.startswith(("#", "|")) for ln in lines):
        return False
    parser = GenericResultsText("-")
    for n, ln in enumerate(lines, 1):
        parser.feed(n, ln)
    return bool(parser.results())
