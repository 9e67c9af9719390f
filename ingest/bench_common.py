"""Helpers every benchmark-result reader shares: tolerant numbers, statistic key
names, units, telling sglang's JSONL from vLLM's JSON, and building the BenchRun.

Benchmark files are hand-edited, truncated and produced by many tool versions,
so a value that cannot be read is dropped (the run keeps its other fields) rather
than failing the file.
"""

from __future__ import annotations

import functools
import math
import re
from typing import Any, Callable, Mapping

from pydantic import ValidationError

from kb.errors import InputError
from kb.records import BenchRun, Where
from kb.redact import redact_data

# ---------------------------------------------------------------- numbers


def num(v: Any, allow_inf: bool = False) -> float | None:
    """A finite float from a JSON or text value ("1,234.5", "12.3%", 7), else None."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, str):
        s = v.strip().replace(",", "").rstrip("%").strip()
        if not s:
            return None
        try:
            v = float(s)
        except ValueError:
            return None
    if not isinstance(v, (int, float)):
        return None
    try:
        f = float(v)
    except (OverflowError, ValueError):
        return None
    if math.isnan(f) or (math.isinf(f) and not (allow_inf and f > 0)):
        return None
    return f


def count(v: Any) -> int | None:
    """A non-negative whole number (3, 3.0, "3"), else None."""
    f = num(v)
    if f is None or f < 0 or not f.is_integer() or f > 2**63:
        return None
    return int(f)


def rate(v: Any) -> float | None:
    """A request rate: a positive number, or inf for "send everything at once"."""
    if isinstance(v, str) and v.strip().lower() in ("inf", "infinity"):
        return math.inf
    f = num(v, allow_inf=True)
    return f if f is not None and f > 0 else None


def concurrency(v: Any) -> int | None:
    """A concurrency limit; "not set", None and 0 all mean unbounded (None)."""
    n = count(v)
    return n if n else None


# ---------------------------------------------------------------- statistics

# Statistic names as tools spell them → the keys of BenchRun's *_ms dicts.
_STAT_WORDS = {
    "mean": "mean", "avg": "mean", "average": "mean",
    "median": "median", "mdn": "median",
    "std": "std", "std_dev": "std", "stddev": "std", "stdev": "std",
    "min": "min", "max": "max",
}
_PCT = re.compile(r"^p(\d+(?:\.\d+)?)$", re.I)


def stat_key(name: str) -> str | None:
    """'avg' → 'mean', 'P99' → 'p99', 'p99.9' → 'p99.9'; GuideLLM's zero-padded
    'p001'/'p01'/'p05'/'p999' → 'p0.1'/'p1'/'p5'/'p99.9'; anything else → None."""
    low = name.strip().lower()
    if low in _STAT_WORDS:
        return _STAT_WORDS[low]
    m = _PCT.match(low)
    if not m:
        return None
    d = m.group(1)
    if d == "999":  # GuideLLM: 99.9th
        d = "99.9"
    elif d.startswith("00") and d.isdigit():  # GuideLLM p001: 0.1th
        d = "0." + d[2:]
    elif d.startswith("0") and d.isdigit() and len(d) > 1:  # GuideLLM p01, p05
        d = d.lstrip("0")
    try:
        if not 0 <= float(d) <= 100:
            return None
    except ValueError:
        return None
    return "p" + d


def stats(src: Any, scale: float = 1.0) -> dict[str, float]:
    """A {statistic: value} mapping (GenAI-Perf/AIPerf/GuideLLM style, percentiles
    possibly nested under 'percentiles') → {'mean': …, 'p99': …} times `scale`."""
    out: dict[str, float] = {}
    if not isinstance(src, Mapping):
        return out
    items = list(src.items())
    if isinstance(src.get("percentiles"), Mapping):
        items += list(src["percentiles"].items())
    for k, v in items:
        key = stat_key(str(k))
        val = num(v)
        if key and val is not None:
            out[key] = val * scale
    return with_median(out)


def flat_stats(doc: Mapping, metric: str) -> dict[str, float]:
    """vLLM/sglang flat keys: mean_ttft_ms, p99_ttft_ms, std_ttft_ms → a stats dict."""
    pat = re.compile(rf"^([a-z]+|p\d+(?:\.\d+)?)_{re.escape(metric)}_ms$")
    out: dict[str, float] = {}
    for k, v in doc.items():
        m = pat.match(str(k))
        key = stat_key(m.group(1)) if m else None
        val = num(v)
        if key and val is not None:
            out[key] = val
    return with_median(out)


def with_median(d: dict[str, float]) -> dict[str, float]:
    """p50 is the median: fill 'median' from it so runs of all tools compare."""
    if "median" not in d and "p50" in d:
        d["median"] = d["p50"]
    return d


_MS_PER = {"ns": 1e-6, "us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1000.0, "sec": 1000.0,
           "secs": 1000.0, "second": 1000.0, "seconds": 1000.0}


def ms_scale(unit: Any, default: float = 1.0) -> float | None:
    """Factor turning a value in `unit` into milliseconds; None for a non-time unit."""
    if unit is None or unit == "":
        return default
    return _MS_PER.get(str(unit).strip().lower())


# ---------------------------------------------------------------- documents


def dig(doc: Any, *paths: str) -> Any:
    """The first value found at one of the dotted paths, else None."""
    for path in paths:
        cur = doc
        for part in path.split("."):
            if isinstance(cur, Mapping) and part in cur:
                cur = cur[part]
            elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
                cur = cur[int(part)]
            else:
                cur = None
                break
        if cur is not None:
            return cur
    return None


def scalars(doc: Mapping, skip: set[str] | frozenset[str]) -> dict[str, Any]:
    """The document's top-level plain values (tool args, --metadata tags) except
    `skip`; arrays and objects (per-request data) are left out."""
    return {str(k): v for k, v in doc.items()
            if k not in skip and (v is None or isinstance(v, (str, int, float, bool)))
            and not (isinstance(v, float) and math.isnan(v))}


# The keys only one of the two `bench_serving` descendants writes (read from
# sglang python/sglang/bench_serving.py and vllm vllm/benchmarks/serve.py).
SGLANG_KEYS = frozenset({"server_info", "accept_length", "mean_e2e_latency_ms",
                         "total_output_tokens_retokenized", "output_throughput_retokenized"})
VLLM_KEYS = frozenset({"model_id", "tokenizer_id", "endpoint_type", "date", "burstiness",
                       "mean_e2el_ms", "total_token_throughput"})
_THROUGHPUT_KEYS = ("request_throughput", "output_throughput", "total_token_throughput",
                    "total_throughput", "input_throughput")


def serving_flavour(doc: Any) -> str | None:
    """'sglang' or 'vllm' for one result object of `bench_serving`, else None.

    Both tools descend from vLLM's old benchmark_serving.py and share most keys;
    sglang alone writes server_info/accept_length/e2e_latency/retokenized keys,
    vLLM alone model_id/date/burstiness/e2el/total_token_throughput."""
    if not isinstance(doc, Mapping):
        return None
    # GenAI-Perf/AIPerf use some of the same names, but for {"unit", "avg"} objects.
    if not any(k in doc and not isinstance(doc[k], (Mapping, list)) for k in _THROUGHPUT_KEYS):
        return None
    if any(k in doc for k in SGLANG_KEYS):
        return "sglang"
    if any(k in doc for k in VLLM_KEYS):
        return "vllm"
    if "backend" in doc and "dataset_name" in doc:
        return "sglang"
    return None


# ---------------------------------------------------------------- records


def make_run(path: str, line: int | None, **fields: Any) -> BenchRun:
    """A BenchRun from the fields that were read (None and empty values dropped)."""
    data = {k: v for k, v in fields.items() if v is not None and v != {}}
    if "server_args" in data:  # a server's arguments and the tool's --metadata tags may hold credentials
        data["server_args"] = redact_data(data["server_args"])
    try:
        return BenchRun(source=Where(path=str(path), line=line), **data)
    except ValidationError as e:  # a bug here, not in the input: still name the file
        raise InputError(path, f"cannot build a benchmark run: {e.errors()[0]['msg']}", line) from None


def has_throughput(run: BenchRun) -> bool:
    return any(x is not None for x in (run.request_throughput, run.output_throughput,
                                       run.total_throughput, run.input_throughput))


def per_request(total: Any, completed: int | None) -> float | None:
    """Mean tokens per request from a total and the completed count."""
    t = num(total)
    return t / completed if t is not None and completed else None


def guarded(kind: str) -> Callable:
    """Safety net for reader entry points: anything but InputError becomes an
    InputError naming the file (and line), so one odd file never crashes `kb`."""

    def wrap(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def inner(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except InputError:
                raise
            except Exception as e:  # noqa: BLE001 - converted, not swallowed
                path, line = _where(args, kwargs)
                raise InputError(path, f"{kind}: could not read ({type(e).__name__}: {e})", line) from e

        return inner

    return wrap


def _where(args: tuple, kwargs: dict) -> tuple[str, int | None]:
    """(path, line) from a JsonReader.read(doc, path, line) call or a LineParser method."""
    if args and hasattr(args[0], "path"):  # LineParser method: self.path, feed(lineno, …)
        line = args[1] if len(args) > 1 and isinstance(args[1], int) else None
        return str(args[0].path), line
    path = kwargs.get("path", args[1] if len(args) > 1 else "?")
    line = kwargs.get("line", args[2] if len(args) > 2 else None)
    return str(path), line if isinstance(line, int) else None
