"""Measured gains as engineers write them in notes: `880 → 3,740 tok/s`,
`from 806 to 3740 tok/s`, `4.25x`, `+44% throughput`, `-30% TTFT`, and
before/after tables."""

from __future__ import annotations

import re

from kb import vocab
from kb.records import Gain

# at most 15 digits before the point: a longer run is not a measurement, and its float would be inf
NUM = r"\d{1,3}(?:,\d{3}){1,4}(?:\.\d+)?|\d{1,15}(?:\.\d+)?"
UNIT = r"tok/s|tokens/s|tokens/sec|tok/sec|t/s|tps|req/s|ms|s|%|GB/s|GB|x"
ARROW = re.compile(
    rf"(?:from\s+)?(?<![\d.,])(?P<a>{NUM})\s*(?P<ua>{UNIT})?\s*(?:→|->|=>|⟶|➜|\bto\b)\s*~?(?P<b>{NUM})\s*(?P<ub>{UNIT})?(?![\w/])",
    re.I,
)
RATIO = re.compile(rf"(?<![\w.])(?P<r>{NUM})\s*[x×](?![\w])", re.I)
PERCENT = re.compile(rf"(?<![\w.])(?P<sign>[+\-−])\s?(?P<p>{NUM})\s?%", re.I)
CONCURRENCY = re.compile(
    r"(?:at\s+|@\s*)?(?:c\s*=\s*|concurrency\s*(?:of|=|:)?\s*|max[-_ ]concurrency\s*=?\s*|bs\s*=?\s*|batch "
    r"size\s*)(?P<a>\d{1,9})\b"
    r"|(?<!\d)(?P<b>\d{1,9})\s*(?:concurrency|concurrent|conc\b|parallel requests|users|streams)",
    re.I,
)
_RATIO_TAIL = re.compile(r"^\s*(?:faster|speed|higher|better|more "
                         r"(?:throughput|tok)|improv|throughput|gain|boost|lower|less|slower|tok/s)", re.I)
MEASURE_WORDS = re.compile(r"throughput|tok|\btps\b|ttft|tpot|itl|latency|req/s|speed|decode", re.I)
_METRIC_AFTER = re.compile(r"\s*(ttft|tpot|itl|tps|throughput|latency|tok/s|output tps|input tps|total tps)\b", re.I)
_GAIN_WORDS = re.compile(r"faster|speed|throughput|higher|better|improv|gain|boost|more|tok/s|lower|less|slower"
                         r"|ttft|tpot|itl", re.I)


def _f(s: str) -> float:
    return float(s.replace(",", ""))


def metric_name(context: str, unit: str | None) -> str:
    """A metric name from the words around a number and its unit."""
    low = context.lower()
    if "ttft" in low or "first token" in low:
        return "TTFT"
    if "tpot" in low or "per output token" in low:
        return "TPOT"
    if "itl" in low or "inter-token" in low or "inter token" in low:
        return "ITL"
    if re.search(r"single[- ]?(?:stream|user|request)|bs\s*=?\s*1\b|batch 1\b|c\s*=\s*1\b", low):
        return "single-stream decode"
    if "output" in low or "decode" in low or "gen throughput" in low:
        return "output throughput"
    if re.search(r"\b(?:input|prompt|prefill)\b", low) and re.search(r"throughput|tps|tok", low):
        return "input throughput"
    if "req/s" in (unit or "").lower() or "request throughput" in low:
        return "request throughput"
    if "latency" in low:
        return "E2E latency"
    if (unit or "").lower() == "gb/s" or (("p2p" in low or "bandwidth" in low) and "tok" not in (unit or "").lower()):
        return "P2P bandwidth"
    return "total throughput"


def _concurrency_near(text: str) -> int | None:
    m = CONCURRENCY.search(text)
    if not m:
        return None
    return int(m.group("a") or m.group("b"))


def _clause(text: str, start: int, end: int) -> str:
    """The clause around a match: metric words are usually just before it."""
    left = re.split(r"[;\n|]|\.\s", text[:start])[-1]
    right = re.split(r"[;\n|,]|\.\s", text[end:])[0]
    return left[-60:] + " " + right[:40]


def from_text(text: str) -> list[Gain]:
    gains: list[Gain] = []
    taken: list[tuple[int, int]] = []
    for m in ARROW.finditer(text):
        unit = m.group("ub") or m.group("ua")
        if unit and unit.lower() == "x":
            continue
        clause = _clause(text, m.start(), m.end())
        if not unit and not re.search(r"tok|throughput|ttft|tpot|itl|latency|req", clause, re.I):
            continue  # "TP4 -> 8" is not a measurement
        a, b = _f(m.group("a")), _f(m.group("b"))
        if a == b:
            continue
        gains.append(Gain(metric=metric_name(clause, unit), before=a, after=b, unit=_unit(unit, clause),
                          concurrency=_concurrency_near(text)))
        taken.append(m.span())
    for m in RATIO.finditer(text):
        if any(s <= m.start() < e for s, e in taken):
            continue
        tail = text[m.end(): m.end() + 24]
        if vocab.GPU_MENTION.match(tail.strip()) or re.match(r"\s*(?:gpus?|cards|nodes?)\b", tail, re.I):
            continue  # "8x H200", "2x GPUs"
        r = _f(m.group("r"))
        clause = _clause(text, m.start(), m.end())
        if not (1 < r <= 100) or not ("." in m.group("r") or _RATIO_TAIL.match(tail)):
            continue
        if _repeats(gains, r):
            continue  # "880 → 3,740 tok/s (4.25x)" states one gain twice
        gains.append(Gain(metric=metric_name(clause, None), before=1.0, after=r, unit="x",
                          concurrency=_concurrency_near(text)))
    for m in PERCENT.finditer(text):
        clause = _clause(text, m.start(), m.end())
        after = _METRIC_AFTER.match(text, m.end())
        if not (_GAIN_WORDS.search(clause) or after):
            continue
        if after:  # "+14.8% TPS, -14.1% TTFT": the word after each figure names it
            clause = after.group(1)
        p = _f(m.group("p"))
        sign = -1 if m.group("sign") in "-−" else 1
        if _repeats(gains, (100.0 + sign * p) / 100.0, ttft=bool(re.search("ttft|tpot|itl|latency", clause, re.I))):
            continue
        gains.append(Gain(metric=metric_name(clause, "%"), before=100.0, after=100.0 + sign * p, unit="%",
                          concurrency=_concurrency_near(text)))
    return gains


def _repeats(gains: list[Gain], factor: float, ttft: bool = False) -> bool:
    """True when a ratio or percentage restates a gain already taken from an arrow."""
    for g in gains:
        if g.before and g.after:
            raw = g.after / g.before
            if abs(raw - factor) / factor < 0.03:
                return True
    return False


def _unit(unit: str | None, clause: str) -> str | None:
    if unit:
        u = unit.lower()
        return {"tokens/s": "tok/s", "tokens/sec": "tok/s", "tok/sec": "tok/s", "t/s": "tok/s", "tps": "tok/s",
                "gb/s": "GB/s", "gb": "GB"}.get(u, u)
    return "tok/s" if re.search(r"tok|throughput", clause, re.I) else None


def from_texts(texts: list[str]) -> list[Gain]:
    return [g for t in texts for g in from_text(t)]


def dedupe(gains: list[Gain]) -> list[Gain]:
    """One gain per (metric, before, after, unit); the copy that names a concurrency wins."""
    best: dict[tuple, Gain] = {}
    for g in gains:
        key = (g.metric, g.before, g.after, g.unit)
        if key not in best or (g.concurrency and not best[key].concurrency):
            best[key] = g
    return list(best.values())


BEFORE = re.compile(r"^(?:before|baseline|old|default|orig(?:inal)?|stock|untuned|without)\b", re.I)
AFTER = re.compile(r"^(?:after|new|tuned|optimi[sz]ed|with|fixed|final|best)\b", re.I)


def from_tables(tables: list[tuple[list[str], list[list[str]]]]) -> list[Gain]:
    """Gains from tables that have before/after columns, or cells with arrows."""
    gains: list[Gain] = []
    for header, rows in tables:
        by_row = _against_baseline_row(header, rows)
        if by_row:
            gains.extend(by_row)
            continue
        low = [h.strip() for h in header]
        bi = next((i for i, h in enumerate(low) if BEFORE.search(h)), None)
        ai = next((i for i, h in enumerate(low) if AFTER.search(h)), None)
        ci = next((i for i, h in enumerate(low) if re.search(r"concurren|^c$|^bs$|batch", h, re.I)), None)
        for cells in rows:
            conc = _cell_int(cells, ci)
            label = " ".join(c for i, c in enumerate(cells) if i not in (bi, ai, ci) and not re.search(r"\d", c))
            if bi is not None and ai is not None and max(bi, ai) < len(cells):
                pairs = _paired_values(cells[bi], cells[ai])
                if pairs:  # "Total TPS: 8424.86<br>Mean TPOT(ms): 147.56" on each side
                    for name, a, b in pairs:
                        unit = _cell_unit(name)
                        gains.append(Gain(metric=metric_name(name, unit), before=a, after=b,
                                          unit=_unit(unit, name), concurrency=conc))
                    continue
                a, b = _cell_num(cells[bi]), _cell_num(cells[ai])
                unit_here = _cell_unit(cells[bi]) or _cell_unit(label) or _cell_unit(" ".join(header))
                if a is not None and b is not None and (unit_here
                                                        or MEASURE_WORDS.search(f"{label} {' '.join(header)}")):
                    ctx_words = f"{label} {header[bi]}"
                    unit = unit_here
                    gains.append(Gain(metric=metric_name(ctx_words, unit), before=a, after=b,
                                      unit=_unit(unit, ctx_words), concurrency=conc))
                continue
            row: list[Gain] = []
            for i, cell in enumerate(cells):
                if i == ci or not re.search(r"\d", cell):
                    continue
                head = header[i] if i < len(header) else ""
                for g in from_text(f"{head} {cell}" if MEASURE_WORDS.search(cell) else f"{label} {head} {cell}"):
                    if g.unit in ("x", "%") and _repeats(row, g.after / g.before):
                        continue
                    row.append(g if g.concurrency else g.model_copy(update={"concurrency": conc}))
            gains.extend(row)
    return gains


def _cell_num(cell: str) -> float | None:
    m = re.search(NUM, cell)
    return _f(m.group(0)) if m else None


def _cell_int(cells: list[str], i: int | None) -> int | None:
    if i is None or i >= len(cells):
        return None
    v = _cell_num(cells[i])
    return int(v) if v is not None else None


def _cell_unit(text: str) -> str | None:
    m = re.search(rf"({UNIT})(?![\w])", text.replace(" ", ""), re.I)
    return m.group(1) if m and m.group(1).lower() != "x" else None


# "Total TPS: 7787.17x2": one replica's figure times the replicas, a computed number
_NAMED_VALUE = re.compile(rf"(?P<name>[A-Za-z][\w ()/%.-]*?)\s*:\s*(?P<v>{NUM})(?P<times>\s*[x×]\s*\d+)?")


def _named_values(cell: str) -> dict[str, float | None]:
    """"Name: value" pairs of a cell ("Total TPS: 16701.31<br>Mean TPOT(ms): 91.33");
    a value multiplied in place ("x2") is None: it is arithmetic, not a measurement."""
    out: dict[str, float | None] = {}
    for part in re.split(r"<br\s*/?>|;", cell):
        m = _NAMED_VALUE.search(re.sub(r"<[^>]+>", " ", part))
        if m:
            out[m.group("name").strip()] = None if m.group("times") else _f(m.group("v"))
    return out


def _paired_values(before: str, after: str) -> list[tuple[str, float, float]]:
    a, b = _named_values(before), _named_values(after)
    return [(k, a[k], b[k]) for k in a if k in b and a[k] is not None and b[k] is not None
            and MEASURE_WORDS.search(k)]


_BASELINE_ROW = re.compile(r"\bbaseline\b|^(?:before|default|stock|untuned|without)\b|\(default\)", re.I)


def _against_baseline_row(header: list[str], rows: list[list[str]]) -> list[Gain]:
    """A table with one configuration per row, one marked as the baseline ("BF16
    (Baseline)", "Without LMCache"), and metric columns ("Throughput (tok/s)", "Mean
    TTFT (ms)"): every other row's value against the baseline's, per metric column."""
    if len(header) < 2 or len(rows) < 2:
        return []
    base = [cells for cells in rows if cells and _BASELINE_ROW.search(cells[0].strip())]
    if len(base) != 1:
        return []
    metrics = [i for i, h in enumerate(header) if i > 0 and MEASURE_WORDS.search(h)]
    out = []
    for cells in rows:
        if cells is base[0] or not cells:
            continue
        for i in metrics:
            if i >= len(cells) or i >= len(base[0]):
                continue
            a, b = _cell_num(base[0][i]), _cell_num(cells[i])
            if a is None or b is None or a == b:
                continue
            unit = _cell_unit(header[i])
            name = metric_name(header[i], unit)
            out.append(Gain(metric=f"{name} ({cells[0].strip()} vs {base[0][0].strip()})", before=a, after=b,
                            unit=_unit(unit, header[i])))
    return out
