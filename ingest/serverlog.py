"""What the sglang and vLLM log parsers share: line prefixes, `key: value` fields,
python-repr argument dumps, MoE config file names, and the bounded bookkeeping
(down-sampled samples, capped events, exact aggregates) behind a ServerTrace.

Both engines print one periodic stats line as `key: value, key: value, ...`, so
one splitter reads both, and a new field in a later version is kept rather than
breaking a pattern."""

from __future__ import annotations

import ast
import math
import re
from typing import Any

from kb.records import Event, Sample, ServerTrace, Where
from kb.redact import redact, redact_data, redact_text  # noqa: F401 - the parsers import redact from here too

MAX_SAMPLES = 2000
EVENTS_PER_KIND = 50
MAX_TEXT = 400  # characters of a line kept in an Event
MAX_RANKS = 256
MAX_EXTRA = 64  # distinct unknown stats fields (a damaged log could invent one per line)

# sglang: "[2025-09-02 14:19:42 TP0] ", "[2025-05-13 23:29:46 DP4 TP4] ", "[2026-08-23 09:06:20 TP0 EP0] "
_SGL_PREFIX = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?)((?: [A-Z]{2,4}\d+)*)\]")
# vLLM: "INFO 09-02 14:19:42 [loggers.py:123] " and the older "INFO 07-08 07:17:34 metrics.py:334] "
_VLLM_PREFIX = re.compile(r"\b(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)? ")
# a docker/kubectl --timestamps prefix or any other ISO time
_ISO_TIME = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?Z?")
_NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+]?\.\d+")


def line_time(line: str) -> tuple[str | None, str | None]:
    """(time as logged, sglang rank tag such as "DP0 TP0") from a line's prefix."""
    m = _SGL_PREFIX.match(line) if line.startswith("[") else None
    if m is None and "] " in line:
        m = _SGL_PREFIX.search(line, 0, 200)
    if m:
        return m.group(1), (m.group(2).strip() or None)
    m = _VLLM_PREFIX.search(line, 0, 200)
    if m:
        return m.group(1), None
    m = _ISO_TIME.search(line, 0, 64)
    return (m.group(0) if m else None), None


def split_fields(text: str) -> dict[str, str]:
    """`#running-req: 5, token usage: 0.41, cuda graph: True` → {key: raw value}."""
    out: dict[str, str] = {}
    for part in text.split(", "):
        key, sep, value = part.partition(": ")
        if sep:
            out[key.strip()] = value.strip()
    return out


def num(value: str | None) -> float | None:
    """The leading number of a field value: "95.9%" → 95.9, "18 reqs" → 18, "2,042,016 tokens" → 2042016.
    nan and inf count as no value (they would poison maxima and means)."""
    if not value:
        return None
    head = value.split(None, 1)[0].rstrip("%.,x") if " " in value or value[-1] in "%.,x" else value
    try:
        v = float(head)  # the common case, much faster than the pattern
    except ValueError:
        m = _NUMBER.match(value.strip())
        if not m:
            return None
        try:
            v = float(m.group(0).replace(",", ""))
        except ValueError:
            return None
    return v if math.isfinite(v) else None


def as_int(value: str | None) -> int | None:
    v = num(value)
    return int(v) if v is not None else None


def as_bool(value: str | None) -> bool | None:
    if value is None:
        return None
    v = value.strip().rstrip(",.")
    return True if v == "True" else False if v == "False" else None


# ---------------------------------------------------------------- argument dumps

def split_top(text: str, sep: str = ",") -> list[str]:
    """Split on `sep` outside brackets and quotes (a repr holds lists, dicts and strings)."""
    parts, depth, quote, start, i = [], 0, "", 0, 0
    n = len(text)
    while i < n:
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == sep and depth <= 0:
            parts.append(text[start:i])
            start = i + 1
        i += 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def literal(text: str) -> Any:
    """A python literal when it is one (never eval); otherwise the text itself."""
    t = text.strip()
    try:
        return jsonable(ast.literal_eval(t))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return t[:300]


def jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, (set, frozenset)):
        return sorted((jsonable(x) for x in v), key=str)
    if isinstance(v, (bytes, complex)):
        return str(v)
    return v


def parse_call_args(text: str) -> dict[str, Any]:
    """`ServerArgs(a=1, b='x')`, `Namespace(...)` or `a=1, b=x` → {a: 1, b: 'x'}.
    Values that are not literals (enums, nested reprs) are kept as their text."""
    m = re.match(r"\s*[A-Za-z_][\w.]*\((.*)\)\s*$", text, re.S)
    body = m.group(1) if m else text
    out: dict[str, Any] = {}
    for part in split_top(body):
        key, sep, value = part.partition("=")
        key = key.strip()
        if sep and re.fullmatch(r"[A-Za-z_]\w*", key):
            out[key] = redact(key, literal(value))
    return out


def parse_dict_repr(text: str) -> dict[str, Any]:
    """`{'model': 'x', 'tp': 2}` → dict; item by item when the whole is not a literal."""
    t = text.strip()
    whole = literal(t)
    if isinstance(whole, dict):
        return {k: redact(k, v) for k, v in whole.items()}
    out: dict[str, Any] = {}
    for part in split_top(t.strip("{}")):
        key, sep, value = part.partition(":")
        if sep:
            k = str(literal(key))
            out[k] = redact(k, literal(value))
    return out


# ---------------------------------------------------------------- MoE config file names

_CONFIG_NAME = re.compile(r"(?<![\w=])(?:E=\d+,)?N=\d+,")  # where a config file name starts
_CONFIG_FIELD = re.compile(
    r"(?:^|,)(E|N|K|device_name|dtype|block_shape|per_channel_quant)=(\[[^\]]*\]|[^,]+?)"
    r"(?=,[A-Za-z_]+=|_down\.json$|\.json$)"
)


def moe_config_data(text: str) -> dict[str, Any]:
    """Fields of the tuned-config file a 'Config file not found at ...' line names:
    E=257,N=256,device_name=...,dtype=fp8_w8a8,block_shape=[128, 128].json → {E, N, ...}.
    Found by plain scanning, not one big pattern, so a pathological line stays linear."""
    text = text[:8192]
    m = _CONFIG_NAME.search(text)
    end = text.find(".json", m.end()) if m else -1
    if end < 0:
        return {}  # no file name, or one cut by a wrapped line
    start = m.start()
    while start > 0 and text[start - 1] not in " \t'\"[":
        start -= 1
    path = text[start: end + len(".json")]
    data: dict[str, Any] = {"path": path}
    name = path.rsplit("/", 1)[-1]
    for key, value in _CONFIG_FIELD.findall(name):
        if key in ("E", "N", "K"):
            data[key] = as_int(value)
        elif key == "block_shape":
            data[key] = literal(value)
        else:
            data[key] = value
    if name.endswith("_down.json"):
        data["down"] = True
    tv = re.search(r"/triton_(\d+_\d+_\d+)/", path)
    if tv:
        data["triton_version"] = tv.group(1).replace("_", ".")
    return data


# ---------------------------------------------------------------- errors

OOM = re.compile(r"out of memory|OutOfMemoryError|Not enough memory|CUDA_ERROR_OUT_OF_MEMORY", re.I)
ERROR = re.compile(
    r"\bCUDA error\b|NCCL error|Traceback \(most recent call last\)|Scheduler hit an exception"
    r"|EngineDeadError|EngineCore encountered a fatal error|Capture cuda graph failed"
    r"|^(?:\S+ )?(?:[A-Za-z_.]*(?:Error|Exception)): "
)


def error_kind(line: str) -> str | None:
    """"oom" or "error" for a line that reports one (an OOM inside a traceback is an oom)."""
    if "rror" not in line and "emory" not in line and "xception" not in line and "Traceback" not in line:
        return None  # fast path for the many ordinary lines
    # every OOM phrase holds "memory" in some case; a case-blind search of a long line costs far more
    if "memory" in line.lower() and OOM.search(line):
        return "oom"
    if ERROR.search(line):
        return "error"
    return None


# ---------------------------------------------------------------- bounded bookkeeping


class LineSampler:
    """Keeps every k-th item, doubling k (and halving what it holds) when full, so a
    log of any length leaves at most `cap` evenly spread items."""

    def __init__(self, cap: int = MAX_SAMPLES):
        self.cap, self.stride, self.seen = cap, 1, 0
        self.items: list = []

    def add(self, item) -> None:
        if self.seen % self.stride == 0:
            self.items.append(item)
            if len(self.items) >= self.cap:
                self.items = self.items[::2]
                self.stride *= 2
        self.seen += 1


class EventLog:
    """Events kept in full for the first `per_kind` of each kind; every one counted."""

    def __init__(self, path: str, per_kind: int = EVENTS_PER_KIND):
        self.path, self.per_kind = path, per_kind
        self.counts: dict[str, int] = {}
        self.events: list[Event] = []

    def add(self, kind: str, lineno: int, line: str, data: dict | None = None, count: int = 1) -> None:
        """One line; `count` events when the line reports several (a stats line's counter)."""
        n = self.counts.get(kind, 0)
        self.counts[kind] = n + count
        if n < self.per_kind:
            # redacted before the cut, so a credential cannot be cut into an unrecognisable
            # stub; a credential is far shorter than the 4 KiB looked at past the cut
            text = redact_text(line.strip()[: MAX_TEXT + 4096])
            text = text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + "…"
            self.events.append(Event(kind=kind, where=Where(path=self.path, line=lineno), text=text,
                                     data=redact_data(data or {})))


class SampleStats:
    """Exact aggregates over every sample, whatever the sampler keeps.
    Load figures (running, queue) come from decode lines (sglang) and periodic
    stats lines (vLLM); prefill lines only add their token counts."""

    def __init__(self):
        self.n = {"decode": 0, "prefill": 0, "stats": 0}
        self.load = 0  # decode + stats samples
        self.running_sum = 0
        self.running_n = 0
        self.running_max: int | None = None
        self.queued_max: int | None = None
        self.queue_known = 0
        self.queue_nonzero = 0
        self.token_usage_max: float | None = None
        self.graph_false = 0
        self.graph_false_running_max: int | None = None
        self.gen_max: float | None = None
        self.gen_sum = 0.0
        self.gen_n = 0
        self.prompt_max: float | None = None
        self.accept_sum = 0.0
        self.accept_n = 0
        self.accept_max: float | None = None
        self.extra_max: dict[str, float] = {}
        self.ranks: set[str] = set()

    def observe(self, s: Sample, rank: str | None = None) -> None:
        self.n[s.kind] += 1
        if rank and len(self.ranks) < MAX_RANKS:
            self.ranks.add(rank)
        self.token_usage_max = _max(self.token_usage_max, s.token_usage)
        self.prompt_max = _max(self.prompt_max, s.prompt_throughput)
        if s.accept_len is not None:
            self.accept(s.accept_len)
        if s.kind == "prefill":
            return
        self.load += 1
        if s.running is not None:
            self.running_sum += s.running
            self.running_n += 1
            self.running_max = _max(self.running_max, s.running)
        if s.queued is not None:
            self.queue_known += 1
            self.queue_nonzero += s.queued > 0
            self.queued_max = _max(self.queued_max, s.queued)
        if s.cuda_graph is False:
            self.graph_false += 1
            self.graph_false_running_max = _max(self.graph_false_running_max, s.running)
        if s.gen_throughput is not None:
            self.gen_max = _max(self.gen_max, s.gen_throughput)
            self.gen_sum += s.gen_throughput
            self.gen_n += 1

    def accept(self, value: float) -> None:
        """A speculative-decoding acceptance length (vLLM logs it on a line of its own)."""
        self.accept_sum += value
        self.accept_n += 1
        self.accept_max = _max(self.accept_max, value)

    def extra(self, key: str, value: float | None) -> None:
        """Maximum of a field kb has no Sample slot for (#prealloc-req, Swapped, ...)."""
        if value is not None and (key in self.extra_max or len(self.extra_max) < MAX_EXTRA):
            self.extra_max[key] = max(self.extra_max.get(key, value), value)

    def as_dict(self) -> dict:
        d = {
            "samples": sum(self.n.values()),
            "decode_samples": self.n["decode"],
            "prefill_samples": self.n["prefill"],
            "stats_samples": self.n["stats"],
            "running_max": self.running_max,
            "running_mean": round(self.running_sum / self.running_n, 3) if self.running_n else None,
            "queued_max": self.queued_max,
            "queue_nonzero_frac": round(self.queue_nonzero / self.queue_known, 4) if self.queue_known else None,
            "token_usage_max": self.token_usage_max,
            "cuda_graph_false": self.graph_false,
            "cuda_graph_false_running_max": self.graph_false_running_max,
            "gen_throughput_max": self.gen_max,
            "gen_throughput_mean": round(self.gen_sum / self.gen_n, 3) if self.gen_n else None,
            "prompt_throughput_max": self.prompt_max,
            "accept_len_mean": round(self.accept_sum / self.accept_n, 3) if self.accept_n else None,
            "accept_len_max": self.accept_max,
        }
        if self.extra_max:
            d["extra_max"] = dict(sorted(self.extra_max.items()))
        if self.ranks:
            d["ranks"] = sorted(self.ranks)
        return d


def _max(a, b):
    if b is None:
        return a
    return b if a is None or b > a else a


class ServerLogBase:
    """A LineParser that turns one engine's log into one ServerTrace.
    Subclasses implement `handle(lineno, line)` and set `self.recognised` when a
    line is unmistakably their engine's (generic lines like OOMs alone are not)."""

    kind = ""
    engine = ""

    def __init__(self, path: str) -> None:
        self.path = str(path)
        self.recognised = False
        self.version: str | None = None
        self.startup: dict = {}
        self.server_args: dict = {}
        self.args_text = ""  # the argument dump last parsed
        self.sampler = LineSampler()
        self.stats = SampleStats()
        self.events = EventLog(self.path)
        self.lines = 0
        self.skipped = 0
        self.extra_stats: dict = {}

    def feed(self, lineno: int, line: str) -> None:
        self.lines += 1
        try:
            self.handle(lineno, line)
        except (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError):
            self.skipped += 1  # a garbled line is skipped, never fatal

    def handle(self, lineno: int, line: str) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def add_sample(self, s: Sample, rank: str | None = None) -> None:
        self.recognised = True
        self.stats.observe(s, rank)
        self.sampler.add(s)

    def error_event(self, lineno: int, line: str) -> bool:
        kind = error_kind(line)
        if kind:
            self.events.add(kind, lineno, line)
        return kind is not None

    def results(self) -> list[ServerTrace]:
        if not self.recognised:
            return []
        stats = self.stats.as_dict()
        stats.update(self.extra_stats)
        stats["events"] = dict(sorted(self.events.counts.items()))
        stats["lines"] = self.lines
        stats["sample_stride"] = self.sampler.stride
        if self.skipped:
            stats["skipped_lines"] = self.skipped
        return [ServerTrace(
            engine=self.engine, engine_version=self.version, source=self.path,
            startup=dict(self.startup), server_args=redact_data(self.server_args),
            samples=list(self.sampler.items), stats=stats, events=list(self.events.events),
            lines=self.lines,
        )]
